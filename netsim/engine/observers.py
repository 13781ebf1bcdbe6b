"""What the reference executor records about the links as it runs: loads, busy time, peaks, the
per-bin link series and offered load (congestion). The compiled executor keeps the same figures in
its arrays (:mod:`netsim.engine.dag`)."""

from __future__ import annotations

import math

import numpy as np


class LinkSeries:
    """Bytes each link carried per time bin, with at most ``bins`` bins over the run.

    The horizon is not known in advance: bins start 1 µs wide and double (neighbours merged) when
    the simulation outgrows them, so the resolution ends between horizon/bins and 2 x that. Only
    links that carry something get a row.
    """

    def __init__(self, bins: int):
        self.bins = int(bins)
        self.width = 1e-6
        self.limit = self.bins * self.width
        self.rows: dict[int, list[float]] = {}

    def _grow(self, t: float) -> None:
        while t > self.limit:
            self.width *= 2
            self.limit = self.bins * self.width
            for link, row in self.rows.items():
                merged = [sum(row[k:k + 2]) for k in range(0, self.bins, 2)]
                self.rows[link] = merged + [0.0] * (self.bins - len(merged))

    def add(self, link: int, t0: float, t1: float, load_Bps: float) -> None:
        """``load_Bps`` carried on ``link`` during ``[t0, t1)``."""
        if t1 <= t0:
            return
        if t1 > self.limit:
            self._grow(t1)
        row = self.rows.get(link)
        if row is None:
            row = self.rows[link] = [0.0] * self.bins
        w = self.width
        i1 = min(int(t1 / w), self.bins - 1)
        i0 = int(t0 / w)
        if i0 >= i1:
            row[i1] += load_Bps * (t1 - t0)
            return
        row[i0] += load_Bps * ((i0 + 1) * w - t0)
        full = load_Bps * w
        for k in range(i0 + 1, i1):
            row[k] += full
        row[i1] += load_Bps * (t1 - i1 * w)

    def utilisation(self, capacity_Bps: np.ndarray, horizon_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(link ids, bin start times, mean utilisation [link, bin])`` up to ``horizon_s``."""
        n = max(1, min(self.bins, math.ceil(horizon_s / self.width - 1e-9)))
        starts = np.arange(n) * self.width
        widths = np.minimum(starts + self.width, max(horizon_s, 1e-300)) - starts
        links = np.array(sorted(self.rows), dtype=np.int64)
        if not len(links):
            return links, starts, np.zeros((0, n))
        data = np.array([self.rows[int(lk)][:n] for lk in links])
        with np.errstate(divide="ignore", invalid="ignore"):
            util = data / (capacity_Bps[links][:, None] * np.where(widths > 0, widths, np.nan)[None, :])
        return links, starts, np.nan_to_num(util)


class LinkLoads:
    """Per link: load as last solved, busy time, when the load last changed, peak load / nominal, and
    the link series; lists, not arrays (perf: a flush touches a handful of links, and scalar list
    access is ~10x cheaper than numpy scalar indexing)."""

    def __init__(self, nominal_Bps: np.ndarray, series: LinkSeries | None):
        n = len(nominal_Bps)
        self.nominal = nominal_Bps.tolist()
        self.load = [0.0] * n
        self.busy = [0.0] * n
        self.since = [0.0] * n
        self.peak = [0.0] * n
        self.bytes = [0.0] * n
        self.series = series

    def set(self, pairs, now: float) -> None:
        """New loads ``(link, load)`` from ``now``: close their busy intervals; a load a link carried
        for a positive time raises its peak (one replaced within its instant never did)."""
        load_, since, busy, peak, nominal, series = (self.load, self.since, self.busy, self.peak, self.nominal,
                                                     self.series)
        for link, load in pairs:
            old = load_[link]
            if old > 0 and now > since[link]:
                busy[link] += now - since[link]
                if series is not None:
                    series.add(link, since[link], now, old)
                util = old / nominal[link]
                peak[link] = max(peak[link], util)
            since[link] = now
            load_[link] = load

    def finalize(self, now: float) -> None:
        """Close every busy interval at ``now`` (and count its load for the peak)."""
        for link, load in enumerate(self.load):
            if load > 0 and now > self.since[link]:
                self.busy[link] += now - self.since[link]
                if self.series is not None:
                    self.series.add(link, self.since[link], now, load)
                util = load / self.nominal[link]
                self.peak[link] = max(self.peak[link], util)
                self.since[link] = now


class OfferedLoad:
    """Offered load on switch-to-switch links under the policy and under ideal spraying, with its peak
    (``Fabric.offered_peak``). Changes are netted per pairs object within a flush and applied once,
    in the order the pairs were first touched, so a message replaced by the next one on the same
    routes costs nothing."""

    def __init__(self, nominal_Bps: np.ndarray):
        n = len(nominal_Bps)
        self.nominal = nominal_Bps.tolist()
        self.offered, self.peak = [0.0] * n, [0.0] * n
        self.spray, self.spray_peak = [0.0] * n, [0.0] * n
        self.since, self.spray_since = [0.0] * n, [0.0] * n
        self._pending: dict[int, list] = {}
        self._spray_pending: dict[int, list] = {}

    @staticmethod
    def _note(pairs, demand: float, sign: float, pending: dict[int, list]) -> None:
        entry = pending.get(id(pairs))
        if entry is None:
            pending[id(pairs)] = [pairs, sign * demand]
        else:
            entry[1] += sign * demand

    def offer(self, pairs, demand: float, sign: float) -> None:
        """``sign * demand`` more on the policy's ``pairs`` ((link, weight), cached: ids are stable)."""
        self._note(pairs, demand, sign, self._pending)

    def offer_spray(self, pairs, demand: float, sign: float) -> None:
        """The same for the sprayed counterfactual."""
        self._note(pairs, demand, sign, self._spray_pending)

    @property
    def pending(self) -> bool:
        return bool(self._pending or self._spray_pending)

    def apply(self, now: float) -> None:
        """Apply the flush's changes. An offered load a link had for a positive time raises its peak;
        one replaced within its instant never does."""
        nominal = self.nominal
        for pending, offered, peaks, since in ((self._pending, self.offered, self.peak, self.since),
                                               (self._spray_pending, self.spray, self.spray_peak, self.spray_since)):
            for pairs, amount in pending.values():
                if amount == 0.0:
                    continue
                for lk, w in pairs:
                    if now > since[lk]:
                        if offered[lk] > peaks[lk] * nominal[lk]:
                            peaks[lk] = offered[lk] / nominal[lk]
                        since[lk] = now
                    offered[lk] = offered[lk] + w * amount
            pending.clear()

    def finalize(self, now: float) -> None:
        """Count the offered loads held until ``now`` for the peaks."""
        for offered, peaks, since in ((self.offered, self.peak, self.since),
                                      (self.spray, self.spray_peak, self.spray_since)):
            for lk, load in enumerate(offered):
                if load > 0 and now > since[lk]:
                    if load > peaks[lk] * self.nominal[lk]:
                        peaks[lk] = load / self.nominal[lk]
                    since[lk] = now

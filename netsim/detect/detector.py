"""A C4D-style detector: after every iteration, compare each connection and each rank with its peers
and rank the GPUs, NICs, cables and switches by how much of the observed slowness they explain.

**Connections.** Within a peer group (collective calls running together) every connection of a
ring or tree carries the same bytes at the same time, so a healthy connection's throughput is its
fair share (``share``): its max-min fair rate with every connection of the group active at once on
the nominal fabric (the engine's solver over the known routes and datasheet capacities). The ratio
``throughput / share`` is compared with the group's reference ratio (its 75th percentile, so that
up to a quarter of the group may be slow without hiding itself, and at most 1: a connection whose
peers idled part of the time gets more than its share); ``slowness = 1 - ratio / reference``.
Connections inside a host (NVLink) are not compared: no network suspect is on their path; nor are
point-to-point sends outside collective calls (pipeline activations): they have no peers.

**Ranks.** A training process whose compute took longer than its peers' (same pipeline stage) is
the one they all wait for at the gradient synchronisation: ``slowness = 1 - median / compute``.

**Votes.** A connection slower than ``threshold`` (in the last ``persist`` iterations in a row)
votes for every suspect on its path. A suspect's score is its *purity* (the mean slowness over
every connection of the iteration that crosses it: healthy connections through it dilute it) times
its *coverage* (the share of the slow connections it lies on): a degraded cable crossed only by
slow connections scores about its severity, the switch it hangs off is diluted by the healthy
traffic through it, and the NIC at one end covers only that NIC's share of the slow connections. A
slow rank scores its slowness for each GPU of its TP group (they compute in lockstep, so they tie).
An iteration raises an alarm when any connection or rank counts as slow; the ranking after
iteration ``k`` sums the scores of the alarmed iterations up to ``k``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from netsim.detect.components import Component, Components
from netsim.detect.telemetry import Telemetry
from netsim.solver import progressive_filling

#: Quantile of a peer group's throughput ratios taken as the healthy reference.
REFERENCE_QUANTILE = 0.75
#: Fewest network connections a peer group needs to be compared within itself (else: the iteration's).
MIN_PEERS = 3
#: Scores this close (relative) are a tie: the evidence cannot tell the suspects apart.
TIE_RTOL = 1e-6


@dataclass(frozen=True)
class Verdict:
    """The detector's output after one iteration."""

    iteration: int
    alarm: bool                                 #: a connection or rank slower than the threshold
    ranking: list[tuple[Component, float]]      #: suspects by cumulative score, best first
    scores: dict[Component, float] = field(default_factory=dict)  #: this iteration's scores
    slow_connections: int = 0
    slow_ranks: int = 0

    def rank_of(self, component: Component) -> float:
        """1-based place of ``component`` in the ranking, the best of its ties (NaN when it has no score)."""
        score = dict(self.ranking).get(component)
        if score is None:
            return float("nan")
        return float(1 + sum(1 for _c, s in self.ranking if s > score * (1 + TIE_RTOL)))

    def hit(self, component: Component, k: int) -> float:
        """Chance that ``component`` is among the first ``k`` when ties are broken at random: 1 when
        it is there outright, ``(k - ahead) / tied`` when its ties straddle place ``k``, else 0."""
        score = dict(self.ranking).get(component)
        if score is None:
            return 0.0
        ahead = sum(1 for _c, s in self.ranking if s > score * (1 + TIE_RTOL))
        tied = sum(1 for _c, s in self.ranking if abs(s - score) <= score * TIE_RTOL)
        return float(min(max((k - ahead) / tied, 0.0), 1.0))


class Detector:
    """Scores suspects from :class:`~netsim.detect.telemetry.Telemetry` (see the module docstring).

    Parameters
    ----------
    components:
        The suspects of the run's topology.
    threshold:
        Slowness relative to peers above which a connection or rank is slow (default 0.2).
    persist:
        Iterations in a row a connection or rank must be slow before it counts (default 1: at once);
        more filters out noise at the price of detecting later.
    """

    def __init__(self, components: Components, threshold: float = 0.2, persist: int = 1):
        self.components = components
        self.threshold = float(threshold)
        self.persist = int(persist)
        self._paths: dict[str, tuple[Component, ...]] = {}

    def _suspects(self, telemetry: Telemetry, connection: str) -> tuple[Component, ...]:
        if connection not in self._paths:
            pieces = telemetry.routes.get(connection, [])
            self._paths[connection] = self.components.on_path(np.concatenate([p[0] for p in pieces])
                                                              if pieces else [])
        return self._paths[connection]

    def connection_slowness(self, telemetry: Telemetry, iteration: int) -> pd.DataFrame:
        """Network connections of ``iteration``: their fair share, throughput ratio and slowness."""
        conns = telemetry.connections
        conns = conns[(conns["iteration"] == iteration) & (conns["group"] >= 0)]
        conns = conns[[bool(self._suspects(telemetry, c)) for c in conns["connection"]]]
        if not len(conns):
            return conns.assign(share_Bps=[], ratio=[], slowness=[])
        share = np.empty(len(conns))
        groups = conns["group"].to_numpy()
        for g in np.unique(groups):
            members = np.flatnonzero(groups == g)
            share[members] = self._fair_shares(telemetry, conns["connection"].to_numpy()[members])
        out = conns.assign(share_Bps=share, ratio=conns["throughput_Bps"].to_numpy() / share)
        out["slowness"] = np.clip(1.0 - out["ratio"] / self._reference(out), 0.0, 1.0)
        return out

    @staticmethod
    def _fair_shares(telemetry: Telemetry, connections) -> np.ndarray:
        """Max-min fair rates of ``connections`` all active together on the nominal fabric."""
        idx, links, frac = [], [], []
        for i, c in enumerate(connections):
            for piece_links, share in telemetry.routes[c]:
                idx.append(np.full(len(piece_links), i))
                links.append(piece_links)
                frac.append(share)
        entries = pd.DataFrame({"flow": np.concatenate(idx), "link": np.concatenate(links),
                                "weight": np.concatenate(frac)}).groupby(["flow", "link"], as_index=False).sum()
        used, local = np.unique(entries["link"].to_numpy(), return_inverse=True)
        return progressive_filling(entries["flow"].to_numpy(), local, entries["weight"].to_numpy(dtype=float),
                                   telemetry.nominal_Bps[used], len(connections))

    @staticmethod
    def _reference(conns: pd.DataFrame) -> np.ndarray:
        """Each connection's reference ratio: its peer group's quantile, or the iteration's when the group is small."""
        overall = conns["ratio"].quantile(REFERENCE_QUANTILE)
        per_group = conns.groupby("group")["ratio"].transform(lambda r: r.quantile(REFERENCE_QUANTILE))
        size = conns.groupby("group")["ratio"].transform("size")
        # a ratio above 1 is a connection faster than its all-active fair share (its peers were idle
        # part of the time): the expectation is the share itself, never more
        return np.minimum(np.where(size >= MIN_PEERS, per_group, overall), 1.0)

    def rank_slowness(self, telemetry: Telemetry, iteration: int) -> pd.DataFrame:
        """Training processes of ``iteration`` with their compute slowness against their stage's median."""
        ranks = telemetry.ranks[telemetry.ranks["iteration"] == iteration]
        if len(ranks) < 2:
            return ranks.assign(slowness=np.zeros(len(ranks)))
        median = ranks.groupby("stage")["compute_s"].transform("median")
        slow = 1.0 - median / ranks["compute_s"].where(ranks["compute_s"] > 0)
        return ranks.assign(slowness=slow.fillna(0.0).clip(lower=0.0))

    def score(self, telemetry: Telemetry, iteration: int, streaks: dict | None = None
              ) -> tuple[dict[Component, float], int, int]:
        """This iteration's suspect scores, slow connections and slow ranks.

        ``streaks`` (connection label or ``(stage, replica)`` -> iterations slow in a row, updated
        here) lets only what has been slow ``persist`` iterations in a row count as slow.
        """
        streaks = {} if streaks is None else streaks
        conns = self.connection_slowness(telemetry, iteration)
        slow_c = self._persistent(streaks, conns["connection"].tolist(), conns["slowness"].to_numpy())
        scores: dict[Component, float] = {}
        if slow_c.any():
            total: dict[Component, list[float]] = {}
            for c, s, slow in zip(conns["connection"], conns["slowness"], slow_c):
                for comp in self._suspects(telemetry, c):
                    entry = total.setdefault(comp, [0, 0.0, 0])
                    entry[0] += 1
                    if slow:
                        entry[1] += s
                        entry[2] += 1
            for comp, (n, slowness, k) in total.items():
                if k:
                    scores[comp] = slowness / n * k / int(slow_c.sum())
        ranks = self.rank_slowness(telemetry, iteration)
        slow_r = self._persistent(streaks, list(zip(ranks["stage"], ranks["replica"])),
                                  ranks["slowness"].to_numpy(dtype=float))
        for gpus, s in zip(ranks["gpus"][slow_r], ranks["slowness"][slow_r]):
            for g in gpus:
                comp = self.components.gpu(g)
                scores[comp] = max(scores.get(comp, 0.0), float(s))
        return scores, int(slow_c.sum()), int(slow_r.sum())

    def _persistent(self, streaks: dict, keys: list, slowness: np.ndarray) -> np.ndarray:
        """Which of ``keys`` count as slow now: above the threshold in the last ``persist`` iterations
        they were measured in."""
        out = np.zeros(len(keys), dtype=bool)
        for i, (key, s) in enumerate(zip(keys, slowness.tolist())):
            streaks[key] = streaks.get(key, 0) + 1 if s > self.threshold else 0
            out[i] = streaks[key] >= self.persist
        return out

    def run(self, telemetry: Telemetry) -> list[Verdict]:
        """One :class:`Verdict` per iteration, in order."""
        cumulative: dict[Component, float] = {}
        streaks: dict = {}
        out = []
        for iteration in telemetry.iterations["iteration"].tolist():
            scores, slow_conns, slow_ranks = self.score(telemetry, iteration, streaks)
            alarm = bool(slow_conns or slow_ranks)
            if alarm:
                for comp, s in scores.items():
                    cumulative[comp] = cumulative.get(comp, 0.0) + s
            ranking = sorted(cumulative.items(), key=lambda cs: (-cs[1], cs[0]))
            out.append(Verdict(int(iteration), alarm, ranking, scores, slow_conns, slow_ranks))
        return out

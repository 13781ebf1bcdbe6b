"""What a run of the compiled executor leaves: link counters, offered-load peaks, per-connection bytes,
flow records as columns (a mixin of :class:`netsim.engine.core.CompiledCore`, which holds the arrays)."""

from __future__ import annotations

import numpy as np

from netsim.engine import dag
from netsim.engine.dag import (
    CF_DELIVERED,
    CF_POSTED,
    CI_HEAD,
    CI_QPS,
    CI_ROUTE,
    FV_NOW,
    IV_EVENTS,
    IV_FLOWS,
    IV_FLUSHES,
    IV_NREC,
    IV_REROUTES,
    IV_SUBFLOWS,
    PF_FRAC,
    TF_AMOUNT,
    TF_DONE,
    TF_POST,
    TK_CONN,
    TK_FID,
    TK_KIND,
    TK_PATHS,
)
from netsim.engine.model import Connection


class CoreResults:
    """Results accessors of the compiled executor (see :class:`netsim.engine.fabric.Fabric`)."""

    @property
    def stats(self) -> dict[str, int]:
        """Counters: messages (``flows``), sub-flows, reroutes, flushes, solver calls, flows re-solved,
        largest component, events the loop processed."""
        counts = self._table.stats
        iv = self.iv
        return {"flows": int(iv[IV_FLOWS]), "subflows": int(iv[IV_SUBFLOWS]), "reroutes": int(iv[IV_REROUTES]),
                "flushes": int(iv[IV_FLUSHES]), "solver_calls": int(counts[1]), "solved_flows": int(counts[2]),
                "max_component": int(counts[3]), "events": int(iv[IV_EVENTS])}

    @property
    def link_bytes(self) -> np.ndarray:
        """Bytes each link has carried (drained flows, and the carried part of rerouted ones)."""
        return self._table.link_bytes.copy()

    @property
    def link_busy_s(self) -> np.ndarray:
        """Time each link carried any traffic (up to the last :meth:`finalize`)."""
        return self._table.busy.copy()

    @property
    def link_peak_util(self) -> np.ndarray:
        """Highest load / nominal capacity each link reached."""
        return self._table.peak.copy()

    @property
    def link_load_Bps(self) -> np.ndarray:
        """Current load of each link."""
        return self._table.load.copy()

    @property
    def current_capacity_Bps(self) -> np.ndarray:
        """Capacity of each link now (nominal unless a fault changed it)."""
        return self._table.capacity.copy()

    @property
    def offered_peak(self) -> np.ndarray:
        """Per link, the peak over time of offered load / nominal capacity (switch-to-switch links)."""
        return self.off[1].copy()

    @property
    def spray_offered_peak(self) -> np.ndarray:
        """:attr:`offered_peak` had every message been sprayed over all its equal-cost paths."""
        return self.off[3].copy()

    @property
    def queue_pairs(self) -> dict[Connection, int]:
        """Sub-flows (queue pairs) per connection that carried a message: the most any message was split into."""
        used = np.flatnonzero(self.ci[CI_QPS, :len(self.conns)] > 0)
        return {self.conns[int(c)]: int(self.ci[CI_QPS, c]) for c in used}

    def queue_pair_totals(self) -> tuple[int, int]:
        """(connections that carried a message, their queue pairs in all): :attr:`queue_pairs` summed,
        without an object per connection."""
        qps = self.ci[CI_QPS, :len(self.conns)]
        used = qps > 0
        return int(used.sum()), int(qps[used].sum())

    @property
    def bytes_posted(self) -> dict[Connection, float]:
        """Bytes posted per connection."""
        return self._per_conn(CF_POSTED)

    @property
    def bytes_delivered(self) -> dict[Connection, float]:
        """Bytes delivered per connection."""
        return self._per_conn(CF_DELIVERED)

    def _per_conn(self, row: int) -> dict[Connection, float]:
        n, tasks = len(self.conns), self.n_tasks
        posted = (self.ti[TK_KIND, :tasks] == dag.SEND) & (self.ti[TK_FID, :tasks] >= 0)
        values = self.cf[row, :n]
        return {self.conns[c]: float(values[c]) for c in np.unique(self.ti[TK_CONN, :tasks][posted]).tolist()}

    def message_rates(self) -> dict[Connection, float]:
        """Each connection's message in flight and its rate now (a split message: its pieces' sum)."""
        table = self._table
        rates: dict[Connection, float] = {}
        live = np.flatnonzero((self.slot_task >= 0) & (table.slot_int[dag.GRP, :len(self.slot_task)] >= 0))
        for s in live.tolist():
            conn = self.conns[int(self.ti[TK_CONN, self.slot_task[s]])]
            rates[conn] = rates.get(conn, 0.0) + float(table.num[s, 1])
        return rates

    def routes_used(self) -> dict[Connection, list[tuple[tuple[int, ...], float]]]:
        """The pieces of each routed connection's current routes: ``[(links, fraction), ...]`` (one
        piece over the union of its paths unless the policy splits messages)."""
        store, out = self.store, {}
        for c in np.flatnonzero(self.ci[CI_ROUTE, :len(self.conns)] >= 0).tolist():
            r = int(self.ci[CI_ROUTE, c])
            out[self.conns[c]] = [(tuple(store.links(p).tolist()), float(store.pf[PF_FRAC, p])) for p in store.pieces(r)]
        return out

    def flow_columns(self) -> dict[str, np.ndarray]:
        """One entry per delivered message, in delivery order, as columns: ``flow_id, connection, src,
        dst, channel, job, size_bytes, start_s, end_s, n_paths`` (empty unless flows are recorded)."""
        if not self.record_flows:
            tasks = np.zeros(0, np.int64)
        else:
            tasks = self.rec[:int(self.iv[IV_NREC])]
        conn = self.ti[TK_CONN, tasks]
        n = len(self.conns)
        labels = self.conns.labels()
        cols = {f: self.conns.column(f) for f in ("src", "dst", "channel", "job")}
        return {"flow_id": self.ti[TK_FID, tasks], "connection": labels[conn] if n else np.zeros(0, object),
                "src": cols["src"][conn], "dst": cols["dst"][conn], "channel": cols["channel"][conn],
                "job": cols["job"][conn], "size_bytes": self.tf[TF_AMOUNT, tasks], "start_s": self.tf[TF_POST, tasks],
                "end_s": self.tf[TF_DONE, tasks], "n_paths": self.ti[TK_PATHS, tasks]}

    @property
    def flow_records(self) -> list[tuple]:
        """:meth:`flow_columns` as one tuple per message (the reference Fabric's ``flow_records``)."""
        cols = self.flow_columns()
        return list(zip(*(cols[k].tolist() for k in ("flow_id", "connection", "src", "dst", "channel", "job",
                                                    "size_bytes", "start_s", "end_s", "n_paths"))))

    @property
    def undelivered(self) -> int:
        """Messages posted but not yet delivered (transmitting or queued)."""
        sends = self.ti[TK_KIND, :self.n_tasks] == dag.SEND
        posted = self.ti[TK_FID, :self.n_tasks] >= 0
        return int((sends & posted & np.isnan(self.tf[TF_DONE, :self.n_tasks])).sum())

    @property
    def active_flows(self) -> int:
        """Messages transmitting now."""
        return int((self.ci[CI_HEAD, :len(self.conns)] >= 0).sum())

    def finalize(self) -> None:
        """Close link busy-time accounting at the current time (call once the simulation ended)."""
        now = max(self.env.now, float(self.fv[FV_NOW]))
        table = self._table
        off, nominal = self.off, table.nominal
        for row, peak, since in ((0, 1, 4), (2, 3, 5)):  # offered loads held until now count for their peaks
            held = (off[row] > 0) & (now > off[since])
            off[peak, held] = np.maximum(off[peak, held], off[row, held] / nominal[held])
            off[since, held] = now
        for link in np.flatnonzero(table.load > 0).tolist():
            table.busy[link] += now - table.link_t[link]
            if now > table.link_t[link]:
                table.peak[link] = max(table.peak[link], table.load[link] / table.nominal[link])
            if self._series:
                self.ser_data = dag._series_add(link, float(table.link_t[link]), now, float(table.load[link]),
                                                self.ser_row, self.ser_data, self.fv, self.iv)
            table.link_t[link] = now

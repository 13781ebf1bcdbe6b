"""The compiled executor: schedules and single messages run in numba, SimPy kept as the clock.

:class:`CompiledCore` owns the arrays of :mod:`netsim.engine.dag` (tasks, connections, routes, the
flow table, observers) and a SimPy process, the *pump*, that runs the event loop between the
events of other SimPy processes: it runs every instant before the next external event, stops when
a message or schedule someone waits on is done (and wakes the waiter at that time), asks the
routing policy for the routes of connections that need them, and goes on. Faults (capacity
changes, reroutes) are applied at the instant they happen, as the reference Fabric applies them.

It implements the same interface as the reference (pure Python) path of the Fabric, which the
tests hold it to.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import simpy

from netsim.engine import dag
from netsim.engine.clock import Environment, delay_to
from netsim.engine.core_results import CoreResults
from netsim.engine.core_routes import CoreRoutes, _grown
from netsim.engine.dag import (
    CF_CAP,
    CI_HEAD,
    CI_ROUTE,
    FV_NEXT_T,
    FV_NOW,
    FV_RTOL,
    FV_SLIMIT,
    FV_SWIDTH,
    FV_TIMER_AT,
    FV_TIMER_FIRE,
    FV_TOL,
    IV_ARMED,
    IV_CONGESTION,
    IV_FLUSH_ID,
    IV_NAH,
    IV_NFREE,
    IV_NGFREE,
    IV_NNEED,
    IV_NNOTE,
    IV_NXSEED,
    IV_SERIES,
    MODE_FIXED,
    N_CF,
    N_CI,
    N_FV,
    N_IV,
    N_TF,
    N_TK,
    ST_LIMIT,
    ST_NOTIFY,
    ST_ROUTES,
    TF_AMOUNT,
    TF_DONE,
    TK_CONN,
    TK_FID,
    TK_KIND,
    TK_LEFT,
    TK_NOTIFY,
)
from netsim.engine.fabric import CORE_KINDS, Fabric
from netsim.engine.model import Connection, ConnectionRows, ConnectionTable, Schedule, ScheduleBuilder
from netsim.engine.routestore import RouteStore
from netsim.engine.table import FlowTable, _widen
from netsim.routing.routes import from_routes
from netsim.routing.spray import Spray
from netsim.solver import jit
from netsim.topology import LINK_KINDS, Topology

_CORES = itertools.count()


class _Handle:
    """What a submitted schedule gives back: its tasks' done times and an event for its end."""

    def __init__(self, core: CompiledCore, first: int, n: int, done: simpy.Event):
        self._core, self.first, self.n, self.done = core, first, n, done

    @property
    def times(self) -> np.ndarray:
        """Done time of each task of the schedule (NaN while not done)."""
        return self._core.tf[TF_DONE, self.first:self.first + self.n]


class LinkSeriesView:
    """The link series kept by the compiled core, with the reference ``LinkSeries`` interface."""

    def __init__(self, core: CompiledCore):
        self._core = core

    @property
    def bins(self) -> int:
        return self._core.ser_data.shape[1]

    @property
    def width(self) -> float:
        return float(self._core.fv[FV_SWIDTH])

    def utilisation(self, capacity_Bps: np.ndarray, horizon_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(link ids, bin start times, mean utilisation [link, bin])`` up to ``horizon_s``."""
        core = self._core
        width = self.width
        n = max(1, min(self.bins, math.ceil(horizon_s / width - 1e-9)))
        starts = np.arange(n) * width
        widths = np.minimum(starts + width, max(horizon_s, 1e-300)) - starts
        links = np.flatnonzero(core.ser_row >= 0).astype(np.int64)
        if not len(links):
            return links, starts, np.zeros((0, n))
        data = core.ser_data[core.ser_row[links], :n]
        with np.errstate(divide="ignore", invalid="ignore"):
            util = data / (capacity_Bps[links][:, None] * np.where(widths > 0, widths, np.nan)[None, :])
        return links, starts, np.nan_to_num(util)


class CompiledCore(CoreRoutes, CoreResults, Fabric):
    """Runs schedules (and single messages) on a topology in compiled code (``Fabric(...,
    backend="compiled")``); see the module docstring. Parameters are those of :class:`Fabric`.
    """

    def __init__(self, env: simpy.Environment, topology: Topology, routing, *, completion_tolerance_s: float = 1e-9,
                 record_flows: bool = True, track_congestion: bool = True, link_series_bins: int = 0,
                 unbounded_links: np.ndarray | None = None, rtol: float = 1e-9, prune: bool = True,
                 backend: str | None = None, compiled: bool | None = None):
        self.env = env
        self.topology = topology
        self.routing = routing
        self.tolerance_s = completion_tolerance_s
        self.record_flows = record_flows
        self.track_congestion = track_congestion
        self.prune = prune
        self._unbounded = unbounded_links
        n_links = len(topology.links)
        self.capacity_Bps = topology.links.capacity_Bps.copy()
        kinds = [LINK_KINDS.index(k) for k in CORE_KINDS]
        self.core = np.isin(topology.links.kind, kinds).astype(np.int8)
        self._table = FlowTable(self.capacity_Bps.copy(), self.capacity_Bps, slots=64, rtol=rtol, prune=prune)
        t = self._table
        # tasks, connections, routes
        self.ti = np.zeros((N_TK, 0), np.int64)
        self.tf = np.zeros((N_TF, 0))
        self.succ_ptr = np.zeros(1, np.int64)
        self.succ_idx = np.zeros(0, np.int64)
        self.n_tasks = 0
        self.conns = ConnectionTable()
        self._conn_overhead = np.zeros(0)   #: per connection: its per-message overhead (:meth:`_overheads`)
        self.ci = np.zeros((N_CI, 0), np.int64)
        self.cf = np.zeros((N_CF, 0))
        self.store = RouteStore(self.core, unbounded_links)
        self._cross = np.zeros(n_links, np.int64)  # per link: pieces of the connections' routes on it
        self._conn_cross: dict[int, np.ndarray] = {}
        #: (connection, key) -> stored route, for a policy with ``route_keys`` (see ``_route_keyed``).
        self._keyed_routes: dict[tuple[int, int], int] = {}
        self._spray_ids: dict[tuple, int] = {}  # per (path class, host-end path counts): its sprayed piece
        self._sprayer = Spray(topology)
        self._tcp_comms: set[tuple[int, int]] = set()
        self._one_send: dict[Connection, Schedule] = {}
        self._serial = next(_CORES)  # names this core in tables' mapping caches (ids of dead objects recur)
        # observers
        # offered, its peak / nominal, the same had all been sprayed, and since when each offered load holds
        self.off = np.zeros((6, n_links))
        self.ok = np.zeros(0, np.int64)
        self.oa = np.zeros(0)
        self.sk = np.zeros(0, np.int64)
        self.sa = np.zeros(0)
        self.okey_pos = np.full(0, -1, np.int64)
        self.skey_pos = np.full(0, -1, np.int64)
        self.ser_row = np.full(n_links, -1, np.int64)
        self.ser_data = np.zeros((0, max(int(link_series_bins), 1)))
        self._series = link_series_bins > 0
        self._series_links: set[int] = set()
        self.link_series = LinkSeriesView(self) if self._series else None
        # the flow table's per-slot bookkeeping and the loop's work lists
        self.free = np.zeros(0, np.int64)
        self.gfree = np.zeros(0, np.int64)
        self.slot_task = np.full(0, -1, np.int64)
        self.slot_piece = np.full(0, -1, np.int64)
        self.group_task = np.full(0, -1, np.int64)
        self.gcount = np.zeros((2, 0), np.int64)
        self.ah = np.zeros((16, 3))
        self.pend = np.zeros(0, np.int64)
        self.start = np.zeros(0, np.int64)
        self.rem = np.zeros(0, np.int64)
        self.need = np.zeros(0, np.int64)
        self.notes = np.zeros(0, np.int64)
        self.stack = np.zeros(0, np.int64)
        self.xseeds = np.zeros(n_links, np.int64)
        self.moves = np.zeros(0, np.int64)
        self.rec = np.zeros(0, np.int64)
        self.iv = np.zeros(N_IV, np.int64)
        self.fv = np.zeros(N_FV)
        self.fv[FV_TOL] = completion_tolerance_s
        self.fv[FV_RTOL] = rtol
        self.fv[FV_NEXT_T] = math.inf
        self.fv[FV_TIMER_AT] = math.inf
        self.fv[FV_TIMER_FIRE] = math.inf
        self.fv[FV_SWIDTH] = 1e-6
        self.fv[FV_SLIMIT] = self.ser_data.shape[1] * 1e-6
        self.iv[IV_CONGESTION] = int(track_congestion)
        self.iv[IV_SERIES] = int(self._series)
        self.iv[IV_FLUSH_ID] = 1
        self._sync_free()
        self._waiters: dict[int, simpy.Event] = {}
        self._wake: simpy.Event | None = None
        self._pump_proc = env.process(self._pump())
        self._stats = {"reroutes": 0}
        self._n_notify = 0
        self._send_tasks = 0
        self._n_succ = 0
        self._pieces_total = 0
        self._conn_pieces: dict[int, int] = {}
        self._pending_handles: list = []
        self._events_counted = 0
        self._max_cross = 0
        self._n_conn_init = 0
        del t

    # ------------------------------------------------------------------ growth
    def _sync_free(self) -> None:
        """The free slot and group lists as arrays the loop can pop from (after the table grew)."""
        t = self._table
        n_slots = t.num.shape[0]
        if self.slot_task.shape[0] < n_slots:
            self.slot_task = _grown(self.slot_task, n_slots, fill=-1)
            self.slot_piece = _grown(self.slot_piece, n_slots, fill=-1)
            self.rem = _grown(self.rem, n_slots)
        self.free = _grown(np.array(t.free, np.int64), n_slots)
        self.iv[IV_NFREE] = len(t.free)
        n_groups = t.groups.shape[1]
        self.gfree = _grown(np.array(t.group_free, np.int64), n_groups)
        self.iv[IV_NGFREE] = len(t.group_free)
        self.group_task = _grown(self.group_task, n_groups, fill=-1)
        self.gcount = _grown(self.gcount, n_groups)

    def _ensure_capacity(self, extra: int = 0) -> None:
        """Room in the flow table for every piece the connections' current routes can put in flight,
        for their links, in the per-link rows for every piece that can cross a link at once, and for
        a message group per connection."""
        t = self._table
        iv = self.iv
        n_slots = t.num.shape[0]
        in_use = n_slots - int(iv[IV_NFREE])
        row = 2 * int(self._max_cross) + 4
        # CORRECTNESS: within one flush a connection can hold the slots of its drained message (freed
        # when the flush commits) and of its next one: room for both, for every connection at once
        need_slots = 2 * self._pieces_total + extra
        grow_slots = int(iv[IV_NFREE]) < need_slots - in_use + 2 or self.store.max_links > t.links.shape[1]
        grow_groups = int(iv[IV_NGFREE]) < len(self.conns) + 1 - (t.groups.shape[1] - int(iv[IV_NGFREE]))
        if not (grow_slots or grow_groups or row > t.rows.shape[1]):
            return
        t.free = self.free[:iv[IV_NFREE]].tolist()
        t.group_free = self.gfree[:iv[IV_NGFREE]].tolist()
        if grow_slots:
            t._reserve(max(need_slots + 2 - in_use, 1), max(self.store.max_links, 1))
        while len(t.group_free) < len(self.conns) + 1:
            old = t.groups.shape[1]
            t.groups = np.concatenate([t.groups, np.zeros_like(t.groups)], axis=1)
            t.group_free = list(range(2 * old - 1, old - 1, -1)) + t.group_free
        if row > t.rows.shape[1]:
            t.rows, t.roww = _widen(t.rows, max(row, 2 * t.rows.shape[1])), _widen(t.roww, max(row, 2 * t.rows.shape[1]))
        need = max(len(t.nl), len(self.capacity_Bps))  # (a flush seeds each link once: see table._seed)
        if need > t.scratch.shape[1]:
            t.scratch = np.zeros((4, need), np.int64)
        self._sync_free()

    # ------------------------------------------------------------------ tasks
    def _add_tasks(self, schedule: Schedule, conn_map: np.ndarray, notify: np.ndarray | None, caps=None) -> int:
        """Append ``schedule``'s tasks (its connections mapped to ours by ``conn_map``); their first id."""
        n = len(schedule)
        first = self.n_tasks
        total = first + n
        self.ti = _grown(self.ti, total)
        self.tf = _grown(self.tf, total)
        ti, tf = self.ti, self.tf
        ti[:, first:total] = 0
        tf[:, first:total] = 0.0
        ti[TK_KIND, first:total] = schedule.kind
        sends = schedule.kind == dag.SEND
        conn = np.full(n, -1, np.int64)
        conn[sends] = conn_map[schedule.conn[sends]]
        ti[TK_CONN, first:total] = conn
        ti[TK_LEFT, first:total] = np.diff(schedule.dep_ptr)
        ti[dag.TK_NEXT, first:total] = -1
        ti[TK_FID, first:total] = -1
        if notify is not None:
            ti[TK_NOTIFY, first + notify] = 1
        tf[TF_AMOUNT, first:total] = schedule.amount
        tf[TF_DONE, first:total] = np.nan
        if schedule.overhead_scale is not None:
            tf[dag.TF_EXTRA, first:total] = schedule.extra_delay_s(self._overheads(conn))
        sp, si = schedule.successors()
        self.succ_ptr = _grown(self.succ_ptr, total + 1)
        self.succ_ptr[first + 1:total + 1] = sp[1:] + self.succ_ptr[first]
        self.succ_idx = _grown(self.succ_idx, self._n_succ + len(si))
        self.succ_idx[self._n_succ:self._n_succ + len(si)] = si + first
        self._n_succ += len(si)
        self.n_tasks = total
        jit.charge(int(sends.sum()))  # numba is loaded when the process's messages repay it
        self._send_tasks += int(sends.sum())
        self.rec = _grown(self.rec, self._send_tasks)
        self.stack = _grown(self.stack, 2 * total)  # (task, next successor) frames
        self.ah = _grown(self.ah, total + 16, axis=0)
        self.notes = _grown(self.notes, self._n_notify + (len(notify) if notify is not None else 0) + 1)
        if notify is not None:
            self._n_notify += len(notify)
        return first

    def _map_connections(self, table: ConnectionTable, caps=None) -> np.ndarray:
        """Our ids of ``table``'s connections (TCP applied), routing the new ones when routes depend only
        on the connection."""
        if not len(table):
            return np.zeros(0, np.int64)
        # perf: a table mapped before (a schedule submitted again) maps the same while no connection
        # was added to it and no communicator switched to TCP since
        stamp = (self._serial, len(table), len(self._tcp_comms))
        seen = getattr(table, "_mapped", None)
        if seen is not None and seen[0] == stamp:
            return seen[1]
        table._mapped = (stamp, self._map_new(table))
        return table._mapped[1]

    def _map_new(self, table: ConnectionTable) -> np.ndarray:
        cols = [table.column(f) for f in ("src", "dst", "channel", "job", "comm", "tcp")]
        tcp = cols[5].copy()
        if self._tcp_comms:
            for k, (job, comm) in enumerate(zip(cols[3].tolist(), cols[4].tolist())):
                if (job, comm) in self._tcp_comms and cols[0][k] != cols[1][k]:
                    tcp[k] = True
        before = len(self.conns)
        ids = self.conns.add(cols[0], cols[1], cols[2], cols[3], cols[4], tcp)
        self._connect(ids)
        new = np.arange(before, len(self.conns), dtype=np.int64)
        if len(new):
            routed = new[self.conns.src[new] != self.conns.dst[new]]
            if self.track_congestion:
                self._spray(routed)
            if self._mode == MODE_FIXED:
                self._route_all(routed)
        return ids

    # ------------------------------------------------------------------ public API
    def submit(self, schedule: Schedule, *, notify: Sequence[int] | None = None) -> _Handle:
        """Start ``schedule`` now; the handle's ``done`` fires when its last task is done."""
        schedule.check()
        conn_map = self._map_connections(schedule.connections)
        done = self.env.event()
        n = len(schedule)
        ends = np.flatnonzero(np.diff(schedule.successors()[0]) == 0)  # tasks nothing waits for
        end_notes = np.asarray(sorted(set(ends.tolist()) | set(notify or ())), np.int64)
        first = self._add_tasks(schedule, conn_map, end_notes)
        handle = _Handle(self, first, n, done)
        self._pending_handles.append((handle, set((first + end_notes).tolist())))
        for t in (first + end_notes).tolist():
            self._waiters.setdefault(t, None)
        roots = first + np.flatnonzero(np.diff(schedule.dep_ptr) == 0)
        self._release_now(roots)
        if n == 0:
            done.succeed()
        return handle

    def _overheads(self, conn: np.ndarray) -> np.ndarray:
        """Per task of connection ids ``conn`` (ours; -1: none), that connection's per-message
        overhead (0 for none and for a GPU's messages to itself), from a per-connection table kept
        as connections are added (perf: a ring of 2 M messages has 2 K connections)."""
        known = self._conn_overhead
        if len(known) < len(self.conns):
            new = np.arange(len(known), len(self.conns))
            src, dst, tcp = (self.conns.column(f)[new] for f in ("src", "dst", "tcp"))
            more = np.where(src == dst, 0.0, self.topology.message_overheads_s(src, dst, tcp.astype(bool)))
            known = self._conn_overhead = np.concatenate([known, more])
        return np.where(conn >= 0, known[np.maximum(conn, 0)], 0.0)

    def send(self, src: int, dst: int, size_bytes: float, connection: Connection | None = None, *,
             cap_Bps: float = math.inf, event: simpy.Event | None = None) -> simpy.Event:
        """Send ``size_bytes`` from GPU ``src`` to GPU ``dst``; the event fires when the last byte arrived."""
        if not size_bytes >= 0:
            raise ValueError(f"size_bytes must be >= 0, got {size_bytes!r}")
        if event is None:
            event = self.env.event()
        conn = connection if connection is not None else Connection(src, dst)
        one = self._one_send.get(conn)  # perf: one single-message schedule per connection, reused
        if one is None:
            b = ScheduleBuilder()
            b.send(b.connect(conn.src, conn.dst, conn.channel, conn.job, conn.comm, conn.tcp), 0.0)
            one = self._one_send[conn] = b.build()
        schedule = Schedule(one.kind, one.conn, np.array([float(size_bytes)]), one.dep_ptr, one.dep_idx,
                            one.connections)
        object.__setattr__(schedule, "_successors", one.successors())
        conn_map = self._map_connections(schedule.connections)
        if cap_Bps != math.inf:
            self.cf[CF_CAP, conn_map[0]] = cap_Bps
        first = self._add_tasks(schedule, conn_map, np.zeros(1, np.int64))
        self._waiters[first] = event
        self._release_now(np.array([first], np.int64))
        return event

    def set_capacity(self, capacities: dict[int, float]) -> None:
        """Give links new capacities (B/s; 0 = down) from this instant on; flows on them are re-solved.

        Routing does not react: a policy learns of faults through :meth:`routing_changed`."""
        self._sync_time()
        table = self._table
        iv = self.iv
        for link, cap in capacities.items():
            link = int(link)
            table.capacity[link] = float(cap)
            n = iv[IV_NXSEED]
            if n == len(self.xseeds):  # links changed again before the solver ran (a switch fault twice at
                seeds = np.unique(self.xseeds[:n])  # one instant): each needs re-solving once
                self.xseeds[:len(seeds)] = seeds
                iv[IV_NXSEED] = n = len(seeds)
                if n == len(self.xseeds):  # every link is pending already, this one included
                    continue
            self.xseeds[n] = link
            iv[IV_NXSEED] += 1
        self._arm()

    def routing_changed(self, state: dict[int, float]) -> None:
        """Tell the routing policy the links it now knows to be down (0) or degraded (fraction of nominal);
        messages in flight whose routes the policy changes go on over their new routes with the bytes
        they have left."""
        self._sync_time()
        self.routing.links_changed(dict(state))
        self._keyed_routes.clear()
        routed = np.flatnonzero(self.ci[CI_ROUTE, :len(self.conns)] >= 0)
        if not len(routed):
            return
        iv = self.iv
        rows = ConnectionRows(self.conns, routed)
        if self._mode == MODE_FIXED:
            table = self.routing.routes(rows)
        else:  # (asking again would re-plan: the routes each connection has now, as the policy revised them)
            conns = rows.connections()
            table = from_routes(self.topology, conns, [self.routing.paths(c) for c in conns],
                                bool(self.routing.independent))
        routes = self._stored(routed, table)
        store = self.store
        for c, r in zip(routed.tolist(), routes.tolist()):
            if store.same(int(self.ci[CI_ROUTE, c]), r):
                continue
            self._set_route(c, r)
            # (a connection moved twice in one instant, by two notices, is listed once: the list holds
            # at most one entry per connection)
            if self.ci[CI_HEAD, c] >= 0 and self.ci[dag.CI_FLIGHT, c] >= 0 \
                    and not (self.moves[:iv[dag.IV_NMOVE]] == c).any():
                self.moves[iv[dag.IV_NMOVE]] = c
                iv[dag.IV_NMOVE] += 1
        # the moved messages' old slots are taken until the flush removes them
        self._ensure_capacity(extra=int(self._table.num.shape[0] - iv[IV_NFREE]))
        self._arm()

    def _arm(self) -> None:
        """A flush at the current instant (an action happened)."""
        self.iv[IV_ARMED] = 1
        self._kick()

    def use_tcp(self, job: int, comm: int) -> None:
        """Carry communicator ``comm`` of ``job`` over TCP (see ``Fabric.use_tcp``)."""
        self._tcp_comms.add((job, comm))

    def _release_now(self, roots: np.ndarray) -> None:
        """Release ``roots`` (tasks with no dependency) at the current time, and wake the pump."""
        self._sync_time()
        self._ensure_capacity()
        now = self.fv[FV_NOW]
        self.ah = dag.release_roots(roots, now, self.ti, self.tf, self.succ_ptr, self.succ_idx, self.ci, self.cf,
                                    self.iv, self.fv, self.ah, self.pend, self.stack, self._table.slot_int,
                                    self._table.groups, self.notes)
        self._kick()

    def _sync_time(self) -> None:
        """The loop's clock joins SimPy's: nothing internal is due before ``env.now``."""
        self.fv[FV_NOW] = max(self.fv[FV_NOW], self.env.now)

    def _kick(self) -> None:
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    # ------------------------------------------------------------------ the pump
    def _advance(self, limit: float) -> int:
        t, rs = self._table, self.store
        while True:
            status, self.ah, self.ser_data = dag.advance(
                limit, self.ti, self.tf, self.succ_ptr, self.succ_idx, self.ci, self.cf, rs.ri, rs.pi, rs.pf,
                rs.ll, rs.lw, rs.el, rs.ew, self.core, self.off, self.ok, self.oa, self.okey_pos, self.sk,
                self.sa, self.skey_pos, t.slot_int, t.links, t.w, t.pos, t.num, t.rows, t.roww, t.link_int,
                t.link_flt, t.scratch, t.hkeys, t.hvals, t.stats, t.groups, self.free, self.gfree, self.slot_task,
                self.slot_piece, self.group_task, self.gcount, self.ah, self.pend, self.start, self.rem, self.need,
                self.notes, self.stack, self.xseeds, self.moves, self.rec, self.ser_row, self.ser_data, self.iv, self.fv,
                self.prune)
            self._count_events()
            if status != ST_ROUTES:
                return status
            k = int(self.iv[IV_NNEED])
            self._route(self.need[:k].tolist())
            self._ensure_capacity()

    def _count_events(self) -> None:
        """The loop's events (arrivals, completion timers, flushes) join SimPy's in ``events_processed``."""
        done = int(self.iv[dag.IV_EVENTS])
        if isinstance(self.env, Environment):
            self.env.extra_events += done - self._events_counted
        self._events_counted = done

    def _pump(self):
        env = self.env
        while True:
            if not self._busy():
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            if self.iv[IV_NNOTE]:  # (tasks done as they were released)
                self._notify()
                continue
            # every other event of this instant first (the reference's timer and flush priorities)
            while env.peek() <= env.now:
                yield env.timeout(0)
            limit = env.peek()
            st = self._advance(limit)
            if st == ST_NOTIFY:
                yield from self._goto(self.fv[FV_NOW])
                self._notify()
            elif st == ST_LIMIT:
                # to the next external event, not further: what it does (a fault, a new message) must
                # reach the loop at its own instant
                yield from self._goto(limit)

    def _goto(self, t: float):
        """SimPy's clock to ``t`` itself (see :func:`~netsim.engine.clock.delay_to`)."""
        while t > self.env.now:
            yield self.env.timeout(delay_to(self.env, t))

    def _busy(self) -> bool:
        iv = self.iv
        return bool(iv[IV_NAH] or iv[dag.IV_TVALID] or iv[IV_ARMED] or iv[IV_NNOTE])

    def _notify(self) -> None:
        n = int(self.iv[IV_NNOTE])
        tasks = self.notes[:n].tolist()
        self.iv[IV_NNOTE] = 0
        for task in tasks:
            event = self._waiters.pop(task, None)
            if event is not None:
                event.succeed()
        if self._pending_handles:
            left = []
            for handle, ends in self._pending_handles:
                ends.difference_update(tasks)
                if ends:
                    left.append((handle, ends))
                else:
                    handle.done.succeed()
            self._pending_handles = left

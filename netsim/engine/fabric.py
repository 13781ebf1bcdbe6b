"""The Fabric: fluid flow-level network on a SimPy clock (flow table, batching, completions, link stats).

Sends issued in one simulated instant are routed and solved together once the instant's other
events have run. Messages on one connection are transmitted in order, like work requests on an
RDMA queue pair: a message starts when the previous one on its connection has drained. Rates
follow max-min fairness and are recomputed only for the connected part of the flow/link
contention graph that a change touches (max-min allocations decompose over connected components,
so the rest keeps its rates exactly).

Two engine paths share this class: with numba installed, the per-instant work (components, rates,
link accounting, completions) runs in the compiled flow table of :mod:`netsim.engine.table`;
without it, in the Python code below, which is also the reference the tests hold the table to.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict, deque
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import simpy
from simpy.events import NORMAL

from netsim.routing.base import Connection, RoutingPolicy, Routes, Window
from netsim.routing.ethereal import Ethereal
from netsim.engine.table import (FID, GRP, RATE, RING_EARR, RING_EFLUSH, RING_ETIMER, RING_FID, RING_FLOWS,
                                 RING_FLUSHES, RING_NEXT_T, RING_NFREE, RING_NTIMERS, RING_TIMER_AT, RING_TIMER_FIRE,
                                 RING_TVALID, RING_NGFREE, RING_SUBFLOWS, RING_GROUPED, SUCC, FlowTable,
                                 _ring_kernel, _widen)
from netsim.solver import COMPILED, DEFAULT_SOLVER, SOLVERS, progressive_filling_lists
from netsim.topology import LINK_KINDS, Topology

#: Switch-to-switch link kinds (the core): where congestion is measured and what an ideal unbounds.
CORE_KINDS = ("up", "down", "local", "global")

#: Components of at most this many flows go to the list solver when the compiled one is there.
SMALL_COMPILED = 8

#: Force the compiled flow table on (True) or off (False) for every Fabric; None = when numba is there.
USE_COMPILED: bool | None = None

#: Let a ring that has the fabric to itself run in one compiled call (:meth:`Fabric.run_ring`).
RING_KERNEL = True

#: SimPy priority of the per-instant flush: after every NORMAL event of the same instant.
FLUSH_PRIORITY = NORMAL + 1
#: Completion timers run after every NORMAL event of their instant and before its flush.
TIMER_PRIORITY = NORMAL + 0.5


class Environment(simpy.Environment):
    """A SimPy environment that tells how many events it has processed (for events/s in benchmarks)."""

    def __init__(self, initial_time: float = 0.0):
        super().__init__(initial_time)
        self._empty_steps = 0
        self._virtual_events = 0  # events a compiled run stood in for (Fabric.run_ring)

    @property
    def events_processed(self) -> int:
        """Steps taken so far: events processed, plus each step that found the schedule empty and
        ended a :meth:`run`."""
        # perf: derived from SimPy's event ids (each scheduled event takes the next one, and only
        # processing takes an event off the queue) instead of counting in an overridden step(),
        # which cost 0.3-0.7 us per event
        return int(repr(self._eid)[6:-1]) - len(self._queue) + self._empty_steps + self._virtual_events

    def run(self, until=None):
        """:meth:`simpy.Environment.run`, noting the step that ends it on an empty schedule."""
        try:
            result = super().run(until)
        except RuntimeError:  # the schedule ran out before ``until`` fired
            if until is not None and not self._queue:
                self._empty_steps += 1
            raise
        if until is None:
            self._empty_steps += 1
        return result


def _schedule(env: simpy.Environment, event: simpy.Event, delay: float = 0.0, priority: int = NORMAL) -> None:
    # perf: trigger an event `delay` from now without a helper Timeout (what Timeout.__init__ does);
    # halves the events per message compared with timeout + callback + succeed.
    event._ok = True
    event._value = None
    env.schedule(event, priority, delay)


class _Flow:
    """One message in flight: its incidence, progress and completion event."""

    __slots__ = ("fid", "conn", "size", "links", "weights", "link_list", "weight_list", "solo", "delay", "n_paths",
                 "cap", "start", "remaining", "_rate", "t_upd", "version", "event", "routes", "acct", "offered",
                 "parent", "index", "pending", "arrive", "demand", "spray", "slot", "tab", "group", "fid0", "succ")

    def __init__(self, fid: int, conn: Connection, size: float, cap: float, start: float, event: simpy.Event | None):
        self.fid = fid
        self.conn = conn
        self.size = size
        self.cap = cap
        self.start = start
        self.remaining = size
        self._rate = 0.0
        self.tab: FlowTable | None = None  # the flow table holding its rate (compiled engine)
        self.slot = -1
        self.group = -1  # the flow table's group holding its pieces (a split message, compiled engine)
        self.succ = False  # a message waits behind it on its connection
        self.t_upd = start
        self.version = 0
        self.event = event
        self.acct = 0.0  # bytes already added to link byte counters (before a reroute)
        self.parent: _Flow | None = None  # the message a sub-flow belongs to
        # Set when used: ``index`` (which entry of the message's routes a sub-flow carries),
        # ``offered`` (its (link, weight) pairs on the offered-load counters), ``demand``, ``spray``.

    @property
    def rate(self) -> float:
        """Current rate (B/s)."""
        return self._rate if self.tab is None else float(self.tab.num[self.slot, RATE])


class _Queue(deque):
    """A connection's waiting messages, and the one transmitting (``cur``)."""

    __slots__ = ("cur",)


class LinkSeries:
    """Bytes each link carried per time bin, with at most ``bins`` bins over the run.

    The horizon is not known in advance: bins start 1 µs wide and double (neighbours merged) when
    the simulation outgrows them, so the resolution ends between horizon/bins and 2 x that. Only
    links that carry something get a row. Cost: a few list additions per load change of a link
    (rows are Python lists: scalar updates on them are several times cheaper than on numpy arrays).
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
        i1 = int(t1 / w)
        if i1 >= self.bins:
            i1 = self.bins - 1
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


class _RingRoutes(NamedTuple):
    """A ring's routes as :func:`~netsim.engine.table._ring_kernel` takes them: fixed per connection
    (``c_*``), or Ethereal's candidate paths per connection (``p_*``) with its batch groups; plus
    what the table must have room for."""

    c_links: np.ndarray  # fixed: each connection's links (padded), weights, link count, cap, delay, paths
    c_w: np.ndarray
    c_nl: np.ndarray
    c_cap: np.ndarray
    c_delay: np.ndarray
    c_paths: np.ndarray
    p_links: np.ndarray  # Ethereal: each connection's candidate paths' links, link counts, delays
    p_nl: np.ndarray
    p_delay: np.ndarray
    c_group: np.ndarray  # its batch group (sender NIC, uplink set) and sort rank; per group: uplinks, cursor
    c_rank: np.ndarray
    g_s: np.ndarray
    g_cursor: np.ndarray
    plan: np.ndarray  # written back: each connection's last window (start, paths, fraction)
    slots: int  # flows the ring can have in flight (once), the most crossing one link, link entries
    crossing: int
    link_entries: int
    options: list | tuple = ()  # Ethereal: each connection's (keys, by key, paths), and the groups' cursor keys
    keys: list | tuple = ()


class Fabric:
    """A fluid network on a SimPy environment.

    Parameters
    ----------
    env:
        The SimPy environment (use :class:`Environment` to count events).
    topology:
        The fabric's links and paths.
    routing:
        Routing policy deciding each connection's paths.
    solver:
        Max-min rate solver with the signature of :func:`netsim.solver.progressive_filling`
        (default: ``netsim.solver.DEFAULT_SOLVER``, the compiled one when numba is installed).
    completion_tolerance_s:
        Flows whose last bytes drain within this time of each other complete together.
    record_flows:
        Keep one record per message (for ``flows.parquet``); turn off for the largest runs.
    small_component:
        Components of at most this many flows are solved by the list-based solver (same
        allocation, less overhead); larger ones by ``solver``. Default: 8 with the compiled
        solver, 24 without.
    unbounded_links:
        Optional boolean mask of links that never limit a flow (left out of the contention
        graph): how :mod:`netsim.engine.ideal` makes a fabric's switching core non-blocking.
    compiled:
        Run the per-instant work (components, rates, completions) in the compiled flow table
        (:mod:`netsim.engine.table`). Default: when numba is installed and no ``solver`` is given.
        Both paths give the same allocation; the Python one is the reference.

    Examples
    --------
    >>> from netsim.topology import leaf_spine
    >>> from netsim.routing import make_routing
    >>> topo = leaf_spine(leaves=2, spines=1, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1,
    ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    >>> env = Environment()
    >>> fabric = Fabric(env, topo, make_routing("ecmp", topo, np.random.default_rng(0)))
    >>> done = fabric.send(0, 1, 1e9)
    >>> env.run(done); env.now
    1.0
    """

    def __init__(self, env: simpy.Environment, topology: Topology, routing: RoutingPolicy, *,
                 solver: Callable[..., np.ndarray] | None = None,
                 completion_tolerance_s: float = 1e-9, record_flows: bool = True, small_component: int | None = None,
                 unbounded_links: np.ndarray | None = None, track_congestion: bool = True,
                 link_series_bins: int = 0, compiled: bool | None = None):
        self.env = env
        self._unbounded = unbounded_links
        self.topology = topology
        self.routing = routing
        self._plan = getattr(routing, "plan", None)  # batch planner (Ethereal, C4P), if the policy has one
        self.solver = solver if solver is not None else SOLVERS[DEFAULT_SOLVER]
        self.tolerance_s = completion_tolerance_s
        self.record_flows = record_flows
        self.small_component = small_component if small_component is not None else (SMALL_COMPILED if COMPILED else 24)
        n_links = len(topology.links)
        #: Nominal capacity of each link (faults change the current one, ``current_capacity_Bps``).
        self.capacity_Bps = topology.links.capacity_Bps.copy()
        self._cap_arr = self.capacity_Bps.copy()
        self._independent = bool(getattr(routing, "independent", False))
        # perf: per-link state lives in Python lists; flushes touch a handful of links each and
        # scalar list access is ~10x cheaper than numpy scalar indexing. Arrays via properties.
        self._cap = self.capacity_Bps.tolist()
        self._nominal = self.capacity_Bps.tolist()
        self._bytes = [0.0] * n_links
        self._busy = [0.0] * n_links
        self._peak = [0.0] * n_links
        self._load = [0.0] * n_links
        self._link_t = [0.0] * n_links
        self._link_flows: defaultdict[int, set[int]] = defaultdict(set)
        self._flows: dict[int, _Flow] = {}
        self._pending: list[_Flow] = []
        self._conn_queue: dict[Connection, _Queue] = {}
        self._drained: list[_Flow] = []
        self._routes_cache: dict[Connection, tuple[Routes, np.ndarray, np.ndarray, list[int], float]] = {}
        self._flush_armed = False
        self._heap: list[tuple[float, int, int]] = []
        self._timer_at = math.inf
        self._timer_token = 0
        self._next_fid = 0
        self._starting: list[_Flow] = []
        self._actions: list[Callable[[float, set[int]], None]] = []
        self.flow_records: list[tuple] = []
        #: Sub-flows (queue pairs) per connection: the most any of its messages was split into.
        self.queue_pairs: dict[Connection, int] = {}
        self.bytes_posted: defaultdict[Connection, float] = defaultdict(float)
        self.bytes_delivered: defaultdict[Connection, float] = defaultdict(float)
        self._stats = {"flows": 0, "solver_calls": 0, "solved_flows": 0, "max_component": 0, "flushes": 0,
                       "subflows": 0, "reroutes": 0}
        # Offered load (what active messages would push if the core did not limit them) on
        # switch-to-switch links, under this policy and under ideal spraying of the same messages.
        self.track_congestion = track_congestion
        kinds = [LINK_KINDS.index(k) for k in CORE_KINDS]
        self._core = np.isin(topology.links.kind, kinds)
        self._offered = [0.0] * n_links
        self._offered_peak = [0.0] * n_links
        self._spray_offered = [0.0] * n_links
        self._spray_peak = [0.0] * n_links
        self._spray_cache: dict[tuple[int, int, bool], list[tuple[int, float]]] = {}
        self._tcp_comms: set[tuple[int, int]] = set()
        self._offer_pending: dict[int, list] = {}
        self._spray_pending: dict[int, list] = {}
        #: Bytes per link per time bin (``link_series_bins`` > 0), for utilisation over time.
        self.link_series = LinkSeries(link_series_bins) if link_series_bins > 0 else None
        # The compiled flow table (rates, incidence, components, completions in numba), unless
        # numba is missing or a custom solver was asked for: then the Python path below.
        if compiled is None:
            compiled = COMPILED and solver is None if USE_COMPILED is None else USE_COMPILED
        use_table = bool(compiled)
        if use_table and not COMPILED:
            raise ValueError("the compiled engine needs numba")
        self._table = FlowTable(self._cap_arr, self.capacity_Bps) if use_table else None
        if self._table is not None:
            self._cap_arr = self._table.capacity  # one array: faults write the kernel's capacities
        self._by_slot: dict[int, _Flow] = {}
        self._removes: list[int] = []
        self._adds: list[tuple] = []
        # Split messages whose pieces live in the table as one group, with no Python object per
        # piece: when the table runs and nothing needs per-piece bookkeeping (offered load, an
        # ideal core). Their messages by group, this instant's adds, and their incidence per connection.
        self._bulk_ok = (self._table is not None and self._independent and not track_congestion
                         and unbounded_links is None)
        self._groups: dict[int, _Flow] = {}
        self._grouped = 0  # messages handed to the table as groups (for tests)
        self._fuse_misses = 0  # fused drains after which a message started (for tests: never)
        self.ring_runs = 0  #: rings run in one compiled call (:meth:`run_ring`)
        self._bulk: list[tuple] = []
        self._bulk_cache: dict[Connection, tuple[Routes, tuple | None]] = {}
        self._next_t = math.inf

    # ----------------------------------------------------------------- public API
    def send(self, src: int, dst: int, size_bytes: float, connection: Connection | None = None, *,
             cap_Bps: float = math.inf, event: simpy.Event | None = None) -> simpy.Event:
        """Send ``size_bytes`` from GPU ``src`` to GPU ``dst``; the event fires when the last byte arrived.

        Parameters
        ----------
        connection:
            The persistent connection carrying the message (default ``Connection(src, dst)``);
            routing decisions are made per connection.
        cap_Bps:
            Upper bound on this message's rate (transport or NIC efficiency).
        event:
            An untriggered event to fire on arrival instead of a new one (lets a receiver wait on
            its own event before the sender has posted the message).
        """
        if not size_bytes >= 0:
            raise ValueError(f"size_bytes must be >= 0, got {size_bytes!r}")
        if event is None:
            event = self.env.event()
        if src == dst:
            _schedule(self.env, event)
            return event
        conn = connection if connection is not None else Connection(src, dst)
        if self._tcp_comms and (conn.job, conn.comm) in self._tcp_comms and not conn.tcp:
            conn = conn._replace(tcp=True)
        flow = _Flow(self._next_fid, conn, float(size_bytes), cap_Bps, self.env.now, event)
        self._next_fid += 1
        self.bytes_posted[conn] += flow.size
        queue = self._conn_queue.get(conn)
        if queue is not None:
            queue.append(flow)  # the connection is busy: wait in its send queue
            if not queue.cur.succ:
                self._mark_successor(queue.cur)
            return event
        queue = self._conn_queue[conn] = _Queue()
        queue.cur = flow
        self._pending.append(flow)
        self._arm_flush()
        return event

    def use_tcp(self, job: int, comm: int) -> None:
        """Carry communicator ``comm`` of ``job`` over TCP (the Ethernet NICs): the transport rule for a
        communicator whose ranks mix NIC families (see ``Topology.mixes_fabrics``). Its connections
        are sent with ``tcp=True``; intra-host pairs keep the host's links."""
        self._tcp_comms.add((job, comm))

    def set_capacity(self, capacities: dict[int, float]) -> None:
        """Give links new capacities (B/s; 0 = down) from this instant on; flows on them are re-solved.

        Routing does not react: a policy learns of faults through :meth:`routing_changed`.
        """
        changes = {int(k): float(v) for k, v in capacities.items()}
        self._actions.append(lambda now, seeds: self._apply_capacity(changes, now, seeds))
        self._arm_flush()

    def routing_changed(self, state: dict[int, float]) -> None:
        """Tell the routing policy the links it now knows to be down (0) or degraded (fraction of nominal).

        In-flight messages whose routes the policy then changes continue on their new routes
        with the bytes they have left (bytes already carried stay counted on the old links).
        """
        state = dict(state)
        self._actions.append(lambda now, seeds: self._reroute(state, now, seeds))
        self._arm_flush()

    @property
    def current_capacity_Bps(self) -> np.ndarray:
        """Capacity of each link now (nominal unless a fault changed it)."""
        return self._cap_arr.copy()

    @property
    def stats(self) -> dict[str, int]:
        """Counters: messages (``flows``), sub-flows, reroutes, flushes (instants with changes),
        solver calls (components of more than one flow), flows re-solved, largest component."""
        if self._table is not None:  # perf: read from the kernel's counters only when asked
            counts = self._table.stats
            self._stats["solver_calls"], self._stats["solved_flows"], self._stats["max_component"] = (
                int(counts[1]), int(counts[2]), int(counts[3]))
        return self._stats

    @property
    def link_bytes(self) -> np.ndarray:
        """Bytes each link has carried (completed messages, and the carried part of rerouted ones)."""
        return self._table.link_bytes.copy() if self._table is not None else np.array(self._bytes)

    @property
    def link_busy_s(self) -> np.ndarray:
        """Time each link carried any traffic (up to the last :meth:`finalize`)."""
        return self._table.busy.copy() if self._table is not None else np.array(self._busy)

    @property
    def link_peak_util(self) -> np.ndarray:
        """Highest load / nominal capacity each link reached."""
        return self._table.peak.copy() if self._table is not None else np.array(self._peak)

    @property
    def link_load_Bps(self) -> np.ndarray:
        """Current load of each link."""
        return self._table.load.copy() if self._table is not None else np.array(self._load)

    @property
    def offered_peak(self) -> np.ndarray:
        """Per link, the peak over time of offered load / nominal capacity (switch-to-switch links only).

        A message offers the rate its own edge (NIC port, PCIe) allows it, spread over its routes:
        the load the link would see if the core never slowed anyone down. Above 1 means the
        policy put more on the link than it can carry (congestion, as in the spraying paper).
        """
        return np.array(self._offered_peak)

    @property
    def spray_offered_peak(self) -> np.ndarray:
        """:attr:`offered_peak` had every message been sprayed evenly over all its equal-cost paths."""
        return np.array(self._spray_peak)

    @property
    def active_flows(self) -> int:
        """Number of messages currently transmitting."""
        return len({id(f.parent) if f.parent is not None else id(f) for f in self._flows.values()}) + len(self._groups)

    @property
    def undelivered(self) -> int:
        """Messages posted but not yet drained (transmitting, queued, or about to start)."""
        return (len(self._flows) + len(self._groups) + len(self._pending) + len(self._starting)
                + sum(map(len, self._conn_queue.values())))

    def finalize(self) -> None:
        """Close link busy-time accounting at the current time (call once the simulation ended)."""
        now = self.env.now
        table = self._table
        if table is not None:
            for link in np.flatnonzero(table.load > 0).tolist():
                table.busy[link] += now - table.link_t[link]
                if self.link_series is not None:
                    self.link_series.add(link, float(table.link_t[link]), now, float(table.load[link]))
                table.link_t[link] = now
            return
        for link, load in enumerate(self._load):
            if load > 0:
                self._busy[link] += now - self._link_t[link]
                if self.link_series is not None:
                    self.link_series.add(link, self._link_t[link], now, load)
                self._link_t[link] = now

    # ----------------------------------------------------------------- whole rings
    def run_ring(self, conns: list[Connection], receiver: list[int], size_bytes: float, n_msgs: int,
                 chunks: int = 1) -> tuple[np.ndarray, np.ndarray] | None:
        """Run a ring collective to its end in one compiled call, if nothing else can happen meanwhile.

        ``conns[i]`` carries ``n_msgs`` messages of ``size_bytes``, in order; message ``j`` is posted
        once message ``j - chunks`` of the connection delivering to ``conns[i]``'s source
        (``receiver[k] = i`` for that connection ``k``) has arrived, the first ``chunks`` at once.
        This is what the ring's per-rank processes do (:mod:`netsim.collectives.ring`), and the
        call gives the same messages, times, fids, link counters, records and event count as
        running them would: it replays the same flushes and drains in the same order.

        It applies only when the ring is alone until it ends: the compiled table is on, offered
        load and link series are not tracked, the fabric is idle, SimPy's schedule holds no event
        but stale completion timers (so no fault, other job or time limit can intervene), and the
        routing either gives each connection fixed routes (``fixed``: ECMP, spraying, the
        dragonfly policies) or is Ethereal with no failed link (its batch plan runs in the kernel).
        Returns (per connection, the time its rank received its last message; connections in the
        order their ranks finished), or None when it does not apply (then run the processes).
        """
        table, env = self._table, self.env
        routing = self.routing
        planned = type(routing) is Ethereal and self._bulk_ok and not routing.failed
        fixed = getattr(routing, "fixed", False) and self._plan is None and not self._independent
        if (not RING_KERNEL or table is None or self.track_congestion or self.link_series is not None
                or self._unbounded is not None or not (fixed or planned) or not size_bytes > 1e-200 or n_msgs < 1
                or self._timer_at != math.inf or self._flush_armed or self._flows or self._groups or self._pending
                or self._starting or self._drained or self._actions or self._conn_queue or self._adds
                or self._removes or self._bulk or table.drained):
            return None
        stale_ok = self._on_timer
        if any(ev.callbacks is None or ev.callbacks != [stale_ok] or ev._value == self._timer_token
               for *_key, ev in env._queue):
            return None
        if self._tcp_comms:
            conns = [c._replace(tcp=True) if (c.job, c.comm) in self._tcp_comms and not c.tcp else c for c in conns]
        if len(set(conns)) != len(conns) or any(c.src == c.dst for c in conns):
            return None
        n = len(conns)
        rr = self._ring_planned(conns) if planned else self._ring_fixed(conns)
        if rr is None:
            return None
        # Room for every flow the ring can have in flight, twice (a flush places a connection's
        # next message before it frees the one that drained): slots, their links, each link's row
        # (the flush kernel checks a row's room before its removes), scratch, message groups.
        slots = 2 * rr.slots
        width = max(rr.c_links.shape[-1], rr.p_links.shape[-1])
        if len(table.free) < slots or width > table.links.shape[1]:
            table._reserve(slots, width)
        if 2 * rr.crossing > table.rows.shape[1]:
            table.rows, table.roww = _widen(table.rows, 2 * rr.crossing), _widen(table.roww, 2 * rr.crossing)
        need = rr.link_entries + slots * table.links.shape[1] + n
        if need > table.scratch.shape[1] or len(table.nl) > table.scratch.shape[1]:
            table.scratch = np.zeros((4, max(need, len(table.nl), 2 * table.scratch.shape[1])), np.int64)
        while planned and len(table.group_free) < n:
            old = table.groups.shape[1]
            table.groups = np.concatenate([table.groups, np.zeros_like(table.groups)], axis=1)
            table.group_free = list(range(2 * old - 1, old - 1, -1)) + table.group_free
        free = np.zeros(len(table.nl), np.int64)
        free[:len(table.free)] = table.free
        gfree = np.zeros(table.groups.shape[1], np.int64)
        gfree[:len(table.group_free)] = table.group_free
        posted = np.array([self.bytes_posted.get(c, 0.0) for c in conns])
        delivered = np.array([self.bytes_delivered.get(c, 0.0) for c in conns])
        c_qps = np.zeros(n, np.int64)
        size = float(size_bytes)
        (iv, fv, done_t, done_order, r_fid, r_conn, r_start, r_end, r_paths, stale, n_stale) = _ring_kernel(
            table.slot_int, table.links, table.w, table.pos, table.num, table.rows, table.roww, table.link_int,
            table.link_flt, table.scratch, table.hkeys, table.hvals, table.stats, table.groups, free, len(table.free),
            gfree, len(table.group_free), rr.c_links, rr.c_w, rr.c_nl, rr.c_cap, rr.c_delay, rr.c_paths,
            np.asarray(receiver, np.int64), planned, rr.p_links, rr.p_nl, rr.p_delay, rr.c_group, rr.c_rank, rr.g_s,
            rr.g_cursor, rr.plan, size, n_msgs, chunks, posted, delivered, c_qps, env.now, self.tolerance_s, self._next_t, self._next_fid,
            self.record_flows, table.rtol, table.prune)
        self.ring_runs += 1
        # Write back what the SimPy path would have left behind.
        table.free = free[:iv[RING_NFREE]].tolist()
        table.group_free = gfree[:iv[RING_NGFREE]].tolist()
        self._next_fid = int(iv[RING_FID])
        self._next_t = float(fv[RING_NEXT_T])
        stats = self._stats
        stats["flows"] += int(iv[RING_FLOWS])
        stats["flushes"] += int(iv[RING_FLUSHES])
        stats["subflows"] += int(iv[RING_SUBFLOWS])
        self._grouped += int(iv[RING_GROUPED])
        qps = self.queue_pairs
        for c, p, d, q in zip(conns, posted.tolist(), delivered.tolist(), c_qps.tolist()):
            self.bytes_posted[c] = p
            self.bytes_delivered[c] = d
            if qps.get(c, 0) < q:
                qps[c] = q
        if planned:
            self._ring_replan(conns, rr)
        if self.record_flows:
            heads = [(c.label(), c.src, c.dst, c.channel, c.job, size) for c in conns]
            self.flow_records.extend((fid, *heads[i], t0, t1, k) for fid, i, t0, t1, k in
                                     zip(r_fid.tolist(), r_conn.tolist(), r_start.tolist(), r_end.tolist(),
                                         r_paths.tolist()))
        end = float(done_t.max())
        stale = stale[:n_stale]
        # Timers the run left in the future stay on SimPy's schedule, stale (they fire as no-ops).
        token = self._timer_token
        self._timer_token += int(iv[RING_NTIMERS])
        for t in stale[stale >= end].tolist():
            token += 1
            self.push_event(t, TIMER_PRIORITY, self._on_timer, token)
        if iv[RING_TVALID]:
            self._timer_at = float(fv[RING_TIMER_AT])
            self.push_event(float(fv[RING_TIMER_FIRE]), TIMER_PRIORITY, self._on_timer, self._timer_token)
        # The events the processes would have processed: each rank's start, every arrival, flush
        # and timer (stale ones before the end too); each rank's end is the event its caller gets.
        if isinstance(env, Environment):
            env._virtual_events += (n + int(iv[RING_EARR]) + int(iv[RING_EFLUSH]) + int(iv[RING_ETIMER])
                                    + int((stale < end).sum()))
        return done_t, done_order

    def _ring_fixed(self, conns: list[Connection]) -> _RingRoutes | None:
        """The kernel's route arguments for connections with fixed routes (their incidence), or None."""
        entries = [self._incidence(c, self.routing.paths(c)) for c in conns]
        if any(not e[2] or not e[4] >= 0 for e in entries):
            return None
        n = len(conns)
        width = max(len(e[2]) for e in entries)
        c_links = np.zeros((n, width), np.int64)
        c_w = np.zeros((n, width))
        for i, e in enumerate(entries):
            c_links[i, :len(e[2])] = e[0]
            c_w[i, :len(e[2])] = e[1]
        all_links = np.concatenate([e[0] for e in entries])
        none_i = np.zeros(0, np.int64)
        return _RingRoutes(c_links, c_w, np.array([len(e[2]) for e in entries], np.int64), np.full(n, math.inf),
                           np.array([e[4] for e in entries]), np.array([e[6] for e in entries], np.int64),
                           np.zeros((0, 0, 1), np.int64), np.zeros((0, 0), np.int64), np.zeros((0, 0)), none_i,
                           none_i, none_i, none_i, np.zeros((3, 0)), n, int(np.bincount(all_links).max()),
                           len(all_links))

    def _ring_planned(self, conns: list[Connection]) -> _RingRoutes | None:
        """The kernel's route arguments under Ethereal: every connection's candidate paths (in the
        policy's uplink order), its batch group (sender NIC, uplink set) and sort rank, the groups'
        uplink counts and cursors; None if a path crosses no link."""
        routing, topo = self.routing, self.topology
        n = len(conns)
        options = [routing.options(c.src, c.dst, c.tcp) for c in conns]
        group_keys = [(topo.nic_of(c.src), id(opt[0])) for c, opt in zip(conns, options)]
        index: dict[tuple, int] = {}
        c_group = np.array([index.setdefault(k, len(index)) for k in group_keys], np.int64)
        keys = list(index)
        g_s = np.zeros(len(keys), np.int64)
        g_s[c_group] = [len(opt[0]) for opt in options]
        g_cursor = np.array([routing._cursor[k] for k in keys], np.int64)  # (a defaultdict: creates them, as plan)
        order = {key: r for r, key in enumerate(sorted({(c.dst, c.channel, c.job, c.comm) for c in conns}))}
        c_rank = np.array([order[(c.dst, c.channel, c.job, c.comm)] for c in conns], np.int64)
        s_max = int(g_s.max())
        per_path = [[self._incidence((c, 0), [(path, 1.0)], 0) for path in opt[2]] for c, opt in zip(conns, options)]
        if any(not e[2] or not e[4] >= 0 for paths in per_path for e in paths):
            return None
        width = max(len(e[2]) for paths in per_path for e in paths)
        p_links = np.zeros((n, s_max, width), np.int64)
        p_nl = np.zeros((n, s_max), np.int64)
        p_delay = np.zeros((n, s_max))
        for i, paths in enumerate(per_path):
            for p, e in enumerate(paths):
                p_links[i, p, :len(e[2])] = e[0]
                p_nl[i, p] = len(e[2])
                p_delay[i, p] = e[4]
        all_links = np.concatenate([e[0] for paths in per_path for e in paths])
        none_i = np.zeros(0, np.int64)
        return _RingRoutes(np.zeros((0, 1), np.int64), np.zeros((0, 1)), none_i, np.full(n, math.inf), np.zeros(n),
                           none_i, p_links, p_nl, p_delay, c_group, c_rank, g_s, g_cursor, np.zeros((3, n)),
                           int((p_nl > 0).sum()), int(np.bincount(all_links).max()), len(all_links), options, keys)

    def _ring_replan(self, conns: list[Connection], rr: _RingRoutes) -> None:
        """Leave Ethereal as its plans would have: each group's cursor, each connection's last window."""
        routing, plan = self.routing, rr.plan
        for key, cursor in zip(rr.keys, rr.g_cursor.tolist()):
            routing._cursor[key] = cursor
        for c, opt, at, k, frac in zip(conns, rr.options, plan[0].tolist(), plan[1].tolist(), plan[2].tolist()):
            routes = Window(opt[2], int(at), int(k), frac)
            if routes != routing._routes.get(c):
                routing._routes[c] = routes

    def push_event(self, t: float, priority: float = NORMAL, callback: Callable | None = None,
                   value: object = None) -> simpy.Event:
        """Schedule a triggered event at exactly ``t`` (not ``now + (t - now)``, which may round)."""
        ev = simpy.Event(self.env)
        ev._ok = True
        ev._value = value
        if callback is not None:
            ev.callbacks.append(callback)
        heapq.heappush(self.env._queue, (t, priority, next(self.env._eid), ev))
        return ev

    # ----------------------------------------------------------------- batching
    def _arm_flush(self) -> None:
        if not self._flush_armed:
            self._flush_armed = True
            ev = simpy.Event(self.env)
            ev.callbacks.append(self._flush)
            _schedule(self.env, ev, 0.0, FLUSH_PRIORITY)

    def _flush(self, _event: simpy.Event) -> None:
        """Apply this instant's completions, faults and new sends, then re-solve what they touched."""
        self._flush_armed = False
        self._stats["flushes"] += 1
        now = self.env.now
        seeds: set[int] = set()
        drained, self._drained = self._drained, []
        for flow in drained:
            if flow.group < 0:
                self._complete(flow, now, seeds)
            else:
                self._group_done(flow, now)
        if self._actions:
            actions, self._actions = self._actions, []
            for action in actions:
                action(now, seeds)
        # Messages starting now: those behind a drained one on their connection, then new ones.
        if self._starting or self._pending:  # perf: a completion-only instant skips this
            starting = self._starting + self._pending
            self._starting, self._pending = [], []
            plan = self._plan
            while starting:
                if plan is not None:
                    plan([f.conn for f in starting])
                for flow in starting:
                    self._admit(flow, now, seeds)
                starting, self._starting = self._starting, []  # behind empty messages: start now too
        if self._table is not None:
            if self._removes or self._adds or self._bulk or seeds or self._table.drained:
                self._table_flush(seeds, now)
        elif seeds:
            self._resolve(seeds, now)
        if self._offer_pending or self._spray_pending:
            self._apply_offers()
        self._arm_timer()

    def _incidence(self, key, routes: Routes, index: int | None = None) -> tuple:
        """Incidence of ``routes`` (or of its entry ``index`` alone, as a whole flow), cached per key and routes.

        Returns (links, weights, link list, weight list, delay, solo rate, n_paths, edge rate, core
        (link, weight) pairs).
        """
        if index is not None:
            # A sub-flow's incidence depends only on its path (and endpoints): cache it per path,
            # so policies that plan new route lists every instant (ethereal) still hit.
            conn = key[0]
            key = (conn.src, conn.dst, conn.tcp, routes[index][0])
            cached = self._routes_cache.get(key)
            if cached is not None:
                return cached[1]
        else:
            conn = key
            cached = self._routes_cache.get(key)
            # perf: policies that plan per instant (c4p) hand out new but equal route lists
            if cached is not None and (cached[0] is routes or cached[0] == routes):
                return cached[1]
        use = [(routes[index][0], 1.0)] if index is not None else routes
        if len(use) == 1:
            links = np.array(use[0][0], dtype=np.int64)
            weights = np.ones(len(links))
        else:
            all_links = np.concatenate([np.asarray(p, dtype=np.int64) for p, _ in use])
            fractions = np.concatenate([np.full(len(p), frac) for p, frac in use])
            links, inverse = np.unique(all_links, return_inverse=True)
            weights = np.bincount(inverse, weights=fractions)
            keep = weights > 0
            links, weights = links[keep], weights[keep]
        if self._unbounded is not None:
            keep = ~self._unbounded[links]
            links, weights = links[keep], weights[keep]
        latency = max(self.topology.path_latency_s(p) for p, frac in use if frac > 0)
        delay = latency + self.topology.message_overhead_s(conn.src, conn.dst, conn.tcp)
        link_list, weight_list = links.tolist(), weights.tolist()
        # Rate the flow would get alone: its single-flow component is solved without numpy.
        cap = self._cap
        solo = min((cap[lk] / w for lk, w in zip(link_list, weight_list)), default=math.inf)
        edge, core_pairs = math.inf, ()
        if self.track_congestion:
            core = self._core
            edge = min((cap[lk] / w for lk, w in zip(link_list, weight_list) if not core[lk]), default=math.inf)
            core_pairs = tuple((lk, w) for lk, w in zip(link_list, weight_list) if core[lk])
        entry = (links, weights, link_list, weight_list, delay, solo, len(use), edge, core_pairs)
        self._routes_cache[key] = (routes, entry)
        return entry

    def _spray_pairs(self, src: int, dst: int, tcp: bool = False) -> list[tuple[int, float]]:
        """Core (link, weight) pairs of ``src -> dst`` sprayed evenly over all its equal-cost paths."""
        key = (src, dst, tcp)
        pairs = self._spray_cache.get(key)
        if pairs is None:
            paths = self.topology.paths(src, dst, tcp)
            share: dict[int, float] = defaultdict(float)
            for p in paths:
                for lk in p:
                    if self._core[lk]:
                        share[lk] += 1.0 / len(paths)
            pairs = self._spray_cache[key] = sorted(share.items())
        return pairs

    @staticmethod
    def _offer(pairs, demand: float, sign: float, pending: dict[int, list]) -> None:
        """Note a change of offered load; applied once per flush, so a message replaced by the next one
        on the same routes (every ring step) costs nothing. ``pairs`` are cached, so ids are stable."""
        entry = pending.get(id(pairs))
        if entry is None:
            pending[id(pairs)] = [pairs, sign * demand]
        else:
            entry[1] += sign * demand

    def _apply_offers(self) -> None:
        """Apply this flush's offered-load changes and raise the peaks of the links they touched."""
        nominal = self._nominal
        for pending, offered, peaks in ((self._offer_pending, self._offered, self._offered_peak),
                                        (self._spray_pending, self._spray_offered, self._spray_peak)):
            for pairs, amount in pending.values():
                if amount == 0.0:
                    continue
                for lk, w in pairs:
                    load = offered[lk] = offered[lk] + w * amount
                    if load > peaks[lk] * nominal[lk]:
                        peaks[lk] = load / nominal[lk]
            pending.clear()

    def _admit(self, flow: _Flow, now: float, seeds: set[int]) -> None:
        conn = flow.conn
        routes = self.routing.paths(conn)
        flow.routes = routes
        flow.t_upd = now
        self._stats["flows"] += 1
        split = self._independent and len(routes) > 1 and flow.size > 0
        if split and not self.track_congestion and self._unbounded is None:
            entry = None  # perf: the merged incidence of all sub-flows is not needed
            split = type(routes) is Window or any(path for path, _frac in routes)
        else:
            entry = self._incidence(conn, routes)
            split = split and bool(entry[2])
        n_sub = len(routes) if split else 1
        qps = self.queue_pairs
        if n_sub > 1 or conn not in qps:
            if qps.get(conn, 0) < n_sub:
                qps[conn] = n_sub
        if self.track_congestion:
            flow.demand = min(flow.cap, entry[7])
            flow.spray = self._spray_pairs(conn.src, conn.dst, conn.tcp)
            self._offer(flow.spray, flow.demand, 1.0, self._spray_pending)
        if not split:
            self._place(flow, entry if entry is not None else self._incidence(conn, routes), now, seeds)
            return
        if self._bulk_ok and self._admit_group(flow, routes, n_sub):
            return
        # CORRECTNESS: count every sub-flow before placing any: one that finishes at once (a
        # fraction of a tiny message rounds to 0 bytes) must not finish the message early.
        flow.pending, flow.arrive, flow.n_paths = sum(frac > 0 for _p, frac in routes), now, n_sub
        for i, (_path, frac) in enumerate(routes):
            if frac <= 0:
                continue
            child = _Flow(self._next_fid, conn, flow.size * frac, flow.cap * frac, flow.start, None)
            self._next_fid += 1
            child.parent, child.index, child.routes = flow, i, routes
            if self.track_congestion:
                child.demand = flow.demand * frac
            self._stats["subflows"] += 1
            self._place(child, self._incidence((conn, i), routes, i), now, seeds)

    def _admit_group(self, flow: _Flow, routes: Routes, n_sub: int) -> bool:
        """Hand a split message's pieces to the table as one group (no object per piece); False if
        a piece needs the per-piece path (one with no links, or a size that rounds to 0 bytes)."""
        conn = flow.conn
        cached = self._bulk_cache.get(conn)
        if type(routes) is Window and 2 * len(routes) >= len(routes.base):
            # perf: the pieces are consecutive paths of a base: slices of the base's cached incidence
            # (when they are at least half of it: a few pieces of a large base are cached alone)
            base = routes.base
            if cached is None or cached[0] is not base:
                cached = self._bulk_cache[conn] = (base, self._window_incidence(conn, base))
            entry = cached[1]
            frac = routes.frac
            if entry is None or not flow.size * frac > 0.0:
                return False
            links2, w2, nl2, fd2, offsets, width = entry
            a, k = routes.at, len(routes)
            lo, hi = offsets[a], offsets[a + k]
            pieces = (links2[lo:hi], nl2[a:a + k], w2[lo:hi], fd2[:, a:a + k], k, range(k), width)
            cap, size = flow.cap * frac, flow.size * frac  # the fraction is folded in: fd2[0] is 1.0
        else:
            if cached is None or not (cached[0] is routes or cached[0] == routes):
                cached = self._bulk_cache[conn] = (routes, self._group_incidence(conn, routes))
            if cached[1] is None:
                return False
            pieces, least = cached[1]
            if flow.size * least == 0.0:
                return False
            cap, size = flow.cap, flow.size
        links, nls, weights, fd, k, index, width = pieces
        table = self._table
        g = table.alloc_group()
        if flow.succ:
            table.groups[2, g] = 1.0
        # (a grouped message's ``index``: the route entry of each piece, by fid - fid0)
        flow.group, flow.fid0, flow.index, flow.n_paths = g, self._next_fid, index, n_sub
        self._groups[g] = flow
        self._bulk.append((table.alloc_many(k, width), links, nls, weights, fd, k, cap, size, self._next_fid, g))
        self._next_fid += k
        self._stats["subflows"] += k
        self._grouped += 1
        return True

    def _window_incidence(self, conn: Connection, base: tuple) -> tuple | None:
        """Incidence of every path of ``base`` as one whole flow, laid out twice (a window that wraps
        is one slice): (links, weights, links per path, (1.0, delay) per path, offset of each path's
        links, most links); None if a path crosses no link."""
        entries = [self._incidence((conn, 0), [(path, 1.0)], 0) for path in base]
        if not all(e[2] for e in entries):
            return None
        entries = entries + entries
        nls = np.array([len(e[2]) for e in entries], np.int64)
        fd = np.array((np.ones(len(entries)), [e[4] for e in entries]), np.float64)
        offsets = np.concatenate(([0], np.cumsum(nls))).tolist()
        return (np.concatenate([e[0] for e in entries]), np.concatenate([e[1] for e in entries]), nls, fd, offsets,
                int(nls.max()))

    def _group_incidence(self, conn: Connection, routes: Routes) -> tuple | None:
        """The pieces of ``routes`` with a positive fraction, for the table: ((links concatenated, links
        per piece, weights, (fraction, delay) per piece, pieces, route index per piece, most links),
        least fraction); None if a piece crosses no link."""
        entries, index = [], []
        for i, (_path, frac) in enumerate(routes):
            if frac > 0:
                entry = self._incidence((conn, i), routes, i)
                if not entry[2]:
                    return None
                entries.append((entry, frac))
                index.append(i)
        nls = np.array([len(e[2]) for e, _ in entries], np.int64)
        fd = np.array(([frac for _, frac in entries], [e[4] for e, _ in entries]), np.float64)
        return ((np.concatenate([e[0] for e, _ in entries]), nls, np.concatenate([e[1] for e, _ in entries]), fd,
                 len(entries), index, int(nls.max())), float(fd[0].min()))

    def _group_done(self, flow: _Flow, now: float) -> None:
        """The last piece of the split message ``flow`` drained: deliver it."""
        table = self._table
        flow.arrive = float(table.groups[1, flow.group])
        table.group_free.append(flow.group)
        flow.group = -1
        flow.delay = flow.arrive - now
        self._finish(flow, now)
        self._next_on_connection(flow.conn)

    def _ungroup(self, now: float) -> None:
        """Give every piece still in flight of a grouped message its own object (as if admitted one by
        one), so that a reroute can move it."""
        table = self._table
        slots, gids = table.live_pieces()
        for slot, g in zip(slots.tolist(), gids.tolist()):
            parent = self._groups[g]
            fid = int(table.num[slot, FID])
            routes = parent.routes
            i = parent.index[fid - parent.fid0]
            frac = routes[i][1]
            child = _Flow(fid, parent.conn, parent.size * frac, parent.cap * frac, parent.start, None)
            child.parent, child.index, child.routes, child.t_upd = parent, i, routes, now
            (child.links, child.weights, child.link_list, child.weight_list, child.delay, child.solo,
             _n, _edge, _core) = self._incidence((parent.conn, i), routes, i)
            child.slot, child.tab = slot, table
            self._by_slot[slot] = child
            self._flows[fid] = child
        for g, parent in self._groups.items():
            parent.pending, parent.arrive = int(table.groups[0, g]), float(table.groups[1, g])
            parent.group = -1
            table.group_free.append(g)
        table.slot_int[GRP, slots] = 0
        table.slot_int[SUCC, slots] = 1  # pieces now: each drain may finish its message
        self._groups.clear()

    def _place(self, flow: _Flow, entry: tuple, now: float, seeds: set[int]) -> None:
        """Give ``flow`` the incidence ``entry`` and put it on its links (or finish it if it needs none)."""
        (flow.links, flow.weights, flow.link_list, flow.weight_list, flow.delay, flow.solo,
         n_paths, _edge, core_pairs) = entry
        if flow.parent is None:
            flow.n_paths = n_paths
        flow.t_upd = now
        if flow.size == 0 or not flow.link_list:
            self._done(flow, now, seeds)
            return
        if self.track_congestion:
            flow.offered = core_pairs
            self._offer(core_pairs, flow.demand, 1.0, self._offer_pending)
        self._flows[flow.fid] = flow
        table = self._table
        if table is not None:  # the flush's kernel call adds it (and seeds its links)
            slot = flow.slot = table.alloc(len(flow.link_list))
            flow.tab = table
            if flow.succ or flow.parent is not None:  # (a piece's drain may finish its message)
                table.slot_int[SUCC, slot] = 1
            self._by_slot[slot] = flow
            self._adds.append((slot, flow.links, flow.weights, flow.cap, flow.remaining, flow.fid, flow.size - flow.acct))
            return
        for link in flow.link_list:
            self._link_flows[link].add(flow.fid)
        seeds.update(flow.link_list)

    def _complete(self, flow: _Flow, now: float, seeds: set[int]) -> None:
        del self._flows[flow.fid]
        if self._table is not None:
            # Drained: the table counted its bytes and removes its slot at this flush.
            del self._by_slot[flow.slot]
            flow._rate = 0.0
            flow.tab, flow.slot = None, -1
        else:
            for link in flow.link_list:
                self._link_flows[link].discard(flow.fid)
            seeds.update(flow.link_list)
            size, link_bytes = flow.size - flow.acct, self._bytes
            for link, w in zip(flow.link_list, flow.weight_list):
                link_bytes[link] += size * w
        if self.track_congestion:
            self._offer(flow.offered, flow.demand, -1.0, self._offer_pending)
        self._done(flow, now, seeds)

    def _done(self, flow: _Flow, now: float, seeds: set[int]) -> None:
        """``flow`` has drained: finish its message (a sub-flow: once its siblings have drained too)."""
        parent = flow.parent
        if parent is not None:
            parent.pending -= 1
            arrive = now + flow.delay
            if arrive > parent.arrive:
                parent.arrive = arrive
            if parent.pending:
                return
            parent.delay = parent.arrive - now
            flow = parent
        self._finish(flow, now)
        self._next_on_connection(flow.conn)

    def _next_on_connection(self, conn: Connection) -> None:
        """Start the next queued message of ``conn`` in this instant, or mark the connection idle."""
        queue = self._conn_queue[conn]
        if queue:
            flow = queue.cur = queue.popleft()
            flow.succ = bool(queue)  # (not placed yet: flagged when it is)
            self._starting.append(flow)
        else:
            del self._conn_queue[conn]

    def _mark_successor(self, flow: _Flow) -> None:
        """A message now waits behind ``flow``: its completion will start one (the table must not
        re-solve at its drain before that message is added)."""
        flow.succ = True
        table = self._table
        if table is None:
            return
        if flow.group >= 0:
            table.groups[2, flow.group] = 1.0
        elif flow.tab is not None:
            table.slot_int[SUCC, flow.slot] = 1
        # otherwise not in the table yet (flagged when placed), or split into pieces (all flagged)

    def _finish(self, flow: _Flow, now: float) -> None:
        end = now + flow.delay
        _schedule(self.env, flow.event, flow.delay)
        self.bytes_delivered[flow.conn] += flow.size
        if self.track_congestion:
            self._offer(flow.spray, flow.demand, -1.0, self._spray_pending)
        if self.record_flows:
            c = flow.conn
            self.flow_records.append((flow.fid, c.label(), c.src, c.dst, c.channel, c.job, flow.size,
                                      flow.start, end, flow.n_paths))

    # ----------------------------------------------------------------- faults
    def _apply_capacity(self, changes: dict[int, float], now: float, seeds: set[int]) -> None:
        for link, cap in changes.items():
            self._cap[link] = cap
            self._cap_arr[link] = cap
        self._routes_cache.clear()  # cached solo/edge rates used the old capacities
        cap_ = self._cap
        for link in changes:
            for fid in self._link_flows.get(link, ()):
                flow = self._flows[fid]
                flow.solo = min((cap_[lk] / w for lk, w in zip(flow.link_list, flow.weight_list)), default=math.inf)
        seeds.update(changes)

    def _reroute(self, state: dict[int, float], now: float, seeds: set[int]) -> None:
        """Tell the policy about ``state``, then move every in-flight (sub-)flow whose routes changed."""
        changed = getattr(self.routing, "links_changed", None)
        if changed is None:
            return
        changed(state)
        if self._groups:
            self._ungroup(now)
        self._routes_cache.clear()
        self._bulk_cache.clear()
        updated: dict[int, tuple[_Flow, Routes]] = {}
        for flow in list(self._flows.values()):
            conn, parent = flow.conn, flow.parent
            routes = self.routing.paths(conn)
            if parent is None:
                if routes is flow.routes:
                    continue
                flow.routes = routes
                entry = self._incidence(conn, routes)
            else:
                if routes is parent.routes:
                    continue
                updated[id(parent)] = (parent, routes)
                index = flow.index % len(routes)
                entry = self._incidence((conn, index), routes, index)
            if entry[2] != flow.link_list:
                self._move(flow, entry, now, seeds)
        for parent, routes in updated.values():
            parent.routes = routes

    def _move(self, flow: _Flow, entry: tuple, now: float, seeds: set[int]) -> None:
        """Reroute an in-flight flow: bytes carried so far stay on the old links, the rest takes ``entry``."""
        if self._table is not None:
            if self._pending_add(flow.slot) is None:  # in the table: its bytes left as of now
                flow.remaining = self._table.remaining(flow.slot, now)
            self._unplace(flow)
        else:
            flow.remaining = max(flow.remaining - flow._rate * (now - flow.t_upd), 0.0)
            for link in flow.link_list:
                self._link_flows[link].discard(flow.fid)
            seeds.update(flow.link_list)
        flow.t_upd = now
        carried = flow.size - flow.remaining - flow.acct
        link_bytes = self._bytes if self._table is None else self._table.link_bytes
        for link, w in zip(flow.link_list, flow.weight_list):
            link_bytes[link] += carried * w
        flow.acct += carried
        if self.track_congestion:
            self._offer(flow.offered, flow.demand, -1.0, self._offer_pending)
        del self._flows[flow.fid]
        flow.version += 1  # its pending completion time is stale
        flow._rate = 0.0
        self._stats["reroutes"] += 1
        self._place(flow, entry, now, seeds)

    # ----------------------------------------------------------------- rates
    def _unplace(self, flow: _Flow) -> None:
        """Take ``flow`` out of the flow table (at this flush's kernel call, or now if not yet added)."""
        slot = flow.slot
        del self._by_slot[slot]
        i = self._pending_add(slot)
        if i is None:
            self._removes.append(slot)
        else:  # added in this same instant: it never reached the table
            del self._adds[i]
            self._table.slot_int[SUCC, slot] = 0
            self._table.free.append(slot)
        flow._rate = 0.0
        flow.tab, flow.slot = None, -1

    def _pending_add(self, slot: int) -> int | None:
        """Index in this instant's adds of the flow in ``slot``, if it has not reached the table yet."""
        adds = self._adds
        if not adds:  # perf: the common case (completions are handled before this instant's adds)
            return None
        return next((i for i, add in enumerate(adds) if add[0] == slot), None)

    def _table_flush(self, seeds: set[int], now: float) -> None:
        """One kernel call: removes, adds, re-solve of the touched components, new link loads."""
        table = self._table
        n, self._next_t = table.flush(self._removes, self._adds, self._bulk, seeds, now)
        self._removes, self._adds, self._bulk = [], [], []
        self._series_out(n, now)

    def _series_out(self, n: int, now: float) -> None:
        """Note in the link series the intervals the table's last re-solve closed on ``n`` links."""
        series, table = self.link_series, self._table
        if series is not None and n:
            for link, t0, old in zip(table.out_links[:n].tolist(), table.out_t0[:n].tolist(),
                                     table.out_old[:n].tolist()):
                if old > 0:
                    series.add(link, t0, now, old)

    def _components(self, seeds: set[int]) -> list[list[_Flow]]:
        """The connected components (flows linked through shared links) that touch any seed link."""
        flows = self._flows
        link_flows = self._link_flows
        seen_links: set[int] = set()
        seen_flows: set[int] = set()
        components = []
        for seed in seeds:
            if seed in seen_links:
                continue
            seen_links.add(seed)
            stack = [seed]
            comp = []
            while stack:
                for fid in link_flows.get(stack.pop(), ()):
                    if fid not in seen_flows:
                        seen_flows.add(fid)
                        flow = flows[fid]
                        comp.append(flow)
                        for link in flow.link_list:
                            if link not in seen_links:
                                seen_links.add(link)
                                stack.append(link)
            if comp:
                components.append(comp)
        return components

    def _resolve(self, seeds: set[int], now: float) -> None:
        """Re-solve every component touched by ``seeds``; flows elsewhere keep their rates exactly."""
        for comp in self._components(seeds):
            self._solve_component(comp, now)
        # Links that lost their last flow drop to zero load.
        link_flows = self._link_flows
        self._set_loads(((s, 0.0) for s in seeds if not link_flows.get(s)), now)

    def _solve_component(self, comp: list[_Flow], now: float) -> None:
        for flow in comp:
            flow.remaining = max(flow.remaining - flow._rate * (now - flow.t_upd), 0.0)
            flow.t_upd = now
        n = len(comp)
        if n == 1:
            flow = comp[0]
            rate = min(flow.cap, flow.solo)
            rates = [rate]
            self._set_loads(zip(flow.link_list, [w * rate for w in flow.weight_list]), now)
        elif n <= self.small_component:
            rates = progressive_filling_lists([f.link_list for f in comp], [f.weight_list for f in comp], self._cap,
                                              [f.cap for f in comp])
            loads: dict[int, float] = {}
            for f, rate in zip(comp, rates):
                for link, w in zip(f.link_list, f.weight_list):
                    loads[link] = loads.get(link, 0.0) + w * rate
            self._stats["solver_calls"] += 1
            self._set_loads(loads.items(), now)
        else:
            all_links = np.concatenate([f.links for f in comp])
            touched, local = np.unique(all_links, return_inverse=True)
            entry_w = np.concatenate([f.weights for f in comp])
            entry_f = np.repeat(np.arange(n), [len(f.link_list) for f in comp])
            caps = np.array([f.cap for f in comp])
            rate_arr = self.solver(entry_f, local, entry_w, self._cap_arr[touched], n, caps)
            loads = np.bincount(local, weights=entry_w * rate_arr[entry_f], minlength=len(touched))
            self._stats["solver_calls"] += 1
            rates = rate_arr.tolist()
            self._set_loads(zip(touched.tolist(), loads.tolist()), now)
        self._stats["solved_flows"] += n
        if n > self._stats["max_component"]:
            self._stats["max_component"] = n
        heap = self._heap
        for flow, rate in zip(comp, rates):
            flow._rate = rate
            flow.version += 1
            if rate > 0:
                heapq.heappush(heap, (now + flow.remaining / rate, flow.fid, flow.version))

    def _set_loads(self, pairs, now: float) -> None:
        """Set new loads on links, closing their busy-time interval and raising their peaks."""
        load_, t_, busy_, peak_, cap_ = self._load, self._link_t, self._busy, self._peak, self._nominal
        series = self.link_series
        if series is not None:
            rows, w, limit = series.rows, series.width, series.limit
        for link, load in pairs:
            old = load_[link]
            if old > 0:
                t0 = t_[link]
                busy_[link] += now - t0
                if series is not None:
                    # perf: the common case (same bin, row exists) inline; the rest in LinkSeries.add
                    row = rows.get(link)
                    i = int(t0 / w)
                    if row is not None and now <= limit and int(now / w) == i:
                        row[i] += old * (now - t0)
                    else:
                        series.add(link, t0, now, old)
                        rows, w, limit = series.rows, series.width, series.limit
            t_[link] = now
            load_[link] = load
            util = load / cap_[link]
            if util > peak_[link]:
                peak_[link] = util

    # ----------------------------------------------------------------- completions
    def _arm_timer(self) -> None:
        if self._table is not None:
            t = self._next_t
            if t < self._timer_at:
                self._schedule_timer(t)
            return
        heap, flows = self._heap, self._flows
        while heap:
            _, fid, version = heap[0]
            flow = flows.get(fid)
            if flow is not None and flow.version == version:
                break
            heapq.heappop(heap)
        if not heap:
            return
        t = heap[0][0]
        if t < self._timer_at:
            self._schedule_timer(t)

    def _schedule_timer(self, t: float) -> None:
        """Wake up at ``t`` to drain the flows finishing then (supersedes any later wake-up)."""
        self._timer_at = t
        self._timer_token += 1
        ev = simpy.Event(self.env)
        ev.callbacks.append(self._on_timer)
        _schedule(self.env, ev, max(t - self.env.now, 0.0), TIMER_PRIORITY)
        ev._value = self._timer_token

    def _on_timer(self, event: simpy.Event) -> None:
        if event._value != self._timer_token:
            return  # superseded by an earlier timer
        self._timer_at = math.inf
        horizon = self.env.now + self.tolerance_s
        if self._table is not None:
            # Nothing else happens in this instant (yet): the drain can remove and re-solve too.
            fuse = not (self._flush_armed or self._actions or self._pending or self._starting)
            codes, n, t_next = self._table.drain(horizon, self.env.now, fuse)
            if n >= 0:
                self._fused_flush(codes, n, t_next)
                return
            if len(codes):
                by_slot, groups = self._by_slot, self._groups
                self._drained.extend([by_slot[c] if c >= 0 else groups.pop(-c - 1) for c in codes.tolist()])
                self._flush_drained()
            elif self._table.drained:  # pieces drained, no message complete: remove them now
                self._flush_drained()
            else:
                self._arm_timer()
            return
        heap, flows = self._heap, self._flows
        drained = False
        while heap and heap[0][0] <= horizon:
            _, fid, version = heapq.heappop(heap)
            flow = flows.get(fid)
            if flow is not None and flow.version == version:
                flow.version += 1  # CORRECTNESS: a drained flow is never drained twice
                self._drained.append(flow)
                drained = True
        if drained:
            self._flush_drained()
        else:
            self._arm_timer()

    def _fused_flush(self, codes: np.ndarray, n: int, t_next: float) -> None:
        """The rest of a completion-only instant whose drain also removed and re-solved (the flush
        it replaces: same steps, same order, one kernel call)."""
        now = self.env.now
        self._stats["flushes"] += 1
        self._next_t = t_next
        self._series_out(n, now)
        by_slot, groups, seeds = self._by_slot, self._groups, set()
        for c in codes.tolist():
            if c >= 0:
                self._complete(by_slot[c], now, seeds)
            else:
                self._group_done(groups.pop(-c - 1), now)
        if self._starting:  # a successor flag was missing: start it now (correct, not fused)
            self._fuse_misses += 1
            self._flush(None)
            return
        if self._offer_pending or self._spray_pending:
            self._apply_offers()
        self._arm_timer()

    def _flush_drained(self) -> None:
        # perf: the timer runs after every NORMAL event of its instant, where the flush would run:
        # flush right away instead of scheduling one more event (unless one is due: it takes them).
        if not self._flush_armed:
            self._flush(None)

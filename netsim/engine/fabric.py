"""The Fabric: fluid flow-level network on a SimPy clock (flow table, batching, completions, link stats).

Sends issued in one simulated instant are routed and solved together once the instant's other
events have run. Messages on one connection are transmitted in order, like work requests on an
RDMA queue pair: a message starts when the previous one on its connection has drained. Rates follow max-min fairness and are recomputed only for the connected part of
the flow/link contention graph that a change touches (max-min allocations decompose over
connected components, so the rest keeps its rates exactly).
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict, deque
from collections.abc import Callable

import numpy as np
import simpy
from simpy.events import NORMAL

from netsim.routing.base import Connection, RoutingPolicy, Routes
from netsim.solver import progressive_filling, progressive_filling_lists
from netsim.topology import Topology

#: SimPy priority of the per-instant flush: after every NORMAL event of the same instant.
FLUSH_PRIORITY = NORMAL + 1


class Environment(simpy.Environment):
    """A SimPy environment that counts the events it processes (for events/s in benchmarks)."""

    def __init__(self, initial_time: float = 0.0):
        super().__init__(initial_time)
        self.events_processed = 0

    def step(self) -> None:
        """Process the next event, counting it."""
        self.events_processed += 1
        super().step()


def _schedule(env: simpy.Environment, event: simpy.Event, delay: float = 0.0, priority: int = NORMAL) -> None:
    # perf: trigger an event `delay` from now without a helper Timeout (what Timeout.__init__ does);
    # halves the events per message compared with timeout + callback + succeed.
    event._ok = True
    event._value = None
    env.schedule(event, priority, delay)


class _Flow:
    """One message in flight: its incidence, progress and completion event."""

    __slots__ = ("fid", "conn", "size", "links", "weights", "link_list", "weight_list", "solo", "delay", "n_paths",
                 "cap",
                 "start", "remaining", "rate", "t_upd", "version", "event")

    def __init__(self, fid: int, conn: Connection, size: float, cap: float, start: float, event: simpy.Event):
        self.fid = fid
        self.conn = conn
        self.size = size
        self.cap = cap
        self.start = start
        self.remaining = size
        self.rate = 0.0
        self.t_upd = start
        self.version = 0
        self.event = event


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
        Max-min rate solver with the signature of :func:`netsim.solver.progressive_filling`.
    completion_tolerance_s:
        Flows whose last bytes drain within this time of each other complete together.
    record_flows:
        Keep one record per message (for ``flows.parquet``); turn off for the largest runs.
    small_component:
        Components of at most this many flows are solved by the list-based solver (same
        allocation, less overhead); larger ones by ``solver``.
    unbounded_links:
        Optional boolean mask of links that never limit a flow (left out of the contention
        graph): how :mod:`netsim.engine.ideal` makes a fabric's switching core non-blocking.

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
                 solver: Callable[..., np.ndarray] = progressive_filling,
                 completion_tolerance_s: float = 1e-9, record_flows: bool = True, small_component: int = 24,
                 unbounded_links: np.ndarray | None = None):
        self.env = env
        self._unbounded = unbounded_links
        self.topology = topology
        self.routing = routing
        self.solver = solver
        self.tolerance_s = completion_tolerance_s
        self.record_flows = record_flows
        self.small_component = small_component
        n_links = len(topology.links)
        self.capacity_Bps = topology.links.capacity_Bps.copy()
        # perf: per-link state lives in Python lists; flushes touch a handful of links each and
        # scalar list access is ~10x cheaper than numpy scalar indexing. Arrays via properties.
        self._cap = self.capacity_Bps.tolist()
        self._bytes = [0.0] * n_links
        self._busy = [0.0] * n_links
        self._peak = [0.0] * n_links
        self._load = [0.0] * n_links
        self._link_t = [0.0] * n_links
        self._link_flows: defaultdict[int, set[int]] = defaultdict(set)
        self._flows: dict[int, _Flow] = {}
        self._pending: list[_Flow] = []
        self._conn_queue: dict[Connection, deque[_Flow]] = {}
        self._drained: list[_Flow] = []
        self._routes_cache: dict[Connection, tuple[Routes, np.ndarray, np.ndarray, list[int], float]] = {}
        self._flush_armed = False
        self._heap: list[tuple[float, int, int]] = []
        self._timer_at = math.inf
        self._timer_token = 0
        self._next_fid = 0
        self.flow_records: list[tuple] = []
        self.stats = {"flows": 0, "solver_calls": 0, "solved_flows": 0, "max_component": 0, "flushes": 0}

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
        flow = _Flow(self._next_fid, conn, float(size_bytes), cap_Bps, self.env.now, event)
        self._next_fid += 1
        queue = self._conn_queue.get(conn)
        if queue is not None:
            queue.append(flow)  # the connection is busy: wait in its send queue
            return event
        self._conn_queue[conn] = deque()
        self._pending.append(flow)
        self._arm_flush()
        return event

    @property
    def link_bytes(self) -> np.ndarray:
        """Bytes each link has carried (completed messages)."""
        return np.array(self._bytes)

    @property
    def link_busy_s(self) -> np.ndarray:
        """Time each link carried any traffic (up to the last :meth:`finalize`)."""
        return np.array(self._busy)

    @property
    def link_peak_util(self) -> np.ndarray:
        """Highest load / capacity each link reached."""
        return np.array(self._peak)

    @property
    def link_load_Bps(self) -> np.ndarray:
        """Current load of each link."""
        return np.array(self._load)

    @property
    def active_flows(self) -> int:
        """Number of messages currently transmitting."""
        return len(self._flows)

    def finalize(self) -> None:
        """Close link busy-time accounting at the current time (call once the simulation ended)."""
        now = self.env.now
        for link, load in enumerate(self._load):
            if load > 0:
                self._busy[link] += now - self._link_t[link]
                self._link_t[link] = now

    # ----------------------------------------------------------------- batching
    def _arm_flush(self) -> None:
        if not self._flush_armed:
            self._flush_armed = True
            ev = simpy.Event(self.env)
            ev.callbacks.append(self._flush)
            _schedule(self.env, ev, 0.0, FLUSH_PRIORITY)

    def _flush(self, _event: simpy.Event) -> None:
        """Apply this instant's completions and new sends, then re-solve what they touched."""
        self._flush_armed = False
        self.stats["flushes"] += 1
        now = self.env.now
        seeds: set[int] = set()
        drained, self._drained = self._drained, []
        for flow in drained:
            self._complete(flow, now, seeds)
        pending, self._pending = self._pending, []
        if pending:
            plan = getattr(self.routing, "plan", None)
            if plan is not None:
                plan([f.conn for f in pending])
            for flow in pending:
                self._admit(flow, now, seeds)
        if seeds:
            self._resolve(seeds, now)
        self._arm_timer()

    def _incidence(self, conn: Connection) -> tuple:
        """(links, weights, link list, weight list, delay, solo rate, n_paths) of ``conn``, cached per routes."""
        routes = self.routing.paths(conn)
        cached = self._routes_cache.get(conn)
        if cached is not None and cached[0] is routes:
            return cached[1]
        if len(routes) == 1:
            links = np.array(routes[0][0], dtype=np.int64)
            weights = np.ones(len(links))
        else:
            all_links = np.concatenate([np.asarray(p, dtype=np.int64) for p, _ in routes])
            fractions = np.concatenate([np.full(len(p), frac) for p, frac in routes])
            links, inverse = np.unique(all_links, return_inverse=True)
            weights = np.bincount(inverse, weights=fractions)
            keep = weights > 0
            links, weights = links[keep], weights[keep]
        if self._unbounded is not None:
            keep = ~self._unbounded[links]
            links, weights = links[keep], weights[keep]
        latency = max(self.topology.path_latency_s(p) for p, frac in routes if frac > 0)
        delay = latency + self.topology.message_overhead_s(conn.src, conn.dst)
        link_list, weight_list = links.tolist(), weights.tolist()
        # Rate the flow would get alone: its single-flow component is solved without numpy.
        solo = min((self._cap[lk] / w for lk, w in zip(link_list, weight_list)), default=math.inf)
        entry = (links, weights, link_list, weight_list, delay, solo, len(routes))
        self._routes_cache[conn] = (routes, entry)
        return entry

    def _admit(self, flow: _Flow, now: float, seeds: set[int]) -> None:
        (flow.links, flow.weights, flow.link_list, flow.weight_list, flow.delay, flow.solo,
         flow.n_paths) = self._incidence(flow.conn)
        flow.t_upd = now
        self.stats["flows"] += 1
        if flow.size == 0 or not flow.link_list:
            self._finish(flow, now)
            self._next_on_connection(flow.conn, now, seeds)
            return
        self._flows[flow.fid] = flow
        for link in flow.link_list:
            self._link_flows[link].add(flow.fid)
        seeds.update(flow.link_list)

    def _complete(self, flow: _Flow, now: float, seeds: set[int]) -> None:
        del self._flows[flow.fid]
        for link in flow.link_list:
            self._link_flows[link].discard(flow.fid)
        seeds.update(flow.link_list)
        size, link_bytes = flow.size, self._bytes
        for link, w in zip(flow.link_list, flow.weight_list):
            link_bytes[link] += size * w
        self._finish(flow, now)
        self._next_on_connection(flow.conn, now, seeds)

    def _next_on_connection(self, conn: Connection, now: float, seeds: set[int]) -> None:
        """Start the next queued message of ``conn``, or mark the connection idle."""
        queue = self._conn_queue[conn]
        if queue:
            self._admit(queue.popleft(), now, seeds)
        else:
            del self._conn_queue[conn]

    def _finish(self, flow: _Flow, now: float) -> None:
        end = now + flow.delay
        _schedule(self.env, flow.event, flow.delay)
        if self.record_flows:
            c = flow.conn
            self.flow_records.append((flow.fid, c.label(), c.src, c.dst, c.channel, c.job, flow.size,
                                      flow.start, end, flow.n_paths))

    # ----------------------------------------------------------------- rates
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
            flow.remaining = max(flow.remaining - flow.rate * (now - flow.t_upd), 0.0)
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
            self.stats["solver_calls"] += 1
            self._set_loads(loads.items(), now)
        else:
            all_links = np.concatenate([f.links for f in comp])
            touched, local = np.unique(all_links, return_inverse=True)
            entry_w = np.concatenate([f.weights for f in comp])
            entry_f = np.repeat(np.arange(n), [len(f.link_list) for f in comp])
            caps = np.array([f.cap for f in comp])
            rate_arr = self.solver(entry_f, local, entry_w, self.capacity_Bps[touched], n, caps)
            loads = np.bincount(local, weights=entry_w * rate_arr[entry_f], minlength=len(touched))
            self.stats["solver_calls"] += 1
            rates = rate_arr.tolist()
            self._set_loads(zip(touched.tolist(), loads.tolist()), now)
        self.stats["solved_flows"] += n
        if n > self.stats["max_component"]:
            self.stats["max_component"] = n
        heap = self._heap
        for flow, rate in zip(comp, rates):
            flow.rate = rate
            flow.version += 1
            if rate > 0:
                heapq.heappush(heap, (now + flow.remaining / rate, flow.fid, flow.version))

    def _set_loads(self, pairs, now: float) -> None:
        """Set new loads on links, closing their busy-time interval and raising their peaks."""
        load_, t_, busy_, peak_, cap_ = self._load, self._link_t, self._busy, self._peak, self._cap
        for link, load in pairs:
            if load_[link] > 0:
                busy_[link] += now - t_[link]
            t_[link] = now
            load_[link] = load
            util = load / cap_[link]
            if util > peak_[link]:
                peak_[link] = util

    # ----------------------------------------------------------------- completions
    def _arm_timer(self) -> None:
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
            self._timer_at = t
            self._timer_token += 1
            ev = simpy.Event(self.env)
            ev.callbacks.append(self._on_timer)
            _schedule(self.env, ev, max(t - self.env.now, 0.0))
            ev._value = self._timer_token

    def _on_timer(self, event: simpy.Event) -> None:
        if event._value != self._timer_token:
            return  # superseded by an earlier timer
        self._timer_at = math.inf
        horizon = self.env.now + self.tolerance_s
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
            self._arm_flush()
        else:
            self._arm_timer()

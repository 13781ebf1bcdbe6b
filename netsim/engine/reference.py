"""The reference executor: the fluid network in plain Python, message by message, on SimPy.

It is the oracle the compiled executor (:mod:`netsim.engine.core`) is held to, as readable as
SimPy allows. A message is a :class:`_Flow` object; a connection's messages wait in a queue and go
one at a time; each instant's completions, faults and new messages are applied together by one
flush (after every ordinary SimPy event of the instant), which re-solves the max-min rates of the
components the changes touch; a timer wakes up at the next completion. A schedule
(:class:`~netsim.engine.model.Schedule`) runs as :class:`ScheduleRun`: a task is released when its
last dependency is done; a SEND is posted with :meth:`ReferenceFabric.send` and is done when it
arrives, a DELAY is a timeout, a JOIN is done at once.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict, deque

import numpy as np
import simpy
from simpy.events import NORMAL

from netsim.engine.clock import FLUSH_PRIORITY, TIMER_PRIORITY, Wakeup, delay_to
from netsim.engine.fabric import CORE_KINDS, Fabric
from netsim.engine.model import DELAY, SEND, Connection, Schedule
from netsim.engine.observers import LinkLoads, LinkSeries, OfferedLoad
from netsim.routing.base import Routes
from netsim.routing.routes import from_routes, routes_of
from netsim.solver import DEFAULT_SOLVER, SOLVERS, progressive_filling_lists
from netsim.topology import LINK_KINDS


class _Flow:
    """One message in flight (or one sub-flow of a split message): its incidence, progress and arrival."""

    __slots__ = (
        "acct",
        "arrive",
        "cap",
        "conn",
        "delay",
        "demand",
        "extra",
        "fid",
        "index",
        "link_list",
        "links",
        "n_paths",
        "notify",
        "offered",
        "parent",
        "pending",
        "rate",
        "remaining",
        "routes",
        "size",
        "solo",
        "spray",
        "start",
        "succ",
        "t_upd",
        "version",
        "weight_list",
        "weights",
    )

    def __init__(self, fid: int, conn: Connection, size: float, cap: float, start: float, notify):
        self.fid, self.conn, self.size, self.cap, self.start = fid, conn, size, cap, start
        self.remaining = size
        self.rate = 0.0
        self.t_upd = start
        self.version = 0
        self.notify = notify  # called when the message has arrived
        self.acct = 0.0       # bytes already added to link byte counters (before a reroute)
        self.parent: _Flow | None = None
        self.succ = False
        self.extra = 0.0      # what the message's overhead scale adds to its delay


class _ReferenceResults:
    """What a run of the reference executor leaves (a mixin of :class:`ReferenceFabric`)."""

    @property
    def current_capacity_Bps(self) -> np.ndarray:
        return self._cap_arr.copy()

    @property
    def stats(self) -> dict[str, int]:
        return dict(self._stats)

    @property
    def link_bytes(self) -> np.ndarray:
        return np.array(self._links.bytes)

    @property
    def link_busy_s(self) -> np.ndarray:
        return np.array(self._links.busy)

    @property
    def link_peak_util(self) -> np.ndarray:
        return np.array(self._links.peak)

    @property
    def link_load_Bps(self) -> np.ndarray:
        return np.array(self._links.load)

    @property
    def offered_peak(self) -> np.ndarray:
        return np.array(self._offers.peak)

    @property
    def spray_offered_peak(self) -> np.ndarray:
        return np.array(self._offers.spray_peak)

    @property
    def active_flows(self) -> int:
        return len({id(f.parent) if f.parent is not None else id(f) for f in self._flows.values()})

    @property
    def undelivered(self) -> int:
        return (len(self._flows) + len(self._pending) + len(self._starting)
                + sum(map(len, self._conn_queue.values())))

    def message_rates(self) -> dict[Connection, float]:
        """Each connection's message in flight and its rate now (a split message: its pieces' sum)."""
        rates: dict[Connection, float] = defaultdict(float)
        for flow in self._flows.values():
            rates[flow.conn] += flow.rate
        return dict(rates)

    def queue_pair_totals(self) -> tuple[int, int]:
        """(connections that carried a message, their queue pairs in all)."""
        return len(self.queue_pairs), sum(self.queue_pairs.values())

    def routes_used(self) -> dict[Connection, list[tuple[tuple[int, ...], float]]]:
        """The pieces of the routes each connection's latest message took: ``[(links, fraction), ...]``
        (one piece over the union of its paths unless the policy splits messages), as the compiled
        executor reports them."""
        out = {}
        for conn, routes in self._routes_used.items():
            table = from_routes(self.topology, [conn], [routes], bool(self.routing.independent))
            out[conn] = [(links, frac) for links, _w, frac in routes_of(table, 0)]
        return out

    def flow_columns(self) -> dict[str, np.ndarray]:
        names = ("flow_id", "connection", "src", "dst", "channel", "job", "size_bytes", "start_s", "end_s", "n_paths")
        cols = list(zip(*self.flow_records)) if self.flow_records else [()] * len(names)
        return {name: np.array(col, dtype=object if name == "connection" else None) for name, col in zip(names, cols)}

    def finalize(self) -> None:
        self._links.finalize(self.env.now)
        self._offers.finalize(self.env.now)



class ReferenceFabric(_ReferenceResults, Fabric):
    """The pure-Python executor (``Fabric(..., backend="reference")``); see the module docstring."""

    def __init__(self, env: simpy.Environment, topology, routing, *, solver=None, completion_tolerance_s: float = 1e-9,
                 record_flows: bool = True, small_component: int | None = None, unbounded_links=None,
                 track_congestion: bool = True, link_series_bins: int = 0, **_ignored):
        self.env, self.topology, self.routing = env, topology, routing
        self._unbounded = unbounded_links
        self.solver = solver if solver is not None else SOLVERS[DEFAULT_SOLVER]
        self.tolerance_s = completion_tolerance_s
        self.record_flows = record_flows
        self.small_component = small_component if small_component is not None else 24
        self.capacity_Bps = topology.links.capacity_Bps.copy()
        self._cap_arr = self.capacity_Bps.copy()
        self._cap = self.capacity_Bps.tolist()
        self.link_series = LinkSeries(link_series_bins) if link_series_bins > 0 else None
        self._links = LinkLoads(self.capacity_Bps, self.link_series)
        self.track_congestion = track_congestion
        self._offers = OfferedLoad(self.capacity_Bps)
        self._core = np.isin(topology.links.kind, [LINK_KINDS.index(k) for k in CORE_KINDS])
        self._link_flows: defaultdict[int, set[int]] = defaultdict(set)
        self._flows: dict[int, _Flow] = {}
        self._pending: list[_Flow] = []
        self._starting: list[_Flow] = []
        self._drained: list[_Flow] = []
        self._actions: list = []
        self._conn_queue: dict[Connection, deque] = {}
        self._current: dict[Connection, _Flow] = {}
        self._routes_cache: dict = {}
        self._routes_used: dict[Connection, Routes] = {}
        self._spray_cache: dict = {}
        self._tcp_comms: set[tuple[int, int]] = set()
        self._flush_armed = False
        self._heap: list[tuple[float, int, int]] = []
        self._timer_at = math.inf
        self._timer_token = 0
        self._next_fid = 0
        self.flow_records: list[tuple] = []
        self.queue_pairs: dict[Connection, int] = {}
        self.bytes_posted: defaultdict[Connection, float] = defaultdict(float)
        self.bytes_delivered: defaultdict[Connection, float] = defaultdict(float)
        self._stats = {"flows": 0, "solver_calls": 0, "solved_flows": 0, "max_component": 0, "flushes": 0,
                       "subflows": 0, "reroutes": 0}

    # ----------------------------------------------------------------- public API
    def send(self, src: int, dst: int, size_bytes: float, connection: Connection | None = None, *,
             cap_Bps: float = math.inf, event: simpy.Event | None = None, notify=None,
             overhead_scale: float = 1.0) -> simpy.Event | None:
        """Post ``size_bytes`` from GPU ``src`` to GPU ``dst``; the event fires when the last byte arrived
        (``notify``, if given, is called instead, and nothing is returned). The message pays
        ``overhead_scale`` times its connection's per-message overhead."""
        if not size_bytes >= 0:
            raise ValueError(f"size_bytes must be >= 0, got {size_bytes!r}")
        if notify is None:
            if event is None:
                event = self.env.event()
            notify = lambda _e=None, event=event: event.succeed()
        if src == dst:
            Wakeup(self.env, 0.0, NORMAL, notify)
            return event
        conn = connection if connection is not None else Connection(src, dst)
        if self._tcp_comms and (conn.job, conn.comm) in self._tcp_comms and not conn.tcp:
            conn = conn._replace(tcp=True)
        flow = _Flow(self._next_fid, conn, float(size_bytes), cap_Bps, self.env.now, notify)
        if overhead_scale != 1.0:
            flow.extra = (overhead_scale - 1.0) * self.topology.message_overhead_s(conn.src, conn.dst, conn.tcp)
        self._next_fid += 1
        self.bytes_posted[conn] += flow.size
        queue = self._conn_queue.get(conn)
        if queue is not None:
            queue.append(flow)  # the connection is busy: wait in its send queue
            self._current[conn].succ = True
            return event
        self._conn_queue[conn] = deque()
        self._current[conn] = flow
        self._pending.append(flow)
        self._arm_flush()
        return event

    def submit(self, schedule: Schedule) -> ScheduleRun:
        """Start ``schedule`` now (see :class:`ScheduleRun`)."""
        return ScheduleRun(self.env, self, schedule).start()

    def use_tcp(self, job: int, comm: int) -> None:
        """Carry communicator ``comm`` of ``job`` over TCP (the Ethernet NICs)."""
        self._tcp_comms.add((job, comm))

    def set_capacity(self, capacities: dict[int, float]) -> None:
        """Give links new capacities (B/s; 0 = down) from this instant on; flows on them are re-solved."""
        changes = {int(k): float(v) for k, v in capacities.items()}
        self._actions.append(lambda now, seeds: self._apply_capacity(changes, now, seeds))
        self._arm_flush()

    def routing_changed(self, state: dict[int, float]) -> None:
        """Tell the routing policy the links it now knows to be down (0) or degraded; in-flight messages
        whose routes then change go on over their new routes with the bytes they have left."""
        state = dict(state)
        self._actions.append(lambda now, seeds: self._reroute(state, now, seeds))
        self._arm_flush()

    # ----------------------------------------------------------------- batching
    def _arm_flush(self) -> None:
        if not self._flush_armed:
            self._flush_armed = True
            Wakeup(self.env, 0.0, FLUSH_PRIORITY, self._flush)

    def _flush(self, _event=None) -> None:
        """Apply this instant's completions, faults and new messages, then re-solve what they touched."""
        self._flush_armed = False
        self._stats["flushes"] += 1
        now = self.env.now
        seeds: set[int] = set()
        drained, self._drained = self._drained, []
        for flow in drained:
            self._complete(flow, now, seeds)
        if self._actions:
            actions, self._actions = self._actions, []
            for action in actions:
                action(now, seeds)
        # Messages starting now: those behind a drained one on their connection, then new ones.
        starting = self._starting + self._pending
        self._starting, self._pending = [], []
        while starting:
            self.routing.plan([f.conn for f in starting])
            for flow in starting:
                self._admit(flow, now, seeds)
            starting, self._starting = self._starting, []  # behind messages that finished at once
        if seeds:
            self._resolve(seeds, now)
        if self._offers.pending:
            self._offers.apply(now)
        self._arm_timer()

    # ----------------------------------------------------------------- routes
    def _incidence(self, key, routes: Routes, index: int | None = None) -> tuple:
        """Incidence of ``routes`` (or of its entry ``index`` alone, as a whole flow), cached per key and
        routes: (links, weights, link list, weight list, delay, solo rate, n_paths, edge rate, core pairs)."""
        if index is not None:
            conn = key[0]
            key = (conn.src, conn.dst, conn.tcp, routes[index][0])
            cached = self._routes_cache.get(key)
            if cached is not None:
                return cached[1]
        else:
            conn = key
            cached = self._routes_cache.get(key)
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

    # ----------------------------------------------------------------- messages
    def _admit(self, flow: _Flow, now: float, seeds: set[int]) -> None:
        conn = flow.conn
        routes = self.routing.paths(conn)
        flow.routes = routes
        self._routes_used[conn] = routes
        flow.t_upd = now
        self._stats["flows"] += 1
        split = bool(self.routing.independent) and len(routes) > 1 and flow.size > 0
        entry = self._incidence(conn, routes)
        split = split and bool(entry[2])
        n_sub = len(routes) if split else 1
        if n_sub > 1 or conn not in self.queue_pairs:
            if self.queue_pairs.get(conn, 0) < n_sub:
                self.queue_pairs[conn] = n_sub
        if self.track_congestion:
            flow.demand = min(flow.cap, entry[7])
            flow.spray = self._spray_pairs(conn.src, conn.dst, conn.tcp)
            self._offers.offer_spray(flow.spray, flow.demand, 1.0)
        if not split:
            self._place(flow, entry, now, seeds)
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
            self._offers.offer(core_pairs, flow.demand, 1.0)
        self._flows[flow.fid] = flow
        for link in flow.link_list:
            self._link_flows[link].add(flow.fid)
        seeds.update(flow.link_list)

    def _complete(self, flow: _Flow, now: float, seeds: set[int]) -> None:
        del self._flows[flow.fid]
        for link in flow.link_list:
            self._link_flows[link].discard(flow.fid)
        seeds.update(flow.link_list)
        size, link_bytes = flow.size - flow.acct, self._links.bytes
        for link, w in zip(flow.link_list, flow.weight_list):
            link_bytes[link] += size * w
        if self.track_congestion:
            self._offers.offer(flow.offered, flow.demand, -1.0)
        self._done(flow, now, seeds)

    def _done(self, flow: _Flow, now: float, seeds: set[int]) -> None:
        """``flow`` has drained: finish its message (a sub-flow: once its siblings have drained too)."""
        parent = flow.parent
        if parent is not None:
            parent.pending -= 1
            arrive = now + flow.delay
            parent.arrive = max(parent.arrive, arrive)
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
            flow = self._current[conn] = queue.popleft()
            flow.succ = bool(queue)
            self._starting.append(flow)
        else:
            del self._conn_queue[conn]
            del self._current[conn]

    def _finish(self, flow: _Flow, now: float) -> None:
        delay = flow.delay + flow.extra
        end = now + delay
        Wakeup(self.env, delay, NORMAL, flow.notify)
        self.bytes_delivered[flow.conn] += flow.size
        if self.track_congestion:
            self._offers.offer_spray(flow.spray, flow.demand, -1.0)
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
        self.routing.links_changed(state)
        self._routes_cache.clear()
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
            if entry[2] != flow.link_list or entry[3] != flow.weight_list:  # new links or new shares
                self._move(flow, entry, now, seeds)
        for parent, routes in updated.values():
            parent.routes = routes

    def _move(self, flow: _Flow, entry: tuple, now: float, seeds: set[int]) -> None:
        """Reroute an in-flight flow: bytes carried so far stay on the old links, the rest takes ``entry``."""
        flow.remaining = max(flow.remaining - flow.rate * (now - flow.t_upd), 0.0)
        for link in flow.link_list:
            self._link_flows[link].discard(flow.fid)
        seeds.update(flow.link_list)
        flow.t_upd = now
        carried = flow.size - flow.remaining - flow.acct
        for link, w in zip(flow.link_list, flow.weight_list):
            self._links.bytes[link] += carried * w
        flow.acct += carried
        if self.track_congestion:
            self._offers.offer(flow.offered, flow.demand, -1.0)
        del self._flows[flow.fid]
        flow.version += 1  # its pending completion time is stale
        flow.rate = 0.0
        self._stats["reroutes"] += 1
        self._place(flow, entry, now, seeds)

    # ----------------------------------------------------------------- rates
    def _components(self, seeds: set[int]) -> list[list[_Flow]]:
        """The connected components (flows linked through shared links) that touch any seed link."""
        flows, link_flows = self._flows, self._link_flows
        seen_links: set[int] = set()
        seen_flows: set[int] = set()
        components = []
        for seed in seeds:
            if seed in seen_links:
                continue
            seen_links.add(seed)
            stack, comp = [seed], []
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
        link_flows = self._link_flows
        self._links.set(((s, 0.0) for s in seeds if not link_flows.get(s)), now)  # links left idle

    def _solve_component(self, comp: list[_Flow], now: float) -> None:
        for flow in comp:
            flow.remaining = max(flow.remaining - flow.rate * (now - flow.t_upd), 0.0)
            flow.t_upd = now
        n = len(comp)
        if n == 1:
            flow = comp[0]
            rates = [min(flow.cap, flow.solo)]
            self._links.set(zip(flow.link_list, [w * rates[0] for w in flow.weight_list]), now)
        elif n <= self.small_component:
            rates = progressive_filling_lists([f.link_list for f in comp], [f.weight_list for f in comp], self._cap,
                                              [f.cap for f in comp])
            loads: dict[int, float] = {}
            for f, rate in zip(comp, rates):
                for link, w in zip(f.link_list, f.weight_list):
                    loads[link] = loads.get(link, 0.0) + w * rate
            self._stats["solver_calls"] += 1
            self._links.set(loads.items(), now)
        else:
            all_links = np.concatenate([f.links for f in comp])
            touched, local = np.unique(all_links, return_inverse=True)
            entry_w = np.concatenate([f.weights for f in comp])
            entry_f = np.repeat(np.arange(n), [len(f.link_list) for f in comp])
            caps = np.array([f.cap for f in comp])
            rate_arr = self.solver(entry_f, local, entry_w, self._cap_arr[touched], n, caps)
            loads_arr = np.bincount(local, weights=entry_w * rate_arr[entry_f], minlength=len(touched))
            self._stats["solver_calls"] += 1
            rates = rate_arr.tolist()
            self._links.set(zip(touched.tolist(), loads_arr.tolist()), now)
        self._stats["solved_flows"] += n
        self._stats["max_component"] = max(self._stats["max_component"], n)
        heap = self._heap
        for flow, rate in zip(comp, rates):
            flow.rate = rate
            flow.version += 1
            if rate > 0:
                heapq.heappush(heap, (now + flow.remaining / rate, flow.fid, flow.version))

    # ----------------------------------------------------------------- completions
    def _arm_timer(self) -> None:
        heap, flows = self._heap, self._flows
        while heap:
            _, fid, version = heap[0]
            flow = flows.get(fid)
            if flow is not None and flow.version == version:
                break
            heapq.heappop(heap)
        if heap and heap[0][0] < self._timer_at:
            t = heap[0][0]
            self._timer_at = t
            self._timer_token += 1
            Wakeup(self.env, delay_to(self.env, t), TIMER_PRIORITY, self._on_timer, self._timer_token)

    def _on_timer(self, event) -> None:
        if event.value != self._timer_token:
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
        if not drained:
            self._arm_timer()
        elif not self._flush_armed:
            self._flush()  # the timer runs after every NORMAL event of its instant, where the flush would


class ScheduleRun:
    """One schedule running on a fabric (anything with the ``send`` of :class:`ReferenceFabric`):
    ``times[i]`` is when task ``i`` was done (NaN until then); ``done`` fires when every task is."""

    def __init__(self, env: simpy.Environment, fabric, schedule: Schedule):
        schedule.check()
        self.env, self.fabric, self.schedule = env, fabric, schedule
        self.times = np.full(len(schedule), np.nan)
        self.done = env.event()
        self._left = np.diff(schedule.dep_ptr)
        self._succ_ptr, self._succ_idx = schedule.successors()
        self._conns = schedule.connections.connections()
        self._kind = schedule.kind.tolist()
        self._conn = schedule.conn.tolist()
        self._amount = schedule.amount.tolist()
        scale = schedule.overhead_scale
        self._scale = None if scale is None else scale.tolist()
        self._pending = len(schedule)

    def start(self) -> ScheduleRun:
        """Release every task with no dependency (now)."""
        if self._pending == 0:
            self.done.succeed()
            return self
        for task in np.flatnonzero(self._left == 0).tolist():
            self._release(task)
        return self

    def _release(self, task: int) -> None:
        kind = self._kind[task]
        if kind == SEND:
            c = self._conns[self._conn[task]]
            self.fabric.send(c.src, c.dst, self._amount[task], c, notify=lambda _e=None, task=task: self._finish(task),
                             overhead_scale=1.0 if self._scale is None else self._scale[task])
        elif kind == DELAY:
            self.env.timeout(self._amount[task]).callbacks.append(lambda _e, task=task: self._finish(task))
        else:
            self._finish(task)

    def _finish(self, task: int) -> None:
        self.times[task] = self.env.now
        self._pending -= 1
        last = self._pending == 0  # (a successor finishing inside this call may be the last task)
        left = self._left
        for succ in self._succ_idx[self._succ_ptr[task]:self._succ_ptr[task + 1]].tolist():
            left[succ] -= 1
            if left[succ] == 0:
                self._release(succ)
        if last:
            self.done.succeed()


def run_schedule(env: simpy.Environment, fabric, schedule: Schedule):
    """Start ``schedule`` on ``fabric`` now: its run, whose ``done`` event fires at its end and whose
    ``times`` give each task's end. A Fabric runs it with its own executor; anything else with a
    ``send`` (the ideal replay) message by message."""
    if isinstance(fabric, Fabric):
        return fabric.submit(schedule)
    return ScheduleRun(env, fabric, schedule).start()

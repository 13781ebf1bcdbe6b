"""Ideal times: the fabric with a non-blocking core, and provable lower bounds of any run.

:func:`nonblocking_fabric` is the real :class:`~netsim.engine.Fabric` with every switch-to-switch
link unbounded and each connection spread evenly over its equal-cost paths: the time a call would
take if the network core cost nothing (only NICs, PCIe and NVLink limit it).

An algorithm run against :class:`IdealFabric` instead of :class:`~netsim.engine.Fabric` keeps all
its dependencies and the FIFO order of each connection, but every message moves at the best rate
its source/destination pair could ever get with the switching core non-blocking (infinite), and
never shares a link with another message. The replay's end time is a lower bound of the real run
(each real message is at least as slow and starts no earlier); the bytes that must cross each
host-edge link give a second, load bound. Their maximum is the *ideal* time of the call.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import networkx as nx
import numpy as np
import simpy
from simpy.events import NORMAL

from netsim.engine.clock import Wakeup
from netsim.engine import dag
from netsim.engine.fabric import CORE_KINDS, Fabric
from netsim.engine.model import SEND as SEND_KIND
from netsim.routing.base import Connection
from netsim.routing.spray import Spray
from netsim.solver import jit
from netsim.topology import LINK_KINDS, Topology
from netsim.topology.pathsets import ragged_arange


def core_mask(topology: Topology) -> np.ndarray:
    """Boolean mask of the topology's switch-to-switch links."""
    return np.isin(topology.links.kind, [LINK_KINDS.index(k) for k in CORE_KINDS])


def nonblocking_fabric(env: simpy.Environment, topology: Topology, completion_tolerance_s: float = 1e-9) -> Fabric:
    """A Fabric on ``topology`` whose switching core never limits a flow (see the module docstring)."""
    spray = Spray(topology)
    spray.unbounded = core = core_mask(topology)  # (the Fabric would drop those links from the unions)
    return Fabric(env, topology, spray, completion_tolerance_s=completion_tolerance_s,
                  record_flows=False, unbounded_links=core, track_congestion=False)


class PairModel:
    """Per GPU pair, cached: best rate with an infinite core, least delay, and the edge links it must cross.

    Parameters
    ----------
    topology:
        The fabric. Rates come from its edge links (NIC ports, PCIe, NVLink/NVSwitch): the max
        flow from source to destination over the pair's equal-cost paths, core links unbounded.
    """

    def __init__(self, topology: Topology):
        self.topology = topology
        lt = topology.links
        self._core = core_mask(topology)
        self._cache: dict[tuple[int, int, bool], tuple[float, float, tuple[int, ...]]] = {}
        self._sigs: np.ndarray | None = None
        self._flows: dict[tuple, float] = {}
        self._uniform: dict[tuple[int, int, bool], bool] = {}
        #: :meth:`table`'s pair structures: (rate, delay, uniform, forced links' positions on the first path)
        self._shapes: dict[tuple, tuple[float, float, bool, list[int]]] = {}
        #: perf: pairs with more equal-cost paths than this are computed from arrays (:meth:`_pair_arrays`)
        self.many_paths = 32
        nic_host = {nic: h for h, (_m, _g, _b, nics) in enumerate(topology.hosts) for nic in nics}
        self.nic_host = nic_host
        # Host aggregates: every byte leaving (entering) a host crosses one of its NIC ports.
        self.host_out_cap = np.zeros(topology.n_hosts)
        self.host_in_cap = np.zeros(topology.n_hosts)
        up, down = LINK_KINDS.index("nic_up"), LINK_KINDS.index("nic_down")
        for lk in np.flatnonzero(lt.kind == up):
            h = nic_host.get(int(lt.src[lk]))
            if h is not None:
                self.host_out_cap[h] += lt.capacity_Bps[lk]
        for lk in np.flatnonzero(lt.kind == down):
            h = nic_host.get(int(lt.dst[lk]))
            if h is not None:
                self.host_in_cap[h] += lt.capacity_Bps[lk]

    def pair(self, src: int, dst: int, tcp: bool = False) -> tuple[float, float, tuple[int, ...]]:
        """``(rate_Bps, delay_s, forced_edge_links)`` of messages from GPU ``src`` to GPU ``dst``
        (``tcp``: over the Ethernet NICs, for a communicator that mixes NIC families)."""
        key = (src, dst, tcp)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        topo = self.topology
        if src != dst and topo.gpu_host[src] != topo.gpu_host[dst]:
            ps = topo.path_sets([src], [dst], [tcp])
            if int(ps.n[0]) > self.many_paths:
                hit = self._pair_arrays(ps, src, dst, tcp)
                if hit is not None:
                    return hit
        paths = topo.paths(src, dst, tcp)
        latencies = [topo.path_latency_s(p) for p in paths]
        delay = min(latencies) + topo.message_overhead_s(src, dst, tcp)
        edge_sets = [{lk for lk in p if not self._core[lk]} for p in paths]
        forced = tuple(sorted(set.intersection(*edge_sets))) if edge_sets else ()
        self._uniform[key] = all(e == edge_sets[0] for e in edge_sets) and len(set(latencies)) <= 1
        rate = self._max_flow(paths) if paths and paths[0] else math.inf
        hit = self._cache[key] = (float(rate), float(delay), forced)
        return hit

    def _pair_arrays(self, ps, src: int, dst: int, tcp: bool) -> tuple[float, float, tuple[int, ...]] | None:
        """:meth:`pair` of a pair with many paths (7,168 between two pods of the Meta-like cluster), from
        its paths as one array instead of a tuple each: the same numbers bit for bit (a row sums as
        ``path_latency_s`` sums; the max-flow graph is built in the same node order). None when the
        paths differ in length (then :meth:`pair` lists them)."""
        _row, ptr, links = ps.all_links()
        lengths = np.diff(ptr)
        if not len(lengths) or lengths.min() != lengths.max() or lengths[0] == 0:
            return None
        arr = links.reshape(len(lengths), int(lengths[0]))
        topo, lt = self.topology, self.topology.links
        latencies = lt.latency_s[arr].sum(axis=1)
        delay = float(latencies.min()) + topo.message_overhead_s(src, dst, tcp)
        edge = arr[~self._core[arr]]
        edge_links, counts = np.unique(edge, return_counts=True)
        n = len(arr)
        forced = tuple(edge_links[counts == n].tolist())
        self._uniform[(src, dst, tcp)] = bool((counts == n).all() and (latencies == latencies[0]).all())
        rate = self._max_flow_arrays(arr)
        hit = self._cache[(src, dst, tcp)] = (float(rate), float(delay), forced)
        return hit

    def _max_flow_arrays(self, arr: np.ndarray) -> float:
        """:meth:`_max_flow` of the paths that are the rows of ``arr`` (one length), without a loop over them."""
        lt = self.topology.links
        heads, tails = lt.src[arr], lt.dst[arr]
        flat = np.stack([heads, tails], axis=2).reshape(-1)  # every node in order of appearance along the paths
        uniq, first = np.unique(flat, return_index=True)
        names = dict(zip(uniq[np.argsort(first, kind="stable")].tolist(), range(len(uniq))))
        ends: set[tuple[str, int]] = set()  # (added in _max_flow's order: the graph is built in it)
        for a, b in zip(heads[:, 0].tolist(), tails[:, -1].tolist()):
            ends.add(("s", names[a]))
            ends.add(("t", names[b]))
        capacity: dict[tuple[int, int], float] = {}
        for lk in np.unique(arr).tolist():
            uv = (names[int(lt.src[lk])], names[int(lt.dst[lk])])
            capacity[uv] = math.inf if self._core[lk] else capacity.get(uv, 0.0) + float(lt.capacity_Bps[lk])
        gap = tails[:, :-1] != heads[:, 1:]  # a hop with no modelled link (see _max_flow)
        if gap.any():  # in order of first appearance, as _max_flow adds them
            jumps = np.stack([tails[:, :-1][gap], heads[:, 1:][gap]], axis=1)
            _u, at = np.unique(jumps, axis=0, return_index=True)
            for a, b in jumps[np.sort(at)].tolist():
                capacity[names[a], names[b]] = math.inf
        return self._solve(capacity, ends)

    def _max_flow(self, paths: list[tuple[int, ...]]) -> float:
        """Max flow over the union of the equal-cost ``paths``; parallel edge links add up, core is unbounded.

        perf: graphs equal up to the names of their nodes have the same max flow; the nodes are
        renamed in order of first appearance along the paths, and each such graph is solved once
        (all leaf pairs of a leaf-spine are one graph).
        """
        lt = self.topology.links
        names: dict[int, int] = {}
        ends: set[tuple[str, int]] = set()
        for p in paths:
            for lk in p:
                names.setdefault(int(lt.src[lk]), len(names))
                names.setdefault(int(lt.dst[lk]), len(names))
            ends.add(("s", names[int(lt.src[p[0]])]))
            ends.add(("t", names[int(lt.dst[p[-1]])]))
        capacity: dict[tuple[int, int], float] = {}
        for lk in sorted({lk for p in paths for lk in p}):
            uv = (names[int(lt.src[lk])], names[int(lt.dst[lk])])
            capacity[uv] = math.inf if self._core[lk] else capacity.get(uv, 0.0) + float(lt.capacity_Bps[lk])
        for p in paths:  # a hop with no modelled link (a GPU to a NIC it reaches at no cost, mid-path when a
            for a, b in itertools.pairwise(p):  # rail-only host forwards through another GPU): unbounded
                if lt.dst[a] != lt.src[b]:
                    capacity[names[int(lt.dst[a])], names[int(lt.src[b])]] = math.inf
        return self._solve(capacity, ends)

    def _solve(self, capacity: dict[tuple[int, int], float], ends: set[tuple[str, int]]) -> float:
        """Max flow from the ``("s", node)`` ends to the ``("t", node)`` ends over ``capacity`` (renamed
        nodes; missing capacity = unbounded), solved once per shape."""
        shape = (tuple(sorted(capacity.items())), tuple(sorted(ends)))
        rate = self._flows.get(shape)
        if rate is None:
            g = nx.DiGraph()
            for (u, v), c in capacity.items():
                g.add_edge(u, v, **({} if math.isinf(c) else {"capacity": c}))
            for end, node in ends:
                g.add_edge("s", node) if end == "s" else g.add_edge(node, "t")
            rate = self._flows[shape] = nx.maximum_flow_value(g, "s", "t")
        return rate

    def host_signature(self, host: int) -> int:
        """An id shared by the hosts built alike (see :meth:`_host_signatures`)."""
        return int(self._host_signatures()[host])

    def _host_signatures(self) -> np.ndarray:
        """Per host, an id shared by hosts whose links (local ones and their NICs' ports) have the same
        capacities and latencies and whose NICs the same profiles: pairs between hosts of the same
        ids and the same path templates and classes have the same best rate and delay."""
        if self._sigs is None:
            topo, lt = self.topology, self.topology.links
            ids: dict[tuple, int] = {}
            sigs = np.zeros(topo.n_hosts, dtype=np.int64)
            for h, (model, _first, base, nics) in enumerate(topo.hosts):
                local = np.arange(base, base + 2 * len(model.edges))
                ports = [lk for nic in nics for up, _sw, down in topo.nic_ports.get(nic, ()) for lk in (up, down)]
                links = np.concatenate([local, np.asarray(ports, dtype=np.int64)])
                key = (id(model), lt.capacity_Bps[links].tobytes(), lt.latency_s[links].tobytes(),
                       tuple(repr(topo.nic_profile.get(nic)) for nic in nics))
                sigs[h] = ids.setdefault(key, len(ids))
            self._sigs = sigs
        return self._sigs

    def prefetch(self, src: np.ndarray, dst: np.ndarray, tcp: np.ndarray) -> None:
        """Fill :meth:`pair`'s cache for the pairs ``src[i] -> dst[i]`` (``tcp[i]``) at once (:meth:`table`)."""
        src, dst, tcp = (np.asarray(a) for a in (src, dst, tcp))
        keys = np.unique(np.column_stack([src, dst, tcp.astype(np.int64)]), axis=0)
        keys = keys[keys[:, 0] != keys[:, 1]]
        missing = [i for i, (s, d, t) in enumerate(keys.tolist()) if (s, d, bool(t)) not in self._cache]
        if not missing:
            return
        keys = keys[missing]
        rate, delay, ptr, links, _uniform = self.table(keys[:, 0], keys[:, 1], keys[:, 2].astype(bool))
        for i, (a, b, c) in enumerate(keys.tolist()):
            forced = tuple(sorted(links[ptr[i]:ptr[i + 1]].tolist()))
            self._cache[(a, b, bool(c))] = (float(rate[i]), float(delay[i]), forced)

    def uniform(self, src: int, dst: int, tcp: bool = False) -> bool:
        """Whether every path of the pair crosses the same edge links with the same latency (they differ
        only in the core): spraying over them then gets the pair's best rate and least delay."""
        self.pair(src, dst, tcp)
        return self._uniform[(src, dst, tcp)]

    def table(self, src: np.ndarray, dst: np.ndarray, tcp: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`pair` of every row ``src[i] -> dst[i]`` (``tcp[i]``; ``src != dst``), as arrays: rate,
        delay, the forced links of row ``i`` as ``links[ptr[i]:ptr[i + 1]]`` (in path order), and
        :meth:`uniform`.

        perf: pairs whose paths have the same structure (host-local path templates, the class of
        switches between their NICs, hosts with the same links) have the same rate and delay, and
        their forced links sit at the same positions of their first path: :meth:`pair` runs once per
        structure (its max-flow is the cost), the rest is numpy.
        """
        topo = self.topology
        s, d, t = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), np.asarray(tcp, dtype=bool)
        n = len(s)
        ps = topo.path_sets(s, d, t)
        sig = self._host_signatures()
        shape = np.column_stack([ps.u, ps.d, ps.cls, sig[topo.gpu_host[s]], sig[topo.gpu_host[d]], t,
                                 topo.gpu_host[s] == topo.gpu_host[d]])
        _, first, group = np.unique(shape, axis=0, return_index=True, return_inverse=True)
        group = group.ravel()
        ptr0, links0 = ps.links(np.zeros(n, dtype=np.int64))  # every pair's first path
        rates, delays, uniform, positions = np.empty(len(first)), np.empty(len(first)), np.empty(len(first), bool), []
        for g, (i, key) in enumerate(zip(first.tolist(), map(tuple, shape[first].tolist()))):
            # perf: a structure met in an earlier call is not asked again (a training job's DP groups
            # are thousands of GPU pairs of a few structures)
            hit = self._shapes.get(key)
            if hit is None:
                rate, delay, forced = self.pair(int(s[i]), int(d[i]), bool(t[i]))
                hit = self._shapes[key] = (rate, delay, self._uniform[(int(s[i]), int(d[i]), bool(t[i]))],
                                           [k for k, lk in enumerate(links0[ptr0[i]:ptr0[i + 1]].tolist())
                                            if lk in forced])
            rates[g], delays[g], uniform[g] = hit[:3]
            positions.append(hit[3])
        n_pos = np.array([len(p) for p in positions], dtype=np.int64)
        last = np.array([p[-1] if p else -1 for p in positions], dtype=np.int64)
        pos_ptr = np.concatenate(([0], np.cumsum(n_pos)))
        pos = np.array([k for p in positions for k in p], dtype=np.int64)
        counts = n_pos[group]
        odd = np.flatnonzero(last[group] >= np.diff(ptr0))  # (not the shape of its kind: ask it alone)
        alone = {int(i): self.pair(int(s[i]), int(d[i]), bool(t[i]))[2] for i in odd.tolist()}
        counts[odd] = [len(alone[i]) for i in odd.tolist()]
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        links = np.zeros(int(ptr[-1]), dtype=np.int64)
        owner, k = ragged_arange(counts)
        regular = np.ones(n, dtype=bool)
        regular[odd] = False
        at = regular[owner]
        owner, k = owner[at], k[at]
        links[ptr[owner] + k] = links0[ptr0[owner] + pos[pos_ptr[group[owner]] + k]]
        uniform = uniform[group]
        for i, forced in alone.items():
            links[ptr[i]:ptr[i + 1]] = forced
            uniform[i] = self.uniform(int(s[i]), int(d[i]), bool(t[i]))
        return rates[group], delays[group], ptr, links, uniform


class IdealFabric:
    """Drop-in ``send`` target for an algorithm's ideal replay (see the module docstring).

    Attributes
    ----------
    forced_bytes:
        Bytes per link that every path of their message had to cross.
    host_out_bytes, host_in_bytes:
        Bytes leaving / entering each host.
    sends:
        Messages sent per GPU (bounds the length of any dependency chain, for tolerances).
    """

    def __init__(self, env: simpy.Environment, topology: Topology, model: PairModel | None = None,
                 tcp: bool = False):
        self.env = env
        self.tcp = tcp
        self.topology = topology
        self.model = model or PairModel(topology)
        self._busy: dict[Connection, float] = {}
        self.forced_bytes: defaultdict[int, float] = defaultdict(float)
        self.host_out_bytes = np.zeros(topology.n_hosts)
        self.host_in_bytes = np.zeros(topology.n_hosts)
        self.sends: defaultdict[int, int] = defaultdict(int)
        #: Set by :func:`replay`: no two connections share an edge link and every pair's paths are uniform
        #: (:meth:`PairModel.uniform`), so the fabric with a non-blocking core would take the same time.
        self.exclusive = False

    def send(self, src: int, dst: int, size_bytes: float, connection: Connection | None = None, *,
             cap_Bps: float = math.inf, event: simpy.Event | None = None, notify=None,
             overhead_scale: float = 1.0) -> simpy.Event | None:
        """Deliver ``size_bytes`` at the pair's best rate, after the connection's earlier messages
        (``notify`` is called on arrival, or the returned event fires); the message pays
        ``overhead_scale`` times the pair's per-message overhead."""
        env = self.env
        if notify is None:
            if event is None:
                event = env.event()
            notify = lambda _e=None, event=event: event.succeed()
        if src == dst:
            Wakeup(env, 0.0, NORMAL, notify)
            return event
        conn = connection if connection is not None else Connection(src, dst)
        tcp = self.tcp or conn.tcp
        rate, delay, forced = self.model.pair(src, dst, tcp)
        extra = 0.0 if overhead_scale == 1.0 else (overhead_scale - 1.0) * self.topology.message_overhead_s(src, dst, tcp)
        rate = min(rate, cap_Bps)
        start = max(env.now, self._busy.get(conn, 0.0))
        end = start + (size_bytes / rate if size_bytes else 0.0)
        self._busy[conn] = end
        Wakeup(env, end + delay + extra - env.now, NORMAL, notify)
        for lk in forced:
            self.forced_bytes[lk] += size_bytes
        h_s, h_d = int(self.topology.gpu_host[src]), int(self.topology.gpu_host[dst])
        if h_s != h_d:
            self.host_out_bytes[h_s] += size_bytes
            self.host_in_bytes[h_d] += size_bytes
        self.sends[src] += 1
        return event

    def load_bound_s(self) -> float:
        """Largest bytes / capacity over forced links and host NIC aggregates."""
        cap = self.topology.links.capacity_Bps
        bound = max((b / cap[lk] for lk, b in self.forced_bytes.items()), default=0.0)
        m = self.model
        with np.errstate(divide="ignore", invalid="ignore"):
            for used, capacity in ((self.host_out_bytes, m.host_out_cap), (self.host_in_bytes, m.host_in_cap)):
                ratio = np.where(used > 0, used / capacity, 0.0)
                bound = max(bound, float(ratio.max(initial=0.0)))
        return bound


def replay(model: PairModel, schedule, tcp: bool = False) -> tuple[np.ndarray, float, IdealFabric]:
    """:class:`IdealFabric`'s replay of ``schedule`` without SimPy: the same events in the same order
    (SimPy's: by time, then by when each was scheduled; a task's successors released depth first, as
    :class:`~netsim.engine.reference.ScheduleRun` does), in one compiled pass. Returns (each task's
    end, the replay's end, an IdealFabric holding the bytes it counted, for ``load_bound_s``); ``model``
    gives each pair's rate and delay (prefetched)."""
    topo = model.topology
    conns = schedule.connections
    src, dst = conns.column("src").astype(np.int64), conns.column("dst").astype(np.int64)
    ctcp = conns.column("tcp").astype(bool) | tcp
    n_conn = len(src)
    rate, delay = np.ones(n_conn), np.zeros(n_conn)
    same = src == dst
    sends = schedule.kind == SEND_KIND
    used = np.unique(schedule.conn[sends])
    used = used[~same[used]]
    rate[used], delay[used], fptr, flinks, uniform = model.table(src[used], dst[used], ctcp[used])
    succ_ptr, succ_idx = schedule.successors()
    jit.charge(int(sends.sum()))
    extra = np.zeros(len(schedule))
    if schedule.overhead_scale is not None and n_conn:
        per_conn = np.zeros(n_conn)   # (a GPU's messages to itself pay none)
        per_conn[used] = topo.message_overheads_s(src[used], dst[used], ctcp[used])
        extra = schedule.extra_delay_s(per_conn[np.maximum(schedule.conn, 0)])
    times, end = dag.replay_kernel(schedule.kind.astype(np.int64), schedule.conn.astype(np.int64),
                                    schedule.amount.astype(np.float64), np.diff(schedule.dep_ptr).astype(np.int64),
                                    succ_ptr.astype(np.int64), succ_idx.astype(np.int64), rate, delay, extra, same)
    # the bytes the IdealFabric would have counted (summed per connection, then per link or host)
    fab = IdealFabric(None, topo, model, tcp=tcp)
    remote = sends & ~same[np.maximum(schedule.conn, 0)] if n_conn else sends  # (no connection: no send)
    per_conn = np.bincount(schedule.conn[remote], weights=schedule.amount[remote], minlength=n_conn)
    if len(flinks):
        owner = np.repeat(used, np.diff(fptr))
        per_link = np.bincount(flinks, weights=per_conn[owner], minlength=len(topo.links.src))
        for lk in np.unique(flinks).tolist():
            fab.forced_bytes[lk] = float(per_link[lk])
    hs, hd = topo.gpu_host[src], topo.gpu_host[dst]
    apart = hs != hd
    fab.host_out_bytes += np.bincount(hs[apart], weights=per_conn[apart], minlength=topo.n_hosts)
    fab.host_in_bytes += np.bincount(hd[apart], weights=per_conn[apart], minlength=topo.n_hosts)
    for g, k in zip(*np.unique(src[schedule.conn[remote]], return_counts=True)):
        fab.sends[int(g)] = int(k)
    # Every message alone on its edge links (each carries one connection's, one after another) at
    # its pair's best rate and delay: the non-blocking fabric would run this very timeline.
    fab.exclusive = bool(uniform.all()) and (not len(flinks) or int(np.bincount(flinks).max()) <= 1)
    return times, end, fab


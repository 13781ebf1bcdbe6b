"""Packet spraying in its fluid limit: every connection evenly over all its equal-cost paths."""

from __future__ import annotations

import numpy as np

from netsim.errors import ConfigError
from netsim.routing.base import DEFAULT_RECONVERGENCE, ROUTING, Connection, PolicyBase, Routes, option_time
from netsim.routing.routes import Columns, _route_table, connection_columns, in_chunks
from netsim.topology import Topology
from netsim.topology.pathsets import ragged_arange

#: Connections routed at a time (bounds the temporary arrays of a large batch: ~100 bytes per link of
#: a connection's union, tens of links each on a leaf-spine).
CHUNK = 2**14


@ROUTING.register("spray")
class Spray(PolicyBase):
    """Ideal multipath: each connection's bytes split equally over every equal-cost path.

    The fluid limit of per-packet spraying with perfect reordering at the receiver: no hash
    collisions, so an n-to-n leaf-to-leaf pattern loads every uplink with exactly n f / s.
    The shares are fixed fractions of one flow (packets are sprayed obliviously), so a path that
    fails stalls the whole flow until routing reconverges and drops it from the set, and a degraded
    path keeps its equal share. ``adaptive`` is host-based spraying with end-to-end path feedback
    (McClure et al., arXiv 2507.21372): once the hosts see a path's condition (``reconvergence``
    later: a few round trips, not a routing protocol's time), each path's share follows the capacity
    of its slowest link, so a degraded path carries proportionally less and a dead one nothing.
    The generator is accepted for a uniform policy signature and not used.

    Parameters
    ----------
    reconvergence:
        Time to learn of a link fault (default 10 ms, an estimate of routing reconvergence; for
        ``adaptive`` spraying set it to the hosts' feedback delay, e.g. 20 us).
    adaptive:
        Shares follow the live capacity of each path after a fault (default false: oblivious).
    """

    #: Each connection keeps the routes it got on first use until a fault (Fabric.run_ring relies on it).
    fixed = True
    decides = "connection"
    #: Links (a mask) a fabric never limits, left out of the unions (the non-blocking core of the ideal)
    unbounded: np.ndarray | None = None

    def __init__(self, topology: Topology, rng: np.random.Generator | None = None,
                 reconvergence: str | float = DEFAULT_RECONVERGENCE, adaptive: bool = False):
        super().__init__()
        self.topology = topology
        self.reaction_s = option_time(reconvergence, "reconvergence")
        if not isinstance(adaptive, bool):
            raise ConfigError(f"adaptive must be true or false, got {adaptive!r}", "routing.adaptive")
        self.adaptive = adaptive
        self._routes: dict[tuple[int, int, bool], Routes] = {}

    def _decide(self, key: tuple[int, int, bool]) -> Routes:
        candidates = self.live(self.topology.paths(*key))
        if self.adaptive and self.link_state:
            capacity, state = self.topology.links.capacity_Bps, self.link_state
            room = [min(capacity[lk] * state.get(lk, 1.0) for lk in p) for p in candidates]
            total = sum(room)
            if total > 0:
                return [(p, r / total) for p, r in zip(candidates, room) if r > 0]
        return [(p, 1.0 / len(candidates)) for p in candidates]

    def _touched(self) -> frozenset[int] | None:
        """Links whose connections are decided one by one: the failed ones, and for adaptive spraying
        the degraded ones too (their shares are no longer equal)."""
        if not self.adaptive:
            return None
        return frozenset(lk for lk, frac in self.link_state.items() if frac < 1.0)

    def paths(self, connection: Connection) -> Routes:
        """All live equal-cost paths of ``connection``, equal shares (shared by every connection of the pair)."""
        key = (connection.src, connection.dst, connection.tcp)
        routes = self._routes.get(key)
        if routes is None:
            routes = self._routes[key] = self._decide(key)
        return routes

    def links_changed(self, state: dict[int, float]) -> None:
        """Routing reconverged: spray over the live paths only."""
        super().links_changed(state)
        self.revise(self._routes, self._decide)

    def routes(self, connections):
        """Every connection over the union of its equal-cost paths, each link weighted by the share of
        the paths crossing it: counted from the product structure of the paths, never listing them."""
        return in_chunks(connection_columns(connections), CHUNK, self._sprayed)

    def _sprayed(self, cols: Columns):
        ps = self.topology.path_sets(cols.src, cols.dst, cols.tcp)
        n = len(cols)
        one = np.flatnonzero(ps.n == 1)
        many = np.flatnonzero(ps.n > 1)
        ptr1, links1 = ps.take(one).links(np.zeros(len(one), dtype=np.int64))
        ptr2, links2, counts = ps.take(many).merged(self.unbounded)
        weights2 = repeated_sums(ps.n[many], np.diff(ptr2), counts)
        lens = np.zeros(n, dtype=np.int64)
        lens[one], lens[many] = np.diff(ptr1), np.diff(ptr2)
        link_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=link_ptr[1:])
        links = np.empty(int(link_ptr[-1]), dtype=np.int64)
        weights = np.ones(len(links))
        for rows, ptr, part, w in ((one, ptr1, links1, None), (many, ptr2, links2, weights2)):
            owner, k = ragged_arange(np.diff(ptr))
            at = link_ptr[rows][owner] + k
            links[at] = part
            if w is not None:
                weights[at] = w
        delay = ps.max_latency_s() + ps.overhead_s
        table = _route_table(np.arange(n + 1), np.ones(n), delay, ps.n, link_ptr, links, weights)
        return self.decide_failed(table, cols, np.arange(n), lambda c: self._decide((c.src, c.dst, c.tcp)),
                                  self._touched())


def repeated_sums(n: np.ndarray, per_row: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """For each count ``k`` (``per_row[i]`` of them belong to row ``i``), ``1/n + 1/n + ...`` (``k`` terms,
    added in order) with that row's ``n``: the weight summing ``k`` sprayed shares gives a link.

    CORRECTNESS: the Fabric summed the shares one by one (``np.bincount``); a cumulative sum adds
    them in the same order, so the weights are bit for bit the same (``k / n`` may differ in the
    last bit).

    >>> repeated_sums(np.array([3]), np.array([2]), np.array([1, 3])).tolist() == [1 / 3, 1 / 3 + 1 / 3 + 1 / 3]
    True
    """
    row_n = np.repeat(n, per_row)
    out = np.empty(len(counts))
    for size in np.unique(row_n).tolist():
        at = np.flatnonzero(row_n == size)
        out[at] = np.cumsum(np.full(size, 1.0 / size))[counts[at] - 1]
    return out

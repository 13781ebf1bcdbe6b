"""C4P: central traffic planning of every job's long-lived connections (Alibaba's C4, arXiv 2406.04594)."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from netsim.errors import ConfigError
from netsim.routing.base import ROUTING, Connection, PolicyBase, Routes, option_time
from netsim.routing.routes import as_connections, from_routes
from netsim.topology import CORE_LINK_KINDS, LINK_KINDS, Topology

def _order(conn: Connection) -> tuple[int, ...]:
    """The planner's deterministic order of connections: (job, src, dst, channel, comm)."""
    return conn.job, conn.src, conn.dst, conn.channel, conn.comm


#: Links the planner balances: NIC ports (both ends; the bonded-port choice) and the switch core.
_PLANNED_KINDS = ("nic_up", "nic_down", *CORE_LINK_KINDS)


@ROUTING.register("c4p")
class C4P(PolicyBase):
    """A controller with a global view assigns each connection one path, balancing link loads.

    Connections are long-lived (collective traffic is periodic), so the planner counts, per link,
    the connections of every job routed over it, weighted by 1/capacity. When connections open
    (all those of one instant together, in a deterministic order) each gets the candidate path
    whose most loaded planned link would be least loaded after adding it (ties: the smaller sum
    of loads, then the first path), which chooses both the spine and, on bonded dual-port NICs,
    the port. Links every candidate shares are left out of the cost (no choice moves them).
    ``detection`` after a link fails or degrades, the connections over it are re-planned on the
    live, rescaled loads; the rest stay put.

    Parameters
    ----------
    topology, rng:
        The fabric and the run's generator (unused: planning is deterministic).
    detection:
        Time for the controller to detect a fault and re-plan (default 1 ms, an estimate).
    repair:
        Longest chain of moves tried to make room before a new connection would raise the busiest
        planned link (default 4; 0 = plain greedy).
    """

    # Asked again for every message: planning a new connection can move connections already placed
    # (the repair's augmenting chains), and a moved connection's next message takes its new path.
    decides = "message"

    def __init__(self, topology: Topology, rng: np.random.Generator | None = None, detection: str | float = "1ms",
                 repair: int = 4):
        super().__init__()
        self.topology = topology
        self.reaction_s = option_time(detection, "detection")
        self._planned = np.isin(topology.links.kind, [LINK_KINDS.index(k) for k in _PLANNED_KINDS])
        self._capacity = topology.links.capacity_Bps
        self.connections: defaultdict[int, float] = defaultdict(float)  # per link: connections / capacity
        self._on_link: defaultdict[int, set[Connection]] = defaultdict(set)
        self._peak = 0.0  # the highest planned load so far
        if isinstance(repair, bool) or not isinstance(repair, int) or repair < 0:
            raise ConfigError(f"repair must be an integer >= 0 (moves per augmenting path), got {repair!r}",
                              "routing.repair")
        self.repair = repair
        self._routes: dict[Connection, Routes] = {}
        self._index: dict[Connection, int] = {}
        self._choices: dict[tuple[int, int, bool], list[tuple[int, ...]]] = {}
        # Bundles: the parallel cables between two nodes (any one of them serves a path equally).
        ends = np.stack([topology.links.src, topology.links.dst], axis=1)
        _, bundle = np.unique(ends, axis=0, return_inverse=True)
        self._bundle = bundle.reshape(-1)
        self._members: defaultdict[int, list[int]] = defaultdict(list)
        for lk in np.flatnonzero(self._planned):
            self._members[int(self._bundle[lk])].append(int(lk))
        self._groups: dict[tuple[int, int, bool], dict[tuple[int, ...], list[int]]] = {}
        self._closure: dict[tuple, bool] = {}

    def _candidates(self, conn: Connection) -> list[tuple[int, ...]]:
        """The pair's paths reduced to the planned links on which they differ."""
        return self._candidates_of((conn.src, conn.dst, conn.tcp))

    def _candidates_of(self, key: tuple[int, int, bool]) -> list[tuple[int, ...]]:
        cached = self._choices.get(key)
        if cached is None:
            paths = self.topology.paths(*key)
            shared = set(paths[0]).intersection(*paths[1:])
            cached = self._choices[key] = [tuple(lk for lk in p if self._planned[lk] and lk not in shared)
                                           for p in paths]
        return cached

    def _weight(self, link: int) -> float:
        frac = self.link_state.get(link, 1.0)
        # A dead link is only used when nothing else is left; weigh it as nominal (stays finite).
        return 1.0 / (self._capacity[link] * (frac if frac > 0 else 1.0))

    def _best(self, conn: Connection, avoid: int | None = None, limit: float = math.inf) -> int | None:
        """Index of ``conn``'s cheapest live candidate (cost: max load after adding it, then the sum),
        skipping those over link ``avoid`` or whose max would exceed ``limit``; None if there is none."""
        paths = self.topology.paths(conn.src, conn.dst, conn.tcp)
        load = self.connections
        best, best_cost = None, None
        for i, links in enumerate(self._candidates(conn)):
            if (self.failed and not self.failed.isdisjoint(paths[i])) or avoid in links:
                continue
            after = [load[lk] + self._weight(lk) for lk in links]
            cost = (max(after, default=0.0), sum(after))
            if cost[0] <= limit * (1 + 1e-12) and (best_cost is None or cost < best_cost):
                best, best_cost = i, cost
        return best

    def _place(self, conn: Connection, index: int) -> Routes:
        load = self.connections
        for lk in self._candidates(conn)[index]:
            load[lk] += self._weight(lk)
            self._on_link[lk].add(conn)
            if load[lk] > self._peak:
                self._peak = load[lk]
        self._index[conn] = index
        routes = self._routes[conn] = [(self.topology.paths(conn.src, conn.dst, conn.tcp)[index], 1.0)]
        return routes

    def _release(self, conn: Connection) -> None:
        index = self._index.pop(conn)
        del self._routes[conn]
        for lk in self._candidates(conn)[index]:
            self.connections[lk] -= self._weight(lk)
            self._on_link[lk].discard(conn)

    def _fits(self, links, peak: float) -> list[int]:
        """The links among ``links`` that one more connection would push above ``peak``."""
        load = self.connections
        return [lk for lk in links if load[lk] + self._weight(lk) > peak * (1 + 1e-12)]

    def _move(self, conn: Connection, index: int, log: list) -> None:
        log.append((conn, self._index[conn]))
        self._release(conn)
        self._place(conn, index)

    def _undo(self, log: list, mark: int) -> None:
        while len(log) > mark:
            conn, index = log.pop()
            self._release(conn)
            self._place(conn, index)

    def _by_bundles(self, conn: Connection) -> dict[tuple[int, ...], list[int]]:
        """The pair's candidates grouped by the bundles they cross: the paths of one group differ only in
        which of parallel cables they take, so the planner searches groups, then picks the cables."""
        return self._groups_of((conn.src, conn.dst, conn.tcp))

    def _groups_of(self, pair: tuple[int, int, bool]) -> dict[tuple[int, ...], list[int]]:
        groups = self._groups.get(pair)
        if groups is None:
            groups = self._groups[pair] = {}
            for i, links in enumerate(self._candidates_of(pair)):
                groups.setdefault(tuple(int(self._bundle[lk]) for lk in links), []).append(i)
        return groups

    def _full(self, bundles, peak: float) -> list[int]:
        """The bundles among ``bundles`` with no live cable that one more connection would leave within ``peak``."""
        load, limit = self.connections, peak * (1 + 1e-12)
        return [b for b in bundles
                if not any(load[lk] + self._weight(lk) <= limit for lk in self._members[b]
                           if not self.failed or lk not in self.failed)]

    def _fitting(self, conn: Connection, indices: list[int], peak: float) -> int | None:
        """The cheapest live path among ``indices`` with every planned link within ``peak``; None if none."""
        paths = self.topology.paths(conn.src, conn.dst, conn.tcp)
        load, best, best_cost = self.connections, None, None
        for i in indices:
            links = self._candidates(conn)[i]
            if self._fits(links, peak) or (self.failed and not self.failed.isdisjoint(paths[i])):
                continue
            after = [load[lk] + self._weight(lk) for lk in links]
            cost = (max(after, default=0.0), sum(after))
            if best_cost is None or cost < best_cost:
                best, best_cost = i, cost
        return best

    def _make_room(self, bundle: int, peak: float, depth: int, moving: set[Connection], budget: list[int],
                   log: list, reserved: set[int]) -> bool:
        """Move a connection off ``bundle`` to a path within ``peak``, first making room on that path's one
        full bundle recursively: an augmenting (Kempe) chain, as in bipartite edge colouring. Paths are
        searched by the bundles they cross (parallel cables are one resource with several slots) and a
        direct move is tried before any chain. The connection being moved is lifted off its path while
        the chain is searched, so the rest of the chain may use what it frees (but never the bundles
        the chain is freeing, ``reserved``); a chain that fails is undone move by move. Occupants that
        are interchangeable (same choices, same current bundles) are tried once."""
        reserved = reserved | {bundle}
        occupants = set().union(*(self._on_link[lk] for lk in self._members[bundle]))
        tried = set()
        for other in sorted(occupants, key=_order):
            groups = self._by_bundles(other)
            home = self._index[other]
            kind = (tuple(groups), tuple(int(self._bundle[lk]) for lk in self._candidates(other)[home]))
            if other in moving or kind in tried:
                continue
            tried.add(kind)
            budget[0] -= 1
            if budget[0] < 0:
                return False
            mark = len(log)
            log.append((other, home))
            self._release(other)
            self._index[other] = home  # lifted: remembered for the undo
            moving.add(other)
            chains: dict[int, tuple[int, ...]] = {}  # full bundle -> the group of paths over it
            for sig, indices in groups.items():
                if not reserved.isdisjoint(sig):
                    continue
                direct = self._fitting(other, indices, peak)
                if direct is not None:
                    self._place(other, direct)
                    moving.discard(other)
                    return True
                full = self._full(sig, peak)
                if len(full) == 1:
                    chains.setdefault(full[0], sig)
            for full_bundle, sig in chains.items() if depth > 0 else ():
                inner = len(log)
                if self._make_room(full_bundle, peak, depth - 1, moving, budget, log, reserved):
                    index = self._fitting(other, groups[sig], peak)
                    if index is not None:
                        self._place(other, index)
                        moving.discard(other)
                        return True
                self._undo(log, inner)
                if budget[0] < 0:
                    break
            moving.discard(other)
            # Put everything back as it was before this attempt (``other`` goes home last).
            while len(log) > mark + 1:
                conn, index = log.pop()
                self._release(conn)
                self._place(conn, index)
            log.pop()
            self._place(other, home)
            if budget[0] < 0:
                return False
        return False

    def _closed(self, pair: tuple[int, int, bool], end: int, cut: frozenset[int]) -> bool:
        """Every candidate of ``pair`` crosses exactly one bundle of ``cut`` at position ``end`` (cached)."""
        key = (pair, end, cut)
        closed = self._closure.get(key)
        if closed is None:
            sigs = list(self._groups_of(pair))
            closed = self._closure[key] = all(
                sig and sig[end] in cut and sum(b in cut for b in sig) == 1 for sig in sigs)
        return closed

    def _hopeless(self, conn: Connection, peak: float) -> bool:
        """No chain of moves can make room for ``conn`` within ``peak``: at its first (or last) hop every
        bundle it could take is full, and every occupant of those bundles must itself take exactly one of
        them. Each such occupant then holds one slot of a closed, full set of cables whatever the moves,
        so one more connection cannot fit there. A cheap, exact cut: the repair search would only spend
        its budget to fail (an all-to-all on an oversubscribed fabric fills every uplink of a leaf)."""
        pair = (conn.src, conn.dst, conn.tcp)
        sigs = list(self._by_bundles(conn))
        if not sigs or not all(sigs):
            return False
        for end in (0, -1):
            cut = frozenset(sig[end] for sig in sigs)
            if len(self._full(cut, peak)) < len(cut) or not self._closed(pair, end, cut):
                continue
            occupants = set().union(*(self._on_link[lk] for b in cut for lk in self._members[b]))
            if all(self._closed((o.src, o.dst, o.tcp), end, cut) for o in occupants):
                return True
        return False

    def _assign(self, conn: Connection) -> Routes:
        """Place ``conn`` on its cheapest path. If even that would raise the busiest planned link above
        the peak so far, first try to make room on a group of candidates with a single full bundle:
        move an occupant along an augmenting chain (Kempe-chain swaps), shortest chains first
        (iterative deepening up to ``repair`` moves), so a deep search down one branch cannot use up
        the budget a short chain elsewhere needed."""
        best = self._best(conn)
        if best is None:  # every candidate crosses a failed link: wait on the first
            best = 0
        peak = self._peak
        if self.repair and peak > 0 and self._fits(self._candidates(conn)[best], peak) and not self._hopeless(conn, peak):
            budget = [self.repair * 500]
            targets: dict[int, tuple[int, ...]] = {}  # full bundle -> the first group of candidates over it
            for sig in self._by_bundles(conn):
                full = self._full(sig, peak)
                if len(full) == 1:
                    targets.setdefault(full[0], sig)
            done = False
            for depth in range(self.repair):
                for full_bundle, sig in targets.items():
                    done = self._make_room(full_bundle, peak, depth, {conn}, budget, [], set(sig))
                    if done or budget[0] < 0:
                        break
                if done or budget[0] < 0:
                    break
            again = self._best(conn)
            best = best if again is None else again
        return self._place(conn, best)

    def plan(self, connections: list[Connection]) -> None:
        """Place the connections opening in this instant, in (job, src, dst, channel, comm) order."""
        new = {c for c in connections if c not in self._routes}
        for conn in sorted(new, key=_order):
            self._assign(conn)

    def routes(self, connections):
        """Plan the batch's new connections (:meth:`plan`), then the planned path of each."""
        conns = as_connections(connections)
        self.plan(conns)
        return from_routes(self.topology, conns, [self.paths(c) for c in conns], self.independent)

    def paths(self, connection: Connection) -> Routes:
        """The planned path of ``connection`` (planned now if it was not yet)."""
        routes = self._routes.get(connection)
        return routes if routes is not None else self._assign(connection)

    def links_changed(self, state: dict[int, float]) -> None:
        """Re-plan the connections over links that failed or degraded, with loads rescaled by capacity."""
        old = self.link_state
        touched = {lk for lk in set(old) | set(state) if old.get(lk, 1.0) != state.get(lk, 1.0)}
        affected = sorted((c for c, r in self._routes.items() if not touched.isdisjoint(r[0][0])), key=_order)
        for conn in affected:
            self._release(conn)
        super().links_changed(state)
        # Loads of connections staying on degraded links are rescaled to the new capacities.
        self.connections.clear()
        self._on_link.clear()
        for conn, index in self._index.items():
            for lk in self._candidates(conn)[index]:
                self.connections[lk] += self._weight(lk)
                self._on_link[lk].add(conn)
        self._peak = max(self.connections.values(), default=0.0)
        for conn in affected:
            self._assign(conn)

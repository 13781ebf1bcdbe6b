"""C4P: central traffic planning of every job's long-lived connections (Alibaba's C4, arXiv 2406.04594)."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from netsim.errors import ConfigError
from netsim.routing.base import ROUTING, Connection, PolicyBase, Routes, option_time
from netsim.routing.routes import as_connections, from_routes
from netsim.topology import LINK_KINDS, Topology

def _order(conn: Connection) -> tuple[int, ...]:
    """The planner's deterministic order of connections: (job, src, dst, channel, comm)."""
    return conn.job, conn.src, conn.dst, conn.channel, conn.comm


#: Links the planner balances: NIC ports (both ends; the bonded-port choice) and the switch core.
_PLANNED_KINDS = ("nic_up", "nic_down", "up", "down", "local", "global")


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

    def _candidates(self, conn: Connection) -> list[tuple[int, ...]]:
        """The pair's paths reduced to the planned links on which they differ."""
        key = (conn.src, conn.dst, conn.tcp)
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

    def _make_room(self, link: int, peak: float, depth: int, moving: set[Connection], budget: list[int],
                   log: list, reserved: set[int]) -> bool:
        """Move a connection off ``link`` to a path within ``peak``, first making room on that path's one
        overflowing link recursively: an augmenting (Kempe) chain, as in bipartite edge colouring.
        The connection being moved is lifted off its path while the chain is searched, so the rest
        of the chain may use what it frees (but never the links the chain is freeing, ``reserved``); a
        chain that fails is undone move by move."""
        reserved = reserved | {link}
        for other in sorted(self._on_link[link], key=_order):
            if other in moving:
                continue
            mark = len(log)
            paths = self.topology.paths(other.src, other.dst, other.tcp)
            home = self._index[other]
            log.append((other, home))
            self._release(other)
            self._index[other] = home  # lifted: remembered for the undo
            moving.add(other)
            for alt, links in enumerate(self._candidates(other)):
                budget[0] -= 1
                if budget[0] < 0:
                    break
                if not reserved.isdisjoint(links) or (self.failed and not self.failed.isdisjoint(paths[alt])):
                    continue
                inner = len(log)
                over = self._fits(links, peak)
                if over and (depth == 0 or len(over) > 1
                             or not self._make_room(over[0], peak, depth - 1, moving, budget, log, reserved)):
                    self._undo(log, inner)
                    continue
                if not self._fits(links, peak):
                    self._place(other, alt)
                    moving.discard(other)
                    return True
                self._undo(log, inner)
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

    def _assign(self, conn: Connection) -> Routes:
        """Place ``conn`` on its cheapest path. If even that would raise the busiest planned link above
        the peak so far, first try to make room on a candidate with a single overflowing link: move
        its occupant along an augmenting chain of up to ``repair`` moves (Kempe-chain swaps)."""
        best = self._best(conn)
        if best is None:  # every candidate crosses a failed link: wait on the first
            best = 0
        peak = self._peak
        if self.repair and peak > 0 and self._fits(self._candidates(conn)[best], peak):
            budget = [self.repair * 500]
            paths = self.topology.paths(conn.src, conn.dst, conn.tcp)
            for i, links in enumerate(self._candidates(conn)):  # the first candidate made room for wins
                over = self._fits(links, peak)
                if len(over) == 1 and (not self.failed or self.failed.isdisjoint(paths[i])) \
                        and self._make_room(over[0], peak, self.repair - 1, {conn}, budget, [], set(links)):
                    break
                if budget[0] < 0:
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

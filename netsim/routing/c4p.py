"""C4P: central traffic planning of every job's long-lived connections (Alibaba's C4, arXiv 2406.04594)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from netsim.routing.base import ROUTING, Connection, PolicyBase, Routes, option_time
from netsim.topology import LINK_KINDS, Topology

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
    """

    def __init__(self, topology: Topology, rng: np.random.Generator | None = None, detection: str | float = "1ms"):
        super().__init__()
        self.topology = topology
        self.reaction_s = option_time(detection, "detection")
        self._planned = np.isin(topology.links.kind, [LINK_KINDS.index(k) for k in _PLANNED_KINDS])
        self._capacity = topology.links.capacity_Bps
        self.connections: defaultdict[int, float] = defaultdict(float)  # per link: connections / capacity
        self._routes: dict[Connection, Routes] = {}
        self._choices: dict[tuple[int, int], list[tuple[int, ...]]] = {}

    def _candidates(self, conn: Connection) -> list[tuple[int, ...]]:
        """The pair's paths reduced to the planned links on which they differ."""
        key = (conn.src, conn.dst)
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

    def _assign(self, conn: Connection) -> Routes:
        paths = self.topology.paths(conn.src, conn.dst)
        load = self.connections
        best, best_cost = 0, None
        for i, links in enumerate(self._candidates(conn)):
            if self.failed and not self.failed.isdisjoint(paths[i]):
                continue
            after = [load[lk] + self._weight(lk) for lk in links]
            cost = (max(after, default=0.0), sum(after))
            if best_cost is None or cost < best_cost:
                best, best_cost = i, cost
        for lk in self._candidates(conn)[best]:
            load[lk] += self._weight(lk)
        routes = self._routes[conn] = [(paths[best], 1.0)]
        return routes

    def _release(self, conn: Connection) -> None:
        paths = self.topology.paths(conn.src, conn.dst)
        index = paths.index(self._routes.pop(conn)[0][0])
        for lk in self._candidates(conn)[index]:
            self.connections[lk] -= self._weight(lk)

    def plan(self, connections: list[Connection]) -> None:
        """Place the connections opening in this instant, in (job, src, dst, channel, comm) order."""
        new = {c for c in connections if c not in self._routes}
        for conn in sorted(new, key=lambda c: (c.job, c.src, c.dst, c.channel, c.comm)):
            self._assign(conn)

    def paths(self, connection: Connection) -> Routes:
        """The planned path of ``connection`` (planned now if it was not yet)."""
        routes = self._routes.get(connection)
        return routes if routes is not None else self._assign(connection)

    def links_changed(self, state: dict[int, float]) -> None:
        """Re-plan the connections over links that failed or degraded, with loads rescaled by capacity."""
        old = self.link_state
        touched = {lk for lk in set(old) | set(state) if old.get(lk, 1.0) != state.get(lk, 1.0)}
        affected = sorted((c for c, r in self._routes.items() if not touched.isdisjoint(r[0][0])),
                          key=lambda c: (c.job, c.src, c.dst, c.channel, c.comm))
        for conn in affected:
            self._release(conn)
        super().links_changed(state)
        # Loads of connections staying on degraded links are rescaled to the new capacities.
        self.connections.clear()
        for conn, routes in self._routes.items():
            index = self.topology.paths(conn.src, conn.dst).index(routes[0][0])
            for lk in self._candidates(conn)[index]:
                self.connections[lk] += self._weight(lk)
        for conn in affected:
            self._assign(conn)

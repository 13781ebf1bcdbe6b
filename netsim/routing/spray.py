"""Packet spraying in its fluid limit: every connection evenly over all its equal-cost paths."""

from __future__ import annotations

import numpy as np

from netsim.routing.base import DEFAULT_RECONVERGENCE, ROUTING, Connection, PolicyBase, Routes, option_time
from netsim.topology import Topology


@ROUTING.register("spray")
class Spray(PolicyBase):
    """Ideal multipath: each connection's bytes split equally over every equal-cost path.

    The fluid limit of per-packet spraying with perfect reordering at the receiver: no hash
    collisions, so an n-to-n leaf-to-leaf pattern loads every uplink with exactly n f / s.
    The shares are fixed fractions of one flow (packets are sprayed obliviously), so a path that
    fails stalls the whole flow until routing reconverges and drops it from the set.
    The generator is accepted for a uniform policy signature and not used.

    Parameters
    ----------
    reconvergence:
        Routing reconvergence time after a link fault (default 10 ms, an estimate).
    """

    #: Each connection keeps the routes it got on first use until a fault (Fabric.run_ring relies on it).
    fixed = True

    def __init__(self, topology: Topology, rng: np.random.Generator | None = None,
                 reconvergence: str | float = DEFAULT_RECONVERGENCE):
        super().__init__()
        self.topology = topology
        self.reaction_s = option_time(reconvergence, "reconvergence")
        self._routes: dict[tuple[int, int, bool], Routes] = {}

    def _decide(self, key: tuple[int, int, bool]) -> Routes:
        candidates = self.live(self.topology.paths(*key))
        return [(p, 1.0 / len(candidates)) for p in candidates]

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

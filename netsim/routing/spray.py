"""Packet spraying in its fluid limit: every connection evenly over all its equal-cost paths."""

from __future__ import annotations

import numpy as np

from netsim.routing.base import ROUTING, Connection, Routes
from netsim.topology import Topology


@ROUTING.register("spray")
class Spray:
    """Ideal multipath: each connection's bytes split equally over every equal-cost path.

    The fluid limit of per-packet spraying with perfect reordering at the receiver: no hash
    collisions, so an n-to-n leaf-to-leaf pattern loads every uplink with exactly n f / s.
    The generator is accepted for a uniform policy signature and not used (spraying has no
    random choice in the fluid limit).
    """

    def __init__(self, topology: Topology, rng: np.random.Generator | None = None):
        self.topology = topology
        self._routes: dict[tuple[int, int], Routes] = {}

    def paths(self, connection: Connection) -> Routes:
        """All equal-cost paths of ``connection``, equal shares (shared by every connection of the pair)."""
        key = (connection.src, connection.dst)
        routes = self._routes.get(key)
        if routes is None:
            candidates = self.topology.paths(*key)
            routes = self._routes[key] = [(p, 1.0 / len(candidates)) for p in candidates]
        return routes

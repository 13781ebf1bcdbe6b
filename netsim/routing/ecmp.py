"""ECMP: each connection is hashed once onto one of its equal-cost paths and keeps it."""

from __future__ import annotations

import hashlib

import numpy as np

from netsim.routing.base import ROUTING, Connection, Routes
from netsim.topology import Topology


@ROUTING.register("ecmp")
class ECMP:
    """Hashed single-path routing, persistent per connection (like a switch hashing a QP's 5-tuple).

    The hash salt comes from the run's random generator, so another seed gives another (but
    equally plausible) set of collisions, and a given connection's path does not depend on the
    order in which connections open.

    Parameters
    ----------
    topology, rng:
        The fabric and the run's generator (one draw: the hash salt).
    """

    def __init__(self, topology: Topology, rng: np.random.Generator):
        self.topology = topology
        self.salt = int(rng.integers(0, 2**63)).to_bytes(8, "little")
        self._chosen: dict[Connection, Routes] = {}

    def _hash(self, connection: Connection) -> int:
        key = self.salt + np.array(connection.hash_key(), dtype=np.int64).tobytes()
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")

    def paths(self, connection: Connection) -> Routes:
        """The single path of ``connection``, chosen by hash on first use and then fixed."""
        routes = self._chosen.get(connection)
        if routes is None:
            candidates = self.topology.paths(connection.src, connection.dst)
            routes = [(candidates[self._hash(connection) % len(candidates)], 1.0)]
            self._chosen[connection] = routes
        return routes

"""ECMP: each connection is hashed once onto one of its equal-cost paths and keeps it."""

from __future__ import annotations

import hashlib

import numpy as np

from netsim.routing.base import DEFAULT_RECONVERGENCE, ROUTING, Connection, PolicyBase, Routes, option_time
from netsim.topology import Topology


@ROUTING.register("ecmp")
class ECMP(PolicyBase):
    """Hashed single-path routing, persistent per connection (like a switch hashing a QP's 5-tuple).

    The hash salt comes from the run's random generator, so another seed gives another (but
    equally plausible) set of collisions, and a given connection's path does not depend on the
    order in which connections open.

    Faults: ``reconvergence`` after a link goes down, connections whose hashed path crosses it are
    re-hashed over the live equal-cost paths (the others keep theirs); once the link is back and
    routing has reconverged again, they return to their original path.

    Parameters
    ----------
    topology, rng:
        The fabric and the run's generator (one draw: the hash salt).
    reconvergence:
        Routing reconvergence time after a link fault (default 10 ms, an estimate).
    """

    #: Each connection keeps the routes it got on first use until a fault (Fabric.run_ring relies on it).
    fixed = True

    def __init__(self, topology: Topology, rng: np.random.Generator, reconvergence: str | float = DEFAULT_RECONVERGENCE):
        super().__init__()
        self.topology = topology
        self.reaction_s = option_time(reconvergence, "reconvergence")
        self.salt = int(rng.integers(0, 2**63)).to_bytes(8, "little")
        self._chosen: dict[Connection, Routes] = {}

    def hash(self, key: tuple[int, ...]) -> int:
        """The salted 64-bit hash of integer ``key``."""
        data = self.salt + np.array(key, dtype=np.int64).tobytes()
        return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")

    def pick(self, candidates: list[tuple[int, ...]], key: tuple[int, ...]) -> tuple[int, ...]:
        """The candidate ``key`` hashes to; re-hashed over the live ones if that one crosses a failed link."""
        h = self.hash(key)
        path = candidates[h % len(candidates)]
        if self.failed and not self.failed.isdisjoint(path):
            alive = self.live(candidates)
            path = alive[h % len(alive)]
        return path

    def decide(self, connection: Connection) -> Routes:
        """The routes ``connection`` gets now (no caching)."""
        return [(self.pick(self.topology.paths(connection.src, connection.dst, connection.tcp), connection.hash_key()), 1.0)]

    def paths(self, connection: Connection) -> Routes:
        """The single path of ``connection``, chosen by hash on first use and then fixed."""
        routes = self._chosen.get(connection)
        if routes is None:
            routes = self._chosen[connection] = self.decide(connection)
        return routes

    def links_changed(self, state: dict[int, float]) -> None:
        """Routing reconverged: move connections off dead paths (and back once they are alive)."""
        super().links_changed(state)
        self.revise(self._chosen, self.decide)

"""ECMP: each connection is hashed once onto one of its equal-cost paths and keeps it."""

from __future__ import annotations

import hashlib

import numpy as np

from netsim.errors import ConfigError
from netsim.routing.base import DEFAULT_RECONVERGENCE, ROUTING, Connection, PolicyBase, Routes, option_time
from netsim.routing.routes import Columns, as_connections, connection_columns, from_routes, in_chunks, single_paths
from netsim.topology import Topology
from netsim.topology.pathsets import PathSets

#: Connections routed at a time (bounds the temporary arrays of a large batch, about 300 bytes each).
CHUNK = 2**17


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
    hashing:
        ``path`` (default): the source picks one of all equal-cost paths (per-path ECMP, source
        routed). ``hop``: every switch on the way picks one of its equal-cost next hops by hashing
        the connection with its own seed (per-hop ECMP, as switches do).
    seeds:
        With ``hashing: hop``: ``switch`` (default) gives every switch its own seed; ``shared``
        gives all the same one, which reproduces hash polarisation: with k next hops at one tier
        and k' at the next, only 1/gcd(k, k') of the next tier's are ever used.
    """

    #: Each connection keeps the routes it got on first use until a fault (Fabric.run_ring relies on it).
    fixed = True
    decides = "connection"

    def __init__(self, topology: Topology, rng: np.random.Generator, reconvergence: str | float = DEFAULT_RECONVERGENCE,
                 hashing: str = "path", seeds: str = "switch"):
        super().__init__()
        self.topology = topology
        self.reaction_s = option_time(reconvergence, "reconvergence")
        self.salt = int(rng.integers(0, 2**63)).to_bytes(8, "little")
        self._chosen: dict[Connection, Routes] = {}
        if hashing not in ("path", "hop"):
            raise ConfigError(f"must be path (the source picks one equal-cost path) or hop (each switch picks a "
                              f"next hop), got {hashing!r}", "routing.hashing")
        if seeds not in ("switch", "shared"):
            raise ConfigError(f"must be switch (a seed per switch) or shared (one seed: hash polarisation), got "
                              f"{seeds!r}", "routing.seeds")
        if seeds == "shared" and hashing == "path":
            raise ConfigError("seeds only apply to per-hop hashing: add hashing: hop", "routing.seeds")
        self.hashing, self.seeds = hashing, seeds

    def hash(self, key: tuple[int, ...]) -> int:
        """The salted 64-bit hash of integer ``key``."""
        data = self.salt + np.array(key, dtype=np.int64).tobytes()
        return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")

    def hashes(self, keys: np.ndarray) -> np.ndarray:
        """:meth:`hash` of every row of the integer array ``keys`` (uint64), about 0.5 us a row."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        buf, width, salt, blake = keys.tobytes(), 8 * keys.shape[1], self.salt, hashlib.blake2b
        digests = b"".join([blake(salt + buf[i:i + width], digest_size=8).digest() for i in range(0, len(buf), width)])
        return np.frombuffer(digests, dtype="<u8")

    def path_indices(self, cols: Columns, ps: PathSets, sub: int = 0) -> np.ndarray:
        """The index of the path each connection hashes to among its ``ps.n`` equal-cost paths (as
        :meth:`pick` without failed links); ``sub`` > 0: of its sub-connection ``sub`` (key ``(*key, -sub)``)."""
        out = np.empty(len(cols), dtype=np.int64)
        for rows, keys in cols.hash_keys():
            if sub:
                keys = np.column_stack([keys, np.full(len(rows), -sub, dtype=np.int64)])
            out[rows] = (self.hashes(keys) % ps.n[rows].astype(np.uint64)).astype(np.int64)
        return out

    def pick(self, candidates: list[tuple[int, ...]], key: tuple[int, ...]) -> tuple[int, ...]:
        """The candidate ``key`` hashes to; re-hashed over the live ones if that one crosses a failed link."""
        if self.hashing == "hop":
            return self.hop_by_hop(self.live(candidates) if self.failed else candidates, key)
        h = self.hash(key)
        path = candidates[h % len(candidates)]
        if self.failed and not self.failed.isdisjoint(path):
            alive = self.live(candidates)
            path = alive[h % len(alive)]
        return path

    def hop_by_hop(self, candidates: list[tuple[int, ...]], key: tuple[int, ...]) -> tuple[int, ...]:
        """Per-hop ECMP: from the source, each node where the (sorted) candidates branch picks one of its
        next links by the connection's hash under its seed (its node id, or one shared seed)."""
        src = self.topology.links.src
        depth = 0
        while len(candidates) > 1:
            hops = sorted({p[depth] for p in candidates})
            if len(hops) > 1:
                node = int(src[hops[0]])
                h = self.hash(key if self.seeds == "shared" else (*key, -1 - node))
                chosen = hops[h % len(hops)]
                candidates = [p for p in candidates if p[depth] == chosen]
            depth += 1
        return candidates[0]

    def decide(self, connection: Connection) -> Routes:
        """The routes ``connection`` gets now (no caching)."""
        return [(self.pick(self.topology.paths(connection.src, connection.dst, connection.tcp), connection.hash_key()), 1.0)]

    def paths(self, connection: Connection) -> Routes:
        """The single path of ``connection``, chosen by hash on first use and then fixed."""
        routes = self._chosen.get(connection)
        if routes is None:
            routes = self._chosen[connection] = self.decide(connection)
        return routes

    def routes(self, connections):
        """The hashed path of every connection of the batch: hashes in a loop, the rest in numpy (per-hop
        hashing: connection by connection)."""
        if self.hashing == "hop":
            conns = as_connections(connections)
            return from_routes(self.topology, conns, [self.paths(c) for c in conns], self.independent)
        return in_chunks(connection_columns(connections), CHUNK, self._hashed)

    def _hashed(self, cols: Columns):
        ps = self.topology.path_sets(cols.src, cols.dst, cols.tcp)
        ptr, links = ps.links(self.path_indices(cols, ps))
        table = single_paths(ptr, links, ps.latency_s(ptr, links) + ps.overhead_s)
        return self.decide_failed(table, cols, np.arange(len(cols)), self.decide)

    def links_changed(self, state: dict[int, float]) -> None:
        """Routing reconverged: move connections off dead paths (and back once they are alive)."""
        super().links_changed(state)
        self.revise(self._chosen, self.decide)

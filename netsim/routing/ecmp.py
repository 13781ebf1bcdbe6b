"""ECMP: each connection is hashed once onto one of its equal-cost paths and keeps it (or, with
``qps: k``, owns k hashed queue pairs and sends its messages round-robin over them, as Meta's E-ECMP)."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np

from netsim.errors import ConfigError
from netsim.routing.base import DEFAULT_RECONVERGENCE, ROUTING, Connection, PolicyBase, Routes, option_time
from netsim.routing.routes import (
    Columns,
    as_connections,
    concat_routes,
    connection_columns,
    crossing,
    from_routes,
    in_chunks,
    replace_rows,
    single_paths,
)
from netsim.topology import Topology
from netsim.topology.pathsets import PathSets

#: Connections routed at a time (bounds the temporary arrays of a large batch, about 300 bytes each).
CHUNK = 2**17
#: With queue pairs, batches up to this size are routed row by row in Python (see ``ECMP._qp_routes``).
SMALL_BATCH = 16


@ROUTING.register("ecmp")
class ECMP(PolicyBase):
    """Hashed single-path routing, persistent per connection (like a switch hashing a QP's 5-tuple).

    The hash salt comes from the run's random generator, so another seed gives another (but
    equally plausible) set of collisions, and a given connection's path does not depend on the
    order in which connections open.

    Faults: ``reconvergence`` after a link goes down, connections whose hashed path crosses it are
    re-hashed over the live equal-cost paths (the others keep theirs); once the link is back and
    routing has reconverged again, they return to their original path. With queue pairs, each
    queue pair is re-hashed alone, and a message in flight moves with its queue pair.

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
    qps:
        Queue pairs per connection (default 1). With k > 1 (Meta's E-ECMP, 16 per GPU pair) queue
        pair ``q`` is hashed like :class:`~netsim.routing.split.Split`'s sub-connection ``q`` (key
        ``(*key, -q)``, the plain key for ``q = 0``) and the connection's m-th message, in start
        order, travels whole on queue pair ``m mod k``: the policy then decides per message.

    Examples
    --------
    >>> from netsim.topology import leaf_spine
    >>> topo = leaf_spine(leaves=2, spines=4, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1,
    ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    >>> ecmp = ECMP(topo, np.random.default_rng(0), qps=4)
    >>> ecmp.decides, ecmp.queue_pairs([Connection(0, 1)] * 6).tolist()
    ('message', [0, 1, 2, 3, 0, 1])
    """

    #: Each connection keeps the routes it got on first use until a fault (with ``qps: 1``).
    fixed = True
    decides = "connection"

    def __init__(self, topology: Topology, rng: np.random.Generator, reconvergence: str | float = DEFAULT_RECONVERGENCE,
                 hashing: str = "path", seeds: str = "switch", qps: int = 1):
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
        if isinstance(qps, bool) or not isinstance(qps, int) or qps < 1:
            raise ConfigError(f"qps must be an integer >= 1 (queue pairs per connection), got {qps!r}", "routing.qps")
        self.hashing, self.seeds, self.qps = hashing, seeds, qps
        if qps > 1:  # a connection's routes change from message to message
            self.decides, self.fixed = "message", False
        self._sent: dict[tuple, int] = {}  # messages started per connection (qps > 1)
        self._qp_chosen: dict[tuple[Connection, int], Routes] = {}

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

    def path_indices(self, cols: Columns, ps: PathSets, sub: int | np.ndarray = 0) -> np.ndarray:
        """The index of the path each connection hashes to among its ``ps.n`` equal-cost paths (as
        :meth:`pick` without failed links); ``sub`` > 0: of its sub-connection (queue pair) ``sub``
        (key ``(*key, -sub)``), one for all rows or one per row."""
        out = np.empty(len(cols), dtype=np.int64)
        per_row = np.ndim(sub) > 0
        for rows, keys in cols.hash_keys():
            if per_row:
                subs = np.asarray(sub, dtype=np.int64)[rows]
                plain = subs == 0
                for part, part_keys in ((rows[plain], keys[plain]),
                                        (rows[~plain], np.column_stack([keys[~plain], -subs[~plain]]))):
                    if len(part):
                        out[part] = (self.hashes(part_keys) % ps.n[part].astype(np.uint64)).astype(np.int64)
                continue
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
        return self.decide_qp(connection, 0)

    def decide_qp(self, connection: Connection, qp: int) -> Routes:
        """The routes queue pair ``qp`` of ``connection`` gets now (no caching); queue pair 0 hashes as the
        connection does, ``qp`` > 0 as :class:`~netsim.routing.split.Split`'s sub-connection ``qp``."""
        key = connection.hash_key()
        return [(self.pick(self.topology.paths(connection.src, connection.dst, connection.tcp),
                           (*key, -qp) if qp else key), 1.0)]

    def paths(self, connection: Connection) -> Routes:
        """The single path of ``connection``, chosen by hash on first use and then fixed (``qps`` > 1: of
        the queue pair its latest message took, queue pair 0 before its first)."""
        if self.qps > 1:
            return self.qp_paths(connection, self.queue_pair(connection))
        routes = self._chosen.get(connection)
        if routes is None:
            routes = self._chosen[connection] = self.decide(connection)
        return routes

    def qp_paths(self, connection: Connection, qp: int) -> Routes:
        """The single path of queue pair ``qp`` of ``connection``, hashed on first use and then fixed (the
        same list while it stands: the reference executor compares routes by identity)."""
        routes = self._qp_chosen.get((connection, qp))
        if routes is None:
            routes = self._qp_chosen[(connection, qp)] = self.decide_qp(connection, qp)
        return routes

    def queue_pairs(self, connections) -> np.ndarray:
        """The queue pair each message of a batch (connections or their :class:`Columns`) starts on, in
        batch order (a connection listed twice starts two messages): a connection's m-th message takes
        ``m mod qps``. Counts the messages: :meth:`routes` and :meth:`plan` call it once per batch."""
        if self.qps == 1:
            return np.zeros(len(connections), dtype=np.int64)
        if isinstance(connections, Columns) or len(connections) > SMALL_BATCH:
            cols = connections if isinstance(connections, Columns) else connection_columns(connections)
            rows = zip(*(c.tolist() for c in cols))   # (tuples: equal to the Connections)
        else:  # perf: most instants start one or two messages; their columns cost more than they do
            rows = iter(connections)
        out = np.zeros(len(connections), dtype=np.int64)
        sent, k = self._sent, self.qps
        for i, key in enumerate(rows):
            m = sent.get(key, 0)
            sent[key] = m + 1
            out[i] = m % k
        return out

    def queue_pair(self, connection: Connection) -> int:
        """The queue pair of ``connection``'s latest message (0 before its first)."""
        return max(self._sent.get(connection, 0) - 1, 0) % self.qps

    def plan(self, connections) -> None:
        """With ``qps`` > 1: the batch's messages start, each on its connection's next queue pair
        (the reference executor then asks :meth:`paths`)."""
        if self.qps > 1:
            self.queue_pairs(connections)

    def routes(self, connections):
        """The hashed path of every connection of the batch: hashes in a loop, the rest in numpy (per-hop
        hashing: connection by connection). With ``qps`` > 1, every entry is a message starting and
        takes its queue pair's path."""
        if self.qps > 1:
            return self._qp_routes(connections)
        if self.hashing == "hop":
            conns = as_connections(connections)
            return from_routes(self.topology, conns, [self.paths(c) for c in conns], self.independent)
        return in_chunks(connection_columns(connections), CHUNK, self._hashed)

    def route_keys(self, connections) -> np.ndarray | None:
        """What a batch's routes depend on beyond each connection, for an executor that keeps the routes
        it was given: with ``qps`` > 1 and no failed link, each message's queue pair (counted, as
        :meth:`routes` counts them); ``None`` otherwise (ask :meth:`routes`). The executor then asks
        :meth:`keyed_routes` only for (connection, queue pair)s it has not seen."""
        if self.qps == 1 or self.failed:
            return None
        return self.queue_pairs(connections)

    def keyed_routes(self, connections, keys: np.ndarray):
        """The routes of a batch whose queue pairs are ``keys`` (from :meth:`route_keys`; nothing counted)."""
        return self._qp_routes(connections, np.asarray(keys, dtype=np.int64))

    def _qp_routes(self, connections, qps: np.ndarray | None = None):
        """:meth:`routes` with queue pairs: each entry's queue pair (counted unless given), then its path
        (large batches under per-path hashing in numpy)."""
        cols = connection_columns(connections)
        if qps is None:
            qps = self.queue_pairs(cols)
        if self.hashing == "path" and len(cols) > SMALL_BATCH:
            return concat_routes([self._hashed(Columns(*(c[at:at + CHUNK] for c in cols)), qps[at:at + CHUNK])
                                  for at in range(0, len(cols), CHUNK)])
        # perf: rotating queue pairs desynchronise connections, so most instants start one or two
        # messages: a batch of one takes ~30 us here and ~340 us through arrays (even at ~20 rows).
        topo = self.topology
        paths, delay = [], np.empty(len(cols))
        for i, (row, q) in enumerate(zip(zip(*(c.tolist() for c in cols)), qps.tolist())):
            conn = Connection(*row)
            path = self.decide_qp(conn, q)[0][0]
            paths.append(path)
            # CORRECTNESS: bit for bit the array path's delay (path_sums sums as path_latency_s does)
            delay[i] = topo.path_latency_s(path) + topo.message_overhead_s(conn.src, conn.dst, conn.tcp)
        ptr = np.zeros(len(paths) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, paths), dtype=np.int64, count=len(paths)), out=ptr[1:])
        links = np.fromiter(itertools.chain.from_iterable(paths), dtype=np.int64, count=int(ptr[-1]))
        return single_paths(ptr, links, delay)

    def _hashed(self, cols: Columns, qps: np.ndarray | None = None):
        """The table of ``cols`` (queue pair ``qps[i]`` for row ``i``, if given); rows whose path crosses a
        failed link are re-hashed over the live paths."""
        ps = self.topology.path_sets(cols.src, cols.dst, cols.tcp)
        ptr, links = ps.links(self.path_indices(cols, ps, 0 if qps is None else qps))
        table = single_paths(ptr, links, ps.latency_s(ptr, links) + ps.overhead_s)
        if qps is None:
            return self.decide_failed(table, cols, np.arange(len(cols)), self.decide)
        rows = np.flatnonzero(crossing(table, self.failed)) if self.failed else ()
        if not len(rows):
            return table
        conns = [Connection(s, d, c, j, m, bool(t)) for s, d, c, j, m, t in zip(*(col[rows].tolist() for col in cols))]
        return replace_rows(table, rows, from_routes(self.topology, conns, [
            self.decide_qp(c, q) for c, q in zip(conns, qps[rows].tolist())], self.independent))

    def links_changed(self, state: dict[int, float]) -> None:
        """Routing reconverged: move connections (queue pairs) off dead paths (and back once they are alive)."""
        super().links_changed(state)
        self.revise(self._chosen, self.decide)
        self.revise(self._qp_chosen, lambda key: self.decide_qp(*key))

"""Application-layer flow splitting over hashed paths (MP-RDMA-k): k sub-connections per connection."""

from __future__ import annotations

import numpy as np

from netsim.errors import ConfigError
from netsim.routing.base import DEFAULT_RECONVERGENCE, ROUTING, Connection, Routes
from netsim.routing.ecmp import CHUNK, ECMP
from netsim.routing.routes import Columns, _route_table, connection_columns, in_chunks
from netsim.topology import Topology


@ROUTING.register("split")
class Split(ECMP):
    """Every message cut into ``ways`` equal sub-flows on ``ways`` persistent sub-connections.

    Each sub-connection is hashed independently, as a switch hashes separate queue pairs (so two
    may land on the same path), and carries its share at its own max-min rate; a message is
    delivered when its last sub-flow is. Sub-connection 0 hashes exactly like the connection
    under ``ecmp``, so ``ways: 1`` is ECMP.

    Parameters
    ----------
    topology, rng:
        The fabric and the run's generator (one draw: the hash salt).
    ways:
        Sub-flows per message (queue pairs per connection), >= 1.
    reconvergence:
        Routing reconvergence time after a link fault (default 10 ms, an estimate).
    """

    independent = True

    def __init__(self, topology: Topology, rng: np.random.Generator, ways: int = 2,
                 reconvergence: str | float = DEFAULT_RECONVERGENCE):
        super().__init__(topology, rng, reconvergence)
        if isinstance(ways, bool) or not isinstance(ways, int) or ways < 1:
            raise ConfigError(f"ways must be an integer >= 1, got {ways!r}", "routing.ways")
        self.ways = ways

    def decide(self, connection: Connection) -> Routes:
        """``ways`` independently hashed sub-flows, equal shares."""
        candidates = self.topology.paths(connection.src, connection.dst, connection.tcp)
        key = connection.hash_key()
        share = 1.0 / self.ways
        return [(self.pick(candidates, key if i == 0 else (*key, -i)), share) for i in range(self.ways)]

    def routes(self, connections):
        """``ways`` hashed pieces per connection (one when ``ways`` is 1), each on its own path."""
        if self.ways == 1:
            return super().routes(connections)
        return in_chunks(connection_columns(connections), CHUNK // self.ways, self._split)

    def _split(self, cols: Columns):
        ps = self.topology.path_sets(cols.src, cols.dst, cols.tcp)
        n, ways = len(cols), self.ways
        index = np.empty((n, ways), dtype=np.int64)
        for i in range(ways):
            index[:, i] = self.path_indices(cols, ps, sub=i)
        owner = np.repeat(np.arange(n, dtype=np.int64), ways)
        ptr, links = ps.take(owner).links(index.reshape(-1))
        delay = ps.latency_s(ptr, links) + ps.overhead_s[owner]
        table = _route_table(np.arange(0, n * ways + 1, ways), np.full(n * ways, 1.0 / ways), delay,
                             np.ones(n * ways, dtype=np.int64), ptr, links, np.ones(len(links)))
        return self.decide_failed(table, cols, owner, self.decide)

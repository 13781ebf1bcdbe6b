"""The routing-policy protocol and registry: how a connection's bytes are spread over paths."""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from netsim.registry import Registry
from netsim.topology import Topology


class Connection(NamedTuple):
    """A persistent connection (an RDMA queue pair): it keeps its path(s) for its lifetime."""

    src: int
    dst: int
    channel: int = 0
    job: int = 0
    comm: int = 0  #: communicator within the job: concurrent communicators own separate queue pairs

    def label(self) -> str:
        """Compact text form used in results (``src>dst#channel``; job/communicator prefixes when non-zero)."""
        base = f"{self.src}>{self.dst}#{self.channel}"
        if self.comm:
            base = f"c{self.comm}:{base}"
        return f"j{self.job}:{base}" if self.job else base

    def hash_key(self) -> tuple[int, ...]:
        """The integers a hashing policy mixes: ``comm`` only when non-zero, so adding it left every
        existing single-communicator hash (and so every ECMP collision pattern) unchanged."""
        return tuple(self) if self.comm else tuple(self)[:4]


#: A routing decision: a list of (path as link ids, fraction of the bytes), fractions summing to 1.
Routes = list[tuple[tuple[int, ...], float]]


@runtime_checkable
class RoutingPolicy(Protocol):
    """What every routing policy provides.

    ``paths`` decides the routes of one connection. Policies that decide jointly may also define
    ``plan(connections)``, called once with every connection opened in the same instant before
    their ``paths`` are asked.
    """

    def paths(self, connection: Connection) -> Routes: ...


ROUTING: Registry[RoutingPolicy] = Registry("routing policy")


def make_routing(name: str, topology: Topology, rng: np.random.Generator, options: dict | None = None,
                 path: str = "routing") -> RoutingPolicy:
    """Build the routing policy registered as ``name`` for ``topology``."""
    return ROUTING.create(name, options, topology, rng, path=path)

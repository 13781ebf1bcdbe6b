"""The routing-policy protocol and registry: how a connection's bytes are spread over paths."""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from netsim.errors import ConfigError, UnitError
from netsim.registry import Registry
from netsim.topology import Topology
from netsim.units import parse_time

#: Default routing reconvergence after a link fault (est.): how long hashed ECMP keeps using a dead path.
DEFAULT_RECONVERGENCE = "10ms"


class Connection(NamedTuple):
    """A persistent connection (an RDMA queue pair): it keeps its path(s) for its lifetime."""

    src: int
    dst: int
    channel: int = 0
    job: int = 0
    comm: int = 0  #: communicator within the job: concurrent communicators own separate queue pairs
    tcp: bool = False  #: the communicator mixes NIC families: TCP over the hosts' Ethernet NICs (Holmes's rule)

    def label(self) -> str:
        """Compact text form used in results (``src>dst#channel``; job/communicator prefixes when non-zero)."""
        base = f"{self.src}>{self.dst}#{self.channel}" + ("/tcp" if self.tcp else "")
        if self.comm:
            base = f"c{self.comm}:{base}"
        return f"j{self.job}:{base}" if self.job else base

    def hash_key(self) -> tuple[int, ...]:
        """The integers a hashing policy mixes: ``comm`` only when non-zero, so adding it left every
        existing single-communicator hash (and so every ECMP collision pattern) unchanged. ``tcp``
        is left out: a TCP connection's candidate paths are different ones anyway."""
        return tuple(self)[:5] if self.comm else tuple(self)[:4]


#: A routing decision: a list of (path as link ids, fraction of the bytes), fractions summing to 1.
Routes = list[tuple[tuple[int, ...], float]]


class Window:
    """Routes that are ``k`` consecutive paths of ``base`` (wrapping around), each with fraction ``frac``.

    Reads like the list of (path, fraction) entries it stands for (length, indexing, iteration,
    equality) without building it; the engine uses the structure to hand a split message's pieces
    to its flow table as slices of one cached incidence per ``base``.

    >>> w = Window((("a",), ("b",), ("c",)), at=2, k=2, frac=0.5)
    >>> list(w), len(w), w[1]
    ([(('c',), 0.5), (('a',), 0.5)], 2, (('a',), 0.5))
    >>> w == [(("c",), 0.5), (("a",), 0.5)]
    True
    """

    __slots__ = ("at", "base", "frac", "k")
    __hash__ = None  # like a list

    def __init__(self, base: tuple, at: int, k: int, frac: float):
        self.base, self.at, self.k, self.frac = base, at % len(base), k, frac

    def __len__(self) -> int:
        return self.k

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(self.k))]
        if j < 0:
            j += self.k
        if not 0 <= j < self.k:
            raise IndexError("window index out of range")
        base = self.base
        return base[(self.at + j) % len(base)], self.frac

    def __iter__(self):
        base, s, frac = self.base, len(self.base), self.frac
        return ((base[(self.at + j) % s], frac) for j in range(self.k))

    def __eq__(self, other) -> bool:
        if isinstance(other, Window):
            if other.base is self.base:
                return (self.at, self.k, self.frac) == (other.at, other.k, other.frac)
            return list(self) == list(other)
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    def __repr__(self) -> str:
        return f"Window({list(self)!r})"


@runtime_checkable
class RoutingPolicy(Protocol):
    """What every routing policy provides.

    ``paths`` decides the routes of one connection. The Fabric also reads, when present:

    - ``plan(connections)``: called once per simulated instant with the connections of every
      message that starts transmitting in it, before their ``paths`` are asked (batch decisions:
      Ethereal, C4P);
    - ``independent``: when true, each ``(path, fraction)`` entry of a connection's routes is its
      own sub-flow (its own queue pair, its own max-min rate), and a message completes when all
      its sub-flows have; otherwise the entries are fixed fractions of one fluid flow (spraying).
      Routes may be a :class:`Window` (consecutive paths of a shared base list, one fraction):
      the compiled engine then slices the pieces' incidence out of one cached array per base;
    - ``links_changed(state)`` and ``reaction_s``: after a fault, once ``reaction_s`` has passed,
      the policy is told ``state`` = ``{link: capacity fraction}`` of every link it knows to be
      down (0) or degraded; the Fabric then moves in-flight messages whose routes changed.
    """

    def paths(self, connection: Connection) -> Routes: ...


class PolicyBase:
    """Fault plumbing shared by the policies: the links they know to be down or degraded.

    Subclasses set ``reaction_s`` (how long after a fault they learn of it) and call
    :meth:`live` to drop paths over failed links from their candidates.
    """

    independent = False
    reaction_s = 0.0
    #: True when a connection's routes, once decided, change only through ``links_changed``.
    fixed = False

    def __init__(self) -> None:
        self.link_state: dict[int, float] = {}
        self.failed: frozenset[int] = frozenset()

    def live(self, paths: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
        """``paths`` without those crossing a failed link (all of them when none is left: they stall)."""
        if not self.failed:
            return paths
        alive = [p for p in paths if self.failed.isdisjoint(p)]
        return alive or paths

    def links_changed(self, state: dict[int, float]) -> None:
        """Learn the current down (0) / degraded (fraction) links; subclasses revise their choices."""
        self.link_state = dict(state)
        self.failed = frozenset(link for link, frac in state.items() if frac <= 0.0)

    @staticmethod
    def revise(chosen: dict, decide) -> None:
        """Re-decide every cached choice; replace only those that changed (the Fabric compares by identity)."""
        for key, routes in list(chosen.items()):
            new = decide(key)
            if new != routes:
                chosen[key] = new


ROUTING: Registry[RoutingPolicy] = Registry("routing policy")


def option_time(value, option: str) -> float:
    """A policy's time option (``"10ms"``, seconds) in seconds; a ConfigError naming ``routing.<option>``."""
    try:
        return parse_time(value)
    except UnitError as err:
        raise ConfigError(str(err), f"routing.{option}") from None


def make_routing(name: str, topology: Topology, rng: np.random.Generator, options: dict | None = None,
                 path: str = "routing") -> RoutingPolicy:
    """Build the routing policy registered as ``name`` for ``topology``."""
    return ROUTING.create(name, options, topology, rng, path=path)

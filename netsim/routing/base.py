"""The routing-policy protocol and registry: how a connection's bytes are spread over paths."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol, get_args, runtime_checkable

import numpy as np

from netsim.errors import ConfigError, UnitError
from netsim.registry import Registry
from netsim.routing.routes import Columns, as_connections, crossing, from_routes, replace_rows
from netsim.topology import Topology
from netsim.units import parse_time

if TYPE_CHECKING:
    from netsim.engine.model import RouteTable

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


#: When a policy decides a connection's routes (see :class:`RoutingPolicy`).
Decides = Literal["connection", "first_use", "message"]
DECIDES: tuple[str, ...] = get_args(Decides)


@runtime_checkable
class RoutingPolicy(Protocol):
    """What every routing policy provides: the routes of batches of connections, as a :class:`RouteTable`.

    Attributes
    ----------
    independent:
        True when each route entry of a connection is its own sub-flow (its own queue pair and
        max-min rate; a message completes when all its pieces have): ``split``, ``ethereal``,
        ``min-split``. Otherwise a connection's entries are fixed fractions of one fluid flow
        (spraying) and its route table has one piece.
    decides:
        ``"connection"``: a connection's routes depend only on the connection and the link state
        (the policy hashes or seeds per connection), so any batch in any order gives the same routes.
        ``"first_use"``: decided once, when the connection's first message starts, in start order,
        because decisions depend on earlier ones (UGAL, adaptive, minimal, Valiant). ``"message"``:
        asked again for every message at the instant it starts (Ethereal's rotating windows; C4P,
        whose repair can move connections already placed).
    reaction_s:
        How long after a fault the policy learns of it (``links_changed`` is called then).

    Methods
    -------
    routes(connections):
        The routes of a batch (a sequence of :class:`Connection` or a ``ConnectionTable``), one
        row per entry of the batch. For ``first_use`` and ``message`` policies the batch is the
        connections whose messages start at one instant, in start order; a policy that plans a
        batch jointly (C4P, Ethereal) plans it here. Conventions: :mod:`netsim.routing.routes`.
    links_changed(state):
        The policy learns ``state`` = ``{link: capacity fraction}`` of every link it knows to be
        down (0) or degraded; the routes it gives from then on avoid failed links.
    paths(connection):
        The routes of one connection as ``[(path, fraction), ...]``: the per-connection view,
        for tests and tools (``routes([c])`` describes exactly these routes).

    plan(connections):
        Decide a batch jointly before ``paths`` is asked for each of it (the reference executor's
        per-message view of ``routes``); a no-op for policies that decide each connection alone.
    """

    independent: bool
    decides: Decides
    reaction_s: float

    def routes(self, connections: Sequence[Connection]) -> RouteTable: ...

    def links_changed(self, state: dict[int, float]) -> None: ...

    def paths(self, connection: Connection) -> Routes: ...

    def plan(self, connections: Sequence[Connection]) -> None: ...


class PolicyBase:
    """Fault plumbing shared by the policies: the links they know to be down or degraded.

    Subclasses set ``reaction_s`` (how long after a fault they learn of it) and call
    :meth:`live` to drop paths over failed links from their candidates. The default
    :meth:`routes` asks :meth:`paths` connection by connection.
    """

    independent = False
    decides: Decides = "connection"
    reaction_s = 0.0
    #: True when a connection's routes, once decided, change only through ``links_changed``.
    fixed = False
    topology: Topology

    def __init__(self) -> None:
        self.link_state: dict[int, float] = {}
        self.failed: frozenset[int] = frozenset()

    def routes(self, connections: Sequence[Connection]) -> RouteTable:
        """The routes of a batch, from :meth:`paths` of each connection in batch order."""
        conns = as_connections(connections)
        return from_routes(self.topology, conns, [self.paths(c) for c in conns], self.independent)

    def plan(self, connections: Sequence[Connection]) -> None:
        """Decide a batch of connections jointly before :meth:`paths` is asked for each (C4P, Ethereal);
        by default each connection is decided on its own, when asked."""

    def decide_failed(self, table: RouteTable, cols: Columns, owner: np.ndarray, decide,
                      links: frozenset[int] | None = None) -> RouteTable:
        """``table`` (of the connections ``cols``; piece ``p`` belongs to connection ``owner[p]``) with
        every connection that has a piece over a failed link (or over one of ``links``) decided again,
        one by one, by ``decide(connection) -> Routes``: faults are rare, so their exceptions are Python."""
        links = self.failed if links is None else links
        if not links:
            return table
        hit = np.zeros(len(cols), dtype=bool)
        hit[owner[crossing(table, links)]] = True
        rows = np.flatnonzero(hit)
        if not len(rows):
            return table
        conns = [Connection(s, d, c, j, m, bool(t)) for s, d, c, j, m, t in zip(*(col[rows].tolist() for col in cols))]
        return replace_rows(table, rows, from_routes(self.topology, conns, [decide(c) for c in conns], self.independent))

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

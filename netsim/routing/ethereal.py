"""Ethereal: single-path queue pairs with minimal application-layer splitting, planned per sender NIC.

Addanki, Goyal, Marinos (arXiv 2407.00550): a sender NIC batches the sends issued in one instant
by destination leaf. With ``n`` equal flows to one leaf and ``s`` usable uplinks, ``n = q*s + r``:
the ``q*s`` whole flows go round-robin (q per uplink) and each of the ``r`` leftovers is split
into ``s/g`` equal pieces, ``g = gcd(r, s)``, ``r/g`` pieces per uplink. Every uplink then
carries exactly ``n*f/s``, what ideal spraying gives, without per-packet reordering.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import lru_cache

import numpy as np

from netsim.routing.base import ROUTING, Connection, PolicyBase, Routes, Window, option_time
from netsim.routing.routes import as_connections, from_routes
from netsim.topology import CORE_LINK_KINDS, LINK_KINDS, Topology

#: Link kinds that distinguish one "uplink" choice from another: the sender's NIC port and the core.
_CHOICE_KINDS = ("nic_up", *CORE_LINK_KINDS)


def equal_split(n: int, s: int) -> list[list[tuple[int, float]]]:
    """Ethereal's construction: per flow, its (uplink, fraction) pieces, for ``n`` flows over ``s`` uplinks.

    Whole flows ``0 .. q*s-1`` go to uplink ``i % s``; leftover ``k`` is cut into ``s/g`` pieces of
    ``g/s`` each on consecutive uplinks, so each uplink gets ``r/g`` pieces.

    >>> equal_split(5, 4)
    [[(0, 1.0)], [(1, 1.0)], [(2, 1.0)], [(3, 1.0)], [(0, 0.25), (1, 0.25), (2, 0.25), (3, 0.25)]]
    """
    q, r = divmod(n, s)
    out = [[(i % s, 1.0)] for i in range(q * s)]
    if r:
        per = s // math.gcd(r, s)
        for k in range(r):
            out.append([((k * per + j) % s, 1.0 / per) for j in range(per)])
    return out


def min_split(n: int, s: int) -> list[list[tuple[int, float]]]:
    """The fewest-pieces variant: leftovers laid end to end and cut at uplink boundaries.

    The ``r`` leftover flows form a line of length ``r*f`` cut into ``s`` segments of ``r*f/s``;
    a flow crossing a cut is split there: ``r + s - gcd(r, s)`` pieces in all, of unequal sizes.

    >>> min_split(3, 2)
    [[(0, 1.0)], [(1, 1.0)], [(0, 0.5), (1, 0.5)]]
    >>> [[(u, round(f, 3)) for u, f in p] for p in min_split(2, 3)]
    [[(0, 0.667), (1, 0.333)], [(1, 0.333), (2, 0.667)]]
    """
    q, r = divmod(n, s)
    out = [[(i % s, 1.0)] for i in range(q * s)]
    # In units of f/s: flow k spans [k*s, (k+1)*s), uplink u takes [u*r, (u+1)*r).
    for k in range(r):
        lo, hi = k * s, (k + 1) * s
        pieces = []
        for u in range(lo // r, (hi - 1) // r + 1):
            overlap = min(hi, (u + 1) * r) - max(lo, u * r)
            if overlap > 0:
                pieces.append((u, overlap / s))
        out.append(pieces)
    return out


@lru_cache(maxsize=4096)
def _split(splitter, n: int, s: int) -> list[list[tuple[int, float]]]:
    """``splitter(n, s)``, computed once per (n, s) (callers only read it)."""
    return splitter(n, s)


@ROUTING.register("ethereal")
class Ethereal(PolicyBase):
    """Ethereal's per-NIC batch planning (module docstring), with failed-path exclusion.

    Each sub-flow is its own single-path queue pair (``independent``). The batch is every send a
    NIC starts in one simulated instant, grouped by the set of uplink choices its destination
    offers (the destination leaf). The round-robin starts where the NIC's previous batch to that
    leaf stopped. A failed uplink is excluded from later batches once ``detection`` (the
    queue-pair timeout) has passed; pieces caught on it move to live uplinks then.

    Parameters
    ----------
    topology, rng:
        The fabric and the run's generator (unused: the construction is deterministic).
    detection:
        Queue-pair timeout after which a failed path is excluded (default 1 ms).
    """

    independent = True
    decides = "message"
    splitter = staticmethod(equal_split)
    #: The splitter gives every flow consecutive uplinks with one fraction: routes are Windows.
    windows = True

    def __init__(self, topology: Topology, rng: np.random.Generator | None = None, detection: str | float = "1ms"):
        super().__init__()
        self.topology = topology
        self.reaction_s = option_time(detection, "detection")
        self._choice = np.isin(topology.links.kind, [LINK_KINDS.index(k) for k in _CHOICE_KINDS])
        self._options: dict[tuple[int, int], tuple[tuple, dict]] = {}
        self._routes: dict[Connection, Routes] = {}
        self._cursor: defaultdict[tuple, int] = defaultdict(int)
        self._keys: dict[tuple, tuple] = {}  # one object per distinct uplink set (grouped by identity)

    def options(self, src: int, dst: int, tcp: bool = False) -> tuple[tuple, dict, tuple]:
        """(sorted uplink keys, key -> path, the paths in key order) of a GPU pair; a key is the path's
        NIC port and core links."""
        cached = self._options.get((src, dst, tcp))
        if cached is None:
            by_key: dict[tuple, tuple[int, ...]] = {}
            for path in self.topology.paths(src, dst, tcp):
                by_key.setdefault(tuple(lk for lk in path if self._choice[lk]), path)
            keys = tuple(sorted(by_key))
            keys = self._keys.setdefault(keys, keys)
            base = tuple(by_key[k] for k in keys)
            cached = self._options[(src, dst, tcp)] = (keys, by_key, base)
        return cached

    def _live_keys(self, keys: tuple) -> tuple:
        if not self.failed:
            return keys
        alive = tuple(k for k in keys if self.failed.isdisjoint(k))
        return alive or keys

    def plan(self, connections: list[Connection]) -> None:
        """Plan one instant's sends: per (sender NIC, destination uplink set), the split construction."""
        groups: dict[tuple, tuple[tuple, list[Connection]]] = {}
        nic_of, options = self.topology.nic_of, self.options
        for conn in dict.fromkeys(connections):
            keys = options(conn.src, conn.dst, conn.tcp)[0]
            group = (nic_of(conn.src), id(keys))  # perf: uplink sets are interned (see options)
            entry = groups.get(group)
            if entry is None:
                groups[group] = (keys, [conn])
            else:
                entry[1].append(conn)
        for group, (keys, conns) in groups.items():
            live = self._live_keys(keys)
            s = len(live)
            if len(conns) > 1:
                conns.sort(key=lambda c: (c.dst, c.channel, c.job, c.comm))
            start = self._cursor[group]  # (by the interned set's id: no hash of a long tuple)
            for conn, pieces in zip(conns, _split(self.splitter, len(conns), s)):
                if self.windows:
                    u, frac = pieces[0]
                    routes = self._window(conn, live, keys, (start + u) % s, len(pieces), frac)
                else:
                    by_key = options(conn.src, conn.dst, conn.tcp)[1]
                    routes = [(by_key[live[(start + u) % s]], frac) for u, frac in pieces]
                old = self._routes.get(conn)
                if routes is not old and routes != old:
                    self._routes[conn] = routes
            self._cursor[group] = (start + len(conns)) % s

    def _window(self, conn: Connection, live: tuple, keys: tuple, at: int, k: int, frac: float) -> Window:
        """The routes over ``k`` consecutive live uplinks from ``at``."""
        if live is keys:
            return Window(self.options(conn.src, conn.dst, conn.tcp)[2], at, k, frac)
        by_key = self.options(conn.src, conn.dst, conn.tcp)[1]  # some uplinks failed: the live ones
        return Window(tuple(by_key[key] for key in live), at, k, frac)

    def routes(self, connections):
        """Plan the batch (:meth:`plan`: the sends starting in one instant), then each one's pieces."""
        conns = as_connections(connections)
        self.plan(conns)
        planned = self._routes
        return from_routes(self.topology, conns, [planned[c] for c in conns], self.independent)

    def paths(self, connection: Connection) -> Routes:
        """The pieces planned for ``connection`` in its latest batch (a batch of its own if none)."""
        routes = self._routes.get(connection)
        if routes is None:
            self.plan([connection])
            routes = self._routes[connection]
        return routes

    def links_changed(self, state: dict[int, float]) -> None:
        """The queue-pair timeout fired: pieces on failed paths move to live uplinks (in turn)."""
        super().links_changed(state)
        if not self.failed:
            return
        for conn, routes in list(self._routes.items()):
            if all(self.failed.isdisjoint(p) for p, _ in routes):
                continue
            keys, by_key, _base = self.options(conn.src, conn.dst, conn.tcp)
            live = self._live_keys(keys)
            self._routes[conn] = [(p, frac) if self.failed.isdisjoint(p) else (by_key[live[i % len(live)]], frac)
                                  for i, (p, frac) in enumerate(routes)]


@ROUTING.register("min-split")
class MinSplit(Ethereal):
    """Ethereal with the fewest pieces: ``r + s - gcd(r, s)`` unequal pieces for the leftovers (:func:`min_split`).

    Same uplink loads as :class:`Ethereal` (every uplink gets ``n*f/s``) with fewer queue pairs.
    """

    splitter = staticmethod(min_split)
    windows = False


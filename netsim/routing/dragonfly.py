"""Dragonfly routing: minimal, Valiant, UGAL and Slingshot-like adaptive spraying, per connection."""

from __future__ import annotations

import hashlib
from collections import defaultdict

import numpy as np

from netsim.errors import ConfigError
from netsim.routing.base import DEFAULT_RECONVERGENCE, ROUTING, Connection, PolicyBase, Routes, option_time
from netsim.topology import LINK_KINDS, Topology

SWITCH_LINK_KINDS = ("local", "global")


class _Dragonfly(PolicyBase):
    """Shared machinery: per-connection random streams, Valiant paths, connection load per link.

    Faults: ``reconvergence`` after a link fails, connections over it are decided again with the
    failed links' paths left out (minimal candidates filtered; a Valiant path over a dead link
    falls back to a live minimal one).
    """

    #: Each connection keeps the routes it got on first use until a fault (Fabric.run_ring relies on it).
    fixed = True
    # Minimal, Valiant: each connection's own random stream, but a decision is kept once made and
    # revised only while its links are down: when it is made (before or during a fault) matters.
    decides = "first_use"

    name = "dragonfly policy"

    def __init__(self, topology: Topology, rng: np.random.Generator, reconvergence: str | float = DEFAULT_RECONVERGENCE):
        super().__init__()
        self.reaction_s = option_time(reconvergence, "reconvergence")
        if topology.params.get("type") != "dragonfly":
            raise ConfigError(f"routing {self.name!r} needs a dragonfly topology (dragonfly or frontier), "
                              f"got {topology.params.get('type')!r}; on leaf-spine use ecmp", "routing.type")
        self.topology = topology
        self.salt = int(rng.integers(0, 2**63))
        self._chosen: dict[Connection, Routes] = {}
        self._switch_kind = np.isin(topology.links.kind, [LINK_KINDS.index(k) for k in SWITCH_LINK_KINDS])
        #: Connections (or fractions of one) this policy has routed over each switch-to-switch link.
        self.connection_load: defaultdict[int, float] = defaultdict(float)

    def _rng(self, conn: Connection) -> np.random.Generator:
        # A connection's random choices depend only on the run seed and the connection itself.
        digest = hashlib.blake2b(np.array([self.salt, *conn.hash_key()], dtype=np.int64).tobytes(), digest_size=8).digest()
        return np.random.default_rng(int.from_bytes(digest, "little"))

    def _switches(self, conn: Connection) -> tuple[int, int, int, int, int, int]:
        t = self.topology
        up, sw_a, sw_b, down = t.port_pairs(conn.src, conn.dst)[0]
        return up, sw_a, sw_b, down, t.switch_group[sw_a], t.switch_group[sw_b]

    def minimal_paths(self, conn: Connection) -> list[tuple[int, ...]]:
        """Fewest-hop paths of ``conn`` (the live ones, once routing knows of failed links)."""
        return self.live(self.topology.paths(conn.src, conn.dst, conn.tcp))

    def valiant_path(self, conn: Connection, rng: np.random.Generator) -> tuple[int, ...] | None:
        """A path through a random intermediate group: to it over one of its cables, then minimal.

        At most 5 switch-to-switch hops (local, global, local, global, local). ``None`` when the
        ends share a group or there is no third group (then minimal is the only sensible route).
        """
        t = self.topology
        up, s, d, down, gs, gd = self._switches(conn)
        others = [g for g in range(t.params["groups"]) if g not in (gs, gd)]
        if gs == gd or not others:
            return None
        via = others[int(rng.integers(len(others)))]
        cables = t.group_cables[gs, via]
        u, glink, v = cables[int(rng.integers(len(cables)))]
        first = ((t.local_link[s, u],) if s != u else ()) + (glink,)
        rest = t.switch_paths(v, d)
        second = rest[int(rng.integers(len(rest)))]
        return t.attach(conn.src, conn.dst, [(up, *first, *second, down)])[0]

    def hops(self, path: tuple[int, ...]) -> int:
        """Switch-to-switch hops of ``path`` plus one (switches traversed)."""
        return int(self._switch_kind[list(path)].sum()) + 1 if path else 1

    def busiest(self, path: tuple[int, ...]) -> float:
        """Connections already routed over the busiest switch-to-switch link of ``path``."""
        load = self.connection_load
        return max((load[link] for link in path if self._switch_kind[link]), default=0.0)

    def cost(self, path: tuple[int, ...]) -> float:
        """UGAL cost: (connections on the busiest link + 1) x switches traversed."""
        return (self.busiest(path) + 1) * self.hops(path)

    def _commit(self, conn: Connection, routes: Routes) -> Routes:
        for path, frac in routes:
            for link in path:
                if self._switch_kind[link]:
                    self.connection_load[link] += frac
        self._chosen[conn] = routes
        return routes

    def _uncommit(self, conn: Connection) -> None:
        for path, frac in self._chosen.pop(conn):
            for link in path:
                if self._switch_kind[link]:
                    self.connection_load[link] -= frac

    def _decide_live(self, conn: Connection) -> Routes:
        routes = self.decide(conn, self._rng(conn))
        if self.failed:
            routes = [(p, f) for p, f in routes if self.failed.isdisjoint(p)]
            total = sum(f for _, f in routes)
            if not routes:
                rng = self._rng(conn)
                options = [p for p in self.minimal_paths(conn) if self.failed.isdisjoint(p)]
                if not options:  # no live minimal path: detour through another group
                    detours = (self.valiant_path(conn, rng) for _ in range(16))
                    options = [p for p in detours if p is not None and self.failed.isdisjoint(p)][:1]
                options = options or self.minimal_paths(conn)  # nothing alive: wait on a minimal path
                return [(options[int(rng.integers(len(options)))], 1.0)]
            routes = [(p, f / total) for p, f in routes]
        return routes

    def paths(self, connection: Connection) -> Routes:
        """Routes of ``connection``, decided on first use and then fixed (a persistent connection)."""
        routes = self._chosen.get(connection)
        if routes is None:
            routes = self._commit(connection, self._decide_live(connection))
        return routes

    def links_changed(self, state: dict[int, float]) -> None:
        """Routing reconverged: connections over failed links are decided again."""
        super().links_changed(state)
        stale = [c for c, routes in self._chosen.items() if any(not self.failed.isdisjoint(p) for p, _ in routes)]
        for conn in stale:
            self._uncommit(conn)
        for conn in stale:
            self._commit(conn, self._decide_live(conn))

    def decide(self, conn: Connection, rng: np.random.Generator) -> Routes:
        raise NotImplementedError


@ROUTING.register("minimal")
class Minimal(_Dragonfly):
    """Minimal routing: one fewest-hop path per connection, chosen uniformly (ECMP among minimal)."""

    name = "minimal"

    def decide(self, conn: Connection, rng: np.random.Generator) -> Routes:
        options = self.minimal_paths(conn)
        return [(options[int(rng.integers(len(options)))], 1.0)]


@ROUTING.register("valiant")
class Valiant(_Dragonfly):
    """Valiant routing: every inter-group connection goes through a random intermediate group.

    Parameters
    ----------
    per_packet:
        ``False`` (default): one random intermediate group (and cable) per connection.
        ``True``: the fluid limit of per-packet Valiant, as in Kim et al. and Slingshot: the
        connection is split evenly over every intermediate group, each share evenly over that
        group's cables from the source group and the minimal paths onward.
    """

    name = "valiant"

    def __init__(self, topology: Topology, rng: np.random.Generator, per_packet: bool = False,
                 reconvergence: str | float = DEFAULT_RECONVERGENCE):
        super().__init__(topology, rng, reconvergence)
        self.per_packet = bool(per_packet)

    def _all_valiant(self, conn: Connection) -> Routes:
        t = self.topology
        up, s, d, down, gs, gd = self._switches(conn)
        others = [g for g in range(t.params["groups"]) if g not in (gs, gd)]
        routes: dict[tuple[int, ...], float] = {}
        for via in others:
            cables = t.group_cables[gs, via]
            for u, glink, v in cables:
                first = ((t.local_link[s, u],) if s != u else ()) + (glink,)
                rest = t.switch_paths(v, d)
                share = 1.0 / (len(others) * len(cables) * len(rest))
                for second in rest:
                    for path in t.attach(conn.src, conn.dst, [(up, *first, *second, down)]):
                        routes[path] = routes.get(path, 0.0) + share
        return list(routes.items())

    def decide(self, conn: Connection, rng: np.random.Generator) -> Routes:
        if self.per_packet:
            _, _, _, _, gs, gd = self._switches(conn)
            if gs != gd and self.topology.params["groups"] > 2:
                return self._all_valiant(conn)
        path = self.valiant_path(conn, rng)
        if path is None:
            options = self.minimal_paths(conn)
            path = options[int(rng.integers(len(options)))]
        return [(path, 1.0)]


@ROUTING.register("ugal")
class UGAL(_Dragonfly):
    """UGAL-L at connection set-up: minimal unless a random Valiant path is clearly less loaded.

    Rule: with ``cost = (connections on the path's busiest switch link + 1) x switches traversed``,
    take the minimal candidate iff ``cost_min <= cost_valiant`` (ties go minimal: the bias), where
    ``cost_valiant`` is the cheapest of ``candidates`` random Valiant paths.

    Parameters
    ----------
    candidates:
        Random non-minimal (Valiant) candidates compared per decision (1 = classic UGAL-L).
    """

    name = "ugal"
    decides = "first_use"  # the choice depends on the load of the connections routed before

    def __init__(self, topology: Topology, rng: np.random.Generator, candidates: int = 1,
                 reconvergence: str | float = DEFAULT_RECONVERGENCE):
        super().__init__(topology, rng, reconvergence)
        if candidates < 1:
            raise ConfigError("needs at least 1 non-minimal candidate", "routing.candidates")
        self.candidates = candidates

    def decide(self, conn: Connection, rng: np.random.Generator) -> Routes:
        options = self.minimal_paths(conn)
        minimal = options[int(rng.integers(len(options)))]
        valiants = [p for p in (self.valiant_path(conn, rng) for _ in range(self.candidates)) if p is not None]
        if not valiants:
            return [(minimal, 1.0)]
        best = min(valiants, key=self.cost)
        return [(minimal, 1.0)] if self.cost(minimal) <= self.cost(best) else [(best, 1.0)]


@ROUTING.register("adaptive")
class Adaptive(_Dragonfly):
    """Slingshot-like adaptive routing in the fluid limit: spray over a few minimal and Valiant candidates.

    Candidates: up to ``minimal`` distinct minimal paths and ``nonminimal`` random Valiant paths.
    Each gets a share proportional to ``1 / cost**2`` (cost as in UGAL), so the split leans to the
    least loaded candidates, and minimal ones win ties by their fewer hops.

    Parameters
    ----------
    minimal, nonminimal:
        How many candidates of each kind.
    """

    name = "adaptive"
    decides = "first_use"  # the shares depend on the load of the connections routed before

    def __init__(self, topology: Topology, rng: np.random.Generator, minimal: int = 2, nonminimal: int = 2,
                 reconvergence: str | float = DEFAULT_RECONVERGENCE):
        super().__init__(topology, rng, reconvergence)
        if minimal < 1 or nonminimal < 0:
            raise ConfigError("needs minimal >= 1 and nonminimal >= 0 candidates", "routing")
        self.n_min, self.n_nm = minimal, nonminimal

    def decide(self, conn: Connection, rng: np.random.Generator) -> Routes:
        options = self.minimal_paths(conn)
        picks = rng.permutation(len(options))[: self.n_min]
        candidates = [options[i] for i in sorted(picks)]
        for _ in range(self.n_nm):
            path = self.valiant_path(conn, rng)
            if path is not None and path not in candidates:
                candidates.append(path)
        weights = np.array([1.0 / self.cost(p) ** 2 for p in candidates])
        weights /= weights.sum()
        return list(zip(candidates, weights.tolist()))

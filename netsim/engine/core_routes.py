"""How the compiled executor sets up connections and asks the routing policy for their routes (a mixin of
:class:`netsim.engine.core.CompiledCore`, which holds the arrays): up front in one batch when a connection's
routes depend on it alone, else at first use or per message, in batches of one instant; routes go to the
:class:`~netsim.engine.routestore.RouteStore` in numpy."""

from __future__ import annotations

import math

import numpy as np

from netsim.engine import dag
from netsim.engine.dag import (
    CF_CAP,
    CI_MODE,
    CI_QPS,
    CI_ROUTE,
    CI_SELF,
    CI_SPRAY,
    CI_STAMP,
    IV_FLUSH_ID,
    MODE_FIRST_USE,
    MODE_FIXED,
    MODE_MESSAGE,
    PI_L0,
    RI_P0,
)
from netsim.engine.model import ConnectionRows, RouteTable
from netsim.topology.pathsets import ragged_arange

#: The executor's routing mode for each ``RoutingPolicy.decides``.
_MODES = {"connection": MODE_FIXED, "first_use": MODE_FIRST_USE, "message": MODE_MESSAGE}


def _core_only(rt: RouteTable, core: np.ndarray) -> RouteTable:
    """``rt`` with the links that are not switch-to-switch (``core``) dropped from every piece."""
    keep = core[rt.link]
    owner = np.repeat(np.arange(len(rt.frac), dtype=np.int64), np.diff(rt.link_ptr))
    link_ptr = np.zeros(len(rt.frac) + 1, np.int64)
    np.cumsum(np.bincount(owner[keep], minlength=len(rt.frac)), out=link_ptr[1:])
    return RouteTable(rt.conn_ptr, rt.frac, rt.delay, rt.n_paths, link_ptr, rt.link[keep], rt.weight[keep])


def _grown(a: np.ndarray, n: int, axis: int = -1, fill=0) -> np.ndarray:
    """``a`` with room for at least ``n`` along ``axis`` (doubling), new entries ``fill``."""
    size = a.shape[axis]
    if size >= n:
        return a
    new = max(n, 2 * size, 16)
    shape = list(a.shape)
    shape[axis] = new
    # perf: zeros come from calloc (pages the kernel zeroes when first touched); otherwise only the new
    # part is filled (an 18.9 M-task schedule grew its task arrays in 3 CPU-s with np.full)
    out = np.zeros(shape, dtype=a.dtype) if fill == 0 else np.empty(shape, dtype=a.dtype)
    index = [slice(None)] * a.ndim
    index[axis] = slice(0, size)
    out[tuple(index)] = a
    if fill != 0:
        index[axis] = slice(size, new)
        out[tuple(index)] = fill
    return out


class CoreRoutes:
    """Connections and routes of the compiled executor."""

    def _connect(self, ids: np.ndarray) -> None:
        """Set up the connections added since the last call (idle, unrouted)."""
        n = len(self.conns)
        old = self._n_conn_init
        if n <= old:
            return
        self.ci = _grown(self.ci, n, fill=-1)
        self.cf = _grown(self.cf, n)
        new = slice(old, n)
        self.ci[:, new] = -1
        self.ci[CI_QPS, new] = 0
        self.ci[CI_STAMP, new] = 0
        self.cf[:, new] = 0.0
        self.cf[CF_CAP, new] = math.inf
        src, dst = self.conns.src, self.conns.dst
        self.ci[CI_SELF, new] = (src[new] == dst[new]).astype(np.int64)
        self.ci[CI_MODE, new] = self._mode
        self.need = _grown(self.need, n)
        self.moves = _grown(self.moves, n)
        self.pend = _grown(self.pend, n)
        self.start = _grown(self.start, n)
        self._n_conn_init = n

    @property
    def _mode(self) -> int:
        """When the policy decides a connection's routes: up front, at first use, or per message."""
        return _MODES[self.routing.decides]

    def _stored(self, ids: np.ndarray, table, in_table: bool = True) -> np.ndarray:
        """Store route table ``table`` of connections ``ids``; the route ids."""
        routes = self.store.append(table, bool(self.routing.independent), in_table)
        self._store_grown(in_table, routes)
        return routes

    def _store_grown(self, in_table: bool, routes: np.ndarray) -> None:
        """Size the per-piece observer arrays to the store (and the link series to its links)."""
        store = self.store
        if self._series and in_table and len(routes):
            first = int(store.pi[PI_L0, store.ri[RI_P0, routes[0]]])
            self._series_links.update(np.unique(store.ll[first:store.n_ll]).tolist())
            if len(self._series_links) > self.ser_data.shape[0]:
                self.ser_data = _grown(self.ser_data, len(self._series_links), axis=0)
        n_keys = store.n_pieces
        if self.okey_pos.shape[0] < n_keys:
            self.okey_pos = _grown(self.okey_pos, n_keys, fill=-1)
            self.skey_pos = _grown(self.skey_pos, n_keys, fill=-1)
            self.ok = _grown(self.ok, n_keys)
            self.oa = _grown(self.oa, n_keys)
            self.sk = _grown(self.sk, n_keys)
            self.sa = _grown(self.sa, n_keys)

    def _route(self, ids) -> None:
        """Ask the routing policy for the routes of connections ``ids`` (one batch, in order) and store them.

        perf: a connection that gets the routes it had before (a planned policy, per message) keeps
        its stored route."""
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            return
        keys = self.routing.route_keys(ConnectionRows(self.conns, ids)) \
            if self._mode == MODE_MESSAGE and hasattr(self.routing, "route_keys") else None
        if keys is not None:
            self._route_keyed(ids, keys)
            return
        table = self.routing.routes(ConnectionRows(self.conns, ids))
        store = self.store
        mark = store.mark()
        routes = self._stored(ids, table)
        kept = store.same_many(self.ci[CI_ROUTE, ids], routes)
        self.ci[CI_STAMP, ids] = self.iv[IV_FLUSH_ID]  # (all _set_route does for one that keeps its route)
        changed = np.flatnonzero(~kept)
        for c, r in zip(ids[changed].tolist(), routes[changed].tolist()):
            self._set_route(c, r)
        if not len(changed):
            store.rollback(mark)
        self._ensure_capacity()

    def _route_keyed(self, ids: np.ndarray, keys: np.ndarray) -> None:
        """:meth:`_route` for a policy whose routes are a function of (connection, key) while its links
        stand (ECMP's queue pairs): each pair's routes are asked for and stored once, then reused.

        perf: a ring over 16 queue pairs per connection asked for and stored a route per message (130k
        messages: 47 of 58 s); the memo is dropped when links change (:meth:`routing_changed`)."""
        memo = self._keyed_routes
        pairs = list(zip(ids.tolist(), keys.tolist()))
        new = list(dict.fromkeys(p for p in pairs if p not in memo))   # each unseen pair once, in order
        if new:
            conns, qps = np.array(new, dtype=np.int64).T
            memo.update(zip(new, self._stored(conns, self.routing.keyed_routes(ConnectionRows(self.conns, conns),
                                                                               qps)).tolist()))
        self.ci[CI_STAMP, ids] = self.iv[IV_FLUSH_ID]
        for pair in pairs:
            self._set_route(pair[0], memo[pair])
        self._ensure_capacity()

    def _set_route(self, c: int, r: int) -> None:
        """Connection ``c``'s next messages take route ``r`` (counted for the flow table's sizes)."""
        self.ci[CI_STAMP, c] = self.iv[IV_FLUSH_ID]
        if self.ci[CI_ROUTE, c] == r:
            return
        store = self.store
        old = self._conn_cross.get(c)
        if old is not None:
            np.subtract.at(self._cross, old, 1)
            self._pieces_total -= self._conn_pieces[c]
        self.ci[CI_ROUTE, c] = r
        pieces = store.pieces(r)
        cross = np.concatenate([store.links(p) for p in pieces]) if len(pieces) else np.zeros(0, np.int64)
        self._conn_cross[c] = cross
        self._conn_pieces[c] = len(pieces)
        if len(cross):
            np.add.at(self._cross, cross, 1)
            self._max_cross = max(self._max_cross, int(self._cross[cross].max()))
        self._pieces_total += len(pieces)

    def _route_all(self, ids: np.ndarray) -> None:
        """Route connections ``ids`` up front (a policy whose routes depend on the connection alone):
        one batch, stored in numpy."""
        if not len(ids):
            return
        routes = self._stored(ids, self.routing.routes(ConnectionRows(self.conns, ids)))
        store = self.store
        p0, n_p = store.ri[RI_P0, routes], store.ri[dag.RI_NP, routes]
        self.ci[CI_ROUTE, ids] = routes
        self.ci[CI_STAMP, ids] = self.iv[IV_FLUSH_ID]
        # the flow table's sizes: pieces per connection, and how many pieces each link can carry at once
        owner, k = ragged_arange(n_p)
        piece = p0[owner] + k
        lens = store.pi[dag.PI_NL, piece]
        at, j = ragged_arange(lens)
        links = store.ll[store.pi[PI_L0, piece][at] + j]
        np.add.at(self._cross, links, 1)
        if len(links):
            self._max_cross = max(self._max_cross, int(self._cross.max()))
        bounds = np.concatenate([[0], np.cumsum(np.bincount(owner, weights=lens, minlength=len(ids)))]).astype(np.int64)
        for i, c in enumerate(ids.tolist()):
            self._conn_cross[c] = links[bounds[i]:bounds[i + 1]]
            self._conn_pieces[c] = int(n_p[i])
        self._pieces_total += int(n_p.sum())
        self._ensure_capacity()

    def _spray(self, ids: np.ndarray) -> None:
        """Each connection's pair sprayed over all its equal-cost paths (for congestion), as a piece of
        core links only (offers count nothing else). Its links and weights depend on the pair's path
        class and on how many paths its two host ends have (each weight is 1/n summed, n the pair's
        path count): pairs alike share one stored piece (an all-to-all on 512 GPUs: 480 pieces of 64
        links for 261,632 connections)."""
        conns = self.conns
        ps = self.topology.path_sets(conns.src[ids], conns.dst[ids], conns.column("tcp")[ids])
        key = np.stack([ps.cls, ps.n_u, ps.n_d], axis=1)
        uniq, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        known = self._spray_ids
        keys = [tuple(k) for k in uniq.tolist()]
        missing = [i for i, k in enumerate(keys) if k not in known]
        if missing:
            rt = _core_only(self._sprayer.routes(ConnectionRows(conns, ids[first[missing]])), self.store.core)
            routes = self.store.append(rt, False, in_table=False)
            self._store_grown(False, routes)
            for i, r in zip(missing, self.store.ri[RI_P0, routes].tolist()):
                known[keys[i]] = r
        pieces = np.array([known[k] for k in keys], np.int64)
        self.ci[CI_SPRAY, ids] = pieces[inverse.reshape(-1)]


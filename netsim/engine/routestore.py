"""The compiled executor's store of routes: every route a connection has had, as flat arrays.

A *route* ``r`` (one connection's routes at one time) has pieces ``ri[RI_P0, r]`` onwards:
``ri[RI_NP, r]`` of them when the policy splits messages over independent pieces, followed by
one more, their union (how a message that is not split, a zero-byte one, and the congestion
offers see the route); a route of one piece has only that piece. Piece ``p`` crosses links
``ll[pi[PI_L0, p]:][:pi[PI_NL, p]]`` with weights ``lw`` (the share of its bytes on each link),
carries ``pf[PF_FRAC, p]`` of a message and arrives ``pf[PF_DELAY, p]`` after draining. The union's
host-edge links (``el``/``ew`` from ``ri[RI_E0, r]``, ``ri[RI_NE, r]`` of them) bound a message's rate.
Routes are appended a batch at a time from a :class:`~netsim.engine.model.RouteTable`, in numpy.
"""

from __future__ import annotations

import numpy as np

from netsim.engine import dag
from netsim.engine.dag import N_RI, PF_DELAY, PF_FRAC, PI_L0, PI_NL, RI_E0, RI_NE, RI_NP, RI_P0, RI_PATHS
from netsim.engine.model import RouteTable
from netsim.topology.pathsets import ragged_arange

_INT = np.int64


def _grown(a: np.ndarray, n: int, axis: int = -1) -> np.ndarray:
    """``a`` with room for ``n`` entries along ``axis`` (doubling; new entries zero)."""
    size = a.shape[axis]
    if size >= n:
        return a
    shape = list(a.shape)
    shape[axis] = max(n, 2 * size, 16)
    out = np.zeros(shape, a.dtype)
    index = [slice(None)] * a.ndim
    index[axis] = slice(0, size)
    out[tuple(index)] = a
    return out


class RouteStore:
    """Routes as arrays (see the module docstring).

    Parameters
    ----------
    core:
        Per link, 1 where it is a switch-to-switch link (not a host edge).
    unbounded:
        Optional mask of links that never limit a flow: dropped from the union pieces.
    """

    def __init__(self, core: np.ndarray, unbounded: np.ndarray | None = None):
        self.core = core.astype(bool)
        self.unbounded = unbounded
        self.n_links = len(core)
        self.ri = np.zeros((N_RI, 0), _INT)
        self.pi = np.zeros((2, 0), _INT)
        self.pf = np.zeros((2, 0))
        self.ll = np.zeros(0, _INT)
        self.lw = np.zeros(0)
        self.el = np.zeros(0, _INT)
        self.ew = np.zeros(0)
        self.n_routes = self.n_pieces = self.n_ll = self.n_el = 0
        #: Most links of one piece that may enter the flow table.
        self.max_links = 0

    def pieces(self, r: int) -> range:
        """The piece ids a message of route ``r`` can be split into (its one piece if it has one)."""
        p0 = int(self.ri[RI_P0, r])
        return range(p0, p0 + int(self.ri[RI_NP, r]))

    def links(self, p: int) -> np.ndarray:
        """The links of piece ``p``."""
        l0 = int(self.pi[PI_L0, p])
        return self.ll[l0:l0 + int(self.pi[PI_NL, p])]

    def same(self, r: int, s: int) -> bool:
        """Whether routes ``r`` and ``s`` have the same pieces (links, weights, fractions, delays)."""
        return bool(self.same_many(np.array([r], _INT), np.array([s], _INT))[0])

    def same_many(self, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        """Per pair, whether route ``old[i]`` (-1: none) has the same pieces as route ``new[i]``."""
        out = np.zeros(len(old), dtype=np.bool_)
        dag.same_routes(self.ri, self.pi, self.pf, self.ll, self.lw, np.asarray(old, _INT), np.asarray(new, _INT),
                        out)
        return out

    def mark(self) -> tuple[int, int, int, int]:
        """The store's size now (for :meth:`rollback`)."""
        return self.n_routes, self.n_pieces, self.n_ll, self.n_el

    def rollback(self, mark: tuple[int, int, int, int]) -> None:
        """Forget the routes appended since ``mark`` (none of them is in use)."""
        self.n_routes, self.n_pieces, self.n_ll, self.n_el = mark

    def append(self, rt: RouteTable, independent: bool, in_table: bool = True) -> np.ndarray:
        """Append the routes of ``rt``'s connections; their route ids, one per row of ``rt``.

        ``independent``: the policy's pieces are sub-flows (a connection with several gets their
        union as one more piece). ``in_table``: the pieces may enter the flow table (they count for
        its width)."""
        n = len(rt)
        if n == 0:
            return np.zeros(0, _INT)
        counts = np.diff(rt.conn_ptr)
        multi = (counts > 1) if independent else np.zeros(n, dtype=bool)
        owner = np.repeat(np.arange(n, dtype=_INT), counts)
        stored = np.where(multi, counts + 1, 1)
        base = np.cumsum(stored) - stored
        total = int(stored.sum())
        # every piece of the table where it is stored; a connection's only piece loses unbounded links
        link_piece, _k = ragged_arange(np.diff(rt.link_ptr))
        keep = np.ones(len(rt.link), dtype=bool)
        if self.unbounded is not None:
            keep = ~(self.unbounded[rt.link] & ~multi[owner[link_piece]])
        at = base[owner] + (np.arange(len(rt.frac)) - rt.conn_ptr[owner])
        pos, links, weights = at[link_piece[keep]], rt.link[keep], rt.weight[keep]
        frac, delay = np.empty(total), np.empty(total)
        frac[at], delay[at] = rt.frac, rt.delay
        paths = rt.n_paths[rt.conn_ptr[:-1]].copy()
        rows = np.flatnonzero(multi)
        if len(rows):
            m_pos, m_links, m_weights, m_delay = self._unions(rt, rows, owner, link_piece)
            union_at = base[rows] + counts[rows]
            pos = np.concatenate([pos, union_at[m_pos]])
            links = np.concatenate([links, m_links])
            weights = np.concatenate([weights, m_weights])
            frac[union_at], delay[union_at] = 1.0, m_delay
            paths[rows] = counts[rows]
        order = np.argsort(pos, kind="stable")
        links, weights = links[order], weights[order]
        lens = np.bincount(pos, minlength=total)
        # the union (last) piece of each route: its host-edge links
        last = np.zeros(total, dtype=bool)
        last[base + stored - 1] = True
        piece_of = np.repeat(np.arange(total, dtype=_INT), lens)
        edge = last[piece_of] & ~self.core[links]
        e_owner = np.repeat(np.arange(n, dtype=_INT), stored)[piece_of[edge]]
        e_count = np.bincount(e_owner, minlength=n)
        return self._write(n, total, base, np.where(multi, counts, 1), paths, lens, frac, delay, links, weights,
                           links[edge], weights[edge], e_count, in_table)

    def _unions(self, rt: RouteTable, rows: np.ndarray, owner: np.ndarray, link_piece: np.ndarray):
        """Per connection of ``rows`` (several independent pieces): the union of its pieces as one flow,
        links ascending, each weighted by the fractions crossing it (CORRECTNESS: summed in piece order,
        as ``np.bincount`` adds in input order); unbounded links dropped. Returns (index into ``rows``
        per link, links, weights, delay per connection: its slowest piece)."""
        of_row = np.full(len(rt), -1, _INT)
        of_row[rows] = np.arange(len(rows))
        mine = of_row[owner[link_piece]] >= 0
        piece = link_piece[mine]
        key = of_row[owner[piece]] * self.n_links + rt.link[mine]
        keys, inverse = np.unique(key, return_inverse=True)
        weight = np.bincount(inverse, weights=rt.weight[mine] * rt.frac[piece])
        kept = weight > 0
        if self.unbounded is not None:
            kept &= ~self.unbounded[keys % self.n_links]
        keys, weight = keys[kept], weight[kept]
        count = rt.conn_ptr[rows + 1] - rt.conn_ptr[rows]
        row, k = ragged_arange(count)
        delay = np.maximum.reduceat(rt.delay[rt.conn_ptr[rows][row] + k], np.cumsum(count) - count)
        return keys // self.n_links, keys % self.n_links, weight, delay

    def _write(self, n, total, base, n_split, paths, lens, frac, delay, links, weights, e_links, e_weights,
               e_count, in_table) -> np.ndarray:
        """Append ``n`` routes of ``total`` pieces to the arrays; their ids."""
        r0, p0, l0, e0 = self.n_routes, self.n_pieces, self.n_ll, self.n_el
        self.ri = _grown(self.ri, r0 + n)
        self.pi = _grown(self.pi, p0 + total)
        self.pf = _grown(self.pf, p0 + total)
        self.ll = _grown(self.ll, l0 + len(links))
        self.lw = _grown(self.lw, l0 + len(links))
        self.el = _grown(self.el, e0 + len(e_links))
        self.ew = _grown(self.ew, e0 + len(e_links))
        ids = np.arange(r0, r0 + n, dtype=_INT)
        self.ri[:, ids] = 0
        self.ri[RI_P0, ids] = p0 + base
        self.ri[RI_NP, ids] = n_split
        self.ri[RI_E0, ids] = e0 + np.cumsum(e_count) - e_count
        self.ri[RI_NE, ids] = e_count
        self.ri[RI_PATHS, ids] = paths
        self.pi[PI_L0, p0:p0 + total] = l0 + np.cumsum(lens) - lens
        self.pi[PI_NL, p0:p0 + total] = lens
        self.pf[PF_FRAC, p0:p0 + total] = frac
        self.pf[PF_DELAY, p0:p0 + total] = delay
        self.ll[l0:l0 + len(links)] = links
        self.lw[l0:l0 + len(links)] = weights
        self.el[e0:e0 + len(e_links)] = e_links
        self.ew[e0:e0 + len(e_links)] = e_weights
        self.n_routes += n
        self.n_pieces += total
        self.n_ll += len(links)
        self.n_el += len(e_links)
        if in_table and total:
            self.max_links = max(self.max_links, int(lens.max()))
        return ids

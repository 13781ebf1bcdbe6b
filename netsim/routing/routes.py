"""Route tables from routing decisions: the one place the engine's RouteTable format is built.

A policy decides routes (``[(path, fraction), ...]`` per connection, or path indices as arrays) and
these functions turn them into a :class:`~netsim.engine.model.RouteTable`, with the conventions the
Fabric's incidence has always used:

* a policy that is not ``independent`` gives each connection one piece (fraction 1) over the union
  of its paths, each link weighted by the sum of the fractions of the paths crossing it (links of
  weight 0 dropped); ``n_paths`` is the number of route entries, the delay the latency of the
  slowest entry with a positive fraction plus the message overhead. The links of a single path are
  in path order; those of a union of several in ascending id (``np.unique`` order);
* an ``independent`` policy gives one piece per entry with a positive fraction, in entry order:
  weight 1 on its path's links (path order), its path's latency plus the overhead, ``n_paths`` 1;
  a connection with a single entry gets one piece of fraction 1, as above.

An empty path (a GPU to itself) gives a piece with no links.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from netsim.topology.pathsets import ragged_arange

if TYPE_CHECKING:
    from netsim.engine.model import RouteTable

_INT = np.int64
_FIELDS = ("src", "dst", "channel", "job", "comm", "tcp")


def _route_table(conn_ptr, frac, delay, n_paths, link_ptr, link, weight) -> RouteTable:
    # Imported here: importing netsim.engine runs fabric.py, which imports netsim.routing.
    from netsim.engine.model import RouteTable
    return RouteTable(np.asarray(conn_ptr, dtype=_INT), np.asarray(frac, dtype=np.float64),
                      np.asarray(delay, dtype=np.float64), np.asarray(n_paths, dtype=_INT),
                      np.asarray(link_ptr, dtype=_INT), np.asarray(link, dtype=_INT),
                      np.asarray(weight, dtype=np.float64))


class Columns(NamedTuple):
    """A batch of connections as columns (``tcp`` as bool)."""

    src: np.ndarray
    dst: np.ndarray
    channel: np.ndarray
    job: np.ndarray
    comm: np.ndarray
    tcp: np.ndarray

    def __len__(self) -> int:  # (a NamedTuple's length would be its number of fields)
        return len(self.src)

    def hash_keys(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(rows, keys) per key width: the integers :meth:`Connection.hash_key` gives, as an array per
        group of rows (``comm`` mixed in only where it is non-zero)."""
        both = np.stack([self.src, self.dst, self.channel, self.job, self.comm], axis=1)
        with_comm = self.comm != 0
        out = []
        for mask, width in ((~with_comm, 4), (with_comm, 5)):
            rows = np.flatnonzero(mask)
            if len(rows):
                out.append((rows, np.ascontiguousarray(both[rows, :width])))
        return out


def in_chunks(cols: Columns, size: int, fn) -> RouteTable:
    """``fn(cols)``, computed ``size`` connections at a time and concatenated.

    perf: a batch's temporary arrays are several times its route table; chunks bound them, and
    every connection's routes depend on it alone (and on the policy's state), so the result is the same.
    """
    if len(cols) <= size:
        return fn(cols)
    return concat_routes([fn(Columns(*(c[at:at + size] for c in cols))) for at in range(0, len(cols), size)])


def connection_columns(connections) -> Columns:
    """The columns of ``connections``: a sequence of :class:`Connection` or a
    :class:`~netsim.engine.model.ConnectionTable` (whose columns are used as they are)."""
    if hasattr(connections, "column"):
        return Columns(*(np.asarray(connections.column(f), dtype=bool if f == "tcp" else _INT) for f in _FIELDS))
    n = len(connections)
    flat = np.fromiter(itertools.chain.from_iterable(connections), dtype=_INT, count=6 * n).reshape(n, 6)
    return Columns(*(flat[:, i] for i in range(5)), flat[:, 5].astype(bool))


def as_connections(connections) -> Sequence:
    """``connections`` as a sequence of :class:`Connection` objects."""
    if hasattr(connections, "column") and hasattr(connections, "connections"):
        return connections.connections()
    return connections


def single_paths(ptr: np.ndarray, links: np.ndarray, delay: np.ndarray) -> RouteTable:
    """One piece per connection on one path: path ``i`` is ``links[ptr[i]:ptr[i + 1]]`` (weight 1)."""
    n = len(ptr) - 1
    return _route_table(np.arange(n + 1, dtype=_INT), np.ones(n), delay, np.ones(n, dtype=_INT), ptr, links,
                        np.ones(len(links)))


def from_entries(n: int, owner: np.ndarray, frac: np.ndarray, ptr: np.ndarray, links: np.ndarray,
                 latency_s: np.ndarray, overhead_s: np.ndarray, independent: bool, n_links: int) -> RouteTable:
    """The route table of ``n`` connections from their route entries (see the module docstring).

    Entry ``e`` belongs to connection ``owner[e]`` (non-decreasing: each connection's entries in
    order), carries ``frac[e]`` of its bytes over path ``links[ptr[e]:ptr[e + 1]]`` of latency
    ``latency_s[e]``; ``overhead_s`` is per connection; link ids are below ``n_links``.
    """
    count = np.bincount(owner, minlength=n)
    if n and count.min() == 0:
        raise ValueError(f"connection {int(np.argmin(count))} has no routes")
    lens = np.diff(ptr)
    alone = count[owner] == 1
    if independent:
        keep = np.flatnonzero((frac > 0) | alone)
        conn_ptr = np.zeros(n + 1, dtype=_INT)
        np.cumsum(np.bincount(owner[keep], minlength=n), out=conn_ptr[1:])
        link_ptr = np.zeros(len(keep) + 1, dtype=_INT)
        np.cumsum(lens[keep], out=link_ptr[1:])
        out = np.empty(int(link_ptr[-1]), dtype=_INT)
        _scatter(out, link_ptr[:-1], ptr[keep], lens[keep], links)
        return _route_table(conn_ptr, np.where(alone[keep], 1.0, frac[keep]), latency_s[keep] + overhead_s[owner[keep]],
                            np.ones(len(keep), dtype=_INT), link_ptr, out, np.ones(len(out)))
    starts = np.cumsum(count) - count
    slowest = np.maximum.reduceat(np.where(frac > 0, latency_s, -np.inf), starts) if n else np.zeros(0)
    # Connections with one entry: its path as it is. With several: the union, weights summed in entry
    # order (CORRECTNESS: np.bincount adds in input order, as the Fabric's per-connection incidence did).
    single = np.flatnonzero(alone)
    several = np.flatnonzero(~alone)
    per_conn = np.zeros(n, dtype=_INT)
    per_conn[owner[single]] = lens[single]
    m_owner, m_links, m_weight = np.zeros(0, dtype=_INT), np.zeros(0, dtype=_INT), np.zeros(0)
    if len(several):
        item, k = ragged_arange(lens[several])
        entry = several[item]
        key = owner[entry] * n_links + links[ptr[entry] + k]
        keys, inverse = np.unique(key, return_inverse=True)
        weight = np.bincount(inverse, weights=frac[entry])
        kept = weight > 0
        keys, m_weight = keys[kept], weight[kept]
        m_owner, m_links = keys // n_links, keys % n_links
        per_conn += np.bincount(m_owner, minlength=n)
    link_ptr = np.zeros(n + 1, dtype=_INT)
    np.cumsum(per_conn, out=link_ptr[1:])
    out = np.empty(int(link_ptr[-1]), dtype=_INT)
    weights = np.ones(len(out))
    _scatter(out, link_ptr[owner[single]], ptr[single], lens[single], links)
    if len(m_owner):
        at = link_ptr[m_owner] + (np.arange(len(m_owner)) - np.searchsorted(m_owner, m_owner))
        out[at] = m_links
        weights[at] = m_weight
    return _route_table(np.arange(n + 1, dtype=_INT), np.ones(n), slowest + overhead_s, count, link_ptr, out, weights)


def _scatter(out: np.ndarray, dest: np.ndarray, src: np.ndarray, length: np.ndarray, pool: np.ndarray) -> None:
    """``out[dest[i] + k] = pool[src[i] + k]`` for ``k < length[i]``."""
    if len(length) and length.any():
        owner, k = ragged_arange(length)
        out[dest[owner] + k] = pool[src[owner] + k]


def from_routes(topology, connections, routes: Sequence, independent: bool) -> RouteTable:
    """The route table of ``connections`` given each one's routes (``[(path, fraction), ...]``, or a
    :class:`~netsim.routing.base.Window`): the shared path of every policy that decides in Python.

    Examples
    --------
    >>> from netsim.topology import leaf_spine
    >>> from netsim.engine.model import Connection
    >>> topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1,
    ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    >>> a, b = topo.paths(0, 1)
    >>> rt = from_routes(topo, [Connection(0, 1)], [[(a, 0.5), (b, 0.5)]], independent=False)
    >>> rt.links(0)[0].tolist(), rt.links(0)[1].tolist(), rt.n_paths.tolist()
    ([0, 2, 5, 7, 10, 15], [0.5, 0.5, 0.5, 0.5, 1.0, 1.0], [2])
    """
    cols = connection_columns(connections)
    owner: list[int] = []
    fracs: list[float] = []
    paths: list[tuple[int, ...]] = []
    for i, entries in enumerate(routes):
        before = len(paths)
        for path, frac in entries:
            paths.append(path)
            fracs.append(frac)
        owner.extend(itertools.repeat(i, len(paths) - before))
    lens = np.fromiter(map(len, paths), dtype=_INT, count=len(paths))
    ptr = np.zeros(len(paths) + 1, dtype=_INT)
    np.cumsum(lens, out=ptr[1:])
    links = np.fromiter(itertools.chain.from_iterable(paths), dtype=_INT, count=int(ptr[-1]))
    return from_entries(len(cols), np.array(owner, dtype=_INT), np.array(fracs, dtype=np.float64), ptr, links,
                        topology.path_latencies_s(ptr, links),
                        topology.message_overheads_s(cols.src, cols.dst, cols.tcp), independent, len(topology.links))


def crossing(table: RouteTable, links) -> np.ndarray:
    """Which pieces of ``table`` cross any of ``links`` (a bool per piece)."""
    mask = np.zeros(int(table.link.max(initial=-1)) + 1, dtype=bool)
    chosen = np.fromiter(links, dtype=_INT)
    mask[chosen[chosen < len(mask)]] = True
    hits = np.zeros(len(table.link) + 1, dtype=_INT)
    np.cumsum(mask[table.link], out=hits[1:])
    return hits[table.link_ptr[1:]] > hits[table.link_ptr[:-1]]


def routes_of(table: RouteTable, conn: int) -> list[tuple[tuple[int, ...], float, float]]:
    """(links, weights, fraction) of each piece of connection ``conn``, as Python values (for tests and
    reports)."""
    out = []
    for p in table.pieces(conn):
        links, weights = table.links(p)
        out.append((tuple(links.tolist()), tuple(weights.tolist()), float(table.frac[p])))
    return out


def concat_routes(tables: Sequence[RouteTable]) -> RouteTable:
    """One table of the connections of ``tables``, in order."""
    if len(tables) == 1:
        return tables[0]

    def stack(ptrs):
        out = [np.zeros(1, dtype=_INT)]
        at = 0
        for p in ptrs:
            out.append(p[1:] + at)
            at += int(p[-1])
        return np.concatenate(out)

    cat = np.concatenate
    return _route_table(stack([t.conn_ptr for t in tables]), cat([t.frac for t in tables]),
                        cat([t.delay for t in tables]), cat([t.n_paths for t in tables]),
                        stack([t.link_ptr for t in tables]), cat([t.link for t in tables]),
                        cat([t.weight for t in tables]))


def take_routes(table: RouteTable, rows) -> RouteTable:
    """The table of connections ``rows`` of ``table`` (any order, repeats allowed)."""
    rows = np.asarray(rows, dtype=_INT)
    n_pieces = np.diff(table.conn_ptr)[rows]
    item, k = ragged_arange(n_pieces)
    pieces = table.conn_ptr[rows][item] + k
    conn_ptr = np.zeros(len(rows) + 1, dtype=_INT)
    np.cumsum(n_pieces, out=conn_ptr[1:])
    lens = np.diff(table.link_ptr)[pieces]
    link_ptr = np.zeros(len(pieces) + 1, dtype=_INT)
    np.cumsum(lens, out=link_ptr[1:])
    item, k = ragged_arange(lens)
    at = table.link_ptr[pieces][item] + k
    return _route_table(conn_ptr, table.frac[pieces], table.delay[pieces], table.n_paths[pieces], link_ptr,
                        table.link[at], table.weight[at])


def replace_rows(table: RouteTable, rows, sub: RouteTable) -> RouteTable:
    """``table`` with connections ``rows`` replaced by the connections of ``sub`` (one each, in order)."""
    rows = np.asarray(rows, dtype=_INT)
    if not len(rows):
        return table
    n = len(table)
    order = np.arange(n, dtype=_INT)
    order[rows] = n + np.arange(len(rows), dtype=_INT)
    return take_routes(concat_routes([table, sub]), order)

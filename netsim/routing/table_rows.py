"""The rows of a routes CSV (``table`` routing) to checked route arrays, column by column.

:mod:`netsim.routing.table` reads the file into string columns; this module parses and checks
them in bulk: integers and fractions once per distinct cell text, paths per distinct (class of
GPU pair, switch names), path indices against the pairs' path counts. A row that fails any check
is handed to the row-by-row :class:`Resolver` (the reference), in file order, so the error names the
first bad row with the exact message the reference gives; clean rows never pay for Python.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from netsim.errors import ConfigError, NetsimError, shorten
from netsim.routing.base import Connection, Routes
from netsim.routing.routes import from_entries
from netsim.topology import Topology
from netsim.topology.topology import SWITCH_KINDS

#: Columns a routes file may have; the first three are required, plus ``path`` or ``path_index``.
COLUMNS = ("src", "dst", "channel", "job", "comm", "path", "path_index", "fraction")
REQUIRED = ("src", "dst", "channel")
#: How far a connection's fractions may sum away from 1.
FRACTION_TOLERANCE = 1e-9
#: Candidate paths listed in a "no such path" error.
SHOWN_CANDIDATES = 4
#: YAML path every error of the routes file is reported at.
WHERE = "routing.file"
#: Largest integer in the src, dst, channel, job, comm and path_index columns (a signed 32-bit int).
MAX_CELL = 2**31 - 1
_INT = np.int64


def bad(where: str, message: str) -> ConfigError:
    """A ConfigError at ``routing.file`` whose message opens with the CSV position ``where``."""
    return ConfigError(f"{where}: {message}", WHERE)


def parse_int(raw: str) -> int | None:
    """The integer in [0, MAX_CELL] a cell holds (None if it holds none)."""
    try:
        value = int(raw) if len(raw) <= 20 else -1
    except ValueError:
        return None
    return value if 0 <= value <= MAX_CELL else None


def _int_or_zero(raw: str) -> int | None:
    """:func:`parse_int`, with an empty cell meaning 0 (the ``job`` and ``comm`` columns)."""
    return 0 if raw == "" else parse_int(raw)


def parse_fraction(raw: str) -> float | None:
    """The share of its connection's bytes a row's ``fraction`` cell gives, in (0, 1]; 1 when empty."""
    if raw == "":
        return 1.0
    try:
        value = float(raw) if len(raw) <= 64 else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) and 0.0 < value <= 1.0 else None


def split_names(text: str) -> tuple[str, ...]:
    """The node names of a ``path`` cell (``leaf0 spine3 leaf2`` or ``leaf0>spine3>leaf2``)."""
    return tuple(n for n in re.split(r"[\s>]+", text) if n)


@dataclass(frozen=True)
class Row:
    """One row as the reference resolver reads it: its position, connection, path and fraction."""

    where: str  #: ``file:line`` (``file: row N`` when lines cannot be told), to open messages
    line: str  #: ``line 7`` (or ``row 7``), to refer back to the row
    connection: Connection
    path: tuple[int, ...]
    fraction: float


class Resolver:
    """The reference: turns the cells of one row into a :class:`Row`, or the error naming its line."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self._nodes: set[str] | None = None
        self._switches: dict[tuple[int, int], list[tuple[str, ...]]] = {}

    @staticmethod
    def _int(cells: dict[str, str], column: str, where: str, default: int | None = None) -> int:
        raw = cells.get(column, "")
        if raw == "" and default is not None:
            return default
        value = parse_int(raw)
        if value is None:
            raise bad(where, f"{column} must be a non-negative integer (at most {MAX_CELL:,}), got {shorten(raw)}")
        return value

    def row(self, cells: dict[str, str], where: str, line: str) -> Row:
        """Parse and check one row."""
        src, dst = self._int(cells, "src", where), self._int(cells, "dst", where)
        n = self.topology.n_gpus
        for what, gpu in (("src", src), ("dst", dst)):
            if gpu >= n:
                raise bad(where, f"{what} GPU {gpu} out of range: the fabric has GPUs 0..{n - 1}")
        conn = Connection(src, dst, self._int(cells, "channel", where), self._int(cells, "job", where, 0),
                          self._int(cells, "comm", where, 0))
        named, index = cells.get("path", ""), cells.get("path_index", "")
        if bool(named) == bool(index):
            raise bad(where, "give exactly one of path and path_index")
        if index:
            candidates = self.topology.paths(src, dst)
            i = self._int(cells, "path_index", where)
            if i >= len(candidates):
                k = len(candidates)
                raise bad(where, f"path_index {i} out of range: GPU {src} to GPU {dst} has {k} "
                                 f"equal-cost path{'s' * (k > 1)} (0..{k - 1})")
            path = candidates[i]
        else:
            path = self._by_names(named, src, dst, where)
        fraction = parse_fraction(cells.get("fraction", ""))
        if fraction is None:
            raise bad(where, f"fraction must be a number in (0, 1], got {shorten(cells.get('fraction', ''))}")
        return Row(where, line, conn, path, fraction)

    def node_names(self) -> set[str]:
        """The names of every node of the fabric."""
        if self._nodes is None:
            self._nodes = {data["name"] for _, data in self.topology.graph.nodes(data=True)}
        return self._nodes

    def _by_names(self, text: str, src: int, dst: int, where: str) -> tuple[int, ...]:
        """The first candidate of ``src -> dst`` whose switches are, in order, those named in ``text``."""
        names = split_names(text)
        for n in names:
            if n not in self.node_names():
                raise bad(where, f"unknown node {shorten(n)} in path {shorten('>'.join(names))[1:-1]} "
                                 "(switches are named like leaf0, spine3)")
        sequences = self._switch_names(src, dst)
        for path, seq in zip(self.topology.paths(src, dst), sequences):
            if seq == names:
                return path
        distinct = list(dict.fromkeys(">".join(s) for s in sequences))
        if distinct == [""]:
            raise bad(where, f"GPU {src} and GPU {dst} share a host: their paths cross no fabric switch; "
                             "give path_index instead")
        shown = ", ".join(distinct[:SHOWN_CANDIDATES])
        if len(distinct) > SHOWN_CANDIDATES:
            shown += f", ... ({len(distinct)} in all)"
        raise bad(where, f"no path {shorten('>'.join(names))[1:-1]} from GPU {src} to GPU {dst}; "
                         f"candidates: {shown}")

    def _switch_names(self, src: int, dst: int) -> list[tuple[str, ...]]:
        """For each candidate path of ``src -> dst``, the names of the fabric switches it crosses."""
        key = (src, dst)
        cached = self._switches.get(key)
        if cached is None:
            links, nodes = self.topology.links, self.topology.graph.nodes
            cached = []
            for path in self.topology.paths(src, dst):
                hops = [int(links.src[path[0]])] + [int(links.dst[link]) for link in path] if path else []
                cached.append(tuple(nodes[v]["name"] for v in hops if nodes[v]["kind"] in SWITCH_KINDS))
            self._switches[key] = cached
        return cached


@dataclass(frozen=True)
class Listed:
    """The routes of a table's connections as arrays.

    Listed connection ``i`` (in order of first appearance in the file) is ``keys[i]`` = (src, dst,
    channel, job, comm); its rows, in file order, are ``order[row_ptr[i]:row_ptr[i + 1]]``; row ``r``
    gives path ``links[ptr[r]:ptr[r + 1]]`` (its index among the pair's paths: ``index[r]``) and
    fraction ``frac[r]``.
    """

    keys: np.ndarray
    row_ptr: np.ndarray
    order: np.ndarray
    conn: np.ndarray
    index: np.ndarray
    frac: np.ndarray
    ptr: np.ndarray
    links: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    def connection(self, i: int) -> Connection:
        """Listed connection ``i``."""
        return Connection(*(int(v) for v in self.keys[i]))

    def routes(self, i: int) -> Routes:
        """``[(path, fraction), ...]`` of listed connection ``i``, in file order."""
        rows = self.order[self.row_ptr[i]:self.row_ptr[i + 1]].tolist()
        links, ptr = self.links, self.ptr
        return [(tuple(links[ptr[r]:ptr[r + 1]].tolist()), float(self.frac[r])) for r in rows]

    def route_table(self, topology: Topology, independent: bool):
        """The :class:`RouteTable` of every listed connection, by listed id."""
        rows = self.order
        lens = np.diff(self.ptr)[rows]
        ptr = np.zeros(len(rows) + 1, dtype=_INT)
        np.cumsum(lens, out=ptr[1:])
        from netsim.topology.pathsets import ragged_arange
        owner, k = ragged_arange(lens)
        links = self.links[self.ptr[rows][owner] + k]
        return from_entries(len(self), self.conn[rows], self.frac[rows], ptr, links,
                            topology.path_latencies_s(ptr, links),
                            topology.message_overheads_s(self.keys[:, 0], self.keys[:, 1]), independent,
                            len(topology.links))


class Columns:
    """The string cells of a routes table (stripped), with the position of every row for messages."""

    def __init__(self, cells: dict[str, np.ndarray], name: str, lines: list[int] | None):
        self.cells, self.name, self.lines = cells, name, lines
        self.n = len(next(iter(cells.values()))) if cells else 0

    def where(self, i: int) -> tuple[str, str]:
        """(``file:line``, ``line N``) of data row ``i`` (``file: row N``, ``row N`` when lines are unknown)."""
        if self.lines is not None:
            return f"{self.name}:{self.lines[i + 1]}", f"line {self.lines[i + 1]}"
        return f"{self.name}: row {i + 1}", f"row {i + 1}"

    def row(self, i: int) -> dict[str, str]:
        """The cells of row ``i``."""
        return {k: v[i] for k, v in self.cells.items()}

    def get(self, column: str) -> np.ndarray:
        """A column (all empty when the file has none)."""
        got = self.cells.get(column)
        return got if got is not None else np.full(self.n, "", dtype=object)


def _parsed(column: np.ndarray, parse, missing) -> np.ndarray:
    """``parse`` of every cell, called once per distinct text; ``missing`` where it returns None."""
    import pandas as pd

    codes, uniques = pd.factorize(column)
    values = [parse(u) for u in uniques.tolist()]
    table = np.array([missing if v is None else v for v in values] or [missing])
    return table[codes] if len(codes) else table[:0]


def resolve(columns: Columns, topology: Topology) -> Listed:
    """Check every row and build the :class:`Listed` routes; a ConfigError naming the first bad row
    (see the module docstring) or a repeated path, or fractions not summing to 1."""
    n_gpus = topology.n_gpus
    kept = ~np.logical_and.reduce([v == "" for v in columns.cells.values()])  # rows of empty cells are skipped
    ints = {c: _parsed(columns.get(c), parse_int, -1) for c in ("src", "dst", "channel")}
    ints.update({c: _parsed(columns.get(c), _int_or_zero, -1) for c in ("job", "comm")})
    named, index_cell = columns.get("path"), columns.get("path_index")
    has_name, has_index = named != "", index_cell != ""
    index = _parsed(index_cell, parse_int, -1)
    frac = _parsed(columns.get("fraction"), parse_fraction, np.nan).astype(np.float64)
    ok = kept & (has_name != has_index) & ~np.isnan(frac)
    for values in ints.values():
        ok &= values >= 0
    ok &= (ints["src"] < n_gpus) & (ints["dst"] < n_gpus)
    ok &= ~has_index | (index >= 0)
    src, dst = ints["src"], ints["dst"]
    j = np.full(columns.n, -1, dtype=_INT)
    rows = np.flatnonzero(ok)
    try:
        ps = topology.path_sets(src[rows], dst[rows])
    except NetsimError:
        return resolve_reference(columns, topology)  # a pair without paths: the reference says which row
    by_index = has_index[rows]
    j[rows[by_index]] = np.where(index[rows[by_index]] < ps.n[by_index], index[rows[by_index]], -1)
    by_name = np.flatnonzero(~by_index)
    if len(by_name):
        j[rows[by_name]] = _named(ps.take(by_name), named[rows[by_name]], topology)
    ok &= j >= 0
    return _combine(columns, topology, np.flatnonzero(kept), ok, src, dst, ints, j, frac)


def _named(ps, texts: np.ndarray, topology: Topology) -> np.ndarray:
    """Path indices of rows giving their path as switch names (-1: not resolved here)."""
    import pandas as pd

    index = ps.index
    names = {data["name"]: node for node, data in topology.graph.nodes(data=True)}
    node_name = topology.node_name
    codes, uniques = pd.factorize(texts)
    parsed = [split_names(t) for t in uniques.tolist()]
    known = np.array([bool(p) and all(n in names for n in p) for p in parsed] or [False])
    out = np.full(len(ps), -1, dtype=_INT)
    rows = np.flatnonzero(known[codes] & (ps.nic_s >= 0))  # (a pair on one host: the reference decides)
    if not len(rows):
        return out
    key = ps.cls[rows] * len(uniques) + codes[rows]
    uniq, inverse = np.unique(key, return_inverse=True)
    found = np.full(len(uniq), -1, dtype=_INT)
    first: dict[int, dict[tuple[str, ...], int]] = {}  # per class: switch names -> its first entry
    for u, k in enumerate(uniq.tolist()):
        cls, code = divmod(k, len(uniques))
        entries = first.get(cls)
        if entries is None:
            entries = first[cls] = {}
            for f, seq in enumerate(index.class_switches(cls)):
                entries.setdefault(tuple(node_name(v) for v in seq), f)
        found[u] = entries.get(parsed[code], -1)
    f = found[inverse]
    out[rows] = np.where(f >= 0, f * ps.n_d[rows], -1)  # the first path with that entry: a = b = 0
    return out


def resolve_reference(columns: Columns, topology: Topology) -> Listed:
    """The reference of :func:`resolve`: every row through :class:`Resolver`, then grouped and
    checked one by one (:func:`combine_rows`)."""
    kept = np.flatnonzero(~np.logical_and.reduce([v == "" for v in columns.cells.values()]))
    resolver = Resolver(topology)
    rows = [resolver.row(columns.row(i), *columns.where(i)) for i in kept.tolist()]
    if not rows:
        raise bad(columns.name, "no routes (only a header)")
    routes = combine_rows(rows)
    conn, index, frac, paths = [], [], [], []
    for i, (c, entries) in enumerate(routes.items()):
        candidates = topology.paths(c.src, c.dst)
        for path, fraction in entries:
            conn.append(i)
            index.append(candidates.index(path))
            frac.append(fraction)
            paths.append(path)
    ptr = np.zeros(len(paths) + 1, dtype=_INT)
    np.cumsum([len(p) for p in paths], out=ptr[1:])
    counts = np.bincount(np.array(conn, dtype=_INT), minlength=len(routes))
    row_ptr = np.zeros(len(routes) + 1, dtype=_INT)
    np.cumsum(counts, out=row_ptr[1:])
    return Listed(np.array([c[:5] for c in routes], dtype=_INT).reshape(-1, 5), row_ptr,
                  np.arange(len(paths), dtype=_INT), np.array(conn, dtype=_INT), np.array(index, dtype=_INT),
                  np.array(frac), ptr, np.array([lk for p in paths for lk in p], dtype=_INT))


def combine_rows(rows: list[Row]) -> dict[Connection, Routes]:
    """Group rows by connection; reject repeated paths and fractions not summing to 1 (row by row)."""
    grouped: dict[Connection, list[Row]] = {}
    for row in rows:
        group = grouped.setdefault(row.connection, [])
        for earlier in group:
            if earlier.path == row.path:
                raise bad(row.where, f"duplicate route: connection {row.connection.label()} already takes "
                                     f"this path ({earlier.line})")
        group.append(row)
    routes: dict[Connection, Routes] = {}
    for conn, group in grouped.items():
        total = math.fsum(r.fraction for r in group)
        if abs(total - 1.0) > FRACTION_TOLERANCE:
            raise bad(group[0].where, f"the fractions of connection {conn.label()} sum to {total:.12g} "
                                      f"({', '.join(r.line for r in group)}); they must sum to 1")
        routes[conn] = [(r.path, r.fraction) for r in group]
    return routes


def _combine(columns: Columns, topology: Topology, kept_rows: np.ndarray, ok: np.ndarray, src, dst, ints, j,
             frac) -> Listed:
    """Rows flagged by the bulk checks go through the reference (the first bad one raises); then group
    by connection, reject repeated paths and fractions not summing to 1 (as :func:`combine_rows`)."""
    flagged = kept_rows[~ok[kept_rows]]
    if len(flagged):
        resolver = Resolver(topology)
        paths = {}
        for i in flagged.tolist():
            row = resolver.row(columns.row(i), *columns.where(i))  # raises for a bad row
            for c, v in zip(ints, row.connection[:5]):
                ints[c][i] = v
            paths[i] = row
        for i, row in paths.items():
            j[i] = topology.paths(row.connection.src, row.connection.dst).index(row.path)
            frac[i] = row.fraction
    rows = kept_rows
    if not len(rows):
        raise bad(columns.name, "no routes (only a header)")
    keys = np.stack([ints[c][rows] for c in ("src", "dst", "channel", "job", "comm")], axis=1)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    rank = np.empty(len(first), dtype=_INT)  # listed ids in order of first appearance
    rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=_INT)
    conn = rank[inverse]
    listed_keys = keys[np.sort(first)]
    # Repeated (connection, path): the first repeat in file order, naming the row it repeats.
    pair = conn * (int(j[rows].max()) + 1) + j[rows]
    _, pair_first, pair_inverse = np.unique(pair, return_index=True, return_inverse=True)
    earlier = pair_first[pair_inverse.reshape(-1)]
    repeats = np.flatnonzero(earlier != np.arange(len(rows)))
    if len(repeats):
        r = int(repeats[0])
        label = Connection(*(int(v) for v in keys[r])).label()
        raise bad(columns.where(int(rows[r]))[0], f"duplicate route: connection {label} already takes this path "
                                                  f"({columns.where(int(rows[earlier[r]]))[1]})")
    order = np.argsort(conn, kind="stable")
    row_ptr = np.zeros(len(first) + 1, dtype=_INT)
    np.cumsum(np.bincount(conn, minlength=len(first)), out=row_ptr[1:])
    fr = frac[rows]
    totals = fr[order[row_ptr[:-1]]].copy()
    several = np.flatnonzero(np.diff(row_ptr) > 1)
    for c in several.tolist():
        totals[c] = math.fsum(fr[order[row_ptr[c]:row_ptr[c + 1]]].tolist())
    off = np.flatnonzero(np.abs(totals - 1.0) > FRACTION_TOLERANCE)
    if len(off):
        c = int(off[0])
        group = rows[order[row_ptr[c]:row_ptr[c + 1]]].tolist()
        label = Connection(*(int(v) for v in listed_keys[c])).label()
        raise bad(columns.where(group[0])[0], f"the fractions of connection {label} sum to {totals[c]:.12g} "
                                              f"({', '.join(columns.where(g)[1] for g in group)}); they must sum to 1")
    ptr, links = topology.path_sets(src[rows], dst[rows]).links(j[rows])
    return Listed(listed_keys, row_ptr, order, conn, j[rows], fr, ptr, links)

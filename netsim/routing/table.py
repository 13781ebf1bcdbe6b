"""Explicit routes from a CSV file (``table``): each listed connection takes the path(s) its rows give.

Users plan their own paths, or replay the paths another simulator used, and netsim routes exactly
those. Connections the file does not list fall back to another registered policy (ECMP by default);
a row that matches no connection of the run is an error once the run ends (:meth:`Table.check_used`).
"""

from __future__ import annotations

import csv
import io
import itertools
import os
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from netsim import inputfile
from netsim.errors import ConfigError, shorten
from netsim.routing.base import (DEFAULT_RECONVERGENCE, ROUTING, Connection, PolicyBase, Routes,
                                 RoutingPolicy, make_routing, option_time)
from netsim.routing.routes import Columns as ConnectionColumns
from netsim.routing.routes import _route_table, concat_routes, connection_columns, crossing, take_routes
from netsim.routing.table_rows import COLUMNS, MAX_CELL, REQUIRED, WHERE, Columns, Listed, bad, resolve
from netsim.topology import Topology

#: Largest routes file read (bytes): about half a million rows, the routes of every connection
#: of a 16,384-GPU ring with 16 channels twice over; a larger file (or the wrong one) fails at once.
MAX_ROUTES_BYTES = 16 * 2**20
#: Columns of whole numbers, and what their cells must look like (ASCII digits: ``int()`` would also take
#: ``1_0``, ``+4`` or Arabic-Indic digits, which a routes file never means).
INTEGER_COLUMNS = ("src", "dst", "channel", "job", "comm", "path_index")
_DIGITS = r"[0-9]*"
_DECIMAL = r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|"
#: Unused rows named by line in the message of :meth:`Table.check_used`.
SHOWN_UNUSED = 6


@ROUTING.register("table")
class Table(PolicyBase):
    """Source routing from a CSV file: one or more rows per connection give its path(s).

    Each row names a connection (``src``, ``dst``, ``channel``, optionally ``job`` and ``comm``,
    which default to 0) and one of its equal-cost paths, either as ``path``, the switches it
    crosses (``leaf0 spine3 leaf2`` or ``leaf0>spine3>leaf2``, names as
    :meth:`Topology.node_name` gives them; with parallel cables the first matching path), or as
    ``path_index``, an index into ``topology.paths(src, dst)``. Several rows with a ``fraction``
    each (summing to 1) split a connection over several paths as fixed fractions of one fluid flow,
    like ``spray``. Everything is checked when the policy is built; errors name the CSV line.

    Connections the file does not list use the ``fallback`` policy, built with the same topology
    and generator (the table itself draws nothing, so an unlisted connection is routed exactly as
    the fallback alone would route it). Once the table learns of a fault (``reconvergence`` after
    it), a listed connection whose paths cross a failed link uses the fallback's routes instead,
    and returns to its table paths when the link is back.

    Every row must match a connection of the run: a row whose (src, dst, channel, job, comm) no
    message uses would leave the connection it was meant for to the fallback, silently. The policy
    records which listed connections the run asked for, and :meth:`check_used`, called once the
    run has ended, raises a ConfigError naming the first row that matched nothing.

    The table is ``independent`` when its fallback is (``split``, ``ethereal``): the Fabric reads
    one flag per policy, and it must keep treating the fallback's entries as the fallback means
    them. Rows with fractions are then carried as independent sub-flows too.

    Parameters
    ----------
    topology, rng:
        The fabric, and the run's generator (handed to the fallback).
    file:
        The routes CSV (relative paths in an experiment YAML are relative to the YAML's directory).
    fallback:
        A registered policy name (``ecmp``), or a mapping ``{type: NAME, OPTION: VALUE}``.
    reconvergence:
        How long after a fault the table learns of it: a time (``"10ms"``) or seconds.

    Examples
    --------
    >>> import tempfile
    >>> from netsim.topology import leaf_spine
    >>> topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1,
    ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    >>> with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
    ...     _ = f.write("src,dst,channel,path\\n0,1,0,leaf0 spine1 leaf1\\n")
    >>> table = Table(topo, np.random.default_rng(0), file=f.name)
    >>> [topo.link_name(link) for link in table.paths(Connection(0, 1))[0][0]]
    ['h0.nic0->leaf0', 'leaf0->spine1', 'spine1->leaf1', 'leaf1->h1.nic0']
    >>> os.unlink(f.name)
    """

    def __init__(self, topology: Topology, rng: np.random.Generator, file: str | os.PathLike | None = None,
                 fallback: str | dict = "ecmp", reconvergence: str | float = DEFAULT_RECONVERGENCE):
        super().__init__()
        if file is None:
            raise ConfigError("give the routes file: routing: {type: table, file: routes.csv}", "routing")
        if not isinstance(file, (str, os.PathLike)):
            raise ConfigError(f"expected the path of a CSV file, got {shorten(file)}", WHERE)
        self.topology = topology
        self.reaction_s = option_time(reconvergence, "reconvergence")
        self.fallback = _make_fallback(fallback, topology, rng)
        self.independent = bool(self.fallback.independent)
        self.file = Path(file)
        #: The listed connections' routes as arrays (see :class:`~netsim.routing.table_rows.Listed`).
        self.listed, self._places = _read(self.file, topology, resolve)
        self._table = self.listed.route_table(topology, self.independent)
        self._lookup = _Lookup(self.listed.keys)
        self._ids: dict[tuple, int] | None = None  # for paths(): built on its first call
        self._paths: dict[int, Routes] = {}  # paths() lists, built on first request (the Fabric compares by identity)
        self._dead = np.zeros(len(self.listed), dtype=bool)
        self._usage = _Usage(self.listed.keys, topology.n_gpus)

    @property
    def decides(self) -> str:
        """As the fallback decides (listed connections are fixed, whatever it is)."""
        return self.fallback.decides

    def paths(self, connection: Connection) -> Routes:
        """The table's routes of ``connection``; the fallback's when it is unlisted or its paths are down.

        The same list object is returned while the decision stands (the Fabric caches by identity).
        """
        i = self._listed(connection)
        if i is None:
            return self.fallback.paths(connection)
        routes = self._paths.get(i)
        if routes is None:
            routes = self._paths[i] = self.listed.routes(i)
        return routes

    def routes(self, connections):
        """The listed connections' rows of the table (taken from arrays built when the file was read);
        the others, in batch order, routed by the fallback."""
        cols = connection_columns(connections)
        ids = self._lookup(cols)
        self._usage.seen(ids, cols)
        mine = ids >= 0
        mine[mine] = ~self._dead[ids[mine]]
        if mine.all():
            return take_routes(self._table, ids)
        rest = np.flatnonzero(~mine)
        other = self.fallback.routes([connections[i] for i in rest.tolist()])
        if not mine.any():
            return other
        order = np.empty(len(cols), dtype=np.int64)
        picked = np.flatnonzero(mine)
        order[picked] = np.arange(len(picked))
        order[rest] = len(picked) + np.arange(len(rest))
        return take_routes(concat_routes([take_routes(self._table, ids[picked]), other]), order)

    def plan(self, connections: list[Connection]) -> None:
        """Hand the connections the fallback will route to its ``plan``."""
        mine = [c for c in connections if self._listed(c) is None]
        if mine:
            self.fallback.plan(mine)

    def _listed(self, connection: Connection) -> int | None:
        """The listed id of ``connection`` if the table routes it now (listed, paths alive)."""
        if self._ids is None:
            keys = self.listed.keys.T.tolist()
            self._ids = dict(zip(zip(*keys, itertools.repeat(False)), itertools.count()))
        i = self._ids.get(connection)
        self._usage.seen_one(i, connection)
        return None if i is None or self._dead[i] else i

    def check_used(self) -> None:
        """ConfigError naming the first row (in file order) of a listed connection the run never asked
        for: call it once the run has ended. Such a row matches no connection of the run (a wrong
        channel, direction, job or communicator), so the connection it was meant for took the fallback."""
        unused = self._usage.unused()
        if not len(unused):
            return
        first = self._places.first_row[unused]
        i = int(unused[np.argmin(first)])
        conn = self.listed.connection(i)
        rows = int(np.diff(self.listed.row_ptr)[unused].sum())
        lines = ", ".join(self._places.label(int(r)) for r in np.sort(first)[:SHOWN_UNUSED])
        more = ", ..." if len(unused) > SHOWN_UNUSED else ""
        example = self._usage.example(conn.src, conn.dst)
        seen = (f"the run's connections from GPU {conn.src} to GPU {conn.dst} include {example.label()}"
                if example is not None else f"the run has no connection from GPU {conn.src} to GPU {conn.dst}")
        raise bad(self._places.where(int(first.min())),
                  f"no connection of the run is {conn.label()} (src {conn.src}, dst {conn.dst}, channel "
                  f"{conn.channel}, job {conn.job}, comm {conn.comm}): the row was never used, so the connection it "
                  f"was meant for took the fallback; {seen}. Fix the row's src, dst, channel, job or comm, or remove "
                  f"it ({rows} row{'s' * (rows > 1)} match{'es' * (rows == 1)} no connection: {lines}{more})")

    def links_changed(self, state: dict[int, float]) -> None:
        """Learn the failed links; listed connections crossing one move to the fallback (told too)."""
        super().links_changed(state)
        self.fallback.links_changed(state)
        dead = np.zeros(len(self.listed), dtype=bool)
        if self.failed:
            listed = self.listed
            pieces = _rows_table(listed)
            dead[listed.conn[crossing(pieces, self.failed)]] = True
        self._dead = dead


class _Lookup:
    """Listed ids of batches of connections (-1: not listed), by binary search over coded keys.

    perf: each column's values are coded by their rank among the listed values, and a connection by
    the mixed-radix number of its codes; a dict of 6-tuples costs more to build than reading the file.
    """

    def __init__(self, keys: np.ndarray):
        self.values = [np.unique(keys[:, c]) for c in range(keys.shape[1])]
        self.sizes = [len(v) for v in self.values]
        self.exact = float(np.prod([float(s) for s in self.sizes])) < 2.0 ** 62
        codes, _ = self._codes(keys.T) if self.exact else (None, None)
        self.order = np.argsort(codes, kind="stable") if self.exact else None
        self.sorted = codes[self.order] if self.exact else None
        self.dict = None if self.exact else dict(zip(map(tuple, keys.tolist()), itertools.count()))

    def _codes(self, columns) -> tuple[np.ndarray, np.ndarray]:
        code = np.zeros(len(columns[0]), dtype=np.int64)
        known = np.ones(len(columns[0]), dtype=bool)
        for column, values, size in zip(columns, self.values, self.sizes):
            at = np.minimum(np.searchsorted(values, column), size - 1)
            known &= values[at] == column
            code = code * size + at
        return code, known

    def __call__(self, cols) -> np.ndarray:
        columns = (cols.src, cols.dst, cols.channel, cols.job, cols.comm)
        if not self.exact:
            get = self.dict.get
            ids = np.fromiter((get(k, -1) for k in zip(*(c.tolist() for c in columns))), dtype=np.int64,
                              count=len(cols))
            return np.where(cols.tcp, -1, ids)
        code, known = self._codes(columns)
        at = np.minimum(np.searchsorted(self.sorted, code), len(self.sorted) - 1)
        found = known & ~cols.tcp & (self.sorted[at] == code)
        return np.where(found, self.order[at], -1)


class _Usage:
    """Which listed connections the run asked for, and for each listed GPU pair one connection of the run
    between the same GPUs that the table does not list (named when a row matched nothing)."""

    def __init__(self, keys: np.ndarray, n_gpus: int):
        self.used = np.zeros(len(keys), dtype=bool)
        self.n = n_gpus
        self.pairs = np.unique(keys[:, 0] * n_gpus + keys[:, 1])
        self.pair_ids = dict(zip(self.pairs.tolist(), itertools.count()))  # for one connection at a time
        self.examples = np.full((len(self.pairs), 6), -1, dtype=np.int64)

    def seen(self, ids: np.ndarray, cols) -> None:
        """A batch: ``ids`` its listed ids (-1: not listed), ``cols`` its connection columns."""
        listed = ids >= 0
        self.used[ids[listed]] = True
        if listed.all():
            return
        rest = np.flatnonzero(~listed)
        at = self._pair(cols.src[rest], cols.dst[rest])
        new = at >= 0
        new[new] = self.examples[at[new], 0] < 0
        if new.any():
            rows = rest[new]
            self.examples[at[new]] = np.stack([np.asarray(c[rows], dtype=np.int64) for c in cols], axis=1)

    def seen_one(self, i: int | None, connection: Connection) -> None:
        """One connection, ``i`` its listed id (None: not listed)."""
        if i is not None:
            self.used[i] = True
            return
        at = self.pair_ids.get(connection.src * self.n + connection.dst)
        if at is not None and self.examples[at, 0] < 0:
            self.examples[at] = [int(v) for v in connection]

    def _pair(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        code = src.astype(np.int64) * self.n + dst
        at = np.minimum(np.searchsorted(self.pairs, code), len(self.pairs) - 1)
        return np.where(self.pairs[at] == code, at, -1)

    def unused(self) -> np.ndarray:
        """The listed ids never asked for."""
        return np.flatnonzero(~self.used)

    def example(self, src: int, dst: int) -> Connection | None:
        """A connection of the run from ``src`` to ``dst`` the table does not list, if one was seen."""
        at = self.pair_ids.get(src * self.n + dst)
        if at is None or self.examples[at, 0] < 0:
            return None
        *ints, tcp = self.examples[at].tolist()
        return Connection(*ints, bool(tcp))


def _rows_table(listed: Listed):
    """A table with one piece per row of ``listed`` (to ask which rows cross given links)."""
    n = len(listed.conn)
    return _route_table(np.arange(n + 1), np.ones(n), np.zeros(n), np.ones(n, dtype=np.int64), listed.ptr,
                        listed.links, np.ones(len(listed.links)))


def _make_fallback(fallback: str | dict, topology: Topology, rng: np.random.Generator) -> RoutingPolicy:
    """The fallback policy named by ``fallback`` (a name, or a mapping with ``type`` and options)."""
    if isinstance(fallback, str):
        name, options = fallback, {}
    elif isinstance(fallback, dict) and isinstance(fallback.get("type"), str):
        name, options = fallback["type"], {k: v for k, v in fallback.items() if k != "type"}
    else:
        raise ConfigError(f"expected a routing policy name (ecmp) or a mapping with a 'type', "
                          f"got {shorten(fallback)}", "routing.fallback")
    if name == "table":
        raise ConfigError("a table cannot fall back to another table; name another policy (ecmp, spray, ...)",
                          "routing.fallback")
    ROUTING.get(name, "routing.fallback")  # an unknown name is reported at the fallback, listing valid ones
    return make_routing(name, topology, rng, options, path="routing.fallback")


def read_routes(file: str | os.PathLike, topology: Topology) -> dict[Connection, Routes]:
    """Read and validate a routes CSV into ``{connection: [(path, fraction), ...]}``.

    Parameters
    ----------
    file:
        The CSV: columns ``src, dst, channel`` (required), ``job, comm`` (default 0), ``path`` or
        ``path_index`` (exactly one per row), ``fraction`` (default 1). Blank lines and ``#``
        comments are ignored.
    topology:
        The fabric the paths must exist in.

    Returns
    -------
    dict
        Routes per connection, in file order; the fractions of each sum to 1.
        Raises :class:`~netsim.errors.ConfigError` at ``routing.file`` naming the CSV line otherwise.
    """
    listed = read_table(file, topology)
    return {listed.connection(i): listed.routes(i) for i in range(len(listed))}


def read_table(file: str | os.PathLike, topology: Topology, check=resolve) -> Listed:
    """Read and validate a routes CSV (see :func:`read_routes`) into arrays.

    ``check(columns, topology) -> Listed`` checks the rows: in bulk by default,
    :func:`~netsim.routing.table_rows.resolve_reference` row by row (the reference).
    """
    return _read(file, topology, check)[0]


def _read(file: str | os.PathLike, topology: Topology, check) -> tuple[Listed, _Places]:
    """:func:`read_table`, and where each listed connection's first row is (for :meth:`Table.check_used`)."""
    import pandas as pd  # imported here: only a run that uses a table pays for it

    name = str(file)
    try:
        text = inputfile.read_text(file, MAX_ROUTES_BYTES)
    except ConfigError as exc:
        if exc.message.startswith("file not found"):
            raise ConfigError(f"routes file {name} not found{exc.message[len('file not found'):]}", WHERE) from None
        line = f":{exc.line}" if exc.line else ""
        raise ConfigError(f"cannot read routes file {name}{line}: {exc.message}", WHERE) from None
    if not text.strip():
        raise bad(name, f"the file is empty; expected a header like {','.join(REQUIRED)},path")
    _check_header(text, name)
    try:
        with warnings.catch_warnings():
            # CORRECTNESS: when every row has one field more than the header, pandas would take the
            # first column as the index and shift the others; index_col=False warns instead
            warnings.simplefilter("error", pd.errors.ParserWarning)
            table = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, comment="#",
                                skipinitialspace=True, index_col=False)
    except pd.errors.EmptyDataError:
        raise bad(name, f"the file is empty; expected a header like {','.join(REQUIRED)},path") from None
    except pd.errors.ParserWarning:
        raise bad(_longer_than_header(text, name), "more fields than the header has columns") from None
    except (ValueError, csv.Error) as exc:  # pandas' ParserError is a ValueError
        raise bad(name, f"not a valid CSV: {shorten(str(exc).strip(), 200)[1:-1]}") from None
    table.columns = [str(c).strip() for c in table.columns]
    _check_columns(list(table.columns), name)
    # CORRECTNESS: pandas skips the same blank and comment-only lines, so data row i is on lines[i + 1]
    lines = [n for n, raw in enumerate(_physical_lines(text), 1) if raw.split("#", 1)[0].strip()]
    cells = {c: table[c].str.strip().to_numpy(dtype=object) for c in table.columns}
    columns = Columns(cells, name, lines if len(lines) == len(table) + 1 else None)
    _check_cells(columns)
    listed = check(columns, topology)
    return listed, _Places.of(columns, listed)


@dataclass(frozen=True)
class _Places:
    """Where each listed connection's first row is in the routes file, for messages."""

    name: str
    first_row: np.ndarray  #: per listed connection, its first data row (0-based, in file order)
    lines: np.ndarray | None  #: the physical line of the header (0) and of each data row; None: rows counted

    @classmethod
    def of(cls, columns: Columns, listed: Listed) -> _Places:
        """The first row of each of ``listed``'s connections among the rows of ``columns``."""
        import pandas as pd

        kept = np.flatnonzero(~np.logical_and.reduce([v == "" for v in columns.cells.values()]))
        ints = [pd.to_numeric(pd.Series(columns.get(c)[kept]).replace("", "0")).to_numpy(dtype=np.int64)
                for c in ("src", "dst", "channel", "job", "comm")]
        ids = _Lookup(listed.keys)(ConnectionColumns(*ints, np.zeros(len(kept), dtype=bool)))
        first = np.full(len(listed), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, ids, kept)
        lines = np.asarray(columns.lines, dtype=np.int64) if columns.lines is not None else None
        return cls(columns.name, first, lines)

    def where(self, row: int) -> str:
        """``file:line`` (``file: row N``) of data row ``row``."""
        return f"{self.name}:{self.lines[row + 1]}" if self.lines is not None else f"{self.name}: row {row + 1:,}"

    def label(self, row: int) -> str:
        """``line N`` (``row N``) of data row ``row``."""
        return f"line {self.lines[row + 1]}" if self.lines is not None else f"row {row + 1:,}"


def _check_header(text: str, name: str) -> None:
    """No column named twice (pandas would rename the second ``path.1``)."""
    for n, raw in enumerate(_physical_lines(text), 1):
        head = raw.split("#", 1)[0]
        if head.strip():
            try:
                counts = Counter(c.strip() for c in next(csv.reader([head])))
            except csv.Error as exc:  # a field past the csv module's limit (131,072 characters)
                raise bad(f"{name}:{n}", f"not a valid CSV header ({exc})") from None
            repeated = next((c for c, k in counts.items() if k > 1), None)
            if repeated is not None:
                raise bad(f"{name}:{n}", f"column {shorten(repeated)} appears {counts[repeated]:,} times; "
                                         "each column once")
            return


def _check_cells(columns: Columns) -> None:
    """ConfigError at the first row whose integer cell is not plain ASCII digits or whose fraction is not a
    plain decimal number (the row-by-row checks follow)."""
    import pandas as pd

    found: list[tuple[int, str]] = []
    for column in (*INTEGER_COLUMNS, "fraction"):
        if column in columns.cells:
            pattern = _DECIMAL if column == "fraction" else _DIGITS
            ok = pd.Series(columns.cells[column], dtype=object).str.fullmatch(pattern).to_numpy(dtype=bool)
            hit = np.flatnonzero(~ok)
            if len(hit):
                found.append((int(hit[0]), column))
    if not found:
        return
    row, column = min(found)
    where, raw = columns.where(row)[0], columns.get(column)[row]
    if column == "fraction":
        raise bad(where, f"fraction must be a number in (0, 1], got {shorten(raw)}")
    raise bad(where, f"{column} must be a non-negative integer (at most {MAX_CELL:,}), got {shorten(raw)}")


def _longer_than_header(text: str, name: str) -> str:
    """``file:line`` of the first row with more fields than the header (``file`` when none is found)."""
    lines = [(n, raw.split("#", 1)[0]) for n, raw in enumerate(_physical_lines(text), 1)]
    lines = [(n, raw) for n, raw in lines if raw.strip()]
    try:
        width = len(next(csv.reader([lines[0][1]]))) if lines else 0
        return next((f"{name}:{n}" for n, raw in lines[1:] if len(next(csv.reader([raw]))) > width), name)
    except csv.Error:  # a field past the csv module's limit: the file is all that can be named
        return name


def _physical_lines(text: str) -> list[str]:
    """The lines as pandas counts them: ended by \\n, \\r\\n or \\r (not by \\f, \\v or U+2028)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _check_columns(columns: list[str], name: str) -> None:
    """Every required column is there, a way to give paths is offered, and nothing unknown."""
    where = f"{name}:1"
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        more = f" (and {len(unknown) - 8} more)" if len(unknown) > 8 else ""
        shown = ", ".join(map(shorten, unknown[:8])) + more
        raise bad(where, f"unknown column{'s' * (len(unknown) > 1)} {shown}; "
                          f"allowed: {', '.join(COLUMNS)}")
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise bad(where, f"missing column{'s' * (len(missing) > 1)} {', '.join(missing)}; "
                          f"required: {', '.join(REQUIRED)} and path or path_index")
    if "path" not in columns and "path_index" not in columns:
        raise bad(where, "missing column path or path_index (how each row gives its path)")

"""Explicit routes from a CSV file (``table``): each listed connection takes the path(s) its rows give.

Users plan their own paths, or replay the paths another simulator used, and netsim routes exactly
those. Connections the file does not list fall back to another registered policy (ECMP by default).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from netsim.config import read_text
from netsim.errors import ConfigError, shorten
from netsim.routing.base import (DEFAULT_RECONVERGENCE, ROUTING, Connection, PolicyBase, Routes,
                                 RoutingPolicy, make_routing, option_time)
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
#: Largest routes file read (bytes): about half a million rows, the routes of every connection
#: of a 16,384-GPU ring with 16 channels twice over; a larger file (or the wrong one) fails at once.
MAX_ROUTES_BYTES = 16 * 2**20
#: Largest integer in the src, dst, channel, job, comm and path_index columns (a signed 32-bit int).
MAX_CELL = 2**31 - 1


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
        self.independent = bool(getattr(self.fallback, "independent", False))
        self.file = Path(file)
        self.routes: dict[Connection, Routes] = read_routes(self.file, topology)
        self._links = {conn: frozenset(link for path, _ in routes for link in path)
                       for conn, routes in self.routes.items()}
        self._dead: frozenset[Connection] = frozenset()

    def paths(self, connection: Connection) -> Routes:
        """The table's routes of ``connection``; the fallback's when it is unlisted or its paths are down.

        The same list object is returned while the decision stands (the Fabric caches by identity).
        """
        routes = self.routes.get(connection)
        if routes is None or connection in self._dead:
            return self.fallback.paths(connection)
        return routes

    def plan(self, connections: list[Connection]) -> None:
        """Hand the connections the fallback will route to its ``plan``, when it has one."""
        plan = getattr(self.fallback, "plan", None)
        if plan is not None:
            mine = [c for c in connections if c not in self.routes or c in self._dead]
            if mine:
                plan(mine)

    def links_changed(self, state: dict[int, float]) -> None:
        """Learn the failed links; listed connections crossing one move to the fallback (told too)."""
        super().links_changed(state)
        changed = getattr(self.fallback, "links_changed", None)
        if changed is not None:
            changed(state)
        failed = self.failed
        self._dead = frozenset(c for c, links in self._links.items() if not failed.isdisjoint(links))


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


def _bad(where: str, message: str) -> ConfigError:
    """A ConfigError at ``routing.file`` whose message opens with the CSV position ``where``."""
    return ConfigError(f"{where}: {message}", WHERE)


@dataclass(frozen=True)
class _Row:
    """One parsed row: where it is in the file, its connection, its path and fraction."""

    where: str  #: ``file:line`` (``file: row N`` when lines cannot be told), to open messages
    line: str  #: ``line 7`` (or ``row 7``), to refer back to the row
    connection: Connection
    path: tuple[int, ...]
    fraction: float


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
    import pandas as pd  # imported here: only a run that uses a table pays for it

    name = str(file)
    try:
        text = read_text(file, MAX_ROUTES_BYTES)
    except ConfigError as exc:
        if exc.message == "file not found":
            raise ConfigError(f"routes file {name} not found", WHERE) from None
        line = f":{exc.line}" if exc.line else ""
        raise ConfigError(f"cannot read routes file {name}{line}: {exc.message}", WHERE) from None
    if not text.strip():
        raise _bad(name, f"the file is empty; expected a header like {','.join(REQUIRED)},path")
    try:
        with warnings.catch_warnings():
            # CORRECTNESS: when every row has one field more than the header, pandas would take the
            # first column as the index and shift the others; index_col=False warns instead
            warnings.simplefilter("error", pd.errors.ParserWarning)
            table = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, comment="#",
                                skipinitialspace=True, index_col=False)
    except pd.errors.EmptyDataError:
        raise _bad(name, f"the file is empty; expected a header like {','.join(REQUIRED)},path") from None
    except pd.errors.ParserWarning:
        raise _bad(_longer_than_header(text, name), "more fields than the header has columns") from None
    except (ValueError, csv.Error) as exc:  # pandas' ParserError is a ValueError
        raise _bad(name, f"not a valid CSV: {shorten(str(exc).strip(), 200)[1:-1]}") from None
    table.columns = [str(c).strip() for c in table.columns]
    _check_columns(list(table.columns), name)
    # CORRECTNESS: pandas skips the same blank and comment-only lines, so data row i is on lines[i + 1]
    lines = [n for n, raw in enumerate(_physical_lines(text), 1) if raw.split("#", 1)[0].strip()]
    exact = len(lines) == len(table) + 1
    resolver = _Resolver(topology)
    rows: list[_Row] = []
    for i, record in enumerate(table.to_dict("records")):
        cells = {k: str(v).strip() for k, v in record.items()}
        if not any(cells.values()):
            continue  # a row of empty cells (spreadsheets export them)
        if exact:
            where, line = f"{name}:{lines[i + 1]}", f"line {lines[i + 1]}"
        else:
            where, line = f"{name}: row {i + 1}", f"row {i + 1}"
        rows.append(resolver.row(cells, where, line))
    if not rows:
        raise _bad(name, "no routes (only a header)")
    return _combine(rows)


def _longer_than_header(text: str, name: str) -> str:
    """``file:line`` of the first row with more fields than the header (``file`` when none is found)."""
    lines = [(n, raw.split("#", 1)[0]) for n, raw in enumerate(_physical_lines(text), 1)]
    lines = [(n, raw) for n, raw in lines if raw.strip()]
    width = len(next(csv.reader([lines[0][1]]))) if lines else 0
    return next((f"{name}:{n}" for n, raw in lines[1:] if len(next(csv.reader([raw]))) > width), name)


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
        raise _bad(where, f"unknown column{'s' * (len(unknown) > 1)} {shown}; "
                          f"allowed: {', '.join(COLUMNS)}")
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise _bad(where, f"missing column{'s' * (len(missing) > 1)} {', '.join(missing)}; "
                          f"required: {', '.join(REQUIRED)} and path or path_index")
    if "path" not in columns and "path_index" not in columns:
        raise _bad(where, "missing column path or path_index (how each row gives its path)")


class _Resolver:
    """Turns the cells of one row into a :class:`_Row`, with each GPU pair's candidates cached."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self._nodes: set[str] | None = None
        self._switches: dict[tuple[int, int], list[tuple[str, ...]]] = {}

    @staticmethod
    def _int(cells: dict[str, str], column: str, where: str, default: int | None = None) -> int:
        """The integer in [0, MAX_CELL] in ``column`` (``default`` when the cell is empty and one is
        given)."""
        raw = cells.get(column, "")
        if raw == "" and default is not None:
            return default
        try:
            value = int(raw) if len(raw) <= 20 else -1
        except ValueError:
            value = -1
        if not 0 <= value <= MAX_CELL:
            raise _bad(where, f"{column} must be a non-negative integer (at most {MAX_CELL:,}), "
                              f"got {shorten(raw)}")
        return value

    def row(self, cells: dict[str, str], where: str, line: str) -> _Row:
        """Parse and check one row."""
        src, dst = self._int(cells, "src", where), self._int(cells, "dst", where)
        n = self.topology.n_gpus
        for what, gpu in (("src", src), ("dst", dst)):
            if gpu >= n:
                raise _bad(where, f"{what} GPU {gpu} out of range: the fabric has GPUs 0..{n - 1}")
        conn = Connection(src, dst, self._int(cells, "channel", where), self._int(cells, "job", where, 0),
                          self._int(cells, "comm", where, 0))
        named, index = cells.get("path", ""), cells.get("path_index", "")
        if bool(named) == bool(index):
            raise _bad(where, "give exactly one of path and path_index")
        if index:
            candidates = self.topology.paths(src, dst)
            i = self._int(cells, "path_index", where)
            if i >= len(candidates):
                k = len(candidates)
                raise _bad(where, f"path_index {i} out of range: GPU {src} to GPU {dst} has {k} "
                                  f"equal-cost path{'s' * (k > 1)} (0..{k - 1})")
            path = candidates[i]
        else:
            path = self._by_names(named, src, dst, where)
        return _Row(where, line, conn, path, self._fraction(cells.get("fraction", ""), where))

    def _by_names(self, text: str, src: int, dst: int, where: str) -> tuple[int, ...]:
        """The first candidate of ``src -> dst`` whose switches are, in order, those named in ``text``."""
        names = tuple(n for n in re.split(r"[\s>]+", text) if n)
        if self._nodes is None:
            self._nodes = {data["name"] for _, data in self.topology.graph.nodes(data=True)}
        for n in names:
            if n not in self._nodes:
                raise _bad(where, f"unknown node {shorten(n)} in path {shorten('>'.join(names))[1:-1]} "
                                  "(switches are named like leaf0, spine3)")
        sequences = self._switch_names(src, dst)
        for path, seq in zip(self.topology.paths(src, dst), sequences):
            if seq == names:
                return path
        distinct = list(dict.fromkeys(">".join(s) for s in sequences))
        if distinct == [""]:
            raise _bad(where, f"GPU {src} and GPU {dst} share a host: their paths cross no fabric switch; "
                              "give path_index instead")
        shown = ", ".join(distinct[:SHOWN_CANDIDATES])
        if len(distinct) > SHOWN_CANDIDATES:
            shown += f", ... ({len(distinct)} in all)"
        raise _bad(where, f"no path {shorten('>'.join(names))[1:-1]} from GPU {src} to GPU {dst}; "
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

    @staticmethod
    def _fraction(raw: str, where: str) -> float:
        """The row's share of its connection's bytes, in (0, 1]; 1 when the cell is empty."""
        if raw == "":
            return 1.0
        try:
            value = float(raw) if len(raw) <= 64 else math.nan
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0.0 < value <= 1.0):
            raise _bad(where, f"fraction must be a number in (0, 1], got {shorten(raw)}")
        return value


def _combine(rows: list[_Row]) -> dict[Connection, Routes]:
    """Group rows by connection; reject repeated paths and fractions not summing to 1."""
    grouped: dict[Connection, list[_Row]] = {}
    for row in rows:
        group = grouped.setdefault(row.connection, [])
        for earlier in group:
            if earlier.path == row.path:
                raise _bad(row.where, f"duplicate route: connection {row.connection.label()} already takes "
                                      f"this path ({earlier.line})")
        group.append(row)
    routes: dict[Connection, Routes] = {}
    for conn, group in grouped.items():
        total = math.fsum(r.fraction for r in group)
        if abs(total - 1.0) > FRACTION_TOLERANCE:
            raise _bad(group[0].where, f"the fractions of connection {conn.label()} sum to {total:.12g} "
                                       f"({', '.join(r.line for r in group)}); they must sum to 1")
        routes[conn] = [(r.path, r.fraction) for r in group]
    return routes

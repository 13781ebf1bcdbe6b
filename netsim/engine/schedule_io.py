"""A :class:`~netsim.engine.model.Schedule` as a Parquet file, so any tool can write netsim's input.

**The format** (version 1): one Parquet file, one row per task, in task order (a task's id is its
row number from 0):

========== ============== ==========================================================================
column     type           meaning
========== ============== ==========================================================================
``kind``   string         ``send``, ``delay`` or ``join`` (any case)
``amount`` float64        bytes of a send (0 to 2**60), seconds of a delay (0 to 1e6), 0 for a join
``deps``   list<int64>    ids of the tasks this one waits for; each must be an *earlier* row
``conn``   int64          a send's connection id (a row of the connection table), -1 otherwise
========== ============== ==========================================================================

An optional ``overhead_scale`` column (float64, > 0; 1 when absent or on rows that are not sends)
gives the share of its connection's per-message overhead a send pays (a protocol's cheaper or
dearer step, as NCCL's LL and LL128 are; see ``docs/collectives.md``).

The connection table (one row per connection id: ``src``, ``dst``, ``channel``, ``job``, ``comm``,
``tcp``) is kept in the file's key-value metadata under ``netsim.connections``, as JSON of one list
per column, with ``netsim.schedule`` holding the format version. A file written by another tool may
leave out ``conn`` and the metadata and give a send's connection inline instead, in columns
``src`` and ``dst`` (and optionally ``channel``, ``job``, ``comm``, ``tcp``, 0 when empty; empty
(null) on other rows); connections then get ids in order of first appearance. ``src`` and ``dst``
are rank indices that a run maps to GPUs through its placement. Integer columns may be stored as
floating point when every value is a whole number (what pandas writes for a column with empty
cells); ``0.5`` is refused, never rounded.

Reading validates everything a run relies on, before any of it runs, and raises one
:class:`~netsim.errors.ConfigError` naming the file, the first bad row (counted from 1, as a
spreadsheet shows data rows) and the column: :data:`MAX_TASKS` and :data:`MAX_DEPENDENCIES` bound
the file's size (read from the Parquet footer, before the columns).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from netsim.engine.model import DELAY, JOIN, KIND_NAMES, SEND, ConnectionTable, Schedule
from netsim.errors import ConfigError, did_you_mean, shorten
from netsim.inputfile import at_row, read_parquet
from netsim.spectypes import MAX_COUNT, MAX_GPUS, MAX_SIZE_BYTES, MAX_TIME_S

#: Format version written into the metadata.
VERSION = "1"
_META_VERSION = b"netsim.schedule"
_META_CONNECTIONS = b"netsim.connections"
_CONN_FIELDS = ("src", "dst", "channel", "job", "comm", "tcp")
_COLUMNS = ("kind", "amount", "deps", "conn", *_CONN_FIELDS, "overhead_scale")
#: Largest ``overhead_scale`` a file may give (a message's overhead a thousand times its connection's).
MAX_OVERHEAD_SCALE = 1000.0
#: Most tasks (rows) a schedule file may hold: about 1 GB of memory to read and check.
MAX_TASKS = 10_000_000
#: Most dependencies (entries of all ``deps`` lists) a schedule file may hold.
MAX_DEPENDENCIES = 40_000_000
_DEPS_BATCH = 65_536  #: rows of ``deps`` read at a time, counting dependencies against the limit
#: Largest ``channel``, ``job`` and ``comm`` id (the experiment file's bound on counts).
MAX_CONNECTION_ID = MAX_COUNT


def write_schedule(schedule: Schedule, path: str | os.PathLike) -> Path:
    """Write ``schedule`` to the Parquet file ``path`` (see the module docstring); returns the path.

    The file is written next to its final name and renamed into place, so an interrupted write
    never leaves a partial file looking complete.

    Examples
    --------
    >>> import tempfile
    >>> from netsim.engine.model import ScheduleBuilder
    >>> b = ScheduleBuilder()
    >>> s = b.send(b.connect(0, 1), 1e6); _ = b.delay(2e-6, after=s)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     back = read_schedule(write_schedule(b.build(), f"{d}/s.parquet"))
    >>> len(back), back.deps(1).tolist(), back.connections[0].dst
    (2, [0], 1)
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    n = len(schedule)
    offsets = pa.array(schedule.dep_ptr.astype(np.int32) if schedule.dep_ptr[-1] < 2**31 else schedule.dep_ptr,
                       type=pa.int32() if schedule.dep_ptr[-1] < 2**31 else pa.int64())
    lists = (pa.ListArray if offsets.type == pa.int32() else pa.LargeListArray).from_arrays(
        offsets, pa.array(schedule.dep_idx, type=pa.int64()))
    kinds = np.asarray(KIND_NAMES, dtype=object)[schedule.kind.astype(np.int64)] if n else np.zeros(0, object)
    table = pa.table({"kind": pa.array(kinds, type=pa.string()), "amount": pa.array(schedule.amount, pa.float64()),
                      "deps": lists, "conn": pa.array(schedule.conn, pa.int64())})
    if schedule.overhead_scale is not None:
        table = table.append_column("overhead_scale", pa.array(schedule.overhead_scale, pa.float64()))
    conns = schedule.connections
    columns = {f: (conns.column(f).astype(int).tolist() if len(conns) else []) for f in _CONN_FIELDS}
    table = table.replace_schema_metadata({_META_VERSION: VERSION.encode(),
                                           _META_CONNECTIONS: json.dumps(columns, separators=(",", ":")).encode()})
    tmp = path.with_name(f".{path.name}.partial")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


def read_schedule(path: str | os.PathLike, n_ranks: int | None = None) -> Schedule:
    """The schedule in the Parquet file ``path``, validated (see the module docstring).

    ``n_ranks``, when given, bounds the connections' ``src``/``dst`` (rank indices ``0..n_ranks-1``).
    Raises one :class:`~netsim.errors.ConfigError` naming the file, the first bad row (counted from
    1) and the column: ``docs/traces.md`` lists every check.
    """
    file = str(path)
    table = _read_table(path)
    names = table.column_names
    meta = table.schema.metadata or {}
    _check_columns(names, meta, file)
    kind = _kinds(table.column("kind"), file)
    amount = _amounts(table.column("amount"), kind, file)
    dep_ptr, dep_idx = _deps(table.column("deps"), file)
    high = (n_ranks if n_ranks is not None else MAX_GPUS) - 1
    if "conn" in names:
        conn, connections = _stored_connections(table.column("conn"), kind, meta[_META_CONNECTIONS], high, file)
    else:
        conn, connections = _inline_connections(table, kind, high, file)
    _distinct_ends(connections, conn, file)
    scale = _scales(table.column("overhead_scale"), kind, file) if "overhead_scale" in names else None
    return Schedule(kind, conn, amount, dep_ptr, dep_idx, connections, scale)


def _read_table(path: str | os.PathLike):
    """The file's table, its rows counted from the Parquet footer before any column is read and its
    dependencies counted while ``deps`` is read a batch at a time (a few kB of Parquet can hold
    millions of rows or dependencies)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = str(path)
    rows = read_parquet(path, what="schedule file", columns=[]).num_rows
    names = pq.read_schema(path).names  # readable: read_parquet read it
    if rows > MAX_TASKS:
        raise ConfigError(f"{rows:,} tasks; a schedule holds at most {MAX_TASKS:,}", "", file)
    if rows == 0:
        raise ConfigError("no tasks: the schedule has no rows", "", file)
    # CORRECTNESS: not from the footer's column-chunk metadata: pyarrow 26 aborts the process (an
    # uncaught C++ exception) on a damaged chunk entry read from Python; the batch reader reports it.
    chunks, count = [], 0
    try:
        if "deps" in names:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=_DEPS_BATCH, columns=["deps"]):
                deps = batch.column(0)
                if pa.types.is_list(deps.type) or pa.types.is_large_list(deps.type):
                    count += deps.offsets[-1].as_py() - deps.offsets[0].as_py()
                    _dependency_count(count, file)
                chunks.append(deps)
        table = read_parquet(path, what="schedule file", columns=[n for n in names if n != "deps"])
        if chunks:  # (ArrowInvalid when a damaged file's deps has another length than its other columns)
            table = table.append_column("deps", pa.chunked_array(chunks, chunks[0].type))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ConfigError(f"not a readable Parquet file ({shorten(str(exc), 160)})", "", file) from None
    return table


def _dependency_count(count: int, file: str) -> None:
    if count > MAX_DEPENDENCIES:
        raise ConfigError(f"more than {MAX_DEPENDENCIES:,} dependencies; a schedule holds at most "
                          f"{MAX_DEPENDENCIES:,}", "", file)


def _check_columns(names: list[str], meta: dict, file: str) -> None:
    """Known columns only; the required ones present; connections given one way, not both."""
    unknown = [n for n in names if n not in _COLUMNS]
    if unknown:
        raise ConfigError(f"unknown column {shorten(unknown[0])}; the columns are {', '.join(_COLUMNS)}"
                          f"{did_you_mean(unknown[0], _COLUMNS)}", "", file)
    missing = [c for c in ("kind", "amount", "deps") if c not in names]
    if missing:
        raise ConfigError(f"no {', '.join(missing)} column: a schedule needs kind, amount and deps (and conn, or "
                          "src and dst, when it has sends)", "", file)
    inline = [c for c in _CONN_FIELDS if c in names]
    if "conn" in names and inline:
        raise ConfigError(f"both a conn column and {inline[0]}: give connections either as conn with the "
                          "netsim.connections metadata (what write_schedule writes) or inline as src and dst", "", file)
    if ("conn" in names) != (_META_CONNECTIONS in meta):
        has, lacks = ("a conn column", "netsim.connections metadata") if "conn" in names else \
            ("netsim.connections metadata", "conn column")
        raise ConfigError(f"{has} but no {lacks}: conn numbers the connections listed in the metadata (what "
                          "write_schedule writes); a file written by another tool gives src and dst instead", "", file)
    version = meta.get(_META_VERSION)
    if version is not None and version != VERSION.encode():
        raise ConfigError(f"schedule format version {shorten(version.decode(errors='replace'))}; this netsim reads "
                          f"version {VERSION}", "", file)


def _column(column, name: str, file: str):
    """``column`` as one Arrow array (a dictionary column decoded)."""
    import pyarrow as pa

    try:
        array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array
    except (pa.ArrowException, ValueError) as exc:
        raise ConfigError(f"cannot read the column: {shorten(str(exc), 160)}", f"column {name!r}", file) from None


def _first_null(array, name: str, file: str, what: str, rows: np.ndarray | None = None) -> None:
    """Refuse a null in ``array`` (at table row ``rows[i]``, or ``i``)."""
    if array.null_count:
        i = int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
        raise at_row(file, int(rows[i]) if rows is not None else i, name, f"empty (null); {what}")


def _kinds(column, file: str) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    array = _column(column, "kind", file)
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        raise ConfigError(f"holds {array.type} values; expected text: send, delay or join", "column 'kind'", file)
    _first_null(array, "kind", file, "expected send, delay or join")
    try:
        codes = pc.index_in(pc.utf8_lower(array), value_set=pa.array(KIND_NAMES, array.type))
    except pa.ArrowInvalid:  # damaged string data
        raise ConfigError("holds bytes that are not UTF-8 text; expected send, delay or join", "column 'kind'",
                          file) from None
    if codes.null_count:
        i = int(np.flatnonzero(codes.is_null().to_numpy(zero_copy_only=False))[0])
        raise at_row(file, i, "kind", f"unknown kind {shorten(array[i].as_py())}; valid: {', '.join(KIND_NAMES)}"
                     f"{did_you_mean(array[i].as_py(), KIND_NAMES)}")
    return codes.to_numpy(zero_copy_only=False).astype(np.int8)


def _amounts(column, kind: np.ndarray, file: str) -> np.ndarray:
    """``amount`` as float64: finite, >= 0, within its kind's limit (a join's is 0)."""
    import pyarrow as pa

    array = _column(column, "amount", file)
    if not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type)):
        raise ConfigError(f"holds {array.type} values; expected numbers (bytes of a send, seconds of a delay)",
                          "column 'amount'", file)
    _first_null(array, "amount", file, "expected bytes of a send, seconds of a delay, 0 for a join")
    amount = np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)
    high = np.array([MAX_SIZE_BYTES, MAX_TIME_S, 0.0])[kind]
    bad = np.flatnonzero(~((amount >= 0) & (amount <= high)))
    if len(bad):
        i = int(bad[0])
        allowed = {SEND: f"bytes from 0 to 2**60 ({MAX_SIZE_BYTES:.4g})", DELAY: f"seconds from 0 to {MAX_TIME_S:g}",
                   JOIN: "0: a join takes no time (use a delay)"}[int(kind[i])]
        raise at_row(file, i, "amount", f"{_shown(array[i].as_py())} for a {KIND_NAMES[kind[i]]}; allowed: {allowed}")
    return amount


def _scales(column, kind: np.ndarray, file: str) -> np.ndarray | None:
    """``overhead_scale`` as float64: finite, > 0, at most :data:`MAX_OVERHEAD_SCALE`; empty (null)
    or 1 on rows that are not sends. ``None`` when every send's is 1."""
    import pyarrow as pa

    array = _column(column, "overhead_scale", file)
    if not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type) or pa.types.is_null(array.type)):
        raise ConfigError(f"holds {array.type} values; expected numbers (the share of the connection's per-message "
                          "overhead a send pays, 1 for all of it)", "column 'overhead_scale'", file)
    values = np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)
    sends = kind == SEND
    values = np.where(np.isnan(values) & ~sends, 1.0, values)
    bad = np.flatnonzero(~((values > 0) & (values <= MAX_OVERHEAD_SCALE)) | (~sends & (values != 1.0)))
    if len(bad):
        i = int(bad[0])
        allowed = (f"a number above 0 and at most {MAX_OVERHEAD_SCALE:g}" if sends[i]
                   else "1 or empty: only a send pays a per-message overhead")
        raise at_row(file, i, "overhead_scale", f"{_shown(array[i].as_py())} for a {KIND_NAMES[kind[i]]}; "
                     f"allowed: {allowed}")
    return None if np.all(values == 1.0) else values


def _deps(column, file: str) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of the ``deps`` list column; every dependency an earlier row (so the graph has no cycle)."""
    import pyarrow as pa

    array = _column(column, "deps", file)
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        raise ConfigError(f"holds {array.type} values; expected lists of task ids (row numbers from 0)",
                          "column 'deps'", file)
    _first_null(array, "deps", file, "expected a list of task ids ([] for none)")
    n = len(array)
    lengths = np.asarray(array.value_lengths().to_numpy(zero_copy_only=False), dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    owner = np.repeat(np.arange(n, dtype=np.int32 if n < 2**31 else np.int64), lengths)
    flat = array.flatten()
    _dependency_count(len(flat), file)
    _first_null(flat, "deps", file, "a dependency must be a task id", owner)
    idx = _whole(flat, "deps", file, owner, "a task id (a row number from 0)")
    bad = np.flatnonzero((idx < 0) | (idx >= owner))
    if len(bad):
        row, dep = int(owner[bad[0]]), flat[int(bad[0])].as_py()
        what = "does not exist" if not 0 <= dep < n else "is itself" if dep == row else "comes later"
        target = f"task {_shown(dep)}" + (f" (row {dep + 1:,})" if 0 <= dep < n else "")
        raise at_row(file, row, "deps", f"depends on {target}, which {what}: a task waits only for earlier rows "
                                        "(task ids are row numbers from 0, in a topological order: no cycle)")
    return ptr, idx.astype(np.int64, copy=False)


def _whole(array, name: str, file: str, rows: np.ndarray | None, what: str, bool_ok: bool = False) -> np.ndarray:
    """The non-null Arrow ``array`` as numbers, each whole (a floating-point column is accepted when every
    value is: what pandas writes for a column with empty cells); ``rows[i]`` is value i's table row."""
    _integer_type(array, name, file, what, bool_ok)
    values = array.to_numpy(zero_copy_only=False)
    if values.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(values) | (values != np.floor(values)))
        if len(bad):
            i = int(bad[0])
            raise at_row(file, int(rows[i]) if rows is not None else i, name,
                         f"{_shown(values[i])} is not a whole number; expected {what}, an integer")
    return values


def _integer_type(array, name: str, file: str, what: str, bool_ok: bool = False) -> None:
    """Refuse a column whose type cannot hold integers (text, lists; booleans unless ``bool_ok``)."""
    import pyarrow as pa

    t = array.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or (bool_ok and pa.types.is_boolean(t))):
        raise ConfigError(f"holds {t} values; expected integers ({what})", f"column {name!r}", file)


def _integers(array, name: str, file: str, rows: np.ndarray | None, what: str, low: int, high: int,
              bool_ok: bool = False) -> np.ndarray:
    """The non-null Arrow ``array`` as int64, each a whole number in ``[low, high]``."""
    values = _whole(array, name, file, rows, what, bool_ok)
    bad = np.flatnonzero(~((values >= low) & (values <= high)))
    if len(bad):
        i = int(bad[0])
        raise at_row(file, int(rows[i]) if rows is not None else i, name,
                     f"{_shown(array[i].as_py())} is out of range: expected {what}, from {low:,} to {high:,}")
    return values.astype(np.int64, copy=False)


def _shown(value) -> str:
    """A value for a message: a whole float as an integer would read (1.0 -> 1.0), no numpy repr."""
    return shorten(value.item() if isinstance(value, np.generic) else value)


def _inline_connections(table, kind: np.ndarray, high: int, file: str) -> tuple[np.ndarray, ConnectionTable]:
    """Connection ids from inline ``src``/``dst``(/``channel``/``job``/``comm``/``tcp``) columns: set on
    sends, empty (null) on other rows; ids in order of first appearance."""
    import pyarrow as pa

    sends = np.flatnonzero(kind == SEND)
    cols = []
    for name in _CONN_FIELDS:
        if name not in table.column_names:
            if name in ("src", "dst") and len(sends):
                raise at_row(file, int(sends[0]), name, f"a send needs a {name} rank, but the file has no {name} "
                                                        "column (nor conn with the netsim.connections metadata)")
            cols.append(np.zeros(len(sends), dtype=np.int64))
            continue
        array = _column(table.column(name), name, file)
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        other = np.flatnonzero(valid & (kind != SEND))
        if len(other):
            i = int(other[0])
            raise at_row(file, i, name, f"{_shown(array[i].as_py())} on a {KIND_NAMES[kind[i]]}: only a send has a "
                                        f"connection; leave {name} empty (null) on other rows")
        what, low, high_ = _field_range(name, high)
        _integer_type(array, name, file, what, bool_ok=name == "tcp")
        picked = array.take(pa.array(sends))
        if name in ("src", "dst"):
            _first_null(picked, name, file, f"a send needs a {name} rank", sends)
        else:
            picked = picked.fill_null(False if pa.types.is_boolean(picked.type) else 0)
        cols.append(_integers(picked, name, file, sends, what, low, high_, bool_ok=name == "tcp"))
    connections = ConnectionTable()
    conn = np.full(len(kind), -1, dtype=np.int64)
    if len(sends):
        conn[sends] = connections.add(*cols)
    return conn, connections


def _field_range(name: str, high: int) -> tuple[str, int, int]:
    """(what the value is, lowest, highest) of a connection field."""
    if name in ("src", "dst"):
        return "a rank" if high == MAX_GPUS - 1 else f"a rank (the job has {high + 1:,} ranks)", 0, high
    if name == "tcp":
        return "0 or 1 (false or true)", 0, 1
    return f"a {name} id", 0, MAX_CONNECTION_ID


def _stored_connections(column, kind: np.ndarray, raw: bytes, high: int, file: str):
    """Connection ids from the ``conn`` column and the table in the ``netsim.connections`` metadata."""
    import pyarrow as pa

    connections = _connection_table(raw, high, file)
    array = _column(column, "conn", file)
    sends = kind == SEND
    what = "a connection id, or -1 on a delay or join"
    _integer_type(array, "conn", file, what)
    n_conn = len(connections)
    if pa.types.is_unsigned_integer(array.type):  # no -1 in it: any value past the table is out of range
        _integers(array.drop_null(), "conn", file, np.flatnonzero(array.is_valid().to_numpy(zero_copy_only=False)),
                  what, 0, max(n_conn - 1, 0))
        array = array.cast(pa.int64())
    filled = array.fill_null(-1) if not pa.types.is_floating(array.type) else array.fill_null(-1.0)
    conn = _integers(filled, "conn", file, None, what, -1, max(n_conn - 1, -1))
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(sends & (conn < 0))
    if len(bad):
        i = int(bad[0])
        raise at_row(file, i, "conn", f"{'empty (null)' if not valid[i] else '-1'} on a send: a send names one of "
                                      f"the {n_conn:,} connections of the netsim.connections metadata (0..{n_conn - 1})")
    bad = np.flatnonzero(~sends & (conn != -1))
    if len(bad):
        i = int(bad[0])
        raise at_row(file, i, "conn", f"{int(conn[i])} on a {KIND_NAMES[kind[i]]}: only a send has a connection; "
                                      "give -1 (or leave it empty) on other rows")
    return conn, connections


def _connection_table(raw: bytes, high: int, file: str) -> ConnectionTable:
    """The ``netsim.connections`` metadata: JSON of six equal-length lists of integers within their ranges."""
    where = "netsim.connections metadata"
    try:
        columns = json.loads(raw)
    except (ValueError, RecursionError):
        columns = None
    if not isinstance(columns, dict) or not all(isinstance(columns.get(f), list) for f in _CONN_FIELDS):
        raise ConfigError(f"the {where} must be JSON with lists {', '.join(_CONN_FIELDS)}", "", file)
    lengths = {f: len(columns[f]) for f in _CONN_FIELDS}
    if len(set(lengths.values())) > 1:
        raise ConfigError(f"the {where} lists have different lengths ({', '.join(f'{f}: {n}' for f, n in lengths.items())})",
                          "", file)
    cols = []
    for name in _CONN_FIELDS:
        what, low, top = _field_range(name, high)
        values = columns[name]
        for i, v in enumerate(values):
            whole = isinstance(v, int) and (name == "tcp" or not isinstance(v, bool))
            if not whole or not low <= v <= top:
                raise ConfigError(f"connection {i}: {name} {shorten(v)}: expected {what}, an integer from {low:,} "
                                  f"to {top:,}", where, file)
        cols.append(np.asarray(values, dtype=np.int64))
    table = ConnectionTable()
    if len(cols[0]):
        ids = table.add(*cols)
        if not np.array_equal(ids, np.arange(len(cols[0]))):
            dup = int(np.flatnonzero(ids != np.arange(len(cols[0])))[0])
            raise ConfigError(f"connection {dup} repeats connection {int(ids[dup])}", where, file)
    return table


def _distinct_ends(connections: ConnectionTable, conn: np.ndarray, file: str) -> None:
    """Refuse a connection from a rank to itself (at the first send on it)."""
    if not len(connections):
        return
    src, dst = connections.column("src"), connections.column("dst")
    same = np.flatnonzero(src == dst)
    if len(same):
        rows = np.flatnonzero(conn == same[0])
        message = f"dst is rank {int(dst[same[0]])}, the same as src: a message goes to another rank"
        if len(rows):
            raise at_row(file, int(rows[0]), "dst", message)
        raise ConfigError(f"connection {int(same[0])}: {message}", "netsim.connections metadata", file)


def ranks_of(schedule: Schedule) -> int:
    """The number of ranks a schedule's connections name (largest ``src``/``dst`` plus one; 0 if none)."""
    c = schedule.connections
    if not len(c):
        return 0
    return int(max(c.column("src").max(), c.column("dst").max())) + 1

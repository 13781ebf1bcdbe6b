"""A :class:`~netsim.engine.model.Schedule` as a Parquet file, so any tool can write netsim's input.

**The format** (version 1): one Parquet file, one row per task, in task order (a task's id is its
row number):

========== ============== ==========================================================================
column     type           meaning
========== ============== ==========================================================================
``kind``   string         ``send``, ``delay`` or ``join``
``amount`` float64        bytes of a send, seconds of a delay, 0 for a join (finite, >= 0)
``deps``   list<int64>    ids of the tasks this one waits for; each must be an *earlier* row
``conn``   int64          a send's connection id (a row of the connection table), -1 otherwise
========== ============== ==========================================================================

The connection table (one row per connection id: ``src``, ``dst``, ``channel``, ``job``, ``comm``,
``tcp``) is kept in the file's key-value metadata under ``netsim.connections``, as JSON of one list
per column, with ``netsim.schedule`` holding the format version. A file written by another tool may
leave out ``conn`` and the metadata and give a send's connection inline instead, in columns
``src`` and ``dst`` (and optionally ``channel``, ``job``, ``comm``, ``tcp``; null on other rows);
connections then get ids in order of first appearance. ``src`` and ``dst`` are rank indices that a
run maps to GPUs through its placement.

Reading validates everything a run relies on and raises one :class:`~netsim.errors.ConfigError`
naming the file and the first bad row.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from netsim.engine.model import JOIN, KIND_NAMES, SEND, ConnectionTable, Schedule
from netsim.errors import ConfigError, shorten

#: Format version written into the metadata.
VERSION = "1"
_META_VERSION = b"netsim.schedule"
_META_CONNECTIONS = b"netsim.connections"
_CONN_FIELDS = ("src", "dst", "channel", "job", "comm", "tcp")


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
    Raises :class:`~netsim.errors.ConfigError` naming the file and the first bad row: unknown kind,
    a dependency that is not an earlier task (forward, missing, itself: what a cycle needs), a
    negative or non-finite amount, a send without a valid connection, a rank out of range.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = str(path)
    if not Path(path).is_file():
        raise ConfigError("schedule file not found" if not Path(path).exists() else "not a regular file", file=file)
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise ConfigError(f"cannot read the schedule: {shorten(str(exc), 200)}", file=file) from None
    names = set(table.column_names)
    missing = [c for c in ("kind", "amount", "deps") if c not in names]
    if missing:
        raise ConfigError(f"a schedule file needs columns kind, amount, deps (and conn, or src and dst); missing "
                          f"{', '.join(missing)}", file=file)
    n = table.num_rows
    kind = _kinds(table.column("kind"), file)
    amount = _floats(table.column("amount"), "amount", file)
    dep_ptr, dep_idx = _deps(table.column("deps"), n, file)
    meta = table.schema.metadata or {}
    if "conn" in names and _META_CONNECTIONS in meta:
        conn = _ints(table.column("conn"), "conn", file, fill=-1)
        connections = _connection_table(meta[_META_CONNECTIONS], file)
    elif "src" in names and "dst" in names:
        conn, connections = _inline_connections(table, kind, file)
    else:
        raise ConfigError("the connections are missing: give a conn column with the netsim.connections metadata "
                          "(what write_schedule writes) or src and dst columns", file=file)
    schedule = Schedule(kind, conn, amount, dep_ptr, dep_idx, connections)
    _validate(schedule, file, n_ranks)
    return schedule


def _row_error(file: str, row: int, message: str) -> ConfigError:
    return ConfigError(f"row {row} (task {row}): {message}", file=file)


def _kinds(column, file: str) -> np.ndarray:
    values = column.to_pylist()
    lookup = {name: code for code, name in enumerate(KIND_NAMES)}
    out = np.empty(len(values), dtype=np.int8)
    for i, v in enumerate(values):
        code = lookup.get(v.lower() if isinstance(v, str) else v)
        if code is None:
            raise _row_error(file, i, f"unknown kind {shorten(v)}; valid: {', '.join(KIND_NAMES)}")
        out[i] = code
    return out


def _floats(column, name: str, file: str) -> np.ndarray:
    try:
        arr = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"column {name} must hold numbers", file=file) from None
    bad = np.flatnonzero(~(arr >= 0) | ~np.isfinite(arr))
    if len(bad):
        raise _row_error(file, int(bad[0]), f"{name} must be finite and >= 0, got {arr[bad[0]]!r}")
    return arr


def _ints(column, name: str, file: str, fill: int | None = None) -> np.ndarray:
    values = column.to_pylist()
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        if v is None and fill is not None:
            v = fill
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise _row_error(file, i, f"{name} must be an integer, got {shorten(v)}")
        out[i] = v
    return out


def _deps(column, n: int, file: str) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of the ``deps`` list column; every dependency an earlier row."""
    import pyarrow as pa

    chunks = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not (pa.types.is_list(chunks.type) or pa.types.is_large_list(chunks.type)) or \
            not pa.types.is_integer(chunks.type.value_type):
        raise ConfigError(f"column deps must be a list of task ids (list<int64>), got {chunks.type}", file=file)
    lengths = np.asarray(chunks.value_lengths().fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    flat = chunks.flatten()
    if flat.null_count:
        owner = np.repeat(np.arange(n), lengths)
        raise _row_error(file, int(owner[np.flatnonzero(flat.is_null().to_numpy(zero_copy_only=False))[0]]),
                         "a dependency is null")
    idx = np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.int64)
    owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
    bad = np.flatnonzero((idx < 0) | (idx >= owner))
    if len(bad):
        row, dep = int(owner[bad[0]]), int(idx[bad[0]])
        what = ("does not exist" if dep < 0 or dep >= n else "is itself" if dep == row else "comes later")
        raise _row_error(file, row, f"depends on task {dep}, which {what}: a task may only wait for earlier "
                                    "rows (tasks in a topological order, so the schedule has no cycle)")
    return ptr, idx


def _connection_table(raw: bytes, file: str) -> ConnectionTable:
    try:
        columns = json.loads(raw)
        cols = [np.asarray(columns[f], dtype=np.int64) for f in _CONN_FIELDS]
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"the netsim.connections metadata must be JSON with lists {', '.join(_CONN_FIELDS)}",
                          file=file) from None
    if len({len(c) for c in cols}) > 1:
        raise ConfigError("the netsim.connections lists have different lengths", file=file)
    table = ConnectionTable()
    if len(cols[0]):
        ids = table.add(*cols)
        if not np.array_equal(ids, np.arange(len(cols[0]))):
            dup = int(np.flatnonzero(ids != np.arange(len(cols[0])))[0])
            raise ConfigError(f"connection {dup} of the netsim.connections metadata repeats an earlier one",
                              file=file)
    return table


def _inline_connections(table, kind: np.ndarray, file: str) -> tuple[np.ndarray, ConnectionTable]:
    """Connection ids from inline ``src``/``dst``(/``channel``/``job``/``comm``/``tcp``) columns."""
    sends = np.flatnonzero(kind == SEND)
    cols = []
    for f in _CONN_FIELDS:
        if f not in table.column_names:
            cols.append(np.zeros(len(sends), dtype=np.int64))
            continue
        values = table.column(f).to_pylist()
        picked = [values[i] for i in sends.tolist()]
        for i, v in zip(sends.tolist(), picked):
            if f in ("src", "dst") and v is None or v is not None and not isinstance(v, (int, bool, np.integer)):
                raise _row_error(file, i, f"a send needs an integer {f}, got {shorten(v)}")
        cols.append(np.asarray([0 if v is None else int(v) for v in picked], dtype=np.int64))
    connections = ConnectionTable()
    conn = np.full(len(kind), -1, dtype=np.int64)
    if len(sends):
        conn[sends] = connections.add(*cols)
    return conn, connections


def _validate(s: Schedule, file: str, n_ranks: int | None) -> None:
    """Per-row checks the column readers did not make (connections of sends, ranks, amounts of joins)."""
    n_conn = len(s.connections)
    sends = s.kind == SEND
    bad = np.flatnonzero(sends & ((s.conn < 0) | (s.conn >= n_conn)))
    if len(bad):
        raise _row_error(file, int(bad[0]), f"a send names connection {int(s.conn[bad[0]])}, but the table has "
                                            f"{n_conn} (ids 0..{n_conn - 1})")
    bad = np.flatnonzero(~sends & (s.conn != -1))
    if len(bad):
        raise _row_error(file, int(bad[0]), f"a {KIND_NAMES[s.kind[bad[0]]]} names a connection (conn must be -1)")
    bad = np.flatnonzero((s.kind == JOIN) & (s.amount != 0))
    if len(bad):
        raise _row_error(file, int(bad[0]), "a join takes no time: its amount must be 0 (use a delay)")
    if n_conn:
        src, dst = s.connections.column("src"), s.connections.column("dst")
        limit = n_ranks if n_ranks is not None else np.iinfo(np.int64).max
        for name, col in (("src", src), ("dst", dst)):
            wrong = np.flatnonzero((col < 0) | (col >= limit))
            if len(wrong):
                row = int(np.flatnonzero(sends & (s.conn == wrong[0]))[0]) if np.any(s.conn == wrong[0]) else None
                where = f"row {row} (task {row}): " if row is not None else f"connection {int(wrong[0])}: "
                allowed = f"the job has {n_ranks} ranks (0..{n_ranks - 1})" if n_ranks else "ranks are >= 0"
                raise ConfigError(f"{where}{name} rank {int(col[wrong[0]])} is out of range: {allowed}", file=file)
        same = np.flatnonzero(src == dst)
        if len(same):
            raise ConfigError(f"connection {int(same[0])}: src and dst are both rank {int(src[same[0]])}", file=file)


def ranks_of(schedule: Schedule) -> int:
    """The number of ranks a schedule's connections name (largest ``src``/``dst`` plus one; 0 if none)."""
    c = schedule.connections
    if not len(c):
        return 0
    return int(max(c.column("src").max(), c.column("dst").max())) + 1

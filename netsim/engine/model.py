"""The engine's shared data types: connections, task schedules and route tables, all as arrays.

Workloads compile to a :class:`Schedule` (built by ``collectives/`` and ``workload/`` with a
:class:`ScheduleBuilder`), routing policies describe each connection's paths as a
:class:`RouteTable`, and an executor (:class:`~netsim.engine.fabric.Fabric`) runs the schedule on
the network. Nothing here simulates anything.

**A schedule** is a DAG of tasks in columns (one row per task, never an object per task):

* ``SEND``: ``amount`` bytes on connection ``conn``. Released when all its dependencies are done,
  it is posted on its connection; messages of one connection are transmitted in the order they
  are posted (FIFO, like the work requests of an RDMA queue pair; messages posted at the same
  instant go in task order). Done when its last byte has arrived at the receiver: drained, plus
  the path's latency and the per-message overhead (times the message's ``overhead_scale``, 1
  unless set: a protocol whose steps cost less or more than the connection's usual message).
* ``DELAY``: done ``amount`` seconds after it is released (computation, a start offset).
* ``JOIN``: done when released (a marker: a call's start or end, a rendezvous).

Dependencies are a CSR over predecessors: the dependencies of task ``i`` are
``dep_idx[dep_ptr[i]:dep_ptr[i + 1]]``; a task with none is released when the schedule starts.
Task ids in a built schedule are row numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

SEND, DELAY, JOIN = 0, 1, 2
KIND_NAMES = ("send", "delay", "join")


class Connection(NamedTuple):
    """A persistent connection (an RDMA queue pair): it keeps its path(s) for its lifetime."""

    src: int
    dst: int
    channel: int = 0
    job: int = 0
    comm: int = 0  #: communicator within the job: concurrent communicators own separate queue pairs
    tcp: bool = False  #: the communicator mixes NIC families: TCP over the hosts' Ethernet NICs (Holmes's rule)

    def label(self) -> str:
        """Compact text form used in results (``src>dst#channel``; job/communicator prefixes when non-zero)."""
        base = f"{self.src}>{self.dst}#{self.channel}" + ("/tcp" if self.tcp else "")
        if self.comm:
            base = f"c{self.comm}:{base}"
        return f"j{self.job}:{base}" if self.job else base

    def hash_key(self) -> tuple[int, ...]:
        """The integers a hashing policy mixes: ``comm`` only when non-zero, so adding it left every
        existing single-communicator hash (and so every ECMP collision pattern) unchanged. ``tcp``
        is left out: a TCP connection's candidate paths are different ones anyway."""
        return tuple(self)[:5] if self.comm else tuple(self)[:4]


_FIELDS = ("src", "dst", "channel", "job", "comm", "tcp")


class ConnectionTable:
    """Distinct connections as columns (``src``, ``dst``, ``channel``, ``job``, ``comm``, ``tcp``),
    each with a dense id in order of first appearance.

    Examples
    --------
    >>> t = ConnectionTable()
    >>> t.add([0, 1, 0], [1, 2, 1]).tolist(), len(t), t[1]
    ([0, 1, 0], 2, Connection(src=1, dst=2, channel=0, job=0, comm=0, tcp=False))
    """

    def __init__(self) -> None:
        self._ids: dict[tuple, int] | None = {}
        self._cols: list[list[int]] = [[] for _ in _FIELDS]
        self._arrays: dict[str, np.ndarray] | None = None

    def add(self, src, dst, channel=0, job=0, comm=0, tcp=False) -> np.ndarray:
        """Ids of the connections given column-wise (scalars broadcast), adding the new ones."""
        cols = np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, dtype=np.int64)) for v in
                                     (src, dst, channel, job, comm, tcp)))
        if not len(self) and len(cols[0]) > 64:
            return self._first(np.stack(cols, axis=1))
        out = np.empty(len(cols[0]), dtype=np.int64)
        ids, store = self._index(), self._cols
        for i, key in enumerate(zip(*(c.tolist() for c in cols))):
            got = ids.get(key)
            if got is None:
                got = ids[key] = len(ids)
                for column, value in zip(store, key):
                    column.append(value)
            out[i] = got
        return out

    def _first(self, rows: np.ndarray) -> np.ndarray:
        """``add`` into an empty table, in numpy: ids in order of first appearance, as the loop gives.

        perf: rows sorted by one stable ``lexsort`` (``np.unique(axis=0)`` sorts them as opaque records,
        3x slower), and the id dictionary built only when a later ``add`` needs it (an all-to-all-v
        call's schedule maps its 4,032 connections once: 3,712 calls in ``moe-deepseek-1024-m16``)."""
        order = np.lexsort(rows.T[::-1])  # stable: a group's first row in sorted order is its first one
        ordered = rows[order]
        new = np.ones(len(rows), dtype=bool)
        new[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
        first = order[new]                # per distinct row (in sorted order): where it first appears
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        ids = np.empty(len(rows), dtype=np.int64)
        ids[order] = rank[np.cumsum(new) - 1]
        self._cols = [column.tolist() for column in rows[np.sort(first)].T]
        self._ids = None
        self._arrays = None
        return ids

    def _index(self) -> dict[tuple, int]:
        """Connection -> id (built on first use after :meth:`_first`)."""
        if self._ids is None:
            self._ids = dict(zip(zip(*self._cols), range(len(self._cols[0]))))
        return self._ids

    def __len__(self) -> int:
        return len(self._cols[0])

    def __getitem__(self, i: int) -> Connection:
        src, dst, channel, job, comm, tcp = (column[i] for column in self._cols)
        return Connection(src, dst, channel, job, comm, bool(tcp))

    def column(self, name: str) -> np.ndarray:
        """One column as an array (``tcp`` as bool)."""
        n = len(self)
        if self._arrays is None or self._arrays["_n"] != n:
            self._arrays = self._extended(n)
        return self._arrays[name][:n]

    def _extended(self, n: int) -> dict:
        """The column arrays grown to ``n`` rows: only rows added since the last call are converted,
        into arrays of doubling capacity (perf: adding one connection at a time used to rebuild every
        column, quadratic in connections)."""
        old = self._arrays
        have = old["_n"] if old is not None and old["_n"] <= n else 0
        cap = old[_FIELDS[0]].shape[0] if have else 0
        out = {"_n": n}
        for f, c in zip(_FIELDS, self._cols):
            arr = old[f] if have else None
            if n > cap or arr is None:  # (an empty table has no arrays yet)
                grown = np.empty(max(n, 2 * cap, 64), dtype=bool if f == "tcp" else np.int64)
                if have:
                    grown[:have] = arr[:have]
                arr = grown
            arr[have:n] = c[have:n]
            out[f] = arr
        return out

    @property
    def src(self) -> np.ndarray:
        return self.column("src")

    @property
    def dst(self) -> np.ndarray:
        return self.column("dst")

    def labels(self) -> np.ndarray:
        """:meth:`Connection.label` of every connection, by id (an object array, built column-wise).

        >>> t = ConnectionTable()
        >>> _ = t.add([0, 3], [1, 2], channel=[0, 1], job=[0, 2], comm=[0, 1], tcp=[False, True])
        >>> t.labels().tolist() == [t[0].label(), t[1].label()]
        True
        """
        if not len(self):
            return np.zeros(0, dtype=object)
        cols = {f: self.column(f) for f in _FIELDS}
        text = (cols["src"].astype(str).astype(object) + ">" + cols["dst"].astype(str).astype(object) + "#"
                + cols["channel"].astype(str).astype(object) + np.where(cols["tcp"], "/tcp", "").astype(object))
        text = np.where(cols["comm"] != 0, "c" + cols["comm"].astype(str).astype(object) + ":" + text, text)
        return np.where(cols["job"] != 0, "j" + cols["job"].astype(str).astype(object) + ":" + text, text)

    def connections(self) -> list[Connection]:
        """Every connection, by id."""
        return [self[i] for i in range(len(self))]


class ConnectionRows:
    """Rows ``rows`` of a :class:`ConnectionTable`, as a batch for a routing policy (its columns
    without copying the table; Connection objects only when asked)."""

    def __init__(self, table: ConnectionTable, rows) -> None:
        self.table = table
        self.rows = np.asarray(rows, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, k: int) -> Connection:
        return self.table[int(self.rows[k])]

    def __iter__(self):
        return iter(self.connections())

    def column(self, name: str) -> np.ndarray:
        """One column of the rows (``tcp`` as bool)."""
        return self.table.column(name)[self.rows]

    def connections(self) -> list[Connection]:
        """The rows as Connection objects, in order."""
        return [self.table[i] for i in self.rows.tolist()]


class Deps(NamedTuple):
    """Dependencies of a batch of tasks as a CSR: task ``k`` of the batch depends on
    ``idx[ptr[k]:ptr[k + 1]]`` (task ids)."""

    ptr: np.ndarray
    idx: np.ndarray

    @classmethod
    def ragged(cls, lists: Sequence[Sequence[int]]) -> Deps:
        """From one list of predecessors per task."""
        counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        ptr = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        idx = np.fromiter((d for x in lists for d in x), dtype=np.int64, count=int(ptr[-1]))
        return cls(ptr, idx)


def _as_deps(after, n: int) -> Deps:
    """Normalise ``after`` (see :meth:`ScheduleBuilder.send`) to a CSR for ``n`` tasks."""
    if after is None:
        return Deps(np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    if isinstance(after, Deps):
        if len(after.ptr) != n + 1:
            raise ValueError(f"dependencies for {len(after.ptr) - 1} tasks given to {n} tasks")
        return Deps(np.asarray(after.ptr, dtype=np.int64), np.asarray(after.idx, dtype=np.int64))
    if isinstance(after, (int, np.integer)):
        one = np.full(n, int(after), dtype=np.int64)
    else:
        arr = np.asarray(after)
        if arr.dtype == object or arr.ndim != 1:
            return Deps.ragged(list(after)) if len(after) == n else _bad(after, n)
        one = arr.astype(np.int64)
        if len(one) != n:
            _bad(after, n)
    has = one >= 0
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(has, out=ptr[1:])
    return Deps(ptr, one[has])


def _bad(after, n):
    raise ValueError(f"'after' must give one predecessor (or -1) per task, or one list per task: "
                     f"{len(after)} given for {n} tasks")


@dataclass
class ScheduleBuilder:
    """Appends tasks in bulk and builds a :class:`Schedule`.

    Every method takes arrays (or scalars, broadcast to ``n``) and returns the new tasks' ids.
    ``after`` gives the dependencies: ``None`` (none), a task id (all depend on it), an array with
    one predecessor per task (``-1``: none), one list of predecessors per task, or a :class:`Deps`.

    Examples
    --------
    >>> b = ScheduleBuilder()
    >>> c = b.connect([0, 1], [1, 0])                  # two connections
    >>> first = b.send(c, 1e6)                          # both at once
    >>> reply = b.send(c[::-1], 1e6, after=first)       # each answers the message it received
    >>> end = b.join(after=[reply.tolist()])
    >>> s = b.build(); len(s), s.n_sends, s.deps(int(end[0])).tolist()
    (5, 4, [2, 3])
    """

    connections: ConnectionTable = field(default_factory=ConnectionTable)
    _kind: list[np.ndarray] = field(default_factory=list)
    _conn: list[np.ndarray] = field(default_factory=list)
    _amount: list[np.ndarray] = field(default_factory=list)
    _counts: list[np.ndarray] = field(default_factory=list)
    _idx: list[np.ndarray] = field(default_factory=list)
    _scaled: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    n_tasks: int = 0

    def connect(self, src, dst, channel=0, job=0, comm=0, tcp=False) -> np.ndarray:
        """Connection ids (see :class:`ConnectionTable`)."""
        return self.connections.add(src, dst, channel, job, comm, tcp)

    def _append(self, kind: int, conn, amount, after, n: int | None = None) -> np.ndarray:
        if n is None:
            n = max(np.size(conn), np.size(amount), 1)
        deps = _as_deps(after, n)
        conn_arr = np.broadcast_to(np.asarray(conn, dtype=np.int64), (n,)).copy()
        amount_arr = np.broadcast_to(np.asarray(amount, dtype=np.float64), (n,)).copy()
        if len(deps.idx) and (deps.idx.min() < 0 or deps.idx.max() >= self.n_tasks + n):
            raise ValueError("a dependency names a task that does not exist")
        first = self.n_tasks
        self._kind.append(np.full(n, kind, dtype=np.int8))
        self._conn.append(conn_arr)
        self._amount.append(amount_arr)
        self._counts.append(np.diff(deps.ptr))
        self._idx.append(deps.idx)
        self.n_tasks += n
        return np.arange(first, first + n, dtype=np.int64)

    def send(self, conn, size_bytes, after=None) -> np.ndarray:
        """Messages of ``size_bytes`` on connections ``conn``."""
        sizes = np.asarray(size_bytes, dtype=np.float64)
        if np.any(~(sizes >= 0)):
            raise ValueError("message sizes must be finite and >= 0")
        return self._append(SEND, conn, sizes, after)

    def sends_since(self, first: int) -> tuple[np.ndarray, np.ndarray]:
        """The SEND tasks appended from task ``first`` on: (their ids, their connections)."""
        kinds, conns, at = [], [], self.n_tasks
        for kind, conn in zip(reversed(self._kind), reversed(self._conn)):
            if at <= first:
                break
            at -= len(kind)
            kinds.append(kind)
            conns.append(conn)
        kind = np.concatenate(kinds[::-1]) if kinds else np.zeros(0, np.int8)
        conn = np.concatenate(conns[::-1]) if conns else np.zeros(0, np.int64)
        keep = np.flatnonzero(kind[first - at:] == SEND) + (first - at)
        return keep + at, conn[keep]

    def scale_overheads(self, tasks, factor) -> None:
        """Messages ``tasks`` pay ``factor`` times their connection's per-message overhead (``factor``:
        one per task or a scalar; finite and > 0). Other tasks' factors are ignored."""
        tasks = np.asarray(tasks, dtype=np.int64).ravel()
        factor = np.broadcast_to(np.asarray(factor, dtype=np.float64), tasks.shape).copy()
        if np.any(~(factor > 0)) or np.any(~np.isfinite(factor)):
            raise ValueError("overhead scales must be finite and > 0")
        if len(tasks) and (tasks.min() < 0 or tasks.max() >= self.n_tasks):
            raise ValueError("an overhead scale names a task that does not exist")
        self._scaled.append((tasks, factor))

    def delay(self, seconds, after=None) -> np.ndarray:
        """Waits of ``seconds`` (computation, start offsets)."""
        return self._append(DELAY, -1, seconds, after, n=np.size(seconds) if np.ndim(seconds) else None)

    def join(self, after=None, n: int | None = None) -> np.ndarray:
        """Markers done when their dependencies are (``n`` of them; default: one per entry of ``after``,
        or one when ``after`` is a single id or None)."""
        if n is None:
            n = 1 if after is None or isinstance(after, (int, np.integer)) else \
                (len(after.ptr) - 1 if isinstance(after, Deps) else len(after))
        return self._append(JOIN, -1, 0.0, after, n=n)

    def extend(self, kind, conn, amount, after: Deps) -> np.ndarray:
        """Tasks of mixed kinds at once (``kind``, ``conn``, ``amount`` one per task; ``after`` a
        :class:`Deps` over them), as the typed methods would append them one kind at a time."""
        kind = np.asarray(kind, dtype=np.int8)
        n = len(kind)
        if len(after.ptr) != n + 1:
            raise ValueError(f"dependencies for {len(after.ptr) - 1} tasks given to {n} tasks")
        if len(after.idx) and (after.idx.min() < 0 or after.idx.max() >= self.n_tasks + n):
            raise ValueError("a dependency names a task that does not exist")
        first = self.n_tasks
        self._kind.append(kind)
        self._conn.append(np.asarray(conn, dtype=np.int64))
        self._amount.append(np.asarray(amount, dtype=np.float64))
        self._counts.append(np.diff(after.ptr))
        self._idx.append(np.asarray(after.idx, dtype=np.int64))
        self.n_tasks += n
        return np.arange(first, first + n, dtype=np.int64)

    def build(self) -> Schedule:
        """The schedule of everything appended so far."""
        cat = (lambda parts, dtype: np.concatenate(parts) if parts else np.zeros(0, dtype=dtype))
        counts = cat(self._counts, np.int64)
        ptr = np.zeros(self.n_tasks + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        kind = cat(self._kind, np.int8)
        scale = None
        if self._scaled:
            scale = np.ones(self.n_tasks)
            for tasks, factor in self._scaled:
                scale[tasks] = factor
            scale[kind != SEND] = 1.0
            if np.all(scale == 1.0):
                scale = None
        return Schedule(kind, cat(self._conn, np.int64), cat(self._amount, np.float64), ptr,
                        cat(self._idx, np.int64), self.connections, scale)


@dataclass(frozen=True)
class Schedule:
    """A task DAG in columns (see the module docstring)."""

    kind: np.ndarray      #: int8: SEND, DELAY or JOIN
    conn: np.ndarray      #: int64: connection id of a SEND, -1 otherwise
    amount: np.ndarray    #: float64: bytes of a SEND, seconds of a DELAY, 0 for a JOIN
    dep_ptr: np.ndarray   #: int64, n + 1
    dep_idx: np.ndarray   #: int64
    connections: ConnectionTable
    #: float64 per task: the share of its connection's per-message overhead a SEND pays (``None``: 1)
    overhead_scale: np.ndarray | None = None

    def extra_delay_s(self, overhead_s: np.ndarray) -> np.ndarray:
        """Per task, what its overhead scale adds to its message's delay, given per task its
        connection's per-message overhead ``overhead_s``: ``(scale - 1) x overhead``, 0 where the
        scale is 1 (so a delay plus it is the delay itself, bit for bit)."""
        out = np.zeros(len(self))
        if self.overhead_scale is not None:
            hit = np.flatnonzero((self.overhead_scale != 1.0) & (self.kind == SEND))
            out[hit] = (self.overhead_scale[hit] - 1.0) * overhead_s[hit]
        return out

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def n_sends(self) -> int:
        """Number of messages."""
        return int((self.kind == SEND).sum())

    def deps(self, task: int) -> np.ndarray:
        """The dependencies of ``task``."""
        return self.dep_idx[self.dep_ptr[task]:self.dep_ptr[task + 1]]

    def successors(self) -> tuple[np.ndarray, np.ndarray]:
        """The reverse CSR: task ``i``'s successors are ``idx[ptr[i]:ptr[i + 1]]``, in task order
        (computed once: a schedule run many times, as a training job's repeated calls, reuses it)."""
        hit = self.__dict__.get("_successors")
        if hit is None:
            hit = self._successors_of()
            object.__setattr__(self, "_successors", hit)
        return hit

    def _successors_of(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self)
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.dep_ptr))
        order = np.lexsort((owner, self.dep_idx))
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.dep_idx, minlength=n), out=ptr[1:])
        return ptr, owner[order]

    def check(self) -> None:
        """ValueError unless every dependency points to an earlier task (so the DAG has no cycle)."""
        if self.__dict__.get("_checked") == len(self.connections):
            return
        owner = np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.dep_ptr))
        if len(owner) and np.any(self.dep_idx >= owner):
            raise ValueError("a task depends on itself or on a later task")
        sends = self.kind == SEND
        if np.any(self.conn[sends] < 0) or np.any(self.conn[sends] >= len(self.connections)):
            raise ValueError("a send names no connection")
        object.__setattr__(self, "_checked", len(self.connections))


@dataclass(frozen=True)
class RouteTable:
    """Routes of a set of connections: each connection's pieces (sub-flows with their own rate) and
    each piece's links with the share of the piece's bytes each carries.

    Connection ``i`` has pieces ``conn_ptr[i]:conn_ptr[i + 1]``; piece ``p`` carries ``frac[p]`` of
    every message (fractions of a connection sum to 1), arrives ``delay[p]`` after draining
    (latency of its slowest path plus the per-message overhead), spreads over ``n_paths[p]`` equal-cost
    paths and crosses links ``link[link_ptr[p]:link_ptr[p + 1]]`` with ``weight`` (the share of the
    piece's bytes on that link: 1 on a single path, 1/k on each of k sprayed paths).
    """

    conn_ptr: np.ndarray
    frac: np.ndarray
    delay: np.ndarray
    n_paths: np.ndarray
    link_ptr: np.ndarray
    link: np.ndarray
    weight: np.ndarray

    def __len__(self) -> int:
        return len(self.conn_ptr) - 1

    def pieces(self, conn: int) -> range:
        """The piece ids of connection ``conn``."""
        return range(int(self.conn_ptr[conn]), int(self.conn_ptr[conn + 1]))

    def links(self, piece: int) -> tuple[np.ndarray, np.ndarray]:
        """(links, weights) of ``piece``."""
        a, b = self.link_ptr[piece], self.link_ptr[piece + 1]
        return self.link[a:b], self.weight[a:b]

"""Schedule fragments: the tasks of one call built once, then appended in bulk for many groups.

A training iteration repeats the same call shape thousands of times (every micro-batch's TP
allreduce on every replica's host): a :class:`Fragment` records the call once over placeholder
ranks ``0..n-1``, and :func:`append_fragments` appends ``k`` copies of it to a
:class:`~netsim.engine.model.ScheduleBuilder` in a few numpy operations, each copy on its own
connections and starting per rank after its own task. A copy is the same tasks, in the same order,
with the same dependencies as building the call again would append (``tests/test_iteration.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from netsim.engine.model import SEND, Deps, ScheduleBuilder


@dataclass(frozen=True)
class Fragment:
    """One call's tasks over ``n_ranks`` placeholder ranks.

    Task ``i`` has kind ``kind[i]``, ``amount[i]`` and, for a send, the fragment connection
    ``conn[i]``; its dependencies are ``dep_idx[dep_ptr[i]:dep_ptr[i + 1]]``, where an entry
    ``d >= 0`` is task ``d`` of the fragment and ``d < 0`` is "rank ``-d - 1`` is ready". The
    fragment's connections are ``(src, dst, channel, tcp)`` with ``src``/``dst`` placeholder GPUs.
    ``sinks`` are the tasks nothing in the fragment waits for: the call is done when they are.
    """

    n_ranks: int
    kind: np.ndarray
    conn: np.ndarray
    amount: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    conn_src: np.ndarray
    conn_dst: np.ndarray
    conn_channel: np.ndarray
    conn_tcp: np.ndarray
    sinks: np.ndarray
    #: per task, the share of its connection's per-message overhead a SEND pays (``None``: 1 for all)
    scale: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.kind)

    @classmethod
    def record(cls, n_ranks: int, build: Callable[[ScheduleBuilder, np.ndarray], object]) -> Fragment:
        """The fragment ``build(b, ready)`` appends, where ``ready`` holds one placeholder task per rank."""
        b = ScheduleBuilder()
        ready = b.join(n=n_ranks)
        build(b, ready)
        s = b.build()
        body = slice(n_ranks, len(s))
        ptr = s.dep_ptr[n_ranks:] - s.dep_ptr[n_ranks]
        idx = s.dep_idx[s.dep_ptr[n_ranks]:]
        idx = np.where(idx < n_ranks, -idx - 1, idx - n_ranks)
        m = len(s) - n_ranks
        has_succ = np.zeros(m, dtype=bool)
        has_succ[idx[idx >= 0]] = True
        c = s.connections
        scale = s.overhead_scale[body].copy() if s.overhead_scale is not None else None
        return cls(n_ranks, s.kind[body].copy(), s.conn[body].copy(), s.amount[body].copy(), ptr, idx,
                   c.column("src").copy(), c.column("dst").copy(), c.column("channel").copy(),
                   c.column("tcp").copy(), np.flatnonzero(~has_succ), scale)


def append_fragments(b: ScheduleBuilder, frag: Fragment, ready: np.ndarray, conn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Append ``k`` copies of ``frag``: copy ``j`` waits per rank ``r`` for task ``ready[j, r]`` (``-1``:
    nothing) and sends on connection ``conn[j, c]`` of ``b`` where the fragment uses its connection ``c``.

    Returns ``(first, done)``: per copy, its first task id and a JOIN after its sinks (the call's end).
    """
    ready = np.asarray(ready, dtype=np.int64).reshape(-1, frag.n_ranks)
    k, m = ready.shape[0], len(frag)
    if m == 0:  # nothing to do: the call ends when its ranks are ready
        first = np.full(k, b.n_tasks, dtype=np.int64)
        return first, b.join(after=[[t for t in row if t >= 0] for row in ready.tolist()], n=k)
    first = b.n_tasks + m * np.arange(k, dtype=np.int64)
    # each copy's dependencies: fragment tasks shifted to the copy, ready placeholders replaced (or dropped)
    dep = frag.dep_idx
    mapped = np.where(dep < 0, ready[:, np.clip(-dep - 1, 0, None)], dep + first[:, None])
    keep = mapped >= 0
    seen = np.zeros((k, len(dep) + 1), dtype=np.int64)
    np.cumsum(keep, axis=1, out=seen[:, 1:])
    kept = seen[:, frag.dep_ptr[1:]] - seen[:, frag.dep_ptr[:-1]]
    ptr = np.zeros(k * m + 1, dtype=np.int64)
    np.cumsum(kept.ravel(), out=ptr[1:])
    conn = np.asarray(conn, dtype=np.int64).reshape(k, -1)
    sends = frag.kind == SEND
    task_conn = np.full((k, m), -1, dtype=np.int64)
    task_conn[:, sends] = conn[:, frag.conn[sends]]
    b.extend(np.tile(frag.kind, k), task_conn.ravel(), np.tile(frag.amount, k), Deps(ptr, mapped[keep]))
    if frag.scale is not None:
        scaled = np.flatnonzero(frag.scale != 1.0)
        b.scale_overheads((first[:, None] + scaled[None, :]).ravel(), np.tile(frag.scale[scaled], k))
    n_sinks = len(frag.sinks)
    sinks = first[:, None] + frag.sinks[None, :]
    done = b.join(after=Deps(np.arange(0, k * n_sinks + 1, n_sinks, dtype=np.int64), sinks.ravel()), n=k)
    return first, done

"""Ring collectives as schedule builders: rings of steps (reduce-scatter, allgather, allreduce) and
pipelined chains (broadcast, reduce)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netsim.collectives.base import deps, end_of, per_rank, register_algorithm
from netsim.collectives.nccl import rail_ring
from netsim.engine.model import ScheduleBuilder


def channel_ring(gpus: Sequence[int], gpu_host: Sequence[int] | None, channel: int,
                 gpu_rail: Sequence[int] | None = None) -> list[int]:
    """The ring order of ``channel``: with ``gpu_rail`` (the NCCL model), on rails
    (:func:`netsim.collectives.nccl.rail_ring`); without, each host's run of consecutive ranks
    rotated by ``channel`` (the fluid model's order).

    Rotating where a ring enters and leaves each host makes channel c cross hosts between
    different GPUs, hence (with GPU i on NIC i mod nics) through different NICs, as NCCL spreads
    its channels over a node's NICs. Single-GPU hosts (and ``gpu_host=None``) and channel 0 keep
    the rank order.

    Examples
    --------
    >>> channel_ring([0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 1, 1], 1)
    [1, 2, 0, 4, 5, 3]
    """
    if gpu_host is None:
        return list(gpus)
    if gpu_rail is not None:
        return rail_ring(gpus, gpu_host, gpu_rail, channel)
    order: list[int] = []
    start = 0
    for i in range(1, len(gpus) + 1):
        if i == len(gpus) or gpu_host[gpus[i]] != gpu_host[gpus[start]]:
            run = list(gpus[start:i])
            k = channel % len(run)
            order.extend(run[k:] + run[:k])
            start = i
    return order


def _layout(gpus: Sequence[int], size_bytes: float, channels: int, chunk_bytes: float | None,
            gpu_host: Sequence[int] | None, gpu_rail: Sequence[int] | None = None) -> tuple[float, int, list[list[int]]]:
    """(a step's piece per rank and channel, slices per step, each channel's ring order)."""
    piece = size_bytes / (len(gpus) * channels)
    chunks = max(1, math.ceil(piece / chunk_bytes)) if chunk_bytes else 1
    return piece, chunks, [channel_ring(gpus, gpu_host, c, gpu_rail) for c in range(channels)]


def ring_steps(b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, steps: int, *, channels: int = 1,
               job: int = 0, comm: int = 0, chunk_bytes: float | None = None, tcp: bool = False,
               ready: int | np.ndarray | None = None, gpu_host: Sequence[int] | None = None,
               channel_base: int = 0, gpu_rail: Sequence[int] | None = None) -> np.ndarray:
    """Append ``steps`` ring steps of ``size_bytes / (n * channels)`` per rank on each channel; per
    rank (``gpus`` order), the end of its part.

    Channel c runs over :func:`channel_ring` order c on connections of channel ``channel_base + c``;
    rank r sends to r + 1. Step k's piece goes as C slices of ``chunk_bytes`` (one without it), and
    slice j of step k leaves rank r once slice j of step k - 1 from r - 1 has arrived (and r is
    ``ready``): NCCL's pipelining, and what a rank's program waited for. A rank is done when the
    last step's slices have arrived on every channel. Tasks are appended step by step, then
    channel, rank and slice, so each connection's messages come in the order its rank posts them.
    """
    n = len(gpus)
    ready = per_rank(ready, n)
    if n < 2 or steps < 1:
        return ready
    piece, chunks, orders = _layout(gpus, size_bytes, channels, chunk_bytes, gpu_host, gpu_rail)
    order = np.array(orders, dtype=np.int64)                       # (channel, position) -> GPU
    rank_of = {g: i for i, g in enumerate(gpus)}
    rank = np.array([[rank_of[g] for g in o] for o in orders], dtype=np.int64)  # (channel, position) -> rank
    conn = b.connect(order.ravel(), np.roll(order, -1, axis=1).ravel(),
                     np.repeat(channel_base + np.arange(channels), n), job, comm, tcp).reshape(channels, n)
    shape = (steps, channels, n, chunks)
    # Message (k, c, r, j) is task first + ((k channels + c) n + r) chunks + j; it waits for slice j
    # of step k - 1 from r - 1 (perf: written in place, no array of every id: 2M+ messages).
    first, per_step = b.n_tasks, channels * n * chunks
    behind = (np.arange(channels)[:, None] * n + np.roll(np.arange(n), 1)[None, :]) * chunks  # (c, r - 1)
    prev = np.full(shape, -1, dtype=np.int64)
    prev[1:] = (first + per_step * np.arange(steps - 1))[:, None, None, None]
    prev[1:] += behind[None, :, :, None]
    prev[1:] += np.arange(chunks)
    conns = np.broadcast_to(conn[None, :, :, None], shape).ravel()
    if (ready < 0).all():
        b.send(conns, piece / chunks, after=prev.ravel())
    else:
        gate = np.broadcast_to(ready[rank][None, :, :, None], shape)
        b.send(conns, piece / chunks, after=deps(prev.ravel(), gate.ravel()))
    arrived = first + per_step * (steps - 1) + behind[:, :, None] + np.arange(chunks)  # (c, receiving r, slice)
    position = np.argsort(rank, axis=1)                            # (channel, rank) -> position
    last = np.stack([arrived[c, position[c]] for c in range(channels)], axis=1).reshape(n, channels * chunks)
    return end_of(b, last, ready)


@register_algorithm("ring", "allreduce")
def ring_allreduce(b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, **kw) -> np.ndarray:
    """Ring allreduce: reduce-scatter then allgather, 2(n-1) steps of M/n per rank (:func:`ring_steps`).

    With ``channels`` > 1 the buffer is split over that many parallel rings, each on its own
    connections (its own ECMP hash) and leaving each host through its own GPU/NIC
    (:func:`channel_ring`), as NCCL does. On a non-blocking fabric the time is
    ``2(n-1)(alpha + M/(n B))``. With ``chunk_bytes`` each step's piece p = M/(n C) goes as C
    slices that pipeline across steps: ``(S-1) max(C p/B, p/B + alpha) + C p/B + alpha`` for
    S = 2(n-1) steps, so a large enough C pays alpha about once instead of S times.

    Examples
    --------
    >>> b = ScheduleBuilder()
    >>> ends = ring_allreduce(b, [0, 1, 2, 3], 4e9)
    >>> s = b.build(); s.n_sends, set(s.amount[s.kind == 0].tolist()), len(ends)
    (24, {1000000000.0}, 4)
    """
    return ring_steps(b, gpus, size_bytes, 2 * (len(gpus) - 1), **kw)


@register_algorithm("ring", "reduce_scatter")
def ring_reduce_scatter(b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, **kw) -> np.ndarray:
    """Ring reduce-scatter of a per-rank input of ``size_bytes``: n-1 steps of M/n per rank.

    Non-blocking time ``(n-1)(alpha + M/(n B))`` (slices: as :func:`ring_allreduce` with S = n-1).
    """
    return ring_steps(b, gpus, size_bytes, len(gpus) - 1, **kw)


@register_algorithm("ring", "allgather")
def ring_allgather(b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, **kw) -> np.ndarray:
    """Ring allgather of a per-rank output of ``size_bytes``: n-1 steps of M/n per rank.

    Non-blocking time ``(n-1)(alpha + M/(n B))`` (slices: as :func:`ring_allreduce` with S = n-1).
    """
    return ring_steps(b, gpus, size_bytes, len(gpus) - 1, **kw)


def chain(b: ScheduleBuilder, order: Sequence[int], size_bytes: float, *, channels: int = 1, job: int = 0,
          comm: int = 0, chunk_bytes: float | None = None, tcp: bool = False,
          ready: int | np.ndarray | None = None) -> np.ndarray:
    """Pipelined chain ``order[0] -> order[1] -> ...``: the buffer cut into chunks, each forwarded on
    arrival; per position of ``order``, the end of its part (``ready`` per position too).

    With ``C`` chunks of ``M/C`` and per-hop ``alpha`` (latency + overhead, paid after a chunk
    drains; the next chunk on the connection starts at once), the time on a non-blocking fabric is
    ``(C + n - 2) M/(C B) + (n - 1) alpha``: more chunks move it toward ``M/B``. ``channels``
    splits the buffer over parallel chains (own connections, channel c).
    """
    n = len(order)
    ready = per_rank(ready, n)
    if n < 2:
        return ready
    per_channel = size_bytes / channels
    chunks = max(1, math.ceil(per_channel / chunk_bytes)) if chunk_bytes else 1
    src = np.repeat(np.asarray(order[:-1], dtype=np.int64), channels)
    dst = np.repeat(np.asarray(order[1:], dtype=np.int64), channels)
    conn = b.connect(src, dst, np.tile(np.arange(channels), n - 1), job, comm, tcp).reshape(n - 1, channels)
    shape = (n - 1, channels, chunks)
    ids = np.arange(b.n_tasks, b.n_tasks + math.prod(shape), dtype=np.int64).reshape(shape)
    prev = np.full(shape, -1, dtype=np.int64)
    prev[1:] = ids[:-1]                                             # the chunk's arrival from the previous hop
    gate = np.broadcast_to(ready[:-1, None, None], shape)
    b.send(np.broadcast_to(conn[:, :, None], shape).ravel(), per_channel / chunks,
           after=deps(prev.ravel(), gate.ravel()))
    ends = end_of(b, ids[:, :, -1], ready[1:])                      # position i + 1: its last chunks
    return np.concatenate([ready[:1], ends])


@register_algorithm("ring", "broadcast")
def ring_broadcast(b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, *, ready=None, gpu_host=None,
                   gpu_rail=None, **kw) -> np.ndarray:
    """Broadcast from rank 0 as a pipelined chain over the ranks in order (NCCL's ring broadcast, :func:`chain`).

    Non-blocking time ``(C + n - 2) M/(C B) + (n - 1) alpha`` for C chunks of ``chunk_bytes``.
    """
    return chain(b, list(gpus), size_bytes, ready=ready, **kw)


@register_algorithm("ring", "reduce")
def ring_reduce(b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, *, ready=None, gpu_host=None,
                gpu_rail=None, **kw) -> np.ndarray:
    """Reduce to rank 0 as a pipelined chain from the last rank down to rank 0 (:func:`chain`).

    Non-blocking time ``(C + n - 2) M/(C B) + (n - 1) alpha`` for C chunks of ``chunk_bytes``.
    """
    return chain(b, list(gpus)[::-1], size_bytes, ready=per_rank(ready, len(gpus))[::-1], **kw)[::-1]

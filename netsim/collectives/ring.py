"""Ring collectives as per-rank SimPy processes with true step-by-step dependencies."""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence

import simpy

from netsim.collectives.base import Arrivals, register_algorithm
from netsim.engine import Fabric
from netsim.routing.base import Connection


def _ring_rank(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], rank: int, steps: int,
               piece_bytes: float, arrivals: Arrivals, conn: Connection,
               ready: simpy.Event | None = None, chunks: int = 1) -> Generator:
    """Rank ``rank``: send step k to its successor once step k-1 from its predecessor has arrived.

    With ``chunks`` > 1 each step's piece goes as that many slices, and slice c of step k leaves
    as soon as slice c of step k-1 has arrived (NCCL's pipelining). With ``ready``, the rank starts
    only once that event has fired (its data is ready).
    """
    succ = (rank + 1) % len(gpus)
    src, dst = gpus[rank], gpus[succ]
    meet = arrivals.meet
    if ready is not None:
        yield ready
    piece = piece_bytes / chunks
    for k in range(steps):
        for c in range(chunks):
            if k:
                yield meet(rank, (k - 1) * chunks + c)
            fabric.send(src, dst, piece, conn, event=meet(succ, k * chunks + c))
    for c in range(chunks):
        yield meet(rank, (steps - 1) * chunks + c)


def channel_ring(gpus: Sequence[int], gpu_host: Sequence[int], channel: int) -> list[int]:
    """The ring order of ``channel``: each host's run of consecutive ranks rotated by ``channel``.

    Rotating where a ring enters and leaves each host makes channel c cross hosts between
    different GPUs, hence (with GPU i on NIC i mod nics) through different NICs, as NCCL spreads
    its channels over a node's NICs. Single-GPU hosts and channel 0 keep the rank order.

    Examples
    --------
    >>> channel_ring([0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 1, 1], 1)
    [1, 2, 0, 4, 5, 3]
    """
    order: list[int] = []
    start = 0
    for i in range(1, len(gpus) + 1):
        if i == len(gpus) or gpu_host[gpus[i]] != gpu_host[gpus[start]]:
            run = list(gpus[start:i])
            k = channel % len(run)
            order.extend(run[k:] + run[:k])
            start = i
    return order


def _layout(fabric: Fabric, gpus: Sequence[int], size_bytes: float, channels: int, job: int, comm: int,
            channel_base: int, chunk_bytes: float | None) -> tuple[float, int, list[list[int]], list[Connection]]:
    """(a step's piece per rank and channel, slices per step, each channel's ring order, each
    (channel, rank)'s connection to its successor, channel-major)."""
    n = len(gpus)
    piece = size_bytes / (n * channels)
    chunks = max(1, math.ceil(piece / chunk_bytes)) if chunk_bytes else 1
    orders = [channel_ring(gpus, fabric.topology.gpu_host, c) for c in range(channels)]
    conns = [Connection(order[r], order[(r + 1) % n], channel_base + c, job, comm) for c, order in enumerate(orders)
             for r in range(n)]
    return piece, chunks, orders, conns


def _per_gpu(env: simpy.Environment, gpus: Sequence[int], orders: list[list[int]],
             events: list[simpy.Event]) -> dict[int, simpy.Event]:
    """Per GPU, the end of its ranks (``events`` channel-major, as :func:`_layout`'s connections)."""
    per_gpu: dict[int, list[simpy.Event]] = {g: [] for g in gpus}
    for c, order in enumerate(orders):
        for r, gpu in enumerate(order):
            per_gpu[gpu].append(events[c * len(order) + r])
    return {g: evs[0] if len(evs) == 1 else env.all_of(evs) for g, evs in per_gpu.items()}


def ring_processes(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, steps: int,
                   *, channels: int = 1, job: int = 0, comm: int = 0, channel_base: int = 0,
                   ready: dict[int, simpy.Event] | None = None,
                   chunk_bytes: float | None = None) -> dict[int, simpy.Event]:
    """Start ``steps`` ring steps of ``size_bytes / (n * channels)`` per channel; per GPU, its done event.

    ``ready`` maps a GPU to an event its ranks wait for before their first send (per-rank
    dependencies between phases, no barrier). Connections use channels ``channel_base + c``.
    ``chunk_bytes`` cuts each step's piece into slices that pipeline across steps.
    """
    n = len(gpus)
    if n < 2:
        return {g: ready[g] if ready and g in ready else env.timeout(0) for g in gpus}
    piece, chunks, orders, conns = _layout(fabric, gpus, size_bytes, channels, job, comm, channel_base, chunk_bytes)
    procs = []
    for c, order in enumerate(orders):
        arrivals = Arrivals(env, n)
        for r in range(n):
            start = ready.get(order[r]) if ready else None
            procs.append(env.process(_ring_rank(env, fabric, order, r, steps, piece, arrivals,
                                                conns[c * n + r], start, chunks)))
    return _per_gpu(env, gpus, orders, procs)


def ring(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, steps: int,
         *, channels: int = 1, job: int = 0, comm: int = 0, chunk_bytes: float | None = None) -> Generator:
    """Run ``steps`` ring steps of ``size_bytes / (n * channels)`` on each channel (shared core).

    When the ring has the fabric to itself until it ends, the fabric runs it in one compiled call
    (:meth:`Fabric.run_ring`) with the same results as the per-rank processes; otherwise those run.
    """
    n = len(gpus)
    if n < 2:
        return
    run_ring = getattr(fabric, "run_ring", None)  # (the ideal model's fabric has none)
    if steps > 0 and run_ring is not None:
        piece, chunks, orders, conns = _layout(fabric, gpus, size_bytes, channels, job, comm, 0, chunk_bytes)
        receiver = [c * n + (r + 1) % n for c in range(channels) for r in range(n)]
        fast = run_ring(conns, receiver, piece / chunks, steps * chunks, chunks)
        if fast is not None:
            done_t, finished = fast
            # Each rank's end, at the time and in the order its process would have ended.
            ends: list[simpy.Event | None] = [None] * len(conns)
            for i in finished.tolist():
                ends[i] = fabric.push_event(float(done_t[i]))
            yield env.all_of(list(_per_gpu(env, gpus, orders, ends).values()))
            return
    yield env.all_of(list(ring_processes(env, fabric, gpus, size_bytes, steps, channels=channels, job=job, comm=comm,
                                         chunk_bytes=chunk_bytes).values()))


@register_algorithm("ring", "allreduce")
def ring_allreduce(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, *,
                   channels: int = 1, job: int = 0, comm: int = 0, chunk_bytes: float | None = None) -> Generator:
    """Ring allreduce: reduce-scatter then allgather, 2(n-1) steps of M/n per rank.

    With ``channels`` > 1 the buffer is split over that many parallel rings, each on its own
    connections (its own ECMP hash) and leaving each host through its own GPU/NIC
    (:func:`channel_ring`), as NCCL does. On a non-blocking fabric the time is
    ``2(n-1)(alpha + M/(n B))``. With ``chunk_bytes`` each step's piece p = M/(n C) goes as C
    slices that pipeline across steps: ``(S-1) max(C p/B, p/B + alpha) + C p/B + alpha`` for
    S = 2(n-1) steps, so a large enough C pays alpha about once instead of S times.

    Examples
    --------
    >>> import numpy as np
    >>> from netsim.engine import Environment, Fabric
    >>> from netsim.routing import make_routing
    >>> from netsim.topology import leaf_spine
    >>> topo = leaf_spine(leaves=1, spines=1, hosts_per_leaf=4, gpus_per_host=1, nics_per_host=1,
    ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    >>> env = Environment()
    >>> fabric = Fabric(env, topo, make_routing("ecmp", topo, np.random.default_rng(0)))
    >>> env.run(env.process(ring_allreduce(env, fabric, [0, 1, 2, 3], 4e9)))
    >>> round(env.now, 9)   # 2*(4-1) steps of 1e9 bytes at 1e9 B/s
    6.0
    """
    yield from ring(env, fabric, gpus, size_bytes, 2 * (len(gpus) - 1), channels=channels, job=job, comm=comm,
                     chunk_bytes=chunk_bytes)


@register_algorithm("ring", "reduce_scatter")
def ring_reduce_scatter(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, *,
                        channels: int = 1, job: int = 0, comm: int = 0, chunk_bytes: float | None = None) -> Generator:
    """Ring reduce-scatter of a per-rank input of ``size_bytes``: n-1 steps of M/n per rank.

    Non-blocking time ``(n-1)(alpha + M/(n B))``.
    """
    yield from ring(env, fabric, gpus, size_bytes, len(gpus) - 1, channels=channels, job=job, comm=comm,
                     chunk_bytes=chunk_bytes)


@register_algorithm("ring", "allgather")
def ring_allgather(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, *,
                   channels: int = 1, job: int = 0, comm: int = 0, chunk_bytes: float | None = None) -> Generator:
    """Ring allgather of a per-rank output of ``size_bytes``: n-1 steps of M/n per rank.

    Non-blocking time ``(n-1)(alpha + M/(n B))``.
    """
    yield from ring(env, fabric, gpus, size_bytes, len(gpus) - 1, channels=channels, job=job, comm=comm,
                     chunk_bytes=chunk_bytes)


def _chain_rank(fabric: Fabric, order: Sequence[int], i: int, chunks: int, chunk: float,
                arrivals: Arrivals, conn: Connection | None) -> Generator:
    """Position ``i`` of a chain: forward each chunk to the next position as soon as it has arrived."""
    last = i == len(order) - 1
    for c in range(chunks):
        if i:
            yield arrivals.meet(i, c)
        if not last:
            fabric.send(order[i], order[i + 1], chunk, conn, event=arrivals.meet(i + 1, c))


def chain(env: simpy.Environment, fabric: Fabric, order: Sequence[int], size_bytes: float, *,
          channels: int = 1, job: int = 0, comm: int = 0, chunk_bytes: float | None = None) -> Generator:
    """Pipelined chain ``order[0] -> order[1] -> ...``: the buffer cut into chunks, each forwarded on arrival.

    With ``C`` chunks of ``M/C`` and per-hop ``alpha`` (latency + overhead, paid after a chunk
    drains; the next chunk on the connection starts at once), the time on a non-blocking fabric is
    ``(C + n - 2) M/(C B) + (n - 1) alpha``: more chunks move it toward ``M/B``. ``channels``
    splits the buffer over parallel chains (own connections).
    """
    n = len(order)
    if n < 2:
        return
    per_channel = size_bytes / channels
    chunks = max(1, math.ceil(per_channel / chunk_bytes)) if chunk_bytes else 1
    procs = []
    for c in range(channels):
        arrivals = Arrivals(env, n)
        for i in range(n):
            conn = Connection(order[i], order[(i + 1) % n], c, job, comm) if i < n - 1 else None
            procs.append(env.process(_chain_rank(fabric, order, i, chunks, per_channel / chunks, arrivals, conn)))
    yield env.all_of(procs)


@register_algorithm("ring", "broadcast")
def ring_broadcast(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, *,
                   channels: int = 1, job: int = 0, comm: int = 0, chunk_bytes: float | None = None) -> Generator:
    """Broadcast from rank 0 as a pipelined chain over the ranks in order (NCCL's ring broadcast)."""
    yield from chain(env, fabric, list(gpus), size_bytes, channels=channels, job=job, comm=comm, chunk_bytes=chunk_bytes)


@register_algorithm("ring", "reduce")
def ring_reduce(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, *,
                channels: int = 1, job: int = 0, comm: int = 0, chunk_bytes: float | None = None) -> Generator:
    """Reduce to rank 0 as a pipelined chain from the last rank down to rank 0."""
    yield from chain(env, fabric, list(gpus)[::-1], size_bytes, channels=channels, job=job, comm=comm, chunk_bytes=chunk_bytes)

"""Ring collectives as per-rank SimPy processes with true step-by-step dependencies."""

from __future__ import annotations

from collections.abc import Generator, Sequence

import simpy

from netsim.collectives.base import register_algorithm
from netsim.engine import Fabric
from netsim.routing.base import Connection


class _Inbox:
    """Counts messages that arrived at each rank and wakes a rank waiting for its k-th one."""

    __slots__ = ("env", "received", "waiting")

    def __init__(self, env: simpy.Environment, n: int):
        self.env = env
        self.received = [0] * n
        self.waiting: list[simpy.Event | None] = [None] * n

    def deliver(self, rank: int) -> None:
        self.received[rank] += 1
        waiter = self.waiting[rank]
        if waiter is not None:
            self.waiting[rank] = None
            waiter.succeed()

    def wait_for(self, rank: int, count: int) -> Generator[simpy.Event, None, None]:
        while self.received[rank] < count:
            ev = self.env.event()
            self.waiting[rank] = ev
            yield ev


def _ring_rank(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], rank: int, steps: int,
               piece_bytes: float, inbox: _Inbox, conn: Connection) -> Generator:
    """Rank ``rank``: send step k to its successor once step k-1 from its predecessor has arrived."""
    succ = (rank + 1) % len(gpus)
    deliver = inbox.deliver
    for k in range(steps):
        if k:
            yield from inbox.wait_for(rank, k)
        done = fabric.send(gpus[rank], gpus[succ], piece_bytes, conn)
        done.callbacks.append(lambda _e, s=succ: deliver(s))
    yield from inbox.wait_for(rank, steps)


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


def ring(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, steps: int,
         *, channels: int = 1, job: int = 0) -> Generator:
    """Run ``steps`` ring steps of ``size_bytes / (n * channels)`` on each channel (shared core)."""
    n = len(gpus)
    if n < 2:
        return
    piece = size_bytes / (n * channels)
    procs = []
    for c in range(channels):
        order = channel_ring(gpus, fabric.topology.gpu_host, c)
        inbox = _Inbox(env, n)
        for r in range(n):
            conn = Connection(order[r], order[(r + 1) % n], c, job)
            procs.append(env.process(_ring_rank(env, fabric, order, r, steps, piece, inbox, conn)))
    yield env.all_of(procs)


@register_algorithm("ring", "allreduce")
def ring_allreduce(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, *,
                   channels: int = 1, job: int = 0) -> Generator:
    """Ring allreduce: reduce-scatter then allgather, 2(n-1) steps of M/n per rank.

    With ``channels`` > 1 the buffer is split over that many parallel rings, each on its own
    connections (its own ECMP hash) and leaving each host through its own GPU/NIC
    (:func:`channel_ring`), as NCCL does. On a non-blocking fabric the time is
    ``2(n-1)(alpha + M/(n B))``.

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
    yield from ring(env, fabric, gpus, size_bytes, 2 * (len(gpus) - 1), channels=channels, job=job)

"""Step-scheduled collectives: recursive doubling, halving-doubling, direct, pairwise, star, binomial.

Each algorithm is a list of steps; in a step every rank posts its sends, then waits until they
have been delivered and the messages addressed to it in that step have arrived, before starting
the next (what it sends next depends on what it just received; a sender's successive steps do not
overlap, as with blocking sends). There is no global barrier: ranks advance as their own messages
arrive.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

import simpy

from netsim.collectives.base import Arrivals, register_algorithm
from netsim.engine import Fabric
from netsim.errors import ConfigError
from netsim.routing.base import Connection

#: A schedule: per step, the messages ``(src_rank, dst_rank, bytes)``.
Schedule = list[list[tuple[int, int, float]]]


def _log2_exact(n: int, name: str) -> int:
    if n & (n - 1):
        raise ConfigError(f"{name} needs a power-of-two number of ranks, got {n}", "workload.ranks")
    return n.bit_length() - 1


def _rank(fabric: Fabric, gpus: Sequence[int], r: int, sends: list[list[tuple[int, float]]],
          recvs: list[list[int]], arrivals: Arrivals, channel: int, job: int,
          comm: int) -> Generator:
    for step, (out, inn) in enumerate(zip(sends, recvs)):
        posted = [fabric.send(gpus[r], gpus[dst], nbytes, Connection(gpus[r], gpus[dst], channel, job, comm),
                              event=arrivals.meet(dst, (step, r))) for dst, nbytes in out]
        for src in inn:
            yield arrivals.meet(r, (step, src))
        for delivered in posted:
            yield delivered


def run_schedule(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], schedule: Schedule, *,
                 channels: int = 1, job: int = 0, comm: int = 0) -> Generator:
    """Execute ``schedule`` on ``gpus``; with ``channels`` > 1 every message is split over parallel copies."""
    n = len(gpus)
    sends = [[[] for _ in schedule] for _ in range(n)]
    recvs = [[[] for _ in schedule] for _ in range(n)]
    for s, step in enumerate(schedule):
        for src, dst, nbytes in step:
            sends[src][s].append((dst, nbytes / channels))
            recvs[dst][s].append(src)
    procs = []
    for c in range(channels):
        arrivals = Arrivals(env, n)
        procs += [env.process(_rank(fabric, gpus, r, sends[r], recvs[r], arrivals, c, job, comm)) for r in range(n)]
    yield env.all_of(procs)


def recursive_doubling_schedule(n: int, size: float) -> Schedule:
    """log2(n) steps; in step k rank r exchanges the whole buffer with r XOR 2^k."""
    return [[(r, r ^ (1 << k), size) for r in range(n)] for k in range(_log2_exact(n, "recursive doubling"))]


def halving_doubling_schedule(n: int, size: float) -> Schedule:
    """Rabenseifner: reduce-scatter by recursive halving (M/2, M/4, ...), allgather by doubling back."""
    levels = _log2_exact(n, "halving-doubling")
    halving = [[(r, r ^ (n >> (k + 1)), size / 2 ** (k + 1)) for r in range(n)] for k in range(levels)]
    doubling = [[(r, r ^ (1 << k), size * 2**k / n) for r in range(n)] for k in range(levels)]
    return halving + doubling


def direct_schedule(n: int, size: float, rounds: int = 1) -> Schedule:
    """``rounds`` all-pairs steps of ``size / n`` per pair (direct reduce-scatter, allgather, all-to-all)."""
    step = [(r, d, size / n) for r in range(n) for d in range(n) if d != r]
    return [list(step) for _ in range(rounds)]


def pairwise_schedule(n: int, size: float) -> Schedule:
    """n-1 steps; in step k rank r sends ``size / n`` to r+k and receives from r-k."""
    return [[(r, (r + k) % n, size / n) for r in range(n)] for k in range(1, n)]


def star_schedule(n: int, size: float) -> Schedule:
    """Every rank sends its buffer to rank 0, which sends the result back to every rank."""
    return [[(r, 0, size) for r in range(1, n)], [(0, r, size) for r in range(1, n)]]


def binomial_broadcast_schedule(n: int, size: float) -> Schedule:
    """ceil(log2 n) steps; in step k every rank r < 2^k that has the data sends it to r + 2^k."""
    steps, k = [], 0
    while (1 << k) < n:
        steps.append([(r, r + (1 << k), size) for r in range(1 << k) if r + (1 << k) < n])
        k += 1
    return steps


def binomial_reduce_schedule(n: int, size: float) -> Schedule:
    """The broadcast tree reversed: in step k rank r with r mod 2^(k+1) = 2^k sends to r - 2^k."""
    return [[(dst, src, nbytes) for src, dst, nbytes in step] for step in reversed(binomial_broadcast_schedule(n, size))]


def _register(name: str, op: str, build, doc: str):
    def algorithm(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, *,
                  channels: int = 1, job: int = 0, comm: int = 0, chunk_bytes: float | None = None) -> Generator:
        if len(gpus) < 2:
            return
        yield from run_schedule(env, fabric, gpus, build(len(gpus), size_bytes), channels=channels, job=job, comm=comm)
    algorithm.__name__ = f"{op}_{name}"
    algorithm.__doc__ = doc
    register_algorithm(name, op)(algorithm)
    return algorithm


#: (algorithm, op, schedule builder, docstring with the non-blocking closed form)
_SCHEDULED = (
    ("recursive_doubling", "allreduce", recursive_doubling_schedule,
     "Recursive doubling allreduce (n a power of two): ``log2(n)(alpha + M/B)``."),
    ("halving_doubling", "allreduce", halving_doubling_schedule,
     "Rabenseifner allreduce (n a power of two): ``2 log2(n) alpha + 2(n-1)/n M/B``."),
    ("direct", "allreduce", lambda n, m: direct_schedule(n, m, rounds=2),
     "Direct allreduce: all-pairs reduce-scatter then all-pairs allgather, ``2(alpha + (n-1)M/(nB))``."),
    ("star", "allreduce", star_schedule,
     "Star allreduce: gather to rank 0 and send back, ``2(alpha + (n-1)M/B)`` (rank 0's NIC is the bottleneck)."),
    ("direct", "alltoall", direct_schedule,
     "Direct all-to-all: every rank sends M/n to every other at once, ``alpha + (n-1)M/(nB)``."),
    ("pairwise", "alltoall", pairwise_schedule,
     "Pairwise all-to-all: n-1 shifted exchanges of M/n, ``(n-1)(alpha + M/(nB))``."),
    ("binomial", "broadcast", binomial_broadcast_schedule,
     "Binomial-tree broadcast from rank 0: ``ceil(log2 n)(alpha + M/B)``."),
    ("binomial", "reduce", binomial_reduce_schedule,
     "Binomial-tree reduce to rank 0: ``ceil(log2 n)(alpha + M/B)``."),
)

for _name, _op, _build, _doc in _SCHEDULED:
    _register(_name, _op, _build, _doc)

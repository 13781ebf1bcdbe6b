"""Step-scheduled collectives as schedule builders: recursive doubling, halving-doubling, direct,
pairwise, star, binomial.

Each algorithm is a list of steps; in a step every rank posts its sends, then waits until they
have been delivered and the messages addressed to it in that step have arrived, before starting
the next (what it sends next depends on what it just received; a sender's successive steps do not
overlap, as with blocking sends). There is no global barrier: ranks advance as their own messages
arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from netsim.collectives.base import connect_pairs, end_of, join_by, per_rank, register_algorithm
from netsim.engine.model import ScheduleBuilder
from netsim.errors import ConfigError

#: Steps of an algorithm: per step, the messages ``(src_rank, dst_rank, bytes)``.
Steps = list[list[tuple[int, int, float]]]


def _log2_exact(n: int, name: str) -> int:
    if n & (n - 1):
        raise ConfigError(f"{name} needs a power-of-two number of ranks, got {n}", "workload.ranks")
    return n.bit_length() - 1


def run_steps(b: ScheduleBuilder, gpus: Sequence[int], schedule: Steps, *, channels: int = 1, job: int = 0,
              comm: int = 0, tcp: bool = False, ready: int | np.ndarray | None = None) -> np.ndarray:
    """Append ``schedule`` over ``gpus``; per rank, the end of its part. With ``channels`` > 1 every
    message is split over parallel copies (channel c's connections, its own ranks' steps).

    Rank r starts step s (posts its sends of step s, in the schedule's order) once its step s - 1
    is over: its sends of step s - 1 delivered and the messages addressed to it in step s - 1
    arrived (and, for step 0, once it is ``ready``). That moment is a JOIN per rank and step in
    which the rank had messages (a rank idle in a step starts the next one when it started that
    one); the rank is done once its last step is over.
    """
    n = len(gpus)
    ready = per_rank(ready, n)
    if n < 2:
        return ready
    gpu = np.asarray(gpus, dtype=np.int64)
    msgs, bounds = step_messages(schedule)
    src, dst = msgs[:, 0].astype(np.int64), msgs[:, 1].astype(np.int64)
    ends = []
    for c in range(channels):
        conn = connect_pairs(b, gpu[src], gpu[dst], c, job, comm, tcp)
        at = ready.copy()  # per rank: the task its current step waits for (-1: none)
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            out, into = src[lo:hi], dst[lo:hi]
            sent = b.send(conn[lo:hi], msgs[lo:hi, 2] / channels, after=at[out])
            # A rank's step is over when its sends and receives of the step are done (and its
            # previous step, which its sends, if any, already wait for).
            idle = np.flatnonzero((np.bincount(out, minlength=n) == 0) & (at >= 0))
            at = join_by(b, np.concatenate([out, into, idle]), np.concatenate([sent, sent, at[idle]]), n)
        ends.append(at)
    return ends[0] if channels == 1 else end_of(b, np.stack(ends, axis=1))


def step_messages(schedule: Steps) -> tuple[np.ndarray, np.ndarray]:
    """The messages of ``schedule`` as rows ``(src_rank, dst_rank, bytes)`` in the order
    :func:`run_steps` posts them (by step, then by sender), and where each step starts
    (``bounds[s]:bounds[s + 1]``).

    >>> msgs, bounds = step_messages([[(1, 0, 5.0), (0, 1, 7.0)], [(0, 1, 2.0)]])
    >>> msgs[:, 0].tolist(), bounds.tolist()
    ([0.0, 1.0, 0.0], [0, 2, 3])
    """
    msgs = np.array([m for step in schedule for m in step], dtype=np.float64).reshape(-1, 3)
    step_of = np.repeat(np.arange(len(schedule)), [len(step) for step in schedule])
    order = np.lexsort((msgs[:, 0], step_of))  # a rank posts its sends of a step in the schedule's order
    return msgs[order], np.searchsorted(step_of[order], np.arange(len(schedule) + 1))


def recursive_doubling_schedule(n: int, size: float) -> Steps:
    """log2(n) steps; in step k rank r exchanges the whole buffer with r XOR 2^k."""
    return [[(r, r ^ (1 << k), size) for r in range(n)] for k in range(_log2_exact(n, "recursive doubling"))]


def halving_doubling_schedule(n: int, size: float) -> Steps:
    """Rabenseifner: reduce-scatter by recursive halving (M/2, M/4, ...), allgather by doubling back."""
    levels = _log2_exact(n, "halving-doubling")
    halving = [[(r, r ^ (n >> (k + 1)), size / 2 ** (k + 1)) for r in range(n)] for k in range(levels)]
    doubling = [[(r, r ^ (1 << k), size * 2**k / n) for r in range(n)] for k in range(levels)]
    return halving + doubling


def direct_schedule(n: int, size: float, rounds: int = 1) -> Steps:
    """``rounds`` all-pairs steps of ``size / n`` per pair (direct reduce-scatter, allgather, all-to-all)."""
    step = [(r, d, size / n) for r in range(n) for d in range(n) if d != r]
    return [list(step) for _ in range(rounds)]


def pairwise_schedule(n: int, size: float) -> Steps:
    """n-1 steps; in step k rank r sends ``size / n`` to r+k and receives from r-k."""
    return [[(r, (r + k) % n, size / n) for r in range(n)] for k in range(1, n)]


def star_schedule(n: int, size: float) -> Steps:
    """Every rank sends its buffer to rank 0, which sends the result back to every rank."""
    return [[(r, 0, size) for r in range(1, n)], [(0, r, size) for r in range(1, n)]]


def binomial_broadcast_schedule(n: int, size: float) -> Steps:
    """ceil(log2 n) steps; in step k every rank r < 2^k that has the data sends it to r + 2^k."""
    steps, k = [], 0
    while (1 << k) < n:
        steps.append([(r, r + (1 << k), size) for r in range(1 << k) if r + (1 << k) < n])
        k += 1
    return steps


def binomial_reduce_schedule(n: int, size: float) -> Steps:
    """The broadcast tree reversed: in step k rank r with r mod 2^(k+1) = 2^k sends to r - 2^k."""
    return [[(dst, src, nbytes) for src, dst, nbytes in step] for step in reversed(binomial_broadcast_schedule(n, size))]


def _register(name: str, op: str, steps: Callable[[int, float], Steps], doc: str):
    def algorithm(b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, *, channels: int = 1, job: int = 0,
                  comm: int = 0, chunk_bytes: float | None = None, tcp: bool = False,
                  ready: int | np.ndarray | None = None, gpu_host: Sequence[int] | None = None,
                  gpu_rail: Sequence[int] | None = None) -> np.ndarray:
        if len(gpus) < 2:
            return per_rank(ready, len(gpus))
        return run_steps(b, gpus, steps(len(gpus), size_bytes), channels=channels, job=job, comm=comm, tcp=tcp,
                         ready=ready)
    algorithm.__name__ = f"{op}_{name}"
    algorithm.__doc__ = doc
    register_algorithm(name, op)(algorithm)
    return algorithm


#: (algorithm, op, its steps, docstring with the non-blocking closed form)
_SCHEDULED = (
    ("recursive_doubling", "allreduce", recursive_doubling_schedule,
     "Recursive doubling allreduce (n a power of two): ``log2(n)(alpha + M/B)``."),
    ("halving_doubling", "allreduce", halving_doubling_schedule,
     "Rabenseifner allreduce (n a power of two): ``2 log2(n) alpha + 2(n-1)/n M/B``."),
    ("direct", "allreduce", lambda n, m: direct_schedule(n, m, rounds=2),
     ("Direct allreduce: all-pairs reduce-scatter then all-pairs allgather, ``2(alpha + (n-1)M/(nB))`` "
      "(a rank's n-1 messages of a round share its NIC).")),
    ("star", "allreduce", star_schedule,
     "Star allreduce: gather to rank 0 and send back, ``2(alpha + (n-1)M/B)`` (rank 0's NIC is the bottleneck)."),
    ("direct", "alltoall", direct_schedule,
     "Direct all-to-all: every rank sends M/n to every other at once (sharing its NIC), ``alpha + (n-1)M/(nB)``."),
    ("pairwise", "alltoall", pairwise_schedule,
     "Pairwise all-to-all: n-1 shifted exchanges of M/n, ``(n-1)(alpha + M/(nB))``."),
    ("binomial", "broadcast", binomial_broadcast_schedule,
     "Binomial-tree broadcast from rank 0: ``ceil(log2 n)(alpha + M/B)``."),
    ("binomial", "reduce", binomial_reduce_schedule,
     ("Binomial-tree reduce to rank 0: ``ceil(log2 n)(alpha + M/B)`` for n a power of two (otherwise a leaf "
      "that need not wait sends in the first round, sharing its parent's NIC).")),
)

for _name, _op, _steps, _doc in _SCHEDULED:
    _register(_name, _op, _steps, _doc)

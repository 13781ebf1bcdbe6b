"""Which waiting jobs start now: first-come-first-served, and EASY backfilling.

A scheduler sees the queue (in submit order), the number of free GPUs and, for backfilling, when
each running job is expected to end. Estimates are what a user would give a real scheduler: the
job's length if it ran alone (its iterations times its iteration time alone, or its
``duration_s``), never what the simulation later finds.

* ``fifo``: start the first waiting job while it fits; a job that does not fit blocks those behind it.
* ``backfill`` (EASY, Lifka 1995): as ``fifo``; then the first waiting job gets a reservation at
  the earliest time enough GPUs will be free (its *shadow time*), and a later job may start now if
  it fits and either ends by the shadow time or only uses GPUs the first job will not need then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: The schedulers, by their YAML name.
SCHEDULERS = ("fifo", "backfill")


@dataclass(frozen=True)
class Waiting:
    """A job in the queue."""

    index: int          #: the job's position in the trace
    gpus: int
    estimate_s: float   #: how long it runs alone (the user's estimate)


def choose(scheduler: str, queue: Sequence[Waiting], free: int, now: float,
           running: Sequence[tuple[float, int]]) -> list[Waiting]:
    """The waiting jobs to start at ``now``, in start order.

    ``running``: per running job, ``(expected end, GPUs)``.

    >>> q = [Waiting(0, 8, 10.0), Waiting(1, 2, 1.0), Waiting(2, 2, 50.0)]
    >>> [w.index for w in choose("fifo", q, 4, 0.0, [(5.0, 4)])]
    []
    >>> [w.index for w in choose("backfill", q, 4, 0.0, [(5.0, 4)])]   # job 1 ends before job 0 can start
    [1]
    """
    if scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}")
    started: list[Waiting] = []
    rest = list(queue)
    ends = list(running)
    while rest and rest[0].gpus <= free:
        job = rest.pop(0)
        started.append(job)
        free -= job.gpus
        ends.append((now + job.estimate_s, job.gpus))
    if scheduler == "fifo" or not rest:
        return started
    head = rest[0]
    shadow, spare, avail = math.inf, 0, free
    for end, gpus in sorted(ends):
        avail += gpus
        if avail >= head.gpus:
            shadow, spare = end, avail - head.gpus
            break
    for job in rest[1:]:
        if job.gpus > free:
            continue
        if now + job.estimate_s <= shadow:
            started.append(job)
            free -= job.gpus
        elif job.gpus <= spare:
            started.append(job)
            free -= job.gpus
            spare -= job.gpus
    return started

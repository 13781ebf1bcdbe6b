"""Collective algorithms: registry, nccl-tests bandwidth conventions, and the record of one call."""

from __future__ import annotations

import math
from dataclasses import dataclass

import simpy

from netsim.errors import ConfigError
from netsim.registry import Registry

#: Algorithm name -> generator ``run(env, fabric, gpus, size_bytes, *, channels, job, comm, chunk_bytes)``.
ALGORITHMS: Registry = Registry("collective algorithm")
#: Algorithm name -> the ops it implements.
ALGORITHM_OPS: dict[str, tuple[str, ...]] = {}

#: nccl-tests bus-bandwidth factor per op, as a function of the number of ranks.
BUSBW_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def register_algorithm(name: str, op: str):
    """Register the generator implementing ``op`` with ``algorithm: name``."""
    def deco(fn):
        key = f"{op}/{name}"
        ALGORITHMS.register(key)(fn)
        ALGORITHM_OPS.setdefault(name, ())
        ALGORITHM_OPS[name] += (op,)
        return fn
    return deco


def get_algorithm(op: str, name: str, path: str = "workload"):
    """The generator implementing ``op`` with algorithm ``name``; ConfigError listing valid choices."""
    if op not in BUSBW_FACTOR:
        raise ConfigError(f"unknown collective op {op!r}; valid: {', '.join(BUSBW_FACTOR)}", f"{path}.op")
    valid = sorted(a for a, ops in ALGORITHM_OPS.items() if op in ops)
    if name not in valid:
        raise ConfigError(f"unknown algorithm {name!r} for op {op!r}; valid: {', '.join(valid) or '(none yet)'}",
                          f"{path}.algorithm")
    return ALGORITHMS.get(f"{op}/{name}")


class Arrivals:
    """One event per (rank, step): fired when that step's message has reached the rank.

    Whichever side comes first, the sender posting the message or the receiver starting to wait,
    creates the event; the fabric fires it on arrival. One event per message, no placeholders.
    """

    __slots__ = ("env", "slots")

    def __init__(self, env: simpy.Environment, n: int):
        self.env = env
        self.slots: list[dict[int, simpy.Event]] = [{} for _ in range(n)]

    def meet(self, rank: int, step: int) -> simpy.Event:
        """The arrival event of ``step`` at ``rank``.

        Sender and receiver each call this once: the first creates and stores the event, the
        second takes it out of the table, so nothing outlives the message.
        """
        table = self.slots[rank]
        ev = table.pop(step, None)
        if ev is None:
            ev = table[step] = self.env.event()
        return ev


@dataclass(frozen=True)
class CollectiveRecord:
    """One collective call, as written to ``collectives.parquet`` (nccl-tests definitions)."""

    job: int
    iteration: int
    op: str
    algorithm: str
    size_bytes: float
    n_ranks: int
    channels: int
    start_s: float
    end_s: float
    ideal_s: float = math.nan  #: the call with a non-blocking core (:mod:`netsim.collectives.ideal`); NaN when off
    bound_s: float = math.nan  #: provable lower bound: no correct run is faster
    slack_s: float = 0.0       #: engine tolerance accumulated along a dependency chain
    step: int = 0              #: index of the workload step (sequences: document order)
    label: str = ""
    comm: int = 0              #: communicator id (distinct rank sets get distinct connections)

    @property
    def duration_s(self) -> float:
        """Wall time of the call."""
        return self.end_s - self.start_s

    @property
    def algbw_Bps(self) -> float:
        """Algorithm bandwidth: size over time."""
        return self.size_bytes / self.duration_s if self.duration_s > 0 else float("inf")

    @property
    def busbw_Bps(self) -> float:
        """Bus bandwidth: algbw times the op's factor (2(n-1)/n for allreduce)."""
        return self.algbw_Bps * BUSBW_FACTOR[self.op](self.n_ranks)

    @property
    def slowdown(self) -> float:
        """Duration over the ideal (1.0: the core and routing cost nothing beyond the non-blocking fabric)."""
        return self.duration_s / self.ideal_s if self.ideal_s > 0 else math.nan

    @property
    def below_bound(self) -> bool:
        """True when the call beat its provable lower bound: by more than the engine's completion
        tolerance allows along its dependency chain (a bug to report), or by more than a millionth
        of the bound whatever the tolerance (a tolerance too coarse for the run: results flagged,
        never silently written)."""
        slack = min(self.slack_s, 1e-6 * self.bound_s)
        return bool(self.duration_s < self.bound_s * (1 - 1e-9) - slack)

"""Two-level (hierarchical) allreduce as a schedule builder: intra-host reduce-scatter, inter-host rings,
intra-host allgather."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netsim.collectives.base import per_rank, register_algorithm
from netsim.collectives.ring import ring_steps
from netsim.engine.model import ScheduleBuilder
from netsim.errors import ConfigError


def host_groups(gpus: Sequence[int], gpu_host: Sequence[int]) -> list[list[int]]:
    """The communicator's GPUs grouped by host, in rank order (hosts in order of first appearance)."""
    groups: dict[int, list[int]] = {}
    for g in gpus:
        groups.setdefault(int(gpu_host[g]), []).append(g)
    return list(groups.values())


@register_algorithm("hierarchical", "allreduce")
def hierarchical_allreduce(b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, *, channels: int = 1,
                           job: int = 0, comm: int = 0, chunk_bytes: float | None = None, tcp: bool = False,
                           ready: int | np.ndarray | None = None,
                           gpu_host: Sequence[int] | None = None, gpu_rail: Sequence[int] | None = None) -> np.ndarray:
    """Allreduce in three phases, as multi-GPU nodes are used.

    1. Ring reduce-scatter of M over each host's g GPUs (intra-host fabric): each GPU holds M/g.
    2. g concurrent inter-host ring allreduces of M/g, one per local GPU index, over the H hosts
       (GPU i of every host: rail i, NIC i).
    3. Ring allgather of M over each host's GPUs.

    Each rank starts a phase as soon as its own previous phase is done (per-rank ``ready``, no
    barrier). Phase p's rings use channels ``p * channels + c`` (distinct connections).
    ``chunk_bytes`` slices every ring step (see :func:`netsim.collectives.ring.ring_allreduce`).
    On a non-blocking fabric: ``2(g-1)(a_i + M/(g B_i)) + 2(H-1)(a_n + M/(g H B_n))``.
    Every host must contribute the same number of GPUs.

    Examples
    --------
    >>> b = ScheduleBuilder()
    >>> ends = hierarchical_allreduce(b, [0, 1, 2, 3], 4e6, gpu_host=[0, 0, 1, 1])
    >>> b.build().n_sends   # 2 ranks x (1 step on each host, 2 steps on each rail, 1 step on each host)
    16
    """
    n = len(gpus)
    ready = per_rank(ready, n)
    if n < 2:
        return ready
    groups = host_groups(gpus, gpu_host if gpu_host is not None else range(max(gpus) + 1))
    g = len(groups[0])
    if any(len(grp) != g for grp in groups):
        raise ConfigError(f"hierarchical allreduce needs the same number of ranks on every host, got "
                          f"{sorted({len(grp) for grp in groups})}", "workload.algorithm")
    kw = {"channels": channels, "job": job, "comm": comm, "chunk_bytes": chunk_bytes, "tcp": tcp, "gpu_host": gpu_host,
          "gpu_rail": gpu_rail}
    rank_of = {gpu: r for r, gpu in enumerate(gpus)}
    at = ready.copy()  # per rank: the end of its latest phase

    def phase(members: list[int], size: float, steps: int, base: int) -> None:
        ranks = [rank_of[m] for m in members]
        at[ranks] = ring_steps(b, members, size, steps, ready=at[ranks], channel_base=base, **kw)

    for grp in groups:  # 1: intra-host reduce-scatter
        phase(grp, size_bytes, g - 1, 0)
    for i in range(g):  # 2: inter-host allreduce of M/g per local index
        phase([grp[i] for grp in groups], size_bytes / g, 2 * (len(groups) - 1), channels)
    for grp in groups:  # 3: intra-host allgather
        phase(grp, size_bytes, g - 1, 2 * channels)
    return at

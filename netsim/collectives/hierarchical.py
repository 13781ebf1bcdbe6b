"""Two-level (hierarchical) allreduce: intra-host reduce-scatter, inter-host rings, intra-host allgather."""

from __future__ import annotations

from collections.abc import Generator, Sequence

import simpy

from netsim.collectives.base import register_algorithm
from netsim.collectives.ring import ring_processes
from netsim.engine import Fabric
from netsim.errors import ConfigError


def host_groups(gpus: Sequence[int], gpu_host: Sequence[int]) -> list[list[int]]:
    """The communicator's GPUs grouped by host, in rank order (hosts in order of first appearance)."""
    groups: dict[int, list[int]] = {}
    for g in gpus:
        groups.setdefault(int(gpu_host[g]), []).append(g)
    return list(groups.values())


@register_algorithm("hierarchical", "allreduce")
def hierarchical_allreduce(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, *,
                           channels: int = 1, job: int = 0, comm: int = 0, chunk_bytes: float | None = None) -> Generator:
    """Allreduce in three phases, as multi-GPU nodes are used.

    1. Ring reduce-scatter of M over each host's g GPUs (intra-host fabric): each GPU holds M/g.
    2. g concurrent inter-host ring allreduces of M/g, one per local GPU index, over the H hosts
       (GPU i of every host: rail i, NIC i).
    3. Ring allgather of M over each host's GPUs.

    Each rank starts a phase as soon as its own previous phase is done (no barrier). ``chunk_bytes``
    slices every ring step (see :func:`netsim.collectives.ring.ring_allreduce`). On a
    non-blocking fabric: ``2(g-1)(a_i + M/(g B_i)) + 2(H-1)(a_n + M/(g H B_n))``.
    Every host must contribute the same number of GPUs.
    """
    if len(gpus) < 2:
        return
    groups = host_groups(gpus, fabric.topology.gpu_host)
    g = len(groups[0])
    if any(len(grp) != g for grp in groups):
        raise ConfigError(f"hierarchical allreduce needs the same number of ranks on every host, got "
                          f"{sorted({len(grp) for grp in groups})}", "workload.algorithm")
    # Phase 1: intra-host reduce-scatter (channels 0..), per host.
    phase1: dict[int, simpy.Event] = {}
    for grp in groups:
        phase1.update(ring_processes(env, fabric, grp, size_bytes, g - 1, channels=channels, job=job, comm=comm,
                                     chunk_bytes=chunk_bytes))
    # Phase 2: inter-host allreduce of M/g per local index (distinct channel ids: distinct connections).
    phase2: dict[int, simpy.Event] = {}
    base = channels
    for i in range(g):
        rail = [grp[i] for grp in groups]
        phase2.update(ring_processes(env, fabric, rail, size_bytes / g, 2 * (len(groups) - 1), channels=channels,
                                     job=job, comm=comm, channel_base=base, ready=phase1,
                                     chunk_bytes=chunk_bytes))
    # Phase 3: intra-host allgather.
    done = []
    for grp in groups:
        done += ring_processes(env, fabric, grp, size_bytes, g - 1, channels=channels, job=job, comm=comm,
                               channel_base=2 * channels, ready=phase2, chunk_bytes=chunk_bytes).values()
    yield env.all_of(done)

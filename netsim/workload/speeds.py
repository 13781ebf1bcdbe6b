"""GPU compute speeds over time: which GPUs are slow (stragglers) and by how much, as the workloads read it.

A slow GPU is a timed change of one GPU's compute factor: every compute task it starts at or
after ``at_s`` takes ``factor`` times its nominal time (1 = nominal), until the next change. The
experiment resolves ``gpu`` faults and drawn stragglers into :class:`SlowGpu` records
(:mod:`netsim.experiment.faultplan`); the training workload multiplies its compute delays by
:meth:`ComputeSpeeds.slowest` of the GPUs that compute in lockstep. The network knows nothing of it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from netsim.errors import ConfigError
from netsim.topology import Topology


@dataclass(frozen=True)
class SlowGpu:
    """From ``at_s`` on, ``gpu`` computes ``factor`` times slower (1.0: restored to nominal)."""

    gpu: int
    at_s: float
    factor: float


class ComputeSpeeds:
    """Per GPU, its compute factor as a step function of time (the last change at or before ``t``).

    Changes at the same instant apply in the order given (the last one wins).

    Examples
    --------
    >>> speeds = ComputeSpeeds([SlowGpu(3, 0.0, 2.0), SlowGpu(3, 1.0, 1.0)])
    >>> speeds.factor(3, 0.5), speeds.factor(3, 1.0), speeds.slowest([1, 3], 0.0)
    (2.0, 1.0, 2.0)
    """

    def __init__(self, changes: Iterable[SlowGpu]):
        self._times: dict[int, list[float]] = {}
        self._factors: dict[int, list[float]] = {}
        for c in sorted(changes, key=lambda c: c.at_s):
            self._times.setdefault(c.gpu, []).append(float(c.at_s))
            self._factors.setdefault(c.gpu, []).append(float(c.factor))

    def __bool__(self) -> bool:
        return bool(self._times)

    @property
    def gpus(self) -> set[int]:
        """GPUs with at least one change."""
        return set(self._times)

    def factor(self, gpu: int, t: float) -> float:
        """The compute factor of ``gpu`` for a task starting at ``t``."""
        times = self._times.get(gpu)
        if not times:
            return 1.0
        i = bisect.bisect_right(times, t)
        return self._factors[gpu][i - 1] if i else 1.0

    def slowest(self, gpus: Iterable[int], t: float) -> float:
        """The largest factor among ``gpus`` at ``t``: GPUs in lockstep (a TP group) wait for the slowest."""
        return max((self.factor(g, t) for g in gpus if g in self._times), default=1.0)


def gpu_names(topology: Topology) -> list[str]:
    """Node name of every GPU, by global index (``h1.gpu2``; with the cluster prefix on multi-cluster fabrics)."""
    nodes = sorted(n for n, kind in topology.graph.nodes(data="kind") if kind == "gpu")
    return [topology.node_name(n) for n in nodes]


def gpu_index(topology: Topology, gpu: int | str, path: str, names: list[str] | None = None) -> int:
    """The global index of ``gpu`` (an index or a name); ConfigError at ``path`` when there is none."""
    n = topology.n_gpus
    if isinstance(gpu, int):
        if not 0 <= gpu < n:
            raise ConfigError(f"no GPU {gpu}: the fabric has {n:,} GPUs (0 .. {n - 1})", path)
        return gpu
    names = gpu_names(topology) if names is None else names
    try:
        return names.index(gpu)
    except ValueError:
        example = names[min(5, n - 1)] if n else "h1.gpu2"
        raise ConfigError(f"no GPU named {gpu!r} in the topology (a global index 0 .. {n - 1}, or a name like "
                          f"{example})", path) from None

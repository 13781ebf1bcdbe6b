"""All-to-all-v (each pair its own byte count, as mixture-of-experts dispatch and combine): direct,
pairwise and hierarchical, as schedule builders.

The builders take the usual arguments plus ``matrix``: an ``n x n`` array, ``matrix[i, j]`` the
bytes rank ``i`` sends to rank ``j`` (the diagonal stays on the GPU and is ignored). Without it
the call is a uniform all-to-all of ``size_bytes`` per rank (``size_bytes / n`` per pair), so
``op: alltoallv`` in a collective workload and ``op: alltoall, algorithm: hierarchical`` run the
same code. Pairs with nothing to send send no message.

* ``direct``: every rank posts all its messages at once (they share its NIC);
  on a non-blocking fabric ``max over ranks of (alpha + max(sent_i, received_i) / B)`` for equal
  NICs and one NIC per GPU.
* ``pairwise``: ``n - 1`` steps; in step ``k`` rank ``i`` sends to ``i + k`` and receives from ``i - k``.
* ``hierarchical`` (rail-aligned, two hops): first every GPU sends, inside its host, to local GPU
  ``l'`` everything bound for local index ``l'`` on any host (the intra-host gather); then GPU
  ``(a, l')`` sends to GPU ``(b, l')`` of every other host what its host has for it, over one
  rail (the inter-host exchange). Messages between two GPUs of one host take the first hop only.
  Every host must hold the same number of the communicator's ranks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netsim.collectives.base import per_rank, register_algorithm
from netsim.collectives.hierarchical import host_groups
from netsim.collectives.schedule import Steps, run_steps
from netsim.engine.model import ScheduleBuilder
from netsim.errors import ConfigError


def pair_bytes(n: int, size_bytes: float, matrix: np.ndarray | None) -> np.ndarray:
    """The ``n x n`` bytes of a call, diagonal zeroed: ``matrix``, or ``size_bytes / n`` per pair.

    >>> pair_bytes(3, 3e6, None).tolist()
    [[0.0, 1000000.0, 1000000.0], [1000000.0, 0.0, 1000000.0], [1000000.0, 1000000.0, 0.0]]
    """
    if matrix is None:
        m = np.full((n, n), size_bytes / n, dtype=np.float64)
    else:
        m = np.array(matrix, dtype=np.float64)
        if m.shape != (n, n):
            raise ValueError(f"an all-to-all-v over {n} ranks needs a {n} x {n} matrix, got {m.shape}")
        if not np.all(np.isfinite(m)) or np.any(m < 0):
            raise ValueError("all-to-all-v bytes must be finite and >= 0")
    np.fill_diagonal(m, 0.0)
    return m


def direct_steps(m: np.ndarray) -> Steps:
    """One step: every nonzero pair at once, in rank order (no step when nothing moves)."""
    src, dst = np.nonzero(m)
    return [list(zip(src.tolist(), dst.tolist(), m[src, dst].tolist()))] if len(src) else []


def pairwise_steps(m: np.ndarray) -> Steps:
    """``n - 1`` shifted steps; step ``k``: ``i -> (i + k) mod n`` where there is something to send."""
    n = len(m)
    steps = []
    for k in range(1, n):
        src = np.arange(n)
        dst = (src + k) % n
        keep = m[src, dst] > 0
        steps.append(list(zip(src[keep].tolist(), dst[keep].tolist(), m[src[keep], dst[keep]].tolist())))
    return [s for s in steps if s]


def hierarchical_steps(m: np.ndarray, gpus: Sequence[int], gpu_host: Sequence[int] | None) -> Steps:
    """The two hops of the rail-aligned hierarchical all-to-all-v (see the module docstring)."""
    groups = host_groups(gpus, gpu_host if gpu_host is not None else range(max(gpus) + 1))
    g = len(groups[0])
    if any(len(grp) != g for grp in groups):
        raise ConfigError(f"hierarchical all-to-all needs the same number of ranks on every host, got "
                          f"{sorted({len(grp) for grp in groups})}", "workload.algorithm")
    rank_of = {gpu: r for r, gpu in enumerate(gpus)}
    layout = np.array([[rank_of[x] for x in grp] for grp in groups])  # (host, local) -> rank
    hosts = len(groups)
    # t[a, l, b, l2]: bytes from (host a, local l) to (host b, local l2)
    t = m[layout[:, :, None, None], layout[None, None, :, :]]
    gather = t.sum(axis=2)       # [a, l, l2]: (a, l) -> (a, l2), everything for local index l2 on any host
    exchange = t.sum(axis=1)     # [a, b, l2]: (a, l2) -> (b, l2), what host a has for (b, l2)
    a, l, l2 = np.nonzero(gather * (1 - np.eye(g))[None, :, :])
    first = list(zip(layout[a, l].tolist(), layout[a, l2].tolist(), gather[a, l, l2].tolist()))
    a, b, l2 = np.nonzero(exchange * (1 - np.eye(hosts))[:, :, None])
    order = np.lexsort((b, l2, a))  # a host's ranks post in rank order, each to the other hosts in order
    a, b, l2 = a[order], b[order], l2[order]
    second = list(zip(layout[a, l2].tolist(), layout[b, l2].tolist(), exchange[a, b, l2].tolist()))
    return [s for s in (first, second) if s]


_STEPS = {"direct": lambda m, gpus, hosts: direct_steps(m),
          "pairwise": lambda m, gpus, hosts: pairwise_steps(m),
          "hierarchical": hierarchical_steps}


def alltoallv_steps(algorithm: str, gpus: Sequence[int], size_bytes: float, matrix: np.ndarray | None = None,
                    gpu_host: Sequence[int] | None = None) -> Steps:
    """The steps of one all-to-all-v call (``(src_rank, dst_rank, bytes)`` per message)."""
    return _STEPS[algorithm](pair_bytes(len(gpus), size_bytes, matrix), gpus, gpu_host)


def _register(name: str, doc: str):
    def algorithm(b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, *, channels: int = 1, job: int = 0,
                  comm: int = 0, chunk_bytes: float | None = None, tcp: bool = False,
                  ready: int | np.ndarray | None = None, gpu_host: Sequence[int] | None = None,
                  matrix: np.ndarray | None = None, gpu_rail: Sequence[int] | None = None) -> np.ndarray:
        if len(gpus) < 2:
            return per_rank(ready, len(gpus))
        steps = alltoallv_steps(name, gpus, size_bytes, matrix, gpu_host)
        if not steps:  # nothing to move: every rank is done when it is ready
            return per_rank(ready, len(gpus))
        return run_steps(b, gpus, steps, channels=channels, job=job, comm=comm, tcp=tcp, ready=ready)
    algorithm.__name__ = f"alltoallv_{name}"
    algorithm.__doc__ = doc
    register_algorithm(name, "alltoallv")(algorithm)
    return algorithm


alltoallv_direct = _register("direct", "Direct all-to-all-v: every rank posts all its messages at once.")
alltoallv_pairwise = _register("pairwise", "Pairwise all-to-all-v: n-1 shifted exchanges.")
alltoallv_hierarchical = _register(
    "hierarchical", "Hierarchical all-to-all-v: intra-host gather by destination local index, then one "
    "exchange per rail between hosts (see the module docstring).")
register_algorithm("hierarchical", "alltoall")(alltoallv_hierarchical)

"""Collective algorithms: the builder protocol and its registry, running one call, nccl-tests
bandwidth conventions, and the record of one call.

Every algorithm is written once, as a **builder** that appends the tasks of one call to a
:class:`~netsim.engine.model.ScheduleBuilder` (pure numpy, no SimPy)::

    build(b, gpus, size_bytes, *, channels=1, job=0, comm=0, chunk_bytes=None, tcp=False,
          ready=None, gpu_host=None, gpu_rail=None) -> np.ndarray

* ``gpus``: the communicator's GPUs in rank order; ``size_bytes``: the buffer (per rank, nccl-tests
  conventions); ``channels``: parallel copies of the algorithm, each on its own connections, the
  buffer split between them; ``chunk_bytes``: the pipelining slice (what it means is the
  algorithm's: ring step slices, chain chunks, tree chunks; ignored by the step-scheduled ones).
* ``job``, ``comm``, ``tcp``: written into every connection the call opens
  (``b.connect(src, dst, channel, job, comm, tcp)``); ``tcp`` when the communicator mixes NIC
  families and talks TCP.
* ``ready``: when each rank may start. ``None``: with the schedule; one task id: every rank waits
  for it; an array with one task id per rank (``-1``: none): per-rank readiness (a phase of a
  composite algorithm starting on each rank as soon as its previous phase is done).
* ``gpu_host``: the topology's GPU -> host array (channel rings rotate each host's run of ranks,
  hierarchical groups ranks by host). ``None``: every GPU on its own host.
* ``gpu_rail``: the topology's GPU -> NIC index array, given by the NCCL model
  (:mod:`netsim.collectives.nccl`): channel rings then stay on rails. ``None``: rank-order rings.
* Returns, per rank (``gpus`` order), the task after which that rank's part of the call is done
  (``-1``: the rank has nothing to wait for, e.g. a single rank without ``ready``).

Builders append every connection's messages in program order (the order the rank posts them), and
a message depends on exactly what the rank waited for before posting it, so the reference
executor (:mod:`netsim.engine.reference`) runs the same messages, in the same order on every
connection, at the same times as one SimPy process per rank did. Each builder's docstring gives
its closed form on a non-blocking fabric (``tests/test_builders.py`` checks them on the schedule
alone; ``tests/test_ideal.py`` on the engine).

:func:`run_collective` runs one call inside a SimPy process (for callers that still drive the
engine call by call). A builder may carry a shortcut for that, ``run_on(env, fabric, gpus,
size_bytes, **kw) -> event | None`` (the ring: the fabric's compiled ring); ``None`` means it does
not apply and the schedule runs.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import simpy

from netsim.collectives.nccl_tuning import CallProtocol
from netsim.engine.model import Deps, Schedule, ScheduleBuilder
from netsim.engine.reference import run_schedule
from netsim.errors import ConfigError, did_you_mean
from netsim.registry import Registry


class Builder(Protocol):
    """An algorithm: appends one call's tasks to ``b``; per rank, its last task (see the module docstring)."""

    def __call__(self, b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, *, channels: int = 1,
                 job: int = 0, comm: int = 0, chunk_bytes: float | None = None, tcp: bool = False,
                 ready: int | np.ndarray | None = None, gpu_host: Sequence[int] | None = None,
                 gpu_rail: Sequence[int] | None = None) -> np.ndarray: ...


#: ``op/algorithm`` -> builder.
ALGORITHMS: Registry = Registry("collective algorithm")
#: Algorithm name -> the ops it implements.
ALGORITHM_OPS: dict[str, tuple[str, ...]] = {}

#: nccl-tests bus-bandwidth factor per op, as a function of the number of ranks.
BUSBW_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "alltoallv": lambda n: (n - 1) / n,  # size_bytes: the mean bytes a rank sends
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def register_algorithm(name: str, op: str):
    """Register the builder implementing ``op`` with ``algorithm: name``."""
    def deco(fn):
        key = f"{op}/{name}"
        ALGORITHMS.register(key)(fn)
        ALGORITHM_OPS.setdefault(name, ())
        ALGORITHM_OPS[name] += (op,)
        return fn
    return deco


def get_algorithm(op: str, name: str, path: str = "workload", auto: bool = False) -> Builder:
    """The builder implementing ``op`` with algorithm ``name``; ConfigError listing valid choices
    (``auto``: the file may also say ``auto``, and the message lists it)."""
    if op not in BUSBW_FACTOR:
        raise ConfigError(f"unknown collective op {op!r}; valid: {', '.join(BUSBW_FACTOR)}"
                          f"{did_you_mean(op, BUSBW_FACTOR)}", f"{path}.op")
    valid = sorted(a for a, ops in ALGORITHM_OPS.items() if op in ops)
    if name not in valid:
        names = (["auto (NCCL's pick by size)"] if auto else []) + valid
        raise ConfigError(f"unknown algorithm {name!r} for op {op!r}; valid: {', '.join(names) or '(none yet)'}"
                          f"{did_you_mean(name, valid + ['auto'] if auto else valid)}", f"{path}.algorithm")
    return ALGORITHMS.get(f"{op}/{name}")


# ---------------------------------------------------------------------------------- building blocks
def per_rank(ready: int | np.ndarray | Sequence[int] | None, n: int) -> np.ndarray:
    """``ready`` (see the module docstring) as one task id per rank, ``-1`` for none.

    >>> per_rank(None, 2).tolist(), per_rank(7, 2).tolist(), per_rank([3, -1], 2).tolist()
    ([-1, -1], [7, 7], [3, -1])
    """
    if ready is None:
        return np.full(n, -1, dtype=np.int64)
    out = np.asarray(ready, dtype=np.int64)
    if out.ndim == 0:
        return np.full(n, int(out), dtype=np.int64)
    if out.shape != (n,):
        raise ValueError(f"ready must be one task id or one per rank ({n}), got {out.shape}")
    return out


def deps(*columns) -> Deps:
    """Dependencies from columns of predecessors: task ``k`` depends on ``column[k]`` of every column
    (an array of one id per task, or a 2-D array of several), ``-1`` entries left out.

    >>> d = deps([5, -1, 6], [[-1, 1], [2, 3], [-1, -1]]); d.ptr.tolist(), d.idx.tolist()
    ([0, 2, 4, 5], [5, 1, 2, 3, 6])
    """
    parts = [np.asarray(c, dtype=np.int64) for c in columns]
    n = len(parts[0])
    table = np.concatenate([p.reshape(n, -1) for p in parts], axis=1)
    has = table >= 0
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(has.sum(axis=1), out=ptr[1:])
    return Deps(ptr, table[has])


def connect_pairs(b: ScheduleBuilder, src: np.ndarray, dst: np.ndarray, channel, job: int, comm: int,
                  tcp: bool) -> np.ndarray:
    """Connection ids of messages ``src[i] -> dst[i]`` on ``channel[i]`` (scalar or array), opening
    each distinct connection once (in order of first appearance)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    channel = np.broadcast_to(np.asarray(channel, dtype=np.int64), src.shape)
    keys = np.stack([src, dst, channel], axis=1)
    uniq, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # open them in order of first appearance
    ids = np.empty(len(uniq), dtype=np.int64)
    ids[order] = b.connect(uniq[order, 0], uniq[order, 1], uniq[order, 2], job, comm, tcp)
    return ids[inverse.reshape(-1)]


def join_by(b: ScheduleBuilder, owner: np.ndarray, tasks: np.ndarray, n: int) -> np.ndarray:
    """Per owner ``0..n-1``, a JOIN after its ``tasks`` (``tasks[i]`` belongs to ``owner[i]``; ``-1``
    entries left out); an owner with a single task gets that task itself, one with none ``-1``.

    >>> b = ScheduleBuilder(); b.join(n=3).tolist()
    [0, 1, 2]
    >>> join_by(b, np.array([1, 0, 1, 2]), np.array([0, 1, 2, -1]), 4).tolist()   # a JOIN (3) for owner 1
    [1, 3, -1, -1]
    """
    owner, tasks = np.asarray(owner, dtype=np.int64), np.asarray(tasks, dtype=np.int64)
    keep = tasks >= 0
    order = np.argsort(owner[keep], kind="stable")
    owner, tasks = owner[keep][order], tasks[keep][order]
    counts = np.bincount(owner, minlength=n)
    out = np.full(n, -1, dtype=np.int64)
    one = counts == 1
    out[one] = tasks[(np.cumsum(counts) - counts)[one]]
    many = counts > 1
    if many.any():
        ptr = np.zeros(int(many.sum()) + 1, dtype=np.int64)
        np.cumsum(counts[many], out=ptr[1:])
        out[many] = b.join(after=Deps(ptr, tasks[np.repeat(many, counts)]))
    return out


def end_of(b: ScheduleBuilder, *columns) -> np.ndarray:
    """Per rank, one JOIN after that rank's tasks in ``columns`` (as in :func:`deps`; see :func:`join_by`)."""
    table = np.concatenate([np.asarray(c, dtype=np.int64).reshape(len(columns[0]), -1) for c in columns], axis=1)
    n, k = table.shape
    return join_by(b, np.repeat(np.arange(n), k), table.ravel(), n)


# ---------------------------------------------------------------------------------- one call
def build_call(b: ScheduleBuilder, op: str, algorithm: str, gpus: Sequence[int], size_bytes: float, *,
               protocol: CallProtocol | None = None, gpu_host: Sequence[int] | None = None, **kw):
    """Append one call to ``b`` (``kw``: the builder's keywords); the end of each rank's part.

    With a ``protocol`` (:class:`~netsim.collectives.nccl_tuning.CallProtocol`, the NCCL model's),
    each rank starts the protocol's ``base_s`` after it is ready, every message carries ``wire``
    times its bytes (and a given ``chunk_bytes`` scales alike), and each message pays its protocol's
    share of its connection's per-message overhead (``net_scale`` between hosts, ``nvlink_scale``
    inside one).

    Examples
    --------
    >>> from netsim.collectives.nccl_tuning import call_protocol
    >>> b = ScheduleBuilder()
    >>> ends = build_call(b, "allreduce", "ring", [0, 1], 1e3, protocol=call_protocol("LL", "ring", True),
    ...                   gpu_host=[0, 1])
    >>> s = b.build()
    >>> s.kind.tolist()[:2], s.amount.tolist()[:2], float(s.amount[s.kind == 0][0])   # base latency, 2x the bytes
    ([1, 1], [3.6e-06, 3.6e-06], 1000.0)
    >>> sorted(set(s.overhead_scale[s.kind == 0].round(4).tolist()))
    [0.2813]
    """
    builder = get_algorithm(op, algorithm)
    if protocol is None:
        return builder(b, list(gpus), size_bytes, gpu_host=gpu_host, **kw)
    n = len(gpus)
    if protocol.base_s > 0 and n >= 2:
        kw["ready"] = b.delay(np.full(n, protocol.base_s), after=per_rank(kw.get("ready"), n))
    if kw.get("chunk_bytes") is not None:
        kw["chunk_bytes"] = kw["chunk_bytes"] * protocol.wire
    first = b.n_tasks
    ends = builder(b, list(gpus), size_bytes * protocol.wire, gpu_host=gpu_host, **kw)
    if protocol.net_scale != 1.0 or protocol.nvlink_scale != 1.0:
        sends, conn = b.sends_since(first)
        src, dst = b.connections.src[conn], b.connections.dst[conn]
        host = np.asarray(gpu_host) if gpu_host is not None else None   # (no hosts known: every hop a network one)
        inside = host[src] == host[dst] if host is not None else np.zeros(len(src), bool)
        b.scale_overheads(sends, np.where(inside, protocol.nvlink_scale, protocol.net_scale))
    return ends


def build_collective(op: str, algorithm: str, gpus: Sequence[int], size_bytes: float, *,
                     gpu_host: Sequence[int] | None = None, **kw) -> Schedule:
    """The schedule of one call (``kw``: the builder's keywords).

    Examples
    --------
    >>> s = build_collective("allreduce", "ring", [0, 1, 2, 3], 4e9)
    >>> s.n_sends, float(s.amount[0])   # 2(n-1) steps of M/n per rank
    (24, 1000000000.0)
    """
    b = ScheduleBuilder()
    build_call(b, op, algorithm, gpus, size_bytes, gpu_host=gpu_host, **kw)
    return b.build()


def run_collective(env: simpy.Environment, fabric, op: str, algorithm: str, gpus: Sequence[int],
                   size_bytes: float, *, rails: bool = False, **kw) -> Generator:
    """Run one call on ``fabric`` now (a SimPy generator: ``yield env.process(run_collective(...))``).

    Builds the call's schedule and runs it on the fabric's executor. ``kw``: the builder's keywords
    (``channels``, ``job``, ``comm``, ``chunk_bytes``, ``tcp``); ``rails``: build channel rings on
    the topology's rails (``gpu_rail``, the NCCL model).

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
    >>> env.run(env.process(run_collective(env, fabric, "allreduce", "ring", [0, 1, 2, 3], 4e9)))
    >>> round(env.now, 9)   # 2*(4-1) steps of 1e9 bytes at 1e9 B/s
    6.0
    """
    topo = fabric.topology
    schedule = _cached_call(op, algorithm, gpus, size_bytes, topo.gpu_host, topo.gpu_rail if rails else None, kw)
    yield run_schedule(env, fabric, schedule).done


#: perf: the schedules of recent calls, by call shape, reused when the shape recurs (every micro-batch
#: of a training job repeats its TP allreduces): at most this many, each of at most CACHED_TASKS tasks.
#: A schedule is immutable, and executors only read it.
CACHED_CALLS, CACHED_TASKS = 1024, 50_000
_CALLS: OrderedDict = OrderedDict()


def _cached_call(op: str, algorithm: str, gpus: Sequence[int], size_bytes: float, gpu_host, gpu_rail,
                 kw: dict) -> Schedule:
    """``build_collective`` of the call, from the cache when the same call was built before (same op,
    algorithm, GPUs with their hosts and rails, size and keywords)."""
    kw = {**kw, "gpu_rail": gpu_rail}
    if "matrix" in kw or "ready" in kw:
        return build_collective(op, algorithm, gpus, size_bytes, gpu_host=gpu_host, **kw)
    members = tuple(int(g) for g in gpus)
    rails = None if gpu_rail is None else tuple(int(gpu_rail[g]) for g in members)
    key = (op, algorithm, members, tuple(int(gpu_host[g]) for g in members), rails, float(size_bytes),
           tuple(sorted((k, v) for k, v in kw.items() if k != "gpu_rail")))
    hit = _CALLS.get(key)
    if hit is not None:
        _CALLS.move_to_end(key)
        return hit
    schedule = build_collective(op, algorithm, gpus, size_bytes, gpu_host=gpu_host, **kw)
    if len(schedule) <= CACHED_TASKS:
        _CALLS[key] = schedule
        if len(_CALLS) > CACHED_CALLS:
            _CALLS.popitem(last=False)
    return schedule


# ---------------------------------------------------------------------------------- records
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
    protocol: str = ""         #: NCCL's protocol the call ran (``LL``, ``LL128``, ``Simple``; ``""``: none)

    @property
    def duration_s(self) -> float:
        """Wall time of the call."""
        return self.end_s - self.start_s

    @property
    def algbw_Bps(self) -> float:
        """Algorithm bandwidth: size over time; NaN (missing in the results) for a call that took no time
        (nothing to send between GPUs, e.g. an all-to-all-v whose tokens all stay on their rank)."""
        return self.size_bytes / self.duration_s if self.duration_s > 0 else math.nan

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

"""Trace-driven jobs: a Chakra trace or a saved schedule, planned against the placed ranks and run as one
schedule per iteration; and any collective workload's schedule, for export.

A trace job is *planned* once (the files read and validated, the schedule compiled on the job's
GPUs) and *run* as a SimPy process that submits the schedule ``iterations`` times back to back.
Each collective call of a Chakra trace becomes a :class:`~netsim.collectives.CollectiveRecord`
whose start is when its first rank entered it and whose end is when its last rank was done (from
the run's task times); its ideal and bound are those of the call alone, all ranks entering at once.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

import numpy as np
import simpy

from netsim.collectives import CollectiveRecord
from netsim.collectives.base import build_call
from netsim.collectives.ideal import IdealModel
from netsim.collectives.nccl import FLUID, CollectiveModel
from netsim.config.trace_specs import TRACE_TYPES, ChakraWorkload, ScheduleWorkload
from netsim.engine import Fabric
from netsim.engine.model import JOIN, Schedule, ScheduleBuilder
from netsim.engine.reference import run_schedule
from netsim.engine.schedule_io import ranks_of, read_schedule
from netsim.errors import ConfigError
from netsim.topology import Topology
from netsim.workload.chakra import TraceCall, build_trace, read_trace, trace_files


@dataclass
class TracePlan:
    """A trace job, compiled: its schedule on the placed GPUs and its collective calls."""

    kind: str                    #: ``chakra`` or ``schedule``
    source: str                  #: the trace prefix or the schedule file
    schedule: Schedule
    iterations: int
    trace_calls: list[TraceCall] = field(default_factory=list)
    tcp_comms: list[int] = field(default_factory=list)  #: communicators that talk TCP

    def calls(self) -> list[TraceCall]:
        """The collective calls (one record each per iteration)."""
        return list(self.trace_calls)


def is_trace(workload) -> bool:
    """True for the workload types of this module (``chakra``, ``schedule``)."""
    return getattr(workload, "type", None) in TRACE_TYPES


def _located(exc: ConfigError) -> ConfigError:
    """A trace file's error as an error at ``workload.path``, the file and its place (``file: row 3,
    column 'src'``, ``file:12``) kept in the message, so the experiment file's line is added when it
    is reported."""
    if not exc.file:
        return ConfigError(exc.message, exc.path or "workload.path")
    return ConfigError(exc.format(), "workload.path")


def trace_ranks(workload: ChakraWorkload | ScheduleWorkload) -> int:
    """How many ranks (GPUs) the job places: ``ranks``, else the files' count / the schedule's largest rank + 1."""
    if workload.ranks is not None:
        return workload.ranks
    try:
        if isinstance(workload, ChakraWorkload):
            return len(trace_files(workload.path))
        return max(1, ranks_of(read_schedule(workload.path)))
    except ConfigError as exc:
        raise _located(exc) from None


def plan_trace(workload: ChakraWorkload | ScheduleWorkload, gpus: Sequence[int], topology: Topology,
               job: int = 0, model: CollectiveModel = FLUID) -> TracePlan:
    """Read, validate and compile the job's trace on ``gpus`` (rank order); a Chakra trace's calls are
    built as ``model`` says (:mod:`netsim.collectives.nccl`)."""
    gpus = [int(g) for g in gpus]
    try:
        if isinstance(workload, ChakraWorkload):
            trace = read_trace(workload.path, workload.ranks)
            schedule, calls = build_trace(trace, gpus, algorithms=workload.algorithms, channels=workload.channels,
                                          job=job, groups=workload.groups, ops_per_s=workload.ops_per_s,
                                          gpu_host=topology.gpu_host, mixes_fabrics=topology.mixes_fabrics,
                                          model=model, gpu_rail=model.rails_of(topology),
                                          protocol=workload.protocol, topology=topology)
            tcp = sorted({c.comm for c in calls if c.tcp})
            return TracePlan("chakra", workload.path, schedule, workload.iterations, calls, tcp)
        schedule = on_gpus(read_schedule(workload.path, n_ranks=len(gpus)), gpus, job)
        c = schedule.connections
        tcp = sorted(set(c.column("comm")[c.column("tcp")].tolist())) if len(c) else []
        return TracePlan("schedule", workload.path, schedule, workload.iterations, [], tcp)
    except ConfigError as exc:
        raise _located(exc) from None


def on_gpus(schedule: Schedule, gpus: Sequence[int], job: int | None = None) -> Schedule:
    """``schedule`` with its connections' ranks replaced by ``gpus[rank]`` (and their job by ``job``)."""
    table = ScheduleBuilder().connections
    c = schedule.connections
    if not len(c):
        return Schedule(schedule.kind, schedule.conn, schedule.amount, schedule.dep_ptr, schedule.dep_idx, table,
                        schedule.overhead_scale)
    gpu = np.asarray(gpus, dtype=np.int64)
    ids = table.add(gpu[c.column("src")], gpu[c.column("dst")], c.column("channel"),
                    c.column("job") if job is None else job, c.column("comm"), c.column("tcp"))
    conn = np.where(schedule.conn >= 0, ids[np.maximum(schedule.conn, 0)], -1)
    return Schedule(schedule.kind, conn, schedule.amount, schedule.dep_ptr, schedule.dep_idx, table,
                    schedule.overhead_scale)


def run_trace(env: simpy.Environment, fabric: Fabric, plan: TracePlan, *, records: list[CollectiveRecord],
              ideal: IdealModel | None = None, job: int = 0) -> Generator:
    """Run a planned trace job ``plan.iterations`` times back to back, appending one record per collective call."""
    for comm in plan.tcp_comms:
        fabric.use_tcp(job, comm)
    bounds = {}
    if ideal is not None:
        for call in plan.trace_calls:
            if call.size_bytes > 0 and len(call.ranks) > 1:
                bounds[call.index] = ideal.ideal(call.op, call.algorithm, call.gpus, call.size_bytes,
                                                 channels=call.channels, tcp=call.tcp,
                                                 chunk_bytes=call.chunk_bytes, rails=call.rails,
                                                 protocol=call.protocol)
    for iteration in range(plan.iterations):
        t0 = env.now
        run = run_schedule(env, fabric, plan.schedule)
        yield run.done
        times = np.array(run.times, dtype=np.float64)
        for call in plan.trace_calls:
            entered = np.where(call.ready >= 0, times[np.maximum(call.ready, 0)], t0)
            bound = bounds.get(call.index)
            records.append(CollectiveRecord(
                job, iteration, call.op, call.algorithm, call.size_bytes, len(call.ranks), call.channels,
                float(entered.min()), float(times[call.ends].max()),
                ideal_s=bound.time_s if bound else math.nan, bound_s=bound.bound_s if bound else math.nan,
                slack_s=fabric.tolerance_s * bound.chain if bound else 0.0, step=call.index, label=call.label,
                comm=call.comm, protocol=call.protocol.name if call.protocol is not None else ""))


# ---------------------------------------------------------------------------------- export
def job_schedule(plan, gpus: Sequence[int], job: int = 0, gpu_host: Sequence[int] | None = None,
                 gpu_rail: Sequence[int] | None = None) -> Schedule:
    """One schedule for a whole planned job, its connections in rank space (rank ``r`` is ``gpus[r]``):
    what ``netsim export-schedule`` writes, and what a ``schedule`` workload reads back.

    A trace job's schedule as compiled; a collective or sequence workload's calls chained as the
    run executes them (each call starts when the previous one has ended on every rank; concurrent
    steps start together). Training jobs are run call by call as SimPy processes and have no
    single schedule: ConfigError.
    """
    if isinstance(plan, TracePlan):
        schedule = plan.schedule
        if plan.iterations > 1:
            schedule = _repeat(schedule, plan.iterations)
    elif hasattr(plan, "steps") and hasattr(plan, "mode"):
        b = ScheduleBuilder()
        _sequence(b, plan, -1, job, gpu_host, gpu_rail)
        schedule = b.build()
    else:
        raise ConfigError("only collective, sequence, chakra and schedule workloads compile to one schedule; a "
                          "training job runs call by call", "workload.type")
    rank_of = {int(g): r for r, g in enumerate(gpus)}
    c = schedule.connections
    if not len(c):
        return schedule
    lookup = np.vectorize(rank_of.__getitem__, otypes=[np.int64])
    table = ScheduleBuilder().connections
    ids = table.add(lookup(c.column("src")), lookup(c.column("dst")), c.column("channel"), c.column("job"),
                    c.column("comm"), c.column("tcp"))
    conn = np.where(schedule.conn >= 0, ids[np.maximum(schedule.conn, 0)], -1)
    return Schedule(schedule.kind, conn, schedule.amount, schedule.dep_ptr, schedule.dep_idx, table,
                    schedule.overhead_scale)


def _sequence(b: ScheduleBuilder, plan, ready: int, job: int, gpu_host, gpu_rail=None) -> int:
    """Append a SequencePlan after task ``ready`` (-1: none); the JOIN (or task) at its end."""
    for _ in range(plan.iterations):
        if plan.mode == "serial":
            for step in plan.steps:
                ready = _step(b, step, ready, job, gpu_host, gpu_rail)
        else:
            ends = [_step(b, step, ready, job, gpu_host, gpu_rail) for step in plan.steps]
            ready = int(b.join(after=[[e for e in ends if e >= 0]])[0])
    return ready


def _step(b: ScheduleBuilder, step, ready: int, job: int, gpu_host, gpu_rail=None) -> int:
    if hasattr(step, "steps"):
        return _sequence(b, step, ready, job, gpu_host, gpu_rail)
    for _ in range(step.iterations):
        ends = build_call(b, step.op, step.algorithm, step.gpus, step.size_bytes, channels=step.channels, job=job,
                          comm=step.comm, chunk_bytes=step.chunk_bytes, tcp=step.tcp,
                          ready=None if ready < 0 else ready, gpu_host=gpu_host,
                          gpu_rail=gpu_rail if step.rails else None, protocol=step.protocol)
        ready = int(b.join(after=[[int(e) for e in ends if e >= 0]])[0])
    return ready


def _repeat(schedule: Schedule, times: int) -> Schedule:
    """``schedule`` ``times`` times back to back: each copy's first tasks wait for a JOIN of the previous
    copy's last tasks (those nothing waits for), as iterations run."""
    n = len(schedule)
    counts = np.diff(schedule.dep_ptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    roots = np.flatnonzero(counts == 0)
    sinks = np.flatnonzero(np.diff(schedule.successors()[0]) == 0)
    kinds, conns, amounts, all_counts, idx = [], [], [], [], []
    for c in range(times):
        off = c * (n + 1)
        extra = roots if c else roots[:0]
        cnt = counts.copy()
        cnt[extra] += 1
        who = np.concatenate([owner, extra])
        order = np.argsort(who, kind="stable")
        idx += [np.concatenate([schedule.dep_idx + off, np.full(len(extra), off - 1)])[order], sinks + off]
        kinds += [schedule.kind, np.array([JOIN], np.int8)]
        conns += [schedule.conn, np.array([-1])]
        amounts += [schedule.amount, np.zeros(1)]
        all_counts += [cnt, np.array([len(sinks)])]
    ptr = np.zeros(times * (n + 1) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(all_counts), out=ptr[1:])
    scale = schedule.overhead_scale
    if scale is not None:
        scale = np.tile(np.append(scale, 1.0), times)
    return Schedule(np.concatenate(kinds), np.concatenate(conns).astype(np.int64), np.concatenate(amounts),
                    ptr, np.concatenate(idx).astype(np.int64), schedule.connections, scale)

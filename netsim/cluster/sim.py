"""A trace-driven multi-tenant cluster: jobs arrive, wait, are placed, share the fabric, and leave.

The experiment's ``cluster:`` section names a job trace (:mod:`netsim.cluster.trace`) and a
scheduler (:mod:`netsim.cluster.scheduler`). Each arriving job joins the queue; when the scheduler
starts it, the experiment's placement policy picks free GPUs and its routing policy routes its
traffic together with every other running job's (C4P plans over all of them).

**Extrapolation** (``mode: extrapolate``, the default). Between two changes of the running set
(an arrival that starts, a departure) nothing about the traffic changes, so netsim simulates
``sample_iterations`` iterations of every running job together once per change and runs each job
at the iteration time it measured until the next change (when the set changes again the jobs
are re-simulated). A job given by ``duration_s`` runs the iterations that take that long alone.
``mode: full`` simulates every iteration of every job in one simulation instead, and is how the
extrapolation's error is measured (docs/cluster.md).

**Per job** (``cluster_jobs.parquet``): submit, start and end; queueing delay; job completion time
(JCT, submit to end); iterations; mean iteration time while running; iteration time alone on the
same GPUs; slowdown (time running over time alone). **Per epoch** (``cluster_series.parquet``):
running and waiting jobs, busy GPUs, utilisation, and the core links' mean and peak load.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from netsim.cluster.sampling import Sample, make_fabric, one_pass, window
from netsim.cluster.scheduler import Waiting, choose
from netsim.cluster.trace import JobTrace, read_trace
from netsim.cluster.view import ClusterFabric
from netsim.config import ExperimentSpec, JobSpec, TrainingWorkload
from netsim.engine import Environment, Fabric
from netsim.engine.ideal import core_mask
from netsim.errors import ConfigError
from netsim.experiment.results import CLUSTER_JOB_COLUMNS, CLUSTER_SERIES_COLUMNS
from netsim.experiment.run import (
    JobPlan,
    RunResult,
    _rngs,
    build_topology,
    choose_partitions,
    spec_hash,
)
from netsim.placement import host_domains, make_placement
from netsim.topology import Topology
from netsim.workload import plan_workload, run_workload
from netsim.workload.pipeline import plan_training, run_training

JOB_COLUMNS, SERIES_COLUMNS = CLUSTER_JOB_COLUMNS, CLUSTER_SERIES_COLUMNS


@dataclass
class TraceJob:
    """One job of the trace on its way through the cluster."""

    index: int
    name: str
    kind: str               #: ``training`` or ``collective``
    model: str
    n_gpus: int
    submit_s: float
    spec: JobSpec           #: the workload, set to run one sample (``sample_iterations`` iterations)
    key: str                #: the workload's identity (the alone-time cache)
    iterations: int = 0
    estimate_s: float = math.nan      #: its length alone, as the scheduler is told
    gpus: np.ndarray | None = None
    start_s: float = math.nan
    end_s: float = math.nan
    done: float = 0.0                 #: iterations done (a fraction between changes)
    iteration_s: float = math.nan     #: current iteration time (extrapolation)
    busy_s: float = 0.0               #: time spent running, summed over epochs
    epochs: int = 0
    alone_s: float = math.nan         #: iteration time alone on its GPUs
    plan: JobPlan | None = None
    starts: np.ndarray | None = None  #: when its iterations began in its last sample (run time)

    def last_start(self, t: float) -> float:
        """When its iteration under way at ``t`` began (extrapolation): in its last sample, or past the
        sample's end every ``iteration_s``; ``t`` itself for a job that has not run yet."""
        if self.starts is None or not len(self.starts) or t <= self.starts[0]:
            return t
        i = int(np.searchsorted(self.starts, t, side="right")) - 1
        if i < len(self.starts) - 1:
            return float(self.starts[i])
        last = float(self.starts[-1])
        return last + math.floor((t - last) / self.iteration_s) * self.iteration_s


@dataclass
class ClusterRun:
    """State of one cluster run (see the module docstring)."""

    spec: ExperimentSpec
    topology: Topology
    jobs: list[TraceJob]
    free: np.ndarray                       #: per GPU, whether no job holds it
    placement_rng: np.random.Generator
    series: list[tuple] = field(default_factory=list)
    alone: dict[tuple, Sample] = field(default_factory=dict)
    groups: dict[frozenset, Sample] = field(default_factory=dict)   #: the current epoch's samples, by group
    plans: dict[tuple, object] = field(default_factory=dict)        #: training plans by (job, GPUs)
    domains: np.ndarray | None = None                               #: per host, its leaf (edge switches)
    fabric: ClusterFabric | None = None
    events: int = 0
    samples: int = 0


# ---------------------------------------------------------------------------------- building the jobs
def trace_jobs(spec: ExperimentSpec, trace: JobTrace) -> list[TraceJob]:
    """The trace's jobs as :class:`TraceJob` s, their workloads validated (one sample each)."""
    rows = trace.jobs.head(spec.cluster.max_jobs) if spec.cluster.max_jobs else trace.jobs
    out = []
    for i, row in enumerate(rows.itertuples(index=False)):
        workload = trace.workload(row.job)
        workload.pop("iterations", None)
        try:
            job = JobSpec.model_validate({"name": _name(row.job, i), "workload": workload})
        except (ValueError, ConfigError) as exc:  # (pydantic's ValidationError is a ValueError)
            raise ConfigError(f"job {row.job!r} of the trace: {exc}", "cluster.trace") from None
        out.append(TraceJob(i, str(row.job), str(row.kind), str(row.model), int(row.gpus), float(row.submit_s), job,
                            json.dumps(workload, sort_keys=True, default=str)))
    return out


def _name(job: str, i: int) -> str:
    """A job name the spec accepts (trace names allow ``:``, which job names do not)."""
    clean = re.sub(r"[^A-Za-z0-9_.-]", "-", job)
    return clean if clean and clean[0].isalnum() else f"job-{i}"


def plan_job(run: ClusterRun, job: TraceJob, gpus: np.ndarray, iterations: int = 1) -> JobPlan:
    """``job`` resolved on ``gpus`` to run ``iterations`` iterations (its index is its trace position,
    so its connections keep their identity, and hashed paths, from one sample to the next)."""
    spec, topo = run.spec, run.topology
    w = job.spec.workload
    if isinstance(w, TrainingWorkload):
        plan = run.plans.get((job.index, tuple(gpus.tolist())))
        if plan is None:
            plan = plan_training(w, gpus.tolist(), topo, job=job.index, name=job.name, seed=spec.seed)
            jp = JobPlan(job.index, job.name, "training", spec.placement.type, gpus, plan, 0.0, 1, job.spec)
            choose_partitions(spec, topo, [jp])
            plan = run.plans[(job.index, tuple(gpus.tolist()))] = jp.plan
        return JobPlan(job.index, job.name, "training", spec.placement.type, gpus, plan, 0.0, iterations, job.spec)
    plan = plan_workload(w, gpus.tolist(), topology=topo)
    return JobPlan(job.index, job.name, "collective", spec.placement.type, gpus, plan, 0.0, iterations, job.spec)


# ---------------------------------------------------------------------------------- samples
def alone(run: ClusterRun, job: TraceJob, gpus: np.ndarray) -> Sample:
    """``job`` alone on ``gpus``, one iteration (every iteration alone is the same; cached by workload and GPUs)."""
    key = (job.key, tuple(gpus.tolist()))
    hit = run.alone.get(key)
    if hit is None:
        hit, events = one_pass(run.spec, run.topology, plan_job(run, job, gpus, iterations=1))
        run.alone[key] = hit
        run.events += events
        run.samples += 1
    return hit


def alone_iteration(run: ClusterRun, job: TraceJob, gpus: np.ndarray) -> float:
    """``job``'s iteration time alone on ``gpus``."""
    (seconds,) = alone(run, job, gpus).times.values()  # (cached under the job that ran it first)
    return seconds


def resolve_lengths(run: ClusterRun, trace: JobTrace) -> None:
    """Each job's iterations (a ``duration_s`` row: as many as take that long alone) and the
    scheduler's estimate of its length, from its iteration time alone on the first GPUs."""
    rows = trace.jobs
    for job in run.jobs:
        row = rows.iloc[job.index]
        first = np.arange(job.n_gpus)
        per_iteration = alone_iteration(run, job, first)
        if pd.isna(row["iterations"]):
            job.iterations = max(1, round(float(row["duration_s"]) / per_iteration))
        else:
            job.iterations = int(row["iterations"])
        job.estimate_s = job.iterations * per_iteration


def components(run: ClusterRun, jobs: list[TraceJob]) -> list[list[TraceJob]]:
    """The running jobs grouped so that jobs in different groups share no link: they cannot slow
    each other, and each group is sampled on its own (a group of one runs as it does alone).

    Two jobs may share a link when they share a host, or when both span more than one leaf (more
    than one set of edge switches) and, on a leaf-spine, reach a common leaf (two leaves' traffic
    meets only on links of one of the two); on other fabrics any two jobs spanning domains may meet
    (routes may cross any group), and one spanning domains may cross any job's group.
    """
    domains = run.domains
    leaf_spine = run.spec.topology.type == "leaf_spine"
    hosts = [set(np.unique(run.topology.gpu_host[j.gpus]).tolist()) for j in jobs]
    spans = [set(domains[list(h)].tolist()) for h in hosts]
    parent = list(range(len(jobs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a in range(len(jobs)):
        for b in range(a):
            wide_a, wide_b = len(spans[a]) > 1, len(spans[b]) > 1
            meet = bool(hosts[a] & hosts[b]) or (
                (wide_a and wide_b and (spans[a] & spans[b] or not leaf_spine))
                or (not leaf_spine and (wide_a or wide_b)))
            if meet:
                parent[find(a)] = find(b)
    groups: dict[int, list[TraceJob]] = {}
    for i, j in enumerate(jobs):
        groups.setdefault(find(i), []).append(j)
    return list(groups.values())


def measure(run: ClusterRun, running: list[TraceJob], now: float) -> list[Sample]:
    """Samples of the running jobs at ``now``, group by group (:func:`components`): a group that ran
    the same last time keeps its sample; a group of one is the job alone.

    A sample keeps the jobs' phases, as a full run does: it begins when the earliest of the group's
    current iterations began (:meth:`TraceJob.last_start`), each running job starting its current
    iteration when it began and a job starting now at ``now``. (Starting every job at a random
    phase instead loses the phase relations the running jobs settled into, such as two jobs that
    lock their gradient allreduces in step.)"""
    out, kept = [], {}
    for group in components(run, running):
        key = frozenset(j.index for j in group)
        hit = run.groups.get(key)
        if hit is None:
            began = {j.index: j.last_start(now) for j in group}
            origin = min(began.values())
            offsets = {i: t - origin for i, t in began.items()}
            if len(group) == 1:
                job = group[0]
                hit = replace(alone(run, job, job.gpus), times={job.index: alone_iteration(run, job, job.gpus)})
                hit.starts = {job.index: np.zeros(1)}
            else:
                hit, events = window(run.spec, run.topology, [plan_job(run, j, j.gpus) for j in group], offsets,
                                     run.spec.cluster.sample_iterations)
                run.events += events
                run.samples += 1
            for j in group:
                j.starts = origin + hit.starts[j.index]
        kept[key] = hit
        out.append(hit)
    run.groups = kept
    return out


# ---------------------------------------------------------------------------------- scheduling
def start_jobs(run: ClusterRun, queue: list[TraceJob], running: list[TraceJob], now: float,
               expected_end: Callable[[TraceJob], float]) -> list[TraceJob]:
    """Start what the scheduler picks: place each on free GPUs (the experiment's placement)."""
    waiting = [Waiting(j.index, j.n_gpus, j.estimate_s) for j in queue]
    ends = [(expected_end(j), j.n_gpus) for j in running]
    picked = choose(run.spec.cluster.scheduler, waiting, int(run.free.sum()), now, ends)
    policy = make_placement(run.spec.placement.type, run.spec.placement.options)
    started = []
    for w in picked:
        job = run.jobs[w.index]
        job.gpus = np.asarray(policy.place(job.n_gpus, run.topology, run.placement_rng,
                                           np.flatnonzero(run.free)), dtype=np.int64)
        run.free[job.gpus] = False
        job.start_s = now
        job.plan = plan_job(run, job, job.gpus, job.iterations)
        queue.remove(job)
        started.append(job)
    return started


def _core(topology: Topology) -> np.ndarray:
    """Switch-to-switch links (the cluster's shared fabric)."""
    core = core_mask(topology)
    return core if core.any() else np.ones(len(topology.links), dtype=bool)


def extrapolate(run: ClusterRun) -> None:
    """The extrapolated run (see the module docstring)."""
    jobs, t = run.jobs, 0.0
    arrivals = sorted(jobs, key=lambda j: (j.submit_s, j.index))
    queue: list[TraceJob] = []
    running: list[TraceJob] = []
    core = _core(run.topology)
    run.fabric = ClusterFabric(run.topology.links.capacity_Bps)
    samples: list[Sample] = []
    nxt, dirty = 0, False
    while nxt < len(arrivals) or queue or running:
        while nxt < len(arrivals) and arrivals[nxt].submit_s <= t:
            queue.append(arrivals[nxt])
            nxt += 1
        started = start_jobs(run, queue, running, t, lambda j: j.start_s + j.estimate_s)
        running += started
        if (started or dirty) and running:  # the running set changed: sample the groups that changed
            samples = measure(run, running, t)
            for smp in samples:
                for index, seconds in smp.times.items():
                    run.jobs[index].iteration_s = seconds
            for j in running:
                j.epochs += 1
        dirty = False
        finish = [t + (j.iterations - j.done) * j.iteration_s for j in running]
        t_next = min(finish + ([arrivals[nxt].submit_s] if nxt < len(arrivals) else []), default=math.inf)
        if math.isinf(t_next):
            raise ConfigError(f"job {queue[0].name!r} needs {queue[0].n_gpus} GPUs and can never start",
                              "cluster.trace")
        if t_next > t:
            busy = int((~run.free).sum())
            mean = peak = 0.0
            if running:
                for smp in samples:
                    run.fabric.add(smp, t_next - t)
                rate = sum(smp.byte_rate[core] for smp in samples)
                mean = float((rate / run.topology.links.capacity_Bps[core]).mean())
                peak = max(float(smp.peak_util[core].max()) for smp in samples)
            run.series.append((t, t_next, len(running), len(queue), busy, busy / len(run.free), mean, peak))
        for j, end in zip(list(running), finish):
            j.done += (t_next - t) / j.iteration_s
            j.busy_s += t_next - t
            if end <= t_next * (1 + 1e-12):
                j.end_s, j.done = end, j.iterations
                run.free[j.gpus] = True
                running.remove(j)
                dirty = True
        t = t_next


class EpochLog:
    """The full run's ``cluster_series``: one row per interval between changes of the running or waiting
    jobs, its core load from the bytes the core links carried in it (a message's bytes count when it
    drains); ``core_peak_util`` is the busiest core link's mean utilisation over the interval (the full
    run keeps no per-interval instantaneous peak)."""

    def __init__(self, run: ClusterRun, fabric: Fabric):
        self.run, self.fabric = run, fabric
        self.core = _core(run.topology)
        self.capacity = run.topology.links.capacity_Bps[self.core]
        self.state: tuple = (0.0, 0, 0, 0, np.zeros(int(self.core.sum())))

    def open(self, now: float, running: int, waiting: int) -> None:
        """The running set as the scheduler left it at ``now``."""
        self.state = (now, running, waiting, int((~self.run.free).sum()), self.fabric.link_bytes[self.core])

    def close(self, now: float) -> None:
        """End the interval opened last at ``now`` (nothing for an empty one)."""
        t, running, waiting, busy, carried = self.state
        if now > t:
            util = (self.fabric.link_bytes[self.core] - carried) / (self.capacity * (now - t))
            mean, peak = (float(util.mean()), float(util.max())) if len(util) else (0.0, 0.0)
            self.run.series.append((t, now, running, waiting, busy, busy / len(self.run.free), mean, peak))


def full(run: ClusterRun, on_start=None) -> Fabric:
    """Every iteration of every job in one simulation, the scheduler a process reacting to arrivals
    and departures (the reference the extrapolation is measured against)."""
    spec = run.spec
    env = Environment()
    fabric = make_fabric(spec, run.topology, env)
    queue: list[TraceJob] = []
    running: list[TraceJob] = []
    changed = [env.event()]
    iteration_log: dict[int, list] = {}
    epochs = EpochLog(run, fabric)

    def job_process(job: TraceJob):
        jp = job.plan
        log = iteration_log.setdefault(job.index, [])
        if jp.kind == "training":
            yield env.process(run_training(env, fabric, jp.plan, iterations=job.iterations, records=[],
                                           iteration_records=log))  # (the plan's own iterations: 1)
        else:
            for _ in range(job.iterations):
                yield env.process(run_workload(env, fabric, jp.plan, records=[], job=job.index))
        job.end_s, job.done = env.now, job.iterations
        job.busy_s = job.end_s - job.start_s
        run.free[job.gpus] = True
        running.remove(job)
        if not changed[0].triggered:
            changed[0].succeed()

    def scheduler():
        arrivals = sorted(run.jobs, key=lambda j: (j.submit_s, j.index))
        nxt = 0
        while nxt < len(arrivals) or queue or running:
            while nxt < len(arrivals) and arrivals[nxt].submit_s <= env.now:
                queue.append(arrivals[nxt])
                nxt += 1
            epochs.close(env.now)
            for job in start_jobs(run, queue, running, env.now, lambda j: j.start_s + j.estimate_s):
                running.append(job)
                env.process(job_process(job))
            epochs.open(env.now, len(running), len(queue))
            changed[0] = env.event()
            waits = [changed[0]] + ([env.timeout(arrivals[nxt].submit_s - env.now)] if nxt < len(arrivals) else [])
            yield env.any_of(waits)
        epochs.close(env.now)

    env.process(scheduler())
    if on_start is not None:
        on_start(env, [])
    env.run()
    fabric.finalize()
    run.events += env.events_processed
    for job in run.jobs:
        log = iteration_log.get(job.index, [])
        job.iteration_s = float(np.mean([r.duration_s for r in log])) if log else job.busy_s / job.iterations
        job.epochs = 1
    return fabric


# ---------------------------------------------------------------------------------- the run
def run_cluster(spec: ExperimentSpec, *, on_start=None) -> RunResult:
    """Run the experiment's cluster section (see the module docstring); a :class:`RunResult` whose
    ``extra`` holds the ``cluster_jobs`` and ``cluster_series`` tables."""
    t0 = time.perf_counter()
    topology = build_topology(spec)
    trace = read_trace(spec.cluster.trace, max_gpus=topology.n_gpus)
    run = ClusterRun(spec, topology, [], np.ones(topology.n_gpus, dtype=bool), _rngs(spec)[0])
    run.domains = host_domains(topology)
    run.jobs = trace_jobs(spec, trace)
    resolve_lengths(run, trace)
    if spec.cluster.mode == "full":
        fabric = full(run, on_start)
    else:
        extrapolate(run)
        fabric = run.fabric
    for job in run.jobs:
        job.alone_s = alone_iteration(run, job, job.gpus)
    run_id = spec_hash(spec)
    horizon = max((j.end_s for j in run.jobs), default=0.0)
    result = RunResult(spec=spec, run_id=run_id, topology=topology,
                       gpus=np.concatenate([j.gpus for j in run.jobs]) if run.jobs else np.zeros(0, np.int64),
                       fabric=fabric, collectives=[], sim_time_s=horizon, wall_s=time.perf_counter() - t0,
                       events=run.events)
    result.extra["cluster_jobs"] = jobs_table(run, run_id)
    result.extra["cluster_series"] = pd.DataFrame([(run_id, *s) for s in run.series], columns=SERIES_COLUMNS)
    return result


def jobs_table(run: ClusterRun, run_id: str) -> pd.DataFrame:
    """One row per job (see the module docstring)."""
    rows = []
    for j in run.jobs:
        running = j.end_s - j.start_s
        rows.append((run_id, j.index, j.name, j.kind, j.model, j.n_gpus, j.submit_s, j.start_s, j.end_s,
                     j.start_s - j.submit_s, j.end_s - j.submit_s, j.iterations, running / j.iterations, j.alone_s,
                     running / (j.iterations * j.alone_s), len(np.unique(run.topology.gpu_host[j.gpus])), j.epochs))
    return pd.DataFrame(rows, columns=JOB_COLUMNS)

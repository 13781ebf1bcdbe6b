"""The state of a trace-driven cluster run (:mod:`netsim.cluster.sim`): the trace's jobs on their way
through the cluster, their workloads planned on the GPUs they get, their iteration time alone, and
the scheduler's decisions placing them on free GPUs."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from netsim.cluster.sampling import Sample, one_pass
from netsim.cluster.scheduler import Waiting, choose
from netsim.cluster.trace import JobTrace
from netsim.cluster.view import ClusterFabric
from netsim.collectives.nccl import MODELS
from netsim.config import ExperimentSpec, JobSpec, TrainingWorkload
from netsim.engine.ideal import core_mask
from netsim.errors import ConfigError
from netsim.experiment.run import JobPlan, choose_partitions
from netsim.placement import make_placement
from netsim.topology import Topology
from netsim.workload import plan_workload
from netsim.workload.pipeline import plan_training


@dataclass
class TraceJob:
    """One job of the trace on its way through the cluster."""

    index: int
    name: str
    kind: str               #: ``training`` or ``collective``
    model: str
    n_gpus: int
    submit_s: float
    spec: JobSpec           #: the workload (one iteration; a sample repeats it)
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
            plan = plan_training(w, gpus.tolist(), topo, job=job.index, name=job.name, seed=spec.seed,
                                 collective_model=MODELS[spec.model])
            jp = JobPlan(job.index, job.name, "training", spec.placement.type, gpus, plan, 0.0, 1, job.spec)
            choose_partitions(spec, topo, [jp])
            plan = run.plans[(job.index, tuple(gpus.tolist()))] = jp.plan
        return JobPlan(job.index, job.name, "training", spec.placement.type, gpus, plan, 0.0, iterations, job.spec)
    plan = plan_workload(w, gpus.tolist(), topology=topo, model=MODELS[spec.model])
    return JobPlan(job.index, job.name, "collective", spec.placement.type, gpus, plan, 0.0, iterations, job.spec)


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


def core_links(topology: Topology) -> np.ndarray:
    """Switch-to-switch links (the cluster's shared fabric)."""
    core = core_mask(topology)
    return core if core.any() else np.ones(len(topology.links), dtype=bool)



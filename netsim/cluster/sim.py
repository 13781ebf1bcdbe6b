"""A trace-driven multi-tenant cluster: jobs arrive, wait, are placed, share the fabric, and leave.

The experiment's ``cluster:`` section names a job trace (:mod:`netsim.cluster.trace`) and a
scheduler (:mod:`netsim.cluster.scheduler`). Each arriving job joins the queue; when the scheduler
starts it, the experiment's placement policy picks free GPUs and its routing policy routes its
traffic together with every other running job's (C4P plans over all of them).

**Extrapolation** (``mode: extrapolate``, the default). Between two changes of the running set
(an arrival that starts, a departure) nothing about the traffic changes, so netsim simulates the
running jobs together once per change, each from where it is in its iteration, until every job has
run ``sample_iterations`` whole iterations (:mod:`netsim.cluster.sampling`), and runs each job at the
iteration time it measured until the next change (when the set changes again the jobs are
re-simulated). A job given by ``duration_s`` runs the iterations that take that long alone.
``mode: full`` simulates every iteration of every job in one simulation instead, and is how the
extrapolation's error is measured (docs/cluster.md).

**Per job** (``cluster_jobs.parquet``): submit, start and end; queueing delay; job completion time
(JCT, submit to end); iterations; mean iteration time while running; iteration time alone on the
same GPUs; slowdown (time running over time alone). **Per epoch** (``cluster_series.parquet``):
running and waiting jobs, busy GPUs, utilisation, and the core links' mean and peak load.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pandas as pd

from netsim.cluster.full import full
from netsim.cluster.jobs import (  # noqa: F401  (trace_jobs: read by netsim.experiment.run)
    ClusterRun,
    TraceJob,
    alone,
    alone_iteration,
    core_links,
    plan_job,
    resolve_lengths,
    start_jobs,
    trace_jobs,
)
from netsim.cluster.sampling import Sample, window
from netsim.cluster.trace import read_trace
from netsim.cluster.view import ClusterFabric
from netsim.config import ExperimentSpec
from netsim.errors import ConfigError
from netsim.experiment.results import CLUSTER_JOB_COLUMNS, CLUSTER_SERIES_COLUMNS
from netsim.experiment.run import RunResult, _rngs, build_topology, spec_hash
from netsim.placement import host_domains

JOB_COLUMNS, SERIES_COLUMNS = CLUSTER_JOB_COLUMNS, CLUSTER_SERIES_COLUMNS


# ---------------------------------------------------------------------------------- epochs
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


def extrapolate(run: ClusterRun) -> None:
    """The extrapolated run (see the module docstring)."""
    jobs, t = run.jobs, 0.0
    arrivals = sorted(jobs, key=lambda j: (j.submit_s, j.index))
    queue: list[TraceJob] = []
    running: list[TraceJob] = []
    core = core_links(run.topology)
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

"""Closed-form counts of a trace-driven cluster run (``cluster:``) for the pre-flight estimate.

A cluster run (:mod:`netsim.cluster.sim`, extrapolated) simulates a sample of every running job
together each time the running set changes, and each job once alone. Its jobs are known before the
run (the trace is a small table), its running sets are not (they follow from the scheduler and the
simulated iteration times). So: each job's sample is counted in closed form
(:func:`netsim.experiment.counts.count_workload`'s per-job counts); memory takes the heaviest set
of jobs that fits on the fabric at once (an upper bound on any running set's sample); time takes
two changes per job (its start and its end), each re-simulating as many jobs as fit on the fabric
side by side on average, plus each job alone (a rough guide: the real running sets are
smaller while the cluster fills and empties, and samples of groups that share no link are reused).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from netsim.cluster.trace import job_workload, read_trace
from netsim.config import ExperimentSpec, JobSpec, TrainingWorkload
from netsim.errors import ConfigError
from netsim.experiment.counts import SPREAD, RankSet, Tally, _layout, _training, _walk
from netsim.fabrics import FabricShape


@dataclass(frozen=True)
class ClusterCounts:
    """What :func:`count_cluster` finds: the heaviest running set's sample and the run's simulated messages."""

    busiest: Tally          #: counts of the heaviest set of jobs that fits on the fabric, one sample each
    jobs: int               #: jobs of the trace (after ``max_jobs``)
    messages: int           #: messages simulated over the whole run (every sample and every job alone)
    calls: int              #: collective calls simulated over the whole run


def count_cluster(spec: ExperimentSpec, shape: FabricShape) -> ClusterCounts:
    """Count a cluster run's samples from its trace (see the module docstring); ConfigError on a bad trace."""
    cluster = spec.cluster
    trace = read_trace(cluster.trace, max_gpus=shape.gpus)
    rows = trace.jobs.head(cluster.max_jobs) if cluster.max_jobs else trace.jobs
    layout = _layout(spec.placement)
    jobs, counted = [], {}  # (GPUs, the job's sample counted alone, one iteration alone); counts by workload
    for i, row in enumerate(rows.itertuples(index=False)):
        # jobs of one model, size and layout run the same sample (and the preset is read once)
        key = tuple(v for k, v in row._asdict().items() if k not in ("job", "submit_s", "duration_s", "iterations"))
        if key not in counted:
            workload = job_workload(pd.Series(row._asdict()), trace.preset_dirs)
            workload.pop("iterations", None)
            try:
                w = JobSpec.model_validate({"name": f"job-{i}", "workload": workload}).workload
            except (ValueError, ConfigError) as exc:  # (pydantic's ValidationError is a ValueError)
                raise ConfigError(f"job {row.job!r} of the trace: {exc}", "cluster.trace") from None
            counted[key] = [_count_job(spec, shape, w, int(row.gpus), layout, n)
                            for n in (cluster.sample_iterations, 1)]
        jobs.append((int(row.gpus), *counted[key]))
    busiest, gpus = Tally(shape, sprayed=spec.routing.type in SPREAD), 0
    for n, tally, _ in sorted(jobs, key=lambda job: -job[1].messages / max(job[0], 1)):
        if gpus + n <= shape.gpus:  # the heaviest jobs per GPU, as many as fit at once
            gpus += n
            _merge(busiest, tally)
    if not jobs:
        return ClusterCounts(busiest, 0, 0, 0)
    mean_gpus = sum(n for n, *_ in jobs) / len(jobs)
    side_by_side = min(len(jobs), max(1.0, shape.gpus / mean_gpus))
    sample = sum(t.messages for _, t, _ in jobs) / len(jobs) * side_by_side
    calls = sum(t.calls for _, t, _ in jobs) / len(jobs) * side_by_side
    return ClusterCounts(busiest, len(jobs), int(2 * len(jobs) * sample + sum(a.messages for *_, a in jobs)),
                         int(2 * len(jobs) * calls + sum(a.calls for *_, a in jobs)))


def _count_job(spec: ExperimentSpec, shape: FabricShape, w, gpus: int, layout: str, iterations: int) -> Tally:
    """One job of the trace alone, ``iterations`` iterations."""
    tally = Tally(shape, sprayed=spec.routing.type in SPREAD)
    if isinstance(w, TrainingWorkload):
        busy = _training(w, 0, spec.placement.type, layout, iterations, tally)
    else:
        busy = _walk(w, RankSet(0, range(gpus), layout), iterations, tally)
    tally.in_flight, tally.crossing = busy.flight, max(busy.nic, busy.core)
    return tally


def _merge(into: Tally, tally: Tally) -> None:
    """Add ``tally``'s counts (another job, on other GPUs) to ``into``."""
    into.messages += tally.messages
    into.calls += tally.calls
    offset = len(into.connections)
    into.connections.update({(offset, k): v for k, v in tally.connections.items()})
    into.pairs.update({(offset, k): v for k, v in tally.pairs.items()})
    into.ideal_keys += tally.ideal_keys
    into.ideal_key_bytes += tally.ideal_key_bytes
    into.largest_call = max(into.largest_call, tally.largest_call)
    into.in_flight += tally.in_flight
    into.crossing = max(into.crossing, tally.crossing)

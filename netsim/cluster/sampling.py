"""The cluster's samples: short simulations of the jobs running together, whose per-job iteration
times the extrapolation (:mod:`netsim.cluster.sim`) carries to the next change of the running set.

A sample of jobs whose iterations differ in length must not end inside one job's iteration: a job
with 5 ms iterations beside one with 150 ms iterations would otherwise be measured only inside the
long job's compute phase and never see its gradient allreduce. So :func:`window` keeps every job
iterating until each has run whole iterations spanning the window, and measures each job over its
whole iterations only (see its docstring for the window and why it is unbiased by the start).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from netsim.config import ExperimentSpec
from netsim.engine import Environment, Fabric
from netsim.experiment.run import JobPlan, _rngs, simulate
from netsim.routing import make_routing
from netsim.topology import Topology
from netsim.workload import run_workload
from netsim.workload.pipeline import run_training


@dataclass
class Sample:
    """What one sample simulation measured: per job its iteration time, and the fabric's load per
    second of the sample (so an epoch of any length scales it)."""

    times: dict[int, float]
    length_s: float
    byte_rate: np.ndarray      #: bytes per second per link
    busy_share: np.ndarray     #: busy fraction per link
    peak_util: np.ndarray
    offered: np.ndarray
    spray_offered: np.ndarray
    stats: dict
    pairs: tuple[int, int]
    #: Per job, when each of its iterations began (from the sample's start; empty for a job alone).
    starts: dict[int, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, times: dict[int, float], length_s: float, fabric, starts: dict | None = None) -> Sample:
        per = 1.0 / length_s if length_s > 0 else 0.0
        return cls(times, length_s, fabric.link_bytes * per, fabric.link_busy_s * per,
                   np.array(fabric.link_peak_util, dtype=np.float64),
                   np.array(fabric.offered_peak) if fabric.track_congestion else np.zeros_like(fabric.link_bytes),
                   np.array(fabric.spray_offered_peak) if fabric.track_congestion else np.zeros_like(fabric.link_bytes),
                   {k: int(fabric.stats.get(k, 0)) for k in ("flows", "subflows", "reroutes", "solver_calls")},
                   fabric.queue_pair_totals(), {i: np.asarray(v, dtype=np.float64) for i, v in (starts or {}).items()})


def quiet(spec: ExperimentSpec) -> ExperimentSpec:
    """``spec`` with the engine recording nothing a sample does not need (flows, ideal, link series)."""
    return spec.model_copy(update={"engine": spec.engine.model_copy(
        update={"record_flows": False, "ideal": False, "link_series": 0})})


def make_fabric(spec: ExperimentSpec, topology: Topology, env: Environment) -> Fabric:
    """The run's fabric on ``env``: its routing (the run's routing seed) and engine options."""
    routing = make_routing(spec.routing.type, topology, _rngs(spec)[1], spec.routing.options)
    return Fabric(env, topology, routing, completion_tolerance_s=spec.engine.completion_tolerance,
                  record_flows=spec.engine.record_flows, track_congestion=spec.engine.congestion,
                  link_series_bins=spec.engine.link_series, backend=spec.engine.backend)


def one_pass(spec: ExperimentSpec, topology: Topology, jp: JobPlan) -> tuple[Sample, int]:
    """``jp`` alone for its iterations (its iteration time: the mean over them after the first), and
    the events it took."""
    jp.began_s = jp.ended_s = math.nan
    jp.start_s = 0.0
    env, fabric, _records, iterations = simulate(quiet(spec), topology, [jp], _rngs(spec)[1], faults=False,
                                                 ideal=False)
    if jp.kind == "training":
        mine = [r.duration_s for r in sorted(iterations, key=lambda r: r.start_s)]
        seconds = float(np.mean(mine[1:] if len(mine) > 1 else mine))
    else:
        seconds = (jp.ended_s - jp.began_s) / jp.iterations
    return Sample.of({jp.index: seconds}, env.now, fabric), env.events_processed


def window(spec: ExperimentSpec, topology: Topology, plans: list[JobPlan], offsets: dict[int, float],
           iterations: int) -> tuple[Sample, int]:
    """Jobs ``plans`` together, job ``i`` starting at ``offsets[i]`` and iterating until the window
    is measured; per job its iteration time, and the events it took.

    The window opens at ``t0``, when every job has finished its first iteration (so every job is
    running and none is measured while another has not started), and closes at the first iteration
    end by which every job has finished ``iterations - 1`` (at least 1) whole iterations inside it.
    Each job's iteration time is the mean over its whole iterations inside the window. The job with
    the longest iterations usually finishes its first iteration last, so the window is exactly its
    whole iterations from ``t0``; a shorter job's iterations tile that span, so they cover each phase
    of the long job (compute, communication) in proportion, wherever the jobs start.
    CORRECTNESS: the simulation stops at the window's end with other iterations in flight; they are
    never counted.
    """
    spec = quiet(spec)
    env = Environment()
    fabric = make_fabric(spec, topology, env)
    need = max(1, iterations - 1)
    logs: dict[int, list[tuple[float, float]]] = {jp.index: [] for jp in plans}
    began: dict[int, list[float]] = {jp.index: [] for jp in plans}
    done = env.event()
    opened = [math.inf]
    counts = dict.fromkeys(logs, 0)   #: whole iterations inside the window so far

    def job(jp: JobPlan):
        yield env.timeout(offsets.get(jp.index, 0.0))
        log, records = logs[jp.index], []
        while not done.triggered:
            start = env.now
            began[jp.index].append(start)
            if jp.kind == "training":
                yield env.process(run_training(env, fabric, jp.plan, iterations=1, records=[],
                                               iteration_records=records))
            else:
                yield env.process(run_workload(env, fabric, jp.plan, records=[], job=jp.index))
            log.append((start, env.now))
            if math.isinf(opened[0]) and all(logs.values()):
                opened[0] = env.now
            counts[jp.index] += start >= opened[0]
            if not done.triggered and min(counts.values()) >= need:
                done.succeed()

    for jp in plans:
        env.process(job(jp))
    env.run(until=done)
    fabric.finalize()
    times = {i: float(np.mean([b - a for a, b in log if a >= opened[0]])) for i, log in logs.items()}
    return Sample.of(times, env.now, fabric, began), env.events_processed

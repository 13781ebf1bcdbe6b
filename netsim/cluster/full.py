"""``mode: full`` of a trace-driven cluster run (:mod:`netsim.cluster.sim`): every iteration of every
job in one simulation, the scheduler a process reacting to arrivals and departures. It is exact and
slow, and it is the reference the extrapolation is measured against."""

from __future__ import annotations

import numpy as np

from netsim.cluster.jobs import ClusterRun, TraceJob, core_links, start_jobs
from netsim.cluster.sampling import make_fabric
from netsim.engine import Environment, Fabric
from netsim.workload import run_workload
from netsim.workload.pipeline import run_training


class EpochLog:
    """The full run's ``cluster_series``: one row per interval between changes of the running or waiting
    jobs, its core load from the bytes the core links carried in it (a message's bytes count when it
    drains); ``core_peak_util`` is the busiest core link's mean utilisation over the interval (the full
    run keeps no per-interval instantaneous peak)."""

    def __init__(self, run: ClusterRun, fabric: Fabric):
        self.run, self.fabric = run, fabric
        self.core = core_links(run.topology)
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

"""Run one experiment spec: build the topology, place ranks, simulate, collect records."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from netsim import fabrics
from netsim.collectives import CollectiveRecord
from netsim.collectives.ideal import IdealModel
from netsim.collectives.nccl import MODELS, SWITCH_MODE, fabric_defaults
from netsim.config import ExperimentSpec, JobSpec, TrainingWorkload
from netsim.engine import Environment, Fabric
from netsim.engine.faults import fault_process
from netsim.errors import ConfigError, NetsimError
from netsim.experiment.faultplan import (
    FaultEntry,
    fault_costs,
    injected,
    resolve_entries,
    stragglers_record,
    wants_costs,
)
from netsim.placement import make_placement
from netsim.routing import make_routing
from netsim.topology import Topology
from netsim.topology.packets import MTU_BYTES, PacketModel, fabric_header, with_packets
from netsim.workload import SequencePlan, plan_workload, run_workload
from netsim.workload.pipeline import IterationRecord, TrainingPlan, plan_training, run_training, stage_speeds
from netsim.workload.speeds import ComputeSpeeds
from netsim.workload.trace import TracePlan, is_trace, plan_trace, run_trace, trace_ranks
from netsim.workload.training import partition_layers


@dataclass
class RunResult:
    """Everything one simulation produced, as plain records (DataFrames are built in ``results``)."""

    spec: ExperimentSpec
    run_id: str
    topology: Topology
    gpus: np.ndarray
    fabric: Fabric
    collectives: list[CollectiveRecord]
    sim_time_s: float
    wall_s: float
    events: int
    extra: dict = field(default_factory=dict)
    jobs: list = field(default_factory=list)        #: :class:`JobPlan` per job
    iterations: list = field(default_factory=list)  #: :class:`IterationRecord` per training iteration


def data_hash(data) -> str:
    """Stable 12-hex-digit hash of JSON-able data (its canonical JSON; other values by ``str``)."""
    canon = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()[:12]


def spec_hash(spec: ExperimentSpec) -> str:
    """Stable hash of a resolved spec (its canonical JSON): the run id and the manifest's config hash."""
    return data_hash(spec.model_dump(mode="json"))


def build_topology(spec: ExperimentSpec) -> Topology:
    """The fabric described by ``spec.topology`` (its family's builder: :mod:`netsim.fabrics`), with the
    NCCL model's costs for the fields the file leaves unset (:func:`netsim.collectives.nccl.fabric_defaults`)
    and its switches' packet forwarding (``packets:``; absent, the model's: :mod:`netsim.topology.packets`)."""
    nccl, packets = spec.model == "nccl", spec.packets
    mtu = packets.mtu if packets else MTU_BYTES
    topology = fabrics.build_topology(fabric_defaults(spec.topology, mtu) if nccl else spec.topology)
    switching = packets.switching if packets else (SWITCH_MODE if nccl else "none")
    return with_packets(topology, PacketModel(switching, mtu, fabric_header(topology)))


@dataclass
class JobPlan:
    """One job of a run placed on the fabric: its GPUs and its resolved workload."""

    index: int
    name: str
    kind: str                   #: ``training``, ``collective`` or ``trace``
    placement: str
    gpus: np.ndarray            #: rank -> GPU
    plan: SequencePlan | TrainingPlan | TracePlan
    start_s: float
    iterations: int
    spec: JobSpec
    began_s: float = float("nan")  #: simulated time the job started (after ``start_s``)
    ended_s: float = float("nan")  #: simulated time its last iteration ended
    #: Per training iteration, each (stage, replica)'s time breakdown (what per-rank profiling sees).
    accounts: list = field(default_factory=list)


def _job_path(spec: ExperimentSpec, index: int, path: str) -> str:
    return f"jobs.{index}.{path}" if spec.jobs else path


def place_jobs(spec: ExperimentSpec, topology: Topology, rng: np.random.Generator) -> list[JobPlan]:
    """Place every job in order on the GPUs the earlier ones left free, and resolve its workload.

    Training jobs get the even (or explicit) partition here; see :func:`choose_partitions`.
    """
    free = np.arange(topology.n_gpus)
    jobs = []
    for i, job in enumerate(spec.job_specs()):
        policy_spec = job.placement or spec.placement
        training = isinstance(job.workload, TrainingWorkload)
        trace = is_trace(job.workload)
        try:
            n_ranks = trace_ranks(job.workload) if trace else job.workload.ranks or topology.n_gpus
            policy = make_placement(policy_spec.type, policy_spec.options,
                                    path=_job_path(spec, i, "placement") if job.placement else "placement")
            gpus = policy.place(n_ranks, topology, rng, free)
            model = MODELS[spec.model]
            if trace:
                plan = plan_trace(job.workload, gpus.tolist(), topology, job=i, model=model)
            elif training:
                plan = plan_training(job.workload, gpus.tolist(), topology, job=i, name=job.name, seed=spec.seed,
                                     collective_model=model)
            else:
                plan = plan_workload(job.workload, gpus.tolist(), topology=topology, model=model)
        except ConfigError as exc:
            if spec.jobs and not exc.path.startswith(("jobs.", "placement", "topology")):
                raise ConfigError(exc.message, _job_path(spec, i, exc.path)) from None
            raise
        free = free[~np.isin(free, gpus)]
        kind = "training" if training else "trace" if trace else "collective"
        jobs.append(JobPlan(i, job.name, kind, policy_spec.type, gpus, plan,
                            job.start, job.iterations, job))
    return jobs


def place_ranks(spec: ExperimentSpec, topology: Topology, rng: np.random.Generator) -> np.ndarray:
    """Rank -> GPU map of every job, concatenated in job order."""
    return np.concatenate([j.gpus for j in place_jobs(spec, topology, rng)])


def _job_process(env: Environment, fabric: Fabric, job: JobPlan, records: list, iteration_records: list,
                 ideal: IdealModel | None, speeds: ComputeSpeeds | None = None):
    if job.start_s > 0:
        yield env.timeout(job.start_s)
    job.began_s = env.now
    for _ in range(job.iterations):
        if isinstance(job.plan, TrainingPlan):
            yield env.process(run_training(env, fabric, job.plan, iterations=job.plan.spec.iterations,
                                           records=records, iteration_records=iteration_records, ideal=ideal,
                                           accounts=job.accounts, speeds=speeds))
        elif isinstance(job.plan, TracePlan):
            yield env.process(run_trace(env, fabric, job.plan, records=records, ideal=ideal, job=job.index))
        else:
            yield env.process(run_workload(env, fabric, job.plan, records=records, ideal=ideal, job=job.index))
    job.ended_s = env.now


def simulate(spec: ExperimentSpec, topology: Topology, jobs: list[JobPlan], routing_rng: np.random.Generator,
             *, faults: bool = True, ideal: bool | None = None,
             on_start: Callable[[Environment, list], None] | None = None,
             entries: list[FaultEntry] | None = None) -> tuple[Environment, Fabric, list, list]:
    """Run the jobs on a fresh SimPy environment until nothing is left to do.

    ``entries`` are the faults to inject (default: every entry of the spec, unless ``faults`` is
    false); the counterfactual runs of :func:`netsim.experiment.faultplan.fault_costs` pass subsets.

    ``on_start(env, records)``, when given, is called once before the simulation starts, with the
    list the finished collective calls are appended to (a progress display reads both).
    CORRECTNESS: it must only read them, from any thread; it must not schedule events.

    Returns ``(env, fabric, collective records, iteration records)``.
    """
    env = Environment()
    routing = make_routing(spec.routing.type, topology, routing_rng, spec.routing.options)
    fabric = Fabric(env, topology, routing, completion_tolerance_s=spec.engine.completion_tolerance,
                    record_flows=spec.engine.record_flows, track_congestion=spec.engine.congestion,
                    link_series_bins=spec.engine.link_series, backend=spec.engine.backend)
    records: list[CollectiveRecord] = []
    iteration_records: list[IterationRecord] = []
    use_ideal = spec.engine.ideal if ideal is None else ideal
    model = IdealModel(topology, spec.engine.completion_tolerance) if use_ideal else None
    if entries is None:
        entries = resolve_entries(spec, topology, jobs) if faults else []
    fault_list, speeds = injected(entries)
    procs = [env.process(_job_process(env, fabric, job, records, iteration_records, model, speeds)) for job in jobs]
    work = env.all_of(procs) if len(procs) > 1 else procs[0]
    if fault_list:
        env.process(fault_process(env, fabric, fault_list))
    if on_start is not None:
        on_start(env, records)
    try:
        env.run(until=work)  # faults scheduled after the work has ended do not stretch the run
    except RuntimeError:
        if work.triggered:
            raise
    if not work.triggered or fabric.undelivered:
        down = [topology.link_name(int(i)) for i in np.flatnonzero(fabric.current_capacity_Bps == 0)]
        raise NetsimError(f"{fabric.undelivered} message(s) were never delivered: links stayed down with no live "
                          f"route left ({', '.join(down[:6])}{' ...' if len(down) > 6 else ''}); schedule an "
                          "'up' fault or fail a link with an alternative path")
    fabric.finalize()
    records.sort(key=lambda r: (r.start_s, r.job, r.step, r.iteration))
    return env, fabric, records, iteration_records


def choose_partitions(spec: ExperimentSpec, topology: Topology, jobs: list[JobPlan]) -> None:
    """Apply each training job's ``partition`` strategy (Holmes's self-adapting split) in place.

    ``proportional`` and ``search`` simulate the job alone on the fabric (same routing policy with
    the run's routing seed and the job's own id, so hashed paths are the run's; no faults, no other
    jobs) for one iteration per candidate: first the even split, whose measured
    per-stage speeds give the proportional split; ``search`` then moves one layer at a time
    between neighbouring stages while the iteration gets shorter. Every candidate tried is kept in
    ``plan.partition_trials``.
    """
    for job in jobs:
        if not isinstance(job.plan, TrainingPlan):
            continue
        w = job.plan.spec
        strategy = w.partition
        if strategy == "auto":
            strategy = "search" if job.placement == "holmes" else "even"
        if isinstance(strategy, list) or strategy == "even" or job.plan.par.pp == 1 or job.plan.par.virtual_stages > 1:
            continue
        tried: dict[tuple[int, ...], tuple[float, dict]] = {}

        def evaluate(partition: list[int]) -> float:
            key = tuple(partition)
            if key not in tried:
                plan = plan_training(w, job.gpus.tolist(), topology, job=job.index, name=job.name, seed=spec.seed,
                                     partition=partition, collective_model=MODELS[spec.model])
                one = JobPlan(job.index, job.name, "training", job.placement, job.gpus, plan, 0.0, 1, job.spec)
                alone = spec.model_copy(update={"engine": spec.engine.model_copy(
                    update={"record_flows": False, "congestion": False, "ideal": False})})
                probe = _training_probe(alone, topology, one, _rngs(spec)[1])
                tried[key] = probe
                job.plan.partition_trials.append((list(partition), probe[0]))
            return tried[key][0]

        even = list(job.plan.partition)
        evaluate(even)
        speeds = stage_speeds(plan_training(w, job.gpus.tolist(), topology, partition=even, seed=spec.seed,
                                            collective_model=MODELS[spec.model]), tried[tuple(even)][1])
        best = partition_layers(job.plan.model.layers, speeds)
        best_t = evaluate(best)
        if evaluate(even) < best_t:
            best, best_t = even, evaluate(even)
        if strategy == "search":
            while True:
                moves = []
                for i in range(len(best) - 1):
                    for src, dst in ((i, i + 1), (i + 1, i)):
                        if best[src] > 1:
                            cand = list(best)
                            cand[src] -= 1
                            cand[dst] += 1
                            moves.append(cand)
                scored = sorted((evaluate(c), c) for c in moves)
                if not scored or scored[0][0] >= best_t * (1 - 1e-9):
                    break
                best_t, best = scored[0]
        job.plan = plan_training(w, job.gpus.tolist(), topology, job=job.index, name=job.name, partition=best,
                                 seed=spec.seed, collective_model=MODELS[spec.model])
        job.plan.partition_trials = [(list(k), v[0]) for k, v in tried.items()]


def _training_probe(spec: ExperimentSpec, topology: Topology, job: JobPlan,
                    rng: np.random.Generator) -> tuple[float, dict]:
    """(iteration time, per-(stage, replica) breakdown) of one iteration of ``job`` alone."""
    env = Environment()
    routing = make_routing(spec.routing.type, topology, rng, spec.routing.options)
    fabric = Fabric(env, topology, routing, completion_tolerance_s=spec.engine.completion_tolerance,
                    record_flows=False, track_congestion=False, backend=spec.engine.backend)
    accounts: list = []
    iters: list = []
    env.process(run_training(env, fabric, job.plan, iterations=1, records=[], iteration_records=iters,
                             accounts=accounts))
    env.run()
    return iters[0].duration_s, accounts[0]


def _rngs(spec: ExperimentSpec) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent (placement, routing) generators spawned from the run seed."""
    return tuple(np.random.default_rng(s) for s in np.random.SeedSequence(spec.seed).spawn(2))


def prepare(spec: ExperimentSpec) -> tuple[Topology, np.ndarray]:
    """Everything before the simulation (topology and placement): what ``netsim validate`` checks."""
    topology = build_topology(spec)
    if spec.cluster is not None:  # the trace reads, and every job fits the cluster and its presets?
        from netsim.cluster.sim import trace_jobs
        from netsim.cluster.trace import read_trace
        trace_jobs(spec, read_trace(spec.cluster.trace, max_gpus=topology.n_gpus))
        make_routing(spec.routing.type, topology, _rngs(spec)[1], spec.routing.options)
        return topology, np.zeros(0, dtype=np.int64)
    jobs = place_jobs(spec, topology, _rngs(spec)[0])  # sub-communicator selectors fit the placed ranks?
    make_routing(spec.routing.type, topology, _rngs(spec)[1], spec.routing.options)  # policy fits the fabric?
    resolve_entries(spec, topology, jobs)  # fault targets exist, slow GPUs run training?
    return topology, np.concatenate([j.gpus for j in jobs])


def run_experiment(spec: ExperimentSpec, *,
                   on_start: Callable[[Environment, list], None] | None = None) -> RunResult:
    """Build, place, simulate, collect: the whole pipeline for one spec.

    ``on_start`` is handed to :func:`simulate` (a progress display); it changes nothing in the run.

    Randomness: the run seed feeds a ``SeedSequence`` spawning independent generators for
    placement and routing, so a change in one never shifts the other's draws.

    Examples
    --------
    >>> from netsim.config import load_spec
    >>> result = run_experiment(load_spec("experiments/ring-allreduce.yaml"))  # doctest: +SKIP
    >>> result.collectives[0].busbw_Bps  # doctest: +SKIP
    """
    if spec.cluster is not None:
        from netsim.cluster.sim import run_cluster
        return run_cluster(spec, on_start=on_start)
    if spec.detection is not None:  # many runs with one random fault each, and the detector after each iteration
        from netsim.detect.evaluate import run_detection
        return run_detection(spec, on_start=on_start)
    t0 = time.perf_counter()
    placement_rng, routing_rng = _rngs(spec)
    topology = build_topology(spec)
    jobs = place_jobs(spec, topology, placement_rng)
    if any(j.kind == "training" for j in jobs):
        choose_partitions(spec, topology, jobs)
    entries = resolve_entries(spec, topology, jobs)
    env, fabric, records, iterations = simulate(spec, topology, jobs, routing_rng, on_start=on_start,
                                                entries=entries)
    check_used = getattr(fabric.routing, "check_used", None)
    if check_used is not None:  # a route-table row that matched no connection of the run is an error
        check_used()
    extra: dict = {}
    if spec.stragglers is not None:
        extra["stragglers"] = stragglers_record(entries)
    if wants_costs(spec, entries, jobs):
        extra["fault_costs"] = _fault_costs(spec, topology, jobs, entries, iterations)
    return RunResult(spec=spec, run_id=spec_hash(spec), topology=topology,
                     gpus=np.concatenate([j.gpus for j in jobs]), fabric=fabric, collectives=records,
                     sim_time_s=env.now, wall_s=time.perf_counter() - t0, events=env.events_processed, jobs=jobs,
                     iterations=iterations, extra=extra)


def _durations(iterations: list[IterationRecord]) -> dict[int, list[float]]:
    """Per job, its iteration times in order."""
    out: dict[int, list[float]] = {}
    for r in sorted(iterations, key=lambda r: (r.job, r.iteration)):
        out.setdefault(r.job, []).append(r.duration_s)
    return out


def _fault_costs(spec: ExperimentSpec, topology: Topology, jobs: list[JobPlan], entries: list[FaultEntry],
                 iterations: list[IterationRecord]):
    """Per-fault costs (``fault_costs.parquet``): the same jobs, routing seed and placement, run again
    with fewer faults and no observers (no flow records, ideal, congestion or link series)."""
    quiet = spec.model_copy(update={"engine": spec.engine.model_copy(
        update={"record_flows": False, "congestion": False, "ideal": False, "link_series": 0})})

    def rerun(kept: list[FaultEntry]) -> dict[int, list[float]]:
        fresh = [replace(j, began_s=math.nan, ended_s=math.nan, accounts=[]) for j in jobs]
        return _durations(simulate(quiet, topology, fresh, _rngs(spec)[1], ideal=False, entries=kept)[3])

    return fault_costs(entries, jobs, _durations(iterations), rerun, spec_hash(spec))

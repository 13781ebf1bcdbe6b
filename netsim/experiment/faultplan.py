"""A run's faults resolved on its fabric and jobs, entry by entry, and what each one cost (counterfactual runs).

Every ``faults`` entry and every drawn straggler becomes one :class:`FaultEntry`: its link
capacity changes (a flap expanded into down/up pairs) and its GPU slowdowns. Simulating a subset
of the entries is then a choice of which to inject, which is how :func:`fault_costs` measures
each entry's cost: ``cost_i = T(all) - T(all without entry i)`` and ``total = T(all) - T(none)``,
``T`` being a training job's iteration time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from netsim.config import ExperimentSpec
from netsim.engine.faults import Fault, resolve_fault
from netsim.errors import ConfigError, NetsimError, shorten
from netsim.topology import Topology
from netsim.units import format_time
from netsim.workload.speeds import ComputeSpeeds, SlowGpu, gpu_index, gpu_names

#: ``engine.fault_costs: auto`` measures costs for training runs with at most this many entries.
AUTO_FAULT_COSTS = 8
FAULT_COST_COLUMNS = ["run_id", "job", "name", "fault", "target", "action", "detail", "iterations",
                      "iteration_time_s", "without_s", "cost_per_iteration_s", "cost_s", "note"]


@dataclass(frozen=True)
class FaultEntry:
    """One entry of a run's faults, resolved: ``faults.2`` or ``stragglers.0``."""

    label: str                    #: where it comes from: ``faults.<i>`` or ``stragglers.<i>``
    target: str                   #: what it hits: ``leaf0-spine1``, ``h3.nic0``, ``spine1``, ``h1.gpu2``
    action: str                   #: down, up, degrade, flap or slow
    detail: str                   #: the rest, for people: ``at 1ms, 5 x 0.5ms down every 2ms``
    links: tuple[Fault, ...] = ()
    slow: tuple[SlowGpu, ...] = ()


def _detail(f) -> str:
    text = f"at {format_time(f.at)}"
    if f.action == "flap":
        text += f", {f.flaps} x {format_time(f.down_for)} down every {format_time(f.period)}"
    if f.fraction is not None:
        text += f", {f.fraction:g} of capacity"
    if f.factor is not None:
        text += f", compute x{f.factor:g}"
    return text


def _training_gpus(jobs) -> dict[int, str]:
    """GPU -> name of the training job it runs."""
    return {int(g): j.name for j in jobs if j.kind == "training" for g in j.gpus}


def _check_trains(gpu: int, name: str, jobs, training: dict[int, str], path: str) -> None:
    if gpu in training:
        return
    other = next((j for j in jobs if gpu in {int(g) for g in j.gpus}), None)
    runs = f"runs job {other.name!r}, a {other.kind} workload" if other else "runs no job"
    raise ConfigError(f"GPU {gpu} ({name}) {runs}: gpu faults need a training workload (only training has "
                      "compute for a slow GPU to stretch)", path)


def draw_stragglers(spec: ExperimentSpec, pool: list[int]) -> list[SlowGpu]:
    """The slow GPUs of ``spec.stragglers`` drawn among ``pool`` (sorted GPU ids) from the run seed.

    Their own generator (the run seed's third child, after placement and routing), so drawing
    stragglers shifts no other draw.
    """
    s = spec.stragglers
    if s is None:
        return []
    n = s.count if s.count is not None else max(1, round(s.fraction * len(pool)))
    if n > len(pool):
        raise ConfigError(f"{n} stragglers asked for, but only {len(pool)} GPUs run training",
                          "stragglers.count" if s.count is not None else "stragglers.fraction")
    rng = np.random.default_rng(np.random.SeedSequence(spec.seed, spawn_key=(2,)))
    gpus = np.sort(rng.choice(np.asarray(pool, dtype=np.int64), size=n, replace=False))
    f = s.factor
    if isinstance(f, float):
        factors = np.full(n, f)
    elif f.distribution == "lognormal":
        factors = np.maximum(1.0, f.median * np.exp(f.sigma * rng.standard_normal(n)))
    else:
        factors = rng.uniform(f.low, f.high, n)
    return [SlowGpu(int(g), float(s.at), float(x)) for g, x in zip(gpus, factors)]


def resolve_entries(spec: ExperimentSpec, topology: Topology, jobs) -> list[FaultEntry]:
    """Every fault entry of ``spec`` on ``topology`` and its placed ``jobs``, in spec order, then the
    drawn stragglers. ConfigError with the YAML path for a target that does not resolve, or a GPU
    that runs no training job."""
    training = _training_gpus(jobs)
    names = gpu_names(topology)
    out = []
    for i, f in enumerate(spec.faults):
        path = f"faults.{i}"
        kind, target = f.target
        if kind == "gpu":
            gpu = gpu_index(topology, target, f"{path}.gpu", names)
            _check_trains(gpu, names[gpu], jobs, training, f"{path}.gpu")
            factor = 1.0 if f.action == "up" else float(f.factor)
            out.append(FaultEntry(path, names[gpu], f.action, _detail(f), slow=(SlowGpu(gpu, float(f.at), factor),)))
        else:
            out.append(FaultEntry(path, str(target), f.action, _detail(f), links=tuple(resolve_fault(f, topology, path))))
    for i, s in enumerate(draw_stragglers(spec, sorted(training))):
        out.append(FaultEntry(f"stragglers.{i}", names[s.gpu], "slow", f"at {format_time(s.at_s)}, compute x{s.factor:.4g}",
                              slow=(s,)))
    return out


def injected(entries: list[FaultEntry]) -> tuple[list[Fault], ComputeSpeeds]:
    """What the simulation injects for ``entries``: link faults in time order (stable), and GPU speeds."""
    links = sorted((f for e in entries for f in e.links), key=lambda f: f.at_s)
    return links, ComputeSpeeds(s for e in entries for s in e.slow)


def stragglers_record(entries: list[FaultEntry]) -> list[dict]:
    """The drawn stragglers, as the manifest lists them."""
    return [{"gpu": e.slow[0].gpu, "name": e.target, "factor": e.slow[0].factor, "at_s": e.slow[0].at_s}
            for e in entries if e.label.startswith("stragglers.")]


def wants_costs(spec: ExperimentSpec, entries: list[FaultEntry], jobs) -> bool:
    """Whether ``engine.fault_costs`` asks for per-fault costs of this run."""
    mode = spec.engine.fault_costs
    if mode == "off" or not entries or not any(j.kind == "training" for j in jobs):
        return False
    return mode == "on" or len(entries) <= AUTO_FAULT_COSTS


#: Per training job, its iteration durations: what :func:`fault_costs` compares.
Durations = dict[int, list[float]]


def fault_costs(entries: list[FaultEntry], jobs, measured: Durations,
                rerun: Callable[[list[FaultEntry]], Durations], run_id: str = "") -> pd.DataFrame:
    """One row per (training job, fault entry), and an ``all`` row per job: the iteration time the
    entry cost, from counterfactual runs without it (``rerun(kept entries)``) against ``measured``
    (the run with every entry). ``len(entries) + 1`` runs (one when there is a single entry).

    A counterfactual run that cannot finish (removing an ``up`` leaves a NIC down for good) gives a
    missing cost and says so in ``note``.
    """
    def attempt(kept: list[FaultEntry]) -> tuple[Durations | None, str]:
        try:
            return rerun(kept), ""
        except NetsimError as exc:
            return None, f"the run without it does not finish: {shorten(str(exc), 160)}"

    none = attempt([])
    cases = [("all", "", "", "", none)]
    for i, e in enumerate(entries):
        without = none if len(entries) == 1 else attempt(entries[:i] + entries[i + 1:])
        cases.append((e.label, e.target, e.action, e.detail, without))
    rows = []
    for job in jobs:
        if job.kind != "training":
            continue
        mine = measured.get(job.index, [])
        n = len(mine)
        for label, target, action, detail, (durations, note) in cases:
            base = durations.get(job.index, []) if durations is not None else []
            ok = durations is not None and len(base) == n and n > 0
            total = sum(mine) - sum(base) if ok else np.nan
            rows.append((run_id, job.index, job.name, label, target, action, detail, n,
                         sum(mine) / n if n else np.nan, sum(base) / n if ok else np.nan,
                         total / n if ok else np.nan, total, note))
    return pd.DataFrame(rows, columns=FAULT_COST_COLUMNS)

"""The detector evaluated like a classifier: many runs of one training job, each with one random
injected fault (or none), the detector after every iteration, and how often it names the culprit.

An experiment file's ``detection:`` section (:class:`~netsim.config.DetectionSpec`) makes
``netsim run`` do this instead of a single run. First the job runs healthy once: that run is what
the results directory's ordinary tables hold, and it tells which components the job's traffic uses
(a fault on an idle cable cannot slow anything, so none is drawn there) and when each iteration
starts. Then each trial draws, from a generator spawned from the run seed:

- whether it has a fault (probability ``1 - none``), its kind (uniform over ``kinds``), the
  component (uniform over the job's GPUs, or the NICs, cables or switches its traffic crossed), the
  severity (uniform in ``severity``: the component runs at ``1 - severity`` of its speed; a GPU's
  compute takes ``1 / (1 - severity)`` times longer) and the onset iteration (0, or uniform);
- runs the job with that fault from the onset iteration's start, collects its telemetry
  (:mod:`netsim.detect.telemetry`), blurs it with ``noise`` (a generator per trial, also from the
  run seed) and runs the detector (:mod:`netsim.detect.detector`).

Per trial (``detection_trials``): whether the final ranking's top-1 and top-3 hold the true component
(the culprit); a culprit tied with other suspects (one slow connection cannot say which of the
components on its path is slow) scores the chance a random tie-break puts it there, e.g. 0.5 for
top-1 in a two-way tie. The iterations from the onset to the first iteration that ranks the culprit
first (alone or tied; 1 = the first faulty iteration). A **false alarm** is an alarm in a fault-free
trial, an alarm before the onset, or a final first place (with its ties) that holds neither the
culprit nor one of its neighbours (a cable's switches, a NIC's
leaf and GPUs, a switch's cables and NICs, a GPU's NIC); a **miss** is a faulty trial with no
alarm from the onset on. A fault that did not stretch the job's iterations (by 1%: the component
was not its bottleneck, e.g. a NIC degraded to a rate still above what the ring gets through the
spines) is **latent**: nothing is slow, so nothing can be detected; the rates are over the others. Per kind (``detection_summary``): the rates and the mean iterations to
detection. Per trial and iteration (``detection_iterations``): the alarm and the culprit's place.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from netsim.config import DetectionSpec, ExperimentSpec, FaultSpec
from netsim.detect.components import KINDS, Component, Components
from netsim.detect.detector import TIE_RTOL, Detector, Verdict
from netsim.detect.telemetry import Telemetry, collect
from netsim.errors import ConfigError
from netsim.experiment.results import (
    DETECTION_ITERATION_COLUMNS,
    DETECTION_SUMMARY_COLUMNS,
    DETECTION_TABLES,
    DETECTION_TRIAL_COLUMNS,
)
from netsim.experiment.run import RunResult, run_experiment, spec_hash

TRIAL_COLUMNS, SUMMARY_COLUMNS = DETECTION_TRIAL_COLUMNS, DETECTION_SUMMARY_COLUMNS
ITERATION_COLUMNS = DETECTION_ITERATION_COLUMNS
#: A fault that stretches the job's faulty iterations by less than this (relative) is latent: it slows nothing.
LATENT_SLOWDOWN = 0.01
__all__ = ["DETECTION_TABLES", "Trial", "blur", "candidates", "draw_trials", "evaluate", "judge", "run_detection", "summarize"]


@dataclass(frozen=True)
class Trial:
    """One drawn trial: its fault (``component`` None: no fault), severity and onset iteration."""

    index: int
    kind: str                        #: gpu, nic, link, switch or ``none``
    component: Component | None
    severity: float
    onset: int


def candidates(healthy: RunResult, telemetry: Telemetry, components: Components) -> dict[str, list[Component]]:
    """The components a fault of each kind may hit: the job's GPUs, and the NICs, cables and switches
    its messages crossed in the healthy run."""
    links = np.unique(np.concatenate([p[0] for pieces in telemetry.routes.values() for p in pieces] or
                                     [np.zeros(0, np.int64)]))
    used = components.used(links)
    out = {kind: [c for c in used if c.kind == kind] for kind in KINDS if kind != "gpu"}
    out["gpu"] = sorted({components.gpu(int(g)) for g in healthy.gpus})
    return out


def draw_trials(detection: DetectionSpec, pool: dict[str, list[Component]], iterations: int,
                rng: np.random.Generator) -> list[Trial]:
    """The trials, drawn in order from ``rng`` (five draws each, whatever they decide, so one trial's
    outcome never shifts the next one's)."""
    kinds = [k for k in detection.kinds if pool.get(k)]
    low, high = detection.severity
    out = []
    for i in range(detection.trials):
        u_none, u_kind, u_comp, u_sev, u_onset = rng.random(5)
        if u_none < detection.none or not kinds:
            out.append(Trial(i, "none", None, 0.0, 0))
            continue
        kind = kinds[min(int(u_kind * len(kinds)), len(kinds) - 1)]
        comps = pool[kind]
        onset = 0 if detection.onset == "first" else min(int(u_onset * iterations), iterations - 1)
        out.append(Trial(i, kind, comps[min(int(u_comp * len(comps)), len(comps) - 1)], low + (high - low) * u_sev,
                         onset))
    return out


def judge(trial: Trial, verdicts: list[Verdict], components: Components, slowdown: float = math.nan) -> dict:
    """A trial's row of ``detection_trials`` (without ``run_id``) from the detector's verdicts;
    ``slowdown``: the faulty iterations' mean time over the healthy run's (ground truth, for the
    evaluation only)."""
    final = verdicts[-1] if verdicts else None
    suspect, score = (final.ranking[0] if final and final.ranking else (None, math.nan))
    alarms = [v.iteration for v in verdicts if v.alarm]
    row = {"trial": trial.index, "kind": trial.kind, "component": str(trial.component or ""),
           "severity": trial.severity, "onset": trial.onset, "iterations": len(verdicts), "slowdown": slowdown,
           "latent": trial.component is not None and not slowdown - 1.0 >= LATENT_SLOWDOWN,
           "suspect": "" if suspect is None else str(suspect), "suspect_score": score}
    if trial.component is None:
        return {**row, "alarm": bool(alarms), "top1": 0.0, "top3": 0.0, "detected_iteration": math.nan,
                "iterations_to_detect": math.nan, "false_alarm": bool(alarms), "missed": False,
                "culprit_rank": math.nan}
    after = [i for i in alarms if i >= trial.onset]
    place = final.rank_of(trial.component) if final else math.nan
    hits = [v.iteration for v in verdicts if v.iteration >= trial.onset and v.alarm and v.rank_of(trial.component) == 1]
    first = {c for c, s in final.ranking if s >= final.ranking[0][1] * (1 - TIE_RTOL)} if final and final.ranking else set()
    wrong = bool(after) and bool(first) and not first & components.related(trial.component)
    return {**row, "alarm": bool(after), "top1": final.hit(trial.component, 1) if after else 0.0,
            "top3": final.hit(trial.component, 3) if after else 0.0,
            "detected_iteration": float(hits[0]) if hits else math.nan,
            "iterations_to_detect": float(hits[0] - trial.onset + 1) if hits else math.nan,
            "false_alarm": any(i < trial.onset for i in alarms) or wrong, "missed": not after,
            "culprit_rank": place}


def summarize(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per fault kind (in :data:`KINDS` order), then ``none`` and ``all`` (every faulty trial).

    ``latent``: share of the kind's faults that did not slow the job (by :data:`LATENT_SLOWDOWN`);
    ``top1``, ``top3``, ``missed`` and ``iterations_to_detect`` (mean over the detected) are over the
    other, effective faults; ``false_alarms`` over every trial of the kind; ``severity`` and
    ``slowdown`` (faulty over healthy iteration time) are means over the effective faults.
    """
    rows = []
    faulty = trials[trials["kind"] != "none"]
    groups = [(k, trials[trials["kind"] == k]) for k in (*KINDS, "none")] + [("all", faulty)]
    for kind, g in groups:
        if not len(g):
            continue
        row = dict.fromkeys(SUMMARY_COLUMNS[1:], math.nan)
        row.update(kind=kind, trials=len(g), false_alarms=g["false_alarm"].mean())
        if kind != "none":
            real = g[~g["latent"].astype(bool)]
            row["latent"] = 1.0 - len(real) / len(g)
            if len(real):
                detect = real["iterations_to_detect"]
                row.update(top1=real["top1"].mean(), top3=real["top3"].mean(), missed=real["missed"].mean(),
                           iterations_to_detect=detect.mean() if detect.notna().any() else math.nan,
                           severity=real["severity"].mean(), slowdown=real["slowdown"].mean())
        rows.append(row)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS[1:])


def _quiet(spec: ExperimentSpec) -> ExperimentSpec:
    """The trial runs' spec: no detection section, flows recorded, no ideal, congestion, series or fault costs."""
    quiet = {"record_flows": True, "ideal": False, "congestion": False, "link_series": 0}
    if "fault_costs" in type(spec.engine).model_fields:  # no counterfactual reruns per trial
        quiet["fault_costs"] = "off"
    engine = spec.engine.model_copy(update=quiet)
    return spec.model_copy(update={"detection": None, "engine": engine})


def _slowdown(telemetry: Telemetry, healthy_s: np.ndarray, onset: int) -> float:
    """Mean time of the iterations from ``onset`` on over the healthy run's (the evaluator's truth)."""
    faulty = telemetry.iterations["duration_s"].to_numpy()[onset:]
    return float(faulty.mean() / healthy_s[onset:len(faulty) + onset].mean()) if len(faulty) else math.nan


def blur(telemetry: Telemetry, noise: float, rng: np.random.Generator) -> Telemetry:
    """``telemetry`` as noisy timestamps would give it: each connection's busy time (so its throughput)
    and each rank's compute time times ``exp(noise * Z)``, Z standard normal (``noise`` 0: unchanged)."""
    if noise <= 0:
        return telemetry
    conns = telemetry.connections.copy()
    conns["busy_s"] = conns["busy_s"] * np.exp(noise * rng.standard_normal(len(conns)))
    conns["throughput_Bps"] = conns["bytes"] / conns["busy_s"]
    ranks = telemetry.ranks.copy()
    ranks["compute_s"] = ranks["compute_s"] * np.exp(noise * rng.standard_normal(len(ranks)))
    return dataclasses.replace(telemetry, connections=conns, ranks=ranks)


def _fault(trial: Trial, components: Components, at_s: float) -> list[FaultSpec]:
    if trial.component is None:
        return []
    return [FaultSpec.model_validate(components.fault(trial.component, trial.severity, at_s))]


def evaluate(spec: ExperimentSpec, *, on_trial: Callable[[int, int], None] | None = None) -> dict[str, pd.DataFrame]:
    """Run the evaluation of ``spec.detection`` (see the module docstring) and return the healthy run
    under ``"healthy"`` and the three tables (without ``run_id``).

    ``on_trial(done, total)`` is called after each trial (progress).
    """
    detection = spec.detection
    if detection is None:
        raise ConfigError("no detection: section to evaluate", "detection")
    healthy = run_experiment(spec.model_copy(update={"detection": None}))
    base = _quiet(spec)
    reference = run_experiment(base) if base.engine != spec.engine else healthy
    components = Components(reference.topology)
    telemetry = collect(reference)
    pool = candidates(reference, telemetry, components)
    starts = telemetry.iterations["start_s"].to_numpy()
    healthy_s = telemetry.iterations["duration_s"].to_numpy()
    seeds = np.random.SeedSequence(spec.seed).spawn(4)  # placement and routing use the first two
    trials = draw_trials(detection, pool, telemetry.n_iterations, np.random.default_rng(seeds[2]))
    noise = seeds[3].spawn(len(trials))
    rows, per_iteration = [], []
    for t in trials:
        result = run_experiment(base.model_copy(update={"faults": _fault(t, components, float(starts[t.onset]))}))
        telemetry = blur(collect(result), detection.noise, np.random.default_rng(noise[t.index]))
        verdicts = Detector(components, detection.threshold, detection.persist).run(telemetry)
        rows.append(judge(t, verdicts, components, _slowdown(telemetry, healthy_s, t.onset)))
        per_iteration += [(t.index, v.iteration, t.component is not None and v.iteration >= t.onset, v.alarm,
                           v.slow_connections, v.slow_ranks, str(v.ranking[0][0]) if v.ranking else "",
                           v.rank_of(t.component) if t.component else math.nan) for v in verdicts]
        if on_trial is not None:
            on_trial(len(rows), len(trials))
    table = pd.DataFrame(rows, columns=TRIAL_COLUMNS[1:])
    return {"healthy": healthy, "detection_trials": table, "detection_summary": summarize(table),
            "detection_iterations": pd.DataFrame(per_iteration, columns=ITERATION_COLUMNS[1:])}


def run_detection(spec: ExperimentSpec, *, on_start=None) -> RunResult:
    """The healthy run of ``spec`` as a :class:`RunResult` whose ``extra`` holds the detection tables
    (:data:`DETECTION_TABLES`, each with the run's ``run_id``) and whose wall time covers every trial.

    ``on_start`` (a progress display of one simulation) is not used: the evaluation is many runs.

    Examples
    --------
    >>> result = run_detection(load_spec("experiments/detect-c4d.yaml"))  # doctest: +SKIP
    >>> result.extra["detection_summary"].set_index("kind").loc["all", "top1"]  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    out = evaluate(spec)
    result: RunResult = out["healthy"]
    result.spec = spec
    result.run_id = spec_hash(spec)
    for name in DETECTION_TABLES:
        table = out[name]
        table.insert(0, "run_id", result.run_id)
        result.extra[name] = table
    result.wall_s = time.perf_counter() - t0
    return result

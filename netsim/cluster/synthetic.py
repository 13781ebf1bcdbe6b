"""Synthetic job traces for sweeps: Poisson arrivals, a job-size mix, models by size class (or a given
mix), log-normal (or given) durations, runnable parallelism; the same validated format as a trace file."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from netsim.cluster.presets import (
    PLAN_COLUMNS,
    SIZE_CLASSES,
    PresetCache,
    model_for_gpus,
    plan_job,
    search_dirs,
)
from netsim.cluster.trace import MAX_TRACE_JOBS, JobTrace, validate_trace
from netsim.cluster.validate import MAX_JOB_GPUS, MAX_JOB_ITERATIONS, MAX_TRACE_S
from netsim.errors import ConfigError, did_you_mean, shorten
from netsim.spectypes import MAX_SEED

#: Job sizes (GPUs) and their shares: most jobs take one to eight hosts, a few 16 to 64 (public traces
#: such as Philly and Helios are dominated by small jobs with a thin tail of large ones; single-GPU
#: jobs, which never touch the fabric, are left out).
DEFAULT_SIZE_MIX: dict[int, float] = {8: 0.30, 16: 0.22, 32: 0.18, 64: 0.14, 128: 0.08, 256: 0.05, 512: 0.03}
#: Median runtime alone (s) and the log-normal's sigma: 20 minutes, a heavy tail to hours. With the
#: default mix, 500 jobs a day keep a 1,024-GPU cluster about 60% busy.
DEFAULT_MEDIAN_DURATION_S = 1200.0
DEFAULT_DURATION_SIGMA = 1.0
#: Durations are clipped to [1 minute, 1 day].
DURATION_BOUNDS_S = (60.0, 86400.0)
#: Largest log-normal sigma: e**10 is a spread of 22,000 either way of the median, already past the clip.
MAX_SIGMA = 10.0


def synthetic_trace(jobs: int = 500, *, span_s: float | None = 86400.0, rate_per_hour: float | None = None,
                    cluster_gpus: int = 1024, size_mix: Mapping[int, float] | None = None,
                    model_mix: Mapping[str, float] | None = None, iterations: int | None = None,
                    median_duration_s: float = DEFAULT_MEDIAN_DURATION_S,
                    duration_sigma: float = DEFAULT_DURATION_SIGMA, durations_s: Sequence[float] | None = None,
                    gpus_per_host: int = 8, seed: int = 0,
                    preset_dirs: Sequence[Path] | None = None) -> JobTrace:
    """A synthetic trace of ``jobs`` jobs.

    Parameters
    ----------
    jobs:
        How many jobs.
    span_s, rate_per_hour:
        Arrivals: a Poisson process, either ``jobs`` arrivals spread over ``span_s`` seconds (uniform
        order statistics: a Poisson process conditioned on its count) or at ``rate_per_hour`` (exponential
        gaps). ``rate_per_hour`` wins when both are given.
    cluster_gpus:
        The cluster's GPUs: sizes above it are left out of the mix, and every job fits.
    size_mix:
        GPUs -> probability (normalised); default :data:`DEFAULT_SIZE_MIX`.
    model_mix:
        Preset name -> probability; default: the model of the job's size class
        (:data:`netsim.cluster.presets.SIZE_CLASSES`).
    iterations:
        Give every job this many iterations instead of a duration.
    median_duration_s, duration_sigma:
        Log-normal runtime alone (median and sigma of its logarithm), clipped to :data:`DURATION_BOUNDS_S`.
    durations_s:
        Draw durations from these values instead (with replacement): an empirical distribution.
    gpus_per_host:
        Tensor parallelism stays within a host (:func:`netsim.cluster.presets.parallelism_for`).
    seed:
        Seeds the ``numpy.random.Generator``: same arguments and seed, identical trace.
    preset_dirs:
        Where the models' presets are read (default :func:`netsim.cluster.presets.search_dirs`).

    Examples
    --------
    >>> trace = synthetic_trace(20, span_s=3600, cluster_gpus=128, seed=1)
    >>> len(trace), bool(trace.jobs["gpus"].max() <= 128), bool(trace.jobs["submit_s"].is_monotonic_increasing)
    (20, True, True)
    """
    _check_counts(jobs, cluster_gpus, iterations, gpus_per_host, seed)
    sizes, size_p = _mix(DEFAULT_SIZE_MIX if size_mix is None else size_mix, "size_mix", cluster_gpus)
    rng = np.random.default_rng(seed)
    submit = _arrivals(rng, jobs, span_s, rate_per_hour)
    gpus = rng.choice(np.asarray(sizes, dtype=np.int64), size=jobs, p=size_p)
    dirs = tuple(preset_dirs) if preset_dirs is not None else search_dirs()
    presets = PresetCache(dirs)
    if model_mix:
        names, model_p = _mix(model_mix, "model_mix")
        models = np.asarray(names, dtype=object)[rng.choice(len(names), size=jobs, p=model_p)]
    else:
        by_size = {int(g): model_for_gpus(int(g), SIZE_CLASSES) for g in np.unique(gpus)}
        models = np.asarray([by_size[int(g)] for g in gpus], dtype=object)
    if iterations is None:
        duration = _durations(rng, jobs, median_duration_s, duration_sigma, durations_s)
    table = _rows(models, gpus, presets, gpus_per_host)
    table.insert(0, "job", [f"job-{i:0{len(str(jobs - 1))}d}" for i in range(jobs)])
    table.insert(1, "submit_s", np.round(submit, 3))
    if iterations is not None:
        table["iterations"] = iterations
    else:
        table["duration_s"] = np.round(duration, 3)
    return validate_trace(table, "", cluster_gpus, dirs)


def _check_counts(jobs: Any, cluster_gpus: Any, iterations: Any, gpus_per_host: Any, seed: Any) -> None:
    """ConfigError (naming the argument) for a count out of its range, before anything is drawn."""
    for name, value, low, high in (("jobs", jobs, 1, MAX_TRACE_JOBS), ("cluster_gpus", cluster_gpus, 1, MAX_JOB_GPUS),
                                   ("iterations", iterations, 1, MAX_JOB_ITERATIONS),
                                   ("gpus_per_host", gpus_per_host, 1, 1024), ("seed", seed, 0, MAX_SEED)):
        if value is None and name == "iterations":
            continue
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not low <= value <= high:
            raise ConfigError(f"expected an integer from {low:,} to {high:,}, got {shorten(value)}", name)


def _mix(mix: Mapping, name: str, cluster_gpus: int | None = None) -> tuple[list, np.ndarray]:
    """Keys and normalised probabilities of a mix (sizes above the cluster dropped); ConfigError if empty."""
    keys, weights = [], []
    for key, weight in mix.items():
        if not isinstance(weight, (int, float, np.number)) or isinstance(weight, bool) or not 0 <= weight < math.inf:
            raise ConfigError(f"expected a finite weight >= 0 for {shorten(key)}, got {shorten(weight)}", name)
        if cluster_gpus is not None:
            if not isinstance(key, (int, np.integer)) or isinstance(key, bool) or not 1 <= key <= MAX_JOB_GPUS:
                raise ConfigError(f"expected job sizes as GPU counts from 1 to {MAX_JOB_GPUS:,}, got {shorten(key)}",
                                  name)
            if key > cluster_gpus:
                continue
        if weight > 0:
            keys.append(key)
            weights.append(float(weight))
    if not keys:
        more = f" of at most {cluster_gpus:,} GPUs (the cluster)" if cluster_gpus is not None else ""
        raise ConfigError(f"no entry{more} with a weight above 0", name)
    total = sum(weights)
    if not math.isfinite(total):
        raise ConfigError(f"the weights add up to more than {np.finfo(float).max:.3g}; use smaller ones", name)
    return keys, np.asarray(weights) / total


def _arrivals(rng: np.random.Generator, jobs: int, span_s: float | None, rate_per_hour: float | None) -> np.ndarray:
    """Sorted submit times (s) of a Poisson process: a rate, or ``jobs`` arrivals within a span; the last
    at most :data:`MAX_TRACE_S` (a trace's bound)."""
    if rate_per_hour is not None:
        if not _number(rate_per_hour) or not 0 < rate_per_hour < math.inf:
            raise ConfigError(f"expected an arrival rate above 0 per hour, got {shorten(rate_per_hour)}",
                              "rate_per_hour")
        if jobs * 3600.0 / rate_per_hour > MAX_TRACE_S / 2:
            raise ConfigError(f"{jobs:,} jobs at {rate_per_hour:g} per hour arrive over about "
                              f"{jobs * 3600.0 / rate_per_hour:.3g} s; a trace spans at most {MAX_TRACE_S:g} s: "
                              "raise the rate", "rate_per_hour")
        gaps = rng.exponential(3600.0 / rate_per_hour, size=jobs)
        gaps[0] = 0.0  # the trace starts with its first job
        times = np.cumsum(gaps)
        if times[-1] > MAX_TRACE_S:
            raise ConfigError(f"the arrivals drawn span {times[-1]:.3g} s, beyond a trace's {MAX_TRACE_S:g} s: raise "
                              "the rate", "rate_per_hour")
        return times
    if span_s is None or not _number(span_s) or not 0 <= span_s <= MAX_TRACE_S:
        raise ConfigError(f"expected a span from 0 s to {MAX_TRACE_S:g} s (or a rate), got {shorten(span_s)}", "span_s")
    times = np.sort(rng.uniform(0.0, span_s, size=jobs))
    return times - times[0]


def _durations(rng: np.random.Generator, jobs: int, median_s: float, sigma: float,
               given: Sequence[float] | None) -> np.ndarray:
    if given is not None:
        values = np.asarray(given, dtype=float)
        if values.size == 0 or not np.all(values > 0) or not np.all(values <= MAX_TRACE_S):
            raise ConfigError(f"expected durations above 0 s, at most {MAX_TRACE_S:g} s", "durations_s")
        return rng.choice(values, size=jobs)
    low, high = DURATION_BOUNDS_S
    if not _number(median_s) or not low <= median_s <= high:
        raise ConfigError(f"expected a median duration from {low:g} s to {high:g} s (durations are clipped to that "
                          f"range), got {shorten(median_s)}", "median_duration_s")
    if not _number(sigma) or not 0 <= sigma <= MAX_SIGMA:
        raise ConfigError(f"expected a log-normal sigma from 0 to {MAX_SIGMA:g}, got {shorten(sigma)}",
                          "duration_sigma")
    return np.clip(rng.lognormal(np.log(median_s), sigma, size=jobs), low, high)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)


def _rows(models: np.ndarray, gpus: np.ndarray, presets: PresetCache, gpus_per_host: int) -> pd.DataFrame:
    """The model, parallelism and batch columns of each job (runnable by construction), each distinct
    (model, size) planned once."""
    pairs = pd.DataFrame({"model": models, "gpus": gpus})
    codes, unique = pd.factorize(pd.MultiIndex.from_frame(pairs))
    plans = []
    for model, g in unique:
        preset = presets.get(model)
        if preset is None:
            names = presets.names()
            raise ConfigError(f"unknown model {shorten(model)}; presets: {', '.join(names)}"
                              f"{did_you_mean(model, names)}", "model_mix")
        plans.append(plan_job(int(g), preset, gpus_per_host))
    plan = pd.DataFrame(plans, columns=list(PLAN_COLUMNS)).iloc[codes].reset_index(drop=True)
    table = pd.concat([pairs, plan], axis=1)
    return table.astype({"model": object, "gpus": "int64", "ep": "Int64", "global_batch": "Int64"})

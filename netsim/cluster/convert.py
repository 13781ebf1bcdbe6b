"""Converters from public cluster traces' published layouts to the job-trace format: which jobs are
kept, why the others are dropped (counted), and how each kept job gets a model and a parallelism.

SenseTime's Helios traces (Hu et al., SC'21; https://github.com/S-Lab-System-Group/HeliosData) are
read from a cluster's ``cluster_log.csv``: ``job_id, user, vc, gpu_num, cpu_num, node_num, state,
submit_time, start_time, end_time, duration, queue`` (``state`` one of Slurm's ``COMPLETED``,
``CANCELLED``, ``FAILED``, ``TIMEOUT``, ``NODE_FAIL``; ``duration`` is ``end_time - start_time`` in s).

Microsoft's Philly trace (Jeon et al., ATC'19; https://github.com/msr-fiddle/philly-traces) is read from
its ``cluster_job_log``: a JSON list of jobs, each with ``jobid``, ``status`` (``Pass``, ``Killed`` or
``Failed``), ``vc``, ``user``, ``submitted_time`` and ``attempts`` (``start_time``, ``end_time`` and
``detail``: a list of ``{ip, gpus: [gpu0, ...]}``), times as ``YYYY-MM-DD HH:MM:SS``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from netsim.cluster.presets import (
    PLAN_COLUMNS,
    SIZE_CLASSES,
    PresetCache,
    model_for_gpus,
    plan_job,
    search_dirs,
)
from netsim.cluster.trace import MAX_TRACE_BYTES, JobTrace, validate_trace
from netsim.errors import ConfigError, shorten

#: Where the Philly trace and its schema are published.
PHILLY_URL = "https://github.com/msr-fiddle/philly-traces"
#: Philly's job statuses: kept by default are the jobs that ran to completion.
PHILLY_STATUSES = ("Pass", "Killed", "Failed")
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
#: Where the Helios traces (SenseTime, Hu et al., SC'21) and their schema are published.
HELIOS_URL = "https://github.com/S-Lab-System-Group/HeliosData"
#: Helios's job states (Slurm's): kept by default are the completed jobs.
HELIOS_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL")
#: The columns of Helios's ``cluster_log.csv`` the converter reads.
HELIOS_COLUMNS = ("job_id", "user", "gpu_num", "state", "submit_time", "duration")
#: The trace formats :func:`convert` reads.
FORMATS = ("philly", "helios")
#: Options every converter takes (see :func:`convert_philly`).
OPTIONS = ("max_gpus", "start_s", "end_s", "limit", "min_gpus", "size_classes", "gpus_per_host", "preset_dirs")


@dataclass(frozen=True)
class Conversion:
    """A converted trace and what happened to the source's jobs.

    Attributes
    ----------
    trace:
        The kept jobs, validated.
    read:
        Jobs in the source.
    dropped:
        Reason -> jobs dropped for it, in the order the reasons are checked.
    """

    trace: JobTrace
    read: int
    dropped: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        """One line: read, kept, and the dropped counts by reason."""
        why = "; ".join(f"{n:,} {reason}" for reason, n in self.dropped.items() if n)
        return f"{self.read:,} jobs read, {len(self.trace):,} kept" + (f", dropped: {why}" if why else "")


def _philly_time(value: Any) -> datetime | None:
    """A Philly timestamp, or None when it is missing (``None``, ``"None"``, empty) or malformed."""
    if not isinstance(value, str) or value in ("", "None"):
        return None
    try:
        return datetime.strptime(value.strip(), _TIME_FORMAT)
    except ValueError:
        return None


def _philly_job(job: Any, statuses: Sequence[str], attempts: str) -> tuple[str, Any]:
    """``("ok", (jobid, submitted, gpus, runtime_s, user))`` for a usable job, else ``(reason, None)``."""
    if not isinstance(job, dict) or not isinstance(job.get("jobid"), str) or not job["jobid"]:
        return "malformed (no jobid)", None
    submitted = _philly_time(job.get("submitted_time"))
    if submitted is None:
        return "no submitted_time", None
    if job.get("status") not in statuses:
        return f"status {str(job.get('status'))[:20]} (not kept)", None
    runs = job.get("attempts")
    if not isinstance(runs, list) or not runs:
        return "no scheduling attempt", None
    last = runs[-1] if isinstance(runs[-1], dict) else {}
    if last.get("end_time") in (None, "None"):
        return "still running at the snapshot", None
    used = runs if attempts == "sum" else [last]
    runtime = 0.0
    for run in used:
        start = _philly_time(run.get("start_time")) if isinstance(run, dict) else None
        end = _philly_time(run.get("end_time")) if isinstance(run, dict) else None
        if start is None or end is None:
            return "attempt without start or end time", None
        runtime += (end - start).total_seconds()
    detail = last.get("detail")
    gpus = sum(len(m.get("gpus") or []) for m in detail if isinstance(m, dict)) if isinstance(detail, list) else 0
    if gpus == 0:
        return "no GPUs", None
    if runtime <= 0:
        return "no runtime (end not after start)", None
    return "ok", (job["jobid"], submitted, gpus, runtime, str(job.get("user") or ""))


def read_philly(path: str | Path) -> list:
    """The job list of a Philly ``cluster_job_log`` file (JSON); ConfigError naming the file otherwise."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_TRACE_BYTES * 8:
            raise ConfigError(f"file too large (limit {MAX_TRACE_BYTES * 8:,} bytes)", "", str(path))
        with path.open(encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ConfigError("file not found", "", str(path)) from None
    except IsADirectoryError:
        raise ConfigError("a directory, not a file", "", str(path)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"not a Philly cluster_job_log (JSON): {str(exc)[:200]}", "", str(path)) from None
    if not isinstance(data, list):
        raise ConfigError(f"expected a JSON list of jobs (Philly's cluster_job_log, {PHILLY_URL}), got a "
                          f"{type(data).__name__}", "", str(path))
    return data


def convert_philly(path: str | Path, *, statuses: Sequence[str] = ("Pass",), attempts: str = "last",
                   **options: Any) -> Conversion:
    """Convert Philly's ``cluster_job_log`` to a job trace.

    Parameters
    ----------
    path:
        The ``cluster_job_log`` JSON file.
    statuses:
        Job statuses kept (default ``Pass``: jobs that ran to completion; ``Killed`` and ``Failed`` jobs
        stopped early, so their runtime is not their length).
    attempts:
        ``last``: the runtime is the last attempt's (earlier ones were preempted or failed and restarted);
        ``sum``: all attempts' runtimes added.
    **options:
        What every converter takes (:data:`OPTIONS`): ``max_gpus`` (the cluster's GPUs: bigger jobs are
        dropped), ``start_s`` and ``end_s`` (keep jobs submitted in ``[start_s, end_s)`` seconds after the
        log's first submission), ``limit`` (keep the earliest this many), ``min_gpus`` (drop smaller
        jobs; 1 keeps single-GPU jobs, which occupy GPUs but never touch the fabric), ``size_classes``
        (the model by GPU count, :func:`netsim.cluster.presets.model_for_gpus`), ``gpus_per_host`` and
        ``preset_dirs`` (for :func:`netsim.cluster.presets.plan_job`).

    Returns
    -------
    Conversion
        Submit times relative to the first kept job; ``duration_s`` the measured runtime; GPUs those of
        the last attempt (summed over its machines).
    """
    if attempts not in ("last", "sum"):
        raise ConfigError(f"expected attempts 'last' or 'sum', got {shorten(attempts)}", "attempts")
    for status in statuses:
        if status not in PHILLY_STATUSES:
            raise ConfigError(f"unknown Philly status {shorten(status)}; allowed: {', '.join(PHILLY_STATUSES)}",
                              "status")
    data = read_philly(path)
    starts = [t for t in (_philly_time(j.get("submitted_time")) for j in data if isinstance(j, dict)) if t]
    t0 = min(starts, default=None)
    dropped: Counter = Counter()
    jobs, seen = [], set()
    for job in data:
        reason, info = _philly_job(job, statuses, attempts)
        if info is not None and info[0] in seen:
            reason, info = "duplicate jobid", None
        if info is None:
            dropped[reason] += 1
            continue
        seen.add(info[0])
        jobs.append(info)
    return _select(jobs, t0, str(path), len(data), dropped, **options)


def _select(jobs: list, t0: datetime | None, source: str, read: int, dropped: Counter, *, max_gpus: int | None = None,
            start_s: float = 0.0, end_s: float | None = None, limit: int | None = None, min_gpus: int = 1,
            size_classes: Sequence[tuple[int, str]] = SIZE_CLASSES, gpus_per_host: int = 8,
            preset_dirs: Sequence[Path] | None = None) -> Conversion:
    """The options every converter shares, applied to usable jobs ``(job, submitted, gpus, runtime_s, user)``
    in submit order: the time window from ``t0``, the GPU bounds and the count cap; then the trace."""
    kept = []
    for jobid, submitted, gpus, runtime, user in sorted(jobs, key=lambda j: j[1]):
        rel = (submitted - t0).total_seconds()
        reason = ("submitted outside the time window" if rel < start_s or (end_s is not None and rel >= end_s)
                  else f"fewer than {min_gpus} GPUs" if gpus < min_gpus
                  else f"more GPUs than the cluster's {max_gpus:,}" if max_gpus is not None and gpus > max_gpus
                  else f"beyond the first {limit:,} jobs" if limit is not None and len(kept) >= limit
                  else "")
        if reason:
            dropped[reason] += 1
        else:
            kept.append((jobid, rel, gpus, runtime, user))
    return Conversion(_trace(kept, source, max_gpus, size_classes, gpus_per_host, preset_dirs), read, dict(dropped))


def _trace(kept: list, source: str, max_gpus: int | None, size_classes: Sequence[tuple[int, str]],
           gpus_per_host: int, preset_dirs: Sequence[Path] | None) -> JobTrace:
    """The validated trace of converted jobs ``(job, submit_s, gpus, duration_s, user)``."""
    if not kept:
        raise ConfigError("no job left after filtering (see the dropped counts: widen the window, the statuses "
                          "or --max-gpus)", "", source)
    dirs = tuple(preset_dirs) if preset_dirs is not None else search_dirs()
    presets = PresetCache(dirs)
    first = kept[0][1]
    rows = []
    for job, rel, gpus, runtime, user in kept:
        model = model_for_gpus(gpus, size_classes)
        preset = presets.get(model)
        if preset is None:
            raise ConfigError(f"the size classes name model {shorten(model)}, which has no preset in "
                              f"{', '.join(map(str, dirs))}", "size_classes")
        rows.append((job, round(rel - first, 3), gpus, model, *plan_job(gpus, preset, gpus_per_host), runtime,
                     user))
    table = pd.DataFrame(rows, columns=["job", "submit_s", "gpus", "model", *PLAN_COLUMNS, "duration_s", "user"])
    table = table.astype({"ep": "Int64", "global_batch": "Int64"})
    return validate_trace(table, "", max_gpus, dirs)


def convert(fmt: str, path: str | Path, **options: Any) -> Conversion:
    """Convert a public trace of format ``fmt`` (one of :data:`FORMATS`); ``options`` go to its converter."""
    own = {"philly": ("statuses", "attempts"), "helios": ("statuses",)}
    if fmt in own:
        unknown = sorted(set(options) - set(OPTIONS) - set(own[fmt]))
        if unknown:
            raise ConfigError(f"{fmt} traces take no option {unknown[0]}", unknown[0])
        return (convert_philly if fmt == "philly" else convert_helios)(path, **options)
    raise ConfigError(f"unknown trace format {shorten(fmt)}; known: {', '.join(FORMATS)}", "format")


def convert_helios(path: str | Path, *, statuses: Sequence[str] = ("COMPLETED",), **options: Any) -> Conversion:
    """Convert a Helios cluster's ``cluster_log.csv`` to a job trace.

    Parameters
    ----------
    path:
        The ``cluster_log.csv`` file (of Earth, Saturn, Uranus or Venus).
    statuses:
        Job states kept (default ``COMPLETED``; ``CANCELLED`` jobs were stopped by their users and the
        others failed, so their runtime is not their length).
    **options:
        As for :func:`convert_philly` (:data:`OPTIONS`).

    Returns
    -------
    Conversion
        Submit times relative to the first kept job; ``duration_s`` the trace's ``duration``; GPUs its
        ``gpu_num`` (CPU-only jobs, about half of Helios's, are dropped as having no GPUs).
    """
    for status in statuses:
        if status not in HELIOS_STATES:
            raise ConfigError(f"unknown Helios state {shorten(status)}; allowed: {', '.join(HELIOS_STATES)}",
                              "status")
    table = _read_helios(Path(path))
    submitted = pd.to_datetime(table["submit_time"], format=_TIME_FORMAT, errors="coerce")
    gpus = pd.to_numeric(table["gpu_num"], errors="coerce")
    runtime = pd.to_numeric(table["duration"], errors="coerce")
    state = table["state"].astype(str).str.strip()
    reasons = [  # checked in this order; a job is counted under the first that applies
        ("malformed (no job_id)", table["job_id"].astype(str).str.strip().isin(["", "nan", "None"])),
        ("no submit_time", submitted.isna()),
        ("duplicate job_id", table["job_id"].duplicated()),
        ("state not kept", ~state.isin(list(statuses))),
        ("no GPUs", ~(gpus >= 1)),
        ("no runtime (duration missing or 0)", ~(runtime > 0)),
    ]
    dropped: Counter = Counter()
    usable = pd.Series(True, index=table.index)
    for reason, bad in reasons:
        hit = usable & bad.fillna(True)
        if reason == "state not kept":
            for name, n in state[hit].value_counts().items():
                dropped[f"state {str(name)[:20]} (not kept)"] += int(n)
        elif hit.any():
            dropped[reason] += int(hit.sum())
        usable &= ~hit
    t0 = submitted.min()
    jobs = [(str(j).strip(), t.to_pydatetime(), int(g), float(d), "" if pd.isna(u) else str(u))
            for j, t, g, d, u in zip(table["job_id"][usable], submitted[usable], gpus[usable], runtime[usable],
                                     table["user"][usable])]
    return _select(jobs, None if pd.isna(t0) else t0.to_pydatetime(), str(path), len(table), dropped, **options)


def _read_helios(path: Path) -> pd.DataFrame:
    """The cells of a Helios ``cluster_log.csv`` as text; ConfigError naming the file otherwise."""
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise ConfigError(f"file too large (limit {MAX_TRACE_BYTES:,} bytes)", "", str(path))
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise ConfigError("file not found", "", str(path)) from None
    except IsADirectoryError:
        raise ConfigError("a directory, not a file", "", str(path)) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"not a Helios cluster_log.csv: {str(exc).strip()[:200]}", "", str(path)) from None
    table.columns = [str(c).strip() for c in table.columns]
    missing = [c for c in HELIOS_COLUMNS if c not in table.columns]
    if missing:
        raise ConfigError(f"not a Helios cluster_log.csv ({HELIOS_URL}): missing column(s) {', '.join(missing)}; "
                          f"expected {', '.join(HELIOS_COLUMNS)} (and vc, cpu_num, node_num, start_time, "
                          f"end_time, queue)", "", str(path))
    return table

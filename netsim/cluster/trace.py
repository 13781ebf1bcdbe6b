"""The job-trace format of trace-driven cluster runs: one row per job (CSV or Parquet) read into a
validated, typed :class:`JobTrace`; every error names the file, the line (or row) and the column.

Columns (docs/cluster-traces.md has the full table): ``job``, ``submit_s`` (or ``submit`` with units),
``gpus``, ``model`` (a training preset's file stem, or ``collective:<op>:<algorithm>:<size>``), optional
``tp``, ``pp``, ``dp``, ``ep``, exactly one of ``iterations`` and ``duration_s`` per row, optional
``global_batch``, ``micro_batch``, ``priority`` and ``user``.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from netsim.cluster.presets import PresetCache, search_dirs
from netsim.cluster.validate import (
    ALLOWED,
    COLLECTIVE_PREFIX,
    REQUIRED,
    TRACE_DTYPES,
    CollectiveModel,
    _Where,
    check_table,
    parse_collective,
    parse_duration,
)
from netsim.errors import ConfigError, did_you_mean, shorten

#: Largest trace file read (bytes).
MAX_TRACE_BYTES = 2**30

@dataclass(frozen=True, eq=False)  # compare traces by their tables: a.jobs.equals(b.jobs)
class JobTrace:
    """A validated job trace: one row per job, columns and dtypes of :data:`TRACE_DTYPES`, sorted by
    submit time (ties keep the file's order), index 0..n-1.

    Attributes
    ----------
    jobs:
        The table. ``kind`` is ``training`` or ``collective``; ``iterations`` or ``duration_s`` is
        missing (``<NA>``/``NaN``) where the row gave the other.
    source:
        The file it was read from (``""`` for a generated trace).
    preset_dirs:
        Where its models' presets were found (:func:`netsim.cluster.presets.search_dirs`).
    """

    jobs: pd.DataFrame
    source: str = ""
    preset_dirs: tuple[Path, ...] = field(default_factory=tuple)

    def __len__(self) -> int:
        return len(self.jobs)

    def gpu_hours(self) -> float:
        """GPU-hours of the jobs given by ``duration_s`` (jobs given by iterations have no length yet)."""
        d = self.jobs["duration_s"]
        return float((self.jobs["gpus"] * d).sum(skipna=True) / 3600.0)

    def workload(self, job: str) -> dict:
        """The workload mapping of one job, as an experiment's ``workload:`` takes it: the preset's file
        with the row's parallelism and batch overrides laid on it (``iterations`` when the row gives them),
        or a ``type: collective`` mapping on ``gpus`` ranks."""
        row = self.jobs.loc[self.jobs["job"] == job]
        if row.empty:
            raise ConfigError(f"no job {shorten(job)} in the trace{did_you_mean(job, self.jobs['job'])}")
        return job_workload(row.iloc[0], self.preset_dirs)

    def write(self, path: str | Path) -> Path:
        """Write the trace as CSV or Parquet (by suffix), atomically; optional columns that are empty in
        every row are left out. Returns the path."""
        path = Path(path)
        kind = _file_kind(path)
        out = self.jobs.drop(columns=["kind"])
        for col in ("ep", "iterations", "duration_s", "global_batch", "micro_batch"):
            if out[col].isna().all():
                out = out.drop(columns=[col])
        if (out["priority"] == 0).all():
            out = out.drop(columns=["priority"])
        if (out["user"] == "").all():
            out = out.drop(columns=["user"])
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            if kind == "parquet":
                out.to_parquet(tmp, index=False)
            else:
                out.to_csv(tmp, index=False)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path


def job_workload(row: pd.Series, preset_dirs: tuple[Path, ...] = ()) -> dict:
    """The workload mapping of one validated trace row (see :meth:`JobTrace.workload`)."""
    iterations = None if pd.isna(row["iterations"]) else int(row["iterations"])
    if row["kind"] == "collective":
        c = parse_collective(row["model"])
        out = {"type": "collective", "op": c.op, "algorithm": c.algorithm, "size": c.size_bytes,
               "ranks": int(row["gpus"])}
        return out | ({"iterations": iterations} if iterations else {})
    preset = PresetCache(preset_dirs or search_dirs()).get(row["model"])
    if preset is None:
        raise ConfigError(f"model {shorten(row['model'])} not found in {', '.join(map(str, preset_dirs))}")
    from netsim.config import _deep_merge, _read_yaml
    _, data = _read_yaml(preset.path, "a mapping with 'type' (a workload)")
    data = data.get("workload", data)
    over: dict[str, Any] = {"parallelism": {"tp": int(row["tp"]), "pp": int(row["pp"]), "dp": int(row["dp"])}}
    if not pd.isna(row["ep"]):
        over["moe"] = {"ep": int(row["ep"])}
    model = {k: int(row[k]) for k in ("global_batch", "micro_batch") if not pd.isna(row[k])}
    if model:
        over["model"] = model
    if iterations:
        over["iterations"] = iterations
    return _deep_merge(data, over)


def read_trace(path: str | Path, max_gpus: int | None = None) -> JobTrace:
    """Read and validate a job trace (CSV or Parquet, by suffix).

    Parameters
    ----------
    path:
        The trace. CSV lines starting with ``#`` are comments.
    max_gpus:
        The cluster's GPUs: a job asking for more is an error.

    Returns
    -------
    JobTrace
        Raises :class:`~netsim.errors.ConfigError` naming ``file:line`` (CSV, the header being line 1) or
        the row (Parquet), the column, what is wrong and what is allowed.

    Examples
    --------
    >>> trace = read_trace("experiments/traces/small-cluster.csv", max_gpus=128)  # doctest: +SKIP
    >>> len(trace), int(trace.jobs["gpus"].max())  # doctest: +SKIP
    (12, 64)
    """
    path = Path(path)
    kind = _file_kind(path)
    _check_file(path)
    lines: list[int] | None = None
    if kind == "parquet":
        try:
            raw = pd.read_parquet(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a file that is not Parquet
            raise ConfigError(f"cannot read as Parquet: {str(exc)[:200]}", "", str(path)) from None
        raw = raw.reset_index(drop=True).astype(object)
    else:
        raw, lines = _read_csv(path)
    return validate_trace(raw, str(path), max_gpus, search_dirs(path), lines)


def validate_trace(table: pd.DataFrame, source: str = "", max_gpus: int | None = None,
                   preset_dirs: tuple[Path, ...] | None = None, lines: list[int] | None = None) -> JobTrace:
    """Validate a table of jobs (the columns of a trace file, values as text or numbers) into a
    :class:`JobTrace`; ``lines[i]`` is row i's line in ``source`` (else errors name the row).

    Used by :func:`read_trace`, the converters and the generator, so every trace passes one validator.
    """
    dirs = tuple(preset_dirs) if preset_dirs is not None else search_dirs()
    jobs = check_table(table, _Where(source, lines), max_gpus, PresetCache(dirs))
    jobs = jobs.sort_values("submit_s", kind="stable").reset_index(drop=True)
    return JobTrace(jobs.astype(TRACE_DTYPES)[list(TRACE_DTYPES)], source, dirs)


def _file_kind(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".csv":
        return "csv"
    raise ConfigError(f"expected a trace file ending in .csv or .parquet, got {shorten(path.name)}", "", str(path))


def _check_file(path: Path) -> None:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigError("file not found", "", str(path)) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read: {getattr(exc, 'strerror', None) or exc}", "", str(path)) from None
    if path.is_dir():
        raise ConfigError("a directory, not a file", "", str(path))
    if info.st_size > MAX_TRACE_BYTES:
        raise ConfigError(f"file too large: {info.st_size:,} bytes (limit {MAX_TRACE_BYTES:,})", "", str(path))


def _read_csv(path: Path) -> tuple[pd.DataFrame, list[int] | None]:
    """The cells of a CSV trace as text, and each row's line number (None when a quoted field spans lines)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start:,})", "", str(path)) from None
    lines = [n for n, line in enumerate(text.splitlines(), 1) if line.strip() and not line.startswith("#")]
    if not lines:
        raise ConfigError("the file is empty: expected a header line (job,submit_s,gpus,model,...) and one line "
                          "per job", "", str(path))
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, comment="#",
                          skipinitialspace=True)
    except (pd.errors.ParserError, ValueError) as exc:
        raise ConfigError(f"not a valid CSV table: {str(exc).strip()[:200]}", "", str(path)) from None
    raw.columns = [str(c).strip() for c in raw.columns]
    return raw, (lines[1:] if len(lines) - 1 == len(raw) else None)


__all__ = ["ALLOWED", "COLLECTIVE_PREFIX", "REQUIRED", "TRACE_DTYPES", "CollectiveModel", "JobTrace",
           "job_workload", "parse_collective", "parse_duration", "read_trace", "validate_trace"]

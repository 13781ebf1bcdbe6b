"""The rules of the job-trace format, checked column by column (vectorised) and then row by row: what
:func:`netsim.cluster.trace.read_trace` and every trace producer run before a trace is handed on."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from netsim import units
from netsim.cluster.presets import PresetCache
from netsim.errors import ConfigError, NetsimError, did_you_mean, shorten

#: The columns of a validated trace, in order, with their dtypes (``Int64``: an integer or missing).
TRACE_DTYPES: dict[str, Any] = {
    "job": object, "submit_s": "float64", "gpus": "int64", "model": object, "kind": object,
    "tp": "int64", "pp": "int64", "dp": "int64", "ep": "Int64", "iterations": "Int64",
    "duration_s": "float64", "global_batch": "Int64", "micro_batch": "Int64", "priority": "int64",
    "user": object,
}
#: Columns a trace file must have (``submit`` may stand for ``submit_s``).
REQUIRED = ("job", "submit_s", "gpus", "model")
#: Columns a trace file may have (``kind`` is derived from ``model``, never read).
ALLOWED = tuple(c for c in TRACE_DTYPES if c != "kind") + ("submit",)
#: Latest submit time and longest duration (s): about 31 years, so a timestamp in ms fails at once.
MAX_TRACE_S = 1e9
#: Most GPUs one job may ask for, and most iterations.
MAX_JOB_GPUS = 2_000_000
MAX_JOB_ITERATIONS = 1_000_000
#: Largest model override (global or micro batch) and parallel size.
MAX_DIM = 100_000_000
#: Job names: what results and dashboards can use as a label (no path, no spaces).
JOB_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:\-]{0,199}")
#: The prefix of a non-training job's model: ``collective:<op>:<algorithm>:<size>``.
COLLECTIVE_PREFIX = "collective:"

_DURATION_UNITS = {"d": 86400.0, "day": 86400.0, "days": 86400.0, "h": 3600.0, "hr": 3600.0,
                   "min": 60.0, "m": 60.0}
_DURATION = re.compile(r"\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?)\s*(d|days?|h|hr|min|m)\s*")


def parse_duration(value: float | str) -> float:
    """Seconds from a number of seconds or a string with a unit: ``90``, ``30s``, ``500ms``, ``30min``,
    ``2h``, ``1d`` (``m`` is minutes, ``min`` too; :func:`netsim.units.parse_time`'s forms otherwise).

    Examples
    --------
    >>> parse_duration("2h"), parse_duration("30min"), parse_duration("1.5d"), parse_duration(90)
    (7200.0, 1800.0, 129600.0, 90.0)
    """
    if isinstance(value, str):
        match = _DURATION.fullmatch(value) if len(value) <= 64 else None
        if match:
            return float(match[1]) * _DURATION_UNITS[match[2]]
        if value.strip() and value.strip().replace(".", "", 1).isdigit():  # a bare number of seconds
            return float(value)
    try:
        return units.parse_time(value)
    except NetsimError:
        raise units.UnitError(f"cannot parse {shorten(value)} as a duration: expected seconds or a number "
                              f"with a unit like 30s, 30min, 2h, 1d") from None


@dataclass(frozen=True)
class CollectiveModel:
    """The ``collective:<op>:<algorithm>:<size>`` value of a non-training job."""

    op: str
    algorithm: str
    size_bytes: float


def parse_collective(model: str) -> CollectiveModel:
    """The collective a ``collective:<op>:<algorithm>:<size>`` model names; ConfigError (without a location)
    for a malformed one, an unknown op/algorithm pair or a bad size.

    Examples
    --------
    >>> parse_collective("collective:allreduce:ring:256MiB")
    CollectiveModel(op='allreduce', algorithm='ring', size_bytes=268435456.0)
    """
    parts = model.split(":")
    if len(parts) != 4 or parts[0] != "collective" or not all(p.strip() for p in parts[1:]):
        raise ConfigError(f"expected collective:<op>:<algorithm>:<size> (like collective:allreduce:ring:256MiB), "
                          f"got {shorten(model)}")
    _, op, algorithm, size = (p.strip() for p in parts)
    from netsim.collectives import ALGORITHM_OPS
    ops = sorted({o for v in ALGORITHM_OPS.values() for o in v})
    if op not in ops:
        raise ConfigError(f"unknown collective op {shorten(op)}; allowed: {', '.join(ops)}{did_you_mean(op, ops)}")
    algorithms = ["auto", *sorted(a for a, v in ALGORITHM_OPS.items() if op in v)]   # auto: NCCL's pick by size
    if algorithm not in algorithms:
        raise ConfigError(f"unknown algorithm {shorten(algorithm)} for {op}; allowed: {', '.join(algorithms)}"
                          f"{did_you_mean(algorithm, algorithms)}")
    try:
        size_bytes = units.parse_size(size)
    except NetsimError as exc:
        raise ConfigError(str(exc)) from None
    if not 1 <= size_bytes <= 2**60:
        raise ConfigError(f"expected a size from 1B to 2**60 bytes, got {shorten(size)}")
    return CollectiveModel(op, algorithm, size_bytes)



@dataclass(frozen=True)
class _Where:
    """Locates a row of a table in its file for error messages."""

    file: str
    lines: list[int] | None

    def error(self, message: str, row: int | None, column: str = "") -> ConfigError:
        if row is None:
            return ConfigError(message, column, self.file or None, 1 if self.lines is not None else None)
        if self.lines is not None:
            return ConfigError(message, column, self.file or None, self.lines[row])
        return ConfigError(message, f"row {row}" + (f", column {column}" if column else ""), self.file or None)



def _column(table: pd.DataFrame, name: str) -> pd.Series | None:
    return table[name] if name in table.columns else None


def _check_columns(table: pd.DataFrame, where: _Where) -> None:
    """Known columns only, the required ones present, one of submit/submit_s, a length column."""
    for col in table.columns:
        if col not in ALLOWED:
            raise where.error(f"unknown column {shorten(col)}; allowed: {', '.join(ALLOWED)}"
                              f"{did_you_mean(col, ALLOWED)}", None)
    if "submit_s" in table.columns and "submit" in table.columns:
        raise where.error("give submit_s (seconds) or submit (with units), not both", None, "submit")
    for col in REQUIRED:
        if col not in table.columns and not (col == "submit_s" and "submit" in table.columns):
            raise where.error(f"missing required column {col!r}; a trace needs {', '.join(REQUIRED)} and "
                              f"iterations or duration_s", None)
    if "iterations" not in table.columns and "duration_s" not in table.columns:
        raise where.error("missing column: a trace needs iterations or duration_s (one of them per row)", None)
    if table.empty:
        raise where.error("no jobs: the trace has a header but no rows", None)


def _check_row(row: Any, i: int, where: _Where, presets: PresetCache) -> tuple[str, int, int, int]:
    """One job's cross-column rules; returns (kind, tp, pp, dp) with the defaults filled."""
    has_iter, has_dur = not math.isnan(row.iterations), not math.isnan(row.duration_s)
    if has_iter == has_dur:
        raise where.error("give exactly one of iterations and duration_s per job" +
                          (", not both" if has_iter else "; this row has neither"), i,
                          "duration_s" if has_iter else "iterations")
    gpus = int(row.gpus)
    tp = 1 if math.isnan(row.tp) else int(row.tp)
    pp = 1 if math.isnan(row.pp) else int(row.pp)
    if math.isnan(row.dp):
        if gpus % (tp * pp):
            raise where.error(f"tp x pp ({tp} x {pp}) must divide gpus ({gpus}); dp defaults to gpus / (tp x pp)",
                              i, "tp")
        dp = gpus // (tp * pp)
    else:
        dp = int(row.dp)
    if tp * pp * dp != gpus:
        raise where.error(f"tp x pp x dp = {tp} x {pp} x {dp} = {tp * pp * dp}, but the job has {gpus} GPUs; "
                          f"their product must equal gpus", i, "dp")
    if not row.model:
        raise where.error("missing model: expected a training preset (like gpt-7.5b) or "
                          "collective:<op>:<algorithm>:<size>", i, "model")
    if row.model.startswith(COLLECTIVE_PREFIX):
        _check_collective(row, i, where, tp, pp)
        return "collective", tp, pp, dp
    _check_training(row, i, where, presets, pp, dp)
    return "training", tp, pp, dp


def _check_collective(row: Any, i: int, where: _Where, tp: int, pp: int) -> None:
    try:
        parse_collective(row.model)
    except ConfigError as exc:
        raise where.error(exc.message, i, "model") from None
    if row.gpus < 2:
        raise where.error(f"a collective job needs at least 2 GPUs, got {int(row.gpus)}", i, "gpus")
    for name in ("ep", "global_batch", "micro_batch"):
        if not math.isnan(getattr(row, name)):
            raise where.error(f"{name} applies to training jobs only; leave it empty for a collective job", i, name)
    if tp != 1 or pp != 1:
        raise where.error("a collective job runs on all its GPUs as one communicator: leave tp and pp empty (or 1)",
                          i, "tp" if tp != 1 else "pp")


def _check_training(row: Any, i: int, where: _Where, presets: PresetCache, pp: int, dp: int) -> None:
    try:
        preset = presets.get(row.model)
    except ConfigError as exc:
        raise where.error(exc.format(), i, "model") from None
    if preset is None:
        names = presets.names()
        raise where.error(f"unknown model {shorten(row.model)}: expected a training preset (a workloads/NAME.yaml "
                          f"next to the trace or in the repository: {', '.join(names) or 'none found'}) or "
                          f"collective:<op>:<algorithm>:<size>{did_you_mean(row.model, names)}", i, "model")
    if preset.is_moe:
        ep = preset.ep if math.isnan(row.ep) else int(row.ep)
        source = "" if not math.isnan(row.ep) else f", from {row.model}"
        if ep is not None and dp % ep:
            raise where.error(f"ep ({ep}{source}) must divide dp ({dp}): expert-parallel groups are made of "
                              f"data-parallel replicas; set ep to a divisor of dp", i, "ep")
        if ep is not None and preset.experts % ep:
            raise where.error(f"{row.model}'s {preset.experts} experts must be a multiple of ep ({ep})", i, "ep")
    elif not math.isnan(row.ep):
        raise where.error(f"ep applies to mixture-of-experts presets (with a moe section); {row.model} is dense: "
                          f"leave ep empty", i, "ep")
    if preset.layers is not None and pp > preset.layers:
        raise where.error(f"pp ({pp}) is more pipeline stages than {row.model}'s {preset.layers} layers", i, "pp")
    micro = preset.micro_batch if math.isnan(row.micro_batch) else int(row.micro_batch)
    glob = preset.global_batch if math.isnan(row.global_batch) else int(row.global_batch)
    if glob is not None and glob % (micro * dp):
        col = "global_batch" if not math.isnan(row.global_batch) else "dp"
        raise where.error(f"global_batch ({glob}{'' if col == 'global_batch' else ', from ' + row.model}) must be a "
                          f"multiple of micro_batch x dp ({micro} x {dp}); set global_batch to one", i, col)

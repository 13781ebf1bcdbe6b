"""Summaries of a results directory: mean and 95% confidence interval over seeds, per variant and swept point."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from netsim.experiment.metrics import METRICS
from netsim.experiment.results import read_table


def group_keys(runs: pd.DataFrame, manifest: dict) -> list[str]:
    """What distinguishes the runs apart from their seed: the variant and the swept keys."""
    keys = ["variant"] if "variant" in runs.columns else []
    for axis in manifest.get("axes", []):
        keys += [k for k in axis if k != "seed" and k in runs.columns and k not in keys]
    return keys


def interval(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float, int]:
    """(mean, half-width of the Student-t confidence interval, n) of the finite values; NaN half-width for n < 2.

    >>> m, h, n = interval(np.array([1.0, 2.0, 3.0]))
    >>> round(m, 6), round(h, 4), n
    (2.0, 2.4841, 3)
    """
    values = values[np.isfinite(values)]
    n = len(values)
    if n == 0:
        return math.nan, math.nan, 0
    mean = float(values.mean())
    if n < 2:
        return mean, math.nan, n
    from scipy import stats  # perf: 0.9 s to import, and a single run never needs it

    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * values.std(ddof=1) / math.sqrt(n))
    if half <= 1e-9 * abs(mean):  # equal values up to float rounding
        half = 0.0
    return mean, half, n


def summarize(out_dir: str | Path, metrics: list[str] | None = None) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Per group (variant and swept values): runs ok/failed and, per metric, mean, ci95 half-width and n.

    Returns ``(summary, group keys, metrics)``; columns are the group keys, ``runs``, ``failed``,
    then ``<metric>``, ``<metric>_ci95``, ``<metric>_n`` for each metric.
    """
    out_dir = Path(out_dir)
    runs = read_table(out_dir / "runs.parquet")
    manifest = json.loads((out_dir / "manifest.json").read_text())
    keys = group_keys(runs, manifest)
    if "status" not in runs.columns:
        runs = runs.assign(status="ok")
    if metrics is None:
        metrics = [m for m in METRICS.headline() if m in runs.columns and runs[m].notna().any()]
    else:
        missing = [m for m in metrics if m not in runs.columns]
        if missing:
            numeric = sorted(c for c in runs.columns if pd.api.types.is_numeric_dtype(runs[c]))
            from netsim.errors import NetsimError, did_you_mean
            raise NetsimError(f"unknown metric {', '.join(missing)}; runs.parquet has: {', '.join(numeric)}"
                              f"{did_you_mean(missing[0], numeric)}")
    rows = []
    grouped = runs.groupby(keys, sort=False, dropna=False) if keys else [((), runs)]
    for key, g in grouped:
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key))
        ok = g[g["status"] == "ok"]
        row["runs"], row["failed"] = len(ok), int((g["status"] != "ok").sum())
        for m in metrics:
            mean, half, n = interval(pd.to_numeric(ok[m], errors="coerce").to_numpy(dtype=float)) if len(ok) \
                else (math.nan, math.nan, 0)
            row[m], row[f"{m}_ci95"], row[f"{m}_n"] = mean, half, n
        rows.append(row)
    return pd.DataFrame(rows), keys, metrics

"""Panels of trace-driven cluster runs (:mod:`netsim.cluster.sim`): from ``cluster_jobs.parquet`` and
``cluster_series.parquet`` only.

A summary per variant (jobs, job completion time, queueing delay, slowdown vs running alone, GPU
utilisation), CDFs per variant of per-job slowdown, JCT and queueing delay (seeds of a variant pooled),
and busy GPUs and core-link load over simulated time (first run of each variant). A CDF whose every
value is the same number is left out (the summary shows that number), as is an over-time chart whose
runs hold a single epoch each.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from netsim.experiment.summary import interval
from netsim.report.display import human_time
from netsim.report.workload_panels import table_figure

#: Per-run statistics of the summary: column -> (header, kind); kind ``time``, ``ratio`` or ``share``.
SUMMARY = {"jobs": ("jobs", "count"), "jct_mean_s": ("mean JCT", "time"), "jct_p95_s": ("p95 JCT", "time"),
           "queue_mean_s": ("mean queueing delay", "time"), "slowdown_mean": ("mean slowdown vs alone", "ratio"),
           "slowdown_p95": ("p95 slowdown vs alone", "ratio"), "makespan_s": ("makespan", "time"),
           "gpu_utilisation": ("GPU utilisation", "share")}


def has_cluster(tables: dict[str, pd.DataFrame]) -> bool:
    """The results hold trace-driven cluster runs (a non-empty ``cluster_jobs`` table)."""
    jobs = tables.get("cluster_jobs")
    return jobs is not None and len(jobs) > 0


def cluster_gpus(series: pd.DataFrame | None, run_ids, results_dir: Path | None = None) -> dict[str, int]:
    """run_id -> GPUs of its cluster: busy GPUs / utilisation of an epoch with busy GPUs, else (no such
    epoch: a ``mode: full`` run records none) the topology rebuilt from the run's spec; runs it cannot
    tell are left out."""
    out: dict[str, int] = {}
    if series is not None and len(series):
        busy = series[series["utilisation"] > 0]
        ratio = (busy["busy_gpus"] / busy["utilisation"]).round()
        out = {r: int(v) for r, v in ratio.groupby(busy["run_id"]).first().items()}
    for run_id in run_ids:
        if run_id not in out and results_dir is not None:
            n = _topology_gpus(results_dir / "runs" / str(run_id) / "run.json")
            if n:
                out[run_id] = n
    return out


def _topology_gpus(info: Path) -> int | None:
    """GPUs of the fabric of the run whose ``run.json`` is ``info`` (None when it cannot be rebuilt)."""
    from netsim.config import parse_spec
    from netsim.experiment.run import build_topology
    try:
        return int(build_topology(parse_spec(json.loads(info.read_text())["spec"])).n_gpus)
    except Exception:  # noqa: BLE001 - results from another version may not rebuild; utilisation shows "-"
        return None


def run_statistics(jobs: pd.DataFrame, gpus: dict[str, int]) -> pd.DataFrame:
    """One row per run: the :data:`SUMMARY` statistics of its jobs.

    Makespan runs from time 0 (where the simulation, and its epochs, start) to the last completion;
    GPU utilisation is the busy GPU time (each job's GPUs x its running time) over makespan x the
    cluster's GPUs, as the ``cluster_utilisation`` run metric has it.
    """
    rows = []
    for run_id, j in jobs.groupby("run_id", sort=False):
        makespan = float(j["end_s"].max())
        busy = float((j["gpus"] * (j["end_s"] - j["start_s"])).sum())
        n = gpus.get(run_id)
        rows.append({"run_id": run_id, "jobs": len(j), "jct_mean_s": j["jct_s"].mean(),
                     "jct_p95_s": j["jct_s"].quantile(0.95), "queue_mean_s": j["queue_s"].mean(),
                     "slowdown_mean": j["slowdown"].mean(), "slowdown_p95": j["slowdown"].quantile(0.95),
                     "makespan_s": makespan,
                     "gpu_utilisation": busy / (makespan * n) if n and makespan > 0 else math.nan})
    return pd.DataFrame(rows, columns=["run_id", *SUMMARY])


def summary_table(jobs: pd.DataFrame, gpus: dict[str, int], label: dict[str, str]) -> pd.DataFrame:
    """One row per variant: each :data:`SUMMARY` statistic's mean over the variant's seeds, its 95%
    interval half-width (``<column>_ci95``, NaN for one seed) and the seed count ``seeds``."""
    stats = run_statistics(jobs, gpus)
    stats["variant"] = stats["run_id"].map(label)
    rows = []
    for variant, g in stats.groupby("variant", sort=False):
        row = {"variant": variant, "seeds": len(g)}
        for column in SUMMARY:
            row[column], row[f"{column}_ci95"], _n = interval(g[column].to_numpy(dtype=float))
        rows.append(row)
    return pd.DataFrame(rows)


def _shown(kind: str, mean: float, half: float) -> str:
    """A summary cell: the mean in human units, ``± half`` when there is an interval."""
    if math.isnan(mean):
        return "-"
    text = {"time": human_time, "ratio": lambda v: f"{v:.3f}", "share": lambda v: f"{v:.1%}",
            "count": lambda v: f"{v:g}"}[kind]
    return text(mean) + ("" if math.isnan(half) or half == 0 else f" ± {text(half)}")


def summary_figure(table: pd.DataFrame, title: str) -> go.Figure:
    """:func:`summary_table` as a table figure, values in human units."""
    out = pd.DataFrame({"variant": table["variant"], "seeds": table["seeds"]})
    for column, (header, kind) in SUMMARY.items():
        out[header] = [_shown(kind, m, h) for m, h in zip(table[column], table[f"{column}_ci95"])]
    return table_figure(out, title)


def cdf_figure(values: pd.Series, groups: pd.Series, title: str, xaxis_title: str, points: int = 1000,
               log_x: bool = False) -> go.Figure:
    """Empirical CDF of ``values``, one step curve per group (in order of appearance), drawn through at
    most ``points`` evenly spaced order statistics of each."""
    fig = go.Figure()
    x_all = values.to_numpy(dtype=float)
    for name, rows in groups.groupby(groups, sort=False).indices.items():
        x = np.sort(x_all[rows])
        x = x[np.isfinite(x)]
        n = len(x)
        if not n:
            continue
        k = np.unique(np.linspace(0, n - 1, min(n, points)).round().astype(np.int64))
        fig.add_trace(go.Scatter(x=x[k], y=(k + 1) / n, mode="lines+markers" if n <= 50 else "lines",
                                 line_shape="hv", name=str(name),
                                 hovertemplate="%{x:.4g}: %{y:.0%} of jobs at most<extra>%{fullData.name}</extra>"))
    fig.update_layout(title=title, xaxis_title=xaxis_title, yaxis_title="fraction of jobs",
                      xaxis_type="log" if log_x else None, yaxis_range=[0, 1.02])
    return fig


def _varies(values: pd.Series) -> bool:
    """More than one distinct finite value (else a chart would draw a single number)."""
    v = values.to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    return len(v) > 1 and bool(np.ptp(v) > 1e-9 * max(1.0, float(np.abs(v).max())))


def distribution_figures(jobs: pd.DataFrame, label: dict[str, str]) -> list[go.Figure]:
    """Per-job slowdown, JCT and queueing delay as CDFs per variant (seeds pooled)."""
    groups = jobs["run_id"].map(label)
    figs = []
    if _varies(jobs["slowdown"]):
        fig = cdf_figure(jobs["slowdown"], groups, "Per-job slowdown vs running alone on the same GPUs: CDF per "
                         "variant (seeds pooled)", "slowdown (time running / time alone)")
        fig.add_vline(x=1.0, line_dash="dot")
        figs.append(fig)
    jct = jobs["jct_s"].to_numpy(dtype=float)
    if _varies(jobs["jct_s"]):
        wide = bool(jct.min() > 0 and jct.max() / jct.min() > 100)
        figs.append(cdf_figure(jobs["jct_s"], groups, "Job completion time (submit to end): CDF per variant "
                               "(seeds pooled)", "job completion time (s)", log_x=wide))
    if _varies(jobs["queue_s"]):
        figs.append(cdf_figure(jobs["queue_s"], groups, "Queueing delay (submit to start): CDF per variant "
                               "(seeds pooled)", "queueing delay (s)"))
    return figs


def _steps(s: pd.DataFrame, column: str) -> tuple[list[float], list[float], list]:
    """x, y and hover data of a step line (``hv``) through the epochs of one run, closed at the last end."""
    x = [*s["t_start_s"], s["t_end_s"].iloc[-1]]
    y = [*s[column], s[column].iloc[-1]]
    custom = list(zip(s["running"], s["waiting"], s["busy_gpus"]))
    return x, y, [*custom, custom[-1]]


def timeline_figures(series: pd.DataFrame, runs: pd.DataFrame, label: dict[str, str]) -> list[go.Figure]:
    """Busy GPUs (utilisation) and core-link mean load per epoch over simulated time, one step line per
    variant (its first run); none when every such run holds a single epoch."""
    chosen = runs[runs["run_id"].isin(label)].assign(_v=lambda r: r["run_id"].map(label)).drop_duplicates("_v")
    per_run = [(v, series[series["run_id"] == r].sort_values("t_start_s")) for r, v in zip(chosen["run_id"],
                                                                                         chosen["_v"])]
    per_run = [(v, s) for v, s in per_run if len(s)]
    if not per_run or max(len(s) for _v, s in per_run) < 2:
        return []
    seeds = " (first seed of each variant)" if len(runs) > len(chosen) else ""
    hover = ("t = %{x:.4g} s: %{y:.1%}<br>%{customdata[0]} running, %{customdata[1]} waiting, "
             "%{customdata[2]} busy GPUs<extra>%{fullData.name}</extra>")
    figs = []
    for column, title, axis in (
            ("utilisation", "Busy GPUs over time: share of the cluster's GPUs held by running jobs", "busy GPUs"),
            ("core_mean_util", ("Core-link load over time: mean utilisation of the switch-to-switch links "
                                "per epoch"), "core links' mean utilisation")):
        fig = go.Figure()
        for variant, s in per_run:
            x, y, custom = _steps(s, column)
            fig.add_trace(go.Scatter(x=x, y=y, customdata=custom, mode="lines", line_shape="hv", name=str(variant),
                                     hovertemplate=hover))
        fig.update_layout(title=title + seeds, xaxis_title="simulated time (s)", yaxis_title=axis,
                          yaxis_tickformat=".0%", yaxis_rangemode="tozero", hovermode="x unified")
        figs.append(fig)
    return figs


def cluster_figures(tables: dict[str, pd.DataFrame], runs: pd.DataFrame, label: dict[str, str],
                    results_dir: Path | None = None, sweep: bool = False) -> list[go.Figure]:
    """The cluster panels of the runs named in ``label`` (see the module docstring)."""
    jobs = tables["cluster_jobs"]
    jobs = jobs[jobs["run_id"].isin(label)]
    if not len(jobs):
        return []
    series = tables.get("cluster_series")
    series = series[series["run_id"].isin(label)] if series is not None else pd.DataFrame()
    gpus = cluster_gpus(series, list(jobs["run_id"].unique()), results_dir)
    table = summary_table(jobs, gpus, label)
    title = ("Cluster runs per variant: jobs, job completion time, queueing delay, slowdown vs alone, GPU "
             "utilisation (mean ± 95% interval over seeds)" if sweep else
             "Runs and workload steps (cluster): jobs, job completion time, queueing delay, slowdown vs alone, "
             "GPU utilisation")
    figs = [summary_figure(table, title), *distribution_figures(jobs, label)]
    if len(series):
        figs += timeline_figures(series, runs, label)
    return figs

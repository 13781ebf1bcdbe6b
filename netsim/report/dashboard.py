"""Turn a results directory into ``report.html``: a summary table and plotly figures, offline-ready."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from netsim.experiment.results import read_results

GBPS = 1e9 / 8  # bytes/s in one Gbps


def _summary(runs: pd.DataFrame, colls: pd.DataFrame) -> go.Figure:
    """One row per run and workload step."""
    meta = runs.set_index("run_id")
    g = colls.groupby(["run_id", "step", "label"], sort=False)
    table = g.agg(op=("op", "first"), algorithm=("algorithm", "first"), size=("size_bytes", "first"),
                  ranks=("n_ranks", "first"), calls=("duration_s", "size"), time=("duration_s", "mean"),
                  busbw=("busbw_Bps", "mean"), ideal=("ideal_s", "mean"), slowdown=("slowdown", "mean")).reset_index()
    out = pd.DataFrame({
        "run": table["run_id"],
        "routing": table["run_id"].map(meta["routing.type"]),
        "placement": table["run_id"].map(meta["placement.type"]),
        "step": table["step"],
        "collective": table["label"].where(table["label"] == table["op"] + "/" + table["algorithm"],
                                           table["label"] + " (" + table["op"] + "/" + table["algorithm"] + ")"),
        "size (MiB)": (table["size"] / 2**20).round(4),
        "ranks": table["ranks"],
        "calls": table["calls"],
        "time (ms)": (table["time"] * 1e3).round(4),
        "busbw (Gbps)": (table["busbw"] / GBPS).round(2),
        "ideal (ms)": (table["ideal"] * 1e3).round(4),
        "slowdown": table["slowdown"].round(3),
        "max link util": table["run_id"].map(meta["max_link_util"]).round(3),
    })
    # Run-level load-balancing metrics (absent from results written before they existed).
    for column, name in (("max_congestion", "max congestion"), ("congestion_ratio", "vs spraying"),
                         ("queue_pairs", "queue pairs")):
        if column in meta:
            out[name] = table["run_id"].map(meta[column]).round(3)
    fig = go.Figure(go.Table(header={"values": list(out.columns)},
                             cells={"values": [out[c] for c in out.columns]}))
    fig.update_layout(title="Runs and workload steps", height=160 + 28 * min(len(out), 40),
                      margin={"t": 50, "b": 10, "l": 10, "r": 10})
    return fig


def _size_swept(colls: pd.DataFrame) -> bool:
    """More than one message size for some collective of some run: plot against size."""
    return bool((colls.groupby(["run_id", "op", "algorithm"])["size_bytes"].nunique() > 1).any())


def _collective_figures(colls: pd.DataFrame) -> list[go.Figure]:
    """Bandwidth and slowdown-vs-ideal: against message size when sizes vary, else per call."""
    c = colls.assign(busbw_Gbps=colls["busbw_Bps"] / GBPS, collective=colls["op"] + "/" + colls["algorithm"],
                     call="job " + colls["job"].astype(str) + ", step " + colls["step"].astype(str) + ", call "
                     + colls["iteration"].astype(str))
    has_ideal = bool(colls["ideal_s"].notna().any())
    if _size_swept(colls):
        by_size = c.groupby(["run_id", "collective", "size_bytes"], as_index=False)[
            ["busbw_Gbps", "duration_s", "slowdown"]].mean().sort_values("size_bytes")
        dash = "run_id" if by_size["run_id"].nunique() > 1 else None
        figs = [px.line(by_size, x="size_bytes", y="busbw_Gbps", color="collective", line_dash=dash, markers=True,
                        log_x=True, hover_data=["duration_s"], title="Bus bandwidth vs message size (Gbps)")]
        if has_ideal:
            figs.append(px.line(by_size, x="size_bytes", y="slowdown", color="collective", line_dash=dash,
                                markers=True, log_x=True,
                                title="Slowdown vs ideal (the call alone, non-blocking core) by message size"))
        for fig in figs:
            fig.update_xaxes(title="message size (bytes)")
    else:
        figs = [px.bar(c, x="call", y="busbw_Gbps", color="run_id", barmode="group",
                       hover_data=["duration_s", "size_bytes", "n_ranks", "label"],
                       title="Collective bus bandwidth per call (Gbps)")]
        if has_ideal:
            figs.append(px.bar(c, x="call", y="slowdown", color="run_id", barmode="group",
                               hover_data=["label", "ideal_s"],
                               title="Slowdown vs ideal (the call alone, non-blocking core) per call"))
        for fig in figs:
            fig.update_xaxes(type="category")
    if has_ideal:
        low, high = colls["slowdown"].min(), colls["slowdown"].max()  # keep float noise from setting the scale
        figs[-1].add_hline(y=1.0, line_dash="dot")
        figs[-1].update_yaxes(range=[min(0.95, low - 0.05), max(1.1, high * 1.05)], tickformat=".2f")
    return figs


BREAKDOWN = {"compute_s": "compute", "tp_s": "exposed TP", "pp_s": "exposed PP", "dp_s": "exposed DP",
             "bubble_s": "bubble"}


def _job_figures(jobs: pd.DataFrame, iterations: pd.DataFrame) -> list[go.Figure]:
    """Jobs table; for training jobs, the iteration-time breakdown and the time of every iteration."""
    training = jobs["kind"] == "training"
    table = jobs.assign(**{
        "iteration (ms)": (jobs["iteration_time_s"] * 1e3).round(3),
        "TFLOPS/GPU": jobs["tflops_per_gpu"].round(1),
        "start (ms)": (jobs["start_s"] * 1e3).round(3), "end (ms)": (jobs["end_s"] * 1e3).round(3),
        "tp/pp/dp": (jobs["tp"].astype(str) + "/" + jobs["pp"].astype(str) + "/" + jobs["dp"].astype(str)
                     ).where(training, "-"),
        "TCP comms tp/dp/pp": (jobs["tcp_tp"].astype(str) + "/" + jobs["tcp_dp"].astype(str) + "/"
                               + jobs["tcp_pp"].astype(str)).where(training, "-"),
        "slowdown": jobs["slowdown"].round(3)})
    cols = ["run_id", "name", "kind", "placement", "n_ranks", "tp/pp/dp", "partition", "start (ms)", "end (ms)",
            "iterations", "iteration (ms)", "TFLOPS/GPU", "TCP comms tp/dp/pp", "slowdown"]
    cells = [table[c].map(lambda v: "-" if v is None or v != v or v == "" else str(v)) for c in cols]
    fig = go.Figure(go.Table(header={"values": cols}, cells={"values": cells}))
    fig.update_layout(title="Jobs", height=160 + 28 * min(len(table), 40), margin={"t": 50, "b": 10, "l": 10, "r": 10})
    figs = [fig]
    if len(iterations):
        mean = iterations.groupby(["run_id", "name"], as_index=False, sort=False)[list(BREAKDOWN)].mean()
        long = mean.melt(id_vars=["run_id", "name"], value_vars=list(BREAKDOWN), var_name="part", value_name="s")
        long["part"] = long["part"].map(BREAKDOWN)
        long["ms"] = long["s"] * 1e3
        long["job"] = long["name"] if long["run_id"].nunique() == 1 else long["run_id"] + " " + long["name"]
        figs.append(px.bar(long, x="job", y="ms", color="part", barmode="stack",
                           title="Training iteration time by part (ms, mean over iterations and stages)"))
        it = iterations.assign(ms=iterations["duration_s"] * 1e3)
        if it.groupby(["run_id", "name"]).size().max() < 2:
            return figs
        figs.append(px.line(it, x="iteration", y="ms", color="name", markers=True,
                            line_dash="run_id" if it["run_id"].nunique() > 1 else None,
                            title="Iteration time per job (ms)"))
        figs[-1].update_xaxes(dtick=1)
    return figs


def build_figures(results_dir: str | Path) -> list[go.Figure]:
    """The dashboard's figures for one results directory, in page order."""
    t = read_results(results_dir)
    runs, colls, flows, links = t["runs"], t["collectives"], t["flows"], t["links"]
    jobs, iterations = t.get("jobs"), t.get("iterations")
    figs = [_summary(runs, colls)]
    if jobs is not None and len(jobs) and (jobs.groupby("run_id").size().max() > 1
                                           or (jobs["kind"] == "training").any()):
        figs += _job_figures(jobs, iterations if iterations is not None else pd.DataFrame())
        training = jobs.loc[jobs["kind"] == "training", ["run_id", "job"]]
        # a training job's TP/DP calls are summarised by its breakdown, not plotted one by one
        keep = ~colls.set_index(["run_id", "job"]).index.isin(pd.MultiIndex.from_frame(training))
        colls = colls[keep]
    if len(colls):
        figs += _collective_figures(colls)
    if len(flows):
        f = flows.assign(fct_s=flows["end_s"] - flows["start_s"])
        figs.append(px.ecdf(f, x="fct_s", color="run_id", log_x=True, title="Message completion time CDF (s)"))
    used = links[links["bytes"] > 0]
    if len(used):
        figs.append(px.box(used, x="tier", y="mean_util", color="run_id", points=False,
                           title="Mean utilisation of used links, by tier"))
        top = used.sort_values("peak_util", ascending=False).head(25)
        top = top.assign(link=top["src"] + "→" + top["dst"])
        figs.append(px.bar(top, x="link", y=["peak_util", "mean_util"], barmode="group",
                           title="Most loaded links: peak and mean utilisation"))
    return figs


def write_report(results_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write a self-contained ``report.html`` (plotly.js inlined: it opens offline).

    Parameters
    ----------
    results_dir:
        A directory written by :func:`netsim.experiment.write_results`.
    out:
        Target file (default ``results_dir/report.html``); written atomically.
    """
    results_dir = Path(results_dir)
    out = Path(out) if out else results_dir / "report.html"
    figs = build_figures(results_dir)
    manifest = json.loads((results_dir / "manifest.json").read_text())
    parts = [fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"responsive": True},
                         default_height="480px" if i else None)
             for i, fig in enumerate(figs)]
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>netsim: {html.escape(manifest['name'])}</title>"
            "<style>body{font-family:sans-serif;margin:2em} .fig{margin-bottom:2em} pre{background:#f4f4f4;"
            "padding:1em;overflow:auto}</style></head><body>"
            f"<h1>netsim — {html.escape(manifest['name'])}</h1>"
            + "".join(f"<div class='fig'>{p}</div>" for p in parts)
            + "<h2>Manifest</h2><pre>" + html.escape(json.dumps(manifest, indent=2)) + "</pre></body></html>")
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out)
    return out


def n_figures(results_dir: str | Path) -> int:
    """How many figures the dashboard of ``results_dir`` holds (for browser checks)."""
    return len(build_figures(results_dir))


__all__ = ["build_figures", "n_figures", "write_report"]

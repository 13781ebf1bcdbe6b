"""Turn a results directory into ``report.html``: a summary table and plotly figures, offline-ready."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from netsim.experiment.outdir import write_file_atomically
from netsim.experiment.metrics import CHART_UNITS, METRICS
from netsim.experiment.results import read_results, read_table
from netsim.experiment.summary import group_keys, summarize

GBPS = 1e9 / 8  # bytes/s in one Gbps
#: Axis titles for the columns the figures plot.
LABELS = {"time_s": "time (s)", "busbw_Gbps": "bus bandwidth (Gbps)", "fct_s": "message completion time (s)",
          "mean_util": "mean utilisation", "peak_util": "peak utilisation", "slowdown": "slowdown vs ideal",
          "size_bytes": "message size (bytes)", "line": "", "group": "", "ms": "ms"}


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
            fig = px.scatter(c, x="call", y="slowdown", color="run_id", hover_data=["label", "ideal_s"],
                             title="Slowdown vs ideal (the call alone, non-blocking core) per call")
            fig.update_traces(marker={"size": 11})
            figs.append(fig)
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
        "TCP comms tp/pp/dp": (jobs["tcp_tp"].astype(str) + "/" + jobs["tcp_pp"].astype(str) + "/"
                               + jobs["tcp_dp"].astype(str)).where(training, "-"),
        "slowdown": jobs["slowdown"].round(3)})
    cols = [*(["variant"] if "variant" in jobs.columns and jobs["variant"].nunique() > 1 else ["run_id"]),
            "name", "kind", "placement", "n_ranks", "tp/pp/dp", "partition", "start (ms)", "end (ms)",
            "iterations", "iteration (ms)", "TFLOPS/GPU", "TCP comms tp/pp/dp", "slowdown"]
    figs = [_table(table[cols], "Jobs")]
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
        figs[-1].update_yaxes(rangemode="tozero")
    return figs


def _table(df: pd.DataFrame, title: str) -> go.Figure:
    cells = [df[c].map(lambda v: "-" if v is None or v != v or v == "" else str(v)) for c in df.columns]
    fig = go.Figure(go.Table(header={"values": list(df.columns)}, cells={"values": cells}))
    fig.update_layout(title=title, height=160 + 28 * min(len(df), 40), margin={"t": 50, "b": 10, "l": 10, "r": 10})
    return fig


def _group_label(frame: pd.DataFrame, keys: list[str]) -> pd.Series:
    """One text label per row from the variant and swept values (``c4p, workload.size=1MiB``)."""
    if not keys:
        return pd.Series(["run"] * len(frame), index=frame.index)
    parts = [frame[k].astype(str) if k == "variant" else k + "=" + frame[k].astype(str) for k in keys]
    label = parts[0]
    for p in parts[1:]:
        label = label + ", " + p
    return label.str.strip(", ")


def _sweep_summary(results_dir: Path) -> tuple[go.Figure, pd.DataFrame, list[str], list[str]]:
    """One row per variant / grid point: mean ± 95% interval over seeds of the headline metrics."""
    table, keys, metrics = summarize(results_dir)
    shown = table[keys + ["runs", "failed"]].copy()
    for m in metrics:
        scale, unit = CHART_UNITS[METRICS[m].kind] if m in METRICS else (1.0, "")
        unit = f" ({unit})" if unit else ""
        mean, half = table[m] * scale, table[f"{m}_ci95"] * scale
        shown[m.removesuffix("_s").removesuffix("_Bps") + unit] = [
            "-" if a != a else f"{a:.4g}" + ("" if h != h else f" ± {h:.2g}") for a, h in zip(mean, half)]
    return _table(shown, "Variants and grid points: mean ± 95% interval over seeds"), table, keys, metrics


def _metric_bars(table: pd.DataFrame, keys: list[str], metrics: list[tuple[str, str, float]]) -> list[go.Figure]:
    """Bars per variant (colour: the first swept key) with the 95% interval over seeds as error bars."""
    figs = []
    x = "variant" if "variant" in keys and table["variant"].nunique() > 1 else None
    rest = [k for k in keys if k != "variant"]
    colour = rest[0] if rest else None
    facet = rest[1] if len(rest) > 1 else None
    frame = table.copy()
    if x is None:
        frame["group"] = _group_label(frame, keys)
        x = "group"
    for col in [c for c in (colour, facet) if c]:
        frame[col] = frame[col].astype(str)
    for metric, title, scale in metrics:
        if metric not in frame or frame[metric].isna().all():
            continue
        frame["_y"] = frame[metric] * scale
        frame["_e"] = frame[f"{metric}_ci95"].fillna(0) * scale
        fig = px.bar(frame, x=x, y="_y", error_y="_e", color=colour, facet_col=facet, barmode="group",
                     title=title, hover_data=[f"{metric}_n"])
        fig.update_yaxes(title=None)
        figs.append(fig)
    return figs


def _size_figures(colls: pd.DataFrame, runs: pd.DataFrame, keys: list[str]) -> list[go.Figure]:
    """busbw and time against message size (log-x), one line per variant / collective, facets for a
    further swept key."""
    extra = [k for k in keys if k not in ("variant", "workload.size")]
    c = colls.merge(runs[["run_id", *[k for k in keys if k not in colls.columns]]], on="run_id", how="left") \
        if keys else colls.copy()
    c["collective"] = c["op"] + "/" + c["algorithm"]
    c["line"] = (c["variant"].astype(str) + " " if "variant" in c and c["variant"].nunique() > 1 else "") \
        + c["collective"]
    facet = extra[0] if extra else None
    group = ["line", "size_bytes", *([facet] if facet else [])]
    if facet:
        c[facet] = c[facet].astype(str)
    by = c.groupby(group, as_index=False).agg(busbw_Gbps=("busbw_Bps", lambda v: v.mean() / GBPS),
                                              time_s=("duration_s", "mean"), slowdown=("slowdown", "mean"))
    by = by.sort_values("size_bytes")
    style = dict(color="line", line_dash="line", symbol="line", facet_col=facet, markers=True, log_x=True,
                 labels=LABELS)  # dashes and symbols: lines that coincide stay visible
    figs = [px.line(by, x="size_bytes", y="busbw_Gbps", title="Bus bandwidth vs message size (mean over seeds)",
                    **style),
            px.line(by, x="size_bytes", y="time_s", log_y=True, title="Collective time vs message size", **style)]
    if by["slowdown"].notna().any():
        figs.append(px.line(by, x="size_bytes", y="slowdown",
                            title="Slowdown vs ideal (the call alone, non-blocking core) by size", **style))
    for fig in figs:
        fig.update_xaxes(title="message size (bytes)")
    return figs


def _fct_figure(flows: pd.DataFrame, runs: pd.DataFrame, keys: list[str], per_group: int = 20_000) -> go.Figure:
    """Message completion-time CDF, one curve per variant / grid point (sampled to ``per_group`` points)."""
    f = flows.assign(fct_s=flows["end_s"] - flows["start_s"])
    label = _group_label(runs, keys) if len(runs) > 1 else pd.Series(runs["run_id"].to_numpy(), index=runs.index)
    f["group"] = f["run_id"].map(dict(zip(runs["run_id"], label)))
    f = pd.concat([g.sample(per_group, random_state=0) if len(g) > per_group else g
                   for _, g in f.groupby("group", sort=False)])
    return px.ecdf(f, x="fct_s", color="group", line_dash="group", log_x=True, labels=LABELS,
                   title="Message completion time CDF")


def _heatmaps(series: pd.DataFrame, runs: pd.DataFrame, keys: list[str], top: int = 20,
              max_runs: int = 3) -> list[go.Figure]:
    """Utilisation over time of the most loaded links (peak of the binned series), for the first run of
    up to ``max_runs`` variants."""
    figs = []
    chosen = runs.drop_duplicates("variant") if "variant" in runs.columns else runs
    for _, run in chosen.head(max_runs).iterrows():
        s = series[series["run_id"] == run["run_id"]]
        if s.empty:
            continue
        peak = s.groupby("link_id")["util"].max().sort_values(ascending=False).head(top)
        s = s[s["link_id"].isin(peak.index)]
        s = s.assign(link=s["src"] + "→" + s["dst"], t_ms=s["t_start_s"] * 1e3)
        grid = s.pivot_table(index="link", columns="t_ms", values="util", aggfunc="mean")
        grid = grid.reindex([lk for lk in (s.drop_duplicates("link_id").set_index("link_id").loc[peak.index, "link"])])
        name = run.get("variant") or run["run_id"]
        fig = go.Figure(go.Heatmap(z=grid.to_numpy(), x=list(grid.columns), y=list(grid.index), zmin=0, zmax=1,
                                   colorscale="Viridis", colorbar={"title": "util"}))
        fig.update_layout(title=f"Utilisation over time of the {len(grid)} most loaded links ({name})",
                          xaxis_title="time (ms)", height=240 + 18 * len(grid))
        figs.append(fig)
    return figs


def _topology_figure(results_dir: Path, runs: pd.DataFrame, links: pd.DataFrame, manifest: dict,
                     max_nodes: int = 400) -> go.Figure | None:
    """The fabric of the first run, cables coloured by mean utilisation; None when too large to draw."""
    from netsim.config import parse_spec
    from netsim.experiment.run import build_topology
    from netsim.report.topology_drawing import topology_figure
    spec = manifest.get("spec")
    run_id = runs["run_id"].iloc[0]
    info = results_dir / "runs" / run_id / "run.json"
    if info.is_file():
        spec = json.loads(info.read_text()).get("spec", spec)
    if not spec:
        return None
    try:
        topo = build_topology(parse_spec(spec))
    except Exception:  # noqa: BLE001 - a drawing is optional; results from another version may not rebuild
        return None
    if topo.n_hosts + sum(1 for _n, k in topo.graph.nodes(data="kind") if k in ("leaf", "spine", "switch")) > max_nodes:
        return None
    l = links[links["run_id"] == run_id]
    util = np.zeros(len(topo.links))
    util[l["link_id"].to_numpy()] = l["peak_util"].to_numpy()
    fig = topology_figure(topo, utilisation=util)
    variant = runs["variant"].iloc[0] if "variant" in runs.columns else ""
    which = f"variant {variant}" if variant else f"run {run_id}"
    fig.update_layout(title=f"{fig.layout.title.text} — cables by peak utilisation ({which})", height=600)
    return fig


def build_figures(results_dir: str | Path) -> list[go.Figure]:
    """The dashboard's figures for one results directory, in page order; they adapt to what it holds
    (one run or a sweep, sizes swept, training jobs, link series, a fabric small enough to draw)."""
    results_dir = Path(results_dir)
    t = read_results(results_dir)
    manifest = json.loads((results_dir / "manifest.json").read_text())
    runs, colls, flows, links = t["runs"], t["collectives"], t["flows"], t["links"]
    ok_runs = runs[runs["status"] == "ok"] if "status" in runs.columns else runs
    sweep = len(runs) > 1  # a sweep directory holding one run reads like a single run
    keys = group_keys(runs, manifest) if sweep else []
    jobs, iterations = t.get("jobs"), t.get("iterations")
    if sweep:
        summary_fig, table, keys, _metrics = _sweep_summary(results_dir)
        figs = [summary_fig]
        for row in METRICS.chart_rows():
            figs += _metric_bars(table, keys, [(m.name, m.chart_title(), CHART_UNITS[m.kind][0]) for m in row])
    else:
        figs = [_summary(runs, colls)]
    if jobs is not None and len(jobs) and (jobs.groupby("run_id").size().max() > 1
                                           or (jobs["kind"] == "training").any()):
        figs += _job_figures(jobs, iterations if iterations is not None else pd.DataFrame())
        training = jobs.loc[jobs["kind"] == "training", ["run_id", "job"]]
        # a training job's TP/DP calls are summarised by its breakdown, not plotted one by one
        keep = ~colls.set_index(["run_id", "job"]).index.isin(pd.MultiIndex.from_frame(training))
        colls = colls[keep]
    if len(colls):
        sizes = colls.groupby(["op", "algorithm"])["size_bytes"].nunique().max() > 1
        if sizes:
            figs += _size_figures(colls, ok_runs, keys)
        elif not sweep:
            figs += _collective_figures(colls)
    if len(flows):
        figs.append(_fct_figure(flows, ok_runs, keys))
    series = t.get("link_series")
    if series is not None and len(series):
        figs += _heatmaps(series, ok_runs, keys)
    used = links[links["bytes"] > 0]
    if len(used):
        label = dict(zip(ok_runs["run_id"], _group_label(ok_runs, keys))) if sweep else None
        used = used.assign(group=used["run_id"].map(label) if label else used["run_id"])
        figs.append(px.box(used, x="tier", y="mean_util", color="group", points=False, labels=LABELS,
                           title="Mean utilisation of used links, by tier"))
        if not sweep:
            top = used.sort_values("peak_util", ascending=False).head(25)
            top = top.assign(link=top["src"] + "→" + top["dst"])
            figs.append(px.bar(top, x="link", y=["peak_util", "mean_util"], barmode="group",
                               labels={**LABELS, "value": "utilisation", "variable": ""},
                               title="Most loaded links: peak and mean utilisation"))
    if len(ok_runs):
        drawing = _topology_figure(results_dir, ok_runs, links, manifest)
        if drawing is not None:
            figs.append(drawing)
    return figs


def render_report(results_dir: str | Path) -> str:
    """The dashboard of ``results_dir`` as one self-contained HTML page (plotly.js inlined)."""
    results_dir = Path(results_dir)
    figs = build_figures(results_dir)
    manifest = json.loads((results_dir / "manifest.json").read_text())
    shown = {k: v for k, v in manifest.items() if k not in ("status", "files")}  # bookkeeping, not results
    parts = [fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"responsive": True},
                         default_height="480px" if i else None)
             for i, fig in enumerate(figs)]
    status = manifest.get("status", "complete")
    banner = ("" if status == "complete" else
              f"<p class='warning'><b>Incomplete results</b> (status: {html.escape(str(status))}): only the runs "
              "that finished are shown; <code>netsim sweep --resume</code> continues the sweep.</p>")
    below = _below_bound(results_dir)
    if below:
        banner += (f"<p class='warning' id='below-bound'><b>{below} collective call(s) finished faster than their "
                   "provable lower bound</b> (column <code>below_bound</code> of collectives.parquet): these "
                   "numbers break a physical bound and should not be trusted. A raised "
                   "<code>engine.completion_tolerance</code> lets flows finish that much early per step: lower it "
                   "(0 is exact); with the default tolerance, please report it with the experiment file.</p>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>netsim: {html.escape(manifest['name'])}</title>"
            "<style>body{font-family:sans-serif;margin:2em} .fig{margin-bottom:2em} pre{background:#f4f4f4;"
            "padding:1em;overflow:auto} .warning{background:#fff3cd;padding:1em}</style></head><body>"
            f"<h1>netsim — {html.escape(manifest['name'])}</h1>" + banner
            + "".join(f"<div class='fig'>{p}</div>" for p in parts)
            + "<h2>Manifest</h2><pre>" + html.escape(json.dumps(shown, indent=2)) + "</pre></body></html>")


def _below_bound(results_dir: Path) -> int:
    """Collective calls flagged as faster than their lower bound."""
    path = results_dir / "collectives.parquet"
    if not path.is_file():
        return 0
    colls = read_table(path)
    return int(colls["below_bound"].sum()) if "below_bound" in colls.columns else 0


def write_report(results_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write a self-contained ``report.html`` (plotly.js inlined: it opens offline).

    Parameters
    ----------
    results_dir:
        A directory written by :func:`netsim.experiment.write_results`.
    out:
        Target file (default ``results_dir/report.html``); written atomically, replacing what is there.
    """
    results_dir = Path(results_dir)
    out = Path(out) if out else results_dir / "report.html"
    return write_file_atomically(out, render_report(results_dir), force=True)


def n_figures(results_dir: str | Path) -> int:
    """How many figures the dashboard of ``results_dir`` holds (for browser checks)."""
    return len(build_figures(results_dir))


__all__ = ["build_figures", "n_figures", "render_report", "write_report"]

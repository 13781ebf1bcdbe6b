"""Turn a results directory into ``report.html``: tables and plotly figures that fit the workload.

Panels: collectives show time and algorithm/bus bandwidth against the ideal; training shows iteration
time, exposed communication and per-job slowdown (no bus bandwidth); runs with faults get a timeline;
trace-driven cluster runs show JCT, queueing, slowdown and utilisation (:mod:`netsim.report.cluster_panels`).
A detection evaluation shows the detector's accuracy per fault kind (:mod:`netsim.report.detection_panels`).
A sweep's charts aggregate over seeds only and name every point by its variant (see
:mod:`netsim.report.grid`). Figures are built from the results files only, never from live objects.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from netsim.experiment.metrics import CHART_UNITS, METRICS
from netsim.experiment.outdir import write_file_atomically
from netsim.experiment.results import RESULT_FILES, read_results, read_table
from netsim.experiment.summary import group_keys, summarize
from netsim.report.answer import Comparison, answer_figure, is_training, opening, uplink_figure
from netsim.report.answer_fabric import collision_figure, placement_figure
from netsim.report.charts import box, grouped_bars
from netsim.report.cluster_panels import cluster_figures, has_cluster
from netsim.report.detection_panels import detection_figures, has_detection
from netsim.report.display import (
    format_value,
    human_bandwidth,
    human_size,
    human_time,
    manifest_html,
    title,
    variant_text,
)
from netsim.report.grid import metric_bars, run_labels, variant_label
from netsim.report.page import page_html, shared_plotly
from netsim.report.tiers import pod_traffic_figure, tier_table
from netsim.report.workload_panels import (
    fault_costs_table,
    fault_timeline,
    jobs_table,
    table_figure,
    training_figures,
)
from netsim.topology import Topology

GBPS = 1e9 / 8  # bytes/s in one Gbps
#: Axis titles for the columns the figures plot.
LABELS = {"time_s": "time (s)", "busbw_Gbps": "bus bandwidth (Gbps)", "fct_s": "message completion time (s)",
          "mean_util": "mean utilisation", "peak_util": "peak utilisation", "slowdown": "slowdown vs ideal",
          "size_bytes": "message size", "line": "", "group": "", "ms": "ms", "tier": "tier"}
#: The columns of flows.parquet the figures read (perf: it may hold millions of rows).
FLOW_COLUMNS_SHOWN = ["run_id", "connection", "src", "dst", "size_bytes", "start_s", "end_s"]
#: Run metrics that describe collective calls: not charted for training-only results.
COLLECTIVE_METRICS = ("collective_time_s", "algbw_Bps", "busbw_Bps", "ideal_time_s", "slowdown")


def _summary(runs: pd.DataFrame, colls: pd.DataFrame, label: dict[str, str]) -> go.Figure:
    """One row per run and workload step, headers titled and values in human units."""
    meta = runs.set_index("run_id")
    g = colls.groupby(["run_id", "step", "label"], sort=False)
    table = g.agg(op=("op", "first"), algorithm=("algorithm", "first"), size=("size_bytes", "first"),
                  ranks=("n_ranks", "first"), calls=("duration_s", "size"), time=("duration_s", "mean"),
                  algbw=("algbw_Bps", "mean"), busbw=("busbw_Bps", "mean"), ideal=("ideal_s", "mean"),
                  slowdown=("slowdown", "mean")).reset_index()
    out = pd.DataFrame({
        "variant": table["run_id"].map(label),
        "routing": table["run_id"].map(meta["routing.type"]),
        "placement": table["run_id"].map(meta["placement.type"]),
        "step": table["step"],
        "collective": table["label"].where(table["label"] == table["op"] + "/" + table["algorithm"],
                                           table["label"] + " (" + table["op"] + "/" + table["algorithm"] + ")"),
        title("size_bytes"): table["size"].map(human_size),
        title("n_ranks"): table["ranks"],
        "calls": table["calls"],
        "time": table["time"].map(human_time),
        "ideal time": table["ideal"].map(human_time),
        title("algbw_Bps").split(" (")[0]: table["algbw"].map(human_bandwidth),
        title("busbw_Bps").split(" (")[0]: table["busbw"].map(human_bandwidth),
        title("slowdown"): table["slowdown"].round(3),
    })
    # Run-level load-balancing metrics (absent from results written before they existed).
    for column in ("max_link_util", "max_congestion", "congestion_ratio", "queue_pairs"):
        if column in meta:
            out[title(column)] = table["run_id"].map(meta[column]).round(3)
    return table_figure(out, "Runs and workload steps")


def _training_summary(runs: pd.DataFrame, label: dict[str, str]) -> go.Figure:
    """One row per training run: the metrics that matter for training (no bus bandwidth)."""
    out = pd.DataFrame({"variant": runs["run_id"].map(label), "routing": runs["routing.type"],
                        "placement": runs["placement.type"]})
    for column in ("iteration_time_s", "tflops_per_gpu", "max_link_util", "max_congestion", "congestion_ratio",
                   "queue_pairs"):
        if column in runs:
            values = runs[column]
            out[title(column).split(" (")[0]] = values.map(human_time) if column.endswith("_s") \
                else values.round(3)
    return table_figure(out, "Runs and workload steps (training)")




def _per_call(colls: pd.DataFrame) -> pd.DataFrame:
    """Collective calls with a readable call name and the bandwidths the ideal time would give."""
    speedup = colls["duration_s"] / colls["ideal_s"]
    return colls.assign(
        call="job " + colls["job"].astype(str) + ", step " + colls["step"].astype(str) + ", call "
        + colls["iteration"].astype(str) + " (" + colls["op"] + "/" + colls["algorithm"] + ", "
        + colls["size_bytes"].map(human_size) + ")",
        time_ms=colls["duration_s"] * 1e3, ideal_ms=colls["ideal_s"] * 1e3,
        algbw_Gbps=colls["algbw_Bps"] / GBPS, busbw_Gbps=colls["busbw_Bps"] / GBPS,
        ideal_busbw_Gbps=colls["busbw_Bps"] / GBPS * speedup)


def _collective_figures(colls: pd.DataFrame) -> list[go.Figure]:
    """One run's calls: time against the ideal time, and algorithm/bus bandwidth against the ideal busbw
    (none for a single call: its numbers are in the summary table)."""
    if len(colls) < 2:
        return []
    c = _per_call(colls)
    has_ideal = bool(c["ideal_s"].notna().any())
    time = go.Figure(go.Bar(x=list(c["call"]), y=list(c["time_ms"]), name="time",
                            customdata=list(c["duration_s"].map(human_time)),
                            hovertemplate="%{x}<br>time %{customdata}<extra></extra>"))
    bw = go.Figure([go.Bar(x=list(c["call"]), y=list(c["algbw_Gbps"]), name="algorithm bandwidth"),
                    go.Bar(x=list(c["call"]), y=list(c["busbw_Gbps"]), name="bus bandwidth")])
    if has_ideal:
        marker = {"symbol": "line-ew-open", "size": 30, "line": {"width": 3}, "color": "black"}
        time.add_trace(go.Scatter(x=list(c["call"]), y=list(c["ideal_ms"]), mode="markers", marker=marker,
                                  name="ideal (the call alone, non-blocking core)"))
        bw.add_trace(go.Scatter(x=list(c["call"]), y=list(c["ideal_busbw_Gbps"]), mode="markers", marker=marker,
                                name="bus bandwidth at the ideal time"))
    time.update_layout(title="Collective time per call vs ideal (ms)", yaxis_title="ms")
    bw.update_layout(title="Algorithm and bus bandwidth per call vs ideal (Gbps)", yaxis_title="Gbps",
                     barmode="group")
    for fig in (time, bw):
        fig.update_xaxes(type="category")
    return [time, bw]


def _sweep_summary(results_dir: Path, drop: tuple[str, ...]) -> tuple[go.Figure, pd.DataFrame, list[str]]:
    """One row per variant: mean ± 95% interval over seeds (and the seed count) of the headline metrics."""
    table, keys, metrics = summarize(results_dir)
    shown = pd.DataFrame({k: table[k].map(lambda v, k=k: str(v) if k == "variant" else format_value(k, v))
                          for k in keys if not (k == "variant" and table[k].isin(["", None]).all())})
    shown["seeds ok"], shown["failed"] = table["runs"], table["failed"]
    for m in [m for m in metrics if m not in drop]:
        scale = CHART_UNITS[METRICS[m].kind][0] if m in METRICS else 1.0
        mean, half = table[m] * scale, table[f"{m}_ci95"] * scale
        shown[title(m)] = ["-" if pd.isna(a) else f"{a:.4g}" + ("" if pd.isna(h) else f" ± {h:.2g}")
                           for a, h in zip(mean, half)]
    fig = table_figure(shown, "Variants and grid points: mean ± 95% interval over seeds")
    return fig, table, keys


def _sweep_bars(table: pd.DataFrame, keys: list[str], drop: tuple[str, ...]) -> list[go.Figure]:
    """A bar chart per charted metric; keys every variant shares are named in the title."""
    constant = [k for k in keys if table[k].nunique(dropna=False) == 1 and table[k].iloc[0] not in ("", None)]
    same = f" — all runs: {', '.join(variant_text(k, table[k].iloc[0]) for k in constant)}" if constant else ""
    figs = []
    for row in METRICS.chart_rows():
        for m in row:
            if m.name in drop:
                continue
            scale, unit = CHART_UNITS[m.kind]
            fig = metric_bars(table, keys, m.name, m.chart_title() + same, scale, unit)
            if fig is not None:
                figs.append(fig)
    return figs


def _size_figures(colls: pd.DataFrame, runs: pd.DataFrame, keys: list[str]) -> list[go.Figure]:
    """busbw and time against message size (log-x): one line per variant (every grid key but the size in
    its name) and collective, each point the mean over seeds."""
    others = [k for k in keys if k not in ("workload.size",)]
    label = dict(zip(runs["run_id"], variant_label(runs, others))) if others else {}
    c = colls.assign(collective=colls["op"] + "/" + colls["algorithm"])
    several = bool(label) and len(set(label.values())) > 1
    c["line"] = (c["run_id"].map(label) + " | " if several else "") + c["collective"]
    per_run = c.groupby(["line", "size_bytes", "run_id"], as_index=False).agg(
        busbw_Gbps=("busbw_Bps", lambda v: v.mean() / GBPS), time_s=("duration_s", "mean"),
        slowdown=("slowdown", "mean"))
    by = per_run.groupby(["line", "size_bytes"], as_index=False).agg(
        busbw_Gbps=("busbw_Gbps", "mean"), time_s=("time_s", "mean"), slowdown=("slowdown", "mean"),
        seeds=("run_id", "nunique")).sort_values("size_bytes")
    by["size"] = by["size_bytes"].map(human_size)
    import plotly.express as px  # perf: 0.5 s to import, for a sweep of sizes only
    # dashes and symbols: lines that coincide stay visible
    style = {"color": "line", "line_dash": "line", "symbol": "line", "markers": True, "log_x": True,
             "labels": LABELS, "hover_data": ["size", "seeds"]}
    figs = [px.line(by, x="size_bytes", y="busbw_Gbps", title="Bus bandwidth vs message size (mean over seeds)",
                    **style),
            px.line(by, x="size_bytes", y="time_s", log_y=True, title="Collective time vs message size "
                    "(mean over seeds)", **style)]
    if by["slowdown"].notna().any():
        figs.append(px.line(by, x="size_bytes", y="slowdown",
                            title="Slowdown vs ideal (the call alone, non-blocking core) by size", **style))
    sizes = sorted(by["size_bytes"].unique())
    for fig in figs:
        fig.update_xaxes(title="message size", tickvals=sizes, ticktext=[human_size(v) for v in sizes])
    return figs


def _fct_figure(flows: pd.DataFrame, label: dict[str, str], points: int = 1000) -> go.Figure:
    """Message completion-time CDF, one curve per variant (its seeds pooled), drawn through ``points``
    evenly spaced quantiles of the exact empirical CDF (every message counts; the page stays small).

    perf: plotly express's ecdf of a sample of 20,000 messages per variant took 0.36 s per report; the
    variants are found by factorizing the run ids, not by mapping every message's (18.9 M: 8 s). A sort
    beats ``np.partition`` around the 1,000 quantiles (0.3 against 1.5 s for 18.9 M).
    """
    fct = flows["end_s"].to_numpy() - flows["start_s"].to_numpy()
    run_of, run_ids = pd.factorize(flows["run_id"], use_na_sentinel=True)
    names = list(dict.fromkeys(label[r] for r in run_ids if r in label))  # variants in order of first message
    group_of = np.array([names.index(label[r]) if r in label else -1 for r in run_ids] + [-1])[run_of]
    fig = go.Figure()
    for i, name in enumerate(names):
        x = fct[group_of == i]
        n = len(x)
        k = np.unique(np.linspace(0, n - 1, min(n, points)).round().astype(np.int64))
        fig.add_trace(go.Scatter(x=np.sort(x)[k], y=(k + 1) / n, mode="lines", line_shape="hv", name=name))
    fig.update_layout(title="Message completion time CDF (seeds of a variant pooled)", xaxis_type="log",
                      xaxis_title=LABELS["fct_s"], yaxis_title="fraction of messages")
    return fig


def _heatmaps(series: pd.DataFrame, runs: pd.DataFrame, label: dict[str, str], top: int = 20,
              max_runs: int = 3) -> list[go.Figure]:
    """Utilisation over time of the most loaded links, for the first seed of up to ``max_runs`` variants."""
    figs = []
    chosen = runs.assign(_v=runs["run_id"].map(label)).drop_duplicates("_v")
    for _, run in chosen.head(max_runs).iterrows():
        s = series[series["run_id"] == run["run_id"]]
        if s.empty:
            continue
        peak = s.groupby("link_id")["util"].max().sort_values(ascending=False).head(top)
        s = s[s["link_id"].isin(peak.index)]
        s = s.assign(link=s["src"] + "→" + s["dst"], t_ms=s["t_start_s"] * 1e3)
        grid = s.pivot_table(index="link", columns="t_ms", values="util", aggfunc="mean")
        grid = grid.reindex(list(s.drop_duplicates("link_id").set_index("link_id").loc[peak.index, "link"]))
        fig = go.Figure(go.Heatmap(z=grid.to_numpy(), x=list(grid.columns), y=list(grid.index), zmin=0, zmax=1,
                                   colorscale="Viridis", colorbar={"title": "util"}))
        seed = f", seed {run['seed']}" if "seed" in run and len(runs) > 1 else ""
        fig.update_layout(title=f"Utilisation over time of the {len(grid)} most loaded links ({run['_v']}{seed})",
                          xaxis_title="time (ms)", height=240 + 18 * len(grid))
        figs.append(fig)
    return figs


def _link_figures(links: pd.DataFrame, label: dict[str, str], sweep: bool) -> list[go.Figure]:
    """Utilisation of the used links by tier (per variant), and for one run its most loaded links."""
    used = links[links["bytes"] > 0]
    if not len(used):
        return []
    used = used.assign(group=used["run_id"].map(label))
    figs = [box(used, "tier", "mean_util", "group", LABELS,
                "Mean utilisation of used links, by tier (seeds of a variant pooled)")]
    if not sweep:
        top = used.sort_values("peak_util", ascending=False).head(25)
        top = top.assign(link=top["src"] + "→" + top["dst"]).rename(
            columns={"peak_util": "peak utilisation", "mean_util": "mean utilisation"})
        figs.append(grouped_bars(top, "link", ["peak utilisation", "mean utilisation"],
                                 {**LABELS, "value": "utilisation", "variable": ""},
                                 "Most loaded links: peak and mean utilisation"))
    return figs


def build_figures(results_dir: str | Path,
                  topologies: Mapping[str, Topology] | None = None) -> list[go.Figure]:
    """The dashboard's figures for one results directory, in page order; they adapt to what it holds
    (one run or a sweep, collectives, training or a trace-driven cluster, sizes swept, faults, link
    series, the fabric). ``topologies``: fabrics already built, by run id, that the fabric view need not
    rebuild from the spec (see :func:`~netsim.report.fabric_view.fabric_figure`)."""
    from netsim.report.fabric_view import fabric_figure
    results_dir = Path(results_dir)
    t = read_results(results_dir, tuple(n.removesuffix(".parquet") for n in RESULT_FILES
                                        if n != "flows.parquet"))
    t["flows"] = read_table(results_dir / "flows.parquet", FLOW_COLUMNS_SHOWN,
                            categories=["run_id", "connection"])
    manifest = json.loads((results_dir / "manifest.json").read_text())
    runs, colls, flows, links = t["runs"], t["collectives"], t["flows"], t["links"]
    ok_runs = runs[runs["status"] == "ok"] if "status" in runs.columns else runs
    sweep = len(runs) > 1  # a sweep directory holding one run reads like a single run
    keys = group_keys(runs, manifest) if sweep else []
    label = run_labels(ok_runs, keys)
    jobs, iterations = t.get("jobs"), t.get("iterations")
    training = is_training(jobs)
    cluster = has_cluster(t)  # a trace-driven cluster: no collective calls of its own
    drop = COLLECTIVE_METRICS if training or cluster else ()
    comps = opening(runs, colls, keys, training, cluster)
    answered = {v for c in comps for v in c.variants}
    if sweep:
        summary_fig, table, keys = _sweep_summary(results_dir, drop)
        # the opening panels compare every variant already; the per-metric bars would repeat them
        figs = [summary_fig, *([] if answered >= set(ok_runs["variant"]) else _sweep_bars(table, keys, drop))]
    elif not cluster:
        figs = [_training_summary(ok_runs, label) if training else _summary(ok_runs, colls, label)]
    else:
        figs = []  # a cluster run: its summary is the cluster one
    panels = cluster_figures(t, ok_runs, label, results_dir, sweep) if cluster else []
    if panels:  # its summary table first (next to the sweep's), its charts after the sweep's bars
        figs.insert(1 if sweep else 0, panels[0])
        figs += panels[1:]
    if has_detection(t):  # a detection evaluation: its accuracy right after the summary (the healthy run's)
        figs[1:1] = detection_figures(t, label)
    if jobs is not None and len(jobs) and (jobs.groupby("run_id").size().max() > 1 or training
                                           or (jobs["kind"] == "training").any()):
        figs.append(jobs_table(jobs[jobs["run_id"].isin(label)], label))
        figs += training_figures(jobs[jobs["run_id"].isin(label)],
                                 iterations if iterations is not None else pd.DataFrame(), label)
        busy = jobs.loc[jobs["kind"] == "training", ["run_id", "job"]]
        # a training job's TP/DP calls are summarised by its breakdown, not plotted one by one
        colls = colls[~colls.set_index(["run_id", "job"]).index.isin(pd.MultiIndex.from_frame(busy))]
    costs = t.get("fault_costs")
    costs_fig = fault_costs_table(costs, label) if costs is not None and len(costs) else None
    if costs_fig is not None:
        figs.append(costs_fig)
    timeline = fault_timeline(ok_runs, t["collectives"], label)
    if timeline is not None:
        figs.append(timeline)
    if len(colls):
        if colls.groupby(["op", "algorithm"])["size_bytes"].nunique().max() > 1:
            figs += _size_figures(colls, ok_runs, keys)
        elif not sweep:
            figs += _collective_figures(colls)
    if len(flows):
        figs.append(_fct_figure(flows, label))
    series = t.get("link_series")
    if series is not None and len(series):
        figs += _heatmaps(series, ok_runs, label)
    figs += _link_figures(links, label, sweep)
    if len(ok_runs) and not comps:
        drawing = fabric_figure(results_dir, ok_runs, links, manifest, label, topologies)
        if drawing is not None:
            figs.append(drawing)
    if len(ok_runs):  # views that aggregate (readable at any size): load per tier, traffic between pods
        figs += [f for f in (tier_table(links[links["run_id"].isin(label)], label, results_dir,
                                        manifest.get("spec")),
                             pod_traffic_figure(results_dir, ok_runs, flows, label)) if f is not None]
    figs = [*_opening(results_dir, comps, links, flows), *figs]
    return [f for f in figs if not _single_value(f)]


def _opening(results_dir: Path, comps: list[Comparison], links: pd.DataFrame, flows: pd.DataFrame) -> list[go.Figure]:
    """The answer of every group of comparable variants (time against the bound, with its sentence), then
    the why: per-uplink load and the collided cables where routing differs, placements drawn where
    placement differs."""
    figs = [answer_figure(c, links) for c in comps]
    for comp in comps:
        if "routing" in comp.differs:
            figs += [f for f in (uplink_figure(comp, links), collision_figure(results_dir, comp, links)) if f]
        if "placement" in comp.differs:
            figs += [f for v in comp.variants
                     if (f := placement_figure(results_dir, v, comp.runs[v][0], flows)) is not None]
    return figs


def _single_value(fig: go.Figure) -> bool:
    """A chart that draws one value (one bar, with at most reference markers beside it, or one point):
    the number is in the summary table instead. A breakdown (stacked parts of one bar) and a timeline
    (bars with a ``base``) draw several values."""
    def points(t) -> int:
        values = t.y if t.type == "bar" and t.orientation == "h" else t.x if t.x is not None else t.y
        return 0 if values is None else len(values)
    kinds = {t.type for t in fig.data}
    if not kinds or not kinds <= {"bar", "scatter"}:
        return False
    bars = [t for t in fig.data if t.type == "bar"]
    if any(t.base is not None for t in bars):
        return False
    return sum(points(t) for t in (bars or fig.data)) <= 1


def render_report(results_dir: str | Path, plotly_src: str | None = None,
                  topologies: Mapping[str, Topology] | None = None) -> str:
    """The dashboard of ``results_dir`` as one HTML page: plotly.js loaded from ``plotly_src`` (a URL
    relative to the page, e.g. ``plotly.min.js``) or, when None, inlined (the page stands alone);
    ``topologies`` as in :func:`build_figures`."""
    results_dir = Path(results_dir)
    figs = build_figures(results_dir, topologies)
    manifest = json.loads((results_dir / "manifest.json").read_text())
    status = manifest.get("status", "complete")
    failed = (manifest.get("counts") or {}).get("failed", 0)
    if status == "complete":
        banner = ""
    elif status == "failed":
        banner = (f"<p class='warning'><b>Incomplete results: {html.escape(str(failed))} run(s) failed</b> (status: "
                  "failed; runs.parquet holds each one's error): only the runs that succeeded are shown; "
                  "<code>netsim sweep --resume</code> runs the failed ones again.</p>")
    else:
        banner = (f"<p class='warning'><b>Incomplete results</b> (status: {html.escape(str(status))}): only the runs "
                  "that finished are shown; <code>netsim sweep --resume</code> continues the sweep.</p>")
    below = _below_bound(results_dir)
    if below:
        banner += (f"<p class='warning' id='below-bound'><b>{below} collective call(s) finished faster than their "
                   "provable lower bound</b> (column <code>below_bound</code> of collectives.parquet): these "
                   "numbers break a physical bound and should not be trusted. A raised "
                   "<code>engine.completion_tolerance</code> lets flows finish that much early per step: lower it "
                   "(0 is exact); with the default tolerance, please report it with the experiment file.</p>")
    return page_html(manifest["name"], figs, banner, manifest_html(manifest), plotly_src)


def _below_bound(results_dir: Path) -> int:
    """Collective calls flagged as faster than their lower bound."""
    path = results_dir / "collectives.parquet"
    if not path.is_file():
        return 0
    colls = read_table(path)
    return int(colls["below_bound"].sum()) if "below_bound" in colls.columns else 0


def write_report(results_dir: str | Path, out: str | Path | None = None, *, force: bool = True,
                 self_contained: bool = False, topologies: Mapping[str, Topology] | None = None) -> Path:
    """Write the dashboard of ``results_dir`` (atomically) and return its path.

    Parameters
    ----------
    results_dir:
        A directory written by :func:`netsim.experiment.write_results` (or its staging directory).
    out:
        Target file (default ``results_dir/report.html``).
    force:
        Replace an existing ``out`` (netsim's own ``report.html`` in a results directory is always replaced).
    self_contained:
        Inline plotly.js (about 4.5 MB) so the page stands alone. Otherwise a report inside
        ``results_dir`` loads the one shared ``plotly.min.js`` of the folder (written and recorded in
        the manifest when needed, see :mod:`netsim.report.page`); a report anywhere else is always
        self-contained, as netsim writes nothing but the report outside its results directories.
    topologies:
        Fabrics already built, by run id (the process that ran them has them): the fabric view uses
        them instead of rebuilding them from the spec. The page is the same without them.
    """
    results_dir = Path(results_dir)
    out = Path(out) if out else results_dir / "report.html"
    inside = out.parent.resolve() == results_dir.resolve()
    src = shared_plotly(results_dir) if inside and not self_contained else None
    return write_file_atomically(out, render_report(results_dir, src, topologies), force=force)


def n_figures(results_dir: str | Path) -> int:
    """How many figures the dashboard of ``results_dir`` holds (for browser checks)."""
    return len(build_figures(results_dir))


__all__ = ["build_figures", "n_figures", "render_report", "write_report"]

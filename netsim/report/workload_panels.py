"""Panels that fit the workload: training (iteration time, exposed communication, per-job slowdown) and
faults (a timeline of the calls around each fault). Runs are named by their variant, never by run id;
rows of one variant (its seeds) are averaged, rows of different variants never are.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import plotly.graph_objects as go

from netsim.experiment.summary import interval
from netsim.report.display import format_value, human_time

BREAKDOWN = {"compute_s": "compute", "tp_s": "exposed TP", "pp_s": "exposed PP", "dp_s": "exposed DP",
             "ep_s": "exposed EP", "bubble_s": "bubble"}


def _wrap(header: str) -> str:
    """A long dotted YAML path (``topology.uplink.count``) broken after its dots, to fit a column."""
    return header.replace(".", ".<br>") if len(header) > 14 else header


def table_figure(df: pd.DataFrame, title: str) -> go.Figure:
    """A plotly table of ``df`` (its column names are the headers: give them human titles)."""
    cells = [df[c].map(lambda v: "-" if v is None or (isinstance(v, float) and math.isnan(v)) or v == "" else str(v)) for c in df.columns]
    fig = go.Figure(go.Table(header={"values": [f"<b>{_wrap(c)}</b>" for c in df.columns]}, cells={"values": cells}))
    fig.update_layout(title=title, height=160 + 28 * min(len(df), 40), margin={"t": 50, "b": 10, "l": 10, "r": 10})
    return fig


def jobs_table(jobs: pd.DataFrame, label: dict[str, str]) -> go.Figure:
    """One row per job of every run, named by the run's variant."""
    training = jobs["kind"] == "training"
    out = pd.DataFrame({
        "variant": jobs["run_id"].map(label), "seed": jobs.get("seed", "-"),
        "job": jobs["name"], "kind": jobs["kind"], "placement": jobs["placement"], "ranks": jobs["n_ranks"],
        "tp/pp/dp": (jobs["tp"].astype(str) + "/" + jobs["pp"].astype(str) + "/" + jobs["dp"].astype(str)
                     ).where(training, "-"),
        "NIC partition": jobs["partition"], "start": jobs["start_s"].map(human_time), "end": jobs["end_s"].map(human_time),
        "iterations": jobs["iterations"], "iteration time": jobs["iteration_time_s"].map(human_time),
        "TFLOPS per GPU": jobs["tflops_per_gpu"].round(1),
        "TCP comms tp/pp/dp": (jobs["tcp_tp"].astype(str) + "/" + jobs["tcp_pp"].astype(str) + "/"
                               + jobs["tcp_dp"].astype(str)).where(training, "-"),
        "comm slowdown vs ideal": jobs["slowdown"].round(3)})
    return table_figure(out, "Jobs")


def _seed_mean(frame: pd.DataFrame, by: list[str], column: str) -> pd.DataFrame:
    """Per ``by`` group: mean, 95% half-width and count of ``column`` (over seeds: ``by`` names the variant)."""
    rows = []
    for key, g in frame.groupby(by, sort=False):
        mean, half, n = interval(g[column].to_numpy(dtype=float))
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "mean": mean,
                     "ci": 0.0 if math.isnan(half) else half, "n": n})
    return pd.DataFrame(rows)


def training_figures(jobs: pd.DataFrame, iterations: pd.DataFrame, label: dict[str, str]) -> list[go.Figure]:
    """Iteration time by part (exposed communication), iteration time per iteration, per-job slowdown."""
    figs = []
    train = jobs[jobs["kind"] == "training"].assign(variant=lambda j: j["run_id"].map(label))
    if len(iterations):
        import plotly.express as px  # perf: 0.5 s to import, for training runs only
        it = iterations.assign(variant=iterations["run_id"].map(label))
        per_run = it.groupby(["variant", "run_id", "name"], as_index=False, sort=False)[list(BREAKDOWN)].mean()
        mean = per_run.groupby(["variant", "name"], as_index=False, sort=False)[list(BREAKDOWN)].mean()
        seeds = per_run.groupby(["variant", "name"], sort=False)["run_id"].nunique().to_numpy()
        long = mean.melt(id_vars=["variant", "name"], value_vars=list(BREAKDOWN), var_name="part", value_name="s")
        long["part"] = long["part"].map(BREAKDOWN)
        long["ms"] = long["s"] * 1e3
        several = long["variant"].nunique() > 1
        long["job"] = (long["variant"] + " | " + long["name"]) if several else long["name"]
        long["seeds"] = list(seeds) * len(BREAKDOWN)
        figs.append(px.bar(long, x="job", y="ms", color="part", barmode="stack", hover_data=["seeds"],
                           labels={"ms": "ms", "job": "variant | job" if several else "job", "part": ""},
                           title="Training iteration time by part: compute and exposed communication "
                                 "(ms, mean over iterations, stages and seeds)"))
        line = it.assign(ms=it["duration_s"] * 1e3).groupby(["variant", "name", "iteration"], as_index=False,
                                                            sort=False)["ms"].mean()
        if line.groupby(["variant", "name"]).size().max() >= 2:
            line["series"] = (line["variant"] + " | " + line["name"]) if several else line["name"]
            fig = px.line(line, x="iteration", y="ms", color="series", markers=True,
                          labels={"series": "", "ms": "ms"}, title="Iteration time per job (ms, mean over seeds)")
            fig.update_xaxes(dtick=1)
            fig.update_yaxes(rangemode="tozero")
            figs.append(fig)
    slow = train[train["slowdown"].notna()]
    if len(slow):
        s = _seed_mean(slow, ["variant", "name"], "slowdown")
        fig = go.Figure()
        for variant, rows in s.groupby("variant", sort=False):
            fig.add_trace(go.Bar(x=list(rows["name"]), y=list(rows["mean"]), name=str(variant),
                                 error_y={"type": "data", "array": list(rows["ci"]), "visible": True},
                                 customdata=list(rows["n"]),
                                 hovertemplate="%{x}: slowdown %{y:.3f} (mean over %{customdata} seeds)"
                                               "<extra>%{fullData.name}</extra>"))
        fig.add_hline(y=1.0, line_dash="dot")
        fig.update_layout(title="Per-job slowdown: mean over the job's communication calls of time / ideal "
                                "(the call alone, non-blocking core)",
                          barmode="group", xaxis_title="job", yaxis_title="slowdown")
        figs.append(fig)
    return figs


def fault_costs_table(costs: pd.DataFrame, label: dict[str, str]) -> go.Figure | None:
    """Per run, training job and fault entry, the iteration time it cost (``fault_costs.parquet``)."""
    costs = costs[costs["run_id"].isin(label)]
    if not len(costs):
        return None
    out = pd.DataFrame({
        "variant": costs["run_id"].map(label), "job": costs["name"], "fault": costs["fault"],
        "target": costs["target"], "action": costs["action"], "detail": costs["detail"],
        "iteration time": costs["iteration_time_s"].map(human_time),
        "without it": costs["without_s"].map(human_time),
        "cost per iteration": costs["cost_per_iteration_s"].map(human_time),
        "cost (total)": costs["cost_s"].map(human_time), "note": costs["note"]})
    return table_figure(out, "Fault costs: iteration time with every fault minus without this entry "
                             "(all: minus without any fault), from counterfactual runs")


def _faults(runs: pd.DataFrame) -> dict[str, list[dict]]:
    """run_id -> its faults (from the ``faults`` column of runs.parquet)."""
    out = {}
    for run_id, text in zip(runs["run_id"], runs["faults"]):
        try:
            faults = json.loads(text) if isinstance(text, str) else list(text)
        except (TypeError, ValueError):
            faults = []
        if faults:
            out[run_id] = faults
    return out


def fault_timeline(runs: pd.DataFrame, colls: pd.DataFrame, label: dict[str, str]) -> go.Figure | None:
    """Each variant's collective calls as bars over time and its faults as markers (the first seed of each
    variant); None when no run has a fault."""
    if "faults" not in runs.columns:
        return None
    faults = _faults(runs)
    if not faults:
        return None
    first = runs.assign(variant=runs["run_id"].map(label)).drop_duplicates("variant")
    fig = go.Figure()
    c = colls[colls["run_id"].isin(first["run_id"])].assign(variant=lambda d: d["run_id"].map(label))
    fig.add_trace(go.Bar(y=list(c["variant"]), x=list(c["duration_s"] * 1e3), base=list(c["start_s"] * 1e3),
                         orientation="h", name="collective call", marker={"color": "#1f77b4"}, opacity=0.7,
                         customdata=list(zip(c["op"] + "/" + c["algorithm"], c["duration_s"].map(human_time))),
                         hovertemplate="%{y}: %{customdata[0]} took %{customdata[1]}<extra></extra>"))
    xs, ys, text = [], [], []
    for _, run in first.iterrows():
        for f in faults.get(run["run_id"], []):
            what = next((str(f[k]) for k in ("link", "nic", "switch", "gpu") if f.get(k) is not None), "?")
            xs.append(float(f.get("at") or 0.0) * 1e3)
            ys.append(run["variant"])
            text.append(f"{what} {f.get('action', '')} at {format_value('at', float(f.get('at') or 0.0))}")
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name="fault", text=text, hoverinfo="text",
                             marker={"symbol": "x", "size": 14, "color": "#d62728"}))
    fig.update_layout(title="Timeline: collective calls and faults (first seed of each variant)",
                      xaxis_title="time (ms)", yaxis={"type": "category", "title": ""}, barmode="overlay",
                      height=220 + 40 * len(first))
    return fig

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


def _summary(runs: pd.DataFrame) -> go.Figure:
    cols = {"run_id": "run", "routing.type": "routing", "placement.type": "placement", "n_ranks": "ranks"}
    table = runs[list(cols)].rename(columns=cols)
    table["collective"] = runs["workload.op"] + "/" + runs["workload.algorithm"]
    table["size (MiB)"] = (runs["workload.size"] / 2**20).round(3)
    table["time (ms)"] = (runs["collective_time_s"] * 1e3).round(4)
    table["busbw (Gbps)"] = (runs["busbw_Bps"] / GBPS).round(2)
    table["max link util"] = runs["max_link_util"].round(3)
    table["flows"] = runs["flows"]
    fig = go.Figure(go.Table(header={"values": list(table.columns)},
                             cells={"values": [table[c] for c in table.columns]}))
    fig.update_layout(title="Runs", height=160 + 28 * len(table), margin={"t": 50, "b": 10, "l": 10, "r": 10})
    return fig


def build_figures(results_dir: str | Path) -> list[go.Figure]:
    """The dashboard's figures for one results directory, in page order."""
    t = read_results(results_dir)
    runs, colls, flows, links = t["runs"], t["collectives"], t["flows"], t["links"]
    figs = [_summary(runs)]
    if len(colls):
        c = colls.assign(call="job " + colls["job"].astype(str) + ", call " + colls["iteration"].astype(str),
                         busbw_Gbps=colls["busbw_Bps"] / GBPS)
        fig = px.bar(c, x="call", y="busbw_Gbps", color="run_id", barmode="group",
                     hover_data=["duration_s", "size_bytes", "n_ranks"],
                     title="Collective bus bandwidth per call (Gbps)")
        fig.update_xaxes(type="category")
        figs.append(fig)
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

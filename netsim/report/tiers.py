"""Views that stay readable at any scale: load per tier, and traffic between pods (three-tier Clos).

A fabric of 100k GPUs has a million links; these panels aggregate them. ``tier_table`` gives, per
variant and tier (nic, leaf-spine, spine-core, ...), the links, how many carried traffic, the bytes
and the mean and peak utilisation. ``pod_traffic_figure`` gives the bytes each pod sent to each pod,
from the flow records and the pod of every GPU (the fabric rebuilt from the run's spec).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from netsim.report.display import human_size
from netsim.report.fabric_view import run_spec, run_topology
from netsim.report.workload_panels import table_figure
from netsim.topology import SWITCH_KINDS


def tier_table(links: pd.DataFrame, label: dict[str, str], results_dir: Path | None = None,
               default: dict | None = None) -> go.Figure | None:
    """Per variant (first run) and tier: links, links used, bytes, mean and peak utilisation; on a
    fabric of several planes (or rails of a rail-only fabric), per tier and plane (rail)."""
    if links.empty or links["tier"].nunique() < 2:
        return None
    first = {}
    for run_id, name in label.items():
        first.setdefault(name, run_id)
    rows = []
    for name, run_id in first.items():
        mine = links[links["run_id"] == run_id]
        split, by = _planes(results_dir, run_id, mine, default)
        for keys, g in mine.groupby(["tier", split] if split is not None else ["tier"], sort=False):
            used = g[g["bytes"] > 0]
            rows.append({"variant": name, "tier": keys[0], **({by: keys[1]} if split is not None else {}),
                         "links": len(g), "used": len(used), "bytes": human_size(float(g["bytes"].sum()), 4),
                         "mean utilisation (used links)": round(float(used["mean_util"].mean()), 3) if len(used) else 0.0,
                         "peak utilisation": round(float(g["peak_util"].max()), 3)})
    frame = pd.DataFrame(rows)
    if "plane" in frame or "rail" in frame:
        col = "plane" if "plane" in frame else "rail"
        frame[col] = frame[col].map(lambda v: "" if pd.isna(v) or v < 0 else str(int(v)))
        frame = frame[["variant", "tier", col, *(c for c in frame.columns if c not in ("variant", "tier", col))]]
    return table_figure(frame, "Load per tier" + (" and plane" if "plane" in frame else " and rail" if "rail" in frame
                                                 else "") + " (first run of each variant)")


def _planes(results_dir: Path | None, run_id: str, links: pd.DataFrame,
            default: dict | None) -> tuple[pd.Series | None, str]:
    """Per link of ``links``, the plane (or rail) of the switch it touches (-1: none), when the run's
    fabric (from its spec, else ``default``) has several planes or rails; else (None, "").

    perf: the spec decides first; only a fabric with planes or rails is rebuilt (a 24K-GPU one takes
    seconds)."""
    spec = None if results_dir is None else run_spec(results_dir, run_id, default)
    t = None if spec is None else spec.topology
    attr = "rail" if t is not None and t.type == "rail_only" else \
        "plane" if getattr(t, "planes", 1) > 1 else None
    topo = None if attr is None else run_topology(results_dir, run_id, default)
    if topo is None:
        return None, ""
    nodes = topo.graph.nodes
    switch = np.full(topo.graph.number_of_nodes(), -1, dtype=np.int64)
    for n, value in nodes(data=attr):
        if value is not None and nodes[n]["kind"] in SWITCH_KINDS:
            switch[n] = value
    ids = links["link_id"].to_numpy(dtype=np.int64)
    plane = np.maximum(switch[topo.links.src[ids]], switch[topo.links.dst[ids]])
    return pd.Series(plane, index=links.index, name=attr), attr


def pod_traffic_figure(results_dir: Path, runs: pd.DataFrame, flows: pd.DataFrame,
                       label: dict[str, str]) -> go.Figure | None:
    """Bytes sent from each pod to each pod by the first run (a fabric with pods and flow records only)."""
    if flows.empty or runs.empty:
        return None
    run_id = runs["run_id"].iloc[0]
    topo = run_topology(results_dir, run_id)
    if topo is None:
        return None
    nodes = topo.graph.nodes
    leaf_of = np.array([topo.nic_ports[int(n)][0][1] for n in topo.gpu_nic])
    pods = np.array([nodes[int(s)].get("pod", -1) for s in leaf_of])
    if (pods < 0).any() or len(set(pods.tolist())) < 2:
        return None
    mine = flows[flows["run_id"] == run_id]
    n = int(pods.max()) + 1
    grid = np.zeros((n, n))
    np.add.at(grid, (pods[mine["src"].to_numpy(dtype=np.int64)], pods[mine["dst"].to_numpy(dtype=np.int64)]),
              mine["size_bytes"].to_numpy(dtype=float))
    cross = grid.sum() - np.trace(grid)
    names = [f"pod {p}" for p in range(n)]
    fig = go.Figure(go.Heatmap(z=grid / 1e9, x=names, y=names, colorscale="Blues", colorbar={"title": "GB"},
                               hovertemplate="%{y} -> %{x}: %{z:.4g} GB<extra></extra>"))
    share = cross / grid.sum() if grid.sum() else 0.0
    fig.update_layout(title=f"Traffic between pods ({label.get(run_id, 'run')}): {human_size(cross, 4)} crossed the "
                            f"core, {share:.0%} of all bytes",
                      xaxis={"title": "to", "type": "category"},
                      yaxis={"title": "from", "type": "category", "autorange": "reversed"},
                      height=min(300 + 24 * n, 1000))
    return fig

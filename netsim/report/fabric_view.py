"""The fabric on the dashboard: every switch and host for a small fabric, a tier-by-tier heatmap for a large one.

A node-and-edge drawing stops being readable long before a browser chokes (a 16 x 16 leaf-spine is
already a hairball), so above :data:`DRAW_MAX_NODES` drawing nodes or
:data:`DRAW_MAX_CABLES` switch-to-switch cables the dashboard aggregates: the peak
utilisation of the cables between each lower-tier switch and each upper-tier switch (leaf x spine),
or between each pair of groups (dragonfly global links), as a heatmap whose rows and columns are
binned to at most :data:`MAX_CELLS` per axis.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from netsim.topology.topology import CORE_LINK_KINDS, LINK_KINDS, SWITCH_KINDS, Topology

#: Largest fabric drawn node by node (switches + hosts, and switch-to-switch cables: 16 leaves x 16
#: spines is already a hairball); larger ones are shown as a heatmap.
DRAW_MAX_NODES = 150
DRAW_MAX_CABLES = 100
#: Most rows or columns of the heatmap; more switches (or groups) are binned into contiguous blocks.
MAX_CELLS = 96


def _blocks(names: list[str], limit: int) -> tuple[list[str], np.ndarray]:
    """Labels of at most ``limit`` contiguous blocks of ``names`` and each name's block index."""
    if len(names) <= limit:
        return names, np.arange(len(names))
    edges = np.linspace(0, len(names), limit + 1).astype(int)
    index = np.searchsorted(edges, np.arange(len(names)), side="right") - 1
    labels = [f"{names[a]}..{names[b - 1]}" for a, b in itertools.pairwise(edges)]
    return labels, index


def _tier_cells(topo: Topology, utilisation: np.ndarray, up_kind: str, down_kind: str):
    """(z, column labels, row labels) of the peak utilisation of the cables of one tier (its up and down
    links together), lower-tier switches as rows, upper-tier ones as columns, binned into at most
    :data:`MAX_CELLS` contiguous blocks each; None when the tier has no cables."""
    links = topo.links
    up, down = links.kind == LINK_KINDS.index(up_kind), links.kind == LINK_KINDS.index(down_kind)
    mask = up | down
    if not mask.any():
        return None
    low = np.where(up, links.src, links.dst)[mask]
    high = np.where(up, links.dst, links.src)[mask]
    return _cells(np.array([topo.node_name(int(n)) for n in low]), np.array([topo.node_name(int(n)) for n in high]),
                  utilisation[mask])


def _cells(rows: np.ndarray, cols: np.ndarray, util: np.ndarray, label=str):
    frame = pd.DataFrame({"row": rows, "col": cols, "util": util})
    order = {v: i for i, v in enumerate(dict.fromkeys([*rows, *cols]))}  # the fabric's own order
    row_names = sorted(frame["row"].unique(), key=order.get)
    col_names = sorted(frame["col"].unique(), key=order.get)
    row_labels, row_of = _blocks([str(r) for r in row_names], MAX_CELLS)
    col_labels, col_of = _blocks([str(c) for c in col_names], MAX_CELLS)
    r = row_of[frame["row"].map({v: i for i, v in enumerate(row_names)}).to_numpy()]
    c = col_of[frame["col"].map({v: i for i, v in enumerate(col_names)}).to_numpy()]
    z = np.full((len(row_labels), len(col_labels)), np.nan)
    np.fmax.at(z, (r, c), frame["util"].to_numpy())
    return z, [label(v) for v in col_labels], [label(v) for v in row_labels]


def block_heatmap(topo: Topology, utilisation: np.ndarray) -> go.Figure | None:
    """Peak utilisation of the cables between tiers: leaf x spine (up and down cables together), and beside
    it spine x core on a three-tier Clos; or group x group over global cables when the switches are
    grouped. None when there are no such cables."""
    from plotly.subplots import make_subplots
    nodes = topo.graph.nodes
    links = topo.links
    grouped = all("group" in nodes[n] for n, k in nodes(data="kind") if k in SWITCH_KINDS)
    if grouped:
        mask = links.kind == LINK_KINDS.index("global")
        if not mask.any():
            return None
        rows = np.array([nodes[int(s)]["group"] for s in links.src[mask]])
        cols = np.array([nodes[int(d)]["group"] for d in links.dst[mask]])
        tiers = [("global cables between groups", "from group", "to group",
                  _cells(rows, cols, utilisation[mask], lambda v: f"group {v}"))]
    else:
        tiers = [(what, low, high, cells) for what, low, high, cells in (
            ("leaf-spine cables, both directions", "leaf", "spine", _tier_cells(topo, utilisation, "up", "down")),
            ("spine-core cables, both directions", "spine", "core",
             _tier_cells(topo, utilisation, "core_up", "core_down"))) if cells is not None]
        if not tiers:
            return None
    fig = make_subplots(rows=1, cols=len(tiers), subplot_titles=[t[0] for t in tiers], horizontal_spacing=0.12)
    for i, (_what, low, high, (z, x, y)) in enumerate(tiers, start=1):
        fig.add_trace(go.Heatmap(z=z, x=x, y=y, zmin=0, zmax=1, colorscale="Viridis", coloraxis="coloraxis",
                                 hovertemplate="%{y} → %{x}: peak %{z:.0%}<extra></extra>"), row=1, col=i)
        fig.update_xaxes(title_text=high if not grouped else "to group", type="category", row=1, col=i)
        fig.update_yaxes(title_text=low if not grouped else "from group", type="category", autorange="reversed",
                         row=1, col=i)
    what = " and ".join(t[0].split(",")[0] for t in tiers)
    fig.update_layout(title=f"{topo.name}: peak utilisation of the {what}; too large to draw node by node",
                      coloraxis={"colorscale": "Viridis", "cmin": 0, "cmax": 1, "colorbar": {"title": "peak util"}},
                      height=min(300 + 14 * max(len(t[3][2]) for t in tiers), 1100))
    return fig


def _switch_cables(topo: Topology) -> int:
    """Switch pairs joined by at least one cable (what a drawing has to show as lines)."""
    kinds = [LINK_KINDS.index(k) for k in CORE_LINK_KINDS]
    mask = np.isin(topo.links.kind, kinds)
    pairs = np.sort(np.stack([topo.links.src[mask], topo.links.dst[mask]], axis=1), axis=1)
    return len(np.unique(pairs, axis=0)) if len(pairs) else 0


def run_spec(results_dir: Path, run_id: str, default: dict | None = None):
    """The parsed spec of one run of a results directory (its ``run.json``, else ``default``); None when
    it cannot be read or no longer parses (results of another netsim version): views drawn from it
    are optional."""
    from netsim.config import parse_spec
    info = results_dir / "runs" / run_id / "run.json"
    try:
        spec = json.loads(info.read_text()).get("spec", default) if info.is_file() else default
        return parse_spec(spec) if spec else None
    except Exception:  # noqa: BLE001 - see above
        return None


def run_topology(results_dir: Path, run_id: str, default: dict | None = None) -> Topology | None:
    """The fabric of one run, rebuilt from its spec (:func:`run_spec`); None when it cannot be."""
    from netsim.experiment.run import build_topology
    spec = run_spec(results_dir, run_id, default)
    try:
        return None if spec is None else build_topology(spec)
    except Exception:  # noqa: BLE001 - a view is optional
        return None


def fabric_figure(results_dir: Path, runs: pd.DataFrame, links: pd.DataFrame, manifest: dict,
                  label: dict[str, str],
                  topologies: Mapping[str, Topology] | None = None) -> go.Figure | None:
    """The fabric of the first run, by peak utilisation: drawn node by node when small, else a
    :func:`block_heatmap`; None when the fabric cannot be rebuilt from the results.

    ``topologies``: fabrics already built, by run id (the run's own, when the report is written by the
    process that ran it), used instead of rebuilding them from the spec (perf: a 3,072-GPU three-tier
    Clos takes 4 s to build).
    """
    from netsim.report.topology_drawing import topology_figure
    run_id = runs["run_id"].iloc[0]
    topo = (topologies or {}).get(run_id)
    if topo is None:
        topo = run_topology(results_dir, run_id, manifest.get("spec"))
    if topo is None:
        return None
    mine = links[links["run_id"] == run_id]
    util = np.zeros(len(topo.links))
    util[mine["link_id"].to_numpy()] = mine["peak_util"].to_numpy()
    which = label.get(run_id, "run")
    n_switches = sum(1 for _n, k in topo.graph.nodes(data="kind") if k in SWITCH_KINDS)
    if topo.n_hosts + n_switches > DRAW_MAX_NODES or _switch_cables(topo) > DRAW_MAX_CABLES:
        fig = block_heatmap(topo, util)
        if fig is not None:
            fig.update_layout(title=f"{fig.layout.title.text} — {which}")
        return fig
    fig = topology_figure(topo, utilisation=util)
    fig.update_layout(title=f"{fig.layout.title.text} — cables by peak utilisation ({which})", height=600)
    return fig

"""The fabric behind the dashboard's opening answer: the slowest routing variant's cables marked where they
collided (offered more load than the same messages sprayed would have), and each placement variant's
ranks drawn on its hosts, with the connections that cross NIC families.

Both rebuild the fabric (and, for placements, the placement) from the run's spec: placement is a
function of the spec and its seed, so the drawing is what the run used, not a guess.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from netsim.report.answer import Comparison, overloaded
from netsim.report.fabric_view import DRAW_MAX_CABLES, DRAW_MAX_NODES, _switch_cables, run_spec, run_topology

#: Colours of the communicators drawn on hosts (plotly's default cycle).
_SHORT = {"infiniband": "IB", "roce": "RoCE", "ethernet": "Eth"}
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def _drawable(topo) -> bool:
    from netsim.topology.topology import SWITCH_KINDS
    n_switches = sum(1 for _n, k in topo.graph.nodes(data="kind") if k in SWITCH_KINDS)
    return topo.n_hosts + n_switches <= DRAW_MAX_NODES and _switch_cables(topo) <= DRAW_MAX_CABLES


def collision_figure(results_dir: Path, comp: Comparison, links: pd.DataFrame) -> go.Figure | None:
    """The slowest routing variant's fabric: cables by peak offered load, and in red those offered more
    at once than the fastest variant's busiest (the links the answer's sentence counts)."""
    from netsim.report.topology_drawing import topology_figure
    hot = overloaded(comp, links)
    slow, fast = comp.ranked()[-1], comp.ranked()[0]
    topo = None if hot is None else run_topology(results_dir, comp.runs[slow][0])
    if topo is None or not _drawable(topo):
        return None
    core, above, worst_f = hot
    mine = links[links["run_id"] == comp.runs[slow][0]]
    offered = np.zeros(len(topo.links))
    offered[mine["link_id"].to_numpy()] = mine["peak_offered"].fillna(0).to_numpy()
    marked = np.zeros(len(topo.links), dtype=bool)
    marked[core["link_id"].to_numpy()[above]] = True
    fig = topology_figure(topo, utilisation=offered, scale="offered", marked=marked,
                          marked_name=f"more than {fast}'s busiest ({worst_f:.3g}×)")
    fig.update_layout(title=f"Why: {slow}'s fabric, cables by peak offered load; in red the {int(above.sum())} "
                            f"links offered more at once than {fast}'s busiest", height=620)
    return fig


def _groups(spec, n_ranks: int) -> list[tuple[str, list[int]]]:
    """(label, rank indices) of each step's communicator; one group of all ranks when there are no steps."""
    from netsim.workload.collective import select_ranks
    steps = getattr(spec.workload, "steps", None) or []
    out = []
    for i, step in enumerate(steps):
        ranks = select_ranks(getattr(step, "ranks", None), list(range(n_ranks)), f"workload.steps.{i}.ranks")
        label = getattr(step, "label", None) or f"step {i}"
        if all(set(ranks) != set(r) for _l, r in out):
            out.append((label, ranks))
    return out or [("all ranks", list(range(n_ranks)))]


def placement_figure(results_dir: Path, variant: str, run_id: str, flows: pd.DataFrame) -> go.Figure | None:
    """``variant``'s placement drawn on its fabric: each host marked by the communicator its ranks belong
    to, and the connections between hosts of different NIC families as red lines."""
    from netsim.experiment.run import prepare
    from netsim.report.topology_drawing import host_positions, topology_figure
    spec = run_spec(results_dir, run_id)
    if spec is None:
        return None
    try:
        topo, gpus = prepare(spec)
    except Exception:  # noqa: BLE001 - as above
        return None
    if not _drawable(topo):
        return None
    fig = topology_figure(topo)
    xy = host_positions(topo)
    host_of = topo.gpu_host
    family = [topo.nic_profile[int(topo.gpu_nic[g])].family for g in range(topo.n_gpus)]
    for k, (label, ranks) in enumerate(_groups(spec, len(gpus))):
        hosts = sorted({int(host_of[gpus[r]]) for r in ranks})
        text = [f"host {h}: {label}, ranks "
                + _ranges([r for r in ranks if host_of[gpus[r]] == h])
                + f", {_host_family(topo, h, family)} NICs"
                for h in hosts]
        fig.add_trace(go.Scatter(x=xy[hosts, 0], y=xy[hosts, 1], mode="markers+text", name=label,
                                 hovertext=text, hoverinfo="text", textposition="top center",
                                 text=[_SHORT.get(f := _host_family(topo, h, family), f) for h in hosts],
                                 marker={"size": 16, "color": _COLOURS[k % len(_COLOURS)],
                                         "symbol": "square", "opacity": 0.8}))
    mine = flows[flows["run_id"] == run_id] if "run_id" in flows else flows.iloc[:0]
    src, dst = mine["src"].to_numpy(dtype=np.int64), mine["dst"].to_numpy(dtype=np.int64)
    cross = np.array([family[a] != family[b] for a, b in zip(src, dst)], dtype=bool)
    pairs = sorted({(int(host_of[a]), int(host_of[b])) for a, b in zip(src[cross], dst[cross])})
    connections = mine.loc[cross, "connection"].nunique() if len(mine) else 0
    total = mine["connection"].nunique() if len(mine) else 0
    if pairs:
        xs, ys = [], []
        t = np.linspace(0, np.pi, 24)
        for a, b in pairs:  # an arc below the hosts, deeper the further apart they are
            (xa, ya), (xb, _yb) = xy[a], xy[b]
            xs += [*((xa + xb) / 2 - (xb - xa) / 2 * np.cos(t)), None]
            ys += [*(ya - 0.1 - 0.25 * abs(xb - xa) * np.sin(t)), None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="connections across NIC families",
                                 hoverinfo="skip", line={"color": "#d62728", "width": 2}))
    fig.update_layout(title=f"{variant}: placement on the fabric (hosts by communicator); {connections} of "
                            f"{total} connections cross NIC families", height=560)
    return fig


def _host_family(topo, h: int, family: list[str]) -> str:
    _model, first, _base, _nics = topo.hosts[h]
    return family[first]


def _ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5``."""
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(f"{start}" if start == r else f"{start}-{r}")
            start = None
    return ", ".join(out)

"""Draw a fabric as a self-contained HTML page for ``netsim topo --draw``: switches, hosts, links by kind."""

from __future__ import annotations

import html
import math
from pathlib import Path

import networkx as nx
import numpy as np
import plotly.graph_objects as go

from netsim.errors import NetsimError
from netsim.experiment.outdir import write_file_atomically
from netsim.topology.topology import LINK_KINDS, SWITCH_KINDS, Topology

#: Largest drawing (switches + hosts) :func:`topology_figure` accepts; beyond it a browser chokes
#: and nothing can be read anyway.
MAX_NODES = 2000

#: Legend entry and colour of each cable class (both directions of a cable are one line).
_CABLES = (
    ("NIC (host - switch)", "#9e9e9e", ("nic_up", "nic_down")),
    ("tier to tier (up/down)", "#1f77b4", ("up", "down")),
    ("spine to core", "#9467bd", ("core_up", "core_down")),
    ("local (inside a group)", "#2ca02c", ("local",)),
    ("global (between groups)", "#d62728", ("global",)),
)
_MARKERS = {"host": ("host", "#7f7f7f", "square"), "leaf": ("leaf", "#1f77b4", "diamond"),
            "spine": ("spine", "#ff7f0e", "diamond"), "switch": ("switch", "#2ca02c", "circle"),
            "core": ("core", "#9467bd", "diamond")}


def topology_figure(topo: Topology, utilisation: np.ndarray | None = None, scale: str = "utilisation",
                    marked: np.ndarray | None = None, marked_name: str = "marked") -> go.Figure:
    """A plotly drawing of ``topo``: one node per fabric switch and per host (its GPUs, NICs and
    internal switches collapsed), one line per connected pair, coloured by cable class, or by
    ``utilisation`` per link when given (``scale``: ``"utilisation"``, a fraction of capacity, or
    ``"offered"``, peak offered load in multiples of capacity). Links where ``marked`` is true are
    drawn again in thick red, named ``marked_name`` in the legend (e.g. cables that collided).

    Layout: hosts at the bottom, each switch in layer 1 + its hop distance from the nearest switch
    a NIC is on (leaves in layer 1, spines in layer 2); when switches carry a ``group`` attribute
    (dragonfly), groups sit on a circle, each a ring of switches inside a ring of its hosts.

    Raises :class:`~netsim.errors.NetsimError` when the drawing would have more than
    :data:`MAX_NODES` nodes.

    Examples
    --------
    >>> from netsim.topology import leaf_spine
    >>> t = leaf_spine(leaves=2, spines=2, hosts_per_leaf=2, gpus_per_host=8, nics_per_host=8,
    ...                nic_bandwidth_Bps=50e9, uplink_bandwidth_Bps=50e9, intra_bandwidth_Bps=900e9)
    >>> [tr.name for tr in topology_figure(t).data]
    ['NIC (host - switch)', 'tier to tier (up/down)', 'host', 'leaf', 'spine']
    """
    graph = topo.graph
    switches = [n for n, k in graph.nodes(data="kind") if k in SWITCH_KINDS]
    n_draw = len(switches) + topo.n_hosts
    if n_draw > MAX_NODES:
        raise NetsimError(f"too large to draw; {topo.name} has {n_draw:,} nodes to draw ({len(switches):,} "
                          f"switches + {topo.n_hosts:,} hosts), the limit is {MAX_NODES:,}: draw a smaller "
                          "fabric such as topologies/frontier-mini.yaml")
    # Drawing node of every graph node: switches are themselves, host parts collapse onto their host.
    draw_of = np.full(graph.number_of_nodes(), -1, dtype=np.int64)
    draw_of[switches] = np.arange(len(switches))
    for n, h in graph.nodes(data="host"):
        if h is not None and graph.nodes[n]["kind"] not in SWITCH_KINDS:
            draw_of[n] = len(switches) + h
    xy = _layout(topo, switches)

    fig = go.Figure()
    links = topo.links
    a, b = draw_of[links.src], draw_of[links.dst]
    valid = (a >= 0) & (b >= 0) & (a != b)  # host-internal links are not drawn
    if utilisation is not None:
        _utilisation_traces(fig, a, b, valid, xy, utilisation, _OFFERED_BINS if scale == "offered" else _UTIL_BINS,
                            "peak offered load {:.3g}×" if scale == "offered" else "peak utilisation {:.0%}")
    if marked is not None and (marked & valid).any():
        _cable_trace(fig, a, b, marked & valid, xy, marked_name, "#b2182b", 3.5)
    for label, colour, kinds in (() if utilisation is not None else _CABLES):
        mask = valid & np.isin(links.kind, [LINK_KINDS.index(k) for k in kinds])
        if mask.any():
            _cable_trace(fig, a, b, mask, xy, label, colour, 0.6, opacity=0.6)

    degree = np.bincount(a[valid], minlength=len(xy))
    kind_of = [graph.nodes[s]["kind"] for s in switches] + ["host"] * topo.n_hosts
    hover = [f"{topo.node_name(s)} ({graph.nodes[s]['kind']}): {degree[i]:,} links out"
             for i, s in enumerate(switches)]
    hover += [_host_text(topo, h) for h in range(topo.n_hosts)]
    for kind, (label, colour, symbol) in _MARKERS.items():
        idx = [i for i, k in enumerate(kind_of) if k == kind]
        if idx:
            fig.add_trace(go.Scatter(x=xy[idx, 0], y=xy[idx, 1], mode="markers", name=label,
                                     text=[hover[i] for i in idx], hoverinfo="text",
                                     marker={"color": colour, "symbol": symbol,
                                             "size": 6 if kind == "host" else 9}))
    fig.update_layout(title=f"{html.escape(topo.name)}: {len(switches):,} switches, {topo.n_hosts:,} hosts, "
                            f"{topo.n_gpus:,} GPUs",
                      showlegend=True, plot_bgcolor="white", height=800, hovermode="closest",
                      xaxis={"visible": False}, yaxis={"visible": False, "scaleanchor": "x"})
    return fig


#: Utilisation classes of a cable (the busier direction and parallel cable): upper bound, colour.
_UTIL_BINS = ((0.0, "#d9d9d9", "idle"), (0.25, "#a6d96a", "< 25%"), (0.5, "#fee08b", "25-50%"),
              (0.75, "#fdae61", "50-75%"), (1.01, "#d73027", "75-100%"))
#: Peak offered load classes (multiples of the cable's capacity).
_OFFERED_BINS = ((0.0, "#d9d9d9", "idle"), (1.0, "#a6d96a", "≤ 1×"), (2.0, "#fee08b", "1-2×"),
                 (4.0, "#fdae61", "2-4×"), (math.inf, "#f46d43", "> 4×"))


def _cable_trace(fig: go.Figure, a: np.ndarray, b: np.ndarray, mask: np.ndarray, xy: np.ndarray, name: str,
                 colour: str, width: float, opacity: float = 1.0) -> None:
    """One line per drawn pair among the links in ``mask``."""
    _pairs_trace(fig, np.unique(np.sort(np.stack([a[mask], b[mask]], axis=1), axis=1), axis=0), xy,
                 name, colour, width, opacity)


def _pairs_trace(fig: go.Figure, pairs: np.ndarray, xy: np.ndarray, name: str, colour: str, width: float,
                 opacity: float = 1.0) -> None:
    """One trace of straight lines between the drawing nodes of each row of ``pairs``."""
    xs = np.full(3 * len(pairs), None, dtype=object)
    ys = np.full(3 * len(pairs), None, dtype=object)
    xs[0::3], xs[1::3] = xy[pairs[:, 0], 0], xy[pairs[:, 1], 0]
    ys[0::3], ys[1::3] = xy[pairs[:, 0], 1], xy[pairs[:, 1], 1]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, hoverinfo="skip",
                             line={"color": colour, "width": width}, opacity=opacity))


def _utilisation_traces(fig: go.Figure, a: np.ndarray, b: np.ndarray, valid: np.ndarray, xy: np.ndarray,
                        values: np.ndarray, bins: tuple, hover: str) -> None:
    """Cables coloured by class (``bins``: upper bound, colour, label) of the busier direction and
    parallel cable, with ``hover`` text at each cable's midpoint."""
    cable: dict[tuple[int, int], float] = {}
    for lk in np.flatnonzero(valid):
        key = (int(min(a[lk], b[lk])), int(max(a[lk], b[lk])))
        cable[key] = max(cable.get(key, 0.0), float(values[lk]))
    for i, (upper, colour, label) in enumerate(bins):
        lower = bins[i - 1][0] if i else -1.0
        pairs = [k for k, u in cable.items() if (u <= upper if i == 0 else lower < u <= upper)]
        if pairs:
            _pairs_trace(fig, np.array(pairs), xy, f"cables {label}", colour, 2.5 if i else 0.8)
    mids = np.array(list(cable))
    fig.add_trace(go.Scatter(x=(xy[mids[:, 0], 0] + xy[mids[:, 1], 0]) / 2, y=(xy[mids[:, 0], 1] + xy[mids[:, 1], 1]) / 2,
                             mode="markers", marker={"size": 4, "color": "rgba(0,0,0,0)"}, showlegend=False,
                             text=[hover.format(u) for u in cable.values()], hoverinfo="text"))


def host_positions(topo: Topology) -> np.ndarray:
    """(x, y) of every host in :func:`topology_figure`'s drawing, host by host."""
    switches = [n for n, k in topo.graph.nodes(data="kind") if k in SWITCH_KINDS]
    return _layout(topo, switches)[len(switches):]


def _host_text(topo: Topology, h: int) -> str:
    """Hover text of host ``h``: its model and the switches its NICs go to."""
    model, first, _base, nics = topo.hosts[h]
    to = sorted({topo.node_name(sw) for nic in nics for _up, sw, _down in topo.nic_ports.get(nic, [])})
    gpus = f"{first}-{first + model.n_gpus - 1}"
    return f"host {h} ({model.name}): GPUs {gpus}, {len(nics)} NICs -> {', '.join(to)}"


def _layout(topo: Topology, switches: list[int]) -> np.ndarray:
    """(x, y) of every drawing node: switches in ``switches`` order, then hosts."""
    nodes = topo.graph.nodes
    xy = np.zeros((len(switches) + topo.n_hosts, 2))
    host_switch = [min((sw for nic in nics for _up, sw, _down in topo.nic_ports.get(nic, [])), default=None)
                   for _m, _f, _b, nics in topo.hosts]
    if switches and all("group" in nodes[s] for s in switches):
        _circle(topo, switches, host_switch, xy)
        return xy
    # Layers: hosts at 0, each switch at 1 + its hop distance from the nearest switch a NIC is on.
    members = set(switches)
    g = nx.Graph()
    g.add_nodes_from(switches)
    g.add_edges_from((u, v) for u, v in topo.graph.edges() if u in members and v in members)
    edge = {sw for ports in topo.nic_ports.values() for _up, sw, _down in ports}
    dist = nx.multi_source_dijkstra_path_length(g, edge) if edge else {}
    top = max(dist.values(), default=0) + 1
    by_layer: dict[int, list[int]] = {}
    for i, s in enumerate(switches):
        by_layer.setdefault(1 + dist.get(s, top), []).append(i)
    for y, rows in by_layer.items():
        for k, i in enumerate(rows):
            xy[i] = ((k + 0.5) / len(rows), y)
    # hosts under the switch their first NIC port goes to, in the order of those switches
    index = {s: i for i, s in enumerate(switches)}
    under = [xy[index[sw], 0] if sw in index else math.inf for sw in host_switch]
    hosts = sorted(range(topo.n_hosts), key=lambda h: (under[h], h))
    for k, h in enumerate(hosts):
        xy[len(switches) + h] = ((k + 0.5) / len(hosts), 0)
    xy[:, 0] *= 2.0 + 0.02 * len(xy)  # wide fabrics get room; layers stay 1 apart
    return xy


def _circle(topo: Topology, switches: list[int], host_switch: list[int | None], xy: np.ndarray) -> None:
    """Dragonfly layout into ``xy``: groups on a circle, each a ring of switches inside a ring of hosts."""
    nodes = topo.graph.nodes
    groups: dict = {}
    for i, s in enumerate(switches):
        groups.setdefault(nodes[s]["group"], []).append(i)
    hosts_of: dict = {}
    for h, sw in enumerate(host_switch):
        hosts_of.setdefault(None if sw is None else nodes[sw]["group"], []).append(h)
    radius = math.pi / max(len(groups), 2) * 0.5  # of a group's host ring: neighbouring groups do not overlap
    for gi, (group, members) in enumerate(groups.items()):
        angle = 2 * math.pi * gi / len(groups)
        centre = np.array([math.cos(angle), math.sin(angle)]) if len(groups) > 1 else np.zeros(2)
        for k, i in enumerate(members):
            t = 2 * math.pi * k / len(members)
            xy[i] = centre + 0.6 * radius * np.array([math.cos(t), math.sin(t)])
        hosts = hosts_of.get(group, [])
        for k, h in enumerate(hosts):  # hosts come in the order of their switches
            t = 2 * math.pi * (k + 0.5) / len(hosts)
            xy[len(switches) + h] = centre + radius * np.array([math.cos(t), math.sin(t)])


def write_topology_html(topo: Topology, out: str | Path) -> Path:
    """Write :func:`topology_figure` as one self-contained HTML file (plotly.js inlined, opens offline).

    Examples
    --------
    >>> import tempfile
    >>> from netsim.topology import leaf_spine
    >>> t = leaf_spine(leaves=2, spines=1, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1,
    ...                nic_bandwidth_Bps=50e9, uplink_bandwidth_Bps=50e9, intra_bandwidth_Bps=900e9)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     "plotly" in write_topology_html(t, Path(d) / "fabric.html").read_text()
    True
    """
    return write_figure(topology_figure(topo), out)


def figure_html(fig: go.Figure) -> str:
    """``fig`` as a self-contained HTML page (plotly.js inlined)."""
    return fig.to_html(full_html=True, include_plotlyjs=True, config={"responsive": True})


def write_figure(fig: go.Figure, out: str | Path) -> Path:
    """Write ``fig`` as a self-contained HTML page, atomically (a temporary sibling renamed into place)."""
    return write_file_atomically(Path(out), figure_html(fig), force=True, option="--draw")

"""Static figures of a built fabric for ``netsim topo``: counts, bandwidths, diameter, path diversity."""

from __future__ import annotations

import networkx as nx
import numpy as np

from netsim import units
from netsim.errors import NetsimError
from netsim.topology.topology import LINK_KINDS, SWITCH_KINDS, Topology

_NIC_UP = LINK_KINDS.index("nic_up")
_PLURAL = {"leaf": "leaves", "switch": "switches", "group": "groups", "edge switch": "edge switches",
           "leaf position": "leaf positions (every rail's leaf at that position)"}


def summary(topo: Topology) -> dict:
    """Counts and capacity figures of ``topo`` from its link table (under a second on the full Frontier).

    Definitions:

    - **Injection bandwidth**: the sum of the capacities of all NIC up-links (``nic_up``, one per NIC
      port), in bytes/s.
    - **Bisection bandwidth**: the one-way capacity between two fixed halves of the fabric. The
      *edge switches* are the switches that NIC ports attach to. They form *units*: a dragonfly
      group is one unit (switches carry a ``group`` attribute); otherwise every edge switch is its
      own unit (a leaf). Units are ordered by builder order (node id); side A is the first
      ``floor(U/2)`` of the ``U`` units, side B the rest. Switches in no unit (spines, cores) are
      transit switches on neither side. The bisection is the maximum flow over switch-to-switch
      links from side A to side B, which equals the capacity of the smallest set of those links
      whose removal disconnects A from B. On a leaf-spine this is the leaf->spine capacity of the
      first ``floor(L/2)`` leaves, ``floor(L/2) * spines * uplinks_per_spine * uplink bandwidth``.
      On a dragonfly it is the global cables between the first ``floor(g/2)`` groups and the rest,
      ``floor(g/2) * (g - floor(g/2)) * cables_per_group_pair * link bandwidth``. ``None`` when there
      are fewer than two units (one leaf, one group): no switch-to-switch cut separates any hosts.
    - **Bisection ratio**: bisection / (injection / 2); 1.0 is a non-blocking fabric, 0.25 a 4:1
      oversubscribed leaf-spine.
    - **Diameter**: the largest number of switch-to-switch hops on a fewest-hop path between two NICs,
      i.e. between two GPUs of different hosts (a multi-port NIC takes its closest port), as
      :meth:`Topology.paths` routes them. NICs whose switches cannot reach each other (separate
      networks) do not count. In general that is the hop distance in the switch graph. On a
      dragonfly, fewest-hop paths are minimal routes (local, global, local) that stay in the two
      groups, so it comes from the cable table: 3 when, for some pair of groups, each has a switch
      without a cable to the other; 0 when every NIC is on one switch, 2 on a leaf-spine with spines.
    - **Path diversity**: the number of equal-cost paths :meth:`Topology.paths` gives between GPU 0
      and a representative partner with the same local GPU index: the first (in GPU order) on the
      same host, on another host behind the same edge switch(es), behind another edge switch (of
      the same group on a dragonfly) and, on a dragonfly, in another group.

    Parameters
    ----------
    topo:
        A built fabric.

    Returns
    -------
    dict
        ``name``, ``type``, ``hosts``, ``gpus``, ``nics``, ``switches`` (fabric switches by kind),
        ``host_switches``, ``links`` (directed links by kind), ``injection_Bps``, ``nic_links``,
        ``bisection_Bps``, ``bisection_cut`` (which cut, in words), ``bisection_ratio``,
        ``diameter_hops`` and ``paths`` (a list of ``{pair, src, dst, paths, switch_hops}``).

    Examples
    --------
    >>> from netsim.topology import leaf_spine
    >>> t = leaf_spine(leaves=4, spines=2, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=2,
    ...                nic_bandwidth_Bps=50e9, uplink_bandwidth_Bps=50e9, uplinks_per_spine=2,
    ...                intra_bandwidth_Bps=900e9)
    >>> s = summary(t)
    >>> s["injection_Bps"], s["bisection_Bps"], s["bisection_ratio"], s["diameter_hops"]
    (800000000000.0, 400000000000.0, 1.0, 2)
    >>> [(p["pair"], p["paths"]) for p in s["paths"]]
    [('same host', 1), ('same leaf, other host', 1), ('other leaf', 8)]
    """
    links = topo.links
    kinds = dict(topo.graph.nodes(data="kind"))
    n_nodes = topo.graph.number_of_nodes()
    is_switch = np.zeros(n_nodes, dtype=bool)
    is_switch[[n for n, k in kinds.items() if k in SWITCH_KINDS]] = True
    kind_counts = np.bincount(links.kind, minlength=len(LINK_KINDS))
    nic_up = links.kind == _NIC_UP
    injection = float(links.capacity_Bps[nic_up].sum())
    bisection, cut = _bisection(topo, is_switch)
    switch_kinds = [kinds[n] for n in np.flatnonzero(is_switch)]
    return {
        "name": topo.name,
        "type": topo.params.get("type", "?"),
        "hosts": topo.n_hosts,
        "gpus": topo.n_gpus,
        "nics": sum(model.n_nics for model, *_ in topo.hosts),
        "switches": {k: switch_kinds.count(k) for k in SWITCH_KINDS if k in switch_kinds},
        "host_switches": sum(k == "host_switch" for k in kinds.values()),
        "links": {name: int(c) for name, c in zip(LINK_KINDS, kind_counts) if c},
        "injection_Bps": injection,
        "nic_links": int(nic_up.sum()),
        "bisection_Bps": bisection,
        "bisection_cut": cut,
        "bisection_ratio": bisection / (injection / 2) if bisection is not None and injection else None,
        "diameter_hops": _diameter(topo, is_switch),
        "oversubscription": {tier: topo.params[key] for tier, key in (("leaf", "oversubscription"),
                                                                      ("spine-core", "oversubscription_core"))
                             if key in topo.params},
        "paths": _path_diversity(topo, is_switch),
    }


def _units(topo: Topology, is_switch: np.ndarray) -> tuple[np.ndarray, list, str]:
    """Unit index of every node (-1: none), the unit keys in builder order, and what a unit is called."""
    links = topo.links
    edge = np.unique(links.dst[(links.kind == _NIC_UP) & is_switch[links.dst]])
    nodes = topo.graph.nodes
    grouped = any("group" in nodes[int(s)] for s in edge)
    unit_of = np.full(len(is_switch), -1, dtype=np.int64)
    keys: dict = {}
    if any("position" in nodes[int(s)] for s in edge):  # rail-only: the leaves at one position of every rail
        for s in edge:
            unit_of[s] = keys.setdefault(nodes[int(s)]["position"], len(keys))
        return unit_of, list(keys), "leaf position"
    if grouped:
        for s in np.flatnonzero(is_switch):
            group = nodes[int(s)].get("group")
            if group is not None:
                unit_of[s] = keys.setdefault(group, len(keys))
        return unit_of, list(keys), "group"
    unit_of[edge] = np.arange(len(edge))
    edge_kinds = {nodes[int(s)]["kind"] for s in edge}
    noun = edge_kinds.pop() if len(edge_kinds) == 1 and next(iter(edge_kinds)) in _PLURAL else "edge switch"
    return unit_of, edge.tolist(), noun


def _bisection(topo: Topology, is_switch: np.ndarray) -> tuple[float | None, str]:
    """Max flow from the first half of the units to the rest over switch links (see :func:`summary`)."""
    unit_of, keys, noun = _units(topo, is_switch)
    n_units = len(keys)
    if n_units < 2:
        if noun == "leaf position" and n_units:
            return None, "every rail is one switch: no switch-to-switch cut"
        return None, f"all NICs on one {noun}: no switch-to-switch cut" if n_units else "no NICs on switches"
    half = n_units // 2
    cut = f"first {half} of {n_units} {_PLURAL[noun]} -> the rest"
    links = topo.links
    sw = is_switch[links.src] & is_switch[links.dst]
    src, dst, cap = links.src[sw], links.dst[sw], links.capacity_Bps[sw]
    # Contract side A to node -1 and side B to node -2; transit switches keep their node id.
    side = np.where(unit_of < 0, np.arange(len(unit_of)), np.where(unit_of < half, -1, -2))
    u, v = side[src], side[dst]
    keep = (u != v) & (u != -2) & (v != -1)  # flow never needs to leave B or re-enter A
    u, v, cap = u[keep], v[keep], cap[keep]
    if not len(u):
        return 0.0, cut
    pairs, inverse = np.unique(np.stack([u, v], axis=1), axis=0, return_inverse=True)
    total = np.bincount(inverse.ravel(), weights=cap)
    if (pairs >= 0).any():  # transit switches in between: solve the (small) contracted max-flow problem
        g = nx.DiGraph()
        g.add_weighted_edges_from(((int(a), int(b), float(c)) for (a, b), c in zip(pairs, total)),
                                  weight="capacity")
        if -1 not in g or -2 not in g:
            return 0.0, cut
        return float(nx.maximum_flow_value(g, -1, -2)), cut
    return float(total.sum()), cut


def _diameter(topo: Topology, is_switch: np.ndarray) -> int | None:
    """Largest fewest-hop switch distance between two NICs' switch sets (see :func:`summary`).

    Dragonflies (``group_cables`` from the builder) route inside the two groups only: see
    :func:`_dragonfly_diameter`.

    perf: one bit-parallel BFS from every NIC attachment set at once. ``reach[s]`` holds a bit per
    set that reaches switch ``s`` within k hops; each hop is one gather and one OR-reduce over the
    switch links (a few ms on Frontier's 2,368 switches), instead of a BFS per switch in Python.
    """
    switches = np.flatnonzero(is_switch)
    if not topo.nic_ports or not len(switches):
        return None
    if getattr(topo, "group_cables", None) is not None:
        return _dragonfly_diameter(topo)
    index = np.full(len(is_switch), -1, dtype=np.int64)
    index[switches] = np.arange(len(switches))
    sets = sorted({tuple(sorted({int(index[sw]) for _up, sw, _down in ports}))
                   for ports in topo.nic_ports.values()})
    words = (len(sets) + 63) // 64
    reach = np.zeros((len(switches), words), dtype=np.uint64)
    members = np.array([s for members in sets for s in members], dtype=np.int64)
    starts = np.cumsum([0] + [len(m) for m in sets[:-1]])
    for x, ms in enumerate(sets):
        reach[list(ms), x // 64] |= np.uint64(1 << (x % 64))
    links = topo.links
    sw = is_switch[links.src] & is_switch[links.dst]
    pairs = np.unique(np.stack([index[links.dst[sw]], index[links.src[sw]]], axis=1), axis=0)  # sorted by dst
    dst, src = pairs[:, 0], pairs[:, 1]
    targets, first = np.unique(dst, return_index=True)

    def cover(r: np.ndarray) -> np.ndarray:
        return np.bitwise_or.reduceat(r[members], starts, axis=0)

    covered, diameter, hops = cover(reach), 0, 0
    while len(src):
        step = reach.copy()
        step[targets] |= np.bitwise_or.reduceat(reach[src], first, axis=0)
        if np.array_equal(step, reach):
            break
        reach, hops = step, hops + 1
        now = cover(reach)
        if not np.array_equal(now, covered):
            covered, diameter = now, hops
    return diameter


def _dragonfly_diameter(topo: Topology) -> int:
    """Largest minimal-route hop count between NIC switches of a dragonfly, from its cable table.

    From switch s of group A to switch t of group B a minimal route takes a cable (u, v) from A to
    B: ``[s != u] + 1 + [v != t]`` hops, the fewest over the cables. The worst pair needs 3 hops
    when some NIC switch of A has no cable to B and some NIC switch of B none to A; 2 when every
    NIC switch of one side has one but not every pair is cabled directly; 1 when every pair is.
    """
    edge = {sw for ports in topo.nic_ports.values() for _up, sw, _down in ports}
    members: dict = {}
    for sw in edge:
        members.setdefault(topo.switch_group[sw], set()).add(sw)
    worst = 1 if any(len(m) > 1 for m in members.values()) else 0  # one local hop inside a group
    for (ga, gb), cables in topo.group_cables.items():
        if worst == 3:
            break
        if ga not in members or gb not in members:
            continue
        heads = {u for u, _link, _v in cables}
        tails = {v for _u, _link, v in cables}
        if not members[ga] <= heads and not members[gb] <= tails:
            worst = 3
        elif not {(s, t) for s in members[ga] for t in members[gb]} <= {(u, v) for u, _link, v in cables}:
            worst = max(worst, 2)
    return worst


def _path_diversity(topo: Topology, is_switch: np.ndarray) -> list[dict]:
    """Equal-cost path counts from GPU 0 to representative partners (see :func:`summary`)."""
    if topo.n_gpus == 0:
        return []
    nodes = topo.graph.nodes

    def attached(gpu: int) -> frozenset[int]:
        return frozenset(sw for _up, sw, _down in topo.nic_ports.get(topo.nic_of(gpu), []))

    def group(switches: frozenset[int]) -> object:
        return min((nodes[s].get("group", -1) for s in switches), default=-1)

    def pod(switches: frozenset[int]) -> object:
        return min((nodes[s].get("pod", -1) for s in switches), default=-1)

    home = attached(0)
    kind = nodes[min(home)]["kind"] if home else "switch"
    grouped = bool(home) and group(home) != -1
    wanted = [("same host", None), (f"same {kind}, other host", lambda s: s == home)]
    if grouped:
        wanted += [(f"other {kind}, same group", lambda s: not s & home and group(s) == group(home)),
                   ("other group", lambda s: group(s) != group(home))]
    elif bool(home) and pod(home) != -1:  # a three-tier Clos: pods
        wanted += [(f"other {kind}, same pod", lambda s: not s & home and pod(s) == pod(home)),
                   ("other pod", lambda s: pod(s) != pod(home))]
    else:
        wanted.append((f"other {kind}", lambda s: not s & home))
    found: dict[str, int] = {}
    if topo.hosts[0][0].n_gpus > 1:
        found["same host"] = 1
    for model, first, *_ in topo.hosts[1:]:
        if len(found) == len(wanted):
            break
        gpu = first  # local GPU 0, like GPU 0 itself: the same rail
        switches = attached(gpu)
        for label, test in wanted[1:]:
            if label not in found and test(switches):
                found[label] = gpu
    if "rail" in nodes[min(home)] if home else False:  # rail-only: another rail's GPU is reached by forwarding
        for model, first, *_ in topo.hosts[1:]:
            if model.n_gpus > 1:
                wanted.append(("other rail, other host", None))
                found["other rail, other host"] = first + 1
                break
    out = []
    for label, _ in wanted:
        if label not in found:
            continue
        dst = found[label]
        try:
            paths = topo.paths(0, dst)
        except NetsimError:
            paths = []
        hops = None
        if paths:
            path = list(paths[0])
            hops = int(np.count_nonzero(is_switch[topo.links.src[path]] & is_switch[topo.links.dst[path]]))
        out.append({"pair": label, "src": 0, "dst": dst, "paths": len(paths), "switch_hops": hops})
    return out


def format_summary(s: dict) -> str:
    """A fixed-format text block of a :func:`summary` (one figure per line; golden-file friendly).

    Examples
    --------
    >>> from netsim.topology import leaf_spine
    >>> t = leaf_spine(leaves=2, spines=1, hosts_per_leaf=1, gpus_per_host=2, nics_per_host=1,
    ...                nic_bandwidth_Bps=50e9, uplink_bandwidth_Bps=50e9, intra_bandwidth_Bps=900e9)
    >>> print(format_summary(summary(t)))
    fabric      leaf_spine(2x1, 2 hosts x 2 GPUs)
    hosts       2 (4 GPUs, 2 NICs)
    switches    3 (leaf 2, spine 1); 2 inside hosts
    links       16 directed: intra 8, nic_up 2, nic_down 2, up 2, down 2
    injection   800Gbps over 2 NIC up-links
    bisection   400Gbps one way (first 1 of 2 leaves -> the rest)
    ratio       1.000 (bisection / half the injection)
    diameter    2 switch-to-switch hops
    paths       same host   GPU 0 -> GPU 1             1 path   0 switch hops
                other leaf  GPU 0 -> GPU 2             1 path   2 switch hops
    """
    def bw(x: float) -> str:
        return units.format_bandwidth(x, 4)

    switches = sum(s["switches"].values())
    by_kind = ", ".join(f"{k} {n:,}" for k, n in s["switches"].items())
    host_sw = f"; {s['host_switches']:,} inside hosts" if s["host_switches"] else ""
    n_links = sum(s["links"].values())
    lines = [
        f"fabric      {s['name']}",
        f"hosts       {s['hosts']:,} ({s['gpus']:,} GPUs, {s['nics']:,} NICs)",
        f"switches    {switches:,} ({by_kind}){host_sw}",
        f"links       {n_links:,} directed: " + ", ".join(f"{k} {n:,}" for k, n in s["links"].items()),
        f"injection   {bw(s['injection_Bps'])} over {s['nic_links']:,} NIC up-links",
    ]
    if s["bisection_Bps"] is None:
        lines.append(f"bisection   n/a ({s['bisection_cut']})")
    else:
        lines.append(f"bisection   {bw(s['bisection_Bps'])} one way ({s['bisection_cut']})")
        lines.append(f"ratio       {s['bisection_ratio']:.3f} (bisection / half the injection)")
    if len(s.get("oversubscription", {})) > 1:  # a tier ratio beyond the leaf's (three-tier Clos)
        lines.append("tiers       " + ", ".join(f"{tier} {r:.3g}:1" for tier, r in s["oversubscription"].items())
                     + " (down : up bandwidth)")
    diameter = "n/a" if s["diameter_hops"] is None else f"{s['diameter_hops']} switch-to-switch hops"
    lines.append(f"diameter    {diameter}")
    width = max((len(p["pair"]) for p in s["paths"]), default=0)
    for i, p in enumerate(s["paths"]):
        head = "paths       " if i == 0 else " " * 12
        pair = f"GPU {p['src']} -> GPU {p['dst']}"
        if p["paths"]:
            n, hops = p["paths"], p["switch_hops"]
            what = f"{n:>6,} {'path' if n == 1 else 'paths':<5}  {hops} switch hop{'' if hops == 1 else 's'}"
        else:
            what = "no path"
        lines.append(f"{head}{p['pair']:<{width}}  {pair:<22}{what}")
    return "\n".join(lines)

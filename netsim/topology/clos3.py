"""Builder of three-tier Clos fabrics: pods of leaf-spine joined by a core tier (Meta's RTSW -> CTSW -> ATSW).

A pod is a two-tier leaf-spine (:func:`netsim.topology.leaf_spine._add_leaf_spine`: hosts, rails,
multi-port NICs as there). Its spines connect up to core switches, either in *planes* (spine ``j``
of every pod to every core switch of plane ``j``, as fat-trees do) or as a *mesh* (every spine to
every core switch). Switch paths are given in closed form (never searched), as arrays of link ids
gathered from tables of the cables: same leaf, same pod (leaf - spine - leaf), or across pods
(leaf - spine - core - spine - leaf).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from netsim.errors import ConfigError
from netsim.topology.leaf_spine import _add_leaf_spine, _check_positive
from netsim.topology.nic import NicProfile
from netsim.topology.topology import Topology, _Builder, compile_links

#: How spines reach the core: ``planes`` (spine j of each pod to plane j) or ``mesh`` (to every core switch).
CORE_WIRINGS = ("planes", "mesh")


def clos3(*, pods: int, leaves_per_pod: int, spines_per_pod: int, hosts_per_leaf: int, gpus_per_host: int,
          nics_per_host: int, nic: NicProfile, nic_latency_s: float = 0.0, uplink_bandwidth_Bps: float,
          uplink_latency_s: float = 0.0, uplinks_per_spine: int = 1, cores: int, core_bandwidth_Bps: float,
          core_latency_s: float = 0.0, core_cables: int = 1, core_wiring: str = "planes",
          intra_bandwidth_Bps: float, intra_latency_s: float = 0.0, intra_overhead_s: float = 0.0,
          rail_optimized: bool = False, host_nics: Mapping[int, NicProfile] | None = None,
          nic_bandwidth_overrides: Mapping[tuple[int, int], float] | None = None) -> Topology:
    """Build a three-tier Clos: ``pods`` leaf-spines whose spines are cabled to ``cores`` core switches.

    Hosts are numbered pod by pod (``leaves_per_pod * hosts_per_leaf`` per pod); ``host_nics`` and
    ``nic_bandwidth_overrides`` use these global host numbers. With ``core_wiring="planes"`` the
    cores form ``spines_per_pod`` planes of ``cores / spines_per_pod`` switches, and spine ``j`` of
    every pod has ``core_cables`` cables to each core switch of plane ``j``; with ``"mesh"`` every
    spine has ``core_cables`` cables to every core switch.

    Examples
    --------
    >>> from netsim.topology.nic import generic_nic
    >>> t = clos3(pods=2, leaves_per_pod=2, spines_per_pod=2, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1,
    ...           nic=generic_nic(50e9), uplink_bandwidth_Bps=50e9, cores=4, core_bandwidth_Bps=50e9,
    ...           intra_bandwidth_Bps=900e9)
    >>> t.n_gpus, len(t.paths(0, 1)), len(t.paths(0, 2)), t.params["oversubscription_core"]
    (4, 2, 4, 1.0)
    """
    _check_positive(pods=pods, cores=cores, core_cables=core_cables)
    if core_wiring not in CORE_WIRINGS:
        raise ConfigError(f"must be one of {', '.join(CORE_WIRINGS)}, got {core_wiring!r}", "topology.core.wiring")
    if core_wiring == "planes" and cores % spines_per_pod:
        raise ConfigError(f"{cores} core switches do not split into {spines_per_pod} planes (one per spine of a "
                          f"pod): give a multiple of spines_per_pod, or wiring: mesh", "topology.core.switches")
    host_nics, overrides = dict(host_nics or {}), dict(nic_bandwidth_overrides or {})
    per_pod = leaves_per_pod * hosts_per_leaf
    b = _Builder()
    core_nodes = [b.node(f"core{k}", "core", index=k) for k in range(cores)]
    plane = cores // spines_per_pod if core_wiring == "planes" else cores
    hosts, nic_ports, nic_profile, pod_spines, pod_leaves = [], {}, {}, [], []
    reach: dict[int, list[int]] = {}  # spine -> the core switches it is cabled to
    for p in range(pods):
        pod = _add_leaf_spine(
            b, prefix=f"pod{p}.", first_host=p * per_pod, first_gpu=p * per_pod * gpus_per_host,
            leaves=leaves_per_pod, spines=spines_per_pod, hosts_per_leaf=hosts_per_leaf, gpus_per_host=gpus_per_host,
            nics_per_host=nics_per_host, nic=nic, nic_latency_s=nic_latency_s,
            uplink_bandwidth_Bps=uplink_bandwidth_Bps, uplink_latency_s=uplink_latency_s,
            uplinks_per_spine=uplinks_per_spine, intra_bandwidth_Bps=intra_bandwidth_Bps,
            intra_latency_s=intra_latency_s, rail_optimized=rail_optimized,
            host_nics={h - p * per_pod: v for h, v in host_nics.items() if p * per_pod <= h < (p + 1) * per_pod},
            nic_bandwidth_overrides={(h - p * per_pod, r): v for (h, r), v in overrides.items()
                                     if p * per_pod <= h < (p + 1) * per_pod})
        for node in (*pod.leaves, *pod.spines):
            b.graph.nodes[node]["pod"] = p
        for j, spine in enumerate(pod.spines):
            reach[spine] = core_nodes[j * plane:(j + 1) * plane] if core_wiring == "planes" else core_nodes
            for core in reach[spine]:
                for _ in range(core_cables):
                    b.duplex(spine, core, core_bandwidth_Bps, core_latency_s, "core_up", "core_down")
        hosts += pod.hosts
        nic_ports.update(pod.nic_ports)
        nic_profile.update(pod.nic_profile)
        pod_spines.append(pod.spines)
        pod_leaves.append(pod.leaves)
    for h in host_nics:
        if not 0 <= h < pods * per_pod:
            raise ConfigError(f"host {h} is outside the fabric (hosts 0..{pods * per_pod - 1})", "topology.host_nics")
    links = compile_links(b.links)
    graph = b.graph
    pod_of = {s: p for p, row in enumerate(pod_leaves) for s in row} | {s: p for p, row in enumerate(pod_spines)
                                                                      for s in row}
    spine_index = {s: j for row in pod_spines for j, s in enumerate(row)}
    leaf_index = {s: i for row in pod_leaves for i, s in enumerate(row)}
    cables = {(u, v): data["links"] for u, v, data in graph.edges(data=True) if data["links"]}
    # The cables of each hop as tables (the last axis: parallel cables): leaf i -> spine j of pod p,
    # spine j -> leaf i, spine j -> core k (-1: not cabled), core k -> spine j of pod p; and the
    # (spine j, core k, spine j2) triples of the paths across the core (j reaches k, k reaches j2).
    up = np.array([[[cables[leaf, s] for s in spines] for leaf in leaves]
                   for leaves, spines in zip(pod_leaves, pod_spines)], dtype=np.int64)
    dn = np.array([[[cables[s, leaf] for leaf in leaves] for s in spines]
                   for leaves, spines in zip(pod_leaves, pod_spines)], dtype=np.int64)
    no_cable = [-1] * core_cables
    core_up = np.array([[[cables.get((s, k), no_cable) for k in core_nodes] for s in spines] for spines in pod_spines],
                       dtype=np.int64)
    core_dn = np.array([[[cables.get((k, s), no_cable) for s in spines] for spines in pod_spines] for k in core_nodes],
                       dtype=np.int64)
    reaches = np.array([[k in reach[s] for k in core_nodes] for s in pod_spines[0]])
    triples = np.argwhere(reaches[:, :, None] & reaches.T[None, :, :])

    def switch_paths(a: int, z: int) -> np.ndarray:
        """Fewest-hop switch paths between two leaves (or spines) in closed form, one a row (in no
        particular order: Topology sorts them)."""
        pa, pz = pod_of.get(a), pod_of.get(z)
        if pa is None or pz is None:
            raise ConfigError(f"no closed-form path between switches {a} and {z} of a three-tier Clos", "topology")
        ja, jz = spine_index.get(a), spine_index.get(z)
        if pa == pz and (ja is None) != (jz is None):  # a spine and a leaf of one pod
            return np.array(cables[a, z], dtype=np.int64).reshape(-1, 1)
        if pa == pz and ja is None and jz is None:
            return _product([up[pa, leaf_index[a]], dn[pa, :, leaf_index[z]]])
        # across the core (or two spines of one pod, through it)
        keep = np.ones(len(triples), dtype=bool)
        if ja is not None:
            keep &= triples[:, 0] == ja
        if jz is not None:
            keep &= triples[:, 2] == jz
        j, k, j2 = triples[keep].T
        hops = [core_up[pa, j, k], core_dn[k, pz, j2]]
        if ja is None:
            hops.insert(0, up[pa, leaf_index[a], j])
        if jz is None:
            hops.append(dn[pz, j2, leaf_index[z]])
        return _product(hops)

    pod_down_Bps = per_pod * nics_per_host * nic.ports * nic.port_capacity_Bps
    spine_down_Bps = leaves_per_pod * uplinks_per_spine * uplink_bandwidth_Bps
    spine_up_Bps = plane * core_cables * core_bandwidth_Bps
    leaf_down_Bps = hosts_per_leaf * nics_per_host * nic.ports * nic.port_capacity_Bps
    params = {
        "type": "clos3", "pods": pods, "leaves_per_pod": leaves_per_pod, "spines_per_pod": spines_per_pod,
        "hosts_per_leaf": hosts_per_leaf, "gpus_per_host": gpus_per_host, "nics_per_host": nics_per_host,
        "uplinks_per_spine": uplinks_per_spine, "cores": cores, "core_wiring": core_wiring,
        "core_cables": core_cables, "cores_per_spine": plane, "rail_optimized": rail_optimized,
        "nic": nic.name, "nic_bandwidth_Bps": nic.port_capacity_Bps, "nic_ports": nic.ports,
        "uplink_bandwidth_Bps": uplink_bandwidth_Bps, "core_bandwidth_Bps": core_bandwidth_Bps,
        "intra_bandwidth_Bps": intra_bandwidth_Bps,
        "oversubscription": leaf_down_Bps / (spines_per_pod * uplinks_per_spine * uplink_bandwidth_Bps),
        "oversubscription_core": spine_down_Bps / spine_up_Bps, "pod_injection_Bps": pod_down_Bps,
    }
    n_hosts = pods * per_pod
    topo = Topology(f"clos3({pods} pods x {leaves_per_pod}x{spines_per_pod}, {cores} cores {core_wiring}, "
                    f"{n_hosts} hosts x {gpus_per_host} GPUs)", graph, links, hosts, nic_ports, nic_profile,
                    intra_overhead_s, params, switch_path_fn=switch_paths)
    topo.pod_of = pod_of
    return topo


def _product(hops: list[np.ndarray]) -> np.ndarray:
    """Per row ``r`` of the ``(n, cables)`` tables ``hops``, every choice of one cable per hop: the
    paths ``itertools.product(*(h[r] for h in hops))``, one a row, for every ``r`` in turn."""
    n = len(hops[0])
    shape = (n, *(h.shape[1] for h in hops))
    columns = []
    for axis, h in enumerate(hops):
        view = [n] + [1] * len(hops)
        view[axis + 1] = h.shape[1]
        columns.append(np.broadcast_to(h.reshape(view), shape).reshape(-1))
    return np.stack(columns, axis=1)

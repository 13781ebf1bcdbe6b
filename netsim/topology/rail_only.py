"""Builder of rail-only fabrics (Wang et al., arXiv 2307.12169): a Clos per rail and no spine joining rails.

A *rail* is the GPUs with the same local index on every host; GPU ``r`` of a host owns NIC ``r``,
cabled to a leaf of rail ``r``. A rail is one leaf switch, or a two-tier leaf-spine of its own
(its leaves cabled to its spines only). No link joins two rails: a message between GPUs of
different rails on different hosts is forwarded inside the source host first, over NVLink to the
GPU of the destination's rail (:attr:`NodeModel.forward_rails`), and then crosses that rail. The
forwarding costs the host's links their bandwidth and latency, so it shows in the host tier's load
and in the message's time. With ``forwarding=False`` such pairs have no path: the error says so.
"""

from __future__ import annotations

import itertools

from netsim.errors import ConfigError
from netsim.topology.leaf_spine import _check_positive
from netsim.topology.nic import NicProfile
from netsim.topology.node import nvswitch_node
from netsim.topology.topology import Topology, _Builder, compile_links


def rail_only(*, leaves_per_rail: int, hosts_per_leaf: int, gpus_per_host: int, nic: NicProfile,
              nic_latency_s: float = 0.0, spines_per_rail: int = 0, uplink_bandwidth_Bps: float = 0.0,
              uplink_latency_s: float = 0.0, uplinks_per_spine: int = 1, intra_bandwidth_Bps: float,
              intra_latency_s: float = 0.0, intra_overhead_s: float = 0.0, forwarding: bool = True) -> Topology:
    """Build a rail-only fabric: ``gpus_per_host`` rails of ``leaves_per_rail`` leaves (and ``spines_per_rail`` spines).

    There are ``leaves_per_rail * hosts_per_leaf`` hosts of ``gpus_per_host`` GPUs, one single-port
    NIC per GPU; NIC ``r`` of host ``h`` goes to leaf ``h // hosts_per_leaf`` of rail ``r``. With
    several leaves per rail, every leaf of a rail has ``uplinks_per_spine`` cables to every spine of
    that rail.

    Examples
    --------
    >>> from netsim.topology.nic import generic_nic
    >>> t = rail_only(leaves_per_rail=1, hosts_per_leaf=2, gpus_per_host=2, nic=generic_nic(50e9),
    ...               intra_bandwidth_Bps=900e9)
    >>> [t.link_name(lk) for lk in t.paths(0, 3)[0]]  # GPU 0 of host 0 to GPU 1 of host 1: through GPU 1
    ['h0.gpu0->h0.nvs', 'h0.nvs->h0.gpu1', 'h0.nic1->rail1.leaf0', 'rail1.leaf0->h1.nic1']
    """
    _check_positive(leaves_per_rail=leaves_per_rail, hosts_per_leaf=hosts_per_leaf, gpus_per_host=gpus_per_host,
                    uplinks_per_spine=uplinks_per_spine)
    if nic.ports != 1:
        raise ConfigError(f"a rail-only fabric cables each GPU's NIC to its rail with one port; this NIC has "
                          f"{nic.ports}", "topology.nic")
    if leaves_per_rail > 1 and spines_per_rail < 1:
        raise ConfigError(f"a rail of {leaves_per_rail} leaves needs spines to join them: give spines_per_rail >= 1 "
                          "(and an uplink), or one leaf per rail", "topology.spines_per_rail")
    if spines_per_rail and uplink_bandwidth_Bps <= 0:
        raise ConfigError("spines_per_rail needs the leaf-to-spine cables: give uplink (bandwidth)", "topology.uplink")
    rails = gpus_per_host
    b = _Builder()
    leaves = [[b.node(f"rail{r}.leaf{i}", "leaf", index=r * leaves_per_rail + i, rail=r, position=i)
               for i in range(leaves_per_rail)] for r in range(rails)]
    spines = [[b.node(f"rail{r}.spine{j}", "spine", index=r * spines_per_rail + j, rail=r)
               for j in range(spines_per_rail)] for r in range(rails)]
    for r in range(rails):
        for leaf, spine in itertools.product(leaves[r], spines[r]):
            for _ in range(uplinks_per_spine):
                b.duplex(leaf, spine, uplink_bandwidth_Bps, uplink_latency_s, "up", "down")
    model = nvswitch_node(gpus_per_host, gpus_per_host, intra_bandwidth_Bps, intra_latency_s,
                          forward_rails=forwarding)
    n_hosts = leaves_per_rail * hosts_per_leaf
    hosts, nic_ports, nic_profile = [], {}, {}
    for h in range(n_hosts):
        _gpus, nics, base = b.host(h, model)
        for r, node in enumerate(nics):
            leaf = leaves[r][h // hosts_per_leaf]
            up, down = b.duplex(node, leaf, nic.port_capacity_Bps, nic_latency_s, "nic_up", "nic_down")
            nic_ports[node] = [(up, leaf, down)]
            nic_profile[node] = nic
        hosts.append((model, h * gpus_per_host, base, nics))
    graph = b.graph
    rail_of = {node: r for r in range(rails) for node in (*leaves[r], *spines[r])}
    cables = {(u, v): data["links"] for u, v, data in graph.edges(data=True) if data["links"]}

    def switch_paths(a: int, z: int) -> list[tuple[int, ...]]:
        """Fewest-hop paths between two leaves: through each spine of their rail; none across rails."""
        if rail_of[a] != rail_of[z]:
            return []
        return [p for s in spines[rail_of[a]] for p in itertools.product(cables[a, s], cables[s, z])]

    leaf_down = hosts_per_leaf * nic.port_capacity_Bps
    leaf_up = spines_per_rail * uplinks_per_spine * uplink_bandwidth_Bps
    params = {
        "type": "rail_only", "rails": rails, "leaves_per_rail": leaves_per_rail, "spines_per_rail": spines_per_rail,
        "hosts_per_leaf": hosts_per_leaf, "gpus_per_host": gpus_per_host, "nics_per_host": gpus_per_host,
        "uplinks_per_spine": uplinks_per_spine, "forwarding": forwarding, "nic": nic.name,
        "nic_bandwidth_Bps": nic.port_capacity_Bps, "nic_ports": 1, "uplink_bandwidth_Bps": uplink_bandwidth_Bps,
        "intra_bandwidth_Bps": intra_bandwidth_Bps,
        **({"oversubscription": leaf_down / leaf_up} if leaf_up else {}),
    }
    topo = Topology(f"rail_only({rails} rails x {leaves_per_rail} leaves"
                    f"{f' x {spines_per_rail} spines' if spines_per_rail else ''}, {n_hosts} hosts x {gpus_per_host} "
                    "GPUs)", graph, compile_links(b.links), hosts, nic_ports, nic_profile, intra_overhead_s, params,
                    switch_path_fn=switch_paths)
    gpus = gpus_per_host

    def unreachable(src: int, dst: int) -> ConfigError:
        return ConfigError(
            f"GPU {src} (rail {src % gpus}) and GPU {dst} (rail {dst % gpus}) are on different rails of different "
            "hosts, and a rail-only fabric without forwarding has no path between rails; allowed: traffic inside "
            "a host or along one rail, or forwarding: true (through a GPU of the source host over NVLink)",
            "topology.forwarding")

    topo.unreachable = unreachable
    return topo

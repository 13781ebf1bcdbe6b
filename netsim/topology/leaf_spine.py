"""Builder of two-tier leaf-spine (folded Clos) fabrics with multi-GPU, multi-NIC hosts."""

from __future__ import annotations

from collections.abc import Mapping

from netsim.errors import ConfigError
from netsim.topology.node import nvswitch_node
from netsim.topology.topology import Topology, _Builder, compile_links


def leaf_spine(*, leaves: int, spines: int, hosts_per_leaf: int, gpus_per_host: int, nics_per_host: int,
               nic_bandwidth_Bps: float, nic_latency_s: float = 0.0, nic_overhead_s: float = 0.0,
               uplink_bandwidth_Bps: float, uplink_latency_s: float = 0.0, uplinks_per_spine: int = 1,
               intra_bandwidth_Bps: float, intra_latency_s: float = 0.0, intra_overhead_s: float = 0.0,
               rail_optimized: bool = False,
               nic_bandwidth_overrides: Mapping[tuple[int, int], float] | None = None) -> Topology:
    """Build a leaf-spine fabric.

    Every leaf connects to every spine with ``uplinks_per_spine`` parallel cables. There are
    ``leaves * hosts_per_leaf`` hosts; each has ``gpus_per_host`` GPUs joined by an intra-host
    switch (NVLink/NVSwitch-like: one link each way between every GPU and the switch) and
    ``nics_per_host`` NICs; GPU ``i`` of a host uses NIC ``i mod nics_per_host`` (rails).

    Wiring: by default all NICs of a host go to the host's leaf (``host // hosts_per_leaf``).
    With ``rail_optimized=True`` leaves form rail groups of ``nics_per_host`` leaves; NIC ``r`` of
    every host in group ``k`` goes to leaf ``k * nics_per_host + r`` (each leaf then serves
    ``hosts_per_leaf * nics_per_host`` hosts on one rail, with the same port count).

    Oversubscription follows from the numbers: NIC bandwidth into a leaf over its uplink bandwidth.

    Parameters
    ----------
    nic_bandwidth_overrides:
        ``{(host, nic): bandwidth_Bps}`` for individual slow or fast NICs.

    Examples
    --------
    >>> topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=1,
    ...                   nic_bandwidth_Bps=25e9, uplink_bandwidth_Bps=25e9, intra_bandwidth_Bps=900e9)
    >>> topo.n_gpus, len(topo.paths(0, 7))
    (8, 2)
    """
    for name, value in (("leaves", leaves), ("spines", spines), ("hosts_per_leaf", hosts_per_leaf),
                        ("gpus_per_host", gpus_per_host), ("nics_per_host", nics_per_host),
                        ("uplinks_per_spine", uplinks_per_spine)):
        if int(value) != value or value < 1:
            raise ConfigError(f"must be a positive integer, got {value!r}", f"topology.{name}")
    if rail_optimized and leaves % nics_per_host:
        raise ConfigError(f"rail-optimised wiring needs leaves ({leaves}) to be a multiple of "
                          f"nics_per_host ({nics_per_host})", "topology.rail_optimized")
    overrides = dict(nic_bandwidth_overrides or {})
    n_hosts = leaves * hosts_per_leaf
    for host, nic in overrides:
        if not (0 <= host < n_hosts and 0 <= nic < nics_per_host):
            raise ConfigError(f"NIC override ({host}, {nic}) is outside the fabric: hosts 0..{n_hosts - 1}, "
                              f"NICs 0..{nics_per_host - 1}", "topology.nic_overrides")

    b = _Builder()
    leaf_nodes = [b.node(f"leaf{i}", "leaf", index=i) for i in range(leaves)]
    spine_nodes = [b.node(f"spine{j}", "spine", index=j) for j in range(spines)]
    for leaf in leaf_nodes:
        for spine in spine_nodes:
            for _ in range(uplinks_per_spine):
                b.duplex(leaf, spine, uplink_bandwidth_Bps, uplink_latency_s, "up", "down")

    model = nvswitch_node(gpus_per_host, nics_per_host, intra_bandwidth_Bps, intra_latency_s)
    hosts = []
    nic_ports: dict[int, list[tuple[int, int, int]]] = {}
    nic_overhead: dict[int, float] = {}
    hosts_per_group = hosts_per_leaf * nics_per_host
    for h in range(n_hosts):
        first_gpu = h * gpus_per_host
        _gpus, nics, base = b.host(h, model)
        for r, nic in enumerate(nics):
            leaf_idx = (h // hosts_per_group) * nics_per_host + r if rail_optimized else h // hosts_per_leaf
            bw = overrides.get((h, r), nic_bandwidth_Bps)
            up, down = b.duplex(nic, leaf_nodes[leaf_idx], bw, nic_latency_s, "nic_up", "nic_down")
            nic_ports[nic] = [(up, leaf_nodes[leaf_idx], down)]
            nic_overhead[nic] = nic_overhead_s
        hosts.append((model, first_gpu, base, nics))

    leaf_down_Bps = hosts_per_leaf * nics_per_host * nic_bandwidth_Bps
    leaf_up_Bps = spines * uplinks_per_spine * uplink_bandwidth_Bps
    params = {
        "type": "leaf_spine", "leaves": leaves, "spines": spines, "hosts_per_leaf": hosts_per_leaf,
        "gpus_per_host": gpus_per_host, "nics_per_host": nics_per_host, "uplinks_per_spine": uplinks_per_spine,
        "rail_optimized": rail_optimized, "nic_bandwidth_Bps": nic_bandwidth_Bps,
        "uplink_bandwidth_Bps": uplink_bandwidth_Bps, "intra_bandwidth_Bps": intra_bandwidth_Bps,
        "oversubscription": leaf_down_Bps / leaf_up_Bps,
    }
    return Topology(f"leaf_spine({leaves}x{spines}, {n_hosts} hosts x {gpus_per_host} GPUs)", b.graph,
                    compile_links(b.links), hosts, nic_ports, nic_overhead, intra_overhead_s, params)

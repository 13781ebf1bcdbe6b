"""Builders of two-tier leaf-spine (folded Clos) fabrics with multi-GPU, multi-NIC hosts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from netsim.errors import ConfigError
from netsim.topology.nic import NicProfile, generic_nic
from netsim.topology.node import NodeModel, nvswitch_node
from netsim.topology.topology import Topology, _Builder, compile_links


@dataclass
class _Fabric:
    """What one leaf-spine contributed to a builder (several make a multi-cluster fabric)."""

    hosts: list = field(default_factory=list)
    nic_ports: dict = field(default_factory=dict)
    nic_profile: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    leaves: list = field(default_factory=list)  # switch node ids
    spines: list = field(default_factory=list)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if int(value) != value or value < 1:
            raise ConfigError(f"must be a positive integer, got {value!r}", f"topology.{name}")


def _add_leaf_spine(b: _Builder, *, prefix: str, first_host: int = 0, first_gpu: int = 0, leaves: int,
                    spines: int, hosts_per_leaf: int, gpus_per_host: int, nics_per_host: int, nic: NicProfile,
                    nic_latency_s: float, uplink_bandwidth_Bps: float, uplink_latency_s: float, uplinks_per_spine: int,
                    intra_bandwidth_Bps: float, intra_latency_s: float, rail_optimized: bool,
                    host_nics: Mapping[int, NicProfile], nic_bandwidth_overrides: Mapping[tuple[int, int], float],
                    extra_nics: int = 0, host_ids: Sequence[int] | None = None,
                    gpu_firsts: Sequence[int] | None = None, planes: int = 1) -> _Fabric:
    """Add one leaf-spine (its switches, hosts and cables) to ``b``; hosts numbered from ``first_host``.

    ``host_ids`` / ``gpu_firsts`` (one per host of this fabric) replace that numbering: local host
    ``h`` is named and numbered ``host_ids[h]`` and its first GPU id is ``gpu_firsts[h]`` (interleaved
    multi-cluster numbering). Wiring, ``host_nics`` and ``nic_bandwidth_overrides`` stay in local
    host indices either way. ``planes`` > 1 splits the spines into that many planes (contiguous
    blocks) and cables leaf ``l`` only to plane ``l mod planes``: with NICs of ``planes`` ports (one
    to each leaf of its leaf set), every NIC has one port in each plane and no link joins planes.
    """
    _check_positive(leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf, gpus_per_host=gpus_per_host,
                    nics_per_host=nics_per_host, uplinks_per_spine=uplinks_per_spine)
    if rail_optimized and leaves % nics_per_host:
        raise ConfigError(f"rail-optimised wiring needs leaves ({leaves}) to be a multiple of "
                          f"nics_per_host ({nics_per_host})", "topology.rail_optimized")
    n_hosts = leaves * hosts_per_leaf
    if host_ids is None:
        host_ids = range(first_host, first_host + n_hosts)
    if gpu_firsts is None:
        gpu_firsts = range(first_gpu, first_gpu + n_hosts * gpus_per_host, gpus_per_host)
    if len(host_ids) != n_hosts or len(gpu_firsts) != n_hosts:
        raise ValueError(f"host_ids ({len(host_ids)}) and gpu_firsts ({len(gpu_firsts)}) need one entry per host "
                         f"({n_hosts})")
    for host, r in nic_bandwidth_overrides:
        if not (0 <= host < n_hosts and 0 <= r < nics_per_host):
            raise ConfigError(f"NIC override ({host}, {r}) is outside the fabric: hosts 0..{n_hosts - 1}, "
                              f"NICs 0..{nics_per_host - 1}", "topology.nic_overrides")
    for host in host_nics:
        if not 0 <= host < n_hosts:
            raise ConfigError(f"host {host} is outside the fabric (hosts 0..{n_hosts - 1})", "topology.host_nics")
    max_ports = max([nic.ports, *(p.ports for p in host_nics.values())])
    if max_ports > 1 and (leaves % max_ports or rail_optimized):
        raise ConfigError(f"{max_ports}-port NICs go to {max_ports} different leaves: leaves ({leaves}) must be a "
                          "multiple of the port count, without rail-optimised wiring", "topology.nic")

    if planes > 1 and (max_ports != planes or min([nic.ports, *(p.ports for p in host_nics.values())]) != planes
                       or spines % planes):
        raise ConfigError(f"{planes} planes need NICs of {planes} ports each (one per plane; these have "
                          f"{max_ports}) and spines divisible by {planes} (got {spines})", "topology.planes")
    per_plane = spines // planes
    leaf_nodes = [b.node(f"{prefix}leaf{i}", "leaf", index=i, **({"plane": i % planes} if planes > 1 else {}))
                  for i in range(leaves)]
    spine_nodes = [b.node(f"{prefix}spine{j}", "spine", index=j, **({"plane": j // per_plane} if planes > 1 else {}))
                   for j in range(spines)]
    for li, leaf in enumerate(leaf_nodes):
        for sj, spine in enumerate(spine_nodes):
            if sj // per_plane != li % planes:
                continue
            for _ in range(uplinks_per_spine):
                b.duplex(leaf, spine, uplink_bandwidth_Bps, uplink_latency_s, "up", "down")

    model: NodeModel = nvswitch_node(gpus_per_host, nics_per_host, intra_bandwidth_Bps, intra_latency_s,
                                     extra_nics=extra_nics)
    out = _Fabric(leaves=leaf_nodes, spines=spine_nodes)
    hosts_per_group = hosts_per_leaf * nics_per_host
    for h in range(n_hosts):
        profile = host_nics.get(h, nic)
        _gpus, nics, base = b.host(host_ids[h], model, prefix=prefix)
        for r, node in enumerate(nics[:nics_per_host]):
            home = (h // hosts_per_group) * nics_per_host + r if rail_optimized else h // hosts_per_leaf
            cap = nic_bandwidth_overrides.get((h, r), profile.port_capacity_Bps)
            ports = []
            for k in range(profile.ports):  # port k of a multi-port NIC goes to the k-th leaf of its leaf set
                leaf = (home // profile.ports) * profile.ports + (home % profile.ports + k) % profile.ports
                up, down = b.duplex(node, leaf_nodes[leaf], cap, nic_latency_s, "nic_up", "nic_down")
                ports.append((up, leaf_nodes[leaf], down))
            out.nic_ports[node] = ports
            out.nic_profile[node] = profile
        out.hosts.append((model, gpu_firsts[h], base, nics))

    leaf_down_Bps = hosts_per_leaf * nics_per_host * nic.ports * nic.port_capacity_Bps
    leaf_up_Bps = spines * uplinks_per_spine * uplink_bandwidth_Bps
    out.params = {
        "type": "leaf_spine", "leaves": leaves, "spines": spines, "hosts_per_leaf": hosts_per_leaf,
        "gpus_per_host": gpus_per_host, "nics_per_host": nics_per_host, "uplinks_per_spine": uplinks_per_spine,
        "rail_optimized": rail_optimized, "nic": nic.name, "nic_bandwidth_Bps": nic.port_capacity_Bps,
        "nic_ports": nic.ports, "uplink_bandwidth_Bps": uplink_bandwidth_Bps,
        "intra_bandwidth_Bps": intra_bandwidth_Bps,
        "oversubscription": leaf_down_Bps / (leaf_up_Bps / planes),  # a leaf reaches its plane's spines only
        "planes": planes,
    }
    return out


def leaf_spine(*, leaves: int, spines: int, hosts_per_leaf: int, gpus_per_host: int, nics_per_host: int,
               nic_bandwidth_Bps: float | None = None, nic_latency_s: float = 0.0, nic_overhead_s: float = 0.0,
               uplink_bandwidth_Bps: float, uplink_latency_s: float = 0.0, uplinks_per_spine: int = 1,
               intra_bandwidth_Bps: float, intra_latency_s: float = 0.0, intra_overhead_s: float = 0.0,
               rail_optimized: bool = False, nic: NicProfile | None = None,
               host_nics: Mapping[int, NicProfile] | None = None,
               nic_bandwidth_overrides: Mapping[tuple[int, int], float] | None = None, planes: int = 1) -> Topology:
    """Build a leaf-spine fabric.

    Every leaf connects to every spine with ``uplinks_per_spine`` parallel cables. There are
    ``leaves * hosts_per_leaf`` hosts; each has ``gpus_per_host`` GPUs joined by an intra-host
    switch (NVLink/NVSwitch-like: one link each way between every GPU and the switch) and
    ``nics_per_host`` NICs; GPU ``i`` of a host uses NIC ``i mod nics_per_host`` (rails).

    Wiring: by default all NICs of a host go to the host's leaf (``host // hosts_per_leaf``).
    With ``rail_optimized=True`` leaves form rail groups of ``nics_per_host`` leaves; NIC ``r`` of
    every host in group ``k`` goes to leaf ``k * nics_per_host + r``. A NIC with P ports
    (bonded dual-ToR, ``NicProfile.ports``) sends port k to leaf ``(L // P) * P + (L + k) % P`` of
    its home leaf L, i.e. to the P leaves of its leaf set.

    NICs: ``nic`` is the default profile (else a generic RDMA NIC of ``nic_bandwidth_Bps`` with
    per-message overhead ``nic_overhead_s``); ``host_nics`` gives other hosts other profiles (mixed
    NICs in one fabric). A NIC link's capacity is its profile's line rate x efficiency.
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
    if nic is None:
        if nic_bandwidth_Bps is None:
            raise ConfigError("give a NIC profile or a NIC bandwidth", "topology.nic")
        nic = generic_nic(nic_bandwidth_Bps, nic_overhead_s)
    b = _Builder()
    fab = _add_leaf_spine(b, prefix="", first_host=0, first_gpu=0, leaves=leaves, spines=spines,
                          hosts_per_leaf=hosts_per_leaf, gpus_per_host=gpus_per_host, nics_per_host=nics_per_host,
                          nic=nic, nic_latency_s=nic_latency_s, uplink_bandwidth_Bps=uplink_bandwidth_Bps,
                          uplink_latency_s=uplink_latency_s, uplinks_per_spine=uplinks_per_spine,
                          intra_bandwidth_Bps=intra_bandwidth_Bps, intra_latency_s=intra_latency_s,
                          rail_optimized=rail_optimized, host_nics=dict(host_nics or {}),
                          nic_bandwidth_overrides=dict(nic_bandwidth_overrides or {}), planes=planes)
    n_hosts = leaves * hosts_per_leaf
    return Topology(f"leaf_spine({leaves}x{spines}, {n_hosts} hosts x {gpus_per_host} GPUs)", b.graph,
                    compile_links(b.links), fab.hosts, fab.nic_ports, fab.nic_profile, intra_overhead_s, fab.params)

"""Multi-cluster fabrics (Holmes): leaf-spine clusters with their own NICs, joined by an Ethernet network."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from netsim.errors import ConfigError
from netsim.topology.leaf_spine import _add_leaf_spine
from netsim.topology.nic import NicProfile, nic_profile
from netsim.topology.topology import Topology, _Builder, compile_links


def multi_cluster(clusters: Sequence[Mapping[str, Any]], *, interconnect_Bps: float, interconnect_latency_s: float = 0.0,
                  tcp_nic: NicProfile | None = None, eth_latency_s: float = 0.0,
                  intra_overhead_s: float = 0.0) -> Topology:
    """Several leaf-spine clusters, each with its own NIC profile, plus a front-end Ethernet network.

    Every host also has one Ethernet NIC (``tcp_nic``, default ``eth-tcp-25``) on its cluster's
    Ethernet switch; each cluster's Ethernet switch connects to one core switch with a cable of
    ``interconnect_Bps`` (the inter-cluster network). Transport rule: GPUs whose RDMA NICs are of
    one family use their cluster's fabric; any other pair talks TCP over the Ethernet network,
    with the TCP profile's capacity (line rate x efficiency) and per-message latency.

    Parameters
    ----------
    clusters:
        One mapping per cluster: ``name`` plus the keyword arguments of
        :func:`netsim.topology.leaf_spine` (``leaves``, ``spines``, ``hosts_per_leaf``,
        ``gpus_per_host``, ``nics_per_host``, ``nic`` (a NicProfile), ``uplink_bandwidth_Bps``, ...).

    Examples
    --------
    >>> from netsim.topology.nic import nic_profile
    >>> ib = dict(name="ib", leaves=1, spines=1, hosts_per_leaf=4, gpus_per_host=8, nics_per_host=4,
    ...           nic=nic_profile("ib-hdr-200"), uplink_bandwidth_Bps=100e9, intra_bandwidth_Bps=300e9)
    >>> roce = dict(ib, name="roce", nics_per_host=2, nic=nic_profile("roce-200"))
    >>> t = multi_cluster([ib, roce], interconnect_Bps=25e9 / 8 * 8)
    >>> t.n_gpus, t.transport(0, 8).name, t.transport(0, 32).name
    (64, 'ib-hdr-200', 'eth-tcp-25')
    """
    if not clusters:
        raise ConfigError("needs at least one cluster", "topology.clusters")
    tcp = tcp_nic or nic_profile("eth-tcp-25")
    b = _Builder()
    core = b.node("eth-core", "switch")
    hosts, nic_ports, profiles, tcp_local, params = [], {}, {}, {}, []
    names = set()
    for i, spec in enumerate(clusters):
        spec = dict(spec)
        name = spec.pop("name", f"c{i}")
        if name in names:
            raise ConfigError(f"cluster name {name!r} used twice", f"topology.clusters.{i}.name")
        names.add(name)
        defaults = dict(nic_latency_s=0.0, uplink_latency_s=0.0, uplinks_per_spine=1, intra_latency_s=0.0,
                        rail_optimized=False, host_nics={}, nic_bandwidth_overrides={})
        first_host, first_gpu = len(hosts), sum(m.n_gpus for m, *_ in hosts)
        fab = _add_leaf_spine(b, prefix=f"{name}.", first_host=first_host, first_gpu=first_gpu,
                              extra_nics=1, **{**defaults, **spec})
        tor = b.node(f"{name}.eth", "switch")
        b.duplex(tor, core, interconnect_Bps, interconnect_latency_s, "up", "down")
        for offset, (model, gpu0, base, nics) in enumerate(fab.hosts):
            eth = nics[-1]
            up, down = b.duplex(eth, tor, tcp.port_capacity_Bps, eth_latency_s, "nic_up", "nic_down")
            nic_ports[eth] = [(up, tor, down)]
            profiles[eth] = tcp
            tcp_local[first_host + offset] = model.n_nics - 1
        hosts += fab.hosts
        nic_ports.update(fab.nic_ports)
        profiles.update(fab.nic_profile)
        params.append({"name": name, **fab.params})
    summary = {"type": "multi_cluster", "clusters": params, "interconnect_Bps": interconnect_Bps,
               "tcp_nic": tcp.name}
    label = " + ".join(f"{p['name']}({p['nic']})" for p in params)
    return Topology(f"multi_cluster({label})", b.graph, compile_links(b.links), hosts, nic_ports, profiles,
                    intra_overhead_s, summary, tcp_nic=tcp_local)

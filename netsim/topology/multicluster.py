"""Multi-cluster fabrics (Holmes): leaf-spine clusters with their own NICs, joined by an Ethernet network."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from netsim.errors import ConfigError
from netsim.topology.leaf_spine import _add_leaf_spine, _check_positive
from netsim.topology.nic import NicProfile, nic_profile
from netsim.topology.topology import Topology, _Builder, compile_links

NUMBERINGS = ("blocked", "interleaved")


def host_order(sizes: Sequence[int], numbering: str = "blocked") -> list[tuple[int, int]]:
    """``(cluster, local host)`` of every global host, in global host order.

    ``blocked``: cluster 0's hosts, then cluster 1's, ...; ``interleaved``: round robin over the
    clusters (one host of each in turn), skipping clusters that have run out of hosts.

    Examples
    --------
    >>> host_order([3, 1], "blocked")
    [(0, 0), (0, 1), (0, 2), (1, 0)]
    >>> host_order([3, 1], "interleaved")
    [(0, 0), (1, 0), (0, 1), (0, 2)]
    """
    if numbering == "blocked":
        return [(c, h) for c, n in enumerate(sizes) for h in range(n)]
    if numbering == "interleaved":
        return [(c, h) for h in range(max(sizes, default=0)) for c, n in enumerate(sizes) if h < n]
    raise _numbering_error(numbering)


def _numbering_error(numbering: object) -> ConfigError:
    return ConfigError(f"unknown host numbering {numbering!r}; expected one of {', '.join(NUMBERINGS)}",
                       "topology.numbering")


def _cluster_shape(spec: Mapping[str, Any], i: int) -> tuple[int, int]:
    """(hosts, GPUs per host) of cluster ``i``, checked as the leaf-spine builder checks them."""
    missing = [k for k in ("leaves", "hosts_per_leaf", "gpus_per_host") if k not in spec]
    if missing:
        raise ConfigError(f"missing {', '.join(missing)}", f"topology.clusters.{i}")
    _check_positive(leaves=spec["leaves"], hosts_per_leaf=spec["hosts_per_leaf"],
                    gpus_per_host=spec["gpus_per_host"])
    return int(spec["leaves"]) * int(spec["hosts_per_leaf"]), int(spec["gpus_per_host"])


def multi_cluster(clusters: Sequence[Mapping[str, Any]], *, interconnect_Bps: float, interconnect_latency_s: float = 0.0,
                  tcp_nic: NicProfile | None = None, eth_latency_s: float = 0.0,
                  intra_overhead_s: float = 0.0, numbering: str = "blocked") -> Topology:
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
        ``host_nics`` and ``nic_bandwidth_overrides`` keys are host indices inside the cluster.
    numbering:
        Global host order (see :func:`host_order`): ``blocked`` (cluster 0's hosts first, then
        cluster 1's, ...) or ``interleaved`` (round robin over the clusters, as a hostfile that
        lists the clusters' nodes alternately: Holmes' naive mixed placement). GPU ids follow the
        host order (a host's GPUs are contiguous), node names carry the global host number.

    Examples
    --------
    >>> from netsim.topology.nic import nic_profile
    >>> ib = dict(name="ib", leaves=1, spines=1, hosts_per_leaf=4, gpus_per_host=8, nics_per_host=4,
    ...           nic=nic_profile("ib-hdr-200"), uplink_bandwidth_Bps=100e9, intra_bandwidth_Bps=300e9)
    >>> roce = dict(ib, name="roce", nics_per_host=2, nic=nic_profile("roce-200"))
    >>> t = multi_cluster([ib, roce], interconnect_Bps=25e9 / 8 * 8)
    >>> t.n_gpus, t.transport(0, 8).name, t.transport(0, 32).name
    (64, 'ib-hdr-200', 'eth-tcp-25')
    >>> t = multi_cluster([ib, roce], interconnect_Bps=25e9, numbering="interleaved")
    >>> t.transport(0, 8).name, t.transport(0, 16).name, t.node_name(t.nic_of(8))
    ('eth-tcp-25', 'ib-hdr-200', 'roce.h1.nic0')
    """
    if numbering not in NUMBERINGS:
        raise _numbering_error(numbering)
    if not clusters:
        raise ConfigError("needs at least one cluster", "topology.clusters")
    shapes = [_cluster_shape(spec, i) for i, spec in enumerate(clusters)]
    order = host_order([n for n, _ in shapes], numbering)
    host_ids: list[list[int]] = [[0] * n for n, _ in shapes]
    gpu_firsts: list[list[int]] = [[0] * n for n, _ in shapes]
    n_gpus = 0
    for k, (c, h) in enumerate(order):  # GPU ids are cumulative over the global host order
        host_ids[c][h], gpu_firsts[c][h] = k, n_gpus
        n_gpus += shapes[c][1]
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
        fab = _add_leaf_spine(b, prefix=f"{name}.", host_ids=host_ids[i], gpu_firsts=gpu_firsts[i],
                              extra_nics=1, **{**defaults, **spec})
        tor = b.node(f"{name}.eth", "switch")
        b.duplex(tor, core, interconnect_Bps, interconnect_latency_s, "up", "down")
        for offset, (model, gpu0, base, nics) in enumerate(fab.hosts):
            eth = nics[-1]
            up, down = b.duplex(eth, tor, tcp.port_capacity_Bps, eth_latency_s, "nic_up", "nic_down")
            nic_ports[eth] = [(up, tor, down)]
            profiles[eth] = tcp
            tcp_local[host_ids[i][offset]] = model.n_nics - 1
        hosts += zip(host_ids[i], fab.hosts)
        nic_ports.update(fab.nic_ports)
        profiles.update(fab.nic_profile)
        params.append({"name": name, **fab.params})
    summary = {"type": "multi_cluster", "clusters": params, "interconnect_Bps": interconnect_Bps,
               "tcp_nic": tcp.name, "numbering": numbering}
    label = " + ".join(f"{p['name']}({p['nic']})" for p in params)
    if numbering != "blocked":
        label += f", {numbering} hosts"
    hosts = [host for _k, host in sorted(hosts, key=lambda kh: kh[0])]
    return Topology(f"multi_cluster({label})", b.graph, compile_links(b.links), hosts, nic_ports, profiles,
                    intra_overhead_s, summary, tcp_nic=tcp_local)

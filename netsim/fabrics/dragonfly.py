"""Dragonfly fabrics: ``topology: {type: dragonfly, ...}`` (groups of all-to-all switches joined by
global cables) and the OLCF Frontier preset ``topology: {type: frontier, groups: 74}``.

The specs, the builders (:mod:`netsim.topology.dragonfly`) and the counts in closed form.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from netsim.fabrics.base import FABRICS, FabricKind, FabricShape
from netsim.spectypes import MAX_CABLES, MAX_COUNT, Bandwidth, LinkSpec, Time, _check_size, _count, _Spec
from netsim.topology import Topology
from netsim.topology.dragonfly import dragonfly, frontier


class CableSpec(_Spec):
    """A switch-to-switch cable class: bandwidth and propagation latency."""

    bandwidth: Bandwidth
    latency: Time = 0.0


class DragonflySpec(_Spec):
    """``topology: {type: dragonfly, ...}``; see :func:`netsim.topology.dragonfly.dragonfly`."""

    type: Literal["dragonfly"]
    groups: _count(MAX_COUNT)
    switches_per_group: _count(MAX_COUNT)
    hosts_per_switch: _count(MAX_COUNT)
    global_links_per_switch: _count(MAX_CABLES) | None = None
    global_links_between_groups: _count(MAX_CABLES) | None = None
    link: CableSpec
    global_link: CableSpec | None = None
    switch_latency: Time = 0.0
    nic: LinkSpec | None = None
    arrangement: Literal["palmtree", "round_robin"] = "palmtree"

    @model_validator(mode="after")
    def _size(self):
        g, a = self.groups, self.switches_per_group
        cables = (self.global_links_between_groups or max(1, a * (self.global_links_per_switch or 1) // max(g - 1, 1)))
        _check_size(g * a * self.hosts_per_switch, 2 * (g * a * a + g * g * cables + g * a * self.hosts_per_switch))
        return self


class FrontierSpec(_Spec):
    """``topology: {type: frontier, groups: 74}``: the OLCF Frontier preset."""

    type: Literal["frontier"]
    groups: _count(MAX_COUNT) = 74
    nics_on_switches: Literal[1, 4] = 4
    switch_latency: Time = 350e-9
    cable_latency: Time = 0.0
    global_links_between_groups: _count(MAX_CABLES) = 4
    link_bandwidth: Bandwidth = 25e9

    @model_validator(mode="after")
    def _size(self):
        _check_size(self.groups * 128 * 8, self.groups * 6_400 + self.groups ** 2 * 4 * 2)
        return self


def build_dragonfly(t: DragonflySpec) -> Topology:
    """The dragonfly of ``t``."""
    glob = t.global_link or t.link
    nic = t.nic or LinkSpec(bandwidth=t.link.bandwidth)  # a plain NIC as fast as the cables
    return dragonfly(groups=t.groups, switches_per_group=t.switches_per_group, hosts_per_switch=t.hosts_per_switch,
                     global_links_per_switch=t.global_links_per_switch,
                     global_links_between_groups=t.global_links_between_groups, link_bandwidth_Bps=t.link.bandwidth,
                     local_latency_s=t.link.latency, global_latency_s=glob.latency, switch_latency_s=t.switch_latency,
                     nic_bandwidth_Bps=nic.bandwidth, nic_latency_s=nic.latency, nic_overhead_s=nic.overhead,
                     arrangement=t.arrangement)


def build_frontier(t: FrontierSpec) -> Topology:
    """Frontier (or the first ``t.groups`` of its groups)."""
    return frontier(groups=t.groups, nics_on_switches=t.nics_on_switches, link_bandwidth_Bps=t.link_bandwidth,
                    switch_latency_s=t.switch_latency, cable_latency_s=t.cable_latency,
                    global_links_between_groups=t.global_links_between_groups)


def _dragonfly(groups: int, a: int, p: int, per_pair: int, gpus_per_host: int, nics_per_host: int,
               host_links: int, local_hops: int) -> FabricShape:
    """:func:`netsim.topology.dragonfly.dragonfly`: ``groups`` all-to-all groups of ``a`` switches."""
    hosts = groups * a * p
    return FabricShape(hosts=hosts, gpus=hosts * gpus_per_host, switches=groups * a,
                       nodes=groups * a + hosts * (gpus_per_host + nics_per_host),
                       links=groups * a * (a - 1) + per_pair * groups * (groups - 1)
                       + hosts * (host_links + 2 * nics_per_host),
                       gpus_per_host=gpus_per_host, gpus_per_domain=a * p * gpus_per_host, domains=groups,
                       gpus_per_nic=-(-gpus_per_host // nics_per_host), paths_host=4 if host_links else 1,
                       # fewest-hop paths between groups: at most one per cable between them
                       paths_near=1, paths_far=per_pair, path_links=2 + 3 + 2 * local_hops,
                       union_links=2 + 2 * local_hops + 3 * per_pair, uplinks=per_pair * max(groups - 1, 1))


def shape_dragonfly(t: DragonflySpec) -> FabricShape:
    g, a = t.groups, t.switches_per_group
    per_pair = t.global_links_between_groups or max(1, a * (t.global_links_per_switch or 1) // max(g - 1, 1))
    return _dragonfly(g, a, t.hosts_per_switch, per_pair, 1, 1, 0, 0)


def shape_frontier(t: FrontierSpec) -> FabricShape:
    # 128 MI250X nodes of 8 GCDs and 4 NICs per group; 16 Infinity Fabric + PCIe cables per node
    return _dragonfly(t.groups, 32, 4, t.global_links_between_groups, 8, 4, 32, 2)


FABRICS.add(FabricKind("dragonfly", DragonflySpec, build_dragonfly, shape_dragonfly,
                            "dragonfly: groups of all-to-all switches, every pair of groups joined by global cables"))
FABRICS.add(FabricKind("frontier", FrontierSpec, build_frontier, shape_frontier,
                            "the OLCF Frontier preset: a dragonfly of 74 groups of 128 MI250X nodes"))

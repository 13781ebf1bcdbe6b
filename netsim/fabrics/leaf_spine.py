"""Two-tier leaf-spine (Clos) fabrics: ``topology: {type: leaf_spine, ...}``.

The spec, the builder (:func:`netsim.topology.leaf_spine`) and the counts in closed form.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from netsim.fabrics.base import FABRICS, FabricKind, FabricShape
from netsim.spectypes import (
    MAX_COUNT,
    MAX_PER_HOST,
    HostNics,
    LinkSpec,
    Nic,
    NicOverride,
    UplinkSpec,
    _check_size,
    _count,
    _Spec,
)
from netsim.topology import Topology, leaf_spine


class LeafSpineSpec(_Spec):
    """``topology: {type: leaf_spine, ...}``; see :func:`netsim.topology.leaf_spine`."""

    type: Literal["leaf_spine"]
    leaves: _count(MAX_COUNT)
    spines: _count(MAX_COUNT)
    hosts_per_leaf: _count(MAX_COUNT)
    gpus_per_host: _count(MAX_PER_HOST) = 8
    nics_per_host: _count(MAX_PER_HOST) = 8
    nic: Nic
    uplink: UplinkSpec
    intra_host: LinkSpec
    rail_optimized: bool = False
    nic_overrides: list[NicOverride] = []
    host_nics: list[HostNics] = []
    planes: _count(8) = 1

    @model_validator(mode="after")
    def _size(self):
        hosts = self.leaves * self.hosts_per_leaf
        check_host_nics(self.host_nics, hosts)
        _check_size(hosts * self.gpus_per_host,
                    2 * (hosts * (self.gpus_per_host + 2 * self.nics_per_host) + self.leaves * self.spines * self.uplink.count))
        return self


def check_host_nics(entries: list[HostNics], hosts: int) -> None:
    """Every ``host_nics`` range lies inside the fabric's ``hosts``."""
    for entry in entries:
        first, last = entry.hosts
        if not first <= last < hosts:
            raise ValueError(f"host_nics range {entry.hosts} must satisfy first <= last < {hosts} (the host count)")


def host_nic_map(entries: list[HostNics]) -> dict:
    """``host_nics`` ranges as ``{host: NicProfile}`` (later ranges win)."""
    out = {}
    for entry in entries:
        first, last = entry.hosts
        out.update({h: entry.nic.resolve() for h in range(first, last + 1)})
    return out


def _leaf_spine_args(t) -> dict:
    """Keyword arguments of the leaf-spine builders from a LeafSpineSpec."""
    host_nics = host_nic_map(t.host_nics)
    return dict(
        leaves=t.leaves, spines=t.spines, hosts_per_leaf=t.hosts_per_leaf, gpus_per_host=t.gpus_per_host,
        nics_per_host=t.nics_per_host, nic=t.nic.resolve(), nic_latency_s=t.nic.latency,
        uplink_bandwidth_Bps=t.uplink.bandwidth, uplink_latency_s=t.uplink.latency, uplinks_per_spine=t.uplink.count,
        intra_bandwidth_Bps=t.intra_host.bandwidth, intra_latency_s=t.intra_host.latency,
        rail_optimized=t.rail_optimized, host_nics=host_nics,
        nic_bandwidth_overrides={(o.host, o.nic): o.bandwidth for o in t.nic_overrides}, planes=t.planes)


def build(t: LeafSpineSpec) -> Topology:
    """The leaf-spine fabric of ``t``."""
    return leaf_spine(**_leaf_spine_args(t), intra_overhead_s=t.intra_host.overhead)



def _painted(first_default: int, n: int, ranges: list[tuple[int, int, int]]) -> int:
    """Sum over hosts ``0..n-1`` of a value that ``ranges`` [(first, last, value), ...] override in order."""
    cuts = sorted({0, n, *(a for a, _, _ in ranges), *(b + 1 for _, b, _ in ranges)})
    total = 0
    for lo, hi in zip(cuts, cuts[1:]):
        if lo >= n:
            break
        value = first_default
        for a, b, v in ranges:
            if a <= lo and hi - 1 <= b:
                value = v
        total += value * (min(hi, n) - lo)
    return total


def _ports(nic) -> int:
    """Ports of a NIC spec (its override, else its built-in profile's, else one)."""
    from netsim.topology.nic import BUILTIN_NICS
    if nic.ports is not None:
        return nic.ports
    return BUILTIN_NICS[nic.profile].ports if nic.profile in BUILTIN_NICS else 1


def shape(t: LeafSpineSpec, extra_nics: int = 0) -> FabricShape:
    """:func:`netsim.topology.leaf_spine`: leaves x spines x count uplinks, hosts of an NVSwitch model."""
    hosts = t.leaves * t.hosts_per_leaf
    ports = _ports(t.nic)
    ranges = [(e.hosts[0], e.hosts[1], _ports(e.nic)) for e in t.host_nics]
    port_sum = _painted(ports, hosts, ranges)
    p = max([ports, *(v for *_, v in ranges)])
    c, s = t.uplink.count, t.spines // t.planes  # spines a leaf reaches
    links = 2 * t.leaves * s * c + hosts * 2 * t.gpus_per_host + 2 * t.nics_per_host * port_sum
    pairs = p if t.planes > 1 else p * p  # port pairs with a path: one per plane, or every pair
    # Port k of a P-port NIC goes to the k-th leaf of its set of P leaves, so pairs of one set are near.
    domain = t.gpus_per_host if t.rail_optimized else t.hosts_per_leaf * t.gpus_per_host * p
    return FabricShape(hosts=hosts, gpus=hosts * t.gpus_per_host, switches=t.leaves + t.spines,
                       nodes=t.leaves + t.spines + hosts * (t.gpus_per_host + t.nics_per_host + extra_nics + 1),
                       links=links, gpus_per_host=t.gpus_per_host, gpus_per_domain=domain,
                       domains=max(1, t.leaves // p), gpus_per_nic=-(-t.gpus_per_host // t.nics_per_host),
                       paths_host=1, paths_near=p, paths_far=pairs * s * c * c, path_links=4,
                       union_links=2 * p * (1 + s * c), uplinks=s * c * p)


FABRICS.add(FabricKind("leaf_spine", LeafSpineSpec, build, shape,
                            "two-tier leaf-spine: hosts of GPUs and NICs under leaves, every leaf cabled to every spine"))

"""Rail-only fabrics: ``topology: {type: rail_only, ...}`` (a Clos per rail, no spine joining rails).

The spec, the builder (:func:`netsim.topology.rail_only.rail_only`) and the counts in closed form.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from netsim.fabrics.base import FABRICS, FabricKind, FabricShape
from netsim.fabrics.leaf_spine import _ports
from netsim.spectypes import (
    MAX_COUNT,
    MAX_PER_HOST,
    LinkSpec,
    Nic,
    UplinkSpec,
    _check_size,
    _count,
    _FieldError,
    _Spec,
)
from netsim.topology import Topology
from netsim.topology.rail_only import rail_only


class RailOnlySpec(_Spec):
    """``topology: {type: rail_only, ...}``; see :func:`netsim.topology.rail_only.rail_only`."""

    type: Literal["rail_only"]
    leaves_per_rail: _count(MAX_COUNT) = 1
    hosts_per_leaf: _count(MAX_COUNT)
    spines_per_rail: _count(MAX_COUNT, 0) = 0
    gpus_per_host: _count(MAX_PER_HOST) = 8
    nic: Nic
    uplink: UplinkSpec | None = None
    intra_host: LinkSpec
    forwarding: bool = True

    @model_validator(mode="after")
    def _size(self):
        if _ports(self.nic) != 1:
            raise _FieldError(f"a rail-only fabric cables each GPU's NIC to its rail with one port; this NIC has "
                              f"{_ports(self.nic)}", "nic")
        if self.leaves_per_rail > 1 and not self.spines_per_rail:
            raise _FieldError(f"a rail of {self.leaves_per_rail} leaves needs spines to join them: give "
                              "spines_per_rail >= 1 (and uplink), or one leaf per rail", "spines_per_rail")
        if self.spines_per_rail and self.uplink is None:
            raise _FieldError("spines_per_rail needs the leaf-to-spine cables: give uplink: {bandwidth: ...}",
                              "uplink")
        if self.uplink is not None and not self.spines_per_rail:
            raise _FieldError("uplink describes leaf-to-spine cables, but there are no spines (spines_per_rail: 0)",
                              "uplink")
        hosts = self.leaves_per_rail * self.hosts_per_leaf
        cables = self.gpus_per_host * self.leaves_per_rail * self.spines_per_rail * (self.uplink.count if self.uplink
                                                                                     else 0)
        _check_size(hosts * self.gpus_per_host, 2 * (hosts * 2 * self.gpus_per_host + cables))
        return self


def build(t: RailOnlySpec) -> Topology:
    """The rail-only fabric of ``t``."""
    up = t.uplink
    return rail_only(
        leaves_per_rail=t.leaves_per_rail, hosts_per_leaf=t.hosts_per_leaf, gpus_per_host=t.gpus_per_host,
        nic=t.nic.resolve(), nic_latency_s=t.nic.latency, spines_per_rail=t.spines_per_rail,
        uplink_bandwidth_Bps=up.bandwidth if up else 0.0, uplink_latency_s=up.latency if up else 0.0,
        uplinks_per_spine=up.count if up else 1, intra_bandwidth_Bps=t.intra_host.bandwidth,
        intra_latency_s=t.intra_host.latency, intra_overhead_s=t.intra_host.overhead, forwarding=t.forwarding)


def shape(t: RailOnlySpec, extra_nics: int = 0) -> FabricShape:
    """Counts in closed form: ``gpus_per_host`` rails of leaves (and spines), one NIC per GPU."""
    g, leaves, s = t.gpus_per_host, t.leaves_per_rail, t.spines_per_rail
    c = t.uplink.count if t.uplink else 0
    hosts = leaves * t.hosts_per_leaf
    return FabricShape(
        hosts=hosts, gpus=hosts * g, switches=g * (leaves + s),
        nodes=g * (leaves + s) + hosts * (2 * g + extra_nics + 1), links=2 * g * leaves * s * c + 4 * hosts * g,
        gpus_per_host=g, gpus_per_domain=t.hosts_per_leaf * g, domains=leaves, gpus_per_nic=1,
        paths_host=1, paths_near=1, paths_far=max(1, s * c * c), path_links=8,
        union_links=4 + 2 * (1 + s * c), uplinks=max(1, s * c))


FABRICS.add(FabricKind("rail_only", RailOnlySpec, build, shape,
                       "rail-only: a leaf (or leaf-spine) per rail, no spine between rails; traffic between rails is "
                       "forwarded over NVLink inside a host"))

"""Three-tier Clos fabrics with pods: ``topology: {type: clos3, ...}`` (leaf -> spine per pod -> core).

The spec, the builder (:func:`netsim.topology.clos3.clos3`) and the counts in closed form. The core
tier is given by its switch count or by the oversubscription wanted between a pod's spines and the
core (``core: {oversubscription: 7}``): a spine then gets down-bandwidth / 7 of core cables, which
must be a whole number.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import model_validator

from netsim.fabrics.base import FABRICS, FabricKind, FabricShape
from netsim.fabrics.leaf_spine import _ports, check_host_nics, host_nic_map
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
from netsim.topology import Topology
from netsim.topology.clos3 import clos3
from netsim.units import format_bandwidth


class CoreSpec(UplinkSpec):
    """The core tier: ``count`` cables between a spine and each core switch it reaches; the core switch
    count (``switches``) or the spine-to-core ``oversubscription`` it follows from; ``wiring``: ``planes``
    (spine j of every pod to the j-th plane of core switches) or ``mesh`` (every spine to every core switch)."""

    switches: _count(MAX_COUNT) | None = None
    oversubscription: float | None = None
    wiring: Literal["planes", "mesh"] = "planes"


class Clos3Spec(_Spec):
    """``topology: {type: clos3, ...}``; see :func:`netsim.topology.clos3.clos3`."""

    type: Literal["clos3"]
    pods: _count(MAX_COUNT)
    leaves_per_pod: _count(MAX_COUNT)
    spines_per_pod: _count(MAX_COUNT)
    hosts_per_leaf: _count(MAX_COUNT)
    gpus_per_host: _count(MAX_PER_HOST) = 8
    nics_per_host: _count(MAX_PER_HOST) = 8
    nic: Nic
    uplink: UplinkSpec
    core: CoreSpec
    intra_host: LinkSpec
    rail_optimized: bool = False
    nic_overrides: list[NicOverride] = []
    host_nics: list[HostNics] = []

    @model_validator(mode="after")
    def _size(self):
        core = self.core
        if (core.switches is None) == (core.oversubscription is None):
            raise ValueError("core: give the core switch count (switches) or the spine-to-core oversubscription, "
                             "not both")
        hosts = self.pods * self.leaves_per_pod * self.hosts_per_leaf
        check_host_nics(self.host_nics, hosts)
        cores = core_switches(self)
        per_spine = cores // self.spines_per_pod if core.wiring == "planes" else cores
        cables = self.pods * self.spines_per_pod * (self.leaves_per_pod * self.uplink.count + per_spine * core.count)
        _check_size(hosts * self.gpus_per_host, 2 * (hosts * (self.gpus_per_host + 2 * self.nics_per_host) + cables))
        return self


def core_switches(t: Clos3Spec) -> int:
    """The core switch count: given, or what the spine-to-core oversubscription asks for."""
    core = t.core
    if core.switches is not None:
        return core.switches
    ratio = core.oversubscription
    if not (isinstance(ratio, int | float) and math.isfinite(ratio) and ratio > 0):
        raise ValueError(f"core.oversubscription must be a positive number (down : up), got {ratio!r}")
    down = t.leaves_per_pod * t.uplink.count * t.uplink.bandwidth
    cables = down / (ratio * core.bandwidth * core.count)
    if abs(cables - round(cables)) > 1e-9 * cables or round(cables) < 1:
        raise ValueError(
            f"core.oversubscription {ratio:g} does not divide the ports: a spine has {t.leaves_per_pod} x "
            f"{t.uplink.count} x {format_bandwidth(t.uplink.bandwidth)} down, so 1:{ratio:g} needs "
            f"{cables:.4g} groups of {core.count} x {format_bandwidth(core.bandwidth)} core cables; pick a ratio that "
            f"gives a whole number, or give core.switches")
    per_spine = int(round(cables))
    return per_spine * t.spines_per_pod if core.wiring == "planes" else per_spine


def build(t: Clos3Spec) -> Topology:
    """The three-tier Clos of ``t``."""
    return clos3(
        pods=t.pods, leaves_per_pod=t.leaves_per_pod, spines_per_pod=t.spines_per_pod, hosts_per_leaf=t.hosts_per_leaf,
        gpus_per_host=t.gpus_per_host, nics_per_host=t.nics_per_host, nic=t.nic.resolve(), nic_latency_s=t.nic.latency,
        uplink_bandwidth_Bps=t.uplink.bandwidth, uplink_latency_s=t.uplink.latency, uplinks_per_spine=t.uplink.count,
        cores=core_switches(t), core_bandwidth_Bps=t.core.bandwidth, core_latency_s=t.core.latency,
        core_cables=t.core.count, core_wiring=t.core.wiring, intra_bandwidth_Bps=t.intra_host.bandwidth,
        intra_latency_s=t.intra_host.latency, intra_overhead_s=t.intra_host.overhead,
        rail_optimized=t.rail_optimized, host_nics=host_nic_map(t.host_nics),
        nic_bandwidth_overrides={(o.host, o.nic): o.bandwidth for o in t.nic_overrides})


def shape(t: Clos3Spec, extra_nics: int = 0) -> FabricShape:
    """Counts in closed form: pods of leaf-spine (as :func:`netsim.fabrics.leaf_spine.shape`) plus the core."""
    per_pod = t.leaves_per_pod * t.hosts_per_leaf
    hosts = t.pods * per_pod
    p = max([_ports(t.nic), *(_ports(e.nic) for e in t.host_nics)])
    cores = core_switches(t)
    per_spine = cores // t.spines_per_pod if t.core.wiring == "planes" else cores
    s, c1, c2 = t.spines_per_pod, t.uplink.count, t.core.count
    spines = t.pods * s
    links = (2 * t.pods * t.leaves_per_pod * s * c1 + 2 * spines * per_spine * c2 + hosts * 2 * t.gpus_per_host
             + 2 * t.nics_per_host * p * hosts)
    far_spines = 1 if t.core.wiring == "planes" else s  # spines of the far pod a core switch reaches
    domain = t.gpus_per_host if t.rail_optimized else t.hosts_per_leaf * t.gpus_per_host * p
    return FabricShape(
        hosts=hosts, gpus=hosts * t.gpus_per_host, switches=t.pods * t.leaves_per_pod + spines + cores,
        nodes=t.pods * t.leaves_per_pod + spines + cores + hosts * (t.gpus_per_host + t.nics_per_host + extra_nics + 1),
        links=links, gpus_per_host=t.gpus_per_host, gpus_per_domain=domain,
        domains=max(1, t.pods * t.leaves_per_pod // p), gpus_per_nic=-(-t.gpus_per_host // t.nics_per_host),
        paths_host=1, paths_near=p, paths_far=p * p * s * c1 * c1 * per_spine * c2 * c2 * far_spines, path_links=6,
        union_links=2 * p * (1 + s * c1 * (1 + per_spine * c2)), uplinks=s * c1 * p,
        gpus_per_pod=per_pod * t.gpus_per_host, paths_pod=p * p * s * c1 * c1, union_links_pod=2 * p * (1 + s * c1))


FABRICS.add(FabricKind("clos3", Clos3Spec, build, shape,
                       "three-tier Clos: pods of leaf-spine whose spines reach a core tier (in planes or a mesh)"))

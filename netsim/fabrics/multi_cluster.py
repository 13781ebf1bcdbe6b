"""Several leaf-spine clusters joined by Ethernet (Holmes' setting):
``topology: {type: multi_cluster, clusters: [...], ethernet: {...}}``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from netsim.fabrics import leaf_spine as ls
from netsim.fabrics.base import FABRICS, FabricKind, FabricShape
from netsim.spectypes import Bandwidth, Name, Nic, NicSpec, Time, _Spec
from netsim.topology import Topology
from netsim.topology.multicluster import multi_cluster


class ClusterSpec(ls.LeafSpineSpec):
    """One cluster of a multi-cluster fabric: a named leaf-spine."""

    type: Literal["leaf_spine"] = "leaf_spine"
    name: Name


class EthernetSpec(_Spec):
    """The inter-cluster Ethernet: per-host TCP NIC and the cluster-to-core cable."""

    nic: Nic = NicSpec(profile="eth-tcp-25")
    bandwidth: Bandwidth
    latency: Time = 0.0


class MultiClusterSpec(_Spec):
    """``topology: {type: multi_cluster, clusters: [...], ethernet: {...}}`` (Holmes-style)."""

    type: Literal["multi_cluster"]
    clusters: Annotated[list[ClusterSpec], Field(min_length=1, max_length=1_000)]
    ethernet: EthernetSpec
    #: Host (and so GPU) numbering: ``blocked`` (cluster by cluster) or ``interleaved`` (round-robin
    #: over the clusters, like a hostfile that alternates nodes of the two clusters).
    numbering: Literal["blocked", "interleaved"] = "blocked"


def build(t: MultiClusterSpec) -> Topology:
    """The clusters of ``t`` and their Ethernet."""
    return multi_cluster([{"name": c.name, **ls._leaf_spine_args(c)} for c in t.clusters],
                         interconnect_Bps=t.ethernet.bandwidth, interconnect_latency_s=t.ethernet.latency,
                         tcp_nic=t.ethernet.nic.resolve(), eth_latency_s=t.ethernet.nic.latency,
                         numbering=t.numbering)


def shape(t: MultiClusterSpec) -> FabricShape:
    parts = [ls.shape(c, extra_nics=1) for c in t.clusters]
    hosts = sum(s.hosts for s in parts)
    # each cluster adds an Ethernet switch (and its cable to the core), each host an Ethernet NIC
    return FabricShape(hosts=hosts, gpus=sum(s.gpus for s in parts),
                       switches=sum(s.switches + 1 for s in parts) + 1, nodes=sum(s.nodes + 1 for s in parts) + 1,
                       links=sum(s.links + 2 for s in parts) + 2 * hosts,
                       gpus_per_host=max(s.gpus_per_host for s in parts),
                       gpus_per_domain=min(s.gpus_per_domain for s in parts),
                       domains=sum(s.domains for s in parts) + 1, gpus_per_nic=max(s.gpus_per_nic for s in parts),
                       paths_host=1, paths_near=max(s.paths_near for s in parts),
                       paths_far=max(s.paths_far for s in parts), path_links=4,
                       union_links=max(s.union_links for s in parts), uplinks=min(s.uplinks for s in parts))


FABRICS.add(FabricKind("multi_cluster", MultiClusterSpec, build, shape,
                            "leaf-spine clusters (each with its own NICs) joined by an Ethernet core"))

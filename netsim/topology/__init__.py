"""Fabric topologies: the Topology class and its builders."""

from netsim.topology.leaf_spine import leaf_spine
from netsim.topology.topology import LINK_KINDS, LINK_TIERS, LinkTable, Topology

__all__ = ["LINK_KINDS", "LINK_TIERS", "LinkTable", "Topology", "leaf_spine"]

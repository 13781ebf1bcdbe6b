"""Fabric topologies: the Topology class and its builders."""

from netsim.topology.leaf_spine import leaf_spine
from netsim.topology.topology import CORE_LINK_KINDS, LINK_KINDS, LINK_TIERS, SWITCH_KINDS, LinkTable, Topology

__all__ = ["CORE_LINK_KINDS", "LINK_KINDS", "LINK_TIERS", "SWITCH_KINDS", "LinkTable", "Topology", "leaf_spine"]

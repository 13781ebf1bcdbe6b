"""Routing policies, one module each, registered by their YAML name."""

from netsim.routing import dragonfly, ecmp, spray  # noqa: F401  (register ecmp, spray, minimal, valiant, ugal, adaptive)
from netsim.routing.base import ROUTING, Connection, RoutingPolicy, Routes, make_routing

__all__ = ["ROUTING", "Connection", "RoutingPolicy", "Routes", "make_routing"]

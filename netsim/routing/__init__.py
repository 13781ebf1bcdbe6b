"""Routing policies, one module each, registered by their YAML name."""

from netsim.routing import dragonfly, ecmp  # noqa: F401  (register "ecmp", "minimal", "valiant", "ugal", "adaptive")
from netsim.routing.base import ROUTING, Connection, RoutingPolicy, Routes, make_routing

__all__ = ["ROUTING", "Connection", "RoutingPolicy", "Routes", "make_routing"]

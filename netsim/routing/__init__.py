"""Routing policies, one module each, registered by their YAML name."""

from netsim.routing import ecmp  # noqa: F401  (registers "ecmp")
from netsim.routing.base import ROUTING, Connection, RoutingPolicy, Routes, make_routing

__all__ = ["ROUTING", "Connection", "RoutingPolicy", "Routes", "make_routing"]

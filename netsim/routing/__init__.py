"""Routing policies, one module each, registered by their YAML name."""

from netsim.routing import c4p, dragonfly, ecmp, ethereal, split, spray  # noqa: F401  (register the policies by name)
from netsim.routing import table  # noqa: F401  (registers table)
from netsim.routing.base import ROUTING, Connection, RoutingPolicy, Routes, make_routing

__all__ = ["ROUTING", "Connection", "RoutingPolicy", "Routes", "make_routing"]

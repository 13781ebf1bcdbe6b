"""The engine: the SimPy-aware fluid network (Fabric) and its environment."""

from netsim.engine.fabric import Environment, Fabric

__all__ = ["Environment", "Fabric"]

"""The engine: the fluid network (Fabric, with its compiled and reference executors) on a SimPy clock."""

from netsim.engine.clock import Environment
from netsim.engine.fabric import Fabric

__all__ = ["Environment", "Fabric"]

"""netsim: a discrete-event, flow-level simulator of AI/HPC cluster networks."""

__version__ = "0.1.0"

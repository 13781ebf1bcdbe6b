"""Multi-tenant clusters driven by job traces: the trace format (:mod:`~netsim.cluster.trace`), converters
from public cluster traces (:mod:`~netsim.cluster.convert`) and synthetic traces (:mod:`~netsim.cluster.synthetic`).

Kept free of imports so that ``import netsim.cluster`` costs nothing; import the modules themselves.
"""

"""Rate solvers: pure functions from a flow x link incidence to max-min fair rates.

Every solver registered here has the signature of :func:`progressive_filling`; the property
tests run over all of them.
"""

from netsim.solver.maxmin import progressive_filling

SOLVERS = {"progressive_filling": progressive_filling}
DEFAULT_SOLVER = "progressive_filling"

__all__ = ["DEFAULT_SOLVER", "SOLVERS", "progressive_filling"]

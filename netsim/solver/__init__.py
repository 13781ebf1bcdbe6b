"""Rate solvers: pure functions from a flow x link incidence to max-min fair rates.

Every solver in ``SOLVERS`` has the signature of :func:`progressive_filling`; the property tests
run over all of them. The engine uses the numpy version for large components and the list version
for small ones (same algorithm, less call overhead).
"""

from netsim.solver.maxmin import progressive_filling, progressive_filling_lists, progressive_filling_py

SOLVERS = {"progressive_filling": progressive_filling, "progressive_filling_py": progressive_filling_py}
DEFAULT_SOLVER = "progressive_filling"

__all__ = ["DEFAULT_SOLVER", "SOLVERS", "progressive_filling", "progressive_filling_lists", "progressive_filling_py"]

"""Rate solvers: pure functions from a flow x link incidence to max-min fair rates.

Every solver in ``SOLVERS`` has the signature of :func:`progressive_filling`; the property tests
run over all of them. The engine solves small components with the list version and large ones
with :func:`bottleneck_filling` when numba compiled it (:data:`COMPILED`), else with the numpy
:func:`progressive_filling` (same allocation).
"""

from netsim.solver.bottleneck import COMPILED, bottleneck_filling
from netsim.solver.maxmin import progressive_filling, progressive_filling_lists, progressive_filling_py

SOLVERS = {"progressive_filling": progressive_filling, "progressive_filling_py": progressive_filling_py,
           "bottleneck_filling": bottleneck_filling}
#: The solver for large components: the compiled kernel if numba is there, else numpy.
DEFAULT_SOLVER = "bottleneck_filling" if COMPILED else "progressive_filling"

__all__ = ["COMPILED", "DEFAULT_SOLVER", "SOLVERS", "bottleneck_filling", "progressive_filling",
           "progressive_filling_lists", "progressive_filling_py"]

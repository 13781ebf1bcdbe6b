"""Collective algorithms as schedule builders, registered by (op, algorithm); running one call."""

from netsim.collectives import alltoallv, hierarchical, ring, schedule, tree  # noqa: F401  (register the algorithms)
from netsim.collectives.base import (
    ALGORITHM_OPS,
    BUSBW_FACTOR,
    Builder,
    CollectiveRecord,
    build_collective,
    get_algorithm,
    run_collective,
)

__all__ = ["ALGORITHM_OPS", "BUSBW_FACTOR", "Builder", "CollectiveRecord", "build_collective", "get_algorithm",
           "run_collective"]

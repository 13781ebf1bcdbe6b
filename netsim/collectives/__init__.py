"""Collective algorithms as SimPy processes emitting sends; registered by (op, algorithm)."""

from netsim.collectives import hierarchical, ring, schedule, tree  # noqa: F401  (register the algorithms)
from netsim.collectives.base import ALGORITHM_OPS, BUSBW_FACTOR, CollectiveRecord, get_algorithm

__all__ = ["ALGORITHM_OPS", "BUSBW_FACTOR", "CollectiveRecord", "get_algorithm"]

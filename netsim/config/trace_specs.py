"""Trace-driven workloads' YAML sections: a Chakra execution trace, or a schedule saved as Parquet.

Relative ``path`` values are resolved against the experiment file's directory when the spec is
loaded from YAML (:mod:`netsim.config.files`); from Python, against the current directory.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from netsim.errors import ConfigError, shorten
from netsim.spectypes import MAX_GPUS, MAX_ITERATIONS, Channels, ProtocolName, _count, _FieldError, _Spec

#: Workload ``type`` values of this module.
TRACE_TYPES = ("chakra", "schedule")

def _path(value: str) -> str:
    if "\0" in value or not value.strip():
        raise ValueError(f"expected a file path, got {shorten(value)}")
    return value


_Path = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_path)]


class ChakraWorkload(_Spec):
    """``workload: {type: chakra, path: traces/allreduce, ranks: 4, algorithms: {allreduce: ring}}``.

    Runs the Chakra execution trace ``<path>.<rank>.et`` (one file per rank; ``ranks``: how many,
    default every ``<path>.N.et`` found in a row from 0), rank r on the job's r-th placed GPU. See
    :mod:`netsim.workload.chakra` for how nodes become tasks. ``algorithms`` picks the algorithm
    per collective op and ``protocol`` NCCL's protocol (default ``auto``: by each call's size, as
    NCCL's tuning model does); ``groups`` gives process groups' ranks
    (``{pg_name: [ranks]}``; default: the ranks whose files use the group); ``ops_per_s`` turns a
    compute node's ``num_ops`` into time when it has no ``duration_micros``; ``iterations``
    replays the whole trace that many times back to back.
    """

    type: Literal["chakra"]
    path: _Path
    ranks: _count(MAX_GPUS) | None = None
    algorithms: dict[str, str] = {}
    protocol: ProtocolName = "auto"
    channels: Channels = "auto"
    groups: dict[str, Annotated[list[_count(MAX_GPUS - 1, 0)], Field(min_length=1)]] = {}
    ops_per_s: Annotated[float, Field(gt=0, le=1e18)] | None = None
    iterations: _count(MAX_ITERATIONS) = 1
    label: str | None = None

    @field_validator("algorithms")
    @classmethod
    def _known(cls, v: dict[str, str]) -> dict[str, str]:
        from netsim.collectives import get_algorithm
        from netsim.collectives.nccl import AUTO_ALGORITHMS
        for op, name in v.items():
            try:
                get_algorithm(op, AUTO_ALGORITHMS.get(op, ("ring",))[-1] if name == "auto" else name,
                              f"algorithms.{op}", auto=True)
            except ConfigError as exc:
                raise _FieldError(exc.message, op) from None
        return v

    @field_validator("groups")
    @classmethod
    def _distinct(cls, v: dict[str, list[int]]) -> dict[str, list[int]]:
        for pg, ranks in v.items():
            if len(set(ranks)) != len(ranks):
                raise _FieldError(f"a rank appears twice in process group {shorten(pg)}", pg)
        return v


class ScheduleWorkload(_Spec):
    """``workload: {type: schedule, path: sched.parquet}``: a netsim schedule saved as Parquet
    (:mod:`netsim.engine.schedule_io`), its connections' ``src``/``dst`` being rank indices mapped to
    the job's placed GPUs. ``ranks``: how many GPUs to place (default: the largest rank named plus
    one); ``iterations`` replays it back to back."""

    type: Literal["schedule"]
    path: _Path
    ranks: _count(MAX_GPUS) | None = None
    iterations: _count(MAX_ITERATIONS) = 1
    label: str | None = None

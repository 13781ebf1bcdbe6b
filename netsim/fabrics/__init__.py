"""Fabric families, one module each, found by ``topology.type`` in :data:`FABRICS`.

A new family is one module here: a pydantic spec with ``type: Literal["name"]`` (built from
:mod:`netsim.spectypes`), ``build(spec) -> Topology`` and ``shape(spec) -> FabricShape`` (its counts
in closed form, for the pre-flight estimate), registered with
``FABRICS.add(FabricKind(...))``, and one import line below. The experiment schema, the
runner, the estimate and ``netsim list`` pick it up from the registry. A family defined outside
netsim registers before :mod:`netsim.config` is first imported (the schema is built then):
``docs/extending.md`` shows one.
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field

from netsim.fabrics import clos3, dragonfly, leaf_spine, multi_cluster, rail_only  # noqa: F401  (they register themselves)
from netsim.fabrics.base import FABRICS, FabricKind, FabricShape

__all__ = ["FABRICS", "FabricKind", "FabricShape", "build_topology", "fabric_shape", "topology_spec_type"]


def topology_spec_type():
    """The ``topology:`` section's type: the registered specs, told apart by their ``type`` key."""
    return Annotated[Union[FABRICS.specs()], Field(discriminator="type")]  # noqa: UP007 (a runtime tuple)


def build_topology(spec):
    """The :class:`netsim.topology.Topology` of a topology spec of any registered family."""
    return FABRICS.of(spec).build(spec)


def fabric_shape(spec) -> FabricShape:
    """The :class:`FabricShape` of a topology spec of any registered family, without building it."""
    return FABRICS.of(spec).shape(spec)

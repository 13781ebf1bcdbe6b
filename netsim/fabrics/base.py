"""What a fabric family is: its ``topology:`` spec, its builder and its counts in closed form.

A family is one module of :mod:`netsim.fabrics` that registers a :class:`FabricKind`; the experiment
file's ``topology.type`` names it. Everything else reads the registry: the YAML schema (the union
of the registered specs), the runner (``build``), the pre-flight estimate (``shape``) and
``netsim show`` / ``netsim validate``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from netsim.registry import Registry


@dataclass(frozen=True)
class FabricShape:
    """A fabric's counts and path structure, in closed form."""

    hosts: int
    gpus: int
    switches: int
    nodes: int
    links: int
    gpus_per_host: int      #: most GPUs on one host
    gpus_per_domain: int    #: fewest GPUs under one leaf (set) / in one dragonfly group
    domains: int            #: leaves / groups: more than one means pairs can be far apart
    gpus_per_nic: int       #: most GPUs sending through one NIC
    paths_host: int         #: equal-cost paths between two GPUs of one host (upper bound)
    paths_near: int         #: ... of different hosts in one domain
    paths_far: int          #: ... in different domains
    path_links: int         #: links on the longest path
    union_links: int        #: links on all of a far pair's paths together (a sprayed message's incidence)
    uplinks: int            #: links a domain's traffic can leave by
    gpus_per_pod: int = 0   #: GPUs in one pod of a three-tier fabric (0: no pods, the fabric is one)
    paths_pod: int = 0      #: equal-cost paths between GPUs of one pod under different domains
    union_links_pod: int = 0  #: links on all of such a pair's paths together


@dataclass(frozen=True)
class FabricKind:
    """One fabric family.

    ``spec`` is a pydantic model with a ``type: Literal[name]`` field (the YAML ``topology:``
    section); ``build(spec)`` returns the :class:`netsim.topology.Topology`; ``shape(spec)`` its
    :class:`FabricShape` without building anything (the pre-flight estimate runs it on fabrics too
    large to build).
    """

    name: str
    spec: type
    build: Callable[[Any], Any]
    shape: Callable[[Any], FabricShape]
    summary: str = ""


class FabricRegistry(Registry[FabricKind]):
    """``topology.type`` -> :class:`FabricKind` (a :class:`~netsim.registry.Registry` of kinds)."""

    def __init__(self) -> None:
        super().__init__("topology type")

    def add(self, kind: FabricKind) -> FabricKind:
        if "type" not in getattr(kind.spec, "model_fields", {}):
            raise TypeError(f"fabric {kind.name!r}: its spec needs a 'type' field (Literal[{kind.name!r}])")
        return self.register(kind.name)(kind)

    def specs(self) -> tuple[type, ...]:
        return tuple(self.get(name).spec for name in self.names())

    def __getitem__(self, name: str) -> FabricKind:
        return self.get(name, "topology.type")

    def of(self, spec) -> FabricKind:
        """The family of a topology spec."""
        return self[spec.type]


#: Every fabric family; :mod:`netsim.fabrics` imports the built-in ones.
FABRICS = FabricRegistry()

"""The suspects a detector can name -- GPUs, NICs, switch-to-switch cables, switches -- and what a link,
a path or a fault touches, from the topology alone.

A NIC stands for its ports and the cables to its leaf (a cable between a NIC and a switch is the
NIC's); a cable is a switch-to-switch cable, both directions, named as a fault names it
(``leaf0-spine1``, ``leaf0-spine1#1`` among parallel cables); a switch is a leaf, spine or
dragonfly switch. Links inside a host (NVLink, PCIe) belong to no suspect.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.topology import Topology
from netsim.topology.topology import SWITCH_KINDS

#: Suspect kinds, in the order tables list them.
KINDS = ("gpu", "nic", "link", "switch")


@dataclass(frozen=True, order=True)
class Component:
    """One suspect: ``kind`` (gpu, nic, link, switch) and its name on the fabric (``h2.nic1``, ``leaf0-spine1``)."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


class Components:
    """The suspects of ``topology``: each directed link's suspects, each GPU's, and their neighbours.

    Examples
    --------
    >>> from netsim.fabrics.leaf_spine import leaf_spine_topology  # doctest: +SKIP
    >>> comps = Components(topology)  # doctest: +SKIP
    >>> comps.on_link(0)  # doctest: +SKIP
    (Component(kind='nic', name='h0.nic0'), Component(kind='switch', name='leaf0'))
    """

    def __init__(self, topology: Topology):
        self.topology = topology
        graph = topology.graph
        self.kind = {n: k for n, k in graph.nodes(data="kind")}
        gpus = sorted((d["host"], d["local"], n) for n, d in graph.nodes(data=True) if d.get("kind") == "gpu")
        #: GPU index -> graph node (GPUs are numbered host by host, local index within).
        self.gpu_node = np.array([n for _h, _l, n in gpus], dtype=np.int64)
        lt = topology.links
        self.links: list[tuple[Component, ...]] = []
        self.cable_of: dict[int, Component] = {}
        for link in range(len(lt)):
            u, v = int(lt.src[link]), int(lt.dst[link])
            out: list[Component] = []
            for node in (u, v):
                if self.kind[node] == "nic":
                    out.append(Component("nic", topology.node_name(node)))
                elif self.kind[node] in SWITCH_KINDS:
                    out.append(Component("switch", topology.node_name(node)))
            if self.kind[u] in SWITCH_KINDS and self.kind[v] in SWITCH_KINDS:
                cable = Component("link", self._cable_name(link, u, v))
                self.cable_of[link] = cable
                out.append(cable)
            self.links.append(tuple(dict.fromkeys(out)))

    def _cable_name(self, link: int, u: int, v: int) -> str:
        """``a-b`` (``#k`` among parallel cables), ends in node order, as a fault names the cable."""
        graph, name = self.topology.graph, self.topology.node_name
        parallel = sorted(graph.edges[u, v]["links"])
        a, b = (u, v) if u < v else (v, u)
        base = f"{name(a)}-{name(b)}"
        return base if len(parallel) == 1 else f"{base}#{parallel.index(link)}"

    def on_link(self, link: int) -> tuple[Component, ...]:
        """The suspects a message over directed ``link`` crosses."""
        return self.links[link]

    def on_path(self, links) -> tuple[Component, ...]:
        """The suspects a message over ``links`` crosses, in path order, each once."""
        return tuple(dict.fromkeys(c for link in links for c in self.links[int(link)]))

    def gpu(self, gpu: int) -> Component:
        """The suspect of GPU index ``gpu``."""
        return Component("gpu", self.topology.node_name(int(self.gpu_node[gpu])))

    def gpu_index(self, name: str) -> int:
        """The GPU index of the GPU named ``name``."""
        names = [self.topology.node_name(int(n)) for n in self.gpu_node]
        return names.index(name)

    def related(self, component: Component) -> set[Component]:
        """``component`` and its neighbours: a GPU's NIC; a NIC's switches and GPUs; a cable's two
        switches; a switch's cables and NICs. Naming one of them is a near miss, not a false alarm."""
        out = {component}
        if component.kind == "gpu":
            gpu = self.gpu_index(component.name)
            out.add(Component("nic", self.topology.node_name(self.topology.nic_of(gpu))))
            return out
        for comps in self.links:
            if component in comps:
                out.update(c for c in comps if c.kind != "gpu")
        if component.kind == "nic":
            node = self._node(component.name)
            out.update(self.gpu(g) for g in np.flatnonzero(self.topology.gpu_nic == node).tolist())
        if component.kind == "link":  # a cable's neighbours are its switches, not the switches' other cables
            out = {component, *(c for comps in self.links if component in comps for c in comps if c.kind == "switch")}
        return out

    def _node(self, name: str) -> int:
        return next(n for n, d in self.topology.graph.nodes(data="name") if d == name)

    def fault(self, component: Component, severity: float, at_s: float) -> dict:
        """The ``faults:`` entry that makes ``component`` run at ``1 - severity`` of its nominal speed."""
        if component.kind == "gpu":
            return {"at": at_s, "gpu": component.name, "action": "slow", "factor": 1.0 / (1.0 - severity)}
        return {"at": at_s, component.kind: component.name, "action": "degrade", "fraction": 1.0 - severity}

    def used(self, links: np.ndarray) -> list[Component]:
        """The network suspects (NICs, cables, switches) of the directed ``links``, sorted."""
        return sorted({c for link in np.asarray(links).tolist() for c in self.links[int(link)]})

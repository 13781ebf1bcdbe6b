"""The Topology: a networkx graph of the fabric plus a compiled numpy link table and cached paths.

Builders (``leaf_spine``) create it; the engine reads only the link table and the paths.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

#: Link kinds, stored as small integer codes in :attr:`LinkTable.kind`.
LINK_KINDS = ("intra", "nic_up", "nic_down", "up", "down")
#: Which tier each link kind belongs to, for per-tier reporting.
LINK_TIERS = {"intra": "host", "nic_up": "nic", "nic_down": "nic", "up": "leaf-spine", "down": "leaf-spine"}

Path = tuple[int, ...]


@dataclass(frozen=True)
class LinkTable:
    """Compiled, read-only arrays describing every directed link (index = link id)."""

    src: np.ndarray
    dst: np.ndarray
    capacity_Bps: np.ndarray
    latency_s: np.ndarray
    kind: np.ndarray

    def __len__(self) -> int:
        return len(self.capacity_Bps)

    def kind_name(self, link: int) -> str:
        """Human name of the kind of ``link`` (``nic_up``, ``up``, ...)."""
        return LINK_KINDS[int(self.kind[link])]


@dataclass
class _Builder:
    """Accumulates nodes and links while a builder runs; compiled into a Topology at the end."""

    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    links: list[tuple[int, int, float, float, int]] = field(default_factory=list)

    def node(self, name: str, kind: str, **attrs) -> int:
        idx = self.graph.number_of_nodes()
        self.graph.add_node(idx, name=name, kind=kind, **attrs)
        return idx

    def link(self, u: int, v: int, capacity_Bps: float, latency_s: float, kind: str) -> int:
        """Add one directed link u -> v; parallel links between the same pair are allowed."""
        lid = len(self.links)
        self.links.append((u, v, float(capacity_Bps), float(latency_s), LINK_KINDS.index(kind)))
        if self.graph.has_edge(u, v):
            self.graph.edges[u, v]["links"].append(lid)
        else:
            self.graph.add_edge(u, v, links=[lid])
        return lid

    def duplex(self, u: int, v: int, capacity_Bps: float, latency_s: float, up: str, down: str) -> tuple[int, int]:
        """Add a full-duplex cable as two directed links; returns (u->v, v->u)."""
        return (self.link(u, v, capacity_Bps, latency_s, up), self.link(v, u, capacity_Bps, latency_s, down))


class Topology:
    """A fabric: graph, link table, GPU attachment points and equal-cost path enumeration.

    GPUs are numbered ``0 .. n_gpus-1`` (the targets of placement). Each GPU belongs to a host and
    uses one NIC; traffic between GPUs of one host crosses the intra-host fabric, all other traffic
    leaves through the sender's NIC, crosses switches on a shortest path and enters through the
    receiver's NIC.

    Parameters
    ----------
    name:
        Short description (``leaf_spine(4x4)``).
    graph:
        Directed graph; node attributes ``name`` and ``kind`` (gpu, nic, host_switch, leaf, spine),
        edge attribute ``links`` (list of link ids, several for parallel cables).
    links:
        The compiled link table.
    gpu_host, gpu_nic:
        For each GPU, its host index and the node id of its NIC.
    nic_ports:
        For each NIC node id, a list of ``(up_link, switch_node, down_link)`` ports.
    host_switch:
        For each host, the node id of its intra-host switch and per-GPU (up, down) links.
    overhead_s:
        Per-message overhead (software/NIC cost) for inter-host and intra-host messages.
    params:
        Builder parameters and derived figures (oversubscription ...), for reports and manifests.
    """

    def __init__(self, name: str, graph: nx.DiGraph, links: LinkTable, gpu_host: np.ndarray,
                 gpu_nic: np.ndarray, gpu_intra: list[tuple[int, int]], nic_ports: dict[int, list[tuple[int, int, int]]],
                 nic_overhead_s: dict[int, float], intra_overhead_s: float, params: dict):
        self.name = name
        self.graph = graph
        self.links = links
        self.gpu_host = gpu_host
        self.gpu_nic = gpu_nic
        self.gpu_intra = gpu_intra
        self.nic_ports = nic_ports
        self.nic_overhead_s = nic_overhead_s
        self.intra_overhead_s = intra_overhead_s
        self.params = params
        switches = [n for n, k in graph.nodes(data="kind") if k in ("leaf", "spine")]
        self._switch_graph = graph.subgraph(switches).copy()
        self._switch_paths: dict[tuple[int, int], list[Path]] = {}
        self._gpu_paths: dict[tuple[int, int], list[Path]] = {}

    @property
    def n_gpus(self) -> int:
        """Number of GPUs (placement targets)."""
        return len(self.gpu_host)

    @property
    def n_hosts(self) -> int:
        """Number of hosts."""
        return int(self.gpu_host.max()) + 1 if len(self.gpu_host) else 0

    def node_name(self, node: int) -> str:
        """The human name of graph node ``node`` (``leaf2``, ``h3.nic1``)."""
        return self.graph.nodes[node]["name"]

    def link_name(self, link: int) -> str:
        """``src->dst`` with node names, for reports."""
        return f"{self.node_name(int(self.links.src[link]))}->{self.node_name(int(self.links.dst[link]))}"

    def switch_paths(self, a: int, b: int) -> list[Path]:
        """All equal-cost (minimum hop) link paths from switch ``a`` to switch ``b``, cached.

        Parallel cables multiply paths: each hop may use any of its links.
        """
        key = (a, b)
        cached = self._switch_paths.get(key)
        if cached is not None:
            return cached
        if a == b:
            paths: list[Path] = [()]
        else:
            paths = []
            g = self._switch_graph
            for nodes in nx.all_shortest_paths(g, a, b):
                hops = [g.edges[u, v]["links"] for u, v in itertools.pairwise(nodes)]
                paths.extend(itertools.product(*hops))
            paths.sort()
        self._switch_paths[key] = paths
        return paths

    def paths(self, src: int, dst: int) -> list[Path]:
        """All equal-cost link paths from GPU ``src`` to GPU ``dst`` (sorted, cached).

        Intra-host pairs get the single path through the host's switch; other pairs leave through
        the sender's NIC ports and enter through the receiver's.
        """
        key = (src, dst)
        cached = self._gpu_paths.get(key)
        if cached is not None:
            return cached
        if src == dst:
            paths: list[Path] = [()]
        elif self.gpu_host[src] == self.gpu_host[dst]:
            paths = [(self.gpu_intra[src][0], self.gpu_intra[dst][1])]
        else:
            candidates = []
            for up, sw_a, _ in self.nic_ports[int(self.gpu_nic[src])]:
                for _, sw_b, down in self.nic_ports[int(self.gpu_nic[dst])]:
                    for mid in self.switch_paths(sw_a, sw_b):
                        candidates.append((up, *mid, down))
            shortest = min(len(p) for p in candidates)
            paths = sorted(p for p in candidates if len(p) == shortest)
        self._gpu_paths[key] = paths
        return paths

    def path_latency_s(self, path: Path) -> float:
        """Sum of propagation latencies along ``path``."""
        return float(self.links.latency_s[list(path)].sum()) if path else 0.0

    def message_overhead_s(self, src: int, dst: int) -> float:
        """Per-message overhead of a message from GPU ``src`` to GPU ``dst``."""
        if self.gpu_host[src] == self.gpu_host[dst]:
            return self.intra_overhead_s
        return self.nic_overhead_s[int(self.gpu_nic[src])]

    def describe(self) -> dict:
        """Builder parameters plus counts, JSON-friendly (for manifests and summaries)."""
        return {"name": self.name, "gpus": self.n_gpus, "hosts": self.n_hosts,
                "links": len(self.links), **self.params}

    def __repr__(self) -> str:
        return f"Topology({self.name}: {self.n_gpus} GPUs, {self.n_hosts} hosts, {len(self.links)} links)"


def compile_links(links: list[tuple[int, int, float, float, int]]) -> LinkTable:
    """Turn builder link records into the read-only LinkTable."""
    arr = np.array(links, dtype=np.float64).reshape(-1, 5)
    table = LinkTable(src=arr[:, 0].astype(np.int64), dst=arr[:, 1].astype(np.int64),
                      capacity_Bps=arr[:, 2].copy(), latency_s=arr[:, 3].copy(), kind=arr[:, 4].astype(np.int8))
    for a in (table.src, table.dst, table.capacity_Bps, table.latency_s, table.kind):
        a.flags.writeable = False
    return table

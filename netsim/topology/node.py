"""Node (host) models: the GPUs, NICs and intra-node links of one server, as a reusable template.

Builders stamp a template once per host. Local paths (GPU to GPU, GPU to NIC) are enumerated once
per template; a host's links are laid out contiguously, so a local link index maps to a global
link id by adding the host's offset.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import networkx as nx

LocalPath = tuple[int, ...]


@dataclass(frozen=True)
class NodeModel:
    """One server: ``n_gpus`` GPUs, ``n_nics`` NICs, optional internal switches, and duplex links.

    Local node numbering: GPUs ``0..n_gpus-1``, NICs ``n_gpus..n_gpus+n_nics-1``, internal switches
    after that. Each duplex edge ``e`` gives two directed local links, ``2e`` (u->v) and ``2e+1``.

    Parameters
    ----------
    name:
        Model name (``nvswitch-8``, ``frontier-mi250x``).
    n_gpus, n_nics, n_switches:
        Counts of GPUs (GCDs), NICs and internal switches (NVSwitch-like).
    edges:
        Duplex links ``(u, v, bandwidth_Bps, latency_s, kind)`` between local nodes; kind is
        ``intra`` (GPU fabric) or ``pcie`` (GPU to NIC). A NIC without an edge is attached to GPU
        traffic at no modelled cost (used when the NIC link itself is the bottleneck of interest).
    gpu_nic:
        For each GPU, the index of the NIC it sends and receives through.
    forward_rails:
        Rail-only hosts: a GPU reaches a NIC other than its own through the GPU that owns that NIC
        (over the host's links, NVLink), so traffic for another rail is forwarded inside the host.
        Without it, any GPU reaches any NIC at the cost of the modelled links only.
    """

    name: str
    n_gpus: int
    n_nics: int
    edges: tuple[tuple[int, int, float, float, str], ...]
    gpu_nic: tuple[int, ...]
    n_switches: int = 0
    forward_rails: bool = False
    _paths: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        if len(self.gpu_nic) != self.n_gpus or any(not 0 <= r < self.n_nics for r in self.gpu_nic):
            raise ValueError(f"{self.name}: gpu_nic must give a NIC index in 0..{self.n_nics - 1} for each GPU")

    @property
    def n_local_links(self) -> int:
        """Directed links one host of this model adds."""
        return 2 * len(self.edges)

    def nic_node(self, nic: int) -> int:
        """Local node number of NIC ``nic``."""
        return self.n_gpus + nic

    def _graph(self, exclude: set[int]) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_nodes_from(range(self.n_gpus + self.n_nics + self.n_switches))
        for e, (u, v, *_rest) in enumerate(self.edges):
            if u not in exclude and v not in exclude:
                g.add_edge(u, v, link=2 * e)
                g.add_edge(v, u, link=2 * e + 1)
        return g

    def local_paths(self, a: int, b: int) -> list[LocalPath]:
        """All fewest-hop local link paths from local node ``a`` to ``b``, not crossing other NICs."""
        key = (a, b)
        cached = self._paths.get(key)
        if cached is not None:
            return cached
        paths: list[LocalPath]
        via = self._forwarder(a, b)
        if via is not None:  # rail-only: over NVLink to the GPU of that NIC's rail, then out (or in, then over)
            first, second = (a, via), (via, b)
            paths = [p + q for p in self.local_paths(*first) for q in self.local_paths(*second)]
        elif a == b or self._free_nic(a) or self._free_nic(b):
            paths = [()]
        else:
            nics = {self.nic_node(r) for r in range(self.n_nics)} - {a, b}
            g = self._graph(nics)
            try:
                node_paths = list(nx.all_shortest_paths(g, a, b))
            except nx.NetworkXNoPath:
                raise ValueError(f"{self.name}: no path from local node {a} to {b}") from None
            paths = sorted(tuple(g.edges[u, v]["link"] for u, v in itertools.pairwise(p)) for p in node_paths)
        self._paths[key] = paths  # the cache dict is mutable by design inside the frozen template
        return paths

    def _forwarder(self, a: int, b: int) -> int | None:
        """With ``forward_rails``: the GPU that forwards between GPU ``a`` and a NIC ``b`` of another rail
        (or NIC ``a`` and GPU ``b``): the first GPU whose NIC it is. ``None`` when none is needed."""
        if not self.forward_rails:
            return None
        gpu, nic = (a, b) if a < self.n_gpus else (b, a)
        if not (gpu < self.n_gpus <= nic < self.n_gpus + self.n_nics):
            return None
        rail = nic - self.n_gpus
        if self.gpu_nic[gpu] == rail:
            return None
        return self.gpu_nic.index(rail)

    def _free_nic(self, node: int) -> bool:
        """A NIC with no modelled link: GPUs reach it at no cost."""
        return self.n_gpus <= node < self.n_gpus + self.n_nics and not any(node in (u, v) for u, v, *_ in self.edges)


def single_gpu_node() -> NodeModel:
    """One GPU and one NIC, nothing modelled in between (the classic dragonfly terminal)."""
    return NodeModel("single", 1, 1, (), (0,))


def nvswitch_node(n_gpus: int, n_nics: int, bandwidth_Bps: float, latency_s: float = 0.0,
                  pcie_Bps: float | None = None, pcie_latency_s: float = 0.0, extra_nics: int = 0,
                  forward_rails: bool = False) -> NodeModel:
    """A DGX/HGX-like server: every GPU linked to one NVSwitch; GPU i uses NIC i mod n_nics.

    ``bandwidth_Bps`` is each GPU's NVLink bandwidth per direction. With ``pcie_Bps`` each GPU also
    gets a link of that speed to its NIC; without, the NIC attachment is not modelled.
    ``extra_nics`` NICs (numbered after the others) carry no GPU's default traffic: a host's
    front-end Ethernet NIC, used for TCP between NIC families. ``forward_rails``: see :class:`NodeModel`
    (rail-only fabrics).

    Examples
    --------
    >>> m = nvswitch_node(4, 2, 900e9)
    >>> m.local_paths(0, 3), m.local_paths(0, m.nic_node(0))
    ([(0, 7)], [()])
    """
    sw = n_gpus + n_nics + extra_nics
    edges = [(g, sw, bandwidth_Bps, latency_s, "intra") for g in range(n_gpus)]
    if pcie_Bps is not None:
        edges += [(g, n_gpus + g % n_nics, pcie_Bps, pcie_latency_s, "pcie") for g in range(n_gpus)]
    suffix = (f"+{extra_nics}eth" if extra_nics else "") + ("+fwd" if forward_rails else "")
    return NodeModel(f"nvswitch-{n_gpus}g{n_nics}n{suffix}", n_gpus, n_nics + extra_nics, tuple(edges),
                     tuple(g % n_nics for g in range(n_gpus)), n_switches=1, forward_rails=forward_rails)


#: Frontier MI250X node: Infinity Fabric links between GCDs (GB/s per direction), from the OLCF docs.
FRONTIER_GCD_LINKS = (
    (0, 1, 200), (2, 3, 200), (4, 5, 200), (6, 7, 200),          # the two GCDs of one package
    (2, 4, 100), (0, 6, 100),
    (5, 7, 50), (4, 6, 50), (0, 2, 50), (1, 3, 50), (1, 5, 50), (3, 7, 50),
)
#: GCDs the four Slingshot NICs hang off (one NIC per package, 50 GB/s each).
FRONTIER_NIC_GCDS = (1, 3, 5, 7)


def frontier_node(if_latency_s: float = 0.0, nic_link_Bps: float = 50e9, nic_link_latency_s: float = 0.0
                  ) -> NodeModel:
    """A Frontier node: 4 MI250X = 8 GCDs on the published Infinity-Fabric graph, 4 NICs on GCDs 1,3,5,7.

    GCD ``i`` uses the NIC of its package (NIC ``i // 2``, attached to GCD ``2*(i//2)+1``).

    Examples
    --------
    >>> m = frontier_node()
    >>> [m.edges[e][2] / 1e9 for e in (0, 4, 6)]
    [200.0, 100.0, 50.0]
    """
    edges = [(a, b, gbs * 1e9, if_latency_s, "intra") for a, b, gbs in FRONTIER_GCD_LINKS]
    edges += [(gcd, 8 + r, nic_link_Bps, nic_link_latency_s, "pcie") for r, gcd in enumerate(FRONTIER_NIC_GCDS)]
    return NodeModel("frontier-mi250x", 8, 4, tuple(edges), tuple(i // 2 for i in range(8)))

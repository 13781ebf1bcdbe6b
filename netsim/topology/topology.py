"""The Topology: a networkx graph of the fabric plus a compiled numpy link table and cached paths.

Builders (``leaf_spine``) create it; the engine reads only the link table and the paths.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from netsim.errors import NetsimError
from netsim.topology.nic import NicProfile, same_fabric
from netsim.topology.node import NodeModel
from netsim.topology.pathsets import PathIndex, PathSets, path_sums, sorted_rows

#: Link kinds, stored as small integer codes in :attr:`LinkTable.kind`.
LINK_KINDS = ("intra", "nic_up", "nic_down", "up", "down", "pcie", "local", "global", "core_up", "core_down")
#: Which tier each link kind belongs to, for per-tier reporting.
LINK_TIERS = {"intra": "host", "pcie": "host", "nic_up": "nic", "nic_down": "nic", "up": "leaf-spine",
              "down": "leaf-spine", "local": "group", "global": "global", "core_up": "spine-core",
              "core_down": "spine-core"}
#: Node kinds that are network switches (the switch graph paths are enumerated on).
SWITCH_KINDS = ("leaf", "spine", "switch", "core")
#: Link kinds between two switches (the switching core: where routing chooses and flows collide).
CORE_LINK_KINDS = ("up", "down", "local", "global", "core_up", "core_down")

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

    def host(self, h: int, model: NodeModel, prefix: str = "") -> tuple[list[int], list[int], int]:
        """Stamp one host of ``model``: returns (GPU nodes, NIC nodes, id of its first local link).

        CORRECTNESS: the host's local links are added contiguously and in the model's order, so
        local link ``k`` is global link ``base + k``.
        """
        gpus = [self.node(f"{prefix}h{h}.gpu{i}", "gpu", host=h, local=i) for i in range(model.n_gpus)]
        nics = [self.node(f"{prefix}h{h}.nic{r}", "nic", host=h, rail=r) for r in range(model.n_nics)]
        switches = [self.node(f"{prefix}h{h}.nvs{k}" if k else f"{prefix}h{h}.nvs", "host_switch", host=h)
                    for k in range(model.n_switches)]
        local = gpus + nics + switches
        base = len(self.links)
        for u, v, bw, lat, kind in model.edges:
            self.duplex(local[u], local[v], bw, lat, kind, kind)
        for i, r in enumerate(model.gpu_nic):
            if not self.graph.has_edge(gpus[i], nics[r]):
                self.graph.add_edge(gpus[i], nics[r], links=[])  # which NIC a GPU uses (drawing)
        return gpus, nics, base


class Topology:
    """A fabric: graph, link table, hosts built from node models, and equal-cost path enumeration.

    GPUs are numbered ``0 .. n_gpus-1`` (the targets of placement), host by host. Traffic between
    GPUs of one host follows the host's own links (its :class:`NodeModel`); other traffic goes from
    the GPU to its NIC inside the host, leaves through one of the NIC's ports, crosses switches on a
    fewest-hop path and enters the receiver's host through its NIC.

    Parameters
    ----------
    name:
        Short description (``leaf_spine(4x4)``).
    graph:
        Directed graph; node attributes ``name`` and ``kind`` (gpu, nic, host_switch, leaf, spine,
        switch), edge attribute ``links`` (list of link ids, several for parallel cables).
    links:
        The compiled link table.
    hosts:
        Per host: ``(model, first GPU id, first local link id, NIC node ids)``.
    nic_ports:
        For each NIC node id, a list of ``(up_link, switch_node, down_link)`` ports.
    nic_profile:
        The :class:`NicProfile` of each NIC node (its per-message latency is the message overhead).
    intra_overhead_s:
        Per-message overhead of messages inside a host.
    params:
        Builder parameters and derived figures (oversubscription ...), for reports and manifests.
    switch_path_fn:
        Optional structure-aware enumeration of fewest-hop switch paths (dragonfly: a list of link
        tuples; clos3: a 2-D integer array, one path a row), in any order; the default searches the
        switch graph.
    tcp_nic:
        Per host, the local index of its front-end Ethernet NIC, if it has one. Transport rule: GPUs
        whose NICs cannot form an RDMA connection (different families, see
        :func:`netsim.topology.nic.same_fabric`) talk TCP through these NICs.
    """

    def __init__(self, name: str, graph: nx.DiGraph, links: LinkTable,
                 hosts: list[tuple[NodeModel, int, int, list[int]]], nic_ports: dict[int, list[tuple[int, int, int]]],
                 nic_profile: dict[int, NicProfile], intra_overhead_s: float, params: dict,
                 switch_path_fn: Callable[[int, int], list[Path] | np.ndarray] | None = None,
                 tcp_nic: dict[int, int] | None = None):
        self.name = name
        self._switch_path_fn = switch_path_fn
        self.graph = graph
        self.links = links
        self.hosts = hosts
        self.gpu_host = np.concatenate([np.full(m.n_gpus, h) for h, (m, *_r) in enumerate(hosts)]).astype(np.int64) \
            if hosts else np.zeros(0, dtype=np.int64)
        self.gpu_nic = np.array([nics[m.gpu_nic[i]] for m, _g, _l, nics in hosts for i in range(m.n_gpus)],
                                dtype=np.int64)
        #: Per GPU: the index of the NIC it uses on its host (its rail).
        self.gpu_rail = np.array([m.gpu_nic[i] for m, *_r in hosts for i in range(m.n_gpus)], dtype=np.int64)
        self.nic_ports = nic_ports
        self.nic_profile = nic_profile
        self.tcp_nic = tcp_nic or {}
        self.intra_overhead_s = intra_overhead_s
        self.params = params
        switches = [n for n, k in graph.nodes(data="kind") if k in SWITCH_KINDS]
        self._switch_graph = graph.subgraph(switches).copy()
        self._switch_paths: dict[tuple[int, int], list[Path]] = {}
        self._gpu_paths: dict[tuple[int, int], list[Path]] = {}
        self._switch_pred: dict[int, dict[int, list[int]]] = {}
        self._path_index: PathIndex | None = None

    def _local(self, gpu: int) -> tuple[NodeModel, int, int, list[int], int]:
        """(model, first GPU id, link base, NIC nodes, local index) of ``gpu``'s host."""
        model, first, base, nics = self.hosts[int(self.gpu_host[gpu])]
        return model, first, base, nics, gpu - first

    @property
    def n_gpus(self) -> int:
        """Number of GPUs (placement targets)."""
        return len(self.gpu_host)

    @property
    def n_hosts(self) -> int:
        """Number of hosts."""
        return len(self.hosts)

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
        elif self._switch_path_fn is not None:
            got = self._switch_path_fn(a, b)
            paths = list(map(tuple, sorted_rows(got).tolist())) if isinstance(got, np.ndarray) else sorted(got)
        else:
            paths = []
            g = self._switch_graph
            for nodes in self._shortest_node_paths(a, b):
                hops = [g.edges[u, v]["links"] for u, v in itertools.pairwise(nodes)]
                paths.extend(itertools.product(*hops))
            paths.sort()
        self._switch_paths[key] = paths
        return paths

    def switch_path_array(self, a: int, b: int) -> np.ndarray:
        """:meth:`switch_paths` as a 2-D array, one path a row, in the same order.

        perf: a builder that gives its paths as an array (clos3: 7,168 paths between leaves of two
        pods of a Meta-like fabric) is asked again, never cached nor turned into tuples.
        """
        if a == b:
            return np.zeros((1, 0), dtype=np.int64)
        if (a, b) not in self._switch_paths and self._switch_path_fn is not None:
            got = self._switch_path_fn(a, b)
            if isinstance(got, np.ndarray):
                return sorted_rows(got)
            self._switch_paths[a, b] = sorted(got)
        paths = self.switch_paths(a, b)
        return np.array(paths, dtype=np.int64).reshape(len(paths), len(paths[0]) if paths else 0)

    def _shortest_node_paths(self, a: int, b: int) -> list[list[int]]:
        """Every fewest-hop node path from switch ``a`` to switch ``b`` (in no particular order: callers sort).

        perf: one breadth-first search per source switch, cached, instead of one per pair (a
        1,024-leaf fabric has a million leaf pairs and 1,024 leaves).
        """
        pred = self._switch_pred.get(a)
        if pred is None:
            pred = self._switch_pred[a] = nx.predecessor(self._switch_graph, a) if a in self._switch_graph else {}
        if b not in pred:
            return []  # not connected (separate planes or networks): the callers skip this port pair
        out, stack = [], [[b]]
        while stack:
            tail = stack.pop()
            if tail[-1] == a:
                out.append(tail[::-1])
            else:
                stack.extend(tail + [u] for u in pred[tail[-1]])
        return out

    def paths(self, src: int, dst: int, tcp: bool = False) -> list[Path]:
        """All equal-cost link paths from GPU ``src`` to GPU ``dst`` (sorted, cached).

        Intra-host pairs use the host's fewest-hop local paths; other pairs go GPU -> NIC (inside the
        host), out of a NIC port, over fewest-hop switch paths, and NIC -> GPU at the other end.
        ``tcp``: the pair belongs to a communicator that mixes NIC families, so it talks TCP through
        the hosts' Ethernet NICs even if its own two NICs could form an RDMA connection.
        """
        key = (src, dst, tcp) if tcp else (src, dst)
        cached = self._gpu_paths.get(key)
        if cached is not None:
            return cached
        m_s, _, base_s, nics_s, ls = self._local(src)
        if src == dst:
            paths: list[Path] = [()]
        elif self.gpu_host[src] == self.gpu_host[dst]:
            paths = [tuple(base_s + k for k in p) for p in m_s.local_paths(ls, dst - (src - ls))]
        else:
            r_s, r_d = self._nics_for(src, dst, tcp)
            candidates = [(up, *mid, down) for up, sw_a, sw_b, down in self.port_pairs(src, dst, r_s, r_d)
                          for mid in self.switch_paths(sw_a, sw_b)]
            if not candidates:
                raise self.unreachable(src, dst)
            shortest = min(len(p) for p in candidates)
            paths = self.attach(src, dst, sorted(p for p in candidates if len(p) == shortest), r_s, r_d)
        self._gpu_paths[key] = paths
        return paths

    def unreachable(self, src: int, dst: int) -> NetsimError:
        """The error for GPUs ``src`` and ``dst`` that no path joins (builders may give a better one)."""
        return NetsimError(f"no path between GPU {src} and GPU {dst} (their NICs share no network)")

    def _nics_for(self, src: int, dst: int, tcp: bool = False) -> tuple[int, int]:
        """Local NIC indices a message from ``src`` to ``dst`` uses (the transport rule).

        ``tcp`` forces the Ethernet NICs when the hosts have them (a mixed communicator).
        """
        m_s, _, _, nics_s, ls = self._local(src)
        m_d, _, _, nics_d, ld = self._local(dst)
        r_s, r_d = m_s.gpu_nic[ls], m_d.gpu_nic[ld]
        if m_s.forward_rails:  # rail-only: forwarded inside the source host to the destination's rail
            r_s = r_d
        a, b = self.nic_profile[nics_s[r_s]], self.nic_profile[nics_d[r_d]]
        native = same_fabric(a, b) or a.transport == b.transport == "tcp"
        if native and not (tcp and self.tcp_nic):
            return r_s, r_d
        h_s, h_d = int(self.gpu_host[src]), int(self.gpu_host[dst])
        if h_s not in self.tcp_nic or h_d not in self.tcp_nic:
            raise NetsimError(f"GPUs {src} and {dst} have NICs of different families "
                              f"({self.nic_profile[nics_s[r_s]].name}, {self.nic_profile[nics_d[r_d]].name}) "
                              "and no Ethernet NIC to fall back to TCP")
        return self.tcp_nic[h_s], self.tcp_nic[h_d]

    def transport(self, src: int, dst: int, tcp: bool = False) -> NicProfile | None:
        """The NIC profile whose transport carries ``src`` -> ``dst`` (``None`` inside a host)."""
        if self.gpu_host[src] == self.gpu_host[dst]:
            return None
        r_s, _ = self._nics_for(src, dst, tcp)
        return self.nic_profile[self.hosts[int(self.gpu_host[src])][3][r_s]]

    def port_pairs(self, src: int, dst: int, r_s: int | None = None,
                   r_d: int | None = None) -> list[tuple[int, int, int, int]]:
        """``(up_link, src_switch, dst_switch, down_link)`` for every port pair of the NICs in use."""
        if r_s is None or r_d is None:
            r_s, r_d = self._nics_for(src, dst)
        nic_s = self.hosts[int(self.gpu_host[src])][3][r_s]
        nic_d = self.hosts[int(self.gpu_host[dst])][3][r_d]
        return [(up, sw_a, sw_b, down) for up, sw_a, _ in self.nic_ports[nic_s]
                for _, sw_b, down in self.nic_ports[nic_d]]

    def attach(self, src: int, dst: int, fabric_paths: list[Path], r_s: int | None = None,
               r_d: int | None = None) -> list[Path]:
        """Extend NIC-to-NIC ``fabric_paths`` with the GPU->NIC and NIC->GPU segments inside the hosts."""
        if r_s is None or r_d is None:
            r_s, r_d = self._nics_for(src, dst)
        m_s, _, base_s, _, ls = self._local(src)
        m_d, _, base_d, _, ld = self._local(dst)
        ups = [tuple(base_s + k for k in p) for p in m_s.local_paths(ls, m_s.nic_node(r_s))]
        downs = [tuple(base_d + k for k in p) for p in m_d.local_paths(m_d.nic_node(r_d), ld)]
        return [a + f + b for a in ups for f in fabric_paths for b in downs]

    def nic_families(self, gpus) -> list[str]:
        """Distinct NIC families (``infiniband``, ``roce``, ...) the GPUs' own NICs belong to, sorted."""
        return sorted({self.nic_profile[int(self.gpu_nic[g])].family for g in gpus})

    def mixes_fabrics(self, gpus) -> bool:
        """The communicator transport rule: True when ``gpus`` span several hosts whose NICs cannot all
        form RDMA connections with each other (Holmes: such a communicator falls back to TCP over the
        Ethernet NICs for every inter-host pair; intra-host pairs stay on the host's links)."""
        gpus = [int(g) for g in gpus]
        if len({int(self.gpu_host[g]) for g in gpus}) < 2:
            return False
        profiles = list({self.nic_profile[int(self.gpu_nic[g])] for g in gpus})
        first = profiles[0]
        return any(not (same_fabric(first, p) or first.transport == p.transport == "tcp") for p in profiles[1:])

    def nic_of(self, gpu: int) -> int:
        """Graph node of the NIC ``gpu`` sends through."""
        return int(self.gpu_nic[gpu])

    def path_latency_s(self, path: Path) -> float:
        """Sum of propagation latencies along ``path``."""
        return float(self.links.latency_s[list(path)].sum()) if path else 0.0

    def message_overhead_s(self, src: int, dst: int, tcp: bool = False) -> float:
        """Per-message overhead of a message from GPU ``src`` to GPU ``dst``."""
        profile = self.transport(src, dst, tcp)
        return self.intra_overhead_s if profile is None else profile.latency_s

    # ------------------------------------------------------------------ batches of GPU pairs
    def path_sets(self, src, dst, tcp=False) -> PathSets:
        """The equal-cost paths of GPU pairs ``src[i] -> dst[i]`` as arrays (a :class:`PathSets`):
        :meth:`paths` for a batch, without a Python list per pair.

        Examples
        --------
        >>> from netsim.topology import leaf_spine
        >>> topo = leaf_spine(leaves=2, spines=4, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=1,
        ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
        >>> topo.path_sets([0, 0, 0], [0, 1, 7]).n.tolist()
        [1, 1, 4]
        """
        if self._path_index is None:
            self._path_index = PathIndex(self)
        return self._path_index.batch(src, dst, tcp)

    def path_latencies_s(self, ptr: np.ndarray, links: np.ndarray) -> np.ndarray:
        """:meth:`path_latency_s` of every path of a CSR (path ``i`` is ``links[ptr[i]:ptr[i + 1]]``)."""
        return path_sums(self.links.latency_s, np.asarray(ptr, dtype=np.int64), np.asarray(links, dtype=np.int64))

    def message_overheads_s(self, src, dst, tcp=False) -> np.ndarray:
        """:meth:`message_overhead_s` of GPU pairs ``src[i] -> dst[i]``."""
        if self._path_index is None:
            self._path_index = PathIndex(self)
        return self._path_index.overheads_s(src, dst, tcp)

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

"""Placement policies: which GPU each rank of a job runs on; registered by their YAML name.

A policy is built with its YAML options and maps ``n_ranks`` ranks to distinct GPUs:
``place(n_ranks, topology, rng, free=None) -> numpy array`` (index = rank, value = GPU id).
``free`` (sorted GPU ids) restricts the choice to the GPUs earlier jobs of a mix left free.
"""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np

from netsim.errors import ConfigError
from netsim.registry import Registry
from netsim.topology import Topology


class Placement(Protocol):
    """Maps ranks to GPUs."""

    def place(self, n_ranks: int, topology: Topology, rng: np.random.Generator,
              free: np.ndarray | None = None) -> np.ndarray: ...


PLACEMENT: Registry[Placement] = Registry("placement policy")


def _check_fits(n_ranks: int, topology: Topology, free: np.ndarray | None = None) -> None:
    if n_ranks > topology.n_gpus:
        raise ConfigError(f"{n_ranks} ranks do not fit on {topology.n_gpus} GPUs", "workload.ranks")
    if free is not None and n_ranks > len(free):
        raise ConfigError(f"{n_ranks} ranks do not fit on the {len(free)} GPUs the earlier jobs left free "
                          f"(of {topology.n_gpus})", "workload.ranks")


@PLACEMENT.register("sequential")
class Sequential:
    """Rank i on GPU i: fills hosts in order, GPUs of a host in order (Megatron/NCCL default).

    A training job's ranks are in Megatron's order (TP fastest, then DP, then PP), so consecutive
    GPUs form its TP groups, then its DP groups, and pipeline stages are the outermost blocks.
    """

    def place(self, n_ranks: int, topology: Topology, rng: np.random.Generator,
              free: np.ndarray | None = None) -> np.ndarray:
        """Ranks 0..n-1 on the first n (free) GPUs."""
        _check_fits(n_ranks, topology, free)
        return np.arange(n_ranks) if free is None else np.asarray(free[:n_ranks])


@PLACEMENT.register("random")
class Random:
    """Random placement from the run seed.

    Parameters
    ----------
    by:
        ``gpu``: every rank on a random free GPU. ``host``: hosts in random order, ranks fill each
        host's GPUs in order (what a scheduler handing out whole nodes does).
    """

    def __init__(self, by: Literal["gpu", "host"] = "gpu"):
        if by not in ("gpu", "host"):
            raise ConfigError(f"'by' must be 'gpu' or 'host', got {by!r}", "placement.by")
        self.by = by

    def place(self, n_ranks: int, topology: Topology, rng: np.random.Generator,
              free: np.ndarray | None = None) -> np.ndarray:
        """A seeded random rank -> GPU map (over the free GPUs)."""
        _check_fits(n_ranks, topology, free)
        if self.by == "gpu":
            if free is None:
                return rng.permutation(topology.n_gpus)[:n_ranks]
            return np.asarray(free)[rng.permutation(len(free))[:n_ranks]]
        hosts = rng.permutation(topology.n_hosts)
        order = np.argsort(topology.gpu_host, kind="stable")
        if free is not None:
            order = order[np.isin(order, free)]
        by_host = [order[topology.gpu_host[order] == h] for h in range(topology.n_hosts)]
        return np.concatenate([by_host[h] for h in hosts])[:n_ranks]


@PLACEMENT.register("holmes")
class Holmes:
    """Holmes's NIC-aware placement: ranks sorted by NIC family, so each cluster is a contiguous block.

    GPUs are ordered by their NIC family (the family with the most NIC bandwidth per GPU first,
    ties by lowest GPU id), then by GPU id, and rank i takes the i-th. With Megatron's rank order
    (pipeline stages outermost) a stage's TP and DP groups then stay inside one cluster whenever
    the clusters hold whole stages, and only pipeline sends cross clusters. The self-adapting
    layer partition is the training workload's ``partition: auto`` under this placement.
    """

    def place(self, n_ranks: int, topology: Topology, rng: np.random.Generator,
              free: np.ndarray | None = None) -> np.ndarray:
        """Free GPUs sorted by (NIC family rank, GPU id); the first ``n_ranks``."""
        _check_fits(n_ranks, topology, free)
        gpus = np.arange(topology.n_gpus) if free is None else np.asarray(free)
        family_rank = {f: i for i, f in enumerate(nic_family_order(topology))}
        families = [topology.nic_profile[int(topology.gpu_nic[g])].family for g in gpus]
        keys = np.array([family_rank[f] for f in families], dtype=np.int64)
        return gpus[np.lexsort((gpus, keys))][:n_ranks]


@PLACEMENT.register("topology")
class TopologyAware:
    """Topology-aware (packed) placement, as cluster schedulers place jobs: whole free hosts first,
    all under one leaf switch when some leaf has room (the fullest such leaf, best fit, to keep
    others whole), else over as few leaves as possible (those with the most free GPUs first).

    Hosts are grouped by the switches their NICs attach to (a leaf, a dual-ToR pair, a dragonfly
    group's switch); within a group, hosts with the most free GPUs first, GPUs in id order, so a
    job's consecutive ranks (its TP groups) share hosts and its DP rings stay under few leaves.
    On a fabric of pods (three-tier Clos), leaves are chosen pod by pod the same way, as Meta's
    scheduler keeps a job's model-parallel groups inside a pod: the fullest pod that still holds the
    job (best fit), else the pods with the most free GPUs first, each filled before the next.
    """

    def place(self, n_ranks: int, topology: Topology, rng: np.random.Generator,
              free: np.ndarray | None = None) -> np.ndarray:
        """The ``n_ranks`` free GPUs chosen as described above (rank i on the i-th)."""
        _check_fits(n_ranks, topology, free)
        gpus = np.arange(topology.n_gpus) if free is None else np.asarray(free)
        domain = host_domains(topology)
        hosts = topology.gpu_host[gpus]
        per_host = np.bincount(hosts, minlength=topology.n_hosts)
        per_domain = np.bincount(domain, weights=per_host, minlength=domain.max() + 1)
        fits = np.flatnonzero(per_domain >= n_ranks)
        if len(fits):  # best fit: the domain with the fewest free GPUs that still holds the job
            order = [int(fits[np.argmin(per_domain[fits])])]
        else:
            order = _by_pod(topology, domain, per_domain, n_ranks)
        rank = np.empty(len(per_domain), dtype=np.int64)
        rank[order] = np.arange(len(order))
        keep = np.isin(domain[hosts], order)
        gpus, hosts = gpus[keep], hosts[keep]
        key = np.lexsort((gpus, -per_host[hosts], rank[domain[hosts]]))
        return gpus[key][:n_ranks]


def _by_pod(topology: Topology, domain: np.ndarray, per_domain: np.ndarray, n_ranks: int) -> list[int]:
    """Domains in filling order: most free GPUs first; on a fabric of pods, pod by pod (the fullest pod
    that holds the job alone, else pods with the most free GPUs first)."""
    pod_of_host = _host_pods(topology)
    order = np.argsort(-per_domain, kind="stable")
    if pod_of_host is None:
        return order.tolist()
    pod = np.full(len(per_domain), -1, dtype=np.int64)
    pod[domain] = pod_of_host
    per_pod = np.bincount(pod[pod >= 0], weights=per_domain[pod >= 0])
    fits = np.flatnonzero(per_pod >= n_ranks)
    if len(fits):
        pods = [int(fits[np.argmin(per_pod[fits])])]
    else:
        pods = np.argsort(-per_pod, kind="stable").tolist()
    rank = {p: i for i, p in enumerate(pods)}
    return sorted((int(d) for d in order if pod[d] in rank), key=lambda d: rank[pod[d]])


def _host_pods(topology: Topology) -> np.ndarray | None:
    """Per host, the pod of the switch its first NIC port reaches; None on a fabric without pods."""
    nodes = topology.graph.nodes
    out = np.zeros(topology.n_hosts, dtype=np.int64)
    for h, (_model, _gpu0, _base, nics) in enumerate(topology.hosts):
        ports = topology.nic_ports.get(nics[0], [])
        pod = nodes[ports[0][1]].get("pod") if ports else None
        if pod is None:
            return None
        out[h] = pod
    return out


def host_domains(topology: Topology) -> np.ndarray:
    """Per host, a small integer naming the set of switches its NICs attach to (hosts under the
    same leaf, or the same dual-ToR pair, share it)."""
    graph = topology.graph
    keys: dict[frozenset, int] = {}
    out = np.zeros(topology.n_hosts, dtype=np.int64)
    for h, (_model, _gpu0, _base, nics) in enumerate(topology.hosts):
        switches = frozenset(v for nic in set(nics) for v in graph.successors(nic)
                             if graph.nodes[v].get("kind") not in ("gpu", "nic", "host"))
        out[h] = keys.setdefault(switches, len(keys))
    return out


def nic_family_order(topology: Topology) -> list[str]:
    """NIC families of the fabric, fastest first: by mean NIC bandwidth per GPU (over the family's
    GPUs), then by first GPU id."""
    per_gpu: dict[str, list[float]] = {}
    first: dict[str, int] = {}
    for model, gpu0, _base, nics in topology.hosts:
        by_family: dict[str, set[int]] = {}
        for local in range(model.n_gpus):
            nic = nics[model.gpu_nic[local]]
            family = topology.nic_profile[nic].family
            first.setdefault(family, gpu0 + local)
            by_family.setdefault(family, set()).add(nic)
        for family, fam_nics in by_family.items():
            gpus = sum(1 for i in range(model.n_gpus) if nics[model.gpu_nic[i]] in fam_nics)
            bw = sum(topology.nic_profile[n].port_capacity_Bps * topology.nic_profile[n].ports for n in fam_nics)
            per_gpu.setdefault(family, []).extend([bw / gpus] * gpus)
    return sorted(per_gpu, key=lambda f: (-sum(per_gpu[f]) / len(per_gpu[f]), first[f]))


def make_placement(name: str, options: dict | None = None, path: str = "placement") -> Placement:
    """Build the placement policy registered as ``name``."""
    return PLACEMENT.create(name, options, path=path)


__all__ = ["PLACEMENT", "Placement", "host_domains", "make_placement", "nic_family_order"]

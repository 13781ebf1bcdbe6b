"""Placement policies: which GPU each rank of a job runs on; registered by their YAML name.

A policy is built with its YAML options and maps ``n_ranks`` ranks to distinct GPUs:
``place(n_ranks, topology, rng) -> numpy array`` (index = rank, value = GPU id).
"""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np

from netsim.errors import ConfigError
from netsim.registry import Registry
from netsim.topology import Topology


class Placement(Protocol):
    """Maps ranks to GPUs."""

    def place(self, n_ranks: int, topology: Topology, rng: np.random.Generator) -> np.ndarray: ...


PLACEMENT: Registry[Placement] = Registry("placement policy")


def _check_fits(n_ranks: int, topology: Topology) -> None:
    if n_ranks > topology.n_gpus:
        raise ConfigError(f"{n_ranks} ranks do not fit on {topology.n_gpus} GPUs", "workload.ranks")


@PLACEMENT.register("sequential")
class Sequential:
    """Rank i on GPU i: fills hosts in order, GPUs of a host in order (Megatron/NCCL default)."""

    def place(self, n_ranks: int, topology: Topology, rng: np.random.Generator) -> np.ndarray:
        """Ranks 0..n-1 on GPUs 0..n-1."""
        _check_fits(n_ranks, topology)
        return np.arange(n_ranks)


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

    def place(self, n_ranks: int, topology: Topology, rng: np.random.Generator) -> np.ndarray:
        """A seeded random rank -> GPU map."""
        _check_fits(n_ranks, topology)
        if self.by == "gpu":
            return rng.permutation(topology.n_gpus)[:n_ranks]
        hosts = rng.permutation(topology.n_hosts)
        order = np.argsort(topology.gpu_host, kind="stable")
        by_host = [order[topology.gpu_host[order] == h] for h in range(topology.n_hosts)]
        return np.concatenate([by_host[h] for h in hosts])[:n_ranks]


def make_placement(name: str, options: dict | None = None, path: str = "placement") -> Placement:
    """Build the placement policy registered as ``name``."""
    return PLACEMENT.create(name, options, path=path)


__all__ = ["PLACEMENT", "Placement", "make_placement"]

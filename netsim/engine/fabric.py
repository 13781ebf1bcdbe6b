"""The Fabric: the fluid network that runs messages and schedules on a SimPy clock.

One interface, two executors chosen by ``backend``: ``"compiled"`` (:mod:`netsim.engine.core`,
the default when numba is installed) runs every instant in numba; ``"reference"``
(:mod:`netsim.engine.reference`) is plain Python, message by message, and is the oracle the
compiled one is held to (equal results to 1e-9, a property test). Both give the same allocation:
messages on a connection go in order, rates follow max-min fairness and are re-solved for the
parts of the contention graph a change touches, a message arrives when its last byte has drained
plus its path's latency and the per-message overhead.
"""

from __future__ import annotations

import math

import simpy

from netsim.engine.clock import Environment
from netsim.engine.model import Connection, Schedule
from netsim.topology import CORE_LINK_KINDS, Topology

#: Switch-to-switch link kinds (the core): where congestion is measured and what an ideal unbounds.
CORE_KINDS = CORE_LINK_KINDS
BACKENDS = ("compiled", "reference")


def default_backend() -> str:
    """``compiled`` when numba is installed, else ``reference``."""
    from netsim.solver import COMPILED
    return "compiled" if COMPILED else "reference"


class Fabric:
    """A fluid network on a SimPy environment.

    Parameters
    ----------
    env:
        The SimPy environment (use :class:`~netsim.engine.clock.Environment` to count events).
    topology:
        The fabric's links and paths.
    routing:
        The routing policy deciding each connection's paths.
    backend:
        ``"compiled"`` or ``"reference"`` (default: :func:`default_backend`).
    completion_tolerance_s:
        Flows whose last bytes drain within this time of each other complete together.
    record_flows:
        Keep one record per message (for ``flows.parquet``).
    track_congestion:
        Track offered load per switch link under the policy and under ideal spraying.
    link_series_bins:
        Bins of the per-link utilisation series (0: off).
    unbounded_links:
        Optional boolean mask of links that never limit a flow: how :mod:`netsim.engine.ideal` makes
        a fabric's switching core non-blocking.

    Examples
    --------
    >>> import numpy as np
    >>> from netsim.topology import leaf_spine
    >>> from netsim.routing import make_routing
    >>> topo = leaf_spine(leaves=2, spines=1, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1,
    ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    >>> env = Environment()
    >>> fabric = Fabric(env, topo, make_routing("ecmp", topo, np.random.default_rng(0)))
    >>> done = fabric.send(0, 1, 1e9)
    >>> env.run(done); env.now
    1.0
    """

    def __new__(cls, env: simpy.Environment, topology: Topology, routing, *, backend: str | None = None,
                compiled: bool | None = None, **options):
        if cls is Fabric:
            if compiled is not None:  # (the earlier spelling of the backend choice)
                backend = "compiled" if compiled else "reference"
            if backend is None and (options.get("solver") is not None or options.get("small_component") is not None):
                backend = "reference"  # a solver (or its component threshold) of one's own: the Python executor
            backend = backend or default_backend()
            if backend not in BACKENDS:
                raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
            if backend == "compiled":
                from netsim.engine.core import CompiledCore
                cls = CompiledCore
            else:
                from netsim.engine.reference import ReferenceFabric
                cls = ReferenceFabric
        return super().__new__(cls)

    # The interface both backends implement (see netsim.engine.core and netsim.engine.reference).
    def send(self, src: int, dst: int, size_bytes: float, connection: Connection | None = None, *,
             cap_Bps: float = math.inf, event: simpy.Event | None = None) -> simpy.Event:
        """Send ``size_bytes`` from GPU ``src`` to GPU ``dst``; the event fires when the last byte arrived."""
        raise NotImplementedError

    def queue_pair_totals(self) -> tuple[int, int]:
        """(connections that carried a message, their queue pairs in all)."""
        raise NotImplementedError

    def submit(self, schedule: Schedule):
        """Start ``schedule`` now; returns its run, with ``times`` (each task's end) and a ``done`` event."""
        raise NotImplementedError


__all__ = ["BACKENDS", "CORE_KINDS", "Environment", "Fabric", "default_backend"]

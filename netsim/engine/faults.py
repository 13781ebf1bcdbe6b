"""Timed faults: links, NICs and switches going down, coming back, flapping or running degraded, and how
routing learns of them.

A fault changes a link's capacity at once (flows on a dead link stall at rate 0; on a degraded one
they are re-solved). The routing policy learns of it only ``reaction_s`` later (ECMP's routing
reconvergence, Ethereal's queue-pair timeout, C4P's detection): then it revises its choices and
the Fabric moves in-flight messages onto their new routes. No byte is lost: a stalled message
keeps its remaining bytes until a live route carries them.

A ``flap`` entry is expanded here into its down/up pairs; ``gpu`` entries (slow GPUs) are not the
network's business and are skipped (the workload applies them, :mod:`netsim.experiment.faultplan`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from netsim.errors import ConfigError
from netsim.topology import LINK_KINDS, Topology
from netsim.topology.topology import SWITCH_KINDS


@dataclass(frozen=True)
class Fault:
    """A resolved fault: at ``at_s`` the ``links`` get ``fraction`` of their nominal capacity (0 = down)."""

    at_s: float
    links: tuple[int, ...]
    fraction: float


def _node(topology: Topology, name: str, path: str) -> int:
    node = _find(topology, name)
    if node is None:
        raise ConfigError(f"no node named {name!r} in the topology (names look like leaf0, spine3, h2.nic1)", path)
    return node


def _find(topology: Topology, name: str) -> int | None:
    for node, node_name in topology.graph.nodes(data="name"):
        if node_name == name:
            return node
    return None


def _ends(topology: Topology, spec: str) -> list[str]:
    """Split ``a-b`` where both sides name nodes (names may contain hyphens: ``eth-core``)."""
    cuts = [i for i, ch in enumerate(spec) if ch == "-"]
    for i in cuts:
        a, b = spec[:i].strip(), spec[i + 1:].strip()
        if _find(topology, a) is not None and _find(topology, b) is not None:
            return [a, b]
    return spec.split("-", 1)  # neither split names two nodes: report the first side that does not


def _cable(topology: Topology, text: str, path: str) -> tuple[int, ...]:
    """Link ids of ``a-b`` (both directions), ``a->b`` (one), optionally ``#k`` among parallel cables."""
    spec, _, index = text.partition("#")
    if "->" in spec:
        ends, both = spec.split("->", 1), False
    elif "-" in spec:
        ends, both = _ends(topology, spec), True
    else:
        raise ConfigError(f"link {text!r}: name a cable by its ends, 'a-b' (both directions) or 'a->b' (one)",
                          path)
    a, b = (_node(topology, e.strip(), path) for e in ends)
    directions = [(a, b), (b, a)] if both else [(a, b)]
    out = []
    for u, v in directions:
        if not topology.graph.has_edge(u, v):
            raise ConfigError(f"link {text!r}: {topology.node_name(u)} and {topology.node_name(v)} are not "
                              "directly connected", path)
        parallel = sorted(topology.graph.edges[u, v]["links"])
        if index:
            if not index.isdigit() or int(index) >= len(parallel):
                raise ConfigError(f"link {text!r}: #{index} is not one of the {len(parallel)} parallel cables "
                                  f"(#0..#{len(parallel) - 1})", path)
            out.append(parallel[int(index)])
        elif len(parallel) > 1:
            raise ConfigError(f"link {text!r}: {len(parallel)} parallel cables connect these nodes; "
                              f"pick one with #0..#{len(parallel) - 1}", path)
        else:
            out.append(parallel[0])
    return tuple(out)


def _nic_links(topology: Topology, name: str, path: str) -> tuple[int, ...]:
    node = _node(topology, name, path)
    if topology.graph.nodes[node].get("kind") != "nic":
        raise ConfigError(f"{name!r} is not a NIC (NIC names look like h2.nic1)", path)
    kinds = [LINK_KINDS.index("nic_up"), LINK_KINDS.index("nic_down")]
    lt = topology.links
    mask = ((lt.src == node) | (lt.dst == node)) & np.isin(lt.kind, kinds)
    return tuple(int(i) for i in np.flatnonzero(mask))


def _switch_links(topology: Topology, name: str, path: str) -> tuple[int, ...]:
    node = _node(topology, name, path)
    if topology.graph.nodes[node].get("kind") not in SWITCH_KINDS:
        raise ConfigError(f"{name!r} is not a switch (switch names look like leaf0, spine3)", path)
    lt = topology.links
    return tuple(int(i) for i in np.flatnonzero((lt.src == node) | (lt.dst == node)))


def fault_links(fault, topology: Topology, path: str) -> tuple[int, ...]:
    """Link ids a link, nic or switch fault entry hits (ConfigError at ``path.<target>`` otherwise)."""
    if fault.link is not None:
        return _cable(topology, fault.link, f"{path}.link")
    if fault.nic is not None:
        return _nic_links(topology, fault.nic, f"{path}.nic")
    return _switch_links(topology, fault.switch, f"{path}.switch")


def resolve_fault(fault, topology: Topology, path: str) -> list[Fault]:
    """The timed capacity changes of one fault entry (a ``flap``: its down/up pairs); [] for a GPU."""
    if fault.gpu is not None:
        return []
    links = fault_links(fault, topology, path)
    if fault.action == "flap":
        out = []
        for k in range(fault.flaps):
            start = float(fault.at) + k * float(fault.period)
            out += [Fault(start, links, 0.0), Fault(start + float(fault.down_for), links, 1.0)]
        return out
    fraction = {"down": 0.0, "up": 1.0}.get(fault.action, fault.fraction)
    return [Fault(float(fault.at), links, float(fraction))]


def resolve_faults(faults, topology: Topology) -> list[Fault]:
    """Turn ``spec.faults`` into link ids on ``topology``, in time order (stable for equal times).

    Flaps are expanded into down/up pairs; GPU entries are skipped. Raises a ConfigError with the
    YAML path (``faults.2.link``) for names that do not resolve.
    """
    out = []
    for i, f in enumerate(faults):
        out += resolve_fault(f, topology, f"faults.{i}")
    return sorted(out, key=lambda f: f.at_s)


def fault_process(env: simpy.Environment, fabric, faults: list[Fault]):
    """SimPy process applying ``faults`` to ``fabric`` and notifying its routing after its reaction time.

    The policy learns each fault's outcome (the state of every faulty link right after it)
    ``reaction_s`` later, in order.
    """
    reaction = float(fabric.routing.reaction_s)
    nominal = fabric.capacity_Bps
    state: dict[int, float] = {}

    def notify(snapshot: dict[int, float]):
        yield env.timeout(reaction)
        fabric.routing_changed(snapshot)

    for fault in faults:
        if fault.at_s > env.now:
            yield env.timeout(fault.at_s - env.now)
        for link in fault.links:
            if fault.fraction >= 1.0:
                state.pop(link, None)
            else:
                state[link] = fault.fraction
        fabric.set_capacity({link: nominal[link] * fault.fraction for link in fault.links})
        env.process(notify(dict(state)))

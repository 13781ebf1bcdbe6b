"""Run one experiment spec: build the topology, place ranks, simulate, collect records."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field

import numpy as np

from netsim.collectives import CollectiveRecord
from netsim.config import ExperimentSpec, LinkSpec
from netsim.engine import Environment, Fabric
from netsim.errors import NetsimError
from netsim.engine.faults import fault_process, resolve_faults
from netsim.placement import make_placement
from netsim.routing import make_routing
from netsim.topology import Topology, leaf_spine
from netsim.topology.dragonfly import dragonfly, frontier
from netsim.topology.multicluster import multi_cluster
from netsim.collectives.ideal import IdealModel
from netsim.workload import SequencePlan, plan_workload, run_workload


@dataclass
class RunResult:
    """Everything one simulation produced, as plain records (DataFrames are built in ``results``)."""

    spec: ExperimentSpec
    run_id: str
    topology: Topology
    gpus: np.ndarray
    fabric: Fabric
    collectives: list[CollectiveRecord]
    sim_time_s: float
    wall_s: float
    events: int
    extra: dict = field(default_factory=dict)


def spec_hash(spec: ExperimentSpec) -> str:
    """Stable hash of a resolved spec (its canonical JSON): the run id and the manifest's config hash."""
    canon = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:12]


def build_topology(spec: ExperimentSpec) -> Topology:
    """The fabric described by ``spec.topology``."""
    return build_topology_spec(spec.topology)


def build_topology_spec(t) -> Topology:
    """The fabric described by a topology spec (``LeafSpineSpec``, ``DragonflySpec``, ``FrontierSpec``)."""
    if t.type == "frontier":
        return frontier(groups=t.groups, nics_on_switches=t.nics_on_switches, link_bandwidth_Bps=t.link_bandwidth,
                        switch_latency_s=t.switch_latency, cable_latency_s=t.cable_latency,
                        global_links_between_groups=t.global_links_between_groups)
    if t.type == "dragonfly":
        glob = t.global_link or t.link
        nic = t.nic or LinkSpec(bandwidth=t.link.bandwidth)  # a plain NIC as fast as the cables
        return dragonfly(groups=t.groups, switches_per_group=t.switches_per_group, hosts_per_switch=t.hosts_per_switch,
                         global_links_per_switch=t.global_links_per_switch,
                         global_links_between_groups=t.global_links_between_groups, link_bandwidth_Bps=t.link.bandwidth,
                         local_latency_s=t.link.latency, global_latency_s=glob.latency, switch_latency_s=t.switch_latency,
                         nic_bandwidth_Bps=nic.bandwidth, nic_latency_s=nic.latency, nic_overhead_s=nic.overhead,
                         arrangement=t.arrangement)
    if t.type == "multi_cluster":
        return multi_cluster([{"name": c.name, **_leaf_spine_args(c)} for c in t.clusters],
                             interconnect_Bps=t.ethernet.bandwidth, interconnect_latency_s=t.ethernet.latency,
                             tcp_nic=t.ethernet.nic.resolve(), eth_latency_s=t.ethernet.nic.latency)
    return leaf_spine(**_leaf_spine_args(t), intra_overhead_s=t.intra_host.overhead)


def _leaf_spine_args(t) -> dict:
    """Keyword arguments of the leaf-spine builders from a LeafSpineSpec."""
    host_nics = {}
    for entry in t.host_nics:
        first, last = entry.hosts
        host_nics.update({h: entry.nic.resolve() for h in range(first, last + 1)})
    return dict(
        leaves=t.leaves, spines=t.spines, hosts_per_leaf=t.hosts_per_leaf, gpus_per_host=t.gpus_per_host,
        nics_per_host=t.nics_per_host, nic=t.nic.resolve(), nic_latency_s=t.nic.latency,
        uplink_bandwidth_Bps=t.uplink.bandwidth, uplink_latency_s=t.uplink.latency, uplinks_per_spine=t.uplink.count,
        intra_bandwidth_Bps=t.intra_host.bandwidth, intra_latency_s=t.intra_host.latency,
        rail_optimized=t.rail_optimized, host_nics=host_nics,
        nic_bandwidth_overrides={(o.host, o.nic): o.bandwidth for o in t.nic_overrides})


def place_ranks(spec: ExperimentSpec, topology: Topology, rng: np.random.Generator) -> np.ndarray:
    """Rank -> GPU map of the workload's communicator."""
    n_ranks = spec.workload.ranks or topology.n_gpus
    policy = make_placement(spec.placement.type, spec.placement.options)
    return policy.place(n_ranks, topology, rng)


def simulate(spec: ExperimentSpec, topology: Topology, gpus: np.ndarray, routing_rng: np.random.Generator,
             plan: SequencePlan | None = None) -> tuple[Environment, Fabric, list[CollectiveRecord]]:
    """Run the workload on a fresh SimPy environment until nothing is left to do."""
    env = Environment()
    routing = make_routing(spec.routing.type, topology, routing_rng, spec.routing.options)
    fabric = Fabric(env, topology, routing, completion_tolerance_s=spec.engine.completion_tolerance,
                    record_flows=spec.engine.record_flows, track_congestion=spec.engine.congestion)
    records: list[CollectiveRecord] = []
    plan = plan or plan_workload(spec.workload, gpus.tolist())
    ideal = IdealModel(topology, spec.engine.completion_tolerance) if spec.engine.ideal else None
    work = env.process(run_workload(env, fabric, plan, records=records, ideal=ideal))
    faults = resolve_faults(spec.faults, topology)
    if faults:
        env.process(fault_process(env, fabric, faults))
    try:
        env.run(until=work)  # faults scheduled after the work has ended do not stretch the run
    except RuntimeError:
        if work.triggered:
            raise
    if not work.triggered or fabric.undelivered:
        down = [topology.link_name(int(i)) for i in np.flatnonzero(fabric.current_capacity_Bps == 0)]
        raise NetsimError(f"{fabric.undelivered} message(s) were never delivered: links stayed down with no live "
                          f"route left ({', '.join(down[:6])}{' ...' if len(down) > 6 else ''}); schedule an "
                          "'up' fault or fail a link with an alternative path")
    fabric.finalize()
    records.sort(key=lambda r: (r.start_s, r.step, r.iteration))
    return env, fabric, records


def _rngs(spec: ExperimentSpec) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent (placement, routing) generators spawned from the run seed."""
    return tuple(np.random.default_rng(s) for s in np.random.SeedSequence(spec.seed).spawn(2))


def prepare(spec: ExperimentSpec) -> tuple[Topology, np.ndarray]:
    """Everything before the simulation (topology and placement): what ``netsim validate`` checks."""
    topology = build_topology(spec)
    gpus = place_ranks(spec, topology, _rngs(spec)[0])
    make_routing(spec.routing.type, topology, _rngs(spec)[1], spec.routing.options)  # policy fits the fabric?
    plan_workload(spec.workload, gpus.tolist())  # sub-communicator selectors fit the placed ranks?
    resolve_faults(spec.faults, topology)  # fault targets exist?
    return topology, gpus


def run_experiment(spec: ExperimentSpec) -> RunResult:
    """Build, place, simulate, collect: the whole pipeline for one spec.

    Randomness: the run seed feeds a ``SeedSequence`` spawning independent generators for
    placement and routing, so a change in one never shifts the other's draws.

    Examples
    --------
    >>> from netsim.config import load_spec
    >>> result = run_experiment(load_spec("experiments/quickstart.yaml"))  # doctest: +SKIP
    >>> result.collectives[0].busbw_Bps  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    placement_rng, routing_rng = _rngs(spec)
    topology = build_topology(spec)
    gpus = place_ranks(spec, topology, placement_rng)
    plan = plan_workload(spec.workload, gpus.tolist())
    env, fabric, records = simulate(spec, topology, gpus, routing_rng, plan)
    return RunResult(spec=spec, run_id=spec_hash(spec), topology=topology, gpus=gpus, fabric=fabric,
                     collectives=records, sim_time_s=env.now, wall_s=time.perf_counter() - t0,
                     events=env.events_processed)

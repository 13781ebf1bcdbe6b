"""Collective workloads: one collective, or a sequence of them (serial or concurrent, on sub-communicators).

A workload spec is first *planned* against the placed ranks (selectors resolved, errors raised
with their YAML path before anything runs), then *run* as SimPy processes that append one
:class:`~netsim.collectives.CollectiveRecord` per call.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

import simpy

from netsim.collectives import CollectiveRecord, run_collective
from netsim.collectives.ideal import IdealModel
from netsim.collectives.nccl import FLUID, CollectiveModel
from netsim.collectives.nccl_tuning import CallProtocol
from netsim.config import CollectiveWorkload, SequenceWorkload
from netsim.engine import Fabric
from netsim.errors import ConfigError
from netsim.topology import Topology


@dataclass
class CallPlan:
    """One collective step with its communicator resolved to GPUs."""

    step: int
    label: str
    op: str
    algorithm: str
    size_bytes: float
    channels: int
    chunk_bytes: float | None
    iterations: int
    gpus: list[int]
    comm: int
    calls: int = 0  #: calls made so far (the ``iteration`` column counts across sequence repeats)
    tcp: bool = False  #: the communicator mixes NIC families, so it talks TCP (``Topology.mixes_fabrics``)
    rails: bool = False  #: channel rings on the topology's rails (the NCCL model)
    protocol: CallProtocol | None = None  #: NCCL's protocol and its costs (``None``: none, the fluid model)


@dataclass
class SequencePlan:
    """Steps run back to back (``serial``) or together (``concurrent``), ``iterations`` times."""

    mode: str
    iterations: int
    steps: list[CallPlan | SequencePlan] = field(default_factory=list)

    def calls(self) -> list[CallPlan]:
        """Every collective step, in document order."""
        out: list[CallPlan] = []
        for s in self.steps:
            out += s.calls() if isinstance(s, SequencePlan) else [s]
        return out


def select_ranks(selector: int | list[int] | str | None, gpus: Sequence[int], path: str) -> list[int]:
    """The sub-communicator of ``gpus`` (rank order) chosen by a ``ranks:`` selector.

    ``None``: all; ``N``: the first N; a list: those rank indices, in that order; ``"a:b:c"``: a
    Python slice.

    Examples
    --------
    >>> select_ranks("1::4", list(range(100, 116)), "workload.steps.0.ranks")
    [101, 105, 109, 113]
    """
    n = len(gpus)
    if selector is None:
        return list(gpus)
    if isinstance(selector, int):
        if selector > n:
            raise ConfigError(f"selects the first {selector} ranks but only {n} are available here", path)
        return list(gpus[:selector])
    if isinstance(selector, list):
        bad = [r for r in selector if r >= n]
        if bad:
            raise ConfigError(f"rank indices {bad} out of range: {n} ranks are available here (0..{n - 1})", path)
        if len(set(selector)) != len(selector):
            raise ConfigError("a rank appears twice in the list", path)
        return [gpus[r] for r in selector]
    parts = [int(p) if p.strip() else None for p in selector.split(":")]
    if len(parts) == 3 and parts[2] == 0:
        raise ConfigError(f"slice step must not be zero, got {selector!r}", path)
    chosen = list(gpus[slice(*parts)])
    if not chosen:
        raise ConfigError(f"slice {selector!r} selects no rank out of {n}", path)
    return chosen


def plan_workload(workload: CollectiveWorkload | SequenceWorkload, gpus: Sequence[int],
                  path: str = "workload", topology: Topology | None = None,
                  model: CollectiveModel = FLUID) -> SequencePlan:
    """Resolve every step's communicator; ConfigError (with the step's YAML path) on a bad selector.

    Distinct rank sets become distinct communicators (``comm`` ids in order of appearance), so
    concurrent sub-communicators use their own connections, while steps over the same ranks reuse
    theirs, as calls on one NCCL communicator do. With ``topology``, the transport rule is applied
    per communicator: one that mixes NIC families talks TCP (``CallPlan.tcp``). ``model`` resolves
    ``channels: auto``, the default slice and the ring order (:mod:`netsim.collectives.nccl`; without
    a topology, auto is one channel). A communicator of
    fewer than 2 ranks is refused at the selector that chose it (or at ``path`` when the fabric
    has a single GPU): a collective on one rank moves nothing, and its bandwidth would be infinite.
    """
    comms: dict[tuple[int, ...], int] = {tuple(gpus): 0}
    counter = [0]

    def call(w: CollectiveWorkload, members: list[int], source: str) -> CallPlan:
        if len(members) < 2:
            raise ConfigError(f"a collective needs at least 2 ranks, got {len(members)}", source)
        step = counter[0]
        counter[0] += 1
        comm = comms.setdefault(tuple(members), len(comms))
        tcp = topology is not None and topology.mixes_fabrics(members)
        how = model.call(w.op, w.algorithm, w.protocol, w.size, w.channels, w.chunk, members, topology)
        return CallPlan(step, w.label or f"{w.op}/{w.algorithm}", w.op, how.algorithm, w.size, how.channels,
                        how.slice_bytes(w.op, how.algorithm, w.size, len(members)), w.iterations, members, comm,
                        tcp=tcp, rails=how.rails, protocol=how.protocol)

    def walk(w: SequenceWorkload, members: list[int], at: str, source: str) -> SequencePlan:
        plan = SequencePlan(w.mode, w.iterations)
        for i, s in enumerate(w.steps):
            selector = f"{at}.steps.{i}.ranks"
            sub = select_ranks(s.ranks, members, selector)
            chosen = selector if s.ranks is not None else source
            plan.steps.append(walk(s, sub, f"{at}.steps.{i}", chosen) if isinstance(s, SequenceWorkload)
                              else call(s, sub, chosen))
        return plan

    source = f"{path}.ranks" if workload.ranks is not None else path
    if isinstance(workload, SequenceWorkload):
        return walk(workload, list(gpus), path, source)
    return SequencePlan("serial", 1, [call(workload, list(gpus), source)])


def run_workload(env: simpy.Environment, fabric: Fabric, plan: SequencePlan, *, records: list[CollectiveRecord],
                 ideal: IdealModel | None = None, job: int = 0) -> Generator:
    """Run a planned workload to completion, appending one record per collective call.

    ``ideal`` (optional) gives each call its non-blocking lower bound.
    """
    for _ in range(plan.iterations):
        if plan.mode == "serial":
            for step in plan.steps:
                yield env.process(_run_step(env, fabric, step, records, ideal, job))
        else:
            yield env.all_of([env.process(_run_step(env, fabric, s, records, ideal, job)) for s in plan.steps])


def _run_step(env, fabric, step, records, ideal, job) -> Generator:
    if isinstance(step, SequencePlan):
        yield from run_workload(env, fabric, step, records=records, ideal=ideal, job=job)
        return
    if step.tcp:
        fabric.use_tcp(job, step.comm)
    bound = ideal.ideal(step.op, step.algorithm, step.gpus, step.size_bytes, channels=step.channels,
                        chunk_bytes=step.chunk_bytes, tcp=step.tcp, rails=step.rails,
                        protocol=step.protocol) if ideal is not None else None
    for _ in range(step.iterations):
        start = env.now
        yield env.process(run_collective(env, fabric, step.op, step.algorithm, step.gpus, step.size_bytes,
                                         channels=step.channels, job=job, comm=step.comm,
                                         chunk_bytes=step.chunk_bytes, tcp=step.tcp, rails=step.rails,
                                         protocol=step.protocol))
        records.append(CollectiveRecord(
            job, step.calls, step.op, step.algorithm, step.size_bytes, len(step.gpus), step.channels, start, env.now,
            ideal_s=bound.time_s if bound else math.nan, bound_s=bound.bound_s if bound else math.nan,
            slack_s=fabric.tolerance_s * bound.chain if bound else 0.0,
            step=step.step, label=step.label, comm=step.comm,
            protocol=step.protocol.name if step.protocol is not None else ""))
        step.calls += 1

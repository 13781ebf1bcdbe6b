"""Training iterations on the Fabric: 1F1B micro-batches, TP allreduces, PP sends, DP gradient sync.

A job of ``tp x pp x dp`` ranks is laid out in Megatron's order (rank = ``stage x dp x tp +
replica x tp + tp_index``: TP fastest, then DP, then PP) and mapped to GPUs by its placement.
Every TP, DP and PP group is a communicator with its own connections; one whose GPUs mix NIC
families talks TCP over the Ethernet NICs (``Topology.mixes_fabrics``), as Holmes describes.

Each pipeline stage of each data-parallel replica (one TP group: its ``tp`` GPUs move in
lockstep) is a SimPy process that walks its 1F1B order. A forward of micro-batch ``j`` waits for
the activation from the previous stage, computes (duration from the FLOPs and the GPU profile),
allreduces over its TP group, and posts the activation to the next stage (one message of
``activation/tp`` bytes per TP rank, Megatron's scatter-gather, not waited for by the sender); a
backward does the same in the other direction with twice the compute. After its last backward
the stage synchronises gradients with the same stage of the other replicas: allreduce, or
reduce-scatter then allgather with a sharded optimizer, in ``dp_buckets`` buckets; with
``overlap_dp`` each bucket starts as soon as the last backward has produced its gradients.

Per iteration and per stage process the time splits into compute, exposed TP (every TP
allreduce blocks), exposed PP (waiting for an activation/gradient that is in flight), exposed DP
(after the last compute until the gradients are synchronised) and bubble (the rest: waiting for
a peer stage that has not sent yet, or for the slowest process at the iteration's end). The job's
breakdown is the mean over its stage processes; every part sums to the iteration time.

Slow GPUs (``speeds``, :mod:`netsim.workload.speeds`) stretch compute: a pass's compute takes the
factor of its TP group's slowest GPU at the instant it starts; an MoE layer's routed experts take
their own GPU's factor at the layer's start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace

import numpy as np
import simpy

from netsim.collectives import CollectiveRecord, get_algorithm, run_collective
from netsim.collectives.ideal import IdealModel
from netsim.collectives.nccl import FLUID, CallSettings, CollectiveModel
from netsim.config import TrainingWorkload
from netsim.engine import Fabric
from netsim.engine.model import ScheduleBuilder
from netsim.engine.reference import run_schedule
from netsim.errors import ConfigError
from netsim.routing.base import Connection
from netsim.topology import Topology
from netsim.workload.iteration import compilable, compile_iteration
from netsim.workload.iteration_moe import alltoallv_record
from netsim.workload.moe import MoEPlan, read_picks
from netsim.workload.speeds import ComputeSpeeds
from netsim.workload.training import (
    BREAKDOWN,
    GPU_PROFILES,
    GPTModel,
    GPUProfile,
    Parallelism,
    partition_layers,
    pipeline_order,
)


@dataclass(frozen=True)
class Communicator:
    """One TP, DP or PP group of a training job."""

    kind: str        #: ``tp``, ``dp`` or ``pp``
    index: int       #: position among the job's groups of that kind
    comm: int        #: communicator id on the fabric (``Connection.comm``)
    gpus: tuple[int, ...]
    families: tuple[str, ...]  #: NIC families of its GPUs
    tcp: bool        #: mixes NIC families, so it talks TCP over the Ethernet NICs


@dataclass
class TrainingPlan:
    """A training job resolved against its placed GPUs: model, layout, stage costs, communicators."""

    job: int
    name: str
    spec: TrainingWorkload
    model: GPTModel
    par: Parallelism
    gpu: GPUProfile
    gpus: list[int]                 #: rank -> GPU
    partition: list[int]            #: layers per pipeline stage
    comms: list[Communicator] = field(default_factory=list)
    tp_groups: dict[tuple[int, int], Communicator] = field(default_factory=dict)   #: (stage, replica)
    dp_groups: dict[tuple[int, int], Communicator] = field(default_factory=dict)   #: (stage, tp index)
    pp_groups: dict[tuple[int, int], Communicator] = field(default_factory=dict)   #: (replica, tp index)
    partition_trials: list[tuple[list[int], float]] = field(default_factory=list)  #: (partition, iteration s)
    #: MoE: expert-parallel groups (stage, EP group, tp index) and expert-data-parallel groups
    #: (stage, tp index, position in the EP group) that synchronise the experts' gradients.
    ep_groups: dict[tuple[int, int, int], Communicator] = field(default_factory=dict)
    edp_groups: dict[tuple[int, int, int], Communicator] = field(default_factory=dict)
    experts: MoEPlan | None = None   #: the MoE layers' costs and token routing (None: a dense model)
    #: layers per virtual stage (``pp x virtual_stages`` of them; the partition itself without interleaving)
    chunks: list[int] = field(default_factory=list)
    #: The run's collective model (:mod:`netsim.collectives.nccl`) and topology: how calls are built.
    collective_model: CollectiveModel = FLUID
    topology: Topology | None = field(default=None, repr=False, compare=False)
    #: How each ``tp``, ``dp`` and ``edp`` call was built, per (kind, op, size) (:meth:`how`).
    settings: dict[tuple[str, str, float], CallSettings] = field(default_factory=dict)

    def how(self, kind: str, op: str, size_bytes: float) -> CallSettings:
        """How a ``kind`` (``tp``, ``dp``, ``edp``) call of ``op`` and ``size_bytes`` is built under the
        run's model: its algorithm and protocol (``auto`` resolved by size, as NCCL's tuning model
        does), channels, slice and rails, from the first group of the kind (a job's groups of one kind
        are laid out alike). Computed once per kind, op and size."""
        key = (kind, op, float(size_bytes))
        hit = self.settings.get(key)
        if hit is None:
            c = self.spec.tp_comm if kind == "tp" else self.spec.dp_comm
            groups = {"tp": self.tp_groups, "dp": self.dp_groups, "edp": self.edp_groups}[kind]
            first = next(iter(groups.values()))
            hit = self.settings[key] = self.collective_model.call(op, c.algorithm, c.protocol, size_bytes,
                                                                  c.channels, None, first.gpus, self.topology)
        return hit

    def virtual(self) -> TrainingPlan:
        """The plan over virtual stages (one per model chunk, ``pp x virtual_stages``): its per-stage
        costs (compute, TP bytes, parameters) are a chunk's. Itself when there is one chunk per stage."""
        if self.par.virtual_stages == 1:
            return self
        return replace(self, partition=list(self.chunks), par=replace(self.par, pp=len(self.chunks)))

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per iteration."""
        return self.par.micro_batches(self.model)

    def rank(self, stage: int, replica: int, tp_index: int) -> int:
        """Megatron's rank of (stage, data-parallel replica, tensor-parallel index)."""
        return (stage * self.par.dp + replica) * self.par.tp + tp_index

    def stage_layers(self, stage: int) -> range:
        """The model's layer indices on ``stage``."""
        first = sum(self.partition[:stage])
        return range(first, first + self.partition[stage])

    def layer_flops(self, stage: int) -> list[float]:
        """Forward FLOPs of each layer of ``stage`` on one micro-batch, without routed experts (the
        logits added to the last stage's last layer)."""
        out = [self.experts.layer_flops(layer) if self.experts else self.model.layer_forward_flops()
               for layer in self.stage_layers(stage)]
        if stage == self.par.pp - 1:
            out[-1] += self.model.logits_forward_flops()
        return out

    def forward_s(self, stage: int) -> float:
        """One micro-batch's forward compute on one GPU of ``stage`` (its layers, the logits on the last;
        for MoE layers all but the routed experts, whose time depends on the tokens they receive)."""
        if self.experts is None:
            flops = self.partition[stage] * self.model.layer_forward_flops()
            if stage == self.par.pp - 1:
                flops += self.model.logits_forward_flops()
        else:
            flops = sum(self.layer_flops(stage))
        return self.gpu.seconds(flops / self.par.tp)

    def iteration_flops(self) -> float:
        """Model FLOPs of one iteration (MoE: routed experts at their expected load)."""
        if self.experts is None:
            return self.model.iteration_flops()
        per_micro = sum(self.experts.layer_flops(layer) + self.experts.expected_expert_flops(layer)
                        for layer in range(self.model.layers)) + self.model.logits_forward_flops()
        return 3.0 * per_micro * self.model.global_batch / self.model.micro_batch

    def backward_s(self, stage: int) -> float:
        """Backward compute: twice the forward (no activation recomputation)."""
        return 2.0 * self.forward_s(stage)

    def stage_params(self, stage: int) -> float:
        """Parameters held by ``stage`` (its layers; the embedding on the first stage, the tied output
        embedding's copy on the last)."""
        m, p = self.model, self.par.pp
        params = self.partition[stage] * m.layer_params if self.experts is None else \
            sum(self.experts.layer_params(layer) for layer in self.stage_layers(stage))
        if stage == 0:
            params += m.embedding_params
        if stage == p - 1 and p > 1:
            params += m.vocab * m.hidden
        return float(params)

    def grad_bytes(self, stage: int) -> float:
        """Gradient bytes one GPU of ``stage`` synchronises per iteration (its 1/tp shard of the stage)."""
        per = self.spec.grad_bytes or self.model.dtype_bytes
        return self.stage_params(stage) / self.par.tp * per

    def expert_grad_bytes(self, stage: int) -> float:
        """MoE: routed-expert gradient bytes one GPU of ``stage`` synchronises with its expert-data-parallel
        group (the experts it holds, a 1/tp shard)."""
        if self.experts is None:
            return 0.0
        per = self.spec.grad_bytes or self.model.dtype_bytes
        return sum(self.experts.expert_params(layer) for layer in self.stage_layers(stage)) / self.par.tp * per

    def param_bytes(self, stage: int) -> float:
        """Parameter bytes one GPU of ``stage`` holds (what a sharded optimizer allgathers)."""
        return self.stage_params(stage) / self.par.tp * self.model.dtype_bytes

    def tp_bytes(self, stage: int) -> float:
        """Bytes of the TP allreduces of one pass of ``stage``: two of ``b s h`` elements per layer."""
        return 2.0 * self.partition[stage] * self.model.activation_bytes()

    def pp_bytes(self) -> float:
        """Bytes each TP rank sends to its peer in the next (previous) stage per micro-batch."""
        return self.model.activation_bytes() / self.par.tp



def gpu_profile(spec: TrainingWorkload) -> GPUProfile:
    """The job's GPU profile with the spec's overrides."""
    base = GPU_PROFILES[spec.gpu.profile]
    return GPUProfile(base.name, spec.gpu.peak_tflops * 1e12 if spec.gpu.peak_tflops else base.peak_flops,
                      spec.gpu.efficiency or base.efficiency)


def model_of(spec: TrainingWorkload) -> GPTModel:
    """The :class:`GPTModel` of a training spec."""
    m = spec.model
    return GPTModel(m.layers, m.hidden, m.heads, m.seq_len, m.vocab, m.micro_batch, m.global_batch, m.dtype_bytes)


def plan_training(spec: TrainingWorkload, gpus: list[int], topology: Topology, *, job: int = 0, name: str = "",
                  partition: list[int] | None = None, seed: int = 0,
                  collective_model: CollectiveModel = FLUID) -> TrainingPlan:
    """Resolve a training job on its placed GPUs (rank -> GPU): communicators, transports, partition.

    ``collective_model`` settles how each call is built (:meth:`TrainingPlan.how`): ``algorithm``,
    ``protocol`` and ``channels`` ``auto`` from the first group of the kind (a job's groups of one kind
    are laid out alike) and the call's size.

    ``partition`` (layers per stage) defaults to the spec's explicit list, else the even split;
    the ``proportional`` and ``search`` strategies are applied by :func:`choose_partition`.
    ``seed`` (the run's) seeds an MoE job's token routing, with the job's index.
    """
    p = spec.parallelism
    v = p.virtual_stages if p.schedule == "interleaved" else 1
    par = Parallelism(p.tp, p.pp, p.dp, p.sharded_optimizer, p.overlap_dp, p.schedule, v)
    model = model_of(spec)
    chunks = None
    if v > 1:  # layers per virtual stage; a stage holds chunks s, s + pp, ...
        chunks = list(spec.partition) if isinstance(spec.partition, list) else \
            partition_layers(model.layers, [1.0] * par.pp * v)
        partition = [sum(chunks[s::par.pp]) for s in range(par.pp)]
    elif partition is None:
        partition = list(spec.partition) if isinstance(spec.partition, list) else \
            partition_layers(model.layers, [1.0] * par.pp)
    plan = TrainingPlan(job, name, spec, model, par, gpu_profile(spec), [int(g) for g in gpus], list(partition),
                        collective_model=collective_model, topology=topology)
    plan.chunks = chunks or list(partition)

    def add(kind: str, index: int, ranks: list[int]) -> Communicator:
        members = tuple(plan.gpus[r] for r in ranks)
        comm = Communicator(kind, index, len(plan.comms) + 1, members, tuple(topology.nic_families(members)),
                            topology.mixes_fabrics(members))
        plan.comms.append(comm)
        return comm

    for s in range(par.pp):
        for d in range(par.dp):
            plan.tp_groups[(s, d)] = add("tp", len(plan.tp_groups), [plan.rank(s, d, k) for k in range(par.tp)])
    for s in range(par.pp):
        for k in range(par.tp):
            plan.dp_groups[(s, k)] = add("dp", len(plan.dp_groups), [plan.rank(s, d, k) for d in range(par.dp)])
    for d in range(par.dp):
        for k in range(par.tp):
            plan.pp_groups[(d, k)] = add("pp", len(plan.pp_groups), [plan.rank(s, d, k) for s in range(par.pp)])
    if spec.moe is not None:
        _plan_experts(plan, topology, add, seed)
    _check_algorithms(plan, topology)
    return plan


def _plan_experts(plan: TrainingPlan, topology: Topology, add: Callable, seed: int) -> None:
    """An MoE job's EP groups (``ep`` consecutive replicas of a stage and TP index) and its
    expert-data-parallel groups (the same position in every EP group), and its :class:`MoEPlan`."""
    moe, par = plan.spec.moe, plan.par
    groups = par.dp // moe.ep
    for s in range(par.pp):
        for g in range(groups):
            for k in range(par.tp):
                plan.ep_groups[(s, g, k)] = add("ep", len(plan.ep_groups),
                                                [plan.rank(s, g * moe.ep + e, k) for e in range(moe.ep)])
    if groups > 1:
        for s in range(par.pp):
            for k in range(par.tp):
                for e in range(moe.ep):
                    plan.edp_groups[(s, k, e)] = add("edp", len(plan.edp_groups),
                                                     [plan.rank(s, g * moe.ep + e, k) for g in range(groups)])
    files = read_picks(moe.routing.path, moe.ep) if moe.routing.type == "file" else None
    plan.experts = MoEPlan(moe, plan.model, int(np.random.SeedSequence([seed, plan.job]).generate_state(1)[0]),
                           plan.micro_batches, files)
    if moe.algorithm == "hierarchical":
        for comm in plan.ep_groups.values():
            hosts = np.unique(topology.gpu_host[list(comm.gpus)], return_counts=True)[1]
            if len(set(hosts.tolist())) > 1:
                raise ConfigError(f"hierarchical all-to-all needs the same number of EP ranks on every host; an EP "
                                  f"group has {sorted(set(hosts.tolist()))} (place whole hosts, or use direct)",
                                  "workload.moe.algorithm")


def _check_algorithms(plan: TrainingPlan, topology: Topology) -> None:
    """ConfigError (at ``workload.tp_comm/dp_comm.algorithm``) when a TP or DP group does not suit the
    chosen algorithm (e.g. halving-doubling on 3 ranks), before anything is simulated."""
    spec, par = plan.spec, plan.par
    checks = []
    if par.tp > 1:
        checks.append(("tp_comm", "TP", "allreduce", spec.tp_comm, plan.tp_groups.values()))
    if par.dp > 1:
        for op in (("reduce_scatter", "allgather") if par.sharded_optimizer else ("allreduce",)):
            checks.append(("dp_comm", "DP", op, spec.dp_comm, plan.dp_groups.values()))
    for key, kind, op, comm_spec, groups in checks:
        if comm_spec.algorithm == "auto":   # NCCL's choices (ring, tree) suit every group
            continue
        build = get_algorithm(op, comm_spec.algorithm, f"workload.{key}")
        how = plan.collective_model.settings(comm_spec.algorithm, comm_spec.channels, None,
                                             next(iter(groups)).gpus, topology)
        seen: set[tuple[int, ...]] = set()
        for comm in groups:
            shape = tuple(int(topology.gpu_host[g]) for g in comm.gpus)  # what an algorithm may care about
            if shape in seen:
                continue
            seen.add(shape)
            try:
                build(ScheduleBuilder(), list(comm.gpus), 1.0, channels=how.channels,
                      gpu_host=topology.gpu_host, gpu_rail=topology.gpu_rail if how.rails else None)
            except ConfigError as exc:
                raise ConfigError(f"{exc.message} ({kind} groups have {len(comm.gpus)} ranks)",
                                  f"workload.{key}.algorithm") from None


@dataclass(frozen=True)
class IterationRecord:
    """One training iteration of one job, as written to ``iterations.parquet``."""

    job: int
    iteration: int
    start_s: float
    end_s: float
    compute_s: float
    tp_s: float
    pp_s: float
    dp_s: float
    ep_s: float
    bubble_s: float
    flops: float
    world: int

    @property
    def duration_s(self) -> float:
        """Iteration time."""
        return self.end_s - self.start_s

    @property
    def tflops_per_gpu(self) -> float:
        """Model TFLOPS per GPU (Megatron's metric, no recomputation counted)."""
        return self.flops / (self.duration_s * self.world) / 1e12 if self.duration_s > 0 else math.nan


class _Mailbox:
    """Activations and gradients between stages: one event per (direction, stage, replica, micro-batch)."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.events: dict[tuple, simpy.Event] = {}
        self.posted: dict[tuple, float] = {}

    def meet(self, key: tuple) -> simpy.Event:
        ev = self.events.pop(key, None)
        if ev is None:
            ev = self.events[key] = self.env.event()
        return ev


class _Iteration:
    """One iteration of one job: the stage processes, their mailbox, DP rendezvous and accounting."""

    def __init__(self, env: simpy.Environment, fabric: Fabric, plan: TrainingPlan, iteration: int,
                 records: list[CollectiveRecord], ideal: IdealModel | None, speeds: ComputeSpeeds | None = None):
        self.env, self.fabric, self.plan, self.iteration = env, fabric, plan, iteration
        self.records, self.ideal, self.speeds = records, ideal, speeds
        self.box = _Mailbox(env)
        self.buckets: dict[tuple[int, int], list] = {}
        self.account: dict[tuple[int, int], dict[str, float]] = {}
        self.order = [[(op, j) for op, j, _chunk in ops] for ops in
                      pipeline_order(plan.par.schedule, plan.par.pp, plan.micro_batches)]
        self.moe_meet: dict[tuple, list] = {}           #: MoE layer rendezvous: key -> [arrived, event]
        self.picks: dict[tuple, np.ndarray] = {}         #: forward picks, reused by the backward

    def _slow(self, stage: int, replica: int) -> float:
        """Compute factor of a task the TP group of (stage, replica) starts now: its slowest GPU's."""
        if not self.speeds:
            return 1.0
        return self.speeds.slowest(self.plan.tp_groups[(stage, replica)].gpus, self.env.now)

    # ------------------------------------------------------------------ collectives
    def _collective(self, op: str, comm: Communicator, size: float, kind: str, label: str) -> Generator:
        env = self.env
        start = env.now
        how = self.plan.how(kind, op, size)
        algorithm, channels = how.algorithm, how.channels
        chunk = how.slice_bytes(op, algorithm, size, len(comm.gpus))
        yield env.process(run_collective(env, self.fabric, op, algorithm, list(comm.gpus), size, channels=channels,
                                         job=self.plan.job, comm=comm.comm, tcp=comm.tcp, chunk_bytes=chunk,
                                         rails=how.rails, protocol=how.protocol))
        bound = self.ideal.ideal(op, algorithm, comm.gpus, size, channels=channels, tcp=comm.tcp, chunk_bytes=chunk,
                                 rails=how.rails, protocol=how.protocol) if self.ideal is not None else None
        self.records.append(CollectiveRecord(
            self.plan.job, self.iteration, op, algorithm, size, len(comm.gpus), channels, start, env.now,
            ideal_s=bound.time_s if bound else math.nan, bound_s=bound.bound_s if bound else math.nan,
            slack_s=self.fabric.tolerance_s * bound.chain if bound else 0.0, label=label, comm=comm.comm,
            protocol=how.protocol_name))

    def _tp(self, stage: int, replica: int, size: float) -> Generator:
        if self.plan.par.tp == 1 or size <= 0:
            return
        yield from self._collective("allreduce", self.plan.tp_groups[(stage, replica)], size, "tp", "tp")

    def _pass(self, stage: int, replica: int, compute_s: float, acct: dict, pieces: int = 1,
              after_piece: Callable[[int], None] | None = None, op: str = "F", micro: int = 0) -> Generator:
        """Compute one forward/backward pass with its TP allreduces, optionally in ``pieces``."""
        env, plan = self.env, self.plan
        if plan.experts is not None:
            yield from self._moe_pass(stage, replica, compute_s, acct, pieces, after_piece, op, micro)
            return
        if plan.spec.tp_granularity == "layer" and plan.par.tp > 1:
            # attention and MLP blocks of every layer each end with an allreduce of b s h elements
            steps, size = 2 * plan.partition[stage], plan.model.activation_bytes()
        else:
            steps, size = pieces, plan.tp_bytes(stage) / pieces
        fired = 0
        for i in range(steps):
            t = env.now
            yield env.timeout(compute_s / steps * self._slow(stage, replica))
            acct["compute_s"] += env.now - t
            t = env.now
            yield from self._tp(stage, replica, size)
            acct["tp_s"] += env.now - t
            if after_piece is not None:
                while fired < (i + 1) * pieces // steps:
                    after_piece(fired)
                    fired += 1

    # ------------------------------------------------------------------ mixture of experts
    def _moe_pass(self, stage: int, replica: int, compute_s: float, acct: dict, pieces: int,
                  after_piece: Callable[[int], None] | None, op: str, micro: int) -> Generator:
        """One pass of an MoE model's stage, layer by layer: the layer's own compute and TP allreduce,
        and in MoE layers the expert-parallel all-to-alls around the routed experts (forward: after
        attention; backward: before it)."""
        env, plan = self.env, self.plan
        layers = list(plan.stage_layers(stage))
        flops = plan.layer_flops(stage)
        weights = [f / sum(flops) for f in flops]
        if op == "B":
            layers, weights = layers[::-1], weights[::-1]
        tp_size = plan.tp_bytes(stage) / len(layers)
        fired = 0
        for i, (layer, weight) in enumerate(zip(layers, weights)):
            if op == "B" and plan.experts.is_moe(layer):
                yield from self._moe(stage, replica, layer, micro, op, acct)
            t = env.now
            yield env.timeout(compute_s * weight * self._slow(stage, replica))
            acct["compute_s"] += env.now - t
            t = env.now
            yield from self._tp(stage, replica, tp_size)
            acct["tp_s"] += env.now - t
            if op == "F" and plan.experts.is_moe(layer):
                yield from self._moe(stage, replica, layer, micro, op, acct)
            if after_piece is not None:
                while fired < (i + 1) * pieces // len(layers):
                    after_piece(fired)
                    fired += 1

    def _moe(self, stage: int, replica: int, layer: int, micro: int, op: str, acct: dict) -> Generator:
        """Join the EP group's rendezvous for this MoE layer; the last replica to arrive starts it.
        The replica's own expert compute counts as compute, the rest of the layer as exposed EP."""
        ep = self.plan.spec.moe.ep
        group, position = divmod(replica, ep)
        key = (op, stage, group, layer, micro)
        state = self.moe_meet.setdefault(key, [0, self.env.event()])
        state[0] += 1
        if state[0] == ep:
            self.env.process(self._run_moe(key, state[1]))
        t = self.env.now
        own = (yield state[1])[position]
        acct["compute_s"] += own
        acct["ep_s"] += self.env.now - t - own

    def _run_moe(self, key: tuple, done: simpy.Event) -> Generator:
        """One MoE layer of one EP group (every TP index at once) as one schedule: dispatch
        all-to-all-v, each rank's routed experts (a delay by the tokens it received), combine
        all-to-all-v starting on each rank when its experts are done. Records both all-to-alls."""
        op, stage, group, layer, micro = key
        plan, env = self.plan, self.env
        moe, experts, h, tp = plan.spec.moe, plan.experts, plan.model.hidden, plan.par.tp
        dispatch = (moe.dispatch_bytes or plan.model.dtype_bytes) if op == "F" else \
            (moe.combine_bytes or plan.model.dtype_bytes)
        combine = moe.combine_bytes or plan.model.dtype_bytes
        build = get_algorithm("alltoallv", moe.algorithm, "workload.moe.algorithm")
        b, phases = ScheduleBuilder(), []
        expert_s = np.zeros(moe.ep)
        for k in range(tp):
            comm = plan.ep_groups[(stage, group, k)]
            call = (self.iteration, stage, group, k, micro)
            if op == "F":
                picks = self.picks[(layer, *call)] = experts.picks(
                    layer, self.fabric.topology.gpu_host[list(comm.gpus)], call)
            else:
                picks = self.picks.pop((layer, *call))
            first, second = picks * (h * dispatch / tp), picks.T * (h * combine / tp)
            seconds = self.plan.gpu.seconds(picks.sum(axis=0) * experts.pick_flops() * (1 if op == "F" else 2) / tp)
            if self.speeds:
                seconds = seconds * np.array([self.speeds.factor(g, env.now) for g in comm.gpus])
            expert_s = np.maximum(expert_s, seconds)
            marks = [b.n_tasks]
            ends = build(b, list(comm.gpus), 0.0, job=plan.job, comm=comm.comm, tcp=comm.tcp,
                         gpu_host=self.fabric.topology.gpu_host, matrix=first)
            marks.append(b.n_tasks)
            ready = b.delay(seconds, after=ends)
            marks.append(b.n_tasks)
            build(b, list(comm.gpus), 0.0, job=plan.job, comm=comm.comm, tcp=comm.tcp,
                  gpu_host=self.fabric.topology.gpu_host, matrix=second, ready=ready)
            marks.append(b.n_tasks)
            phases.append((comm, marks, first, second))
        start = env.now
        run = run_schedule(env, self.fabric, b.build())
        yield run.done
        times = np.array(run.times)
        names = ("dispatch", "combine") if op == "F" else ("combine_grad", "dispatch_grad")
        for comm, (lo, mid, ready, hi), first, second in phases:
            sent = times[lo:mid].max() if mid > lo else start
            began = times[mid:ready]  # each rank's experts done: its combine may start
            self._record_alltoallv(comm, first, start, sent, f"ep_{names[0]}", None)
            self._record_alltoallv(comm, second, began.min(), times[ready:hi].max() if hi > ready else began.max(),
                                   f"ep_{names[1]}", began - began.min())
        done.succeed(expert_s)

    def _record_alltoallv(self, comm: Communicator, matrix: np.ndarray, start: float, end: float, label: str,
                          offsets: np.ndarray | None) -> None:
        self.records.append(alltoallv_record(self.plan, comm, matrix, start, end, label, offsets, self.iteration,
                                             self.ideal, self.fabric.tolerance_s))

    # ------------------------------------------------------------------ pipeline sends
    def _send(self, direction: str, src_stage: int, dst_stage: int, replica: int, micro: int) -> None:
        plan, fabric, env = self.plan, self.fabric, self.env
        key = (direction, dst_stage, replica, micro)
        ev = self.box.meet(key)
        self.box.posted[key] = env.now
        events = []
        for k in range(plan.par.tp):
            src = plan.gpus[plan.rank(src_stage, replica, k)]
            dst = plan.gpus[plan.rank(dst_stage, replica, k)]
            comm = plan.pp_groups[(replica, k)]
            conn = Connection(src, dst, 0, plan.job, comm.comm)
            events.append(fabric.send(src, dst, plan.pp_bytes(), conn, event=ev if plan.par.tp == 1 else None))
        if plan.par.tp > 1:
            env.process(self._join(events, ev))

    def _join(self, events: list, ev: simpy.Event) -> Generator:
        yield self.env.all_of(events)
        ev.succeed()

    def _receive(self, direction: str, stage: int, replica: int, micro: int, acct: dict) -> Generator:
        key = (direction, stage, replica, micro)
        ev = self.box.meet(key)
        t0 = self.env.now
        yield ev
        posted = self.box.posted.pop(key)
        acct["pp_s"] += self.env.now - max(t0, posted)

    # ------------------------------------------------------------------ data parallel
    def _dp_bucket(self, stage: int, bucket: int) -> simpy.Event:
        """Join the DP rendezvous of ``(stage, bucket)``; the returned event fires when it is synchronised.

        The last replica to arrive starts the bucket's collectives (one per TP index, concurrently),
        after the stage's previous bucket has finished (buckets share one stream, as in NCCL)."""
        plan = self.plan
        state = self.buckets.setdefault((stage, bucket), [0, self.env.event()])
        state[0] += 1
        if state[0] == plan.par.dp:
            self.env.process(self._sync_bucket(stage, bucket, state[1]))
        return state[1]

    def _sync_bucket(self, stage: int, bucket: int, done: simpy.Event) -> Generator:
        plan, env = self.plan, self.env
        if bucket > 0:
            yield self.buckets[(stage, bucket - 1)][1]
        share = 1.0 / plan.spec.dp_buckets  # equal buckets
        procs = []
        for k in range(plan.par.tp):
            comm = plan.dp_groups[(stage, k)]
            if plan.par.sharded_optimizer:
                procs.append(env.process(self._collective("reduce_scatter", comm,
                                                          plan.grad_bytes(stage) * share, "dp", "dp")))
            else:
                procs.append(env.process(self._collective("allreduce", comm,
                                                          plan.grad_bytes(stage) * share, "dp", "dp")))
        if plan.edp_groups:  # MoE: each routed expert's gradients over its replicas in the other EP groups
            procs += [env.process(self._collective("allreduce", plan.edp_groups[(stage, k, e)],
                                                   plan.expert_grad_bytes(stage) * share, "edp", "edp"))
                      for k in range(plan.par.tp) for e in range(plan.spec.moe.ep)]
        yield env.all_of(procs)
        if plan.par.sharded_optimizer and bucket == plan.spec.dp_buckets - 1:
            procs = [env.process(self._collective("allgather", plan.dp_groups[(stage, k)],
                                                  plan.param_bytes(stage), "dp", "dp"))
                     for k in range(plan.par.tp)]
            yield env.all_of(procs)
        done.succeed()

    # ------------------------------------------------------------------ one stage process
    def stage(self, stage: int, replica: int) -> Generator:
        """Walk the 1F1B order of ``stage`` for data-parallel ``replica``, then synchronise gradients."""
        env, plan = self.env, self.plan
        p = plan.par.pp
        acct = self.account[(stage, replica)] = dict.fromkeys(BREAKDOWN, 0.0)
        overlap = plan.par.overlap_dp and plan.par.dp > 1
        pending: list[simpy.Event] = []
        ops = self.order[stage]
        for n, (op, j) in enumerate(ops):
            last = n == len(ops) - 1
            if op == "F":
                if stage > 0:
                    yield from self._receive("F", stage, replica, j, acct)
                yield from self._pass(stage, replica, plan.forward_s(stage), acct, op="F", micro=j)
                if stage < p - 1:
                    self._send("F", stage, stage + 1, replica, j)
            else:
                if stage < p - 1:
                    yield from self._receive("B", stage, replica, j, acct)
                if last and overlap:
                    yield from self._pass(stage, replica, plan.backward_s(stage), acct, pieces=plan.spec.dp_buckets,
                                          after_piece=lambda b: pending.append(self._dp_bucket(stage, b)),
                                          op="B", micro=j)
                else:
                    yield from self._pass(stage, replica, plan.backward_s(stage), acct, op="B", micro=j)
                if stage > 0:
                    self._send("B", stage, stage - 1, replica, j)
        t = env.now
        if plan.par.dp > 1:
            if not overlap:
                pending = [self._dp_bucket(stage, b) for b in range(plan.spec.dp_buckets)]
            yield env.all_of(pending)
        acct["dp_s"] += env.now - t


def run_training(env: simpy.Environment, fabric: Fabric, plan: TrainingPlan, *, iterations: int,
                 records: list[CollectiveRecord], iteration_records: list[IterationRecord],
                 ideal: IdealModel | None = None, accounts: list | None = None,
                 speeds: ComputeSpeeds | None = None) -> Generator:
    """Run ``iterations`` training iterations of ``plan`` (each ends when every stage has finished).

    Appends every collective call to ``records`` and one :class:`IterationRecord` per iteration;
    ``accounts`` (optional) receives each iteration's per-(stage, replica) breakdown. ``speeds``
    (optional) slows the compute of straggling GPUs: a TP group computes in lockstep, so a pass
    takes its slowest GPU's factor at the instant the pass's compute starts.
    """
    if plan.par.virtual_stages > 1 and not compilable(plan, speeds):
        raise ConfigError("slow GPUs (stragglers) are not modelled with the interleaved pipeline schedule: use "
                          "schedule 1f1b or gpipe with stragglers", "workload.parallelism.schedule")
    for comm in plan.comms:
        if comm.tcp:
            fabric.use_tcp(plan.job, comm.comm)
    flops = plan.iteration_flops()
    compiled = None
    for _ in range(iterations):
        it = sum(1 for r in iteration_records if r.job == plan.job)
        start = env.now
        if compilable(plan, speeds):
            if compiled is None or plan.experts is not None:  # (MoE: the picks are drawn per iteration)
                compiled = compile_iteration(plan, fabric.topology.gpu_host, it, fabric.topology.gpu_rail)
            run = run_schedule(env, fabric, compiled.schedule)
            yield run.done
            times = np.array(run.times)
            account = compiled.accounts(times)
            records.extend(compiled.records(times, it, ideal, fabric.tolerance_s))
        else:
            state = _Iteration(env, fabric, plan, it, records, ideal, speeds)
            procs = [env.process(state.stage(s, d)) for s in range(plan.par.pp) for d in range(plan.par.dp)]
            yield env.all_of(procs)
            account = state.account
        total = env.now - start
        n = len(account)
        mean = {k: sum(a[k] for a in account.values()) / n for k in BREAKDOWN[:-1]}
        bubble = total - sum(mean.values())
        mean["bubble_s"] = 0.0 if abs(bubble) <= 1e-12 * total else bubble  # rounding noise of the sum
        iteration_records.append(IterationRecord(plan.job, it, start, env.now, **mean, flops=flops,
                                                 world=plan.par.world))
        if accounts is not None:
            accounts.append(account)


def stage_speeds(plan: TrainingPlan, accounts: dict[tuple[int, int], dict[str, float]]) -> list[float]:
    """Layers per second of busy time (compute, TP and DP) of each stage, from one simulated iteration."""
    speeds = []
    for s in range(plan.par.pp):
        busy = [a["compute_s"] + a["tp_s"] + a["dp_s"] for (st, _d), a in accounts.items() if st == s]
        speeds.append(plan.partition[s] / (sum(busy) / len(busy)))
    return speeds

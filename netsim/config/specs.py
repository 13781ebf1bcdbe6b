"""The experiment file's sections as pydantic models: an :class:`ExperimentSpec` validated from YAML or built in Python."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from netsim.config.fault_specs import FaultSpec, StragglerSpec
from netsim.config.trace_specs import ChakraWorkload, ScheduleWorkload  # noqa: F401  (re-exported)
from netsim.errors import ConfigError, did_you_mean, shorten
from netsim.fabrics import topology_spec_type
from netsim.fabrics.dragonfly import CableSpec, DragonflySpec, FrontierSpec  # noqa: F401  (re-exported)
from netsim.fabrics.leaf_spine import LeafSpineSpec  # noqa: F401  (re-exported)
from netsim.fabrics.multi_cluster import ClusterSpec, EthernetSpec, MultiClusterSpec  # noqa: F401  (re-exported)
from netsim.spectypes import (  # noqa: F401
    MAX_BANDWIDTH_BPS,
    MAX_CABLES,
    MAX_CHANNELS,
    MAX_COUNT,
    MAX_GPUS,
    MAX_ITERATIONS,
    MAX_LAYERS,
    MAX_LINKS,
    MAX_MICRO_BATCHES,
    MAX_MODEL_DIM,
    MAX_PER_HOST,
    MAX_SEED,
    MAX_SIZE_BYTES,
    MAX_TIME_S,
    NAME_PATTERN,
    NAME_RULE,
    Bandwidth,
    Channels,
    HostNics,
    LinkSpec,
    Name,
    Nic,
    NicOverride,
    NicSpec,
    ProtocolName,
    Size,
    Time,
    UplinkSpec,
    _count,
    _FieldError,
    _quantity,
    _relocated,
    _Spec,
    _variant,
)

#: The ``topology:`` section: one of the registered fabric families (:mod:`netsim.fabrics`).
TopologySpec = topology_spec_type()


class PolicySpec(_Spec):
    """A named policy plus its options: ``routing: ecmp`` or ``placement: {type: random, by: host}``."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: str

    @property
    def options(self) -> dict[str, Any]:
        """Everything but ``type``."""
        return dict(self.model_extra or {})


def _policy(value: Any) -> Any:
    return {"type": value} if isinstance(value, str) else value


Policy = Annotated[PolicySpec, BeforeValidator(_policy)]


def _rank_count(value: Any) -> int:
    """A number of ranks to place or select: a collective needs at least 2."""
    if isinstance(value, bool) or not isinstance(value, int) or value > MAX_GPUS:
        raise ValueError(f"expected a number of ranks from 2 to {MAX_GPUS:,}, got {shorten(value)}")
    if value < 2:
        raise ValueError(f"a collective needs at least 2 ranks, got {value}")
    return value


_ranks = Annotated[int, BeforeValidator(_rank_count)]


class CollectiveWorkload(_Spec):
    """``workload: {type: collective, op, algorithm, size, ...}``: one collective on one communicator.

    ``ranks`` is how many ranks to place (default: every GPU of the topology).
    """

    type: Literal["collective"]
    op: str
    #: An algorithm of the op, or ``auto``: NCCL's pick by size (:mod:`netsim.collectives.nccl_tuning`).
    algorithm: str
    size: Size
    channels: Channels = "auto"
    #: NCCL's protocol: ``auto`` (under ``model: nccl``, NCCL's pick by size; under ``fluid``, none),
    #: ``simple``, ``ll128`` or ``ll``.
    protocol: ProtocolName = "auto"
    chunk: Size | None = None
    ranks: _ranks | None = None
    iterations: _count(MAX_ITERATIONS) = 1
    label: str | None = None


#: A sub-communicator of the parent's ranks: the first N, an explicit list of rank indices, or a
#: Python-style slice ``"start:stop:step"`` (``"0::8"``: local rank 0 of every 8-GPU host).
def _rank_selector(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return _rank_count(value)
    ok = (isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                   for v in value)) or (
        isinstance(value, str) and len(value) <= 64 and _SLICE.fullmatch(value.strip()))
    if not ok:
        raise ValueError(f"expected ranks as N (the first N ranks), a list of rank indices, or a slice "
                         f"'start:stop:step' like '0::8', got {shorten(value)}")
    if isinstance(value, list) and len(value) < 2:
        raise ValueError(f"a collective needs at least 2 ranks, got {len(value)}")
    return value


_SLICE = re.compile(r"-?\d*\s*:\s*-?\d*(?:\s*:\s*-?\d*)?")
RankSelector = Annotated[Any, BeforeValidator(_rank_selector)]


class CollectiveStep(CollectiveWorkload):
    """One collective inside a sequence (``type: collective`` may be omitted); ``ranks`` selects
    its communicator from the enclosing sequence's ranks."""

    type: Literal["collective"] = "collective"
    ranks: RankSelector | None = None


class SequenceWorkload(_Spec):
    """``workload: {type: sequence, mode: serial|concurrent, steps: [...]}``.

    ``serial`` runs the steps back to back, ``concurrent`` starts them together (e.g. independent
    rings on different rails). Steps are collectives or nested sequences; each may select a
    sub-communicator with ``ranks``. ``iterations`` repeats the whole sequence. At the top level
    ``ranks: N`` places N ranks, like a collective workload.
    """

    type: Literal["sequence"]
    mode: Literal["serial", "concurrent"] = "serial"
    steps: Annotated[list[Step], Field(min_length=1, max_length=10_000)]
    ranks: RankSelector | None = None
    iterations: _count(MAX_ITERATIONS) = 1
    label: str | None = None


def _step_type(value: Any) -> str:
    if isinstance(value, dict):
        return value.get("type", "collective")
    return getattr(value, "type", "collective")


Step = Annotated[Annotated[CollectiveStep, Tag("collective")] | Annotated[SequenceWorkload, Tag("sequence")],
                 Discriminator(_step_type)]
SequenceWorkload.model_rebuild()



class GPTModelSpec(_Spec):
    """A GPT-style model (see :class:`netsim.workload.training.GPTModel`)."""

    name: str = ""
    layers: _count(MAX_LAYERS)
    hidden: _count(MAX_MODEL_DIM)
    heads: _count(MAX_MODEL_DIM)
    seq_len: _count(MAX_MODEL_DIM)
    vocab: _count(MAX_MODEL_DIM)
    micro_batch: _count(MAX_MODEL_DIM) = 1
    global_batch: _count(MAX_MODEL_DIM)
    dtype_bytes: _count(16) = 2

    @model_validator(mode="after")
    def _heads(self) -> GPTModelSpec:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        return self


class ParallelismSpec(_Spec):
    """Tensor, pipeline and data parallel sizes; world size = tp x pp x dp ranks."""

    tp: _count(MAX_COUNT) = 1
    pp: _count(MAX_COUNT) = 1
    dp: _count(MAX_COUNT) = 1
    #: ZeRO-1 / distributed optimizer: gradients reduce-scattered, parameters allgathered.
    sharded_optimizer: bool = False
    #: Gradient synchronisation overlapped with the last micro-batch's backward (in ``dp_buckets``).
    overlap_dp: bool = False
    #: The pipeline order: ``1f1b`` (PipeDream-Flush), ``interleaved`` (Megatron's interleaved 1F1B over
    #: ``virtual_stages`` model chunks per stage, as Llama 3 trained) or ``gpipe`` (all forwards, then
    #: all backwards).
    schedule: Literal["1f1b", "interleaved", "gpipe"] = "1f1b"
    #: Model chunks per pipeline stage (``interleaved`` only; 1 otherwise).
    virtual_stages: _count(MAX_COUNT) = 1


class GPUSpec(_Spec):
    """The GPU: a built-in profile (``a100``, ``h100``, ``h800``, ``mi250x-gcd``) with optional overrides."""

    profile: str = "a100"
    peak_tflops: Annotated[float, Field(gt=0, le=1e6)] | None = None
    efficiency: Annotated[float, Field(gt=0, le=1)] | None = None

    @field_validator("profile")
    @classmethod
    def _known(cls, v: str) -> str:
        from netsim.workload.training import GPU_PROFILES
        if v not in GPU_PROFILES:
            raise ValueError(f"unknown GPU profile {shorten(v)}; built-in: {', '.join(GPU_PROFILES)}"
                             f"{did_you_mean(v, GPU_PROFILES)}")
        return v


def _gpu(value: Any) -> Any:
    return {"profile": value} if isinstance(value, str) else value


class CommSpec(_Spec):
    """How a training job's collectives run: algorithm, protocol and channels (rings) per call.

    ``auto`` (the defaults) resolve per call by its size as NCCL's tuning model does
    (:meth:`netsim.collectives.nccl.CollectiveModel.call`)."""

    algorithm: str = "auto"
    protocol: ProtocolName = "auto"
    channels: Channels = "auto"


class ExpertRoutingSpec(_Spec):
    """How tokens choose experts (:mod:`netsim.workload.moe`): ``uniform``, ``zipf`` (popularity
    skewed by ``skew``), ``node_limited`` (each token reaches at most ``max_nodes`` nodes), or
    ``file`` (a per-step picks matrix: CSV or Parquet with columns ``step, src, dst, tokens``)."""

    type: Literal["uniform", "zipf", "node_limited", "file"] = "uniform"
    #: Zipf exponent of expert popularity (``zipf``: default 1.0; ``node_limited``: default 0, uniform).
    skew: Annotated[float, Field(ge=0, le=10)] | None = None
    max_nodes: _count(MAX_COUNT) | None = None
    path: str | None = None
    #: ``false``: every call uses the expected picks matrix instead of a seeded draw.
    sample: bool = True

    @model_validator(mode="after")
    def _options(self) -> ExpertRoutingSpec:
        if (self.type == "node_limited") != (self.max_nodes is not None):
            raise ValueError("max_nodes (nodes a token may reach) goes with type node_limited, and only with it")
        if (self.type == "file") != (self.path is not None):
            raise ValueError("path (a CSV or Parquet file with columns step, src, dst, tokens) goes with type file, "
                             "and only with it")
        if self.type in ("uniform", "file") and self.skew:
            raise ValueError(f"skew applies to zipf and node_limited routing, not {self.type}")
        return self

    @property
    def zipf_skew(self) -> float:
        """The popularity exponent in effect."""
        return self.skew if self.skew is not None else (1.0 if self.type == "zipf" else 0.0)


class MoESpec(_Spec):
    """Mixture-of-experts layers (``workload.moe``): ``experts`` routed experts of FFN width
    ``expert_hidden``, ``top_k`` per token, spread over expert-parallel groups of ``ep`` data-parallel
    replicas; per MoE layer and pass a dispatch and a combine all-to-all-v among the group."""

    experts: _count(MAX_COUNT)
    top_k: _count(MAX_COUNT)
    ep: _count(MAX_COUNT)
    expert_hidden: _count(MAX_MODEL_DIM)
    shared_experts: _count(MAX_COUNT, 0) = 0
    #: The first this many layers are dense (DeepSeek-V3: 3); the rest are MoE layers.
    dense_layers: _count(MAX_LAYERS, 0) = 0
    routing: Annotated[ExpertRoutingSpec, BeforeValidator(_policy)] = ExpertRoutingSpec()
    algorithm: Literal["direct", "pairwise", "hierarchical"] = "direct"
    #: Bytes per element of the dispatch (1: FP8 as DeepSeek-V3; default the model's dtype_bytes).
    dispatch_bytes: _count(16) | None = None
    #: Bytes per element of the combine and of the backward's gradients (default the model's dtype_bytes).
    combine_bytes: _count(16) | None = None


def _check_schedule(w: TrainingWorkload, micro_batches: int) -> None:
    """The pipeline order's constraints (Megatron's, for the interleaved schedule)."""
    par, v = w.parallelism, w.parallelism.virtual_stages
    if par.schedule != "interleaved":
        if v != 1:
            raise _FieldError(f"virtual_stages ({v}) needs schedule: interleaved", "parallelism.virtual_stages")
        return
    if par.pp < 2 or v < 2:
        raise _FieldError(f"the interleaved schedule needs pp >= 2 and virtual_stages >= 2 (got pp {par.pp}, "
                          f"virtual_stages {v})", "parallelism.schedule")
    if micro_batches % par.pp:
        raise _FieldError(f"the interleaved schedule needs micro-batches per replica ({micro_batches}) to be a "
                          f"multiple of pp ({par.pp})", "model.global_batch")
    if w.model.layers < par.pp * v:
        raise _FieldError(f"{w.model.layers} layers cannot fill {par.pp} x {v} virtual stages", "parallelism.virtual_stages")
    if w.partition in ("proportional", "search"):
        raise _FieldError(f"with the interleaved schedule the partition is even, or an explicit list of "
                          f"{par.pp * v} virtual stages (pp x virtual_stages)", "partition")


class TrainingWorkload(_Spec):
    """``workload: {type: training, model: {...}, parallelism: {tp, pp, dp}, gpu: a100, ...}``.

    One job's training iterations: 1F1B pipeline of micro-batches, TP allreduces, PP activation
    sends and DP gradient synchronisation on the fabric (:mod:`netsim.workload.pipeline`).
    """

    type: Literal["training"]
    model: GPTModelSpec
    parallelism: ParallelismSpec = ParallelismSpec()
    gpu: Annotated[GPUSpec, BeforeValidator(_gpu)] = GPUSpec()
    iterations: _count(100_000) = 1
    #: Layers per pipeline stage: ``auto`` (``search`` under holmes placement, else ``even``),
    #: ``even``, ``proportional`` (to each stage's measured speed), ``search`` (proportional, then
    #: moved a layer at a time while the simulated iteration gets shorter), or an explicit list.
    partition: Literal["auto", "even", "proportional", "search"] | list[_count(MAX_LAYERS)] = "auto"
    #: One TP allreduce per stage and pass (``stage``: the layers' bytes together, cheap to
    #: simulate; with ``overlap_dp`` the last backward's is cut with the gradient buckets, one
    #: piece per bucket) or two per layer and pass as Megatron issues them (``layer``).
    tp_granularity: Literal["stage", "layer"] = "stage"
    #: Gradient buckets per stage (each synchronised as soon as its layers' gradients are ready
    #: when ``overlap_dp``).
    dp_buckets: _count(1_024) = 1
    #: Bytes per gradient element in the DP synchronisation (default: the model's dtype_bytes).
    grad_bytes: _count(16) | None = None
    tp_comm: CommSpec = CommSpec()
    dp_comm: CommSpec = CommSpec()
    #: Mixture-of-experts layers (absent: a dense model).
    moe: MoESpec | None = None
    label: str | None = None

    @model_validator(mode="after")
    def _check(self) -> TrainingWorkload:
        par, model = self.parallelism, self.model
        if model.global_batch % (model.micro_batch * par.dp):
            raise _FieldError(f"global_batch ({model.global_batch}) must be a multiple of micro_batch x dp "
                              f"({model.micro_batch} x {par.dp})", "model.global_batch")
        micro_batches = model.global_batch // (model.micro_batch * par.dp)
        if micro_batches > MAX_MICRO_BATCHES:
            raise _FieldError(f"{micro_batches:,} micro-batches per iteration (global_batch / (micro_batch x "
                              f"dp)); allowed: 1 to {MAX_MICRO_BATCHES:,}", "model.global_batch")
        if model.layers < par.pp:
            raise _FieldError(f"{model.layers} layers cannot fill {par.pp} pipeline stages", "parallelism.pp")
        stages = par.pp * par.virtual_stages if par.schedule == "interleaved" else par.pp
        if isinstance(self.partition, list) and (len(self.partition) != stages or sum(self.partition) != model.layers):
            raise _FieldError(f"an explicit partition needs {stages} stage(s) summing to {model.layers} layers, "
                              f"got {self.partition}", "partition")
        _check_schedule(self, micro_batches)
        if self.moe is not None:
            _check_moe(self.moe, par, model)
        from netsim.collectives import get_algorithm
        try:
            for op, comm, key in [("allreduce", self.tp_comm, "tp_comm")] + [
                    (op, self.dp_comm, "dp_comm")
                    for op in (("reduce_scatter", "allgather") if par.sharded_optimizer else ("allreduce",))]:
                get_algorithm(op, _auto_algorithm(op) if comm.algorithm == "auto" else comm.algorithm, key, auto=True)
        except ConfigError as exc:
            raise _relocated(exc) from None
        return self

    @property
    def ranks(self) -> int:
        """GPUs the job occupies: tp x pp x dp."""
        p = self.parallelism
        return p.tp * p.pp * p.dp


def _check_moe(moe: MoESpec, par: ParallelismSpec, model: GPTModelSpec) -> None:
    if par.dp % moe.ep:
        raise _FieldError(f"ep ({moe.ep}) must divide dp ({par.dp}): expert-parallel groups are made of "
                          "data-parallel replicas", "moe.ep")
    if moe.experts % moe.ep:
        raise _FieldError(f"experts ({moe.experts}) must be a multiple of ep ({moe.ep})", "moe.experts")
    if moe.top_k > moe.experts:
        raise _FieldError(f"top_k ({moe.top_k}) cannot exceed experts ({moe.experts})", "moe.top_k")
    if moe.dense_layers >= model.layers:
        raise _FieldError(f"dense_layers ({moe.dense_layers}) leaves no MoE layer of {model.layers}",
                          "moe.dense_layers")


Workload = Annotated[CollectiveWorkload | SequenceWorkload | TrainingWorkload | ChakraWorkload | ScheduleWorkload,
                     Field(discriminator="type")]


def _check_workload(w: CollectiveWorkload | SequenceWorkload | TrainingWorkload, path: str = "workload") -> None:
    """Every collective names a known op/algorithm pair (ConfigError with its YAML path)."""
    from netsim.collectives import get_algorithm
    if isinstance(w, SequenceWorkload) and w.ranks is not None and not isinstance(w.ranks, int) \
            and path.count(".") <= 1:
        raise ConfigError("at the top level, ranks is the number of ranks to place (an integer); "
                          "select sub-communicators in the steps", f"{path}.ranks")
    if isinstance(w, (TrainingWorkload, ChakraWorkload, ScheduleWorkload)):
        return
    if isinstance(w, SequenceWorkload):
        for i, step in enumerate(w.steps):
            _check_workload(step, f"{path}.steps.{i}")
    elif w.algorithm != "auto":
        get_algorithm(w.op, w.algorithm, path, auto=True)
    else:
        get_algorithm(w.op, _auto_algorithm(w.op), path)


def _auto_algorithm(op: str) -> str:
    """An algorithm ``auto`` may choose for ``op`` (to check the op is known and has one)."""
    from netsim.collectives.nccl import AUTO_ALGORITHMS
    return AUTO_ALGORITHMS.get(op, ("ring",))[-1]


#: Largest engine completion tolerance (s); see :class:`EngineSpec`.
MAX_TOLERANCE_S = 1e-6


def _on_off(value: Any) -> Any:
    """YAML reads a bare ``on``/``off`` as a boolean: take it as the word."""
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


class EngineSpec(_Spec):
    """Engine settings.

    ``completion_tolerance`` (default 1ns, at most 1us): flows whose remaining transfers drain
    within this time of each other complete together, which saves events; so a call may end up
    to that much early per dependent step (``slack_s`` in the results accounts for it).
    """

    completion_tolerance: Annotated[float, _quantity("time", "from 0 to 1us", 0, MAX_TOLERANCE_S)] = 1e-9
    record_flows: bool = True
    #: Compute every call's ideal (non-blocking lower bound) by a contention-free replay of the
    #: algorithm; costs a fraction of the run. Off: ``ideal_s`` and ``slowdown`` are missing (null).
    ideal: bool = True
    #: Track offered load per switch link under the policy and under ideal spraying (the
    #: ``max_congestion`` metrics); about 10-20% of the engine's time. Off: those columns are missing (null).
    congestion: bool = True
    #: Time bins of the per-link utilisation series (``link_series.parquet``, the dashboard's
    #: heatmap): at most this many over the run, so the resolution is about horizon / bins. 0: off.
    link_series: _count(100_000, 0) = 128
    #: The executor: ``compiled`` (numba; the default when it is installed) or ``reference`` (plain
    #: Python, message by message: the oracle the compiled one is tested against, much slower).
    backend: Literal["compiled", "reference"] | None = None
    #: Per-fault cost of a training run (``fault_costs.parquet``): one more run without any fault and
    #: one without each fault entry. ``auto``: for training runs with 1 to 8 entries (faults and drawn
    #: stragglers); ``on``: always (training only); ``off``: never.
    fault_costs: Annotated[Literal["auto", "on", "off"], BeforeValidator(_on_off)] = "auto"


class JobSpec(_Spec):
    """One job of a multi-job mix: ``{name, workload, placement, start, iterations}``.

    Jobs are placed in order on the GPUs earlier jobs left free. ``iterations`` runs the job's
    workload that many times back to back (a training workload's own ``iterations`` multiply).
    """

    name: Name
    workload: Workload
    placement: Policy | None = None
    start: Time = 0.0
    iterations: _count(MAX_ITERATIONS) = 1

    @field_validator("placement")
    @classmethod
    def _known_placement(cls, v: PolicySpec | None) -> PolicySpec | None:
        if v is not None:
            from netsim.placement import PLACEMENT
            PLACEMENT.get(v.type, "placement.type")
            PLACEMENT.check_options(v.type, v.options, "placement")
        return v

    @model_validator(mode="after")
    def _check(self) -> JobSpec:
        try:
            _check_workload(self.workload, "workload")
        except ConfigError as exc:
            raise _relocated(exc) from None
        if not isinstance(self.workload, (TrainingWorkload, ChakraWorkload, ScheduleWorkload)) \
                and self.workload.ranks is None:
            raise _FieldError("a collective job needs ranks: how many GPUs it occupies", "workload.ranks")
        return self

    @property
    def ranks(self) -> int:
        """GPUs the job occupies."""
        return self.workload.ranks


class ClusterRunSpec(_Spec):
    """``cluster:``: a trace-driven multi-tenant cluster (:mod:`netsim.cluster.sim`).

    Jobs of ``trace`` (CSV or Parquet, docs/cluster-traces.md) arrive at their submit times; the
    ``scheduler`` starts them in order (``fifo``) or lets later jobs that fit run ahead when they
    do not delay the first waiting job (``backfill``, EASY), each placed by the experiment's
    ``placement`` on free GPUs and routed by its ``routing``. ``extrapolate`` simulates the running
    jobs together whenever the set of running jobs changes, until each has run
    ``sample_iterations`` whole iterations, and extends their iteration times to the next change;
    ``full`` simulates every iteration.
    """

    trace: str
    scheduler: Literal["fifo", "backfill"] = "fifo"
    mode: Literal["extrapolate", "full"] = "extrapolate"
    #: Whole iterations every job runs in a sample, the first (while the others start) left out of the mean.
    sample_iterations: _count(100) = 8
    #: Only the first this many jobs of the trace (by submit time).
    max_jobs: _count(1_000_000) | None = None


class DetectionSpec(_Spec):
    """``detection:``: evaluate the C4D-style detector (:mod:`netsim.detect`) like a classifier.

    ``trials`` runs of the experiment's training job, each with one random fault of a kind drawn
    from ``kinds`` (``gpu``: a slow GPU; ``nic``: a degraded NIC; ``link``: a degraded
    switch-to-switch cable; ``switch``: a degraded switch) on a component the job's traffic uses,
    running at ``1 - severity`` of its nominal speed with ``severity`` drawn uniformly from the
    ``severity`` range; with probability ``none`` a trial has no fault. The fault starts with the
    first iteration (``onset: first``) or at the start of a random one (``onset: random``). The
    detector ranks suspects after every iteration; it raises an alarm when a connection or a rank
    is slower than its peers by more than ``threshold``. ``noise`` blurs the telemetry as real
    timestamps are blurred.
    """

    trials: _count(10_000) = 40
    kinds: Annotated[list[Literal["gpu", "nic", "link", "switch"]], Field(min_length=1, max_length=4)] = \
        ["gpu", "nic", "link", "switch"]
    severity: Annotated[list[Annotated[float, Field(gt=0, lt=1)]], Field(min_length=2, max_length=2)] = [0.3, 0.7]
    none: Annotated[float, Field(ge=0, le=1)] = 0.2
    onset: Literal["first", "random"] = "first"
    threshold: Annotated[float, Field(gt=0, lt=1)] = 0.2
    #: Measurement noise of the telemetry: every connection's busy time and every rank's compute time
    #: is multiplied by a lognormal factor of this relative spread (0: exact).
    noise: Annotated[float, Field(ge=0, le=1)] = 0.0
    #: Iterations in a row a connection or rank must be slower than ``threshold`` before it counts
    #: (1: at once); more filters out noise and detects later.
    persist: _count(1_000) = 1

    @model_validator(mode="after")
    def _check(self) -> DetectionSpec:
        low, high = self.severity
        if low > high:
            raise _FieldError(f"severity is a range [low, high] with low <= high, got {self.severity}", "severity")
        for i, kind in enumerate(self.kinds):
            if kind in self.kinds[:i]:
                raise _FieldError(f"kind {kind!r} listed twice", f"kinds.{i}")
        return self


class PacketSpec(_Spec):
    """``packets: {switching: store_and_forward, mtu: 9000}``: what switches hold of a packet before they
    forward it (:mod:`netsim.topology.packets`). ``switching``: ``cut_through`` (the header; what the
    ``nccl`` model uses when the section is absent), ``store_and_forward`` (the whole packet, as packet
    simulators such as htsim and ns-3 forward) or ``none`` (nothing: the fluid model, what ``fluid``
    uses). ``mtu``: payload bytes of a full packet; the per-packet headers come from the NICs' family."""

    switching: Literal["none", "cut_through", "store_and_forward"] = "store_and_forward"
    mtu: Annotated[int, Field(ge=256, le=65_536)] = 4096


class ExperimentSpec(_Spec):
    """A whole experiment: fabric, placement, routing, and one workload or several ``jobs``; seed, faults."""

    name: Name
    description: str = ""
    #: Which named variant of a sweep this run is ("" outside sweeps); set by the expansion.
    variant: Annotated[str, BeforeValidator(_variant)] = ""
    seed: _count(MAX_SEED, 0) = 0
    topology: TopologySpec
    placement: Policy = PolicySpec(type="sequential")
    routing: Policy = PolicySpec(type="ecmp")
    workload: Workload | None = None
    jobs: Annotated[list[JobSpec], Field(max_length=10_000)] = []
    #: A trace-driven cluster instead of ``workload``/``jobs``.
    cluster: ClusterRunSpec | None = None
    faults: Annotated[list[FaultSpec], Field(max_length=10_000)] = []
    #: Slow GPUs drawn from the run seed (besides any ``gpu`` faults).
    stragglers: StragglerSpec | None = None
    engine: EngineSpec = EngineSpec()
    #: How collectives and NICs are modelled: ``nccl`` (the default: NCCL's channels on rails, its
    #: step size and per-step costs, link-layer headers) or ``fluid`` (the pure fluid model: one
    #: channel, no slicing, no cost the file does not give; what closed forms hold for).
    model: Literal["nccl", "fluid"] = "nccl"
    #: What switches hold of a packet before forwarding it (absent: cut-through under ``nccl``, none under
    #: ``fluid``).
    packets: PacketSpec | None = None
    #: Evaluate the fault detector over random single-fault trials of this experiment (:mod:`netsim.detect`).
    detection: DetectionSpec | None = None

    @model_validator(mode="after")
    def _one_workload(self) -> ExperimentSpec:
        given = [k for k, v in (("workload", self.workload), ("jobs", self.jobs), ("cluster", self.cluster)) if v]
        if len(given) != 1:
            raise ConfigError("give one of workload (one job), jobs (a list of {name, workload, placement, "
                              "start, iterations}) or cluster (a job trace and a scheduler)",
                              given[-1] if given else "workload")
        if self.cluster is not None and (self.faults or self.stragglers):
            raise ConfigError("faults are not supported in a cluster run yet (its jobs come and go over hours); "
                              "inject them in a jobs: experiment", "faults" if self.faults else "stragglers")
        self._check_training_faults()
        self._check_detection()
        names = [j.name for j in self.jobs]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ConfigError(f"job name {shorten(name)} used twice", f"jobs.{i}.name")
        return self

    def _check_detection(self) -> None:
        """A detection evaluation injects its own faults into one training job."""
        if self.detection is None:
            return
        if self.faults or self.stragglers:
            raise ConfigError("a detection evaluation injects its own faults, one per trial: remove "
                              + ("faults:" if self.faults else "stragglers:") + " (or the detection: section)",
                              "faults" if self.faults else "stragglers")
        if not isinstance(self.workload, TrainingWorkload):
            raise ConfigError("detection evaluates one training job: give workload: {type: training, ...} "
                              "(not jobs:, cluster: or a collective workload)", "detection")

    def _check_training_faults(self) -> None:
        """Slow GPUs and fault costs need compute: refused at once when no job trains."""
        if self.cluster is not None or any(isinstance(j.workload, TrainingWorkload) for j in self.job_specs()):
            return
        for i, f in enumerate(self.faults):
            if f.gpu is not None:
                raise ConfigError("gpu faults need a training workload: collective and trace workloads have no "
                                  "compute for a slow GPU to stretch", f"faults.{i}.gpu")
        if self.stragglers is not None:
            raise ConfigError("stragglers need a training workload: collective and trace workloads have no compute "
                              "for a slow GPU to stretch", "stragglers")
        if self.engine.fault_costs == "on":
            raise ConfigError("fault costs are measured in iteration time: they need a training workload "
                              "(auto or off otherwise)", "engine.fault_costs")

    def job_specs(self) -> list[JobSpec]:
        """The jobs to run: ``jobs``, or the single ``workload`` as one job named after the experiment."""
        if self.jobs:
            return list(self.jobs)
        w = self.workload
        return [JobSpec.model_construct(name=self.name, workload=w, placement=None, start=0.0, iterations=1)]

    @field_validator("routing")
    @classmethod
    def _known_routing(cls, v: PolicySpec) -> PolicySpec:
        from netsim.routing import ROUTING
        ROUTING.get(v.type, "routing.type")
        ROUTING.check_options(v.type, v.options, "routing", skip=2)
        return v

    @field_validator("placement")
    @classmethod
    def _known_placement(cls, v: PolicySpec) -> PolicySpec:
        from netsim.placement import PLACEMENT
        PLACEMENT.get(v.type, "placement.type")
        PLACEMENT.check_options(v.type, v.options, "placement")
        return v

    @field_validator("workload")
    @classmethod
    def _known_algorithm(cls, v):
        if v is not None:
            _check_workload(v)
        return v


# ---------------------------------------------------------------------------- loading


#: Top-level keys that make an experiment file a sweep (expanded by :mod:`netsim.experiment.sweep`).
SWEEP_KEYS = ("variants", "sweep", "seeds", "repeats")

"""Experiment YAML -> typed, validated ExperimentSpec; the only module that imports yaml.

Errors name the file, the line and the dotted YAML path of the offending value, and say what is
allowed. A library user can build an :class:`ExperimentSpec` in Python without any YAML.
"""

from __future__ import annotations

import codecs
import copy
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, ValidationError,
                      field_validator, model_validator)
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.reader import ReaderError
from yaml.resolver import Resolver

from netsim.errors import ConfigError, did_you_mean, shorten
from netsim.fabrics import FABRICS, topology_spec_type
from netsim.fabrics.dragonfly import CableSpec, DragonflySpec, FrontierSpec  # noqa: F401  (re-exported)
from netsim.fabrics.leaf_spine import LeafSpineSpec  # noqa: F401  (re-exported)
from netsim.fabrics.multi_cluster import ClusterSpec, EthernetSpec, MultiClusterSpec  # noqa: F401  (re-exported)
from netsim.spectypes import (MAX_BANDWIDTH_BPS, MAX_CABLES, MAX_CHANNELS, MAX_COUNT, MAX_GPUS,  # noqa: F401
                              MAX_ITERATIONS, MAX_LAYERS, MAX_LINKS, MAX_MICRO_BATCHES, MAX_MODEL_DIM, MAX_PER_HOST,
                              MAX_SEED, MAX_SIZE_BYTES, MAX_TIME_S, NAME_PATTERN, NAME_RULE, Bandwidth, HostNics,
                              LinkSpec, Name, Nic, NicOverride, NicSpec, Size, Time, UplinkSpec, _count, _FieldError,
                              _quantity, _relocated, _Spec, _variant)

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
    algorithm: str
    size: Size
    channels: _count(MAX_CHANNELS) = 1
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
    """How a training job's collectives run: algorithm and channels (rings) per call."""

    algorithm: str = "ring"
    channels: _count(MAX_CHANNELS) = 1


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
        if isinstance(self.partition, list) and (len(self.partition) != par.pp or sum(self.partition) != model.layers):
            raise _FieldError(f"an explicit partition needs {par.pp} stage(s) summing to {model.layers} layers, "
                              f"got {self.partition}", "partition")
        from netsim.collectives import get_algorithm
        try:
            get_algorithm("allreduce", self.tp_comm.algorithm, "tp_comm")
            for op in (("reduce_scatter", "allgather") if par.sharded_optimizer else ("allreduce",)):
                get_algorithm(op, self.dp_comm.algorithm, "dp_comm")
        except ConfigError as exc:
            raise _relocated(exc) from None
        return self

    @property
    def ranks(self) -> int:
        """GPUs the job occupies: tp x pp x dp."""
        p = self.parallelism
        return p.tp * p.pp * p.dp


Workload = Annotated[CollectiveWorkload | SequenceWorkload | TrainingWorkload, Field(discriminator="type")]


def _check_workload(w: CollectiveWorkload | SequenceWorkload | TrainingWorkload, path: str = "workload") -> None:
    """Every collective names a known op/algorithm pair (ConfigError with its YAML path)."""
    from netsim.collectives import get_algorithm
    if isinstance(w, SequenceWorkload) and w.ranks is not None and not isinstance(w.ranks, int) \
            and path.count(".") <= 1:
        raise ConfigError("at the top level, ranks is the number of ranks to place (an integer); "
                          "select sub-communicators in the steps", f"{path}.ranks")
    if isinstance(w, TrainingWorkload):
        return
    if isinstance(w, SequenceWorkload):
        for i, step in enumerate(w.steps):
            _check_workload(step, f"{path}.steps.{i}")
    else:
        get_algorithm(w.op, w.algorithm, path)


#: Largest engine completion tolerance (s); see :class:`EngineSpec`.
MAX_TOLERANCE_S = 1e-6


class EngineSpec(_Spec):
    """Engine settings.

    ``completion_tolerance`` (default 1ns, at most 1us): flows whose remaining transfers drain
    within this time of each other complete together, which saves events; so a call may end up
    to that much early per dependent step (``slack_s`` in the results accounts for it).
    """

    completion_tolerance: Annotated[float, _quantity("time", "from 0 to 1us", 0, MAX_TOLERANCE_S)] = 1e-9
    record_flows: bool = True
    #: Compute every call's ideal (non-blocking lower bound) by a contention-free replay of the
    #: algorithm; costs a fraction of the run. Off: ``ideal_s`` and ``slowdown`` are NaN.
    ideal: bool = True
    #: Track offered load per switch link under the policy and under ideal spraying (the
    #: ``max_congestion`` metrics); about 10-20% of the engine's time. Off: those columns are NaN.
    congestion: bool = True
    #: Time bins of the per-link utilisation series (``link_series.parquet``, the dashboard's
    #: heatmap): at most this many over the run, so the resolution is about horizon / bins. 0: off.
    link_series: _count(100_000, 0) = 128
    #: The executor: ``compiled`` (numba; the default when it is installed) or ``reference`` (plain
    #: Python, message by message: the oracle the compiled one is tested against, much slower).
    backend: Literal["compiled", "reference"] | None = None


class FaultSpec(_Spec):
    """One timed fault: ``{at: 2ms, link: leaf0-spine1, action: down}``.

    ``link`` names a cable by its end nodes: ``a-b`` (both directions) or ``a->b`` (one), with
    ``#k`` for the k-th of parallel cables; ``nic`` names a NIC (``h3.nic0``: every port, both
    directions). ``down`` sets capacity to 0, ``degrade`` to ``fraction`` of nominal (a slowed NIC
    or a flapping link), ``up`` back to nominal.
    """

    at: Time
    link: str | None = None
    nic: str | None = None
    action: Literal["down", "up", "degrade"]
    fraction: Annotated[float, Field(gt=0, lt=1)] | None = None

    @model_validator(mode="after")
    def _target(self) -> FaultSpec:
        if (self.link is None) == (self.nic is None):
            raise ValueError("give exactly one of link (a cable: leaf0-spine1, leaf0->spine1) or nic (h3.nic0)")
        if (self.action == "degrade") != (self.fraction is not None):
            raise ValueError("fraction (0 < fraction < 1 of nominal capacity) goes with action degrade, and only with it")
        return self


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
        if not isinstance(self.workload, TrainingWorkload) and self.workload.ranks is None:
            raise _FieldError("a collective job needs ranks: how many GPUs it occupies", "workload.ranks")
        return self

    @property
    def ranks(self) -> int:
        """GPUs the job occupies."""
        return self.workload.ranks


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
    faults: Annotated[list[FaultSpec], Field(max_length=10_000)] = []
    engine: EngineSpec = EngineSpec()

    @model_validator(mode="after")
    def _one_workload(self) -> ExperimentSpec:
        if (self.workload is None) == (not self.jobs):
            raise ConfigError("give either workload (one job) or jobs (a list of {name, workload, placement, "
                              "start, iterations})", "jobs" if self.jobs else "workload")
        names = [j.name for j in self.jobs]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ConfigError(f"job name {shorten(name)} used twice", f"jobs.{i}.name")
        return self

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


def _yaml_line(root: yaml.Node | None, loc: tuple, exact: bool = False) -> int | None:
    """1-based line of the node at ``loc`` in a composed YAML tree (nearest existing ancestor; None
    when ``exact`` and the path is not in the tree)."""
    node, line = root, None
    last_key = False  # the path ends at a mapping key: its line (a block value starts below it)
    loc = tuple(str(k) for k in loc)
    i = 0
    while i < len(loc):
        key = loc[i]
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            # a key may itself be dotted (sweep: {topology.spines: [...]}): try the longest join first
            for j in range(len(loc), i, -1):
                match = [(k, v) for k, v in node.value if k.value == ".".join(loc[i:j])]
                if match:
                    break
            if not match:
                return None if exact else line
            node = match[-1][1]  # keys a merge (<<: *base) brings come first: an explicit one overrides them
            line = match[-1][0].start_mark.line + 1
            i = j
            last_key = True
            continue
        elif isinstance(node, yaml.SequenceNode) and key.isdigit() and int(key) < len(node.value):
            node = node.value[int(key)]
            last_key = False
        else:
            if exact:
                return None
            break
        i += 1
    if node is not None and not last_key:
        line = node.start_mark.line + 1
    return line


def _clean_loc(loc: tuple) -> tuple:
    # pydantic adds validator/union tags ('function-before[...]', 'leaf_spine') to locations.
    tags = (*FABRICS.names(), "collective", "sequence", "training")
    return tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in tags)))


def _message(err: dict, model_fields: dict | None) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "extra_forbidden":
        names = [*(model_fields or ()), *(SWEEP_KEYS if len(err["loc"]) == 1 else ())]  # a file's top level
        allowed = f"; allowed keys: {', '.join(names)}" if names else ""
        return f"unknown key{allowed}{did_you_mean(err['loc'][-1], names)}"
    if kind == "missing":
        return "required key is missing"
    if kind == "union_tag_invalid":
        ctx = err.get("ctx") or {}
        valid = ctx.get("expected_tags", "").replace(chr(39), "")
        hint = did_you_mean(ctx.get("tag"), valid.split(", "))
        return f"unknown type {shorten(ctx.get('tag'))}; valid: {valid}{hint}"
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if err.get("input") is not None and kind not in ("value_error",) and not isinstance(err["input"], dict):
        msg = f"{msg} (got {shorten(err['input'])})"
    return msg


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation may hold (through unions, lists and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in (*getattr(annotation, "__args__", ()), getattr(annotation, "__origin__", None)):
        if arg is not None and arg is not annotation:
            found += [m for m in _models_in(arg) if m not in found]
    return found


def _fields_at(loc: tuple) -> dict | None:
    """Field names of the model that owns ``loc[-1]`` (for 'allowed keys' hints).

    ``loc`` is pydantic's raw location: union tags in it (``sequence``) pick the member model.
    """
    model: Any = ExperimentSpec
    for key in loc[:-1]:
        if isinstance(key, int):
            continue
        field = getattr(model, "model_fields", {}).get(key)
        if field is None:
            pool = model if isinstance(model, list) else _models_in(model)
            tagged = [m for m in pool if m.model_fields.get("type") is not None
                      and key in getattr(m.model_fields["type"].annotation, "__args__", ())]
            if tagged:
                model = tagged[0]
            continue
        candidates = _models_in(field.annotation)
        if not candidates:
            return None
        model = candidates[0] if len(candidates) == 1 else candidates
    if isinstance(model, list):
        model = model[0]
    return getattr(model, "model_fields", None)


def parse_spec(data: Any, *, file: str | None = None, root: yaml.Node | None = None,
               overridden: frozenset[str] | dict[str, str] = frozenset()) -> ExperimentSpec:
    """Validate a plain mapping into an ExperimentSpec; ConfigError (first problem) on failure.

    ``overridden`` names the dotted paths whose values did not come from the file: a set (they came
    from ``--set``) or a mapping path -> where they came from (``variant 'c4p'``, ``sweep``).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping of experiment keys at the top level, got {type(data).__name__}",
                          "", file, 1)
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        err = _first_error(errors)
        loc = _clean_loc(err["loc"])
        path = ".".join(str(p) for p in loc) + (".type" if err["type"] == "union_tag_invalid" else "")
        message = _message(err, _fields_at(err["loc"]) if err["type"] == "extra_forbidden" else None)
        ctx_error = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_error, ConfigError):
            path, message = ctx_error.path or path, ctx_error.message
        elif isinstance(ctx_error, _FieldError):
            path = ".".join(p for p in (path, ctx_error.sub) if p)
            message = ctx_error.message
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        source = _source(path, overridden)
        if source:
            message += f" (value from {source})"
        line = _yaml_line(root, tuple(path.split("."))) if root is not None and path else None
        raise ConfigError(message, path, file, line) from None
    except ConfigError as exc:
        line = _yaml_line(root, tuple(exc.path.split("."))) if root is not None and exc.path else None
        source = _source(exc.path, overridden)
        raise ConfigError(exc.message + (f" (value from {source})" if source else ""), exc.path, file,
                          line) from None


def _first_error(errors: list[dict]) -> dict:
    """The validation error to report: pydantic's first, except that an unknown key beside a missing
    one (``spine:`` for ``spines:``) is reported, since the typo explains both (with a did-you-mean)."""
    missing = {e["loc"][:-1] for e in errors if e["type"] == "missing"}
    return next((e for e in errors if e["type"] == "extra_forbidden" and e["loc"][:-1] in missing), errors[0])


def _source(path: str, overridden: frozenset[str] | dict[str, str]) -> str:
    """Where the value at ``path`` (or the nearest overridden ancestor) came from, "" for the file."""
    parts = path.split(".") if path else []
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in overridden:
            return overridden[key] if isinstance(overridden, dict) else "--set"
    return ""


def set_dotted(data: dict, key: str, value: Any) -> None:
    """Set ``value`` at the dotted ``key`` of ``data`` in place (list indices allowed: ``jobs.0.start``).

    Missing mappings on the way are created; a policy given as a string (``routing: ecmp``) becomes
    ``{type: ecmp}`` so that ``routing.reconvergence`` can be set under it.
    """
    node = data
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        if isinstance(node, list):  # jobs.0.placement: a list index
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"cannot set {key}: {'.'.join(parts[:i])} has {len(node)} item(s), "
                                  f"{shorten(part)} is not an index of one", key)
            node = node[int(part)]
            if not isinstance(node, (dict, list)):
                raise ConfigError(f"cannot set {key}: {'.'.join(parts[:i + 1])} is not a mapping", key)
            continue
        child = node.get(part)
        if isinstance(child, str) and part in ("routing", "placement"):
            child = {"type": child}
        if not isinstance(child, (dict, list)):
            if child is not None:
                raise ConfigError(f"cannot set {key}: {'.'.join(parts[:i + 1])} is not a mapping", key)
            child = {}
        node[part] = child
        node = child
    if isinstance(node, list):
        last = parts[-1]
        if not last.isdigit() or int(last) >= len(node):
            raise ConfigError(f"cannot set {key}: {'.'.join(parts[:-1])} has {len(node)} item(s)", key)
        node[int(last)] = value
    else:
        node[parts[-1]] = value


def apply_overrides(data: dict, overrides: list[str]) -> tuple[dict, frozenset[str]]:
    """Apply ``KEY=VALUE`` strings (dotted keys, YAML-typed values) to a copy of ``data``."""
    data = copy.deepcopy(data)
    paths = []
    for item in overrides:
        key, value = parse_assignment(item, "--set")
        set_dotted(data, key, value)
        paths.append(key)
    return data, frozenset(paths)


def parse_assignment(item: str, option: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (dotted key, YAML-typed value); ConfigError naming ``option`` otherwise."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not p for p in key.split(".")):
        raise ConfigError(f"{option} expects KEY=VALUE with a dotted key (workload.size=1GiB), "
                          f"got {shorten(item)}")
    return key, _option_value(raw, f"{option} {key if len(key) <= 60 else shorten(key)}")


def parse_param(item: str) -> tuple[str, list]:
    """``--param KEY=VALUE`` -> (dotted key, the values to sweep); ConfigError naming ``--param`` otherwise.

    VALUE is YAML: a list is the values to sweep, anything else one value. A comma never splits a
    value (``routing={type: split, ways: 4}`` is one mapping, ``name=a,b`` one string); a key whose
    own value is a list is swept over a list of lists (``[[1, 2], [3]]``).

    Examples
    --------
    >>> parse_param("topology.spines=[2, 4]")
    ('topology.spines', [2, 4])
    >>> parse_param("routing={type: split, ways: 4}")
    ('routing', [{'type': 'split', 'ways': 4}])
    """
    key, value = parse_assignment(item, "--param")
    values = value if isinstance(value, list) else [] if value == "" else [value]
    if not values:
        raise ConfigError(f"--param {key} needs at least one value: --param {key}=VALUE, or a YAML list of "
                          f"values to sweep: --param {key}=[V1,V2]")
    return key, values


def _option_value(raw: str, option: str) -> Any:
    """:func:`_yaml_value`, its ConfigErrors naming the command-line ``option``."""
    try:
        return _yaml_value(raw)
    except ConfigError as exc:
        raise ConfigError(f"{option}: {exc.message}") from None


# ---------------------------------------------------------------------------- reading YAML

#: Largest file netsim reads as YAML (bytes). Experiment, topology and workload files are a few
#: KB; 4 MiB leaves room for generated sweeps, while a wrong path (a trace, a binary) fails at once.
MAX_YAML_BYTES = 4 * 2**20
#: Deepest nesting of mappings and lists, an alias counting as the nesting it stands for. A spec
#: nests about six levels; the bound keeps every later recursive walk of the data shallow.
MAX_YAML_DEPTH = 64
#: Most nodes (keys, values, mappings and lists) one YAML document may hold, an alias counting as a
#: full copy of what it names: an alias bomb ("billion laughs") is refused from its events,
#: before anything is built. An experiment file holds a few hundred.
MAX_YAML_NODES = 100_000
# perf: libyaml, when PyYAML was built with it, parses 50-100x faster than the pure-Python parser
# (a 4 MiB file in 0.1 s, not 10 s) and yields the same events; both are safe and not recursive.
_PARSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NODES = "(keys, values, mappings and lists)"


def read_text(path: str | Path, limit: int = MAX_YAML_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes, a leading byte-order mark dropped.

    Raises ConfigError naming the file when it is missing, a directory (or a device, pipe or
    socket: reading one could block), unreadable, larger than ``limit``, not UTF-8 (the line and
    byte of the first bad byte) or holds a NUL character (binary data).

    Examples
    --------
    >>> read_text("experiments/quickstart.yaml").startswith("name: quickstart")  # doctest: +SKIP
    True
    """
    where = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError("file not found", "", where) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise ConfigError(f"cannot read: {getattr(exc, 'strerror', None) or exc}", "", where) from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError("a directory, not a file", "", where)
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError("not a regular file (a device, pipe or socket)", "", where)
    if info.st_size > limit:
        raise ConfigError(f"file too large: {info.st_size:,} bytes (limit {limit:,} bytes)", "", where)
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", "", where) from None
    if len(raw) > limit:  # it grew since stat
        raise ConfigError(f"file too large: more than {limit:,} bytes", "", where)
    return _decode(raw, where)


def _decode(raw: bytes, where: str) -> str:
    """``raw`` as strict UTF-8 (without a leading BOM), refused with the line of a bad byte or a NUL."""
    start = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        text = raw[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = start + exc.start
        line = raw.count(b"\n", 0, at) + 1
        raise ConfigError(f"not UTF-8 text: byte 0x{raw[at]:02x} at line {line} (byte {at + 1:,} of the "
                          "file); save it as UTF-8", "", where, line) from None
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise ConfigError(f"a NUL character at line {line}: binary data, not text", "", where, line)
    return text


def _events(text: str, where: str) -> list[yaml.Event]:
    """The YAML events of ``text``, refused past :data:`MAX_YAML_DEPTH` or :data:`MAX_YAML_NODES`
    or with a recursive alias.

    The parser is not recursive, and each alias counts the nodes and nesting of its anchor's
    (already closed) node, so nothing is built from a document that would exceed a limit.
    """
    events: list[yaml.Event] = []
    closed: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height) of its node
    stack: list[list] = []  # per open mapping or list: [anchor, nodes so far, height so far]
    total = aliased = 0

    def refuse(message: str, event: yaml.Event) -> ConfigError:
        return ConfigError(message, "", where or None, event.start_mark.line + 1)

    for event in yaml.parse(text, Loader=_PARSER):
        events.append(event)
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) == MAX_YAML_DEPTH:
                raise refuse(f"mappings and lists nested deeper than {MAX_YAML_DEPTH} levels", event)
            stack.append([event.anchor, 1, 1])
            total += 1
            if total > MAX_YAML_NODES:
                raise refuse(f"more than {MAX_YAML_NODES:,} YAML nodes {_NODES}", event)
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, nodes, height = stack.pop()
            if anchor is not None:
                closed[anchor] = (nodes, height)
        elif isinstance(event, yaml.ScalarEvent):
            nodes, height = 1, 0
            if event.anchor is not None:
                closed[event.anchor] = (1, 0)
            total += 1
        elif isinstance(event, yaml.AliasEvent):
            name = shorten(event.anchor)[1:-1]
            if event.anchor not in closed:
                if any(entry[0] == event.anchor for entry in stack):
                    raise refuse(f"recursive alias *{name}: it stands for a mapping or list that contains it",
                                 event)
                continue  # undefined: the composer says so, with its line
            nodes, height = closed[event.anchor]
            if len(stack) + height > MAX_YAML_DEPTH:
                raise refuse(f"mappings and lists nested deeper than {MAX_YAML_DEPTH} levels once alias "
                             f"*{name} is expanded", event)
            total += nodes
            aliased += nodes
            if total > MAX_YAML_NODES:
                raise refuse(f"aliases expand past the limit of {MAX_YAML_NODES:,} YAML nodes {_NODES}: "
                             f"alias *{name} alone stands for {nodes:,}", event)
        else:
            continue
        if total > MAX_YAML_NODES:
            expanded = " once its aliases are expanded" if aliased else ""
            raise refuse(f"more than {MAX_YAML_NODES:,} YAML nodes {_NODES}{expanded}", event)
        if stack:
            stack[-1][1] += nodes
            stack[-1][2] = max(stack[-1][2], height + 1)
    return events


class _Builder(Composer, SafeConstructor, Resolver):
    """Composes checked events into one node tree, then constructs the data from that tree.

    Every use of an alias is constructed anew, so every mapping and list in the data is its own
    object: ``--set jobs.0.workload.size=...`` must not change the other jobs that share ``*ring``.
    """

    def __init__(self, events: list[yaml.Event]):
        self._events, self._next = events, 0
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def check_event(self, *choices) -> bool:
        """The Parser interface the Composer reads events through: is the next one of ``choices``?"""
        if self._next == len(self._events):
            return False
        return not choices or isinstance(self._events[self._next], choices)

    def peek_event(self) -> yaml.Event:
        """The next event, left in place."""
        return self._events[self._next]

    def get_event(self) -> yaml.Event:
        """The next event, consumed."""
        self._next += 1
        return self._events[self._next - 1]

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """The data of ``node``, never a copy shared with another alias; an unreadable scalar is a
        located YAML error (``int`` refuses more than 4,300 digits, ``date`` a 13th month)."""
        self.constructed_objects.pop(node, None)
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:
            raise ConstructorError(None, None, f"cannot read {shorten(node.value)}: {str(exc).split(';')[0]}",
                                   node.start_mark) from None


def _check_keys(root: yaml.Node | None, where: str) -> None:
    """Refuse a mapping that gives a key twice. A merge (``<<: *base``) is not a duplicate of the
    keys it brings: an explicit key overrides a merged one."""
    stack, seen = [(root, "")], set()
    while stack:
        node, path = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                at = f"{path}.{name}" if path else name
                if isinstance(key, yaml.ScalarNode):
                    line = key.start_mark.line + 1
                    if (key.tag, name) in first:
                        raise ConfigError(f"duplicate key {shorten(name)} (first at line "
                                          f"{first[key.tag, name]})", at, where or None, line)
                    first[key.tag, name] = line
                stack.append((value, at))
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, f"{path}.{i}" if path else str(i)) for i, item in enumerate(node.value)]


def _parse_yaml(text: str, where: str) -> tuple[yaml.Node | None, Any]:
    """(node tree, data) of one YAML document: composed once from checked events, the data
    constructed from that tree (merge keys expanded in it), so the two cannot disagree.

    ConfigError past the limits or for a duplicate key; ``yaml.YAMLError`` for malformed YAML.
    """
    builder = _Builder(_events(text, where))
    root = builder.get_single_node()
    _check_keys(root, where)
    return root, (builder.construct_document(root) if root is not None else None)


def _yaml_error(exc: yaml.YAMLError, text: str, where: str) -> ConfigError:
    """A located ConfigError for malformed YAML (syntax, control character, unknown tag, ...)."""
    if isinstance(exc, ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        return ConfigError(f"control character U+{ord(char):04X} at line {line}: not YAML text", "", where,
                           line)
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    if context and problem.startswith("but "):  # "expected a single document in the stream but found another"
        problem = f"{context} {problem}"
    if problem == "exceeded maximum nesting depth":  # libyaml's own bound (1,000) met while scanning ahead
        return ConfigError(f"mappings and lists nested deeper than {MAX_YAML_DEPTH} levels", "", where,
                           mark.line + 1 if mark else None)
    kind = "YAML error" if isinstance(exc, (ComposerError, ConstructorError)) else "YAML syntax error"
    return ConfigError(f"{kind}: {problem}", "", where, mark.line + 1 if mark else None)


def _a(data: Any) -> str:
    """What a YAML value is, for messages: ``a list ([1, 2])``."""
    return f"a {type(data).__name__} ({shorten(data)})"


def _read_yaml(path: Path, expected: str) -> tuple[yaml.Node, dict]:
    """(node tree for line numbers, data) of a YAML file holding a mapping (``expected`` describes
    it); located ConfigErrors otherwise."""
    where = str(path)
    text = read_text(path)
    if not text.strip():  # a tab alone would be a syntax error
        raise ConfigError(f"the file is empty (no YAML data): expected {expected}", "", where)
    try:
        root, data = _parse_yaml(text, where)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, where) from None
    if data is None:
        raise ConfigError(f"the file is empty (no YAML data): expected {expected}", "", where)
    if not isinstance(data, dict):
        raise ConfigError(f"expected {expected} at the top level, got {_a(data)}", "", where,
                          root.start_mark.line + 1)
    return root, data


def _yaml_value(raw: str) -> Any:
    """A command-line value typed as YAML (``4``: an int, ``[1, 2]``: a list); text that is not YAML
    stays text. ConfigError past the limits of a YAML file or with a duplicate key."""
    if not raw.strip():
        return ""
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(f"value too long: {len(raw):,} characters (limit {MAX_YAML_BYTES:,})")
    try:
        return _parse_yaml(raw, "")[1]
    except yaml.YAMLError:
        return raw


def locate(error: ConfigError, file: str | Path) -> ConfigError:
    """``error`` with ``file`` and the line of its YAML path filled in (for errors found after loading)."""
    if error.file:
        return error
    line = None
    if error.path:
        try:
            root, _ = _parse_yaml(read_text(file), str(file))
            line = _yaml_line(root, tuple(error.path.split(".")))
        except (ConfigError, yaml.YAMLError):
            pass
    return ConfigError(error.message, error.path, str(file), line)


#: What each kind of YAML file holds at its top level (for "expected ..." messages).
_EXPERIMENT = "a mapping of experiment keys (name, topology, workload, ...)"
_TOPOLOGY = "a mapping with a 'type' (a topology)"
_WORKLOAD = "a mapping with a 'type' (a workload)"


def _referenced(name: str, experiment: Path, what: str, path: str, hint: str) -> Path:
    """The file a YAML value names, looked up next to the experiment, then from the cwd."""
    if not name.strip() or "\0" in name or len(name) > 4096:
        raise ConfigError(f"expected the name of a {what}, got {shorten(name)}", path, str(experiment))
    candidates = (experiment.parent / name, Path(name))
    for candidate in candidates:
        try:
            if candidate.is_file():
                return candidate
        except OSError:  # a name too long for the file system
            continue
    for candidate in candidates:
        try:
            if candidate.exists():
                kind = "a directory" if candidate.is_dir() else "not a regular file"
                raise ConfigError(f"{what} {shorten(name)} is {kind} ({candidate})", path, str(experiment))
        except OSError:
            continue
    raise ConfigError(f"{what} {shorten(name)} not found (looked next to the experiment and in the current "
                      f"directory); {hint}", path, str(experiment))


def _load_topology_file(name: str, experiment: Path) -> dict:
    """A ``topology: FILE.yaml`` reference: looked up next to the experiment, then from the cwd."""
    return _section_file(name, experiment, "topology", "topology", _TOPOLOGY,
                         "give a mapping with 'type' or the path of a topologies/*.yaml file")


def _section_file(name: str, experiment: Path, section: str, path: str, kind: str, hint: str) -> dict:
    """The mapping a referenced ``topology``/``workload`` file holds (at its top or under ``section``)."""
    file = _referenced(name, experiment, f"{section} file", path, hint)
    root, data = _read_yaml(file, kind)
    data = data.get(section, data)
    if not isinstance(data, dict):
        raise ConfigError(f"expected {kind} under '{section}', got {_a(data)}",
                          section, str(file), _yaml_line(root, (section,)))
    return data


def _deep_merge(base: Any, over: Any) -> Any:
    """``over`` laid on ``base``: mappings merge key by key, anything else replaces."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = _deep_merge(base.get(key), value) if key in base else value
        return out
    return over


def _load_workload_file(value: Any, experiment: Path, path: str) -> Any:
    """Resolve ``workload: FILE.yaml`` and ``workload: {from: FILE.yaml, ...overrides}`` (deep-merged).

    Files (``workloads/gpt-7.5b.yaml``) are looked up next to the experiment, then from the cwd.
    """
    if isinstance(value, str):
        name, over = value, {}
    elif isinstance(value, dict) and "from" in value:
        name, over = value["from"], {k: v for k, v in value.items() if k != "from"}
        if not isinstance(name, str):
            raise ConfigError(f"'from' names a workload file (workloads/gpt-7.5b.yaml), got {shorten(name)}",
                              f"{path}.from",
                              str(experiment))
    else:
        return value
    data = _section_file(name, experiment, "workload", path, _WORKLOAD,
                         "give a mapping with 'type', a workloads/*.yaml file, or {from: FILE, ...}")
    return _deep_merge(data, over)


class _TopologyFile(_Spec):
    topology: TopologySpec


def load_topology(path: str | Path):
    """The topology spec of a topology file (``topologies/*.yaml``) or of an experiment file.

    Examples
    --------
    >>> load_topology("topologies/frontier-mini.yaml").groups  # doctest: +SKIP
    8
    """
    path = Path(path)
    root, data = _read_yaml(path, _TOPOLOGY)
    if "topology" in data:  # an experiment file
        return load_spec(path).topology
    try:
        return _TopologyFile.model_validate({"topology": data}).topology
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = _clean_loc(err["loc"])[1:]
        sub = ".".join(str(p) for p in loc)
        fields = _fields_at(("topology", *loc)) if err["type"] == "extra_forbidden" else None
        line = _yaml_line(root, loc) if loc else None
        raise ConfigError(_message(err, fields), sub, str(path), line) from None


def _resolve_files(data: Any, path: Path) -> Any:
    """Replace topology and workload file references (``topology: FILE``, ``workload: FILE`` or
    ``{from: FILE, ...}``, the same in each job) by the files' contents."""
    if not isinstance(data, dict):
        return data
    topo = data.get("topology")
    if isinstance(topo, str):
        data["topology"] = _load_topology_file(topo, path)
    elif isinstance(topo, dict) and isinstance(topo.get("from"), str):
        data["topology"] = _deep_merge(_load_topology_file(topo["from"], path),
                                       {k: v for k, v in topo.items() if k != "from"})
    if "workload" in data:
        data["workload"] = _load_workload_file(data["workload"], path, "workload")
    if isinstance(data.get("jobs"), list):
        for i, job in enumerate(data["jobs"]):
            if isinstance(job, dict) and "workload" in job:
                job["workload"] = _load_workload_file(job["workload"], path, f"jobs.{i}.workload")
    routing = data.get("routing")
    if isinstance(routing, dict) and routing.get("type") == "table" and isinstance(routing.get("file"), str):
        routing["file"] = str((path.parent / routing["file"]).absolute())  # relative to the experiment
    return data


#: Most runs one experiment file may expand to (variants x grid points x seeds): each is a spec held
#: in memory before the first runs, so a grid of a few long axes must fail here, not exhaust memory.
MAX_RUNS = 100_000
#: Top-level keys that make an experiment file a sweep (expanded by :mod:`netsim.experiment.sweep`).
SWEEP_KEYS = ("variants", "sweep", "seeds", "repeats")


@dataclass
class ExperimentFile:
    """An experiment file split into its base spec (as data) and its sweep: what ``expand`` needs.

    ``axes`` are the grid's axes: each a tuple of dotted keys (several for a ``zip`` group) and the
    list of value tuples they take together. ``variants`` are the partial overrides, each with its
    ``name``. ``seeds`` or ``repeats`` give the seeds (neither: the base ``seed``).
    """

    path: Path
    root: Any
    base: dict
    overrides: list[str] = field(default_factory=list)
    variants: list[dict] = field(default_factory=list)
    axes: list[tuple[tuple[str, ...], list[tuple]]] = field(default_factory=list)
    seeds: list[int] | None = None
    repeats: int | None = None
    name: str = ""  #: the experiment's name (after --set) when it is a valid name, else "" (see results_name)

    def results_name(self) -> str:
        """The experiment's name, which names its results directory (``results/NAME``); ConfigError
        (at ``name``) when it is missing or not a name."""
        # CORRECTNESS: the name becomes a path before any run is validated: it must be a name
        if self.name:
            return self.name
        given = self.base.get("name")
        raise ConfigError(f"expected {NAME_RULE}, got {shorten(given)}" if given is not None else
                          "required key is missing (the experiment's name names its results directory, "
                          "results/NAME)", "name", str(self.path), self.line("name") or 1)

    @property
    def is_sweep(self) -> bool:
        """True when the file expands to more than its base spec (variants, axes, seeds or repeats)."""
        return bool(self.variants or self.axes or self.seeds is not None or self.repeats is not None)

    def line(self, path: str, exact: bool = False) -> int | None:
        """Line of a dotted path in the file (of its nearest ancestor; None when ``exact`` and absent)."""
        return _yaml_line(self.root, tuple(path.split(".")), exact) if self.root is not None and path else None


def _sweep_error(message: str, path: str, exp: Path, root: Any) -> ConfigError:
    return ConfigError(message, path, str(exp), _yaml_line(root, tuple(path.split("."))) if root else None)


def _axis_values(value: Any, path: str, exp: Path, root: Any) -> list:
    if not isinstance(value, list) or not value:
        raise _sweep_error(f"expected a non-empty list of values, got {shorten(value)}", path, exp, root)
    return value


def load_experiment(path: str | Path, overrides: list[str] | None = None,
                    params: list[str] | None = None) -> ExperimentFile:
    """Read an experiment file that may hold ``variants``, ``sweep``, ``seeds`` or ``repeats``.

    ``overrides`` (``--set KEY=V``) apply to every run, after the variant and the sweep point.
    ``params`` (``--param KEY=VALUE``, see :func:`parse_param`) add a grid axis or replace the file's
    axis of that key.
    The structure is checked here (ConfigError with file and line); each run's spec is validated
    when the sweep is expanded.
    """
    path = Path(path)
    where = str(path)
    root, data = _read_yaml(path, _EXPERIMENT)
    raw = {k: data.pop(k) for k in SWEEP_KEYS if k in data}
    exp = ExperimentFile(path, root, _resolve_files(data, path), list(overrides or []))
    variants = raw.get("variants", [])
    if not isinstance(variants, list):
        raise _sweep_error("expected a list of variants, each {name: NAME, <keys to override>}", "variants", path,
                           root)
    names: list[str] = []
    for i, v in enumerate(variants):
        if not isinstance(v, dict) or "name" not in v:
            raise _sweep_error("a variant is a mapping with a name and the keys it overrides, e.g. "
                               "{name: c4p, routing: c4p}", f"variants.{i}", path, root)
        if not isinstance(v["name"], str) or not NAME_PATTERN.fullmatch(v["name"]):
            raise _sweep_error(f"expected {NAME_RULE}, got {shorten(v['name'])}", f"variants.{i}.name", path,
                               root)
        if v["name"] in names:
            raise _sweep_error(f"variant name {shorten(v['name'])} used twice", f"variants.{i}.name", path,
                               root)
        if set(v) & set(SWEEP_KEYS):
            raise _sweep_error(f"a variant cannot hold {', '.join(sorted(set(v) & set(SWEEP_KEYS)))}",
                               f"variants.{i}", path, root)
        names.append(v["name"])
    exp.variants = [dict(v) for v in variants]
    sweep = raw.get("sweep", {})
    if not isinstance(sweep, dict):
        raise _sweep_error("expected a mapping of dotted keys to lists of values "
                           "(workload.size: [1MiB, 16MiB]), with an optional zip: group", "sweep", path, root)
    axes: dict[tuple[str, ...], list[tuple]] = {}
    for key, value in sweep.items():
        if key == "zip":
            groups = value if isinstance(value, list) else [value]
            for g, group in enumerate(groups):
                at = "sweep.zip" if not isinstance(value, list) else f"sweep.zip.{g}"
                if not isinstance(group, dict) or not group:
                    raise _sweep_error("zip: a mapping of dotted keys to equally long lists of values",
                                       at, path, root)
                cols = {k: _axis_values(v, f"{at}.{k}", path, root) for k, v in group.items()}
                lengths = {len(v) for v in cols.values()}
                if len(lengths) > 1:
                    raise _sweep_error(f"zipped keys need lists of one length, got "
                                       f"{', '.join(f'{k}: {len(v)}' for k, v in cols.items())}", at, path, root)
                axes[tuple(cols)] = list(zip(*cols.values()))
        else:
            axes[(str(key),)] = [(v,) for v in _axis_values(value, f"sweep.{key}", path, root)]
    for item in params or []:
        key, values = parse_param(item)
        group = next((ks for ks in axes if key in ks), None)
        if group is not None and len(group) > 1:  # a zipped key: replace its column, keep the pairing
            if len(values) != len(axes[group]):
                others = ", ".join(k for k in group if k != key)
                raise ConfigError(f"--param {key}: the file zips it with {others} ({len(axes[group])} values "
                                  f"each); give {len(axes[group])} values to keep the pairing")
            col = group.index(key)
            axes[group] = [t[:col] + (v,) + t[col + 1:] for t, v in zip(axes[group], values)]
        else:
            axes.pop((key,), None)
            axes[(key,)] = [(v,) for v in values]
    for item in exp.overrides:  # --set: well formed, settable, and it wins over a swept key
        key, value = parse_assignment(item, "--set")
        try:
            set_dotted(copy.deepcopy(exp.base), key, value)
        except ConfigError as exc:
            raise ConfigError(exc.message, exc.path, where) from None
        for ks in list(axes):
            if key in ks:
                col = ks.index(key)
                rest = tuple(k for k in ks if k != key)
                values_ = axes.pop(ks)
                if rest:
                    kept: dict[str, tuple] = {}
                    for t in values_:
                        kept.setdefault(repr(t[:col] + t[col + 1:]), t[:col] + t[col + 1:])
                    axes[rest] = list(kept.values())
    keys = [k for ks in axes for k in ks]
    for key in keys:
        if key.split(".")[0] in SWEEP_KEYS or key == "variant":
            raise _sweep_error(f"{key} cannot be swept", "sweep", path, root)
        if keys.count(key) > 1:
            raise _sweep_error(f"{key} is swept twice (a plain axis and a zip group?)", "sweep", path, root)
    exp.axes = list(axes.items())
    seeds, repeats = raw.get("seeds"), raw.get("repeats")
    if seeds is not None and repeats is not None:
        raise _sweep_error("give seeds (a list) or repeats (a count), not both", "repeats", path, root)
    if seeds is not None and (not isinstance(seeds, list) or not seeds or len(set(map(str, seeds))) != len(seeds)
                              or not all(_is_seed(x) for x in seeds)):
        raise _sweep_error(f"seeds: a list of distinct integers from 0 to 2**63 - 1, got {shorten(seeds)}",
                           "seeds", path, root)
    if repeats is not None and (not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats
                                <= 100_000):
        raise _sweep_error(f"repeats: a count of runs per point with derived seeds (1..100000), got "
                           f"{shorten(repeats)}",
                           "repeats", path, root)
    if (seeds is not None or repeats is not None) and "seed" in keys:
        raise _sweep_error("seed is swept and seeds/repeats are given: use one of them", "sweep", path, root)
    if repeats is not None:  # the base seed repeats derive theirs from: the file's, a variant's or --set's
        bases = [("seed", exp.base.get("seed", 0), "")]
        bases += [(f"variants.{i}.seed", v["seed"], "") for i, v in enumerate(exp.variants) if "seed" in v]
        for item in exp.overrides:
            key, value = parse_assignment(item, "--set")
            if key == "seed":
                bases.append(("seed", value, " (from --set)"))
        for at, value, source in bases:
            if not _is_seed(value):
                raise _sweep_error(f"the base seed of repeats must be an integer from 0 to 2**63 - 1, got "
                                   f"{shorten(value)}{source}", at, path, root)
    exp.seeds, exp.repeats = seeds, repeats
    name = exp.base.get("name")
    for item in exp.overrides:
        key, value = parse_assignment(item, "--set")
        if key == "name":
            name = value
    exp.name = name if isinstance(name, str) and NAME_PATTERN.fullmatch(name) else ""
    if any(key == "name" for ks, _ in exp.axes for key in ks):
        raise _sweep_error("name cannot be swept: it names the sweep's results directory", "sweep", path, root)
    runs = max(len(exp.variants), 1) * math.prod(len(values) for _, values in exp.axes) * len(seeds or [0]) \
        * (repeats or 1)
    if runs > MAX_RUNS:
        at = "sweep" if exp.axes else "repeats" if repeats else "seeds" if seeds else "variants"
        raise _sweep_error(f"the sweep expands to {runs:,} runs (variants x grid points x seeds); at most "
                           f"{MAX_RUNS:,}", at, path, root)
    return exp


def _is_seed(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED


def load_spec(path: str | Path, overrides: list[str] | None = None) -> ExperimentSpec:
    """Read an experiment YAML file, apply ``--set`` overrides, and validate it.

    Examples
    --------
    >>> spec = load_spec("experiments/quickstart.yaml", ["workload.size=1GiB"])  # doctest: +SKIP
    """
    path = Path(path)
    where = str(path)
    root, data = _read_yaml(path, _EXPERIMENT)
    if set(data) & set(SWEEP_KEYS):
        keys = ", ".join(sorted(set(data) & set(SWEEP_KEYS)))
        raise ConfigError(f"this file is a sweep ({keys}): run it with `netsim sweep` or `netsim run`, or load it "
                          "with netsim.config.load_experiment", "", where)
    data = _resolve_files(data, path)
    overridden: frozenset[str] = frozenset()
    if overrides:
        try:
            data, overridden = apply_overrides(data, overrides)
        except ConfigError as exc:
            raise ConfigError(exc.message, exc.path, where) from None
        data = _resolve_files(data, path)
    return parse_spec(data, file=where, root=root, overridden=overridden)

"""A training iteration compiled into one schedule, run by the executor in one submission.

:func:`compile_iteration` walks every pipeline stage's 1F1B order once, for all data-parallel
replicas of the stage at a time, and appends what each stage process of
:mod:`netsim.workload.pipeline` would do, as tasks:

* a pass's compute is a DELAY after the stage's previous task; its TP allreduce a copy of the call's
  :class:`~netsim.engine.fragment.Fragment` (built once per call shape) that starts when the compute
  ends; the stage goes on when the whole call is done;
* a pipeline send is one SEND per TP rank after the pass; the receiving stage's next pass waits for
  its previous task and for those sends (a JOIN);
* a gradient bucket starts when every replica of the stage has produced it (after its piece of the
  last backward with ``overlap_dp``, else after the last pass) and the stage's previous bucket is
  synchronised; it is one call per TP index (reduce-scatter or allreduce; with a sharded optimizer
  the last bucket's allgather follows); each replica ends after its last pass and the last bucket.

Nothing runs per message or per call while the iteration runs. Afterwards
:meth:`CompiledIteration.accounts` and :meth:`CompiledIteration.records` read the breakdown and the
collective records from the tasks' done times, with the stage processes' exact definitions (compute,
exposed TP/PP/DP, bubble). ``tests/test_iteration.py`` holds the compiled iteration equal to the
stage processes on random jobs, fabrics and policies.

MoE layers are compiled too (:mod:`netsim.workload.iteration_moe`), anew each iteration since their
token picks are drawn per call. Not compiled (run by the stage processes): slow GPUs, whose compute
factor is read at the instant a pass starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from netsim.collectives import CollectiveRecord
from netsim.collectives.base import build_call
from netsim.collectives.nccl import CallSettings
from netsim.engine.fragment import Fragment, append_fragments
from netsim.engine.model import Deps, Schedule, ScheduleBuilder
from netsim.workload.iteration_moe import MoECall, moe_layer, moe_records
from netsim.workload.training import BREAKDOWN, pipeline_order

if TYPE_CHECKING:
    from netsim.collectives.ideal import IdealModel
    from netsim.workload.pipeline import Communicator, TrainingPlan


@dataclass(frozen=True)
class _Calls:
    """One batch of calls of one shape (one per group in ``comms``): where each starts and ends."""

    op: str
    algorithm: str
    size_bytes: float
    channels: int
    label: str
    comms: tuple
    start: np.ndarray   #: per call, the task at whose end it starts
    done: np.ndarray    #: per call, the JOIN after its last tasks
    how: CallSettings   #: how they were built (their bound is computed alike)


@dataclass
class CompiledIteration:
    """One iteration of a job as a schedule, with what is needed to read its accounts and records."""

    schedule: Schedule
    plan: TrainingPlan
    calls: list[_Calls]
    #: per breakdown part, spans ``(stage, from, to)``: replica ``d`` of ``stage`` adds ``T[to] - T[from]``
    spans: dict[str, list[tuple[int, np.ndarray, np.ndarray]]]
    #: pipeline waits ``(stage, waiting since, posted at, received)``: adds ``T[recv] - max(T[since], T[posted])``
    waits: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]
    #: per breakdown part, constants ``(stage, replica, seconds)`` (an MoE replica's own expert time)
    consts: dict[str, list[tuple[int, int, float]]]
    moe_calls: list[MoECall]

    def accounts(self, times: np.ndarray) -> dict[tuple[int, int], dict[str, float]]:
        """Per (stage, replica), its breakdown, as the stage processes account it."""
        p, dp = self.plan.par.pp, self.plan.par.dp
        parts = {k: np.zeros((p, dp)) for k in BREAKDOWN}
        for part, spans in self.spans.items():
            acc = parts[part]
            for stage, a, b in spans:
                acc[stage] += times[b] - times[a]
        for stage, since, posted, recv in self.waits:
            parts["pp_s"][stage] += times[recv] - np.maximum(times[since], times[posted])
        for part, items in self.consts.items():
            for stage, replica, seconds in items:
                parts[part][stage, replica] += seconds
        return {(s, d): {k: float(parts[k][s, d]) for k in BREAKDOWN} for s in range(p) for d in range(dp)}

    def records(self, times: np.ndarray, iteration: int, ideal: IdealModel | None,
                tolerance_s: float) -> list[CollectiveRecord]:
        """Every call of the iteration as a record, in order of completion."""
        out = []
        job = self.plan.job
        for c in self.calls:
            starts, ends = times[c.start].tolist(), times[c.done].tolist()
            how = c.how
            for comm, start, end in zip(c.comms, starts, ends):
                bound = ideal.ideal(c.op, c.algorithm, comm.gpus, c.size_bytes, channels=c.channels, tcp=comm.tcp,
                                    chunk_bytes=how.slice_bytes(c.op, c.algorithm, c.size_bytes, len(comm.gpus)),
                                    rails=how.rails, protocol=how.protocol) if ideal is not None else None
                out.append(CollectiveRecord(
                    job, iteration, c.op, c.algorithm, c.size_bytes, len(comm.gpus), c.channels, start, end,
                    ideal_s=bound.time_s if bound else math.nan, bound_s=bound.bound_s if bound else math.nan,
                    slack_s=tolerance_s * bound.chain if bound else 0.0, label=c.label, comm=comm.comm,
                    protocol=how.protocol_name))
        out += moe_records(self.moe_calls, times, self.plan, iteration, ideal, tolerance_s)
        out.sort(key=lambda r: (r.end_s, r.start_s))
        return out


def compilable(plan: TrainingPlan, speeds) -> bool:
    """Whether :func:`compile_iteration` covers the job (every job whose GPUs keep their speed)."""
    return not speeds


def compile_iteration(plan: TrainingPlan, gpu_host: np.ndarray, iteration: int = 0,
                      gpu_rail: np.ndarray | None = None) -> CompiledIteration:
    """Iteration ``iteration`` of ``plan`` as one schedule (see the module docstring; only an MoE job's
    depends on ``iteration``, through its drawn picks). ``gpu_rail``: the topology's, needed when the
    plan's settings put rings on rails."""
    return _Compiler(plan, np.asarray(gpu_host), iteration, gpu_rail=gpu_rail).run()


@dataclass
class _Compiler:
    plan: TrainingPlan
    gpu_host: np.ndarray
    iteration: int = 0
    gpu_rail: np.ndarray | None = None
    vplan: TrainingPlan | None = None   #: the plan over virtual stages (:meth:`TrainingPlan.virtual`)
    b: ScheduleBuilder = field(default_factory=ScheduleBuilder)
    calls: list[_Calls] = field(default_factory=list)
    spans: dict = field(default_factory=lambda: {k: [] for k in BREAKDOWN})
    waits: list = field(default_factory=list)
    consts: dict = field(default_factory=lambda: {"compute_s": [], "ep_s": []})
    moe_calls: list = field(default_factory=list)
    _picks: dict = field(default_factory=dict)
    _fragments: dict = field(default_factory=dict)
    _groups: dict = field(default_factory=dict)
    _pp_conns: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ the walk
    def run(self) -> CompiledIteration:
        plan = self.plan
        p, dp = plan.par.pp, plan.par.dp
        order = pipeline_order(plan.par.schedule, p, plan.micro_batches, plan.par.virtual_stages)
        self.vplan, n_virtual = plan.virtual(), p * plan.par.virtual_stages
        start = self.b.join()
        prev = [np.full(dp, start[0], dtype=np.int64) for _ in range(p)]
        posts: dict[tuple[str, int, int], tuple[np.ndarray, np.ndarray]] = {}
        arrivals: list[dict[int, np.ndarray]] = [{} for _ in range(p)]
        pos = [0] * p
        while any(pos[s] < len(order[s]) for s in range(p)):
            moved = False
            for s in range(p):
                while pos[s] < len(order[s]):
                    op, j, chunk = order[s][pos[s]]
                    g = chunk * p + s  # the virtual stage
                    if ((op == "F" and g > 0) or (op == "B" and g < n_virtual - 1)) and (op, g, j) not in posts:
                        break  # its input is produced by a stage not walked that far yet
                    last = pos[s] == len(order[s]) - 1
                    prev[s] = self._op(s, g, op, j, last, prev[s], posts, arrivals[s])
                    pos[s] += 1
                    moved = True
            if not moved:
                raise RuntimeError("the pipeline order waits for a send no stage makes")
        ends = [self._gradients(s, prev[s], arrivals[s]) for s in range(p)]
        self.b.join(after=[np.concatenate(ends).tolist()], n=1)
        return CompiledIteration(self.b.build(), plan, self.calls, self.spans, self.waits, self.consts,
                                 self.moe_calls)

    def _op(self, s: int, g: int, op: str, j: int, last: bool, prev: np.ndarray, posts: dict,
            arrivals: dict[int, np.ndarray]) -> np.ndarray:
        """One forward or backward of virtual stage ``g`` (on stage ``s``) on every replica; the stage's
        new last tasks."""
        plan, vplan = self.plan, self.vplan
        n_virtual = len(vplan.partition)
        if (op == "F" and g > 0) or (op == "B" and g < n_virtual - 1):
            posted, sent = posts.pop((op, g, j))
            recv = self.b.join(after=Deps(np.arange(0, 2 * len(prev) + 1, 2, dtype=np.int64),
                                          np.stack([prev, sent], axis=1).ravel()), n=len(prev))
            self.waits.append((s, prev, posted, recv))
            prev = recv
        overlap = op == "B" and last and plan.par.overlap_dp and plan.par.dp > 1
        pieces = plan.spec.dp_buckets if overlap else 1
        compute_s = vplan.forward_s(g) if op == "F" else vplan.backward_s(g)
        if plan.experts is not None:
            prev = self._moe_pass(s, g, op, j, prev, compute_s, pieces if overlap else 0, arrivals)
        else:
            prev = self._dense_pass(s, g, prev, compute_s, pieces if overlap else 0, arrivals)
        nxt = g + 1 if op == "F" else g - 1
        if 0 <= nxt < n_virtual:
            posts[(op, nxt, j)] = (prev, self._send(s, nxt % plan.par.pp, prev))
        return prev

    def _dense_pass(self, s: int, g: int, prev: np.ndarray, compute_s: float, buckets: int,
                    arrivals: dict[int, np.ndarray]) -> np.ndarray:
        """One pass of a dense stage: compute in steps, each followed by its TP allreduce; with ``buckets``
        (the last backward under ``overlap_dp``) the gradient buckets become ready along the steps."""
        plan, vplan = self.plan, self.vplan
        if plan.spec.tp_granularity == "layer" and plan.par.tp > 1:
            steps, size = 2 * vplan.partition[g], plan.model.activation_bytes()
        else:
            steps, size = max(buckets, 1), vplan.tp_bytes(g) / max(buckets, 1)
        fired = 0
        for i in range(steps):
            prev = self._compute(s, prev, compute_s / steps)
            prev = self._tp(s, prev, size)
            while fired < (i + 1) * buckets // steps:
                arrivals[fired] = prev
                fired += 1
        return prev

    def _moe_pass(self, s: int, g: int, op: str, micro: int, prev: np.ndarray, compute_s: float, buckets: int,
                  arrivals: dict[int, np.ndarray]) -> np.ndarray:
        """One pass of an MoE model's stage, layer by layer: the layer's compute and TP allreduce, and in
        MoE layers the EP layer (forward: after attention; backward: before it)."""
        plan, vplan = self.plan, self.vplan
        layers = list(vplan.stage_layers(g))
        flops = vplan.layer_flops(g)
        weights = [f / sum(flops) for f in flops]
        if op == "B":
            layers, weights = layers[::-1], weights[::-1]
        size = vplan.tp_bytes(g) / len(layers)
        fired = 0
        for i, (layer, weight) in enumerate(zip(layers, weights)):
            if op == "B" and plan.experts.is_moe(layer):
                prev = self._moe(s, layer, micro, op, prev)
            prev = self._tp(s, self._compute(s, prev, compute_s * weight), size)
            if op == "F" and plan.experts.is_moe(layer):
                prev = self._moe(s, layer, micro, op, prev)
            while fired < (i + 1) * buckets // len(layers):
                arrivals[fired] = prev
                fired += 1
        return prev

    def _compute(self, s: int, prev: np.ndarray, seconds: float) -> np.ndarray:
        compute = self.b.delay(np.full(len(prev), seconds), after=prev)
        self.spans["compute_s"].append((s, prev, compute))
        return compute

    def _tp(self, s: int, prev: np.ndarray, size: float) -> np.ndarray:
        plan = self.plan
        if plan.par.tp == 1 or size <= 0:
            return prev
        done = self._call("tp", "allreduce", s, size, "tp", prev)
        self.spans["tp_s"].append((s, prev, done))
        return done

    def _moe(self, s: int, layer: int, micro: int, op: str, prev: np.ndarray) -> np.ndarray:
        """The MoE layer of every EP group of stage ``s``: each group's replicas meet, run it, go on."""
        ep = self.plan.spec.moe.ep
        out = np.empty_like(prev)
        for group in range(len(prev) // ep):
            reps = np.arange(group * ep, (group + 1) * ep)
            meet = int(self.b.join(after=[prev[reps].tolist()], n=1)[0])
            calls, expert_s, done = moe_layer(self.b, self.plan, self.gpu_host, self.iteration, s, group, layer,
                                              micro, op, meet, self._picks)
            self.moe_calls.extend(calls)
            out[reps] = done
            for position, d in enumerate(reps.tolist()):
                self.consts["compute_s"].append((s, d, float(expert_s[position])))
                self.consts["ep_s"].append((s, d, -float(expert_s[position])))
        self.spans["ep_s"].append((s, prev, out))
        return out

    def _send(self, src_stage: int, dst_stage: int, after: np.ndarray) -> np.ndarray:
        """One message per TP rank of every replica to its peer on ``dst_stage``; per replica, when all arrived."""
        plan = self.plan
        tp, dp = plan.par.tp, plan.par.dp
        conns = self._pp_conns.get((src_stage, dst_stage))
        if conns is None:
            src = [plan.gpus[plan.rank(src_stage, d, k)] for d in range(dp) for k in range(tp)]
            dst = [plan.gpus[plan.rank(dst_stage, d, k)] for d in range(dp) for k in range(tp)]
            comm = [plan.pp_groups[(d, k)].comm for d in range(dp) for k in range(tp)]
            conns = self._pp_conns[(src_stage, dst_stage)] = self.b.connect(src, dst, 0, plan.job, comm)
        sends = self.b.send(conns, plan.pp_bytes(), after=np.repeat(after, tp))
        if tp == 1:
            return sends
        return self.b.join(after=Deps(np.arange(0, dp * tp + 1, tp, dtype=np.int64), sends), n=dp)

    # ------------------------------------------------------------------ data parallel
    def _gradients(self, s: int, prev: np.ndarray, arrivals: dict[int, np.ndarray]) -> np.ndarray:
        """Stage ``s``'s gradient buckets; per replica, the task that ends its iteration."""
        plan = self.plan
        if plan.par.dp == 1:
            return prev
        n_buckets = plan.spec.dp_buckets
        share = 1.0 / n_buckets
        chunks = [k * plan.par.pp + s for k in range(plan.par.virtual_stages)]  # its virtual stages
        grad = sum(self.vplan.grad_bytes(g) for g in chunks)
        params = sum(self.vplan.param_bytes(g) for g in chunks)
        expert = sum(self.vplan.expert_grad_bytes(g) for g in chunks)
        before = -1
        for bucket in range(n_buckets):
            ready = arrivals.get(bucket, prev)
            meet = self.b.join(after=[ready.tolist() + ([before] if before >= 0 else [])], n=1)
            op = "reduce_scatter" if plan.par.sharded_optimizer else "allreduce"
            done = self._call("dp", op, s, grad * share, "dp", meet)
            if plan.edp_groups:  # MoE: each routed expert's gradients over its replicas in the other EP groups
                done = np.concatenate([done, self._call("edp", "allreduce", s,
                                                        expert * share, "edp", meet)])
            synced = self.b.join(after=[done.tolist()], n=1)
            if plan.par.sharded_optimizer and bucket == n_buckets - 1:
                done = self._call("dp", "allgather", s, params, "dp", synced)
                synced = self.b.join(after=[done.tolist()], n=1)
            before = int(synced[0])
        end = self.b.join(after=Deps(np.arange(0, 2 * len(prev) + 1, 2, dtype=np.int64),
                                     np.stack([prev, np.full(len(prev), before)], axis=1).ravel()), n=len(prev))
        self.spans["dp_s"].append((s, prev, end))
        return end

    # ------------------------------------------------------------------ calls
    def _call(self, kind: str, op: str, s: int, size: float, label: str, ready: np.ndarray) -> np.ndarray:
        """The calls of ``op`` on stage ``s``'s ``kind`` groups (TP: one per replica, ``ready`` one task
        each; DP and expert DP: one per group, all after ``ready[0]``); per call, its end. They are
        built as the plan says for their kind and size (:meth:`TrainingPlan.how`: algorithm, protocol,
        channels, slice, rails)."""
        how = self.plan.how(kind, op, size)
        algorithm, channels = how.algorithm, how.channels
        comms = self._comms(kind, s)
        ready = np.broadcast_to(ready, (len(comms),))
        done = np.empty(len(comms), dtype=np.int64)
        for frag, rows, conns in self._copies(kind, s, op, algorithm, size, how):
            ranks = np.repeat(ready[rows][:, None], frag.n_ranks, axis=1)
            _first, done[rows] = append_fragments(self.b, frag, ranks, conns)
        self.calls.append(_Calls(op, algorithm, float(size), channels, label, tuple(comms),
                                 ready.copy(), done, how))
        return done

    def _comms(self, kind: str, s: int) -> list[Communicator]:
        plan = self.plan
        if kind == "tp":
            return [plan.tp_groups[(s, d)] for d in range(plan.par.dp)]
        if kind == "edp":
            return [plan.edp_groups[(s, k, e)] for k in range(plan.par.tp) for e in range(plan.spec.moe.ep)]
        return [plan.dp_groups[(s, k)] for k in range(plan.par.tp)]

    def _copies(self, kind: str, s: int, op: str, algorithm: str, size: float, how: CallSettings) -> list:
        """``(fragment, rows, connection ids)`` per call shape among stage ``s``'s ``kind`` groups (rows:
        their positions in :meth:`_comms`); computed once per stage and call."""
        key = (kind, s, op, algorithm, float(size), how)
        hit = self._groups.get(key)
        if hit is not None:
            return hit
        plan = self.plan
        shapes: dict[tuple, list[int]] = {}
        comms = self._comms(kind, s)
        for row, comm in enumerate(comms):
            g = np.asarray(comm.gpus, dtype=np.int64)
            order = np.argsort(g)
            rails = tuple(self.gpu_rail[g[order]].tolist()) if how.rails else None  # by placeholder GPU
            shape = (tuple(np.argsort(order).tolist()),
                     tuple(np.unique(self.gpu_host[g], return_inverse=True)[1].tolist()), comm.tcp, rails)
            shapes.setdefault(shape, []).append(row)
        out = []
        for (vgpu, vhost, tcp, vrail), rows in shapes.items():
            frag = self._fragment(op, algorithm, size, how, vgpu, vhost, tcp, vrail)
            placed = np.sort(np.array([comms[r].gpus for r in rows], dtype=np.int64), axis=1)
            comm_ids = np.repeat([comms[r].comm for r in rows], len(frag.conn_src))
            ids = self.b.connect(placed[:, frag.conn_src].ravel(), placed[:, frag.conn_dst].ravel(),
                                 np.tile(frag.conn_channel, len(rows)), plan.job, comm_ids,
                                 np.tile(frag.conn_tcp, len(rows)))
            out.append((frag, np.asarray(rows, dtype=np.int64), ids.reshape(len(rows), -1)))
        self._groups[key] = out
        return out

    def _fragment(self, op: str, algorithm: str, size: float, how: CallSettings, vgpu: tuple, vhost: tuple,
                  tcp: bool, vrail: tuple | None) -> Fragment:
        """The call over placeholder GPUs ``vgpu`` (each group's GPUs by their order) on hosts ``vhost``
        (``vrail``: each placeholder GPU's rail, when rings follow rails)."""
        key = (op, algorithm, float(size), how, vgpu, vhost, tcp, vrail)
        frag = self._fragments.get(key)
        if frag is None:
            host = np.empty(len(vgpu), dtype=np.int64)
            host[list(vgpu)] = vhost
            rail = None if vrail is None else np.asarray(vrail, dtype=np.int64)
            frag = self._fragments[key] = Fragment.record(len(vgpu), lambda b, ready: build_call(
                b, op, algorithm, list(vgpu), size, protocol=how.protocol, channels=how.channels,
                chunk_bytes=how.slice_bytes(op, algorithm, size, len(vgpu)), tcp=tcp, ready=ready,
                gpu_host=host, gpu_rail=rail))
        return frag

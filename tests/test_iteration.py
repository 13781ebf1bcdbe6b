"""The compiled training iteration (netsim.workload.iteration): one schedule per iteration gives exactly
what the stage processes gave, and a fragment copy is the call built again."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netsim.workload.pipeline as pipeline
from netsim.collectives import get_algorithm
from netsim.collectives.base import build_call
from netsim.collectives.nccl_tuning import call_protocol
from netsim.config import parse_spec
from netsim.engine.fragment import Fragment, append_fragments
from netsim.engine.model import ScheduleBuilder
from netsim.experiment import run_experiment
from netsim.workload.iteration import compilable, compile_iteration
from tests.test_training_properties import SETTINGS, training_cases

ENGINE = dict(ideal=True, congestion=False, record_flows=True)


def _run(case: dict, compiled: bool) -> tuple:
    """The run's iterations, calls and flows, with the iteration compiled or run by the stage processes."""
    with pytest.MonkeyPatch.context() as m:
        if not compiled:
            m.setattr(pipeline, "compilable", lambda plan, speeds: False)
        result = run_experiment(parse_spec({**case, "engine": ENGINE}))
    iterations = [(i.job, i.iteration, i.start_s, i.end_s, i.compute_s, i.tp_s, i.pp_s, i.dp_s, i.ep_s, i.bubble_s)
                  for i in result.iterations]
    calls = sorted((c.job, c.iteration, c.label, c.comm, c.op, c.algorithm, c.protocol, c.size_bytes, c.n_ranks, c.start_s,
                    c.end_s, c.ideal_s, c.bound_s, c.slack_s) for c in result.collectives)
    fl = result.fabric.flow_columns()
    flows = sorted(zip(fl["connection"].tolist(), fl["end_s"].tolist(), fl["start_s"].tolist(),
                       fl["size_bytes"].tolist()))
    return iterations, calls, flows, result.sim_time_s


def _same(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        numbers = [k for k, v in enumerate(x) if isinstance(v, float)]
        assert [v for k, v in enumerate(x) if k not in numbers] == [v for k, v in enumerate(y) if k not in numbers]
        np.testing.assert_allclose([x[k] for k in numbers], [y[k] for k in numbers], rtol=1e-9, atol=1e-15)


@settings(max_examples=8, **SETTINGS)
@given(case=training_cases())
def test_a_compiled_iteration_gives_what_the_stage_processes_gave(case):
    """Random dense jobs (TP/PP/DP, buckets with and without overlap, sharded optimizers, per-layer TP,
    every routing policy, mixed NIC families over TCP): identical iterations, breakdowns, calls with
    their ideals and bounds, and messages."""
    processes = _run(case, False)
    compiled = _run(case, True)
    for a, b in zip(processes[:3], compiled[:3]):
        _same(a, b)
    assert compiled[3] == pytest.approx(processes[3], rel=1e-12)


@settings(max_examples=4, **SETTINGS)
@given(case=training_cases())
def test_the_gpipe_order_compiled_gives_what_the_stage_processes_gave(case):
    """GPipe (every forward, then every backward in reverse) in both executions."""
    case["workload"]["parallelism"]["schedule"] = "gpipe"
    processes, compiled = _run(case, False), _run(case, True)
    for a, b in zip(processes[:3], compiled[:3]):
        _same(a, b)


SLOW_GPU = {"profile": "a100", "peak_tflops": 1e-6, "efficiency": 1.0}  # compute dwarfs every send


def _recurrence(order: list, forward: list[float], backward: list[float], p: int) -> float:
    """An iteration of compute only: each pass starts when its stage is free and its input has arrived."""
    n_virtual, done, free, pos = len(forward), {}, [0.0] * p, [0] * p
    while any(pos[s] < len(order[s]) for s in range(p)):
        for s in range(p):
            while pos[s] < len(order[s]):
                op, j, chunk = order[s][pos[s]]
                g = chunk * p + s
                need = ("F", g - 1, j) if op == "F" and g > 0 else \
                    ("B", g + 1, j) if op == "B" and g < n_virtual - 1 else None
                if need is not None and need not in done:
                    break
                free[s] = max(free[s], done.get(need, 0.0)) + (forward[g] if op == "F" else backward[g])
                done[(op, g, j)] = free[s]
                pos[s] += 1
    return max(free)


@pytest.mark.parametrize("schedule, v", [("1f1b", 1), ("gpipe", 1), ("interleaved", 2), ("interleaved", 3)])
@pytest.mark.parametrize("p, per_stage", [(2, 1), (2, 3), (4, 1), (4, 2)])
def test_pipeline_schedules_take_their_recurrence_and_interleaving_shrinks_the_bubble(schedule, v, p, per_stage):
    """Compute-bound jobs (sends negligible): the iteration is the order's recurrence over the virtual
    stages' compute; with equal stages 1F1B and GPipe take (m + p - 1)(f + b) and interleaving v chunks
    cuts the bubble to (p - 1)(f + b) / v, f and b a whole stage's (Narayanan et al., SC'21)."""
    from netsim.workload.training import pipeline_order

    m = p * per_stage
    layers = 12 * p * v
    topology = {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 1, "gpus_per_host": p,
                "nics_per_host": 1, "nic": {"bandwidth": "100Gbps"}, "uplink": {"bandwidth": "100Gbps"},
                "intra_host": {"bandwidth": "100GB/s", "latency": "1us"}}
    workload = {"type": "training", "gpu": SLOW_GPU, "model": {"layers": layers, "hidden": 64, "heads": 4,
                "seq_len": 32, "vocab": 1, "micro_batch": 1, "global_batch": m},
                "parallelism": {"tp": 1, "pp": p, "dp": 1, "schedule": schedule, "virtual_stages": v}}
    r = run_experiment(parse_spec({"name": "pp", "topology": topology, "workload": workload,
                                   "engine": {"ideal": False}}))
    (it,) = r.iterations
    vplan = r.jobs[0].plan.virtual()
    forward = [vplan.forward_s(g) for g in range(p * v)]
    backward = [vplan.backward_s(g) for g in range(p * v)]
    assert it.duration_s == pytest.approx(_recurrence(pipeline_order(schedule, p, m, v), forward, backward, p),
                                          rel=1e-6)
    f, b = forward[0], backward[0]  # a chunk's (the last adds the logits of a one-word vocabulary: 0.1% of a layer)
    assert it.duration_s == pytest.approx((m * v + p - 1) * (f + b), rel=3e-3)  # = (m + (p - 1) / v) x a stage's
    assert it.compute_s + it.bubble_s + it.pp_s == pytest.approx(it.duration_s, rel=1e-9)


@st.composite
def moe_cases(draw) -> dict:
    """A small MoE job on a 2 x 2 leaf-spine of 4-GPU hosts: EP over some of the DP replicas, dense
    first layers, skewed or uniform routing, any all-to-all-v algorithm, buckets, two iterations."""
    tp, pp = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([v for v in (2, 4) if tp * pp * v <= 16]))
    ep = draw(st.sampled_from([v for v in (2, 4) if dp % v == 0]))
    layers = pp * draw(st.integers(1, 2))
    micro = draw(st.integers(1, 3))
    routing = draw(st.sampled_from([{"type": "uniform"}, {"type": "zipf", "skew": 1.2}]))
    workload = {"type": "training", "gpu": "h100", "iterations": 2, "dp_buckets": draw(st.integers(1, 2)),
                "model": {"layers": layers, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1024,
                          "micro_batch": 1, "global_batch": dp * micro},
                "parallelism": {"tp": tp, "pp": pp, "dp": dp, "overlap_dp": draw(st.booleans()),
                                "sharded_optimizer": draw(st.booleans())},
                "moe": {"experts": 2 * ep, "top_k": 2, "ep": ep, "expert_hidden": 512, "routing": routing,
                        "dense_layers": draw(st.integers(0, min(1, layers - 1))),  # (at least one MoE layer)
                        "algorithm": draw(st.sampled_from(["direct", "pairwise"]))}}
    topology = {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 4,
                "nics_per_host": 2, "nic": {"bandwidth": "400Gbps", "latency": "1us"},
                "uplink": {"bandwidth": "200Gbps", "latency": "500ns"}, "intra_host": {"bandwidth": "900GB/s"}}
    return {"name": "moe", "seed": draw(st.integers(0, 2**16)), "topology": topology,
            "placement": draw(st.sampled_from(["sequential", {"type": "random"}])),
            "routing": draw(st.sampled_from(["ecmp", "spray"])), "workload": workload}


@settings(max_examples=4, **SETTINGS)
@given(case=moe_cases())
def test_a_compiled_moe_iteration_gives_what_the_stage_processes_gave(case):
    """MoE layers compiled (rendezvous, dispatch, experts by the tokens received, combine, expert-DP
    gradients): identical iterations, breakdowns, all-to-all-v records and messages."""
    processes = _run(case, False)
    compiled = _run(case, True)
    for a, b in zip(processes[:3], compiled[:3]):
        _same(a, b)


def test_jobs_are_compiled_unless_gpus_slow_down():
    from netsim.workload.pipeline import plan_training
    from netsim.topology import leaf_spine

    topo = leaf_spine(leaves=1, spines=1, hosts_per_leaf=2, gpus_per_host=4, nics_per_host=1,
                      nic_bandwidth_Bps=1e10, uplink_bandwidth_Bps=1e10, intra_bandwidth_Bps=1e11)
    spec = parse_spec({"name": "t", "topology": {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2,
                                                 "gpus_per_host": 4, "nics_per_host": 1,
                                                 "nic": {"bandwidth": "100Gbps"}, "uplink": {"bandwidth": "100Gbps"},
                                                 "intra_host": {"bandwidth": "100GB/s"}},
                       "workload": {"type": "training", "model": {"layers": 4, "hidden": 64, "heads": 4,
                                                                  "seq_len": 32, "vocab": 256, "micro_batch": 1,
                                                                  "global_batch": 4},
                                    "parallelism": {"tp": 2, "pp": 2, "dp": 2}}})
    plan = plan_training(spec.workload, list(range(8)), topo)
    assert compilable(plan, None) and not compilable(plan, {"gpu": 1})  # slow GPUs: read when a pass starts
    it = compile_iteration(plan, topo.gpu_host)
    # 2 stages x 2 micro-batches x (F + B) passes per replica, each a compute delay and a TP call
    assert sum(len(a) for _s, a, _b in it.spans["compute_s"]) == 2 * 2 * 2 * 2
    assert sum(len(c.comms) for c in it.calls if c.label == "tp") == 2 * 2 * 2 * 2
    assert {c.op for c in it.calls if c.label == "dp"} == {"allreduce"}


OPS = [("allreduce", "ring"), ("allreduce", "tree"), ("allreduce", "direct"), ("allreduce", "hierarchical"),
       ("reduce_scatter", "ring"), ("allgather", "ring"), ("allreduce", "halving_doubling")]


@given(op=st.sampled_from(OPS), hosts=st.sampled_from([1, 2, 4]), per_host=st.sampled_from([1, 2]),
       channels=st.integers(1, 3), copies=st.integers(1, 4), data=st.data())
@settings(max_examples=30, deadline=None)
def test_a_fragment_copy_is_the_call_built_again(op, hosts, per_host, channels, copies, data):
    """Each copy of a recorded call has the tasks, dependencies (its ranks' ready tasks in place of the
    placeholders), connections and per-message overhead scales (an NCCL protocol's) that building the
    call on the copy's GPUs appends."""
    op, alg = op
    n = hosts * per_host
    name = data.draw(st.sampled_from([None, "LL", "LL128", "Simple"])) if alg in ("ring", "tree") else None
    protocol = call_protocol(name, alg, hosts > 1) if name else None

    def build(b, gpus, size, **kw):
        return build_call(b, op, alg, gpus, size, protocol=protocol, **kw)
    gpu_host = np.repeat(np.arange(64), per_host)
    chosen = sorted(data.draw(st.lists(st.integers(0, 7), min_size=hosts, max_size=hosts, unique=True)))
    first = [h * per_host + k for h in chosen for k in range(per_host)]
    if alg != "hierarchical":  # any rank order (hierarchical wants each host's ranks together)
        first = data.draw(st.permutations(first))
    groups = np.array([[g + 16 * per_host * c for g in first] for c in range(copies)])  # the same shape shifted
    v = np.argsort(np.argsort(groups[0]))
    host = np.empty(n, dtype=np.int64)
    host[v] = np.unique(gpu_host[groups[0]], return_inverse=True)[1]
    frag = Fragment.record(n, lambda b, ready: build(b, v.tolist(), 1e6, channels=channels, ready=ready,
                                                     gpu_host=host))
    fast, slow = ScheduleBuilder(), ScheduleBuilder()
    ready_f = fast.delay(np.arange(1.0, copies * n + 1)).reshape(copies, n)
    ready_s = slow.delay(np.arange(1.0, copies * n + 1)).reshape(copies, n)
    placed = np.sort(groups, axis=1)
    comm = np.repeat(np.arange(1, copies + 1), len(frag.conn_src))
    conns = fast.connect(placed[:, frag.conn_src].ravel(), placed[:, frag.conn_dst].ravel(),
                         np.tile(frag.conn_channel, copies), 0, comm, np.tile(frag.conn_tcp, copies))
    _first, done = append_fragments(fast, frag, ready_f, conns.reshape(copies, -1))
    for c, g in enumerate(groups):
        build(slow, g.tolist(), 1e6, channels=channels, ready=ready_s[c], comm=c + 1, gpu_host=gpu_host)
    a, b = fast.build(), slow.build()
    m = len(b)
    assert len(a) == m + copies and done.tolist() == list(range(m, m + copies))
    np.testing.assert_array_equal(a.kind[:m], b.kind)
    np.testing.assert_array_equal(a.amount[:m], b.amount)
    ones = np.ones(len(a))
    np.testing.assert_array_equal((a.overhead_scale if a.overhead_scale is not None else ones)[:m],
                                  b.overhead_scale if b.overhead_scale is not None else ones[:m])
    np.testing.assert_array_equal(a.dep_ptr[:m + 1], b.dep_ptr)
    np.testing.assert_array_equal(a.dep_idx[:len(b.dep_idx)], b.dep_idx)
    cols = ("src", "dst", "channel", "comm", "tcp")
    sends = b.kind == 0
    for col in cols:
        np.testing.assert_array_equal(a.connections.column(col)[a.conn[:m][sends]],
                                      b.connections.column(col)[b.conn[sends]])
    # the done JOIN of each copy waits for every task of the copy that nothing else waits for
    per_copy = (m - copies * n) // copies
    for c in range(copies):
        lo = copies * n + c * per_copy
        expected = {lo + int(t) for t in frag.sinks} if len(frag) else set(ready_f[c].tolist())
        assert set(a.deps(m + c).tolist()) == expected


@pytest.mark.parametrize("parallelism, batch, path, message", [
    ({"pp": 2, "virtual_stages": 2}, 2, "workload.parallelism.virtual_stages", "needs schedule: interleaved"),
    ({"pp": 2, "schedule": "interleaved"}, 2, "workload.parallelism.schedule", "virtual_stages >= 2"),
    ({"pp": 1, "schedule": "interleaved", "virtual_stages": 2}, 2, "workload.parallelism.schedule", "pp >= 2"),
    ({"pp": 4, "schedule": "interleaved", "virtual_stages": 2}, 2, "workload.model.global_batch", "multiple of pp"),
    ({"pp": 4, "schedule": "interleaved", "virtual_stages": 4}, 4, "workload.parallelism.virtual_stages",
     "cannot fill"),
])
def test_bad_pipeline_schedules_are_refused_at_their_path(parallelism, batch, path, message):
    from netsim.errors import ConfigError

    spec = {"name": "x", "topology": {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 1,
                                      "gpus_per_host": 4, "nics_per_host": 1, "nic": {"bandwidth": "100Gbps"},
                                      "uplink": {"bandwidth": "100Gbps"}, "intra_host": {"bandwidth": "100GB/s"}},
            "workload": {"type": "training", "parallelism": parallelism,
                         "model": {"layers": 8, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 256,
                                   "micro_batch": 1, "global_batch": batch}}}
    with pytest.raises(ConfigError) as err:
        parse_spec(spec)
    assert err.value.path.startswith(path) and message in err.value.message


@given(n=st.integers(2, 6), seed=st.integers(0, 2**32 - 1), offsets=st.booleans(), tcp=st.booleans(),
       spread=st.sampled_from([1, 2, 4]))
@settings(max_examples=25, deadline=None)
def test_the_closed_form_alltoallv_bound_is_the_replayed_one(n, seed, offsets, tcp, spread):
    """A direct all-to-all-v's bound from its byte matrix equals the replay's (the slowest message
    alone, the busiest forced link or host), bit for bit, with and without per-rank offsets; its ideal
    is that bound, never above the call run alone on the non-blocking fabric."""
    from netsim.collectives.ideal import IdealModel
    from netsim.topology.multicluster import multi_cluster  # noqa: F401  (TCP pairs need Ethernet NICs)
    from netsim.topology import leaf_spine

    topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=2, gpus_per_host=4, nics_per_host=2,
                      nic_bandwidth_Bps=5e9, uplink_bandwidth_Bps=4e9, intra_bandwidth_Bps=1e11)
    rng = np.random.default_rng(seed)
    gpus = sorted(rng.choice(16, size=n, replace=False).tolist()) if spread > 1 else list(range(n))
    m = rng.integers(0, 4, size=(n, n)) * rng.uniform(1e5, 1e7, size=(n, n)) * (rng.random((n, n)) < 0.8)
    np.fill_diagonal(m, 0.0)
    ready = rng.uniform(0, 1e-3, size=n) if offsets else None
    tcp = False  # (a leaf-spine has no Ethernet NICs)
    ideal = IdealModel(topo)
    closed = ideal.alltoallv_direct(gpus, m, offsets=ready, tcp=tcp)
    b = ScheduleBuilder()
    get_algorithm("alltoallv", "direct")(b, gpus, 0.0, tcp=tcp, gpu_host=topo.gpu_host, matrix=m,
                                         ready=None if ready is None else b.delay(ready))
    old = IdealModel(topo).of_schedule(("x",), b.build(), n, tcp)
    assert (closed.replay_s, closed.load_s, closed.bound_s, closed.chain) == \
        (old.replay_s, old.load_s, old.bound_s, old.chain)
    assert closed.time_s == closed.bound_s <= old.time_s * (1 + 1e-12)


def test_calls_inside_hosts_built_alike_share_one_ideal():
    """A TP group's ideal is computed once for every host built alike, and is what that host's own
    computation gives; hosts built differently (other NICs) keep their own."""
    from netsim.collectives.ideal import IdealModel
    from netsim.topology import leaf_spine
    from netsim.topology.multicluster import multi_cluster  # noqa: F401

    topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=2, gpus_per_host=4, nics_per_host=2,
                      nic_bandwidth_Bps=5e9, uplink_bandwidth_Bps=4e9, intra_bandwidth_Bps=1e11)
    shared = IdealModel(topo)
    first = shared.ideal("allreduce", "ring", [0, 1, 2, 3], 1e8)
    assert len(shared._cache) == 1
    again = shared.ideal("allreduce", "ring", [12, 13, 14, 15], 1e8)
    assert again is first and len(shared._cache) == 1
    assert IdealModel(topo).ideal("allreduce", "ring", [12, 13, 14, 15], 1e8) == first
    assert shared.ideal("allreduce", "ring", [13, 12, 14, 15], 1e8) is not first  # another rank order
    spec = parse_spec({"name": "h", "topology": {
        "type": "multi_cluster", "ethernet": {"bandwidth": "25Gbps"},
        "clusters": [{"name": c, "leaves": 1, "spines": 1, "hosts_per_leaf": 1, "gpus_per_host": 2,
                      "nics_per_host": 1, "nic": nic, "uplink": {"bandwidth": "400Gbps"},
                      "intra_host": {"bandwidth": "300GB/s"}}
                     for c, nic in (("a", "ib-hdr-200"), ("b", "roce-200"))]},
        "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"}})
    from netsim.experiment.run import build_topology

    mixed = IdealModel(build_topology(spec))
    mixed.ideal("allreduce", "ring", [0, 1], 1e8)
    mixed.ideal("allreduce", "ring", [2, 3], 1e8)
    assert len(mixed._cache) == 2

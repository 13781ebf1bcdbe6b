"""Property tests of training jobs: the iteration breakdown, byte and call accounting, placement, determinism,
and the layer-partition search.

Inputs are built constructively (every drawn config is valid by construction, no filtering), and each
test keeps its example count small: a training run is a whole simulation.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from netsim.config import TrainingWorkload, parse_spec
from netsim.engine import Environment, Fabric
from netsim.experiment import run_experiment
from netsim.placement import make_placement, nic_family_order
from netsim.routing import make_routing
from netsim.topology.multicluster import multi_cluster
from netsim.topology.nic import nic_profile
from netsim.workload.pipeline import BREAKDOWN, plan_training, run_training
from netsim.workload.training import one_f_one_b

SLOW_GPU = {"profile": "a100", "peak_tflops": 1e-6, "efficiency": 1.0}  # 1 MFLOP/s: compute dwarfs every send
FAST = dict(ideal=False, congestion=False, record_flows=False)  # engine extras the properties do not read
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

DIMS = [1, 2, 3, 4]  # 1..3 and the powers of two up to 4
MAX_WORLD = 16
ROUTINGS = ["ecmp", "spray", "c4p", "split"]
ALLREDUCE = ["ring", "tree", "direct", "halving_doubling", "recursive_doubling"]


def allreduce_for(n: int) -> list[str]:
    """Allreduce algorithms for an ``n``-rank group (the doubling ones need a power of two)."""
    return ALLREDUCE if n & (n - 1) == 0 else ALLREDUCE[:3]


# ---------------------------------------------------------------------------- strategies


@st.composite
def training_cases(draw, *, max_iterations: int = 2) -> dict:
    """A valid single-job training spec (parse_spec input) on one host, a 2x2 leaf-spine, or two clusters
    of different NIC families (InfiniBand and RoCE, joined by TCP Ethernet)."""
    tp = draw(st.sampled_from(DIMS))
    pp = draw(st.sampled_from([v for v in DIMS if tp * v <= MAX_WORLD]))
    dp = draw(st.sampled_from([v for v in DIMS if tp * pp * v <= MAX_WORLD]))
    world = tp * pp * dp
    layers = pp + draw(st.integers(0, 3))
    micro_batches = draw(st.integers(1, 6))
    micro_batch = draw(st.integers(1, 2))
    if draw(st.booleans()):
        partition: str | list[int] = draw(st.sampled_from(["even", "auto"]))  # auto: search under holmes
    else:  # an explicit split: pp - 1 distinct cut points in 1..layers-1
        cuts = sorted(draw(st.lists(st.integers(1, layers - 1), min_size=pp - 1, max_size=pp - 1,
                                    unique=True))) if pp > 1 else []
        bounds = [0, *cuts, layers]
        partition = [b - a for a, b in zip(bounds, bounds[1:])]
    overlap = draw(st.booleans())
    sharded = draw(st.booleans())
    workload = {
        "type": "training",
        "gpu": draw(st.sampled_from([SLOW_GPU, "a100"])),  # compute-bound, or communication-bound
        "model": {"layers": layers, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 256,
                  "micro_batch": micro_batch, "global_batch": micro_batch * dp * micro_batches},
        "parallelism": {"tp": tp, "pp": pp, "dp": dp, "sharded_optimizer": sharded, "overlap_dp": overlap},
        "dp_buckets": draw(st.integers(1, 4)),
        "tp_comm": {"algorithm": draw(st.sampled_from(allreduce_for(tp))),
                    "channels": draw(st.integers(1, 2))},
        "dp_comm": {"algorithm": "ring" if sharded else draw(st.sampled_from(allreduce_for(dp))),
                    "channels": draw(st.integers(1, 2))},
        "tp_granularity": draw(st.sampled_from(["stage", "layer"])),
        "partition": partition,
        "iterations": draw(st.integers(1, max_iterations)),
    }
    if draw(st.booleans()):
        workload["grad_bytes"] = draw(st.sampled_from([2, 4]))  # e.g. fp32 gradient reduction
    shape = draw(st.sampled_from(["host", "leaf_spine", "clusters"]))
    if shape == "clusters":  # two clusters of different NIC families: mixed groups talk TCP
        gph = draw(st.sampled_from([1, 2, 4]))
        hosts = -(-world // gph)
        first = draw(st.integers(-(-hosts // 2), hosts))
        nics = draw(st.permutations(["ib-hdr-200", "roce-200"]))
        topology = {"type": "multi_cluster", "numbering": draw(st.sampled_from(["blocked", "interleaved"])),
                    "ethernet": {"bandwidth": "25Gbps", "latency": "2us"},
                    "clusters": [{"name": f"c{i}", "leaves": 1, "spines": 1, "hosts_per_leaf": n,
                                  "gpus_per_host": gph, "nics_per_host": 1, "nic": nic,
                                  "uplink": {"bandwidth": "400Gbps"}, "intra_host": {"bandwidth": "300GB/s"}}
                                 for i, (n, nic) in enumerate(zip([first, max(1, hosts - first)], nics))]}
    elif shape == "host":
        topology = {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 1,
                    "gpus_per_host": world, "nics_per_host": 1, "nic": {"bandwidth": "100Gbps"},
                    "uplink": {"bandwidth": "100Gbps"},
                    "intra_host": {"bandwidth": "100GB/s", "latency": "1us"}}
    else:
        gph = draw(st.sampled_from([1, 2, 4]))
        hosts = -(-world // gph)
        topology = {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": -(-hosts // 2),
                    "gpus_per_host": gph, "nics_per_host": draw(st.integers(1, 2)),
                    "nic": {"bandwidth": "100Gbps", "latency": "1us"}, "uplink": {"bandwidth": "100Gbps"},
                    "intra_host": {"bandwidth": "200GB/s"}}
    placement = draw(st.sampled_from(["sequential", {"type": "random"}, {"type": "random", "by": "host"},
                                      "holmes"]))
    return {"name": "prop", "seed": draw(st.integers(0, 2**16)), "topology": topology, "placement": placement,
            "routing": draw(st.sampled_from(ROUTINGS)), "engine": FAST, "workload": workload}


def stage_costs(plan) -> tuple[list[float], list[float]]:
    p = plan.par.pp
    return [plan.forward_s(s) for s in range(p)], [plan.backward_s(s) for s in range(p)]


def assert_valid_iteration(it, plan) -> None:
    """The breakdown sums to the iteration, no part is negative, and compute bounds the duration."""
    d = it.duration_s
    assert d > 0
    parts = [getattr(it, k) for k in BREAKDOWN]
    assert math.fsum(parts) == pytest.approx(d, rel=1e-9), dict(zip(BREAKDOWN, parts))
    assert min(parts) >= -1e-12, dict(zip(BREAKDOWN, parts))
    m = plan.micro_batches
    fwd, bwd = stage_costs(plan)
    assert d >= max(m * (f + b) for f, b in zip(fwd, bwd)) * (1 - 1e-9)
    assert d >= one_f_one_b(fwd, bwd, m, 0.0)[0] * (1 - 1e-9)
    assert it.compute_s == pytest.approx(sum(m * (f + b) for f, b in zip(fwd, bwd)) / plan.par.pp, rel=1e-9)
    # a dimension of size one never communicates
    if plan.par.tp == 1:
        assert it.tp_s == 0.0
    if plan.par.pp == 1:
        assert it.pp_s == 0.0
    if plan.par.dp == 1:
        assert it.dp_s == 0.0


# ---------------------------------------------------------------------------- 1. the breakdown


def rerun_alone(spec, result, plan) -> tuple[object, dict]:
    """One iteration of ``plan`` alone on a fresh fabric with the run's routing generator: (record, the
    per-(stage, replica) breakdown the record averages)."""
    routing_rng = np.random.default_rng(np.random.SeedSequence(spec.seed).spawn(2)[1])  # as run_experiment
    env = Environment()
    fabric = Fabric(env, result.topology, make_routing(spec.routing.type, result.topology, routing_rng,
                                                       spec.routing.options),
                    completion_tolerance_s=spec.engine.completion_tolerance, record_flows=False,
                    track_congestion=False)
    accounts, iters = [], []
    env.process(run_training(env, fabric, plan, iterations=1, records=[], iteration_records=iters,
                             accounts=accounts))
    env.run()
    (it,) = iters
    (acct,) = accounts
    return it, acct


@settings(max_examples=40, **SETTINGS)
@given(training_cases())
def test_iteration_breakdown_sums_and_is_bounded_by_compute(data):
    spec = parse_spec(data)
    r = run_experiment(spec)
    plan = r.jobs[0].plan
    w = data["workload"]
    assert len(r.iterations) == w["iterations"]
    assert [it.iteration for it in r.iterations] == list(range(w["iterations"]))
    for prev, it in zip(r.iterations, r.iterations[1:]):
        assert it.start_s == pytest.approx(prev.end_s, rel=1e-12, abs=1e-15)  # back to back
    for it in r.iterations:
        assert it.world == plan.par.world
        assert it.flops == plan.model.iteration_flops()
        assert_valid_iteration(it, plan)

    # Per stage process: its own parts are disjoint stretches of the iteration, its compute is its
    # stage's m x (forward + backward), and the record is their mean (the job alone reproduces iteration 0).
    it, acct = rerun_alone(spec, r, plan)
    assert it.duration_s == pytest.approx(r.iterations[0].duration_s, rel=1e-9)
    assert set(acct) == {(s, d) for s in range(plan.par.pp) for d in range(plan.par.dp)}
    m = plan.micro_batches
    for (s, _d), a in acct.items():
        assert min(a.values()) >= 0.0, a
        assert math.fsum(a[k] for k in BREAKDOWN if k != "bubble_s") <= it.duration_s * (1 + 1e-9), a
        assert a["compute_s"] == pytest.approx(m * (plan.forward_s(s) + plan.backward_s(s)), rel=1e-9)
    for k in BREAKDOWN[:-1]:
        assert getattr(it, k) == pytest.approx(math.fsum(a[k] for a in acct.values()) / len(acct), rel=1e-9,
                                               abs=1e-15)


# ---------------------------------------------------------------------------- 2. bytes and calls


@settings(max_examples=30, **SETTINGS)
@given(training_cases(max_iterations=2))
def test_pipeline_bytes_and_collective_calls_are_accounted(data):
    r = run_experiment(parse_spec(data))
    plan = r.jobs[0].plan
    par, m, n_it = plan.par, plan.micro_batches, data["workload"]["iterations"]
    kind = {c.comm: c for c in plan.comms}

    # PP: every micro-batch's activation forward and its gradient backward, per stage boundary and TP rank
    pp_comms = {c.comm for c in plan.comms if c.kind == "pp"}
    expected_pp = 2 * m * (par.pp - 1) * par.dp * par.tp * plan.pp_bytes() * n_it
    for counter in (r.fabric.bytes_posted, r.fabric.bytes_delivered):
        got = math.fsum(v for conn, v in counter.items() if conn.job == plan.job and conn.comm in pp_comms)
        assert got == pytest.approx(expected_pp, rel=1e-9, abs=1e-6)
    assert r.fabric.bytes_posted.keys() == r.fabric.bytes_delivered.keys()
    for conn, v in r.fabric.bytes_posted.items():
        assert r.fabric.bytes_delivered[conn] == pytest.approx(v, rel=1e-9)

    calls = defaultdict(list)
    for c in r.collectives:
        assert c.label in ("tp", "dp") and c.job == plan.job
        assert kind[c.comm].kind == c.label
        calls[(c.label, c.iteration)].append(c)
    assert {it for _label, it in calls} <= set(range(n_it))

    for it in range(n_it):
        tp = calls[("tp", it)]
        if par.tp == 1:
            assert tp == []
        else:
            assert {c.op for c in tp} == {"allreduce"} and {c.n_ranks for c in tp} == {par.tp}
            per_group = Counter(c.comm for c in tp)
            bytes_per_group = defaultdict(float)
            for c in tp:
                bytes_per_group[c.comm] += c.size_bytes
            assert set(per_group) == {g.comm for g in plan.tp_groups.values()}
            for (s, d), g in plan.tp_groups.items():
                # two passes per micro-batch, each moving tp_bytes(stage) over its TP group ...
                assert bytes_per_group[g.comm] == pytest.approx(2 * m * plan.tp_bytes(s), rel=1e-9)
                # ... in one call per pass (stage granularity; the last backward is cut into dp_buckets
                # pieces when it overlaps the gradient sync) or two per layer and pass (layer granularity)
                if data["workload"]["tp_granularity"] == "layer":
                    assert per_group[g.comm] == 2 * m * 2 * plan.partition[s]
                elif par.overlap_dp and par.dp > 1:
                    assert per_group[g.comm] == 2 * m - 1 + plan.spec.dp_buckets
                else:
                    assert per_group[g.comm] == 2 * m

        dp = calls[("dp", it)]
        if par.dp == 1:
            assert dp == []
            continue
        assert {c.n_ranks for c in dp} == {par.dp}
        buckets = plan.spec.dp_buckets
        by_group = defaultdict(list)
        for c in dp:
            by_group[c.comm].append(c)
        assert set(by_group) == {g.comm for g in plan.dp_groups.values()}
        for (s, _k), g in plan.dp_groups.items():
            ops = Counter(c.op for c in by_group[g.comm])
            reduced = math.fsum(c.size_bytes for c in by_group[g.comm] if c.op != "allgather")
            assert reduced == pytest.approx(plan.grad_bytes(s), rel=1e-9)
            if par.sharded_optimizer:
                assert ops == {"reduce_scatter": buckets, "allgather": 1}
                (ag,) = [c for c in by_group[g.comm] if c.op == "allgather"]
                assert ag.size_bytes == pytest.approx(plan.param_bytes(s), rel=1e-12)
                last_rs = max(c.end_s for c in by_group[g.comm] if c.op == "reduce_scatter")
                assert ag.start_s >= last_rs - 1e-12
            else:
                assert ops == {"allreduce": buckets}
            # buckets of one stage share a stream: each starts after the previous has finished
            seq = sorted((c for c in by_group[g.comm] if c.op != "allgather"), key=lambda c: c.start_s)
            for a, b in zip(seq, seq[1:]):
                assert b.start_s >= a.end_s - 1e-12


# ---------------------------------------------------------------------------- 3. placement

NICS = ["ib-hdr-200", "roce-200", "eth-tcp-25"]


def two_clusters(draw, shapes: list[tuple[int, int]]):
    """A two-cluster fabric of the given (hosts, GPUs per host), random NIC profiles and numbering."""
    nics = [draw(st.sampled_from(NICS)) for _ in shapes]
    numbering = draw(st.sampled_from(["blocked", "interleaved"]))
    clusters = [dict(name=f"c{i}", leaves=1, spines=1, hosts_per_leaf=h, gpus_per_host=g, nics_per_host=1,
                     nic=nic_profile(nic), uplink_bandwidth_Bps=100e9, intra_bandwidth_Bps=300e9)
                for i, ((h, g), nic) in enumerate(zip(shapes, nics))]
    return multi_cluster(clusters, interconnect_Bps=12.5e9, numbering=numbering), numbering


def family(topology, gpu: int) -> str:
    return topology.nic_profile[int(topology.gpu_nic[gpu])].family


def expected_family_order(topology) -> list[str]:
    """NIC families by RDMA NIC bandwidth per GPU (a host's NICs shared by its GPUs), then first GPU id."""
    share, first = defaultdict(list), {}
    for g in range(topology.n_gpus):
        host = int(topology.gpu_host[g])
        mates = [h for h in range(topology.n_gpus) if int(topology.gpu_host[h]) == host]
        nics = {int(topology.gpu_nic[h]) for h in mates}
        bw = sum(topology.nic_profile[n].port_capacity_Bps * topology.nic_profile[n].ports for n in nics)
        share[family(topology, g)].append(bw / len(mates))
        first.setdefault(family(topology, g), g)
    return sorted(share, key=lambda f: (-sum(share[f]) / len(share[f]), first[f]))


@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_every_policy_places_distinct_free_gpus_and_holmes_groups_families(data):
    shapes = [(data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))) for _ in range(2)]
    topo, _ = two_clusters(data.draw, shapes)
    n = topo.n_gpus
    free_set = data.draw(st.sets(st.integers(0, n - 1), min_size=1)) if data.draw(st.booleans()) else None
    free = None if free_set is None else np.array(sorted(free_set))
    n_ranks = data.draw(st.integers(1, n if free is None else len(free)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    pool = set(range(n)) if free is None else free_set
    policies = [("sequential", None), ("random", None), ("random", {"by": "host"}), ("holmes", None)]
    for name, options in policies:
        gpus = make_placement(name, options).place(n_ranks, topo, rng, free)
        got = [int(g) for g in gpus]
        assert len(got) == n_ranks and len(set(got)) == n_ranks, (name, options, got)
        assert set(got) <= pool, (name, options, got)
        if name == "holmes":
            fams = [family(topo, g) for g in got]
            # NIC families form contiguous blocks, in the policy's family order, GPU ids ascending in each
            blocks = [f for i, f in enumerate(fams) if i == 0 or fams[i - 1] != f]
            assert len(blocks) == len(set(blocks)), fams
            order = nic_family_order(topo)
            assert order == expected_family_order(topo)
            assert blocks == sorted(blocks, key=order.index)
            for f in blocks:
                ids = [g for g, fg in zip(got, fams) if fg == f]
                assert ids == sorted(ids)
            # and they are the best-ranked free GPUs: no skipped GPU of an earlier (or the same) family
            rank = {f: i for i, f in enumerate(order)}
            key = lambda g: (rank[family(topo, g)], g)  # noqa: E731
            assert got == sorted(pool, key=key)[:n_ranks]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_holmes_keeps_tp_and_dp_groups_on_one_nic_family_when_clusters_hold_whole_stages(data):
    # Build the fabric from the job: stage = tp x dp GPUs, each cluster holds k_c >= 1 whole stages
    tp = data.draw(st.sampled_from([1, 2, 3, 4]))
    dp = data.draw(st.sampled_from([v for v in [1, 2, 3, 4] if tp * v <= 8]))
    stage = tp * dp
    shapes = []
    for _ in range(2):
        k = data.draw(st.sampled_from([v for v in [1, 2, 3] if v * stage <= 16]))
        total = k * stage
        gph = data.draw(st.sampled_from([g for g in _divisors(total) if g <= 4 and total // g <= 4]))
        shapes.append((total // gph, gph))
    topo, numbering = two_clusters(data.draw, shapes)
    pp = topo.n_gpus // stage
    spec = TrainingWorkload.model_validate({
        "type": "training", "gpu": SLOW_GPU, "parallelism": {"tp": tp, "pp": pp, "dp": dp},
        "model": {"layers": pp + data.draw(st.integers(0, 2)), "hidden": 64, "heads": 4, "seq_len": 32,
                  "vocab": 256, "global_batch": dp * data.draw(st.integers(1, 3))}})
    gpus = make_placement("holmes").place(spec.ranks, topo, np.random.default_rng(0))
    plan = plan_training(spec, gpus.tolist(), topo)
    assert sorted(plan.gpus) == list(range(topo.n_gpus))
    for comm in plan.comms:
        assert comm.families == tuple(topo.nic_families(comm.gpus))
        assert comm.tcp == topo.mixes_fabrics(comm.gpus)
        if comm.kind in ("tp", "dp"):
            assert len(comm.families) == 1 and not comm.tcp, (numbering, shapes, comm)
    # every pipeline stage sits on one family
    for s in range(pp):
        assert len(topo.nic_families(plan.gpus[s * stage:(s + 1) * stage])) == 1


# ---------------------------------------------------------------------------- 4. determinism


@settings(max_examples=15, **SETTINGS)
@given(training_cases(max_iterations=2), st.integers(0, 2**16))
def test_same_seed_same_iterations_other_seed_still_valid(data, other_seed):
    a = run_experiment(parse_spec(data))
    b = run_experiment(parse_spec(data))
    assert a.iterations == b.iterations
    assert a.gpus.tolist() == b.gpus.tolist()
    assert [(c.op, c.comm, c.size_bytes, c.start_s, c.end_s) for c in a.collectives] == \
        [(c.op, c.comm, c.size_bytes, c.start_s, c.end_s) for c in b.collectives]
    assert dict(a.fabric.bytes_delivered) == dict(b.fabric.bytes_delivered)
    c = run_experiment(parse_spec({**data, "seed": other_seed, "placement": {"type": "random"}}))
    plan = c.jobs[0].plan
    assert sorted(plan.gpus) == sorted(set(plan.gpus)) and len(plan.gpus) == plan.par.world
    assert len(c.iterations) == data["workload"]["iterations"]
    for it in c.iterations:
        assert_valid_iteration(it, plan)


# ---------------------------------------------------------------------------- 5. partition search


def hetero_spec(*, tp: int, dp: int, pp: int, first: int, gph: int, nics: list[str], leaves: int, layers: int,
                hidden: int, vocab: int, micro: int, partition: str, numbering: str, routing: str, seed: int,
                overlap: bool = False) -> dict:
    """Two clusters holding ``first`` and ``pp - first`` whole stages of ``tp x dp`` GPUs (holmes)."""
    stage = tp * dp
    clusters = []
    for i, (nic, stages) in enumerate(zip(nics, [first, pp - first])):
        hosts = stages * stage // gph
        spread = leaves if hosts % leaves == 0 else 1
        clusters.append({"name": f"c{i}", "leaves": spread, "spines": leaves,
                         "hosts_per_leaf": hosts // spread, "gpus_per_host": gph, "nics_per_host": 1,
                         "nic": nic, "uplink": {"bandwidth": "100Gbps"},
                         "intra_host": {"bandwidth": "300GB/s"}})
    return {"name": "search", "seed": seed, "placement": "holmes", "routing": routing, "engine": FAST,
            "topology": {"type": "multi_cluster", "clusters": clusters, "numbering": numbering,
                         "ethernet": {"bandwidth": "25Gbps", "latency": "2us"}},
            "workload": {"type": "training", "gpu": "a100", "partition": partition,
                         "model": {"layers": layers, "hidden": hidden, "heads": 8, "seq_len": 256,
                                   "vocab": vocab, "global_batch": dp * micro},
                         "parallelism": {"tp": tp, "pp": pp, "dp": dp, "overlap_dp": overlap}}}


@st.composite
def hetero_cases(draw, *, leaves: int = 1, routings: tuple[str, ...] = ("ecmp", "spray", "c4p")) -> dict:
    """pp = 2 (sometimes 3) over an InfiniBand and a RoCE cluster that hold whole stages; the model's
    costly logit layer (large vocab) and the clusters' unequal links make the even split lopsided."""
    tp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([1, 2]))
    pp = draw(st.sampled_from([2, 2, 3]))
    return hetero_spec(tp=tp, dp=dp, pp=pp, first=draw(st.integers(1, pp - 1)),
                       gph=draw(st.sampled_from(_divisors(tp * dp))),
                       nics=draw(st.permutations(["ib-hdr-200", "roce-200"])), leaves=leaves,
                       layers=draw(st.integers(pp, 8)), hidden=draw(st.sampled_from([256, 512, 1024])),
                       vocab=draw(st.sampled_from([1024, 32768])), micro=draw(st.integers(1, 4)),
                       partition=draw(st.sampled_from(["auto", "search", "proportional"])),
                       numbering=draw(st.sampled_from(["blocked", "interleaved"])),
                       routing=draw(st.sampled_from(routings)), seed=draw(st.integers(0, 2**16)),
                       overlap=draw(st.booleans()))


def even_split(layers: int, pp: int) -> tuple[int, ...]:
    return tuple(layers // pp + (1 if s < layers % pp else 0) for s in range(pp))


@settings(max_examples=25, **SETTINGS)
@given(hetero_cases())
def test_partition_search_picks_the_fastest_trial_and_never_loses_to_the_even_split(data):
    # one leaf and one spine per cluster: routing has no choice, so the probes see the run's paths
    r = run_experiment(parse_spec(data))
    plan = r.jobs[0].plan
    layers, pp = plan.model.layers, plan.par.pp
    trials = {tuple(p): t for p, t in plan.partition_trials}
    even = even_split(layers, pp)
    assert even in trials
    for p in trials:
        assert len(p) == pp and sum(p) == layers and min(p) >= 1
    chosen = tuple(plan.partition)
    assert chosen in trials
    assert trials[chosen] == pytest.approx(min(trials.values()), rel=1e-9)
    assert trials[chosen] <= trials[even] * (1 + 1e-12)
    (it,) = r.iterations
    assert it.duration_s == pytest.approx(trials[chosen], rel=1e-9)
    assert it.duration_s <= trials[even] * (1 + 1e-9)
    assert_valid_iteration(it, plan)
    # holmes: each stage on one cluster, only the pipeline crosses
    assert all(len(c.families) == 1 and not c.tcp for c in plan.comms if c.kind in ("tp", "dp"))


ECMP_SEARCH_REPRO = hetero_spec(tp=2, dp=2, pp=2, first=1, gph=1, nics=["roce-200", "ib-hdr-200"], leaves=2,
                                layers=3, hidden=256, vocab=1024, micro=1, partition="search",
                                numbering="blocked", routing="ecmp", seed=1)


@settings(max_examples=10, **SETTINGS)
@example(ECMP_SEARCH_REPRO)
@given(hetero_cases(leaves=2, routings=("ecmp",)))
def test_partition_search_under_ecmp_with_path_choice_optimises_the_run_it_configures(data):
    r = run_experiment(parse_spec(data))
    plan = r.jobs[0].plan
    trials = {tuple(p): t for p, t in plan.partition_trials}
    (it,) = r.iterations
    assert it.duration_s == pytest.approx(trials[tuple(plan.partition)], rel=1e-9), (plan.partition, trials)
    even = run_experiment(parse_spec({**data, "workload": {**data["workload"], "partition": "even"}}))
    assert it.duration_s <= even.iterations[0].duration_s * (1 + 1e-9)


# ---------------------------------------------------------------------------- jobs sharing a fabric


@settings(max_examples=20, **SETTINGS)
@given(st.data())
def test_concurrent_training_jobs_each_keep_valid_iterations_and_their_own_bytes(data):
    cases = [data.draw(training_cases(max_iterations=2)) for _ in range(2)]
    worlds = [c["workload"]["parallelism"]["tp"] * c["workload"]["parallelism"]["pp"]
              * c["workload"]["parallelism"]["dp"] for c in cases]
    gph = data.draw(st.sampled_from([1, 2, 4]))
    hosts = -(-sum(worlds) // gph)
    topology = {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": -(-hosts // 2),
                "gpus_per_host": gph, "nics_per_host": 1, "nic": {"bandwidth": "100Gbps", "latency": "1us"},
                "uplink": {"bandwidth": "50Gbps"}, "intra_host": {"bandwidth": "200GB/s"}}
    jobs = [{"name": f"j{i}", "workload": c["workload"], "placement": c["placement"],
             "start": data.draw(st.sampled_from([0, "1us", "1ms"])),
             "iterations": data.draw(st.integers(1, 2))}
            for i, c in enumerate(cases)]
    spec = {"name": "mix", "seed": cases[0]["seed"], "topology": topology, "routing": cases[0]["routing"],
            "engine": FAST, "jobs": jobs}
    r = run_experiment(parse_spec(spec))
    used = [g for j in r.jobs for g in j.gpus.tolist()]
    assert len(used) == len(set(used)) == sum(worlds)
    for i, job in enumerate(r.jobs):
        plan = job.plan
        n_it = jobs[i]["iterations"] * jobs[i]["workload"]["iterations"]
        its = [it for it in r.iterations if it.job == i]
        assert [it.iteration for it in its] == list(range(n_it))
        assert its[0].start_s >= job.start_s - 1e-15 and its[-1].end_s == pytest.approx(job.ended_s)
        for it in its:
            assert_valid_iteration(it, plan)
        pp_comms = {c.comm for c in plan.comms if c.kind == "pp"}
        got = math.fsum(v for conn, v in r.fabric.bytes_delivered.items()
                        if conn.job == i and conn.comm in pp_comms)
        par = plan.par
        expected = 2 * plan.micro_batches * (par.pp - 1) * par.dp * par.tp * plan.pp_bytes() * n_it
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-6)
        calls = [c for c in r.collectives if c.job == i]
        assert {c.iteration for c in calls} <= set(range(n_it))
        assert len([c for c in calls if c.label == "dp"]) == (0 if par.dp == 1 else n_it * par.pp * par.tp * (
            plan.spec.dp_buckets + (1 if par.sharded_optimizer else 0)))

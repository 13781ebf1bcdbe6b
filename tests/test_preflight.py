"""Pre-flight estimate: its counts are the closed forms of what a run builds, its memory bounds the
measured peak, and check() refuses a huge fabric at once, without allocating it."""

import importlib.util
import math
import re
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from netsim.collectives import ALGORITHM_OPS
from netsim.config import load_experiment, load_topology, parse_spec
from netsim.errors import NetsimError
from netsim.experiment import run_experiment
from netsim.fabrics import fabric_shape
from netsim.experiment.preflight import DEFAULT_MAX_MEMORY_BYTES, check, estimate
from netsim.fabrics import build_topology
from netsim.experiment.sweep import expand
from netsim.topology.topology import SWITCH_KINDS
from netsim.units import parse_size

ROOT = Path(__file__).resolve().parent.parent
GiB = 2**30
FAST = {"ideal": False, "congestion": False, "link_series": 0}


def spec_dict(topology=None, workload=None, **top) -> dict:
    """16 GPUs (4 hosts x 4 GPUs x 2 NICs, 2 x 2 leaf-spine), a 1 MiB ring allreduce, sequential ranks."""
    return {"name": "pf", "seed": 1,
            "topology": topology or {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                                     "gpus_per_host": 4, "nics_per_host": 2, "nic": {"bandwidth": "100Gbps"},
                                     "uplink": {"bandwidth": "100Gbps"}, "intra_host": {"bandwidth": "900GB/s"}},
            "placement": "sequential", "routing": "ecmp", "engine": FAST,
            "workload": workload or {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"},
            **top}


def topology_file(name: str, **changes) -> dict:
    return {**load_topology(ROOT / "topologies" / name).model_dump(mode="json"), **changes}


LEAF_SPINE = spec_dict()["topology"]
TOPOLOGIES = {
    "leaf_spine": LEAF_SPINE,
    "parallel-uplinks": {**LEAF_SPINE, "spines": 3, "uplink": {"bandwidth": "100Gbps", "count": 3}},
    "rail-optimized": {**LEAF_SPINE, "rail_optimized": True},
    "dual-tor": topology_file("leaf-spine-dual-tor.yaml"),
    "host-nics": {**LEAF_SPINE, "nic": "roce-200", "host_nics": [{"hosts": [1, 2], "nic": "roce-2x200-bonded"},
                                                                 {"hosts": [2, 2], "nic": "roce-400"}]},
    "multi-cluster": topology_file("holmes-ib-roce.yaml"),
    "multi-cluster-interleaved": topology_file("holmes-ib-roce.yaml", numbering="interleaved"),
    "dragonfly-h": {"type": "dragonfly", "groups": 5, "switches_per_group": 4, "hosts_per_switch": 2,
                    "global_links_per_switch": 2, "link": {"bandwidth": "100Gbps"}},
    "dragonfly-cables": {"type": "dragonfly", "groups": 3, "switches_per_group": 3, "hosts_per_switch": 2,
                         "global_links_between_groups": 2, "link": {"bandwidth": "100Gbps"}},
    "frontier": {"type": "frontier", "groups": 2},
    "frontier-one-switch": {"type": "frontier", "groups": 3, "nics_on_switches": 1},
}


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_fabric_counts_are_those_of_the_built_topology(name):
    spec = parse_spec(spec_dict(TOPOLOGIES[name], routing="minimal" if "frontier" in name or "dragon" in name
                                else "ecmp"))
    topo = build_topology(spec.topology)
    est, shape = estimate(spec), fabric_shape(spec.topology)
    switches = sum(1 for _, kind in topo.graph.nodes(data="kind") if kind in SWITCH_KINDS)
    assert (est.hosts, est.gpus, est.links, est.switches) == (topo.n_hosts, topo.n_gpus, len(topo.links), switches)
    assert shape.nodes == topo.graph.number_of_nodes()
    assert shape.gpus_per_host == max(m.n_gpus for m, *_ in topo.hosts)


def _run(d: dict):
    spec = parse_spec(d)
    return estimate(spec), run_experiment(spec)


def _same_counts(est, result, exact_connections=True):
    fabric = result.fabric
    assert est.messages == fabric.stats["flows"]
    assert est.calls == len(result.collectives)
    assert est.flow_records == len(fabric.flow_records)
    if exact_connections:
        assert est.connections == len(fabric.queue_pairs)
    else:  # calls of different algorithms on one communicator may share a connection
        assert est.connections >= len(fabric.queue_pairs)


CALLS = [(op, alg) for alg, ops in sorted(ALGORITHM_OPS.items()) for op in ops]


@pytest.mark.parametrize("op, algorithm", CALLS, ids=[f"{op}-{alg}" for op, alg in CALLS])
@pytest.mark.parametrize("ranks, channels, chunk", [(16, 1, None), (8, 3, "128KiB")])
def test_messages_and_connections_are_what_the_engine_creates(op, algorithm, ranks, channels, chunk):
    workload = {"type": "collective", "op": op, "algorithm": algorithm, "size": "1MiB", "ranks": ranks,
                "channels": channels, "iterations": 2, **({"chunk": chunk} if chunk else {})}
    _same_counts(*_run(spec_dict(workload=workload)))


def test_nested_sequence_with_sub_communicators_and_iterations():
    steps = [{"type": "sequence", "mode": "concurrent", "steps": [
        {"op": "allreduce", "algorithm": "ring", "size": "1MiB", "ranks": "0::4", "iterations": 3},
        {"op": "allreduce", "algorithm": "tree", "size": "1MiB", "ranks": "1::4", "channels": 2},
        {"op": "alltoall", "algorithm": "direct", "size": "1MiB", "ranks": [0, 5, 7]},
        {"type": "sequence", "ranks": 8, "steps": [{"op": "allgather", "algorithm": "ring", "size": "1MiB",
                                                    "ranks": "::2"}]}]},
        {"op": "allreduce", "algorithm": "ring", "size": "16MiB", "channels": 4, "chunk": "1MiB"},
        {"op": "allreduce", "algorithm": "ring", "size": "1MiB", "channels": 4}]
    _same_counts(*_run(spec_dict(workload={"type": "sequence", "iterations": 2, "steps": steps})))


TRAINING = {"type": "training", "model": {"layers": 6, "hidden": 256, "heads": 8, "seq_len": 128, "vocab": 1000,
                                          "micro_batch": 1, "global_batch": 8},
            "parallelism": {"tp": 2, "pp": 2, "dp": 4}, "iterations": 2}


@pytest.mark.parametrize("changes", [
    {},
    {"tp_granularity": "layer"},
    {"dp_buckets": 3, "parallelism": {"tp": 2, "pp": 2, "dp": 4, "overlap_dp": True}},
    {"parallelism": {"tp": 4, "pp": 2, "dp": 2, "sharded_optimizer": True},
     "tp_comm": {"algorithm": "tree", "channels": 2}},
    {"parallelism": {"tp": 2, "pp": 1, "dp": 8}, "dp_comm": {"algorithm": "halving_doubling", "channels": 2}},
    {"parallelism": {"tp": 1, "pp": 4, "dp": 4}, "partition": [1, 2, 2, 1], "dp_comm": {"algorithm": "tree"}},
    {"parallelism": {"tp": 2, "pp": 2, "dp": 4}, "moe": {"experts": 8, "top_k": 2, "ep": 4, "expert_hidden": 64,
                                                         "routing": {"type": "uniform", "sample": False}}},
    {"parallelism": {"tp": 1, "pp": 2, "dp": 8}, "moe": {"experts": 8, "top_k": 2, "ep": 4, "expert_hidden": 64,
                                                         "dense_layers": 1, "algorithm": "pairwise",
                                                         "routing": {"type": "uniform", "sample": False}}},
], ids=["plain", "per-layer-tp", "overlap-buckets", "sharded-tree-tp", "dp-only", "explicit-partition", "moe",
        "moe-expert-dp"])
def test_training_counts(changes):
    _same_counts(*_run(spec_dict(workload={**TRAINING, **changes})))


def test_a_searched_partition_gives_an_upper_bound():
    # the layer split is searched during the run: tree calls are counted with one chunk to spare
    est, result = _run(spec_dict(workload={**TRAINING, "parallelism": {"tp": 1, "pp": 4, "dp": 4},
                                           "partition": "search", "dp_comm": {"algorithm": "tree"}}))
    assert result.fabric.stats["flows"] <= est.messages <= 1.5 * result.fabric.stats["flows"]
    assert est.connections == len(result.fabric.queue_pairs)


def test_jobs_with_their_own_placement_and_iterations():
    d = spec_dict()
    del d["workload"]
    d["jobs"] = [{"name": "a", "iterations": 2, "workload": {"type": "collective", "op": "allreduce",
                                                            "algorithm": "ring", "size": "1MiB", "ranks": 8}},
                 {"name": "b", "start": "1us", "placement": {"type": "random"},
                  "workload": {"type": "collective", "op": "alltoall", "algorithm": "pairwise", "size": "1MiB",
                               "ranks": 4}},
                 {"name": "c", "workload": {**TRAINING, "parallelism": {"tp": 2, "pp": 1, "dp": 2}}}]
    _same_counts(*_run(d))


def _experiment_runs():
    for path in sorted((ROOT / "experiments").glob("*.yaml")):
        for run in expand(load_experiment(path)):
            yield f"{path.stem}:{run.variant or 'base'}", run.spec


def test_every_shipped_experiment_passes_the_default_limit_in_milliseconds():
    for name, spec in _experiment_runs():
        t0 = time.perf_counter()
        est = check(spec)
        # a cluster run reads and validates its trace first (tenths of a second)
        assert time.perf_counter() - t0 < (2.0 if spec.cluster is not None else 0.05), name
        assert est.memory_bytes < 4 * GiB, name
        assert spec.cluster is None or est.messages > 0, name  # a trace's jobs are counted too


@pytest.mark.parametrize("name", ["link-failure.yaml", "ring-vs-tree.yaml", "holmes-hetero.yaml",
                                  "rails-concurrent.yaml", "routes-table.yaml"])
def test_shipped_experiments_count_what_they_run(name):
    spec = expand(load_experiment(ROOT / "experiments" / name))[0].spec
    spec = spec.model_copy(update={"engine": spec.engine.model_copy(update=FAST)})
    est, result = estimate(spec), run_experiment(spec)
    _same_counts(est, result, exact_connections=name != "ring-vs-tree.yaml")  # its ring and tree share some


# tests/test_cli.py's small_spec grown to a million single-GPU hosts (what the config still accepts):
# its ring allreduce over every GPU would need petabytes.
MILLION_HOSTS = spec_dict({**LEAF_SPINE, "leaves": 1000, "spines": 16, "hosts_per_leaf": 1000, "gpus_per_host": 1,
                           "nics_per_host": 1}, workload={"type": "collective", "op": "allreduce",
                                                          "algorithm": "ring", "size": "4MiB"})


def _rss_bytes() -> int:
    """This process's resident memory now (Linux), 0 where /proc is missing."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * 4096
    except OSError:
        return 0


def test_a_million_host_fabric_is_refused_at_once_without_allocating_it():
    spec = parse_spec(MILLION_HOSTS)
    rss = _rss_bytes()
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(NetsimError) as info:
        check(spec)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 1.0
    assert peak < 50 * 2**20 and _rss_bytes() - rss < 50 * 2**20
    message = str(info.value)
    assert "\n" not in message and len(message) < 300
    assert "1,000,000 hosts" in message and "above the 16 GiB limit" in message
    assert "--max-memory" in message and "or make the run smaller" in message


def test_the_limit_is_a_parameter_and_the_suggested_option_suffices():
    spec = parse_spec(MILLION_HOSTS)
    est = estimate(spec)
    assert est.hosts == 10**6 and est.memory_bytes > DEFAULT_MAX_MEMORY_BYTES
    with pytest.raises(NetsimError) as info:
        check(spec, 4 * GiB)
    assert "above the 4.0 GiB limit" in str(info.value)
    suggested = str(info.value).split("--max-memory ")[1].split()[0]
    assert check(spec, parse_size(suggested)) == est
    assert check(parse_spec(spec_dict()), None).gpus == 16


def test_describe_is_one_short_line():
    line = estimate(parse_spec(spec_dict())).describe()
    # the NCCL model's 4 channels (2 per NIC, 2 NICs a host): 4 x 16 connections, 4 x 2 x 15 x 16 messages
    assert line.startswith("4 hosts, 16 GPUs, 56 links, 64 connections, 1,920 messages: about ")
    assert line.split(" and ")[0].endswith("MiB") and line.endswith(" s") and "\n" not in line
    big = estimate(parse_spec(MILLION_HOSTS)).describe()
    assert "1,000,000 hosts" in big and re.search(r"about [\d.,]+ [TP]iB and [\d,]+ days$", big), big


SELECTORS = st.one_of(st.none(), st.integers(1, 20),
                      st.sampled_from(["0::2", "1::4", "::3", "2:9", "-6:", "::-2", "::0"]),
                      st.lists(st.integers(0, 17), min_size=1, max_size=5, unique=True))


@st.composite
def collective_steps(draw, depth=0):
    """A collective step or (up to two levels of) nested sequence with sub-communicator selectors."""
    if depth < 2 and draw(st.booleans()):
        return {"type": "sequence", "mode": draw(st.sampled_from(["serial", "concurrent"])),
                "ranks": draw(SELECTORS), "iterations": draw(st.integers(1, 3)),
                "steps": draw(st.lists(collective_steps(depth + 1), min_size=1, max_size=3))}
    op, algorithm = draw(st.sampled_from(CALLS))
    return {"op": op, "algorithm": algorithm, "size": draw(st.sampled_from(["4KiB", "1MiB", "3MiB"])),
            "channels": draw(st.integers(1, 3)), "ranks": draw(SELECTORS), "iterations": draw(st.integers(1, 2)),
            **({"chunk": draw(st.sampled_from(["256KiB", "1MiB"]))} if draw(st.booleans()) else {})}


@st.composite
def small_specs(draw):
    """Valid specs on small fabrics of every type, with any workload, placement and routing."""
    kind = draw(st.sampled_from(sorted(TOPOLOGIES)))
    topology = TOPOLOGIES[kind]
    dragonfly = "frontier" in kind or "dragon" in kind
    routing = draw(st.sampled_from(["minimal", "ugal", "adaptive", "spray"] if dragonfly else
                                   ["ecmp", "spray", "c4p", "ethereal", "min-split", {"type": "split", "ways": 3}]))
    placement = draw(st.sampled_from(["sequential", "random", {"type": "random", "by": "host"}]))
    if draw(st.integers(0, 3)) == 0:
        tp, pp, dp = draw(st.sampled_from([(2, 2, 2), (1, 2, 4), (4, 1, 2), (2, 3, 1)]))
        workload = {**TRAINING, "parallelism": {"tp": tp, "pp": pp, "dp": dp,
                                                "overlap_dp": draw(st.booleans())},
                    "tp_granularity": draw(st.sampled_from(["stage", "layer"])), "dp_buckets": draw(st.integers(1, 3)),
                    "model": {**TRAINING["model"], "global_batch": 8 * dp}}
    else:
        workload = {"type": "sequence", "ranks": 16, "steps": draw(st.lists(collective_steps(), min_size=1,
                                                                            max_size=3))}
    return spec_dict(topology, workload, routing=routing, placement=placement,
                     engine={**FAST, "record_flows": draw(st.booleans())})


def _valid(d: dict):
    try:
        return parse_spec(d)
    except NetsimError:
        assume(False)  # e.g. a selector of one rank: refused by the config


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_specs())
def test_the_estimate_never_fails_on_a_valid_spec(d):
    est = estimate(_valid(d))
    assert 0 < est.memory_bytes < 64 * GiB and math.isfinite(est.memory_bytes)
    assert min(est.messages, est.connections, est.calls, est.paths, est.in_flight) >= 0


def _counts_what_it_runs(d) -> None:
    spec = _valid(d)
    est = estimate(spec)
    try:
        result = run_experiment(spec)
    except NetsimError:
        event("refused when planned or run")  # a selector or an algorithm the placed ranks do not suit
        return
    event("ran")
    flows = result.fabric.stats["flows"]
    # exact unless a searched partition or a hierarchical layout left an upper bound
    assert flows <= est.messages
    assert est.connections >= len(result.fabric.queue_pairs)
    assert est.calls == len(result.collectives)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_specs())
def test_random_specs_count_what_they_run(d):
    _counts_what_it_runs(d)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_specs())
def test_more_random_specs_count_what_they_run(d):
    _counts_what_it_runs(d)


def _calibration():
    spec = importlib.util.spec_from_file_location("bench_preflight", ROOT / "benchmarks" / "preflight.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _within_target(row: dict) -> bool:
    """Within 2x of the measured peak, both ways (issue 38): no run that fits is refused at the default
    limit, and a run that would exhaust the machine is."""
    return 0.5 <= row["ratio"] <= 2


def test_the_estimate_bounds_a_measured_peak():
    # a sprayed all-to-all on 128 GPUs: every GPU pair's 16 paths cached, 16,256 messages at once (~15 s)
    row = _calibration().measure("alltoall-128-spray", timeout=120)
    assert row["messages"] == row["est_messages"] and row["connections"] == row["est_connections"]
    assert row["peak_bytes"] > 500e6 and _within_target(row), row


@pytest.mark.slow
@pytest.mark.parametrize("case", list(_calibration().CASES))
def test_the_estimate_bounds_every_calibration_case(case):
    # the scenarios of benchmarks/scenarios/ among them: minutes and up to 9 GiB each
    row = _calibration().measure(case, timeout=1800, kill_above_bytes=16 * GiB)
    assert "stopped" not in row and _within_target(row), row


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(30))
def test_the_estimate_is_within_2x_on_random_specs(seed):
    # benchmarks/preflight.py's seeded random specs (16-1,024 GPUs, every fabric family, placement,
    # routing and workload kind): 5-80 s each
    calibration = _calibration()
    name = f"random-{seed}"
    if estimate(calibration.load(name)).memory_bytes > 4 * GiB:
        pytest.skip("estimated above 4 GiB: too large for the test machine")
    try:
        row = calibration.measure(name, timeout=600, kill_above_bytes=8 * GiB)
    except RuntimeError as exc:  # an algorithm the drawn ranks do not suit
        pytest.skip(str(exc).strip().splitlines()[-1][:200])
    assert "stopped" not in row and _within_target(row), row

"""NCCL's protocols and its choice of algorithm and protocol by size (issue 40, part 2).

* the engine's per-message overhead scale: a closed form, both executors and the ideal replay
  held equal on random schedules, schedule files that keep it and refuse bad values;
* the tuning model: NCCL's tables as published (``src/graph/tuning.cc`` at 01afd20), ``choose``
  is the model's argmin, and the protocol's crossovers fall where the model puts them;
* the workload: ``algorithm: auto`` and ``protocol:`` in YAML, what the results say was chosen,
  closed forms of a protocol's wire bytes, base latency and step cost, and the fluid model untouched.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.collectives import build_collective
from netsim.collectives.nccl import FLUID, NCCL, bus_bandwidth_GBps
from netsim.collectives.nccl_tuning import (
    BASE_LAT_US,
    HW_LAT_US,
    PROTOCOL,
    PROTOCOLS,
    call_protocol,
    choose,
    model_time_s,
)
from netsim.config import parse_spec
from netsim.engine import Environment, Fabric
from netsim.engine.ideal import IdealFabric
from netsim.engine.model import SEND, ScheduleBuilder
from netsim.engine.reference import run_schedule
from netsim.engine.schedule_io import read_schedule, write_schedule
from netsim.errors import ConfigError
from netsim.experiment import run_experiment
from netsim.experiment.results import collectives_frame
from netsim.experiment.run import build_topology
from netsim.routing import make_routing
from netsim.solver import COMPILED
from tests.conftest import GB, make_leaf_spine
from tests.test_executors import assert_same, schedules

OVERHEAD = 2e-6


def _topo(**kw):
    args = dict(nic_latency_s=1e-6, nic_overhead_s=OVERHEAD, intra_overhead_s=OVERHEAD / 2, gpus_per_host=2,
                nics_per_host=2)
    args.update(kw)
    return make_leaf_spine(**args)


def _run(topo, schedule, backend="reference", policy="ecmp", seed=0):
    env = Environment()
    fab = Fabric(env, topo, make_routing(policy, topo, np.random.default_rng(seed)), backend=backend,
                 track_congestion=True, record_flows=True, link_series_bins=4)
    handle = fab.submit(schedule)
    env.run(handle.done)
    fab.finalize()
    return env, fab, np.asarray(handle.times)


# ------------------------------------------------------------------------------------ the engine
@pytest.mark.parametrize("backend", ["reference", "compiled"] if COMPILED else ["reference"])
@pytest.mark.parametrize("scale", [0.25, 1.0, 3.0])
def test_a_message_pays_its_scale_of_the_overhead(backend, scale):
    """One message between hosts: size / rate + latency + scale x overhead, to 1e-12."""
    topo = _topo()
    b = ScheduleBuilder()
    send = b.send(b.connect(0, 2), 1e6)
    b.scale_overheads(send, scale)
    env, fab, times = _run(topo, b.build(), backend)
    latency = topo.path_latency_s(topo.paths(0, 2)[0])
    assert times[0] == pytest.approx(1e6 / GB + latency + scale * OVERHEAD, rel=1e-12)


def test_the_ideal_fabric_and_its_replay_pay_the_same_scale():
    topo = _topo()
    b = ScheduleBuilder()
    conn = b.connect([0, 1], [2, 0])
    first = b.send(conn, [1e6, 5e5])
    b.scale_overheads(first, [0.3, 2.0])
    b.send(conn[:1], 1e3, after=first[1:])
    schedule = b.build()
    env = Environment()
    from netsim.engine.ideal import PairModel, replay
    model = PairModel(topo)
    fab = IdealFabric(env, topo, model)
    run = run_schedule(env, fab, schedule)
    env.run(run.done)
    times, end, _ = replay(model, schedule)
    np.testing.assert_allclose(times, run.times, rtol=1e-12)
    assert end == pytest.approx(env.now, rel=1e-12)
    # the scaled message: 1 ms at 1 GB/s, its latency, 0.3 x the overhead
    assert run.times[0] == pytest.approx(1e-3 + topo.path_latency_s(topo.paths(0, 2)[0]) + 0.3 * OVERHEAD, rel=1e-12)


@pytest.mark.skipif(not COMPILED, reason="numba is not installed: only the reference executor exists")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), policy=st.sampled_from(["ecmp", "spray", "split", "c4p"]), seed=st.integers(0, 3))
def test_random_schedules_with_scaled_overheads_agree(data, policy, seed):
    """The compiled executor pays each message's scale exactly as the reference does."""
    topo = _topo()
    schedule = data.draw(schedules(topo.n_gpus))
    scale = np.where(schedule.kind == SEND, data.draw(st.lists(st.sampled_from([0.1, 0.5, 1.0, 2.5]),
                                                                min_size=len(schedule), max_size=len(schedule))), 1.0)
    from netsim.engine.model import Schedule
    scaled = Schedule(schedule.kind, schedule.conn, schedule.amount, schedule.dep_ptr, schedule.dep_idx,
                      schedule.connections, scale)
    assert_same(_run(topo, scaled, "reference", policy, seed), _run(topo, scaled, "compiled", policy, seed))


def test_a_scale_of_one_changes_nothing_bit_for_bit():
    topo = _topo()
    plain = build_collective("allreduce", "ring", range(8), 3e6, gpu_host=topo.gpu_host, chunk_bytes=4e5)
    b = ScheduleBuilder()
    from netsim.collectives.base import build_call
    build_call(b, "allreduce", "ring", range(8), 3e6, gpu_host=topo.gpu_host, chunk_bytes=4e5)
    sends, _ = b.sends_since(0)
    b.scale_overheads(sends, 1.0)
    ones = b.build()
    assert ones.overhead_scale is None
    assert np.array_equal(_run(topo, plain)[2], _run(topo, ones)[2])


def test_bad_scales_are_refused():
    b = ScheduleBuilder()
    s = b.send(b.connect(0, 1), 1.0)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="finite and > 0"):
            b.scale_overheads(s, bad)
    with pytest.raises(ValueError, match="does not exist"):
        b.scale_overheads([5], 2.0)


def test_a_schedule_file_keeps_its_scales(tmp_path):
    b = ScheduleBuilder()
    s = b.send(b.connect([0, 1], [1, 0]), [1e3, 2e3])
    b.join(after=[s.tolist()])
    b.scale_overheads(s, [0.5, 2.0])
    path = write_schedule(b.build(), tmp_path / "s.parquet")
    back = read_schedule(path)
    assert back.overhead_scale.tolist() == [0.5, 2.0, 1.0]
    plain = ScheduleBuilder()
    plain.send(plain.connect(0, 1), 1.0)
    assert read_schedule(write_schedule(plain.build(), tmp_path / "p.parquet")).overhead_scale is None


@pytest.mark.parametrize("rows, message", [
    ([1.0, 0.0], "row 2.*overhead_scale.*0.*above 0"),
    ([1.0, 5000.0], "row 2.*overhead_scale.*at most 1000"),
    ([2.0, 2.0], "row 2.*overhead_scale.*for a join.*1 or empty"),
])
def test_a_schedule_file_with_a_bad_scale_fails_with_its_row(tmp_path, rows, message):
    path = tmp_path / "bad.parquet"
    pd.DataFrame({"kind": ["send", "join" if "join" in message else "send"], "amount": [1.0, 0.0 if "join" in message
                                                                                          else 1.0],
                  "deps": [[], [0]], "src": [0, None if "join" in message else 1],
                  "dst": [1, None if "join" in message else 0], "overhead_scale": rows}).to_parquet(path)
    with pytest.raises(ConfigError, match=message):
        read_schedule(path)


# ------------------------------------------------------------------------------ the tuning model
def test_the_tables_are_nccls():
    """src/graph/tuning.cc at 01afd20 (the numbers docs/validation.md and docs/collectives.md quote)."""
    assert BASE_LAT_US == {"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4)}
    assert HW_LAT_US["net"]["ring"] == (2.7, 4.0, 9.6) and HW_LAT_US["nvlink"]["ring"] == (0.47, 1.9, 3.4)
    assert HW_LAT_US["net"]["tree"] == (5.0, 8.5, 50.0) and HW_LAT_US["nvlink"]["tree"] == (0.52, 1.2, 28.0)
    assert PROTOCOL["LL"].wire == 2.0 and PROTOCOL["LL128"].wire == pytest.approx(128 / 120)
    assert PROTOCOL["Simple"].step_bytes == 512 * 1024 and PROTOCOL["LL"].step_bytes == 32 * 1024
    assert PROTOCOL["LL128"].step_bytes == 576000


def test_a_model_time_by_hand():
    """Ring LL128 allreduce of 16 MiB over 32 ranks on 4 nodes, 16 channels of 25 GB/s:
    bus min(400 x 0.92, 16.7 x 16) = 267.2 GB/s, algbw x 32/62; latency 10 + 56 x 1.9 + 6 x 4.0 us."""
    bw = min(400 * 0.92, 16.7 * 16) * 32 / 62
    expected = (10 + 56 * 1.9 + 6 * 4.0 + 2**24 / (1000 * bw)) * 1e-6
    assert model_time_s("allreduce", "ring", "LL128", 2**24, 32, 4, 16, 25.0) == pytest.approx(expected, rel=1e-6)
    # the Simple ring's plateau: from nRanks/16 x 64 KiB on, its latency counts 1.9 times
    lat = (8.4 + 56 * 3.4 + 6 * 9.6) * 1e-6
    below, above = 32 / 16 * 65536 - 1, 32 / 16 * 65536
    bw = 400 * 32 / 62 * 1e3
    assert model_time_s("allreduce", "ring", "Simple", below, 32, 4, 16, 25.0) == pytest.approx(lat + below / bw / 1e6)
    assert model_time_s("allreduce", "ring", "Simple", above, 32, 4, 16, 25.0) == pytest.approx(
        1.9 * lat + above / bw / 1e6)


@settings(max_examples=200, deadline=None)
@given(op=st.sampled_from(["allreduce", "allgather", "reduce_scatter", "broadcast", "reduce"]),
       log_size=st.integers(3, 34), nodes=st.integers(1, 64), ppn=st.sampled_from([1, 2, 4, 8]),
       channels=st.sampled_from([1, 2, 8, 16, 32]), speed=st.sampled_from([5.0, 12.5, 25.0, 50.0]))
def test_choose_is_the_models_fastest_pair(op, log_size, nodes, ppn, channels, speed):
    ranks = nodes * ppn
    if ranks < 2:
        return
    size = float(2**log_size)
    c = choose(op, size, ranks, nodes, channels, speed)
    times = {(a, p): model_time_s(op, a, p, size, ranks, nodes, channels, speed)
             for a in ("tree", "ring") for p in PROTOCOLS}
    assert c.model_s == min(times.values()) == times[(c.algorithm, c.protocol)]
    assert c.algorithm == "ring" or op == "allreduce"


def test_protocols_cross_over_from_ll_to_simple_as_the_size_grows():
    """On 4 nodes of 8 GPUs at 400 GB/s: LL for small rings, LL128 for medium, Simple for large."""
    picks = [choose("allreduce", 2.0**k, 32, 4, 16, 25.0, algorithms=("ring",)).protocol for k in range(3, 33)]
    order = {"LL": 0, "LL128": 1, "Simple": 2}
    assert [order[p] for p in picks] == sorted(order[p] for p in picks)
    assert picks[0] == "LL" and picks[-1] == "Simple" and "LL128" in picks


def test_the_bus_bandwidth_is_the_hosts_nics_or_nvlink():
    topo = make_leaf_spine(gpus_per_host=4, nics_per_host=2, intra_bandwidth_Bps=300 * GB)
    assert bus_bandwidth_GBps(range(8), topo) == (2.0, True)          # two 1 GB/s NICs a host
    assert bus_bandwidth_GBps([0, 2, 4], topo) == (1.0, True)        # one NIC on host 0 (GPUs 0 and 2 share one)
    assert bus_bandwidth_GBps([0, 1], topo) == (300.0, True)         # one host: its NVLink


# ------------------------------------------------------------------------------------ workloads
def _spec(workload, model="nccl", **topo):
    t = dict(type="leaf_spine", leaves=2, spines=2, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=2,
             nic={"bandwidth": "8Gbps", "overhead": "0us"}, uplink={"bandwidth": "8Gbps"},
             intra_host={"bandwidth": "800Gbps", "overhead": "0us"})
    t.update(topo)
    return {"name": "proto", "model": model, "topology": t, "routing": {"type": "spray"}, "workload": workload}


def _calls(tmp_path, spec) -> pd.DataFrame:
    return collectives_frame(run_experiment(parse_spec(spec)))


def test_under_fluid_a_named_protocol_is_its_closed_form(tmp_path):
    """Fluid model, no overheads: a ring allreduce of M bytes over n ranks with LL takes LL's base latency
    plus 2(n-1) steps of 2M/n bytes at the NIC rate (LL's wire is twice the data)."""
    n, size = 4, 4e6
    w = {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": size, "protocol": "LL",
         "ranks": 4}
    calls = _calls(tmp_path, _spec(w, model="fluid", gpus_per_host=1, nics_per_host=1))
    expected = 3.6e-6 + 2 * (n - 1) * (2 * size / n) / 1e9
    assert calls["protocol"].tolist() == ["LL"]
    assert calls["duration_s"].iloc[0] == pytest.approx(expected, rel=1e-11)


def test_under_fluid_auto_adds_nothing(tmp_path):
    w = {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": 4e6, "ranks": 4}
    calls = _calls(tmp_path, _spec(w, model="fluid", gpus_per_host=1, nics_per_host=1))
    assert calls["protocol"].tolist() == [""]
    assert calls["duration_s"].iloc[0] == pytest.approx(2 * 3 * 1e6 / 1e9, rel=1e-11)


def test_the_step_cost_of_ll_is_its_share_of_the_nic_overhead(tmp_path):
    """Two hosts, one rank each, 8 bytes, LL: base 3.6 us, then 2 steps of 4 data bytes (8 on the
    wire), each paying 2.7/9.6 of the NIC's 9.6 us overhead (NCCL's hwLat[NET][Ring][LL])."""
    w = {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": 8, "protocol": "ll",
         "ranks": 2}
    spec = _spec(w, nic={"bandwidth": "8Gbps", "overhead": "9.6us", "efficiency": 1.0}, gpus_per_host=1,
                 nics_per_host=1)
    spec["packets"] = {"switching": "none"}   # (a cut-through switch would hold each message's header too)
    calls = _calls(tmp_path, spec)
    step = 8 / 1e9 + 2.7e-6   # 8 wire bytes a step (half of 16) at 1 GB/s, no latency in this fabric
    assert calls["duration_s"].iloc[0] == pytest.approx(3.6e-6 + 2 * step, rel=1e-9)


def test_auto_picks_by_size_and_the_results_say_what_ran(tmp_path):
    sizes = ["8B", "64KiB", "1MiB", "256MiB"]
    w = {"type": "sequence", "steps": [{"type": "collective", "op": "allreduce", "algorithm": "auto", "size": s}
                                       for s in sizes]}
    calls = _calls(tmp_path, _spec(w, nic={"bandwidth": "400Gbps"}, uplink={"bandwidth": "400Gbps"}))
    topo_bus = 2 * 400 / 8   # GB/s: two NICs a host
    for s, (_, row) in zip(sizes, calls.iterrows()):
        c = choose("allreduce", row["size_bytes"], 8, 4, 4, topo_bus / 4)
        assert (row["algorithm"], row["protocol"]) == (c.algorithm, c.protocol), s
    assert calls["protocol"].iloc[0] == "LL" and calls["protocol"].iloc[-1] == "Simple"
    assert (calls["busbw_Bps"] <= 2 * 400e9 / 8 * 1.0001).all()   # never above the hosts' NICs


def test_a_bad_protocol_is_one_clear_error():
    w = {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB", "protocol": "ll256"}
    with pytest.raises(ConfigError) as err:
        parse_spec(_spec(w))
    assert "workload.protocol" in str(err.value) and "ll128" in str(err.value)
    w = {"type": "collective", "op": "allreduce", "algorithm": "autoo", "size": "1MiB"}
    with pytest.raises(ConfigError, match=r"valid: auto \(NCCL's pick by size\), direct.*did you mean 'auto'"):
        parse_spec(_spec(w))
    training = {**TRAINING, "tp_comm": {"algorithm": "autoo"}}
    with pytest.raises(ConfigError, match=r"workload.tp_comm.algorithm: .*valid: auto \(NCCL"):
        parse_spec(_training_spec(training))


def test_the_nccl_model_resolves_auto_and_fluid_keeps_none():
    topo = make_leaf_spine(gpus_per_host=8, nics_per_host=8, nic_bandwidth_Bps=50 * GB, uplink_bandwidth_Bps=50 * GB)
    big = NCCL.call("allreduce", "auto", "auto", 2**30, "auto", None, range(16), topo)
    assert (big.algorithm, big.protocol_name, big.channels) == ("ring", "Simple", 16)
    assert FLUID.call("allreduce", "auto", "auto", 2**30, "auto", None, range(16), topo).protocol is None
    named = NCCL.call("allreduce", "ring", "ll128", 2**30, "auto", None, range(16), topo)
    assert named.protocol_name == "LL128" and named.slice_bytes("allreduce", "ring", 2**30, 16) == 576000   # LL128: a step of 600 KiB of lines
    assert call_protocol("LL128", "tree", True).base_s == pytest.approx(4.4e-6)
    assert NCCL.call("alltoall", "auto", "auto", 2**20, "auto", None, range(16), topo).algorithm == "direct"


# ---------------------------------------------------------------------------------- training jobs, traces
TRAINING = {"type": "training", "gpu": "h100",
            "model": {"layers": 4, "hidden": 1024, "heads": 8, "seq_len": 128, "vocab": 1000, "micro_batch": 1,
                      "global_batch": 4},
            "parallelism": {"tp": 4, "pp": 1, "dp": 4}, "tp_granularity": "layer"}


def _training_spec(workload=None, model="nccl", **kw):
    """Four hosts of 4 GPUs and 4 NICs (400G), NVLink inside; TP inside a host, DP across hosts."""
    return _spec(workload or TRAINING, model=model, leaves=2, hosts_per_leaf=2, gpus_per_host=4, nics_per_host=4,
                 nic={"bandwidth": "400Gbps"}, uplink={"bandwidth": "1600Gbps"}, intra_host={"bandwidth": "900GB/s"},
                 **kw)


def _groups(label: str, n: int = 4) -> list[list[int]]:
    """The GPUs of each TP (one host) or DP (one GPU a host) group under sequential placement."""
    return [list(range(4 * d, 4 * d + 4)) for d in range(n)] if label == "tp" else \
        [list(range(k, 16, 4)) for k in range(4)]


def test_a_training_job_picks_each_call_as_nccls_model_does(tmp_path):
    """By default (``algorithm: auto``, ``protocol: auto``) every TP and DP call of a training job runs what
    NCCL's model picks for its size on its communicator, and the results say so: here, TP allreduces of
    256 KiB inside a host (LL) and DP gradient allreduces of about 25 MiB across hosts (Simple)."""
    spec = parse_spec(_training_spec())
    result = run_experiment(spec)
    topo = build_topology(spec)
    calls = collectives_frame(result)
    assert set(calls["label"]) == {"tp", "dp"}
    for _, row in calls.iterrows():
        want = NCCL.call(row["op"], "auto", "auto", row["size_bytes"], "auto", None, _groups(row["label"])[0], topo)
        assert (row["algorithm"], row["protocol"], row["channels"]) == \
            (want.algorithm, want.protocol_name, want.channels), row.to_dict()
    assert calls["protocol"].nunique() >= 2      # sizes on both sides of a crossover
    assert (calls["protocol"] != "").all()


def test_a_training_job_runs_what_its_file_names(tmp_path):
    """``tp_comm``/``dp_comm`` name the algorithm and protocol; under ``model: fluid`` ``auto`` adds no protocol."""
    named = {**TRAINING, "tp_comm": {"algorithm": "ring", "protocol": "simple"},
             "dp_comm": {"algorithm": "tree", "protocol": "LL"}}
    calls = _calls(tmp_path, _training_spec(named))
    assert set(zip(calls["label"], calls["algorithm"], calls["protocol"])) == {("tp", "ring", "Simple"),
                                                                               ("dp", "tree", "LL")}
    fluid = _calls(tmp_path, _training_spec(model="fluid"))
    assert (fluid["protocol"] == "").all() and set(fluid["algorithm"]) <= {"ring", "tree"}


def test_the_compiled_and_the_process_iteration_build_calls_alike(tmp_path, monkeypatch):
    """The compiled iteration (fragments with their overhead scales) and the stage processes (each call
    built alone) give the same calls, protocols and times."""
    import netsim.workload.pipeline as pipeline
    compiled = _calls(tmp_path, _training_spec())
    monkeypatch.setattr(pipeline, "compilable", lambda plan, speeds: False)
    processes = _calls(tmp_path, _training_spec())
    cols = ["label", "op", "algorithm", "protocol", "size_bytes", "start_s", "end_s", "ideal_s"]
    a, b = (f[cols].sort_values(cols).reset_index(drop=True) for f in (compiled, processes))
    pd.testing.assert_frame_equal(a, b, rtol=1e-9)


def test_a_chakra_trace_picks_by_size_and_takes_a_named_protocol(tmp_path):
    from netsim.workload.chakra import coll_node, write_trace
    write_trace(tmp_path / "t", [[coll_node(1, "allreduce", 8), coll_node(2, "allreduce", 256 * 2**20, deps=[1])]
                                 for _ in range(16)])
    w = {"type": "chakra", "path": str(tmp_path / "t")}
    calls = _calls(tmp_path, _training_spec(w))
    assert calls["protocol"].tolist() == ["LL", "Simple"]
    calls = _calls(tmp_path, _training_spec({**w, "protocol": "ll128", "algorithms": {"allreduce": "ring"}}))
    assert calls["protocol"].tolist() == ["LL128", "LL128"] and set(calls["algorithm"]) == {"ring"}

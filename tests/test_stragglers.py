"""Stragglers and flaky parts: slow GPUs (fixed or drawn), switch faults, flapping links and NICs, and
what each fault cost a training job (counterfactual runs), against closed forms."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from netsim.cli import app
from netsim.config import FaultSpec, parse_spec
from netsim.engine.faults import resolve_faults
from netsim.experiment import read_results, run_experiment, write_results
from netsim.workload.speeds import ComputeSpeeds, SlowGpu
from tests.conftest import cli_on_file, config_errors, make_leaf_spine
from tests.test_faults import lone_flow, spec_dict

runner = CliRunner()
#: 1 GFLOP/s: compute is milliseconds to seconds, so a slow GPU's extra time is large and exact
GPU = {"profile": "a100", "peak_tflops": 1e-3, "efficiency": 1.0}


def topology(leaves: int = 2, hosts_per_leaf: int = 2, gpus_per_host: int = 1) -> dict:
    return {"type": "leaf_spine", "leaves": leaves, "spines": 2, "hosts_per_leaf": hosts_per_leaf,
            "gpus_per_host": gpus_per_host, "nics_per_host": 1, "nic": {"bandwidth": "100Gbps"},
            "uplink": {"bandwidth": "100Gbps"}, "intra_host": {"bandwidth": "900GB/s"}}


def training(dp: int = 4, tp: int = 1, iterations: int = 1) -> dict:
    return {"type": "training", "gpu": GPU, "iterations": iterations,
            "parallelism": {"tp": tp, "dp": dp, "overlap_dp": False},
            "model": {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 128, "vocab": 1024, "micro_batch": 1,
                      "global_batch": 2 * dp}}


def spec(faults=(), *, workload=None, topo=None, **kw) -> dict:
    return {"name": "stragglers", "topology": topo or topology(), "workload": workload or training(),
            "faults": list(faults), **kw}


def run(*args, **kw):
    return run_experiment(parse_spec(spec(*args, **kw)))


def slow(gpu, factor=2.0, at=0.0) -> dict:
    return {"at": at, "gpu": gpu, "action": "slow", "factor": factor}


@pytest.fixture(scope="module")
def healthy():
    """The fault-free DP job: one iteration of compute C (the same on every replica) then the allreduce."""
    return run()


# ---------------------------------------------------------------------------- slow GPUs, closed forms

def test_compute_speeds_are_a_step_function_per_gpu():
    speeds = ComputeSpeeds([SlowGpu(2, 1.0, 1.5), SlowGpu(2, 0.0, 3.0), SlowGpu(2, 2.0, 1.0), SlowGpu(5, 1.0, 2.0)])
    assert [speeds.factor(2, t) for t in (0.0, 0.99, 1.0, 1.5, 2.0, 9.0)] == [3.0, 3.0, 1.5, 1.5, 1.0, 1.0]
    assert speeds.factor(0, 5.0) == 1.0 and speeds.slowest([0, 2, 5], 1.0) == 2.0 and not ComputeSpeeds([])


@pytest.mark.parametrize("factor", [1.0, 1.5, 2.0, 3.25])
@pytest.mark.parametrize("gpu", [2, "h2.gpu0"])
def test_one_slow_rank_stalls_the_dp_iteration_by_exactly_its_extra_compute(healthy, factor, gpu):
    """4 replicas compute C each, then a ring allreduce that starts when the last arrives: with one GPU
    ``factor`` times slower the iteration is T + (factor - 1) C, exactly; the mean compute grows by a quarter
    of that."""
    (h,) = healthy.iterations
    C = h.compute_s
    (it,) = run([slow(gpu, factor)]).iterations
    assert it.duration_s == pytest.approx(h.duration_s + (factor - 1) * C, rel=1e-12)
    assert it.compute_s == pytest.approx(C * (3 + factor) / 4, rel=1e-12)
    assert it.dp_s == pytest.approx(h.dp_s + (factor - 1) * C * 3 / 4, rel=1e-9)  # the others wait in the sync


def test_a_slow_gpu_in_a_tp_group_slows_its_whole_group():
    """TP=2 inside a host, DP=2: the group computes in lockstep at its slowest GPU's pace."""
    topo, work = topology(leaves=1, hosts_per_leaf=2, gpus_per_host=2), training(dp=2, tp=2)
    (h,) = run(topo=topo, workload=work).iterations
    for gpu in (0, 1, 3):
        (it,) = run([slow(gpu, 2.0)], topo=topo, workload=work).iterations
        assert it.duration_s == pytest.approx(h.duration_s + h.compute_s, rel=1e-9), gpu


def test_up_restores_nominal_speed_for_tasks_starting_after_it(healthy):
    """Slow from 0, restored while iteration 1 synchronises gradients (no compute then): iteration 1 costs
    T + C, iteration 2 is nominal again."""
    (h,) = healthy.iterations
    T, C, AR = h.duration_s, h.compute_s, h.dp_s
    r = run([slow(1), {"at": 2 * C + AR / 2, "gpu": 1, "action": "up"}], workload=training(iterations=2))
    first, second = r.iterations
    assert first.duration_s == pytest.approx(T + C, rel=1e-12)
    assert second.duration_s == pytest.approx(T, rel=1e-12)
    late = run([slow(1, at=T * 1.5)], workload=training(iterations=2))  # from inside iteration 2 on
    assert late.iterations[0].duration_s == pytest.approx(T, rel=1e-12)
    assert T < late.iterations[1].duration_s < T + C


def test_a_slow_gpu_moves_an_moe_experts_compute_too():
    """An MoE layer's routed experts on the slow GPU take longer (the whole iteration, more than its own
    dense compute alone)."""
    work = training(dp=4)
    work["model"]["layers"] = 2
    work["moe"] = {"experts": 4, "top_k": 1, "ep": 4, "expert_hidden": 128}
    h = run(workload=work).iterations[0]
    s = run([slow(0, 2.0)], workload=work).iterations[0]
    assert s.duration_s > h.duration_s + 0.5 * h.compute_s


# ---------------------------------------------------------------------------- switches, flaps, NICs

def test_a_switch_fault_is_every_link_of_the_switch_both_directions():
    topo = make_leaf_spine(leaves=3, spines=2, hosts_per_leaf=1)
    (fault,) = resolve_faults([FaultSpec(at=0, switch="spine1", action="down")], topo)
    lt = topo.links
    spine = next(n for n, name in topo.graph.nodes(data="name") if name == "spine1")
    assert set(fault.links) == set(np.flatnonzero((lt.src == spine) | (lt.dst == spine)).tolist())
    assert len(fault.links) == 6 and fault.fraction == 0.0
    (leaf,) = resolve_faults([FaultSpec(at=0, switch="leaf0", action="degrade", fraction=0.5)], topo)
    assert len(leaf.links) == 2 * (2 + 1) and leaf.fraction == 0.5  # its two uplinks and its host's NIC


def test_a_dead_switch_costs_a_lone_flow_the_reaction_time():
    """Like a dead cable: the flow stalls until ECMP reconverges (0.25 s), then runs on the other spine."""
    t, fab = lone_flow("ecmp", lambda used: [{"at": 0.25, "switch": used[0], "action": "down"}],
                       {"reconvergence": 0.25})
    assert t == pytest.approx(1.25, rel=1e-12) and fab.stats["reroutes"] == 1


@pytest.mark.parametrize("target", ["switch", "nic", "both"])
def test_degraded_switches_and_nics_slow_a_lone_flow_from_that_instant(target):
    """1 GB at 1 GB/s; from 0.25 s its spine runs at half speed and/or its NIC at a quarter: the slowest
    part sets the rate, and ``up`` at 0.5 s restores it."""
    def faults(used):
        out = []
        if target in ("switch", "both"):
            out += [{"at": 0.25, "switch": used[0], "action": "degrade", "fraction": 0.5},
                    {"at": 0.5, "switch": used[0], "action": "up"}]
        if target in ("nic", "both"):
            out += [{"at": 0.25, "nic": "h0.nic0", "action": "degrade", "fraction": 0.25},
                    {"at": 0.5, "nic": "h0.nic0", "action": "up"}]
        return out
    rate = 0.5 if target == "switch" else 0.25
    t, fab = lone_flow("ecmp", faults, {"reconvergence": 0.0})
    assert t == pytest.approx(0.5 + (0.75 - 0.25 * rate), rel=1e-12)
    assert fab.current_capacity_Bps.min() == pytest.approx(1e9)


FLAP = {"action": "flap", "at": 0.2, "period": 0.2, "down_for": 0.05}


@pytest.mark.parametrize("times", [{"count": 3}, {"until": 0.8}, {"until": 0.61}])
@pytest.mark.parametrize("target", ["link", "nic"])
def test_a_flap_on_the_only_path_delays_a_flow_by_its_down_time(times, target):
    """One spine (or the sender's NIC): three 50 ms outages (at 0.2, 0.4 and 0.6 s) stall the 1 s flow for
    150 ms; routing has nowhere else to go."""
    where = {"link": "leaf0-spine0"} if target == "link" else {"nic": "h0.nic0"}
    t, _ = lone_flow("ecmp", lambda used: [{**FLAP, **where, **times}], {"reconvergence": 10.0}, spines=1)
    assert t == pytest.approx(1.15, rel=1e-12)


def test_a_flap_expands_into_down_up_pairs():
    topo = make_leaf_spine(leaves=2, spines=2, hosts_per_leaf=1)
    out = resolve_faults([FaultSpec.model_validate({**FLAP, "link": "leaf0-spine1", "count": 3})], topo)
    assert [f.at_s for f in out] == pytest.approx([0.2, 0.25, 0.4, 0.45, 0.6, 0.65], rel=1e-12)
    assert [f.fraction for f in out] == [0.0, 1.0] * 3


@pytest.mark.parametrize("policy, option, flaps_paid", [("ecmp", "reconvergence", 3), ("c4p", "detection", 1)])
def test_a_flap_with_a_way_around_costs_the_reaction_time(policy, option, flaps_paid):
    """Two spines, reaction 10 ms < down_for 50 ms: at each outage the flow stalls until the policy moves it
    to the other spine. Hashed ECMP moves it back to its hashed path once the cable is up again, so it pays
    every flap (1 s + 3 x 10 ms); C4P's plan keeps it on the live spine and pays once (1 s + 10 ms)."""
    t, _ = lone_flow(policy, lambda used: [{**FLAP, "link": f"leaf0-{used[0]}", "count": 3}], {option: 0.01})
    assert t == pytest.approx(1.0 + flaps_paid * 0.01, rel=1e-12)


# ---------------------------------------------------------------------------- drawn stragglers

def test_drawn_stragglers_are_deterministic_per_seed_and_recorded():
    draw = {"count": 2, "factor": {"distribution": "uniform", "low": 1.2, "high": 1.6}}
    first = run(stragglers=draw, seed=3)
    again = run(stragglers=draw, seed=3)
    assert first.extra["stragglers"] == again.extra["stragglers"]
    assert [it.duration_s for it in first.iterations] == [it.duration_s for it in again.iterations]
    picked = first.extra["stragglers"]
    assert len(picked) == 2 and all(1.2 <= s["factor"] <= 1.6 for s in picked)
    assert all(s["name"] == f"h{s['gpu']}.gpu0" for s in picked)
    seen = {tuple(s["gpu"] for s in run(stragglers=draw, seed=seed).extra["stragglers"]) for seed in range(6)}
    assert len(seen) > 1, "the seed draws the GPUs"
    # the slowest drawn GPU sets the iteration (a DP job waits for its slowest replica)
    (h,) = run().iterations
    worst = max(s["factor"] for s in picked)
    assert first.iterations[0].duration_s == pytest.approx(h.duration_s + (worst - 1) * h.compute_s, rel=1e-12)


def test_drawing_stragglers_shifts_no_other_draw():
    """Random placement and hashed routing draw from their own generators: the same GPUs and paths."""
    base = {"placement": {"type": "random"}, "seed": 4}
    plain = run(**base)
    drawn = run(stragglers={"fraction": 0.25, "factor": {"distribution": "lognormal", "median": 1.3,
                                                         "sigma": 0.2}}, **base)
    assert plain.gpus.tolist() == drawn.gpus.tolist()
    assert len(drawn.extra["stragglers"]) == 1 and drawn.extra["stragglers"][0]["factor"] >= 1.0


def test_drawn_stragglers_are_listed_in_the_manifest(tmp_path):
    result = run(stragglers={"count": 1, "factor": 2.0}, seed=1)
    out = write_results([result], tmp_path / "r")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs"][0]["stragglers"] == result.extra["stragglers"]
    costs = read_results(out)["fault_costs"]
    assert costs["fault"].tolist() == ["all", "stragglers.0"]
    assert costs["target"].iat[1] == result.extra["stragglers"][0]["name"]


# ---------------------------------------------------------------------------- per-fault costs

def test_fault_costs_unused_link_zero_and_slow_gpu_its_closed_form(tmp_path):
    """The job runs on leaf 0's four hosts: a cable of leaf 1 down for good costs nothing, exactly; the GPU
    twice as slow costs its compute C per iteration; together they cost C."""
    topo = topology(leaves=2, hosts_per_leaf=4)
    (h,) = run(topo=topo).iterations
    C = h.compute_s
    result = run([{"at": 0, "link": "leaf1-spine0", "action": "down"}, slow(3, 2.0)], topo=topo,
                 workload=training(iterations=2))
    costs = result.extra["fault_costs"].set_index("fault")
    assert costs.loc["faults.0", "cost_s"] == 0.0 and costs.loc["faults.0", "target"] == "leaf1-spine0"
    assert costs.loc["faults.1", "cost_per_iteration_s"] == pytest.approx(C, rel=1e-9)
    assert costs.loc["faults.1", "cost_s"] == pytest.approx(2 * C, rel=1e-9)
    assert costs.loc["all", "cost_s"] == pytest.approx(2 * C, rel=1e-9)
    assert costs.loc["all", "without_s"] == pytest.approx(h.duration_s, rel=1e-12)
    assert (costs["iterations"] == 2).all() and (costs["note"] == "").all()
    # written as fault_costs.parquet, and shown by the CLI
    out = write_results([result], tmp_path / "r")
    pd.testing.assert_frame_equal(read_results(out)["fault_costs"], result.extra["fault_costs"])


def test_removing_an_up_that_is_needed_gives_a_missing_cost_with_a_note():
    """Without the ``up`` the NIC stays down for good and the counterfactual cannot finish: no number."""
    result = run([{"at": "1ms", "nic": "h0.nic0", "action": "down"}, {"at": "2ms", "nic": "h0.nic0", "action": "up"}])
    costs = result.extra["fault_costs"].set_index("fault")
    assert math.isnan(costs.loc["faults.1", "cost_s"]) and "does not finish" in costs.loc["faults.1", "note"]
    assert costs.loc["faults.0", "cost_s"] >= 0 and costs.loc["all", "cost_s"] == costs.loc["faults.0", "cost_s"]


def test_fault_costs_are_bounded_by_the_engine_option():
    nine = [{"at": "1s", "link": "leaf1-spine0", "action": "down"}] * 9
    assert "fault_costs" not in run(nine).extra  # auto: at most 8 entries
    assert len(run(nine, engine={"fault_costs": "on"}).extra["fault_costs"]) == 10
    assert "fault_costs" not in run(nine[:1], engine={"fault_costs": "off"}).extra
    assert "fault_costs" not in run().extra  # no fault, no costs


def test_the_cli_prints_the_fault_costs(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec([slow("h1.gpu0", 1.5)])))
    result = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "out"), "--no-report"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "fault costs" in text and "h1.gpu0" in text and "compute x1.5" in text


# ---------------------------------------------------------------------------- bad input

COLLECTIVE = spec_dict("ecmp")
MIX = spec(jobs=[{"name": "t", "workload": training(dp=2)},
                 {"name": "c", "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring",
                                              "size": "1MiB", "ranks": 2}}])
MIX.pop("workload")
LINK = {"at": 0, "link": "leaf0-spine0"}
BAD = [
    ("unknown gpu index", spec([slow(99)]), "faults.0.gpu", "no GPU 99: the fabric has 4 GPUs (0 .. 3)"),
    ("unknown gpu name", spec([slow("h9.gpu0")]), "faults.0.gpu", "no GPU named 'h9.gpu0'"),
    ("factor below 1", spec([slow(1, 0.5)]), "faults.0.factor", "greater than or equal to 1"),
    ("slow without factor", spec([{"at": 0, "gpu": 1, "action": "slow"}]), "faults.0", "factor (≥ 1"),
    ("a gpu going down", spec([{"at": 0, "gpu": 1, "action": "down"}]), "faults.0.action", "a GPU is slowed"),
    ("a slow cable", spec([{**LINK, "action": "slow", "factor": 2}]), "faults.0.action", "action slow goes with gpu"),
    ("flap down_for >= period", spec([{**LINK, "action": "flap", "period": "1ms", "down_for": "1ms", "count": 2}]),
     "faults.0.down_for", "must be shorter than period"),
    ("flap without count or until", spec([{**LINK, "action": "flap", "period": "2ms", "down_for": "1ms"}]),
     "faults.0", "exactly one of count"),
    ("flap count 0", spec([{**LINK, "action": "flap", "period": "2ms", "down_for": "1ms", "count": 0}]),
     "faults.0.count", "from 1 to 10,000"),
    ("too many flaps", spec([{**LINK, "action": "flap", "period": "1us", "down_for": "0.5us", "until": "1s"}]),
     "faults.0.until", "at most 10,000 per entry"),
    ("until before at", spec([{**LINK, "at": "2ms", "action": "flap", "period": "1ms", "down_for": "0.5ms",
                              "until": "1ms"}]), "faults.0.until", "must be after at"),
    ("period without flap", spec([{**LINK, "action": "down", "period": "1ms"}]), "faults.0.period",
     "goes with action flap"),
    ("gpu fault on a collective workload", {**COLLECTIVE, "faults": [slow(1)]}, "faults.0.gpu",
     "gpu faults need a training workload"),
    ("gpu fault on a collective job", {**MIX, "faults": [slow(3)]}, "faults.0.gpu",
     "GPU 3 (h3.gpu0) runs job 'c', a collective workload: gpu faults need a training workload"),
    ("stragglers on a collective", {**COLLECTIVE, "stragglers": {"count": 1, "factor": 2}}, "stragglers",
     "stragglers need a training workload"),
    ("more stragglers than GPUs", spec(stragglers={"count": 5, "factor": 2}), "stragglers.count",
     "5 stragglers asked for, but only 4 GPUs run training"),
    ("count and fraction", spec(stragglers={"count": 1, "fraction": 0.5, "factor": 2}), "stragglers",
     "exactly one of count"),
    ("unknown distribution", spec(stragglers={"count": 1, "factor": {"distribution": "pareto"}}),
     "stragglers.factor", "lognormal"),
    ("fault costs on a collective", {**COLLECTIVE, "engine": {"fault_costs": "on"}}, "engine.fault_costs",
     "need a training workload"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_inputs_give_one_clear_error_with_the_yaml_path(case):
    _, data, path, message = case
    for err in config_errors(data):
        assert err.path.startswith(path) and message in err.message, err
        assert "more problem" not in err.message, err


@pytest.mark.parametrize("case", [BAD[0], BAD[2], BAD[6], BAD[12], BAD[15]],
                         ids=["gpu on the fabric", "factor", "flap", "collective", "stragglers"])
@pytest.mark.parametrize("command", ["run", "validate"])
def test_bad_inputs_through_the_cli_exit_2_with_file_line_and_path(tmp_path, case, command):
    _, data, path, message = case
    result, yaml_path, out = cli_on_file(tmp_path, data, command)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "Traceback" not in text and message in text, text
    assert re.search(rf"{re.escape(str(yaml_path))}:\d+: {re.escape(path)}", text), text
    assert not out.exists()


def test_the_faults_cookbook_states_what_the_shipped_experiment_costs():
    """docs/cookbook/faults.md's table and sentences for experiments/stragglers.yaml are what it runs."""
    from pathlib import Path

    from netsim.config import load_experiment
    from netsim.experiment.sweep import expand

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs/cookbook/faults.md").read_text()
    (run,) = expand(load_experiment(root / "experiments/stragglers.yaml"))
    costs = run_experiment(run.spec).extra["fault_costs"].set_index("fault")
    ms = (lambda seconds: f"{seconds * 1e3:.2f} ms")
    whole = costs.loc["all"]
    said = " ".join(text.split())
    assert f"Its iterations take {whole.iteration_time_s * 1e3:.1f} ms on average instead of " \
           f"{whole.without_s * 1e3:.1f} ms healthy" in said
    share = 100 * whole.cost_per_iteration_s / whole.iteration_time_s
    assert f"| all | | | {ms(whole.cost_per_iteration_s)} ({share:.1f}%) | {ms(whole.cost_s)} |" in text
    for fault in ("faults.0", "faults.1", "faults.2"):
        (row,) = [line for line in text.splitlines() if line.startswith(f"| `{fault}` |")]
        assert f"| {ms(costs.loc[fault, 'cost_per_iteration_s'])} | {ms(costs.loc[fault, 'cost_s'])}" in row, row
    marginal = costs.drop("all").cost_per_iteration_s.sum()
    assert f"saves {ms(whole.cost_per_iteration_s)}, more than the {ms(marginal)} the marginal costs" in said

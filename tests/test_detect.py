"""Fault detection (netsim.detect): telemetry holds observables only, the detector names a single slow
cable, NIC, switch or GPU first and stays quiet on a healthy run, the evaluation is deterministic,
bad ``detection:`` input names its YAML path, and ``netsim run`` writes the tables and the panel."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import netsim.detect.detector
import netsim.detect.telemetry
from netsim.cli import app
from netsim.config import FaultSpec, parse_spec
from netsim.detect import Component, Components, Detector, Telemetry, collect
from netsim.detect.evaluate import evaluate
from netsim.errors import ConfigError
from netsim.experiment import read_results, run_experiment
from netsim.report.dashboard import build_figures, write_report
from tests.test_report_browser import artifacts, browser, open_report  # noqa: F401 - fixtures

runner = CliRunner()

#: 32 GPUs (4 leaves x 2 hosts x 4 GPUs, a NIC per GPU), 2:1 oversubscribed, hosts placed at random,
#: one data-parallel ring allreduce (4 channels) per iteration, in the pure fluid model (rank-order rings,
#: one message a step). Under the NCCL model's rings on rails this healthy run raises an alarm at leaf1
#: (the detector's thresholds were set on rank-order rings; docs/detection.md).
SPEC = {
    "name": "detect-test", "seed": 1, "model": "fluid",
    "topology": {"type": "leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 4,
                 "nics_per_host": 4, "nic": {"bandwidth": "400Gbps", "latency": "1us"},
                 "uplink": {"bandwidth": "400Gbps", "latency": "500ns", "count": 2},
                 "intra_host": {"bandwidth": "900GB/s", "latency": "300ns"}},
    "placement": {"type": "random", "by": "host"}, "routing": "ecmp",
    "workload": {"type": "training", "parallelism": {"dp": 32}, "iterations": 3, "dp_comm": {"channels": 4},
                 "model": {"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 32000,
                           "global_batch": 32}},
    "engine": {"ideal": False, "congestion": False, "link_series": 0},
}


def _spec(**changes):
    return parse_spec({**SPEC, **changes})


def _detect(faults: list[dict]):
    result = run_experiment(_spec(faults=faults))
    telemetry = collect(result)
    return result, telemetry, Detector(Components(result.topology)).run(telemetry)


def test_a_healthy_run_raises_no_alarm():
    _result, telemetry, verdicts = _detect([])
    assert len(verdicts) == telemetry.n_iterations == 3
    assert not any(v.alarm for v in verdicts) and not verdicts[-1].ranking


def test_a_healthy_run_with_tensor_and_pipeline_parallelism_raises_no_alarm():
    """Pipeline activations (point-to-point, no peers) are not compared; TP groups stay inside hosts."""
    workload = {**SPEC["workload"], "parallelism": {"tp": 2, "pp": 2, "dp": 8},
                "model": {**SPEC["workload"]["model"], "global_batch": 16}}
    result = run_experiment(_spec(workload=workload))
    telemetry = collect(result)
    assert (telemetry.connections["group"] == -1).any()  # the activations
    verdicts = Detector(Components(result.topology)).run(telemetry)
    assert not any(v.alarm for v in verdicts)
    slow = run_experiment(_spec(workload=workload, faults=[{"at": 0, "gpu": "h1.gpu2", "action": "slow",
                                                            "factor": 1.5}]))
    last = Detector(Components(slow.topology)).run(collect(slow))[-1]
    tp_group = {c for c, s in last.ranking if s == last.ranking[0][1]}
    assert Component("gpu", "h1.gpu2") in tp_group and len(tp_group) == 2  # lockstep: its TP peer ties


@pytest.mark.parametrize("fault, culprit", [
    ({"link": "leaf0-spine1#0", "action": "degrade", "fraction": 0.5}, Component("link", "leaf0-spine1#0")),
    ({"nic": "h2.nic1", "action": "degrade", "fraction": 0.2}, Component("nic", "h2.nic1")),
    ({"switch": "spine0", "action": "degrade", "fraction": 0.5}, Component("switch", "spine0")),
    ({"gpu": "h1.gpu2", "action": "slow", "factor": 1.5}, Component("gpu", "h1.gpu2")),
], ids=["link", "nic", "switch", "gpu"])
def test_a_single_slow_component_is_ranked_first(fault, culprit):
    _result, _telemetry, verdicts = _detect([{"at": 0, **fault}])
    for v in verdicts:  # from the first faulty iteration on, alone in first place
        assert v.alarm and v.ranking[0][0] == culprit and v.rank_of(culprit) == 1 and v.hit(culprit, 1) == 1.0
        assert len(v.ranking) == 1 or v.ranking[1][1] < v.ranking[0][1]


def test_telemetry_holds_observables_only():
    """No field for faults, degraded capacities or GPU speeds; the detector never reads the spec or the
    fabric's state; the same run with its faults hidden gives the same telemetry."""
    fields = {f.name for f in dataclasses.fields(Telemetry)}
    assert fields == {"iterations", "connections", "routes", "ports", "ranks", "nominal_Bps"}
    for module in (netsim.detect.telemetry, netsim.detect.detector):
        source = inspect.getsource(module).split('"""', 2)[2]  # the code, past the module docstring
        for forbidden in ("faults", "current_capacity", "set_capacity", "speeds", ".spec", "stragglers"):
            assert forbidden not in source, f"{module.__name__} reads {forbidden}"
    result = run_experiment(_spec(faults=[{"at": 0, "nic": "h2.nic1", "action": "degrade", "fraction": 0.2}]))
    telemetry = collect(result)
    result.spec, result.extra = _spec(), {}
    again = collect(result)
    for name in ("iterations", "connections", "ports", "ranks"):
        pd.testing.assert_frame_equal(getattr(telemetry, name), getattr(again, name))
    nominal = run_experiment(_spec()).topology.links.capacity_Bps
    assert (telemetry.nominal_Bps == nominal).all()  # datasheet capacities, not the degraded ones


def test_persistence_waits_for_a_second_slow_iteration():
    result = run_experiment(_spec(faults=[{"at": 0, "link": "leaf0-spine1#0", "action": "degrade",
                                           "fraction": 0.5}]))
    telemetry = collect(result)
    verdicts = Detector(Components(result.topology), persist=2).run(telemetry)
    assert [v.alarm for v in verdicts] == [False, True, True]
    assert verdicts[1].ranking[0][0] == Component("link", "leaf0-spine1#0")


def test_noise_blurs_the_telemetry_reproducibly():
    import numpy as np

    from netsim.detect.evaluate import blur
    telemetry = collect(run_experiment(_spec()))
    assert blur(telemetry, 0.0, np.random.default_rng(0)) is telemetry
    a, b = (blur(telemetry, 0.1, np.random.default_rng(7)) for _ in range(2))
    pd.testing.assert_frame_equal(a.connections, b.connections)
    ratio = a.connections["busy_s"] / telemetry.connections["busy_s"]
    assert 0.02 < float(np.log(ratio).std()) < 0.2 and (a.ranks["compute_s"] != telemetry.ranks["compute_s"]).all()
    assert (a.connections["bytes"] == telemetry.connections["bytes"]).all()


def test_the_evaluation_is_deterministic_and_its_tables_agree():
    spec = _spec(detection={"trials": 6, "none": 0.3, "onset": "random", "noise": 0.1, "persist": 2})
    first, second = evaluate(spec), evaluate(spec)
    for name in ("detection_trials", "detection_summary", "detection_iterations"):
        pd.testing.assert_frame_equal(first[name], second[name])
    trials, summary = first["detection_trials"], first["detection_summary"]
    assert len(trials) == 6 and set(trials["kind"]) <= {"gpu", "nic", "link", "switch", "none"}
    assert (trials.loc[trials["kind"] == "none", "component"] == "").all()
    assert ((trials["onset"] >= 0) & (trials["onset"] < 3)).all()
    assert summary["kind"].iloc[-1] == "all" and summary["trials"].iloc[-1] == (trials["kind"] != "none").sum()
    assert len(first["detection_iterations"]) == 6 * 3
    other = evaluate(_spec(seed=2, detection={"trials": 6, "none": 0.3, "onset": "random", "noise": 0.1,
                                             "persist": 2}))["detection_trials"]
    assert not other[["kind", "component", "severity"]].equals(trials[["kind", "component", "severity"]])


@pytest.mark.parametrize("detection, path", [
    ({"trials": 0}, "detection.trials"),
    ({"severity": [0.7, 0.3]}, "detection.severity"),
    ({"severity": [0.3, 1.5]}, "detection.severity.1"),
    ({"kinds": ["gpu", "gpu"]}, "detection.kinds.1"),
    ({"kinds": ["cpu"]}, "detection.kinds.0"),
    ({"none": 2}, "detection.none"),
    ({"onset": "late"}, "detection.onset"),
    ({"treshold": 0.1}, "detection.treshold"),
    ({"persist": 0}, "detection.persist"),
    ({"noise": -0.1}, "detection.noise"),
])
def test_bad_detection_input_names_its_yaml_path(detection, path):
    with pytest.raises(ConfigError) as exc:
        _spec(detection=detection)
    assert exc.value.path == path, exc.value


def test_detection_refuses_its_own_faults_and_other_workloads():
    with pytest.raises(ConfigError) as exc:
        _spec(detection={}, faults=[{"at": 0, "nic": "h0.nic0", "action": "down"}])
    assert exc.value.path == "faults"
    with pytest.raises(ConfigError) as exc:
        _spec(detection={}, workload={"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"})
    assert exc.value.path == "detection"


def test_a_fault_entry_for_each_kind_validates():
    comps = Components(run_experiment(_spec()).topology)
    for comp in (Component("gpu", "h0.gpu1"), Component("nic", "h0.nic1"), Component("link", "leaf0-spine0#1"),
                 Component("switch", "leaf0")):
        FaultSpec.model_validate(comps.fault(comp, 0.5, 0.0))
    assert Component("switch", "leaf0") in comps.related(Component("link", "leaf0-spine0#1"))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("detect")
    (where / "exp.yaml").write_text(yaml.safe_dump({**SPEC, "detection": {"trials": 5, "none": 0.2}}))
    out = where / "results"
    res = runner.invoke(app, ["run", str(where / "exp.yaml"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "fault detection" in res.output
    return out


def test_the_cli_writes_the_detection_tables(results):
    tables = read_results(results)
    trials, summary = tables["detection_trials"], tables["detection_summary"]
    assert len(trials) == 5 and trials["run_id"].nunique() == 1
    assert trials["run_id"].iat[0] == tables["runs"]["run_id"].iat[0]
    assert {"top1", "top3", "false_alarm", "iterations_to_detect"} <= set(trials.columns)
    assert {"top1", "top3", "false_alarms", "missed", "iterations_to_detect"} <= set(summary.columns)
    assert len(tables["detection_iterations"]) == 5 * 3


def test_the_dashboard_shows_the_detection_panel(results):
    titles = [f.layout.title.text or "" for f in build_figures(results)]
    assert titles[1].startswith("Fault detection (C4D-style) per injected fault kind")
    assert titles[2].startswith("Culprit named first (top-1)")


def test_a_bad_detection_section_exits_2_without_a_traceback(tmp_path):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**SPEC, "detection": {"severity": [0.9, 0.1]}}))
    res = runner.invoke(app, ["run", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and "detection.severity" in res.output and "Traceback" not in res.output


def test_the_detection_report_renders_in_chromium(results, browser, artifacts):  # noqa: F811
    """As ``tests/test_report_browser.py`` checks every other report kind (skipped without Chromium)."""
    write_report(results)
    expected = len(build_figures(results))
    shot = artifacts / "report-detection.png"
    shot.unlink(missing_ok=True)
    seen = open_report(browser, results / "report.html", expected, screenshot=shot)
    problems = seen.problems(expected)
    assert not problems, "detection report.html in Chromium:\n  " + "\n  ".join(problems)


def test_a_sprayed_message_splits_evenly_and_port_counters_add_up():
    result = run_experiment(_spec(routing="spray"))
    telemetry = collect(result)
    lt = result.topology.links
    names = [result.topology.node_name(int(n)) for n in range(result.topology.graph.number_of_nodes())]
    crossing = 0
    for label, pieces in telemetry.routes.items():
        links = pieces[0][0]
        shares = dict(zip(links.tolist(), pieces[0][1].tolist()))
        ups = [link for link in links.tolist() if names[lt.src[link]].startswith("leaf")
               and names[lt.dst[link]].startswith("spine")]
        if ups:  # leaf to spine: every uplink of the source leaf carries the same share, summing to 1
            crossing += 1
            assert len(ups) == 4 and all(abs(shares[u] - 1 / 4) < 1e-12 for u in ups), label  # 2 spines x 2
        assert all(abs(s - 1.0) < 1e-12 for link, s in shares.items() if "nic" in names[lt.src[link]])
    assert crossing > 0
    ports, conns = telemetry.ports, telemetry.connections
    nic_up = [i for i in range(len(lt)) if "nic" in names[lt.src[i]]]
    leaves_host = [any(link in nic_up for link in telemetry.routes[c][0][0].tolist()) for c in conns["connection"]]
    sent = conns[leaves_host]["bytes"].sum()  # every byte that leaves a host crosses one NIC uplink
    assert ports[ports["link_id"].isin(nic_up)]["bytes"].sum() == pytest.approx(sent, rel=1e-12)


def test_the_evaluation_is_the_same_in_another_process(tmp_path):
    """Same spec and seed, a different interpreter (and string hash seed): the same trials, bit for bit."""
    import os
    import subprocess
    import sys
    spec = tmp_path / "exp.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "detection": {"trials": 4, "onset": "random"}}))
    # perf: the two interpreters run side by side (each is one process on one core), as a user runs
    # netsim (numba loaded when the work is worth it, not at the first message as conftest.py asks)
    env = {k: v for k, v in os.environ.items() if k != "NETSIM_JIT_AFTER"}
    runs = {hash_seed: subprocess.Popen([sys.executable, "-m", "netsim", "run", str(spec), "--out",
                                         str(tmp_path / f"out{hash_seed}"), "--no-report", "-q"],
                                        env={**env, "PYTHONHASHSEED": hash_seed})
            for hash_seed in ("1", "2")}
    codes = {hash_seed: proc.wait(timeout=600) for hash_seed, proc in runs.items()}  # both, then judge
    assert codes == {"1": 0, "2": 0}, f"exit status by PYTHONHASHSEED: {codes}"
    tables = [pd.read_parquet(tmp_path / f"out{seed}" / "detection_trials.parquet") for seed in runs]
    pd.testing.assert_frame_equal(*tables)

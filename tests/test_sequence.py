"""`type: sequence` workloads: back-to-back and concurrent collectives on sub-communicators, from YAML."""

import pandas as pd
import pytest
from typer.testing import CliRunner

from netsim.cli import app
from netsim.config import parse_spec
from netsim.errors import ConfigError
from netsim.experiment import read_results, run_experiment, write_results
from netsim.workload import plan_workload, select_ranks
from tests.test_cli import write

runner = CliRunner()
GBPS = 1e9 / 8


def _spec(workload, **topology) -> dict:
    """4 hosts x 4 GPUs x 4 NICs (100 Gbps) on 2 leaves, 1:1, sequential placement; the pure fluid model
    (rank-order rings, whose closed forms the tests below check)."""
    topo = dict(type="leaf_spine", leaves=2, spines=4, hosts_per_leaf=2, gpus_per_host=4, nics_per_host=4,
                nic={"bandwidth": "100Gbps", "latency": "1us"}, uplink={"bandwidth": "100Gbps", "count": 2},
                intra_host={"bandwidth": "2400Gbps"})
    topo.update(topology)
    return dict(name="seq", seed=3, model="fluid", topology=topo, placement="sequential", routing="ecmp", workload=workload)


def _collectives(tmp_path, spec) -> pd.DataFrame:
    result = run_experiment(parse_spec(spec))
    return read_results(write_results([result], tmp_path / "res", force=True))["collectives"]


def _ring(size, **kw):
    return {"op": "allreduce", "algorithm": "ring", "size": size, **kw}


def test_select_ranks_forms():
    gpus = list(range(100, 116))
    assert select_ranks(None, gpus, "p") == gpus
    assert select_ranks(3, gpus, "p") == [100, 101, 102]
    assert select_ranks([5, 0], gpus, "p") == [105, 100]
    assert select_ranks("2::4", gpus, "p") == [102, 106, 110, 114]
    assert select_ranks(":2", gpus, "p") == [100, 101]


@pytest.mark.parametrize("selector, message", [
    (17, "only 16"), ([0, 16], "out of range"), ([1, 1], "twice"), ("::0", "must not be zero"), ("20:", "no rank"),
])
def test_select_ranks_errors(selector, message):
    with pytest.raises(ConfigError, match=message) as info:
        select_ranks(selector, list(range(16)), "workload.steps.2.ranks")
    assert info.value.path == "workload.steps.2.ranks"


def test_serial_steps_run_back_to_back_each_as_fast_as_alone(tmp_path):
    steps = [_ring("4MiB"), {"op": "allreduce", "algorithm": "tree", "size": "4MiB"}, _ring("64KiB", iterations=2)]
    colls = _collectives(tmp_path, _spec({"type": "sequence", "steps": steps}))
    assert list(colls["step"]) == [0, 1, 2, 2] and list(colls["iteration"]) == [0, 0, 0, 1]
    assert list(colls["label"]) == ["allreduce/ring", "allreduce/tree", "allreduce/ring", "allreduce/ring"]
    assert (colls["start_s"].iloc[1:].to_numpy() == colls["end_s"].iloc[:-1].to_numpy()).all()
    assert set(colls["comm"]) == {0}  # same ranks: one communicator, its connections reused
    for i, step in enumerate(steps):
        alone = _collectives(tmp_path, _spec({"type": "collective", **{**step, "iterations": 1}}))
        assert colls.query(f"step == {i}")["duration_s"].iloc[0] == pytest.approx(alone["duration_s"].iloc[0],
                                                                                  rel=1e-9)


def test_concurrent_rings_on_separate_rails_do_not_interfere(tmp_path):
    # local GPU k of every host is rail k (its own NIC): four independent 4-rank rings
    # (all four hosts on one leaf: the switch is non-blocking, no ECMP in the way)
    rails = [_ring("16MiB", ranks=f"{k}::4", label=f"rail{k}") for k in range(4)]
    spec = _spec({"type": "sequence", "mode": "concurrent", "steps": rails}, leaves=1, hosts_per_leaf=4)
    colls = _collectives(tmp_path, spec)
    assert sorted(colls["comm"]) == [1, 2, 3, 4] and (colls["n_ranks"] == 4).all()
    assert (colls["start_s"] == 0).all() and list(colls["label"]) == ["rail0", "rail1", "rail2", "rail3"]
    # each ring as if alone: 2(n-1) steps of M/n through its own NIC, alpha = 2 x 1us cable
    alone = 2 * 3 * (2e-6 + 16 * 2**20 / 4 / (100 * GBPS))
    assert colls["duration_s"].to_numpy() == pytest.approx([alone] * 4, rel=1e-6)
    assert colls["slowdown"].to_numpy() == pytest.approx([1.0] * 4, rel=1e-6) and not colls["below_bound"].any()


def test_rails_across_leaves_show_ecmp_collisions_as_slowdown(tmp_path):
    rails = [_ring("16MiB", ranks=f"{k}::4") for k in range(4)]
    colls = _collectives(tmp_path, _spec({"type": "sequence", "mode": "concurrent", "steps": rails}))
    assert colls["ideal_s"].nunique() == 1  # the same ring on every rail, ideally
    assert colls["slowdown"].min() >= 1 - 1e-9 and not colls["below_bound"].any()
    assert colls["slowdown"].max() > 1.5  # seed 3 hashes two rails' leaf-crossing hops onto one uplink


def test_concurrent_communicators_sharing_nics_slow_each_other(tmp_path):
    # one NIC per host: two concurrent rings over the same hosts share every NIC
    topo = dict(nics_per_host=1, leaves=1, hosts_per_leaf=4)
    pair = [_ring("16MiB", ranks="0::4"), _ring("16MiB", ranks="1::4")]
    both = _collectives(tmp_path, _spec({"type": "sequence", "mode": "concurrent", "steps": pair}, **topo))
    one = _collectives(tmp_path, _spec({"type": "sequence", "steps": pair[:1]}, **topo))
    # every step's M/n now moves at half the NIC rate; the latencies are paid once
    extra = 2 * 3 * (16 * 2**20 / 4) / (100 * GBPS)
    assert both["duration_s"].to_numpy() == pytest.approx([one["duration_s"].iloc[0] + extra] * 2, rel=1e-9)
    # the ideal is each call alone on a non-blocking core: the slowdown shows the other communicator
    assert both["ideal_s"].to_numpy() == pytest.approx([one["ideal_s"].iloc[0]] * 2, rel=1e-12)
    assert one["slowdown"].iloc[0] == pytest.approx(1.0, rel=1e-9)
    assert both["slowdown"].min() > 1.9 and not both["below_bound"].any()


def test_nested_sequences_and_repeats(tmp_path):
    inner = {"type": "sequence", "mode": "concurrent", "steps": [_ring("1MiB", ranks=8), _ring("1MiB", ranks="8:")]}
    spec = _spec({"type": "sequence", "iterations": 3, "steps": [inner, _ring("2MiB")]})
    colls = _collectives(tmp_path, spec)
    assert len(colls) == 3 * 3
    assert list(colls.groupby("step")["iteration"].max()) == [2, 2, 2]
    assert set(colls["comm"]) == {0, 1, 2}  # first 8, last 8, all 16


def test_bad_selector_is_reported_with_its_yaml_line_before_running(tmp_path):
    spec = _spec({"type": "sequence", "steps": [_ring("1MiB"), _ring("1MiB", ranks=[0, 99])]})
    path = write(tmp_path, spec)
    for command in ("validate", "run"):
        result = runner.invoke(app, [command, str(path), *(["--out", str(tmp_path / "out")] * (command == "run"))])
        text = " ".join(result.output.split())
        assert result.exit_code == 2, text
        assert "workload.steps.1.ranks" in text and "out of range" in text and f"{path}:" in text, text
    assert not (tmp_path / "out").exists()


def test_unknown_algorithm_in_a_nested_step_names_its_path(tmp_path):
    inner = {"type": "sequence", "steps": [_ring("1MiB"), {"op": "allreduce", "algorithm": "rnig", "size": "1MiB"}]}
    path = write(tmp_path, _spec({"type": "sequence", "steps": [inner]}))
    result = runner.invoke(app, ["validate", str(path)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "workload.steps.0.steps.1.algorithm" in text and "valid: auto (NCCL's pick by size), direct" in text


def test_plan_assigns_communicators_by_rank_set():
    w = parse_spec(_spec({"type": "sequence", "steps": [_ring("1MiB", ranks="0::2"), _ring("1MiB"),
                                                        _ring("1MiB", ranks=[0, 2, 4, 6, 8, 10, 12, 14])]})).workload
    plan = plan_workload(w, list(range(16)))
    assert [c.comm for c in plan.calls()] == [1, 0, 1]


def test_size_sweep_in_one_sequence_gets_a_busbw_vs_size_dashboard(tmp_path):
    steps = [{"op": "allreduce", "algorithm": a, "size": s} for s in ("4KiB", "1MiB", "16MiB")
             for a in ("ring", "tree")]
    path = write(tmp_path, _spec({"type": "sequence", "ranks": 8, "steps": steps}))
    result = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "res")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "res" / "report.html").read_text()
    assert "Bus bandwidth vs message size" in page and "Slowdown vs ideal" in page
    colls = pd.read_parquet(tmp_path / "res" / "collectives.parquet")
    for _, g in colls.groupby("algorithm"):
        assert g["busbw_Bps"].is_monotonic_increasing and len(g) == 3  # latency amortised as size grows

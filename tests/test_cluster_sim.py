"""Trace-driven cluster runs: the schedulers, placement, extrapolation against full simulation, results."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim.cli import app
from netsim.cluster.scheduler import Waiting, choose
from netsim.config import parse_spec
from netsim.errors import ConfigError
from netsim.experiment import run_experiment
from netsim.experiment.run import build_topology
from netsim.placement import host_domains, make_placement

ROOT = Path(__file__).resolve().parents[1]
BUSY = ROOT / "experiments/traces/busy-small.csv"
runner = CliRunner()

TOPO = {"type": "leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 4, "gpus_per_host": 8, "nics_per_host": 8,
        "nic": {"bandwidth": "400Gbps", "latency": "1us"},
        "uplink": {"bandwidth": "400Gbps", "latency": "500ns", "count": 8},
        "intra_host": {"bandwidth": "450GB/s", "latency": "300ns"}}
HEADER = "job,submit_s,gpus,model,tp,pp,dp,global_batch,iterations\n"


def spec(trace: Path, **cluster) -> dict:
    return {"name": "c", "seed": 1, "topology": TOPO, "placement": {"type": "random", "by": "host"},
            "routing": "ecmp", "cluster": {"trace": str(trace), **cluster}}


def jobs_of(result) -> pd.DataFrame:
    return result.extra["cluster_jobs"].set_index("name")


def trace(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return path


# ---------------------------------------------------------------------------- schedulers
def test_fifo_blocks_behind_a_job_that_does_not_fit():
    q = [Waiting(0, 96, 10.0), Waiting(1, 8, 1.0)]
    assert choose("fifo", q, 64, 0.0, [(5.0, 64)]) == []


def test_backfill_starts_a_job_that_ends_before_the_head_can_start():
    q = [Waiting(0, 96, 10.0), Waiting(1, 32, 4.0), Waiting(2, 32, 6.0)]
    started = choose("backfill", q, 64, 0.0, [(5.0, 64)])
    assert [w.index for w in started] == [1, 2]  # 1 ends by the shadow time (5); 2 uses the spare 32 GPUs


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), min_size=1, max_size=8), free=st.integers(0, 128),
       ends=st.lists(st.tuples(st.floats(0, 100), st.integers(1, 64)), max_size=5),
       kind=st.sampled_from(["fifo", "backfill"]))
def test_schedulers_never_start_more_than_fits_and_fifo_keeps_order(sizes, free, ends, kind):
    q = [Waiting(i, g, float(i + 1)) for i, g in enumerate(sizes)]
    started = choose(kind, q, free, 0.0, ends)
    assert sum(w.gpus for w in started) <= free
    if kind == "fifo":
        assert [w.index for w in started] == list(range(len(started)))
    else:  # backfill never passes over the head when the head fits
        if sizes[0] <= free:
            assert started and started[0].index == 0


# ---------------------------------------------------------------------------- placement
def test_topology_aware_placement_keeps_a_job_under_one_leaf_when_it_can():
    topo = build_topology(parse_spec(spec(BUSY)))
    domain = host_domains(topo)
    rng = np.random.default_rng(0)
    gpus = make_placement("topology").place(32, topo, rng, np.arange(8, 128))
    assert len(set(domain[topo.gpu_host[gpus]].tolist())) == 1 and len(set(gpus.tolist())) == 32
    assert not set(gpus.tolist()) & set(range(8))


# ---------------------------------------------------------------------------- cluster runs
def test_a_job_alone_extrapolates_exactly():
    """One job: its sample is its alone run, so the extrapolated JCT is iterations x that time,
    and the full simulation agrees."""
    r = run_experiment(parse_spec(spec(BUSY, max_jobs=1)))
    f = run_experiment(parse_spec(spec(BUSY, max_jobs=1, mode="full")))
    x, y = jobs_of(r).iloc[0], jobs_of(f).iloc[0]
    assert x["slowdown"] == pytest.approx(1.0, rel=1e-9) and y["slowdown"] == pytest.approx(1.0, rel=1e-9)
    assert x["jct_s"] == pytest.approx(y["jct_s"], rel=1e-9)
    assert x["jct_s"] == pytest.approx(x["iterations"] * x["alone_iteration_s"], rel=1e-9)


def test_a_job_waits_for_the_gpus_and_starts_when_they_free(tmp_path):
    path = trace(tmp_path, ["a,0,128,gpt-3.6b,8,1,16,16,3", "b,0.01,64,gpt-3.6b,8,1,8,8,3"])
    jobs = jobs_of(run_experiment(parse_spec(spec(path))))
    assert jobs.loc["a", "queue_s"] == 0 and jobs.loc["b", "start_s"] == pytest.approx(jobs.loc["a", "end_s"])
    assert jobs.loc["b", "queue_s"] > 0


def test_backfill_lets_a_small_job_run_ahead(tmp_path):
    rows = ["a,0,96,gpt-3.6b,8,1,12,12,4", "b,0.01,64,gpt-3.6b,8,1,8,8,2", "c,0.02,32,gpt-3.6b,8,1,4,4,1"]
    path = trace(tmp_path, rows)
    fifo = jobs_of(run_experiment(parse_spec(spec(path))))
    easy = jobs_of(run_experiment(parse_spec(spec(path, scheduler="backfill"))))
    assert fifo.loc["c", "start_s"] >= fifo.loc["b", "start_s"] > 0
    assert easy.loc["c", "start_s"] == pytest.approx(0.02)  # fits beside a, ends before b can start
    assert easy.loc["b", "start_s"] == pytest.approx(fifo.loc["b", "start_s"])  # the head is not delayed


def _jct_errors(seed: int) -> pd.Series:
    x = jobs_of(run_experiment(parse_spec(spec(BUSY) | {"seed": seed})))
    f = jobs_of(run_experiment(parse_spec(spec(BUSY, mode="full") | {"seed": seed})))
    assert (f["slowdown"] >= 1 - 1e-9).all() and (x["slowdown"] >= 1 - 1e-9).all()
    return (x["jct_s"] / f["jct_s"] - 1).abs()


def test_extrapolation_against_full_simulation_on_the_busy_trace():
    """The documented check (docs/cluster.md), seed 1: the extrapolated JCTs within 2% of the full
    simulation's on average and 5% for the worst job (measured 0.75% and 2.2%)."""
    err = _jct_errors(1)
    assert err.mean() <= 0.02 and err.max() <= 0.05


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
def test_extrapolation_error_on_other_placements(seed):
    """Seeds 2 and 3 (docs/cluster.md): 1.06% / 2.8% and 1.11% / 2.7% (mean / worst job); seed 3's jobs
    lock their DP allreduces in step, which a sample keeps by starting the jobs where they are."""
    err = _jct_errors(seed)
    assert err.mean() <= 0.02 and err.max() <= 0.05


@pytest.mark.slow
def test_extrapolation_error_on_a_random_trace(tmp_path):
    """A trace of ``netsim trace-synth`` (seed 2, not tuned on: 12 data-parallel GPT-3.6B/7.5B jobs of 16
    iterations arriving over 6 s on 128 GPUs, presets with pp 1 and small batches so their gradient
    allreduces contend) measured 3.0% / 6.7% (mean / worst job), short of the 2% / 5% target
    (docs/cluster.md: short epochs of jobs still settling their phases)."""
    from netsim.cluster.synthetic import synthetic_trace
    for name, base, batch in (("dp-3.6b", "gpt-3.6b", 4), ("dp-7.5b", "gpt-7.5b", 16)):
        text = (ROOT / "workloads" / f"{base}.yaml").read_text().replace("global_batch: 32", f"global_batch: {batch}")
        text = re.sub(r"(?m)^parallelism: .*$", "parallelism: {tp: 8, pp: 1, dp: 4}", text)
        (tmp_path / f"{name}.yaml").write_text(text)
    synth = synthetic_trace(12, span_s=6, cluster_gpus=128, size_mix={16: 0.4, 32: 0.4, 64: 0.2},
                            model_mix={"dp-3.6b": 2, "dp-7.5b": 1}, iterations=16, seed=2, preset_dirs=[tmp_path])
    synth.write(tmp_path / "synth.csv")
    x = jobs_of(run_experiment(parse_spec(spec(tmp_path / "synth.csv") | {"seed": 2})))
    f = jobs_of(run_experiment(parse_spec(spec(tmp_path / "synth.csv", mode="full") | {"seed": 2})))
    err = (x["jct_s"] / f["jct_s"] - 1).abs()
    assert err.mean() <= 0.035 and err.max() <= 0.075


# Three leaves of two 4-GPU hosts, one 400G uplink per leaf: two jobs of three hosts each, placed in
# order, both reach leaf 1 and share its uplink.
SHARED_UPLINK = {"type": "leaf_spine", "leaves": 3, "spines": 1, "hosts_per_leaf": 2, "gpus_per_host": 4,
                 "nics_per_host": 4, "nic": {"bandwidth": "400Gbps", "latency": "1us"},
                 "uplink": {"bandwidth": "400Gbps", "latency": "500ns", "count": 1},
                 "intra_host": {"bandwidth": "450GB/s", "latency": "300ns"}}
SHORT_BESIDE_LONG = ["short,0,12,collective:allreduce:ring:128MiB,,,,,300", "long,0,12,gpt-3.6b,4,1,3,3,8"]


def _short_beside_long(tmp_path: Path, mode: str) -> pd.DataFrame:
    d = spec(trace(tmp_path, SHORT_BESIDE_LONG), mode=mode) | {"topology": SHARED_UPLINK, "placement": "sequential"}
    return jobs_of(run_experiment(parse_spec(d)))


def test_a_short_job_beside_a_long_one_is_sampled_over_the_long_ones_whole_iterations(tmp_path):
    """A 5 ms allreduce job beside a training job of 270 ms iterations (mostly compute, then a gradient
    allreduce over the shared uplink): a sample of a few short iterations falls inside the long
    job's compute and reads slowdown 1.00; the full run gives about 2. The sample must span whole
    iterations of the long job."""
    x, f = _short_beside_long(tmp_path, "extrapolate"), _short_beside_long(tmp_path, "full")
    assert f.loc["short", "alone_iteration_s"] < 0.01 < 0.2 < f.loc["long", "alone_iteration_s"]
    assert f.loc["short", "slowdown"] > 1.5
    assert x.loc["short", "slowdown"] == pytest.approx(f.loc["short", "slowdown"], rel=0.02)
    assert x.loc["long", "slowdown"] == pytest.approx(f.loc["long", "slowdown"], rel=0.02)
    assert ((x["jct_s"] / f["jct_s"] - 1).abs() <= 0.02).all()


def test_full_mode_fills_the_cluster_tables(tmp_path):
    """``mode: full`` writes the cluster series (one row per change of the running set, its busy
    GPU-time that of the jobs) and the run's GPU utilisation, as an extrapolated run does."""
    import yaml
    path = trace(tmp_path, SHORT_BESIDE_LONG[:1] + ["long,0.2,12,gpt-3.6b,4,1,3,3,4"])
    utilisation = {}
    for mode in ("full", "extrapolate"):
        cfg, out = tmp_path / f"{mode}.yaml", tmp_path / mode
        cfg.write_text(yaml.safe_dump(spec(path, mode=mode) | {"topology": SHARED_UPLINK, "placement": "sequential"}))
        res = runner.invoke(app, ["run", str(cfg), "--out", str(out), "--no-report"])
        assert res.exit_code == 0, res.output
        jobs = pd.read_parquet(out / "cluster_jobs.parquet")
        series = pd.read_parquet(out / "cluster_series.parquet")
        assert list(series["running"]) == [1, 2, 1] and (series["t_end_s"] > series["t_start_s"]).all()
        busy = (series["busy_gpus"] * (series["t_end_s"] - series["t_start_s"])).sum()
        assert busy == pytest.approx(((jobs["end_s"] - jobs["start_s"]) * jobs["gpus"]).sum(), rel=1e-9)
        assert series["t_end_s"].iat[-1] == pytest.approx(jobs["end_s"].max(), rel=1e-12)
        assert (series["core_mean_util"].iat[1] > 0) and (series["core_mean_util"] <= series["core_peak_util"]).all()
        utilisation[mode] = pd.read_parquet(out / "runs.parquet")["cluster_utilisation"].iat[0]
    assert 0 < utilisation["full"] < 1
    assert utilisation["full"] == pytest.approx(utilisation["extrapolate"], rel=0.02)


def test_cluster_runs_are_deterministic_and_write_their_tables(tmp_path):
    out = tmp_path / "r"
    first = run_experiment(parse_spec(spec(BUSY, max_jobs=4)))
    cfg = tmp_path / "c.yaml"
    import yaml
    cfg.write_text(yaml.safe_dump(spec(BUSY, max_jobs=4)))
    res = runner.invoke(app, ["run", str(cfg), "--out", str(out), "--no-report"])
    assert res.exit_code == 0, res.output
    jobs = pd.read_parquet(out / "cluster_jobs.parquet")
    # the second run is the CLI's (perf: two runs, not three): the same jobs, and its table as run
    pd.testing.assert_frame_equal(first.extra["cluster_jobs"], jobs)
    series = pd.read_parquet(out / "cluster_series.parquet")
    assert len(jobs) == 4 and (series["busy_gpus"] <= 128).all()
    assert (series["t_end_s"] > series["t_start_s"]).all()
    busy = (series["busy_gpus"] * (series["t_end_s"] - series["t_start_s"])).sum()
    assert busy == pytest.approx(((jobs["end_s"] - jobs["start_s"]) * jobs["gpus"]).sum(), rel=1e-9)
    runs = pd.read_parquet(out / "runs.parquet")
    assert runs["cluster_jct_s"].iat[0] == pytest.approx(jobs["jct_s"].mean())


def test_duration_rows_run_the_iterations_that_take_that_long_alone(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("job,submit_s,gpus,model,tp,pp,dp,global_batch,duration_s\na,0,32,gpt-3.6b,8,1,4,4,2.0\n")
    job = jobs_of(run_experiment(parse_spec(spec(path)))).iloc[0]
    # as many as take that long alone on the cluster's first GPUs (known before placement): here one leaf
    compact = jobs_of(run_experiment(parse_spec(spec(path) | {"placement": "sequential"}))).iloc[0]
    assert job["iterations"] == compact["iterations"] == round(2.0 / compact["alone_iteration_s"])


@pytest.mark.parametrize("change, path, message", [
    ({"faults": [{"at": "1ms", "link": "leaf0-spine0", "action": "down"}]}, "faults", "not supported"),
    ({"workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"}}, "cluster",
     "give one of"),
])
def test_bad_cluster_specs(change, path, message):
    with pytest.raises(ConfigError) as err:
        parse_spec(spec(BUSY) | change)
    assert message in err.value.message


def test_a_missing_trace_and_a_job_too_big_exit_2_with_the_file(tmp_path):
    import yaml
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(spec(tmp_path / "nope.csv")))
    res = runner.invoke(app, ["run", str(cfg), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "nope.csv" in res.output and "Traceback" not in res.output
    big = trace(tmp_path, ["a,0,256,gpt-3.6b,8,1,32,32,1"])
    cfg.write_text(yaml.safe_dump(spec(big)))
    res = runner.invoke(app, ["run", str(cfg), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "t.csv:2" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()

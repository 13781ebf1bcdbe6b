"""Dashboards: a report for every shipped experiment (small variants), the link series, `netsim report`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim.cli import app
from netsim.config import load_experiment, parse_spec
from netsim.engine.observers import LinkSeries
from netsim.experiment import read_results, run_experiment, write_results
from netsim.experiment.executors import SerialExecutor
from netsim.experiment.sweep import expand, run_sweep
from netsim.report.dashboard import build_figures, write_report

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

#: ``--set`` overrides that make each shipped experiment small enough for the suite (same features).
JOBS4 = range(4)
SMALL = {
    "ring-allreduce": ["workload.size=1MiB"],
    "ecmp-collisions-256": ["workload.size=1MiB", "topology.leaves=2"],
    "frontier-mini-ring": ["workload.ranks=16", "workload.size=1MiB"],
    "holmes-hetero": ["workload.model.global_batch=4", "workload.model.layers=4", "workload.model.hidden=512",
                      "workload.model.heads=8"],
    "link-failure": ["workload.size=32MB", "workload.channels=1", "engine.ideal=false"],
    "policy-sweep": ["workload.size=1MiB"],
    "rails-concurrent": [],
    "ring-vs-tree": ["workload.ranks=8"],
    "ring-vs-tree-frontier": ["workload.ranks=8"],
    "routes-table": ["workload.size=1MiB"],
    "packets-store-and-forward": ["workload.size=1MiB", "topology.leaves=2"],
    "nccl-protocols": ["topology.gpus_per_host=2", "topology.nics_per_host=2"],
    "validation-nccl-curve": ["topology.gpus_per_host=2", "topology.nics_per_host=1"],
    "validation-planned-paths": ["workload.size=1MiB"],
    "validation-qp-scaling": ["workload.size=1MiB", "topology.leaves=2"],
    "spraying-vs-splitting": ["topology.leaves=2", "workload.ranks=8"],
    "c4p-multijob": ["topology.leaves=4", *[f"jobs.{i}.workload.ranks=16" for i in JOBS4],
                     *[f"jobs.{i}.workload.size=1MiB" for i in JOBS4]],
    "c4p-multijob-training": ["topology.leaves=4",
                              *[f"jobs.{i}.workload.parallelism.dp=2" for i in JOBS4],
                              *[f"jobs.{i}.workload.model.global_batch=2" for i in JOBS4],
                              *[f"jobs.{i}.workload.model.layers=2" for i in JOBS4],
                              *[f"jobs.{i}.iterations=1" for i in JOBS4]],
    "chakra-tp-dp": [],
    "schedule-replay": [],
    "moe-mixtral": ["workload.model.layers=4", "workload.model.global_batch=8", "workload.model.seq_len=512"],
    "moe-skew": ["workload.model.seq_len=256", "workload.model.layers=2"],
    "pipeline-schedules": ["workload.model.layers=8", "workload.model.seq_len=512", "workload.model.global_batch=8"],
    "cluster-c4p": ["cluster.max_jobs=3", "cluster.sample_iterations=2"],
    "cluster-placement": ["cluster.max_jobs=3", "cluster.sample_iterations=2"],
    "detect-c4d": ["detection.trials=6", "workload.iterations=2"],
    "stragglers": ["workload.model.layers=2", "workload.model.hidden=512", "workload.model.heads=8",
                   "workload.model.global_batch=4", "workload.iterations=1"],
    "validation-nccl": ["workload.size=1MiB"],
    "clos3-pods": ["workload.size=1MiB", "topology.pods=2", "workload.channels=1"],
    "hpn-planes": ["workload.size=1MiB", "workload.channels=1"],
    "meta-cross-pod": ["topology.leaves_per_pod=2", *[f"workload.steps.{i}.size=1MiB" for i in range(8)]],
    "meta-llama-placement": ["workload.model.layers=2", "workload.parallelism.pp=2", "workload.model.hidden=512", "workload.model.heads=8",
                             "workload.model.seq_len=256", "workload.model.global_batch=6",
                             "workload.model.vocab=1000"],
    "rail-only-dense": ["workload.size=1MiB", "workload.channels=1"],
    "rail-only-moe": ["workload.model.seq_len=256", "workload.model.hidden=512", "workload.model.heads=8",
                      "workload.moe.expert_hidden=512", "workload.model.vocab=1000", "workload.moe.experts=16",
                      "workload.moe.ep=16"],
    "failures-spray-vs-split": ["workload.size=1MiB", "topology.hosts_per_leaf=1", "topology.gpus_per_host=1",
                                "topology.nics_per_host=1"],
}
# the quickstart's dashboard is checked whole, in a browser, by tests/test_demo.py (its numbers too)
EXPERIMENTS = sorted(p.stem for p in (ROOT / "experiments").glob("*.yaml") if p.stem != "quickstart")


def test_every_shipped_experiment_has_a_small_variant_here():
    assert sorted(SMALL) == EXPERIMENTS


_DONE: dict[str, Path] = {}


def small_results(name: str, out: Path) -> Path:
    """The experiment with its SMALL overrides, one seed and at most two values per swept axis
    (computed once per test session; ``out`` is used the first time)."""
    if name in _DONE:
        return _DONE[name]
    exp = load_experiment(ROOT / "experiments" / f"{name}.yaml", SMALL[name])
    exp.axes = [(keys, values[:2]) for keys, values in exp.axes]
    exp.repeats = 1 if exp.repeats else None
    exp.seeds = exp.seeds[:1] if exp.seeds else None
    planned = expand(exp)
    report = run_sweep(planned, exp, out, SerialExecutor())
    assert report.failed == 0, report.manifest["runs"]
    write_report(out)
    _DONE[name] = out
    return out


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_report_for_every_shipped_experiment(tmp_path, name):
    out = small_results(name, tmp_path / name)
    figs = build_figures(out)
    titles = [f.layout.title.text or "" for f in figs]
    html = (out / "report.html").read_text()
    assert html.count("plotly-graph-div") >= len(figs) and "<details id='manifest'>" in html
    tables = read_results(out)
    # the summary comes first, after the opening answer when variants ran the same work (time against
    # the bound, then why: per-uplink load, collided cables, placements drawn)
    first = next(i for i, t in enumerate(titles) if t.startswith(("Runs and workload steps", "Variants and grid points")))
    assert all(t.startswith(("Time per ", "Why: ")) or ": placement on the fabric" in t for t in titles[:first]), titles
    assert first == 0 or titles[0].startswith("Time per ")
    if len(tables["runs"]) > 1 and first == 0:  # else the opening compares the variants
        assert any(t.startswith(("Collective time by variant", "Training iteration time by variant",
                                 "Mean job completion time by variant")) for t in titles)
    if (tables["jobs"]["kind"] == "training").any():
        assert any("iteration time by part" in t for t in titles)
    if len(tables["link_series"]):
        assert any(t.startswith("Utilisation over time") for t in titles)
    if len(tables.get("fault_costs", [])):
        assert any(t.startswith("Fault costs") for t in titles)
    training = tables["jobs"].loc[tables["jobs"]["kind"] == "training", ["run_id", "job"]]
    colls = tables["collectives"].merge(training, how="left", indicator=True)
    colls = colls[colls["_merge"] == "left_only"]  # a training job's own calls are summarised, not plotted
    if len(colls) and colls.groupby(["op", "algorithm"])["size_bytes"].nunique().max() > 1:
        assert any(t.startswith("Bus bandwidth vs message size") for t in titles)
    assert "src=\"http" not in html and "src='http" not in html  # opens offline: plotly.js is local
    assert "<script src='plotly.min.js'" in html and (out / "plotly.min.js").is_file()  # one copy per folder
    assert (out / "report.html").stat().st_size < 2 * 2**20


def test_spraying_vs_splitting_small_variant_really_is_small():
    exp = load_experiment(ROOT / "experiments/spraying-vs-splitting.yaml", SMALL["spraying-vs-splitting"])
    (run,) = expand(exp)
    assert run.spec.topology.leaves == 2


# ---------------------------------------------------------------------------- the link series


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 2e-3), st.floats(1e-9, 1e-3), st.floats(1, 1e12)),
                min_size=1, max_size=40),
       st.integers(2, 64))
def test_link_series_conserves_bytes_and_respects_the_bin_count(segments, bins):
    series = LinkSeries(bins)
    expected = np.zeros(4)
    horizon = 0.0
    for link, t0, dt, load in sorted(segments, key=lambda s: s[1]):
        series.add(link, t0, t0 + dt, load)
        expected[link] += load * dt
        horizon = max(horizon, t0 + dt)
    cap = np.full(4, 7.0)
    links, starts, util = series.utilisation(cap, horizon)
    assert util.shape == (len(links), len(starts)) and len(starts) <= bins
    widths = np.minimum(starts + series.width, horizon) - starts
    got = np.zeros(4)
    got[links] = (util * widths[None, :] * 7.0).sum(axis=1)
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-9 * expected.max())
    assert horizon <= bins * series.width * (1 + 1e-12)  # every byte landed inside the bins


def test_link_series_matches_link_bytes_and_is_off_at_zero(tmp_path):
    spec = {"name": "s", "seed": 2, "topology": {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                                                  "gpus_per_host": 2, "nics_per_host": 2,
                                                  "nic": {"bandwidth": "100Gbps"}, "uplink": {"bandwidth": "100Gbps"},
                                                  "intra_host": {"bandwidth": "1TB/s"}},
            "placement": {"type": "random", "by": "host"},
            "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "8MiB",
                         "channels": 2}, "engine": {"link_series": 16}}
    r = run_experiment(parse_spec(spec))
    t = read_results(write_results([r], tmp_path / "on"))
    s, links = t["link_series"], t["links"]
    assert s["t_start_s"].nunique() <= 16 and s["t_end_s"].max() == pytest.approx(r.sim_time_s)
    carried = (s["util"] * (s["t_end_s"] - s["t_start_s"])).groupby(s["link_id"]).sum()
    cap = links.set_index("link_id")["capacity_Bps"]
    bytes_ = links.set_index("link_id")["bytes"]
    assert np.allclose((carried * cap[carried.index]).to_numpy(), bytes_[carried.index].to_numpy(), rtol=1e-9)
    assert set(links.loc[links["bytes"] > 0, "link_id"]) == set(s["link_id"])
    assert s["util"].max() <= 1 + 1e-9
    off = run_experiment(parse_spec({**spec, "engine": {"link_series": 0}}))
    assert off.collectives[0].duration_s == r.collectives[0].duration_s  # recording changes nothing
    assert read_results(write_results([off], tmp_path / "off"))["link_series"].empty


# ---------------------------------------------------------------------------- netsim report


def test_netsim_report_command(tmp_path):
    out = tmp_path / "qs"
    result = runner.invoke(app, ["run", str(ROOT / "experiments/ring-allreduce.yaml"), "--out", str(out),
                                 "--set", "workload.size=1MiB", "--no-report"])
    assert result.exit_code == 0 and not (out / "report.html").exists()
    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0 and (out / "report.html").stat().st_size < 2 * 2**20  # plotly.js shared
    assert (out / "plotly.min.js").is_file()
    result = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "elsewhere.html")])
    assert result.exit_code == 0 and (tmp_path / "elsewhere.html").is_file()
    for bad, words in ((["report", str(tmp_path / "nothing")], "not a results directory"),
                       (["report", str(out), "--out", str(tmp_path / "no" / "r.html")], "does not exist")):
        result = runner.invoke(app, bad)
        assert result.exit_code == 2 and words in result.output and "Traceback" not in result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spec"]["workload"]["size"] == 2**20


def test_topology_drawing_is_coloured_by_utilisation_and_aggregated_when_large(tmp_path):
    out = small_results("ring-allreduce", tmp_path / "q")
    titles = [f.layout.title.text for f in build_figures(out)]
    (drawing,) = [f for f in build_figures(out) if "cables by peak utilisation" in (f.layout.title.text or "")]
    names = [tr.name for tr in drawing.data if tr.name]
    assert any(n.startswith("cables") for n in names)
    assert len(titles) == len(set(titles))
    big = small_results("frontier-mini-ring", tmp_path / "f")  # 8 groups x 32 switches: too large to draw
    big_titles = [f.layout.title.text or "" for f in build_figures(big)]
    assert not any("cables by peak utilisation" in t for t in big_titles)
    (heat,) = [f for f in build_figures(big) if "global cables between groups" in (f.layout.title.text or "")]
    assert len(heat.data[0].y) == len(heat.data[0].x) == 8  # group x group


def test_sweep_report_groups_by_variant_with_intervals(tmp_path):
    out = small_results("policy-sweep", tmp_path / "ps")
    figs = build_figures(out)
    summary = figs[0]
    header = tuple(h.replace("<b>", "").replace("</b>", "").replace("<br>", "") for h in summary.data[0].header.values)
    assert header[:3] == ("variant", "topology.spines", "topology.uplink.count") or list(header[:3]) == [
        "variant", "topology.spines", "topology.uplink.count"]
    bars = [f for f in figs if (f.layout.title.text or "").startswith("Collective time by variant")]
    assert bars and all(tr.error_y is not None for tr in bars[0].data)
    runs = pd.read_parquet(out / "runs.parquet")
    assert set(runs["variant"]) == {"ecmp", "split-4", "c4p"}

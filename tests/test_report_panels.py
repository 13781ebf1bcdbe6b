"""Dashboards never mislead (issue 24): human units, titled headers, panels that fit the workload, one
shared plotly.js per results folder, a fabric view that stays readable when the fabric is large."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from typer.testing import CliRunner

from netsim.cli import app
from netsim.experiment.metrics import METRICS
from netsim.report.dashboard import build_figures
from netsim.report.display import human_bandwidth, human_size, human_time
from netsim.report.fabric_view import block_heatmap
from netsim.topology import LINK_KINDS, leaf_spine

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
TWO_MB = 2 * 2**20

#: case -> CLI arguments of ``netsim run`` (small versions of shipped experiments).
RUNS = {
    # three calls: per-call charts (a single call is a number in the summary table, not a one-bar chart)
    "collective": [str(ROOT / "experiments/ring-allreduce.yaml"), "--set", "workload.size=4MB",
                   "--set", "workload.iterations=3"],
    "training": [str(ROOT / "experiments/holmes-hetero.yaml"), "--variant", "holmes",
                 "--set", "workload.model.global_batch=4", "--set", "workload.model.layers=4",
                 "--set", "workload.model.hidden=512", "--set", "workload.model.heads=8"],
    "faults": [str(ROOT / "experiments/link-failure.yaml"), "--variant", "ecmp", "--set", "workload.size=32MB",
               "--set", "workload.channels=1", "--set", "engine.ideal=false"],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    built: dict[str, Path] = {}

    def get(case: str) -> Path:
        if case not in built:
            out = tmp_path_factory.mktemp(case) / "results"
            result = runner.invoke(app, ["run", *RUNS[case], "--out", str(out)])
            assert result.exit_code == 0, result.output
            built[case] = out
        return built[case]

    return get


def _titles(figs: list[go.Figure]) -> list[str]:
    return [f.layout.title.text or "" for f in figs]


def _headers(figs: list[go.Figure]) -> list[str]:
    return [h.replace("<b>", "").replace("</b>", "").replace("<br>", "") for f in figs for t in f.data
            if isinstance(t, go.Table) for h in t.header.values]


# ---------------------------------------------------------------------------- units


@pytest.mark.parametrize(("size", "text"), [(4e6, "4 MB"), (4 * 2**20, "4 MiB"), (256 * 2**20, "256 MiB"),
                                            (1e9, "1 GB"), (2**30, "1 GiB"), (1536, "1.5 KiB"), (0, "0 B"),
                                            (1, "1 B"), (25e9 / 3, "8.333 GB")])
def test_a_size_keeps_the_unit_family_it_is_exact_in(size, text):
    assert human_size(size) == text


def test_bandwidths_and_times_are_human():
    assert human_bandwidth(25e9) == "200 Gbps" and human_bandwidth(50e9 * 32) == "12.8 Tbps"
    assert human_time(9.365e-3) == "9.365 ms" and human_time(4.684e-3) == "4.684 ms"


def test_the_size_the_user_wrote_comes_back(results):
    figs = build_figures(results("collective"))
    table = figs[0].data[0]
    headers = [h.replace("<b>", "").replace("</b>", "") for h in table.header.values]
    sizes = table.cells.values[headers.index("message size")]
    assert set(sizes) == {"4 MB"}  # not 3.815MiB


def test_table_headers_are_titles_not_column_names(results):
    for case in RUNS:
        headers = _headers(build_figures(results(case)))
        assert headers
        raw = [h for h in headers if h in METRICS or h.endswith(("_s", "_Bps", "_bytes")) or "_" in h]
        assert not raw, f"{case}: raw column names as headers: {raw}"
    summary = build_figures(results("collective"))[0]
    headers = _headers([summary])
    busbw = summary.data[0].cells.values[headers.index("bus bandwidth")]
    assert all(v.endswith((" Gbps", " Tbps")) for v in busbw)  # not bytes/s


def test_the_manifest_is_collapsed_and_in_human_units(results):
    page = (results("collective") / "report.html").read_text()
    manifest = html.unescape(page[page.index("<details id='manifest'>"):])
    assert manifest.index("<summary>") < manifest.index("<pre>")
    assert "200 Gbps" in manifest and "25000000000" not in manifest  # the NIC bandwidth, not bytes/s
    assert '"size": "4 MB"' in manifest and '"latency": "1 us"' in manifest


# ---------------------------------------------------------------------------- panels fit the workload


def test_a_collective_run_shows_time_and_bandwidth_against_the_ideal(results):
    out = results("collective")
    figs = build_figures(out)
    titles = _titles(figs)
    (time,) = [f for f in figs if f.layout.title.text == "Collective time per call vs ideal (ms)"]
    (bw,) = [f for f in figs if f.layout.title.text.startswith("Algorithm and bus bandwidth per call vs ideal")]
    colls = pd.read_parquet(out / "collectives.parquet")
    names = {t.name: t for t in bw.data}
    assert set(names) == {"algorithm bandwidth", "bus bandwidth", "bus bandwidth at the ideal time"}
    expected = colls["busbw_Bps"] * colls["duration_s"] / colls["ideal_s"] / (1e9 / 8)
    assert np.allclose(names["bus bandwidth at the ideal time"].y, expected)
    assert np.allclose(time.data[0].y, colls["duration_s"] * 1e3)
    assert not any(t.startswith("Timeline") for t in titles)  # no faults, no timeline


def test_a_training_run_shows_iteration_time_exposed_comms_and_slowdown_not_busbw(results):
    out = results("training")
    figs = build_figures(out)
    titles = _titles(figs)
    assert any(t.startswith("Training iteration time by part: compute and exposed communication") for t in titles)
    text = " ".join(titles + _headers(figs) + [str(t.name) for f in figs for t in f.data]).lower()
    assert "bus bandwidth" not in text and "busbw" not in text
    # one job: its slowdown is a number in the jobs table, not a one-bar chart
    assert not any(t.startswith("Per-job slowdown") for t in titles)
    jobs = pd.read_parquet(out / "jobs.parquet")
    (table,) = [f for f in figs if f.data[0].type == "table" and "slowdown" in " ".join(f.data[0].header.values)]
    column = next(i for i, h in enumerate(table.data[0].header.values) if "slowdown" in h)
    assert [float(v) for v in table.data[0].cells.values[column]] == pytest.approx(list(jobs["slowdown"]), rel=1e-3)
    (parts,) = [f for f in figs if "exposed communication" in f.layout.title.text]
    assert {t.name for t in parts.data} >= {"exposed TP", "exposed PP", "exposed DP"}


def test_a_run_with_a_fault_has_a_timeline(results):
    figs = build_figures(results("faults"))
    (timeline,) = [f for f in figs if (f.layout.title.text or "").startswith("Timeline")]
    calls, faults = timeline.data
    assert list(faults.x) == [pytest.approx(0.5)] and "leaf0-spine0 down" in faults.text[0]
    colls = pd.read_parquet(results("faults") / "collectives.parquet")
    assert list(calls.base) == pytest.approx(list(colls["start_s"] * 1e3))


# ---------------------------------------------------------------------------- plotly.js once per folder


def test_one_shared_plotly_js_and_small_reports(results, tmp_path):
    out = results("collective")
    page = (out / "report.html").read_text()
    assert (out / "report.html").stat().st_size < TWO_MB
    assert "<script src='plotly.min.js'" in page and (out / "plotly.min.js").stat().st_size > 3_000_000
    assert "plotly.min.js" in json.loads((out / "manifest.json").read_text())["files"]
    result = runner.invoke(app, ["report", str(out), "--self-contained"])
    assert result.exit_code == 0, result.output
    inlined = (out / "report.html").read_text()
    assert (out / "report.html").stat().st_size > 3_000_000 and "<script src=" not in inlined
    elsewhere = tmp_path / "elsewhere.html"
    assert runner.invoke(app, ["report", str(out), "--out", str(elsewhere)]).exit_code == 0
    assert "<script src=" not in elsewhere.read_text() and not (tmp_path / "plotly.min.js").exists()
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0  # back to the shared copy
    assert (out / "report.html").stat().st_size < TWO_MB


def test_a_plotly_js_netsim_did_not_write_is_never_touched(tmp_path):
    out = tmp_path / "res"
    args = ["run", *RUNS["collective"], "--out", str(out), "--no-report"]
    assert runner.invoke(app, args).exit_code == 0
    (out / "plotly.min.js").write_text("// the user's own file")
    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "plotly.min.js").read_text() == "// the user's own file"
    assert "<script src=" not in (out / "report.html").read_text()  # inlined instead
    assert "plotly.min.js" not in json.loads((out / "manifest.json").read_text())["files"]
    result = runner.invoke(app, ["run", *RUNS["collective"], "--out", str(out), "--force"])
    assert result.exit_code == 0, result.output
    assert (out / "plotly.min.js").read_text() == "// the user's own file"
    assert "<script src=" not in (out / "report.html").read_text()
    assert "plotly.min.js" not in json.loads((out / "manifest.json").read_text())["files"]


def test_a_sweep_folder_holds_one_plotly_js(tmp_path):
    from tests.test_report_grid import THREE_KEYS
    (tmp_path / "s.yaml").write_text(THREE_KEYS.replace("repeats: 3", "repeats: 1"))
    out = tmp_path / "sweep"
    result = runner.invoke(app, ["sweep", str(tmp_path / "s.yaml"), "--executor", "serial", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.rglob("plotly*.js")) == ["plotly.min.js"]
    assert (out / "report.html").stat().st_size < TWO_MB
    files = json.loads((out / "manifest.json").read_text())["files"]
    assert {"plotly.min.js", "report.html"} <= set(files)
    assert runner.invoke(app, ["sweep", str(tmp_path / "s.yaml"), "--executor", "serial", "--out", str(out),
                               "--force", "--no-report"]).exit_code == 0
    assert not (out / "plotly.min.js").exists()  # netsim's own file, replaced with the rest by --force


# ---------------------------------------------------------------------------- the fabric, large


def test_a_large_fabric_is_a_leaf_by_spine_heatmap():
    topo = leaf_spine(leaves=16, spines=16, hosts_per_leaf=4, gpus_per_host=1, nics_per_host=1,
                      nic_bandwidth_Bps=50e9, uplink_bandwidth_Bps=50e9, intra_bandwidth_Bps=900e9,
                      uplinks_per_spine=2)
    util = np.random.default_rng(0).random(len(topo.links))
    fig = block_heatmap(topo, util)
    (heat,) = fig.data
    z = np.array(heat.z, dtype=float)
    assert z.shape == (16, 16) and list(heat.y)[:2] == ["leaf0", "leaf1"] and list(heat.x)[:2] == ["spine0", "spine1"]
    expected = np.zeros((16, 16))
    for lk in range(len(topo.links)):
        kind = LINK_KINDS[topo.links.kind[lk]]
        if kind in ("up", "down"):
            a, b = topo.node_name(int(topo.links.src[lk])), topo.node_name(int(topo.links.dst[lk]))
            leaf, spine = (a, b) if kind == "up" else (b, a)
            i, j = int(leaf.removeprefix("leaf")), int(spine.removeprefix("spine"))
            expected[i, j] = max(expected[i, j], util[lk])
    assert np.allclose(z, expected)


def test_a_large_three_tier_clos_shows_its_core_tier_beside_the_leaf_spine_tier():
    """100k GPUs must stay readable: each tier is its own heatmap of at most MAX_CELLS blocks a side, and
    a block's value is the busiest cable in it (the spine-core tier included)."""
    from netsim.report.fabric_view import MAX_CELLS
    from netsim.topology.clos3 import clos3
    from netsim.topology.nic import generic_nic
    topo = clos3(pods=4, leaves_per_pod=32, spines_per_pod=8, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1,
                 nic=generic_nic(50e9), uplink_bandwidth_Bps=50e9, cores=16, core_bandwidth_Bps=50e9,
                 core_wiring="mesh", intra_bandwidth_Bps=900e9)
    util = np.zeros(len(topo.links))
    hot = next(lk for lk in range(len(topo.links)) if LINK_KINDS[topo.links.kind[lk]] == "core_down"
               and topo.node_name(int(topo.links.dst[lk])) == "pod3.spine7")
    util[hot] = 0.9
    fig = block_heatmap(topo, util)
    leaf_tier, core_tier = fig.data
    assert np.array(leaf_tier.z, dtype=float).shape == (MAX_CELLS, 32)  # 128 leaves binned, 32 spines
    z = np.array(core_tier.z, dtype=float)
    assert z.shape == (32, 16) and list(core_tier.y)[-1] == "pod3.spine7"
    core = topo.node_name(int(topo.links.src[hot]))
    assert z[31, list(core_tier.x).index(core)] == 0.9 and np.nansum(z) == 0.9
    assert "spine-core" in fig.layout.title.text


def test_the_dashboard_aggregates_a_16_by_16_fabric_and_draws_a_small_one(tmp_path, results):
    out = tmp_path / "big"
    args = ["run", str(ROOT / "experiments/ring-allreduce.yaml"), "--set", "workload.size=1MiB",
            "--set", "topology.leaves=16", "--set", "topology.spines=16", "--set", "topology.hosts_per_leaf=1",
            "--set", "topology.gpus_per_host=1", "--set", "topology.nics_per_host=1", "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    titles = _titles(build_figures(out))
    assert any("peak utilisation of the leaf-spine cables" in t for t in titles)
    assert not any("cables by peak utilisation" in t for t in titles)
    small = _titles(build_figures(results("collective")))
    assert any("cables by peak utilisation" in t for t in small)

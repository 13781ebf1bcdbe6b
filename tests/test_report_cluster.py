"""Dashboards of trace-driven cluster runs: a summary per variant, CDFs of slowdown, JCT and queueing
delay, busy GPUs and core load over time; the collective panels (empty tables) are left out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
from typer.testing import CliRunner

from netsim.cli import app
from netsim.experiment import read_results
from netsim.report.cluster_panels import SUMMARY
from netsim.report.dashboard import build_figures, write_report
from netsim.report.display import human_time
from tests.test_report_browser import artifacts, browser, open_report  # noqa: F401 - fixtures

runner = CliRunner()
GPUS = 32  # 4 leaves x 1 host x 8 GPUs

#: Three 8-GPU jobs share the fabric (GPUs placed at random), a 16-GPU job waits for one of them.
TRACE = """job,submit_s,gpus,model,iterations
a,0,8,collective:allreduce:ring:16MiB,10
b,0,8,collective:allreduce:ring:16MiB,20
c,0,8,collective:allreduce:ring:16MiB,5
d,0.001,16,collective:allreduce:ring:16MiB,10
"""
EXPERIMENT = """name: tiny-cluster
seed: 0
topology: {{type: leaf_spine, leaves: 4, spines: 2, hosts_per_leaf: 1, gpus_per_host: 8, nics_per_host: 8,
           nic: {{bandwidth: 400Gbps, latency: 1us}}, uplink: {{bandwidth: 400Gbps, latency: 500ns, count: 1}},
           intra_host: {{bandwidth: 450GB/s, latency: 300ns}}}}
placement: {{type: random}}
routing: ecmp
cluster: {{trace: {trace}, scheduler: fifo}}
variants: [{{name: ecmp}}, {{name: c4p, routing: c4p}}]
"""


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("cluster")
    (where / "trace.csv").write_text(TRACE)
    (where / "exp.yaml").write_text(EXPERIMENT.format(trace=where / "trace.csv"))
    return where / "exp.yaml"


@pytest.fixture(scope="module")
def results(experiment) -> Path:
    """Both variants, extrapolated."""
    out = experiment.parent / "sweep"
    result = runner.invoke(app, ["run", str(experiment), "--out", str(out), "--no-report"])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def single(experiment) -> Path:
    """One variant, every iteration simulated (``mode: full`` records no epochs)."""
    out = experiment.parent / "single"
    result = runner.invoke(app, ["run", str(experiment), "--variant", "ecmp", "--set", "cluster.mode=full",
                                 "--out", str(out), "--no-report"])
    assert result.exit_code == 0, result.output
    return out


def _titled(figs: list[go.Figure], start: str) -> go.Figure:
    (fig,) = [f for f in figs if (f.layout.title.text or "").startswith(start)]
    return fig


def _cells(fig: go.Figure) -> dict[str, list[str]]:
    table = fig.data[0]
    headers = [h.replace("<b>", "").replace("</b>", "").replace("<br>", "") for h in table.header.values]
    return dict(zip(headers, [list(c) for c in table.cells.values]))


def _not_empty(fig: go.Figure) -> bool:
    """A table with rows, or a chart with a trace of more than one point."""
    return any((len(t.cells.values[0]) > 0) if isinstance(t, go.Table)
               else len(t.x if t.x is not None else t.y if t.y is not None else []) > 1 for t in fig.data)


def test_the_summary_is_what_pandas_computes_from_the_tables(results):
    t = read_results(results)
    jobs, runs = t["cluster_jobs"], t["runs"]
    figs = build_figures(results)
    cells = _cells(_titled(figs, "Cluster runs per variant"))
    assert cells["variant"] == ["ecmp", "c4p"] and cells["seeds"] == ["1", "1"]
    for i, variant in enumerate(cells["variant"]):
        j = jobs[jobs["variant"] == variant]
        assert cells["jobs"][i] == str(len(j)) == "4"
        assert cells["mean JCT"][i] == human_time(j["jct_s"].mean())
        assert cells["p95 JCT"][i] == human_time(float(np.percentile(j["jct_s"], 95)))
        assert cells["mean queueing delay"][i] == human_time(j["queue_s"].mean())
        assert cells["mean slowdown vs alone"][i] == f"{j['slowdown'].mean():.3f}"
        assert cells["p95 slowdown vs alone"][i] == f"{np.percentile(j['slowdown'], 95):.3f}"
        busy = (j["gpus"] * (j["end_s"] - j["start_s"])).sum()
        utilisation = busy / (j["end_s"].max() * GPUS)
        assert cells["GPU utilisation"][i] == f"{utilisation:.1%}"
        # the same number as the run metric of the sweep summary
        metric = runs.loc[runs["variant"] == variant, "cluster_utilisation"]
        if len(metric) and metric.notna().all():
            assert utilisation == pytest.approx(float(metric.iloc[0]), rel=1e-9)
    assert [h for h, _k in SUMMARY.values()] == list(cells)[2:]


def test_slowdown_jct_and_queueing_are_cdfs_per_variant(results):
    jobs = read_results(results)["cluster_jobs"]
    figs = build_figures(results)
    for start, column in (("Per-job slowdown", "slowdown"), ("Job completion time", "jct_s"),
                          ("Queueing delay", "queue_s")):
        fig = _titled(figs, start)
        assert [tr.name for tr in fig.data] == ["ecmp", "c4p"]
        for tr in fig.data:
            values = np.sort(jobs.loc[jobs["variant"] == tr.name, column].to_numpy())
            assert list(tr.x) == pytest.approx(list(values))
            assert list(tr.y) == pytest.approx([0.25, 0.5, 0.75, 1.0])
            assert tr.line.shape == "hv"


def test_busy_gpus_and_core_load_over_time_are_step_lines_per_variant(results):
    series = read_results(results)["cluster_series"]
    figs = build_figures(results)
    for start, column in (("Busy GPUs over time", "utilisation"), ("Core-link load over time", "core_mean_util")):
        fig = _titled(figs, start)
        assert [tr.name for tr in fig.data] == ["ecmp", "c4p"]
        for tr in fig.data:
            s = series[series["variant"] == tr.name].sort_values("t_start_s")
            assert list(tr.x) == pytest.approx([*s["t_start_s"], s["t_end_s"].iloc[-1]])
            assert list(tr.y) == pytest.approx([*s[column], s[column].iloc[-1]])
            assert tr.line.shape == "hv"
            running_waiting = [tuple(c[:2]) for c in tr.customdata[:-1]]
            assert running_waiting == list(zip(s["running"], s["waiting"]))


def test_no_collective_panel_and_no_empty_chart(results, single):
    for out in (results, single):
        figs = build_figures(out)
        titles = [f.layout.title.text or "" for f in figs]
        assert all(_not_empty(f) for f in figs), titles
        assert not any(t.startswith(("Collective time per call", "Bus bandwidth vs message size", "Jobs",
                                     "Training iteration time by part")) for t in titles)
        # extrapolated runs record no messages; ``mode: full`` does, and its messages are charted
        assert any(t.startswith("Message completion time") for t in titles) == bool(len(read_results(out)["flows"]))
        write_report(out)
        html = (out / "report.html").read_text()
        assert html.count("plotly-graph-div") >= len(figs)


def test_a_single_full_run_leads_with_its_cluster_summary_and_has_its_timeline(single):
    """``mode: full`` records its series too (a row per change of the running or waiting jobs), so the
    report draws its timelines."""
    t = read_results(single)
    assert len(t["cluster_series"]) >= 2 and len(t["runs"]) == 1
    figs = build_figures(single)
    titles = [f.layout.title.text or "" for f in figs]
    assert titles[0].startswith("Runs and workload steps (cluster)")
    assert any(title.startswith("Busy GPUs over time") for title in titles)
    assert any(title.startswith("Core-link load over time") for title in titles)
    cells = _cells(figs[0])
    j = t["cluster_jobs"]
    busy = (j["gpus"] * (j["end_s"] - j["start_s"])).sum()
    assert cells["GPU utilisation"] == [f"{busy / (j['end_s'].max() * GPUS):.1%}"]
    assert cells["variant"] == ["ecmp"]


def test_a_cdf_of_equal_values_is_left_out(results):
    """No chart draws a single value: equal queueing delays (all 0) are the summary's number only."""
    from netsim.report.cluster_panels import distribution_figures
    jobs = read_results(results)["cluster_jobs"]
    label = dict(zip(jobs["run_id"], jobs["variant"]))
    figs = distribution_figures(jobs.assign(queue_s=0.0, slowdown=1.0 + 1e-13 * np.arange(len(jobs))), label)
    assert [f.layout.title.text.split(":")[0] for f in figs] == ["Job completion time (submit to end)"]


@pytest.mark.parametrize("case", ["sweep", "single"])
def test_the_cluster_report_renders_in_chromium(case, results, single, browser, artifacts):  # noqa: F811
    """As ``tests/test_report_browser.py`` checks every other report kind (skipped without Chromium)."""
    out = {"sweep": results, "single": single}[case]
    write_report(out)
    expected = len(build_figures(out))
    shot = artifacts / f"report-cluster-{case}.png"
    shot.unlink(missing_ok=True)
    seen = open_report(browser, out / "report.html", expected, screenshot=shot)
    problems = seen.problems(expected)
    assert not problems, "cluster report.html in Chromium:\n  " + "\n  ".join(problems)
    assert shot.is_file() and shot.stat().st_size > 10_000

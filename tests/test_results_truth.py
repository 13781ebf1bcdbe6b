"""Results never claim the impossible: calls faster than their bound are flagged everywhere users look,
and no infinity or NaN reaches a results file (a value that does not apply is missing: null)."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim.cli import app
from netsim.collectives import CollectiveRecord
from netsim.config import parse_spec
from netsim.experiment import read_results, run_experiment, write_results
from tests.test_cli import small_spec, write

runner = CliRunner()
TABLES = ("runs", "collectives", "flows", "links", "jobs", "iterations", "link_series")


def _record(duration, bound, slack):
    return CollectiveRecord(job=0, iteration=0, op="allreduce", algorithm="ring", size_bytes=1.0, n_ranks=2,
                            channels=1, start_s=0.0, end_s=duration, bound_s=bound, slack_s=slack)


def test_below_bound_allows_the_tolerance_but_never_more_than_a_millionth():
    assert not _record(1.0, 1.0, 0.0).below_bound
    assert not _record(1.0 - 1e-10, 1.0, 0.0).below_bound      # float noise
    assert _record(1.0 - 1e-8, 1.0, 0.0).below_bound
    assert not _record(1.0 - 5e-7, 1.0, 1e-6).below_bound      # within the engine's tolerance
    assert _record(1.0 - 5e-6, 1.0, 1e-3).below_bound          # a tolerance too coarse to excuse it


def test_a_coarse_tolerance_that_beats_the_bound_is_flagged_in_every_place(tmp_path):
    spec = small_spec(**{"workload.size": "64KiB", "placement": "random", "engine.completion_tolerance": "1us"})
    spec["topology"].update(leaves=4, spines=4, hosts_per_leaf=4)
    spec["model"] = "fluid"  # one message a ring step, no per-message cost: calls short enough to beat the bound
    out = tmp_path / "res"
    result = runner.invoke(app, ["run", str(write(tmp_path, spec)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "faster than their provable lower bound" in text and "completion_tolerance (1us)" in text
    tables = read_results(out)
    colls = tables["collectives"]
    assert colls["below_bound"].any() and (colls["duration_s"] < colls["bound_s"]).any()
    assert tables["runs"]["below_bound_calls"].iloc[0] == colls["below_bound"].sum() >= 1
    assert "id='below-bound'" in (out / "report.html").read_text()


def test_the_default_tolerance_is_not_flagged(tmp_path):
    spec = small_spec(**{"workload.size": "64KiB", "placement": "random"})
    spec["topology"].update(leaves=4, spines=4, hosts_per_leaf=4)
    out = tmp_path / "res"
    result = runner.invoke(app, ["run", str(write(tmp_path, spec)), "--out", str(out)])
    assert result.exit_code == 0 and "lower bound" not in result.output
    assert not read_results(out)["collectives"]["below_bound"].any()
    assert "below-bound" not in (out / "report.html").read_text()


def test_a_tolerance_above_a_microsecond_is_refused(tmp_path):
    result = runner.invoke(app, ["run", str(write(tmp_path, small_spec(**{"engine.completion_tolerance": "10us"})))])
    assert result.exit_code == 2 and "engine.completion_tolerance" in result.output and "1us" in result.output


def _assert_finite_files(out):
    for name in TABLES:
        df = pd.read_parquet(out / f"{name}.parquet")
        for col in df.columns:
            if df[col].dtype.kind == "f":
                assert not np.isinf(df[col].to_numpy()).any(), f"{name}.{col} holds inf"
    json.loads((out / "manifest.json").read_text(), parse_constant=lambda c: pytest.fail(f"manifest has {c}"))


WORKLOADS = st.sampled_from([
    {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"},
    {"type": "collective", "op": "allreduce", "algorithm": "tree", "size": "1KiB"},
    {"type": "collective", "op": "allgather", "algorithm": "ring", "size": "1B"},
    {"type": "collective", "op": "reduce_scatter", "algorithm": "ring", "size": "3B", "ranks": 2},
    {"type": "sequence", "mode": "concurrent", "steps": [
        {"op": "allreduce", "algorithm": "ring", "size": "2MiB", "ranks": "0::4"},
        {"op": "allreduce", "algorithm": "ring", "size": "2MiB", "ranks": "1::4"}]},
])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(workload=WORKLOADS, routing=st.sampled_from(["ecmp", "spray", "c4p", "ethereal"]),
       placement=st.sampled_from(["sequential", "random"]), ideal=st.booleans(), congestion=st.booleans(),
       bins=st.sampled_from([0, 1, 128]), records=st.booleans())
def test_no_infinity_or_nan_reaches_a_results_file(tmp_path_factory, workload, routing, placement, ideal, congestion,
                                                    bins, records):
    spec = small_spec(workload=workload, routing=routing, placement=placement,
                      engine={"ideal": ideal, "congestion": congestion, "link_series": bins, "record_flows": records})
    out = write_results([run_experiment(parse_spec(spec))], tmp_path_factory.mktemp("r") / "res")
    _assert_finite_files(out)


def test_an_infinity_is_never_written(tmp_path, monkeypatch):
    from netsim.experiment import results
    real = results.runs_frame

    def broken(rs):
        df = real(rs)
        df["collective_time_s"] = math.inf
        return df

    monkeypatch.setattr(results, "runs_frame", broken)
    result = runner.invoke(app, ["run", str(write(tmp_path, small_spec())), "--out", str(tmp_path / "res")])
    assert result.exit_code == 2 and "runs.collective_time_s holds an infinite value" in result.output
    assert not (tmp_path / "res").exists()

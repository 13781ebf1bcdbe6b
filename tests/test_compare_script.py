"""benchmarks/compare.py: the comparison of two results directories (no experiment is run here)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("bench_compare", ROOT / "benchmarks" / "compare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _results(directory: Path, *, scale: float = 1.0, run_ids=("aaa", "bbb"), wall_s: float = 1.0,
             extra: dict | None = None, flow_ids=None) -> Path:
    """A tiny results directory: two runs (a sweep of variants x and y), three messages each."""
    directory.mkdir()
    runs = pd.DataFrame({"run_id": list(run_ids), "variant": ["x", "y"], "seed": [1, 1],
                         "routing.type": ["ecmp", "spray"], "workload.size": [1024.0, 1024.0],
                         "collective_time_s": np.array([2.5e-3, 1.25e-3]) * scale,
                         "below_bound_calls": [0, 0], "iteration_time_s": [np.nan, np.nan],
                         "wall_s": [wall_s, wall_s], "events": [10, 12], **(extra or {})})
    runs.to_parquet(directory / "runs.parquet", index=False)
    flows = pd.DataFrame({"run_id": [run_ids[0]] * 3 + [run_ids[1]] * 3,
                          "flow_id": flow_ids if flow_ids is not None else [0, 1, 2, 0, 1, 2],
                          "connection": ["0>1#0", "1>0#0", "0>1#0"] * 2, "job": [0] * 6,
                          "size_bytes": [512.0] * 6,
                          "start_s": [0.0, 0.0, 0.0] * 2,
                          "end_s": np.array([1e-3, 1.5e-3, 2.5e-3, 1e-3, 1.25e-3, 1.2e-3]) * scale})
    flows.to_parquet(directory / "flows.parquet", index=False)
    return directory


def test_equal_within_1e_12_passes(compare, tmp_path):
    before = _results(tmp_path / "before")
    after = _results(tmp_path / "after", scale=1 + 1e-12, wall_s=9.0)  # wall_s is ignored
    result = compare.compare_results(before, after)
    assert result.ok, result.failures
    assert result.runs == 2 and result.rows == 2 + 6
    assert 0 < result.max_rel < 1e-11
    assert result.worst in ("runs.collective_time_s", "flows.end_s")
    assert "wall_s" in compare.IGNORED_COLUMNS and "events" in compare.IGNORED_COLUMNS


def test_off_by_1e_6_fails_naming_the_column(compare, tmp_path):
    before = _results(tmp_path / "before")
    after = _results(tmp_path / "after", scale=1 + 1e-6)
    result = compare.compare_results(before, after)
    assert not result.ok
    assert result.max_rel == pytest.approx(1e-6, rel=1e-3)
    assert any(f.startswith("runs.collective_time_s") for f in result.failures)
    assert any(f.startswith("flows.end_s") for f in result.failures)
    assert compare.compare_results(before, after, rtol=1e-5).ok


def test_runs_matched_by_order_and_flows_by_connection(compare, tmp_path):
    before = _results(tmp_path / "before")
    # another spec hash, and flows numbered in another order: the same results
    after = _results(tmp_path / "after", run_ids=("ccc", "ddd"), flow_ids=[5, 3, 4, 2, 0, 1])
    result = compare.compare_results(before, after)
    assert result.ok, result.failures
    assert any("run ids differ" in n for n in result.notes)


def test_near_zero_values_use_the_absolute_tolerance(compare):
    rel = compare.relative_differences(np.array([0.0, 1.0, np.nan, np.nan]),
                                       np.array([1e-16, 1.0, np.nan, 2.0]), 1e-15)
    assert list(rel[:3]) == [0.0, 0.0, 0.0] and np.isinf(rel[3])


def test_columns_on_one_side_are_notes_unless_strict(compare, tmp_path):
    before = _results(tmp_path / "before")
    after = _results(tmp_path / "after", extra={"engine.backend": [None, None]})
    assert compare.compare_results(before, after).ok
    assert any("engine.backend" in n for n in compare.compare_results(before, after).notes)
    assert not compare.compare_results(before, after, strict=True).ok


def test_missing_rows_and_misaligned_runs_fail(compare, tmp_path):
    before = _results(tmp_path / "before")
    after = _results(tmp_path / "after")
    pd.read_parquet(after / "flows.parquet").iloc[:-1].to_parquet(after / "flows.parquet", index=False)
    assert any("1 rows only before" in f for f in compare.compare_results(before, after).failures)
    runs = pd.read_parquet(after / "runs.parquet").assign(run_id=["p", "q"], variant=["y", "x"])
    runs.to_parquet(after / "runs.parquet", index=False)
    assert any("do not line up" in f for f in compare.compare_results(before, after).failures)


def test_a_run_failed_on_one_side_fails_and_its_rows_are_left_out(compare, tmp_path):
    before = _results(tmp_path / "before")
    after = _results(tmp_path / "after")
    runs = pd.read_parquet(after / "runs.parquet").assign(status=["ok", "failed"])
    runs.loc[1, "collective_time_s"] = np.nan
    runs.to_parquet(after / "runs.parquet", index=False)
    flows = pd.read_parquet(after / "flows.parquet")
    flows[flows["run_id"] == "aaa"].to_parquet(after / "flows.parquet", index=False)
    result = compare.compare_results(before, after)
    assert result.failures == ["runs: run bbb (variant y, seed 1) failed after only"]
    assert result.runs == 1 and result.rows == 1 + 3

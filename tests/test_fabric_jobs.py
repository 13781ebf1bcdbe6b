"""Multi-job mixes and the trace-driven cluster on every fabric family of issue 29 (three-tier Clos,
multi-plane, rail-only): every policy runs them and every job finishes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from netsim.cli import app

ROOT = Path(__file__).resolve().parents[1]
FABRICS = {
    "rail-only": {"from": str(ROOT / "topologies/rail-only-128.yaml"), "hosts_per_leaf": 8},
    "clos3": {"from": str(ROOT / "topologies/meta-24k.yaml"), "pods": 2, "leaves_per_pod": 2,
              "core": {"switches": 2}},
    "dual-plane": {"from": str(ROOT / "topologies/hpn-pod.yaml"), "leaves": 4, "spines": 4, "hosts_per_leaf": 2},
}


def _run(tmp_path, data) -> Path:
    path, out = tmp_path / "exp.yaml", tmp_path / "out"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out), "--no-report"])
    assert result.exit_code == 0, result.output
    runs = pd.read_parquet(out / "runs.parquet")
    assert (runs["status"] == "ok").all()
    return out


@pytest.mark.parametrize("fabric", sorted(FABRICS))
def test_a_trace_driven_cluster_runs_every_job_under_every_placement(tmp_path, fabric):
    out = _run(tmp_path, {
        "name": "cluster", "seed": 2, "topology": FABRICS[fabric], "routing": "ecmp",
        "cluster": {"trace": str(ROOT / "experiments/traces/hetero-small.csv"), "scheduler": "fifo"},
        "variants": [{"name": p, "placement": p} for p in ("sequential", "topology", "holmes")]
        + [{"name": "random", "placement": {"type": "random", "by": "host"}}]})
    jobs = pd.read_parquet(out / "cluster_jobs.parquet")
    trace = pd.read_csv(ROOT / "experiments/traces/hetero-small.csv", comment="#")
    assert jobs.groupby("run_id").size().eq(len(trace)).all() and jobs["end_s"].notna().all()
    assert (jobs["end_s"] > jobs["start_s"]).all()


@pytest.mark.parametrize("fabric", sorted(FABRICS))
def test_concurrent_jobs_run_under_every_routing_policy(tmp_path, fabric):
    ring = {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "4MB", "channels": 2, "ranks": 16}
    out = _run(tmp_path, {
        "name": "jobs", "seed": 1, "topology": FABRICS[fabric], "placement": {"type": "random", "by": "host"},
        "routing": "ecmp", "jobs": [{"name": "a", "workload": ring}, {"name": "b", "workload": ring}],
        "variants": [{"name": r, "routing": r} for r in ("ecmp", "spray", "c4p", "ethereal")]})
    calls = pd.read_parquet(out / "collectives.parquet")
    assert calls.groupby("run_id")["job"].nunique().eq(2).all()
    assert (calls["duration_s"] >= calls["bound_s"] * (1 - 1e-9)).all()

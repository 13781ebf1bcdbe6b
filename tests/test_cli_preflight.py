"""The pre-flight estimate at the command line: runs above --max-memory are refused before anything is built."""

import pandas as pd
from typer.testing import CliRunner

from netsim.cli import app
from tests.test_cli import small_spec, write

runner = CliRunner()


def test_a_run_above_the_limit_is_refused_before_anything_is_built(tmp_path):
    path = write(tmp_path, small_spec())
    result = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "res"), "--max-memory", "100MiB"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "above the 100 MiB limit; raise it with --max-memory" in text
    assert not (tmp_path / "res").exists()
    assert runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "res")],
                         env={"NETSIM_MAX_MEMORY": "100MiB"}).exit_code == 2
    assert runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "res"), "--max-memory", "2GiB"]).exit_code == 0


def test_a_million_hosts_are_refused_at_the_default_limit(tmp_path):
    spec = small_spec()
    spec["topology"].update(leaves=1000, hosts_per_leaf=1000, gpus_per_host=1, nics_per_host=1)
    result = runner.invoke(app, ["run", str(write(tmp_path, spec)), "--out", str(tmp_path / "res")])
    assert result.exit_code == 2 and "above the 16 GiB limit" in " ".join(result.output.split())


def test_bad_max_memory_is_one_message(tmp_path):
    result = runner.invoke(app, ["run", str(write(tmp_path, small_spec())), "--max-memory", "lots"])
    assert result.exit_code == 2 and "--max-memory: cannot parse 'lots' as a size" in " ".join(result.output.split())


def test_validate_prints_the_estimate_and_refuses_above_the_limit(tmp_path):
    path = write(tmp_path, small_spec())
    ok = runner.invoke(app, ["validate", str(path)])
    assert ok.exit_code == 0 and "pre-flight: a run would need 4 hosts, 16 GPUs" in " ".join(ok.output.split())
    assert runner.invoke(app, ["validate", str(path), "--max-memory", "1MiB"]).exit_code == 2


def test_a_sweep_records_runs_over_the_limit_as_failed_and_runs_the_others(tmp_path):
    spec = small_spec()
    spec["variants"] = [{"name": "small"}, {"name": "huge", "topology": {"leaves": 1000, "hosts_per_leaf": 1000,
                                                                       "gpus_per_host": 1, "nics_per_host": 1}}]
    out = tmp_path / "res"
    result = runner.invoke(app, ["sweep", str(write(tmp_path, spec)), "--out", str(out), "--executor", "serial",
                                 "--no-report"])
    assert result.exit_code == 1 and "1 of 2 runs need more memory than the limit" in " ".join(result.output.split())
    runs = pd.read_parquet(out / "runs.parquet").set_index("variant")
    assert runs.loc["small", "status"] == "ok" and runs.loc["huge", "status"] == "failed"
    assert "above the 16 GiB limit" in runs.loc["huge", "error"]


def test_sweep_workers_are_fewer_when_the_largest_runs_would_not_fit_together(tmp_path):
    spec = small_spec()
    spec["seeds"] = [1, 2]
    result = runner.invoke(app, ["sweep", str(write(tmp_path, spec)), "--out", str(tmp_path / "res"), "--workers", "2",
                                 "--max-memory", "700MiB", "--no-report"])
    assert result.exit_code == 0, result.output
    assert "running 1 at a time" in " ".join(result.output.split())


def test_validate_prints_the_time_estimate_beside_the_memory(tmp_path):
    ok = runner.invoke(app, ["validate", str(write(tmp_path, small_spec()))])
    line = " ".join(ok.output.split())
    assert ok.exit_code == 0 and " MiB and " in line and line.rstrip().endswith(" s")


def test_a_run_estimated_over_ten_minutes_says_so_before_it_starts(tmp_path, monkeypatch):
    from netsim.experiment import walltime
    path = write(tmp_path, small_spec())
    quick = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "a"), "--no-report"])
    assert quick.exit_code == 0 and "may take" not in quick.output
    monkeypatch.setattr(walltime, "LONG_RUN_S", 0.5)  # the small spec is estimated at a few seconds
    slow = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "b"), "--no-report"])
    text = " ".join(slow.output.split())
    assert slow.exit_code == 0 and "pre-flight: this run may take about" in text and "it starts now" in text
    spec = small_spec()
    spec["seeds"] = [1, 2]
    sweep = runner.invoke(app, ["sweep", str(write(tmp_path, spec)), "--out", str(tmp_path / "c"), "--executor",
                                "serial", "--no-report"])
    assert sweep.exit_code == 0 and "2 of 2 runs may take over 0 s each" in " ".join(sweep.output.split())

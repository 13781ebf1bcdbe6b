"""Sweeps survive faults: a dead or raising worker fails only its run, workers never outlive the
driver (Ctrl-C, SIGTERM, SIGKILL), and ``--resume`` redoes runs whose files are damaged.

The end-to-end cases run ``python -m netsim.cli sweep`` in a session of its own, so that signals
reach it (and its process group) as from a terminal. Runs are the 8-GPU fabric of test_sweep.py
(milliseconds); a "medium" run has 64 GPUs (about a second) and a "slow" one 128 (over ten seconds,
and always killed long before it ends).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from netsim.experiment.executors import LocalExecutor, Lost, SerialExecutor
from tests.test_sweep import TABLES, invoke, normalized, read_tables, write_exp

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and PR_SET_PDEATHSIG")

FAST = {"topology.leaves": 2, "topology.hosts_per_leaf": 2, "topology.gpus_per_host": 2}
SLOW = {"topology.leaves": 8, "topology.hosts_per_leaf": 4, "topology.gpus_per_host": 4}


def points_exp(tmp_path: Path, first: dict, fast: int) -> Path:
    """An experiment whose first run is ``first`` (a fabric size) and then ``fast`` fast runs (sizes 1..fast MiB)."""
    points = [first] + [FAST] * fast
    sizes = ["1MiB"] + [f"{i}MiB" for i in range(1, fast + 1)]
    return write_exp(tmp_path, sweep={"zip": {**{k: [p[k] for p in points] for k in FAST}, "workload.size": sizes}})


def start_sweep(path: Path, out: Path, *extra: str) -> subprocess.Popen:
    """``netsim sweep`` in a new session (its own process group), as a user would start it."""
    return subprocess.Popen([sys.executable, "-m", "netsim.cli", "sweep", str(path), "--out", str(out),
                             "--no-report", *extra], start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_interactive)


def _interactive() -> None:
    """In the child: SIGINT as in a terminal's foreground job. A test run started in the background by
    a shell (nohup, CI) inherits SIGINT ignored, and netsim rightly keeps ignoring it then."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_dirs(out: Path) -> list[str]:
    """Run ids with a run.json under ``out/runs``."""
    return sorted(p.parent.name for p in (out / "runs").glob("*/run.json")) if (out / "runs").is_dir() else []


def wait_for(condition, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def busy_worker(driver: int) -> int:
    """The one worker of ``driver`` that is computing (its CPU time grows) while the others wait."""
    for _ in range(50):
        kids = children(driver)
        before = {k: cpu_ticks(k) for k in kids}
        time.sleep(0.3)
        grew = [k for k in kids if cpu_ticks(k) > before[k]]
        if len(grew) == 1:
            return grew[0]
    raise AssertionError("no single busy worker")


def alive_in_group(pgid: int) -> list[int]:
    """Processes of process group ``pgid`` that still run (zombies are dead: nobody may reap them here)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


# =========================================================================== the pool


def crash_or_raise(x: int) -> int:
    """x * 10, except 3 (exits), 4 (killed by SIGKILL) and 5 (raises)."""
    if x == 3:
        os._exit(7)
    if x == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    if x == 5:
        raise ValueError("five")
    return x * 10


def test_a_dead_or_raising_worker_loses_only_its_item_and_is_replaced():
    lost = {}

    def on_lost(item, why):
        lost[item] = why
        return -item

    # one worker: the items after each death ran, so the worker was replaced
    results = list(LocalExecutor(1).map(crash_or_raise, range(8), on_lost=on_lost))
    assert sorted(results) == sorted([0, 10, 20, -3, -4, -5, 60, 70])
    assert str(lost[3]) == "the worker process died (exit status 7)" and lost[3].died
    assert str(lost[4]) == "the worker process died (killed by signal 9, SIGKILL)" and lost[4].died
    assert str(lost[5]) == "ValueError: five" and not lost[5].died
    assert 'raise ValueError("five")' in lost[5].traceback
    assert multiprocessing.active_children() == []
    # two workers, no on_lost: the lost item raises, and the workers are stopped
    with pytest.raises(Lost, match="the worker process died"):
        list(LocalExecutor(2).map(crash_or_raise, [0, 1, 3, 6]))
    assert multiprocessing.active_children() == []
    # the consumer stops early: closing the iterator stops the workers
    outcomes = LocalExecutor(2).map(crash_or_raise, range(3))
    assert next(outcomes) in (0, 10, 20)
    outcomes.close()
    assert multiprocessing.active_children() == []
    # the serial executor reports an item that raises in the same way
    assert list(SerialExecutor().map(crash_or_raise, [1, 5, 2], on_lost=lambda item, why: str(why))) == \
        [10, "ValueError: five", 20]


def test_a_dask_worker_that_dies_fails_only_its_item():
    dask = pytest.importorskip("dask")
    from netsim.experiment.executors import DaskExecutor
    lost = {}
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):  # no retries: quick
        results = list(DaskExecutor(workers=2).map(crash_or_raise, [1, 3, 5, 2],
                                                   on_lost=lambda item, why: lost.setdefault(item, why)))
    assert len(results) == 4
    assert lost[3].died
    assert str(lost[3]) == "the worker process died (every Dask worker that ran it died: KilledWorker)"
    assert str(lost[5]) == "ValueError: five" or lost[5].died
    # the others gave their results; but Dask gives up, too, on a task that waited on the worker that died
    for x in (1, 2):
        assert (x * 10 in results) if x not in lost else lost[x].died


# =========================================================================== end to end


def test_killing_a_worker_fails_its_run_and_the_sweep_finishes_the_others(tmp_path):
    path = points_exp(tmp_path, SLOW, fast=4)
    out = tmp_path / "out"
    driver = start_sweep(path, out, "--workers", "2")
    try:
        wait_for(lambda: len(run_dirs(out)) == 4, what="the fast runs")  # the slow run goes on in one worker
        os.kill(busy_worker(driver.pid), signal.SIGKILL)
        _, stderr = driver.communicate(timeout=60)
    finally:
        driver.kill()
    assert driver.returncode == 1, stderr  # some runs failed
    runs = pd.read_parquet(out / "runs.parquet")
    assert len(runs) == 5 and "Traceback" not in stderr
    failed = runs[runs.status == "failed"]
    assert len(failed) == 1 and failed.iloc[0]["topology.leaves"] == 8  # the slow run, and only it
    error = "the worker process died (killed by signal 9, SIGKILL) while running this run"
    assert failed.iloc[0].error == error and error in stderr
    assert (runs[runs.status != "failed"].status == "ok").all()
    m = manifest(out)
    assert m["status"] == "failed" and m["counts"] == {"planned": 5, "ok": 4, "failed": 1, "missing": 0}
    assert [r["error"] for r in m["runs"] if r["status"] == "failed"] == [error]
    assert not list((out / "runs").glob(".*"))  # nothing half-written left behind


@pytest.mark.parametrize("signum, code, word", [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143, "terminated")])
def test_an_interrupted_sweep_stops_its_workers_keeps_its_runs_and_resumes(tmp_path, signum, code, word):
    # the slow run keeps one worker busy while the other finishes fast runs: the signal always lands mid-sweep
    path = points_exp(tmp_path, SLOW, fast=5)
    out = tmp_path / "out"
    driver = start_sweep(path, out, "--workers", "2")
    pgid = driver.pid
    try:
        wait_for(lambda: len(run_dirs(out)) >= 2, what="two finished runs")
        if signum == signal.SIGINT:
            os.killpg(pgid, signum)  # Ctrl-C: the terminal signals the whole foreground group
        else:
            os.kill(driver.pid, signum)  # kill PID: the driver alone
        _, stderr = driver.communicate(timeout=30)
    finally:
        driver.kill()
    assert driver.returncode == code, stderr
    last = stderr.strip().splitlines()[-1]
    assert "Traceback" not in stderr
    finished = run_dirs(out)
    assert 2 <= len(finished) < 6
    assert last == (f"{word}: {out} holds the {len(finished)} of 6 runs that finished (manifest status: "
                    "interrupted); --resume continues the sweep")
    time.sleep(0.2)
    assert alive_in_group(pgid) == []
    m = manifest(out)
    assert m["status"] == "interrupted" and m["counts"]["ok"] == len(finished)
    assert sorted(r["run_id"] for r in m["runs"] if r["status"] == "ok") == finished
    assert sorted(pd.read_parquet(out / "runs.parquet").run_id) == finished

    result = subprocess.run([sys.executable, "-m", "netsim.cli", "sweep", str(path), "--out", str(out),
                             "--no-report", "--workers", "2", "--resume"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"6 ok, 0 failed, {len(finished)} already done" in " ".join(result.stdout.split())
    assert manifest(out)["status"] == "complete" and len(run_dirs(out)) == 6


def test_workers_die_with_a_killed_driver(tmp_path):
    path = points_exp(tmp_path, SLOW, fast=1)
    out = tmp_path / "out"
    driver = start_sweep(path, out, "--workers", "2")
    try:
        wait_for(lambda: len(run_dirs(out)) == 1, what="the fast run")
        workers = children(driver.pid)
        assert workers and all(w in alive_in_group(driver.pid) for w in workers)
        driver.kill()
        driver.wait(timeout=10)
        wait_for(lambda: alive_in_group(driver.pid) == [], timeout=5, what="the workers to die")
    finally:
        driver.kill()
        for pid in alive_in_group(driver.pid):
            os.kill(pid, signal.SIGKILL)
    assert manifest(out)["status"] == "running"  # nothing could say otherwise


# =========================================================================== resume with damaged files


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A 3-run sweep, written cleanly."""
    tmp = tmp_path_factory.mktemp("clean")
    path = write_exp(tmp, sweep={"workload.size": ["1MiB", "2MiB", "3MiB"]})
    out = tmp / "out"
    result = invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report")
    assert result.exit_code == 0, result.output
    return path, out


def _garbage(f: Path) -> None:
    f.write_bytes(b"\x00{not json")


def _truncate(f: Path) -> None:
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _empty(f: Path) -> None:
    f.write_bytes(b"")


def _array(f: Path) -> None:
    f.write_text("[]")


@pytest.mark.parametrize("name, damage", [
    ("run.json", _garbage), ("run.json", _truncate), ("run.json", _empty), ("run.json", _array),
    ("runs.parquet", _truncate), ("links.parquet", _empty), ("collectives.parquet", _garbage),
])
def test_resume_redoes_a_run_whose_files_are_damaged(clean, tmp_path, name, damage):
    path, reference = clean
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    victim = sorted(p.name for p in (out / "runs").iterdir())[1]
    damage(out / "runs" / victim / name)
    _truncate(out / "runs.parquet")  # a damaged top-level table is simply written again
    kept = {f: f.stat().st_mtime_ns for f in (out / "runs").glob("*/*") if f.parent.name != victim}
    result = invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report", "--resume")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"run {victim} is redone: runs/{victim}/{name}" in text
    assert "3 ok, 0 failed, 2 already done" in text
    assert all(f.stat().st_mtime_ns == m for f, m in kept.items())  # the other runs were not touched
    m = manifest(out)
    assert m["status"] == "complete" and m["counts"]["ok"] == 3
    assert [d["run_id"] for d in m["damaged"]] == [victim] and name in m["damaged"][0]["problem"]
    ta, tb = read_tables(reference), read_tables(out)
    for table in TABLES:
        assert_frame_equal(normalized(ta[table], table), normalized(tb[table], table), obj=table)


def test_resume_refuses_a_directory_whose_manifest_is_corrupt(clean, tmp_path):
    path, reference = clean
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    _truncate(out / "manifest.json")
    before = {f: f.stat().st_mtime_ns for f in out.rglob("*")}
    result = invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report", "--resume")
    assert result.exit_code == 2 and "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert f"{out / 'manifest.json'} is corrupt" in text
    assert {f: f.stat().st_mtime_ns for f in out.rglob("*")} == before
    assert "--force starts over" in text
    # --force starts over: netsim's own file names go, a file the user added stays
    (out / "my-notes.txt").write_text("mine")
    (out / "runs" / "not-a-run").mkdir()
    result = invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report", "--force")
    assert result.exit_code == 0, result.output
    assert manifest(out)["status"] == "complete" and (out / "my-notes.txt").read_text() == "mine"
    assert (out / "runs" / "not-a-run").is_dir()
    ta, tb = read_tables(reference), read_tables(out)
    for table in TABLES:
        assert_frame_equal(normalized(ta[table], table), normalized(tb[table], table), obj=table)

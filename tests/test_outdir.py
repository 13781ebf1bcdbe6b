"""Results directories are netsim's own: what it refuses, what --force removes, what an interruption leaves."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netsim.cli import app
from netsim.experiment import outdir
from netsim.experiment.outdir import OutputError, Staging, claim, inspect, remove_owned
from tests.test_cli import small_spec, write

runner = CliRunner()


def _netsim_dir(path: Path, kind: str = "run", files=("runs.parquet", "report.html"), **extra) -> Path:
    path.mkdir(parents=True)
    for f in files:
        (path / f).write_text("netsim's")
    (path / "manifest.json").write_text(json.dumps({"netsim_version": "0", "kind": kind, "name": "x",
                                                    "files": ["manifest.json", *files], **extra}))
    return path


# ---------------------------------------------------------------------------- claim


def test_claim_accepts_new_and_empty_directories(tmp_path):
    assert claim(tmp_path / "new" / "deeper", "run").state == "absent"
    (tmp_path / "empty").mkdir()
    assert claim(tmp_path / "empty", "run").state == "empty"


@pytest.mark.parametrize("setup, words", [
    (lambda p: p.write_text("mine"), "is a file"),
    (lambda p: (p.mkdir(), (p / "thesis.tex").write_text("x")), "not a netsim results directory"),
    (lambda p: (p.mkdir(), (p / "manifest.json").write_text("{broken")), "corrupt"),
    (lambda p: (p.mkdir(), (p / "manifest.json").write_text('{"name": "not netsim"}')), "not a netsim manifest"),
])
def test_claim_refuses_what_netsim_did_not_write(tmp_path, setup, words):
    target = tmp_path / "out"
    setup(target)
    with pytest.raises(OutputError, match=words):
        claim(target, "run", force=True)


def test_claim_refuses_a_path_under_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="is a file, not a directory"):
        claim(tmp_path / "f" / "sub" / "out", "run")


@pytest.mark.parametrize("rel", [".", "..", "../.."])
def test_claim_refuses_the_working_directory_and_its_ancestors(tmp_path, monkeypatch, rel):
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    with pytest.raises(OutputError, match="current directory or one that contains it"):
        claim(Path(rel), "run", force=True)


def test_claim_of_an_existing_netsim_directory_needs_force_or_resume(tmp_path):
    run_dir = _netsim_dir(tmp_path / "run")
    sweep_dir = _netsim_dir(tmp_path / "sweep", kind="sweep")
    with pytest.raises(OutputError, match="--force replaces them"):
        claim(run_dir, "run")
    with pytest.raises(OutputError, match="--resume continues it"):
        claim(sweep_dir, "sweep")
    assert claim(run_dir, "run", force=True).state == "netsim"
    assert claim(sweep_dir, "sweep", resume=True).state == "netsim"
    with pytest.raises(OutputError, match="--resume continues a sweep"):
        claim(run_dir, "sweep", resume=True)


# ---------------------------------------------------------------------------- removing and replacing


def test_remove_owned_removes_only_what_the_manifest_lists(tmp_path):
    d = _netsim_dir(tmp_path / "r", files=("runs.parquet",))
    (d / "runs" / "abc").mkdir(parents=True)
    (d / "runs" / "abc" / "part.parquet").write_text("x")
    (d / "runs" / "mine").mkdir()
    (d / "notes.txt").write_text("mine")
    (tmp_path / "outside.txt").write_text("mine")
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["files"] += ["runs/abc", "../outside.txt", "/etc/hostname", "notes-that-never-existed.txt"]
    remove_owned(d, manifest)
    assert sorted(p.name for p in d.iterdir()) == ["notes.txt", "runs"]
    assert [p.name for p in (d / "runs").iterdir()] == ["mine"]
    assert (tmp_path / "outside.txt").read_text() == "mine"


def test_older_manifests_without_a_files_list_own_the_documented_names(tmp_path):
    d = tmp_path / "old"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps({"netsim_version": "0.1.0", "kind": "sweep", "runs": [
        {"run_id": "aaa"}]}))
    for name in ("runs.parquet", "report.html", "mine.csv"):
        (d / name).write_text("x")
    (d / "runs" / "aaa").mkdir(parents=True)
    (d / "runs" / "bbb").mkdir()
    remove_owned(d, json.loads((d / "manifest.json").read_text()))
    assert sorted(p.name for p in d.rglob("*")) == ["bbb", "mine.csv", "runs"]


def test_staging_commits_the_manifest_last_and_keeps_user_files(tmp_path):
    target = _netsim_dir(tmp_path / "res", files=("runs.parquet", "flows.parquet"))
    (target / "notes.txt").write_text("mine")
    staging = Staging(target, claim(target, "run", force=True))
    (staging.path / "runs.parquet").write_text("new")
    staging.commit({"netsim_version": "1", "kind": "run", "name": "x"})
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["files"] == ["manifest.json", "runs.parquet"]
    assert sorted(p.name for p in target.iterdir()) == ["manifest.json", "notes.txt", "runs.parquet"]
    assert (target / "runs.parquet").read_text() == "new" and (target / "notes.txt").read_text() == "mine"
    assert not list(tmp_path.glob(".res.*"))


def test_an_aborted_staging_leaves_nothing(tmp_path):
    staging = Staging(tmp_path / "res", claim(tmp_path / "res", "run"))
    (staging.path / "runs.parquet").write_text("half")
    staging.abort()
    assert list(tmp_path.iterdir()) == []


def test_stale_staging_directories_of_dead_processes_are_cleared(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / ".res.netsim-tmp-old"
    stale.mkdir()
    (stale / ".netsim-staging").write_text(dead)
    foreign = tmp_path / ".res.netsim-tmp-foreign"  # no marker: not recognisably netsim's
    foreign.mkdir()
    Staging(tmp_path / "res", claim(tmp_path / "res", "run")).abort()
    assert not stale.exists() and foreign.exists()


# ---------------------------------------------------------------------------- through the CLI, with sentinels


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A working directory with sentinel files in it, in results/, its parent and a sibling."""
    cwd = tmp_path / "parent" / "cwd"
    (cwd / "results").mkdir(parents=True)
    (tmp_path / "parent" / "sibling").mkdir()
    sentinels = [tmp_path / "parent" / "p.txt", cwd / "c.txt", cwd / "results" / "r.txt",
                 tmp_path / "parent" / "sibling" / "s.txt"]
    for s in sentinels:
        s.write_text("mine")
    monkeypatch.chdir(cwd)
    yield cwd
    assert all(s.read_text() == "mine" for s in sentinels)


@pytest.mark.parametrize("name", [".", "..", "../sibling", "~", "a/b", ".hidden"])
def test_a_name_that_is_a_path_is_refused(sandbox, name):
    result = runner.invoke(app, ["run", str(write(sandbox, small_spec(name=name)))])
    assert result.exit_code == 2 and "name" in result.output, result.output


@pytest.mark.parametrize("out", [".", "..", "../sibling", "results", "c.txt", "c.txt/sub"])
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_an_out_that_is_not_netsims_is_refused_before_running(sandbox, out, command):
    spec = small_spec()
    if command == "sweep":
        spec["seeds"] = [1, 2]
    result = runner.invoke(app, [command, str(write(sandbox, spec)), "--out", out, "--force"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output) < 2048


def test_run_again_is_refused_and_force_keeps_the_users_files(sandbox):
    path = write(sandbox, small_spec())
    assert runner.invoke(app, ["run", str(path), "--out", "res"]).exit_code == 0
    (sandbox / "res" / "my-notes.txt").write_text("mine")
    before = (sandbox / "res" / "runs.parquet").stat().st_mtime_ns
    again = runner.invoke(app, ["run", str(path), "--out", "res"])
    assert again.exit_code == 2 and "--force" in again.output
    assert (sandbox / "res" / "runs.parquet").stat().st_mtime_ns == before
    forced = runner.invoke(app, ["run", str(path), "--out", "res", "--force"])
    assert forced.exit_code == 0, forced.output
    assert (sandbox / "res" / "my-notes.txt").read_text() == "mine"
    assert json.loads((sandbox / "res" / "manifest.json").read_text())["status"] == "complete"


def test_an_interrupted_run_writes_nothing(sandbox, monkeypatch):
    from netsim.experiment import results

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(results, "write_tables", interrupted)
    result = runner.invoke(app, ["run", str(write(sandbox, small_spec())), "--out", "res"])
    assert result.exit_code == 130 and "interrupted: no results were written" in result.output
    assert not (sandbox / "res").exists() and not list(sandbox.glob(".res*"))


# ---------------------------------------------------------------------------- operating-system errors


def test_disk_full_while_writing_is_one_message_and_leaves_nothing(sandbox, monkeypatch):
    import pandas as pd

    def full(self, path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    result = runner.invoke(app, ["run", str(write(sandbox, small_spec())), "--out", "res"])
    assert result.exit_code == 2 and "no space left on the device" in result.output, result.output
    assert not (sandbox / "res").exists() and not list(sandbox.glob(".res*"))


def _mount(target: Path, options: str) -> bool:
    target.mkdir()
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True).returncode
    return ok == 0


@pytest.fixture
def mounts(tmp_path):
    made = []

    def mount(name: str, options: str) -> Path:
        target = tmp_path / name
        if os.geteuid() != 0 or not _mount(target, options):
            pytest.skip("mounting a tmpfs needs root and CAP_SYS_ADMIN (the in-process ENOSPC test covers the logic)")
        made.append(target)
        return target

    yield mount
    for target in made:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def test_a_real_full_disk_and_a_read_only_file_system(sandbox, mounts):
    path = write(sandbox, small_spec())
    tiny = mounts("tiny", "size=64k")
    result = runner.invoke(app, ["run", str(path), "--out", str(tiny / "res")])
    assert result.exit_code == 2 and "no space left" in result.output, result.output
    assert list(tiny.iterdir()) == []
    ro = mounts("ro", "ro,size=1m")
    for command in (["run", str(path)], ["sweep", str(path), "--param", "seed=[1,2]"]):
        result = runner.invoke(app, [*command, "--out", str(ro / "res")])
        assert result.exit_code == 2 and "read-only" in result.output, result.output


def test_os_error_messages_name_the_path_and_the_reason():
    exc = OSError(errno.EACCES, "Permission denied", "/x/y")
    assert str(outdir.os_error(exc, "write")) == "cannot write /x/y: permission denied"
    assert "disk quota" in str(outdir.os_error(OSError(errno.EDQUOT, "q"), "write", "/q"))


def test_inspect_lists_a_few_foreign_entries(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for i in range(6):
        (d / f"f{i}").write_text("x")
    found = inspect(d)
    assert found.state == "foreign" and "f0, f1, f2, f3 and 2 more" in found.detail

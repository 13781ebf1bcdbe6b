"""The CLI's manners (issue 24): --version, YAML --param values, did-you-mean, Ctrl-C, progress, show,
exit statuses and the experiment file's JSON Schema."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import netsim
from netsim import cli
from netsim.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_version_prints_the_installed_distribution_version():
    result = runner.invoke(app, ["--version"])
    dists = metadata.packages_distributions()["netsim"]
    assert result.exit_code == 0, result.output
    assert result.output == f"netsim {metadata.version(dists[0])}\n"
    done = subprocess.run([sys.executable, "-m", "netsim", "--version"], capture_output=True, text=True, cwd=ROOT,
                          check=False)
    assert done.returncode == 0 and done.stdout == result.output and not done.stderr


def test_version_comes_from_the_distribution_that_ships_the_package(monkeypatch):
    # the docs rename the distribution (pyproject's name): the import name finds it all the same
    monkeypatch.setattr(metadata, "packages_distributions", lambda: {"netsim": ["netsim-renamed"]})
    monkeypatch.setattr(metadata, "version", lambda dist: {"netsim-renamed": "7.7.7"}[dist])
    assert cli.version() == "7.7.7"
    assert runner.invoke(app, ["--version"]).output == "netsim 7.7.7\n"


def test_version_falls_back_to_the_package_attribute_without_metadata(monkeypatch):
    monkeypatch.setattr(metadata, "packages_distributions", dict)
    monkeypatch.setattr(netsim, "__version__", "9.8.7")
    assert cli.version() == "9.8.7"
    # a distribution name that metadata no longer knows (renamed, not reinstalled) falls back too
    monkeypatch.setattr(metadata, "packages_distributions", lambda: {"netsim": ["no-such-dist-xyz"]})
    assert cli.version() == "9.8.7"


# ---------------------------------------------------------------------------- --param takes YAML values

BASE = {
    "name": "tiny", "seed": 3,
    "topology": {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 2,
                 "nics_per_host": 1, "nic": {"bandwidth": "100Gbps", "latency": "1us"},
                 "uplink": {"bandwidth": "100Gbps", "latency": "500ns"},
                 "intra_host": {"bandwidth": "900GB/s", "latency": "300ns"}},
    "placement": "random", "routing": "ecmp",
    "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"},
}


def write_exp(tmp_path: Path, name: str = "exp.yaml", **extra) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({**BASE, **extra}, sort_keys=False))
    return path


def test_param_values_are_yaml_and_a_comma_never_splits_one(tmp_path):
    from netsim.config import load_experiment, parse_param
    from netsim.experiment.sweep import expand
    assert parse_param("topology.spines=[2,4]") == ("topology.spines", [2, 4])
    assert parse_param("topology.spines=4") == ("topology.spines", [4])
    assert parse_param("description=a,b,c") == ("description", ["a,b,c"])
    assert parse_param("workload.size=[[1, 2]]") == ("workload.size", [[1, 2]])
    path = write_exp(tmp_path)
    # a routing policy with options is one value of the axis, swept as a whole
    runs = expand(load_experiment(path, params=["routing={type: split, ways: 4}"]))
    assert len(runs) == 1 and runs[0].spec.routing.type == "split" and runs[0].spec.routing.options == {"ways": 4}
    runs = expand(load_experiment(path, params=["routing=[ecmp, {type: split, ways: 4}, {type: split, ways: 2}]"]))
    assert [(r.spec.routing.type, r.spec.routing.options) for r in runs] == [
        ("ecmp", {}), ("split", {"ways": 4}), ("split", {"ways": 2})]
    runs = expand(load_experiment(path, params=["description=one, two, three"]))
    assert [r.spec.description for r in runs] == ["one, two, three"]
    runs = expand(load_experiment(path, params=["topology.spines=[2,4]", "workload.size=[1MiB, 2MiB]"]))
    assert sorted((r.spec.topology.spines, r.spec.workload.size) for r in runs) == [
        (2, 2**20), (2, 2**21), (4, 2**20), (4, 2**21)]


def test_param_written_with_commas_is_one_value_and_the_cli_says_how_to_sweep(tmp_path):
    path = write_exp(tmp_path)
    result = runner.invoke(app, ["sweep", str(path), "--param", "topology.spines=2,4", "--out",
                                 str(tmp_path / "out"), "--executor", "serial", "--no-report"])
    text = " ".join(result.output.split())
    assert "note: --param topology.spines is one value, '2,4'; to sweep several, give a YAML list: " \
           "--param topology.spines=[2,4]" in text
    assert result.exit_code == 1 and "1 failed" in text  # the one run: '2,4' is not a number of spines
    result = runner.invoke(app, ["sweep", str(path), "--param", "topology.spines=[2,4]", "--out",
                                 str(tmp_path / "out2"), "--executor", "serial", "--no-report"])
    assert result.exit_code == 0 and "2 ok, 0 failed" in result.output and "note:" not in result.output


# ---------------------------------------------------------------------------- did you mean


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def one_error(*args) -> str:
    """The single error line of a command that must refuse its input (exit 2, no traceback)."""
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    text = " ".join(result.output.split())
    assert text.count("error:") == 1, text
    return text


def test_a_typo_in_a_yaml_key_names_the_line_the_allowed_keys_and_the_closest(tmp_path):
    text = yaml.safe_dump(BASE, sort_keys=False).replace("  spines: 2", "  spine: 2")
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    message = one_error("validate", path)
    # the unknown key is reported, not the 'spines' it leaves missing
    assert f"{path}:{line_of(path, 'spine: 2')}: topology.spine: unknown key; allowed keys: type, leaves, " \
           "spines," in message
    assert "did you mean 'spines'?" in message
    # nothing close: no guess
    path.write_text(text.replace("  spine: 2", "  spines: 2\n  colour: red"))
    message = one_error("validate", path)
    assert "topology.colour: unknown key; allowed keys:" in message and "did you mean" not in message


@pytest.mark.parametrize("key, value, where, suggestion", [
    ("topology.type", "leaf_spin", "topology.type", "leaf_spine"),
    ("routing", "ecmpp", "routing.type", "ecmp"),
    ("placement", "sequental", "placement.type", "sequential"),
    ("workload.algorithm", "rign", "workload.algorithm", "ring"),
    ("routing", "{type: split, wayz: 2}", "routing.wayz", "ways"),
])
def test_unknown_names_suggest_the_closest_valid_one(tmp_path, key, value, where, suggestion):
    path = write_exp(tmp_path)
    # in a file ...
    data = yaml.safe_load(path.read_text())
    node = data
    *parents, last = key.split(".")
    for p in parents:
        node = node[p]
    node[last] = yaml.safe_load(value)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data, sort_keys=False))
    message = one_error("validate", bad)
    assert f"{bad}:" in message and f"{where}:" in message and f"did you mean {suggestion!r}?" in message
    assert "valid:" in message or "allowed:" in message
    # ... through --set ...
    message = one_error("validate", path, "--set", f"{key}={value}")
    assert f"{where}:" in message and f"did you mean {suggestion!r}?" in message and "(value from --set)" in message


def test_unknown_keys_through_set_and_param_suggest_the_closest(tmp_path):
    path = write_exp(tmp_path)
    message = one_error("validate", path, "--set", "topology.leafs=4")
    assert "topology.leafs: unknown key" in message and "did you mean 'leaves'?" in message
    message = one_error("sweep", path, "--param", "topology.leafs=[2,4]", "--out", tmp_path / "out", "--no-report")
    assert f"{path}:" in message and "topology.leafs is not a key of the experiment spec" in message
    assert "did you mean 'leaves'?" in message
    assert not (tmp_path / "out").exists()


def test_unknown_metric_list_and_variant_suggest_the_closest(tmp_path):
    path = write_exp(tmp_path, variants=[{"name": "ecmp"}, {"name": "spray", "routing": "spray"}])
    out = tmp_path / "out"
    assert runner.invoke(app, ["sweep", str(path), "--out", str(out), "--executor", "serial",
                               "--no-report"]).exit_code == 0
    message = one_error("results", out, "--metric", "max_link_utl")
    assert "unknown metric max_link_utl" in message and "did you mean 'max_link_util'?" in message
    message = one_error("list", "routng")
    assert "did you mean 'routing'?" in message
    message = one_error("sweep", path, "--variant", "sprya", "--out", tmp_path / "o2", "--no-report")
    assert "no variant 'sprya'" in message and "did you mean 'spray'?" in message


def test_did_you_mean_is_quiet_without_a_close_name():
    from netsim.errors import did_you_mean
    assert did_you_mean("ECMP", ["ecmp", "spray"]) == "; did you mean 'ecmp'?"
    assert did_you_mean("x" * 500, ["x" * 500]) == ""  # a huge value is not compared (nor echoed)
    assert did_you_mean(3, ["3"]) == "" and did_you_mean("q", []) == ""


# ---------------------------------------------------------------------------- Ctrl-C

#: Runs netsim's console entry point with a marker on stderr when the simulation starts, so a test
#: interrupts the simulation itself (not the interpreter's start-up).
LAUNCH = """
import sys
import netsim.experiment.run as run
from netsim.cli import main
simulate = run.simulate
def marked(*args, **kwargs):
    sys.stderr.write("SIMULATING\\n")
    sys.stderr.flush()
    return simulate(*args, **kwargs)
run.simulate = marked
sys.argv = ["netsim", *sys.argv[1:]]
main()
"""


def long_experiment(tmp_path: Path, **extra) -> Path:
    """ring-allreduce.yaml with 400 iterations on random placement, in the fluid model (one ring): half a
    minute, interrupted after a second."""
    data = yaml.safe_load((ROOT / "experiments" / "ring-allreduce.yaml").read_text())
    data.update(placement="random", model="fluid", **extra)
    data["workload"]["iterations"] = 400
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def interrupt(tmp_path: Path, *args, after_s: float = 1.0, signum: int = 2) -> tuple[int, str]:
    """Start netsim, send ``signum`` (SIGINT) ``after_s`` into its (first) simulation; (exit status, stderr)."""
    import time
    import signal
    # Ctrl-C reaches the child as from a terminal even when this test runs as a background job of a
    # non-interactive shell, which starts with SIGINT ignored (POSIX), an inheritance netsim respects
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, *map(str, args)], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stderr.readline() == "SIMULATING\n"
        time.sleep(after_s)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, err


def test_ctrl_c_during_a_run_says_so_in_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "res"
    code, err = interrupt(tmp_path, "run", long_experiment(tmp_path), "--out", out)
    assert code == 130, err
    assert err == "interrupted: no results were written\n"
    assert not out.exists()


def test_a_ctrl_c_a_ctypes_callback_swallowed_still_stops_the_run(monkeypatch):
    """llvmlite calls Python through ctypes as numba loads a kernel; a signal handler that raises there
    is only printed ("Exception ignored"): the run's next step raises it again, and nothing is printed."""
    import ctypes
    import signal
    from netsim import interrupts
    from netsim.cli import _unraisable
    from netsim.engine.clock import Environment
    shown = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: _unraisable(info, shown.append))
    old = signal.signal(signal.SIGINT, interrupts.received)
    try:
        @ctypes.CFUNCTYPE(None)
        def callback():
            signal.raise_signal(signal.SIGINT)  # the handler runs at the next bytecode: in here
            _ = 1

        callback()
        assert interrupts.PENDING == [signal.SIGINT] and shown == []  # swallowed, quietly
        env = Environment()
        env.timeout(1.0)
        with pytest.raises(KeyboardInterrupt):
            env.step()
        assert env.now == 0.0  # before the step, not after
        interrupts.reported()
        env.step()  # reported: nothing pending
        assert env.now == 1.0
    finally:
        signal.signal(signal.SIGINT, old)
        interrupts.reported()
    # any other exception a callback could not raise is still shown
    _unraisable(type("Info", (), {"exc_type": ValueError})(), shown.append)
    assert len(shown) == 1


def test_ctrl_c_during_a_sweep_leaves_a_directory_marked_interrupted(tmp_path):
    import json
    out = tmp_path / "res"
    path = long_experiment(tmp_path, sweep={"seed": [1, 2]})
    code, err = interrupt(tmp_path, "sweep", path, "--out", out, "--executor", "serial", "--no-report")
    assert code == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith(f"interrupted: {out} holds the 0 of 2 runs that finished (manifest status: "
                                "interrupted)") and "Traceback" not in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["complete"] is False
    # netsim show says so, and how to finish it
    result = runner.invoke(app, ["show", str(out)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"{out}: sweep 'ring-allreduce' (interrupted: 0 of 2 runs ok)" in text
    assert f"to finish it: netsim sweep {path} --out {out} --resume" in text


def test_an_interrupt_inside_a_compiled_kernel_is_an_interruption_not_a_failed_run(monkeypatch, tmp_path):
    """Ctrl-C while numba dispatches surfaces as a SystemError caused by the KeyboardInterrupt."""
    from netsim.config import load_spec
    from netsim.errors import interruption
    from netsim.experiment import sweep
    from netsim.experiment.sweep import PlannedRun

    def kernel(spec):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError("CPUDispatcher(<function advance>) returned a result with an exception set") from exc

    try:
        kernel(None)
    except SystemError as exc:
        assert isinstance(interruption(exc), KeyboardInterrupt)
    assert interruption(SystemError("x")) is None and interruption(ValueError()) is None
    monkeypatch.setattr(sweep, "run_experiment", kernel)
    spec = load_spec(ROOT / "experiments" / "ring-allreduce.yaml")
    with pytest.raises(KeyboardInterrupt):
        sweep.execute(PlannedRun(0, "id", "", {}, 1, spec))
    # any other error is still a failed run, recorded
    monkeypatch.setattr(sweep, "run_experiment", lambda spec: 1 / 0)
    outcome = sweep.execute(PlannedRun(0, "id", "", {}, 1, spec))
    assert not outcome.ok and "ZeroDivisionError" in outcome.error

    def fail_inside_a_kernel(spec, **kwargs):
        kernel(spec)

    # netsim run: the same one line and exit status as a plain Ctrl-C, nothing written
    import netsim.experiment
    monkeypatch.setattr(netsim.experiment, "run_experiment", fail_inside_a_kernel)
    out = tmp_path / "res"
    result = runner.invoke(app, ["run", str(ROOT / "experiments" / "ring-allreduce.yaml"), "--out", str(out)])
    assert result.exit_code == 130 and "interrupted: no results were written" in result.output, result.output
    assert "internal error" not in result.output and not out.exists()


# ---------------------------------------------------------------------------- progress


def run_on_a_terminal(tmp_path: Path, *args) -> tuple[int, str, str]:
    """Run netsim with stderr on a pseudo-terminal; (exit status, stdout, what the terminal got)."""
    import os
    import pty
    import select
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "netsim", *map(str, args)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=slave, text=True)
    os.close(slave)
    screen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            screen += data
        elif proc.poll() is not None:
            break
    out = proc.stdout.read()
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out, screen.decode(errors="replace")


def test_a_long_run_shows_progress_on_a_terminal_and_quiet_silences_it(tmp_path):
    path = long_experiment(tmp_path)
    args = ["run", path, "--no-report", "--set", "workload.iterations=30"]
    code, out, screen = run_on_a_terminal(tmp_path, *args, "--out", tmp_path / "a")
    assert code == 0, screen
    assert "simulating" in screen and "/30 calls" in screen and "sim " in screen and "ETA" in screen
    assert "results:" in out
    code, out, screen = run_on_a_terminal(tmp_path, *args, "--out", tmp_path / "b", "--quiet")
    assert code == 0 and screen == "" and out == ""
    # not a terminal: no bar (and the summary as before)
    done = subprocess.run([sys.executable, "-m", "netsim", *map(str, args), "--out", tmp_path / "c"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stderr == "" and "results:" in done.stdout


def test_progress_waits_a_second_and_reads_only_the_clock():
    import io
    import time
    from types import SimpleNamespace

    from rich.console import Console

    from netsim.progress import RunProgress
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    with RunProgress(console, 10, show=True, after_s=0.05) as progress:
        env = SimpleNamespace(now=0.25)
        records: list = [1, 2, 3]
        progress.attach(env, records)
        time.sleep(0.4)
    assert "3/10 calls" in screen.getvalue() and "sim 250ms" in screen.getvalue()
    quick = io.StringIO()
    with RunProgress(Console(file=quick, force_terminal=True), 10, show=True) as progress:
        progress.attach(SimpleNamespace(now=1.0), [])  # done within the second: nothing drawn
    assert quick.getvalue() == ""
    hidden = io.StringIO()
    with RunProgress(Console(file=hidden, force_terminal=True), 10, show=False, after_s=0) as progress:
        progress.attach(SimpleNamespace(now=1.0), [])
        time.sleep(0.2)
    assert hidden.getvalue() == ""


def test_a_watched_run_gives_the_same_results_bit_for_bit():
    """The progress watcher reads the clock from another thread while the run goes: nothing changes."""
    import threading

    from pandas.testing import assert_frame_equal

    from netsim.config import load_spec
    from netsim.experiment.results import result_tables
    from netsim.experiment.run import run_experiment
    spec = load_spec(ROOT / "experiments" / "ring-allreduce.yaml", ["placement=random", "workload.iterations=3",
                                                                  "workload.size=16MiB"])
    plain = run_experiment(spec)
    seen: list[float] = []
    stop = threading.Event()

    def watch(env, records) -> None:
        def poll() -> None:
            while not stop.is_set():
                seen.append(env.now + len(records))
        threading.Thread(target=poll, daemon=True).start()

    try:
        watched = run_experiment(spec, on_start=watch)
    finally:
        stop.set()
    assert seen and watched.events == plain.events and watched.sim_time_s == plain.sim_time_s
    a, b = result_tables(plain), result_tables(watched)
    assert a.keys() == b.keys()
    for name in a:
        assert_frame_equal(a[name].drop(columns=["wall_s"], errors="ignore"),
                           b[name].drop(columns=["wall_s"], errors="ignore"), check_exact=True)


# ---------------------------------------------------------------------------- netsim show


def test_show_describes_a_single_run(tmp_path):
    out = tmp_path / "res"
    assert runner.invoke(app, ["run", str(write_exp(tmp_path)), "--out", str(out)]).exit_code == 0
    result = runner.invoke(app, ["show", str(out)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"{out}: run 'tiny' (complete)" in text
    assert "ran: leaf_spine(2x2, 4 hosts x 2 GPUs), routing ecmp, placement random, allreduce/ring 1MiB, 8 ranks" \
        in text, text
    from netsim.experiment.metrics import METRICS
    for name in ("collective_time_s", "busbw_Bps"):
        title = METRICS[name].title
        assert title[:1].upper() + title[1:] in text
    assert f"report: {out / 'report.html'}" in text
    assert "variants:" not in text  # a single run has none to speak of


def test_show_describes_a_sweep_with_its_variants_axes_and_failures(tmp_path):
    path = write_exp(tmp_path, variants=[{"name": "ecmp"}, {"name": "spray", "routing": "spray"}],
                     sweep={"workload.channels": [1, 0]})
    out = tmp_path / "res"
    assert runner.invoke(app, ["sweep", str(path), "--out", str(out), "--executor", "serial",
                               "--no-report"]).exit_code == 1  # channels 0 does not validate
    result = runner.invoke(app, ["show", str(out)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"{out}: sweep 'tiny' (failed: 2 of 4 runs ok, 2 failed)" in text
    assert f"from {path}" in text and "variants: ecmp, spray; swept: workload.channels" in text
    assert "runs: 4 planned, 2 ok, 2 failed, 0 missing" in text
    assert text.count("failed: run ") == 2 and "workload.channels" in text
    assert "report: none (netsim report" in text and "to finish it" not in text
    assert f"to run its failed runs again: netsim sweep {path} --out {out} --resume" in text
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    assert len(rows) == 4 and sum("spray" in r for r in rows) == 2


@pytest.mark.parametrize("make", ["absent", "file", "empty", "foreign", "corrupt"])
def test_show_refuses_what_is_not_a_results_directory(tmp_path, make):
    target = tmp_path / "d"
    if make == "file":
        target.write_text("x")
    elif make != "absent":
        target.mkdir()
    if make == "foreign":
        (target / "notes.txt").write_text("mine")
    if make == "corrupt":
        (target / "manifest.json").write_text("{not json")
    message = one_error("show", target)
    assert str(target) in message and ("not a netsim results directory" in message or "corrupt" in message)


# ---------------------------------------------------------------------------- exit status


def test_help_documents_the_exit_codes_main_uses():
    result = runner.invoke(app, ["--help"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0
    assert "Exit status: 0 success" in text
    for code, what in cli.EXIT_CODES.items():
        assert f"{code} {' '.join(what.split())}" in text, code
    assert set(cli.EXIT_CODES) == {0, 1, 2, 70, 130, 143}


def test_sigterm_is_143_and_a_bug_is_70_with_one_line(tmp_path, monkeypatch, capsys):
    import signal
    code, err = interrupt(tmp_path, "run", long_experiment(tmp_path), "--out", tmp_path / "res",
                          signum=signal.SIGTERM)
    assert code == 143 and err == "terminated: no results were written\n" and not (tmp_path / "res").exists()
    import netsim.experiment

    def bug(spec, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(netsim.experiment, "run_experiment", bug)
    monkeypatch.setattr(sys, "argv", ["netsim", "run", str(ROOT / "experiments" / "ring-allreduce.yaml"), "--out",
                                      str(tmp_path / "r2")])
    monkeypatch.delenv("NETSIM_DEBUG", raising=False)
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 70
    err = capsys.readouterr().err
    assert err.startswith("internal error (a bug in netsim): RuntimeError: a bug; the traceback is in ")
    assert "Traceback" not in err and not (tmp_path / "r2").exists()
    Path(err.split("the traceback is in ")[1].split(";")[0]).unlink()


# ---------------------------------------------------------------------------- JSON Schema


def test_shipped_schema_is_the_generated_one_and_netsim_schema_prints_it():
    from netsim.schema import SHIPPED, schema_text
    assert SHIPPED.read_text() == schema_text(), "regenerate: netsim schema > netsim/schema/experiment.schema.json"
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0 and result.output == schema_text()
    import json
    assert json.loads(result.output)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def _unknown_keys(data, node: dict, defs: dict, path: str = "") -> list[str]:
    """Keys of ``data`` that ``node`` does not allow (a key-only reading of the JSON Schema)."""
    if "$ref" in node:
        return _unknown_keys(data, defs[node["$ref"].rsplit("/", 1)[1]], defs, path)
    if "discriminator" in node and isinstance(data, dict):
        target = node["discriminator"]["mapping"].get(data.get("type"))
        return [path + ".type"] if target is None else _unknown_keys(data, {"$ref": target}, defs, path)
    for alternatives in ("anyOf", "oneOf"):
        if alternatives in node:
            found = [_unknown_keys(data, alt, defs, path) for alt in node[alternatives]]
            return min(found, key=len)
    kinds = {"object": dict, "array": list, "string": str, "number": (int, float), "integer": int,
             "boolean": bool, "null": type(None)}
    if "type" in node and not isinstance(data, kinds[node["type"]]):
        return [f"{path} is not a{'n' * (node['type'][0] in 'aeiou')} {node['type']}"]
    if isinstance(data, dict) and node.get("type") == "object":
        props, extra = node.get("properties", {}), node.get("additionalProperties", True)
        bad = [f"{path} needs {key}" for key in node.get("required", []) if key not in data]
        for key, value in data.items():
            if key in props:
                bad += _unknown_keys(value, props[key], defs, f"{path}.{key}".lstrip("."))
            elif extra is False:
                bad.append(f"{path}.{key}".lstrip("."))
        return bad
    if isinstance(data, list) and isinstance(node.get("items"), dict):
        return [b for i, item in enumerate(data) for b in _unknown_keys(item, node["items"], defs, f"{path}.{i}")]
    return []


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_experiment_fits_the_schema_and_a_typo_does_not(path):
    from netsim.schema import experiment_schema
    schema = experiment_schema()
    data = yaml.safe_load(path.read_text())
    assert _unknown_keys(data, schema, schema["$defs"]) == []
    data["descripton"] = "typo"
    assert _unknown_keys(data, schema, schema["$defs"]) == ["descripton"]
    if isinstance(data.get("topology"), dict) and data["topology"].get("type") == "leaf_spine":
        data["topology"]["spine"] = 2
        assert "topology.spine" in _unknown_keys(data, schema, schema["$defs"])


@pytest.mark.parametrize("typo, meant", [("sweeps", "sweep"), ("repeat", "repeats"), ("varients", "variants"),
                                         ("worklaod", "workload")])
def test_a_typo_in_a_top_level_key_suggests_the_sweep_keys_too(tmp_path, typo, meant):
    path = tmp_path / "exp.yaml"
    value = {"sweep": {"topology.spines": [2, 4]}, "repeats": 3, "variants": [{"name": "a"}],
             "workload": BASE["workload"]}[meant]
    data = {**BASE, typo: value}
    if meant == "workload":
        del data["workload"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    message = one_error("validate", path)
    assert f"{path}:{line_of(path, typo + ':')}: {typo}: unknown key; allowed keys:" in message
    assert "variants, sweep, seeds, repeats" in message and f"did you mean {meant!r}?" in message


def test_a_sweep_draws_no_bar_off_a_terminal_and_quiet_keeps_only_the_failures(tmp_path):
    path = write_exp(tmp_path, sweep={"workload.channels": [1, 0]})
    result = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "a"), "--executor", "serial",
                                 "--no-report"])
    assert result.exit_code == 1 and "tiny: 2 runs" not in result.output and "1 ok, 1 failed" in result.output
    result = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "b"), "--executor", "serial",
                                 "--no-report", "--quiet"])
    lines = result.output.splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("run ") and "failed" in lines[0]
    code, out, screen = run_on_a_terminal(tmp_path, "sweep", path, "--out", tmp_path / "c", "--executor", "serial",
                                          "--no-report")
    assert code == 1 and "tiny: 2 runs" in screen and "2/2" in screen and "1 ok, 1 failed" in out

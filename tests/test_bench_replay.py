"""benchmarks/replay.py: a recorded window of kernel calls replays to exactly what the live run computed."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from netsim.solver import COMPILED

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not COMPILED, reason="the flow table (and its recordings) needs numba")


def _replay_module():
    spec = importlib.util.spec_from_file_location("bench_replay", ROOT / "benchmarks" / "replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recorded_window_replays_to_the_live_results(tmp_path):
    replay = _replay_module()
    out = tmp_path / "window.pkl"
    n, live = replay.record("ring-256-1ch", out, skip=2000, calls=1500)
    assert n == 1500 and live > 0
    first = replay.replay(out, repeat=2)
    # the same next-finish times as the live run, to the bit, and the same state every time
    assert first["calls"] == 1500 and first["finish_sum"] == live
    again = replay.replay(out, table_file=ROOT / "netsim" / "engine" / "table.py", repeat=1)
    assert again["checksum"] == first["checksum"]


def test_replay_cli_records_and_reports(tmp_path):
    out = tmp_path / "w.pkl"
    rec = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "replay.py"), "record", "ring-256-1ch", str(out),
                          "--skip", "100", "--calls", "300"], capture_output=True, text=True, cwd=ROOT, check=True)
    live = rec.stdout.split("live checksum ")[1].split("/")[0]
    rep = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "replay.py"), "replay", str(out), "--repeat", "1"],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    assert "300 calls" in rep.stdout and f"checksum {live}/" in rep.stdout
    too_far = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "replay.py"), "record", "ring-256-1ch",
                              str(tmp_path / "none.pkl"), "--skip", "10000000"], capture_output=True, text=True,
                             cwd=ROOT, check=False)
    assert too_far.returncode != 0 and "nothing recorded" in too_far.stderr and not (tmp_path / "none.pkl").exists()

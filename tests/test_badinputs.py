"""The bad-input corpus (tests/badinputs): every case ends in success or one clean error, nothing worse.

The corpus runs once, in a separate process (``python -m tests.badinputs --json``) that forks a
sandboxed child per case with a memory limit and a timeout; each case is then one test here.
"""

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.badinputs import all_cases

ROOT = Path(__file__).resolve().parents[1]
CASES = all_cases()


def _id(case) -> str:
    return re.sub(r"[^\w.=+-]+", "_", f"{case.kind}-{case.name}")[:80]


def start_corpus(out: Path) -> subprocess.Popen:
    """Start the corpus run writing ``out``; tests/conftest.py starts it when the session's tests are
    chosen and runs this file's tests last, so on two cores the corpus (about 70 s) runs beside the
    rest of the suite instead of before it."""
    return subprocess.Popen([sys.executable, "-m", "tests.badinputs", "--quiet", "--json", str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory):
    started = getattr(request.config, "_badinputs_corpus", None)
    if started is None:  # (this file run on its own, or the hook did not start it)
        out = tmp_path_factory.mktemp("corpus") / "outcomes.json"
        proc = start_corpus(out)
    else:
        proc, out = started
    _, stderr = proc.communicate(timeout=1800)
    assert out.is_file(), stderr[-3000:]
    found = json.loads(out.read_text())
    assert [o["name"] for o in found] == [c.name for c in CASES]
    return found


def test_the_corpus_covers_every_class_with_300_inputs_or_more():
    kinds = Counter(c.kind for c in CASES)
    assert len(CASES) >= 300, len(CASES)
    for kind in ("outdir", "yaml", "units", "numbers", "os", "corrupt", "cli", "generated", "sweeps"):
        assert kinds[kind] >= 10, (kind, kinds[kind])
    for kind in ("trace", "synth", "convert", "chakra", "schedule", "moe", "routes"):  # every file netsim reads
        assert kinds[kind] >= 50, (kind, kinds[kind])


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{i:03d}-{_id(c)}" for i, c in enumerate(CASES)])
def test_case(outcomes, index):
    o = outcomes[index]
    assert not o["problem"], f"{o['name']}: {o['problem']} (exit {o['exit_code']}, {o['seconds']:.1f} s)\n{o['stderr']}"

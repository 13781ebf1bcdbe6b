"""Hypothesis fuzzing of the YAML front door through the CLI entry point: random documents and
mutations of every shipped file end in success or one clean error (exit 2, one short message),
never a traceback, within a time and memory budget (each example runs in a sandboxed child with
a 30 s timeout and a 2 GiB resident-memory budget, see tests/badinputs/harness.py)."""

import base64
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.badinputs import BASE
from tests.badinputs.generated import mutate, workload_experiment

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.relative_to(ROOT) for d in ("experiments", "topologies", "workloads")
                 for p in (ROOT / d).glob("*.yaml"))


class Server:
    """The fork server (tests/badinputs/server.py) of this module's tests."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.badinputs.server"], cwd=ROOT, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert json.loads(self.proc.stdout.readline()) == {"ready": True}

    def run(self, argv: list[str], files: dict[str, str | bytes], repo_files: bool = False) -> dict:
        enc = {k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode() for k, v in files.items()}
        self.proc.stdin.write(json.dumps({"argv": argv, "files": enc, "repo_files": repo_files}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.close()


def _assert_clean(outcome: dict, what: str) -> None:
    assert not outcome["problem"], f"{what}: {outcome['problem']} (exit {outcome['exit_code']}, " \
                                   f"{outcome['seconds']:.1f} s, {outcome['maxrss'] / 2**20:.0f} MiB)\n{outcome['stderr']}"


KEYS = ["name", "seed", "topology", "type", "leaves", "spines", "hosts_per_leaf", "gpus_per_host", "nics_per_host",
        "nic", "bandwidth", "latency", "uplink", "count", "intra_host", "placement", "routing", "workload", "op",
        "algorithm", "size", "channels", "ranks", "iterations", "jobs", "faults", "engine", "variants", "sweep",
        "seeds", "repeats", "model", "parallelism", "tp", "pp", "dp", "groups", "from", "zip", "<<"]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["leaf_spine", "dragonfly", "frontier", "collective", "training", "sequence", "allreduce",
                     "ring", "tree", "ecmp", "spray", "c4p", "holmes", "random", "4MiB", "400Gbps", "2us", "1e400GB",
                     "..", "/", "~", "-1", "nan", "x" * 3000, "\u202e", "\x00"]))
DOCS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), inner, max_size=5), max_leaves=25)
FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.function_scoped_fixture])


def _dump(doc) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=10**9)


@FUZZ
@given(doc=DOCS)
def test_random_documents(server, doc):
    _assert_clean(server.run(["validate", "exp.yaml"], {"exp.yaml": _dump(doc)}), _dump(doc)[:300])


@FUZZ
@given(doc=st.dictionaries(st.sampled_from(KEYS), DOCS, max_size=4))
def test_random_keys_laid_over_a_valid_experiment(server, doc):
    spec = {**BASE, **doc}
    _assert_clean(server.run(["run", "exp.yaml", "--out", "res", "--no-report"], {"exp.yaml": _dump(spec)}),
                  _dump(doc)[:300])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(SHIPPED), seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 3))
def test_mutations_of_every_shipped_file(server, path, seed, rounds):
    rng = np.random.default_rng(seed)
    text: str | bytes = (ROOT / path).read_text()
    done = []
    for _ in range(rounds):
        if isinstance(text, bytes):
            break
        what, text = mutate(text, rng)
        done.append(what)
    folder = path.parts[0]
    if folder == "topologies":
        argv, files = ["topo", "topologies/mut.yaml"], {"topologies/mut.yaml": text}
    elif folder == "workloads":
        argv = ["validate", "experiments/mut-exp.yaml"]
        files = {"workloads/mut.yaml": text, "experiments/mut-exp.yaml": workload_experiment(ROOT / path)}
    else:
        argv, files = ["validate", "experiments/mut.yaml"], {"experiments/mut.yaml": text}
    _assert_clean(server.run(argv, files, repo_files=True), f"{path}: {'; '.join(done)}")

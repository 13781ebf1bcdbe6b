"""Shared fixtures: small named fabrics and a helper to run processes on a fresh fabric."""

import os

import numpy as np
import pytest
from hypothesis import settings

#: The tests of the compiled executor test numba's code: compile the kernels at their first use instead
#: of running a process's first messages as Python (netsim.solver.jit; tests/test_jit.py checks both).
os.environ.setdefault("NETSIM_JIT_AFTER", "0")

from netsim.engine import Environment, Fabric
from netsim.routing import make_routing
from netsim.topology import leaf_spine

GB = 1e9

#: CI (``.ci/run`` sets HYPOTHESIS_PROFILE=ci) draws the same examples on every run, so a landing never
#: fails on a case a random draw happened to find; local runs keep exploring, and what they find is
#: pinned with ``@example`` or, while it is open, a strict xfail (tests/test_executors.py).
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def make_leaf_spine(**kw):
    """A leaf-spine with test-friendly defaults (1 GB/s NICs, no latency)."""
    args = dict(leaves=2, spines=2, hosts_per_leaf=2, gpus_per_host=1, nics_per_host=1, nic_bandwidth_Bps=GB,
                uplink_bandwidth_Bps=GB, intra_bandwidth_Bps=100 * GB)
    args.update(kw)
    return leaf_spine(**args)


def make_fabric(topo, seed=0, routing="ecmp", **kw):
    env = Environment()
    fabric = Fabric(env, topo, make_routing(routing, topo, np.random.default_rng(seed)), **kw)
    return env, fabric


@pytest.fixture
def leaf_spine_2x2():
    """2 leaves x 2 spines, 2 single-GPU hosts per leaf, everything 1 GB/s."""
    return make_leaf_spine()


def config_errors(data) -> list:
    """Every ConfigError a bad experiment mapping raises: the one from parsing it, or else (names that do
    not resolve on the fabric or its jobs) one each from validate (``prepare``) and from ``run``."""
    from netsim.config import parse_spec
    from netsim.errors import ConfigError
    from netsim.experiment import run_experiment
    from netsim.experiment.run import prepare
    try:
        parsed = parse_spec(data)
    except ConfigError as err:  # the shape of the entry
        return [err]
    errors = []
    for check in (prepare, run_experiment):
        with pytest.raises(ConfigError) as info:
            check(parsed)
        errors.append(info.value)
    return errors


def cli_on_file(tmp_path, data, command: str):
    """Write ``data`` as YAML and run ``netsim <command>`` on it (``run`` into ``tmp_path/results``):
    ``(result, yaml path, results directory)``."""
    import yaml
    from typer.testing import CliRunner

    from netsim.cli import app
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "results"
    result = CliRunner().invoke(app, [command, str(path)] + (["--out", str(out)] if command == "run" else []))
    return result, path, out


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: start the corpus only for tests that will run
def pytest_collection_modifyitems(config, items):
    """The bad-input corpus (tests/test_badinputs.py) runs in its own process: start it now, beside the
    rest of the suite, and run its tests last (they only read its outcomes). Under pytest-xdist every
    worker collects every test: the one its file goes to starts the corpus (the fixture), beside the
    other workers."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    corpus = [item for item in items if item.nodeid.startswith("tests/test_badinputs.py::test_case")]
    if not corpus:
        return
    from tests.test_badinputs import start_corpus
    out = config._tmp_path_factory.mktemp("corpus") / "outcomes.json"  # pytest's own temporary directories
    config._badinputs_corpus = (start_corpus(out), out)
    rest = [item for item in items if item not in corpus]
    items[:] = rest + corpus

"""The engine's kernels run as Python until a process's messages repay loading numba, with the same results.

Each check runs fresh processes: whether numba is loaded is a property of the process
(:mod:`netsim.solver.jit`), and the test session itself compiles at once (``conftest.py``).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from netsim.solver import jit

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not jit.AVAILABLE, reason="numba is not installed: the kernels only run as Python")

TOPO = {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 2,
        "nics_per_host": 1, "nic": {"bandwidth": "400Gbps", "latency": "1us"},
        "uplink": {"bandwidth": "200Gbps", "latency": "500ns"}, "intra_host": {"bandwidth": "900GB/s"}}
#: Whole messages, split ones (spray), a fault that reroutes them, and a sequence of calls.
SPECS = [
    {"name": "ring", "seed": 1, "topology": TOPO, "routing": "ecmp",
     "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "8MiB"}},
    {"name": "a2a-spray", "seed": 2, "topology": TOPO, "routing": "spray", "placement": "random",
     "workload": {"type": "collective", "op": "alltoall", "algorithm": "direct", "size": "4MiB"}},
    {"name": "fault", "seed": 3, "topology": TOPO, "routing": {"type": "ecmp", "reconvergence": "20us"},
     "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "8MiB", "channels": 2},
     "faults": [{"at": "10us", "link": "leaf0-spine0", "action": "down"}]},
    {"name": "tree", "seed": 4, "topology": TOPO, "routing": "split",
     "workload": {"type": "collective", "op": "allreduce", "algorithm": "tree", "size": "2MiB"}},
]

RUN = """
import json, sys
from netsim.config import parse_spec
from netsim.experiment import run_experiment
from netsim.experiment.results import result_tables
for spec in json.loads(sys.argv[1]):
    for name, frame in result_tables(run_experiment(parse_spec(spec))).items():
        frame.to_parquet(f"{sys.argv[2]}/{spec['name']}.{name}.parquet")
print(json.dumps({"numba": "numba" in sys.modules}))
"""


def _run(out: Path, budget: int | None) -> bool:
    """The runs of SPECS in a fresh process with ``NETSIM_JIT_AFTER=budget`` (None: the default); whether
    that process loaded numba."""
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "NETSIM_JIT_AFTER"}
    if budget is not None:
        env["NETSIM_JIT_AFTER"] = str(budget)
    done = subprocess.run([sys.executable, "-c", RUN, json.dumps(SPECS), str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["numba"]


def test_python_kernels_give_the_compiled_results_bit_for_bit(tmp_path):
    assert not _run(tmp_path / "python", 10**9)
    assert _run(tmp_path / "compiled", 0)
    files = sorted(p.name for p in (tmp_path / "python").iterdir())
    assert len(files) == 7 * len(SPECS)
    for name in files:
        a, b = pd.read_parquet(tmp_path / "python" / name), pd.read_parquet(tmp_path / "compiled" / name)
        keep = [c for c in a.columns if c != "wall_s"]
        pd.testing.assert_frame_equal(a[keep], b[keep], check_exact=True, obj=name)
    flows = pd.read_parquet(tmp_path / "python" / "fault.flows.parquet")
    assert len(flows) > 50  # (a run, not an empty table)


def test_a_small_run_does_not_load_numba_and_a_large_one_does():
    code = ("import sys; from netsim.solver import jit; jit.charge(1500); small = 'numba' in sys.modules; "
            "jit.charge(1000); print(small, 'numba' in sys.modules, jit.compiled())")
    env = {k: v for k, v in os.environ.items() if k != "NETSIM_JIT_AFTER"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True"]


def test_compiling_puts_dispatchers_in_every_kernel_module():
    """After compile_kernels, a kernel is a dispatcher under every name the kernel modules give it
    (``dag`` calls ``table._flush_kernel`` by the name it imported)."""
    from netsim.engine import dag, table
    from netsim.solver import bottleneck

    assert jit.compile_kernels()
    for kernel in (dag.advance, dag._flush_kernel, table._flush_kernel, table._bottleneck, bottleneck._bottleneck,
                   dag.replay_kernel, dag._heap_push3):
        assert hasattr(kernel, "py_func"), kernel
    assert dag._flush_kernel is table._flush_kernel

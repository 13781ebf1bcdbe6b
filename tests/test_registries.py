"""The topology and metric registries: a new fabric family is one module, a new metric one definition,
and everything else (the YAML schema, the runner, the pre-flight estimate, runs.parquet, the summary,
the dashboard and the CLI) reads them."""

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from netsim.cli import app
from netsim.collectives.base import ALGORITHMS
from netsim.config import load_topology, parse_spec
from netsim.errors import ConfigError
from netsim.experiment.metrics import METRICS
from netsim.fabrics import FABRICS, build_topology, fabric_shape
from netsim.placement import PLACEMENT
from netsim.routing import ROUTING

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

#: A fabric family and a metric defined outside netsim, as a user's script would (the example of
#: docs/extending.md, run as it is there): registered before the experiment schema is built, then
#: used by `netsim run`, `validate`, `results` and `list` with no other change.
PLUGIN = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "extending.md").read_text(), re.S).group(1)

STAR = {"name": "star-ring", "seed": 1, "topology": {"type": "star", "hosts": 8, "bandwidth": "100Gbps"},
        "routing": "ecmp", "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "8MiB"}}


def _plugin(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "with_star.py"
    script.write_text(PLUGIN)
    return subprocess.run([sys.executable, str(script), *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)


def test_a_fabric_family_and_a_metric_defined_outside_netsim_run_end_to_end(tmp_path):
    exp = tmp_path / "star.yaml"
    exp.write_text(yaml.safe_dump(STAR, sort_keys=False))
    done = _plugin(tmp_path, "validate", str(exp))
    assert done.returncode == 0, done.stderr
    assert "8 GPUs" in done.stdout or "8" in done.stdout  # the pre-flight ran on the star's shape
    done = _plugin(tmp_path, "run", str(exp), "--out", "res", "--no-report")
    assert done.returncode == 0, done.stderr
    runs = pd.read_parquet(tmp_path / "res" / "runs.parquet")
    assert runs["topology.type"].tolist() == ["star"]
    # a ring all-reduce of 8 MiB over 8 ranks: each rank sends 2 (n-1)/n M, over 2 links each way
    # (NIC up, NIC down: every path crosses the switch only), and the intra-switch hop is no link
    assert runs["bytes_per_rank"].iloc[0] == pytest.approx(2 * 2 * 7 / 8 * 8 * 2**20, rel=1e-9)
    assert runs["collective_time_s"].iloc[0] > 0
    done = _plugin(tmp_path, "results", "res")
    assert done.returncode == 0 and "bytes_per_rank" in done.stdout, done.stdout + done.stderr
    done = _plugin(tmp_path, "list", "topologies")
    assert "star" in done.stdout and "hosts on one switch" in done.stdout
    # without the module, the family is unknown, and the error names those that are registered
    done = subprocess.run([sys.executable, "-m", "netsim", "validate", str(exp)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and "unknown type 'star'" in done.stderr and "leaf_spine" in done.stderr


@pytest.mark.parametrize("path", sorted((ROOT / "topologies").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_family_counts_what_it_builds(path):
    """``shape`` (closed form, for the estimate) against ``build`` for each shipped topology file."""
    spec = load_topology(path)
    topo, shape = build_topology(spec), fabric_shape(spec)
    assert FABRICS.of(spec).name == spec.type
    assert (shape.hosts, shape.gpus, shape.links) == (topo.n_hosts, topo.n_gpus, len(topo.links))


def test_the_schema_and_its_errors_come_from_the_registry():
    with pytest.raises(ConfigError) as err:
        parse_spec({**STAR, "topology": {"type": "torus"}})
    for name in FABRICS.names():
        assert name in str(err.value)
    with pytest.raises(ConfigError, match="unknown topology type 'torus'"):
        FABRICS["torus"]


def test_runs_parquet_has_every_metric_in_registry_order(tmp_path):
    spec = yaml.safe_load((ROOT / "experiments" / "ring-allreduce.yaml").read_text())
    spec["topology"].update(leaves=2, spines=2, hosts_per_leaf=2)
    spec["workload"]["size"] = "4MiB"
    exp = tmp_path / "q.yaml"
    exp.write_text(yaml.safe_dump(spec))
    assert runner.invoke(app, ["run", str(exp), "--out", str(tmp_path / "r"), "--no-report"]).exit_code == 0
    columns = list(pd.read_parquet(tmp_path / "r" / "runs.parquet").columns)
    metric_columns = [c for c in columns if c in METRICS]
    assert metric_columns == METRICS.names()


def test_every_metric_says_what_it_is():
    for m in METRICS:
        assert m.doc and m.title and m.kind in ("time", "bandwidth", "ratio", "count")
        assert m.name.endswith("_s") == (m.kind == "time"), m.name      # the column's unit is in its name
        assert m.name.endswith("_Bps") == (m.kind == "bandwidth"), m.name
    assert {"collective_time_s", "busbw_Bps", "slowdown", "max_congestion"} <= set(METRICS.headline())


def test_netsim_list_names_everything_a_file_can_name():
    out = runner.invoke(app, ["list"], terminal_width=300)
    assert out.exit_code == 0, out.output
    for name in [*FABRICS.names(), *ROUTING.names(), *PLACEMENT.names(), *ALGORITHMS.names(), *METRICS.names()]:
        assert name in out.output, name
    bad = runner.invoke(app, ["list", "policies"])
    assert bad.exit_code == 2 and "valid: topologies, routing" in bad.output

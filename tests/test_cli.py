"""What users do: `netsim run` / `netsim validate` on YAML files, overrides, results, bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from netsim.cli import app
from netsim.collectives.nccl_tuning import PROTOCOL

ROOT = Path(__file__).resolve().parents[1]
RING = ROOT / "experiments" / "ring-allreduce.yaml"
runner = CliRunner()


def small_spec(**changes) -> dict:
    """The ring-allreduce experiment shrunk to run in milliseconds (16 GPUs, 4 MiB)."""
    spec = yaml.safe_load(RING.read_text())
    spec["topology"].update(leaves=2, spines=2, hosts_per_leaf=2)
    spec["workload"]["size"] = "4MiB"
    for key, value in changes.items():
        node = spec
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return spec


def write(tmp_path: Path, spec, name="exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
    return path


def test_run_ring_allreduce_writes_the_results_directory(tmp_path):
    out = tmp_path / "res"
    result = runner.invoke(app, ["run", str(RING), "--out", str(out)])
    assert result.exit_code == 0, result.output
    for name in ("manifest.json", "runs.parquet", "collectives.parquet", "flows.parquet", "links.parquet",
                 "report.html"):
        assert (out / name).is_file(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 1 and manifest["spec"]["name"] == "ring-allreduce" and manifest["config_hash"]
    colls = pd.read_parquet(out / "collectives.parquet")
    assert list(colls.columns) == ["run_id", "job", "step", "label", "iteration", "op", "algorithm", "protocol",
                                   "size_bytes", "n_ranks", "channels", "comm", "start_s", "end_s", "duration_s", "algbw_Bps",
                                   "busbw_Bps", "ideal_s", "slowdown", "bound_s", "below_bound"]
    row = colls.iloc[0]
    # the NCCL model: 2 rings per NIC (4 NICs a host), each step's 512 KiB piece one message; the 8 rings
    # leave each leaf over 4 uplinks (4:1), so ECMP collides and the ring runs slower than its ideal
    assert row.channels == 8 and row.slowdown > 1 and not row.below_bound
    assert row.n_ranks == 64 and row.size_bytes == 256 * 2**20
    assert row.busbw_Bps == pytest.approx(row.algbw_Bps * 2 * 63 / 64)
    flows = pd.read_parquet(out / "flows.parquet")
    assert len(flows) == 2 * 63 * 64 * 8
    wire = PROTOCOL[row["protocol"]].wire   # the bytes NCCL's protocol puts on the wire per data byte
    assert flows["size_bytes"].sum() == pytest.approx(2 * 63 * 256 * 2**20 * wire)
    links = pd.read_parquet(out / "links.parquet")
    assert {"bytes", "busy_s", "mean_util", "peak_util", "tier"} <= set(links.columns)
    assert links["peak_util"].max() <= 1 + 1e-9
    assert "ring-allreduce" in result.output and "busbw" in result.output
    page = (out / "report.html").read_text()
    assert "plotly" in page and '<script src="http' not in page  # self-contained: opens offline
    from netsim.report.dashboard import n_figures
    assert page.count('class="plotly-graph-div"') == n_figures(out) >= 6


def test_set_overrides_any_key(tmp_path):
    path = write(tmp_path, small_spec())
    out = tmp_path / "o"
    result = runner.invoke(app, ["run", str(path), "--out", str(out), "--no-report",
                                 "--set", "workload.size=1GiB", "--set", "routing=ecmp",
                                 "--set", "topology.spines=4", "--set", "placement.type=random"])
    assert result.exit_code == 0, result.output
    runs = pd.read_parquet(out / "runs.parquet")
    assert runs.loc[0, "workload.size"] == 2**30 and runs.loc[0, "topology.spines"] == 4
    assert runs.loc[0, "placement.type"] == "random"


def test_validate_checks_without_running(tmp_path):
    result = runner.invoke(app, ["validate", str(RING)])
    assert result.exit_code == 0 and "ok" in result.output
    assert not (Path("results") / "ring-allreduce-never").exists()


BAD = [
    ("missing file", None, "file not found", ""),
    ("yaml syntax", "name: x\ntopology: [1, 2\n", "YAML syntax error", ":3"),
    ("unknown key", small_spec(**{"topology.colour": "red"}), "unknown key", "topology.colour"),
    ("unknown routing", small_spec(routing="ecmpp"), "unknown routing policy 'ecmpp'; valid: adaptive, c4p, ecmp, ethereal, min-split, minimal, split, spray, table, ugal, valiant", "routing"),
    ("unknown placement", small_spec(placement="best"), "valid: holmes, random, sequential", "placement"),
    ("unknown algorithm", small_spec(**{"workload.algorithm": "rign"}), "valid: auto (NCCL's pick by size), direct, halving_doubling, hierarchical, recursive_doubling, ring, star, tree", "workload.algorithm"),
    ("unknown op", small_spec(**{"workload.op": "allsum"}), "unknown collective op", "workload.op"),
    ("negative size", small_spec(**{"workload.size": -5}), "must not be negative", "workload.size"),
    # sizes have a range now (1 byte to 2**60 bytes), and the message says so
    ("zero size", small_spec(**{"workload.size": "0MiB"}), "expected a size from 1B", "workload.size"),
    ("malformed unit", small_spec(**{"topology.nic.bandwidth": "200Gbits"}), "bandwidth", "topology.nic.bandwidth"),
    ("ambiguous unit", small_spec(**{"topology.nic.bandwidth": "25gbps"}), "25gbps", "topology.nic.bandwidth"),
    ("missing key", small_spec(**{"topology.leaves": None}), "required key is missing", "topology.leaves"),
    ("wrong type", small_spec(**{"topology.spines": "many"}), "integer", "topology.spines"),
    ("bad policy option", small_spec(placement={"type": "random", "by": "rack"}), "'by'", "placement"),
    ("too many ranks", small_spec(**{"workload.ranks": 1000}), "do not fit", "workload.ranks"),
    # each count has its own bound now (10**9 hosts per leaf is refused as out of range): 10**6 is within it,
    # and the fabric as a whole (16 million GPUs) is too large
    ("huge fabric", small_spec(**{"topology.hosts_per_leaf": 10**6}), "fabric too large", "topology"),
    ("float count", small_spec(**{"topology.leaves": 2.0}), "valid integer", "topology.leaves"),
    ("not a mapping", "- 1\n- 2\n", "expected a mapping", ""),
    ("empty file", "", "empty", ""),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
@pytest.mark.parametrize("command", ["run", "validate"])
def test_bad_input_gives_one_clear_line_and_exit_2(tmp_path, case, command):
    _, spec, expected, where = case
    path = tmp_path / "missing.yaml" if spec is None else write(tmp_path, spec)
    out = tmp_path / "results"
    args = [command, str(path)] + (["--out", str(out)] if command == "run" else [])
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)
    text = " ".join(result.output.split())
    assert "Traceback" not in text
    assert str(path) in text and expected in text and where in text, text
    assert not out.exists(), "a failed run must not leave a results directory"


def test_bad_set_override_names_the_flag(tmp_path):
    result = runner.invoke(app, ["validate", str(RING), "--set", "workload.size"])
    assert result.exit_code == 2 and "KEY=VALUE" in result.output
    result = runner.invoke(app, ["validate", str(RING), "--set", "workload.size=-1MiB"])
    assert result.exit_code == 2 and "workload.size" in result.output and "--set" in result.output


def test_error_line_numbers_point_into_the_file(tmp_path):
    text = RING.read_text().replace("spines: 4", "spines: four")
    path = write(tmp_path, text)
    result = runner.invoke(app, ["validate", str(path)])
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "spines: four" in s)
    assert f"{path}:{line}: topology.spines" in " ".join(result.output.split())


def test_console_script_exit_code_and_no_traceback(tmp_path):
    path = write(tmp_path, small_spec(routing="nope"))
    proc = subprocess.run([sys.executable, "-m", "netsim.cli", "run", str(path), "--out", str(tmp_path / "r")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "unknown routing policy" in proc.stderr


def test_topology_file_reference_and_dragonfly_yaml(tmp_path):
    result = runner.invoke(app, ["validate", str(ROOT / "experiments" / "frontier-mini-ring.yaml")])
    assert result.exit_code == 0 and "8192 GPUs" in result.output, result.output
    spec = small_spec(topology={"type": "dragonfly", "groups": 3, "switches_per_group": 2, "hosts_per_switch": 2,
                                "global_links_between_groups": 1, "link": {"bandwidth": "200Gbps"},
                                "switch_latency": "350ns"}, routing="ugal")
    out = tmp_path / "df"
    result = runner.invoke(app, ["run", str(write(tmp_path, spec)), "--out", str(out), "--no-report"])
    assert result.exit_code == 0, result.output
    links = pd.read_parquet(out / "links.parquet")
    assert {"local", "global"} <= set(links["kind"]) and {"group", "global"} <= set(links["tier"])


def test_dragonfly_policy_on_leaf_spine_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["validate", str(write(tmp_path, small_spec(routing="valiant")))])
    assert result.exit_code == 2 and "needs a dragonfly topology" in result.output


def test_missing_topology_file_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["validate", str(write(tmp_path, small_spec(topology="nope.yaml")))])
    assert result.exit_code == 2 and "topology file 'nope.yaml' not found" in " ".join(result.output.split())


@pytest.mark.parametrize("name", ["a[/]b.yaml", "a[bold]b.yaml", "[red]x.yaml"])
def test_an_error_about_a_name_with_brackets_prints_the_name_as_it_is(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", name])
    assert result.exit_code == 2 and f"{name}: file not found" in result.output, result.output

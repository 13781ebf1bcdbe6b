"""`netsim topo`: fabric summaries against closed forms, golden outputs for every topology file, drawings."""

import os
import re
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netsim.cli import app
from netsim.report.topology_drawing import MAX_NODES, topology_figure
from netsim.topology import leaf_spine
from netsim.topology.dragonfly import dragonfly, frontier
from netsim.topology.metrics import format_summary, summary
from netsim.topology.topology import SWITCH_KINDS

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "golden"
TOPOLOGY_FILES = sorted((ROOT / "topologies").glob("*.yaml"))
UPDATE = os.environ.get("NETSIM_UPDATE_GOLDEN") == "1"
runner = CliRunner()
BW = 50e9  # 400 Gbps


def switch_hops(topo, path):
    """Switch-to-switch links on ``path``."""
    kinds = dict(topo.graph.nodes(data="kind"))
    return sum(kinds[int(topo.links.src[k])] in SWITCH_KINDS and kinds[int(topo.links.dst[k])] in SWITCH_KINDS
               for k in path)


def brute_force_diameter(topo):
    """Most switch hops on a fewest-hop path over all GPU pairs on different hosts (small fabrics only)."""
    return max(switch_hops(topo, topo.paths(a, b)[0]) for a in range(topo.n_gpus) for b in range(topo.n_gpus)
               if topo.gpu_host[a] != topo.gpu_host[b])


@pytest.mark.parametrize("leaves, spines, count, ratio", [(4, 2, 2, 1.0), (4, 1, 1, 0.25), (3, 2, 1, None),
                                                          (2, 4, 1, 1.0)])
def test_leaf_spine_summary_matches_closed_forms(leaves, spines, count, ratio):
    hosts_per_leaf, gpus, nics = 2, 4, 2  # 4 NICs x 50 GB/s into each leaf
    uplink = hosts_per_leaf * nics * BW / (spines * count) * (ratio or 1.0)
    t = leaf_spine(leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf, gpus_per_host=gpus,
                   nics_per_host=nics, nic_bandwidth_Bps=BW, uplink_bandwidth_Bps=uplink,
                   uplinks_per_spine=count, intra_bandwidth_Bps=900e9)
    s = summary(t)
    hosts = leaves * hosts_per_leaf
    n_nics = hosts * nics
    assert (s["hosts"], s["gpus"], s["nics"]) == (hosts, hosts * gpus, n_nics)
    assert s["switches"] == {"leaf": leaves, "spine": spines} and s["host_switches"] == hosts
    cables = leaves * spines * count
    assert s["links"] == {"intra": 2 * hosts * gpus, "nic_up": n_nics, "nic_down": n_nics, "up": cables,
                          "down": cables}
    assert s["injection_Bps"] == pytest.approx(n_nics * BW) and s["nic_links"] == n_nics
    assert s["bisection_Bps"] == pytest.approx(leaves // 2 * spines * count * uplink)
    assert s["bisection_cut"] == f"first {leaves // 2} of {leaves} leaves -> the rest"
    if ratio is not None:  # an even split: bisection / (injection / 2) is 1 / oversubscription
        assert s["bisection_ratio"] == pytest.approx(ratio)
        assert s["bisection_ratio"] == pytest.approx(1 / t.params["oversubscription"])
    assert s["diameter_hops"] == 2 == brute_force_diameter(t)
    paths = {p["pair"]: (p["paths"], p["switch_hops"]) for p in s["paths"]}
    # every parallel cable is a distinct path on the way up and again on the way down
    assert paths == {"same host": (1, 0), "same leaf, other host": (1, 0),
                     "other leaf": (spines * count ** 2, 2)}


def test_single_leaf_has_no_bisection_and_diameter_zero():
    t = leaf_spine(leaves=1, spines=2, hosts_per_leaf=4, gpus_per_host=2, nics_per_host=2,
                   nic_bandwidth_Bps=BW, uplink_bandwidth_Bps=BW, intra_bandwidth_Bps=900e9)
    s = summary(t)
    assert s["bisection_Bps"] is None and s["bisection_ratio"] is None and s["diameter_hops"] == 0
    text = format_summary(s)
    assert "bisection   n/a (all NICs on one leaf" in text and "diameter    0 switch-to-switch hops" in text
    assert [p["pair"] for p in s["paths"]] == ["same host", "same leaf, other host"]


# (4, 2, 1, k=2): every switch has a cable to every group, so the switch graph has 2-hop routes through a
# third group; minimal routing stays in the two groups and needs 3 hops for some pairs, as the diameter says.
@pytest.mark.parametrize("g, a, p, h, k", [(9, 4, 2, 2, None), (4, 2, 1, None, 2)])
def test_dragonfly_bisection_is_the_global_cables_between_group_halves(g, a, p, h, k):
    t = dragonfly(groups=g, switches_per_group=a, hosts_per_switch=p, global_links_per_switch=h,
                  global_links_between_groups=k, link_bandwidth_Bps=25e9)
    s = summary(t)
    per_pair = t.params["global_links_between_groups"]
    assert per_pair == (k or 1)  # balanced p = h = 2, a = 4, g = 9: one cable per pair of groups
    assert s["bisection_Bps"] == pytest.approx(g // 2 * (g - g // 2) * per_pair * 25e9)
    assert s["injection_Bps"] == pytest.approx(g * a * p * 25e9)
    assert s["bisection_ratio"] == pytest.approx(s["bisection_Bps"] / (g * a * p * 25e9 / 2))
    assert s["switches"] == {"switch": g * a} and s["links"]["global"] == g * (g - 1) * per_pair
    assert s["diameter_hops"] == 3 == brute_force_diameter(t)
    pairs = ["same switch, other host"] * (p > 1) + ["other switch, same group", "other group"]
    assert [q["pair"] for q in s["paths"]] == pairs


def test_frontier_preset_counts():
    t = frontier(groups=2)
    s = summary(t)
    hosts = 2 * 128
    assert (s["hosts"], s["gpus"], s["nics"], s["switches"], s["host_switches"]) == \
        (hosts, 8 * hosts, 4 * hosts, {"switch": 64}, 0)
    assert s["links"] == {"intra": 24 * hosts, "nic_up": 4 * hosts, "nic_down": 4 * hosts, "pcie": 8 * hosts,
                          "local": 2 * 32 * 31, "global": 2 * 4}
    assert sum(s["links"].values()) == len(t.links)
    assert s["injection_Bps"] == pytest.approx(4 * hosts * 25e9)
    assert s["bisection_Bps"] == pytest.approx(4 * 25e9)  # 4 cables between the two groups
    assert s["diameter_hops"] == 3
    same_host = s["paths"][0]
    assert same_host["pair"] == "same host" and same_host["paths"] == len(t.paths(0, 1)) >= 1


def test_multi_cluster_bisection_is_limited_by_the_ethernet_core():
    from netsim.topology.multicluster import multi_cluster
    from netsim.topology.nic import nic_profile
    ib = dict(name="ib", leaves=2, spines=1, hosts_per_leaf=1, gpus_per_host=2, nics_per_host=1,
              nic=nic_profile("ib-hdr-200"), uplink_bandwidth_Bps=100e9, intra_bandwidth_Bps=300e9)
    t = multi_cluster([ib, dict(ib, name="roce", nic=nic_profile("roce-200"))], interconnect_Bps=12.5e9)
    s = summary(t)
    # units: ib.leaf0, ib.leaf1, ib.eth | roce.leaf0, roce.leaf1, roce.eth; only the core joins the halves
    assert s["bisection_cut"] == "first 3 of 6 edge switches -> the rest"
    assert s["bisection_Bps"] == pytest.approx(12.5e9)
    assert s["diameter_hops"] == 2  # leaf-spine-leaf inside a cluster, eth-core-eth between them


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"{path} is missing: run NETSIM_UPDATE_GOLDEN=1 pytest tests/test_topo.py"
    assert text == path.read_text(), f"output differs from {path} (NETSIM_UPDATE_GOLDEN=1 rewrites it)"


@pytest.mark.parametrize("path", TOPOLOGY_FILES, ids=lambda p: p.name)
def test_topo_output_matches_golden(path):
    start = time.perf_counter()
    result = runner.invoke(app, ["topo", str(path)])
    elapsed = time.perf_counter() - start
    assert result.exit_code == 0, result.output
    _golden(f"topo-{path.stem}.txt", result.output)
    assert elapsed < 20, f"netsim topo {path.name} took {elapsed:.1f}s"  # Frontier: ~4 s, mostly building


def test_every_golden_file_has_a_topology_file():
    stems = {p.stem for p in TOPOLOGY_FILES}
    assert {p.name.removeprefix("topo-").removesuffix(".txt") for p in GOLDEN.glob("topo-*.txt")} <= stems


def test_readme_shows_the_real_output():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```\n\$ netsim topo topologies/leaf-spine-256.yaml\n(.*?)```", readme, re.S)
    assert block, "README should show the output of netsim topo topologies/leaf-spine-256.yaml"
    assert block.group(1) == (GOLDEN / "topo-leaf-spine-256.txt").read_text()


def test_topo_reads_experiment_files():
    result = runner.invoke(app, ["topo", str(ROOT / "experiments" / "ring-allreduce.yaml")])
    assert result.exit_code == 0, result.output
    assert "ratio       0.250" in result.output  # ring-allreduce.yaml is 4:1


BAD = [
    ("missing", None, "file not found"),
    ("unknown key", (ROOT / "topologies" / "leaf-spine-64.yaml").read_text() + "colour: red\n", "colour"),
    ("bad value", "type: leaf_spine\nleaves: four\n", ":2: leaves"),
    ("builder", "type: dragonfly\ngroups: 2\nswitches_per_group: 4\nhosts_per_switch: 1\n"
                "global_links_per_switch: 1\nglobal_links_between_groups: 1\nlink: {bandwidth: 200Gbps}\n",
     "give exactly one of"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_topology_file_gives_one_line_and_exit_2(tmp_path, case):
    _, text, expected = case
    path = tmp_path / "t.yaml"
    if text is not None:
        path.write_text(text)
    result = runner.invoke(app, ["topo", str(path)])
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())
    assert "Traceback" not in out and str(path) in out and expected in out, out
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


def test_draw_writes_self_contained_html(tmp_path):
    out = tmp_path / "fabric.html"
    result = runner.invoke(app, ["topo", str(ROOT / "topologies" / "leaf-spine-64.yaml"), "--draw", str(out)])
    assert result.exit_code == 0, result.output
    assert f"drawing: {out}" in result.output and "bisection" in result.output
    page = out.read_text()
    assert "plotly" in page and '<script src="http' not in page  # opens offline
    assert "leaf_spine(2x2" in page and not list(tmp_path.glob(".*tmp"))


def test_drawing_collapses_hosts_and_colours_links_by_kind():
    t = dragonfly(groups=3, switches_per_group=2, hosts_per_switch=2, global_links_between_groups=1,
                  link_bandwidth_Bps=25e9)
    fig = topology_figure(t)
    names = [tr.name for tr in fig.data]
    assert names == ["NIC (host - switch)", "local (inside a group)", "global (between groups)", "host",
                     "switch"]
    markers = {tr.name: len(tr.x) for tr in fig.data if tr.mode == "markers"}
    assert markers == {"host": t.n_hosts, "switch": 6}
    global_lines = next(tr for tr in fig.data if tr.name.startswith("global"))
    assert len(global_lines.x) == 3 * 3  # 3 cables, one segment each (x0, x1, gap)


def test_drawing_the_full_frontier_is_refused(tmp_path):
    out = tmp_path / "frontier.html"
    result = runner.invoke(app, ["topo", str(ROOT / "topologies" / "frontier.yaml"), "--draw", str(out)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "too large to draw;" in text and f"limit is {MAX_NODES:,}" in text and "Traceback" not in text
    assert "injection" not in text and not out.exists()  # refused before printing or writing anything


def test_draw_into_a_missing_directory_is_a_clear_error(tmp_path):
    out = tmp_path / "nope" / "x.html"
    result = runner.invoke(app, ["topo", str(ROOT / "topologies" / "leaf-spine-64.yaml"), "--draw", str(out)])
    assert result.exit_code == 2 and "does not exist" in result.output

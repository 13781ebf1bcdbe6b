"""Multi-plane leaf-spine fabrics (``topology.planes``, Alibaba HPN's dual plane; issue 29): every NIC has
one port in each plane, no link joins two planes, so every path stays in one plane."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.config import ExperimentSpec
from netsim.fabrics import build_topology, fabric_shape
from netsim.topology import LINK_KINDS
from tests.conftest import cli_on_file


def _spec(planes=2, ports=2, spines=4, leaves=4, **extra) -> dict:
    topology = {"type": "leaf_spine", "leaves": leaves, "spines": spines, "hosts_per_leaf": 1, "gpus_per_host": 2,
                "nics_per_host": 2, "nic": {"bandwidth": "200Gbps", "ports": ports},
                "uplink": {"bandwidth": "200Gbps"}, "intra_host": {"bandwidth": "450GB/s"}, "planes": planes, **extra}
    return {"name": "planes", "seed": 1, "topology": topology, "placement": "sequential", "routing": "ecmp",
            "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"}}


@settings(max_examples=20, deadline=None)
@given(planes=st.sampled_from([2, 4]), per_plane=st.integers(1, 3), sets=st.integers(1, 3), data=st.data())
def test_paths_stay_in_one_plane_and_every_nic_has_a_port_in_each(planes, per_plane, sets, data):
    spec = ExperimentSpec.model_validate(_spec(planes=planes, ports=planes, spines=planes * per_plane,
                                               leaves=planes * sets)).topology
    topo = build_topology(spec)
    nodes = topo.graph.nodes
    up = topo.links.kind == LINK_KINDS.index("up")
    for a, b in zip(topo.links.src[up], topo.links.dst[up]):
        assert nodes[int(a)]["plane"] == nodes[int(b)]["plane"]  # no cable joins two planes
    for ports in topo.nic_ports.values():
        assert sorted(nodes[sw]["plane"] for _u, sw, _d in ports) == list(range(planes))
    src = data.draw(st.integers(0, topo.n_gpus - 1))
    dst = data.draw(st.integers(0, topo.n_gpus - 1))
    for path in topo.paths(src, dst):
        switch_planes = {nodes[int(topo.links.dst[lk])].get("plane") for lk in path} - {None}
        assert len(switch_planes) <= 1
    assert fabric_shape(spec).links == len(topo.links)
    far = [g for g in range(topo.n_gpus) if not set(topo.nic_ports[int(topo.gpu_nic[g])][0][1:2])
           & {topo.nic_ports[int(topo.gpu_nic[0])][k][1] for k in range(planes)}]
    if far:
        assert len(topo.paths(0, far[0])) == fabric_shape(spec).paths_far


@pytest.mark.parametrize("extra, words", [
    ({"ports": 1}, "2 planes need NICs of 2 ports each"),
    ({"spines": 3}, "spines divisible by 2"),
])
def test_a_plane_count_that_does_not_match_the_nic_ports_is_refused(tmp_path, extra, words):
    result, _, out = cli_on_file(tmp_path, _spec(**extra), "run")
    assert result.exit_code == 2 and words in result.output and "topology.planes" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_the_hpn_preset_has_the_published_counts():
    """REFERENCE §8: ~15K GPUs in one pod, 15 segments x 1,024 GPUs, hosts of 8 GPUs with one 2 x 200G NIC
    per GPU, dual-ToR and dual-plane; 60 aggregation switches per plane, ToRs 128 x 200G down and
    60 x 400G up (1.067:1) (unconfirmed: parameters)."""
    from pathlib import Path

    import yaml
    data = yaml.safe_load((Path(__file__).resolve().parents[1] / "topologies/hpn-pod.yaml").read_text())
    spec = ExperimentSpec.model_validate({**_spec(), "topology": data}).topology
    topo = build_topology(spec)
    assert topo.n_gpus == 15 * 1024 and topo.params["planes"] == 2
    assert topo.params["oversubscription"] == pytest.approx(128 * 200 / (60 * 400))
    nodes = topo.graph.nodes
    down = {}
    for ports in topo.nic_ports.values():
        assert len(ports) == 2 and ports[0][1] != ports[1][1]  # dual-ToR
        for _u, sw, _d in ports:
            down[sw] = down.get(sw, 0) + 1
    assert set(down.values()) == {128}
    spines = [n for n, k in topo.graph.nodes(data="kind") if k == "spine"]
    assert sorted(sum(nodes[s]["plane"] == p for s in spines) for p in (0, 1)) == [60, 60]


def test_the_dashboard_shows_load_per_tier_and_plane(tmp_path):
    """Aggregated by plane: each plane's leaf-spine links are a row of the load-per-tier table, and the
    bytes of the plane rows add up to the tier's."""
    import pandas as pd

    from netsim.report.dashboard import build_figures
    from netsim.units import parse_size
    data = {**_spec(), "routing": "spray", "placement": {"type": "random", "by": "host"}}
    result, _, out = cli_on_file(tmp_path, data, "run")
    assert result.exit_code == 0, result.output
    (table,) = [f for f in build_figures(out) if f.layout.title.text.startswith("Load per tier and plane")]
    columns = [c.removeprefix("<b>").removesuffix("</b>") for c in table.data[0].header.values]
    rows = pd.DataFrame(dict(zip(columns, table.data[0].cells.values)))
    spine = rows[rows["tier"] == "leaf-spine"]
    assert sorted(spine["plane"]) == ["0", "1"] and set(rows.loc[rows["tier"] == "host", "plane"]) == {"-"}
    links = pd.read_parquet(out / "links.parquet")
    total = links.loc[links["tier"] == "leaf-spine", "bytes"].sum()
    assert sum(parse_size(b) for b in spine["bytes"]) == pytest.approx(total, rel=1e-3)

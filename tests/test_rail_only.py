"""Rail-only fabrics (``topology: {type: rail_only}``, Wang et al., arXiv 2307.12169; issue 29): a Clos per
rail, no link between rails, traffic between rails forwarded over NVLink inside the source host."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.config import ExperimentSpec
from netsim.fabrics import build_topology, fabric_shape
from netsim.topology import LINK_KINDS
from netsim.topology.metrics import format_summary, summary
from tests.conftest import cli_on_file

GBPS = 1e9 / 8


def _topology(leaves=1, hosts=2, spines=0, gpus=4, cables=1, **extra) -> dict:
    topo = {"type": "rail_only", "leaves_per_rail": leaves, "hosts_per_leaf": hosts, "spines_per_rail": spines,
            "gpus_per_host": gpus, "nic": {"bandwidth": "400Gbps", "latency": "1us"},
            "intra_host": {"bandwidth": "450GB/s", "latency": "300ns"}, **extra}
    if spines:
        topo["uplink"] = {"bandwidth": "400Gbps", "latency": "500ns", "count": cables}
    return topo


def _spec(topology: dict, workload: dict | None = None) -> dict:
    """A ring allreduce on ``topology``, in the pure fluid model: its rank-order ring crosses rails, which
    is what forwarding is tested on (the NCCL model's rings stay on rails)."""
    return {"name": "rail-only", "seed": 1, "model": "fluid", "topology": topology, "placement": "sequential", "routing": "ecmp",
            "workload": workload or {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"}}


def _build(topology: dict):
    spec = ExperimentSpec.model_validate(_spec(topology)).topology
    return spec, build_topology(spec)


fabrics = st.builds(lambda leaves, hosts, spines, gpus, cables: _topology(leaves, hosts, spines if leaves > 1 else 0,
                                                                          gpus, cables),
                    st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 4), st.integers(1, 2))


@settings(max_examples=40, deadline=None)
@given(fabrics, st.data())
def test_paths_stay_on_one_rail_and_forward_inside_the_source_host(topology, data):
    """Every path of a GPU pair: host links, then (between hosts) the destination GPU's rail only; a pair on
    different rails first crosses the source host's links to the GPU of the destination's rail. The array
    form (path_sets) lists exactly the same paths, and the closed-form counts are the built fabric's."""
    spec, topo = _build(topology)
    assert fabric_shape(spec).links == len(topo.links)
    nodes, lt = topo.graph.nodes, topo.links
    switch_links = (lt.kind == LINK_KINDS.index("up")) | (lt.kind == LINK_KINDS.index("down"))
    for a, b in zip(lt.src[switch_links], lt.dst[switch_links]):
        assert nodes[int(a)]["rail"] == nodes[int(b)]["rail"]  # no cable joins two rails
    g = topology["gpus_per_host"]
    src = data.draw(st.integers(0, topo.n_gpus - 1))
    dst = data.draw(st.integers(0, topo.n_gpus - 1))
    paths = topo.paths(src, dst)
    ps = topo.path_sets([src], [dst])
    assert ps.n[0] == len(paths)
    for j, path in enumerate(paths):
        _ptr, links = ps.links([j])
        assert tuple(links.tolist()) == path
        rails = {nodes[int(lt.dst[lk])].get("rail") for lk in path} - {None}
        host_s, host_d = src // g, dst // g
        if host_s == host_d:
            assert not rails
            continue
        assert rails == {dst % g}  # the destination GPU's rail, and only it
        local = [int(lk) for lk in path if lt.kind[lk] == LINK_KINDS.index("intra")]
        if src % g == dst % g:
            assert not local
        else:  # over NVLink to the GPU of the destination's rail on the source host, then out of its NIC
            assert [topo.node_name(int(lt.dst[lk])) for lk in local] == [f"h{host_s}.nvs", f"h{host_s}.gpu{dst % g}"]
            assert topo.node_name(int(lt.src[path[2]])) == f"h{host_s}.nic{dst % g}"


def test_forwarding_costs_nvlink_bytes_and_time(tmp_path):
    """A ring allreduce over 2 hosts x 2 GPUs: its host-to-host hops (GPU 1 -> GPU 2, GPU 3 -> GPU 0) cross
    rails, so each is forwarded over the sending host's NVLink to its GPU 0 first. No two messages of a step
    share a link, so the sliced ring keeps its closed form (tests/test_builders.py ``ring_time``; with many
    slices, 2(n-1) M/(nB) + alpha) with alpha the forwarded path's latency (two NVLink hops, NIC up and
    down), and links.parquet shows every forwarded byte on host 0's NVSwitch -> GPU 0 link."""
    size = 64 * 2**20
    result, _, out = cli_on_file(tmp_path, _spec(_topology(hosts=2, gpus=2), {
        "type": "collective", "op": "allreduce", "algorithm": "ring", "size": "64MiB"}), "run")
    assert result.exit_code == 0, result.output
    n, alpha = 4, 2 * 300e-9 + 2 * 1e-6
    call = pd.read_parquet(out / "collectives.parquet").iloc[0]
    assert call["duration_s"] == pytest.approx(2 * (n - 1) * size / (n * 400 * GBPS) + alpha, rel=1e-9)
    links = pd.read_parquet(out / "links.parquet").set_index(["src", "dst"])["bytes"]
    # GPU 1 -> GPU 2 is forwarded through host 0's GPU 0 (every one of the 2(n-1) steps); the ring's own hop
    # 0 -> 1 runs the other way (GPU 0 -> NVSwitch -> GPU 1), and 3 -> 0 arrives through GPU 0's own NIC
    assert links["h0.nvs", "h0.gpu0"] == 2 * (n - 1) * size / n


def test_dense_and_hierarchical_rings_on_rail_only_and_rail_optimised(tmp_path):
    """experiments/rail-only-dense.yaml in small: the rail-aligned hierarchical allreduce never leaves a
    rail, so it takes the same time on both fabrics; a flat ring's host-to-host hops cross rails and are
    forwarded, and the forwarded bytes are on the host links (host tier) of the rail-only fabric only."""
    import yaml
    from typer.testing import CliRunner

    from netsim.cli import app
    rail_opt = {"type": "leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 1, "gpus_per_host": 4,
                "nics_per_host": 4, "rail_optimized": True, "nic": {"bandwidth": "400Gbps", "latency": "1us"},
                "uplink": {"bandwidth": "400Gbps", "latency": "500ns", "count": 2},
                "intra_host": {"bandwidth": "450GB/s", "latency": "300ns"}}
    # the fluid model's rank-order flat ring crosses rails; the NCCL model's rings stay on them (no forwarding)
    data = {"name": "rails", "seed": 1, "model": "fluid", "topology": rail_opt, "placement": "sequential",
            "routing": "spray",
            "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "16MiB"},
            "variants": [{"name": "rail-optimised"}, {"name": "rail-only", "topology": {"from": str(
                tmp_path / "ro.yaml")}}],
            "sweep": {"workload.algorithm": ["ring", "hierarchical"]}}
    (tmp_path / "ro.yaml").write_text(yaml.safe_dump(_topology(hosts=4, gpus=4)))
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(tmp_path / "exp.yaml"), "--out", str(out), "--no-report"])
    assert result.exit_code == 0, result.output
    runs = pd.read_parquet(out / "runs.parquet")
    calls = pd.read_parquet(out / "collectives.parquet").merge(runs[["run_id", "variant", "workload.algorithm"]])
    time = calls.set_index(["variant", "workload.algorithm"])["duration_s"]
    assert time["rail-only", "hierarchical"] == pytest.approx(time["rail-optimised", "hierarchical"], rel=1e-6)
    assert time["rail-only", "ring"] == pytest.approx(time["rail-optimised", "ring"], rel=0.02)
    links = pd.read_parquet(out / "links.parquet").merge(runs[["run_id", "variant", "workload.algorithm"]])
    ring = links[links["workload.algorithm"] == "ring"]
    intra = ring[ring["kind"] == "intra"].groupby("variant")["bytes"].sum()
    assert intra["rail-only"] > intra["rail-optimised"]  # the forwarded bytes


def test_without_forwarding_a_pair_across_rails_is_one_clear_error(tmp_path):
    result, _, out = cli_on_file(tmp_path, _spec(_topology(forwarding=False)), "run")
    assert result.exit_code == 2 and "topology.forwarding" in result.output
    assert "different rails" in result.output and "forwarding: true" in result.output
    assert "Traceback" not in result.output and not out.exists()
    hierarchical = {"type": "collective", "op": "allreduce", "algorithm": "hierarchical", "size": "1MiB"}
    result, _, out = cli_on_file(tmp_path, _spec(_topology(forwarding=False), hierarchical), "run")
    assert result.exit_code == 0, result.output  # rail-aligned: no pair crosses rails


@pytest.mark.parametrize("extra, where, words", [
    ({"leaves_per_rail": 2}, "topology.spines_per_rail", "needs spines"),
    ({"uplink": {"bandwidth": "400Gbps"}}, "topology.uplink", "no spines"),
    ({"leaves_per_rail": 2, "spines_per_rail": 1}, "topology.uplink", "give uplink"),
    ({"nic": {"bandwidth": "200Gbps", "ports": 2}}, "topology.nic", "one port"),
])
def test_bad_rail_only_fabrics_get_one_clear_error(tmp_path, extra, where, words):
    topology = {**_topology(), **extra}
    result, _, _out = cli_on_file(tmp_path, _spec(topology), "validate")
    assert result.exit_code == 2 and where in result.output and words in result.output, result.output
    assert "Traceback" not in result.output


def test_netsim_topo_describes_rails():
    topo = _build(_topology(leaves=2, hosts=2, spines=2, gpus=4))[1]
    text = format_summary(summary(topo))
    assert "first 1 of 2 leaf positions" in text  # a cut across every rail, not between rails
    assert "ratio       1.000" in text
    assert "other rail, other host" in text
    topo = _build(_topology())[1]
    assert "every rail is one switch" in format_summary(summary(topo))

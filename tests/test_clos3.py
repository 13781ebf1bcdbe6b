"""Three-tier Clos fabrics (``topology: {type: clos3}``, issue 29): counts in closed form match the built
fabric, closed-form switch paths are exactly the fewest-hop paths of the graph, the core tier follows
from its oversubscription, bad input gets one clear error, and policies balance the core tier."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.config import ExperimentSpec
from netsim.engine import Environment, Fabric
from netsim.fabrics import build_topology, fabric_shape
from netsim.routing import Connection, make_routing
from netsim.topology import LINK_KINDS, LINK_TIERS, SWITCH_KINDS
from tests.conftest import cli_on_file, config_errors


def _topology(pods=2, leaves=2, spines=2, hosts=1, gpus=2, nics=2, cables=1, core=None, **extra) -> dict:
    return {"type": "clos3", "pods": pods, "leaves_per_pod": leaves, "spines_per_pod": spines,
            "hosts_per_leaf": hosts, "gpus_per_host": gpus, "nics_per_host": nics,
            "nic": {"bandwidth": "100Gbps"}, "uplink": {"bandwidth": "100Gbps", "count": cables},
            "core": core or {"bandwidth": "100Gbps", "switches": spines},
            "intra_host": {"bandwidth": "900GB/s"}, **extra}


def _spec(topology: dict, **extra) -> dict:
    return {"name": "clos3", "seed": 1, "topology": topology, "placement": "sequential", "routing": "ecmp",
            "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"}, **extra}


def _build(topology: dict):
    spec = ExperimentSpec.model_validate(_spec(topology)).topology
    return spec, build_topology(spec)


fabrics = st.builds(
    lambda pods, leaves, spines, hosts, cables, wiring, per, c2: _topology(
        pods=pods, leaves=leaves, spines=spines, hosts=hosts, cables=cables,
        core={"bandwidth": "100Gbps", "count": c2, "wiring": wiring,
              "switches": per * spines if wiring == "planes" else per}),
    st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(1, 2),
    st.sampled_from(["planes", "mesh"]), st.integers(1, 3), st.integers(1, 2))


@settings(max_examples=40, deadline=None)
@given(fabrics)
def test_counts_in_closed_form_are_the_built_fabric(topology):
    spec, topo = _build(topology)
    shape = fabric_shape(spec)
    kinds = [k for _n, k in topo.graph.nodes(data="kind")]
    assert shape.gpus == topo.n_gpus and shape.hosts == topo.n_hosts and shape.links == len(topo.links)
    assert shape.switches == sum(k in SWITCH_KINDS for k in kinds)
    assert kinds.count("core") == topo.params["cores"]
    # every spine-to-core cable is a core_up / core_down pair, reported in its own tier
    up, down = LINK_KINDS.index("core_up"), LINK_KINDS.index("core_down")
    assert (topo.links.kind == up).sum() == (topo.links.kind == down).sum() > 0
    assert LINK_TIERS["core_up"] == LINK_TIERS["core_down"] == "spine-core"


@settings(max_examples=30, deadline=None)
@given(fabrics, st.data())
def test_closed_form_paths_are_exactly_the_fewest_hop_paths(topology, data):
    """The switch paths the builder gives in closed form are the graph's fewest-hop link paths, and
    their number is the closed form of the shape (far pairs)."""
    spec, topo = _build(topology)
    src = data.draw(st.integers(0, topo.n_gpus - 1))
    dst = data.draw(st.integers(0, topo.n_gpus - 1))
    paths = topo.paths(src, dst)
    assert len(set(paths)) == len(paths) and len({len(p) for p in paths}) == 1
    links = topo.links
    for p in paths:  # each path is connected, from the source GPU to the destination GPU
        assert all(int(links.dst[a]) == int(links.src[b]) for a, b in itertools.pairwise(p))
    switches = topo._switch_graph
    leaf_a = topo.nic_ports[int(topo.gpu_nic[src])][0][1]
    leaf_b = topo.nic_ports[int(topo.gpu_nic[dst])][0][1]
    if leaf_a != leaf_b:
        expected = sorted(p for nodes in nx.all_shortest_paths(switches, leaf_a, leaf_b)
                          for p in itertools.product(*(switches.edges[u, v]["links"]
                                                       for u, v in itertools.pairwise(nodes))))
        assert topo.switch_paths(leaf_a, leaf_b) == expected
    if topo.graph.nodes[leaf_a]["pod"] != topo.graph.nodes[leaf_b]["pod"]:
        assert len(paths) == fabric_shape(spec).paths_far


def test_the_core_follows_from_its_oversubscription():
    """Meta's layout: 1:1 inside a pod, about 1:7 to the core (28 core switches, one cable from each
    spine): a spine has 192 x 400G down and 28 x 400G up."""
    _, topo = _build(_topology(leaves=192, spines=1, hosts=1, gpus=1, nics=1, pods=1,
                               core={"bandwidth": "100Gbps", "switches": 28, "wiring": "mesh"}))
    assert topo.params["oversubscription_core"] == pytest.approx(192 / 28)
    _, topo = _build(_topology(leaves=8, spines=2, core={"bandwidth": "100Gbps", "oversubscription": 2}))
    assert topo.params["cores"] == 8 and topo.params["cores_per_spine"] == 4  # 8 down / 2 = 4 up per spine
    assert topo.params["oversubscription_core"] == pytest.approx(2.0)


@pytest.mark.parametrize("core, where, words", [
    ({"bandwidth": "100Gbps", "oversubscription": 3}, "topology", "does not divide the ports"),
    ({"bandwidth": "100Gbps", "oversubscription": 2, "switches": 2}, "topology", "not both"),
    ({"bandwidth": "100Gbps"}, "topology", "core switch count"),
    ({"bandwidth": "100Gbps", "switches": 3}, "topology.core.switches", "do not split into 2 planes"),
    ({"bandwidth": "100Gbps", "switches": 2, "wiring": "ring"}, "topology.core.wiring", "planes"),
])
def test_bad_core_tiers_get_one_clear_error(tmp_path, core, where, words):
    data = _spec(_topology(leaves=4, core=core))
    errors = config_errors(data)
    assert any(words in str(e) for e in errors), errors
    result, _, out = cli_on_file(tmp_path, data, "run")
    assert result.exit_code == 2 and "Traceback" not in result.output and words in result.output
    assert where in result.output and not out.exists()


@pytest.mark.parametrize("policy", ["spray", "c4p", "ethereal"])
def test_policies_balance_the_core_tier(policy):
    """Two pods of two leaves (one GPU each) and a 1:1 core of two planes: every GPU sends 1 GB to the
    GPU at the same place in the other pod. Spraying, C4P and Ethereal spread the two cross-pod
    flows of each leaf over its two spines and their planes: all at line rate, 1 s (ECMP may collide)."""
    _, topo = _build(_topology(gpus=1, nics=1, core={"bandwidth": "100Gbps", "switches": 2}))
    env = Environment()
    fabric = Fabric(env, topo, make_routing(policy, topo, np.random.default_rng(0)), record_flows=False)
    n = topo.n_gpus
    for a in range(n):
        b = (a + n // 2) % n
        fabric.send(a, b, 12.5e9, Connection(a, b))
    env.run()
    assert env.now == pytest.approx(1.0, rel=1e-6)


@settings(max_examples=12, deadline=None)
@given(k=st.sampled_from([2, 3, 4, 6, 8]), k2=st.sampled_from([2, 3, 4, 6, 8]), seed=st.integers(0, 2**16))
def test_a_shared_hash_seed_polarises_the_next_tier(k, k2, seed):
    """Per-hop ECMP (REFERENCE §8): with one seed for every switch, a leaf with k next hops sends spine
    j only flows whose hash is j mod k, and that spine's k' next hops get hash mod k': only
    k'/gcd(k, k') of them ever carry traffic. A seed per switch uses all k'."""
    import math
    topo = build_topology(ExperimentSpec.model_validate(_spec(_topology(
        pods=2, leaves=1, spines=k, hosts=1, gpus=1, nics=1,
        core={"bandwidth": "100Gbps", "switches": k * k2, "wiring": "planes"}))).topology)
    up = LINK_KINDS.index("core_up")
    used = {}
    for seeds in ("shared", "switch"):
        policy = make_routing("ecmp", topo, np.random.default_rng(seed), {"hashing": "hop", "seeds": seeds})
        per_spine: dict[int, set[int]] = {}
        for channel in range(32 * k * k2):  # many flows: every next hop a seed may use is used
            (path, _), = policy.paths(Connection(0, 1, channel=channel))
            (core_link,) = [lk for lk in path if topo.links.kind[lk] == up]
            per_spine.setdefault(int(topo.links.src[core_link]), set()).add(core_link)
        used[seeds] = {len(v) for v in per_spine.values()}
    assert used["shared"] == {k2 // math.gcd(k, k2)}
    assert used["switch"] == {k2}


def test_the_meta_24k_preset_has_the_published_counts():
    """REFERENCE §8: racks of 2 servers x 8 GPUs under one switch, 192 racks = a pod of 3,072 GPUs,
    non-blocking inside, 8 pods = 24,576 GPUs joined at about 1:7 (16 CTSWs per pod, 28 ATSWs: unconfirmed)."""
    import yaml
    from pathlib import Path
    data = yaml.safe_load((Path(__file__).resolve().parents[1] / "topologies/meta-24k.yaml").read_text())
    spec, topo = _build(data)
    assert topo.n_gpus == 24_576 and topo.n_gpus // data["pods"] == 3_072
    assert data["hosts_per_leaf"] * data["gpus_per_host"] == 16
    assert topo.params["oversubscription"] == 1.0 and 6.5 < topo.params["oversubscription_core"] < 7.5
    kinds = [k for _n, k in topo.graph.nodes(data="kind")]
    assert (kinds.count("leaf"), kinds.count("spine"), kinds.count("core")) == (8 * 192, 8 * 16, 28)
    assert fabric_shape(spec).links == len(topo.links)


@pytest.mark.parametrize("sus, spines", [(1, 4), (2, 8), (3, 16), (4, 16)])
def test_the_superpod_presets_have_nvidias_counts(sus, spines):
    """DGX SuperPOD H100 (REFERENCE §8): per SU 8 leaves, one per rail; spines 4/8/16/16 for 1-4 SUs;
    leaf-spine 1:1; NIC r of every node on leaf r of its SU (32 node slots per SU)."""
    import yaml
    from pathlib import Path
    data = yaml.safe_load((Path(__file__).resolve().parents[1] / f"topologies/superpod-h100-{sus}su.yaml").read_text())
    spec = ExperimentSpec.model_validate(_spec(data)).topology
    topo = build_topology(spec)
    kinds = [k for _n, k in topo.graph.nodes(data="kind")]
    assert (kinds.count("leaf"), kinds.count("spine")) == (8 * sus, spines)
    assert topo.n_hosts == 32 * sus and topo.params["oversubscription"] == 1.0
    for h in range(topo.n_hosts):
        for r, nic in enumerate(topo.hosts[h][3][:8]):
            (_up, leaf, _down), = topo.nic_ports[nic]
            assert topo.node_name(leaf) == f"leaf{(h // 32) * 8 + r}"


def test_the_spectrum_x_preset_has_its_derived_counts():
    """Spectrum-X-like (derived, unconfirmed): 512 hosts x 8 GPUs, 64 leaves in 8 rail groups of 8, 32 spines,
    2 cables per leaf-spine pair; a leaf has 64 x 400G down and 64 x 400G up (1:1 in line rate)."""
    from collections import Counter
    from pathlib import Path

    import yaml

    data = yaml.safe_load((Path(__file__).resolve().parents[1] / "topologies/spectrum-x-4k.yaml").read_text())
    spec, topo = _build(data)
    kinds = [k for _n, k in topo.graph.nodes(data="kind")]
    assert (topo.n_gpus, topo.n_hosts, kinds.count("leaf"), kinds.count("spine")) == (4_096, 512, 64, 32)
    link_kinds = [LINK_KINDS[k] for k in topo.links.kind]
    assert (link_kinds.count("nic_up"), link_kinds.count("up")) == (4_096, 64 * 32 * 2)
    up = LINK_KINDS.index("up")
    cables = Counter(zip(topo.links.src[topo.links.kind == up].tolist(), topo.links.dst[topo.links.kind == up].tolist()))
    assert len(cables) == 64 * 32 and set(cables.values()) == {2}  # every leaf to every spine, twice
    p = topo.params
    leaf_down_bps = p["hosts_per_leaf"] * p["nics_per_host"] * p["nic_bandwidth_Bps"] * 8
    assert leaf_down_bps == p["spines"] * p["uplinks_per_spine"] * p["uplink_bandwidth_Bps"] * 8 == 64 * 400e9
    assert p["oversubscription"] == 1.0
    for h in range(topo.n_hosts):
        leaves = [topo.node_name(topo.nic_ports[nic][0][1]) for nic in topo.hosts[h][3][:8]]
        assert leaves == [f"leaf{(h // 64) * 8 + r}" for r in range(8)]  # rail r of rail group h // 64
    assert fabric_shape(spec).links == len(topo.links)


def test_topology_aware_placement_keeps_a_job_inside_a_pod():
    """Meta's scheduler keeps model-parallel groups inside a pod: 'topology' placement picks the fullest
    pod that still holds the job (best fit), fills it leaf by leaf, and spills pod by pod."""
    from netsim.placement import make_placement
    _, topo = _build(_topology(pods=3, leaves=4, spines=2, hosts=2, gpus=4, nics=4))  # 32 GPUs per pod
    policy = make_placement("topology", {}, path="placement")
    rng = np.random.default_rng(0)
    pod_of = [topo.graph.nodes[topo.nic_ports[int(topo.gpu_nic[g])][0][1]]["pod"] for g in range(topo.n_gpus)]
    free = np.array([g for g in range(topo.n_gpus) if not (pod_of[g] == 1 and g % 32 < 8)])  # pod 1: 24 free
    gpus = policy.place(20, topo, rng, free)  # fits pod 1 (24 free) and pods 0, 2 (32): best fit is pod 1
    assert {pod_of[g] for g in gpus} == {1}
    gpus = policy.place(40, topo, rng)  # more than a pod: one pod whole, then the next
    assert sorted(pod_of[g] for g in gpus).count(0) == 32 and {pod_of[g] for g in gpus} == {0, 1}


def test_the_dashboard_aggregates_by_tier_and_pod(tmp_path):
    """Readable at any size: load per tier (spine-core its own tier) and the bytes between pods, which
    add up to the flow records."""
    import pandas as pd
    from netsim.report.dashboard import build_figures
    data = _spec(_topology(pods=3, gpus=1, nics=1), placement={"type": "random", "by": "host"},
                 variants=[{"name": "ecmp", "routing": "ecmp"}, {"name": "spray", "routing": "spray"}])
    result, _, out = cli_on_file(tmp_path, data, "run")
    assert result.exit_code == 0, result.output
    figs = {f.layout.title.text.split(" (")[0].split(":")[0]: f for f in build_figures(out)}
    (table,) = [f for t, f in figs.items() if t.startswith("Load per tier")]
    assert "spine-core" in table.data[0].cells.values[1]
    (pods,) = [f for t, f in figs.items() if t.startswith("Traffic between pods")]
    z = np.array(pods.data[0].z)
    flows = pd.read_parquet(out / "flows.parquet")
    first = pd.read_parquet(out / "runs.parquet")["run_id"].iloc[0]
    assert z.shape == (3, 3) and z.sum() * 1e9 == pytest.approx(flows.loc[flows["run_id"] == first, "size_bytes"].sum())


def test_netsim_show_describes_a_presets_counts():
    """`netsim show` on a topology file describes the fabric as `netsim topo` does (issue 29's wording)."""
    from typer.testing import CliRunner

    from netsim.cli import app
    from pathlib import Path
    path = str(Path(__file__).resolve().parents[1] / "topologies/superpod-h100-1su.yaml")
    shown, topo = CliRunner().invoke(app, ["show", path]), CliRunner().invoke(app, ["topo", path])
    assert shown.exit_code == topo.exit_code == 0 and shown.output == topo.output
    assert "256 GPUs" in shown.output and "bisection" in shown.output

"""NIC profiles, mixed NICs in one fabric, bonded dual-ToR NICs, multi-cluster transport selection."""

import numpy as np
import pytest

from netsim.config import load_topology
from netsim.engine import Environment, Fabric
from netsim.errors import ConfigError, NetsimError
from netsim.fabrics import build_topology
from netsim.routing import make_routing
from netsim.topology.nic import BUILTIN_NICS, nic_profile, same_fabric
from netsim.topology.topology import LINK_KINDS
from tests.conftest import make_leaf_spine

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def test_builtin_profiles_cover_the_issue():
    for name in ("ib-hdr-200", "ib-ndr-400", "roce-100", "roce-200", "roce-400", "eth-tcp-25", "eth-tcp-100",
                 "slingshot-200", "roce-2x200-bonded"):
        assert name in BUILTIN_NICS
    assert nic_profile("ib-ndr-400").port_rate_Bps == 50e9
    assert nic_profile("eth-tcp-25").efficiency < nic_profile("roce-200").efficiency  # TCP below RDMA
    assert same_fabric(nic_profile("roce-100"), nic_profile("roce-400"))
    assert not same_fabric(nic_profile("ib-hdr-200"), nic_profile("roce-200"))
    with pytest.raises(ConfigError, match="built-in: ib-hdr-200"):
        nic_profile("ib-xdr-800")


def test_nic_capacity_is_line_rate_times_efficiency_and_latency_is_per_message():
    ib = nic_profile("ib-hdr-200")
    topo = make_leaf_spine(nic=ib)
    env = Environment()
    fab = Fabric(env, topo, make_routing("ecmp", topo, np.random.default_rng(0)))
    env.run(fab.send(0, 1, 1e9))
    assert env.now == pytest.approx(1e9 / (25e9 * 0.97) + ib.latency_s)


def test_mixed_nics_in_one_leaf_spine():
    topo = make_leaf_spine(nic=nic_profile("roce-400"), host_nics={1: nic_profile("roce-100")})
    caps = {topo.link_name(i): topo.links.capacity_Bps[i] for i in range(len(topo.links))}
    assert caps["h0.nic0->leaf0"] == pytest.approx(50e9 * 0.94)
    assert caps["h1.nic0->leaf0"] == pytest.approx(12.5e9 * 0.94)
    assert topo.transport(0, 1).family == "roce"


def test_mixed_families_without_ethernet_is_a_clear_error():
    topo = make_leaf_spine(nic=nic_profile("ib-hdr-200"), host_nics={1: nic_profile("roce-200")})
    with pytest.raises(NetsimError, match="different families"):
        topo.paths(0, 1)


def test_bonded_dual_port_nics_reach_two_leaves():
    topo = build_topology(load_topology(ROOT / "topologies" / "leaf-spine-dual-tor.yaml"))
    for nic in topo.hosts[0][3]:
        leaves = {topo.node_name(sw) for _up, sw, _down in topo.nic_ports[nic]}
        assert leaves == {"leaf0", "leaf1"}
    assert {topo.node_name(sw) for _u, sw, _d in topo.nic_ports[topo.hosts[4][3][0]]} == {"leaf0", "leaf1"}
    assert {topo.node_name(sw) for _u, sw, _d in topo.nic_ports[topo.hosts[8][3][0]]} == {"leaf2", "leaf3"}
    # same leaf pair: one hop through either leaf (two paths); other pair: through the spines
    assert len(topo.paths(0, 4 * 8)) == 2
    assert all(len(p) == 4 for p in topo.paths(0, 8 * 8))
    assert topo.params["oversubscription"] == pytest.approx(1.0, rel=0.07)  # efficiency 0.94 on the NICs


def test_dual_port_needs_an_even_leaf_count():
    with pytest.raises(ConfigError, match="multiple of the port count"):
        make_leaf_spine(leaves=3, nic=nic_profile("roce-2x200-bonded"))


@pytest.fixture(scope="module")
def holmes():
    return build_topology(load_topology(ROOT / "topologies" / "holmes-ib-roce.yaml"))


def test_transport_selection_same_family_rdma_mixed_tcp_over_ethernet(holmes):
    t = holmes
    ib_a, ib_b, roce_a, roce_b = 0, 8, 32, 40     # GPU 0 of hosts 0 and 1 (IB), 4 and 5 (RoCE)
    assert t.transport(ib_a, ib_b).name == "ib-hdr-200"
    assert t.transport(roce_a, roce_b).name == "roce-200"
    assert t.transport(ib_a, roce_a).name == t.transport(roce_b, ib_b).name == "eth-tcp-25"
    (tcp_path,) = t.paths(ib_a, roce_a)
    names = [t.link_name(link) for link in tcp_path]
    assert names == ["ib.h0.nic4->ib.eth", "ib.eth->eth-core", "eth-core->roce.eth", "roce.eth->roce.h4.nic2"]
    assert all("eth" not in t.link_name(link) for p in t.paths(ib_a, ib_b) for link in p)
    assert t.message_overhead_s(ib_a, roce_a) == nic_profile("eth-tcp-25").latency_s


def test_cross_cluster_message_runs_at_tcp_speed(holmes):
    env = Environment()
    fab = Fabric(env, holmes, make_routing("ecmp", holmes, np.random.default_rng(0)))
    env.run(fab.send(0, 32, 1e9))
    tcp = nic_profile("eth-tcp-25")
    assert env.now == pytest.approx(1e9 / tcp.port_capacity_Bps + tcp.latency_s + 2 * 2e-6)


def test_yaml_nic_definitions(tmp_path):
    from netsim.config import ExperimentSpec
    base = {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2, "gpus_per_host": 1,
            "nics_per_host": 1, "uplink": {"bandwidth": "100Gbps"}, "intra_host": {"bandwidth": "100GB/s"}}
    wl = {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"}
    for nic, rate in ((
            "roce-200", 25e9 * 0.94), ({"profile": "roce-200", "efficiency": 0.5}, 12.5e9),
            ({"bandwidth": "100Gbps", "efficiency": 0.8, "transport": "tcp", "family": "ethernet"}, 10e9)):
        spec = ExperimentSpec.model_validate({"name": "n", "topology": {**base, "nic": nic}, "workload": wl})
        t = build_topology(spec.topology)
        assert t.links.capacity_Bps[t.links.kind == LINK_KINDS.index("nic_up")][0] == pytest.approx(rate)
    from netsim.config import parse_spec
    with pytest.raises(ConfigError, match="topology.nic.profile: unknown NIC profile 'roce-9000'"):
        parse_spec({"name": "n", "topology": {**base, "nic": "roce-9000"}, "workload": wl})

"""Multi-cluster host numbering: ``blocked`` (cluster by cluster) and ``interleaved`` (round robin)."""

import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.errors import ConfigError
from netsim.topology.multicluster import host_order, multi_cluster
from netsim.topology.nic import nic_profile

IB, ROCE, TCP = nic_profile("ib-hdr-200"), nic_profile("roce-200"), nic_profile("eth-tcp-25")
RDMA = [IB, ROCE, nic_profile("slingshot-200")]  # three families: no RDMA path between clusters


def cluster(name, nic, *, leaves=1, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=1, **kw):
    return dict(name=name, leaves=leaves, spines=1, hosts_per_leaf=hosts_per_leaf, gpus_per_host=gpus_per_host,
                nics_per_host=nics_per_host, nic=nic, uplink_bandwidth_Bps=100e9, intra_bandwidth_Bps=300e9, **kw)


def build(clusters, **kw):
    return multi_cluster(clusters, interconnect_Bps=25e9, **kw)


def names(t, kind):
    return [t.node_name(n) for n, k in t.graph.nodes(data="kind") if k == kind]


def host_of_name(name):
    """``ib.h12.nic0`` -> 12."""
    return int(name.split(".")[-2][1:])


def cluster_of_host(t, h):
    """Cluster name of host ``h`` (the prefix of its NIC nodes)."""
    return t.node_name(t.hosts[h][3][0]).split(".")[0]


def rdma_profile(t, h):
    """NIC profile of host ``h``'s first (RDMA) NIC."""
    return t.nic_profile[t.hosts[h][3][0]]


def assert_same_topology(a, b):
    """Everything a user of the Topology sees is the same (name, graph, link table, hosts, paths)."""
    assert a.name == b.name and a.describe() == b.describe()
    assert list(a.graph.nodes(data=True)) == list(b.graph.nodes(data=True))
    assert list(a.graph.edges(data=True)) == list(b.graph.edges(data=True))
    for field in ("src", "dst", "capacity_Bps", "latency_s", "kind"):
        np.testing.assert_array_equal(getattr(a.links, field), getattr(b.links, field))
    assert [(m.name, g, base, nics) for m, g, base, nics in a.hosts] == \
        [(m.name, g, base, nics) for m, g, base, nics in b.hosts]
    np.testing.assert_array_equal(a.gpu_host, b.gpu_host)
    np.testing.assert_array_equal(a.gpu_nic, b.gpu_nic)
    assert a.tcp_nic == b.tcp_nic and a.nic_ports == b.nic_ports
    assert {k: p.name for k, p in a.nic_profile.items()} == {k: p.name for k, p in b.nic_profile.items()}
    for src, dst in [(0, 1), (0, a.n_gpus - 1), (a.n_gpus - 1, 2), (3, a.n_gpus // 2)]:
        assert a.paths(src, dst) == b.paths(src, dst)
        assert a.transport(src, dst) == b.transport(src, dst)


# ------------------------------------------------------------------------------------------- blocked

def test_blocked_is_the_default_and_numbers_hosts_cluster_by_cluster():
    ib = cluster("ib", IB, leaves=2, hosts_per_leaf=2, gpus_per_host=4, nics_per_host=2,
                 host_nics={1: IB}, nic_bandwidth_overrides={(2, 1): 10e9})
    roce = cluster("roce", ROCE, hosts_per_leaf=3, gpus_per_host=2)
    default, blocked = build([ib, roce]), build([ib, roce], numbering="blocked")
    assert_same_topology(default, blocked)
    assert default.params["numbering"] == "blocked" and default.describe()["numbering"] == "blocked"
    assert default.name == "multi_cluster(ib(ib-hdr-200) + roce(roce-200))"
    np.testing.assert_array_equal(default.gpu_host, [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4 + [4, 4, 5, 5, 6, 6])
    assert [cluster_of_host(default, h) for h in range(default.n_hosts)] == ["ib"] * 4 + ["roce"] * 3
    assert [first for _m, first, *_ in default.hosts] == [0, 4, 8, 12, 16, 18, 20]
    assert [host_of_name(n) for n in names(default, "nic")] == [h for h in range(7) for _ in range(3 if h < 4 else 2)]
    assert default.tcp_nic == {0: 2, 1: 2, 2: 2, 3: 2, 4: 1, 5: 1, 6: 1}
    # the per-NIC override stays on local host 2 of the ib cluster (global host 2 here)
    nic = default.hosts[2][3][1]
    assert {default.links.capacity_Bps[up] for up, _sw, _down in default.nic_ports[nic]} == {10e9}


def test_interleaving_a_single_cluster_changes_nothing_but_the_label():
    ib = cluster("ib", IB, leaves=2, hosts_per_leaf=2)
    a, b = build([ib]), build([ib], numbering="interleaved")
    assert b.params["numbering"] == "interleaved" and b.name == a.name[:-1] + ", interleaved hosts)"
    b.name, b.params = a.name, a.params
    assert_same_topology(a, b)


# --------------------------------------------------------------------------------------- interleaved

@pytest.fixture(scope="module")
def mixed():
    """2 IB hosts and 2 RoCE hosts, 2 GPUs each, interleaved: ib.h0 roce.h1 ib.h2 roce.h3."""
    return build([cluster("ib", IB, nics_per_host=2), cluster("roce", ROCE)], numbering="interleaved")


def test_interleaved_hosts_alternate_between_the_clusters(mixed):
    assert [cluster_of_host(mixed, h) for h in range(4)] == ["ib", "roce", "ib", "roce"]
    assert [rdma_profile(mixed, h).family for h in range(4)] == ["infiniband", "roce"] * 2
    assert [first for _m, first, *_ in mixed.hosts] == [0, 2, 4, 6]
    np.testing.assert_array_equal(mixed.gpu_host, [0, 0, 1, 1, 2, 2, 3, 3])
    assert mixed.params["numbering"] == "interleaved" and mixed.describe()["numbering"] == "interleaved"
    assert mixed.name == "multi_cluster(ib(ib-hdr-200) + roce(roce-200), interleaved hosts)"


def test_node_names_carry_the_global_host_number(mixed):
    for h, (model, first, _base, nics) in enumerate(mixed.hosts):
        prefix = f"{cluster_of_host(mixed, h)}.h{h}"
        assert [mixed.node_name(n) for n in nics] == [f"{prefix}.nic{r}" for r in range(model.n_nics)]
        assert all(mixed.graph.nodes[n]["host"] == h for n in nics)
        for i in range(model.n_gpus):
            node = next(n for n, d in mixed.graph.nodes(data=True)
                        if d["kind"] == "gpu" and d["host"] == h and d["local"] == i)
            assert mixed.node_name(node) == f"{prefix}.gpu{i}"
    assert sorted(names(mixed, "gpu")) == sorted(f"{c}.h{h}.gpu{i}" for h, c in enumerate(["ib", "roce"] * 2)
                                                 for i in range(2))


def test_per_host_nics_and_tcp_nic_follow_the_global_index(mixed):
    # ib hosts have 2 RDMA NICs + Ethernet (local index 2), roce hosts 1 + Ethernet (local index 1)
    assert mixed.tcp_nic == {0: 2, 1: 1, 2: 2, 3: 1}
    for h, (_m, _first, _base, nics) in enumerate(mixed.hosts):
        cname = cluster_of_host(mixed, h)
        assert mixed.nic_profile[nics[mixed.tcp_nic[h]]] == TCP
        assert mixed.node_name(mixed.nic_ports[nics[mixed.tcp_nic[h]]][0][1]) == f"{cname}.eth"
        assert {mixed.nic_profile[n] for n in nics[:-1]} == {IB if cname == "ib" else ROCE}
        assert {mixed.node_name(sw) for n in nics[:-1] for _up, sw, _down in mixed.nic_ports[n]} == {f"{cname}.leaf0"}
    assert [mixed.node_name(mixed.nic_of(g)) for g in range(8)] == \
        ["ib.h0.nic0", "ib.h0.nic1", "roce.h1.nic0", "roce.h1.nic0",
         "ib.h2.nic0", "ib.h2.nic1", "roce.h3.nic0", "roce.h3.nic0"]


def test_transport_is_the_cluster_fabric_inside_a_cluster_and_tcp_across(mixed):
    assert mixed.transport(0, 4) == IB and mixed.transport(5, 1) == IB  # ib.h0 <-> ib.h2
    assert mixed.transport(2, 6) == ROCE and mixed.transport(7, 3) == ROCE  # roce.h1 <-> roce.h3
    for a, b in [(0, 2), (2, 0), (1, 7), (4, 3), (6, 5)]:
        assert mixed.transport(a, b) == TCP
    assert mixed.transport(0, 1) is None


def test_every_gpu_reaches_every_other_gpu(mixed):
    host = dict(mixed.graph.nodes(data="host"))
    for a in range(mixed.n_gpus):
        for b in range(mixed.n_gpus):
            paths = mixed.paths(a, b)
            assert paths, (a, b)
            if a == b:
                continue
            for p in paths:  # a connected walk from a node of a's host to a node of b's host
                assert host[int(mixed.links.src[p[0]])] == mixed.gpu_host[a]
                assert host[int(mixed.links.dst[p[-1]])] == mixed.gpu_host[b]
                assert all(mixed.links.dst[x] == mixed.links.src[y] for x, y in zip(p, p[1:]))
            same = cluster_of_host(mixed, int(mixed.gpu_host[a])) == cluster_of_host(mixed, int(mixed.gpu_host[b]))
            if mixed.gpu_host[a] != mixed.gpu_host[b]:
                through_core = any("eth-core" in mixed.link_name(x) for x in paths[0])
                assert through_core != same, (a, b)


def test_uneven_clusters_skip_the_exhausted_one():
    assert host_order([3, 1], "interleaved") == [(0, 0), (1, 0), (0, 1), (0, 2)]
    assert host_order([1, 3, 2], "interleaved") == [(0, 0), (1, 0), (2, 0), (1, 1), (2, 1), (1, 2)]
    t = build([cluster("ib", IB, hosts_per_leaf=3), cluster("roce", ROCE, hosts_per_leaf=1)],
              numbering="interleaved")
    assert [cluster_of_host(t, h) for h in range(4)] == ["ib", "roce", "ib", "ib"]
    assert [host_of_name(t.node_name(nics[0])) for _m, _f, _b, nics in t.hosts] == [0, 1, 2, 3]
    assert sorted(names(t, "nic")) == sorted(["ib.h0.nic0", "ib.h0.nic1", "roce.h1.nic0", "roce.h1.nic1",
                                              "ib.h2.nic0", "ib.h2.nic1", "ib.h3.nic0", "ib.h3.nic1"])
    assert t.transport(4, 6) == IB and t.transport(0, 2) == TCP and t.transport(2, 7) == TCP


def test_different_gpus_per_host_keep_gpu_ids_cumulative_in_host_order():
    t = build([cluster("ib", IB, gpus_per_host=4, nics_per_host=2), cluster("roce", ROCE, hosts_per_leaf=3,
                                                                           gpus_per_host=1)],
              numbering="interleaved")
    # order: ib.h0 (4 GPUs), roce.h1 (1), ib.h2 (4), roce.h3 (1), roce.h4 (1)
    assert [cluster_of_host(t, h) for h in range(5)] == ["ib", "roce", "ib", "roce", "roce"]
    assert [first for _m, first, *_ in t.hosts] == [0, 4, 5, 9, 10]
    assert [m.n_gpus for m, *_ in t.hosts] == [4, 1, 4, 1, 1]
    np.testing.assert_array_equal(t.gpu_host, [0, 0, 0, 0, 1, 2, 2, 2, 2, 3, 4])
    assert t.n_gpus == 11
    assert t.transport(0, 5) == IB and t.transport(4, 9) == ROCE and t.transport(3, 4) == TCP
    assert t.node_name(t.nic_of(8)) == "ib.h2.nic1" and t.node_name(t.nic_of(10)) == "roce.h4.nic0"
    assert t.paths(10, 0) and t.paths(8, 1)


def test_local_host_options_stay_local_when_interleaved():
    """``host_nics`` / ``nic_bandwidth_overrides`` keys are host indices inside their cluster."""
    ib = cluster("ib", IB, hosts_per_leaf=3, nic_bandwidth_overrides={(1, 0): 10e9})
    t = build([ib, cluster("roce", ROCE, hosts_per_leaf=3)], numbering="interleaved")
    slow = [h for h, (_m, _f, _b, nics) in enumerate(t.hosts)
            if t.links.capacity_Bps[t.nic_ports[nics[0]][0][0]] == 10e9]
    assert slow == [2]  # ib's local host 1 is global host 2 (ib.h0, roce.h1, ib.h2, ...)


def test_unknown_numbering_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        build([cluster("ib", IB)], numbering="random")
    assert err.value.path == "topology.numbering"
    assert "'random'" in err.value.message and "blocked" in err.value.message and "interleaved" in err.value.message
    with pytest.raises(ConfigError, match="topology.numbering"):
        host_order([2, 2], "Interleaved")


# ------------------------------------------------------------------------------------------ property

shapes = st.lists(st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(1, 3), st.integers(1, 2)),
                  min_size=1, max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes)
def test_interleaving_only_renumbers_the_hosts(shape):
    clusters = [cluster(f"c{i}", RDMA[i], leaves=leaves, hosts_per_leaf=hpl, gpus_per_host=gph, nics_per_host=nph)
                for i, (leaves, hpl, gph, nph) in enumerate(shape)]
    blocked, inter = build(clusters), build(clusters, numbering="interleaved")

    def host_summary(t, h):
        model, _first, _base, nics = t.hosts[h]
        return (cluster_of_host(t, h), model.n_gpus, model.n_nics, tuple(t.nic_profile[n].name for n in nics))

    # the same multiset of hosts, GPUs, NICs, nodes and links
    assert inter.n_hosts == blocked.n_hosts and inter.n_gpus == blocked.n_gpus
    assert Counter(host_summary(inter, h) for h in range(inter.n_hosts)) == \
        Counter(host_summary(blocked, h) for h in range(blocked.n_hosts))
    assert Counter(rdma_profile(inter, h).name for h in range(inter.n_hosts)) == \
        Counter(rdma_profile(blocked, h).name for h in range(blocked.n_hosts))
    assert len(inter.links) == len(blocked.links)
    assert Counter(zip(inter.links.capacity_Bps, inter.links.kind)) == \
        Counter(zip(blocked.links.capacity_Bps, blocked.links.kind))
    def strip(t):  # node names without the host number (c0.h3.gpu1 -> c0.h.gpu1)
        return Counter(re.sub(r"\.h\d+\.", ".h.", t.node_name(n)) for n in t.graph.nodes)

    assert strip(inter) == strip(blocked)

    # every host's GPUs are contiguous and in host order; names carry the global host number
    firsts = [first for _m, first, *_ in inter.hosts]
    sizes = [m.n_gpus for m, *_ in inter.hosts]
    assert firsts == list(np.cumsum([0, *sizes[:-1]]))
    np.testing.assert_array_equal(inter.gpu_host, np.repeat(np.arange(inter.n_hosts), sizes))
    for h, (_m, _f, _b, nics) in enumerate(inter.hosts):
        assert {host_of_name(inter.node_name(n)) for n in nics} == {h}
        assert inter.tcp_nic[h] == len(nics) - 1 and inter.nic_profile[nics[-1]] == TCP

    # the host order is the round robin of the clusters
    expected = host_order([leaves * hpl for leaves, hpl, _g, _n in shape], "interleaved")
    assert [cluster_of_host(inter, h) for h in range(inter.n_hosts)] == [f"c{c}" for c, _h in expected]
    # and the transport of a pair follows its clusters
    for a, b in [(0, inter.n_gpus - 1), (inter.n_gpus - 1, inter.n_gpus // 2)]:
        ha, hb = int(inter.gpu_host[a]), int(inter.gpu_host[b])
        if ha != hb:
            same = cluster_of_host(inter, ha) == cluster_of_host(inter, hb)
            assert inter.transport(a, b) == (rdma_profile(inter, ha) if same else TCP)
            assert inter.paths(a, b)

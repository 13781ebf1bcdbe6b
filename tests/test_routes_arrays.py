"""Routes as arrays: ``routes(batch)`` describes exactly what ``paths`` gives, for every policy and fabric.

The reference below rebuilds each connection's pieces from ``paths`` the way the Fabric's incidence
always has (one fluid flow over the union of the paths, weights summed with ``np.bincount``; or one
sub-flow per entry for an ``independent`` policy), and every float is compared for equality.
"""

import functools
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.engine.ideal import core_mask
from netsim.engine.model import ConnectionTable
from netsim.errors import ConfigError
from netsim.routing import ROUTING, Connection, make_routing
from netsim.routing.base import DECIDES, RoutingPolicy
from netsim.routing.routes import concat_routes, replace_rows, take_routes
from netsim.topology import LinkTable, Topology, leaf_spine
from netsim.topology import pathsets
from netsim.topology.dragonfly import dragonfly
from netsim.topology.multicluster import multi_cluster
from netsim.topology.nic import nic_profile
from netsim.topology.node import frontier_node

GB = 1e9
LATENCIES = {"nic_latency_s": 1.1e-6, "uplink_latency_s": 3.3e-7, "intra_latency_s": 1.7e-7, "intra_overhead_s": 2.3e-7}


@functools.cache
def fabric(name: str):
    """Small fabrics of every family, every link with a latency of its own (so that any two paths
    differ in latency, and sums are exact only if added in the same order)."""
    topo = _fabric(name)
    rng = np.random.default_rng(len(name))
    links = topo.links
    latency = rng.uniform(1e-7, 3e-6, len(links))
    table = LinkTable(links.src, links.dst, links.capacity_Bps, latency, links.kind)
    jittered = Topology(topo.name, topo.graph, table, topo.hosts, topo.nic_ports, topo.nic_profile,
                        topo.intra_overhead_s, topo.params, topo._switch_path_fn, topo.tcp_nic)
    for attr in ("switch_group", "group_switches", "group_cables", "local_link"):  # (dragonfly routing reads them)
        if hasattr(topo, attr):
            setattr(jittered, attr, getattr(topo, attr))
    return jittered


def _fabric(name: str):
    if name == "leaf_spine":
        return leaf_spine(leaves=3, spines=3, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=2, nic_bandwidth_Bps=GB,
                          uplink_bandwidth_Bps=GB, intra_bandwidth_Bps=10 * GB, uplinks_per_spine=2,
                          nic_overhead_s=2.9e-6, **LATENCIES)
    if name == "rail":
        return leaf_spine(leaves=4, spines=5, hosts_per_leaf=2, gpus_per_host=4, nics_per_host=2, nic_bandwidth_Bps=GB,
                          uplink_bandwidth_Bps=GB, intra_bandwidth_Bps=10 * GB, rail_optimized=True, **LATENCIES)
    if name == "dual_tor":
        return leaf_spine(leaves=4, spines=3, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=1,
                          nic=nic_profile("roce-2x200-bonded"), uplink_bandwidth_Bps=GB, intra_bandwidth_Bps=10 * GB,
                          **LATENCIES)
    if name == "multi_cluster":
        ib = {"name": "ib", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 2, "nics_per_host": 2,
              "nic": nic_profile("ib-hdr-200"), "uplink_bandwidth_Bps": GB, "intra_bandwidth_Bps": 10 * GB,
              "uplink_latency_s": 4.1e-7}
        roce = {**ib, "name": "roce", "spines": 1, "hosts_per_leaf": 1, "gpus_per_host": 4, "nics_per_host": 1,
                "nic": nic_profile("roce-2x200-bonded")}
        return multi_cluster([ib, roce], interconnect_Bps=GB, interconnect_latency_s=2.3e-6, eth_latency_s=1.3e-7,
                             intra_overhead_s=1.9e-7, numbering="interleaved")
    if name == "dragonfly":
        return dragonfly(groups=5, switches_per_group=4, hosts_per_switch=2, global_links_per_switch=2,
                         link_bandwidth_Bps=GB, local_latency_s=1.3e-7, global_latency_s=1.1e-6,
                         switch_latency_s=3.7e-7, nic_overhead_s=1.9e-6)
    if name == "frontier_like":
        return dragonfly(groups=3, switches_per_group=4, hosts_per_switch=1, global_links_between_groups=2,
                         link_bandwidth_Bps=GB, node=frontier_node(if_latency_s=1.1e-7, nic_link_latency_s=2.3e-7),
                         nics_on_switches=4, switch_latency_s=3.5e-7)
    raise KeyError(name)


FABRICS = ["leaf_spine", "rail", "dual_tor", "multi_cluster", "dragonfly", "frontier_like"]


def routes_file(topo, path, seed: int = 0) -> str:
    """A routes CSV listing a third of a fabric's GPU pairs (channel 0), some split over two paths."""
    rng = np.random.default_rng(seed)
    rows = ["src,dst,channel,job,comm,path_index,fraction"]
    for src in range(topo.n_gpus):
        for dst in range(topo.n_gpus):
            if rng.random() > 1 / 3:
                continue
            n = len(topo.paths(src, dst))
            if n > 1 and rng.random() < 0.5:
                a, b = rng.choice(n, size=2, replace=False)
                rows += [f"{src},{dst},0,0,0,{a},0.25", f"{src},{dst},0,0,0,{b},0.75"]
            else:
                rows.append(f"{src},{dst},0,0,0,{rng.integers(n)},")
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def make(name: str, topo, seed: int, tmp_path):
    """Policy ``name`` on ``topo`` (None when it does not apply to this family of fabric)."""
    options = {"file": routes_file(topo, tmp_path / f"routes-{id(topo)}.csv")} if name == "table" else None
    try:
        return make_routing(name, topo, np.random.default_rng(seed), options)
    except ConfigError:
        return None


def reference(topo, conn, routes, independent: bool) -> list[tuple]:
    """(links, weights, fraction, delay, n_paths) of each piece, as the Fabric's incidence built them."""
    overhead = topo.message_overhead_s(conn.src, conn.dst, conn.tcp)
    if independent and len(routes) > 1:
        return [(tuple(path), (1.0,) * len(path), frac, topo.path_latency_s(path) + overhead, 1)
                for path, frac in routes if frac > 0]
    if len(routes) == 1:
        links, weights = tuple(routes[0][0]), (1.0,) * len(routes[0][0])
    else:
        all_links = np.concatenate([np.asarray(p, dtype=np.int64) for p, _ in routes])
        fractions = np.concatenate([np.full(len(p), frac) for p, frac in routes])
        uniq, inverse = np.unique(all_links, return_inverse=True)
        summed = np.bincount(inverse, weights=fractions)
        keep = summed > 0
        links, weights = tuple(uniq[keep].tolist()), tuple(summed[keep].tolist())
    delay = max(topo.path_latency_s(p) for p, frac in routes if frac > 0) + overhead
    return [(links, weights, 1.0, delay, len(routes))]


def pieces(table, i: int) -> list[tuple]:
    out = []
    for p in table.pieces(i):
        links, weights = table.links(p)
        out.append((tuple(links.tolist()), tuple(weights.tolist()), float(table.frac[p]), float(table.delay[p]),
                    int(table.n_paths[p])))
    return out


def connections(n_gpus: int):
    conn = st.builds(Connection, st.integers(0, n_gpus - 1), st.integers(0, n_gpus - 1), st.integers(0, 2),
                     st.integers(0, 1), st.sampled_from([0, 0, 1, 2]), st.booleans())
    return st.lists(conn, min_size=1, max_size=40)


@pytest.mark.parametrize("policy", ROUTING.names())
@pytest.mark.parametrize("fabric_name", FABRICS)
def test_routes_describe_exactly_what_paths_gives(tmp_path, fabric_name, policy):
    """Two policies from one seed see the same batches (and faults): one answers ``routes(batch)``,
    the other ``plan(batch)`` (when it plans) and ``paths`` of each connection, as the Fabric asked."""
    topo = fabric(fabric_name)
    if make(policy, topo, 0, tmp_path) is None:
        pytest.skip(f"{policy} does not route a {fabric_name}")
    n_links = len(topo.links)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(batches=st.lists(connections(topo.n_gpus), min_size=1, max_size=3),
           faults=st.lists(st.one_of(st.none(), st.integers(0, n_links - 1)), min_size=3, max_size=3),
           seed=st.integers(0, 3))
    def check(batches, faults, seed):
        arrays, lists = make(policy, topo, seed, tmp_path), make(policy, topo, seed, tmp_path)
        for batch, fault in zip(batches, faults):
            if fault is not None:  # a link fails (or, one time in two, every link is back)
                state = {fault: 0.0} if fault % 2 else {}
                arrays.links_changed(state)
                lists.links_changed(state)
            table = arrays.routes(batch)
            if hasattr(lists, "plan"):
                lists.plan(batch)
            expected = [reference(topo, c, lists.paths(c), lists.independent) for c in batch]
            assert len(table) == len(batch)
            assert [pieces(table, i) for i in range(len(batch))] == expected

    check()


@pytest.mark.parametrize("policy, options", [("ecmp", None), ("split", {"ways": 3}), ("spray", None),
                                             ("table", None)])
@pytest.mark.parametrize("fabric_name", FABRICS)
def test_every_pair_in_one_batch_before_and_after_a_fault(tmp_path, fabric_name, policy, options):
    """The vectorised policies over a whole fabric at once (rows share templates, classes and
    latency patterns), then with the busiest link of the first routes failed."""
    topo = fabric(fabric_name)
    g = topo.n_gpus
    batch = [Connection(s, d, s % 2, 0, d % 3, (s + d) % 5 == 0) for s in range(g) for d in range(g)]
    if policy == "table":
        options = {"file": routes_file(topo, tmp_path / "routes.csv")}
    arrays, lists = (make_routing(policy, topo, np.random.default_rng(2), options) for _ in range(2))
    for fault in (False, True):
        table = arrays.routes(batch)
        expected = [reference(topo, c, lists.paths(c), lists.independent) for c in batch]
        assert [pieces(table, i) for i in range(len(batch))] == expected
        if not fault:
            busiest = int(np.bincount(table.link).argmax())
            arrays.links_changed({busiest: 0.0})
            lists.links_changed({busiest: 0.0})


@pytest.mark.parametrize("policy", ["ecmp", "split", "spray"])
def test_a_batch_routed_in_chunks_is_routed_as_one(monkeypatch, policy):
    from netsim.routing import ecmp, split, spray

    topo = fabric("dual_tor")
    batch = [Connection(s, d, s % 3) for s in range(topo.n_gpus) for d in range(topo.n_gpus)]
    whole = make_routing(policy, topo, np.random.default_rng(4)).routes(batch)
    for module, size in ((ecmp, 7), (split, 7), (spray, 5)):
        monkeypatch.setattr(module, "CHUNK", size)
    chunked = make_routing(policy, topo, np.random.default_rng(4)).routes(batch)
    assert all(np.array_equal(getattr(whole, f), getattr(chunked, f)) for f in whole.__dataclass_fields__)


@pytest.mark.parametrize("policy", ["ecmp", "split", "spray"])
def test_a_connection_table_gives_the_routes_of_its_connections(policy):
    topo = fabric("multi_cluster")
    ct = ConnectionTable()
    rng = np.random.default_rng(1)
    ct.add(rng.integers(0, topo.n_gpus, 50), rng.integers(0, topo.n_gpus, 50), rng.integers(0, 3, 50), 0,
           rng.integers(0, 2, 50), rng.random(50) < 0.3)
    a, b = (make_routing(policy, topo, np.random.default_rng(5)) for _ in range(2))
    got, expected = a.routes(ct), b.routes(ct.connections())
    assert all(np.array_equal(getattr(got, f), getattr(expected, f)) for f in got.__dataclass_fields__)


@pytest.mark.parametrize("policy", ROUTING.names())
def test_every_policy_follows_the_protocol(tmp_path, policy):
    for name in ("leaf_spine", "dragonfly"):
        routing = make(policy, fabric(name), 0, tmp_path)
        if routing is not None:
            assert isinstance(routing, RoutingPolicy)
            assert routing.decides in DECIDES and isinstance(routing.independent, bool)
            assert routing.reaction_s >= 0


@pytest.mark.parametrize("listed", [pathsets.LISTED_PATHS, 0])
@pytest.mark.parametrize("fabric_name", FABRICS)
def test_path_sets_are_the_topology_paths(monkeypatch, fabric_name, listed):
    """Every pair (both transports): the paths in order, their latencies, the slowest (from listed
    paths, or from the parts of every pair: ``listed`` 0), the union with its counts, the overheads."""
    monkeypatch.setattr(pathsets, "LISTED_PATHS", listed)
    topo = fabric(fabric_name)
    g = topo.n_gpus
    src, dst = np.divmod(np.arange(g * g), g)
    tcp = np.arange(g * g) % 3 == 0
    ps = topo.path_sets(src, dst, tcp)
    lists = [topo.paths(int(s), int(d), bool(t)) for s, d, t in zip(src, dst, tcp)]
    assert ps.n.tolist() == [len(p) for p in lists]
    _row, ptr, links = ps.all_links()
    flat = [p for paths in lists for p in paths]
    assert [tuple(links[ptr[i]:ptr[i + 1]].tolist()) for i in range(len(flat))] == flat
    assert ps.latency_s(ptr, links).tolist() == [topo.path_latency_s(p) for p in flat]
    assert ps.max_latency_s().tolist() == [max(map(topo.path_latency_s, paths)) for paths in lists]
    mptr, mlinks, counts = ps.merged()
    for i, paths in enumerate(lists):
        union, count = np.unique(np.concatenate([np.asarray(p, dtype=np.int64) for p in paths]), return_counts=True)
        assert mlinks[mptr[i]:mptr[i + 1]].tolist() == union.tolist()
        assert counts[mptr[i]:mptr[i + 1]].tolist() == count.tolist()
    # the same union without the switch-to-switch links a mask drops (the non-blocking core's)
    drop = core_mask(topo)
    dptr, dlinks, dcounts = ps.merged(drop)
    for i in range(len(lists)):
        kept = ~drop[mlinks[mptr[i]:mptr[i + 1]]]
        assert dlinks[dptr[i]:dptr[i + 1]].tolist() == mlinks[mptr[i]:mptr[i + 1]][kept].tolist()
        assert dcounts[dptr[i]:dptr[i + 1]].tolist() == counts[mptr[i]:mptr[i + 1]][kept].tolist()
    assert drop[mlinks].any()
    overheads = [topo.message_overhead_s(int(s), int(d), bool(t)) for s, d, t in zip(src, dst, tcp)]
    assert ps.overhead_s.tolist() == overheads == topo.message_overheads_s(src, dst, tcp).tolist()


def test_path_sets_raise_what_paths_raises():
    topo = leaf_spine(leaves=1, spines=1, hosts_per_leaf=2, gpus_per_host=1, nics_per_host=1, nic=nic_profile("ib-hdr-200"),
                      host_nics={1: nic_profile("roce-200")}, uplink_bandwidth_Bps=GB, intra_bandwidth_Bps=GB)
    with pytest.raises(Exception) as single:
        topo.paths(0, 1)
    with pytest.raises(type(single.value)) as batch:
        topo.path_sets([0, 0], [0, 1])
    assert str(batch.value) == str(single.value)


def test_take_concat_and_replace_keep_every_piece():
    topo = fabric("leaf_spine")
    policy = make_routing("split", topo, np.random.default_rng(0), {"ways": 3})
    conns = [Connection(s, d) for s in range(4) for d in range(8, 12)]
    table = policy.routes(conns)
    order = [5, 0, 0, 15, 3]
    assert [pieces(take_routes(table, order), i) for i in range(5)] == [pieces(table, i) for i in order]
    both = concat_routes([table, take_routes(table, order)])
    assert [pieces(both, i) for i in range(len(both))] == [pieces(table, i) for i in [*range(16), *order]]
    spray = make_routing("spray", topo, np.random.default_rng(0)).routes(conns[:2])
    swapped = replace_rows(table, [1, 4], spray)
    assert pieces(swapped, 1) == pieces(spray, 0) and pieces(swapped, 4) == pieces(spray, 1)
    assert pieces(swapped, 2) == pieces(table, 2)


def all_to_all(gpus: int):
    src, dst = np.divmod(np.arange(gpus * gpus), gpus)
    keep = src != dst
    return [Connection(int(s), int(d)) for s, d in zip(src[keep], dst[keep])]


def big_leaf_spine(k: int):
    return leaf_spine(leaves=k, spines=k, hosts_per_leaf=k, gpus_per_host=1, nics_per_host=1, nic_bandwidth_Bps=50 * GB,
                      uplink_bandwidth_Bps=50 * GB, intra_bandwidth_Bps=900 * GB, nic_latency_s=1e-6,
                      uplink_latency_s=5e-7, intra_latency_s=3e-7)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["ecmp", "spray"])
def test_a_256_gpu_all_to_all_is_routed_in_well_under_half_a_second(policy):
    topo = big_leaf_spine(16)
    conns = all_to_all(256)
    routing = make_routing(policy, topo, np.random.default_rng(1))
    routing.routes(conns[:10])  # (the fabric's switch paths are enumerated once per process)
    start = time.perf_counter()
    table = routing.routes(conns)
    assert time.perf_counter() - start < 0.5
    assert len(table) == 65_280


# ---------------------------------------------------------------------------- the routes file, read in bulk

VALID = 40  # how many times a valid cell is drawn for every invalid one
CELLS = {
    "src": ["0", "1", "2", "3"] * VALID + ["x", "", "-1", "4", "12", " 2", "+1", "99999999999"],
    "dst": ["4", "5", "6", "7"] * VALID + ["1", "0", "", "1_0", "3"],
    "channel": ["0"] * VALID + ["1", "", "z"],
    "job": ["", "0", "1"],
    "comm": ["", "0", "2"],
    "path": ["leaf0 spine0 leaf1", "leaf0>spine1>leaf1", " leaf0 spine2  leaf1"] * VALID
    + ["leaf1 spine0 leaf0", "leaf0 spine9 leaf1", ">", "leaf0", "h0.nic0"],
    "path_index": [str(i) for i in range(6)] * VALID + ["11", "q", "-1"],
    "fraction": [""] * VALID + ["0.5", "0.25", "0.75", "1"] * (VALID // 4) + ["0", "x", "1e-1"],
}
MODES = ["path"] * VALID + ["path_index"] * VALID + ["both", "neither"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(optional=st.sets(st.sampled_from(["job", "comm"])), data=st.data())
def test_the_bulk_reader_gives_what_the_row_by_row_reader_gives(tmp_path, optional, data):
    """Same routes, or the same error (the same first bad row, the same message)."""
    from netsim.routing.table import read_table
    from netsim.routing.table_rows import resolve, resolve_reference

    topo = fabric("leaf_spine")
    names = [c for c in CELLS if c not in ("job", "comm") or c in optional]

    def row(cells, mode):
        if mode != "both":
            cells["path" if mode == "path_index" else "path_index"] = ""
        if mode == "neither":
            cells["path"] = cells["path_index"] = ""
        return ",".join(cells[c] for c in names)

    rows = data.draw(st.lists(st.builds(row, st.fixed_dictionaries({c: st.sampled_from(CELLS[c]) for c in names}),
                                        st.sampled_from(MODES)), max_size=10))
    path = tmp_path / "routes.csv"
    path.write_text(",".join(names) + "\n" + "".join(r + "\n" for r in rows))

    def read(check):
        try:
            listed = read_table(path, topo, check)
        except ConfigError as exc:
            return exc.message
        return [(listed.connection(i), listed.routes(i)) for i in range(len(listed))]

    assert read(resolve) == read(resolve_reference)

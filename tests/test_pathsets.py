"""Path sets as arrays (``netsim/topology/pathsets.py``) on three-tier Clos fabrics: the classes built
from the closed-form switch-path arrays are exactly :meth:`Topology.paths` of the same fabric with its
switch paths searched in the graph (the networkx oracle), entry for entry and in order."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.topology import LinkTable, Topology
from netsim.topology.clos3 import clos3
from netsim.topology.nic import generic_nic, nic_profile
from netsim.topology.pathsets import sorted_rows

GB = 1e9


@st.composite
def clos3_fabrics(draw) -> Topology:
    """Small three-tier Clos of every shape (wiring, parallel cables, rails, dual-port NICs), every
    link with a latency of its own (so sums are exact only if added in the same order)."""
    spines = draw(st.integers(1, 3))
    wiring = draw(st.sampled_from(["planes", "mesh"]))
    dual = draw(st.booleans())
    nics = draw(st.integers(1, 2))
    rail = not dual and draw(st.booleans())
    leaves = draw(st.sampled_from([2, 4])) if dual or (rail and nics == 2) else draw(st.integers(1, 3))
    topo = clos3(pods=draw(st.integers(1, 3)), leaves_per_pod=leaves, spines_per_pod=spines,
                 hosts_per_leaf=draw(st.integers(1, 2)), gpus_per_host=draw(st.integers(1, 2)), nics_per_host=nics,
                 nic=nic_profile("roce-2x200-bonded") if dual else generic_nic(GB), uplink_bandwidth_Bps=GB,
                 uplinks_per_spine=draw(st.integers(1, 2)),
                 cores=spines * draw(st.integers(1, 2)) if wiring == "planes" else draw(st.integers(1, 3)),
                 core_bandwidth_Bps=GB, core_cables=draw(st.integers(1, 2)), core_wiring=wiring,
                 intra_bandwidth_Bps=10 * GB, rail_optimized=rail)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    links = topo.links
    table = LinkTable(links.src, links.dst, links.capacity_Bps, rng.uniform(1e-7, 3e-6, len(links)), links.kind)
    return Topology(topo.name, topo.graph, table, topo.hosts, topo.nic_ports, topo.nic_profile, topo.intra_overhead_s,
                    topo.params, topo._switch_path_fn, topo.tcp_nic)


def _searched(topo: Topology) -> Topology:
    """``topo`` with its switch paths searched in the switch graph instead of given in closed form."""
    return Topology(topo.name, topo.graph, topo.links, topo.hosts, topo.nic_ports, topo.nic_profile,
                    topo.intra_overhead_s, topo.params, None, topo.tcp_nic)


@settings(max_examples=40, deadline=None)
@given(clos3_fabrics())
def test_clos3_path_sets_are_the_searched_paths(topo):
    """Every GPU pair: the paths in order, their latencies and the slowest, the union with its
    counts, and the switches of each class entry."""
    oracle = _searched(topo)
    g = topo.n_gpus
    src, dst = np.divmod(np.arange(g * g), g)
    ps = topo.path_sets(src, dst)
    lists = [oracle.paths(int(s), int(d)) for s, d in zip(src, dst)]
    assert [topo.paths(int(s), int(d)) for s, d in zip(src, dst)] == lists
    assert ps.n.tolist() == [len(p) for p in lists]
    _row, ptr, links = ps.all_links()
    flat = [p for paths in lists for p in paths]
    assert [tuple(links[ptr[i]:ptr[i + 1]].tolist()) for i in range(len(flat))] == flat
    assert ps.latency_s(ptr, links).tolist() == [oracle.path_latency_s(p) for p in flat]
    slowest = [max(map(oracle.path_latency_s, paths)) for paths in lists]
    assert ps.max_latency_s().tolist() == slowest
    assert [ps._max_latency_of_row(i) for i in range(len(ps))] == slowest  # (pairs of many paths)
    mptr, mlinks, counts = ps.merged()
    for i, paths in enumerate(lists):
        union, count = np.unique(np.concatenate([np.asarray(p, dtype=np.int64) for p in paths]), return_counts=True)
        assert mlinks[mptr[i]:mptr[i + 1]].tolist() == union.tolist()
        assert counts[mptr[i]:mptr[i + 1]].tolist() == count.tolist()
    # each pair's class: the entries and their switches as PathIndex built them in Python
    ix = ps.index
    for i in np.flatnonzero(ps.nic_s >= 0).tolist():
        entries, switches = _class_oracle(oracle, int(ps.nic_s[i]), int(ps.nic_d[i]))
        e = ix.c_first[ps.cls[i]] + np.arange(ix.c_count[ps.cls[i]])
        got = [(p, q, tuple(ix.e_links[start:start + n].tolist()))
               for p, q, start, n in zip(*(a[e].tolist() for a in (ix.e_p, ix.e_q, ix.e_start, ix.e_len)))]
        assert got == entries
        assert ix.class_switches(int(ps.cls[i])) == switches


def _class_oracle(topo: Topology, nic_s: int, nic_d: int):
    """(entries, switches) of the class of NICs ``nic_s`` -> ``nic_d``: per fabric path, in the order
    of :meth:`Topology.paths`, (source port, destination port, switch links) and the switches it crosses."""
    ports_s, ports_d = topo.nic_ports[nic_s], topo.nic_ports[nic_d]
    candidates = [((up, *mid, down), p, q, mid, sw_a) for p, (up, sw_a, _) in enumerate(ports_s)
                  for q, (_, sw_b, down) in enumerate(ports_d) for mid in topo.switch_paths(sw_a, sw_b)]
    shortest = min(len(c[0]) for c in candidates)
    entries = sorted((c for c in candidates if len(c[0]) == shortest), key=lambda c: c[0])
    return ([(p, q, tuple(mid)) for _key, p, q, mid, _sw in entries],
            [(sw, *(int(topo.links.dst[lk]) for lk in mid)) for *_rest, mid, sw in entries])


@settings(max_examples=40, deadline=None)
@given(clos3_fabrics(), st.data())
def test_clos3_switch_paths_are_the_python_closed_form(topo, data):
    """Leaves and spines alike: the closed form as an array, sorted, is the Python closed form it
    replaced, and the graph's fewest-hop paths from or to a leaf (between two spines the closed form
    only goes through the core: none across planes, and not through a leaf of their pod)."""
    switches = [n for n, k in topo.graph.nodes(data="kind") if k in ("leaf", "spine")]
    a = data.draw(st.sampled_from(switches))
    z = data.draw(st.sampled_from(switches))
    expected = [()] if a == z else sorted(_python_closed_form(topo, a, z))
    assert topo.switch_paths(a, z) == expected
    assert topo.switch_path_array(a, z).tolist() == [list(p) for p in expected]
    nodes = topo.graph.nodes
    if "leaf" in (nodes[a]["kind"], nodes[z]["kind"]):
        assert _searched(topo).switch_paths(a, z) == expected


def _python_closed_form(topo: Topology, a: int, z: int) -> list[tuple[int, ...]]:
    """The switch paths of clos3 as its builder listed them in Python (before arrays), from the graph."""
    g = topo.graph
    cables = {(u, v): d["links"] for u, v, d in g.edges(data=True) if d["links"]}
    kind, pod = dict(g.nodes(data="kind")), dict(g.nodes(data="pod"))
    spines = [n for n in g if kind[n] == "spine"]
    reach = {s: [k for k in g.successors(s) if kind[k] == "core"] for s in spines}
    pa, pz, a_leaf, z_leaf = pod[a], pod[z], kind[a] == "leaf", kind[z] == "leaf"
    out: list[tuple[int, ...]] = []
    if pa == pz and a_leaf and z_leaf:
        for s in (s for s in spines if pod[s] == pa):
            out += itertools.product(cables[a, s], cables[s, z])
        return out
    if pa == pz:
        if not a_leaf and not z_leaf:
            return [(u, d) for k in reach[a] if (k, z) in cables for u in cables[a, k] for d in cables[k, z]]
        return [(lk,) for lk in cables[a, z]]
    for s in [s for s in spines if pod[s] == pa] if a_leaf else [a]:
        for k in reach[s]:
            for t in [t for t in spines if pod[t] == pz and (k, t) in cables] if z_leaf else (
                    [z] if (k, z) in cables else []):
                hops = [*([cables[a, s]] if a_leaf else []), cables[s, k], cables[k, t],
                        *([cables[t, z]] if z_leaf else [])]
                out += itertools.product(*hops)
    return out


def test_sorted_rows_orders_rows_as_sorted_orders_tuples():
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 4, (200, 3))
    assert [tuple(r) for r in sorted_rows(rows).tolist()] == sorted(map(tuple, rows.tolist()))
    assert sorted_rows(np.zeros((1, 0), dtype=np.int64)).shape == (1, 0)

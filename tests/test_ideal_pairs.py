"""The ideal replay's pair model for a whole batch at once (``PairModel.prefetch``) gives, for every
GPU pair, exactly what it computes pair by pair: best rate with a non-blocking core (its max-flow),
least delay and the edge links every path crosses, on every fabric family."""

import numpy as np
import pytest

from netsim.engine.ideal import PairModel
from netsim.topology import leaf_spine
from tests.test_routes_arrays import FABRICS, fabric


@pytest.mark.parametrize("fabric_name", FABRICS)
def test_prefetch_gives_what_each_pair_gives(fabric_name):
    topo = fabric(fabric_name)
    rng = np.random.default_rng(7)
    n = topo.n_gpus
    src = rng.integers(0, n, 400)
    dst = rng.integers(0, n, 400)
    tcp = rng.random(400) < 0.2
    batch = PairModel(topo)
    batch.prefetch(src, dst, tcp)
    alone = PairModel(topo)
    pairs = {(int(s), int(d), bool(t)) for s, d, t in zip(src, dst, tcp) if s != d}
    assert pairs <= set(batch._cache)
    for key in sorted(pairs):
        assert batch._cache[key] == alone.pair(*key), key


def test_prefetch_asks_the_max_flow_once_per_kind_of_pair(monkeypatch):
    """An all-to-all over 64 single-GPU hosts on 8 leaves: 4,032 pairs, one max-flow per pair of leaves."""
    topo = leaf_spine(leaves=8, spines=2, hosts_per_leaf=8, gpus_per_host=1, nics_per_host=1,
                      nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    calls = []
    model = PairModel(topo)
    pair = model.pair
    monkeypatch.setattr(model, "pair", lambda *a: calls.append(a) or pair(*a))
    src, dst = np.meshgrid(np.arange(topo.n_gpus), np.arange(topo.n_gpus))
    model.prefetch(src.ravel(), dst.ravel(), np.zeros(src.size, bool))
    assert len(model._cache) == 64 * 63
    assert len(calls) == 8 * 8


def test_pairs_of_the_same_graph_up_to_names_share_one_max_flow(monkeypatch):
    """Every pair of leaves of a leaf-spine is one graph (renamed); a pair inside one leaf is another:
    two max-flows for 64 x 63 pairs, each rate what a fresh max-flow of that pair gives."""
    import networkx as nx
    topo = leaf_spine(leaves=8, spines=2, hosts_per_leaf=8, gpus_per_host=1, nics_per_host=1,
                      nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    solved = []
    flow = nx.maximum_flow_value
    monkeypatch.setattr(nx, "maximum_flow_value", lambda *a, **k: solved.append(a) or flow(*a, **k))
    model = PairModel(topo)
    src, dst = np.meshgrid(np.arange(topo.n_gpus), np.arange(topo.n_gpus))
    keep = src.ravel() != dst.ravel()
    rate, _delay, _ptr, _links, uniform = model.table(src.ravel()[keep], dst.ravel()[keep], np.zeros(keep.sum(), bool))
    assert len(solved) == 2
    assert set(rate.tolist()) == {1e9} and uniform.all()


@pytest.mark.parametrize("fabric_name", [*FABRICS, "clos3", "rail-only"])
def test_pairs_with_many_paths_from_arrays_are_the_pairs_from_lists(fabric_name):
    """PairModel computes a pair of many paths (7,168 between two Meta-like pods) from an array of its
    paths: rate, delay, forced links and uniformity are bit for bit what the path-by-path code gives."""
    topo = _many_paths_fabric(fabric_name)
    rng = np.random.default_rng(3)
    pairs = {(int(s), int(d), bool(t)) for s, d, t in zip(rng.integers(0, topo.n_gpus, 150),
                                                           rng.integers(0, topo.n_gpus, 150), rng.random(150) < 0.2)}
    arrays, lists = PairModel(topo), PairModel(topo)
    arrays.many_paths, lists.many_paths = 0, 10**9
    for key in sorted(pairs):
        try:
            want = lists.pair(*key)
        except Exception as exc:  # noqa: BLE001 - a pair the fabric cannot carry fails alike both ways
            with pytest.raises(type(exc)):
                arrays.pair(*key)
            continue
        assert arrays.pair(*key) == want, key
        assert arrays._uniform[key] == lists._uniform[key]


def _many_paths_fabric(name):
    from netsim.topology.clos3 import clos3
    from netsim.topology.nic import generic_nic
    from netsim.topology.rail_only import rail_only
    if name == "clos3":
        return clos3(pods=3, leaves_per_pod=2, spines_per_pod=3, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=2,
                     nic=generic_nic(100e9), nic_latency_s=1e-6, uplink_bandwidth_Bps=100e9, uplink_latency_s=3e-7,
                     uplinks_per_spine=2, cores=6, core_bandwidth_Bps=50e9, core_latency_s=7e-7, core_cables=2,
                     intra_bandwidth_Bps=900e9, intra_latency_s=1e-7)
    if name == "rail-only":
        return rail_only(leaves_per_rail=2, hosts_per_leaf=2, gpus_per_host=4, nic=generic_nic(100e9),
                         nic_latency_s=1e-6, spines_per_rail=3, uplink_bandwidth_Bps=100e9, uplinks_per_spine=2,
                         intra_bandwidth_Bps=900e9, intra_latency_s=3e-7)
    return fabric(name)

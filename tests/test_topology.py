"""Topology builder: counts, wiring, rails, oversubscription, equal-cost paths."""

import itertools

import numpy as np
import pytest

from netsim.errors import ConfigError
from netsim.topology import LINK_KINDS
from tests.conftest import GB, make_leaf_spine


def test_counts_and_oversubscription():
    t = make_leaf_spine(leaves=4, spines=2, hosts_per_leaf=3, gpus_per_host=4, nics_per_host=2,
                        uplink_bandwidth_Bps=2 * GB)
    assert t.n_gpus == 4 * 3 * 4 and t.n_hosts == 12
    kinds = np.bincount(t.links.kind, minlength=len(LINK_KINDS))
    assert kinds[LINK_KINDS.index("up")] == 4 * 2
    assert kinds[LINK_KINDS.index("nic_up")] == 12 * 2
    assert kinds[LINK_KINDS.index("intra")] == 2 * 48
    # 3 hosts x 2 NICs x 1 GB/s into a leaf over 2 spines x 2 GB/s.
    assert t.params["oversubscription"] == pytest.approx(6 / 4)


def test_rails_gpu_uses_nic_i_mod_nics():
    t = make_leaf_spine(gpus_per_host=8, nics_per_host=4)
    names = [t.node_name(int(n)) for n in t.gpu_nic[:8]]
    assert names == [f"h0.nic{i % 4}" for i in range(8)]


def test_intra_host_traffic_stays_in_host():
    t = make_leaf_spine(gpus_per_host=4)
    (path,) = t.paths(0, 3)
    assert [t.links.kind_name(link) for link in path] == ["intra", "intra"]


def test_equal_cost_paths_cross_every_spine_and_parallel_cable():
    t = make_leaf_spine(spines=4, uplinks_per_spine=2)
    paths = t.paths(0, 2)  # host 0 on leaf 0 -> host 2 on leaf 1
    assert len(paths) == 4 * 2 * 2
    assert len(set(paths)) == len(paths)
    for p in paths:
        assert [t.links.kind_name(link) for link in p] == ["nic_up", "up", "down", "nic_down"]
        # consecutive links are joined end to start
        for a, b in itertools.pairwise(p):
            assert t.links.dst[a] == t.links.src[b]
    assert len(t.paths(0, 1)) == 1  # same leaf: NIC up, NIC down


def test_rail_optimised_wiring_puts_each_rail_on_its_own_leaf():
    t = make_leaf_spine(leaves=4, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=2, rail_optimized=True)
    leaf_of_nic = {}
    for nic, ports in t.nic_ports.items():
        leaf_of_nic[t.node_name(nic)] = t.node_name(ports[0][1])
    assert leaf_of_nic["h0.nic0"] == "leaf0" and leaf_of_nic["h0.nic1"] == "leaf1"
    assert leaf_of_nic["h3.nic0"] == "leaf0" and leaf_of_nic["h4.nic1"] == "leaf3"
    # GPU 0 of host 0 and GPU 0 of host 1 share rail 0: one leaf, no spine.
    assert len(t.paths(0, 2)) == 1


def test_nic_override_changes_only_that_nic():
    t = make_leaf_spine(nic_bandwidth_overrides={(1, 0): 0.25 * GB})
    caps = {t.link_name(i): t.links.capacity_Bps[i] for i in range(len(t.links))}
    assert caps["h1.nic0->leaf0"] == 0.25 * GB and caps["leaf0->h1.nic0"] == 0.25 * GB
    assert caps["h0.nic0->leaf0"] == GB


@pytest.mark.parametrize("bad", [dict(leaves=0), dict(spines=-1), dict(hosts_per_leaf=1.5)])
def test_bad_sizes_raise_config_error(bad):
    with pytest.raises(ConfigError):
        make_leaf_spine(**bad)


def test_link_table_is_read_only():
    t = make_leaf_spine()
    with pytest.raises(ValueError):
        t.links.capacity_Bps[0] = 1.0

"""Hierarchical (two-level) allreduce: closed form, per-rank phase dependencies, unequal hosts refused."""

import pytest

from netsim.collectives import run_collective
from netsim.errors import ConfigError
from tests.conftest import GB, make_fabric, make_leaf_spine
from tests.test_ring import MiB

LAT, ILAT = 1e-6, 3e-7
B_INTRA = 10 * GB


def _run(alg, hosts, g, size, gpus=None, **kw):
    topo = make_leaf_spine(leaves=1, spines=1, hosts_per_leaf=hosts, gpus_per_host=g, nics_per_host=g,
                           nic_latency_s=LAT, intra_latency_s=ILAT, intra_bandwidth_Bps=B_INTRA)
    env, fab = make_fabric(topo)
    env.run(env.process(run_collective(env, fab, "allreduce", alg, gpus or list(range(hosts * g)), size, **kw)))
    return env.now, fab


@pytest.mark.parametrize("hosts, g", [(2, 2), (4, 4), (8, 8), (3, 4)])
@pytest.mark.parametrize("size", [1 * MiB, 256 * MiB])
def test_hierarchical_closed_form(hosts, g, size):
    t, _ = _run("hierarchical", hosts, g, size)
    a_i, a_n = 2 * ILAT, 2 * LAT
    expected = 2 * (g - 1) * (a_i + size / (g * B_INTRA)) + 2 * (hosts - 1) * (a_n + size / (g * hosts * GB))
    assert t == pytest.approx(expected, rel=1e-3)


def test_hierarchical_uses_every_nic_and_beats_a_one_channel_flat_ring():
    t_h, fab = _run("hierarchical", 8, 8, 256 * MiB)
    t_r, _ = _run("ring", 8, 8, 256 * MiB)
    assert t_h < t_r / 3
    nic_senders = {rec[2] % 8 for rec in fab.flow_records if rec[2] // 8 != rec[3] // 8}
    assert nic_senders == set(range(8))  # inter-host traffic leaves through all 8 rails


def test_unequal_ranks_per_host_are_refused():
    with pytest.raises(ConfigError, match="same number of ranks on every host"):
        _run("hierarchical", 2, 4, MiB, gpus=[0, 1, 2, 4, 5])

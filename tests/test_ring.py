"""Ring allreduce against its closed form, per-rank dependencies, channels and slow NICs."""

import math

import pytest

from netsim.collectives import run_collective
from netsim.routing import Connection
from tests.conftest import GB, make_fabric, make_leaf_spine

MiB, GiB = 2**20, 2**30


def _non_blocking(n, **kw):
    """n single-GPU hosts, 1:1 leaf-spine, equal path latency for every pair (latency on NICs only)."""
    per_leaf = min(n, 8)
    return make_leaf_spine(leaves=math.ceil(n / per_leaf), spines=per_leaf, hosts_per_leaf=per_leaf, **kw)


def _run_ring(topo, gpus, size, **kw):
    env, fab = make_fabric(topo)
    env.run(env.process(run_collective(env, fab, "allreduce", "ring", gpus, size, **kw)))
    return env.now, fab


@pytest.mark.parametrize("n", [2, 3, 8, 64])
@pytest.mark.parametrize("size", [1 * MiB, 1 * GiB])
def test_ring_allreduce_matches_closed_form(n, size):
    lat, ovh = 1e-6, 2e-6
    topo = _non_blocking(n, nic_latency_s=lat, nic_overhead_s=ovh)
    t, fab = _run_ring(topo, list(range(n)), size)
    alpha = 2 * lat + ovh
    expected = 2 * (n - 1) * (alpha + size / (n * GB))
    assert t == pytest.approx(expected, rel=1e-3)
    assert fab.stats["flows"] == 2 * (n - 1) * n


def test_bytes_sent_per_rank_is_2_n_minus_1_over_n_of_M():
    n, size = 8, 64 * MiB
    topo = _non_blocking(n)
    _, fab = _run_ring(topo, list(range(n)), size)
    per_src = {}
    for rec in fab.flow_records:
        per_src[rec[2]] = per_src.get(rec[2], 0) + rec[6]
    assert set(per_src) == set(range(n))
    for sent in per_src.values():
        assert sent == pytest.approx(2 * (n - 1) / n * size)


def test_one_slow_nic_slows_the_whole_ring_to_its_rate():
    n, size = 8, 256 * MiB
    topo = _non_blocking(n, nic_bandwidth_overrides={(3, 0): 0.25 * GB})
    t, _ = _run_ring(topo, list(range(n)), size)
    assert t == pytest.approx(2 * (n - 1) * size / (n * 0.25 * GB), rel=1e-6)


def test_step_dependencies_a_rank_waits_for_its_predecessor():
    # Rank 1's outgoing NIC is slow, so rank 2 cannot send step k+1 before rank 1's step k arrives.
    n, size = 4, 4 * GB
    topo = _non_blocking(n, nic_bandwidth_overrides={(1, 0): 0.5 * GB})
    env, fab = make_fabric(topo)
    env.run(env.process(run_collective(env, fab, "allreduce", "ring", list(range(n)), size)))
    starts = {}
    ends = {}
    for fid, _label, src, dst, _ch, _job, _size, start, end, _np in fab.flow_records:
        starts.setdefault(src, []).append(start)
        ends.setdefault(src, []).append(end)
    for k in range(1, 2 * (n - 1)):
        assert starts[2][k] >= ends[1][k - 1] - 1e-12
        assert starts[2][k] == pytest.approx(ends[1][k - 1])


def test_channels_split_the_buffer_over_distinct_connections():
    n, size, channels = 4, 64 * MiB, 4
    topo = _non_blocking(n)
    t1, _ = _run_ring(topo, list(range(n)), size)
    t4, fab = _run_ring(topo, list(range(n)), size, channels=channels)
    # Same NIC bandwidth, same bytes: on a non-blocking fabric, channels don't change the time.
    assert t4 == pytest.approx(t1, rel=1e-9)
    conns = {rec[1] for rec in fab.flow_records}
    assert len(conns) == n * channels
    assert Connection(0, 1, 3).label() in conns


def test_intra_host_ring_uses_the_intra_host_fabric():
    topo = make_leaf_spine(gpus_per_host=4, intra_bandwidth_Bps=100 * GB)
    t, fab = _run_ring(topo, [0, 1, 2, 3], 1 * GiB)
    assert t == pytest.approx(2 * 3 * GiB / (4 * 100 * GB), rel=1e-6)
    assert fab.link_bytes[[i for i in range(len(topo.links)) if topo.links.kind_name(i) == "nic_up"]].sum() == 0


def test_single_rank_is_a_no_op():
    topo = _non_blocking(2)
    t, fab = _run_ring(topo, [0], 1 * MiB)
    assert t == 0 and fab.stats["flows"] == 0


def test_every_rank_ends_when_its_last_message_has_arrived():
    import numpy as np

    from netsim.collectives.ring import ring_allreduce
    from netsim.engine.model import ScheduleBuilder
    from netsim.engine.reference import run_schedule
    n = 4
    topo = _non_blocking(n, nic_bandwidth_overrides={(2, 0): 0.5 * GB})
    env, fab = make_fabric(topo)
    b = ScheduleBuilder()
    ends = ring_allreduce(b, list(range(n)), 4e6)
    run = run_schedule(env, fab, b.build())
    env.run(run.done)
    assert np.isfinite(run.times).all() and fab.undelivered == 0
    last = {}
    for *_head, dst, _ch, _job, _size, _start, end, _np in fab.flow_records:
        last[dst] = max(last.get(dst, 0.0), end)
    assert [run.times[e] for e in ends] == [last[r] for r in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ecmp_collisions_set_the_ring_time(seed):
    """8-NIC hosts, 8 channels, random hosts: time = (most connections hashed onto one link) x NIC bound."""
    from collections import Counter

    import numpy as np

    from netsim.placement import make_placement

    topo = make_leaf_spine(leaves=4, spines=4, hosts_per_leaf=2, gpus_per_host=8, nics_per_host=8,
                           uplinks_per_spine=4)
    gpus = make_placement("random", {"by": "host"}).place(topo.n_gpus, topo, np.random.default_rng(seed)).tolist()
    env, fab = make_fabric(topo, seed=seed)
    size, n = 64 * MiB, len(gpus)
    env.run(env.process(run_collective(env, fab, "allreduce", "ring", gpus, size, channels=8)))
    per_link = Counter(link for routes in fab.routes_used().values() for link in routes[0][0]
                       if topo.links.kind_name(link) != "intra")
    worst = max(per_link.values())
    nic_bound = 2 * (n - 1) * size / (n * 8 * GB)
    # Work conservation on the worst link; flows may complete up to the 1 ns completion tolerance
    # early, once per step on the critical path.
    assert env.now >= worst * nic_bound - 2 * (n - 1) * fab.tolerance_s
    assert env.now == pytest.approx(worst * nic_bound, rel=0.01)


def test_two_ring_connections_forced_onto_one_uplink_take_the_fluid_time():
    # Hosts 0,1 on leaf0 and 2,3 on leaf1, one spine, uplinks as fast as a NIC. The ring order
    # 0->2->1->3->0 sends two connections each way over the single leaf-spine cable pair.
    topo = make_leaf_spine(leaves=2, spines=1, hosts_per_leaf=2, nic_latency_s=1e-6)
    n, size = 4, 256 * MiB
    t, fab = _run_ring(topo, [0, 2, 1, 3], size)
    assert t == pytest.approx(2 * (n - 1) * (2e-6 + size / (n * GB / 2)), rel=1e-6)
    up = [i for i in range(len(topo.links)) if topo.links.kind_name(i) == "up"]
    assert fab.link_peak_util[up].max() == pytest.approx(1.0)
    # the same ring in rank order crosses the spine once each way: no sharing, the closed form
    t_ordered, _ = _run_ring(topo, [0, 1, 2, 3], size)
    assert t_ordered == pytest.approx(2 * (n - 1) * (2e-6 + size / (n * GB)), rel=1e-6)

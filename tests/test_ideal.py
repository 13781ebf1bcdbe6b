"""Every algorithm against its closed form; the ideal (non-blocking core) time and the lower bound of a call.

The table below is the one place that lists each (op, algorithm)'s closed form on a uniform
non-blocking fabric (n single-GPU hosts on one switch, per-hop alpha = 2 latency + overhead).
"""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.collectives import ALGORITHM_OPS, CollectiveRecord, run_collective
from netsim.collectives.ideal import IdealModel
from tests.conftest import GB, make_fabric, make_leaf_spine
from tests.test_schedules import CLOSED_FORMS as SCHEDULED

MiB = 2**20
LAT, OVH = 1e-6, 2e-6
A = 2 * LAT + OVH

#: (op, algorithm) -> (closed form T(n, M), needs a power of two)
CLOSED_FORMS = {
    ("allreduce", "ring"): (lambda n, m: 2 * (n - 1) * (A + m / (n * GB)), False),
    ("reduce_scatter", "ring"): (lambda n, m: (n - 1) * (A + m / (n * GB)), False),
    ("allgather", "ring"): (lambda n, m: (n - 1) * (A + m / (n * GB)), False),
    # pipelined chain with one chunk: (C + n - 2) M/(C B) + (n - 1) alpha at C = 1
    ("broadcast", "ring"): (lambda n, m: (n - 1) * (A + m / GB), False),
    ("reduce", "ring"): (lambda n, m: (n - 1) * (A + m / GB), False),
    # one GPU per host: no intra-host phases, one inter-host ring of M
    ("allreduce", "hierarchical"): (lambda n, m: 2 * (n - 1) * (A + m / (n * GB)), False),
    **SCHEDULED,
    # all-to-all-v without a matrix is the uniform all-to-all; hierarchical with one GPU per host is
    # its inter-host exchange alone, the direct all-to-all
    ("alltoallv", "direct"): SCHEDULED[("alltoall", "direct")],
    ("alltoallv", "pairwise"): SCHEDULED[("alltoall", "pairwise")],
    ("alltoallv", "hierarchical"): SCHEDULED[("alltoall", "direct")],
    ("alltoall", "hierarchical"): SCHEDULED[("alltoall", "direct")],
}


def _crossbar(n, **kw):
    return make_leaf_spine(leaves=1, spines=1, hosts_per_leaf=n, nic_latency_s=LAT, nic_overhead_s=OVH, **kw)


def _simulate(topo, op, algorithm, gpus, size, **kw):
    env, fab = make_fabric(topo)
    env.run(env.process(run_collective(env, fab, op, algorithm, list(gpus), size, **kw)))
    return env.now, fab


ALL = sorted((op, a) for a, ops in ALGORITHM_OPS.items() for op in ops)
CASES = [(op, a, n, size) for op, a in ALL for n in (2, 3, 4, 8, 16, 64)
         if not (CLOSED_FORMS.get((op, a), (None, False))[1] and n & (n - 1))
         for size in (4 * 1024, MiB, 256 * MiB)]


def test_every_registered_algorithm_is_in_the_table():
    assert set(ALL) == set(CLOSED_FORMS) | {("allreduce", "tree")}


@pytest.mark.parametrize("op, algorithm, n, size", CASES, ids=[f"{o}-{a}-n{n}-{s}" for o, a, n, s in CASES])
def test_every_algorithm_on_a_non_blocking_fabric(op, algorithm, n, size):
    topo = _crossbar(n)
    t, _ = _simulate(topo, op, algorithm, range(n), size)
    ideal = IdealModel(topo).ideal(op, algorithm, list(range(n)), size)
    assert ideal.time_s == pytest.approx(t, rel=1e-9)  # the fabric is already non-blocking
    assert t >= ideal.bound_s * (1 - 1e-9)
    if (op, algorithm) == ("allreduce", "tree"):
        # no closed form (2h alpha + 2M/B is an approximation, tests/test_tree.py); the bound holds
        # the per-rank load (M/B at least; 2M/B for even n >= 4: interior in one tree, leaf in the other),
        # and the tree stays within 2x of the bound
        assert ideal.bound_s >= (2 if n % 2 == 0 and n >= 4 else 1) * size / GB * (1 - 1e-12)
        assert t <= 2 * ideal.bound_s
        return
    assert t == pytest.approx(CLOSED_FORMS[op, algorithm][0](n, size), rel=1e-3)


def test_load_bound_catches_channels_sharing_a_nic():
    # 2 hosts x 2 GPUs, one NIC each: both ring channels cross between hosts through the same NIC.
    topo = make_leaf_spine(leaves=1, spines=1, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=1)
    size = 64 * MiB
    t, _ = _simulate(topo, "allreduce", "ring", range(4), size, channels=2)
    ideal = IdealModel(topo).ideal("allreduce", "ring", range(4), size, channels=2)
    # per channel 6 steps of M/8 over the NIC; two channels share it: 1.5 M/B
    assert ideal.load_s == pytest.approx(1.5 * size / GB)
    assert ideal.replay_s == pytest.approx(0.75 * size / GB, rel=1e-3)  # each channel alone
    assert t == pytest.approx(ideal.bound_s, rel=1e-6) and t == pytest.approx(ideal.time_s, rel=1e-9)


def test_slowest_nic_sets_the_ideal():
    n, size = 8, 64 * MiB
    topo = make_leaf_spine(leaves=1, spines=1, hosts_per_leaf=n, nic_bandwidth_overrides={(3, 0): GB / 4})
    t, _ = _simulate(topo, "allreduce", "ring", range(n), size)
    ideal = IdealModel(topo).ideal("allreduce", "ring", range(n), size)
    assert ideal.bound_s == pytest.approx(2 * (n - 1) * size / (n * GB / 4))
    assert t == pytest.approx(ideal.bound_s, rel=1e-6) and t == pytest.approx(ideal.time_s, rel=1e-9)


def test_ecmp_collision_shows_as_slowdown_not_in_the_ideal():
    # every ring hop crosses between the two leaves; the ideal ignores the core, ECMP may collide
    topo = make_leaf_spine(leaves=2, spines=2, hosts_per_leaf=2)
    gpus = [0, 2, 1, 3]
    ideal = IdealModel(topo).ideal("allreduce", "ring", gpus, 16 * MiB)
    assert ideal.time_s == pytest.approx(2 * 3 * 16 * MiB / (4 * GB), rel=1e-6)
    slowdowns = set()
    for seed in range(8):
        env, fab = make_fabric(topo, seed=seed)
        env.run(env.process(run_collective(env, fab, "allreduce", "ring", gpus, 16 * MiB)))
        assert env.now >= ideal.bound_s * (1 - 1e-9)
        slowdowns.add(round(env.now / ideal.time_s, 6))
    # two flows leave each leaf over two uplinks: hashed apart 1.0, together 2.0
    assert slowdowns == {1.0, 2.0}


def test_below_bound_flag():
    rec = CollectiveRecord(0, 0, "allreduce", "ring", 1.0, 2, 1, 0.0, 1.0, ideal_s=2.0, bound_s=1.0 + 1e-6,
                           slack_s=1e-9)
    assert rec.below_bound and rec.slowdown == 0.5
    assert not CollectiveRecord(0, 0, "allreduce", "ring", 1.0, 2, 1, 0.0, 1.0, bound_s=1.0 + 1e-10,
                                slack_s=1e-9).below_bound
    assert math.isnan(CollectiveRecord(0, 0, "allreduce", "ring", 1.0, 2, 1, 0.0, 1.0).slowdown)


@st.composite
def _scenario(draw):
    gpus_per_host = draw(st.sampled_from([1, 2, 4]))
    nics = draw(st.sampled_from([n for n in (1, 2) if gpus_per_host % n == 0]))
    leaves, hosts_per_leaf = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    hosts = leaves * hosts_per_leaf
    total = hosts * gpus_per_host
    op, algorithm = draw(st.sampled_from(ALL))
    pow2 = CLOSED_FORMS.get((op, algorithm), (None, False))[1]
    sizes = [n for n in range(2, total + 1) if not (pow2 and n & (n - 1))]
    if algorithm == "hierarchical":
        sizes = [h * gpus_per_host for h in range(1, hosts + 1) if h * gpus_per_host >= 2]
    if not sizes:
        return None
    n = draw(st.sampled_from(sizes))
    slow = draw(st.dictionaries(st.tuples(st.integers(0, hosts - 1), st.integers(0, nics - 1)),
                                st.sampled_from([GB / 4, GB / 2, 2 * GB]), max_size=3))
    topo = make_leaf_spine(leaves=leaves, spines=draw(st.integers(1, 3)), hosts_per_leaf=hosts_per_leaf,
                           gpus_per_host=gpus_per_host, nics_per_host=nics,
                           uplink_bandwidth_Bps=draw(st.sampled_from([GB / 2, GB, 4 * GB])),
                           nic_latency_s=LAT, nic_overhead_s=OVH, nic_bandwidth_overrides=slow)
    if algorithm == "hierarchical":
        hosts_used = draw(st.permutations(range(hosts)))[: n // gpus_per_host]
        gpus = [h * gpus_per_host + g for h in hosts_used for g in range(gpus_per_host)]
    else:
        gpus = draw(st.permutations(range(total)))[:n]
    size = draw(st.sampled_from([4096.0, 3 * MiB, 64 * MiB]))
    kw = dict(channels=draw(st.integers(1, 3)), chunk_bytes=draw(st.sampled_from([None, MiB / 2])))
    return topo, op, algorithm, gpus, size, kw, draw(st.integers(0, 3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenario())
def test_no_run_beats_its_ideal(scenario):
    """Contended core, slow and fast NICs, random placement, any algorithm: never below the bound."""
    if scenario is None:
        return
    topo, op, algorithm, gpus, size, kw, seed = scenario
    env, fab = make_fabric(topo, seed=seed)
    env.run(env.process(run_collective(env, fab, op, algorithm, gpus, size, **kw)))
    ideal = IdealModel(topo).ideal(op, algorithm, gpus, size, **kw)
    assert np.isfinite(ideal.bound_s) and ideal.bound_s > 0
    assert env.now >= ideal.bound_s * (1 - 1e-9) - fab.tolerance_s * ideal.chain, (env.now, ideal)
    assert ideal.time_s >= ideal.bound_s * (1 - 1e-9) - fab.tolerance_s * ideal.chain, ideal

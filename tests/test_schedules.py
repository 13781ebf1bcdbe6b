"""Step-scheduled collectives against their closed forms on a non-blocking fabric, and byte counts."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.collectives import run_collective
from netsim.collectives.schedule import (binomial_broadcast_schedule, binomial_reduce_schedule,
                                         halving_doubling_schedule, pairwise_schedule)
from netsim.errors import ConfigError
from tests.conftest import GB, make_fabric, make_leaf_spine
from tests.test_ring import MiB

LAT, OVH = 1e-6, 2e-6
A = 2 * LAT + OVH

CLOSED_FORMS = {
    ("allreduce", "recursive_doubling"): (lambda n, m: math.log2(n) * (A + m / GB), True),
    ("allreduce", "halving_doubling"): (lambda n, m: 2 * math.log2(n) * A + 2 * (n - 1) / n * m / GB, True),
    ("allreduce", "direct"): (lambda n, m: 2 * (A + (n - 1) * m / (n * GB)), False),
    ("allreduce", "star"): (lambda n, m: 2 * (A + (n - 1) * m / GB), False),
    ("alltoall", "direct"): (lambda n, m: A + (n - 1) * m / (n * GB), False),
    ("alltoall", "pairwise"): (lambda n, m: (n - 1) * (A + m / (n * GB)), False),
    ("broadcast", "binomial"): (lambda n, m: math.ceil(math.log2(n)) * (A + m / GB), False),
    # lock-step rounds; for other n a leaf's message can overlap an earlier round (test below)
    ("reduce", "binomial"): (lambda n, m: math.ceil(math.log2(n)) * (A + m / GB), True),
}


def _crossbar(n, **kw):
    """All n single-GPU hosts on one leaf: non-blocking for every traffic pattern, alpha the same for all pairs."""
    return make_leaf_spine(leaves=1, spines=1, hosts_per_leaf=n, **kw)


def _run(op, algorithm, n, size):
    topo = _crossbar(n, nic_latency_s=LAT, nic_overhead_s=OVH)
    env, fab = make_fabric(topo)
    env.run(env.process(run_collective(env, fab, op, algorithm, list(range(n)), size)))
    return env.now, fab


# The closed-form table over every algorithm, n and size is tests/test_ideal.py.


@pytest.mark.parametrize("n", [2, 4, 8, 32])
def test_halving_doubling_bytes_per_rank_match_ring(n):
    size = 1.0
    sent = [0.0] * n
    for step in halving_doubling_schedule(n, size):
        for src, _dst, nbytes in step:
            sent[src] += nbytes
    assert all(s == pytest.approx(2 * (n - 1) / n) for s in sent)


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13])
def test_binomial_trees_reach_every_rank_once(n):
    have = {0}
    for step in binomial_broadcast_schedule(n, 1.0):
        senders = {s for s, _d, _b in step}
        assert senders <= have
        have |= {d for _s, d, _b in step}
    assert have == set(range(n))
    reduced = set()
    for step in binomial_reduce_schedule(n, 1.0):
        for src, _dst, _b in step:
            assert src not in reduced
            reduced.add(src)
    assert reduced == set(range(1, n))


def test_pairwise_sends_each_pair_once():
    n = 7
    pairs = [(s, d) for step in pairwise_schedule(n, 1.0) for s, d, _b in step]
    assert sorted(pairs) == sorted((s, d) for s in range(n) for d in range(n) if s != d)


def test_power_of_two_algorithms_refuse_other_sizes():
    with pytest.raises(ConfigError, match="power-of-two"):
        _run("allreduce", "recursive_doubling", 6, MiB)


def test_star_is_latency_bound_winner_for_tiny_messages_and_loses_for_large():
    n = 16
    small, large = 64, 256 * MiB
    assert _run("allreduce", "star", n, small)[0] < _run("allreduce", "ring", n, small)[0]
    assert _run("allreduce", "star", n, large)[0] > 5 * _run("allreduce", "ring", n, large)[0]


def test_binomial_reduce_with_a_leaf_that_need_not_wait():
    # n = 3: rank 2 -> 0 (round 0) and rank 1 -> 0 (round 1); rank 1 is a leaf and depends on nobody,
    # so both messages share rank 0's NIC at once: 2M/B + alpha, one alpha less than lock-step rounds.
    size = 1 * MiB
    t, _ = _run("reduce", "binomial", 3, size)
    assert t == pytest.approx(2 * size / GB + A, rel=1e-9)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(*[st.integers(0, 4)] * 4, st.booleans(), st.booleans()), min_size=60, max_size=300),
       more=st.lists(st.tuples(*[st.integers(0, 4)] * 4, st.booleans(), st.booleans()), max_size=100))
def test_connection_ids_in_numpy_are_the_loops(rows, more):
    """A first large ``add`` assigns ids in numpy (``ConnectionTable._first``): the same ids, columns
    and later ids as adding the connections one at a time."""
    from netsim.engine.model import ConnectionTable

    batch, single = ConnectionTable(), ConnectionTable()
    got = batch.add(*(np.array(c) for c in zip(*rows)))
    want = [int(single.add(*row)[0]) for row in rows]
    assert got.tolist() == want and batch._cols == single._cols
    if more:
        assert batch.add(*(np.array(c) for c in zip(*more))).tolist() == [int(single.add(*r)[0]) for r in more]
    assert [batch[i] for i in range(len(batch))] == [single[i] for i in range(len(single))]

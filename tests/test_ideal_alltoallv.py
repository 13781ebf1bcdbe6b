"""An all-to-all-v's ideal and bound from its byte matrix (IdealModel.alltoallv) are what replaying and
running its schedule give, for every all-to-all-v algorithm."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from netsim.collectives import get_algorithm
from netsim.collectives.ideal import IdealModel
from netsim.engine.model import ScheduleBuilder
from netsim.topology import leaf_spine

ALGORITHMS = ("direct", "pairwise", "hierarchical")


def _topology(gpus_per_host: int, nics_per_host: int, nvlink_Bps: float, nic_latency_s: float, rails: bool,
              slow_nics: dict):
    return leaf_spine(leaves=4, spines=2, hosts_per_leaf=1, gpus_per_host=gpus_per_host, nics_per_host=nics_per_host,
                      nic_bandwidth_Bps=5e9, nic_latency_s=nic_latency_s, uplink_bandwidth_Bps=4e9,
                      intra_bandwidth_Bps=nvlink_Bps, rail_optimized=rails, nic_bandwidth_overrides=slow_nics)


@st.composite
def calls(draw):
    """A topology, a communicator (the same number of ranks on each of its hosts, in any rank order), a
    byte matrix with zeros, and per-rank offsets or none."""
    g = draw(st.sampled_from([1, 2, 4]))
    nics = draw(st.sampled_from(sorted({1, g})))
    slow = draw(st.dictionaries(st.tuples(st.integers(0, 3), st.integers(0, nics - 1)),
                                st.sampled_from([1e9, 2.5e9, 2e10]), max_size=3))
    topo = _topology(g, nics, draw(st.sampled_from([1e9, 5e9, 1e11])), draw(st.sampled_from([0.0, 1e-6])),
                     draw(st.booleans()), slow)
    hosts = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True))
    local = draw(st.integers(1, g))
    gpus = [h * g + ll for h in hosts for ll in draw(st.permutations(range(g)))[:local]]
    assume(len(gpus) >= 2)
    gpus = draw(st.permutations(gpus))
    n = len(gpus)
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 4, size=(n, n)) * rng.uniform(1e5, 1e7, size=(n, n)) * (rng.random((n, n)) < draw(
        st.sampled_from([0.0, 0.3, 0.8, 1.0])))
    np.fill_diagonal(m, 0.0)
    offsets = rng.uniform(0, 1e-3, size=n) if draw(st.booleans()) else None
    return topo, list(gpus), m, offsets


def _replayed(topo, algorithm: str, gpus: list, m: np.ndarray, offsets):
    """The call's schedule replayed and run as any call's (IdealModel.of_schedule)."""
    b = ScheduleBuilder()
    get_algorithm("alltoallv", algorithm)(b, gpus, 0.0, gpu_host=topo.gpu_host, matrix=m,
                                          ready=None if offsets is None else b.delay(offsets))
    return IdealModel(topo).of_schedule(("x",), b.build(), len(gpus))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@given(call=calls())
@settings(max_examples=30, deadline=None)
def test_the_bound_from_the_byte_matrix_is_the_replayed_one(algorithm, call):
    """Bit for bit: the replay's end, the load bound, the bound and the chain; the ideal is the run on
    the non-blocking fabric (pairwise, hierarchical) or the bound, never above that run (direct)."""
    topo, gpus, m, offsets = call
    closed = IdealModel(topo).alltoallv(algorithm, gpus, m, offsets=offsets)
    old = _replayed(topo, algorithm, gpus, m, offsets)
    assert (closed.replay_s, closed.load_s, closed.bound_s, closed.chain) == \
        (old.replay_s, old.load_s, old.bound_s, old.chain)
    if algorithm == "direct":
        assert closed.time_s == closed.bound_s <= old.time_s * (1 + 1e-12)
    else:
        assert closed.time_s == old.time_s


def test_a_call_asked_again_is_not_computed_again():
    """Cached by algorithm, group, byte matrix and offsets: the same matrix with other offsets is another call."""
    topo = _topology(2, 2, 1e10, 1e-6, False, {})
    ideal, m = IdealModel(topo), np.arange(64.0).reshape(8, 8) * 1e5
    first = ideal.alltoallv("hierarchical", list(range(8)), m)
    assert ideal.alltoallv("hierarchical", list(range(8)), m.copy()) is first
    later = ideal.alltoallv("hierarchical", list(range(8)), m, offsets=np.full(8, 1e-3))
    assert later is not first and later.replay_s > first.replay_s

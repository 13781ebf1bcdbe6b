"""A ring run in one compiled call (``Fabric.run_ring``) against the per-rank SimPy processes it stands for.

The compiled loop replays the Fabric's flushes and drains in the order SimPy would run them. It
must leave exactly what the processes leave: every message's fid, start and end, link bytes, busy
times and peaks, counters, queue pairs, bytes posted and delivered, SimPy's event count and clock,
to the bit, also when other traffic ran before it, rings follow one another, or chunks pipeline.
Where something else could happen during the ring (a fault, another ring, a time limit), the
processes must run instead.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import netsim.engine.fabric as fabric_mod
from netsim.collectives import run_collective
from netsim.routing import Connection
from netsim.solver import COMPILED
from netsim.topology.dragonfly import dragonfly
from tests.conftest import GB, make_fabric, make_leaf_spine

pytestmark = pytest.mark.skipif(not COMPILED, reason="numba is not installed: only the Python engine exists")

LEAF_SPINE = make_leaf_spine(leaves=3, spines=2, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=2,
                             nic_latency_s=1e-6, uplink_latency_s=5e-7,
                             nic_bandwidth_overrides={(3, 0): 0.5 * GB, (1, 1): 0.25 * GB})
DRAGONFLY = dragonfly(groups=5, switches_per_group=2, hosts_per_switch=2, global_links_per_switch=2,
                      link_bandwidth_Bps=GB)
OPS = ("allreduce", "reduce_scatter", "allgather")

calls = st.lists(st.tuples(st.sampled_from(sorted(OPS)), st.integers(2, 12), st.floats(1e3, 5e7),
                           st.integers(1, 3), st.sampled_from([None, 2e5, 1e6]), st.integers(0, 10**6)),
                 min_size=1, max_size=3)
before = st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11), st.floats(1, 1e7), st.floats(0, 1e-3)),
                  max_size=6)


def _run(topo, routing, seed, tolerance, work, prelude, kernel, record=True, extra=None):
    """Run ``prelude`` (point-to-point sends, all waited for) then the ring calls in ``work``, one
    after another, with or without the ring kernel; returns what a run leaves behind."""
    fabric_mod.RING_KERNEL = kernel
    try:
        env, fab = make_fabric(topo, seed=seed, routing=routing, completion_tolerance_s=tolerance,
                               record_flows=record, track_congestion=False)
        ends = []

        def main():
            sends = [fab.send(s % topo.n_gpus, d % topo.n_gpus, size, Connection(s % topo.n_gpus, d % topo.n_gpus, 9))
                     for s, d, size, _at in prelude]
            if sends:
                yield env.all_of(sends)
            for op, n, size, channels, chunk, pick in work:
                gpus = list(np.random.default_rng(pick).permutation(topo.n_gpus)[:min(n, topo.n_gpus)])
                yield env.process(run_collective(env, fab, op, "ring", gpus, size, channels=channels, chunk_bytes=chunk))
                ends.append(env.now)

        env.process(main())
        if extra is not None:
            extra(env, fab)
        env.run()
        fab.finalize()
        return env, fab, ends
    finally:
        fabric_mod.RING_KERNEL = True


def _assert_same(a, b):
    (env_a, fab_a, ends_a), (env_b, fab_b, ends_b) = a, b
    assert ends_a == ends_b
    assert env_a.now == env_b.now
    assert env_a.events_processed == env_b.events_processed
    assert fab_a.flow_records == fab_b.flow_records
    for name in ("link_bytes", "link_busy_s", "link_peak_util", "link_load_Bps"):
        np.testing.assert_array_equal(getattr(fab_a, name), getattr(fab_b, name), err_msg=name)
    assert fab_a.stats == fab_b.stats
    assert list(fab_a.queue_pairs.items()) == list(fab_b.queue_pairs.items())
    assert dict(fab_a.bytes_posted) == dict(fab_b.bytes_posted)
    assert dict(fab_a.bytes_delivered) == dict(fab_b.bytes_delivered)
    assert fab_a._next_fid == fab_b._next_fid
    assert fab_a.undelivered == fab_b.undelivered == 0


@settings(max_examples=60, deadline=None)
@given(work=calls, prelude=before, routing=st.sampled_from(["ecmp", "spray", "ethereal"]), seed=st.integers(0, 3),
       tolerance=st.sampled_from([0.0, 1e-9, 1e-6]))
def test_ring_kernel_matches_the_rank_processes_on_a_leaf_spine(work, prelude, routing, seed, tolerance):
    slow = _run(LEAF_SPINE, routing, seed, tolerance, work, prelude, kernel=False)
    fast = _run(LEAF_SPINE, routing, seed, tolerance, work, prelude, kernel=True)
    assert slow[1].ring_runs == 0
    assert fast[1].ring_runs == len(work)
    _assert_same(slow, fast)


@settings(max_examples=40, deadline=None)
@given(work=calls, routing=st.sampled_from(["adaptive", "ugal", "valiant", "minimal"]), seed=st.integers(0, 3),
       tolerance=st.sampled_from([0.0, 1e-9]))
def test_ring_kernel_matches_the_rank_processes_on_a_dragonfly(work, routing, seed, tolerance):
    slow = _run(DRAGONFLY, routing, seed, tolerance, work, [], kernel=False)
    fast = _run(DRAGONFLY, routing, seed, tolerance, work, [], kernel=True)
    assert fast[1].ring_runs == len(work)
    _assert_same(slow, fast)


def test_without_flow_records_the_ring_kernel_gives_the_same_times_and_counters():
    work = [("allreduce", 12, 3e7, 2, None, 5), ("allgather", 7, 1e6, 1, 2e5, 1)]
    slow = _run(LEAF_SPINE, "ecmp", 1, 1e-9, work, [], kernel=False, record=False)
    fast = _run(LEAF_SPINE, "ecmp", 1, 1e-9, work, [], kernel=True, record=False)
    assert fast[1].ring_runs == 2 and not fast[1].flow_records
    _assert_same(slow, fast)


def test_a_ring_that_could_meet_a_fault_or_another_ring_runs_as_processes():
    """Anything on SimPy's schedule besides stale completion timers (a fault, a second job, a time
    limit) could act during the ring: the kernel must not run, and the results stay the same."""
    work = [("allreduce", 8, 1e7, 1, None, 2)]

    def fault(env, fab):
        def later():
            yield env.timeout(1e-3)
            fab.set_capacity({0: 0.5 * fab.capacity_Bps[0]})
        env.process(later())

    def other_ring(env, fab):
        env.process(run_collective(env, fab, "allreduce", "ring", [0, 5, 9], 1e6))

    for extra in (fault, other_ring):
        slow = _run(LEAF_SPINE, "ecmp", 0, 1e-9, work, [], kernel=False, extra=extra)
        fast = _run(LEAF_SPINE, "ecmp", 0, 1e-9, work, [], kernel=True, extra=extra)
        assert fast[1].ring_runs == 0
        _assert_same(slow, fast)


@pytest.mark.parametrize("routing", ["split", "min-split", "c4p"])
def test_policies_that_plan_or_split_per_message_run_as_processes(routing):
    env, fab = make_fabric(LEAF_SPINE, routing=routing, track_congestion=False)
    env.run(env.process(run_collective(env, fab, "allreduce", "ring", list(range(8)), 1e7)))
    assert fab.ring_runs == 0 and env.now > 0


def test_offered_load_tracking_runs_as_processes():
    env, fab = make_fabric(LEAF_SPINE, routing="ecmp")  # track_congestion defaults to on
    env.run(env.process(run_collective(env, fab, "allreduce", "ring", list(range(8)), 1e7)))
    assert fab.ring_runs == 0


def test_the_benchmark_ring_runs_in_the_kernel_through_an_experiment():
    """What ``make bench``'s s1 does, at 32 GPUs: the YAML path reaches the kernel, and the
    collective time is the one the processes give."""
    from netsim.config import ExperimentSpec
    from netsim.experiment import run_experiment

    spec = ExperimentSpec.model_validate({
        "name": "ring-kernel", "seed": 1,
        "topology": {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 8,
                     "nics_per_host": 8, "nic": {"bandwidth": "400Gbps", "latency": "1us"},
                     "uplink": {"bandwidth": "400Gbps", "latency": "500ns", "count": 4},
                     "intra_host": {"bandwidth": "900GB/s", "latency": "300ns"}},
        "placement": {"type": "random", "by": "host"}, "routing": "ecmp",
        "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": 2**24, "channels": 2},
        "engine": {"record_flows": True, "ideal": False, "congestion": False, "link_series": 0}})
    results = []
    for kernel in (False, True):
        fabric_mod.RING_KERNEL = kernel
        try:
            results.append(run_experiment(spec))
        finally:
            fabric_mod.RING_KERNEL = True
    slow, fast = results
    assert slow.fabric.ring_runs == 0 and fast.fabric.ring_runs == 1
    assert [(c.start_s, c.end_s) for c in slow.collectives] == [(c.start_s, c.end_s) for c in fast.collectives]
    assert slow.fabric.flow_records == fast.fabric.flow_records
    assert slow.events == fast.events


@pytest.mark.parametrize("routing", ["ecmp", "ethereal"])
def test_many_chunks_queue_deeply_and_still_match(routing, monkeypatch):
    """42 slices per step: a rank posts slices faster than its connection drains them, so queues
    outgrow the kernel's first per-connection buffer (4 messages) and it must widen them."""
    depth = [0]
    send = fabric_mod.Fabric.send

    def measured(self, src, dst, size, connection=None, **kw):
        event = send(self, src, dst, size, connection, **kw)
        depth[0] = max(depth[0], len(self._conn_queue.get(connection, ())))
        return event

    work = [("allreduce", 12, 5e7, 1, 1e5, 4)]
    monkeypatch.setattr(fabric_mod.Fabric, "send", measured)
    slow = _run(LEAF_SPINE, routing, 2, 1e-9, work, [], kernel=False)
    monkeypatch.undo()
    assert depth[0] > 100  # messages queued behind one connection's transmitting one
    fast = _run(LEAF_SPINE, routing, 2, 1e-9, work, [], kernel=True)
    assert fast[1].ring_runs == 1
    assert len(fast[1].flow_records) == 2 * 11 * 12 * 42
    _assert_same(slow, fast)

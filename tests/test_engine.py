"""Fabric: fluid sharing, batching, completion timing, conservation, incremental re-solving."""

import pytest

from netsim.routing import Connection
from tests.conftest import GB, make_fabric, make_leaf_spine


def _when(env, event, log, key):
    event.callbacks.append(lambda _e: log.__setitem__(key, env.now))


def test_single_message_time_is_latency_overhead_plus_size_over_bandwidth():
    topo = make_leaf_spine(nic_latency_s=1e-6, uplink_latency_s=5e-7, nic_overhead_s=2e-6)
    env, fab = make_fabric(topo)
    done = fab.send(0, 2, 1e6)
    env.run(done)
    assert env.now == pytest.approx(1e6 / GB + 2 * 1e-6 + 2 * 5e-7 + 2e-6, rel=1e-12)


def test_two_flows_share_a_nic_then_the_survivor_speeds_up():
    topo = make_leaf_spine()
    env, fab = make_fabric(topo)
    log = {}
    _when(env, fab.send(0, 1, 1e9), log, "small")  # host 0 -> host 1 (same leaf)
    _when(env, fab.send(0, 2, 3e9), log, "big")    # host 0 -> host 2, shares host 0's NIC
    env.run()
    # Both at 0.5 GB/s until the 1 GB one ends at t=2; the big one has 2 GB left at 1 GB/s -> t=4.
    assert log == {"small": pytest.approx(2.0), "big": pytest.approx(4.0)}
    assert fab.stats["solver_calls"] >= 1


def test_late_arrival_slows_the_first_flow():
    topo = make_leaf_spine()
    env, fab = make_fabric(topo)
    log = {}

    def late():
        yield env.timeout(1.0)
        _when(env, fab.send(0, 1, 1e9), log, "late")

    _when(env, fab.send(0, 2, 2e9), log, "first")
    env.process(late())
    env.run()
    # first: 1 GB alone in [0,1], then 0.5 GB/s shared: 1 GB left -> t=3; late: 0.5 GB/s for 2 s -> t=3.
    assert log["first"] == pytest.approx(3.0) and log["late"] == pytest.approx(3.0)


def test_sends_in_one_instant_are_solved_once():
    topo = make_leaf_spine(hosts_per_leaf=4)
    env, fab = make_fabric(topo)
    for dst in range(1, 8):
        fab.send(0, dst, 1e6)
    env.run()
    assert fab.stats["flushes"] == 2  # one for the 7 sends, one for their common completion
    assert fab.stats["solver_calls"] == 1


def test_disjoint_components_are_not_resolved():
    topo = make_leaf_spine(hosts_per_leaf=4)
    env, fab = make_fabric(topo)

    def second():
        yield env.timeout(0.5)
        fab.send(2, 3, 1e9)   # hosts 2 -> 3: shares no link with 0 -> 1

    fab.send(0, 1, 1e9)
    env.process(second())
    env.run()
    # Each flush touched one single-flow component: never two flows solved together.
    assert fab.stats["max_component"] == 1


def test_bytes_are_conserved_on_every_link_of_the_path():
    topo = make_leaf_spine(spines=2)
    env, fab = make_fabric(topo)
    for i in range(4):
        fab.send(0, 2, 1e6 * (i + 1), Connection(0, 2, channel=i))
    env.run()
    nic_up = [i for i in range(len(topo.links)) if topo.link_name(i) == "h0.nic0->leaf0"][0]
    assert fab.link_bytes[nic_up] == pytest.approx(1e7)
    spine_bytes = sum(fab.link_bytes[i] for i in range(len(topo.links)) if topo.links.kind_name(i) == "up")
    assert spine_bytes == pytest.approx(1e7)


def test_two_connections_forced_onto_one_uplink_take_the_fluid_time():
    # One spine: both cross-leaf flows share leaf0->spine0 (1 GB/s) while each NIC is 1 GB/s.
    topo = make_leaf_spine(spines=1)
    env, fab = make_fabric(topo)
    log = {}
    _when(env, fab.send(0, 2, 1e9), log, "a")
    _when(env, fab.send(1, 3, 1e9), log, "b")
    env.run()
    assert log == {"a": pytest.approx(2.0), "b": pytest.approx(2.0)}
    assert fab.link_peak_util.max() == pytest.approx(1.0)


def test_zero_byte_message_costs_only_latency():
    topo = make_leaf_spine(nic_latency_s=1e-6)
    env, fab = make_fabric(topo)
    env.run(fab.send(0, 1, 0))
    assert env.now == pytest.approx(2e-6)


def test_rate_cap_limits_a_flow():
    topo = make_leaf_spine()
    env, fab = make_fabric(topo)
    env.run(fab.send(0, 1, 1e9, cap_Bps=0.25 * GB))
    assert env.now == pytest.approx(4.0)


def test_negative_size_rejected():
    env, fab = make_fabric(make_leaf_spine())
    with pytest.raises(ValueError):
        fab.send(0, 1, -1)


def test_busy_time_and_peak_util():
    topo = make_leaf_spine()
    env, fab = make_fabric(topo)
    fab.send(0, 1, 1e9)
    env.run()
    fab.finalize()
    nic_up = [i for i in range(len(topo.links)) if topo.link_name(i) == "h0.nic0->leaf0"][0]
    assert fab.link_busy_s[nic_up] == pytest.approx(1.0)
    assert fab.link_peak_util[nic_up] == pytest.approx(1.0)


def test_messages_on_one_connection_are_sent_in_order():
    topo = make_leaf_spine()
    env, fab = make_fabric(topo)
    log = {}
    conn = Connection(0, 1)
    _when(env, fab.send(0, 1, 1e9, conn), log, "first")
    _when(env, fab.send(0, 1, 1e9, conn), log, "second")
    _when(env, fab.send(0, 1, 1e9, Connection(0, 1, channel=1)), log, "other")
    env.run()
    # FIFO on the connection (like a queue pair); the other connection shares the NIC fairly.
    # [0,2): first and other at 0.5 -> first done at 2; [2,3): second and other at 0.5 ... other done
    # at 2 (1 GB at 0.5) -> both end at 2; then second alone at 1 GB/s from 2 -> 3.
    assert log == {"first": pytest.approx(2.0), "other": pytest.approx(2.0), "second": pytest.approx(3.0)}


def test_flows_draining_within_the_tolerance_complete_together():
    topo = make_leaf_spine(hosts_per_leaf=4)
    env, fab = make_fabric(topo, completion_tolerance_s=1e-9)
    log = {}
    _when(env, fab.send(0, 1, 1e9), log, "a")          # drains at 1.0 s
    _when(env, fab.send(2, 3, 1e9 + 0.5), log, "b")    # would drain 0.5 ns later: same completion
    _when(env, fab.send(4, 5, 1e9 + 5.0), log, "c")    # 5 ns later: its own completion
    env.run()
    assert log["a"] == log["b"] == pytest.approx(1.0)
    assert log["c"] == pytest.approx(1.0 + 5e-9, abs=1e-12)
    assert fab.stats["flushes"] == 3   # the sends, the a+b completion, the c completion


def test_split_message_whose_sub_flows_round_to_zero_bytes_finishes_once(leaf_spine_2x2):
    """Regression: a sub-flow of 0 bytes finishes at once; it must not finish the message before
    its siblings are placed (the message was finished twice and the next one crashed)."""
    env, fab = make_fabric(leaf_spine_2x2, routing="split")
    conn = Connection(0, 2)
    tiny = fab.send(0, 2, 5e-324, conn)
    after = fab.send(0, 2, 1e6, conn)
    env.run(env.all_of([tiny, after]))
    assert tiny.processed and after.processed
    assert env.now == pytest.approx(1e6 / GB, rel=1e-9)


def _counting_env():
    """A SimPy environment counting step() calls the plain way (what Environment used to do)."""
    import simpy

    class Counting(simpy.Environment):
        steps = 0

        def step(self):
            self.steps += 1
            super().step()

    return Counting()


@pytest.mark.parametrize("how", ["empty", "until_event", "until_time", "until_never"])
def test_environment_counts_steps_without_overriding_step(how):
    """``Environment.events_processed`` is derived from SimPy's event ids, not counted per step:
    it must equal the number of step() calls, however the run ends (schedule exhausted, an
    ``until`` event or time, or an ``until`` event that never fires)."""
    import simpy

    from netsim.engine import Environment

    counts = []
    for env in (Environment(), _counting_env()):
        def proc(env=env):
            for i in range(50):
                yield env.timeout(0.1 * (i % 3))
            return 7

        def background(env=env):
            for _ in range(30):
                yield env.timeout(0.5)

        p = env.process(proc())
        env.process(background())
        if how == "empty":
            env.run()
        elif how == "until_event":
            assert env.run(until=p) == 7
        elif how == "until_time":
            env.run(until=3.3)
        else:
            with pytest.raises(RuntimeError):
                env.run(until=simpy.Event(env))
        counts.append(env.events_processed if isinstance(env, Environment) else env.steps)
    assert counts[0] == counts[1] > 10

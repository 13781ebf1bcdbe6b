"""The two executors of one schedule agree: the compiled core against the reference, its oracle.

Random schedules (sends, delays and joins in a random dependency DAG, zero-byte and queued
messages included) run on small random fabrics under every routing policy, with faults and
re-routing, congestion tracking, link series and flow records on. Everything a run leaves must be
the same to 1e-9 relative: every task's end, every message's start and end, link bytes, busy
times, peak utilisation, offered-load peaks, bytes posted and delivered, re-routes.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st

from netsim.collectives import build_collective, run_collective
from netsim.config import FaultSpec
from netsim.engine import Environment, Fabric
from netsim.engine.faults import fault_process, resolve_faults
from netsim.engine.model import ScheduleBuilder
from netsim.engine.reference import run_schedule
from netsim.errors import ConfigError
from netsim.routing import make_routing
from netsim.routing.ethereal import Ethereal
from netsim.solver import COMPILED
from netsim.topology.dragonfly import dragonfly
from tests.conftest import GB, make_leaf_spine

pytestmark = pytest.mark.skipif(not COMPILED, reason="numba is not installed: only the reference executor exists")

RTOL = 1e-9
LEAF_POLICIES = ("ecmp", "spray", "split", "min-split", "ethereal", "c4p")
DRAGONFLY_POLICIES = ("minimal", "valiant", "ugal", "adaptive")


def leaf_spine(draw) -> object:
    """A small leaf-spine, possibly with slower NICs and parallel cables."""
    leaves, spines = draw(st.integers(2, 3)), draw(st.integers(1, 3))
    overrides = draw(st.dictionaries(st.tuples(st.integers(0, 2 * leaves - 1), st.integers(0, 1)),
                                     st.sampled_from([0.25 * GB, 0.5 * GB]), max_size=2))
    return make_leaf_spine(leaves=leaves, spines=spines, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=2,
                           uplinks_per_spine=draw(st.integers(1, 2)), nic_latency_s=1e-6, uplink_latency_s=5e-7,
                           nic_bandwidth_overrides=overrides)


DRAGONFLY = dragonfly(groups=4, switches_per_group=2, hosts_per_switch=2, global_links_per_switch=2,
                      link_bandwidth_Bps=GB)


@st.composite
def schedules(draw, n_gpus: int):
    """A random schedule: each task depends on up to three earlier ones."""
    b = ScheduleBuilder()
    ids: list[int] = []
    conns = [b.connect(*draw(st.lists(st.integers(0, n_gpus - 1), min_size=2, max_size=2, unique=True)),
                       draw(st.integers(0, 1))) for _ in range(draw(st.integers(1, 12)))]
    for _ in range(draw(st.integers(1, 50))):
        deps = sorted(set(draw(st.lists(st.sampled_from(ids), max_size=3)))) if ids else []
        kind = draw(st.sampled_from(["send"] * 6 + ["delay", "join"]))
        if kind == "send":
            size = draw(st.sampled_from([0.0, 1e3, 1e6, 3e7, 1e8]))
            ids.append(int(b.send(draw(st.sampled_from(conns)), size, after=[deps])[0]))
        elif kind == "delay":
            ids.append(int(b.delay(draw(st.sampled_from([0.0, 1e-6, 1e-3])), after=[deps])[0]))
        else:
            ids.append(int(b.join(after=[deps])[0]))
    return b.build()


def faults_on(topo, draw):
    """Up to three timed faults on the first switch links: down, up again, degraded."""
    links, parallel = topo.links, {}
    for i in range(len(links)):
        if links.kind_name(i) in ("up", "global"):
            ends = f"{topo.node_name(int(links.src[i]))}->{topo.node_name(int(links.dst[i]))}"
            parallel[ends] = parallel.get(ends, 0) + 1
    names = sorted(f"{ends}#{k}" for ends, count in parallel.items() for k in range(count))
    specs = []
    for _ in range(draw(st.integers(0, 3))):  # a link taken down comes back: no message waits forever
        at = draw(st.sampled_from([0.0, 0.011, 0.023, 0.037]))
        link = draw(st.sampled_from(names))
        if draw(st.booleans()):
            specs += [FaultSpec(at=at, link=link, action="down"), FaultSpec(at=at + 0.041, link=link, action="up")]
        else:
            specs.append(FaultSpec(at=at, link=link, action="degrade", fraction=0.3))
    # One change per instant: two at once that the policy hears of together move a message twice in
    # the reference (counted as two re-routes) and once, to where it ends up, in the compiled
    # executor (the times and bytes agree either way).
    seen, kept = set(), []
    for f in sorted(specs, key=lambda f: f.at):
        if f.at not in seen:
            seen.add(f.at)
            kept.append(f)
    return resolve_faults(kept, topo)


def run(backend, topo, policy, seed, schedule, faults, tolerance):
    env = Environment()
    options = {"reconvergence": "10ms"} if policy in ("ecmp", "spray", "split") else None
    fab = Fabric(env, topo, make_routing(policy, topo, np.random.default_rng(seed), options), backend=backend,
                 link_series_bins=8, track_congestion=True, record_flows=True, completion_tolerance_s=tolerance)
    handle = fab.submit(schedule)
    if faults:
        env.process(fault_process(env, fab, faults))
    env.run(handle.done)
    fab.finalize()
    return env, fab, np.asarray(handle.times)


def close(a, b, what):
    np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=RTOL, atol=1e-15, err_msg=what)


def assert_same(ref, new):
    (env_a, fab_a, times_a), (env_b, fab_b, times_b) = ref, new
    close(times_a, times_b, "task ends")
    assert env_a.now == pytest.approx(env_b.now, rel=RTOL, abs=1e-15)
    for name in ("link_bytes", "link_busy_s", "link_peak_util", "offered_peak", "spray_offered_peak"):
        close(getattr(fab_a, name), getattr(fab_b, name), name)
    ra, rb = (sorted(f.flow_records, key=lambda r: (r[1], r[7], r[0])) for f in (fab_a, fab_b))
    assert [r[1:7] + r[9:] for r in ra] == [r[1:7] + r[9:] for r in rb]
    close([r[7:9] for r in ra], [r[7:9] for r in rb], "message starts and ends")
    for name in ("bytes_posted", "bytes_delivered"):
        a, b = getattr(fab_a, name), getattr(fab_b, name)
        assert set(a) == set(b), name
        close([a[k] for k in a], [b[k] for k in a], name)
    assert fab_a.stats["reroutes"] == fab_b.stats["reroutes"]
    assert fab_a.stats["flows"] == fab_b.stats["flows"]
    assert fab_a.undelivered == fab_b.undelivered == 0
    series_a = fab_a.link_series.utilisation(fab_a.capacity_Bps, env_a.now)
    series_b = fab_b.link_series.utilisation(fab_b.capacity_Bps, env_b.now)
    for x, y in zip(series_a, series_b):
        close(x, y, "link series")


@settings(max_examples=int(__import__("os").environ.get("DEEP", 60)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), policy=st.sampled_from(LEAF_POLICIES), seed=st.integers(0, 3),
       tolerance=st.sampled_from([0.0, 1e-9, 1e-6]))
def test_random_schedules_on_a_leaf_spine_agree(data, policy, seed, tolerance):
    topo = leaf_spine(data.draw)
    schedule = data.draw(schedules(topo.n_gpus))
    faults = faults_on(topo, data.draw)
    note(f"connections: {schedule.connections.connections()}")
    assert_same(run("reference", topo, policy, seed, schedule, faults, tolerance),
                run("compiled", topo, policy, seed, schedule, faults, tolerance))


@settings(max_examples=int(__import__("os").environ.get("DEEP", 30)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), policy=st.sampled_from(DRAGONFLY_POLICIES), seed=st.integers(0, 3))
def test_random_schedules_on_a_dragonfly_agree(data, policy, seed):
    schedule = data.draw(schedules(DRAGONFLY.n_gpus))
    faults = faults_on(DRAGONFLY, data.draw)
    note(f"connections: {schedule.connections.connections()}")
    a = run("reference", DRAGONFLY, policy, seed, schedule, faults, 1e-9)
    b = run("compiled", DRAGONFLY, policy, seed, schedule, faults, 1e-9)
    note(f"routes: {a[1].routes_used()} {b[1].routes_used()} times {a[2]} {b[2]}")
    assert_same(a, b)


@pytest.mark.xfail(strict=True, reason="open: two deliveries one ulp apart swap order between the executors")
def test_deliveries_one_ulp_apart_keep_their_order_in_both_executors():
    """Found by hypothesis (dragonfly, adaptive routing): messages of two connections are delivered at
    1e-6 s in one executor and 1.0000000000000002e-6 s in the other (their rates and delays agree to an
    ulp). Each delivery releases a message onto connection 0: a 1 kB one and a zero-byte one. Their
    order on the FIFO connection flips with the ulp, and the zero-byte message ends 1 us apart. A fix
    must make deliveries within the completion tolerance simultaneous and ordered alike in both."""
    b = ScheduleBuilder()
    c0, c1 = b.connect(0, 7), b.connect(4, 0)
    ids = [int(b.send(c0, 1e3, after=[-1])[0])]
    ids += [int(b.send(c0, 0.0, after=[-1])[0]) for _ in range(6)]
    ids.append(int(b.send(c1, 1e3, after=[-1])[0]))
    ids.append(int(b.send(c0, 0.0, after=[ids[7]])[0]))  # released by connection 1's delivery
    b.delay(0.0, after=[-1])
    for _ in range(4):
        b.send(c0, 0.0, after=[-1])
    b.send(c0, 1e3, after=[ids[0]])  # released by connection 0's own delivery
    schedule = b.build()
    assert_same(run("reference", DRAGONFLY, "adaptive", 0, schedule, [], 1e-9),
                run("compiled", DRAGONFLY, "adaptive", 0, schedule, [], 1e-9))


def test_a_flush_interrupted_to_route_goes_on_before_the_instants_other_events():
    """Found by hypothesis: under a per-message policy (min-split) the compiled executor left its flush
    to ask for routes and, back, took this instant's other events first: a DELAY(0) that ended then
    posted a send ahead of one its flush was about to post, which overtook it on the connection."""
    topo = make_leaf_spine(leaves=2, spines=1, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=2)
    b = ScheduleBuilder()
    c = b.connect([0], [1], 0)  # (two GPUs of one host)
    t0 = b.send(c, 0.0)
    t1 = b.send(c, 0.0, after=[t0.tolist()])
    wait = b.delay(0.0, after=[t1.tolist()])
    late = b.send(c, 0.0, after=[wait.tolist()])  # posted after `big`, so it waits for it
    t2 = b.send(c, 0.0, after=[t0.tolist()])
    big = b.send(c, 1000.0, after=[t2.tolist()])
    for policy in ("min-split", "ethereal", "ecmp"):
        ref = run("reference", topo, policy, 0, b.build(), [], 0.0)
        new = run("compiled", topo, policy, 0, b.build(), [], 0.0)
        assert ref[2][late[0]] == new[2][late[0]] == ref[2][big[0]] > 0, policy
        assert_same(ref, new)


OPS = ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce")


@settings(max_examples=30, deadline=None)
@example(op="allreduce", algorithm="tree", n=5, size=9599999.0, channels=1, chunk=200000.0, policy="min-split",
         pick=129197)
@given(op=st.sampled_from(OPS), algorithm=st.sampled_from(["ring", "tree"]), n=st.integers(2, 12),
       size=st.floats(1e3, 5e7), channels=st.integers(1, 3), chunk=st.sampled_from([None, 2e5, 1e6]),
       policy=st.sampled_from(LEAF_POLICIES), pick=st.integers(0, 10**6))
def test_collectives_agree(op, algorithm, n, size, channels, chunk, policy, pick):
    """Collectives, queued chunks and all, on both executors.

    The compiled executor's default re-solves only the flows a change can affect (``prune``); the
    others keep rates computed earlier, equal to the full re-solve's up to rounding. Over hundreds of
    dependent chunks such rounding moves completion order at ties and the end by up to ~1e-6
    relative (a min-split tree: 7e-7). So the exact comparison runs the compiled executor unpruned,
    and the pruned default is held to 1e-5.

    All three run without a completion tolerance: with one, flows finishing within it drain together,
    so which do depends on rounding. Ethereal and min-split plan each instant's batch of sends; two
    executors whose times differ by an ulp (equal up to rounding, as above) can see one instant where
    the other sees two, plan them apart, and from there send different pieces on different paths
    (found by hypothesis: a min-split tree all-reduce, 1-ulp apart at one message, 0.4% at the end).
    For them the test requires the exact agreement while the plans agree, and that plans part only at
    a message whose times agree to rounding."""
    topo = make_leaf_spine(leaves=3, spines=2, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=2,
                           nic_bandwidth_overrides={(3, 0): 0.5 * GB})
    gpus = [int(g) for g in np.random.default_rng(pick).permutation(topo.n_gpus)[:n]]
    try:
        schedule = build_collective(op, algorithm, gpus, size, gpu_host=topo.gpu_host, channels=channels,
                                    chunk_bytes=chunk)
    except ConfigError:
        return  # an algorithm that does not implement this op (refused the same way on both executors)
    out = []
    for backend, options in (("reference", {}), ("compiled", {"prune": False}), ("compiled", {})):
        env = Environment()
        routing, batches = _logged(make_routing(policy, topo, np.random.default_rng(pick)))
        fab = Fabric(env, topo, routing, backend=backend, record_flows=True, completion_tolerance_s=0.0, **options)
        env.run(run_schedule(env, fab, schedule).done)
        fab.finalize()
        out.append((env.now, fab.flow_records, fab.link_bytes, batches))
    for new, rtol in ((out[1], RTOL), (out[2], 1e-5)):
        if new[3] != out[0][3]:  # plans parted: at a message whose end agrees to rounding
            assert _first_parting(out[0][1], new[1]) <= (1e-14 if rtol == RTOL else 1e-9)
            event("batch plans parted at a rounding tie")
            continue
        assert new[0] == pytest.approx(out[0][0], rel=rtol)
        if rtol == RTOL:
            ref, got = _by_message(out[0][1]), _by_message(new[1])
            assert ref.keys() == got.keys()
            close([ref[k] for k in ref], [got[k] for k in ref], "message times")
            close(out[0][2], new[2], "link bytes")


def _logged(policy):
    """``policy`` with the batches it plans recorded (per-instant planners: Ethereal, min-split)."""
    batches = []
    if isinstance(policy, Ethereal):
        plan = policy.plan

        def logged(connections):
            batches.append(tuple(dict.fromkeys(connections)))
            return plan(connections)
        policy.plan = logged
    return policy, batches


def _by_message(records: list[tuple]) -> dict[tuple, tuple[float, float]]:
    """(start, end) of each message, keyed by its connection and its place on it (a connection's
    messages are sent one after another: ordered by end). Not a sort of all the times: messages of
    different connections that tie up to rounding would pair up differently."""
    seen: dict[str, int] = {}
    out = {}
    for r in sorted(records, key=lambda r: r[8]):
        k = seen.get(r[1], 0)
        out[(r[1], k)] = (r[7], r[8])
        seen[r[1]] = k + 1
    return out


def _first_parting(ref: list[tuple], new: list[tuple]) -> float:
    """Relative difference of the end times of the first message (by end) whose end differs."""
    a, b = _by_message(ref), _by_message(new)
    parted = sorted((min(a[k][1], b[k][1]), k) for k in a if k not in b or a[k][1] != b[k][1])
    if not parted:
        return 0.0
    k = parted[0][1]
    return abs(a[k][1] - b[k][1]) / abs(a[k][1]) if k in b else float("inf")


def test_the_backend_is_one_parameter_with_a_documented_default():
    from netsim.engine.core import CompiledCore
    from netsim.engine.fabric import default_backend
    from netsim.engine.reference import ReferenceFabric

    topo = make_leaf_spine()
    routing = make_routing("ecmp", topo, np.random.default_rng(0))
    assert default_backend() == "compiled"
    assert isinstance(Fabric(Environment(), topo, routing), CompiledCore)
    assert isinstance(Fabric(Environment(), topo, routing, backend="reference"), ReferenceFabric)
    with pytest.raises(ValueError, match="unknown backend"):
        Fabric(Environment(), topo, routing, backend="fast")


def test_a_large_ring_without_records_keeps_no_rows():
    """At scale a run can keep summary statistics only: no flow rows, same times."""
    topo = make_leaf_spine(leaves=4, spines=2, hosts_per_leaf=4, gpus_per_host=1, nics_per_host=1)
    ends = []
    for record in (True, False):
        env = Environment()
        fab = Fabric(env, topo, make_routing("ecmp", topo, np.random.default_rng(0)), record_flows=record)
        env.run(env.process(run_collective(env, fab, "allreduce", "ring", list(range(16)), 1e8, channels=2)))
        ends.append(env.now)
        assert (len(fab.flow_records) > 0) == record
        assert fab.stats["flows"] == 2 * 2 * 15 * 16
    assert ends[0] == ends[1]

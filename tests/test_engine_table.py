"""The compiled executor (``netsim.engine.core``, its flow table ``netsim.engine.table``) against the
reference executor, message by message through ``Fabric.send``.

Random message sets, with link faults and reroutes mid-flight, under single-path, split and
sprayed routing: both executors must deliver every message at the same time (1e-9 relative),
carry the same bytes on every link and report the same peaks. (``tests/test_executors.py`` does
the same for whole schedules.)
"""

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from netsim.engine import dag
from netsim.engine.core import CompiledCore
from netsim.routing import Connection
from netsim.solver import COMPILED
from netsim.topology.dragonfly import dragonfly
from tests.conftest import GB, make_fabric, make_leaf_spine

pytestmark = pytest.mark.skipif(not COMPILED, reason="numba is not installed: only the Python engine exists")

TOPO = make_leaf_spine(leaves=3, spines=2, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=1,
                       nic_latency_s=1e-6, uplink_latency_s=5e-7, nic_bandwidth_overrides={(3, 0): 0.5 * GB})

messages = st.lists(st.tuples(st.integers(0, TOPO.n_gpus - 1), st.integers(0, TOPO.n_gpus - 1),
                              st.floats(0, 1e8), st.floats(0, 0.2), st.integers(0, 2)), min_size=1, max_size=30)
faults = st.lists(st.tuples(st.floats(0, 0.3), st.integers(0, len(TOPO.links) - 1), st.sampled_from([0.0, 0.5, 1.0]),
                            st.booleans()), max_size=4)


def _run(msgs, fault_list, routing, seed, compiled, tolerance=1e-9, **kw):
    env, fab = make_fabric(TOPO, seed=seed, routing=routing, compiled=compiled, completion_tolerance_s=tolerance, **kw)
    done = {}

    def sender(i, src, dst, size, start, channel):
        yield env.timeout(start)
        yield fab.send(src, dst, size, Connection(src, dst, channel))
        done[i] = env.now

    def fault(at, link, fraction, tell_routing):
        yield env.timeout(at)
        fab.set_capacity({link: fraction * fab.capacity_Bps[link]})
        if tell_routing:
            fab.routing_changed({link: fraction})
        yield env.timeout(0.05)
        fab.set_capacity({link: fab.capacity_Bps[link]})  # repaired: every message can finish

    for i, m in enumerate(msgs):
        env.process(sender(i, *m))
    for f in fault_list:
        env.process(fault(*f))
    env.run()
    fab.finalize()
    assert isinstance(fab, CompiledCore) == compiled
    return done, fab


# With a completion tolerance, flows finishing within it drain together, up to that much early;
# which ones fall inside the window can differ by rounding between the paths (pruning keeps
# finish times computed at an earlier instant), so each message may shift by up to the tolerance
# per message before it. Hypothesis found such a case (a 0.5-byte split message: 2.5e-10 s).
# With no tolerance the two paths must agree to 1e-9 relative.
@pytest.mark.parametrize("tolerance", [0.0, 1e-9])
@settings(max_examples=150, deadline=None)
@given(msgs=messages, fault_list=faults, routing=st.sampled_from(["ecmp", "spray", "split"]),
       seed=st.integers(0, 3))
def test_compiled_and_python_engines_agree(tolerance, msgs, fault_list, routing, seed):
    done_py, fab_py = _run(msgs, fault_list, routing, seed, compiled=False, tolerance=tolerance)
    done_c, fab_c = _run(msgs, fault_list, routing, seed, compiled=True, tolerance=tolerance)
    slack = tolerance * len(msgs)
    assert done_c.keys() == done_py.keys() == set(range(len(msgs)))
    for i in done_py:
        assert done_c[i] == pytest.approx(done_py[i], rel=1e-9, abs=max(slack, 1e-15))
    np.testing.assert_allclose(fab_c.link_bytes, fab_py.link_bytes, rtol=1e-9, atol=1e-3)
    if tolerance == 0.0:
        # (a peak counts loads carried for a positive time: a message shorter than the tolerance may
        # drain at its start in one executor and carry its load for that long in the other)
        np.testing.assert_allclose(fab_c.link_peak_util, fab_py.link_peak_util, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fab_c.link_busy_s, fab_py.link_busy_s, rtol=1e-9, atol=max(slack, 1e-12))
    assert fab_c.active_flows == fab_c.undelivered == 0
    assert fab_c.stats["flows"] == fab_py.stats["flows"]


@settings(max_examples=100, deadline=None)
@given(msgs=messages, fault_list=faults, routing=st.sampled_from(["split", "ethereal", "min-split"]),
       seed=st.integers(0, 3), tolerance=st.sampled_from([0.0, 1e-9]))
# found by CI: a message of 5e-324 bytes split in two: each piece rounds to 0 bytes and is done at
# once, even the one on a link that is down (the compiled executor had waited for the repair)
@example(msgs=[(0, 0, 0.0, 0.0, 0)] * 8 + [(4, 0, 5e-324, 0.0, 1)], fault_list=[(0.0, 1, 0.0, False)],
         routing="split", seed=0, tolerance=0.0)
def test_split_messages_match_the_reference(msgs, fault_list, routing, seed, tolerance):
    """The compiled executor keeps a split message's pieces as one group of the flow table (no
    object per piece; a reroute moves them piece by piece): same times as the reference's one
    object per piece, same bytes, peaks and busy times."""
    kw = {"tolerance": tolerance, "track_congestion": False}
    done_c, fab_c = _run(msgs, fault_list, routing, seed, compiled=True, **kw)
    done_py, fab_py = _run(msgs, fault_list, routing, seed, compiled=False, **kw)
    assert done_c.keys() == done_py.keys()
    for i in done_py:
        assert done_c[i] == pytest.approx(done_py[i], rel=1e-9, abs=max(tolerance * len(msgs), 1e-15))
    np.testing.assert_allclose(fab_c.link_bytes, fab_py.link_bytes, rtol=1e-9, atol=1e-3)
    assert fab_c.stats["subflows"] == fab_py.stats["subflows"]
    assert fab_c.active_flows == fab_c.undelivered == 0


@pytest.mark.parametrize("batch", [1, 3, 4, 6])
def test_ethereal_windows_whole_or_few_pieces_of_many_paths_match_one_object_per_piece(batch):
    """``batch`` messages leave one NIC for one leaf at once over 16 paths (4 spines x 2 x 2
    cables): Ethereal cuts each into 16 pieces (1 or 3 messages: the whole base, sliced from its
    cached incidence) or 4 and 8 pieces (4 and 6 messages: cached per message). Same as one object
    per piece, to the bit, over two rounds on the same connections (the second reuses the base)."""
    topo = make_leaf_spine(leaves=2, spines=4, hosts_per_leaf=1, gpus_per_host=8, nics_per_host=1,
                           uplinks_per_spine=2, nic_latency_s=1e-6)
    runs = []
    for compiled in (True, False):
        env, fab = make_fabric(topo, routing="ethereal", track_congestion=False, compiled=compiled)
        times = {}

        def sender(i, fab=fab, env=env, times=times):
            for rnd in range(2):
                yield fab.send(i, 8 + i, 1e6, Connection(i, 8 + i))
                times[(i, rnd)] = env.now

        for i in range(batch):
            env.process(sender(i))
        env.run()
        runs.append((times, fab))
    (t_c, f_c), (t_py, f_py) = runs
    assert t_c.keys() == t_py.keys() and len(t_c) == 2 * batch
    for key in t_py:
        assert t_c[key] == pytest.approx(t_py[key], rel=1e-9)
    np.testing.assert_allclose(f_c.link_bytes, f_py.link_bytes, rtol=1e-9)
    assert f_c.stats["subflows"] == f_py.stats["subflows"] == 2 * batch * {1: 16, 3: 16, 4: 4, 6: 8}[batch]


def test_a_group_whose_pieces_all_drain_frees_its_slots_and_group():
    """Many split messages, one after another on one connection: slots and group ids are reused."""
    from netsim.engine import Environment, Fabric
    from netsim.routing import make_routing

    env = Environment()
    fab = Fabric(env, TOPO, make_routing("split", TOPO, np.random.default_rng(0), {"ways": 3}), track_congestion=False)
    conn = Connection(0, TOPO.n_gpus - 1)
    events = [fab.send(0, TOPO.n_gpus - 1, 1e6, conn) for _ in range(200)]
    env.run(env.all_of(events))
    assert fab.stats["subflows"] == 600
    assert fab.iv[dag.IV_NFREE] == len(fab.free) and fab.iv[dag.IV_NGFREE] == len(fab.gfree)  # all free again
    assert (fab.slot_task == -1).all() and (fab.group_task == -1).all()


DRAGONFLY = dragonfly(groups=5, switches_per_group=2, hosts_per_switch=2, global_links_per_switch=2,
                      link_bandwidth_Bps=GB)


@settings(max_examples=60, deadline=None)
@given(msgs=st.lists(st.tuples(st.integers(0, DRAGONFLY.n_gpus - 1), st.integers(0, DRAGONFLY.n_gpus - 1),
                               st.floats(0, 1e8), st.floats(0, 0.2)), min_size=1, max_size=30),
       seed=st.integers(0, 3))
def test_engines_agree_on_adaptive_dragonfly(msgs, seed):
    """Adaptive routing spreads each message over minimal and Valiant paths: most of its links
    carry it alone, which the kernel treats as caps outside the component. Same times as Python."""
    done = []
    for compiled in (False, True):
        env, fab = make_fabric(DRAGONFLY, seed=seed, routing="adaptive", compiled=compiled,
                               completion_tolerance_s=0.0)
        times = {}

        def sender(i, src, dst, size, start, env=env, fab=fab, times=times):
            yield env.timeout(start)
            yield fab.send(src, dst, size)
            times[i] = env.now

        for i, m in enumerate(msgs):
            env.process(sender(i, *m))
        env.run()
        fab.finalize()
        done.append((times, fab))
    (t_py, f_py), (t_c, f_c) = done
    assert t_c.keys() == t_py.keys() == set(range(len(msgs)))
    for i in t_py:
        assert t_c[i] == pytest.approx(t_py[i], rel=1e-9, abs=1e-15)
    np.testing.assert_allclose(f_c.link_bytes, f_py.link_bytes, rtol=1e-9, atol=1e-3)
    np.testing.assert_allclose(f_c.link_peak_util, f_py.link_peak_util, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(f_c.link_busy_s, f_py.link_busy_s, rtol=1e-9, atol=1e-12)


def test_table_grows_slots_rows_and_width():
    """More flows than slots, more flows per link than a row holds, more links than a row is wide."""
    topo = make_leaf_spine(leaves=2, spines=4, hosts_per_leaf=4, gpus_per_host=4, nics_per_host=1)
    results = []
    for compiled in (False, True):
        env, fab = make_fabric(topo, routing="spray", compiled=compiled)
        events = [fab.send(s, d, 1e6 * (1 + (s + d) % 3)) for s in range(topo.n_gpus) for d in range(topo.n_gpus)
                  if s != d]
        env.run(env.all_of(events))
        results.append(env.now)
        if compiled:  # (it starts with 64 slots, rows of 4 flows, 8 links per flow)
            assert len(fab.free) >= 240 and fab._table.rows.shape[1] > 4
    assert results[1] == pytest.approx(results[0], rel=1e-9)


def test_without_numba_the_python_engine_and_numpy_solver_pass_the_golden_test():
    """The fallback for machines without numba: the whole engine in Python with the numpy solver."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "NETSIM_NO_NUMBA": "1"}
    check = ("from netsim.solver import COMPILED, DEFAULT_SOLVER; from netsim.engine.fabric import Fabric;"
             "assert not COMPILED and DEFAULT_SOLVER == 'progressive_filling', (COMPILED, DEFAULT_SOLVER)")
    subprocess.run([sys.executable, "-c", check], cwd=root, env=env, check=True)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_engine_golden.py",
                          "tests/test_solver.py", "-k", "golden or agree or textbook"],
                         cwd=root, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert " passed" in out.stdout and " failed" not in out.stdout


def test_warm_up_compiles_and_caches_the_kernels():
    from netsim.engine.table import kernels_cached, warm_up

    warm_up()
    assert kernels_cached()
    assert len(dag.advance.signatures) == 1  # one compiled event loop, whatever the workload


def test_kernel_older_than_the_solver_it_inlines_is_recompiled():
    """numba only watches a kernel's own file: a table kernel cached before the last edit of the
    solver module is dropped when numba loads, and the next process compiles (and caches) it afresh."""
    import netsim.solver.bottleneck as solver
    from netsim.engine import table
    from netsim.solver import jit

    table.warm_up()
    index = Path(table._rebuild_heap._cache._cache_file._index_path)
    assert index.is_file()
    old = Path(solver.__file__).stat().st_mtime - 60
    os.utime(index, (old, old))
    jit._drop_stale([table._rebuild_heap])
    assert not index.is_file()
    rebuild = ("import numpy as np; from netsim.engine import table; from netsim.solver import jit; "
               "jit.compile_kernels(); t = table.FlowTable(np.ones(2), slots=2);"
               "table._rebuild_heap(t.num, t.hkeys, t.hvals, t.stats)")
    subprocess.run([sys.executable, "-c", rebuild], check=True, cwd=Path(__file__).resolve().parent.parent)
    assert index.is_file() and index.stat().st_mtime >= Path(solver.__file__).stat().st_mtime


@pytest.mark.parametrize("fids", [
    [7, 3, 9, 1, 4],                                            # a short run: sorted in place
    list(np.random.default_rng(0).permutation(200) + 1000),     # a dense range: placed by fid
    list(np.random.default_rng(2).choice(3000, 200, replace=False) + 50),  # 15 x as wide: placed too
    list(np.random.default_rng(1).choice(10**6, 200, replace=False)),  # sparse: a full sort
])
def test_flows_draining_at_one_instant_come_out_in_fid_order(fids):
    """Flows finishing at the same time drain in fid order, whichever way the kernel sorts them."""
    from netsim.engine.table import FlowTable

    n = len(fids)
    table = FlowTable(np.full(n, 10.0), slots=n)
    slots = [table.alloc(1) for _ in range(n)]
    table.flush([], [(s, np.array([i]), np.ones(1), math.inf, 5.0, int(f), 5.0)
                     for i, (s, f) in enumerate(zip(slots, fids))], [], set(), 0.0)
    codes, _n, _t = table.drain(math.inf, 0.5, False)
    by_slot = dict(zip(slots, fids))
    assert [by_slot[c] for c in codes.tolist()] == sorted(fids)

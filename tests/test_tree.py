"""Double binary tree: construction property for n = 2..300, time, bytes, tree vs ring."""

import pytest

from netsim.collectives import run_collective
from netsim.collectives.tree import _children, double_binary_trees
from tests.conftest import GB, make_fabric
from tests.test_ring import MiB
from tests.test_schedules import _crossbar

LAT, OVH = 1e-6, 2e-6


def _is_tree(parent):
    roots = [r for r, p in enumerate(parent) if p is None]
    if len(roots) != 1:
        return False
    for r in range(len(parent)):
        seen, x = set(), r
        while parent[x] is not None:
            if x in seen:
                return False
            seen.add(x)
            x = parent[x]
    return all(len(k) <= 2 for k in _children(parent))


@pytest.mark.parametrize("n", range(2, 301))
def test_double_binary_tree_construction(n):
    t1, t2 = double_binary_trees(n)
    assert _is_tree(t1) and _is_tree(t2)
    if n % 2 == 0:
        leaves1 = {r for r, k in enumerate(_children(t1)) if not k}
        leaves2 = {r for r, k in enumerate(_children(t2)) if not k}
        assert leaves1.isdisjoint(leaves2) and leaves1 | leaves2 == set(range(n))


def _run(alg, n, size, **kw):
    env, fab = make_fabric(_crossbar(n, nic_latency_s=LAT, nic_overhead_s=OVH))
    env.run(env.process(run_collective(env, fab, "allreduce", alg, list(range(n)), size, **kw)))
    return env.now, fab


@pytest.mark.parametrize("n", [8, 64])
def test_large_pipelined_tree_allreduce_approaches_2M_over_B(n):
    size = 256 * MiB
    t, _ = _run("tree", n, size, chunk_bytes=512 * 1024)
    assert 2 * size / GB <= t <= 1.03 * 2 * size / GB


def test_tree_bytes_per_rank():
    n, size = 8, 16 * MiB
    _, fab = _run("tree", n, size)
    sent = [0.0] * n
    for rec in fab.flow_records:
        sent[rec[2]] += rec[6]
    for r in range(n):
        expected = sum((size / 2) * ((p[r] is not None) + len(_children(p)[r])) for p in double_binary_trees(n))
        assert sent[r] == pytest.approx(expected)


def test_tree_beats_ring_for_small_messages_at_large_n_and_ring_wins_large():
    n = 64
    assert _run("tree", n, 4096)[0] < 0.5 * _run("ring", n, 4096)[0]
    assert _run("ring", n, 256 * MiB)[0] < _run("tree", n, 256 * MiB)[0]

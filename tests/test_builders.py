"""Every collective builder on its schedule alone (no engine): bytes, messages and the dependency
critical path against the closed form in its docstring; per-rank readiness; and runs pinned to
what the per-rank SimPy processes the builders replaced gave on a contended fabric."""

import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from netsim.collectives import ALGORITHM_OPS, build_collective, get_algorithm, run_collective
from netsim.collectives.tree import DEFAULT_TREE_CHUNK, _children, double_binary_trees
from netsim.engine.model import DELAY, SEND, ScheduleBuilder
from tests.conftest import GB, make_fabric, make_leaf_spine

ALPHA, B = 3e-6, 1e9          # per message: latency + overhead, rate
A_INTRA, B_INTRA = 6e-7, 1e10  # inside a host (hierarchical)
M = 6e6
ALL = sorted((op, a) for a, ops in ALGORITHM_OPS.items() for op in ops)
POW2 = {"recursive_doubling", "halving_doubling"}


# ------------------------------------------------------------------------------------ the model
def replay(s, alpha, rate):
    """Done time of every task when every message moves alone: a SEND starts once released and its
    connection's previous message has drained, drains ``amount / rate`` later and is done ``alpha``
    after that; a DELAY takes ``amount``; a JOIN nothing. Checks that each connection's messages
    are released in task order (program order: the order the executor posts them)."""
    done = np.zeros(len(s))
    free, posted = {}, {}
    kind, conn, amount = s.kind.tolist(), s.conn.tolist(), s.amount.tolist()
    for i in range(len(s)):
        deps = s.deps(i)
        t = float(done[deps].max()) if len(deps) else 0.0
        if kind[i] == SEND:
            c = conn[i]
            assert t >= posted.get(c, 0.0), f"message {i} released before an earlier one of its connection"
            posted[c] = t
            free[c] = max(t, free.get(c, 0.0)) + amount[i] / rate[i]
            done[i] = free[c] + alpha[i]
        else:
            done[i] = t + (amount[i] if kind[i] == DELAY else 0.0)
    return done


def releases(s, done):
    """When every task was released (its last dependency done)."""
    return np.array([done[s.deps(i)].max() if len(s.deps(i)) else 0.0 for i in range(len(s))])


def costs(s, channels, ports, gpu_host=None):
    """Per task (alpha, rate): every message at ``B / channels`` (the channels share a rank's NIC),
    and with ``ports`` at a further 1/k when k connections leave (or enter) a rank with the same
    dependencies (released together, they share its NIC). Intra-host messages: ``A_INTRA, B_INTRA``."""
    conns = s.connections
    sends = np.flatnonzero(s.kind == SEND)
    c = s.conn[sends]
    src, dst, ch = conns.src[c], conns.dst[c], conns.column("channel")[c]
    share = np.ones(len(sends))
    if ports:
        out, into = defaultdict(set), defaultdict(set)
        keys = [tuple(s.deps(i).tolist()) for i in sends]
        for k, (i, key) in enumerate(zip(sends, keys)):
            out[ch[k], src[k], key].add(s.conn[i])
            into[ch[k], dst[k], key].add(s.conn[i])
        share = np.array([max(len(out[ch[k], src[k], key]), len(into[ch[k], dst[k], key]))
                          for k, key in enumerate(keys)], dtype=float)
    intra = np.zeros(len(sends), bool) if gpu_host is None else gpu_host[src] == gpu_host[dst]
    alpha, rate = np.zeros(len(s)), np.ones(len(s))
    alpha[sends] = np.where(intra, A_INTRA, ALPHA)
    rate[sends] = np.where(intra, B_INTRA, B) / (channels * share)
    return alpha, rate


def per_gpu(s, column):
    """Bytes each GPU sends (``src``) or receives (``dst``)."""
    sends = s.kind == SEND
    return np.bincount(s.connections.column(column)[s.conn[sends]], weights=s.amount[sends], minlength=64)


# ------------------------------------------------------------------------------------ closed forms
def ring_time(steps, n, size, channels, chunk, alpha=ALPHA, rate=B):
    """The sliced ring of the docstring: ``(S-1) max(C p/B, p/B + alpha) + C p/B + alpha``, p = M/(nC)."""
    if steps == 0:
        return 0.0
    c = max(1, math.ceil(size / (n * channels) / chunk)) if chunk else 1
    p = size / (n * c) / rate
    return (steps - 1) * max(c * p, p + alpha) + c * p + alpha


def height(parent):
    def depth(r):
        return 0 if parent[r] is None else 1 + depth(parent[r])
    return max(depth(r) for r in range(len(parent)))


def closed_form(op, alg, n, size, channels, chunk):
    """(critical path, port sharing on) of ``op``/``alg`` as its docstring gives it."""
    lg = math.log2(n)
    if alg == "ring" and op in ("allreduce", "reduce_scatter", "allgather"):
        return ring_time(2 * (n - 1) if op == "allreduce" else n - 1, n, size, channels, chunk), False
    if alg == "ring":  # pipelined chain
        c = max(1, math.ceil(size / channels / chunk)) if chunk else 1
        return (c + n - 2) * size / (c * B) + (n - 1) * ALPHA, False
    if alg == "tree":
        c = max(1, math.ceil(size / 2 / channels / (chunk or DEFAULT_TREE_CHUNK)))
        h = max(height(p) for p in double_binary_trees(n))
        return (c - 1 + 2 * h) * size / (2 * c * B) + 2 * h * ALPHA, False
    return {
        "recursive_doubling": (lg * (ALPHA + size / B), False),
        "halving_doubling": (2 * lg * ALPHA + 2 * (n - 1) / n * size / B, False),
        "direct": (2 * (ALPHA + (n - 1) * size / (n * B)) if op == "allreduce"
                   else ALPHA + (n - 1) * size / (n * B), True),
        "star": (2 * (ALPHA + (n - 1) * size / B), True),
        "pairwise": ((n - 1) * (ALPHA + size / (n * B)), False),
        "binomial": (math.ceil(lg) * (ALPHA + size / B), True),
    }[alg]


def binomial_children(n):
    kids = [0] * n
    k = 0
    while (1 << k) < n:
        for r in range(1 << k):
            if r + (1 << k) < n:
                kids[r] += 1
        k += 1
    return np.array(kids, dtype=float)


def traffic(op, alg, n, size, channels, chunk):
    """(bytes each rank sends, bytes each rank receives, messages)."""
    ones = np.ones(n)
    if alg == "ring" and op in ("allreduce", "reduce_scatter", "allgather"):
        steps = 2 * (n - 1) if op == "allreduce" else n - 1
        c = max(1, math.ceil(size / (n * channels) / chunk)) if chunk else 1
        return ones * steps * size / n, ones * steps * size / n, steps * n * channels * c
    if alg == "ring":
        c = max(1, math.ceil(size / channels / chunk)) if chunk else 1
        first, last = np.r_[size * ones[:-1], 0.0], np.r_[0.0, size * ones[:-1]]
        return (first, last, (n - 1) * channels * c) if op == "broadcast" else (last, first, (n - 1) * channels * c)
    if alg == "tree":
        c = max(1, math.ceil(size / 2 / channels / (chunk or DEFAULT_TREE_CHUNK)))
        sent = sum((size / 2) * (np.array([p is not None for p in t]) + [len(k) for k in _children(t)])
                   for t in double_binary_trees(n))
        return sent, sent, 4 * (n - 1) * channels * c
    per_pair = {"recursive_doubling": (math.log2(n) * size * ones, n * math.log2(n)),
                "halving_doubling": (2 * (n - 1) / n * size * ones, 2 * n * math.log2(n)),
                "pairwise": ((n - 1) / n * size * ones, n * (n - 1))}
    if alg in per_pair:
        sent, msgs = per_pair[alg]
        return sent, sent, msgs * channels
    if alg == "direct":
        rounds = 2 if op == "allreduce" else 1
        sent = rounds * (n - 1) / n * size * ones
        return sent, sent, rounds * n * (n - 1) * channels
    if alg == "star":
        sent = np.r_[(n - 1) * size, size * ones[1:]]
        return sent, sent, 2 * (n - 1) * channels
    kids = binomial_children(n) * size  # binomial broadcast; reduce: the reverse
    got = np.r_[0.0, size * ones[1:]]
    return (kids, got, (n - 1) * channels) if op == "broadcast" else (got, kids, (n - 1) * channels)


# ------------------------------------------------------------------------------------ cases
def _flat_cases():
    for op, alg in ALL:
        if alg == "hierarchical":
            continue
        sizes = [2, 4, 8, 16] if alg in POW2 else list(range(2, 18))
        chunks = [None, M / 40, M / 7] if alg in ("ring", "tree") else [None]
        for n in sizes:
            for channels in (1, 2, 3):
                for chunk in chunks:
                    yield op, alg, n, channels, chunk


FLAT = list(_flat_cases())


@pytest.mark.parametrize("op, alg, n, channels, chunk", FLAT,
                         ids=[f"{o}-{a}-n{n}-c{c}-{k or 0:.0f}" for o, a, n, c, k in FLAT])
def test_closed_form_on_the_schedule(op, alg, n, channels, chunk):
    gpus = list(np.random.default_rng(n).permutation(40)[:n])  # any GPU ids: the builder works on ranks
    s = build_collective(op, alg, gpus, M, channels=channels, chunk_bytes=chunk)
    s.check()
    sent, received, messages = traffic(op, alg, n, M, channels, chunk)
    assert s.n_sends == messages
    np.testing.assert_allclose(per_gpu(s, "src")[gpus], sent, rtol=1e-12)
    np.testing.assert_allclose(per_gpu(s, "dst")[gpus], received, rtol=1e-12)
    expected, ports = closed_form(op, alg, n, M, channels, chunk)
    done = replay(s, *costs(s, channels, ports))
    if alg == "binomial" and op == "reduce" and n & (n - 1):
        assert done.max() <= expected * (1 + 1e-12)  # a leaf that need not wait overlaps a round
    else:
        assert done.max() == pytest.approx(expected, rel=1e-12)


HIER = [(h, g, c, k) for h, g in [(1, 2), (2, 1), (2, 2), (3, 2), (2, 4), (4, 4), (3, 5), (5, 3), (8, 2)]
        for c in (1, 2) for k in (None, M / 50)]


@pytest.mark.parametrize("hosts, g, channels, chunk", HIER)
def test_hierarchical_closed_form_on_the_schedule(hosts, g, channels, chunk):
    gpu_host = np.repeat(np.arange(hosts + 1), g)  # GPUs of a host numbered together; one host unused
    gpus = [h * g + i for h in np.random.default_rng(g).permutation(hosts + 1)[:hosts] for i in range(g)]
    s = build_collective("allreduce", "hierarchical", gpus, M, channels=channels, chunk_bytes=chunk,
                         gpu_host=gpu_host)
    s.check()
    # every rank: reduce-scatter and allgather over g, allreduce of M/g over H
    each = 2 * (g - 1) / g * M + 2 * (hosts - 1) / hosts * M / g
    np.testing.assert_allclose(per_gpu(s, "src")[gpus], each, rtol=1e-12)
    np.testing.assert_allclose(per_gpu(s, "dst")[gpus], each, rtol=1e-12)
    intra = ring_time(g - 1, g, M, channels, chunk, A_INTRA, B_INTRA)
    expected = 2 * intra + ring_time(2 * (hosts - 1), hosts, M / g, channels, chunk)
    done = replay(s, *costs(s, channels, False, gpu_host))
    assert done.max() == pytest.approx(expected, rel=1e-12)
    if chunk is None:  # the docstring's form
        doc = 2 * (g - 1) * (A_INTRA + M / (g * B_INTRA)) + 2 * (hosts - 1) * (ALPHA + M / (g * hosts * B))
        assert done.max() == pytest.approx(doc, rel=1e-12)


def _calls():
    for op, alg in ALL:
        for n in ([2, 4, 8] if alg in POW2 else [2, 3, 5, 8]):
            if alg == "hierarchical":
                yield op, alg, list(range(2 * n)), np.arange(2 * n) // 2  # n hosts of 2 GPUs
            else:
                yield op, alg, list(range(n)), None


CALLS = list(_calls())


@pytest.mark.parametrize("op, alg, gpus, gpu_host", CALLS, ids=[f"{o}-{a}-{len(g)}" for o, a, g, _h in CALLS])
@pytest.mark.parametrize("channels, chunk", [(1, None), (2, M / 30)])
def test_each_rank_starts_when_ready_and_ends_after_its_last_arrival(op, alg, gpus, gpu_host, channels, chunk):
    """Per-rank ``ready``: no rank posts a message before it is ready; a rank's end follows every
    message it receives, and the last end is the end of the call."""
    n = len(gpus)
    b = ScheduleBuilder()
    wait = np.random.default_rng(n).uniform(0, 5 * M / B, n)
    ready = b.delay(wait)
    build = get_algorithm(op, alg)
    ends = build(b, gpus, M, channels=channels, chunk_bytes=chunk, ready=ready, gpu_host=gpu_host)
    s = b.build()
    s.check()
    done = replay(s, *costs(s, channels, False, gpu_host))
    released = releases(s, done)
    rank = {g: r for r, g in enumerate(gpus)}
    sends = np.flatnonzero(s.kind == SEND)
    src = np.array([rank[g] for g in s.connections.src[s.conn[sends]]])
    dst = np.array([rank[g] for g in s.connections.dst[s.conn[sends]]])
    assert (released[sends] >= wait[src]).all()
    assert (done[ends] >= wait).all()
    arrived = np.zeros(n)
    np.maximum.at(arrived, dst, done[sends])
    assert (done[ends] >= arrived).all()
    assert done[ends].max() == done.max()
    # one task for every rank to wait for: the whole call shifts by it
    b = ScheduleBuilder()
    start = b.delay(1e-3)
    build(b, gpus, M, channels=channels, chunk_bytes=chunk, ready=int(start[0]), gpu_host=gpu_host)
    late = b.build()
    plain = build_collective(op, alg, gpus, M, channels=channels, chunk_bytes=chunk, gpu_host=gpu_host)
    t_late = replay(late, *costs(late, channels, False, gpu_host)).max()
    t_plain = replay(plain, *costs(plain, channels, False, gpu_host)).max()
    assert t_late == pytest.approx(1e-3 + t_plain, rel=1e-12)


def test_a_single_rank_builds_nothing():
    for op, alg in ALL:
        b = ScheduleBuilder()
        assert get_algorithm(op, alg)(b, [3], M).tolist() == [-1] and b.n_tasks == 0
        assert get_algorithm(op, alg)(b, [3], M, ready=[7]).tolist() == [7] and b.n_tasks == 0


def test_connections_carry_job_comm_and_tcp():
    s = build_collective("allreduce", "tree", [4, 9, 2], M, job=3, comm=5, tcp=True, channels=2)
    conns = s.connections.connections()
    assert {(c.job, c.comm, c.tcp) for c in conns} == {(3, 5, True)}
    assert {c.channel for c in conns} == {0, 1, 2, 3}  # channel 2c + t for copy c of tree t


def test_a_1024_rank_ring_is_two_million_messages_in_arrays():
    s = build_collective("allreduce", "ring", list(range(1024)), 2**30)
    assert s.n_sends == len(s) == 2 * 1023 * 1024 and len(s.connections) == 1024
    assert s.dep_ptr[-1] == 2 * 1023 * 1024 - 1024  # one dependency per message after the first step


# ------------------------------------------------------------------------------------ against the old processes
#: A contended leaf-spine: 6 hosts of 2 GPUs and 2 NICs, two slow NICs, 2 spines for 2 leaves.
TOPO = make_leaf_spine(leaves=2, spines=2, hosts_per_leaf=3, gpus_per_host=2, nics_per_host=2,
                       nic_latency_s=1e-6, uplink_latency_s=5e-7, intra_latency_s=3e-7, nic_overhead_s=2e-6,
                       nic_bandwidth_overrides={(1, 1): 0.5 * GB, (4, 0): 0.25 * GB})

#: What the per-rank SimPy processes (removed in favour of the builders) gave for the calls of
#: :func:`_pinned_call`: (end of the call, messages, sum of the messages' arrival times). The
#: schedules gave identical per-message records (sorted by connection and start) on 1,440 runs
#: of this kind before the processes were deleted.
PINNED = {
    ("allgather", "ring"): (0.014549454545454546, 220, 1.1355554666666667),
    ("allreduce", "direct"): (0.026191818181818188, 440, 4.853759892369713),
    ("allreduce", "halving_doubling"): (0.013705194444444445, 96, 0.6635457766975308),
    ("allreduce", "hierarchical"): (0.012050199999999999, 224, 0.9705927999999999),
    ("allreduce", "recursive_doubling"): (0.0739694, 48, 1.2183175166666667),
    ("allreduce", "ring"): (0.010921590909090905, 440, 2.425337654545454),
    ("allreduce", "star"): (0.07201000000000002, 40, 2.0164264000000003),
    ("allreduce", "tree"): (0.037404690066010375, 320, 3.7838806474733313),
    ("alltoall", "direct"): (0.013095909090909092, 220, 1.1528018303915433),
    ("alltoall", "pairwise"): (0.01733974696969697, 220, 1.5693676133838386),
    ("broadcast", "binomial"): (0.032018, 20, 0.408254),
    ("broadcast", "ring"): (0.02348800105820107, 140, 1.732628160846561),
    ("reduce", "binomial"): (0.018011333333333334, 20, 0.18816653333333333),
    ("reduce", "ring"): (0.02290545714285715, 140, 1.6121480000000001),
    ("reduce_scatter", "ring"): (0.014553454545454548, 220, 1.2303075165054684),
    # Added with the MoE all-to-all-v (no rank-process version existed): pinned when written.
    ("alltoall", "hierarchical"): (0.012025600000000001, 64, 0.2512047376623377),
    ("alltoallv", "direct"): (0.013095909090909092, 220, 1.2020903775526233),
    ("alltoallv", "hierarchical"): (0.012025600000000001, 64, 0.2725162181818182),
    ("alltoallv", "pairwise"): (0.01844475061751656, 220, 1.72048047995052),
}


#: Algorithms added after the pins were taken draw their GPUs after the others (the older pins keep theirs).
ADDED = [("alltoall", "hierarchical"), ("alltoallv", "direct"), ("alltoallv", "hierarchical"),
         ("alltoallv", "pairwise")]


def _pinned_call(op, alg):
    i = ([x for x in ALL if x not in ADDED] + ADDED).index((op, alg))
    rng = np.random.default_rng(i)
    if alg == "hierarchical":
        gpus = [int(2 * h + g) for h in rng.permutation(6)[:4] for g in range(2)]
    else:
        gpus = [int(x) for x in rng.permutation(12)[:8 if alg in POW2 else 11]]
    return gpus, ("ecmp", "spray")[i % 2]


def test_every_algorithm_is_pinned():
    assert set(PINNED) == set(ALL)


@pytest.mark.parametrize("op, alg", sorted(PINNED))
def test_schedules_give_what_the_rank_processes_gave(op, alg):
    gpus, routing = _pinned_call(op, alg)
    env, fab = make_fabric(TOPO, seed=3, routing=routing)
    env.run(env.process(run_collective(env, fab, op, alg, gpus, 4e6, channels=2, chunk_bytes=3e5, job=1, comm=1)))
    end, messages, arrivals = PINNED[op, alg]
    assert env.now == pytest.approx(end, rel=1e-9, abs=0)
    assert len(fab.flow_records) == messages
    assert sum(sorted(r[8] for r in fab.flow_records)) == pytest.approx(arrivals, rel=1e-9, abs=0)


def test_tcp_in_the_connection_is_what_use_tcp_did():
    """A communicator that mixes NIC families talks TCP: building its connections with ``tcp`` gives
    what registering it with ``Fabric.use_tcp`` gave."""
    from netsim.config import load_topology
    from netsim.fabrics import build_topology
    topo = build_topology(load_topology(Path(__file__).resolve().parents[1] / "topologies" / "holmes-ib-roce.yaml"))
    gpus = [0, topo.n_gpus // 2 + 1, 3, topo.n_gpus - 2]
    assert topo.mixes_fabrics(gpus)
    runs = []
    for tcp in (False, True):
        env, fab = make_fabric(topo)
        if not tcp:
            fab.use_tcp(0, 4)
        env.run(env.process(run_collective(env, fab, "allreduce", "ring", gpus, 8e6, comm=4, tcp=tcp)))
        runs.append((env.now, sorted(r[1:] for r in fab.flow_records)))
    assert runs[0] == runs[1] and all("/tcp" in r[0] for r in runs[0][1])

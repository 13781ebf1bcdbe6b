"""Double binary tree allreduce against an independent fluid reference, exactly (rel 1e-9).

The reference below re-implements, from scratch and specialised to the tree allreduce, what the
Fabric + tree processes are meant to compute: a DAG of messages (which arrivals each send waits
for), FIFO connections, max-min fair sharing of link capacity, and delivery ``delay`` after the
last byte left. It reads only input data from the topology (paths, link capacities and latencies,
per-message overhead); it never calls the Fabric, ``netsim.solver``, ``Arrivals`` or the tree
processes.
"""

import math
from collections import deque

import pytest

from netsim.collectives import run_collective
from netsim.collectives.tree import double_binary_trees
from tests.conftest import GB, make_fabric, make_leaf_spine

LAT, OVH = 1e-6, 2e-6  # latency of each NIC link (2 per path), per-message overhead
D = 2 * LAT + OVH  # delay of every GPU -> GPU message on the crossbar: NIC->leaf, leaf->NIC, overhead

# The two trees as parent lists, derived by hand. Tree 0 is the in-order tree: rank r sits at
# position r + 1 and the root of every interval of positions is the position with the most
# trailing zero bits (leftmost on ties). Tree 1 relabels tree 0 by r -> n-1-r (even n, mirror) or
# r -> r+1 mod n (odd n, shift). E.g. n = 6: positions 1..6, root 4 (rank 3); [1..3] -> 2 (rank 1)
# with leaves ranks 0, 2; [5, 6] -> 6 (rank 5) with leaf rank 4: [1, 3, 1, None, 5, 3]; mirrored:
# rank 5-r gets parent 5-p: [2, 0, None, 4, 2, 4].
TREES = {
    2: ([1, None], [None, 0]),
    3: ([1, None, 1], [2, 2, None]),
    4: ([1, 3, 1, None], [None, 2, 0, 2]),
    5: ([1, 3, 1, None, 3], [4, 2, 4, 2, None]),
    6: ([1, 3, 1, None, 5, 3], [2, 0, None, 4, 2, 4]),
    8: ([1, 3, 1, 7, 5, 3, 5, None], [None, 2, 4, 2, 0, 6, 4, 6]),
}


# ------------------------------------------------------------------------------------ reference
def max_min_rates(flow_links, capacity):
    """Max-min fair rates by water-filling.

    Parameters
    ----------
    flow_links : dict
        Flow key -> the links it crosses (each at weight 1).
    capacity : sequence of float
        Capacity of every link, by link id.

    Returns
    -------
    dict
        Flow key -> rate. Repeatedly the link with the smallest fair share of its remaining
        capacity among its not-yet-fixed flows is the bottleneck: those flows get that share.
    """
    rates = {}
    residual = {lk: float(capacity[lk]) for links in flow_links.values() for lk in links}
    unfixed = set(flow_links)
    while unfixed:
        users = {}
        for f in unfixed:
            for lk in flow_links[f]:
                users.setdefault(lk, []).append(f)
        link = min(users, key=lambda lk: residual[lk] / len(users[lk]))
        share = residual[link] / len(users[link])
        for f in users[link]:
            rates[f] = share
            unfixed.discard(f)
            for lk in flow_links[f]:
                residual[lk] = max(residual[lk] - share, 0.0)
    return rates


def tree_messages(parents, chunks):
    """The allreduce's messages: key -> (src, dst, channel, prerequisite message keys).

    ``("up", t, c, r)`` carries chunk c of tree t from r to its parent; ``("down", t, c, r)``
    carries it from r's parent to r. A message is posted once all its prerequisites have arrived.
    Each rank handles chunks in order, so chunk c also waits for whatever chunks < c waited for:
    - up from r: chunks <= c from every child of r;
    - down from r: r holds the reduced chunk c, i.e. chunks <= c from every child (r the root)
      or chunks <= c from its parent (any other rank).
    Tree t uses channel t.
    """
    n = len(parents[0])
    msgs = {}
    for t, parent in enumerate(parents):
        kids = [[k for k in range(n) if parent[k] == r] for r in range(n)]
        for c in range(chunks):
            for r in range(n):
                from_kids = [("up", t, e, k) for e in range(c + 1) for k in kids[r]]
                if parent[r] is not None:
                    msgs["up", t, c, r] = (r, parent[r], t, from_kids)
                holds = from_kids if parent[r] is None else [("down", t, e, r) for e in range(c + 1)]
                for k in kids[r]:
                    msgs["down", t, c, k] = (r, k, t, holds)
    return msgs


def reference_allreduce(topo, parents, size, chunk_bytes):
    """Fluid event simulation of the double binary tree allreduce.

    Parameters
    ----------
    topo : Topology
        Source of paths, link capacities/latencies and message overheads (data only).
    parents : tuple of list
        The two trees as parent lists.
    size, chunk_bytes : float
        Buffer size; each tree carries half, cut into ``ceil(half / chunk_bytes)`` equal chunks.

    Returns
    -------
    end : float
        Time of the last arrival.
    records : list of tuple
        ``(src, dst, channel, post time, arrival time)`` per message.
    """
    half = size / 2
    chunks = max(1, math.ceil(half / chunk_bytes))
    chunk = half / chunks
    msgs = tree_messages(parents, chunks)
    cap, lat = topo.links.capacity_Bps, topo.links.latency_s
    route = {}  # (src, dst) -> (links, delay = path latency + per-message overhead)
    for src, dst, _ch, _pre in msgs.values():
        # One path on the crossbar: src's NIC -> leaf and leaf -> dst's NIC (single-GPU hosts have no
        # GPU <-> NIC link on it), so a flow contends on src's uplink and dst's downlink only.
        (path,) = topo.paths(src, dst)
        delay = sum(float(lat[lk]) for lk in path) + topo.message_overhead_s(src, dst)
        route[src, dst] = (tuple(path), delay)

    now = 0.0
    unposted = set(msgs)
    arrived = {}  # key -> arrival time
    posted = {}  # key -> post time
    queues = {}  # connection (src, dst, channel) -> posted keys not yet transmitting, FIFO
    active = {}  # key -> bytes left to transmit (at most one per connection)
    in_flight = {}  # key -> arrival time (transmitted, not yet delivered)
    records = []

    def post_and_start():
        # Post every message whose prerequisites have all arrived; sorted keys put one
        # connection's chunks in order. Then every idle connection starts its oldest message.
        for key in sorted(k for k in unposted if all(p in arrived for p in msgs[k][3])):
            unposted.discard(key)
            posted[key] = now
            queues.setdefault(msgs[key][:3], deque()).append(key)
        busy = {msgs[k][:3] for k in active}
        for conn, queue in queues.items():
            if queue and conn not in busy:
                active[queue.popleft()] = chunk

    post_and_start()
    while active or in_flight:
        rates = max_min_rates({k: route[msgs[k][:2]][0] for k in active}, cap)
        finish = {k: now + left / rates[k] for k, left in active.items()}
        t_next = min([*finish.values(), *in_flight.values()])
        for k in active:
            active[k] -= rates[k] * (t_next - now)
        now = t_next
        for k in [k for k, t in finish.items() if t <= now * (1 + 1e-12)]:  # drained (rounding slack)
            del active[k]
            src, dst, ch, _pre = msgs[k]
            in_flight[k] = now + route[src, dst][1]
            records.append((src, dst, ch, posted[k], in_flight[k]))
        for k in [k for k, t in in_flight.items() if t <= now]:
            arrived[k] = in_flight.pop(k)
        post_and_start()
    assert not unposted and len(arrived) == len(msgs)
    return max(arrived.values()), records


# ------------------------------------------------------------------------------------ harness
def _crossbar(n):
    """n single-GPU hosts on one leaf switch (as in tests/test_schedules.py)."""
    return make_leaf_spine(leaves=1, spines=1, hosts_per_leaf=n, nic_latency_s=LAT, nic_overhead_s=OVH)


def _simulate(n, size, chunk_bytes, **fabric_kw):
    topo = _crossbar(n)
    env, fab = make_fabric(topo, **fabric_kw)
    env.run(env.process(run_collective(env, fab, "allreduce", "tree", list(range(n)), size,
                                                            chunk_bytes=chunk_bytes)))
    return env.now, fab, topo


def _by_connection(records):
    """(src, dst, channel) -> [(post, arrival), ...] in arrival order (FIFO per connection)."""
    out = {}
    for src, dst, ch, start, end in records:
        out.setdefault((src, dst, ch), []).append((start, end))
    return {conn: sorted(v, key=lambda se: se[1]) for conn, v in out.items()}


@pytest.mark.parametrize("n", sorted(TREES))
def test_hand_derived_trees_match_construction(n):
    assert double_binary_trees(n) == TREES[n]


# Chunk sizes: 1 MB (chunk time 1 ms >> D: bandwidth-bound) and 4 kB (4 us, comparable to D = 4 us).
# size = 2 * 0.9 k * chunk makes ceil(half / chunk) = k with chunks of 0.9 k / k of chunk_bytes.
# small_component=0 sends every multi-flow component to the numpy solver instead of the list one.
CASES = [(n, k, cb, sc) for n in sorted(TREES) for k in (1, 2, 3, 4) for cb in (1e6, 4e3) for sc in (24, 0)]


@pytest.mark.parametrize("n, k, chunk_bytes, small_component", CASES,
                         ids=[f"n{n}-{k}chunks-{cb:g}B-small{sc}" for n, k, cb, sc in CASES])
def test_tree_allreduce_matches_reference_exactly(n, k, chunk_bytes, small_component):
    size = 2 * 0.9 * k * chunk_bytes
    assert max(1, math.ceil(size / 2 / chunk_bytes)) == k
    t_sim, fab, topo = _simulate(n, size, chunk_bytes, small_component=small_component)
    t_ref, ref_records = reference_allreduce(topo, TREES[n], size, chunk_bytes)
    assert t_sim == pytest.approx(t_ref, rel=1e-9, abs=0)
    # every message: same connection, same post time, same arrival time
    assert all(rec[6] == pytest.approx(size / 2 / k, rel=1e-12) for rec in fab.flow_records)
    sim = _by_connection([(r[2], r[3], r[4], r[7], r[8]) for r in fab.flow_records])
    ref = _by_connection(ref_records)
    assert sim.keys() == ref.keys()
    for conn in ref:
        assert len(sim[conn]) == len(ref[conn]) == k
        for (s_sim, e_sim), (s_ref, e_ref) in zip(sim[conn], ref[conn]):
            assert s_sim == pytest.approx(s_ref, rel=1e-9, abs=1e-15), conn
            assert e_sim == pytest.approx(e_ref, rel=1e-9, abs=0), conn


def _closed_form(n, k, size):
    """Hand-derived completion times (B = 1 GB/s everywhere, every message delayed by D).

    n = 2, one chunk (m = size/2): tree 0 is 0 -> 1 (root 1), tree 1 is 1 -> 0 (root 0). The two
    up messages use disjoint links (0's uplink + 1's downlink, and the reverse): each at B, they
    arrive at m/B + D; the roots send back, again alone: T = 2 (m/B + D) = size/B + 2D.

    n = 2, two chunks (m = size/4, tau = m/B, D < tau): direction 0 -> 1 carries tree 0's up
    chunks and tree 1's down chunks. Up c0 alone on [0, tau], up c1 from tau; down c0 is posted
    at tau + D (tree 1's up c0 arrives at root 0) and shares B/2 with up c1, which drains at
    tau + D + 2(tau - D) = 3 tau - D; down c0 then has B D left, alone: drains at 3 tau, exactly
    when tree 1's up c1 (symmetric: 3 tau - D) arrives and down c1 is posted: alone until 4 tau.
    The direction never idles: T = 4 tau + D = size/B + D.

    n = 3, one chunk (m = size/2): tree 0 = {0, 2} -> 1, tree 1 = {0, 1} -> 2. Up: 0 -> 1, 2 -> 1,
    0 -> 2, 1 -> 2; 0's uplink and the downlinks of 1 and 2 carry two each, and every flow crosses
    one of them: all at B/2, arriving at 2m/B + D. Down: 1 -> 0, 1 -> 2, 2 -> 0, 2 -> 1; uplinks of
    1 and 2 and 0's downlink carry two each: B/2 again. T = 2 (2m/B + D) = 2 size/B + 2D.
    """
    return {(2, 1): size / GB + 2 * D, (2, 2): size / GB + D, (3, 1): 2 * size / GB + 2 * D}[n, k]


@pytest.mark.parametrize("n, k", [(2, 1), (2, 2), (3, 1)])
def test_closed_forms(n, k):
    chunk_bytes = 1e6
    size = 2 * k * chunk_bytes
    expected = _closed_form(n, k, size)
    t_sim, _, topo = _simulate(n, size, chunk_bytes)
    t_ref, _ = reference_allreduce(topo, TREES[n], size, chunk_bytes)
    assert t_sim == pytest.approx(expected, rel=1e-12)
    assert t_ref == pytest.approx(expected, rel=1e-12)


def test_reference_max_min_water_filling():
    # link 0 (cap 1) shared by a, b, c; link 1 (cap 10) by c, d: a = b = c = 1/3, d gets the rest.
    rates = max_min_rates({"a": (0,), "b": (0,), "c": (0, 1), "d": (1,)}, [1.0, 10.0])
    assert rates == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3, "d": 10 - 1 / 3})

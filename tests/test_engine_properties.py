"""Engine invariants over random message sets (hypothesis)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.routing import Connection
from tests.conftest import GB, make_fabric, make_leaf_spine

TOPO = make_leaf_spine(leaves=2, spines=2, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=1,
                       nic_latency_s=1e-6, uplink_latency_s=5e-7, nic_bandwidth_overrides={(3, 0): 0.5 * GB})

messages = st.lists(st.tuples(st.integers(0, TOPO.n_gpus - 1), st.integers(0, TOPO.n_gpus - 1),
                              st.floats(0, 1e8), st.floats(0, 0.2), st.integers(0, 2)), min_size=1, max_size=25)


@settings(max_examples=120, deadline=None)
@given(messages, st.integers(0, 3))
def test_random_messages_complete_conserve_bytes_and_respect_capacity(msgs, seed):
    env, fab = make_fabric(TOPO, seed=seed)
    done = {}

    def sender(i, src, dst, size, start, channel):
        yield env.timeout(start)
        issued = env.now
        yield fab.send(src, dst, size, Connection(src, dst, channel))
        done[i] = (issued, env.now)

    for i, m in enumerate(msgs):
        env.process(sender(i, *m))
    env.run()
    fab.finalize()
    assert len(done) == len(msgs), "every send must complete"
    assert fab.active_flows == 0
    links = TOPO.links
    expected = np.zeros(len(links))
    for i, (src, dst, size, _start, _ch) in enumerate(msgs):
        issued, end = done[i]
        if src == dst:
            assert end == issued
            continue
        (path,) = {p for p in TOPO.paths(src, dst)} & {r[0] for r in fab.routing.paths(Connection(src, dst, _ch))}
        bound = size / links.capacity_Bps[list(path)].min() + TOPO.path_latency_s(path)
        assert end - issued >= bound - 1e-9 * len(msgs)
        expected[list(path)] += size
    np.testing.assert_allclose(fab.link_bytes, expected, rtol=1e-9, atol=1e-6)
    assert fab.link_peak_util.max() <= 1 + 1e-9
    assert np.all(fab.link_busy_s <= env.now + 1e-12)

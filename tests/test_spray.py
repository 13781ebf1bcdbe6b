"""Spraying vs ECMP on the classic hot spot: n equal flows from one leaf to another over s uplinks."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.errors import ConfigError
from netsim.routing import Connection, make_routing
from netsim.topology import LINK_KINDS
from tests.conftest import GB, make_fabric, make_leaf_spine


def _hot_spot(n, s):
    """n single-GPU hosts per leaf, two leaves, s spines: flow i goes from host i to host n + i."""
    topo = make_leaf_spine(leaves=2, spines=s, hosts_per_leaf=n)
    return topo, [Connection(i, n + i) for i in range(n)]


def _uplink_loads(topo, routing, conns):
    """Fraction of a flow each leaf0 -> spine uplink carries, summed over the flows."""
    up = LINK_KINDS.index("up")
    load: dict[int, float] = {}
    for c in conns:
        for path, frac in routing.paths(c):
            for lk in path:
                if topo.links.kind[lk] == up and topo.node_name(int(topo.links.src[lk])) == "leaf0":
                    load[lk] = load.get(lk, 0.0) + frac
    return load


def expected_max_load(balls: int, bins: int) -> float:
    """E[max bin load] of ``balls`` uniform balls in ``bins`` bins, exactly (exponential generating functions).

    P(max <= k) = balls! [x^balls] (sum_{j<=k} x^j/j!)^bins / bins^balls.
    """
    def p_at_most(k):
        poly = [Fraction(1)]
        term = [Fraction(1, math.factorial(j)) for j in range(k + 1)]
        for _ in range(bins):
            out = [Fraction(0)] * min(len(poly) + k, balls + 1)
            for i, a in enumerate(poly):
                for j, b in enumerate(term):
                    if i + j <= balls:
                        out[i + j] += a * b
            poly = out
        coef = poly[balls] if balls < len(poly) else Fraction(0)
        return coef * math.factorial(balls) / Fraction(bins) ** balls
    return float(sum(1 - p_at_most(k) for k in range(balls)))


def test_expected_max_load_reference():
    assert expected_max_load(2, 2) == pytest.approx(1.5)  # both in one bin with probability 1/2
    assert expected_max_load(16, 16) == pytest.approx(3.08, abs=0.01)  # ~3.1, as the spraying paper says


def test_ecmp_hot_spot_is_about_3x_ideal_and_spray_is_1():
    n = s = 16
    topo, conns = _hot_spot(n, s)
    worst = [max(_uplink_loads(topo, make_routing("ecmp", topo, np.random.default_rng(seed)), conns).values())
             for seed in range(400)]
    # Monte-Carlo over 400 seeds: standard error ~0.037; 4 standard errors of tolerance
    assert np.mean(worst) == pytest.approx(expected_max_load(n, s), abs=0.15)
    spray = _uplink_loads(topo, make_routing("spray", topo, np.random.default_rng(0)), conns)
    assert len(spray) == s and all(v == pytest.approx(n / s) for v in spray.values())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ecmp_hot_spot_completion_time_is_the_max_load(seed):
    n = s = 16
    topo, conns = _hot_spot(n, s)
    env, fab = make_fabric(topo, seed=seed)
    done = [fab.send(c.src, c.dst, GB, c) for c in conns]
    env.run(env.all_of(done))
    worst = max(_uplink_loads(topo, fab.routing, conns).values())
    assert env.now == pytest.approx(worst, rel=1e-9)  # m flows of 1 GB share one 1 GB/s uplink: m seconds
    env, fab = make_fabric(topo, routing="spray")
    env.run(env.all_of([fab.send(c.src, c.dst, GB, c) for c in conns]))
    assert env.now == pytest.approx(1.0, rel=1e-9)  # spraying: every flow at its NIC rate


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 24), s=st.integers(1, 12), size=st.floats(1e3, 1e9))
def test_spray_loads_every_uplink_with_n_f_over_s(n, s, size):
    topo, conns = _hot_spot(n, s)
    env, fab = make_fabric(topo, routing="spray")
    env.run(env.all_of([fab.send(c.src, c.dst, size, c) for c in conns]))
    up = (topo.links.kind == LINK_KINDS.index("up")) & np.array(
        [topo.node_name(int(u)) == "leaf0" for u in topo.links.src])
    assert fab.link_bytes[up] == pytest.approx(np.full(s, n * size / s), rel=1e-9)
    # fluid spraying never leaves a flow slower than its fair share of the uplinks or its NIC
    assert env.now == pytest.approx(size / min(GB, s * GB / n), rel=1e-9)


# --------------------------------------------------------------------------- adaptive spraying under faults
@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.75])
def test_adaptive_spraying_moves_the_shares_off_a_degraded_cable(fraction):
    """Two hosts on two leaves, two spines, NIC = cable = B; leaf0-spine0 (both ways) runs at ``fraction``
    of B from t = 0. A 2-rank ring allreduce moves S bytes each way. Oblivious spraying keeps half of
    every flow on the slow cable: rate min(B, 2 f B) throughout. Adaptive spraying does the same until
    the hosts see the fault (r = 20 us), then shares follow the paths' capacities and the NIC's B is
    reached: time r + (S - r min(B, 2fB)) / B."""
    from tests.test_faults import experiment
    size, rate, react = 16 * 2**20, 100e9 / 8, 20e-6
    fault = [{"at": 0, "link": "leaf0-spine0", "action": "degrade", "fraction": fraction}]
    slow = min(rate, 2 * fraction * rate)
    oblivious = experiment("spray", fault, hosts_per_leaf=1, size="16MiB").collectives[0].duration_s
    adaptive = experiment({"type": "spray", "adaptive": True, "reconvergence": "20us"}, fault, hosts_per_leaf=1,
                          size="16MiB").collectives[0].duration_s
    assert oblivious == pytest.approx(size / slow, rel=1e-9)
    assert adaptive == pytest.approx(react + (size - react * slow) / rate, rel=1e-9)


def test_adaptive_spraying_is_spraying_on_a_healthy_fabric():
    """Without a fault the adaptive shares are the equal ones: the same time to the bit."""
    from tests.test_faults import experiment
    plain = experiment("spray", hosts_per_leaf=2, size="8MiB").collectives[0].duration_s
    adaptive = experiment({"type": "spray", "adaptive": True}, hosts_per_leaf=2, size="8MiB").collectives[0].duration_s
    assert adaptive == plain


def test_adaptive_must_be_a_boolean():
    from tests.test_faults import experiment
    with pytest.raises(ConfigError, match="adaptive must be true or false") as err:
        experiment({"type": "spray", "adaptive": "yes"})
    assert err.value.path == "routing.adaptive"


def _failure_time(routing, faults) -> float:
    """The 64 MB ring of experiments/failures-spray-vs-split.yaml on a 4 x 4 leaf-spine (4 NICs per leaf)."""
    from netsim.config import ExperimentSpec
    from netsim.experiment import run_experiment
    data = {"name": "f", "seed": 1, "routing": routing, "faults": faults,
            "topology": {"type": "leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 2, "gpus_per_host": 2,
                         "nics_per_host": 2, "nic": {"bandwidth": "400Gbps", "latency": "1us"},
                         "uplink": {"bandwidth": "400Gbps", "latency": "500ns"}, "intra_host": {"bandwidth": "900GB/s"}},
            "placement": {"type": "random", "by": "host"},
            "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "64MB", "channels": 2}}
    return run_experiment(ExperimentSpec.model_validate(data)).collectives[0].duration_s


def test_splitting_ties_spraying_when_healthy_and_adaptive_spraying_wins_once_a_cable_degrades():
    """docs/failures.md in small: healthy, Ethereal = oblivious spray = adaptive spray = C4P; one cable at
    25%, Ethereal and oblivious spraying keep their equal share on it (the same time), C4P re-plans but
    stays on single paths, and adaptive spraying beats them all; one cable down, Ethereal recovers after
    its 1 ms timeout and adaptive spraying after 20 us."""
    adaptive = {"type": "spray", "adaptive": True, "reconvergence": "20us"}
    policies = {"ethereal": "ethereal", "spray": "spray", "adaptive": adaptive, "c4p": "c4p"}
    healthy = {k: _failure_time(p, []) for k, p in policies.items()}
    assert max(healthy.values()) == pytest.approx(min(healthy.values()), rel=1e-9)
    slow = {k: _failure_time(p, [{"at": 0, "link": "leaf0-spine0", "action": "degrade", "fraction": 0.25}])
            for k, p in policies.items()}
    assert slow["ethereal"] == pytest.approx(slow["spray"], rel=1e-9)
    assert slow["adaptive"] < 0.6 * min(slow["ethereal"], slow["c4p"])
    down = {k: _failure_time(p, [{"at": 0, "link": "leaf0-spine0", "action": "down"}]) for k, p in policies.items()}
    assert down["adaptive"] < down["ethereal"] < down["spray"]

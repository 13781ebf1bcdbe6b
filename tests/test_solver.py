"""Max-min solver invariants (hypothesis, over every registered solver) and closed-form cases."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.solver import SOLVERS

solvers = pytest.mark.parametrize("solve", list(SOLVERS.values()), ids=list(SOLVERS))


@st.composite
def flow_sets(draw):
    """Random incidence: flows over random link subsets with fractional weights, optional caps."""
    n_links = draw(st.integers(1, 8))
    n_flows = draw(st.integers(1, 10))
    capacity = np.array(draw(st.lists(st.floats(1.0, 100.0), min_size=n_links, max_size=n_links)))
    ef, el, ew = [], [], []
    for f in range(n_flows):
        links = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links, unique=True))
        for link in links:
            ef.append(f)
            el.append(link)
            ew.append(draw(st.sampled_from([1.0, 0.5, 0.25, 1 / 3, 0.75])))
    caps = np.array(draw(st.lists(st.one_of(st.just(np.inf), st.floats(0.5, 50.0)),
                                  min_size=n_flows, max_size=n_flows)))
    return np.array(ef), np.array(el), np.array(ew), capacity, n_flows, caps


def _loads(ef, el, ew, rates, n_links):
    return np.bincount(el, weights=ew * rates[ef], minlength=n_links)


@solvers
@settings(max_examples=300, deadline=None)
@given(flow_sets())
def test_feasible_and_max_min_certificate(solve, fs):
    ef, el, ew, capacity, n, caps = fs
    rates = solve(ef, el, ew, capacity, n, caps)
    load = _loads(ef, el, ew, rates, len(capacity))
    assert np.all(rates >= 0)
    assert np.all(rates <= caps * (1 + 1e-9))
    assert np.all(load <= capacity * (1 + 1e-9)), "a link is over capacity"
    saturated = load >= capacity * (1 - 1e-7)
    for f in range(n):
        if rates[f] >= caps[f] * (1 - 1e-9):
            continue
        # Certificate: f crosses a saturated link on which no flow has a higher rate.
        mine = el[ef == f]
        ok = any(saturated[link] and rates[ef[el == link]].max() <= rates[f] * (1 + 1e-7) for link in mine)
        assert ok, f"flow {f} at {rates[f]} is neither capped nor bottlenecked"


@solvers
@settings(max_examples=150, deadline=None)
@given(flow_sets(), st.randoms(use_true_random=False))
def test_permutation_invariance(solve, fs, rnd):
    ef, el, ew, capacity, n, caps = fs
    rates = solve(ef, el, ew, capacity, n, caps)
    fperm = list(range(n))
    rnd.shuffle(fperm)
    lperm = list(range(len(capacity)))
    rnd.shuffle(lperm)
    fmap, lmap = np.array(fperm), np.array(lperm)
    # Flow f is renamed fmap[f]; link l is renamed lmap[l].
    cap2 = np.empty_like(capacity)
    cap2[lmap] = capacity
    caps2 = np.empty_like(caps)
    caps2[fmap] = caps
    order = np.random.default_rng(0).permutation(len(ef))
    rates2 = solve(fmap[ef][order], lmap[el][order], ew[order], cap2, n, caps2)
    np.testing.assert_allclose(rates2[fmap], rates, rtol=1e-9)


@solvers
@settings(max_examples=150, deadline=None)
@given(flow_sets(), st.floats(0.01, 1000.0))
def test_scaling_capacities_and_caps_scales_rates(solve, fs, k):
    ef, el, ew, capacity, n, caps = fs
    rates = solve(ef, el, ew, capacity, n, caps)
    np.testing.assert_allclose(solve(ef, el, ew, capacity * k, n, caps * k), rates * k, rtol=1e-7)


@solvers
def test_inputs_not_mutated(solve):
    ef, el, ew = np.array([0, 1, 1]), np.array([0, 0, 1]), np.ones(3)
    cap, caps = np.array([10.0, 2.0]), np.array([np.inf, np.inf])
    copies = [a.copy() for a in (ef, el, ew, cap, caps)]
    solve(ef, el, ew, cap, 2, caps)
    for a, b in zip((ef, el, ew, cap, caps), copies):
        np.testing.assert_array_equal(a, b)


@solvers
def test_textbook_example(solve):
    # Links A (cap 10) and B (cap 4). f0: A; f1: A+B; f2: B. B splits 2/2, then f0 takes the rest of A.
    rates = solve(np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1]), np.ones(4), np.array([10.0, 4.0]), 3)
    np.testing.assert_allclose(rates, [8.0, 2.0, 2.0])


@solvers
def test_split_flow_counts_each_fraction(solve):
    # One flow split half/half over two links of 10; a second flow alone on link 0.
    # Max-min: both grow to r with 0.5r + r = 10 on link 0 -> r = 20/3; link 1 has spare room.
    rates = solve(np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([0.5, 0.5, 1.0]), np.array([10.0, 10.0]), 2)
    np.testing.assert_allclose(rates, [20 / 3, 20 / 3])


@solvers
def test_caps_release_capacity_to_others(solve):
    rates = solve(np.array([0, 1]), np.array([0, 0]), np.ones(2), np.array([10.0]), 2, np.array([1.0, np.inf]))
    np.testing.assert_allclose(rates, [1.0, 9.0])


@solvers
def test_flow_without_links_needs_cap(solve):
    with pytest.raises(ValueError):
        solve(np.array([0]), np.array([0]), np.ones(1), np.array([1.0]), 2)


@pytest.mark.parametrize("name", ["progressive_filling_py", "bottleneck_filling"])
@settings(max_examples=300, deadline=None)
@given(fs=flow_sets())
def test_solvers_agree_with_numpy_progressive_filling(name, fs):
    ef, el, ew, capacity, n, caps = fs
    np.testing.assert_allclose(SOLVERS[name](ef, el, ew, capacity, n, caps),
                               SOLVERS["progressive_filling"](ef, el, ew, capacity, n, caps), rtol=1e-9)


@settings(max_examples=100, deadline=None)
@given(flow_sets())
def test_bottleneck_kernel_uncompiled_matches_compiled(fs):
    """The Python body of the kernel (what runs without numba, and for small runs) gives the compiled result."""
    from netsim.solver import jit
    jit.compile_kernels()  # (the test session may not have loaded numba yet)
    from netsim.solver.bottleneck import _bottleneck

    ef, el, ew, capacity, n, caps = fs
    py = getattr(_bottleneck, "py_func", _bottleneck)
    args = (ef.astype(np.int64), el.astype(np.int64), ew.astype(float), capacity.astype(float), n, caps, 1e-9)
    np.testing.assert_allclose(py(*args), _bottleneck(*args), rtol=1e-12)


# The last case spreads flows as adaptive dragonfly routing does: most links carry one flow.
@pytest.mark.parametrize("n_flows, n_links, per", [(200, 40, 4), (3000, 300, 6), (60, 900, 19)])
def test_bottleneck_agrees_on_large_random_incidences(n_flows, n_links, per):
    rng = np.random.default_rng(n_flows)
    ef = np.repeat(np.arange(n_flows), per)
    el = np.concatenate([rng.choice(n_links, per, replace=False) for _ in range(n_flows)])
    ew = rng.choice([1.0, 0.5, 0.25], size=len(ef))
    capacity = rng.choice([1.0, 2.0, 50.0], size=n_links)  # repeated values: many exact ties
    caps = np.where(rng.random(n_flows) < 0.2, rng.uniform(0.001, 0.1, n_flows), np.inf)
    np.testing.assert_allclose(SOLVERS["bottleneck_filling"](ef, el, ew, capacity, n_flows, caps),
                               SOLVERS["progressive_filling"](ef, el, ew, capacity, n_flows, caps), rtol=1e-9)


def test_private_link_caps_its_flow_and_frees_the_shared_one():
    """A link only flow 0 crosses (capacity 2 at weight 0.5: rate 4, below the equal share 5) caps
    it; flow 1 takes the rest of the shared link (10 - 4); flow 2's private link (capacity 0)
    stops it."""
    rates = SOLVERS["bottleneck_filling"](np.array([0, 0, 1, 2, 2]), np.array([0, 1, 1, 1, 2]),
                                          np.array([0.5, 1.0, 1.0, 1.0, 1.0]), np.array([2.0, 10.0, 0.0]), 3)
    assert rates.tolist() == [4.0, 6.0, 0.0]


def test_zero_capacity_link_stops_its_flows():
    rates = SOLVERS["bottleneck_filling"](np.array([0, 1, 1]), np.array([0, 0, 1]), np.ones(3),
                                          np.array([0.0, 5.0]), 2)
    assert rates.tolist() == [0.0, 0.0]


@settings(max_examples=300, deadline=None)
@given(caps=st.lists(st.sampled_from([np.inf, 0.0, 0.5, 1.0, 2.0, 3.0, np.nan]), max_size=60))
def test_cap_order_is_numpys_stable_argsort(caps):
    """The solver sorts only the finite caps and appends the infinite ones: the same order as a
    stable argsort of them all (ties in index order, inf before NaN)."""
    from netsim.solver.bottleneck import _order_by_cap

    a = np.array(caps, dtype=float)
    assert _order_by_cap(a).tolist() == np.argsort(a, kind="mergesort").tolist()

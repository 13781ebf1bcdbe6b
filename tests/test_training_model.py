"""The compute side of a training iteration: parameter and FLOP counts, layer partitions, the 1F1B bubble."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.errors import ConfigError
from netsim.workload.training import GPU_PROFILES, GPTModel, Parallelism, one_f_one_b, partition_layers

GPT3_175B = GPTModel(layers=96, hidden=12288, heads=96, seq_len=2048, vocab=51200, micro_batch=1, global_batch=1536)


def test_gpt3_175b_has_175_billion_parameters():
    """12 L h^2 (+13 L h) + (V + s) h: 174.6e9 for GPT-3 175B's shape (Brown et al. report 175.0e9)."""
    assert GPT3_175B.params == 96 * (12 * 12288**2 + 13 * 12288) + (51200 + 2048) * 12288
    assert GPT3_175B.params == pytest.approx(175e9, rel=0.01)


def test_iteration_flops_match_megatrons_formula():
    """Narayanan et al. eq. (3) without recomputation: 72 B s L h^2 (1 + s/(6h) + V/(12 L h))."""
    m = GPT3_175B
    B, s, L, h, V = m.global_batch, m.seq_len, m.layers, m.hidden, m.vocab
    expected = 72.0 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))
    assert m.iteration_flops() == pytest.approx(expected, rel=1e-12)


def test_compute_time_is_flops_over_achieved_rate():
    gpu = GPU_PROFILES["a100"]
    assert gpu.seconds(312e12 * 0.5) == pytest.approx(1.0)


def test_micro_batches_and_bad_batch_sizes():
    m = GPTModel(layers=4, hidden=64, heads=4, seq_len=16, vocab=100, micro_batch=2, global_batch=64)
    assert Parallelism(tp=2, pp=2, dp=4).micro_batches(m) == 8
    with pytest.raises(ConfigError, match="multiple of micro_batch x dp"):
        Parallelism(dp=3).micro_batches(m)
    with pytest.raises(ConfigError, match="multiple of heads"):
        GPTModel(layers=4, hidden=65, heads=4, seq_len=16, vocab=100)
    with pytest.raises(ConfigError, match="positive integer"):
        GPTModel(layers=0, hidden=64, heads=4, seq_len=16, vocab=100)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200), st.lists(st.floats(0.1, 10.0), min_size=1, max_size=16))
def test_partition_is_proportional_and_complete(layers, speeds):
    """Every layer placed, every stage non-empty, each count within one of its proportional share."""
    if layers < len(speeds):
        with pytest.raises(ConfigError):
            partition_layers(layers, speeds)
        return
    counts = partition_layers(layers, speeds)
    assert sum(counts) == layers and min(counts) >= 1
    share = [layers * v / sum(speeds) for v in speeds]
    if min(share) >= 1:  # no stage needed a layer it was not due: plain largest-remainder rounding
        assert all(abs(c - x) < 1 for c, x in zip(counts, share)), (counts, share)


def test_faster_stage_gets_more_layers():
    assert partition_layers(30, [197.0, 160.0]) == [17, 13]
    assert partition_layers(30, [1.0, 1.0]) == [15, 15]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.integers(1, 32), st.floats(0.1, 5.0), st.floats(0.1, 5.0))
def test_uniform_1f1b_has_the_textbook_bubble(p, m, f, b):
    """Equal stages, free sends: (m + p - 1)(f + b), so the idle share is (p - 1)/(m + p - 1)."""
    total, timeline = one_f_one_b([f] * p, [b] * p, m)
    assert total == pytest.approx((m + p - 1) * (f + b), rel=1e-12)
    busy = m * (f + b)
    assert 1 - busy / total == pytest.approx((p - 1) / (m + p - 1), rel=1e-9, abs=1e-12)
    for stage in timeline:  # each stage runs m forwards and m backwards, never overlapping
        assert sorted(j for op, j, *_ in stage if op == "F") == list(range(m))
        assert sorted(j for op, j, *_ in stage if op == "B") == list(range(m))
        assert all(a[3] <= b_[2] + 1e-12 for a, b_ in zip(stage, stage[1:]))


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 6), st.integers(1, 16), st.lists(st.floats(0.1, 5.0), min_size=12, max_size=12),
       st.floats(0, 1.0))
def test_1f1b_respects_dependencies(p, m, costs, send):
    """A forward never starts before the previous stage's forward of that micro-batch + send; a backward
    never before the next stage's backward + send; the one-stage-at-a-time slowest bound holds."""
    fwd, bwd = costs[:p], costs[6:6 + p]
    total, timeline = one_f_one_b(fwd, bwd, m, send)
    when = {(op, i, j): (s, e) for i, stage in enumerate(timeline) for op, j, s, e in stage}
    for (op, i, j), (start, _end) in when.items():
        if op == "F" and i > 0:
            assert start >= when[("F", i - 1, j)][1] + send - 1e-12
        if op == "B" and i < p - 1:
            assert start >= when[("B", i + 1, j)][1] + send - 1e-12
        if op == "B":
            assert start >= when[("F", i, j)][1] - 1e-12
    assert total >= max(m * (f + b) for f, b in zip(fwd, bwd)) - 1e-9
    assert total >= sum(fwd) + sum(bwd) + 2 * (p - 1) * send - 1e-9  # one micro-batch end to end


def test_single_stage_is_sum_of_compute():
    total, _ = one_f_one_b([0.3], [0.7], 5)
    assert total == pytest.approx(5.0)
    assert math.isclose(one_f_one_b([1.0, 3.0], [2.0, 6.0], 1)[0], 12.0)

"""Ring reduce-scatter / allgather and pipelined-chain broadcast / reduce against their closed forms."""

import pytest

from netsim.collectives import run_collective
from tests.conftest import GB
from tests.test_ring import MiB, _non_blocking

LAT, OVH = 1e-6, 2e-6
ALPHA = 2 * LAT + OVH  # two NIC cables + per-message overhead, same for every pair (non-blocking fabric)


def _run(op, n, size, **kw):
    from tests.conftest import make_fabric
    topo = _non_blocking(n, nic_latency_s=LAT, nic_overhead_s=OVH)
    env, fab = make_fabric(topo)
    env.run(env.process(run_collective(env, fab, op, "ring", list(range(n)), size, **kw)))
    return env.now, fab


@pytest.mark.parametrize("algorithm", ["reduce_scatter", "allgather"])
@pytest.mark.parametrize("n", [2, 3, 4, 8, 16, 64])
@pytest.mark.parametrize("size", [4 * 1024, 1 * MiB, 256 * MiB])
def test_ring_reduce_scatter_and_allgather_closed_form(algorithm, n, size):
    t, fab = _run(algorithm, n, size)
    assert t == pytest.approx((n - 1) * (ALPHA + size / (n * GB)), rel=1e-3)
    assert fab.stats["flows"] == n * (n - 1)


@pytest.mark.parametrize("algorithm", ["broadcast", "reduce"])
@pytest.mark.parametrize("n", [2, 3, 8, 16])
@pytest.mark.parametrize("chunks", [1, 4, 32])
def test_pipelined_chain_closed_form(algorithm, n, chunks):
    size = 64 * MiB
    t, fab = _run(algorithm, n, size, chunk_bytes=size / chunks)
    assert t == pytest.approx((chunks + n - 2) * size / (chunks * GB) + (n - 1) * ALPHA, rel=1e-6)
    assert fab.stats["flows"] == (n - 1) * chunks


def test_more_chunks_move_chain_broadcast_toward_M_over_B():
    n, size = 16, 256 * MiB
    times = [_run("broadcast", n, size, chunk_bytes=size / c)[0] for c in (1, 4, 16, 64, 256)]
    assert all(a > b for a, b in zip(times, times[1:]))
    assert times[0] == pytest.approx((n - 1) * (size / GB + ALPHA), rel=1e-6)
    assert times[-1] < 1.07 * size / GB


def test_reduce_flows_toward_rank_zero_and_broadcast_away_from_it():
    _, fab = _run("broadcast", 4, MiB)
    assert {(r[2], r[3]) for r in fab.flow_records} == {(0, 1), (1, 2), (2, 3)}
    _, fab = _run("reduce", 4, MiB)
    assert {(r[2], r[3]) for r in fab.flow_records} == {(3, 2), (2, 1), (1, 0)}


def test_allgather_bytes_per_rank_are_n_minus_1_over_n_of_M():
    n, size = 8, 64 * MiB
    _, fab = _run("allgather", n, size)
    sent = {}
    for rec in fab.flow_records:
        sent[rec[2]] = sent.get(rec[2], 0) + rec[6]
    assert all(v == pytest.approx((n - 1) / n * size) for v in sent.values())


def test_yaml_ops_and_chunk(tmp_path):
    from typer.testing import CliRunner

    import pandas as pd
    from netsim.cli import app
    from tests.test_cli import small_spec, write
    out = tmp_path / "r"
    spec = small_spec(**{"workload.op": "broadcast", "workload.chunk": "512KiB", "workload.protocol": "simple"})
    result = CliRunner().invoke(app, ["run", str(write(tmp_path, spec)), "--out", str(out), "--no-report"])
    assert result.exit_code == 0, result.output
    coll = pd.read_parquet(out / "collectives.parquet").iloc[0]
    assert coll.op == "broadcast" and coll.busbw_Bps == pytest.approx(coll.algbw_Bps) and coll.protocol == "Simple"
    flows = pd.read_parquet(out / "flows.parquet")
    assert flows["size_bytes"].max() == 512 * 1024 and len(flows) == 15 * 8  # 15 hops x 8 chunks of 4 MiB


@pytest.mark.parametrize("op, steps", [("allreduce", lambda n: 2 * (n - 1)), ("reduce_scatter", lambda n: n - 1),
                                       ("allgather", lambda n: n - 1)])
@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("chunks", [1, 2, 4, 16])
@pytest.mark.parametrize("size", [64 * 1024, 64 * MiB])  # latency-bound and bandwidth-bound slices
def test_sliced_ring_pipelines_across_steps(op, steps, n, chunks, size):
    s = steps(n)
    p = size / (n * chunks) / GB  # one slice's transfer time
    t, fab = _run(op, n, size, chunk_bytes=size / (n * chunks))
    # slice c of step k waits for slice c of step k-1 (p + alpha) and for the connection (C slices per step)
    expected = (s - 1) * max(chunks * p, p + ALPHA) + chunks * p + ALPHA
    assert t == pytest.approx(expected, rel=1e-9)
    assert fab.stats["flows"] == n * s * chunks


def test_slicing_hides_the_ring_latency():
    n, size = 8, 4 * MiB
    plain, _ = _run("reduce_scatter", n, size)
    sliced, _ = _run("reduce_scatter", n, size, chunk_bytes=size / n / 16)
    bandwidth = (n - 1) * size / (n * GB)
    assert plain == pytest.approx(bandwidth + (n - 1) * ALPHA, rel=1e-9)
    assert sliced == pytest.approx(bandwidth + ALPHA, rel=1e-9)  # alpha paid once, not n-1 times

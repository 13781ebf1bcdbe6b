"""Mixture-of-experts training: token routing, all-to-all-v algorithms, MoE layers in the pipeline."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.collectives import build_collective, run_collective
from netsim.collectives.alltoallv import alltoallv_steps, pair_bytes
from netsim.collectives.ideal import IdealModel
from netsim.config import parse_spec
from netsim.engine import Environment, Fabric
from netsim.errors import ConfigError
from netsim.experiment import run_experiment
from netsim.routing import make_routing
from netsim.topology import leaf_spine
from netsim.workload.moe import TokenRouter, node_sets, popularity, read_picks

B = 1e9  # bytes/s of every NIC in the closed forms


def flat(n_hosts: int, gpus_per_host: int = 1) -> object:
    """A non-blocking leaf-spine: one leaf, NICs of 1 GB/s, fast intra-host links."""
    return leaf_spine(leaves=1, spines=1, hosts_per_leaf=n_hosts, gpus_per_host=gpus_per_host,
                      nics_per_host=gpus_per_host, nic_bandwidth_Bps=B, uplink_bandwidth_Bps=B,
                      intra_bandwidth_Bps=1e12, nic_latency_s=0.0, uplink_latency_s=0.0, intra_latency_s=0.0)


def run_call(topo, algorithm: str, matrix: np.ndarray) -> float:
    env = Environment()
    fabric = Fabric(env, topo, make_routing("spray", topo, np.random.default_rng(0)))
    gpus = list(range(len(matrix)))
    env.run(env.process(run_collective(env, fabric, "alltoallv", algorithm, gpus, 0.0, matrix=matrix)))
    return env.now


# ---------------------------------------------------------------------------- token routing
def test_uniform_routing_expects_the_closed_form_per_pair():
    router = TokenRouter(tokens=4096, top_k=2, expert_popularity=popularity(16, 0.0, np.random.default_rng(0)),
                         ep=8, rank_node=np.arange(8))
    assert np.allclose(router.expected(), 4096 * 2 / 8)


@settings(max_examples=40, deadline=None)
@given(experts_per_rank=st.integers(1, 4), ep=st.integers(2, 12), top_k=st.integers(1, 8),
       skew=st.floats(0, 3), per_node=st.integers(1, 4), limit=st.integers(1, 4), tokens=st.integers(1, 3000),
       seed=st.integers(0, 2**32 - 1))
def test_every_row_routes_exactly_tokens_times_top_k(experts_per_rank, ep, top_k, skew, per_node, limit, tokens, seed):
    rng = np.random.default_rng(seed)
    p = popularity(experts_per_rank * ep, skew, rng)
    nodes = np.arange(ep) // per_node
    router = TokenRouter(tokens, top_k, p, ep, nodes, limit)
    picks = router.draw(rng)
    assert picks.shape == (ep, ep) and picks.dtype.kind == "i" and (picks >= 0).all()
    assert (picks.sum(axis=1) == tokens * top_k).all()


def test_node_limited_routing_matches_per_token_sampling():
    """The exact node-set law and per-token Gumbel sampling agree on the picks' distribution."""
    import netsim.workload.moe as moe
    p = popularity(64, 1.0, np.random.default_rng(3))
    nodes = np.repeat(np.arange(8), 2)
    exact = TokenRouter(20_000, 8, p, 16, nodes, 3).draw(np.random.default_rng(1)).mean(axis=0)
    saved, moe.MAX_NODE_ORDERINGS = moe.MAX_NODE_ORDERINGS, 0
    try:
        sampled = TokenRouter(20_000, 8, p, 16, nodes, 3).draw(np.random.default_rng(2)).mean(axis=0)
    finally:
        moe.MAX_NODE_ORDERINGS = saved
    assert np.allclose(exact, sampled, rtol=0.03, atol=20)


def test_node_set_probabilities_sum_to_one_and_favour_popular_nodes():
    sets, prob = node_sets(np.array([0.4, 0.3, 0.2, 0.1]), 2)
    assert len(sets) == 6 and prob.sum() == pytest.approx(1.0)
    assert prob[0] == prob.max()  # {0, 1}: the two most popular nodes


def test_a_limit_of_one_node_keeps_each_token_on_one_node():
    """max_nodes 1: a token's k picks all land on one node, so the picks per (source, node) come in
    whole tokens of k = 4."""
    router = TokenRouter(1000, 4, np.full(8, 1 / 8), 4, np.array([0, 0, 1, 1]), 1)
    picks = router.draw(np.random.default_rng(0))
    assert (picks.sum(axis=1) == 4000).all()
    per_node = picks.reshape(4, 2, 2).sum(axis=2)
    assert (per_node % 4 == 0).all()  # whole tokens (4 picks each) per node


def test_zipf_skew_concentrates_picks_on_a_few_ranks():
    rng = np.random.default_rng(0)
    flat_ = TokenRouter(4096, 2, popularity(64, 0.0, rng), 8, np.arange(8)).draw(rng).sum(axis=0)
    hot = TokenRouter(4096, 2, popularity(64, 1.5, rng), 8, np.arange(8)).draw(rng).sum(axis=0)
    assert hot.max() / hot.mean() > 2 * flat_.max() / flat_.mean()


def test_routing_matrix_files_are_read_and_checked(tmp_path):
    good = tmp_path / "picks.csv"
    good.write_text("step,src,dst,tokens\n0,0,1,10\n0,1,0,5\n1,0,1,7\n")
    steps = read_picks(good, 2)
    assert [m.tolist() for m in steps] == [[[0, 10], [5, 0]], [[0, 7], [0, 0]]]
    bad = tmp_path / "bad.csv"
    bad.write_text("step,src,dst,tokens\n0,0,1,10\n0,5,0,5\n")
    with pytest.raises(ConfigError, match=r"bad.csv:3: src is '5'; allowed: an EP rank from 0 to 1"):
        read_picks(bad, 2)
    with pytest.raises(ConfigError, match="missing column"):
        (tmp_path / "cols.csv").write_text("a,b\n1,2\n")
        read_picks(tmp_path / "cols.csv", 2)


PICKS_HEADER = "step,src,dst,tokens\n"
RING = "".join(f"0,{i},{(i + 1) % 4},{10 + i}\n" for i in range(4))  # a valid step of an EP group of 4

BAD_PICKS = [  # (case, file text, line named or None, words the message must hold)
    ("non-number", PICKS_HEADER + RING + "0,1,2,ten\n", 6, "tokens is 'ten'"),
    ("underscore digits", PICKS_HEADER + RING + "0,1,2,1_0\n", 6, "tokens is '1_0'"),
    ("Arabic-Indic digits", PICKS_HEADER + RING + "0,1,2,\u0661\n", 6, "tokens is"),
    ("NaN", PICKS_HEADER + RING + "0,1,2,nan\n", 6, "tokens is 'nan'"),
    ("infinity", PICKS_HEADER + RING + "0,1,2,inf\n", 6, "tokens is 'inf'"),
    ("empty cell", PICKS_HEADER + RING + "0,1,2,\n", 6, "tokens is empty"),
    ("negative tokens", PICKS_HEADER + RING + "0,1,2,-3\n", 6, "tokens is '-3'"),
    ("fractional tokens", PICKS_HEADER + RING + "0,1,2,2.5\n", 6, "a whole number of (token, expert) pairs"),
    ("tokens of 1e30", PICKS_HEADER + RING + "0,1,2,1e30\n", 6, "from 0 to 2**53"),
    ("a rank past ep", PICKS_HEADER + RING + "0,4,2,1\n", 6, "src is '4'; allowed: an EP rank from 0 to 3"),
    ("a fractional step", PICKS_HEADER + RING + "0.5,1,2,1\n", 6, "step is '0.5'"),
    ("too few fields", PICKS_HEADER + RING + "0,1,2\n", 6, "a row of 3 fields; the header has 4 columns"),
    ("too many fields", PICKS_HEADER + RING + "0,1,2,3,4\n", 6, "a row of 5 fields"),
    ("a line after blank lines", PICKS_HEADER + "\n" + RING + "\n\n0,1,2,x\n", 9, "tokens is 'x'"),
    ("CR line ends", (PICKS_HEADER + RING + "0,1,2,x\n").replace("\n", "\r"), 6, "tokens is 'x'"),
    ("duplicate row", PICKS_HEADER + RING + "0,1,2,4\n", 6, "step 0, src 1, dst 2 again (first on line 3)"),
    ("missing column", "step,src,dst\n0,1,2\n", 1, "missing column tokens"),
    ("repeated column", "step,src,dst,tokens,src\n0,1,2,3,1\n", 1, "column 'src' appears 2 times"),
    ("unknown column", "step,src,dst,tokens,layer\n0,1,2,3,0\n", 1, "unknown column 'layer'"),
    ("no header", RING, 1, "no header"),
    ("an all-zero step", PICKS_HEADER + RING + "1,0,1,0\n1,2,3,0\n", 6, "step 1 sends no token between two EP ranks"),
    ("a step on the diagonal only", PICKS_HEADER + RING + "4,0,0,5\n", 6, "step 4 sends no token"),
    ("ranks of a smaller group", PICKS_HEADER + "0,0,1,5\n0,1,0,5\n", None, "EP ranks 2, 3 appear in no row"),
    ("a field past the csv module's limit", PICKS_HEADER + RING + "0,1,2," + "1" * 200_000 + "\n", 6,
     "not a valid CSV row (field larger than field limit"),
    ("empty", "", None, "the file is empty"),
    ("header only", PICKS_HEADER, None, "no rows"),
]


@pytest.mark.parametrize("case", BAD_PICKS, ids=[c[0] for c in BAD_PICKS])
def test_bad_routing_matrix_files_are_config_errors_naming_the_line(tmp_path, case):
    _, text, line, words = case
    path = tmp_path / "picks.csv"
    path.write_text(text, newline="")
    with pytest.raises(ConfigError) as err:
        read_picks(path, 4)
    assert err.value.path == "workload.moe.routing.path"
    assert err.value.message.startswith(f"{path}:{line}: " if line else f"{path}: "), err.value.message
    assert words in err.value.message, err.value.message


def test_odd_but_valid_csv_files_read_as_the_plain_file(tmp_path):
    """Quotes, spaces, a BOM, CRLF, blank lines, 1e1 and 10.0 all read as the plain digits do (the
    quoted file goes through the row-by-row reader, the others through pandas)."""
    plain = tmp_path / "plain.csv"
    plain.write_text(PICKS_HEADER + RING)
    expected = [m.tolist() for m in read_picks(plain, 4)]
    variants = {"quoted": PICKS_HEADER + "".join(",".join(f'"{c}"' for c in r.split(",")) + "\n"
                                                 for r in RING.splitlines()),
                "spaces": PICKS_HEADER + RING.replace(",", " , "),
                "bom": "\ufeff" + PICKS_HEADER + RING,
                "crlf": (PICKS_HEADER + RING).replace("\n", "\r\n"),
                "blank lines": "\n" + PICKS_HEADER + "\n  \n" + RING + "\n\n",
                "exponents": PICKS_HEADER + RING.replace(",10\n", ",1e1\n").replace(",11\n", ",11.0\n"),
                "reordered": "tokens,dst,src,step\n" + "".join(",".join(reversed(r.split(","))) + "\n"
                                                              for r in RING.splitlines())}
    for name, text in variants.items():
        path = tmp_path / f"{name}.csv"
        path.write_text(text, newline="")
        assert [m.tolist() for m in read_picks(path, 4)] == expected, name


def test_parquet_routing_files_read_as_csv_and_name_rows_from_one(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows = [r.split(",") for r in RING.splitlines()]
    columns = {c: [int(r[k]) for r in rows] for k, c in enumerate(("step", "src", "dst", "tokens"))}
    pq.write_table(pa.table(columns), tmp_path / "p.parquet")
    (tmp_path / "p.csv").write_text(PICKS_HEADER + RING)
    assert [m.tolist() for m in read_picks(tmp_path / "p.parquet", 4)] == \
        [m.tolist() for m in read_picks(tmp_path / "p.csv", 4)]
    for change, words in [({"tokens": [10, None, 12, 13]}, ": row 2: tokens is empty (null)"),
                          ({"tokens": [10.0, 11.0, float("nan"), 13.0]}, ": row 3: tokens is nan"),
                          ({"src": ["0", "1", "2", "3"]}, ": column 'src' holds string values"),
                          ({"dst": [1, 2, 3, 9]}, ": row 4: dst is 9; allowed: an EP rank from 0 to 3")]:
        pq.write_table(pa.table({**columns, **change}), tmp_path / "bad.parquet")
        with pytest.raises(ConfigError) as err:
            read_picks(tmp_path / "bad.parquet", 4)
        assert err.value.message.startswith(f"{tmp_path / 'bad.parquet'}{words}"), err.value.message


def test_devices_and_parquet_named_csv_are_refused_without_reading(tmp_path):
    (tmp_path / "zero.csv").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="not a regular file"):
        read_picks(tmp_path / "zero.csv", 4)
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"step": [0]}), tmp_path / "p.csv")
    with pytest.raises(ConfigError, match="a Parquet file, not CSV text: name it .parquet"):
        read_picks(tmp_path / "p.csv", 4)


def test_steps_are_built_when_asked_in_step_order(tmp_path):
    path = tmp_path / "picks.csv"
    path.write_text(PICKS_HEADER + RING.replace("0,", "7,", 4)[:0] + "".join(
        f"{s},{i},{(i + 1) % 4},{s + 1}\n" for s in (9, 2, 5) for i in range(4)))
    steps = read_picks(path, 4)
    assert len(steps) == 3 and [m[0, 1] for m in steps] == [3, 6, 10]  # steps 2, 5, 9 in order
    assert steps[-1][0, 1] == 10 and not steps[0].flags.writeable
    with pytest.raises(IndexError):
        steps[3]


def test_a_rank_may_not_send_more_than_its_micro_batch_routes(tmp_path):
    path = tmp_path / "picks.csv"
    path.write_text(PICKS_HEADER + RING + "1,0,1,600\n1,0,2,500\n1,1,0,1\n")
    read_picks(path, 4, picks_per_rank=1100)
    with pytest.raises(ConfigError) as err:
        read_picks(path, 4, picks_per_rank=1099)
    assert err.value.message.startswith(f"{path}:6: step 1: EP rank 0 sends 1,100 (token, expert) pairs")
    spec = moe_spec({"ep": 4, "routing": {"type": "file", "path": str(path)}})  # T k = 512 x 2 = 1,024
    with pytest.raises(ConfigError, match=r"picks.csv:6: step 1: EP rank 0 sends 1,100 .* = 1,024"):
        run_experiment(parse_spec(spec))


def _reference_picks(text: str, ep: int) -> list[list[list[float]]] | None:
    """The matrices a plain reading of ``text`` gives by the rules of docs/moe.md, or None when one is broken."""
    import csv
    import io
    import math
    import re
    rows = [[c.strip() for c in r] for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    columns = ("step", "src", "dst", "tokens")
    if len(rows) < 2 or sorted(rows[0]) != sorted(columns):
        return None
    cells: dict[tuple[int, int, int], float] = {}
    for r in rows[1:]:
        if len(r) != 4 or not all(re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", c) for c in r):
            return None
        v = dict(zip(rows[0], (float(c) for c in r)))
        if not all(math.isfinite(x) and x == int(x) and 0 <= x <= 2**53 for x in v.values()):
            return None
        if v["src"] >= ep or v["dst"] >= ep or (v["step"], v["src"], v["dst"]) in cells:
            return None
        cells[(int(v["step"]), int(v["src"]), int(v["dst"]))] = v["tokens"]
    if {k[1] for k in cells} | {k[2] for k in cells} != set(range(ep)):
        return None
    out = []
    for step in sorted({k[0] for k in cells}):
        m = [[0.0] * ep for _ in range(ep)]
        for (s, i, j), t in cells.items():
            if s == step:
                m[i][j] = t
        if not any(m[i][j] for i in range(ep) for j in range(ep) if i != j):
            return None
        out.append(m)
    return out


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_mutation_of_a_valid_file_reads_as_written_or_is_one_config_error(tmp_path_factory, data):
    """A mutated picks file gives exactly the matrices a plain reading by the documented rules gives, or,
    when that reading finds a rule broken, one ConfigError (never another exception, never other numbers)."""
    lines = (PICKS_HEADER + RING + "3,2,0,7\n3,1,1,2\n").splitlines(keepends=True)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["cell", "drop", "repeat", "swap", "text"]))
        cells = lines[i].rstrip("\n").split(",")
        if op == "cell":
            k = data.draw(st.integers(0, len(cells) - 1))
            cells[k] = data.draw(st.sampled_from(["", "-1", "4", "3", "0", "1.5", "1e30", "nan", "x", "99", "2",
                                                  "+2", "2.0", "1e1", '"3"', " 1 ", "-0", "1_0"]))
            lines[i] = ",".join(cells) + "\n"
        elif op == "drop":
            del lines[i]
        elif op == "repeat":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            at = data.draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:at] + data.draw(st.sampled_from([",", "\n", '"', " ", "\t", "e", "+", "."])) \
                + lines[i][at:]
        if not lines:
            break
    text = "".join(lines)
    path = tmp_path_factory.mktemp("picks") / "picks.csv"
    path.write_text(text)
    try:
        got = [m.tolist() for m in read_picks(path, 4)]
    except ConfigError as exc:
        assert exc.path == "workload.moe.routing.path" and len(str(exc)) < 2048
        got = None
    assert got == _reference_picks(text, 4)


# ---------------------------------------------------------------------------- all-to-all-v algorithms
@settings(max_examples=30, deadline=None)
@given(hosts=st.integers(1, 4), per_host=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_hierarchical_moves_each_byte_once_per_hop_it_needs(hosts, per_host, seed):
    n = hosts * per_host
    if n < 2:
        return
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 5, size=(n, n)).astype(float) * 1e6
    gpu_host = np.repeat(np.arange(hosts), per_host)
    steps = alltoallv_steps("hierarchical", list(range(n)), 0.0, m, gpu_host)
    sent = pair_bytes(n, 0.0, m)
    local = np.arange(n) % per_host
    messages = [msg for step in steps for msg in step]
    intra = sum(b for s, d, b in messages if gpu_host[s] == gpu_host[d])
    inter = sum(b for s, d, b in messages if gpu_host[s] != gpu_host[d])
    assert intra == pytest.approx(sent[local[:, None] != local[None, :]].sum())
    assert inter == pytest.approx(sent[gpu_host[:, None] != gpu_host[None, :]].sum())
    assert all(local[s] == local[d] for s, d, b in messages if gpu_host[s] != gpu_host[d])  # one rail


@pytest.mark.parametrize("algorithm", ["direct", "pairwise", "hierarchical"])
def test_uniform_alltoallv_is_the_alltoall_closed_form(algorithm):
    """Without a matrix every pair gets M/n: direct and hierarchical (one GPU per host) take
    (n-1)M/(nB), pairwise the same in n-1 steps, on a non-blocking fabric without latency."""
    n, size = 4, 4e9
    topo = flat(n)
    env = Environment()
    fabric = Fabric(env, topo, make_routing("spray", topo, np.random.default_rng(0)))
    env.run(env.process(run_collective(env, fabric, "alltoallv", algorithm, list(range(n)), size)))
    assert env.now == pytest.approx((n - 1) * size / n / B, rel=1e-9)


def test_incast_takes_the_receivers_bytes_over_its_nic():
    """Every rank sends x to rank 0 only: rank 0's NIC carries (n-1)x, the closed form."""
    n, x = 5, 1e9
    m = np.zeros((n, n))
    m[1:, 0] = x
    assert run_call(flat(n), "direct", m) == pytest.approx((n - 1) * x / B, rel=1e-9)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), algorithm=st.sampled_from(["direct", "pairwise"]))
def test_skewed_alltoallv_runs_at_its_ideal_on_a_non_blocking_fabric(seed, algorithm):
    """On a non-blocking fabric the call takes its ideal and never less than the bound, which is
    at least the busiest NIC's bytes over its bandwidth."""
    n = 6
    rng = np.random.default_rng(seed)
    m = rng.zipf(1.5, size=(n, n)).clip(max=50).astype(float) * 1e7
    topo = flat(n)
    took = run_call(topo, algorithm, m)
    ideal = IdealModel(topo).ideal("alltoallv", algorithm, list(range(n)), 0.0, matrix=m)
    sent = pair_bytes(n, 0.0, m)
    busiest = max(sent.sum(axis=1).max(), sent.sum(axis=0).max()) / B
    assert took == pytest.approx(ideal.time_s, rel=1e-9)
    assert ideal.bound_s >= busiest * (1 - 1e-12) and took >= ideal.bound_s * (1 - 1e-9)


def test_zero_pairs_send_no_message():
    m = np.zeros((3, 3))
    m[0, 1] = 5.0
    s = build_collective("alltoallv", "direct", [0, 1, 2], 0.0, matrix=m)
    assert s.n_sends == 1


# ---------------------------------------------------------------------------- MoE training
TOPO = {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 4,
        "nics_per_host": 4, "nic": {"bandwidth": "400Gbps", "latency": "1us"},
        "uplink": {"bandwidth": "400Gbps", "latency": "500ns"}, "intra_host": {"bandwidth": "900GB/s"}}


def moe_spec(moe: dict | None = None, **kw) -> dict:
    workload = {"type": "training", "gpu": "h100",
                "model": {"layers": 4, "hidden": 512, "heads": 8, "seq_len": 512, "vocab": 32000,
                          "micro_batch": 1, "global_batch": 16},
                "parallelism": {"tp": 1, "pp": 2, "dp": 8},
                "moe": {"experts": 16, "top_k": 2, "ep": 8, "expert_hidden": 1024, **(moe or {})}}
    return {"name": "moe", "seed": 1, "topology": TOPO, "workload": workload, **kw}


def test_moe_iteration_records_dispatch_and_combine_and_accounts_for_its_time():
    r = run_experiment(parse_spec(moe_spec({"routing": {"type": "zipf", "skew": 1.2}})))
    labels = {c.label for c in r.collectives if c.op == "alltoallv"}
    assert labels == {"ep_dispatch", "ep_combine", "ep_combine_grad", "ep_dispatch_grad"}
    (it,) = r.iterations
    parts = it.compute_s + it.tp_s + it.pp_s + it.dp_s + it.ep_s + it.bubble_s
    assert parts == pytest.approx(it.duration_s, rel=1e-9) and it.ep_s > 0
    plan = r.jobs[0].plan
    # 2 micro-batches x 2 stages x 2 MoE layers per stage x (forward + backward) x 2 all-to-alls
    assert sum(c.op == "alltoallv" for c in r.collectives) == 2 * 2 * 2 * 2 * 2
    for c in r.collectives:
        assert not c.below_bound and c.duration_s >= c.bound_s * (1 - 1e-9)
    assert plan.iteration_flops() > 0 and it.tflops_per_gpu > 0


def test_uniform_expected_routing_sends_the_closed_form_bytes_per_pair():
    """sample: false with uniform routing: every dispatch message carries T k / ep tokens of h
    elements of dispatch_bytes: (512 tokens x 2 / 8) x 512 x 1 byte."""
    r = run_experiment(parse_spec(moe_spec({"routing": {"type": "uniform", "sample": False}, "dispatch_bytes": 1})))
    dispatch = [c for c in r.collectives if c.label == "ep_dispatch"]
    per_pair = 512 * 2 / 8 * 512 * 1
    assert all(c.size_bytes == pytest.approx(per_pair * 7) for c in dispatch)  # 7 peers per rank
    flows = r.fabric.flow_columns()
    comm_ids = {c.comm for c in r.jobs[0].plan.ep_groups.values()}
    comm_of = np.array([int(label.split(":")[0][1:]) for label in flows["connection"]])  # "c27:0>1#0"
    is_ep = np.isin(comm_of, list(comm_ids))
    sizes = flows["size_bytes"][is_ep]
    assert set(np.round(sizes).tolist()) == {per_pair, 512 * 2 / 8 * 512 * 2}  # dispatch (fp8), the rest bf16


def test_moe_runs_are_deterministic_and_the_seed_changes_the_draws():
    a = run_experiment(parse_spec(moe_spec({"routing": {"type": "zipf", "skew": 1.0}})))
    b = run_experiment(parse_spec(moe_spec({"routing": {"type": "zipf", "skew": 1.0}})))
    c = run_experiment(parse_spec(moe_spec({"routing": {"type": "zipf", "skew": 1.0}}) | {"seed": 2}))
    key = [(x.label, x.start_s, x.end_s, x.size_bytes) for x in a.collectives]
    assert key == [(x.label, x.start_s, x.end_s, x.size_bytes) for x in b.collectives]
    assert key != [(x.label, x.start_s, x.end_s, x.size_bytes) for x in c.collectives]


def test_skew_slows_the_iteration():
    even = run_experiment(parse_spec(moe_spec({"routing": {"type": "uniform", "sample": False}})))
    hot = run_experiment(parse_spec(moe_spec({"routing": {"type": "zipf", "skew": 2.0}})))
    assert hot.iterations[0].duration_s > even.iterations[0].duration_s


@pytest.mark.parametrize("algorithm", ["pairwise", "hierarchical"])
def test_other_algorithms_run(algorithm):
    r = run_experiment(parse_spec(moe_spec({"algorithm": algorithm, "routing": {"type": "node_limited",
                                                                                "max_nodes": 1}})))
    assert {c.algorithm for c in r.collectives if c.op == "alltoallv"} == {algorithm}


def test_routing_from_a_file(tmp_path):
    rows = ["step,src,dst,tokens"] + [f"0,{i},{(i + 1) % 8},100" for i in range(8)]
    (tmp_path / "picks.csv").write_text("\n".join(rows) + "\n")
    spec = moe_spec({"routing": {"type": "file", "path": str(tmp_path / "picks.csv")}, "dispatch_bytes": 1})
    r = run_experiment(parse_spec(spec))
    dispatch = [c for c in r.collectives if c.label == "ep_dispatch"]
    assert all(c.size_bytes == pytest.approx(100 * 512) for c in dispatch)  # one peer each, 100 tokens


def test_expert_gradients_synchronise_across_ep_groups():
    r = run_experiment(parse_spec(moe_spec({"ep": 4})))
    plan = r.jobs[0].plan
    assert len(plan.ep_groups) == 2 * 2 and len(plan.edp_groups) == 2 * 4
    assert any(c.label == "edp" for c in r.collectives)


@pytest.mark.parametrize("moe, path, message", [
    ({"ep": 3}, "workload.moe.ep", "must divide dp"),
    ({"experts": 12}, "workload.moe.experts", "multiple of ep"),
    ({"top_k": 17}, "workload.moe.top_k", "cannot exceed"),
    ({"routing": {"type": "node_limited"}}, "workload.moe.routing", "max_nodes"),
    ({"routing": {"type": "uniform", "skew": 1}}, "workload.moe.routing", "skew applies"),
    ({"routing": {"type": "file"}}, "workload.moe.routing", "path"),
    ({"routing": "zipff"}, "workload.moe.routing.type", "zipf"),
    ({"dense_layers": 4}, "workload.moe.dense_layers", "no MoE layer"),
])
def test_bad_moe_specs_are_refused_at_their_path(moe, path, message):
    with pytest.raises(ConfigError) as err:
        parse_spec(moe_spec(moe))
    assert err.value.path.startswith(path) and message in err.value.message


def test_hierarchical_needs_equal_ranks_per_host():
    spec = moe_spec({"algorithm": "hierarchical"}) | {"placement": {"type": "random"}}
    with pytest.raises(ConfigError, match="same number of EP ranks on every host"):
        run_experiment(parse_spec(spec))


@pytest.mark.parametrize("scenario, total, active", [
    ("benchmarks/scenarios/moe-deepseek-1024-m16.yaml", 671e9, 37e9),   # DeepSeek-V3: 671B, 37B active
    ("experiments/moe-mixtral.yaml", 46.7e9, 12.9e9),                  # Mixtral 8x7B: 46.7B, 12.9B active
])
def test_presets_have_their_published_parameter_counts(scenario, total, active):
    """The presets' parameters (every replica's layers plus each EP group's experts once) are the
    published totals within 2%; the FLOPs per token (6 x active parameters by the usual rule) are
    within 20% (attention's sequence term and multi-head attention in place of MLA add some)."""
    from netsim.config import load_spec
    from netsim.experiment.run import build_topology, place_jobs
    spec = load_spec(scenario)
    plan = place_jobs(spec, build_topology(spec), np.random.default_rng(0))[0].plan
    moe = plan.experts
    params = sum(moe.layer_params(layer) + moe.expert_params(layer) * moe.spec.ep
                 for layer in range(plan.model.layers)) + plan.model.embedding_params
    assert params == pytest.approx(total, rel=0.02)
    tokens = plan.model.global_batch * plan.model.seq_len
    assert plan.iteration_flops() / tokens / 6 == pytest.approx(active, rel=0.2)


def test_an_ep_1_job_runs_and_its_empty_calls_have_no_bandwidth_not_an_infinite_one():
    import math

    from netsim.collectives.base import CollectiveRecord
    from netsim.config import parse_spec
    from netsim.experiment import run_experiment

    spec = parse_spec({
        "name": "ep1", "seed": 1,
        "topology": {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 4,
                     "nics_per_host": 4, "nic": {"bandwidth": "400Gbps"}, "uplink": {"bandwidth": "400Gbps"},
                     "intra_host": {"bandwidth": "900GB/s"}},
        "workload": {"type": "training", "gpu": "h100",
                     "model": {"layers": 2, "hidden": 512, "heads": 8, "seq_len": 512, "vocab": 32000,
                               "micro_batch": 1, "global_batch": 16},
                     "parallelism": {"pp": 2, "dp": 8},
                     "moe": {"experts": 4, "top_k": 2, "ep": 1, "expert_hidden": 1024}}})
    calls = run_experiment(spec).collectives
    empty = [c for c in calls if c.op == "alltoallv"]
    assert empty and all(c.duration_s == 0 and math.isnan(c.algbw_Bps) and math.isnan(c.busbw_Bps) for c in empty)
    assert all(math.isfinite(c.algbw_Bps) for c in calls if c.duration_s > 0)
    assert CollectiveRecord(0, 0, "allreduce", "ring", 8.0, 2, 1, 1.0, 1.0).algbw_Bps != float("inf")

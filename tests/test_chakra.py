"""Chakra execution traces: the encoding, the mapping to schedules (closed forms on a non-blocking
fabric), process groups and messages, bad traces, and the YAML/CLI path."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim.cli import app
from netsim.config import parse_spec
from netsim.engine.schedule_io import read_schedule, write_schedule
from netsim.errors import ConfigError
from netsim.experiment.run import run_experiment
from netsim.workload import chakra_proto as pb
from netsim.workload import chakra
from netsim.workload.chakra import (
    build_trace,
    check_trace_files,
    coll_node,
    comp_node,
    read_trace,
    recv_node,
    send_node,
    trace_files,
    write_trace,
)

runner = CliRunner()
GB = 1e9
MiB = 2**20

#: 4 single-GPU hosts on 2 leaves, 2 spines, everything 1 GB/s and no latency: non-blocking for a ring.
TOPOLOGY = {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 1,
            "nics_per_host": 1, "nic": {"bandwidth": "1GB/s", "latency": "0s"},
            "uplink": {"bandwidth": "1GB/s", "latency": "0s"}, "intra_host": {"bandwidth": "100GB/s", "latency": "0s"}}


def spec_for(workload: dict, **extra):
    """An experiment of ``workload`` on :data:`TOPOLOGY`, in the pure fluid model (the closed forms below)."""
    return parse_spec({"name": "t", "model": "fluid", "topology": TOPOLOGY, "workload": workload, **extra})


def compute_allreduce_sendrecv(prefix, n=4, compute_us=100, size=64 * MiB, msg=8 * MiB):
    """Every rank computes, then allreduces; then rank 0 sends to rank 1, which computes on the result."""
    ranks = []
    for r in range(n):
        nodes = [comp_node(10, compute_us), coll_node(11, "allreduce", size, deps=[10])]
        if r == 0:
            nodes.append(send_node(12, 0, 1, msg, tag=3, deps=[11]))
        if r == 1:
            nodes += [recv_node(12, 0, 1, msg, tag=3, deps=[11]), comp_node(13, 50, deps=[12])]
        ranks.append(nodes)
    return write_trace(prefix, ranks)


# ---------------------------------------------------------------------------------- encoding
def test_field_numbers_follow_et_def_proto():
    # Node: id = 1 (varint), type = 3 (enum), duration_micros = 7; AttributeProto: name = 1, int64_val = 9
    raw = bytes([0x08, 0x05, 0x18, 0x04, 0x38, 0x07, 0x52, 0x0B, 0x0A, 0x07]) + b"num_ops" + bytes([0x48, 0x2A])
    node = pb.Node.FromString(raw)
    assert (node.id, node.type, node.duration_micros) == (5, pb.NODE_TYPES["COMP_NODE"], 7)
    assert node.attr[0].name == "num_ops" and pb.attr_value(node.attr[0]) == 42
    # and back: the same bytes
    assert node.SerializeToString() == raw


def test_stream_framing_round_trip():
    msgs = [pb.GlobalMetadata(version="0.0.4"), comp_node(0, 3), coll_node(1, "ALL_TO_ALL", 300, deps=[0])]
    data = pb.encode_stream(msgs)
    frames = list(pb.split_stream(data))
    assert frames[0][0] == 0 and len(frames) == 3
    assert pb.Node.FromString(frames[2][1]).ctrl_deps == [0]
    with pytest.raises(pb.FramingError, match="claims"):
        list(pb.split_stream(data[:-1]))


def test_write_and_read_a_trace(tmp_path):
    files = compute_allreduce_sendrecv(tmp_path / "tr" / "x")
    assert [f.name for f in files] == ["x.0.et", "x.1.et", "x.2.et", "x.3.et"]
    trace = read_trace(tmp_path / "tr" / "x")
    assert trace.ranks == 4 and trace.versions == ["0.0.4"] * 4
    recv = trace.nodes[1][2]
    assert recv.type_name == "COMM_RECV_NODE" and recv.attrs["comm_src"] == 0 and recv.deps == (11,)
    assert trace.nodes[0][0].duration_s == pytest.approx(100e-6)


# ---------------------------------------------------------------------------------- closed forms
def test_compute_allreduce_sendrecv_closed_form(tmp_path):
    compute_allreduce_sendrecv(tmp_path / "x")
    result = run_experiment(spec_for({"type": "chakra", "path": str(tmp_path / "x")}))
    n, size, msg = 4, 64 * MiB, 8 * MiB
    ring = 2 * (n - 1) / n * size / GB          # ring allreduce on a non-blocking fabric
    expected = 100e-6 + ring + msg / GB + 50e-6  # compute, allreduce, the message, rank 1's compute
    assert result.sim_time_s == pytest.approx(expected, rel=1e-9)
    (call,) = result.collectives
    assert (call.op, call.algorithm, call.n_ranks, call.size_bytes) == ("allreduce", "ring", 4, size)
    assert call.start_s == pytest.approx(100e-6) and call.duration_s == pytest.approx(ring, rel=1e-9)
    assert call.ideal_s == pytest.approx(ring, rel=1e-9) and not call.below_bound
    assert result.jobs[0].kind == "trace"


def test_staggered_entry_and_algorithm_choice(tmp_path):
    """Rank 3 computes longer: the call starts with the first rank and ends after the last could finish."""
    ranks = [[comp_node(0, 300 if r == 3 else 100), coll_node(1, "allreduce", 4 * MiB, deps=[0])] for r in range(4)]
    write_trace(tmp_path / "s", ranks)
    for algorithm in ("ring", "recursive_doubling"):
        result = run_experiment(spec_for({"type": "chakra", "path": str(tmp_path / "s"),
                                          "algorithms": {"allreduce": algorithm}}))
        (call,) = result.collectives
        assert call.algorithm == algorithm and call.start_s == pytest.approx(100e-6)
        assert call.end_s >= 300e-6 + call.ideal_s * (1 - 1e-9)
    ring = 2 * 3 / 4 * 4 * MiB / GB
    result = run_experiment(spec_for({"type": "chakra", "path": str(tmp_path / "s")}))
    assert result.sim_time_s == pytest.approx(300e-6 + ring, rel=1e-6)  # the ring waits for its slowest rank


def test_process_groups_run_concurrently_and_match_by_order(tmp_path):
    """Two groups of two ranks: each allreduces twice; the groups share nothing, so both take the closed form."""
    ranks = []
    for r in range(4):
        pg = "a" if r < 2 else "b"
        ranks.append([coll_node(1, "allreduce", 2 * MiB, pg_name=pg), coll_node(2, "allgather", 4 * MiB, deps=[1],
                                                                                pg_name=pg)])
    write_trace(tmp_path / "g", ranks)
    result = run_experiment(spec_for({"type": "chakra", "path": str(tmp_path / "g")}))
    assert len(result.collectives) == 4
    one = 2 * MiB / GB + 4 * MiB / 2 / GB  # allreduce 2(n-1)/n M/B, allgather (n-1)/n M/B with n = 2
    assert result.sim_time_s == pytest.approx(one, rel=1e-9)
    assert {c.comm for c in result.collectives} == {0, 1} and {c.n_ranks for c in result.collectives} == {2}
    # explicit groups that contradict the files are refused
    with pytest.raises(ConfigError, match="rank 1 is not a member of process group 'a'"):
        run_experiment(spec_for({"type": "chakra", "path": str(tmp_path / "g"), "groups": {"a": [0, 2]}}))


def test_data_deps_and_ops_per_s(tmp_path):
    node = comp_node(0, 0, num_ops=("int64_val", 2_000_000))
    dep = comp_node(1, 10)
    dep.data_deps.append(0)  # a data dependency, not a control one
    write_trace(tmp_path / "c", [[node, dep]])
    result = run_experiment(spec_for({"type": "chakra", "path": str(tmp_path / "c"), "ops_per_s": 1e12}))
    assert result.sim_time_s == pytest.approx(2e-6 + 10e-6)
    result = run_experiment(spec_for({"type": "chakra", "path": str(tmp_path / "c")}))
    assert result.sim_time_s == pytest.approx(10e-6)  # no duration and no rate: the node costs nothing


def test_schedule_export_runs_the_same(tmp_path):
    compute_allreduce_sendrecv(tmp_path / "x", size=8 * MiB)
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"name": "t", "model": "fluid", "topology": TOPOLOGY,
                                   "workload": {"type": "chakra", "path": "x"}}))
    result = runner.invoke(app, ["export-schedule", str(exp), str(tmp_path / "s.parquet")])
    assert result.exit_code == 0, result.output
    a = run_experiment(spec_for({"type": "chakra", "path": str(tmp_path / "x")}))
    b = run_experiment(spec_for({"type": "schedule", "path": str(tmp_path / "s.parquet")}))
    assert a.sim_time_s == pytest.approx(b.sim_time_s, rel=1e-12)
    # a collective workload exported and replayed, in the default NCCL model: the same time as the call
    # itself, with its 2 channels (one NIC a host) on their own connections
    coll = {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "4MiB", "iterations": 2}
    exp.write_text(yaml.safe_dump({"name": "t", "topology": TOPOLOGY, "workload": coll}))
    result = runner.invoke(app, ["export-schedule", str(exp), str(tmp_path / "c.parquet")])
    assert result.exit_code == 0, result.output
    a = run_experiment(parse_spec({"name": "t", "topology": TOPOLOGY, "workload": coll}))
    b = run_experiment(parse_spec({"name": "t", "topology": TOPOLOGY,
                                   "workload": {"type": "schedule", "path": str(tmp_path / "c.parquet")}}))
    assert a.sim_time_s == pytest.approx(b.sim_time_s, rel=1e-12)
    assert len(read_schedule(tmp_path / "c.parquet").connections) == 2 * 4


def test_determinism(tmp_path):
    compute_allreduce_sendrecv(tmp_path / "x", size=4 * MiB)
    spec = spec_for({"type": "chakra", "path": str(tmp_path / "x"), "iterations": 2}, seed=3, routing="ecmp")
    a, b = run_experiment(spec), run_experiment(spec)
    assert a.collectives == b.collectives and a.sim_time_s == b.sim_time_s
    assert [c.iteration for c in a.collectives] == [0, 1]


def test_trace_schedule_round_trips_through_parquet(tmp_path):
    compute_allreduce_sendrecv(tmp_path / "x")
    schedule, calls = build_trace(read_trace(tmp_path / "x"), [0, 1, 2, 3])
    back = read_schedule(write_schedule(schedule, tmp_path / "s.parquet"))
    assert np.array_equal(back.dep_idx, schedule.dep_idx) and back.connections.connections() == \
        schedule.connections.connections()
    assert len(calls) == 1 and calls[0].ranks == [0, 1, 2, 3]


# ---------------------------------------------------------------------------------- bad traces
def _bad(tmp_path, ranks, match, **kw):
    write_trace(tmp_path / "bad", ranks)
    with pytest.raises(ConfigError, match=match) as err:
        build_trace(read_trace(tmp_path / "bad"), list(range(len(ranks))), **kw)
    return str(err.value)


def test_missing_dependency_and_cycle(tmp_path):
    msg = _bad(tmp_path, [[comp_node(0, 1, deps=[9])]],
               r"node 0 \(COMP_NODE\): depends on node 9, which is not in the file")
    assert msg.startswith(str(tmp_path / "bad.0.et"))
    _bad(tmp_path, [[comp_node(0, 1, deps=[1]), comp_node(1, 1, deps=[0])]], "cycle")


def test_unmatched_collectives_and_messages(tmp_path):
    ar = coll_node(1, "allreduce", 10)
    msg = _bad(tmp_path, [[ar, coll_node(2, "allreduce", 10, deps=[1])], [ar]],
               "node 2 .*: collective #1 on process group '' has no match on rank 1")
    assert "bad.0.et" in msg
    _bad(tmp_path, [[send_node(5, 0, 1, 10)], [comp_node(0, 1)]], "node 5 .*no matching receive")
    _bad(tmp_path, [[coll_node(1, "allreduce", 10)], [coll_node(1, "allreduce", 20)]],
         "is ALL_REDUCE of 20 bytes but on rank 0 .* ALL_REDUCE of 10 bytes")
    _bad(tmp_path, [[coll_node(1, "GATHER", 10)], [coll_node(1, "GATHER", 10)]],
         r"comm_type 3 \(GATHER\) is not supported")
    _bad(tmp_path, [[send_node(5, 0, 7, 10)], []], "comm_dst 7 must be another rank")


def test_deadlock_across_ranks(tmp_path):
    """Each rank receives before it sends: nothing can start."""
    ranks = [[recv_node(0, 1, 0, 10), send_node(1, 0, 1, 10, deps=[0])],
             [recv_node(0, 0, 1, 10), send_node(1, 1, 0, 10, deps=[0])]]
    _bad(tmp_path, ranks, "deadlock: the receive waits for the message 1->0")


def test_corrupt_and_missing_files(tmp_path):
    write_trace(tmp_path / "c", [[comp_node(0, 1)], [comp_node(0, 1)]])
    (tmp_path / "c.1.et").write_bytes(b"\xff\xff\xff\xff\xff")
    with pytest.raises(ConfigError, match=r"c\.1\.et: not a Chakra ET file"):
        read_trace(tmp_path / "c")
    with pytest.raises(ConfigError, match=r"ranks is 3 but the trace has 2 rank files .*c\.2\.et not found"):
        read_trace(tmp_path / "c", ranks=3)
    with pytest.raises(ConfigError, match="no trace files"):
        read_trace(tmp_path / "nothing")


def test_cli_bad_trace_exit_2_without_traceback(tmp_path):
    write_trace(tmp_path / "t", [[coll_node(1, "allreduce", 10)], [coll_node(1, "allreduce", 10),
                                                                    comp_node(2, 1, deps=[7])]])
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"name": "t", "topology": TOPOLOGY, "workload": {"type": "chakra", "path": "t"}},
                                  sort_keys=False))
    proc = subprocess.run([sys.executable, "-m", "netsim.cli", "run", str(exp), "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    text = " ".join(proc.stderr.split())
    assert "workload.path" in text and "t.1.et" in text and "node 2" in text and "node 7" in text
    bad_alg = yaml.safe_dump({"name": "t", "topology": TOPOLOGY,
                              "workload": {"type": "chakra", "path": "t", "algorithms": {"allreduce": "nope"}}})
    exp.write_text(bad_alg)
    result = runner.invoke(app, ["validate", str(exp)])
    assert result.exit_code == 2 and "workload.algorithms.allreduce" in " ".join(result.output.split())


def test_yaml_run_writes_collectives(tmp_path):
    compute_allreduce_sendrecv(tmp_path / "traces" / "x", size=4 * MiB)
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"name": "t", "topology": TOPOLOGY,
                                   "workload": {"type": "chakra", "path": "traces/x"}}, sort_keys=False))
    result = runner.invoke(app, ["run", str(exp), "--out", str(tmp_path / "r"), "--no-report"])
    assert result.exit_code == 0, result.output
    colls = pd.read_parquet(tmp_path / "r" / "collectives.parquet")
    assert colls.op.tolist() == ["allreduce"] and colls.slowdown.iloc[0] == pytest.approx(1.0)
    jobs = pd.read_parquet(tmp_path / "r" / "jobs.parquet")
    assert jobs.kind.tolist() == ["trace"]


def test_shipped_example_is_what_its_script_writes(tmp_path):
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "experiments" / "traces" / "chakra-tp-dp"
    spec = importlib.util.spec_from_file_location("make_trace", root / "make_trace.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    files = write_trace(tmp_path / "trace", [module.rank_nodes(r) for r in range(8)])
    for f in files:
        assert f.read_bytes() == (root / f.name).read_bytes(), f.name
    # the shipped schedule is the trace's, exported
    shipped = read_schedule(root / "schedule.parquet")
    schedule, _ = build_trace(read_trace(root / "trace"), list(range(8)))
    assert np.array_equal(shipped.dep_idx, schedule.dep_idx) and np.array_equal(shipped.amount, schedule.amount)


def test_a_trace_job_among_other_jobs(tmp_path):
    compute_allreduce_sendrecv(tmp_path / "x", n=2, size=4 * MiB, msg=MiB)
    spec = parse_spec({"name": "mix", "topology": TOPOLOGY, "jobs": [
        {"name": "trace", "workload": {"type": "chakra", "path": str(tmp_path / "x")}},
        {"name": "ring", "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "4MiB",
                                      "ranks": 2}}]})
    result = run_experiment(spec)
    assert [j.kind for j in result.jobs] == ["trace", "collective"]
    assert sorted(c.job for c in result.collectives) == [0, 1]
    assert set(result.jobs[0].gpus.tolist()).isdisjoint(result.jobs[1].gpus.tolist())


# ---------------------------------------------------------------------------------- the rank files
def _two(prefix):
    return write_trace(prefix, [[comp_node(0, 1)], [comp_node(0, 1)]])


def test_every_rank_file_present_once(tmp_path):
    _two(tmp_path / "t")
    assert [f.name for f in trace_files(tmp_path / "t")] == ["t.0.et", "t.1.et"]
    (tmp_path / "t.3.et").write_bytes((tmp_path / "t.0.et").read_bytes())
    with pytest.raises(ConfigError, match=r"t\.2\.et not found: the trace has files up to t\.3\.et, and every rank "
                                          r"0\.\.3 needs one"):
        trace_files(tmp_path / "t")
    (tmp_path / "t.3.et").unlink()
    (tmp_path / "t.01.et").write_bytes(b"")
    with pytest.raises(ConfigError, match="t.01.et: a rank number with a leading zero"):
        trace_files(tmp_path / "t")
    (tmp_path / "t.01.et").unlink()
    with pytest.raises(ConfigError, match=r"ranks is 1 but the trace has 2 rank files \(t\.0\.et to t\.1\.et\)"):
        trace_files(tmp_path / "t", ranks=1)
    (tmp_path / "t.99999999.et").write_bytes(b"")
    with pytest.raises(ConfigError, match="above the largest rank"):
        trace_files(tmp_path / "t")


def test_the_folder_instead_of_the_prefix(tmp_path):
    _two(tmp_path / "d" / "t")
    with pytest.raises(ConfigError, match="a directory: path is the files' prefix"):
        trace_files(tmp_path / "d")


@pytest.mark.parametrize("target,match", [("/dev/zero", "not a regular file"), ("nowhere", "symlink to a missing file"),
                                          ("t.1.et", "symlink loop")])
def test_rank_file_that_is_not_a_file(tmp_path, target, match):
    _two(tmp_path / "t")
    (tmp_path / "t.1.et").unlink()
    os.symlink(target, tmp_path / "t.1.et")
    with pytest.raises(ConfigError, match=match) as err:
        read_trace(tmp_path / "t")
    assert err.value.file == str(tmp_path / "t.1.et")


# ---------------------------------------------------------------------------------- framing and schema
def _with_file(tmp_path, data: bytes):
    _two(tmp_path / "t")
    (tmp_path / "t.1.et").write_bytes(data)
    with pytest.raises(ConfigError) as err:
        read_trace(tmp_path / "t")
    assert err.value.file == str(tmp_path / "t.1.et")
    return err.value.message


META = pb.encode_stream([pb.GlobalMetadata(version="0.0.4")])


def test_broken_framing(tmp_path):
    assert "empty trace file" in _with_file(tmp_path, b"")
    assert "too long" in _with_file(tmp_path, b"\xff" * 11 + b"\x01")
    assert "claims 4,611,686,018,427,387,904 bytes" in _with_file(tmp_path, pb._varint(2**62) + b"\x00")
    assert "netsim reads the binary .et files, not JSON" in _with_file(tmp_path, b'{"nodes": []}' * 20)
    assert "GlobalMetadata" in _with_file(tmp_path, pb.encode_stream([comp_node(3, 1)]))


def test_node_fields_outside_the_schema(tmp_path):
    assert "field 1 (id) with the wrong wire type 2" in _with_file(tmp_path, META + b"\x05\x18\x04\x0a\x01A")
    assert "field 101, which Chakra's Node has not" in _with_file(tmp_path, META + b"\x05\x18\x04\xa8\x06\x01")
    assert "node type 0 is not a node netsim runs" in _with_file(tmp_path, META + b"\x02\x08\x01")
    assert "node type 42" in _with_file(tmp_path, META + b"\x04\x08\x01\x18\x2a")
    # storage (field 11) is not read, and not refused
    node = comp_node(0, 1).SerializeToString() + b"\x5a\x01\x00"
    (tmp_path / "s.0.et").write_bytes(META + pb._varint(len(node)) + node)
    assert read_trace(tmp_path / "s").nodes[0][0].duration_s == pytest.approx(1e-6)


def _refused(tmp_path, ranks, match, **kw):
    write_trace(tmp_path / "bad", ranks)
    with pytest.raises(ConfigError, match=match) as err:
        build_trace(read_trace(tmp_path / "bad", **kw), list(range(len(ranks))), **kw)
    return err.value


def test_attributes_checked_when_read(tmp_path):
    def coll(**attrs):
        node = coll_node(1, "allreduce", 10)
        del node.attr[:]
        for k, v in attrs.items():
            node.attr.append(pb.make_attr(k, *v) if isinstance(v, tuple) else pb.make_attr(k, v))
        return node
    cases = [(coll(comm_type=0), "comm_size is missing"), (coll(comm_size=10), "comm_type is missing"),
             (coll(comm_type=0, comm_size=10.0), "comm_size is double_val 10.0; it must be an integer"),
             (coll(comm_type=0, comm_size=True), "comm_size is bool_val True"),
             (coll(comm_type=0, comm_size=2**62), r"comm_size 4611686018427387904 is out of range; 0 to 2\*\*60"),
             (coll(comm_type=0, comm_size=-1), "comm_size -1 is out of range"),
             (coll(comm_type=99, comm_size=1), r"comm_type 99 \(unknown\) is not supported"),
             (coll(comm_type=0, comm_size=1, pg_name=3), "pg_name is int64_val 3; it must be a string"),
             (coll(comm_type=0, comm_size=1, pg_name=("", "string_list")), "pg_name is string_list"),
             (coll(comm_type=(0, "int32_val"), comm_size=1, x=1), None)]
    for node, match in cases:
        if match is None:
            write_trace(tmp_path / "ok", [[node], [node]])
            assert read_trace(tmp_path / "ok").nodes[0][0].attrs == {"comm_type": 0, "comm_size": 1}
            continue
        err = _refused(tmp_path, [[node], [node]], match)
        assert err.message.startswith("node 1 (COMM_COLL_NODE): ") and err.file.endswith("bad.0.et")
    twice = coll(comm_type=0, comm_size=1)
    twice.attr.append(pb.make_attr("comm_size", 2))
    _refused(tmp_path, [[twice], [twice]], "attribute comm_size is given twice")


def test_messages_checked(tmp_path):
    _refused(tmp_path, [[send_node(0, 0, 1, 10)], [recv_node(0, 0, 1, 11)]],
             r"receives 11 bytes but the matching send \(node 0 of bad\.0\.et, message #0 0->1 tag 0\) sends 10")
    _refused(tmp_path, [[send_node(0, 1, 1, 10)], [recv_node(0, 0, 1, 10)]], "comm_src 1 is not this file's rank")
    _refused(tmp_path, [[send_node(0, 0, 1, 10)], [recv_node(0, 0, 0, 10)]], "comm_dst 0 is not this file's rank")
    _refused(tmp_path, [[send_node(0, 0, 0, 10)], []], r"comm_dst 0 must be another rank of the trace \(0\.\.1, not 0")
    no_src = recv_node(0, 0, 1, 10)
    del no_src.attr[0]
    _refused(tmp_path, [[send_node(0, 0, 1, 10)], [no_src]], "attribute comm_src is missing")


def test_durations_bounded(tmp_path):
    _refused(tmp_path, [[comp_node(0, 2**64 - 1)]], "duration_micros 18,446,744,073,709,551,615 is above the longest")
    _refused(tmp_path, [[comp_node(0, 6 * 10**11), comp_node(1, 6 * 10**11)]], r"add up to 1\.2e\+06 s; at most 1e\+06")
    _refused(tmp_path, [[comp_node(0, 0, num_ops=2**62)]],
             r"num_ops 4611686018427387904 at ops_per_s 1e-300 takes inf s",
             ops_per_s=1e-300)
    _refused(tmp_path, [[comp_node(0, 0, num_ops=float("nan"))]], "num_ops nan must be a finite number >= 0")
    _refused(tmp_path, [[comp_node(0, 0, num_ops=-1)]], "num_ops -1 must be a finite number >= 0")
    _refused(tmp_path, [[comp_node(0, 0, num_ops="x")]], "num_ops is string_val 'x'; it must be a number")
    write_trace(tmp_path / "f", [[comp_node(0, 0, num_ops=2.5e12)]])
    schedule, _ = build_trace(read_trace(tmp_path / "f"), [0], ops_per_s=1e12)
    assert schedule.amount.tolist() == [2.5]


def test_node_limits(tmp_path, monkeypatch):
    monkeypatch.setattr(chakra, "MAX_NODES", 3)
    _refused(tmp_path, [[comp_node(i, 1) for i in range(2)]] * 2, "more than 3 nodes")
    monkeypatch.setattr(chakra, "MAX_NODES", 100)
    monkeypatch.setattr(chakra, "MAX_DEPS", 1)
    _refused(tmp_path, [[comp_node(0, 1), comp_node(1, 1, deps=[0])]] * 2, "more than 1 dependencies")
    _refused(tmp_path, [[comp_node(0, 1, name="x" * 2000)]], "2,000 characters long; at most 1,024")
    monkeypatch.setattr(chakra, "MAX_TASKS", 10)
    _refused(tmp_path, [[coll_node(0, "allreduce", 100)]] * 4, "more than 10 tasks")


# ---------------------------------------------------------------------------------- agreement across files
def _shipped_ranks():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "experiments" / "traces" / "chakra-tp-dp"
    frames = [list(pb.split_stream((root / f"trace.{r}.et").read_bytes()))[1:] for r in range(8)]
    return [[pb.Node.FromString(bytes(raw)) for _, raw in rank] for rank in frames]


def test_a_rank_without_its_dp_allreduce_is_refused(tmp_path):
    ranks = _shipped_ranks()
    ranks[6][2].type = pb.NODE_TYPES["COMP_NODE"]  # rank 6's DP allreduce, now a compute node
    err = _refused(tmp_path, ranks, r"rank 6 takes part in 1 process group\(s\) \('tp3'\) but rank 0 and most others "
                                    r"in 2 \('dp', 'tp0'\)")
    assert err.file.endswith("bad.6.et")
    # the groups the workload declares are what counts: dp of all 8 ranks, then rank 6 has no match
    _refused(tmp_path, ranks, "collective #0 on process group 'dp' has no match on rank 6",
             groups={"dp": list(range(8))})


def test_declared_groups(tmp_path):
    ranks = [[coll_node(0, "allreduce", 8)] for _ in range(4)]
    for r in (0, 3):
        ranks[r].append(coll_node(1, "allreduce", 8, deps=[0], pg_name="emb"))
    _refused(tmp_path, ranks, "rank 1 takes part in 0 process group")
    schedule, calls = build_trace(read_trace(tmp_path / "bad", groups={"emb": [0, 3]}), range(4),
                                  groups={"emb": [0, 3]})
    assert [c.ranks for c in calls] == [[0, 1, 2, 3], [0, 3]]
    _refused(tmp_path, ranks, "no collective of the trace uses process group 'emd'", groups={"emd": [0, 3]})
    _refused(tmp_path, ranks, r"process group 'emb' names rank 4; the trace has 4 ranks", groups={"emb": [0, 4]})


def test_crossed_collectives_deadlock(tmp_path):
    ranks = [[coll_node(0, "allreduce", 8, pg_name="a"), coll_node(1, "allreduce", 8, pg_name="b", deps=[0])],
             [coll_node(0, "allreduce", 8, pg_name="b"), coll_node(1, "allreduce", 8, pg_name="a", deps=[0])]]
    write_trace(tmp_path / "x", ranks)
    read_trace(tmp_path / "x", groups={})  # each file, and their agreement, are fine
    with pytest.raises(ConfigError, match=r"deadlock: collective #0 on process group '\w' waits for ranks \[\d\]"):
        check_trace_files(tmp_path / "x")


def test_compute_only_trace_runs(tmp_path):
    write_trace(tmp_path / "c", [[comp_node(0, 5), comp_node(1, 0, deps=[0])]] * 2)
    result = run_experiment(spec_for({"type": "chakra", "path": str(tmp_path / "c")}))
    assert result.sim_time_s == pytest.approx(5e-6) and result.collectives == []


# ---------------------------------------------------------------------------------- properties
def _small_files(tmp_path):
    return compute_allreduce_sendrecv(tmp_path / "p", size=MiB, msg=MiB)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rank=st.integers(0, 3), at=st.floats(0, 1, exclude_max=True), op=st.sampled_from(["flip", "cut", "insert"]),
       byte=st.integers(0, 255))
def test_any_byte_mutation_reads_or_is_refused(tmp_path, rank, at, op, byte):
    """A damaged file compiles, or is one ConfigError naming a file of the trace; never another exception."""
    files = _small_files(tmp_path)
    data = files[rank].read_bytes()
    i = int(at * len(data))
    data = {"flip": data[:i] + bytes([data[i] ^ (byte or 1)]) + data[i + 1:], "cut": data[:i],
            "insert": data[:i] + bytes([byte]) + data[i:]}[op]
    files[rank].write_bytes(data)
    try:
        trace = read_trace(tmp_path / "p")
        build_trace(trace, range(4))
    except ConfigError as exc:
        assert exc.file and "p." in exc.file and "Traceback" not in str(exc)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rank=st.integers(0, 7), index=st.integers(1, 3), change=st.sampled_from(["delete", "size", "type"]))
def test_a_call_changed_on_one_rank_is_refused(tmp_path, rank, index, change):
    """Deleting a collective, send or receive of one rank (its dependants rewired), or changing its size
    or kind, never runs: the other ranks' calls have lost their match."""
    ranks = _shipped_ranks()
    node = ranks[rank][index]
    if change == "delete":
        del ranks[rank][index]
        ranks[rank][index].ClearField("ctrl_deps")
        ranks[rank][index].ctrl_deps.extend(node.ctrl_deps)
    elif change == "size":
        size = next(a for a in node.attr if a.name == "comm_size")
        size.int64_val += 1
    else:
        node.type = pb.NODE_TYPES["COMP_NODE"]
    write_trace(tmp_path / "m", ranks)
    with pytest.raises(ConfigError) as err:
        build_trace(read_trace(tmp_path / "m"), range(8))
    assert err.value.file and ".et" in err.value.file


def test_the_docs_state_what_the_shipped_trace_runs():
    """docs/traces.md's numbers for experiments/chakra-tp-dp.yaml are what it runs (ECMP, and sprayed)."""
    import re
    from pathlib import Path

    from netsim.config import load_experiment
    from netsim.experiment.results import collectives_frame, jobs_frame
    from netsim.experiment.sweep import expand

    root = Path(__file__).resolve().parents[1]
    text = " ".join((root / "docs/traces.md").read_text().split())
    found = re.search(r"takes ([\d.]+) ms under ECMP against an ideal of ([\d.]+) ms \(slowdown ([\d.]+)\).*?"
                      r"runs at its ideal \(([\d.]+) ms, ([\d.]+)\).*?The whole step takes ([\d.]+) ms under ECMP "
                      r"and ([\d.]+) ms sprayed", text)
    assert found, "docs/traces.md no longer states the example's numbers"
    numbers = [float(x) for x in found.groups()]
    out = []
    for routing in ([], ["routing=spray"]):
        (run,) = expand(load_experiment(root / "experiments/chakra-tp-dp.yaml", routing))
        result = run_experiment(run.spec)
        dp = collectives_frame(result).query("label == 'dp_allreduce'").iloc[0]
        step = jobs_frame(result).iteration_time_s.iloc[0]
        out.append((dp.duration_s * 1e3, dp.ideal_s * 1e3, dp.slowdown, step * 1e3))
    (ecmp, ideal, slow, step), (spray, _, spray_slow, spray_step) = out
    expected = [ecmp, ideal, slow, spray, spray_slow, step, spray_step]
    assert numbers == pytest.approx(expected, abs=0.006), (numbers, expected)

"""Bad-input cases: Chakra execution traces (``workload: {type: chakra}``; see tests/badinputs/files/__init__.py).

Hand-written cases cover each check of :mod:`netsim.workload.chakra` (the rank files, the framing and
schema, limits, dependencies, matched calls and messages, deadlocks, the workload's ``groups``,
``ranks`` and ``ops_per_s``); generated ones mutate the shipped trace (experiments/traces/chakra-tp-dp/)
and a small trace made here, with a fixed seed, at the byte level (any outcome but a clean error or
success is a defect) and at the node level (a mutation known to break the trace must be refused).
Each case runs ``netsim run exp.yaml`` on the 8-GPU fabric of experiments/chakra-tp-dp.yaml.
"""

from __future__ import annotations

import copy
import os
import zlib
from pathlib import Path

import numpy as np
import yaml

from netsim.workload import chakra_proto as pb
from tests.badinputs.harness import REPO, Case, Outcome

KIND = "chakra"
ERROR = frozenset({"error"})
OK = frozenset({"ok"})
EITHER = frozenset({"ok", "error"})
SHIPPED = REPO / "experiments" / "traces" / "chakra-tp-dp"
EXPERIMENT = yaml.safe_load((REPO / "experiments" / "chakra-tp-dp.yaml").read_text())
MiB = 2**20


# ---------------------------------------------------------------------------------- building blocks
def experiment(path: str = "t/trace", **workload) -> str:
    """The shipped experiment, its workload reading ``path`` with ``workload`` keys added."""
    data = copy.deepcopy(EXPERIMENT)
    data["workload"] = {"type": "chakra", "path": path, **workload}
    return yaml.safe_dump(data, sort_keys=False)


def encode(nodes, meta=None) -> bytes:
    """One rank file: ``meta`` (default netsim's GlobalMetadata) then ``nodes``."""
    return pb.encode_stream([meta if meta is not None else pb.GlobalMetadata(version="0.0.4"), *nodes])


def decode(data: bytes) -> list:
    """The Node messages of a rank file."""
    return [pb.Node.FromString(bytes(raw)) for _, raw in list(pb.split_stream(data))[1:]]


def shipped_nodes() -> list[list]:
    """The shipped trace's nodes, per rank."""
    return [decode((SHIPPED / f"trace.{r}.et").read_bytes()) for r in range(8)]


def files_of(ranks: list[list], prefix: str = "t/trace") -> dict[str, bytes]:
    return {f"{prefix}.{r}.et": encode(nodes) for r, nodes in enumerate(ranks)}


def small_nodes() -> list[list]:
    """A 4-rank trace made here: compute, a global allreduce, pairwise allgathers, a ring of messages."""
    ranks = []
    for r in range(4):
        nodes = [pb.comp_node(0, 20 + r, name="fwd"), pb.coll_node(1, "allreduce", 4 * MiB, deps=[0]),
                 pb.coll_node(2, "allgather", MiB, deps=[1], pg_name=f"pair{r // 2}"),
                 pb.send_node(3, r, (r + 1) % 4, MiB // 2, tag=7, deps=[2]),
                 pb.recv_node(4, (r - 1) % 4, r, MiB // 2, tag=7, deps=[2]),
                 pb.comp_node(5, 10, deps=[3, 4], name="bwd")]
        ranks.append(nodes)
    return ranks


def case(name: str, files: dict, expect=ERROR, check=None, workload: dict | None = None, path: str = "t/trace",
         **kw) -> Case:
    """``netsim run exp.yaml`` on ``files`` (a trace under ``t/``)."""
    files = {**files, "exp.yaml": experiment(path, **(workload or {}))}
    return Case(name, KIND, ["run", "exp.yaml", "--out", "res", "--no-report"], files, expect=expect, check=check,
                **kw)


def says(*parts: str):
    """A check: the message holds every one of ``parts`` and no results folder was written."""
    def check(cwd: Path, outcome: Outcome) -> str:
        if outcome.outcome != "error":
            return ""
        text = " ".join(outcome.stderr.split())
        missing = [p for p in parts if p not in text]
        if missing:
            return f"message lacks {missing}: {text[:300]}"
        return "a results folder was written" if (cwd / "res").exists() else ""
    return check


def names_a_file(cwd: Path, outcome: Outcome) -> str:
    """A check for generated cases: an error names a rank file (or the trace's prefix) and writes nothing."""
    if outcome.outcome != "error":
        return ""
    text = " ".join(outcome.stderr.split())
    if ".et" not in text and "t/trace" not in text:
        return f"the message names no trace file: {text[:300]}"
    return "a results folder was written" if (cwd / "res").exists() else ""


def with_node(ranks: list[list], rank: int, index: int, change) -> list[list]:
    """``ranks`` with ``change(node)`` applied to a copy of node ``index`` of ``rank``."""
    ranks = [list(nodes) for nodes in ranks]
    node = pb.Node()
    node.CopyFrom(ranks[rank][index])
    change(node)
    ranks[rank][index] = node
    return ranks


def set_attr(name: str, value, kind: str | None = None):
    def change(node):
        kept = [a for a in node.attr if a.name != name]
        del node.attr[:]
        node.attr.extend(kept)
        node.attr.append(pb.make_attr(name, value, kind))
    return change


def symlink(name: str, target: str):
    def setup(cwd: Path) -> None:
        os.symlink(target, cwd / name)
    return setup


# ---------------------------------------------------------------------------------- hand-written
def _file_cases() -> list[Case]:
    ship = files_of(shipped_nodes())
    without = lambda *names: {k: v for k, v in ship.items() if k not in names}  # noqa: E731
    meta_as_node = encode([pb.comp_node(0, 5)], meta=pb.comp_node(9, 1))
    return [
        case("the shipped trace", ship, OK),
        case("rank 3's file missing", without("t/trace.3.et"), check=says("trace.3.et not found", "every rank")),
        case("rank 0's file missing", without("t/trace.0.et"), check=says("trace.0.et not found")),
        case("last rank's file missing (7 ranks left)", without("t/trace.7.et"), check=says("is trace.7.et missing?")),
        case("a file past a gap (trace.9.et)", {**ship, "t/trace.9.et": ship["t/trace.0.et"]},
             check=says("trace.8.et not found")),
        case("a rank written twice (trace.01.et)", {**ship, "t/trace.01.et": ship["t/trace.1.et"]},
             check=says("trace.01.et", "leading zeros")),
        case("a rank number past the GPU limit", {**ship, "t/trace.99999999.et": ship["t/trace.1.et"]},
             check=says("trace.99999999.et", "largest rank")),
        case("ranks: 4 with 8 files", ship, workload={"ranks": 4}, check=says("ranks is 4", "8 rank files")),
        case("ranks: 9 with 8 files", ship, workload={"ranks": 9}, check=says("9")),
        case("no file at all", {"t/other.txt": "x"}, check=says("no trace files", "trace.0.et")),
        case("path names the folder", ship, path="t", check=says("a directory", "prefix")),
        case("a rank file is a directory", without("t/trace.2.et"), setup=lambda cwd: (cwd / "t/trace.2.et").mkdir(),
             check=says("trace.2.et", "directory")),
        case("a rank file is a symlink to /dev/zero", without("t/trace.2.et"),
             setup=symlink("t/trace.2.et", "/dev/zero"), check=says("trace.2.et", "not a regular file")),
        case("a rank file is a dangling symlink", without("t/trace.2.et"), setup=symlink("t/trace.2.et", "nowhere"),
             check=says("trace.2.et", "symlink to a missing file")),
        case("a rank file is a symlink loop", without("t/trace.2.et"), setup=symlink("t/trace.2.et", "trace.2.et"),
             check=says("trace.2.et", "symlink loop")),
        case("a rank file of 300 MiB", without("t/trace.2.et"),
             setup=lambda cwd: os.truncate(_touch(cwd / "t/trace.2.et"), 300 * MiB), check=says("trace.2.et",
                                                                                               "too large")),
        case("an empty rank file", {**ship, "t/trace.2.et": b""}, check=says("trace.2.et", "empty trace file")),
        case("a rank file cut in half", {**ship, "t/trace.2.et": ship["t/trace.2.et"][:150]},
             check=says("trace.2.et", "not a Chakra ET file")),
        case("a rank file cut after one byte", {**ship, "t/trace.2.et": ship["t/trace.2.et"][:1]},
             check=says("trace.2.et")),
        case("a JSON rank file", {**ship, "t/trace.2.et": b'{"nodes": [{"id": 1, "type": "COMP_NODE"}]}\n'},
             check=says("trace.2.et")),
        case("a varint length of 11 bytes", {**ship, "t/trace.2.et": b"\xff" * 11 + b"\x01"},
             check=says("trace.2.et", "too long")),
        case("a length of 2**62 bytes", {**ship, "t/trace.2.et": pb._varint(2**62) + b"\x00" * 8},
             check=says("trace.2.et", "claims")),
        case("random bytes", {**ship, "t/trace.2.et": np.random.default_rng(7).bytes(4000)}, check=says("trace.2.et")),
        case("no GlobalMetadata (a Node first)", {**ship, "t/trace.2.et": meta_as_node},
             check=says("trace.2.et", "GlobalMetadata")),
    ]


def _touch(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def _node_cases() -> list[Case]:
    ship = shipped_nodes()
    tail = lambda nodes: [pb.Node.FromString(n.SerializeToString()) for n in nodes]  # noqa: E731
    dp_as_comp = with_node(ship, 6, 2, lambda n: (n.ClearField("attr"), setattr(n, "type", pb.NODE_TYPES["COMP_NODE"])))
    dp_deleted = [list(nodes) for nodes in ship]
    dp_deleted[6] = tail(dp_deleted[6][:2] + dp_deleted[6][3:])
    dp_deleted[6][2].ClearField("ctrl_deps")
    dp_deleted[6][2].ctrl_deps.append(1)
    huge = pb.comp_node(0, 0, num_ops=2**62)
    wrong_wire = encode([]) + pb._varint(5) + b"\x18\x04\x0a\x01\x41"  # a COMP_NODE, field 1 (id) a string
    unknown_field = encode([]) + pb._varint(5) + b"\x18\x04\xa8\x06\x01"  # a COMP_NODE with field 101 = 1
    storage = pb.comp_node(0, 5)
    storage_bytes = encode([]) + pb._varint(len(storage.SerializeToString()) + 3) + storage.SerializeToString() + \
        b"\x5a\x01\x00"
    one = lambda nodes: {"t/trace.0.et": encode(nodes), "t/trace.1.et": encode(nodes)}  # noqa: E731
    return [
        case("rank 6 lacks the DP allreduce (a compute node instead)", files_of(dp_as_comp),
             check=says("trace.6.et", "rank 6", "process group")),
        case("rank 6 lacks the DP allreduce (node deleted, deps rewired)", files_of(dp_deleted),
             check=says("trace.6.et", "rank 6")),
        case("rank 6 lacks the DP allreduce, groups give dp's members", files_of(dp_as_comp),
             workload={"groups": {"dp": list(range(8))}}, check=says("no match on rank 6")),
        case("DP allreduce of another size on rank 5",
             files_of(with_node(ship, 5, 2, set_attr("comm_size", 32 * MiB))),
             check=says("trace.5.et", "node 2", "33,554,432 bytes", "67,108,864 bytes")),
        case("DP allgather on rank 5 where the others allreduce",
             files_of(with_node(ship, 5, 2, set_attr("comm_type", pb.COLLECTIVE_TYPES["ALL_GATHER"]))),
             check=says("trace.5.et", "ALL_GATHER")),
        case("compute nodes only", one([pb.comp_node(0, 5), pb.comp_node(1, 7, deps=[0])]), OK),
        case("compute nodes only, one rank", {"t/trace.0.et": encode([pb.comp_node(0, 5)])}, OK),
        case("zero-duration nodes only", one([pb.comp_node(0, 0), pb.comp_node(1, 0, deps=[0])]), OK),
        case("a barrier without comm_size", one([pb.coll_node(0, "BARRIER", 0)]), OK),
        case("2**62 ops at 1e-300 ops/s", one([huge]), workload={"ops_per_s": 1e-300},
             check=says("trace.0.et", "node 0", "num_ops", "1e+06 s")),
        case("duration_micros 2**64-1", one([pb.comp_node(0, 2**64 - 1)]),
             check=says("trace.0.et", "node 0", "duration_micros")),
        case("durations adding up past 1e6 s", one([pb.comp_node(i, 9 * 10**11) for i in range(2)]),
             check=says("trace.0.et", "add up")),
        case("num_ops NaN", one([pb.comp_node(0, 0, num_ops=float("nan"))]), workload={"ops_per_s": 1e12},
             check=says("num_ops nan")),
        case("num_ops negative", one([pb.comp_node(0, 0, num_ops=-5)]), check=says("num_ops -5")),
        case("num_ops a string", one([pb.comp_node(0, 0, num_ops="many")]), check=says("num_ops", "string_val")),
        case("comm_size missing", files_of(with_node(ship, 0, 1, _drop_attr("comm_size"))),
             check=says("trace.0.et", "node 1", "comm_size is missing")),
        case("comm_size 2**62", files_of([[*_sized(n, 2**62)] for n in ship]), check=says("comm_size", "2**60")),
        case("comm_size a double", files_of(with_node(ship, 0, 1, set_attr("comm_size", 1024.0))),
             check=says("comm_size", "double_val", "integer")),
        case("comm_size a bool", files_of(with_node(ship, 0, 1, set_attr("comm_size", True))),
             check=says("comm_size", "bool_val")),
        case("comm_type 99", files_of(with_node(ship, 0, 1, set_attr("comm_type", 99))),
             check=says("comm_type 99", "supported")),
        case("GATHER", one([pb.coll_node(0, "GATHER", 10)]), check=says("GATHER", "not supported")),
        case("pg_name an integer", files_of(with_node(ship, 0, 1, set_attr("pg_name", 3))),
             check=says("pg_name", "string")),
        case("comm_size given twice", files_of(with_node(ship, 0, 1, lambda n: n.attr.append(
            pb.make_attr("comm_size", 5)))), check=says("comm_size is given twice")),
        case("a send without its receive", files_of(with_node(ship, 4, 3, lambda n: setattr(
            n, "type", pb.NODE_TYPES["COMP_NODE"]))), check=says("trace.0.et", "no matching receive")),
        case("a receive of another size", files_of(with_node(ship, 5, 3, set_attr("comm_size", 5, "int64_val"))),
             check=says("trace.5.et", "receives 5 bytes")),
        case("a send to itself", files_of(with_node(ship, 0, 3, set_attr("comm_dst", 0, "int32_val"))),
             check=says("comm_dst 0", "another rank")),
        case("a send to rank 8 of 8", files_of(with_node(ship, 0, 3, set_attr("comm_dst", 8, "int32_val"))),
             check=says("comm_dst 8", "0..7")),
        case("a send whose comm_src is another rank",
             files_of(with_node(ship, 0, 3, set_attr("comm_src", 2, "int32_val"))),
             check=says("comm_src 2", "this file's rank")),
        case("a receive without comm_src", files_of(with_node(ship, 4, 3, _drop_attr("comm_src"))),
             check=says("comm_src is missing")),
        case("each rank receives before it sends",
             {"t/trace.0.et": encode([pb.recv_node(0, 1, 0, 10), pb.send_node(1, 0, 1, 10, deps=[0])]),
              "t/trace.1.et": encode([pb.recv_node(0, 0, 1, 10), pb.send_node(1, 1, 0, 10, deps=[0])])},
             check=says("deadlock")),
        case("collectives in crossed orders",
             {"t/trace.0.et": encode([pb.coll_node(0, "allreduce", 8, pg_name="a"),
                                      pb.coll_node(1, "allreduce", 8, pg_name="b", deps=[0])]),
              "t/trace.1.et": encode([pb.coll_node(0, "allreduce", 8, pg_name="b"),
                                      pb.coll_node(1, "allreduce", 8, pg_name="a", deps=[0])])},
             check=says("deadlock")),
        case("a dependency cycle", files_of(with_node(ship, 3, 0, lambda n: n.ctrl_deps.append(4))),
             check=says("trace.3.et", "cycle")),
        case("a dependency on a missing node", files_of(with_node(ship, 3, 4, lambda n: n.data_deps.append(77))),
             check=says("trace.3.et", "node 4", "node 77")),
        case("a node depending on itself", files_of(with_node(ship, 3, 4, lambda n: n.ctrl_deps.append(4))),
             check=says("trace.3.et", "itself")),
        case("a node id used twice", files_of(with_node(ship, 3, 4, lambda n: setattr(n, "id", 3))),
             check=says("trace.3.et", "used twice")),
        case("node type INVALID_NODE", files_of(with_node(ship, 3, 4, lambda n: setattr(n, "type", 0))),
             check=says("trace.3.et", "node type 0")),
        case("node type 42", files_of(with_node(ship, 3, 4, lambda n: setattr(n, "type", 42))),
             check=says("trace.3.et", "node type 42")),
        case("a node field of the wrong wire type", {**files_of(ship), "t/trace.3.et": wrong_wire},
             check=says("trace.3.et", "wrong wire type")),
        case("a node field not in the schema", {**files_of(ship), "t/trace.3.et": unknown_field},
             check=says("trace.3.et", "field 101")),
        case("a node with a storage field (11)", one([]) | {"t/trace.1.et": storage_bytes,
                                                             "t/trace.0.et": encode([pb.comp_node(0, 5)])}, OK),
        case("a node name of 5,000 characters",
             files_of(with_node(ship, 3, 4, lambda n: setattr(n, "name", "x" * 5000))),
             check=says("5,000 characters")),
        case("groups names a group no node uses", files_of(ship), workload={"groups": {"dq": [0, 1]}},
             check=says("dq", "no collective")),
        case("groups names rank 9 of 8", files_of(ship), workload={"groups": {"dp": list(range(7)) + [9]}},
             check=says("rank 9")),
        case("groups leaves out a rank that uses it", files_of(ship), workload={"groups": {"dp": list(range(7))}},
             check=says("trace.7.et", "not a member")),
        *_group_cases(),
        case("a trace of 3 ranks on 8 GPUs", files_of([[pb.comp_node(0, r), pb.coll_node(1, "allreduce", MiB, deps=[0])]
                                                       for r in range(3)]), OK),
        case("the small trace", files_of(small_nodes()), OK),
        case("16 ranks on 8 GPUs", files_of([[pb.comp_node(0, 1)]] * 16), check=says("16")),
        case("1,000,001 nodes", {}, setup=_many_nodes, check=says("1,000,000 nodes"), timeout=240),
    ]


def _group_cases() -> list[Case]:
    """A group on two ranks only (an embedding group): refused unless ``groups`` declares it."""
    ranks = small_nodes()
    for r in (0, 3):
        ranks[r] = ranks[r] + [pb.coll_node(9, "allreduce", MiB, deps=[5], pg_name="emb")]
    return [case("a group used by ranks 0 and 3 only", files_of(ranks), check=says("process group", "groups")),
            case("a group used by ranks 0 and 3 only, declared", files_of(ranks),
                 workload={"groups": {"emb": [0, 3]}}, expect=OK)]


def _many_nodes(cwd: Path) -> None:
    """One rank file of 1,000,001 compute nodes (made here: too slow to build at import)."""
    node = pb.Node(type=pb.NODE_TYPES["COMP_NODE"])
    frames = []
    for i in range(1_000_001):
        node.id = i
        raw = node.SerializeToString()
        frames += [pb._varint(len(raw)), raw]
    (cwd / "t").mkdir(exist_ok=True)
    (cwd / "t/trace.0.et").write_bytes(encode([]) + b"".join(frames))


def _drop_attr(name: str):
    def change(node):
        kept = [a for a in node.attr if a.name != name]
        del node.attr[:]
        node.attr.extend(kept)
    return change


def _sized(nodes: list, size: int) -> list:
    out = []
    for n in nodes:
        n = pb.Node.FromString(n.SerializeToString())
        if n.type == pb.NODE_TYPES["COMM_COLL_NODE"]:
            set_attr("comm_size", size)(n)
        out.append(n)
    return out


# ---------------------------------------------------------------------------------- generated
#: Mutations per source trace and level.
PER_SOURCE = 12


def _rng(label: str, i: int) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(label.encode()), i])


def byte_mutation(data: bytes, rng: np.random.Generator) -> tuple[str, bytes]:
    """(what was done, the mutated file): flip, insert or delete bytes, truncate, or repeat a slice."""
    op = int(rng.integers(5))
    at = int(rng.integers(len(data)))
    if op == 0:
        return f"flip byte {at}", data[:at] + bytes([data[at] ^ int(rng.integers(1, 256))]) + data[at + 1:]
    if op == 1:
        return f"insert a byte at {at}", data[:at] + bytes([int(rng.integers(256))]) + data[at:]
    if op == 2:
        n = int(rng.integers(1, 8))
        return f"delete {n} bytes at {at}", data[:at] + data[at + n:]
    if op == 3:
        return f"truncate at {at}", data[:at]
    n = int(rng.integers(1, 40))
    return f"repeat {n} bytes at {at}", data[:at + n] + data[at:]


def node_mutation(ranks: list[list], rng: np.random.Generator) -> tuple[str, list[list], bool]:
    """(what was done, the mutated trace, whether it must be refused) for one node of one rank."""
    ranks = [[pb.Node.FromString(n.SerializeToString()) for n in nodes] for nodes in ranks]
    r = int(rng.integers(len(ranks)))
    i = int(rng.integers(len(ranks[r])))
    node = ranks[r][i]
    comm = node.type in (pb.NODE_TYPES[k] for k in ("COMM_COLL_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE"))
    op = int(rng.integers(6))
    if op == 0:
        del ranks[r][i]
        for other in ranks[r]:  # rewire: what waited for it waits for what it waited for
            if node.id in other.ctrl_deps:
                kept = [d for d in other.ctrl_deps if d != node.id] + list(node.ctrl_deps)
                del other.ctrl_deps[:]
                other.ctrl_deps.extend(dict.fromkeys(kept))
        return f"delete node {node.id} of rank {r}", ranks, comm
    if op == 1 and comm:
        size = next((pb.attr_value(a) for a in node.attr if a.name == "comm_size"), 0)
        set_attr("comm_size", size + 1 + int(rng.integers(1000)))(node)
        return f"change comm_size of node {node.id} of rank {r}", ranks, True
    if op == 2:
        later = [n.id for n in ranks[r][i + 1:]]
        if later:
            node.ctrl_deps.append(later[-1])
            return f"node {node.id} of rank {r} waits for a later node", ranks, False
    if op == 3:
        node.id = ranks[r][(i + 1) % len(ranks[r])].id
        return f"node {node.id} of rank {r} takes another's id", ranks, len(ranks[r]) > 1
    if op == 4:
        node.duration_micros = [0, 2**40, 2**63, 2**64 - 1][int(rng.integers(4))]
        return f"duration of node {node.id} of rank {r}", ranks, node.duration_micros > 10**12
    ranks[r].insert(i, pb.Node.FromString(node.SerializeToString()))
    return f"node {node.id} of rank {r} written twice", ranks, True


def _generated() -> list[Case]:
    cases = []
    for label, ranks in (("shipped", shipped_nodes()), ("small", small_nodes())):
        files = files_of(ranks)
        for i in range(PER_SOURCE):
            rng = _rng(f"bytes-{label}", i)
            name = sorted(files)[int(rng.integers(len(files)))]
            what, data = byte_mutation(files[name], rng)
            cases.append(case(f"{label}: {Path(name).name}: {what}", {**files, name: data}, EITHER,
                              check=names_a_file))
        for i in range(PER_SOURCE):
            what, mutated, bad = node_mutation(ranks, _rng(f"nodes-{label}", i))
            cases.append(case(f"{label}: {what}", files_of(mutated), ERROR if bad else EITHER, check=names_a_file))
    return cases


def cases() -> list:
    """This surface's cases."""
    return [*_file_cases(), *_node_cases(), *_generated()]

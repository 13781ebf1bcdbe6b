"""MLCommons Chakra execution traces (ET): read and check them, and compile one into a netsim schedule.

A trace is one file per rank, ``<prefix>.<rank>.et`` (the layout ASTRA-sim reads), each a
``GlobalMetadata`` message and then ``Node`` messages (:mod:`netsim.workload.chakra_proto`).
:func:`read_trace` reads the files and checks each one and their agreement; :func:`build_trace`
turns the nodes of all ranks into one :class:`~netsim.engine.model.Schedule`:

* ``COMP_NODE``: a DELAY of ``duration_micros``; when that is 0, ``num_ops / ops_per_s`` when the
  node has a ``num_ops`` attribute and ``ops_per_s`` is given; else nothing (a JOIN).
* ``COMM_COLL_NODE``: a netsim collective (``comm_type`` -> op, ``comm_size`` -> ``size_bytes`` in
  nccl-tests terms; the algorithm per op from ``algorithms``, default :data:`DEFAULT_ALGORITHMS`)
  over its process group (``pg_name``), built with the algorithm's builder and per-rank ``ready``
  (each rank enters when its own dependencies are done). The k-th collective node of a process
  group in each member's file (file order) is the same call, as ASTRA-sim matches them; members
  must agree on type and size. A group's members are ``groups[pg_name]`` when given, else the
  ranks whose files hold collectives on it (an empty ``pg_name``: every rank); inferred groups
  must give every rank as many groups as the others (a file that lacks a group's collectives is
  refused, not run on fewer ranks). ``BARRIER`` is an allreduce of its ``comm_size`` (default 0);
  ``REDUCE_SCATTER_BLOCK`` a reduce-scatter; ``GATHER`` and ``SCATTER`` are refused.
* ``COMM_SEND_NODE`` / ``COMM_RECV_NODE``: one message of the send's ``comm_size`` from its rank to
  ``comm_dst``; the k-th send from a to b with tag t matches the k-th receive on b from a with tag
  t (file order), and their sizes agree. The send is done when the message has arrived; the
  receive when its own dependencies are done and the message has arrived (eager sends).
  Point-to-point messages use their own communicator's connections.
* Memory, metadata and the other node types: a DELAY of their ``duration_micros`` (a JOIN when 0).

``ctrl_deps`` and ``data_deps`` are both kept as dependencies. Every check (the files of ranks
0..N-1 and no others, framing, schema, limits, dependencies, matched calls and messages, deadlocks
across ranks) runs before anything is simulated; a failure is one
:class:`~netsim.errors.ConfigError` naming the file, the node id, what was found and what is allowed.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from netsim.collectives.base import build_call
from netsim.collectives.nccl import FLUID, CallSettings, CollectiveModel
from netsim.collectives.nccl_tuning import CallProtocol
from netsim.engine.model import Schedule, ScheduleBuilder
from netsim.errors import ConfigError, shorten
from netsim.inputfile import read_bytes
from netsim.spectypes import MAX_GPUS, MAX_SIZE_BYTES, MAX_TIME_S
from netsim.workload import chakra_proto as pb
from netsim.workload.chakra_proto import (  # noqa: F401  (the writer, re-exported)
    COLLECTIVE_TYPES,
    NODE_TYPES,
    coll_node,
    comp_node,
    recv_node,
    send_node,
    write_trace,
)

#: Chakra ``CollectiveCommType`` -> netsim op.
COMM_OPS = pb.COMM_OPS
#: Algorithm per op unless configured.
DEFAULT_ALGORITHMS = {"allreduce": "auto", "reduce_scatter": "auto", "allgather": "auto", "broadcast": "auto",
                      "reduce": "auto", "alltoall": "auto"}
_TYPE_NAMES = {v: k for k, v in NODE_TYPES.items()}
_COMM_NAMES = {v: k for k, v in COLLECTIVE_TYPES.items()}
COMP, SEND_NODE, RECV_NODE, COLL = (NODE_TYPES[k] for k in ("COMP_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE",
                                                             "COMM_COLL_NODE"))
#: Largest rank file read (bytes): a guard against pointing the reader at the wrong thing.
MAX_FILE_BYTES = 256 * 2**20
#: Most nodes in a whole trace (all files), and dependencies (ctrl + data) over all its nodes.
MAX_NODES = 1_000_000
MAX_DEPS = 10_000_000
#: Most tasks a trace compiles to (its collectives expanded by their algorithms).
MAX_TASKS = 20_000_000
#: Longest node name (characters): it becomes a collective's label in the results.
MAX_NAME_CHARS = 1_024
#: Longest node duration, and the longest sum of one rank's durations: the experiment file's longest time.
MAX_DURATION_US = int(MAX_TIME_S * 1e6)
#: ``Node`` fields a reader may leave unread (11: storage operations, not in netsim's schema).
_SKIPPED_FIELDS = {11}
_INT_KINDS = {f"{k}_val" for k in ("int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
                                   "sfixed32", "sfixed64")}
_NUMBER_KINDS = _INT_KINDS | {"double_val", "float_val"}
#: The attributes netsim reads, per node type: (name, required, kinds allowed).
_ATTRS = {
    COMP: (("num_ops", False, _NUMBER_KINDS),),
    COLL: (("comm_type", True, _INT_KINDS), ("comm_size", False, _INT_KINDS), ("pg_name", False, {"string_val"})),
    SEND_NODE: (("comm_dst", True, _INT_KINDS), ("comm_src", False, _INT_KINDS), ("comm_size", True, _INT_KINDS),
                ("comm_tag", False, _INT_KINDS)),
    RECV_NODE: (("comm_src", True, _INT_KINDS), ("comm_dst", False, _INT_KINDS), ("comm_size", False, _INT_KINDS),
                ("comm_tag", False, _INT_KINDS)),
}

_WANTED = {kind: {name: (required, kinds) for name, required, kinds in attrs} for kind, attrs in _ATTRS.items()}


@dataclass(frozen=True, slots=True)
class EtNode:
    """One node of a rank's trace, decoded and checked."""

    id: int
    name: str
    type: int
    deps: tuple[int, ...]      #: ctrl_deps then data_deps, duplicates dropped
    duration_s: float
    attrs: dict = field(default_factory=dict)  #: the attributes netsim reads (see :data:`_ATTRS`)

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES.get(self.type, str(self.type))

    @property
    def pg(self) -> str:
        """A collective's process group name (``""``: every rank)."""
        return self.attrs.get("pg_name", "")


@dataclass(frozen=True)
class ChakraTrace:
    """The decoded files of a trace, one entry per rank."""

    files: list[str]
    versions: list[str]
    nodes: list[list[EtNode]]

    @property
    def ranks(self) -> int:
        return len(self.files)


def _node_error(file: str, node, message: str) -> ConfigError:
    """``file: node 7 (COMP_NODE): message``."""
    kind = _TYPE_NAMES.get(node.type, f"type {node.type}")
    return ConfigError(f"node {node.id} ({kind}): {message}", file=file)


# ---------------------------------------------------------------------------------- files
def trace_files(prefix: str | os.PathLike, ranks: int | None = None) -> list[Path]:
    """The files ``<prefix>.0.et`` ... ``<prefix>.<N-1>.et`` of a trace: every rank present once, no gap, no
    file past the last rank; ``ranks``, when given, must be their count."""
    prefix = Path(prefix)
    found = _rank_files(prefix)
    if not found:
        hint = " (a directory: path is the files' prefix, e.g. traces/x/trace for traces/x/trace.0.et)" \
            if prefix.is_dir() else ""
        raise ConfigError(f"no trace files {prefix.name}.0.et, {prefix.name}.1.et, ... found{hint}", file=str(prefix))
    n = max(found) + 1
    missing = [r for r in range(n) if r not in found]
    if missing:
        raise ConfigError(f"trace file {prefix.name}.{missing[0]}.et not found: the trace has files up to "
                          f"{prefix.name}.{n - 1}.et, and every rank 0..{n - 1} needs one"
                          + (f" ({len(missing)} missing)" if len(missing) > 1 else ""),
                          file=f"{prefix}.{missing[0]}.et")
    if ranks is not None and ranks != n:
        first = f"{prefix}.{min(n, ranks)}.et"
        raise ConfigError(f"ranks is {ranks} but the trace has {n} rank files ({prefix.name}.0.et to "
                          f"{prefix.name}.{n - 1}.et)" + (f"; {Path(first).name} not found" if ranks > n else
                                                          "; leave ranks out or set it to the files' count"),
                          file=first if ranks > n else str(prefix))
    return [found[r] for r in range(n)]


def _rank_files(prefix: Path) -> dict[int, Path]:
    """``{rank: file}`` of the ``<prefix>.<rank>.et`` names in the prefix's folder."""
    folder = prefix.parent
    pattern = re.compile(re.escape(prefix.name) + r"\.([0-9]+)\.et", re.ASCII)
    try:
        names = sorted(e.name for e in os.scandir(folder) if pattern.fullmatch(e.name))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot list the trace's folder: {exc.strerror or exc}", file=str(folder)) from None
    found: dict[int, Path] = {}
    for name in names:
        digits = pattern.fullmatch(name).group(1)
        if len(digits) > 1 and digits.startswith("0"):
            raise ConfigError(f"a rank number with a leading zero: ranks are written without leading zeros "
                              f"(e.g. {prefix.name}.1.et), so each rank has one file", file=str(folder / name))
        if len(digits) > len(str(MAX_GPUS)) or int(digits) >= MAX_GPUS:
            raise ConfigError(f"rank {shorten(digits)} is above the largest rank a trace may have "
                              f"({MAX_GPUS - 1:,})", file=str(folder / name))
        rank = int(digits)
        found[rank] = folder / name
    return found


def read_trace(prefix: str | os.PathLike, ranks: int | None = None, *, groups: dict | None = None,
               ops_per_s: float | None = None) -> ChakraTrace:
    """Read and check the trace ``<prefix>.<rank>.et`` (see :func:`trace_files`): each file on its own,
    then their agreement (:func:`check_trace`). ``groups`` and ``ops_per_s`` as the workload gives them
    (``groups=None``: not known yet, the check that needs them is left to :func:`build_trace`)."""
    files = trace_files(prefix, ranks)
    budget = {"nodes": MAX_NODES, "deps": MAX_DEPS}
    versions, nodes = [], []
    for rank, f in enumerate(files):
        version, rank_nodes = _read_file(f, rank, len(files), budget)
        versions.append(version)
        nodes.append(rank_nodes)
    trace = ChakraTrace([str(f) for f in files], versions, nodes)
    check_trace(trace, groups, ops_per_s)
    return trace


def _read_file(path: Path, rank: int, n_ranks: int, budget: dict) -> tuple[str, list[EtNode]]:
    """The version and checked nodes of rank ``rank``'s file; ``budget`` holds the nodes and dependencies left."""
    file = str(path)
    data = read_bytes(path, MAX_FILE_BYTES, "Chakra trace file")
    if not data:
        raise ConfigError("empty trace file (expected a GlobalMetadata message, then nodes)", file=file)
    frames = _frames(data, file)
    version = _metadata(next(frames), file, _text_hint(data))
    nodes, seen = [], set()
    for k, (offset, raw) in enumerate(frames, start=1):
        if len(nodes) >= budget["nodes"]:
            raise ConfigError(f"the trace has more than {MAX_NODES:,} nodes (its files together); at most "
                              f"{MAX_NODES:,}", file=file)
        node = _node(raw, offset, k, file, budget)
        if node.id in seen:
            raise _node_error(file, node, f"node id {node.id} is used twice in the file; ids are unique per file")
        seen.add(node.id)
        _check_attrs(node, rank, n_ranks, file)
        nodes.append(node)
    budget["nodes"] -= len(nodes)
    _check_deps(nodes, file)
    return version, nodes


def _frames(data: bytes, file: str) -> Iterator[tuple[int, memoryview]]:
    """The file's length-delimited messages; a broken framing is a ConfigError."""
    try:
        yield from pb.split_stream(memoryview(data))
    except pb.FramingError as exc:
        raise ConfigError(f"not a Chakra ET file (length-prefixed protobuf messages): {exc}{_text_hint(data)}",
                          file=file) from None


def _text_hint(data: bytes) -> str:
    """A hint for a file that starts like JSON text (Chakra's jsonizer output, say)."""
    return " (it looks like text: netsim reads the binary .et files, not JSON)" if data[:1] in (b"{", b"[") else ""


def _unknown(msg) -> list[tuple[int, int]]:
    """``(field number, wire type)`` of the fields of ``msg`` that its schema does not have."""
    return [(f.field_number, f.wire_type) for f in UnknownFieldSet(msg)]


def _decode(cls, raw, file: str, what):
    """``cls`` parsed from ``raw``; ``what()`` names the message when it does not parse."""
    try:
        return cls.FromString(raw)
    except (DecodeError, RecursionError, ValueError):
        raise ConfigError(f"{what()} does not decode as a Chakra {cls.DESCRIPTOR.name} message (a damaged or "
                          "truncated file?)", file=file) from None


def _metadata(frame: tuple[int, memoryview], file: str, hint: str) -> str:
    meta = _decode(pb.GlobalMetadata, frame[1], file, lambda: f"the first message{hint}")
    unknown = _unknown(meta)
    if unknown:
        raise ConfigError(f"not a Chakra ET file: the first message is not a GlobalMetadata (it has field "
                          f"{unknown[0][0]}, wire type {unknown[0][1]}, which GlobalMetadata has not)", file=file)
    return meta.version


def _node(raw, offset: int, k: int, file: str, budget: dict) -> EtNode:
    """Message ``k`` of the file (at byte ``offset``) as an :class:`EtNode`, its fields checked."""
    msg = _decode(pb.Node, raw, file, lambda: f"message #{k + 1} (at byte {offset:,})")
    if UnknownFieldSet(msg):
        _refuse_unknown(msg, offset, k, file)
    kind, duration = msg.type, msg.duration_micros
    if kind not in _TYPE_NAMES or kind == 0:
        raise ConfigError(f"node {msg.id}: node type {kind} is not a node netsim runs; allowed: "
                          f"{', '.join(f'{n} ({v})' for n, v in NODE_TYPES.items() if v)}", file=file)
    deps = msg.ctrl_deps[:]
    if len(msg.data_deps):
        deps += msg.data_deps[:]
    budget["deps"] -= len(deps)
    if budget["deps"] < 0:
        raise _node_error(file, msg, f"the trace has more than {MAX_DEPS:,} dependencies in all; at most "
                                     f"{MAX_DEPS:,}")
    name = msg.name
    if len(name) > MAX_NAME_CHARS:
        raise _node_error(file, msg, f"its name is {len(name):,} characters long; at most {MAX_NAME_CHARS:,}")
    if duration > MAX_DURATION_US:
        raise _node_error(file, msg, f"duration_micros {duration:,} is above the longest allowed, "
                                     f"{MAX_DURATION_US:,} us ({MAX_TIME_S:g} s)")
    deps = tuple(dict.fromkeys(deps)) if len(deps) > 1 else tuple(deps)
    attrs = _attrs(msg, file) if kind in _ATTRS else {}
    return EtNode(msg.id, name, kind, deps, duration * 1e-6, attrs)


def _refuse_unknown(msg, offset: int, k: int, file: str) -> None:
    """A ConfigError for a field that Chakra's Node has not (bar storage, 11), or of the wrong wire type."""
    unknown = [u for u in _unknown(msg) if u[0] not in _SKIPPED_FIELDS]
    if unknown:
        number, wire = unknown[0]
        known = {f.number: f.name for f in pb.Node.DESCRIPTOR.fields}
        what = f"field {number} ({known[number]}) with the wrong wire type {wire}" if number in known else \
            f"field {number}, which Chakra's Node has not"
        raise ConfigError(f"node {msg.id}: message #{k + 1} (at byte {offset:,}) holds {what}", file=file)


def _attrs(msg, file: str) -> dict:
    """The attributes of ``msg`` that netsim reads for its type, each checked for its kind and given once."""
    wanted = _WANTED[msg.type]
    attrs: dict = {}
    for a in msg.attr if len(msg.attr) else ():
        if a.name not in wanted:
            continue
        if a.name in attrs:
            raise _node_error(file, msg, f"attribute {a.name} is given twice; once")
        kind = a.WhichOneof("value")
        if kind not in wanted[a.name][1]:
            allowed = "a string (string_val)" if "string_val" in wanted[a.name][1] else \
                "a number (an int or double _val)" if "double_val" in wanted[a.name][1] else \
                "an integer (int32_val, int64_val, uint64_val, ...)"
            raise _node_error(file, msg, f"attribute {a.name} is {kind or 'empty'}"
                                         f"{'' if kind is None else f' {shorten(pb.attr_value(a))}'}; "
                                         f"it must be {allowed}")
        attrs[a.name] = getattr(a, kind)
    for name, (required, _) in wanted.items():
        if required and name not in attrs:
            raise _node_error(file, msg, f"attribute {name} is missing (a {_TYPE_NAMES[msg.type]} needs it)")
    return attrs


def _check_attrs(node: EtNode, rank: int, n_ranks: int, file: str) -> None:
    """The values of a node's attributes: in range, and naming ranks of the trace."""
    a = node.attrs
    size = a.get("comm_size", 0)
    if not 0 <= size <= MAX_SIZE_BYTES:
        raise _node_error(file, node, f"comm_size {shorten(size)} is out of range; 0 to 2**60 bytes")
    ops = a.get("num_ops", 0)
    if not (ops >= 0 and math.isfinite(ops)):
        raise _node_error(file, node, f"num_ops {shorten(ops)} must be a finite number >= 0")
    if node.type == COLL:
        name = _COMM_NAMES.get(a["comm_type"])
        if name not in COMM_OPS:
            supported = ", ".join(f"{n} ({COLLECTIVE_TYPES[n]})" for n in COMM_OPS)
            raise _node_error(file, node, f"comm_type {shorten(a['comm_type'])} ({name or 'unknown'}) is not "
                                          f"supported; supported: {supported}")
        if "comm_size" not in a and name != "BARRIER":
            raise _node_error(file, node, f"attribute comm_size is missing: {name} needs its size in bytes")
    if node.type in (SEND_NODE, RECV_NODE):
        own, peer = ("comm_src", "comm_dst") if node.type == SEND_NODE else ("comm_dst", "comm_src")
        if not 0 <= a[peer] < n_ranks or a[peer] == rank:
            stem = Path(file).name.rsplit(".", 2)[0]
            hint = f"; is {stem}.{a[peer]}.et missing?" if n_ranks <= a[peer] < MAX_GPUS else ""
            raise _node_error(file, node, f"{peer} {shorten(a[peer])} must be another rank of the trace "
                                          f"(0..{n_ranks - 1}, not {rank}, this file's rank){hint}")
        if own in a and a[own] != rank:
            raise _node_error(file, node, f"{own} {shorten(a[own])} is not this file's rank ({rank})")


def _check_deps(nodes: list[EtNode], file: str) -> None:
    """Every dependency names a node of the file, and there is no cycle."""
    pos = {n.id: i for i, n in enumerate(nodes)}
    indegree = [0] * len(nodes)
    children: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for d in n.deps:
            if d not in pos:
                raise _node_error(file, n, f"depends on node {d}, which is not in the file")
            if d == n.id:
                raise _node_error(file, n, "depends on itself")
            indegree[i] += 1
            children[pos[d]].append(i)
    queue = [i for i, k in enumerate(indegree) if k == 0]
    done = 0
    while queue:
        i = queue.pop()
        done += 1
        for c in children[i]:
            indegree[c] -= 1
            if not indegree[c]:
                queue.append(c)
    if done < len(nodes):
        stuck = next(nodes[i] for i, k in enumerate(indegree) if k)
        raise _node_error(file, stuck, "its dependencies form a cycle (it waits, through them, for itself)")


# ---------------------------------------------------------------------------------- agreement
def check_trace(trace: ChakraTrace, groups: dict | None = None, ops_per_s: float | None = None) -> None:
    """The files' agreement: each process group's members (:func:`group_members`; the one-group-count rule
    only when ``groups`` is given), the k-th call of a group the same on every member, each send met by
    a receive of the same size, and each rank's durations within the limit."""
    members = group_members(trace, groups if groups is not None else {}, uniform=groups is not None)
    _check_calls(trace, members)
    _check_messages(trace)
    for r in range(trace.ranks):
        _check_time(trace, r, ops_per_s)


def group_members(trace: ChakraTrace, groups: dict, uniform: bool = True) -> dict[str, list[int]]:
    """``{pg_name: ranks}``: ``groups`` for the groups it names, else the ranks whose files use the group
    (``""``: every rank). With ``uniform``, every rank must use as many inferred groups as the others."""
    n = trace.ranks
    users: dict[str, list[int]] = {}
    for r, nodes in enumerate(trace.nodes):
        for node in nodes:
            if node.type == COLL and r not in users.setdefault(node.pg, []):
                users[node.pg].append(r)
    members: dict[str, list[int]] = {}
    for pg, ranks in groups.items():
        pg = str(pg)
        bad = [r for r in ranks if not 0 <= r < n]
        if bad:
            raise ConfigError(f"groups: process group {shorten(pg)} names rank {bad[0]}; the trace has {n} ranks "
                              f"(0..{n - 1})")
        if pg not in users:
            raise ConfigError(f"groups: no collective of the trace uses process group {shorten(pg)}; its groups: "
                              f"{_names(users)}")
        members[pg] = list(ranks)
    for pg, ranks in users.items():
        if pg in members:
            outsider = next((r for r in ranks if r not in members[pg]), None)
            if outsider is not None:
                node = next(x for x in trace.nodes[outsider] if x.type == COLL and x.pg == pg)
                raise _node_error(trace.files[outsider], node, f"rank {outsider} is not a member of process group "
                                                                f"{shorten(pg)} ({members[pg]}, from groups)")
        else:
            members[pg] = list(range(n)) if pg == "" else sorted(ranks)
    if uniform:
        _check_uniform(trace, {pg: m for pg, m in members.items() if pg and pg not in groups})
    return members


def _names(groups) -> str:
    shown = [shorten(g) for g in sorted(groups)[:8]]
    return ", ".join(shown) + (f" and {len(groups) - 8} more" if len(groups) > 8 else "") if shown else "none"


def _check_uniform(trace: ChakraTrace, inferred: dict[str, list[int]]) -> None:
    """Every rank in as many inferred process groups as the others: a rank in fewer lacks a group's
    collectives (its file is incomplete), unless ``groups`` says the groups differ."""
    per_rank: list[list[str]] = [[] for _ in range(trace.ranks)]
    for pg, ranks in inferred.items():
        for r in ranks:
            per_rank[r].append(pg)
    common, _ = Counter(len(g) for g in per_rank).most_common(1)[0]
    odd = next((r for r, g in enumerate(per_rank) if len(g) != common), None)
    if odd is None:
        return
    ref = next(r for r, g in enumerate(per_rank) if len(g) == common)
    raise ConfigError(f"rank {odd} takes part in {len(per_rank[odd])} process group(s) ({_names(per_rank[odd])}) "
                      f"but rank {ref} and most others in {common} ({_names(per_rank[ref])}): the file lacks a "
                      f"group's collectives, or has extra ones; if the groups really differ between ranks, give "
                      f"their members in groups", file=trace.files[odd])


def _check_calls(trace: ChakraTrace, members: dict[str, list[int]]) -> None:
    """The k-th collective of each group is on every member, with the same type and size."""
    calls: dict[str, dict[int, list[EtNode]]] = defaultdict(lambda: defaultdict(list))
    for r, nodes in enumerate(trace.nodes):
        for node in nodes:
            if node.type == COLL:
                calls[node.pg][r].append(node)
    for pg, per_rank in calls.items():
        ranks = members[pg]
        most = max(ranks, key=lambda r: (len(per_rank.get(r, [])), -r))
        for r in ranks:
            mine = per_rank.get(r, [])
            if len(mine) < len(per_rank[most]):
                node = per_rank[most][len(mine)]
                raise _node_error(trace.files[most], node, f"collective #{len(mine)} on process group {shorten(pg)} "
                                  f"has no match on rank {r} ({Path(trace.files[r]).name} has {len(mine)} "
                                  f"collective(s) on that group, {Path(trace.files[most]).name} "
                                  f"{len(per_rank[most])})")
            for k, (a, b) in enumerate(zip(per_rank[ranks[0]], mine)):
                if _call(a) != _call(b):
                    raise _node_error(trace.files[r], b, f"collective #{k} on process group {shorten(pg)} is "
                                      f"{_shown(b)} but on rank {ranks[0]} (node {a.id} of "
                                      f"{Path(trace.files[ranks[0]]).name}) {_shown(a)}; every member makes the "
                                      f"same call")


def _call(node: EtNode) -> tuple[int, int]:
    return node.attrs["comm_type"], node.attrs.get("comm_size", 0)


def _shown(node: EtNode) -> str:
    kind, size = _call(node)
    return f"{_COMM_NAMES.get(kind, kind)} of {size:,} bytes"


def _check_messages(trace: ChakraTrace) -> None:
    """The k-th send from a to b with tag t meets the k-th receive on b from a with tag t; sizes agree."""
    sides: dict[tuple[int, int, int], tuple[list, list]] = defaultdict(lambda: ([], []))
    for r, nodes in enumerate(trace.nodes):
        for node in nodes:
            if node.type in (SEND_NODE, RECV_NODE):
                key, side = _p2p_key(r, node)
                sides[key][side].append((r, node))
    for (src, dst, tag), (sends, recvs) in sides.items():
        for k, ((_, s), (r, v)) in enumerate(zip(sends, recvs)):
            if "comm_size" in v.attrs and v.attrs["comm_size"] != s.attrs["comm_size"]:
                raise _node_error(trace.files[r], v, f"receives {v.attrs['comm_size']:,} bytes but the matching "
                                  f"send (node {s.id} of {Path(trace.files[src]).name}, message #{k} {src}->{dst} "
                                  f"tag {tag}) sends {s.attrs['comm_size']:,}")
        if len(sends) != len(recvs):
            extra, other = (sends, "receive") if len(sends) > len(recvs) else (recvs, "send")
            k = min(len(sends), len(recvs))
            r, node = extra[k]
            raise _node_error(trace.files[r], node, f"message #{k} {src}->{dst} tag {tag} has no matching {other} "
                              f"({len(sends)} send(s), {len(recvs)} receive(s) of {src}->{dst} tag {tag})")


def _p2p_key(r: int, node: EtNode) -> tuple[tuple[int, int, int], int]:
    """``((src, dst, tag), 0 for a send / 1 for a receive)``."""
    tag = node.attrs.get("comm_tag", 0)
    if node.type == SEND_NODE:
        return (r, node.attrs["comm_dst"], tag), 0
    return (node.attrs["comm_src"], r, tag), 1


def _seconds(node: EtNode, ops_per_s: float | None) -> float:
    """What a non-communication node costs: ``duration_micros``, else ``num_ops / ops_per_s``."""
    if node.type == COMP and not node.duration_s and ops_per_s and node.attrs.get("num_ops"):
        return float(node.attrs["num_ops"]) / ops_per_s
    return node.duration_s


def _check_time(trace: ChakraTrace, r: int, ops_per_s: float | None) -> None:
    """Each node's time and the rank's total within :data:`MAX_TIME_S` (a longer one is a wrong file or
    rate, and would run for ever)."""
    total = 0.0
    for node in trace.nodes[r]:
        if node.type in (COLL, SEND_NODE, RECV_NODE):
            continue  # (their time is the network's; a recorded duration is not used)
        seconds = _seconds(node, ops_per_s)
        if not seconds <= MAX_TIME_S:
            raise _node_error(trace.files[r], node, f"num_ops {shorten(node.attrs['num_ops'])} at ops_per_s "
                              f"{ops_per_s:g} takes {seconds:.3g} s; at most {MAX_TIME_S:g} s a node")
        total += seconds
    if total > MAX_TIME_S:
        raise ConfigError(f"the compute and other non-communication nodes of rank {r} add up to {total:.3g} s; at "
                          f"most {MAX_TIME_S:g} s (about 11.6 days) a rank", file=trace.files[r])


# ---------------------------------------------------------------------------------- compiling
@dataclass
class TraceCall:
    """One collective call of a trace, with the tasks that bound it in the compiled schedule."""

    index: int               #: call number, in the order the calls were built
    op: str
    algorithm: str
    size_bytes: float
    ranks: list[int]         #: the process group's ranks (trace rank ids)
    gpus: list[int]          #: their GPUs
    comm: int
    label: str
    ready: np.ndarray        #: per member, the task it entered after (-1: at the schedule's start)
    ends: np.ndarray         #: per member, the task after which its part of the call is done
    tcp: bool = False
    channels: int = 1
    chunk_bytes: float | None = None
    rails: bool = False
    protocol: CallProtocol | None = None   #: NCCL's protocol and its costs (``None``: none)


@dataclass
class _Rank:
    """Compilation state of one rank: its nodes, what each waits for, and each one's done task."""

    file: str
    nodes: list[EtNode]
    pos: dict[int, int]
    left: list[int]
    children: list[list[int]]
    done: list[int]
    heap: list[int]


def build_trace(trace: ChakraTrace, gpus: Sequence[int], *, algorithms: dict[str, str] | None = None,
                channels: int | str = 1, job: int = 0, groups: dict[str, Sequence[int]] | None = None,
                ops_per_s: float | None = None, gpu_host: Sequence[int] | None = None,
                mixes_fabrics=None, model: CollectiveModel = FLUID,
                gpu_rail: Sequence[int] | None = None, protocol: str = "auto",
                topology=None) -> tuple[Schedule, list[TraceCall]]:
    """Compile ``trace`` (rank ``r`` on ``gpus[r]``) into a schedule and its collective calls (see the module
    docstring for the mapping). ``mixes_fabrics(gpus) -> bool`` marks communicators that talk TCP.
    ``model`` settles each call's algorithm and protocol (``auto``: by its size, from ``topology``'s
    rates, :meth:`CollectiveModel.call`), channels (``auto``), slice and ring order (``gpu_rail``: the
    topology's, when the model puts rings on rails).
    The trace is checked again with ``groups`` and ``ops_per_s`` (:func:`check_trace`) first, and a
    deadlock across ranks or a schedule of more than :data:`MAX_TASKS` tasks is a ConfigError."""
    check_trace(trace, groups or {}, ops_per_s)
    compiler = _Compiler(trace, list(gpus), algorithms or {}, channels, job, groups or {}, ops_per_s, gpu_host,
                         mixes_fabrics, model, gpu_rail, protocol, topology)
    return compiler.run()


def check_trace_files(prefix: str | os.PathLike, ranks: int | None = None, *, groups: dict | None = None,
                      ops_per_s: float | None = None, algorithms: dict[str, str] | None = None,
                      channels: int | str = 1) -> ChakraTrace:
    """Everything a run of the trace would refuse, without a fabric: :func:`read_trace`, then a compile on
    GPUs 0..N-1 (a deadlock across ranks, too many tasks), dropped. For checks before a sweep's first run."""
    trace = read_trace(prefix, ranks, groups=groups or {}, ops_per_s=ops_per_s)
    build_trace(trace, list(range(trace.ranks)), algorithms=algorithms, channels=channels, groups=groups,
                ops_per_s=ops_per_s)
    return trace


class _Compiler:
    """Emits the nodes of all ranks in a global dependency order (a collective once every member has
    reached it, a receive once its send exists) into one :class:`ScheduleBuilder`."""

    def __init__(self, trace, gpus, algorithms, channels, job, groups, ops_per_s, gpu_host, mixes_fabrics,
                 model: CollectiveModel = FLUID, gpu_rail=None, protocol: str = "auto", topology=None):
        if len(gpus) < trace.ranks:
            raise ConfigError(f"the trace has {trace.ranks} ranks but only {len(gpus)} GPUs were placed")
        self.trace, self.gpus, self.channels, self.job = trace, gpus, channels, job
        self.ops_per_s, self.gpu_host, self.mixes = ops_per_s, gpu_host, mixes_fabrics
        self.model, self.gpu_rail = model, (gpu_rail if model.rails else None)
        self.protocol, self.topology = protocol, topology
        self.algorithms = {**DEFAULT_ALGORITHMS, **algorithms}
        self.b = ScheduleBuilder()
        self.calls: list[TraceCall] = []
        self.ranks = [self._rank(trace.files[r], trace.nodes[r]) for r in range(trace.ranks)]
        self.members = group_members(trace, groups)
        self.comms = {pg: i for i, pg in enumerate(sorted(self.members, key=lambda g: (g != "", g)))}
        self.p2p_comm = len(self.comms)
        self.arrived: dict[tuple[str, int], dict[int, tuple[int, int]]] = defaultdict(dict)
        self.sent: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        self.waiting: dict[tuple[int, int, int, int], tuple[int, int]] = {}
        self.seq = self._sequence_numbers()

    @staticmethod
    def _rank(file: str, nodes: list[EtNode]) -> _Rank:
        pos = {n.id: i for i, n in enumerate(nodes)}
        children: list[list[int]] = [[] for _ in nodes]
        for i, n in enumerate(nodes):
            for d in n.deps:
                children[pos[d]].append(i)
        left = [len(n.deps) for n in nodes]
        heap = [i for i, k in enumerate(left) if k == 0]
        heapq.heapify(heap)
        return _Rank(file, nodes, pos, left, children, [-1] * len(nodes), heap)

    def _err(self, rank: int, node: EtNode, message: str) -> ConfigError:
        return _node_error(self.ranks[rank].file, node, message)

    def _sequence_numbers(self) -> list[list[int]]:
        """Per rank and node: k of the k-th collective on its group / the k-th message of its key
        (:func:`check_trace` has checked that they match across ranks)."""
        seq = []
        counts: Counter = Counter()
        for r, st in enumerate(self.ranks):
            ks = [0] * len(st.nodes)
            for i, node in enumerate(st.nodes):
                if node.type == COLL:
                    key = ("coll", node.pg, r)
                elif node.type in (SEND_NODE, RECV_NODE):
                    key = _p2p_key(r, node)
                else:
                    continue
                ks[i] = counts[key]
                counts[key] += 1
            seq.append(ks)
        return seq

    # ------------------------------------------------------------------ emission
    def run(self) -> tuple[Schedule, list[TraceCall]]:
        progress = True
        while progress:
            progress = False
            for r, st in enumerate(self.ranks):
                while st.heap:
                    self._emit(r, heapq.heappop(st.heap))
                    progress = True
                    if self.b.n_tasks > MAX_TASKS:
                        raise ConfigError(f"the trace compiles to more than {MAX_TASKS:,} tasks (its collectives "
                                          f"expanded by their algorithms); at most {MAX_TASKS:,}",
                                          file=str(Path(st.file).parent))
        self._check_finished()
        return self.b.build(), self.calls

    def _after(self, r: int, i: int) -> list[int]:
        st = self.ranks[r]
        return [st.done[st.pos[d]] for d in st.nodes[i].deps]

    def _ready(self, r: int, i: int) -> int:
        after = self._after(r, i)
        return -1 if not after else after[0] if len(after) == 1 else int(self.b.join(after=[after])[0])

    def _finish(self, r: int, i: int, task: int) -> None:
        st = self.ranks[r]
        st.done[i] = task
        for c in st.children[i]:
            st.left[c] -= 1
            if not st.left[c]:
                heapq.heappush(st.heap, c)

    def _emit(self, r: int, i: int) -> None:
        node, b = self.ranks[r].nodes[i], self.b
        if node.type == COLL:
            self._arrive(r, i, node)
        elif node.type == SEND_NODE:
            key, _ = _p2p_key(r, node)
            conn = b.connect(self.gpus[key[0]], self.gpus[key[1]], 0, self.job, self.p2p_comm)
            task = int(b.send(conn, float(node.attrs["comm_size"]), after=[self._after(r, i)])[0])
            self.sent[key].append(task)
            self._finish(r, i, task)
            waiting = self.waiting.pop((*key, len(self.sent[key]) - 1), None)
            if waiting is not None:
                self._receive(*waiting, task)
        elif node.type == RECV_NODE:
            key, _ = _p2p_key(r, node)
            k = self.seq[r][i]
            if k < len(self.sent[key]):
                self._receive(r, i, self.sent[key][k])
            else:
                self.waiting[(*key, k)] = (r, i)
        else:
            seconds = _seconds(node, self.ops_per_s)
            after = [self._after(r, i)]
            task = b.delay(seconds, after=after) if seconds > 0 else b.join(after=after)
            self._finish(r, i, int(task[0]))

    def _receive(self, r: int, i: int, send_task: int) -> None:
        self._finish(r, i, int(self.b.join(after=[self._after(r, i) + [send_task]])[0]))

    def _arrive(self, r: int, i: int, node: EtNode) -> None:
        key = (node.pg, self.seq[r][i])
        self.arrived[key][r] = (i, self._ready(r, i))
        if len(self.arrived[key]) == len(self.members[node.pg]):
            self._collective(node.pg, self.arrived.pop(key))

    def _collective(self, pg: str, arrived: dict[int, tuple[int, int]]) -> None:
        members = self.members[pg]
        node0 = self.ranks[members[0]].nodes[arrived[members[0]][0]]
        kind, size = _call(node0)
        op = COMM_OPS[_COMM_NAMES[kind]]
        gpus = [self.gpus[r] for r in members]
        ready = np.array([arrived[r][1] for r in members], dtype=np.int64)
        tcp = bool(self.mixes(gpus)) if self.mixes is not None and len(gpus) > 1 else False
        comm = self.comms[pg]
        how = self._how(op, float(size), gpus)
        algorithm = how.algorithm
        ends = np.asarray(build_call(self.b, op, algorithm, gpus, float(size), protocol=how.protocol,
                                     channels=how.channels, job=self.job, comm=comm, tcp=tcp, ready=ready,
                                     gpu_host=self.gpu_host,
                                     chunk_bytes=how.slice_bytes(op, algorithm, float(size), len(gpus)),
                                     gpu_rail=self.gpu_rail), dtype=np.int64)
        none = np.flatnonzero(ends < 0)
        if len(none):
            ends[none] = self.b.join(n=len(none))
        label = node0.name or f"{op}/{algorithm}"
        self.calls.append(TraceCall(len(self.calls), op, algorithm, float(size), list(members), gpus, comm, label,
                                    ready, ends, tcp, how.channels, how.slice_bytes(op, algorithm, float(size), len(gpus)),
                                    how.rails, how.protocol))
        for r, end in zip(members, ends.tolist()):
            self._finish(r, arrived[r][0], end)

    def _how(self, op: str, size: float, gpus: list[int]) -> CallSettings:
        """How a call is built: the model's settings with ``auto`` resolved by its size (on the
        topology's rates; without a topology, as on one host)."""
        algorithm = self.algorithms.get(op, DEFAULT_ALGORITHMS[op])
        how = self.model.call(op, algorithm, self.protocol, size, self.channels, None, gpus, self.topology)
        if self.topology is None:   # the GPUs' hosts and rails as given
            how = replace(self.model.settings_on(how.algorithm, self.channels, None, gpus, self.gpu_host,
                                                 self.gpu_rail), algorithm=how.algorithm, protocol=how.protocol)
        return how

    def _check_finished(self) -> None:
        for r, st in enumerate(self.ranks):
            for i, node in enumerate(st.nodes):
                if st.done[i] >= 0 or st.left[i]:
                    continue  # done, or waits for another stuck node: report the one that blocks
                if node.type == COLL:
                    there = self.arrived.get((node.pg, self.seq[r][i]), {})
                    missing = [m for m in self.members[node.pg] if m not in there]
                    raise self._err(r, node, f"deadlock: collective #{self.seq[r][i]} on process group "
                                             f"{shorten(node.pg)} waits for ranks {missing}, which never reach it "
                                             "(each waits, through its dependencies, for something that waits for it)")
                (src, dst, tag), _ = _p2p_key(r, node)
                raise self._err(r, node, f"deadlock: the receive waits for the message {src}->{dst} tag {tag}, "
                                         f"whose send waits, through its dependencies, for this receive")

"""MLCommons Chakra execution traces (ET): read and write them, and compile one into a netsim schedule.

A trace is one file per rank, ``<prefix>.<rank>.et`` (the layout ASTRA-sim reads), each a
``GlobalMetadata`` message and then ``Node`` messages (:mod:`netsim.workload.chakra_proto`).
:func:`read_trace` validates the files; :func:`build_trace` turns the nodes of all ranks into one
:class:`~netsim.engine.model.Schedule`:

* ``COMP_NODE``: a DELAY of ``duration_micros``; when that is 0, ``num_ops / ops_per_s`` when the
  node has a ``num_ops`` attribute and ``ops_per_s`` is given; else nothing (a JOIN).
* ``COMM_COLL_NODE``: a netsim collective (``comm_type`` -> op, ``comm_size`` -> ``size_bytes`` in
  nccl-tests terms; the algorithm per op from ``algorithms``, default :data:`DEFAULT_ALGORITHMS`)
  over its process group (``pg_name``), built with the algorithm's builder and per-rank ``ready``
  (each rank enters when its own dependencies are done). The k-th collective node of a process
  group in each member's file (file order) is the same call, as ASTRA-sim matches them; members
  must agree on type and size. A group's members are ``groups[pg_name]`` when given, else the
  ranks whose files hold collectives on it (an empty ``pg_name``: every rank). ``BARRIER`` is a
  zero-byte allreduce; ``REDUCE_SCATTER_BLOCK`` a reduce-scatter; ``GATHER`` and ``SCATTER`` are
  refused (netsim has no algorithm for them).
* ``COMM_SEND_NODE`` / ``COMM_RECV_NODE``: one message of the send's ``comm_size`` from its rank to
  ``comm_dst``; the k-th send from a to b with tag t matches the k-th receive on b from a with tag
  t (file order). The send is done when the message has arrived; the receive when its own
  dependencies are done and the message has arrived (eager sends: a send never waits for its
  receive to be posted). Point-to-point messages use their own communicator's connections.
* Memory, metadata and the other node types: a DELAY of their ``duration_micros`` (a JOIN when 0).

``ctrl_deps`` and ``data_deps`` are both kept as dependencies. Any error (a file missing or
broken, a dependency on a missing node, a cycle, unmatched calls or messages, a deadlock across
ranks) is one :class:`~netsim.errors.ConfigError` naming the file and the node id.
"""

from __future__ import annotations

import heapq
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from netsim.collectives import get_algorithm
from netsim.engine.model import Schedule, ScheduleBuilder
from netsim.errors import ConfigError, shorten
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
DEFAULT_ALGORITHMS = {"allreduce": "ring", "reduce_scatter": "ring", "allgather": "ring", "broadcast": "ring",
                      "reduce": "ring", "alltoall": "direct"}
_TYPE_NAMES = {v: k for k, v in NODE_TYPES.items()}
_COMM_NAMES = {v: k for k, v in COLLECTIVE_TYPES.items()}
COMP, SEND_NODE, RECV_NODE, COLL = (NODE_TYPES[k] for k in ("COMP_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE",
                                                             "COMM_COLL_NODE"))
#: Largest file read (a guard against pointing the reader at the wrong thing).
MAX_FILE_BYTES = 2 << 30


@dataclass(frozen=True)
class EtNode:
    """One node of a rank's trace, decoded."""

    id: int
    name: str
    type: int
    deps: tuple[int, ...]      #: ctrl_deps then data_deps, duplicates dropped
    duration_s: float
    attrs: dict = field(default_factory=dict)

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES.get(self.type, str(self.type))


@dataclass(frozen=True)
class ChakraTrace:
    """The decoded files of a trace, one entry per rank."""

    files: list[str]
    versions: list[str]
    nodes: list[list[EtNode]]

    @property
    def ranks(self) -> int:
        return len(self.files)


# ---------------------------------------------------------------------------------- files
def trace_files(prefix: str | os.PathLike, ranks: int | None = None) -> list[Path]:
    """The files ``<prefix>.0.et`` ... of a trace: ``ranks`` of them, or as many as exist in a row."""
    prefix = Path(prefix)
    if ranks is None:
        ranks = 0
        while Path(f"{prefix}.{ranks}.et").is_file():
            ranks += 1
        if not ranks:
            raise ConfigError(f"no trace files {prefix}.0.et, {prefix}.1.et, ... found", file=str(prefix))
    files = [Path(f"{prefix}.{r}.et") for r in range(ranks)]
    for f in files:
        if not f.is_file():
            raise ConfigError(f"trace file {f} not found (a trace of {ranks} ranks needs {prefix}.0.et to "
                              f"{prefix}.{ranks - 1}.et)", file=str(f))
    return files


def read_trace(prefix: str | os.PathLike, ranks: int | None = None) -> ChakraTrace:
    """Read and validate the trace ``<prefix>.<rank>.et`` (see :func:`trace_files`)."""
    files = trace_files(prefix, ranks)
    versions, nodes = [], []
    for f in files:
        version, rank_nodes = _read_file(f)
        versions.append(version)
        nodes.append(rank_nodes)
    return ChakraTrace([str(f) for f in files], versions, nodes)


def _read_file(path: Path) -> tuple[str, list[EtNode]]:
    from google.protobuf.message import DecodeError

    file = str(path)
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ConfigError(f"trace file larger than {MAX_FILE_BYTES >> 30} GiB", file=file)
    data = path.read_bytes()
    try:
        frames = list(pb.split_stream(data))
    except pb.FramingError as exc:
        raise ConfigError(f"not a Chakra ET file: {exc}", file=file) from None
    if not frames:
        raise ConfigError("empty trace file (expected a GlobalMetadata message, then nodes)", file=file)
    try:
        meta = pb.GlobalMetadata.FromString(frames[0][1])
    except DecodeError:
        raise ConfigError("not a Chakra ET file: the first message is not a GlobalMetadata", file=file) from None
    nodes, seen = [], set()
    for offset, raw in frames[1:]:
        try:
            msg = pb.Node.FromString(raw)
        except DecodeError:
            raise ConfigError(f"the node at byte {offset} does not decode as a Chakra Node", file=file) from None
        if msg.id in seen:
            raise ConfigError(f"node {msg.id}: node id used twice", file=file)
        seen.add(msg.id)
        if msg.type not in _TYPE_NAMES:
            raise ConfigError(f"node {msg.id}: unknown node type {msg.type}; valid: "
                              f"{', '.join(f'{k} ({v})' for k, v in NODE_TYPES.items())}", file=file)
        deps = tuple(dict.fromkeys([*msg.ctrl_deps, *msg.data_deps]))
        attrs = {a.name: pb.attr_value(a) for a in msg.attr}
        nodes.append(EtNode(msg.id, msg.name, msg.type, deps, msg.duration_micros * 1e-6, attrs))
    _check_deps(nodes, file)
    return meta.version, nodes


def _check_deps(nodes: list[EtNode], file: str) -> None:
    """Every dependency names a node of the file, and there is no cycle."""
    pos = {n.id: i for i, n in enumerate(nodes)}
    indegree = [0] * len(nodes)
    children: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for d in n.deps:
            if d not in pos:
                raise ConfigError(f"node {n.id}: depends on node {d}, which is not in the file", file=file)
            if d == n.id:
                raise ConfigError(f"node {n.id}: depends on itself", file=file)
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
        stuck = next(nodes[i].id for i, k in enumerate(indegree) if k)
        raise ConfigError(f"node {stuck}: its dependencies form a cycle", file=file)


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
                channels: int = 1, job: int = 0, groups: dict[str, Sequence[int]] | None = None,
                ops_per_s: float | None = None, gpu_host: Sequence[int] | None = None,
                mixes_fabrics=None) -> tuple[Schedule, list[TraceCall]]:
    """Compile ``trace`` (rank ``r`` on ``gpus[r]``) into a schedule and its collective calls (see the module
    docstring for the mapping). ``mixes_fabrics(gpus) -> bool`` marks communicators that talk TCP."""
    compiler = _Compiler(trace, list(gpus), algorithms or {}, channels, job, groups or {}, ops_per_s, gpu_host,
                         mixes_fabrics)
    return compiler.run()


class _Compiler:
    """Emits the nodes of all ranks in a global dependency order (a collective once every member has
    reached it, a receive once its send exists) into one :class:`ScheduleBuilder`."""

    def __init__(self, trace, gpus, algorithms, channels, job, groups, ops_per_s, gpu_host, mixes_fabrics):
        if len(gpus) < trace.ranks:
            raise ConfigError(f"the trace has {trace.ranks} ranks but only {len(gpus)} GPUs were placed")
        self.trace, self.gpus, self.channels, self.job = trace, gpus, channels, job
        self.ops_per_s, self.gpu_host, self.mixes = ops_per_s, gpu_host, mixes_fabrics
        self.algorithms = {**DEFAULT_ALGORITHMS, **algorithms}
        self.b = ScheduleBuilder()
        self.calls: list[TraceCall] = []
        self.ranks = [self._rank(trace.files[r], trace.nodes[r]) for r in range(trace.ranks)]
        self.members = self._groups(groups)
        self.comms = {pg: i for i, pg in enumerate(sorted(self.members, key=lambda g: (g != "", g)))}
        self.p2p_comm = len(self.comms)
        self.arrived: dict[tuple[str, int], dict[int, tuple[int, int]]] = defaultdict(dict)
        self.sent: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        self.waiting: dict[tuple[int, int, int, int], tuple[int, int, int]] = {}
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

    # ------------------------------------------------------------------ checks
    def _err(self, rank: int, node: EtNode, message: str) -> ConfigError:
        return ConfigError(f"node {node.id} ({node.type_name}): {message}", file=self.ranks[rank].file)

    def _attr_int(self, rank: int, node: EtNode, name: str, default: int | None = None) -> int:
        value = node.attrs.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._err(rank, node, f"needs an integer attribute {name}, got {shorten(value)}")
        return value

    def _groups(self, groups: dict[str, Sequence[int]]) -> dict[str, list[int]]:
        n = self.trace.ranks
        members: dict[str, list[int]] = {}
        for pg, ranks in groups.items():
            bad = [r for r in ranks if not 0 <= r < n]
            if bad:
                raise ConfigError(f"process group {shorten(pg)} names ranks {bad}; the trace has {n} (0..{n - 1})")
            members[str(pg)] = list(ranks)
        for r, st in enumerate(self.ranks):
            for node in st.nodes:
                if node.type != COLL:
                    continue
                pg = str(node.attrs.get("pg_name", "") or "")
                if pg in groups:
                    if r not in members[pg]:
                        raise self._err(r, node, f"rank {r} is not a member of process group {shorten(pg)} "
                                                 f"({members[pg]})")
                else:
                    members.setdefault(pg, list(range(n)) if pg == "" else [])
                    if r not in members[pg]:
                        members[pg].append(r)
        return {pg: sorted(m) if pg not in groups else m for pg, m in members.items()}

    def _sequence_numbers(self) -> list[list[int]]:
        """Per rank and node: the k of the k-th collective on its group / the k-th message of its key;
        and a check that every member has as many collectives, every send its receive."""
        seq = []
        colls: dict[str, dict[int, list[tuple[EtNode, int]]]] = defaultdict(lambda: defaultdict(list))
        p2p: dict[tuple, dict[str, list[tuple[EtNode, int]]]] = defaultdict(lambda: defaultdict(list))
        for r, st in enumerate(self.ranks):
            ks = [0] * len(st.nodes)
            for i, node in enumerate(st.nodes):
                if node.type == COLL:
                    pg = str(node.attrs.get("pg_name", "") or "")
                    ks[i] = len(colls[pg][r])
                    colls[pg][r].append((node, r))
                elif node.type in (SEND_NODE, RECV_NODE):
                    key = self._p2p_key(r, node)
                    side = "send" if node.type == SEND_NODE else "recv"
                    ks[i] = len(p2p[key][side])
                    p2p[key][side].append((node, r))
            seq.append(ks)
        for pg, per_rank in colls.items():
            counts = {r: len(per_rank.get(r, [])) for r in self.members[pg]}
            most = max(counts, key=lambda r: (counts[r], -r))
            for r, k in counts.items():
                if k < counts[most]:
                    node, _ = per_rank[most][k]
                    raise self._err(most, node, f"collective #{k} on process group {shorten(pg)} has no match on rank "
                                                f"{r} ({self.ranks[r].file} has {k} collective(s) on that group)")
        for key, sides in p2p.items():
            sends, recvs = sides["send"], sides["recv"]
            if len(sends) != len(recvs):
                extra, other = (sends, "receive") if len(sends) > len(recvs) else (recvs, "send")
                node, r = extra[min(len(sends), len(recvs))]
                raise self._err(r, node, f"message {key[0]}->{key[1]} tag {key[2]} #{min(len(sends), len(recvs))} "
                                         f"has no matching {other}")
        return seq

    def _p2p_key(self, r: int, node: EtNode) -> tuple[int, int, int]:
        n = self.trace.ranks
        peer_name = "comm_dst" if node.type == SEND_NODE else "comm_src"
        peer = self._attr_int(r, node, peer_name)
        if not 0 <= peer < n or peer == r:
            raise self._err(r, node, f"{peer_name} {peer} must be another rank of the trace (0..{n - 1})")
        tag = self._attr_int(r, node, "comm_tag", 0)
        return (r, peer, tag) if node.type == SEND_NODE else (peer, r, tag)

    # ------------------------------------------------------------------ emission
    def run(self) -> tuple[Schedule, list[TraceCall]]:
        progress = True
        while progress:
            progress = False
            for r, st in enumerate(self.ranks):
                while st.heap:
                    self._emit(r, heapq.heappop(st.heap))
                    progress = True
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
            key = self._p2p_key(r, node)
            size = self._attr_int(r, node, "comm_size")
            if size < 0:
                raise self._err(r, node, f"comm_size must be >= 0, got {size}")
            conn = b.connect(self.gpus[key[0]], self.gpus[key[1]], 0, self.job, self.p2p_comm)
            task = int(b.send(conn, float(size), after=[self._after(r, i)])[0])
            self.sent[key].append(task)
            self._finish(r, i, task)
            waiting = self.waiting.pop((*key, len(self.sent[key]) - 1), None)
            if waiting is not None:
                self._receive(*waiting)
        elif node.type == RECV_NODE:
            key = self._p2p_key(r, node)
            k = self.seq[r][i]
            if k < len(self.sent[key]):
                self._receive(r, i, self.sent[key][k])
            else:
                self.waiting[(*key, k)] = (r, i, -1)
        else:
            seconds = node.duration_s
            if node.type == COMP and not seconds and self.ops_per_s and node.attrs.get("num_ops"):
                seconds = float(self._attr_int(r, node, "num_ops")) / self.ops_per_s
            after = [self._after(r, i)]
            task = b.delay(seconds, after=after) if seconds > 0 else b.join(after=after)
            self._finish(r, i, int(task[0]))

    def _receive(self, r: int, i: int, send_task: int) -> None:
        if send_task < 0:
            key = self._p2p_key(r, self.ranks[r].nodes[i])
            send_task = self.sent[key][self.seq[r][i]]
        self._finish(r, i, int(self.b.join(after=[self._after(r, i) + [send_task]])[0]))

    def _arrive(self, r: int, i: int, node: EtNode) -> None:
        pg = str(node.attrs.get("pg_name", "") or "")
        key = (pg, self.seq[r][i])
        self.arrived[key][r] = (i, self._ready(r, i))
        if len(self.arrived[key]) == len(self.members[pg]):
            self._collective(pg, self.arrived.pop(key))

    def _collective(self, pg: str, arrived: dict[int, tuple[int, int]]) -> None:
        members = self.members[pg]
        first = members[0]
        node0 = self.ranks[first].nodes[arrived[first][0]]
        kind, size = self._attr_int(first, node0, "comm_type"), self._attr_int(first, node0, "comm_size", 0)
        for r in members[1:]:
            node = self.ranks[r].nodes[arrived[r][0]]
            other = (self._attr_int(r, node, "comm_type"), self._attr_int(r, node, "comm_size", 0))
            if other != (kind, size):
                raise self._err(r, node, f"does not match the same call on rank {first} (node {node0.id} of "
                                         f"{self.ranks[first].file}): comm_type/comm_size {other} vs {(kind, size)}")
        name = _COMM_NAMES.get(kind)
        if name not in COMM_OPS:
            raise self._err(first, node0, f"collective type {name or kind} is not supported; supported: "
                                          f"{', '.join(COMM_OPS)}")
        if size < 0:
            raise self._err(first, node0, f"comm_size must be >= 0, got {size}")
        op = COMM_OPS[name]
        algorithm = self.algorithms.get(op, DEFAULT_ALGORITHMS[op])
        builder = get_algorithm(op, algorithm, "workload.algorithms")
        gpus = [self.gpus[r] for r in members]
        ready = np.array([arrived[r][1] for r in members], dtype=np.int64)
        tcp = bool(self.mixes(gpus)) if self.mixes is not None and len(gpus) > 1 else False
        comm = self.comms[pg]
        ends = np.asarray(builder(self.b, gpus, float(size), channels=self.channels, job=self.job, comm=comm,
                                  tcp=tcp, ready=ready, gpu_host=self.gpu_host), dtype=np.int64)
        none = np.flatnonzero(ends < 0)
        if len(none):
            ends[none] = self.b.join(n=len(none))
        label = node0.name or f"{op}/{algorithm}"
        self.calls.append(TraceCall(len(self.calls), op, algorithm, float(size), list(members), gpus, comm, label,
                                    ready, ends, tcp, self.channels))
        for r, end in zip(members, ends.tolist()):
            self._finish(r, arrived[r][0], end)

    def _check_finished(self) -> None:
        for r, st in enumerate(self.ranks):
            for i, node in enumerate(st.nodes):
                if st.done[i] >= 0:
                    continue
                if st.left[i]:
                    continue  # waits for another stuck node; report the one that blocks
                if node.type == COLL:
                    pg = str(node.attrs.get("pg_name", "") or "")
                    there = self.arrived.get((pg, self.seq[r][i]), {})
                    missing = [m for m in self.members[pg] if m not in there]
                    raise self._err(r, node, f"deadlock: collective #{self.seq[r][i]} on process group "
                                             f"{shorten(pg)} waits for ranks {missing}, which never reach it")
                key = self._p2p_key(r, node)
                raise self._err(r, node, f"deadlock: the receive waits for the message {key[0]}->{key[1]} tag "
                                         f"{key[2]}, whose send never happens")

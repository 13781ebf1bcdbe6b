"""Bad-input cases: Parquet schedules (``workload: {type: schedule}``) and ``netsim export-schedule``.

Hand-written cases cover each column's types, ranges and nulls, missing, repeated and unknown columns,
the dependency graph, the connection metadata, damaged and odd files, and the outputs
``export-schedule`` must refuse; generated ones mutate the shipped schedule
(``experiments/traces/chakra-tp-dp/schedule.parquet``) and schedules that ``netsim export-schedule``
writes, with a fixed seed. A case whose file is wrong expects a clean error and, for most, checks
that the message names the file, the row (counted from 1) and the column.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from tests.badinputs.harness import REPO, Case, Outcome, prerun, says

KIND = "schedule"
ERROR = frozenset({"error"})
OK = frozenset({"ok"})
EITHER = frozenset({"ok", "error"})
SHIPPED = REPO / "experiments" / "traces" / "chakra-tp-dp" / "schedule.parquet"
#: Generated mutations of the shipped schedule and of exported ones.
SHIPPED_MUTATIONS = 24
EXPORTED_MUTATIONS = 12

TOPOLOGY = {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 2,
            "nics_per_host": 2, "nic": {"bandwidth": "200Gbps", "latency": "1us"},
            "uplink": {"bandwidth": "200Gbps", "latency": "500ns"},
            "intra_host": {"bandwidth": "900GB/s", "latency": "300ns"}}
#: A collective experiment whose job ``netsim export-schedule`` writes.
SOURCE = {"name": "src", "seed": 1, "topology": TOPOLOGY,
          "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB", "ranks": 4,
                       "channels": 2}}


def _dump(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=10**9)


def experiment(path: str = "s.parquet", **workload) -> str:
    """An experiment running the schedule ``path`` on 8 GPUs."""
    return _dump({"name": "sched", "seed": 1, "topology": TOPOLOGY,
                  "workload": {"type": "schedule", "path": path, **workload}})


def parquet(table: pa.Table) -> bytes:
    """``table`` as the bytes of a Parquet file."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def inline(**columns) -> pa.Table:
    """A valid schedule with inline connections (what another tool writes), ``columns`` replacing its own;
    a value of ``None`` drops the column."""
    base = {"kind": ["send", "delay", "send", "join"], "amount": [1e6, 2e-6, 5e5, 0.0],
            "deps": [[], [0], [1], [0, 2]], "src": [0, None, 1, None], "dst": [1, None, 0, None],
            "channel": [0, None, 1, None]}
    base.update(columns)
    return pa.table({k: v for k, v in base.items() if v is not None})


def no_results(_cwd: Path, outcome: Outcome) -> str:
    """A check: the run wrote no results directory (the sandbox's results/ holds only its sentinel)."""
    made = sorted(p.name for p in (_cwd / "results").iterdir() if p.name != "KEEP.txt")
    return f"results written: {made}" if made else says("s.parquet")(_cwd, outcome)


def intact(name: str, content: bytes | str):
    """A check: ``name`` (relative to the working directory) still holds ``content``."""
    data = content.encode() if isinstance(content, str) else content

    def check(cwd: Path, _outcome: Outcome) -> str:
        try:
            return "" if (cwd / name).read_bytes() == data else f"{name} was changed"
        except OSError as exc:
            return f"{name} is gone: {exc}"
    return check


def reads_back(name: str):
    """A check: ``name`` is a schedule netsim reads."""
    def check(cwd: Path, _outcome: Outcome) -> str:
        from netsim.engine.schedule_io import read_schedule
        try:
            read_schedule(cwd / name)
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            return f"{name} does not read back: {type(exc).__name__}: {exc}"
        return ""
    return check


def sched(name: str, data: bytes | pa.Table, expect=ERROR, check=None, command: str = "validate",
          **workload) -> Case:
    """``netsim COMMAND exp.yaml`` on an experiment running the schedule ``data``."""
    raw = parquet(data) if isinstance(data, pa.Table) else data
    return Case(name, KIND, [command, "exp.yaml"], {"exp.yaml": experiment(**workload), "s.parquet": raw},
                expect=expect, check=check)


def _with_meta(table: pa.Table, **fields) -> pa.Table:
    """The shipped table with its netsim.connections lists changed."""
    meta = dict(table.schema.metadata)
    conns = json.loads(meta[b"netsim.connections"])
    conns.update(fields)
    meta[b"netsim.connections"] = json.dumps(conns).encode()
    return table.replace_schema_metadata(meta)


def _set(table: pa.Table, column: str, row: int, value, type_=None) -> pa.Table:
    """``table`` with one cell replaced (the column's type widened if ``value`` needs it)."""
    values = table.column(column).to_pylist()
    values[row] = value
    try:
        array = pa.array(values, type=type_)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        array = pa.array([None if v is None else str(v) for v in values])
    return table.set_column(table.column_names.index(column), column, array)


# ----------------------------------------------------------------------------------- hand-written

def _huge_conn(table: pa.Table) -> pa.Table:
    """``table`` with conn as uint64, empty (null) on delays and joins, and 2**63 on its third row."""
    conn = [None if c < 0 else c for c in table.column("conn").to_pylist()]
    conn[2] = 2**63
    return table.set_column(table.column_names.index("conn"), "conn", pa.array(conn, pa.uint64()))


def column_cases() -> list[Case]:
    """Types, ranges and nulls of each column."""
    shipped = pq.read_table(SHIPPED)
    c = [
        sched("src 0.5 (not a rank)", inline(src=[0.5, None, 1, None]), check=says("s.parquet: row 1", "'src'", "0.5")),
        sched("dst 1.5", inline(dst=[1.5, None, 0, None]), check=says("s.parquet: row 1", "'dst'")),
        sched("src 0.0 as a float column (what pandas writes)", inline(src=[0.0, None, 1.0, None]), expect=OK),
        sched("channel 0.5", inline(channel=[0.5, None, 1, None]), check=says("row 1", "'channel'")),
        sched("channel 2**63", inline(channel=pa.array([2**63, None, 1, None], pa.uint64())),
              check=says("row 1", "'channel'")),
        sched("channel 2**64-1", inline(channel=pa.array([2**64 - 1, None, 1, None], pa.uint64())),
              check=says("row 1", "'channel'")),
        sched("src 2**63 (uint64)", inline(src=pa.array([2**63, None, 1, None], pa.uint64())),
              check=says("row 1", "'src'")),
        sched("src negative", inline(src=[-1, None, 1, None]), check=says("row 1", "'src'", "-1")),
        sched("dst past ranks", inline(dst=[9, None, 0, None]), check=says("row 1", "'dst'", "4 ranks"), ranks=4),
        sched("src as strings", inline(src=["0", None, "1", None]), check=says("'src'")),
        sched("src as booleans", inline(src=[False, None, True, None]), check=says("'src'")),
        sched("src equals dst", inline(dst=[0, None, 1, None]), check=says("row 1", "'dst'", "same as src")),
        sched("src null on a send", inline(src=[None, None, 1, None]), check=says("row 1", "'src'")),
        sched("src on a delay", inline(src=[0, 3, 1, None]), check=says("row 2", "'src'")),
        sched("tcp 2", inline(tcp=[2, None, 0, None]), check=says("row 1", "'tcp'")),
        sched("tcp as booleans", inline(tcp=[True, None, False, None]), expect=OK),
        sched("job -1", inline(job=[-1, None, 0, None]), check=says("row 1", "'job'")),
        sched("comm 0.5", inline(comm=[0.5, None, 0, None]), check=says("row 1", "'comm'")),
        sched("comm 2**40", inline(comm=[2**40, None, 0, None]), check=says("row 1", "'comm'")),
        sched("amount negative", inline(amount=[-5.0, 2e-6, 5e5, 0.0]), check=says("row 1", "'amount'")),
        sched("amount NaN", inline(amount=[float("nan"), 2e-6, 5e5, 0.0]), check=says("row 1", "'amount'")),
        sched("amount inf on a delay", inline(amount=[1e6, float("inf"), 5e5, 0.0]), check=says("row 2", "'amount'")),
        sched("send of 1e30 bytes", inline(amount=[1e30, 2e-6, 5e5, 0.0]), check=says("row 1", "'amount'")),
        sched("delay of 1e9 s", inline(amount=[1e6, 1e9, 5e5, 0.0]), check=says("row 2", "'amount'")),
        sched("amount as strings", inline(amount=["1MB", "2us", "5", "0"]), check=says("'amount'")),
        sched("amount null", inline(amount=[1e6, None, 5e5, 0.0]), check=says("row 2", "'amount'")),
        sched("amount as booleans", inline(amount=[True, False, True, False]), check=says("'amount'")),
        sched("amount as integers", inline(amount=[1000000, 0, 500000, 0]), expect=OK),
        sched("join with an amount", inline(amount=[1e6, 2e-6, 5e5, 3.0]), check=says("row 4", "'amount'")),
        sched("kind unknown", inline(kind=["send", "wait", "send", "join"]), check=says("row 2", "'kind'", "'wait'")),
        sched("kind null", inline(kind=["send", None, "send", "join"]), check=says("row 2", "'kind'")),
        sched("kind as integers", inline(kind=[0, 1, 0, 2]), check=says("'kind'")),
        sched("kind with a trailing space", inline(kind=["send ", "delay", "send", "join"]), check=says("row 1")),
        sched("kind in capitals", inline(kind=["SEND", "Delay", "send", "join"]), expect=OK),
        sched("kind as a dictionary column", inline(kind=pa.array(["send", "delay", "send", "join"]).dictionary_encode()),
              expect=OK),
        sched("deps forward", inline(deps=[[1], [0], [1], [0, 2]]), check=says("row 1", "'deps'", "later")),
        sched("deps on itself", inline(deps=[[], [1], [1], [0, 2]]), check=says("row 2", "'deps'", "itself")),
        sched("deps negative", inline(deps=[[], [-1], [1], [0, 2]]), check=says("row 2", "'deps'")),
        sched("deps past the end", inline(deps=[[], [0], [1], [0, 99]]), check=says("row 4", "'deps'")),
        sched("deps 2**63", inline(deps=pa.array([[], [2**63], [1], [0, 2]], pa.list_(pa.uint64()))),
              check=says("row 2", "'deps'")),
        sched("deps repeated (waits once)", inline(deps=[[], [0], [1], [2, 2]]), expect=OK),
        sched("deps as floats", inline(deps=[[], [0.5], [1.0], [0.0, 2.0]]), check=says("'deps'")),
        sched("deps as integers", inline(deps=[-1, 0, 1, 2]), check=says("'deps'")),
        sched("deps as strings", inline(deps=["", "0", "1", "0,2"]), check=says("'deps'")),
        sched("deps null list", inline(deps=[[], None, [1], [0, 2]]), check=says("row 2", "'deps'")),
        sched("deps null element", inline(deps=[[], [None], [1], [0, 2]]), check=says("row 2", "'deps'")),
        sched("deps as int32 large lists", inline(deps=pa.array([[], [0], [1], [0, 2]], pa.large_list(pa.int32()))),
              expect=OK),
        sched("src, dst as uint8", inline(src=pa.array([0, None, 1, None], pa.uint8()),
                                          dst=pa.array([1, None, 0, None], pa.uint8())), expect=OK),
        sched("conn 0.5 in the shipped schedule", _set(shipped, "conn", 2, 0.5), check=says("row 3", "'conn'")),
        sched("conn past the table", _set(shipped, "conn", 2, 20), check=says("row 3", "'conn'")),
        sched("conn 2**63 (uint64, empty on delays)", _huge_conn(shipped), check=says("row 3", "'conn'")),
        sched("conn null on a send", _set(shipped, "conn", 2, None), check=says("row 3", "'conn'")),
        sched("conn on a delay", _set(shipped, "conn", 0, 1), check=says("row 1", "'conn'")),
        sched("amount NaN in the shipped schedule", _set(shipped, "amount", 5, float("nan")),
              check=says("row 6", "'amount'")),
        sched("a rank past ranks: 4 in the shipped schedule", shipped, check=says("s.parquet", "4 ranks"), ranks=4),
        sched("the shipped schedule", shipped, expect=OK),
        sched("the shipped schedule, run", shipped, expect=OK, command="run"),
        sched("the inline schedule, run", inline(), expect=OK, command="run"),
        sched("src 0.5, run", inline(src=[0.5, None, 1, None]), command="run", check=no_results),
        Case("src 0.5, a sweep of two variants", KIND, ["sweep", "exp.yaml"],
             {"exp.yaml": experiment()[:-1] + "\nvariants: [{name: a}, {name: b, routing: spray}]\n",
              "s.parquet": parquet(inline(src=[0.5, None, 1, None]))}, check=no_results),
        sched("delays only", inline(kind=["delay"] * 4, src=None, dst=None, channel=None), expect=OK),
    ]
    return c


def _two_row_groups() -> bytes:
    """An inline schedule in two row groups, its sixth row (the second group's) naming rank 0.5."""
    table = inline(kind=["send", "delay", "send", "join", "delay", "send"], amount=[1e6, 2e-6, 5e5, 0, 1e-6, 1e3],
                   deps=[[], [0], [1], [0, 2], [3], [4]], src=[0, None, 1, None, None, 0.5],
                   dst=[1, None, 0, None, None, 1], channel=[0, None, 1, None, None, 0])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=3)
    return sink.getvalue().to_pybytes()


def _many(batches: int, rows: int, deps: int):
    """A setup writing s.parquet as ``batches`` row groups of ``rows`` joins, each waiting for ``deps`` times
    task 0 (the first row has none): millions of tasks in a few kB, written a row group at a time."""
    def setup(cwd: Path) -> None:
        first = pa.table({"kind": ["delay"], "amount": [1.0], "deps": pa.array([[]], pa.list_(pa.int64()))})
        offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * deps)
        batch = pa.table({"kind": pa.array(["join"] * rows), "amount": pa.array(np.zeros(rows)),
                          "deps": pa.ListArray.from_arrays(offsets, pa.array(np.zeros(rows * deps, np.int64)))})
        with pq.ParquetWriter(cwd / "s.parquet", first.schema) as writer:
            writer.write_table(first)
            for _ in range(batches):
                writer.write_table(batch)
    return setup


def _duplicated(name: str) -> bytes:
    t = inline()
    return parquet(pa.Table.from_arrays([*t.columns, t.column(name)], names=[*t.column_names, name]))


def table_cases() -> list[Case]:
    """Columns missing, repeated or unknown; empty tables; metadata; files that are not schedules."""
    shipped = pq.read_table(SHIPPED)
    n = shipped.num_rows
    return [
        sched("no kind column", inline(kind=None), check=says("s.parquet", "kind")),
        sched("no amount column", inline(amount=None), check=says("s.parquet", "amount")),
        sched("no deps column", inline(deps=None), check=says("s.parquet", "deps")),
        sched("src without dst", inline(dst=None), check=says("s.parquet", "dst")),
        sched("conn without its metadata", shipped.replace_schema_metadata({}), check=says("s.parquet", "conn")),
        sched("conn and src both given", shipped.append_column("src", pa.array([0] * n)),
              check=says("s.parquet", "conn", "src")),
        sched("kind twice", _duplicated("kind"), check=says("s.parquet", "'kind'")),
        sched("src twice", _duplicated("src"), check=says("s.parquet", "'src'")),
        sched("an unknown column (a typo of channel)", inline(chanel=[0, None, 1, None]),
              check=says("s.parquet", "'chanel'")),
        sched("no rows", inline().slice(0, 0), check=says("s.parquet", "no tasks")),
        sched("no rows in the shipped schedule", shipped.slice(0, 0), check=says("s.parquet", "no tasks")),
        sched("no columns", pa.table({}), check=says("s.parquet")),
        sched("an error in the second row group", _two_row_groups(), check=says("s.parquet: row 6", "'src'")),
        Case("11 million joins (a few kB compressed)", KIND, ["validate", "exp.yaml"], {"exp.yaml": experiment()},
             setup=_many(11, 1_000_000, 0), check=says("s.parquet", "tasks")),
        Case("60 million dependencies", KIND, ["validate", "exp.yaml"], {"exp.yaml": experiment()},
             setup=_many(60, 1, 1_000_000), check=says("s.parquet", "dependencies")),
        sched("metadata src 0.5", _with_meta(shipped, src=[0.5] + [1] * 19), check=says("s.parquet", "src")),
        sched("metadata channel 2**63", _with_meta(shipped, channel=[2**63] + [0] * 19),
              check=says("s.parquet", "channel")),
        sched("metadata channel 2**70", _with_meta(shipped, channel=[2**70] + [0] * 19),
              check=says("s.parquet", "channel")),
        sched("metadata src as strings", _with_meta(shipped, src=["0"] * 20), check=says("s.parquet", "src")),
        sched("metadata tcp 5", _with_meta(shipped, tcp=[5] * 20), check=says("s.parquet", "tcp")),
        sched("metadata lists of different lengths", _with_meta(shipped, dst=[1, 0]), check=says("s.parquet")),
        sched("metadata not JSON", shipped.replace_schema_metadata(
            {**shipped.schema.metadata, b"netsim.connections": b"{nope"}), check=says("s.parquet", "JSON")),
        sched("metadata a list", shipped.replace_schema_metadata(
            {**shipped.schema.metadata, b"netsim.connections": b"[1, 2]"}), check=says("s.parquet")),
        sched("metadata format version 9", shipped.replace_schema_metadata(
            {**shipped.schema.metadata, b"netsim.schedule": b"9"}), check=says("s.parquet", "version")),
        sched("metadata src nested lists", _with_meta(shipped, src=[[0]] * 20), check=says("s.parquet", "src")),
        sched("metadata repeats a connection", _with_meta(
            shipped, **{f: json.loads(shipped.schema.metadata[b"netsim.connections"])[f][:1] * 20
                        for f in ("src", "dst", "channel", "job", "comm", "tcp")}), check=says("s.parquet")),
        sched("not Parquet", b"kind,amount,deps\nsend,1,\n", check=says("s.parquet", "Parquet")),
        sched("an empty file", b"", check=says("s.parquet")),
        sched("a truncated file", SHIPPED.read_bytes()[:-100], check=says("s.parquet")),
        sched("a damaged page", SHIPPED.read_bytes()[:200] + b"\xff" * 64 + SHIPPED.read_bytes()[264:],
              expect=EITHER),
        Case("a directory", KIND, ["validate", "exp.yaml"], {"exp.yaml": experiment("d.parquet"), "d.parquet/x": "x"},
             check=says("directory")),
        Case("a missing file", KIND, ["validate", "exp.yaml"], {"exp.yaml": experiment("nope.parquet")},
             check=says("nope.parquet", "not found")),
        Case("a symlink to /dev/zero", KIND, ["validate", "exp.yaml"], {"exp.yaml": experiment("z.parquet")},
             setup=lambda cwd: os.symlink("/dev/zero", cwd / "z.parquet"), check=says("z.parquet")),
        Case("a symlink loop", KIND, ["validate", "exp.yaml"], {"exp.yaml": experiment("l.parquet")},
             setup=lambda cwd: os.symlink("l.parquet", cwd / "l.parquet"), check=says("l.parquet", "loop")),
    ]


# ------------------------------------------------------------------------------- export-schedule

def _export(*argv: str, files: dict | None = None, expect=ERROR, check=None, setup=None, name: str = "") -> Case:
    return Case(name or "export-schedule " + " ".join(argv), KIND, ["export-schedule", *argv],
                {"src.yaml": _dump(SOURCE), **(files or {})}, expect=expect, check=check, setup=setup)


def _cluster() -> str:
    return _dump({"name": "cl", "seed": 1, "topology": TOPOLOGY,
                  "cluster": {"trace": "jobs.csv", "scheduler": "fifo"}})


def export_cases() -> list[Case]:
    """Outputs ``export-schedule`` must refuse, workloads it cannot export, and ones it writes."""
    src = _dump(SOURCE)
    replay = experiment()
    shipped = SHIPPED.read_bytes()
    training = _dump({**SOURCE, "workload": {"type": "training", "model": {
        "name": "tiny", "layers": 2, "hidden": 1024, "heads": 8, "seq_len": 512, "vocab": 1000, "micro_batch": 1,
        "global_batch": 8}, "parallelism": {"dp": 8}, "gpu": "h100"}})
    two_jobs = _dump({"name": "two", "seed": 1, "topology": TOPOLOGY, "jobs": [
        {"name": "a", "workload": {**SOURCE["workload"]}}, {"name": "b", "workload": {**SOURCE["workload"]}}]})
    return [
        _export("src.yaml", "src.yaml", "--force", check=intact("src.yaml", src)),
        _export("src.yaml", "src.yaml", check=intact("src.yaml", src)),
        _export("src.yaml", "./sub/../src.yaml", "--force", files={"sub/x": "x"}, check=intact("src.yaml", src)),
        _export("src.yaml", "link.parquet", "--force", setup=lambda cwd: os.symlink("src.yaml", cwd / "link.parquet"),
                check=intact("src.yaml", src), name="export-schedule to a symlink to the experiment, --force"),
        _export("exp.yaml", "s.parquet", "--force", files={"exp.yaml": replay, "s.parquet": shipped},
                check=intact("s.parquet", shipped), name="export-schedule over the schedule it replays, --force"),
        _export("src.yaml", "out.yaml", check=says("parquet")),
        _export("src.yaml", "out.csv", check=says("parquet")),
        _export("src.yaml", "out", check=says("parquet")),
        _export("src.yaml", "out.parquet.tmp", check=says("parquet")),
        _export("src.yaml", "NOTES.txt", "--force", check=intact("NOTES.txt", "sentinel cwd\n")),
        _export("src.yaml", "taken.parquet", files={"taken.parquet": b"mine"}, check=intact("taken.parquet", b"mine")),
        _export("src.yaml", "results", check=says("results")),
        _export("src.yaml", "nodir/x.parquet", check=says("nodir")),
        _export("cl.yaml", "x.parquet", files={"cl.yaml": _cluster(), "jobs.csv": "job_id,submit_time,gpus,duration\n"
                                               "a,0,8,100\n"}, check=says("cluster", "collective")),
        _export("tr.yaml", "x.parquet", files={"tr.yaml": training}, check=says("training")),
        _export("two.yaml", "x.parquet", files={"two.yaml": two_jobs}, check=says("--job")),
        _export("two.yaml", "x.parquet", "--job", "zz", files={"two.yaml": two_jobs}, check=says("'zz'")),
        _export("src.yaml", "x.parquet", expect=OK, check=reads_back("x.parquet")),
        _export("src.yaml", "X.PARQUET", expect=OK, check=reads_back("X.PARQUET")),
        _export("two.yaml", "x.parquet", "--job", "b", files={"two.yaml": two_jobs}, expect=OK,
                check=reads_back("x.parquet")),
        _export("exp.yaml", "again.parquet", files={"exp.yaml": replay, "s.parquet": shipped}, expect=OK,
                check=reads_back("again.parquet"), name="export-schedule of a schedule workload"),
    ]


# ----------------------------------------------------------------------------------- generated

ODD = [0.5, -1, float("nan"), float("inf"), 1e30, 2**63, None, True, "x", 7]


def mutate(table: pa.Table, rng: np.random.Generator) -> tuple[str, pa.Table | bytes, bool]:
    """(what was done, the mutated file, whether it must be refused) for one draw of ``rng``."""
    names = table.column_names
    n = table.num_rows
    op = int(rng.integers(12))
    op = 0 if op >= 9 else op  # setting a cell is the commonest mutation: a third of them
    row = int(rng.integers(n))
    if op == 0:
        column = names[int(rng.integers(len(names)))]
        value = ODD[int(rng.integers(len(ODD)))]
        if column == "deps" and value is not None and not isinstance(value, str):
            value = [value]
        kind = str(table.column("kind")[row].as_py()).lower()
        return f"set {column} row {row + 1} to {value!r}", _set(table, column, row, value), \
            _refused(column, value, kind, row)
    if op == 1:
        column = names[int(rng.integers(len(names)))]
        return f"drop column {column}", table.drop_columns([column]), column != "overhead_scale"  # (optional)
    if op == 2:
        column = names[int(rng.integers(len(names)))]
        return f"repeat column {column}", pa.Table.from_arrays([*table.columns, table.column(column)],
                                                               names=[*names, column]), True
    if op == 3:
        column = names[int(rng.integers(len(names)))]
        return f"rename column {column}", table.rename_columns([c + "_" if c == column else c for c in names]), True
    if op == 4:
        column = names[int(rng.integers(len(names)))]
        return f"column {column} as text", table.set_column(
            names.index(column), column, pa.array([json.dumps(v) for v in table.column(column).to_pylist()])), True
    if op == 5:
        other = int(rng.integers(n))
        order = list(range(n))
        order[row], order[other] = order[other], order[row]
        return f"swap rows {row + 1} and {other + 1}", table.take(order), False
    if op == 6:
        deps = table.column("deps").to_pylist()
        deps[row] = deps[row] + [row + int(rng.integers(0, 3))]
        return f"row {row + 1} waits for a task at or after itself", \
            table.set_column(names.index("deps"), "deps", pa.array(deps, table.schema.field("deps").type)), True
    if op == 7:
        return f"keep the first {row} rows", table.slice(0, row), row == 0
    raw = bytearray(parquet(table))
    at = int(rng.integers(len(raw)))
    raw[at] ^= 0xFF
    return f"flip byte {at}", bytes(raw), False


def _refused(column: str, value, kind: str, row: int) -> bool:
    """Whether setting ``column`` of a ``kind`` task at 0-based ``row`` to ``value`` makes the file invalid."""
    if column == "amount" and value in (0.5, 7):
        return kind == "join"
    if column == "deps" and value == [7]:
        return row <= 7
    if column == "conn" and (value is None or value == -1):
        return kind == "send"
    if column == "conn" and value == 7:
        return kind != "send"
    if column == "overhead_scale":  # a send's share of its overhead: > 0 and <= 1000; 1 or empty on other rows
        if value is True:           # (read as 1.0)
            return False
        if value is None or value != value:
            return kind == "send"
        return not (value in (0.5, 7) and kind == "send")
    return True


def _refused_or_ok(cwd: Path, outcome: Outcome) -> str:
    """A check for an exported schedule's mutation: refused, naming the file, when it must be."""
    must_fail = (cwd / "MUST-FAIL.txt").exists()
    if must_fail and outcome.outcome != "error":
        return f"accepted: {(cwd / 'MUTATION.txt').read_text()}"
    return says("s.parquet")(cwd, outcome) if must_fail else ""


def generated_cases() -> list[Case]:
    """Seeded mutations of the shipped schedule and of two exported ones (in a setup, through the CLI)."""
    shipped = pq.read_table(SHIPPED)
    cases = []
    for k in range(SHIPPED_MUTATIONS):
        rng = np.random.default_rng([zlib.crc32(SHIPPED.name.encode()), k])
        what, data, must_fail = mutate(shipped, rng)
        cases.append(sched(f"shipped schedule: {what}", data, expect=ERROR if must_fail else EITHER,
                           check=says("s.parquet") if must_fail else None))
    for k in range(EXPORTED_MUTATIONS):
        cases.append(Case(f"exported schedule: mutation {k}", KIND, ["validate", "exp.yaml"],
                          {"exp.yaml": experiment(), "src.yaml": _dump(SOURCE)}, expect=EITHER,
                          setup=_exported_mutation(k), check=_refused_or_ok))
    return cases


def _exported_mutation(k: int):
    """A setup: ``netsim export-schedule`` writes s.parquet, then mutation ``k`` is applied to it."""
    def setup(cwd: Path) -> None:
        code = prerun(cwd, ["export-schedule", "src.yaml", "s.parquet"])
        assert code == 0, f"export-schedule exited {code}"
        what, data, must_fail = mutate(pq.read_table(cwd / "s.parquet"),
                                       np.random.default_rng([zlib.crc32(b"exported"), k]))
        (cwd / "s.parquet").write_bytes(parquet(data) if isinstance(data, pa.Table) else data)
        (cwd / "MUTATION.txt").write_text(what)
        if must_fail:
            (cwd / "MUST-FAIL.txt").write_text("")
    return setup


def cases() -> list:
    """This surface's cases."""
    return [*column_cases(), *table_cases(), *export_cases(), *generated_cases()]

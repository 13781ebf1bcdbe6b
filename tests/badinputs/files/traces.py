"""Bad-input cases: job traces (``kind="trace"``: ``netsim trace-check`` and an experiment naming the trace)
and ``netsim trace-synth`` (``kind="synth"``); see tests/badinputs/files/__init__.py.

Hand-written cases cover each way a trace file can be wrong (the file itself, the CSV layout, the
header, each column, the rules across columns, Parquet, size) and most check the message names the
file, the line (or row) and the column. Generated cases mutate every shipped trace with a fixed seed:
each either reads or is refused with a located message.
"""

from __future__ import annotations

import io
import os
import re
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tests.badinputs.harness import REPO, Case, Outcome

ERROR = frozenset({"error"})
OK = frozenset({"ok"})
EITHER = frozenset({"ok", "error"})
HEAD = "job,submit_s,gpus,model,tp,pp,dp,iterations,duration_s,user\n"
GOOD = "j0,0,8,gpt-3.6b,8,1,1,2,,alice"
#: Shipped traces the generated cases mutate.
SHIPPED = sorted([*(REPO / "experiments/traces").glob("*.csv"), *(REPO / "benchmarks/scenarios/traces").glob("*.csv"),
                  *(REPO / "workloads").glob("*.csv")])
PER_FILE = 10


def _says(*fragments: str) -> Callable[[Path, Outcome], str]:
    """A check: the error message holds every fragment."""
    def check(_cwd: Path, outcome: Outcome) -> str:
        missing = [f for f in fragments if f not in outcome.stderr]
        return f"message lacks {missing}: {outcome.stderr.strip()[-300:]}" if missing else ""
    return check


def _trace(name: str, text: str | bytes, *fragments: str, expect=ERROR, file: str = "t.csv", extra=()) -> Case:
    """``netsim trace-check FILE`` on ``text``; the message must hold ``fragments``."""
    return Case(f"trace: {name}", "trace", ["trace-check", file, *extra], {file: text}, expect=expect,
                check=_says(*fragments) if fragments else None)


def _user(name: str, user: str) -> Callable[[Path, Outcome], str]:
    """A check: the trace reads back with this user (nothing cut)."""
    def check(cwd: Path, _outcome: Outcome) -> str:
        from netsim.cluster.trace import read_trace
        got = read_trace(cwd / name).jobs["user"][0]
        return "" if got == user else f"user read as {got!r}, not {user!r}"
    return check


def _rows(*rows: str, head: str = HEAD) -> str:
    return head + "".join(r + "\n" for r in rows)


def _file_cases() -> list[Case]:
    """The file itself: missing, a directory, a device, a loop, binary, empty, too large."""
    return [Case("trace: missing file", "trace", ["trace-check", "nope.csv"], check=_says("nope.csv", "not found")),
         Case("trace: a symlink to /dev/zero", "trace", ["trace-check", "z.csv"],
              setup=lambda cwd: os.symlink("/dev/zero", cwd / "z.csv"), check=_says("z.csv", "not a regular file")),
         Case("trace: a symlink loop", "trace", ["trace-check", "l.csv"],
              setup=lambda cwd: os.symlink("l.csv", cwd / "l.csv"), check=_says("l.csv", "symlink loop")),
         Case("trace: a directory", "trace", ["trace-check", "d.csv"], setup=lambda cwd: (cwd / "d.csv").mkdir(),
              check=_says("d.csv", "directory")),
         Case("trace: a fifo", "trace", ["trace-check", "f.csv"], setup=lambda cwd: os.mkfifo(cwd / "f.csv"),
              check=_says("f.csv", "not a regular file"), timeout=10),
         Case("trace: a dangling symlink", "trace", ["trace-check", "g.csv"],
              setup=lambda cwd: os.symlink("gone.csv", cwd / "g.csv"), check=_says("g.csv", "missing file")),
         _trace("empty file", "", "t.csv", "empty"),
         _trace("comments only", "# nothing\n\n   \n", "t.csv", "empty"),
         _trace("Latin-1 byte", _rows(GOOD).encode() + b"j1,0,8,gpt-3.6b,8,1,1,2,,b\xe9b\n", "t.csv:3:", "UTF-8"),
         _trace("NUL byte", _rows(GOOD).encode() + b"j1,0,8,gpt-3.6b\x00,8,1,1,2,,\n", "t.csv:3:", "NUL"),
         _trace("a gzip file named .csv", b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4, "t.csv", "UTF-8"),
         _trace("wrong extension", _rows(GOOD), "t.txt", ".csv or .parquet", file="t.txt"),
         _trace("old Mac line ends", _rows(GOOD, "j1,0,8,gpt-3.6b,8,1,1,2,,").replace("\n", "\r"), "t.csv:1:",
                "carriage return"),
         _trace("Windows line ends read", _rows(GOOD, "j1,0,8,gpt-3.6b,8,1,1,2,,").replace("\n", "\r\n"),
                expect=OK),
         _trace("a byte-order mark read", "\ufeff" + _rows(GOOD), expect=OK),
         Case("trace: too large", "trace", ["trace-check", "big.csv"],
              setup=lambda cwd: _sparse(cwd / "big.csv", 300 * 2**20), check=_says("big.csv", "too large")),
         Case("trace: more than 1,000,000 jobs", "trace", ["trace-check", "many.csv"],
              setup=lambda cwd: _many(cwd / "many.csv", 1_000_001, short=True),
              check=_says("many.csv:1000002:", "at most 1,000,000"), timeout=60)]


def _layout_cases() -> list[Case]:
    """The CSV layout: fields per line, quotes, comments, blank lines (the line numbers must stay right)."""
    return [
        _trace("trailing comma", _rows(GOOD, "j1,0,8,gpt-3.6b,8,1,1,2,,bob,"), "t.csv:3:", "11 fields",
               "header has 10"),
        _trace("a value with an unquoted comma", _rows("j1,0,8,gpt-3.6b,8,1,1,2,,smith, bob"), "t.csv:2:",
               "comma inside a value"),
        _trace("a line short of fields", _rows(GOOD, "j1,0,8,gpt-3.6b"), "t.csv:3:", "4 fields", "no tp"),
        _trace("a quoted value across lines", _rows(GOOD, 'j1,0,8,gpt-3.6b,8,1,1,2,,"bob', 'smith"'), "t.csv:3:",
               "past the end of the line"),
        _trace("an unclosed quote swallows nothing", _rows('j0,0,8,gpt-3.6b,8,1,1,2,,"bob', GOOD.replace("j0", "j1")),
               "t.csv:2:", "unclosed"),
        _trace("a quoted comma read", _rows('j0,0,8,gpt-3.6b,8,1,1,2,,"smith, bob"'), expect=OK),
        Case("trace: a '#' inside a field is data", "trace", ["trace-check", "t.csv"],
             {"t.csv": _rows("j0,0,8,gpt-3.6b,8,1,1,2,,team#1")}, expect=OK, check=_user("t.csv", "team#1")),
        _trace("a '#' inside a job name is refused, not cut", _rows("j#0,0,8,gpt-3.6b,8,1,1,2,,"), "t.csv:2:",
               "column 'job'", "'j#0'"),
        _trace("a '#' cutting a number", _rows("j0,0,8,gpt-3.6b,8,1,1,2#3,,"), "t.csv:2:", "column 'iterations'",
               "'2#3'"),
        _trace("line numbers after blank and comment lines",
               "# head\n\n" + HEAD + "\n" + GOOD + "\n   \n# c\n  # indented comment\n" + "j1,0,8,gpt-3.6b,8,1,1,x,,\n",
               "t.csv:9:", "column 'iterations'", "'x'"),
        _trace("duplicate column", "job,submit_s,gpus,gpus,model,iterations\nj,0,8,8,gpt-3.6b,1\n", "t.csv:1:",
               "column 'gpus' appears twice", "columns 3 and 4"),
        _trace("a header with an empty name", "job,submit_s,gpus,,model,iterations\nj,0,8,,gpt-3.6b,1\n", "t.csv:1:",
               "column 4 of the header has no name"),
        _trace("header only", HEAD, "t.csv:1:", "no jobs"),
        _trace("unknown column", "job,submit_s,gpus,modle,iterations\nj,0,8,gpt-3.6b,1\n", "t.csv:1:",
               "unknown column 'modle'", "did you mean 'model'"),
        _trace("missing required column", "job,submit_s,model,iterations\nj,0,gpt-3.6b,1\n", "t.csv:1:",
               "missing required column 'gpus'"),
        _trace("neither iterations nor duration column", "job,submit_s,gpus,model\nj,0,8,gpt-3.6b\n", "t.csv:1:",
               "iterations or duration_s"),
        _trace("submit and submit_s", "job,submit,submit_s,gpus,model,iterations\nj,0,0,8,gpt-3.6b,1\n",
               "t.csv:1:", "not both"),
        _trace("a header in capitals", "JOB,SUBMIT_S,GPUS,MODEL,ITERATIONS\nj,0,8,gpt-3.6b,1\n", "t.csv:1:",
               "unknown column 'JOB'"),
        _trace("a header with blanks read", " job , submit_s ,gpus,model,iterations\nj , 0 ,8,gpt-3.6b,1\n",
               expect=OK),
    ]


def _value_cases() -> list[Case]:
    """Each column's values: types, ranges, integers, duplicates."""
    def row(**cells) -> str:
        base = dict(job="j1", submit_s="0", gpus="8", model="gpt-3.6b", tp="8", pp="1", dp="1", iterations="2",
                    duration_s="", user="")
        return _rows(GOOD, ",".join((base | cells).values()))
    return [
        _trace("gpus 2.5", row(gpus="2.5", tp="", dp=""), "t.csv:3:", "column 'gpus'", "whole number", "'2.5'"),
        _trace("gpus 0", row(gpus="0"), "t.csv:3:", "column 'gpus'", "'0'"),
        _trace("gpus -8", row(gpus="-8"), "t.csv:3:", "column 'gpus'"),
        _trace("gpus 1e30", row(gpus="1e30"), "t.csv:3:", "column 'gpus'", "'1e30'"),
        _trace("gpus True", row(gpus="True"), "t.csv:3:", "column 'gpus'", "'True'"),
        _trace("gpus 0x8", row(gpus="0x8"), "t.csv:3:", "column 'gpus'"),
        _trace("gpus empty", row(gpus=""), "t.csv:3:", "column 'gpus'", "missing GPU count"),
        _trace("gpus above --max-gpus", row(gpus="256", tp="8", dp="32"), "t.csv:3:", "1 to 128 (the cluster's GPUs)",
               extra=("--max-gpus", "128")),
        _trace("--max-gpus 0", _rows(GOOD), "--max-gpus", "from 1 to", extra=("--max-gpus", "0")),
        _trace("submit 3.2e10 (ms, not s)", row(submit_s="3.2e10"), "t.csv:3:", "column 'submit_s'", "'3.2e10'"),
        _trace("submit nan", row(submit_s="nan"), "t.csv:3:", "column 'submit_s'", "'nan'"),
        _trace("submit inf", row(submit_s="inf"), "t.csv:3:", "column 'submit_s'"),
        _trace("submit -1", row(submit_s="-1"), "t.csv:3:", "column 'submit_s'"),
        _trace("submit empty", row(submit_s=""), "t.csv:3:", "missing submit time"),
        _trace("submit with units bad", "job,submit,gpus,model,iterations\nj,1h,8,gpt-3.6b,1\nk,2 weeks,8,gpt-3.6b,1\n",
               "t.csv:3:", "column 'submit'", "'2 weeks'"),
        _trace("submit with units too late", "job,submit,gpus,model,iterations\nj,1h,8,gpt-3.6b,1\nk,1e300d,8,"
               "gpt-3.6b,1\n", "t.csv:3:", "column 'submit'", "1e+09"),
        _trace("submit with units read", "job,submit,gpus,model,iterations\nj,1h,8,gpt-3.6b,1\nk,90,8,gpt-3.6b,1\n",
               expect=OK),
        _trace("iterations 0", row(iterations="0"), "t.csv:3:", "column 'iterations'"),
        _trace("iterations 2.5", row(iterations="2.5"), "t.csv:3:", "column 'iterations'", "'2.5'"),
        _trace("iterations above the limit", row(iterations="1000001"), "t.csv:3:", "1,000,000"),
        _trace("iterations and duration", row(duration_s="60"), "t.csv:3:", "not both"),
        _trace("neither iterations nor duration", row(iterations=""), "t.csv:3:", "neither"),
        _trace("duration 0", row(iterations="", duration_s="0"), "t.csv:3:", "column 'duration_s'", "above 0"),
        _trace("duration 1e300", row(iterations="", duration_s="1e300"), "t.csv:3:", "column 'duration_s'"),
        _trace("tp 2.5", row(tp="2.5"), "t.csv:3:", "column 'tp'", "'2.5'"),
        _trace("tp x pp x dp wrong", row(dp="2"), "t.csv:3:", "column 'dp'", "8 x 1 x 2 = 16"),
        _trace("pp above the layers", row(gpus="64", tp="1", pp="64", dp="1"), "t.csv:3:", "column 'pp'", "layers"),
        _trace("global batch not a multiple", row(gpus="24", tp="8", dp="3"), "t.csv:3:", "global_batch"),
        _trace("ep on a dense model", "job,submit_s,gpus,model,ep,iterations\nj,0,8,gpt-3.6b,2,1\n", "t.csv:2:",
               "column 'ep'", "dense"),
        _trace("unknown model", row(model="gpt-7.5"), "t.csv:3:", "column 'model'", "did you mean 'gpt-7.5b'"),
        _trace("model a path", row(model="../workloads/gpt-3.6b"), "t.csv:3:", "column 'model'"),
        _trace("model empty", row(model=""), "t.csv:3:", "missing model"),
        _trace("collective with tp", row(model="collective:allreduce:ring:1MiB", tp="2", dp="4"), "t.csv:3:",
               "column 'tp'", "one communicator"),
        _trace("collective bad size", row(model="collective:allreduce:ring:1e30GiB", tp="", dp=""), "t.csv:3:",
               "column 'model'"),
        _trace("collective unknown algorithm", row(model="collective:allreduce:rong:1MiB", tp="", dp=""),
               "t.csv:3:", "did you mean 'ring'"),
        _trace("duplicate job", row(job="j0"), "t.csv:3:", "duplicate job 'j0'", "first on line 2"),
        _trace("job with a space", row(job="my job"), "t.csv:3:", "column 'job'"),
        _trace("job of 10,000 characters", row(job="j" * 10_000), "t.csv:3:", "more characters"),
        _trace("user with a control character", row(user="a\x07b"), "t.csv:3:", "column 'user'"),
        _trace("user of 300 characters", row(user="u" * 300), "t.csv:3:", "column 'user'"),
        _trace("priority 1.5", "job,submit_s,gpus,model,iterations,priority\nj,0,8,gpt-3.6b,1,1.5\n", "t.csv:2:",
               "column 'priority'"),
        _trace("a 1 MB cell", row(user="x" * 2**20), "t.csv:3:", "more characters"),
        _trace("the error on the first bad row of many", _rows(*[f"j{i},0,8,gpt-3.6b,8,1,1,2,," for i in range(500)],
                                                              "k,0,8,gpt-3.6b,8,1,3,2,,",
                                                              "k2,0,8,gpt-3.6b,8,1,5,2,,"), "t.csv:502:",
               "8 x 1 x 3"),
    ]


def _parquet(frame_or_table, name: str = "t.parquet") -> Callable[[Path], None]:
    """A setup writing a Parquet file (a pandas frame, or a pyarrow table)."""
    def setup(cwd: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        table = frame_or_table() if callable(frame_or_table) else frame_or_table
        if not isinstance(table, pa.Table):
            table = pa.Table.from_pandas(table, preserve_index=False)
        pq.write_table(table, cwd / name)
    return setup


def _parquet_cases() -> list[Case]:
    import pandas as pd
    import pyarrow as pa

    def frame(**over):
        base = {"job": ["a", "b", "c"], "submit_s": [0.0, 1.0, 2.0], "gpus": [8, 8, 8],
                "model": ["gpt-3.6b"] * 3, "iterations": [1, 1, 1]}
        return pd.DataFrame(base | over)

    def case(name, setup, *fragments, expect=ERROR):
        return Case(f"trace: parquet {name}", "trace", ["trace-check", "t.parquet"], setup=setup, expect=expect,
                    check=_says(*fragments) if fragments else None)

    def repeated():
        return pa.table([pa.array(["a"]), pa.array([0.0]), pa.array([8]), pa.array([8]), pa.array(["gpt-3.6b"]),
                         pa.array([1])], names=["job", "submit_s", "gpus", "gpus", "model", "iterations"])

    def bomb():
        n = 1_000_000
        return pa.table({"job": pa.array([f"j{i}" for i in range(n)]), "submit_s": pa.array(np.zeros(n)),
                         "gpus": pa.array(np.full(n, 8)), "model": pa.array(["gpt-3.6b"] * n),
                         "iterations": pa.array(np.ones(n, dtype=np.int64)),
                         "user": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)),
                                                                pa.array(["u" * 1000]))})
    return [
        case("read", _parquet(frame()), expect=OK),
        case("gpus 0 on row 2", _parquet(frame(gpus=[8, 0, 8])), "t.parquet: row 2, column 'gpus'", "got 0"),
        case("gpus 2.5", _parquet(frame(gpus=[8.0, 8.0, 2.5])), "t.parquet: row 3, column 'gpus'", "got 2.5"),
        case("submit 3.2e10", _parquet(frame(submit_s=[0.0, 3.2e10, 1.0])), "row 2, column 'submit_s'",
             "32000000000.0"),
        case("gpus as booleans", _parquet(frame(gpus=[True, True, True])), "row 1, column 'gpus'", "True"),
        case("gpus as text", _parquet(frame(gpus=["8", "8", "x"])), "row 3, column 'gpus'", "'x'"),
        case("a list column", _parquet(frame(gpus=[[8], [8], [8]])), "column 'gpus'", "expected numbers or text"),
        case("a timestamp column", _parquet(frame(submit_s=pd.to_datetime(["2020-01-01"] * 3))),
             "column 'submit_s'", "expected numbers or text"),
        case("duplicate column", _parquet(repeated), "t.parquet", "'gpus' appears 2 times"),
        case("duplicate job", _parquet(frame(job=["a", "b", "a"])), "row 3, column 'job'", "first on row 1"),
        case("not Parquet", lambda cwd: (cwd / "t.parquet").write_text("job,submit_s\n"), "t.parquet",
             "not a readable Parquet file"),
        case("truncated", lambda cwd: (_parquet(frame())(cwd), (cwd / "t.parquet").write_bytes(
            (cwd / "t.parquet").read_bytes()[:-20])), "t.parquet", "not a readable Parquet file"),
        case("text that decodes to gigabytes", _parquet(bomb), "t.parquet", "decodes to more than"),
        case("empty", _parquet(frame().iloc[:0]), "t.parquet", "no jobs"),
    ]


def _run_cases() -> list[Case]:
    """An experiment naming a bad trace: exit 2 before anything runs, the trace's file and line named."""
    exp = ("name: c\ntopology: {type: leaf_spine, leaves: 2, spines: 2, hosts_per_leaf: 2, gpus_per_host: 8,\n"
           "  nic: {bandwidth: 200Gbps}, uplink: {bandwidth: 400Gbps}, intra_host: {bandwidth: 900GB/s}}\n"
           "cluster: {trace: t.csv}\n")
    return [
        Case("trace: validate on a trace with a bad row", "trace", ["validate", "exp.yaml"],
             {"exp.yaml": exp, "t.csv": _rows(GOOD, "j1,0,8,gpt-3.6b,8,1,2,2,,")}, check=_says("t.csv:3:", "dp")),
        Case("trace: run on a trace with a job above the cluster", "trace", ["run", "exp.yaml", "--out", "res"],
             {"exp.yaml": exp, "t.csv": _rows(GOOD, "j1,0,64,gpt-3.6b,8,1,8,2,,")},
             check=_says("t.csv:3:", "(the cluster's GPUs)")),
        Case("trace: run on a trace that is a symlink to /dev/zero", "trace", ["run", "exp.yaml", "--out", "res"],
             {"exp.yaml": exp}, setup=lambda cwd: os.symlink("/dev/zero", cwd / "t.csv"),
             check=_says("t.csv", "not a regular file")),
    ]


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        f.write(HEAD.encode())
        f.truncate(size)


def _many(path: Path, n: int, short: bool = False) -> None:
    """A trace of ``n`` valid jobs (the 1,000,000-job check)."""
    head = "job,submit_s,gpus,model,iterations\n" if short else "job,submit_s,gpus,model,tp,pp,dp,duration_s\n"
    sizes = ("8,gpt-3.6b,8,1,1", "16,gpt-3.6b,8,2,1", "32,gpt-7.5b,8,2,2", "64,gpt-22b,8,2,4")
    with open(path, "w") as f:
        f.write(head)
        out = io.StringIO()
        for i in range(n):
            out.write(f"j{i},{i * 0.09:.2f},8,gpt-3.6b,1\n" if short else
                      f"job-{i:07d},{i * 0.09:.2f},{sizes[i % 4]},{600 + i % 5000}\n")
        f.write(out.getvalue())


def _big_cases() -> list[Case]:
    return [Case("trace: 1,000,000 jobs checked", "trace", ["trace-check", "big.csv"],
                 setup=lambda cwd: _many(cwd / "big.csv", 1_000_000), expect=OK, timeout=60,
                 check=lambda cwd, o: "" if "1,000,000" in o.stdout else "no summary of 1,000,000 jobs")]


def mutate(text: str, rng: np.random.Generator) -> tuple[str, str | bytes]:
    """(what was done, the mutated trace) for one draw of ``rng``: a cell, a line or a byte changed."""
    lines = text.splitlines(keepends=True)
    data = [i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")]
    i = data[int(rng.integers(1, len(data)))] if len(data) > 1 else data[0]
    cells = lines[i].rstrip("\n").split(",")
    k = int(rng.integers(len(cells)))
    odd = ["", "-1", "0", "2.5", "1e30", "nan", "inf", "x", "#", "8#2", '"', "True", " 8 ", "1" * 400, "\u202e",
           "gpt-3.6b", "collective:allreduce:ring:1MiB", "99999999999999999999", "-0", "1e3"]
    op = int(rng.integers(8))
    if op <= 2:
        cells[k] = odd[int(rng.integers(len(odd)))]
        what = f"line {i + 1} cell {k + 1} set to {cells[k][:12]!r}"
    elif op == 3:
        what = f"line {i + 1} cell {k + 1} deleted"
        del cells[k]
    elif op == 4:
        cells.insert(k, cells[k])
        what = f"line {i + 1} cell {k + 1} doubled"
    elif op == 5:
        return f"line {i + 1} duplicated", "".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])
    elif op == 6:
        at = int(rng.integers(len(text)))
        byte = bytes([int(rng.choice([0, 0xFF, 0xC3, 0x0D, 0x22, 0x23, 0x2C]))])
        raw = text.encode()
        return f"byte {byte!r} inserted at {at}", raw[:at] + byte + raw[at:]
    else:
        cut = int(rng.integers(len(text)))
        return f"truncated at {cut}", text[:cut]
    lines[i] = ",".join(cells) + "\n"
    return what, "".join(lines)


def _located(_cwd: Path, outcome: Outcome) -> str:
    """A check for mutations: an error names the file and, when about a line, the line."""
    if outcome.outcome != "error":
        return ""
    message = outcome.stderr.strip()
    return "" if re.search(r"mut\.csv(:\d+)?: ", message) else f"message names no file: {message[-200:]}"


def _generated() -> list[Case]:
    cases = []
    for path in SHIPPED:
        text = path.read_text()
        for k in range(PER_FILE):
            rng = np.random.default_rng([zlib.crc32(path.name.encode()), k])
            what, mutated = mutate(text, rng)
            cases.append(Case(f"trace: {path.name}: {what}", "trace", ["trace-check", "mut.csv"], {"mut.csv": mutated},
                              expect=EITHER, check=_located))
    return cases


# ------------------------------------------------------------------------------------ trace-synth
def _synth(name: str, *args: str, fragments=(), expect=ERROR, out: str = "o.csv", timeout: float = 30.0,
           **kw) -> Case:
    check = kw.pop("check", None) or (_says(*fragments) if fragments else None)
    return Case(f"synth: {name}", "synth", ["trace-synth", out, *args], expect=expect, check=check, timeout=timeout,
                **kw)


def _written(name: str, jobs: int) -> Callable[[Path, Outcome], str]:
    """A check: the written trace reads back with ``jobs`` jobs."""
    def check(cwd: Path, _outcome: Outcome) -> str:
        from netsim.cluster.trace import read_trace
        trace = read_trace(cwd / name)
        return "" if len(trace) == jobs else f"{len(trace)} jobs read back, not {jobs}"
    return check


def _untouched(name: str, text: str) -> Callable[[Path, Outcome], str]:
    def check(cwd: Path, _outcome: Outcome) -> str:
        return "" if (cwd / name).read_text() == text else f"{name} was overwritten"
    return check


def _synth_cases() -> list[Case]:
    bad = [("--sizes 8:inf", ["--sizes", "8:inf"], ["--sizes", "finite weight"]),
           ("--sizes 8:nan", ["--sizes", "8:nan"], ["--sizes"]),
           ("--sizes 8:-1", ["--sizes", "8:-1"], ["--sizes"]),
           ("--sizes 8:0", ["--sizes", "8:0"], ["--sizes", "above 0"]),
           ("--sizes 0:1", ["--sizes", "0:1"], ["--sizes", "GPU counts"]),
           ("--sizes 1e3:1", ["--sizes", "1e3:1"], ["--sizes", "KEY:WEIGHT"]),
           ("--sizes 8:1,8:1", ["--sizes", "8:1,8:1"], ["--sizes", "twice"]),
           ("--sizes empty", ["--sizes", ""], ["--sizes", "KEY:WEIGHT"]),
           ("--sizes 8", ["--sizes", "8"], ["--sizes"]),
           ("--sizes 8:1,", ["--sizes", "8:1,"], ["--sizes"]),
           ("--sizes above every cluster", ["--sizes", "99999999999:1"], ["--sizes", "2,000,000"]),
           ("--sizes all above the cluster", ["--sizes", "2048:1"], ["--sizes", "at most 1,024"]),
           ("--sizes weights overflow", ["--sizes", "8:1e308,16:1e308"], ["--sizes", "add up"]),
           ("--models unknown", ["--models", "gpt-9:1"], ["--models", "unknown model"]),
           ("--models a path", ["--models", "../workloads/gpt-3.6b:1"], ["--models"]),
           ("--models weight inf", ["--models", "gpt-3.6b:inf"], ["--models"]),
           ("--models empty", ["--models", ""], ["--models"]),
           ("--models twice", ["--models", "gpt-3.6b:1,gpt-3.6b:2"], ["--models", "twice"]),
           ("--seed -1", ["--seed", "-1"], ["--seed"]),
           ("--seed 2**64", ["--seed", str(2**64)], ["--seed"]),
           ("--jobs 0", ["--jobs", "0"], ["--jobs"]),
           ("--jobs -5", ["--jobs", "-5"], ["--jobs"]),
           ("--jobs above the limit", ["--jobs", "1000001"], ["--jobs", "1,000,000"]),
           ("--jobs 10**12", ["--jobs", str(10**12)], ["--jobs"]),
           ("--rate 0", ["--rate", "0"], ["--rate"]),
           ("--rate -1", ["--rate", "-1"], ["--rate"]),
           ("--rate nan", ["--rate", "nan"], ["--rate"]),
           ("--rate inf", ["--rate", "inf"], ["--rate"]),
           ("--rate 1e-300", ["--rate", "1e-300"], ["--rate", "1e+09"]),
           ("--span -1", ["--span", "-1"], ["--span"]),
           ("--span 1e300", ["--span", "1e300"], ["--span"]),
           ("--span 100 years", ["--span", "40000d"], ["--span", "1e+09"]),
           ("--span nonsense", ["--span", "soon"], ["--span"]),
           ("--gpus 0", ["--gpus", "0"], ["--gpus"]),
           ("--gpus 10**14", ["--gpus", str(10**14)], ["--gpus"]),
           ("--gpus 4 (no size fits)", ["--gpus", "4"], ["--sizes", "at most 4"]),
           ("--iterations 0", ["--iterations", "0"], ["--iterations"]),
           ("--iterations 10**7", ["--iterations", str(10**7)], ["--iterations"]),
           ("--median-duration 0", ["--median-duration", "0"], ["--median-duration"]),
           ("--median-duration 1s", ["--median-duration", "1s"], ["--median-duration", "60 s"]),
           ("--median-duration 1e300", ["--median-duration", "1e300"], ["--median-duration"]),
           ("--median-duration 10y", ["--median-duration", "10y"], ["--median-duration"]),
           ("--sigma -1", ["--sigma", "-1"], ["--sigma"]),
           ("--sigma inf", ["--sigma", "inf"], ["--sigma"]),
           ("--sigma nan", ["--sigma", "nan"], ["--sigma"]),
           ("--sigma 1e308", ["--sigma", "1e308"], ["--sigma"])]
    cases = [_synth(name, *args, fragments=tuple(fr)) for name, args, fr in bad]
    cases += [
        _synth("output .txt", out="o.txt", fragments=("OUT", ".csv or .parquet")),
        _synth("output .yaml", out="o.yaml", fragments=("OUT",)),
        _synth("output with no extension", out="o", fragments=("OUT",)),
        _synth("output a directory", out="d.csv", setup=lambda cwd: (cwd / "d.csv").mkdir(), fragments=("d.csv",)),
        _synth("output exists", out="keep.csv", files={"keep.csv": "mine\n"},
               check=_untouched("keep.csv", "mine\n")),
        _synth("output in a missing folder", out="no/such/o.csv", expect=EITHER),
        _synth("output under /proc", out="/proc/o.csv"),
        _synth("output .CSV in capitals written as CSV", "--jobs", "5", out="o.CSV", expect=OK,
               check=lambda cwd, o: "" if (cwd / "o.CSV").read_text().startswith("job,") else "not CSV"),
        _synth("output a symlink to a preset", "--force", out="p.csv", setup=lambda cwd: (
            (cwd / "workloads").mkdir(), (cwd / "workloads/gpt-3.6b.yaml").write_text(
                (REPO / "workloads/gpt-3.6b.yaml").read_text()),
            os.symlink("workloads/gpt-3.6b.yaml", cwd / "p.csv")), expect=ERROR,
            check=lambda cwd, o: "" if (cwd / "workloads/gpt-3.6b.yaml").read_text().startswith(
                (REPO / "workloads/gpt-3.6b.yaml").read_text()[:20]) else "the preset was overwritten"),
        _synth("written and read back", "--jobs", "50", "--seed", "3", expect=OK, check=_written("o.csv", 50)),
        _synth("Parquet written and read back", "--jobs", "50", out="o.parquet", expect=OK,
               check=_written("o.parquet", 50)),
        _synth(".pq written as Parquet", "--jobs", "20", out="o.pq", expect=OK, check=_written("o.pq", 20)),
        _synth("--span 0 (all at once)", "--span", "0", "--jobs", "20", expect=OK, check=_written("o.csv", 20)),
        _synth("--sizes 3:1 (an odd size)", "--sizes", "3:1", "--jobs", "20", expect=OK, check=_written("o.csv", 20)),
        _synth("--seed 2**63-1", "--seed", str(2**63 - 1), "--jobs", "20", expect=OK),
        _synth("--rate 1e9 (all within a second)", "--rate", "1e9", "--jobs", "20", expect=OK),
        _synth("a moe model mix", "--models", "mixtral-8x7b:1", "--jobs", "20", expect=OK,
               check=_written("o.csv", 20)),
        _synth("1,000,000 jobs", "--jobs", "1000000", expect=OK, timeout=120,
               check=lambda cwd, o: "" if (cwd / "o.csv").stat().st_size > 10**7 else "o.csv not written"),
    ]
    return cases


def cases() -> list:
    """This surface's cases."""
    return [*_file_cases(), *_layout_cases(), *_value_cases(), *_parquet_cases(), *_run_cases(), *_big_cases(),
            *_generated(), *_synth_cases()]

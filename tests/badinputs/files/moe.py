"""Bad-input cases: MoE routing-matrix files (``workload.moe.routing: {type: file, path: picks.csv}``).

Hand-written cases cover each column's values (non-numbers, NaN, infinities, negatives, fractions,
ranks past the EP group, tokens past what a micro-batch can route), the header (missing, repeated,
unknown columns), the shape (a file written for a smaller EP group, duplicate rows, steps with
nothing to send), damaged and odd files (encodings, devices, Parquet named as CSV) and Parquet
files; generated ones mutate a valid picks file, as docs/moe.md writes it, with a fixed seed. A
case whose file is wrong expects a clean error and, for most, checks that the message names the
file and the line (CSV) or row (Parquet).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from tests.badinputs.files.mutations import mutate_csv
from tests.badinputs.harness import Case, says

KIND = "moe"
ERROR = frozenset({"error"})
OK = frozenset({"ok"})
EITHER = frozenset({"ok", "error"})
HEADER = "step,src,dst,tokens\n"
#: Mutations of the valid picks file.
MUTATIONS = 16
#: A micro-batch routes micro_batch x seq_len x top_k = 1 x 512 x 2 picks per rank.
PICKS_PER_RANK = 1024


def experiment(path: str = "picks.csv") -> str:
    """The MoE job of docs/moe.md's example, shrunk: 8 GPUs, 2 layers, 8 EP ranks, ``path`` its matrix."""
    return yaml.safe_dump({
        "name": "moe-file", "seed": 1,
        "topology": {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 1, "gpus_per_host": 4,
                     "nics_per_host": 4, "nic": {"bandwidth": "400Gbps"}, "uplink": {"bandwidth": "400Gbps"},
                     "intra_host": {"bandwidth": "900GB/s"}},
        "workload": {"type": "training", "gpu": "h100",
                     "model": {"layers": 2, "hidden": 512, "heads": 8, "seq_len": 512, "vocab": 32000,
                               "micro_batch": 1, "global_batch": 8},
                     "parallelism": {"pp": 1, "dp": 8},
                     "moe": {"experts": 16, "top_k": 2, "ep": 8, "expert_hidden": 1024, "dispatch_bytes": 1,
                             "routing": {"type": "file", "path": path}}}}, sort_keys=False)


def ring(tokens: object = 100, step: int = 0) -> str:
    """The rows of one step: each of the 8 ranks sends ``tokens`` pairs to its right-hand neighbour."""
    return "".join(f"{step},{i},{(i + 1) % 8},{tokens}\n" for i in range(8))


GOOD = HEADER + ring(100, 0) + ring(60, 1)


def parquet(columns: dict, schema: pa.Schema | None = None) -> bytes:
    """A Parquet file of ``columns`` as bytes."""
    sink = pa.BufferOutputStream()
    table = pa.table(columns, schema=schema) if schema is not None else pa.table(columns)
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def good_columns() -> dict:
    """The columns of :data:`GOOD`."""
    rows = [tuple(int(v) for v in line.split(",")) for line in GOOD.splitlines()[1:]]
    return {name: [r[k] for r in rows] for k, name in enumerate(("step", "src", "dst", "tokens"))}


def case(name: str, picks: str | bytes, *, command: str = "validate", expect=ERROR, check=None,
         file: str = "picks.csv", **kw) -> Case:
    """``netsim COMMAND exp.yaml`` with ``picks`` as the routing matrix ``file``."""
    files = {"exp.yaml": experiment(file), file: picks} if picks is not None else {"exp.yaml": experiment(file)}
    return Case(name, KIND, [command, "exp.yaml"], files, expect=expect, check=check, **kw)


def _link(target: str, name: str = "picks.csv"):
    def setup(cwd: Path) -> None:
        os.symlink(target, cwd / name)
    return setup


def _sparse(size: int, name: str = "picks.csv"):
    def setup(cwd: Path) -> None:
        with open(cwd / name, "wb") as f:
            f.write(HEADER.encode())
            f.truncate(size)
    return setup


def value_cases() -> list[Case]:
    """Bad cells, one column at a time; the message names the file, the line and the column."""
    out = []
    bad = {"tokens": ["nan", "NaN", "inf", "-inf", "", "ten", "1_000", "\u0661\u0660\u0660", "-5", "1.5", "1e30",
                      "1e20", "0x10", "NA", "100 200"],
           "src": ["8", "-1", "1.5", "x", "", "1e3", "9223372036854775808"],
           "dst": ["8", "-3", "0.25", "inf"],
           "step": ["-1", "0.5", "nan", "1e300", "two"]}
    for column, values in bad.items():
        for value in values:
            cells = {"step": "0", "src": "2", "dst": "3", "tokens": "100", column: value}
            row = ",".join(cells[c] for c in ("step", "src", "dst", "tokens"))
            text = HEADER + ring(100) + row + "\n"
            out.append(case(f"{column} is {value!r}", text, check=says("picks.csv:10:", column)))
    return out


def shape_cases() -> list[Case]:
    """Header, shape and meaning: what reads as numbers but would mean something else."""
    out = [
        case("all zeros", HEADER + ring(0), command="run", check=says("picks.csv:2:", "step 0")),
        case("all zeros (validate)", HEADER + ring(0), check=says("picks.csv:2:", "step 0")),
        case("only the diagonal", HEADER + "".join(f"0,{i},{i},100\n" for i in range(8)), command="run",
             check=says("picks.csv:2:")),
        case("one step of zeros among good ones", GOOD + ring(0, 7), check=says("picks.csv:18:", "step 7")),
        case("tokens of 1e30 (run)", HEADER + ring("1e30"), command="run", check=says("picks.csv:2:", "tokens")),
        case("a rank sends more than a micro-batch routes", HEADER + ring(PICKS_PER_RANK + 1),
             check=says("picks.csv:2:", "1,024")),
        case("a rank's row sums past a micro-batch", HEADER + ring(600) + "0,0,5,600\n",
             check=says("picks.csv:2:", "1,200")),
        case("written for an EP group of 4", HEADER + "".join(f"0,{i},{(i + 1) % 4},100\n" for i in range(4)),
             check=says("picks.csv", "ep")),
        case("duplicate row", HEADER + ring(100) + "0,3,4,100\n", check=says("picks.csv:10:", "line 5")),
        case("missing column tokens", "step,src,dst\n0,0,1\n", check=says("picks.csv:1:", "tokens")),
        case("unknown column layer", "step,src,dst,tokens,layer\n" + ring(100).replace("\n", ",0\n"),
             check=says("picks.csv:1:", "'layer'")),
        case("repeated column", "step,src,dst,tokens,tokens\n" + ring(100).replace("\n", ",5\n"),
             check=says("picks.csv:1:", "tokens")),
        case("misspelled column", "step,src,dst,Tokens\n" + ring(100), check=says("picks.csv:1:", "'Tokens'")),
        case("no header", ring(100), check=says("picks.csv:1:", "header")),
        case("empty file", "", check=says("picks.csv", "empty")),
        case("only blank lines", "\n\n  \n", check=says("picks.csv")),
        case("header only", HEADER, check=says("picks.csv", "no rows")),
        case("a row with three fields", HEADER + ring(100) + "0,1,2\n", check=says("picks.csv:10:")),
        case("a row with five fields", HEADER + ring(100) + "0,1,2,3,4\n", check=says("picks.csv:10:")),
        case("a trailing comma on every row", HEADER + ring(100).replace("\n", ",\n"), check=says("picks.csv:2:")),
        case("a quoted cell spanning lines", HEADER + ring(100) + '0,1,2,"10\n0"\n', check=says("picks.csv")),
        case("the error after blank lines names its line", HEADER + "\n" + ring(100) + "\n\n0,1,2,-4\n",
             check=says("picks.csv:13:")),
        case("semicolon separated", HEADER.replace(",", ";") + ring(100).replace(",", ";"),
             check=says("picks.csv:1:")),
        case("a 300,000-digit cell", HEADER + ring(100) + "0,1,2," + "1" * 300_000 + "\n", check=says("picks.csv:10:")),
        case("a 300,000-character header", "x" * 300_000 + "\n" + ring(100), check=says("picks.csv:1:")),
        case("a 300,000-character quoted cell", HEADER + ring(100) + '0,1,2,"' + "1" * 300_000 + '"\n',
             check=says("picks.csv:10:")),
        case("ranks are GPU numbers past ep", HEADER + "".join(f"0,{i},{i + 8},100\n" for i in range(8)),
             check=says("picks.csv:2:", "dst")),
    ]
    return out


def file_cases() -> list[Case]:
    """Operating-system and encoding trouble: every one a clean error naming the file."""
    return [
        case("missing file", None, check=says("picks.csv", "not found")),
        case("a directory", None, setup=lambda cwd: (cwd / "picks.csv").mkdir(), check=says("picks.csv", "directory")),
        case("a symlink to /dev/zero", None, setup=_link("/dev/zero"), check=says("picks.csv")),
        case("a symlink to /dev/urandom", None, setup=_link("/dev/urandom"), check=says("picks.csv")),
        case("a symlink loop", None, setup=_link("picks.csv"), check=says("picks.csv", "loop")),
        case("a dangling symlink", None, setup=_link("gone.csv"), check=says("picks.csv")),
        case("a sparse file past the size cap", None, setup=_sparse(3 * 2**30), check=says("picks.csv", "large")),
        case("not UTF-8", HEADER.encode() + b"0,1,2,\xff\xfe\n", check=says("picks.csv", "UTF-8")),
        case("a NUL byte", HEADER.encode() + b"0,1,2,1\x0000\n", check=says("picks.csv", "NUL")),
        case("a Parquet file named .csv", parquet(good_columns()), check=says("picks.csv", "Parquet")),
        case("a CSV file named .parquet", GOOD, file="picks.parquet", check=says("picks.parquet")),
        case("damaged Parquet", parquet(good_columns())[:-40], file="picks.parquet", check=says("picks.parquet")),
        case("random bytes named .parquet", bytes(range(256)) * 8, file="picks.parquet", check=says("picks.parquet")),
    ]


def parquet_cases() -> list[Case]:
    """Parquet files: types, nulls, repeated columns, values, rows counted from 1."""
    good = good_columns()

    def with_(column, values, schema=None):
        return parquet({**good, column: values}, schema)

    n = len(good["tokens"])
    tokens = list(good["tokens"])
    out = [
        case("Parquet: valid", parquet(good), file="picks.parquet", expect=OK),
        case("Parquet: valid, float columns", parquet({k: [float(v) for v in vs] for k, vs in good.items()}),
             file="picks.parquet", expect=OK),
        case("Parquet: string tokens", with_("tokens", [str(v) for v in tokens]), file="picks.parquet",
             check=says("picks.parquet", "tokens")),
        case("Parquet: a null token", with_("tokens", tokens[:3] + [None] + tokens[4:]), file="picks.parquet",
             check=says("picks.parquet: row 4", "tokens")),
        case("Parquet: NaN tokens", with_("tokens", [float(v) for v in tokens[:5]] + [float("nan")] + tokens[6:]),
             file="picks.parquet", check=says("picks.parquet: row 6", "tokens")),
        case("Parquet: negative tokens", with_("tokens", tokens[:1] + [-1] + tokens[2:]), file="picks.parquet",
             check=says("picks.parquet: row 2", "tokens")),
        case("Parquet: tokens of 1e30", with_("tokens", [1e30] * n), file="picks.parquet",
             check=says("picks.parquet: row 1", "tokens")),
        case("Parquet: boolean src", with_("src", [True] * n), file="picks.parquet",
             check=says("picks.parquet", "src")),
        case("Parquet: uint64 past 2**63", with_("step", pa.array([2**64 - 1] * n, pa.uint64())),
             file="picks.parquet", check=says("picks.parquet: row 1", "step")),
        case("Parquet: a repeated column", parquet_repeated(), file="picks.parquet",
             check=says("picks.parquet", "tokens")),
        case("Parquet: missing column", parquet({k: v for k, v in good.items() if k != "dst"}), file="picks.parquet",
             check=says("picks.parquet", "dst")),
        case("Parquet: no rows", parquet({k: pa.array([], pa.int64()) for k in good}), file="picks.parquet",
             check=says("picks.parquet", "no rows")),
        case("Parquet: millions of rows in a small file", None, file="picks.parquet", setup=_many_rows,
             check=says("picks.parquet", "rows")),
    ]
    return out


def parquet_repeated() -> bytes:
    """A Parquet file whose ``tokens`` column appears twice."""
    good = good_columns()
    arrays = [pa.array(good[k]) for k in ("step", "src", "dst", "tokens")] + [pa.array(good["tokens"])]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_arrays(arrays, names=["step", "src", "dst", "tokens", "tokens"]), sink)
    return sink.getvalue().to_pybytes()


def _many_rows(cwd: Path) -> None:
    """Five million identical rows: a few kilobytes of Parquet, gigabytes once read."""
    n = 5_000_000
    table = pa.table({"step": pa.array(np.zeros(n, np.int8)), "src": pa.array(np.zeros(n, np.int8)),
                      "dst": pa.array(np.ones(n, np.int8)), "tokens": pa.array(np.ones(n, np.int8))})
    pq.write_table(table, cwd / "picks.parquet")


def odd_valid_cases() -> list[Case]:
    """Odd but valid files: each one runs (or validates) without complaint."""
    return [
        case("valid (run)", GOOD, command="run", expect=OK),
        case("valid with a byte-order mark", "\ufeff" + GOOD, expect=OK),
        case("valid with CRLF line ends", GOOD.replace("\n", "\r\n"), expect=OK),
        case("valid with blank lines", HEADER + "\n" + ring(100) + "\n\n" + ring(60, 1), expect=OK),
        case("valid with spaces after commas", GOOD.replace(",", ", "), expect=OK),
        case("valid with quoted numbers", HEADER + ring('"100"'), expect=OK),
        case("valid with 100.0 and 1e2", HEADER + ring("100.0", 0) + ring("1e2", 1), expect=OK),
        case("valid with sparse step numbers", HEADER + ring(100, 3) + ring(50, 1000), expect=OK),
        case("valid with columns in another order", "tokens,dst,src,step\n" + "".join(
            f"100,{(i + 1) % 8},{i},0\n" for i in range(8)), expect=OK),
        case("valid: 20,000 steps", HEADER + "".join(ring(1 + s % 50, s) for s in range(20_000)), expect=OK),
        case("valid: a diagonal cell beside the ring", HEADER + ring(100) + "0,0,0,30\n", command="run", expect=OK),
    ]


def _swap_lines(lines: list[str], i: int, rng: np.random.Generator) -> tuple[str, str]:
    j = int(rng.integers(len(lines)))
    lines[i], lines[j] = lines[j], lines[i]
    return f"swap lines {i + 1} and {j + 1}", "".join(lines)


def _twice_on_one_line(lines: list[str], i: int, _rng: np.random.Generator) -> tuple[str, str]:
    return f"line {i + 1} twice on one line", "".join(lines[:i] + [lines[i].rstrip("\n") + "," + lines[i]] + lines[i + 1:])


def mutate(text: str, rng: np.random.Generator) -> tuple[str, str | bytes]:
    """(what was done, the mutated file) for one draw of ``rng``."""
    return mutate_csv(text, rng, ["-1", "1e30", "nan", "0.5", "", "x", "8", "99999999999999999999", "1_0", "0"],
                      [0, 0xFF, 0x2C, 0x0A, 0x22, 0x2D, 0x2E], [_swap_lines, _twice_on_one_line])


def generated() -> list[Case]:
    """:data:`MUTATIONS` seeded mutations of the valid file: each reads or is refused, nothing else."""
    out = []
    for k in range(MUTATIONS):
        rng = np.random.default_rng([zlib.crc32(b"moe-picks"), k])
        what, text = mutate(GOOD, rng)
        out.append(case(f"mutation: {what}", text, expect=EITHER))
    return out


def cases() -> list:
    """This surface's cases."""
    return value_cases() + shape_cases() + file_cases() + parquet_cases() + odd_valid_cases() + generated()

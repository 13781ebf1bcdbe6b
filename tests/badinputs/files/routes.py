"""Bad-input cases: route tables (``routing: {type: table, file: routes.csv, fallback: ...}``).

Hand-written cases cover each column's values (non-integers, digits that only look like digits,
GPUs past the fabric, fractions), paths (unknown switches, paths that do not join the GPUs, a GPU
to itself), the table as a whole (repeated rows, fractions not summing to 1, rows that match no
connection of the run), the header and damaged or odd files; generated ones mutate the shipped
table (``experiments/routes-table.csv``) with a fixed seed. A case whose file is wrong expects a
clean error and, for most, checks that the message names the file, the line and what was found.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import yaml

from tests.badinputs.files.mutations import mutate_csv
from tests.badinputs.harness import REPO, Case, says

KIND = "routes"
ERROR = frozenset({"error"})
OK = frozenset({"ok"})
EITHER = frozenset({"ok", "error"})
SHIPPED = (REPO / "experiments" / "routes-table.csv").read_text()
HEADER = "src,dst,channel,path\n"
#: The shipped table's rows (after its two comment lines and header): line 4 is 7,8,0 over spine0.
ROWS = "".join(line + "\n" for line in SHIPPED.splitlines() if line and line[0].isdigit())
#: Mutations of the shipped table.
MUTATIONS = 16
TABLE = {"type": "table", "file": "routes-table.csv"}


def experiment(routing: dict | None = None, size: str = "16MiB", engine: str | None = None) -> str:
    """experiments/routes-table.yaml with a smaller message (the same connections), ``routing`` and the
    engine ``backend``."""
    data = yaml.safe_load((REPO / "experiments" / "routes-table.yaml").read_text())
    data["workload"]["size"] = size
    if routing is not None:
        data["routing"] = routing
    if engine is not None:
        data["engine"] = {"backend": engine}
    return yaml.safe_dump(data, sort_keys=False)


def case(name: str, table: str | bytes | None, *, command: str = "validate", expect=ERROR, check=None,
         routing: dict | None = None, engine: str | None = None, **kw) -> Case:
    """``netsim COMMAND exp.yaml`` with ``table`` as ``routes-table.csv``."""
    files: dict = {"exp.yaml": experiment(routing, engine=engine)}
    if table is not None:
        files["routes-table.csv"] = table
    return Case(name, KIND, [command, "exp.yaml"], files, expect=expect, check=check, **kw)


def _link(target: str):
    def setup(cwd: Path) -> None:
        os.symlink(target, cwd / "routes-table.csv")
    return setup


def _sparse(size: int):
    def setup(cwd: Path) -> None:
        with open(cwd / "routes-table.csv", "wb") as f:
            f.write(HEADER.encode())
            f.truncate(size)
    return setup


def value_cases() -> list[Case]:
    """One bad cell in the second data row (line 3): the message names the file, the line and the column."""
    out = []
    bad = {"src": ["16", "-1", "1.5", "4.0", "1_0", "\u0664", "+4", "1e1", "x", "", "99999999999999999999"],
           "dst": ["16", "-9", "9.5", "٩"],
           "channel": ["-1", "0.5", "one", "2_0", "1e9"]}
    row = {"src": "4", "dst": "9", "channel": "1", "path": "leaf0 spine1 leaf1"}
    for column, values in bad.items():
        for value in values:
            cells = {**row, column: value}
            text = HEADER + "7,8,0,leaf0 spine0 leaf1\n" + ",".join(cells[c] for c in row) + "\n"
            out.append(case(f"{column} is {value!r}", text, check=says("routes-table.csv:3:", column)))
    return out


def path_cases() -> list[Case]:
    """Paths and fractions."""
    head = "src,dst,channel,path,path_index,fraction\n"
    return [
        case("unknown switch", HEADER + "7,8,0,leaf0 spine9 leaf1\n", check=says("routes-table.csv:2:", "spine9")),
        case("a path that does not join the GPUs", HEADER + "7,8,0,leaf1 spine0 leaf0\n",
             check=says("routes-table.csv:2:", "no path")),
        case("a path through two spines", HEADER + "7,8,0,leaf0 spine0 leaf1 spine1 leaf1\n",
             check=says("routes-table.csv:2:", "no path")),
        case("a link name instead of switches", HEADER + "7,8,0,leaf0->spine0\n", check=says("routes-table.csv:2:")),
        case("a host in the path", HEADER + "7,8,0,h1 leaf0 spine0 leaf1\n", check=says("routes-table.csv:2:")),
        case("an empty path", HEADER + "7,8,0,\n", check=says("routes-table.csv:2:", "path")),
        case("a GPU to itself", HEADER + "7,7,0,leaf0\n", check=says("routes-table.csv:2:", "7")),
        case("a GPU to itself by index", head + "3,3,0,,0,\n", command="run", check=says("routes-table.csv:2:", "3>3")),
        case("two GPUs of one host by switch names", HEADER + "4,5,0,leaf0\n", check=says("routes-table.csv:2:")),
        case("path_index out of range", head + "7,8,0,,4,\n", check=says("routes-table.csv:2:", "path_index")),
        case("path_index 1.0", head + "7,8,0,,1.0,\n", check=says("routes-table.csv:2:", "path_index")),
        case("path_index negative", head + "7,8,0,,-1,\n", check=says("routes-table.csv:2:", "path_index")),
        case("both path and path_index", head + "7,8,0,leaf0 spine0 leaf1,0,\n", check=says("routes-table.csv:2:")),
        case("neither path nor path_index", head + "7,8,0,,,\n", check=says("routes-table.csv:2:")),
        case("fraction 0", head + "7,8,0,,0,0\n7,8,0,,1,1\n", check=says("routes-table.csv:2:", "fraction")),
        case("fraction nan", head + "7,8,0,,0,nan\n", check=says("routes-table.csv:2:", "fraction")),
        case("fraction inf", head + "7,8,0,,0,inf\n", check=says("routes-table.csv:2:", "fraction")),
        case("fraction 0.2_5", head + "7,8,0,,0,0.2_5\n7,8,0,,1,0.75\n", check=says("routes-table.csv:2:", "fraction")),
        case("fractions summing to 1.2", head + "7,8,0,,0,0.6\n7,8,0,,1,0.6\n",
             check=says("routes-table.csv:2:", "sum to 1.2")),
        case("fractions summing to 0.5", head + "7,8,0,,0,0.5\n", check=says("routes-table.csv:2:", "sum to 0.5")),
        case("two rows of one connection without fractions", HEADER + "7,8,0,leaf0 spine0 leaf1\n"
             "7,8,0,leaf0 spine1 leaf1\n", check=says("routes-table.csv:2:", "sum to 2")),
        case("duplicate row", HEADER + ROWS + "7,8,0,leaf0 spine0 leaf1\n",
             check=says("routes-table.csv:10:", "duplicate", "line 2")),
        case("one path by name and by index", head + "7,8,0,leaf0 spine0 leaf1,,0.5\n7,8,0,,0,0.5\n",
             check=says("routes-table.csv:3:", "duplicate")),
    ]


def unmatched_cases() -> list[Case]:
    """Rows that match no connection of the run: an error naming the row, not a silent fall back to ECMP."""
    return [
        case("a row on a channel the pair does not use", ROWS.replace("7,8,0,", "7,8,2,").join([HEADER, ""]),
             command="run", check=says("routes-table.csv:2:", "7>8#2")),
        case("a row in the wrong direction", HEADER + ROWS + "8,7,0,leaf1 spine0 leaf0\n", command="run",
             check=says("routes-table.csv:10:", "8>7")),
        case("a row for job 1 of a one-job run", "src,dst,channel,job,path\n7,8,0,1,leaf0 spine0 leaf1\n",
             command="run", check=says("routes-table.csv:2:")),
        case("a row for communicator 3", "src,dst,channel,comm,path\n7,8,0,3,leaf0 spine0 leaf1\n",
             command="run", check=says("routes-table.csv:2:")),
        case("a row for a pair that never talks", HEADER + ROWS + "0,15,0,leaf0 spine0 leaf1\n", command="run",
             check=says("routes-table.csv:10:", "0>15")),
        case("every channel off by one", HEADER + "".join(
            f"{r.split(',')[0]},{r.split(',')[1]},{(int(r.split(',')[2]) + 1) % 4},{r.split(',', 3)[3]}"
            for r in ROWS.splitlines(keepends=True)), command="run", check=says("routes-table.csv:2:", "8 rows")),
        case("unmatched rows with a spray fallback", HEADER + ROWS + "8,7,0,leaf1 spine0 leaf0\n", command="run",
             routing={**TABLE, "fallback": "spray"},
             check=says("routes-table.csv:10:")),
        case("unmatched rows under the reference engine", HEADER + ROWS + "8,7,0,leaf1 spine0 leaf0\n",
             command="run", engine="reference", check=says("routes-table.csv:10:")),
        case("every row matched (run)", HEADER + ROWS, command="run", expect=OK),
    ]


def header_cases() -> list[Case]:
    """Header, structure and options."""
    return [
        case("missing column channel", "src,dst,path\n7,8,leaf0 spine0 leaf1\n", check=says("routes-table.csv:1:")),
        case("no path column", "src,dst,channel\n7,8,0\n", check=says("routes-table.csv:1:", "path")),
        case("unknown column", "src,dst,channel,path,weight\n7,8,0,leaf0 spine0 leaf1,1\n",
             check=says("routes-table.csv:1:", "'weight'")),
        case("repeated column", "src,dst,channel,path,path\n7,8,0,leaf0 spine0 leaf1,leaf0 spine1 leaf1\n",
             check=says("routes-table.csv:1:", "'path'")),
        case("no header", ROWS, check=says("routes-table.csv:1:")),
        case("empty file", "", check=says("routes-table.csv", "empty")),
        case("comments only", "# nothing here\n", check=says("routes-table.csv")),
        case("header only", HEADER, check=says("routes-table.csv", "no routes")),
        case("more fields than the header", HEADER + "7,8,0,leaf0 spine0 leaf1,x\n", check=says("routes-table.csv:2:")),
        case("fewer fields than the header", HEADER + "7,8\n", check=says("routes-table.csv:2:")),
        case("a quoted cell spanning lines", HEADER + '7,8,0,"leaf0\nspine0 leaf1"\n', expect=EITHER),
        case("a 300,000-character header", "src," + "x" * 300_000 + "\n" + ROWS, check=says("routes-table.csv:1:")),
        case("a 300,000-character cell after a long row", HEADER + "7,8,0,a,b\n4,9,1,leaf0," + "x" * 300_000 + "\n",
             check=says("routes-table.csv")),
        case("semicolons", HEADER.replace(",", ";") + "7;8;0;leaf0 spine0 leaf1\n", check=says("routes-table.csv:1:")),
        case("fallback table", HEADER + ROWS, routing={**TABLE, "fallback": "table"},
             check=says("routing.fallback")),
        case("fallback unknown", HEADER + ROWS, routing={**TABLE, "fallback": "ecmpp"},
             check=says("routing.fallback", "ecmp")),
        case("file is a number", None, routing={"type": "table", "file": 5}, check=says("routing")),
        case("no file option", None, routing={"type": "table"}, check=says("routing")),
        case("unknown option", HEADER + ROWS, routing={**TABLE, "unused": "ok"},
             check=says("routing")),
    ]


def file_cases() -> list[Case]:
    """Operating-system and encoding trouble."""
    return [
        case("missing file", None, check=says("routes-table.csv", "not found")),
        case("a directory", None, setup=lambda cwd: (cwd / "routes-table.csv").mkdir(),
             check=says("routes-table.csv", "directory")),
        case("a symlink to /dev/zero", None, setup=_link("/dev/zero"), check=says("routes-table.csv")),
        case("a symlink loop", None, setup=_link("routes-table.csv"), check=says("routes-table.csv", "loop")),
        case("a sparse file past the size cap", None, setup=_sparse(2**30), check=says("routes-table.csv", "large")),
        case("not UTF-8", HEADER.encode() + b"7,8,0,leaf0 sp\xffine0 leaf1\n", check=says("routes-table.csv", "UTF-8")),
        case("a NUL byte", HEADER.encode() + b"7,8,0,leaf0\x00 spine0 leaf1\n", check=says("routes-table.csv", "NUL")),
        case("UTF-16", (HEADER + ROWS).encode("utf-16"), check=says("routes-table.csv")),
    ]


def odd_valid_cases() -> list[Case]:
    """Odd but valid tables."""
    return [
        case("the shipped table (run)", SHIPPED, command="run", expect=OK),
        case("byte-order mark", "\ufeff" + SHIPPED, expect=OK),
        case("CRLF line ends", SHIPPED.replace("\n", "\r\n"), expect=OK),
        case("blank lines and trailing comments", HEADER + "\n" + ROWS.replace("\n", "  # pinned\n", 1) + "\n",
             expect=OK),
        case("quoted cells", HEADER + "".join(",".join(f'"{c}"' for c in r.split(",")) + "\n"
                                              for r in ROWS.splitlines()), expect=OK),
        case("spaces around cells", HEADER + ROWS.replace(",", " , "), expect=OK),
        case("columns in another order", "path,channel,dst,src\n" + "".join(
            f"{r.split(',')[3]},{r.split(',')[2]},{r.split(',')[1]},{r.split(',')[0]}\n"
            for r in ROWS.splitlines()), expect=OK),
        case("split over two paths", "src,dst,channel,path,fraction\n" + ROWS.replace(
            "7,8,0,leaf0 spine0 leaf1\n", "7,8,0,leaf0 spine0 leaf1,0.5\n7,8,0,leaf0 spine1 leaf1,0.5\n"),
            command="run", expect=OK),
    ]


def _swap_ends(lines: list[str], i: int, _rng: np.random.Generator) -> tuple[str, str]:
    cells = lines[i].rstrip("\n").split(",")
    cells[0], cells[1] = cells[1], cells[0]
    lines[i] = ",".join(cells) + "\n"
    return f"swap src and dst on line {i + 1}", "".join(lines)


def _next_channel(lines: list[str], i: int, _rng: np.random.Generator) -> tuple[str, str]:
    cells = lines[i].rstrip("\n").split(",")
    cells[2] = str((int(cells[2]) + 1) % 4)
    lines[i] = ",".join(cells) + "\n"
    return f"next channel on line {i + 1}", "".join(lines)


def mutate(text: str, rng: np.random.Generator) -> tuple[str, str | bytes]:
    """(what was done, the mutated table) for one draw of ``rng``: a data row's cell, the row, the file."""
    rows = [i for i, line in enumerate(text.splitlines()) if line[:1].isdigit()]
    return mutate_csv(text, rng, ["-1", "16", "0.5", "", "x", "3", "99999999999999999999", "1_0", "spine7",
                                  "leaf1 spine0 leaf0"], [0, 0xFF, 0x2C, 0x0A, 0x22, 0x23, 0x3E],
                      [_swap_ends, _next_channel], rows)


def generated() -> list[Case]:
    """:data:`MUTATIONS` seeded mutations of the shipped table, each run: it runs or is refused, nothing else.

    A mutation that moves a row to a connection the ring does not have (another channel, the other
    direction) must be refused, not silently routed by the fallback: those expect an error.
    """
    out = []
    for k in range(MUTATIONS):
        rng = np.random.default_rng([zlib.crc32(b"routes-table"), k])
        what, text = mutate(SHIPPED, rng)
        expect = ERROR if what.startswith(("swap src", "next channel", "duplicate line")) else EITHER
        out.append(case(f"mutation: {what}", text, command="run", expect=expect))
    return out


def cases() -> list:
    """This surface's cases."""
    return value_cases() + path_cases() + unmatched_cases() + header_cases() + file_cases() + odd_valid_cases() \
        + generated()

"""A corpus of bad (and odd) inputs to the ``netsim`` command, each with the outcomes it may have.

Hand-written cases cover each class the robustness issue names (results directories, YAML
structure, units, numbers, operating-system errors, corrupt results on resume, command-line
arguments, degenerate and misleading inputs); generated ones mutate every file shipped in
``experiments/``, ``topologies/`` and ``workloads/`` with a fixed seed, so the corpus is the same
on every machine. ``python -m tests.badinputs`` runs it and prints the counts by outcome;
``tests/test_badinputs.py`` runs it in ``make test``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml

from tests.badinputs.files import file_cases
from tests.badinputs.generated import generated_cases
from tests.badinputs.harness import REPO, Case, Outcome, prerun

ERROR = frozenset({"error"})
OK = frozenset({"ok"})
EITHER = frozenset({"ok", "error"})

BASE = {
    "name": "base",
    "seed": 1,
    "topology": {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 4,
                 "nics_per_host": 4, "nic": {"bandwidth": "200Gbps", "latency": "1us"},
                 "uplink": {"bandwidth": "200Gbps", "latency": "500ns"},
                 "intra_host": {"bandwidth": "900GB/s", "latency": "300ns"}},
    "placement": "sequential",
    "routing": "ecmp",
    "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "4MiB"},
}
SWEEP = {**BASE, "name": "sw", "variants": [{"name": "ecmp"}, {"name": "spray", "routing": "spray"}]}


def spec(changes: dict | None = None, drop: tuple[str, ...] = (), base: dict = BASE) -> str:
    """The base experiment as YAML text with dotted ``changes`` applied and ``drop`` keys removed."""
    data = copy.deepcopy(base)
    for key, value in (changes or {}).items():
        node = data
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    for key in drop:
        node = data
        *parents, last = key.split(".")
        for p in parents:
            node = node[p]
        node.pop(last)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**9)


def exp_case(name: str, kind: str, text: str | bytes, command: str = "run", expect=ERROR, extra=(), **kw) -> Case:
    """A case that runs ``netsim COMMAND exp.yaml`` on ``text``."""
    return Case(name, kind, [command, "exp.yaml", *extra], {"exp.yaml": text}, expect=expect, **kw)


BASE_TEXT = spec()


# ---------------------------------------------------------------------------- results directories

def _intact(*paths: str):
    """A check: the files (relative to the working directory) still exist, unchanged."""
    def check(cwd: Path, _outcome: Outcome) -> str:
        missing = [p for p in paths if not (cwd / p).is_file() or (cwd / p).read_text() != "mine\n"]
        return f"lost or changed: {', '.join(missing)}" if missing else ""
    return check


def _results_dir(rel: str, command: str = "run"):
    """A setup: a real netsim results directory at ``rel`` (written by netsim) with a user's file added."""
    def setup(cwd: Path) -> None:
        (cwd / "exp.yaml").write_text(BASE_TEXT if command == "run" else spec(base=SWEEP))
        prerun(cwd, [command, "exp.yaml", "--out", rel])
        assert (cwd / rel / "manifest.json").is_file(), f"setup could not write {rel}"
        (cwd / rel / "my-notes.txt").write_text("mine\n")
    return setup


def _complete(rel: str):
    def check(cwd: Path, _outcome: Outcome) -> str:
        try:
            manifest = json.loads((cwd / rel / "manifest.json").read_text())
        except (OSError, ValueError) as exc:
            return f"no readable manifest in {rel}: {exc}"
        return "" if manifest.get("status", "complete" if manifest.get("complete", True) else "") == "complete" \
            else f"{rel}/manifest.json does not say complete"
    return check


def _both(*checks):
    def check(cwd: Path, outcome: Outcome) -> str:
        return next((p for p in (c(cwd, outcome) for c in checks) if p), "")
    return check


def _absolute_name(target: str):
    """A setup writing exp.yaml whose name is the absolute path of ``target`` (relative to the cwd)."""
    def setup(cwd: Path) -> None:
        (cwd / "exp.yaml").write_text(spec({"name": str((cwd / target).resolve())}))
    return setup


def _mkfile(rel: str, text: str = "mine\n"):
    def setup(cwd: Path) -> None:
        (cwd / rel).parent.mkdir(parents=True, exist_ok=True)
        (cwd / rel).write_text(text)
    return setup


def outdir_cases() -> list[Case]:
    cases = []
    for name in (".", "..", "...", ".hidden", "~", "-rf", "a/b", "../../sibling", "../sibling", "a\nb", "a\0b",
                 "a\tb", "x" * 300, " ", "", "résultats", "a:b", "con", "a b"):
        expect = OK if name in ("con",) else ERROR
        cases.append(exp_case(f"name {name!r}", "outdir", spec({"name": name}), expect=expect))
        cases.append(exp_case(f"sweep name {name!r}", "outdir", spec({"name": name}, base=SWEEP), "sweep",
                              expect=expect))
    cases.append(Case("name is the absolute path of the sibling", "outdir", ["run", "exp.yaml"],
                      setup=_absolute_name("../sibling")))
    cases.append(Case("sweep name is the absolute path of the sibling", "outdir", ["sweep", "exp.yaml"],
                      setup=lambda cwd: (cwd / "exp.yaml").write_text(
                          spec({"name": str((cwd / "../sibling").resolve())}, base=SWEEP))))
    for out in (".", "..", "../sibling", "results", "NOTES.txt", "../PARENT-NOTES.txt", "NOTES.txt/sub", "exp.yaml",
                "../../..", "/", "results/KEEP.txt"):
        cases.append(exp_case(f"run --out {out}", "outdir", BASE_TEXT, extra=["--out", out]))
        cases.append(exp_case(f"sweep --out {out}", "outdir", spec(base=SWEEP), "sweep", extra=["--out", out],
                              dangerous=out == "/"))
        cases.append(exp_case(f"sweep --resume --out {out}", "outdir", spec(base=SWEEP), "sweep",
                              extra=["--resume", "--out", out], dangerous=out == "/"))
    cases.append(exp_case("run --out a fresh directory under a new parent", "outdir", BASE_TEXT, expect=OK,
                          extra=["--out", "new/deeper/res"], check=_complete("new/deeper/res")))
    cases.append(exp_case("run --out an empty directory", "outdir", BASE_TEXT, expect=OK, extra=["--out", "empty"],
                          setup=lambda cwd: (cwd / "empty").mkdir(), check=_complete("empty")))
    # a netsim results directory the user added a file to
    cases.append(Case("run again into a results directory (no --force)", "outdir",
                      ["run", "exp.yaml", "--out", "res"], setup=_results_dir("res"), check=_intact("res/my-notes.txt")))
    cases.append(Case("run --force into a results directory", "outdir", ["run", "exp.yaml", "--out", "res", "--force"],
                      expect=OK, setup=_results_dir("res"),
                      check=_both(_intact("res/my-notes.txt"), _complete("res"))))
    cases.append(Case("sweep again into a sweep directory (no --resume/--force)", "outdir",
                      ["sweep", "exp.yaml", "--out", "res"], setup=_results_dir("res", "sweep"),
                      check=_intact("res/my-notes.txt")))
    cases.append(Case("sweep --force into a sweep directory", "outdir", ["sweep", "exp.yaml", "--out", "res", "--force"],
                      expect=OK, setup=_results_dir("res", "sweep"),
                      check=_both(_intact("res/my-notes.txt"), _complete("res"))))
    cases.append(Case("sweep --resume into a sweep directory", "outdir",
                      ["sweep", "exp.yaml", "--out", "res", "--resume"], expect=OK,
                      setup=_results_dir("res", "sweep"), check=_both(_intact("res/my-notes.txt"), _complete("res"))))
    cases.append(Case("run into a sweep's directory", "outdir", ["run", "exp.yaml", "--out", "res"],
                      setup=lambda cwd: (_results_dir("res", "sweep")(cwd), (cwd / "exp.yaml").write_text(BASE_TEXT)),
                      check=_intact("res/my-notes.txt")))
    cases.append(Case("sweep --resume into a single run's directory", "outdir",
                      ["sweep", "exp.yaml", "--out", "res", "--resume"],
                      setup=lambda cwd: (_results_dir("res")(cwd), (cwd / "exp.yaml").write_text(spec(base=SWEEP))),
                      check=_intact("res/my-notes.txt")))
    cases.append(Case("report --out onto the experiment file", "outdir", ["report", "res", "--out", "exp.yaml"],
                      setup=_results_dir("res"), expect=ERROR,
                      check=lambda cwd, o: "" if (cwd / "exp.yaml").read_text() == BASE_TEXT else "exp.yaml replaced"))
    cases.append(Case("results --csv onto the notes", "outdir", ["results", "res", "--csv", "res/my-notes.txt"],
                      setup=_results_dir("res"), check=_intact("res/my-notes.txt")))
    cases.append(Case("topo --draw onto a user's file", "outdir", ["topo", "exp.yaml", "--draw", "mine.html"],
                      files={"exp.yaml": BASE_TEXT}, setup=_mkfile("mine.html"), check=_intact("mine.html")))
    return cases


# ---------------------------------------------------------------------------- YAML structure

def _nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


BOMB = ("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" +
        "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)))


def yaml_cases() -> list[Case]:
    c = []
    add = c.append
    add(exp_case("recursive alias in a sequence", "yaml", BASE_TEXT + "description: &d [*d]\n"))
    add(exp_case("recursive alias in a mapping", "yaml", BASE_TEXT + "x: &d {a: *d}\n"))
    add(exp_case("recursive alias as the workload", "yaml", spec(drop=("workload",)) +
                 "workload: &w {type: collective, op: allreduce, algorithm: ring, size: 4MiB, label: *w}\n"))
    add(exp_case("deep flow nesting (2,000)", "yaml", BASE_TEXT + f"description: {_nested(2000)}\n"))
    add(exp_case("deep flow nesting (100,000)", "yaml", BASE_TEXT + f"description: {_nested(100_000)}\n"))
    add(exp_case("deep block nesting (1,000)", "yaml", BASE_TEXT + "x:\n" + "".join(
        " " * (i + 1) + f"k{i}:\n" for i in range(1000)) + " " * 1001 + "v\n"))
    add(exp_case("deep mapping nesting (5,000)", "yaml", BASE_TEXT + "x: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n"))
    add(exp_case("alias bomb (billion laughs)", "yaml", BASE_TEXT + BOMB))
    add(exp_case("alias bomb as the description", "yaml", BASE_TEXT.replace("name: base", BOMB + "description: *i\nname: base")))
    add(exp_case("wide alias fan-out", "yaml", BASE_TEXT + "a: &a [" + ", ".join(["x"] * 1000) + "]\nb: [" +
                 ", ".join(["*a"] * 2000) + "]\n"))
    add(exp_case("duplicate top-level key", "yaml", BASE_TEXT + "seed: 7\n"))
    add(exp_case("duplicate nested key", "yaml", BASE_TEXT.replace("  spines: 2\n", "  spines: 2\n  spines: 8\n")))
    add(exp_case("duplicate key in a flow mapping", "yaml",
                 BASE_TEXT.replace("bandwidth: 200Gbps, latency: 1us", "bandwidth: 200Gbps, bandwidth: 1Gbps")
                 if "bandwidth: 200Gbps, latency: 1us" in BASE_TEXT else
                 BASE_TEXT + "engine: {ideal: true, ideal: false}\n"))
    add(exp_case("duplicate workload", "yaml", BASE_TEXT + "workload: {type: collective, op: allreduce, "
                 "algorithm: tree, size: 1MiB}\n"))
    add(exp_case("merge key still works", "yaml", spec(drop=("topology",)) +
                 "defaults: &d {type: leaf_spine, leaves: 2, spines: 2, hosts_per_leaf: 2, gpus_per_host: 4,\n"
                 "  nics_per_host: 4, nic: {bandwidth: 200Gbps}, uplink: {bandwidth: 200Gbps},\n"
                 "  intra_host: {bandwidth: 900GB/s}}\ntopology: {<<: *d, spines: 4}\n", "validate",
                 expect=EITHER))
    add(exp_case("not UTF-8 (latin-1 name)", "yaml", BASE_TEXT.encode().replace(b"name: base", b"name: caf\xe9")))
    add(exp_case("UTF-16 with BOM", "yaml", BASE_TEXT.encode("utf-16")))
    add(exp_case("UTF-8 with BOM", "yaml", b"\xef\xbb\xbf" + BASE_TEXT.encode(), expect=OK))
    add(exp_case("binary garbage", "yaml", bytes(range(256)) * 40))
    add(exp_case("NUL bytes inside", "yaml", BASE_TEXT.encode().replace(b"ecmp", b"ec\0mp")))
    add(exp_case("empty file", "yaml", ""))
    add(exp_case("whitespace only", "yaml", "   \n\n\t\n"))
    add(exp_case("comments only", "yaml", "# nothing here\n"))
    add(exp_case("a scalar", "yaml", "42\n"))
    add(exp_case("a list", "yaml", "- name: x\n- seed: 1\n"))
    add(exp_case("two documents", "yaml", BASE_TEXT + "---\n" + BASE_TEXT))
    add(exp_case("tab indentation", "yaml", BASE_TEXT.replace("  leaves", "\tleaves")))
    add(exp_case("unclosed quote", "yaml", BASE_TEXT + 'description: "oops\n'))
    add(exp_case("unclosed flow", "yaml", BASE_TEXT.replace("routing: ecmp", "routing: {type: ecmp")))
    add(exp_case("python tag", "yaml", BASE_TEXT + "x: !!python/object/apply:os.system ['echo pwned']\n"))
    add(exp_case("binary tag for a size", "yaml", spec({"workload.size": "X"}).replace("size: X", "size: !!binary aGVsbG8=")))
    add(exp_case("set tag", "yaml", BASE_TEXT.replace("routing: ecmp", "routing: !!set {ecmp}")))
    add(exp_case("timestamp as a seed", "yaml", BASE_TEXT.replace("seed: 1", "seed: 2001-12-14")))
    add(exp_case("unknown tag", "yaml", BASE_TEXT.replace("routing: ecmp", "routing: !mine ecmp")))
    add(exp_case("integer key", "yaml", BASE_TEXT + "1: 2\n"))
    add(exp_case("null key", "yaml", BASE_TEXT + "null: x\n"))
    add(exp_case("complex key", "yaml", BASE_TEXT + "? [a, b]\n: c\n"))
    add(exp_case("mapping as a key", "yaml", BASE_TEXT + "? {a: 1}\n: c\n"))
    add(exp_case("huge file (8 MiB of comments)", "yaml", BASE_TEXT + ("# " + "x" * 1022 + "\n") * 8192))
    add(exp_case("huge string value (12 MB)", "yaml", spec({"routing": "r" * 12_000_000})))
    add(exp_case("huge unknown key", "yaml", BASE_TEXT + "k" * 1_000_000 + ": 1\n"))
    add(exp_case("unknown key with a 1 MB value", "yaml", BASE_TEXT + "extra: " + "v" * 1_000_000 + "\n"))
    add(exp_case("many unknown keys", "yaml", BASE_TEXT + "".join(f"extra{i}: {i}\n" for i in range(20_000))))
    add(exp_case("long list of jobs", "yaml", spec(drop=("workload",)) + "jobs:\n" + "".join(
        f"  - {{name: j{i}, workload: {{type: collective, op: allreduce, algorithm: ring, size: 1MiB, ranks: 2}}}}\n"
        for i in range(20_000))))
    add(exp_case("unicode control characters in a value", "yaml", spec({"routing": "ecmp\u202e\u0007"})))
    add(exp_case("emoji routing", "yaml", spec({"routing": "🚀"})))
    add(Case("the experiment is a directory", "yaml", ["run", "somedir"], setup=lambda cwd: (cwd / "somedir").mkdir()))
    add(Case("the experiment does not exist", "yaml", ["run", "nope.yaml"]))
    add(Case("the experiment is /dev/zero", "yaml", ["run", "/dev/zero"]))
    add(Case("the experiment is /dev/urandom", "yaml", ["validate", "/dev/urandom"]))
    add(Case("the experiment is /dev/null", "yaml", ["run", "/dev/null"]))
    add(exp_case("topology file missing", "yaml", spec({"topology": "nowhere.yaml"})))
    add(exp_case("topology file is a directory", "yaml", spec({"topology": "tdir"}),
                 setup=lambda cwd: (cwd / "tdir").mkdir()))
    add(Case("topology file is not UTF-8", "yaml", ["run", "exp.yaml"],
             {"exp.yaml": spec({"topology": "t.yaml"}), "t.yaml": b"type: leaf_spine\nleaves: \xff\xfe\n"}))
    add(Case("topology file with an alias bomb", "yaml", ["run", "exp.yaml"],
             {"exp.yaml": spec({"topology": "t.yaml"}), "t.yaml": "type: leaf_spine\n" + BOMB}))
    add(Case("topology file with duplicate keys", "yaml", ["run", "exp.yaml"],
             {"exp.yaml": spec({"topology": "t.yaml"}), "t.yaml": yaml.safe_dump(BASE["topology"]) + "leaves: 9\n"}))
    add(Case("topology file is a list", "yaml", ["run", "exp.yaml"],
             {"exp.yaml": spec({"topology": "t.yaml"}), "t.yaml": "- 1\n- 2\n"}))
    add(Case("topology file is /dev/zero", "yaml", ["run", "exp.yaml"], {"exp.yaml": spec({"topology": "/dev/zero"})}))
    add(exp_case("workload file missing", "yaml", spec({"workload": "nowhere.yaml"})))
    add(exp_case("workload from: a number", "yaml", spec({"workload": {"from": 42}})))
    add(Case("workload file is garbage", "yaml", ["run", "exp.yaml"],
             {"exp.yaml": spec({"workload": "w.yaml"}), "w.yaml": bytes(range(256))}))
    add(Case("workload file recursive alias", "yaml", ["run", "exp.yaml"],
             {"exp.yaml": spec({"workload": "w.yaml"}), "w.yaml": "type: training\nmodel: &m {layers: *m}\n"}))
    add(Case("topo on a garbage file", "yaml", ["topo", "t.yaml"], {"t.yaml": bytes(range(256)) * 4}))
    add(Case("topo on an alias bomb", "yaml", ["topo", "t.yaml"], {"t.yaml": "type: leaf_spine\n" + BOMB}))
    add(Case("topo on a deep nesting", "yaml", ["topo", "t.yaml"], {"t.yaml": "type: " + _nested(50_000) + "\n"}))
    add(exp_case("routes table missing", "yaml", spec({"routing": {"type": "table", "file": "nope.csv"}})))
    add(Case("routes table garbage", "yaml", ["run", "exp.yaml"],
             {"exp.yaml": spec({"routing": {"type": "table", "file": "r.csv"}}), "r.csv": bytes(range(256)) * 8}))
    add(Case("routes table wrong columns", "yaml", ["run", "exp.yaml"],
             {"exp.yaml": spec({"routing": {"type": "table", "file": "r.csv"}}), "r.csv": "a,b,c\n1,2,3\n"}))
    add(Case("routes table non-numeric cells", "yaml", ["run", "exp.yaml"],
             {"exp.yaml": spec({"routing": {"type": "table", "file": "r.csv"}}),
              "r.csv": (REPO / "experiments/routes-table.csv").read_text().replace("0", "x", 3)}))
    add(Case("routes table is a directory", "yaml", ["run", "exp.yaml"],
             {"exp.yaml": spec({"routing": {"type": "table", "file": "rdir"}})}, setup=lambda cwd: (cwd / "rdir").mkdir()))
    return c


# ---------------------------------------------------------------------------- units

def unit_cases() -> list[Case]:
    c = []
    sizes = ["x" * 200_000, "9" * 200_000, "1" + "0" * 100_000 + "B", " " * 100_000 + "1MiB", "1MiB" + " " * 100_000,
             "1e400GB", "1e-400GB", "10 furlongs", "nan", "inf", "-1MiB", "0x10", "1_000MB", "½MiB", "MiB", "1e99999B",
             "1" * 5000 + "e5" + "MiB", "." * 1000, "1" + "." * 1000, "0B", "0", 0, -5, 1e-300, "1e30B", 1e30, 2**80]
    for i, size in enumerate(sizes):
        label = repr(size) if len(repr(size)) < 30 else f"{repr(size)[:20]}... ({len(str(size))} chars)"
        c.append(exp_case(f"size {label}", "units", spec({"workload.size": size})))
    c.append(exp_case("size .nan", "units", BASE_TEXT.replace("size: 4MiB", "size: .nan")))
    c.append(exp_case("size .inf", "units", BASE_TEXT.replace("size: 4MiB", "size: .inf")))
    c.append(exp_case("size -.inf", "units", BASE_TEXT.replace("size: 4MiB", "size: -.inf")))
    for bw in ["25gbps", "400G", "0", "1e20Tbps", "1e400Gbps", "Gbps", "400 Gbps " * 1000, "-1Gbps", "nan Gbps",
               "400Mbps/s", "1" * 100_000 + "Gbps", 0, 1e300]:
        label = repr(bw) if len(repr(bw)) < 30 else f"{repr(bw)[:20]}... ({len(str(bw))} chars)"
        c.append(exp_case(f"nic bandwidth {label}", "units", spec({"topology.nic.bandwidth": bw})))
    c.append(exp_case("uplink bandwidth .inf", "units", BASE_TEXT.replace("bandwidth: 200Gbps\n    latency: 500ns",
                                                                             "bandwidth: .inf\n    latency: 500ns")))
    for t in ["-1us", "1e9s", "5 parsecs", "1e400s", "us", "2 u s", "1" * 100_000 + "ns", 1e30, -1]:
        label = repr(t) if len(repr(t)) < 30 else f"{repr(t)[:20]}... ({len(str(t))} chars)"
        c.append(exp_case(f"nic latency {label}", "units", spec({"topology.nic.latency": t})))
    c.append(exp_case("latency .nan", "units", BASE_TEXT.replace("latency: 1us", "latency: .nan")))
    c.append(exp_case("--set a 200,000-character size", "units", BASE_TEXT, extra=["--set", "workload.size=" + "9" * 200_000]))
    return c


# ---------------------------------------------------------------------------- numbers and degenerate input

def number_cases() -> list[Case]:
    c = []
    for seed in [2**64, 2**63, -1, 1.5, "7", True, 1e30, 10**100, "2**64"]:
        c.append(exp_case(f"seed {seed!r}"[:60], "numbers", spec({"seed": seed})))
    c.append(exp_case("seed 2**63-1", "numbers", spec({"seed": 2**63 - 1}), expect=EITHER))
    c.append(exp_case("seeds [2**64]", "numbers", spec({"seeds": [2**64]}, base=SWEEP), "sweep"))
    c.append(exp_case("seeds [-1]", "numbers", spec({"seeds": [-1]}, base=SWEEP), "sweep"))
    c.append(exp_case("repeats 10**9", "numbers", spec({"repeats": 10**9}, base=SWEEP), "sweep"))
    c.append(exp_case("repeats 0", "numbers", spec({"repeats": 0}, base=SWEEP), "sweep"))
    c.append(exp_case("seed 2**64 with repeats", "numbers", spec({"seed": 2**64, "repeats": 2}, base=SWEEP), "sweep"))
    topo = {"topology.leaves": [0, -1, 10**12, 1.0, True, "4", None, [2], {"a": 1}],
            "topology.spines": [10**6, 0], "topology.hosts_per_leaf": [10**6, 10**9],
            "topology.gpus_per_host": [10**4, 0], "topology.nics_per_host": [10**5],
            "topology.uplink.count": [10**6, 0]}
    for key, values in topo.items():
        for v in values:
            c.append(exp_case(f"{key} {v!r}", "numbers", spec({key: v})))
    c.append(exp_case("a million hosts", "numbers", spec({"topology.leaves": 1000, "topology.hosts_per_leaf": 1000,
                                                          "topology.gpus_per_host": 1, "topology.nics_per_host": 1})))
    c.append(exp_case("a million hosts (validate)", "numbers", spec({"topology.leaves": 1000, "topology.hosts_per_leaf": 1000,
                                                                     "topology.gpus_per_host": 1,
                                                                     "topology.nics_per_host": 1}), "validate"))
    c.append(exp_case("all-to-all on 4,096 GPUs", "numbers", spec({"topology.leaves": 32, "topology.hosts_per_leaf": 16,
                                                                   "topology.gpus_per_host": 8, "topology.nics_per_host": 8,
                                                                   "workload.op": "alltoall",
                                                                   "workload.algorithm": "pairwise"})))
    for key, v in [("workload.channels", 10**6), ("workload.channels", 65), ("workload.channels", 0),
                   ("workload.iterations", 10**9), ("workload.iterations", 0), ("workload.ranks", 10**9),
                   ("workload.ranks", 1), ("workload.ranks", 0), ("workload.ranks", 17), ("workload.chunk", "1B"),
                   ("workload.chunk", 0), ("engine.completion_tolerance", "10us"),
                   ("engine.completion_tolerance", "1ms"), ("engine.completion_tolerance", -1),
                   ("engine.link_series", 10**9), ("engine.link_series", -1)]:
        c.append(exp_case(f"{key} {v!r}", "numbers", spec({key: v})))
    c.append(exp_case("one GPU in the whole fabric", "numbers", spec({"topology.leaves": 1, "topology.spines": 1,
                                                                      "topology.hosts_per_leaf": 1,
                                                                      "topology.gpus_per_host": 1,
                                                                      "topology.nics_per_host": 1})))
    c.append(exp_case("a sequence step of one rank", "numbers", spec({"workload": {
        "type": "sequence", "steps": [{"op": "allreduce", "algorithm": "ring", "size": "1MiB", "ranks": [3]}]}})))
    c.append(exp_case("a sequence step of no rank", "numbers", spec({"workload": {
        "type": "sequence", "steps": [{"op": "allreduce", "algorithm": "ring", "size": "1MiB", "ranks": "5:5"}]}})))
    c.append(exp_case("a slice with step 0", "numbers", spec({"workload": {
        "type": "sequence", "steps": [{"op": "allreduce", "algorithm": "ring", "size": "1MiB", "ranks": "::0"}]}})))
    c.append(exp_case("a rank index past the end", "numbers", spec({"workload": {
        "type": "sequence", "steps": [{"op": "allreduce", "algorithm": "ring", "size": "1MiB", "ranks": [0, 99]}]}})))
    train = {"type": "training", "model": {"layers": 4, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 50000,
                                           "global_batch": 8}, "parallelism": {"tp": 2, "pp": 2, "dp": 2}}
    for key, v in [("model.layers", 10**9), ("model.global_batch", 10**12), ("model.micro_batch", 0),
                   ("parallelism.tp", 10**6), ("model.hidden", 10**9), ("model.seq_len", 10**9),
                   ("iterations", 10**6), ("dp_buckets", 10**4), ("model.vocab", 0), ("model.heads", 3)]:
        w = copy.deepcopy(train)
        node = w
        *parents, last = key.split(".")
        for p in parents:
            node = node[p]
        node[last] = v
        c.append(exp_case(f"training {key} {v!r}", "numbers", spec({"workload": w})))
    for key, v in [("groups", 10**5), ("groups", 0), ("switches_per_group", 10**4)]:
        c.append(exp_case(f"dragonfly {key} {v!r}", "numbers", spec({"topology": {
            "type": "dragonfly", "groups": 3, "switches_per_group": 2, "hosts_per_switch": 2,
            "global_links_per_switch": 1, "link": {"bandwidth": "100Gbps"}, key: v}})))
    c.append(exp_case("frontier groups 10**4", "numbers", spec({"topology": {"type": "frontier", "groups": 10**4}})))
    c.append(exp_case("a fault at 1e30 s", "numbers", spec({"faults": [{"at": 1e30, "link": "leaf0-spine0",
                                                                         "action": "down"}]})))
    c.append(exp_case("a fault on a missing link", "numbers", spec({"faults": [{"at": "1us", "link": "leaf9-spine9",
                                                                                "action": "down"}]})))
    c.append(exp_case("a fault degrading to 0", "numbers", spec({"faults": [{"at": "1us", "link": "leaf0-spine0",
                                                                             "action": "degrade", "fraction": 0}]})))
    c.append(exp_case("every uplink down for good", "numbers", spec({"faults": [
        {"at": "1us", "link": f"leaf{l}-spine{s}", "action": "down"} for l in range(2) for s in range(2)]})))
    c.append(exp_case("10,001 jobs", "numbers", spec(drop=("workload",)) + "jobs:\n" + "".join(
        f"  - {{name: j{i}, workload: {{type: collective, op: allreduce, algorithm: ring, size: 1MiB, ranks: 2}}}}\n"
        for i in range(10_001))))
    return c


# ---------------------------------------------------------------------------- operating-system errors

def os_cases() -> list[Case]:
    c = []
    for target in ("/proc/netsim-results", "/sys/kernel/netsim-results", "/dev/null/res", "/dev/full"):
        c.append(exp_case(f"run --out {target}", "os", BASE_TEXT, extra=["--out", target]))
        c.append(exp_case(f"sweep --out {target}", "os", spec(base=SWEEP), "sweep", extra=["--out", target]))
    c.append(Case("report --out under /sys", "os", ["report", "res", "--out", "/sys/kernel/r.html"],
                  setup=_results_dir("res")))
    c.append(Case("report --out /dev/full", "os", ["report", "res", "--out", "/dev/full"], setup=_results_dir("res")))
    c.append(Case("results --csv under /sys", "os", ["results", "res", "--csv", "/sys/kernel/r.csv"],
                  setup=_results_dir("res")))
    c.append(Case("results --csv /dev/full", "os", ["results", "res", "--csv", "/dev/full"], setup=_results_dir("res")))
    c.append(Case("topo --draw under /sys", "os", ["topo", "exp.yaml", "--draw", "/sys/kernel/t.html"],
                  {"exp.yaml": BASE_TEXT}))
    c.append(Case("report on a directory that does not exist", "os", ["report", "nowhere"]))
    c.append(Case("results on a file", "os", ["results", "NOTES.txt"]))
    c.append(Case("report on /", "os", ["report", "/"]))
    return c


# ---------------------------------------------------------------------------- corrupt results directories

def _corrupt(rel_glob: str, content: bytes | None):
    """A setup: a finished sweep in ``res``; then every file matching ``rel_glob`` is overwritten
    (``content``) or truncated to half (None)."""
    def setup(cwd: Path) -> None:
        _results_dir("res", "sweep")(cwd)
        hits = sorted(cwd.glob(f"res/{rel_glob}"))
        assert hits, rel_glob
        for p in hits[:1] if "runs/" in rel_glob else hits:
            data = p.read_bytes()
            p.write_bytes(content if content is not None else data[: len(data) // 2])
    return setup


def corrupt_cases() -> list[Case]:
    c = []
    for rel, content in [("runs/*/run.json", b"{not json"), ("runs/*/run.json", None), ("runs/*/run.json", b"[]"),
                         ("runs/*/runs.parquet", b"garbage"), ("runs/*/runs.parquet", None),
                         ("runs/*/collectives.parquet", None), ("manifest.json", b"{"), ("manifest.json", b"null"),
                         ("runs.parquet", b"garbage"), ("runs/*/links.parquet", b"")]:
            what = "garbage" if content else ("empty" if content == b"" else "truncated")
            c.append(Case(f"resume with {rel} {what}", "corrupt", ["sweep", "exp.yaml", "--out", "res", "--resume"],
                          setup=_corrupt(rel, content), expect=EITHER, check=_intact("res/my-notes.txt")))
    for rel, content in [("runs.parquet", b"garbage"), ("manifest.json", b"{"), ("collectives.parquet", None),
                         ("links.parquet", b"")]:
        for cmd in ("report", "results"):
            # `results` summarises runs.parquet only: another damaged table does not concern it
            expect = EITHER if cmd == "results" and rel in ("collectives.parquet", "links.parquet") else ERROR
            c.append(Case(f"{cmd} with {rel} corrupt", "corrupt", [cmd, "res"], setup=_corrupt(rel, content),
                          expect=expect))
    return c


# ---------------------------------------------------------------------------- command-line arguments

def cli_cases() -> list[Case]:
    c = []
    for item in ("=1", "a..b=1", "topology.leaves=[1,2", "workload.size=", "topology.leaves.x=1", "jobs.99.start=1",
                 "nosuchkey=1", ".=1", "topology.leaves=" + "9" * 100_000, "topology=" + "{" * 10_000,
                 "topology.leaves=&a [*a]", "seed=" + "1" * 5000, "name=..", "name=/tmp"):
        c.append(exp_case(f"--set {item[:40]!r}", "cli", BASE_TEXT, extra=["--set", item]))
    for item in ("topology.spines=", "topology.spines=1,,2", "x=", "=1,2", "topology.spines=0,2",
                 "topology.spines=" + ",".join(["2"] * 100_000), "seed=-1,2**64", "name=.,..",
                 # since issue 24 a comma no longer splits a --param value: the same inputs as YAML lists
                 "topology.spines=[]", "topology.spines=[1,,2]", "topology.spines=[0,2]",
                 "topology.spines=[" + ",".join(["2"] * 100_000) + "]", "seed=[-1,2**64]", "name=[., ..]"):
        c.append(exp_case(f"--param {item[:40]!r}", "cli", spec(base=SWEEP), "sweep", extra=["--param", item],
                          expect=ERROR | {"partial"}))
    for extra in (["--variant", "nope"], ["--workers", "0"], ["--workers", "-3"], ["--executor", "foo"],
                  ["--scheduler", "tcp://x:1"], ["--workers", "abc"]):
        c.append(exp_case(f"sweep {' '.join(extra)}", "cli", spec(base=SWEEP), "sweep", extra=extra))
    c.append(exp_case("run --variant on a plain file", "cli", BASE_TEXT, extra=["--variant", "x"]))
    c.append(exp_case("run --max-memory 1KiB", "cli", BASE_TEXT, extra=["--max-memory", "1KiB"]))
    c.append(exp_case("run --max-memory garbage", "cli", BASE_TEXT, extra=["--max-memory", "lots"]))
    c.append(Case("no such command", "cli", ["frobnicate"]))
    c.append(Case("run without a file", "cli", ["run"]))
    return c


def hand_written() -> list[Case]:
    return [*outdir_cases(), *yaml_cases(), *unit_cases(), *number_cases(), *os_cases(), *corrupt_cases(),
            *cli_cases()]


def all_cases() -> list[Case]:
    """The whole corpus: hand-written cases, then the generated mutations, then the other input files' cases."""
    return [*hand_written(), *generated_cases(), *file_cases()]

"""Bad-input cases: convert (see tests/badinputs/files/__init__.py).

``netsim trace-convert`` on small valid Philly and Helios samples written here, each mutated one way:
a malformed job must be dropped with a counted reason that names its line (and the other jobs kept);
a malformed file, option or output path must be one clear error naming the file and the place.
Seeded random mutations of both samples follow (success or a clean error, nothing else).
"""

from __future__ import annotations

import csv
import io
import json
import zlib
from pathlib import Path

import numpy as np

from tests.badinputs.harness import Case, Outcome

KIND = "convert"
ERROR = frozenset({"error"})
OK = frozenset({"ok"})
EITHER = frozenset({"ok", "error"})
PHILLY = "cluster_job_log"
HELIOS = "cluster_log.csv"
MUTATIONS = 24


def _attempt(start: str, end: str | None, gpus: int) -> dict:
    detail = [{"ip": f"m{k}", "gpus": [f"gpu{g}" for g in range(min(8, gpus - 8 * k))]} for k in range(-(-gpus // 8))]
    return {"start_time": start, "end_time": end, "detail": detail}


def _job(n: int, gpus: int, status: str = "Pass") -> dict:
    day = f"2017-10-0{n + 1}"
    return {"status": status, "vc": "ee9e8c", "jobid": f"application_1506638472019_{n}",
            "attempts": [_attempt(f"{day} 02:00:00", f"{day} 03:00:00", gpus)],
            "submitted_time": f"{day} 01:00:00", "user": "ce2f4c"}


#: The Philly sample: four Pass jobs, one per line (job k on line k + 2), all kept by default.
JOBS = [_job(0, 8), _job(1, 16), _job(2, 4), _job(3, 2)]
#: The Helios sample: four COMPLETED jobs (row k on line k + 2), all kept by default.
HELIOS_ROWS = [
    ["job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time", "start_time", "end_time",
     "duration", "queue"],
    ["1425511", "uXBbc", "vcJkd", "1", "1", "1", "COMPLETED", "2020-06-09 18:41:01", "2020-06-09 18:41:01",
     "2020-06-10 04:55:09", "36848", "0"],
    ["1425512", "uVMrF", "vchbv", "8", "16", "1", "COMPLETED", "2020-06-09 19:41:27", "2020-06-09 19:41:27",
     "2020-06-09 19:45:36", "249", "0"],
    ["1425513", "uzqls", "vcpDC", "16", "64", "2", "COMPLETED", "2020-06-09 20:41:28", "2020-06-09 20:41:28",
     "2020-06-09 21:41:28", "3600", "0"],
    ["1425514", "uzqls", "vcpDC", "4", "4", "1", "COMPLETED", "2020-06-09 21:42:00", "2020-06-09 21:42:00",
     "2020-06-09 21:50:00", "480", "0"],
]


def philly_text(jobs: list) -> str:
    """A cluster_job_log with one job per line (job k on line k + 2)."""
    return "[\n" + ",\n".join(json.dumps(j) for j in jobs) + "\n]\n"


def helios_text(rows: list) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _changed(k: int, **fields) -> list:
    jobs = json.loads(json.dumps(JOBS))
    for key, value in fields.items():
        if key == "gpus":
            jobs[k]["attempts"][-1]["detail"][0]["gpus"] = value
        elif key == "detail":
            jobs[k]["attempts"][-1]["detail"] = value
        elif value is _DELETE:
            jobs[k].pop(key)
        else:
            jobs[k][key] = value
    return jobs


_DELETE = object()


def _cell(row: int, column: str, value: str) -> list:
    rows = [list(r) for r in HELIOS_ROWS]
    rows[row][HELIOS_ROWS[0].index(column)] = value
    return rows


# ------------------------------------------------------------------ checks

def _error(*fragments: str):
    """The error message says each of ``fragments``, and no output trace was written."""
    def check(cwd: Path, outcome: Outcome) -> str:
        missing = [f for f in fragments if f not in outcome.stderr]
        if missing:
            return f"message lacks {missing}: {outcome.stderr.strip()[-300:]}"
        written = [p.name for p in cwd.glob("out.*")]
        return f"wrote {written}" if written else ""
    return check


def _dropped(reason: str, place: str, kept: int, job: str | None = None):
    """Success: the summary counts ``reason``, names ``place`` (file:line), and the trace keeps ``kept`` jobs
    (``job`` not among them)."""
    def check(cwd: Path, outcome: Outcome) -> str:
        try:
            text = (cwd / "out.csv").read_text()
        except OSError as exc:
            return f"no output trace: {exc}"
        rows = text.strip().splitlines()[1:]
        if len(rows) != kept:
            return f"kept {len(rows)} jobs, expected {kept}"
        if job and any(r.startswith(job + ",") for r in rows):
            return f"kept {job}"
        if reason not in outcome.stdout or place not in outcome.stdout:
            return f"summary lacks {reason!r} or {place!r}: {outcome.stdout.strip()[:400]}"
        return ""
    return check


def _kept(n: int, say: str = ""):
    def check(cwd: Path, outcome: Outcome) -> str:
        try:
            rows = (cwd / "out.csv").read_text().strip().splitlines()[1:]
        except OSError as exc:
            return f"no output trace: {exc}"
        if len(rows) != n:
            return f"kept {len(rows)} jobs, expected {n}"
        return f"summary lacks {say!r}" if say not in outcome.stdout else ""
    return check


def _intact(name: str, text: str):
    def check(cwd: Path, outcome: Outcome) -> str:
        if (cwd / name).read_text() != text:
            return f"{name} was changed"
        return _error("input file")(cwd, outcome)
    return check


# ------------------------------------------------------------------ Philly

def _philly(name: str, text: str | bytes, *extra: str, expect=ERROR, check=None, out: str = "out.csv") -> Case:
    return Case(f"philly: {name}", KIND, ["trace-convert", "philly", PHILLY, out, *extra], {PHILLY: text},
                expect=expect, check=check)


def _philly_drop(name: str, jobs: list, reason: str, k: int = 1) -> Case:
    """Job ``k`` of ``jobs`` is malformed: dropped, counted under ``reason``, its line named."""
    return _philly(name, philly_text(jobs), expect=OK,
                   check=_dropped(reason, f"{PHILLY}:{k + 2}", len(jobs) - 1, f"application_1506638472019_{k}"))


def philly_cases() -> list[Case]:
    job1 = "application_1506638472019_1"
    drops = [
        ("gpus a string", _changed(1, gpus="gpu0gpu1"), "gpus not a list of GPU names"),
        ("gpus a number", _changed(1, gpus=4), "gpus not a list of GPU names"),
        ("gpus numbers", _changed(1, gpus=[0, 1]), "gpus not a list of GPU names"),
        ("gpus null names", _changed(1, gpus=[None, None]), "gpus not a list of GPU names"),
        ("a GPU twice", _changed(1, gpus=["gpu0", "gpu0"]), "a GPU listed twice"),
        ("detail an object", _changed(1, detail={"ip": "m1", "gpus": ["gpu0"]}), "detail not a list"),
        ("machine a string", _changed(1, detail=["m1"]), "machine not a JSON object"),
        ("machine twice", _changed(1, detail=[{"ip": "m1", "gpus": ["gpu0"]}, {"ip": "m1", "gpus": ["gpu1"]}]),
         "a machine listed twice"),
        ("attempts a string", _changed(1, attempts="none"), "attempts not a list"),
        ("attempt a string", _changed(1, attempts=["x"]), "attempt not a JSON object"),
        ("start month 13", _changed(1, attempts=[_attempt("2017-13-02 02:00:00", "2017-10-02 03:00:00", 8)]),
         "not a time like 2017-10-07 01:11:39"),
        ("start with T", _changed(1, attempts=[_attempt("2017-10-02T02:00:00", "2017-10-02 03:00:00", 8)]),
         "not a time like 2017-10-07 01:11:39"),
        ("end a number", _changed(1, attempts=[_attempt("2017-10-02 02:00:00", 1506900000, 8)]),
         "not a time like 2017-10-07 01:11:39"),
        ("runtime a century", _changed(1, attempts=[_attempt("1900-10-02 02:00:00", "2017-10-02 03:00:00", 8)]),
         "runtime longer than"),
        ("submitted yesterday", _changed(1, submitted_time="yesterday"), "submitted_time not a time"),
        ("submitted a number", _changed(1, submitted_time=1506900000), "submitted_time not a time"),
        ("status Done", _changed(1, status="Done"), "status not Pass, Killed or Failed"),
        ("status a number", _changed(1, status=1), "status not Pass, Killed or Failed"),
        ("jobid a number", _changed(1, jobid=1), "jobid missing or not text"),
        ("jobid missing", _changed(1, jobid=_DELETE), "jobid missing or not text"),
        ("jobid with a space", _changed(1, jobid="app 1"), "jobid not a job name"),
        ("jobid of 1000 chars", _changed(1, jobid="a" * 1000), "jobid not a job name"),
        ("jobid repeated", _changed(1, jobid="application_1506638472019_0"), "duplicate jobid"),
        ("user a number", _changed(1, user=17), "user not a name"),
        ("user with a newline", _changed(1, user="a\nb"), "user not a name"),
        ("user with a hash", _changed(1, user="team#1"), "user not a name"),
        ("job a list", [*JOBS[:1], ["x"], *JOBS[2:]], "not a job (a JSON object)"),
        ("job null", [*JOBS[:1], None, *JOBS[2:]], "not a job (a JSON object)"),
    ]
    cases = [_philly_drop(*d) for d in drops]
    text = philly_text(JOBS)
    line3 = text.splitlines()[2]
    repeated = text.replace(line3, line3[:-2] + ', "status": "Killed"},')
    indented = json.dumps(_changed(1, gpus="gpu0gpu1"), indent=1)
    second = [n for n, line in enumerate(indented.splitlines(), 1) if line == " {"][1]
    cases += [
        _philly("valid sample", text, expect=OK, check=_kept(4, "4 jobs read, 4 kept")),
        _philly("valid, indented", json.dumps(JOBS, indent=4), expect=OK, check=_kept(4)),
        _philly("valid with a BOM", "\ufeff" + text, expect=OK, check=_kept(4)),
        _philly("valid, CRLF", text.replace("\n", "\r\n"), expect=OK, check=_kept(4)),
        _philly("valid to parquet", text, out="out.parquet", expect=OK),
        _philly("a key repeated", repeated, expect=OK, check=_dropped("a key repeated", f"{PHILLY}:3", 3, job1)),
        _philly("NaN", text.replace('"vc": "ee9e8c"', '"vc": NaN', 1), expect=OK,
                check=_dropped("NaN or Infinity", f"{PHILLY}:2", 3)),
        _philly("indented, bad gpus", indented, expect=OK,
                check=_dropped("gpus not a list of GPU names", f"{PHILLY}:{second}", 3, job1)),
        _philly("an object, not a list", json.dumps(JOBS[0]), check=_error(PHILLY, "expected a JSON list of jobs")),
        _philly("an empty list", "[]\n", check=_error(PHILLY, "no jobs")),
        _philly("an empty file", "", check=_error(PHILLY, "empty")),
        _philly("blank lines only", "\n\n  \n", check=_error(PHILLY, "empty")),
        _philly("truncated", text[: len(text) // 2], check=_error(f"{PHILLY}:3:", "JSON")),
        _philly("a trailing comma", text.replace("\n]", ",\n]"), check=_error(f"{PHILLY}:6:", "comma")),
        _philly("text after the list", text + "[]\n", check=_error(f"{PHILLY}:7:", "after the list")),
        _philly("a missing comma", text.replace("},\n", "}\n", 1), check=_error(f"{PHILLY}:3:", "JSON")),
        _philly("nested 100,000 deep", "[" + "[" * 100_000 + "]" * 100_001, check=_error(PHILLY, "nested")),
        _philly("a 5000-digit number", text.replace('"vc": "ee9e8c"', '"vc": ' + "9" * 5000, 1), expect=OK,
                check=_kept(4)),
        _philly("Latin-1 bytes", text.replace("ce2f4c", "c\xe9").encode("latin-1"), check=_error(PHILLY, "UTF-8")),
        _philly("a NUL byte", text.replace("ce2f4c", "c\0"), check=_error(PHILLY, "NUL")),
        _philly("a Helios file", helios_text(HELIOS_ROWS), check=_error(PHILLY, "JSON")),
        _philly("every job still running",
                philly_text([{**j, "attempts": [_attempt("2017-10-01 02:00:00", None, 8)]} for j in JOBS]),
                check=_error(PHILLY, "no job left", "4 still running")),
        _philly("all filtered by --min-gpus", text, "--min-gpus", "64", check=_error("no job left", "4 fewer than 64")),
        _philly("status Done", text, "--status", "Done", check=_error("--status", "Pass, Killed, Failed")),
        _philly("status markup", text, "--status", "[/]", check=_error("--status")),
        _philly("attempts foo", text, "--attempts", "foo", check=_error("--attempts", "last", "sum")),
        _philly("max-gpus 0", text, "--max-gpus", "0", check=_error("--max-gpus", "1 to")),
        _philly("max-gpus -8", text, "--max-gpus", "-8", check=_error("--max-gpus")),
        _philly("max-gpus 10**12", text, "--max-gpus", str(10**12), check=_error("--max-gpus", "2,000,000")),
        _philly("limit 0", text, "--limit", "0", check=_error("--limit", "1 to")),
        _philly("limit -1", text, "--limit", "-1", check=_error("--limit")),
        _philly("min-gpus 0", text, "--min-gpus", "0", check=_error("--min-gpus", "1 to")),
        _philly("min over max", text, "--min-gpus", "16", "--max-gpus", "8",
                check=_error("--min-gpus", "from 1 to 8 (the cluster's GPUs)")),
        _philly("end before start", text, "--start", "2d", "--end", "1d", check=_error("--end", "after the start")),
        _philly("end of 1e10 days", text, "--end", "1e10d", check=_error("--end")),
        _philly("start -1", text, "--start", "-1", check=_error("--start")),
        _philly("out is the input", text, out=PHILLY, check=_intact(PHILLY, text)),
        _philly("out is the input, forced", text, "--force", out=PHILLY, check=_intact(PHILLY, text)),
        _philly("out .txt", text, out="out.txt", check=_error(".csv or .parquet")),
        _philly("out .json", text, out="out.json", check=_error(".csv or .parquet")),
        Case("philly: out is the input under another name", KIND,
             ["trace-convert", "philly", PHILLY, "link.csv", "--force"], {PHILLY: text},
             setup=lambda cwd: (cwd / "link.csv").symlink_to(cwd / PHILLY), check=_intact(PHILLY, text)),
        Case("philly: input a directory", KIND, ["trace-convert", "philly", "d", "out.csv"],
             setup=lambda cwd: (cwd / "d").mkdir(), check=_error("d", "directory")),
        Case("philly: input missing", KIND, ["trace-convert", "philly", "nope.json", "out.csv"],
             check=_error("nope.json", "not found")),
        Case("philly: input /dev/zero", KIND, ["trace-convert", "philly", "z", "out.csv"],
             setup=lambda cwd: (cwd / "z").symlink_to("/dev/zero"), check=_error("z", "not a regular file")),
        Case("philly: symlink loop", KIND, ["trace-convert", "philly", "loop", "out.csv"],
             setup=lambda cwd: (cwd / "loop").symlink_to(cwd / "loop"), check=_error("loop", "symlink loop")),
        Case("philly: over the size cap", KIND, ["trace-convert", "philly", PHILLY, "out.csv"],
             setup=_sparse(PHILLY, 600 * 2**20), check=_error(PHILLY, "too large")),
        Case("unknown format", KIND, ["trace-convert", "alibaba", PHILLY, "out.csv"], {PHILLY: text},
             check=_error("unknown trace format 'alibaba'", "philly, helios")),
    ]
    return cases


def _sparse(name: str, size: int):
    def setup(cwd: Path) -> None:
        with open(cwd / name, "wb") as f:
            f.truncate(size)
    return setup


# ------------------------------------------------------------------ Helios

def _helios(name: str, text: str | bytes, *extra: str, expect=ERROR, check=None, out: str = "out.csv") -> Case:
    return Case(f"helios: {name}", KIND, ["trace-convert", "helios", HELIOS, out, *extra], {HELIOS: text},
                expect=expect, check=check)


def _helios_drop(name: str, rows: list, reason: str, row: int = 2, line: int | None = None) -> Case:
    """Data row ``row`` of ``rows`` is malformed: dropped, counted under ``reason``, its line named."""
    return _helios(name, helios_text(rows), expect=OK,
                   check=_dropped(reason, f"{HELIOS}:{line or row + 1}", len(rows) - 2,
                                  None if rows[row][0] == rows[1][0] else rows[row][0]))


def helios_cases() -> list[Case]:
    drops = [
        ("gpu_num 2.7", _cell(2, "gpu_num", "2.7"), "gpu_num not a whole number"),
        ("gpu_num -1", _cell(2, "gpu_num", "-1"), "gpu_num below 0"),
        ("gpu_num abc", _cell(2, "gpu_num", "abc"), "gpu_num not a number"),
        ("gpu_num empty", _cell(2, "gpu_num", ""), "gpu_num not a number"),
        ("gpu_num inf", _cell(2, "gpu_num", "inf"), "gpu_num not a number"),
        ("gpu_num nan", _cell(2, "gpu_num", "nan"), "gpu_num not a number"),
        ("gpu_num 1e30", _cell(2, "gpu_num", "1e30"), "more than 2,000,000 GPUs"),
        ("gpu_num 1_000", _cell(2, "gpu_num", "1_000"), "gpu_num not a number"),
        ("duration -5", _cell(2, "duration", "-5"), "duration below 0"),
        ("duration abc", _cell(2, "duration", "abc"), "duration not a number"),
        ("duration 1e12", _cell(2, "duration", "1e12"), "runtime longer than"),
        ("submit_time malformed", _cell(2, "submit_time", "2020-06-09"), "submit_time not a time"),
        ("submit_time month 13", _cell(2, "submit_time", "2020-13-09 19:41:27"), "submit_time not a time"),
        ("state unknown", _cell(2, "state", "DONE"), "state not COMPLETED"),
        ("job_id with a space", _cell(2, "job_id", "14 25512"), "job_id not a job name"),
        ("job_id repeated", _cell(2, "job_id", "1425511"), "duplicate job_id"),
        ("user with a hash", _cell(2, "user", "team#1"), "user not a name"),
        ("user with a newline", _cell(2, "user", "a\nb"), "user not a name"),
        ("a trailing comma", [*HELIOS_ROWS[:2], HELIOS_ROWS[2] + [""], *HELIOS_ROWS[3:]], "fields"),
        ("a field missing", [*HELIOS_ROWS[:2], HELIOS_ROWS[2][:-1], *HELIOS_ROWS[3:]], "fields"),
    ]
    cases = [_helios_drop(*d) for d in drops]
    cases.append(_helios_drop("job_id empty", _cell(2, "job_id", ""), "job_id missing", row=2))
    text = helios_text(HELIOS_ROWS)
    lines = text.splitlines(keepends=True)
    blanks = "".join([lines[0], "\n", lines[1], "\n\n", lines[2].replace("8,16", "2.7,16"), *lines[3:]])
    multi = helios_text(_cell(1, "user", "a\nb"))
    cases += [
        _helios("valid sample", text, expect=OK, check=_kept(4, "4 jobs read, 4 kept")),
        _helios("valid, CRLF", text.replace("\n", "\r\n"), expect=OK, check=_kept(4)),
        _helios("valid with a BOM", "\ufeff" + text, expect=OK, check=_kept(4)),
        _helios("gpu_num 2.0 is 2", helios_text(_cell(2, "gpu_num", "2.0")), expect=OK, check=_kept(4)),
        _helios("blank lines keep line numbers", blanks, expect=OK,
                check=_dropped("gpu_num not a whole number", f"{HELIOS}:6", 3, "1425512")),
        _helios("a quoted newline keeps line numbers", multi.replace("8,16", "2.7,16"), expect=OK,
                check=_dropped("gpu_num not a whole number", f"{HELIOS}:4", 2, "1425512")),
        _helios("a column missing", text.replace("gpu_num", "gpus", 1), check=_error(HELIOS, "missing", "gpu_num")),
        _helios("a column twice", text.replace("cpu_num", "gpu_num", 1), check=_error(HELIOS, "gpu_num", "twice")),
        _helios("semicolons", text.replace(",", ";"), check=_error(HELIOS, "missing")),
        _helios("header only", lines[0], check=_error(HELIOS, "no jobs")),
        _helios("empty", "", check=_error(HELIOS, "empty")),
        _helios("an unclosed quote", text.replace("uVMrF", '"uVMrF'), check=_error(HELIOS, "quote")),
        _helios("a 200 KB field", helios_text(_cell(2, "vc", "v" * 200_000)), check=_error(f"{HELIOS}:3:")),
        _helios("Latin-1 bytes", text.replace("uXBbc", "u\xe9").encode("latin-1"), check=_error(HELIOS, "UTF-8")),
        _helios("a NUL byte", text.replace("uXBbc", "u\0"), check=_error(HELIOS, "NUL")),
        _helios("a Philly file", philly_text(JOBS), check=_error(HELIOS, "missing")),
        _helios("every job CPU-only", helios_text([HELIOS_ROWS[0]] + [r[:3] + ["0"] + r[4:] for r in HELIOS_ROWS[1:]]),
                check=_error(HELIOS, "no job left", "4 no GPUs")),
        _helios("attempts sum", text, "--attempts", "sum", check=_error("--attempts", "helios")),
        _helios("status Pass", text, "--status", "Pass", check=_error("--status", "COMPLETED")),
        _helios("limit 10**7", text, "--limit", str(10**7), check=_error("--limit", "1,000,000")),
        _helios("max-gpus below a job", text, "--max-gpus", "8", expect=OK,
                check=_kept(3, "1 more GPUs than the cluster's 8")),
        _helios("out is the input", text, "--force", out=HELIOS, check=_intact(HELIOS, text)),
        _helios("out .CSV", text, out="out.tsv", check=_error(".csv or .parquet")),
    ]
    return cases


# ------------------------------------------------------------------ seeded mutations

def _mutate(text: str, rng: np.random.Generator) -> tuple[str, str]:
    """(what was done, the mutated text) for one draw of ``rng``."""
    lines = text.splitlines(keepends=True)
    op = int(rng.integers(6))
    i = int(rng.integers(len(lines)))
    if op == 0:
        return f"delete line {i + 1}", "".join(lines[:i] + lines[i + 1:])
    if op == 1:
        return f"repeat line {i + 1}", "".join(lines[:i + 1] + lines[i:])
    at = int(rng.integers(len(text)))
    if op == 2:
        return f"cut at {at}", text[:at]
    if op == 3:
        char = "\",[]{}:#\n0-.e \\x"[int(rng.integers(17))]
        return f"insert {char!r} at {at}", text[:at] + char + text[at:]
    if op == 4:
        return f"delete char {at}", text[:at] + text[at + 1:]
    digits = [k for k, c in enumerate(text) if c.isdigit()]
    k = digits[int(rng.integers(len(digits)))]
    value = ["9" * 30, "0", "-1", "1.5", "1e400", "nan"][int(rng.integers(6))]
    return f"number at {k} -> {value}", text[:k] + value + text[k + 1:]


def mutation_cases() -> list[Case]:
    cases = []
    for fmt, name, text in (("philly", PHILLY, philly_text(JOBS)), ("helios", HELIOS, helios_text(HELIOS_ROWS))):
        for n in range(MUTATIONS):
            rng = np.random.default_rng(zlib.crc32(f"{fmt}:{n}".encode()))
            what, mutated = _mutate(text, rng)
            cases.append(Case(f"{fmt} mutation {n}: {what}", KIND, ["trace-convert", fmt, name, "out.csv"],
                              {name: mutated}, expect=EITHER))
    return cases


def cases() -> list:
    """This surface's cases."""
    return philly_cases() + helios_cases() + mutation_cases()


__all__ = ["HELIOS_ROWS", "JOBS", "cases", "helios_text", "philly_text"]

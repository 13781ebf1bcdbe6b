"""Converters from public cluster traces' published layouts to the job-trace format: which jobs are
kept, why the others are dropped (counted by reason, the first malformed ones named by line), and how
each kept job gets a model and a parallelism. docs/trace-convert.md lists every limit and reason.

SenseTime's Helios traces (Hu et al., SC'21; https://github.com/S-Lab-System-Group/HeliosData) are
read from a cluster's ``cluster_log.csv``: ``job_id, user, vc, gpu_num, cpu_num, node_num, state,
submit_time, start_time, end_time, duration, queue`` (``state`` one of Slurm's ``COMPLETED``,
``CANCELLED``, ``FAILED``, ``TIMEOUT``, ``NODE_FAIL``; ``duration`` is ``end_time - start_time`` in s).

Microsoft's Philly trace (Jeon et al., ATC'19; https://github.com/msr-fiddle/philly-traces) is read from
its ``cluster_job_log``: a JSON list of jobs, each with ``jobid``, ``status`` (``Pass``, ``Killed`` or
``Failed``), ``vc``, ``user``, ``submitted_time`` and ``attempts`` (``start_time``, ``end_time`` and
``detail``: a list of ``{ip, gpus: [gpu0, ...]}``), times as ``YYYY-MM-DD HH:MM:SS``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from netsim.cluster.presets import (
    PLAN_COLUMNS,
    SIZE_CLASSES,
    PresetCache,
    model_for_gpus,
    plan_job,
    search_dirs,
)
from netsim.cluster.trace import JobTrace, validate_trace
from netsim.cluster.validate import JOB_PATTERN, MAX_JOB_GPUS, MAX_TRACE_S
from netsim.errors import ConfigError, did_you_mean, shorten
from netsim.inputfile import at_line, read_text
from netsim.spectypes import MAX_PER_HOST

#: Where the Philly trace and its schema are published.
PHILLY_URL = "https://github.com/msr-fiddle/philly-traces"
#: Philly's job statuses: kept by default are the jobs that ran to completion.
PHILLY_STATUSES = ("Pass", "Killed", "Failed")
#: Where the Helios traces (SenseTime, Hu et al., SC'21) and their schema are published.
HELIOS_URL = "https://github.com/S-Lab-System-Group/HeliosData"
#: Helios's job states (Slurm's): kept by default are the completed jobs.
HELIOS_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL")
#: The columns of Helios's ``cluster_log.csv`` the converter reads.
HELIOS_COLUMNS = ("job_id", "user", "gpu_num", "state", "submit_time", "duration")
#: The trace formats :func:`convert` reads.
FORMATS = ("philly", "helios")
#: Options every converter takes (see :func:`convert_philly`).
OPTIONS = ("max_gpus", "start_s", "end_s", "limit", "min_gpus", "size_classes", "gpus_per_host", "preset_dirs")
#: Largest source file read (bytes): several times the largest published log.
MAX_SOURCE_BYTES = 512 * 2**20
#: Most jobs ``limit`` keeps (an experiment's ``max_jobs`` bound).
MAX_LIMIT = 1_000_000
#: Malformed jobs named (``file:line``) in a conversion's report; the rest are only counted.
FIRST_DROPPED = 5
#: What a kept job's ``user`` may hold: what a job name may (the trace format writes it back).
USER_REASON = "user not a name of letters, digits, '_', '.', ':' and '-' (at most 200)"

_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
_TIME_EXAMPLE = "2017-10-07 01:11:39"
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_MOST_DIGITS = 100


@dataclass(frozen=True)
class Dropped:
    """A malformed source job, as a conversion's report names it: where it is, why it was dropped, and the
    value found (shortened)."""

    file: str
    line: int
    job: str
    reason: str
    found: str = ""

    def __str__(self) -> str:
        job = f"job {self.job}" if self.job else "a job"
        return f"{self.file}:{self.line}: dropped {job}: {self.reason}" + (f" (got {self.found})" if self.found else "")


@dataclass(frozen=True)
class Conversion:
    """A converted trace and what happened to the source's jobs.

    Attributes
    ----------
    trace:
        The kept jobs, validated.
    read:
        Jobs in the source.
    dropped:
        Reason -> jobs dropped for it, in the order the reasons were first met.
    first_dropped:
        The first :data:`FIRST_DROPPED` malformed jobs (not those an option or a status left out).
    malformed:
        How many jobs were dropped as malformed (the rest of ``dropped`` are left out on purpose).
    """

    trace: JobTrace
    read: int
    dropped: dict[str, int] = field(default_factory=dict)
    first_dropped: tuple[Dropped, ...] = ()
    malformed: int = 0

    def describe(self) -> str:
        """One line: read, kept, and the dropped counts by reason."""
        return _counts(self.read, len(self.trace), self.dropped)

    def report(self) -> list[str]:
        """:meth:`describe`, then the first malformed jobs by ``file:line``, and how many more there are."""
        more = self.malformed - len(self.first_dropped)
        return [self.describe(), *map(str, self.first_dropped)] + \
            ([f"... and {more:,} more malformed jobs (counted above)"] if more > 0 else [])


def _counts(read: int, kept: int, dropped: dict[str, int]) -> str:
    why = "; ".join(f"{n:,} {reason}" for reason, n in dropped.items() if n)
    return f"{read:,} jobs read, {kept:,} kept" + (f", dropped: {why}" if why else "")


class _Job(NamedTuple):
    """A usable source job, before the shared options select it."""

    job: str
    submitted: datetime
    gpus: int
    runtime_s: float
    user: str


class _Drop(Exception):
    """A job left out for a reason of the data's own (a status not kept, no GPUs): counted, not named."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _Bad(_Drop):
    """A malformed job: counted, and named by line among the first dropped with the value found."""

    def __init__(self, reason: str, found: Any = None):
        super().__init__(reason)
        self.found = found if isinstance(found, _Shown) else shorten(found, 40)


class _Shown(str):
    """A description of a value that is shown as it is (not quoted again)."""


class _Drops:
    """Counts dropped jobs by reason and keeps the first malformed ones."""

    def __init__(self, file: str):
        self.file = file
        self.counts: Counter = Counter()
        self.first: list[Dropped] = []
        self.malformed = 0

    def add(self, drop: _Drop, line: int, job: Any) -> None:
        self.counts[drop.reason] += 1
        if isinstance(drop, _Bad):
            self.malformed += 1
            if len(self.first) < FIRST_DROPPED:
                shown = shorten(job, 40) if isinstance(job, str) and job else ""
                self.first.append(Dropped(self.file, line, shown, drop.reason, drop.found))


# ------------------------------------------------------------------ fields shared by both formats

def _time(value: Any, name: str) -> datetime:
    """A ``YYYY-MM-DD HH:MM:SS`` timestamp; missing (``None``, ``"None"``, empty) or malformed is dropped."""
    found = _start(value)
    if found is not None:
        return found
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        raise _Bad(f"no {name}", value)
    raise _Bad(f"{name} not a time like {_TIME_EXAMPLE}", value)


def _start(value: Any) -> datetime | None:
    """A ``YYYY-MM-DD HH:MM:SS`` timestamp, or None when ``value`` is not one."""
    if not isinstance(value, str) or not _TIME.fullmatch(value := value.strip()):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:  # a month 13, a February 30
        return None


def _name(value: Any, name: str, seen: set) -> str:
    """A job id usable as a trace's job name and not seen before (added to ``seen``)."""
    if not isinstance(value, str) or not value.strip():
        raise _Bad(f"{name} missing or not text", value)
    if not JOB_PATTERN.fullmatch(value):
        raise _Bad(f"{name} not a job name of letters, digits, '_', '.', ':' and '-' (at most 200)", value)
    if value in seen:
        raise _Bad(f"duplicate {name}", value)
    seen.add(value)
    return value


def _user(value: Any) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or not JOB_PATTERN.fullmatch(value):
        raise _Bad(USER_REASON, value)
    return value


def _runtime(seconds: float, reason: str) -> float:
    if seconds <= 0:
        raise _Drop(reason)
    if seconds > MAX_TRACE_S:
        raise _Bad(f"runtime longer than {MAX_TRACE_S:,.0f} s", _Shown(f"{seconds:,.0f} s"))
    return seconds


def _gpus(count: int, found: Any) -> int:
    if count == 0:
        raise _Drop("no GPUs")
    if count > MAX_JOB_GPUS:
        raise _Bad(f"more than {MAX_JOB_GPUS:,} GPUs", found)
    return count


# ------------------------------------------------------------------ Philly

class _BigInt:
    """A JSON integer too long to read (no field of a job is one)."""

    def __init__(self, digits: int):
        self.digits = digits

    def __repr__(self) -> str:
        return f"an integer of {self.digits:,} digits"


class _JsonFlaws:
    """Decoder hooks noting what JSON readers tolerate but a job must not hold: a key repeated in one
    object (its first value would be lost) and ``NaN`` or ``Infinity`` (not JSON)."""

    def __init__(self):
        self.flaw: _Bad | None = None

    def pairs(self, pairs: list) -> dict:
        obj = dict(pairs)
        if len(obj) < len(pairs) and self.flaw is None:
            keys = [k for k, _ in pairs]
            self.flaw = _Bad("a key repeated in one object", next(k for k in keys if keys.count(k) > 1))
        return obj

    def constant(self, name: str) -> None:
        if self.flaw is None:
            self.flaw = _Bad("NaN or Infinity (not JSON)", _Shown(name))

    @staticmethod
    def integer(text: str) -> int | _BigInt:
        return int(text) if len(text) <= _MOST_DIGITS else _BigInt(len(text.lstrip("-")))


def read_philly(path: str | Path) -> Iterator[tuple[int, Any, _Bad | None]]:
    """Each job of a Philly ``cluster_job_log`` (a JSON list) as ``(line, job, flaw)``: the line the job
    starts on, the decoded job, and a JSON flaw that makes it malformed (None when it has none).

    The file is read through :func:`netsim.inputfile.read_text` (a regular file of at most
    :data:`MAX_SOURCE_BYTES`, UTF-8); a JSON syntax error is a ConfigError at its line.
    """
    file = str(path)
    text = read_text(path, MAX_SOURCE_BYTES, "Philly cluster_job_log")
    flaws = _JsonFlaws()
    decoder = json.JSONDecoder(object_pairs_hook=flaws.pairs, parse_constant=flaws.constant,
                               parse_int=flaws.integer)
    i = _JSON_SPACE.match(text).end()
    if i == len(text):
        raise ConfigError(f"the file is empty: expected Philly's cluster_job_log, a JSON list of jobs ({PHILLY_URL})",
                          "", file)
    line = 1 + text.count("\n", 0, i)
    if text[i] != "[":
        value, _ = _decode(decoder, text, i, file, line)
        raise at_line(file, line, None, f"not a Philly cluster_job_log: expected a JSON list of jobs ({PHILLY_URL}), "
                                        f"got {_json_kind(value)}")
    pos, i = i, _JSON_SPACE.match(text, i + 1).end()
    while i < len(text) and text[i] != "]":
        line, pos = line + text.count("\n", pos, i), i
        flaws.flaw = None
        job, i = _decode(decoder, text, i, file, line)
        yield line, job, flaws.flaw
        i = _JSON_SPACE.match(text, i).end()
        if text.startswith(",", i):
            i = _JSON_SPACE.match(text, i + 1).end()
            if i == len(text) or text[i] == "]":
                raise _syntax(file, text, line, pos, i, "a comma after the last job (JSON allows none) or a job "
                                                        "missing after a comma")
        elif i < len(text) and text[i] != "]":
            raise _syntax(file, text, line, pos, i, "expected ',' or ']' after a job")
    if i == len(text):
        raise _syntax(file, text, line, pos, i, "the list of jobs is not closed by ']'")
    end = _JSON_SPACE.match(text, i + 1).end()
    if end < len(text):
        raise _syntax(file, text, line, pos, end, "text after the list of jobs: the file holds one JSON list")


def _decode(decoder: json.JSONDecoder, text: str, i: int, file: str, line: int) -> tuple[Any, int]:
    """The JSON value at ``text[i]`` and where it ends; a ConfigError at the line of a syntax error."""
    try:
        return decoder.raw_decode(text, i)
    except json.JSONDecodeError as exc:
        raise at_line(file, exc.lineno, None, f"not a Philly cluster_job_log (invalid JSON): {exc.msg} (column "
                                              f"{exc.colno:,})") from None
    except RecursionError:
        raise at_line(file, line, None, "not a Philly cluster_job_log: JSON nested too deeply (a job is an object "
                                        "of lists and objects a few levels deep)") from None


def _syntax(file: str, text: str, line: int, pos: int, i: int, message: str) -> ConfigError:
    return at_line(file, line + text.count("\n", pos, i), None, f"not a Philly cluster_job_log (invalid JSON): "
                                                                  f"{message}")


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", str: "a string", bool: "true or false", type(None): "null", list: "a list"}
    return kinds.get(type(value), "a number")


def _philly_job(job: Any, submitted: datetime | None, statuses: Sequence[str], attempts: str, seen: set) -> _Job:
    """The usable job of one ``cluster_job_log`` entry (``submitted``: its submit time, when it has a valid
    one); raises :class:`_Drop` with the reason otherwise."""
    if not isinstance(job, dict):
        raise _Bad("not a job (a JSON object)", _Shown(_json_kind(job)))
    jobid = _name(job.get("jobid"), "jobid", seen)
    submitted = submitted or _time(job.get("submitted_time"), "submitted_time")
    status = job.get("status")
    if not isinstance(status, str) or status not in PHILLY_STATUSES:
        raise _Bad(f"status not {', '.join(PHILLY_STATUSES[:-1])} or {PHILLY_STATUSES[-1]}", status)
    if status not in statuses:
        raise _Drop(f"status {status} (not kept)")
    runs = job.get("attempts")
    if not isinstance(runs, list):
        raise _Bad("attempts not a list", runs)
    if not runs:
        raise _Drop("no scheduling attempt")
    for run in runs:
        if not isinstance(run, dict):
            raise _Bad("attempt not a JSON object", run)
    if runs[-1].get("end_time") in (None, "None"):
        raise _Drop("still running at the snapshot")
    runtime = sum(_philly_span(run) for run in (runs if attempts == "sum" else runs[-1:]))
    count = _philly_gpus(runs[-1].get("detail"))
    gpus = _gpus(count, _Shown(f"{count:,}"))
    return _Job(jobid, submitted, gpus, _runtime(runtime, "no runtime (end not after start)"),
                _user(job.get("user")))


def _philly_span(run: dict) -> float:
    """One attempt's runtime (s)."""
    if run.get("start_time") in (None, "None") or run.get("end_time") in (None, "None"):
        raise _Drop("attempt without start or end time")
    start, end = _time(run["start_time"], "start_time"), _time(run["end_time"], "end_time")
    if end < start:
        raise _Bad("an attempt ends before it starts", _Shown(f"{run['start_time']} to {run['end_time']}"))
    return (end - start).total_seconds()


def _philly_gpus(detail: Any) -> int:
    """The GPUs of an attempt's ``detail``: each machine's ``gpus``, a list of distinct GPU names."""
    if detail is None:
        return 0
    if not isinstance(detail, list):
        raise _Bad("detail not a list of machines", detail)
    total, ips = 0, set()
    for machine in detail:
        if not isinstance(machine, dict) or "gpus" not in machine:
            raise _Bad("machine not a JSON object with gpus", machine)
        names = machine["gpus"]
        if not isinstance(names, list) or not all(isinstance(g, str) and g for g in names):
            raise _Bad("gpus not a list of GPU names", names)
        if len(set(names)) < len(names):
            raise _Bad("a GPU listed twice on one machine", names)
        ip = machine.get("ip")
        if isinstance(ip, str) and ip in ips:
            raise _Bad("a machine listed twice in one attempt", ip)
        ips.add(ip)
        total += len(names)
    return total


def convert_philly(path: str | Path, *, statuses: Sequence[str] = ("Pass",), attempts: str = "last",
                   **options: Any) -> Conversion:
    """Convert Philly's ``cluster_job_log`` to a job trace.

    Parameters
    ----------
    path:
        The ``cluster_job_log`` JSON file.
    statuses:
        Job statuses kept (default ``Pass``: jobs that ran to completion; ``Killed`` and ``Failed`` jobs
        stopped early, so their runtime is not their length).
    attempts:
        ``last``: the runtime is the last attempt's (earlier ones were preempted or failed and restarted);
        ``sum``: all attempts' runtimes added.
    **options:
        What every converter takes (:data:`OPTIONS`): ``max_gpus`` (the cluster's GPUs: bigger jobs are
        dropped), ``start_s`` and ``end_s`` (keep jobs submitted in ``[start_s, end_s)`` seconds after the
        log's first submission), ``limit`` (keep the earliest this many), ``min_gpus`` (drop smaller
        jobs; 1 keeps single-GPU jobs, which occupy GPUs but never touch the fabric), ``size_classes``
        (the model by GPU count, :func:`netsim.cluster.presets.model_for_gpus`), ``gpus_per_host`` and
        ``preset_dirs`` (for :func:`netsim.cluster.presets.plan_job`).

    Returns
    -------
    Conversion
        Submit times relative to the first kept job; ``duration_s`` the measured runtime; GPUs those of
        the last attempt (summed over its machines). A malformed job is dropped, counted under its
        reason and, for the first few, named by the line it starts on.
    """
    if attempts not in ("last", "sum"):
        raise ConfigError(f"expected attempts 'last' or 'sum', got {shorten(attempts)}", "attempts")
    statuses = _statuses(statuses, PHILLY_STATUSES, "Philly status")
    _check_options(**options)
    drops, jobs, seen, starts, read = _Drops(str(path)), [], set(), [], 0
    for line, job, flaw in read_philly(path):
        read += 1
        try:
            if flaw is not None:
                raise flaw
            submitted = _start(job.get("submitted_time")) if isinstance(job, dict) else None
            if submitted is not None:
                starts.append(submitted)
            jobs.append(_philly_job(job, submitted, statuses, attempts, seen))
        except _Drop as drop:
            drops.add(drop, line, job.get("jobid") if isinstance(job, dict) else None)
    if not read:
        raise ConfigError(f"no jobs: the list is empty (expected Philly's cluster_job_log, {PHILLY_URL})", "",
                          str(path))
    return _select(jobs, min(starts, default=None), read, drops, **options)


# ------------------------------------------------------------------ Helios

def read_helios(path: str | Path) -> tuple[dict[str, int], Iterator[tuple[int, list[str]]]]:
    """The header of a Helios ``cluster_log.csv`` (column -> index) and its data rows as ``(line, cells)``
    (blank lines skipped, a quoted field may span lines: the line a row starts on).

    Read through :func:`netsim.inputfile.read_text` (a regular file of at most :data:`MAX_SOURCE_BYTES`,
    UTF-8); a missing or repeated column, or a quote left open, is a ConfigError at its line.
    """
    file = str(path)
    rows = _csv_rows(read_text(path, MAX_SOURCE_BYTES, "Helios cluster_log.csv"), file)
    first = next(rows, None)
    if first is None:
        raise ConfigError(f"the file is empty: expected a Helios cluster_log.csv ({HELIOS_URL}) with the header "
                          f"{','.join(HELIOS_COLUMNS)},...", "", file)
    line, header = first
    names = [c.strip() for c in header]
    for name in names:
        if names.count(name) > 1:
            raise at_line(file, line, None, f"column {shorten(name)} appears {names.count(name)} times in the "
                                            "header; each column once (twice is not a Helios cluster_log.csv)")
    missing = [c for c in HELIOS_COLUMNS if c not in names]
    if missing:
        raise at_line(file, line, None, f"not a Helios cluster_log.csv ({HELIOS_URL}): missing column(s) "
                                        f"{', '.join(missing)}; expected {', '.join(HELIOS_COLUMNS)} (and vc, cpu_num, "
                                        f"node_num, start_time, end_time, queue), comma-separated")
    return {name: k for k, name in enumerate(names)}, rows


def _csv_rows(text: str, file: str) -> Iterator[tuple[int, list[str]]]:
    """Each non-blank row of CSV ``text`` with the line it starts on."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    end = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise at_line(file, end + 1, None, _csv_problem(str(exc))) from None
        start, end = end + 1, reader.line_num
        if row and (len(row) > 1 or row[0].strip()):
            yield start, row


def _csv_problem(message: str) -> str:
    if "end of data" in message or "EOF" in message:
        return "a quoted field is not closed: a '\"' opened on this line has no closing quote"
    if "field limit" in message:
        return f"a field longer than {csv.field_size_limit():,} characters: not a Helios cluster_log.csv"
    return f"not a readable CSV line: {shorten(message, 120)[1:-1]}"


def _helios_job(cells: tuple[str, ...], submitted: datetime | None, statuses: Sequence[str], seen: set) -> _Job:
    """The usable job of one ``cluster_log.csv`` row (``cells``: its :data:`HELIOS_COLUMNS`, stripped;
    ``submitted``: its submit time, when valid); raises :class:`_Drop` with the reason otherwise."""
    job_id, user, gpu_num, state, submit_time, duration = cells
    job = _name(job_id, "job_id", seen)
    submitted = submitted or _time(submit_time, "submit_time")
    if state not in HELIOS_STATES:
        raise _Bad(f"state not {', '.join(HELIOS_STATES[:-1])} or {HELIOS_STATES[-1]}", state)
    if state not in statuses:
        raise _Drop(f"state {state} (not kept)")
    gpus = _gpus(_whole(gpu_num, "gpu_num"), gpu_num)
    runtime = _number(duration, "duration") if duration else 0.0
    return _Job(job, submitted, gpus, _runtime(runtime, "no runtime (duration missing or 0)"), _user(user))


def _whole(text: str, name: str) -> int:
    """A cell holding a whole number of at least 0, read exactly (``2.0`` is 2, ``2.7`` is refused, never 2);
    more than :data:`MAX_JOB_GPUS` reads as ``MAX_JOB_GPUS + 1``."""
    if text.isascii() and text.isdigit():  # perf: the common case, without Decimal
        return int(text) if len(text) < 10 else MAX_JOB_GPUS + 1
    if not _NUMBER.fullmatch(text):
        raise _Bad(f"{name} not a number", text)
    value = Decimal(text)
    if value < 0:
        raise _Bad(f"{name} below 0", text)
    if value > MAX_JOB_GPUS:
        return MAX_JOB_GPUS + 1
    if value != value.to_integral_value():
        raise _Bad(f"{name} not a whole number", text)
    return int(value)


def _number(text: str, name: str) -> float:
    """A cell holding a finite number of at least 0 (no ``nan``, ``inf``, ``1_000``)."""
    if not _NUMBER.fullmatch(text):
        raise _Bad(f"{name} not a number", text)
    value = float(text)
    if not math.isfinite(value):
        raise _Bad(f"{name} not a number", text)
    if value < 0:
        raise _Bad(f"{name} below 0", text)
    return value


def convert_helios(path: str | Path, *, statuses: Sequence[str] = ("COMPLETED",), **options: Any) -> Conversion:
    """Convert a Helios cluster's ``cluster_log.csv`` to a job trace.

    Parameters
    ----------
    path:
        The ``cluster_log.csv`` file (of Earth, Saturn, Uranus or Venus).
    statuses:
        Job states kept (default ``COMPLETED``; ``CANCELLED`` jobs were stopped by their users and the
        others failed, so their runtime is not their length).
    **options:
        As for :func:`convert_philly` (:data:`OPTIONS`).

    Returns
    -------
    Conversion
        Submit times relative to the first kept job; ``duration_s`` the trace's ``duration``; GPUs its
        ``gpu_num`` (CPU-only jobs, about half of Helios's, are dropped as having no GPUs). A malformed
        row is dropped, counted under its reason and, for the first few, named by its line.
    """
    statuses = _statuses(statuses, HELIOS_STATES, "Helios state")
    _check_options(**options)
    columns, rows = read_helios(path)
    drops, jobs, seen, starts, read = _Drops(str(path)), [], set(), [], 0
    pick, width = itemgetter(*(columns[c] for c in HELIOS_COLUMNS)), len(columns)
    for line, row in rows:
        read += 1
        cells = tuple(map(str.strip, pick(row))) if len(row) == width else None
        try:
            if cells is None:
                raise _Bad("wrong number of fields (not the header's)",
                           _Shown(f"{len(row)} fields; the header has {width}"))
            submitted = _start(cells[4])
            if submitted is not None:
                starts.append(submitted)
            jobs.append(_helios_job(cells, submitted, statuses, seen))
        except _Drop as drop:
            drops.add(drop, line, cells[0] if cells else None)
    if not read:
        raise ConfigError("no jobs: the file has a header but no rows", "", str(path))
    return _select(jobs, min(starts, default=None), read, drops, **options)


# ------------------------------------------------------------------ shared options

def convert(fmt: str, path: str | Path, **options: Any) -> Conversion:
    """Convert a public trace of format ``fmt`` (one of :data:`FORMATS`); ``options`` go to its converter.

    Examples
    --------
    >>> result = convert("helios", "cluster_log.csv", max_gpus=1024, min_gpus=8)  # doctest: +SKIP
    >>> print(result.describe())  # doctest: +SKIP
    7 jobs read, 1 kept, dropped: 1 state FAILED (not kept); 1 no GPUs; ...
    """
    own = {"philly": ("statuses", "attempts"), "helios": ("statuses",)}
    if fmt not in own:
        raise ConfigError(f"unknown trace format {shorten(fmt)}; known: {', '.join(FORMATS)}"
                          f"{did_you_mean(fmt, FORMATS)}", "format")
    unknown = sorted(set(options) - set(OPTIONS) - set(own[fmt]))
    if unknown:
        raise ConfigError(f"{fmt} traces take no option {unknown[0]}", unknown[0])
    return (convert_philly if fmt == "philly" else convert_helios)(path, **options)


def _statuses(statuses: Sequence[str], known: tuple[str, ...], what: str) -> tuple[str, ...]:
    statuses = (statuses,) if isinstance(statuses, str) else tuple(statuses)
    if not statuses:
        raise ConfigError(f"expected at least one {what} to keep; allowed: {', '.join(known)}", "statuses")
    for status in statuses:
        if status not in known:
            raise ConfigError(f"unknown {what} {shorten(status)}; allowed: {', '.join(known)}"
                              f"{did_you_mean(status, known)}", "statuses")
    return statuses


def _check_options(*, max_gpus: int | None = None, start_s: float = 0.0, end_s: float | None = None,
                   limit: int | None = None, min_gpus: int = 1, gpus_per_host: int = 8, **_: Any) -> None:
    """ConfigError naming the option whose value is out of its range (the experiment file's bounds)."""
    _integer(max_gpus, "max_gpus", MAX_JOB_GPUS, "a number of GPUs")
    _integer(min_gpus, "min_gpus", max_gpus or MAX_JOB_GPUS, "a number of GPUs", optional=False,
             bound=" (the cluster's GPUs)" if max_gpus else "")
    _integer(limit, "limit", MAX_LIMIT, "a number of jobs")
    _integer(gpus_per_host, "gpus_per_host", MAX_PER_HOST, "a number of GPUs", optional=False)
    for value, name in ((start_s, "start_s"), (end_s, "end_s")):
        if value is None and name == "end_s":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_TRACE_S:
            shown = f"{value:g} s" if isinstance(value, float) else shorten(value)
            raise ConfigError(f"expected a time from 0 to {MAX_TRACE_S:,.0f} s after the log's first submission, "
                              f"got {shown}", name)
    if end_s is not None and end_s <= start_s:
        raise ConfigError(f"expected a time after the start of the window ({start_s:,g} s), got {end_s:,g} s: "
                          "the window would be empty", "end_s")


def _integer(value: Any, name: str, high: int, what: str, optional: bool = True, bound: str = "") -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ConfigError(f"expected {what} from 1 to {high:,}{bound}, got {shorten(value)}", name)


def _select(jobs: list[_Job], t0: datetime | None, read: int, drops: _Drops, *, max_gpus: int | None = None,
            start_s: float = 0.0, end_s: float | None = None, limit: int | None = None, min_gpus: int = 1,
            size_classes: Sequence[tuple[int, str]] = SIZE_CLASSES, gpus_per_host: int = 8,
            preset_dirs: Sequence[Path] | None = None) -> Conversion:
    """The options every converter shares, applied to usable jobs in submit order (ties keep the file's
    order): the time window from ``t0``, the GPU bounds and the count cap; then the trace."""
    kept: list[tuple] = []
    for job in sorted(jobs, key=lambda j: j.submitted):
        rel = (job.submitted - t0).total_seconds()
        reason = ("submitted outside the time window" if rel < start_s or (end_s is not None and rel >= end_s)
                  else f"fewer than {min_gpus} GPUs" if job.gpus < min_gpus
                  else f"more GPUs than the cluster's {max_gpus:,}" if max_gpus is not None and job.gpus > max_gpus
                  else f"beyond the first {limit:,} jobs" if limit is not None and len(kept) >= limit
                  else f"submitted more than {MAX_TRACE_S:,.0f} s after the first kept job"
                  if kept and rel - kept[0][1] > MAX_TRACE_S else "")
        if reason:
            drops.counts[reason] += 1
        else:
            kept.append((job.job, rel, job.gpus, job.runtime_s, job.user))
    if not kept:
        first = f"; first dropped: {drops.first[0]}" if drops.first else ""
        raise ConfigError(f"no job left after filtering: {_counts(read, 0, dict(drops.counts))}{first}; widen the time "
                          "window, the statuses kept or the GPU bounds", "", drops.file)
    trace = _trace(kept, max_gpus, size_classes, gpus_per_host, preset_dirs)
    return Conversion(trace, read, dict(drops.counts), tuple(drops.first), drops.malformed)


def _trace(kept: list, max_gpus: int | None, size_classes: Sequence[tuple[int, str]], gpus_per_host: int,
           preset_dirs: Sequence[Path] | None) -> JobTrace:
    """The validated trace of converted jobs ``(job, submit_s, gpus, duration_s, user)``."""
    dirs = tuple(preset_dirs) if preset_dirs is not None else search_dirs()
    presets = PresetCache(dirs)
    first = kept[0][1]
    rows, plans = [], {}
    for job, rel, gpus, runtime, user in kept:
        if gpus not in plans:  # perf: one plan per job size, not per job
            model = model_for_gpus(gpus, size_classes)
            preset = presets.get(model)
            if preset is None:
                raise ConfigError(f"the size classes name model {shorten(model)}, which has no preset in "
                                  f"{', '.join(map(str, dirs))}", "size_classes")
            plans[gpus] = (model, *plan_job(gpus, preset, gpus_per_host))
        rows.append((job, round(rel - first, 3), gpus, *plans[gpus], runtime, user))
    table = pd.DataFrame(rows, columns=["job", "submit_s", "gpus", "model", *PLAN_COLUMNS, "duration_s", "user"])
    table = table.astype({"ep": "Int64", "global_batch": "Int64"})
    return validate_trace(table, "", max_gpus, dirs)

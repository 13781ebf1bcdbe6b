"""The job-trace format of trace-driven cluster runs: one row per job (CSV or Parquet) read into a
validated, typed :class:`JobTrace`; every error names the file, the line (or row) and the column.

Columns (docs/cluster-traces.md has the full table): ``job``, ``submit_s`` (or ``submit`` with units),
``gpus``, ``model`` (a training preset's file stem, or ``collective:<op>:<algorithm>:<size>``), optional
``tp``, ``pp``, ``dp``, ``ep``, exactly one of ``iterations`` and ``duration_s`` per row, optional
``global_batch``, ``micro_batch``, ``priority`` and ``user``.

Reading is linear in the trace: columns are converted and range-checked as whole arrays, and the
cross-column rules (:func:`netsim.cluster.validate._check_row`) run once per distinct combination of
the columns they read, on the first row that has it.
"""

from __future__ import annotations

import codecs
import copy
import csv
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from netsim.cluster.presets import PresetCache, search_dirs
from netsim.cluster.validate import (
    ALLOWED,
    COLLECTIVE_PREFIX,
    JOB_PATTERN,
    MAX_DIM,
    MAX_JOB_GPUS,
    MAX_JOB_ITERATIONS,
    MAX_TRACE_S,
    REQUIRED,
    TRACE_DTYPES,
    CollectiveModel,
    _check_columns,
    _check_row,
    parse_collective,
    parse_duration,
)
from netsim.errors import ConfigError, NetsimError, did_you_mean, shorten
from netsim.inputfile import at_line, at_row, decode, read_bytes, regular_file

#: Largest trace file read (bytes): a 1,000,000-job trace is 50 to 120 MB as CSV.
MAX_TRACE_BYTES = 256 * 2**20
#: Most jobs in one trace: what ``cluster.max_jobs`` allows, and what a check does within 30 s and 2 GiB.
MAX_TRACE_JOBS = 1_000_000
#: Longest ``model`` and ``user`` (characters), as for job names.
MAX_NAME_CHARS = 200
#: The columns the cross-column rules read: rows that agree on them get the same verdict.
_ROW_RULE_COLUMNS = ("gpus", "model", "tp", "pp", "dp", "ep", "global_batch", "micro_batch")


@dataclass(frozen=True, eq=False)  # compare traces by their tables: a.jobs.equals(b.jobs)
class JobTrace:
    """A validated job trace: one row per job, columns and dtypes of :data:`TRACE_DTYPES`, sorted by
    submit time (ties keep the file's order), index 0..n-1.

    Attributes
    ----------
    jobs:
        The table. ``kind`` is ``training`` or ``collective``; ``iterations`` or ``duration_s`` is
        missing (``<NA>``/``NaN``) where the row gave the other.
    source:
        The file it was read from (``""`` for a generated trace).
    preset_dirs:
        Where its models' presets were found (:func:`netsim.cluster.presets.search_dirs`).
    """

    jobs: pd.DataFrame
    source: str = ""
    preset_dirs: tuple[Path, ...] = field(default_factory=tuple)
    #: the job index and the workloads resolved so far (each distinct workload is built once)
    _cache: dict = field(default_factory=dict, init=False, repr=False)

    def __len__(self) -> int:
        return len(self.jobs)

    def gpu_hours(self) -> float:
        """GPU-hours of the jobs given by ``duration_s`` (jobs given by iterations have no length yet)."""
        d = self.jobs["duration_s"]
        return float((self.jobs["gpus"] * d).sum(skipna=True) / 3600.0)

    def workload(self, job: str) -> dict:
        """The workload mapping of one job, as an experiment's ``workload:`` takes it: the preset's file
        with the row's parallelism and batch overrides laid on it (``iterations`` when the row gives them),
        or a ``type: collective`` mapping on ``gpus`` ranks."""
        index = self._cache.get("index")
        if index is None:  # perf: the job's row by a dict, its cells from lists (a Series per row is slow)
            index = self._cache["index"] = {name: i for i, name in enumerate(self.jobs["job"])}
            self._cache["columns"] = {c: self.jobs[c].tolist() for c in (*_ROW_RULE_COLUMNS, "kind", "iterations")}
        i = index.get(job) if isinstance(job, str) else None
        if i is None:
            names = list(index)[:10_000]  # (the suggestion looks at the first jobs only: it is quadratic)
            raise ConfigError(f"no job {shorten(job)} in the trace{did_you_mean(job, names)}")
        row = {c: values[i] for c, values in self._cache["columns"].items()}
        return job_workload(row, self.preset_dirs, self._cache)

    def write(self, path: str | Path) -> Path:
        """Write the trace as CSV or Parquet (by suffix), atomically; optional columns that are empty in
        every row are left out. Returns the path."""
        path = Path(path)
        kind = _file_kind(path)
        out = self.jobs.drop(columns=["kind"])
        for col in ("ep", "iterations", "duration_s", "global_batch", "micro_batch"):
            if out[col].isna().all():
                out = out.drop(columns=[col])
        if (out["priority"] == 0).all():
            out = out.drop(columns=["priority"])
        if (out["user"] == "").all():
            out = out.drop(columns=["user"])
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            if kind == "parquet":
                out.to_parquet(tmp, index=False)
            else:
                out.to_csv(tmp, index=False)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path


def job_workload(row: Mapping[str, Any], preset_dirs: tuple[Path, ...] = (), cache: dict | None = None) -> dict:
    """The workload mapping of one validated trace row (a Series or a mapping of its cells, see
    :meth:`JobTrace.workload`); ``cache`` (a
    dict kept by the caller) holds the workloads built so far, so that each distinct one is built once."""
    iterations = None if pd.isna(row["iterations"]) else int(row["iterations"])
    key = ("workload", *(None if pd.isna(row[k]) else row[k] for k in (*_ROW_RULE_COLUMNS, "kind")), iterations)
    if cache is not None and key in cache:
        return copy.deepcopy(cache[key])
    if row["kind"] == "collective":
        c = parse_collective(row["model"])
        out = {"type": "collective", "op": c.op, "algorithm": c.algorithm, "size": c.size_bytes,
               "ranks": int(row["gpus"])}
        out |= {"iterations": iterations} if iterations else {}
    else:
        out = _training_workload(row, preset_dirs, iterations, {} if cache is None else cache)
    if cache is not None:
        cache[key] = copy.deepcopy(out)
    return out


def _training_workload(row: Mapping[str, Any], preset_dirs: tuple[Path, ...], iterations: int | None, cache: dict) -> dict:
    """The preset of a training row (read once per model) with the row's overrides laid on it."""
    from netsim.config import _deep_merge, _read_yaml
    model = row["model"]
    data = cache.get(("preset", model))
    if data is None:
        presets = cache.setdefault("presets", PresetCache(preset_dirs or search_dirs()))
        preset = presets.get(model)
        if preset is None:
            raise ConfigError(f"model {shorten(model)} not found in {', '.join(map(str, presets.dirs))}")
        _, data = _read_yaml(preset.path, "a mapping with 'type' (a workload)")
        data = cache[("preset", model)] = data.get("workload", data)
    over: dict[str, Any] = {"parallelism": {"tp": int(row["tp"]), "pp": int(row["pp"]), "dp": int(row["dp"])}}
    if not pd.isna(row["ep"]):
        over["moe"] = {"ep": int(row["ep"])}
    batch = {k: int(row[k]) for k in ("global_batch", "micro_batch") if not pd.isna(row[k])}
    if batch:
        over["model"] = batch
    if iterations:
        over["iterations"] = iterations
    return _deep_merge(copy.deepcopy(data), over)


def read_trace(path: str | Path, max_gpus: int | None = None) -> JobTrace:
    """Read and validate a job trace (CSV or Parquet, by suffix).

    Parameters
    ----------
    path:
        The trace: a regular file of at most :data:`MAX_TRACE_BYTES` bytes and :data:`MAX_TRACE_JOBS`
        jobs. CSV lines whose first character other than a blank is ``#`` are comments; a ``#`` elsewhere
        is data.
    max_gpus:
        The cluster's GPUs: a job asking for more is an error.

    Returns
    -------
    JobTrace
        Raises :class:`~netsim.errors.ConfigError` naming ``file:line`` (CSV, the physical line) or
        ``file: row N`` (Parquet, data rows counted from 1), the column, what is wrong and what is allowed.

    Examples
    --------
    >>> trace = read_trace("experiments/traces/small-cluster.csv", max_gpus=128)  # doctest: +SKIP
    >>> len(trace), int(trace.jobs["gpus"].max())  # doctest: +SKIP
    (12, 64)
    """
    path = Path(path)
    kind = _file_kind(path)
    if kind == "parquet":
        return _validate(_read_parquet(path), _Place(str(path)), max_gpus, search_dirs(path))
    table, place = _read_csv(path)
    return _validate(table, place, max_gpus, search_dirs(path))


def validate_trace(table: pd.DataFrame, source: str = "", max_gpus: int | None = None,
                   preset_dirs: tuple[Path, ...] | None = None, lines: list[int] | None = None) -> JobTrace:
    """Validate a table of jobs (the columns of a trace file, values as text or numbers) into a
    :class:`JobTrace`; ``lines[i]`` is row i's line in ``source`` (else errors name the row, from 1).

    Used by :func:`read_trace`, the converters and the generator, so every trace passes one validator.
    """
    table = table.reset_index(drop=True)
    table.columns = [str(c).strip() for c in table.columns]
    place = _Place(source, None if lines is None else np.asarray(lines, dtype=np.int64))
    repeated = table.columns[table.columns.duplicated()]
    if len(repeated):
        raise place.error(f"column {shorten(repeated[0])} appears more than once; give each column once", None)
    return _validate(table, place, max_gpus, preset_dirs)


def _validate(table: pd.DataFrame, place: _Place, max_gpus: int | None,
              preset_dirs: tuple[Path, ...] | None) -> JobTrace:
    """The checks of :func:`validate_trace` on a table with unique, stripped column names."""
    if max_gpus is not None and (not isinstance(max_gpus, (int, np.integer)) or isinstance(max_gpus, bool)
                                 or not 1 <= max_gpus <= MAX_JOB_GPUS):
        raise ConfigError(f"expected the cluster's GPUs, from 1 to {MAX_JOB_GPUS:,}, got {shorten(max_gpus)}",
                          "max_gpus")
    if len(table) > MAX_TRACE_JOBS:
        raise place.error(f"{len(table):,} jobs: a trace holds at most {MAX_TRACE_JOBS:,}", None)
    dirs = tuple(preset_dirs) if preset_dirs is not None else search_dirs()
    _check_columns(table, place)
    jobs = _typed(table, place, max_gpus)
    _row_rules(jobs, place, PresetCache(dirs))
    jobs = jobs.sort_values("submit_s", kind="stable").reset_index(drop=True)
    return JobTrace(jobs.astype(TRACE_DTYPES)[list(TRACE_DTYPES)], place.file, dirs)


@dataclass(frozen=True)
class _Place:
    """Where the rows of a table are, for messages: ``file:LINE`` (CSV, ``lines[i]`` being data row i's
    physical line), ``file: row N`` (Parquet) or ``row N`` (a table built in memory), N counted from 1."""

    file: str
    lines: np.ndarray | None = None
    header: int | None = None  #: the header's line (CSV)

    def error(self, message: str, row: int | None, column: str = "") -> ConfigError:
        col = column or None
        if row is None:
            if self.header is not None:
                return at_line(self.file, self.header, col, message)
            return ConfigError(message, f"column {column!r}" if column else "", self.file or None)
        if self.lines is not None and self.file:
            return at_line(self.file, int(self.lines[row]), col, message)
        if self.file:
            return at_row(self.file, row, col, message)
        return ConfigError(message, f"row {row + 1:,}" + (f", column {column!r}" if column else ""))

    def of(self, row: int) -> str:
        """``line 12`` or ``row 3``: where data row ``row`` (0-based) is."""
        return f"line {int(self.lines[row]):,}" if self.lines is not None else f"row {row + 1:,}"


def _file_kind(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".csv":
        return "csv"
    raise ConfigError(f"expected a trace file ending in .csv or .parquet, got {shorten(path.name)}", "", str(path))


# ------------------------------------------------------------------------------------ the two readers
def _read_csv(path: Path) -> tuple[pd.DataFrame, _Place]:
    """The cells of a CSV trace as text (one column each) and where each row is.

    Every record is one physical line: a quoted field may hold commas but not a line break (no valid
    trace value has one, and an unclosed quote would otherwise swallow the lines after it).
    """
    where = str(path)
    raw = read_bytes(path, MAX_TRACE_BYTES, "job trace")
    decode(raw, where, "job trace")  # strict UTF-8 and no NUL, or a located error
    raw = raw.removeprefix(codecs.BOM_UTF8)
    lone = re.search(rb"\r(?!\n)", raw)
    if lone:
        raise at_line(where, raw.count(b"\n", 0, lone.start()) + 1, None, "a carriage return inside the line (old "
                      "Mac line ends?): save the file with \\n or \\r\\n line ends")
    starts, ends, numbers = _data_lines(raw)
    if not len(numbers):
        raise ConfigError("the file is empty: expected a header line (job,submit_s,gpus,model,...) and one line "
                          "per job", "", where)
    if len(numbers) - 1 > MAX_TRACE_JOBS:
        raise at_line(where, int(numbers[MAX_TRACE_JOBS + 1]), None, f"more than {MAX_TRACE_JOBS:,} jobs: a trace "
                      f"holds at most {MAX_TRACE_JOBS:,}")
    place = _Place(where, numbers[1:], int(numbers[0]))
    names = _header(raw[starts[0]:ends[0]].decode().removesuffix("\r"), place)
    cuts = np.flatnonzero(np.diff(numbers[1:]) != 1) + 1  # runs of consecutive data lines, joined as slices
    firsts, lasts = np.concatenate(([1], cuts + 1)), np.concatenate((cuts, [len(numbers) - 1]))
    body = b"\n".join(raw[starts[i]:ends[j]] for i, j in zip(firsts, lasts)) if len(numbers) > 1 else b""
    return _parse_rows(body, names, place), place


def _data_lines(raw: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, 1-based number) of each line that is neither blank nor a comment."""
    data = np.frombuffer(raw, np.uint8)
    newlines = np.flatnonzero(data == ord("\n"))
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [len(raw)]))
    first = data[np.minimum(starts, max(len(raw) - 1, 0))] if len(raw) else np.zeros(1, np.uint8)
    maybe = (starts == ends) | np.isin(first, np.frombuffer(b" \t#\r", np.uint8))
    skip = np.zeros(len(starts), bool)
    for k in np.flatnonzero(maybe):  # perf: only lines that start with a blank or '#' are looked at
        line = raw[starts[k]:ends[k]].strip(b" \t\r")
        skip[k] = not line or line.startswith(b"#")
    keep = np.flatnonzero(~skip)
    return starts[keep], ends[keep], keep + 1


def _header(line: str, place: _Place) -> list[str]:
    """The column names of the header line: named, each once."""
    try:
        names = [name.strip() for name in next(csv.reader([line], strict=True))]
    except csv.Error as exc:
        raise place.error(f"not valid CSV: {exc}", None) from None
    for k, name in enumerate(names):
        if not name:
            raise place.error(f"column {k + 1} of the header has no name (a trailing comma?)", None)
        if name in names[:k]:
            raise place.error(f"column {shorten(name)} appears twice (columns {names.index(name) + 1} and {k + 1}); "
                              "give each column once", None)
    return names


def _parse_rows(body: bytes, names: list[str], place: _Place) -> pd.DataFrame:
    """The data lines as text columns; a line of the wrong width or a value across lines is an error."""
    import pyarrow.csv as pcsv
    if not body:
        return pd.DataFrame({n: pd.array([], dtype="string[pyarrow]") for n in names})
    invalid = []

    def refuse(row) -> str:
        invalid.append(row)
        return "error"
    try:
        table = pcsv.read_csv(
            pa.py_buffer(body), read_options=pcsv.ReadOptions(column_names=names, use_threads=False),
            parse_options=pcsv.ParseOptions(invalid_row_handler=refuse),
            convert_options=pcsv.ConvertOptions(column_types={n: pa.large_string() for n in names},
                                                strings_can_be_null=False, quoted_strings_can_be_null=False))
    except pa.ArrowInvalid as exc:
        if invalid:
            row = invalid[0]
            raise place.error(_width_message(row.actual_columns, names, row.text), row.number - 1) from None
        raise ConfigError(f"not valid CSV: {shorten(str(exc), 200)[1:-1]}", "", place.file) from None
    for name in names:
        across = pc.match_substring(table[name], "\n")
        if pc.any(across).as_py():
            raise place.error(_ACROSS, int(np.flatnonzero(across.to_numpy(zero_copy_only=False))[0]))
    if table.num_rows != len(place.lines):  # (only a value across lines changes the count)
        raise ConfigError(_ACROSS, "", place.file)
    return pd.DataFrame({n: pd.array(table[n].combine_chunks(), dtype="string[pyarrow]") for n in names},
                        index=pd.RangeIndex(table.num_rows))


_ACROSS = "a quoted field runs past the end of the line (an unclosed '\"'?); every job is one line"


def _width_message(fields: int, header: list[str], text: str) -> str:
    if "\n" in text:
        return _ACROSS
    if fields > len(header):
        return (f"{fields} fields but the header has {len(header)} columns: a trailing comma, or a comma inside "
                f"a value (quote such a value: \"a,b\")")
    return (f"{fields} fields but the header has {len(header)} columns (no {', '.join(header[fields:])[:200]}): "
            f"give every column, an empty one as nothing between two commas")


def _read_parquet(path: Path) -> pd.DataFrame:
    """The columns of a Parquet trace (numbers or text); refused when damaged, when a column repeats or
    holds neither numbers nor text, or when it holds too many rows or too much text."""
    import pyarrow.parquet as pq
    where = str(path)
    regular_file(path, MAX_TRACE_BYTES, "job trace")
    try:
        meta = pq.read_metadata(path)
        schema = meta.schema.to_arrow_schema()
        if meta.num_rows > MAX_TRACE_JOBS:
            raise ConfigError(f"{meta.num_rows:,} rows: a trace holds at most {MAX_TRACE_JOBS:,} jobs", "", where)
        names = schema.names
        repeated = [n for n in names if names.count(n) > 1]
        if repeated:
            raise ConfigError(f"column {shorten(repeated[0])} appears {names.count(repeated[0])} times; give each "
                              "column once", "", where)
        text = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
        table = pq.read_table(path, read_dictionary=text)
    except (pa.ArrowException, OSError, ValueError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"not a readable Parquet file ({shorten(reason, 160)[1:-1]})", "", where) from None
    out, size = {}, 0
    for name, col in zip(table.column_names, table.columns):
        col, chars = _parquet_column(col, name, where)
        size += chars
        if size > MAX_TRACE_BYTES:
            raise ConfigError(f"its text decodes to more than {MAX_TRACE_BYTES:,} bytes (limit); not a job trace",
                              "", where)
        out[str(name)] = col
    return pd.DataFrame(out, index=pd.RangeIndex(table.num_rows))


def _parquet_column(col: pa.ChunkedArray, name: str, where: str) -> tuple[Any, int]:
    """One Parquet column as numbers or text, and the characters its text decodes to."""
    kind = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        chars = 0
        for chunk in col.chunks:
            if pa.types.is_dictionary(chunk.type):
                lengths = pc.utf8_length(chunk.dictionary)
                chars += pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0
            else:
                chars += pc.sum(pc.utf8_length(chunk)).as_py() or 0
        if chars > MAX_TRACE_BYTES:
            return None, chars
        return pd.array(col.cast(pa.large_string()).combine_chunks(), dtype="string[pyarrow]"), chars
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return pd.arrays.ArrowExtensionArray(col.combine_chunks()), 0
    if pa.types.is_decimal(kind):
        return pc.cast(col, pa.float64()).to_numpy(), 0
    if pa.types.is_boolean(kind) or pa.types.is_null(kind):
        return col.to_pandas().astype(object), 0
    raise ConfigError(f"holds {shorten(str(col.type))[1:-1]} values; expected numbers or text", f"column {name!r}",
                      where)


# ------------------------------------------------------------------------------------ column checks
def _typed(table: pd.DataFrame, place: _Place, max_gpus: int | None) -> pd.DataFrame:
    """The columns converted and range-checked, defaults filled (parallelism is checked per row later)."""
    n = len(table)
    out = pd.DataFrame(index=pd.RangeIndex(n))
    out["job"] = _job_names(_Cells.of(table, "job", n), place)
    if "submit" in table.columns:
        out["submit_s"] = _submit_units(_Cells.of(table, "submit", n), place)
    else:
        out["submit_s"] = _Cells.of(table, "submit_s", n).numbers(
            place, f"seconds from the trace's start, from 0 to {MAX_TRACE_S:g}", 0, MAX_TRACE_S, False)
    missing = np.isnan(out["submit_s"].to_numpy())
    if missing.any():
        name = "submit" if "submit" in table.columns else "submit_s"
        raise place.error("missing submit time: every job needs one", int(np.flatnonzero(missing)[0]), name)
    high = MAX_JOB_GPUS if max_gpus is None else int(max_gpus)
    what = (f"a whole number of GPUs from 1 to {MAX_JOB_GPUS:,}" if max_gpus is None else
            f"a whole number of GPUs from 1 to {high:,} (the cluster's GPUs)")
    gpus = _Cells.of(table, "gpus", n).numbers(place, what, 1, high, True)
    if np.isnan(gpus).any():
        raise place.error(f"missing GPU count: expected {what}", int(np.flatnonzero(np.isnan(gpus))[0]), "gpus")
    out["gpus"] = gpus
    out["model"] = _names(_Cells.of(table, "model", n), place, "a model name")
    for name in ("tp", "pp", "dp", "ep", "global_batch", "micro_batch"):
        out[name] = _Cells.of(table, name, n).numbers(place, f"an integer from 1 to {MAX_DIM:,} (or empty)", 1,
                                                      MAX_DIM, True)
    out["iterations"] = _Cells.of(table, "iterations", n).numbers(
        place, f"an integer from 1 to {MAX_JOB_ITERATIONS:,} (or empty)", 1, MAX_JOB_ITERATIONS, True)
    out["duration_s"] = _Cells.of(table, "duration_s", n).numbers(
        place, f"seconds above 0, at most {MAX_TRACE_S:g} (or empty)", 0, MAX_TRACE_S, False)
    zero = out["duration_s"].to_numpy() == 0
    if zero.any():
        raise place.error("expected seconds above 0 (the job's runtime alone), got 0", int(np.flatnonzero(zero)[0]),
                          "duration_s")
    out["priority"] = np.nan_to_num(_Cells.of(table, "priority", n).numbers(
        place, "an integer from -1e9 to 1e9 (or empty)", -1e9, 1e9, True), nan=0.0)
    out["user"] = _names(_Cells.of(table, "user", n), place, "a user name")
    return out


@dataclass(frozen=True)
class _Cells:
    """One column of a table: its cells as found (for messages), which are empty, and the column as
    stripped text (null where empty) or, when it holds numbers, as float64 (NaN where empty)."""

    name: str
    raw: Any                       #: the column as given, or None when absent
    missing: np.ndarray            #: bool, the empty cells
    given_text: pa.Array | None    #: stripped text, null where empty (None for a column of numbers)
    values: np.ndarray | None      #: float64, NaN where empty (None for a column of text)

    @classmethod
    def of(cls, table: pd.DataFrame, name: str, n: int) -> _Cells:
        if name not in table.columns:
            return cls(name, None, np.ones(n, bool), pa.nulls(n, pa.large_string()), None)
        raw = table[name]
        dtype = raw.dtype
        if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
            values = raw.astype("Float64").to_numpy(dtype="float64", na_value=np.nan)
            return cls(name, raw, np.isnan(values), None, values)
        if isinstance(dtype, pd.StringDtype):
            text = pa.array(raw, pa.large_string())
        else:
            text = pa.array([None if _blank(v) else str(v) for v in raw], pa.large_string())
        text = pc.utf8_trim_whitespace(text)
        text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.large_string()), text)
        return cls(name, raw, pc.is_null(text).to_numpy(zero_copy_only=False), text, None)

    @property
    def text(self) -> pa.Array:
        """The cells as stripped text, null where empty."""
        if self.given_text is not None:
            return self.given_text
        shown = [None if m else str(v.item() if isinstance(v, np.generic) else v) for v, m in zip(self.raw, self.missing)]
        return pa.array(shown, pa.large_string())

    def shown(self, row: int) -> str:
        """The cell of data row ``row`` as a message shows it."""
        value = self.raw.iloc[row]
        return shorten(value.item() if isinstance(value, np.generic) else value)

    def texts(self) -> np.ndarray:
        """The stripped text of each cell (``""`` where empty), as objects."""
        return np.asarray(pc.fill_null(self.text, "").to_pylist(), dtype=object)

    def numbers(self, place: _Place, what: str, low: float, high: float, integer: bool) -> np.ndarray:
        """The column as float64 (NaN where empty); the first cell that is not a number in [low, high] (an
        integer when ``integer``) is an error saying ``what`` is allowed."""
        values, unparsable = (self.values, None) if self.values is not None else _floats(self.text)
        with np.errstate(invalid="ignore"):
            bad = ~self.missing & (~np.isfinite(values) | (values < low) | (values > high))
            if integer:
                bad |= ~self.missing & np.isfinite(values) & (values != np.floor(values))
        first = [int(np.flatnonzero(bad)[0])] if bad.any() else []
        if unparsable is not None:
            first.append(unparsable)
        if first:
            i = min(first)
            raise place.error(f"expected {what}, got {self.shown(i)}", i, self.name)
        return values


def _blank(value: Any) -> bool:
    """Whether a cell of a table built in memory is empty (None, NA, NaN)."""
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and value != value


def _floats(text: pa.Array) -> tuple[np.ndarray, int | None]:
    """The text as float64 (NaN where null) and the index of the first cell that is not a number (None
    when every cell is one); cells after that one are NaN."""
    try:
        return pc.cast(text, pa.float64()).to_numpy(zero_copy_only=False), None
    except pa.ArrowInvalid:
        pass
    lo, hi = 0, len(text)  # the first unparsable cell is in [lo, hi): bisect on casts of the prefix
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            pc.cast(text.slice(lo, mid - lo), pa.float64())
            lo = mid
        except pa.ArrowInvalid:
            hi = mid
    head = pc.cast(text.slice(0, lo), pa.float64()).to_numpy(zero_copy_only=False)
    return np.concatenate([head, np.full(len(text) - lo, np.nan)]), lo


def _job_names(cells: _Cells, place: _Place) -> np.ndarray:
    """Job names, each matching :data:`JOB_PATTERN` and unique."""
    ok = pc.fill_null(pc.match_substring_regex(cells.text, f"^(?:{JOB_PATTERN.pattern})$"), False)
    bad = ~ok.to_numpy(zero_copy_only=False)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise place.error(f"expected a job name (letters, digits, '_', '.', ':' or '-', at most 200 characters, "
                          f"not empty), got {cells.shown(i)}", i, "job")
    names = cells.texts()
    dup = pd.Series(names).duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero(names == names[i])[0])
        raise place.error(f"duplicate job {shorten(names[i])} (first on {place.of(first)}); job names must be unique",
                          i, "job")
    return names


def _submit_units(cells: _Cells, place: _Place) -> np.ndarray:
    """The ``submit`` column (``90``, ``30min``, ``2h``) in seconds."""
    values = cells.values
    if values is None:
        values, unparsable = _floats(cells.text)
        if unparsable is not None:
            texts = cells.text.to_pylist()
            values = values.copy()
            for i in range(unparsable, len(texts)):
                if texts[i] is not None and np.isnan(values[i]):
                    try:
                        values[i] = parse_duration(texts[i])
                    except (NetsimError, TypeError, ValueError):
                        raise place.error(f"expected a time from the trace's start like 90, 30min, 2h or 1d, got "
                                          f"{cells.shown(i)}", i, "submit") from None
    with np.errstate(invalid="ignore"):
        bad = ~cells.missing & ~((values >= 0) & (values <= MAX_TRACE_S))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise place.error(f"expected a time from 0 to {MAX_TRACE_S:g} s, got {cells.shown(i)}", i, "submit")
    return values


def _names(cells: _Cells, place: _Place, what: str) -> np.ndarray:
    """A column of names (``model``, ``user``): at most :data:`MAX_NAME_CHARS` characters, no control
    character."""
    long = pc.fill_null(pc.greater(pc.utf8_length(cells.text), MAX_NAME_CHARS), False)
    control = pc.fill_null(pc.match_substring_regex(cells.text, r"[\x00-\x1f\x7f]"), False)
    bad = pc.or_(long, control).to_numpy(zero_copy_only=False)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise place.error(f"expected {what} of at most {MAX_NAME_CHARS} characters without control characters, got "
                          f"{cells.shown(i)}", i, cells.name)
    return cells.texts()


# ------------------------------------------------------------------------------------ row checks
def _row_rules(jobs: pd.DataFrame, place: _Place, presets: PresetCache) -> None:
    """Fill ``kind``, ``tp``, ``pp`` and ``dp`` after the cross-column rules of
    :func:`netsim.cluster.validate._check_row`, run once per distinct combination of the columns they read
    (the first row having it stands for all: the first failing row of the table is found)."""
    keys = jobs[list(_ROW_RULE_COLUMNS)].assign(by_iterations=jobs["iterations"].isna(),
                                                 by_duration=jobs["duration_s"].isna())
    codes = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    order = np.unique(codes, return_index=True)[1]  # each group's first row, by group number
    firsts = np.sort(order)
    found = {}
    for i, row in zip(firsts, jobs.iloc[firsts].itertuples(index=False)):
        found[codes[i]] = _check_row(row, int(i), place, presets)
    kind, tp, pp, dp = (np.asarray([found[g][k] for g in range(len(order))], dtype=object if k == 0 else np.int64)
                        for k in range(4))
    jobs["kind"] = kind[codes]
    jobs["tp"], jobs["pp"], jobs["dp"] = tp[codes], pp[codes], dp[codes]


__all__ = ["ALLOWED", "COLLECTIVE_PREFIX", "MAX_TRACE_BYTES", "MAX_TRACE_JOBS", "REQUIRED", "TRACE_DTYPES",
           "CollectiveModel", "JobTrace", "job_workload", "parse_collective", "parse_duration", "read_trace",
           "validate_trace"]

"""Sweeps: expand an experiment file into runs (variants x grid x seeds), execute them, collect results.

``expand`` is a pure function of an :class:`~netsim.config.ExperimentFile`: for every variant
(a partial override of the base spec), every point of the grid (the product of the ``sweep``
axes; a ``zip`` group is one axis) and every seed, it builds the run's spec and validates it.
A run that does not validate is kept, with its error, so that the sweep records it as failed and
goes on. Each run's id is the hash of its resolved spec; with ``repeats: N`` its seed is the
N-th child of ``numpy.random.SeedSequence(base seed)`` (the same seeds for every variant and
point, so comparisons are paired).

``run_sweep`` executes the runs with an executor (:mod:`netsim.experiment.executors`) and writes
each finished run under ``OUT/runs/<run_id>/`` atomically, then the combined tables at the top
of ``OUT`` (the layout of a single run: ``runs.parquet``, ``collectives.parquet``, ...), with
``variant``, ``seed`` and every swept key as columns of every table.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import json
import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import netsim
from netsim.config import (ExperimentFile, ExperimentSpec, _deep_merge, _resolve_files, parse_assignment, parse_spec,
                           set_dotted)
from netsim.errors import ConfigError, NetsimError, interruption, shorten
from netsim.experiment.executors import Lost
from netsim.experiment.outdir import (MANIFEST, claim, json_text, os_error, owned_files, remove_owned,
                                     write_manifest)
from netsim.experiment.results import RESULT_FILES, TABLE_COLUMNS, check_finite, result_tables
from netsim.experiment.run import data_hash, run_experiment, spec_hash


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: its id, where it comes from (variant, swept values, seed), its spec or error."""

    index: int
    run_id: str
    variant: str
    params: dict[str, Any]       #: swept key -> value, as written in the file
    seed: int
    spec: ExperimentSpec | None  #: None when the run's spec does not validate
    error: str = ""              #: the validation error (file:line: path: message)


def derived_seeds(base_seed: int, repeats: int) -> list[int]:
    """``repeats`` seeds derived from ``base_seed`` with ``numpy.random.SeedSequence`` (distinct, stable).

    >>> derived_seeds(1, 3) == derived_seeds(1, 3), len(set(derived_seeds(1, 100)))
    (True, 100)
    """
    return [int(child.generate_state(1, np.uint32)[0]) for child in np.random.SeedSequence(base_seed).spawn(repeats)]


def expand(exp: ExperimentFile) -> list[PlannedRun]:
    """Every run of the experiment file: variants (outer) x grid points x seeds (inner).

    Raises ConfigError only for a structural mistake that would fail every run: a swept key that
    is not a key of the spec. Any other invalid run is returned with its ``error``, located at the
    variant or sweep entry that set the bad value.
    """
    variants = exp.variants or [{"name": ""}]
    keys = [k for ks, _ in exp.axes for k in ks]
    points = [dict(zip(keys, (v for values in combo for v in values)))
              for combo in itertools.product(*[values for _, values in exp.axes])]
    runs: list[PlannedRun] = []
    for vi, variant in enumerate(variants):
        name = variant["name"]
        override = {k: v for k, v in variant.items() if k != "name"}
        vdata = _resolve_files(_merge_variant(copy.deepcopy(exp.base), copy.deepcopy(override)), exp.path)
        sources = {k: f"variant {name!r}" for k in _dotted_keys(override)}
        where = {k: f"variants.{vi}.{k}" for k in _dotted_keys(override)}
        for point in points:
            data = copy.deepcopy(vdata)
            src, at = dict(sources), dict(where)
            error = None
            try:
                # whole sections first (topology: FILE), then keys inside them (topology.spines)
                for key, value in sorted(point.items(), key=lambda kv: kv[0].count(".")):
                    set_dotted(data, key, copy.deepcopy(value))
                    data = _resolve_files(data, exp.path)
                    src[key] = f"sweep {key}={shorten(value)}"
                    at[key] = _sweep_entry(exp, key)
                for item in exp.overrides:
                    key, value = parse_assignment(item, "--set")
                    set_dotted(data, key, value)
                    src[key] = "--set"
                    at.pop(key, None)
                data = _resolve_files(data, exp.path)
            except ConfigError as e:
                error = _locate(e, exp, src, at)
            seeds = _seeds(exp, data if isinstance(data, dict) else vdata)
            for seed in seeds:
                params = {**point, **({"seed": seed} if len(seeds) > 1 or "seed" in point else {})}
                if error is not None:
                    runs.append(PlannedRun(len(runs), data_hash([name, params, error]), name, params,
                                           seed if isinstance(seed, int) else 0, None, error))
                    continue
                run = copy.deepcopy(data)
                run["seed"] = seed
                if name:
                    run["variant"] = name
                try:
                    spec = parse_spec(run, file=str(exp.path), root=exp.root)
                except ConfigError as e:
                    if e.message.startswith("unknown key") and e.path in keys:
                        raise ConfigError(f"{e.path} is not a key of the experiment spec: {e.message}",
                                          f"sweep.{e.path}", str(exp.path), exp.line(_sweep_entry(exp, e.path))
                                          ) from None
                    runs.append(PlannedRun(len(runs), data_hash(run), name, params,
                                           seed if isinstance(seed, int) else 0, None, _locate(e, exp, src, at)))
                    continue
                runs.append(PlannedRun(len(runs), spec_hash(spec), name, params, spec.seed, spec))
    return runs


def _merge_variant(base: dict, override: dict) -> dict:
    """Deep-merge a variant into the base; a section given as a file (``topology: FILE`` or
    ``{from: FILE, ...}``) replaces the base's section instead of merging into it."""
    for key, value in override.items():
        if isinstance(value, str) or (isinstance(value, dict) and "from" in value):
            base[key] = value
        else:
            base[key] = _deep_merge(base.get(key), value) if key in base else value
    return base


def _seeds(exp: ExperimentFile, data: dict) -> list:
    base_seed = data.get("seed", 0)
    if exp.seeds is not None:
        return list(exp.seeds)
    if exp.repeats is not None:
        return derived_seeds(base_seed if isinstance(base_seed, int) and base_seed >= 0 else 0, exp.repeats)
    return [base_seed]


def _sweep_entry(exp: ExperimentFile, key: str) -> str:
    """Dotted path of the file entry that sweeps ``key`` (a plain axis or a zip group's column);
    ``sweep`` when it came from ``--param``."""
    zips = [f"sweep.zip.{i}.{key}" for i in range(len(exp.axes))]
    return next((c for c in (f"sweep.{key}", f"sweep.zip.{key}", *zips) if exp.line(c, exact=True)), "sweep")


def _locate(e: ConfigError, exp: ExperimentFile, sources: dict[str, str], at: dict[str, str]) -> str:
    """The error text of a run, at the variant or sweep entry that set the offending value."""
    parts = e.path.split(".") if e.path else []
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in sources:
            entry = at.get(key)
            line = exp.line(entry + e.path[len(key):]) if entry else exp.line(e.path)
            return str(ConfigError(f"{e.message} (value from {sources[key]})", e.path, str(exp.path), line))
    return str(ConfigError(e.message, e.path, str(exp.path), e.line if e.file else exp.line(e.path)))


def _dotted_keys(data: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in data.items():
        key = f"{prefix}{k}"
        out.append(key)
        if isinstance(v, dict):
            out += _dotted_keys(v, key + ".")
    return out


# ---------------------------------------------------------------------------- executing one run


@dataclass
class RunOutcome:
    """What a worker sends back: the run's tables, or its error and traceback."""

    run_id: str
    ok: bool
    #: the run's DataFrames; once written (``written``), the Arrow tables as written, with the labels
    tables: dict[str, pd.DataFrame | pa.Table] = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    error: str = ""
    traceback: str = ""
    written: bool = False  #: the worker already wrote the run's part (shared file system)


def execute(run: PlannedRun) -> RunOutcome:
    """Run one planned run and return its tables (never raises: failures come back as outcomes)."""
    info = {"run_id": run.run_id, "variant": run.variant, "seed": run.seed, "params": run.params}
    if run.spec is None:
        return RunOutcome(run.run_id, False, info=info, error=run.error)
    t0 = time.perf_counter()
    try:
        result = run_experiment(run.spec)
        tables = result_tables(result)
        for name, df in tables.items():
            check_finite(name, df)
    except Exception as exc:  # a sweep records any failure and goes on
        stop = interruption(exc)
        if stop is not None:  # Ctrl-C inside a compiled kernel: stop the sweep, do not record a failure
            raise type(stop)() from exc
        message = str(exc) if isinstance(exc, NetsimError) else f"{type(exc).__name__}: {exc}"
        return RunOutcome(run.run_id, False, info={**info, "wall_s": time.perf_counter() - t0}, error=message,
                          traceback=traceback.format_exc())
    info.update(wall_s=result.wall_s, topology=result.topology.describe(),
                spec=run.spec.model_dump(mode="json"))
    if "stragglers" in result.extra:  # the drawn slow GPUs: who was slow, and by how much
        info["stragglers"] = result.extra["stragglers"]
    return RunOutcome(run.run_id, True, tables=tables, info=info)


# ---------------------------------------------------------------------------- results directory

RUN_INFO = "run.json"


def _label(run: PlannedRun) -> dict[str, Any]:
    """The columns every table of the run gets: variant, seed, the swept values (JSON-safe)."""
    cols: dict[str, Any] = {"variant": run.variant, "seed": run.seed}
    for key, value in run.params.items():
        cols[key] = value if isinstance(value, (int, float, str, bool)) or value is None else json.dumps(value)
    return cols


def _ipc_bytes(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _from_ipc(streams: dict[str, pa.Buffer]) -> ArrowTables:
    return ArrowTables({name: pa.ipc.open_stream(buf).read_all() for name, buf in streams.items()})


class ArrowTables(dict):
    """A run's tables by name, as Arrow tables, that pickle as Arrow IPC streams.

    perf: a worker sends each run's tables back to the driver; pickling ~200 Arrow columns one by
    one took 3 ms a run, an IPC stream per table 0.4 ms (and 0.25 ms to read back instead of 1.4)."""

    def __reduce__(self):
        return _from_ipc, ({name: _ipc_bytes(table) for name, table in self.items()},)


def _write_run(out: Path, run: PlannedRun, outcome: RunOutcome) -> ArrowTables:
    """``out/runs/<run_id>/``: the run's tables and ``run.json``, renamed into place when complete.

    Returns the tables as written (with the label columns), as Arrow tables: the form in which
    they are written, and cheap to send back from a worker and to concatenate."""
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{run.run_id}.tmp-", dir=runs_dir))
    written = ArrowTables()
    try:
        labels = _label(run)
        for name, df in outcome.tables.items():
            df = df.copy(deep=False)  # perf: the label columns go into this view; the data is not copied
            for i, (col, value) in enumerate(labels.items()):
                if col in df.columns:
                    df = df.drop(columns=[col])
                df.insert(min(1 + i, len(df.columns)), col, value)
            # what DataFrame.to_parquet(index=False) does, keeping the Arrow table
            table = pa.Table.from_pandas(df, preserve_index=False)
            pq.write_table(table, tmp / f"{name}.parquet")
            written[name] = table
        info = {**outcome.info, "status": "ok" if outcome.ok else "failed", "error": outcome.error,
                "traceback": outcome.traceback, "index": run.index}
        (tmp / RUN_INFO).write_text(json_text(info))
        target = runs_dir / run.run_id
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written


def execute_and_write(item: tuple[PlannedRun, str]) -> RunOutcome:
    """Run one planned run and write its part under ``out/runs`` here, in the worker (executors whose
    workers share the driver's file system): the writing then runs in parallel too. The outcome
    carries the tables as written, for the driver to combine without reading them back."""
    run, out = item
    outcome = execute(run)
    outcome.tables = _write_run(Path(out), run, outcome)
    outcome.written = True
    return outcome


def completed(out: Path) -> dict[str, dict]:
    """Run id -> ``run.json`` of every run written completely under ``out/runs``.

    A ``run.json`` that cannot be read (corrupt, truncated, empty, not a run's record) is left
    out: that run is not done."""
    done = {}
    runs_dir = out / "runs"
    if runs_dir.is_dir():
        for d in runs_dir.iterdir():
            if not d.name.startswith("."):
                info, _ = _read_info(d / RUN_INFO)
                if info is not None:
                    done[d.name] = info
    return done


def _read_info(path: Path) -> tuple[dict | None, str]:
    """A run's ``run.json``, or None and what is wrong with it ("" when there is none)."""
    try:
        info = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None, f"{path.parent.name}/{path.name} cannot be read ({str(exc)[:120] or type(exc).__name__})"
    if not isinstance(info, dict) or info.get("status") not in ("ok", "failed"):
        return None, f"{path.parent.name}/{path.name} is not a run's record (no status ok or failed)"
    return info, ""


def _read_parts(part: Path) -> ArrowTables:
    """The tables of a finished run's directory; ``_Unreadable`` names a table that cannot be read
    (corrupt, truncated, empty) or a missing ``runs.parquet``."""
    tables = ArrowTables()
    for name in RESULT_FILES:
        f = part / name
        try:
            if f.is_file():
                tables[name.removesuffix(".parquet")] = pq.read_table(f)
        except (OSError, pa.ArrowException) as exc:
            raise _Unreadable(f"{part.name}/{name} cannot be read ({str(exc)[:120] or type(exc).__name__})") from None
    if "runs" not in tables:
        raise _Unreadable(f"{part.name}/runs.parquet is missing")
    return tables


class _Unreadable(Exception):
    """A finished run's part that cannot be read back (its message says which)."""


def _earlier_runs(out: Path, planned: list[PlannedRun]) -> tuple[dict, dict, dict]:
    """What earlier invocations left under ``out/runs`` for ``planned`` (on ``--resume``).

    Returns run id -> ``run.json`` of the finished runs; the tables of the ok ones, read back here,
    once (combining needs them anyway), so that a damaged part is found before the sweep starts; and
    run id -> what is damaged (a ``run.json`` or a table that cannot be read) for the runs to redo.
    """
    done: dict[str, dict] = {}
    tables: dict[str, ArrowTables] = {}
    damaged: dict[str, str] = {}
    for run in planned:
        part = out / "runs" / run.run_id
        info, problem = _read_info(part / RUN_INFO)
        if info is not None and info["status"] == "ok":
            try:
                tables[run.run_id] = _read_parts(part)
            except _Unreadable as exc:
                info, problem = None, str(exc)
        if problem:
            damaged[run.run_id] = f"runs/{problem}"
        elif info is not None:
            done[run.run_id] = info
    return done, tables, damaged


def _uniform(df: pd.DataFrame) -> pd.DataFrame:
    """Columns whose values mix Python types (a swept ``[1MiB, 2097152]``) become strings: Parquet
    columns have one type."""
    for col in df.columns:
        if df[col].dtype == object:
            kinds = {type(v) for v in df[col] if v is not None and v == v}
            if len(kinds) > 1:
                df[col] = df[col].map(lambda v: v if v is None or v != v else str(v))
    return df


def _atomic_parquet(df: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    df.to_parquet(tmp, index=False)
    os.replace(tmp, path)


def _columns(part: pa.Table | pd.DataFrame) -> list[str]:
    return part.column_names if isinstance(part, pa.Table) else list(part.columns)


def _concat(parts: list[pa.Table | pd.DataFrame]) -> pd.DataFrame:
    """The parts one under the other: ``pd.concat(..., ignore_index=True)`` of their DataFrames.

    In Arrow when they are Arrow tables of one schema, the usual sweep (perf: concatenating 200
    one-row DataFrames of 70 columns takes pandas ~10x longer); else by pandas, which also fills
    the columns some parts lack."""
    if all(isinstance(p, pa.Table) for p in parts) and all(p.schema.equals(parts[0].schema) for p in parts):
        return pa.concat_tables(parts).to_pandas()
    return pd.concat([p.to_pandas() if isinstance(p, pa.Table) else p for p in parts], ignore_index=True)


_OK_STATUS = {"status": "ok", "error": "", "traceback": ""}


def _with_status(parts: list[pa.Table | pd.DataFrame], ok: list[bool]) -> pd.DataFrame:
    """The runs table from its parts, finished runs (``ok``) marked ok with no error.

    The same table as giving each finished run's row the three columns before concatenating
    (``DataFrame.assign``), in one step: perf, a sweep's serial tail (0.6 s for 200 runs)."""
    columns: dict[str, None] = {}
    for part, is_ok in zip(parts, ok):
        columns.update(dict.fromkeys(_columns(part)))
        if is_ok:
            columns.update(dict.fromkeys(c for c in _OK_STATUS if c not in columns))
    df = _concat(parts)
    rows = np.repeat(np.array(ok), [len(p) for p in parts])
    for col, value in _OK_STATUS.items():
        if col in df.columns:
            df.loc[rows, col] = value
        else:  # only finished runs: every row
            df[col] = value
    return df[list(columns)]


def combine(out: Path, planned: list[PlannedRun], exp: ExperimentFile, *, complete: bool, wall_s: float,
            cache: dict[str, dict[str, pd.DataFrame | pa.Table]] | None = None,
            damaged: dict[str, str] | None = None) -> dict:
    """Write the top-level tables and ``manifest.json`` from the runs of ``planned`` found under ``out/runs``.

    Failed runs are rows of ``runs.parquet`` with ``status: failed``, their ``error`` and ``traceback``.
    ``cache`` holds the tables of runs finished in this process or read back already (they are not
    read again); an ok run's table that cannot be read makes it a failed run. ``damaged`` (run id ->
    which file and why) is recorded in the manifest. Returns the manifest.
    """
    done = completed(out)
    frames: dict[str, list[pa.Table | pd.DataFrame]] = {name.removesuffix(".parquet"): [] for name in RESULT_FILES}
    ok_parts: set[int] = set()  # parts of the runs table that are a finished run's row (status set below)
    statuses = []
    for run in planned:
        info = done.get(run.run_id)
        if info is None:
            statuses.append({"run_id": run.run_id, "variant": run.variant, "seed": run.seed, "params": run.params,
                             "status": "missing"})
            continue
        statuses.append({"run_id": run.run_id, "variant": run.variant, "seed": run.seed, "params": run.params,
                         "status": info["status"], "wall_s": info.get("wall_s"), "error": info.get("error", "")})
        tables = (cache or {}).get(run.run_id)
        if info["status"] == "ok" and tables is None:
            try:
                tables = _read_parts(out / "runs" / run.run_id)
            except _Unreadable as exc:  # damaged since: --resume finds it and redoes the run
                info = {**info, "status": "failed", "error": f"runs/{exc}; --resume runs it again", "traceback": ""}
                statuses[-1].update(status="failed", error=info["error"])
        if info["status"] == "ok":
            for name in frames:
                if name in tables:
                    frames[name].append(tables[name])
            ok_parts.add(len(frames["runs"]) - 1)
        else:
            row = {"run_id": run.run_id, **_label(run), "status": "failed", "error": info.get("error", ""),
                   "traceback": info.get("traceback", "")}
            frames["runs"].append(pd.DataFrame([row]))
    labels = ["variant", "seed", *dict.fromkeys(k for run in planned for k in run.params if k != "seed")]
    for name, parts in frames.items():
        ok = [i in ok_parts for i, p in enumerate(parts) if p.shape[1]] if name == "runs" else []
        parts = [p for p in parts if p.shape[1]]
        if name == "runs" and any(ok):
            df = _with_status(parts, ok)
        elif parts:
            df = _concat(parts)
        else:  # no run produced this table: still every documented column
            rest = [c for c in TABLE_COLUMNS.get(name, []) if c != "run_id"]
            df = pd.DataFrame(columns=["run_id", *labels, *[c for c in rest if c not in labels]])
        if name == "runs":
            order = ["run_id", "variant", "seed", "status", "error"]
            df = df[[c for c in order if c in df.columns] + [c for c in df.columns if c not in order]]
        _atomic_parquet(_uniform(df), out / f"{name}.parquet")
    counts = {s: sum(1 for r in statuses if r["status"] == s) for s in ("ok", "failed", "missing")}
    finished = complete and counts["missing"] == 0
    status = ("failed" if counts["failed"] else "complete") if finished else "interrupted"
    manifest = sweep_manifest(out, exp, status,
                              counts={"planned": len(planned), **counts}, wall_s=wall_s, runs=statuses,
                              **({"damaged": [{"run_id": k, "problem": v} for k, v in damaged.items()]}
                                 if damaged else {}))
    write_manifest(out, manifest)
    return manifest


def sweep_manifest(out: Path, exp: ExperimentFile, status: str, **fields) -> dict:
    """A sweep's manifest: what it is, its ``status``, and every file netsim wrote in ``out`` so far
    (the tables, the run parts under ``runs/``, and what an earlier manifest listed)."""
    files = {MANIFEST, *(name for name in RESULT_FILES if (out / name).is_file())}
    runs_dir = out / "runs"
    if runs_dir.is_dir():
        files |= {f"runs/{d.name}" for d in runs_dir.iterdir() if not d.name.startswith(".")
                  and (d / RUN_INFO).is_file()}
    try:
        files |= set(owned_files(json.loads((out / MANIFEST).read_text())))
    except (OSError, ValueError, AttributeError):
        pass
    return {
        "name": exp.name or exp.base.get("name", exp.path.stem), "kind": "sweep", "status": status, "experiment": str(exp.path),
        "netsim_version": netsim.__version__, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "complete": status == "complete", "variants": [v["name"] for v in exp.variants],
        "axes": [list(keys) for keys, _ in exp.axes], "seeds": exp.seeds, "repeats": exp.repeats,
        "overrides": exp.overrides, **fields, "files": sorted(f for f in files if (out / f).exists())}


@dataclass
class SweepReport:
    """How a sweep went: counts and the manifest written."""

    planned: int
    ran: int
    skipped: int
    failed: int
    manifest: dict
    damaged: dict[str, str] = field(default_factory=dict)  #: run id -> the damaged file found on resume, and why


def run_sweep(planned: list[PlannedRun], exp: ExperimentFile, out: str | Path, executor: Any, *,
              resume: bool = False, force: bool = False,
              on_done: Callable[[PlannedRun, RunOutcome], None] | None = None,
              on_resume: Callable[[int, dict[str, str]], None] | None = None) -> SweepReport:
    """Execute ``planned`` with ``executor`` and write ``out`` (see the module docstring).

    ``out`` must not exist, be empty, or be a sweep's results directory: with ``force`` what netsim
    wrote there is removed first (files the user added stay), with ``resume`` runs already written
    completely and successfully are skipped (failed ones run again); see
    :mod:`netsim.experiment.outdir`. The manifest says ``status: running`` while the sweep runs;
    the top-level tables are rewritten at the end, also when the sweep is interrupted (the
    manifest then says ``status: interrupted``); a sweep that ran every run but some failed says
    ``status: failed`` (never ``complete``), with the counts.

    On ``resume``, the runs whose files are damaged (a ``run.json`` or a table that cannot be read)
    are redone, their directories removed first; ``on_resume(kept, damaged)`` hears, before any run,
    how many runs are kept and which are damaged (run id -> which file and why), and the manifest
    lists them under ``damaged``. A run whose worker dies or raises is recorded as failed, with why,
    and the sweep goes on (see :mod:`netsim.experiment.executors`). ``on_done(run, outcome)`` hears
    of every run executed, as it finishes.
    """
    out = Path(out)
    existing = claim(out, "sweep", force=force, resume=resume)
    if existing.state in ("netsim", "damaged") and not resume:
        remove_owned(out, existing.manifest or {})
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(exc, "create", out) from None
    write_manifest(out, sweep_manifest(out, exp, "running", counts={"planned": len(planned)}))
    for stale in (out / "runs").glob(".*.tmp-*") if (out / "runs").is_dir() else []:
        shutil.rmtree(stale, ignore_errors=True)  # an interrupted write of netsim's (hidden, named by run id)
    done, cache, damaged = _earlier_runs(out, planned) if resume else ({}, {}, {})
    for run_id in damaged:  # CORRECTNESS: netsim's own directory (under runs/, named by a run id): redone
        shutil.rmtree(out / "runs" / run_id, ignore_errors=True)
    todo = [r for r in planned if done.get(r.run_id, {}).get("status") != "ok"]
    if on_resume is not None and resume:
        on_resume(len(planned) - len(todo), damaged)
    by_id = {r.run_id: r for r in planned}
    failed = 0
    t0 = time.perf_counter()
    complete = False
    if getattr(executor, "shared_fs", False):  # workers write their own parts
        work, items = execute_and_write, [(r, str(out)) for r in todo]
    else:  # results come back to the driver, which writes them (Dask)
        work, items = execute, todo

    def lost(item: PlannedRun | tuple[PlannedRun, str], why: Lost) -> RunOutcome:
        """A failed outcome for a run whose worker died or raised (the driver writes it)."""
        run = item[0] if isinstance(item, tuple) else item
        for tmp in (out / "runs").glob(f".{run.run_id}.tmp-*"):
            shutil.rmtree(tmp, ignore_errors=True)  # what the dead worker was writing
        return RunOutcome(run.run_id, False, info={"run_id": run.run_id, "variant": run.variant, "seed": run.seed,
                                                   "params": run.params},
                          error=f"{why} while running this run" if why.died else str(why), traceback=why.traceback)

    outcomes = _map(executor, work, items, lost)
    try:
        for outcome in outcomes:
            run = by_id[outcome.run_id]
            cache[run.run_id] = outcome.tables if outcome.written else _write_run(out, run, outcome)
            failed += not outcome.ok
            if on_done is not None:
                on_done(run, outcome)
        complete = True
    finally:
        getattr(outcomes, "close", lambda: None)()  # stop the workers before combining what they wrote
        manifest = combine(out, planned, exp, complete=complete, wall_s=time.perf_counter() - t0, cache=cache,
                           damaged=damaged)
    return SweepReport(len(planned), len(todo), len(planned) - len(todo), failed, manifest, damaged)


def _map(executor: Any, fn: Callable, items: list, on_lost: Callable[[Any, Lost], RunOutcome]) -> Iterator:
    """``executor.map(fn, items, on_lost=on_lost)``; without ``on_lost`` for an executor written
    before it (a lost run then stops the sweep)."""
    try:
        takes = "on_lost" in inspect.signature(executor.map).parameters
    except (TypeError, ValueError):
        takes = False
    return executor.map(fn, items, on_lost=on_lost) if takes else executor.map(fn, items)


def unique_ids(planned: Iterable[PlannedRun]) -> list[PlannedRun]:
    """``planned`` without repeated run ids (two points that resolve to the same spec run once)."""
    seen, out = set(), []
    for run in planned:
        if run.run_id not in seen:
            seen.add(run.run_id)
            out.append(run)
    return out

"""Before/after comparison: every experiment in ``experiments/`` gives the same numbers as before.

Usage::

    python benchmarks/compare.py --before REV [--after REV|DIR] [--rtol 1e-9] [--atol 1e-15]
                                 [--only NAME ...] [--keep DIR [--reuse]] [--jobs N] [--strict]
                                 [--tables T ...] [--timeout S]

``--before`` is a git revision: it is checked out with ``git worktree add --detach`` under a
temporary directory (removed afterwards with ``git worktree remove --force``). ``--after`` is a
git revision (checked out the same way) or a directory holding a netsim source tree; the default is
the working tree of this repository, uncommitted edits included.

Every ``experiments/*.yaml`` of the after tree (those missing from the before tree are skipped with
a note) runs once in each tree with ``netsim run FILE --out DIR --no-report``: ``netsim run`` runs a
file with variants, a sweep, seeds or repeats serially, exactly as ``netsim sweep --executor
serial`` does, so one command covers single runs and sweeps. Each run uses this interpreter (the
venv's python) with the tree first on ``sys.path`` (``PYTHONPATH``, and the entry point inserts it
again and checks ``netsim.__file__``), so the tree's own ``netsim`` is imported and not the
editable install. The results directories' tables are then compared row by row (see
:func:`compare_results`): every numeric column, except :data:`IGNORED_COLUMNS`, must agree to
``rtol`` relative, or to ``atol`` absolute for values near 0.

Prints one line per experiment (runs, rows and columns compared, the largest relative difference and
its column, PASS / FAIL / ERROR / SKIP) and exits 0 when everything passed, 1 when something failed
or a run errored, 2 on usage errors. A run of a sweep that failed on one side only is a FAIL (its rows
are left out of the comparison); a side that wrote no results at all is an ERROR. Each run's output
is kept next to its results as ``NAME.log`` (with ``--keep``; ``--reuse`` then reads complete results
instead of running them again, so deleting ``DIR/after/NAME`` redoes only that side).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

#: Columns never compared (in any table), each with the reason.
IGNORED_COLUMNS: dict[str, str] = {
    "wall_s": "wall-clock time of the run: depends on the machine and its load, not on the model",
    "events": "the engine's event count: another engine may simulate the same model in more or fewer events",
    "solver_calls": "how often the engine re-solved the rates: an engine-internal counter, not a result",
    "run_id": "a hash of the whole spec: it changes when a spec key is added (runs are then matched by "
              "their order in runs.parquet, checked against variant and seed)",
    "flow_id": "messages numbered in the order the engine creates them: flows are matched per (job, "
               "connection) in completion order instead, which FIFO connections fix",
}

#: Per table: the columns that identify a row within a run, and the columns that order rows with the
#: same identity (an ordinal in that order completes the key). Tables not listed are not compared.
TABLE_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "runs": ((), ()),
    "collectives": (("job", "step", "label", "iteration", "comm"), ("start_s", "end_s")),
    "flows": (("job", "connection"), ("end_s", "start_s")),
    "links": (("link_id",), ()),
    "jobs": (("job",), ()),
    "iterations": (("job", "iteration"), ()),
    "link_series": (("link_id",), ("t_start_s",)),
}

DEFAULT_RTOL = 1e-9
#: Absolute tolerance: differences at most this large pass whatever the values. It is sized for
#: times in seconds (1e-15 s, a femtosecond), for values that should be 0 and come out as rounding
#: noise; every other column (bytes, B/s, utilisations, counts) is many orders of magnitude above it,
#: so there it never masks a difference.
DEFAULT_ATOL = 1e-15

#: Run by the venv's python as ``python -c ENTRY TREE netsim-args...``: the tree first on sys.path,
#: checked, then netsim's console-script entry point.
ENTRY = ("import os, sys; tree = os.path.realpath(sys.argv.pop(1)); sys.path.insert(0, tree); import netsim; "
         "where = os.path.realpath(netsim.__file__); "
         "where.startswith(tree + os.sep) or sys.exit(f'netsim imported from {where}, not from {tree}'); "
         "from netsim.cli import main; sys.argv[0] = 'netsim'; sys.exit(main())")


class UsageError(Exception):
    """Bad command-line input (exit 2)."""


# --------------------------------------------------------------------------------------- comparison


@dataclass
class Comparison:
    """The outcome of comparing two results directories."""

    runs: int = 0                 #: runs matched
    rows: int = 0                 #: row pairs compared, over every table
    columns: int = 0              #: (table, column) pairs compared
    max_rel: float = 0.0          #: the largest relative difference (beyond atol) seen
    worst: str = ""               #: ``table.column`` where it was seen
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the two directories agree."""
        return not self.failures

    def record(self, name: str, rel: float) -> None:
        """Account for one compared column whose largest relative difference is ``rel``."""
        self.columns += 1
        if rel > self.max_rel or not self.worst:
            self.max_rel, self.worst = max(rel, self.max_rel), name


def load_tables(directory: Path, tables: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
    """The top-level Parquet tables of a results directory by name (``runs``, ``flows``, ...)."""
    names = {"runs", *tables} if tables is not None else set(TABLE_KEYS)  # runs: to match runs by
    return {p.stem: pd.read_parquet(p) for p in sorted(Path(directory).glob("*.parquet")) if p.stem in names}


def _same_label(x: object, y: object) -> bool:
    """Two label values (variant, seed) are the same: equal, or both missing."""
    if pd.isna(x) and pd.isna(y):
        return True
    return bool(x == y)


def match_runs(before: pd.DataFrame, after: pd.DataFrame) -> tuple[dict, dict, list[str]]:
    """Map each side's ``run_id`` to a common run key: the run id itself when both sides have the same
    ones, else the run's position in ``runs.parquet`` (runs are written in the order the file expands to),
    checked against the ``variant`` and ``seed`` columns. Raises ValueError when they do not line up."""
    b_ids, a_ids = list(before["run_id"]), list(after["run_id"])
    if len(set(b_ids)) == len(b_ids) and sorted(b_ids) == sorted(a_ids):
        return {i: i for i in b_ids}, {i: i for i in a_ids}, []
    if len(b_ids) != len(a_ids):
        raise ValueError(f"{len(b_ids)} runs before, {len(a_ids)} after")
    for label in ("variant", "seed"):
        if label in before and label in after:
            bad = [k for k, (x, y) in enumerate(zip(before[label], after[label])) if not _same_label(x, y)]
            if bad:
                k = bad[0]
                raise ValueError(f"runs do not line up: run {k} has {label} {before[label].iloc[k]!r} "
                                 f"before, {after[label].iloc[k]!r} after")
    note = "run ids differ (the spec hash changed): runs matched by their order in runs.parquet"
    return ({i: f"#{k}" for k, i in enumerate(b_ids)}, {i: f"#{k}" for k, i in enumerate(a_ids)}, [note])


def key_column(series: pd.Series) -> np.ndarray:
    """A key column as text, the same for 3, 3.0 and a nullable 3 (numbers go through float64)."""
    values = numeric_values(series)
    return (pd.Series(values) if values is not None else series).astype(str).to_numpy()


def row_keys(df: pd.DataFrame, run_map: dict, keys: Sequence[str], order: Sequence[str]) -> pd.DataFrame:
    """One key per row of ``df`` (in its row order): the run key, the identity ``keys`` as text, and the
    row's ordinal among rows with the same identity, in ``order`` (then file order)."""
    runs = df["run_id"].map(run_map) if "run_id" in df else pd.Series("", index=df.index)
    out = pd.DataFrame({"_run": runs.astype(str).to_numpy()})
    for k in keys:
        out[k] = key_column(df[k])
    by = ["_run", *keys]
    sort = out.assign(**{f"_o{i}": df[c].to_numpy() for i, c in enumerate(order)}, _pos=np.arange(len(df)))
    sort = sort.sort_values([*by, *(f"_o{i}" for i in range(len(order))), "_pos"], kind="stable")
    out["_ord"] = sort.groupby(by, sort=False).cumcount().reindex(out.index).to_numpy()
    return out


def pair_rows(before: pd.DataFrame, after: pd.DataFrame, run_maps: tuple[dict, dict], table: str
              ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Row positions of ``before`` and ``after`` that describe the same thing, and how many rows are
    only before and only after."""
    keys, order = TABLE_KEYS.get(table, ((), ()))
    keys = [k for k in keys if k in before and k in after]
    order = [c for c in order if c in before and c in after]
    kb = row_keys(before, run_maps[0], keys, order).assign(_b=np.arange(len(before)))
    ka = row_keys(after, run_maps[1], keys, order).assign(_a=np.arange(len(after)))
    pairs = kb.merge(ka, on=["_run", *keys, "_ord"], how="outer")
    both = pairs.dropna(subset=["_b", "_a"])
    only_before = int(pairs["_a"].isna().sum())
    only_after = int(pairs["_b"].isna().sum())
    return both["_b"].to_numpy(int), both["_a"].to_numpy(int), only_before, only_after


def numeric_values(series: pd.Series) -> np.ndarray | None:
    """The column as float64 (missing values NaN, booleans 0/1), or None when it is not numeric. A
    column whose values are all missing is numeric (all NaN)."""
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        return series.to_numpy(dtype="float64", na_value=np.nan)
    values = series.dropna()
    if all(isinstance(v, (int, float, bool, np.number, np.bool_)) for v in values):
        return pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    return None


def relative_differences(before: np.ndarray, after: np.ndarray, atol: float) -> np.ndarray:
    """Per element: |b - a| / max(|b|, |a|), 0 where the two are equal (NaN and NaN included) or differ
    by at most ``atol``, inf where only one is NaN."""
    missing_b, missing_a = np.isnan(before), np.isnan(after)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.abs(before - after)
        rel = np.where(diff > atol, diff / np.maximum(np.abs(before), np.abs(after)), 0.0)
    rel = np.where((missing_b != missing_a) | np.isnan(rel), np.inf, rel)  # NaN vs a number; inf vs -inf
    return np.where((before == after) | (missing_b & missing_a), 0.0, rel)


def _one_sided(table: str, before: pd.DataFrame, after: pd.DataFrame) -> list[str]:
    """Notes on the columns only one side of ``table`` has."""
    notes = []
    for side, mine, other in (("before", before, after), ("after", after, before)):
        cols = [c for c in mine if c not in other]
        if cols:
            notes.append(f"{table}: only {side}: {', '.join(cols)}")
    return notes


def _variant_of(df: pd.DataFrame, position: int) -> str:
    """``, variant NAME`` for a row of a sweep's table (they carry the variant), else nothing."""
    variant = df["variant"].iloc[position] if "variant" in df else None
    return f", variant {variant}" if isinstance(variant, str) and variant else ""


def compare_table(table: str, before: pd.DataFrame, after: pd.DataFrame, run_maps: tuple[dict, dict],
                  result: Comparison, rtol: float, atol: float, strict: bool) -> None:
    """Compare one table of the two sides into ``result``."""
    one_sided = _one_sided(table, before, after)
    (result.failures if strict else result.notes).extend(one_sided)
    ib, ia, only_b, only_a = pair_rows(before, after, run_maps, table)
    if only_b or only_a:
        result.failures.append(f"{table}: {only_b} rows only before, {only_a} only after "
                               f"({len(before)} before, {len(after)} after)")
    result.rows += len(ib)
    for col in (c for c in before if c in after and c not in IGNORED_COLUMNS):
        b, a = numeric_values(before[col]), numeric_values(after[col])
        if b is None or a is None:
            if (b is None) != (a is None):
                result.notes.append(f"{table}.{col}: numeric on one side only, not compared")
            continue
        rel = relative_differences(b[ib], a[ia], atol)
        worst = float(rel.max()) if len(rel) else 0.0
        result.record(f"{table}.{col}", worst)
        if worst > rtol:
            k = int(rel.argmax())
            result.failures.append(f"{table}.{col}: {int((rel > rtol).sum())} of {len(rel)} rows differ, "
                                   f"worst {float(b[ib[k]])!r} before vs {float(a[ia[k]])!r} after (rel "
                                   f"{worst:.3g}{_variant_of(before, ib[k])})")


def failed_runs_of(runs: pd.DataFrame, run_map: dict) -> dict[str, str]:
    """Run key -> description of the runs ``runs.parquet`` marks failed (a sweep's ``status`` column)."""
    if "status" not in runs:
        return {}
    failed = runs[runs["status"].astype(str) == "failed"]
    return {run_map[row["run_id"]]: f"run {run_map[row['run_id']]} (variant {row.get('variant', '')!s}, seed "
            f"{row.get('seed', '')!s})" for _, row in failed.iterrows()}


Tables = dict[str, pd.DataFrame]


def exclude_failed(before: Tables, after: Tables, run_maps: tuple[dict, dict], result: Comparison
                   ) -> tuple[Tables, Tables]:
    """The tables without the rows of runs that failed on either side (they have no numbers to compare).
    A run that failed on one side only is a failure of the comparison; on both sides, a note."""
    bad_b, bad_a = failed_runs_of(before["runs"], run_maps[0]), failed_runs_of(after["runs"], run_maps[1])
    for key, label in sorted({**bad_b, **bad_a}.items()):
        if key in bad_b and key in bad_a:
            result.notes.append(f"runs: {label} failed before and after, not compared")
        else:
            result.failures.append(f"runs: {label} failed {'before' if key in bad_b else 'after'} only")
    bad = set(bad_b) | set(bad_a)
    if not bad:
        return before, after

    def keep(tables: Tables, run_map: dict) -> Tables:
        """``tables`` without the rows of the bad runs."""
        return {name: df[~df["run_id"].map(run_map).isin(bad)] if "run_id" in df else df
                for name, df in tables.items()}

    return keep(before, run_maps[0]), keep(after, run_maps[1])


def compare_results(before_dir: Path, after_dir: Path, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL,
                    strict: bool = False, tables: Sequence[str] | None = None) -> Comparison:
    """Compare two results directories: every numeric column (but :data:`IGNORED_COLUMNS`) of every
    table both have, row by row (runs matched by :func:`match_runs`, rows within a run by
    :data:`TABLE_KEYS`). Columns and tables only one side has are notes, failures with ``strict``."""
    result = Comparison()
    before, after = load_tables(Path(before_dir), tables), load_tables(Path(after_dir), tables)
    if "runs" not in before or "runs" not in after:
        result.failures.append("runs.parquet is missing " + ("before" if "runs" not in before else "after"))
        return result
    try:
        *run_maps, notes = match_runs(before["runs"], after["runs"])
    except ValueError as exc:
        result.failures.append(f"runs: {exc}")
        return result
    result.notes.extend(notes)
    before, after = exclude_failed(before, after, tuple(run_maps), result)
    result.runs = len(before["runs"])
    for name in sorted(set(before) ^ set(after)):
        (result.failures if strict else result.notes).append(
            f"{name}.parquet only {'before' if name in before else 'after'}")
    for name in sorted(set(before) & set(after), key=lambda n: (n != "runs", n)):
        compare_table(name, before[name], after[name], tuple(run_maps), result, rtol, atol, strict)
    return result


# ---------------------------------------------------------------------------------------- the trees


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo``; its stdout (stripped). CalledProcessError on failure."""
    proc = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return proc.stdout.strip()


def repo_root() -> Path:
    """The top of the git repository this script is in."""
    return Path(git(Path(__file__).resolve().parent, "rev-parse", "--show-toplevel"))


def resolve_commit(repo: Path, rev: str) -> str:
    """The commit ``rev`` names; UsageError when it names none."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except subprocess.CalledProcessError:
        raise UsageError(f"{rev!r} is not a git revision of {repo}") from None


@contextlib.contextmanager
def worktree(repo: Path, commit: str, label: str) -> Iterator[Path]:
    """A detached worktree of ``commit`` under a new temporary directory, removed on exit."""
    parent = Path(tempfile.mkdtemp(prefix=f"netsim-compare-{label}-"))
    path = parent / label
    try:
        git(repo, "worktree", "add", "--detach", str(path), commit)
        yield path
    finally:
        if path.exists():
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(path)],
                           check=False, capture_output=True, text=True)
        shutil.rmtree(parent, ignore_errors=True)


@contextlib.contextmanager
def source_tree(repo: Path, spec: str | None, label: str) -> Iterator[tuple[Path, str]]:
    """The netsim tree ``spec`` names (None: the repository's working tree; a directory; or a git
    revision, checked out for the duration) and a description of it."""
    if spec is None:
        yield repo, f"working tree {repo}"
    elif Path(spec).is_dir():
        tree = Path(spec).resolve()
        if not (tree / "netsim" / "__init__.py").is_file():
            raise UsageError(f"{spec} holds no netsim package (netsim/__init__.py)")
        yield tree, f"directory {tree}"
    else:
        commit = resolve_commit(repo, spec)
        with worktree(repo, commit, label) as path:
            yield path, f"{spec} ({commit[:10]}) at {path}"


def netsim_env(tree: Path) -> dict[str, str]:
    """The environment of a run in ``tree``: ``tree`` first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return env


def imported_from(tree: Path, cwd: Path) -> str:
    """Where ``import netsim`` finds netsim with only PYTHONPATH set to ``tree`` (run outside the tree,
    so the current directory does not help)."""
    proc = subprocess.run([sys.executable, "-c", "import netsim; print(netsim.__file__)"], check=False,
                          cwd=cwd, env=netsim_env(tree), capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else f"(import failed: {_last_line(proc.stderr)})"


# -------------------------------------------------------------------------------------------- runs


@dataclass
class RunOutcome:
    """One ``netsim run`` of one experiment in one tree."""

    ok: bool
    seconds: float
    message: str = ""
    reused: bool = False          #: read from an earlier --keep directory (--reuse), not run


def _last_line(text: str) -> str:
    """The last non-empty line of ``text``, shortened."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


def failed_runs(out: Path) -> list[str]:
    """The runs a results directory's manifest lists as failed, each with its error."""
    try:
        manifest = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError):
        return []
    return [f"run {r.get('run_id')} (variant {r.get('variant')}) failed: {str(r.get('error', ''))[:300]}"
            for r in manifest.get("runs", []) if isinstance(r, dict) and r.get("status") == "failed"]


def reusable(out: Path) -> bool:
    """Whether ``out`` holds complete results (its manifest says so)."""
    try:
        return json.loads((out / "manifest.json").read_text()).get("status") == "complete"
    except (OSError, ValueError):
        return False


def run_netsim(tree: Path, experiment: Path, out: Path, timeout: float) -> RunOutcome:
    """``netsim run EXPERIMENT --out OUT --no-report`` with ``tree``'s netsim; its output goes to OUT.log."""
    cmd = [sys.executable, "-c", ENTRY, str(tree), "run", str(experiment), "--out", str(out), "--no-report"]
    if out.exists():
        cmd.append("--force")
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, check=False, cwd=tree, env=netsim_env(tree), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return RunOutcome(False, time.perf_counter() - t0, f"timed out after {timeout:g} s")
    seconds = time.perf_counter() - t0
    out.with_name(out.name + ".log").write_text(f"$ {' '.join(cmd)}\n--- stdout\n{proc.stdout}\n--- stderr\n"
                                                f"{proc.stderr}")
    if proc.returncode != 0:
        why = "; ".join(failed_runs(out)) or _last_line(proc.stderr or proc.stdout)
        return RunOutcome(False, seconds, f"exit {proc.returncode}: {why}")
    return RunOutcome(True, seconds)


def run_all(tasks: list[tuple[str, str, Path, Path, Path]], jobs: int, timeout: float, reuse: bool = False
            ) -> dict[tuple[str, str], RunOutcome]:
    """Run every (name, side, tree, experiment file, out dir), ``jobs`` at a time, printing progress;
    with ``reuse``, an out dir that holds complete results is read, not run again."""
    lock, done = threading.Lock(), [0]

    def one(task: tuple[str, str, Path, Path, Path]) -> RunOutcome:
        """Run one task and print a progress line."""
        name, side, tree, experiment, out = task
        if reuse and reusable(out):
            failures = failed_runs(out)
            outcome = RunOutcome(not failures, 0.0, "; ".join(failures), reused=True)
        else:
            outcome = run_netsim(tree, experiment, out, timeout)
        with lock:
            done[0] += 1
            status = ("reused" if outcome.reused else "ok") if outcome.ok else f"FAILED ({outcome.message})"
            print(f"[{done[0]}/{len(tasks)}] {side:6} {name}: {outcome.seconds:.1f} s {status}",
                  file=sys.stderr, flush=True)
        return outcome

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(one, tasks))
    return {(t[0], t[1]): o for t, o in zip(tasks, outcomes)}


def experiment_names(tree: Path, only: Sequence[str] | None) -> list[str]:
    """The experiments of ``tree`` (file stems), restricted to ``only``; UsageError for an unknown one."""
    names = sorted(p.stem for p in (tree / "experiments").glob("*.yaml"))
    if not names:
        raise UsageError(f"{tree / 'experiments'} holds no *.yaml")
    if not only:
        return names
    wanted = [Path(n).stem for n in only]
    unknown = [n for n in wanted if n not in names]
    if unknown:
        raise UsageError(f"no experiment {', '.join(unknown)}; there are: {', '.join(names)}")
    return [n for n in names if n in wanted]


# ------------------------------------------------------------------------------------------ report


@dataclass
class Row:
    """One line of the final table."""

    name: str
    status: str                       #: PASS, FAIL, ERROR or SKIP
    comparison: Comparison | None = None
    messages: list[str] = field(default_factory=list)


def _format_rel(value: float) -> str:
    """A relative difference for the table: 0, inf, or three significant digits."""
    return "0" if value == 0 else ("inf" if math.isinf(value) else f"{value:.2e}")


def print_table(rows: list[Row], rtol: float, limit: int | None = 12) -> None:
    """The summary table, then each experiment's failures and notes (at most ``limit`` lines of
    failures each; None: all)."""
    header = ("experiment", "runs", "rows", "columns", "max rel diff", "worst column", "result")
    lines = [header]
    for r in rows:
        c = r.comparison
        lines.append((r.name, *(("-",) * 5 if c is None else (
            str(c.runs), str(c.rows), str(c.columns), _format_rel(c.max_rel), c.worst if c.max_rel else "-")),
            r.status))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    right = {1, 2, 3, 4}
    for k, line in enumerate(lines):
        print("  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                        for i, (cell, w) in enumerate(zip(line, widths))).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print(f"\nrtol {rtol:g}; ignored columns: {', '.join(IGNORED_COLUMNS)}")
    common = shared_notes(rows)
    for message in common:
        print(f"every experiment: {message}")
    for r in rows:
        messages = [m for m in r.messages if m not in common]
        failures = [m for m in messages if not m.startswith("note: ")]
        shown = failures if limit is None else failures[:limit]
        for message in [*shown, *(m for m in messages if m.startswith("note: "))]:
            print(f"{r.name}: {message}")
        if len(shown) < len(failures):
            print(f"{r.name}: ... and {len(failures) - len(shown)} more differences (--verbose lists them)")


def shared_notes(rows: list[Row]) -> list[str]:
    """The notes every compared experiment has (printed once), when more than one was compared."""
    compared = [r for r in rows if r.comparison is not None]
    if len(compared) < 2:
        return []
    first = [m for m in compared[0].messages if m.startswith("note: ")]
    return [m for m in first if all(m in r.messages for r in compared[1:])]


def judge(name: str, outcomes: dict, dirs: tuple[Path, Path], args: argparse.Namespace) -> Row:
    """The table row of one experiment from its two runs: ERROR when a side wrote no results, else the
    comparison (FAIL when a run of a sweep failed, whatever the numbers say)."""
    failed = [f"{side}: {outcomes[(name, side)].message}" for side in ("before", "after")
              if not outcomes[(name, side)].ok]
    if not all((d / "runs.parquet").is_file() for d in dirs):
        return Row(name, "ERROR", messages=failed or ["no runs.parquet written"])
    c = compare_results(*dirs, rtol=args.rtol, atol=args.atol, strict=args.strict, tables=args.tables)
    status = "PASS" if c.ok and not failed else "FAIL"
    return Row(name, status, c, [*failed, *c.failures, *(f"note: {n}" for n in c.notes)])


# -------------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (argparse exits 2 on a bad one)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, help="git revision of the 'before' tree")
    p.add_argument("--after", help="git revision or source directory of the 'after' tree (default: this "
                                   "repository's working tree)")
    p.add_argument("--rtol", type=float, default=DEFAULT_RTOL, help="relative tolerance (default 1e-9)")
    p.add_argument("--atol", type=float, default=DEFAULT_ATOL,
                   help="absolute tolerance for values near 0 (default 1e-15, sized for seconds)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these experiments (file stems)")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="write the results under DIR/before and DIR/after and keep them (default: a "
                        "temporary directory)")
    p.add_argument("--reuse", action="store_true",
                   help="with --keep: read results already complete in DIR instead of running them again "
                        "(delete DIR/after/NAME to redo one)")
    p.add_argument("--jobs", type=int, default=1, help="netsim runs at a time (default 1)")
    p.add_argument("--strict", action="store_true", help="columns or tables on one side only are failures")
    p.add_argument("--tables", nargs="+", choices=list(TABLE_KEYS), default=None, metavar="TABLE",
                   help=f"tables to compare, of {', '.join(TABLE_KEYS)} (default: all)")
    p.add_argument("--verbose", action="store_true",
                   help="list every difference (default: 12 per experiment)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per netsim run (default 3600)")
    args = p.parse_args(argv)
    if not (args.rtol >= 0 and args.atol >= 0 and args.jobs >= 1 and args.timeout > 0):
        p.error("--rtol and --atol must be >= 0, --jobs >= 1, --timeout > 0")
    if args.reuse and args.keep is None:
        p.error("--reuse goes with --keep DIR")
    return args


def plan(names: list[str], trees: dict[str, Path], results: Path) -> tuple[list, list[Row]]:
    """The runs to make (name, side, tree, file, out) and the SKIP rows of experiments missing before."""
    tasks, skipped = [], []
    for name in names:
        if not (trees["before"] / "experiments" / f"{name}.yaml").is_file():
            skipped.append(Row(name, "SKIP", messages=["not in the before tree's experiments/"]))
            continue
        for side in ("before", "after"):
            tasks.append((name, side, trees[side], trees[side] / "experiments" / f"{name}.yaml",
                          results / side / name))
    return tasks, skipped


def compare_trees(args: argparse.Namespace, repo: Path, results: Path) -> list[Row]:
    """Check out the trees, run every experiment in both, compare; the rows of the table."""
    with source_tree(repo, args.before, "before") as (before, b_desc), \
            source_tree(repo, args.after, "after") as (after, a_desc):
        trees = {"before": before, "after": after}
        names = experiment_names(after, args.only)
        for side, desc in (("before", b_desc), ("after", a_desc)):
            found = imported_from(trees[side], results)
            print(f"{side}: {desc}\n  netsim with PYTHONPATH alone: {found}", file=sys.stderr)
        tasks, rows = plan(names, trees, results)
        outcomes = run_all(tasks, args.jobs, args.timeout, args.reuse)
    for name in dict.fromkeys(t[0] for t in tasks):
        rows.append(judge(name, outcomes, (results / "before" / name, results / "after" / name), args))
    return sorted(rows, key=lambda r: r.name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison; 0 all pass, 1 a failure or error, 2 usage error."""
    args = parse_args(argv)
    try:
        repo = repo_root()
        resolve_commit(repo, args.before)
        if args.after is not None and not Path(args.after).is_dir():
            resolve_commit(repo, args.after)
        with contextlib.ExitStack() as stack:
            if args.keep is None:
                results = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="netsim-compare-")))
            else:
                results = args.keep.resolve()
                results.mkdir(parents=True, exist_ok=True)
            rows = compare_trees(args, repo, results)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_table(rows, args.rtol, None if args.verbose else 12)
    return 1 if any(r.status in ("FAIL", "ERROR") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

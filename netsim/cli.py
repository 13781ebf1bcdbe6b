"""The ``netsim`` command: a thin typer shell over the Python API (config -> experiment -> results)."""

from __future__ import annotations

import math
import os
import re
import signal
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from netsim import units
from netsim.errors import ConfigError, NetsimError, did_you_mean, interruption, shorten

#: What main() returns, for scripts (the --help epilog; tests/test_cli_manners.py checks each one).
EXIT_CODES = {
    0: "success (a below-bound warning included)",
    1: "a sweep finished but some of its runs failed (recorded in runs.parquet)",
    2: "bad input: experiment file, option, path or results directory (one error line)",
    70: "internal error, a bug in netsim (the traceback is saved to a file)",
    130: "interrupted (Ctrl-C): a run writes nothing, a sweep's directory says interrupted (--resume finishes it)",
    143: "terminated (SIGTERM), as for Ctrl-C",
}

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Flow-level simulator of AI/HPC cluster networks.",
                  epilog="Exit status: " + "; ".join(f"{code} {what}" for code, what in EXIT_CODES.items()) + ".")
err = Console(stderr=True)


def _out() -> Console:
    # Pipes and test runners get a wide console so the summary table is not squeezed to 80 columns.
    return Console(width=None if sys.stdout.isatty() else 160)

SetOption = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Override a YAML key: --set workload.size=1GiB (repeatable).")]


VariantOption = Annotated[Optional[list[str]], typer.Option(
    "--variant", help="Run only this variant of the file (repeatable).")]


def version() -> str:
    """The installed version of netsim: the metadata of whichever distribution ships the ``netsim``
    package (its name in pyproject.toml may change), else ``netsim.__version__`` (a source tree)."""
    from importlib import metadata

    import netsim
    for dist in dict.fromkeys(metadata.packages_distributions().get("netsim", [])):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return getattr(netsim, "__version__", "unknown")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"netsim {version()}")
        raise typer.Exit(0)


@app.callback()
def _global(version_: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True, help="Print the installed version and exit.")] = False
            ) -> None:
    """Flow-level simulator of AI/HPC cluster networks."""


def _fail(exc: NetsimError) -> None:
    err.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


@app.command()
def validate(experiment: Annotated[Path, typer.Argument(help="Experiment YAML file.")],
             set_: SetOption = None, max_memory: MaxMemoryOption = None) -> None:
    """Check an experiment file without running it (every run of a sweep), with its pre-flight estimate."""
    from netsim.config import load_experiment, load_spec, locate
    from netsim.experiment.run import prepare
    try:
        limit = _max_memory(max_memory)
        exp = load_experiment(experiment, set_ or [])
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    except NetsimError as exc:
        _fail(exc)
    if exp.is_sweep:
        _validate_sweep(exp, experiment, limit)
        return
    try:
        spec = load_spec(experiment, set_ or [])
        estimate = _preflight(spec, limit)
        topo, _ = prepare(spec)
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    except NetsimError as exc:
        _fail(exc)
    _out().print(f"{experiment}: ok — {topo!r}, routing {spec.routing.type}, placement {spec.placement.type}, "
              + (_describe_workload(spec.workload) if spec.workload is not None else
                 f"{len(spec.jobs)} jobs: " + "; ".join(f"{j.name}: {_describe_workload(j.workload)}"
                                                        for j in spec.jobs)), highlight=False)
    _out().print(f"pre-flight: a run would need {estimate.describe()}", highlight=False)


def _validate_sweep(exp, experiment: Path, limit: float | None = None) -> None:
    """Expand a sweep and check every run (spec, pre-flight, topology, placement); exit 2 if any is invalid."""
    from netsim.config import locate
    from netsim.experiment.run import prepare
    from netsim.experiment.sweep import expand
    try:
        planned = expand(exp)
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    bad = []
    for run in planned:
        error = run.error
        if run.spec is not None:
            try:
                _preflight(run.spec, limit)
                prepare(run.spec)
            except NetsimError as exc:
                error = str(locate(exc, experiment) if isinstance(exc, ConfigError) else exc)
        if error:
            bad.append((run, error))
    points = 1
    for _keys, values in exp.axes:
        points *= len(values)
    _out().print(f"{experiment}: {len(planned)} runs ({max(len(exp.variants), 1)} variant(s) x {points} point(s) x "
                 f"{len(planned) // max(len(exp.variants), 1) // points} seed(s)), "
                 + (f"{len(bad)} invalid" if bad else "all valid"), highlight=False)
    for run, error in bad[:5]:  # a few, so a grid of bad runs stays one screen (and under 2 KB)
        err.print(f"run {run.run_id} ({_run_label(run)[:200]}): {error[:300]}", highlight=False, markup=False,
                  soft_wrap=True)
    if len(bad) > 5:
        err.print(f"... and {len(bad) - 5} more invalid runs", highlight=False)
    if bad:
        raise typer.Exit(2)


def _describe_workload(w) -> str:
    if w.type == "training":
        p = w.parallelism
        return (f"training {w.model.name or f'{w.model.layers}-layer GPT'} tp={p.tp} pp={p.pp} dp={p.dp} "
                f"({w.ranks} ranks)")
    if w.type == "sequence":
        return f"{w.mode} sequence of {len(w.steps)} step{'s' * (len(w.steps) != 1)}"
    return f"{w.op}/{w.algorithm} {units.format_size(w.size)}"


def _warm_engine() -> None:
    """Compile the engine's kernels on a machine's first run, and say so (numba caches them)."""
    from netsim.engine.table import kernels_cached, warm_up
    from netsim.solver import COMPILED
    if COMPILED and not kernels_cached():
        with err.status("Compiling the engine's kernels (first run on this machine: about 40 s, cached after)"):
            warm_up()


MaxMemoryOption = Annotated[Optional[str], typer.Option(
    "--max-memory", envvar="NETSIM_MAX_MEMORY", show_envvar=True,
    help="Refuse a run whose estimated peak memory is above this (default 16GiB), e.g. 32GiB.")]


def _max_memory(value: str | None) -> float | None:
    """``--max-memory`` in bytes (None: the default limit); NetsimError naming the option otherwise."""
    if value is None:
        return None
    try:
        return units.parse_size(value)
    except NetsimError as exc:
        raise NetsimError(f"--max-memory: {exc}") from None


def _preflight(spec, max_memory: float | None):
    """The run's pre-flight estimate; NetsimError (the estimate, the limit, the option) above the limit."""
    from netsim.experiment.preflight import check
    return check(spec, max_memory)


QuietOption = Annotated[bool, typer.Option(
    "--quiet", "-q", help="No progress bar and no summary: only warnings and errors (the exit status tells the rest).")]


ForceOption = Annotated[bool, typer.Option(
    "--force", help="Replace the netsim results already in the output directory (files you added there are kept).")]


@app.command()
def run(experiment: Annotated[Path, typer.Argument(help="Experiment YAML file.")],
        out_dir: Annotated[Optional[Path], typer.Option("--out", help="Results directory (default results/NAME).")] = None,
        set_: SetOption = None, variant: VariantOption = None,
        report: Annotated[bool, typer.Option(help="Write report.html into the results directory.")] = True,
        force: ForceOption = False, max_memory: MaxMemoryOption = None, quiet: QuietOption = False) -> None:
    """Run an experiment and write its results directory (Parquet tables, manifest, report).

    A file with variants, a sweep, seeds or repeats runs all its runs, one after another, as
    ``netsim sweep`` does.
    """
    from netsim.config import load_experiment, load_spec, locate
    from netsim.experiment import read_results, run_experiment, write_results
    try:
        exp = load_experiment(experiment, set_ or [])
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    if exp.is_sweep:
        _sweep(exp, experiment, out_dir, "serial", 1, None, False, report, variant, force, max_memory, quiet)
        return
    if variant:
        _fail(NetsimError(f"{experiment} has no variants; --variant goes with a file that has variants:"))
    from netsim.experiment.outdir import claim
    try:
        limit = _max_memory(max_memory)
        spec = load_spec(experiment, set_ or [])
        estimate = _preflight(spec, limit)  # nothing is built before it
        target = out_dir or Path("results") / spec.name
        claim(target, "run", force=force, option="--out" if out_dir else None)  # before the simulation: nobody waits a minute to hear it
        _warm_engine()
        from netsim.progress import RunProgress
        with RunProgress(err, estimate.calls, show=err.is_terminal and not quiet) as progress:
            result = run_experiment(spec, on_start=progress.attach)
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    except NetsimError as exc:
        _fail(exc)
    except KeyboardInterrupt as exc:
        _interrupted("no results were written", exc)
    except Exception as exc:
        if interruption(exc) is None:
            raise
        _interrupted("no results were written", interruption(exc))
    finish = None
    if report:
        from netsim.report import write_report

        def finish(staging: Path) -> None:
            write_report(staging)
    try:
        target = write_results([result], target, force=force, finish=finish)
    except NetsimError as exc:
        _fail(exc)
    except KeyboardInterrupt as exc:
        _interrupted("no results were written", exc)
    if quiet:
        return
    _print_summary(read_results(target), spec.name)
    _out().print(f"results: {target}" + (f"  report: {target / 'report.html'}" if report else ""), highlight=False)


@app.command()
def sweep(experiment: Annotated[Path, typer.Argument(help="Experiment YAML file (variants:, sweep:, seeds:/repeats:).")],
          param: Annotated[Optional[list[str]], typer.Option(
              "--param", help="Add or replace a grid axis with a YAML value: a list sweeps its items "
              "(--param topology.spines=[4,8,16]), anything else is one value, commas included "
              "(--param routing='{type: split, ways: 4}'); repeatable.")] = None,
          workers: Annotated[int, typer.Option(help="Runs at a time (local processes or Dask workers).")] = 1,
          executor: Annotated[str, typer.Option(help="local (processes), dask, or serial (this process).")] = "local",
          scheduler: Annotated[Optional[str], typer.Option(
              help="Address of a running Dask scheduler (tcp://host:8786); default: a LocalCluster.")] = None,
          out_dir: Annotated[Optional[Path], typer.Option("--out", help="Results directory (default results/NAME).")] = None,
          resume: Annotated[bool, typer.Option(help="Keep the runs already in --out and run only the rest.")] = False,
          set_: SetOption = None, variant: VariantOption = None,
          report: Annotated[bool, typer.Option(help="Write report.html into the results directory.")] = True,
          force: ForceOption = False, max_memory: MaxMemoryOption = None, quiet: QuietOption = False) -> None:
    """Run every variant x grid point x seed of an experiment; failed runs are recorded and the rest go on.

    Exit status: 0 when every run succeeded, 1 when some failed, 2 for bad input.
    """
    from netsim.config import load_experiment, locate
    if executor not in ("local", "dask", "serial"):
        _fail(NetsimError(f"--executor must be local, dask or serial, got {executor!r}"))
    if workers < 1:
        _fail(NetsimError(f"--workers must be at least 1, got {workers}"))
    if scheduler and executor != "dask":
        _fail(NetsimError("--scheduler goes with --executor dask"))
    if force and resume:
        _fail(NetsimError("--force replaces the results in --out and --resume continues them: give one"))
    try:
        exp = load_experiment(experiment, set_ or [], param or [])
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    _comma_notes(param or [])
    _sweep(exp, experiment, out_dir, executor, workers, scheduler, resume, report, variant, force, max_memory, quiet)


def _comma_notes(params: list[str]) -> None:
    """A note for each ``--param`` written as before issue 24 (``k=2,4``): it is now one text value."""
    from netsim.config import parse_param
    for item in params:
        key, values = parse_param(item)
        if len(values) == 1 and isinstance(values[0], str) and "," in values[0]:
            example = values[0] if len(values[0]) <= 60 else "V1,V2"
            err.print(f"note: --param {key} is one value, {shorten(values[0])}; to sweep several, give a YAML "
                      f"list: --param {key}=[{example}]", highlight=False, markup=False, soft_wrap=True)


def _sweep(exp, experiment: Path, out_dir: Path | None, executor: str, workers: int, scheduler: str | None,
           resume: bool, report: bool, variants: list[str] | None = None, force: bool = False,
           max_memory: str | None = None, quiet: bool = False) -> None:
    """Expand, run with a progress bar (on a terminal, without ``quiet``), write results and the summary;
    exit 1 when a run failed."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    from netsim.config import locate
    from netsim.experiment.executors import make_executor
    from netsim.experiment.outdir import claim
    from netsim.experiment.sweep import expand, run_sweep, unique_ids
    try:
        name = exp.results_name()  # checked even with --out: every run would fail on it
        target = out_dir or Path("results") / name
        limit = _max_memory(max_memory)
        claim(target, "sweep", force=force, resume=resume, option="--out" if out_dir else None)
        planned, needs = _preflight_sweep(unique_ids(expand(exp)), limit)
        if variants:
            names = [v["name"] for v in exp.variants]
            unknown = [v for v in variants if v not in names]
            if unknown:
                raise NetsimError(f"no variant {', '.join(map(repr, unknown))} in {experiment}; its variants: "
                                  f"{', '.join(names) or '(none)'}{did_you_mean(unknown[0], names)}")
            planned = [r for r in planned if r.variant in variants]
        if executor == "local" and workers > 1:
            workers = _workers_that_fit(workers, [n for r, n in zip(planned, needs) if not variants
                                                  or r.variant in variants], limit)
        runner = make_executor(executor, workers, scheduler)
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    except NetsimError as exc:
        _fail(exc)
    _warm_engine()  # once here, not in every worker
    failed = 0
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("failed {task.fields[failed]}"), TimeElapsedColumn(), TextColumn("ETA"),
               TimeRemainingColumn())
    # no refresh thread: local workers can then be forked (see LocalExecutor); it redraws per finished run
    with Progress(*columns, console=err, transient=False, auto_refresh=False,
                  disable=quiet or not err.is_terminal) as progress:
        task = progress.add_task(f"{exp.name}: {len(planned)} runs", total=len(planned), failed=0)

        def done(run, outcome) -> None:
            nonlocal failed
            failed += not outcome.ok
            progress.update(task, advance=1, failed=failed, refresh=True)
            if not outcome.ok:
                progress.console.print(f"[yellow]run {run.run_id} failed[/] ({_run_label(run)}): "
                                       f"{outcome.error}", markup=True, highlight=False, soft_wrap=True)

        def resumed(kept: int, damaged: dict[str, str]) -> None:
            from rich.markup import escape
            progress.update(task, advance=kept, refresh=True)
            for run_id, problem in damaged.items():
                progress.console.print(f"[yellow]run {run_id} is redone[/]: {escape(problem)}", markup=True,
                                       highlight=False, soft_wrap=True)

        try:
            result = run_sweep(planned, exp, target, runner, resume=resume, force=force, on_done=done,
                               on_resume=resumed)
        except NetsimError as exc:
            _fail(exc)
        except KeyboardInterrupt as exc:
            progress.stop()
            _interrupted(_sweep_left(target), exc)
    if report and result.manifest["counts"]["ok"]:
        from netsim.experiment.outdir import add_files
        from netsim.report import write_report
        try:
            write_report(target)
            add_files(target, ["report.html"])
        except NetsimError as exc:
            _fail(exc)
    c = result.manifest["counts"]
    if not quiet:
        _print_results(target)
        _out().print(f"{c['ok']} ok, {c['failed']} failed, {result.skipped} already done (--resume); results: "
                     f"{target}" + (f"  report: {target / 'report.html'}" if report and c["ok"] else ""),
                     highlight=False)
    if c["failed"]:
        raise typer.Exit(1)


def _preflight_sweep(planned: list, limit: float | None) -> tuple[list, list[float]]:
    """The runs of a sweep with those above the memory limit turned into failed runs (their error is the
    pre-flight message): they are recorded, not run, and the others go on. Also each run's estimated
    peak memory (0 for a run that will not run)."""
    from dataclasses import replace
    out, needs, over = [], [], 0
    for run in planned:
        need = 0.0
        if run.spec is not None:
            try:
                need = _preflight(run.spec, limit).memory_bytes
            except NetsimError as exc:
                run = replace(run, spec=None, error=str(exc))
                over += 1
        out.append(run)
        needs.append(need)
    if over:
        err.print(f"pre-flight: {over} of {len(planned)} runs need more memory than the limit; they are recorded as "
                  "failed without running (--max-memory raises the limit)", highlight=False, soft_wrap=True)
    return out, needs


def _workers_that_fit(workers: int, needs: list[float], limit: float | None) -> int:
    """Fewer workers when the largest runs, side by side, would need more memory than the limit."""
    from netsim.experiment.preflight import DEFAULT_MAX_MEMORY_BYTES
    limit = DEFAULT_MAX_MEMORY_BYTES if limit is None else limit
    largest = sorted(needs, reverse=True)
    fit = workers
    while fit > 1 and sum(largest[:fit]) > limit:
        fit -= 1
    if fit < workers:
        err.print(f"pre-flight: {workers} workers could need {units.format_size(sum(largest[:workers]), 3)} at once, "
                  f"above the {units.format_size(limit, 3)} limit; running {fit} at a time (--max-memory raises "
                  "the limit)", highlight=False, soft_wrap=True)
    return fit


def _sweep_left(target: Path) -> str:
    """What an interrupted sweep left behind, for the one-line message."""
    import json
    try:
        counts = json.loads((target / "manifest.json").read_text()).get("counts", {})
    except (OSError, ValueError):
        return f"{target} is incomplete (its manifest does not say complete)"
    return (f"{target} holds the {counts.get('ok', 0)} of {counts.get('planned', '?')} runs that finished "
            "(manifest status: interrupted); --resume continues the sweep")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it cleans up as on Ctrl-C."""


#: Signals main() received (SIGINT, SIGTERM) that no command has reported yet: process-wide, as signals are.
_RECEIVED: list[int] = []


def _interrupted(left: str, exc: BaseException | None = None) -> None:
    """Ctrl-C or SIGTERM: one line on what is left, exit 130 (SIGINT) or 143 (SIGTERM)."""
    _RECEIVED.clear()
    err.print(f"{'terminated' if isinstance(exc, Terminated) else 'interrupted'}: {left}", highlight=False,
              markup=False, soft_wrap=True)
    raise typer.Exit(143 if isinstance(exc, Terminated) else 130)


def _run_label(run) -> str:
    parts = [f"variant {run.variant}"] if run.variant else []
    parts += [f"{k}={v if len(str(v)) <= 60 else shorten(v)}" for k, v in run.params.items()]
    return ", ".join(parts) or "base"


@app.command()
def report(directory: Annotated[Path, typer.Argument(help="A results directory (netsim run or netsim sweep).")],
           out: Annotated[Optional[Path], typer.Option("--out", help="HTML file to write (default DIR/report.html).")]
           = None, force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --out file.")] = False,
           self_contained: Annotated[bool, typer.Option(
               "--self-contained", help="Inline plotly.js (4.5 MB) instead of sharing DIR/plotly.min.js.")] = False
           ) -> None:
    """Write the HTML dashboard of a results directory (it opens offline; it loads the folder's one
    plotly.min.js, or inlines plotly.js with --self-contained or when --out is outside DIR)."""
    from netsim.experiment.outdir import add_files
    from netsim.report import write_report
    try:
        _check_results_dir(directory)
        target = write_report(directory, out, force=force, self_contained=self_contained)
        if out is None:
            add_files(directory, ["report.html"])
    except NetsimError as exc:
        _fail(exc)
    _out().print(f"report: {target}", highlight=False)


def _check_results_dir(directory: Path) -> None:
    """NetsimError unless ``directory`` is a readable, complete netsim results directory (a sweep
    that stopped early is readable too: its manifest says what finished)."""
    from netsim.experiment.outdir import read_manifest
    if not directory.is_dir() or not (directory / "runs.parquet").is_file():
        raise NetsimError(f"{directory} is not a results directory (no runs.parquet and manifest.json)")
    manifest = read_manifest(directory)
    status = manifest.get("status", "complete")
    if status not in ("complete", "interrupted"):
        raise NetsimError(f"{directory} is incomplete (manifest status: {status}); "
                          + ("--resume finishes a sweep" if manifest.get("kind") == "sweep" else "run it again"))


@app.command()
def results(directory: Annotated[Path, typer.Argument(help="A results directory (netsim run or netsim sweep).")],
            csv: Annotated[Optional[Path], typer.Option("--csv", help="Also write the summary to this CSV file.")] = None,
            metric: Annotated[Optional[list[str]], typer.Option(
                "--metric", help="A runs.parquet column to summarise (repeatable; default: the headline ones; `netsim list metrics` names them all).")] = None,
            force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --csv file.")] = False,
            ) -> None:
    """Summarise a results directory: per variant and swept point, mean and 95% interval over seeds."""
    from netsim.experiment.outdir import check_new_file, write_file_atomically
    try:
        _check_results_dir(directory)
        if csv is not None:
            check_new_file(csv, force=force, option="--csv")
        table = _print_results(directory, metric)
        if csv is not None:
            write_file_atomically(csv, table.to_csv(index=False), force=force, option="--csv")
    except NetsimError as exc:
        _fail(exc)
    if csv is not None:
        _out().print(f"summary: {csv}", highlight=False)


def _format_metric(metric: str, value: float) -> str:
    from netsim.experiment.metrics import METRICS
    kind = METRICS[metric].kind if metric in METRICS else ""
    if value != value:
        return "-"
    if kind == "time" or (not kind and metric.endswith("_s")):
        return units.format_time(value, 4)
    if kind == "bandwidth" or (not kind and metric.endswith("_Bps")):
        return units.format_bandwidth(value, 4)
    return f"{value:.4g}"


def _print_results(directory: Path, metrics: list[str] | None = None):
    """Print the summary table of a results directory and return it as a DataFrame."""
    from netsim.experiment.summary import summarize
    table, keys, metrics = summarize(directory, metrics)
    out = Table(title=f"{directory}: mean ± 95% interval over seeds (Student t)")
    for col in [*keys, "runs", *metrics]:
        out.add_column(col, justify="left" if col in keys else "right")
    for _, row in table.iterrows():
        cells = [str(row[k]) for k in keys] + [f"{row['runs']}" + (f" ({row['failed']} failed)" if row["failed"] else "")]
        for m in metrics:
            mean, half = row[m], row[f"{m}_ci95"]
            cells.append(_format_metric(m, mean) + ("" if half != half else f" ± {_format_metric(m, half)}"))
        out.add_row(*cells)
    _out().print(out)
    return table


@app.command()
def show(directory: Annotated[Path, typer.Argument(help="A results directory (netsim run or netsim sweep).")]) -> None:
    """Describe a results directory: what was run, its state, variants and axes, headline metrics, report."""
    from netsim.experiment.overview import overview
    try:
        o = overview(directory)
    except NetsimError as exc:
        _fail(exc)
    out = _out()

    def say(text: str) -> None:  # paths and names are the user's: no rich markup in them
        out.print(text, highlight=False, markup=False)

    c = o.counts
    state = o.status if o.kind == "run" else (f"{o.status}: {c.get('ok', 0)} of {c.get('planned', '?')} runs ok"
                                              + (f", {c['failed']} failed" if c.get("failed") else ""))
    say(f"{directory}: {o.kind} {o.name!r} ({state})")
    say(f"  written by netsim {o.version} on {o.created}" + (f" from {o.experiment}" if o.experiment else ""))
    say(f"  ran: {o.what}")
    if o.kind == "sweep":
        say(f"  runs: {c.get('planned', '?')} planned, {c.get('ok', 0)} ok, {c.get('failed', 0)} failed, "
            f"{c.get('missing', 0)} missing")
        say(f"  variants: {', '.join(o.variants) or '(none)'}; swept: {', '.join(o.axes) or '(nothing)'}")
    if o.table is not None and len(o.table):
        titles = o.titles()
        table = Table(title="headline metrics (mean ± 95% interval over seeds)", title_justify="left")
        for col in [*o.keys, "runs", *o.metrics]:
            table.add_column(titles.get(col, col), justify="left" if col in o.keys else "right")
        for _, row in o.table.iterrows():
            cells = [str(row[k]) for k in o.keys]
            cells.append(f"{row['runs']}" + (f" ({row['failed']} failed)" if row["failed"] else ""))
            for m in o.metrics:
                half = row[f"{m}_ci95"]
                cells.append(_format_metric(m, row[m]) + ("" if math.isnan(half) else f" ± {_format_metric(m, half)}"))
            table.add_row(*(escape(cell) for cell in cells))
        out.print(table)
    for failure in o.failures:
        say(f"  failed: {failure}")
    say(f"  report: {o.report}" if o.report else f"  report: none (netsim report {directory} writes it)")
    if o.kind == "sweep" and not o.finished:
        say(f"  to finish it: netsim sweep {o.experiment or 'EXPERIMENT'} --out {directory} --resume")


@app.command()
def schema() -> None:
    """Print the JSON Schema of an experiment file (for editors: completion and key checks).

    The same schema ships as netsim/schema/experiment.schema.json; with the YAML extension of VS Code,
    a first line ``# yaml-language-server: $schema=PATH`` in an experiment file uses it.
    """
    from netsim.schema import schema_text
    typer.echo(schema_text(), nl=False)


LISTS = ("topologies", "routing", "placement", "algorithms", "metrics")


@app.command("list")
def list_(what: Annotated[Optional[str], typer.Argument(
        help=f"One of: {', '.join(LISTS)} (default: all).")] = None) -> None:
    """What an experiment file can name: topology types, routing and placement policies, collective
    algorithms, and the metrics of runs.parquet (from the registries the runner reads)."""
    if what is not None and what not in LISTS:
        _fail(NetsimError(f"cannot list {what!r}; valid: {', '.join(LISTS)}{did_you_mean(what, LISTS)}"))
    out = _out()
    for name, rows in _listings().items():
        if what in (None, name):
            table = Table(title=name, title_justify="left", show_header=False)
            table.add_column("name", style="bold")
            table.add_column("what")
            for row in rows:
                table.add_row(*(escape(cell) for cell in row))
            out.print(table)


def _listings() -> dict[str, list[tuple[str, str]]]:
    from netsim.collectives.base import ALGORITHMS
    from netsim.experiment.metrics import METRICS
    from netsim.fabrics import FABRICS
    from netsim.placement import PLACEMENT
    from netsim.routing import ROUTING

    def doc(factory) -> str:
        first = ((factory.__doc__ or "").strip().splitlines() or [""])[0]
        return re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", first).replace("``", "")

    return {
        "topologies": [(k, FABRICS[k].summary) for k in FABRICS.names()],
        "routing": [(k, doc(ROUTING.get(k))) for k in ROUTING.names()],
        "placement": [(k, doc(PLACEMENT.get(k))) for k in PLACEMENT.names()],
        "algorithms": [(k, doc(ALGORITHMS.get(k))) for k in ALGORITHMS.names()],
        "metrics": [(m.name, f"{m.doc} [{m.kind}]") for m in METRICS],
    }


@app.command("topo")
def topo_(file: Annotated[Path, typer.Argument(help="Topology file (topologies/*.yaml) or experiment file.")],
          draw: Annotated[Optional[Path], typer.Option("--draw", help="Also write a drawing of the fabric: a "
                                                       "self-contained HTML file.")] = None,
          force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --draw file.")] = False) -> None:
    """Describe a fabric: counts, injection and bisection bandwidth, diameter, path diversity."""
    from netsim.config import load_topology
    from netsim.fabrics import build_topology
    from netsim.topology.metrics import format_summary, summary
    if draw is not None:
        from netsim.experiment.outdir import check_new_file
        try:
            check_new_file(draw, force=force, option="--draw")
        except NetsimError as exc:
            _fail(exc)
    try:
        topology = build_topology(load_topology(file))
    except ConfigError as exc:
        _fail(_locate_topology(exc, file))
    except NetsimError as exc:
        _fail(exc)
    figure = None
    if draw is not None:
        from netsim.report.topology_drawing import topology_figure
        try:  # refuse a fabric too large to draw before anything is printed
            figure = topology_figure(topology)
        except NetsimError as exc:
            _fail(NetsimError(f"{file}: {exc}"))
    typer.echo(format_summary(summary(topology)))
    if figure is not None:
        from netsim.experiment.outdir import write_file_atomically
        from netsim.report.topology_drawing import figure_html
        try:
            write_file_atomically(draw, figure_html(figure), force=force, option="--draw")
        except NetsimError as exc:
            _fail(exc)
        typer.echo(f"drawing: {draw}")


def _locate_topology(exc: ConfigError, file: Path) -> ConfigError:
    """``exc`` with its file and line; a topology file holds the keys of ``topology:`` at its top level."""
    from netsim.config import locate
    if exc.file:
        return exc
    try:
        from netsim.config import read_text
        is_experiment = any(line.startswith("topology:") for line in read_text(file).splitlines())
    except (OSError, UnicodeDecodeError, ConfigError):
        is_experiment = True
    if is_experiment or not exc.path.startswith("topology."):
        return locate(exc, file)
    path = exc.path.removeprefix("topology.")
    return ConfigError(exc.message, path, str(file), locate(ConfigError(exc.message, path), file).line)


def _print_summary(tables: dict, name: str) -> None:
    """One line per workload step: calls, size, ranks, mean time, bandwidths, ideal and slowdown."""
    runs, colls = tables["runs"], tables["collectives"]
    r = runs.iloc[0]
    table = Table(title=f"netsim: {name} — routing {r['routing.type']}, placement {r['placement.type']}, "
                        f"{r['n_ranks']} ranks, max link util {r['max_link_util']:.2f}, "
                        + (f"max congestion {r['max_congestion']:.2f} (spraying {r['spray_congestion']:.2f}), "
                           if r['max_congestion'] == r['max_congestion'] else "")
                        + f"wall {r['wall_s']:.2f}s")
    for col in ("step", "collective", "size", "ranks", "calls", "time", "algbw", "busbw", "ideal", "slowdown"):
        table.add_column(col, justify="left" if col in ("step", "collective") else "right")
    for (step, label), g in colls.groupby(["step", "label"], sort=True):
        ideal = g["ideal_s"].mean()
        table.add_row(str(step), label if label == f"{g['op'].iat[0]}/{g['algorithm'].iat[0]}"
                      else f"{label} ({g['op'].iat[0]}/{g['algorithm'].iat[0]})",
                      units.format_size(g["size_bytes"].iat[0], 4), str(g["n_ranks"].iat[0]), str(len(g)),
                      units.format_time(g["duration_s"].mean(), 4), units.format_bandwidth(g["algbw_Bps"].mean(), 4),
                      units.format_bandwidth(g["busbw_Bps"].mean(), 4),
                      "-" if ideal != ideal else units.format_time(ideal, 4),
                      "-" if ideal != ideal else f"{g['slowdown'].mean():.3f}x")
    _out().print(table)
    jobs = tables.get("jobs")
    if jobs is not None and len(jobs) and (jobs.groupby("run_id").size().max() > 1
                                           or (jobs["kind"] == "training").any()):
        _out().print(_jobs_table(jobs))
    below = int(colls["below_bound"].sum()) if len(colls) else 0
    if below:
        err.print(f"[bold yellow]warning:[/] {_below_bound_note(runs, colls)}", markup=True, highlight=False)


def _below_bound_note(runs, colls) -> str:
    """What the summary says about calls faster than their lower bound, and the likely cause."""
    flagged = colls[colls["below_bound"].astype(bool)]
    gap = float(((flagged["bound_s"] - flagged["duration_s"]) / flagged["bound_s"]).max())
    text = (f"{len(flagged)} call(s) finished faster than their provable lower bound (bound_s), by up to "
            f"{gap:.3g} of it (flagged in collectives.parquet and runs.parquet); ")
    tolerance = runs["engine.completion_tolerance"].max() if "engine.completion_tolerance" in runs else 1e-9
    if tolerance > 1e-9:
        return text + (f"engine.completion_tolerance ({units.format_time(tolerance)}) lets flows finish up to that "
                       "much early per dependent step, too coarse for this run: lower it (0 is exact)")
    return text + "this should not happen — please report it with the results directory"


def _jobs_table(jobs) -> Table:
    """One line per job: placement, ranks, iteration time, TFLOPS per GPU and the time breakdown."""
    table = Table(title="jobs (training: mean per iteration, TFLOPS per GPU, time breakdown = mean over stage "
                        "processes, communicators over TCP as tp/pp/dp)")
    cols = ("job", "kind", "placement", "ranks", "tp/pp/dp", "layers", "iteration", "TFLOPS", "compute",
            "TP", "PP", "DP", "bubble", "TCP", "slowdown")
    for col in cols:
        table.add_column(col, justify="left" if col in ("job", "kind", "placement", "layers") else "right",
                         no_wrap=col in ("job", "placement", "layers"))

    def t(v) -> str:
        return "-" if v != v else units.format_time(float(v), 4)

    for _, j in jobs.iterrows():
        training = j["kind"] == "training"
        table.add_row(
            str(j["name"]), j["kind"], j["placement"], str(j["n_ranks"]),
            f"{j['tp']}/{j['pp']}/{j['dp']}" if training else "-", j["partition"] or "-", t(j["iteration_time_s"]),
            f"{j['tflops_per_gpu']:.1f}" if training else "-", t(j["compute_s"]), t(j["tp_s"]), t(j["pp_s"]),
            t(j["dp_s"]), t(j["bubble_s"]),
            f"{j['tcp_tp']}/{j['tcp_pp']}/{j['tcp_dp']}" if training else "-",
            "-" if j["slowdown"] != j["slowdown"] else f"{j['slowdown']:.3f}x")
    return table


def main() -> None:
    """Console-script entry point: exit 0 on success, 1 when runs of a sweep failed, 2 for bad input
    (one message, no traceback), 130/143 when interrupted (SIGINT/SIGTERM), 70 for a bug in netsim."""
    received = _RECEIVED
    received.clear()

    def stop(signum, frame) -> None:
        received.append(signum)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    signal.signal(signal.SIGTERM, stop)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, stop)
    try:
        code = app(standalone_mode=False)
        # typer turns a KeyboardInterrupt no command caught into a silent exit 130: say what happened
        if received and code == 130:
            code = _stopped_by(received[-1])
    except KeyboardInterrupt as exc:
        code = _stopped_by(signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
    except NetsimError as exc:  # CORRECTNESS: no traceback for bad input, whatever raised it
        err.print(f"error: {exc}", highlight=False, markup=False, soft_wrap=True)
        code = 2
    except OSError as exc:
        from netsim.experiment.outdir import os_error
        err.print(f"error: {os_error(exc, 'use')}", highlight=False, markup=False, soft_wrap=True)
        code = 2
    except RecursionError:
        err.print("error: the input is nested too deeply", highlight=False)
        code = 2
    except MemoryError:
        err.print("error: out of memory; make the run smaller", highlight=False)
        code = 2
    except Exception as exc:
        if interruption(exc) is not None:  # Ctrl-C met inside a compiled kernel
            code = _stopped_by(signal.SIGTERM if isinstance(interruption(exc), Terminated) else signal.SIGINT)
        elif hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):  # usage errors (click's)
            exc.show()
            code = exc.exit_code
        elif isinstance(exc, typer.Abort):
            code = _stopped_by(signal.SIGINT)
        else:  # a bug: a short message, the traceback in a file to report
            code = _crash_report()
    sys.exit(code if isinstance(code, int) else 0)


def _stopped_by(signum: int) -> int:
    """One line for an interruption no command reported; its exit status."""
    err.print("terminated" if signum == signal.SIGTERM else "interrupted", highlight=False)
    return 143 if signum == signal.SIGTERM else 130


def _crash_report() -> int:
    """Print one line about an unexpected error, keep its traceback in a temporary file; exit status 70."""
    import tempfile
    import traceback
    text = traceback.format_exc()
    try:
        with tempfile.NamedTemporaryFile("w", prefix="netsim-crash-", suffix=".txt", delete=False) as f:
            f.write(text)
        where = f"the traceback is in {f.name}"
    except OSError:
        where = "set NETSIM_DEBUG=1 to see the traceback"
    if os.environ.get("NETSIM_DEBUG"):
        sys.stderr.write(text)
    last = text.strip().splitlines()[-1][:300]
    err.print(f"internal error (a bug in netsim): {last}; {where}; please report it with the experiment file",
              highlight=False, markup=False, soft_wrap=True)
    return 70


if __name__ == "__main__":
    main()

"""``netsim validate``, ``run`` and ``sweep``: an experiment file in, a results directory out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from netsim import interrupts, units
from netsim.cli.app import (
    SetOption,
    VariantOption,
    _fail,
    _out,
    _print_results,
    err,
)
from netsim.errors import ConfigError, NetsimError, did_you_mean, interruption, shorten


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
                 f"cluster: trace {spec.cluster.trace}, {spec.cluster.scheduler} scheduler, {spec.cluster.mode}"
                 if spec.cluster is not None else
                 f"{len(spec.jobs)} jobs: " + "; ".join(f"{j.name}: {_describe_workload(j.workload)}"
                                                        for j in spec.jobs))
              + (f"; detection: {spec.detection.trials} trials of {', '.join(spec.detection.kinds)} faults"
                 if spec.detection is not None else ""), highlight=False)
    _out().print(f"pre-flight: a run would need {estimate.describe()}"
                 + (" (each of the detection's trials as much, one after another)" if spec.detection else ""),
                 highlight=False)


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
    if w.type in ("chakra", "schedule"):
        return f"{w.type} trace {w.path}"
    return f"{w.op}/{w.algorithm} {units.format_size(w.size)}"


def _warm_engine(messages: int | None = None) -> None:
    """Compile the engine's kernels on a machine's first run that needs them, and say so (numba caches
    them); ``messages``: those the process will run (None: as many as it takes to need them)."""
    from netsim.solver import jit
    if not jit.will_compile(messages):
        return
    from netsim.engine.table import kernels_cached, warm_up
    if not kernels_cached():
        with err.status("Compiling the engine's kernels (first run on this machine: about 40 s, cached after)"):
            warm_up()
        interrupts.check()  # (a Ctrl-C that numba's compiler callbacks swallowed)


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


def _duration(seconds: float) -> str:
    from netsim.experiment.preflight import duration
    return duration(seconds)


def _long_notice(what: str) -> None:
    """One line before a long start: a notice, not an error (the estimate is rough)."""
    err.print(f"pre-flight: {what} (estimated from its counts on a 2-core machine; it starts now)",
              highlight=False, markup=False, soft_wrap=True)


QuietOption = Annotated[bool, typer.Option(
    "--quiet", "-q", help="No progress bar and no summary: only warnings and errors (the exit status tells the rest).")]


ForceOption = Annotated[bool, typer.Option(
    "--force", help="Replace the netsim results already in the output directory (files you added there are kept).")]


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
        if estimate.long and not quiet:
            _long_notice(f"this run may take about {_duration(estimate.wall_s)}")
        _warm_engine(2 * estimate.messages)  # (the run's messages and its ideal's replay of them)
        from netsim.progress import RunProgress
        with RunProgress(err, estimate.calls, show=err.is_terminal and not quiet) as progress:
            result = run_experiment(spec, on_start=progress.attach)
        interrupts.check()  # (a signal whose exception was swallowed after the run's last step)
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
            write_report(staging, topologies={result.run_id: result.topology})  # perf: not built again
    try:
        target = write_results([result], target, force=force, finish=finish)
    except NetsimError as exc:
        _fail(exc)
    except KeyboardInterrupt as exc:
        _interrupted("no results were written", exc)
    if quiet:
        return
    _print_summary(read_results(target, SUMMARY_TABLES), spec.name)
    _out().print(f"results: {target}" + (f"  report: {target / 'report.html'}" if report else ""), highlight=False)


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
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from netsim.config import locate
    from netsim.experiment.executors import make_executor
    from netsim.experiment.inputs import check_input_files
    from netsim.experiment.outdir import claim
    from netsim.experiment.sweep import expand, run_sweep, unique_ids
    try:
        name = exp.results_name()  # checked even with --out: every run would fail on it
        target = out_dir or Path("results") / name
        limit = _max_memory(max_memory)
        claim(target, "sweep", force=force, resume=resume, option="--out" if out_dir else None)
        planned = unique_ids(expand(exp))
        if variants:
            names = [v["name"] for v in exp.variants]
            unknown = [v for v in variants if v not in names]
            if unknown:
                raise NetsimError(f"no variant {', '.join(map(repr, unknown))} in {experiment}; its variants: "
                                  f"{', '.join(names) or '(none)'}{did_you_mean(unknown[0], names)}")
            planned = [r for r in planned if r.variant in variants]
        # a bad trace, matrix, schedule or route table stops the sweep here, as a bad experiment file
        # does: before any run, with no results directory (not as a failed run among written ones)
        check_input_files(r.spec for r in planned if r.spec is not None)
        planned, needs = _preflight_sweep(planned, limit, quiet)
        if executor == "local" and workers > 1:
            workers = _workers_that_fit(workers, needs, limit)
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


def _preflight_sweep(planned: list, limit: float | None, quiet: bool = False) -> tuple[list, list[float]]:
    """The runs of a sweep with those above the memory limit turned into failed runs (their error is the
    pre-flight message): they are recorded, not run, and the others go on. Also each run's estimated
    peak memory (0 for a run that will not run). Runs estimated to take long are named in one notice."""
    from dataclasses import replace
    out, needs, over, long = [], [], 0, []
    for run in planned:
        need = 0.0
        if run.spec is not None:
            try:
                estimate = _preflight(run.spec, limit)
                need = estimate.memory_bytes
                if estimate.long:
                    long.append(estimate.wall_s)
            except NetsimError as exc:
                run = replace(run, spec=None, error=str(exc))
                over += 1
        out.append(run)
        needs.append(need)
    if over:
        err.print(f"pre-flight: {over} of {len(planned)} runs need more memory than the limit; they are recorded as "
                  "failed without running (--max-memory raises the limit)", highlight=False, soft_wrap=True)
    if long and not quiet:
        from netsim.experiment.walltime import LONG_RUN_S
        _long_notice(f"{len(long)} of {len(planned)} runs may take over {_duration(LONG_RUN_S)} each (the longest about "
                     f"{_duration(max(long))})")
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


def _interrupted(left: str, exc: BaseException | None = None) -> None:
    """Ctrl-C or SIGTERM: one line on what is left, exit 130 (SIGINT) or 143 (SIGTERM)."""
    interrupts.reported()
    err.print(f"{'terminated' if isinstance(exc, interrupts.Terminated) else 'interrupted'}: {left}", highlight=False,
              markup=False, soft_wrap=True)
    raise typer.Exit(143 if isinstance(exc, interrupts.Terminated) else 130)


def _run_label(run) -> str:
    parts = [f"variant {run.variant}"] if run.variant else []
    parts += [f"{k}={v if len(str(v)) <= 60 else shorten(v)}" for k, v in run.params.items()]
    return ", ".join(parts) or "base"


#: The tables :func:`_print_summary` reads (not flows or links: they may hold millions of rows).
SUMMARY_TABLES = ("runs", "collectives", "jobs", "cluster_jobs", "fault_costs", "detection_summary")


def _print_summary(tables: dict, name: str) -> None:
    """One line per workload step: calls, size, ranks, mean time, bandwidths, ideal and slowdown."""
    runs, colls = tables["runs"], tables["collectives"]
    r = runs.iloc[0]
    cluster = tables.get("cluster_jobs")
    if cluster is not None and len(cluster):
        _out().print(_cluster_table(r, cluster, name))
        return
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
    costs = tables.get("fault_costs")
    if costs is not None and len(costs):
        _out().print(_fault_costs_table(costs))
    detection = tables.get("detection_summary")
    if detection is not None and len(detection):
        _out().print(_detection_table(detection))
    below = int(colls["below_bound"].sum()) if len(colls) else 0
    if below:
        err.print(f"[bold yellow]warning:[/] {_below_bound_note(runs, colls)}", markup=True, highlight=False)


def _fault_costs_table(costs) -> Table:
    """Per training job and fault entry, the iteration time it cost (counterfactual runs without it)."""
    table = Table(title="fault costs — iteration time with every fault minus without this one "
                        "(all: minus without any)")
    for col in ("job", "fault", "target", "action", "detail", "cost / iteration", "cost (total)", "share"):
        table.add_column(col, justify="left" if col in ("job", "fault", "target", "action", "detail") else "right")
    for _, r in costs.iterrows():
        ok = r["cost_s"] == r["cost_s"]
        share = r["cost_per_iteration_s"] / r["iteration_time_s"] if ok and r["iteration_time_s"] > 0 else None
        table.add_row(str(r["name"]), r["fault"], r["target"], r["action"], r["detail"] or "",
                      units.format_time(r["cost_per_iteration_s"], 4) if ok else "-",
                      units.format_time(r["cost_s"], 4) if ok else (r["note"] or "-"),
                      f"{share:.1%}" if share is not None else "-")
    return table


def _cluster_table(r, jobs, name: str) -> Table:
    """A cluster run: jobs, JCT, queueing, slowdown vs alone, per job kind and size."""
    table = Table(title=f"netsim: {name} — cluster run, routing {r['routing.type']}, placement "
                        f"{r['placement.type']}, {r['cluster.scheduler']} scheduler, {r['cluster.mode']}, "
                        f"GPU utilisation {r['cluster_utilisation']:.2f}, wall {r['wall_s']:.2f}s")
    for col in ("jobs", "GPUs", "mean JCT", "p95 JCT", "mean queue", "mean slowdown", "max slowdown"):
        table.add_column(col, justify="left" if col == "GPUs" else "right")
    groups = [("all", jobs)] + [(f"{g}", part) for g, part in jobs.groupby("gpus", sort=True)]
    for label, g in groups:
        table.add_row(str(len(g)), label, units.format_time(g["jct_s"].mean(), 4),
                      units.format_time(g["jct_s"].quantile(0.95), 4), units.format_time(g["queue_s"].mean(), 4),
                      f"{g['slowdown'].mean():.3f}x", f"{g['slowdown'].max():.3f}x")
    return table


def _detection_table(summary) -> Table:
    """A detection evaluation: per fault kind, how often the detector named the culprit, and how fast."""
    import pandas as pd
    table = Table(title="fault detection (C4D-style), per injected fault kind: top-1/top-3 accuracy, missed and "
                        "iterations to detection over the faults that slowed the job; latent = faults that did not")
    for col in ("fault", "trials", "latent", "top-1", "top-3", "false alarms", "missed", "iterations to detect",
                "severity", "slowdown"):
        table.add_column(col, justify="left" if col == "fault" else "right")

    def cell(v, fmt: str) -> str:
        return "-" if pd.isna(v) else format(v, fmt)

    for _, r in summary.iterrows():
        table.add_row(str(r["kind"]), str(r["trials"]), *(cell(r[c], ".0%") for c in
                                                          ("latent", "top1", "top3", "false_alarms", "missed")),
                      cell(r["iterations_to_detect"], ".2f"), cell(r["severity"], ".2f"),
                      cell(r["slowdown"], ".3f") + ("" if pd.isna(r["slowdown"]) else "x"))
    return table


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
            "TP", "PP", "DP", "EP", "bubble", "TCP", "slowdown")
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
            t(j["dp_s"]), t(j.get("ep_s", float("nan"))), t(j["bubble_s"]),
            f"{j['tcp_tp']}/{j['tcp_pp']}/{j['tcp_dp']}" if training else "-",
            "-" if j["slowdown"] != j["slowdown"] else f"{j['slowdown']:.3f}x")
    return table

"""``netsim trace-synth``, ``trace-convert`` and ``trace-check``: job traces for cluster runs, written,
converted from a public trace and checked (a thin shell over :mod:`netsim.cluster`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from netsim.cli.app import _fail, _out
from netsim.errors import ConfigError, NetsimError, shorten

OutArgument = Annotated[Path, typer.Argument(help="Trace file to write (.csv or .parquet).")]
ForceOption = Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")]
MaxGpusOption = Annotated[int | None, typer.Option(
    "--max-gpus", help="The cluster's GPUs: a bigger job is an error (trace-check) or dropped (trace-convert).")]


def trace_synth(out: OutArgument,
                jobs: Annotated[int, typer.Option("--jobs", help="How many jobs.")] = 500,
                span: Annotated[str, typer.Option("--span", help="Arrivals spread over this time (Poisson), e.g. "
                                                  "1d, 12h, 3600.")] = "1d",
                rate: Annotated[float | None, typer.Option(
                    "--rate", help="Arrivals per hour instead of --span (exponential gaps).")] = None,
                gpus: Annotated[int, typer.Option("--gpus", help="The cluster's GPUs (every job fits).")] = 1024,
                sizes: Annotated[str | None, typer.Option(
                    "--sizes", help="Job-size mix GPUS:WEIGHT,... (default 8:0.30,16:0.22,32:0.18,64:0.14,"
                    "128:0.08,256:0.05,512:0.03).")] = None,
                models: Annotated[str | None, typer.Option(
                    "--models", help="Model mix NAME:WEIGHT,... (default: a model per size class).")] = None,
                iterations: Annotated[int | None, typer.Option(
                    "--iterations", help="Give every job this many iterations instead of a duration.")] = None,
                median_duration: Annotated[str, typer.Option(
                    "--median-duration", help="Median runtime alone (log-normal), e.g. 20min.")] = "20min",
                sigma: Annotated[float, typer.Option("--sigma", help="Log-normal sigma of the runtime.")] = 1.0,
                seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same trace).")] = 0,
                force: ForceOption = False) -> None:
    """Write a synthetic job trace: Poisson arrivals, a size mix, models by size class, runnable parallelism."""
    from netsim.cluster.presets import PresetCache
    from netsim.cluster.synthetic import synthetic_trace
    try:
        _check_out(out, force)
        trace = synthetic_trace(jobs, span_s=_seconds(span, "--span"), rate_per_hour=rate, cluster_gpus=gpus,
                                size_mix=_mix(sizes, "--sizes", int) if sizes is not None else None,
                                model_mix=_mix(models, "--models", str) if models is not None else None,
                                iterations=iterations, median_duration_s=_seconds(median_duration, "--median-duration"),
                                duration_sigma=sigma, seed=seed)
        presets = PresetCache(trace.preset_dirs)
        _check_out(out, force, [p.path for p in map(presets.get, set(trace.jobs["model"])) if p is not None])
        trace.write(out)
    except (NetsimError, OSError) as exc:
        _fail(_as_error(exc))
    _out().print(f"{out}: {len(trace):,} jobs, seed {seed}", highlight=False, markup=False)
    _summary(trace)


def trace_convert(fmt: Annotated[str, typer.Argument(help="The source's layout: philly (Microsoft Philly's "
                                                     "cluster_job_log) or helios (a SenseTime Helios "
                                                     "cluster_log.csv).")],
                  source: Annotated[Path, typer.Argument(help="The public trace file.")],
                  out: OutArgument, max_gpus: MaxGpusOption = None,
                  start: Annotated[str, typer.Option(
                      "--start", help="Keep jobs submitted this long after the trace's first, or later (e.g. 7d).")]
                  = "0",
                  end: Annotated[str | None, typer.Option(
                      "--end", help="Keep jobs submitted before this time after the trace's first (e.g. 8d).")]
                  = None,
                  limit: Annotated[int | None, typer.Option("--limit", help="Keep at most this many jobs.")]
                  = None,
                  status: Annotated[list[str] | None, typer.Option(
                      "--status", help="Job status to keep (repeatable; default: Pass for philly, COMPLETED for "
                      "helios).")] = None,
                  attempts: Annotated[str | None, typer.Option(
                      "--attempts", help="philly: runtime of the last attempt (last, the default) or of all "
                      "attempts added (sum).")] = None,
                  min_gpus: Annotated[int, typer.Option("--min-gpus", help="Drop smaller jobs.")] = 1,
                  force: ForceOption = False) -> None:
    """Convert a public cluster trace to a job trace and say how many jobs were dropped, why, and where."""
    from netsim.cluster.convert import convert
    from netsim.inputfile import refuse_overwrite
    flags = {"max_gpus": "--max-gpus", "min_gpus": "--min-gpus", "limit": "--limit", "start_s": "--start",
             "end_s": "--end", "statuses": "--status", "attempts": "--attempts", "format": "FORMAT"}
    try:
        refuse_overwrite(out, [source], "OUT")
        _check_out(out, force)
        options = {"statuses": tuple(status)} if status else {}
        if attempts is not None:
            options["attempts"] = attempts
        result = convert(fmt, source, max_gpus=max_gpus, start_s=_seconds(start, "--start"),
                         end_s=_seconds(end, "--end") if end is not None else None, limit=limit,
                         min_gpus=min_gpus, **options)
        result.trace.write(out)
    except (NetsimError, OSError) as exc:
        if isinstance(exc, ConfigError) and exc.path in flags and not exc.file:
            exc = ConfigError(exc.message, flags[exc.path])
        _fail(_as_error(exc))
    summary, *first_dropped = result.report()
    for line in (f"{out}: {summary}", *first_dropped):
        _out().print(line, highlight=False, markup=False, soft_wrap=True)
    _summary(result.trace)


def trace_check(file: Annotated[Path, typer.Argument(help="Job trace (.csv or .parquet).")],
                max_gpus: MaxGpusOption = None) -> None:
    """Validate a job trace and summarise it: jobs, span, GPU-hours, models and a size histogram."""
    from netsim.cluster.trace import read_trace
    try:
        trace = read_trace(file, max_gpus=max_gpus)
    except (NetsimError, OSError) as exc:
        _fail(_as_error(exc))
    _out().print(f"{file}: ok", highlight=False, markup=False)
    _summary(trace)


def _summary(trace) -> None:
    """Print a trace's totals and its job-size histogram."""
    jobs = trace.jobs
    totals = Table(show_header=False, title="trace", title_justify="left")
    totals.add_column("what", style="bold")
    totals.add_column("value")
    by_duration = int(jobs["duration_s"].notna().sum())
    totals.add_row("jobs", f"{len(jobs):,} ({by_duration:,} by duration, {len(jobs) - by_duration:,} by iterations)")
    totals.add_row("submitted over", f"{float(jobs['submit_s'].max()) / 3600:,.2f} h")
    totals.add_row("GPU-hours", f"{trace.gpu_hours():,.1f} (of the jobs given by duration)")
    totals.add_row("largest job", f"{int(jobs['gpus'].max()):,} GPUs")
    models = jobs["model"].value_counts()
    more = f", and {len(models) - SHOWN_ROWS:,} more" if len(models) > SHOWN_ROWS else ""
    totals.add_row("models", escape(", ".join(f"{m} ({n:,})" for m, n in models.head(SHOWN_ROWS).items())[:300] + more))
    _out().print(totals)
    counts = jobs["gpus"].value_counts()
    shown = counts.head(SHOWN_ROWS).sort_index()
    title = "job sizes" + (f" (the {SHOWN_ROWS} commonest of {len(counts):,})" if len(counts) > SHOWN_ROWS else "")
    hist = Table(title=title, title_justify="left")
    for col in ("GPUs", "jobs", "share", ""):
        hist.add_column(col, justify="right" if col != "" else "left")
    for gpus, n in shown.items():
        share = n / len(jobs)
        hist.add_row(f"{gpus:,}", f"{n:,}", f"{share:.0%}", "#" * max(1, round(40 * n / counts.max())))
    _out().print(hist)


def _check_out(out: Path, force: bool, inputs: Iterable = ()) -> None:
    """ConfigError unless ``out`` ends in .csv, .parquet or .pq (the format written), is none of
    ``inputs`` (with or without ``--force``) and is new (or ``force``)."""
    from netsim.experiment.outdir import check_new_file
    from netsim.inputfile import refuse_overwrite
    if out.suffix.lower() not in (".csv", ".parquet", ".pq"):
        raise ConfigError(f"expected an output file ending in .csv or .parquet (the format written), got "
                          f"{shorten(out.name)}", "OUT")
    refuse_overwrite(out, inputs, "OUT")
    check_new_file(out, force=force, option="OUT")


def _seconds(value: str, option: str) -> float:
    from netsim.cluster.trace import parse_duration
    try:
        return parse_duration(value)
    except NetsimError as exc:
        raise ConfigError(str(exc), option) from None


def _mix(text: str, option: str, key_type: type) -> dict:
    """``A:0.5,B:0.5`` as a mapping; ConfigError naming the option otherwise (a key given twice too)."""
    out = {}
    for part in text.split(","):
        key, sep, weight = part.strip().rpartition(":")
        try:
            if not sep or not key.strip():
                raise ValueError
            name, value = key_type(key.strip()), float(weight)
        except ValueError:
            raise ConfigError(f"expected KEY:WEIGHT pairs separated by commas (like 8:0.5,16:0.5), got "
                              f"{shorten(part)}", option) from None
        if name in out:
            raise ConfigError(f"{shorten(name)} is given twice; give each once", option)
        out[name] = value
    return out


#: The Python API's argument names -> the options that set them (for messages).
_OPTIONS = {"jobs": "--jobs", "span_s": "--span", "rate_per_hour": "--rate", "size_mix": "--sizes",
            "model_mix": "--models", "median_duration_s": "--median-duration", "status": "--status",
            "attempts": "--attempts", "format": "FORMAT", "seed": "--seed", "cluster_gpus": "--gpus",
            "iterations": "--iterations", "duration_sigma": "--sigma", "max_gpus": "--max-gpus"}
#: Rows of the summary's model list and size histogram (a trace may have thousands of sizes).
SHOWN_ROWS = 20


def _as_error(exc: Exception) -> NetsimError:
    """A ConfigError naming the option rather than the argument; an OSError as netsim's message."""
    if isinstance(exc, ConfigError) and exc.path in _OPTIONS and not exc.file:
        return ConfigError(exc.message, _OPTIONS[exc.path])
    if isinstance(exc, NetsimError):
        return exc
    from netsim.experiment.outdir import os_error
    return os_error(exc, "use")



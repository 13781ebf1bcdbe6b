"""The ``netsim`` command: a thin typer shell over the Python API (config -> experiment -> results)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from netsim import units
from netsim.errors import ConfigError, NetsimError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Flow-level simulator of AI/HPC cluster networks.")
err = Console(stderr=True)


def _out() -> Console:
    # Pipes and test runners get a wide console so the summary table is not squeezed to 80 columns.
    return Console(width=None if sys.stdout.isatty() else 160)

SetOption = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Override a YAML key: --set workload.size=1GiB (repeatable).")]


def _fail(exc: NetsimError) -> None:
    err.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


@app.command()
def validate(experiment: Annotated[Path, typer.Argument(help="Experiment YAML file.")],
             set_: SetOption = None) -> None:
    """Check an experiment file without running it."""
    from netsim.config import load_spec, locate
    from netsim.experiment.run import prepare
    try:
        spec = load_spec(experiment, set_ or [])
        topo, _ = prepare(spec)
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    except NetsimError as exc:
        _fail(exc)
    _out().print(f"{experiment}: ok — {topo!r}, routing {spec.routing.type}, placement {spec.placement.type}, "
              f"{spec.workload.op}/{spec.workload.algorithm} {units.format_size(spec.workload.size)}",
              highlight=False)


@app.command()
def run(experiment: Annotated[Path, typer.Argument(help="Experiment YAML file.")],
        out_dir: Annotated[Optional[Path], typer.Option("--out", help="Results directory (default results/NAME).")] = None,
        set_: SetOption = None,
        report: Annotated[bool, typer.Option(help="Write report.html into the results directory.")] = True) -> None:
    """Run an experiment and write its results directory (Parquet tables, manifest, report)."""
    from netsim.config import load_spec, locate
    from netsim.experiment import read_results, run_experiment, write_results
    try:
        spec = load_spec(experiment, set_ or [])
        result = run_experiment(spec)
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    except NetsimError as exc:
        _fail(exc)
    target = write_results([result], out_dir or Path("results") / spec.name)
    if report:
        from netsim.report import write_report
        write_report(target)
    _print_summary(read_results(target)["runs"], spec.name)
    _out().print(f"results: {target}" + (f"  report: {target / 'report.html'}" if report else ""), highlight=False)


def _print_summary(runs, name: str) -> None:
    table = Table(title=f"netsim: {name}", show_lines=False)
    for col in ("run", "routing", "placement", "collective", "size", "ranks", "time", "algbw", "busbw",
                "max link util", "wall"):
        table.add_column(col, justify="right" if col not in ("run", "routing", "placement", "collective") else "left")
    for _, r in runs.iterrows():
        table.add_row(r["run_id"], r["routing.type"], r["placement.type"],
                      f"{r['workload.op']}/{r['workload.algorithm']}", units.format_size(r["workload.size"]),
                      str(r["n_ranks"]), units.format_time(r["collective_time_s"], 4),
                      units.format_bandwidth(r["algbw_Bps"], 4), units.format_bandwidth(r["busbw_Bps"], 4),
                      f"{r['max_link_util']:.2f}", f"{r['wall_s']:.2f}s")
    _out().print(table)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except NetsimError as exc:  # CORRECTNESS: no traceback for bad input, whatever raised it
        err.print(f"error: {exc}", highlight=False, markup=False)
        sys.exit(2)


if __name__ == "__main__":
    main()

"""The ``netsim`` typer app and what its commands share: consoles, common options, exit codes, errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from netsim import units
from netsim.errors import NetsimError

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
    from rich.markup import escape
    # CORRECTNESS: the message holds user text (a file name, an option's value): "[/]" in it is not markup
    err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


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
    if set(keys) <= {"variant"}:  # variants that ran the same work: the dashboard's opening sentences
        from netsim.report.answer import answer_sentences
        for text in answer_sentences(directory):
            _out().print(text, highlight=False, markup=False)
    return table

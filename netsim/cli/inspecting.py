"""``netsim report``, ``results``, ``show``, ``schema``, ``list`` and ``topo``: what a results directory
or a fabric holds."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from netsim.cli.app import _fail, _format_metric, _out, _print_results
from netsim.errors import ConfigError, NetsimError, did_you_mean


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
        if out is not None:
            from netsim.experiment.outdir import check_new_file
            own = [f for f in _results_files(directory) if f.name != "report.html" or f.parent != directory]
            check_new_file(out, force=True, option="--out", inputs=own, suffixes=(".html", ".htm"))
        target = write_report(directory, out, force=force, self_contained=self_contained)
        if out is None:
            add_files(directory, ["report.html"])
    except NetsimError as exc:
        _fail(exc)
    _out().print(f"report: {target}", highlight=False)


def _check_results_dir(directory: Path) -> None:
    """NetsimError unless ``directory`` is a readable, complete netsim results directory (a sweep
    that stopped early or some of whose runs failed is readable too: its manifest says what finished)."""
    from netsim.experiment.outdir import read_manifest
    if not directory.is_dir() or not (directory / "runs.parquet").is_file():
        raise NetsimError(f"{directory} is not a results directory (no runs.parquet and manifest.json)")
    manifest = read_manifest(directory)
    status = manifest.get("status", "complete")
    if status not in ("complete", "interrupted", "failed"):
        raise NetsimError(f"{directory} is incomplete (manifest status: {status}); "
                          + ("--resume finishes a sweep" if manifest.get("kind") == "sweep" else "run it again"))


def _results_files(directory: Path) -> list[Path]:
    """The files netsim wrote in the results ``directory`` (its manifest's list), and each run part's."""
    from netsim.experiment.outdir import owned_files, read_manifest
    paths = []
    for name in owned_files(read_manifest(directory)):
        p = directory / name
        paths.extend(sorted(p.iterdir()) if p.is_dir() else [p])
    return paths


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
            check_new_file(csv, force=force, option="--csv", inputs=_results_files(directory), suffixes=(".csv",))
        table = _print_results(directory, metric)
        if csv is not None:
            write_file_atomically(csv, table.to_csv(index=False), force=force, option="--csv")
    except NetsimError as exc:
        _fail(exc)
    if csv is not None:
        _out().print(f"summary: {csv}", highlight=False)






def show(directory: Annotated[Path, typer.Argument(help="A results directory (netsim run or netsim sweep), or a "
                                                    "topology file (then as netsim topo).")]) -> None:
    """Describe a results directory: what was run, its state, variants and axes, headline metrics, report.
    Given a topology or experiment file, describe its fabric as ``netsim topo`` does."""
    from netsim.experiment.overview import overview
    if directory.is_file() and directory.suffix in (".yaml", ".yml"):
        topo_(directory)
        return
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
        what = "to run its failed runs again" if o.status == "failed" else "to finish it"
        say(f"  {what}: netsim sweep {o.experiment or 'EXPERIMENT'} --out {directory} --resume")


def schema() -> None:
    """Print the JSON Schema of an experiment file (for editors: completion and key checks).

    The same schema ships as netsim/schema/experiment.schema.json; with the YAML extension of VS Code,
    a first line ``# yaml-language-server: $schema=PATH`` in an experiment file uses it.
    """
    from netsim.schema import schema_text
    typer.echo(schema_text(), nl=False)


LISTS = ("topologies", "routing", "placement", "algorithms", "metrics")


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
            check_new_file(draw, force=force, option="--draw", inputs=(file,), suffixes=(".html", ".htm"))
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

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
              + (_describe_workload(spec.workload) if spec.workload is not None else
                 f"{len(spec.jobs)} jobs: " + "; ".join(f"{j.name}: {_describe_workload(j.workload)}"
                                                        for j in spec.jobs)), highlight=False)


def _describe_workload(w) -> str:
    if w.type == "training":
        p = w.parallelism
        return (f"training {w.model.name or f'{w.model.layers}-layer GPT'} tp={p.tp} pp={p.pp} dp={p.dp} "
                f"({w.ranks} ranks)")
    if w.type == "sequence":
        return f"{w.mode} sequence of {len(w.steps)} step{'s' * (len(w.steps) != 1)}"
    return f"{w.op}/{w.algorithm} {units.format_size(w.size)}"


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
    _print_summary(read_results(target), spec.name)
    _out().print(f"results: {target}" + (f"  report: {target / 'report.html'}" if report else ""), highlight=False)


@app.command("topo")
def topo_(file: Annotated[Path, typer.Argument(help="Topology file (topologies/*.yaml) or experiment file.")],
          draw: Annotated[Optional[Path], typer.Option("--draw", help="Also write a drawing of the fabric: a "
                                                       "self-contained HTML file.")] = None) -> None:
    """Describe a fabric: counts, injection and bisection bandwidth, diameter, path diversity."""
    from netsim.config import load_topology
    from netsim.experiment.run import build_topology_spec
    from netsim.topology.metrics import format_summary, summary
    if draw is not None and not draw.parent.is_dir():
        _fail(NetsimError(f"--draw {draw}: directory {draw.parent} does not exist"))
    try:
        topology = build_topology_spec(load_topology(file))
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
        from netsim.report.topology_drawing import write_figure
        try:
            write_figure(figure, draw)
        except OSError as exc:
            _fail(NetsimError(f"cannot write {draw}: {exc.strerror or exc}"))
        typer.echo(f"drawing: {draw}")


def _locate_topology(exc: ConfigError, file: Path) -> ConfigError:
    """``exc`` with its file and line; a topology file holds the keys of ``topology:`` at its top level."""
    from netsim.config import locate
    if exc.file:
        return exc
    try:
        is_experiment = any(line.startswith("topology:") for line in file.read_text().splitlines())
    except (OSError, UnicodeDecodeError):
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
    if jobs is not None and (len(jobs) > 1 or (jobs["kind"] == "training").any()):
        _out().print(_jobs_table(jobs))
    below = int(colls["below_bound"].sum()) if len(colls) else 0
    if below:
        err.print(f"[bold yellow]warning:[/] {below} call(s) finished faster than their provable lower bound "
                  "(bound_s); this should not happen — please report it with the results directory", markup=True)


def _jobs_table(jobs) -> Table:
    """One line per job: placement, ranks, iteration time, TFLOPS per GPU and the time breakdown."""
    table = Table(title="jobs (training: mean per iteration, TFLOPS per GPU, time breakdown = mean over stage "
                        "processes, communicators over TCP as tp/dp/pp)")
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
            f"{j['tcp_tp']}/{j['tcp_dp']}/{j['tcp_pp']}" if training else "-",
            "-" if j["slowdown"] != j["slowdown"] else f"{j['slowdown']:.3f}x")
    return table


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except NetsimError as exc:  # CORRECTNESS: no traceback for bad input, whatever raised it
        err.print(f"error: {exc}", highlight=False, markup=False)
        sys.exit(2)


if __name__ == "__main__":
    main()

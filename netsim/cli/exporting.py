"""``netsim export-schedule``: a job's workload compiled to a schedule and written as Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from netsim.cli.app import SetOption, _fail, _out
from netsim.errors import ConfigError, NetsimError

#: Workload types ``export-schedule`` compiles to one schedule.
EXPORTABLE = "collective, sequence, chakra and schedule"


def export_schedule(
        experiment: Annotated[Path, typer.Argument(help="Experiment YAML file.")],
        out: Annotated[Path, typer.Argument(help="Parquet file to write (.parquet).")],
        job: Annotated[Optional[str], typer.Option("--job", help="The job to export (by name) when there are several.")]
        = None,
        set_: SetOption = None,
        force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file (never one of the inputs).")]
        = False) -> None:
    """Write a job's workload as a schedule (Parquet: one row per task), connections in rank space, so a
    ``{type: schedule, path: OUT}`` workload runs it again (collective, sequence and trace workloads)."""
    from netsim.config import load_spec, locate
    from netsim.engine.schedule_io import write_schedule
    from netsim.experiment.run import _rngs, build_topology, place_jobs
    from netsim.inputfile import refuse_overwrite
    from netsim.workload.trace import job_schedule
    try:
        _check_output(out, experiment, force)
    except NetsimError as exc:
        _fail(exc)
    try:
        spec = load_spec(experiment, set_ or [])
        if spec.cluster is not None:
            raise ConfigError(f"a cluster experiment runs the jobs of a trace, and export-schedule writes one job's "
                              f"workload: {EXPORTABLE} workloads can be exported (workload: or jobs:)", "cluster")
        topology = build_topology(spec)
        jobs = place_jobs(spec, topology, _rngs(spec)[0])
        if job is None and len(jobs) > 1:
            raise ConfigError(f"the experiment has {len(jobs)} jobs; choose one with --job "
                              f"({', '.join(j.name for j in jobs)})", "jobs")
        chosen = [j for j in jobs if job is None or j.name == job]
        if not chosen:
            raise ConfigError(f"no job named {job!r}; jobs: {', '.join(j.name for j in jobs)}", "jobs")
        plan = chosen[0]
        schedule = job_schedule(plan.plan, plan.gpus.tolist(), job=plan.index, gpu_host=topology.gpu_host,
                                gpu_rail=topology.gpu_rail)
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    except NetsimError as exc:
        _fail(exc)
    try:
        refuse_overwrite(out, _input_files(spec), "OUT")
        write_schedule(schedule, out)
    except NetsimError as exc:
        _fail(exc)
    _out().print(f"schedule: {out} ({len(schedule):,} tasks, {schedule.n_sends:,} messages, "
                 f"{len(schedule.connections):,} connections, {len(plan.gpus)} ranks)", highlight=False)


def _check_output(out: Path, experiment: Path, force: bool) -> None:
    """Refuse an output that is the experiment file, that is not a ``.parquet`` name, or that exists
    (without ``--force``)."""
    from netsim.experiment.outdir import OutputError, check_new_file
    from netsim.inputfile import refuse_overwrite

    refuse_overwrite(out, [experiment], "OUT")
    if out.suffix.lower() != ".parquet":
        raise OutputError(f"OUT {str(out)!r}: a schedule is written as Parquet; give a file name ending in .parquet")
    check_new_file(out, force=force, option="OUT")


def _input_files(spec) -> list[str]:
    """The files the experiment's runs read (trace, schedule, matrices, route table): none may be the output."""
    from netsim.experiment.inputs import file_reads
    return [key[1] for key, _where, _read in file_reads(spec)]

"""``netsim export-schedule``: a job's workload compiled to a schedule and written as Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from netsim.cli.app import SetOption, _fail, _out
from netsim.errors import ConfigError, NetsimError


def export_schedule(
        experiment: Annotated[Path, typer.Argument(help="Experiment YAML file.")],
        out: Annotated[Path, typer.Argument(help="Parquet file to write.")],
        job: Annotated[Optional[str], typer.Option("--job", help="The job to export (by name) when there are several.")]
        = None,
        set_: SetOption = None,
        force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False) -> None:
    """Write a job's workload as a schedule (Parquet: one row per task), connections in rank space, so a
    ``{type: schedule, path: OUT}`` workload runs it again (collective, sequence and trace workloads)."""
    from netsim.config import load_spec, locate
    from netsim.engine.schedule_io import write_schedule
    from netsim.experiment.outdir import check_new_file
    from netsim.experiment.run import _rngs, build_topology, place_jobs
    from netsim.workload.trace import job_schedule
    try:
        check_new_file(out, force=force, option="OUT")
        spec = load_spec(experiment, set_ or [])
        topology = build_topology(spec)
        jobs = place_jobs(spec, topology, _rngs(spec)[0])
        if job is None and len(jobs) > 1:
            raise ConfigError(f"the experiment has {len(jobs)} jobs; choose one with --job "
                              f"({', '.join(j.name for j in jobs)})", "jobs")
        chosen = [j for j in jobs if job is None or j.name == job]
        if not chosen:
            raise ConfigError(f"no job named {job!r}; jobs: {', '.join(j.name for j in jobs)}", "jobs")
        plan = chosen[0]
        schedule = job_schedule(plan.plan, plan.gpus.tolist(), job=plan.index, gpu_host=topology.gpu_host)
        write_schedule(schedule, out)
    except ConfigError as exc:
        _fail(locate(exc, experiment))
    except NetsimError as exc:
        _fail(exc)
    _out().print(f"schedule: {out} ({len(schedule):,} tasks, {schedule.n_sends:,} messages, "
                 f"{len(schedule.connections):,} connections, {len(plan.gpus)} ranks)", highlight=False)

"""Results I/O: records -> DataFrames with a fixed schema (docs/results.md), written atomically."""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import netsim
from netsim.errors import NetsimError
from netsim.experiment.faultplan import FAULT_COST_COLUMNS
from netsim.experiment.metrics import run_metrics
from netsim.experiment.outdir import Staging, claim, os_error, write_manifest
from netsim.experiment.run import RunResult, spec_hash
from netsim.topology import LINK_KINDS, LINK_TIERS

FLOW_COLUMNS = ["run_id", "flow_id", "connection", "src", "dst", "channel", "job", "size_bytes", "start_s",
                "end_s", "n_paths"]
COLLECTIVE_COLUMNS = ["run_id", "job", "step", "label", "iteration", "op", "algorithm", "protocol", "size_bytes",
                      "n_ranks", "channels", "comm", "start_s", "end_s", "duration_s", "algbw_Bps", "busbw_Bps", "ideal_s",
                      "slowdown", "bound_s", "below_bound"]
LINK_COLUMNS = ["run_id", "link_id", "src", "dst", "kind", "tier", "capacity_Bps", "bytes", "busy_s",
                "mean_util", "peak_util", "peak_offered", "spray_peak_offered"]
ITERATION_COLUMNS = ["run_id", "job", "name", "iteration", "start_s", "end_s", "duration_s", "compute_s", "tp_s",
                     "pp_s", "dp_s", "ep_s", "bubble_s", "tflops_per_gpu"]
JOB_COLUMNS = ["run_id", "job", "name", "kind", "placement", "n_ranks", "tp", "pp", "dp", "start_s", "end_s",
               "iterations", "iteration_time_s", "tflops_per_gpu", "compute_s", "tp_s", "pp_s", "dp_s", "ep_s",
               "bubble_s", "partition", "partition_trials", "nic_families", "comms", "tcp_tp", "tcp_dp", "tcp_pp",
               "collective_calls", "slowdown"]
LINK_SERIES_COLUMNS = ["run_id", "link_id", "src", "dst", "kind", "tier", "t_start_s", "t_end_s", "util"]
#: A cluster run's jobs (:mod:`netsim.cluster.sim`) and its epochs.
CLUSTER_JOB_COLUMNS = ["run_id", "job", "name", "kind", "model", "gpus", "submit_s", "start_s", "end_s", "queue_s",
                       "jct_s", "iterations", "iteration_s", "alone_iteration_s", "slowdown", "hosts", "epochs"]
CLUSTER_SERIES_COLUMNS = ["run_id", "t_start_s", "t_end_s", "running", "waiting", "busy_gpus", "utilisation",
                          "core_mean_util", "core_peak_util"]
#: A detection evaluation (:mod:`netsim.detect.evaluate`): per trial, per fault kind, per trial and iteration.
DETECTION_TRIAL_COLUMNS = ["run_id", "trial", "kind", "component", "severity", "onset", "iterations", "slowdown",
                           "latent", "alarm", "top1", "top3", "detected_iteration", "iterations_to_detect",
                           "false_alarm", "missed", "suspect", "suspect_score", "culprit_rank"]
DETECTION_SUMMARY_COLUMNS = ["run_id", "kind", "trials", "latent", "top1", "top3", "false_alarms", "missed",
                             "iterations_to_detect", "severity", "slowdown"]
DETECTION_ITERATION_COLUMNS = ["run_id", "trial", "iteration", "faulty", "alarm", "slow_connections", "slow_ranks",
                               "suspect", "culprit_rank"]
#: The documented columns of each per-run table (``runs`` has one column per spec key besides).
TABLE_COLUMNS = {"collectives": COLLECTIVE_COLUMNS, "flows": FLOW_COLUMNS, "links": LINK_COLUMNS,
                 "jobs": JOB_COLUMNS, "iterations": ITERATION_COLUMNS, "link_series": LINK_SERIES_COLUMNS,
                 "cluster_jobs": CLUSTER_JOB_COLUMNS, "cluster_series": CLUSTER_SERIES_COLUMNS,
                 "fault_costs": FAULT_COST_COLUMNS, "detection_trials": DETECTION_TRIAL_COLUMNS,
                 "detection_summary": DETECTION_SUMMARY_COLUMNS, "detection_iterations": DETECTION_ITERATION_COLUMNS}
#: Tables of trace-driven cluster runs only (:mod:`netsim.cluster.sim`): per job, and per epoch.
CLUSTER_TABLES = ("cluster_jobs", "cluster_series")
#: Tables only some runs have, kept in ``RunResult.extra``: the cluster ones, and the per-fault costs
#: of training runs with faults (:mod:`netsim.experiment.faultplan`).
#: Tables of a detection evaluation (:mod:`netsim.detect.evaluate`): per trial, per fault kind, per trial and iteration.
DETECTION_TABLES = ("detection_trials", "detection_summary", "detection_iterations")
EXTRA_TABLES = (*CLUSTER_TABLES, "fault_costs", *DETECTION_TABLES)
RESULT_FILES = ("runs.parquet", "collectives.parquet", "flows.parquet", "links.parquet", "jobs.parquet",
                "iterations.parquet", "link_series.parquet", "cluster_jobs.parquet", "cluster_series.parquet",
                "fault_costs.parquet", "detection_trials.parquet", "detection_summary.parquet",
                "detection_iterations.parquet")
#: flows.parquet's Arrow schema: the one ``DataFrame.to_parquet`` gives the frame (pandas metadata included).
FLOW_SCHEMA = pa.Schema.from_pandas(pd.DataFrame({
    k: pd.Series([], dtype="str" if k in ("run_id", "connection") else "float64" if k.endswith("_s")
                 or k == "size_bytes" else "int64") for k in FLOW_COLUMNS}), preserve_index=False)
#: Tables added after the first release (a results directory written before them lacks them), and
#: tables only some runs have.
OPTIONAL_FILES = ("jobs.parquet", "iterations.parquet", "link_series.parquet", "cluster_jobs.parquet",
                  "cluster_series.parquet", "fault_costs.parquet", "detection_trials.parquet",
                  "detection_summary.parquet", "detection_iterations.parquet")


def collectives_frame(result: RunResult) -> pd.DataFrame:
    """One row per collective call."""
    rows = [(result.run_id, r.job, r.step, r.label, r.iteration, r.op, r.algorithm, r.protocol, r.size_bytes, r.n_ranks,
             r.channels, r.comm, r.start_s, r.end_s, r.duration_s, r.algbw_Bps, r.busbw_Bps, r.ideal_s, r.slowdown,
             r.bound_s, r.below_bound) for r in result.collectives]
    return pd.DataFrame(rows, columns=COLLECTIVE_COLUMNS)


def iterations_frame(result: RunResult) -> pd.DataFrame:
    """One row per training iteration: time, TFLOPS per GPU and its breakdown (empty without training)."""
    names = {j.index: j.name for j in result.jobs}
    rows = [(result.run_id, r.job, names.get(r.job, ""), r.iteration, r.start_s, r.end_s, r.duration_s, r.compute_s,
             r.tp_s, r.pp_s, r.dp_s, r.ep_s, r.bubble_s, r.tflops_per_gpu)
            for r in sorted(result.iterations, key=lambda r: (r.job, r.iteration))]
    return pd.DataFrame(rows, columns=ITERATION_COLUMNS)


def jobs_frame(result: RunResult) -> pd.DataFrame:
    """One row per job: placement, span, mean iteration time (training: with TFLOPS and breakdown)."""
    from netsim.workload.pipeline import TrainingPlan
    rows = []
    for job in result.jobs:
        calls = [c for c in result.collectives if c.job == job.index]
        iters = [r for r in result.iterations if r.job == job.index]
        row = dict.fromkeys(JOB_COLUMNS, np.nan)
        row.update(run_id=result.run_id, job=job.index, name=job.name, kind=job.kind, placement=job.placement,
                   n_ranks=len(job.gpus), start_s=job.began_s, end_s=job.ended_s, collective_calls=len(calls),
                   slowdown=float(np.mean([c.slowdown for c in calls])) if calls else np.nan,
                   nic_families=",".join(result.topology.nic_families(job.gpus)), partition="", partition_trials="[]")
        plan = job.plan
        if isinstance(plan, TrainingPlan):
            row.update(tp=plan.par.tp, pp=plan.par.pp, dp=plan.par.dp, iterations=len(iters),
                       iteration_time_s=float(np.mean([r.duration_s for r in iters])),
                       tflops_per_gpu=float(np.mean([r.tflops_per_gpu for r in iters])),
                       partition="/".join(map(str, plan.partition)), comms=len(plan.comms),
                       partition_trials=json.dumps([{"partition": p, "iteration_s": t}
                                                    for p, t in plan.partition_trials]),
                       **{k: float(np.mean([getattr(r, k) for r in iters])) for k in
                          ("compute_s", "tp_s", "pp_s", "dp_s", "ep_s", "bubble_s")},
                       **{f"tcp_{kind}": sum(c.tcp for c in plan.comms if c.kind == kind)
                          for kind in ("tp", "dp", "pp")})
        else:
            comms = {(c.comm, c.tcp) for c in plan.calls()}
            row.update(iterations=job.iterations, comms=len(comms),
                       iteration_time_s=(job.ended_s - job.began_s) / job.iterations)
        rows.append(row)
    df = pd.DataFrame(rows, columns=JOB_COLUMNS)
    for col in ("tp", "pp", "dp", "tcp_tp", "tcp_dp", "tcp_pp", "comms"):
        df[col] = df[col].astype("Int64")
    return df


def flows_table(result: RunResult) -> pa.Table:
    """One row per message as an Arrow table with the schema (and pandas metadata) :func:`flows_frame`
    has (empty when the spec turned flow records off).

    perf: straight from the engine's columns, no DataFrame in between (a 3,072-GPU ring's 18.9 M
    messages: DataFrame construction and its conversion to Arrow took 12 + 4 s).
    """
    cols = result.fabric.flow_columns()
    n = len(cols["flow_id"])
    if not n:  # the schema of an empty frame: its connection column holds no strings, so it has no type
        df = pd.DataFrame({k: _widened(cols[k]) for k in FLOW_COLUMNS[1:]}, columns=FLOW_COLUMNS[1:])
        df.insert(0, "run_id", result.run_id)
        return pa.Table.from_pandas(df, preserve_index=False)
    run_id = pc.take(pa.array([result.run_id], pa.large_string()), pa.array(np.zeros(n, np.int32)))
    arrays = [run_id, *(pa.array(_widened(cols[k]), FLOW_SCHEMA.field(k).type, from_pandas=True)
                        for k in FLOW_COLUMNS[1:])]
    return pa.Table.from_arrays(arrays, schema=FLOW_SCHEMA)


def flows_frame(result: RunResult) -> pd.DataFrame:
    """One row per message (empty when the spec turned flow records off)."""
    return flows_table(result).to_pandas()


def _widened(values: np.ndarray) -> np.ndarray:
    """Numbers as int64 / float64 (the engine's narrower columns widened: one schema for every run)."""
    if values.dtype.kind in "iub":
        return values.astype(np.int64, copy=False)
    return values.astype(np.float64, copy=False) if values.dtype.kind == "f" else values


def links_frame(result: RunResult) -> pd.DataFrame:
    """One row per directed link: bytes carried, busy time, mean and peak utilisation."""
    topo, fab = result.topology, result.fabric
    lt = topo.links
    names = [topo.node_name(i) for i in range(topo.graph.number_of_nodes())]
    kinds = np.array(LINK_KINDS)[lt.kind]
    horizon = max(result.sim_time_s, 1e-300)
    return pd.DataFrame({
        "run_id": result.run_id,
        "link_id": np.arange(len(lt)),
        "src": np.array(names, dtype=object)[lt.src],
        "dst": np.array(names, dtype=object)[lt.dst],
        "kind": kinds,
        "tier": [LINK_TIERS[k] for k in kinds],
        "capacity_Bps": fab.capacity_Bps,
        "bytes": fab.link_bytes,
        "busy_s": fab.link_busy_s,
        "mean_util": fab.link_bytes / (fab.capacity_Bps * horizon),
        "peak_util": fab.link_peak_util,
        "peak_offered": fab.offered_peak if fab.track_congestion else np.nan,
        "spray_peak_offered": fab.spray_offered_peak if fab.track_congestion else np.nan,
    }, columns=LINK_COLUMNS)


def link_series_frame(result: RunResult) -> pd.DataFrame:
    """Mean utilisation of every link that carried traffic, per time bin (empty when the series is off)."""
    series = result.fabric.link_series
    if series is None:
        return pd.DataFrame(columns=LINK_SERIES_COLUMNS)
    topo = result.topology
    lt = topo.links
    links, starts, util = series.utilisation(result.fabric.capacity_Bps, result.sim_time_s)
    n_bins = len(starts)
    ends = np.minimum(starts + series.width, result.sim_time_s)
    kinds = np.array(LINK_KINDS)[lt.kind[links]]
    return pd.DataFrame({
        "run_id": result.run_id,
        "link_id": np.repeat(links, n_bins),
        "src": np.repeat([topo.node_name(int(n)) for n in lt.src[links]], n_bins),
        "dst": np.repeat([topo.node_name(int(n)) for n in lt.dst[links]], n_bins),
        "kind": np.repeat(kinds, n_bins),
        "tier": np.repeat([LINK_TIERS[k] for k in kinds], n_bins),
        "t_start_s": np.tile(starts, len(links)),
        "t_end_s": np.tile(ends, len(links)),
        "util": util.reshape(-1),
    }, columns=LINK_SERIES_COLUMNS)


def _flatten(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)
    elif isinstance(value, list):
        out[prefix] = json.dumps(value)
    else:
        out[prefix] = value


def runs_frame(results: list[RunResult]) -> pd.DataFrame:
    """One row per run: every spec parameter as a column, then every metric (:data:`netsim.experiment.metrics.METRICS`)."""
    rows = []
    for r in results:
        row: dict = {"run_id": r.run_id}
        _flatten("", r.spec.model_dump(mode="json"), row)
        row.update(run_metrics(r))
        rows.append(row)
    return pd.DataFrame(rows)


def result_tables(result: RunResult) -> dict[str, pd.DataFrame]:
    """Every table of one run, by name (``runs``, ``collectives``, ``flows``, ``links``, ``jobs``, ``iterations``)."""
    return {name: t.to_pandas() if isinstance(t, pa.Table) else t for name, t in _tables(result).items()}


def _tables(result: RunResult) -> dict[str, pd.DataFrame | pa.Table]:
    """:func:`result_tables`, flows as an Arrow table (perf: the large one never becomes a DataFrame)."""
    tables = {"runs": runs_frame([result]), "collectives": collectives_frame(result),
              "flows": flows_table(result), "links": links_frame(result), "jobs": jobs_frame(result),
              "iterations": iterations_frame(result), "link_series": link_series_frame(result)}
    for name in EXTRA_TABLES:  # a trace-driven cluster run (netsim.cluster.sim), per-fault costs
        if name in result.extra:
            tables[name] = result.extra[name]
    return tables


def run_manifest(results: list[RunResult]) -> dict:
    """The manifest of a results directory holding ``results`` (``status`` and ``files`` are added
    when it is committed, see :class:`~netsim.experiment.outdir.Staging`)."""
    first = results[0]
    return {
        "name": first.spec.name,
        "kind": "run",
        "netsim_version": netsim.__version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "config_hash": spec_hash(first.spec),
        "seed": first.spec.seed,
        "wall_s": sum(r.wall_s for r in results),
        "runs": [{"run_id": r.run_id, "seed": r.spec.seed, "wall_s": r.wall_s,
                  "topology": r.topology.describe(),
                  **({"stragglers": r.extra["stragglers"]} if "stragglers" in r.extra else {})} for r in results],
        "spec": first.spec.model_dump(mode="json"),
    }


def check_finite(name: str, df: pd.DataFrame | pa.Table) -> None:
    """CORRECTNESS: no table holds an infinity (a value that is not applicable is missing, never inf)."""
    for col in df.column_names if isinstance(df, pa.Table) else df.columns:
        values = df[col]
        if isinstance(values, pa.ChunkedArray):
            infinite = pa.types.is_floating(values.type) and pc.any(pc.is_inf(values)).as_py()
        else:
            infinite = values.dtype.kind == "f" and np.isinf(values.to_numpy()).any()
        if infinite:
            raise NetsimError(f"internal error: {name}.{col} holds an infinite value; nothing was written "
                              "(please report it with the experiment file)")


def write_tables(results: list[RunResult], directory: Path) -> None:
    """Every table of ``results`` as Parquet files in ``directory``."""
    tables = [_tables(r) for r in results]
    for name in dict.fromkeys(n for t in tables for n in t):
        parts = [t[name] for t in tables if name in t]
        path = directory / f"{name}.parquet"
        if len(parts) == 1 and isinstance(parts[0], pa.Table):  # perf: what to_parquet writes, without pandas
            check_finite(name, parts[0])
            pq.write_table(parts[0], path)
            continue
        parts = [t.to_pandas() if isinstance(t, pa.Table) else t for t in parts]
        df = parts[0] if len(parts) == 1 else pd.concat(parts)  # perf: one run's table as it is
        check_finite(name, df)
        df.to_parquet(path, index=False)


def write_results(results: list[RunResult], out_dir: str | Path, manifest_extra: dict | None = None, *,
                  force: bool = False, finish: Callable[[Path], None] | None = None) -> Path:
    """Write a run's results directory: built in a hidden temporary sibling, then moved into place,
    the manifest last (``status: complete``).

    ``out_dir`` must not exist, be empty, or (with ``force``) be a netsim results directory, whose
    files netsim wrote are then replaced; files the user added there are kept (see
    :mod:`netsim.experiment.outdir`). ``finish(staging_dir)`` may add files (the report) before
    the commit. Raises :class:`~netsim.experiment.outdir.OutputError` when netsim may not write there.
    """
    out_dir = Path(out_dir)
    staging = Staging(out_dir, claim(out_dir, "run", force=force))
    try:
        manifest = {**run_manifest(results), **(manifest_extra or {})}
        try:
            write_tables(results, staging.path)
            write_manifest(staging.path, {**manifest, "status": "writing"})
        except OSError as exc:
            raise os_error(exc, "write results to", out_dir) from None
        if finish is not None:
            finish(staging.path)
        return staging.commit(manifest)
    except BaseException:
        staging.abort()
        raise


def read_table(path: str | Path, columns: list[str] | None = None,
               categories: list[str] | None = None) -> pd.DataFrame:
    """One Parquet table of a results directory (only ``columns``, when given; ``categories``: string
    columns read as categoricals, cheap for a repeated value); NetsimError naming the file when it is
    missing or damaged."""
    path = Path(path)
    try:
        dictionary = {"read_dictionary": categories} if categories else {}
        return pd.read_parquet(path, columns=columns, **dictionary)
    except FileNotFoundError:
        raise NetsimError(f"{path} is missing: the results directory is incomplete") from None
    except (OSError, ValueError, pa.ArrowException) as exc:  # ArrowInvalid is a ValueError; IO errors OSErrors
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise NetsimError(f"{path} cannot be read ({first}): the "
                          "results directory is damaged; run the experiment again (a sweep: --resume redoes "
                          "damaged runs)") from None


def read_results(out_dir: str | Path, tables: tuple[str, ...] | None = None) -> dict[str, pd.DataFrame]:
    """Load a results directory's tables (``runs``, ``collectives``, ``flows``, ``links``, ``jobs``,
    ``iterations``, ``link_series``; the last three are absent from older directories), or only those
    named in ``tables`` (perf: flows.parquet may hold millions of rows).

    Raises NetsimError naming a table that is missing or cannot be read."""
    out_dir = Path(out_dir)
    return {name.removesuffix(".parquet"): read_table(out_dir / name) for name in RESULT_FILES
            if (tables is None or name.removesuffix(".parquet") in tables)
            and (name not in OPTIONAL_FILES or (out_dir / name).exists())}

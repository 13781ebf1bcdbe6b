"""The files an experiment's runs read, checked before the first run starts.

A run reads its experiment file and, depending on what it names, a route table
(``routing: {type: table, file: ...}``), a job trace (``cluster.trace``), a Chakra trace or a saved
schedule (``workload: {type: chakra|schedule, path: ...}``) and MoE routing matrices
(``workload.moe.routing: {type: file, path: ...}``). A bad one of these must stop an experiment
the way a bad experiment file does (one error, exit 2, no results directory), not fail one run of
a sweep after others were written. :func:`check_input_files` reads each distinct file once, with
the reader the run uses and the parameters it checks against (the fabric's size, the job's ranks,
the expert-parallel degree), so a file that passes here reads the same in the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from netsim.config import ExperimentSpec
from netsim.config.trace_specs import ChakraWorkload, ScheduleWorkload
from netsim.errors import ConfigError


def _topology_key(spec: ExperimentSpec) -> str:
    return json.dumps(spec.topology.model_dump(mode="json"), sort_keys=True, default=str)


def file_reads(spec: ExperimentSpec) -> list[tuple[tuple, str, Callable[[], object]]]:
    """``(key, YAML path, read)`` for every input file ``spec``'s run reads: ``read()`` reads and checks
    it as the run will (raising ConfigError), and equal keys read the same file the same way (the
    route table and the job trace are checked against the fabric, built once per spec and only if
    needed)."""
    from netsim.experiment.run import build_topology

    reads: list[tuple[tuple, str, Callable[[], object]]] = []
    topo_key = _topology_key(spec)
    built: dict[str, object] = {}

    def topology():
        if "t" not in built:
            built["t"] = build_topology(spec)
        return built["t"]

    options = spec.routing.options or {}
    if spec.routing.type == "table" and isinstance(options.get("file"), str):
        from netsim.routing.table import read_table
        file = options["file"]
        reads.append((("routes", file, topo_key), "routing.file", lambda: read_table(file, topology())))
    if spec.cluster is not None:
        from netsim.cluster.trace import read_trace as read_jobs
        path = spec.cluster.trace
        reads.append((("jobs", path, topo_key), "cluster.trace",
                      lambda: read_jobs(path, max_gpus=topology().n_gpus)))
        return reads
    for i, job in enumerate(spec.job_specs()):
        at = f"jobs.{i}.workload" if spec.jobs else "workload"
        reads.extend(_workload_reads(job.workload, at))
    return reads


def _workload_reads(workload, at: str) -> Iterable[tuple[tuple, str, Callable[[], object]]]:
    """The file reads of one job's workload."""
    if isinstance(workload, ChakraWorkload):
        from netsim.workload.chakra import check_trace_files
        w = workload
        key = ("chakra", w.path, w.ranks, json.dumps(w.groups, sort_keys=True), w.ops_per_s,
               json.dumps(w.algorithms, sort_keys=True), w.channels)
        yield key, f"{at}.path", lambda: check_trace_files(w.path, w.ranks, groups=w.groups, ops_per_s=w.ops_per_s,
                                                           algorithms=w.algorithms, channels=w.channels)
    elif isinstance(workload, ScheduleWorkload):
        from netsim.engine.schedule_io import read_schedule
        path, ranks = workload.path, workload.ranks
        yield ("schedule", path, ranks), f"{at}.path", lambda: read_schedule(path, n_ranks=ranks)
    moe = getattr(workload, "moe", None)
    routing = getattr(moe, "routing", None)
    if routing is not None and getattr(routing, "type", None) == "file":
        from netsim.workload.moe import read_picks
        path, ep = routing.path, moe.ep
        model = getattr(workload, "model", None)
        per_rank = (model.micro_batch * model.seq_len * moe.top_k
                    if all(hasattr(model, k) for k in ("micro_batch", "seq_len")) else None)
        yield (("moe", path, ep, per_rank), f"{at}.moe.routing.path",
               lambda: read_picks(path, ep, f"{at}.moe.routing.path", picks_per_rank=per_rank))


def check_input_files(specs: Iterable[ExperimentSpec]) -> int:
    """Read and check every input file the runs of ``specs`` read, each distinct one once; raises the
    first file's ConfigError (at the YAML path that names the file). Returns how many files were read."""
    seen: set[tuple] = set()
    for spec in specs:
        for key, where, read in file_reads(spec):
            if key in seen:
                continue
            seen.add(key)
            try:
                read()
            except ConfigError as exc:
                # at the YAML path that names the file (the experiment's line is added when reported), the
                # reader's place in the file (file:line, file: row N, column) kept in the message, as a run says
                raise ConfigError(exc.format() if exc.file else exc.message, where if exc.file else exc.path or where) \
                    from None
    return len(seen)

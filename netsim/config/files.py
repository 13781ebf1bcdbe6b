"""Files an experiment refers to (a topology or workload by name or path) and errors located in them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from netsim.config.validation import _yaml_line
from netsim.config.yamlread import _a, _parse_yaml, _read_yaml, read_text
from netsim.errors import ConfigError, shorten


def locate(error: ConfigError, file: str | Path) -> ConfigError:
    """``error`` with ``file`` and the line of its YAML path filled in (for errors found after loading)."""
    if error.file:
        return error
    line = None
    if error.path:
        try:
            root, _ = _parse_yaml(read_text(file), str(file))
            line = _yaml_line(root, tuple(error.path.split(".")))
        except (ConfigError, yaml.YAMLError):
            pass
    return ConfigError(error.message, error.path, str(file), line)


#: What each kind of YAML file holds at its top level (for "expected ..." messages).
_EXPERIMENT = "a mapping of experiment keys (name, topology, workload, ...)"
_TOPOLOGY = "a mapping with a 'type' (a topology)"
_WORKLOAD = "a mapping with a 'type' (a workload)"


def _referenced(name: str, experiment: Path, what: str, path: str, hint: str) -> Path:
    """The file a YAML value names, looked up next to the experiment, then from the cwd."""
    if not name.strip() or "\0" in name or len(name) > 4096:
        raise ConfigError(f"expected the name of a {what}, got {shorten(name)}", path, str(experiment))
    candidates = (experiment.parent / name, Path(name))
    for candidate in candidates:
        try:
            if candidate.is_file():
                return candidate
        except OSError:  # a name too long for the file system
            continue
    for candidate in candidates:
        try:
            if candidate.exists():
                kind = "a directory" if candidate.is_dir() else "not a regular file"
                raise ConfigError(f"{what} {shorten(name)} is {kind} ({candidate})", path, str(experiment))
        except OSError:
            continue
    raise ConfigError(f"{what} {shorten(name)} not found (looked next to the experiment and in the current "
                      f"directory); {hint}", path, str(experiment))


def _load_topology_file(name: str, experiment: Path) -> dict:
    """A ``topology: FILE.yaml`` reference: looked up next to the experiment, then from the cwd."""
    return _section_file(name, experiment, "topology", "topology", _TOPOLOGY,
                         "give a mapping with 'type' or the path of a topologies/*.yaml file")


def _section_file(name: str, experiment: Path, section: str, path: str, kind: str, hint: str) -> dict:
    """The mapping a referenced ``topology``/``workload`` file holds (at its top or under ``section``)."""
    file = _referenced(name, experiment, f"{section} file", path, hint)
    root, data = _read_yaml(file, kind)
    data = data.get(section, data)
    if not isinstance(data, dict):
        raise ConfigError(f"expected {kind} under '{section}', got {_a(data)}",
                          section, str(file), _yaml_line(root, (section,)))
    return data


def _deep_merge(base: Any, over: Any) -> Any:
    """``over`` laid on ``base``: mappings merge key by key, anything else replaces."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = _deep_merge(base.get(key), value) if key in base else value
        return out
    return over


def _load_workload_file(value: Any, experiment: Path, path: str) -> Any:
    """Resolve ``workload: FILE.yaml`` and ``workload: {from: FILE.yaml, ...overrides}`` (deep-merged).

    Files (``workloads/gpt-7.5b.yaml``) are looked up next to the experiment, then from the cwd.
    """
    if isinstance(value, str):
        name, over = value, {}
    elif isinstance(value, dict) and "from" in value:
        name, over = value["from"], {k: v for k, v in value.items() if k != "from"}
        if not isinstance(name, str):
            raise ConfigError(f"'from' names a workload file (workloads/gpt-7.5b.yaml), got {shorten(name)}",
                              f"{path}.from",
                              str(experiment))
    else:
        return value
    data = _section_file(name, experiment, "workload", path, _WORKLOAD,
                         "give a mapping with 'type', a workloads/*.yaml file, or {from: FILE, ...}")
    return _deep_merge(data, over)


def _resolve_files(data: Any, path: Path) -> Any:
    """Replace topology and workload file references (``topology: FILE``, ``workload: FILE`` or
    ``{from: FILE, ...}``, the same in each job) by the files' contents."""
    if not isinstance(data, dict):
        return data
    topo = data.get("topology")
    if isinstance(topo, str):
        data["topology"] = _load_topology_file(topo, path)
    elif isinstance(topo, dict) and isinstance(topo.get("from"), str):
        data["topology"] = _deep_merge(_load_topology_file(topo["from"], path),
                                       {k: v for k, v in topo.items() if k != "from"})
    if "workload" in data:
        data["workload"] = _load_workload_file(data["workload"], path, "workload")
    if isinstance(data.get("jobs"), list):
        for i, job in enumerate(data["jobs"]):
            if isinstance(job, dict) and "workload" in job:
                job["workload"] = _load_workload_file(job["workload"], path, f"jobs.{i}.workload")
    jobs = data["jobs"] if isinstance(data.get("jobs"), list) else []
    for workload in [data.get("workload")] + [j.get("workload") for j in jobs if isinstance(j, dict)]:
        if isinstance(workload, dict) and workload.get("type") in ("chakra", "schedule") \
                and isinstance(workload.get("path"), str) and workload["path"].strip():
            workload["path"] = str((path.parent / workload["path"]).absolute())  # relative to the experiment
    for workload in [data.get("workload")] + [j.get("workload") for j in jobs if isinstance(j, dict)]:
        experts = workload.get("moe") if isinstance(workload, dict) else None
        picks = experts.get("routing") if isinstance(experts, dict) else None
        if isinstance(picks, dict) and isinstance(picks.get("path"), str) and picks["path"].strip():
            picks["path"] = str((path.parent / picks["path"]).absolute())  # an MoE routing matrix file
    cluster = data.get("cluster")
    if isinstance(cluster, dict) and isinstance(cluster.get("trace"), str) and cluster["trace"].strip():
        cluster["trace"] = str((path.parent / cluster["trace"]).absolute())  # a job trace
    routing = data.get("routing")
    if isinstance(routing, dict) and routing.get("type") == "table" and isinstance(routing.get("file"), str):
        routing["file"] = str((path.parent / routing["file"]).absolute())  # relative to the experiment
    return data



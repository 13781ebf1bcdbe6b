"""An experiment file with its sweep (variants, grid, seeds, repeats) expanded into runs: :func:`load_experiment`, :func:`load_spec`."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)

from netsim.config.files import _EXPERIMENT, _TOPOLOGY, _resolve_files
from netsim.config.overrides import apply_overrides, parse_assignment, parse_param, set_dotted
from netsim.config.specs import SWEEP_KEYS, ExperimentSpec, TopologySpec
from netsim.config.validation import _clean_loc, _fields_at, _message, _yaml_line, parse_spec
from netsim.config.yamlread import _read_yaml
from netsim.errors import ConfigError, shorten
from netsim.spectypes import (
    MAX_SEED,
    NAME_PATTERN,
    NAME_RULE,
    _Spec,
)

#: Most runs one experiment file may expand to (variants x grid points x seeds): each is a spec held
#: in memory before the first runs, so a grid of a few long axes must fail here, not exhaust memory.
MAX_RUNS = 100_000


@dataclass
class ExperimentFile:
    """An experiment file split into its base spec (as data) and its sweep: what ``expand`` needs.

    ``axes`` are the grid's axes: each a tuple of dotted keys (several for a ``zip`` group) and the
    list of value tuples they take together. ``variants`` are the partial overrides, each with its
    ``name``. ``seeds`` or ``repeats`` give the seeds (neither: the base ``seed``).
    """

    path: Path
    root: Any
    base: dict
    overrides: list[str] = field(default_factory=list)
    variants: list[dict] = field(default_factory=list)
    axes: list[tuple[tuple[str, ...], list[tuple]]] = field(default_factory=list)
    seeds: list[int] | None = None
    repeats: int | None = None
    name: str = ""  #: the experiment's name (after --set) when it is a valid name, else "" (see results_name)

    def results_name(self) -> str:
        """The experiment's name, which names its results directory (``results/NAME``); ConfigError
        (at ``name``) when it is missing or not a name."""
        # CORRECTNESS: the name becomes a path before any run is validated: it must be a name
        if self.name:
            return self.name
        given = self.base.get("name")
        raise ConfigError(f"expected {NAME_RULE}, got {shorten(given)}" if given is not None else
                          "required key is missing (the experiment's name names its results directory, "
                          "results/NAME)", "name", str(self.path), self.line("name") or 1)

    @property
    def is_sweep(self) -> bool:
        """True when the file expands to more than its base spec (variants, axes, seeds or repeats)."""
        return bool(self.variants or self.axes or self.seeds is not None or self.repeats is not None)

    def line(self, path: str, exact: bool = False) -> int | None:
        """Line of a dotted path in the file (of its nearest ancestor; None when ``exact`` and absent)."""
        return _yaml_line(self.root, tuple(path.split(".")), exact) if self.root is not None and path else None


def _sweep_error(message: str, path: str, exp: Path, root: Any) -> ConfigError:
    return ConfigError(message, path, str(exp), _yaml_line(root, tuple(path.split("."))) if root else None)


def _axis_values(value: Any, path: str, exp: Path, root: Any) -> list:
    if not isinstance(value, list) or not value:
        raise _sweep_error(f"expected a non-empty list of values, got {shorten(value)}", path, exp, root)
    return value


def load_experiment(path: str | Path, overrides: list[str] | None = None,
                    params: list[str] | None = None) -> ExperimentFile:
    """Read an experiment file that may hold ``variants``, ``sweep``, ``seeds`` or ``repeats``.

    ``overrides`` (``--set KEY=V``) apply to every run, after the variant and the sweep point.
    ``params`` (``--param KEY=VALUE``, see :func:`parse_param`) add a grid axis or replace the file's
    axis of that key.
    The structure is checked here (ConfigError with file and line); each run's spec is validated
    when the sweep is expanded.
    """
    path = Path(path)
    where = str(path)
    root, data = _read_yaml(path, _EXPERIMENT)
    raw = {k: data.pop(k) for k in SWEEP_KEYS if k in data}
    exp = ExperimentFile(path, root, _resolve_files(data, path), list(overrides or []))
    variants = raw.get("variants", [])
    if not isinstance(variants, list):
        raise _sweep_error("expected a list of variants, each {name: NAME, <keys to override>}", "variants", path,
                           root)
    names: list[str] = []
    for i, v in enumerate(variants):
        if not isinstance(v, dict) or "name" not in v:
            raise _sweep_error("a variant is a mapping with a name and the keys it overrides, e.g. "
                               "{name: c4p, routing: c4p}", f"variants.{i}", path, root)
        if not isinstance(v["name"], str) or not NAME_PATTERN.fullmatch(v["name"]):
            raise _sweep_error(f"expected {NAME_RULE}, got {shorten(v['name'])}", f"variants.{i}.name", path,
                               root)
        if v["name"] in names:
            raise _sweep_error(f"variant name {shorten(v['name'])} used twice", f"variants.{i}.name", path,
                               root)
        if set(v) & set(SWEEP_KEYS):
            raise _sweep_error(f"a variant cannot hold {', '.join(sorted(set(v) & set(SWEEP_KEYS)))}",
                               f"variants.{i}", path, root)
        names.append(v["name"])
    exp.variants = [dict(v) for v in variants]
    sweep = raw.get("sweep", {})
    if not isinstance(sweep, dict):
        raise _sweep_error("expected a mapping of dotted keys to lists of values "
                           "(workload.size: [1MiB, 16MiB]), with an optional zip: group", "sweep", path, root)
    axes: dict[tuple[str, ...], list[tuple]] = {}
    for key, value in sweep.items():
        if key == "zip":
            groups = value if isinstance(value, list) else [value]
            for g, group in enumerate(groups):
                at = "sweep.zip" if not isinstance(value, list) else f"sweep.zip.{g}"
                if not isinstance(group, dict) or not group:
                    raise _sweep_error("zip: a mapping of dotted keys to equally long lists of values",
                                       at, path, root)
                cols = {k: _axis_values(v, f"{at}.{k}", path, root) for k, v in group.items()}
                lengths = {len(v) for v in cols.values()}
                if len(lengths) > 1:
                    raise _sweep_error(f"zipped keys need lists of one length, got "
                                       f"{', '.join(f'{k}: {len(v)}' for k, v in cols.items())}", at, path, root)
                axes[tuple(cols)] = list(zip(*cols.values()))
        else:
            axes[(str(key),)] = [(v,) for v in _axis_values(value, f"sweep.{key}", path, root)]
    for item in params or []:
        key, values = parse_param(item)
        group = next((ks for ks in axes if key in ks), None)
        if group is not None and len(group) > 1:  # a zipped key: replace its column, keep the pairing
            if len(values) != len(axes[group]):
                others = ", ".join(k for k in group if k != key)
                raise ConfigError(f"--param {key}: the file zips it with {others} ({len(axes[group])} values "
                                  f"each); give {len(axes[group])} values to keep the pairing")
            col = group.index(key)
            axes[group] = [t[:col] + (v,) + t[col + 1:] for t, v in zip(axes[group], values)]
        else:
            axes.pop((key,), None)
            axes[(key,)] = [(v,) for v in values]
    for item in exp.overrides:  # --set: well formed, settable, and it wins over a swept key
        key, value = parse_assignment(item, "--set")
        try:
            set_dotted(copy.deepcopy(exp.base), key, value)
        except ConfigError as exc:
            raise ConfigError(exc.message, exc.path, where) from None
        for ks in list(axes):
            if key in ks:
                col = ks.index(key)
                rest = tuple(k for k in ks if k != key)
                values_ = axes.pop(ks)
                if rest:
                    kept: dict[str, tuple] = {}
                    for t in values_:
                        kept.setdefault(repr(t[:col] + t[col + 1:]), t[:col] + t[col + 1:])
                    axes[rest] = list(kept.values())
    keys = [k for ks in axes for k in ks]
    for key in keys:
        if key.split(".")[0] in SWEEP_KEYS or key == "variant":
            raise _sweep_error(f"{key} cannot be swept", "sweep", path, root)
        if keys.count(key) > 1:
            raise _sweep_error(f"{key} is swept twice (a plain axis and a zip group?)", "sweep", path, root)
    exp.axes = list(axes.items())
    seeds, repeats = raw.get("seeds"), raw.get("repeats")
    if seeds is not None and repeats is not None:
        raise _sweep_error("give seeds (a list) or repeats (a count), not both", "repeats", path, root)
    if seeds is not None and (not isinstance(seeds, list) or not seeds or len(set(map(str, seeds))) != len(seeds)
                              or not all(_is_seed(x) for x in seeds)):
        raise _sweep_error(f"seeds: a list of distinct integers from 0 to 2**63 - 1, got {shorten(seeds)}",
                           "seeds", path, root)
    if repeats is not None and (not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats
                                <= 100_000):
        raise _sweep_error(f"repeats: a count of runs per point with derived seeds (1..100000), got "
                           f"{shorten(repeats)}",
                           "repeats", path, root)
    if (seeds is not None or repeats is not None) and "seed" in keys:
        raise _sweep_error("seed is swept and seeds/repeats are given: use one of them", "sweep", path, root)
    if repeats is not None:  # the base seed repeats derive theirs from: the file's, a variant's or --set's
        bases = [("seed", exp.base.get("seed", 0), "")]
        bases += [(f"variants.{i}.seed", v["seed"], "") for i, v in enumerate(exp.variants) if "seed" in v]
        for item in exp.overrides:
            key, value = parse_assignment(item, "--set")
            if key == "seed":
                bases.append(("seed", value, " (from --set)"))
        for at, value, source in bases:
            if not _is_seed(value):
                raise _sweep_error(f"the base seed of repeats must be an integer from 0 to 2**63 - 1, got "
                                   f"{shorten(value)}{source}", at, path, root)
    exp.seeds, exp.repeats = seeds, repeats
    name = exp.base.get("name")
    for item in exp.overrides:
        key, value = parse_assignment(item, "--set")
        if key == "name":
            name = value
    exp.name = name if isinstance(name, str) and NAME_PATTERN.fullmatch(name) else ""
    if any(key == "name" for ks, _ in exp.axes for key in ks):
        raise _sweep_error("name cannot be swept: it names the sweep's results directory", "sweep", path, root)
    runs = max(len(exp.variants), 1) * math.prod(len(values) for _, values in exp.axes) * len(seeds or [0]) \
        * (repeats or 1)
    if runs > MAX_RUNS:
        at = "sweep" if exp.axes else "repeats" if repeats else "seeds" if seeds else "variants"
        raise _sweep_error(f"the sweep expands to {runs:,} runs (variants x grid points x seeds); at most "
                           f"{MAX_RUNS:,}", at, path, root)
    return exp


def _is_seed(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED


def load_spec(path: str | Path, overrides: list[str] | None = None) -> ExperimentSpec:
    """Read an experiment YAML file, apply ``--set`` overrides, and validate it.

    Examples
    --------
    >>> spec = load_spec("experiments/ring-allreduce.yaml", ["workload.size=1GiB"])  # doctest: +SKIP
    """
    path = Path(path)
    where = str(path)
    root, data = _read_yaml(path, _EXPERIMENT)
    if set(data) & set(SWEEP_KEYS):
        keys = ", ".join(sorted(set(data) & set(SWEEP_KEYS)))
        raise ConfigError(f"this file is a sweep ({keys}): run it with `netsim sweep` or `netsim run`, or load it "
                          "with netsim.config.load_experiment", "", where)
    data = _resolve_files(data, path)
    overridden: frozenset[str] = frozenset()
    if overrides:
        try:
            data, overridden = apply_overrides(data, overrides)
        except ConfigError as exc:
            raise ConfigError(exc.message, exc.path, where) from None
        data = _resolve_files(data, path)
    return parse_spec(data, file=where, root=root, overridden=overridden)


class _TopologyFile(_Spec):
    topology: TopologySpec


def load_topology(path: str | Path):
    """The topology spec of a topology file (``topologies/*.yaml``) or of an experiment file.

    Examples
    --------
    >>> load_topology("topologies/frontier-mini.yaml").groups  # doctest: +SKIP
    8
    """
    path = Path(path)
    root, data = _read_yaml(path, _TOPOLOGY)
    if "topology" in data:  # an experiment file
        return load_spec(path).topology
    try:
        return _TopologyFile.model_validate({"topology": data}).topology
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = _clean_loc(err["loc"])[1:]
        sub = ".".join(str(p) for p in loc)
        fields = _fields_at(("topology", *loc)) if err["type"] == "extra_forbidden" else None
        line = _yaml_line(root, loc) if loc else None
        raise ConfigError(_message(err, fields), sub, str(path), line) from None

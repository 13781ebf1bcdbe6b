"""The training presets a job trace names (``workloads/*.yaml`` by file stem) and the rules that turn a
job's GPU count into a model and a runnable parallelism (used by the converters and the generator)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from netsim.errors import ConfigError, shorten

#: The repository's ready-made workloads (present in a source checkout).
REPO_WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"

#: Default model by job size, the converters' and the generator's rule: the first class whose GPU
#: bound holds the job (bigger jobs train bigger models, as in the clusters the traces come from).
SIZE_CLASSES: tuple[tuple[int, str], ...] = (
    (8, "gpt-3.6b"), (32, "gpt-7.5b"), (128, "gpt-22b"), (512, "gpt-39.1b"), (2**62, "gpt-175b"))


@dataclass(frozen=True)
class Preset:
    """What the trace layer needs to know of a training preset (the rest is the simulator's business).

    Attributes
    ----------
    name, path:
        File stem (the name a trace uses) and the file.
    layers, heads, global_batch, micro_batch:
        The model's; ``None`` when the file does not say.
    tp, pp:
        The preset's own tensor and pipeline sizes: upper bounds for :func:`parallelism_for`.
    experts, ep:
        A mixture-of-experts preset's routed experts and expert-parallel size (its ``moe`` section);
        ``None`` for a dense model.
    """

    name: str
    path: Path
    layers: int | None
    heads: int | None
    global_batch: int | None
    micro_batch: int
    tp: int
    pp: int
    experts: int | None = None
    ep: int | None = None

    @property
    def is_moe(self) -> bool:
        """Whether the preset has mixture-of-experts layers (a ``moe`` section)."""
        return self.experts is not None


def search_dirs(trace: str | Path | None = None) -> tuple[Path, ...]:
    """Where presets are looked up, first match wins: next to the trace (the trace's directory and its
    ``workloads/``), then ``./workloads`` and the repository's ``workloads/``."""
    dirs = []
    if trace is not None:
        here = Path(trace).parent
        dirs += [here, here / "workloads"]
    dirs += [Path("workloads"), REPO_WORKLOADS]
    seen, out = set(), []
    for d in dirs:
        key = str(d.absolute())
        if key not in seen:
            seen.add(key)
            out.append(d)
    return tuple(out)


def known_presets(dirs: Iterable[Path]) -> list[str]:
    """The names of the ``*.yaml`` files in the ``workloads`` directories of ``dirs`` (for messages)."""
    names = set()
    for d in dirs:
        if d.name == "workloads" and d.is_dir():
            names.update(p.stem for p in d.glob("*.yaml"))
    return sorted(names)


class PresetCache:
    """Presets loaded once per trace: ``cache.get("gpt-7.5b")`` is a :class:`Preset` or ``None`` (not found).

    Raises ConfigError (naming the preset file) for a file that is not a training workload.
    """

    def __init__(self, dirs: Sequence[Path]):
        self.dirs = tuple(dirs)
        self._loaded: dict[str, Preset | None] = {}

    def get(self, name: str) -> Preset | None:
        if name not in self._loaded:
            self._loaded[name] = self._load(name)
        return self._loaded[name]

    def names(self) -> list[str]:
        return known_presets(self.dirs)

    def _load(self, name: str) -> Preset | None:
        if not name or "/" in name or "\\" in name or name.startswith("."):
            return None
        for d in self.dirs:
            path = d / f"{name}.yaml"
            try:
                found = path.is_file()
            except OSError:  # a name the file system refuses (too long, ...): no such preset
                continue
            if found:
                return _read_preset(name, path)
        return None


def _read_preset(name: str, path: Path) -> Preset:
    """The :class:`Preset` of a workload file; ConfigError when it is not a training workload."""
    from netsim.config import _read_yaml
    _, data = _read_yaml(path, "a mapping with 'type' (a workload)")
    data = data.get("workload", data)
    if not isinstance(data, dict) or data.get("type") != "training" or not isinstance(data.get("model"), dict):
        raise ConfigError(f"model {shorten(name)} names {path}, which is not a training workload "
                          f"(type: training with a model)", "", str(path))
    model, par = data["model"], data.get("parallelism") or {}
    moe = data.get("moe") if isinstance(data.get("moe"), dict) else None

    def num(mapping: dict, key: str, default: int | None) -> int | None:
        value = mapping.get(key, default)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else default
    return Preset(name, path, num(model, "layers", None), num(model, "heads", None),
                  num(model, "global_batch", None), num(model, "micro_batch", 1) or 1,
                  num(par, "tp", 1) or 1, num(par, "pp", 1) or 1,
                  num(moe, "experts", None) if moe else None, num(moe, "ep", 1) if moe else None)


def model_for_gpus(gpus: int, classes: Sequence[tuple[int, str]] = SIZE_CLASSES) -> str:
    """The model of a job of ``gpus`` GPUs: the first size class whose bound is at least ``gpus``.

    Examples
    --------
    >>> model_for_gpus(8), model_for_gpus(64), model_for_gpus(4096)
    ('gpt-3.6b', 'gpt-22b', 'gpt-175b')
    """
    for bound, model in classes:
        if gpus <= bound:
            return model
    return classes[-1][1]


def _largest_divisor(n: int, limit: int, also: int | None = None) -> int:
    """The largest divisor of ``n`` at most ``limit`` (that divides ``also`` too, when given)."""
    best = 1
    for d in range(1, min(n, limit) + 1):
        if n % d == 0 and (also is None or also % d == 0):
            best = d
    return best


def parallelism_for(gpus: int, preset: Preset, gpus_per_host: int = 8) -> tuple[int, int, int]:
    """A runnable ``(tp, pp, dp)`` for ``preset`` on ``gpus`` GPUs, the product being ``gpus``.

    Tensor parallelism stays within a host and divides the attention heads (at most the preset's tp),
    pipeline parallelism divides the model's layers (at most the preset's pp; when the preset's own pp
    leaves uneven stages, any pp up to it), data parallelism is the rest: the Megatron recipe of
    filling a node with TP first.

    Examples
    --------
    >>> p = Preset("gpt-175b", Path("gpt-175b.yaml"), 96, 96, 256, 1, tp=8, pp=16)
    >>> parallelism_for(128, p), parallelism_for(1024, p), parallelism_for(3, p)
    ((8, 16, 1), (8, 16, 8), (3, 1, 1))
    """
    tp = _largest_divisor(gpus, min(preset.tp, gpus_per_host), preset.heads)
    rest = gpus // tp
    layers = preset.layers
    # a preset whose own pp leaves stages uneven (DeepSeek-V3: 61 layers, pp 16) accepts any pp
    even = layers is not None and layers % preset.pp == 0
    pp = _largest_divisor(rest, min(preset.pp, layers or preset.pp), layers if even else None)
    return tp, pp, rest // pp


def ep_for(preset: Preset, dp: int) -> int | None:
    """The expert-parallel size of a MoE ``preset`` with ``dp`` data-parallel replicas: the largest
    divisor of ``dp`` that divides the experts, at most the preset's ``ep`` (``None`` for a dense model).

    Examples
    --------
    >>> p = Preset("moe", Path("moe.yaml"), 32, 32, 64, 1, tp=1, pp=4, experts=8, ep=8)
    >>> ep_for(p, 16), ep_for(p, 6)
    (8, 2)
    """
    if not preset.is_moe:
        return None
    return _largest_divisor(dp, preset.ep or 1, preset.experts)


def global_batch_for(preset: Preset, dp: int, micro_batch: int | None = None) -> int | None:
    """The preset's global batch when ``micro_batch x dp`` divides it, else the next multiple (an
    override for the trace's ``global_batch`` column); ``None`` when the preset's batch already fits."""
    if preset.global_batch is None:
        return None
    step = (micro_batch or preset.micro_batch) * dp
    if preset.global_batch % step == 0:
        return None
    return -(-preset.global_batch // step) * step


#: The columns :func:`plan_job` fills.
PLAN_COLUMNS = ("tp", "pp", "dp", "ep", "global_batch")


def plan_job(gpus: int, preset: Preset, gpus_per_host: int = 8) -> tuple[int, int, int, int | None, int | None]:
    """A runnable ``(tp, pp, dp, ep, global_batch)`` for a job of ``preset`` on ``gpus`` GPUs (the trace's
    columns): :func:`parallelism_for`, :func:`ep_for` (MoE presets) and :func:`global_batch_for`."""
    tp, pp, dp = parallelism_for(gpus, preset, gpus_per_host)
    return tp, pp, dp, ep_for(preset, dp), global_batch_for(preset, dp)

"""What a results directory holds, for people: the last step of the pipeline read back (``netsim show``).

:func:`overview` reads the manifest and ``runs.parquet`` of any results directory (a run or a sweep,
finished, interrupted or stopped mid-way) into an :class:`Overview`: what was run, its state, its
variants and axes, and the headline metrics per variant and swept point with their titles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from netsim.errors import NetsimError
from netsim.experiment.metrics import METRICS
from netsim.experiment.outdir import inspect


@dataclass(frozen=True)
class Overview:
    """A results directory in a few lines (see :func:`overview`)."""

    directory: Path
    kind: str                    #: ``run`` or ``sweep``
    name: str
    status: str                  #: ``complete``, ``interrupted``, or what the manifest says
    created: str
    version: str                 #: netsim version that wrote it
    experiment: str              #: the experiment file of a sweep ("" for a single run)
    what: str                    #: fabric, routing, placement, workload of the (first) run
    counts: dict[str, int]       #: planned, ok, failed, missing
    variants: list[str]
    axes: list[str]              #: swept keys (zipped ones joined by " + ")
    table: pd.DataFrame | None   #: per group: keys, runs, failed, and each headline metric's mean
    keys: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    report: Path | None = None   #: report.html when there is one
    failures: list[str] = field(default_factory=list)  #: ``run ID: error`` of the first failed runs

    @property
    def finished(self) -> bool:
        """Whether every planned run is there (nothing missing)."""
        return self.status == "complete" and not self.counts.get("missing", 0)

    def titles(self) -> dict[str, str]:
        """Column -> title for the metrics (``METRICS`` titles, capitalised)."""
        return {m: METRICS[m].title[:1].upper() + METRICS[m].title[1:] for m in self.metrics if m in METRICS}


def overview(directory: str | Path) -> Overview:
    """Read a results directory; NetsimError (saying why) when it is not one netsim wrote.

    Examples
    --------
    >>> o = overview("results/ring-allreduce")  # doctest: +SKIP
    >>> o.kind, o.status, o.metrics[:2]  # doctest: +SKIP
    ('run', 'complete', ['collective_time_s', 'busbw_Bps'])
    """
    directory = Path(directory)
    existing = inspect(directory)
    if existing.state != "netsim":
        why = {"absent": "it does not exist", "file": "it is a file", "empty": "it is empty"}.get(
            existing.state, existing.detail or existing.state)
        raise NetsimError(f"{directory} is not a netsim results directory ({why}); give the --out directory of "
                          "`netsim run` or `netsim sweep` (results/NAME by default)")
    m = existing.manifest or {}
    kind = m.get("kind", "run")
    runs = _runs(directory)
    counts = _counts(m, runs, kind)
    table, keys, metrics = (None, [], [])
    if runs is not None and len(runs):
        from netsim.experiment.summary import summarize
        table, keys, metrics = summarize(directory)
        keys = [k for k in keys if table[k].astype(str).ne("").any()]  # a single run's empty variant
    return Overview(
        directory=directory, kind=kind, name=str(m.get("name", directory.name)),
        status=str(m.get("status", "complete")), created=str(m.get("created", "?")),
        version=str(m.get("netsim_version", "?")), experiment=str(m.get("experiment", "")),
        what=_what(m, runs), counts=counts, variants=[str(v) for v in m.get("variants", []) or []],
        axes=[" + ".join(map(str, a)) for a in m.get("axes", []) or []], table=table, keys=keys, metrics=metrics,
        report=directory / "report.html" if (directory / "report.html").is_file() else None,
        failures=[f"run {r.get('run_id', '?')}: {str(r.get('error', ''))[:300]}" for r in m.get("runs", []) or []
                  if isinstance(r, dict) and r.get("status") == "failed"][:3])


def _runs(directory: Path) -> pd.DataFrame | None:
    """``runs.parquet``, or None when the directory has none yet (a sweep stopped before its first commit)."""
    if not (directory / "runs.parquet").is_file():
        return None
    from netsim.experiment.results import read_table
    return read_table(directory / "runs.parquet")


def _counts(manifest: dict, runs: pd.DataFrame | None, kind: str) -> dict[str, int]:
    if isinstance(manifest.get("counts"), dict):
        return {k: int(v) for k, v in manifest["counts"].items() if isinstance(v, int)}
    ok = 0 if runs is None else len(runs)
    return {"planned": max(ok, 1) if kind == "run" else ok, "ok": ok, "failed": 0, "missing": 0}


def _what(manifest: dict, runs: pd.DataFrame | None) -> str:
    """Fabric, routing, placement and workload of the first run, from the manifest and ``runs.parquet``."""
    parts = []
    for run in manifest.get("runs", []) or []:
        topology = run.get("topology") if isinstance(run, dict) else None
        if isinstance(topology, dict) and topology.get("name"):
            parts.append(str(topology["name"]))
            break
    if runs is not None and len(runs):
        r = runs.iloc[0]
        if not parts and "topology.type" in runs.columns:
            parts.append(", ".join(dict.fromkeys(str(v) for v in runs["topology.type"].dropna())))
        for col, label in (("routing.type", "routing"), ("placement.type", "placement")):
            if col in runs.columns and runs[col].notna().any():
                values = list(dict.fromkeys(str(v) for v in runs[col].dropna()))
                parts.append(f"{label} {', '.join(values)}")
        if r.get("workload.type") == "collective":
            from netsim import units
            size = r.get("workload.size")
            parts.append(f"{r.get('workload.op')}/{r.get('workload.algorithm')}"
                         + (f" {units.format_size(float(size))}" if isinstance(size, (int, float)) else ""))
        elif isinstance(r.get("workload.type"), str):
            parts.append(f"{r['workload.type']} workload")
        elif "n_jobs" in runs.columns and r.get("n_jobs", 0) > 1:
            parts.append(f"{int(r['n_jobs'])} jobs")
        if "n_ranks" in runs.columns:
            parts.append(f"{int(r['n_ranks'])} ranks")
    return ", ".join(parts) or "(no run finished)"

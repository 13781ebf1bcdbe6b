"""Run metrics, each defined once: the columns of ``runs.parquet`` that a run computes.

A :class:`Metric` is a name (its column), a title and a kind (how it is shown: a time, a bandwidth,
a ratio or a count), what it means, and how it is computed from a finished run. Everything that
shows metrics reads :data:`METRICS`: ``runs.parquet`` (one column each, in this order), the
summary over seeds (:mod:`netsim.experiment.summary`: the ``headline`` ones by default),
``netsim results`` (formatting by kind), ``netsim list metrics``, and the sweep dashboard (a bar
chart per metric that has a ``chart`` row). A new metric is one ``METRICS.add(Metric(...))`` here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import pandas as pd

from netsim.engine.ideal import core_mask
from netsim.errors import NetsimError, did_you_mean
from netsim.topology import LINK_KINDS

Kind = Literal["time", "bandwidth", "ratio", "count"]
#: Display scale and unit per kind on the dashboard's charts (times in ms, bandwidths in Gbps).
CHART_UNITS: dict[str, tuple[float, str]] = {"time": (1e3, "ms"), "bandwidth": (8 / 1e9, "Gbps"),
                                             "ratio": (1.0, ""), "count": (1.0, "")}


@dataclass(frozen=True)
class Metric:
    """One column of ``runs.parquet``.

    ``compute`` takes a :class:`RunView` (the run and values several metrics share) and returns a
    number (NaN when the run has nothing to measure, e.g. no collective). ``headline`` metrics are
    summarised by default; ``chart`` (0 none, else the row of bar charts it joins) draws it per
    variant on a sweep's dashboard.
    """

    name: str
    title: str
    kind: Kind
    doc: str
    compute: Callable[[RunView], float]
    headline: bool = False
    chart: int = 0

    def chart_title(self) -> str:
        unit = CHART_UNITS[self.kind][1]
        return f"{self.title[0].upper()}{self.title[1:]} by variant ({unit + '; ' if unit else ''}95% interval)"


class MetricRegistry:
    """The metrics in column order; ``METRICS[name]`` or a NetsimError naming the valid ones."""

    def __init__(self) -> None:
        self._items: dict[str, Metric] = {}

    def add(self, metric: Metric) -> Metric:
        if metric.name in self._items:
            raise ValueError(f"metric {metric.name!r} defined twice")
        self._items[metric.name] = metric
        return metric

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._items.values())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __getitem__(self, name: str) -> Metric:
        try:
            return self._items[name]
        except KeyError:
            raise NetsimError(f"unknown metric {name!r}; valid: {', '.join(self._items)}"
                              f"{did_you_mean(name, self._items)}") from None

    def names(self) -> list[str]:
        return list(self._items)

    def headline(self) -> list[str]:
        return [m.name for m in self if m.headline]

    def chart_rows(self) -> list[list[Metric]]:
        rows = sorted({m.chart for m in self if m.chart})
        return [[m for m in self if m.chart == r] for r in rows]


class RunView:
    """A finished run (:class:`netsim.experiment.run.RunResult`) with the values metrics share."""

    def __init__(self, result) -> None:
        self.result = result
        self.fabric = result.fabric
        self.collectives = result.collectives
        self.iterations = result.iterations

    def mean_over_calls(self, attr: str) -> float:
        return float(np.mean([getattr(c, attr) for c in self.collectives])) if self.collectives else math.nan

    def mean_over_iterations(self, attr: str) -> float:
        return float(np.mean([getattr(i, attr) for i in self.iterations])) if self.iterations else math.nan

    @cached_property
    def congestion(self) -> tuple[float, float]:
        """(max congestion of this run, the same had every message been sprayed) over switch-to-switch links.

        Max congestion: the peak over time of the most loaded link's offered load / capacity, where a
        message offers the rate its own NIC path allows (see :attr:`Fabric.offered_peak`).
        """
        fab = self.fabric
        if not fab.track_congestion:
            return math.nan, math.nan
        core = core_mask(self.result.topology)
        if not core.any():
            return 0.0, 0.0
        return float(fab.offered_peak[core].max()), float(fab.spray_offered_peak[core].max())

    @cached_property
    def queue_pairs(self) -> tuple[int, int]:
        """(connections, queue pairs) over the run."""
        return self.fabric.queue_pair_totals()

    def uplink_imbalance(self) -> float:
        """Worst leaf's max / mean bytes over its uplinks (leaf -> spine), among leaves that sent any."""
        lt = self.result.topology.links
        up = lt.kind == LINK_KINDS.index("up")
        if not up.any():
            return math.nan
        df = pd.DataFrame({"leaf": lt.src[up], "bytes": self.fabric.link_bytes[up]})
        per_leaf = df.groupby("leaf")["bytes"].agg(["max", "mean"])
        per_leaf = per_leaf[per_leaf["mean"] > 0]
        return float((per_leaf["max"] / per_leaf["mean"]).max()) if len(per_leaf) else math.nan

    def max_spine_util(self) -> float:
        kinds = self.result.topology.links.kind
        uplinks = np.isin(kinds, [LINK_KINDS.index("up"), LINK_KINDS.index("down")])
        return float(self.fabric.link_peak_util[uplinks].max()) if uplinks.any() else 0.0

    def congestion_ratio(self) -> float:
        # load up to capacity is not congestion: 1.0 when neither overloads a link
        worst, spray = self.congestion
        return math.nan if math.isnan(spray) else max(worst, 1.0) / max(spray, 1.0)


#: Every run metric, in the column order of ``runs.parquet``.
METRICS = MetricRegistry()


def _add(name: str, title: str, kind: Kind, doc: str, compute: Callable[[RunView], float], *,
         headline: bool = False, chart: int = 0) -> None:
    METRICS.add(Metric(name, title, kind, doc, compute, headline, chart))


def _cluster(v: RunView, column: str, how: str = "mean") -> float:
    """A statistic of a cluster run's per-job column (NaN for other runs)."""
    jobs = v.result.extra.get("cluster_jobs")
    if jobs is None or not len(jobs):
        return math.nan
    return float(jobs[column].quantile(0.95) if how == "p95" else jobs[column].mean())


def _cluster_utilisation(v: RunView) -> float:
    """Busy GPU-time over makespan x GPUs (NaN outside cluster runs)."""
    series = v.result.extra.get("cluster_series")
    if series is None or not len(series):
        return math.nan
    span = float(series["t_end_s"].max() - series["t_start_s"].min())
    busy = float((series["busy_gpus"] * (series["t_end_s"] - series["t_start_s"])).sum())
    return busy / (span * v.result.topology.n_gpus) if span > 0 else math.nan


def _detection(v: RunView, column: str) -> float:
    """A detection evaluation's rate over every faulty trial (``all`` row; NaN for other runs)."""
    summary = v.result.extra.get("detection_summary")
    if summary is None or not len(summary) or column not in summary:
        return math.nan
    row = summary[summary["kind"] == "all"]
    return float(row[column].iat[0]) if len(row) else math.nan


def _detection_false_alarms(v: RunView) -> float:
    """Share of a detection evaluation's trials with a false alarm (NaN for other runs)."""
    trials = v.result.extra.get("detection_trials")
    return float(trials["false_alarm"].mean()) if trials is not None and len(trials) else math.nan


_add("detection_top1", "detection top-1 accuracy", "ratio",
     "Detection evaluations: share of the faults that slowed the job whose culprit the detector ranked first.",
     lambda v: _detection(v, "top1"), headline=True)
_add("detection_top3", "detection top-3 accuracy", "ratio",
     "Detection evaluations: share of the faults that slowed the job whose culprit was among the first three.",
     lambda v: _detection(v, "top3"))
_add("detection_false_alarms", "detection false alarm rate", "ratio",
     "Detection evaluations: share of all trials with an alarm without a fault, before it, or naming "
     "nothing related.", _detection_false_alarms, headline=True)
_add("n_ranks", "ranks", "count", "GPUs the run placed ranks on.", lambda v: len(v.result.gpus))
_add("cluster_jct_s", "mean job completion time", "time", "Cluster runs: mean over jobs of submit to end.",
     lambda v: _cluster(v, "jct_s"), headline=True, chart=1)
_add("cluster_p95_jct_s", "p95 job completion time", "time", "Cluster runs: 95th percentile of JCT over jobs.",
     lambda v: _cluster(v, "jct_s", "p95"))
_add("cluster_queue_s", "mean queueing delay", "time", "Cluster runs: mean over jobs of submit to start.",
     lambda v: _cluster(v, "queue_s"), headline=True)
_add("cluster_slowdown", "mean job slowdown", "ratio",
     "Cluster runs: mean over jobs of time running / time it would run alone on the same GPUs.",
     lambda v: _cluster(v, "slowdown"), headline=True, chart=2)
_add("cluster_p95_slowdown", "p95 job slowdown", "ratio", "Cluster runs: 95th percentile of the jobs' slowdown.",
     lambda v: _cluster(v, "slowdown", "p95"))
_add("cluster_utilisation", "GPU utilisation", "ratio",
     "Cluster runs: busy GPU-time / (makespan x GPUs).", _cluster_utilisation, headline=True)
_add("n_jobs", "jobs", "count", "Jobs of the run.", lambda v: len(v.result.jobs))
_add("iteration_time_s", "training iteration time", "time", "Mean training iteration time over jobs and iterations.",
     lambda v: v.mean_over_iterations("duration_s"), headline=True, chart=1)
_add("tflops_per_gpu", "TFLOPS per GPU", "ratio", "Mean model TFLOPS per GPU over training iterations.",
     lambda v: v.mean_over_iterations("tflops_per_gpu"), headline=True)
_add("collective_time_s", "collective time", "time", "Mean duration of the run's collective calls.",
     lambda v: v.mean_over_calls("duration_s"), headline=True, chart=1)
_add("algbw_Bps", "algorithm bandwidth", "bandwidth", "Mean algorithm bandwidth (size / time) over calls.",
     lambda v: v.mean_over_calls("algbw_Bps"))
_add("busbw_Bps", "bus bandwidth", "bandwidth", "Mean bus bandwidth (NCCL's convention) over calls.",
     lambda v: v.mean_over_calls("busbw_Bps"), headline=True, chart=1)
_add("ideal_time_s", "ideal time", "time", "Mean non-blocking lower bound of the calls (same NICs and paths).",
     lambda v: v.mean_over_calls("ideal_s"))
_add("slowdown", "slowdown vs ideal", "ratio", "Mean collective time / its ideal over calls (>= 1).",
     lambda v: v.mean_over_calls("slowdown"), headline=True, chart=2)
_add("below_bound_calls", "calls below their bound", "count",
     "Calls faster than their lower bound (should be 0: a result that breaks a physical bound is flagged).",
     lambda v: sum(c.below_bound for c in v.collectives))
_add("max_link_util", "max link utilisation", "ratio", "Peak utilisation of the busiest link.",
     lambda v: float(v.fabric.link_peak_util.max()) if len(v.fabric.link_peak_util) else 0.0)
_add("max_spine_util", "max spine-link utilisation", "ratio", "Peak utilisation of the busiest leaf-spine link.",
     RunView.max_spine_util)
_add("max_congestion", "max congestion", "ratio",
     "Peak over time of the most loaded switch-to-switch link's offered load / capacity.",
     lambda v: v.congestion[0], headline=True, chart=2)
_add("spray_congestion", "max congestion if sprayed", "ratio",
     "The same, had every message been sprayed over all its equal-cost paths.", lambda v: v.congestion[1])
_add("congestion_ratio", "max congestion relative to ideal spraying", "ratio",
     "max(max_congestion, 1) / max(spray_congestion, 1): 1 is as good as spraying.",
     RunView.congestion_ratio, headline=True, chart=2)
_add("uplink_imbalance", "uplink imbalance", "ratio",
     "Worst leaf's max / mean bytes over its uplinks: 1.0 is an even spread; hashing collisions push it up.",
     RunView.uplink_imbalance)
_add("queue_pairs", "queue pairs", "count", "Queue pairs (connections x the paths a split message takes).",
     lambda v: v.queue_pairs[1])
_add("connections", "connections", "count", "Connections (source, destination, channel) the run opened.",
     lambda v: v.queue_pairs[0])
_add("subflows", "sub-flows", "count", "Pieces of split messages.", lambda v: v.fabric.stats["subflows"])
_add("n_faults", "faults", "count", "Faults the experiment injects.", lambda v: len(v.result.spec.faults))
_add("reroutes", "reroutes", "count", "Messages moved to other paths after a fault.",
     lambda v: v.fabric.stats["reroutes"])
_add("sim_time_s", "simulated time", "time", "Simulated time at the end of the run.", lambda v: v.result.sim_time_s)
_add("flows", "messages", "count", "Messages the engine carried.", lambda v: v.fabric.stats["flows"])
_add("solver_calls", "solver calls", "count", "Max-min solves the engine made.",
     lambda v: v.fabric.stats["solver_calls"])
_add("events", "events", "count", "Simulation events (SimPy's and the compiled loop's).", lambda v: v.result.events)
_add("wall_s", "wall time", "time", "Wall-clock time of the run.", lambda v: v.result.wall_s)


def run_metrics(result) -> dict[str, float]:
    """Every metric of one finished run, by name, in column order."""
    view = RunView(result)
    return {m.name: m.compute(view) for m in METRICS}

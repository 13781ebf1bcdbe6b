"""Panels of a detection evaluation (:mod:`netsim.detect.evaluate`): from ``detection_summary.parquet`` and
``detection_trials.parquet`` only.

A table per fault kind (trials, latent share, top-1 and top-3 accuracy, false alarms, misses,
iterations to detection, mean severity and slowdown; one block of rows per variant of a sweep), a
bar chart of top-1 and top-3 accuracy per fault kind (grouped per variant), and how the final
ranking named each culprit: alone in first place, tied first with other suspects (the components on
the same slow connections), lower, or not at all.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from netsim.report.workload_panels import table_figure

#: Fault kinds in the order the charts show them.
ORDER = ("gpu", "nic", "link", "switch", "none", "all")


def has_detection(tables: dict[str, pd.DataFrame]) -> bool:
    """The results hold a detection evaluation (a non-empty ``detection_summary`` table)."""
    summary = tables.get("detection_summary")
    return summary is not None and len(summary) > 0


def _pct(v) -> str:
    return "-" if pd.isna(v) else f"{v:.0%}"


def _num(v, fmt: str) -> str:
    return "-" if pd.isna(v) else format(v, fmt)


def summary_figure(summary: pd.DataFrame, label: dict[str, str]) -> go.Figure:
    """The per-kind summary as a table (a ``variant`` column when several runs are shown)."""
    out = pd.DataFrame({"fault": summary["kind"], "trials": summary["trials"],
                        "latent (did not slow the job)": summary["latent"].map(_pct),
                        "top-1": summary["top1"].map(_pct), "top-3": summary["top3"].map(_pct),
                        "false alarms": summary["false_alarms"].map(_pct), "missed": summary["missed"].map(_pct),
                        "iterations to detect": summary["iterations_to_detect"].map(lambda v: _num(v, ".2f")),
                        "mean severity": summary["severity"].map(lambda v: _num(v, ".2f")),
                        "mean slowdown": summary["slowdown"].map(lambda v: _num(v, ".3f"))})
    if summary["run_id"].nunique() > 1:
        out.insert(0, "variant", summary["run_id"].map(label))
    return table_figure(out, "Fault detection (C4D-style) per injected fault kind: top-1/top-3 accuracy, missed and "
                             "iterations to detection over the faults that slowed the job")


def accuracy_figure(summary: pd.DataFrame, label: dict[str, str]) -> go.Figure:
    """Top-1 and top-3 accuracy per fault kind (bars; one pair per variant)."""
    faulty = summary[summary["kind"] != "none"]
    kinds = [k for k in ORDER if k in set(faulty["kind"])]
    several = faulty["run_id"].nunique() > 1
    fig = go.Figure()
    for run_id, g in faulty.groupby("run_id", sort=False):
        g = g.set_index("kind").reindex(kinds)
        prefix = f"{label.get(run_id, run_id)}: " if several else ""
        for column, name in (("top1", "top-1"), ("top3", "top-3")):
            values = g[column].to_numpy(dtype=float)
            fig.add_trace(go.Bar(x=kinds, y=values, name=prefix + name,
                                 text=["-" if math.isnan(v) else f"{v:.0%}" for v in values], textposition="outside",
                                 customdata=g["trials"].to_numpy(),
                                 hovertemplate="%{x}: %{y:.0%} (%{customdata} trials)<extra>%{fullData.name}</extra>"))
    fig.update_layout(title="Culprit named first (top-1) or among the first three (top-3), per injected fault kind",
                      xaxis_title="injected fault", yaxis_title="share of the faults that slowed the job",
                      yaxis_tickformat=".0%", yaxis_range=[0, 1.1], barmode="group")
    return fig


#: Outcome classes of :func:`ambiguity_figure`, in order.
OUTCOMES = ("named alone", "2-way tie", "3-way tie", "4+-way tie", "not first", "missed")


def outcome(trial: pd.Series) -> str:
    """How the final ranking named an effective faulty trial's culprit: alone in first place, tied
    first with other suspects (``top1`` is 1 / the tie's size), below first place, or no alarm."""
    if trial["missed"]:
        return "missed"
    if trial["culprit_rank"] != 1 or not trial["top1"] > 0:
        return "not first"
    tied = round(1.0 / float(trial["top1"]))
    return OUTCOMES[min(tied, 4) - 1]


def ambiguity_figure(trials: pd.DataFrame, label: dict[str, str]) -> go.Figure | None:
    """Per fault kind, the effective faulty trials by :func:`outcome` (stacked bars; one group per variant)."""
    t = trials[(trials["kind"] != "none") & ~trials["latent"].astype(bool)]
    if not len(t):
        return None
    t = t.assign(outcome=t.apply(outcome, axis=1))
    several = t["run_id"].nunique() > 1
    x = (t["run_id"].map(label) + ": " + t["kind"]) if several else t["kind"]
    kinds = [k for k in ORDER if k in set(t["kind"])]
    order = [f"{label.get(r, r)}: {k}" for r in dict.fromkeys(t["run_id"]) for k in kinds] if several else kinds
    fig = go.Figure()
    for name in OUTCOMES:
        counts = x[t["outcome"] == name].value_counts().reindex(order, fill_value=0)
        if counts.any():
            fig.add_trace(go.Bar(x=order, y=counts.to_numpy(), name=name,
                                 hovertemplate="%{x}: %{y} trial(s)<extra>%{fullData.name}</extra>"))
    fig.update_layout(title="How the final ranking named the culprit: alone, tied first with other suspects on the "
                            "same slow connections, below first place, or not at all",
                      xaxis_title="injected fault", yaxis_title="faults that slowed the job", barmode="stack")
    return fig


def detection_figures(tables: dict[str, pd.DataFrame], label: dict[str, str]) -> list[go.Figure]:
    """The detection panels of the runs named in ``label`` (see the module docstring)."""
    summary = tables["detection_summary"]
    summary = summary[summary["run_id"].isin(label)]
    if not len(summary):
        return []
    figs = [summary_figure(summary, label), accuracy_figure(summary, label)]
    trials = tables.get("detection_trials")
    if trials is not None and len(trials):
        ranks = ambiguity_figure(trials[trials["run_id"].isin(label)], label)
        if ranks is not None:
            figs.append(ranks)
    return figs


__all__ = ["OUTCOMES", "ambiguity_figure", "detection_figures", "has_detection", "outcome"]

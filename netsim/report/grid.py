"""A sweep's grid on the dashboard: variant names, and charts that aggregate over seeds and nothing else.

CORRECTNESS: every grid key (the variant and each swept key) is on the x axis or in the trace name of
every per-variant chart, so no two variants ever share a bar or a point; values are the mean over
the seeds of one variant (the rows of :func:`netsim.experiment.summary.summarize`), with the 95%
interval as error bars and the seed count in the hover text.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from netsim.report.display import variant_text


def variant_label(frame: pd.DataFrame, keys: list[str]) -> pd.Series:
    """One name per row from its grid keys (``ecmp, workload.channels=4``); ``run`` with no keys."""
    if not keys:
        return pd.Series(["run"] * len(frame), index=frame.index, dtype=object)
    parts = frame[keys].apply(lambda row: ", ".join(variant_text(k, row[k]) for k in keys
                                                     if not (k == "variant" and row[k] in ("", None))), axis=1)
    return parts.where(parts != "", "run").astype(object)


def run_labels(runs: pd.DataFrame, keys: list[str]) -> dict[str, str]:
    """run_id -> the name of its variant (never the run id): the grid keys, or the variant / ``run``."""
    if not keys:
        keys = ["variant"] if "variant" in runs.columns and runs["variant"].astype(str).ne("").all() else []
    return dict(zip(runs["run_id"], variant_label(runs, keys)))


def split_keys(table: pd.DataFrame, keys: list[str]) -> tuple[str | None, list[str]]:
    """(the x-axis key, the keys that name the traces): the variant on x when there are several,
    else the first key that varies; every other key goes into the trace name."""
    varying = [k for k in keys if table[k].nunique(dropna=False) > 1]
    if not varying:
        return None, []
    x = "variant" if "variant" in varying else varying[0]
    return x, [k for k in varying if k != x]


def metric_bars(table: pd.DataFrame, keys: list[str], metric: str, title: str, scale: float,
                unit: str) -> go.Figure | None:
    """Bars of ``metric`` per variant (mean over seeds, 95% interval) from a summary ``table``.

    x: the variant (or the first varying key); one trace per combination of the other keys, named
    ``key=value, ...``; None when the metric is missing everywhere.
    """
    if metric not in table or table[metric].isna().all():
        return None
    x, trace_keys = split_keys(table, keys)
    frame = table.assign(_x=variant_label(table, [x]) if x else "all runs",
                         _trace=variant_label(table, trace_keys) if trace_keys else "mean over seeds")
    fig = go.Figure()
    for name, rows in frame.groupby("_trace", sort=False):
        y = rows[metric] * scale
        err = rows[f"{metric}_ci95"].fillna(0) * scale
        custom = list(zip(variant_label(rows, keys), rows[f"{metric}_n"], err))
        fig.add_trace(go.Bar(
            x=list(rows["_x"]), y=list(y), name=str(name), customdata=custom,
            error_y={"type": "data", "array": list(err), "visible": True},
            hovertemplate="%{customdata[0]}<br>mean %{y:.4g}" + (f" {unit}" if unit else "")
            + " ± %{customdata[2]:.2g} (95% interval)<br>over %{customdata[1]} seeds<extra></extra>"))
    fig.update_layout(title=title, barmode="group", legend_title_text=", ".join(trace_keys) or None,
                      xaxis_title=x or "", yaxis_title=unit or None)
    fig.update_xaxes(type="category")
    return fig

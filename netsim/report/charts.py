"""Box and grouped bar charts exactly as plotly express draws them, built with graph_objects.

perf: plotly express costs a run's report about 0.5 s to import and 0.2-0.5 s per figure (it
reshapes the frame and builds subplots and a template for each); these give the same figures, key
for key (tests/test_report_charts.py compares their JSON), from a frame's columns.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

#: plotly express's default colour sequence (``px.colors.qualitative.Plotly``).
PALETTE = ("#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692", "#B6E880", "#FF97FF",
           "#FECB52")


def _axes(fig: go.Figure, x_title: str, y_title: str) -> None:
    """The single pair of axes express lays out (as ``make_subplots`` with one cell does)."""
    fig.update_layout(xaxis={"anchor": "y", "domain": [0.0, 1.0]}, yaxis={"anchor": "x", "domain": [0.0, 1.0]})
    fig.update_layout(xaxis_title_text=x_title, yaxis_title_text=y_title)  # (after: express's key order)


def box(frame: pd.DataFrame, x: str, y: str, color: str, labels: dict[str, str], title: str) -> go.Figure:
    """``px.box(frame, x=x, y=y, color=color, points=False, labels=labels, title=title)``."""
    name = {col: labels.get(col, col) for col in (x, y, color)}
    groups = pd.unique(frame[color])
    traces = []
    for i, group in enumerate(groups):
        part = frame[frame[color] == group]
        traces.append(go.Box(
            alignmentgroup="True", boxpoints=False,
            hovertemplate=f"{name[color]}={group}<br>{name[x]}=%{{x}}<br>{name[y]}=%{{y}}<extra></extra>",
            legendgroup=group, marker={"color": PALETTE[i % len(PALETTE)]}, name=group, notched=False,
            offsetgroup=group, orientation="v", showlegend=True, x=part[x].to_numpy(), x0=" ", xaxis="x",
            y=part[y].to_numpy(), y0=" ", yaxis="y"))
    fig = go.Figure(traces)
    _axes(fig, name[x], name[y])
    fig.update_layout(legend={"title": {"text": name[color]}, "tracegroupgap": 0}, title={"text": title},
                      boxmode="group")
    return fig


def grouped_bars(frame: pd.DataFrame, x: str, ys: list[str], labels: dict[str, str], title: str) -> go.Figure:
    """``px.bar(frame, x=x, y=ys, barmode="group", labels=labels, title=title)``: one bar per column of
    ``ys`` at each ``x`` (express names them ``variable`` and ``value`` in the labels)."""
    name = {key: labels.get(key, key) for key in (x, "variable", "value")}
    traces = []
    for i, col in enumerate(ys):
        traces.append(go.Bar(
            alignmentgroup="True",
            hovertemplate=f"{name['variable']}={col}<br>{name[x]}=%{{x}}<br>{name['value']}=%{{y}}<extra></extra>",
            legendgroup=col, marker={"color": PALETTE[i % len(PALETTE)], "pattern": {"shape": ""}}, name=col,
            offsetgroup=col, orientation="v", showlegend=True, textposition="auto", x=frame[x].to_numpy(),
            xaxis="x", y=frame[col].to_numpy(), yaxis="y"))
    fig = go.Figure(traces)
    _axes(fig, name[x], name["value"])
    fig.update_layout(legend={"title": {"text": name["variable"]}, "tracegroupgap": 0}, title={"text": title},
                      barmode="group")
    return fig

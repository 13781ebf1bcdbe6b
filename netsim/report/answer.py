"""The dashboard's opening: variants that ran the same work on the same fabric, compared in one chart and
one generated sentence (which was fastest, by how much, against the lower bound, and the cause the
results show), then the why: per-uplink load side by side, the fabric with its collided cables, and the
placements drawn.

Variants are *comparable* when everything but their routing and placement is equal (topology, workload,
jobs, faults, engine): each such group gets its own panel. Times are per run (first call's start to
last call's end), averaged over seeds; a run's lower bound is the sum of its calls' bounds when the calls
ran one after another, else the largest (a valid bound either way). Causes come from ``links.parquet``:
the slowest links a variant used that the fastest did not, else the offered load its busiest switch
cables carried at once.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from netsim.report.display import human_bandwidth, human_size, human_time
from netsim.topology import CORE_LINK_KINDS

#: Spec columns of ``runs.parquet`` that are the policies being compared (the rest is the work).
POLICY_PREFIXES = ("routing.", "placement.")
#: Spec columns that are neither: results, bookkeeping and the variant's own name.
_NOT_SPEC = ("run_id", "variant", "seed", "status", "error", "traceback", "name", "description")
#: Two variants within this relative time of each other are a tie.
TIE = 0.01
#: Link kinds that are switch-to-switch cables (where hashing collides).
CORE_KINDS = CORE_LINK_KINDS


@dataclass(frozen=True)
class Comparison:
    """Variants that ran the same work: per variant (file order) its mean time, bound and per-step times."""

    variants: list[str]
    runs: dict[str, list[str]]  # variant -> its ok run ids
    time_s: dict[str, float]
    bound_s: dict[str, float]
    steps: pd.DataFrame  # variant, step label, mean duration (serial runs only)
    serial: bool
    differs: list[str]  # which policies differ: "routing", "placement"
    what: str  # the work, in words

    def ranked(self) -> list[str]:
        return sorted(self.variants, key=lambda v: self.time_s[v])


def _work_columns(runs: pd.DataFrame) -> list[str]:
    spec_cols = [c for c in runs.columns if "." in c or c in ("jobs", "cluster", "faults", "stragglers")]
    metrics_at = runs.columns.get_loc("n_ranks") if "n_ranks" in runs.columns else len(runs.columns)
    spec_cols = [c for c in spec_cols if runs.columns.get_loc(c) < metrics_at or c.startswith("topology.")]
    return [c for c in spec_cols if not c.startswith(POLICY_PREFIXES) and c not in _NOT_SPEC
            and not c.startswith("engine.")]


def _per_run(colls: pd.DataFrame) -> pd.DataFrame:
    """Per run: time (first start to last end), lower bound, whether its calls ran one after another."""
    rows = []
    for run_id, c in colls.sort_values("start_s").groupby("run_id", sort=False):
        start, end = c["start_s"].to_numpy(), c["end_s"].to_numpy()
        serial = bool(np.all(start[1:] >= end[:-1] * (1 - 1e-12))) if len(c) > 1 else True
        bounds = c["bound_s"].to_numpy(dtype=float)
        bound = float(bounds.sum() if serial else bounds.max()) if np.isfinite(bounds).all() else math.nan
        rows.append({"run_id": run_id, "time_s": float(end.max() - start.min()), "bound_s": bound, "serial": serial})
    return pd.DataFrame(rows, columns=["run_id", "time_s", "bound_s", "serial"])


def _describe(runs: pd.DataFrame, colls: pd.DataFrame) -> str:
    """The work of a group in a few words: its calls and its GPU count."""
    calls = colls.drop_duplicates(["step"]).sort_values("step")
    kinds = calls[["op", "algorithm", "size_bytes"]].drop_duplicates()
    if len(calls) > 1 and len(kinds) == 1:  # the same call on several communicators
        op, alg, size = kinds.iloc[0]
        labels = list(calls["label"].astype(str))
        shown = _names(labels) if len(labels) <= 4 else f"{len(labels)} communicators"
        names = [f"{shown}: a {alg} {op} of {human_size(size)} each"]
    else:
        names = [f"{alg} {op} {human_size(size)}" if label == f"{op}/{alg}"
                 else f"{label} ({alg} {op} {human_size(size)})"
                 for op, alg, label, size in zip(calls["op"], calls["algorithm"], calls["label"], calls["size_bytes"])]
    if len(names) > 4:
        names = [*names[:3], f"{len(names) - 3} more calls"]
    ranks = int(runs["n_ranks"].iloc[0]) if "n_ranks" in runs and pd.notna(runs["n_ranks"].iloc[0]) else None
    return ", ".join(names) + (f" on {ranks} GPUs" if ranks else "")


def comparisons(runs: pd.DataFrame, colls: pd.DataFrame) -> list[Comparison]:
    """Groups of at least two variants that ran the same collective work (their runs all ok), in file order."""
    if "variant" not in runs or runs["variant"].astype(str).eq("").all() or colls.empty:
        return []
    ok = runs[runs["status"] == "ok"] if "status" in runs else runs
    cols = _work_columns(ok)
    key = pd.Series(["|".join(map(str, row)) for row in ok[cols].itertuples(index=False)], index=ok.index)
    per_run = _per_run(colls[colls["run_id"].isin(ok["run_id"])]).set_index("run_id")
    out = []
    for _, group in ok.groupby(key, sort=False):
        variants = list(dict.fromkeys(group["variant"]))
        ids = {v: [r for r in group.loc[group["variant"] == v, "run_id"] if r in per_run.index] for v in variants}
        variants = [v for v in variants if ids[v]]
        if len(variants) < 2:
            continue
        mine = per_run.loc[[r for v in variants for r in ids[v]]]
        policy = [c for c in group.columns if c.startswith(POLICY_PREFIXES)]
        differs = [p for p in ("routing", "placement")
                   if len({tuple(map(str, row)) for row in group[[c for c in policy if c.startswith(p + ".")]]
                           .itertuples(index=False)}) > 1]
        c = colls[colls["run_id"].isin(mine.index)]
        variant_of = {r: v for v in variants for r in ids[v]}
        steps = (c.assign(variant=c["run_id"].map(variant_of))
                 .groupby(["variant", "step", "label"], sort=False, as_index=False)["duration_s"].mean())
        out.append(Comparison(
            variants=variants, runs=ids,
            time_s={v: float(mine.loc[ids[v], "time_s"].mean()) for v in variants},
            bound_s={v: float(mine.loc[ids[v], "bound_s"].mean()) for v in variants},
            steps=steps, serial=bool(mine["serial"].all()), differs=differs or ["policy"],
            what=_describe(group, c)))
    return out


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _cause(comp: Comparison, links: pd.DataFrame) -> str:
    """Why the slowest variant was slow, from its links against the fastest's (same seed when possible)."""
    fast, slow = comp.ranked()[0], comp.ranked()[-1]
    run_s, run_f = comp.runs[slow][0], comp.runs[fast][0]
    ls, lf = links[links["run_id"] == run_s], links[links["run_id"] == run_f]
    if ls.empty or lf.empty:
        return ""
    used_s, used_f = ls[ls["bytes"] > 0], lf[lf["bytes"] > 0]
    if len(used_s) and len(used_f) and used_s["capacity_Bps"].min() < used_f["capacity_Bps"].min() * 0.999:
        cap = used_s["capacity_Bps"].min()
        narrow = used_s[used_s["capacity_Bps"] <= cap * 1.001]
        tiers = _names(sorted(set(narrow["tier"].astype(str))))
        crossed = narrow["bytes"].sum() / 2 if set(narrow["kind"]) >= {"nic_up", "nic_down"} else narrow["bytes"].sum()
        return (f"{slow} sent {human_size(float(crossed), 3)} through {human_bandwidth(float(cap), 3)} links "
                f"({tiers} tier), slower than any link {fast} used")
    hot = overloaded(comp, links)
    if hot is None:
        return ""
    core_s, above, worst_f = hot
    return (f"under {slow}, {int(above.sum())} of the {len(core_s)} switch-to-switch links (each direction "
            f"counted) were offered more load at once than {fast}'s busiest ({worst_f:.3g}× its capacity), "
            f"the worst {float(core_s['peak_offered'].max()):.3g}×")


def overloaded(comp: Comparison, links: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, float] | None:
    """The slowest variant's switch-to-switch links (its first run), which of them were offered more load
    at once than the fastest variant's busiest, and that busiest load; None when none was or it is unknown."""
    fast, slow = comp.ranked()[0], comp.ranked()[-1]
    core_s = links[(links["run_id"] == comp.runs[slow][0]) & links["kind"].isin(CORE_KINDS)]
    core_f = links[(links["run_id"] == comp.runs[fast][0]) & links["kind"].isin(CORE_KINDS)]
    if core_s.empty or core_f.empty or core_s["peak_offered"].isna().all():
        return None
    worst_f = float(core_f["peak_offered"].max())
    above = (core_s["peak_offered"] > worst_f * 1.001).to_numpy()
    return (core_s, above, worst_f) if above.any() else None


def sentence(comp: Comparison, links: pd.DataFrame) -> str:
    """The group's result in one sentence, with numbers and the cause (plain text)."""
    ranked = comp.ranked()
    fast, slow = ranked[0], ranked[-1]
    t = comp.time_s
    tied = [v for v in ranked[1:] if t[v] <= t[fast] * (1 + TIE)]
    lead = _names([fast, *tied]) + (" tied as fastest" if tied else " was fastest")
    text = f"{lead} ({comp.what}): {human_time(t[fast])}"
    if slow not in tied:
        text += f", {t[slow] / t[fast]:.2g}× faster than {slow} ({human_time(t[slow])})"
    bound = comp.bound_s[fast]
    if np.isfinite(bound) and bound > 0:
        ratio = t[fast] / bound
        what = "the calls alone on a non-blocking fabric"
        text += (f", its lower bound ({what})" if ratio < 1.005
                 else f", {ratio:.2g}× the lower bound of {human_time(bound)} ({what})")
    cause = _cause(comp, links) if slow not in tied else ""
    return text + (f". Why: {cause}." if cause else ".")


def answer_figure(comp: Comparison, links: pd.DataFrame) -> go.Figure:
    """Time per variant (stacked by call when the calls ran one after another) against its lower bound,
    with the sentence in ``layout.meta`` (the page prints it above the chart)."""
    order = comp.variants[::-1]  # file order, top to bottom
    fig = go.Figure()
    if comp.serial and comp.steps["step"].nunique() > 1:
        for (step, label), rows in comp.steps.groupby(["step", "label"], sort=True):
            ms = rows.set_index("variant")["duration_s"].reindex(order) * 1e3
            fig.add_trace(go.Bar(y=order, x=list(ms), orientation="h", name=str(label),
                                 hovertemplate="%{y}: " + html.escape(str(label)) + " %{x:.4g} ms<extra></extra>"))
    else:
        fig.add_trace(go.Bar(y=order, x=[comp.time_s[v] * 1e3 for v in order], orientation="h", name="time",
                             hovertemplate="%{y}: %{x:.4g} ms<extra></extra>"))
    fig.add_trace(go.Scatter(
        y=order, x=[comp.time_s[v] * 1e3 for v in order], mode="text", showlegend=False, hoverinfo="skip",
        text=[f"  {human_time(comp.time_s[v])}" for v in order], textposition="middle right"))
    bounds = [comp.bound_s[v] * 1e3 for v in order]
    if np.isfinite(bounds).all():
        fig.add_trace(go.Scatter(y=order, x=bounds, mode="markers", name="lower bound",
                                 marker={"symbol": "line-ns-open", "size": 26, "line": {"width": 3},
                                         "color": "black"},
                                 hovertemplate="%{y}: lower bound %{x:.4g} ms<extra></extra>"))
    differs = " and ".join(comp.differs)
    fig.update_layout(title=f"Time per {differs} against the lower bound: {html.escape(comp.what)}",
                      barmode="stack", xaxis_title="ms", height=160 + 48 * len(order),
                      xaxis={"range": [0, max(comp.time_s.values()) * 1e3 * 1.25]},
                      meta={"sentence": sentence(comp, links)}, legend={"orientation": "h", "y": -0.25})
    fig.update_yaxes(type="category")
    return fig


def uplink_figure(comp: Comparison, links: pd.DataFrame) -> go.Figure | None:
    """Peak offered load of every leaf-to-spine uplink (else every switch cable), one row per variant."""
    first = {v: comp.runs[v][0] for v in comp.variants}
    mine = links[links["run_id"].isin(first.values())]
    uplinks = [k for k in ("up", "core_up") if (mine["kind"] == k).any()]
    if uplinks:  # the uplink tier where the slowest variant's busiest link was (leaf-spine or spine-core)
        slow = mine[mine["run_id"] == first[comp.ranked()[-1]]]
        peaks = {k: slow.loc[slow["kind"] == k, "peak_offered"].max() for k in uplinks}
        kinds = [max(uplinks, key=lambda k: -1.0 if pd.isna(peaks[k]) else peaks[k])]
    else:
        kinds = list(CORE_KINDS)
    cables = mine[mine["kind"].isin(kinds)]
    if cables.empty or cables["peak_offered"].isna().all() or not (cables["bytes"] > 0).any():
        return None
    cables = cables.assign(cable=cables["src"] + "→" + cables["dst"])
    grid = cables.pivot_table(index="run_id", columns="link_id", values="peak_offered", aggfunc="first")
    names = cables.drop_duplicates("link_id").set_index("link_id")["cable"]
    order = [first[v] for v in comp.variants]
    grid = grid.reindex(order)
    z = grid.to_numpy()
    fig = go.Figure(go.Heatmap(
        z=z, x=[names[c] for c in grid.columns], y=comp.variants, colorscale="YlOrRd", zmin=0,
        colorbar={"title": "× capacity"}, text=np.round(z, 1), texttemplate="%{text}" if z.size <= 600 else None,
        hovertemplate="%{y}: %{x} offered %{z:.3g}× its capacity at its peak<extra></extra>"))
    what = {"up": "leaf-to-spine uplink", "core_up": "spine-to-core uplink"}.get(kinds[0], "switch-to-switch cable")
    fig.update_layout(title=f"Why: peak offered load of each {what}, per variant ({html.escape(comp.what)}; "
                            "1 = its capacity, a message offers the rate its NIC allows)",
                      xaxis={"title": what, "type": "category", "tickangle": -60},
                      yaxis={"type": "category", "autorange": "reversed"}, height=220 + 40 * len(order))
    return fig


def is_training(jobs: pd.DataFrame | None) -> bool:
    """Every job of every run is a training job (its calls overlap compute: no opening sentence)."""
    return jobs is not None and len(jobs) > 0 and bool((jobs["kind"] == "training").all())


def opening(runs: pd.DataFrame, colls: pd.DataFrame, keys: list[str], training: bool, cluster: bool
            ) -> list[Comparison]:
    """The groups the dashboard opens with and the CLI prints: none for training or cluster results (calls
    overlap compute or other jobs, so a call's time against its bound says nothing about the job) or for
    a grid (a sweep over more than the variants)."""
    if training or cluster or set(keys) - {"variant"}:
        return []
    return comparisons(runs[runs["status"] == "ok"] if "status" in runs.columns else runs, colls)


def answer_sentences(results_dir) -> list[str]:
    """The sentence of every group of :func:`opening` in a results directory (none for a single run,
    a grid, training or cluster results), as the dashboard opens with them and the CLI prints them."""
    import json
    from pathlib import Path

    from netsim.experiment.results import read_table
    from netsim.experiment.summary import group_keys
    results_dir = Path(results_dir)
    runs = read_table(results_dir / "runs.parquet")
    if len(runs) < 2 or "variant" not in runs or not (results_dir / "collectives.parquet").is_file():
        return []
    tables = {name: read_table(results_dir / f"{name}.parquet") for name in ("jobs", "cluster_jobs")
              if (results_dir / f"{name}.parquet").is_file()}
    manifest = json.loads((results_dir / "manifest.json").read_text())
    cluster = len(tables.get("cluster_jobs", ())) > 0
    comps = opening(runs, read_table(results_dir / "collectives.parquet"), group_keys(runs, manifest),
                    is_training(tables.get("jobs")), cluster)
    if not comps:
        return []
    links = read_table(results_dir / "links.parquet")
    return [sentence(c, links) for c in comps]

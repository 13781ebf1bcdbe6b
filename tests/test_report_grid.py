"""Sweep dashboards never mislead (issue 24): every grid key is visible, points aggregate over seeds only,
and every plotted number traces back to the runs of one named variant."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from netsim.config import load_experiment
from netsim.experiment.executors import SerialExecutor
from netsim.experiment.metrics import CHART_UNITS, METRICS
from netsim.experiment.sweep import expand, run_sweep
from netsim.report.dashboard import build_figures

ROOT = Path(__file__).resolve().parents[1]

#: Three grid keys (the variant, a message size, a channel count) and three seeds on a tiny leaf-spine.
THREE_KEYS = """\
name: three-keys
seed: 11
topology:
  type: leaf_spine
  leaves: 2
  spines: 2
  hosts_per_leaf: 2
  gpus_per_host: 2
  nics_per_host: 2
  nic: {bandwidth: 100Gbps, latency: 1us}
  uplink: {bandwidth: 100Gbps, latency: 500ns}
  intra_host: {bandwidth: 900GB/s, latency: 300ns}
placement: {type: random, by: host}
workload: {type: collective, op: allreduce, algorithm: ring, size: 1MB}
variants:
  - {name: ecmp, routing: ecmp}
  - {name: spray, routing: spray}
sweep:
  workload.size: [1MB, 2MiB]
  workload.channels: [1, 2]
repeats: 3
"""
#: How the dashboard must show each swept value (the unit family the user wrote it in).
SHOWN = {"workload.size": {"1MB": "1 MB", "2MiB": "2 MiB"}, "workload.channels": {1: "1", 2: "2"}}


def _sweep(tmp: Path, yaml_text: str | None = None, experiment: Path | None = None, overrides=(),
           repeats: int | None = None) -> Path:
    if experiment is None:
        experiment = tmp / "exp.yaml"
        experiment.write_text(yaml_text)
    exp = load_experiment(experiment, list(overrides))
    if repeats is not None:
        exp.repeats = repeats
    out = tmp / "results"
    report = run_sweep(expand(exp), exp, out, SerialExecutor())
    assert report.failed == 0, report.manifest["runs"]
    return out


@pytest.fixture(scope="module")
def three_keys(tmp_path_factory) -> Path:
    return _sweep(tmp_path_factory.mktemp("grid"), THREE_KEYS)


def _bar_figures(figs: list[go.Figure]) -> list[go.Figure]:
    """The per-variant metric charts (one bar per variant, mean over its seeds)."""
    return [f for f in figs if f.data and all(isinstance(t, go.Bar) for t in f.data)
            and "by variant" in (f.layout.title.text or "")]


def _points(fig: go.Figure) -> list[tuple]:
    """(x, trace name, facet axis, y, variant name, seed count) of every bar."""
    out = []
    for tr in fig.data:
        for x, y, custom in zip(tr.x, tr.y, tr.customdata):
            out.append((x, tr.name, tr.xaxis or "x", y, custom[0], custom[1]))
    return out


def _parse(x: str, trace: str) -> dict[str, str]:
    """The grid coordinates a bar is named by: the variant on x, ``key=value`` pairs in the trace name."""
    coords = {"variant": x}
    for part in trace.split(", "):
        key, _, value = part.partition("=")
        coords[key] = value
    return coords


def test_three_keys_three_seeds_every_number_traces_back_to_named_runs(three_keys):
    runs = pd.read_parquet(three_keys / "runs.parquet")
    assert len(runs) == 2 * 2 * 2 * 3 and (runs["status"] == "ok").all()
    figs = build_figures(three_keys)
    bars = _bar_figures(figs)
    titles = {f.layout.title.text.split(" by variant")[0] for f in bars}
    assert {"Collective time", "Bus bandwidth", "Slowdown vs ideal"} <= titles
    for fig in bars:
        metric = next(m for m in METRICS if fig.layout.title.text.startswith(m.chart_title()))
        points = _points(fig)
        assert len(points) == 8  # one bar per variant: 2 variants x 2 sizes x 2 channel counts
        positions = [(x, name, axis) for x, name, axis, *_ in points]
        assert len(set(positions)) == len(positions), "two variants share one bar position"
        shown = " ".join([fig.layout.xaxis.title.text or ""] + [t.name for t in fig.data])
        for key in ("variant", "workload.size", "workload.channels"):
            assert key in shown, f"{key} hidden in {fig.layout.title.text!r}"
        for x, name, _axis, y, variant, n in points:
            coords = _parse(x, name)
            assert set(coords) == {"variant", "workload.size", "workload.channels"}
            mine = runs[runs["variant"] == coords["variant"]]
            for key, texts in SHOWN.items():
                raw = [v for v, text in texts.items() if text == coords[key]]
                assert len(raw) == 1, f"{key}={coords[key]} is not how the user wrote a value"
                mine = mine[mine[key] == raw[0]]
            assert len(mine) == 3 and n == 3  # the seeds, and only the seeds, of one variant
            assert variant == f"{coords['variant']}, workload.size={coords['workload.size']}, " \
                              f"workload.channels={coords['workload.channels']}"
            expected = mine[metric.name].mean() * CHART_UNITS[metric.kind][0]
            assert y == pytest.approx(expected, rel=1e-9)
        assert all(t.error_y.array is not None and len(t.error_y.array) == len(t.y) for t in fig.data)
        assert all("seeds" in t.hovertemplate for t in fig.data)


def test_no_figure_names_a_run_by_its_id_or_a_bare_value(three_keys):
    runs = pd.read_parquet(three_keys / "runs.parquet")
    ids = set(runs["run_id"])
    for fig in build_figures(three_keys):
        names = [str(t.name) for t in fig.data if t.name]
        categories = [str(x) for t in fig.data if getattr(t, "x", None) is not None and not isinstance(t, go.Table)
                      for x in t.x if isinstance(x, str)]
        for text in names + categories + [fig.layout.title.text or ""]:
            assert not any(i in text for i in ids), f"a run id in {text!r} ({fig.layout.title.text})"
        for name in names:
            assert not re.fullmatch(r"[\d.]+", name), f"bare value {name!r} as a trace name"


def test_size_lines_keep_every_other_key_apart(three_keys):
    figs = [f for f in build_figures(three_keys) if (f.layout.title.text or "").startswith("Bus bandwidth vs message size")]
    (fig,) = figs
    names = [t.name for t in fig.data]
    assert len(names) == len(set(names)) == 2 * 2  # variant x channels; the size is on x
    colls = pd.read_parquet(three_keys / "collectives.parquet")
    for tr in fig.data:
        variant, channels = re.fullmatch(r"(\w+), workload\.channels=(\d) \| allreduce/ring", tr.name).groups()
        assert len(set(tr.x)) == len(tr.x) == 2
        for size, y in zip(tr.x, tr.y):
            mine = colls[(colls["variant"] == variant) & (colls["workload.channels"] == int(channels))
                         & (colls["size_bytes"] == size)]
            assert mine["run_id"].nunique() == 3
            per_seed = mine.groupby("run_id")["busbw_Bps"].mean()
            assert y == pytest.approx(per_seed.mean() / (1e9 / 8), rel=1e-9)
    assert list(fig.layout.xaxis.ticktext) == ["1 MB", "2 MiB"]


def test_a_zip_group_and_one_more_key_never_share_a_bar(tmp_path):
    """The policy-sweep defect: both channel counts drawn onto the same ``ecmp`` category of one trace."""
    out = _sweep(tmp_path, experiment=ROOT / "experiments/policy-sweep.yaml", overrides=["workload.size=1MiB"],
                 repeats=2)
    runs = pd.read_parquet(out / "runs.parquet")
    n_variants = len(runs.groupby(["variant", "topology.spines", "topology.uplink.count", "workload.channels"]))
    assert n_variants == 12
    bars = _bar_figures(build_figures(out))
    assert bars
    for fig in bars:
        points = _points(fig)
        assert len(points) == n_variants
        assert len({(x, name, axis) for x, name, axis, *_ in points}) == n_variants
        for key in ("topology.spines", "topology.uplink.count", "workload.channels"):
            assert all(f"{key}=" in t.name for t in fig.data)
        assert {p[5] for p in points} == {2}


def test_keys_every_variant_shares_are_named_in_the_title(tmp_path):
    text = THREE_KEYS.replace("  workload.size: [1MB, 2MiB]\n", "  workload.size: [4MB]\n").replace(
        "repeats: 3", "repeats: 1")
    out = _sweep(tmp_path, text)
    bars = _bar_figures(build_figures(out))
    assert bars and all("workload.size=4 MB" in f.layout.title.text for f in bars)
    assert all(np.isfinite(list(t.y)).all() for f in bars for t in f.data)

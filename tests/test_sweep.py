"""Sweeps: expansion (variants x grid x seeds), executors, failures, resume, results and summaries.

Every fabric here is a 2x2 leaf-spine with 2 hosts per leaf and 2 GPUs per host (8 GPUs) running a
1-2 MiB ring allreduce, so a run takes milliseconds; the Dask case starts one LocalCluster.
"""

from __future__ import annotations

import json
import math
import os
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal
from typer.testing import CliRunner

from netsim.cli import app
from netsim.config import SWEEP_KEYS, load_experiment, load_spec
from netsim.errors import ConfigError
from netsim.experiment.executors import DaskExecutor, LocalExecutor, SerialExecutor, make_executor
from netsim.experiment.run import spec_hash
from netsim.experiment.summary import interval, summarize
from netsim.experiment.sweep import (
    ArrowTables,
    _concat,
    completed,
    derived_seeds,
    expand,
    run_sweep,
    unique_ids,
)

runner = CliRunner()

BASE = {
    "name": "tiny",
    "seed": 3,
    "topology": {
        "type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 2,
        "nics_per_host": 1,
        "nic": {"bandwidth": "100Gbps", "latency": "1us"},
        "uplink": {"bandwidth": "100Gbps", "latency": "500ns"},
        "intra_host": {"bandwidth": "900GB/s", "latency": "300ns"},
    },
    "placement": "random",
    "routing": "ecmp",
    "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"},
}

TABLES = ("runs", "collectives", "flows", "links", "jobs", "iterations")
#: A stable row order per table (with run_id first): rows of one run never tie on these.
SORT_KEYS = {"runs": ["run_id"], "collectives": ["run_id", "job", "step", "iteration"],
             "flows": ["run_id", "flow_id"], "links": ["run_id", "link_id"], "jobs": ["run_id", "job"],
             "iterations": ["run_id", "job", "iteration"]}
TIMING = ("wall_s",)


def write_exp(tmp_path: Path, name: str = "exp.yaml", *, base: dict | None = None, **sweep_keys) -> Path:
    """BASE (or ``base``) plus top-level sweep keys (variants=, sweep=, seeds=, repeats=) as a YAML file."""
    data = dict(BASE if base is None else base)
    data.update(sweep_keys)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def line_of(path: Path, text: str, nth: int = 1) -> int:
    """1-based number of the ``nth`` line of ``path`` containing ``text``."""
    hits = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(hits) >= nth, f"{text!r} not {nth} times in {path}"
    return hits[nth - 1]


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def read_tables(out: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(out / f"{name}.parquet") for name in TABLES}


def normalized(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """``df`` without timing columns, rows in a stable order."""
    df = df.drop(columns=[c for c in TIMING if c in df.columns])
    return df.sort_values(SORT_KEYS[name], kind="stable").reset_index(drop=True)


def normalized_manifest(out: Path) -> dict:
    m = json.loads((out / "manifest.json").read_text())
    for key in ("created", "wall_s"):
        m.pop(key)
    m["runs"] = sorted(({k: v for k, v in r.items() if k != "wall_s"} for r in m["runs"]),
                       key=lambda r: r["run_id"])
    return m


def assert_same_results(a: Path, b: Path) -> None:
    ta, tb = read_tables(a), read_tables(b)
    for name in TABLES:
        assert len(ta[name]) == len(tb[name]), name
        assert_frame_equal(normalized(ta[name], name), normalized(tb[name], name), obj=name)
    assert normalized_manifest(a) == normalized_manifest(b)


class Counting:
    """An executor wrapper that records which runs it was asked to execute (and can be interrupted)."""

    def __init__(self, inner=None, interrupt_after: int | None = None):
        self.inner = inner or SerialExecutor()
        self.interrupt_after = interrupt_after
        self.executed: list[str] = []

    def map(self, fn, items):
        items = list(items)
        for outcome in self.inner.map(fn, items):
            if self.interrupt_after is not None and len(self.executed) >= self.interrupt_after:
                raise KeyboardInterrupt
            self.executed.append(outcome.run_id)
            yield outcome


# =========================================================================== 1. expansion


def test_counts_are_variants_times_grid_points_times_seeds_and_zip_pairs_in_order(tmp_path):
    path = write_exp(tmp_path,
                     variants=[{"name": "a"}, {"name": "b", "routing": "ecmp"}],
                     sweep={"workload.size": ["1MiB", "2MiB"],
                            "zip": {"workload.channels": [1, 2, 4],
                                    "topology.uplink.bandwidth": ["100Gbps", "200Gbps", "400Gbps"]}},
                     repeats=3)
    exp = load_experiment(path)
    assert exp.is_sweep
    runs = expand(exp)
    # 2 variants x (2 sizes x 3 zipped pairs: the zip is one axis of 3, not 3 x 3) x 3 seeds
    assert len(runs) == 2 * 2 * 3 * 3
    assert [r.index for r in runs] == list(range(len(runs)))
    assert all(r.spec is not None and r.error == "" for r in runs)
    pairs = {(1, "100Gbps"), (2, "200Gbps"), (4, "400Gbps")}
    assert {(r.params["workload.channels"], r.params["topology.uplink.bandwidth"]) for r in runs} == pairs
    gbps = {"100Gbps": 100e9 / 8, "200Gbps": 200e9 / 8, "400Gbps": 400e9 / 8}
    for r in runs:
        assert r.spec.workload.channels == r.params["workload.channels"]
        assert r.spec.topology.uplink.bandwidth == pytest.approx(gbps[r.params["topology.uplink.bandwidth"]])
        assert r.spec.workload.size == {"1MiB": 2**20, "2MiB": 2**21}[r.params["workload.size"]]
        assert r.spec.variant == r.variant and r.spec.seed == r.seed == r.params["seed"]
    # order: variants outer, then the grid (file order of axes, zip values in order), seeds inner
    assert [r.variant for r in runs] == ["a"] * 18 + ["b"] * 18
    grid = [(r.params["workload.size"], r.params["workload.channels"]) for r in runs[:18:3]]
    assert grid == [("1MiB", 1), ("1MiB", 2), ("1MiB", 4), ("2MiB", 1), ("2MiB", 2), ("2MiB", 4)]
    assert len({r.run_id for r in runs}) == len(runs)
    assert exp.axes == [(("workload.size",), [("1MiB",), ("2MiB",)]),
                        (("workload.channels", "topology.uplink.bandwidth"),
                         [(1, "100Gbps"), (2, "200Gbps"), (4, "400Gbps")])]


def test_several_zip_groups_are_separate_axes(tmp_path):
    path = write_exp(tmp_path, sweep={
        "workload.iterations": [1, 2],
        "zip": [{"workload.channels": [1, 2], "workload.size": ["1MiB", "2MiB"]},
                {"topology.spines": [2, 4, 8], "topology.uplink.count": [4, 2, 1]}]})
    exp = load_experiment(path)
    runs = expand(exp)
    assert len(runs) == 2 * 2 * 3
    assert len(exp.axes) == 3
    for r in runs:
        assert (r.spec.workload.channels, r.spec.workload.size) in {(1, 2**20), (2, 2**21)}
        assert (r.spec.topology.spines, r.spec.topology.uplink.count) in {(2, 4), (4, 2), (8, 1)}
    points = {tuple(sorted(r.params.items())) for r in runs}
    assert len(points) == 12
    assert "seed" not in runs[0].params  # one seed: not a column of the grid


def test_param_adds_an_axis_and_replaces_an_existing_one(tmp_path):
    path = write_exp(tmp_path, sweep={"workload.size": ["1MiB", "2MiB"],
                                      "zip": {"workload.channels": [1, 2],
                                              "topology.uplink.bandwidth": ["100Gbps", "200Gbps"]}})
    assert len(expand(load_experiment(path))) == 4
    # a new key: one more axis
    exp = load_experiment(path, params=["workload.iterations=[1,2,3]"])
    assert [keys for keys, _ in exp.axes][-1] == ("workload.iterations",)
    runs = expand(exp)
    assert len(runs) == 4 * 3 and {r.spec.workload.iterations for r in runs} == {1, 2, 3}
    # an existing plain axis: replaced, values YAML-typed
    runs = expand(load_experiment(path, params=["workload.size=4MiB"]))
    assert len(runs) == 2 and {r.spec.workload.size for r in runs} == {4 * 2**20}
    assert {r.params["workload.size"] for r in runs} == {"4MiB"}
    # a key inside a zip group: its column is replaced and the pairing kept (same number of values) ...
    exp = load_experiment(path, params=["workload.channels=[4, 8]"])
    assert [keys for keys, _ in exp.axes] == [("workload.size",), ("workload.channels", "topology.uplink.bandwidth")]
    runs = expand(exp)
    assert len(runs) == 2 * 2
    assert {(r.spec.workload.channels, r.spec.topology.uplink.bandwidth) for r in runs} == {(4, 100e9 / 8),
                                                                                             (8, 200e9 / 8)}
    assert all(isinstance(r.params["workload.channels"], int) for r in runs)
    # ... and another number of values would break the pairing: refused, naming the partner key
    with pytest.raises(ConfigError, match="zips it with topology.uplink.bandwidth"):
        load_experiment(path, params=["workload.channels=[1,2,4]"])
    # a file without any sweep becomes one with --param
    plain = write_exp(tmp_path, "plain.yaml")
    assert not load_experiment(plain).is_sweep
    exp = load_experiment(plain, params=["topology.spines=[2,4]"])
    assert exp.is_sweep and [r.spec.topology.spines for r in expand(exp)] == [2, 4]


def test_param_and_set_syntax_errors_are_config_errors(tmp_path):
    path = write_exp(tmp_path, sweep={"workload.size": ["1MiB"]})
    for params in (["workload.size"], ["=1,2"], ["workload.size="], ["workload.size=[]"]):
        with pytest.raises(ConfigError, match="--param"):
            load_experiment(path, params=params)


def test_set_applies_to_every_run_and_wins_over_variants_and_sweep(tmp_path):
    path = write_exp(tmp_path,
                     variants=[{"name": "a"}, {"name": "b", "workload": {"channels": 2}, "topology": {"spines": 4}}],
                     sweep={"workload.channels": [1, 4], "topology.leaves": [2, 3]})
    runs = expand(load_experiment(path))
    assert {r.spec.workload.channels for r in runs} == {1, 4}  # the sweep wins over the variant
    assert {r.spec.topology.spines for r in runs if r.variant == "b"} == {4}
    runs = expand(load_experiment(path, overrides=["workload.channels=3", "topology.spines=8",
                                                   "workload.size=2MiB"]))
    assert all(r.spec is not None for r in runs)
    assert {r.spec.workload.channels for r in runs} == {3}
    assert {r.spec.topology.spines for r in runs} == {8}
    assert {r.spec.workload.size for r in runs} == {2**21}
    assert {r.spec.topology.leaves for r in runs} == {2, 3}  # unrelated axes still apply
    # --set on a swept key removes that axis: no duplicate runs, no label claiming a value not used
    assert len(runs) == 4 and len(unique_ids(runs)) == 4
    assert all("workload.channels" not in r.params for r in runs)


def test_variants_deep_merge_and_can_swap_the_topology_by_file(tmp_path):
    topo = dict(BASE["topology"], spines=4, nics_per_host=2, nic={"bandwidth": "200Gbps", "latency": "2us"})
    (tmp_path / "topo").mkdir()
    (tmp_path / "topo" / "big.yaml").write_text(yaml.safe_dump(topo))
    path = write_exp(tmp_path, variants=[
        {"name": "base"},
        {"name": "spines4", "topology": {"spines": 4}},
        {"name": "faster-nic", "topology": {"nic": {"bandwidth": "400Gbps"}}},
        {"name": "file", "topology": "topo/big.yaml"},
        {"name": "seq", "placement": "sequential", "workload": {"size": "2MiB"}},
    ])
    runs = {r.variant: r for r in expand(load_experiment(path))}
    assert list(runs) == ["base", "spines4", "faster-nic", "file", "seq"]
    base, spines4 = runs["base"].spec.topology, runs["spines4"].spec.topology
    assert (base.spines, spines4.spines) == (2, 4)
    assert spines4.model_dump(exclude={"spines"}) == base.model_dump(exclude={"spines"})
    fast = runs["faster-nic"].spec.topology
    assert fast.nic.bandwidth == 400e9 / 8 and fast.nic.latency == base.nic.latency == 1e-6  # merged, not replaced
    f = runs["file"].spec.topology
    assert (f.spines, f.nics_per_host, f.nic.bandwidth, f.nic.latency) == (4, 2, 200e9 / 8, 2e-6)
    seq = runs["seq"].spec
    assert seq.placement.type == "sequential" and seq.workload.size == 2**21
    assert seq.workload.op == "allreduce" and seq.workload.algorithm == "ring"
    assert runs["base"].spec.placement.type == "random"


def test_run_ids_are_stable_and_follow_every_resolved_value(tmp_path):
    path = write_exp(tmp_path, variants=[{"name": "a"}, {"name": "b", "topology": {"spines": 4}}],
                     sweep={"workload.size": ["1MiB", "2MiB"]}, repeats=2)
    first = expand(load_experiment(path))
    again = expand(load_experiment(path))
    ids = [r.run_id for r in first]
    assert ids == [r.run_id for r in again]
    assert len(set(ids)) == len(ids) == 8
    assert all(r.run_id == spec_hash(r.spec) for r in first)
    # the same resolved spec spelled differently is the same run
    same = expand(load_experiment(path, params=["workload.size=[1048576, 2097152]"]))
    assert [r.run_id for r in same] == ids
    # any resolved value, anywhere, changes every id it touches
    for override in ("topology.nic.latency=2us", "workload.iterations=2", "engine.completion_tolerance=2ns",
                     "placement.by=host", "seed=4", "description=x", "routing.reconvergence=1ms"):
        changed = [r.run_id for r in expand(load_experiment(path, overrides=[override]))]
        assert not set(changed) & set(ids), override
    # a renamed variant changes its runs only; a changed variant override too
    renamed = write_exp(tmp_path, "renamed.yaml", variants=[{"name": "a"}, {"name": "c", "topology": {"spines": 4}}],
                        sweep={"workload.size": ["1MiB", "2MiB"]}, repeats=2)
    other = [r.run_id for r in expand(load_experiment(renamed))]
    assert other[:4] == ids[:4] and not set(other[4:]) & set(ids)
    # expansion does not depend on where it runs from
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        assert [r.run_id for r in expand(load_experiment("exp.yaml"))] == ids
    finally:
        os.chdir(cwd)


def test_repeats_derive_the_same_seeds_for_every_variant_and_point(tmp_path):
    path = write_exp(tmp_path, variants=[{"name": "a"}, {"name": "b", "topology": {"spines": 4}}],
                     sweep={"workload.size": ["1MiB", "2MiB"], "workload.channels": [1, 2]}, repeats=5)
    runs = expand(load_experiment(path))
    assert len(runs) == 2 * 4 * 5
    expected = derived_seeds(BASE["seed"], 5)
    assert len(set(expected)) == 5 and expected == derived_seeds(3, 5)
    assert all(isinstance(s, int) and s >= 0 for s in expected)
    for start in range(0, len(runs), 5):
        group = runs[start:start + 5]
        assert [r.seed for r in group] == expected
        assert [r.spec.seed for r in group] == expected
        assert len({(r.variant, r.params["workload.size"], r.params["workload.channels"]) for r in group}) == 1
    assert derived_seeds(4, 5) != expected  # the base seed matters
    assert derived_seeds(3, 6)[:5] == expected  # more repeats extend, not reshuffle
    runs = expand(load_experiment(path, overrides=["seed=4"]))
    assert [r.seed for r in runs[:5]] == derived_seeds(4, 5)


def test_explicit_seeds(tmp_path):
    path = write_exp(tmp_path, variants=[{"name": "a"}, {"name": "b"}], seeds=[7, 0, 11])
    runs = expand(load_experiment(path))
    assert [(r.variant, r.seed) for r in runs] == [("a", 7), ("a", 0), ("a", 11), ("b", 7), ("b", 0), ("b", 11)]
    assert [r.spec.seed for r in runs] == [7, 0, 11] * 2
    assert all(r.params == {"seed": r.seed} for r in runs)
    one = expand(load_experiment(write_exp(tmp_path, "one.yaml", seeds=[9])))
    assert len(one) == 1 and one[0].seed == 9 and one[0].spec.seed == 9


@pytest.mark.parametrize("keys, path_expected, line_text", [
    ({"variants": [{"name": "a"}, {"routing": "ecmp"}]}, "variants.1", "- routing: ecmp"),
    ({"variants": [{"name": "a"}, {"name": "a", "routing": "ecmp"}]}, "variants.1.name", ("- name: a", 2)),
    ({"variants": [{"name": "a", "repeats": 2}]}, "variants.0", "- name: a"),
    ({"variants": {"name": "a"}}, "variants", "variants:"),
    ({"sweep": {"zip": {"workload.channels": [1, 2], "workload.size": ["1MiB"]}}}, "sweep.zip", "zip:"),
    ({"sweep": {"zip": [{"workload.channels": [1]}, {"workload.size": ["1MiB", "2MiB"], "topology.spines": [2]}]}},
     "sweep.zip.1", "- workload.size:"),
    ({"sweep": {"workload.size": []}}, "sweep.workload.size", "workload.size: []"),
    ({"sweep": ["workload.size"]}, "sweep", "sweep:"),
    ({"seeds": [1, 2], "repeats": 3}, "repeats", "repeats: 3"),
    ({"seeds": [1, 1]}, "seeds", "seeds:"),
    ({"seeds": [-1]}, "seeds", "seeds:"),
    ({"repeats": 0}, "repeats", "repeats: 0"),
    ({"repeats": True}, "repeats", "repeats: true"),
    ({"sweep": {"seed": [1, 2]}, "repeats": 2}, "sweep", "sweep:"),
])
def test_structural_errors_raise_config_error_with_file_line_and_path(tmp_path, keys, path_expected, line_text):
    path = write_exp(tmp_path, **keys)
    with pytest.raises(ConfigError) as info:
        expand(load_experiment(path))
    e = info.value
    assert e.file == str(path) and e.path == path_expected, str(e)
    text, nth = line_text if isinstance(line_text, tuple) else (line_text, 1)
    expected = line_of(path, text, nth)
    assert e.line in (expected, expected + 1), (str(e), expected)  # the key, or its block value below it
    assert str(e).startswith(f"{path}:{e.line}: {path_expected}: ")
    # the CLI says the same and exits 2
    for command in ("validate", "sweep"):
        result = invoke(command, path, *(["--out", tmp_path / "out", "--no-report"] if command == "sweep" else []))
        assert result.exit_code == 2 and f"{path}:{e.line}: {path_expected}:" in " ".join(result.output.split())
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("sweep", [
    {"workload.size": ["1MiB", "2MiB"], "topology.spine": [2, 4]},
    {"zip": {"workload.size": ["1MiB", "2MiB"], "topology.spine": [2, 4]}},
])
def test_a_swept_key_that_is_not_a_spec_key_is_a_structural_error(tmp_path, sweep):
    path = write_exp(tmp_path, sweep=sweep)
    with pytest.raises(ConfigError) as info:
        expand(load_experiment(path))
    e = info.value
    assert e.file == str(path) and e.line is not None and "topology.spine" in e.path
    assert "not a key of the experiment spec" in e.message and "spines" in e.message
    # the same through --param, and in the CLI (exit 2, file:line: in the message)
    with pytest.raises(ConfigError, match="topology.spine"):
        expand(load_experiment(write_exp(tmp_path, "p.yaml"), params=["topology.spine=[2,4]"]))
    result = invoke("sweep", path, "--out", tmp_path / "out", "--executor", "serial", "--no-report")
    assert result.exit_code == 2 and f"{path}:" in result.output and "topology.spine" in result.output
    assert not (tmp_path / "out").exists()
    result = invoke("validate", path)
    assert result.exit_code == 2 and "topology.spine" in result.output


def test_structural_error_line_is_the_line_of_the_offending_sweep_key(tmp_path):
    path = write_exp(tmp_path, sweep={"workload.size": ["1MiB", "2MiB"], "topology.spine": [2, 4]})
    with pytest.raises(ConfigError) as info:
        expand(load_experiment(path))
    assert info.value.line == line_of(path, "topology.spine")


def test_an_invalid_value_at_one_point_is_a_failed_planned_run(tmp_path):
    path = write_exp(tmp_path, sweep={"workload.size": ["1MiB", "2MiB"], "workload.channels": [1, 0]})
    runs = expand(load_experiment(path))
    assert len(runs) == 4
    bad = [r for r in runs if r.spec is None]
    assert [r.params["workload.channels"] for r in bad] == [0, 0]
    for r in bad:
        assert "workload.channels" in r.error and "sweep workload.channels=0" in r.error
        assert r.error.startswith(f"{path}:")
        assert r.run_id and r.seed == BASE["seed"]
    assert len({r.run_id for r in runs}) == 4  # failed runs have ids of their own, stable too
    assert [r.run_id for r in runs] == [r.run_id for r in expand(load_experiment(path))]
    # a variant's invalid value is blamed on the variant
    path = write_exp(tmp_path, "v.yaml", variants=[{"name": "ok"}, {"name": "neg", "topology": {"spines": -1}}])
    runs = expand(load_experiment(path))
    assert runs[0].spec is not None and runs[1].spec is None and "variant 'neg'" in runs[1].error


def test_load_spec_refuses_a_sweep_file(tmp_path):
    for key in SWEEP_KEYS:
        value = {"variants": [{"name": "a"}], "sweep": {"workload.size": ["1MiB"]}, "seeds": [1],
                 "repeats": 2}[key]
        path = write_exp(tmp_path, f"{key}.yaml", **{key: value})
        with pytest.raises(ConfigError, match="sweep"):
            load_spec(path)
        assert load_experiment(path).is_sweep
    load_spec(write_exp(tmp_path, "plain.yaml"))


def test_make_executor():
    assert isinstance(make_executor("serial", 4), SerialExecutor)
    assert isinstance(make_executor("local", 1), SerialExecutor)
    assert isinstance(make_executor("local", 3), LocalExecutor) and make_executor("local", 3).workers == 3
    assert isinstance(make_executor("dask", 2), DaskExecutor)
    with pytest.raises(Exception, match="unknown executor"):
        make_executor("threads", 2)


# =========================================================================== 2. executors agree


@pytest.fixture(scope="module")
def equivalence(tmp_path_factory):
    """One sweep run by the serial, local-process and Dask executors (through the CLI)."""
    tmp = tmp_path_factory.mktemp("equiv")
    path = write_exp(tmp, variants=[{"name": "a"}, {"name": "b", "topology": {"spines": 4}}],
                     sweep={"workload.size": ["1MiB", "2MiB"]}, repeats=2)
    outs = {}
    for kind, extra in (("serial", []), ("local", ["--workers", "2"]), ("dask", ["--workers", "2"])):
        out = tmp / kind
        result = invoke("sweep", path, "--executor", kind, *extra, "--out", out, "--no-report")
        assert result.exit_code == 0, (kind, result.output)
        outs[kind] = out
    return path, outs


@pytest.mark.parametrize("kind", ["local", "dask"])
def test_executors_give_identical_results(equivalence, kind):
    _, outs = equivalence
    assert len(pd.read_parquet(outs["serial"] / "runs.parquet")) == 8
    assert_same_results(outs["serial"], outs[kind])
    assert sorted(completed(outs["serial"])) == sorted(completed(outs[kind]))
    for run_id in completed(outs["serial"]):
        for name in TABLES:
            a = pd.read_parquet(outs["serial"] / "runs" / run_id / f"{name}.parquet")
            b = pd.read_parquet(outs[kind] / "runs" / run_id / f"{name}.parquet")
            assert_frame_equal(normalized(a, name), normalized(b, name), obj=f"{run_id}/{name}")


def test_local_executor_map_yields_every_result():
    items = list(range(5))
    assert sorted(LocalExecutor(2).map(abs, [-i for i in items])) == items
    assert list(LocalExecutor(2).map(abs, [])) == []
    assert list(SerialExecutor().map(abs, [-2, 1])) == [2, 1]


# =========================================================================== 3. failures


@pytest.fixture
def failing_sweep(tmp_path):
    """4 points on 8 GPUs: channels 0 is invalid (spec), 16 ranks fail at run time (placement)."""
    return write_exp(tmp_path, "failing.yaml", sweep={"workload.ranks": [8, 16], "workload.channels": [1, 0]})


def test_a_failed_point_is_recorded_and_the_rest_run(tmp_path, failing_sweep):
    out = tmp_path / "out"
    result = invoke("sweep", failing_sweep, "--out", out, "--executor", "serial", "--no-report")
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "1 ok, 3 failed" in text and "16 ranks do not fit on 8 GPUs" in text
    runs = pd.read_parquet(out / "runs.parquet")
    assert len(runs) == 4 and list(runs.columns[:5]) == ["run_id", "variant", "seed", "status", "error"]
    by = {(r["workload.ranks"], r["workload.channels"]): r for _, r in runs.iterrows()}
    ok = by[(8, 1)]
    assert ok.status == "ok" and ok.error == "" and ok.traceback == "" and ok.busbw_Bps > 0
    for key in ((8, 0), (16, 0)):
        row = by[key]
        assert row.status == "failed" and "workload.channels" in row.error and "sweep workload.channels=0" in row.error
        assert row.traceback == "" and math.isnan(row.busbw_Bps)  # never started
    runtime = by[(16, 1)]
    assert runtime.status == "failed" and "16 ranks do not fit on 8 GPUs" in runtime.error
    assert "Traceback (most recent call last)" in runtime.traceback
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "sweep" and manifest["status"] == "failed" and manifest["complete"] is False
    assert manifest["counts"] == {"planned": 4, "ok": 1, "failed": 3, "missing": 0}
    assert {r["run_id"]: r["status"] for r in manifest["runs"]} == dict(zip(runs.run_id, runs.status))
    # only the good run has tables
    for name in ("collectives", "jobs"):
        assert set(pd.read_parquet(out / f"{name}.parquet").run_id) == {ok.run_id}
    assert completed(out)[runtime.run_id]["status"] == "failed"
    # the summary shows the failures
    result = invoke("results", out)
    assert result.exit_code == 0 and "(1 failed)" in result.output


def test_validate_a_sweep_names_the_bad_runs(tmp_path, failing_sweep):
    result = invoke("validate", failing_sweep)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "4 runs" in text and "3 invalid" in text
    planned = expand(load_experiment(failing_sweep))
    for r in planned:
        named = f"run {r.run_id}" in text
        assert named == (r.params != {"workload.ranks": 8, "workload.channels": 1}), r.params
    assert "workload.ranks=16, workload.channels=1" in text and "16 ranks do not fit on 8 GPUs" in text
    good = write_exp(tmp_path, "good.yaml", sweep={"workload.channels": [1, 2]}, repeats=2)
    result = invoke("validate", good)
    assert result.exit_code == 0 and "4 runs" in result.output and "all valid" in result.output


def test_cli_bad_input_exits_2(tmp_path):
    path = write_exp(tmp_path, sweep={"workload.size": ["1MiB"]})
    out = tmp_path / "out"
    for args in (["--executor", "threads"], ["--workers", "0"], ["--executor", "local", "--scheduler", "tcp://x:1"],
                 ["--param", "workload.size"]):
        result = invoke("sweep", path, "--out", out, "--no-report", *args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output
    assert not out.exists()
    result = invoke("sweep", tmp_path / "missing.yaml", "--out", out)
    assert result.exit_code == 2


# =========================================================================== 4. resume


def test_resume_after_an_interruption_runs_only_what_is_missing(tmp_path):
    # 6 runs: 2 sizes x channels 1, 2, 0 (0 does not validate)
    path = write_exp(tmp_path, sweep={"workload.size": ["1MiB", "2MiB"], "workload.channels": [1, 2, 0]})
    exp = load_experiment(path)
    planned = expand(exp)
    out = tmp_path / "out"
    first = Counting(interrupt_after=4)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(planned, exp, out, first)
    assert first.executed == [r.run_id for r in planned[:4]]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is False
    assert manifest["counts"] == {"planned": 6, "ok": 3, "failed": 1, "missing": 2}
    runs = pd.read_parquet(out / "runs.parquet")
    assert sorted(runs.run_id) == sorted(first.executed)
    assert len(pd.read_parquet(out / "collectives.parquet")) == 3
    ok_before = {r.run_id for r in planned[:4] if r.spec is not None}
    stamps = {f: f.stat().st_mtime_ns for run_id in ok_before for f in (out / "runs" / run_id).iterdir()}
    contents = {f: f.read_bytes() for f in stamps}
    # a half-written part left by a crash
    stale = out / "runs" / f".{planned[4].run_id}.tmp-crashed"
    stale.mkdir()
    (stale / "runs.parquet").write_bytes(b"partial")

    seen = []
    second = Counting()
    report = run_sweep(planned, exp, out, second, resume=True, on_done=lambda run, outcome: seen.append(run.run_id))
    failed_before = planned[2].run_id
    assert planned[2].spec is None  # the failed run is retried ...
    assert sorted(second.executed) == sorted([failed_before, planned[4].run_id, planned[5].run_id])
    assert seen == second.executed
    assert (report.planned, report.ran, report.skipped, report.failed) == (6, 3, 3, 2)
    for f, mtime in stamps.items():  # ... the good ones are not touched
        assert f.stat().st_mtime_ns == mtime and f.read_bytes() == contents[f]
    assert not stale.exists() and not list((out / "runs").glob(".*"))
    manifest = json.loads((out / "manifest.json").read_text())
    # every run ran but two failed: never "complete"
    assert manifest["status"] == "failed" and manifest["complete"] is False
    assert manifest["counts"] == {"planned": 6, "ok": 4, "failed": 2, "missing": 0}
    runs = pd.read_parquet(out / "runs.parquet")
    assert sorted(runs.run_id) == sorted(r.run_id for r in planned)
    assert [r["run_id"] for r in manifest["runs"]] == [r.run_id for r in planned]
    assert len(pd.read_parquet(out / "collectives.parquet")) == 4

    # nothing left to do: a second resume runs only the (still) failed ones
    third = Counting()
    report = run_sweep(planned, exp, out, third, resume=True)
    assert sorted(third.executed) == sorted(r.run_id for r in planned if r.spec is None)
    assert report.skipped == 4


def test_cli_resume_and_replace(tmp_path):
    path = write_exp(tmp_path, sweep={"workload.size": ["1MiB", "2MiB"]}, repeats=2)
    out = tmp_path / "out"
    result = invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report")
    assert result.exit_code == 0, result.output
    full = read_tables(out)
    ids = sorted(completed(out))
    assert len(ids) == 4
    # lose two runs and leave a half-written one behind
    for run_id in ids[:2]:
        for f in (out / "runs" / run_id).iterdir():
            f.unlink()
        (out / "runs" / run_id).rmdir()
    (out / "runs" / f".{ids[0]}.tmp-abc").mkdir()
    kept = {f: f.stat().st_mtime_ns for run_id in ids[2:] for f in (out / "runs" / run_id).iterdir()}
    result = invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report", "--resume")
    assert result.exit_code == 0, result.output
    assert "4 ok, 0 failed, 2 already done" in " ".join(result.output.split())
    assert all(f.stat().st_mtime_ns == m for f, m in kept.items())
    assert sorted(completed(out)) == ids and not list((out / "runs").glob(".*"))
    assert json.loads((out / "manifest.json").read_text())["complete"] is True
    resumed = read_tables(out)
    for name in TABLES:
        assert_frame_equal(normalized(full[name], name), normalized(resumed[name], name), obj=name)
    # without --resume or --force the directory is refused, untouched
    (out / "stray.txt").write_text("x")
    (out / "runs" / "0123456789ab").mkdir()
    result = invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report")
    assert result.exit_code == 2 and "--force replaces them" in " ".join(result.output.split())
    assert all(f.stat().st_mtime_ns == m for f, m in kept.items())
    # --force replaces what netsim wrote: everything runs again; what the user added stays
    result = invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report", "--force")
    assert result.exit_code == 0 and "4 ok, 0 failed, 0 already done" in " ".join(result.output.split())
    assert (out / "stray.txt").read_text() == "x" and sorted(completed(out)) == ids
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted([*ids, "0123456789ab"])
    assert all(f.stat().st_mtime_ns != m for f, m in kept.items() if f.exists())


# =========================================================================== 5. results and summaries


def test_tables_carry_run_id_variant_seed_and_the_swept_keys(equivalence):
    _, outs = equivalence
    out = outs["serial"]
    tables = read_tables(out)
    runs = tables["runs"]
    swept = ["workload.size"]
    labels = ["run_id", "variant", "seed", *swept]
    assert list(runs.columns[:5]) == ["run_id", "variant", "seed", "status", "error"]
    assert set(runs.status) == {"ok"} and "traceback" in runs.columns
    assert set(runs.variant) == {"a", "b"} and set(runs["workload.size"]) == {"1MiB", "2MiB"}
    assert sorted(set(runs.seed)) == sorted(derived_seeds(BASE["seed"], 2))
    assert runs.groupby(["variant", "workload.size"]).size().tolist() == [2, 2, 2, 2]
    for name, df in tables.items():
        assert len(df) or name == "iterations", name  # no training: no iterations
        assert set(labels) <= set(df.columns), name
        if name != "runs":
            assert list(df.columns[:4]) == labels, name
        if name != "iterations":
            assert set(df.run_id) == set(runs.run_id), name
        merged = df[labels].drop_duplicates().merge(runs[labels], on="run_id", suffixes=("", "_run"))
        assert len(merged) == df.run_id.nunique()
        for col in labels[1:]:
            assert (merged[col] == merged[f"{col}_run"]).all(), (name, col)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "sweep" and manifest["complete"] is True
    assert manifest["axes"] == [["workload.size"]] and manifest["variants"] == ["a", "b"]
    assert manifest["repeats"] == 2 and manifest["counts"]["ok"] == 8 and len(manifest["runs"]) == 8
    # the per-run parts hold the same rows
    for run_id in runs.run_id:
        part = pd.read_parquet(out / "runs" / run_id / "collectives.parquet")
        whole = tables["collectives"][tables["collectives"].run_id == run_id].reset_index(drop=True)
        assert_frame_equal(part, whole)


def test_interval_is_the_student_t_interval():
    values = np.array([1.0, 2.0, 4.0, 7.0])
    mean, half, n = interval(values)
    s = math.sqrt(sum((v - 3.5) ** 2 for v in values) / 3)
    t975_3 = 3.182446305284263  # Student t, 3 degrees of freedom, 97.5th percentile
    assert (mean, n) == (3.5, 4) and half == pytest.approx(t975_3 * s / 2, rel=1e-12)
    t95_3 = 2.353363434801823
    assert interval(values, 0.90)[1] == pytest.approx(t95_3 * s / 2, rel=1e-12)
    mean, half, n = interval(np.array([2.0, np.nan, 4.0, np.inf]))
    assert (mean, n) == (3.0, 2) and half == pytest.approx(12.706204736174707 * math.sqrt(2) / math.sqrt(2))
    mean, half, n = interval(np.array([5.0]))
    assert (mean, n) == (5.0, 1) and math.isnan(half)
    mean, half, n = interval(np.array([]))
    assert n == 0 and math.isnan(mean) and math.isnan(half)
    assert interval(np.array([3.0, 3.0, 3.0]))[1] == 0.0


def test_results_command_prints_mean_and_interval_and_writes_the_csv(equivalence, tmp_path):
    _, outs = equivalence
    out = outs["serial"]
    csv = tmp_path / "summary.csv"
    result = invoke("results", out, "--csv", csv)
    assert result.exit_code == 0, result.output
    summary, keys, metrics = summarize(out)
    assert keys == ["variant", "workload.size"]
    assert {"collective_time_s", "busbw_Bps"} <= set(metrics)
    assert len(summary) == 4 and (summary.runs == 2).all() and (summary.failed == 0).all()
    lines = [l for l in result.output.splitlines() if "±" in l and l.startswith("│")]
    assert len(lines) == 4
    for v, size in zip(summary.variant, summary["workload.size"]):
        assert any(v in l and size in l for l in lines)
    # the summary is the per-group Student-t interval of runs.parquet
    runs = pd.read_parquet(out / "runs.parquet")
    for _, row in summary.iterrows():
        group = runs[(runs.variant == row.variant) & (runs["workload.size"] == row["workload.size"])]
        for m in metrics:
            mean, half, n = interval(group[m].to_numpy(dtype=float))
            assert row[m] == pytest.approx(mean) and row[f"{m}_n"] == n == 2
            assert (math.isnan(half) and math.isnan(row[f"{m}_ci95"])) or row[f"{m}_ci95"] == pytest.approx(half)
    table = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    assert list(table.columns) == list(summary.columns)
    assert list(table.columns[:4]) == ["variant", "workload.size", "runs", "failed"]
    assert_frame_equal(table, summary, check_dtype=False)
    # --metric picks columns; an unknown one is bad input
    result = invoke("results", out, "--metric", "busbw_Bps", "--csv", tmp_path / "one.csv")
    assert result.exit_code == 0
    assert list(pd.read_csv(tmp_path / "one.csv").columns[-3:]) == ["busbw_Bps", "busbw_Bps_ci95", "busbw_Bps_n"]
    result = invoke("results", out, "--metric", "nope")
    assert result.exit_code == 2 and "unknown metric nope" in result.output
    result = invoke("results", tmp_path)
    assert result.exit_code == 2


def test_netsim_run_on_a_sweep_file_matches_netsim_sweep_serial(equivalence, tmp_path):
    path, outs = equivalence
    out = tmp_path / "run"
    result = invoke("run", path, "--out", out, "--no-report")
    assert result.exit_code == 0, result.output
    assert "8 ok, 0 failed" in " ".join(result.output.split())
    assert_same_results(outs["serial"], out)
    parts = [sorted(p.name for p in (d / "runs").iterdir()) for d in (out, outs["serial"])]
    assert parts[0] == parts[1] and len(parts[0]) == 8


def test_results_of_a_single_run_directory(tmp_path):
    path = write_exp(tmp_path)
    out = tmp_path / "single"
    assert invoke("run", path, "--out", out, "--no-report").exit_code == 0
    summary, keys, metrics = summarize(out)
    assert keys == ["variant"] and len(summary) == 1 and summary.runs.iloc[0] == 1 and "busbw_Bps" in metrics
    assert math.isnan(summary.busbw_Bps_ci95.iloc[0])
    assert invoke("results", out).exit_code == 0


# =========================================================================== 6. bugs found


def test_swept_values_of_mixed_types_are_written(tmp_path):
    path = write_exp(tmp_path, sweep={"workload.size": ["1MiB", 4194304]})
    out = tmp_path / "out"
    result = invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report")
    assert result.exit_code == 0, result.output
    assert len(pd.read_parquet(out / "runs.parquet")) == 2
    assert json.loads((out / "manifest.json").read_text())["complete"] is True


@pytest.mark.parametrize("key", ["topology", "workload"])
def test_a_variant_can_take_its_topology_or_workload_from_a_file(tmp_path, key):
    (tmp_path / "big.yaml").write_text(yaml.safe_dump(dict(BASE["topology"], spines=4, nics_per_host=2)))
    (tmp_path / "wl.yaml").write_text(yaml.safe_dump({"type": "collective", "op": "allreduce", "algorithm": "ring",
                                                      "size": "4MiB", "channels": 2}))
    file = {"topology": "big.yaml", "workload": "wl.yaml"}[key]
    path = write_exp(tmp_path, variants=[{"name": "from", key: {"from": file}}, {"name": "path", key: file}])
    runs = expand(load_experiment(path))
    from_file, by_path = (getattr(r.spec, key) for r in runs)
    assert from_file == by_path  # {from: FILE} with nothing to override is the file itself


@pytest.mark.parametrize("order", ["file-first", "key-first"])
def test_sweeping_a_topology_file_and_one_of_its_keys(tmp_path, order):
    (tmp_path / "t2.yaml").write_text(yaml.safe_dump(BASE["topology"]))
    (tmp_path / "t4.yaml").write_text(yaml.safe_dump(dict(BASE["topology"], spines=4)))
    axes = [("topology", ["t2.yaml", "t4.yaml"]), ("topology.uplink.count", [1, 2])]
    if order == "key-first":
        axes.reverse()
    runs = expand(load_experiment(write_exp(tmp_path, sweep=dict(axes))))
    assert len(runs) == 4 and all(r.spec is not None for r in runs), [r.error for r in runs]
    assert {(r.spec.topology.spines, r.spec.topology.uplink.count) for r in runs} == {(2, 1), (2, 2), (4, 1), (4, 2)}
    assert len(unique_ids(runs)) == 4


def test_a_point_that_cannot_be_resolved_still_counts_once_per_seed(tmp_path):
    (tmp_path / "wl.yaml").write_text(yaml.safe_dump(BASE["workload"]))
    path = write_exp(tmp_path, sweep={"workload": ["wl.yaml", "missing.yaml"]}, repeats=2)
    runs = expand(load_experiment(path))
    bad = [r for r in runs if r.spec is None]
    assert bad and all("missing.yaml" in r.error for r in bad)
    assert len(runs) == 2 * 2
    assert sorted(r.seed for r in bad) == sorted(derived_seeds(BASE["seed"], 2))


def test_tables_have_the_label_columns_when_every_run_failed(tmp_path):
    path = write_exp(tmp_path, sweep={"workload.channels": [0, 65]})
    out = tmp_path / "out"
    assert invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report").exit_code == 1
    assert len(pd.read_parquet(out / "runs.parquet")) == 2
    for name in TABLES:
        df = pd.read_parquet(out / f"{name}.parquet")
        assert {"run_id", "variant", "seed", "workload.channels"} <= set(df.columns), (name, list(df.columns))


def test_a_malformed_set_is_bad_input(tmp_path):
    path = write_exp(tmp_path, sweep={"workload.size": ["1MiB", "2MiB"]})
    with pytest.raises(ConfigError, match="--set expects KEY=VALUE"):
        load_experiment(path, overrides=["workload.size"])
    out = tmp_path / "out"
    result = invoke("sweep", path, "--out", out, "--executor", "serial", "--no-report", "--set", "workload.size")
    assert result.exit_code == 2 and "KEY=VALUE" in result.output and not out.exists()


_CELLS = {"i": st.integers(-2**40, 2**40), "f": st.floats(allow_nan=True), "s": st.text(max_size=4),
          "o": st.none() | st.text(max_size=2)}


@st.composite
def _parts(draw):
    """1-6 small DataFrames; with ``same``, one set of columns and dtypes, else random subsets of them."""
    kinds = draw(st.lists(st.sampled_from(sorted(_CELLS)), min_size=1, max_size=5))
    same = draw(st.booleans())
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        cols = list(enumerate(kinds)) if same else draw(st.lists(st.sampled_from(list(enumerate(kinds))),
                                                                  min_size=1, unique=True))
        rows = draw(st.integers(0, 3))
        parts.append(pd.DataFrame({f"{k}{i}": draw(st.lists(_CELLS[k], min_size=rows, max_size=rows))
                                   for i, k in cols}))
    return parts


@settings(max_examples=60, deadline=None)
@given(_parts())
def test_combining_arrow_parts_stacks_them_as_pandas_does(parts):
    """The combined tables come from the parts as written (Arrow tables): one schema is stacked in
    Arrow, anything else by pandas; either way, the DataFrame pandas makes of the parts read back."""
    tables = [pa.Table.from_pandas(p, preserve_index=False) for p in parts]
    expected = pd.concat([t.to_pandas() for t in tables], ignore_index=True)
    assert_frame_equal(_concat(tables), expected)
    assert_frame_equal(_concat([*tables[:-1], tables[-1].to_pandas()]), expected)  # a failed run's row


@settings(max_examples=30, deadline=None)
@given(_parts())
def test_a_runs_tables_reach_the_driver_unchanged(parts):
    """Workers send each run's Arrow tables as IPC streams: same columns, types, values and the
    pandas metadata that gives back the same DataFrame."""
    tables = ArrowTables({f"t{i}": pa.Table.from_pandas(p, preserve_index=False) for i, p in enumerate(parts)})
    back = pickle.loads(pickle.dumps(tables))
    assert type(back) is ArrowTables and list(back) == list(tables)
    for name, table in tables.items():
        assert back[name].equals(table) and back[name].schema.equals(table.schema, check_metadata=True)
        assert_frame_equal(back[name].to_pandas(), table.to_pandas())

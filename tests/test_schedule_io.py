"""Schedules as Parquet: exact round trips, files written by other tools, and one clear error per bad file."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.collectives import build_collective
from netsim.engine.model import ScheduleBuilder
from netsim.engine.schedule_io import ranks_of, read_schedule, write_schedule
from netsim.errors import ConfigError


def assert_same(a, b):
    for name in ("kind", "conn", "amount", "dep_ptr", "dep_idx"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.connections.connections() == b.connections.connections()


@st.composite
def schedules(draw):
    """Random DAGs over random connections: sends, delays and joins, each after some earlier tasks."""
    b = ScheduleBuilder()
    ranks = draw(st.integers(2, 6))
    for _ in range(draw(st.integers(0, 5))):
        src, dst = draw(st.sampled_from([(s, d) for s in range(ranks) for d in range(ranks) if s != d]))
        b.connect(src, dst, draw(st.integers(0, 3)), draw(st.integers(0, 2)), draw(st.integers(0, 2)),
                  draw(st.booleans()))
    for _ in range(draw(st.integers(0, 30))):
        n = b.n_tasks
        after = [draw(st.lists(st.integers(0, n - 1), max_size=3, unique=True))] if n else None
        kind = draw(st.sampled_from(["send", "delay", "join"] if len(b.connections) else ["delay", "join"]))
        if kind == "send":
            b.send(draw(st.integers(0, len(b.connections) - 1)), draw(st.floats(0, 1e12)), after=after)
        elif kind == "delay":
            b.delay(draw(st.floats(0, 10)), after=after)
        else:
            b.join(after=after if after else None)
    return b.build()


@settings(max_examples=60, deadline=None)
@given(schedule=schedules())
def test_round_trip_is_exact(tmp_path_factory, schedule):
    path = tmp_path_factory.mktemp("rt") / "s.parquet"
    back = read_schedule(write_schedule(schedule, path))
    assert_same(schedule, back)
    back.check()


def test_round_trip_of_a_collective_keeps_every_column(tmp_path):
    s = build_collective("allreduce", "ring", [3, 1, 2, 0], 4e6, channels=2, job=1, comm=2, tcp=True)
    back = read_schedule(write_schedule(s, tmp_path / "ring.parquet"))
    assert_same(s, back)
    assert ranks_of(back) == 4
    # the file is plain Parquet any tool reads: one row per task
    table = pq.read_table(tmp_path / "ring.parquet")
    assert table.num_rows == len(s) and table.column_names == ["kind", "amount", "deps", "conn"]
    assert set(table.column("kind").to_pylist()) == {"send", "join"}


def test_a_file_with_inline_connections_reads(tmp_path):
    """What another tool would write: no conn column, no metadata; src/dst per send."""
    table = pa.table({"kind": ["send", "delay", "send", "join"], "amount": [1e6, 2e-6, 5e5, 0.0],
                      "deps": [[], [0], [1], [0, 2]], "src": [0, None, 1, None], "dst": [1, None, 0, None],
                      "channel": [0, None, 1, None]})
    pq.write_table(table, tmp_path / "ext.parquet")
    s = read_schedule(tmp_path / "ext.parquet", n_ranks=2)
    assert s.conn.tolist() == [0, -1, 1, -1] and s.connections[1].channel == 1 and s.deps(3).tolist() == [0, 2]


def _write(tmp_path, **cols):
    base = {"kind": ["send", "join"], "amount": [1.0, 0.0], "deps": [[], [0]], "src": [0, None], "dst": [1, None]}
    base.update(cols)
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(base), path)
    return path


@pytest.mark.parametrize("cols, message", [
    ({"kind": ["send", "wait"]}, "row 1 (task 1): unknown kind 'wait'"),
    ({"deps": [[1], []]}, "row 0 (task 0): depends on task 1, which comes later"),
    ({"deps": [[], [7]]}, "row 1 (task 1): depends on task 7, which does not exist"),
    ({"deps": [[0], []]}, "row 0 (task 0): depends on task 0, which is itself"),
    ({"amount": [-5.0, 0.0]}, "row 0 (task 0): amount must be finite and >= 0"),
    ({"amount": [float("nan"), 0.0]}, "row 0 (task 0): amount must be finite"),
    ({"amount": [1.0, 2.0]}, "row 1 (task 1): a join takes no time"),
    ({"dst": [9, None]}, "row 0 (task 0): dst rank 9 is out of range: the job has 4 ranks"),
    ({"src": [None, None]}, "row 0 (task 0): a send needs an integer src"),
])
def test_bad_files_name_the_file_and_row(tmp_path, cols, message):
    path = _write(tmp_path, **cols)
    with pytest.raises(ConfigError) as err:
        read_schedule(path, n_ranks=4)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_bad_metadata_and_missing_columns(tmp_path):
    s = build_collective("allreduce", "ring", [0, 1], 1e6)
    path = write_schedule(s, tmp_path / "s.parquet")
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[b"netsim.connections"] = json.dumps({"src": [0]}).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)
    with pytest.raises(ConfigError, match="netsim.connections metadata must be JSON"):
        read_schedule(path)
    pq.write_table(pa.table({"kind": ["join"]}), path)
    with pytest.raises(ConfigError, match="missing amount, deps"):
        read_schedule(path)
    path.write_bytes(b"not parquet")
    with pytest.raises(ConfigError, match="cannot read the schedule"):
        read_schedule(path)
    with pytest.raises(ConfigError, match="schedule file not found"):
        read_schedule(tmp_path / "nope.parquet")


def test_cli_bad_schedule_exit_2_names_file_and_row(tmp_path):
    import yaml
    from typer.testing import CliRunner

    from netsim.cli import app

    pq.write_table(pa.table({"kind": ["send", "send"], "amount": [1.0, 1.0], "deps": [[], [0]],
                             "src": [0, 3], "dst": [1, 9]}), tmp_path / "s.parquet")
    topology = {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 4, "gpus_per_host": 1,
                "nics_per_host": 1, "nic": {"bandwidth": "1GB/s"}, "uplink": {"bandwidth": "1GB/s"},
                "intra_host": {"bandwidth": "10GB/s"}}
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"name": "t", "topology": topology,
                                   "workload": {"type": "schedule", "path": "s.parquet", "ranks": 4}}, sort_keys=False))
    result = CliRunner().invoke(app, ["validate", str(exp)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in text
    assert "workload.path" in text and "s.parquet: row 1 (task 1): dst rank 9 is out of range" in text
    # without ranks, the job places as many GPUs as the schedule names: 10 > the fabric's 4
    exp.write_text(exp.read_text().replace("  ranks: 4\n", ""))
    result = CliRunner().invoke(app, ["validate", str(exp)])
    assert result.exit_code == 2 and "10" in result.output

"""Schedules as Parquet: exact round trips, files written by other tools, and one clear error per bad file."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim.cli import app
from netsim.collectives import build_collective
from netsim.engine import schedule_io
from netsim.engine.model import ScheduleBuilder
from netsim.engine.schedule_io import ranks_of, read_schedule, write_schedule
from netsim.errors import ConfigError

runner = CliRunner()
TOPOLOGY = {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 4, "gpus_per_host": 1,
            "nics_per_host": 1, "nic": {"bandwidth": "1GB/s"}, "uplink": {"bandwidth": "1GB/s"},
            "intra_host": {"bandwidth": "10GB/s"}}


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
    for _ in range(draw(st.integers(1, 30))):
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


def inline(**cols) -> pa.Table:
    """What another tool would write: no conn column, no metadata; src/dst per send (``None`` drops a column)."""
    base = {"kind": ["send", "delay", "send", "join"], "amount": [1e6, 2e-6, 5e5, 0.0],
            "deps": [[], [0], [1], [0, 2]], "src": [0, None, 1, None], "dst": [1, None, 0, None],
            "channel": [0, None, 1, None]}
    base.update(cols)
    return pa.table({k: v for k, v in base.items() if v is not None})


def test_a_file_with_inline_connections_reads(tmp_path):
    pq.write_table(inline(), tmp_path / "ext.parquet")
    s = read_schedule(tmp_path / "ext.parquet", n_ranks=2)
    assert s.conn.tolist() == [0, -1, 1, -1] and s.connections[1].channel == 1 and s.deps(3).tolist() == [0, 2]


def test_pandas_style_columns_read_as_integers(tmp_path):
    """Whole numbers stored as floats (pandas' columns with empty cells), uint8, dictionary text, any-case kinds
    and a dependency listed twice read as the plain file does."""
    pq.write_table(inline(), tmp_path / "plain.parquet")
    pq.write_table(inline(kind=pa.array(["SEND", "Delay", "send", "join"]).dictionary_encode(),
                          src=[0.0, None, 1.0, None], dst=pa.array([1, None, 0, None], pa.uint8()),
                          deps=pa.array([[], [0.0], [1.0], [0.0, 2.0]], pa.large_list(pa.float64())),
                          amount=[1000000, 0.000002, 500000, 0]), tmp_path / "odd.parquet")
    assert_same(read_schedule(tmp_path / "plain.parquet"), read_schedule(tmp_path / "odd.parquet"))
    pq.write_table(inline(deps=[[], [0, 0], [1], [0, 2]]), tmp_path / "twice.parquet")
    assert read_schedule(tmp_path / "twice.parquet").deps(1).tolist() == [0, 0]


@pytest.mark.parametrize("cols, message", [
    ({"kind": ["send", "wait", "send", "join"]}, "row 2, column 'kind': unknown kind 'wait'"),
    ({"kind": ["send", None, "send", "join"]}, "row 2, column 'kind': empty (null)"),
    ({"kind": [0, 1, 0, 2]}, "column 'kind': holds int64 values; expected text"),
    ({"deps": [[1], [0], [1], [0, 2]]}, "row 1, column 'deps': depends on task 1 (row 2), which comes later"),
    ({"deps": [[], [0], [1], [0, 7]]}, "row 4, column 'deps': depends on task 7, which does not exist"),
    ({"deps": [[], [1], [1], [0, 2]]}, "row 2, column 'deps': depends on task 1 (row 2), which is itself"),
    ({"deps": [[], [-1], [1], [0, 2]]}, "row 2, column 'deps': depends on task -1, which does not exist"),
    ({"deps": pa.array([[], [2**64 - 1], [1], [0]], pa.list_(pa.uint64()))}, "row 2, column 'deps': depends on task"),
    ({"deps": [[], [0.5], [1.0], [0.0]]}, "row 2, column 'deps': 0.5 is not a whole number"),
    ({"deps": [[], None, [1], [0, 2]]}, "row 2, column 'deps': empty (null)"),
    ({"deps": [[], [None], [1], [0, 2]]}, "row 2, column 'deps': empty (null)"),
    ({"deps": [0, 0, 1, 2]}, "column 'deps': holds int64 values; expected lists"),
    ({"amount": [-5.0, 2e-6, 5e5, 0.0]}, "row 1, column 'amount': -5.0 for a send; allowed: bytes from 0 to 2**60"),
    ({"amount": [float("nan"), 2e-6, 5e5, 0.0]}, "row 1, column 'amount': nan for a send"),
    ({"amount": [1e6, 2e6, 5e5, 0.0]}, "row 2, column 'amount': 2000000.0 for a delay; allowed: seconds from 0 to 1e+06"),
    ({"amount": [1e6, 2e-6, 5e5, 1.0]}, "row 4, column 'amount': 1.0 for a join; allowed: 0"),
    ({"amount": [1e6, None, 5e5, 0.0]}, "row 2, column 'amount': empty (null)"),
    ({"amount": [True, False, True, False]}, "column 'amount': holds bool values"),
    ({"src": [0.5, None, 1, None]}, "row 1, column 'src': 0.5 is not a whole number; expected a rank (the job has 4 ranks)"),
    ({"dst": [9, None, 0, None]}, "row 1, column 'dst': 9 is out of range: expected a rank (the job has 4 ranks), "
                                  "from 0 to 3"),
    ({"src": [None, None, 1, None]}, "row 1, column 'src': empty (null); a send needs a src rank"),
    ({"src": [0, 2, 1, None]}, "row 2, column 'src': 2 on a delay: only a send has a connection"),
    ({"src": [False, None, True, None]}, "column 'src': holds bool values"),
    ({"dst": [0, None, 0, None]}, "row 1, column 'dst': dst is rank 0, the same as src"),
    ({"channel": pa.array([2**63, None, 1, None], pa.uint64())}, "row 1, column 'channel': 9223372036854775808 is "
                                                                  "out of range"),
    ({"comm": [2**40, None, 0, None]}, "row 1, column 'comm': 1099511627776 is out of range"),
    ({"job": [-1, None, 0, None]}, "row 1, column 'job': -1 is out of range"),
    ({"tcp": [2, None, 0, None]}, "row 1, column 'tcp': 2 is out of range: expected 0 or 1"),
    ({"dst": None}, "row 1, column 'dst': a send needs a dst rank, but the file has no dst column"),
    ({"chanel": [0, None, 1, None]}, "unknown column 'chanel'; the columns are kind, amount, deps, conn, src, dst, "
                                     "channel, job, comm, tcp, overhead_scale; did you mean 'channel'?"),
    ({"deps": None}, "no deps column"),
])
def test_bad_files_name_the_file_row_and_column(tmp_path, cols, message):
    path = tmp_path / "bad.parquet"
    pq.write_table(inline(**cols), path)
    with pytest.raises(ConfigError) as err:
        read_schedule(path, n_ranks=4)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value), str(err.value)


def _exported(tmp_path):
    path = write_schedule(build_collective("allreduce", "ring", [0, 1, 2], 1e6), tmp_path / "s.parquet")
    return path, pq.read_table(path)


def _with_meta(table, **changes):
    meta = dict(table.schema.metadata)
    meta.update({k.encode(): v if isinstance(v, bytes) else json.dumps(v).encode() for k, v in changes.items()})
    return table.replace_schema_metadata(meta)


@pytest.mark.parametrize("change, message", [
    (lambda t: _with_meta(t, **{"netsim.connections": b"{nope"}), "netsim.connections metadata must be JSON"),
    (lambda t: _with_meta(t, **{"netsim.connections": {"src": [0]}}), "must be JSON with lists src, dst"),
    (lambda t: _with_meta(t, **{"netsim.connections": {"src": [0.5, 1, 2], "dst": [1, 2, 0], "channel": [0] * 3,
                                                        "job": [0] * 3, "comm": [0] * 3, "tcp": [0] * 3}}),
     "netsim.connections metadata: connection 0: src 0.5: expected a rank"),
    (lambda t: _with_meta(t, **{"netsim.connections": {"src": [0, 1, 2], "dst": [1, 2, 0], "channel": [2**63] * 3,
                                                        "job": [0] * 3, "comm": [0] * 3, "tcp": [0] * 3}}),
     "connection 0: channel 9223372036854775808: expected a channel id"),
    (lambda t: _with_meta(t, **{"netsim.connections": {"src": [0, 1], "dst": [1, 2, 0], "channel": [0] * 3,
                                                        "job": [0] * 3, "comm": [0] * 3, "tcp": [0] * 3}}),
     "lists have different lengths"),
    (lambda t: _with_meta(t, **{"netsim.schedule": b"9"}), "schedule format version '9'; this netsim reads version 1"),
    (lambda t: t.replace_schema_metadata({}), "a conn column but no netsim.connections metadata"),
    (lambda t: t.append_column("src", pa.array([0] * t.num_rows)), "both a conn column and src"),
    (lambda t: t.set_column(3, "conn", pa.array([0.5] * t.num_rows)), "row 1, column 'conn': 0.5 is not a whole"),
    (lambda t: t.set_column(3, "conn", pa.array([None] * t.num_rows, pa.int64())), "row 1, column 'conn': empty "
                                                                                   "(null) on a send"),
    (lambda t: t.slice(0, 0), "no tasks: the schedule has no rows"),
])
def test_bad_exported_files(tmp_path, change, message):
    path, table = _exported(tmp_path)
    pq.write_table(change(table), path)
    with pytest.raises(ConfigError) as err:
        read_schedule(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value), str(err.value)


def test_files_that_are_not_schedules(tmp_path):
    path = tmp_path / "s.parquet"
    path.write_bytes(b"not parquet")
    with pytest.raises(ConfigError, match="not a readable Parquet file"):
        read_schedule(path)
    with pytest.raises(ConfigError, match="schedule file not found"):
        read_schedule(tmp_path / "nope.parquet")
    with pytest.raises(ConfigError, match="a directory"):
        read_schedule(tmp_path)
    t = inline()
    pq.write_table(pa.Table.from_arrays([*t.columns, t.column("kind")], names=[*t.column_names, "kind"]), path)
    with pytest.raises(ConfigError, match="column 'kind' appears 2 times"):
        read_schedule(path)


def test_sizes_are_checked_before_the_columns_are_read_whole(tmp_path, monkeypatch):
    path = tmp_path / "s.parquet"
    pq.write_table(inline(), path)
    monkeypatch.setattr(schedule_io, "MAX_TASKS", 3)
    with pytest.raises(ConfigError, match="4 tasks; a schedule holds at most 3"):
        read_schedule(path)
    monkeypatch.setattr(schedule_io, "MAX_TASKS", 4)
    monkeypatch.setattr(schedule_io, "MAX_DEPENDENCIES", 3)
    with pytest.raises(ConfigError, match="more than 3 dependencies"):
        read_schedule(path)
    # counted a batch at a time, in several row groups: reading stops at the first batch past the limit
    monkeypatch.setattr(schedule_io, "MAX_DEPENDENCIES", 4)
    monkeypatch.setattr(schedule_io, "_DEPS_BATCH", 1)
    pq.write_table(inline(), path, row_group_size=2)
    assert len(read_schedule(path)) == 4
    pq.write_table(inline(deps=[[], [0], [0, 1], [0, 1, 2]]), path, row_group_size=2)
    with pytest.raises(ConfigError, match="more than 4 dependencies"):
        read_schedule(path)


ODD = st.one_of(st.none(), st.booleans(), st.integers(-2, 2**64 - 1), st.floats(allow_nan=True),
                st.sampled_from(["send", "delay", "join", "x", ""]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_mutation_reads_identically_or_is_refused(tmp_path, data):
    """Set one cell of a valid file (inline or exported) to an odd value, drop or swap rows, or flip a byte:
    the file reads as a schedule that passes the engine's checks, or it is refused with ConfigError."""
    exported = data.draw(st.booleans())
    if exported:
        path, table = _exported(tmp_path)
    else:
        path, table = tmp_path / "s.parquet", inline()
    op = data.draw(st.sampled_from(["cell", "rows", "byte"]))
    if op == "cell":
        column = data.draw(st.sampled_from(table.column_names))
        row = data.draw(st.integers(0, table.num_rows - 1))
        values = table.column(column).to_pylist()
        value = data.draw(ODD)
        values[row] = [value] if column == "deps" and data.draw(st.booleans()) else value
        try:
            array = pa.array(values)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            array = pa.array([None if v is None else str(v) for v in values])
        pq.write_table(table.set_column(table.column_names.index(column), column, array), path)
    elif op == "rows":
        order = data.draw(st.lists(st.integers(0, table.num_rows - 1), max_size=table.num_rows + 2))
        pq.write_table(table.take(pa.array(order, pa.int64())), path)
    else:
        pq.write_table(table, path)
        raw = bytearray(path.read_bytes())
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
        path.write_bytes(bytes(raw))
    try:
        s = read_schedule(path, n_ranks=4)
    except ConfigError as exc:
        assert str(exc).startswith(str(path))
        return
    s.check()
    assert len(s) >= 1 and np.all(s.amount >= 0) and np.all(np.isfinite(s.amount))
    c = s.connections
    if len(c):
        assert c.column("src").max() < 4 and c.column("dst").max() < 4 and np.all(c.column("src") != c.column("dst"))


def _experiment(tmp_path, name="exp.yaml", **workload) -> str:
    exp = tmp_path / name
    exp.write_text(yaml.safe_dump({"name": "t", "topology": TOPOLOGY, "workload": workload}, sort_keys=False))
    return str(exp)


def test_cli_bad_schedule_exit_2_names_file_row_and_column(tmp_path):
    pq.write_table(pa.table({"kind": ["send", "send"], "amount": [1.0, 1.0], "deps": [[], [0]],
                             "src": [0, 3], "dst": [1, 9]}), tmp_path / "s.parquet")
    exp = _experiment(tmp_path, type="schedule", path="s.parquet", ranks=4)
    result = runner.invoke(app, ["validate", exp])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in text
    assert "workload.path" in text and "s.parquet: row 2, column 'dst': 9 is out of range" in text
    # without ranks, the job places as many GPUs as the schedule names: 10 > the fabric's 4
    exp = _experiment(tmp_path, type="schedule", path="s.parquet")
    result = runner.invoke(app, ["validate", exp])
    assert result.exit_code == 2 and "10" in result.output


def test_export_refuses_to_overwrite_an_input_or_write_another_format(tmp_path):
    exp = _experiment(tmp_path, type="collective", op="allreduce", algorithm="ring", size="1MiB")
    before = (tmp_path / "exp.yaml").read_text()
    for out, message in ((exp, "is the input file"), (str(tmp_path / "x.csv"), "ending in .parquet")):
        result = runner.invoke(app, ["export-schedule", exp, out, "--force"])
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert (tmp_path / "exp.yaml").read_text() == before
    (tmp_path / "link.parquet").symlink_to(tmp_path / "exp.yaml")
    result = runner.invoke(app, ["export-schedule", exp, str(tmp_path / "link.parquet"), "--force"])
    assert result.exit_code == 2 and (tmp_path / "exp.yaml").read_text() == before
    # the schedule a schedule workload replays is an input too
    write_schedule(build_collective("allreduce", "ring", [0, 1], 1e6), tmp_path / "s.parquet")
    kept = (tmp_path / "s.parquet").read_bytes()
    replay = _experiment(tmp_path, "replay.yaml", type="schedule", path="s.parquet")
    result = runner.invoke(app, ["export-schedule", replay, str(tmp_path / "s.parquet"), "--force"])
    assert result.exit_code == 2 and "is the input file" in result.output
    assert (tmp_path / "s.parquet").read_bytes() == kept
    result = runner.invoke(app, ["export-schedule", replay, str(tmp_path / "again.parquet")])
    assert result.exit_code == 0, result.output
    assert_same(read_schedule(tmp_path / "s.parquet"), read_schedule(tmp_path / "again.parquet"))


def test_export_of_a_cluster_experiment_says_what_can_be_exported(tmp_path):
    (tmp_path / "jobs.csv").write_text("job_id,submit_time,gpus,duration\na,0,4,100\n")
    exp = tmp_path / "cl.yaml"
    exp.write_text(yaml.safe_dump({"name": "cl", "topology": TOPOLOGY,
                                   "cluster": {"trace": "jobs.csv", "scheduler": "fifo"}}))
    result = runner.invoke(app, ["export-schedule", str(exp), str(tmp_path / "x.parquet")])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "cluster" in text and "collective, sequence, chakra and schedule" in text, text
    assert not (tmp_path / "x.parquet").exists()

"""The job-trace reader as a file reader (issue 39): physical line numbers, comments that never eat data,
the CSV layout, Parquet types and sizes, linear checking, and trace-synth's arguments."""

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import netsim.cluster.trace as trace_module
from netsim.cli import app
from netsim.cluster.synthetic import synthetic_trace
from netsim.cluster.trace import read_trace, validate_trace
from netsim.errors import ConfigError

HEAD = "job,submit_s,gpus,model,tp,pp,dp,iterations,duration_s,user\n"
runner = CliRunner()
#: Rows that are valid on their own (job names are set by the strategy).
VALID = ["{job},0,8,gpt-3.6b,8,1,1,2,,alice", "{job},12.5,16,gpt-3.6b,8,2,1,,600,bob",
         "{job},30,32,gpt-7.5b,8,2,2,3,,", "{job},7,16,collective:allreduce:ring:1MiB,,,,,60,dave",
         "{job},1,8,gpt-3.6b,,,,1,,team#1"]
FILLER = ["", "   ", "# a comment", "  # an indented comment", "#job,submit_s"]


def write(tmp_path: Path, text: str | bytes, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def error_of(path: Path, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        read_trace(path, **kw)
    return str(info.value)


rows_st = st.lists(st.sampled_from(range(len(VALID))), min_size=1, max_size=12)
filler_st = st.lists(st.lists(st.sampled_from(FILLER), max_size=2), min_size=13, max_size=13)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=rows_st, filler=filler_st, bad=st.integers(0, 11))
def test_comments_and_blank_lines_change_nothing_and_errors_name_the_physical_line(tmp_path, kinds, filler, bad):
    rows = [VALID[k].format(job=f"j{i}") for i, k in enumerate(kinds)]
    plain = read_trace(write(tmp_path, HEAD + "".join(r + "\n" for r in rows), "plain.csv"))
    lines = [*filler[0], HEAD.rstrip("\n")]
    for row, extra in zip(rows, filler[1:]):
        lines += [row, *extra]
    padded = read_trace(write(tmp_path, "\n".join(lines) + "\n", "padded.csv"))
    pd.testing.assert_frame_equal(plain.jobs, padded.jobs)
    assert "team#1" in set(padded.jobs["user"]) or 4 not in kinds  # a '#' inside a field is data
    target = rows[bad % len(rows)]
    line = lines.index(target) + 1
    cells = target.split(",")
    lines[line - 1] = ",".join([*cells[:2], "2.5", *cells[3:]])
    message = error_of(write(tmp_path, "\n".join(lines) + "\n", "bad.csv"))
    assert re.match(rf".*bad\.csv:{line}: column 'gpus': expected a whole number of GPUs .* got '2\.5'$", message)


MUTANTS = ["", "-1", "0", "2.5", "1e30", "nan", "inf", "x", "#", '"', "True", "1" * 300, "\u202e", "1e3", ",", "\r"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=rows_st, row=st.integers(0, 11), cell=st.integers(0, 9), value=st.sampled_from(MUTANTS))
def test_any_changed_cell_reads_or_is_refused_at_its_line(tmp_path, kinds, row, cell, value):
    rows = [VALID[k].format(job=f"j{i}").split(",") for i, k in enumerate(kinds)]
    row %= len(rows)
    rows[row][cell] = value
    path = write(tmp_path, HEAD + "".join(",".join(r) + "\n" for r in rows))
    comment = cell == 0 and value.startswith("#")  # (a line starting with '#' is a comment, by definition)
    try:
        trace = read_trace(path)
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith(f"{path}:{row + 2}: ") or "duplicate job" in message or \
            (comment and message.startswith(f"{path}:1: no jobs")), message
        assert "np." not in message and len(message) < 1500
        return
    assert len(trace) == len(rows) - comment  # accepted: every row is a job, nothing dropped or merged


def test_the_csv_layout_is_checked_line_by_line(tmp_path):
    good = "j0,0,8,gpt-3.6b,8,1,1,2,,\n"
    cases = [
        (HEAD + good + "j1,0,8,gpt-3.6b,8,1,1,2,,bob,\n", "t.csv:3: 11 fields but the header has 10 columns: a trailing comma"),
        (HEAD + "j1,0,8,gpt-3.6b\n", "t.csv:2: 4 fields but the header has 10 columns (no tp, pp, dp"),
        (HEAD + good + 'j1,0,8,gpt-3.6b,8,1,1,2,,"bob\nj2,0,8,gpt-3.6b,8,1,1,2,,x\n', "t.csv:3: a quoted field runs past"),
        ("job,submit_s,gpus,gpus,model,iterations\nj,0,8,8,gpt-3.6b,1\n", "t.csv:1: column 'gpus' appears twice"),
        ("job,submit_s,gpus,model,iterations,\nj,0,8,gpt-3.6b,1,\n", "t.csv:1: column 6 of the header has no name"),
        ((HEAD + good).replace("\n", "\r"), "t.csv:1: a carriage return inside the line"),
        ("# c\n" + HEAD, "t.csv:2: no jobs"),
        ("\n# only comments\n", "t.csv: the file is empty"),
        (HEAD + "j#1,0,8,gpt-3.6b,8,1,1,2,,\n", "t.csv:2: column 'job': expected a job name"),
        (HEAD + "j1,3.2e10,8,gpt-3.6b,8,1,1,2,,\n", "t.csv:2: column 'submit_s': expected seconds from the trace's "
                                                    "start, from 0 to 1e+09, got '3.2e10'"),
    ]
    for text, expected in cases:
        path = write(tmp_path, text)
        assert error_of(path) == expected.replace("t.csv", str(path)) or expected.replace("t.csv", str(path)) in \
            error_of(path), (text, error_of(path))
    same = read_trace(write(tmp_path, (HEAD + good).replace("\n", "\r\n"), "crlf.csv"))
    assert list(same.jobs["job"]) == ["j0"]
    assert read_trace(write(tmp_path, HEAD + 'j0,0,8,gpt-3.6b,8,1,1,2,,"smith, bob"\n')).jobs["user"][0] == "smith, bob"


def test_files_that_are_not_traces_are_refused_by_the_shared_reader(tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.csv")
    assert "not a regular file" in error_of(tmp_path / "zero.csv")
    os.symlink("loop.csv", tmp_path / "loop.csv")
    assert "symlink loop" in error_of(tmp_path / "loop.csv")
    (tmp_path / "dir.csv").mkdir()
    assert "a directory" in error_of(tmp_path / "dir.csv")
    assert "NUL" in error_of(write(tmp_path, HEAD + "j0,0,8,gpt-3.6b\0,8,1,1,2,,\n"))
    assert ":2: not UTF-8" in error_of(write(tmp_path, HEAD.encode() + b"j0,0,8,gpt-3.6b,8,1,1,2,,\xe9\n"))


def test_size_limits(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_module, "MAX_TRACE_JOBS", 3)
    rows = "".join(f"j{i},0,8,gpt-3.6b,8,1,1,2,,\n" for i in range(4))
    assert error_of(write(tmp_path, HEAD + "\n" + rows)).endswith("t.csv:6: more than 3 jobs: a trace holds at most 3")
    frame = read_trace(write(tmp_path, HEAD + rows[:-27], "three.csv")).jobs.drop(columns="kind")
    frame.iloc[:1].to_parquet(tmp_path / "one.parquet")
    assert len(read_trace(tmp_path / "one.parquet")) == 1
    pd.concat([frame, frame.assign(job=["a", "b", "c"])]).to_parquet(tmp_path / "six.parquet")
    assert "6 rows: a trace holds at most 3 jobs" in error_of(tmp_path / "six.parquet")


def test_parquet_rows_count_from_one_and_odd_types_are_refused(tmp_path, monkeypatch):
    base = {"job": ["a", "b", "c"], "submit_s": [0.0, 1.0, 2.0], "gpus": [8, 8, 8], "model": ["gpt-3.6b"] * 3,
            "iterations": [1, 1, 1]}

    def parquet(**over) -> Path:
        pq.write_table(pa.Table.from_pandas(pd.DataFrame(base | over), preserve_index=False), tmp_path / "t.parquet")
        return tmp_path / "t.parquet"
    assert error_of(parquet(gpus=[8, 0, 8])).endswith("t.parquet: row 2, column 'gpus': expected a whole number of "
                                                      "GPUs from 1 to 2,000,000, got 0")
    assert error_of(parquet(submit_s=[0.0, 1.0, 3.2e10])).endswith("got 32000000000.0")
    assert "row 1, column 'gpus'" in error_of(parquet(gpus=[True, True, True]))
    assert "first on row 1" in error_of(parquet(job=["a", "b", "a"]))
    assert "expected numbers or text" in error_of(parquet(gpus=[[8], [8], [8]]))
    n = 1000
    table = pa.table({"job": [f"j{i}" for i in range(n)], "submit_s": np.zeros(n), "gpus": np.full(n, 8),
                      "model": ["gpt-3.6b"] * n, "iterations": np.ones(n, np.int64),
                      "user": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array(["u" * 1000]))})
    pq.write_table(table, tmp_path / "t.parquet")
    assert (tmp_path / "t.parquet").stat().st_size < 100_000
    monkeypatch.setattr(trace_module, "MAX_TRACE_BYTES", 100_000)
    assert "decodes to more than 100,000 bytes" in error_of(tmp_path / "t.parquet")


def test_tables_built_in_memory_name_rows_from_one_and_show_plain_numbers():
    table = pd.DataFrame({"job": ["a", "b"], "submit_s": [np.float64(0), np.float64(3.2e10)], "gpus": [8, 8],
                          "model": ["gpt-3.6b"] * 2, "iterations": [1, 1]})
    with pytest.raises(ConfigError) as info:
        validate_trace(table)
    assert str(info.value) == ("row 2, column 'submit_s': expected seconds from the trace's start, from 0 to 1e+09, "
                               "got 32000000000.0")
    with pytest.raises(ConfigError, match="column 'gpus' appears more than once"):
        validate_trace(pd.DataFrame([["a", 0, 8, 8, "gpt-3.6b", 1]],
                                    columns=["job", "submit_s", "gpus", " gpus", "model", "iterations"]))


def test_checking_is_linear_each_row_rule_runs_once_per_distinct_job_shape(tmp_path, monkeypatch):
    calls = []
    real = trace_module._check_row
    monkeypatch.setattr(trace_module, "_check_row", lambda row, i, *a: calls.append(i) or real(row, i, *a))
    shapes = ["8,gpt-3.6b,8,1,1", "16,gpt-3.6b,8,2,1", "32,gpt-7.5b,8,2,2"]
    rows = "".join(f"j{i},{i},{shapes[i % 3]},,{60 + i},\n" for i in range(3000))
    path = write(tmp_path, HEAD + rows)
    assert len(read_trace(path)) == 3000 and calls == [0, 1, 2]
    bad = rows.replace("j2000,2000,32,gpt-7.5b,8,2,2", "j2000,2000,32,gpt-7.5b,8,2,4")
    assert error_of(write(tmp_path, HEAD + bad)).startswith(f"{path}:2002: column 'dp'")


def test_workloads_are_built_once_per_distinct_job(tmp_path, monkeypatch):
    import netsim.config
    reads = []
    real = netsim.config._read_yaml
    monkeypatch.setattr(netsim.config, "_read_yaml", lambda p, e: reads.append(p) or real(p, e))
    trace = synthetic_trace(2000, cluster_gpus=128, seed=2)
    reads.clear()  # (the generator and the checker read each preset once too)
    first = [trace.workload(job) for job in trace.jobs["job"]]
    assert len(reads) <= 2 * trace.jobs["model"].nunique()  # (its summary and its mapping), not once per job
    first[0]["parallelism"]["tp"] = -1  # a caller changing its copy changes nothing cached
    assert trace.workload(trace.jobs["job"][0])["parallelism"]["tp"] >= 1
    with pytest.raises(ConfigError, match="no job 'job-001' in the trace; did you mean"):
        trace.workload("job-001")


@pytest.mark.parametrize("kwargs,argument", [
    ({"jobs": 0}, "jobs"), ({"jobs": 1_000_001}, "jobs"), ({"seed": -1}, "seed"), ({"cluster_gpus": 0}, "cluster_gpus"),
    ({"iterations": 0}, "iterations"), ({"size_mix": {8: float("inf")}}, "size_mix"),
    ({"size_mix": {8: 1e308, 16: 1e308}}, "size_mix"), ({"rate_per_hour": float("inf")}, "rate_per_hour"),
    ({"rate_per_hour": 1e-300}, "rate_per_hour"), ({"span_s": 2e9}, "span_s"), ({"duration_sigma": 11}, "duration_sigma"),
    ({"median_duration_s": 1.0}, "median_duration_s"), ({"durations_s": [1e300]}, "durations_s"),
])
def test_synthetic_arguments_out_of_range_are_refused_before_drawing(kwargs, argument):
    with pytest.raises(ConfigError) as info:
        synthetic_trace(**({"jobs": 10} | kwargs))
    assert info.value.path == argument


def test_trace_synth_never_writes_over_an_input_and_names_the_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "workloads").mkdir()
    preset = tmp_path / "workloads/gpt-3.6b.yaml"
    preset.write_text((Path(__file__).parents[1] / "workloads/gpt-3.6b.yaml").read_text())
    os.symlink(preset, tmp_path / "p.csv")
    before = preset.read_text()
    res = runner.invoke(app, ["trace-synth", "p.csv", "--jobs", "5", "--sizes", "8:1", "--force"])
    assert res.exit_code == 2 and "is the input file" in res.output and preset.read_text() == before
    for argv, option in [(["o.txt"], "OUT"), (["o.csv", "--seed", "-1"], "--seed"), (["o.csv", "--sizes", "8:1,8:2"],
                         "--sizes"), (["o.csv", "--sigma", "inf"], "--sigma"), (["o.csv", "--gpus", "0"], "--gpus")]:
        res = runner.invoke(app, ["trace-synth", *argv])
        assert res.exit_code == 2 and f"{option}: " in res.output and "Traceback" not in res.output, res.output


def test_trace_check_summary_stays_short_for_many_sizes(tmp_path):
    rows = "".join(f"j{g},0,{g},collective:allreduce:ring:1MiB,,,,1,,\n" for g in range(2, 300))
    res = runner.invoke(app, ["trace-check", str(write(tmp_path, HEAD + rows))])
    assert res.exit_code == 0 and "the 20 commonest of 298" in res.output and len(res.output.splitlines()) < 60

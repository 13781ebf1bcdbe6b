"""trace-convert on malformed sources: a bad job is dropped with a counted reason and named by its line, a
bad file or option is one located ConfigError, and no count is ever truncated or read as a string's length.

The samples are the bad-input corpus's (tests/badinputs/files/convert.py): four Philly jobs, job k on line
k + 2, and four Helios rows, row k on line k + 2; every job of both is kept when nothing is mutated.
"""

import copy
import json
import math
import re
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim.cli import app
from netsim.cluster.convert import FIRST_DROPPED, MAX_LIMIT, USER_REASON, convert, convert_helios, convert_philly
from netsim.cluster.validate import MAX_JOB_GPUS
from netsim.errors import ConfigError
from tests.badinputs.files.convert import HELIOS_ROWS, JOBS, helios_text, philly_text

runner = CliRunner()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                max_size=3), max_leaves=8)


def _philly(tmp_path: Path, jobs: list | str) -> Path:
    path = tmp_path / "cluster_job_log"
    path.write_text(jobs if isinstance(jobs, str) else philly_text(jobs))
    return path


def _helios(tmp_path: Path, rows: list | str) -> Path:
    path = tmp_path / "cluster_log.csv"
    path.write_text(rows if isinstance(rows, str) else helios_text(rows))
    return path


def _with_gpus(value) -> list:
    jobs = copy.deepcopy(JOBS)
    jobs[1]["attempts"][-1]["detail"] = [{"ip": "m0", "gpus": value}]
    return jobs


def _with_cell(column: str, value: str) -> list:
    rows = [list(r) for r in HELIOS_ROWS]
    rows[2][rows[0].index(column)] = value
    return rows


# ------------------------------------------------------------------ the examples

@pytest.mark.parametrize("gpus", ["gpu0gpu1", 4, [0, 1], ["gpu0", "gpu0"], [""], None, {"gpu0": 1}])
def test_philly_gpus_that_are_not_a_list_of_names_drop_the_job(tmp_path, gpus):
    result = convert_philly(_philly(tmp_path, _with_gpus(gpus)))
    assert list(result.trace.jobs["job"]) == [JOBS[k]["jobid"] for k in (0, 2, 3)]
    assert sum(result.dropped.values()) == 1 and result.malformed == 1
    (first,) = result.first_dropped
    assert first.line == 3 and first.job == repr(JOBS[1]["jobid"]) and str(first).startswith(
        f"{tmp_path / 'cluster_job_log'}:3: dropped job 'application_1506638472019_1': ")


@pytest.mark.parametrize("cell,kept", [("2.7", None), ("2.0", 2), ("2", 2), ("-1", None), ("1e30", None),
                                       ("inf", None), ("nan", None), ("", None), ("1_000", None), ("0x10", None)])
def test_helios_gpu_num_is_a_whole_number_or_the_job_is_dropped(tmp_path, cell, kept):
    result = convert_helios(_helios(tmp_path, _with_cell("gpu_num", cell)))
    jobs = result.trace.jobs.set_index("job")
    if kept is None:
        assert "1425512" not in jobs.index and result.first_dropped[0].line == 3
        assert cell in str(result.first_dropped[0]) or not cell
    else:
        assert jobs.loc["1425512", "gpus"] == kept


# ------------------------------------------------------------------ properties

@SETTINGS
@given(value=JSON)
def test_any_philly_gpus_value_is_counted_exactly_or_dropped(tmp_path_factory, value):
    path = _philly(tmp_path_factory.mktemp("p"), _with_gpus(value))
    result = convert_philly(path)
    jobs = result.trace.jobs.set_index("job")
    names = value if isinstance(value, list) else None
    if names and all(isinstance(g, str) and g for g in names) and len(set(names)) == len(names):
        assert jobs.loc[JOBS[1]["jobid"], "gpus"] == len(names)
    else:
        assert JOBS[1]["jobid"] not in jobs.index
        assert sum(result.dropped.values()) == 1
        assert not result.first_dropped or result.first_dropped[0].line == 3
    assert len(jobs) + sum(result.dropped.values()) == result.read == 4


@SETTINGS
@given(key=st.sampled_from(["jobid", "status", "submitted_time", "attempts", "user", "vc"]), value=JSON)
def test_any_philly_field_value_keeps_the_other_jobs(tmp_path_factory, key, value):
    jobs = copy.deepcopy(JOBS)
    jobs[1][key] = value
    result = convert_philly(_philly(tmp_path_factory.mktemp("p"), jobs))
    kept = list(result.trace.jobs["job"])
    assert [j for j in kept if j != JOBS[1]["jobid"]] == [JOBS[k]["jobid"] for k in (0, 2, 3)]
    assert len(kept) + sum(result.dropped.values()) == 4


#: A number as the docs define it: digits, an optional sign, decimal point and exponent.
PLAIN = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _whole(text: str) -> int | None:
    """What a gpu_num cell means: its whole number, or None (read with Decimal, independently of the converter)."""
    if not PLAIN.fullmatch(text.strip()):
        return None
    value = Decimal(text.strip())
    return int(value) if value == value.to_integral_value() and value <= 10 * MAX_JOB_GPUS else None


@SETTINGS
@given(cell=st.one_of(st.text(alphabet="0123456789.-+eE_ xn", max_size=8),
                      st.floats().map(repr), st.integers(-5, 3 * MAX_JOB_GPUS).map(str)))
def test_any_helios_gpu_num_is_read_exactly_or_dropped(tmp_path_factory, cell):
    path = _helios(tmp_path_factory.mktemp("h"), _with_cell("gpu_num", cell))
    result = convert_helios(path)
    jobs = result.trace.jobs.set_index("job")
    whole = _whole(cell)
    if whole is not None and 1 <= whole <= MAX_JOB_GPUS:
        assert jobs.loc["1425512", "gpus"] == whole
    else:
        assert "1425512" not in jobs.index
    assert len(jobs) + sum(result.dropped.values()) == 4


@SETTINGS
@given(data=st.data())
def test_any_text_mutation_converts_or_is_a_config_error(tmp_path_factory, data):
    fmt = data.draw(st.sampled_from(["philly", "helios"]))
    text = philly_text(JOBS) if fmt == "philly" else helios_text(HELIOS_ROWS)
    at = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 3))
    insert = data.draw(st.text(alphabet='",[]{}:\n 0.e-x#\\', max_size=3))
    path = tmp_path_factory.mktemp("m") / ("cluster_job_log" if fmt == "philly" else "cluster_log.csv")
    path.write_text(text[:at] + insert + text[at + cut:])
    try:
        result = convert(fmt, path)
    except ConfigError as exc:
        assert str(path) in str(exc)
        return
    assert len(result.trace) + sum(result.dropped.values()) == result.read
    assert result.malformed == sum(1 for _ in result.first_dropped) or len(result.first_dropped) == FIRST_DROPPED


# ------------------------------------------------------------------ the report

def test_report_names_the_first_malformed_jobs_and_counts_the_rest(tmp_path):
    jobs = [copy.deepcopy(JOBS[0])] + [{**JOBS[1], "jobid": f"bad_{k}", "status": "Done"} for k in range(8)]
    result = convert_philly(_philly(tmp_path, jobs))
    assert result.dropped == {"status not Pass, Killed or Failed": 8} and result.malformed == 8
    lines = result.report()
    assert lines[0] == "9 jobs read, 1 kept, dropped: 8 status not Pass, Killed or Failed"
    assert [d.line for d in result.first_dropped] == [3, 4, 5, 6, 7][:FIRST_DROPPED]
    assert lines[-1] == f"... and {8 - FIRST_DROPPED} more malformed jobs (counted above)"
    assert "(got 'Done')" in lines[1]


def test_statuses_left_out_are_counted_but_not_named(tmp_path):
    result = convert_philly(_philly(tmp_path, [JOBS[0], {**JOBS[1], "status": "Killed"}]))
    assert result.dropped == {"status Killed (not kept)": 1} and result.first_dropped == ()


def test_nothing_left_says_the_counts_and_the_first_malformed_job(tmp_path):
    jobs = [{**j, "submitted_time": "yesterday"} for j in JOBS]
    with pytest.raises(ConfigError) as err:
        convert_philly(_philly(tmp_path, jobs))
    text = str(err.value)
    assert "no job left after filtering: 4 jobs read, 0 kept, dropped: 4 submitted_time not a time" in text
    assert f"first dropped: {tmp_path / 'cluster_job_log'}:2: dropped job" in text


def test_philly_lines_are_where_each_job_starts(tmp_path):
    jobs = copy.deepcopy(JOBS)
    jobs[2]["status"] = "Done"
    text = json.dumps(jobs, indent=2)
    starts = [n for n, line in enumerate(text.splitlines(), 1) if line == "  {"]
    assert convert_philly(_philly(tmp_path, text)).first_dropped[0].line == starts[2]


def test_helios_lines_count_blank_lines_and_quoted_newlines(tmp_path):
    rows = _with_cell("gpu_num", "2.5")
    rows[1][1] = "a\nb"  # a quoted newline in row 1: row 2 starts a line later
    text = helios_text(rows).replace("\n1425512", "\n\n1425512")
    result = convert_helios(_helios(tmp_path, text))
    assert result.dropped == {USER_REASON: 1,
                              "gpu_num not a whole number": 1}
    assert [d.line for d in result.first_dropped] == [2, 5]


def test_window_is_measured_from_the_first_submission_and_submit_times_from_the_first_kept(tmp_path):
    result = convert_philly(_philly(tmp_path, JOBS), start_s=86400, end_s=3 * 86400)
    assert list(result.trace.jobs["submit_s"]) == [0.0, 86400.0]
    assert result.dropped == {"submitted outside the time window": 2}


# ------------------------------------------------------------------ files and options

@pytest.mark.parametrize("text,line,message", [
    ("", None, "the file is empty"),
    ("{}", 1, "expected a JSON list of jobs"),
    ("[]", None, "no jobs: the list is empty"),
    ('[\n{"jobid": 1},\n]', 3, "a comma after the last job"),
    ('[\n{"jobid": 1}\n{"jobid": 2}]', 3, "expected ',' or ']'"),
    ('[\n{"jobid": 1}]\n\n[]', 4, "text after the list"),
    ('[\n{"jobid": 1},\n{"jobid": ', 3, "invalid JSON"),
    ('[\n{"jobid": 1}', 2, "not closed"),
    ("[" * 50_000, 1, "nested too deeply"),
])
def test_philly_file_errors_name_the_line(tmp_path, text, line, message):
    path = _philly(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as err:
        convert_philly(path)
    assert err.value.file == str(path) and err.value.line == line


@pytest.mark.parametrize("text,line,message", [
    ("", None, "the file is empty"),
    (helios_text(HELIOS_ROWS[:1]), None, "no jobs: the file has a header but no rows"),
    ("\n" + helios_text(HELIOS_ROWS).replace("cpu_num", "gpu_num"), 2, "column 'gpu_num' appears 2 times"),
    (helios_text(HELIOS_ROWS).replace("duration", "runtime"), 1, "missing column.s. duration"),
    (helios_text(HELIOS_ROWS).replace(",uVMrF,", ',"uVMrF,'), 3, "quoted field is not closed"),
    (helios_text(_with_cell("vc", "v" * 200_000)), 3, "a field longer than"),
])
def test_helios_file_errors_name_the_line(tmp_path, text, line, message):
    path = _helios(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as err:
        convert_helios(path)
    assert err.value.file == str(path) and err.value.line == line


def test_sources_are_read_as_regular_utf8_files(tmp_path):
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="not a regular file"):
        convert_philly(tmp_path / "zero")
    bad = tmp_path / "latin.csv"
    bad.write_bytes(helios_text(HELIOS_ROWS).replace("uXBbc", "u\xe9").encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8 text: byte 0xe9 at line 2"):
        convert_helios(bad)


@pytest.mark.parametrize("options,path,message", [
    ({"max_gpus": 0}, "max_gpus", "from 1 to 2,000,000, got 0"),
    ({"max_gpus": True}, "max_gpus", "got True"),
    ({"max_gpus": 8.0}, "max_gpus", "got 8.0"),
    ({"min_gpus": 0}, "min_gpus", "from 1 to"),
    ({"min_gpus": 16, "max_gpus": 8}, "min_gpus", "from 1 to 8 (the cluster's GPUs), got 16"),
    ({"limit": 0}, "limit", f"from 1 to {MAX_LIMIT:,}"),
    ({"limit": MAX_LIMIT + 1}, "limit", "got 1000001"),
    ({"start_s": -1.0}, "start_s", "from 0 to"),
    ({"start_s": math.inf}, "start_s", "got inf"),
    ({"end_s": math.nan}, "end_s", "got nan"),
    ({"start_s": 10.0, "end_s": 10.0}, "end_s", "the window would be empty"),
    ({"gpus_per_host": 0}, "gpus_per_host", "from 1 to 1,024"),
    ({"statuses": ()}, "statuses", "at least one"),
    ({"statuses": ("pass",)}, "statuses", "did you mean 'Pass'"),
    ({"attempts": "all"}, "attempts", "'last' or 'sum'"),
    ({"iterations": 3}, "iterations", "philly traces take no option iterations"),
])
def test_options_out_of_range_are_refused_before_the_file_is_read(tmp_path, options, path, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        convert("philly", tmp_path / "never-read", **options)
    assert err.value.path == path


# ------------------------------------------------------------------ the command

def test_cli_prints_counts_and_the_lines_of_dropped_jobs(tmp_path):
    source = _philly(tmp_path, _with_gpus("gpu0gpu1"))
    out = tmp_path / "out.csv"
    result = runner.invoke(app, ["trace-convert", "philly", str(source), str(out)])
    assert result.exit_code == 0, result.output
    assert f"{out}: 4 jobs read, 3 kept, dropped: 1 gpus not a list of GPU names" in result.output
    assert f"{source}:3: dropped job 'application_1506638472019_1': gpus not a list of GPU names (got 'gpu0gpu1')" \
        in result.output


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_cli_never_writes_over_its_input(tmp_path, force):
    source = _helios(tmp_path, HELIOS_ROWS)
    (tmp_path / "alias.csv").symlink_to(source)
    for out in (source, tmp_path / "alias.csv"):
        result = runner.invoke(app, ["trace-convert", "helios", str(out), str(source), *force])
        assert result.exit_code == 2 and "is the input file" in result.output
    assert source.read_text() == helios_text(HELIOS_ROWS)


@pytest.mark.parametrize("argv,message", [
    (["--max-gpus", "0"], "--max-gpus: expected a number of GPUs from 1 to 2,000,000, got 0"),
    (["--min-gpus", "16", "--max-gpus", "8"], "--min-gpus: expected a number of GPUs from 1 to 8"),
    (["--limit", "0"], "--limit: expected a number of jobs from 1"),
    (["--start", "2d", "--end", "1d"], "--end: expected a time after the start of the window"),
    (["--status", "DONE"], "--status: unknown Helios state 'DONE'"),
])
def test_cli_names_the_option(tmp_path, argv, message):
    source = _helios(tmp_path, HELIOS_ROWS)
    result = runner.invoke(app, ["trace-convert", "helios", str(source), str(tmp_path / "t.parquet"), *argv])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "t.parquet").exists()

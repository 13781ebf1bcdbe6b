"""Job traces for cluster runs: the format's validation (located errors), the Philly converter on a sample
written here in its published layout, the synthetic generator (determinism, properties) and the CLI."""

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim.cli import app
from netsim.cluster.convert import convert, convert_philly
from netsim.cluster.presets import PresetCache, model_for_gpus, search_dirs
from netsim.cluster.synthetic import synthetic_trace
from netsim.cluster.trace import TRACE_DTYPES, parse_collective, parse_duration, read_trace, validate_trace
from netsim.config import TrainingWorkload
from netsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "experiments/traces/small-cluster.csv"
HEADER = "job,submit_s,gpus,model,tp,pp,dp,iterations,duration_s\n"
runner = CliRunner()


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------ the format

def test_the_shipped_small_trace_is_valid_and_typed():
    trace = read_trace(SMALL, max_gpus=128)
    jobs = trace.jobs
    assert len(trace) == 12 and jobs["submit_s"].is_monotonic_increasing
    assert list(jobs.columns) == list(TRACE_DTYPES)
    assert dict(jobs.dtypes) == dict(pd.DataFrame(columns=list(TRACE_DTYPES)).astype(TRACE_DTYPES).dtypes)
    assert set(jobs["kind"]) == {"training", "collective"}
    assert (jobs["tp"] * jobs["pp"] * jobs["dp"] == jobs["gpus"]).all()
    assert jobs["submit_s"].max() <= 3600 and jobs["gpus"].max() <= 128


def test_defaults_sorting_and_submit_with_units(tmp_path):
    path = write(tmp_path, "job,submit,gpus,model,duration_s\n"
                           "late,1h,16,gpt-3.6b,600\n"
                           "a,30min,8,gpt-3.6b,60\n"
                           "b,30min,8,collective:allreduce:ring:1MiB,60\n")
    jobs = read_trace(path).jobs
    assert list(jobs["job"]) == ["a", "b", "late"]  # by submit time, ties in file order
    assert list(jobs["submit_s"]) == [1800.0, 1800.0, 3600.0]
    assert list(jobs["dp"]) == [8, 8, 16] and list(jobs["tp"]) == [1, 1, 1]
    assert jobs["iterations"].isna().all() and list(jobs["priority"]) == [0, 0, 0]


BAD = [  # (rows after the header, max_gpus, what the one message must say)
    ("j0,0,8,gpt-7.5,,,,1,\n", None, ["trace.csv:2:", "model", "unknown model 'gpt-7.5'", "did you mean 'gpt-7.5b'"]),
    ("j0,0,8,gpt-3.6b,8,,,1,\nj1,0,16,gpt-3.6b,8,2,2,1,\n", None,
     ["trace.csv:3:", "dp", "8 x 2 x 2 = 32", "16 GPUs"]),
    ("j0,-5,8,gpt-3.6b,,,,1,\n", None, ["trace.csv:2:", "submit_s", "from 0", "'-5'"]),
    ("j0,0,256,gpt-3.6b,,,,1,\n", 128, ["trace.csv:2:", "gpus", "1 to 128 (the cluster's GPUs)"]),
    ("j0,0,8,gpt-3.6b,,,,1,\nj0,5,8,gpt-3.6b,,,,1,\n", None, ["trace.csv:3:", "duplicate job 'j0'", "line 2"]),
    ("j0,0,8,gpt-3.6b,,,,1,60\n", None, ["trace.csv:2:", "exactly one of iterations and duration_s", "not both"]),
    ("j0,0,8,gpt-3.6b,,,,,\n", None, ["trace.csv:2:", "neither"]),
    ("j0,0,8.5,gpt-3.6b,,,,1,\n", None, ["trace.csv:2:", "gpus", "'8.5'"]),
    ("j0,0,8,collective:allreduce:rong:1MiB,,,,1,\n", None, ["model", "unknown algorithm 'rong'", "did you mean 'ring'"]),
    ("j0,0,8,collective:allreduce:ring,,,,1,\n", None, ["model", "collective:<op>:<algorithm>:<size>"]),
    ("j0,0,8,collective:allreduce:ring:1MiB,2,,,1,\n", None, ["tp", "one communicator"]),
    ("j0,0,64,gpt-3.6b,1,64,1,1,\n", None, ["pp", "30 layers"]),
    ("j0,0,24,gpt-3.6b,8,1,3,1,\n", None, ["dp", "global_batch (32, from gpt-3.6b)", "micro_batch x dp (1 x 3)"]),
    ("j0,0,8,gpt-3.6b,,,,0,\n", None, ["iterations", "from 1"]),
    ("bad name,0,8,gpt-3.6b,,,,1,\n", None, ["job", "expected a job name"]),
]


@pytest.mark.parametrize("rows,max_gpus,expected", BAD, ids=[e[2][-1][:30] for e in BAD])
def test_bad_rows_give_one_located_error(tmp_path, rows, max_gpus, expected):
    path = write(tmp_path, HEADER + rows)
    with pytest.raises(ConfigError) as info:
        read_trace(path, max_gpus=max_gpus)
    message = str(info.value)
    assert message.startswith(str(path)), message
    for fragment in expected:
        assert fragment.replace("trace.csv", str(path)) in message, message


@pytest.mark.parametrize("text,expected", [
    ("job,submit_s,model,iterations\nj,0,gpt-3.6b,1\n", "missing required column 'gpus'"),
    ("job,submit_s,gpus,model\nj,0,8,gpt-3.6b\n", "iterations or duration_s"),
    ("job,submit_s,gpu,gpus,model,iterations\nj,0,8,8,gpt-3.6b,1\n", "unknown column 'gpu'; allowed"),
    ("job,submit_s,submit,gpus,model,iterations\nj,0,0,8,gpt-3.6b,1\n", "not both"),
    (HEADER, "no jobs"),
    ("", "the file is empty"),
])
def test_bad_headers(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=expected) as info:
        read_trace(path)
    assert str(info.value).startswith(str(path))


def test_comment_lines_keep_line_numbers_right(tmp_path):
    path = write(tmp_path, "# a comment\n" + HEADER + "j0,0,8,gpt-3.6b,,,,1,\n\n# another\nj1,0,8,gpt-3.6x,,,,1,\n")
    with pytest.raises(ConfigError, match=r"trace\.csv:6: column 'model': unknown model"):
        read_trace(path)


def test_parquet_round_trip_and_errors_name_the_row(tmp_path):
    trace = read_trace(SMALL)
    out = trace.write(tmp_path / "t.parquet")
    again = read_trace(out)
    pd.testing.assert_frame_equal(again.jobs, trace.jobs)
    csv = read_trace(trace.write(tmp_path / "t.csv"))
    pd.testing.assert_frame_equal(csv.jobs, trace.jobs)
    bad = trace.jobs.drop(columns=["kind"]).copy()
    bad.loc[3, "gpus"] = 0
    bad.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ConfigError, match=r"bad\.parquet: row 4, column 'gpus': expected a whole number of GPUs from 1 to 2,000,000, got 0$"):
        read_trace(tmp_path / "bad.parquet")
    write(tmp_path, "not parquet", "junk.parquet")
    with pytest.raises(ConfigError, match="not a readable Parquet file"):
        read_trace(tmp_path / "junk.parquet")
    with pytest.raises(ConfigError, match=r"\.csv or \.parquet"):
        read_trace(tmp_path / "t.json")


def test_workload_mappings_are_runnable_specs():
    trace = read_trace(SMALL)
    w = trace.workload("train-02")
    spec = TrainingWorkload.model_validate(w)
    assert (spec.parallelism.tp, spec.parallelism.pp, spec.parallelism.dp, spec.iterations) == (8, 2, 4, 3)
    assert spec.model.name == "gpt-7.5b"
    assert trace.workload("bench-03") == {"type": "collective", "op": "allreduce", "algorithm": "ring",
                                          "size": 256 * 2**20, "ranks": 16, "iterations": 20}
    with pytest.raises(ConfigError, match="did you mean 'train-02'"):
        trace.workload("train-2")


def test_presets_next_to_the_trace(tmp_path):
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads/tiny.yaml").write_text(
        "type: training\nmodel: {name: tiny, layers: 4, hidden: 64, heads: 4, seq_len: 16, vocab: 100, "
        "global_batch: 8}\nparallelism: {tp: 2, pp: 2, dp: 1}\n")
    (tmp_path / "workloads/ring.yaml").write_text("type: collective\nop: allreduce\nalgorithm: ring\nsize: 1MiB\n")
    path = write(tmp_path, HEADER + "a,0,8,tiny,2,2,2,1,\n")
    trace = read_trace(path)
    assert trace.workload("a")["model"]["name"] == "tiny"
    write(tmp_path, HEADER + "a,0,8,tiny,1,8,1,1,\n")
    with pytest.raises(ConfigError, match=r"pp \(8\) is more pipeline stages than tiny's 4 layers"):
        read_trace(path)
    write(tmp_path, HEADER + "a,0,8,ring,,,,1,\n")
    with pytest.raises(ConfigError, match="not a training workload"):
        read_trace(path)


def test_expert_parallelism_goes_with_moe_presets(tmp_path):
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads/moe.yaml").write_text(
        "type: training\nmodel: {name: moe, layers: 8, hidden: 64, heads: 4, seq_len: 16, vocab: 100, "
        "global_batch: 16}\nparallelism: {tp: 1, pp: 2, dp: 4}\n"
        "moe: {experts: 8, top_k: 2, ep: 4, expert_hidden: 128}\n")
    head = "job,submit_s,gpus,model,tp,pp,dp,ep,iterations\n"
    path = write(tmp_path, head + "a,0,8,moe,1,2,4,,1\nb,0,8,moe,1,2,4,2,1\n")
    trace = read_trace(path)
    assert "moe" not in trace.workload("a") or trace.workload("a")["moe"]["ep"] == 4
    assert trace.workload("b")["moe"] == {"experts": 8, "top_k": 2, "ep": 2, "expert_hidden": 128}
    for rows, expected in [("a,0,4,moe,1,2,2,,1\n", r"trace.csv:2: column 'ep': ep \(4, from moe\) must divide dp \(2\)"),
                           ("a,0,8,moe,1,2,4,3,1\n", r"ep \(3\) must divide dp \(4\)"),
                           ("a,0,8,gpt-3.6b,1,2,4,2,1\n", "ep applies to mixture-of-experts presets")]:
        write(tmp_path, head + rows)
        with pytest.raises(ConfigError, match=expected):
            read_trace(path)
    synthetic = synthetic_trace(20, model_mix={"moe": 1}, cluster_gpus=64, seed=0, preset_dirs=[tmp_path / "workloads"])
    jobs = synthetic.jobs
    assert ((jobs["dp"] % jobs["ep"]) == 0).all() and (8 % jobs["ep"] == 0).all()


def test_parse_helpers():
    assert parse_duration("2h") == 7200 and parse_duration("1d") == 86400 and parse_duration("90") == 90
    assert parse_duration("500ms") == 0.5 and parse_duration("30 min") == 1800
    with pytest.raises(ConfigError.__mro__[1]):
        parse_duration("1w")
    assert parse_collective("collective:alltoall:pairwise:64MiB").size_bytes == 64 * 2**20
    with pytest.raises(ConfigError, match="unknown collective op 'allreduc'.*did you mean 'allreduce'"):
        parse_collective("collective:allreduc:ring:1MiB")


# ------------------------------------------------------------------ the Philly converter

def _philly_job(jobid, submitted, status="Pass", attempts=(("2017-10-07 02:00:00", "2017-10-07 03:00:00", 8),)):
    """A job of Philly's cluster_job_log as its README documents it (GPUs spread over 8-GPU machines)."""
    runs = []
    for start, end, gpus in attempts:
        detail = [{"ip": f"m{k}", "gpus": [f"gpu{g}" for g in range(min(8, gpus - 8 * k))]}
                  for k in range(-(-gpus // 8))]
        runs.append({"start_time": start, "end_time": end, "detail": detail})
    return {"status": status, "vc": "ee9e8c", "jobid": jobid, "attempts": runs, "submitted_time": submitted,
            "user": "ce2f4c"}


@pytest.fixture
def philly_log(tmp_path) -> Path:
    jobs = [
        _philly_job("application_1506638472019_1", "2017-10-07 01:00:00",
                    attempts=(("2017-10-07 01:10:00", "2017-10-07 01:20:00", 8),
                              ("2017-10-07 01:30:00", "2017-10-07 02:30:00", 8))),
        _philly_job("application_1506638472019_2", "2017-10-07 01:30:00", status="Failed"),
        _philly_job("application_1506638472019_3", "2017-10-07 02:00:00", status="Killed"),
        _philly_job("application_1506638472019_4", "2017-10-07 03:00:00", attempts=()),
        _philly_job("application_1506638472019_5", "2017-10-07 04:00:00",
                    attempts=(("2017-10-07 04:00:00", "None", 8),)),
        _philly_job("application_1506638472019_6", "2017-10-07 05:00:00",
                    attempts=(("2017-10-07 05:00:00", "2017-10-07 05:30:00", 0),)),
        _philly_job("application_1506638472019_7", "2017-10-07 06:00:00",
                    attempts=(("2017-10-07 06:00:00", "2017-10-07 08:00:00", 512),)),
        _philly_job("application_1506638472019_8", "2017-10-08 01:00:00",
                    attempts=(("2017-10-08 01:00:00", "2017-10-08 01:05:00", 3),)),
        _philly_job("application_1506638472019_9", "2017-10-08 02:00:00",
                    attempts=((None, "2017-10-08 02:05:00", 16),)),
        _philly_job("application_1506638472019_10", "2017-10-09 00:00:00",
                    attempts=(("2017-10-09 00:00:00", "2017-10-09 02:00:00", 32),)),
    ]
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(jobs, indent=4))
    return path


def test_philly_conversion_keeps_finished_jobs_and_counts_the_rest(philly_log):
    result = convert_philly(philly_log, max_gpus=256)
    jobs = result.trace.jobs
    assert result.read == 10
    assert list(jobs["job"]) == ["application_1506638472019_1", "application_1506638472019_8",
                                 "application_1506638472019_10"]
    assert list(jobs["submit_s"]) == [0.0, 86400.0, 169200.0]
    assert list(jobs["duration_s"]) == [3600.0, 300.0, 7200.0]  # the last attempt's runtime
    assert list(jobs["gpus"]) == [8, 3, 32]
    assert list(jobs["model"]) == [model_for_gpus(8), model_for_gpus(3), model_for_gpus(32)]
    assert (jobs["tp"] * jobs["pp"] * jobs["dp"] == jobs["gpus"]).all()
    assert result.dropped == {"status Failed (not kept)": 1, "status Killed (not kept)": 1,
                              "no scheduling attempt": 1, "still running at the snapshot": 1, "no GPUs": 1,
                              "attempt without start or end time": 1, "more GPUs than the cluster's 256": 1}
    assert "10 jobs read, 3 kept" in result.describe()


def test_philly_options(philly_log):
    assert convert_philly(philly_log, attempts="sum").trace.jobs["duration_s"].iloc[0] == 4200.0
    both = convert_philly(philly_log, statuses=("Pass", "Killed"), max_gpus=1024)
    assert "application_1506638472019_3" in set(both.trace.jobs["job"]) and len(both.trace) == 5
    window = convert_philly(philly_log, start_s=3600, end_s=25 * 3600)
    assert list(window.trace.jobs["job"]) == ["application_1506638472019_7", "application_1506638472019_8"]
    assert window.trace.jobs["submit_s"].iloc[0] == 0.0  # relative to the first kept job
    assert window.dropped["submitted outside the time window"] == 2
    capped = convert_philly(philly_log, limit=1, min_gpus=4)
    assert len(capped.trace) == 1 and capped.dropped["beyond the first 1 jobs"] == 2
    assert capped.dropped["fewer than 4 GPUs"] == 1
    with pytest.raises(ConfigError, match="no job left"):
        convert_philly(philly_log, start_s=10 * 86400)
    with pytest.raises(ConfigError, match="unknown Philly status 'Done'"):
        convert_philly(philly_log, statuses=("Done",))
    with pytest.raises(ConfigError, match="unknown trace format 'alibaba'; known: philly, helios"):
        convert("alibaba", philly_log)


@pytest.mark.parametrize("text,expected", [("{not json", "not a Philly cluster_job_log"),
                                           ('{"jobid": 1}', "expected a JSON list of jobs")])
def test_philly_bad_files(tmp_path, text, expected):
    path = write(tmp_path, text, "cluster_job_log")
    with pytest.raises(ConfigError, match=expected):
        convert_philly(path)


HELIOS_HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"


@pytest.fixture
def helios_log(tmp_path) -> Path:
    """A Helios cluster_log.csv in the layout of the HeliosData README (its three example rows, and more)."""
    rows = [
        "1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0",
        "1425512,uVMrF,vchbv,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0",
        "1425513,uzqls,vcpDC,1,1,1,CANCELLED,2020-06-09 18:41:28,2020-06-09 18:41:28,2020-06-17 14:15:21,675233,0",
        "1425514,uzqls,vcpDC,0,4,1,COMPLETED,2020-06-09 18:42:00,2020-06-09 18:42:00,2020-06-09 18:50:00,480,0",
        "1425515,uXBbc,vcJkd,16,64,2,COMPLETED,2020-06-09 19:41:01,2020-06-09 19:50:01,2020-06-09 21:50:01,7200,540",
        "1425516,uXBbc,vcJkd,64,256,8,COMPLETED,2020-06-09 20:41:01,2020-06-09 20:41:01,2020-06-09 20:41:01,0,0",
        "1425517,uXBbc,vcJkd,2048,512,256,COMPLETED,2020-06-10 20:41:01,2020-06-10 20:41:01,2020-06-10 21:41:01,3600,0",
    ]
    path = tmp_path / "cluster_log.csv"
    path.write_text(HELIOS_HEADER + "\n".join(rows) + "\n")
    return path


def test_helios_conversion(helios_log):
    result = convert("helios", helios_log, max_gpus=1024)
    jobs = result.trace.jobs
    assert result.read == 7 and list(jobs["job"]) == ["1425511", "1425515"]
    assert list(jobs["submit_s"]) == [0.0, 3600.0] and list(jobs["duration_s"]) == [36848.0, 7200.0]
    assert list(jobs["gpus"]) == [1, 16] and list(jobs["user"]) == ["uXBbc", "uXBbc"]
    assert result.dropped == {"state FAILED (not kept)": 1, "state CANCELLED (not kept)": 1, "no GPUs": 1,
                              "no runtime (duration missing or 0)": 1, "more GPUs than the cluster's 1,024": 1}
    more = convert("helios", helios_log, statuses=("COMPLETED", "FAILED"), min_gpus=2, end_s=3 * 3600)
    assert list(more.trace.jobs["job"]) == ["1425512", "1425515"]
    with pytest.raises(ConfigError, match="unknown Helios state 'DONE'"):
        convert("helios", helios_log, statuses=("DONE",))
    bad = helios_log.with_name("other.csv")
    bad.write_text("job,submit_s\nx,0\n")
    with pytest.raises(ConfigError, match="missing column"):
        convert("helios", bad)


# ------------------------------------------------------------------ the generator

def test_synthetic_is_deterministic():
    a, b = synthetic_trace(200, seed=7), synthetic_trace(200, seed=7)
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    assert not synthetic_trace(200, seed=8).jobs.equals(a.jobs)


def test_synthetic_defaults_have_a_realistic_shape():
    trace = synthetic_trace()
    jobs = trace.jobs
    assert len(jobs) == 500 and jobs["submit_s"].iloc[0] == 0 and jobs["submit_s"].max() <= 86400
    assert jobs["gpus"].max() <= 512 and (jobs["gpus"] <= 64).mean() > 0.7
    load = trace.gpu_hours() / 24 / 1024
    assert 0.3 < load < 1.2, load  # a busy but not hopeless cluster
    assert (jobs["tp"] <= 8).all() and jobs["duration_s"].notna().all()


def test_synthetic_options():
    trace = synthetic_trace(50, rate_per_hour=10, cluster_gpus=64, iterations=5,
                            model_mix={"gpt-3.6b": 1, "gpt-7.5b": 1}, seed=1)
    jobs = trace.jobs
    assert set(jobs["model"]) <= {"gpt-3.6b", "gpt-7.5b"} and (jobs["iterations"] == 5).all()
    assert jobs["gpus"].max() <= 64 and jobs["submit_s"].max() > 3600  # 50 jobs at 10/h span hours
    given_durations = synthetic_trace(30, durations_s=[100.0, 200.0], seed=2).jobs["duration_s"]
    assert set(given_durations) <= {100.0, 200.0}
    with pytest.raises(ConfigError, match="no entry of at most 8 GPUs"):
        synthetic_trace(5, cluster_gpus=8, size_mix={16: 1.0})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.integers(1, 40), cluster=st.sampled_from([8, 24, 64, 100, 256, 1024, 4096]),
       seed=st.integers(0, 2**32 - 1), span=st.floats(0, 7 * 86400),
       sizes=st.dictionaries(st.integers(1, 600), st.floats(0.01, 1), min_size=1, max_size=5))
def test_synthetic_traces_are_valid(jobs, cluster, seed, span, sizes):
    sizes = {**sizes, 8: 0.1}  # something always fits
    trace = synthetic_trace(jobs, span_s=span, cluster_gpus=cluster, size_mix=sizes, seed=seed)
    t = trace.jobs
    assert len(t) == jobs and t["submit_s"].is_monotonic_increasing and t["submit_s"].between(0, span).all()
    assert t["gpus"].between(1, cluster).all() and set(t["gpus"]) <= set(sizes)
    assert (t["tp"] * t["pp"] * t["dp"] == t["gpus"]).all() and (t["tp"] <= 8).all()
    presets = PresetCache(search_dirs())
    for row in t.itertuples():
        assert presets.get(row.model).layers % row.pp == 0
    # the validator agrees with itself: the table re-validates unchanged
    again = validate_trace(t.drop(columns=["kind"]), max_gpus=cluster)
    pd.testing.assert_frame_equal(again.jobs, t)
    TrainingWorkload.model_validate(trace.workload(t["job"].iloc[-1]))


# ------------------------------------------------------------------ the CLI

def test_cli_synth_check_and_convert(tmp_path, philly_log):
    out = tmp_path / "synth.csv"
    result = runner.invoke(app, ["trace-synth", str(out), "--jobs", "40", "--span", "2h", "--gpus", "256",
                                 "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert read_trace(out, max_gpus=256).jobs.shape[0] == 40
    result = runner.invoke(app, ["trace-check", str(out), "--max-gpus", "256"])
    assert result.exit_code == 0 and "job sizes" in result.output and "GPU-hours" in result.output
    converted = tmp_path / "philly.parquet"
    result = runner.invoke(app, ["trace-convert", "philly", str(philly_log), str(converted), "--max-gpus", "256",
                                 "--status", "Pass", "--status", "Killed"])
    assert result.exit_code == 0, result.output
    assert "10 jobs read, 4 kept" in result.output and len(read_trace(converted)) == 4


def test_cli_converts_helios(tmp_path, helios_log):
    out = tmp_path / "helios.csv"
    result = runner.invoke(app, ["trace-convert", "helios", str(helios_log), str(out), "--status", "COMPLETED",
                                 "--status", "CANCELLED", "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert "7 jobs read, 2 kept" in result.output and "beyond the first 2 jobs" in result.output


@pytest.mark.parametrize("argv,expected", [
    (["trace-check", "{tmp}/missing.csv"], "missing.csv: job trace not found"),
    (["trace-check", "{small}", "--max-gpus", "32"], "1 to 32 (the cluster's GPUs)"),
    (["trace-synth", "{tmp}/t.csv", "--span", "1week"], "--span: cannot parse"),
    (["trace-synth", "{tmp}/t.csv", "--models", "gpt-3:1"], "--models: unknown model"),
    (["trace-synth", "{tmp}/t.txt"], ".csv or .parquet"),
    (["trace-convert", "alibaba", "{small}", "{tmp}/t.csv"], "unknown trace format 'alibaba'; known: philly"),
    (["trace-convert", "helios", "{small}", "{tmp}/t.csv"], "not a Helios cluster_log.csv"),
    (["trace-convert", "helios", "{small}", "{tmp}/t.csv", "--attempts", "sum"], "--attempts: helios traces take no"),
])
def test_cli_bad_input_exits_2_with_one_line(tmp_path, argv, expected):
    argv = [a.format(tmp=tmp_path, small=SMALL) for a in argv]
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output
    assert not list(tmp_path.glob("t.*"))


def test_cli_refuses_to_overwrite(tmp_path):
    out = write(tmp_path, "keep me", "t.csv")
    result = runner.invoke(app, ["trace-synth", str(out), "--jobs", "3"])
    assert result.exit_code == 2 and "already exists" in result.output and out.read_text() == "keep me"
    assert runner.invoke(app, ["trace-synth", str(out), "--jobs", "3", "--force"]).exit_code == 0

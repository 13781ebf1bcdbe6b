"""Training jobs on the fabric: closed-form iterations, the 1F1B bubble, Holmes placement and transport, jobs."""

from __future__ import annotations

import copy
import json
import math

import pytest

from netsim.config import load_spec, parse_spec
from netsim.errors import ConfigError
from netsim.experiment import read_results, run_experiment, write_results
from netsim.workload.training import one_f_one_b

SLOW_GPU = {"profile": "a100", "peak_tflops": 1e-6, "efficiency": 1.0}  # 1 MFLOP/s: compute dwarfs every send


# 1PB/s: as good as infinite next to the slow GPU (the largest bandwidth a spec accepts is 1e15 B/s)
def one_host(gpus: int, nics: int = 1, intra: str = "1000TB/s") -> dict:
    return {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 1, "gpus_per_host": gpus,
            "nics_per_host": nics, "nic": {"bandwidth": "100Gbps"}, "uplink": {"bandwidth": "100Gbps"},
            "intra_host": {"bandwidth": intra}}


def training(**kw) -> dict:
    w = {"type": "training", "gpu": SLOW_GPU,
         # vocab = 12 h + 2 s makes the logit layer cost exactly one transformer layer
         "model": {"layers": 3, "hidden": 64, "heads": 4, "seq_len": 128, "vocab": 12 * 64 + 2 * 128,
                   "micro_batch": 1, "global_batch": 8}}
    for key, value in kw.items():
        if isinstance(value, dict) and isinstance(w.get(key), dict):
            w[key] = {**w[key], **value}
        else:
            w[key] = value
    return w


def run(topology: dict, workload: dict | None = None, **spec) -> object:
    """Run an experiment, in the pure fluid model unless ``spec`` says otherwise (the closed forms below)."""
    data = {"name": "t", "model": "fluid", "topology": topology, **spec}
    if workload is not None:
        data["workload"] = workload
    return run_experiment(parse_spec(data))


# ---------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("micro_batches", [1, 3, 8])
def test_single_gpu_iteration_is_the_sum_of_its_compute(micro_batches):
    r = run(one_host(1), training(model={"global_batch": micro_batches}))
    plan = r.jobs[0].plan
    layer = plan.model.layer_forward_flops()
    forward = (3 * layer + plan.model.logits_forward_flops()) / 1e6
    (it,) = r.iterations
    assert it.duration_s == pytest.approx(micro_batches * 3 * forward, rel=1e-12)
    assert it.compute_s == pytest.approx(it.duration_s, rel=1e-12)
    assert it.tp_s == it.pp_s == it.dp_s == 0.0
    assert abs(it.bubble_s) < 1e-9 * it.duration_s
    assert it.tflops_per_gpu == pytest.approx(plan.model.iteration_flops() / it.duration_s / 1e12, rel=1e-12)


@pytest.mark.parametrize("micro_batches", [1, 2, 4, 7, 16])
def test_two_stage_pipeline_has_the_1f1b_bubble(micro_batches):
    # Stage 0 holds 2 layers, stage 1 one layer plus the logits (costing one layer): equal stages.
    r = run(one_host(2), training(model={"global_batch": micro_batches}, parallelism={"pp": 2}, partition=[2, 1]))
    plan = r.jobs[0].plan
    assert plan.forward_s(0) == pytest.approx(plan.forward_s(1), rel=1e-15)
    (it,) = r.iterations
    f, b = plan.forward_s(0), plan.backward_s(0)
    p, m = 2, micro_batches
    assert it.duration_s == pytest.approx((m + p - 1) * (f + b), rel=1e-9)
    assert it.bubble_s / it.duration_s == pytest.approx((p - 1) / (m + p - 1), rel=1e-9)
    assert it.compute_s == pytest.approx(m * (f + b), rel=1e-12)


def test_pipeline_matches_the_1f1b_schedule_with_send_costs():
    # A slow intra-host link: every activation send takes a known time; the fabric must reproduce
    # the pure 1F1B schedule with that per-send cost (stages unequal: 3 layers vs 1 + logits).
    topo = one_host(4, intra="1MB/s")
    r = run(topo, training(model={"global_batch": 5, "layers": 4}, parallelism={"pp": 4}, partition=[1, 1, 1, 1]))
    plan = r.jobs[0].plan
    paths = r.topology.paths(plan.gpus[0], plan.gpus[1])  # GPU -> host switch -> GPU
    cap = min(r.topology.links.capacity_Bps[list(paths[0])])
    send = plan.pp_bytes() / cap
    fwd = [plan.forward_s(s) for s in range(4)]
    expected, _ = one_f_one_b(fwd, [2 * x for x in fwd], 5, send)
    assert r.iterations[0].duration_s == pytest.approx(expected, rel=1e-9)


def test_breakdown_sums_to_the_iteration_time():
    r = run(one_host(8, nics=2, intra="100GB/s"),
            training(model={"global_batch": 8, "layers": 4}, parallelism={"tp": 2, "pp": 2, "dp": 2},
                     gpu="a100"))
    for it in r.iterations:
        parts = it.compute_s + it.tp_s + it.pp_s + it.dp_s + it.bubble_s
        assert parts == pytest.approx(it.duration_s, rel=1e-12)
        assert min(it.compute_s, it.tp_s, it.pp_s, it.dp_s) > 0 and it.bubble_s >= -1e-12


def test_sharded_optimizer_replaces_allreduce_by_reduce_scatter_and_allgather():
    base = training(model={"global_batch": 4, "layers": 2}, parallelism={"dp": 4}, gpu="a100")
    plain = run(one_host(4, intra="100GB/s"), base)
    sharded = run(one_host(4, intra="100GB/s"), {**base, "parallelism": {"dp": 4, "sharded_optimizer": True}})
    assert {c.op for c in plain.collectives} == {"allreduce"}
    assert [c.op for c in sharded.collectives] == ["reduce_scatter", "allgather"]
    plan = plain.jobs[0].plan
    (ar,) = plain.collectives
    assert ar.size_bytes == plan.grad_bytes(0) == plan.stage_params(0) * 2
    # ring allreduce = ring reduce-scatter + ring allgather: the same time
    assert plain.iterations[0].duration_s == pytest.approx(sharded.iterations[0].duration_s, rel=1e-6)


def test_overlapping_dp_hides_gradient_sync_behind_the_last_backward():
    topo = {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": 2, "gpus_per_host": 1,
            "nics_per_host": 1, "nic": {"bandwidth": "10Gbps"}, "uplink": {"bandwidth": "10Gbps"},
            "intra_host": {"bandwidth": "100GB/s"}}
    w = training(model={"global_batch": 2, "layers": 8, "hidden": 1024, "heads": 8, "vocab": 12 * 1024 + 256},
                 parallelism={"dp": 2}, gpu="a100")
    serial = run(topo, w).iterations[0]
    overlapped = run(topo, {**w, "parallelism": {"dp": 2, "overlap_dp": True}, "dp_buckets": 8}).iterations[0]
    assert overlapped.duration_s < serial.duration_s
    assert overlapped.dp_s < serial.dp_s
    assert overlapped.compute_s == pytest.approx(serial.compute_s)


def test_layer_granularity_issues_two_tp_allreduces_per_layer_and_pass():
    w = training(model={"global_batch": 2, "layers": 3}, parallelism={"tp": 2}, gpu="a100")
    stage = run(one_host(2, intra="100GB/s"), w)
    layer = run(one_host(2, intra="100GB/s"), {**w, "tp_granularity": "layer"})
    m, layers = 2, 3
    assert len([c for c in stage.collectives if c.label == "tp"]) == 2 * m
    assert len([c for c in layer.collectives if c.label == "tp"]) == 2 * m * 2 * layers
    total = sum(c.size_bytes for c in stage.collectives)
    assert total == pytest.approx(sum(c.size_bytes for c in layer.collectives))
    # same bytes, but per-call latency is paid 2L times: layer granularity is not faster
    assert layer.iterations[0].duration_s >= stage.iterations[0].duration_s * (1 - 1e-9)


# ---------------------------------------------------------------------------- placement and transport

HOLMES = "experiments/holmes-hetero.yaml"


def holmes(variant: str = "holmes", sets: list[str] | None = None):
    """The spec of one variant of the Holmes experiment."""
    from netsim.config import load_experiment
    from netsim.experiment.sweep import expand
    (run,) = [r for r in expand(load_experiment(HOLMES, sets)) if r.variant == variant]
    return run.spec


def test_holmes_keeps_tp_and_dp_inside_one_cluster_and_only_pp_crosses():
    r = run_experiment(holmes())
    plan = r.jobs[0].plan
    for comm in plan.comms:
        if comm.kind in ("tp", "dp"):
            assert len(comm.families) == 1 and not comm.tcp, comm
    assert all(c.tcp and len(c.families) == 2 for c in plan.comms if c.kind == "pp")
    assert plan.partition[0] > plan.partition[1]  # stage 0 is the InfiniBand cluster: more layers
    # every stage's GPUs are one cluster, the faster (IB) one first
    fam = r.topology.nic_families
    assert fam(plan.gpus[:32]) == ["infiniband"] and fam(plan.gpus[32:]) == ["roce"]


def test_sequential_on_interleaved_clusters_mixes_dp_groups_and_runs_them_over_tcp(tmp_path):
    r = run_experiment(holmes("naive-mixed"))
    plan = r.jobs[0].plan
    dp = [c for c in plan.comms if c.kind == "dp"]
    assert all(c.tcp and c.families == ("infiniband", "roce") for c in dp)
    assert not any(c.tcp for c in plan.comms if c.kind == "tp")  # TP stays inside a host
    tables = read_results(write_results([r], tmp_path / "out"))
    links = tables["links"]
    eth = links[links["src"].str.contains(r"\.eth") | links["dst"].str.contains(r"\.eth")]
    dp_bytes = sum(c.size_bytes * 2 * (c.n_ranks - 1) / c.n_ranks * c.n_ranks for c in r.collectives
                   if c.label == "dp")
    assert eth["bytes"].sum() > dp_bytes  # the DP rings went through the Ethernet NICs
    job = tables["jobs"].iloc[0]
    assert (job["tcp_tp"], job["tcp_dp"], job["tcp_pp"]) == (0, 16, 0)
    assert job["partition"] == "18/18"  # auto = even outside holmes


@pytest.fixture(scope="module")
def holmes_comparison() -> dict[str, float]:
    names = ("holmes", "naive-mixed", "homogeneous-ib", "homogeneous-roce", "all-ethernet")
    return {name: run_experiment(holmes(name)).iterations[0].duration_s for name in names}


def test_holmes_hetero_ordering(holmes_comparison):
    t = holmes_comparison
    assert t["homogeneous-ib"] <= t["holmes"] <= t["homogeneous-roce"] < t["naive-mixed"] < t["all-ethernet"]


def test_holmes_search_beats_the_even_split_it_starts_from():
    r = run_experiment(holmes())
    trials = {tuple(p): t for p, t in r.jobs[0].plan.partition_trials}
    assert trials[(18, 18)] > min(trials.values()) == trials[tuple(r.jobs[0].plan.partition)]
    assert r.iterations[0].duration_s == pytest.approx(min(trials.values()), rel=1e-9)


def test_mixed_collective_communicator_talks_tcp_even_between_same_family_gpus():
    data = holmes().model_dump(mode="json")
    data["workload"] = {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "64MiB"}
    data["placement"] = {"type": "sequential"}
    r = run_experiment(parse_spec(data))
    (call,) = r.collectives
    flows = r.fabric.flow_records
    # GPUs 0 and 16 are both InfiniBand (hosts 0 and 2 of the interleaved numbering) ...
    assert r.topology.transport(0, 16).family == "infiniband"
    # ... but in a communicator with RoCE GPUs every inter-host message is TCP
    assert r.topology.transport(0, 16, tcp=True).family == "ethernet"
    tcp_nic = r.topology.tcp_nic
    assert tcp_nic and call.duration_s > 0
    assert all("/tcp" in f[1] for f in flows if r.topology.gpu_host[f[2]] != r.topology.gpu_host[f[3]])


# ---------------------------------------------------------------------------- jobs


def multijob(routing: str = "ecmp", **over) -> dict:
    topo = {"type": "leaf_spine", "leaves": 4, "spines": 4, "hosts_per_leaf": 3, "gpus_per_host": 2,
            "nics_per_host": 2, "nic": {"bandwidth": "100Gbps"}, "uplink": {"bandwidth": "100Gbps"},
            "intra_host": {"bandwidth": "1TB/s"}}
    w = training(model={"global_batch": 4, "layers": 2, "hidden": 1024, "heads": 8, "vocab": 12 * 1024 + 256},
                 parallelism={"tp": 2, "dp": 4}, gpu="a100")
    return {"name": "mj", "seed": 3, "topology": topo, "routing": routing, "placement": {"type": "random",
            "by": "host"}, "jobs": [
                {"name": "a", "workload": w},
                {"name": "b", "workload": copy.deepcopy(w), "start": "1ms", "iterations": 2},
                {"name": "c", "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring",
                                           "size": "16MiB", "ranks": 4}, "placement": "sequential"}], **over}


def test_jobs_get_disjoint_gpus_start_times_and_their_own_rows(tmp_path):
    r = run_experiment(parse_spec(multijob()))
    gpus = [set(j.gpus.tolist()) for j in r.jobs]
    assert sum(map(len, gpus)) == len(set().union(*gpus)) == 8 + 8 + 4
    assert r.jobs[1].began_s == pytest.approx(1e-3)
    assert r.jobs[2].gpus.tolist() == sorted(set(range(24)) - gpus[0] - gpus[1])[:4]  # sequential on the rest
    tables = read_results(write_results([r], tmp_path / "mj"))
    jobs = tables["jobs"]
    assert jobs["name"].tolist() == ["a", "b", "c"]
    assert jobs["kind"].tolist() == ["training", "training", "collective"]
    assert jobs["iterations"].tolist() == [1, 2, 1]
    iters = tables["iterations"]
    assert iters.groupby("name").size().to_dict() == {"a": 1, "b": 2}
    assert (iters["duration_s"] > 0).all()
    assert set(tables["collectives"]["job"]) == {0, 1, 2}
    assert tables["runs"]["n_jobs"].iat[0] == 3


def test_jobs_run_is_deterministic(tmp_path):
    a = read_results(write_results([run_experiment(parse_spec(multijob()))], tmp_path / "a"))
    b = read_results(write_results([run_experiment(parse_spec(multijob()))], tmp_path / "b"))
    for name in ("jobs", "iterations", "collectives"):
        x, y = a[name].drop(columns=["run_id"]), b[name].drop(columns=["run_id"])
        assert x.equals(y), name


def test_c4p_never_slower_than_ecmp_for_concurrent_dp_jobs():
    ecmp = run_experiment(parse_spec(multijob("ecmp")))
    c4p = run_experiment(parse_spec(multijob("c4p")))
    for a, b in zip(ecmp.iterations, c4p.iterations):
        assert b.duration_s <= a.duration_s * (1 + 1e-9)


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("change, path, words", [
    ({"model": {"global_batch": 6}, "parallelism": {"dp": 4}}, "workload.model.global_batch", "multiple"),
    ({"parallelism": {"pp": 5}}, "workload.parallelism.pp", "cannot fill"),
    ({"partition": [1, 1]}, "workload.partition", "summing"),
    ({"gpu": "b200"}, "workload.gpu.profile", "a100"),
    ({"tp_comm": {"algorithm": "nope"}}, "workload.tp_comm.algorithm", "ring"),
    ({"model": {"hidden": 65}}, "workload.model", "multiple of heads"),
])
def test_bad_training_specs_name_the_key(change, path, words):
    with pytest.raises(ConfigError) as exc:
        parse_spec({"name": "t", "topology": one_host(8), "workload": training(**change)})
    assert exc.value.path == path and words in exc.value.message


def test_an_algorithm_that_does_not_suit_a_group_is_refused_before_the_run():
    w = training(parallelism={"tp": 3, "dp": 2}, tp_comm={"algorithm": "halving_doubling"})
    with pytest.raises(ConfigError) as exc:
        run_experiment(parse_spec({"name": "t", "topology": one_host(6), "workload": w}))
    assert exc.value.path == "workload.tp_comm.algorithm"
    assert "power-of-two" in exc.value.message and "TP groups have 3 ranks" in exc.value.message
    spec = multijob()
    spec["jobs"][1]["workload"]["dp_comm"] = {"algorithm": "halving_doubling"}
    spec["jobs"][1]["workload"]["parallelism"] = {"tp": 2, "dp": 3}
    spec["jobs"][1]["workload"]["model"]["global_batch"] = 3
    with pytest.raises(ConfigError) as exc:
        run_experiment(parse_spec(spec))
    assert exc.value.path == "jobs.1.workload.dp_comm.algorithm"


def test_bad_jobs_name_the_job():
    spec = multijob()
    spec["jobs"][2]["workload"].pop("ranks")
    with pytest.raises(ConfigError) as exc:
        parse_spec(spec)
    assert exc.value.path == "jobs.2.workload.ranks"
    spec = multijob()
    spec["jobs"][1]["name"] = "a"
    with pytest.raises(ConfigError, match="used twice"):
        parse_spec(spec)
    spec = multijob()
    spec["workload"] = spec["jobs"][0]["workload"]
    with pytest.raises(ConfigError, match="give one of workload"):
        parse_spec(spec)
    spec = multijob()
    spec["jobs"][0]["workload"]["parallelism"] = {"tp": 2, "dp": 16}
    spec["jobs"][0]["workload"]["model"]["global_batch"] = 16
    with pytest.raises(ConfigError) as exc:
        run_experiment(parse_spec(spec))
    assert "do not fit" in exc.value.message


def test_workload_files_and_from_overrides(tmp_path):
    spec = holmes()
    assert spec.workload.model.name == "gpt-7.5b" and spec.workload.model.layers == 36
    assert spec.topology.numbering == "interleaved" and spec.topology.clusters[0].name == "ib"
    missing = tmp_path / "x.yaml"
    topology = _root() / "topologies/holmes-ib-only.yaml"
    missing.write_text(f"name: x\ntopology: {topology}\nworkload: {{from: nope.yaml}}\n")
    with pytest.raises(ConfigError, match="workload file 'nope.yaml' not found"):
        load_spec(missing)


@pytest.mark.parametrize("name, params", [("gpt-3.6b", 3.55e9), ("gpt-7.5b", 7.46e9), ("gpt-39.1b", 39.1e9),
                                          ("gpt-22b", 21.9e9), ("gpt-175b", 174.6e9)])
def test_shipped_gpt_configs_have_their_parameter_counts(tmp_path, name, params):
    from netsim.workload.pipeline import model_of
    exp = tmp_path / "e.yaml"
    workload = json.dumps(str(_root() / "workloads" / f"{name}.yaml"))
    exp.write_text("name: e\ntopology: {type: leaf_spine, leaves: 1, spines: 1, hosts_per_leaf: 1, gpus_per_host: 1, "
                   "nics_per_host: 1, nic: {bandwidth: 1Gbps}, uplink: {bandwidth: 1Gbps}, "
                   f"intra_host: {{bandwidth: 1GB/s}}}}\nworkload: {{from: {workload}}}\n")
    spec = load_spec(exp)
    assert model_of(spec.workload).params == pytest.approx(params, rel=0.01)
    assert math.isfinite(spec.workload.ranks)


def _root():
    from pathlib import Path
    return Path(__file__).resolve().parent.parent


def test_cli_reports_a_bad_job_with_file_line_and_exit_2(tmp_path):
    from typer.testing import CliRunner

    from netsim.cli import app
    exp = tmp_path / "bad.yaml"
    exp.write_text(f"""name: bad
topology: {_root() / 'topologies/holmes-ib-only.yaml'}
jobs:
  - name: a
    workload: {{from: {_root() / 'workloads/gpt-3.6b.yaml'}}}
  - name: b
    workload:
      from: {_root() / 'workloads/gpt-3.6b.yaml'}
      parallelism: {{tp: 8, pp: 31, dp: 1}}
""")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(exp), "--out", str(out)])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert f"{exp}:9: jobs.1.workload.parallelism.pp: 30 layers cannot fill 31 pipeline stages" in text, text
    assert "Traceback" not in text and not out.exists()


def test_cli_runs_a_training_experiment_and_its_dashboard_shows_the_breakdown(tmp_path):
    from typer.testing import CliRunner

    from netsim.cli import app
    from netsim.report.dashboard import build_figures
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", HOLMES, "--variant", "holmes", "--variant", "naive-mixed",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert all(word in result.output for word in ("naive-mixed", "647ms", "76.55", "5.699s")), result.output
    jobs = read_results(out)["jobs"]
    assert dict(zip(jobs["variant"], jobs["partition"])) == {"holmes": "22/14", "naive-mixed": "18/18"}
    titles = [f.layout.title.text for f in build_figures(out)]
    assert "Jobs" in titles and any("iteration time by part" in t for t in titles)
    html = (out / "report.html").read_text()
    assert "exposed DP" in html

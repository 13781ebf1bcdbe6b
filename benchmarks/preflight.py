"""Calibrate the pre-flight estimates (memory and time) against measured runs (not part of ``make test``).

Each case runs in a fresh process that builds, simulates and writes the results directory of one
spec with its HTML report, as ``netsim run`` does (``--no-report``: without the report), and
reports its peak RSS (``VmHWM``: ``benchmarks/peak.py`` says why not ``ru_maxrss``) and its CPU
and wall time; the driver prints spec, measured peak, estimate and their ratio: the table in
:mod:`netsim.experiment.preflight`'s docstring. Cases: the ones named below, every scenario of
``benchmarks/scenarios/`` (by file stem), ``cluster-10`` (the first 10 jobs of ``cluster-500``)
and ``random-SEED`` (:func:`random_spec`).

Usage: ``python benchmarks/preflight.py [--no-report] [CASE ...]`` (default: every named case; ``--list``
names them). Measurements are also appended, one JSON line each, to ``$NETSIM_PREFLIGHT_JSON``
(default ``netsim-preflight.json`` in the temporary directory); ``--table FILE`` prints the table
again from such a file with the current estimates (after a change to the memory model, without
running anything). ``NETSIM_PREFLIGHT_SKIP_ABOVE=GiB`` skips cases whose estimate is above that
(default 8: the runs this refuses must not take down the machine they are measured on);
``NETSIM_PREFLIGHT_KILL_ABOVE=GiB`` (default 12) and ``NETSIM_PREFLIGHT_TIMEOUT=s`` stop a run
above that resident memory or time and record its peak so far (a lower bound). A case the run
refuses (a random spec's algorithm on ranks it does not suit) is reported and the others go on.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RING_ALLREDUCE = ROOT / "experiments" / "ring-allreduce.yaml"


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int, *, count: int = 1, gpus: int = 8, nics: int = 8,
               routing: str = "ecmp", placement="random-host", engine: dict | None = None, **workload) -> dict:
    """A 400G leaf-spine experiment (8-GPU, 8-NIC hosts by default) with a collective workload."""
    w = {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1GiB", **workload}
    return {"name": "calibration", "seed": 1,
            "topology": {"type": "leaf_spine", "leaves": leaves, "spines": spines, "hosts_per_leaf": hosts_per_leaf,
                         "gpus_per_host": gpus, "nics_per_host": nics, "nic": {"bandwidth": "400Gbps", "latency": "1us"},
                         "uplink": {"bandwidth": "400Gbps", "latency": "500ns", "count": count},
                         "intra_host": {"bandwidth": "900GB/s", "latency": "300ns"}},
            "placement": {"type": "random", "by": "host"} if placement == "random-host" else placement,
            "routing": routing, "workload": w, **({"engine": engine} if engine else {})}


def small_spec() -> dict:
    """tests/test_cli.py's small_spec: ring-allreduce.yaml on 2 x 2 leaves, 16 GPUs, 4 MiB."""
    import yaml
    spec = yaml.safe_load(RING_ALLREDUCE.read_text())
    spec["topology"].update(leaves=2, spines=2, hosts_per_leaf=2)
    spec["workload"]["size"] = "4MiB"
    return spec


def random_spec(seed: int) -> dict:
    """A seeded random spec of 16-1,024 GPUs: a leaf-spine, three-tier Clos or dragonfly, any placement and
    routing that suits it, and a collective (any algorithm and size), a sequence of two, or a training job."""
    import numpy as np
    rng = np.random.default_rng(seed)
    pick = lambda options: options[int(rng.integers(len(options)))]  # noqa: E731
    link = {"bandwidth": "400Gbps", "latency": "1us"}
    kind = pick(["leaf_spine", "leaf_spine", "clos3", "dragonfly"])
    gpus_per_host = pick([1, 4, 8])
    if kind == "leaf_spine":
        topology = {"type": "leaf_spine", "leaves": int(rng.integers(2, 17)), "spines": int(rng.integers(2, 17)),
                    "hosts_per_leaf": int(rng.integers(2, 9)), "gpus_per_host": gpus_per_host,
                    "nics_per_host": gpus_per_host, "nic": link, "uplink": {**link, "count": pick([1, 2])},
                    "intra_host": {"bandwidth": "900GB/s"}}
        routings = ["ecmp", "ecmp", "spray", "c4p", "ethereal", {"type": "split", "ways": 4}]
    elif kind == "clos3":
        topology = {"type": "clos3", "pods": int(rng.integers(2, 5)), "leaves_per_pod": int(rng.integers(2, 9)),
                    "spines_per_pod": pick([2, 4]), "hosts_per_leaf": int(rng.integers(1, 5)),
                    "gpus_per_host": gpus_per_host, "nics_per_host": gpus_per_host, "nic": link, "uplink": link,
                    "core": {**link, "switches": pick([2, 4, 8]), "wiring": "mesh"},
                    "intra_host": {"bandwidth": "900GB/s"}}
        routings = ["ecmp", "ecmp", "spray", {"type": "ecmp", "hashing": "hop"}]
    else:
        topology = {"type": "dragonfly", "groups": int(rng.integers(3, 10)), "switches_per_group": 4,
                    "hosts_per_switch": int(rng.integers(2, 5)), "global_links_per_switch": 2, "link": link}
        routings = ["minimal", "ugal", "valiant"]
    placement = pick(["sequential", "topology", {"type": "random"}, {"type": "random", "by": "host"}])
    size = pick(["16MiB", "64MiB", "256MiB"])
    op, algorithm = pick([("allreduce", "ring"), ("allreduce", "tree"), ("allreduce", "halving_doubling"),
                          ("allgather", "ring"), ("alltoall", "direct"), ("alltoall", "pairwise"),
                          ("allreduce", "hierarchical"), ("broadcast", "binomial")])
    from netsim.config import parse_spec
    gpus = parse_spec({"name": "x", "topology": topology, "routing": "ecmp", "workload": {
        "type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1MiB"}}).topology
    from netsim.fabrics import fabric_shape
    gpus = fabric_shape(gpus).gpus
    ranks = max(2, gpus // pick([1, 1, 2]))
    workload = {"type": "collective", "op": op, "algorithm": algorithm, "size": size, "ranks": ranks,
                "channels": pick([1, 2, 4])}
    shape = rng.integers(3)
    if shape == 1:
        workload = {"type": "sequence", "mode": pick(["serial", "concurrent"]), "ranks": ranks,
                    "steps": [{k: v for k, v in workload.items() if k not in ("type", "ranks")},
                              {"op": "allreduce", "algorithm": "ring", "size": size, "ranks": "::2"}]}
    elif shape == 2:
        tp = min(gpus_per_host, pick([1, 2, 4, 8]))
        pp = pick([1, 2, 4])
        dp = max(1, min(pick([2, 4, 8, 16, 64]), gpus // (tp * pp)))
        workload = {"type": "training", "model": {**GPT, "layers": 8, "global_batch": 4 * dp},
                    "parallelism": {"tp": tp, "pp": pp, "dp": dp}, "tp_granularity": pick(["stage", "layer"]),
                    "dp_buckets": pick([1, 4])}
    return {"name": f"random-{seed}", "seed": seed, "topology": topology, "placement": placement,
            "routing": pick(routings), "workload": workload}


GPT = {"layers": 24, "hidden": 2048, "heads": 16, "seq_len": 2048, "vocab": 51200, "micro_batch": 1}

#: name -> a spec (dict) or (experiment file, variant).
CASES = {
    "small-spec": small_spec,
    "ring-allreduce": ("experiments/ring-allreduce.yaml", None),
    "rails-concurrent": ("experiments/rails-concurrent.yaml", None),
    "routes-table": ("experiments/routes-table.yaml", None),
    "policy-sweep": ("experiments/policy-sweep.yaml", "ecmp"),
    "link-failure": ("experiments/link-failure.yaml", "ecmp"),
    "holmes-hetero": ("experiments/holmes-hetero.yaml", "holmes"),
    "c4p-multijob": ("experiments/c4p-multijob.yaml", "ecmp"),
    "c4p-multijob-training": ("experiments/c4p-multijob-training.yaml", "ecmp"),
    "ring-vs-tree": ("experiments/ring-vs-tree.yaml", None),
    "ring-vs-tree-frontier": ("experiments/ring-vs-tree-frontier.yaml", None),
    "frontier-mini-ring": ("experiments/frontier-mini-ring.yaml", None),
    "ecmp-collisions-256": ("experiments/ecmp-collisions-256.yaml", None),
    "spraying-vs-splitting": ("experiments/spraying-vs-splitting.yaml", None),
    # scaled-up leaf-spine rings (flow records on: 580 bytes a message)
    "ring-256-8ch": lambda: leaf_spine(8, 8, 4, count=4, channels=8),
    "ring-512-spray": lambda: leaf_spine(8, 16, 8, count=1, routing="spray", size="256MiB"),
    "ring-1024-lean": lambda: leaf_spine(16, 16, 8, count=4, engine={"record_flows": False, "ideal": False,
                                                                     "congestion": False, "link_series": 0}),
    "hierarchical-512": lambda: leaf_spine(8, 8, 8, algorithm="hierarchical", size="256MiB", channels=2,
                                           placement="sequential"),
    # all-to-alls: every GPU pair's equal-cost paths are cached (S x c^2 of them across leaves)
    "alltoall-128-spray": lambda: leaf_spine(4, 8, 4, count=2, op="alltoall", algorithm="direct", size="64MiB",
                                             routing="spray"),
    "alltoall-256-ecmp": lambda: leaf_spine(8, 8, 4, count=4, op="alltoall", algorithm="direct", size="64MiB"),
    "alltoall-256-pairwise-split": lambda: leaf_spine(8, 8, 4, op="alltoall", algorithm="pairwise", size="64MiB",
                                                      routing={"type": "split", "ways": 4},
                                                      engine={"record_flows": False}),
    # other algorithms under planned and split routing
    "halving-doubling-256-ethereal": lambda: leaf_spine(8, 8, 4, count=4, algorithm="halving_doubling",
                                                        size="64MiB", routing="ethereal"),
    "tree-512-c4p": lambda: leaf_spine(8, 16, 8, algorithm="tree", size="256MiB", routing="c4p"),
    # training: GPT on 128 GPUs, TP 8 per host, PP 4, DP 4, 16 micro-batches, per-layer TP allreduces
    "training-128-layer": lambda: {
        **leaf_spine(4, 4, 4), "workload": {
            "type": "training", "model": {**GPT, "global_batch": 64}, "parallelism": {"tp": 8, "pp": 4, "dp": 4},
            "tp_granularity": "layer", "dp_buckets": 4, "iterations": 2}},
    # dragonfly: 9 groups x 4 switches x 4 hosts, UGAL, pairwise all-to-all
    "dragonfly-alltoall": lambda: {
        "name": "calibration", "seed": 1,
        "topology": {"type": "dragonfly", "groups": 9, "switches_per_group": 4, "hosts_per_switch": 4,
                     "global_links_per_switch": 2, "link": {"bandwidth": "200Gbps", "latency": "100ns"}},
        "placement": {"type": "random"}, "routing": "ugal",
        "workload": {"type": "collective", "op": "alltoall", "algorithm": "pairwise", "size": "16MiB"}},
    # large fabrics, small workloads: the topology terms
    "fabric-32k-gpus": lambda: leaf_spine(64, 16, 64, size="1MiB", ranks=64),
    "frontier-full": lambda: {
        "name": "calibration", "seed": 1, "topology": {"type": "frontier", "groups": 74},
        "placement": {"type": "random", "by": "host"}, "routing": "minimal",
        "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "64MiB", "ranks": 256}},
    # every scenario of benchmarks/scenarios/ (whole default runs, some of minutes and gigabytes)
    **{p.stem: (str(p.relative_to(ROOT)), None) for p in sorted((ROOT / "benchmarks" / "scenarios").glob("*.yaml"))},
    # the first 10 jobs of cluster-500 (the whole trace takes hours)
    "cluster-10": ("benchmarks/scenarios/cluster-500.yaml", None, ["cluster.max_jobs=10"]),
}


def load(name: str):
    """The ExperimentSpec of a case (``random-SEED``: :func:`random_spec`)."""
    from netsim.config import load_experiment, parse_spec
    from netsim.experiment.sweep import expand
    if name.startswith("random-"):
        return parse_spec(random_spec(int(name.split("-")[1])))
    case = CASES[name]
    if isinstance(case, tuple):
        path, variant, *sets = case
        runs = expand(load_experiment(ROOT / path, *sets))
        return next(r.spec for r in runs if variant is None or r.variant == variant)
    return parse_spec(case())


def run_one(name: str, report: bool = True) -> dict:
    """Run a case in this (fresh) process as ``netsim run`` would; its peak RSS and counts."""
    from netsim.experiment import run_experiment, write_results
    from peak import peak_rss_bytes
    spec = load(name)
    t0 = time.perf_counter()
    result = run_experiment(spec)
    with tempfile.TemporaryDirectory() as tmp:
        target = write_results([result], Path(tmp) / "results")
        if report:
            from netsim.report import write_report
            write_report(target)
    fabric = getattr(result, "fabric", None)  # a cluster run has none
    return {"case": name, "peak_bytes": peak_rss_bytes(),
            "wall_s": round(time.perf_counter() - t0, 1), "messages": fabric.stats["flows"] if fabric else 0,
            "connections": len(fabric.queue_pairs) if fabric else 0}


def _status_bytes(pid: int, key: str) -> int:
    """``VmRSS`` or ``VmHWM`` of a live process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return next((int(line.split()[1]) * 1024 for line in status if line.startswith(key + ":")), 0)
    except OSError:
        return 0


def measure(name: str, report: bool = True, timeout: float | None = None, kill_above_bytes: float | None = None) -> dict:
    """Run a case in a fresh subprocess; its measurements and the estimate.

    ``process_s`` is the child's whole wall time, imports included (what ``netsim run`` takes, warm),
    ``cpu_s`` its CPU time (the wall time on an idle machine: the run is one thread).
    A run past ``timeout`` seconds or above ``kill_above_bytes`` resident is stopped and reported with
    ``stopped`` set and its peak so far (a lower bound).
    """
    from netsim.experiment.preflight import estimate
    est = estimate(load(name))
    cmd = [sys.executable, __file__, "--one", name] + ([] if report else ["--no-report"])
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, text=True, cwd=ROOT)
        stopped, peak, usage = None, 0, None
        while usage is None:
            time.sleep(0.5)
            peak = max(peak, _status_bytes(proc.pid, "VmHWM"))
            if timeout and time.perf_counter() - t0 > timeout:
                stopped = f"stopped after {timeout:.0f} s"
            elif kill_above_bytes and _status_bytes(proc.pid, "VmRSS") > kill_above_bytes:
                stopped = f"stopped above {kill_above_bytes / 2**30:.0f} GiB"
            if stopped:
                proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0 if stopped else os.WNOHANG)
            if not pid:
                usage = None
            else:
                proc.returncode = os.waitstatus_to_exitcode(status)
        process_s = time.perf_counter() - t0
        stdout.seek(0)
        stderr.seek(0)
        text, errors = stdout.read(), stderr.read()
    if stopped:
        row = {"case": name, "peak_bytes": peak, "wall_s": round(process_s, 1), "messages": est.messages,
               "connections": est.connections, "stopped": stopped}
    elif proc.returncode:
        raise RuntimeError(f"{name} failed:\n{errors[-3000:]}")
    else:
        row = json.loads(text.strip().splitlines()[-1])
    # CPU time too: on a shared machine the wall time says as much about the neighbours as about the run
    row.update(process_s=round(process_s, 1), cpu_s=round(usage.ru_utime + usage.ru_stime, 1))
    row.update(estimate_bytes=est.memory_bytes, ratio=est.memory_bytes / row["peak_bytes"],
               est_messages=est.messages, est_connections=est.connections,
               parts={k: round(v / 2**20) for k, v in est.parts})
    return row


def _line(name: str, peak: float | None, est: float, wall: float | None = None, messages: int | None = None,
          parts: dict | None = None) -> str:
    if peak is None:
        return f"{name:<30} {'skipped':>9} {est / 2**20:>7.0f}Mi"
    return (f"{name:<30} {peak / 2**20:>7.0f}Mi {est / 2**20:>7.0f}Mi {est / peak:>6.2f} {wall:>6.0f}s  "
            f"{messages:,}" + (f"  {parts}" if parts else ""))


def table(path: Path) -> None:
    """The table of measurements saved in ``path`` against the current estimates."""
    from netsim.experiment.preflight import estimate
    rows = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        rows[row["case"]] = row  # the latest measurement of each case
    for name, row in rows.items():
        est = estimate(load(name)).memory_bytes if name in CASES else row["estimate_bytes"]
        print(_line(name, row["peak_bytes"], est, row["wall_s"], row["messages"]))


def main(argv: list[str]) -> None:
    report = "--no-report" not in argv
    argv = [a for a in argv if a != "--no-report"]
    if argv and argv[0] == "--one":  # the kernels are compiled (main warms them): loaded as netsim run loads them
        print(json.dumps(run_one(argv[1], report)))
        return
    if argv and argv[0] == "--list":
        print("\n".join(CASES))
        return
    if argv and argv[0] == "--table":
        table(Path(argv[1]))
        return
    from netsim.experiment.preflight import estimate
    skip = float(os.environ.get("NETSIM_PREFLIGHT_SKIP_ABOVE", "8")) * 2**30
    timeout = float(os.environ.get("NETSIM_PREFLIGHT_TIMEOUT", "0")) or None
    kill = float(os.environ.get("NETSIM_PREFLIGHT_KILL_ABOVE", "12")) * 2**30
    subprocess.run([sys.executable, "-c", "from netsim.engine.table import warm_up; warm_up()"], check=True)
    print(f"# {time.strftime('%Y-%m-%d')}, {platform.node()}: {os.cpu_count()} CPUs, python {platform.python_version()}"
          f"{'' if report else ', without the report'}")
    print(f"{'case':<30} {'measured':>9} {'estimate':>9} {'ratio':>6} {'wall':>7}  messages")
    out = Path(os.environ.get("NETSIM_PREFLIGHT_JSON", Path(tempfile.gettempdir()) / "netsim-preflight.json"))
    for name in argv or list(CASES):
        est = estimate(load(name)).memory_bytes
        if est > skip:
            print(_line(name, None, est))
            continue
        try:
            row = measure(name, report, timeout, kill)
        except RuntimeError as exc:  # a random spec the run refuses (e.g. halving-doubling on 176 ranks)
            print(f"{name:<30} failed: {str(exc).strip().splitlines()[-1][:80]}", flush=True)
            continue
        with out.open("a") as f:
            f.write(json.dumps({**row, "report": report, "date": time.strftime("%Y-%m-%d")}) + "\n")
        print(_line(name, row["peak_bytes"], row["estimate_bytes"], row["wall_s"], row["messages"], row["parts"]),
              flush=True)

if __name__ == "__main__":
    main(sys.argv[1:])

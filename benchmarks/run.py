"""Performance scenarios (``make bench``): wall time, events/s, solver calls and peak memory.

Each scenario runs in its own subprocess so that peak RSS is per scenario. Not part of ``make test``.
Usage: ``python benchmarks/run.py [SCENARIO ...]`` (default: all).
"""

from __future__ import annotations

import json
import platform
import resource
import subprocess
import sys
import time

import numpy as np

SCENARIOS = {
    # Ring allreduce 1 GiB, 256 GPUs = 32 hosts x 8 GPUs x 8 NICs, 8 leaves x 8 spines, 1:1
    # (4 hosts x 8 NICs x 200G down = 4 cables x 8 spines x 200G up), hosts placed randomly,
    # 8 channels (one per NIC, as NCCL): 32 flows leave each leaf over 32 uplinks and ECMP collides.
    "ring-256": dict(leaves=8, spines=8, hosts_per_leaf=4, uplinks=4, size=2**30, channels=8),
    # The same at 1024 GPUs: 128 hosts, 16 leaves x 16 spines (8 hosts x 8 NICs = 4 cables x 16 spines).
    "ring-1024": dict(leaves=16, spines=16, hosts_per_leaf=8, uplinks=4, size=2**30, channels=8),
    # One channel: only the one edge per host crosses the fabric (few collisions): the cheap baseline.
    "ring-256-1ch": dict(leaves=8, spines=8, hosts_per_leaf=4, uplinks=4, size=2**30, channels=1),
    "ring-1024-1ch": dict(leaves=16, spines=16, hosts_per_leaf=8, uplinks=4, size=2**30, channels=1),
    # Training: four 64-GPU GPT-3.6B DP jobs (TP=8, DP=8), 3 iterations each, on the 256-GPU fabric.
    "train-4jobs-256": dict(experiment="experiments/c4p-multijob-training.yaml", variant="ecmp"),
    # Holmes on 4 IB + 4 RoCE nodes: GPT-7.5B, TP=8 PP=2 DP=4, with the partition search (6 probes).
    "train-holmes-64": dict(experiment="experiments/holmes-hetero.yaml", variant="holmes"),
}
ENGINE_OFF = {"record_flows": False, "ideal": False, "congestion": False, "link_series": 0}


def run_one(name: str) -> dict:
    """Run one scenario in this process and return its measurements."""
    from netsim.config import ExperimentSpec
    from netsim.experiment import run_experiment

    p = SCENARIOS[name]
    if "experiment" in p:
        return run_file(name, p["experiment"], p["variant"])
    spec = ExperimentSpec.model_validate({
        "name": f"bench-{name}", "seed": 1,
        "topology": {"type": "leaf_spine", "leaves": p["leaves"], "spines": p["spines"],
                     "hosts_per_leaf": p["hosts_per_leaf"], "gpus_per_host": 8, "nics_per_host": 8,
                     "nic": {"bandwidth": "200Gbps", "latency": "1us"},
                     "uplink": {"bandwidth": "200Gbps", "latency": "500ns", "count": p["uplinks"]},
                     "intra_host": {"bandwidth": "900GB/s", "latency": "300ns"}},
        "placement": {"type": "random", "by": "host"},
        "routing": "ecmp",
        "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": p["size"],
                     "channels": p["channels"]},
        "engine": ENGINE_OFF,
    })
    t0 = time.perf_counter()
    result = run_experiment(spec)
    wall = time.perf_counter() - t0
    coll = result.collectives[0]
    n = coll.n_ranks
    ideal = 2 * (n - 1) * coll.size_bytes / (n * 25e9 * min(p["channels"], 8))
    return {
        "scenario": name, "gpus": n, "wall_s": round(wall, 2), "sim_collective_s": coll.duration_s,
        "slowdown_vs_nic_bound": coll.duration_s / ideal,
        "flows": result.fabric.stats["flows"], "solver_calls": result.fabric.stats["solver_calls"],
        "max_component": result.fabric.stats["max_component"], "events": result.events,
        "events_per_s": round(result.events / wall), "flows_per_s": round(result.fabric.stats["flows"] / wall),
        "peak_rss_MiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def run_file(name: str, experiment: str, variant: str) -> dict:
    """One variant of a shipped experiment with the engine's optional accounting off; the first job's
    first iteration."""
    from pathlib import Path

    from netsim.config import load_experiment
    from netsim.experiment import run_experiment
    from netsim.experiment.sweep import expand

    root = Path(__file__).resolve().parent.parent
    exp = load_experiment(root / experiment, [f"engine.{k}={str(v).lower()}" for k, v in ENGINE_OFF.items()])
    (spec,) = [r.spec for r in expand(exp) if r.variant == variant]
    t0 = time.perf_counter()
    result = run_experiment(spec)
    wall = time.perf_counter() - t0
    return {
        "scenario": name, "gpus": len(result.gpus), "wall_s": round(wall, 2),
        "sim_collective_s": result.iterations[0].duration_s, "slowdown_vs_nic_bound": float("nan"),
        "flows": result.fabric.stats["flows"], "solver_calls": result.fabric.stats["solver_calls"],
        "max_component": result.fabric.stats["max_component"], "events": result.events,
        "events_per_s": round(result.events / wall), "flows_per_s": round(result.fabric.stats["flows"] / wall),
        "peak_rss_MiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--one":
        print(json.dumps(run_one(argv[1])))
        return
    names = argv or list(SCENARIOS)
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}, "
          f"numpy {np.__version__}")
    header = ("scenario", "gpus", "wall_s", "sim_collective_s", "slowdown_vs_nic_bound", "flows", "solver_calls",
              "max_component", "events", "events_per_s", "peak_rss_MiB")
    print(" | ".join(header))
    for name in names:
        out = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(" | ".join(f"{row[h]:.6g}" if isinstance(row[h], float) else str(row[h]) for h in header), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Whole-command benchmarks: ``netsim run`` on the scenario files of benchmarks/scenarios/, as users run it.

Each scenario is one ``netsim run FILE`` in a fresh process with the default engine settings (flow
records, the ideal and bound, congestion, link series and the report all on), timed from the
outside, with its peak resident memory. Runs are warm: the engine's kernels are compiled (or loaded
from numba's cache) before the first one; ``--cold`` also times one run with an empty kernel cache
(the first run after install). Prints one row per scenario and writes them to
``benchmarks/last-cli.json`` (or ``$NETSIM_BENCH_JSON``).

Usage: ``python benchmarks/cli.py [--cold] [--repeat N] [--max-memory SIZE] [SCENARIO ...]``
(scenario names are file stems, and ``quickstart`` for the demo; default: all of them).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
#: Shipped experiments timed as scenarios too: the demo's target is <= 60 s warm on 2 cores (issue 28).
SHIPPED = {"quickstart": HERE.parent / "experiments" / "quickstart.yaml"}


def run_once(path: Path, out: Path, env: dict, max_memory: str | None, timeout: float | None) -> dict:
    """One ``netsim run`` of ``path`` in a child process: wall time, peak RSS, exit status."""
    cmd = [sys.executable, "-m", "netsim.cli", "run", str(path), "--out", str(out), "--force"]
    if max_memory:
        cmd += ["--max-memory", max_memory]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"wall_s": math.inf, "status": f"stopped after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    row = {"wall_s": round(wall, 2), "status": "ok" if proc.returncode == 0 else f"exit {proc.returncode}"}
    if proc.returncode:
        row["error"] = (stderr.strip().splitlines() or [""])[-1][:300]
        return row
    runs = pd.read_parquet(out / "runs.parquet").iloc[0]
    row.update(events=int(runs["events"]), flows=int(runs["flows"]), sim_s=float(runs["sim_time_s"]),
               engine_wall_s=round(float(runs["wall_s"]), 2))
    return row


def peak_rss(path: Path, out: Path, env: dict, max_memory: str | None, timeout: float | None) -> dict:
    """``run_once`` in a wrapper process, so that its RUSAGE_CHILDREN peak is this run's alone."""
    code = ("import json, resource, sys; sys.path.insert(0, %r); from cli import run_once; from pathlib import Path; "
            "r = run_once(Path(%r), Path(%r), dict(__import__('os').environ), %r, %r); "
            "r['peak_rss_MiB'] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1); "
            "print(json.dumps(r))") % (str(HERE), str(path), str(out), max_memory, timeout)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode:
        return {"wall_s": math.inf, "status": "benchmark failed", "error": done.stderr[-300:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="benchmarks/cli.py")
    parser.add_argument("scenarios", nargs="*")
    parser.add_argument("--cold", action="store_true", help="also time one run with an empty kernel cache")
    parser.add_argument("--repeat", type=int, default=1, help="warm runs per scenario (the best is kept)")
    parser.add_argument("--max-memory", default="64GiB", help="passed to netsim run (the pre-flight limit)")
    parser.add_argument("--timeout", type=float, default=float(os.environ.get("NETSIM_BENCH_TIMEOUT", "0")) or None)
    args = parser.parse_args()
    names = args.scenarios or [*sorted(p.stem for p in SCENARIOS.glob("*.yaml")), *SHIPPED]
    env = dict(os.environ)
    # Warm: compile (or load) the kernels once, outside every timed run.
    subprocess.run([sys.executable, "-c", "from netsim.engine.table import warm_up; warm_up()"], check=True, env=env)
    rows = []
    out_file = Path(os.environ.get("NETSIM_BENCH_JSON", HERE / "last-cli.json"))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}; "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = SHIPPED.get(name, SCENARIOS / f"{name}.yaml")
            best = None
            for _ in range(max(1, args.repeat)):
                row = peak_rss(path, Path(tmp) / name, env, args.max_memory, args.timeout)
                if best is None or row["wall_s"] < best["wall_s"]:
                    best = row
            best = {"scenario": name, **best}
            if args.cold:
                cold_env = {**env, "NUMBA_CACHE_DIR": str(Path(tmp) / f"cache-{name}")}
                cold = peak_rss(path, Path(tmp) / f"{name}-cold", cold_env, args.max_memory, args.timeout)
                best["cold_wall_s"] = cold["wall_s"]
            rows.append(best)
            print(json.dumps(best), flush=True)
            out_file.write_text(json.dumps({"machine": platform.platform(), "date": time.strftime("%Y-%m-%d"),
                                            "scenarios": rows}, indent=2))
    print(f"written: {out_file}")


if __name__ == "__main__":
    main()

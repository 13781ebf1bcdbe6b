"""SimGrid side by side: time SimGrid 4.x on netsim's scenario files, next to netsim's own numbers.

For each scenario, ``plan.py`` turns the file into a plan (fabric, routes, messages) and
``model.py`` runs it in SimGrid's virtualenv, in a fresh process, timed from the outside with its
peak resident memory, as ``benchmarks/cli.py`` times ``netsim run``. Each row also shows netsim's
simulated time and wall time for the same file: from ``benchmarks/last-cli.json`` (the last
``benchmarks/cli.py`` run), or measured now with ``--netsim`` (``--netsim-tree DIR`` runs the netsim
of another checkout); and the relative difference of the two simulated times.

SimGrid is not a dependency of netsim. Without it this prints how to install it and exits 0.

Usage: ``python benchmarks/simgrid/run.py [--netsim] [--routing R] [--latency netsim|simgrid]
[--check-routes] [SCENARIO ...]`` (scenario names are file stems of benchmarks/scenarios/, or
paths; default: the supported ones below). ``$NETSIM_SIMGRID_PYTHON`` names the Python of
SimGrid's virtualenv (default ``~/.cache/netsim-simgrid/venv/bin/python``).
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

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
SCENARIOS = BENCH / "scenarios"
DEFAULT = ("a2a-256-spray", "a2a-256-ecmp", "ring-1024")
CACHE = Path.home() / ".cache/netsim-simgrid"
SIMGRID_PYTHON = Path(os.environ.get("NETSIM_SIMGRID_PYTHON", CACHE / "venv/bin/python"))
SIMGRID_PREFIX = Path(os.environ.get("NETSIM_SIMGRID_PREFIX", CACHE / "prefix"))
MODEL_CPP = CACHE / "bin/model-cpp"

INSTALL = f"""SimGrid is not installed for this benchmark (looked for {SIMGRID_PYTHON}).
Install it in its own virtualenv (about 5 minutes on 2 cores; see benchmarks/simgrid/README.md):

    apt-get install -y cmake g++ libboost-dev
    python3.11 -m venv ~/.cache/netsim-simgrid/venv
    ~/.cache/netsim-simgrid/venv/bin/pip install 'pybind11<3' setuptools wheel
    ~/.cache/netsim-simgrid/venv/bin/pip install --no-build-isolation simgrid==4.1

and, for the C++ model (SimGrid at its own speed), its headers and library under {SIMGRID_PREFIX}
(README.md says how).
"""

sys.path.insert(0, str(HERE))
from plan import Unsupported, check_ecmp, make_plan, write_plan


def simgrid_env() -> dict | None:
    """The environment that runs SimGrid's Python, or None when SimGrid is not there."""
    if not SIMGRID_PYTHON.exists():
        return None
    env = dict(os.environ)
    # pip's SimGrid wheel puts libsimgrid.so beside the module, without an rpath to it.
    found = subprocess.run([str(SIMGRID_PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=False)
    if found.returncode:
        return None
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [found.stdout.strip(), env.get("LD_LIBRARY_PATH")]))
    check = subprocess.run([str(SIMGRID_PYTHON), "-c", "import simgrid"], capture_output=True, env=env, check=False)
    return env if check.returncode == 0 else None


def build_cpp() -> Path | None:
    """Compile model.cpp against the SimGrid under SIMGRID_PREFIX (when newer than the binary); None without it."""
    if not (SIMGRID_PREFIX / "include/simgrid/s4u.hpp").exists():
        return None
    source = HERE / "model.cpp"
    if not MODEL_CPP.exists() or MODEL_CPP.stat().st_mtime < source.stat().st_mtime:
        MODEL_CPP.parent.mkdir(parents=True, exist_ok=True)
        lib = SIMGRID_PREFIX / "lib"
        subprocess.run(["g++", "-O2", "-std=c++17", str(source), f"-I{SIMGRID_PREFIX / 'include'}", f"-L{lib}",
                        f"-Wl,-rpath,{lib}", "-lsimgrid", "-o", str(MODEL_CPP)], check=True)
    return MODEL_CPP


def timed(cmd: list[str], env: dict, cwd: str | None, timeout: float | None) -> dict:
    """Run ``cmd`` in a wrapper process, so that RUSAGE_CHILDREN's peak is this run's alone."""
    code = ("import json, resource, subprocess, sys, time; t0 = time.perf_counter(); "
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=TIMEOUT); "
            "wall = time.perf_counter() - t0; "
            "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024; "
            "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': p.stderr[-2000:], 'wall_s': wall, "
            "'peak_rss_MiB': rss}))").replace("TIMEOUT", repr(timeout))
    done = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True, env=env, cwd=cwd,
                          check=False)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        return {"status": f"stopped after {timeout:.0f} s" if "TimeoutExpired" in done.stderr else "failed",
                "error": last[:300]}
    outer = json.loads(done.stdout)
    if outer["rc"]:
        return {"status": f"exit {outer['rc']}", "error": outer["err"].strip()[-300:]}
    return {"status": "ok", "wall_s": round(outer["wall_s"], 2), "peak_rss_MiB": round(outer["peak_rss_MiB"], 1),
            "stdout": outer["out"]}


def time_simgrid(model: list[str], plan_path: Path, env: dict, timeout: float | None) -> dict:
    """One SimGrid model run (``model``: the command before the plan): its result, wall time and peak RSS."""
    row = timed([*model, str(plan_path)], env, None, timeout)
    if row["status"] == "ok":
        row = {**json.loads(row.pop("stdout").strip().splitlines()[-1]), **row}
    return row


def time_netsim(path: Path, tree: str | None, timeout: float | None) -> dict:
    """One ``netsim run`` of ``path`` as benchmarks/cli.py runs it (default settings, warm kernels).

    ``tree``: run the netsim of that source tree (a checkout of another commit) instead of the
    installed one; it runs from there, so that the working directory does not shadow it.
    """
    import pandas as pd

    env, cwd = dict(os.environ), None
    if tree:
        env["PYTHONPATH"], cwd = tree, tree
    # Compile (or load) the kernels outside the timed run, as benchmarks/cli.py does.
    subprocess.run([sys.executable, "-c", "from netsim.engine.table import warm_up; warm_up()"], env=env, cwd=cwd,
                   capture_output=True, check=False)
    with tempfile.TemporaryDirectory() as tmp:
        row = timed([sys.executable, "-m", "netsim.cli", "run", str(path.resolve()), "--out", f"{tmp}/out", "--force",
                     "--max-memory", "64GiB"], env, cwd, timeout)
        if row["status"] != "ok":
            return {"netsim_status": row["status"], "netsim_error": row.get("error")}
        runs = pd.read_parquet(f"{tmp}/out/runs.parquet").iloc[0]
    return {"netsim_wall_s": row["wall_s"], "netsim_sim_s": float(runs["sim_time_s"]),
            "netsim_peak_rss_MiB": row["peak_rss_MiB"], "netsim_from": f"measured now{f' ({tree})' if tree else ''}"}


def netsim_numbers(name: str, path: Path, measure: bool, tree: str | None, timeout: float | None) -> dict:
    """netsim's wall time and simulated time for ``path``: measured now, or from last-cli.json."""
    if measure:
        return time_netsim(path, tree, timeout)
    last = BENCH / "last-cli.json"
    if last.exists():
        data = json.loads(last.read_text())
        for row in data.get("scenarios", []):
            if row.get("scenario") == name and row.get("status") == "ok":
                return {"netsim_wall_s": row["wall_s"], "netsim_sim_s": row["sim_s"],
                        "netsim_peak_rss_MiB": row.get("peak_rss_MiB"), "netsim_from": f"last-cli.json {data['date']}"}
    return {}


def main() -> None:
    parser = argparse.ArgumentParser(prog="benchmarks/simgrid/run.py")
    parser.add_argument("scenarios", nargs="*")
    parser.add_argument("--routing", choices=("ecmp", "dmodk", "spray"),
                        help="routes in SimGrid (default: the scenario's; spray scenarios get dmodk)")
    parser.add_argument("--latency", choices=("auto", "netsim", "simgrid"), default="auto",
                        help="netsim: latency added after the last byte (netsim's model); simgrid: CM02's own; "
                             "auto (default): simgrid where no two connections share a link (the same model "
                             "then), netsim otherwise")
    parser.add_argument("--bindings", choices=("cpp", "python", "both"), default="cpp",
                        help="which model runs: model.cpp (default; model.py when SimGrid's C++ side is not there), "
                             "model.py through SimGrid's Python bindings, or both")
    parser.add_argument("--netsim", action="store_true", help="also run netsim on each scenario now")
    parser.add_argument("--netsim-tree", help="with --netsim: the netsim source tree to run (another commit's checkout)")
    parser.add_argument("--check-routes", action="store_true", help="compare every ECMP route with netsim's policy")
    parser.add_argument("--timeout", type=float, default=float(os.environ.get("NETSIM_BENCH_TIMEOUT", "0")) or None)
    args = parser.parse_args()
    env = simgrid_env()
    if env is None:
        print(INSTALL)
        return
    models = {}
    if args.bindings in ("cpp", "both"):
        cpp = build_cpp()
        if cpp is not None:
            models["C++"] = [str(cpp)]
        else:
            print(f"(no SimGrid headers under {SIMGRID_PREFIX}: the C++ model is skipped; see README.md)")
    if args.bindings in ("python", "both") or not models:
        models["Python"] = [str(SIMGRID_PYTHON), str(HERE / "model.py")]
    names = args.scenarios or list(DEFAULT)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}; "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = Path(name) if name.endswith(".yaml") else SCENARIOS / f"{name}.yaml"
            stem = path.stem
            try:
                plan = make_plan(path, args.routing, args.latency)
            except Unsupported as err:
                print(json.dumps({"scenario": stem, "status": f"not supported: {err}"}), flush=True)
                continue
            if args.check_routes and plan["routing"] == "ecmp":
                print(f"{stem}: {check_ecmp(path)} ECMP routes identical to netsim's", flush=True)
            plan_path = write_plan(plan, Path(tmp) / f"{stem}.plan")
            theirs = netsim_numbers(stem, path, args.netsim, args.netsim_tree, args.timeout)
            for bindings, model in models.items():
                row = time_simgrid(model, plan_path, env, args.timeout)
                row = {"scenario": stem, "routing": plan["routing"], "latency": plan["latency"],
                       "bindings": bindings, **row, **theirs}
                if row.get("status") == "ok" and row.get("netsim_sim_s"):
                    row["sim_rel_diff"] = row["sim_time_s"] / row["netsim_sim_s"] - 1
                rows.append(row)
                print(json.dumps(row), flush=True)
    print()
    print(f"{'scenario':<16} {'routing':<7} {'latency':<7} {'SimGrid':<7} {'flows':>9} {'SimGrid wall':>12} {'RSS':>9} "
          f"{'netsim wall':>11} {'RSS':>9} {'SimGrid sim':>15} {'netsim sim':>15} {'rel diff':>9}")
    for r in rows:
        print(f"{r['scenario']:<16} {r['routing']:<7} {r['latency']:<7} {r['bindings']:<7} {_num(r, 'flows', ',d'):>9} "
              f"{_num(r, 'wall_s', '.2f', ' s'):>12} {_num(r, 'peak_rss_MiB', '.0f', ' MiB'):>9} "
              f"{_num(r, 'netsim_wall_s', '.2f', ' s'):>11} {_num(r, 'netsim_peak_rss_MiB', '.0f', ' MiB'):>9} "
              f"{_num(r, 'sim_time_s', '.10g'):>15} {_num(r, 'netsim_sim_s', '.10g'):>15} "
              f"{_num(r, 'sim_rel_diff', '.1e'):>9}")


def _num(row: dict, key: str, fmt: str, unit: str = "") -> str:
    """``row[key]`` formatted, or a dash when it is missing."""
    v = row.get(key)
    return format(v, fmt) + unit if isinstance(v, (int, float)) and not math.isinf(v) else "-"


if __name__ == "__main__":
    main()

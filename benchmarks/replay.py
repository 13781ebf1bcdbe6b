"""Record a window of a scenario's flow-table kernel calls, and replay it: kernel work without SimPy.

On a shared VM a whole scenario's wall time moves by +-30 % from run to run, which hides the
10 % a kernel change is worth. A recording holds the flow table's state before the window and the
arguments of every ``FlowTable.flush`` and ``FlowTable.drain`` call in it; a replay feeds the
same calls to a fresh copy of that state, several times, and reports the best time per call with
a checksum of what came out (next finish times, rates, bytes per link). Two tables (the tree's and
another one, e.g. a git worktree) that print the same checksum computed the same thing; interleave
their replays to compare their speed.

Usage::

    python benchmarks/replay.py record s4-frontier-ring-1024 /tmp/s4.pkl --skip 1000000 --calls 200000
    python benchmarks/replay.py replay /tmp/s4.pkl [--table path/to/netsim/engine/table.py] [--repeat 3]

The recording is a pickle of this tree's table layout: replay it with tables of the same layout.
Rings are recorded as their per-rank processes run them (a ring in one compiled call,
``Fabric.run_ring``, makes no per-instant call from Python).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import pickle
import sys
import time
from pathlib import Path

import numpy as np


class _Recorded(Exception):
    """The window is complete: stop the scenario."""


def record(scenario: str, out: Path, skip: int, calls: int) -> tuple[int, float]:
    """Run ``scenario`` in this process and record kernel calls ``skip`` .. ``skip + calls``; returns
    the number recorded (fewer when the run ends first) and the sum of the finite next-finish times
    those calls returned (what a faithful replay's checksum starts with).

    Rings run as per-rank processes here (``RING_KERNEL`` off): the per-instant calls are what is
    recorded, and a ring in one compiled call makes none from Python."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run as bench

    from netsim.engine import fabric as fabrics
    from netsim.engine import table as tables

    fabrics.RING_KERNEL = False

    flush, drain = tables.FlowTable.flush, tables.FlowTable.drain
    state = {"n": 0, "snap": None, "log": [], "finish_sum": 0.0}

    def save() -> None:  # via a temporary file: an interrupted save leaves no recording behind
        part = out.with_name(out.name + ".part")
        with open(part, "wb") as fh:
            pickle.dump((state["snap"], state["log"], state["finish_sum"]), fh)
        part.replace(out)

    def note(table, kind: str, args: tuple) -> bool:
        state["n"] += 1
        if state["n"] == skip + 1:
            state["snap"], state["table"] = copy.deepcopy(table.__dict__), table
        if state["snap"] is None or table is not state["table"]:
            return False  # (a run with several fabrics, e.g. Holmes's probes: only the window's table)
        state["log"].append((kind, copy.deepcopy(args)))
        return True

    def done(t_next: float) -> None:
        if t_next < np.inf:
            state["finish_sum"] += t_next
        if len(state["log"]) == calls:
            save()
            raise _Recorded

    def rec_flush(self, removes, adds, bulk, extra_seeds, now):
        noted = note(self, "f", (list(removes), list(adds), list(bulk), set(extra_seeds), now))
        result = flush(self, removes, adds, bulk, extra_seeds, now)
        if noted:
            done(result[1])
        return result

    def rec_drain(self, horizon, now, fuse=False):
        noted = note(self, "d", (horizon, now, fuse))
        result = drain(self, horizon, now, fuse)
        if noted:
            done(result[2])
        return result

    tables.FlowTable.flush, tables.FlowTable.drain = rec_flush, rec_drain
    try:
        bench.run_one(scenario)
    except _Recorded:
        pass
    finally:
        tables.FlowTable.flush, tables.FlowTable.drain = flush, drain
    if state["snap"] is None:
        raise SystemExit(f"{scenario} made only {state['n']} kernel calls: nothing recorded (lower --skip)")
    if len(state["log"]) < calls:
        save()
    return len(state["log"]), state["finish_sum"]


def load_table_module(path: Path | None):
    """This tree's :mod:`netsim.engine.table`, or the table module in the file ``path``."""
    if path is None:
        from netsim.engine import table
        return table
    spec = importlib.util.spec_from_file_location(f"replayed_table_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replay(recording: Path, table_file: Path | None = None, repeat: int = 3) -> dict:
    """Replay ``recording`` ``repeat`` times on fresh copies of its state; the best time and a checksum."""
    tables = load_table_module(table_file)
    tables.warm_up()
    with open(recording, "rb") as fh:
        snap, log, _live = pickle.load(fh)
    best = float("inf")
    for _ in range(repeat):
        table = tables.FlowTable.__new__(tables.FlowTable)
        table.__dict__.update(copy.deepcopy(snap))
        table._views()
        flush, drain = table.flush, table.drain
        finish_sum = 0.0
        t0 = time.perf_counter()
        for kind, args in log:
            t_next = flush(*args)[1] if kind == "f" else drain(*args)[2]
            if t_next < np.inf:
                finish_sum += t_next
        best = min(best, time.perf_counter() - t0)
    checksum = f"{finish_sum:.12e}/{float(table.num[:, 1].sum()):.12e}/{float(table.link_bytes.sum()):.12e}"
    return {"calls": len(log), "best_s": best, "us_per_call": best / len(log) * 1e6, "checksum": checksum,
            "finish_sum": finish_sum}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="run a scenario and record a window of its kernel calls")
    rec.add_argument("scenario")
    rec.add_argument("out", type=Path)
    rec.add_argument("--skip", type=int, default=1_000_000, help="kernel calls to let pass first")
    rec.add_argument("--calls", type=int, default=200_000, help="kernel calls to record")
    rep = sub.add_parser("replay", help="replay a recording and time it")
    rep.add_argument("recording", type=Path)
    rep.add_argument("--table", type=Path, default=None, help="a table.py to replay with (default: this tree's; it imports this tree's solver)")
    rep.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.cmd == "record":
        n, finish_sum = record(args.scenario, args.out, args.skip, args.calls)
        print(f"recorded {n} kernel calls of {args.scenario} into {args.out} (live checksum {finish_sum:.12e}/...)")
    else:
        r = replay(args.recording, args.table, args.repeat)
        print(f"{r['calls']} calls, best {r['best_s']:.3f} s, {r['us_per_call']:.2f} us per call, "
              f"checksum {r['checksum']}")


if __name__ == "__main__":
    main(sys.argv[1:])

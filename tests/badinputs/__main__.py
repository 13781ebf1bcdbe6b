"""``python -m tests.badinputs [--skip-dangerous] [--kind K] [--jobs N] [--show]``: run the corpus, print counts.

Prints one line per case that is not acceptable, then a table of outcomes by class. With
``PYTHONPATH=<another checkout>`` it measures that checkout's netsim (the issue's "before").
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

from tests.badinputs import all_cases
from tests.badinputs.harness import run_cases

OUTCOMES = ("ok", "error", "traceback", "long-message", "hang", "oom")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.badinputs")
    parser.add_argument("--skip-dangerous", action="store_true")
    parser.add_argument("--kind", action="append")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--show", action="store_true", help="print every case's outcome and message")
    parser.add_argument("--quiet", action="store_true", help="print only the table")
    parser.add_argument("--json", type=Path, help="also write every outcome to this JSON file (in case order)")
    args = parser.parse_args()
    cases = [c for c in all_cases() if not (args.skip_dangerous and c.dangerous)
             and (not args.kind or c.kind in args.kind)]
    import netsim.cli  # (imported once, before the forks)
    netsim.cli.command()  # (and the click command built once: ~0.1 s a case otherwise)
    import netsim.config  # noqa: F401  (and what the CLI imports lazily: each fork would pay ~1 s for it)
    import netsim.experiment.run  # noqa: F401
    import netsim.experiment.sweep  # noqa: F401
    import netsim.report.dashboard  # noqa: F401
    from netsim.engine.table import warm_up
    warm_up()  # compiled once here, not in every case
    print(f"{len(cases)} cases", file=sys.stderr)

    def done(o) -> None:
        if not args.quiet and (args.show or o.problem):
            msg = (o.stderr.strip().splitlines() or [""])[-1][:200]
            print(f"{'BAD ' if o.problem else 'ok  '}{o.outcome:12s} {o.exit_code!s:>4} {o.seconds:6.1f}s "
                  f"{o.maxrss_bytes / 2**20:6.0f}MB [{o.case.kind}] {o.case.name[:70]}"
                  + (f"\n      problem: {o.problem}" if o.problem else "") + f"\n      {msg}", flush=True)

    with tempfile.TemporaryDirectory(prefix="netsim-badinputs-") as tmp:
        outcomes = run_cases(cases, Path(tmp), jobs=args.jobs, on_done=done)
    if args.json:
        args.json.write_text(json.dumps([{"name": o.case.name, "kind": o.case.kind, "outcome": o.outcome,
                                          "exit_code": o.exit_code, "seconds": o.seconds, "maxrss": o.maxrss_bytes,
                                          "problem": o.problem, "stderr": o.stderr[-2000:]} for o in outcomes]))
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for o in outcomes:
        table[o.case.kind][o.outcome] += 1
        table[o.case.kind]["destructive"] += bool(o.destroyed)
        table[o.case.kind]["unacceptable"] += bool(o.problem)
        table["ALL"][o.outcome] += 1
        table["ALL"]["destructive"] += bool(o.destroyed)
        table["ALL"]["unacceptable"] += bool(o.problem)
    cols = (*OUTCOMES, "destructive", "unacceptable")
    print(f"{'class':12s}{'cases':>7s}" + "".join(f"{c:>14s}" for c in cols))
    for kind, counts in sorted(table.items(), key=lambda kv: kv[0] == "ALL"):
        n = sum(counts[o] for o in OUTCOMES)
        print(f"{kind:12s}{n:7d}" + "".join(f"{counts[c]:14d}" for c in cols))
    return 1 if table["ALL"]["unacceptable"] else 0


if __name__ == "__main__":
    sys.exit(main())

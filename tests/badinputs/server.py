"""A fork server for fuzzing the front door: one JSON case per line on stdin, one JSON outcome per line out.

``tests/test_fuzz_frontdoor.py`` starts it once and sends every hypothesis example to it, so each
example runs in a fresh sandboxed child (memory limit, timeout, sentinels) forked from a process
that has netsim imported and its kernels compiled, never from the test runner itself.
A request is ``{"argv": [...], "files": {name: base64}, "expect": [...], "timeout": s, "repo_files": bool}``.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
import tempfile
from pathlib import Path

from tests.badinputs.harness import Case, run_cases


def main() -> None:
    import netsim.cli  # noqa: F401  (imported once, before the forks)
    import netsim.config  # noqa: F401  (and what the CLI imports lazily: each fork would pay ~1 s for it)
    import netsim.experiment.run  # noqa: F401
    import netsim.experiment.sweep  # noqa: F401
    import netsim.report.dashboard  # noqa: F401
    from netsim.engine.table import warm_up
    warm_up()
    print(json.dumps({"ready": True}), flush=True)
    work = Path(tempfile.mkdtemp(prefix="netsim-fuzz-"))
    try:
        for i, line in enumerate(sys.stdin):
            req = json.loads(line)
            case = Case(req.get("name", f"fuzz {i}"), "fuzz", req["argv"],
                        {k: base64.b64decode(v) for k, v in req.get("files", {}).items()},
                        expect=frozenset(req.get("expect", ["ok", "error"])), timeout=req.get("timeout", 30.0),
                        repo_files=req.get("repo_files", False))
            [o] = run_cases([case], work / str(i), jobs=1)
            print(json.dumps({"outcome": o.outcome, "exit_code": o.exit_code, "seconds": o.seconds,
                              "maxrss": o.maxrss_bytes, "problem": o.problem, "stderr": o.stderr[-2000:],
                              "stdout": o.stdout[-500:]}), flush=True)
            shutil.rmtree(work / str(i), ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

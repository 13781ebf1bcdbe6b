"""Run one CLI invocation in a sandbox and classify what it did: ok, a clean error, or a defect.

Each case runs in a child forked from this process (netsim already imported, so a case costs
milliseconds, not an interpreter start), through the real entry point ``netsim.cli.main``, with
its own working directory, an address-space limit and a timeout. The sandbox plants sentinel files
in the working directory, its ``results/`` folder, its parent and a sibling; a case that removes
or changes any of them is *destructive*, whatever its exit code.

Outcomes:

* ``ok``: exit 0.
* ``error``: exit 2 with one short message (under :data:`MAX_MESSAGE` bytes on stderr) and no
  traceback; or exit 1 from a sweep some of whose runs failed, when the case allows ``partial``.
* ``traceback``: a Python traceback, or any other exit status.
* ``long-message``: exit 2 but the message is :data:`MAX_MESSAGE` bytes or more.
* ``hang``: still running after the case's timeout (killed).
* ``oom``: a MemoryError, death by a signal under the memory limit, or a peak RSS above the budget.
* ``destructive``: a sentinel was removed or changed (reported on top of the exit outcome).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: An error message must be shorter than this (stderr bytes).
MAX_MESSAGE = 2048
#: Peak resident memory a case may use before it counts as out of memory.
RSS_BUDGET = 2 * 2**30
#: Address-space limit of a case's process (a netsim run maps ~2 GiB of virtual memory at rest).
ADDRESS_LIMIT = 6 * 2**30
DEFAULT_TIMEOUT = 30.0

REPO = Path(__file__).resolve().parents[2]
#: Sentinel files (relative to a case's sandbox) that no case may remove or change. The working
#: directory is box/up/parent/cwd, so that even ``../../..`` stays inside the sandbox.
SENTINELS = {"box/BOX.txt": "box", "box/up/UP.txt": "up", "box/up/parent/PARENT-NOTES.txt": "parent",
             "box/up/parent/cwd/NOTES.txt": "cwd", "box/up/parent/cwd/results/KEEP.txt": "results",
             "box/up/parent/sibling/SIBLING.txt": "sibling"}


@dataclass
class Case:
    """One bad (or odd) input: files to create in the working directory and the CLI arguments."""

    name: str
    kind: str                                   #: the class of input (yaml, units, outdir, ...)
    argv: list[str]
    files: dict[str, str | bytes] = field(default_factory=dict)
    expect: frozenset[str] = frozenset({"error"})  #: acceptable outcomes
    setup: Callable[[Path], None] | None = None    #: prepares the working directory further
    check: Callable[[Path, "Outcome"], str] | None = None  #: extra check: "" or what went wrong
    timeout: float = DEFAULT_TIMEOUT
    repo_files: bool = False                    #: copy experiments/, topologies/, workloads/ in
    #: the case could damage files outside its sandbox on a netsim that fails it (``sweep --out /``
    #: once meant ``rm -rf /``): ``python -m tests.badinputs --skip-dangerous`` leaves it out
    dangerous: bool = False


@dataclass
class Outcome:
    """What one case did."""

    case: Case
    outcome: str
    exit_code: int | None
    seconds: float
    maxrss_bytes: int
    stdout: str
    stderr: str
    destroyed: list[str] = field(default_factory=list)
    problem: str = ""  #: why the outcome is not acceptable ("" when it is)

    @property
    def acceptable(self) -> bool:
        return not self.problem


def says(*parts: str) -> Callable[[Path, "Outcome"], str]:
    """A check: the message holds every one of ``parts`` (whitespace folded)."""
    def check(_cwd: Path, outcome: Outcome) -> str:
        text = " ".join(outcome.stderr.split())
        missing = [p for p in parts if p not in text]
        return f"the message lacks {missing}: {text[:300]!r}" if missing else ""
    return check


def _sandbox(root: Path, case: Case) -> Path:
    for rel, text in SENTINELS.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"sentinel {text}\n")
    cwd = root / "box" / "up" / "parent" / "cwd"
    if case.repo_files:
        for d in ("experiments", "topologies", "workloads"):
            shutil.copytree(REPO / d, cwd / d)
    for rel, content in case.files.items():
        p = cwd / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
    if case.setup is not None:
        case.setup(cwd)
    return cwd


def _destroyed(root: Path) -> list[str]:
    lost = []
    for rel, text in SENTINELS.items():
        p = root / rel
        try:
            if p.read_bytes() != f"sentinel {text}\n".encode():  # (bytes: a case may write binary over it)
                lost.append(f"{rel} changed")
        except OSError:
            lost.append(f"{rel} missing")
    return lost


def _child(cwd: Path, argv: list[str], out: Path, err: Path) -> None:
    """In the forked child: limits, redirections, then the CLI entry point. Never returns."""
    code = 1
    try:
        os.setsid()  # its own process group: a timeout kills it and anything it started
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))
        os.chdir(cwd)
        fo, fe = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fo, 1)
        os.dup2(fe, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # what the sandbox allows: netsim's pre-flight refuses a run that would exceed it, rather than
        # the address-space limit killing it part way
        os.environ["NETSIM_MAX_MEMORY"] = "4GiB"
        sys.argv = ["netsim", *argv]
        from netsim.cli import main
        try:
            main()
            code = 0
        except SystemExit as exc:
            c = exc.code
            code = c if isinstance(c, int) else (0 if c is None else 1)
            if not isinstance(c, int) and c is not None:
                print(c, file=sys.stderr)
        except BaseException:  # what the interpreter does with an uncaught exception
            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def prerun(cwd: Path, argv: list[str], timeout: float = 120.0) -> int:
    """Run the CLI once in ``cwd`` (in a child, like a case) to prepare a sandbox; its exit status."""
    out, err = cwd / ".prerun-out.txt", cwd / ".prerun-err.txt"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(cwd, argv, out, err)
    t0 = time.monotonic()
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            break
        if time.monotonic() - t0 > timeout:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise RuntimeError(f"setup run {argv} timed out")
        time.sleep(0.01)
    out.unlink()
    err.unlink()
    return os.waitstatus_to_exitcode(status)


def _start(case: Case, root: Path) -> tuple[int, Path, float]:
    cwd = _sandbox(root, case)
    out, err = root / "stdout.txt", root / "stderr.txt"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(cwd, case.argv, out, err)
    return pid, cwd, time.monotonic()


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        return f"(harness: cannot read {path.name}: {exc})"


def _classify(case: Case, root: Path, cwd: Path, status: int | None, seconds: float, maxrss: int) -> Outcome:
    stdout, stderr = (_read(root / name) for name in ("stdout.txt", "stderr.txt"))
    code = None
    if status is None:
        kind = "hang"
    elif os.WIFSIGNALED(status):
        kind = "oom" if os.WTERMSIG(status) in (signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS) \
            else "traceback"
        code = -os.WTERMSIG(status)
    else:
        code = os.WEXITSTATUS(status)
        text = stdout + stderr
        if "MemoryError" in text:
            kind = "oom"
        elif "Traceback (most recent call last)" in text:
            kind = "traceback"
        elif code == 0:
            kind = "ok"
        elif code == 2 or (code == 1 and "partial" in case.expect):
            kind = "long-message" if len(stderr.encode()) >= MAX_MESSAGE else "error"
        else:
            kind = "traceback"
    if maxrss > RSS_BUDGET and kind not in ("hang",):
        kind = "oom"
    destroyed = _destroyed(root)
    outcome = Outcome(case, kind, code, seconds, maxrss, stdout, stderr, destroyed)
    if destroyed:
        outcome.problem = "destructive: " + ", ".join(destroyed)
    elif kind == "error" and code == 1 and "partial" in case.expect:
        pass
    elif kind not in case.expect:
        outcome.problem = f"{kind} (expected {'/'.join(sorted(case.expect))})"
    if not outcome.problem and case.check is not None:
        outcome.problem = case.check(cwd, outcome)
    return outcome


def _reap_group(pgid: int) -> bool:
    """True when processes of the case's group outlived it (they are killed)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    time.sleep(0.5)  # a worker told to stop may take a moment
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def run_cases(cases: Iterable[Case], workdir: Path, jobs: int = 2,
              on_done: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Run every case (``jobs`` at a time) in sandboxes under ``workdir``; outcomes in case order."""
    cases = list(cases)
    results: dict[int, Outcome] = {}
    running: dict[int, tuple[int, Case, Path, Path, float]] = {}
    queue = list(enumerate(cases))
    while queue or running:
        while queue and len(running) < jobs:
            i, case = queue.pop(0)
            root = workdir / f"{i:04d}"
            root.mkdir(parents=True)
            try:
                pid, cwd, t0 = _start(case, root)
            except Exception as exc:  # noqa: BLE001 - a case whose sandbox cannot be prepared is a failed case
                results[i] = Outcome(case, "setup-error", None, 0.0, 0, "", "", [],
                                     f"setup failed: {type(exc).__name__}: {exc}")
                if on_done is not None:
                    on_done(results[i])
                continue
            running[pid] = (i, case, root, cwd, t0)
        time.sleep(0.005)
        for pid, (i, case, root, cwd, t0) in list(running.items()):
            got, status, usage = os.wait4(pid, os.WNOHANG)
            elapsed = time.monotonic() - t0
            if got == 0 and elapsed < case.timeout:
                continue
            if got == 0:  # timed out: kill its whole process group
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status, usage = os.wait4(pid, 0)
                status = None
            del running[pid]
            orphans = _reap_group(pid)
            results[i] = _classify(case, root, cwd, status, elapsed, usage.ru_maxrss * 1024)
            if orphans and not results[i].problem:
                results[i].problem = "left processes running after it exited"
            if on_done is not None:
                on_done(results[i])
    return [results[i] for i in range(len(cases))]

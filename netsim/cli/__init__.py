"""The ``netsim`` command: a thin typer shell over the Python API (config -> experiment -> results).

One module per group of commands (:mod:`~netsim.cli.running`, :mod:`~netsim.cli.inspecting`) on the app of
:mod:`~netsim.cli.app`; :func:`main` is the console script's entry point (exit codes, interruptions, bugs).
"""

from __future__ import annotations

import gc
import os
import signal
import sys

import typer

from netsim.cli import exporting, inspecting, running, traces
from netsim import interrupts
from netsim.cli.app import EXIT_CODES, app, err, version
from netsim.errors import NetsimError, interruption

#: The commands, in ``--help`` order (a name where it differs from the function's).
COMMANDS = ((running.validate, None), (running.run, None), (running.sweep, None),
            (inspecting.report, None), (inspecting.results, None), (inspecting.show, None),
            (inspecting.schema, None), (inspecting.list_, "list"), (inspecting.topo_, "topo"),
            (traces.trace_synth, "trace-synth"), (traces.trace_convert, "trace-convert"),
            (traces.trace_check, "trace-check"), (exporting.export_schedule, "export-schedule"))
__all__ = ["COMMANDS", "EXIT_CODES", "app", "command", "main", "version"]
for _command, _name in COMMANDS:
    app.command(_name)(_command)
_BUILT: list = []


def command():
    """The click command typer builds from :data:`app` (built once: about 40-100 ms of reading the
    commands' signatures, which a process that forks cases from one parent pays once, not per case)."""
    if not _BUILT:
        _BUILT.append(typer.main.get_command(app))
    return _BUILT[0]


def main() -> None:
    """Console-script entry point: exit 0 on success, 1 when runs of a sweep failed, 2 for bad input
    (one message, no traceback), 130/143 when interrupted (SIGINT/SIGTERM), 70 for a bug in netsim."""
    received = interrupts.PENDING
    interrupts.reported()
    signal.signal(signal.SIGTERM, interrupts.received)
    sys.unraisablehook = _unraisable
    # perf: a run builds large object graphs (fabrics, pandas, plotly) that the cyclic collector would
    # otherwise walk again and again: 5-15% of a whole run (perf of `a2a-256-ecmp`: 12% in gc)
    gc.set_threshold(100_000, 50, 100)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupts.received)
    try:
        code = command()(standalone_mode=False)
        # typer turns a KeyboardInterrupt no command caught into a silent exit 130: say what happened
        # and a signal whose exception something swallowed (a ctypes callback) after the last check
        if received and (code == 130 or not code):
            code = _stopped_by(received[-1])
    except KeyboardInterrupt as exc:
        code = _stopped_by(interrupts.signal_of(exc))
    except NetsimError as exc:  # CORRECTNESS: no traceback for bad input, whatever raised it
        err.print(f"error: {exc}", highlight=False, markup=False, soft_wrap=True)
        code = 2
    except OSError as exc:
        from netsim.experiment.outdir import os_error
        err.print(f"error: {os_error(exc, 'use')}", highlight=False, markup=False, soft_wrap=True)
        code = 2
    except RecursionError:
        err.print("error: the input is nested too deeply", highlight=False)
        code = 2
    except MemoryError:
        err.print("error: out of memory; make the run smaller", highlight=False)
        code = 2
    except Exception as exc:
        if interruption(exc) is not None:  # Ctrl-C met inside a compiled kernel
            code = _stopped_by(interrupts.signal_of(interruption(exc)))
        elif hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):  # usage errors (click's)
            exc.show()
            code = exc.exit_code
        elif isinstance(exc, typer.Abort):
            code = _stopped_by(signal.SIGINT)
        else:  # a bug: a short message, the traceback in a file to report
            code = _crash_report()
    sys.exit(code if isinstance(code, int) else 0)


def _unraisable(info, default=sys.unraisablehook) -> None:
    """Python's report of an exception it could not raise, quiet for an interruption: a signal
    handler's KeyboardInterrupt swallowed by a ctypes callback is raised again by
    :func:`netsim.interrupts.check` (one line then, not a traceback)."""
    if not (isinstance(info.exc_type, type) and issubclass(info.exc_type, KeyboardInterrupt)):
        default(info)


def _stopped_by(signum: int) -> int:
    """One line for an interruption no command reported; its exit status."""
    err.print("terminated" if signum == signal.SIGTERM else "interrupted", highlight=False)
    return 143 if signum == signal.SIGTERM else 130


def _crash_report() -> int:
    """Print one line about an unexpected error, keep its traceback in a temporary file; exit status 70."""
    import tempfile
    import traceback
    text = traceback.format_exc()
    try:
        with tempfile.NamedTemporaryFile("w", prefix="netsim-crash-", suffix=".txt", delete=False) as f:
            f.write(text)
        where = f"the traceback is in {f.name}"
    except OSError:
        where = "set NETSIM_DEBUG=1 to see the traceback"
    if os.environ.get("NETSIM_DEBUG"):
        sys.stderr.write(text)
    last = text.strip().splitlines()[-1][:300]
    err.print(f"internal error (a bug in netsim): {last}; {where}; please report it with the experiment file",
              highlight=False, markup=False, soft_wrap=True)
    return 70

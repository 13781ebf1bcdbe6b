"""Ctrl-C and SIGTERM as exceptions that cannot be lost.

The command line turns SIGINT and SIGTERM into a ``KeyboardInterrupt`` (:class:`Terminated` for
SIGTERM) raised where the program is, so that it cleans up as on Ctrl-C. Python runs a signal's
handler at the next bytecode of the main thread, and that can be inside code that swallows what it
raises: a ctypes callback (llvmlite calls one as numba compiles or loads a kernel) prints
"Exception ignored" and returns, and the run would go on to finish and exit 0 as if nothing had
been asked (seen: 1 interrupt in about 80 sent in the first second of a run).

So the handler also records the signal (:func:`received`), and the loops that run for long
(:class:`netsim.engine.clock.Environment`'s steps, the kernel warm-up) call :func:`check`, which
raises it again while nobody has reported it; the command that reports an interruption calls
:func:`reported`. Without a handler installed (the library, tests) nothing is ever pending.
"""

from __future__ import annotations

import signal

__all__ = ["PENDING", "Terminated", "check", "exception", "received", "reported", "signal_of"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it cleans up as on Ctrl-C."""


#: Signals received (SIGINT, SIGTERM) that no command has reported yet: process-wide, as signals
#: are. perf: loops test it by truth value (one global lookup), so it is a list, cleared in place.
PENDING: list[int] = []


def exception(signum: int) -> KeyboardInterrupt:
    """The exception a signal raises: :class:`Terminated` for SIGTERM, ``KeyboardInterrupt`` else."""
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def signal_of(exc: KeyboardInterrupt) -> int:
    """The signal behind an interruption: SIGTERM for :class:`Terminated`, SIGINT else."""
    return signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT


def received(signum: int, frame=None) -> None:
    """A signal handler: record ``signum`` and raise its exception here."""
    PENDING.append(signum)
    raise exception(signum)


def check() -> None:
    """Raise the last signal's exception again if one was received and not reported (its first
    raise was swallowed, or is this one)."""
    if PENDING:
        raise exception(PENDING[-1])


def reported() -> None:
    """The interruption was reported (a message, an exit status): nothing is pending any more."""
    PENDING.clear()

"""Exception types that netsim raises for bad input; the CLI turns them into one-line messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: Characters of a user's value that a message keeps (the rest is elided, with a count).
SHOWN_CHARS = 60
#: Longest text a :class:`ConfigError` formats to, file and path included: a last guard, since a
#: message that embeds user input unshortened could otherwise run to megabytes.
MAX_MESSAGE_CHARS = 1_500


def shorten(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for a message: the first ``limit`` characters, and how many were elided.

    Strings are cut before ``repr`` (a 12 MB value costs nothing), integers too long to print say
    how long they are.

    Examples
    --------
    >>> shorten("400Gbps")
    "'400Gbps'"
    >>> shorten("x" * 1000, 8)
    "'xxxxxxxx...' (992 more characters)"
    >>> shorten(10**5000)
    'an integer of 5,001 digits'
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        text = repr(value[:limit])
        return f"{text[:-1]}...{text[-1]} ({len(value) - limit:,} more characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        digits = len(str(abs(value))) if value.bit_length() < 14_000 else _digits(abs(value))
        return f"an integer of {digits:,} digits"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an object holding an integer too long to print, or a cycle
        return f"a {type(value).__name__}"
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """``"; did you mean 'spines'?"`` when one of ``choices`` is close to ``name``, else ``""``: the
    tail of an "unknown name" message, after the list of valid names.

    Examples
    --------
    >>> did_you_mean("ecmpp", ["ecmp", "spray", "c4p"])
    "; did you mean 'ecmp'?"
    >>> did_you_mean("zzz", ["ecmp", "spray"])
    ''
    """
    if not isinstance(name, str) or len(name) > SHOWN_CHARS:
        return ""
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[close[0]]!r}?" if close else ""


def _digits(n: int) -> int:
    """Decimal digits of a positive integer too long for ``str`` (Python refuses past 4,300 digits)."""
    estimate = int(n.bit_length() * 0.30102999566398120)  # log10(2)
    return estimate + 1 if n >= 10**estimate else estimate


def interruption(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (a ``KeyboardInterrupt``) behind ``exc``, if any: itself or in its causes.

    CORRECTNESS: a signal handler that raises can fire while a numba-compiled kernel is being
    called; CPython then reports ``SystemError: ... returned a result with an exception set`` caused
    by the KeyboardInterrupt. Such an error is an interruption, not a failed run nor a bug.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


class NetsimError(Exception):
    """Base class of every error netsim raises on purpose (bad input, impossible request)."""


class UnitError(NetsimError, ValueError):
    """A quantity string (``400Gbps``, ``256MiB``, ``2us``) could not be parsed."""


class ConfigError(NetsimError):
    """An experiment specification is invalid.

    Parameters
    ----------
    message:
        What is wrong and what is allowed.
    path:
        Dotted YAML path of the offending value (``workload.size``), or ``""`` for the whole file.
    file:
        The YAML file, when the spec came from one.
    line:
        1-based line in ``file``, when known.
    """

    def __init__(self, message: str, path: str = "", file: str | None = None, line: int | None = None):
        self.message = message
        self.path = path
        self.file = file
        self.line = line
        super().__init__(self.format())

    def format(self) -> str:
        """One line: ``file:line: path: message`` with the parts that are known, at most
        :data:`MAX_MESSAGE_CHARS` characters."""
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        at = f"{self.path}: " if self.path else ""
        text = f"{where}{at}{self.message}"
        if len(text) > MAX_MESSAGE_CHARS:
            keep = MAX_MESSAGE_CHARS - 40
            text = f"{text[:keep]}... ({len(text) - keep:,} more characters)"
        return text

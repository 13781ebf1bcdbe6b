"""Units: the only place where human quantity strings (``400Gbps``, ``256MiB``, ``2us``) become numbers.

Internal units are bytes, bytes/s and seconds (floats); strings are converted with exact rational
arithmetic, so ``parse_bandwidth("1.6Tbps")`` is exactly ``200e9``.
"""

from __future__ import annotations

import math
import numbers
import re
from fractions import Fraction
from types import MappingProxyType

from netsim.errors import UnitError, shorten

_PREFIX = MappingProxyType({"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
                            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50})
# Time prefixes as divisors of a second; both U+00B5 MICRO SIGN and U+03BC GREEK SMALL LETTER MU mean micro.
_PER_SECOND = MappingProxyType({"p": 10**12, "n": 10**9, "u": 10**6, "µ": 10**6, "μ": 10**6,
                                "m": 10**3, "": 1})
#: Longest quantity string accepted ("1.5 GiB" is 7 characters): longer text is refused before any
#: matching, so parsing costs constant time whatever the input (a 200,000-character string once took 81 s).
MAX_QUANTITY_CHARS = 64
# Matched against the stripped text. Each character has one way to match (no nested or adjacent
# repeats of one class), so matching is linear; exponents are capped at three digits so that
# "1e999999999B" cannot make Fraction build a huge integer.
_QUANTITY = re.compile(r"(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?)(?:\s*(?P<unit>\S.*))?", re.S)
_BYTES = r"(?P<prefix>[KMGTP]i|[kKMGTP]|)(?P<b>[bB])"
_UNIT = MappingProxyType({
    "size": re.compile(_BYTES),
    "bandwidth": re.compile(_BYTES + r"(?:ps|/s)"),
    "time": re.compile(r"(?P<prefix>[pnuµμm]?)s"),
})
_LIKE = "a number followed by a unit like"
_PREFIXES = "(b = bits, B = bytes; prefixes k M G T P decimal, Ki Mi Gi Ti Pi binary)"
_FORMS = MappingProxyType({
    "size": f"a number of bytes or {_LIKE} 256MiB, 1GB, 4KiB, 1.5 GiB, 8Kb, 1e6B {_PREFIXES}",
    "bandwidth": f"{_LIKE} 400Gbps, 400Gb/s, 25GB/s, 25GBps, 1.6Tbps {_PREFIXES}",
    "time": f"{_LIKE} 2us, 2µs, 500ns, 1ms, 1.5s, 3ps (units ps, ns, us or µs, ms, s)",
})


def _error(value: object, kind: str, why: str = "") -> UnitError:
    reason = f" ({why})" if why else ""
    return UnitError(f"cannot parse {shorten(value)} as a {kind}{reason}: expected {_FORMS[kind]}")


def _parse(value: object, kind: str) -> float:
    """The shared parser: ``value`` as a ``kind`` ("size", "bandwidth" or "time") in internal units."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        raise _error(value, kind)
    if isinstance(value, str):
        if len(value) > MAX_QUANTITY_CHARS:
            why = f"{len(value):,} characters long; a quantity is at most {MAX_QUANTITY_CHARS}"
            raise _error(value, kind, why)
        text = value.strip()
        match = _QUANTITY.fullmatch(text)
        if not match:
            raise _error(value, kind, "must not be negative" if text.startswith("-") else "")
        number, unit = Fraction(match["num"]), match["unit"] or ""
        if unit:
            scale = _scale(value, kind, unit)
        elif kind == "size" or number == 0:  # "1024" is bytes; a bare "400" bandwidth or "2" time is not
            scale = Fraction(1)
        else:
            raise _error(value, kind, "missing unit")
        try:
            result = float(number * scale)
        except OverflowError:
            raise _error(value, kind, "must be finite") from None
    else:
        try:
            result = float(value)
        except OverflowError:
            raise _error(value, kind, "must be finite") from None
    if not math.isfinite(result):
        raise _error(value, kind, "must be finite")
    if result < 0:
        raise _error(value, kind, "must not be negative")
    return result


def _scale(value: str, kind: str, unit: str) -> Fraction:
    match = _UNIT[kind].fullmatch(unit)
    if not match:
        ambiguous = kind != "time" and unit[0] in "mgt" and _UNIT[kind].fullmatch(unit[0].upper() + unit[1:])
        why = f"ambiguous prefix {unit[0]!r}: use M, G, T" if ambiguous else f"unknown unit {unit!r}"
        raise _error(value, kind, why)
    if kind == "time":
        return Fraction(1, _PER_SECOND[match["prefix"]])
    return Fraction(_PREFIX[match["prefix"]], 8 if match["b"] == "b" else 1)


def parse_size(value: int | float | str) -> float:
    """Convert a size to bytes.

    Parameters
    ----------
    value : int, float or str
        Bytes (non-negative, finite), a string such as ``256MiB``, ``1GB``, ``1.5 GiB``, ``8Kb`` (bits),
        or a bare number string such as ``"1024"`` (bytes).

    Returns
    -------
    float
        Bytes. Raises :class:`~netsim.errors.UnitError` for malformed or ambiguous (``10mb``) input.

    Examples
    --------
    >>> parse_size("256MiB"), parse_size("1GB"), parse_size("1Gb"), parse_size(4096)
    (268435456.0, 1000000000.0, 125000000.0, 4096.0)
    """
    return _parse(value, "size")


def parse_bandwidth(value: int | float | str) -> float:
    """Convert a bandwidth to bytes per second.

    Parameters
    ----------
    value : int, float or str
        Bytes/s (non-negative, finite) or a string with a unit such as ``400Gbps``, ``400Gb/s``,
        ``25GB/s``, ``25GBps``, ``10GiB/s`` (only ``"0"`` may omit the unit).

    Returns
    -------
    float
        Bytes/s. Raises :class:`~netsim.errors.UnitError` for malformed or ambiguous (``400G``, ``25gbps``)
        input.

    Examples
    --------
    >>> parse_bandwidth("400Gbps"), parse_bandwidth("25GB/s"), parse_bandwidth("1.6Tbps")
    (50000000000.0, 25000000000.0, 200000000000.0)
    """
    return _parse(value, "bandwidth")


def parse_time(value: int | float | str) -> float:
    """Convert a duration to seconds.

    Parameters
    ----------
    value : int, float or str
        Seconds (non-negative, finite) or a string with unit ``ps``, ``ns``, ``us``/``µs``, ``ms`` or
        ``s`` such as ``2us`` or ``1.5s`` (only ``"0"`` may omit the unit).

    Returns
    -------
    float
        Seconds. Raises :class:`~netsim.errors.UnitError` for malformed input or unknown units (``1min``).

    Examples
    --------
    >>> parse_time("2us"), parse_time("500ns"), parse_time("1ms"), parse_time(0.5)
    (2e-06, 5e-07, 0.001, 0.5)
    """
    return _parse(value, "time")


def _format(value: float, steps: tuple[tuple[str, float], ...], parse, digits: int | None = None) -> str:
    """``value`` scaled by the first (suffix, factor) with ``|value| >= factor`` (else the last one), with
    6 significant digits, or more when needed to parse back within 1e-9 relative; exactly ``digits``
    significant digits (for display) when given. Negative values get a leading ``-`` (for display only:
    the parsers reject them)."""
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0" + min((s for s, _ in steps), key=len)  # the unprefixed unit: 0B, 0bps, 0s
    suffix, factor = next(((s, f) for s, f in steps if abs(value) >= f), steps[-1])
    scaled = value / factor
    if digits is not None:
        return f"{scaled:.{digits}g}{suffix}"
    for digits in range(6, 18):
        text = f"{scaled:.{digits}g}{suffix}"
        if math.isclose(parse(text.lstrip("-")), abs(value), rel_tol=1e-9, abs_tol=0.0):
            return text
    return f"{scaled!r}{suffix}"


def format_size(size_bytes: float, digits: int | None = None) -> str:
    """Format bytes with binary prefixes; :func:`parse_size` maps the result back within 1e-9 relative.

    Parameters
    ----------
    size_bytes : float
        A size in bytes.
    digits : int, optional
        Significant digits for display (the round trip is then only as good as those digits).

    Examples
    --------
    >>> format_size(268435456), format_size(1.5 * 2**30), format_size(512)
    ('256MiB', '1.5GiB', '512B')
    """
    steps = tuple((f"{p}B", float(_PREFIX[p])) for p in ("Pi", "Ti", "Gi", "Mi", "Ki", ""))
    return _format(size_bytes, steps, parse_size, digits)


def format_bandwidth(bandwidth_Bps: float, digits: int | None = None) -> str:
    """Format bytes/s as decimal bits/s; :func:`parse_bandwidth` maps the result back within 1e-9 relative.

    Parameters
    ----------
    bandwidth_Bps : float
        A bandwidth in bytes/s.
    digits : int, optional
        Significant digits for display.

    Examples
    --------
    >>> format_bandwidth(50e9), format_bandwidth(200e9), format_bandwidth(100)
    ('400Gbps', '1.6Tbps', '800bps')
    """
    steps = tuple((f"{p}bps", _PREFIX[p] / 8) for p in ("P", "T", "G", "M", "k", ""))
    return _format(bandwidth_Bps, steps, parse_bandwidth, digits)


def format_time(seconds: float, digits: int | None = None) -> str:
    """Format seconds in s, ms, us, ns or ps; :func:`parse_time` maps the result back within 1e-9 relative.

    Parameters
    ----------
    seconds : float
        A duration in seconds.
    digits : int, optional
        Significant digits for display.

    Examples
    --------
    >>> format_time(2e-6), format_time(5e-7), format_time(1.25e-3), format_time(3)
    ('2us', '500ns', '1.25ms', '3s')
    """
    steps = tuple((f"{u}s", 1 / _PER_SECOND[u]) for u in ("", "m", "u", "n", "p"))
    return _format(seconds, steps, parse_time, digits)

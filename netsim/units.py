"""Units: the only place where human quantity strings (``400Gbps``, ``256MiB``, ``2us``) become numbers.

Inside netsim sizes are bytes, bandwidths bytes/s and times seconds, all floats. Decimal prefixes
k/K, M, G, T, P are powers of 1000; binary prefixes Ki, Mi, Gi, Ti, Pi are powers of 1024. A lower-
case ``b`` means bits and an upper-case ``B`` bytes. Lower-case ``m``/``g``/``t`` prefixes on sizes
and bandwidths are rejected as ambiguous (milli or mega?).
"""

from __future__ import annotations

import math
import re

from netsim.errors import UnitError

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
# Time units as divisors of seconds: 500 / 1e9 is exactly 5e-07, 500 * 1e-9 is not.
_PER_SECOND = {"ps": 1e12, "ns": 1e9, "us": 1e6, "µs": 1e6, "μs": 1e6, "ms": 1e3, "s": 1.0}
_NUMBER = r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>\S*)\s*$")
_SIZE_UNIT = re.compile(r"^(?P<prefix>|[kKMGTP]i?)(?P<b>[bB])$")
_BW_UNIT = re.compile(r"^(?P<prefix>|[kKMGTP]i?)(?:(?P<bits>b(?:ps|/s|it/s))|(?P<bytes>B(?:ps|/s)))$")

_FORMS = {
    "size": "a number of bytes or a string like 256MiB, 1GB, 4KiB, 1.5 GiB, 8Kb (b = bits, B = bytes; "
            "prefixes k M G T P decimal, Ki Mi Gi Ti Pi binary)",
    "bandwidth": "a number of bytes/s or a string like 400Gbps, 400Gb/s, 25GB/s, 25GBps, 1.6Tbps "
                 "(b = bits, B = bytes; prefixes k M G T P decimal, Ki Mi Gi Ti Pi binary)",
    "time": "a number of seconds or a string like 2us, 500ns, 1ms, 1.5s (units ps, ns, us or µs, ms, s)",
}


def _fail(value: object, kind: str, why: str = "") -> UnitError:
    reason = f" ({why})" if why else ""
    return UnitError(f"cannot parse {value!r} as a {kind}{reason}: expected {_FORMS[kind]}")


def _split(value: object, kind: str) -> tuple[float, str]:
    """Split ``value`` into (number, unit string); plain numbers get an empty unit."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _fail(value, kind)
    if isinstance(value, str):
        if value.strip().startswith("-"):
            raise _fail(value, kind, "must not be negative")
        match = _QUANTITY.match(value)
        if not match:
            raise _fail(value, kind)
        number, unit = float(match["num"]), match["unit"]
    else:
        number, unit = float(value), ""
    if not math.isfinite(number):
        raise _fail(value, kind, "must be finite")
    if number < 0:
        raise _fail(value, kind, "must not be negative")
    return number, unit


def parse_size(value: int | float | str) -> float:
    """Bytes in ``value``.

    Examples
    --------
    >>> parse_size("256MiB"), parse_size("1GB"), parse_size("8Kb"), parse_size(4096)
    (268435456.0, 1000000000.0, 1000.0, 4096.0)
    """
    number, unit = _split(value, "size")
    if unit == "":
        return number
    match = _SIZE_UNIT.match(unit)
    if not match:
        why = "ambiguous prefix: use k, M, G, T (decimal) or Ki, Mi, Gi, Ti (binary)" if unit[:1] in "mgt" else ""
        raise _fail(value, "size", why)
    return number * _PREFIX[match["prefix"]] / (8.0 if match["b"] == "b" else 1.0)


def parse_bandwidth(value: int | float | str) -> float:
    """Bytes per second in ``value``.

    Examples
    --------
    >>> parse_bandwidth("400Gbps"), parse_bandwidth("25GB/s"), parse_bandwidth("1.6Tbps")
    (50000000000.0, 25000000000.0, 200000000000.0)
    """
    number, unit = _split(value, "bandwidth")
    if unit == "":
        if isinstance(value, str):
            raise _fail(value, "bandwidth", "missing unit")
        return number
    match = _BW_UNIT.match(unit)
    if not match:
        why = "ambiguous prefix: use k, M, G, T (decimal) or Ki, Mi, Gi, Ti (binary)" if unit[:1] in "mgt" else ""
        raise _fail(value, "bandwidth", why)
    return number * _PREFIX[match["prefix"]] / (8.0 if match["bits"] else 1.0)


def parse_time(value: int | float | str) -> float:
    """Seconds in ``value``.

    Examples
    --------
    >>> parse_time("2us"), parse_time("500ns"), parse_time("1ms"), parse_time(0.5)
    (2e-06, 5e-07, 0.001, 0.5)
    """
    number, unit = _split(value, "time")
    if unit == "":
        if isinstance(value, str) and number != 0:
            raise _fail(value, "time", "missing unit")
        return number
    if unit not in _PER_SECOND:
        raise _fail(value, "time")
    return number / _PER_SECOND[unit]


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def format_size(size_bytes: float) -> str:
    """Human size with binary prefixes: ``256MiB``, ``1.5GiB``, ``512B``."""
    for prefix in ("Pi", "Ti", "Gi", "Mi", "Ki"):
        if abs(size_bytes) >= _PREFIX[prefix]:
            return f"{_fmt(size_bytes / _PREFIX[prefix])}{prefix}B"
    return f"{_fmt(size_bytes)}B"


def format_bandwidth(bandwidth_Bps: float) -> str:
    """Human bandwidth in decimal bits per second: ``400Gbps``, ``1.6Tbps``."""
    bits = bandwidth_Bps * 8
    if not math.isfinite(bits):
        return str(bandwidth_Bps)
    for prefix in ("P", "T", "G", "M", "k"):
        if abs(bits) >= _PREFIX[prefix]:
            return f"{_fmt(bits / _PREFIX[prefix])}{prefix}bps"
    return f"{_fmt(bits)}bps"


def format_time(seconds: float) -> str:
    """Human time: ``2us``, ``500ns``, ``1.25ms``, ``3s``."""
    if not math.isfinite(seconds):
        return str(seconds)
    for unit in ("s", "ms", "us", "ns"):
        if abs(seconds) * _PER_SECOND[unit] >= 1:
            return f"{_fmt(seconds * _PER_SECOND[unit])}{unit}"
    return f"{_fmt(seconds * _PER_SECOND['ps'])}ps" if seconds else "0s"

"""How the dashboard shows numbers and names: human units, metric titles for columns, the manifest view.

Units rule (sizes): a size is shown in the unit family it is exact in, so what the user wrote comes
back: ``4MB`` (4,000,000 bytes) shows ``4 MB`` and ``4MiB`` (4,194,304 bytes) shows ``4 MiB``. When
both or neither family is exact, the shorter text wins, and decimal breaks a tie. Bandwidths are
shown as decimal bits per second (``400 Gbps``), times in s/ms/us/ns.
"""

from __future__ import annotations

import html
import json
import math
import re

from netsim.errors import UnitError
from netsim.experiment.metrics import CHART_UNITS, METRICS
from netsim.units import format_bandwidth, format_time, parse_bandwidth, parse_size, parse_time

_DECIMAL = (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("B", 1.0))
_BINARY = (("PiB", 2.0**50), ("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10), ("B", 1.0))
#: A number and its unit, as :mod:`netsim.units` formats them (``400Gbps``, ``1e+04PB``).
_NUMBER_UNIT = re.compile(r"^(-?[0-9.]+(?:e[+-][0-9]+)?)(.*)$")


def _scaled(value: float, steps: tuple[tuple[str, float], ...], digits: int) -> tuple[str, bool]:
    """``value`` in the largest unit of ``steps`` it reaches, and whether that text is exact."""
    if value == 0:
        return f"0 {next(u for u, f in steps if f == 1.0)}", True
    unit, factor = next(((u, f) for u, f in steps if abs(value) >= f), steps[-1])
    text = f"{value / factor:.{digits}g}"
    return f"{text} {unit}", math.isclose(float(text) * factor, value, rel_tol=1e-12)


def _spaced(text: str) -> str:
    """``400Gbps`` as ``400 Gbps``."""
    match = _NUMBER_UNIT.match(text)
    return f"{match[1]} {match[2]}" if match else text  # (inf, nan: as they are)


def human_size(size_bytes: float, digits: int = 4) -> str:
    """A size in the unit family it is exact in (see the module docstring).

    >>> human_size(4e6), human_size(4 * 2**20), human_size(1536), human_size(0), human_size(3_999_999)
    ('4 MB', '4 MiB', '1.5 KiB', '0 B', '4 MB')
    """
    if math.isnan(size_bytes):
        return "-"
    decimal, binary = _scaled(size_bytes, _DECIMAL, digits), _scaled(size_bytes, _BINARY, digits)
    if decimal[1] != binary[1]:
        return decimal[0] if decimal[1] else binary[0]
    return min(decimal[0], binary[0], key=len)


def human_bandwidth(bandwidth_Bps: float, digits: int = 4) -> str:
    """Bytes/s as decimal bits/s.

    >>> human_bandwidth(50e9), human_bandwidth(25e9 / 3)
    ('400 Gbps', '66.67 Gbps')
    """
    return "-" if math.isnan(bandwidth_Bps) else _spaced(format_bandwidth(bandwidth_Bps, digits))


def human_time(seconds: float, digits: int = 4) -> str:
    """Seconds in s, ms, us, ns or ps.

    >>> human_time(0.009365), human_time(5e-7), human_time(0)
    ('9.365 ms', '500 ns', '0 s')
    """
    return "-" if math.isnan(seconds) else _spaced(format_time(seconds, digits))


#: Titles of columns that are not run metrics (the metric registry titles the rest).
_TITLES = {"variant": "variant", "seed": "seed", "runs": "runs", "failed": "failed", "size_bytes": "message size",
           "workload.size": "message size", "n_ranks": "ranks", "duration_s": "time", "ideal_s": "ideal time",
           "busbw_Bps": "bus bandwidth", "algbw_Bps": "algorithm bandwidth"}


def title(column: str) -> str:
    """The human title of a column: the metric's title (with its display unit), else the column itself.

    >>> title("busbw_Bps"), title("collective_time_s"), title("workload.channels")
    ('bus bandwidth (Gbps)', 'collective time (ms)', 'workload.channels')
    """
    if column in METRICS:
        metric = METRICS[column]
        unit = CHART_UNITS[metric.kind][1]
        return f"{metric.title} ({unit})" if unit else metric.title
    return _TITLES.get(column, column)


def format_value(key: str, value) -> str:
    """``value`` of a field named ``key`` (``size_bytes``, ``nic.bandwidth``, ``latency_s``...) in human units;
    a string (a swept value as written, ``4MB``) is parsed first.

    >>> format_value("workload.size", "4MB"), format_value("workload.size", 4 * 2**20), format_value("a.b", 3)
    ('4 MB', '4 MiB', '3')
    """
    name = key.rsplit(".", 1)[-1].lower()
    if name.endswith("_bps") or "bandwidth" in name:
        kind = (parse_bandwidth, human_bandwidth)
    elif name in ("size", "chunk") or name.endswith("bytes"):
        kind = (parse_size, human_size)
    elif name.endswith("_s") or name in ("latency", "overhead", "at", "reconvergence"):
        kind = (parse_time, human_time)
    else:
        kind = None
    if isinstance(value, str) and kind is not None:  # a swept value as the user wrote it (``4MB``)
        try:
            return kind[1](kind[0](value))
        except UnitError:
            return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if kind is not None:
        return kind[1](value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def variant_text(key: str, value) -> str:
    """One grid coordinate as ``key=value`` (the variant as its name), value in human units."""
    return str(value) if key == "variant" else f"{key}={format_value(key, value)}"


def _humanise(data, key: str = ""):
    """``data`` with every number in a unit-bearing field replaced by its human text."""
    if isinstance(data, dict):
        return {k: _humanise(v, k) for k, v in data.items()}
    if isinstance(data, list):
        return [_humanise(v, key) for v in data]
    if isinstance(data, float) and key and format_value(key, data) != f"{data:g}":
        return format_value(key, data)
    if isinstance(data, int) and not isinstance(data, bool) and key and format_value(key, data) != str(data):
        return format_value(key, data)
    return data


def manifest_html(manifest: dict) -> str:
    """The manifest (bookkeeping fields left out) in human units, collapsed behind a ``<details>`` toggle."""
    shown = {k: v for k, v in manifest.items() if k not in ("status", "files")}
    text = json.dumps(_humanise(shown), indent=2, default=str)
    return ("<details id='manifest'><summary><b>Manifest</b> (the spec, seeds and versions of these results; "
            "sizes, bandwidths and times in human units)</summary><pre>" + html.escape(text) + "</pre></details>")

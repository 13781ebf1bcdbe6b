"""``--set KEY=VALUE`` and ``--param KEY=VALUE``: dotted keys, values parsed as YAML."""

from __future__ import annotations

import copy
from typing import Any

from netsim.config.yamlread import _yaml_value
from netsim.errors import ConfigError, shorten


def set_dotted(data: dict, key: str, value: Any) -> None:
    """Set ``value`` at the dotted ``key`` of ``data`` in place (list indices allowed: ``jobs.0.start``).

    Missing mappings on the way are created; a policy given as a string (``routing: ecmp``) becomes
    ``{type: ecmp}`` so that ``routing.reconvergence`` can be set under it.
    """
    node = data
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        if isinstance(node, list):  # jobs.0.placement: a list index
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"cannot set {key}: {'.'.join(parts[:i])} has {len(node)} item(s), "
                                  f"{shorten(part)} is not an index of one", key)
            node = node[int(part)]
            if not isinstance(node, (dict, list)):
                raise ConfigError(f"cannot set {key}: {'.'.join(parts[:i + 1])} is not a mapping", key)
            continue
        child = node.get(part)
        if isinstance(child, str) and part in ("routing", "placement"):
            child = {"type": child}
        if not isinstance(child, (dict, list)):
            if child is not None:
                raise ConfigError(f"cannot set {key}: {'.'.join(parts[:i + 1])} is not a mapping", key)
            child = {}
        node[part] = child
        node = child
    if isinstance(node, list):
        last = parts[-1]
        if not last.isdigit() or int(last) >= len(node):
            raise ConfigError(f"cannot set {key}: {'.'.join(parts[:-1])} has {len(node)} item(s)", key)
        node[int(last)] = value
    else:
        node[parts[-1]] = value


def apply_overrides(data: dict, overrides: list[str]) -> tuple[dict, frozenset[str]]:
    """Apply ``KEY=VALUE`` strings (dotted keys, YAML-typed values) to a copy of ``data``."""
    data = copy.deepcopy(data)
    paths = []
    for item in overrides:
        key, value = parse_assignment(item, "--set")
        set_dotted(data, key, value)
        paths.append(key)
    return data, frozenset(paths)


def parse_assignment(item: str, option: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (dotted key, YAML-typed value); ConfigError naming ``option`` otherwise."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not p for p in key.split(".")):
        raise ConfigError(f"{option} expects KEY=VALUE with a dotted key (workload.size=1GiB), "
                          f"got {shorten(item)}")
    return key, _option_value(raw, f"{option} {key if len(key) <= 60 else shorten(key)}")


def parse_param(item: str) -> tuple[str, list]:
    """``--param KEY=VALUE`` -> (dotted key, the values to sweep); ConfigError naming ``--param`` otherwise.

    VALUE is YAML: a list is the values to sweep, anything else one value. A comma never splits a
    value (``routing={type: split, ways: 4}`` is one mapping, ``name=a,b`` one string); a key whose
    own value is a list is swept over a list of lists (``[[1, 2], [3]]``).

    Examples
    --------
    >>> parse_param("topology.spines=[2, 4]")
    ('topology.spines', [2, 4])
    >>> parse_param("routing={type: split, ways: 4}")
    ('routing', [{'type': 'split', 'ways': 4}])
    """
    key, value = parse_assignment(item, "--param")
    values = value if isinstance(value, list) else [] if value == "" else [value]
    if not values:
        raise ConfigError(f"--param {key} needs at least one value: --param {key}=VALUE, or a YAML list of "
                          f"values to sweep: --param {key}=[V1,V2]")
    return key, values


def _option_value(raw: str, option: str) -> Any:
    """:func:`_yaml_value`, its ConfigErrors naming the command-line ``option``."""
    try:
        return _yaml_value(raw)
    except ConfigError as exc:
        raise ConfigError(f"{option}: {exc.message}") from None


# ---------------------------------------------------------------------------- reading YAML


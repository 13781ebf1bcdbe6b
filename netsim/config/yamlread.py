"""Reading YAML safely: size, depth and node limits, no tags or aliases bombs, unknown-key checks, errors with line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.reader import ReaderError
from yaml.resolver import Resolver

from netsim import inputfile
from netsim.errors import ConfigError, shorten

#: Largest file netsim reads as YAML (bytes). Experiment, topology and workload files are a few
#: KB; 4 MiB leaves room for generated sweeps, while a wrong path (a trace, a binary) fails at once.
MAX_YAML_BYTES = 4 * 2**20
#: Deepest nesting of mappings and lists, an alias counting as the nesting it stands for. A spec
#: nests about six levels; the bound keeps every later recursive walk of the data shallow.
MAX_YAML_DEPTH = 64
#: Most nodes (keys, values, mappings and lists) one YAML document may hold, an alias counting as a
#: full copy of what it names: an alias bomb ("billion laughs") is refused from its events,
#: before anything is built. An experiment file holds a few hundred.
MAX_YAML_NODES = 100_000
# perf: libyaml, when PyYAML was built with it, parses 50-100x faster than the pure-Python parser
# (a 4 MiB file in 0.1 s, not 10 s) and yields the same events; both are safe and not recursive.
_PARSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NODES = "(keys, values, mappings and lists)"


def read_text(path: str | Path, limit: int = MAX_YAML_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes, a leading byte-order mark dropped
    (:func:`netsim.inputfile.read_text`).

    Raises ConfigError naming the file when it is missing, a directory (or a device, pipe or
    socket: reading one could block), unreadable, larger than ``limit``, not UTF-8 (the line and
    byte of the first bad byte) or holds a NUL character (binary data).

    Examples
    --------
    >>> "name: ring-allreduce" in read_text("experiments/ring-allreduce.yaml")  # doctest: +SKIP
    True
    """
    return inputfile.read_text(path, limit)


def _events(text: str, where: str) -> list[yaml.Event]:
    """The YAML events of ``text``, refused past :data:`MAX_YAML_DEPTH` or :data:`MAX_YAML_NODES`
    or with a recursive alias.

    The parser is not recursive, and each alias counts the nodes and nesting of its anchor's
    (already closed) node, so nothing is built from a document that would exceed a limit.
    """
    events: list[yaml.Event] = []
    closed: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height) of its node
    stack: list[list] = []  # per open mapping or list: [anchor, nodes so far, height so far]
    total = aliased = 0

    def refuse(message: str, event: yaml.Event) -> ConfigError:
        return ConfigError(message, "", where or None, event.start_mark.line + 1)

    for event in yaml.parse(text, Loader=_PARSER):
        events.append(event)
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) == MAX_YAML_DEPTH:
                raise refuse(f"mappings and lists nested deeper than {MAX_YAML_DEPTH} levels", event)
            stack.append([event.anchor, 1, 1])
            total += 1
            if total > MAX_YAML_NODES:
                raise refuse(f"more than {MAX_YAML_NODES:,} YAML nodes {_NODES}", event)
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, nodes, height = stack.pop()
            if anchor is not None:
                closed[anchor] = (nodes, height)
        elif isinstance(event, yaml.ScalarEvent):
            nodes, height = 1, 0
            if event.anchor is not None:
                closed[event.anchor] = (1, 0)
            total += 1
        elif isinstance(event, yaml.AliasEvent):
            name = shorten(event.anchor)[1:-1]
            if event.anchor not in closed:
                if any(entry[0] == event.anchor for entry in stack):
                    raise refuse(f"recursive alias *{name}: it stands for a mapping or list that contains it",
                                 event)
                continue  # undefined: the composer says so, with its line
            nodes, height = closed[event.anchor]
            if len(stack) + height > MAX_YAML_DEPTH:
                raise refuse(f"mappings and lists nested deeper than {MAX_YAML_DEPTH} levels once alias "
                             f"*{name} is expanded", event)
            total += nodes
            aliased += nodes
            if total > MAX_YAML_NODES:
                raise refuse(f"aliases expand past the limit of {MAX_YAML_NODES:,} YAML nodes {_NODES}: "
                             f"alias *{name} alone stands for {nodes:,}", event)
        else:
            continue
        if total > MAX_YAML_NODES:
            expanded = " once its aliases are expanded" if aliased else ""
            raise refuse(f"more than {MAX_YAML_NODES:,} YAML nodes {_NODES}{expanded}", event)
        if stack:
            stack[-1][1] += nodes
            stack[-1][2] = max(stack[-1][2], height + 1)
    return events


class _Builder(Composer, SafeConstructor, Resolver):
    """Composes checked events into one node tree, then constructs the data from that tree.

    Every use of an alias is constructed anew, so every mapping and list in the data is its own
    object: ``--set jobs.0.workload.size=...`` must not change the other jobs that share ``*ring``.
    """

    def __init__(self, events: list[yaml.Event]):
        self._events, self._next = events, 0
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def check_event(self, *choices) -> bool:
        """The Parser interface the Composer reads events through: is the next one of ``choices``?"""
        if self._next == len(self._events):
            return False
        return not choices or isinstance(self._events[self._next], choices)

    def peek_event(self) -> yaml.Event:
        """The next event, left in place."""
        return self._events[self._next]

    def get_event(self) -> yaml.Event:
        """The next event, consumed."""
        self._next += 1
        return self._events[self._next - 1]

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """The data of ``node``, never a copy shared with another alias; an unreadable scalar is a
        located YAML error (``int`` refuses more than 4,300 digits, ``date`` a 13th month)."""
        self.constructed_objects.pop(node, None)
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:
            raise ConstructorError(None, None, f"cannot read {shorten(node.value)}: {str(exc).split(';')[0]}",
                                   node.start_mark) from None


def _check_keys(root: yaml.Node | None, where: str) -> None:
    """Refuse a mapping that gives a key twice. A merge (``<<: *base``) is not a duplicate of the
    keys it brings: an explicit key overrides a merged one."""
    stack, seen = [(root, "")], set()
    while stack:
        node, path = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                at = f"{path}.{name}" if path else name
                if isinstance(key, yaml.ScalarNode):
                    line = key.start_mark.line + 1
                    if (key.tag, name) in first:
                        raise ConfigError(f"duplicate key {shorten(name)} (first at line "
                                          f"{first[key.tag, name]})", at, where or None, line)
                    first[key.tag, name] = line
                stack.append((value, at))
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, f"{path}.{i}" if path else str(i)) for i, item in enumerate(node.value)]


def _parse_yaml(text: str, where: str) -> tuple[yaml.Node | None, Any]:
    """(node tree, data) of one YAML document: composed once from checked events, the data
    constructed from that tree (merge keys expanded in it), so the two cannot disagree.

    ConfigError past the limits or for a duplicate key; ``yaml.YAMLError`` for malformed YAML.
    """
    builder = _Builder(_events(text, where))
    root = builder.get_single_node()
    _check_keys(root, where)
    return root, (builder.construct_document(root) if root is not None else None)


def _yaml_error(exc: yaml.YAMLError, text: str, where: str) -> ConfigError:
    """A located ConfigError for malformed YAML (syntax, control character, unknown tag, ...)."""
    if isinstance(exc, ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        return ConfigError(f"control character U+{ord(char):04X} at line {line}: not YAML text", "", where,
                           line)
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    if context and problem.startswith("but "):  # "expected a single document in the stream but found another"
        problem = f"{context} {problem}"
    if problem == "exceeded maximum nesting depth":  # libyaml's own bound (1,000) met while scanning ahead
        return ConfigError(f"mappings and lists nested deeper than {MAX_YAML_DEPTH} levels", "", where,
                           mark.line + 1 if mark else None)
    kind = "YAML error" if isinstance(exc, (ComposerError, ConstructorError)) else "YAML syntax error"
    return ConfigError(f"{kind}: {problem}", "", where, mark.line + 1 if mark else None)


def _a(data: Any) -> str:
    """What a YAML value is, for messages: ``a list ([1, 2])``."""
    return f"a {type(data).__name__} ({shorten(data)})"


def _read_yaml(path: Path, expected: str) -> tuple[yaml.Node, dict]:
    """(node tree for line numbers, data) of a YAML file holding a mapping (``expected`` describes
    it); located ConfigErrors otherwise."""
    where = str(path)
    text = read_text(path)
    if not text.strip():  # a tab alone would be a syntax error
        raise ConfigError(f"the file is empty (no YAML data): expected {expected}", "", where)
    try:
        root, data = _parse_yaml(text, where)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, where) from None
    if data is None:
        raise ConfigError(f"the file is empty (no YAML data): expected {expected}", "", where)
    if not isinstance(data, dict):
        raise ConfigError(f"expected {expected} at the top level, got {_a(data)}", "", where,
                          root.start_mark.line + 1)
    return root, data


def _yaml_value(raw: str) -> Any:
    """A command-line value typed as YAML (``4``: an int, ``[1, 2]``: a list); text that is not YAML
    stays text. ConfigError past the limits of a YAML file or with a duplicate key."""
    if not raw.strip():
        return ""
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(f"value too long: {len(raw):,} characters (limit {MAX_YAML_BYTES:,})")
    try:
        return _parse_yaml(raw, "")[1]
    except yaml.YAMLError:
        return raw



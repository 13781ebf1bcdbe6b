"""The package's layering, checked statically on the import graph of netsim/ (nothing is imported).

Every ``.py`` file under netsim/ is parsed with :mod:`ast`; each ``import``/``from ... import`` of a
netsim module becomes an edge ``importer -> imported module`` (relative imports resolved; ``from P
import n`` points at ``P.n`` when that is a module, else at ``P``; ``import a.b.c`` at the longest
prefix that is a module). Each edge has a kind:

* ``eager``: runs when the importing module is imported (module level, class bodies, module-level
  ``if``/``try``);
* ``lazy``: inside a function or method body, so it runs only when called;
* ``type_checking``: under ``if TYPE_CHECKING:``, never run.

Checks:

1. netsim.engine imports nothing from the layers above it (any kind of edge).
2. No cycle between first-level subpackages over eager edges, and none between modules.
3. No class longer than 500 lines, no function or method longer than 150 lines.
4. No access to SimPy's private attributes (``x._now``, ``x._ok = ...``, ``getattr(x, "_queue")``),
   anywhere, on anything -- netsim/engine/clock.py included.
"""

from __future__ import annotations

import ast
from collections import defaultdict, deque
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PKG = "netsim"
ROOT = Path(__file__).resolve().parents[1] / PKG
REPO = ROOT.parent

#: What netsim.engine must not import from (eager, lazy or under TYPE_CHECKING).
ENGINE_FORBIDDEN = ("collectives", "workload", "experiment", "report", "cli")

MAX_CLASS_LINES = 500
MAX_FUNCTION_LINES = 150

#: Private state of simpy 4's Environment, Event, Process, Timeout and Condition. Condition's
#: ``_events``, ``_count``, ``_check`` and ``_evaluate`` are left out: those names are common on
#: netsim's own classes (the config package's YAML reader has ``self._events``), so they would only add noise.
SIMPY_PRIVATE = frozenset({
    "_queue", "_eid", "_now", "_active_proc",               # Environment
    "_value", "_ok", "_defused", "_desc",                   # Event
    "_generator", "_target", "_resume",                      # Process
    "_delay",                                                # Timeout
    "_build_value", "_populate_value", "_remove_check_callbacks",  # Condition
})


# --------------------------------------------------------------------------------------------------
# parsing


@dataclass(frozen=True)
class Module:
    name: str          # dotted, e.g. netsim.engine.fabric; a package is named by its __init__
    path: Path
    is_package: bool
    tree: ast.Module

    @property
    def rel(self) -> str:
        return str(self.path.relative_to(REPO))


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    kind: str          # "eager" | "lazy" | "type_checking"
    path: str          # importer, relative to the repository
    line: int
    stmt: str

    def where(self) -> str:
        return f"{self.path}:{self.line} ({self.kind}) `{self.stmt}`"


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


@lru_cache(maxsize=None)
def modules() -> dict[str, Module]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        name, is_pkg = _module_name(path)
        out[name] = Module(name, path, is_pkg, ast.parse(path.read_text(), filename=str(path)))
    assert out, f"no modules found under {ROOT}"
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.Module):
    """Yield (node, kind) for every Import/ImportFrom in ``tree``."""
    def visit(node: ast.AST, kind: str):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, kind
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                yield from visit(stmt, "type_checking")
            for stmt in node.orelse:
                yield from visit(stmt, kind)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # decorators, defaults and annotations run at definition time; the body runs when called
            inner = "type_checking" if kind == "type_checking" else "lazy"
            for child in ast.iter_child_nodes(node):
                is_body = isinstance(child, ast.stmt)
                yield from visit(child, inner if is_body else kind)
            return
        for child in ast.iter_child_nodes(node):
            yield from visit(child, kind)

    yield from visit(tree, "eager")


def _resolve(mod: Module, node: ast.Import | ast.ImportFrom, known: dict[str, Module]) -> list[str]:
    def longest_known(dotted: str) -> str | None:
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            cand = ".".join(parts[:i])
            if cand in known:
                return cand
        return None

    targets = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == PKG or alias.name.startswith(PKG + "."):
                targets.append(longest_known(alias.name))
        return [t for t in targets if t]

    if node.level:
        base = mod.name.split(".") if mod.is_package else mod.name.split(".")[:-1]
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)]
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    if not (stem == PKG or stem.startswith(PKG + ".")):
        return []
    for alias in node.names:
        sub = f"{stem}.{alias.name}"
        targets.append(sub if sub in known else longest_known(stem))
    return [t for t in targets if t]


@lru_cache(maxsize=None)
def edges() -> tuple[Edge, ...]:
    known = modules()
    out = []
    for mod in known.values():
        for node, kind in _import_nodes(mod.tree):
            stmt = ast.unparse(node)
            for dst in dict.fromkeys(_resolve(mod, node, known)):
                out.append(Edge(mod.name, dst, kind, mod.rel, node.lineno, stmt))
    return tuple(sorted(set(out), key=lambda e: (e.path, e.line, e.dst)))


def layer(module: str) -> str:
    """First-level subpackage (or top-level module) of ``module``; the root package is ``netsim``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PKG


# --------------------------------------------------------------------------------------------------
# cycles


def _cycles(graph: dict[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """(one shortest cycle, all members) per strongly connected component of 2+ nodes (Tarjan)."""
    index, low, on_stack, stack, sccs, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(graph) | {d for ds in graph.values() for d in ds})

    def strongconnect(v):
        # iterative Tarjan, so a deep graph cannot hit the recursion limit
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                sccs.append(comp)

    for v in nodes:
        if v not in index:
            strongconnect(v)

    cycles = []
    for comp in sccs:
        if len(comp) < 2:
            continue
        members = set(comp)
        start = min(comp)
        # BFS from start back to start inside the component: a shortest cycle through `start`
        prev, queue, found = {}, deque([start]), None
        while queue and found is None:
            u = queue.popleft()
            for w in sorted(graph.get(u, ())):
                if w not in members:
                    continue
                if w == start:
                    found = u
                    break
                if w not in prev:
                    prev[w] = u
                    queue.append(w)
        path, u = [start], found
        while u != start:
            path.append(u)
            u = prev[u]
        path.append(start)
        path.reverse()
        cycles.append((path, sorted(comp)))
    return sorted(cycles)


def _witnesses(cycle: list[str], key, eager: list[Edge]) -> list[str]:
    lines = []
    for a, b in zip(cycle, cycle[1:]):
        hits = [e for e in eager if key(e.src) == a and key(e.dst) == b]
        shown = "; ".join(e.where() for e in hits[:3]) + (f"; ... ({len(hits)} imports)" if len(hits) > 3 else "")
        lines.append(f"    {a} -> {b}: {shown}")
    return lines


# --------------------------------------------------------------------------------------------------
# the checks


def test_engine_imports_nothing_from_the_layers_above():
    bad = [e for e in edges()
           if layer(e.src) == "engine" and layer(e.dst) in ENGINE_FORBIDDEN]
    assert not bad, (
        f"netsim.engine must not import from {', '.join('netsim.' + f for f in ENGINE_FORBIDDEN)} "
        f"(eager, lazy or TYPE_CHECKING); {len(bad)} import(s) do:\n"
        + "\n".join(f"  {e.where()} -> {e.dst}" for e in bad))


def test_no_import_cycle_between_subpackages():
    eager = [e for e in edges() if e.kind == "eager" and layer(e.src) != layer(e.dst)]
    graph = defaultdict(set)
    for e in eager:
        graph[layer(e.src)].add(layer(e.dst))
    cycles = _cycles(graph)
    msg = [f"module-level imports make {len(cycles)} cycle(s) between netsim's subpackages:"]
    for cyc, members in cycles:
        msg.append(f"  cycle: {cyc}")
        if len(members) > len(cyc) - 1:
            msg.append(f"    (one of several: all of {members} import each other, directly or not)")
        msg.extend(_witnesses(cyc, layer, eager))
    assert not cycles, "\n".join(msg)


def test_no_import_cycle_between_modules():
    eager = [e for e in edges() if e.kind == "eager" and e.src != e.dst]
    graph = defaultdict(set)
    for e in eager:
        graph[e.src].add(e.dst)
    cycles = _cycles(graph)
    msg = [f"module-level imports make {len(cycles)} cycle(s) between netsim modules:"]
    for cyc, members in cycles:
        msg.append(f"  cycle: {cyc}")
        if len(members) > len(cyc) - 1:
            msg.append(f"    (one of several: all of {members} import each other, directly or not)")
        msg.extend(_witnesses(cyc, lambda m: m, eager))
    assert not cycles, "\n".join(msg)


def _definitions():
    for mod in modules().values():
        def walk(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    qual = f"{prefix}{child.name}"
                    yield mod, child, qual
                    yield from walk(child, qual + ".")
                else:
                    yield from walk(child, prefix)
        yield from walk(mod.tree, "")


def test_classes_and_functions_are_not_too_long():
    too_long = []
    for mod, node, qual in _definitions():
        length = node.end_lineno - node.lineno + 1
        is_class = isinstance(node, ast.ClassDef)
        limit = MAX_CLASS_LINES if is_class else MAX_FUNCTION_LINES
        if length > limit:
            kind = "class" if is_class else "function"
            too_long.append(f"  {mod.rel}:{node.lineno} {kind} {qual}: {length} lines (limit {limit})")
    assert not too_long, (
        f"{len(too_long)} definition(s) over the size limits (class <= {MAX_CLASS_LINES} lines, "
        f"function/method <= {MAX_FUNCTION_LINES} lines, counted from the def/class line to end_lineno):\n"
        + "\n".join(too_long))


#: The one sanctioned exception: an event type of the engine's own (``clock.Wakeup``: triggered as it is
#: made and scheduled with a priority, which SimPy's public API has no constructor for) initialises its
#: own state in ``__init__`` exactly as ``simpy.events.Timeout.__init__`` does. Reading or writing
#: these attributes anywhere else, or on anything but ``self``, still fails.
OWN_EVENT_INIT = {("netsim/engine/clock.py", "Wakeup", "_ok"), ("netsim/engine/clock.py", "Wakeup", "_value")}


def _own_event_init(mod, node) -> bool:
    """``self.<attr> = ...`` in ``__init__`` of a class listed in OWN_EVENT_INIT."""
    if not (isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) and node.value.id == "self"):
        return False
    for cls in ast.walk(mod.tree):
        if isinstance(cls, ast.ClassDef) and (mod.rel, cls.name, node.attr) in OWN_EVENT_INIT:
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "__init__" and fn.lineno <= node.lineno <= fn.end_lineno:
                    return True
    return False


def test_no_simpy_private_attributes():
    found = []
    for mod in modules().values():
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Attribute) and node.attr in SIMPY_PRIVATE and not _own_event_init(mod, node):
                access = "write" if isinstance(node.ctx, (ast.Store, ast.Del)) else "read"
                found.append(f"  {mod.rel}:{node.lineno} {access} `{ast.unparse(node)}`")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant) and node.args[1].value in SIMPY_PRIVATE):
                found.append(f"  {mod.rel}:{node.lineno} {node.func.id} `{ast.unparse(node)}`")
    assert not found, (
        f"{len(found)} access(es) to SimPy's private attributes ({', '.join(sorted(SIMPY_PRIVATE))}); "
        "use the public API (env.now, env.peek(), event.value, event.ok, event.succeed()/trigger(), "
        "event.defused):\n" + "\n".join(sorted(found)))


def test_the_import_graph_is_read():
    """Guards the checks above against passing vacuously (a parser that finds no imports)."""
    es = edges()
    assert any(e.src.startswith("netsim.engine") and e.kind == "eager" for e in es)
    assert any(e.kind == "lazy" for e in es)
    assert len({layer(e.src) for e in es}) > 5

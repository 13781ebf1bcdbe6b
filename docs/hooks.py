"""mkdocs hook: the experiment-file and CLI reference pages, generated from the code at build time.

``reference/config.md`` comes from the pydantic models of :mod:`netsim.config` (types, defaults,
docstrings and the ``#:`` comments above fields) and the routing / placement registries (their
options); ``reference/cli.md`` from the typer app of :mod:`netsim.cli`. The pages exist only in the
built site, so they follow the code without a generated file to keep in step. The library does not
depend on mkdocs: only this file imports netsim for the docs.
"""

from __future__ import annotations

import inspect
import re

from mkdocs.structure.files import File

GENERATED = "This page is generated from the code when the site is built (`docs/hooks.py`)."


def on_files(files, config):
    """Add the two generated pages to the site."""
    for uri, render in (("reference/config.md", config_reference), ("reference/cli.md", cli_reference)):
        files.append(File.generated(config, uri, content=render()))
    return files


# ------------------------------------------------------------------ experiment file

def _field_comments(cls) -> dict[str, str]:
    """``#:`` comment lines above each field of a class body, joined."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    out, pending = {}, []
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        m = re.match(r"\s{4}(\w+)\s*:", line)
        if m and pending:
            out[m.group(1)] = " ".join(pending)
        if stripped and not stripped.startswith("#"):
            pending = []
    return out


def _models() -> dict[str, type]:
    """Every pydantic model class reachable by name (the schema's ``$defs`` keys)."""
    from pydantic import BaseModel

    import netsim.config  # noqa: F401  (loads every spec module)

    seen: dict[str, type] = {}
    stack = [BaseModel]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub.__module__.startswith("netsim"):
                seen.setdefault(sub.__name__, sub)
            stack.append(sub)
    return seen


def _anchor(name: str) -> str:
    return name.lower()


def _type(schema: dict, quantity: str | None = None) -> str:
    """A short, human type of one JSON-schema node."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{_anchor(name)})"
    if "anyOf" in schema or "oneOf" in schema:
        parts = [_type(s, quantity) for s in schema.get("anyOf", schema.get("oneOf"))]
        return " or ".join(dict.fromkeys(p for p in parts if p != "null")) + (
            " or null" if "null" in parts else "")
    if "const" in schema:
        return f"`{schema['const']}`"
    if "enum" in schema:
        return " or ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}), quantity)}"
    if kind == "number" and quantity:
        return quantity
    return {"number": "number", "integer": "integer", "boolean": "boolean", "string": "string",
            "object": "mapping", None: "any"}.get(kind, str(kind))


_QUANTITIES = {"Size": "size (`256MiB`)", "Time": "time (`2us`)", "Bandwidth": "bandwidth (`400Gbps`)"}


def _quantity(cls, field: str) -> str | None:
    for klass in cls.__mro__:
        raw = getattr(klass, "__annotations__", {}).get(field)
        if raw is not None:
            raw = raw if isinstance(raw, str) else repr(raw)
            for key, text in _QUANTITIES.items():
                if re.search(rf"\b{key}\b", raw):
                    return text
            if "_quantity(\"time\"" in raw:
                return _QUANTITIES["Time"]
            return None
    return None


def _default(prop: dict, required: bool, quantity: str | None) -> str:
    if required:
        return "**required**"
    if "default" not in prop:
        return ""
    value = prop["default"]
    if value is None:
        return "—"
    if value == "":
        return '`""`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict):
        if set(value) == {"type"}:
            return f"`{value['type']}`"
        return "its own defaults" if value else "`{}`"
    if quantity and isinstance(value, (int, float)):
        from netsim.units import format_bandwidth, format_size, format_time

        fmt = {"size": format_size, "time": format_time, "bandwidth": format_bandwidth}[quantity.split()[0]]
        return f"`{fmt(value)}`"
    return f"`{value}`"


#: What the top-level keys are for (the models say how; this says why).
TOP_LEVEL = {
    "name": "Letters, digits, `-`, `_`, `.`; the default results directory is `results/NAME`.",
    "description": "Free text.",
    "seed": "Every random choice derives from it (`SeedSequence`); written into every results row.",
    "topology": "The fabric: one of the registered families, told apart by `type` "
                "([Fabrics](../fabrics.md)); or a file path, or `{from: FILE, ...overrides}`.",
    "placement": "Where ranks go ([policies](../policies/holmes.md#placements)).",
    "routing": "How connections are routed ([policies](../policies/index.md)).",
    "workload": "What runs, told apart by `type`; or a file path, or `{from: FILE, ...overrides}`.",
    "jobs": "Instead of `workload`: several jobs sharing the fabric ([Several jobs](../cookbook/multi-job.md)).",
    "faults": "A timed schedule of link, NIC, switch and GPU faults ([Faults](../cookbook/faults.md)).",
    "stragglers": "Slow GPUs drawn from the run seed ([Slow GPUs](../cookbook/faults.md#slow-gpus-stragglers)).",
    "engine": "Engine settings.",
}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def config_reference() -> str:
    """Markdown of every section of the experiment file."""
    from netsim.config import ExperimentSpec

    schema = ExperimentSpec.model_json_schema()
    defs = schema.pop("$defs")
    defs["ExperimentSpec"] = schema
    models = _models()
    order, queue = [], ["ExperimentSpec"]
    while queue:  # breadth-first from the top, so a section comes before the ones it uses
        name = queue.pop(0)
        if name in order or name not in defs:
            continue
        order.append(name)
        queue += re.findall(r"#/\$defs/(\w+)", str(defs[name]))
    order += sorted(set(defs) - set(order))

    out = ["# Experiment file reference", "",
           (GENERATED + " The annotated tour is [The experiment file](../experiment-file.md); units are "
            "explained there."), "",
           ("The top level is [ExperimentSpec](#experimentspec). Besides its keys, an experiment file may "
            "hold `variants`, `sweep`, `seeds` and `repeats` ([Sweeps](../cookbook/sweeps.md)), which "
            "expand into runs before validation."), ""]
    for name in order:
        node, cls = defs[name], models.get(name)
        out += [f"## {name}", ""]
        doc = inspect.cleandoc(cls.__doc__) if cls is not None and cls.__doc__ else node.get("description", "")
        if doc:
            out += [re.sub(r":(?:func|class|mod|meth|attr):", "", doc), ""]
        props = node.get("properties", {})
        if props:
            required = set(node.get("required", []))
            comments = _field_comments(cls) if cls is not None else {}
            for klass in (cls.__mro__[1:] if cls is not None else ()):
                for key, text in _field_comments(klass).items():
                    comments.setdefault(key, text)
            out += ["| key | type | default | meaning |", "|---|---|---|---|"]
            for key, prop in props.items():
                quantity = _quantity(cls, key) if cls is not None else None
                out.append(f"| `{key}` | {_cell(_type(prop, quantity))} | {_cell(_default(prop, key in required, quantity))} "
                           f"| {_cell(comments.get(key) or (TOP_LEVEL.get(key, '') if name == 'ExperimentSpec' else ''))} |")
            out.append("")
        if name == "PolicySpec":
            out += _policy_options()
    return "\n".join(out) + "\n"


def _policy_options() -> list[str]:
    """The options each registered routing and placement policy accepts, from its signature."""
    from netsim.placement import PLACEMENT
    from netsim.routing import ROUTING

    out = [("A policy is a name (`routing: ecmp`) or a mapping with `type` and the policy's options "
            "(`routing: {type: split, ways: 4}`). The options of each registered policy:"), ""]
    for title, registry, skip in (("routing", ROUTING, 2), ("placement", PLACEMENT, 0)):
        out += [f"| `{title}:` type | options (default) | what it is |", "|---|---|---|"]
        for name in registry.names():
            factory = registry.get(name)
            params = list(inspect.signature(factory).parameters.values())[skip:]
            opts = []
            for p in params:
                if p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
                    continue
                opts.append(f"`{p.name}`" + ("" if p.default is p.empty else f" ({p.default!r})"))
            doc = re.sub(r":(?:func|class|mod|meth|attr):", "", (inspect.getdoc(factory) or "").split("\n\n")[0])
            out.append(f"| `{name}` | {', '.join(opts) or '—'} | {_cell(doc)} |")
        out.append("")
    return out


# ------------------------------------------------------------------ CLI

def _help(args: list[str]) -> str:
    """``netsim ARGS --help`` as the typer app prints it, on a 100-column plain terminal."""
    from typer.testing import CliRunner

    from netsim.cli import app

    result = CliRunner().invoke(app, [*args, "--help"], prog_name="netsim",
                                env={"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"})
    if result.exit_code != 0:
        raise RuntimeError(f"netsim {' '.join(args)} --help failed: {result.output}")
    return "\n".join(line.rstrip() for line in result.output.strip("\n").splitlines()).strip("\n")


def command_names() -> list[str]:
    """The commands of the typer app, in the order it registers them."""
    from netsim.cli import app

    return [c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands]


def cli_reference() -> str:
    """Markdown of every command of ``netsim``: its ``--help``, from the typer app."""
    out = ["# Command-line reference", "", GENERATED + " `netsim COMMAND --help` prints the same.", "",
           "```text", _help([]), "```", ""]
    for name in command_names():
        out += [f"## netsim {name}", "", "```text", _help([name]), "```", ""]
    return "\n".join(out) + "\n"

"""Pydantic validation errors as netsim errors: the file, the line and the dotted YAML path of the offending value, what is allowed, and the closest match."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ValidationError,
)

from netsim.config.specs import SWEEP_KEYS, ExperimentSpec
from netsim.config.trace_specs import TRACE_TYPES
from netsim.errors import ConfigError, did_you_mean, shorten
from netsim.fabrics import FABRICS
from netsim.spectypes import (
    _FieldError,
)


def _yaml_line(root: yaml.Node | None, loc: tuple, exact: bool = False) -> int | None:
    """1-based line of the node at ``loc`` in a composed YAML tree (nearest existing ancestor; None
    when ``exact`` and the path is not in the tree)."""
    node, line = root, None
    last_key = False  # the path ends at a mapping key: its line (a block value starts below it)
    loc = tuple(str(k) for k in loc)
    i = 0
    while i < len(loc):
        key = loc[i]
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            # a key may itself be dotted (sweep: {topology.spines: [...]}): try the longest join first
            for j in range(len(loc), i, -1):
                match = [(k, v) for k, v in node.value if k.value == ".".join(loc[i:j])]
                if match:
                    break
            if not match:
                return None if exact else line
            node = match[-1][1]  # keys a merge (<<: *base) brings come first: an explicit one overrides them
            line = match[-1][0].start_mark.line + 1
            i = j
            last_key = True
            continue
        elif isinstance(node, yaml.SequenceNode) and key.isdigit() and int(key) < len(node.value):
            node = node.value[int(key)]
            last_key = False
        else:
            if exact:
                return None
            break
        i += 1
    if node is not None and not last_key:
        line = node.start_mark.line + 1
    return line


def _clean_loc(loc: tuple) -> tuple:
    # pydantic adds validator/union tags ('function-before[...]', 'leaf_spine') to locations.
    tags = (*FABRICS.names(), "collective", "sequence", "training", *TRACE_TYPES)
    return tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in tags)))


def _message(err: dict, model_fields: dict | None) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "extra_forbidden":
        names = [*(model_fields or ()), *(SWEEP_KEYS if len(err["loc"]) == 1 else ())]  # a file's top level
        allowed = f"; allowed keys: {', '.join(names)}" if names else ""
        return f"unknown key{allowed}{did_you_mean(err['loc'][-1], names)}"
    if kind == "missing":
        return "required key is missing"
    if kind == "union_tag_invalid":
        ctx = err.get("ctx") or {}
        valid = ctx.get("expected_tags", "").replace(chr(39), "")
        hint = did_you_mean(ctx.get("tag"), valid.split(", "))
        return f"unknown type {shorten(ctx.get('tag'))}; valid: {valid}{hint}"
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if err.get("input") is not None and kind not in ("value_error",) and not isinstance(err["input"], dict):
        msg = f"{msg} (got {shorten(err['input'])})"
    return msg


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation may hold (through unions, lists and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in (*getattr(annotation, "__args__", ()), getattr(annotation, "__origin__", None)):
        if arg is not None and arg is not annotation:
            found += [m for m in _models_in(arg) if m not in found]
    return found


def _fields_at(loc: tuple) -> dict | None:
    """Field names of the model that owns ``loc[-1]`` (for 'allowed keys' hints).

    ``loc`` is pydantic's raw location: union tags in it (``sequence``) pick the member model.
    """
    model: Any = ExperimentSpec
    for key in loc[:-1]:
        if isinstance(key, int):
            continue
        field = getattr(model, "model_fields", {}).get(key)
        if field is None:
            pool = model if isinstance(model, list) else _models_in(model)
            tagged = [m for m in pool if m.model_fields.get("type") is not None
                      and key in getattr(m.model_fields["type"].annotation, "__args__", ())]
            if tagged:
                model = tagged[0]
            continue
        candidates = _models_in(field.annotation)
        if not candidates:
            return None
        model = candidates[0] if len(candidates) == 1 else candidates
    if isinstance(model, list):
        model = model[0]
    return getattr(model, "model_fields", None)


def parse_spec(data: Any, *, file: str | None = None, root: yaml.Node | None = None,
               overridden: frozenset[str] | dict[str, str] = frozenset()) -> ExperimentSpec:
    """Validate a plain mapping into an ExperimentSpec; ConfigError (first problem) on failure.

    ``overridden`` names the dotted paths whose values did not come from the file: a set (they came
    from ``--set``) or a mapping path -> where they came from (``variant 'c4p'``, ``sweep``).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping of experiment keys at the top level, got {type(data).__name__}",
                          "", file, 1)
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        err = _first_error(errors)
        loc = _clean_loc(err["loc"])
        path = ".".join(str(p) for p in loc) + (".type" if err["type"] == "union_tag_invalid" else "")
        message = _message(err, _fields_at(err["loc"]) if err["type"] == "extra_forbidden" else None)
        ctx_error = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_error, ConfigError):
            path, message = ctx_error.path or path, ctx_error.message
        elif isinstance(ctx_error, _FieldError):
            path = ".".join(p for p in (path, ctx_error.sub) if p)
            message = ctx_error.message
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        source = _source(path, overridden)
        if source:
            message += f" (value from {source})"
        line = _yaml_line(root, tuple(path.split("."))) if root is not None and path else None
        raise ConfigError(message, path, file, line) from None
    except ConfigError as exc:
        line = _yaml_line(root, tuple(exc.path.split("."))) if root is not None and exc.path else None
        source = _source(exc.path, overridden)
        raise ConfigError(exc.message + (f" (value from {source})" if source else ""), exc.path, file,
                          line) from None


def _first_error(errors: list[dict]) -> dict:
    """The validation error to report: pydantic's first, except that an unknown key beside a missing
    one (``spine:`` for ``spines:``) is reported, since the typo explains both (with a did-you-mean)."""
    missing = {e["loc"][:-1] for e in errors if e["type"] == "missing"}
    return next((e for e in errors if e["type"] == "extra_forbidden" and e["loc"][:-1] in missing), errors[0])


def _source(path: str, overridden: frozenset[str] | dict[str, str]) -> str:
    """Where the value at ``path`` (or the nearest overridden ancestor) came from, "" for the file."""
    parts = path.split(".") if path else []
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in overridden:
            return overridden[key] if isinstance(overridden, dict) else "--set"
    return ""



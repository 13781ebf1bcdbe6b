"""The JSON Schema of an experiment file, generated from the pydantic specs, for editors.

``netsim schema`` prints it; ``netsim/schema/experiment.schema.json`` is the shipped copy (a test
keeps the two equal). The schema describes what a file may *say*, which is more than the specs hold
once parsed: quantities written as text (``400Gbps``), policies as a bare name (``routing: ecmp``),
topology and workload files by reference, and the sweep keys. Values are still checked by netsim
itself (``netsim validate``); the schema gives an editor completion and a first check of keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

#: The shipped copy, next to this module.
SHIPPED = Path(__file__).with_name("experiment.schema.json")
SCHEMA_ID = "https://netsim.invalid/schema/experiment.schema.json"


class _YamlInput(GenerateJsonSchema):
    """Field schemas as YAML may write them: a field with a before-validator also takes text
    (``size: 256MiB``, ``routing: ecmp``, ``nic: cx7``), which the validator turns into its value."""

    def function_before_schema(self, schema: Any) -> dict:
        inner = super().function_before_schema(schema)
        if inner.get("type") == "string":
            return inner
        return {"anyOf": [inner, {"type": "string"}]}


def _file_reference(section: dict, what: str) -> dict:
    """``section`` or a reference to a file holding it (``FILE`` or ``{from: FILE, <keys to override>}``)."""
    return {"anyOf": [section,
                      {"type": "string", "description": f"a {what} file (YAML), relative to the experiment file"},
                      {"type": "object", "required": ["from"], "properties": {"from": {"type": "string"}},
                       "description": f"a {what} file with some of its keys overridden"}]}


def experiment_schema() -> dict:
    """The JSON Schema (draft 2020-12) of an experiment file: its spec keys and its sweep keys.

    Examples
    --------
    >>> schema = experiment_schema()
    >>> sorted(schema["properties"])[:4]
    ['cluster', 'description', 'detection', 'engine']
    >>> "repeats" in schema["properties"] and schema["additionalProperties"]
    False
    """
    from netsim.config import MAX_RUNS, ExperimentSpec
    schema = ExperimentSpec.model_json_schema(schema_generator=_YamlInput)
    props = schema["properties"]
    props["topology"] = _file_reference(props["topology"], "topology")
    props["workload"] = _file_reference(props["workload"], "workload")
    job = schema["$defs"]["JobSpec"]["properties"]
    job["workload"] = _file_reference(job["workload"], "workload")
    props.update({
        "variants": {"type": "array", "description": "runs of the same file with some keys overridden",
                     "items": {"type": "object", "required": ["name"],
                               "properties": {"name": {"type": "string"}}}},
        "sweep": {"type": "object", "description": "dotted key -> list of values (a grid); zip: keys paired",
                  "additionalProperties": {"type": "array", "minItems": 1},
                  "properties": {"zip": {"anyOf": [{"type": "object"}, {"type": "array", "items": {"type": "object"}}]}}},
        "seeds": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "uniqueItems": True},
        "repeats": {"type": "integer", "minimum": 1, "maximum": 100_000},
    })
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "netsim experiment file",
            "description": f"An experiment: one run, or a sweep of at most {MAX_RUNS:,} runs "
                           "(variants x grid points x seeds).",
            **{k: v for k, v in schema.items() if k not in ("title", "description")}}


def schema_text() -> str:
    """The schema as the shipped file holds it (sorted keys, two-space indent, final newline)."""
    return json.dumps(experiment_schema(), indent=2, sort_keys=True) + "\n"

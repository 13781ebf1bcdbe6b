"""Generated bad inputs: seeded mutations of every YAML file shipped in experiments/, topologies/, workloads/.

Each file gets :data:`PER_FILE` mutations drawn from a generator seeded by the file's name and the
mutation's index, so the corpus is identical on every machine and every run. A mutation works on
the data (delete a key, give it an odd value, misspell it, swap two values) or on the text
(duplicate a line, truncate, insert a byte, break the indentation, insert a YAML indicator).
A mutated file may still be valid: its case accepts success or a clean error, nothing else.
"""

from __future__ import annotations

import copy
import zlib
from pathlib import Path

import numpy as np
import yaml

from tests.badinputs.harness import REPO, Case

PER_FILE = 8
ODD = [None, True, False, -1, 0, 10**12, 1.5, 2**64, "", "🚀", "x" * 10_000, [], {}, [1, 2], {"a": 1}, "1e400GB",
       ".", "..", "/etc", "nan", "-1us", "25gbps", "\u202e", "0" * 300, "ecmp", "ring", "random", 1e308]
INDICATORS = ["&", "*", "{", "[", ":", "!", "|", ">", "%", "@", "`", "'", '"', "#", "- "]


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


def _parent(data, path):
    node = data
    for key in path[:-1]:
        node = node[key]
    return node


def _dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**9)


def mutate(text: str, rng: np.random.Generator) -> tuple[str, str | bytes]:
    """(what was done, the mutated file) for one draw of ``rng``."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:  # an earlier mutation broke the syntax: only text mutations apply
        data = None
    paths = list(_paths(data))
    op = int(rng.integers(10))
    if op == 0 and paths:
        path = paths[rng.integers(len(paths))]
        d = copy.deepcopy(data)
        node = _parent(d, path)
        node.pop(path[-1]) if isinstance(node, dict) else node.pop(path[-1])
        return f"delete {'.'.join(map(str, path))}", _dump(d)
    if op in (1, 2) and paths:
        path = paths[rng.integers(len(paths))]
        value = ODD[rng.integers(len(ODD))]
        d = copy.deepcopy(data)
        _parent(d, path)[path[-1]] = copy.deepcopy(value)
        return f"set {'.'.join(map(str, path))} to {str(value)[:20]!r}", _dump(d)
    if op == 3 and paths:
        keys = [p for p in paths if isinstance(p[-1], str)]
        if keys:
            path = keys[rng.integers(len(keys))]
            d = copy.deepcopy(data)
            node = _parent(d, path)
            word = path[-1]
            cut = int(rng.integers(len(word))) if word else 0
            node[word[:cut] + word[cut + 1:] + ("x" if len(word) < 2 else "")] = node.pop(word)
            return f"misspell {'.'.join(map(str, path))}", _dump(d)
    if op == 4 and len(paths) > 1:
        a, b = (paths[i] for i in rng.choice(len(paths), 2, replace=False))
        d = copy.deepcopy(data)
        try:
            va, vb = copy.deepcopy(_parent(d, a)[a[-1]]), copy.deepcopy(_parent(d, b)[b[-1]])
            _parent(d, a)[a[-1]], _parent(d, b)[b[-1]] = vb, va
            return f"swap {'.'.join(map(str, a))} and {'.'.join(map(str, b))}", _dump(d)
        except (KeyError, IndexError, TypeError):
            pass
    lines = text.splitlines(keepends=True)
    if op == 5:
        keyed = [i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith("#")]
        if keyed:
            i = keyed[rng.integers(len(keyed))]
            return f"duplicate line {i + 1}", "".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])
    if op == 6 and text:
        cut = int(rng.integers(len(text)))
        return f"truncate at {cut}", text[:cut]
    if op == 7:
        at = int(rng.integers(max(len(text), 1)))
        byte = bytes([int(rng.choice([0, 0xFF, 0xC3, 0x07, 0x1B, 0x80, 0x09]))])
        raw = text.encode()
        return f"insert byte {byte!r} at {at}", raw[:at] + byte + raw[at:]
    if op == 8 and lines:
        i = int(rng.integers(len(lines)))
        shift = int(rng.choice([-2, -1, 1, 3]))
        line = lines[i]
        lines[i] = line[min(-shift, len(line) - len(line.lstrip())):] if shift < 0 else " " * shift + line
        return f"indent line {i + 1} by {shift}", "".join(lines)
    at = int(rng.integers(max(len(text), 1)))
    ind = INDICATORS[rng.integers(len(INDICATORS))]
    return f"insert {ind!r} at {at}", text[:at] + ind + text[at:]


def _files(folder: str) -> list[Path]:
    return sorted((REPO / folder).glob("*.yaml"))


def generated_cases() -> list[Case]:
    """:data:`PER_FILE` mutations of every shipped YAML file, each run through the CLI."""
    cases = []
    for folder, command in (("experiments", "validate"), ("topologies", "topo"), ("workloads", "validate")):
        for path in _files(folder):
            text = path.read_text()
            for k in range(PER_FILE):
                rng = np.random.default_rng([zlib.crc32(path.name.encode()), k])
                what, mutated = mutate(text, rng)
                name = f"{folder}/{path.name}: {what}"
                if folder == "workloads":
                    exp = workload_experiment(path)
                    files = {"workloads/mut.yaml": mutated, "experiments/mut-exp.yaml": exp}
                    argv = [command, "experiments/mut-exp.yaml"]
                else:
                    files = {f"{folder}/mut.yaml": mutated}
                    argv = [command, f"{folder}/mut.yaml"]
                cases.append(Case(name, "generated", argv, files, expect=frozenset({"ok", "error"}),
                                  repo_files=True))
    return cases


def workload_experiment(workload: Path) -> str:
    """An experiment that runs the (mutated) workload file on a fabric large enough for the original."""
    data = yaml.safe_load(workload.read_text())
    w = data.get("workload", data)
    par = w.get("parallelism", {})
    gpus = par.get("tp", 1) * par.get("pp", 1) * par.get("dp", 1)
    hosts = max(1, -(-gpus // 8))
    return _dump({"name": "mut", "topology": {
        "type": "leaf_spine", "leaves": max(1, -(-hosts // 4)), "spines": 2, "hosts_per_leaf": 4, "gpus_per_host": 8,
        "nics_per_host": 8, "nic": {"bandwidth": "200Gbps"}, "uplink": {"bandwidth": "400Gbps"},
        "intra_host": {"bandwidth": "900GB/s"}}, "workload": "../workloads/mut.yaml"})

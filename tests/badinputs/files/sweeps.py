"""Bad-input cases: an experiment with variants (a sweep) whose input file is bad must stop like a bad
experiment file (exit 2, one message naming the file, no results directory), never run some variants and
write a results directory; a sweep whose runs fail for another reason exits 1 with a manifest that says
``failed``, never ``complete``."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.badinputs.files.moe import experiment
from tests.badinputs.harness import REPO, Case, Outcome

ERROR = frozenset({"error"})
#: A sweep some of whose runs failed: exit 1.
PARTIAL = frozenset({"error", "partial"})

#: Variants that change nothing about the files: each run reads the same file.
VARIANTS = [{"name": "a"}, {"name": "b", "seed": 2}]


def _shipped(name: str, **changes) -> str:
    """``experiments/NAME`` as YAML text with variants added and top-level keys changed."""
    data = yaml.safe_load((REPO / "experiments" / name).read_text())
    data.pop("sweep", None)
    data["variants"] = VARIANTS
    data.update(changes)
    return yaml.safe_dump(data, sort_keys=False)


def _nothing_written(names: tuple[str, ...], *needles: str):
    """A check: no results directory was created, and the message names the file (every needle)."""
    def check(cwd: Path, outcome: Outcome) -> str:
        made = [n for n in names if (cwd / "experiments" / "results" / n).exists() or (cwd / "results" / n).exists()]
        if made:
            return f"a results directory was written: {made}"
        missing = [s for s in needles if s not in outcome.stderr]
        return f"the message does not say {missing}" if missing else ""
    return check


def _bad_file_cases(surface: str, experiment: str, target: str, contents: dict[str, str | bytes],
                    name: str, needle: str) -> list[Case]:
    """A sweep of ``experiment`` whose input ``target`` (relative to experiments/) is each of ``contents``."""
    text = _shipped(experiment)
    cases = []
    for label, content in contents.items():
        files = {f"experiments/{target}": content, "experiments/sweep.yaml": text}
        for command in ("run", "sweep"):
            cases.append(Case(f"{surface}: {label} ({command} of a file with variants)", "sweeps",
                              [command, "experiments/sweep.yaml"], files, expect=ERROR, repo_files=True,
                              check=_nothing_written((name,), needle)))
    return cases


def _removed(rel: str):
    """A setup: remove ``rel`` (relative to the working directory)."""
    def setup(cwd: Path) -> None:
        p = cwd / rel
        if p.is_dir():
            for child in p.iterdir():
                child.unlink()
            p.rmdir()
        else:
            p.unlink()
    return setup


def _manifest_failed(cwd: Path, outcome: Outcome) -> str:
    """A check: exit 1, and the manifest says ``failed`` with the count, never ``complete``."""
    if outcome.exit_code != 1:
        return f"exit {outcome.exit_code}, not 1"
    found = list(cwd.glob("results/*/manifest.json"))
    if not found:
        return "no manifest written"
    m = json.loads(found[0].read_text())
    if m.get("status") != "failed" or m.get("complete") is not False or not m.get("counts", {}).get("failed"):
        return f"manifest says status {m.get('status')!r}, complete {m.get('complete')!r}, counts {m.get('counts')}"
    return ""


def cases() -> list[Case]:
    """This surface's cases."""
    out: list[Case] = []
    out += _bad_file_cases("route table", "routes-table.yaml", "routes-table.csv",
                           {"not CSV": b"\x00\x01\x02binary", "a row with a switch that does not exist":
                            "src,dst,channel,path\n7,8,0,leaf0 spine9 leaf1\n", "empty": ""},
                           "routes-table", "routes-table.csv")
    out += _bad_file_cases("job trace", "cluster-placement.yaml", "traces/hetero-small.csv",
                           {"not UTF-8": b"job,gpus\n\xff\xfe\n", "a header only": "job_id\n"},
                           "cluster-placement", "hetero-small.csv")
    out += _bad_file_cases("schedule", "schedule-replay.yaml", "traces/chakra-tp-dp/schedule.parquet",
                           {"not Parquet": "kind,conn\n0,1\n", "empty": b""},
                           "schedule-replay", "schedule.parquet")
    out += _bad_file_cases("chakra", "chakra-tp-dp.yaml", "traces/chakra-tp-dp/trace.0.et",
                           {"garbage": b"\xff" * 64, "empty": b""}, "chakra-tp-dp", "trace")
    sweep = _shipped("routes-table.yaml")
    for command in ("run", "sweep"):
        out.append(Case(f"route table missing ({command} of a file with variants)", "sweeps",
                        [command, "experiments/sweep.yaml"], {"experiments/sweep.yaml": sweep}, expect=ERROR,
                        repo_files=True, setup=_removed("experiments/routes-table.csv"),
                        check=_nothing_written(("routes-table",), "routes-table.csv")))
        out.append(Case(f"chakra trace folder missing ({command} of a file with variants)", "sweeps",
                        [command, "experiments/sweep.yaml"], {"experiments/sweep.yaml": _shipped("chakra-tp-dp.yaml")},
                        expect=ERROR, repo_files=True, setup=_removed("experiments/traces/chakra-tp-dp/trace.0.et"),
                        check=_nothing_written(("chakra-tp-dp",), "trace")))
    moe = {**yaml.safe_load(experiment("picks.csv")), "variants": VARIANTS}  # (the MoE corpus's job)
    moe_text = yaml.safe_dump(moe, sort_keys=False)
    for label, picks in {"a rank past ep": "step,src,dst,tokens\n0,0,9,100\n", "NaN tokens": "step,src,dst,tokens\n0,0,1,nan\n",
                         "no tokens column": "step,src,dst\n0,0,1\n", "not UTF-8": b"step,src\n\xff\n"}.items():
        for command in ("run", "sweep"):
            out.append(Case(f"moe matrix: {label} ({command} of a file with variants)", "sweeps",
                            [command, "exp.yaml"], {"exp.yaml": moe_text, "picks.csv": picks}, expect=ERROR,
                            check=_nothing_written(("moe-file",), "picks.csv")))
    # a run that fails for a reason no check can see before it runs: the sweep goes on, exit 1, manifest "failed"
    fails = {"name": "partly", "seed": 1,
             "topology": {"type": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2, "gpus_per_host": 4,
                          "nics_per_host": 4, "nic": {"bandwidth": "200Gbps"}, "uplink": {"bandwidth": "200Gbps"},
                          "intra_host": {"bandwidth": "900GB/s"}},
             "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "4MiB"},
             "variants": [{"name": "ok"}, {"name": "too-many-ranks", "workload": {"ranks": 64}}]}
    for command in ("run", "sweep"):
        out.append(Case(f"one variant invalid ({command}): exit 1, manifest failed", "sweeps",
                        [command, "exp.yaml"], {"exp.yaml": yaml.safe_dump(fails, sort_keys=False)},
                        expect=PARTIAL, check=_manifest_failed))
    return out

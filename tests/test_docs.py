"""The README, the docs/ pages and the shipped YAML stay runnable: docs and commands kept in step.

Every page is read the same way: Python blocks run, YAML blocks become experiments that
``netsim validate`` accepts (a fragment is merged into ring-allreduce.yaml first), a block that names a
shipped file matches it, and every ``netsim`` command shown names a real command with real options
and a file that exists; the quick ones run, the rest are checked with ``netsim validate``.
"""

import copy
import re
import shlex
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from netsim.cli import app
from netsim.config import parse_spec

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PAGES = {"README.md": README} | {str(p.relative_to(ROOT)): p.read_text()
                                 for p in sorted((ROOT / "docs").rglob("*.md"))}
RING = yaml.safe_load((ROOT / "experiments/ring-allreduce.yaml").read_text())
runner = CliRunner()


def _blocks(lang: str) -> list[tuple[str, int, str]]:
    """(page, index, text) of every ```lang block of every page."""
    return [(page, i, b) for page, text in PAGES.items()
            for i, b in enumerate(re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M))]


def _ids(blocks) -> list[str]:
    return [f"{page}:{i}" for page, i, _ in blocks]


def test_readme_opens_with_the_two_commands():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


def test_readme_stays_short():
    assert len(README.splitlines()) <= 300, "move reference material into docs/"


@pytest.mark.parametrize("page", ["README.md", "docs/fabrics.md"])
def test_topo_output_shown_is_the_golden_one(page):
    block = re.search(r"```\n\$ netsim topo topologies/leaf-spine-256.yaml\n(.*?)```", PAGES[page], re.S)
    assert block.group(1) == (ROOT / "tests/golden/topo-leaf-spine-256.txt").read_text()


def test_readme_architecture_is_the_one_in_the_docs():
    def block(text):
        return re.search(r"## Architecture\n\n```\n(.*?)```", text, re.S).group(1)
    assert block(README) == block(PAGES["docs/development.md"])


def test_readme_links_point_at_files():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if "://" not in target:
            assert (ROOT / target).is_file(), target


# ------------------------------------------------------------------ Python

# docs/extending.md's plugin registers a fabric family: tests/test_registries.py runs it in a subprocess.
PYTHON_BLOCKS = [b for b in _blocks("python") if "results/" not in b[2] and b[0] != "docs/extending.md"]


@pytest.mark.parametrize("page,i,block", PYTHON_BLOCKS, ids=_ids(PYTHON_BLOCKS))
def test_python_examples_run(page, i, block, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    exec(compile(block, page, "exec"), {})
    assert capsys.readouterr().out.strip(), "a docs example should print something"


# ------------------------------------------------------------------ YAML


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_experiment_validates(path):
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output


def test_the_annotated_experiment_file_is_ring_allreduce():
    block = re.search(r"```yaml\n(.*?)```", PAGES["docs/experiment-file.md"], re.S).group(1)
    assert parse_spec(yaml.safe_load(block)) == parse_spec(RING)


def _named_file(block: str) -> str | None:
    m = re.match(r"# ((?:experiments|topologies|workloads)/[\w.-]+\.yaml)", block)
    return m.group(1) if m else None


FILE_BLOCKS = [b for b in _blocks("yaml") if _named_file(b[2])]


@pytest.mark.parametrize("page,i,block", FILE_BLOCKS, ids=_ids(FILE_BLOCKS))
def test_yaml_blocks_naming_a_file_match_it(page, i, block):
    name = _named_file(block)
    shown, shipped = yaml.safe_load(block), yaml.safe_load((ROOT / name).read_text())
    if shown != shipped:  # equivalent spellings (256MiB vs 268435456) of a plain experiment
        assert parse_spec(shown) == parse_spec(shipped)


#: Keys of a topology section: a block made only of these is a fragment of ``topology:``.
TOPOLOGY_KEYS = {"nic", "host_nics", "uplink", "intra_host", "nic_overrides", "rail_optimized"}


def _experiments(block: str) -> list[dict]:
    """The experiments a YAML block stands for: itself when whole, else merged into ring-allreduce.yaml."""
    lines = [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    keys = [line.split(":")[0] for line in lines if not line.startswith(" ")]
    if len(keys) != len(set(keys)):  # alternatives for one key, one per line (NIC forms)
        return [e for line in lines for e in _experiments(line)]
    data = yaml.safe_load(block)
    if "name" in data and "topology" in data:
        return [data]
    exp = copy.deepcopy(RING)
    if set(data) <= TOPOLOGY_KEYS:
        exp["topology"].update(data)
        return [exp]
    if "jobs" in data or "cluster" in data:
        exp.pop("workload")
    exp.update(data)
    return [exp]


YAML_BLOCKS = [b for b in _blocks("yaml") if not _named_file(b[2])]


@pytest.mark.parametrize("page,i,block", YAML_BLOCKS, ids=_ids(YAML_BLOCKS))
def test_yaml_blocks_validate(page, i, block, tmp_path):
    # Relative paths in a block (../workloads/...) resolve as they would from experiments/.
    for shipped in ("topologies", "workloads"):
        (tmp_path / shipped).symlink_to(ROOT / shipped)
    (tmp_path / "experiments").mkdir()
    for csv in (ROOT / "experiments").glob("*.csv"):
        (tmp_path / "experiments" / csv.name).symlink_to(csv)
    (tmp_path / "experiments" / "traces").symlink_to(ROOT / "experiments" / "traces")
    for n, exp in enumerate(_experiments(block)):
        path = tmp_path / "experiments" / f"doc{n}.yaml"
        path.write_text(yaml.safe_dump(exp, sort_keys=False))
        result = runner.invoke(app, ["validate", str(path)])
        assert result.exit_code == 0, f"{page} yaml block {i}:\n{path.read_text()}\n{result.output}"


def test_csv_block_is_the_shipped_routes_table():
    block = re.search(r"```csv\n(.*?)```", PAGES["docs/cookbook/explicit-routes.md"], re.S).group(1)
    assert block == (ROOT / "experiments/routes-table.csv").read_text()


@pytest.mark.parametrize("page", sorted(PAGES))
def test_docs_cite_only_shipped_files(page):
    for name in set(re.findall(r"(?:experiments|topologies|workloads)/[\w.-]+\.(?:yaml|csv)", PAGES[page])):
        assert (ROOT / name).is_file(), f"{page}: {name}"


# ------------------------------------------------------------------ commands

def _commands() -> list[tuple[str, list[str]]]:
    """(page, argv) of every ``netsim ...`` line of the sh blocks (comments dropped)."""
    found = []
    for page, text in PAGES.items():
        for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
            for line in block.splitlines():
                line = line.strip()
                if line.startswith("netsim "):
                    found.append((page, shlex.split(line, comments=True)[1:]))
    return found


COMMANDS = _commands()
GROUP = typer.main.get_command(app)
#: ``netsim ...`` written inline in prose: checked for real commands, options and files, not run.
INLINE = sorted({(page, tuple(shlex.split(m)[1:])) for page, text in PAGES.items()
                 for m in re.findall(r"`(netsim [^`]*)`", text) if shlex.split(m)[1:]})


def _options(name: str) -> set[str]:
    cmd = GROUP.commands[name]
    return {"--help", *(o for p in cmd.params for o in [*p.opts, *getattr(p, "secondary_opts", [])])}


def _ids_cmd(commands) -> list[str]:
    return [f"{page}:{' '.join(argv)[:60]}" for page, argv in commands]


ALL_COMMANDS = COMMANDS + [(page, list(argv)) for page, argv in INLINE]


@pytest.mark.parametrize("page,argv", ALL_COMMANDS, ids=_ids_cmd(ALL_COMMANDS))
def test_commands_name_real_commands_options_and_files(page, argv):
    if argv[0].startswith("--"):
        assert argv[0] in {"--help", *(o for p in GROUP.params for o in p.opts)}, f"{page}: no option {argv[0]}"
        return
    assert argv[0] in GROUP.commands, f"{page}: no command netsim {argv[0]}"
    allowed = _options(argv[0])
    for token in argv[1:]:
        if token.lstrip("[").startswith("--"):
            token = token.lstrip("[").rstrip("]")
            assert token.split("=")[0] in allowed, f"{page}: netsim {argv[0]} has no option {token}"
        elif re.match(r"(experiments|topologies|workloads)/", token):
            assert (ROOT / token).is_file(), f"{page}: {token}"


def _validate_argv(argv: list[str]) -> list[str] | None:
    """``netsim validate`` of what a run / sweep / validate command would run, with its --set values."""
    if argv[0] not in ("run", "sweep", "validate"):
        return None
    out = ["validate", argv[1]]
    for flag, value in zip(argv, argv[1:]):
        if flag == "--set":
            out += ["--set", value]
    return out


VALIDATED = [(page, argv) for page, argv in COMMANDS if _validate_argv(argv)]


@pytest.mark.parametrize("page,argv", VALIDATED, ids=_ids_cmd(VALIDATED))
def test_experiment_commands_validate(page, argv, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = runner.invoke(app, _validate_argv(argv))
    assert result.exit_code == 0, f"{page}: netsim {' '.join(argv)}\n{result.output}"
    # what validate does not take: the sweep's --param axes and the --variant names
    from netsim.config import load_experiment
    from netsim.experiment.sweep import expand

    values = {flag: [v for f, v in zip(argv, argv[1:]) if f == flag] for flag in ("--set", "--param", "--variant")}
    runs = expand(load_experiment(argv[1], values["--set"], values["--param"]))
    assert not [r.error for r in runs if r.error], f"{page}: netsim {' '.join(argv)}"
    assert set(values["--variant"]) <= {r.variant for r in runs}, f"{page}: netsim {' '.join(argv)}"


QUICK = [(page, argv) for page, argv in COMMANDS if argv[0] in ("list", "topo")]


@pytest.mark.parametrize("page,argv", QUICK, ids=_ids_cmd(QUICK))
def test_quick_commands_run(page, argv, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    argv = [str(tmp_path / Path(a).name) if prev == "--draw" else a for prev, a in zip(["", *argv], argv)]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, f"{page}: netsim {' '.join(argv)}\n{result.output}"


RESULTS_BLOCKS = [b for b in _blocks("python") if "results/ring-allreduce/" in b[2]]


def test_ring_allreduce_runs_as_the_tour_says_and_its_results_read_as_shown(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "results/ring-allreduce"
    result = runner.invoke(app, ["run", "experiments/ring-allreduce.yaml", "--out", str(out), "--no-report"])
    assert result.exit_code == 0, result.output
    assert "allreduce/ring" in result.output and "297.8Gbps" in result.output
    for argv in (["results", str(out)], ["results", str(out), "--csv", str(tmp_path / "q.csv")], ["show", str(out)],
                 ["report", str(out), "--out", str(tmp_path / "q.html")]):  # as the docs show them
        result = runner.invoke(app, argv)
        assert result.exit_code == 0, f"netsim {' '.join(argv)}\n{result.output}"
    assert RESULTS_BLOCKS, "the results page shows how to read results/ring-allreduce"
    monkeypatch.chdir(tmp_path)
    for page, _, block in RESULTS_BLOCKS:
        exec(compile(block, page, "exec"), {})
        assert capsys.readouterr().out.strip(), page


#: Shown commands too slow for `make test` (the Ethereal paper's fabric takes minutes).
TOO_SLOW = {"experiments/spraying-vs-splitting.yaml", "experiments/ecmp-collisions-256.yaml"}
RUNS = list({tuple(argv): (page, argv) for page, argv in COMMANDS
             if argv[0] in ("run", "sweep") and argv[1] not in TOO_SLOW and "--resume" not in argv}.values())


@pytest.mark.slow
@pytest.mark.parametrize("page,argv", RUNS, ids=_ids_cmd(RUNS))
def test_run_and_sweep_commands_run(page, argv, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    argv = list(argv)
    if "--out" in argv:
        argv[argv.index("--out") + 1] = str(tmp_path / "out")
    else:
        argv += ["--out", str(tmp_path / "out")]
    result = runner.invoke(app, [*argv, "--no-report"])
    assert result.exit_code == 0, f"{page}: netsim {' '.join(argv)}\n{result.output}"

"""The README and the shipped YAML stay runnable: docs and commands kept in step."""

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netsim.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
runner = CliRunner()


def test_readme_opens_with_the_two_commands():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


PYTHON_BLOCKS = [b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "results/" not in b]


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"block{i}" for i in range(len(PYTHON_BLOCKS))])
def test_readme_python_examples_run(block, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    exec(compile(block, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip(), "a README example should print something"


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_experiment_validates(path):
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output


def test_readme_yaml_example_is_the_quickstart():
    block = re.search(r"```yaml\n(.*?)```", README, re.S).group(1)
    import yaml
    from netsim.config import parse_spec
    assert parse_spec(yaml.safe_load(block)) == parse_spec(yaml.safe_load((ROOT / "experiments/quickstart.yaml")
                                                                          .read_text()))


FILE_BLOCKS = [b for b in re.findall(r"```yaml\n(.*?)```", README, re.S) if re.match(r"# (experiments/\S+\.yaml)", b)]


@pytest.mark.parametrize("block", FILE_BLOCKS, ids=lambda b: re.match(r"# (\S+)", b).group(1))
def test_readme_yaml_blocks_naming_a_file_match_it(block):
    import yaml
    from netsim.config import parse_spec
    name = re.match(r"# (experiments/\S+\.yaml)", block).group(1)
    shown, shipped = yaml.safe_load(block), yaml.safe_load((ROOT / name).read_text())
    if shown != shipped:  # equivalent spellings (256MiB vs 268435456) of a plain experiment
        assert parse_spec(shown) == parse_spec(shipped)


def test_readme_cites_only_shipped_experiments():
    for name in set(re.findall(r"experiments/[\w.-]+\.yaml", README)):
        assert (ROOT / name).is_file(), name

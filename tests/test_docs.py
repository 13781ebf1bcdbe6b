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


@pytest.mark.parametrize("block", re.findall(r"```python\n(.*?)```", README, re.S)[-1:])
def test_readme_python_api_example_runs(block, capsys):
    exec(compile(block, "README.md", "exec"), {})
    assert "busbw" in capsys.readouterr().out


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

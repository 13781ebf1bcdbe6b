"""The import direction of the architecture (README, docs/development.md): simpy, yaml and plotly stay in their layers."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "netsim"

ALLOWED = {
    "simpy": ("engine", "collectives", "workload"),
    "yaml": ("config",),
    "plotly": ("report",),
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_third_party_modules_stay_in_their_layer(module):
    offenders = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if module in _imports(path) and rel.parts[0] not in ALLOWED[module]:
            offenders.append(str(rel))
    assert not offenders, f"{module} imported outside {ALLOWED[module]}: {offenders}"


def test_solver_is_pure():
    for path in (ROOT / "solver").rglob("*.py"):
        tree = ast.parse(path.read_text())
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not (_imports(path) & {"simpy", "pandas", "yaml"}), path
        assert all(not m.startswith("netsim") or m.startswith("netsim.solver") for m in modules), path


def test_every_module_opens_with_a_docstring():
    for path in ROOT.rglob("*.py"):
        assert ast.get_docstring(ast.parse(path.read_text())), f"{path} has no module docstring"

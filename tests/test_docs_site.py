"""The documentation site builds with ``mkdocs build --strict``: a broken link, anchor or page fails."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _build(root: Path, site: Path) -> subprocess.CompletedProcess:
    # not -q: a quiet build hides the warnings that --strict counts
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                           "-d", str(site)], check=False, cwd=root, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly_with_the_generated_references(tmp_path):
    result = _build(ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    cli = (tmp_path / "site/reference/cli/index.html").read_text()
    assert "netsim run" in cli and "--set" in cli
    config = (tmp_path / "site/reference/config/index.html").read_text()
    assert "completion_tolerance" in config and "LeafSpineSpec" in config
    assert not (tmp_path / "site/hooks.py").exists()


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    page = copy / "docs/index.md"
    page.write_text(page.read_text() + "\n[gone](no-such-page.md), [gone](concepts.md#no-such-heading)\n")
    result = _build(copy, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr and "#no-such-heading" in result.stderr

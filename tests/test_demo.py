"""The demo (issue 28): `make demo`'s experiment compares the policies on contended work, its numbers make
sense, the CLI prints the answer, and the dashboard opens with it (checked in a real browser).

The quickstart runs once per module (about a minute on 2 cores) through the CLI,
as `make demo` runs it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from netsim.cli import app
from netsim.report.answer import answer_sentences
from netsim.report.dashboard import n_figures
from tests.test_report_browser import browser, open_report  # noqa: F401 - the browser fixture

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """(results directory, CLI output) of the quickstart, run as `make demo` runs it."""
    out = tmp_path_factory.mktemp("demo") / "quickstart"
    result = CliRunner().invoke(app, ["run", str(QUICKSTART), "--out", str(out), "--force"])
    assert result.exit_code == 0, result.output
    return out, result.output


def _by_variant(out: Path) -> pd.DataFrame:
    runs = pd.read_parquet(out / "runs.parquet")
    colls = pd.read_parquet(out / "collectives.parquet")
    per_run = colls.groupby("run_id").agg(start=("start_s", "min"), end=("end_s", "max"))
    runs = runs.set_index("run_id").join(per_run)
    runs["time"] = runs["end"] - runs["start"]
    return runs.set_index("variant")


def test_the_demo_numbers_make_sense(demo):
    out, _ = demo
    v = _by_variant(out)
    assert (v["status"] == "ok").all()
    for work in ("ring", "alltoall"):
        ecmp = v.loc[f"{work}-ecmp", "time"]
        for policy in ("spray", "c4p", "ethereal"):
            assert v.loc[f"{work}-{policy}", "time"] <= ecmp * (1 + 1e-9), (work, policy)
        # the differences are clear, not noise: ECMP's collisions cost at least a quarter
        assert v.loc[f"{work}-spray", "time"] < 0.8 * ecmp
    assert v.loc["holmes", "time"] <= v.loc["random-placement", "time"]
    assert v.loc["holmes", "time"] < 0.5 * v.loc["random-placement", "time"]
    colls = pd.read_parquet(out / "collectives.parquet")
    assert not colls["below_bound"].any()
    assert (colls["duration_s"] >= colls["bound_s"] * (1 - 1e-9)).all()


def test_the_cli_prints_the_answer_and_where_the_dashboard_is(demo):
    out, output = demo
    flat = " ".join(output.split())
    sentences = answer_sentences(out)
    assert len(sentences) == 3  # ring, all-to-all, placement
    for text in sentences:
        assert " ".join(text.split()) in flat
    assert f"report: {out / 'report.html'}" in flat
    ring, alltoall, placement = sentences
    assert re.match(r"ring-ethereal, ring-spray and ring-c4p tied as fastest .*faster than ring-ecmp", ring)
    assert "switch-to-switch links" in ring and "Why:" in ring
    assert "faster than alltoall-ecmp" in alltoall
    assert placement.startswith("holmes was fastest") and "random-placement sent" in placement


def test_the_demo_dashboard_opens_with_the_answer(demo, browser):  # noqa: F811 - the fixture
    out, _ = demo
    report = out / "report.html"
    html = report.read_text()
    # one sentence per group before its chart; the manifest collapsed; run ids are not how runs are named
    assert html.count("<p class='answer'>") == 3
    assert "<details id='manifest'>" in html
    runs = pd.read_parquet(out / "runs.parquet")
    seen = open_report(browser, report, n_figures(out))
    assert not seen.problems(n_figures(out)), seen.problems(n_figures(out))
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(report.as_uri(), wait_until="load")
        first = page.locator("div.fig").first
        first.locator(".main-svg").first.wait_for(timeout=30_000)
        sentence = first.locator("p.answer")
        assert sentence.is_visible()
        assert sentence.inner_text() == answer_sentences(out)[0]
        title = first.locator(".gtitle").first.text_content()
        assert title.startswith("Time per routing against the lower bound")
        labels = first.locator(".ytick text").all_text_contents()
        assert set(labels) == {"ring-ecmp", "ring-ethereal", "ring-spray", "ring-c4p"}
        visible_text = page.locator("body").inner_text()
        assert not any(run_id in visible_text for run_id in runs["run_id"])
    finally:
        page.close()


def test_the_readme_picture_is_the_demo_as_it_is(demo):
    """docs/images/quickstart-answer.png is taken by `make docs` from the demo's dashboard; its record
    holds the sentences it shows, which must be the demo's sentences now."""
    out, _ = demo
    stamp = ROOT / "docs" / "images" / "quickstart-answer.json"
    picture = ROOT / "docs" / "images" / "quickstart-answer.png"
    assert picture.is_file() and picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "docs/images/quickstart-answer.png" in (ROOT / "README.md").read_text()
    recorded = json.loads(stamp.read_text())["sentences"]
    assert recorded == answer_sentences(out), "the README's picture is stale: run `make docs` to retake it"

"""report.html in a real browser (issues 8 and 24): every report kind renders offline, with no errors.

Each case writes a small results directory with the CLI (a collective run, a training run, several
training jobs, a run with a fault, a sweep, and a report made ``--self-contained``), opens its
``report.html`` from disk in headless Chromium (Playwright, system ``chromium``), blocks and records
every request that is not ``file:`` or ``data:``, and checks that: no console error, no uncaught
page error, no network request; as many ``.js-plotly-plot`` divs as ``n_figures(dir)``, each with
its rendered ``.main-svg``; no remote ``<script src>`` or stylesheet in the HTML. Reports load the
folder's one ``plotly.min.js`` by a relative ``<script src>`` (under 2 MB each), except the
self-contained one, which inlines it. A full-page screenshot of each report is saved to
``$NETSIM_ARTIFACTS`` (default ``test-artifacts/`` at the repository root).

Without Chromium (or Playwright) the tests are skipped, unless ``NETSIM_REQUIRE_BROWSER`` is set
(CI sets it): then they fail.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netsim.cli import app
from netsim.report.dashboard import n_figures

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "experiments"
RENDER_TIMEOUT_S = 30

SWEEP_YAML = """\
name: browser-sweep
seed: 3
topology:
  type: leaf_spine
  leaves: 2
  spines: 2
  hosts_per_leaf: 2
  gpus_per_host: 2
  nics_per_host: 2
  nic: {bandwidth: 200Gbps, latency: 1us}
  uplink: {bandwidth: 200Gbps, latency: 500ns}
  intra_host: {bandwidth: 900GB/s, latency: 300ns}
placement: {type: random, by: host}
workload: {type: collective, op: allreduce, algorithm: ring, size: 1MiB}
variants:
  - {name: ecmp, routing: ecmp}
  - {name: c4p, routing: c4p}
sweep:
  workload.size: [1MiB, 4MiB]
repeats: 2
"""

# case -> CLI arguments (before --out); "{tmp}" is the case's scratch directory.
CASES = {
    "collective": ["run", str(EXPERIMENTS / "ring-allreduce.yaml"), "--set", "workload.size=4MiB"],
    "faults": ["run", str(EXPERIMENTS / "link-failure.yaml"), "--variant", "ecmp", "--set", "workload.size=32MB",
               "--set", "workload.channels=1", "--set", "engine.ideal=false"],
    "self-contained": ["run", str(EXPERIMENTS / "ring-allreduce.yaml"), "--set", "workload.size=4MB",
                       "--no-report"],
    "sweep": ["sweep", "{tmp}/sweep.yaml", "--executor", "serial"],
    "training": ["run", str(EXPERIMENTS / "holmes-hetero.yaml"), "--variant", "holmes"],
    # job-a runs two iterations so the iteration-time line plot is on the page too
    "multijob": ["run", str(EXPERIMENTS / "c4p-multijob-training.yaml"), "--variant", "c4p",
                 "--set", "jobs.0.iterations=2", "--set", "jobs.1.iterations=1",
                 "--set", "jobs.2.iterations=1", "--set", "jobs.3.iterations=1"],
}

# Remote resources in the HTML itself (plotly.js is inlined; its source only mentions URLs in strings).
REMOTE_HTML = {
    "remote <script src>": re.compile(r"<script\b[^>]*\bsrc\s*=\s*['\"]?\s*(https?:)?//", re.IGNORECASE),
    "remote stylesheet <link>": re.compile(r"<link\b[^>]*\bhref\s*=\s*['\"]?\s*(https?:)?//", re.IGNORECASE),
    "remote @import": re.compile(r"@import\s+(url\()?\s*['\"]?\s*(https?:)?//", re.IGNORECASE),
}

# Records uncaught errors in the page, so the wait below ends early when the page is broken.
ERROR_HOOK = "window.__netsimErrors = 0; window.addEventListener('error', () => { window.__netsimErrors++; });"
RENDERED = """n => {
  const plots = document.querySelectorAll('.js-plotly-plot');
  const done = plots.length === n && Array.from(plots).every(p => p.querySelector('.main-svg'));
  return done || window.__netsimErrors > 0;
}"""
COUNTS = """() => {
  const plots = Array.from(document.querySelectorAll('.js-plotly-plot'));
  return [plots.length, plots.filter(p => {
    const svg = p.querySelector('.main-svg');
    if (!svg) return false;
    const box = svg.getBoundingClientRect();
    return box.width > 0 && box.height > 0;
  }).length];
}"""


def _unavailable(reason: str):
    """Skip, or fail when the environment says a browser is required (CI)."""
    if os.environ.get("NETSIM_REQUIRE_BROWSER", "") not in ("", "0"):
        pytest.fail(f"{reason} (NETSIM_REQUIRE_BROWSER is set, so this is an error)", pytrace=False)
    pytest.skip(f"{reason}; install the Debian package 'chromium' (and `pip install -e .[test]`) to run "
                f"the browser checks of report.html")


@pytest.fixture(scope="module")
def browser():
    executable = shutil.which("chromium")
    if executable is None:
        _unavailable("chromium is not installed (no 'chromium' on PATH)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the Python package playwright is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    out = Path(os.environ.get("NETSIM_ARTIFACTS") or REPO / "test-artifacts")
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def results(browser, tmp_path_factory):
    """``results(case)``: the case's results directory (with report.html), built once per module."""
    built: dict[str, Path] = {}

    def get(case: str) -> Path:
        if case not in built:
            tmp = tmp_path_factory.mktemp(f"report-{case}")
            (tmp / "sweep.yaml").write_text(SWEEP_YAML)
            out = tmp / "results"
            args = [a.replace("{tmp}", str(tmp)) for a in CASES[case]] + ["--out", str(out)]
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 0, f"netsim {' '.join(args)} failed:\n{result.output}"
            if case == "self-contained":
                result = CliRunner().invoke(app, ["report", str(out), "--self-contained"])
                assert result.exit_code == 0, result.output
            assert (out / "report.html").is_file()
            built[case] = out
        return built[case]

    return get


@dataclass
class Observed:
    """What a report did in the browser."""
    n_plots: int = 0
    n_rendered: int = 0
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    remote_html: list[str] = field(default_factory=list)
    timed_out: bool = False

    def problems(self, expected: int) -> list[str]:
        out = [f"{name} in the HTML" for name in self.remote_html]
        out += [f"console error: {m}" for m in self.console_errors]
        out += [f"page error: {m}" for m in self.page_errors]
        out += [f"network request (blocked): {u}" for u in self.blocked]
        if self.n_plots != expected:
            out.append(f"{self.n_plots} .js-plotly-plot elements, n_figures() = {expected}")
        if self.n_rendered != self.n_plots:
            out.append(f"only {self.n_rendered} of {self.n_plots} plots have a rendered, non-empty .main-svg")
        if self.timed_out:
            out.append(f"plots not all rendered within {RENDER_TIMEOUT_S} s")
        return out


def open_report(browser, report: Path, expected: int, screenshot: Path | None = None) -> Observed:
    """Open ``report`` offline, wait for ``expected`` rendered plots, record what went wrong."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    html = report.read_text(encoding="utf-8")
    seen = Observed(remote_html=[name for name, pattern in REMOTE_HTML.items() if pattern.search(html)])
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()

        def route(r):
            if r.request.url.startswith(("file:", "data:")):
                r.continue_()
            else:
                seen.blocked.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.on("console", lambda m: seen.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: seen.page_errors.append(str(e)))
        page.add_init_script(ERROR_HOOK)
        page.goto(report.as_uri(), wait_until="load", timeout=RENDER_TIMEOUT_S * 1000)
        try:
            page.wait_for_function(RENDERED, arg=expected, timeout=RENDER_TIMEOUT_S * 1000)
        except PlaywrightTimeout:
            seen.timed_out = True
        seen.n_plots, seen.n_rendered = page.evaluate(COUNTS)
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=True)
        page.wait_for_timeout(100)  # let late console messages arrive
    finally:
        context.close()
    return seen


@pytest.mark.parametrize("case", list(CASES))
def test_report_renders_offline_in_chromium(case, results, browser, artifacts):
    report_dir = results(case)
    expected = n_figures(report_dir)
    assert expected >= 1
    shot = artifacts / f"report-{case}.png"
    shot.unlink(missing_ok=True)
    page = (report_dir / "report.html").read_text(encoding="utf-8")
    if case == "self-contained":
        assert "<script src=" not in page and not (report_dir / "plotly.min.js").exists()
    else:
        assert "<script src='plotly.min.js'" in page and (report_dir / "plotly.min.js").is_file()
        assert (report_dir / "report.html").stat().st_size < 2 * 2**20
    seen = open_report(browser, report_dir / "report.html", expected, screenshot=shot)
    problems = seen.problems(expected)
    assert not problems, f"{case}: report.html in Chromium:\n  " + "\n  ".join(problems)
    assert seen.n_plots == expected
    assert shot.is_file() and shot.stat().st_size > 10_000, f"screenshot {shot} missing or trivial"


def test_the_check_catches_a_remote_script_and_a_js_error(results, browser, tmp_path):
    """Negative control: the same report with an external script, a remote stylesheet and a throw."""
    report_dir = results("collective")
    html = (report_dir / "report.html").read_text(encoding="utf-8")
    html = html.replace("<head>", "<head><script src=\"https://cdn.example/x.js\"></script>"
                                  "<link rel='stylesheet' href='https://cdn.example/x.css'>", 1)
    html = html.replace("</body>", "<script>throw new Error('injected failure')</script></body>", 1)
    broken = tmp_path / "report.html"
    broken.write_text(html, encoding="utf-8")
    shutil.copy(report_dir / "plotly.min.js", tmp_path / "plotly.min.js")
    expected = n_figures(report_dir)
    seen = open_report(browser, broken, expected)
    assert seen.remote_html == ["remote <script src>", "remote stylesheet <link>"]
    assert sorted(seen.blocked) == ["https://cdn.example/x.css", "https://cdn.example/x.js"]
    assert any("injected failure" in e for e in seen.page_errors)
    assert seen.console_errors  # the aborted loads
    assert seen.n_plots == expected  # the figures themselves still render
    assert len(seen.problems(expected)) >= 5


def test_the_check_catches_a_missing_plotly_js(results, browser, tmp_path):
    """Negative control: the shared-plotly report copied away from its plotly.min.js renders nothing."""
    report_dir = results("collective")
    lonely = tmp_path / "report.html"
    lonely.write_text((report_dir / "report.html").read_text(encoding="utf-8"), encoding="utf-8")
    expected = n_figures(report_dir)
    seen = open_report(browser, lonely, expected)
    assert seen.n_rendered == 0 and seen.problems(expected)

"""The pictures the README and docs show, made from real results by `make docs` (never drawn by hand).

    python docs/figures.py results/quickstart

opens ``results/quickstart/report.html`` in headless Chromium (Playwright, the system ``chromium``)
and saves its first panel (the answer sentence and the time-per-policy chart) as
``docs/images/quickstart-answer.png``, with ``quickstart-answer.json`` beside it: the sentences the
picture shows. ``tests/test_demo.py`` compares that file with the sentences of a fresh demo run, so a
picture that no longer matches the demo fails the suite (run ``make docs`` to regenerate it).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from netsim.experiment.outdir import write_file_atomically
from netsim.report.answer import answer_sentences

IMAGES = Path(__file__).resolve().parent / "images"
PICTURE = IMAGES / "quickstart-answer.png"
STAMP = IMAGES / "quickstart-answer.json"


def snapshot(results_dir: Path, picture: Path = PICTURE, stamp: Path = STAMP) -> Path:
    """Screenshot the first panel of ``results_dir``'s dashboard into ``picture``; record its sentences."""
    from playwright.sync_api import sync_playwright
    report = results_dir.resolve() / "report.html"
    if not report.is_file():
        raise SystemExit(f"{report} is missing: run `make demo` (or netsim run experiments/quickstart.yaml) first")
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("the docs pictures need the system Chromium (Debian package 'chromium')")
    picture.parent.mkdir(parents=True, exist_ok=True)
    tmp = picture.with_suffix(".tmp.png")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(report.as_uri(), wait_until="load")
            panel = page.locator("div.fig").first
            panel.locator(".main-svg").first.wait_for(timeout=30_000)
            panel.screenshot(path=str(tmp))
        finally:
            browser.close()
    tmp.replace(picture)
    record = {"results": results_dir.name, "sentences": answer_sentences(results_dir)}
    write_file_atomically(stamp, json.dumps(record, indent=2, ensure_ascii=False) + "\n", force=True)
    return picture


if __name__ == "__main__":
    print(snapshot(Path(sys.argv[1] if len(sys.argv) > 1 else "results/quickstart")))

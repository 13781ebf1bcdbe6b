"""The report page: figures, banners and the manifest as HTML, with one copy of plotly.js per results folder.

By default a report inside its results directory loads ``plotly.min.js`` from next to it (a relative
``<script src>``: it still opens offline, and a results folder holds one 4.5 MB copy, not one per
report). netsim writes that file only where it may: when it is absent, or when the results manifest
says netsim wrote it (then it is recorded in the manifest like the report). A report written
anywhere else, or asked to be ``self_contained``, inlines plotly.js instead.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from netsim.experiment.outdir import (
    MANIFEST,
    OutputError,
    add_files,
    owned_files,
    read_manifest,
    write_file_atomically,
)

#: The shared copy of plotly.js next to the reports of a results directory.
PLOTLY_JS = "plotly.min.js"
_STYLE = ("body{font-family:sans-serif;margin:2em} .fig{margin-bottom:2em} pre{background:#f4f4f4;padding:1em;"
          "overflow:auto} .warning{background:#fff3cd;padding:1em} details{margin-top:2em} "
          ".answer{font-size:1.15em;background:#eef6ee;border-left:4px solid #2e7d32;padding:0.6em 1em;"
          "max-width:70em}")


def page_html(title: str, figs: list[go.Figure], body_top: str = "", body_end: str = "",
              plotly_src: str | None = None) -> str:
    """A full HTML page of ``figs``; plotly.js from ``plotly_src`` (a relative URL) or inlined when None."""
    script = (f"<script src='{html.escape(plotly_src)}' charset='utf-8'></script>" if plotly_src
              else f"<script type='text/javascript'>{get_plotlyjs()}</script>")
    parts = [_intro(fig) + fig.to_html(full_html=False, include_plotlyjs=False, config={"responsive": True},
                                       default_height="480px" if i else None) for i, fig in enumerate(figs)]
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>netsim: {html.escape(title)}</title>{script}<style>{_STYLE}</style></head><body>"
            f"<h1>netsim — {html.escape(title)}</h1>" + body_top
            + "".join(f"<div class='fig'>{p}</div>" for p in parts) + body_end + "</body></html>")


def _intro(fig: go.Figure) -> str:
    """The sentence a figure carries in ``layout.meta["sentence"]``, as a paragraph above it."""
    meta = fig.layout.meta
    text = meta.get("sentence") if isinstance(meta, dict) else None
    return f"<p class='answer'>{html.escape(text)}</p>" if text else ""


def _netsim_wrote(directory: Path, name: str) -> bool:
    """True when ``directory``'s manifest lists ``name`` as written by netsim."""
    try:
        return name in owned_files(read_manifest(directory))
    except OutputError:
        return False


def _destination(directory: Path) -> Path:
    """Where ``directory`` ends up: the target of a run's staging directory (see
    :class:`netsim.experiment.outdir.Staging`), else itself."""
    match = re.fullmatch(r"\.(.+)\.netsim-tmp-.*", directory.name)
    if match and (directory / ".netsim-staging").is_file():
        return directory.parent / match.group(1)
    return directory


def shared_plotly(directory: Path) -> str | None:
    """Make sure ``directory/plotly.min.js`` is netsim's current copy; its relative URL, or None when
    netsim may not write it there (a file of that name netsim did not write: the report inlines plotly.js)."""
    final = _destination(directory)
    if final != directory and ((final / PLOTLY_JS).exists() or (final / PLOTLY_JS).is_symlink()) \
            and not _netsim_wrote(final, PLOTLY_JS):
        return None  # committing the staged copy would replace a file netsim did not write
    target = directory / PLOTLY_JS
    has_manifest = (directory / MANIFEST).is_file()
    if target.exists() or target.is_symlink():
        if not (has_manifest and _netsim_wrote(directory, PLOTLY_JS)):
            return None  # not ours: never overwritten
        if target.is_file() and not target.is_symlink() and target.stat().st_size == len(get_plotlyjs()):
            return PLOTLY_JS
    write_file_atomically(target, get_plotlyjs(), force=True)
    if has_manifest:
        add_files(directory, [PLOTLY_JS])
    return PLOTLY_JS

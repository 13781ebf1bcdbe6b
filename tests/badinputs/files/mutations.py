"""Seeded mutations of a CSV input file shared by the surfaces' corpora (``mutate_csv``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

#: A surface's own mutation: (lines, the chosen line, rng) -> (what was done, the file).
Own = Callable[[list[str], int, np.random.Generator], tuple[str, str | bytes]]


def mutate_csv(text: str, rng: np.random.Generator, odd: Sequence[str], inserted: Sequence[int],
               own: Sequence[Own], rows: Sequence[int] | None = None) -> tuple[str, str | bytes]:
    """(what was done, the mutated file) for one draw of ``rng``: a cell of line ``i`` (one of ``rows``,
    every line by default) set to one of ``odd``, the line repeated, deleted, the file truncated, one of
    the ``inserted`` bytes put anywhere, or one of the surface's ``own`` mutations of line ``i``."""
    lines = text.splitlines(keepends=True)
    rows = list(range(len(lines))) if rows is None else list(rows)
    op = int(rng.integers(5 + len(own)))
    i = rows[int(rng.integers(len(rows)))]
    if op == 0:
        cells = lines[i].rstrip("\n").split(",")
        k = int(rng.integers(len(cells)))
        cells[k] = odd[rng.integers(len(odd))]
        lines[i] = ",".join(cells) + "\n"
        return f"line {i + 1} field {k + 1} to {cells[k]!r}", "".join(lines)
    if op == 1:
        return f"duplicate line {i + 1}", "".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])
    if op == 2:
        return f"delete line {i + 1}", "".join(lines[:i] + lines[i + 1:])
    if op == 3:
        cut = int(rng.integers(len(text)))
        return f"truncate at {cut}", text[:cut]
    if op == 4:
        at = int(rng.integers(len(text)))
        byte = bytes([int(rng.choice(list(inserted)))])
        raw = text.encode()
        return f"insert byte {byte!r} at {at}", raw[:at] + byte + raw[at:]
    return own[op - 5](lines, i, rng)

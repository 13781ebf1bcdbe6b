"""NCCL-style double binary tree allreduce as a schedule builder: two complementary binary trees, half the data on each."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netsim.collectives.base import deps, end_of, per_rank, register_algorithm
from netsim.engine.model import ScheduleBuilder

#: Default pipelining chunk of the tree allreduce when the workload gives none (NCCL-like).
DEFAULT_TREE_CHUNK = 512 * 1024


def inorder_tree(n: int) -> list[int | None]:
    """Parent of every rank in the in-order binary tree over ranks ``0..n-1``.

    Rank r sits at position ``r + 1``; the root of every interval of positions is the one with the
    most trailing zero bits. Odd positions (even ranks) are exactly the leaves.

    Examples
    --------
    >>> inorder_tree(7)   # root is rank 3 (position 4)
    [1, 3, 1, None, 5, 3, 5]
    """
    parent: list[int | None] = [None] * n

    def build(lo: int, hi: int, up: int | None) -> None:
        if lo > hi:
            return
        root = max(range(lo, hi + 1), key=lambda p: (p & -p, -p))
        parent[root - 1] = None if up is None else up - 1
        build(lo, root - 1, root)
        build(root + 1, hi, root)

    build(1, n, None)
    return parent


def double_binary_trees(n: int) -> tuple[list[int | None], list[int | None]]:
    """The two trees (parent lists): in-order, and its mirror (even n) or its shift by one (odd n).

    For even n every rank is a leaf in one tree and interior in the other.
    """
    first = inorder_tree(n)
    if n % 2 == 0:
        mapping = [n - 1 - r for r in range(n)]
    else:
        mapping = [(r + 1) % n for r in range(n)]
    second: list[int | None] = [None] * n
    for r, p in enumerate(first):
        second[mapping[r]] = None if p is None else mapping[p]
    return first, second


def _children(parent: list[int | None]) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in parent]
    for r, p in enumerate(parent):
        if p is not None:
            kids[p].append(r)
    return kids


def _depths(parent: list[int | None]) -> np.ndarray:
    depth = np.full(len(parent), -1, dtype=np.int64)
    for r in range(len(parent)):
        path = []
        while r is not None and depth[r] < 0:
            path.append(r)
            r = parent[r]
        d = -1 if r is None else depth[r]
        for x in reversed(path):
            d += 1
            depth[x] = d
    return depth


def _one_tree(b: ScheduleBuilder, gpus: np.ndarray, parent: list[int | None], chunks: int, chunk: float,
              channel: int, job: int, comm: int, tcp: bool, ready: np.ndarray) -> np.ndarray:
    """Reduce up and broadcast down one tree; per rank, the task after which it holds the last reduced chunk."""
    n = len(parent)
    par = np.array([-1 if p is None else p for p in parent], dtype=np.int64)
    kids = np.full((n + 1, 2), n, dtype=np.int64)  # row/entry n: nobody
    for r, ks in enumerate(_children(parent)):
        kids[r, :len(ks)] = ks
    depth = _depths(parent)
    root = int(np.flatnonzero(par < 0)[0])
    # Up: every chunk of a rank leaves once that chunk has arrived from each of its children
    # (deepest ranks first, so a message's dependencies come before it).
    rows = np.array(sorted((r for r in range(n) if r != root), key=lambda r: (-depth[r], r)), dtype=np.int64)
    up = np.full((n + 1, chunks), -1, dtype=np.int64)
    up[rows] = np.arange(b.n_tasks, b.n_tasks + len(rows) * chunks).reshape(len(rows), chunks)
    conn = b.connect(gpus[rows], gpus[par[rows]], channel, job, comm, tcp)
    gate = np.broadcast_to(ready[rows, None], up[rows].shape)
    b.send(np.repeat(conn, chunks), chunk, after=deps(up[kids[rows, 0]].ravel(), up[kids[rows, 1]].ravel(),
                                                      gate.ravel()))
    # The root holds reduced chunk j once it has arrived from its children.
    have = np.full((n, chunks), -1, dtype=np.int64)
    have[root] = b.join(after=deps(up[kids[root, 0]], up[kids[root, 1]], np.full(chunks, ready[root])))
    # Down: a rank forwards chunk j to its children (in rank order) once it holds it.
    rows = np.array(sorted(rows.tolist(), key=lambda r: (depth[r], par[r], r)), dtype=np.int64)
    have[rows] = np.arange(b.n_tasks, b.n_tasks + len(rows) * chunks).reshape(len(rows), chunks)
    conn = b.connect(gpus[par[rows]], gpus[rows], channel, job, comm, tcp)
    b.send(np.repeat(conn, chunks), chunk, after=have[par[rows]].ravel())
    return have[:, -1]


@register_algorithm("tree", "allreduce")
def tree_allreduce(b: ScheduleBuilder, gpus: Sequence[int], size_bytes: float, *, channels: int = 1, job: int = 0,
                   comm: int = 0, chunk_bytes: float | None = None, tcp: bool = False,
                   ready: int | np.ndarray | None = None, gpu_host: Sequence[int] | None = None,
                   gpu_rail: Sequence[int] | None = None) -> np.ndarray:
    """Double binary tree allreduce (NCCL Tree): half the buffer per tree, reduce up then broadcast down.

    Each tree's half is cut into C chunks of about ``chunk_bytes`` (default 512 KiB) that flow up
    and down concurrently: a rank sends chunk j to its parent once chunk j has arrived from each
    of its children, the root holds it then, and a rank forwards chunk j to its children once it
    has arrived from its parent. ``channels`` splits each tree's half further over parallel copies
    (own connections: channel ``2c + t`` for copy c of tree t).

    On a non-blocking fabric the time is about ``2 h alpha + 2M/B`` for trees of height h, plus a
    pipeline fill of a few chunks (a rank is interior in one tree and a leaf in the other, so its
    ports carry both). The dependency critical path alone, every message alone at B and each
    connection sending its chunks one after another, is ``(C - 1 + 2h) c/B + 2h alpha`` for chunks
    of c = M/(2 channels C) and the taller tree's height h.

    Examples
    --------
    >>> b = ScheduleBuilder()
    >>> ends = tree_allreduce(b, [0, 1, 2, 3], 2e6, chunk_bytes=1e6)
    >>> b.build().n_sends   # per tree: 3 edges up and down, one chunk each
    12
    """
    n = len(gpus)
    ready = per_rank(ready, n)
    if n < 2:
        return ready
    chunk_size = chunk_bytes or DEFAULT_TREE_CHUNK
    half = size_bytes / 2 / channels
    chunks = max(1, math.ceil(half / chunk_size))
    gpu = np.asarray(gpus, dtype=np.int64)
    last = [_one_tree(b, gpu, parent, chunks, half / chunks, 2 * c + t, job, comm, tcp, ready)
            for t, parent in enumerate(double_binary_trees(n)) for c in range(channels)]
    return end_of(b, np.stack(last, axis=1))

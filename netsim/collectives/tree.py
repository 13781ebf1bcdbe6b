"""NCCL-style double binary tree allreduce: two complementary binary trees, half the data on each."""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence

import simpy

from netsim.collectives.base import Arrivals, register_algorithm
from netsim.engine import Fabric
from netsim.routing.base import Connection

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


def _reduce_up(fabric: Fabric, gpus: Sequence[int], r: int, parent: int | None, kids: list[int], chunks: int,
               chunk: float, up: Arrivals, down: Arrivals, channel: int, job: int,
               comm: int) -> Generator:
    conn = Connection(gpus[r], gpus[parent], channel, job, comm) if parent is not None else None
    for c in range(chunks):
        for k in kids:
            yield up.meet(r, (c, k))
        if parent is not None:
            fabric.send(gpus[r], gpus[parent], chunk, conn, event=up.meet(parent, (c, r)))
        else:
            down.meet(r, c).succeed()  # the root has the reduced chunk: its broadcast may start


def _broadcast_down(fabric: Fabric, gpus: Sequence[int], r: int, kids: list[int], chunks: int, chunk: float,
                    down: Arrivals, channel: int, job: int,
               comm: int) -> Generator:
    conns = {k: Connection(gpus[r], gpus[k], channel, job, comm) for k in kids}
    for c in range(chunks):
        yield down.meet(r, c)
        for k in kids:
            fabric.send(gpus[r], gpus[k], chunk, conns[k], event=down.meet(k, c))


@register_algorithm("tree", "allreduce")
def tree_allreduce(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], size_bytes: float, *,
                   channels: int = 1, job: int = 0, comm: int = 0, chunk_bytes: float | None = None) -> Generator:
    """Double binary tree allreduce (NCCL Tree): half the buffer per tree, reduce up then broadcast down.

    Each tree's half is cut into chunks of ``chunk_bytes`` (default 512 KiB) that flow up and down
    concurrently (a rank forwards chunk c as soon as it has it). Time on a non-blocking fabric is
    about ``2 h alpha + 2M/B`` for trees of depth h, plus a pipeline fill of a few chunks.
    ``channels`` splits each tree's half further over parallel copies (own connections).
    """
    n = len(gpus)
    if n < 2:
        return
    chunk_size = chunk_bytes or DEFAULT_TREE_CHUNK
    half = size_bytes / 2 / channels
    chunks = max(1, math.ceil(half / chunk_size))
    procs = []
    for t, parent in enumerate(double_binary_trees(n)):
        kids = _children(parent)
        for c in range(channels):
            up, down = Arrivals(env, n), Arrivals(env, n)
            ch = 2 * c + t
            for r in range(n):
                procs.append(env.process(_reduce_up(fabric, gpus, r, parent[r], kids[r], chunks, half / chunks, up,
                                                    down, ch, job, comm)))
                procs.append(env.process(_broadcast_down(fabric, gpus, r, kids[r], chunks, half / chunks, down, ch,
                                                         job, comm)))
    yield env.all_of(procs)

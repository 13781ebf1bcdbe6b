"""Max-min fair rates by bottleneck ordering, compiled with numba when it is installed.

Progressive filling raises every unfrozen flow together and rescans the whole incidence at each
saturation: O(levels x entries). The same allocation comes out of visiting links in the order
they saturate, with a heap: a link with capacity ``c``, load ``F`` from frozen flows and weight
``W`` of unfrozen ones fills at level ``(c - F) / W``; popping the lowest level freezes that link's
unfrozen flows at it and updates only the links those flows cross: O(entries x log links).

The kernel is compiled by numba (``cache=True``: once per machine) when numba is available and a run
is big enough to repay loading it (:mod:`netsim.solver.jit`); otherwise the same Python function runs
(slow, but identical). Without numba (or with ``NETSIM_NO_NUMBA``) the engine keeps using the numpy
:func:`~netsim.solver.maxmin.progressive_filling` for large components (see :data:`COMPILED`).
"""

from __future__ import annotations

import numpy as np

from netsim.solver import jit
from netsim.solver.jit import NO_REFCOUNT, njit

#: numba is there to compile the kernels (:data:`netsim.solver.jit.AVAILABLE`).
COMPILED = jit.AVAILABLE


# perf (compile time): kernels copy arrays element by element and pass counters that start at zero as
# ``np.int64(0)``. A slice assignment (``a[:n] = b``) makes numba compile its shape-mismatch message
# (string formatting: seconds per process), and a literal argument (``0``, a module constant) makes it
# compile the callee once more for that literal value.


@njit(cache=True, nogil=True)
def _copy(dst, start, src, n):
    """``dst[start:start + n] = src[:n]``."""
    for i in range(n):
        dst[start + i] = src[i]


@njit(cache=True, nogil=True)
def _copy_rows(dst, src, n):
    """``dst[:n] = src[:n]`` for 2-d arrays of as many columns."""
    for r in range(n):
        for c in range(src.shape[1]):
            dst[r, c] = src[r, c]


@njit(**NO_REFCOUNT)
def _heap_push(keys, vals, size, key, val):
    i = size
    keys[i] = key
    vals[i] = val
    while i > 0:
        parent = (i - 1) >> 1
        if keys[parent] <= keys[i]:
            break
        keys[parent], keys[i] = keys[i], keys[parent]
        vals[parent], vals[i] = vals[i], vals[parent]
        i = parent
    return size + 1


@njit(**NO_REFCOUNT)
def _heap_pop(keys, vals, size):
    key, val = keys[0], vals[0]
    size -= 1
    keys[0], vals[0] = keys[size], vals[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and keys[left + 1] < keys[left]:
            child = left + 1
        if keys[i] <= keys[child]:
            break
        keys[child], keys[i] = keys[i], keys[child]
        vals[child], vals[i] = vals[i], vals[child]
        i = child
    return key, val, size


@njit(cache=True, nogil=True)
def _order_by_cap(caps):
    """``np.argsort(caps, kind="mergesort")``: flows by cap, ties in index order. perf: only the
    finite caps are sorted, the infinite ones (most flows of a large component) follow in order."""
    n_inf = 0
    for f in range(caps.shape[0]):
        if caps[f] == np.inf:
            n_inf += 1
        elif not caps[f] < np.inf:  # NaN: numpy's order puts it after inf
            return np.argsort(caps, kind="mergesort")
    if n_inf == 0:
        return np.argsort(caps, kind="mergesort")
    finite = np.empty(caps.shape[0] - n_inf, np.int64)
    order = np.empty(caps.shape[0], np.int64)
    k = 0
    q = finite.shape[0]
    for f in range(caps.shape[0]):
        if caps[f] == np.inf:
            order[q] = f
            q += 1
        else:
            finite[k] = f
            k += 1
    _copy(order, 0, finite[np.argsort(caps[finite], kind="mergesort")], finite.shape[0])
    return order


@njit(cache=True, nogil=True)
def _bottleneck(entry_flow, entry_link, entry_weight, capacity, n_flows, caps, rtol):
    n_links = capacity.shape[0]
    n_entries = entry_flow.shape[0]
    # CSR both ways: flow -> (link, weight) entries and link -> flow entries.
    f_start = np.zeros(n_flows + 1, np.int64)
    l_start = np.zeros(n_links + 1, np.int64)
    for e in range(n_entries):
        f_start[entry_flow[e] + 1] += 1
        l_start[entry_link[e] + 1] += 1
    for i in range(n_flows):
        f_start[i + 1] += f_start[i]
    for i in range(n_links):
        l_start[i + 1] += l_start[i]
    f_fill = f_start[:-1].copy()
    l_fill = l_start[:-1].copy()
    f_link = np.empty(n_entries, np.int64)
    f_w = np.empty(n_entries, np.float64)
    l_flow = np.empty(n_entries, np.int64)
    unfrozen_w = np.zeros(n_links)
    for e in range(n_entries):
        f, link, w = entry_flow[e], entry_link[e], entry_weight[e]
        f_link[f_fill[f]] = link
        f_w[f_fill[f]] = w
        f_fill[f] += 1
        l_flow[l_fill[link]] = f
        l_fill[link] += 1
        unfrozen_w[link] += w
    frozen_load = np.zeros(n_links)
    level = np.full(n_links, np.inf)  # current fill level of each link (heap entries may be stale)
    heap_keys = np.empty(n_links + n_entries + 1)
    heap_vals = np.empty(n_links + n_entries + 1, np.int64)
    for f in range(n_flows):
        if f_start[f] == f_start[f + 1] and not caps[f] < np.inf:
            raise ValueError("a flow that crosses no link needs a finite rate cap")
    # perf: a link crossed once fills exactly when its one flow reaches capacity / weight: that
    # is a cap on the flow, and the heap keeps only shared links (most links, when flows spread
    # over many paths). Same rates: the flow freezes at the same value either way.
    caps = caps.copy()
    shared = np.zeros(n_links, np.bool_)
    size = np.int64(0)
    for link in range(n_links):
        if unfrozen_w[link] <= 0:
            continue
        if l_start[link + 1] - l_start[link] == 1:
            solo = max(capacity[link], 0.0) / unfrozen_w[link]
            f = l_flow[l_start[link]]
            if solo < caps[f]:
                caps[f] = solo
            unfrozen_w[link] = 0.0
        else:
            shared[link] = True
            level[link] = max(capacity[link], 0.0) / unfrozen_w[link]
            size = _heap_push(heap_keys, heap_vals, size, level[link], link)
    rate = np.zeros(n_flows)
    frozen = np.zeros(n_flows, np.bool_)
    by_cap = _order_by_cap(caps)
    next_cap = 0
    live = n_flows
    t = 0.0
    while live > 0:
        while next_cap < n_flows and frozen[by_cap[next_cap]]:
            next_cap += 1
        cap_level = caps[by_cap[next_cap]] if next_cap < n_flows else np.inf
        # Stale heap entries: a link with no unfrozen flow is dropped; one whose level rose since
        # (levels only rise: freezing a flow at t <= a link's level leaves it at least as high)
        # goes back in at its current level. The top is then the lowest level of all.
        while size > 0 and (heap_keys[0] != level[heap_vals[0]] or unfrozen_w[heap_vals[0]] <= 0):
            _k, stale, size = _heap_pop(heap_keys, heap_vals, size)
            if unfrozen_w[stale] > 0 and level[stale] < np.inf:
                size = _heap_push(heap_keys, heap_vals, size, level[stale], stale)
        link_level = heap_keys[0] if size > 0 else np.inf
        if cap_level <= link_level:
            # A flow reaching its cap first freezes alone (on a tie, the link follows at once).
            f = by_cap[next_cap]
            t = max(t, cap_level)
            members = np.empty(1, np.int64)
            members[0] = f
        else:
            _k, link, size = _heap_pop(heap_keys, heap_vals, size)
            t = max(t, link_level)
            count = 0
            members = np.empty(l_start[link + 1] - l_start[link], np.int64)
            for k in range(l_start[link], l_start[link + 1]):
                g = l_flow[k]
                if not frozen[g]:
                    members[count] = g
                    count += 1
            members = members[:count]
            unfrozen_w[link] = 0.0
        for g in members:
            if frozen[g]:
                continue
            frozen[g] = True
            live -= 1
            r = min(t, caps[g])
            rate[g] = r
            for k in range(f_start[g], f_start[g + 1]):
                other = f_link[k]
                if not shared[other]:
                    continue
                w = f_w[k]
                frozen_load[other] += w * r
                unfrozen_w[other] -= w
                if unfrozen_w[other] > 1e-12 * w:
                    new = (capacity[other] - frozen_load[other]) / unfrozen_w[other]
                    if new < t:
                        new = t  # rounding: a level never goes below the current one
                    if new < level[other]:  # rounding only: keep every heap key a lower bound
                        size = _heap_push(heap_keys, heap_vals, size, new, other)
                    level[other] = new  # perf: else its heap entry, lower, is refreshed when it surfaces
                else:
                    unfrozen_w[other] = 0.0
                    level[other] = np.inf
    return rate


def bottleneck_filling(entry_flow: np.ndarray, entry_link: np.ndarray, entry_weight: np.ndarray,
                       capacity_Bps: np.ndarray, n_flows: int, cap_Bps: np.ndarray | None = None,
                       rtol: float = 1e-9) -> np.ndarray:
    """Max-min fair rates, the allocation of :func:`~netsim.solver.maxmin.progressive_filling`, by
    visiting links in the order they saturate (a heap): O(entries x log links) instead of
    O(levels x entries). Compiled by numba when available (:data:`COMPILED`).

    Same parameters and result as :func:`~netsim.solver.maxmin.progressive_filling`.

    Examples
    --------
    >>> bottleneck_filling(np.array([0, 1, 1]), np.array([0, 0, 1]), np.ones(3),
    ...                    np.array([10.0, 2.0]), 2).tolist()
    [8.0, 2.0]
    """
    jit.compile_kernels()  # (a no-op after the first call, or without numba)
    caps = np.full(n_flows, np.inf) if cap_Bps is None else np.asarray(cap_Bps, dtype=np.float64)
    return _bottleneck(np.asarray(entry_flow, dtype=np.int64), np.asarray(entry_link, dtype=np.int64),
                       np.asarray(entry_weight, dtype=np.float64), np.asarray(capacity_Bps, dtype=np.float64),
                       int(n_flows), caps, float(rtol))


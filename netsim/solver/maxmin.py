"""Max-min fair rate allocation by progressive filling: a pure function over numpy arrays."""

from __future__ import annotations

import math

import numpy as np


def progressive_filling(entry_flow: np.ndarray, entry_link: np.ndarray, entry_weight: np.ndarray,
                        capacity_Bps: np.ndarray, n_flows: int, cap_Bps: np.ndarray | None = None,
                        rtol: float = 1e-9) -> np.ndarray:
    """Max-min fair rates of ``n_flows`` flows over links, by progressive (water) filling.

    The incidence is given as parallel arrays, one entry per (flow, link) pair: flow ``f`` puts a
    load of ``entry_weight * rate[f]`` on link ``entry_link`` (weights below 1 model a flow split
    over several paths with fixed fractions). All unfrozen flows grow at the same speed; a link
    that fills freezes every flow crossing it, a flow that reaches its cap freezes itself. The
    result is the unique max-min fair allocation: no link is over capacity and every flow is at its
    cap or crosses a saturated link on which no flow has a higher rate.

    Parameters
    ----------
    entry_flow, entry_link, entry_weight:
        The flow x link incidence (local indices ``0..n_flows-1`` and ``0..len(capacity_Bps)-1``;
        weights > 0). A (flow, link) pair should appear once.
    capacity_Bps:
        Capacity of each link.
    n_flows:
        Number of flows.
    cap_Bps:
        Optional per-flow rate caps (``inf`` for none). A flow crossing no link must have a cap.
    rtol:
        Relative tolerance under which a link counts as full.

    Returns
    -------
    numpy.ndarray
        Rate of each flow in bytes/s. Inputs are not modified.

    Examples
    --------
    Two flows share link 0 (10 B/s); flow 1 also crosses link 1 (2 B/s):

    >>> progressive_filling(np.array([0, 1, 1]), np.array([0, 0, 1]), np.ones(3),
    ...                     np.array([10.0, 2.0]), 2).tolist()
    [8.0, 2.0]
    """
    n_links = len(capacity_Bps)
    caps = np.full(n_flows, np.inf) if cap_Bps is None else np.asarray(cap_Bps, dtype=np.float64)
    rate = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=bool)
    remaining = np.array(capacity_Bps, dtype=np.float64)
    # Flows that cross no link are limited only by their caps.
    touches = np.zeros(n_flows, dtype=bool)
    touches[entry_flow] = True
    if np.any(~touches & ~np.isfinite(caps)):
        raise ValueError("a flow that crosses no link needs a finite rate cap")
    while not frozen.all():
        live = ~frozen[entry_flow]
        load_w = np.bincount(entry_link[live], weights=entry_weight[live], minlength=n_links)
        used = load_w > 0
        link_delta = np.full(n_links, np.inf)
        link_delta[used] = remaining[used] / load_w[used]
        i_link = int(np.argmin(link_delta))
        delta = link_delta[i_link]
        headroom = np.where(frozen, np.inf, caps - rate)
        i_flow = int(np.argmin(headroom))
        delta = min(delta, headroom[i_flow])
        delta = max(delta, 0.0)
        rate[~frozen] += delta
        remaining -= delta * load_w
        # CORRECTNESS: freeze at least the arg-min link or flow so the loop always terminates.
        full = used & (remaining <= rtol * capacity_Bps)
        if delta == link_delta[i_link]:
            full[i_link] = True
        newly = np.zeros(n_flows, dtype=bool)
        newly[entry_flow[live & full[entry_link]]] = True
        newly |= ~frozen & (rate >= caps * (1 - rtol))
        if delta == headroom[i_flow]:
            newly[i_flow] = True
        frozen |= newly
    return rate


def progressive_filling_lists(flow_links: list[list[int]], flow_weights: list[list[float]],
                              capacity_Bps: dict[int, float] | list[float], caps_Bps: list[float],
                              rtol: float = 1e-9) -> list[float]:
    """The same allocation as :func:`progressive_filling`, on Python lists, for small problems.

    # perf: for components of a few flows, numpy's per-call overhead dominates; plain Python
    # loops over a handful of links are several times faster. Same algorithm and tie rules.

    Parameters
    ----------
    flow_links, flow_weights:
        Per flow, its links (any hashable ids indexing ``capacity_Bps``) and weights.
    capacity_Bps:
        Capacity per link id.
    caps_Bps:
        Per-flow rate caps (``inf`` for none).
    """
    n = len(flow_links)
    rate = [0.0] * n
    frozen = [False] * n
    live = n
    for f in range(n):
        if not flow_links[f] and caps_Bps[f] == math.inf:
            raise ValueError("a flow that crosses no link needs a finite rate cap")
    remaining: dict = {}
    for links in flow_links:
        for link in links:
            remaining[link] = capacity_Bps[link]
    while live:
        load: dict = {}
        for f in range(n):
            if not frozen[f]:
                for link, w in zip(flow_links[f], flow_weights[f]):
                    load[link] = load.get(link, 0.0) + w
        link_delta, i_link = math.inf, None
        for link, w in load.items():
            d = remaining[link] / w
            if d < link_delta:
                link_delta, i_link = d, link
        flow_delta, i_flow = math.inf, None
        for f in range(n):
            if not frozen[f]:
                h = caps_Bps[f] - rate[f]
                if h < flow_delta:
                    flow_delta, i_flow = h, f
        delta = max(min(link_delta, flow_delta), 0.0)
        full = set()
        for link, w in load.items():
            remaining[link] -= delta * w
            if remaining[link] <= rtol * capacity_Bps[link]:
                full.add(link)
        # CORRECTNESS: freeze at least the arg-min link or flow so the loop always terminates.
        if i_link is not None and delta == link_delta:
            full.add(i_link)
        for f in range(n):
            if not frozen[f]:
                rate[f] += delta
        for f in range(n):
            if not frozen[f] and ((f == i_flow and delta == flow_delta) or rate[f] >= caps_Bps[f] * (1 - rtol)
                                  or any(link in full for link in flow_links[f])):
                frozen[f] = True
                live -= 1
    return rate


def progressive_filling_py(entry_flow: np.ndarray, entry_link: np.ndarray, entry_weight: np.ndarray,
                           capacity_Bps: np.ndarray, n_flows: int, cap_Bps: np.ndarray | None = None,
                           rtol: float = 1e-9) -> np.ndarray:
    """:func:`progressive_filling_lists` behind the array signature of :func:`progressive_filling`."""
    flow_links: list[list[int]] = [[] for _ in range(n_flows)]
    flow_weights: list[list[float]] = [[] for _ in range(n_flows)]
    for f, link, w in zip(entry_flow.tolist(), entry_link.tolist(), entry_weight.tolist()):
        flow_links[f].append(link)
        flow_weights[f].append(w)
    caps = [math.inf] * n_flows if cap_Bps is None else [float(c) for c in cap_Bps]
    return np.array(progressive_filling_lists(flow_links, flow_weights, list(map(float, capacity_Bps)), caps, rtol))

"""The compiled flow table: per-flow rate state and the flow/link incidence as numpy arrays.

The :class:`~netsim.engine.fabric.Fabric` keeps one Python object per message for its bookkeeping
(routes, sub-flows, records), but the hot path of every instant runs here, in one numba call:
remove the flows that drained, add the flows that start, find what these changes touch in the
contention graph, bring those flows' remaining bytes up to now, solve their max-min rates
(:func:`netsim.solver.bottleneck._bottleneck`), account every link whose load changed (busy time,
peak) and return the next completion time. A second call drains the flows that finish within the
completion tolerance. Same allocation as the Python path (which remains the engine when numba is
missing, and the reference the tests compare against), at a fraction of the per-flow cost.

**Exact pruning.** Max-min rates come out of progressive filling, which raises every rate together
and freezes flows as links fill, level by level. A change cannot alter anything below the first
level where it is felt: a removed flow was growing with everyone up to its own rate and crossed no
link that filled earlier; an added flow can fill one of its links no earlier than that link's equal
share, capacity / (total weight on it). Below the lowest such level the filling runs as before, so
every flow frozen there keeps its rate exactly. Only flows at or above it (and new ones) are
re-solved, on the capacity the others leave, and only where they connect to a changed link.
Faults and reroutes re-solve whole components.

**Private links.** A link that one flow alone crosses (most of them, when adaptive routing spreads
a message over several paths) joins no component: it caps that flow at capacity / weight, the
value the solver would give it, and is accounted with the flow's new rate.

Layout: flow ``slot`` has ``nl[slot]`` links in ``links[slot, :nl]`` with weights ``w[slot, :nl]``
and its position in each link's row ``pos[slot, :nl]``; link ``l`` has ``cnt[l]`` flows in
``rows[l, :cnt]`` with their weights in ``roww[l, :cnt]``. ``num[slot]`` holds (cap, rate,
remaining, updated at, finish time, fid). Slots, rows and widths grow by doubling.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from netsim.solver import jit
from netsim.solver.bottleneck import _bottleneck, _copy, _heap_pop, _heap_push
from netsim.solver.jit import NO_REFCOUNT, njit

CAP, RATE, REM, UPD, FIN, FID, BYTES, DELAY = range(8)
#: Group row of a slot (``slot_int[GRP]``): 0 for a whole message, g + 1 for a piece of message
#: group g still in flight, -1 for a piece that drained (until the next flush removes it).
GRP = 3
#: Successor row (``slot_int[SUCC]``): 1 when the flow's completion may start another message at
#: once (one is queued behind it on its connection): its drain cannot also re-solve (see drain).
SUCC = 4


@njit(cache=True, nogil=True)
def _flush_kernel(slot_int, links, w, pos, num, rows, roww, link_int, link_flt, scratch, hkeys, hvals, stats,
                  removes, add_int, add_links, add_w, add_num, bulk, piece_fd, groups, extra_seeds, now, rtol, prune):
    """Apply removes and adds, re-solve what they touch and account the links whose load changed
    (``load``, ``busy``, ``link_t``, ``peak``); returns (n_out, next finish time) with those links in
    ``out_links`` and the interval each closed (start ``out_t0``, load ``out_old``), or
    (-needed row width, inf) without changing anything if a link's row is too narrow.

    With ``prune``, only flows at or above the level where the change can first matter are
    re-solved (see :class:`FlowTable`); the others keep their rates and count as fixed load.
    """
    # perf: few arguments (numba unboxes each one on every call); the named rows are views
    nl, stamp_f, stamp_new, grp, succ = slot_int[0], slot_int[1], slot_int[2], slot_int[GRP], slot_int[SUCC]
    cnt, stamp_l, local, out_links = link_int[0], link_int[1], link_int[2], link_int[3]
    capacity, load, nominal, busy, link_t, peak = (link_flt[0], link_flt[1], link_flt[2], link_flt[3], link_flt[4],
                                                   link_flt[5])
    out_t0, out_old, kept, cap_local, loads = link_flt[6], link_flt[7], link_flt[8], link_flt[9], link_flt[10]
    add_slots, add_nl = add_int[0], add_int[1]
    width = rows.shape[1]
    # Phase 0: room for the adds (ignoring the removes: conservative).
    for i in range(add_links.shape[0]):
        local[add_links[i]] += 1
    needed = 0
    for i in range(add_links.shape[0]):
        link = add_links[i]
        if local[link] > 0:
            if cnt[link] + local[link] > width and cnt[link] + local[link] > needed:
                needed = cnt[link] + local[link]
            local[link] = 0
    if needed:
        return -needed, np.inf
    stamp = stats[0] + 1
    stats[0] = stamp
    n_seeds = np.int64(0)
    # perf: scratch arrays live in the table (fresh ones of the links' size per call cost page faults)
    seeds = scratch[0]
    comp = scratch[1]
    stack = scratch[2]
    comp_links = scratch[3]
    # The level below which nothing changes: a removed flow's rate; for added flows, the equal
    # share of each link they cross (a link's load at level t is at most t x its weight);
    # anything else (faults, reroutes: extra seeds) can change every level.
    level = np.inf if prune and extra_seeds.shape[0] == 0 else 0.0
    for i in range(extra_seeds.shape[0]):
        n_seeds = _seed(extra_seeds[i], seeds, n_seeds, stamp_l, -stamp)
    # Phase 1: removes (swap the last flow of each row into the hole)
    n_seeds, level = _remove(removes, nl, links, pos, rows, roww, cnt, local, grp, succ, num, seeds, n_seeds, level,
                             stamp_l, -stamp)
    # Phase 2: adds: whole messages, then the pieces of the split messages in ``bulk``
    n_seeds = _add(add_slots, add_nl, add_links, add_w, add_num, bulk, piece_fd, groups, links, w, pos, rows, roww,
                   cnt, seeds, n_seeds, nl, num, grp, stamp_new, stamp, now, stamp_l)
    if level > 0.0:
        for i in range(add_links.shape[0]):
            link = add_links[i]
            if local[link] != 0:
                continue  # perf: a link several added flows cross (a split message's NIC port) once
            local[link] = 1
            total = 0.0
            for j in range(cnt[link]):
                total += roww[link, j]
            share = capacity[link] / total
            level = min(level, share)
        for i in range(add_links.shape[0]):
            local[add_links[i]] = 0
    # Flows below the level keep their rates (margin: the solver's tolerance).
    keep_below = level * (1.0 - 1e-7) if level > 0.0 else 0.0
    # Phase 3: the parts of the contention graph the seeds touch, each solved whole.
    n_out = np.int64(0)
    for si in range(n_seeds):
        seed = seeds[si]
        if stamp_l[seed] == stamp:
            continue
        stamp_l[seed] = stamp
        if cnt[seed] == 0:
            if load[seed] != 0.0:
                n_out = _account(seed, 0.0, now, load, nominal, busy, link_t, peak, out_links, out_t0, out_old,
                                 n_out)
            continue
        n, n_links = _component(seed, stamp, keep_below, stack, comp, comp_links, rows, roww, cnt, nl, links, num,
                                stamp_f, stamp_l, stamp_new, local, kept, cap_local, loads, capacity)
        # Private links (cnt 1) are not in the component: their capacity / weight caps their flow
        # (what the solver would make of them too, to the bit).
        n_entries = 0
        for i in range(n):
            f = comp[i]
            rem = num[f, REM] - num[f, RATE] * (now - num[f, UPD])
            num[f, REM] = max(0.0, rem)
            num[f, UPD] = now
            for k in range(nl[f]):
                if cnt[links[f, k]] > 1:
                    n_entries += 1
        if n == 1:
            f = comp[0]
            rate = num[f, CAP]
            for k in range(nl[f]):
                link = links[f, k]
                residual = cap_local[local[link]] if cnt[link] > 1 else max(capacity[link], 0.0)
                solo = residual / w[f, k]
                rate = min(rate, solo)
            num[f, RATE] = rate
        elif n > 1:
            ef = np.empty(n_entries, np.int64)
            el = np.empty(n_entries, np.int64)
            ew = np.empty(n_entries)
            caps = np.empty(n)
            e = 0
            for i in range(n):
                f = comp[i]
                cap = num[f, CAP]
                for k in range(nl[f]):
                    link = links[f, k]
                    if cnt[link] > 1:
                        ef[e] = i
                        el[e] = local[link]
                        ew[e] = w[f, k]
                        e += 1
                    elif w[f, k] > 0.0:
                        solo = max(capacity[link], 0.0) / w[f, k]
                        cap = min(cap, solo)
                caps[i] = cap
            rates = _bottleneck(ef, el, ew, cap_local[:n_links].copy(), n, caps, rtol)
            for i in range(n):
                num[comp[i], RATE] = rates[i]
            stats[1] += 1
        stats[2] += n
        stats[3] = max(stats[3], n)
        for i in range(n):
            f = comp[i]
            rate = num[f, RATE]
            # CORRECTNESS: a piece whose share of a tiny message rounds to 0 bytes is done now (on a down link too)
            fin = now + num[f, REM] / rate if rate > 0.0 else (now if num[f, REM] <= 0.0 else np.inf)
            num[f, FIN] = fin
            if fin < np.inf:
                _push_finish(num, hkeys, hvals, stats, fin, f)
            for k in range(nl[f]):
                link = links[f, k]
                if cnt[link] > 1:
                    loads[local[link]] += w[f, k] * rate
                elif w[f, k] * rate != load[link]:
                    n_out = _account(link, w[f, k] * rate, now, load, nominal, busy, link_t, peak, out_links, out_t0,
                                     out_old, n_out)
        for j in range(n_links):
            link = comp_links[j]
            local[link] = 0
            if cnt[link] == 1 and stamp_f[rows[link, 0]] == stamp:
                continue  # a seed private to a solved flow: accounted with it above
            if loads[j] != load[link]:  # an unchanged load needs no accounting
                n_out = _account(link, loads[j], now, load, nominal, busy, link_t, peak, out_links, out_t0, out_old,
                                 n_out)
    return n_out, _next(num, hkeys, hvals, stats)


@njit(**NO_REFCOUNT)
def _remove(removes, nl, links, pos, rows, roww, cnt, local, grp, succ, num, seeds, n_seeds, level, stamp_l, mark):
    """Take the flows ``removes`` off their links' rows (swapping each row's last flow into the hole),
    seeding their links; returns (seeds, level). perf: a row the removes empty ends empty in any
    order: marked -1 in ``local``, it only counts down (a split message's pieces leave their NIC
    port and most core links all together)."""
    if removes.shape[0] > 1:
        for r in removes:
            for k in range(nl[r]):
                local[links[r, k]] += 1
        for r in removes:
            for k in range(nl[r]):
                link = links[r, k]
                if local[link] > 0:
                    local[link] = -1 if local[link] == cnt[link] else 0
    for r in removes:
        level = min(level, num[r, RATE])
        for k in range(nl[r]):
            link = links[r, k]
            n_seeds = _seed(link, seeds, n_seeds, stamp_l, mark)
            c = cnt[link] - 1
            if local[link] < 0:
                cnt[link] = c
                if c == 0:
                    local[link] = 0
                continue
            p = pos[r, k]
            last = rows[link, c]
            if last != r:
                rows[link, p] = last
                roww[link, p] = roww[link, c]
                for kk in range(nl[last]):
                    if links[last, kk] == link:
                        pos[last, kk] = p
                        break
            cnt[link] = c
        nl[r] = 0
        grp[r] = 0
        succ[r] = 0
        num[r, RATE] = 0.0
        num[r, FIN] = np.inf
    return n_seeds, level


@njit(**NO_REFCOUNT)
def _add(add_slots, add_nl, add_links, add_w, add_num, bulk, piece_fd, groups, links, w, pos, rows, roww, cnt, seeds,
         n_seeds, nl, num, grp, stamp_new, stamp, now, stamp_l):
    """Put the added flows on their links: whole messages (``add_num``: cap, remaining, fid, bytes),
    then the pieces of the split messages in ``bulk`` (k, cap, size, first fid, group), each a
    fraction of its message; returns the seed count."""
    off = np.int64(0)
    n_single = add_num.shape[1]
    for i in range(n_single):
        s = add_slots[i]
        n = add_nl[i]
        n_seeds = _insert(s, n, off, add_links, add_w, links, w, pos, rows, roww, cnt, seeds, n_seeds, stamp_l, -stamp)
        nl[s] = n
        num[s, CAP] = add_num[0, i]
        num[s, RATE] = 0.0
        num[s, REM] = add_num[1, i]
        num[s, UPD] = now
        num[s, FIN] = np.inf
        num[s, FID] = add_num[2, i]
        num[s, BYTES] = add_num[3, i]
        num[s, DELAY] = 0.0
        grp[s] = 0
        stamp_new[s] = stamp
        off += n
    i = n_single
    for b in range(bulk.shape[1]):
        k = int(bulk[0, b])
        cap, size, fid0, g = bulk[1, b], bulk[2, b], bulk[3, b], int(bulk[4, b])
        groups[0, g] = k
        groups[1, g] = now
        for j in range(k):
            s = add_slots[i]
            n = add_nl[i]
            n_seeds = _insert(s, n, off, add_links, add_w, links, w, pos, rows, roww, cnt, seeds, n_seeds, stamp_l, -stamp)
            nl[s] = n
            frac = piece_fd[0, i - n_single]
            num[s, CAP] = cap * frac
            num[s, RATE] = 0.0
            num[s, REM] = size * frac
            num[s, UPD] = now
            num[s, FIN] = np.inf
            num[s, FID] = fid0 + j
            num[s, BYTES] = size * frac
            num[s, DELAY] = piece_fd[1, i - n_single]
            grp[s] = g + 1
            stamp_new[s] = stamp
            off += n
            i += 1
    return n_seeds


@njit(**NO_REFCOUNT)
def _component(seed, stamp, keep_below, stack, comp, comp_links, rows, roww, cnt, nl, links, num, stamp_f, stamp_l,
               stamp_new, local, kept, cap_local, loads, capacity):
    """The part of the contention graph reachable from ``seed``: its flows (``comp``) and shared links
    (``comp_links``, with the load of the flows kept below the level and the capacity left); returns
    (flows, links)."""
    n = 0
    n_links = 0
    top = 0
    stack[top] = seed
    top += 1
    while top > 0:
        top -= 1
        link = stack[top]
        local[link] = n_links
        comp_links[n_links] = link
        fixed = 0.0
        for j in range(cnt[link]):
            f = rows[link, j]
            rate = num[f, RATE]
            if rate < keep_below and stamp_new[f] != stamp:
                fixed += roww[link, j] * rate
            elif stamp_f[f] != stamp:
                stamp_f[f] = stamp
                comp[n] = f
                n += 1
                for k in range(nl[f]):
                    other = links[f, k]
                    if stamp_l[other] != stamp:
                        stamp_l[other] = stamp
                        # perf: a link only f crosses joins no component and is no heap
                        # entry: it caps f (below) and is accounted with f's rate
                        if cnt[other] > 1:
                            stack[top] = other
                            top += 1
        kept[n_links] = fixed
        residual = capacity[link] - fixed
        cap_local[n_links] = max(0.0, residual)
        loads[n_links] = fixed
        n_links += 1
    return n, n_links


@njit(**NO_REFCOUNT)
def _insert(s, n, off, add_links, add_w, links, w, pos, rows, roww, cnt, seeds, n_seeds, stamp_l, mark):
    """Put slot ``s`` on its ``n`` links (``add_links[off:off + n]``), seeding each; returns the seed count."""
    for k in range(n):
        link = add_links[off + k]
        links[s, k] = link
        w[s, k] = add_w[off + k]
        c = cnt[link]
        rows[link, c] = s
        roww[link, c] = add_w[off + k]
        pos[s, k] = c
        cnt[link] = c + 1
        n_seeds = _seed(link, seeds, n_seeds, stamp_l, mark)
    return n_seeds


@njit(**NO_REFCOUNT)
def _seed(link, seeds, n_seeds, stamp_l, mark):
    """Seed ``link`` once per flush (``mark``: minus the flush's stamp, which the solve's own marks
    never equal): at most one seed per link, so the seed list fits in a row of the links' length."""
    if stamp_l[link] != mark:
        stamp_l[link] = mark
        seeds[n_seeds] = link
        n_seeds += 1
    return n_seeds


@njit(**NO_REFCOUNT)
def _account(link, new, now, load, nominal, busy, link_t, peak, out_links, out_t0, out_old, n_out):
    """``link`` changes load: close its busy interval, note the interval; the old load raises the
    link's peak if the link carried it for a positive time (a load replaced within its instant,
    while the instant's changes were applied one by one, was never carried)."""
    old = load[link]
    if old > 0.0:
        busy[link] += now - link_t[link]
        if now > link_t[link]:
            util = old / nominal[link]
            peak[link] = max(peak[link], util)
    out_links[n_out] = link
    out_t0[n_out] = link_t[link]
    out_old[n_out] = old
    link_t[link] = now
    load[link] = new
    return n_out + 1


@njit(**NO_REFCOUNT)
def _push_finish(num, hkeys, hvals, stats, fin, slot):
    """Note ``slot``'s finish time in the completion heap (entries whose time no longer matches
    ``num[slot, FIN]`` are stale and skipped; a full heap is rebuilt from the live flows)."""
    if stats[4] == hkeys.shape[0]:
        _rebuild_heap(num, hkeys, hvals, stats)
        if stats[4] == hkeys.shape[0]:  # cannot happen: the heap holds >= 2 x slots
            raise RuntimeError("completion heap too small")
    stats[4] = _heap_push(hkeys, hvals, stats[4], fin, slot)


@njit(**NO_REFCOUNT)
def _rebuild_heap(num, hkeys, hvals, stats):
    """Refill the completion heap with the finish times of the flows in flight only."""
    size = np.int64(0)
    for s in range(num.shape[0]):
        if num[s, FIN] < np.inf:
            size = _heap_push(hkeys, hvals, size, num[s, FIN], s)
    stats[4] = size


@njit(**NO_REFCOUNT)
def _next(num, hkeys, hvals, stats):
    """Earliest finish time of a flow in flight (inf if none)."""
    size = stats[4]
    while size > 0 and num[hvals[0], FIN] != hkeys[0]:
        _k, _v, size = _heap_pop(hkeys, hvals, size)
    stats[4] = size
    return hkeys[0] if size > 0 else np.inf


@njit(cache=True, nogil=True)
def _place_by_fid(num, found, start, end):
    """Order ``found[start:end]`` by fid (unique) when the fids span at most 16 x as many values as
    there are slots (a ring step's pieces: about 7 x, other messages' fids in between): each goes
    to its fid's place, then the places are read in order. Returns False (changing nothing) when
    the span is wider."""
    lo = hi = num[found[start], FID]
    for j in range(start + 1, end):
        f = num[found[j], FID]
        if f < lo:
            lo = f
        elif f > hi:
            hi = f
    span = int(hi - lo) + 1
    if span > 16 * (end - start):
        return False
    place = np.full(span, -1, np.int64)
    for j in range(start, end):
        place[int(num[found[j], FID] - lo)] = found[j]
    q = start
    for x in range(span):
        if place[x] >= 0:
            found[q] = place[x]
            q += 1
    return True


@njit(cache=True, nogil=True)
def _drain_kernel(num, horizon, now, hkeys, hvals, stats, slot_int, links, w, pos, rows, roww, link_int, link_flt,
                  scratch, groups, fuse, rtol, prune):
    """Drain the slots finishing by ``horizon``, in (finish time, fid) order; they are never drained again.

    Each drained slot's bytes go onto its links' byte counters. Returns (completions, drained
    slots, n, next finish time). A completion is a whole message's slot, or ``-(g + 1)`` when the
    last piece of message group ``g`` drained (its pieces' latest arrival, ``now`` + their
    delays, is in ``groups[1, g]``). With ``fuse``, unless a completion may start a queued
    message (its successor flag), the drained slots are also removed and what they touched
    re-solved, as :func:`_flush_kernel` would with them as its removes: then ``n`` >= 0 counts the
    links in ``out_links``; otherwise n is -1 and the next flush removes them.
    """
    size = stats[4]
    found = np.empty(16, np.int64)
    keys = np.empty(16)
    count = 0
    while size > 0 and hkeys[0] <= horizon:
        key, slot, size = _heap_pop(hkeys, hvals, size)
        if num[slot, FIN] == key:
            if count == found.shape[0]:
                found = np.concatenate((found, np.empty(count, np.int64)))
                keys = np.concatenate((keys, np.empty(count)))
            found[count] = slot
            keys[count] = key
            count += 1
            num[slot, FIN] = np.inf  # CORRECTNESS: a drained flow is never drained again
    stats[4] = size
    found = found[:count]
    # The heap gives finish times in order; flows finishing at the same time go in fid order.
    start = np.int64(0)
    for i in range(1, count + 1):
        if i == count or keys[i] != keys[start]:
            if i - start <= 32:  # perf: a short run sorted in place (no arrays to allocate)
                for j in range(start + 1, i):
                    s = found[j]
                    fid = num[s, FID]
                    q = j - 1
                    while q >= start and num[found[q], FID] > fid:
                        found[q + 1] = found[q]
                        q -= 1
                    found[q + 1] = s
            elif _place_by_fid(num, found, start, i):
                pass  # perf: a dense range of fids (a ring step's pieces) placed in linear time
            else:
                run = found[start:i]
                fids = np.empty(i - start)
                for j in range(i - start):
                    fids[j] = num[run[j], FID]
                _copy(found, start, run[np.argsort(fids)], i - start)  # (fids are unique)
            start = i
    nl, grp, succ = slot_int[0], slot_int[GRP], slot_int[SUCC]
    link_bytes = link_flt[11]
    codes = np.empty(count, np.int64)
    n_codes = 0
    for i in range(count):
        s = found[i]
        carried = num[s, BYTES]
        for k in range(nl[s]):
            link_bytes[links[s, k]] += carried * w[s, k]
        g = grp[s]
        if g > 0:
            grp[s] = -1
            g -= 1
            groups[0, g] -= 1
            groups[1, g] = max(groups[1, g], now + num[s, DELAY])
            if groups[0, g] == 0:
                codes[n_codes] = -(g + 1)
                n_codes += 1
                if groups[2, g] != 0.0:
                    fuse = False
        else:
            codes[n_codes] = s
            n_codes += 1
            if succ[s]:
                fuse = False
    if not fuse or count == 0 or rows.shape[0] > scratch.shape[1] or nl.shape[0] > scratch.shape[1]:
        return codes[:n_codes], found, -1, np.inf
    n_out, t_next = _flush_kernel(slot_int, links, w, pos, num, rows, roww, link_int, link_flt, scratch, hkeys,
                                  hvals, stats, found, np.empty((2, 0), np.int64), np.empty(0, np.int64),
                                  np.empty(0), np.empty((4, 0)), np.empty((5, 0)), np.empty((2, 0)), groups,
                                  np.empty(0, np.int64), now, rtol, prune)
    return codes[:n_codes], found, n_out, t_next


class FlowTable:
    """Array state of the flows in flight (see the module docstring); used by the Fabric."""

    def __init__(self, capacity_Bps: np.ndarray, nominal_Bps: np.ndarray | None = None, slots: int = 1024,
                 width: int = 8, row: int = 4, rtol: float = 1e-9, prune: bool = True):
        n_links = len(capacity_Bps)
        # Per link, floats: capacity, load, nominal, busy, link_t, peak, out_t0, out_old, three
        # scratch rows, bytes carried; ints: cnt, stamp_l, local, out_links. Per slot, ints: nl,
        # stamp_f, stamp_new, group, successor (see GRP, SUCC). Per group: pieces in flight, latest
        # arrival, successor flag.
        self.link_flt = np.zeros((12, n_links))
        self.link_int = np.zeros((4, n_links), np.int64)
        self.slot_int = np.zeros((5, slots), np.int64)
        self.link_flt[0] = capacity_Bps
        self.link_flt[2] = capacity_Bps if nominal_Bps is None else nominal_Bps
        self._views()
        self.rtol = rtol
        #: Re-solve only flows whose rate the change can affect (False: whole components).
        self.prune = prune
        self.links = np.zeros((slots, width), np.int64)
        self.w = np.zeros((slots, width))
        self.pos = np.zeros((slots, width), np.int64)
        self.num = np.zeros((slots, 8))
        self.num[:, FIN] = np.inf
        #: Per message group (a split message whose pieces are slots): pieces in flight, latest arrival.
        self.groups = np.zeros((3, 64))
        self.group_free = list(range(63, -1, -1))
        #: Slots drained since the last flush (arrays, in drain order): the next flush removes them.
        self.drained: list[np.ndarray] = []
        self.rows = np.zeros((n_links, row), np.int64)
        self.roww = np.zeros((n_links, row))
        # seeds, component flows, BFS stack, component links: each at most max(links, slots) long
        self.scratch = np.zeros((4, max(n_links, slots)), np.int64)
        #: stamp, solver calls, solved flows, largest component, completion heap size
        self.stats = np.zeros(5, np.int64)
        # The completion heap: (finish time, slot), stale entries skipped (see _push_finish).
        self.hkeys = np.zeros(4 * slots)
        self.hvals = np.zeros(4 * slots, np.int64)
        self.free = list(range(slots - 1, -1, -1))
        self._empty = np.zeros(0, np.int64)
        self._empty2 = np.zeros((2, 0), np.int64)
        self._empty_w = np.zeros(0)
        self._empty_num = np.zeros((4, 0))
        self._empty_bulk = np.zeros((5, 0))
        self._empty_fd = np.zeros((2, 0))
        self._one = np.zeros(1, np.int64)
        self._one_add = np.zeros((2, 1), np.int64)
        self._one_num = np.zeros((4, 1))

    def _views(self) -> None:
        #: Current capacity of each link (faults write into it), and nominal capacity.
        self.capacity, self.nominal = self.link_flt[0], self.link_flt[2]
        #: Per link: load (B/s) as last solved, seconds it carried traffic, when its load last
        #: changed, peak load / nominal; the links the last flush changed and their closed intervals.
        self.load, self.busy, self.link_t, self.peak = (self.link_flt[1], self.link_flt[3], self.link_flt[4],
                                                        self.link_flt[5])
        self.out_t0, self.out_old, self.out_links = self.link_flt[6], self.link_flt[7], self.link_int[3]
        #: Bytes each link carried: drained flows' bytes (added when they drain), and what the
        #: Fabric adds for rerouted ones.
        self.link_bytes = self.link_flt[11]
        self.nl = self.slot_int[0]

    # ------------------------------------------------------------- growth
    def alloc(self, n_links: int) -> int:
        """A free slot for a flow crossing ``n_links`` links (growing the arrays if needed)."""
        if n_links > self.links.shape[1] or not self.free:
            self._reserve(1, n_links)
        return self.free.pop()

    def alloc_many(self, k: int, n_links: int) -> list[int]:
        """``k`` free slots for flows of at most ``n_links`` links each."""
        free = self.free
        if n_links > self.links.shape[1] or len(free) < k:
            self._reserve(k, n_links)
            free = self.free
        out = free[-k:][::-1]  # the order k calls of alloc would give
        del free[-k:]
        return out

    def _reserve(self, k: int, n_links: int) -> None:
        """Widen the per-slot link arrays to ``n_links`` and double the slots until ``k`` are free."""
        if n_links > self.links.shape[1]:
            width = max(n_links, 2 * self.links.shape[1])
            self.links = _widen(self.links, width)
            self.w = _widen(self.w, width)
            self.pos = _widen(self.pos, width)
        while len(self.free) < k:
            old = len(self.nl)
            self.slot_int = np.concatenate([self.slot_int, np.zeros_like(self.slot_int)], axis=1)
            self._views()
            self.links = np.concatenate([self.links, np.zeros_like(self.links)])
            self.w = np.concatenate([self.w, np.zeros_like(self.w)])
            self.pos = np.concatenate([self.pos, np.zeros_like(self.pos)])
            extra = np.zeros((old, 8))
            extra[:, FIN] = np.inf
            self.num = np.concatenate([self.num, extra])
            self.free = list(range(2 * old - 1, old - 1, -1)) + self.free
            # A bigger heap (it must hold >= 2 x slots), rebuilt from the flows in flight.
            self.hkeys, self.hvals = np.zeros(8 * old), np.zeros(8 * old, np.int64)
            _rebuild_heap(self.num, self.hkeys, self.hvals, self.stats)

    def alloc_group(self) -> int:
        """A free message group id (growing the group arrays if needed), its successor flag clear."""
        if not self.group_free:
            old = self.groups.shape[1]
            self.groups = np.concatenate([self.groups, np.zeros_like(self.groups)], axis=1)
            self.group_free = list(range(2 * old - 1, old - 1, -1))
        g = self.group_free.pop()
        self.groups[2, g] = 0.0
        return g

    def live_pieces(self) -> tuple[np.ndarray, np.ndarray]:
        """(slot, group) of every piece of a message group still in flight."""
        grp = self.slot_int[GRP]
        slots = np.flatnonzero(grp > 0)
        return slots, grp[slots] - 1

    # ------------------------------------------------------------- the two kernels
    def flush(self, removes: list[int], adds: list[tuple[int, np.ndarray, np.ndarray, float, float, int, float]],
              bulk: list[tuple], extra_seeds, now: float) -> tuple[int, float]:
        """One instant's changes, in one kernel call; returns (n, next finish time).

        Removes the slots drained since the last flush (:meth:`drain`), then ``removes``; adds
        the whole messages ``adds`` (slot, links, weights, cap, remaining bytes, fid, bytes to
        count on the links when it drains) and the split messages ``bulk`` (slots, their links
        concatenated, links per piece, (fraction, delay) per piece, pieces, cap, size, first fid,
        group): piece ``j`` gets the fraction of the message's cap and size and fid + j. Re-solves
        what the changes and ``extra_seeds`` touch and accounts the link loads that changed: those
        links in ``out_links[:n]``, the intervals they closed in ``out_t0[:n]``, ``out_old[:n]``.
        The removed slots are free again afterwards.
        """
        drained = self.drained
        if drained:
            parts = drained + [np.array(removes, np.int64)] if removes else drained
            rem = parts[0] if len(parts) == 1 else np.concatenate(parts)
            self.drained = []
        elif len(removes) == 1:
            rem = self._one
            rem[0] = removes[0]
        else:
            rem = np.array(removes, np.int64) if removes else self._empty
        if len(adds) == 1:
            slot, add_links, add_w, cap, remaining, fid, carried = adds[0]
            add_int, add_num = self._one_add, self._one_num
            add_int[0, 0] = slot
            add_int[1, 0] = len(add_links)
            # perf: item writes (a tuple into a column converts it to an array first)
            add_num[0, 0] = cap
            add_num[1, 0] = remaining
            add_num[2, 0] = fid
            add_num[3, 0] = carried
        elif adds:
            # perf: one transposition in C, then one numpy call per array
            slots, links, weights, caps, remaining, fids, carried = zip(*adds)
            add_int = np.array((slots, tuple(map(len, links))), np.int64)
            add_links = np.concatenate(links)
            add_w = np.concatenate(weights)
            add_num = np.array((caps, remaining, fids, carried), np.float64)
        else:
            add_int, add_links, add_w, add_num = self._empty2, self._empty, self._empty_w, self._empty_num
        if bulk:
            b_slots, b_links, b_nl, b_w, b_fd, *head = zip(*bulk)
            piece_int = np.array((np.fromiter(chain.from_iterable(b_slots), np.int64), np.concatenate(b_nl)))
            add_int = np.concatenate((add_int, piece_int), axis=1) if adds else piece_int
            add_links = np.concatenate((add_links, *b_links)) if adds else np.concatenate(b_links)
            add_w = np.concatenate((add_w, *b_w)) if adds else np.concatenate(b_w)
            piece_fd = np.concatenate(b_fd, axis=1)
            head = np.array(head, np.float64)
        else:
            head, piece_fd = self._empty_bulk, self._empty_fd
        seeds = np.fromiter(extra_seeds, np.int64, len(extra_seeds)) if extra_seeds else self._empty
        if max(len(self.nl), self.rows.shape[0]) > self.scratch.shape[1]:
            self.scratch = np.zeros((4, max(len(self.nl), self.rows.shape[0], 2 * self.scratch.shape[1])), np.int64)
        while True:
            n_out, t_next = _flush_kernel(self.slot_int, self.links, self.w, self.pos, self.num, self.rows, self.roww,
                                          self.link_int, self.link_flt, self.scratch, self.hkeys, self.hvals,
                                          self.stats, rem, add_int, add_links, add_w, add_num, head, piece_fd,
                                          self.groups, seeds, now, self.rtol, self.prune)
            if n_out >= 0:
                break
            width = max(-n_out, 2 * self.rows.shape[1])
            self.rows, self.roww = _widen(self.rows, width), _widen(self.roww, width)
        self.free.extend(rem.tolist() if drained else removes)
        return n_out, t_next

    def drain(self, horizon: float, now: float, fuse: bool = False) -> tuple[np.ndarray, int, float]:
        """Drain the flows that finish by ``horizon`` (finish-time then fid order) and count their
        bytes on their links; returns (completions, n, next finish time). A completion is a whole
        message's slot, or ``-(g + 1)`` when the last piece of group ``g`` drained (arriving at
        ``groups[1, g]``). With ``fuse`` (the caller has nothing else for this instant) and no
        completion flagged as starting another message, the drained flows are also removed and
        their components re-solved, one kernel call for the whole instant: ``n`` >= 0 links in
        ``out_links`` as after :meth:`flush`. Otherwise ``n`` is -1 and the next :meth:`flush`
        removes them."""
        codes, slots, n_out, t_next = _drain_kernel(self.num, horizon, now, self.hkeys, self.hvals, self.stats,
                                                    self.slot_int, self.links, self.w, self.pos, self.rows,
                                                    self.roww, self.link_int, self.link_flt, self.scratch,
                                                    self.groups, fuse and not self.drained, self.rtol, self.prune)
        if n_out >= 0:
            self.free.extend(slots.tolist())
        elif len(slots):
            self.drained.append(slots)
        return codes, n_out, t_next

    def remaining(self, slot: int, now: float) -> float:
        """Bytes the flow in ``slot`` has left at ``now``."""
        _cap, rate, rem, upd = self.num[slot, :4]
        return max(float(rem - rate * (now - upd)), 0.0)


def _widen(a: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros((a.shape[0], width), a.dtype)
    out[:, :a.shape[1]] = a
    return out


def warm_up() -> None:
    """Compile the engine's kernels now (or load them from numba's on-disk cache): a tiny schedule
    run by the compiled executor, with every observer on, and a fault."""
    from netsim.engine.clock import Environment
    from netsim.engine.core import CompiledCore
    from netsim.engine.ideal import PairModel, replay
    from netsim.engine.model import ScheduleBuilder
    from netsim.routing import make_routing
    from netsim.topology import leaf_spine

    jit.compile_kernels()
    topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1, nic_bandwidth_Bps=1e9,
                      uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    for routing in ("ecmp", "split"):  # (whole messages and split ones)
        env = Environment()
        core = CompiledCore(env, topo, make_routing(routing, topo, np.random.default_rng(0)), link_series_bins=4)
        b = ScheduleBuilder()
        c = b.connect([0, 1], [1, 0])
        first = b.send(c, 1e6)
        b.delay(1e-6, after=first[:1])
        b.join(after=[first.tolist()])
        run = core.submit(b.build())
        env.run(run.done)
    replay(PairModel(topo), b.build())  # the ideal's replay kernel


def _kernels() -> tuple:
    """The kernels Python calls (numba dispatchers after :func:`netsim.solver.jit.compile_kernels`)."""
    from netsim.engine import dag
    return (_flush_kernel, _drain_kernel, _place_by_fid, _push_finish, _rebuild_heap, _next, dag.advance,
            dag.release_roots, dag.replay_kernel)


def kernels_cached() -> bool:
    """Whether numba has compiled the kernels on this machine before (a first run compiles them).
    Loads numba (:func:`netsim.solver.jit.compile_kernels`) to ask its cache."""
    if not jit.compile_kernels():
        return True  # no numba: nothing to compile
    indexes = [jit.kernel_index(k) for k in _kernels()]
    return all(index is None or index.is_file() for index in indexes)

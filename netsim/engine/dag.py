"""The compiled executor's event loop: a schedule's tasks released, posted, transmitted and completed in numba.

One call of :func:`advance` runs the simulation forward, instant by instant, as the SimPy path of
the reference executor would: in each instant first the completions due then (arrivals of
messages and ends of delays, in the order they were scheduled; each releases the tasks that were
waiting only for it), then the completion timer (flows that drain within the completion tolerance
leave the flow table, their messages arrive after their path's delay, and the next message queued
on each connection starts), then the flush (the messages starting in this instant are added to the
flow table of :mod:`netsim.engine.table` and every component they touch is re-solved). It stops
when nothing is left, when the next instant is at or after ``limit`` (an external SimPy event
comes first), when a task the caller waits on is done (``notify``), when connections starting a
message have no routes yet (the routing policy decides them in Python), or when the flow table
needs to grow. The caller then does what is needed and calls again; the state lives in arrays.

Observers run inside the loop on arrays: per-message records, offered load per switch link under
the policy and under ideal spraying (congestion), bytes per link per time bin (link series).

State layout (see :class:`netsim.engine.core.CompiledCore`, which owns the arrays):

* tasks: ``ti[TK_*, t]`` ints (kind, connection, dependencies left, notify flag, next task queued on
  the same connection, fid) and ``tf[TF_*, t]`` floats (amount, done time, post time, what the
  message's overhead scale adds to its delay); successors as a CSR ``succ_ptr``, ``succ_idx``.
* connections: ``ci[CI_*, c]`` ints and ``cf[CF_*, c]`` floats (cap, bytes posted and delivered,
  the current message's demand).
* routes (append-only): ``ri[RI_*, r]`` (its pieces, merged core and edge pairs), pieces ``pi``/``pf``
  (links, paths; fraction, delay), and the link lists ``ll``/``lw`` (pieces), ``kl``/``kw`` (core
  pairs), ``el``/``ew`` (edge pairs). Spray pairs of a connection are a route too (``CI_SPRAY``).
* ``iv``/``fv``: scalar state and counters (``IV_*``, ``FV_*``).
"""

from __future__ import annotations

import numpy as np

from netsim.engine.table import GRP, SUCC, _drain_kernel, _flush_kernel
from netsim.solver.bottleneck import _copy, _copy_rows
from netsim.solver.jit import INLINED, NO_REFCOUNT, njit

#: Functions only the loop calls: no Python wrapper to compile (perf: compile time).
inner = njit(cache=True, nogil=True, no_cpython_wrapper=True)

SEND, DELAY, JOIN = 0, 1, 2
# task ints / floats
TK_KIND, TK_CONN, TK_LEFT, TK_NOTIFY, TK_NEXT, TK_FID, TK_PATHS = range(7)
N_TK = 7
TF_AMOUNT, TF_DONE, TF_POST, TF_EXTRA = range(4)
N_TF = 4
# connection ints / floats. ROUTE: the routes the next message takes; FLIGHT: those of the message in
# flight (a reroute moves it off them); STAMP: the flush whose batch the policy last routed.
(CI_ROUTE, CI_HEAD, CI_TAIL, CI_SLOT, CI_GROUP, CI_SUCC, CI_QPS, CI_MODE, CI_SPRAY, CI_SELF, CI_FLIGHT,
 CI_STAMP) = range(12)
N_CI = 12
CF_CAP, CF_POSTED, CF_DELIVERED, CF_DEMAND, CF_DELAY = range(5)
N_CF = 5
# connection modes: routes given up front, decided by the policy at first use, or for every message
MODE_FIXED, MODE_FIRST_USE, MODE_MESSAGE = 0, 1, 2
# routes / pieces
RI_P0, RI_NP, RI_K0, RI_NK, RI_E0, RI_NE, RI_PATHS = range(7)
N_RI = 7
PI_L0, PI_NL = range(2)
PF_FRAC, PF_DELAY = range(2)
# scalar state
(IV_ARMED, IV_TVALID, IV_FID, IV_SEQ, IV_NAH, IV_NPEND, IV_NSTART, IV_NREM, IV_NCODES, IV_NFREE, IV_NGFREE,
 IV_NREC, IV_NNOTE, IV_NNEED, IV_FLOWS, IV_SUBFLOWS, IV_FLUSHES, IV_GROUPED, IV_EVENTS, IV_DONE, IV_TASKS,
 IV_CONGESTION, IV_SERIES, IV_NROWS, IV_NOK, IV_NSK, IV_NEED_SLOTS, IV_NEED_WIDTH, IV_NEED_ROWS, IV_NEED_GROUPS,
 IV_NEED_SCRATCH, IV_NXSEED, IV_NMOVE, IV_INFLUSH, IV_FLUSH_ID, IV_REROUTES, IV_ROUTED) = range(37)
N_IV = 40
#: perf: the offer counters as int64 values, not literals (the offer helpers compile once for both)
SLOT_NOK, SLOT_NSK = np.int64(IV_NOK), np.int64(IV_NSK)
FV_NOW, FV_NEXT_T, FV_TIMER_AT, FV_TIMER_FIRE, FV_TOL, FV_RTOL, FV_SWIDTH, FV_SLIMIT, FV_NEXT_EVENT = range(9)
N_FV = 10
# what advance() returns
ST_IDLE, ST_LIMIT, ST_NOTIFY, ST_ROUTES, ST_GROW = range(5)


@njit(**NO_REFCOUNT)
def _heap_push3(ah, n, t, seq, task):
    """Push (time, sequence, task) onto the event heap ``ah[:n]``, ordered as SimPy orders events of one
    priority: by time, then by when they were scheduled. The caller makes room (the loop's heap has a
    row per task: each task is on it at most once)."""
    if n == ah.shape[0]:
        raise RuntimeError("event heap full (its caller sizes it)")
    i = n
    ah[i, 0], ah[i, 1], ah[i, 2] = t, seq, task
    while i > 0:
        p = (i - 1) >> 1
        if ah[p, 0] < ah[i, 0] or (ah[p, 0] == ah[i, 0] and ah[p, 1] < ah[i, 1]):
            break
        for c in range(3):
            ah[p, c], ah[i, c] = ah[i, c], ah[p, c]
        i = p


@njit(**NO_REFCOUNT)
def _heap_pop3(ah, n):
    """Remove the earliest event of ``ah[:n]`` (read it from ``ah[0]`` first)."""
    n -= 1
    for c in range(3):
        ah[0, c] = ah[n, c]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        child = left
        right = left + 1
        if right < n and (ah[right, 0] < ah[left, 0] or (ah[right, 0] == ah[left, 0] and ah[right, 1] < ah[left, 1])):
            child = right
        if ah[i, 0] < ah[child, 0] or (ah[i, 0] == ah[child, 0] and ah[i, 1] < ah[child, 1]):
            break
        for c in range(3):
            ah[child, c], ah[i, c] = ah[i, c], ah[child, c]
        i = child


@njit(cache=True, nogil=True)
def _series_add(link, t0, t1, load, ser_row, ser_data, fv, iv):
    """``load`` carried on ``link`` during ``[t0, t1)`` into the link series (bins of ``fv[FV_SWIDTH]``
    that double, neighbours merged, when the run outgrows them). Returns the data array (grown if a
    new row did not fit)."""
    if t1 <= t0:
        return ser_data
    bins = ser_data.shape[1]
    while t1 > fv[FV_SLIMIT]:
        fv[FV_SWIDTH] *= 2.0
        fv[FV_SLIMIT] = bins * fv[FV_SWIDTH]
        for r in range(iv[IV_NROWS]):
            for k in range(bins // 2):
                ser_data[r, k] = ser_data[r, 2 * k] + ser_data[r, 2 * k + 1]
            if bins % 2:
                ser_data[r, bins // 2] = ser_data[r, bins - 1]
            for k in range((bins + 1) // 2, bins):
                ser_data[r, k] = 0.0
    row = ser_row[link]
    if row < 0:
        row = iv[IV_NROWS]
        if row == ser_data.shape[0]:
            bigger = np.zeros((2 * row + 16, bins))
            _copy_rows(bigger, ser_data, row)
            ser_data = bigger
        ser_row[link] = row
        iv[IV_NROWS] += 1
    w = fv[FV_SWIDTH]
    i1 = int(t1 / w)
    if i1 >= bins:
        i1 = bins - 1
    i0 = int(t0 / w)
    if i0 >= i1:
        ser_data[row, i1] += load * (t1 - t0)
        return ser_data
    ser_data[row, i0] += load * ((i0 + 1) * w - t0)
    full = load * w
    for k in range(i0 + 1, i1):
        ser_data[row, k] += full
    ser_data[row, i1] += load * (t1 - i1 * w)
    return ser_data


@inner
def _series_out(n, now, link_int, link_flt, ser_row, ser_data, fv, iv):
    """The intervals the last re-solve closed on ``n`` links, into the link series."""
    out_links, out_t0, out_old = link_int[3], link_flt[6], link_flt[7]
    for i in range(n):
        if out_old[i] > 0.0:
            ser_data = _series_add(out_links[i], out_t0[i], now, out_old[i], ser_row, ser_data, fv, iv)
    return ser_data


@njit(**NO_REFCOUNT)
def _offer(key, amount, ok, oa, okey_pos, iv, slot_n):
    """Note ``amount`` more offered load for pairs ``key`` this flush (netted per key, applied in
    the order keys were first touched, as the reference Fabric does)."""
    if okey_pos[key] >= 0 and okey_pos[key] < iv[slot_n] and ok[okey_pos[key]] == key:
        oa[okey_pos[key]] += amount
        return
    n = iv[slot_n]
    ok[n] = key
    oa[n] = amount
    okey_pos[key] = n
    iv[slot_n] = n + 1


@inner
def _apply_offers(keys, amounts, n, pi, ll, lw, core, offered, peak, since, nominal, now):
    """Apply a flush's netted offers (key ``k``: piece ``k``'s core links) in the order the keys were
    first touched (``OfferedLoad.apply``). An offered load a link had for a positive time raises its
    peak; one replaced within its instant never does."""
    for i in range(n):
        amount = amounts[i]
        if amount == 0.0:
            continue
        p = keys[i]
        a = pi[PI_L0, p]
        for j in range(a, a + pi[PI_NL, p]):
            lk = ll[j]
            if not core[lk]:
                continue
            if now > since[lk]:
                if offered[lk] > peak[lk] * nominal[lk]:
                    peak[lk] = offered[lk] / nominal[lk]
                since[lk] = now
            offered[lk] = offered[lk] + lw[j] * amount


@njit(**NO_REFCOUNT)
def _start_task(s, now, ti, tf, ci, cf, iv, ah, pend, slot_int, groups):
    """Task ``s`` has nothing left to wait for: a DELAY starts (its end goes on the event heap), a
    SEND is posted. (A JOIN is done at once: the caller handles it.)"""
    if ti[TK_KIND, s] == DELAY:
        _heap_push3(ah, iv[IV_NAH], now + tf[TF_AMOUNT, s], iv[IV_SEQ], s)
        iv[IV_NAH] += 1
        iv[IV_SEQ] += 1
        return
    _post(s, now, ti, tf, ci, cf, iv, ah, pend, slot_int, groups)


@njit(**NO_REFCOUNT)
def _finished(t, now, ti, tf, iv, notes):
    """Task ``t`` is done at ``now``."""
    tf[TF_DONE, t] = now
    iv[IV_DONE] += 1
    if ti[TK_NOTIFY, t]:
        notes[iv[IV_NNOTE]] = t
        iv[IV_NNOTE] += 1


@njit(**NO_REFCOUNT)
def _release(task, now, ti, tf, succ_ptr, succ_idx, ci, cf, iv, fv, ah, pend, stack, slot_int, groups, notes):
    """``task`` is done at ``now``: mark it, and release every task that waited only for it, in order.
    A JOIN with nothing left to wait for is done at once and releases its own successors before the
    next one of ``task`` (depth first, as the reference's recursion does), through an explicit stack of
    (task, next successor) frames (a released DELAY or self-send goes on the event heap)."""
    _finished(task, now, ti, tf, iv, notes)
    stack[0] = task
    stack[1] = succ_ptr[task]
    top = 2
    while top > 0:
        t = stack[top - 2]
        j = stack[top - 1]
        if j == succ_ptr[t + 1]:
            top -= 2
            continue
        stack[top - 1] = j + 1
        s = succ_idx[j]
        ti[TK_LEFT, s] -= 1
        if ti[TK_LEFT, s] != 0:
            continue
        if ti[TK_KIND, s] == JOIN:
            _finished(s, now, ti, tf, iv, notes)
            stack[top] = s
            stack[top + 1] = succ_ptr[s]
            top += 2
        else:
            _start_task(s, now, ti, tf, ci, cf, iv, ah, pend, slot_int, groups)


@njit(cache=True, nogil=True)
def release_roots(roots, now, ti, tf, succ_ptr, succ_idx, ci, cf, iv, fv, ah, pend, stack, slot_int, groups, notes):
    """Tasks ``roots`` (nothing to wait for) start at ``now``, in order; returns the event heap."""
    fv[FV_NOW] = now
    for s in roots:
        if ti[TK_KIND, s] == JOIN:
            _release(s, now, ti, tf, succ_ptr, succ_idx, ci, cf, iv, fv, ah, pend, stack, slot_int, groups, notes)
        else:
            _start_task(s, now, ti, tf, ci, cf, iv, ah, pend, slot_int, groups)
    return ah


@njit(**NO_REFCOUNT)
def _post(s, now, ti, tf, ci, cf, iv, ah, pend, slot_int, groups):
    """Message task ``s`` is posted now (``Fabric.send``): queued behind its connection's message in
    flight, or starting at this instant's flush. A self-send (same GPU) arrives at once."""
    c = ti[TK_CONN, s]
    if ci[CI_SELF, c]:
        _heap_push3(ah, iv[IV_NAH], now, iv[IV_SEQ], s)
        iv[IV_NAH] += 1
        iv[IV_SEQ] += 1
        return
    ti[TK_FID, s] = iv[IV_FID]
    iv[IV_FID] += 1
    tf[TF_POST, s] = now
    cf[CF_POSTED, c] += tf[TF_AMOUNT, s]
    ti[TK_NEXT, s] = -1
    if ci[CI_HEAD, c] >= 0:  # busy: wait in its send queue
        if ci[CI_TAIL, c] >= 0:
            ti[TK_NEXT, ci[CI_TAIL, c]] = s
        else:
            ti[TK_NEXT, ci[CI_HEAD, c]] = s
        ci[CI_TAIL, c] = s
        if ci[CI_SUCC, c] == 0:  # (Fabric._mark_successor)
            ci[CI_SUCC, c] = 1
            if ci[CI_GROUP, c] >= 0:
                groups[2, ci[CI_GROUP, c]] = 1.0
            elif ci[CI_SLOT, c] >= 0:
                slot_int[SUCC, ci[CI_SLOT, c]] = 1
        return
    ci[CI_HEAD, c] = s
    ci[CI_TAIL, c] = -1
    ci[CI_SLOT, c] = -1
    ci[CI_GROUP, c] = -1
    ci[CI_SUCC, c] = 0
    pend[iv[IV_NPEND]] = c
    iv[IV_NPEND] += 1
    iv[IV_ARMED] = 1






@njit(**NO_REFCOUNT)
def _piece_offer(p, amount, pi, ll, lw, core, keys, amounts, key_pos, iv, slot_n):
    """Note ``amount`` of offered load on piece ``p``'s core links (nothing if it crosses none)."""
    a = pi[PI_L0, p]
    for j in range(a, a + pi[PI_NL, p]):
        if core[ll[j]]:
            _offer(p, amount, keys, amounts, key_pos, iv, slot_n)
            return


@njit(**NO_REFCOUNT)
def _arrive(s, c, end, ti, tf, ci, cf, iv, ah, start, rec, pi, ll, lw, core, sk, sa, skey_pos):
    """Message task ``s`` of connection ``c`` drained and arrives at ``end`` (``Fabric._finish``): its
    record, its spray offer withdrawn, and the next message queued on ``c`` starts at this flush
    (``_next_on_connection``)."""
    _heap_push3(ah, iv[IV_NAH], end, iv[IV_SEQ], s)
    iv[IV_NAH] += 1
    iv[IV_SEQ] += 1
    cf[CF_DELIVERED, c] += tf[TF_AMOUNT, s]
    rec[iv[IV_NREC]] = s
    iv[IV_NREC] += 1
    if iv[IV_CONGESTION] and ci[CI_SPRAY, c] >= 0:
        _piece_offer(ci[CI_SPRAY, c], -cf[CF_DEMAND, c], pi, ll, lw, core, sk, sa, skey_pos, iv, SLOT_NSK)
    nxt = ti[TK_NEXT, s]
    ci[CI_SLOT, c] = -1
    ci[CI_GROUP, c] = -1
    if nxt >= 0:
        ci[CI_HEAD, c] = nxt
        if ci[CI_TAIL, c] == nxt:
            ci[CI_TAIL, c] = -1
        ci[CI_SUCC, c] = 1 if ti[TK_NEXT, nxt] >= 0 else 0
        start[iv[IV_NSTART]] = c
        iv[IV_NSTART] += 1
    else:
        ci[CI_HEAD, c] = -1
        ci[CI_TAIL, c] = -1


@njit(**NO_REFCOUNT)
def _drained(s, now, ti, tf, ci, cf, iv, ah, start, rec, pi, pf, ll, lw, core, ok, oa, okey_pos, sk, sa, skey_pos,
             slot_task, slot_piece, group_task, gcount, groups, gfree):
    """Slot ``s`` has drained (``Fabric._complete``): its offered load withdrawn; its message arrives
    after its delay if it was whole, or if it was the last piece of a split message in flight."""
    task = slot_task[s]
    slot_task[s] = -1
    c = ti[TK_CONN, task]
    p = slot_piece[s]
    g = ci[CI_GROUP, c]
    if g < 0:
        if iv[IV_CONGESTION]:
            _piece_offer(p, -cf[CF_DEMAND, c], pi, ll, lw, core, ok, oa, okey_pos, iv, SLOT_NOK)
        _arrive(task, c, now + (cf[CF_DELAY, c] + tf[TF_EXTRA, task]), ti, tf, ci, cf, iv, ah, start, rec, pi, ll,
                lw, core, sk, sa, skey_pos)
        return
    if iv[IV_CONGESTION]:
        _piece_offer(p, -cf[CF_DEMAND, c] * pf[PF_FRAC, p], pi, ll, lw, core, ok, oa, okey_pos, iv, SLOT_NOK)
    gcount[0, g] += 1
    if gcount[0, g] == gcount[1, g]:
        # the last piece: the pieces' latest arrival, as the Fabric's delay (arrival - now)
        arrive = groups[1, g]
        group_task[g] = -1
        gfree[iv[IV_NGFREE]] = g
        iv[IV_NGFREE] += 1
        _arrive(task, c, now + ((arrive - now) + tf[TF_EXTRA, task]), ti, tf, ci, cf, iv, ah, start, rec, pi, ll,
                lw, core, sk, sa, skey_pos)


@njit(**NO_REFCOUNT)
def _arm_timer(iv, fv):
    """``Fabric._arm_timer``: wake up at the next finish time unless an earlier wake-up is set."""
    t = fv[FV_NEXT_T]
    if t < fv[FV_TIMER_AT]:
        fv[FV_TIMER_AT] = t
        fv[FV_TIMER_FIRE] = max(t, fv[FV_NOW])  # (the reference's timer lands on t itself: clock.delay_to)
        iv[IV_TVALID] = 1


@njit(**NO_REFCOUNT)
def _edge_rate(r, ri, el, ew, capacity):
    """The rate a message on route ``r`` could get from its edge (non-core) links alone, at their
    current capacities: what it offers the core (``Fabric._incidence``'s edge rate)."""
    edge = np.inf
    a = ri[RI_E0, r]
    for j in range(a, a + ri[RI_NE, r]):
        if ew[j] > 0.0:
            v = capacity[el[j]] / ew[j]
            edge = min(edge, v)
    return edge


@njit(**NO_REFCOUNT)
def _needs_routes(order, n, ci, iv, need):
    """Connections among ``order[:n]`` the routing policy must route first (in order, once each);
    their count."""
    k = 0
    stamp = iv[IV_FLUSH_ID]
    for q in range(n):
        c = order[q]
        mode = ci[CI_MODE, c]
        if (mode == MODE_FIRST_USE and ci[CI_ROUTE, c] < 0) or (mode == MODE_MESSAGE and ci[CI_STAMP, c] != stamp):
            if ci[CI_STAMP, c] != -stamp - 1:  # (not listed yet)
                ci[CI_STAMP, c] = -stamp - 1
                need[k] = c
                k += 1
    return k




@inner
def _grow1(a):
    out = np.empty(2 * a.shape[0] + 16, a.dtype)
    _copy(out, 0, a, a.shape[0])
    return out


@inner
def _grow2(a):
    out = np.empty((a.shape[0], 2 * a.shape[1] + 16), a.dtype)
    _copy_rows(out, a, a.shape[0])
    return out


@inner
def _commit(now, slot_int, links, w, pos, num, rows, roww, link_int, link_flt, scratch, hkeys, hvals, stats, groups,
            rem, xseeds, a_slot, a_nl, a_links, a_w, a_num, n_add, n_links, b_head, n_groups, p_slot, p_nl, p_links,
            p_w, p_fd, n_pieces, n_plinks, free, iv, fv, prune):
    """One flow table kernel call: the drained slots out, whole messages then the split messages'
    pieces in, and a re-solve of what they touch; returns the number of links whose load changed."""
    add_int = np.empty((2, n_add + n_pieces), np.int64)
    _copy(add_int[0], 0, a_slot, n_add)
    _copy(add_int[1], 0, a_nl, n_add)
    _copy(add_int[0], n_add, p_slot, n_pieces)
    _copy(add_int[1], n_add, p_nl, n_pieces)
    add_links = np.empty(n_links + n_plinks, np.int64)
    _copy(add_links, 0, a_links, n_links)
    _copy(add_links, n_links, p_links, n_plinks)
    add_w = np.empty(n_links + n_plinks)
    _copy(add_w, 0, a_w, n_links)
    _copy(add_w, n_links, p_w, n_plinks)
    add_num = np.ascontiguousarray(a_num[:, :n_add])
    head = np.ascontiguousarray(b_head[:, :n_groups])
    piece_fd = np.ascontiguousarray(p_fd[:, :n_pieces])
    removes = rem[:iv[IV_NREM]].copy()
    seeds = xseeds[:iv[IV_NXSEED]].copy()
    n_out, t_next = _flush_kernel(slot_int, links, w, pos, num, rows, roww, link_int, link_flt, scratch, hkeys,
                                  hvals, stats, removes, add_int, add_links, add_w, add_num, head, piece_fd, groups,
                                  seeds, now, fv[FV_RTOL], prune)
    if n_out < 0:
        raise RuntimeError("flow table: a link's row is too narrow (the caller sizes them)")
    for i in range(iv[IV_NREM]):
        free[iv[IV_NFREE]] = rem[i]
        iv[IV_NFREE] += 1
    iv[IV_NREM] = 0
    iv[IV_NCODES] = 0
    iv[IV_NXSEED] = 0
    fv[FV_NEXT_T] = t_next
    return n_out


@inner
def _move_rerouted(now, ti, ci, cf, ri, pi, pf, ll, lw, core, ok, oa, okey_pos, slot_int, links, w, num, link_flt, free,
                   slot_task, slot_piece, rem, moves, iv, congestion, a_slot, a_nl, a_links, a_w, a_num, n_add, n_links,
                   fix, n_fix):
    """Messages in flight whose connection was rerouted move to their new routes (``Fabric._reroute``):
    the bytes they carried stay counted on the old links, the rest goes on the new ones (added to the
    flush's adds; a piece of a split message keeps its group, fixed up in ``fix`` after the table call).
    Returns the adds and fixes."""
    moving = np.zeros(ci.shape[1], np.int8)
    for q in range(iv[IV_NMOVE]):
        moving[moves[q]] = 1
    iv[IV_NMOVE] = 0
    nl_row, grp = slot_int[0], slot_int[GRP]
    link_bytes = link_flt[11]
    movers = np.empty(slot_task.shape[0], np.int64)
    n_movers = 0
    for s in range(slot_task.shape[0]):
        task = slot_task[s]
        # (free slots, and pieces that drained while their message is still in flight, stay)
        if task >= 0 and grp[s] >= 0 and moving[ti[TK_CONN, task]]:
            movers[n_movers] = s
            n_movers += 1
    for m in range(n_movers):
        s = movers[m]
        task = slot_task[s]
        c = ti[TK_CONN, task]
        r_old = ci[CI_FLIGHT, c]
        r_new = ci[CI_ROUTE, c]
        whole = ci[CI_GROUP, c] < 0
        if whole:
            p_new = ri[RI_P0, r_new] if ri[RI_NP, r_new] == 1 else ri[RI_P0, r_new] + ri[RI_NP, r_new]
            frac = 1.0
        else:
            idx = slot_piece[s] - ri[RI_P0, r_old]
            p_new = ri[RI_P0, r_new] + idx % ri[RI_NP, r_new]
            frac = pf[PF_FRAC, slot_piece[s]]
        same = pi[PI_NL, p_new] == nl_row[s]
        if same:
            l0 = pi[PI_L0, p_new]
            for k in range(nl_row[s]):
                if ll[l0 + k] != links[s, k] or lw[l0 + k] != w[s, k]:
                    same = False
                    break
        if same:  # its path and shares did not change: it stays (Fabric._reroute compares the links)
            slot_piece[s] = p_new  # (its piece in the new routes: the same links)
            continue
        left = num[s, 2] - num[s, 1] * (now - num[s, 3])  # REM - RATE * (now - UPD)
        left = max(0.0, left)
        carried = num[s, 6] - left  # BYTES (still to count) - left
        for k in range(nl_row[s]):
            link_bytes[links[s, k]] += carried * w[s, k]
        if congestion:
            demand = cf[CF_DEMAND, c] * frac
            _piece_offer(slot_piece[s], -demand, pi, ll, lw, core, ok, oa, okey_pos, iv, SLOT_NOK)
            _piece_offer(p_new, demand, pi, ll, lw, core, ok, oa, okey_pos, iv, SLOT_NOK)
        rem[iv[IV_NREM]] = s
        iv[IV_NREM] += 1
        iv[IV_NCODES] += 1  # (moved, not drained)
        iv[IV_NFREE] -= 1
        slot = free[iv[IV_NFREE]]
        slot_task[slot] = task
        slot_piece[slot] = p_new
        slot_int[SUCC, slot] = slot_int[SUCC, s]
        slot_task[s] = -1
        nl = pi[PI_NL, p_new]
        if n_add == a_slot.shape[0]:
            a_slot = _grow1(a_slot)
            a_nl = _grow1(a_nl)
            a_num = _grow2(a_num)
        while n_links + nl > a_links.shape[0]:
            a_links = _grow1(a_links)
            a_w = _grow1(a_w)
        a_slot[n_add] = slot
        a_nl[n_add] = nl
        l0 = pi[PI_L0, p_new]
        for j in range(nl):
            a_links[n_links + j] = ll[l0 + j]
            a_w[n_links + j] = lw[l0 + j]
        a_num[0, n_add] = num[s, 0]  # CAP
        a_num[1, n_add] = left
        a_num[2, n_add] = num[s, 5]  # FID
        a_num[3, n_add] = left
        n_add += 1
        n_links += nl
        iv[IV_REROUTES] += 1
        if whole:
            ci[CI_SLOT, c] = slot
            cf[CF_DELAY, c] = pf[PF_DELAY, p_new]
            ti[TK_PATHS, task] = ri[RI_PATHS, r_new]
        else:  # a piece keeps its group: its row and delay are set after the flow table call
            if n_fix == fix.shape[1]:
                fix = _grow2(fix)
            fix[0, n_fix] = slot
            fix[1, n_fix] = grp[s]
            fix[2, n_fix] = pf[PF_DELAY, p_new]
            n_fix += 1
    for c in range(ci.shape[1]):
        if moving[c] and ci[CI_HEAD, c] >= 0 and (ci[CI_SLOT, c] >= 0 or ci[CI_GROUP, c] >= 0):
            ci[CI_FLIGHT, c] = ci[CI_ROUTE, c]
    return a_slot, a_nl, a_links, a_w, a_num, n_add, n_links, fix, n_fix


@njit(**INLINED)
def _admit_whole(s, c, merged, size, ti, ci, cf, pi, ll, lw, slot_int, free, slot_task, slot_piece, iv, a_slot, a_nl,
                 a_links, a_w, a_num, n_add, n_links):
    """Message ``s`` of connection ``c`` enters the table as one flow on piece ``merged`` (added to
    the flush's adds, which are returned)."""
    iv[IV_NFREE] -= 1
    slot = free[iv[IV_NFREE]]
    slot_task[slot] = s
    slot_piece[slot] = merged
    ci[CI_SLOT, c] = slot
    slot_int[SUCC, slot] = 1 if ci[CI_SUCC, c] else 0
    nl = pi[PI_NL, merged]
    if n_add == a_slot.shape[0]:
        a_slot = _grow1(a_slot)
        a_nl = _grow1(a_nl)
        a_num = _grow2(a_num)
    while n_links + nl > a_links.shape[0]:
        a_links = _grow1(a_links)
        a_w = _grow1(a_w)
    a_slot[n_add] = slot
    a_nl[n_add] = nl
    l0 = pi[PI_L0, merged]
    for j in range(nl):
        a_links[n_links + j] = ll[l0 + j]
        a_w[n_links + j] = lw[l0 + j]
    a_num[0, n_add] = cf[CF_CAP, c]
    a_num[1, n_add] = size
    a_num[2, n_add] = ti[TK_FID, s]
    a_num[3, n_add] = size
    n_add += 1
    n_links += nl
    return a_slot, a_nl, a_links, a_w, a_num, n_add, n_links


@inner
def _admit_split(s, c, r, size, demand, congestion, ti, ci, cf, ri, pi, pf, ll, lw, core, ok, oa, okey_pos, groups,
                 free, gfree, slot_task, slot_piece, group_task, gcount, iv, b_head, n_groups, p_slot, p_nl, p_links,
                 p_w, p_fd, n_pieces, n_plinks):
    """Message ``s`` of connection ``c`` enters the table as the pieces of route ``r``, one message
    group (``Fabric._admit_group``); returns the flush's groups and pieces."""
    kp = ri[RI_NP, r]
    iv[IV_NGFREE] -= 1
    g = gfree[iv[IV_NGFREE]]
    groups[2, g] = 1.0 if ci[CI_SUCC, c] else 0.0
    group_task[g] = s
    gcount[0, g] = 0
    gcount[1, g] = kp
    ci[CI_GROUP, c] = g
    if n_groups == b_head.shape[1]:
        b_head = _grow2(b_head)
    b_head[0, n_groups] = kp
    b_head[1, n_groups] = cf[CF_CAP, c]
    b_head[2, n_groups] = size
    b_head[3, n_groups] = iv[IV_FID]
    b_head[4, n_groups] = g
    n_groups += 1
    iv[IV_FID] += kp
    iv[IV_SUBFLOWS] += kp
    iv[IV_GROUPED] += 1
    p0 = ri[RI_P0, r]
    for j in range(kp):
        p = p0 + j
        if congestion:
            _piece_offer(p, demand * pf[PF_FRAC, p], pi, ll, lw, core, ok, oa, okey_pos, iv, SLOT_NOK)
        iv[IV_NFREE] -= 1
        slot = free[iv[IV_NFREE]]
        slot_task[slot] = s
        slot_piece[slot] = p
        nl = pi[PI_NL, p]
        if n_pieces == p_slot.shape[0]:
            p_slot = _grow1(p_slot)
            p_nl = _grow1(p_nl)
            p_fd = _grow2(p_fd)
        while n_plinks + nl > p_links.shape[0]:
            p_links = _grow1(p_links)
            p_w = _grow1(p_w)
        p_slot[n_pieces] = slot
        p_nl[n_pieces] = nl
        l0 = pi[PI_L0, p]
        for jj in range(nl):
            p_links[n_plinks + jj] = ll[l0 + jj]
            p_w[n_plinks + jj] = lw[l0 + jj]
        p_fd[0, n_pieces] = pf[PF_FRAC, p]
        p_fd[1, n_pieces] = pf[PF_DELAY, p]
        n_pieces += 1
        n_plinks += nl
    return b_head, n_groups, p_slot, p_nl, p_links, p_w, p_fd, n_pieces, n_plinks


@inner
def _flush(now, ti, tf, ci, cf, ri, pi, pf, ll, lw, el, ew, core, off, ok, oa, okey_pos, sk, sa, skey_pos,
           slot_int, links, w, pos, num, rows, roww, link_int, link_flt, scratch, hkeys, hvals, stats, groups,
           free, gfree, slot_task, slot_piece, group_task, gcount, ah, pend, start, rem, need, xseeds, moves, rec,
           ser_row, ser_data, iv, fv, prune):
    """``Fabric._flush``: this instant's completions, then the messages starting now (routed by the
    policy first where it decides at first use or per message: then ``ST_ROUTES`` is returned with
    those connections in ``need``, and the flush goes on when called again), then one flow table
    kernel call for the instant. Returns (status, event heap, series data)."""
    if iv[IV_INFLUSH] == 0:
        iv[IV_FLUSHES] += 1
        iv[IV_INFLUSH] = 1
        iv[IV_FLUSH_ID] += 1
    # completions, in drain order
    while iv[IV_NCODES] < iv[IV_NREM]:
        s = rem[iv[IV_NCODES]]
        iv[IV_NCODES] += 1
        _drained(s, now, ti, tf, ci, cf, iv, ah, start, rec, pi, pf, ll, lw, core, ok, oa, okey_pos, sk, sa,
                 skey_pos, slot_task, slot_piece, group_task, gcount, groups, gfree)
    # messages starting now: those behind a drained one, then the new ones (Fabric._flush's order);
    # messages that finish at once (no bytes, no links) start their successors in this same flush
    order = np.empty(16, np.int64)
    n_add = n_links = n_groups = n_pieces = n_plinks = np.int64(0)
    a_slot = np.empty(16, np.int64)
    a_nl = np.empty(16, np.int64)
    a_links = np.empty(64, np.int64)
    a_w = np.empty(64)
    a_num = np.empty((4, 16))
    b_head = np.empty((5, 4))
    p_slot = np.empty(16, np.int64)
    p_nl = np.empty(16, np.int64)
    p_links = np.empty(64, np.int64)
    p_w = np.empty(64)
    p_fd = np.empty((2, 16))
    capacity = link_flt[0]
    congestion = iv[IV_CONGESTION] != 0
    # messages in flight whose connection was rerouted move to their new routes (Fabric._reroute):
    # the bytes they carried stay counted on the old links, the rest goes on the new ones
    n_fix = 0
    fix = np.empty((3, 16))
    if iv[IV_NMOVE] > 0:
        a_slot, a_nl, a_links, a_w, a_num, n_add, n_links, fix, n_fix = _move_rerouted(
            now, ti, ci, cf, ri, pi, pf, ll, lw, core, ok, oa, okey_pos, slot_int, links, w, num, link_flt, free,
            slot_task, slot_piece, rem, moves, iv, congestion, a_slot, a_nl, a_links, a_w, a_num, n_add, n_links,
            fix, n_fix)
    while iv[IV_NSTART] + iv[IV_NPEND] > 0:
        n = iv[IV_NSTART] + iv[IV_NPEND]
        if order.shape[0] < n:
            order = np.empty(2 * n, np.int64)
        for q in range(iv[IV_NSTART]):
            order[q] = start[q]
        for q in range(iv[IV_NPEND]):
            order[iv[IV_NSTART] + q] = pend[q]
        k = _needs_routes(order, n, ci, iv, need)
        if k:
            iv[IV_NNEED] = k
            if n_add + n_pieces:  # (a message that finished at once started one that needs routes)
                n_out = _commit(now, slot_int, links, w, pos, num, rows, roww, link_int, link_flt, scratch, hkeys,
                                hvals, stats, groups, rem, xseeds, a_slot, a_nl, a_links, a_w, a_num, n_add, n_links,
                                b_head, n_groups, p_slot, p_nl, p_links, p_w, p_fd, n_pieces, n_plinks, free, iv,
                                fv, prune)
                for i in range(n_fix):
                    slot_int[GRP, int(fix[0, i])] = int(fix[1, i])
                    num[int(fix[0, i]), 7] = fix[2, i]  # DELAY
                if iv[IV_SERIES]:
                    ser_data = _series_out(n_out, now, link_int, link_flt, ser_row, ser_data, fv, iv)
            return ST_ROUTES, ah, ser_data
        iv[IV_NSTART] = 0
        iv[IV_NPEND] = 0
        for q in range(n):
            c = order[q]
            s = ci[CI_HEAD, c]
            r = ci[CI_ROUTE, c]
            if ci[CI_MODE, c] == MODE_MESSAGE:
                ci[CI_STAMP, c] = iv[IV_FLUSH_ID] - 1  # (routed for this message only)
            iv[IV_FLOWS] += 1
            size = tf[TF_AMOUNT, s]
            split = ri[RI_NP, r] > 1 and size > 0.0
            n_sub = ri[RI_PATHS, r] if split else 1
            ci[CI_QPS, c] = max(ci[CI_QPS, c], n_sub)
            ti[TK_PATHS, s] = n_sub if split else ri[RI_PATHS, r]
            merged = ri[RI_P0, r] if ri[RI_NP, r] == 1 else ri[RI_P0, r] + ri[RI_NP, r]
            demand = 0.0
            if congestion:
                demand = min(cf[CF_CAP, c], _edge_rate(r, ri, el, ew, capacity))
                cf[CF_DEMAND, c] = demand
                if ci[CI_SPRAY, c] >= 0:
                    _piece_offer(ci[CI_SPRAY, c], demand, pi, ll, lw, core, sk, sa, skey_pos, iv, SLOT_NSK)
            if size == 0.0 or pi[PI_NL, merged] == 0:  # finishes at once (Fabric._place -> _done)
                cf[CF_DELAY, c] = pf[PF_DELAY, merged]
                _arrive(s, c, now + (pf[PF_DELAY, merged] + tf[TF_EXTRA, s]), ti, tf, ci, cf, iv, ah, start, rec, pi,
                        ll, lw, core, sk, sa, skey_pos)
                continue
            ci[CI_FLIGHT, c] = r
            if not split:
                cf[CF_DELAY, c] = pf[PF_DELAY, merged]
                if congestion:
                    _piece_offer(merged, demand, pi, ll, lw, core, ok, oa, okey_pos, iv, SLOT_NOK)
                a_slot, a_nl, a_links, a_w, a_num, n_add, n_links = _admit_whole(
                    s, c, merged, size, ti, ci, cf, pi, ll, lw, slot_int, free, slot_task, slot_piece, iv, a_slot, a_nl,
                    a_links, a_w, a_num, n_add, n_links)
                continue
            # a split message: its pieces as one group of the table (Fabric._admit_group)
            b_head, n_groups, p_slot, p_nl, p_links, p_w, p_fd, n_pieces, n_plinks = _admit_split(
                s, c, r, size, demand, congestion, ti, ci, cf, ri, pi, pf, ll, lw, core, ok, oa, okey_pos, groups,
                free, gfree, slot_task, slot_piece, group_task, gcount, iv, b_head, n_groups, p_slot, p_nl, p_links,
                p_w, p_fd, n_pieces, n_plinks)
    n_out = _commit(now, slot_int, links, w, pos, num, rows, roww, link_int, link_flt, scratch, hkeys, hvals, stats,
                    groups, rem, xseeds, a_slot, a_nl, a_links, a_w, a_num, n_add, n_links, b_head, n_groups, p_slot,
                    p_nl, p_links, p_w, p_fd, n_pieces, n_plinks, free, iv, fv, prune)
    for i in range(n_fix):
        slot_int[GRP, int(fix[0, i])] = int(fix[1, i])
        num[int(fix[0, i]), 7] = fix[2, i]  # DELAY
    if iv[IV_SERIES]:
        ser_data = _series_out(n_out, now, link_int, link_flt, ser_row, ser_data, fv, iv)
    if congestion:
        nominal = link_flt[2]
        _apply_offers(ok, oa, iv[IV_NOK], pi, ll, lw, core, off[0], off[1], off[4], nominal, now)
        _apply_offers(sk, sa, iv[IV_NSK], pi, ll, lw, core, off[2], off[3], off[5], nominal, now)
        iv[IV_NOK] = 0
        iv[IV_NSK] = 0
    iv[IV_INFLUSH] = 0
    _arm_timer(iv, fv)
    return ST_IDLE, ah, ser_data


@njit(cache=True, nogil=True)
def advance(limit, ti, tf, succ_ptr, succ_idx, ci, cf, ri, pi, pf, ll, lw, el, ew, core, off, ok, oa, okey_pos,
            sk, sa, skey_pos, slot_int, links, w, pos, num, rows, roww, link_int, link_flt, scratch, hkeys, hvals,
            stats, groups, free, gfree, slot_task, slot_piece, group_task, gcount, ah, pend, start, rem, need, notes,
            stack, xseeds, moves, rec, ser_row, ser_data, iv, fv, prune):
    """Run instants until the next one is at or after ``limit`` (``ST_LIMIT``), nothing is left
    (``ST_IDLE``), a task flagged ``notify`` is done (``ST_NOTIFY``: those tasks in ``notes``), or
    connections need routes (``ST_ROUTES``: in ``need``). Returns (status, event heap, series data);
    ``fv[FV_NEXT_EVENT]`` is the time of the next event (inf: none)."""
    tol = fv[FV_TOL]
    while True:
        # the next event in SimPy's order: (time, priority), completions by when they were scheduled
        kind = -1
        best = np.inf
        if iv[IV_NAH] > 0:
            kind = 0
            best = ah[0, 0]
        if iv[IV_TVALID] and fv[FV_TIMER_FIRE] < best:
            kind = 1
            best = fv[FV_TIMER_FIRE]
        # (a flush the policy interrupted to route (ST_ROUTES) goes on before this instant's other events,
        # as the Fabric's flush runs whole: found by hypothesis, a DELAY(0) ending mid-flush overtook a send)
        if iv[IV_ARMED] and (fv[FV_NOW] < best or iv[IV_INFLUSH]):
            kind = 2
            best = fv[FV_NOW]
        fv[FV_NEXT_EVENT] = best
        if kind < 0:
            return ST_IDLE, ah, ser_data
        if best >= limit:
            return ST_LIMIT, ah, ser_data
        iv[IV_EVENTS] += 1
        if kind == 0:  # a message arrived or a delay ended: release what waited for it
            now = ah[0, 0]
            fv[FV_NOW] = now
            task = int(ah[0, 2])
            _heap_pop3(ah, iv[IV_NAH])
            iv[IV_NAH] -= 1
            _release(task, now, ti, tf, succ_ptr, succ_idx, ci, cf, iv, fv, ah, pend, stack, slot_int, groups,
                     notes)
            if iv[IV_NNOTE] > 0:
                return ST_NOTIFY, ah, ser_data
            continue
        if kind == 2:  # the flush event of this instant
            iv[IV_ARMED] = 0
        else:  # the completion timer (Fabric._on_timer)
            now = fv[FV_TIMER_FIRE]
            fv[FV_NOW] = now
            iv[IV_TVALID] = 0
            fv[FV_TIMER_AT] = np.inf
            # nothing else happens in this instant (yet): the drain can remove and re-solve too
            fuse = (iv[IV_ARMED] == 0 and iv[IV_NREM] == 0 and iv[IV_NPEND] == 0 and iv[IV_NSTART] == 0
                    and iv[IV_NXSEED] == 0 and iv[IV_NMOVE] == 0)
            codes, found, n_out, t_next = _drain_kernel(num, now + tol, now, hkeys, hvals, stats, slot_int, links,
                                                        w, pos, rows, roww, link_int, link_flt, scratch, groups, fuse,
                                                        fv[FV_RTOL], prune)
            if n_out >= 0:  # fused: removed and re-solved (Fabric._fused_flush)
                for s in found:
                    free[iv[IV_NFREE]] = s
                    iv[IV_NFREE] += 1
                iv[IV_FLUSHES] += 1
                fv[FV_NEXT_T] = t_next
                if iv[IV_SERIES]:
                    ser_data = _series_out(n_out, now, link_int, link_flt, ser_row, ser_data, fv, iv)
                for s in found:
                    _drained(s, now, ti, tf, ci, cf, iv, ah, start, rec, pi, pf, ll, lw, core, ok, oa, okey_pos,
                             sk, sa, skey_pos, slot_task, slot_piece, group_task, gcount, groups, gfree)
                if iv[IV_NSTART] == 0:
                    if iv[IV_CONGESTION]:
                        nominal = link_flt[2]
                        _apply_offers(ok, oa, iv[IV_NOK], pi, ll, lw, core, off[0], off[1], off[4], nominal, now)
                        _apply_offers(sk, sa, iv[IV_NSK], pi, ll, lw, core, off[2], off[3], off[5], nominal, now)
                        iv[IV_NOK] = 0
                        iv[IV_NSK] = 0
                    _arm_timer(iv, fv)
                    continue
                # a successor flag was missing: the Fabric flushes at once
            elif found.shape[0] == 0:
                _arm_timer(iv, fv)
                continue
            else:
                for s in found:
                    rem[iv[IV_NREM]] = s
                    iv[IV_NREM] += 1
                if iv[IV_ARMED]:
                    continue  # the armed flush takes them
        st, ah, ser_data = _flush(fv[FV_NOW], ti, tf, ci, cf, ri, pi, pf, ll, lw, el, ew, core, off, ok, oa,
                                  okey_pos, sk, sa, skey_pos, slot_int, links, w, pos, num, rows, roww, link_int,
                                  link_flt, scratch, hkeys, hvals, stats, groups, free, gfree, slot_task, slot_piece,
                                  group_task, gcount, ah, pend, start, rem, need, xseeds, moves, rec, ser_row,
                                  ser_data, iv, fv, prune)
        if st == ST_ROUTES:
            iv[IV_ARMED] = 1  # the flush goes on at this instant once the policy has routed them
            return ST_ROUTES, ah, ser_data


@inner
def _schedule(s, now, kind, conn, amount, rate, delay, extra, same, busy, ah, nah, seq):
    """Task ``s`` is released at ``now``: its end goes on the event heap (``IdealFabric.send``: after
    the connection's earlier messages, at the pair's rate, plus its delay; a DELAY: after its
    amount), with SimPy's float arithmetic. Returns the heap."""
    if kind[s] == DELAY:
        t = now + amount[s]
    else:
        c = conn[s]
        if same[c]:
            t = now + 0.0
        else:
            start = max(now, busy[c])
            end = start + (amount[s] / rate[c] if amount[s] != 0.0 else 0.0)
            busy[c] = end
            t = now + (((end + delay[c]) + extra[s]) - now)
    if nah == ah.shape[0]:
        bigger = np.empty((2 * nah, 3))
        _copy_rows(bigger, ah, nah)
        ah = bigger
    _heap_push3(ah, nah, t, seq, s)
    return ah


@njit(**NO_REFCOUNT)
def same_routes(ri, pi, pf, ll, lw, old, new, out):
    """``out[i]``: whether route ``old[i]`` (-1: none) has the pieces of route ``new[i]`` (links, weights,
    fractions, delays; see :mod:`netsim.engine.routestore`)."""
    for i in range(old.shape[0]):
        r, s = old[i], new[i]
        out[i] = r == s
        if r < 0 or r == s or ri[RI_NP, r] != ri[RI_NP, s] or ri[RI_PATHS, r] != ri[RI_PATHS, s]:
            continue
        n = ri[RI_NP, r] + (1 if ri[RI_NP, r] > 1 else 0)
        same = True
        for k in range(n):
            p, q = ri[RI_P0, r] + k, ri[RI_P0, s] + k
            nl = pi[PI_NL, p]
            if nl != pi[PI_NL, q] or pf[PF_FRAC, p] != pf[PF_FRAC, q] or pf[PF_DELAY, p] != pf[PF_DELAY, q]:
                same = False
                break
            lp, lq = pi[PI_L0, p], pi[PI_L0, q]
            for j in range(nl):
                if ll[lp + j] != ll[lq + j] or lw[lp + j] != lw[lq + j]:
                    same = False
                    break
            if not same:
                break
        out[i] = same


@njit(cache=True, nogil=True)
def replay_kernel(kind, conn, amount, left, succ_ptr, succ_idx, rate, delay, extra, same):
    """Each task's end under :class:`~netsim.engine.ideal.IdealFabric` (see :func:`netsim.engine.ideal.replay`), and the last one."""
    n = kind.shape[0]
    times = np.full(n, np.nan)
    busy = np.zeros(rate.shape[0])
    ah = np.empty((64, 3))
    nah, seq = np.int64(0), np.int64(0)
    stack = np.empty((64, 2), np.int64)
    now = 0.0
    roots = np.flatnonzero(left == 0)
    # the roots released in task order, then each event in SimPy's order; a task that ends releases
    # its successors depth first (a JOIN ends at once: its own successors go before its siblings)
    for i in range(roots.shape[0] + n):
        if i < roots.shape[0]:
            task = roots[i]
            if kind[task] != JOIN:
                ah = _schedule(task, now, kind, conn, amount, rate, delay, extra, same, busy, ah, nah, seq)
                nah += 1
                seq += 1
                continue
        else:
            if nah == 0:
                break
            now = ah[0, 0]
            task = int(ah[0, 2])
            _heap_pop3(ah, nah)
            nah -= 1
        times[task] = now
        top = 1
        stack[0, 0], stack[0, 1] = task, succ_ptr[task]
        while top > 0:
            t, j = stack[top - 1, 0], stack[top - 1, 1]
            if j == succ_ptr[t + 1]:
                top -= 1
                continue
            stack[top - 1, 1] = j + 1
            s = succ_idx[j]
            left[s] -= 1
            if left[s] != 0:
                continue
            if kind[s] == JOIN:
                times[s] = now
                if top == stack.shape[0]:
                    bigger = np.empty((2 * top, 2), np.int64)
                    _copy_rows(bigger, stack, top)
                    stack = bigger
                stack[top, 0], stack[top, 1] = s, succ_ptr[s]
                top += 1
            else:
                ah = _schedule(s, now, kind, conn, amount, rate, delay, extra, same, busy, ah, nah, seq)
                nah += 1
                seq += 1
    return times, now


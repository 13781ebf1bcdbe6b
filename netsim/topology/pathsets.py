"""Equal-cost path sets of batches of GPU pairs as arrays: :meth:`Topology.paths` without a list per pair.

For GPUs on different hosts, :meth:`Topology.paths` lists ``[u + f + d for u in U for f in F for d in D]``:
``U`` the host-local paths from the source GPU to its NIC, ``F`` the fabric paths between the two
NICs (a port of each NIC and a fewest-hop switch path between the ports' switches, sorted), ``D``
the host-local paths from the destination NIC to its GPU. Path ``j`` of a pair is therefore
``(a, f, b) = unravel(j, (|U|, |F|, |D|))``. ``U`` and ``D`` are a host model's paths offset by the
host's first link id (*templates*). Which port pair and switch path each entry of ``F`` uses, and in
which order, depends only on the switches the two NICs' ports reach (a *class*: on a leaf-spine,
the pair of leaves). So a batch of pairs needs Python only for the few templates and classes it
meets; every per-pair step is numpy. Pairs on one host use a local template (and the trivial
class, one entry with no port and no switch), a GPU to itself the empty path.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from netsim.errors import NetsimError
from netsim.topology.nic import same_fabric

_INT = np.int64
#: perf: the slowest path of a pair with more paths than this is found from its parts' latencies
#: (one (U, D) pair at a time), not by listing every path's links (7,168 between two pods of a
#: Meta-like three-tier Clos).
LISTED_PATHS = 128


def ragged_arange(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, offset) of every element of segments of ``lengths``: ``owner`` the segment, ``offset``
    the position inside it.

    >>> [a.tolist() for a in ragged_arange(np.array([2, 0, 3]))]
    [[0, 0, 2, 2, 2], [0, 1, 0, 1, 2]]
    """
    lengths = np.asarray(lengths, dtype=_INT)
    total = int(lengths.sum())
    owner = np.repeat(np.arange(len(lengths), dtype=_INT), lengths)
    starts = np.cumsum(lengths) - lengths
    return owner, np.arange(total, dtype=_INT) - starts[owner]


def sorted_rows(rows: np.ndarray) -> np.ndarray:
    """The rows of a 2-D integer array in lexicographic order (as ``sorted`` orders tuples).

    >>> sorted_rows(np.array([[2, 0], [1, 5], [1, 3]])).tolist()
    [[1, 3], [1, 5], [2, 0]]
    """
    rows = np.asarray(rows, dtype=_INT)
    if len(rows) < 2 or not rows.shape[1]:
        return rows
    return rows[np.lexsort(rows.T[::-1])]


def _fill(out: np.ndarray, dest: np.ndarray, src: np.ndarray, length: np.ndarray, pool: np.ndarray,
          offset: np.ndarray | None = None) -> None:
    """``out[dest[i] + k] = pool[src[i] + k] (+ offset[i])`` for ``k < length[i]``, every ``i`` at once."""
    if not len(length) or not length.any():
        return
    owner, k = ragged_arange(length)
    values = pool[src[owner] + k]
    if offset is not None:
        values = values + offset[owner]
    out[dest[owner] + k] = values


def path_sums(latency: np.ndarray, ptr: np.ndarray, links: np.ndarray) -> np.ndarray:
    """Per path (CSR ``ptr``/``links``), the sum of ``latency`` over its links, bit for bit as
    :meth:`Topology.path_latency_s` computes it.

    CORRECTNESS: numpy sums a row of a 2-D array exactly as it sums a 1-D array of that length
    (``np.add.reduceat`` or zero-padding would not), so paths are summed in groups of one length.
    """
    lengths = np.diff(ptr)
    out = np.zeros(len(lengths))
    for length in np.unique(lengths).tolist():
        if length == 0:
            continue
        rows = np.flatnonzero(lengths == length)
        idx = ptr[rows][:, None] + np.arange(length, dtype=_INT)
        out[rows] = latency[links[idx]].sum(axis=1)
    return out


class PathIndex:
    """A topology's lookup tables for :class:`PathSets`, built once and grown as batches meet new
    templates and classes (see the module docstring)."""

    def __init__(self, topology):
        t = self.topology = topology
        self.latency = t.links.latency_s
        self.n_links = len(t.links)
        models: dict[int, int] = {}
        self.models = []
        for model, *_rest in t.hosts:
            if id(model) not in models:
                models[id(model)] = len(self.models)
                self.models.append(model)
        self.host_model = np.array([models[id(m)] for m, *_r in t.hosts], dtype=_INT)
        self.forwards = np.array([m.forward_rails for m in self.models], dtype=bool)
        self.host_first = np.array([first for _m, first, _b, _n in t.hosts], dtype=_INT)
        self.host_base = np.array([base for _m, _f, base, _n in t.hosts], dtype=_INT)
        max_nics = max((len(nics) for *_r, nics in t.hosts), default=1)
        self.host_nic = np.full((max(len(t.hosts), 1), max_nics), -1, dtype=_INT)
        for h, (*_r, nics) in enumerate(t.hosts):
            self.host_nic[h, :len(nics)] = nics
        self.gpu_local = np.arange(t.n_gpus, dtype=_INT) - self.host_first[t.gpu_host] if t.n_gpus else \
            np.zeros(0, dtype=_INT)
        # Hosts whose local links have the same latencies share an id (the latency of a path over
        # a template depends only on it).
        lat, patterns = t.links.latency_s, {}
        self.host_lat = np.array([patterns.setdefault(tuple(lat[base:base + m.n_local_links].tolist()), len(patterns))
                                  for m, _f, base, _n in t.hosts], dtype=_INT)
        self.n_host_lat = max(len(patterns), 1)
        self.gpu_own_r = np.array([m.gpu_nic[i] for m, *_r in t.hosts for i in range(m.n_gpus)], dtype=_INT)
        self.host_tcp_r = np.array([t.tcp_nic.get(h, -1) for h in range(len(t.hosts))], dtype=_INT)
        self.width = max([max_nics, *(m.n_gpus + m.n_nics + m.n_switches for m in self.models)]) + 1
        self._nic_tables()
        # Templates (host-local path lists) and classes (fabric path structures), grown on demand.
        self._templates: dict[int, int] = {}
        self._t_paths: list[list[tuple[int, ...]]] = [[()]]  # template 0: the empty path alone
        # A class is its entries' source ports, destination ports and switch paths (one a row), until
        # flattened; class 0 is the trivial one (no port, no switch).
        self._classes: dict[int, int] = {}
        self._c_new: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [
            (np.array([-1], dtype=_INT), np.array([-1], dtype=_INT), np.zeros((1, 0), dtype=_INT))]
        self._c_rep: list[int] = [-1]  # the source NIC each class was built from
        self._dirty = True

    def _nic_tables(self) -> None:
        """Per NIC node: profile, ports, the class signatures of both ends, the port latency patterns."""
        t = self.topology
        n_nodes = t.graph.number_of_nodes()
        profiles: dict = {}
        self.nic_profile = np.full(n_nodes, -1, dtype=_INT)
        for node, prof in t.nic_profile.items():
            self.nic_profile[node] = profiles.setdefault(prof, len(profiles))
        self.profiles = list(profiles)
        self.profile_latency = np.array([p.latency_s for p in self.profiles] or [0.0])
        self.native = np.array([[same_fabric(a, b) or a.transport == b.transport == "tcp" for b in self.profiles]
                                for a in self.profiles], dtype=bool).reshape(len(self.profiles), len(self.profiles))
        max_ports = max((len(p) for p in t.nic_ports.values()), default=1)
        self.port_up = np.full((n_nodes, max_ports), -1, dtype=_INT)
        self.port_down = np.full((n_nodes, max_ports), -1, dtype=_INT)
        self.sig_up = np.full(n_nodes, -1, dtype=_INT)
        self.sig_down = np.full(n_nodes, -1, dtype=_INT)
        self.lat_up = np.full(n_nodes, -1, dtype=_INT)
        self.lat_down = np.full(n_nodes, -1, dtype=_INT)
        sigs_up: dict = {}
        sigs_down: dict = {}
        lats: dict = {}
        self.sig_rep_up: list[int] = []  # a NIC of each signature (classes are built from representatives)
        self.sig_rep_down: list[int] = []
        lat = self.latency
        for node, ports in t.nic_ports.items():
            ups = [up for up, _sw, _down in ports]
            downs = [down for _up, _sw, down in ports]
            switches = tuple(sw for _up, sw, _down in ports)
            self.port_up[node, :len(ports)] = ups
            self.port_down[node, :len(ports)] = downs
            # CORRECTNESS: Topology.paths sorts (up, *switch path, down); the order of the ports'
            # link ids (their ranks) and the ports' switches fix that order, whatever the ids are.
            key = (switches, _ranks(ups))
            if key not in sigs_up:
                sigs_up[key] = len(sigs_up)
                self.sig_rep_up.append(node)
            self.sig_up[node] = sigs_up[key]
            key = (switches, _ranks(downs))
            if key not in sigs_down:
                sigs_down[key] = len(sigs_down)
                self.sig_rep_down.append(node)
            self.sig_down[node] = sigs_down[key]
            self.lat_up[node] = lats.setdefault(("u", tuple(lat[ups].tolist())), len(lats))
            self.lat_down[node] = lats.setdefault(("d", tuple(lat[downs].tolist())), len(lats))
        self.n_sig_down = max(len(sigs_down), 1)
        self.n_lat = len(lats)

    # ------------------------------------------------------------------ templates and classes
    def templates(self, kind: int, model: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Template ids of host-local path lists: kind 0 GPU ``x`` -> NIC ``y``, 1 NIC ``x`` -> GPU ``y``,
        2 GPU ``x`` -> GPU ``y`` (local indices in host model ``model``)."""
        w = self.width
        codes = ((kind * len(self.models) + model) * w + x) * w + y
        uniq, inverse = _factorize(codes)
        ids = np.empty(len(uniq), dtype=_INT)
        for i, code in enumerate(uniq.tolist()):
            got = self._templates.get(code)
            if got is None:
                rest, yy = divmod(code, w)
                rest, xx = divmod(rest, w)
                m = self.models[rest % len(self.models)]
                a, b = (xx, m.nic_node(yy)) if kind == 0 else ((m.nic_node(xx), yy) if kind == 1 else (xx, yy))
                got = self._templates[code] = len(self._t_paths)
                self._t_paths.append(m.local_paths(a, b))
                self._dirty = True
            ids[i] = got
        return ids[inverse]

    def classes(self, nic_s: np.ndarray, nic_d: np.ndarray) -> np.ndarray:
        """Class ids of NIC pairs (-1: no fabric path between them)."""
        codes = self.sig_up[nic_s] * self.n_sig_down + self.sig_down[nic_d]
        uniq, inverse = _factorize(codes)
        ids = np.empty(len(uniq), dtype=_INT)
        for i, code in enumerate(uniq.tolist()):
            got = self._classes.get(code)
            if got is None:
                su, sd = divmod(code, self.n_sig_down)
                got = self._classes[code] = self._new_class(self.sig_rep_up[su], self.sig_rep_down[sd])
            ids[i] = got
        return ids[inverse]

    def _new_class(self, nic_s: int, nic_d: int) -> int:
        """Build the class of NICs like ``nic_s`` -> ``nic_d``, exactly as Topology.paths orders them.

        perf: as arrays (a class between two pods of a Meta-like three-tier Clos has 7,168 entries).
        """
        t = self.topology
        ports_s, ports_d = t.nic_ports[nic_s], t.nic_ports[nic_d]
        rank_up = np.array(_ranks([up for up, _, _ in ports_s]), dtype=_INT)
        rank_down = np.array(_ranks([down for _, _, down in ports_d]), dtype=_INT)
        parts = [(p, q, t.switch_path_array(sw_a, sw_b)) for p, (_up, sw_a, _) in enumerate(ports_s)
                 for q, (_, sw_b, _down) in enumerate(ports_d)]
        parts = [(p, q, mids) for p, q, mids in parts if len(mids)]
        if not parts:
            return -1
        hops = min(mids.shape[1] for _p, _q, mids in parts)  # Topology.paths keeps the shortest
        parts = [(p, q, mids) for p, q, mids in parts if mids.shape[1] == hops]
        p = np.concatenate([np.full(len(mids), p, dtype=_INT) for p, _q, mids in parts])
        q = np.concatenate([np.full(len(mids), q, dtype=_INT) for _p, q, mids in parts])
        mids = np.concatenate([mids for _p, _q, mids in parts])
        # CORRECTNESS: Topology.paths sorts the tuples (up, *switch path, down); the ports' ranks
        # order their links, and no two entries have the same key, so this is that order (one port
        # pair: the order of its switch paths, already sorted).
        if len(parts) > 1:
            order = np.lexsort((rank_down[q], *mids.T[::-1], rank_up[p]))
            p, q, mids = p[order], q[order], mids[order]
        self._c_new.append((p, q, mids))
        self._c_rep.append(nic_s)
        self._dirty = True
        return len(self._c_rep) - 1

    def class_switches(self, cls: int) -> list[tuple[int, ...]]:
        """The switch nodes each entry of class ``cls`` crosses, in entry order."""
        if cls == 0:
            return [()]
        self._arrays()
        e = self.c_first[cls] + np.arange(self.c_count[cls], dtype=_INT)
        hops = int(self.e_len[e[0]])
        nodes = self.topology.links.dst[self.e_links[self.e_start[e][:, None] + np.arange(hops, dtype=_INT)]]
        first = [sw for _up, sw, _down in self.topology.nic_ports[self._c_rep[cls]]]
        return [(first[p], *row) for p, row in zip(self.e_p[e].tolist(), nodes.tolist())]

    #: The flat arrays of the templates and classes (see :meth:`_arrays`).
    _FLAT = ("t_count", "t_first", "tp_len", "tp_start", "tp_links", "tm_len", "tm_start", "tm_link", "tm_count",
             "c_count", "c_first", "e_p", "e_q", "e_len", "e_start", "e_links", "cm_len", "cm_start", "cm_kind",
             "cm_value", "cm_count")

    def _arrays(self) -> None:
        """Extend the flat arrays of the templates and classes with the ones added since the last call.

        perf: templates and classes are only ever appended, so only the new ones are flattened and
        appended, into buffers that double when full (a Llama-like iteration meets a few new classes at
        each of thousands of sends: rebuilding, or concatenating, everything each time was quadratic).
        """
        if not self._dirty:
            return
        if not hasattr(self, "_t_done"):
            self._t_done = 0
            self._bufs = {name: np.zeros(16, dtype=_INT) for name in self._FLAT}
            self._used = dict.fromkeys(self._FLAT, 0)
            for name in self._FLAT:
                setattr(self, name, self._bufs[name][:0])
        self._extend_templates(self._t_paths[self._t_done:])
        self._t_done = len(self._t_paths)
        self._extend_classes(self._c_new)
        self._c_new = []
        self._dirty = False

    def _append(self, name: str, values) -> None:
        """Append ``values`` to flat array ``name`` (amortised O(len(values)))."""
        values = np.asarray(values, dtype=_INT)
        used, buf = self._used[name], self._bufs[name]
        if used + len(values) > len(buf):
            grown = np.zeros(max(2 * len(buf), used + len(values)), dtype=_INT)
            grown[:used] = buf[:used]
            buf = self._bufs[name] = grown
        buf[used:used + len(values)] = values
        self._used[name] = used + len(values)
        setattr(self, name, buf[:used + len(values)])

    def _append_lengths(self, start: str, length: str, lengths: np.ndarray) -> None:
        """Append ``lengths`` to flat array ``length`` and where each starts (after the last) to ``start``."""
        before = getattr(self, start)
        offset = int(before[-1] + getattr(self, length)[-1]) if len(before) else 0
        self._append(start, offset + np.cumsum(lengths) - lengths)
        self._append(length, lengths)

    def _extend_templates(self, lists: list[list[tuple[int, ...]]]) -> None:
        if not lists:
            return
        paths = [p for lst in lists for p in lst]
        merged = [dict(sorted(Counter(lk for p in lst for lk in p).items())) for lst in lists]
        self._append_lengths("t_first", "t_count", np.array([len(lst) for lst in lists], dtype=_INT))
        self._append_lengths("tp_start", "tp_len", np.array([len(p) for p in paths], dtype=_INT))
        self._append("tp_links", [lk for p in paths for lk in p])
        self._append_lengths("tm_start", "tm_len", np.array([len(m) for m in merged], dtype=_INT))
        self._append("tm_link", [lk for m in merged for lk in m])
        self._append("tm_count", [c for m in merged for c in m.values()])

    def _extend_classes(self, classes: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
        if not classes:
            return
        self._append_lengths("c_first", "c_count", np.array([len(p) for p, _q, _m in classes], dtype=_INT))
        self._append("e_p", np.concatenate([p for p, _q, _m in classes]))
        self._append("e_q", np.concatenate([q for _p, q, _m in classes]))
        self._append_lengths("e_start", "e_len", np.concatenate([np.full(len(m), m.shape[1], dtype=_INT)
                                                                 for _p, _q, m in classes]))
        self._append("e_links", np.concatenate([m.reshape(-1) for _p, _q, m in classes]))
        # Per class, how many entries use each port and each switch link, as (kind, value, count):
        # the links (kind 1) ascending, then the source ports (kind 0), then the destination ports (2).
        kinds, values, counts = [], [], []
        for p, q, mids in classes:
            for kind, used in ((1, mids.reshape(-1)), (0, p[p >= 0]), (2, q[q >= 0])):
                value, count = np.unique(used, return_counts=True)
                kinds.append(np.full(len(value), kind, dtype=_INT))
                values.append(value)
                counts.append(count)
        self._append_lengths("cm_start", "cm_len", np.array([sum(len(v) for v in values[i:i + 3])
                                                             for i in range(0, len(values), 3)], dtype=_INT))
        self._append("cm_kind", np.concatenate(kinds))
        self._append("cm_value", np.concatenate(values))
        self._append("cm_count", np.concatenate(counts))

    # ------------------------------------------------------------------ batches
    def nics(self, src: np.ndarray, dst: np.ndarray, tcp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Local NIC indices (the transport rule of :meth:`Topology._nics_for`) of pairs on different hosts."""
        t = self.topology
        h_s, h_d = t.gpu_host[src], t.gpu_host[dst]
        r_s, r_d = self.gpu_own_r[src], self.gpu_own_r[dst]
        if self.forwards.any():  # rail-only hosts forward to the destination's rail (Topology._nics_for)
            r_s = np.where(self.forwards[self.host_model[h_s]], r_d, r_s)
        nic_s, nic_d = self.host_nic[h_s, r_s], self.host_nic[h_d, r_d]
        native = self.native[self.nic_profile[nic_s], self.nic_profile[nic_d]]
        use_tcp = ~native
        if t.tcp_nic:
            use_tcp |= tcp
        if use_tcp.any():
            t_s, t_d = self.host_tcp_r[h_s], self.host_tcp_r[h_d]
            missing = use_tcp & ((t_s < 0) | (t_d < 0))
            if missing.any():
                i = int(np.flatnonzero(missing)[0])
                t._nics_for(int(src[i]), int(dst[i]), bool(tcp[i]))  # raises the error a single pair gets
                raise AssertionError("unreachable: the transport rule has no NIC for this pair")
            r_s, r_d = np.where(use_tcp, t_s, r_s), np.where(use_tcp, t_d, r_d)
        return r_s, r_d

    def overheads_s(self, src, dst, tcp) -> np.ndarray:
        """Per-message overhead of each pair (:meth:`Topology.message_overhead_s`, vectorised)."""
        t = self.topology
        src, dst, tcp = _columns(src, dst, tcp)
        out = np.full(len(src), float(t.intra_overhead_s))
        rows = np.flatnonzero(t.gpu_host[src] != t.gpu_host[dst])
        if len(rows):
            r_s, _ = self.nics(src[rows], dst[rows], tcp[rows])
            nic_s = self.host_nic[t.gpu_host[src[rows]], r_s]
            out[rows] = self.profile_latency[self.nic_profile[nic_s]]
        return out

    def batch(self, src, dst, tcp=False) -> PathSets:
        """The path sets of pairs ``src[i] -> dst[i]`` (``tcp``: see :meth:`Topology.paths`)."""
        t = self.topology
        src, dst, tcp = _columns(src, dst, tcp)
        n = len(src)
        if n and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= t.n_gpus):
            raise IndexError(f"GPU ids must be in 0..{t.n_gpus - 1}")
        h_s, h_d = t.gpu_host[src], t.gpu_host[dst]
        m_s, m_d = self.host_model[h_s], self.host_model[h_d]
        ls, ld = self.gpu_local[src], self.gpu_local[dst]
        u = np.zeros(n, dtype=_INT)
        d = np.zeros(n, dtype=_INT)
        cls = np.zeros(n, dtype=_INT)
        nic_s = np.full(n, -1, dtype=_INT)
        nic_d = np.full(n, -1, dtype=_INT)
        local = np.flatnonzero((h_s == h_d) & (src != dst))
        if len(local):
            u[local] = self.templates(2, m_s[local], ls[local], ld[local])
        remote = np.flatnonzero(h_s != h_d)
        if len(remote):
            r_s, r_d = self.nics(src[remote], dst[remote], tcp[remote])
            u[remote] = self.templates(0, m_s[remote], ls[remote], r_s)
            d[remote] = self.templates(1, m_d[remote], r_d, ld[remote])
            nic_s[remote] = self.host_nic[h_s[remote], r_s]
            nic_d[remote] = self.host_nic[h_d[remote], r_d]
            got = self.classes(nic_s[remote], nic_d[remote])
            if (got < 0).any():
                i = int(remote[np.flatnonzero(got < 0)[0]])
                t.paths(int(src[i]), int(dst[i]), bool(tcp[i]))  # raises the error a single pair gets
                raise NetsimError(f"no path between GPU {src[i]} and GPU {dst[i]}")
            cls[remote] = got
        self._arrays()
        return PathSets(self, src, dst, tcp, u, d, cls, self.host_base[h_s], self.host_base[h_d], nic_s, nic_d)


def _factorize(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct codes ascending, index of each code among them), like ``np.unique(codes, return_inverse=True)``.

    perf: codes here are small non-negative integers: a table lookup instead of a sort.
    """
    if not len(codes) or codes.max() >= max(4 * len(codes), 1 << 16):
        return np.unique(codes, return_inverse=True)
    present = np.zeros(int(codes.max()) + 1, dtype=bool)
    present[codes] = True
    uniq = np.flatnonzero(present)
    lookup = np.empty(len(present), dtype=_INT)
    lookup[uniq] = np.arange(len(uniq), dtype=_INT)
    return uniq, lookup[codes]


def _ranks(values: list[int]) -> tuple[int, ...]:
    """The rank of each value among ``values`` (0 = smallest)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0] * len(values)
    for rank, i in enumerate(order):
        ranks[i] = rank
    return tuple(ranks)


def _columns(src, dst, tcp) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src = np.atleast_1d(np.asarray(src, dtype=_INT))
    dst = np.atleast_1d(np.asarray(dst, dtype=_INT))
    src, dst = np.broadcast_arrays(src, dst)
    tcp = np.broadcast_to(np.asarray(tcp, dtype=bool), src.shape)
    return src, dst, tcp


class PathSets:
    """The equal-cost paths of a batch of GPU pairs (row ``i``: ``src[i] -> dst[i]``), as arrays.

    Path ``j`` of row ``i`` is ``Topology.paths(src[i], dst[i], tcp[i])[j]``; ``n[i]`` is how many
    there are. Built by :meth:`Topology.path_sets`.

    Examples
    --------
    >>> from netsim.topology import leaf_spine
    >>> topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1,
    ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    >>> ps = topo.path_sets([0, 1], [1, 1])
    >>> ps.n.tolist()
    [2, 1]
    >>> ptr, links = ps.links([1, 0])
    >>> links[ptr[0]:ptr[1]].tolist() == list(topo.paths(0, 1)[1]), ptr[1:].tolist()
    (True, [4, 4])
    """

    def __init__(self, index: PathIndex, src, dst, tcp, u, d, cls, base_s, base_d, nic_s, nic_d):
        self.index = index
        self.src, self.dst, self.tcp = src, dst, tcp
        self.u, self.d, self.cls = u, d, cls
        self.base_s, self.base_d, self.nic_s, self.nic_d = base_s, base_d, nic_s, nic_d
        self.n_u, self.n_f, self.n_d = index.t_count[u], index.c_count[cls], index.t_count[d]
        #: Number of equal-cost paths of each row.
        self.n = self.n_u * self.n_f * self.n_d

    def __len__(self) -> int:
        return len(self.src)

    def take(self, rows) -> PathSets:
        """The path sets of rows ``rows`` (an index array) only."""
        rows = np.asarray(rows, dtype=_INT)
        return PathSets(self.index, *(a[rows] for a in (self.src, self.dst, self.tcp, self.u, self.d, self.cls,
                                                        self.base_s, self.base_d, self.nic_s, self.nic_d)))

    @property
    def overhead_s(self) -> np.ndarray:
        """Per-message overhead of each row (:meth:`Topology.message_overhead_s`)."""
        ix = self.index
        out = np.full(len(self), float(ix.topology.intra_overhead_s))
        remote = self.nic_s >= 0
        out[remote] = ix.profile_latency[ix.nic_profile[self.nic_s[remote]]]
        return out

    def entry(self, j) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(U index, F index, D index) of path ``j`` of each row."""
        j = np.broadcast_to(np.asarray(j, dtype=_INT), self.src.shape)
        fd = self.n_f * self.n_d
        a = j // fd
        rest = j - a * fd
        f = rest // self.n_d
        return a, f, rest - f * self.n_d

    def links(self, j) -> tuple[np.ndarray, np.ndarray]:
        """Links of path ``j[i]`` of each row ``i``, in path order, as a CSR ``(ptr, links)``."""
        ix = self.index
        a, f, b = self.entry(j)
        if len(self) and (np.any(a < 0) or np.any(a >= self.n_u)):
            raise IndexError("path index out of range")
        pu, pd_ = ix.t_first[self.u] + a, ix.t_first[self.d] + b
        e = ix.c_first[self.cls] + f
        p, q = ix.e_p[e], ix.e_q[e]
        l1, l3, l5 = ix.tp_len[pu], ix.e_len[e], ix.tp_len[pd_]
        has_p, has_q = (p >= 0).astype(_INT), (q >= 0).astype(_INT)
        ptr = np.zeros(len(self) + 1, dtype=_INT)
        np.cumsum(l1 + has_p + l3 + has_q + l5, out=ptr[1:])
        out = np.empty(int(ptr[-1]), dtype=_INT)
        pos = ptr[:-1]
        _fill(out, pos, ix.tp_start[pu], l1, ix.tp_links, self.base_s)
        pos = pos + l1
        rows = np.flatnonzero(has_p)
        out[pos[rows]] = ix.port_up[self.nic_s[rows], p[rows]]
        pos = pos + has_p
        _fill(out, pos, ix.e_start[e], l3, ix.e_links)
        pos = pos + l3
        rows = np.flatnonzero(has_q)
        out[pos[rows]] = ix.port_down[self.nic_d[rows], q[rows]]
        pos = pos + has_q
        _fill(out, pos, ix.tp_start[pd_], l5, ix.tp_links, self.base_d)
        return ptr, out

    def latency_s(self, ptr: np.ndarray, links: np.ndarray) -> np.ndarray:
        """Latency of each path of a CSR (as :meth:`Topology.path_latency_s`)."""
        return path_sums(self.index.latency, ptr, links)

    def all_links(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every path of every row: (row of each path, ptr, links), rows in order, paths in order."""
        row, j = ragged_arange(self.n)
        ptr, links = self.take(row).links(j)
        return row, ptr, links

    def merged(self, drop: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row, the links of its paths' union, ascending, with how many paths cross each:
        a CSR ``(ptr, links, counts)``, computed from the product structure without listing paths.
        ``drop`` (a mask over links) leaves out the switch-to-switch links it marks."""
        ix = self.index
        n = len(self)
        lu, lc, ld = ix.tm_len[self.u], ix.cm_len[self.cls], ix.tm_len[self.d]
        entries = None
        if drop is not None:  # keep a class's entries that are ports, or links not dropped
            row, k = ragged_arange(lc)
            entries = ix.cm_start[self.cls][row] + k
            kept = (ix.cm_kind[entries] != 1) | ~drop[ix.cm_value[entries]]
            entries, lc = entries[kept], np.bincount(row[kept], minlength=n).astype(_INT)
        ptr = np.zeros(n + 1, dtype=_INT)
        np.cumsum(lu + lc + ld, out=ptr[1:])
        link = np.empty(int(ptr[-1]), dtype=_INT)
        count = np.empty(int(ptr[-1]), dtype=_INT)
        # Each row: its source template's links, its class's, its destination template's (each part
        # ascending, so the sort below mostly merges runs).
        for tmpl, base, times, before in ((self.u, self.base_s, self.n_f * self.n_d, ptr[:-1]),
                                          (self.d, self.base_d, self.n_u * self.n_f, ptr[:-1] + lu + lc)):
            row, k = ragged_arange(ix.tm_len[tmpl])
            at = ix.tm_start[tmpl][row] + k
            dest = before[row] + k
            link[dest] = ix.tm_link[at] + base[row]
            count[dest] = ix.tm_count[at] * times[row]
        row, k = ragged_arange(lc)
        at = ix.cm_start[self.cls][row] + k if entries is None else entries
        dest = ptr[row] + lu[row] + k
        kind, value = ix.cm_kind[at], ix.cm_value[at]
        out = value.copy()
        up, down = kind == 0, kind == 2
        out[up] = ix.port_up[self.nic_s[row[up]], value[up]]
        out[down] = ix.port_down[self.nic_d[row[down]], value[down]]
        link[dest] = out
        count[dest] = ix.cm_count[at] * (self.n_u * self.n_d)[row]
        owner = np.repeat(np.arange(n, dtype=_INT), np.diff(ptr))
        key = owner * ix.n_links + link
        order = np.argsort(key, kind="stable")  # perf: timsort merges the presorted parts
        key = key[order]
        if len(key) > 1 and np.any(key[1:] == key[:-1]):  # a link in two parts: merge the counts
            keys, inverse = np.unique(key, return_inverse=True)
            counts = np.bincount(inverse, weights=count[order]).astype(_INT)
            np.cumsum(np.bincount(keys // ix.n_links, minlength=n), out=ptr[1:])
            return ptr, keys % ix.n_links, counts
        return ptr, link[order], count[order]

    def max_latency_s(self) -> np.ndarray:
        """Latency of the slowest path of each row, bit for bit as the max of :meth:`Topology.path_latency_s`.

        Rows whose paths have the same sequences of link latencies (same templates, class, port
        latencies and host-link latencies) share the value: it is computed once per distinct
        sequence, from one row.
        """
        ix = self.index
        remote = self.nic_s >= 0
        gpu_host = ix.topology.gpu_host
        columns = [self.u, self.d, self.cls, np.where(remote, ix.lat_up[self.nic_s] + 1, 0),
                   np.where(remote, ix.lat_down[self.nic_d] + 1, 0), ix.host_lat[gpu_host[self.src]],
                   ix.host_lat[gpu_host[self.dst]]]
        sizes = [len(ix.t_count), len(ix.t_count), len(ix.c_count), ix.n_lat + 1, ix.n_lat + 1, ix.n_host_lat,
                 ix.n_host_lat]
        if float(np.prod(np.array(sizes, dtype=float))) < 2.0 ** 62:
            key = np.zeros(len(self), dtype=_INT)
            for column, size in zip(columns, sizes):
                key = key * size + column
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        else:
            _, first, inverse = np.unique(np.stack(columns, axis=1), axis=0, return_index=True,
                                          return_inverse=True)
        reps = self.take(first)
        out = np.zeros(len(reps))
        listed = np.flatnonzero(reps.n <= LISTED_PATHS)
        if len(listed):
            few = reps.take(listed)
            _row, ptr, links = few.all_links()
            lat = self.latency_s(ptr, links)
            out[listed] = np.maximum.reduceat(lat, np.cumsum(few.n) - few.n)
        for i in np.flatnonzero(reps.n > LISTED_PATHS).tolist():
            out[i] = reps._max_latency_of_row(i)
        return out[inverse.reshape(-1)]

    def _max_latency_of_row(self, i: int) -> float:
        """:meth:`max_latency_s` of row ``i`` from the latencies of its parts, without listing its links.

        CORRECTNESS: the entries of a class have one length (the fewest hops), so each (U path, D
        path) pair gives a C-contiguous matrix of link latencies, one path a row, summed by row as
        :func:`path_sums` sums them.
        """
        ix, lat = self.index, self.index.latency
        e = ix.c_first[self.cls[i]] + np.arange(ix.c_count[self.cls[i]], dtype=_INT)
        middle = [lat[ix.e_links[ix.e_start[e][:, None] + np.arange(ix.e_len[e[0]], dtype=_INT)]]]
        if ix.e_p[e[0]] >= 0:  # (a remote class: every entry has both ports)
            middle = [lat[ix.port_up[self.nic_s[i], ix.e_p[e]]][:, None], *middle,
                      lat[ix.port_down[self.nic_d[i], ix.e_q[e]]][:, None]]
        best = -np.inf
        for a in range(int(self.n_u[i])):
            pu = ix.t_first[self.u[i]] + a
            before = lat[ix.tp_links[ix.tp_start[pu]:ix.tp_start[pu] + ix.tp_len[pu]] + self.base_s[i]]
            for b in range(int(self.n_d[i])):
                pd_ = ix.t_first[self.d[i]] + b
                after = lat[ix.tp_links[ix.tp_start[pd_]:ix.tp_start[pd_] + ix.tp_len[pd_]] + self.base_d[i]]
                rows = np.concatenate([np.broadcast_to(before, (len(e), len(before))), *middle,
                                       np.broadcast_to(after, (len(e), len(after)))], axis=1)
                best = max(best, float(rows.sum(axis=1).max()) if rows.shape[1] else 0.0)
        return best

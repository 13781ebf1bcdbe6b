"""Closed-form counts of what a spec will create, without building anything (for the pre-flight).

The fabric's shape comes from its family (:func:`netsim.fabrics.fabric_shape`); here, each
collective call's messages and connections (:func:`collective_call`, the algorithms of
:mod:`netsim.collectives`), and a workload's totals over communicators, sequences, training iterations and jobs (:func:`count_workload`). Tests hold
every count to what a run really builds; where the exact count needs the placement (which
GPUs share a host or a leaf) it is an upper bound, and the code says so.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from netsim.collectives.nccl import (
    CHANNEL_ALGORITHMS,
    CHANNELS_PER_NIC,
    FLUID,
    MAX_AUTO_CHANNELS,
    MODELS,
    CallSettings,
    CollectiveModel,
    fabric_defaults,
)
from netsim.collectives.nccl_tuning import CallProtocol
from netsim.collectives.tree import DEFAULT_TREE_CHUNK as TREE_CHUNK
from netsim.config import ExperimentSpec, SequenceWorkload, TrainingWorkload
from netsim.fabrics import FabricShape, fabric_shape  # noqa: F401  (fabric_shape: re-exported)

# ------------------------------------------------------------------ one collective call, in closed form


@dataclass(frozen=True)
class CallCounts:
    """One collective call over ``n`` ranks: what it sends and the state it keeps."""

    messages: int
    connections: int
    family: str        #: calls of one family on one communicator share their connections
    pattern: str       #: which GPU pairs talk: ``neighbour`` (rank order), ``all`` pairs, or ``other``
    pairs: int         #: distinct (src, dst) GPU pairs
    in_flight: int     #: most messages posted and not delivered at once (upper bound)
    per_rank: int      #: most messages one rank transmits at once


def _chunks(piece: float, chunk: float | None) -> int:
    return max(1, math.ceil(piece / chunk)) if chunk else 1


def _log2(n: int) -> int:
    return max(1, math.ceil(math.log2(n)))


def _ring(n: int, steps: int, size: float, c: int, chunk: float | None) -> tuple[int, int]:
    """(messages, in flight) of ``steps`` ring steps on ``c`` channels (:func:`netsim.collectives.ring.ring_steps`)."""
    k = _chunks(size / (n * c), chunk)
    return c * n * steps * k, c * n * k


def _hierarchical(n: int, size: float, c: int, chunk: float | None, per_host: int) -> CallCounts:
    """Three ring phases over ``g`` ranks per host. ``per_host`` > 0: exactly that many ranks per host
    (a contiguous placement); < 0: at most ``-per_host``, and since the placement decides ``g`` each
    count is the largest over every ``g`` that divides ``n`` and fits (an upper bound)."""
    options = [per_host] if per_host > 0 and n % per_host == 0 else \
        [g for g in _divisors(n) if g <= abs(per_host)] or [1]
    messages = flight = conns = 0
    for g in options:
        h = n // g
        intra = _ring(g, g - 1, size, c, chunk) if g > 1 else (0, 0)
        inter = _ring(h, 2 * (h - 1), size / g, c, chunk) if h > 1 else (0, 0)
        messages = max(messages, h * 2 * intra[0] + g * inter[0])
        flight = max(flight, h * intra[1], g * inter[1])
        conns = max(conns, (g > 1) * 2 * c * n + (h > 1) * c * n)
    return CallCounts(messages, conns, "hierarchical", "neighbour", min(3 * c * n, n * (n - 1)), flight, 2 * c)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def collective_call(op: str, algorithm: str, n: int, size: float, channels: int = 1, chunk: float | None = None,
                    per_host: int = -1) -> CallCounts:
    """Messages, connections and live state of one ``op``/``algorithm`` call over ``n`` ranks.

    Closed forms of the algorithms in :mod:`netsim.collectives` (a test holds them to the
    messages the engine counts). ``per_host`` sets the hierarchical allreduce's layout: ranks per
    host, or at most ``-per_host`` when the placement is not known to fill hosts in order.

    Examples
    --------
    >>> collective_call("allreduce", "ring", 8, 2**20, channels=2).messages   # 2 x 8 ranks x 2(8-1) steps
    224
    >>> collective_call("alltoall", "direct", 8, 2**20).connections
    56
    """
    c = channels
    if n < 2:
        return CallCounts(0, 0, algorithm, "other", 0, 0, 0)
    if algorithm == "ring" and op in ("allreduce", "reduce_scatter", "allgather"):
        steps = 2 * (n - 1) if op == "allreduce" else n - 1
        messages, flight = _ring(n, steps, size, c, chunk)
        return CallCounts(messages, c * n, "ring", "neighbour", min(c * n, n * (n - 1)), flight, c)
    if algorithm == "ring":  # broadcast / reduce: a pipelined chain
        k = _chunks(size / c, chunk)
        return CallCounts(c * (n - 1) * k, c * (n - 1), f"chain-{op}", "neighbour", n - 1, c * (n - 1) * k, c)
    if algorithm == "tree":
        k = _chunks(size / 2 / c, chunk or TREE_CHUNK)
        messages = 4 * c * (n - 1) * k
        # the leaves (half the ranks in each tree) post all their chunks at once; inner ranks forward
        return CallCounts(messages, 4 * c * (n - 1), "tree", "other", min(4 * (n - 1), n * (n - 1)),
                          min(messages, c * n * k), 6 * c)
    if algorithm == "hierarchical" and op in ("alltoall", "alltoallv"):
        # gather to the g - 1 other GPUs of the host, then exchange with the h - 1 other hosts' rail
        # peers; where the placement is not known, the worst layout (one of g or h is 1)
        options = [per_host] if per_host > 0 and n % per_host == 0 else \
            [g for g in _divisors(n) if g <= abs(per_host)] or [1]
        peers = max(g + n // g - 2 for g in options)
        return CallCounts(c * n * peers, c * n * peers, "all-pairs", "all", n * peers, c * n * peers,
                          c * (max(options) - 1) + c * (n // min(options) - 1))
    if algorithm == "hierarchical":
        return _hierarchical(n, size, c, chunk, per_host)
    if algorithm in ("recursive_doubling", "halving_doubling"):
        steps = _log2(n) * (2 if algorithm == "halving_doubling" else 1)
        return CallCounts(c * n * steps, c * n * _log2(n), "xor", "other", n * _log2(n), 2 * c * n, c)
    if algorithm in ("direct", "pairwise"):
        rounds = 2 if op == "allreduce" else 1
        pairs = n * (n - 1)
        flight = c * pairs if algorithm == "direct" else 2 * c * n
        return CallCounts(c * rounds * pairs, c * pairs, "all-pairs", "all", pairs, flight,
                          c * (n - 1) if algorithm == "direct" else c)
    if algorithm == "star":
        return CallCounts(2 * c * (n - 1), 2 * c * (n - 1), "star", "other", 2 * (n - 1), c * (n - 1),
                          c * (n - 1))
    if algorithm == "binomial":
        return CallCounts(c * (n - 1), c * (n - 1), f"binomial-{op}", "other", n - 1, c * n, c)
    # An algorithm registered after this module was written: assume all pairs every step (upper bound).
    return CallCounts(2 * c * n * (n - 1), c * n * (n - 1), algorithm, "all", n * (n - 1), c * n * (n - 1),
                      c * (n - 1))


# ------------------------------------------------------------------ communicators and workloads

#: Policies whose messages are one flow over every equal-cost path (its incidence holds them all).
SPRAYED = ("spray",)
#: Policies whose messages load every uplink of their domain at once: sprayed, or cut into a piece per
#: uplink (Ethereal, and min-split's pieces over its least-loaded paths).
SPREAD = SPRAYED + ("ethereal", "min-split")

#: How a placement lays ranks out: hosts, domains and pods in rank order (``sequential``, ``holmes``, and
#: ``topology`` on a free fabric: whole hosts, leaf by leaf, pod by pod), hosts filled in rank order but
#: taken in random order (random by host), or scattered (random by GPU).
LAYOUTS = {"sequential": "ordered", "holmes": "ordered", "topology": "ordered"}


def _layout(policy) -> str:
    if policy.type in LAYOUTS:
        return LAYOUTS[policy.type]
    return "hosts" if policy.type == "random" and policy.options.get("by") == "host" else "scattered"


@dataclass(frozen=True)
class RankSet:
    """A communicator before placement: its ranks (indices into the job's ranks) and their layout.

    The rank distance between consecutive members (``stride``) says, with a placement that fills
    hosts in rank order, how many members share a host (or a domain).
    """

    job: int
    members: range | tuple
    layout: str

    @property
    def n(self) -> int:
        return len(self.members)

    @property
    def stride(self) -> int:
        m = self.members
        if len(m) < 2:
            return 1
        return abs(m.step) if isinstance(m, range) else abs(m[1] - m[0])

    def _block(self, gpus: int) -> int:
        return 1 if self.stride >= gpus else max(1, min(self.n, gpus // self.stride))

    def per_host(self, shape: FabricShape) -> int:
        """Members on one host."""
        return 1 if self.layout == "scattered" else self._block(shape.gpus_per_host)

    def per_domain(self, shape: FabricShape) -> int:
        """Members in one domain; where the placement scatters hosts, twice the even share (at least a host's)."""
        if self.layout == "ordered":
            return self._block(shape.gpus_per_domain)
        share = math.ceil(2 * self.n * shape.gpus_per_domain / max(shape.gpus, 1))
        return min(self.n, shape.gpus_per_domain, max(self.per_host(shape), share))

    def per_pod(self, shape: FabricShape) -> int:
        """Members in one pod (all of them on a fabric without pods); where the placement scatters hosts,
        twice the even share (at least a domain's)."""
        if not shape.gpus_per_pod:
            return self.n
        if self.layout == "ordered":
            return self._block(shape.gpus_per_pod)
        share = math.ceil(2 * self.n * shape.gpus_per_pod / max(shape.gpus, 1))
        return min(self.n, shape.gpus_per_pod, max(self.per_domain(shape), share))

    def select(self, selector) -> RankSet:
        """The sub-communicator a ``ranks:`` selector picks (:func:`netsim.workload.select_ranks`)."""
        m = self.members
        if selector is None:
            return self
        if isinstance(selector, int):
            return RankSet(self.job, m[:selector], self.layout)
        if isinstance(selector, list):
            picked = tuple(m[i] for i in selector if i < len(m))
            even = len({b - a for a, b in zip(picked, picked[1:])}) <= 1
            return RankSet(self.job, picked, self.layout if even else "scattered")
        parts = [int(p) if p.strip() else None for p in selector.split(":")]
        if len(parts) == 3 and parts[2] == 0:
            return self  # refused when the workload is planned
        return RankSet(self.job, m[slice(*parts)], self.layout)


class Busy(NamedTuple):
    """How busy a part of a workload keeps the fabric at its busiest (upper bounds)."""

    flight: int   #: messages posted and not yet delivered
    nic: int      #: flows through one NIC port
    core: int     #: flows on one switch-to-switch link

    def then(self, other: Busy, concurrent: bool) -> Busy:
        """This part and ``other``, run together (their loads add up) or one after the other."""
        return Busy(*(a + b if concurrent else max(a, b) for a, b in zip(self, other)))


@dataclass
class Tally:
    """What a workload adds up to over a run (:func:`count_workload`)."""

    shape: FabricShape
    sprayed: bool              #: the routing spreads every message over all its uplinks (:data:`SPREAD`)
    model: CollectiveModel = FLUID  #: how calls are built (``channels: auto``, the ring slice)
    messages: int = 0
    calls: int = 0
    connections: dict = field(default_factory=dict)  #: (communicator, family, channels) -> connections
    pairs: dict = field(default_factory=dict)        #: (communicator, family) -> (host, near, pod, far) GPU pairs
    ideal_keys: int = 0        #: distinct call shapes (the ideal model computes and caches each once)
    ideal_key_bytes: int = 0   #: their rank lists
    largest_call: int = 0      #: most messages in flight in one call (its ideal replay holds as many)
    in_flight: int = 0         #: most messages in flight at once over the run (upper bound)
    crossing: int = 0          #: most flows on one link at once (upper bound)
    #: a NIC's line rate and a GPU's NVLink rate (GB/s; 0: not known from the file), for NCCL's
    #: choice of algorithm and protocol (:meth:`resolve`)
    nic_GBps: float = 0.0
    gpu_intra_GBps: float = 0.0
    #: the slowest and fastest NIC and intra-host rates (GB/s) the file names ((0, 0): none)
    nic_range: tuple[float, float] = (0.0, 0.0)
    intra_range: tuple[float, float] = (0.0, 0.0)
    sampled: dict = field(default_factory=dict)   #: :meth:`_sampled`'s picks, per call shape

    @property
    def connection_count(self) -> int:
        """Distinct connections (an upper bound where calls of different algorithms share some)."""
        return sum(self.connections.values())

    @property
    def pair_counts(self) -> tuple[int, int, int, int]:
        """GPU pairs that talk: (same host, same domain, same pod, far)."""
        return tuple(sum(p[i] for p in self.pairs.values()) for i in range(4))

    def resolve(self, comm: RankSet, op: str, algorithm: str, protocol: str, size: float,
                channels: int | str) -> list[tuple[str, CallProtocol | None]]:
        """The algorithm and protocol a call runs (:meth:`CollectiveModel.pick`): NCCL's pick where the
        communicator's hosts and the fabric's rates are known (fabrics of uniform hosts with ``nic``,
        ``nics_per_host`` and ``intra_host``); otherwise every pick over the range of what is not
        known (:meth:`_sampled`), for :meth:`call` to count the most of each."""
        if comm.n < 2:   # nothing to time: the ring, Simple's steps
            return [self.model.pick(op, algorithm, protocol, size, comm.n, 1, lambda: None)]
        gph = self.shape.gpus_per_host
        ordered = comm.layout in ("ordered", "hosts")
        nodes, rails = _rails_per_host(comm.members, gph, self._nics()) if ordered else (0, 0)
        bus = rails * self.nic_GBps if nodes > 1 else self.gpu_intra_GBps
        if ordered and self.nic_GBps > 0 and nodes >= 1 and bus > 0:
            timing = (self.settle(comm, "ring", channels, None)[0], bus, True)
            return [self.model.pick(op, algorithm, protocol, size, comm.n, nodes, lambda: timing)]
        return self._sampled(comm, op, algorithm, protocol, size, channels, nodes)

    def _nics(self) -> int:
        return max(1, -(-self.shape.gpus_per_host // max(self.shape.gpus_per_nic, 1)))

    def _sampled(self, comm: RankSet, op: str, algorithm: str, protocol: str, size: float, channels: int | str,
                 nodes: int) -> list[tuple[str, CallProtocol | None]]:
        """Every pick NCCL's model makes for the call over what the pre-flight does not know: the
        nodes (1, 2 or every rank on its own; ``nodes`` when known), the bus bandwidth (12 rates from
        the slowest NIC or NVLink rate the file names to its fastest times the NICs of a host; 0.5 to
        2,000 GB/s when it names none), the ring channels (as asked; for ``auto`` 1 inside a host,
        else 2 and the most) and NVLink or not."""
        gph = self.shape.gpus_per_host
        options = (nodes,) if nodes else tuple(k for k in {1, 2, comm.n} if 1 <= k <= comm.n and (k > 1 or comm.n <= gph))
        most = self.settle(comm, "ring", channels, None)[0]
        key = (op, algorithm, protocol, size, comm.n, options, most)
        if key in self.sampled:
            return self.sampled[key]
        picks: set[tuple[str, CallProtocol | None]] = set()
        for n_nodes in options:
            lo, hi = self.nic_range if n_nodes > 1 else self.intra_range
            lo, hi = (lo, hi * (self._nics() if n_nodes > 1 else gph)) if lo > 0 else (0.5, 2000.0)
            rings = {most} if channels != "auto" else ({1} if n_nodes == 1 else {2, most})
            for bus in np.geomspace(lo, max(hi, lo), 12):
                for ring_channels in sorted(rings):
                    for nvlink in (True, False):
                        timing = (ring_channels, float(bus), nvlink)
                        picks.add(self.model.pick(op, algorithm, protocol, size, comm.n, n_nodes, lambda: timing))
        out = self.sampled[key] = sorted(picks, key=lambda p: (p[0], p[1].name if p[1] is not None else ""))
        return out

    def call(self, comm: RankSet, op: str, algorithm: str, size: float, channels: int, chunk: float | None,
             repeats: int, groups: int = 1, protocol: str | None = None) -> tuple[CallCounts, Busy]:
        """Count ``repeats`` calls on each of ``groups`` communicators shaped like ``comm``; returns the
        call and how busy one of them keeps the fabric (upper bounds). ``protocol``: the workload's
        (``None``: calls that take none). Where the choice of an ``auto`` call is not known before
        the run, the most of each count over the choices."""
        shape = self.shape
        g, d = comm.per_host(shape), comm.per_domain(shape)
        choices = [(algorithm, None)] if protocol is None else \
            self.resolve(comm, op, algorithm, protocol, size, channels)
        calls = []
        for algorithm, proto in choices:
            n_channels, n_chunk = self.settle(comm, algorithm, channels, chunk, op, size, proto)
            wire = proto.wire if proto is not None else 1.0
            calls.append((n_channels, collective_call(op, algorithm, comm.n, size * wire, n_channels,
                                                      n_chunk * wire if n_chunk is not None else None,
                                                      per_host=g if comm.layout != "scattered" else -shape.gpus_per_host)))
        channels, call = max(calls, key=lambda c: (c[1].messages, c[1].in_flight))
        if len(calls) > 1:
            call = replace(call, **{f: max(getattr(c, f) for _ch, c in calls)
                                    for f in ("messages", "connections", "pairs", "in_flight", "per_rank")})
        self.messages += call.messages * repeats * groups
        self.calls += repeats * groups
        key = (comm.job, comm.members, call.family, channels, groups)
        self.connections[key] = max(self.connections.get(key, 0), call.connections * groups)
        pairs = self.locality(comm, call)
        old = self.pairs.get(key[:3], (0, 0, 0, 0))
        self.pairs[key[:3]] = tuple(max(a, b * groups) for a, b in zip(old, pairs))
        self.ideal_keys += groups
        self.ideal_key_bytes += groups * comm.n * 8
        self.largest_call = max(self.largest_call, call.in_flight)
        # Flows on one link: a NIC carries its GPUs' flows; a domain's flows leave over its uplinks
        # (all of them at once when sprayed, spread by hashing otherwise).
        nic = call.per_rank * min(g, shape.gpus_per_nic)
        if call.pattern == "neighbour":  # a lane leaves a domain once per run of consecutive ranks in it
            out = max(1, call.pairs // max(comm.n, 1)) * (1 if comm.layout == "ordered" else -(-d // g))
            out *= comm.layout != "ordered" or comm.n > d  # a ring inside one domain never leaves it
        else:
            out = call.per_rank * d * (comm.n - d) // max(comm.n - 1, 1)
        out = min(out, call.in_flight)
        return call, Busy(call.in_flight, nic, out if self.sprayed else 2 * -(-out // shape.uplinks))

    def settle(self, comm: RankSet, algorithm: str, channels: int | str, chunk: float | None, op: str = "allreduce",
               size: float = 0.0, protocol: CallProtocol | None = None) -> tuple[int, float | None]:
        """The channels and slice the model builds a call with, from the fabric's shape: ``auto`` as
        :func:`netsim.collectives.nccl.auto_channels` with the communicator's GPUs on a host each on
        their own NIC, up to the host's NICs (an upper bound)."""
        if channels == "auto":
            if not self.model.auto_channels or algorithm not in (*CHANNEL_ALGORITHMS, "auto"):
                channels = 1  # (``auto``: counted as the ring, NCCL's choice with the most channels)
            else:
                gph = self.shape.gpus_per_host
                nics = max(1, -(-gph // max(self.shape.gpus_per_nic, 1)))
                if comm.layout in ("ordered", "hosts"):  # rank r on local GPU r mod gph, its NIC that mod nics
                    hosts, rails = _rails_per_host(comm.members, gph, nics)
                    channels = 1 if hosts < 2 else min(MAX_AUTO_CHANNELS, CHANNELS_PER_NIC * rails)
                else:  # hosts unknown: members may share a host, each on its own NIC (an upper bound)
                    channels = min(MAX_AUTO_CHANNELS, CHANNELS_PER_NIC * min(comm.n, gph, nics))
        how = CallSettings(int(channels), chunk, self.model.rails, self.model.chunk_bytes, protocol=protocol)
        return int(channels), how.slice_bytes(op, algorithm, size, comm.n)

    def locality(self, comm: RankSet, call: CallCounts) -> tuple[int, int, int, int]:
        """(same-host, same-domain, same-pod, far) GPU pairs of ``call``: rank-order neighbours cross a
        block's boundary once per block spanned, all pairs split by where their ends are. Pairs count
        as far unless the placement keeps domains and pods in rank order and the count says they share
        one (upper bounds: far pairs have the most paths)."""
        n, shape, pairs = comm.n, self.shape, call.pairs
        g = comm.per_host(shape)
        d = comm.per_domain(shape) if comm.layout == "ordered" else g
        pod = comm.per_pod(shape) if comm.layout == "ordered" else d

        def within(members: int) -> int:  # pairs whose two ends share a block of ``members`` consecutive ranks
            if members <= 1:
                return 0
            if call.pattern == "all":
                return n * (members - 1)
            if call.pattern == "neighbour":  # each lane (a ring's channel, a chain's direction) leaves a block once
                spans = -(-n // members)
                return pairs - (min(pairs, -(-pairs // max(n, 1)) * spans) if spans > 1 else 0)
            return pairs if n <= members else 0
        host, in_domain, in_pod = within(g), within(max(d, g)), within(max(pod, d, g))
        near, pod_pairs, far = in_domain - host, in_pod - in_domain, pairs - in_pod
        if not shape.gpus_per_pod:  # no pods: the pairs of different domains are all far
            pod_pairs, far = 0, far + pod_pairs
        if shape.domains <= 1:
            near, pod_pairs, far = near + pod_pairs + far, 0, 0
        return host, near, pod_pairs, far


@functools.lru_cache(maxsize=1024)
def _rails_per_host(members: range | tuple, gph: int, nics: int) -> tuple[int, int]:
    """(hosts, most NICs used on one host) of ranks ``members`` placed in order, ``gph`` GPUs a host (a
    long range: its hosts counted, its NICs per host from its first ``4 gph`` members, as the pattern
    repeats host after host)."""
    if isinstance(members, range) and len(members) > 4 * gph:
        hosts = len(members) if abs(members.step) >= gph else abs(members[-1] // gph - members[0] // gph) + 1
        return hosts, _rails_per_host(members[:4 * gph], gph, nics)[1]
    m = np.asarray(members, dtype=np.int64)
    pairs = np.unique((m // gph) * nics + m % gph % nics)
    hosts, per_host = np.unique(pairs // nics, return_counts=True)
    return len(hosts), int(per_host.max()) if len(per_host) else 0


def _rates(spec: ExperimentSpec) -> tuple[float, float]:
    """(a NIC's line rate, a GPU's intra-host rate) in GB/s, as the built fabric's NIC profiles
    give them (:func:`netsim.collectives.nccl.bus_bandwidth_GBps`), for fabrics of uniform hosts
    described by ``nic``, ``nics_per_host`` and ``intra_host``; (0, 0) for any other."""
    t = spec.topology
    if not all(hasattr(t, k) for k in ("nic", "nics_per_host", "intra_host")) or getattr(t, "host_nics", None) \
            or getattr(t, "nic_overrides", None) or t.nic is None:
        return 0.0, 0.0
    if spec.model == "nccl":
        from netsim.topology.packets import MTU_BYTES
        t = fabric_defaults(t, spec.packets.mtu if spec.packets is not None else MTU_BYTES)
    try:
        nic = t.nic.resolve()
    except Exception:   # a NIC the file cannot resolve fails where the fabric is built, not here
        return 0.0, 0.0
    intra = getattr(t.intra_host, "bandwidth", None) or 0.0
    return nic.port_capacity_Bps * nic.ports / 1e9, intra / 1e9


def _rate_ranges(spec: ExperimentSpec) -> tuple[tuple[float, float], tuple[float, float]]:
    """The slowest and fastest NIC rate and intra-host link rate (GB/s) anywhere in the file's
    ``topology:`` ((0, 0) where it names none, e.g. fabrics whose nodes are built in)."""
    from pydantic import BaseModel

    from netsim.spectypes import LinkSpec, NicSpec
    nics: list[float] = []
    intra: list[float] = []

    def walk(v, name: str = "") -> None:
        if isinstance(v, NicSpec):
            try:
                nic = v.resolve()
                nics.append(nic.port_capacity_Bps * nic.ports / 1e9)
            except Exception:   # a NIC the file cannot resolve fails where the fabric is built, not here
                pass
        elif isinstance(v, LinkSpec) and name in ("nic", "intra_host", "link"):   # (a dragonfly's NIC: its link's)
            (intra if name == "intra_host" else nics).append(v.bandwidth / 1e9)
        elif name == "link_bandwidth" and isinstance(v, (int, float)):   # frontier: NICs as fast as the cables
            nics.append(v / 1e9)
        elif isinstance(v, BaseModel):
            for k in type(v).model_fields:
                walk(getattr(v, k), k)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x, name)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x, name)

    walk(spec.topology)
    span = (lambda xs: (min(xs), max(xs)) if xs else (0.0, 0.0))
    return span([x for x in nics if x > 0]), span([x for x in intra if x > 0])


def _walk(w, comm: RankSet, repeats: int, tally: Tally) -> Busy:
    """Count a collective or sequence workload; how busy it keeps the fabric at its busiest."""
    if isinstance(w, SequenceWorkload):
        repeats *= w.iterations
        busiest = Busy(0, 0, 0)
        for step in w.steps:
            busiest = busiest.then(_walk(step, comm.select(step.ranks), repeats, tally), w.mode == "concurrent")
        return busiest
    return tally.call(comm, w.op, w.algorithm, w.size, w.channels, w.chunk, repeats * w.iterations,
                      protocol=w.protocol)[1]


def _training(w: TrainingWorkload, job: int, placement: str, layout: str, repeats: int, tally: Tally) -> Busy:
    """Count a training job (:mod:`netsim.workload.pipeline`): every iteration's calls, times ``repeats``;
    returns how busy it keeps the fabric with every stage and group at work at once."""
    from netsim.workload.training import partition_layers
    par, m = w.parallelism, w.model
    tp, pp, dp = par.tp, par.pp, par.dp
    micro = m.global_batch // (m.micro_batch * dp)
    known = isinstance(w.partition, list) or w.partition == "even" or pp == 1 or \
        (w.partition == "auto" and placement != "holmes")
    layers = list(w.partition) if isinstance(w.partition, list) else partition_layers(m.layers, [1.0] * pp)
    act = float(m.micro_batch * m.seq_len * m.hidden * m.dtype_bytes)
    grad = w.grad_bytes or m.dtype_bytes
    overlap = par.overlap_dp and dp > 1
    flight = nic = core = 0
    # A searched partition is not known before the run: tree calls get one chunk to spare each.
    slack = 0.0 if known else 1.0
    for s, n_layers in enumerate(layers):
        gpu = 2 if pp > 1 else 0  # a GPU's flows: its pipeline sends, its TP and DP calls
        if tp > 1:  # every replica's TP group of this stage
            c = w.tp_comm
            group = RankSet(job, range(s * dp * tp, s * dp * tp + tp), layout)
            bump = slack * 2 * tally.settle(group, c.algorithm, c.channels, None)[0] * TREE_CHUNK
            if w.moe is not None:  # MoE stages run layer by layer: one TP allreduce of 2 activations per layer
                call, x = tally.call(group, "allreduce", c.algorithm, 2 * act + bump, c.channels, None,
                                     repeats * 2 * micro * n_layers, groups=dp, protocol=c.protocol)
            elif w.tp_granularity == "layer":
                call, x = tally.call(group, "allreduce", c.algorithm, act + bump, c.channels, None,
                                     repeats * 2 * micro * 2 * n_layers, groups=dp, protocol=c.protocol)
            else:
                size = 2 * n_layers * act
                call, x = tally.call(group, "allreduce", c.algorithm, size + bump, c.channels, None,
                                     repeats * (2 * micro - overlap), groups=dp, protocol=c.protocol)
                if overlap:
                    tally.call(group, "allreduce", c.algorithm, size / w.dp_buckets + bump, c.channels, None,
                               repeats * w.dp_buckets, groups=dp, protocol=c.protocol)
            flight, core, gpu = flight + dp * x.flight, core + dp * x.core, gpu + x.nic
        if dp > 1:  # the stage's gradients, bucket by bucket, over each TP index's replicas
            c = w.dp_comm
            params = n_layers * (12 * m.hidden ** 2 + 13 * m.hidden) + (s == 0) * (m.vocab + m.seq_len) * m.hidden \
                + (s == pp - 1 and pp > 1) * m.vocab * m.hidden
            replicas = RankSet(job, range(s * dp * tp, (s + 1) * dp * tp, tp), layout)
            bump = slack * 2 * tally.settle(replicas, c.algorithm, c.channels, None)[0] * TREE_CHUNK
            op = "reduce_scatter" if par.sharded_optimizer else "allreduce"
            call, x = tally.call(replicas, op, c.algorithm, params / tp * grad / w.dp_buckets + bump, c.channels,
                                 None, repeats * w.dp_buckets, groups=tp, protocol=c.protocol)
            if par.sharded_optimizer:
                tally.call(replicas, "allgather", c.algorithm, params / tp * m.dtype_bytes + bump, c.channels, None,
                           repeats, groups=tp, protocol=c.protocol)
            flight, core, gpu = flight + tp * x.flight, core + tp * x.core, gpu + x.nic
        nic = max(nic, gpu)
    if w.moe is not None:
        flight, nic, core = _experts(w, job, layout, layers, micro, repeats, tally, Busy(flight, nic, core))
    if pp > 1:  # activations forward and gradients back: one message per TP rank and micro-batch
        tally.messages += 2 * (pp - 1) * micro * dp * tp * repeats
        pipe = RankSet(job, range(0, pp * dp * tp, dp * tp), layout)
        key = (job, pipe.members, "pp", 0, dp * tp)
        tally.connections[key] = 2 * (pp - 1) * dp * tp
        pairs = tally.locality(pipe, CallCounts(0, 0, "pp", "neighbour", 2 * (pp - 1), 0, 0))
        tally.pairs[key[:3]] = tuple(x * dp * tp for x in pairs)
        flight += 2 * (pp - 1) * dp * tp * min(micro, pp)
    return Busy(flight, nic, core)


def _experts(w: TrainingWorkload, job: int, layout: str, layers: list[int], micro: int, repeats: int, tally: Tally,
             busy: Busy) -> Busy:
    """An MoE job's all-to-all-v calls (dispatch and combine, forward and backward, per MoE layer and
    micro-batch on every EP group; every pair counted, an upper bound where routing leaves pairs
    idle) and its experts' gradient allreduces."""
    moe, par = w.moe, w.parallelism
    tp, dp, groups = par.tp, par.dp, par.dp // w.moe.ep
    flight, nic, core = busy
    first = 0
    for s, n_layers in enumerate(layers):
        moe_layers = sum(1 for layer in range(first, first + n_layers) if layer >= moe.dense_layers)
        first += n_layers
        if moe_layers:
            group = RankSet(job, range(s * dp * tp, s * dp * tp + moe.ep * tp, tp), layout)
            _call, x = tally.call(group, "alltoallv", moe.algorithm, 1.0, 1, None, repeats * 4 * moe_layers * micro,
                                  groups=groups * tp)
            flight, core, nic = flight + groups * tp * x.flight, core + groups * tp * x.core, max(nic, x.nic)
        if moe_layers and groups > 1:
            replicas = RankSet(job, range(s * dp * tp, (s + 1) * dp * tp, moe.ep * tp), layout)
            grads = moe_layers * moe.experts // moe.ep * 3 * w.model.hidden * moe.expert_hidden / tp \
                * (w.grad_bytes or w.model.dtype_bytes)
            tally.call(replicas, "allreduce", w.dp_comm.algorithm, grads / w.dp_buckets, w.dp_comm.channels, None,
                       repeats * w.dp_buckets, groups=tp * moe.ep, protocol=w.dp_comm.protocol)
    return Busy(flight, nic, core)


def count_workload(spec: ExperimentSpec, shape: FabricShape | None = None) -> Tally:
    """Messages, calls, connections, GPU pairs and live state of every job of ``spec``, over all iterations.

    Examples
    --------
    >>> from netsim.config import parse_spec
    >>> spec = parse_spec({"name": "x", "topology": {"type": "frontier", "groups": 2}, "routing": "minimal",
    ...                    "workload": {"type": "collective", "op": "alltoall", "algorithm": "pairwise",
    ...                                 "size": "1GiB", "ranks": 64, "iterations": 3}})
    >>> t = count_workload(spec)
    >>> t.messages, t.connection_count, t.calls   # 64 x 63 pairs, three times; one connection per pair
    (12096, 4032, 3)
    """
    shape = shape or fabric_shape(spec.topology)
    tally = Tally(shape, sprayed=spec.routing.type in SPREAD, model=MODELS[spec.model])
    tally.nic_GBps, tally.gpu_intra_GBps = _rates(spec)
    tally.nic_range, tally.intra_range = _rate_ranges(spec)
    jobs = []
    if spec.cluster is not None:  # jobs come from the trace at run time: not counted before the run
        return tally
    for i, job in enumerate(spec.job_specs()):
        policy = job.placement or spec.placement
        w = job.workload
        if w.type in ("chakra", "schedule"):  # read from files at placement: not counted before the run
            jobs.append(Busy(0, 0, 0))
        elif isinstance(w, TrainingWorkload):
            jobs.append(_training(w, i, policy.type, _layout(policy), job.iterations * w.iterations, tally))
        else:
            n = min(w.ranks or shape.gpus, shape.gpus)
            jobs.append(_walk(w, RankSet(i, range(n), _layout(policy)), job.iterations, tally))
    # Jobs may overlap in time, on different GPUs: their messages add up, a NIC serves one of them,
    # a domain's uplinks as many as it has hosts.
    sharing = max(1, shape.gpus_per_domain // shape.gpus_per_host)
    tally.in_flight = sum(b.flight for b in jobs)
    tally.crossing = max(max(b.nic for b in jobs), sum(sorted(b.core for b in jobs)[-sharing:]))
    return tally

"""Pre-flight: what a run will build and the memory it needs, from its spec alone; refuse above a limit.

Runs between :mod:`netsim.config` and :func:`netsim.experiment.run.run_experiment` (and before
each run of a sweep): :func:`estimate` counts the hosts, links, connections and messages a spec
will create, in closed form, without building the topology or placing ranks (milliseconds even
for a million hosts), and turns the counts into the run's peak resident memory; :func:`check`
raises a one-line :class:`~netsim.errors.NetsimError` when that is above the limit, so nothing
allocates gigabytes before failing.

Where an exact count needs the placement (which GPUs share a host or a leaf, how many ranks of
a hierarchical allreduce land on one host) the estimate takes the upper bound and says so.

The default limit, :data:`DEFAULT_MAX_MEMORY_BYTES`, is a fixed 16 GiB rather than a share of
the machine's memory, so that whether a spec is accepted does not depend on where it is
checked. It fits the 24 GiB project VM with room for the system and another process, and a
32 GB laptop; every shipped experiment needs under 2 GiB, while the runs that exhausted the VM
(a 1,024-GPU sprayed all-to-all) need far more and are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from netsim.config import (CollectiveWorkload, DragonflySpec, ExperimentSpec, FrontierSpec, LeafSpineSpec,
                           MultiClusterSpec, SequenceWorkload, TrainingWorkload)
from netsim.errors import NetsimError

GiB = 2**30
#: Default ceiling on a run's estimated peak memory (see the module docstring for why 16 GiB).
DEFAULT_MAX_MEMORY_BYTES = 16 * GiB

# ------------------------------------------------------------------ memory model (bytes)
# Measured on CPython 3.11 / numpy 2 (benchmarks/preflight.py fits and checks them): what one
# item of each kind costs at the run's peak, its later DataFrame row included.
#: The interpreter with netsim, numpy, pandas, numba kernels and pyarrow loaded.
BASELINE = 300 * 2**20
NODE = 1_200            #: a graph node with its attributes and adjacency
LINK = 2_000            #: a link: graph edge, link table, fabric and flow-table arrays, links.parquet row
PATH_HEADER = 72        #: a cached path tuple (plus 8 per link on it)
PAIR = 400              #: a GPU pair's path-cache entry, ideal pair model
ROUTE = 90              #: one (path, fraction) entry of a sprayed route (spray policy, ideal core)
SPRAY_PAIR = 90         #: one (link, weight) entry of the ideal-spraying offered load (congestion)
CONNECTION = 1_500      #: a connection's queue, counters, routing decision and incidence
MESSAGE_LIVE = 1_200    #: a message in flight: flow object, events, table slot
FLOW_RECORD = 600       #: a flows.parquet row: the record, then the DataFrame and Arrow copies
CALL = 1_500            #: a collective call: its process, record and collectives.parquet row
SERIES_BIN = 450        #: one link_series bin of one busy link (list entry, then DataFrame row)
ROW_ENTRY = 24          #: a flow-table row entry per link (16) with the growth copy


@dataclass(frozen=True)
class Estimate:
    """What a run will create and the memory it needs, from :func:`estimate`.

    Counts: ``links`` are directed; ``connections`` distinct (src, dst, channel, job,
    communicator) queue pairs; ``messages`` every message over all iterations and jobs (what
    ``fabric.stats['flows']`` reports); ``flow_records`` the rows of ``flows.parquet``. Where the
    placement decides a count, it is an upper bound. ``memory_bytes`` is the estimated peak
    resident memory of the whole run (interpreter, topology, routing state, messages, ideal
    bounds, result tables); ``parts`` splits it by component.
    """

    hosts: int
    gpus: int
    switches: int
    links: int
    connections: int
    messages: int
    flow_records: int
    memory_bytes: float
    calls: int = 0
    paths: int = 0          #: equal-cost paths the path cache will hold (upper bound)
    in_flight: int = 0      #: most messages posted and not yet delivered at one instant (upper bound)
    parts: tuple[tuple[str, float], ...] = ()

    def describe(self) -> str:
        """One line: ``32 hosts, 256 GPUs, 1,344 links, 65,280 connections, 130,560 messages: about 1.2 GiB``."""
        return (f"{self.hosts:,} hosts, {self.gpus:,} GPUs, {self.links:,} links, {self.connections:,} connections, "
                f"{self.messages:,} messages: about {_gib(self.memory_bytes)}")


def _gib(n: float) -> str:
    """``1.2 GiB`` (``37 GiB`` from 10 GiB up, ``300 MiB`` below 1 GiB)."""
    if n < GiB:
        return f"{n / 2**20:.0f} MiB"
    return f"{n / GiB:.1f} GiB" if n < 10 * GiB else f"{n / GiB:.0f} GiB"


def _option(n: float) -> str:
    """A round ``--max-memory`` value above ``n``: whole GiB below 8, then steps of 4, then 16."""
    step = 1 if n < 8 * GiB else 4 if n < 64 * GiB else 16
    return f"{math.ceil(n * 1.05 / (step * GiB)) * step}GiB"


def check(spec: ExperimentSpec, max_memory_bytes: float | None = None) -> Estimate:
    """The :func:`estimate` of ``spec``; NetsimError when it needs more than ``max_memory_bytes``.

    ``None`` means :data:`DEFAULT_MAX_MEMORY_BYTES`. The message is one line naming the
    estimate, the limit and the option that raises it.

    Examples
    --------
    >>> from netsim.config import load_spec
    >>> check(load_spec("experiments/quickstart.yaml")).gpus  # doctest: +SKIP
    64
    """
    limit = DEFAULT_MAX_MEMORY_BYTES if max_memory_bytes is None else float(max_memory_bytes)
    est = estimate(spec)
    if est.memory_bytes > limit:
        raise NetsimError(
            f"this run needs about {_gib(est.memory_bytes)} ({est.hosts:,} hosts, {est.links:,} links, "
            f"{est.connections:,} connections, {est.messages:,} messages), above the {_gib(limit)} limit; "
            f"raise it with --max-memory {_option(est.memory_bytes)} or make the run smaller")
    return est


# ------------------------------------------------------------------ the fabric, from its spec


@dataclass(frozen=True)
class _Shape:
    """A fabric's counts and path structure, in closed form."""

    hosts: int
    gpus: int
    switches: int
    nodes: int
    links: int
    gpus_per_host: int      #: most GPUs on one host
    gpus_per_domain: int    #: fewest GPUs under one leaf (set) / in one dragonfly group
    domains: int            #: leaves / groups: more than one means pairs can be far apart
    gpus_per_nic: int       #: most GPUs sending through one NIC
    paths_host: int         #: equal-cost paths between two GPUs of one host (upper bound)
    paths_near: int         #: ... of different hosts in one domain
    paths_far: int          #: ... in different domains
    path_links: int         #: links on the longest path
    union_links: int        #: links on all of a far pair's paths together (a sprayed message's incidence)
    uplinks: int            #: links a domain's traffic can leave by


def _painted(first_default: int, n: int, ranges: list[tuple[int, int, int]]) -> int:
    """Sum over hosts ``0..n-1`` of a value that ``ranges`` [(first, last, value), ...] override in order."""
    cuts = sorted({0, n, *(a for a, _, _ in ranges), *(b + 1 for _, b, _ in ranges)})
    total = 0
    for lo, hi in zip(cuts, cuts[1:]):
        if lo >= n:
            break
        value = first_default
        for a, b, v in ranges:
            if a <= lo and hi - 1 <= b:
                value = v
        total += value * (min(hi, n) - lo)
    return total


def _leaf_spine(t: LeafSpineSpec, extra_nics: int = 0) -> _Shape:
    """:func:`netsim.topology.leaf_spine`: leaves x spines x count uplinks, hosts of an NVSwitch model."""
    hosts = t.leaves * t.hosts_per_leaf
    ports = t.nic.resolve().ports
    ranges = [(e.hosts[0], e.hosts[1], e.nic.resolve().ports) for e in t.host_nics]
    port_sum = _painted(ports, hosts, ranges)
    p = max([ports, *(v for *_, v in ranges)])
    c, s = t.uplink.count, t.spines
    links = 2 * t.leaves * s * c + hosts * 2 * t.gpus_per_host + 2 * t.nics_per_host * port_sum
    # Port k of a P-port NIC goes to the k-th leaf of its set of P leaves, so pairs of one set are near.
    domain = t.gpus_per_host if t.rail_optimized else t.hosts_per_leaf * t.gpus_per_host * p
    return _Shape(hosts=hosts, gpus=hosts * t.gpus_per_host, switches=t.leaves + s,
                  nodes=t.leaves + s + hosts * (t.gpus_per_host + t.nics_per_host + extra_nics + 1), links=links,
                  gpus_per_host=t.gpus_per_host, gpus_per_domain=domain, domains=max(1, t.leaves // p),
                  gpus_per_nic=-(-t.gpus_per_host // t.nics_per_host), paths_host=1, paths_near=p,
                  paths_far=p * p * s * c * c, path_links=4, union_links=2 * p * (1 + s * c), uplinks=s * c * p)


def _dragonfly(groups: int, a: int, p: int, per_pair: int, gpus_per_host: int, nics_per_host: int,
               host_links: int, local_hops: int) -> _Shape:
    """:func:`netsim.topology.dragonfly.dragonfly`: ``groups`` all-to-all groups of ``a`` switches."""
    hosts = groups * a * p
    return _Shape(hosts=hosts, gpus=hosts * gpus_per_host, switches=groups * a,
                  nodes=groups * a + hosts * (gpus_per_host + nics_per_host),
                  links=groups * a * (a - 1) + per_pair * groups * (groups - 1) + hosts * (host_links + 2 * nics_per_host),
                  gpus_per_host=gpus_per_host, gpus_per_domain=a * p * gpus_per_host, domains=groups,
                  gpus_per_nic=-(-gpus_per_host // nics_per_host), paths_host=4 if host_links else 1, paths_near=1,
                  # fewest-hop paths between groups: one per cable between them, at most
                  paths_far=per_pair, path_links=2 + 3 + 2 * local_hops, union_links=2 + 2 * local_hops + 3 * per_pair,
                  uplinks=per_pair * max(groups - 1, 1))


def fabric_shape(topology) -> _Shape:
    """The :class:`_Shape` of a topology spec (any of the four types)."""
    if isinstance(topology, FrontierSpec):
        # 128 MI250X nodes of 8 GCDs and 4 NICs per group; 16 Infinity Fabric + PCIe cables per node
        return _dragonfly(topology.groups, 32, 4, topology.global_links_between_groups, 8, 4, 32, 2)
    if isinstance(topology, DragonflySpec):
        g, a = topology.groups, topology.switches_per_group
        per_pair = topology.global_links_between_groups or max(1, a * (topology.global_links_per_switch or 1)
                                                                 // max(g - 1, 1))
        return _dragonfly(g, a, topology.hosts_per_switch, per_pair, 1, 1, 0, 0)
    if isinstance(topology, MultiClusterSpec):
        parts = [_leaf_spine(c, extra_nics=1) for c in topology.clusters]
        hosts = sum(s.hosts for s in parts)
        return _Shape(hosts=hosts, gpus=sum(s.gpus for s in parts), switches=sum(s.switches + 1 for s in parts) + 1,
                      nodes=sum(s.nodes + 1 for s in parts) + 1,
                      links=sum(s.links + 2 for s in parts) + 2 * hosts,  # Ethernet NICs, ToR-to-core cables
                      gpus_per_host=max(s.gpus_per_host for s in parts),
                      gpus_per_domain=min(s.gpus_per_domain for s in parts), domains=sum(s.domains for s in parts) + 1,
                      gpus_per_nic=max(s.gpus_per_nic for s in parts), paths_host=1,
                      paths_near=max(s.paths_near for s in parts), paths_far=max(s.paths_far for s in parts),
                      path_links=4, union_links=max(s.union_links for s in parts),
                      uplinks=min(s.uplinks for s in parts))
    return _leaf_spine(topology)


# ------------------------------------------------------------------ one collective call, in closed form

#: Default pipelining chunk of the tree allreduce (:data:`netsim.collectives.tree.DEFAULT_TREE_CHUNK`).
TREE_CHUNK = 512 * 1024


@dataclass(frozen=True)
class _Call:
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
    """(messages, in flight) of ``steps`` ring steps on ``c`` channels (:func:`netsim.collectives.ring.ring`)."""
    k = _chunks(size / (n * c), chunk)
    return c * n * steps * k, c * n * k


def _hierarchical(n: int, size: float, c: int, chunk: float | None, per_host: int) -> _Call:
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
    return _Call(messages, conns, "hierarchical", "neighbour", min(3 * c * n, n * (n - 1)), flight, 2 * c)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def collective_call(op: str, algorithm: str, n: int, size: float, channels: int = 1, chunk: float | None = None,
                    per_host: int = -1) -> _Call:
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
        return _Call(0, 0, algorithm, "other", 0, 0, 0)
    if algorithm == "ring" and op in ("allreduce", "reduce_scatter", "allgather"):
        steps = 2 * (n - 1) if op == "allreduce" else n - 1
        messages, flight = _ring(n, steps, size, c, chunk)
        return _Call(messages, c * n, "ring", "neighbour", min(c * n, n * (n - 1)), flight, c)
    if algorithm == "ring":  # broadcast / reduce: a pipelined chain
        k = _chunks(size / c, chunk)
        return _Call(c * (n - 1) * k, c * (n - 1), f"chain-{op}", "neighbour", n - 1, c * (n - 1) * k, c)
    if algorithm == "tree":
        k = _chunks(size / 2 / c, chunk or TREE_CHUNK)
        messages = 4 * c * (n - 1) * k
        # every leaf posts all its chunks at once; inner ranks forward as they arrive
        return _Call(messages, 4 * c * (n - 1), "tree", "other", min(4 * (n - 1), n * (n - 1)),
                     min(messages, 2 * c * n * k), 6 * c)
    if algorithm == "hierarchical":
        return _hierarchical(n, size, c, chunk, per_host)
    if algorithm in ("recursive_doubling", "halving_doubling"):
        steps = _log2(n) * (2 if algorithm == "halving_doubling" else 1)
        return _Call(c * n * steps, c * n * _log2(n), "xor", "other", n * _log2(n), 2 * c * n, c)
    if algorithm in ("direct", "pairwise"):
        rounds = 2 if op == "allreduce" else 1
        pairs = n * (n - 1)
        flight = c * pairs if algorithm == "direct" else 2 * c * n
        return _Call(c * rounds * pairs, c * pairs, "all-pairs", "all", pairs, flight,
                     c * (n - 1) if algorithm == "direct" else c)
    if algorithm == "star":
        return _Call(2 * c * (n - 1), 2 * c * (n - 1), "star", "other", 2 * (n - 1), c * (n - 1), c * (n - 1))
    if algorithm == "binomial":
        return _Call(c * (n - 1), c * (n - 1), f"binomial-{op}", "other", n - 1, c * n, c)
    # An algorithm registered after this module was written: assume all pairs every step (upper bound).
    return _Call(2 * c * n * (n - 1), c * n * (n - 1), algorithm, "all", n * (n - 1), c * n * (n - 1), c * (n - 1))


# ------------------------------------------------------------------ communicators and workloads


@dataclass(frozen=True)
class _Comm:
    """A communicator before placement: its ranks (indices into the job's ranks) and their layout.

    ``stride`` is the rank distance between consecutive members; with a placement that fills
    hosts in rank order (``contiguous``) it says how many members share a host or a domain.
    """

    job: int
    members: range | tuple
    contiguous: bool
    stride: int = 1

    @property
    def n(self) -> int:
        return len(self.members)

    def per(self, gpus: int) -> int:
        """Members on one block of ``gpus`` consecutive GPUs (1 when the placement scatters them)."""
        if not self.contiguous or self.stride >= gpus:
            return 1
        return max(1, min(self.n, gpus // self.stride))

    def select(self, selector) -> _Comm:
        """The sub-communicator a ``ranks:`` selector picks (:func:`netsim.workload.select_ranks`)."""
        m = self.members
        if selector is None:
            return self
        if isinstance(selector, int):
            return _Comm(self.job, m[:selector], self.contiguous, self.stride)
        if isinstance(selector, list):
            picked = tuple(m[i] for i in selector if i < len(m))
            steps = {b - a for a, b in zip(picked, picked[1:])}
            stride = steps.pop() if len(steps) == 1 else 0
            return _Comm(self.job, picked, self.contiguous and stride > 0, max(stride, 1) * self.stride)
        parts = [int(p) if p.strip() else None for p in selector.split(":")]
        sub = m[slice(*parts)]
        step = abs(parts[2]) if len(parts) == 3 and parts[2] else 1
        return _Comm(self.job, sub, self.contiguous, self.stride * step)


@dataclass
class _Tally:
    """What a workload adds up to over a run."""

    shape: _Shape
    messages: int = 0
    calls: int = 0
    connections: dict = field(default_factory=dict)  #: (communicator, family, channels) -> connections
    pairs: dict = field(default_factory=dict)        #: (communicator, family) -> (host, near, far) GPU pairs
    ideal_keys: int = 0      #: distinct call shapes (the ideal model computes and caches each once)
    ideal_key_bytes: int = 0
    largest_call: int = 0    #: most messages in flight in one call (its ideal replay holds as many)

    def call(self, comm: _Comm, op: str, algorithm: str, size: float, channels: int, chunk: float | None,
             repeats: int, groups: int = 1, shapes: int = 1) -> _Call:
        """Count ``repeats`` calls on each of ``groups`` communicators shaped like ``comm``."""
        g_host = comm.per(self.shape.gpus_per_host)
        call = collective_call(op, algorithm, comm.n, size, channels, chunk,
                               per_host=g_host if comm.contiguous else -self.shape.gpus_per_host)
        self.messages += call.messages * repeats * groups
        self.calls += repeats * groups
        key = (comm.job, comm.members, call.family, channels, groups)
        self.connections[key] = max(self.connections.get(key, 0), call.connections * groups)
        pairs = self._locality(comm, call)
        old = self.pairs.get(key[:3], (0, 0, 0))
        self.pairs[key[:3]] = tuple(max(a, b * groups) for a, b in zip(old, pairs))
        self.ideal_keys += shapes * groups
        self.ideal_key_bytes += shapes * groups * comm.n * 8
        self.largest_call = max(self.largest_call, call.in_flight)
        return call

    def _locality(self, comm: _Comm, call: _Call) -> tuple[int, int, int]:
        """(same-host, same-domain, far) GPU pairs of ``call``. Rank-order neighbours cross a host
        boundary once per host spanned; other patterns are counted far unless the communicator fits
        one host or domain (upper bounds: the placement decides)."""
        n, shape = comm.n, self.shape
        g, d = comm.per(shape.gpus_per_host), comm.per(shape.gpus_per_domain)
        if call.pattern == "all":
            host = n * (g - 1)
            near = n * (d - 1) - host
            far = call.pairs - host - near
        elif call.pattern == "neighbour":
            lanes = max(1, call.pairs // n)
            spans = -(-n // g)
            cross = min(call.pairs, lanes * spans) if spans > 1 else 0
            host = call.pairs - cross
            near, far = (cross, 0) if n <= d else (0, cross)
        else:
            host = call.pairs if n <= g else 0
            near = call.pairs - host if n <= d else 0
            far = call.pairs - host - near
        if shape.domains <= 1:
            near, far = near + far, 0
        return host, near, far


def _contiguous(policy) -> bool:
    """Does the placement fill hosts in rank order (sequential, holmes, random by host)?"""
    return policy.type in ("sequential", "holmes") or (policy.type == "random" and policy.options.get("by") == "host")


def _walk(w, comm: _Comm, repeats: int, tally: _Tally) -> tuple[int, int]:
    """Count a collective or sequence workload; returns (messages in flight, per rank) at its busiest."""
    if isinstance(w, SequenceWorkload):
        repeats *= w.iterations
        flight = per_rank = 0
        for step in w.steps:
            f, p = _walk(step, comm.select(step.ranks), repeats, tally)
            if w.mode == "concurrent":
                flight, per_rank = flight + f, per_rank + p
            else:
                flight, per_rank = max(flight, f), max(per_rank, p)
        return flight, per_rank
    call = tally.call(comm, w.op, w.algorithm, w.size, w.channels, w.chunk, repeats * w.iterations)
    return call.in_flight, call.per_rank


def _training(w: TrainingWorkload, job: int, placement: str, contiguous: bool, repeats: int,
              tally: _Tally) -> tuple[int, int]:
    """Count a training job (:mod:`netsim.workload.pipeline`): every iteration's calls, times ``repeats``;
    returns (messages in flight, per rank) at its busiest."""
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
    flight = per_rank = 0
    # A searched partition is not known before the run: tree chunk counts get one more chunk per call.
    slack = 0.0 if known else 1.0
    for s, n_layers in enumerate(layers):
        rank = 0
        stage = _Comm(job, range(s * dp * tp, s * dp * tp + tp), contiguous)  # TP group of replica 0
        if tp > 1:
            c = w.tp_comm
            bump = slack * 2 * c.channels * TREE_CHUNK
            if w.tp_granularity == "layer":
                call = tally.call(stage, "allreduce", c.algorithm, act + bump, c.channels, None,
                                  repeats * 2 * micro * 2 * n_layers, groups=dp)
            else:
                size = 2 * n_layers * act
                call = tally.call(stage, "allreduce", c.algorithm, size + bump, c.channels, None,
                                  repeats * (2 * micro - overlap), groups=dp)
                if overlap:
                    tally.call(stage, "allreduce", c.algorithm, size / w.dp_buckets + bump, c.channels, None,
                               repeats * w.dp_buckets, groups=dp)
            flight, rank = flight + dp * call.in_flight, call.per_rank
        if dp > 1:
            c = w.dp_comm
            bump = slack * 2 * c.channels * TREE_CHUNK
            params = n_layers * (12 * m.hidden ** 2 + 13 * m.hidden) + (s == 0) * (m.vocab + m.seq_len) * m.hidden \
                + (s == pp - 1 and pp > 1) * m.vocab * m.hidden
            replicas = _Comm(job, range(s * dp * tp, (s + 1) * dp * tp, tp), contiguous, tp)
            op = "reduce_scatter" if par.sharded_optimizer else "allreduce"
            call = tally.call(replicas, op, c.algorithm, params / tp * grad / w.dp_buckets + bump, c.channels, None,
                              repeats * w.dp_buckets, groups=tp)
            if par.sharded_optimizer:
                tally.call(replicas, "allgather", c.algorithm, params / tp * m.dtype_bytes + bump, c.channels, None,
                           repeats, groups=tp)
            flight, rank = flight + tp * call.in_flight, rank + call.per_rank
        per_rank = max(per_rank, rank)
    if pp > 1:  # activations forward and gradients back, one message per TP rank and micro-batch
        tally.messages += 2 * (pp - 1) * micro * dp * tp * repeats
        pipe = _Comm(job, range(0, pp * dp * tp, dp * tp), contiguous, dp * tp)
        key = (job, pipe.members, "pp", 0, dp * tp)
        tally.connections[key] = 2 * (pp - 1) * dp * tp
        pairs = tally._locality(pipe, _Call(0, 0, "pp", "neighbour", 2 * (pp - 1), 0, 0))
        tally.pairs[key[:3]] = tuple(x * dp * tp for x in pairs)
        flight += 2 * (pp - 1) * dp * tp * min(micro, pp)
        per_rank += 2
    return flight, per_rank


# ------------------------------------------------------------------ the estimate


def estimate(spec: ExperimentSpec) -> Estimate:
    """Count what ``spec`` will create and estimate its peak memory, without building anything.

    Closed forms over the spec (topology builders, collective algorithms, the training
    pipeline), in milliseconds for any fabric size; see :class:`Estimate` for what each count
    means and where it is an upper bound.

    Examples
    --------
    >>> from netsim.config import load_spec
    >>> est = estimate(load_spec("experiments/quickstart.yaml"))  # doctest: +SKIP
    >>> est.gpus, est.links, est.messages                          # doctest: +SKIP
    (64, 288, 8064)
    """
    shape = fabric_shape(spec.topology)
    tally = _Tally(shape)
    flight = per_rank = ranks = 0
    for i, job in enumerate(spec.job_specs()):
        policy = job.placement or spec.placement
        contiguous = _contiguous(policy)
        w = job.workload
        if isinstance(w, TrainingWorkload):
            f, p = _training(w, i, policy.type, contiguous, job.iterations * w.iterations, tally)
            ranks += w.ranks
        else:
            n = min(w.ranks or shape.gpus, shape.gpus)
            f, p = _walk(w, _Comm(i, range(n), contiguous), job.iterations, tally)
            ranks += n
        flight, per_rank = flight + f, max(per_rank, p)  # jobs may overlap: their messages add up
    return _assemble(spec, shape, tally, flight, per_rank, min(ranks, shape.gpus))


def _assemble(spec: ExperimentSpec, shape: _Shape, tally: _Tally, flight: int, per_rank: int,
              ranks: int) -> Estimate:
    """Counts -> an :class:`Estimate` with its memory parts."""
    engine, routing = spec.engine, spec.routing.type
    connections = sum(tally.connections.values())
    host = sum(p[0] for p in tally.pairs.values())
    near = sum(p[1] for p in tally.pairs.values())
    far = sum(p[2] for p in tally.pairs.values())
    entries = host * shape.paths_host + near * shape.paths_near + far * shape.paths_far
    path_bytes = (host * shape.paths_host * (PATH_HEADER + 16) + near * shape.paths_near * (PATH_HEADER + 32)
                  + far * shape.paths_far * (PATH_HEADER + 8 * shape.path_links))
    sprayed = routing in ("spray",)
    routes = entries * ROUTE * (sprayed + engine.ideal)
    if routing in ("ethereal", "min-split", "c4p"):  # per pair, its candidate paths reduced to their choices
        routes += entries * (PATH_HEADER + 48)
    congestion = (near + far) * shape.union_links * SPRAY_PAIR if engine.congestion else 0
    incidence = shape.union_links if sprayed else shape.path_links
    active = min(flight, connections)
    # The flow table's per-link rows are as wide as the most flows crossing one link (grown by doubling).
    out = min(active, shape.gpus_per_domain * per_rank)
    crossing = max(shape.gpus_per_nic * per_rank, out if sprayed else 2 * -(-out // shape.uplinks))
    busy_links = shape.links * min(1.0, 2 * ranks / max(shape.gpus, 1))
    records = tally.messages if engine.record_flows else 0
    parts = {
        "interpreter": BASELINE,
        "topology": NODE * shape.nodes + LINK * shape.links,
        "paths": PAIR * (host + near + far) + path_bytes + routes + congestion,
        "connections": connections * (CONNECTION + 16 * incidence),
        "messages in flight": (flight + engine.ideal * tally.largest_call) * (MESSAGE_LIVE + 24 * incidence)
        + shape.links * 2 * crossing * ROW_ENTRY,
        "flow records": records * FLOW_RECORD,
        "calls": tally.calls * CALL + tally.ideal_keys * 200 + tally.ideal_key_bytes,
        "link series": busy_links * engine.link_series * SERIES_BIN,
    }
    return Estimate(hosts=shape.hosts, gpus=shape.gpus, switches=shape.switches, links=shape.links,
                    connections=connections, messages=tally.messages, flow_records=records,
                    memory_bytes=float(sum(parts.values())), calls=tally.calls, paths=entries, in_flight=flight,
                    parts=tuple(parts.items()))

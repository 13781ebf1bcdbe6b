"""NCCL's choice of algorithm and protocol by message size, and what each protocol costs a message.

NCCL times every (algorithm, protocol) pair of a call with a latency-bandwidth model and runs the
fastest (``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` in ``src/graph/tuning.cc``). The tables
here are that file's at commit ``01afd20`` of NVIDIA/nccl (2.7-2.8), the commit
:mod:`netsim.collectives.nccl` takes its step costs from:

* ``baseLat[algorithm][protocol]``: once per call, microseconds;
* ``hwLat[hop][algorithm][protocol]``: per step over NVLink, PCI or the network;
* the bandwidth refinements: LL at 1/4 of the ring's bus bandwidth (1/3.8 for the tree), LL128 at
  0.92 (0.7 with one rank a node) capped at ``ll128MaxBwPerCh`` per channel, the tree at 0.9 capped
  at 80-110 GB/s, and the tree's medium-size correction factors;
* the ring's "plateau": a multi-node Simple ring allreduce's latency counts 1.9 times from
  ``nRanks/16 x 64 KiB`` up.

:func:`choose` is that model; netsim then *simulates* the chosen pair rather than taking the model's
time: :class:`Protocol` says what a protocol changes on the wire (LL sends a 4-byte flag with every
4 bytes of data, LL128 8 bytes of flags in every 128-byte line), how large its step is, and how its
per-step cost compares with Simple's (``hwLat`` of the ring, the only hop cost that is not a
transfer time). Two refinements of the model are left out because netsim does not know the GPU:
the A100 (``compCap 80``) bandwidth cap and tree limits. NCCL enables LL128 only on NVLink hosts of
Volta and Ampere (later versions: Hopper too); ``auto`` offers it whenever the hosts have NVLink.
NVLS (NVLink SHARP) is not in these tables (NCCL 2.17+) and netsim does not model switch reduction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

#: NCCL's protocols, in its order (``NCCL_PROTO_LL``, ``LL128``, ``SIMPLE``).
PROTOCOLS = ("LL", "LL128", "Simple")
#: The algorithms NCCL's model times for every collective (tree: allreduce only).
TUNED_ALGORITHMS = ("tree", "ring")
#: ``baseLat``, microseconds, per algorithm and protocol.
BASE_LAT_US = {"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4)}
#: ``hwLat``, microseconds, per hop kind, algorithm and protocol.
HW_LAT_US = {
    "nvlink": {"tree": (0.52, 1.2, 28.0), "ring": (0.47, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 50.0), "ring": (2.7, 4.0, 9.6)},
}
#: ``ll128MaxBwPerCh``, GB/s per channel, per op.
LL128_MAX_BW_PER_CH = {"broadcast": 18.8, "reduce": 12.0, "allgather": 18.3, "reduce_scatter": 15.2,
                       "allreduce": 16.7}
#: ``treeCorrectionFactor[protocol][log2(bytes / 64)]`` for 64 B to 128 MiB.
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9),
)
#: The ops NCCL's model times (its five collective functions); others run Simple.
TUNED_OPS = tuple(LL128_MAX_BW_PER_CH)


@dataclass(frozen=True)
class Protocol:
    """What a protocol changes for the messages of a call.

    ``wire``: bytes on the wire per byte of data; ``step_bytes``: data a ring step moves per buffer
    slot (``buffSize / NCCL_STEPS`` without the flags); ``net_scale`` and ``nvlink_scale``: its
    per-step cost over the network and over NVLink as a share of Simple's (``hwLat`` of the ring).
    """

    name: str
    wire: float
    step_bytes: float
    net_scale: float
    nvlink_scale: float

    def overhead_scale(self, multi_node: bool) -> tuple[float, float]:
        """(network hop, NVLink hop) shares of Simple's per-message overhead; NCCL counts an LL
        NVLink hop 1.8 times when the communicator spans nodes."""
        return self.net_scale, self.nvlink_scale * (1.8 if multi_node and self.name == "LL" else 1.0)


def _protocol(name: str, wire: float, step_bytes: float) -> Protocol:
    p = PROTOCOLS.index(name)
    net, nvl = HW_LAT_US["net"]["ring"], HW_LAT_US["nvlink"]["ring"]
    return Protocol(name, wire, step_bytes, net[p] / net[2], nvl[p] / nvl[2])


#: Simple: 4 MiB buffers over 8 slots; LL: 16-byte lines of 8 data and 8 flag bytes, 64 KiB of lines a
#: slot; LL128: 128-byte lines with 120 data bytes, 600 KiB of lines a slot (``NCCL_LL128_ELEMS_PER_THREAD``
#: 120 x 640 threads x 8 bytes).
PROTOCOL = {p.name: p for p in (_protocol("Simple", 1.0, 512 * 1024),
                                 _protocol("LL128", 128 / 120, 120 * 640 * 8 * 120 / 128),
                                 _protocol("LL", 2.0, 32 * 1024))}


class Choice(NamedTuple):
    """NCCL's pick for a call: algorithm, protocol and the model's time for it (seconds)."""

    algorithm: str
    protocol: str
    model_s: float


def _log2i(x: int) -> int:
    return x.bit_length() - 1 if x > 0 else -1


def model_time_s(op: str, algorithm: str, protocol: str, size_bytes: float, n_ranks: int, n_nodes: int,
                 channels: int, speed_GBps: float, nvlink: bool = True) -> float:
    """NCCL's modelled time of one call (``ncclTopoGetAlgoTime``), seconds; ``inf`` where the pair
    does not exist (a tree for anything but allreduce).

    ``channels`` x ``speed_GBps`` is the algorithm graph's bus bandwidth (GB/s); ``nvlink``: the
    intra-node hops are NVLink (else PCI).

    Examples
    --------
    >>> # 1 GiB over 16 ranks on 2 nodes at 400 GB/s: 5.033 ms of bandwidth, (8.4 + 28 x 3.4 + 2 x 9.6) x 1.9 us
    >>> round(model_time_s("allreduce", "ring", "Simple", 2**30, 16, 2, 16, 25.0) * 1e3, 3)
    5.266
    >>> round(model_time_s("allreduce", "ring", "LL", 8, 16, 2, 16, 25.0) * 1e6, 2)   # 3.6 + 28 x 0.47 x 1.8 + 2 x 2.7
    32.69
    """
    if algorithm == "tree" and op != "allreduce":
        return math.inf
    p = PROTOCOLS.index(protocol)
    nsteps = 2 * (n_ranks - 1) if op == "allreduce" else n_ranks - 1 if op in ("reduce_scatter", "allgather") else n_ranks
    inter = 2 * (n_nodes - 1) if op == "allreduce" else n_nodes - 1 if op in ("reduce_scatter", "allgather") else n_nodes
    bus = channels * speed_GBps
    if algorithm == "ring" and protocol == "LL":
        bus *= 1 / 4 if (n_nodes > 1 or op in ("allreduce", "reduce")) else 1 / 3
    if algorithm == "ring" and protocol == "LL128":
        bus = min(bus * (0.7 if n_ranks / n_nodes < 2 else 0.92), LL128_MAX_BW_PER_CH[op] * channels)
    if algorithm == "tree":
        bus = min(bus * 0.9, 80.0 if n_nodes > 2 else 110.0)
        if protocol == "LL":
            bus *= 1 / 3.8
        if protocol == "LL128":
            bus = min(bus * (7 / 9 if n_nodes == 1 else 0.915), LL128_MAX_BW_PER_CH[op] * channels * 7 / 9)
    bw = bus * (0.5 if algorithm != "ring" else n_ranks / nsteps)
    intra_hw = "nvlink" if nvlink else "pci"
    hw = intra_hw if n_nodes == 1 else "net"
    lat = BASE_LAT_US[algorithm][p]
    intra_lat = HW_LAT_US[intra_hw][algorithm][p] * (1.8 if n_nodes > 1 and protocol == "LL" else 1.0)
    inter_lat = HW_LAT_US["net"][algorithm][p]
    if algorithm == "ring":
        if op in ("reduce", "broadcast"):   # rings of distinct channels (``sameChannels`` 0)
            step = HW_LAT_US[hw]["tree" if protocol == "Simple" else "ring"][p]
            lat += nsteps * step
        else:
            lat += (nsteps - inter) * intra_lat + inter * inter_lat
    else:
        lat += 2 * ((n_ranks // n_nodes - 1) * intra_lat + _log2i(n_nodes) * inter_lat)
    log_size = _log2i(int(size_bytes) >> 6)
    if algorithm == "tree" and 0 <= log_size < len(TREE_CORRECTION[p]):
        bw *= TREE_CORRECTION[p][log_size]
    if (algorithm == "ring" and protocol == "Simple" and n_nodes > 1 and op == "allreduce"
            and size_bytes >= n_ranks / 16 * 65536):
        lat *= 1.9   # the ring's plateau
    return (lat + size_bytes / (1000 * bw)) * 1e-6


def choose(op: str, size_bytes: float, n_ranks: int, n_nodes: int, channels: int, speed_GBps: float, *,
           algorithms: tuple[str, ...] = TUNED_ALGORITHMS, protocols: tuple[str, ...] = PROTOCOLS,
           nvlink: bool = True) -> Choice:
    """The (algorithm, protocol) NCCL's model times fastest for a call, among ``algorithms`` and
    ``protocols`` (in NCCL's order, ties to the first); ops outside :data:`TUNED_OPS` run Simple.

    Examples
    --------
    >>> choose("allreduce", 8, 16, 2, 16, 25.0)[:2]        # 8 B: latency, LL
    ('tree', 'LL')
    >>> choose("allreduce", 2**30, 16, 2, 16, 25.0)[:2]    # 1 GiB: bandwidth, Simple ring
    ('ring', 'Simple')
    """
    if op not in TUNED_OPS:
        return Choice(algorithms[-1] if "ring" not in algorithms else "ring", "Simple", math.nan)
    best: Choice | None = None
    for algorithm in TUNED_ALGORITHMS:
        if algorithm not in algorithms:
            continue
        for protocol in PROTOCOLS:
            if protocol not in protocols:
                continue
            t = model_time_s(op, algorithm, protocol, size_bytes, n_ranks, n_nodes, channels, speed_GBps, nvlink)
            if best is None or t < best.model_s:
                best = Choice(algorithm, protocol, t)
    if best is None or not math.isfinite(best.model_s):
        raise ValueError(f"no algorithm of {algorithms} with a protocol of {protocols} runs {op}")
    return best

#: The ``protocol:`` names a workload may give (NCCL's ``NCCL_PROTO`` names, any case) and ``auto``.
PROTOCOL_NAMES = {"auto": "auto", "simple": "Simple", "ll128": "LL128", "ll": "LL"}


@dataclass(frozen=True)
class CallProtocol:
    """A call's protocol as its schedule is built with it (:func:`netsim.collectives.base.build_call`):
    every message's bytes times ``wire``; each rank starts ``base_s`` after it is ready (NCCL's
    ``baseLat``); a message between two hosts pays ``net_scale`` and one inside a host
    ``nvlink_scale`` of its connection's per-message overhead (Simple's step cost)."""

    name: str
    wire: float
    step_bytes: float
    base_s: float
    net_scale: float
    nvlink_scale: float


def call_protocol(name: str, algorithm: str, multi_node: bool) -> CallProtocol:
    """The :class:`CallProtocol` of protocol ``name`` for a call of ``algorithm`` (netsim's algorithms
    other than NCCL's tree pay the ring's ``baseLat``).

    >>> p = call_protocol("LL", "ring", True)
    >>> p.wire, p.base_s, round(p.net_scale, 4), round(p.nvlink_scale, 4)
    (2.0, 3.6e-06, 0.2813, 0.2488)
    """
    proto = PROTOCOL[name]
    net, nvlink = proto.overhead_scale(multi_node)
    base = BASE_LAT_US["tree" if algorithm == "tree" else "ring"][PROTOCOLS.index(name)] * 1e-6
    return CallProtocol(name, proto.wire, proto.step_bytes, base, net, nvlink)

"""How NCCL runs a collective, as netsim's default model: channels from the hosts' NICs, rings on
rails, NCCL's step size and per-step costs, link-layer headers.

An experiment's ``model:`` picks one :class:`CollectiveModel`: ``nccl`` (the default) or ``fluid``
(the pure fluid model: one channel, no slicing, no per-message cost beyond what the file gives;
closed-form work uses it). Builders stay pure: a model only chooses the keywords a call is built
with (``channels``, ``chunk_bytes``, ``gpu_rail``) and the defaults of unset fabric fields.

The numbers are NCCL's, from its tuning model (``src/graph/tuning.cc``) and topology search
(``src/graph/search.cc``) at commit ``01afd20`` of NVIDIA/nccl (2.7-2.8); ``docs/validation.md``
names each source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from netsim.collectives.nccl_tuning import (
    PROTOCOL_NAMES,
    PROTOCOLS,
    TUNED_ALGORITHMS,
    TUNED_OPS,
    CallProtocol,
    call_protocol,
    choose,
)
from netsim.topology.packets import HEADER_BYTES, MTU_BYTES, header_efficiency

#: NCCL's step: ``NCCL_BUFFSIZE`` 4 MiB over ``NCCL_STEPS`` 8 slots. A ring sends a step's piece as
#: messages of at most this many bytes (``chunk_bytes``).
STEP_BYTES = 512 * 1024
#: Per-step cost of a network hop, ring, Simple protocol (``hwLat[NET][Ring][Simple]``), seconds.
NET_STEP_S = 9.6e-6
#: Per-step cost of an NVLink hop, ring, Simple protocol (``hwLat[NVLINK][Ring][Simple]``), seconds.
NVLINK_STEP_S = 3.4e-6
#: NCCL opens one ring per NIC and duplicates the rings when the intra-node bandwidth allows
#: (``search.cc``, ``dupChannels``): two channels per NIC a communicator's hosts use.
CHANNELS_PER_NIC = 2
#: Payload share of the wire at the MTU, per NIC family: payload / (payload + per-packet bytes), with
#: the per-packet bytes of :data:`netsim.topology.packets.HEADER_BYTES` (InfiniBand 26, RoCE v2 82
#: with preamble and inter-frame gap; Slingshot and Ethernet as RoCE; ``generic`` as InfiniBand).
HEADER_EFFICIENCY = {family: header_efficiency(family) for family in HEADER_BYTES}
#: How switches forward under this model: cut-through, as InfiniBand and RDMA Ethernet switches do
#: when the egress is free (:mod:`netsim.topology.packets`).
SWITCH_MODE = "cut_through"


@dataclass(frozen=True)
class CallSettings:
    """What a call is built with under a model: its channel count, ring slices and ring order."""

    channels: int
    chunk_bytes: float | None   #: the slice the workload asked for (``None``: the model's)
    rails: bool                 #: channel rings on the topology's rails (``gpu_rail``)
    step_bytes: float | None = None  #: the model's smallest slice of a ring step (``None``: none)
    algorithm: str | None = None     #: the algorithm the call runs (``auto`` resolved; ``None``: as asked)
    protocol: CallProtocol | None = None  #: its protocol's costs (``None``: none, the fluid model)

    @property
    def protocol_name(self) -> str:
        """The protocol's NCCL name (``LL``, ``LL128``, ``Simple``), ``""`` for none."""
        return self.protocol.name if self.protocol is not None else ""

    def slice_bytes(self, op: str, algorithm: str, size_bytes: float, n: int) -> float | None:
        """The ``chunk_bytes`` a call of ``size_bytes`` over ``n`` ranks is built with.

        What the workload gives, else for ring steps (ring allreduce, reduce-scatter, allgather and
        the hierarchical allreduce's rings) the model's: NCCL moves a step's piece p as chunks of
        :data:`STEP_BYTES` through :data:`NCCL_STEPS` buffer slots; netsim sends it as at most that
        many slices, none below a step: ``max(STEP_BYTES, p / NCCL_STEPS)``. On a non-blocking fabric
        a ring of S steps sliced C ways takes ``(S-1) max(p/B, p/(CB) + a) + p/B + a``, which is
        ``S p/B + a`` for every C with ``p/(CB) + a <= p/B``: the same time as NCCL's chunks whenever
        ``p >= NCCL_STEPS x STEP_BYTES`` and the step's cost ``a`` is below 7/8 of a slice's
        transfer time, with at most 8 messages a step instead of p / 512 KiB. Other algorithms (tree,
        chains) take the model's step as it is.

        Examples
        --------
        >>> s = CallSettings(2, None, True, STEP_BYTES)
        >>> s.slice_bytes("allreduce", "ring", 2**30, 8) / 2**20   # p = 64 MiB: 8 slices of 8 MiB
        8.0
        >>> s.slice_bytes("allreduce", "ring", 2**20, 8) / 2**10   # p = 64 KiB: one slice
        512.0
        """
        if self.chunk_bytes is not None or self.step_bytes is None:
            return self.chunk_bytes
        step = self.protocol.step_bytes if self.protocol is not None else self.step_bytes
        if algorithm == "hierarchical" or (algorithm == "ring" and op in RING_STEP_OPS):
            return max(step, size_bytes / (max(n, 1) * self.channels * NCCL_STEPS))
        return step


#: The ops whose ring algorithm runs in steps (:func:`netsim.collectives.ring.ring_steps`).
RING_STEP_OPS = ("allreduce", "reduce_scatter", "allgather")
#: NCCL's buffer slots per connection (``NCCL_STEPS``): chunks in flight on one ring hop.
NCCL_STEPS = 8


@dataclass(frozen=True)
class CollectiveModel:
    """How calls are built: ``nccl`` (NCCL's defaults) or ``fluid`` (the pure model)."""

    name: str
    rails: bool                 #: channel rings enter and leave hosts on one NIC index (:func:`rail_ring`)
    chunk_bytes: float | None   #: a ring step's smallest slice when the workload gives none
    auto_channels: bool         #: ``channels: auto`` from the NICs (else 1)
    auto_protocol: bool = False  #: ``protocol: auto`` picks NCCL's protocol and pays its costs (else none)

    def call(self, op: str, algorithm: str, protocol: str, size_bytes: float, channels: int | str,
             chunk_bytes: float | None, gpus: Sequence[int], topology=None) -> CallSettings:
        """The :class:`CallSettings` of one call, with ``algorithm: auto`` and ``protocol: auto``
        resolved as NCCL's tuning model does (:mod:`netsim.collectives.nccl_tuning`) from the
        communicator's nodes and bus bandwidth on ``topology``.

        ``auto`` algorithms: ring or tree for allreduce, the ring for the other ops NCCL times,
        ``direct`` for all-to-all. ``auto`` protocol (this model's ``auto_protocol``): NCCL's pick for
        the call's algorithm among LL, LL128 and Simple; calls NCCL's model does not time (algorithms
        that are not NCCL's, all-to-all) take none. A protocol the file names is used under every model.

        Examples
        --------
        >>> from netsim.topology import leaf_spine
        >>> topo = leaf_spine(leaves=1, spines=1, hosts_per_leaf=2, gpus_per_host=8, nics_per_host=8,
        ...                   nic_bandwidth_Bps=50e9, uplink_bandwidth_Bps=50e9, intra_bandwidth_Bps=450e9)
        >>> small = NCCL.call("allreduce", "auto", "auto", 8, "auto", None, range(16), topo)
        >>> small.algorithm, small.protocol_name, small.channels
        ('tree', 'LL', 1)
        >>> big = NCCL.call("allreduce", "auto", "auto", 2**30, "auto", None, range(16), topo)
        >>> big.algorithm, big.protocol_name, big.channels
        ('ring', 'Simple', 16)
        >>> FLUID.call("allreduce", "auto", "auto", 2**30, "auto", None, range(16), topo).protocol is None
        True
        """
        host, rail = (topology.gpu_host, self.rails_of(topology)) if topology is not None else (None, None)
        gpus = list(gpus)
        nodes = len({int(host[g]) for g in gpus}) if host is not None else 1

        def timing() -> tuple[int, float, bool]:
            return (self.channels(channels, gpus, host, rail, "ring"), *bus_bandwidth_GBps(gpus, topology))

        algorithm, proto = self.pick(op, algorithm, protocol, size_bytes, len(gpus), nodes, timing)
        settings = self.settings_on(algorithm, channels, chunk_bytes, gpus, host, rail)
        return replace(settings, algorithm=algorithm, protocol=proto)

    def pick(self, op: str, algorithm: str, protocol: str, size_bytes: float, n_ranks: int, nodes: int,
             timing: Callable[[], tuple[int, float, bool] | None]) -> tuple[str, CallProtocol | None]:
        """The algorithm and protocol (its costs; ``None``: none) a call runs (:meth:`call`).

        ``timing()`` gives what NCCL's model needs beyond the call, (ring channels, bus bandwidth in
        GB/s, NVLink hosts), and is asked only when the model must be timed; ``None`` when it is not
        known (the pre-flight's count of a fabric it cannot rate): then the ring with Simple's steps."""
        wanted = PROTOCOL_NAMES[protocol]
        tuned = op in TUNED_OPS and (algorithm == "auto" or algorithm in TUNED_ALGORITHMS)
        name = "Simple" if wanted == "auto" else wanted
        if tuned and (algorithm == "auto" or (wanted == "auto" and self.auto_protocol)):
            known = timing()
            if known is not None:
                ring_channels, bus, nvlink = known
                choice = choose(op, size_bytes, n_ranks, nodes, ring_channels, bus / ring_channels,
                                algorithms=AUTO_ALGORITHMS.get(op, ("ring",)) if algorithm == "auto" else (algorithm,),
                                protocols=PROTOCOLS if wanted == "auto" else (wanted,), nvlink=nvlink)
                algorithm = choice.algorithm
                name = choice.protocol if wanted == "auto" else wanted
            elif algorithm == "auto":
                algorithm = "ring"
        elif algorithm == "auto":
            algorithm = AUTO_ALGORITHMS.get(op, ("direct",))[-1]
        use = wanted != "auto" or (self.auto_protocol and tuned)
        return algorithm, (call_protocol(name, algorithm, nodes > 1) if use else None)

    def channels(self, requested: int | str, gpus: Sequence[int], gpu_host: Sequence[int] | None,
                 gpu_rail: Sequence[int] | None, algorithm: str = "ring") -> int:
        """The channel count of a call: ``requested``, or for ``auto`` :func:`auto_channels` (nccl) or 1."""
        if requested != "auto":
            return int(requested)
        if not self.auto_channels or algorithm not in CHANNEL_ALGORITHMS:
            return 1
        return auto_channels(gpus, gpu_host, gpu_rail)

    def settings(self, algorithm: str, channels: int | str, chunk_bytes: float | None, gpus: Sequence[int],
                 topology=None) -> CallSettings:
        """The :class:`CallSettings` of a call of ``algorithm`` over ``gpus`` on ``topology`` (``None``:
        no host or rail is known, so ``auto`` is one channel)."""
        host, rail = (topology.gpu_host, self.rails_of(topology)) if topology is not None else (None, None)
        return self.settings_on(algorithm, channels, chunk_bytes, gpus, host, rail)

    def settings_on(self, algorithm: str, channels: int | str, chunk_bytes: float | None, gpus: Sequence[int],
                    gpu_host: Sequence[int] | None, gpu_rail: Sequence[int] | None) -> CallSettings:
        """:meth:`settings` from the topology's arrays (``gpu_rail``: given when this model uses rails)."""
        return CallSettings(self.channels(channels, gpus, gpu_host, gpu_rail, algorithm), chunk_bytes,
                            gpu_rail is not None, self.chunk_bytes)

    def rails_of(self, topology) -> np.ndarray | None:
        """The ``gpu_rail`` keyword calls are built with (``None``: rank-order rings)."""
        return topology.gpu_rail if self.rails else None


NCCL = CollectiveModel("nccl", rails=True, chunk_bytes=STEP_BYTES, auto_channels=True, auto_protocol=True)
FLUID = CollectiveModel("fluid", rails=False, chunk_bytes=None, auto_channels=False)
MODELS = {m.name: m for m in (NCCL, FLUID)}
#: Algorithms whose ``channels: auto`` is NCCL's ring count. The others keep one channel unless the
#: workload asks for more: the step-scheduled ones (all-to-all, halving-doubling, ...) are point-to-
#: point; netsim's tree is a flat double binary tree over the ranks, not NCCL's per-node chains on
#: rails, so copies of it would add messages without adding what NCCL's tree channels do; the
#: hierarchical allreduce already runs one ring per rail.
CHANNEL_ALGORITHMS = ("ring",)
MAX_AUTO_CHANNELS = 64
#: What ``algorithm: auto`` chooses among, per op (the last when NCCL's model does not time the op).
AUTO_ALGORITHMS = {"allreduce": TUNED_ALGORITHMS, "alltoall": ("direct",), "alltoallv": ("direct",)}


def bus_bandwidth_GBps(gpus: Sequence[int], topology) -> tuple[float, bool]:
    """What NCCL's model takes as a communicator's bus bandwidth (GB/s), and whether its hosts'
    GPUs talk over NVLink: across hosts, the NIC line rate (times efficiency) its GPUs use on its
    slowest host (NCCL's channels x per-channel speed); inside one host, a GPU's intra-host links.
    Without a topology: 1 GB/s and NVLink."""
    if topology is None:
        return 1.0, True
    hosts: dict[int, set[int]] = {}
    for g in gpus:
        hosts.setdefault(int(topology.gpu_host[g]), set()).add(int(topology.gpu_nic[g]))
    model, first = topology.hosts[int(topology.gpu_host[gpus[0]])][:2]
    local = int(gpus[0]) - first
    intra = [(bw, kind) for u, v, bw, _lat, kind in model.edges if local in (u, v) and kind in ("intra", "pcie")]
    nvlink = any(kind == "intra" for _bw, kind in intra) or not intra
    if len(hosts) > 1:
        def rate(nic: int) -> float:
            return topology.nic_profile[nic].port_capacity_Bps * len(topology.nic_ports.get(nic, ()))
        return min(sum(rate(nic) for nic in nics) for nics in hosts.values()) / 1e9, nvlink
    return (sum(bw for bw, _kind in intra) or 1e9) / 1e9, nvlink


def _runs(gpus: Sequence[int], gpu_host: Sequence[int]) -> list[list[int]]:
    """Maximal runs of consecutive ranks on one host."""
    runs: list[list[int]] = []
    for g in gpus:
        if runs and gpu_host[runs[-1][-1]] == gpu_host[g]:
            runs[-1].append(g)
        else:
            runs.append([g])
    return runs


def auto_channels(gpus: Sequence[int], gpu_host: Sequence[int] | None, gpu_rail: Sequence[int] | None) -> int:
    """NCCL's ring count: :data:`CHANNELS_PER_NIC` per NIC the communicator uses on a host (the most
    over its hosts); one for a communicator inside one host, whose channels would all cross the same
    NVLink links (in a fluid model k such channels move the same bytes on the same links as one).

    Examples
    --------
    >>> auto_channels(range(16), [g // 8 for g in range(16)], [g % 8 for g in range(16)])  # 2 hosts, 8 NICs
    16
    >>> auto_channels(range(0, 16, 8), [g // 8 for g in range(16)], [g % 8 for g in range(16)])  # one GPU a host
    2
    >>> auto_channels(range(8), [0] * 8, [g % 8 for g in range(8)])  # one host
    1
    """
    if gpu_host is None or len({int(gpu_host[g]) for g in gpus}) < 2:
        return 1
    if gpu_rail is None:
        return CHANNELS_PER_NIC
    rails: dict[int, set[int]] = {}
    for g in gpus:
        rails.setdefault(int(gpu_host[g]), set()).add(int(gpu_rail[g]))
    return min(MAX_AUTO_CHANNELS, CHANNELS_PER_NIC * max(len(r) for r in rails.values()))


def rail_ring(gpus: Sequence[int], gpu_host: Sequence[int], gpu_rail: Sequence[int], channel: int) -> list[int]:
    """Channel ``channel``'s ring order with every host-to-host hop on one rail (NIC index).

    Ranks keep their host order (each host's run of consecutive ranks stays together, hosts in rank
    order); inside a host the ring enters at one GPU and leaves from another, over NVLink. Channel c
    of a host whose GPUs use rails R (sorted) targets rail ``R[c mod |R|]``:

    * with two or more GPUs on that rail, the ring enters at the first and leaves from the last of
      them: it enters and leaves the host on that NIC, as NCCL's rings do;
    * with one GPU per rail (8 GPUs, 8 NICs), entering and leaving on one NIC would need NCCL's PXN
      (the last GPU handing its data over NVLink to the NIC's GPU), which netsim's GPU-to-NIC binding
      does not model; instead hosts alternate: even hosts enter on ``R[c]`` and leave on ``R[c+1]``,
      odd ones the reverse (an odd host count ends on ``R[c+2]``), so every network hop still joins
      two NICs of one rail and each NIC of a host is entered once and left once over ``|R|`` channels.

    Hops that cannot stay on a rail (hosts with different rails; two rails and an odd host count)
    cross rails as they must. A one-host communicator is rotated by the channel.

    Examples
    --------
    >>> host, rail = [g // 4 for g in range(8)], [g % 2 for g in range(8)]   # 4 GPUs, 2 NICs a host
    >>> rail_ring(range(8), host, rail, 1)    # enters and leaves each host on rail 1
    [1, 2, 0, 3, 5, 6, 4, 7]
    >>> host, rail = [g // 2 for g in range(4)], [g % 2 for g in range(4)]   # 2 GPUs, 2 NICs a host
    >>> rail_ring(range(4), host, rail, 0)    # host 0 leaves on rail 1, host 1 enters on it
    [0, 1, 3, 2]
    """
    runs = _runs(list(gpus), gpu_host)
    if len(runs) == 1:
        k = channel % len(runs[0])
        return runs[0][k:] + runs[0][:k]
    n_runs = len(runs)
    order: list[int] = []
    for h, run in enumerate(runs):
        rails = sorted({int(gpu_rail[g]) for g in run})
        on = {r: [g for g in run if gpu_rail[g] == r] for r in rails}
        target = rails[channel % len(rails)]
        if len(run) == 1 or len(on[target]) >= 2:
            enter, leave = on[target][0], on[target][-1]
        else:
            shift = h % 2
            a, x = (channel + shift) % len(rails), (channel + 1 - shift) % len(rails)
            if n_runs % 2 and len(rails) >= 3 and h >= n_runs - 2:   # close an odd cycle through R[c+2]
                a, x = ((channel + 1, channel + 2) if h == n_runs - 2 else (channel + 2, channel))
                a, x = a % len(rails), x % len(rails)
            enter = on[rails[a]][0]
            leave = on[rails[x]][-1]  # another rail (a host with one rail is never open): never ``enter``
        i = run.index(enter)
        middle = [g for g in run[i + 1:] + run[:i] if g != leave]
        order.extend([enter, *middle] + ([leave] if leave != enter else []))
    return order


def fabric_defaults(spec, mtu: int = MTU_BYTES):
    """``spec`` (a ``topology:`` section) with NCCL's costs where the file leaves them unset.

    * a NIC's per-message ``overhead``: :data:`NET_STEP_S` (a NIC profile's own latency when larger,
      e.g. a TCP NIC's);
    * a NIC's ``efficiency`` when neither it nor a profile gives one: the payload's share of full
      packets of ``mtu`` bytes with its family's headers (:data:`HEADER_EFFICIENCY` at 4096 bytes);
    * ``intra_host.overhead``: :data:`NVLINK_STEP_S`.

    Every field the file sets stays as set. Fabrics whose nodes are built in (``frontier``) keep
    their own numbers.

    Examples
    --------
    >>> from netsim.fabrics.leaf_spine import LeafSpineSpec
    >>> t = LeafSpineSpec(type="leaf_spine", leaves=1, spines=1, hosts_per_leaf=2, gpus_per_host=8, nics_per_host=8,
    ...                   nic={"bandwidth": 50e9}, uplink={"bandwidth": 50e9}, intra_host={"bandwidth": 450e9})
    >>> d = fabric_defaults(t)
    >>> d.nic.overhead, round(d.nic.efficiency, 4), d.intra_host.overhead
    (9.6e-06, 0.9937, 3.4e-06)
    """
    from pydantic import BaseModel

    from netsim.spectypes import LinkSpec, NicSpec
    from netsim.topology.nic import nic_profile

    def nic(v: NicSpec) -> NicSpec:
        update: dict = {}
        profile = nic_profile(v.profile) if v.profile else None
        if v.overhead is None:
            update["overhead"] = max(NET_STEP_S, profile.latency_s if profile else 0.0)
        if v.efficiency is None and profile is None:
            update["efficiency"] = header_efficiency(v.family, mtu)
        return v.model_copy(update=update) if update else v

    def link(v: LinkSpec, cost: float) -> LinkSpec:
        return v if "overhead" in v.model_fields_set else v.model_copy(update={"overhead": cost})

    def walk(v, name: str = ""):
        if isinstance(v, NicSpec):
            return nic(v)
        if isinstance(v, LinkSpec) and name in ("intra_host", "nic"):
            return link(v, NVLINK_STEP_S if name == "intra_host" else NET_STEP_S)
        if isinstance(v, BaseModel):
            update = {k: new for k in type(v).model_fields if (new := walk(old := getattr(v, k), k)) is not old}
            if getattr(v, "type", None) == "dragonfly" and v.nic is None:  # the plain NIC as fast as the cables
                update["nic"] = LinkSpec(bandwidth=v.link.bandwidth, overhead=NET_STEP_S)
            return v.model_copy(update=update) if update else v
        if isinstance(v, (list, tuple)):
            new = [walk(x, name) for x in v]
            return type(v)(new) if any(a is not b for a, b in zip(new, v)) else v
        return v

    return walk(spec)

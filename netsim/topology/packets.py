"""What packets pay that a fluid flow does not: a switch forwarding a packet only once it holds it.

netsim moves a message as a fluid: ``S / B`` through its bottleneck plus its path's latency. A
packet network pipelines the message as packets of ``L`` wire bytes (the MTU's payload plus the
per-packet headers, :data:`HEADER_BYTES`), and a **store-and-forward** switch sends a packet on only
once the whole of it has arrived. On a path of links with rates ``B_1 .. B_h`` through ``h - 1``
switches, the last byte of ``N = S / L`` packets arrives after

    T = S / B_min + sum over the switches' ingress links i < h of L / B_i      (1)

when the bottleneck is the last link (the packets queue in front of it), and one ``L / B_min - L / B_h``
earlier otherwise: the pipeline's fill, which is what netsim adds as latency to every link that enters a
switch. With equal rates, (1) is exact: ``S / B + (h - 1) L / B``. A **cut-through** switch forwards as
soon as it has the header, so it adds the header's ``H / B_i`` instead of ``L / B_i``.

Packets also carry headers on every link, not only at the NICs (whose efficiency already counts
them): with a packet model, links between switches carry payload at their line rate times
``MTU / (MTU + header)``.

The switching mode (``packets.switching`` in the experiment file, :class:`PacketModel`) is applied
once, when the fabric is built: it costs nothing while the run goes. ``tests/test_packets.py``
checks (1) against a packet-by-packet simulation of the same flows on the same paths.

Sizes (bytes on the wire per packet, beyond the payload):

* InfiniBand at a 4096-byte MTU: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 = 26;
* RoCE v2 (and Slingshot and plain Ethernet, taken alike): Ethernet 14 + FCS 4 + IPv4 20 + UDP 8 +
  BTH 12 + ICRC 4, plus preamble 8 and inter-frame gap 12 = 82.

A NIC without a family (``generic``) is taken as InfiniBand.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

#: Per-packet bytes on the wire beyond the payload, per NIC family (see the module docstring).
HEADER_BYTES = {"infiniband": 26, "generic": 26, "roce": 82, "slingshot": 82, "ethernet": 82}
#: The payload of a full packet (the MTU RDMA NICs use on AI fabrics), bytes.
MTU_BYTES = 4096
#: How a switch forwards: ``none`` (the fluid model: nothing beyond the links' latency),
#: ``cut_through`` (once it holds the header) or ``store_and_forward`` (once it holds the packet).
SWITCHING = ("none", "cut_through", "store_and_forward")


def header_efficiency(family: str | None, mtu: int = MTU_BYTES) -> float:
    """The payload's share of the wire for full packets of a NIC ``family``.

    >>> round(header_efficiency("infiniband"), 5), round(header_efficiency("roce"), 5)
    (0.99369, 0.98037)
    """
    return mtu / (mtu + HEADER_BYTES.get(family or "generic", HEADER_BYTES["generic"]))


@dataclass(frozen=True)
class PacketModel:
    """How switches forward packets of ``mtu`` payload bytes with ``header`` bytes each."""

    switching: str = "none"
    mtu: int = MTU_BYTES
    header: int = HEADER_BYTES["generic"]

    def __post_init__(self) -> None:
        if self.switching not in SWITCHING:
            raise ValueError(f"switching must be one of {', '.join(SWITCHING)}, got {self.switching!r}")

    @property
    def held_bytes(self) -> int:
        """What a switch holds of a packet before it forwards it."""
        return {"none": 0, "cut_through": self.header, "store_and_forward": self.mtu + self.header}[self.switching]

    def link_latency_s(self, topology) -> np.ndarray:
        """The latency each link of ``topology`` gains: for a link into a switch, the time it takes to
        bring in what the switch holds before forwarding; 0 for other links.

        A link's time for ``b`` bytes is ``b`` over its line rate: a NIC link carries its goodput (line rate
        x efficiency, :class:`~netsim.topology.nic.NicProfile`), so its line rate is its capacity over the
        NIC's efficiency; other links carry their line rate.
        """
        from netsim.topology.topology import LINK_KINDS, SWITCH_KINDS

        links = topology.links
        held = float(self.held_bytes)
        n_nodes = topology.graph.number_of_nodes()
        is_switch = np.zeros(n_nodes, dtype=bool)
        is_switch[[n for n, k in topology.graph.nodes(data="kind") if k in SWITCH_KINDS]] = True
        into_switch = is_switch[links.dst]
        if not held or not into_switch.any():
            return np.zeros(len(links))
        over_goodput = np.ones(n_nodes)   # per NIC node: line rate over goodput (1 / efficiency)
        for node, profile in topology.nic_profile.items():
            over_goodput[node] = profile.port_rate_Bps / profile.port_capacity_Bps
        nic = links.kind == LINK_KINDS.index("nic_up")
        rate = np.where(nic, links.capacity_Bps * over_goodput[links.src], links.capacity_Bps)
        return np.where(into_switch, held / rate, 0.0)


def fabric_header(topology) -> int:
    """The largest per-packet header among the fabric's NIC families (one fabric, one packet format)."""
    families = {p.family for p in topology.nic_profile.values()} or {"generic"}
    return max(HEADER_BYTES.get(f or "generic", HEADER_BYTES["generic"]) for f in families)


def with_packets(topology, model: PacketModel):
    """``topology`` with its switches forwarding packets (in place; the same object, for chaining):

    * :meth:`PacketModel.link_latency_s` added to its links' latency;
    * the links between switches carrying payload at their line rate times the payload's share of a
      full packet: they carry the headers too. (A NIC link's capacity is already its goodput: its
      efficiency.)

    Call it before anything reads the links (paths are enumerated by hop count, never by latency, so
    they stay the same). ``switching: none`` leaves the topology as it is.

    Examples
    --------
    >>> from netsim.topology import leaf_spine
    >>> topo = leaf_spine(leaves=2, spines=1, hosts_per_leaf=1, gpus_per_host=1, nics_per_host=1,
    ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    >>> path = topo.paths(0, 1)[0]
    >>> before = topo.path_latency_s(path)
    >>> _ = with_packets(topo, PacketModel("store_and_forward", mtu=4096, header=26))
    >>> round((topo.path_latency_s(path) - before) * 1e9, 1)   # 3 switches: leaf, spine, leaf
    12366.0
    >>> [round(float(topo.links.capacity_Bps[lk]) / 1e9, 5) for lk in path]   # NIC, leaf->spine, spine->leaf, NIC
    [1.0, 0.99369, 0.99369, 1.0]
    """
    if model.switching == "none":
        return topology
    from netsim.topology.topology import CORE_LINK_KINDS, LINK_KINDS

    links = topology.links
    extra = model.link_latency_s(topology)
    core = np.isin(links.kind, [LINK_KINDS.index(k) for k in CORE_LINK_KINDS])
    share = model.mtu / (model.mtu + model.header)
    topology.links = replace(links, latency_s=links.latency_s + extra,
                             capacity_Bps=np.where(core, links.capacity_Bps * share, links.capacity_Bps))
    topology.params = {**topology.params, "switching": model.switching, "mtu_bytes": model.mtu}
    return topology

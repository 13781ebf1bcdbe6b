"""Builders of dragonfly fabrics (Kim, Dally, Scott, Abts 2008) and the Frontier (HPE Slingshot) preset."""

from __future__ import annotations

import itertools
from collections import defaultdict

from netsim.errors import ConfigError
from netsim.topology.nic import NicProfile, generic_nic
from netsim.topology.node import NodeModel, frontier_node, single_gpu_node
from netsim.topology.topology import Topology, _Builder, compile_links

GBPS = 1e9 / 8


def dragonfly(*, groups: int, switches_per_group: int, hosts_per_switch: int,
              global_links_per_switch: int | None = None, global_links_between_groups: int | None = None,
              link_bandwidth_Bps: float, local_latency_s: float = 0.0, global_latency_s: float = 0.0,
              switch_latency_s: float = 0.0, nic_bandwidth_Bps: float | None = None, nic_latency_s: float = 0.0,
              nic_overhead_s: float = 0.0, node: NodeModel | None = None, nics_on_switches: int = 1,
              intra_overhead_s: float = 0.0, nic: NicProfile | None = None,
              arrangement: str = "palmtree") -> Topology:
    """Build a dragonfly: all-to-all switches inside each group, global cables between groups.

    In Kim et al.'s terms ``p = hosts_per_switch``, ``a = switches_per_group``,
    ``h = global_links_per_switch``, ``g = groups``; the radix is ``p*nics + a - 1 + h``. Give either
    ``h`` (then every pair of groups gets ``a*h // (g-1)`` cables, at least one) or
    ``global_links_between_groups`` directly. Fewer cables than ``a*h`` per group is a tapered
    network and is allowed.

    Arrangement of global cables (``arrangement``):

    - ``palmtree`` (default; Camarero, Vallejo, Beivide 2014): group i orders its cables by the
      partner's offset ``d = (j - i) mod g`` (1..g-1, k cables each) and gives each switch a
      contiguous run of them: slot ``(d-1)*k + c`` goes to switch ``slot // ceil(k(g-1)/a)``.
      Traffic entering a group from offset d and leaving to offset d+1 (the group-shift pattern
      under Valiant) then mostly needs no local hop.
    - ``round_robin``: each group deals its cables, in order of the partner's index, to switches
      0, 1, ..., a-1, 0, ... (consecutive partners on consecutive switches: the shift pattern makes
      every Valiant flow take a local hop in its intermediate group).

    Either way every switch carries the same number of global cables (within one), and in the
    balanced case (``g = a*h + 1``, one cable per pair) exactly ``h``.

    Hosts: ``a*p`` per group. Each host is a ``node`` (default: one GPU, one NIC). With
    ``nics_on_switches = k > 1`` a host's NICs are spread over ``k`` consecutive switches (NIC r on
    the r-th), as Frontier's four NICs; blocks of ``p*k`` hosts share ``k`` switches so every switch
    still has ``p * nics / k * k = p*nics`` endpoint ports.

    Latency: each cable has its own latency; ``switch_latency_s`` is added to every link entering a
    switch, so a path through k switches pays k switch hops.

    Examples
    --------
    >>> t = dragonfly(groups=9, switches_per_group=4, hosts_per_switch=2, global_links_per_switch=2,
    ...               link_bandwidth_Bps=25e9)
    >>> t.n_gpus, t.params["global_cables"], [len(p) for p in t.paths(0, t.n_gpus - 1)]
    (72, 36, [5])
    """
    g, a, p = groups, switches_per_group, hosts_per_switch
    for name, value in (("groups", g), ("switches_per_group", a), ("hosts_per_switch", p),
                        ("nics_on_switches", nics_on_switches)):
        if int(value) != value or value < 1:
            raise ConfigError(f"must be a positive integer, got {value!r}", f"topology.{name}")
    if (global_links_per_switch is None) == (global_links_between_groups is None):
        raise ConfigError("give exactly one of global_links_per_switch (h) and global_links_between_groups",
                          "topology.global_links_per_switch")
    if global_links_between_groups is None:
        per_pair = max(1, a * global_links_per_switch // max(g - 1, 1))
    else:
        per_pair = global_links_between_groups
    if per_pair < 1:
        raise ConfigError("must be at least 1", "topology.global_links_between_groups")
    node = node or single_gpu_node()
    if a % nics_on_switches or nics_on_switches > node.n_nics:
        raise ConfigError(f"nics_on_switches ({nics_on_switches}) must divide switches_per_group ({a}) and be at "
                          f"most the NICs per host ({node.n_nics})", "topology.nics_on_switches")
    nic_bw = nic.port_capacity_Bps if nic else (nic_bandwidth_Bps or link_bandwidth_Bps)

    b = _Builder()
    sw = [[b.node(f"g{gi}.s{si}", "switch", group=gi, index=si) for si in range(a)] for gi in range(g)]
    local_link: dict[tuple[int, int], int] = {}
    for gi in range(g):
        for si, sj in itertools.combinations(range(a), 2):
            u, v = sw[gi][si], sw[gi][sj]
            local_link[u, v], local_link[v, u] = b.duplex(u, v, link_bandwidth_Bps, local_latency_s + switch_latency_s,
                                                          "local", "local")
    cables: dict[tuple[int, int], list[tuple[int, int, int]]] = defaultdict(list)  # (gA, gB) -> (swA, link, swB)
    if arrangement not in ("palmtree", "round_robin"):
        raise ConfigError(f"arrangement must be 'palmtree' or 'round_robin', got {arrangement!r}",
                          "topology.arrangement")
    per_switch = -(-per_pair * (g - 1) // a)
    dealt = [0] * g

    def switch_for(gi: int, gj: int, c: int) -> int:
        if arrangement == "palmtree":
            return (((gj - gi) % g - 1) * per_pair + c) // per_switch
        idx = dealt[gi]
        dealt[gi] += 1
        return idx % a

    for gi, gj in itertools.combinations(range(g), 2):
        for c in range(per_pair):
            u, v = sw[gi][switch_for(gi, gj, c)], sw[gj][switch_for(gj, gi, c)]
            fwd, back = b.duplex(u, v, link_bandwidth_Bps, global_latency_s + switch_latency_s, "global", "global")
            cables[gi, gj].append((u, fwd, v))
            cables[gj, gi].append((v, back, u))

    hosts, nic_ports, nic_profiles = [], {}, {}
    profile = nic or generic_nic(nic_bw, nic_overhead_s)
    k = nics_on_switches
    for gi in range(g):
        for lh in range(a * p):
            h = gi * a * p + lh
            _gpus, nics, base = b.host(h, node)
            block, pos = divmod(lh, p * k)
            for r, nic in enumerate(nics):
                s_idx = block * k + r % k if k > 1 else lh // p
                up, down = b.duplex(nic, sw[gi][s_idx], profile.port_capacity_Bps, nic_latency_s + switch_latency_s,
                                    "nic_up", "nic_down")
                nic_ports[nic] = [(up, sw[gi][s_idx], down)]
                nic_profiles[nic] = profile
            hosts.append((node, h * node.n_gpus, base, nics))

    group_of = {s: gi for gi in range(g) for s in sw[gi]}

    def minimal(s: int, t: int) -> list[tuple[int, ...]]:
        """Fewest-hop switch paths: local link inside a group; local-global-local between groups."""
        if s == t:
            return [()]
        gs, gt = group_of[s], group_of[t]
        if gs == gt:
            return [(local_link[s, t],)]
        options = []
        for u, glink, v in cables[gs, gt]:
            options.append(((local_link[s, u],) if s != u else ()) + (glink,) + ((local_link[v, t],) if v != t else ()))
        fewest = min(map(len, options))
        return [o for o in options if len(o) == fewest]

    switch_nodes = [s for row in sw for s in row]
    nic_ports_per_switch = p * node.n_nics
    h_eff = per_pair * (g - 1) / a
    params = {
        "type": "dragonfly", "groups": g, "switches_per_group": a, "hosts_per_switch": p,
        "global_links_between_groups": per_pair, "global_cables": per_pair * g * (g - 1) // 2,
        "global_links_per_switch": h_eff, "radix": nic_ports_per_switch + a - 1 + int(-(-per_pair * (g - 1) // a)),
        "link_bandwidth_Bps": link_bandwidth_Bps, "nic_bandwidth_Bps": nic_bw, "node": node.name,
        "nics_on_switches": k, "switches": len(switch_nodes), "arrangement": arrangement,
        # global bandwidth out of a group over the injection bandwidth of its hosts (1 = untapered)
        "global_to_injection": per_pair * (g - 1) * link_bandwidth_Bps / (a * p * node.n_nics * nic_bw),
    }
    topo = Topology(f"dragonfly(g={g}, a={a}, p={p}, {per_pair} cables/group pair)", b.graph, compile_links(b.links),
                    hosts, nic_ports, nic_profiles, intra_overhead_s, params, switch_path_fn=minimal)
    topo.switch_group = group_of
    topo.group_switches = sw
    topo.group_cables = cables
    topo.local_link = local_link
    return topo


def frontier(*, groups: int = 74, nics_on_switches: int = 4, link_bandwidth_Bps: float = 200 * GBPS,
             switch_latency_s: float = 350e-9, cable_latency_s: float = 0.0, global_links_between_groups: int = 4,
             nic_overhead_s: float = 0.0, if_latency_s: float = 0.0) -> Topology:
    """Frontier (OLCF): Slingshot dragonfly of ``groups`` cabinets, 128 MI250X nodes (8 GCDs) each.

    A group: 32 switches, all-to-all; 16 endpoint ports per switch (128 nodes x 4 NICs); 4 global
    cables between every pair of groups; 200 Gbps everywhere. A node's four 25 GB/s NICs hang off
    GCDs 1, 3, 5, 7 and go to four switches (``nics_on_switches=4``, default) or one (``1``). The
    per-hop switch latency (350 ns) is an estimate.

    Examples
    --------
    >>> t = frontier(groups=2)
    >>> t.n_gpus, t.n_hosts, t.params["switches"]
    (2048, 256, 64)
    """
    if nics_on_switches not in (1, 4):
        raise ConfigError("must be 1 (all NICs of a node on one switch) or 4 (one switch per NIC)",
                          "topology.nics_on_switches")
    return dragonfly(groups=groups, switches_per_group=32, hosts_per_switch=4, link_bandwidth_Bps=link_bandwidth_Bps,
                     global_links_between_groups=global_links_between_groups, local_latency_s=cable_latency_s,
                     global_latency_s=cable_latency_s, switch_latency_s=switch_latency_s, nic_overhead_s=nic_overhead_s,
                     node=frontier_node(if_latency_s=if_latency_s), nics_on_switches=nics_on_switches,
                     nic=NicProfile("slingshot-200", link_bandwidth_Bps, nic_overhead_s, 1.0, "rdma", "slingshot"))

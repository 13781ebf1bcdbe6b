"""A packet-by-packet reference: flows cut into packets, FIFO links, switches that hold a packet (or its
header) before forwarding it. Independent of netsim's engine; ``tests/test_packets.py`` runs the same
flows on the same paths through both.

Each link sends one packet at a time at its line rate, in the order packets become ready for it, and
delivers it after its latency. A source NIC paces each flow's packets at its line rate, so flows
leaving one NIC share it packet by packet (as a NIC's queue pairs do). A switch sends a packet on once
it holds all of it (store-and-forward) or its header (cut-through: never finishing before the packet's
last byte has come in). A flow completes when its last packet has fully arrived at the last link's end.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass


@dataclass(frozen=True)
class Flow:
    links: tuple[int, ...]   #: the network links in path order (first: the source NIC's uplink)
    payload: float           #: bytes
    start: float = 0.0


def simulate(flows: list[Flow], rate: dict[int, float], latency: dict[int, float], *, mtu: int, header: int,
             switching: str) -> list[float]:
    """Completion time of each flow (``rate``: line rate of each link, bytes/s; ``latency``: seconds)."""
    free = {lk: 0.0 for lk in rate}
    done = [0.0] * len(flows)
    heap: list[tuple[float, int, int, int, int, float, float]] = []   # (ready, seq, flow, packet, hop, wire, in_full)
    seq = 0
    for f, flow in enumerate(flows):
        n_full, tail = divmod(flow.payload, mtu)
        sizes = [mtu] * int(n_full) + ([tail] if tail > 0 else [])
        first = rate[flow.links[0]]
        t = flow.start
        for k, size in enumerate(sizes):
            wire = size + header
            heapq.heappush(heap, (t, seq, f, k, 0, wire, t))
            seq += 1
            t += wire / first       # paced at the NIC's line rate
    while heap:
        ready, _s, f, k, hop, wire, in_full = heapq.heappop(heap)
        lk = flows[f].links[hop]
        r = rate[lk]
        start = max(ready, free[lk])
        end = start + wire / r
        if switching == "cut_through" and hop > 0:
            end = max(end, in_full + header / r)   # cannot send the last byte before it came in
        free[lk] = end
        arrive_full = end + latency[lk]
        if hop + 1 == len(flows[f].links):
            done[f] = max(done[f], arrive_full)
            continue
        held = {"store_and_forward": wire, "cut_through": header, "none": 0.0}[switching]
        ready_next = start + held / r + latency[lk]
        heapq.heappush(heap, (ready_next, seq, f, k, hop + 1, wire, arrive_full))
        seq += 1
    return done

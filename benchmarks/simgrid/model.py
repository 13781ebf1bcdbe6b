"""A netsim scenario's fabric and communication in SimGrid 4.x, through SimGrid's Python bindings.

Runs in SimGrid's own virtualenv (see README.md), never in netsim's: ``python model.py PLAN.json``
with a plan written by ``plan.py`` (``model.cpp`` is the same model in C++). Prints one JSON line: the simulated completion time, the flows
SimGrid simulated, and the wall time of building the platform and of the simulation.

The model is SimGrid's LMM (fluid max-min sharing, as in netsim), configured to be plain max-min:

- ``network/model:CM02``: the LMM-based TCP model without LV08's or SMPI's correction factors;
- ``network/latency-factor:1``, ``network/bandwidth-factor:1``: no corrections of the platform's
  latencies and bandwidths (CM02's defaults, set anyway);
- ``network/weight-S:0``: no RTT-unfairness term in a flow's sharing weight (CM02's default);
- ``network/TCP-gamma:0``: no TCP-window cap (gamma / 2 latency) on a flow's rate;
- ``network/crosstraffic:0``: no 5 % of each flow on the reverse route's links (acknowledgements),
  which is on by default. Each link here is one direction of a cable, shared by its flows only.

What CM02 still does that netsim does not is latency. A CM02 flow takes no bandwidth while it
"pays" its route's latency, and then shares bottlenecks with the weight 1 / latency (SimGrid calls
the latency the flow's *sharing penalty*), so a flow on a 2 us route gets 1.5x the share of one on
a 3 us route. netsim starts every flow at once with equal weights and delivers the message its
path latency after its last byte has drained. Two latency modes therefore:

- ``netsim`` (the plan's default): every link has latency 0 in SimGrid, so every flow gets the
  same weight (a latency-free CM02 variable has penalty 1) and takes bandwidth at once; each
  message's path latency is added after its last byte, as netsim does. This is netsim's model
  exactly, and the simulated times agree with netsim's to SimGrid's precision;
- ``simgrid``: the links carry their latencies and CM02 does what it does. Where no flow shares a
  link (the rank-order ring: every flow has its NIC links alone, and the inter-leaf hops land on
  distinct spine links) this is the same model too: latency + size / bandwidth per message, and
  it spares SimGrid one sleep per message. ``plan.py`` picks it then (``auto``). Where flows share
  links (the all-to-all), the results differ from netsim's, by the mechanism above.

Routes are explicit, one per host pair, in a Full zone. A sprayed message (``routing: spray``) is
split into one flow per spine; since a zone has one route per host pair, each host gets one
endpoint per spine, all behind the host's one NIC up and down links. A message between two hosts
of one leaf is split as well (its pieces share its one path), so that every message weighs the
same on its NIC links, as in netsim. netsim's sprayed flow has one rate, a fixed share of it on
each spine; SimGrid's pieces have a rate each. Where the spine links are not the bottleneck (the
1:1 all-to-all) the two are the same model.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import simgrid
from simgrid import ActivitySet, Comm, Engine, LinkInRoute, Mailbox, this_actor

SAME_LEAF, ALL_SPINES = -1, -2

#: Plain max-min (see the module docstring for each option).
CONFIG = ["--cfg=network/model:CM02", "--cfg=network/latency-factor:1", "--cfg=network/bandwidth-factor:1",
          "--cfg=network/weight-S:0", "--cfg=network/TCP-gamma:0", "--cfg=network/crosstraffic:0",
          "--log=root.thres:warning"]


class Fabric:
    """The leaf-spine as SimGrid links, hosts (one endpoint per spine when sprayed) and routes."""

    def __init__(self, engine: Engine, plan: dict):
        self.plan = plan
        n, spines, hpl = plan["hosts"], plan["spines"], plan["hosts_per_leaf"]
        native = plan["latency"] == "simgrid"
        nic_lat = plan["nic_latency_s"] if native else 0.0
        up_lat = plan["uplink_latency_s"] if native else 0.0
        zone = engine.netzone_root.add_netzone_full("fabric")

        def link(name: str, bw: float, lat: float):
            return zone.add_link(name, bw).set_latency(lat).seal()

        leaves = plan["leaves"]
        nic_up = [link(f"h{h}.nic->leaf{h // hpl}", plan["nic_Bps"], nic_lat) for h in range(n)]
        nic_down = [link(f"leaf{h // hpl}->h{h}.nic", plan["nic_Bps"], nic_lat) for h in range(n)]
        up = [[link(f"leaf{lf}->spine{s}", plan["uplink_Bps"], up_lat) for s in range(spines)] for lf in range(leaves)]
        down = [[link(f"spine{s}->leaf{lf}", plan["uplink_Bps"], up_lat) for lf in range(leaves)]
                for s in range(spines)]
        self.sprayed = plan["routing"] == "spray"
        ends = spines if self.sprayed else 1
        #: endpoint[h][j]: host h's endpoint for spine j (one endpoint unless sprayed)
        self.endpoint = [[zone.add_host(f"h{h}" + (f".{j}" if self.sprayed else ""), 1e9).seal() for j in range(ends)]
                         for h in range(n)]
        self.messages = plan["messages"]
        for s, d, spine in self.messages:
            if spine == SAME_LEAF:
                self._route(zone, self.endpoint[s][0], self.endpoint[d][0], [nic_up[s], nic_down[d]])
            else:
                via = range(spines) if spine == ALL_SPINES else [spine]
                for j in via:
                    links = [nic_up[s], up[s // hpl][j], down[j][d // hpl], nic_down[d]]
                    self._route(zone, self.endpoint[s][j if self.sprayed else 0],
                                self.endpoint[d][j if self.sprayed else 0], links)
        zone.seal()
        self.n_links = 2 * n + 2 * leaves * spines

    @staticmethod
    def _route(zone, src, dst, links) -> None:
        zone.add_route(src, dst, [LinkInRoute(lk) for lk in links], False)

    def delay_s(self, s: int, d: int) -> float:
        """What netsim adds after a message's last byte: its path latency plus the NIC's overhead."""
        p, hpl = self.plan, self.plan["hosts_per_leaf"]
        lat = 2 * p["nic_latency_s"] + (0.0 if s // hpl == d // hpl else 2 * p["uplink_latency_s"])
        return lat + p["overhead_s"]


def alltoall(engine: Engine, fab: Fabric) -> dict:
    """Every host sends its message to every other at once; done when the last one has arrived."""
    plan = fab.plan
    size = plan["message_bytes"]
    spines = plan["spines"]
    by_src: dict[int, list] = {}
    for s, d, spine in fab.messages:
        by_src.setdefault(s, []).append((d, spine))
    ends: list[float] = []
    finishes: set[float] = set()  # distinct flow completion times: the instants SimGrid re-solved sharing at
    flows = [0]
    add_delay = plan["latency"] == "netsim"
    # Sprayed, every message is split, on one leaf too (over its one path): each message then has
    # `spines` unit-weight flows on its NIC links, the weight netsim's one sprayed flow has there.
    parts = spines if fab.sprayed else 1

    def rank(s: int) -> None:
        # One actor per sender, as netsim's ranks: post every send, wait for all.
        comms, delays = ActivitySet(), []
        mine = []
        for d, spine in by_src[s]:
            for j in range(parts):
                end = j if spine == ALL_SPINES else 0
                c = Comm.sendto_async(fab.endpoint[s][end], fab.endpoint[d][end], int(size / parts))
                comms.push(c)
                mine.append(c)
                delays.append(fab.delay_s(s, d) if add_delay else 0.0)
        comms.wait_all()
        flows[0] += len(mine)
        ends.append(max(c.finish_time + x for c, x in zip(mine, delays)))
        finishes.update(c.finish_time for c in mine)

    for s in sorted(by_src):
        fab.endpoint[s][0].add_actor(f"rank{s}", rank, s)
    engine.run()
    return {"sim_time_s": max(ends), "flows": flows[0], "finish_instants": len(finishes)}


def ring(engine: Engine, fab: Fabric) -> dict:
    """Ring all-reduce in rank order: rank r sends step k to r + 1 once step k - 1 from r - 1 has arrived."""
    plan = fab.plan
    n, steps, size = plan["hosts"], plan["steps"], plan["message_bytes"]
    succ = {s: d for s, d, _ in fab.messages}
    boxes = [Mailbox.by_name(f"rank{r}") for r in range(n)]
    add_delay = plan["latency"] == "netsim"
    flows = [0]

    def rank(r: int) -> None:
        # Eager mailbox: a message flows as soon as it is sent, as netsim's (the receiver need not wait in get()).
        boxes[r].set_receiver(simgrid.Actor.self())
        d = succ[r]
        pred_delay = fab.delay_s((r - 1) % n, r)
        for k in range(steps):
            if k:
                boxes[r].get()
                if add_delay:
                    this_actor.sleep_for(pred_delay)
            boxes[d].put_init(k, int(size)).detach()
        boxes[r].get()
        if add_delay:
            this_actor.sleep_for(pred_delay)
        flows[0] += steps

    for r in range(n):
        fab.endpoint[r][0].add_actor(f"rank{r}", rank, r)
    engine.run()
    return {"sim_time_s": Engine.clock, "flows": flows[0]}


def read_plan(path: str) -> dict:
    """The plan ``plan.py`` wrote: scalar fields, then ``messages`` as ``[src, dst, spine]`` lists."""
    lines = Path(path).read_text().splitlines()
    if lines[0] != "netsim-simgrid-plan 1":
        raise SystemExit(f"{path}: not a plan written by plan.py")
    plan: dict = {}
    for i, line in enumerate(lines[1:], 1):
        key, value = line.split(" ", 1)
        if key == "messages":
            plan[key] = [[int(x) for x in m.split()] for m in lines[i + 1:i + 1 + int(value)]]
            break
        plan[key] = int(value) if value.lstrip("-").isdigit() else (
            float(value) if value[0].isdigit() or value[0] == "-" else value)
    return plan


def main(path: str) -> None:
    plan = read_plan(path)
    t0 = time.perf_counter()
    engine = Engine([sys.argv[0], *CONFIG])
    fab = Fabric(engine, plan)
    t1 = time.perf_counter()
    result = (alltoall if plan["pattern"] == "alltoall" else ring)(engine, fab)
    t2 = time.perf_counter()
    print(json.dumps({"scenario": plan["scenario"], "pattern": plan["pattern"], "routing": plan["routing"],
                      "latency": plan["latency"], "simgrid": simgrid.simgrid_version, "bindings": "Python",
                      "hosts": plan["hosts"],
                      "links": fab.n_links, **result, "build_s": round(t1 - t0, 3), "run_s": round(t2 - t1, 3)}))


if __name__ == "__main__":
    main(sys.argv[1])

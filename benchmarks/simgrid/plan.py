"""A netsim scenario file as the plan a SimGrid model runs: the fabric, each message's route, the pattern.

Runs in the project's virtualenv (PyYAML, numpy) and writes a plain text file that ``model.py``
(in SimGrid's virtualenv, which has neither) and ``model.cpp`` read. It reads the YAML itself rather than through netsim's
config loader, so that the SimGrid side does not depend on netsim's code (netsim's engine is being
rewritten in the same tree); the few fields it reads are checked, and anything else is refused.

Supported scenarios: a leaf-spine with one GPU and one NIC per host, one cable per leaf-spine pair,
sequential placement, ``ecmp`` or ``spray`` routing, and either the direct all-to-all or the ring
all-reduce (one channel, no chunks, every GPU). That covers ``a2a-*.yaml`` and ``ring-1024.yaml``.

Routes. A pair on one leaf has one path (NIC up, NIC down). A pair on two leaves crosses one spine:

- ``ecmp``: the spine netsim's ECMP hashes the connection to, reproduced bit for bit (the same salt,
  drawn from the run seed as netsim draws it, the same blake2b of the connection's key, the same
  candidate order); :func:`check_ecmp` compares every route with netsim's own policy;
- ``dmodk``: spine ``dst mod spines`` (D-mod-k). In a 1:1 leaf-spine all-to-all every uplink then
  carries the same number of flows, as under ``spray``, and the simulated time is the same;
- ``spray``: every spine, the message split into one flow of ``bytes / spines`` per spine. netsim
  sprays one fluid flow with a fixed 1/spines share on each spine; SimGrid flows have unit weight
  on their links, so the split is the closest it can express (the same time here, by symmetry).
"""

from __future__ import annotations

import hashlib
import re
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml

#: A route's spine for a pair on one leaf (no spine) and for a sprayed pair (every spine).
SAME_LEAF, ALL_SPINES = -1, -2
ROUTINGS = ("ecmp", "dmodk", "spray")


class Unsupported(ValueError):
    """The scenario is outside what the SimGrid model builds (the message says why)."""


def ecmp_salt(seed: int) -> bytes:
    """netsim's ECMP salt for run seed ``seed``: the first draw of the run's routing generator."""
    routing_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
    return int(routing_rng.integers(0, 2**63)).to_bytes(8, "little")


def ecmp_index(salt: bytes, src: int, dst: int, candidates: int, channel: int = 0, job: int = 0) -> int:
    """The candidate path netsim's ECMP picks for connection (src, dst, channel, job)."""
    data = salt + np.array((src, dst, channel, job), dtype=np.int64).tobytes()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") % candidates


_PREFIX = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_PER_SECOND = {"p": 10**12, "n": 10**9, "u": 10**6, "µ": 10**6, "m": 10**3, "": 1}


def quantity(value, kind: str) -> float:
    """A YAML quantity as netsim reads it: ``size`` in bytes, ``bandwidth`` in bytes/s, ``time`` in s.

    The same units as ``netsim.units`` (``256MiB``, ``400Gbps``, ``25GB/s``, ``500ns``; b bits, B bytes).
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = re.fullmatch(r"\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(\S*)\s*", str(value))
    unit = m and m[2]
    if m and kind == "time" and (u := re.fullmatch(r"([pnuµm]?)s", unit)):
        return float(Fraction(m[1]) / _PER_SECOND[u[1]])
    if m and kind in ("size", "bandwidth"):
        pattern = r"([KMGT]i|[kKMGT]|)([bB])" + ("(?:ps|/s)" if kind == "bandwidth" else "")
        if kind == "size" and unit == "":
            return float(Fraction(m[1]))
        if u := re.fullmatch(pattern, unit):
            return float(Fraction(m[1]) * _PREFIX[u[1]] / (8 if u[2] == "b" else 1))
    raise Unsupported(f"cannot read {value!r} as a {kind}")


def read_scenario(path: Path) -> SimpleNamespace:
    """The fields of a scenario file that the model needs, in bytes, bytes/s and seconds.

    Refuses what it does not model (see the module docstring): the message says what.
    """
    doc = yaml.safe_load(Path(path).read_text())
    t, w = doc.get("topology") or {}, doc.get("workload") or {}
    nic, uplink = t.get("nic") or {}, t.get("uplink") or {}
    placement = doc.get("placement", "sequential")
    placement = placement.get("type") if isinstance(placement, dict) else placement
    routing = doc.get("routing", "ecmp")
    routing = routing.get("type") if isinstance(routing, dict) else routing
    problems = []
    if t.get("type") != "leaf_spine":
        problems.append("the topology is not a leaf-spine")
    if (t.get("gpus_per_host"), t.get("nics_per_host", 1), uplink.get("count", 1)) != (1, 1, 1) \
            or t.get("rail_optimized") or set(nic) - {"bandwidth", "latency", "overhead"}:
        problems.append("hosts need one GPU and one plain NIC (bandwidth, latency, overhead), leaves one cable "
                        "per spine")
    if placement != "sequential":
        problems.append(f"placement {placement!r} (only sequential)")
    if routing not in ("ecmp", "spray"):
        problems.append(f"routing {routing!r} (only ecmp and spray)")
    if doc.get("jobs") or doc.get("faults"):
        problems.append("jobs or faults")
    if w.get("type") != "collective" or (w.get("op"), w.get("algorithm")) not in (("alltoall", "direct"),
                                                                                  ("allreduce", "ring")):
        problems.append("the workload is not a direct all-to-all or a ring all-reduce")
    elif w.get("channels", 1) != 1 or w.get("chunk") or w.get("ranks") or w.get("iterations", 1) != 1:
        problems.append("channels, chunks, rank subsets or iterations")
    if problems:
        raise Unsupported("; ".join(problems))
    return SimpleNamespace(
        seed=int(doc.get("seed", 0)), routing=routing, op=w["op"], size_bytes=quantity(w["size"], "size"),
        leaves=int(t["leaves"]), spines=int(t["spines"]), hosts_per_leaf=int(t["hosts_per_leaf"]),
        nic_Bps=quantity(nic["bandwidth"], "bandwidth"), nic_latency_s=quantity(nic.get("latency", 0), "time"),
        overhead_s=quantity(nic.get("overhead", 0), "time"),
        uplink_Bps=quantity(uplink["bandwidth"], "bandwidth"), uplink_latency_s=quantity(uplink.get("latency", 0), "time"))


def shares_links(messages: list[tuple[int, int, int]], hosts_per_leaf: int) -> bool:
    """True when two connections of ``messages`` cross one link (one direction of one cable)."""
    seen: set[tuple] = set()
    for s, d, spine in messages:
        links = [("nic up", s), ("nic down", d)]
        if spine == ALL_SPINES:
            return True
        if spine != SAME_LEAF:
            links += [("up", s // hosts_per_leaf, spine), ("down", spine, d // hosts_per_leaf)]
        for link in links:
            if link in seen:
                return True
            seen.add(link)
    return False


def make_plan(scenario: str | Path, routing: str | None = None, latency: str = "auto") -> dict:
    """The plan of ``scenario``: fabric numbers, pattern and one ``[src, dst, spine]`` per connection.

    ``routing`` defaults to the scenario's (``spray`` scenarios get ``dmodk``, the balanced routes
    with one flow per message; pass ``spray`` for the split). ``latency`` is ``netsim`` (the model
    adds each message's path latency after its last byte, as netsim does) or ``simgrid``
    (SimGrid's own CM02 latency, see model.py); ``auto`` picks ``simgrid`` when no two connections
    share a link (then it is netsim's model too, and costs SimGrid no extra event per message) and
    ``netsim`` otherwise.
    """
    sc = read_scenario(Path(scenario))
    routing = routing or ("ecmp" if sc.routing == "ecmp" else "dmodk")
    if routing not in ROUTINGS:
        raise Unsupported(f"routing {routing!r}: one of {', '.join(ROUTINGS)}")
    n, hpl = sc.leaves * sc.hosts_per_leaf, sc.hosts_per_leaf
    if sc.op == "alltoall":
        pattern, message_bytes, steps = "alltoall", sc.size_bytes / n, 1
        pairs = [(s, d) for s in range(n) for d in range(n) if d != s]
    else:
        pattern, message_bytes, steps = "ring", sc.size_bytes / n, 2 * (n - 1)
        pairs = [(r, (r + 1) % n) for r in range(n)]
    salt = ecmp_salt(sc.seed)
    messages = []
    for s, d in pairs:
        if s // hpl == d // hpl:
            spine = SAME_LEAF
        elif routing == "ecmp":
            spine = ecmp_index(salt, s, d, sc.spines)
        elif routing == "dmodk":
            spine = d % sc.spines
        else:
            spine = ALL_SPINES
        messages.append((s, d, spine))
    if latency == "auto":
        latency = "netsim" if shares_links(messages, hpl) else "simgrid"
    return {
        "scenario": Path(scenario).stem, "pattern": pattern, "routing": routing, "latency": latency,
        "hosts": n, "leaves": sc.leaves, "spines": sc.spines, "hosts_per_leaf": hpl,
        "nic_Bps": sc.nic_Bps, "nic_latency_s": sc.nic_latency_s, "overhead_s": sc.overhead_s,
        "uplink_Bps": sc.uplink_Bps, "uplink_latency_s": sc.uplink_latency_s,
        "message_bytes": message_bytes, "steps": steps, "messages": messages,
    }


def check_ecmp(scenario: str | Path) -> int:
    """Compare every ECMP route of the plan with netsim's own ECMP policy; returns the routes checked.

    Uses netsim's internals (topology builder, routing registry, the run's generators), so it is a
    check to run by hand (``run.py --check-routes``), not part of a timed run.
    """
    from netsim.config import load_spec
    from netsim.experiment.run import _rngs, build_topology
    from netsim.routing import make_routing
    from netsim.routing.base import Connection

    spec = load_spec(Path(scenario))
    plan = make_plan(scenario, "ecmp")
    topo = build_topology(spec)
    policy = make_routing("ecmp", topo, _rngs(spec)[1], spec.routing.options)
    spine_of = {}
    for link in range(len(topo.links.latency_s)):
        name = topo.link_name(link)
        if name.startswith("leaf") and "->spine" in name:
            spine_of[link] = int(name.split("->spine")[1])
    for s, d, spine in plan["messages"]:
        (path, _), = policy.paths(Connection(s, d))
        theirs = next((spine_of[lk] for lk in path if lk in spine_of), SAME_LEAF)
        if theirs != spine:
            raise AssertionError(f"{plan['scenario']}: {s}->{d} crosses spine {theirs} in netsim, {spine} here")
    return len(plan["messages"])


#: The plan's scalar fields, in the order a plan file lists them (model.cpp reads them in this order).
FIELDS = ("scenario", "pattern", "routing", "latency", "hosts", "leaves", "spines", "hosts_per_leaf", "nic_Bps",
          "nic_latency_s", "overhead_s", "uplink_Bps", "uplink_latency_s", "message_bytes", "steps")


def write_plan(plan: dict, path: Path) -> Path:
    """Write ``plan`` as text both models read: ``key value`` lines, then ``messages N`` and N ``src dst spine``."""
    lines = ["netsim-simgrid-plan 1"] + [f"{key} {plan[key]!r}" if isinstance(plan[key], float) else
                                         f"{key} {plan[key]}" for key in FIELDS]
    lines.append(f"messages {len(plan['messages'])}")
    lines += [f"{s} {d} {spine}" for s, d, spine in plan["messages"]]
    path.write_text("\n".join(lines) + "\n")
    return path

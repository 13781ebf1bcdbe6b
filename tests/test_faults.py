"""Timed faults (down / up / degrade / flap, on cables, NICs and switches): no byte lost, each policy pays its reaction time, clear errors."""

import functools
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from netsim.cli import app
from netsim.config import ExperimentSpec, FaultSpec
from netsim.engine import Environment, Fabric
from netsim.engine.faults import Fault, fault_process, resolve_faults
from netsim.errors import NetsimError
from netsim.experiment import run_experiment
from netsim.routing import Connection, make_routing
from netsim.topology import LINK_KINDS
from netsim.topology.multicluster import multi_cluster
from netsim.topology.nic import nic_profile
from tests.conftest import GB, config_errors, make_leaf_spine

runner = CliRunner()
B = 100e9 / 8  #: 100 Gbps, the NIC and uplink rate of every spec below, in B/s

#: The option holding each policy's reaction time (how long after a fault it learns of it)
REACTION = {"ecmp": "reconvergence", "split": "reconvergence", "spray": "reconvergence",
            "ethereal": "detection", "min-split": "detection", "c4p": "detection"}


def spec_dict(routing="ecmp", faults=(), *, leaves=2, spines=2, hosts_per_leaf=2, gpus_per_host=1,
              nics_per_host=1, uplinks=1, op="allreduce", algorithm="ring", size="16MiB", ranks=None,
              seed=0) -> dict:
    """A small leaf-spine experiment (NIC = uplink = 100 Gbps, no latency) as a plain mapping, in the pure
    fluid model (the closed forms below hold for it)."""
    workload = {"type": "collective", "op": op, "algorithm": algorithm, "size": size}
    if ranks is not None:
        workload["ranks"] = ranks
    return {
        "name": "faults", "seed": seed, "model": "fluid",
        "topology": {"type": "leaf_spine", "leaves": leaves, "spines": spines,
                     "hosts_per_leaf": hosts_per_leaf, "gpus_per_host": gpus_per_host,
                     "nics_per_host": nics_per_host,
                     "nic": {"bandwidth": "100Gbps"}, "uplink": {"bandwidth": "100Gbps", "count": uplinks},
                     "intra_host": {"bandwidth": "900GB/s"}},
        "routing": routing, "workload": workload, "faults": list(faults)}


def experiment(*args, **kw):
    """Run :func:`spec_dict` through the whole pipeline."""
    return run_experiment(ExperimentSpec.model_validate(spec_dict(*args, **kw)))


def spine_of(topo, path) -> str:
    """Name of the spine a leaf-to-leaf link path crosses."""
    return next(topo.node_name(int(topo.links.dst[lk])) for lk in path
                if topo.graph.nodes[int(topo.links.dst[lk])]["kind"] == "spine")


# ---------------------------------------------------------------------------- byte conservation

WORKLOADS = [("allreduce", "ring"), ("allreduce", "halving_doubling"), ("alltoall", "direct")]


@functools.cache
def healthy_duration(**topo_args) -> float:
    """Duration of the fault-free 1 MiB collective under spraying (fault times are drawn inside it)."""
    return experiment("spray", size="1MiB", **topo_args).collectives[0].duration_s


@st.composite
def scenarios(draw):
    """A small fabric, a collective on all its GPUs, a routing policy and a fault schedule ending all up."""
    leaves = draw(st.integers(2, 3))
    spines = draw(st.integers(2, 4))
    uplinks = draw(st.sampled_from([1, 1, 2]))
    hosts_per_leaf = 2
    gpus_per_host = draw(st.sampled_from([1, 2]))
    nics_per_host = draw(st.sampled_from(sorted({1, gpus_per_host})))
    op, algorithm = draw(st.sampled_from(WORKLOADS))
    n_gpus = leaves * hosts_per_leaf * gpus_per_host
    # halving-doubling needs a power of two: all GPUs when they are, else the largest power of two below
    odd = algorithm == "halving_doubling" and n_gpus & (n_gpus - 1)
    ranks = 1 << (n_gpus.bit_length() - 1) if odd else None
    policy = draw(st.sampled_from(sorted(REACTION)))
    routing = {"type": policy, REACTION[policy]: draw(st.sampled_from([0.0, 20e-6, 1e-3]))}
    if policy == "split":
        routing["ways"] = draw(st.integers(1, 4))

    def cable():
        leaf, spine = draw(st.integers(0, leaves - 1)), draw(st.integers(0, spines - 1))
        sep = draw(st.sampled_from(["-", "->", "<-"]))
        name = f"spine{spine}->leaf{leaf}" if sep == "<-" else f"leaf{leaf}{sep}spine{spine}"
        return name + (f"#{draw(st.integers(0, uplinks - 1))}" if uplinks > 1 else "")

    def nic():
        host = draw(st.integers(0, leaves * hosts_per_leaf - 1))
        return f"h{host}.nic{draw(st.integers(0, nics_per_host - 1))}"

    def switch():
        return draw(st.sampled_from([f"leaf{i}" for i in range(leaves)] + [f"spine{j}" for j in range(spines)]))

    raw = draw(st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.sampled_from(["link", "nic", "switch"]),
                                  st.sampled_from(["down", "degrade", "up", "flap"]),
                                  st.sampled_from([0.25, 0.5, 0.75])),
                        min_size=1, max_size=5))
    events = []
    for at, kind, action, fraction in raw:
        target = {"link": cable()} if kind == "link" else {"nic": nic()} if kind == "nic" else {"switch": switch()}
        events.append((at, target, action, fraction))
    restore_at = draw(st.floats(0, 1))
    topo = dict(leaves=leaves, spines=spines, uplinks=uplinks, hosts_per_leaf=hosts_per_leaf,
                gpus_per_host=gpus_per_host, nics_per_host=nics_per_host, op=op, algorithm=algorithm,
                ranks=ranks)
    return topo, routing, events, restore_at, draw(st.integers(0, 3))


def fault_list(events, restore_at, duration):
    """Fault entries at fractions of ``duration``; all targets that went down come back up after the last.
    A flap goes down for ``fraction`` of a tenth of ``duration``, three times (it ends up)."""
    faults, downed = [], {}
    for at, target, action, fraction in events:
        entry = {"at": at * duration, **target, "action": action}
        if action == "degrade":
            entry["fraction"] = fraction
        if action == "flap":
            entry.update(period=duration / 10, down_for=fraction * duration / 10, count=3)
        faults.append(entry)
        if action == "down":
            downed[tuple(target.items())] = target
    last = max(at for at, *_ in events)
    for target in downed.values():
        faults.append({"at": (last + restore_at) * duration, **target, "action": "up"})
    return faults


def _host_links(topo, kind: str, end: str) -> dict[int, np.ndarray]:
    """Per host, the ids of its NIC links of ``kind`` (``end`` = the link end at the NIC: src or dst)."""
    lt = topo.links
    nodes = lt.src if end == "src" else lt.dst
    mask = lt.kind == LINK_KINDS.index(kind)
    return {h: np.flatnonzero(mask & np.isin(nodes, nics)) for h, (_m, _g, _b, nics) in enumerate(topo.hosts)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_faults_never_lose_or_invent_a_byte(scenario):
    """Any schedule of downs, degrades, flaps and ups of cables, NICs and switches (all downs undone in
    the end): every posted byte arrives once, and per host the NIC links carried exactly the bytes its GPUs exchanged with other hosts
    (1e-6 relative)."""
    topo_args, routing, events, restore_at, seed = scenario
    duration = healthy_duration(**topo_args)
    faults = fault_list(events, restore_at, duration)
    result = experiment(routing, faults, size="1MiB", seed=seed, **topo_args)
    fab, topo = result.fabric, result.topology
    assert len(result.collectives) == 1
    assert fab.undelivered == 0 and fab.active_flows == 0
    assert set(fab.bytes_posted) == set(fab.bytes_delivered)
    recorded: dict[str, float] = {}
    for record in fab.flow_records:  # (fid, label, src, dst, channel, job, size, start, end, paths)
        recorded[record[1]] = recorded.get(record[1], 0.0) + record[6]
    for conn, posted in fab.bytes_posted.items():
        assert fab.bytes_delivered[conn] == pytest.approx(posted, rel=1e-9), conn
        assert recorded[conn.label()] == pytest.approx(posted, rel=1e-9), conn
    host = topo.gpu_host
    sent = np.zeros(topo.n_hosts)
    received = np.zeros(topo.n_hosts)
    inter_leaf = 0.0
    per_leaf = topo_args["hosts_per_leaf"]
    for conn, posted in fab.bytes_posted.items():
        hs, hd = int(host[conn.src]), int(host[conn.dst])
        if hs != hd:
            sent[hs] += posted
            received[hd] += posted
        if hs // per_leaf != hd // per_leaf:
            inter_leaf += posted
    link_bytes = fab.link_bytes
    ups, downs = _host_links(topo, "nic_up", "src"), _host_links(topo, "nic_down", "dst")
    for h in range(topo.n_hosts):
        assert link_bytes[ups[h]].sum() == pytest.approx(sent[h], rel=1e-6, abs=1e-3), h
        assert link_bytes[downs[h]].sum() == pytest.approx(received[h], rel=1e-6, abs=1e-3), h
    # every byte between leaves climbs exactly one leaf->spine cable and descends one spine->leaf cable
    for kind in ("up", "down"):
        core = link_bytes[topo.links.kind == LINK_KINDS.index(kind)].sum()
        assert core == pytest.approx(inter_leaf, rel=1e-6, abs=1e-3), kind
    assert fab.link_peak_util.max() <= 1 + 1e-9  # never above nominal, let alone a degraded capacity


# ---------------------------------------------------------------------------- reaction time, exactly

def lone_flow(routing, faults, options=None, *, spines=2, size=GB, seed=0):
    """One ``size`` flow leaf0 -> leaf1 (1 GB/s everywhere) under ``faults(its spines)``: (time, fabric)."""
    topo = make_leaf_spine(leaves=2, spines=spines, hosts_per_leaf=1)
    env = Environment()
    fab = Fabric(env, topo, make_routing(routing, topo, np.random.default_rng(seed), options))
    conn = Connection(0, 1)
    done = fab.send(0, 1, size, conn)
    used = [spine_of(topo, p) for p, _ in fab.routing.paths(conn)]
    specs = [FaultSpec.model_validate(f) for f in faults(used)]
    env.process(fault_process(env, fab, resolve_faults(specs, topo)))
    env.run(done)
    assert fab.undelivered == 0 and fab.bytes_delivered[conn] == size
    return env.now, fab


@pytest.mark.parametrize("policy", ["ecmp", "c4p", "split"])
@pytest.mark.parametrize("reaction", [1e-3, 3e-3, 0.25])
def test_a_single_path_flow_on_a_failed_cable_waits_exactly_the_reaction_time(policy, reaction):
    """Failed at t0 for good, the flow stalls until the policy reacts, then finishes on the other spine at
    full rate: completion = healthy time (1 s) + reaction, exactly."""
    options = {REACTION[policy]: reaction} | ({"ways": 1} if policy == "split" else {})
    t, fab = lone_flow(policy, lambda used: [{"at": 0.25, "link": f"leaf0-{used[0]}", "action": "down"}],
                       options)
    assert t == pytest.approx(1.0 + reaction, rel=1e-12)
    assert fab.stats["reroutes"] == 1


@pytest.mark.parametrize("reaction", [1e-3, 0.25])
def test_spray_stalls_the_whole_flow_until_reconvergence(reaction):
    """Sprayed bytes are fixed shares of one flow: a dead spine stops all of it until reconvergence."""
    t, _ = lone_flow("spray", lambda used: [{"at": 0.25, "link": "leaf0-spine1", "action": "down"}],
                     {"reconvergence": reaction})
    assert t == pytest.approx(1.0 + reaction, rel=1e-12)


@pytest.mark.parametrize("reaction, expected", [(0.1, 1.0), (0.375, 1.0), (0.5, 1.125), (1.0, 1.625)])
def test_ethereal_hides_a_failure_while_the_live_piece_keeps_the_nic_busy(reaction, expected):
    """Two pieces of 1/2 GB; the spine1 piece stalls at t0 = 0.25 s with 0.375 GB left, the spine0 piece then
    runs alone at the full 1 GB/s (done at 0.625 s). The stalled piece moves at t0 + detection:
    completion = max(1, t0 + detection + 0.375)."""
    for policy in ("ethereal", "min-split"):
        t, _ = lone_flow(policy, lambda used: [{"at": 0.25, "link": "leaf0-spine1", "action": "down"}],
                         {"detection": reaction})
        assert t == pytest.approx(expected, rel=1e-12), policy
        assert t == pytest.approx(max(1.0, 0.25 + reaction + 0.375), rel=1e-12)


def test_a_cable_back_up_before_the_reaction_costs_only_the_outage():
    """Down 0.25 s .. 0.5 s, ECMP reconverges after 1 s: the flow just pauses for the outage."""
    t, fab = lone_flow("ecmp", lambda used: [{"at": 0.25, "link": f"leaf0-{used[0]}", "action": "down"},
                                             {"at": 0.5, "link": f"leaf0-{used[0]}", "action": "up"}],
                       {"reconvergence": 1.0})
    assert t == pytest.approx(1.25, rel=1e-12)


RING_2MS = dict(size="16MiB")  # 4-rank ring allreduce: 1.5 x 16 MiB / 12.5 GB/s = 2.013 ms


@pytest.mark.parametrize("policy", ["ecmp", "c4p"])
def test_ring_allreduce_is_delayed_by_exactly_the_reaction_time(policy):
    """2 leaves x 2 spines, 4-rank ring: the cable under the inter-leaf connection 1 -> 2 fails at 0.5 ms for
    good. Every step has a message in flight on it, so the whole ring waits: duration = T + reaction."""
    healthy = experiment(policy, **RING_2MS)
    (record,) = healthy.collectives
    T = record.duration_s
    assert T == pytest.approx(1.5 * 16 * 2**20 / B, rel=1e-12) and record.slowdown == pytest.approx(1.0)
    used = spine_of(healthy.topology, healthy.fabric.routing.paths(Connection(1, 2))[0][0])
    slowdowns = []
    for reaction in (1e-3, 3e-3):
        fault = {"at": "0.5ms", "link": f"leaf0-{used}", "action": "down"}
        result = experiment({"type": policy, REACTION[policy]: reaction}, [fault], **RING_2MS)
        (rec,) = result.collectives
        assert rec.duration_s == pytest.approx(T + reaction, rel=1e-12)
        assert rec.slowdown == pytest.approx(1 + reaction / T, rel=1e-9)
        slowdowns.append(rec.slowdown)
    assert slowdowns[0] < slowdowns[1]
    # the other spine carries none of this seed's inter-leaf connections under c4p: no delay at all
    if policy == "c4p":
        other = "spine1" if used == "spine0" else "spine0"
        result = experiment({"type": "c4p", "detection": 3e-3},
                            [{"at": "0.5ms", "link": f"leaf0-{other}", "action": "down"}], **RING_2MS)
        assert result.collectives[0].duration_s == pytest.approx(T, rel=1e-12)


def test_ecmp_ring_delay_depends_on_whether_the_hash_crossed_the_failed_cable():
    """Over seeds: duration is T + reconvergence when a connection 1 -> 2 or 3 -> 0 hashed onto the failed
    spine, T otherwise (exact)."""
    for seed in range(6):
        healthy = experiment("ecmp", seed=seed, **RING_2MS)
        T = healthy.collectives[0].duration_s
        crossing = {spine_of(healthy.topology, healthy.fabric.routing.paths(Connection(s, d))[0][0])
                    for s, d in ((1, 2), (3, 0))}
        for spine in ("spine0", "spine1"):
            fault = {"at": "0.5ms", "link": f"leaf0-{spine}", "action": "down"}
            result = experiment({"type": "ecmp", "reconvergence": "3ms"}, [fault], seed=seed, **RING_2MS)
            expected = T + 3e-3 if spine in crossing else T
            assert result.collectives[0].duration_s == pytest.approx(expected, rel=1e-12), (seed, spine)


@pytest.mark.parametrize("policy", ["ethereal", "min-split", "spray", "split"])
def test_ring_slowdown_grows_with_the_reaction_time(policy):
    """A leaf0-spine1 cable fails at 0.5 ms for good: the slower the policy reacts, the slower the ring
    (strictly, since every policy here has traffic on spine1); spray pays the whole reconvergence."""
    slowdowns = []
    for reaction in (1e-4, 5e-4, 1e-3, 3e-3):
        routing = {"type": policy, REACTION[policy]: reaction} | ({"ways": 4} if policy == "split" else {})
        result = experiment(routing, [{"at": "0.5ms", "link": "leaf0-spine1", "action": "down"}], **RING_2MS)
        (rec,) = result.collectives
        if policy == "spray":
            assert rec.duration_s == pytest.approx(rec.ideal_s + reaction, rel=1e-12)
        slowdowns.append(rec.slowdown)
    assert slowdowns[0] > 1.0
    assert all(a < b for a, b in zip(slowdowns, slowdowns[1:])), slowdowns


def test_c4p_plans_without_infinite_loads_when_every_path_is_down():
    """Both leaf0 cables down 0.5 .. 1.5 ms: no route exists, the ring waits out the 1 ms outage."""
    outage = [{"at": at, "link": f"leaf0-spine{j}", "action": action}
              for at, action in (("0.5ms", "down"), ("1.5ms", "up")) for j in (0, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = experiment({"type": "c4p", "detection": 1e-4}, outage, **RING_2MS)
    (rec,) = result.collectives
    assert rec.duration_s == pytest.approx(rec.ideal_s + 1e-3, rel=1e-12)
    assert all(np.isfinite(v) for v in result.fabric.routing.connections.values())


# ---------------------------------------------------------------------------- no way around

def test_a_nic_that_stays_down_is_never_delivered_error():
    with pytest.raises(NetsimError, match="never delivered") as info:
        experiment("ethereal", [{"at": "0.1ms", "nic": "h0.nic0", "action": "down"}])
    assert "h0.nic0->leaf0" in str(info.value)


def test_a_nic_that_stays_down_fails_the_cli_without_results(tmp_path):
    path = tmp_path / "down.yaml"
    path.write_text(yaml.safe_dump(spec_dict("ecmp", [{"at": "0.1ms", "nic": "h3.nic0", "action": "down"}])))
    out = tmp_path / "results"
    result = runner.invoke(app, ["run", str(path), "--out", str(out), "--no-report"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "never delivered" in text and "Traceback" not in text
    assert not out.exists() and not list(tmp_path.glob(".results*")), "a failed run leaves no results"


def test_a_nic_back_up_later_delivers_everything():
    healthy = experiment("ecmp")
    T = healthy.collectives[0].duration_s
    result = experiment("ecmp", [{"at": "0.5ms", "nic": "h0.nic0", "action": "down"},
                                 {"at": "1.5ms", "nic": "h0.nic0", "action": "up"}])
    # a host's NIC has no alternative: the ring just waits out the 1 ms outage
    assert result.collectives[0].duration_s == pytest.approx(T + 1e-3, rel=1e-12)
    assert result.fabric.undelivered == 0


# ---------------------------------------------------------------------------- degrade

@pytest.mark.parametrize("target", ["link", "nic"])
def test_degrade_halves_a_lone_flow_from_that_instant_and_up_restores_it(target):
    """1 GB at 1 GB/s; at 0.25 s its cable (or its NIC) drops to half for 0.25 s: 1/8 GB late, 0.125 s."""
    def faults(used):
        where = {"link": f"leaf0-{used[0]}"} if target == "link" else {"nic": "h0.nic0"}
        return [{"at": 0.25, **where, "action": "degrade", "fraction": 0.5},
                {"at": 0.5, **where, "action": "up"}]
    t, fab = lone_flow("ecmp", faults, {"reconvergence": 0.0})
    assert t == pytest.approx(1.125, rel=1e-12)
    assert fab.current_capacity_Bps.min() == pytest.approx(GB)  # everything back to nominal
    t, _ = lone_flow("ecmp", lambda used: faults(used)[:1])  # never restored: 0.25 s + 0.75 GB at 0.5 GB/s
    assert t == pytest.approx(1.75, rel=1e-12)


def test_a_degraded_cable_lets_c4p_move_the_flow_to_the_full_speed_spine():
    """C4P re-plans connections over a degraded link once detection passes: half rate for 0.1 s, then full."""
    t, fab = lone_flow("c4p", lambda used: [{"at": 0.25, "link": f"leaf0-{used[0]}", "action": "degrade",
                                             "fraction": 0.5}], {"detection": 0.1})
    assert t == pytest.approx(1.05, rel=1e-12)
    assert fab.stats["reroutes"] == 1


# ---------------------------------------------------------------------------- configuration errors

BAD_FAULTS = [
    ("unknown node", {"link": "leaf9-spine0", "action": "down"}, "faults.1.link", "no node named 'leaf9'"),
    ("parallel without #k", {"link": "leaf0-spine0", "action": "down"}, "faults.1.link",
     "2 parallel cables connect these nodes; pick one with #0..#1"),
    ("#9 out of range", {"link": "leaf0-spine0#9", "action": "down"}, "faults.1.link",
     "#9 is not one of the 2 parallel cables (#0..#1)"),
    ("degrade without fraction", {"link": "leaf0-spine0#0", "action": "degrade"}, "faults.1",
     "fraction (0 < fraction < 1 of nominal capacity) goes with action degrade"),
    ("fraction without degrade", {"link": "leaf0-spine0#0", "action": "down", "fraction": 0.5}, "faults.1",
     "goes with action degrade, and only with it"),
    ("both link and nic", {"link": "leaf0-spine0#0", "nic": "h0.nic0", "action": "down"}, "faults.1",
     "give exactly one of link"),
    ("neither link nor nic", {"action": "down"}, "faults.1", "give exactly one of link"),
    ("nic naming a switch", {"nic": "leaf0", "action": "down"}, "faults.1.nic", "'leaf0' is not a NIC"),
    ("not adjacent", {"link": "leaf0-leaf1", "action": "down"}, "faults.1.link",
     "leaf0 and leaf1 are not directly connected"),
    ("not a cable", {"link": "leaf0", "action": "down"}, "faults.1.link", "name a cable by its ends"),
    ("fraction out of range", {"link": "leaf0-spine0#0", "action": "degrade", "fraction": 1.5},
     "faults.1.fraction", "less than 1"),
    ("unknown action", {"link": "leaf0-spine0#0", "action": "explode"}, "faults.1.action",
     "'down', 'up', 'degrade', 'flap' or 'slow'"),
    ("switch naming a NIC", {"switch": "h0.nic0", "action": "down"}, "faults.1.switch",
     "'h0.nic0' is not a switch"),
    ("unknown switch", {"switch": "spine7", "action": "down"}, "faults.1.switch", "no node named 'spine7'"),
]


def _bad_spec(fault):
    """Two parallel cables per leaf-spine pair; a good fault, then ``fault`` as ``faults.1``."""
    good = {"at": "0.1ms", "link": "leaf1-spine1#1", "action": "down"}
    return spec_dict("ecmp", [good, {"at": "0.5ms", **fault}], uplinks=2)


@pytest.mark.parametrize("case", BAD_FAULTS, ids=[c[0] for c in BAD_FAULTS])
def test_bad_faults_are_config_errors_naming_the_yaml_path(case):
    _, fault, path, message = case
    for err in config_errors(_bad_spec(fault)):
        assert err.path == path and message in err.message, err


def _write_bad(tmp_path, fault) -> tuple[Path, int]:
    """The bad spec as YAML with one flow-style line per fault; (file, line of the bad fault ``faults.1``)."""
    spec = _bad_spec(fault)
    faults = spec.pop("faults")
    text = yaml.safe_dump(spec, sort_keys=False) + "faults:\n"
    text += "".join(f"  - {yaml.safe_dump(f, default_flow_style=True, width=1000).strip()}\n" for f in faults)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path, len(text.splitlines())


def _cli(tmp_path, path, command):
    out = tmp_path / "results"
    result = runner.invoke(app, [command, str(path)] + (["--out", str(out)] if command == "run" else []))
    assert result.exit_code == 2, result.output
    assert not out.exists(), "a failed run must not leave a results directory"
    return " ".join(result.output.split())


@pytest.mark.parametrize("case", BAD_FAULTS, ids=[c[0] for c in BAD_FAULTS])
@pytest.mark.parametrize("command", ["run", "validate"])
def test_bad_faults_through_the_cli_give_file_line_path_and_exit_2(tmp_path, case, command):
    _, fault, path, message = case
    yaml_path, line = _write_bad(tmp_path, fault)
    text = _cli(tmp_path, yaml_path, command)
    assert "Traceback" not in text
    assert re.search(rf"{re.escape(str(yaml_path))}:\d+: {re.escape(path)}: ", text), text
    assert message in text, text
    located = int(re.search(rf"{re.escape(str(yaml_path))}:(\d+):", text).group(1))
    assert line - 1 <= located <= line, "the line is one of the two fault entries"


@pytest.mark.parametrize("case", [BAD_FAULTS[0], BAD_FAULTS[3]], ids=["resolved on the fabric", "pydantic"])
def test_the_cli_line_is_that_of_the_bad_fault_not_the_first(tmp_path, case):
    _, fault, path, _message = case
    yaml_path, line = _write_bad(tmp_path, fault)
    assert f"{yaml_path}:{line}: {path}: " in _cli(tmp_path, yaml_path, "validate")


def test_both_direction_cable_names_may_contain_hyphens():
    ib = dict(name="ib-a", leaves=1, spines=1, hosts_per_leaf=2, gpus_per_host=1, nics_per_host=1,
              nic=nic_profile("ib-hdr-200"), uplink_bandwidth_Bps=25e9, intra_bandwidth_Bps=1e11)
    topo = multi_cluster([ib, dict(ib, name="roce", nic=nic_profile("roce-200"))], interconnect_Bps=3e9,
                         interconnect_latency_s=0.0, tcp_nic=nic_profile("eth-tcp-25"), eth_latency_s=0.0)
    one_way = resolve_faults([FaultSpec(at=0, link="eth-core->roce.eth", action="down"),
                              FaultSpec(at=0, link="roce.eth->eth-core", action="down")], topo)
    both = resolve_faults([FaultSpec(at=0, link="eth-core-roce.eth", action="down")], topo)
    assert set(both[0].links) == {one_way[0].links[0], one_way[1].links[0]}
    resolve_faults([FaultSpec(at=0, link="ib-a.leaf0-ib-a.spine0", action="down")], topo)


# ---------------------------------------------------------------------------- after the end

def test_faults_after_the_workload_do_not_stretch_the_simulated_time():
    healthy = experiment("ecmp")
    late = experiment("ecmp", [{"at": "50ms", "link": "leaf0-spine0", "action": "down"},
                               {"at": "80ms", "nic": "h0.nic0", "action": "down"},
                               {"at": "1s", "link": "leaf1-spine1", "action": "degrade", "fraction": 0.5}])
    assert late.sim_time_s == healthy.sim_time_s == pytest.approx(healthy.collectives[0].end_s)
    assert [r.duration_s for r in late.collectives] == [r.duration_s for r in healthy.collectives]


# --------------------------------------------------------------------------- dragonfly policies
@pytest.mark.parametrize("policy", ["minimal", "valiant", "ugal", "adaptive"])
def test_dragonfly_policies_route_around_a_dead_global_cable(policy):
    """g=5, a=2, p=1 with one cable per group pair: the only minimal path from group 0 to group 1 dies at
    0.25 s. After reconvergence (0.1 s) every dragonfly policy detours through a third group (a Valiant
    path at the same 1 GB/s), so the 1 GB flow ends at 1 s + the 0.1 s it stalled; every byte arrives.
    ``minimal`` has no minimal path left and detours the same way; a ``valiant`` connection that started
    on a detour is untouched (1 s)."""
    from netsim.topology.dragonfly import dragonfly
    topo = dragonfly(groups=5, switches_per_group=2, hosts_per_switch=1, global_links_per_switch=2,
                     link_bandwidth_Bps=1e9)
    src, dst = 0, 2  # g0.s0 -> g1.s0
    (path,) = topo.paths(src, dst)
    (cable,) = [lk for lk in path if topo.links.kind_name(lk) == "global"]
    env = Environment()
    routing = make_routing(policy, topo, np.random.default_rng(1), {"reconvergence": 0.1})
    crosses = any(cable in p for p, _ in routing.paths(Connection(src, dst)))
    assert crosses or policy == "valiant"  # valiant may start on a detour already
    fabric = Fabric(env, topo, routing)
    done = fabric.send(src, dst, 1e9)
    env.process(fault_process(env, fabric, [Fault(0.25, (cable,), 0.0)]))
    env.run(done)
    assert env.now == pytest.approx(1.1 if crosses else 1.0, rel=1e-9)
    assert fabric.bytes_delivered[Connection(src, dst)] == fabric.bytes_posted[Connection(src, dst)] == 1e9
    assert fabric.stats["reroutes"] == int(crosses)
    assert all(cable not in p for p, _ in routing.paths(Connection(src, dst)))


def test_two_notices_in_one_instant_move_a_connection_once():
    """Found by hypothesis in a fresh clone: with a zero reaction time, spraying hears of a fault and of the
    next change at one instant (a cable down and up again at once), and the second notice listed the moved
    connections again, overflowing
    the compiled executor's list of moves (one slot per connection). Bytes are conserved and both
    executors agree."""
    half = healthy_duration(leaves=3, op="alltoall", algorithm="direct") / 2
    faults = [{"at": half, "link": "leaf0-spine0", "action": "down"},
              {"at": half, "link": "leaf0-spine0", "action": "up"}]
    times = []
    for backend in ("compiled", "reference"):
        data = spec_dict({"type": "spray", "reconvergence": 0.0}, faults, leaves=3, op="alltoall",
                         algorithm="direct")
        data["engine"] = {"backend": backend}
        result = run_experiment(ExperimentSpec.model_validate(data))
        times.append(result.collectives[0].duration_s)
    assert times[0] == pytest.approx(times[1], rel=1e-9)

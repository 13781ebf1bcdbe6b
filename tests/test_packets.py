"""Packets where they matter: netsim's switch forwarding (:mod:`netsim.topology.packets`) against a
packet-by-packet simulation of the same flows on the same paths (``tests/packet_sim.py``), and the
closed form a switch hop costs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.config import parse_spec
from netsim.engine import Environment, Fabric
from netsim.engine.model import ScheduleBuilder
from netsim.experiment import run_experiment
from netsim.routing import make_routing
from netsim.topology import leaf_spine
from netsim.topology.nic import NicProfile
from netsim.topology.packets import HEADER_BYTES, PacketModel, header_efficiency, with_packets
from netsim.topology.topology import LINK_KINDS
from tests.packet_sim import Flow, simulate

LINE = 12.5e9            # 100 Gb/s
NET_KINDS = {LINK_KINDS.index(k) for k in ("nic_up", "up", "down", "nic_down")}


def fabric(mtu: int, family: str = "infiniband", nic_rate: float = LINE, spines: int = 1):
    nic = NicProfile("test", nic_rate, 0.0, header_efficiency(family, mtu), "rdma", family)
    return leaf_spine(leaves=2, spines=spines, hosts_per_leaf=4, gpus_per_host=1, nics_per_host=1, nic=nic,
                      nic_latency_s=100e-9, uplink_bandwidth_Bps=LINE, uplink_latency_s=250e-9,
                      intra_bandwidth_Bps=1e13)


def netsim_times(topo, flows: list[tuple[int, int, float]]) -> np.ndarray:
    """Completion time of each (src, dst, bytes) message, all posted at 0, each on its own connection."""
    env = Environment()
    fab = Fabric(env, topo, make_routing("ecmp", topo, np.random.default_rng(0)))
    b = ScheduleBuilder()
    ids = [int(b.send(b.connect(s, d, 0), size, after=[-1])[0]) for s, d, size in flows]
    handle = fab.submit(b.build())
    env.run(handle.done)
    return np.asarray(handle.times)[ids]


def reference_times(topo, flows, *, mtu: int, header: int, switching: str) -> np.ndarray:
    """The packet simulation of the same flows on the paths netsim enumerates (one per pair here)."""
    links = topo.links
    rate, latency, ref = {}, {}, []
    for s, d, size in flows:
        (path,) = topo.paths(s, d)
        net = tuple(lk for lk in path if int(links.kind[lk]) in NET_KINDS)
        for lk in net:
            cap = float(links.capacity_Bps[lk])
            nic = topo.nic_profile.get(int(links.src[lk])) or topo.nic_profile.get(int(links.dst[lk]))
            rate[lk] = cap / nic.efficiency if LINK_KINDS[int(links.kind[lk])].startswith("nic") else cap
            latency[lk] = float(links.latency_s[lk])
        ref.append(Flow(net, size))
    return np.asarray(simulate(ref, rate, latency, mtu=mtu, header=header, switching=switching))


CASES = {
    "one flow": [(0, 4, 2e6)],
    "three flows into one NIC": [(0, 4, 1e6), (1, 4, 2e6), (2, 4, 4e6)],
    "two flows on one uplink": [(0, 4, 4e6), (1, 5, 4e6)],
    "flows of 1 to 4 MB, mixed": [(0, 4, 1e6), (1, 4, 3e6), (2, 6, 4e6), (5, 1, 2e6)],
}


@pytest.mark.parametrize("mtu", [4096, 9000])
@pytest.mark.parametrize("switching", ["store_and_forward", "cut_through"])
@pytest.mark.parametrize("case", list(CASES))
def test_flows_of_1_to_4_mb_agree_with_a_packet_simulation(case, switching, mtu):
    """Within 0.5% of the packet simulation (the issue's bar: 5%), and measurably closer than the fluid
    model whenever the switches' hold shows at all."""
    flows, header = CASES[case], HEADER_BYTES["infiniband"]
    ref = reference_times(fabric(mtu), flows, mtu=mtu, header=header, switching=switching)
    model = netsim_times(with_packets(fabric(mtu), PacketModel(switching, mtu, header)), flows)
    fluid = netsim_times(fabric(mtu), flows)
    np.testing.assert_allclose(model, ref, rtol=5e-3)
    if switching == "store_and_forward":
        assert (np.abs(model - ref) < np.abs(fluid - ref)).all()


@pytest.mark.parametrize("mtu", [1024, 4096, 9000])
@pytest.mark.parametrize("family", ["infiniband", "roce"])
def test_one_flow_matches_the_store_and_forward_closed_form(mtu, family):
    """S/B + sum of the path's latencies + (h - 1) L / B on a path of h equal-rate links: to 1e-12."""
    header, size = HEADER_BYTES[family], 3e6
    topo = with_packets(fabric(mtu, family), PacketModel("store_and_forward", mtu, header))
    (t,) = netsim_times(topo, [(0, 4, size)])
    goodput = LINE * header_efficiency(family, mtu)
    expected = size / goodput + 2 * 100e-9 + 2 * 250e-9 + 3 * (mtu + header) / LINE
    assert t == pytest.approx(expected, rel=1e-12)
    ref = reference_times(fabric(mtu, family), [(0, 4, size)], mtu=mtu, header=header, switching="store_and_forward")
    assert t == pytest.approx(ref[0], rel=2e-3)   # the reference's last packet is partial


@settings(max_examples=25, deadline=None)
@given(mtu=st.sampled_from([1024, 4096, 9000]), size=st.floats(1e3, 1e7),
       nic=st.sampled_from([LINE / 4, LINE / 2, LINE]))
def test_holding_more_never_makes_a_message_faster(mtu, size, nic):
    """none <= cut-through <= store-and-forward for every message, and the gap is the closed form's."""
    times = [netsim_times(with_packets(fabric(mtu, nic_rate=nic), PacketModel(s, mtu, 26)), [(0, 4, size)])[0]
             for s in ("none", "cut_through", "store_and_forward")]
    assert times[0] <= times[1] <= times[2]
    fill = (mtu + 26) / nic + 2 * (mtu + 26) / LINE   # leaf (in from the NIC), spine, leaf
    assert times[2] - times[0] == pytest.approx(fill, rel=1e-9)


def test_the_fluid_share_is_max_min_where_fifo_switches_share_per_input():
    """What the fluid model leaves out: two flows from one leaf and one from the receiver's own leaf into
    one NIC. Max-min fairness gives each a third; a FIFO port fed by two inputs at line rate serves each
    input half the time, so the two flows sharing the spine input get a quarter each (the parking-lot
    effect). The first flow ends a third later in the packet simulation; netsim keeps max-min."""
    flows = [(0, 4, 1e6), (1, 4, 1e6), (5, 4, 2e6)]
    ref = reference_times(fabric(4096), flows, mtu=4096, header=26, switching="store_and_forward")
    model = netsim_times(with_packets(fabric(4096), PacketModel("store_and_forward", 4096, 26)), flows)
    goodput = LINE * header_efficiency("infiniband")
    assert model[0] == pytest.approx(3e6 / goodput, rel=1e-2)      # a third each until it ends
    assert ref[0] == pytest.approx(4e6 / goodput, rel=1e-2)        # a quarter each
    assert model[2] == pytest.approx(ref[2], rel=1e-2)             # the last byte leaves the port alike


def _experiment(**extra) -> dict:
    return {"name": "packets", "topology": {
                "type": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2, "gpus_per_host": 1,
                "nics_per_host": 1, "nic": {"bandwidth": "100Gbps", "family": "roce"},
                "uplink": {"bandwidth": "100Gbps"}, "intra_host": {"bandwidth": "900GB/s"}},
            "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "2MB"}, **extra}


def test_the_experiment_file_picks_the_switching_and_the_mtu():
    """``packets:`` in the file; absent, cut-through under nccl and nothing under fluid.

    A 2 MB ring allreduce over 4 hosts, two per leaf, runs 6 steps; each rank waits for its
    predecessor, so the run is one chain through 3 leaf-to-leaf hops (3 switches each) and 3 hops under
    one leaf (1 switch): 12 switches, each holding what the switching says."""
    def duration(**extra) -> float:
        (call,) = run_experiment(parse_spec(_experiment(**extra))).collectives
        return call.duration_s

    line, header = 12.5e9, HEADER_BYTES["roce"]
    none = duration(packets={"switching": "none"})
    assert duration() == duration(packets={"switching": "cut_through"})
    assert duration() - none == pytest.approx(12 * header / line, rel=1e-6)
    assert duration(packets={}) - none == pytest.approx(12 * (4096 + header) / line, rel=1e-6)
    jumbo_none = duration(packets={"switching": "none", "mtu": 9000})
    assert duration(packets={"mtu": 9000}) - jumbo_none == pytest.approx(12 * (9000 + header) / line, rel=1e-6)
    assert jumbo_none < none   # fewer headers per byte
    assert duration(model="fluid") == duration(model="fluid", packets={"switching": "none"})


def test_bad_packets_sections_fail_with_their_path():
    from netsim.errors import ConfigError
    with pytest.raises(ConfigError) as e:
        parse_spec(_experiment(packets={"switching": "wormhole"}))
    assert "packets.switching" in str(e.value) and "store_and_forward" in str(e.value)
    with pytest.raises(ConfigError) as e:
        parse_spec(_experiment(packets={"mtu": 100}))
    assert "packets.mtu" in str(e.value)


def test_a_fabric_of_mixed_nic_families_takes_the_largest_header():
    """One fabric, one packet format: with RoCE and InfiniBand hosts, the core carries RoCE's 82 bytes."""
    from netsim.topology.packets import fabric_header
    ib = NicProfile("ib", LINE, 0.0, header_efficiency("infiniband"), "rdma", "infiniband")
    roce = NicProfile("roce", LINE, 0.0, header_efficiency("roce"), "rdma", "roce")
    topo = leaf_spine(leaves=2, spines=1, hosts_per_leaf=2, gpus_per_host=1, nics_per_host=1, nic=ib,
                      host_nics={3: roce}, uplink_bandwidth_Bps=LINE, intra_bandwidth_Bps=1e13)
    assert fabric_header(topo) == HEADER_BYTES["roce"]
    assert fabric_header(fabric(4096)) == HEADER_BYTES["infiniband"]


def test_switching_none_leaves_the_fabric_as_built():
    topo = fabric(4096)
    latency, capacity = topo.links.latency_s.copy(), topo.links.capacity_Bps.copy()
    assert with_packets(topo, PacketModel("none", 4096, 26)) is topo
    np.testing.assert_array_equal(topo.links.latency_s, latency)
    np.testing.assert_array_equal(topo.links.capacity_Bps, capacity)
    with pytest.raises(ValueError, match="switching must be one of"):
        PacketModel("wormhole")

"""The NCCL model, netsim's default (docs/collectives.md#how-calls-run-by-default-the-nccl-model): channels
from the hosts' NICs, rings on rails, NCCL's step and per-step costs; ``model: fluid`` keeps the pure model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.collectives.nccl import (
    HEADER_EFFICIENCY,
    NCCL,
    NET_STEP_S,
    NVLINK_STEP_S,
    STEP_BYTES,
    auto_channels,
    rail_ring,
)
from netsim.config import parse_spec
from netsim.experiment import run_experiment
from netsim.experiment.results import links_frame
from netsim.experiment.run import build_topology


def _hosts(n_hosts: int, gpus: int, nics: int) -> tuple[list[int], list[int]]:
    """GPU -> host and GPU -> rail of ``n_hosts`` hosts of ``gpus`` GPUs, GPU i on NIC i mod ``nics``."""
    return [g // gpus for g in range(n_hosts * gpus)], [g % gpus % nics for g in range(n_hosts * gpus)]


@settings(max_examples=200, deadline=None)
@given(n_hosts=st.integers(2, 9), per_nic=st.integers(1, 4), nics=st.integers(1, 8), channel=st.integers(0, 40))
def test_rail_rings_keep_hosts_together_and_every_hop_on_a_rail(n_hosts, per_nic, nics, channel):
    gpus = per_nic * nics
    host, rail = _hosts(n_hosts, gpus, nics)
    order = rail_ring(range(n_hosts * gpus), host, rail, channel)
    assert sorted(order) == list(range(n_hosts * gpus))
    assert [host[g] for g in order] == sorted(host)  # each host's GPUs together, hosts in rank order
    hops = [(a, b) for a, b in zip(order, order[1:] + order[:1]) if host[a] != host[b]]
    assert len(hops) == n_hosts
    crossing = [(a, b) for a, b in hops if rail[a] != rail[b]]
    if gpus == 1 or per_nic >= 2 or nics >= 3 or n_hosts % 2 == 0:
        assert not crossing  # every network hop joins two NICs of one rail
    else:
        assert len(crossing) <= 1  # two rails, one GPU on each, an odd host count: one hop must cross
    if per_nic >= 2:  # NCCL's rings: in and out of every host through the channel's NIC
        assert {rail[a] for a, _ in hops} == {rail[b] for _, b in hops} == {channel % nics}


@pytest.mark.parametrize("n_hosts", [2, 3, 4, 5])
def test_over_a_round_of_channels_each_nic_is_entered_once_and_left_once(n_hosts):
    """8 GPUs on 8 NICs a host: the channels spread over every NIC evenly."""
    host, rail = _hosts(n_hosts, 8, 8)
    left = np.zeros((n_hosts, 8), dtype=int)
    entered = np.zeros((n_hosts, 8), dtype=int)
    for c in range(8):
        order = rail_ring(range(8 * n_hosts), host, rail, c)
        for a, b in zip(order, order[1:] + order[:1]):
            if host[a] != host[b]:
                left[host[a], rail[a]] += 1
                entered[host[b], rail[b]] += 1
    assert (left == 1).all() and (entered == 1).all()


def test_auto_channels_are_two_per_nic_a_host_uses():
    host, rail = _hosts(4, 8, 8)
    assert auto_channels(range(32), host, rail) == 16
    assert auto_channels(range(0, 32, 8), host, rail) == 2    # one GPU a host (a DP group of TP=8 replicas)
    assert auto_channels(range(8), host, rail) == 1           # inside one host
    host, rail = _hosts(4, 8, 4)
    assert auto_channels(range(32), host, rail) == 8
    assert NCCL.channels("auto", range(32), host, rail, "pairwise") == 1  # point-to-point: one channel
    assert NCCL.channels(3, range(32), host, rail, "ring") == 3           # what the file says wins


def _flat_ring(**top) -> dict:
    """A 1 GiB flat ring allreduce over 8 hosts of 8 GPUs, 8 x 400G NICs each, rail-optimised: the 8
    leaves are one rail group, so a hop between two NICs of one rail never leaves its leaf."""
    return {"name": "flat", "seed": 1,
            "topology": {"type": "leaf_spine", "leaves": 8, "spines": 2, "hosts_per_leaf": 1, "gpus_per_host": 8,
                         "nics_per_host": 8, "rail_optimized": True, "nic": {"bandwidth": "400Gbps"},
                         "uplink": {"bandwidth": "400Gbps"}, "intra_host": {"bandwidth": "450GB/s"}},
            "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1GiB"},
            "engine": {"link_series": 0}, **top}


def _nic_and_spine_bytes(result) -> tuple[np.ndarray, float]:
    links = links_frame(result)
    up = links[(links.kind == "nic_up") & links.dst.str.startswith("leaf")]  # NIC to its leaf
    per_nic = up.groupby("src")["bytes"].sum().to_numpy()
    return per_nic, float(links[links.dst.str.startswith("spine")]["bytes"].sum())


def test_a_plain_allreduce_on_8_nic_hosts_uses_every_nic_and_stays_on_its_rails():
    result = run_experiment(parse_spec(_flat_ring()))
    (call,) = result.collectives
    assert call.channels == 16
    per_nic, spine = _nic_and_spine_bytes(result)
    assert len(per_nic) == 64 and (per_nic > 0).all()
    assert per_nic.max() == pytest.approx(per_nic.min(), rel=1e-9)  # every NIC carries the same share
    assert spine == 0  # no byte leaves a rail's leaf
    # the fluid model's one rank-order ring: one NIC a host, and every host-to-host hop crosses rails
    fluid = run_experiment(parse_spec(_flat_ring(model="fluid")))
    per_nic, spine = _nic_and_spine_bytes(fluid)
    assert (per_nic > 0).sum() == 8 and spine > 0
    assert call.busbw_Bps > 6 * fluid.collectives[0].busbw_Bps


def test_the_model_fills_only_what_the_file_leaves_unset():
    spec = parse_spec(_flat_ring())
    topo = build_topology(spec)
    nic = topo.nic_profile[int(topo.gpu_nic[0])]
    assert (nic.latency_s, nic.efficiency, topo.intra_overhead_s) == (NET_STEP_S, HEADER_EFFICIENCY["generic"],
                                                                      NVLINK_STEP_S)
    given = _flat_ring()
    given["topology"] = {**given["topology"], "nic": {"bandwidth": "400Gbps", "overhead": "2us", "efficiency": 0.9},
                         "intra_host": {"bandwidth": "450GB/s", "overhead": "0s"}}
    topo = build_topology(parse_spec(given))
    nic = topo.nic_profile[int(topo.gpu_nic[0])]
    assert (nic.latency_s, nic.efficiency, topo.intra_overhead_s) == (2e-6, 0.9, 0.0)
    topo = build_topology(parse_spec(_flat_ring(model="fluid")))
    nic = topo.nic_profile[int(topo.gpu_nic[0])]
    assert (nic.latency_s, nic.efficiency, topo.intra_overhead_s) == (0.0, 1.0, 0.0)


@pytest.mark.parametrize("n, gpus_per_host", [(8, 1), (16, 4)])
def test_the_fluid_switch_keeps_the_ring_closed_form(n, gpus_per_host):
    """``model: fluid``: one channel, one message a step, no per-message cost: 2(n-1) M/(nB) exactly."""
    B = 100e9 / 8
    spec = parse_spec({"name": "cf", "model": "fluid",
                       "topology": {"type": "leaf_spine", "leaves": 1, "spines": 1, "hosts_per_leaf": n // gpus_per_host,
                                    "gpus_per_host": gpus_per_host, "nics_per_host": gpus_per_host,
                                    "nic": {"bandwidth": "100Gbps"}, "uplink": {"bandwidth": "800Gbps"},
                                    "intra_host": {"bandwidth": "100Gbps"}},
                       "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "64MiB"}})
    (call,) = run_experiment(spec).collectives
    assert call.channels == 1
    assert call.duration_s == pytest.approx(2 * (n - 1) * 64 * 2**20 / (n * B), rel=1e-11)


def test_ring_steps_go_as_nccl_steps_at_most_eight_a_step():
    """A step's piece p goes as max(512 KiB, p/8) slices: 8 of p/8 for a large piece, 512 KiB for a small one."""
    for size, slices in ((2**30, 8), (256 * 2**20, 4), (2**20, 1)):
        spec = parse_spec({**_flat_ring(), "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring",
                                                         "size": size, "channels": 2},
                           "engine": {"link_series": 0, "ideal": False}})
        result = run_experiment(spec)
        messages = 2 * 63 * 64 * 2 * slices
        assert result.fabric.stats["flows"] == messages, size
        piece = size / (64 * 2)
        assert slices == math.ceil(piece / max(STEP_BYTES, piece / 8))


def test_a_run_too_large_under_the_model_is_refused_with_what_the_fluid_model_would_need():
    from netsim.errors import NetsimError
    from netsim.experiment.preflight import check
    spec = parse_spec({"name": "x", "topology": {"type": "frontier", "groups": 2}, "routing": "minimal",
                       "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1GiB"}})
    with pytest.raises(NetsimError) as err:
        check(spec, max_memory_bytes=2**30)
    assert "the NCCL model's rings make 8x the messages of --set model=fluid, which needs about" in str(err.value)
    with pytest.raises(NetsimError) as err:
        check(spec.model_copy(update={"model": "fluid"}), max_memory_bytes=2**20)
    assert "model=fluid" not in str(err.value)

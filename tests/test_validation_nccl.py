"""Against measured clusters: experiments/validation-nccl.yaml reproduces published nccl-tests bus
bandwidths with netsim's defaults, the NCCL model (docs/validation.md#against-measured-clusters)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from netsim.collectives.nccl_tuning import choose
from netsim.config import load_experiment, parse_spec
from netsim.experiment import run_experiment
from netsim.experiment.results import collectives_frame
from netsim.experiment.run import build_topology, place_jobs
from netsim.experiment.sweep import expand

ROOT = Path(__file__).resolve().parents[1]
GB = 1e9

#: variant -> (measured busbw GB/s, source, GPU). Never edit a measured value to make a case pass.
MEASURED = {
    "h100-16x4-2x200g": (45.7, "issue 26 (docs/validation.md)", "h100"),
    "dgx-a100-2x8-8x200g": (192.0, "NVIDIA/nccl#812", "a100"),
    "a800-12x8-1x200g": (24.0, "NVIDIA/nccl#412", "a800"),
    "a100-3x8-4x200g": (96.0, "NVIDIA/nccl-tests#119", "a100"),
    "h100-2x4-4x400g": (159.43, "NVIDIA/nccl#1411", "h100"),
}
#: Cases outside 10%: the simulated busbw (GB/s) pinned, so a change shows; the docs say why.
PINNED = {"h100-2x4-4x400g": 197.24}
TOLERANCE = 0.10
#: The protocol NCCL's model picks for each case's ring (LL128 at 128 MiB over 3 nodes: 1% faster in the model).
PROTOCOL_OF = {"h100-16x4-2x200g": "Simple", "dgx-a100-2x8-8x200g": "Simple", "a800-12x8-1x200g": "Simple",
               "a100-3x8-4x200g": "LL128", "h100-2x4-4x400g": "Simple"}

#: The NCCL defaults (docs/validation.md lists their sources): netsim's own, the file sets none of them.
NIC_EFFICIENCY = 4096 / (4096 + 26)      # InfiniBand payload share at MTU 4096
NIC_OVERHEAD_S = 9.6e-6                  # NCCL tuning.cc: hwLat[NET][Ring][Simple]
NVLINK_OVERHEAD_S = 3.4e-6               # NCCL tuning.cc: hwLat[NVLINK][Ring][Simple]
NVLINK_EFFICIENCY = 0.8                  # NCCL's effective NVLink rate (~20% protocol cost)
#: NVLink per GPU and direction: NVLink4 18 x 25 GB/s, NVLink3 12 x 25 GB/s, A800's 8 x 25 GB/s.
NVLINK_PER_DIRECTION = {"h100": 450e9, "a100": 300e9, "a800": 200e9}
CHUNK_BYTES = 4 * 2**20 / 8              # NCCL_BUFFSIZE / NCCL_STEPS


def _runs():
    return {r.variant: r for r in expand(load_experiment(ROOT / "experiments/validation-nccl.yaml"))}


RUNS = _runs()
_BUSBW: dict[str, float] = {}


def simulated_busbw(variant: str) -> float:
    """The case's simulated bus bandwidth (B/s), run once per session."""
    if variant not in _BUSBW:
        (call,) = run_experiment(RUNS[variant].spec).collectives
        _BUSBW[variant] = call.busbw_Bps
    return _BUSBW[variant]


def test_every_case_has_a_measurement_and_nothing_else():
    assert sorted(RUNS) == sorted(MEASURED)
    assert set(PINNED) <= set(MEASURED)


@pytest.mark.parametrize("variant", sorted(MEASURED))
def test_the_cases_run_on_the_defaults(variant):
    """The file gives the hardware only; the NCCL settings are netsim's defaults, the same for every case."""
    spec = RUNS[variant].spec
    t, w = spec.topology, spec.workload
    assert spec.model == "nccl"
    assert (t.nic.overhead, t.nic.efficiency, t.nic.profile) == (None, None, None)
    assert "overhead" not in t.intra_host.model_fields_set
    assert (w.channels, w.chunk) == ("auto", None)
    gpu = MEASURED[variant][2]
    assert t.intra_host.bandwidth == pytest.approx(NVLINK_EFFICIENCY * NVLINK_PER_DIRECTION[gpu])
    assert (w.op, w.algorithm) == ("allreduce", "ring")
    assert t.leaves == 1  # one non-blocking switch


@pytest.mark.parametrize("variant", sorted(MEASURED))
def test_the_defaults_resolve_to_nccl_s_settings(variant):
    spec = RUNS[variant].spec
    t = spec.topology
    topo = build_topology(spec)
    nic = topo.nic_profile[int(topo.gpu_nic[0])]
    assert nic.efficiency == pytest.approx(NIC_EFFICIENCY, rel=1e-12)
    assert nic.latency_s == pytest.approx(NIC_OVERHEAD_S)
    assert topo.intra_overhead_s == pytest.approx(NVLINK_OVERHEAD_S)
    (job,) = place_jobs(spec, topo, np.random.default_rng(0))
    (call,) = job.plan.calls()
    assert (call.channels, call.rails) == (2 * t.nics_per_host, True)
    # the protocol NCCL's tuning model picks for the ring at this size (collectives.nccl_tuning); a step's
    # piece goes as the protocol's steps (Simple: 512 KiB), at most 8 a step (collectives.nccl.CallSettings)
    nodes = len({int(topo.gpu_host[g]) for g in call.gpus})
    bus = t.nics_per_host * topo.nic_profile[int(topo.gpu_nic[0])].port_rate_Bps * NIC_EFFICIENCY / 1e9
    choice = choose("allreduce", call.size_bytes, len(call.gpus), nodes, call.channels, bus / call.channels,
                    algorithms=("ring",))
    assert call.protocol.name == choice.protocol == PROTOCOL_OF[variant]
    step = CHUNK_BYTES if choice.protocol == "Simple" else call.protocol.step_bytes
    piece = call.size_bytes / (len(call.gpus) * call.channels)
    assert call.chunk_bytes == max(step, piece / 8)


@pytest.mark.parametrize("variant", sorted(MEASURED))
def test_simulated_busbw_against_the_measurement(variant):
    measured = MEASURED[variant][0]
    simulated = simulated_busbw(variant) / GB
    if variant in PINNED:
        assert abs(simulated / measured - 1) > TOLERANCE  # else: move it back to the checked cases
        assert simulated == pytest.approx(PINNED[variant], rel=1e-3)
    else:
        assert simulated == pytest.approx(measured, rel=TOLERANCE)


@pytest.mark.parametrize("variant", sorted(MEASURED))
def test_never_above_the_physical_links(variant):
    t = RUNS[variant].spec.topology
    nic_line_rate_Bps = t.nic.resolve().port_rate_Bps * t.nics_per_host
    # A ring leaves each node once per channel, so busbw is at most the node's NIC line rate.
    assert simulated_busbw(variant) <= nic_line_rate_Bps


def test_the_docs_table_shows_these_numbers():
    text = (ROOT / "docs/validation.md").read_text()
    section = text.split("## Against measured clusters", 1)[1]
    for variant, (measured, source, _) in MEASURED.items():
        (row,) = [line for line in section.splitlines() if line.startswith(f"| `{variant}`")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        simulated = simulated_busbw(variant) / GB
        assert source.split(" ")[0] in row
        assert float(re.sub(r"[^\d.]", "", cells[-3])) == pytest.approx(measured)
        assert float(re.sub(r"[^\d.]", "", cells[-2])) == pytest.approx(simulated, abs=0.05)
        error = 100 * (simulated / measured - 1)
        assert cells[-1] == f"{error:+.1f}%"


# ---------------------------------------------------------------------------------- the whole curve
#: Published nccl-tests tables (out-of-place columns), one CSV each with its setup and source in comments.
CURVES = ROOT / "tests/golden/nccl-tests"
#: Published rows outside 10%, and why (docs/validation.md#the-whole-curve). Never edit a measured value.
CURVE_OUTLIERS = {32505864: "a one-size dip in the measurement: its neighbours measured 87.49 and 87.75 GB/s"}


def published_curve(name: str) -> pd.DataFrame:
    """A published table: ``size_bytes, op, algbw_GBps, busbw_GBps``."""
    return pd.read_csv(CURVES / name, comment="#")


_CURVE: dict[str, pd.DataFrame] = {}


def simulated_curve() -> pd.DataFrame:
    """nccl-tests#119's sizes, each one allreduce after the other, on experiments/validation-nccl-curve.yaml's
    hardware with its defaults (one run, run once per session)."""
    if "119" not in _CURVE:
        d = yaml.safe_load((ROOT / "experiments/validation-nccl-curve.yaml").read_text())
        d.pop("sweep")
        sizes = published_curve("nt119_a100_3node_4xhdr_allreduce.csv")["size_bytes"].tolist()
        d["workload"] = {"type": "sequence", "steps": [{**d["workload"], "size": int(s)} for s in sizes]}
        calls = collectives_frame(run_experiment(parse_spec(d)))
        _CURVE["119"] = calls.sort_values("start_s").reset_index(drop=True)
    return _CURVE["119"]


def test_the_published_curves_are_what_their_sources_say():
    """Each table's rows follow nccl-tests' own arithmetic, busbw = algbw x 2(n-1)/n for its ranks (both
    columns rounded to 0.01: within 0.005 (1 + 2(n-1)/n) < 0.015)."""
    ranks = {"nt119": 24, "nt252": 8, "nt319": 16, "nt232": 2, "nccl1368": 40}
    for path in sorted(CURVES.glob("*.csv")):
        head = path.read_text().split("size_bytes,")[0]
        assert "# source: https://github.com/NVIDIA/" in head and "# health:" in head, path.name
        table = published_curve(path.name)
        n = ranks[path.name.split("_")[0]]
        assert set(table["op"]) == {"allreduce"}
        np.testing.assert_allclose(table["busbw_GBps"], table["algbw_GBps"] * 2 * (n - 1) / n, atol=0.015)  # both rounded to 0.01


def test_the_nccl_tests_curve_of_119_within_10_percent():
    """Every published size of NVIDIA/nccl-tests#119 (22 to 127 MiB; the rest of the table is not in
    our copy) within 10% with the defaults, but the one published dip (pinned: outside 10%, under 15%);
    never above the nodes' NIC line rate."""
    published = published_curve("nt119_a100_3node_4xhdr_allreduce.csv")
    calls = simulated_curve()
    assert calls["size_bytes"].tolist() == published["size_bytes"].tolist()
    error = calls["busbw_Bps"].to_numpy() / GB / published["busbw_GBps"].to_numpy() - 1
    outlier = published["size_bytes"].isin(list(CURVE_OUTLIERS)).to_numpy()
    assert (abs(error[~outlier]) <= TOLERANCE).all(), dict(zip(published["size_bytes"], error.round(3)))
    assert ((abs(error[outlier]) > TOLERANCE) & (abs(error[outlier]) < 0.15)).all()
    assert (calls["busbw_Bps"] <= 4 * 200e9 / 8).all()   # 4 HDR NICs a node
    assert set(calls["algorithm"]) == {"ring"}   # NCCL's pick at these sizes on 3 nodes


def test_the_docs_curve_table_shows_these_numbers():
    section = (ROOT / "docs/validation.md").read_text().split("### The whole curve", 1)[1].split("\n## ", 1)[0]
    published = published_curve("nt119_a100_3node_4xhdr_allreduce.csv").set_index("size_bytes")
    calls = simulated_curve().set_index("size_bytes")
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) >= 5
    for row in rows:
        size, measured, simulated, error, ran = (c.strip() for c in row.strip("|").split("|"))
        call = calls.loc[float(size)]
        assert float(measured.split()[0]) == published.loc[int(size), "busbw_GBps"]
        assert float(simulated.split()[0]) == pytest.approx(call["busbw_Bps"] / GB, abs=0.005)
        assert error == f"{100 * (call['busbw_Bps'] / GB / float(measured.split()[0]) - 1):+.1f}%"
        assert ran == f"{call['algorithm']}, {call['protocol']}, {call['channels']} channels"

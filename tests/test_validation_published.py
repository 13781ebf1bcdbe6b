"""Published gains beside netsim's (docs/validation.md#planned-paths-and-queue-pairs-against-ecmp):
planned paths over ECMP on H3C's 64-GPU testbed, queue-pair scaling over ECMP at Meta. The files give
the hardware and the policies; everything else is netsim's defaults. netsim does not reproduce either
gain (the docs say why), so its numbers are pinned: a change to them shows here and in the docs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from netsim.config import load_experiment
from netsim.experiment import run_experiment
from netsim.experiment.sweep import expand

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs/validation.md").read_text()

#: Published: busbw GB/s (ECMP, planned) and the gain at 512 MB (Tolly report 225112); Meta's "up to 40%".
H3C_MEASURED = {"ecmp": 212.644, "planned": 233.262, "gain_512MB": 0.1043}
META_UP_TO = 0.40
#: netsim's busbw (GB/s) per seed 0-4, as docs/validation.md gives them.
H3C_SIMULATED = {"ecmp": [195.39, 156.42, 260.22, 195.39, 195.39], "planned": [388.69] * 5}
META_SIMULATED = {"ecmp": [146.76, 146.76, 244.27, 183.36, 146.76],
                  "e-ecmp-16qp": [307.82, 302.45, 308.04, 307.01, 303.28]}


def runs(name: str, overrides: list[str] | None = None) -> dict[tuple[str, int], object]:
    return {(r.variant, r.spec.seed): r.spec for r in expand(load_experiment(ROOT / f"experiments/{name}.yaml", overrides))}


def busbw(spec) -> float:
    (call,) = run_experiment(spec).collectives
    return call.busbw_Bps / 1e9


def test_the_files_give_hardware_and_policies_only():
    for name in ("validation-planned-paths", "validation-qp-scaling"):
        for (variant, seed), spec in runs(name).items():
            assert spec.model == "nccl" and spec.packets is None
            assert (spec.workload.channels, spec.workload.chunk) == ("auto", None)
            assert (spec.topology.nic.overhead, spec.topology.nic.efficiency) == (None, None)
            assert seed in range(5)


@pytest.mark.parametrize("variant,seed", [("planned", 0), ("ecmp", 1), ("ecmp", 2)])
def test_h3c_testbed_runs_as_documented(variant, seed):
    """Planned paths (C4P) reach the NICs' line rate less headers; ECMP loses what its collisions cost."""
    got = busbw(runs("validation-planned-paths")[variant, seed])
    assert got == pytest.approx(H3C_SIMULATED[variant][seed], abs=0.01)
    assert got <= 8 * 50 * 4096 / (4096 + 82)   # eight 400G RoCE NICs per server: never above line rate


def test_the_docs_table_holds_the_pinned_numbers_and_the_published_ones():
    for value in (*H3C_MEASURED.values(), META_UP_TO):
        assert (f"{value:g}" in DOC) or (f"{100 * value:.2f}%" in DOC) or (f"{100 * value:.0f}%" in DOC), value
    h3c_gain = np.mean(H3C_SIMULATED["planned"]) / np.mean(H3C_SIMULATED["ecmp"]) - 1
    meta_gain = np.mean(META_SIMULATED["e-ecmp-16qp"]) / np.mean(META_SIMULATED["ecmp"]) - 1
    assert f"+{100 * h3c_gain:.0f}%" in DOC and f"+{100 * meta_gain:.0f}%" in DOC
    for series in (*H3C_SIMULATED.values(), *META_SIMULATED.values()):
        assert f"{np.mean(series):.1f} GB/s" in DOC


def test_queue_pair_scaling_runs_on_the_same_file_at_a_small_scale():
    """Two racks of the Meta file (32 GPUs): 16 queue pairs never lose to one, on every seed."""
    small = runs("validation-qp-scaling", ["topology.leaves=2"])
    for seed in (0, 1):
        ecmp, qp = busbw(small["ecmp", seed]), busbw(small["e-ecmp-16qp", seed])
        assert qp >= ecmp * 0.999


@pytest.mark.slow
@pytest.mark.parametrize("name,simulated", [("validation-planned-paths", H3C_SIMULATED),
                                            ("validation-qp-scaling", META_SIMULATED)])
def test_every_seed_of_the_published_comparisons(name, simulated):
    """The whole files, as the docs' table was made (the queue-pair one takes about 6 minutes)."""
    for (variant, seed), spec in runs(name).items():
        assert busbw(spec) == pytest.approx(simulated[variant][seed], abs=0.06), (variant, seed)


def test_numbers_in_the_file_comments_match_the_published_ones():
    text = (ROOT / "experiments/validation-planned-paths.yaml").read_text()
    assert re.search(r"212\.644 GB/s under ECMP, 233\.262 GB/s planned \(\+9\.70%\)", text)
    assert "up to 40%" in (ROOT / "experiments/validation-qp-scaling.yaml").read_text()

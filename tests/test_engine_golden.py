"""Golden engine output: scenario 1 of the performance work (a random-host ring on a 1:1 leaf-spine,
ECMP) at a small scale, message by message, against the engine as it was before any optimisation.

Every message's start and end and the collective's time must match the stored values to 1e-9
relative, so an optimisation of the engine (incremental solver, flow tables, event coalescing)
cannot change a result unnoticed. ``NETSIM_UPDATE_GOLDEN=1`` rewrites the files (only do that for
a deliberate change of the model, and say so in the commit).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from netsim.config import parse_spec
from netsim.experiment import run_experiment
from netsim.solver import COMPILED

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = bool(os.environ.get("NETSIM_UPDATE_GOLDEN"))

CASES = {
    # scenario 1 shape at 64 GPUs: 4 x 4 leaf-spine, 2 hosts x 8 GPUs x 8 x 400G NICs per leaf, 1:1
    "ring-64-1ch": dict(leaves=4, hosts_per_leaf=2, channels=1, size="64MiB", routing="ecmp"),
    # contended: 4 channels on 32 GPUs, flows share uplinks and NICs, components of several flows
    "ring-32-4ch": dict(leaves=2, hosts_per_leaf=2, channels=4, size="16MiB", routing="ecmp"),
    # the same under spraying (every flow over all spines: large components)
    "ring-32-4ch-spray": dict(leaves=2, hosts_per_leaf=2, channels=4, size="16MiB", routing="spray"),
}


def spec(case: dict, backend: str | None = None):
    return parse_spec({  # the pure fluid model: the golden numbers are the pre-optimisation engine's on it
        "name": "golden", "seed": 7, "model": "fluid",
        "topology": {"type": "leaf_spine", "leaves": case["leaves"], "spines": 4,
                     "hosts_per_leaf": case["hosts_per_leaf"], "gpus_per_host": 8, "nics_per_host": 8,
                     "nic": {"bandwidth": "400Gbps", "latency": "1us"},
                     "uplink": {"bandwidth": "400Gbps", "latency": "500ns", "count": case["hosts_per_leaf"] * 2},
                     "intra_host": {"bandwidth": "900GB/s", "latency": "300ns"}},
        "placement": {"type": "random", "by": "host"},
        "routing": case["routing"],
        "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": case["size"],
                     "channels": case["channels"]},
        "engine": {"ideal": False, "congestion": False, "link_series": 0, "backend": backend},
    })


#: The reference (plain Python) executor and the compiled one.
ENGINES = ["reference"] + (["compiled"] if COMPILED else [])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_engine_matches_the_pre_optimisation_golden(name, engine):
    """Every executor gives the golden output."""
    result = run_experiment(spec(CASES[name], engine))
    assert type(result.fabric).__name__ == {"reference": "ReferenceFabric", "compiled": "CompiledCore"}[engine]
    flows = pd.DataFrame(result.fabric.flow_records,
                         columns=["flow_id", "connection", "src", "dst", "channel", "job", "size_bytes", "start_s",
                                  "end_s", "n_paths"])[["connection", "size_bytes", "start_s", "end_s"]]
    flows = flows.sort_values(["start_s", "connection", "end_s"], kind="stable").reset_index(drop=True)
    path = GOLDEN / f"engine-{name}.parquet"
    meta = GOLDEN / f"engine-{name}.txt"
    if UPDATE:
        flows.to_parquet(path, index=False, compression="zstd")
        meta.write_text(f"{result.collectives[0].duration_s!r}\n")
    assert path.is_file(), f"{path} is missing: NETSIM_UPDATE_GOLDEN=1 pytest {__file__}"
    golden = pd.read_parquet(path)
    assert result.collectives[0].duration_s == pytest.approx(float(meta.read_text()), rel=1e-9, abs=0)
    assert len(flows) == len(golden)
    assert (flows["connection"] == golden["connection"]).all()
    for col in ("size_bytes", "start_s", "end_s"):
        np.testing.assert_allclose(flows[col].to_numpy(), golden[col].to_numpy(), rtol=1e-9, atol=0)

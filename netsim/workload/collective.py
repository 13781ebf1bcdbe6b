"""A collective workload: one communicator running one collective, optionally repeated."""

from __future__ import annotations

from collections.abc import Generator, Sequence

import simpy

from netsim.collectives import CollectiveRecord, get_algorithm
from netsim.engine import Fabric


def collective_job(env: simpy.Environment, fabric: Fabric, gpus: Sequence[int], *, op: str, algorithm: str,
                   size_bytes: float, channels: int = 1, iterations: int = 1, job: int = 0,
                   chunk_bytes: float | None = None, records: list[CollectiveRecord]) -> Generator:
    """Run ``iterations`` back-to-back calls of a collective on ``gpus``, appending one record each.

    Examples
    --------
    See :func:`netsim.experiment.run_experiment`, which wires this to a topology and a fabric.
    """
    run = get_algorithm(op, algorithm)
    for it in range(iterations):
        start = env.now
        yield env.process(run(env, fabric, list(gpus), size_bytes, channels=channels, job=job, chunk_bytes=chunk_bytes))
        records.append(CollectiveRecord(job, it, op, algorithm, size_bytes, len(gpus), channels, start, env.now))

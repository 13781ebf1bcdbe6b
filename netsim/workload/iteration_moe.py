"""The mixture-of-experts layers of a compiled iteration (:mod:`netsim.workload.iteration`), and the
record of one all-to-all-v call (shared with the stage processes of :mod:`netsim.workload.pipeline`).

An MoE layer of one EP group starts when every replica of the group has reached it (a JOIN); for each
TP index it is the dispatch all-to-all-v of the drawn picks, each rank's routed experts (a DELAY by the
tokens it received) and the combine all-to-all-v starting on each rank when its experts are done; the
group's replicas go on when all of it is done. Each replica's own expert time counts as compute, the
rest of the layer as exposed EP. The picks are drawn per call (iteration, stage, group, TP index,
micro-batch) from the run seed, so an MoE iteration is compiled anew each iteration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from netsim.collectives import CollectiveRecord, get_algorithm
from netsim.engine.model import ScheduleBuilder

if TYPE_CHECKING:
    from netsim.collectives.ideal import IdealModel
    from netsim.workload.pipeline import Communicator, TrainingPlan


@dataclass(frozen=True)
class MoECall:
    """One TP index's share of one MoE layer of one EP group: its tasks ``lo:mid`` (dispatch),
    ``mid:ready`` (experts), ``ready:hi`` (combine), and the JOIN at whose end it started."""

    comm: Communicator
    marks: tuple[int, int, int, int]
    first: np.ndarray    #: dispatch bytes per pair
    second: np.ndarray   #: combine bytes per pair
    start: int
    op: str              #: "F" or "B"


def moe_layer(b: ScheduleBuilder, plan: TrainingPlan, gpu_host: np.ndarray, iteration: int, s: int, group: int,
              layer: int, micro: int, op: str, meet: int, picks: dict) -> tuple[list[MoECall], np.ndarray, int]:
    """Append one MoE layer of EP group ``group`` of stage ``s``, starting after task ``meet``.

    ``picks`` keeps the forward's draws for the backward (keyed by layer and call). Returns the
    layer's calls, each EP position's expert seconds (the slowest TP index) and the JOIN after it all.
    """
    moe, experts, h, tp = plan.spec.moe, plan.experts, plan.model.hidden, plan.par.tp
    dispatch = (moe.dispatch_bytes or plan.model.dtype_bytes) if op == "F" else \
        (moe.combine_bytes or plan.model.dtype_bytes)
    combine = moe.combine_bytes or plan.model.dtype_bytes
    build = get_algorithm("alltoallv", moe.algorithm, "workload.moe.algorithm")
    expert_s = np.zeros(moe.ep)
    calls, lo_all = [], b.n_tasks
    for k in range(tp):
        comm = plan.ep_groups[(s, group, k)]
        call = (iteration, s, group, k, micro)
        if op == "F":
            drawn = picks[(layer, *call)] = experts.picks(layer, gpu_host[list(comm.gpus)], call)
        else:
            drawn = picks.pop((layer, *call))
        first, second = drawn * (h * dispatch / tp), drawn.T * (h * combine / tp)
        seconds = plan.gpu.seconds(drawn.sum(axis=0) * experts.pick_flops() * (1 if op == "F" else 2) / tp)
        expert_s = np.maximum(expert_s, seconds)
        lo = b.n_tasks
        ends = build(b, list(comm.gpus), 0.0, job=plan.job, comm=comm.comm, tcp=comm.tcp, gpu_host=gpu_host,
                     matrix=first, ready=meet)
        mid = b.n_tasks
        ready = b.delay(seconds, after=ends)
        rdy = b.n_tasks
        build(b, list(comm.gpus), 0.0, job=plan.job, comm=comm.comm, tcp=comm.tcp, gpu_host=gpu_host,
              matrix=second, ready=ready)
        calls.append(MoECall(comm, (lo, mid, rdy, b.n_tasks), first, second, meet, op))
    done = b.join(after=[list(range(lo_all, b.n_tasks))], n=1)
    return calls, expert_s, int(done[0])


def moe_records(calls: list[MoECall], times: np.ndarray, plan: TrainingPlan, iteration: int,
                ideal: IdealModel | None, tolerance_s: float) -> list[CollectiveRecord]:
    """The dispatch and combine records of ``calls`` from the iteration's task times."""
    out = []
    for c in calls:
        lo, mid, ready, hi = c.marks
        start = float(times[c.start])
        names = ("dispatch", "combine") if c.op == "F" else ("combine_grad", "dispatch_grad")
        sent = float(times[lo:mid].max()) if mid > lo else start
        began = times[mid:ready]
        end = float(times[ready:hi].max()) if hi > ready else float(began.max())
        out.append(alltoallv_record(plan, c.comm, c.first, start, sent, f"ep_{names[0]}", None, iteration,
                                    ideal, tolerance_s))
        out.append(alltoallv_record(plan, c.comm, c.second, float(began.min()), end, f"ep_{names[1]}",
                                    began - began.min(), iteration, ideal, tolerance_s))
    return out


def alltoallv_record(plan: TrainingPlan, comm: Communicator, matrix: np.ndarray, start: float, end: float,
                     label: str, offsets: np.ndarray | None, iteration: int, ideal: IdealModel | None,
                     tolerance_s: float) -> CollectiveRecord:
    """One all-to-all-v call; with ``offsets`` (when each rank became ready after the first) its ideal and
    bound start each rank at its offset, so experts' skew is not counted against the fabric."""
    algorithm = plan.spec.moe.algorithm
    n = len(comm.gpus)
    size = float(matrix.sum() - np.trace(matrix)) / n
    # its bound from the byte matrix, no replay (IdealModel.alltoallv; direct: the ideal too)
    bound = ideal.alltoallv(algorithm, comm.gpus, matrix, offsets=offsets, tcp=comm.tcp) if ideal is not None \
        else None
    return CollectiveRecord(
        plan.job, iteration, "alltoallv", algorithm, size, n, 1, start, end,
        ideal_s=bound.time_s if bound else math.nan, bound_s=bound.bound_s if bound else math.nan,
        slack_s=tolerance_s * bound.chain if bound else 0.0, label=label, comm=comm.comm)

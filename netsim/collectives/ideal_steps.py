"""The bound of a step-scheduled call (:func:`netsim.collectives.schedule.run_steps`) from its messages,
without building or replaying its schedule: what :func:`netsim.engine.ideal.replay` gives for it, bit
for bit, as a few numpy operations per step (used for the pairwise and hierarchical all-to-all-v of
a training job, thousands of calls each with its own byte matrix).

In such a schedule a rank posts its sends of step ``s`` once its step ``s - 1`` is over, and that is
the latest of its messages of step ``s - 1`` (sent and received) and of when it started that step.
On the replay's fabric every message moves alone at its pair's best rate, so a message's arrival is
its sender's start plus its bytes over the rate plus the pair's delay, and a rank's next start is a
maximum: no event order to follow. (A connection carries one message at a time, but a sender's next
message on it waits for its step to be over, which is after the last one arrived.)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from netsim.topology import Topology
from netsim.topology.pathsets import ragged_arange


class PairTable(NamedTuple):
    """Every ordered pair ``i != j`` of a communicator's ranks (row-major, :func:`pair_index`) with
    what :meth:`netsim.engine.ideal.PairModel.table` gives for its GPUs."""

    rate: np.ndarray     #: best rate with the core non-blocking (B/s)
    delay: np.ndarray    #: least delay (s)
    fptr: np.ndarray     #: pair ``k``'s forced edge links are ``flinks[fptr[k]:fptr[k + 1]]``
    flinks: np.ndarray
    uniform: np.ndarray  #: every path of the pair crosses the same edge links with the same latency
    src_host: np.ndarray
    dst_host: np.ndarray


def pair_index(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """Row of ``src -> dst`` (ranks, ``src != dst``) in a :class:`PairTable` of ``n`` ranks.

    >>> pair_index(np.array([0, 0, 1, 2]), np.array([1, 2, 0, 1]), 3).tolist()
    [0, 1, 2, 5]
    """
    return src * (n - 1) + dst - (dst > src)


def steps_replay(src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, bounds: np.ndarray, rate: np.ndarray,
                 delay: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per rank, when its last step is over in the contention-free replay (``start``: when each rank may
    begin; messages in :func:`~netsim.collectives.schedule.step_messages` order, each with its pair's
    ``rate`` and ``delay``). Pure: ``start`` is not modified.

    >>> steps_replay(np.array([0, 1]), np.array([1, 0]), np.array([2.0, 4.0]), np.array([0, 1, 2]),
    ...              np.array([1.0, 1.0]), np.array([0.5, 0.5]), np.zeros(2)).tolist()   # 0 -> 1, then 1 -> 0
    [7.0, 7.0]
    """
    at = np.array(start, dtype=np.float64)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        s, d = src[lo:hi], dst[lo:hi]
        now = at[s]
        # CORRECTNESS: the replay kernel's arithmetic (dag._schedule): the end at the pair's rate, plus
        # its delay, as an interval from now; every message of a step has bytes (none is empty)
        t = now + (((now + nbytes[lo:hi] / rate[lo:hi]) + delay[lo:hi]) - now)
        np.maximum.at(at, s, t)  # (t >= now: a sender's own start never exceeds its messages)
        np.maximum.at(at, d, t)
    return at


def forced_load(topology: Topology, table: PairTable, pair: np.ndarray, nbytes: np.ndarray,
                host_out_cap: np.ndarray, host_in_cap: np.ndarray) -> tuple[float, bool]:
    """The load bound of messages ``pair[k]`` of ``nbytes[k]`` (the busiest forced link or host NIC
    aggregate, bytes over capacity) summed in the order given, as the replay sums them, and whether no
    forced link carries two of them and every pair is uniform (the replay's ``exclusive``)."""
    counts = np.diff(table.fptr)[pair]
    owner, k = ragged_arange(counts)
    links = table.flinks[table.fptr[pair][owner] + k]
    load_s = 0.0
    if len(links):
        per_link = np.bincount(links, weights=nbytes[owner], minlength=len(topology.links.src))
        used = np.unique(links)
        load_s = float((per_link[used] / topology.links.capacity_Bps[used]).max())
    hs, hd = table.src_host[pair], table.dst_host[pair]
    apart = hs != hd
    with np.errstate(divide="ignore", invalid="ignore"):
        for h, capacity in ((hs, host_out_cap), (hd, host_in_cap)):
            used = np.bincount(h[apart], weights=nbytes[apart], minlength=topology.n_hosts)
            load_s = max(load_s, float(np.where(used > 0, used / capacity, 0.0).max(initial=0.0)))
    exclusive = bool(table.uniform[pair].all()) and (not len(links) or int(np.bincount(links).max()) <= 1)
    return load_s, exclusive

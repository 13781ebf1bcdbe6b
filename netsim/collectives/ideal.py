"""The ideal time of a collective call on a given fabric, and a provable lower bound of it.

* ``ideal``: the call *alone* on the same fabric with a **non-blocking core** (every switch-to-switch link
  unbounded, each connection spread over all its equal-cost paths): only NICs, PCIe and NVLink
  limit it. On a uniform non-blocking fabric this is the algorithm's closed form (ring allreduce
  ``2(n-1)(alpha + M/(nB))``, ...; tested for every algorithm). ``slowdown = duration / ideal``
  is what the core, the routing policy and concurrent traffic cost. (Fair sharing has timing
  anomalies: a contended run can come in slightly under this; never under the bound.)
* ``bound``: the larger of two provable lower bounds: the algorithm re-run with its real
  dependencies and FIFO connections but every message at its pair's best rate and never sharing
  (:class:`netsim.engine.ideal.IdealFabric`), and the bytes that must cross each host-edge link over
  its capacity. No correct run can be faster (beyond the engine's completion tolerance); results
  flag one that is (``below_bound``) as a bug to report.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netsim.collectives.alltoallv import alltoallv_steps
from netsim.collectives.base import build_collective
from netsim.collectives.ideal_steps import PairTable, forced_load, pair_index, steps_replay
from netsim.collectives.schedule import run_steps, step_messages
from netsim.engine import Environment
from netsim.engine.ideal import IdealFabric, PairModel, nonblocking_fabric
from netsim.engine.ideal import replay as ideal_replay
from netsim.engine.model import SEND, ScheduleBuilder
from netsim.engine.reference import run_schedule
from netsim.solver import COMPILED
from netsim.topology import Topology

#: Tasks above which the non-blocking fabric is collected at once (a2a-512-ecmp: 1.66 -> 1.14 GiB peak).
BIG_SCHEDULE = 100_000


@dataclass(frozen=True)
class Ideal:
    """The ideal time of one call and its lower bound, with their parts."""

    time_s: float     #: the call on the fabric with a non-blocking core
    bound_s: float    #: max(replay_s, load_s): no run can be faster
    replay_s: float   #: contention-free replay of the algorithm's dependency graph
    load_s: float     #: bytes over capacity on the busiest host-edge link or host
    chain: int        #: upper bound on the messages along any dependency chain (for tolerances)


class IdealModel:
    """Ideal times on one topology, cached per call shape (pair rates are shared between calls).

    Examples
    --------
    >>> from netsim.topology import leaf_spine
    >>> topo = leaf_spine(leaves=1, spines=1, hosts_per_leaf=4, gpus_per_host=1, nics_per_host=1,
    ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
    >>> ideal = IdealModel(topo).ideal("allreduce", "ring", [0, 1, 2, 3], 4e9)
    >>> ideal.time_s, ideal.bound_s   # 2(n-1) M/(nB)
    (6.0, 6.0)
    """

    def __init__(self, topology: Topology, completion_tolerance_s: float = 1e-9):
        self.topology = topology
        self.tolerance_s = completion_tolerance_s
        self.pairs = PairModel(topology)
        self._cache: dict[tuple, Ideal] = {}
        self._pair_tables: dict[tuple, PairTable] = {}   #: per (GPUs, tcp): the pairs of :meth:`alltoallv`
        #: perf: where no two connections share an edge link (a rank-ordered ring on one-GPU hosts) the
        #: replay's timeline is the non-blocking fabric's, and its second run is skipped
        self.shortcut = True

    def ideal(self, op: str, algorithm: str, gpus: Sequence[int], size_bytes: float, *, channels: int = 1,
              chunk_bytes: float | None = None, tcp: bool = False, matrix: np.ndarray | None = None,
              rails: bool = False, protocol=None) -> Ideal:
        """The :class:`Ideal` of ``op``/``algorithm`` over ``gpus`` (rank order) with ``size_bytes``
        (``tcp``: the communicator mixes NIC families and talks TCP, see ``Topology.mixes_fabrics``;
        ``matrix``: an all-to-all-v's bytes per pair; ``rails``: channel rings on the topology's rails,
        as the call itself is built; ``protocol``: its NCCL protocol's costs, as the call pays them)."""
        shape = None if matrix is None else hashlib.blake2b(np.ascontiguousarray(matrix, np.float64).tobytes(),
                                                            digest_size=16).digest()
        key = (op, algorithm, self._members(gpus), size_bytes, channels, chunk_bytes, tcp, shape, rails, protocol)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        extra = {} if matrix is None else {"matrix": matrix}
        schedule = build_collective(op, algorithm, gpus, size_bytes, channels=channels, chunk_bytes=chunk_bytes,
                                    tcp=tcp, gpu_host=self.topology.gpu_host,
                                    gpu_rail=self.topology.gpu_rail if rails else None, protocol=protocol, **extra)
        return self.of_schedule(key, schedule, len(gpus), tcp)

    def _members(self, gpus: Sequence[int]) -> tuple:
        """What the ideal of a call depends on among its GPUs: the GPUs, or for a call inside one host
        (a TP group) the host's signature and the GPUs' local indices, so every host built alike shares
        one computation (perf: 2,048 TP groups of a 16,384-GPU job ask once). Sound because such a
        call's paths, forced links and capacities are all the host's own (``PairModel.host_signature``)."""
        topo = self.topology
        hosts = topo.gpu_host[np.asarray(gpus, dtype=np.int64)]
        if len(hosts) and (hosts == hosts[0]).all():
            h = int(hosts[0])
            first = topo.hosts[h][1]
            return ("host", self.pairs.host_signature(h), tuple(int(g) - first for g in gpus))
        return tuple(gpus)

    def of_schedule(self, key: tuple, schedule, n_ranks: int, tcp: bool = False) -> Ideal:
        """The :class:`Ideal` of any schedule of ``n_ranks`` ranks, cached under ``key`` (e.g. an
        all-to-all-v whose ranks start at given offsets)."""
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if COMPILED:  # the same replay in one compiled pass (tests/test_ideal_replay.py)
            _times, replay_s, replay = ideal_replay(self.pairs, schedule, tcp)
        else:
            conns, sends = schedule.connections, schedule.kind == SEND
            used = np.unique(schedule.conn[sends])
            self.pairs.prefetch(conns.column("src")[used], conns.column("dst")[used],
                                conns.column("tcp")[used] | tcp)
            env = Environment()
            replay = IdealFabric(env, self.topology, self.pairs, tcp=tcp)
            run_schedule(env, replay, schedule)
            env.run()
            replay_s = env.now
        load_s = replay.load_bound_s()
        chain = max(replay.sends.values(), default=0) + n_ranks
        if replay.exclusive and self.shortcut:  # (tests/test_ideal_replay.py checks it against the run)
            time_s = replay_s
        else:
            time_s = self._nonblocking_s(schedule, tcp)
        replay_s, load_s = float(replay_s), float(load_s)  # (plain floats whether or not the kernels are compiled)
        hit = self._cache[key] = Ideal(float(time_s), max(replay_s, load_s), replay_s, load_s, int(chain))
        return hit

    def _nonblocking_s(self, schedule, tcp: bool) -> float:
        """``schedule`` run alone on the fabric with a non-blocking core: its end."""
        env = Environment()
        fabric = nonblocking_fabric(env, self.topology, self.tolerance_s)
        if tcp:
            fabric.use_tcp(0, 0)
        run_schedule(env, fabric, schedule)
        env.run()
        time_s = env.now
        del env, fabric
        if len(schedule) > BIG_SCHEDULE:  # the fabric and its processes hold each other: free its
            gc.collect()                  # tables before the run's own (a full collection costs ~0.1 s)
        return time_s

    def _pair_table(self, gpus: Sequence[int], tcp: bool) -> PairTable:
        """Every ordered pair of ``gpus``'s ranks with its rate, delay and forced links, once per group."""
        table = self._pair_tables.get((tuple(gpus), tcp))
        if table is None:
            n = len(gpus)
            g = np.asarray(gpus, dtype=np.int64)
            i, j = np.nonzero(~np.eye(n, dtype=bool))
            rate, delay, fptr, flinks, uniform = self.pairs.table(g[i], g[j], np.full(len(i), tcp))
            hosts = self.topology.gpu_host[g]
            table = self._pair_tables[(tuple(gpus), tcp)] = PairTable(rate, delay, fptr, flinks, uniform,
                                                                      hosts[i], hosts[j])
        return table

    def alltoallv(self, algorithm: str, gpus: Sequence[int], matrix: np.ndarray, *,
                  offsets: np.ndarray | None = None, tcp: bool = False) -> Ideal:
        """The :class:`Ideal` of an all-to-all-v by ``algorithm`` from its byte matrix, with its ranks
        starting at ``offsets`` (seconds after the call's start; None: all at once).

        ``direct``: :meth:`alltoallv_direct` (the ideal is the bound). ``pairwise`` and
        ``hierarchical``: the bound is :meth:`of_schedule`'s bit for bit, computed from the call's
        messages step by step (:mod:`netsim.collectives.ideal_steps`) instead of replaying its
        schedule; the ideal is the call run on the fabric with a non-blocking core, as for any call
        (fair sharing has no closed form), except where the replay's timeline is that run's (no two
        messages share a forced link). Cached by the matrix and offsets.

        Examples
        --------
        >>> from netsim.topology import leaf_spine
        >>> topo = leaf_spine(leaves=1, spines=1, hosts_per_leaf=2, gpus_per_host=2, nics_per_host=2,
        ...                   nic_bandwidth_Bps=1e9, uplink_bandwidth_Bps=1e9, intra_bandwidth_Bps=1e10)
        >>> m = np.full((4, 4), 1e9)
        >>> ideal = IdealModel(topo).alltoallv("hierarchical", [0, 1, 2, 3], m)
        >>> round(ideal.bound_s, 6), round(ideal.time_s, 6)   # 2 GB over the NVLink, then 2 GB per rail
        (2.2, 2.2)
        """
        if algorithm == "direct":
            return self.alltoallv_direct(gpus, matrix, offsets=offsets, tcp=tcp)
        matrix = np.ascontiguousarray(matrix, np.float64)
        digest = hashlib.blake2b(matrix.tobytes(), digest_size=16)
        if offsets is not None:
            digest.update(np.ascontiguousarray(offsets, np.float64).tobytes())
        key = ("alltoallv", algorithm, tuple(gpus), tcp, offsets is None, digest.digest())
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        n = len(gpus)
        steps = alltoallv_steps(algorithm, gpus, 0.0, matrix, self.topology.gpu_host)
        msgs, bounds = step_messages(steps)
        src, dst, nbytes = msgs[:, 0].astype(np.int64), msgs[:, 1].astype(np.int64), msgs[:, 2]
        table = self._pair_table(gpus, tcp)
        pair = pair_index(src, dst, n)
        start = np.zeros(n) if offsets is None else np.asarray(offsets, dtype=np.float64)
        replay_s = float(steps_replay(src, dst, nbytes, bounds, table.rate[pair], table.delay[pair], start).max())
        load_s, exclusive = forced_load(self.topology, table, pair, nbytes, self.pairs.host_out_cap,
                                        self.pairs.host_in_cap)
        chain = int(np.bincount(src, minlength=n).max(initial=0)) + n
        if exclusive and self.shortcut:
            time_s = replay_s
        else:
            b = ScheduleBuilder()
            run_steps(b, list(gpus), steps, tcp=tcp, ready=None if offsets is None else b.delay(offsets))
            time_s = float(self._nonblocking_s(b.build(), tcp))
        hit = self._cache[key] = Ideal(time_s, max(replay_s, load_s), replay_s, load_s, chain)
        return hit

    def alltoallv_direct(self, gpus: Sequence[int], matrix: np.ndarray, *, offsets: np.ndarray | None = None,
                         tcp: bool = False) -> Ideal:
        """The bound of a direct all-to-all-v from its byte matrix, in closed form, which also stands for
        its ideal (a training job's dispatch and combine: thousands of calls, each its own draw of tokens).

        The bound is the same as :meth:`of_schedule`'s, computed without replaying the call: the later
        of the slowest message alone at its pair's best rate after its rank's offset (``offsets[i]``:
        when rank ``i`` may start; the call starts at 0) and the busiest forced link or host NIC
        aggregate (its bytes over its capacity). The pairs' rates, delays and forced links are
        looked up once per group. The ideal is not the call run on the non-blocking fabric (a run
        per call cost seconds): ``time_s`` is the bound, which that run came within 0.03% of on
        the calls measured (``docs/moe.md``).
        """
        n = len(gpus)
        table = self._pair_table(gpus, tcp)
        i, j = np.nonzero(~np.eye(n, dtype=bool))
        w = np.asarray(matrix, dtype=np.float64)[i, j]
        sent = w > 0
        start = np.zeros(len(i)) if offsets is None else np.asarray(offsets, dtype=np.float64)[i]
        rate, delay = table.rate, table.delay
        # as the replay: released at its rank's offset, drained at the pair's rate, then its delay (in
        # the replay kernel's arithmetic: an interval from the release, which can differ in the last bit)
        now = start[sent]
        arrive = now + (((now + w[sent] / rate[sent]) + delay[sent]) - now)
        replay_s = max(float(arrive.max(initial=0.0)), 0.0 if offsets is None else float(np.max(offsets)))
        load_s, _exclusive = forced_load(self.topology, table, np.arange(len(i)), w, self.pairs.host_out_cap,
                                         self.pairs.host_in_cap)
        chain = int(np.bincount(i[sent], minlength=n).max(initial=0)) + n
        bound = max(replay_s, load_s)
        return Ideal(bound, bound, replay_s, load_s, chain)

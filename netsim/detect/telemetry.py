"""One finished run as a cluster would see it, per training iteration: observables only.

What C4D-style monitoring can collect on a real cluster, and nothing else:

- **connections**: per iteration, per *peer group* (collective calls that overlap in time, e.g. the
  concurrent DP rings of one bucket; a message belongs to the call of its communicator running when
  it was posted) and per connection (queue pair): bytes sent, messages, the time
  the connection was busy (union of its messages' post-to-completion intervals, as NCCL's proxy
  timestamps them) and the throughput while busy;
- **routes**: each connection's path(s) (the links and the share of its bytes on each), as the
  routing controller or a traceroute knows them;
- **ports**: per iteration and directed link, the bytes the switch port counted, the time it was busy
  and its utilisation of the nominal (datasheet) capacity while busy;
- **ranks**: per iteration and training process (pipeline stage x data-parallel replica, i.e. one
  TP group), its compute time and the time it spent in or waiting for TP, PP and DP communication
  (per-rank profiling).

The injected faults, the current (degraded) link capacities and the per-GPU speeds are never read:
:class:`Telemetry` has no field for them, and a test checks it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from netsim.experiment.run import RunResult

CONNECTION_COLUMNS = ["iteration", "group", "connection", "src", "dst", "bytes", "messages", "busy_s",
                      "throughput_Bps"]
PORT_COLUMNS = ["iteration", "link_id", "bytes", "busy_s", "capacity_Bps", "busy_util"]
RANK_COLUMNS = ["iteration", "stage", "replica", "gpus", "compute_s", "tp_s", "pp_s", "dp_s", "bubble_s"]


@dataclass(frozen=True)
class Telemetry:
    """What a cluster collects about one run (see the module docstring); tables keyed by ``iteration``."""

    iterations: pd.DataFrame              #: iteration, start_s, end_s, duration_s
    connections: pd.DataFrame             #: :data:`CONNECTION_COLUMNS`
    routes: dict[str, list[tuple[np.ndarray, np.ndarray]]]  #: connection -> [(link ids, share of its bytes on each)]
    ports: pd.DataFrame                   #: :data:`PORT_COLUMNS`
    ranks: pd.DataFrame                   #: :data:`RANK_COLUMNS` (empty without training)
    nominal_Bps: np.ndarray               #: datasheet capacity of every directed link

    @property
    def n_iterations(self) -> int:
        """Iterations observed."""
        return len(self.iterations)


def _union_lengths(keys: pd.DataFrame, start: np.ndarray, end: np.ndarray) -> pd.Series:
    """Total length of the union of the intervals ``[start, end]`` within each group of ``keys``."""
    df = keys.assign(_s=start, _e=end).sort_values([*keys.columns, "_s"], kind="stable")
    cols = list(keys.columns)
    reach = df.groupby(cols, sort=False)["_e"].cummax()
    before = reach.groupby([df[c] for c in cols], sort=False).shift()
    covered = np.maximum(df["_e"].to_numpy() - np.fmax(df["_s"].to_numpy(), before.to_numpy()), 0.0)
    return pd.Series(covered, index=df.index).groupby([df[c] for c in cols], sort=True).sum()


def _iteration_windows(result: RunResult) -> pd.DataFrame:
    iters = sorted((r for r in result.iterations if r.job == 0), key=lambda r: r.iteration)
    return pd.DataFrame({"iteration": [r.iteration for r in iters], "start_s": [r.start_s for r in iters],
                         "end_s": [r.end_s for r in iters], "duration_s": [r.duration_s for r in iters]})


def _calls(result: RunResult) -> pd.DataFrame:
    """The job's collective calls (comm, start, end) with their peer group: calls merged where their
    times overlap (concurrent rings of one bucket share the fabric, so they are compared together)."""
    calls = pd.DataFrame([(c.comm, c.start_s, c.end_s) for c in result.collectives if c.job == 0],
                         columns=["comm", "start_s", "end_s"]).sort_values(["start_s", "comm"], kind="stable")
    reach = calls["end_s"].cummax().shift().to_numpy()
    calls["group"] = np.cumsum(~(calls["start_s"].to_numpy() <= reach)) - 1  # a new group where no earlier call reaches
    return calls


#: The communicator of a connection label (``c3:4>5#0``, ``j1:c3:...``; none: communicator 0).
_COMM = re.compile(r"^(?:j\d+:)?(?:c(\d+):)?")


def _flows(result: RunResult, windows: pd.DataFrame) -> pd.DataFrame:
    """The job's messages with their iteration and peer group: the group of the collective call of
    their communicator that was running when they were posted (-1: a point-to-point send, e.g. a
    pipeline activation, outside any call; such messages are not compared with peers)."""
    cols = result.fabric.flow_columns()
    flows = pd.DataFrame({k: cols[k] for k in ("connection", "src", "dst", "job", "size_bytes", "start_s", "end_s")})
    flows = flows[flows["job"] == 0].drop(columns="job")
    start = flows["start_s"].to_numpy(dtype=float)
    k = np.searchsorted(windows["start_s"].to_numpy(), start, side="right") - 1
    flows["iteration"] = windows["iteration"].to_numpy()[np.clip(k, 0, None)] if len(windows) else 0
    comm = np.array([int(m.group(1) or 0) for m in map(_COMM.match, flows["connection"].astype(str))], dtype=np.int64)
    group = np.full(len(flows), -1, dtype=np.int64)
    for c, calls in _calls(result).groupby("comm"):
        mine = np.flatnonzero(comm == c)
        at = np.searchsorted(calls["start_s"].to_numpy(), start[mine], side="right") - 1
        ok = at >= 0
        ok[ok] = start[mine][ok] <= calls["end_s"].to_numpy()[at[ok]]
        group[mine[ok]] = calls["group"].to_numpy()[at[ok]]
    flows["group"] = group
    return flows[k >= 0]


def _routes(result: RunResult) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """Connection -> its pieces as (links, share of the connection's bytes on each link)."""
    src, dst = result.topology.links.src, result.topology.links.dst
    return {conn.label(): [(np.asarray(links, dtype=np.int64), frac * _path_shares(np.asarray(links), src, dst))
                           for links, frac in pieces]
            for conn, pieces in result.fabric.routes_used().items()}


def _path_shares(links: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Share of a piece's bytes on each of its links: a piece over several paths (a sprayed message,
    given as the union of its paths) splits evenly over every path through them, so a link carries
    (paths through it) / (paths); a single path carries everything on every link."""
    u, v = src[links], dst[links]
    if len(np.unique(u)) == len(u):
        return np.ones(len(links))
    out_of: dict[int, list[int]] = {}
    for i, a in enumerate(u.tolist()):
        out_of.setdefault(a, []).append(i)
    order = _topological(list(dict.fromkeys([*u.tolist(), *v.tolist()])), u, v)
    ahead = dict.fromkeys(order, 0.0)
    behind = dict.fromkeys(order, 0.0)
    ahead[order[0]] = 1.0
    for n in order:
        for i in out_of.get(n, []):
            ahead[int(v[i])] += ahead[n]
    behind[order[-1]] = 1.0
    for n in reversed(order):
        for i in out_of.get(n, []):
            behind[n] += behind[int(v[i])]
    total = behind[order[0]]
    return np.array([ahead[int(a)] * behind[int(b)] / total for a, b in zip(u, v)])


def _topological(nodes: list[int], u: np.ndarray, v: np.ndarray) -> list[int]:
    """``nodes`` in an order where every link's tail comes before its head (Kahn's algorithm)."""
    indegree = dict.fromkeys(nodes, 0)
    for b in v.tolist():
        indegree[b] += 1
    ready = [n for n in nodes if indegree[n] == 0]
    out = []
    while ready:
        n = ready.pop(0)
        out.append(n)
        for a, b in zip(u.tolist(), v.tolist()):
            if a == n:
                indegree[b] -= 1
                if indegree[b] == 0:
                    ready.append(b)
    return out


def _connections(flows: pd.DataFrame) -> pd.DataFrame:
    keys = ["iteration", "group", "connection"]
    if not len(flows):
        return pd.DataFrame(columns=CONNECTION_COLUMNS)
    agg = flows.groupby(keys, sort=True).agg(src=("src", "first"), dst=("dst", "first"),
                                             bytes=("size_bytes", "sum"), messages=("size_bytes", "size"))
    agg["busy_s"] = _union_lengths(flows[keys], flows["start_s"].to_numpy(), flows["end_s"].to_numpy())
    agg["throughput_Bps"] = agg["bytes"] / agg["busy_s"].where(agg["busy_s"] > 0)
    return agg.reset_index()[CONNECTION_COLUMNS]


def _ports(flows: pd.DataFrame, routes: dict, nominal: np.ndarray) -> pd.DataFrame:
    """Per (iteration, link): the bytes a port counter saw, its busy time and utilisation while busy."""
    pieces = [(label, links, share) for label, ps in routes.items() for links, share in ps]
    if not len(flows) or not pieces:
        return pd.DataFrame(columns=PORT_COLUMNS)
    on = pd.DataFrame({"connection": np.repeat([p[0] for p in pieces], [len(p[1]) for p in pieces]),
                       "link_id": np.concatenate([p[1] for p in pieces]),
                       "frac": np.concatenate([p[2] for p in pieces])})
    on = on.groupby(["connection", "link_id"], as_index=False)["frac"].sum()
    rows = flows[["iteration", "connection", "size_bytes", "start_s", "end_s"]].merge(on, on="connection")
    rows["bytes"] = rows["size_bytes"] * rows["frac"]
    keys = ["iteration", "link_id"]
    out = rows.groupby(keys, sort=True)["bytes"].sum().to_frame()
    out["busy_s"] = _union_lengths(rows[keys], rows["start_s"].to_numpy(), rows["end_s"].to_numpy())
    out = out.reset_index()
    out["capacity_Bps"] = nominal[out["link_id"].to_numpy()]
    out["busy_util"] = out["bytes"] / (out["busy_s"] * out["capacity_Bps"]).where(out["busy_s"] > 0)
    return out[PORT_COLUMNS]


def _ranks(result: RunResult) -> pd.DataFrame:
    """Per iteration and training process: its GPUs and time breakdown (from per-rank profiling)."""
    rows = []
    for job in result.jobs[:1]:
        groups = getattr(job.plan, "tp_groups", None)
        if groups is None:
            continue
        for it, account in enumerate(job.accounts):
            for (stage, replica), a in sorted(account.items()):
                rows.append((it, stage, replica, tuple(int(g) for g in groups[(stage, replica)].gpus),
                             a["compute_s"], a["tp_s"], a["pp_s"], a["dp_s"], a["bubble_s"]))
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def collect(result: RunResult) -> Telemetry:
    """The telemetry of the first job of a finished run (see the module docstring).

    The run must record flows (``engine.record_flows``, the default).

    Examples
    --------
    >>> telemetry = collect(run_experiment(spec))  # doctest: +SKIP
    >>> telemetry.connections.columns.tolist()[:3]  # doctest: +SKIP
    ['iteration', 'group', 'connection']
    """
    windows = _iteration_windows(result)
    flows = _flows(result, windows)
    routes = _routes(result)
    nominal = np.asarray(result.topology.links.capacity_Bps, dtype=float)
    return Telemetry(iterations=windows, connections=_connections(flows), routes=routes,
                     ports=_ports(flows, routes, nominal), ranks=_ranks(result), nominal_Bps=nominal)

"""Pre-flight: what a run will build, the memory it needs and the time it takes, from its spec alone; refuse above a limit.

Runs between :mod:`netsim.config` and :func:`netsim.experiment.run.run_experiment` (and before
each run of a sweep): :func:`estimate` counts the hosts, links, connections and messages a spec
will create, in closed form (:mod:`netsim.experiment.counts`; a cluster run's trace jobs,
:mod:`netsim.experiment.cluster_counts`), without building the topology or placing ranks
(milliseconds even for a million hosts; a cluster run reads its trace first), and turns the counts
into the run's peak resident memory and its wall time (:mod:`netsim.experiment.walltime`);
:func:`check` raises a one-line :class:`~netsim.errors.NetsimError` when the memory is above the
limit, so nothing allocates gigabytes before failing. Where an exact count needs the placement,
the estimate takes the upper bound.

The default limit, :data:`DEFAULT_MAX_MEMORY_BYTES`, is a fixed 16 GiB rather than a share of
the machine's memory, so that whether a spec is accepted does not depend on where it is
checked. It fits the 24 GiB project VM with room for the system and another process, and a
32 GB laptop. The estimate is within 2x of the measured peak, both ways, on every scenario of
``benchmarks/scenarios/`` and on seeded random specs (below), so every scenario that fits runs at
the default limit (the Llama-3-405B iteration on 16,384 GPUs included), while the sprayed
all-to-all on 1,024 GPUs, which exhausted the VM, is refused at once.

The model (the constants below) charges each item what it costs at the run's peak, from the
interpreter with netsim, pyarrow and plotly loaded to the DataFrames of the results and the
report read back: per graph node and link; per GPU pair that talks, told apart by where its ends
are (one host, one leaf, one pod of a three-tier Clos, or further); per equal-cost path only for
the policies that list a pair's paths (spraying, split, Ethereal, C4P: ECMP hashes a connection
onto its path from the path-set arrays, whatever the number of paths); per connection and its
incidence (a sprayed connection's is the union of its pair's paths); per message in flight; per
link and flow that can cross it at once (the flow table's rows); per flow record; per call.
:attr:`Estimate.parts` shows the split.

Calibration
-----------
``benchmarks/preflight.py``: each case in a fresh process that runs it as ``netsim run`` does
(simulate, write the results directory and report.html), its peak RSS (``VmHWM``) and CPU time
against the estimates. 2026-11-28, the project VM (2-core x86_64, 24 GiB), Python 3.11.7, while
three other engineers' runs shared the two cores (load 3-4: the CPU time of a run is the measure,
its wall time was two to three times that). Target: the memory within 2x of the measured peak,
both ways. "old" is the estimate before this calibration (commit b6afc18). The time estimate is
fitted to the CPU seconds of these runs; it is a rough guide (see the last column).

=============================  ============  ==========  =========  =========  =======  =========  =====
case                           peak          old         estimate   ratio      CPU      time est.  ratio
=============================  ============  ==========  =========  =========  =======  =========  =====
scenarios:
a2a-1024-ecmp                  3,501 MiB     21.0 GiB    3,452 MiB  0.99       121.6 s  142 s      1.17
a2a-1024-spray                 >= 10.1 GiB   39.1 GiB    19.7 GiB   1.96 (<=)  stopped  155 s      —
a2a-256-ecmp                   703 MiB       1,342 MiB   625 MiB    0.89       (22 s)   16 s       —
a2a-256-spray                  1,065 MiB     1,889 MiB   1,116 MiB  1.05       (19 s)   17 s       —
a2a-512-ecmp                   1,160 MiB     5,660 MiB   1,196 MiB  1.03       (72 s)   41 s       —
a2a-512-spray                  4,710 MiB     10,220 MiB  5,244 MiB  1.11       40.7 s   44 s       1.09
cluster-500                    >= 566 MiB    435 MiB     1,683 MiB  2.97 (<=)  stopped  16.6 h     —
llama3-405b-meta24k            8,801 MiB     107.8 GiB   8,810 MiB  1.00       439.9 s  461 s      1.05
meta-dp-128x128-c4p            5,734 MiB*    43.5 GiB    7,262 MiB  1.27       161 s*   1,093 s    —
meta-dp-128x128-ecmp           4,774 MiB     32.6 GiB    5,251 MiB  1.10       321.8 s  178 s      0.55
meta-dp-128x128-ecmp-hop       5,530 MiB*    32.6 GiB    5,251 MiB  0.95       111 s*   178 s      —
meta-dp-128x128-spray          7,066 MiB*    45.3 GiB    6,729 MiB  0.95       118 s*   165 s      —
moe-deepseek-1024              818 MiB       1,088 MiB   748 MiB    0.91       (147 s)  22 s       —
moe-deepseek-1024-m16          2,447 MiB*    3,350 MiB   2,090 MiB  0.85       169 s*   132 s      —
pod-ring-3072                  7,955 MiB     14.5 GiB    8,802 MiB  1.11       307.3 s  289 s      0.94
ring-1024                      1,423 MiB     1,984 MiB   1,367 MiB  0.96       (41 s)   39 s       —
ring-256-random                454 MiB       525 MiB     486 MiB    1.07       8.4 s    10 s       1.24
train-2jobs-1024               761 MiB       1,114 MiB   829 MiB    1.09       32.2 s   29 s       0.89
cluster-10                     >= 1,030 MiB  435 MiB     1,034 MiB  1.00 (<=)  stopped  1,369 s    —
other cases:
small-spec                     365 MiB       421 MiB     421 MiB    1.15       7.7 s    8 s        1.09
link-failure                   404 MiB       450 MiB     440 MiB    1.09       8.4 s    9 s        1.07
holmes-hetero                  408 MiB       435 MiB     430 MiB    1.05       12.8 s   9 s        0.68
c4p-multijob                   520 MiB       638 MiB     555 MiB    1.07       16.0 s   14 s       0.85
ecmp-collisions-256            618 MiB       504 MiB     576 MiB    0.93       40.7 s   29 s       0.71
spraying-vs-splitting          1,261 MiB     2,097 MiB   1,051 MiB  0.83       81.7 s   38 s       0.46
ring-256-8ch                   897 MiB       1,201 MiB   885 MiB    0.99       43.8 s   29 s       0.66
ring-512-spray                 610 MiB       829 MiB     663 MiB    1.09       15.5 s   19 s       1.20
ring-1024-lean                 770 MiB       521 MiB     696 MiB    0.90       30.9 s   39 s       1.26
hierarchical-512               513 MiB       569 MiB     517 MiB    1.01       13.2 s   11 s       0.85
alltoall-128-spray             553 MiB       877 MiB     654 MiB    1.18       10.2 s   11 s       1.03
alltoall-256-pairwise-split    1,031 MiB     1,276 MiB   764 MiB    0.74       76.9 s   15 s       0.20
halving-doubling-256-ethereal  1,587 MiB     889 MiB     2,128 MiB  1.34       18.4 s   10 s       0.53
tree-512-c4p                   678 MiB       1,175 MiB   787 MiB    1.16       124.1 s  138 s      1.11
training-128-layer             1,098 MiB     1,431 MiB   1,032 MiB  0.94       35.1 s   50 s       1.42
dragonfly-alltoall             491 MiB       539 MiB     465 MiB    0.95       46.6 s   11 s       0.23
fabric-32k-gpus                726 MiB       767 MiB     766 MiB    1.05       18.6 s   17 s       0.93
frontier-full                  1,391 MiB     1,580 MiB   1,545 MiB  1.11       39.0 s   41 s       1.06
random specs:
random-0                       407 MiB       432 MiB     429 MiB    1.05       7.5 s    9 s        1.16
random-1                       520 MiB       1,403 MiB   780 MiB    1.50       37.5 s   37 s       0.98
random-2                       379 MiB       423 MiB     422 MiB    1.11       7.1 s    8 s        1.19
random-3                       379 MiB       424 MiB     423 MiB    1.12       6.9 s    8 s        1.22
random-5                       697 MiB       810 MiB     655 MiB    0.94       17.6 s   16 s       0.90
random-6                       469 MiB       466 MiB     464 MiB    0.99       78.4 s   16 s       0.20
random-7                       400 MiB       444 MiB     436 MiB    1.09       8.5 s    9 s        1.06
random-8                       396 MiB       428 MiB     425 MiB    1.07       7.6 s    9 s        1.12
random-9                       480 MiB       544 MiB     501 MiB    1.04       16.8 s   12 s       0.74
random-10                      406 MiB       452 MiB     433 MiB    1.07       7.9 s    9 s        1.13
random-11                      374 MiB       426 MiB     426 MiB    1.14       6.9 s    8 s        1.23
random-12                      364 MiB       421 MiB     421 MiB    1.16       7.7 s    8 s        1.09
random-13                      381 MiB       427 MiB     426 MiB    1.12       7.9 s    8 s        1.07
random-15                      415 MiB       472 MiB     447 MiB    1.08       15.9 s   9 s        0.59
random-16                      468 MiB       592 MiB     448 MiB    0.96       18.9 s   9 s        0.49
random-17                      407 MiB       442 MiB     435 MiB    1.07       9.1 s    9 s        0.95
random-18                      419 MiB       446 MiB     437 MiB    1.04       10.5 s   9 s        0.88
random-19                      410 MiB       446 MiB     438 MiB    1.07       9.4 s    9 s        0.95
random-20                      397 MiB       429 MiB     425 MiB    1.07       8.0 s    9 s        1.07
random-21                      440 MiB       497 MiB     471 MiB    1.07       10.1 s   10 s       0.95
random-23                      392 MiB       428 MiB     429 MiB    1.09       8.2 s    9 s        1.04
random-24                      418 MiB       453 MiB     442 MiB    1.06       8.8 s    9 s        1.00
random-25                      363 MiB       421 MiB     421 MiB    1.16       7.8 s    8 s        1.08
random-26                      401 MiB       434 MiB     430 MiB    1.07       9.8 s    9 s        0.88
random-27                      429 MiB       484 MiB     468 MiB    1.09       11.2 s   10 s       0.90
random-28                      486 MiB       558 MiB     508 MiB    1.04       10.9 s   11 s       1.04
random-29                      477 MiB       493 MiB     448 MiB    0.94       32.6 s   10 s       0.30
=============================  ============  ==========  =========  =========  =======  =========  =====

">=" marks the peak of a run stopped at a time or memory limit (a lower bound: "stopped"):
``a2a-1024-spray`` above 10 GiB (99 s CPU), ``cluster-500`` after 300 s, ``cluster-10`` after 14
minutes (455 s CPU; the whole run measured 0.95 GiB on 2026-11-26). "*": not re-measured today
(10-20 minutes each on the shared machine), the peak and quiet-machine wall time of
docs/performance.md, 2026-11-26, same scenario. "(N s)": the wall time, where the first pass did not
record the CPU time. Memory: every run measured to its end within 0.74-1.5x. Refused at the
default limit: the sprayed all-to-all on 1,024 GPUs (``a2a-1024-spray``) and tests/test_cli.py's
small_spec on a million hosts (hundreds of TiB); accepted: every other scenario, the Llama-3-405B
iteration on 16,384 GPUs (refused before, at 108 GiB) and the all-to-all on 1,024 GPUs under ECMP
(refused before, at 21 GiB) among them. Time: see :mod:`netsim.experiment.walltime`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from netsim.config import ExperimentSpec
from netsim.errors import NetsimError
from netsim.experiment.counts import SPRAYED, count_workload, fabric_shape
from netsim.experiment import walltime
from netsim.experiment.walltime import wall_time_s

GiB = 2**30
#: Default ceiling on a run's estimated peak memory (see the module docstring for why 16 GiB).
DEFAULT_MAX_MEMORY_BYTES = 16 * GiB

# ------------------------------------------------------------------ memory model (bytes)
# What one item of each kind costs at the run's peak, its DataFrame rows and report included
# (CPython 3.11, numpy 2; benchmarks/preflight.py checks the sum against measured peaks).
#: The interpreter with netsim, numpy, pandas, the numba kernels, pyarrow and plotly (the report) loaded.
BASELINE = 420 * 2**20
NODE = 1_200            #: a graph node with its attributes and adjacency
LINK = 1_900            #: a link: graph edge, link table, fabric and flow-table arrays, links.parquet, report
PATH = 80               #: a cached equal-cost path (a tuple), plus 8 per link on it
PAIR = 150              #: a GPU pair's entries in the path cache, the ideal pair model, offered-load cache
ROUTE = 60              #: one (path, share) of a sprayed route, or one (link, share) of offered load
#: A candidate path of a pair in a planning policy's tables, with the routes planned over it: Ethereal
#: (and min-split, not measured apart) keeps per path what halving-doubling-256-ethereal measures.
TABLE_PATH = {"ethereal": 6_000, "min-split": 6_000, "c4p": 150}
CONNECTION = 300        #: a connection's queue, byte counters and routing decision
INCIDENCE = 300         #: a cached incidence (link and weight arrays and lists), plus INCIDENCE_LINK a link
INCIDENCE_LINK = 60
MESSAGE_LIVE = 500      #: a message in flight: flow object, events, flow-table slot (plus MESSAGE_LINK a link)
MESSAGE_LINK = 24
IDEAL_CONNECTION = 300  #: a connection of the ideal's replay and its run on the non-blocking fabric
IDEAL_MESSAGE = 200     #: a message of the largest call, replayed by the ideal
ROW_ENTRY = 36          #: per link and concurrent flow on it: flow-table rows (16), grown by doubling
MESSAGE = 130           #: any message: its tasks in the executor (state, dependencies, records), what it leaves behind
FLOW_RECORD = 310       #: a flows.parquet row: the record, its DataFrame and Arrow copies, the report's read
CALL = 1_500            #: a collective call: its processes, record and collectives.parquet row
CLUSTER_JOB = 20_000    #: a job of a cluster run: its plan, records and rows
SAMPLE_LINK = 40        #: per link, a cached sample of a cluster job alone (its rates and peaks)
IDEAL_KEY = 300         #: a call shape's cached ideal (plus 8 bytes a rank for its key)
#: ... and per link of the fabric (fitted to the Llama iteration: 2,304 call shapes on 154,624 links,
#: the only case where it shows; the per-link structure is a guess)
IDEAL_KEY_LINK = 8
SERIES_BIN = 100        #: one link_series bin of one busy link (list entry, then DataFrame row)


@dataclass(frozen=True)
class Estimate:
    """What a run will create and the memory it needs, from :func:`estimate`.

    Counts: ``links`` are directed; ``connections`` distinct (src, dst, channel, job,
    communicator) queue pairs; ``messages`` every message over all iterations and jobs (what
    ``fabric.stats['flows']`` reports); ``flow_records`` the rows of ``flows.parquet``. Where the
    placement decides a count, it is an upper bound. ``memory_bytes`` is the estimated peak
    resident memory of the whole run (interpreter, topology, routing state, messages, ideal
    bounds, result tables); ``parts`` splits it by component.
    """

    hosts: int
    gpus: int
    switches: int
    links: int
    connections: int
    messages: int
    flow_records: int
    memory_bytes: float
    calls: int = 0
    paths: int = 0          #: equal-cost paths the path cache will hold (upper bound)
    in_flight: int = 0      #: most messages posted and not yet delivered at one instant (upper bound)
    parts: tuple[tuple[str, float], ...] = ()
    wall_s: float = 0.0     #: estimated wall time of the whole run on the project machine (:mod:`~netsim.experiment.walltime`)

    def describe(self) -> str:
        """One line: ``32 hosts, 256 GPUs, 1,344 links, 65,280 connections, 130,560 messages: about 1.2 GiB
        and 8 s``."""
        return (f"{self.hosts:,} hosts, {self.gpus:,} GPUs, {self.links:,} links, {self.connections:,} connections, "
                f"{self.messages:,} messages: about {_gib(self.memory_bytes)} and {duration(self.wall_s)}")

    @property
    def long(self) -> bool:
        """Whether the run is estimated to take more than :data:`~netsim.experiment.walltime.LONG_RUN_S`."""
        return self.wall_s > walltime.LONG_RUN_S


def duration(seconds: float) -> str:
    """``8 s``, ``4 min``, ``1.5 h``, ``3 days``: a rough time, as rough as the estimate."""
    if seconds < 100:
        return f"{seconds:.0f} s"
    if seconds < 6000:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.0f} days"


def _gib(n: float) -> str:
    """``300 MiB``, ``1.2 GiB``, ``37 GiB``, ``12 TiB``: two or three significant figures."""
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", GiB)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < 10 * scale else f"{n / scale:,.0f} {unit}"
    return f"{n / 2**20:.0f} MiB"


def _option(n: float) -> str:
    """A round ``--max-memory`` value at least 5% above ``n``: whole GiB below 8 GiB, then steps of 4
    and 16 GiB, then whole TiB and PiB."""
    n *= 1.05
    steps = ((8 * GiB, GiB, GiB, "GiB"), (64 * GiB, 4 * GiB, GiB, "GiB"), (2**40, 16 * GiB, GiB, "GiB"),
             (2**50, 2**40, 2**40, "TiB"))
    step, scale, unit = next(((s, sc, u) for top, s, sc, u in steps if n < top), (2**50, 2**50, "PiB"))
    return f"{math.ceil(n / step) * step // scale}{unit}"


def check(spec: ExperimentSpec, max_memory_bytes: float | None = None) -> Estimate:
    """The :func:`estimate` of ``spec``; NetsimError when it needs more than ``max_memory_bytes``.

    ``None`` means :data:`DEFAULT_MAX_MEMORY_BYTES`. The message is one line naming the
    estimate, the limit and the option that raises it.

    Examples
    --------
    >>> from netsim.config import parse_spec
    >>> spec = parse_spec({"name": "x", "topology": {"type": "frontier", "groups": 2}, "routing": "minimal",
    ...                    "model": "fluid",
    ...                    "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1GiB"}})
    >>> check(spec).gpus
    2048
    >>> check(spec, max_memory_bytes=2**30)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    netsim.errors.NetsimError: this run needs about ... GiB (256 hosts, ...), above the 1.0 GiB limit; raise it ...
    """
    limit = DEFAULT_MAX_MEMORY_BYTES if max_memory_bytes is None else float(max_memory_bytes)
    est = estimate(spec)
    if est.memory_bytes > limit:
        raise NetsimError(
            f"this run needs about {_gib(est.memory_bytes)} ({est.hosts:,} hosts, {est.links:,} links, "
            f"{est.connections:,} connections, {est.messages:,} messages), above the {_gib(limit)} limit; "
            f"raise it with --max-memory {_option(est.memory_bytes)} or make the run smaller"
            + (fluid_hint(spec, est) if spec.model == "nccl" else ""))
    return est


def fluid_hint(spec: ExperimentSpec, est: Estimate) -> str:
    """What the same run costs in the pure fluid model, when that is much less (the NCCL model's channels
    and ring slices multiply messages): a hint for the refusal message, empty otherwise."""
    fluid = estimate(spec.model_copy(update={"model": "fluid"}))
    if fluid.messages * 2 > est.messages:
        return ""
    return (f" (the NCCL model's rings make {est.messages / max(fluid.messages, 1):.0f}x the messages of "
            f"--set model=fluid, which needs about {_gib(fluid.memory_bytes)})")


# ------------------------------------------------------------------ the estimate

#: Policies whose messages are independent single-path pieces, each with its own incidence per path.
PIECES = ("split", "ethereal", "min-split")
#: Policies that hash a connection onto one path with array arithmetic (:mod:`netsim.topology.pathsets`),
#: never listing a pair's paths.
HASHED = ("ecmp",)


def estimate(spec: ExperimentSpec) -> Estimate:
    """Count what ``spec`` will create and estimate its peak memory and wall time, without building anything.

    Closed forms over the spec (:mod:`netsim.experiment.counts`), in milliseconds for any fabric
    size (a cluster run reads its trace: :mod:`netsim.cluster.counts`); see :class:`Estimate` for
    what each count means and where it is an upper bound, :mod:`netsim.experiment.walltime` for the time.

    Examples
    --------
    >>> from netsim.config import parse_spec
    >>> spec = parse_spec({"name": "x", "topology": {"type": "frontier", "groups": 2}, "routing": "minimal",
    ...                    "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1GiB"}})
    >>> est = estimate(spec)
    >>> est.gpus, est.links, est.connections, est.messages   # 8 rings (2 per NIC) of 2 x 2,048 x 2,047 messages
    (2048, 12232, 16384, 67076096)
    >>> est.memory_bytes > 2**30
    True
    """
    shape = fabric_shape(spec.topology)
    engine, routing = spec.engine, spec.routing
    cluster = None
    if spec.cluster is not None:  # (a run mode above experiment, dispatched as run_experiment does)
        from netsim.cluster.counts import count_cluster
        cluster = count_cluster(spec, shape)
    tally = cluster.busiest if cluster else count_workload(spec, shape)
    host, near, pod, far = tally.pair_counts
    apart_pairs = near + pod + far
    apart = near * shape.paths_near + pod * shape.paths_pod + far * shape.paths_far  # paths of pairs on different hosts
    paths = host * shape.paths_host + apart
    cached = 0
    if routing.type not in HASHED:  # the policy lists every path of a pair
        cached = (host * shape.paths_host * (PATH + 16) + near * shape.paths_near * (PATH + 32)
                  + (pod * shape.paths_pod + far * shape.paths_far) * (PATH + 8 * shape.path_links))
    # Spraying keeps a (path, share) per path of a pair; Ethereal and C4P keep a table of the pair's
    # candidate paths and the routes they plan over them.
    per_path = ROUTE * (routing.type in SPRAYED) + TABLE_PATH.get(routing.type, 0)
    # A sprayed message's incidence is the union of its pair's paths: a few links on one host or under
    # one leaf, more in a pod, the most across pods.
    union = (2 * host + (2 + 2 * shape.paths_near) * near + shape.union_links_pod * pod
             + shape.union_links * far) / max(1, host + apart_pairs)
    links = max(1, math.ceil(union)) if routing.type in SPRAYED else shape.path_links
    pieces = incidences = 0
    if routing.type in PIECES:
        # Each piece is its own flow with its incidence cached per path: split uses ``ways`` hashed
        # paths of a pair; Ethereal cuts a message alone in its batch into one piece per uplink and
        # its cursor turns over every path of the pair.
        if routing.type == "split":
            ways = routing.options.get("ways", 2)
            pieces = ways if isinstance(ways, int) and ways > 0 else 2
            incidences = min(apart, apart_pairs * pieces)
        else:
            pieces, incidences = shape.uplinks, apart
        links = shape.union_links
    per_connection = CONNECTION + _incidence(links) + engine.ideal * IDEAL_CONNECTION
    piece_links = shape.path_links if pieces else links  # a piece takes one path
    live = (tally.in_flight * max(1, pieces) * (MESSAGE_LIVE + MESSAGE_LINK * piece_links)
            + engine.ideal * tally.largest_call * IDEAL_MESSAGE)
    busy = min(shape.links, 2 * host + apart_pairs * links)
    records = tally.messages if engine.record_flows and not cluster else 0  # a cluster run keeps no flow records
    parts = {
        "interpreter": BASELINE,
        "topology": NODE * shape.nodes + LINK * shape.links,
        "paths": PAIR * (host + apart_pairs) + cached + apart * per_path + incidences * _incidence(shape.path_links),
        "connections": tally.connection_count * per_connection,
        "messages in flight": live + shape.links * max(4, tally.crossing) * ROW_ENTRY,
        "flow records": records * FLOW_RECORD + tally.messages * MESSAGE,
        "calls": tally.calls * CALL + tally.ideal_keys * (IDEAL_KEY + engine.ideal * IDEAL_KEY_LINK * shape.links)
        + tally.ideal_key_bytes,
        "link series": busy * engine.link_series * SERIES_BIN,
    }
    messages, calls = (cluster.messages, cluster.calls) if cluster else (tally.messages, tally.calls)
    if cluster:  # each job's sample alone is kept (its per-link rates), and a row of the jobs table
        parts["cluster jobs"] = cluster.jobs * (CLUSTER_JOB + SAMPLE_LINK * shape.links)
    wall_s = wall_time_s(messages, tally.connection_count, tally.crossing, routing.type, links=shape.links,
                         shapes_links=engine.ideal * tally.ideal_keys * shape.links)
    return Estimate(hosts=shape.hosts, gpus=shape.gpus, switches=shape.switches, links=shape.links,
                    connections=tally.connection_count, messages=messages, flow_records=records,
                    memory_bytes=float(sum(parts.values())), calls=calls, paths=paths,
                    in_flight=tally.in_flight, parts=tuple(parts.items()), wall_s=wall_s)


def _incidence(links: int) -> int:
    """A cached incidence: link and weight arrays and lists, core (link, weight) pairs."""
    return INCIDENCE + INCIDENCE_LINK * links

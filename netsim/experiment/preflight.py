"""Pre-flight: what a run will build and the memory it needs, from its spec alone; refuse above a limit.

Runs between :mod:`netsim.config` and :func:`netsim.experiment.run.run_experiment` (and before
each run of a sweep): :func:`estimate` counts the hosts, links, connections and messages a spec
will create, in closed form (:mod:`netsim.experiment.counts`), without building the topology or
placing ranks (milliseconds even for a million hosts), and turns the counts into the run's peak
resident memory; :func:`check` raises a one-line :class:`~netsim.errors.NetsimError` when that
is above the limit, so nothing allocates gigabytes before failing. Where an exact count needs
the placement, the estimate takes the upper bound.

The default limit, :data:`DEFAULT_MAX_MEMORY_BYTES`, is a fixed 16 GiB rather than a share of
the machine's memory, so that whether a spec is accepted does not depend on where it is
checked. It fits the 24 GiB project VM with room for the system and another process, and a
32 GB laptop; every shipped experiment is estimated under 2.1 GiB, while the run that exhausted
the VM (a sprayed all-to-all on 1,024 GPUs, 129 GiB by this estimate) is refused at once.

The model (the constants below) charges each item what it costs at the run's peak, from the
interpreter with netsim, pyarrow and plotly loaded to the DataFrames of the results and the
report read back: per graph node and link, per cached equal-cost path (a GPU pair that talks
caches all of them: the all-to-all's cost), per connection and its incidence, per message in
flight and per flow record. :attr:`Estimate.parts` shows the split.

Calibration
-----------
``benchmarks/preflight.py``: each case in a fresh process that runs it as ``netsim run`` does
(simulate, write the results directory and report.html), its peak RSS (``VmHWM``) against
the estimate. 2026-11-25, the project VM (2-core Xeon, 24 GiB), Python 3.11.7. Target: never
below 0.8x the measured peak, at most 3x above 500 MB.

=================================  ========  ========  =====  =========
case                               measured  estimate  ratio  messages
=================================  ========  ========  =====  =========
small-spec (tests/test_cli.py)      393 MiB   421 MiB   1.07        480
ring-allreduce                      425 MiB   429 MiB   1.01      8,064
rails-concurrent                    400 MiB   423 MiB   1.06      2,016
routes-table                        404 MiB   423 MiB   1.05      1,920
policy-sweep (ecmp)                 397 MiB   422 MiB   1.06      1,984
link-failure (ecmp)                 465 MiB   450 MiB   0.97     32,256
holmes-hetero (holmes)              427 MiB   435 MiB   1.02     15,232
c4p-multijob (ecmp)                 601 MiB   638 MiB   1.06    258,048
c4p-multijob-training (ecmp)        553 MiB   581 MiB   1.05    182,784
ring-vs-tree                        461 MiB   508 MiB   1.10     61,236
ring-vs-tree-frontier               589 MiB   630 MiB   1.07     61,236
frontier-mini-ring                  609 MiB   633 MiB   1.04    130,560
ecmp-collisions-256                 479 MiB   504 MiB   1.05  1,044,480
spraying-vs-splitting              1470 MiB  2097 MiB   1.43  1,133,284
ring, 256 GPUs, 8 channels         1002 MiB  1201 MiB   1.20  1,044,480
ring, 512 GPUs, spray               710 MiB   829 MiB   1.17    523,264
ring, 1,024 GPUs, engine extras     416 MiB   521 MiB   1.25  2,095,104
  and flow records off
hierarchical, 512 GPUs              567 MiB   569 MiB   1.00    143,360
all-to-all, 128 GPUs, spray         695 MiB   877 MiB   1.26     16,256
all-to-all, 256 GPUs, ECMP         1906 MiB  2971 MiB   1.56     65,280
pairwise all-to-all, 256, split-4  1013 MiB  1276 MiB   1.26     65,280
halving-doubling, 256, Ethereal     739 MiB   889 MiB   1.20      4,096
tree, 512 GPUs, C4P                 722 MiB  1175 MiB   1.63    523,264
training, 128 GPUs, TP8 PP4 DP4,   1244 MiB  1431 MiB   1.15  1,388,544
  per-layer TP, 2 iterations
dragonfly, 144 GPUs, UGAL,          502 MiB   539 MiB   1.07     20,592
  pairwise all-to-all
leaf-spine of 32,768 GPUs,          740 MiB   767 MiB   1.04      8,064
  64-rank ring
Frontier (74 groups), 256 ranks    1398 MiB  1580 MiB   1.13    130,560
=================================  ========  ========  =====  =========

Measured the same day without the report (so the estimate's margin is larger): all-to-all on 256
GPUs with spraying 3,186 MiB (estimate 4,672, 1.47), ring on 1,024 GPUs 1,384 MiB (1,956, 1.41),
100,000 single-GPU hosts with a 64-rank ring 1,074 MiB (1,559, 1.45). Refused by the default
limit: the all-to-all on 1,024 GPUs (129 GiB sprayed, 73 GiB with ECMP), tests/test_cli.py's
small_spec on a million hosts (1.3 PiB); accepted: a million single-GPU hosts with a 1,024-rank
ring (13 GiB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from netsim.config import ExperimentSpec
from netsim.errors import NetsimError
from netsim.experiment.cluster_counts import count_cluster
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
            f"raise it with --max-memory {_option(est.memory_bytes)} or make the run smaller")
    return est


# ------------------------------------------------------------------ the estimate

#: Policies whose messages are independent single-path pieces, each with its own incidence per path.
PIECES = ("split", "ethereal", "min-split")
#: Policies that hash a connection onto one path with array arithmetic (:mod:`netsim.topology.pathsets`),
#: never listing a pair's paths.
HASHED = ("ecmp",)


def estimate(spec: ExperimentSpec) -> Estimate:
    """Count what ``spec`` will create and estimate its peak memory, without building anything.

    Closed forms over the spec (:mod:`netsim.experiment.counts`), in milliseconds for any fabric
    size; see :class:`Estimate` for what each count means and where it is an upper bound.

    Examples
    --------
    >>> from netsim.config import parse_spec
    >>> spec = parse_spec({"name": "x", "topology": {"type": "frontier", "groups": 2}, "routing": "minimal",
    ...                    "workload": {"type": "collective", "op": "allreduce", "algorithm": "ring", "size": "1GiB"}})
    >>> est = estimate(spec)
    >>> est.gpus, est.links, est.connections, est.messages   # a 2,048-rank ring: 2 x 2,048 x 2,047 messages
    (2048, 12232, 2048, 8384512)
    >>> est.memory_bytes > 2**30
    True
    """
    shape = fabric_shape(spec.topology)
    engine, routing = spec.engine, spec.routing
    cluster = count_cluster(spec, shape) if spec.cluster is not None else None
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

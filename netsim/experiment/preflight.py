"""Pre-flight: what a run will build and the memory it needs, from its spec alone; refuse above a limit.

Runs between :mod:`netsim.config` and :func:`netsim.experiment.run.run_experiment` (and before
each run of a sweep): :func:`estimate` counts the hosts, links, connections and messages a spec
will create, in closed form, without building the topology or placing ranks (milliseconds even
for a million hosts), and turns the counts into the run's peak resident memory; :func:`check`
raises a one-line :class:`~netsim.errors.NetsimError` when that is above the limit, so nothing
allocates gigabytes before failing.

Where an exact count needs the placement (which GPUs share a host or a leaf, how many ranks of
a hierarchical allreduce land on one host) the estimate takes the upper bound and says so.

The default limit, :data:`DEFAULT_MAX_MEMORY_BYTES`, is a fixed 16 GiB rather than a share of
the machine's memory, so that whether a spec is accepted does not depend on where it is
checked. It fits the 24 GiB project VM with room for the system and another process, and a
32 GB laptop; every shipped experiment needs under 2 GiB, while the runs that exhausted the VM
(a 1,024-GPU sprayed all-to-all) need far more and are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from netsim.config import ExperimentSpec
from netsim.errors import NetsimError
from netsim.experiment.counts import SPRAYED, count_workload, fabric_shape

GiB = 2**30
#: Default ceiling on a run's estimated peak memory (see the module docstring for why 16 GiB).
DEFAULT_MAX_MEMORY_BYTES = 16 * GiB

# ------------------------------------------------------------------ memory model (bytes)
# Measured on CPython 3.11 / numpy 2 (benchmarks/preflight.py fits and checks them): what one
# item of each kind costs at the run's peak, its later DataFrame row included.
#: The interpreter with netsim, numpy, pandas, the numba kernels, pyarrow and plotly (the report) loaded.
BASELINE = 420 * 2**20
NODE = 1_200            #: a graph node with its attributes and adjacency
LINK = 1_900            #: a link: graph edge, link table, fabric and flow-table arrays, links.parquet, report
PATH = 80               #: a cached equal-cost path (a tuple), plus 8 per link on it
PAIR = 400              #: a GPU pair's entries in the path cache, the ideal pair model, offered-load cache
ROUTE = 100             #: one (path, share) of a sprayed route, or one (link, share) of offered load
CONNECTION = 700        #: a connection's queue, byte counters and routing decision
INCIDENCE = 750         #: a cached incidence (link and weight arrays and lists), plus INCIDENCE_LINK a link
INCIDENCE_LINK = 100
MESSAGE_LIVE = 1_200    #: a message in flight: flow object, events, flow-table slot (plus 24 a link)
ROW_ENTRY = 36          #: per link and concurrent flow on it: flow-table rows (16), grown by doubling
MESSAGE = 40            #: any message: what its objects leave behind (ring-kernel arrays, fragmentation)
FLOW_RECORD = 700       #: a flows.parquet row: the record, its DataFrame and Arrow copies, the report's read
CALL = 1_500            #: a collective call: its processes, record and collectives.parquet row
IDEAL_KEY = 300         #: a call shape's cached ideal (plus 8 bytes a rank for its key)
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

    def describe(self) -> str:
        """One line: ``32 hosts, 256 GPUs, 1,344 links, 65,280 connections, 130,560 messages: about 1.2 GiB``."""
        return (f"{self.hosts:,} hosts, {self.gpus:,} GPUs, {self.links:,} links, {self.connections:,} connections, "
                f"{self.messages:,} messages: about {_gib(self.memory_bytes)}")


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
#: Policies that keep a table of every GPU pair's candidate paths.
PER_PAIR_TABLES = ("ethereal", "min-split", "c4p")


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
    tally = count_workload(spec, shape)
    engine, routing = spec.engine, spec.routing
    host, near, far = tally.pair_counts
    paths = host * shape.paths_host + near * shape.paths_near + far * shape.paths_far
    apart = near * shape.paths_near + far * shape.paths_far  # paths of pairs on different hosts
    cached = (host * shape.paths_host * (PATH + 16) + near * shape.paths_near * (PATH + 32)
              + far * shape.paths_far * (PATH + 8 * shape.path_links))
    # Spraying (the policy, and the ideal's non-blocking core) keeps a (path, share) per path and pair.
    per_path = ROUTE * ((routing.type in SPRAYED) + engine.ideal + (routing.type in PER_PAIR_TABLES))
    links = shape.union_links if routing.type in SPRAYED else shape.path_links
    pieces = incidences = 0
    if routing.type in PIECES:
        # Each piece is its own flow, its incidence cached per path: split uses ``ways`` hashed paths
        # of a pair; Ethereal cuts a message alone in its batch into one piece per uplink, and its
        # cursor turns over every path of a pair.
        ways = routing.options.get("ways", 2)
        pieces = shape.uplinks if routing.type != "split" else ways if isinstance(ways, int) and ways > 0 else 2
        incidences = apart if routing.type != "split" else min(apart, (near + far) * pieces)
        links = shape.union_links
    congestion = (near + far) * shape.union_links * ROUTE if engine.congestion else 0
    per_connection = CONNECTION + _incidence(links) + engine.ideal * (CONNECTION + _incidence(4))
    live = (tally.in_flight * max(1, pieces) + engine.ideal * tally.largest_call) * (MESSAGE_LIVE + 24 * links)
    busy = min(shape.links, 2 * host + (near + far) * links)
    records = tally.messages if engine.record_flows else 0
    parts = {
        "interpreter": BASELINE,
        "topology": NODE * shape.nodes + LINK * shape.links,
        "paths": PAIR * (host + near + far) + cached + apart * per_path + congestion
        + incidences * _incidence(shape.path_links),
        "connections": tally.connection_count * per_connection,
        "messages in flight": live + shape.links * max(4, tally.crossing) * ROW_ENTRY,
        "flow records": records * FLOW_RECORD + tally.messages * MESSAGE,
        "calls": tally.calls * CALL + tally.ideal_keys * IDEAL_KEY + tally.ideal_key_bytes,
        "link series": busy * engine.link_series * SERIES_BIN,
    }
    return Estimate(hosts=shape.hosts, gpus=shape.gpus, switches=shape.switches, links=shape.links,
                    connections=tally.connection_count, messages=tally.messages, flow_records=records,
                    memory_bytes=float(sum(parts.values())), calls=tally.calls, paths=paths,
                    in_flight=tally.in_flight, parts=tuple(parts.items()))


def _incidence(links: int) -> int:
    """A cached incidence: link and weight arrays and lists, core (link, weight) pairs."""
    return INCIDENCE + INCIDENCE_LINK * links

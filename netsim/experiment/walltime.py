"""The pre-flight time estimate: how long ``netsim run`` of a spec takes, from the spec's closed-form counts.

:func:`netsim.experiment.preflight.estimate` calls :func:`wall_time_s` with the counts of
:mod:`netsim.experiment.counts` (messages, calls, connections, GPU pairs and paths, the most flows
on one link) and reports the result beside the memory estimate; ``netsim run`` says so before it
starts when it is above :data:`LONG_RUN_S`. The model charges each item what it costs on the project
machine (one core of a 2-core x86_64 VM, Python 3.11.7, kernels compiled), fitted to measured
whole runs (the calibration table of :mod:`netsim.experiment.preflight`, CPU seconds: the run is
one thread, and the VM's wall clock depends on its neighbours). It is a rough guide: within about
2x on the shipped scenarios, and further off where a run's events depend on its dynamics (how many
flows complete together, how often C4P re-plans), which counts made before the run cannot see.
"""

from __future__ import annotations

import math

#: Above this estimate, ``netsim run`` prints a notice before it starts (ten minutes).
LONG_RUN_S = 600.0

# ------------------------------------------------------------------ time model (seconds)
START = 5.0             #: imports, the engine's cached kernels, an empty run's results and report
MESSAGE = 1.6e-6        #: a message through the compiled executor when nothing shares its links
CONTENTION = 1.3e-6     #: a message, per doubling of the flows on the busiest link (each event re-rates them)
RECORD = 1.7e-6         #: a flow record: its row in flows.parquet and the report's read of it
CALL = 4e-3             #: a collective call: its schedule, ideal and bound, its record
CONNECTION = 4e-6       #: a connection routed (hash, path-set tables) and its queue
PLANNED_PATH = 2e-7     #: a candidate path a planning policy (C4P, Ethereal) weighs, per message
PLANNED = ("c4p", "ethereal", "min-split")


def wall_time_s(messages: int, records: int, calls: int, connections: int, crossing: int, paths: int,
                routing: str) -> float:
    """Estimated wall time of a whole ``netsim run`` (build, simulate, write, report) on the project machine.

    ``crossing`` is the most flows on one link at once (an upper bound), ``paths`` the equal-cost
    paths of the GPU pairs that talk, ``routing`` the policy's name.

    Examples
    --------
    >>> round(wall_time_s(messages=2_095_104, records=2_095_104, calls=1, connections=1024, crossing=4,
    ...                   paths=32_768, routing="ecmp"))   # ring allreduce over 1,024 GPUs
    18
    """
    per_message = MESSAGE + CONTENTION * math.log2(1 + max(crossing, 1))
    if routing in PLANNED:  # planned per batch of messages over each pair's candidate paths
        per_message += PLANNED_PATH * paths / max(connections, 1)
    return START + messages * per_message + records * RECORD + calls * CALL + connections * CONNECTION

"""The pre-flight time estimate: how long ``netsim run`` of a spec takes, from the spec's closed-form counts.

:func:`netsim.experiment.preflight.estimate` calls :func:`wall_time_s` with the counts of
:mod:`netsim.experiment.counts` (messages, connections, the most flows on one link, call shapes,
the fabric's links) and reports the result beside the memory estimate; ``netsim run`` and ``netsim
sweep`` say so before they start a run estimated above :data:`LONG_RUN_S`. The constants are what
each item costs on the project machine (one core of the 2-core x86_64 VM, Python 3.11.7, kernels
compiled), fitted to the CPU seconds of whole runs (the calibration table of
:mod:`netsim.experiment.preflight`, 2026-11-28, measured while other runs shared the machine: on a
quiet machine the same runs took 1.6-3.4x less wall time, so the estimate is high there).

It is a rough guide. Measured: within 0.75-1.25x on most runs whose CPU time was measured (the
Llama iteration, the pod ring, the all-to-alls, the training jobs, most random specs), 0.55x on
the Meta DP allreduce under ECMP (its ideal's path classes across pods are not counted), and
0.2-0.5x (under) where routing runs Python per message or per first use in ways counts cannot see
(Ethereal, split pieces, UGAL on a dragonfly); a cluster run's running sets are guessed
(:mod:`netsim.cluster.counts`).
"""

from __future__ import annotations

import math

#: Above this estimate, ``netsim run`` prints a notice before it starts (ten minutes).
LONG_RUN_S = 600.0

# ------------------------------------------------------------------ time model (seconds)
# Fitted to the CPU seconds of whole runs (benchmarks/preflight.py, the table in
# netsim.experiment.preflight): relative least squares over the scenarios and random specs.
START = 8.4             #: imports, the engine's cached kernels, an empty run's results and report
LINK = 6.5e-5           #: a link of the fabric: building it (graph, link table), its row and report
MESSAGE = 9.4e-6        #: a message: its tasks in the executor, its records, the ideal's replay, its row
CONTENTION = 3.1e-6     #: a message, per doubling of the flows on the busiest link (each event re-rates them)
CONNECTION = 8.4e-5     #: a connection routed (hash, path-set tables) and its queue
PLANNED_MESSAGE = 2.2e-4  #: a message a planning policy routes itself, in Python (C4P, Ethereal, min-split)
SHAPE_LINK = 7.8e-7     #: a call shape's ideal, per link of the fabric (the Llama iteration's 2,304 shapes)
PLANNED = ("c4p", "ethereal", "min-split")


def wall_time_s(messages: int, connections: int, crossing: int, routing: str, links: int = 0,
                shapes_links: int = 0) -> float:
    """Estimated wall time of a whole ``netsim run`` (build, simulate, write, report) on the project machine.

    ``crossing`` is the most flows on one link at once (an upper bound), ``routing`` the policy's name,
    ``links`` the fabric's, ``shapes_links`` the call shapes whose ideal is computed times the fabric's links.

    Examples
    --------
    >>> round(wall_time_s(messages=2_095_104, connections=1024, crossing=4, routing="ecmp", links=6144))  # ring, 1,024 GPUs
    44
    """
    per_message = MESSAGE + CONTENTION * math.log2(1 + max(crossing, 1)) + PLANNED_MESSAGE * (routing in PLANNED)
    return START + links * LINK + messages * per_message + connections * CONNECTION + shapes_links * SHAPE_LINK

"""Fault detection as C4D does it: telemetry a cluster can collect, a detector ranking suspect
components after every iteration, and its evaluation as a classifier over random single-fault runs.

- :mod:`~netsim.detect.components` names the suspects (GPU, NIC, cable, switch) and what lies on a path;
- :mod:`~netsim.detect.telemetry` turns one finished run into per-iteration observables only;
- :mod:`~netsim.detect.detector` scores and ranks components from those observables;
- :mod:`~netsim.detect.evaluate` runs the trials (``detection:`` in an experiment file).
"""

from netsim.detect.components import Component, Components
from netsim.detect.detector import Detector, Verdict
from netsim.detect.telemetry import Telemetry, collect

__all__ = ["Component", "Components", "Detector", "Telemetry", "Verdict", "collect"]

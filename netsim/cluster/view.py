"""The fabric of a whole extrapolated cluster run: each epoch's sample simulation stretched over the epoch.

An extrapolated cluster run simulates a few iterations of the jobs running together at each change
of the running set (an *epoch*) and assumes the same traffic until the next change. Its link
statistics are therefore the epochs' samples weighted by how long each epoch lasted: bytes scale
with the epoch's length over the sample's, busy time likewise, peaks are the largest over the
epochs. :class:`ClusterFabric` offers the attributes the results tables and metrics read from a
:class:`~netsim.engine.fabric.Fabric`.
"""

from __future__ import annotations

import numpy as np

from netsim.experiment.results import FLOW_COLUMNS


class ClusterFabric:
    """Epoch samples accumulated into run-long link statistics (see the module docstring)."""

    track_congestion = True
    link_series = None  #: the cluster's load over time is the ``cluster_series`` table instead
    undelivered = 0

    def __init__(self, capacity_Bps: np.ndarray):
        n = len(capacity_Bps)
        self.capacity_Bps = np.asarray(capacity_Bps, dtype=np.float64)
        self.link_bytes = np.zeros(n)
        self.link_busy_s = np.zeros(n)
        self.link_peak_util = np.zeros(n)
        self.offered_peak = np.zeros(n)
        self.spray_offered_peak = np.zeros(n)
        self.stats = {"flows": 0, "subflows": 0, "reroutes": 0, "solver_calls": 0}
        self._pairs = [0, 0]

    @property
    def current_capacity_Bps(self) -> np.ndarray:
        return self.capacity_Bps

    def add(self, sample, epoch_s: float) -> None:
        """Add one epoch's share of a sample (:class:`netsim.cluster.sim.Sample`) that lasted ``epoch_s``."""
        self.link_bytes += sample.byte_rate * epoch_s
        self.link_busy_s += sample.busy_share * epoch_s
        if epoch_s > 0:
            np.maximum(self.link_peak_util, sample.peak_util, out=self.link_peak_util)
            np.maximum(self.offered_peak, sample.offered, out=self.offered_peak)
            np.maximum(self.spray_offered_peak, sample.spray_offered, out=self.spray_offered_peak)
        for key in self.stats:
            self.stats[key] += sample.stats[key]
        self._pairs[0] += sample.pairs[0]
        self._pairs[1] += sample.pairs[1]

    def queue_pair_totals(self) -> tuple[int, int]:
        """(connections, queue pairs) summed over the epochs' samples."""
        return self._pairs[0], self._pairs[1]

    def flow_columns(self) -> dict[str, np.ndarray]:
        """No per-message records: an extrapolated run keeps none."""
        ints = ("flow_id", "src", "dst", "channel", "job", "n_paths")
        return {k: np.zeros(0, dtype=np.int64 if k in ints else (object if k == "connection" else np.float64))
                for k in FLOW_COLUMNS[1:]}

    def finalize(self) -> None:
        """Nothing is pending."""

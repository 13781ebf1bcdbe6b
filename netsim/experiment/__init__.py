"""Run experiment specs and read/write their results directories."""

from netsim.experiment.results import read_results, write_results
from netsim.experiment.run import RunResult, run_experiment, spec_hash

__all__ = ["RunResult", "read_results", "run_experiment", "spec_hash", "write_results"]

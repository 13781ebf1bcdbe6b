"""Workloads: what runs on the fabric (collectives and sequences of them; training jobs later)."""

from netsim.workload.collective import CallPlan, SequencePlan, plan_workload, run_workload, select_ranks

__all__ = ["CallPlan", "SequencePlan", "plan_workload", "run_workload", "select_ranks"]

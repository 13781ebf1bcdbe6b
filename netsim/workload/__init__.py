"""Workloads: what runs on the fabric (collective loops now; training jobs later)."""

from netsim.workload.collective import collective_job

__all__ = ["collective_job"]

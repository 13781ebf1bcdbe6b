"""NIC profiles: line rate, per-message latency, achievable efficiency, transport, family and ports.

Profiles are data; builders turn them into NIC links (capacity = ports x line rate x efficiency)
and the engine into per-message overheads. Numbers marked (est.) in the table below are estimates
(``docs/fabrics.md`` lists them) and every field can be overridden in YAML.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from netsim.errors import ConfigError

GBPS = 1e9 / 8


@dataclass(frozen=True)
class NicProfile:
    """A NIC model.

    Parameters
    ----------
    name:
        Profile name (``ib-hdr-200``).
    port_rate_Bps:
        Line rate of one port.
    latency_s:
        Per-message latency (NIC + software), charged once per message.
    efficiency:
        Achievable fraction of line rate (TCP well below RDMA).
    transport:
        ``rdma`` or ``tcp``.
    family:
        Fabric family: two NICs can form an RDMA connection only within one family
        (``infiniband``, ``roce``, ``slingshot``, ``ethernet``).
    ports:
        Ports per NIC. With 2, the two ports go to two different leaves (dual-ToR) and are bonded:
        a connection uses one port, chosen by the routing policy.
    """

    name: str
    port_rate_Bps: float
    latency_s: float = 0.0
    efficiency: float = 1.0
    transport: Literal["rdma", "tcp"] = "rdma"
    family: str = "generic"
    ports: int = 1

    def __post_init__(self):
        if not self.port_rate_Bps > 0:
            raise ConfigError(f"NIC {self.name!r}: line rate must be positive", "nic.bandwidth")
        if not 0 < self.efficiency <= 1:
            raise ConfigError(f"NIC {self.name!r}: efficiency must be in (0, 1], got {self.efficiency}",
                              "nic.efficiency")
        if self.transport not in ("rdma", "tcp"):
            raise ConfigError(f"NIC {self.name!r}: transport must be 'rdma' or 'tcp', got {self.transport!r}",
                              "nic.transport")
        if self.ports < 1:
            raise ConfigError(f"NIC {self.name!r}: ports must be >= 1", "nic.ports")

    @property
    def port_capacity_Bps(self) -> float:
        """What one port achieves: line rate x efficiency."""
        return self.port_rate_Bps * self.efficiency

    def with_(self, **changes) -> NicProfile:
        """A copy with some fields changed (YAML overrides of a built-in)."""
        return replace(self, **changes)


#: Built-in profiles. Latencies and efficiencies are estimates (est.) unless a paper gives them.
BUILTIN_NICS: dict[str, NicProfile] = {p.name: p for p in (
    NicProfile("ib-hdr-200", 200 * GBPS, 1.0e-6, 0.97, "rdma", "infiniband"),       # (est.) latency, efficiency
    NicProfile("ib-ndr-400", 400 * GBPS, 1.0e-6, 0.97, "rdma", "infiniband"),
    NicProfile("roce-100", 100 * GBPS, 2.0e-6, 0.94, "rdma", "roce"),
    NicProfile("roce-200", 200 * GBPS, 2.0e-6, 0.94, "rdma", "roce"),
    NicProfile("roce-400", 400 * GBPS, 2.0e-6, 0.94, "rdma", "roce"),
    NicProfile("roce-2x200-bonded", 200 * GBPS, 2.0e-6, 0.94, "rdma", "roce", ports=2),  # C4's dual-ToR NIC
    NicProfile("eth-tcp-25", 25 * GBPS, 15e-6, 0.70, "tcp", "ethernet"),            # (est.)
    NicProfile("eth-tcp-100", 100 * GBPS, 15e-6, 0.60, "tcp", "ethernet"),          # (est.)
    NicProfile("slingshot-200", 200 * GBPS, 2.0e-6, 0.95, "rdma", "slingshot"),
)}


def nic_profile(name: str, path: str = "nic") -> NicProfile:
    """The built-in profile ``name``; a ConfigError listing the built-ins otherwise."""
    try:
        return BUILTIN_NICS[name]
    except KeyError:
        raise ConfigError(f"unknown NIC profile {name!r}; built-in: {', '.join(BUILTIN_NICS)}", path) from None


def generic_nic(bandwidth_Bps: float, latency_s: float = 0.0) -> NicProfile:
    """A plain RDMA NIC of ``bandwidth_Bps`` with per-message ``latency_s`` (the leaf-spine default)."""
    return NicProfile("generic", bandwidth_Bps, latency_s)


def same_fabric(a: NicProfile, b: NicProfile) -> bool:
    """True when ``a`` and ``b`` can form an RDMA connection (one family, both RDMA)."""
    return a.family == b.family and a.transport == b.transport == "rdma"

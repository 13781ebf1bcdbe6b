"""The value types of experiment files, shared by every spec: quantities with units and ranges,
counts, names, links and NICs.

Each fabric family (:mod:`netsim.fabrics`) builds its ``topology:`` spec from these;
:mod:`netsim.config` the rest of the experiment file. Errors raised here are ``ValueError``s that
pydantic turns into one message with the YAML path.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from netsim import units
from netsim.errors import ConfigError, UnitError, shorten

# ---------------------------------------------------------------------------- value ranges
# Checked when a spec is validated, before anything is built: each message names the YAML path and
# the allowed range. The bounds sit far above any real fabric or model, low enough that a typo
# fails at once instead of overflowing or running for days.

#: Largest seed: results store it as a signed 64-bit integer (a larger one used to fail after the run).
MAX_SEED = 2**63 - 1
#: Largest size (bytes): 2**60 (1024 PiB). The smallest is 1 byte.
MAX_SIZE_BYTES = 2**60
#: Largest bandwidth (bytes/s): 1e15 (8 Pbps). Bandwidths must be above 0.
MAX_BANDWIDTH_BPS = 1e15
#: Longest time (s): 1e6 (about 11.6 days), for latencies, overheads, start and fault times.
MAX_TIME_S = 1e6
#: Largest count of one kind of switch, host or group in a fabric (the fabric as a whole is bounded
#: by :data:`MAX_GPUS` and :data:`MAX_LINKS`), and of ranks or parallel sizes.
MAX_COUNT = 1_000_000
#: Most GPUs or NICs per host (a NIC has at most 8 ports).
MAX_PER_HOST = 1_024
#: Most parallel cables between two switches (leaf-spine uplinks, dragonfly global links).
MAX_CABLES = 1_024
#: Most channels (rings) per collective call.
MAX_CHANNELS = 64
#: Most iterations of a collective, a sequence or a job.
MAX_ITERATIONS = 1_000_000
#: Most layers of a model.
MAX_LAYERS = 10_000
#: Largest model dimension: hidden size, heads, sequence length, vocabulary, batch sizes.
MAX_MODEL_DIM = 100_000_000
#: Most micro-batches per training iteration (global_batch / (micro_batch x dp)).
MAX_MICRO_BATCHES = 100_000
#: Largest fabric netsim agrees to build (GPUs, directed links): far above Frontier's 75,776 GCDs and
#: 473,896 links, low enough that a typo such as ``hosts_per_leaf: 100000000`` fails fast and clearly.
MAX_GPUS = 2_000_000
MAX_LINKS = 20_000_000

_PARSE = {"size": units.parse_size, "bandwidth": units.parse_bandwidth, "time": units.parse_time}
_EXAMPLE = {"size": "256MiB", "bandwidth": "400Gbps", "time": "2us"}


def _quantity(what: str, allowed: str, low: float, high: float, above: bool = False) -> BeforeValidator:
    """A size, bandwidth or time (``what``) in [low, high] ((low, high] when ``above``); ``allowed``
    says so in words."""
    parse = _PARSE[what]

    def check(value: Any) -> float:
        if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
            raise ValueError(f"expected a {what} (a number or a string like {_EXAMPLE[what]}), "
                             f"got {shorten(value)}")
        try:
            result = parse(value)
        except UnitError as exc:
            raise ValueError(str(exc)) from None
        if result < low or (above and result == low) or result > high:
            raise ValueError(f"expected a {what} {allowed}, got {shorten(value)}")
        return result
    return BeforeValidator(check)


Size = Annotated[float, _quantity("size", "from 1B to 2**60 bytes (1024PiB)", 1, MAX_SIZE_BYTES)]
Bandwidth = Annotated[float, _quantity("bandwidth", "above 0, at most 1e15 B/s (8Pbps)", 0, MAX_BANDWIDTH_BPS,
                                       above=True)]
Time = Annotated[float, _quantity("time", "from 0 to 1e6 s (about 11.6 days)", 0, MAX_TIME_S)]


def _count(high: int, low: int = 1) -> Any:
    """An integer field in [low, high]; floats, booleans and strings are refused, not converted."""
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"expected a valid integer from {low:,} to {high:,}, got {shorten(value)}")
        return value
    return Annotated[int, BeforeValidator(check)]


def _channels(value: Any) -> int | str:
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHANNELS:
        raise ValueError(f"expected auto (NCCL's count from the hosts' NICs) or an integer from 1 to "
                         f"{MAX_CHANNELS}, got {shorten(value)}")
    return value


#: Parallel rings (NCCL channels) of a call: ``auto`` (the model's count: :mod:`netsim.collectives.nccl`)
#: or a number.
Channels = Annotated[int | Literal["auto"], BeforeValidator(_channels)]


#: NCCL protocol names a workload may give (any case), and ``auto``.
PROTOCOL_CHOICES = ("auto", "simple", "ll128", "ll")


def _protocol(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in PROTOCOL_CHOICES:
        return value.strip().lower()
    raise ValueError(f"expected one of {', '.join(PROTOCOL_CHOICES)} (NCCL's protocols, any case; auto: NCCL's "
                     f"pick by size), got {shorten(value)}")


#: A call's NCCL protocol: ``auto`` or one of NCCL's (:mod:`netsim.collectives.nccl_tuning`).
ProtocolName = Annotated[Literal["auto", "simple", "ll128", "ll"], BeforeValidator(_protocol)]


#: Names of experiments, jobs, clusters and variants: an experiment's name is its default results
#: directory (``results/NAME``), a cluster's prefixes its node names; so never a path.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}")
NAME_RULE = ("a name: a letter, digit or underscore, then letters, digits, '_', '.' or '-', at most 100 "
             "characters")


def _name(value: Any) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise ValueError(f"expected {NAME_RULE}, got {shorten(value)}")
    return value


def _variant(value: Any) -> str:
    return value if value == "" else _name(value)


Name = Annotated[str, BeforeValidator(_name)]


class _FieldError(ValueError):
    """A validator's complaint about a sub-field: pydantic prefixes its location, ``sub`` goes after it."""

    def __init__(self, message: str, sub: str = ""):
        super().__init__(message)
        self.message, self.sub = message, sub


def _relocated(exc: ConfigError) -> _FieldError:
    return _FieldError(exc.message, exc.path)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LinkSpec(_Spec):
    """A link class: bandwidth, propagation latency and per-message overhead."""

    bandwidth: Bandwidth
    latency: Time = 0.0
    overhead: Time = 0.0


class NicSpec(_Spec):
    """A NIC: a built-in profile name, a built-in with overrides, or a full definition.

    ``latency`` is the cable's propagation latency; ``overhead`` the per-message cost (it replaces
    the profile's per-message latency when given).
    """

    profile: str | None = None
    bandwidth: Bandwidth | None = None
    latency: Time = 0.0
    overhead: Time | None = None
    efficiency: Annotated[float, Field(gt=0, le=1)] | None = None
    transport: Literal["rdma", "tcp"] | None = None
    family: str | None = None
    ports: _count(8) | None = None

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, v: str | None) -> str | None:
        if v is not None:
            from netsim.topology.nic import nic_profile
            try:
                nic_profile(v)
            except ConfigError as exc:
                raise ValueError(exc.message) from None  # pydantic then names the full YAML path
        return v

    def resolve(self):
        """The NicProfile this spec describes."""
        from netsim.topology.nic import generic_nic, nic_profile
        if self.profile is None and self.bandwidth is None:
            raise ConfigError("give a built-in 'profile' or a 'bandwidth'", "topology.nic")
        base = nic_profile(self.profile) if self.profile else generic_nic(self.bandwidth)
        changes = {"port_rate_Bps": self.bandwidth, "latency_s": self.overhead, "efficiency": self.efficiency,
                   "transport": self.transport, "family": self.family, "ports": self.ports}
        changes = {k: v for k, v in changes.items() if v is not None}
        if self.profile and changes:
            changes["name"] = f"{self.profile}*"
        return base.with_(**changes)


def _nic(value: Any) -> Any:
    return {"profile": value} if isinstance(value, str) else value


Nic = Annotated[NicSpec, BeforeValidator(_nic)]


class HostNics(_Spec):
    """``host_nics: [{hosts: [0, 15], nic: roce-200}]``: other NICs for a range of hosts (inclusive)."""

    hosts: Annotated[list[_count(MAX_GPUS - 1, 0)], Field(min_length=2, max_length=2)]
    nic: Nic


class UplinkSpec(LinkSpec):
    """Leaf-to-spine cables: ``count`` parallel cables between every leaf and every spine."""

    count: _count(MAX_CABLES) = 1


class NicOverride(_Spec):
    """One NIC with a bandwidth different from the fabric default (a slow or upgraded NIC)."""

    host: _count(MAX_GPUS - 1, 0)
    nic: _count(MAX_PER_HOST - 1, 0) = 0
    bandwidth: Bandwidth


def _check_size(gpus: int, links: int) -> None:
    if gpus > MAX_GPUS or links > MAX_LINKS:
        raise ValueError(f"fabric too large: {gpus:,} GPUs and about {links:,} links (limits: {MAX_GPUS:,} GPUs, "
                         f"{MAX_LINKS:,} links)")

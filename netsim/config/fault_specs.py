"""The ``faults:`` and ``stragglers:`` sections: timed link, NIC, switch and GPU faults, and drawn slow GPUs.

Names are checked here only for shape; whether they exist on the fabric (and whether a slowed GPU
runs a training job) is checked when they are resolved (:mod:`netsim.engine.faults`,
:mod:`netsim.experiment.faultplan`), with the same YAML paths.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, field_validator, model_validator

from netsim.errors import did_you_mean, shorten
from netsim.spectypes import MAX_GPUS, Time, _count, _FieldError, _Spec

#: Most down/up pairs one ``flap`` entry may stand for (``count``, or the flaps before ``until``).
MAX_FLAPS = 10_000
#: Largest slowdown factor of a GPU (compute takes this many times longer).
MAX_FACTOR = 1000.0

_TARGETS = ("link", "nic", "switch", "gpu")


def _gpu_ref(value: Any) -> int | str:
    """A GPU: its global index (0 .. n_gpus-1) or its name (``h1.gpu2``)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected a GPU index (an integer from 0) or a GPU name like h1.gpu2, got {shorten(value)}")
    if isinstance(value, int) and not 0 <= value < MAX_GPUS:
        raise ValueError(f"expected a GPU index from 0 to {MAX_GPUS - 1:,}, got {value}")
    if isinstance(value, str) and not value.strip():
        raise ValueError("expected a GPU index or a GPU name like h1.gpu2, got an empty string")
    return value


Factor = Annotated[float, Field(ge=1, le=MAX_FACTOR)]


class FaultSpec(_Spec):
    """One timed fault: ``{at: 2ms, link: leaf0-spine1, action: down}``.

    Targets (exactly one): ``link`` names a cable by its end nodes, ``a-b`` (both directions) or
    ``a->b`` (one), with ``#k`` for the k-th of parallel cables; ``nic`` names a NIC (``h3.nic0``:
    every port, both directions); ``switch`` a switch (``spine1``, ``leaf0``: every link of it,
    both directions); ``gpu`` a GPU by global index (``5``) or name (``h1.gpu2``).

    Actions: ``down`` sets capacity to 0, ``degrade`` to ``fraction`` of nominal, ``up`` back to
    nominal; ``flap`` takes the target down for ``down_for`` every ``period`` from ``at``, ``count``
    times or until ``until`` (expanded into down/up pairs). A GPU is ``slow``: every compute task it
    starts at or after ``at`` takes ``factor`` (≥ 1) times longer, until an ``up`` restores it.
    """

    at: Time
    link: str | None = None
    nic: str | None = None
    switch: str | None = None
    gpu: Annotated[int | str, BeforeValidator(_gpu_ref)] | None = None
    action: Literal["down", "up", "degrade", "flap", "slow"]
    fraction: Annotated[float, Field(gt=0, lt=1)] | None = None
    #: ``slow``: how many times longer the GPU's compute takes (1 = nominal).
    factor: Factor | None = None
    #: ``flap``: one down/up cycle, and how long of it the target is down (0 < down_for < period).
    period: Time | None = None
    down_for: Time | None = None
    #: ``flap``: how many cycles, or the time before which the last cycle starts (one of the two).
    count: _count(MAX_FLAPS) | None = None
    until: Time | None = None

    @model_validator(mode="after")
    def _target(self) -> FaultSpec:
        given = [t for t in _TARGETS if getattr(self, t) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of link (a cable: leaf0-spine1, leaf0->spine1), nic (h3.nic0), "
                             "switch (spine1) or gpu (5 or h1.gpu2)")
        if (self.action == "degrade") != (self.fraction is not None):
            raise ValueError("fraction (0 < fraction < 1 of nominal capacity) goes with action degrade, and only with it")
        if given[0] == "gpu" and self.action not in ("slow", "up"):
            raise _FieldError(f"a GPU is slowed (action: slow, with factor ≥ 1) or restored (action: up), not "
                              f"{self.action}: down, degrade and flap are for link, nic and switch", "action")
        if self.action == "slow" and given[0] != "gpu":
            raise _FieldError("action slow goes with gpu (a slow GPU: its compute takes factor times longer); "
                              "a slow cable or NIC is action degrade with a fraction", "action")
        if (self.action == "slow") != (self.factor is not None):
            raise ValueError("factor (≥ 1: the GPU's compute takes factor times longer) goes with action slow, "
                             "and only with it")
        self._check_flap()
        return self

    def _check_flap(self) -> None:
        extra = [k for k in ("period", "down_for", "count", "until") if getattr(self, k) is not None]
        if self.action != "flap":
            if extra:
                raise _FieldError(f"{extra[0]} goes with action flap, and only with it", extra[0])
            return
        for key in ("period", "down_for"):
            if not getattr(self, key):
                raise ValueError("action flap needs period and down_for above 0 (e.g. period: 2ms, down_for: "
                                 "0.5ms): the target is down down_for of every period")
        if self.down_for >= self.period:
            raise _FieldError(f"down_for ({self.down_for:g} s) must be shorter than period ({self.period:g} s): "
                              "the target comes back up within each period", "down_for")
        if (self.count is None) == (self.until is None):
            raise ValueError("action flap needs exactly one of count (how many down/up cycles) or until (no cycle "
                             "starts at or after this time)")
        if self.until is not None:
            if self.until <= self.at:
                raise _FieldError(f"until ({self.until:g} s) must be after at ({self.at:g} s)", "until")
            if self.flaps > MAX_FLAPS:
                raise _FieldError(f"{self.flaps:,} flaps from at to until: at most {MAX_FLAPS:,} per entry (a "
                                  "longer period, or a later at, or an earlier until)", "until")

    @property
    def target(self) -> tuple[str, int | str]:
        """(kind, name) of what the fault hits: ``("link", "leaf0-spine1")``, ``("gpu", 5)``."""
        kind = next(t for t in _TARGETS if getattr(self, t) is not None)
        return kind, getattr(self, kind)

    @property
    def flaps(self) -> int:
        """``flap``: the number of down/up cycles (``count``, or the cycles starting before ``until``)."""
        if self.count is not None:
            return self.count
        if self.until is None:
            return 0
        # a cycle starting within a rounding error of until does not count (10ms / 2ms is 5, not 6)
        return max(1, math.ceil((self.until - self.at) / self.period * (1 - 1e-12)))


class LognormalFactor(_Spec):
    """Factors ``median · exp(sigma · Z)``, Z standard normal; a draw below 1 counts as 1 (nominal)."""

    distribution: Literal["lognormal"]
    median: Factor
    sigma: Annotated[float, Field(gt=0, le=5)]


class UniformFactor(_Spec):
    """Factors uniform on ``[low, high]``."""

    distribution: Literal["uniform"]
    low: Factor
    high: Factor

    @model_validator(mode="after")
    def _ordered(self) -> UniformFactor:
        if self.low > self.high:
            raise _FieldError(f"low ({self.low:g}) must not be above high ({self.high:g})", "low")
        return self


_DISTRIBUTIONS = ("lognormal", "uniform")


def _factor_kind(value: Any) -> str:
    """The union member of a factor (bracketed: error locations drop it, netsim.config.validation)."""
    if isinstance(value, dict):
        return f"[{value.get('distribution', '')}]"
    return f"[{getattr(value, 'distribution', 'number')}]"


class StragglerSpec(_Spec):
    """``stragglers: {count: 2, factor: 1.3}``: slow GPUs drawn from the run seed.

    ``count`` GPUs (or ``fraction`` of them, at least one) are drawn at random among the GPUs that
    run a training job; each computes ``factor`` times slower from ``at`` on: a fixed factor, or one
    drawn per GPU (``{distribution: lognormal, median: 1.3, sigma: 0.1}`` or ``{distribution:
    uniform, low: 1.1, high: 1.5}``). The same seed draws the same GPUs and factors; they are listed
    in the manifest and in ``fault_costs.parquet``.
    """

    #: How many slow GPUs (or ``fraction``: that share of the training GPUs, rounded, at least one).
    count: _count(MAX_GPUS) | None = None
    fraction: Annotated[float, Field(gt=0, le=1)] | None = None
    #: How many times longer their compute takes: a number ≥ 1, or a distribution drawn per GPU.
    factor: Annotated[Annotated[Factor, Tag("[number]")] | Annotated[LognormalFactor, Tag("[lognormal]")]
                      | Annotated[UniformFactor, Tag("[uniform]")], Discriminator(_factor_kind)]
    #: When they become slow (compute tasks starting at or after it).
    at: Time = 0.0

    @field_validator("factor", mode="before")
    @classmethod
    def _known_distribution(cls, v: Any) -> Any:
        if isinstance(v, dict) and v.get("distribution") not in _DISTRIBUTIONS:
            raise _FieldError(f"unknown distribution {shorten(v.get('distribution'))}; valid: "
                              f"{', '.join(_DISTRIBUTIONS)}{did_you_mean(v.get('distribution'), _DISTRIBUTIONS)}",
                              "distribution")
        return v

    @model_validator(mode="after")
    def _how_many(self) -> StragglerSpec:
        if (self.count is None) == (self.fraction is None):
            raise ValueError("give exactly one of count (how many slow GPUs) or fraction (0 < fraction ≤ 1 of the "
                             "GPUs that run training)")
        return self

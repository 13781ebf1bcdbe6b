"""SimPy as the engine's clock: an environment that counts its steps, and events with a priority.

Everything here uses SimPy's public API: :class:`Wakeup` is an event type of the kind SimPy itself
defines (``simpy.events.Timeout`` is one), triggered at creation and scheduled with a priority, so
that work can run after every ordinary event of its instant.
"""

from __future__ import annotations

import math

import simpy
from simpy.events import NORMAL

from netsim.interrupts import PENDING, check

#: Priority of a fabric's per-instant flush: after every NORMAL event of the same instant.
FLUSH_PRIORITY = NORMAL + 1
#: Completion timers run after every NORMAL event of their instant and before its flush.
TIMER_PRIORITY = NORMAL + 0.5


class Environment(simpy.Environment):
    """A SimPy environment that counts the events it processes (for events/s in benchmarks).

    ``events_processed`` adds the events an executor processed without SimPy (see
    :attr:`extra_events`).
    """

    def __init__(self, initial_time: float = 0.0):
        super().__init__(initial_time)
        self._steps = 0
        #: Events processed by executors outside SimPy's schedule (set by them).
        self.extra_events = 0

    def step(self) -> None:
        """Process the next event (counted).

        CORRECTNESS: a Ctrl-C whose exception was swallowed (see :mod:`netsim.interrupts`) is raised
        again here, so that it stops the run rather than being lost."""
        if PENDING:
            check()
        self._steps += 1
        super().step()

    @property
    def events_processed(self) -> int:
        """Events processed so far: SimPy's and the executors'."""
        return self._steps + self.extra_events


def delay_to(env: simpy.Environment, t: float) -> float:
    """The delay that brings SimPy's clock from ``env.now`` to ``t`` itself, or as close below it as
    it can get in one step (then one more step, from closer by, lands on ``t``: callers loop).

    CORRECTNESS: SimPy adds the delay to ``now``; ``now + (t - now)`` can miss ``t`` by an ulp when
    ``now < t / 2`` (the difference is rounded), which would put an event the engine computed for
    ``t`` after the others of its instant. Landing early and stepping again never reorders them.
    """
    now, t = float(env.now), float(t)
    if t <= now:
        return 0.0
    delay = t - now
    if now + delay == t:
        return delay
    # the sums move on t's grid: a few candidates a grid step or two around the rounded difference
    step = math.ulp(t)
    below = None
    for k in (-2, -1, 1, 2):
        cand = delay + k * step
        if cand <= 0.0:
            continue
        landed = now + cand
        if landed == t:
            return cand
        if landed < t and (below is None or cand > below):
            below = cand
    return below if below is not None else delay


class Wakeup(simpy.events.Event):
    """An event triggered at creation and processed ``delay`` from now with ``priority`` (lower first
    among events of one instant; ``NORMAL`` is SimPy's ordinary priority), with ``callback``."""

    def __init__(self, env: simpy.Environment, delay: float, priority: float, callback=None, value=None):
        super().__init__(env)
        self._ok = True  # (what simpy.events.Timeout does: the event is triggered as it is made)
        self._value = value
        if callback is not None:
            self.callbacks.append(callback)
        env.schedule(self, priority, delay)

"""The reference executor: runs a :class:`~netsim.engine.model.Schedule` message by message on a Fabric.

It is the oracle the compiled executor is held to: short, and as plain as SimPy allows. A task is
released when its last dependency is done; a SEND is posted with :meth:`Fabric.send` and is done
when its arrival event fires, a DELAY is a timeout, a JOIN is done at once. Successors released by
one completion are handled in task order; completions of one instant in the order SimPy processes
their events (the order they were scheduled).
"""

from __future__ import annotations

import numpy as np
import simpy

from netsim.engine.model import DELAY, SEND, Schedule


class ScheduleRun:
    """One schedule running on a fabric: ``times[i]`` is when task ``i`` was done (NaN until then),
    ``done`` fires when every task is."""

    def __init__(self, env: simpy.Environment, fabric, schedule: Schedule):
        schedule.check()
        self.env, self.fabric, self.schedule = env, fabric, schedule
        self.times = np.full(len(schedule), np.nan)
        self.done = env.event()
        self._left = np.diff(schedule.dep_ptr)
        self._succ_ptr, self._succ_idx = schedule.successors()
        self._conns = schedule.connections.connections()
        self._kind = schedule.kind.tolist()
        self._conn = schedule.conn.tolist()
        self._amount = schedule.amount.tolist()
        self._pending = len(schedule)

    def start(self, roots: np.ndarray | None = None) -> ScheduleRun:
        """Release every task with no dependency (now)."""
        if self._pending == 0:
            self.done.succeed()
            return self
        for task in np.flatnonzero(self._left == 0).tolist() if roots is None else roots:
            self._release(task)
        return self

    def _release(self, task: int) -> None:
        kind = self._kind[task]
        if kind == SEND:
            c = self._conns[self._conn[task]]
            event = self.fabric.send(c.src, c.dst, self._amount[task], c)
        elif kind == DELAY:
            event = self.env.timeout(self._amount[task])
        else:
            self._finish(task)
            return
        event.callbacks.append(lambda _event, task=task: self._finish(task))

    def _finish(self, task: int) -> None:
        self.times[task] = self.env.now
        self._pending -= 1
        last = self._pending == 0  # (a successor finishing inside this call may be the last task)
        left = self._left
        for succ in self._succ_idx[self._succ_ptr[task]:self._succ_ptr[task + 1]].tolist():
            left[succ] -= 1
            if left[succ] == 0:
                self._release(succ)
        if last:
            self.done.succeed()


def run_schedule(env: simpy.Environment, fabric, schedule: Schedule) -> ScheduleRun:
    """Start ``schedule`` on ``fabric`` now; the returned run's ``done`` event fires at its end."""
    return ScheduleRun(env, fabric, schedule).start()

"""Progress of a long single run on the terminal: a watcher thread that reads the simulation's clock.

The CLI hands :func:`netsim.experiment.run.run_experiment` an ``on_start`` callback; it receives the
run's environment and its list of finished collective calls, and a thread reads ``env.now`` and the
length of that list a few times a second. CORRECTNESS: the watcher only reads; it schedules no
event and touches no state, so every result (event counts, same-instant order, tables) is the one a
run without it produces.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Self

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from netsim import units

#: A run shorter than this shows no progress at all (no flicker for the quick ones).
SHOW_AFTER_S = 1.0
#: Seconds between two readings of the clock.
POLL_S = 0.25


class _SimColumn(ProgressColumn):
    """Simulated time reached and how fast it advances (simulated per wall-clock second)."""

    def render(self, task: Task) -> Text:
        now, wall = task.fields.get("sim_s", 0.0), task.fields.get("wall_s", 0.0)
        rate = f" ({units.format_time(now / wall, 3)}/s)" if wall > 0 and now > 0 else ""
        return Text(f"sim {units.format_time(now, 4)}{rate}")


class RunProgress:
    """Watch one run: ``with RunProgress(console, calls, show) as p: run_experiment(spec, on_start=p.attach)``.

    Parameters
    ----------
    console:
        Where the bar goes (the CLI's stderr console).
    calls:
        Collective calls the run will make (the pre-flight estimate's ``calls``): the bar's total and
        the ETA. 0 when unknown: then only simulated time and its rate are shown.
    show:
        False (not a terminal, ``--quiet``): nothing is started at all.
    """

    def __init__(self, console: Console, calls: int, show: bool, *, after_s: float = SHOW_AFTER_S):
        self.console, self.calls, self.show, self.after_s = console, calls, show, after_s
        self._env: Any = None
        self._records: list = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.perf_counter()

    def attach(self, env: Any, records: list) -> None:
        """``on_start`` of the runner: the environment to read and the calls finished so far."""
        self._env, self._records = env, records

    def __enter__(self) -> Self:
        self._t0 = time.perf_counter()
        if self.show:
            self._thread = threading.Thread(target=self._watch, name="netsim-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        """Wait ``after_s``, then redraw the bar until the run ends (it is cleared then)."""
        if self._stop.wait(self.after_s):
            return
        columns = [TextColumn("simulating"), BarColumn(bar_width=20), TextColumn("{task.completed:,.0f}/{task.total:,.0f} calls"),
                   _SimColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
        if not self.calls:
            columns = [TextColumn("simulating"), _SimColumn(), TimeElapsedColumn()]
        with Progress(*columns, console=self.console, transient=True, auto_refresh=False) as progress:
            task = progress.add_task("run", total=self.calls or None, sim_s=0.0, wall_s=0.0)
            while True:
                env = self._env  # None while the topology is built and ranks placed
                progress.update(task, completed=min(len(self._records), self.calls),
                                sim_s=float(env.now) if env is not None else 0.0,
                                wall_s=time.perf_counter() - self._t0, refresh=True)
                if self._stop.wait(POLL_S):
                    return

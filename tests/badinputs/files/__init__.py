"""Bad-input cases for the files a run reads besides the experiment YAML (issue 39), one module per surface.

Each module's ``cases()`` returns its :class:`~tests.badinputs.harness.Case` list; its ``kind`` names the
surface (``trace``, ``synth``, ``convert``, ``chakra``, ``schedule``, ``moe``, ``routes``), so
``python -m tests.badinputs --kind chakra`` runs one surface.
"""

from __future__ import annotations

from tests.badinputs.files import chakra, convert, moe, routes, schedules, sweeps, traces

SURFACES = (traces, convert, chakra, schedules, moe, routes, sweeps)


def file_cases() -> list:
    """Every surface's cases, in a fixed order."""
    return [case for module in SURFACES for case in module.cases()]

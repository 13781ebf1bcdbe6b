"""This process's peak resident memory.

Not ``getrusage(RUSAGE_SELF).ru_maxrss``: Linux keeps that across ``exec``, so a process started by
a large one (pytest after ten minutes of tests, 2 GiB) reports its parent's peak when its own is
smaller. ``VmHWM`` in ``/proc/self/status`` belongs to this process's memory map alone.
"""

from __future__ import annotations

import resource


def peak_rss_bytes() -> int:
    """Peak resident set of this process since its ``exec`` (``ru_maxrss`` where there is no /proc)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

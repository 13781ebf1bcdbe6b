"""The engine's kernels: written once as Python over numpy arrays, compiled by numba when a process needs speed.

Modules that hold kernels (:mod:`netsim.solver.bottleneck`, :mod:`netsim.engine.table`,
:mod:`netsim.engine.dag`) decorate them with :func:`njit` and call each other's kernels by their
module-level names; other code calls them through their module (``dag.advance(...)``), never through
a name it imported.

Loading numba costs a process about a second even when numba's on-disk cache holds every kernel
(its import, its runtime, the cached libraries), and a 16-GPU ring runs in Python in less. So the
kernels start as their Python functions, and the executors :func:`charge` the messages they are
about to run: once a process has more than ``NETSIM_JIT_AFTER`` messages to run (default
:data:`PYTHON_MESSAGES`; 0 compiles at the first one), :func:`compile_kernels` imports numba, wraps
every kernel in a dispatcher (``cache=True``: compiled once per machine) and puts the dispatchers in
the kernel modules in place of the functions. CORRECTNESS: both run the same code in IEEE float64
(no fastmath), so a run's results are bit for bit the same either way (tests/test_jit.py).

``NETSIM_NO_NUMBA`` set, or numba missing: :data:`AVAILABLE` is False and the engine uses the
reference executor and the numpy solver instead (see :data:`netsim.solver.COMPILED`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

#: numba is installed and not turned off with ``NETSIM_NO_NUMBA`` (found without importing it).
AVAILABLE = not os.environ.get("NETSIM_NO_NUMBA") and importlib.util.find_spec("numba") is not None

#: Messages a process runs with the Python kernels before it loads numba: about the work that costs
#: as much as loading numba and its cached kernels (~1 s on a 2-core VM; 480 messages of a 16-GPU
#: ring take 0.2-0.4 s in Python).
PYTHON_MESSAGES = 2_000

#: (module name, function, numba options) of every kernel, in definition order.
_KERNELS: list[tuple[str, object, dict]] = []
_state = {"compiled": False, "python_messages": 0}


def njit(**options):
    """Register the decorated function as a kernel compiled with numba's ``options``; it stays the
    Python function until :func:`compile_kernels`."""
    def register(func):
        _KERNELS.append((func.__module__, func, options))
        return func
    return register


#: A kernel that allocates no array (it reads and writes only the arrays it is given, and returns
#: none): numba compiles it without its runtime's reference counting. perf: otherwise every call
#: takes and drops a reference to each array argument, an atomic increment and decrement apiece;
#: on the per-message path (a ring step's flows inserted, solved, accounted, removed) that was half
#: of the event loop's time (a 1,024-GPU ring, 2.1 M messages: its loop 15.4 -> 2.5-3.5 CPU-s).
NO_REFCOUNT = {"cache": True, "nogil": True, "_nrt": False}
#: A small kernel on the per-message path that may grow a buffer (so it needs numba's runtime):
#: inlined into its callers, which saves the call and its reference counting.
INLINED = {"cache": True, "nogil": True, "inline": "always"}


def compiled() -> bool:
    """Whether the kernel modules hold numba dispatchers (this process loaded numba)."""
    return _state["compiled"]


def _budget() -> int:
    return int(os.environ.get("NETSIM_JIT_AFTER", PYTHON_MESSAGES))


def will_compile(messages: int | None = None) -> bool:
    """Whether running ``messages`` more messages (None: any number) loads numba's kernels."""
    if not AVAILABLE:
        return False
    return _state["compiled"] or messages is None or _state["python_messages"] + messages > _budget()


def charge(messages: int) -> None:
    """An executor is about to run ``messages`` messages: compile the kernels first when the
    process's messages would pass ``NETSIM_JIT_AFTER`` (only the speed depends on it)."""
    if _state["compiled"] or not AVAILABLE:
        return
    if _state["python_messages"] + messages > _budget():
        compile_kernels()
    else:
        _state["python_messages"] += messages


def compile_kernels() -> bool:
    """Import numba and put a dispatcher in place of every kernel in its module (and in the other
    kernel modules that imported it by name); numba compiles each at its first call, or loads it from
    its on-disk cache. Returns whether the kernels are compiled (False without numba)."""
    if _state["compiled"] or not AVAILABLE:
        return _state["compiled"]
    try:
        import numba  # perf: ~0.5 s to import and ~1 s to start its runtime; only for runs that repay it
    except ImportError:  # installed but broken: the Python kernels give the same results
        return False
    dispatchers = {id(func): numba.njit(**options)(func) for _module, func, options in _KERNELS}
    for name in dict.fromkeys(module for module, _func, _options in _KERNELS):
        namespace = vars(sys.modules[name])
        for key, value in list(namespace.items()):
            if id(value) in dispatchers and dispatchers[id(value)].py_func is value:
                namespace[key] = dispatchers[id(value)]
    _state["compiled"] = True
    _drop_stale(list(dispatchers.values()))
    return True


def _drop_stale(dispatchers: list) -> None:
    """Forget compiled kernels older than any kernel module: numba's on-disk cache checks only a
    kernel's own source file, and kernels call (and numba inlines) the other modules' kernels, so
    after an edit of one module alone it would load kernels built with the old code."""
    changed = max(Path(sys.modules[module].__file__).stat().st_mtime for module, _f, _o in _KERNELS)
    for kernel in dispatchers:
        try:
            index = Path(kernel._cache._cache_file._index_path)
        except AttributeError:  # a kernel without a cache, or a numba without this cache layout
            continue
        try:
            if index.is_file() and index.stat().st_mtime < changed:
                index.unlink()
        except OSError:  # a read-only or shared cache: leave it to numba
            pass


def kernel_index(kernel) -> Path | None:
    """The index file of ``kernel``'s entries in numba's on-disk cache (None before
    :func:`compile_kernels`, or with a numba without this cache layout)."""
    try:
        return Path(kernel._cache._cache_file._index_path)
    except AttributeError:
        return None

"""Executors for sweeps: run a function over many runs serially, in local processes, or on Dask.

Each executor's ``map(fn, items, on_lost=None)`` yields ``fn(item)`` for every item as it
completes (in any order). ``fn`` must be a module-level function (sweeps wrap a run's failures into
outcomes), but an item can still be *lost*: the worker process running it died (killed by a signal,
``os._exit``, a segfault, the out-of-memory killer) or ``fn`` raised. ``on_lost(item, lost)`` turns
a lost item into a result, which ``map`` yields in its place, and the other items go on (a dead
worker is replaced); ``lost`` is a :class:`Lost`, whose text says what happened ("the worker
process died (killed by signal 9, SIGKILL)", or the error ``fn`` raised) and whose ``died`` and
``traceback`` say how. Without ``on_lost``, ``map`` stops at a lost item and raises the
:class:`Lost` (the serial executor: what ``fn`` raised).

When the consumer stops early (Ctrl-C, SIGTERM, an error), closing the iterator ``map`` returned
stops the workers: local ones get SIGTERM, then SIGKILL after a short grace, and are joined; a Dask
client and its LocalCluster are closed. Local workers never outlive the driver: they ignore SIGINT
(Ctrl-C reaches the whole foreground process group; the driver stops them) and, on Linux, the kernel
kills them when the driver dies, even by SIGKILL (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import wait
from typing import Any

from netsim.errors import NetsimError

#: How long stopped workers get to exit on SIGTERM before they are killed.
GRACE_S = 1.0


class Lost(NetsimError):
    """An item without a result: the worker process running it died (``died``), or ``fn`` raised
    (``traceback`` is then the worker's)."""

    def __init__(self, message: str, *, died: bool = False, traceback: str = ""):
        super().__init__(message)
        self.died = died
        self.traceback = traceback


def _raised(exc: BaseException) -> Lost:
    return Lost(f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())


def _report(item: Any, lost: Lost, on_lost: Callable[[Any, Lost], Any] | None) -> Any:
    if on_lost is None:
        raise lost
    return on_lost(item, lost)


class SerialExecutor:
    """Runs everything in this process, one after another (what ``netsim run`` uses)."""

    name = "serial"
    shared_fs = True  #: runs may write their results themselves

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any],
            on_lost: Callable[[Any, Lost], Any] | None = None) -> Iterator[Any]:
        """``fn(item)`` for each item, in order (without ``on_lost``, what ``fn`` raises propagates)."""
        for item in items:
            try:
                result = fn(item)
            except Exception as exc:  # noqa: BLE001 - the item is lost, the others go on
                if on_lost is None:
                    raise
                result = on_lost(item, _raised(exc))
            yield result


class LocalExecutor:
    """A pool of ``workers`` local processes, each running one item at a time.

    Workers are forked when this process runs no other thread (they start at once, with netsim
    already imported; an item and its result travel by pickle, so no state leaks between items),
    and spawned otherwise (forking a threaded process can deadlock).
    """

    name = "local"
    shared_fs = True

    def __init__(self, workers: int):
        self.workers = max(1, int(workers))

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any],
            on_lost: Callable[[Any, Lost], Any] | None = None) -> Iterator[Any]:
        """``fn(item)`` for each item, as the workers finish them (see the module docstring)."""
        items = list(items)
        if not items:
            return
        fork = threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
        pool = _Pool(multiprocessing.get_context("fork" if fork else "spawn"), fn, min(self.workers, len(items)))
        finished = False
        try:
            yield from pool.imap(items, on_lost)
            finished = True
        finally:
            pool.close() if finished else pool.terminate()


class _Worker:
    """A worker process, the driver's end of its pipe, and the index of the item it runs (or None)."""

    def __init__(self, process: multiprocessing.process.BaseProcess, conn):
        self.process = process
        self.conn = conn
        self.index: int | None = None


class _Pool:
    """Worker processes fed one item at a time through a pipe each, so that the driver always knows
    which item a worker holds: when one dies, that item is lost and the worker replaced.

    (concurrent.futures.ProcessPoolExecutor cannot say which item a dead worker held, and breaks.)"""

    def __init__(self, context, fn: Callable[[Any], Any], size: int):
        self.context = context
        self.fn = fn
        self.size = size
        self.workers: list[_Worker] = []
        self.resent: set[int] = set()  #: items given to a worker found dead before it took them
        self.started = 0

    def imap(self, items: list[Any], on_lost: Callable[[Any, Lost], Any] | None) -> Iterator[Any]:
        pending = deque(range(len(items)))
        self._feed(pending, items)
        while busy := [w for w in self.workers if w.index is not None]:
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
            for worker in busy:
                if worker.conn not in ready and worker.process.sentinel not in ready:
                    continue
                index, reply = worker.index, self._receive(worker)
                worker.index = None
                if isinstance(reply, Lost) and reply.died:
                    self._bury(worker)
                self._feed(pending, items)  # perf: the workers go on while the driver handles the result
                yield _report(items[index], reply, on_lost) if isinstance(reply, Lost) else reply

    def _feed(self, pending: deque[int], items: list[Any]) -> None:
        """Give pending items to idle workers, starting workers up to ``size``."""
        while pending:
            worker = next((w for w in self.workers if w.index is None), None)
            if worker is None:
                if len(self.workers) >= self.size:
                    return
                worker = self._start()
            worker.index = pending.popleft()
            try:
                worker.conn.send(items[worker.index])
            except (BrokenPipeError, ConnectionResetError):
                if worker.index in self.resent:
                    continue  # the item stays with the dead worker: it is lost (bounded: no endless restarts)
                # it died idle, before it got the item: another worker runs it
                self.resent.add(worker.index)
                pending.appendleft(worker.index)
                self._bury(worker)

    def _start(self) -> _Worker:
        here, there = self.context.Pipe()
        self.started += 1
        process = self.context.Process(target=_work, args=(self.fn, there, os.getpid()), daemon=True,
                                       name=f"netsim-worker-{self.started}")
        # CORRECTNESS: SIGINT/SIGTERM stay blocked until the worker ignores them (it inherits the mask),
        # and until the driver knows the worker (so that an interrupt here still stops it).
        mask = _block_signals()
        try:
            process.start()
            worker = _Worker(process, here)
            self.workers.append(worker)
            there.close()
        finally:
            _restore_signals(mask)
        return worker

    def _receive(self, worker: _Worker) -> Any:
        """The worker's reply: its result, or a Lost (``fn`` raised, or the worker died)."""
        try:
            ok, value = worker.conn.recv()
        except (EOFError, OSError):
            return Lost(_death(self._reap(worker)), died=True)
        except Exception as exc:  # noqa: BLE001 - a result that does not unpickle here
            return Lost(f"the result could not be read: {type(exc).__name__}: {exc}",
                        traceback=traceback.format_exc())
        if ok:
            return value
        message, tb = value
        return Lost(message, traceback=tb)

    def _reap(self, worker: _Worker) -> int | None:
        """Wait for a worker whose pipe closed; its exit code."""
        worker.process.join(5)
        if worker.process.exitcode is None:
            worker.process.kill()
            worker.process.join()
        return worker.process.exitcode

    def _bury(self, worker: _Worker) -> None:
        self._reap(worker)
        worker.conn.close()
        self.workers.remove(worker)

    def close(self) -> None:
        """Tell the (idle) workers to exit, and wait for them."""
        for worker in self.workers:
            try:
                worker.conn.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + GRACE_S
        for worker in self.workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
        self.terminate()

    def terminate(self) -> None:
        """Stop every worker: SIGTERM, SIGKILL after ``GRACE_S``; join them."""
        for worker in self.workers:
            if worker.process.exitcode is None:
                worker.process.terminate()
        deadline = time.monotonic() + GRACE_S
        for worker in self.workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.exitcode is None:
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self.workers.clear()


def _death(exitcode: int | None) -> str:
    """What happened to a worker process, from its exit code."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown signal"
        return f"the worker process died (killed by signal {-exitcode}, {name})"
    if exitcode is None:
        return "the worker process stopped answering"
    return f"the worker process died (exit status {exitcode})"


def _block_signals() -> set | None:
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def _restore_signals(mask: set | None) -> None:
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _unblock_signals() -> None:
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _die_with(parent: int) -> None:
    """Make the kernel kill this process when ``parent`` dies (Linux), and exit if it already has."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the driver died before prctl: nobody would stop this worker
        os._exit(1)


def _work(fn: Callable[[Any], Any], conn, parent: int) -> None:
    """A worker: run ``fn`` on each item the driver sends, and send back (True, result) or
    (False, (error, traceback)); exit on None or when the driver goes away."""
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the driver's to handle: it stops us
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a fork inherits the driver's handler, which raises
    _unblock_signals()
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        if item is None:
            return
        try:
            reply = (True, fn(item))
        except Exception as exc:  # noqa: BLE001 - the driver records it against the item
            reply = (False, (f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        try:
            conn.send(reply)
        except OSError:
            return
        except Exception as exc:  # noqa: BLE001 - a result that does not pickle
            conn.send((False, (f"the result could not be sent back: {type(exc).__name__}: {exc}",
                               traceback.format_exc())))


class DaskExecutor:
    """Submits every run to a Dask cluster: an existing scheduler (``address``, e.g. one started by
    dask-jobqueue on SLURM) or a ``LocalCluster`` of ``workers`` single-threaded processes.

    Results are gathered to this process (the driver), which writes them. A worker that dies is
    restarted by Dask, which retries its task and finally gives up on it (``KilledWorker``): that
    item is lost, the others go on.
    """

    name = "dask"
    shared_fs = False  #: workers may be on other machines: results are gathered and written by the driver

    def __init__(self, address: str | None = None, workers: int = 2):
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise NetsimError("the dask executor needs dask.distributed: pip install 'netsim-fabric[dask]'") from None
        self.address = address
        self.workers = max(1, int(workers))

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any],
            on_lost: Callable[[Any, Lost], Any] | None = None) -> Iterator[Any]:
        """``fn(item)`` for each item, gathered as the cluster finishes them."""
        from distributed import Client, KilledWorker, LocalCluster
        from distributed import as_completed as dask_completed
        items = list(items)
        if not items:
            return
        cluster = None
        try:
            if self.address:
                client = Client(self.address, timeout="30s")
            else:
                cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
                client = Client(cluster)
        except OSError as exc:
            raise NetsimError(f"cannot reach the Dask scheduler {self.address}: {exc}") from None
        try:
            futures = {client.submit(fn, item, pure=False): item for item in items}
            for future in dask_completed(futures):
                try:
                    result = future.result()
                except KilledWorker:
                    lost = Lost("the worker process died (every Dask worker that ran it died: KilledWorker)", died=True)
                    result = _report(futures[future], lost, on_lost)
                except Exception as exc:  # noqa: BLE001 - fn raised on the worker
                    result = _report(futures[future], _raised(exc), on_lost)
                yield result
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


def make_executor(kind: str, workers: int = 1, scheduler: str | None = None):
    """The executor named ``kind`` (``serial``, ``local``, ``dask``)."""
    if kind == "serial" or (kind == "local" and workers <= 1 and scheduler is None):
        return SerialExecutor()
    if kind == "local":
        return LocalExecutor(workers)
    if kind == "dask":
        return DaskExecutor(scheduler, workers)
    raise NetsimError(f"unknown executor {kind!r}; valid: serial, local, dask")

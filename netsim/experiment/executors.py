"""Executors for sweeps: run a function over many runs serially, in local processes, or on Dask.

Each executor's ``map(fn, items)`` yields ``fn(item)`` for every item as it completes (in any
order). ``fn`` must be a module-level function and never raise (sweeps wrap failures into
outcomes), so a worker's crash is the only way a result goes missing.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from netsim.errors import NetsimError


class SerialExecutor:
    """Runs everything in this process, one after another (what ``netsim run`` uses)."""

    name = "serial"
    shared_fs = True  #: runs may write their results themselves

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        """``fn(item)`` for each item, in order."""
        for item in items:
            yield fn(item)


class LocalExecutor:
    """A pool of ``workers`` local processes.

    Workers are forked when this process runs no other thread (they start at once, with netsim
    already imported; a run's inputs and outputs travel by pickle, so no state leaks between
    runs), and spawned otherwise (forking a threaded process can deadlock).
    """

    name = "local"
    shared_fs = True

    def __init__(self, workers: int):
        self.workers = max(1, int(workers))

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        """``fn(item)`` for each item, as the workers finish them."""
        items = list(items)
        if not items:
            return
        fork = threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if fork else "spawn")
        with ProcessPoolExecutor(max_workers=min(self.workers, len(items)), mp_context=context) as pool:
            futures = [pool.submit(fn, item) for item in items]
            try:
                for future in as_completed(futures):
                    yield future.result()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise


class DaskExecutor:
    """Submits every run to a Dask cluster: an existing scheduler (``address``, e.g. one started by
    dask-jobqueue on SLURM) or a ``LocalCluster`` of ``workers`` single-threaded processes.

    Results are gathered to this process (the driver), which writes them.
    """

    name = "dask"
    shared_fs = False  #: workers may be on other machines: results are gathered and written by the driver

    def __init__(self, address: str | None = None, workers: int = 2):
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise NetsimError("the dask executor needs dask.distributed: pip install 'netsim[dask]'") from None
        self.address = address
        self.workers = max(1, int(workers))

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        """``fn(item)`` for each item, gathered as the cluster finishes them."""
        from distributed import Client, LocalCluster
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
            futures = [client.submit(fn, item, pure=False) for item in items]
            for future in dask_completed(futures):
                yield future.result()
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

"""Time routing's batch API: ``routes()`` of every connection of an all-to-all, and reading a routes CSV.

    python benchmarks/routes.py            # 256 GPUs (ECMP, spray), the 61,440-row table, 1,024 GPUs (ECMP)
    python benchmarks/routes.py --quick    # without the 1,024-GPU case

Fabrics as in benchmarks/scenarios/a2a-*.yaml (one GPU per host, k x k leaf-spine). Each figure is the
best of ``--repeat`` runs in this process, after one warm-up call on ten connections (the fabric's
switch paths are enumerated once per process); peak memory is what numpy and Python allocated during
one more call (under tracemalloc), the batch itself excluded.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netsim.engine.model import ConnectionTable
from netsim.routing import make_routing
from netsim.routing.table import Table
from netsim.topology import leaf_spine


def fabric(k: int):
    return leaf_spine(leaves=k, spines=k, hosts_per_leaf=k, gpus_per_host=1, nics_per_host=1, nic_bandwidth_Bps=50e9,
                      nic_latency_s=1e-6, nic_overhead_s=1e-6, uplink_bandwidth_Bps=50e9, uplink_latency_s=5e-7,
                      intra_bandwidth_Bps=900e9, intra_latency_s=3e-7)


def all_to_all(gpus: int) -> ConnectionTable:
    src, dst = np.divmod(np.arange(gpus * gpus), gpus)
    keep = src != dst
    table = ConnectionTable()
    table.add(src[keep], dst[keep])
    return table


def best(fn, repeat: int, memory: bool = True) -> tuple[float, float, object]:
    """(best seconds of ``repeat`` runs, peak MB of one more run under tracemalloc (which slows it), result)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    peak = float("nan")
    if memory:
        tracemalloc.start()
        fn()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return min(times), peak, out


def routes_case(k: int, policy: str, repeat: int, as_list: bool) -> None:
    topo = fabric(k)
    conns = all_to_all(k * k)
    batch = conns.connections() if as_list else conns
    routing = make_routing(policy, topo, np.random.default_rng(1))
    routing.routes(conns.connections()[:10])
    seconds, peak, table = best(lambda: routing.routes(batch), repeat)
    kind = "list of Connection" if as_list else "ConnectionTable"
    print(f"routes  {k * k:5d} GPUs  {policy:6s} {len(table):>9,} connections ({kind}): {seconds:6.3f} s, "
          f"peak {peak:7.1f} MB, {len(table.link):,} links")


def table_case(repeat: int) -> None:
    topo = fabric(16)
    rng = np.random.default_rng(0)
    rows = ["src,dst,channel,path,path_index"]
    for s in range(256):
        for d in range(256):
            if s // 16 != d // 16:
                k = int(rng.integers(16))
                rows.append(f"{s},{d},0,leaf{s // 16} spine{k} leaf{d // 16}," if (s + d) % 2 else f"{s},{d},0,,{k}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "routes.csv"
        path.write_text("\n".join(rows) + "\n")
        cold, _, _ = best(lambda: Table(topo, np.random.default_rng(0), file=path), 1, memory=False)
        seconds, peak, _ = best(lambda: Table(topo, np.random.default_rng(0), file=path), repeat)
    print(f"table   {len(rows) - 1:,}-row routes CSV (half path names, half indices): {cold:6.3f} s first read "
          f"(with pandas' lazy imports and the fabric's switch paths), {seconds:6.3f} s again, peak {peak:.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 1,024-GPU case")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import pandas  # noqa: F401  (imported by every run that reads a table; not the table's cost)

    table_case(args.repeat)
    for policy in ("ecmp", "spray"):
        routes_case(16, policy, args.repeat, as_list=True)
    if not args.quick:
        routes_case(32, "ecmp", 1, as_list=False)
        routes_case(32, "ecmp", 1, as_list=True)


if __name__ == "__main__":
    main()

"""Benchmark: time per row and worker memory of a statistics pass as N grows.

One zarr array of random float32 rows (``d = 90``, chunks of whole rows) of
the largest N is written once, by the workers (``da.random`` →
``da.to_zarr``); each N reads its first N rows. For each N, ``--repeats``
statistics passes (``--repeats-largest`` for the largest N) run on
``--workers`` single-threaded worker processes, with the page cache dropped
before each pass when possible (root). Reported per N: the median time, the
time per row and its ratio to the time per row at ``--ref-rows`` (default
10⁶; target: at most 1.05 at the largest N), and the workers' peak resident
memory during the passes (VmHWM, reset before each pass; target: flat, i.e.
at most 1.1× the peak at the reference N).

Why M0 = 1000 by default: the pass costs ``N·(M0² + 2·d·M0)`` flops, so at
M0 = 1000 the largest N = 10⁷ is 1.2·10¹³ flops, about 1.5 minutes per
pass on 2 cores at ~140 GFLOP/s, while reading 360 bytes per row stays a few
percent of the compute (the pass is compute-bound, as in use). At the
default M0 = 2000 of ``dxrf bench pass`` one pass at 10⁷ rows would take
about 5 minutes.

Per-row time at small N includes the fixed costs of a pass (graph
submission, the tree reduction, the final merge on the client), so the ratio
at 10⁵ rows is expected above 1; the claim tested is that nothing grows with N
beyond the rows themselves. The peak includes what a worker holds at rest
(about 320 MiB with its imports); the table also shows the rise above it.
With the default worker memory (80% of the machine shared among the workers)
nothing pauses or spills, so a growing peak shows up here rather than as a
slowdown. The defaults take about 5–6 minutes on 2 quiet cores (writing
3.6 GB, three passes at 10⁷ rows); ``--repeats-largest 1`` saves about 3.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

DESCRIPTION = "time per row and peak worker memory of one statistics pass for N = 1e5, 1e6, 1e7"

TARGET_TIME_RATIO = 1.05
TARGET_PEAK_RATIO = 1.10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add this benchmark's options to ``parser``."""
    from ._common import add_zarr_arguments

    parser.add_argument(
        "--n-rows", type=float, nargs="+", default=[1e5, 1e6, 1e7], help="row counts N (default 1e5 1e6 1e7)"
    )
    parser.add_argument(
        "--ref-rows", type=float, default=1e6, help="N whose time per row is the reference (default 1e6)"
    )
    parser.add_argument("--m0", type=int, default=1000, help="random features M0 (default 1000)")
    parser.add_argument(
        "--worker-memory",
        default=None,
        help="memory limit of each worker (default: 80%% of the machine's memory shared among the workers)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="passes per N (median; default 3)")
    parser.add_argument(
        "--repeats-largest", type=int, default=None, help="passes at the largest N (default: --repeats)"
    )
    add_zarr_arguments(parser)


def _client(args: argparse.Namespace) -> tuple[Any, Any]:
    """A client on ``--scheduler`` if given, else on a new LocalCluster (returned too, to close)."""
    from distributed.system import MEMORY_LIMIT

    from ._common import bench_client

    limit = args.worker_memory or int(0.8 * MEMORY_LIMIT / args.workers)  # dxrf's embedded-cluster rule
    return bench_client(args, args.workers, memory_limit=limit, dashboard_address=":0")


def run(args: argparse.Namespace) -> dict:
    """Run the benchmark; print a markdown table and write ``bench-scaling.json`` / ``.md``."""
    import dask.array as da

    import dxrf

    from ._common import (
        bench_workdir,
        close_client,
        drop_page_cache,
        random_rows,
        remove_workdir,
        report,
        store_zarr,
        table,
        worker_memory,
    )

    d, chunk, m0 = args.n_features, args.chunk_rows, args.m0
    sizes = sorted({int(v) for v in args.n_rows})
    if sizes[0] < 1:
        raise ValueError(f"--n-rows must be positive, got {args.n_rows}")
    if args.repeats < 1 or (args.repeats_largest is not None and args.repeats_largest < 1):
        raise ValueError("--repeats and --repeats-largest must be at least 1")
    ref = int(args.ref_rows) if int(args.ref_rows) in sizes else sizes[0]
    largest = sizes[-1]
    fmap = dxrf.RandomFourierFeatures(m0, bandwidth=float(np.sqrt(d)), dtype="float32", random_state=0).fit(
        np.zeros((1, d), dtype=np.float32)
    )
    results: dict[str, Any] = {
        "n_rows": sizes,
        "ref_rows": ref,
        "n_features": d,
        "m0": m0,
        "dtype": "float32",
        "workers": args.workers,
        "threads_per_worker": 1,
        "chunk_rows": chunk,
        "runs": [],
    }
    workdir = bench_workdir(args, "dxrf-bench-scaling-")
    zpath = str(workdir / "X.zarr")
    cluster, client = _client(args)
    try:
        results["zarr_write_s"] = store_zarr(random_rows(largest, d, chunk), zpath)
        Xz = da.from_zarr(zpath)
        limits = {a: s["memory_limit"] for a, s in worker_memory(client).items()}
        results["workers"] = len(limits)
        results["worker_memory_limit"] = max((v or 0) for v in limits.values()) or None
        dxrf.accumulate(Xz[: min(largest, chunk * args.workers)], features=fmap)  # warm up: imports, BLAS, codecs
        cold = not args.warm and drop_page_cache()
        results["cache"] = "cold" if cold else "warm"
        for n in sizes:
            repeats = args.repeats_largest if (n == largest and args.repeats_largest) else args.repeats
            data = Xz[:n]
            peaks: dict[str, int] = {}
            growth = 0  # the most any worker's RSS rose above its value at rest, during one pass
            times = []
            for _ in range(repeats):
                if cold:
                    drop_page_cache()
                rest = worker_memory(client, reset=True)
                t0 = time.perf_counter()
                stats = dxrf.accumulate(data, features=fmap)
                times.append(time.perf_counter() - t0)
                for a, s in worker_memory(client).items():
                    peaks[a] = max(peaks.get(a, 0), s["peak_rss"])
                    growth = max(growth, s["peak_rss"] - rest.get(a, s)["rss"])
            t = statistics.median(times)
            if stats.n != n:
                raise RuntimeError(f"the pass over {n} rows counted {stats.n}")
            results["runs"].append(
                {
                    "n_rows": n,
                    "repeats": repeats,
                    "median_s": t,
                    "times_s": times,
                    "s_per_row": t / n,
                    "gflops": n * (m0 * m0 + 2 * d * m0) / t / 1e9,
                    "peak_rss": peaks,
                    "max_peak_rss": max(peaks.values()),
                    "max_peak_above_rest": growth,
                }
            )
            peak_mib = max(peaks.values()) / 2**20
            print(f"  N={n:>10d}: {t:.2f} s, {t / n * 1e6:.3f} µs/row, peak {peak_mib:.0f} MiB", flush=True)
    finally:
        close_client(cluster, client)
        remove_workdir(args, workdir)

    by_n = {r["n_rows"]: r for r in results["runs"]}
    for r in results["runs"]:
        r["time_per_row_ratio"] = r["s_per_row"] / by_n[ref]["s_per_row"]
        r["peak_ratio"] = r["max_peak_rss"] / by_n[ref]["max_peak_rss"]
    top = by_n[largest]
    results.update(
        {
            "time_per_row_ratio_largest": top["time_per_row_ratio"],
            "peak_ratio_largest": top["peak_ratio"],
            "target_time_ratio": TARGET_TIME_RATIO,
            "target_peak_ratio": TARGET_PEAK_RATIO,
            # getting cheaper per row with N (fixed costs amortised) is not a failure
            "time_per_row_within_target": bool(top["time_per_row_ratio"] <= TARGET_TIME_RATIO),
            "peak_flat": bool(top["peak_ratio"] <= TARGET_PEAK_RATIO),
        }
    )
    rows = [
        [
            r["n_rows"],
            r["repeats"],
            r["median_s"],
            r["s_per_row"] * 1e6,
            r["time_per_row_ratio"],
            r["gflops"],
            r["max_peak_rss"] / 2**20,
            r["max_peak_above_rest"] / 2**20,
            r["peak_ratio"],
        ]
        for r in results["runs"]
    ]
    headers = ["N", "repeats", "median s", "µs / row", f"÷ at N={ref}", "GFLOP/s"]
    headers += ["max worker peak MiB", "above rest MiB", f"peak ÷ at N={ref}"]
    md = table(headers, rows)
    md += (
        f"\n\nM0 = {m0}, d = {d}, float32, {args.workers} workers × 1 thread, zarr chunks of {chunk} rows, "
        f"{results['cache']} page cache. Targets at N = {largest}: time per row ≤ {TARGET_TIME_RATIO}× and "
        f"peak ≤ {TARGET_PEAK_RATIO}× the N = {ref} values: "
        f"time_per_row_within_target = {results['time_per_row_within_target']}, peak_flat = {results['peak_flat']}."
    )
    return report(args.out, "bench-scaling", results, md)

"""Benchmark: one statistics pass over zarr data four times the workers' total memory.

A zarr array of random float32 rows (``d = 90``, chunks of whole rows) of
``--data-gib`` GiB (default 8) is written to a work directory by the workers
themselves (``da.random`` → ``da.to_zarr``: each task draws one chunk and
writes it, so neither the client nor a worker ever holds more than a chunk).
One ``dxrf.accumulate`` pass then runs over it on a LocalCluster of
``--workers`` single-threaded worker processes limited to ``--worker-memory``
each (default 2 × 1 GiB: the data are 4× the cluster's memory). The same pass
over the first ``--in-memory-fraction`` of the rows (default 1/8), persisted
in the workers' memory of a second cluster without the tight limit, gives the
in-memory time per row.

Reported: time per row out of core and in memory and their ratio (target
≤ 1.25), each worker's peak resident memory during the pass (VmHWM, reset just
before it), spilled bytes, and whether any worker was paused, removed or
restarted (scheduler events and worker/nanny logs). The JSON holds the flags
``completed``, ``no_worker_lost``, ``no_pause``, ``peak_below_limit`` and
``ratio_within_target``.

Why M0 = 1000 by default: per row the pass does ``M0² + 2·d·M0`` flops
(1.18 Mflop at M0 = 1000) against 360 bytes read and decompressed, so reading
costs a few percent of the compute and the pass is compute-bound, as it is in
use. At M0 = 1000 the 8 GiB (2.4·10⁷ rows, 2.8·10¹³ flops) take about
3.5 minutes on 2 cores at ~140 GFLOP/s, and the whole benchmark (writing
8 GiB, the out-of-core pass, three in-memory passes over 1/8 of the rows)
about 6–7 minutes. M0 = 2000 would quadruple the compute, while at M0 = 250
reading would cost about as much as the compute (at M0 = 128 the
out-of-core pass took 3× the in-memory time per row).

Distributed's memory thresholds are left at their defaults, as a user would
leave them: for a 1 GiB worker, managed memory beyond ``target`` 0.6 (614 MiB)
is spilled to disk, process memory beyond ``spill`` 0.7 (717 MiB) triggers
spilling, beyond ``pause`` 0.8 (819 MiB) the worker starts no task, and beyond
``terminate`` 0.95 (973 MiB) its nanny kills and restarts it. A worker with
numpy, scipy, zarr and dxrf loaded holds about 320 MiB at rest, so the pass
has about 500 MiB before pausing: the chunk being read (17 MiB at 50 000
rows), a tile buffer (10 000 rows of features: 40 MiB at M0 = 1000), running sums of
about ``8·M0²`` bytes (8 MiB at M0 = 1000) and merges of up to 8 of them, plus any
chunks already read and waiting for their task. Root-task queuing
(``worker-saturation``) limits how many reads run at once, not how many
finished reads wait in memory, so that last term is what this benchmark
watches. The only setting a user is expected to choose is the worker memory
limit; the thresholds in effect are recorded in the JSON.

A worker that stays paused (``--stall-timeout`` seconds, default 120) would
hang the pass, since a paused worker starts no task to free its memory; the
pass is then cancelled and reported as not completed.
"""

from __future__ import annotations

import argparse
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

DESCRIPTION = "one statistics pass over zarr data 4x the workers' memory: time per row vs in memory, peak worker RSS"

TARGET_RATIO = 1.25


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add this benchmark's options to ``parser``."""
    from ._common import add_zarr_arguments

    parser.add_argument("--data-gib", type=float, default=8.0, help="size of the zarr data in GiB (default 8)")
    parser.add_argument(
        "--worker-memory", default="1GiB", help="memory limit of each worker for the out-of-core pass (default 1GiB)"
    )
    parser.add_argument("--m0", type=int, default=1000, help="random features M0 (default 1000)")
    parser.add_argument(
        "--in-memory-fraction",
        type=float,
        default=0.125,
        help="fraction of the rows persisted in memory for the reference pass (default 1/8)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="out-of-core passes (median; default 1)")
    parser.add_argument("--in-memory-repeats", type=int, default=3, help="in-memory passes (median; default 3)")
    parser.add_argument(
        "--stall-timeout",
        type=float,
        default=120.0,
        help="cancel the out-of-core pass when a worker stays paused this many seconds (default 120)",
    )
    add_zarr_arguments(parser)


def _timed_pass(data: Any, fmap: Any, repeats: int, setup: Callable[[], Any] | None) -> tuple:
    """Median seconds, all times, the statistics and None; on failure NaN, [], None and the error."""
    import dxrf

    from ._common import median_time

    try:
        return (*median_time(lambda: dxrf.accumulate(data, features=fmap), repeats, setup), None)
    except Exception as exc:  # a lost worker, a killed task: reported, not raised
        return math.nan, [], None, f"{type(exc).__name__}: {str(exc).strip()[:300]}"


def _watched_pass(
    client: Any, data: Any, fmap: Any, repeats: int, setup: Callable[[], Any] | None, stall_s: float
) -> tuple:
    """:func:`_timed_pass`, cancelled when a worker stays paused for ``stall_s`` seconds.

    A paused worker starts no task; when what fills its memory are inputs
    waiting for tasks on that same worker, it never resumes and the pass would
    never end. Cancelling frees them and the failure is reported.
    """
    from distributed import Future

    from ._common import worker_memory

    box: list = []
    thread = threading.Thread(target=lambda: box.append(_timed_pass(data, fmap, repeats, setup)), daemon=True)
    thread.start()
    paused_since: dict[str, float] = {}
    while thread.is_alive():
        thread.join(1.0)
        states = worker_memory(client)
        now = time.monotonic()
        paused_since = {a: paused_since.get(a, now) for a, st in states.items() if st["status"] == "paused"}
        if paused_since and now - min(paused_since.values()) > stall_s:
            client.cancel([Future(key, client) for key in list(client.futures)], force=True)
            thread.join()
            return math.nan, [], None, f"stalled: a worker stayed paused for {stall_s:g} s, the pass was cancelled"
    return box[0]


def run(args: argparse.Namespace) -> dict:
    """Run the benchmark; print a markdown table and write ``bench-outofcore.json`` / ``.md``."""
    import dask
    import dask.array as da
    from dask.utils import format_bytes, parse_bytes
    from distributed import Client, wait

    import dxrf
    from dxrf.cluster import local_cluster

    from ._common import (
        bench_workdir,
        drop_page_cache,
        memory_incidents,
        memory_log_lines,
        random_rows,
        remove_workdir,
        report,
        store_zarr,
        table,
        worker_memory,
    )

    if getattr(args, "scheduler", None):
        raise ValueError("bench outofcore starts its own memory-limited local clusters; it does not take --scheduler")
    limit = parse_bytes(args.worker_memory)
    d, chunk = args.n_features, args.chunk_rows
    n = max(chunk, round(args.data_gib * 2**30 / (4 * d) / chunk) * chunk)  # whole chunks
    n_mem = max(chunk, round(n * args.in_memory_fraction / chunk) * chunk)
    thresholds = {
        k: dask.config.get(f"distributed.worker.memory.{k}") for k in ("target", "spill", "pause", "terminate")
    }
    results: dict[str, Any] = {
        "n_rows": n,
        "n_features": d,
        "data_bytes": 4 * n * d,
        "m0": args.m0,
        "dtype": "float32",
        "workers": args.workers,
        "threads_per_worker": 1,
        "worker_memory_limit": limit,
        "data_to_cluster_memory": 4 * n * d / (limit * args.workers),
        "chunk_rows": chunk,
        "memory_thresholds": thresholds,
        "worker_saturation": dask.config.get("distributed.scheduler.worker-saturation"),
        "in_memory_rows": n_mem,
    }
    fmap = dxrf.RandomFourierFeatures(args.m0, bandwidth=float(np.sqrt(d)), dtype="float32", random_state=0).fit(
        np.zeros((1, d), dtype=np.float32)
    )
    workdir = bench_workdir(args, "dxrf-bench-ooc-")
    zpath = str(workdir / "X.zarr")
    try:
        # -- out of core: memory-limited workers write the data, then one pass reads it
        with local_cluster(args.workers, memory_limit=limit, dashboard_address=":0") as cluster, Client(cluster) as client:
            logs0 = memory_log_lines(client)
            since = time.time()
            worker_memory(client, reset=True)
            results["zarr_write_s"] = store_zarr(random_rows(n, d, chunk), zpath)
            results["write_peak_rss"] = {a: s["peak_rss"] for a, s in worker_memory(client).items()}
            results["write_incidents"] = memory_incidents(client, since, logs0)
            Xz = da.from_zarr(zpath)
            dxrf.accumulate(Xz[: chunk * args.workers], features=fmap)  # warm up: imports, BLAS, codecs
            cold = not args.warm and drop_page_cache()
            results["cache"] = "cold" if cold else "warm"
            logs0 = memory_log_lines(client)
            since = time.time()
            before = worker_memory(client, reset=True)
            pause_at = thresholds["pause"] * limit if thresholds["pause"] else math.inf
            if max(s["rss"] for s in before.values()) >= pause_at:
                # a worker paused before any task would stay paused: the pass would never end
                t_ooc, times_ooc, stats, error = math.nan, [], None, "the workers are above the pause threshold at rest"
            else:
                setup = drop_page_cache if cold else None
                t_ooc, times_ooc, stats, error = _watched_pass(
                    client, Xz, fmap, args.repeats, setup, args.stall_timeout
                )
            after = worker_memory(client)
            incidents = memory_incidents(client, since, logs0)
        completed = error is None and stats.n == n

        # -- in memory: the first rows persisted on workers without the tight limit
        with local_cluster(args.workers, memory_limit="auto", dashboard_address=":0") as cluster, Client(cluster) as client:
            Xm = client.persist(da.from_zarr(zpath)[:n_mem])
            wait(Xm)
            dxrf.accumulate(Xm[: chunk * args.workers], features=fmap)  # warm up
            worker_memory(client, reset=True)
            t_mem, times_mem, _, error_mem = _timed_pass(Xm, fmap, args.in_memory_repeats, None)
            mem_after = worker_memory(client)
        if error_mem is not None:
            raise RuntimeError(f"the in-memory reference pass failed: {error_mem}")
    finally:
        remove_workdir(args, workdir)

    per_row_ooc, per_row_mem = t_ooc / n, t_mem / n_mem
    ratio = per_row_ooc / per_row_mem
    peaks = {a: s["peak_rss"] for a, s in after.items()}
    same_workers = sorted(before) == sorted(after) and all(after[a]["pid"] == before[a]["pid"] for a in before)
    flags = {
        "completed": bool(completed),
        "no_worker_lost": bool(
            same_workers
            and incidents["workers_removed"] == 0
            and incidents["memory_restarts"] == 0
            and incidents["kill_log_lines"] == 0
        ),
        "no_pause": bool(
            incidents["pauses"] == 0
            and incidents["pause_log_lines"] == 0
            and all(s["status"] == "running" for s in after.values())
        ),
        "peak_below_limit": bool(peaks) and max(peaks.values()) < limit,
        "ratio_within_target": bool(ratio <= TARGET_RATIO),
    }
    flops_per_row = args.m0**2 + 2 * d * args.m0
    results.update(
        {
            "out_of_core": {
                "median_s": t_ooc,
                "times_s": times_ooc,
                "s_per_row": per_row_ooc,
                "gflops": n * flops_per_row / t_ooc / 1e9,
                "error": error,
                "rss_before": {a: s["rss"] for a, s in before.items()},
                "peak_rss": peaks,
                "peak_fraction_of_limit": max(peaks.values()) / limit if peaks else math.nan,
                "spilled_bytes": {
                    a: s["spilled_bytes"] - before.get(a, {}).get("spilled_bytes", 0) for a, s in after.items()
                },
                "status_after": {a: s["status"] for a, s in after.items()},
                "incidents": incidents,
            },
            "in_memory": {
                "median_s": t_mem,
                "times_s": times_mem,
                "s_per_row": per_row_mem,
                "gflops": n_mem * flops_per_row / t_mem / 1e9,
                "peak_rss": {a: s["peak_rss"] for a, s in mem_after.items()},
            },
            "ratio_per_row": ratio,
            "target_ratio": TARGET_RATIO,
            **flags,
        }
    )
    rows = [
        [
            f"out of core (zarr, {results['cache']} cache)",
            n,
            t_ooc,
            per_row_ooc * 1e6,
            results["out_of_core"]["gflops"],
            max(peaks.values()) / 2**20 if peaks else math.nan,
            format_bytes(limit),
        ],
        [
            "in memory (persisted)",
            n_mem,
            t_mem,
            per_row_mem * 1e6,
            results["in_memory"]["gflops"],
            max(results["in_memory"]["peak_rss"].values()) / 2**20,
            "auto",
        ],
    ]
    md = table(["variant", "rows", "median s", "µs / row", "GFLOP/s", "max worker peak MiB", "worker limit"], rows)
    md += (
        f"\n\nData {format_bytes(4 * n * d)} = {results['data_to_cluster_memory']:.2f}× the workers' memory; "
        f"M0 = {args.m0}; time per row out of core / in memory = **{ratio:.3f}** (target ≤ {TARGET_RATIO}).\n"
        + "Flags: "
        + ", ".join(f"{k} = {v}" for k, v in flags.items())
        + (f"\nError: {error}" if error else "")
    )
    return report(args.out, "bench-outofcore", results, md)

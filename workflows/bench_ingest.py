"""Benchmark: ``dxrf ingest`` of the flights-3m CSV, serially in the client and on the workers.

The raw file ``vega_flights_3m/flights-3m.csv.gz`` (3 000 000 rows, 24 MB
gzipped) is ingested with target ``delay``, ``date`` dropped (it is a
timestamp: 100 000+ distinct values), and ``origin`` / ``destination``
one-hot encoded: 458 float32 columns, 5.5 GB before compression. The same
arguments run serially (``parallel=False``: the client reads, encodes and
writes) and on a LocalCluster of ``--workers`` single-threaded processes
(``parallel=True``), alternately, ``--repeats`` times each; medians are
compared. The parallel time includes decompressing the file once to a local
temporary file and the pass that finds where its read chunks start.

Reported: both medians and their ratio (target: at least 1.6 on 2 workers), the
CPU seconds each mode used (parallel: the workers plus the client process, which
also runs the local cluster's scheduler and nannies; a figure the machine's load
does not inflate the way it inflates wall time),
each worker's peak resident memory during the parallel runs (VmHWM, reset
before them; target: under 1 GiB), the client's peak during the serial runs,
and whether the two groups are byte-identical (every file compared).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

DESCRIPTION = "ingest of flights-3m: serial in the client vs on the workers (speed-up, peak worker memory)"

_FILE = "vega_flights_3m/flights-3m.csv.gz"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--src", default=None, help=f"the CSV to ingest (default: the data set file {_FILE})")
    parser.add_argument("--target", default="delay", help="target column (default delay)")
    parser.add_argument("--drop", nargs="*", default=["date"], help="columns to drop (default: date)")
    parser.add_argument("--n-rows", type=int, default=None, help="ingest only the first rows (default: all)")
    parser.add_argument("--chunk-rows", type=int, default=50_000, help="rows per chunk (default 50000)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes, one thread each (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each mode (median; default 3)")
    parser.add_argument("--workdir", default=None, help="where to write the groups (default: a temp dir, removed)")
    parser.add_argument("--out", default="results", help="results folder")


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _same_files(a: Path, b: Path) -> bool:
    fa, fb = _files(a), _files(b)
    return fa.keys() == fb.keys() and all(fa[k] == fb[k] for k in fa)


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process (all its threads) so far."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(args: argparse.Namespace) -> dict:
    import statistics

    import dxrf.io
    from dxrf.datasets import locate, missing_message

    from ._common import (bench_client, bench_workdir, close_client, peak_rss, remove_workdir, report,
                          reset_peak_rss, table, worker_memory)

    src = Path(args.src) if args.src else locate(_FILE)
    if src is None:
        raise ValueError(missing_message(_FILE))
    kw = dict(target=args.target, drop_columns=list(args.drop), chunk_rows=args.chunk_rows, n_rows=args.n_rows,
              overwrite=True)
    workdir = bench_workdir(args, "dxrf-bench-ingest-")
    cluster, client = bench_client(args, args.workers)
    serial_t, parallel_t, client_peak, worker_peaks = [], [], 0, {}
    serial_cpu, parallel_cpu = [], []
    try:
        client.run(lambda: __import__("dxrf.io"))  # imports outside the timing
        worker_memory(client, reset=True)
        for r in range(args.repeats):
            reset_peak_rss()
            c0, t0 = _cpu_seconds(), time.perf_counter()
            report_s = dxrf.io.ingest(src, workdir / "serial.zarr", parallel=False, **kw)
            serial_t.append(time.perf_counter() - t0)
            serial_cpu.append(_cpu_seconds() - c0)
            client_peak = max(client_peak, peak_rss())
            w0 = client.run(_cpu_seconds)
            c0, t0 = _cpu_seconds(), time.perf_counter()
            with client.as_current():
                dxrf.io.ingest(src, workdir / "parallel.zarr", parallel=True, **kw)
            parallel_t.append(time.perf_counter() - t0)
            w1 = client.run(_cpu_seconds)
            # the client process also runs the local cluster's scheduler and nannies
            parallel_cpu.append(_cpu_seconds() - c0 + sum(w1[a] - w0[a] for a in w0))
            print(f"  run {r + 1}: serial {serial_t[-1]:.1f} s, parallel {parallel_t[-1]:.1f} s", flush=True)
        for addr, state in worker_memory(client).items():
            worker_peaks[addr] = state["peak_rss"]
        identical = _same_files(workdir / "serial.zarr", workdir / "parallel.zarr")
    finally:
        close_client(cluster, client)
        remove_workdir(args, workdir)
    s, p = statistics.median(serial_t), statistics.median(parallel_t)
    peak = max(worker_peaks.values())
    results = {
        "src": str(src), "rows": report_s.n_rows, "columns": report_s.n_columns, "workers": args.workers,
        "chunk_rows": args.chunk_rows, "serial_seconds": serial_t, "parallel_seconds": parallel_t,
        "serial_median": s, "parallel_median": p, "speedup": s / p,
        "serial_cpu_seconds": serial_cpu, "parallel_cpu_seconds": parallel_cpu, "worker_peak_rss": worker_peaks,
        "worker_peak_rss_max": peak, "client_peak_rss_serial": client_peak, "identical": identical,
        "speedup_at_least_1_6": s / p >= 1.6, "worker_peak_below_1_gib": peak < 2**30,
    }
    md = table(
        ["mode", "median s", "runs (s)", "CPU s (median)", "peak memory (MiB)"],
        [["serial (client)", s, ", ".join(f"{t:.1f}" for t in serial_t), statistics.median(serial_cpu),
          client_peak / 2**20],
         [f"parallel ({args.workers} workers)", p, ", ".join(f"{t:.1f}" for t in parallel_t),
          statistics.median(parallel_cpu), peak / 2**20]],
    )
    md += (f"\n\n{report_s.n_rows:,} rows x {report_s.n_columns} columns; speed-up {s / p:.2f}x; "
           f"peak worker memory {peak / 2**20:.0f} MiB; byte-identical: {identical}")
    return report(args.out, "bench-ingest", results, md)

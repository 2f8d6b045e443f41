"""Benchmark: one statistics pass reading zarr from an S3 server on loopback against local disk.

The same rows (standard normal, ``--n-rows`` × ``--n-features``, float32, with a
target) are written as a dxrf group twice: to a local directory and to a bucket
of a moto S3 server started on 127.0.0.1 for the run (moto's server mode comes
with the ``test`` extra). Each group is opened with :func:`dxrf.io.open_zarr`
(the S3 one with ``storage_options``) and the same statistics pass
(:func:`dxrf.accumulate` of ``--m0`` random Fourier features with the target)
runs on a LocalCluster of ``--workers`` single-threaded workers, alternating
between the two sources, ``--repeats`` times. The workers read the chunks
straight from the store; only the statistics come back. Printed side by side:
the median seconds of each and their ratio, and whether the two statistics
are bitwise equal.

moto is a Python server (Flask), slower than a production object store, so the
ratio is an upper bound for a real S3 in the same place; a pass with fewer
features per row spends a larger share of its time reading.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

DESCRIPTION = "a statistics pass from an S3 server on loopback (moto) against the same pass from local disk"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._common import add_zarr_arguments

    parser.add_argument("--n-rows", type=float, default=2e5, help="rows N (default 2e5)")
    parser.add_argument("--m0", type=int, default=2000, help="random Fourier features of the pass (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="passes from each source (median; default 3)")
    add_zarr_arguments(parser)


def _write(client, X, y, dest: str, chunk_rows: int, storage_options: dict | None) -> float:
    import dxrf.io

    t0 = time.perf_counter()
    dxrf.io.write_zarr(X, dest, y=y, chunk_rows=chunk_rows, storage_options=storage_options)
    return time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict:
    from distributed import wait

    import dxrf
    import dxrf.io

    from ._common import bench_client, bench_workdir, close_client, moto_server, random_rows, remove_workdir, report, table
    from ._common import require

    s3fs = require("s3fs", "s3fs", "the object-store benchmark (pip install 'dxrf[cloud]')")
    require("moto", "moto[server]", "the object-store benchmark's S3 server (pip install 'dxrf[test]')")
    n, d = int(args.n_rows), args.n_features
    workdir = bench_workdir(args, "dxrf-bench-s3-")
    workdir.mkdir(parents=True, exist_ok=True)
    local = str(workdir / "rows.zarr")
    cluster, client = bench_client(args, args.workers)
    fmap = dxrf.RandomFourierFeatures(args.m0, bandwidth=float(np.sqrt(d)), random_state=0)
    results: dict = {"n_rows": n, "n_features": d, "m0": args.m0, "workers": args.workers,
                     "chunk_rows": args.chunk_rows, "times_s": {"local": [], "s3": []}}
    try:
        with moto_server() as endpoint:
            options = {"endpoint_url": endpoint, "key": "bench", "secret": "bench"}
            s3fs.S3FileSystem(**options, skip_instance_cache=True).mkdir("dxrf-bench")
            url = "s3://dxrf-bench/rows.zarr"
            X = random_rows(n, d, args.chunk_rows)
            y = X[:, 0] * X[:, 1] + np.float32(0.1) * X[:, 2]
            X, y = client.persist([X, y])
            wait([X, y])
            results["write_s"] = {"local": _write(client, X, y, local, args.chunk_rows, None),
                                  "s3": _write(client, X, y, url, args.chunk_rows, options)}
            del X, y
            sources = {"local": dxrf.io.open_zarr(local), "s3": dxrf.io.open_zarr(url, storage_options=options)}
            fitted = fmap.fit(sources["local"].X[:1000].compute())
            stats = {}
            for _ in range(args.repeats):
                for name, data in sources.items():  # alternating: a slow spell hits both
                    t0 = time.perf_counter()
                    stats[name] = dxrf.accumulate(data.X, data.y, features=fitted)
                    seconds = time.perf_counter() - t0
                    results["times_s"][name].append(seconds)
                    print(f"  {name}: pass {seconds:.2f} s", flush=True)
    finally:
        close_client(cluster, client)
        remove_workdir(args, workdir)
    a, b = stats["local"], stats["s3"]
    results["bitwise_equal"] = bool(np.array_equal(a.gram, b.gram) and np.array_equal(a.cross, b.cross) and a.n == b.n)
    med = {k: statistics.median(v) for k, v in results["times_s"].items()}
    results["median_s"] = med
    results["ratio_s3_to_local"] = med["s3"] / med["local"]
    data_mb = n * d * 4 / 2**20
    md = table(["source", "pass s (median)", "write s", "data MiB"],
               [[k, med[k], results["write_s"][k], data_mb] for k in ("local", "s3")])
    md += (f"\n\nN = {n}, d = {d}, M0 = {args.m0}, {args.workers} workers, chunks of {args.chunk_rows} rows, "
           f"{args.repeats} passes from each source (alternating). S3: a moto server on 127.0.0.1.\n"
           f"Ratio S3 / local: **{results['ratio_s3_to_local']:.2f}x**; statistics bitwise equal: "
           f"{'yes' if results['bitwise_equal'] else 'NO'}")
    return report(args.out, "bench-object-store", results, md)

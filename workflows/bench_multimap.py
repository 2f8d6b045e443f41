"""Benchmark: K feature maps from one read of X against K single-map passes.

Both sides read the same zarr copy of X from a cold page cache (where the
cache can be dropped) on the same cluster, in the same run. The multi-map
pass reads every chunk once and computes each map's statistics from it;
the single passes read X K times. Reads are counted on the workers (one
count per chunk read) and printed as bytes, with the ratio of times.
"""

from __future__ import annotations

import argparse

import numpy as np

DESCRIPTION = "K feature maps in one read of X against K single-map passes, from zarr"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._common import add_zarr_arguments

    parser.add_argument("--n-rows", type=float, default=1e6, help="rows N (default 1e6)")
    parser.add_argument("--m0", type=int, default=1000, help="features per map (default 1000)")
    parser.add_argument("--maps", type=int, default=4, help="number of maps K (default 4: bandwidths around sqrt(d))")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (median; default 3)")
    add_zarr_arguments(parser)


def run(args: argparse.Namespace) -> dict:
    import dask.array as da

    import dxrf

    from ._common import (
        bench_client,
        bench_workdir,
        close_client,
        drop_page_cache,
        median_time,
        random_rows,
        remove_workdir,
        report,
        store_zarr,
        table,
    )
    from .bench_fig2_grid import counted, take_reads

    n, d, m0, k = int(args.n_rows), args.n_features, args.m0, args.maps
    workdir = bench_workdir(args)
    cluster, client = bench_client(args, args.workers)
    try:
        zpath = str(workdir / "X.zarr")
        store_zarr(random_rows(n, d, args.chunk_rows), zpath)
        Xz = counted(da.from_zarr(zpath), "X")
        chunk_bytes = args.chunk_rows * d * 4
        maps = [
            dxrf.RandomFourierFeatures(m0, bandwidth=float(np.sqrt(d)) * f, random_state=i).fit(np.zeros((1, d)))
            for i, f in enumerate(np.geomspace(0.5, 2.0, k))
        ]
        setup = None if args.warm else drop_page_cache
        cold = not args.warm and drop_page_cache()
        dxrf.accumulate(Xz[: args.chunk_rows * args.workers], features=maps)  # warm the workers
        take_reads(client)

        def singles() -> list:
            return [dxrf.accumulate(Xz, features=m) for m in maps]

        def multi() -> list:
            return dxrf.accumulate(Xz, features=maps)

        t_multi, times_multi, many = median_time(multi, args.repeats, setup)
        reads_multi = take_reads(client).get("X", 0) / args.repeats
        t_single, times_single, ones = median_time(singles, args.repeats, setup)
        reads_single = take_reads(client).get("X", 0) / args.repeats
        for a, b in zip(many, ones):
            np.testing.assert_array_equal(a.gram, b.gram)  # the same statistics, bitwise
        ratio = t_multi / t_single
        results = {
            "n_rows": n, "n_features": d, "m0": m0, "maps": k, "workers": args.workers,
            "chunk_rows": args.chunk_rows, "cold_cache": bool(cold),
            "multi_s": t_multi, "multi_times_s": times_multi, "single_passes_s": t_single,
            "single_times_s": times_single, "ratio_multi_to_singles": ratio,
            "bytes_read_multi": reads_multi * chunk_bytes, "bytes_read_singles": reads_single * chunk_bytes,
            "chunks": Xz.numblocks[0],
        }
        rows = [
            [f"{k} maps, one read", t_multi, reads_multi / Xz.numblocks[0], reads_multi * chunk_bytes / 1e9],
            [f"{k} single-map passes", t_single, reads_single / Xz.numblocks[0], reads_single * chunk_bytes / 1e9],
        ]
        print(f"  one read {t_multi:.2f} s, {k} passes {t_single:.2f} s: ratio {ratio:.3f} "
              f"({'cold' if cold else 'warm'} cache)", flush=True)
    finally:
        close_client(cluster, client)
        remove_workdir(args, workdir)
    md = table(["variant", "median s", "reads of X", "GB read"], rows) + f"\n\nratio one read / {k} passes: {ratio:.3f}"
    return report(args.out, "bench-multimap", results, md)


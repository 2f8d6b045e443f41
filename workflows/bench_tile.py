"""Benchmark: where one tile of the statistics pass spends its time.

One worker thread's view of a pass: a tile of ``rows`` rows at ``M0``
features, on one BLAS thread, split into its parts — the features computed
in cache-sized slabs (projection, cosine, column sums), the Gram (syrk) and
the compensated add of the Gram into the running sums — each timed alone and
the whole tile timed as the pass runs it. The share outside the syrk is what
separates a pass from the syrk bound before any scheduling.
"""

from __future__ import annotations

import argparse
import numpy as np

DESCRIPTION = "one tile of the statistics pass, part by part, on one BLAS thread"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--m0", type=int, nargs="+", default=[2000], help="feature counts M0 (default 2000)")
    parser.add_argument("--rows", type=int, default=10_000, help="rows per tile (default 10 000, the pass's tile)")
    parser.add_argument("--n-features", type=int, default=90, help="input columns d (default 90)")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats of each part (median; default 7)")
    parser.add_argument("--out", default="results", help="results folder")


def run(args: argparse.Namespace) -> dict:
    from threadpoolctl import threadpool_limits

    import dxrf
    from dxrf.stats import tile_timings

    from ._common import median_time, table, write_results

    n, d = args.rows, args.n_features
    X = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
    rows, results = [], {"rows": n, "n_features": d, "runs": []}
    for m in args.m0:
        kernel = dxrf.RandomFourierFeatures(m, bandwidth=float(np.sqrt(d)), random_state=0).fit(np.zeros((1, d))).kernel_
        with threadpool_limits(1, user_api="blas"):
            # the pass's parts come from the library's own hook; the bare projection is the floor they are read against
            parts = tile_timings(kernel, X, args.repeats)
            proj = np.empty((n, m), np.float32)
            np.matmul(X, kernel.W, out=proj)  # warm, as the hook warms each part
            projection = median_time(lambda: np.matmul(X, kernel.W, out=proj), args.repeats)[0]
        t = {"tile": parts["tile"], "features in slabs": parts["features in slabs"], "projection alone": projection,
             "syrk": parts["syrk"], "compensated add": parts["compensated add"]}
        outside = 1.0 - t["syrk"] / t["tile"]
        results["runs"].append({"m0": m, "seconds": t, "outside_syrk": outside,
                                "syrk_gflops": n * m * m / t["syrk"] / 1e9,
                                "projection_flops_over_syrk": 2 * d / m})
        for part, s in t.items():
            rows.append([m, part, s * 1e3, s / t["tile"]])
        print(f"  M0={m}: tile {t['tile'] * 1e3:.1f} ms, outside the syrk {outside:.3f} "
              f"(projection flops {2 * d / m:.3f} of the syrk's)", flush=True)
    md = table(["M0", "part", "median ms", "share of the tile"], rows)
    print(md)
    write_results(args.out, "bench-tile", results, md)
    return results

"""Benchmark: a model search's client-side algebra against its one pass over the data.

``RandomFeatureRidgeCV`` on random rows from zarr (N = 10^6, d = 90 by default) with 4
bandwidths, M0 = 4000 candidates each, ELSS sampling and top-M with 10 leverage
penalties each, 3 numbers of features and 10 ridge penalties, on a 20 % hold-out. The
estimator times its own parts (``search_times_``): the pass (every bandwidth's
statistics from one read of X) and the algebra on the client (one eigendecomposition
of each bandwidth's M0 x M0 Gram for all lambdas, the selections, one eigendecomposition
per M prefix for the alpha path, the refit's selection). Printed side by side, with
their ratio.
"""

from __future__ import annotations

import argparse

import numpy as np

DESCRIPTION = "the model search's client algebra against its one pass (4 sigma x M0 4000 x 10 lambda x 10 alpha)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._common import add_zarr_arguments

    parser.add_argument("--n-rows", type=float, default=1e6, help="rows N (default 1e6)")
    parser.add_argument("--m0", type=int, default=4000, help="candidates per bandwidth (default 4000)")
    parser.add_argument("--bandwidths", type=int, default=4, help="bandwidths around sqrt(d) (default 4)")
    parser.add_argument("--m", type=int, nargs="+", default=[100, 200, 400], help="numbers of features M")
    parser.add_argument("--n-lams", type=int, default=10, help="ELSS penalties per draw method (default 10)")
    parser.add_argument("--n-alphas", type=int, default=10, help="ridge penalties (default 10)")
    parser.add_argument("--repeats", type=int, default=1, help="repeats (median; default 1)")
    add_zarr_arguments(parser)


def run(args: argparse.Namespace) -> dict:
    import statistics
    import warnings

    import dask.array as da

    import dxrf

    from ._common import bench_client, bench_workdir, close_client, random_rows, remove_workdir, report, store_zarr, table

    n, d = int(args.n_rows), args.n_features
    workdir = bench_workdir(args)
    cluster, client = bench_client(args, args.workers)
    runs = []
    try:
        zpath, ypath = str(workdir / "X.zarr"), str(workdir / "y.zarr")
        X = random_rows(n, d, args.chunk_rows)
        store_zarr(X, zpath)
        w = np.random.default_rng(1).standard_normal(d) / np.sqrt(d)
        store_zarr(da.sin(X @ w.astype(np.float32)).astype(np.float64), ypath)
        Xz, yz = da.from_zarr(zpath), da.from_zarr(ypath)
        sigma = float(np.sqrt(d))
        search = dxrf.RandomFeatureRidgeCV(
            bandwidths=list(sigma * np.geomspace(0.5, 2.0, args.bandwidths)),
            n_components=args.m,
            selections=["elss-sample", "elss-top"],
            lams=list(np.logspace(-6, -1, args.n_lams)),
            alphas=list(np.logspace(-8, -1, args.n_alphas)),
            n_candidates=args.m0,
            cv=0.2,
            random_state=0,
        )
        for r in range(args.repeats):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # a chosen value at a grid's end is no concern here
                search.fit(Xz, yz)
            t = dict(search.search_times_)
            runs.append(t)
            print(f"  repeat {r}: pass {t['pass']:.1f} s, client algebra {t['algebra']:.1f} s "
                  f"(ratio {t['algebra'] / t['pass']:.3f}); {len(search.cv_results_['params'])} configurations, "
                  f"best {search.best_params_}", flush=True)
    finally:
        close_client(cluster, client)
        remove_workdir(args, workdir)
    med = {k: statistics.median(t[k] for t in runs) for k in ("pass", "algebra")}
    ratio = med["algebra"] / med["pass"]
    results = {
        "n_rows": n, "n_features": d, "m0": args.m0, "bandwidths": args.bandwidths, "m": args.m,
        "lams_per_method": args.n_lams, "alphas": args.n_alphas, "workers": args.workers,
        "configurations": len(search.cv_results_["params"]), "runs": runs, "median": med,
        "ratio_algebra_to_pass": ratio, "best_params": search.best_params_, "best_score": search.best_score_,
    }
    md = table(
        ["part", "median s"],
        [["pass: 4 bandwidths' statistics, one read of X", med["pass"]], ["client algebra: every configuration", med["algebra"]]],
    ) + f"\n\nratio algebra / pass: {ratio:.3f} over {results['configurations']} configurations"
    return report(args.out, "bench-search", results, md)

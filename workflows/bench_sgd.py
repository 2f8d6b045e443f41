"""Benchmark: SGD epochs with the feature cache against recomputing the features in every pass.

The same fit twice, side by side in one run: ``RandomFeatureSGDRegressor`` (or the
classifier, one-vs-rest, for MNIST's ten classes) with ``cache_features=True`` (every row's
features computed in the first pass that reads X, kept for the others) and ``False``
(computed again in every pass). Two settings:

- **NumPy**: X in this process;
- **dask from zarr** (``--zarr``): X written to zarr on disk and read by a
  ``LocalCluster`` of ``--workers`` worker processes with one thread each; the cached
  features stay on the worker of their chunk.

Both fits must give the same model to the bit (printed). Times are medians of
``--repeats`` rounds, the two fits alternating within a round. A fit makes
``--passes`` SGD passes plus one read evaluating its validation rows (``validation=0.2``,
no early stopping): ``passes + 1`` reads of X, of which the cached fit computes features
in one.
"""

from __future__ import annotations

import argparse
import tempfile
from typing import Any

import numpy as np

DESCRIPTION = "SGD epochs: the feature cache against features recomputed in every pass (NumPy and dask from zarr)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", choices=["mnist", "protein"], default="mnist",
                        help="mnist (60000 x 784, ten classes) or protein (UCI split 0, 41157 x 9) (default mnist)")
    parser.add_argument("--n-rows", type=int, default=None, help="first training rows (default: all)")
    parser.add_argument("--m", type=int, default=2000, help="random Fourier features M (default 2000)")
    parser.add_argument("--passes", type=int, default=5, help="SGD passes per fit (default 5)")
    parser.add_argument("--batch-size", type=int, default=256, help="mini-batch rows (default 256)")
    parser.add_argument("--zarr", action="store_true", help="also the dask fits from zarr on a LocalCluster")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the LocalCluster (default 2)")
    parser.add_argument("--memory-limit", default="6GiB", help="memory limit per worker (default 6GiB)")
    parser.add_argument("--chunk-rows", type=int, default=10_000, help="zarr row chunk (default 10000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results", help="results folder")


def _data(name: str, n_rows: int | None) -> tuple[np.ndarray, np.ndarray, bool]:
    from dxrf.datasets import load

    if name == "mnist":
        ds = load("mnist", n_rows=n_rows)
        return ds.X_train, ds.y_train, True
    ds = load("protein", n_rows=n_rows)
    y = np.asarray(ds.y_train, dtype=np.float64)
    return ds.X_train, (y - y.mean()) / y.std(), False


def _estimator(classify: bool, fmap: Any, args: argparse.Namespace, cache: bool) -> Any:
    from dxrf import RandomFeatureSGDClassifier, RandomFeatureSGDRegressor

    kw = dict(batch_size=args.batch_size, max_passes=args.passes, validation=0.2, early_stopping=False,
              random_state=args.seed, cache_features=cache)
    if classify:
        return RandomFeatureSGDClassifier(fmap, loss="logistic", **kw)
    return RandomFeatureSGDRegressor(fmap, **kw)


def _pair(X: Any, y: Any, classify: bool, fmap: Any, args: argparse.Namespace) -> dict:
    """Both fits, alternating, ``repeats`` rounds: medians, the ratio and whether the models are bitwise equal."""
    from .bench_logistic import _rounds

    fns = {name: (lambda cache=cache: _estimator(classify, fmap, args, cache).fit(X, y))
           for name, cache in (("cached", True), ("recomputed", False))}
    timed = _rounds(fns, args.repeats)
    fits = {name: timed[name][2] for name in timed}
    a, b = fits["cached"], fits["recomputed"]
    return {
        "cached_s": timed["cached"][0], "recomputed_s": timed["recomputed"][0],
        "cached_times_s": timed["cached"][1], "recomputed_times_s": timed["recomputed"][1],
        "ratio": timed["cached"][0] / timed["recomputed"][0],
        "bitwise_equal": bool(np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
                              and np.array_equal(a.validation_errors_, b.validation_errors_)),
        "feature_cache": [a.feature_cache_, b.feature_cache_], "n_passes": int(a.n_passes_),
        "validation_error": float(a.validation_errors_[-1]), "feature_bytes": int(a.feature_cache_bytes_),
    }


def run(args: argparse.Namespace) -> dict:
    import dxrf
    import dxrf.io

    from ._common import report, table

    X, y, classify = _data(args.data, args.n_rows)
    X = np.ascontiguousarray(X, dtype=np.float64)
    # one fitted map: both fits of every setting use these features
    fmap = dxrf.RandomFourierFeatures(args.m, bandwidth="median", dtype="float32", random_state=args.seed).fit(X)
    settings: dict[str, dict] = {}
    settings["NumPy"] = _pair(X, y, classify, fmap, args)
    if args.zarr:
        from distributed import Client

        from dxrf.cluster import local_cluster

        with tempfile.TemporaryDirectory(prefix="dxrf-bench-sgd-") as tmp:
            path = f"{tmp}/data.zarr"
            dxrf.io.write_zarr(X, path, y=np.asarray(y, dtype=np.float64), chunk_rows=args.chunk_rows)
            stored = dxrf.io.open_zarr(path)
            with local_cluster(args.workers, memory_limit=args.memory_limit, threads_per_worker=1) as cluster, \
                    Client(cluster):
                yd = stored.y.astype(np.int64) if classify else stored.y
                settings[f"dask from zarr, {args.workers} workers"] = _pair(stored.X, yd, classify, fmap, args)
    rows = [
        [name, r["recomputed_s"], r["cached_s"], f"{r['ratio']:.2f}", "yes" if r["bitwise_equal"] else "NO",
         r["n_passes"], f"{r['validation_error']:.5g}", f"{r['feature_bytes'] / 2**20:.0f}"]
        for name, r in settings.items()
    ]
    n, d = X.shape
    md = (
        f"### SGD on {args.data}, N = {n}, d = {d}, M = {args.m}, {args.passes} passes, batch {args.batch_size}"
        f"{', ten classes one-vs-rest (logistic loss)' if classify else ', squared loss'}\n\n"
        + table(["setting", "recomputed s", "cached s", "cached / recomputed", "bitwise equal", "reads of X",
                 "validation loss", "features MiB"], rows)
        + f"\n\nMedians of {args.repeats} rounds, the two fits alternating."
    )
    results = {"data": args.data, "n_rows": n, "d": d, "m": args.m, "passes": args.passes,
               "batch_size": args.batch_size, "repeats": args.repeats, "settings": settings}
    return report(args.out, "bench-sgd", results, md)

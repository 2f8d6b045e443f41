"""Benchmark: two-stage ELSS (Algorithm 1 with ``N0`` rows for the Gram) against the one-pass fit.

Both fits are ``RandomFeatureRidge(LeverageScoreSampler(M, n_candidates=M0, ...))``
with the same seeds on the same rows; they differ only in ``n_samples``:

- one pass: the ``M0`` candidates' Gram over all ``N`` rows (``N M0^2`` flops),
  then the ridge fit from the selected sub-block, with no further read;
- two passes: the Gram over a hashed sample of about ``N0`` rows
  (``N0 M0^2``), then the ``M`` selected features over all ``N`` rows
  (``N M^2``).

The rows are standard-normal (``d`` columns, chunked, drawn by the tasks); the
target is a smooth function of them, a sum of ``--teacher`` cosines of random
projections at the kernel's bandwidth, plus Gaussian noise, so that the test
MSE measures how well the selected features approximate the kernel model. The
test rows are drawn separately and held in memory. Printed side by side: the
wall time of each fit (median over seeds), its passes, the test MSE (mean over
seeds: which features are drawn varies with the seed, for both fits alike), the
speed-up and the MSE ratio, also per seed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

DESCRIPTION = "two-stage ELSS (Gram over N0 rows, then M features over N) vs the one-pass fit"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-rows", type=float, default=1e6, help="training rows N (default 1e6)")
    parser.add_argument("--n-features", type=int, default=90, help="input columns d (default 90)")
    parser.add_argument("--m", type=int, default=200, help="selected features M (default 200)")
    parser.add_argument("--m0", type=int, default=2000, help="candidates M0 (default 2000)")
    parser.add_argument("--n0", type=float, default=5e4, help="rows of the two-stage Gram N0 (default 5e4)")
    parser.add_argument("--lam", type=float, default=1e-3, help="leverage-score penalty (default 1e-3)")
    parser.add_argument("--alpha", type=float, default=1e-4, help="ridge penalty (default 1e-4)")
    parser.add_argument("--method", choices=["sample", "top"], default="sample",
                        help="ELSS algorithm: sample (Algorithm 1, default) or top (Algorithm 2)")
    parser.add_argument("--teacher", type=int, default=50, help="cosines in the target function (default 50)")
    parser.add_argument("--teacher-scale", type=float, default=2.0,
                        help="bandwidth of the target's cosines, in units of the kernel's (default 2: smoother)")
    parser.add_argument("--noise", type=float, default=0.1, help="noise standard deviation of the target (default 0.1)")
    parser.add_argument("--test-rows", type=int, default=50_000, help="held-out rows (default 50 000)")
    parser.add_argument("--chunk-rows", type=int, default=50_000, help="rows per chunk (default 50 000)")
    parser.add_argument("--workers", type=int, default=2, help="local worker processes (default 2)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="seeds of the candidates, the sample and the draws; both fits use each (default 0 1 2)")
    parser.add_argument("--out", default="results", help="results folder")


def _teacher(d: int, count: int, bandwidth: float, seed: int = 123) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frequencies, phases and amplitudes of the target's cosines (bandwidth ``bandwidth``)."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d, count)) / bandwidth
    b = rng.uniform(0.0, 2.0 * np.pi, count)
    a = rng.standard_normal(count) / np.sqrt(count)
    return W, b, a


def _target_block(X: np.ndarray, W: np.ndarray, b: np.ndarray, a: np.ndarray, noise: float,
                  block_id: int, seed: int) -> np.ndarray:
    """The target of one block of rows: the teacher's cosines plus noise seeded by the block."""
    f = np.cos(X.astype(np.float64) @ W + b) @ a
    rng = np.random.default_rng([seed, block_id])
    return f + noise * rng.standard_normal(X.shape[0])


def _data(args: argparse.Namespace, bandwidth: float) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    import dask.array as da

    n, d, chunk = int(args.n_rows), args.n_features, args.chunk_rows
    W, b, a = _teacher(d, args.teacher, bandwidth * args.teacher_scale)
    X = da.random.default_rng(0).standard_normal((n, d), chunks=(chunk, d), dtype=np.float32)
    y = X.map_blocks(
        lambda blk, block_info=None: _target_block(blk, W, b, a, args.noise, block_info[0]["chunk-location"][0], 1),
        drop_axis=1, dtype=np.float64,
    )
    rng = np.random.default_rng(2)
    X_test = rng.standard_normal((args.test_rows, d)).astype(np.float32)
    y_test = _target_block(X_test, W, b, a, args.noise, 0, 3)
    return X, y, X_test, y_test


def _fit(X: Any, y: Any, args: argparse.Namespace, bandwidth: float, n_samples: int | None,
         seed: int) -> tuple[Any, float]:
    from dxrf import LeverageScoreSampler, RandomFeatureRidge, RandomFourierFeatures

    selector = LeverageScoreSampler(
        args.m, n_candidates=args.m0, lam=args.lam, method=args.method, n_samples=n_samples,
        base=RandomFourierFeatures(bandwidth=bandwidth), random_state=seed,
    )
    model = RandomFeatureRidge(selector, alpha=args.alpha)
    t0 = time.perf_counter()
    model.fit(X, y)
    return model, time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict:
    from ._common import bench_client, close_client, report, table

    n, d = int(args.n_rows), args.n_features
    n0 = int(args.n0)
    if not 0 < n0 < n:
        raise ValueError(f"--n0 must lie in (0, --n-rows); got {n0} with {n} rows")
    bandwidth = float(np.sqrt(d))  # about the median distance / sqrt(2) of standard-normal rows
    cluster, client = bench_client(args, args.workers)
    results: dict = {
        "n_rows": n, "n_features": d, "m": args.m, "m0": args.m0, "n0": n0, "lam": args.lam, "alpha": args.alpha,
        "method": args.method, "bandwidth": bandwidth, "workers": args.workers, "chunk_rows": args.chunk_rows,
        "runs": {"one_pass": [], "two_stage": []},
    }
    try:
        X, y, X_test, y_test = _data(args, bandwidth)
        from distributed import wait

        X, y = client.persist([X, y])  # generated once, so that both fits read the same blocks from memory
        wait([X, y])
        _fit(X[: args.chunk_rows], y[: args.chunk_rows], args, bandwidth, None, 0)  # warm the workers up, untimed
        for seed in args.seeds:
            # interleaved, so that a slow spell of the shared machine hits both alike
            for kind, sample in (("two_stage", n0), ("one_pass", None)):
                model, seconds = _fit(X, y, args, bandwidth, sample, seed)
                mse = float(np.mean((model.predict(X_test) - y_test) ** 2))
                rows = int(model.features_.n_samples_)
                results["runs"][kind].append({"seed": seed, "fit_s": seconds, "test_mse": mse,
                                              "passes": int(model.n_passes_), "gram_rows": rows})
                print(f"  seed {seed}, {kind}: fit {seconds:.1f} s, {model.n_passes_} passes, Gram over {rows} rows, "
                      f"test MSE {mse:.5f}", flush=True)
    finally:
        close_client(cluster, client)
    # times: the median over seeds; test MSE: the mean over seeds (the draws of features vary with the seed)
    med = {k: {"fit_s": statistics.median(r["fit_s"] for r in v), "test_mse": statistics.fmean(r["test_mse"] for r in v),
               "passes": v[0]["passes"], "gram_rows": v[0]["gram_rows"]} for k, v in results["runs"].items()}
    results["summary"] = med
    results["speedup"] = med["one_pass"]["fit_s"] / med["two_stage"]["fit_s"]
    results["mse_ratio"] = med["two_stage"]["test_mse"] / med["one_pass"]["test_mse"]
    results["mse_ratio_per_seed"] = [t["test_mse"] / o["test_mse"]
                                     for t, o in zip(results["runs"]["two_stage"], results["runs"]["one_pass"])]
    results["test_variance"] = float(np.var(y_test))
    md = table(
        ["fit", "passes", "Gram rows", "fit s (median over seeds)", "test MSE (mean over seeds)"],
        [[k, v["passes"], v["gram_rows"], v["fit_s"], v["test_mse"]] for k, v in med.items()],
    )
    md += (f"\n\nN = {n}, d = {d}, M = {args.m}, M0 = {args.m0}, N0 = {n0}, method {args.method}, "
           f"{args.workers} workers, seeds {args.seeds}; test variance {results['test_variance']:.4f}.\n"
           f"Speed-up of two-stage: **{results['speedup']:.1f}x**; test MSE ratio (two-stage / one pass): "
           f"**{results['mse_ratio']:.4f}** (per seed: "
           + ", ".join(f"{r:.4f}" for r in results["mse_ratio_per_seed"]) + ")")
    return report(args.out, "bench-two-stage", results, md)

"""Quick start: ELSS against plain random Fourier features on a real data set.

On the embedded local cluster (or ``--scheduler``): the training and test
parts of a real regression set are written to zarr, inputs standardised and
responses scaled into [-1, 1] with training statistics (ELSS paper,
section V). One pass over the training data accumulates the statistics of
``M0 = 10 * max(M)`` candidate Fourier features, for training and validation
rows at once; one pass over the test data does the same. Every method, number
of features M, leverage penalty lambda and ridge penalty alpha is then small
dense algebra on those statistics: RKS (plain RFF), ELSS Algorithms 1 and 2,
EERF and LKRF, with lambda, rho and alpha chosen on validation.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

DESCRIPTION = "ELSS vs plain RFF, EERF and LKRF on a real regression set (test MSE table)"
NEEDS_CLIENT = True

METHODS = ("RKS", "ELSS-1 (sample)", "ELSS-2 (top)", "EERF", "LKRF")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="protein", help="a regression set of dxrf.datasets (default protein)")
    parser.add_argument("--split", type=int, default=0, help="which of the fixed test splits (default 0)")
    parser.add_argument("--m", type=int, nargs="+", default=[10, 20, 40, 80, 160], help="feature counts M")
    parser.add_argument("--seeds", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--n-rows", type=int, default=None, help="use only the first rows (quick runs)")
    parser.add_argument("--chunk-rows", type=int, default=10_000)
    parser.add_argument("--out", default="results/quickstart", help="results folder")


def data_sets(args: argparse.Namespace) -> list[str]:
    """The real data sets this run reads (``dxrf reproduce`` checks and fetches them before it starts)."""
    return [args.dataset]


LAMS = np.logspace(-6, -1, 6)
ALPHAS = np.logspace(-7, 0, 8)
RHOS = np.array([0.1, 1.0, 10.0])


def _best_ridge(train, valid, test):
    from dxrf.learners import mse_from_stats, ridge_path

    path = ridge_path(train, ALPHAS, valid)
    i = path.best_index
    val = float(path.validation_mse[i].mean())
    tst = float(mse_from_stats(test, path.coefs[i], path.intercepts[i]).mean())
    return val, tst, float(ALPHAS[i])


def _evaluate(method: str, m: int, stats, seed: int):
    """Validation-chosen test MSE of one method at M features, from candidate statistics."""
    from dxrf.selection import select_features

    train, valid, test, spectrum = stats
    m0 = train.n_components
    options = []
    if method == "RKS":
        # the candidates are i.i.d.: any M of them are a plain M-feature RFF map
        options.append(((np.arange(m), np.full(m, np.sqrt(m0 / m))), {}))
    elif method.startswith("ELSS"):
        how = "sample" if "1" in method else "top"
        for lam in LAMS:
            sel = select_features(train + valid, m, criterion="leverage", method=how, lam=lam, random_state=seed, spectrum=spectrum)
            options.append(((sel.selected, sel.scales), {"lam": float(lam)}))
    elif method == "EERF":
        sel = select_features(train, m, criterion="energy", method="top", standardize=True, random_state=seed)
        options.append(((sel.selected, sel.scales), {}))
    else:
        for rho in RHOS:
            sel = select_features(train, m, criterion="alignment", method="sample", rho=rho, standardize=True, random_state=seed)
            options.append(((sel.selected, sel.scales), {"rho": float(rho)}))
    best = None
    for (idx, scales), params in options:
        val, tst, alpha = _best_ridge(train.subset(idx, scales), valid.subset(idx, scales), test.subset(idx, scales))
        if best is None or val < best[0]:
            best = (val, tst, {**params, "alpha": alpha})
    return best


def run(args: argparse.Namespace) -> dict:
    import dxrf
    import dxrf.datasets
    import dxrf.io
    from dxrf.selection import gram_spectrum

    from ._common import table, write_results

    t_start = time.perf_counter()
    kw = {"split": args.split}
    if args.n_rows:
        kw["n_rows"] = args.n_rows
    ds = dxrf.datasets.load(args.dataset, download=True, **kw)
    if ds.task != "regression":
        raise ValueError(f"quickstart needs a regression data set; {args.dataset!r} is {ds.task}")
    workdir = Path(tempfile.mkdtemp(prefix="dxrf-quickstart-"))
    try:
        dxrf.io.write_zarr(ds.X_train, workdir / "train.zarr", y=ds.y_train, chunk_rows=args.chunk_rows)
        dxrf.io.write_zarr(ds.X_test, workdir / "test.zarr", y=ds.y_test, chunk_rows=args.chunk_rows)
        train_data = dxrf.io.open_zarr(workdir / "train.zarr", standardize=True, scale_y=True)
        test_data = dxrf.io.open_zarr(workdir / "test.zarr")
        # the test part is standardised and scaled with the training statistics
        mean = train_data.x_mean.astype(np.float32)
        std = train_data.x_std.astype(np.float32)
        X_test = (test_data.X - mean) / std
        y_min, y_max = train_data.attrs["y_min"], train_data.attrs["y_max"]
        y_test = 2.0 * (test_data.y - y_min) / (y_max - y_min) - 1.0
        m0 = 10 * max(args.m)
        print(
            f"{args.dataset} (split {args.split}): {ds.X_train.shape[0]} training and {ds.X_test.shape[0]} test rows, "
            f"d = {ds.n_features}; M0 = {m0} candidate Gaussian RFF, M in {args.m}, {args.seeds} seeds",
            flush=True,
        )
        errors = {method: {m: [] for m in args.m} for method in METHODS}
        chosen = {method: {m: [] for m in args.m} for method in METHODS}
        passes = 0
        for seed in range(args.seeds):
            cand = dxrf.RandomFourierFeatures(m0, bandwidth="median", random_state=seed).fit(train_data.X)
            train, valid = dxrf.accumulate(train_data.X, train_data.y, cand, split=0.2, split_seed=seed, progress=None)
            test = dxrf.accumulate(X_test, y_test, cand, progress=None)
            passes += 2
            spectrum = gram_spectrum(train + valid)
            for method in METHODS:
                for m in args.m:
                    _, tst, params = _evaluate(method, m, (train, valid, test, spectrum), seed)
                    errors[method][m].append(tst)
                    chosen[method][m].append(params)
            print(f"  seed {seed}: sigma = {cand.bandwidth_:.3g}, done", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rows = []
    for method in METHODS:
        rows.append([method] + [f"{np.mean(errors[method][m]):.4f} ± {np.std(errors[method][m]):.4f}" for m in args.m])
    md = table(["method \\ M"] + [str(m) for m in args.m], rows)
    elapsed = time.perf_counter() - t_start
    header = (
        f"Test MSE on the scaled response (mean ± std over {args.seeds} seeds), {args.dataset}, "
        f"M0 = {m0}; {passes} passes over the data in all; {elapsed:.1f} s"
    )
    print()
    print(header)
    print(md)
    results = {
        "dataset": args.dataset,
        "split": args.split,
        "m": args.m,
        "m0": m0,
        "seeds": args.seeds,
        "test_mse": {k: {str(m): v for m, v in d.items()} for k, d in errors.items()},
        "chosen": {k: {str(m): v for m, v in d.items()} for k, d in chosen.items()},
        "passes": passes,
        "seconds": elapsed,
    }
    write_results(args.out, "quickstart", results, header + "\n\n" + md)
    return results

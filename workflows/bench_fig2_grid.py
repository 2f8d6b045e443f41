"""Benchmark: the ELSS figure-2 grid from one pass against a loop of separate fits (issue #6 f).

For one regression data set of ``dxrf reproduce fig2-error-vs-m`` and one seed,
the whole grid of that figure (bandwidth sigma, then every method, M, lambda
or rho and ridge alpha) is computed twice on the same zarr data and cluster:

Grid (the workflow itself, a client of the public :class:`dxrf.RandomFeatureRidgeCV`:
:func:`workflows.fig2_error_vs_m.seed_search`)
    ONE pass over the training rows accumulates the statistics of ``M0 = 10
    max(M)`` candidates of every bandwidth for training and validation rows;
    every ``M0 = 10 M`` is a prefix of those candidates (``candidate_ratio``),
    so each model is a sub-block of the statistics; the bandwidth is the
    workflow's choice (RKS at the largest M); ONE pass over the test rows
    scores every model of that bandwidth, kept by the search
    (``fold_models``). In all: 1 pass over training rows and 1 over test rows.

Naive loop (what a user without the one-pass design writes)
    a separate fit with the public single-model estimators for every cell
    (method, M, lambda | rho), each making its own passes:

    - selection: ``LeverageScoreSampler(...).fit(X)`` (ELSS: the Gram over all
      training inputs, ``N0 = N``, as the workflow), or
      ``EnergyScoreSelector`` / ``KernelAlignmentSelector`` fitted on the
      training split (EERF, LKRF: the validation targets stay unseen); RKS has
      no selection;
    - ``RandomFeatureRidge(alphas=..., validation=0.2)`` on the selected
      features: the validation MSE of every alpha (fitted on the training
      split) and the chosen alpha;
    - ``RandomFeatureRidge(alpha=alpha_)`` on the training split: the model
      the figure scores (``RandomFeatureRidge`` refits its chosen alpha on
      training plus validation rows, so the training-split model needs a fit
      of its own);
    - ``predict`` on the test rows: the test MSE.

    The bandwidth is chosen as the workflow does: one ``RandomFeatureRidge``
    of RKS at the largest M per sigma, lowest validation MSE.

Both sides use the same candidates and random draws, so they compute the same
models: the candidate map of a cell is the first ``10 M`` columns of the
search's ``M0`` candidates (:class:`FixedFeatures`, a feature map with given
parameters), and the selectors are seeded as the search seeds its selections
(``random_state=seed``). Their errors differ only by floating-point rounding:
the per-tile Grams are float32 sums over differently sized column blocks (the
search's 3200 candidates against a cell's own features), the ridge solve is a
Cholesky factorisation in the naive loop and an eigendecomposition in the
search, leverage scores come from a Cholesky factorisation in the selector and
from the spectrum in the search, and near-ties of leverage scores or
validation errors may then pick different features or alphas (counted in the
output).

Passes are counted twice on each side: by the estimators' ``n_passes_`` plus
one per test prediction (naive) or the workflow's pass log (grid), and by
counting the row chunks of ``X`` read on the workers (a pass reads every chunk
once).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

DESCRIPTION = "fig2 grid from one pass vs a loop of separate estimator fits: speedup, pass counts, errors"
NAME = "bench-fig2-grid"

REGRESSION_SETS = ("protein", "keggundirected")
"""The regression sets of the fig2 workflow (protein is the smaller)."""

NAIVE_ORDER = ("RKS", "ELSS-1", "ELSS-2", "EERF", "LKRF")
"""The order of the methods in the naive loop (and of the cells compared)."""

_GRID_KEYS = ("n_rows", "m", "sigma_factors", "lams", "alphas", "rhos", "chunk_rows")

# --quick: all rows, a reduced grid (about 1/5 of the full grid's fits); tests shrink it further
QUICK_GRID = {
    "n_rows": None, "m": [10, 40, 160], "sigma_factors": [0.5, 1.0], "lams": [1e-5, 1e-3, 1e-1],
    "alphas": list(np.logspace(-6, 0, 4)), "rhos": [1.0], "chunk_rows": 10_000,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="protein", choices=REGRESSION_SETS, help="data set (default protein)")
    parser.add_argument("--seed", type=int, default=0, help="split repetition and candidate seed (default 0)")
    parser.add_argument("--quick", action="store_true",
                        help="reduced grid: M 10 40 160, 2 bandwidths, 3 lambdas, 4 alphas, 1 rho")
    parser.add_argument("--n-rows", type=int, default=None, help="use only the first rows of the data set")
    parser.add_argument("--m", type=int, nargs="+", default=None, help="feature counts M (default: the workflow's)")
    parser.add_argument("--sigma-factors", type=float, nargs="+", default=None,
                        help="bandwidth grid, multiples of the median distance (default: the workflow's)")
    parser.add_argument("--lams", type=float, nargs="+", default=None, help="ELSS lambda grid (default: the workflow's)")
    parser.add_argument("--alphas", type=float, nargs="+", default=None, help="ridge alpha grid (default: the workflow's)")
    parser.add_argument("--rhos", type=float, nargs="+", default=None, help="LKRF rho grid (default: the workflow's)")
    parser.add_argument("--chunk-rows", type=int, default=None, help="rows per zarr chunk (default 10000)")
    parser.add_argument("--workers", type=int, default=2, help="embedded cluster: worker processes of 1 thread")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs of each side (median reported)")
    parser.add_argument("--rtol", type=float, default=1e-3,
                        help="relative tolerance for the test MSEs of the two sides (default 1e-3)")
    parser.add_argument("--out", default="results", help="results folder")


# --------------------------------------------------------------------------- a feature map with given parameters


class FixedFeatures(TransformerMixin, BaseEstimator):
    """A feature map whose parameters are given, not drawn: ``fit`` reads nothing.

    With ``n_components`` smaller than the kernel's ``M``, the map is the
    first ``n_components`` columns as an ``n``-feature map: each column's
    ``M^{-1/2}`` factor becomes ``n^{-1/2}`` (the workflow's prefixes of its
    candidates). As the ``base`` of a selector (which sets ``n_components``
    to its ``n_candidates``) or the ``features`` of a learner, it makes the
    public estimators use prescribed candidates or a prescribed selection.

    Parameters
    ----------
    kernel : FeatureKernel
        A fitted kernel, e.g. ``RandomFourierFeatures(...).fit(X).kernel_``;
        for prefixes its columns must share one scale (a plain feature map).
    n_components : int, optional
        Columns to keep; default all.

    Attributes
    ----------
    kernel_ : FeatureKernel
    n_features_in_ : int
    """

    def __init__(self, kernel: Any = None, n_components: int | None = None) -> None:
        self.kernel = kernel
        self.n_components = n_components

    def fit(self, X: Any = None, y: Any = None) -> FixedFeatures:
        """Take the given kernel (or its prefix); ``X`` is not read.

        Returns
        -------
        self
        """
        from dxrf.features import FeatureKernel

        kernel = self.kernel
        if not isinstance(kernel, FeatureKernel):
            raise TypeError(f"kernel must be a fitted FeatureKernel, got {type(kernel).__name__}")
        m = kernel.n_components
        n = m if self.n_components is None else int(self.n_components)
        if not 0 < n <= m:
            raise ValueError(f"n_components must be in 1..{m}, got {n}")
        self.kernel_ = kernel if n == m else kernel.subset(np.arange(n), np.full(n, math.sqrt(m / n)))
        self.n_features_in_ = kernel.n_features_in
        return self

    def transform(self, X: Any) -> Any:
        """The features ``z(X)`` (lazy for dask input)."""
        from dxrf.features import apply_kernel

        return apply_kernel(X, self.kernel_)


# --------------------------------------------------------------------------- counting chunk reads on the workers

_READS: dict[str, int] = {}


def _count_read(block: np.ndarray, tag: str) -> np.ndarray:
    _READS[tag] = _READS.get(tag, 0) + 1
    return block


def _take_reads() -> dict[str, int]:
    """This process's chunk reads by tag, reset to zero (run on every worker)."""
    out = dict(_READS)
    _READS.clear()
    return out


def counted(X: Any, tag: str) -> Any:
    """``X`` with every chunk read counted under ``tag`` in the process that reads it."""
    return X.map_blocks(_count_read, tag, dtype=X.dtype, meta=np.empty((0, 0), dtype=X.dtype))


def take_reads(client: Any) -> dict[str, int]:
    """Chunk reads by tag summed over the workers since the last call (then reset)."""
    total: dict[str, int] = {}
    for counts in client.run(_take_reads).values():
        for tag, n in counts.items():
            total[tag] = total.get(tag, 0) + n
    return total


def read_passes(reads: dict[str, int], data: Any) -> dict[str, float]:
    """Chunk reads as passes: reads of ``X`` (``X_test``) over its number of chunks."""
    return {
        "train": reads.get("train", 0) / data.X.numblocks[0],
        "test": reads.get("test", 0) / data.X_test.numblocks[0],
    }


# --------------------------------------------------------------------------- the two sides


@dataclasses.dataclass
class GridCell:
    """One cell of the search at the chosen sigma: its selection and every alpha's errors."""

    method: str
    m: int
    params: dict
    selected: np.ndarray
    alphas: np.ndarray
    valid_mse: np.ndarray
    test_mse: np.ndarray


def grid_side(data: Any, sigmas: list[float], args: argparse.Namespace) -> dict:
    """The fig2 workflow's search for one (data set, seed): one public search, then one test pass.

    :func:`workflows.fig2_error_vs_m.seed_search` searches every bandwidth
    from one pass; the bandwidth is the workflow's choice; ONE pass over the
    test rows scores every model of the chosen bandwidth (kept by the
    search). Returns the chosen ``sigma``, each bandwidth's RKS validation
    MSE (``scores``), the cells (:class:`GridCell`, in the naive loop's order)
    and the pass log summary (``passes``).
    """
    from . import fig2_error_vs_m as fig2
    from ._paper import PassLog
    from ._search import test_errors

    log = PassLog()
    est = fig2.seed_search(data, sigmas, args.seed, args, log)
    scores = [s["rks_valid_mse"] for s in fig2.sigma_scores(est, sigmas, args)]
    sigma = sigmas[int(np.argmin(scores))]
    rows = fig2.cell_rows(est, sigma, args)
    (test,) = test_errors([(est, np.concatenate(list(rows.values())))], data, log, [(sigma, args.seed)],
                          "test MSE of every model of the chosen bandwidth")
    r = est.cv_results_
    cells = []
    for m in args.m:
        for method in NAIVE_ORDER:
            for (k, mm, params), rr in rows.items():
                if (k, mm) == (method, m):
                    cells.append(GridCell(method, m, dict(params), est.fold_selection(int(rr[0]))[0],
                                          np.asarray(r["param_alpha"][rr]), np.asarray(r["mean_validation_mse"][rr]),
                                          np.array([test[int(i)] for i in rr])))
    return {"sigma": sigma, "scores": scores, "cells": cells, "passes": log.summary()}


@dataclasses.dataclass
class NaiveCell:
    """One cell of the naive loop: its selection, validation path and test error."""

    method: str
    m: int
    params: dict
    selected: np.ndarray
    valid_mse: np.ndarray
    alpha: float
    test_mse: float
    train_passes: int
    test_passes: int


def _fit_cell(features: FixedFeatures, data: Any, fit_rows: tuple, args: argparse.Namespace) -> tuple:
    """Ridge path on validation, the training-split model at the chosen alpha, its test MSE.

    Returns ``(validation MSE per alpha, alpha, test MSE, passes over training rows)``.
    """
    from dxrf import RandomFeatureRidge

    from ._paper import VALIDATION_FRACTION

    path = RandomFeatureRidge(features=features, alphas=args.alphas, validation=VALIDATION_FRACTION,
                              validation_seed=args.seed).fit(data.X, data.T)
    model = RandomFeatureRidge(features=features, alpha=path.alpha_).fit(*fit_rows)
    pred = model.predict(data.X_test)
    if pred.shape != data.T_test.shape:
        raise RuntimeError(f"prediction of shape {pred.shape} for targets of shape {data.T_test.shape}")
    test_mse = float(((pred - data.T_test) ** 2).mean().compute())  # one pass over the test rows
    return np.asarray(path.validation_errors_), float(path.alpha_), test_mse, path.n_passes_ + model.n_passes_


def naive_side(data: Any, sigmas: list[float], args: argparse.Namespace) -> dict:
    """The same grid as a loop of separate estimator fits, each with its own passes.

    Returns the chosen ``sigma``, each bandwidth's RKS validation MSE
    (``scores``), the cells (``cells``: :class:`NaiveCell` in the workflow's
    order) and the pass counts reported by the estimators (``passes``).
    """
    import dxrf
    from dxrf.stats import hashed_split

    from ._paper import VALIDATION_FRACTION, fourier_kernel, say

    seed, m_top = args.seed, max(args.m)
    m0 = 10 * m_top
    fit_mask = ~hashed_split(0, data.n_train, VALIDATION_FRACTION, seed)
    fit_rows = (data.X[fit_mask], data.T[fit_mask])  # the training split, read lazily
    passes = {"train": 0, "test": 0}

    # the bandwidth: RKS at the largest M for each sigma, lowest validation MSE (first on ties)
    scores = []
    for sigma in sigmas:
        path = dxrf.RandomFeatureRidge(features=FixedFeatures(fourier_kernel(data.d, m0, sigma, seed), m_top),
                                       alphas=args.alphas, validation=VALIDATION_FRACTION,
                                       validation_seed=seed).fit(data.X, data.T)
        passes["train"] += path.n_passes_
        scores.append(float(np.min(path.validation_errors_)))
    sigma = sigmas[int(np.argmin(scores))]
    candidates = fourier_kernel(data.d, m0, sigma, seed)

    cells: list[NaiveCell] = []

    def cell(method: str, m: int, params: dict, features: FixedFeatures, selector: Any = None) -> None:
        valid, alpha, test, train_passes = _fit_cell(features, data, fit_rows, args)
        selected = np.arange(m) if selector is None else selector.selected_
        train_passes += 0 if selector is None else selector.n_passes_
        passes["train"] += train_passes
        passes["test"] += 1
        cells.append(NaiveCell(method, m, dict(params), selected, valid, alpha, test, train_passes, 1))

    t0 = time.perf_counter()
    for m in args.m:
        p = 10 * m
        base = FixedFeatures(candidates)  # the selectors set n_components = p: the first p candidates
        cell("RKS", m, {}, FixedFeatures(candidates, m))
        for method, how in (("ELSS-1", "sample"), ("ELSS-2", "top")):
            for lam in sorted(args.lams):
                sel = dxrf.LeverageScoreSampler(m, n_candidates=p, lam=lam, method=how, base=base,
                                                random_state=seed).fit(data.X)
                cell(method, m, {"lam": float(lam)}, FixedFeatures(sel.kernel_), sel)
        sel = dxrf.EnergyScoreSelector(m, n_candidates=p, task="regression", base=base).fit(*fit_rows)
        cell("EERF", m, {}, FixedFeatures(sel.kernel_), sel)
        for rho in sorted(args.rhos):
            sel = dxrf.KernelAlignmentSelector(m, n_candidates=p, rho=rho, method="sample", task="regression",
                                               base=base, random_state=seed).fit(*fit_rows)
            cell("LKRF", m, {"rho": float(rho)}, FixedFeatures(sel.kernel_), sel)
        say(f"   naive loop: M = {m} done, {len(cells)} cells, {passes['train']} + {passes['test']} passes "
            f"({time.perf_counter() - t0:.1f} s)")
    return {"sigma": sigma, "scores": scores, "cells": cells, "passes": passes}


# --------------------------------------------------------------------------- comparison


def _rel(a: Any, b: Any) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.abs(a - b) / np.maximum(np.abs(a), np.finfo(np.float64).tiny)


def compare(grid: dict, naive: dict, methods: tuple[str, ...]) -> dict:
    """Per-cell and per-(method, M) agreement of the two sides.

    The naive test MSE is compared with the search's test MSE of the same
    model: the same cell at the naive loop's chosen alpha. Per (method, M),
    the figure's value (the cell and alpha with the lowest validation MSE)
    is compared as each side chose it.
    """
    fits, cells = grid["cells"], naive["cells"]
    if [(f.method, f.m, f.params) for f in fits] != [(c.method, c.m, c.params) for c in cells]:
        raise RuntimeError("the naive loop's cells are not the search's")
    rows = []
    for f, c in zip(fits, cells):
        j = int(np.argmin(np.nan_to_num(f.valid_mse, nan=np.inf)))
        jn = int(np.flatnonzero(np.isclose(f.alphas, c.alpha, rtol=1e-12, atol=0.0))[0])
        rows.append({
            "method": c.method, "m": c.m, "params": c.params,
            # the same features in any order are the same model
            "same_selection": bool(np.array_equal(np.sort(f.selected), np.sort(c.selected))),
            "alpha": {"grid": float(f.alphas[j]), "naive": c.alpha},
            "valid_mse": {"grid": f.valid_mse.tolist(), "naive": c.valid_mse.tolist()},
            "test_mse": {"grid": float(f.test_mse[jn]), "naive": c.test_mse},
            "test_mse_grid_choice": float(f.test_mse[j]),
            "rel_valid": float(_rel(f.valid_mse, c.valid_mse).max()),
            "rel_test": float(_rel(f.test_mse[jn], c.test_mse)),
            "passes": {"train": c.train_passes, "test": c.test_passes},
        })
    figure: dict[str, dict[str, dict[str, float]]] = {}
    for method in methods:
        for m in sorted({c.m for c in cells}):
            group = [(f, r, c) for f, r, c in zip(fits, rows, cells) if (c.method, c.m) == (method, m)]
            if not group:
                continue
            f_best, _, _ = min(group, key=lambda g: float(np.nanmin(g[0].valid_mse)))  # the first of equals
            _, r_best, _ = min(group, key=lambda g: float(np.min(g[2].valid_mse)))
            grid_value = float(f_best.test_mse[int(np.nanargmin(f_best.valid_mse))])
            figure.setdefault(method, {})[str(m)] = {"grid": grid_value, "naive": r_best["test_mse"]["naive"]}
    fig_rel = max(float(_rel(v["grid"], v["naive"])) for d in figure.values() for v in d.values())
    return {
        "cells": rows,
        "figure": figure,
        "max_rel_valid": max(r["rel_valid"] for r in rows),
        "max_rel_test": max(r["rel_test"] for r in rows),
        "max_rel_figure": fig_rel,
        "alpha_mismatches": sum(r["alpha"]["grid"] != r["alpha"]["naive"] for r in rows),
        "selection_mismatches": sum(not r["same_selection"] for r in rows),
        "same_sigma": bool(grid["sigma"] == naive["sigma"]),
        "max_rel_sigma_scores": float(_rel(grid["scores"], naive["scores"]).max()),
    }


# --------------------------------------------------------------------------- run


def _resolve(args: argparse.Namespace) -> None:
    from . import fig2_error_vs_m as fig2
    from ._paper import resolve_options

    resolve_options(args, {k: fig2.FULL[k] for k in _GRID_KEYS}, QUICK_GRID)
    for key in ("m", "lams", "alphas", "rhos"):  # the search's order of each axis
        setattr(args, key, sorted(set(getattr(args, key))))


def run(args: argparse.Namespace) -> dict:
    """Time the workflow's grid and the naive loop; compare passes and errors; write JSON and markdown."""

    import dxrf

    from . import fig2_error_vs_m as fig2
    from ._common import bench_client, close_client, median_time, table, write_results
    from ._paper import VALIDATION_FRACTION, Workdir, fourier_kernel, load_data, say

    _resolve(args)
    cluster, client = bench_client(args, args.workers)
    address = None if cluster is not None else client.scheduler.address
    try:
        with Workdir("bench-fig2") as wd:
            data = load_data(args.dataset, wd, chunk_rows=args.chunk_rows, n_rows=args.n_rows, rep=args.seed)
            data = dataclasses.replace(data, X=counted(data.X, "train"), X_test=counted(data.X_test, "test"))
            sigmas = [f * data.sigma_median for f in args.sigma_factors]
            n_cells = len(args.m) * (2 + 2 * len(args.lams) + len(args.rhos))
            say(f"== {data.label}: {data.n_train} training / {data.n_test} test rows, d = {data.d}, "
                f"chunks of {args.chunk_rows} rows; M0 = {10 * max(args.m)}; {len(sigmas)} bandwidths, "
                f"{n_cells} cells x {len(args.alphas)} alphas")
            # warm up the workers (imports, BLAS, buffers) with one untimed pass of the workflow's size
            dxrf.accumulate(data.X, data.T, fourier_kernel(data.d, 10 * max(args.m), sigmas[0], args.seed),
                            split=VALIDATION_FRACTION, split_seed=args.seed)
            take_reads(client)

            say("\n-- grid (the fig2 workflow)")
            t_grid, times_grid, grid = median_time(lambda: grid_side(data, sigmas, args), args.repeats,
                                                   setup=lambda: take_reads(client))
            grid_reads = read_passes(take_reads(client), data)
            say("\n-- naive loop of separate fits")
            t_naive, times_naive, naive = median_time(lambda: naive_side(data, sigmas, args), args.repeats,
                                                      setup=lambda: take_reads(client))
            naive_reads = read_passes(take_reads(client), data)
    finally:
        close_client(cluster, client)

    cmp = compare(grid, naive, fig2.METHODS)
    ok = cmp["same_sigma"] and cmp["max_rel_test"] <= args.rtol and cmp["max_rel_figure"] <= args.rtol
    gp = grid["passes"]
    results = {
        "dataset": args.dataset, "label": data.label, "seed": args.seed, "quick": bool(args.quick),
        "n_train": data.n_train, "n_test": data.n_test, "d": data.d, "chunk_rows": args.chunk_rows,
        "workers": args.workers if not address else None, "scheduler": address,
        "grid_options": {"m": args.m, "m0": 10 * max(args.m), "sigma_factors": args.sigma_factors,
                         "lams": args.lams, "alphas": args.alphas, "rhos": args.rhos,
                         "cells": n_cells, "models": n_cells * len(args.alphas)},
        "sigma": grid["sigma"],
        "grid": {
            "seconds": t_grid, "times_s": times_grid,
            "passes": {"train": gp["train"], "test": gp["test"], "max_train_per_sigma_seed": gp["max_train_per_key"],
                       "max_test_per_sigma_seed": gp["max_test_per_key"], "chunk_reads": grid_reads},
        },
        "naive": {
            "seconds": t_naive, "times_s": times_naive,
            "passes": {**naive["passes"], "chunk_reads": naive_reads},
            "fits": len(sigmas) + sum(2 + (c.method != "RKS") for c in naive["cells"]),
        },
        "speedup": t_naive / t_grid,
        "pass_ratio": (naive["passes"]["train"] + naive["passes"]["test"]) / max(1, gp["train"] + gp["test"]),
        "agreement": {k: v for k, v in cmp.items() if k not in ("cells", "figure")} | {"rtol": args.rtol, "ok": ok},
        "figure": cmp["figure"],
        "cells": cmp["cells"],
    }

    np_ = results["naive"]["passes"]
    summary = table(
        ["side", "wall s", "train passes", "test passes", "chunk reads as passes (train + test)", "per (sigma, seed)"],
        [
            ["grid (fig2 workflow)", t_grid, gp["train"], gp["test"],
             f"{grid_reads['train']:g} + {grid_reads['test']:g}",
             f"<= {gp['max_train_per_key']} train + {gp['max_test_per_key']} test"],
            ["naive loop", t_naive, np_["train"], np_["test"], f"{naive_reads['train']:g} + {naive_reads['test']:g}",
             f"{results['naive']['fits']} separate fits"],
        ],
    )
    fig_rows = [[k] + [f"{v['grid']:.5f} / {v['naive']:.5f}" for v in cmp["figure"][k].values()] for k in cmp["figure"]]
    figure_md = table(["method \\ M (grid / naive)"] + [str(m) for m in args.m], fig_rows)
    agree = (
        f"Agreement ({n_cells} cells, {n_cells * len(args.alphas)} models): test MSE max relative difference "
        f"{cmp['max_rel_test']:.2e} per cell (same model), {cmp['max_rel_figure']:.2e} per (method, M) as each side "
        f"chose; validation MSE {cmp['max_rel_valid']:.2e}; different alpha chosen in {cmp['alpha_mismatches']} cells, "
        f"different features selected in {cmp['selection_mismatches']}; same sigma: {cmp['same_sigma']}; "
        f"tolerance {args.rtol:g}: {'OK' if ok else 'EXCEEDED'}."
    )
    md = (
        f"## fig2 grid vs naive loop: {data.label}, seed {args.seed}\n\n"
        f"{data.n_train} training / {data.n_test} test rows, d = {data.d}; M in {args.m} (M0 = 10 M, prefixes of "
        f"{10 * max(args.m)} candidates); {len(sigmas)} bandwidths, {len(args.lams)} lambdas, {len(args.rhos)} rhos, "
        f"{len(args.alphas)} alphas; chosen sigma = {grid['sigma']:.4g}.\n\n"
        + summary
        + f"\n\n**Speedup {results['speedup']:.1f}x** (naive {t_naive:.1f} s / grid {t_grid:.1f} s); passes "
        f"{np_['train'] + np_['test']} against {gp['train'] + gp['test']}.\n\n{agree}\n\n"
        f"Test MSE of the validation choice per (method, M):\n\n{figure_md}"
    )
    print()
    print(md, flush=True)
    write_results(args.out, NAME, results, md)
    return results

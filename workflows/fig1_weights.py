"""ELSS paper, figure 1: the empirical leverage weights for a small and a large lambda.

One pass over the training rows of a regression set accumulates the Gram of
``M0 = 2000`` candidate Gaussian random Fourier features (``N0 = N``: all
training rows). One eigendecomposition of ``G = (1/N) sum z~ z~^T`` gives the
ELSS weights ``q^_i = Q_ii / tr Q``, ``Q = G (G + lambda I)^{-1}``, for every
lambda. The figure shows their histograms for a small and a large lambda and
the probabilities over the candidate index; a small lambda (G nearly full
rank) gives nearly uniform weights (plain RKS), a large one concentrates them
on the candidates that carry the top of the spectrum.
"""

from __future__ import annotations

import argparse

import numpy as np

DESCRIPTION = "ELSS figure 1: histograms of the leverage weights for a small and a large lambda (M0 = 2000)"
NEEDS_CLIENT = True
NAME = "fig1-weights"

FULL = {"dataset": "protein", "n_rows": None, "m0": 2000, "lams": [1e-6, 1e-2], "sigma_factor": 1.0, "chunk_rows": 10_000}
QUICK = {"dataset": "protein", "n_rows": 4000, "m0": 500, "lams": [1e-6, 1e-2], "sigma_factor": 1.0, "chunk_rows": 1000}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._paper import add_common_arguments

    parser.add_argument("--dataset", default=None, help="regression set (default protein, the substitute for Online News Popularity)")
    parser.add_argument("--n-rows", type=int, default=None, help="use only the first rows")
    parser.add_argument("--m0", type=int, default=None, help="candidate features M0 (default 2000)")
    parser.add_argument("--lams", type=float, nargs=2, default=None, metavar=("SMALL", "LARGE"),
                        help="the small and the large lambda, on the scale of G (trace about 1); default 1e-6 1e-2")
    parser.add_argument("--sigma-factor", type=float, default=None,
                        help="bandwidth as a multiple of the median pairwise distance (default 1)")
    add_common_arguments(parser, NAME)


def data_sets(args: argparse.Namespace) -> list[str]:
    """The real data sets this run reads (``dxrf reproduce`` checks and fetches them before it starts)."""
    from ._paper import paper_data_sets

    return paper_data_sets(args, FULL, QUICK)


def run(args: argparse.Namespace) -> dict:
    from dxrf.selection import gram_spectrum, leverage_diagnostics, leverage_scores

    from ._common import table
    from ._paper import Experiment, fourier_kernel, pyplot, save_figure, say, stats_pass

    with Experiment(args, FULL, QUICK, "fig1") as exp:
        data = exp.load(args.dataset)
        sigma = args.sigma_factor * data.sigma_median
        say(f"{data.label}: {data.n_train} training rows, d = {data.d}; M0 = {args.m0} Gaussian RFF candidates, "
            f"sigma = {sigma:.3g} ({args.sigma_factor} x median distance)")
        kernel = fourier_kernel(data.d, args.m0, sigma, seed=0)
        (stats,) = stats_pass(data.X, None, [kernel])[0]
        exp.log.add("train", data.name, [(sigma, 0)], "Gram of the candidates")
    spectrum = gram_spectrum(stats)
    lams = np.asarray(sorted(args.lams), dtype=np.float64)
    weights, dof = leverage_scores(spectrum, lams)
    grid = np.logspace(-9, 0, 19)
    diag = leverage_diagnostics(spectrum, grid, bins=40)
    m0 = args.m0
    rows, per_lam = [], []
    for lam, w, d_lam in zip(lams, weights, dof):
        ratio = float(w.max() / w.min()) if w.min() > 0 else float("inf")
        eff = float(1.0 / np.sum(w**2))
        rows.append([f"{lam:.0e}", f"{d_lam:.1f}", f"{w.min() * m0:.3g}", f"{w.max() * m0:.3g}", f"{ratio:.3g}", f"{eff:.0f}"])
        per_lam.append({"lam": float(lam), "dof": float(d_lam), "min": float(w.min()), "max": float(w.max()),
                        "max_over_min": ratio, "effective_candidates": eff, "weights": w.tolist()})
    md = (
        f"ELSS weights q^ on {data.label}, M0 = {m0}, N0 = N = {data.n_train}, Gaussian kernel sigma = {sigma:.3g}\n\n"
        + table(["lambda", "d_lambda", "min M0·q", "max M0·q", "max/min", "1/Σq² (effective candidates)"], rows)
        + "\n\n" + " ".join(
            f"lambda = {lam:.0e}: {int(np.sum(spectrum.eigenvalues > lam))} of {m0} eigenvalues of G exceed lambda"
            + (" (G is far from full rank on this scale, so the weights are not uniform)."
               if np.sum(spectrum.eigenvalues > lam) < 0.9 * m0 else " (nearly full rank: nearly uniform weights).")
            for lam in lams)
    )
    plt = pyplot("fig1_weights.png", "fig1_dof.png")
    if plt is not None:
        fig, axes = plt.subplots(2, 2, figsize=(11, 7))
        for j, (lam, w) in enumerate(zip(lams, weights)):
            ax = axes[0, j]
            ax.hist(w * m0, bins=40, color="C0" if j == 0 else "C3")
            ax.set_title(f"lambda = {lam:.0e}: histogram of M0·q^ (1 = uniform)")
            ax.set_xlabel("M0 · q^_i")
            ax.set_ylabel("candidates")
            ax = axes[1, j]
            ax.plot(np.arange(m0), w, ".", ms=2, color="C0" if j == 0 else "C3")
            ax.axhline(1.0 / m0, color="k", lw=0.8, ls="--", label="uniform 1/M0")
            ax.set_title(f"lambda = {lam:.0e}: q^_i over the candidate index")
            ax.set_xlabel("candidate index i")
            ax.set_ylabel("q^_i")
            ax.legend(loc="upper right")
        fig.suptitle(f"ELSS weights, {data.label}, M0 = {m0}")
        save_figure(args, fig, "fig1_weights.png")
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        ax[0].loglog(grid, diag.dof, "o-")
        ax[0].set_xlabel("lambda")
        ax[0].set_ylabel("d_lambda = tr Q")
        ax[0].set_title("degrees of freedom")
        ax[1].semilogy(diag.eigenvalues, ".")
        ax[1].set_xlabel("k")
        ax[1].set_ylabel("eigenvalue of G")
        ax[1].set_title("spectrum of the normalised Gram")
        save_figure(args, fig, "fig1_dof.png")
    results = {
        "dataset": data.name,
        "label": data.label,
        "n_train": data.n_train,
        "m0": m0,
        "sigma": sigma,
        "sigma_median": data.sigma_median,
        "lams": per_lam,
        "dof_grid": {"lams": grid.tolist(), "dof": diag.dof.tolist()},
        "eigenvalues": diag.eigenvalues.tolist(),
    }
    return exp.finish("fig1_weights", results, md)

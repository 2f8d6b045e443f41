"""Leverage-weighted random Fourier features (Li, Ton, Oglic & Sejdinovic) against plain RFF.

Kernel ridge regression with M random Fourier features drawn i.i.d. from the
Gaussian spectral law (plain RFF) or from the empirical ridge leverage
distribution of Li et al.,

    p(w_i)  proportional to  [Z^T Z ((1/M0) Z^T Z + n lambda I)^{-1}]_ii

over ``M0`` candidate frequencies (``Z`` the ``N x M0`` matrix of
unnormalised candidate features), with weights ``1 / sqrt(M M0 p_i)``. As in
their analysis the leverage penalty is the ridge penalty: for every ridge
``alpha`` of the grid the features are drawn with ``lambda = alpha``
(``dxrf`` spelling: ``lam = N * alpha`` with ``lam_convention="unnormalized"``,
the penalty on the unnormalised Gram), the ridge is solved with that alpha,
and alpha is chosen on validation. Plain RFF takes the first M candidates.

Reported: test MSE on the scaled response (inputs standardised, response in
[-1, 1]) against M, mean +- std over seeds (seed s uses the published split
s), and the number of features each method needs to reach a target test
error: by default 1.05 times the best mean test error any method reaches at
the largest M (interpolated on log M between grid points).

Passes per (data set, sigma, seed): ONE over the training rows (statistics
of ``M0 = 3200`` candidates, training and validation rows) and ONE over the
test rows (their statistics give every model's exact test MSE). The
bandwidth is chosen on seed 0 from a log grid by plain RFF's validation MSE
at the largest M (one training pass per sigma).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

DESCRIPTION = "Leverage-weighted RFF (Li et al.) vs plain RFF: test MSE vs M and features needed for a target error"
NEEDS_CLIENT = True
NAME = "leverage-rff"

METHODS = ("RFF", "leverage-weighted RFF")
DATASETS = ["protein", "kin40k"]

FULL = {"datasets": DATASETS, "n_rows": None, "m": [10, 20, 40, 80, 160, 320], "m0": 3200, "seeds": 5,
         "sigma_factors": [0.25, 0.5, 1.0], "alphas": list(np.logspace(-8, -1, 8)), "target_rel": 1.05, "chunk_rows": 10_000}
QUICK = {"datasets": ["protein"], "n_rows": 3000, "m": [10, 20, 40, 80], "m0": 400, "seeds": 2,
          "sigma_factors": [0.5], "alphas": list(np.logspace(-7, -1, 4)), "target_rel": 1.05, "chunk_rows": 700}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._paper import add_common_arguments

    parser.add_argument("--datasets", nargs="+", default=None, help=f"regression sets (default {' '.join(DATASETS)})")
    parser.add_argument("--n-rows", type=int, default=None, help="use only the first rows of each file")
    parser.add_argument("--m", type=int, nargs="+", default=None, help="feature counts M (default 10 .. 320)")
    parser.add_argument("--m0", type=int, default=None, help="candidate frequencies M0 (default 3200)")
    parser.add_argument("--seeds", type=int, default=None, help="repetitions; seed s uses split s (default 5)")
    parser.add_argument("--sigma-factors", type=float, nargs="+", default=None,
                        help="bandwidth grid, multiples of the median pairwise distance (default 0.25 0.5 1)")
    parser.add_argument("--alphas", type=float, nargs="+", default=None,
                        help="ridge alpha grid = leverage lambda grid (default 1e-8 .. 1e-1)")
    parser.add_argument("--target-rel", type=float, default=None,
                        help="target test error = this x the best mean test error at the largest M (default 1.05)")
    add_common_arguments(parser, NAME)


def data_sets(args: argparse.Namespace) -> list[str]:
    """The real data sets this run reads (``dxrf reproduce`` checks and fetches them before it starts)."""
    from ._paper import paper_data_sets

    return paper_data_sets(args, FULL, QUICK)


def features_needed(ms: list[int], errors: list[float], target: float) -> float | None:
    """Smallest M reaching ``target`` on the grid, interpolated linearly in log M (None if never)."""
    for i, (m, e) in enumerate(zip(ms, errors)):
        if e <= target:
            if i == 0:
                return float(m)
            m1, e1 = ms[i - 1], errors[i - 1]
            t = (e1 - target) / (e1 - e) if e1 != e else 1.0
            return float(math.exp(math.log(m1) + t * (math.log(m) - math.log(m1))))
    return None


def seed_fits(train, valid, ms, m0, alphas, seed, spectrum):
    from dxrf.selection import select_features

    from ._fits import plain_fit, ridge_fit

    n = spectrum.n_samples
    fits = []
    for m in ms:
        fits.append(plain_fit(("RFF", m), train, valid, m, m0, alphas))
        rng = np.random.default_rng([seed, m, 3])
        for alpha in alphas:
            sel = select_features(spectrum, m, criterion="leverage", method="sample", lam=n * alpha,
                                  lam_convention="unnormalized", random_state=rng)
            fits.append(ridge_fit(("leverage-weighted RFF", m), {"lambda": float(alpha)}, 0, train, valid,
                                  sel.selected, sel.scales, [alpha]))
    return fits


def _regression_only(data) -> None:
    if not data.regression:
        raise ValueError(f"leverage-rff needs a regression set; {data.name!r} is {data.task}")


def run(args: argparse.Namespace) -> dict:
    from dxrf.selection import gram_spectrum

    from ._common import table
    from ._fits import choose, seed_candidates, test_mse_pass
    from ._paper import Experiment, dataset_label, dataset_panels, fmt_ms, mean_std, say

    with Experiment(args, FULL, QUICK, "levrff") as exp:
        m0 = args.m0
        if max(args.m) > m0:
            raise ValueError(f"the largest M ({max(args.m)}) exceeds M0 = {m0}")
        results = {"m": args.m, "m0": m0, "seeds": args.seeds, "alphas": args.alphas, "datasets": {}}
        sections = []
        for name in args.datasets:
            per_seed = []
            for c in seed_candidates(exp, name, m0, m=max(args.m), label="RFF", what="candidate statistics",
                                     check=_regression_only):
                data, seed, sigma, kernel, train, valid = c.data, c.seed, c.sigma, c.kernel, c.train, c.valid
                spectrum = gram_spectrum(train + valid)
                fits = seed_fits(train, valid, args.m, m0, args.alphas, seed, spectrum)
                test_mse_pass(data, {0: kernel}, fits, [(sigma, seed)], exp.log)
                best_fits = choose(fits)
                per_seed.append({key: (float(f.err["test"][j]), float(f.alphas[j])) for key, (f, j) in best_fits.items()})
                say(f"   seed {seed}: " + ", ".join(f"{k} {per_seed[-1][(k, max(args.m))][0]:.4f}" for k in METHODS)
                    + f" at M = {max(args.m)} ({exp.log.seconds():.0f} s since the start)")
            errs = {k: {m: [s[(k, m)][0] for s in per_seed] for m in args.m} for k in METHODS}
            alphas = {k: {m: [s[(k, m)][1] for s in per_seed] for m in args.m} for k in METHODS}
            means = {k: [mean_std(errs[k][m])[0] for m in args.m] for k in METHODS}
            target = args.target_rel * min(means[k][-1] for k in METHODS)
            needed = {k: features_needed(args.m, means[k], target) for k in METHODS}
            a, b = needed["leverage-weighted RFF"], needed["RFF"]
            fewer = a is not None and (b is None or a < b)
            claim = (f"Claim 'leverage-weighted RFF needs fewer features': {'holds' if fewer else 'does not hold'} here "
                     f"(leverage-weighted {f'{a:.0f}' if a else f'> {max(args.m)}'} vs plain "
                     f"{f'{b:.0f}' if b else f'> {max(args.m)}'} features for the target); lower mean test error at "
                     f"{sum(means['leverage-weighted RFF'][i] < means['RFF'][i] for i in range(len(args.m)))} of {len(args.m)} M.")
            rows = [[k] + [fmt_ms(errs[k][m]) for m in args.m] + [f"{needed[k]:.0f}" if needed[k] else f"> {max(args.m)}"]
                    for k in METHODS]
            sections.append(
                f"### {dataset_label(name)}\n\ntest MSE on the scaled response, mean ± std over {args.seeds} seeds; "
                f"sigma = {sigma:.3g}; M0 = {m0}; target error {target:.4f} ({args.target_rel} x the best mean at "
                f"M = {max(args.m)}); variance of the scaled test response {np.var(data.Ytm):.4f}\n\n"
                + table(["method \\ M"] + [str(m) for m in args.m] + ["M for target"], rows) + "\n\n" + claim
            )
            results["datasets"][name] = {
                "label": data.label, "n_train": data.n_train, "n_test": data.n_test, "sigma": sigma,
                "test_mse": {k: {str(m): v for m, v in d.items()} for k, d in errs.items()},
                "mean": {k: dict(zip(map(str, args.m), v)) for k, v in means.items()},
                "std": {k: {str(m): mean_std(errs[k][m])[1] for m in args.m} for k in METHODS},
                "chosen_alpha": {k: {str(m): v for m, v in d.items()} for k, d in alphas.items()},
                "target": target, "features_needed": needed, "variance": float(np.var(data.Ytm)), "fewer_features": fewer,
            }

    def draw(ax, r: dict) -> None:
        for k in METHODS:
            ax.errorbar(args.m, [r["mean"][k][str(m)] for m in args.m], yerr=[r["std"][k][str(m)] for m in args.m],
                        marker="o", ms=3, capsize=2, label=k)
        ax.axhline(r["target"], color="k", lw=0.8, ls=":", label="target error")
        ax.set_xscale("log", base=2)
        ax.set_xticks(args.m, [str(m) for m in args.m])
        ax.set_xlabel("number of features M")
        ax.set_ylabel("test MSE (scaled y)")

    dataset_panels(args, "leverage_rff.png", results["datasets"], draw, legend_size=8,
                   title="Leverage-weighted vs plain RFF (kernel ridge regression)")
    md = "## Leverage-weighted RFF (Li, Ton, Oglic & Sejdinovic) vs plain RFF\n\n" + "\n\n".join(sections)
    return exp.finish("leverage_rff", results, md)

"""ELSS paper, figure 2: test error against the number of features M.

Methods: RKS (plain random Fourier features), LKRF (Sinha & Duchi), EERF
(Shahrampour, Beirami & Tarokh), ELSS Algorithm 1 (leverage sampling) and
ELSS Algorithm 2 (top leverage), on Adult, Epileptic Seizure (y == 1 vs rest)
and the regression sets protein and keggundirected, which are SUBSTITUTES for
Online News Popularity and YearPredictionMSD (not available offline).

Protocol (section V): inputs standardised, responses scaled into [-1, 1];
Gaussian kernel; ``M0 = 10 M``, ``N0 = N``, ``M`` in {10, ..., 320}; the ELSS
lambda, the LKRF rho and the ridge alpha chosen on a validation split (20 % of
the training rows); 10 seeds; mean +- std of the test error (MSE on the
scaled response, or misclassification rate).

Passes, per (data set, sigma, seed): ONE pass over the training rows
accumulates the statistics of ``10 * max(M) = 3200`` candidates for training
and validation rows; each smaller ``M0 = 10 M`` is a prefix of those
candidates, whose statistics are a sub-block. Every (method, M, lambda, rho,
alpha) is then small dense algebra. Regression: ONE pass over the test rows
accumulates their statistics, which give the exact test MSE of every model.
Classification: one prediction pass over the training rows scores the 0-1
error of EVERY candidate model on the validation rows (and the training
rows), and one over the test rows does the same for the test error - all
models stacked in one matrix on the candidate features. So at most 2 passes
over training data and 1 over test data per (data set, sigma, seed).

The bandwidth: a log grid of multiples of the median pairwise distance. It is
chosen per data set on seed 0 (the first split) by the validation error of
RKS at the largest M (the plain kernel approximation: the kernel is a
hyperparameter shared by all methods), from the statistics of each sigma's
training pass (for classification the validation squared error of the +-1
least-squares fit). The other seeds use the chosen sigma only.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

DESCRIPTION = "ELSS figure 2: test error vs M for RKS, LKRF, EERF, ELSS-1, ELSS-2 on four real sets"
NEEDS_CLIENT = True
NAME = "fig2-error-vs-m"

METHODS = ("RKS", "LKRF", "EERF", "ELSS-1", "ELSS-2")
METHOD_NAMES = {
    "RKS": "RKS (plain RFF)",
    "LKRF": "LKRF (Sinha & Duchi)",
    "EERF": "EERF (energy-based)",
    "ELSS-1": "ELSS Algorithm 1 (sample)",
    "ELSS-2": "ELSS Algorithm 2 (top)",
}
DATASETS = ["protein", "keggundirected", "adult", "epileptic_seizure"]

FULL = {
    "datasets": DATASETS, "n_rows": None, "m": [10, 20, 40, 80, 160, 320], "seeds": 10,
    "sigma_factors": [0.25, 0.5, 1.0, 2.0], "lams": list(np.logspace(-6, -1, 6)), "alphas": list(np.logspace(-7, 0, 8)),
    "rhos": [0.1, 1.0, 10.0], "chunk_rows": 10_000,
}
QUICK = {
    "datasets": DATASETS, "n_rows": 2500, "m": [10, 20, 40], "seeds": 2,
    "sigma_factors": [0.5, 1.0], "lams": [1e-5, 1e-3, 1e-1], "alphas": list(np.logspace(-6, 0, 4)),
    "rhos": [1.0], "chunk_rows": 700,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._paper import add_common_arguments

    parser.add_argument("--datasets", nargs="+", default=None, help=f"data sets (default {' '.join(DATASETS)})")
    parser.add_argument("--n-rows", type=int, default=None, help="use only the first rows of each file")
    parser.add_argument("--m", type=int, nargs="+", default=None, help="feature counts M (default 10 20 40 80 160 320)")
    parser.add_argument("--seeds", type=int, default=None, help="repetitions: seed s uses split s (default 10)")
    parser.add_argument("--sigma-factors", type=float, nargs="+", default=None,
                        help="bandwidth grid, multiples of the median pairwise distance (default 0.25 0.5 1 2)")
    parser.add_argument("--lams", type=float, nargs="+", default=None, help="ELSS lambda grid (default 1e-6 .. 1e-1)")
    parser.add_argument("--alphas", type=float, nargs="+", default=None, help="ridge alpha grid (default 1e-7 .. 1)")
    parser.add_argument("--rhos", type=float, nargs="+", default=None, help="LKRF rho grid (default 0.1 1 10)")
    add_common_arguments(parser, NAME)


def method_fits(train, valid, ms, m0, lams, rhos, alphas, seed, regression, spectra):
    """Every (method, M, parameter) of the figure as ridge paths on sub-blocks of the statistics."""
    from dxrf.selection import gram_spectrum, select_features

    from ._paper import plain_fit, prefix, ridge_fit

    fits = []
    for m in ms:
        p = 10 * m
        up = math.sqrt(m0 / p)  # a prefix candidate's scale relative to the full candidate map
        tr_p = prefix(train, p)
        if p not in spectra:
            spectra[p] = gram_spectrum(prefix(train + valid, p))  # N0 = N: all training inputs
        spec = spectra[p]
        rng = np.random.default_rng([seed, m])
        fits.append(plain_fit(("RKS", m), train, valid, m, m0, alphas))
        for name, how in (("ELSS-1", "sample"), ("ELSS-2", "top")):
            for lam in lams:
                sel = select_features(spec, m, criterion="leverage", method=how, lam=lam, random_state=rng)
                fits.append(ridge_fit((name, m), {"lam": float(lam)}, 0, train, valid, sel.selected, sel.scales * up, alphas))
        sel = select_features(tr_p, m, criterion="energy", method="top", standardize=regression)
        fits.append(ridge_fit(("EERF", m), {}, 0, train, valid, sel.selected, sel.scales * up, alphas))
        for rho in rhos:
            sel = select_features(tr_p, m, criterion="alignment", method="sample", rho=rho, standardize=regression,
                                  random_state=rng)
            fits.append(ridge_fit(("LKRF", m), {"rho": float(rho)}, 0, train, valid, sel.selected, sel.scales * up, alphas))
    return fits


def select_sigma(data, grid, seed: int, args, log):
    """The bandwidth of ``grid`` whose RKS fit at the largest M has the lowest validation MSE.

    One candidate pass of ``10 * max(M)`` candidates per bandwidth
    (:func:`workflows._paper.select_sigma`). Returns ``(sigma, kernel, train,
    valid, scores)``: the chosen bandwidth with its candidate kernel and
    statistics, and ``{"sigma", "rks_valid_mse"}`` per bandwidth.
    """
    from . import _paper

    m = max(args.m)
    sigma, kernel, train, valid, scores = _paper.select_sigma(data, grid, seed, log, m=m, m0=10 * m, alphas=args.alphas)
    return sigma, kernel, train, valid, sigma_scores(grid, scores)


def sigma_scores(grid, scores) -> list[dict]:
    """The bandwidths' validation MSEs as the results record them."""
    return [{"sigma": sigma, "rks_valid_mse": v} for sigma, v in zip(grid, scores)]


def seed_fits(data, kernel, train, valid, sigma, seed, args, log) -> list:
    """Every (method, M, parameter) of one seed with its whole ridge path and its errors.

    Each :class:`~workflows._paper.Fit` holds, per alpha, the training,
    validation and test errors: from the candidate statistics and ONE pass
    over the test rows (regression), or from prediction passes scoring all
    models at once (classification: one over the training rows, one over the
    test rows).
    """
    from ._paper import error_passes, test_mse_pass

    m0 = kernel.n_components
    fits = method_fits(train, valid, args.m, m0, args.lams, args.rhos, args.alphas, seed, data.regression, {})
    if data.regression:
        test_mse_pass(data, {0: kernel}, fits, [(sigma, seed)], log)
    else:
        error_passes(data, {0: kernel}, fits, [(sigma, seed)], log, seed=seed, n_valid=valid.n)
    return fits


def evaluate_seed(data, kernel, train, valid, sigma, seed, args, log):
    """Test errors of every method and M for one seed, choices made on validation."""
    from ._paper import choose

    best = choose(seed_fits(data, kernel, train, valid, sigma, seed, args, log))
    out = {}
    for (method, m), (f, j) in best.items():
        out[(method, m)] = {
            "test": float(f.err["test"][j]),
            "valid": float(f.err["valid"][j]),
            "params": {**f.params, "alpha": float(f.alphas[j])},
        }
    return out


def run(args: argparse.Namespace) -> dict:
    from ._common import table
    from ._paper import Experiment, dataset_label, dataset_panels, fmt_ms, mean_std, say, seed_candidates

    with Experiment(args, FULL, QUICK, "fig2") as exp:
        m0 = 10 * max(args.m)
        results = {"m": args.m, "m0": m0, "seeds": args.seeds, "sigma_factors": args.sigma_factors, "lams": args.lams,
                   "alphas": args.alphas, "rhos": args.rhos, "datasets": {}}
        sections = []
        for name in args.datasets:
            per_seed = []
            info = {}
            for c in seed_candidates(exp, name, m0, m=max(args.m)):
                data = c.data
                error_kind = "test MSE (scaled response)" if data.regression else "test misclassification rate"
                if c.scores is not None:
                    info["sigma_validation"] = sigma_scores(c.grid, c.scores)
                    info["sigma"] = c.sigma
                    say(f"   chosen sigma = {c.sigma:.3g}")
                per_seed.append(evaluate_seed(data, c.kernel, c.train, c.valid, c.sigma, c.seed, args, exp.log))
                say(f"   seed {c.seed}: " + ", ".join(f"{k} {per_seed[-1][(k, max(args.m))]['test']:.4f}" for k in METHODS)
                    + f"  (M = {max(args.m)}; {exp.log.seconds():.0f} s)")
            errs = {k: {m: [s[(k, m)]["test"] for s in per_seed] for m in args.m} for k in METHODS}
            chosen = {k: {m: [s[(k, m)]["params"] for s in per_seed] for m in args.m} for k in METHODS}
            majority = None if data.regression else 1.0 - float(max(np.mean(data.Ytm == c) for c in (0, 1)))
            baseline = float(np.var(data.Ytm)) if data.regression else majority
            results["datasets"][name] = {
                "label": data.label, "task": data.task, "error": error_kind, "n_train": data.n_train, "n_test": data.n_test,
                "d": data.d, **info,
                "test_error": {k: {str(m): v for m, v in d.items()} for k, d in errs.items()},
                "mean": {k: {str(m): mean_std(v)[0] for m, v in d.items()} for k, d in errs.items()},
                "std": {k: {str(m): mean_std(v)[1] for m, v in d.items()} for k, d in errs.items()},
                "chosen": {k: {str(m): v for m, v in d.items()} for k, d in chosen.items()},
                "baseline": baseline,
                "baseline_kind": "variance of the scaled test response (predicting the mean)" if data.regression
                else "error of predicting the majority class on the test rows",
            }
            rows = [[METHOD_NAMES[k]] + [fmt_ms(errs[k][m]) for m in args.m] for k in METHODS]
            mean = {k: {m: float(np.mean(errs[k][m])) for m in args.m} for k in METHODS}
            better = [m for m in args.m if mean["ELSS-1"][m] < mean["RKS"][m]]
            paired = {m: int(sum(a < b for a, b in zip(errs["ELSS-1"][m], errs["RKS"][m]))) for m in args.m}
            ratio = {m: mean["ELSS-2"][m] / min(mean["EERF"][m], mean["LKRF"][m]) for m in args.m}
            results["datasets"][name]["claims"] = {
                "elss1_beats_rks_at_m": better, "elss1_wins_over_rks_per_m": {str(m): v for m, v in paired.items()},
                "elss2_over_best_of_eerf_lkrf": {str(m): v for m, v in ratio.items()},
            }
            claims_md = (
                f"Claim 'ELSS Algorithm 1 beats RKS': lower mean test error at {len(better)} of {len(args.m)} M "
                f"({', '.join(map(str, better)) or 'none'}); seeds where it wins (same candidates, paired): "
                + ", ".join(f"M={m}: {paired[m]}/{args.seeds}" for m in args.m)
                + ". Claim 'Algorithm 2 comes close to EERF and LKRF': ELSS-2 / best of (EERF, LKRF) = "
                + ", ".join(f"{ratio[m]:.3f}" for m in args.m)
                + f" (worst {max(ratio.values()):.3f})."
            )
            sections.append(
                f"### {dataset_label(name)}\n\n{error_kind}, mean ± std over {args.seeds} seeds; sigma = {info['sigma']:.3g}; "
                f"M0 = 10·M (prefixes of {m0} candidates); baseline ({results['datasets'][name]['baseline_kind']}) = {baseline:.4f}\n\n"
                + table(["method \\ M"] + [str(m) for m in args.m], rows) + "\n\n" + claims_md
            )

    def draw(ax, r: dict) -> None:
        for k in METHODS:
            mu = [r["mean"][k][str(m)] for m in args.m]
            sd = [r["std"][k][str(m)] for m in args.m]
            ax.errorbar(args.m, mu, yerr=sd, marker="o", ms=3, capsize=2, label=METHOD_NAMES[k])
        ax.set_xscale("log", base=2)
        ax.set_xticks(args.m, [str(m) for m in args.m])
        ax.set_xlabel("number of features M")
        ax.set_ylabel("test MSE (scaled y)" if r["task"] == "regression" else "test misclassification")

    dataset_panels(args, "fig2_error_vs_m.png", results["datasets"], draw, cols=min(2, len(results["datasets"])),
                   width=6, legend_size=8, title=f"ELSS figure 2: test error vs M (mean ± std over {args.seeds} seeds)")
    md = "## ELSS figure 2: test error against M\n\n" + "\n\n".join(sections)
    return exp.finish("fig2_error_vs_m", results, md)

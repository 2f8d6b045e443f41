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

    from ._paper import prefix, ridge_fit

    fits = []
    for m in ms:
        p = 10 * m
        up = math.sqrt(m0 / p)  # a prefix candidate's scale relative to the full candidate map
        tr_p = prefix(train, p)
        if p not in spectra:
            spectra[p] = gram_spectrum(prefix(train + valid, p))  # N0 = N: all training inputs
        spec = spectra[p]
        rng = np.random.default_rng([seed, m])
        fits.append(ridge_fit(("RKS", m), {}, 0, train, valid, np.arange(m), np.full(m, math.sqrt(m0 / m)), alphas))
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


def rks_validation(train, valid, m, m0, alphas) -> float:
    from ._paper import ridge_fit

    f = ridge_fit(("RKS", m), {}, 0, train, valid, np.arange(m), np.full(m, math.sqrt(m0 / m)), alphas)
    return float(f.mse["valid"].min())


def candidate_pass(data, sigma: float, seed: int, m0: int, log):
    """ONE pass over the training rows: statistics of ``m0`` candidates for training and validation rows.

    Returns ``(kernel, train, valid)``; the pass is recorded in ``log``.
    """
    from ._paper import VALIDATION_FRACTION, fourier_kernel, stats_pass

    kernel = fourier_kernel(data.d, m0, sigma, seed)
    train, valid = stats_pass(data.X, data.T, [kernel], fraction=VALIDATION_FRACTION, seed=seed)[0]
    log.add("train", data.name, [(sigma, seed)], "candidate statistics (train + validation)")
    return kernel, train, valid


def select_sigma(data, grid, seed: int, args, log):
    """The bandwidth of ``grid`` whose RKS fit at the largest M has the lowest validation MSE.

    One candidate pass per bandwidth (:func:`candidate_pass`). Returns
    ``(sigma, kernel, train, valid, scores)``: the chosen bandwidth with its
    candidate kernel and statistics, and ``{"sigma", "rks_valid_mse"}`` per
    bandwidth.
    """
    from ._paper import say

    m0 = 10 * max(args.m)
    best = None
    scores = []
    for sigma in grid:
        kernel, train, valid = candidate_pass(data, sigma, seed, m0, log)
        v = rks_validation(train, valid, max(args.m), m0, args.alphas)
        scores.append({"sigma": sigma, "rks_valid_mse": v})
        say(f"   sigma = {sigma:.3g}: validation MSE of RKS at M = {max(args.m)}: {v:.4g}")
        if best is None or v < best[0]:
            best = (v, sigma, kernel, train, valid)
    _, sigma, kernel, train, valid = best
    return sigma, kernel, train, valid, scores


def seed_fits(data, kernel, train, valid, sigma, seed, args, log) -> list:
    """Every (method, M, parameter) of one seed with its whole ridge path and its errors.

    Each :class:`~workflows._paper.Fit` holds, per alpha, the training,
    validation and test errors: from the candidate statistics and ONE pass
    over the test rows (regression), or from prediction passes scoring all
    models at once (classification: one over the training rows, one over the
    test rows).
    """
    from ._paper import (
        VALIDATION_FRACTION,
        add_mse,
        assign_errors,
        error_pass,
        model_groups,
        regression_errors,
        stats_pass,
    )

    m0 = kernel.n_components
    fits = method_fits(train, valid, args.m, m0, args.lams, args.rhos, args.alphas, seed, data.regression, {})
    if data.regression:
        (test,) = stats_pass(data.X_test, data.T_test, [kernel])[0]
        log.add("test", data.name, [(sigma, seed)], "test statistics")
        add_mse(fits, "test", {0: test})
        regression_errors(fits)
    else:
        groups, layout = model_groups(fits, {0: kernel})
        n_models = groups[0].coef.shape[0]
        res = error_pass(data.X, data.labels, groups, fraction=VALIDATION_FRACTION, seed=seed)
        if res[1][0].n != valid.n:  # the prediction pass must see exactly the statistics' validation rows
            raise RuntimeError(f"validation rows differ: {res[1][0].n} in the prediction pass, {valid.n} in the statistics")
        log.add("train", data.name, [(sigma, seed)], f"0-1 errors of {n_models} models on training/validation rows")
        assign_errors(layout, res, ("train", "valid"))
        res = error_pass(data.X_test, data.labels_test, groups)
        log.add("test", data.name, [(sigma, seed)], f"0-1 errors of {n_models} models on test rows")
        assign_errors(layout, res, ("test", None))
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
    from ._paper import (
        PassLog,
        Workdir,
        dataset_label,
        finish,
        fmt_ms,
        load_data,
        mean_std,
        out_path,
        pyplot,
        resolve_options,
        say,
        short_label,
    )

    resolve_options(args, FULL, QUICK)
    m0 = 10 * max(args.m)
    log = PassLog()
    results = {"m": args.m, "m0": m0, "seeds": args.seeds, "sigma_factors": args.sigma_factors, "lams": args.lams,
               "alphas": args.alphas, "rhos": args.rhos, "datasets": {}}
    sections = []
    with Workdir("fig2") as wd:
        for name in args.datasets:
            per_seed = []
            info = {}
            for seed in range(args.seeds):
                data = load_data(name, wd, chunk_rows=args.chunk_rows, n_rows=args.n_rows, rep=seed)
                error_kind = "test MSE (scaled response)" if data.regression else "test misclassification rate"
                if seed == 0:
                    grid = [f * data.sigma_median for f in args.sigma_factors]
                    say(f"\n== {data.label}: {data.n_train} training / {data.n_test} test rows, d = {data.d}; "
                        f"M0 = {m0}; sigma grid {[round(s, 3) for s in grid]}")
                    sigma, kernel, train, valid, info["sigma_validation"] = select_sigma(data, grid, seed, args, log)
                    info["sigma"] = sigma
                    say(f"   chosen sigma = {sigma:.3g}")
                else:
                    kernel, train, valid = candidate_pass(data, sigma, seed, m0, log)
                per_seed.append(evaluate_seed(data, kernel, train, valid, sigma, seed, args, log))
                say(f"   seed {seed}: " + ", ".join(f"{k} {per_seed[-1][(k, max(args.m))]['test']:.4f}" for k in METHODS)
                    + f"  (M = {max(args.m)}; {log.seconds():.0f} s)")
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
    plt = pyplot()
    names = list(results["datasets"])
    cols = min(2, len(names))
    rows_n = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(6 * cols, 4.2 * rows_n), squeeze=False)
    for ax, name in zip(axes.ravel(), names):
        r = results["datasets"][name]
        for k in METHODS:
            mu = [r["mean"][k][str(m)] for m in args.m]
            sd = [r["std"][k][str(m)] for m in args.m]
            ax.errorbar(args.m, mu, yerr=sd, marker="o", ms=3, capsize=2, label=METHOD_NAMES[k])
        ax.set_xscale("log", base=2)
        ax.set_xticks(args.m, [str(m) for m in args.m])
        ax.set_xlabel("number of features M")
        ax.set_ylabel("test MSE (scaled y)" if r["task"] == "regression" else "test misclassification")
        ax.set_title(short_label(name), fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=8)
    fig.suptitle(f"ELSS figure 2: test error vs M (mean ± std over {args.seeds} seeds)")
    fig.tight_layout()
    fig.savefig(out_path(args, "fig2_error_vs_m.png"), dpi=120)
    plt.close(fig)
    md = "## ELSS figure 2: test error against M\n\n" + "\n\n".join(sections)
    return finish(args, "fig2_error_vs_m", results, md, log)

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

The grid is a client of the public model search (:class:`dxrf.RandomFeatureRidgeCV`,
:class:`dxrf.RandomFeatureClassifierCV`, see :func:`seed_search`). Passes, per
(data set, sigma, seed): regression reads the training rows twice, first for
the plain features of every bandwidth searched, then for the statistics of
``10 * max(M) = 3200`` candidates at the chosen bandwidth, for training and
validation rows (classification: one read of the candidates of every
bandwidth); each smaller ``M0 = 10 M`` is a prefix of
those candidates (``candidate_ratio=10``), whose statistics are a sub-block.
Every (method, M, lambda, rho, alpha) is then small dense algebra in the
search. Classification: the search's second pass over the training rows
scores the validation 0-1 error of EVERY configuration (``scoring="accuracy"``).
Then ONE pass over the test rows scores the models chosen per (method, M)
(kept by the search, ``score_configurations``). So at most 2 passes over
training data and 1 over test data per (data set, sigma, seed).

The bandwidth: a log grid of multiples of the median pairwise distance. It is
chosen per data set on seed 0 (the first split) by the validation error of
RKS at the largest M (the plain kernel approximation: the kernel is a
hyperparameter shared by all methods), from the one search of seed 0 over
every bandwidth (for classification the validation squared error of the +-1
least-squares fit). The other seeds search the chosen sigma only.

The draws: the candidates of seed ``s`` are ``RandomFourierFeatures(M0,
random_state=s)``; ELSS Algorithm 1 and LKRF draw as their selectors with
``random_state=s`` do (each M its own generator).
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


def data_sets(args: argparse.Namespace) -> list[str]:
    """The real data sets this run reads (``dxrf reproduce`` checks and fetches them before it starts)."""
    from ._paper import paper_data_sets

    return paper_data_sets(args, FULL, QUICK)


SELECTIONS = {"RKS": "none", "LKRF": "lkrf", "EERF": "eerf", "ELSS-1": "elss-sample", "ELSS-2": "elss-top"}
"""Each method's selection in the public model search."""


def seed_search(data, bandwidths, seed: int, args, log):
    """The public search of one seed: every (bandwidth, method, M, lambda | rho, alpha) from one pass.

    :func:`workflows._search.search_fit` with the figure's protocol:
    ``M0 = 10 M`` candidates for each M (a prefix of ``10 max(M)``
    candidates, ``candidate_ratio=10``), validation on 20 % of the training
    rows (hashed with ``seed``), ELSS with ``N0 = N``, and the bandwidth as a
    kernel parameter shared by every method: the selections are searched only
    at the bandwidth where RKS at the largest M validates best (the figure's
    choice of sigma). For regression that is ``bandwidth_choice="plain-first"``:
    one read of the plain features at every sigma, a second of all ``M0``
    candidates at the chosen sigma (the candidates' Gram formed once, not once
    per sigma). A classifier's search already reads X a second time to score
    every configuration's 0-1 error, so it keeps ``"plain"`` (one read of all
    candidates at every sigma) to stay within 2 training passes.
    """
    from ._search import search_fit

    m0 = 10 * max(args.m)
    return search_fit(data, log, bandwidths=bandwidths, seed=seed, n_components=args.m,
                      selections=list(SELECTIONS.values()), lams=args.lams, rhos=args.rhos, alphas=args.alphas,
                      n_candidates=m0, candidate_ratio=10, bandwidth_choice="plain-first" if data.regression else "plain",
                      what=f"candidate statistics of {len(bandwidths)} bandwidth(s) (train + validation)")


def sigma_scores(est, grid, args) -> list[dict]:
    """Each bandwidth's validation MSE of RKS at the largest M (lowest over alpha), as the results record it."""
    from ._search import search_rows

    r = est.cv_results_
    mse = np.nan_to_num(np.asarray(r["mean_validation_mse"], dtype=np.float64), nan=np.inf)
    return [{"sigma": s, "rks_valid_mse": float(mse[search_rows(r, bandwidth=s, selection="none", n_components=max(args.m))].min())}
            for s in grid]


def cell_rows(est, sigma: float, args) -> dict:
    """Rows of ``cv_results_`` per cell ``(method, M, lam | rho)`` at bandwidth ``sigma``: one per alpha."""
    from ._search import search_rows

    r = est.cv_results_
    out = {}
    for method, selection in SELECTIONS.items():
        penalties = {"elss-sample": "lam", "elss-top": "lam", "lkrf": "rho"}.get(selection)
        values = [None] if penalties is None else (args.lams if penalties == "lam" else args.rhos)
        for m in args.m:
            for v in values:
                where = {"bandwidth": sigma, "selection": selection, "n_components": m}
                if penalties is not None:
                    where[penalties] = float(v)
                params = {} if penalties is None else {penalties: float(v)}
                out[(method, m, tuple(params.items()))] = search_rows(r, **where)
    return out


def evaluate_seed(data, est, sigma: float, seed: int, args, log):
    """Test errors of every method and M for one seed, choices made on validation.

    The choice per (method, M) among its penalties and alphas is made on
    the validation rows (:func:`workflows._search.best_row`); ONE pass over
    the test rows then scores the chosen models (kept by the search).
    """
    from ._search import best_row, row_params, test_errors, validation_error

    r = est.cv_results_
    classification = not data.regression
    valid = validation_error(r, classification)
    cells = cell_rows(est, sigma, args)
    chosen = {}
    for method in SELECTIONS:
        for m in args.m:
            rows = np.concatenate([v for (k, mm, _), v in cells.items() if (k, mm) == (method, m)])
            chosen[(method, m)] = best_row(r, rows, classification)
    (test,) = test_errors([(est, list(chosen.values()))], data, log, [(sigma, seed)], "errors of the chosen models on test rows")
    return {key: {"test": test[row], "valid": float(valid[row]), "params": row_params(r, row)} for key, row in chosen.items()}


def run(args: argparse.Namespace) -> dict:
    from ._common import table
    from ._paper import Experiment, dataset_label, dataset_panels, fmt_ms, headline, mean_std, say

    with Experiment(args, FULL, QUICK, "fig2") as exp:
        m0 = 10 * max(args.m)
        results = {"m": args.m, "m0": m0, "seeds": args.seeds, "sigma_factors": args.sigma_factors, "lams": args.lams,
                   "alphas": args.alphas, "rhos": args.rhos, "datasets": {}}
        sections = []
        for name in args.datasets:
            per_seed = []
            info = {}
            sigma = math.nan
            for seed in range(args.seeds):
                data = exp.load(name, rep=seed)
                error_kind = "test MSE (scaled response)" if data.regression else "test misclassification rate"
                if seed == 0:
                    grid = [f * data.sigma_median for f in args.sigma_factors]
                    headline(data, f"M0 = 10 M (prefixes of {m0}); sigma grid {[round(s, 3) for s in grid]} in one pass")
                    est = seed_search(data, grid, seed, args, exp.log)
                    scores = sigma_scores(est, grid, args)
                    for sc in scores:
                        say(f"   sigma = {sc['sigma']:.3g}: validation MSE of RKS at M = {max(args.m)}: {sc['rks_valid_mse']:.4g}")
                    sigma = grid[int(np.argmin([sc["rks_valid_mse"] for sc in scores]))]
                    info["sigma_validation"] = scores
                    info["sigma"] = sigma
                    say(f"   chosen sigma = {sigma:.3g}")
                else:
                    est = seed_search(data, [sigma], seed, args, exp.log)
                per_seed.append(evaluate_seed(data, est, sigma, seed, args, exp.log))
                say(f"   seed {seed}: " + ", ".join(f"{k} {per_seed[-1][(k, max(args.m))]['test']:.4f}" for k in METHODS)
                    + f"  (M = {max(args.m)}; {exp.log.seconds():.0f} s since the start)")
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

"""ELSS paper, figure 3: training and test error against lambda, Algorithms 1 and 2.

For a fixed number of features M (``M0 = 10 M`` candidates), each lambda of
a log grid gets 50 repetitions (fresh candidates, fresh validation choice of
the ridge alpha, and for Algorithm 1 a fresh sample); the figure shows the
mean +- std of the training and the test error for ELSS Algorithm 1
(leverage sampling) and Algorithm 2 (top leverage), with plain RKS as a
reference line. Data sets as in figure 2 (protein and keggundirected are
SUBSTITUTES for Online News Popularity and YearPredictionMSD).

Each repetition ``r`` is one public model search (:class:`dxrf.RandomFeatureRidgeCV`,
:class:`dxrf.RandomFeatureClassifierCV`; candidates and draws seeded by ``r``,
the validation rows of seed 0 for all): ONE pass over the training rows
accumulates the statistics of its candidates for every sigma of the grid, and
every (algorithm, lambda, alpha) with its training and validation errors is
algebra on them (``return_train_score``; classification: the search's second
pass scores the training and validation 0-1 errors of every configuration).
sigma is chosen on validation (mean over repetitions of RKS's validation
error at M). Then ONE pass over the test rows scores the chosen models of
every repetition at once (kept by the searches, ``fold_models``). So at most
2 passes over training and 1 over test data per (data set, sigma, seed =
repetition).

"Training error" is the error on the training rows that fitted the model
(the validation rows excluded).
"""

from __future__ import annotations

import argparse

import numpy as np

DESCRIPTION = "ELSS figure 3: training and test error vs lambda for Algorithms 1 and 2 (mean ± std over 50 repetitions)"
NEEDS_CLIENT = True
NAME = "fig3-lambda"

DATASETS = ["protein", "keggundirected", "adult", "epileptic_seizure"]
SELECTIONS = {"ELSS-1": "elss-sample", "ELSS-2": "elss-top"}
"""Each algorithm's selection in the public model search."""
ALG_NAMES = {"ELSS-1": "Algorithm 1 (sample)", "ELSS-2": "Algorithm 2 (top)"}

FULL = {
    "datasets": DATASETS, "n_rows": None, "m": 20, "reps": 50, "sigma_factors": [0.5, 1.0, 2.0],
    "lams": list(np.logspace(-8, 0, 17)), "alphas": list(np.logspace(-7, 0, 8)), "chunk_rows": 10_000,
}
QUICK = {
    "datasets": ["protein", "adult"], "n_rows": 2500, "m": 20, "reps": 4, "sigma_factors": [0.5, 1.0],
    "lams": list(np.logspace(-6, 0, 4)), "alphas": list(np.logspace(-6, 0, 4)), "chunk_rows": 700,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._paper import add_common_arguments

    parser.add_argument("--datasets", nargs="+", default=None, help=f"data sets (default {' '.join(DATASETS)})")
    parser.add_argument("--n-rows", type=int, default=None, help="use only the first rows of each file")
    parser.add_argument("--m", type=int, default=None, help="number of features M (default 20; M0 = 10 M)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per lambda (default 50)")
    parser.add_argument("--sigma-factors", type=float, nargs="+", default=None,
                        help="bandwidth grid, multiples of the median pairwise distance (default 0.5 1 2)")
    parser.add_argument("--lams", type=float, nargs="+", default=None, help="lambda grid (default 1e-8 .. 1, 17 values)")
    parser.add_argument("--alphas", type=float, nargs="+", default=None, help="ridge alpha grid (default 1e-7 .. 1)")
    add_common_arguments(parser, NAME)


def data_sets(args: argparse.Namespace) -> list[str]:
    """The real data sets this run reads (``dxrf reproduce`` checks and fetches them before it starts)."""
    from ._paper import paper_data_sets

    return paper_data_sets(args, FULL, QUICK)


def run(args: argparse.Namespace) -> dict:
    from ._common import table
    from ._paper import Experiment, dataset_label, dataset_panels, fmt_ms, headline, mean_std, say
    from ._search import best_row, search_fit, search_rows, test_errors

    with Experiment(args, FULL, QUICK, "fig3") as exp:
        m, m0, reps = args.m, 10 * args.m, args.reps
        lams = np.asarray(args.lams, dtype=np.float64)
        results = {"m": m, "m0": m0, "reps": reps, "lams": lams.tolist(), "alphas": args.alphas,
                   "sigma_factors": args.sigma_factors, "datasets": {}}
        sections = []
        for name in args.datasets:
            data = exp.load(name, rep=0)
            classification = not data.regression
            grid = [f * data.sigma_median for f in args.sigma_factors]
            headline(data, f"M = {m}, M0 = {m0}; {reps} repetitions, each one search of {len(grid)} sigmas")
            # one search per repetition (its own candidates, seed r), every sigma from its one pass;
            # the validation rows are those of seed 0 for every repetition
            searches = [
                search_fit(data, exp.log, bandwidths=grid, seed=r, split_seed=0, n_components=[m], n_candidates=m0,
                           selections=["none", *SELECTIONS.values()], lams=lams.tolist(), alphas=args.alphas,
                           return_train_score=True, what="candidate statistics of every sigma (train + validation)")
                for r in range(reps)
            ]
            # sigma: mean validation error of RKS at M over the repetitions
            scores = []
            for sigma in grid:
                v = []
                for est in searches:
                    r_ = est.cv_results_
                    mse = np.nan_to_num(np.asarray(r_["mean_validation_mse"], dtype=np.float64), nan=np.inf)
                    v.append(float(mse[search_rows(r_, bandwidth=sigma, selection="none")].min()))
                scores.append(float(np.mean(v)))
                say(f"   sigma = {sigma:.3g}: mean validation MSE of RKS at M = {m}: {scores[-1]:.4g}")
            sigma = grid[int(np.argmin(scores))]
            say(f"   chosen sigma = {sigma:.3g}")
            # alpha on validation for each (algorithm, lambda, repetition)
            cells = [("RKS", None, {"selection": "none"})] + [
                (alg, i, {"selection": sel, "lam": float(lam)}) for alg, sel in SELECTIONS.items() for i, lam in enumerate(lams)
            ]
            best = {}
            for r, est in enumerate(searches):
                for alg, i, where in cells:
                    best[(alg, i, r)] = best_row(est.cv_results_, search_rows(est.cv_results_, bandwidth=sigma, **where),
                                                 classification)
            served = [(sigma, r) for r in range(reps)]  # the (sigma, seed) the test pass serves
            tests = test_errors([(est, [best[(alg, i, r)] for alg, i, _ in cells]) for r, est in enumerate(searches)],
                                data, exp.log, served, "errors of the chosen models of every repetition on test rows")
            error_kind = "MSE on the scaled response" if data.regression else "misclassification rate"

            def error(r: int, key: tuple, part: str) -> float:
                row, res = best[key], searches[r].cv_results_
                if part == "test":
                    return tests[r][row]
                # the rows that fitted the model: the training MSE from statistics, or the 0-1 error of the scoring pass
                return float(res["mean_train_mse"][row] if data.regression else 1.0 - res["mean_train_score"][row])

            curves = {}
            for alg in ("RKS", *SELECTIONS):
                idx = [None] if alg == "RKS" else range(len(lams))
                for part in ("train", "test"):
                    curves.setdefault(alg, {})[part] = [[error(r, (alg, i, r), part) for r in range(reps)] for i in idx]
                curves[alg]["alpha"] = [[float(searches[r].cv_results_["param_alpha"][best[(alg, i, r)]]) for r in range(reps)]
                                        for i in idx]
            rows = []
            for i, lam in enumerate(lams):
                rows.append([f"{lam:.1e}"] + [fmt_ms(curves[a][p][i]) for a in SELECTIONS for p in ("train", "test")])
            rows.append(["RKS (no λ)"] + [fmt_ms(curves["RKS"][p][0]) for _ in SELECTIONS for p in ("train", "test")])
            headers = ["lambda"] + [f"{ALG_NAMES[a]} {p}" for a in SELECTIONS for p in ("train", "test")]
            rks_test = float(np.mean(curves["RKS"]["test"][0]))
            notes = []
            for a in SELECTIONS:
                mt = [float(np.mean(v)) for v in curves[a]["test"]]
                i = int(np.argmin(mt))
                notes.append(f"{ALG_NAMES[a]}: lowest mean test error {mt[i]:.4f} at lambda = {lams[i]:.1e} "
                             f"(largest {max(mt):.4f} at lambda = {lams[int(np.argmax(mt))]:.1e})")
            claims_md = "; ".join(notes) + f"; RKS {rks_test:.4f}."
            sections.append(
                f"### {dataset_label(name)}\n\n{error_kind}, mean ± std over {reps} repetitions; M = {m}, M0 = {m0}, "
                f"sigma = {sigma:.3g}; ridge alpha chosen on validation for every (lambda, repetition)\n\n" + table(headers, rows) + "\n\n" + claims_md
            )
            results["datasets"][name] = {
                "label": data.label, "task": data.task, "error": error_kind, "n_train": data.n_train, "n_test": data.n_test,
                "sigma": sigma, "sigma_scores": dict(zip(map(float, grid), scores)),
                "curves": curves,
                "mean": {a: {p: [mean_std(v)[0] for v in curves[a][p]] for p in ("train", "test")} for a in curves},
                "std": {a: {p: [mean_std(v)[1] for v in curves[a][p]] for p in ("train", "test")} for a in curves},
                "baseline": float(np.var(data.Ytm)) if data.regression else 1.0 - float(max(np.mean(data.Ytm == c) for c in (0, 1))),
            }
            say(f"   done ({exp.log.seconds():.0f} s since the start)")

    def draw(ax, r: dict) -> None:
        for c, alg in zip(("C0", "C3"), SELECTIONS):
            for part, ls in (("train", "--"), ("test", "-")):
                mu, sd = np.array(r["mean"][alg][part]), np.array(r["std"][alg][part])
                ax.plot(lams, mu, linestyle=ls, color=c, marker="o", ms=3, label=f"{ALG_NAMES[alg]}, {part}")
                ax.fill_between(lams, mu - sd, mu + sd, color=c, alpha=0.12)
        ax.axhline(r["mean"]["RKS"]["test"][0], color="k", lw=0.8, ls=":", label="RKS, test")
        ax.set_xscale("log")
        ax.set_xlabel("lambda")
        ax.set_ylabel(r["error"])

    dataset_panels(args, "fig3_lambda.png", results["datasets"], draw,
                   title=f"ELSS figure 3: error vs lambda, M = {m}, mean ± std over {reps} repetitions")
    md = "## ELSS figure 3: training and test error against lambda\n\n" + "\n\n".join(sections)
    return exp.finish("fig3_lambda", results, md)

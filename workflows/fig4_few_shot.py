"""ELSS paper, figure 4: few-shot classification with ELSS features.

K labelled examples per class (K in {1, 2, 5, 10, 20, 50}) on Epileptic
Seizure (seizure, y == 1, vs rest) and Adult, 20 repetitions. Compared:

* logistic regression on the raw (standardised) inputs;
* ELSS (M = 25 features, Algorithm 1) fitted on ALL the unlabelled training
  inputs, followed by logistic regression on the K labelled rows;
* a one-hidden-layer perceptron with 25 units (scikit-learn MLPClassifier);
* for reference, plain random Fourier features (RKS, the first 25 of the same
  candidates) followed by logistic regression.

ELSS needs no labels: ONE pass over the training inputs accumulates the Gram
of ``M0 = 250`` candidates for every repetition at once (each repetition has
its own candidates). With no labelled validation set, lambda is set without
labels so that the degrees of freedom ``d_lambda = tr Q`` equal M, and the
bandwidth is the median pairwise distance. The logistic models (scikit-learn
``LogisticRegression``, C = 1) are fitted on the 2K labelled rows' features,
computed in memory; the ELSS and RKS features enter unit-scaled
(``sqrt(M) z``, comparable to standardised inputs). ONE pass over the test
rows scores every (repetition, K) ELSS and RKS model at once; the raw-input
and MLP baselines are scored in memory (the test parts are small).
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np

DESCRIPTION = "ELSS figure 4: few-shot (K per class) ELSS(M=25)+logistic vs logistic on raw inputs vs a 25-unit MLP"
NEEDS_CLIENT = True
NAME = "fig4-few-shot"

DATASETS = ["epileptic_seizure", "adult"]
METHODS = ("logistic (raw inputs)", "ELSS-25 + logistic", "MLP (25 hidden units)", "RKS-25 + logistic")

FULL = {"datasets": DATASETS, "n_rows": None, "k": [1, 2, 5, 10, 20, 50], "reps": 20, "m": 25, "sigma_factor": 1.0, "chunk_rows": 10_000}
QUICK = {"datasets": DATASETS, "n_rows": 3000, "k": [2, 10, 50], "reps": 3, "m": 25, "sigma_factor": 1.0, "chunk_rows": 1000}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._paper import add_common_arguments

    parser.add_argument("--datasets", nargs="+", default=None, help="classification sets (default epileptic_seizure adult)")
    parser.add_argument("--n-rows", type=int, default=None, help="use only the first rows of each file")
    parser.add_argument("--k", type=int, nargs="+", default=None, help="labelled rows per class (default 1 2 5 10 20 50)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 20)")
    parser.add_argument("--m", type=int, default=None, help="ELSS features (default 25; M0 = 10 M)")
    parser.add_argument("--sigma-factor", type=float, default=None, help="bandwidth, multiple of the median distance (default 1)")
    add_common_arguments(parser, NAME)


def data_sets(args: argparse.Namespace) -> list[str]:
    """The real data sets this run reads (``dxrf reproduce`` checks and fetches them before it starts)."""
    from ._paper import paper_data_sets

    return paper_data_sets(args, FULL, QUICK)


def lambda_for_dof(spectrum, target: float) -> float:
    """The lambda whose degrees of freedom tr Q is closest to ``target`` (no labels needed)."""
    grid = np.logspace(-12, 1, 521)
    dof = spectrum.trace_q(grid)
    return float(grid[int(np.argmin(np.abs(np.log(np.maximum(dof, 1e-12)) - math.log(target))))])


def run(args: argparse.Namespace) -> dict:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    from dxrf.selection import gram_spectrum, select_features

    from dxrf.stats import LinearModels

    from ._common import table
    from ._paper import (
        Experiment,
        dataset_label,
        dataset_panels,
        error_pass,
        fmt_ms,
        fourier_kernel,
        headline,
        mean_std,
        say,
        stats_pass,
    )

    with Experiment(args, FULL, QUICK, "fig4") as exp, warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m, m0, reps = args.m, 10 * args.m, args.reps
        results = {"k": args.k, "reps": reps, "m": m, "m0": m0, "datasets": {}}
        sections = []
        for name in args.datasets:
            data = exp.load(name, rep=0)
            if data.task != "binary":
                raise ValueError(f"fig4-few-shot needs a binary classification set; {name!r} is {data.task}")
            sigma = args.sigma_factor * data.sigma_median
            headline(data, f"ELSS M = {m} from M0 = {m0} candidates, sigma = {sigma:.3g}; {reps} repetitions",
                     rows="unlabelled training")
            kernels = [fourier_kernel(data.d, m0, sigma, r) for r in range(reps)]
            stats = stats_pass(data.X, None, kernels)
            exp.log.add("train", name, [(sigma, r) for r in range(reps)], "candidate Grams of every repetition (inputs only)")
            by_class = [np.flatnonzero(data.Ym == c) for c in (0, 1)]
            ks = [k for k in args.k if k <= min(len(b) for b in by_class)]
            errs = {meth: {k: [] for k in ks} for meth in METHODS}
            groups, layout, lam_used = [], [], []
            for r in range(reps):
                (st,) = stats[r]
                spec = gram_spectrum(st)
                lam = lambda_for_dof(spec, m)
                lam_used.append(lam)
                sel = select_features(spec, m, criterion="leverage", method="sample", lam=lam,
                                      random_state=np.random.default_rng([r, 4]))
                feats = {
                    "ELSS-25 + logistic": kernels[r].subset(sel.selected, sel.scales * math.sqrt(m)),
                    "RKS-25 + logistic": kernels[r].subset(np.arange(m), np.full(m, math.sqrt(m0))),
                }
                coefs = {meth: [] for meth in feats}
                for k in ks:
                    rng = np.random.default_rng([r, k, 11])
                    idx = np.concatenate([rng.choice(b, size=k, replace=False) for b in by_class])
                    X_l, y_l = data.Xm[idx], data.Ym[idx]
                    for meth, kern in feats.items():
                        clf = LogisticRegression(C=1.0, max_iter=1000).fit(kern(X_l).astype(np.float64), y_l)
                        coefs[meth].append((clf.coef_[0], clf.intercept_[0]))
                    clf = LogisticRegression(C=1.0, max_iter=1000).fit(X_l, y_l)
                    errs["logistic (raw inputs)"][k].append(float(np.mean(clf.predict(data.Xtm) != data.Ytm)))
                    mlp = MLPClassifier(hidden_layer_sizes=(25,), solver="lbfgs", max_iter=2000, random_state=r).fit(X_l, y_l)
                    errs["MLP (25 hidden units)"][k].append(float(np.mean(mlp.predict(data.Xtm) != data.Ytm)))
                for meth, kern in feats.items():
                    coef = np.stack([c for c, _ in coefs[meth]])[:, :, None]  # (len(ks), M, 1)
                    icpt = np.array([[b] for _, b in coefs[meth]])
                    groups.append(LinearModels(kern, coef, icpt, task="classification"))
                    layout.append(meth)
            (scores,) = error_pass(data.X_test, data.labels_test, groups)
            exp.log.add("test", name, [(sigma, r) for r in range(reps)], "test 0-1 errors of every ELSS / RKS model")
            for meth, sc in zip(layout, scores):
                for j, k in enumerate(ks):
                    errs[meth][k].append(float(sc.error[j]))
            majority = 1.0 - float(max(np.mean(data.Ytm == c) for c in (0, 1)))
            rows = [[meth] + [fmt_ms(errs[meth][k], 3) for k in ks] for meth in METHODS]
            main3 = METHODS[:3]
            winners = {k: min(main3, key=lambda meth, k=k: np.mean(errs[meth][k])) for k in ks}
            claims_md = "Lowest mean test error among the paper's three methods: " + ", ".join(
                f"K={k}: {w}" for k, w in winners.items()) + "."
            sections.append(
                f"### {dataset_label(name)}\n\ntest misclassification rate, mean ± std over {reps} repetitions "
                f"(K labelled rows per class; majority-class error {majority:.3f}; ELSS lambda with d_lambda = M: "
                f"median {np.median(lam_used):.2e})\n\n" + table(["method \\ K"] + [str(k) for k in ks], rows) + "\n\n" + claims_md
            )
            results["datasets"][name] = {
                "label": data.label, "n_train": data.n_train, "n_test": data.n_test, "d": data.d, "sigma": sigma,
                "k": ks, "majority_error": majority, "lams": lam_used, "best_method": {str(k): w for k, w in winners.items()},
                "test_error": {meth: {str(k): v for k, v in d.items()} for meth, d in errs.items()},
                "mean": {meth: {str(k): mean_std(v)[0] for k, v in d.items()} for meth, d in errs.items()},
                "std": {meth: {str(k): mean_std(v)[1] for k, v in d.items()} for meth, d in errs.items()},
            }
            say(f"   done ({exp.log.seconds():.0f} s since the start)")

    def draw(ax, r: dict) -> None:
        for meth in METHODS:
            mu = [r["mean"][meth][str(k)] for k in r["k"]]
            sd = [r["std"][meth][str(k)] for k in r["k"]]
            ax.errorbar(r["k"], mu, yerr=sd, marker="o", ms=3, capsize=2, label=meth)
        ax.axhline(r["majority_error"], color="k", lw=0.8, ls=":", label="majority class")
        ax.set_xscale("log")
        ax.set_xticks(r["k"], [str(k) for k in r["k"]])
        ax.set_xlabel("labelled rows per class K")
        ax.set_ylabel("test misclassification")

    dataset_panels(args, "fig4_few_shot.png", results["datasets"], draw,
                   title=f"ELSS figure 4: few-shot, mean ± std over {reps} repetitions")
    md = "## ELSS figure 4: few-shot classification\n\n" + "\n\n".join(sections)
    return exp.finish("fig4_few_shot", results, md)

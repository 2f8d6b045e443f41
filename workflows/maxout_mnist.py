"""Random maxout features (Mroueh, Rennie & Goel) on MNIST, against RFF at equal m.

Random maxout features ``max_{j <= q} w_j^T x`` (``w_j ~ N(0, I)``; q = 1 is a
random linear sketch, i.e. a linear model) for q in {1, 2, 4, 8}, and
Gaussian random Fourier features with the same number m of features, each
followed by a linear least-squares classifier (ridge on one-hot +-1 targets,
predict the argmax - the Rahimi & Recht classifier) on the full MNIST
(60,000 training and 10,000 test digits, pixels in [0, 1]). A linear
least-squares classifier on the raw pixels is the plain linear baseline.

Passes: ONE over the training rows per feature family (its largest m; each
smaller m is a prefix of the same features, whose statistics are a
sub-block; training and validation rows in the same pass), one per sigma of
the RFF bandwidth grid, one for the linear baseline, and ONE over the test
rows that scores every (family, m, alpha) at once. The ridge alpha (and the
RFF sigma) are chosen by the validation squared error of the least-squares
fit (10 % of the training rows), which the statistics give without another
pass.

The 2-D embedding: RF-PCA (random nonlinear component analysis) of the
maxout features - the top two eigenvectors of their covariance, from the same
training statistics (no extra pass) - applied to test digits.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

DESCRIPTION = "Random maxout features (q = 1, 2, 4, 8) + linear classifier vs RFF at equal m on MNIST, and a 2-D RF-PCA plot"
NEEDS_CLIENT = True
NAME = "maxout-mnist"

FULL = {"n_rows": None, "m": [250, 500, 1000, 2000], "pieces": [1, 2, 4, 8], "sigma_factors": [0.5, 1.0, 2.0],
         "alphas": list(np.logspace(-8, 0, 9)), "pca_pieces": 2, "pca_m": 500, "pca_points": 3000, "chunk_rows": 10_000}
QUICK = {"n_rows": 3000, "m": [100, 400], "pieces": [1, 2, 4, 8], "sigma_factors": [1.0],
          "alphas": list(np.logspace(-6, 0, 4)), "pca_pieces": 2, "pca_m": 100, "pca_points": 1000, "chunk_rows": 1000}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._paper import add_common_arguments

    parser.add_argument("--n-rows", type=int, default=None, help="use only the first rows of each part")
    parser.add_argument("--m", type=int, nargs="+", default=None, help="feature counts m (default 250 500 1000 2000)")
    parser.add_argument("--pieces", type=int, nargs="+", default=None, help="maxout pieces q (default 1 2 4 8)")
    parser.add_argument("--sigma-factors", type=float, nargs="+", default=None,
                        help="RFF bandwidth grid, multiples of the median pairwise distance (default 0.5 1 2)")
    parser.add_argument("--alphas", type=float, nargs="+", default=None, help="ridge alpha grid (default 1e-8 .. 1)")
    parser.add_argument("--pca-pieces", type=int, default=None, help="q of the maxout features embedded by RF-PCA (default 2)")
    parser.add_argument("--pca-m", type=int, default=None, help="maxout features used by RF-PCA (default 500)")
    parser.add_argument("--pca-points", type=int, default=None, help="test digits in the embedding plot (default 3000)")
    add_common_arguments(parser, NAME)


def data_sets(args: argparse.Namespace) -> list[str]:
    """The real data sets this run reads (``dxrf reproduce`` checks and fetches them before it starts)."""
    return ["mnist"]


def run(args: argparse.Namespace) -> dict:
    import scipy.linalg

    import dxrf
    from dxrf.features import FeatureKernel

    from ._common import table
    from ._fits import assign_errors, choose, model_groups, plain_fit
    from ._paper import Experiment, error_pass, fourier_kernel, pyplot, save_figure, say, stats_pass

    with Experiment(args, FULL, QUICK, "maxout") as exp:
        ms = sorted(args.m)
        big = ms[-1]
        data = exp.load("mnist", standardize=False)
        say(f"MNIST: {data.n_train} training / {data.n_test} test digits, d = {data.d}; m in {ms}; maxout q in {args.pieces}")
        kernels, stats = {}, {}
        d = data.d

        def fits_for(family, train, valid, sizes, m_total):
            return [plain_fit((family, m), train, valid, m, m_total, args.alphas, group=family) for m in sizes]

        fits = []
        for q in args.pieces:
            family = f"maxout q={q}"
            kernels[family] = dxrf.RandomMaxoutFeatures(big, pieces=q, random_state=q).fit(np.zeros((1, d), np.float32)).kernel_
            say(f"{family}: statistics of {big} features")
            stats[family] = stats_pass(data.X, data.T, [kernels[family]], fraction=0.1, seed=0)[0]
            exp.log.add("train", "mnist", [(f"q={q}", 0)], f"statistics of {big} maxout features, q = {q}")
            fits += fits_for(family, *stats[family], ms, big)
        best = None
        for f in [s * data.sigma_median for s in args.sigma_factors]:
            kern = fourier_kernel(d, big, f, 0)
            say(f"RFF sigma = {f:.3g}: statistics of {big} features")
            tr, va = stats_pass(data.X, data.T, [kern], fraction=0.1, seed=0)[0]
            exp.log.add("train", "mnist", [(f, 0)], f"statistics of {big} Gaussian RFF")
            cand = fits_for("RFF (Gaussian)", tr, va, ms, big)
            score = min(float(c.mse["valid"].min()) for c in cand if c.key[1] == big)
            say(f"   validation MSE at m = {big}: {score:.4f}")
            if best is None or score < best[0]:
                best = (score, f, kern, cand)
        _, sigma, kernels["RFF (Gaussian)"], rff_fits = best
        fits += rff_fits
        lin = FeatureKernel("identity", np.ones(d), d, W=np.eye(d, dtype=np.float32))
        kernels["linear (raw pixels)"] = lin
        say("linear least squares on the raw pixels")
        tr, va = stats_pass(data.X, data.T, [lin], fraction=0.1, seed=0)[0]
        exp.log.add("train", "mnist", [("linear", 0)], "statistics of the raw pixels")
        fits.append(plain_fit(("linear (raw pixels)", d), tr, va, d, d, args.alphas, group="linear (raw pixels)"))
        # one test pass: every family, m and alpha
        groups, layout = model_groups(fits, kernels)
        say(f"test pass: {sum(g.coef.shape[0] for g in groups)} classifiers")
        res = error_pass(data.X_test, data.labels_test, groups)
        exp.log.add("test", "mnist", [(k, 0) for k in [*(f"q={q}" for q in args.pieces), sigma, "linear"]], "test errors of every model")
        assign_errors(layout, res, ("test", None))
        chosen = choose(fits)
        errors = {key: (float(f.err["test"][j]), float(f.alphas[j])) for key, (f, j) in chosen.items()}

        # RF-PCA of maxout features, from the training statistics of that family
        fam = f"maxout q={args.pca_pieces}"
        pca = None
        if fam in stats:
            mp = min(args.pca_m, big)
            scale = np.full(mp, math.sqrt(big / mp))
            st = (stats[fam][0] + stats[fam][1]).subset(np.arange(mp), scale)
            cov = st.covariance()
            evals, evecs = scipy.linalg.eigh((cov + cov.T) / 2, subset_by_index=[mp - 2, mp - 1])
            evecs = evecs[:, ::-1]
            rng = np.random.default_rng(0)
            pts = rng.choice(data.n_test, size=min(args.pca_points, data.n_test), replace=False)
            Z = kernels[fam].subset(np.arange(mp), scale)(data.Xtm[pts]).astype(np.float64)
            emb = (Z - st.mean()) @ evecs
            pca = {"pieces": args.pca_pieces, "m": mp, "explained_variance_ratio": (evals[::-1] / np.trace(cov)).tolist(),
                   "points": emb.tolist(), "labels": data.Ytm[pts].tolist()}
    families = [f"maxout q={q}" for q in args.pieces] + ["RFF (Gaussian)"]
    rows = [[fam] + [f"{errors[(fam, m)][0]:.4f}" for m in ms] for fam in families]
    lin_err = errors[("linear (raw pixels)", d)][0]
    nonlin = [f"maxout q={q}" for q in args.pieces if q > 1]
    has_linear_sketch = 1 in args.pieces
    beats = [m for m in ms if nonlin and has_linear_sketch and min(errors[(f, m)][0] for f in nonlin) < errors[("maxout q=1", m)][0]]
    vs_rff = [m for m in ms if nonlin and min(errors[(f, m)][0] for f in nonlin) <= errors[("RFF (Gaussian)", m)][0]]
    claim = (f"Claim 'maxout beats linear': the best maxout with q ≥ 2 has a lower test error than the linear sketch "
             f"(q = 1) at {f'{len(beats)} of {len(ms)}' if has_linear_sketch else 'n/a (q = 1 not run)'} m, and than least squares on the raw pixels ({lin_err:.4f}) at "
             f"{sum(min(errors[(f, m)][0] for f in nonlin) < lin_err for m in ms) if nonlin else 0} of {len(ms)} m; "
             f"it is at least as good as RFF at {len(vs_rff)} of {len(ms)} m.")
    md = (
        f"## Random maxout features vs RFF on MNIST ({data.n_train} training / {data.n_test} test digits)\n\n"
        f"test misclassification rate of a least-squares (one-hot ±1 ridge) classifier on m random features; "
        f"alpha chosen by validation squared error; RFF sigma = {sigma:.3g}. Linear least squares on the raw "
        f"pixels: {lin_err:.4f}.\n\n" + table(["features \\ m"] + [str(m) for m in ms], rows) + "\n\n" + claim
    )
    plt = pyplot("maxout_mnist.png", *(["maxout_rfpca.png"] if pca is not None else []))
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for fam in families:
            ax.plot(ms, [errors[(fam, m)][0] for m in ms], "o-", label=fam)
        ax.axhline(lin_err, color="k", ls=":", lw=1, label="linear, raw pixels")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ms, [str(m) for m in ms])
        ax.set_xlabel("number of random features m")
        ax.set_ylabel("test misclassification")
        ax.set_title("MNIST: random maxout features vs RFF (least-squares classifier)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save_figure(args, fig, "maxout_mnist.png")
        if pca is not None:
            emb, lab = np.asarray(pca["points"]), np.asarray(pca["labels"])
            fig, ax = plt.subplots(figsize=(6.5, 6))
            for c in range(10):
                sel = lab == c
                ax.scatter(emb[sel, 0], emb[sel, 1], s=4, color=plt.cm.tab10(c), label=str(c))
            ax.set_xlabel("RF-PCA component 1")
            ax.set_ylabel("RF-PCA component 2")
            ax.set_title(f"RF-PCA of {pca['m']} random maxout features (q = {pca['pieces']}), MNIST test digits")
            ax.legend(markerscale=3, fontsize=8, ncol=2)
            save_figure(args, fig, "maxout_rfpca.png")
    results = {
        "n_train": data.n_train, "n_test": data.n_test, "m": ms, "pieces": args.pieces, "rff_sigma": sigma,
        "test_error": {fam: {str(m): errors[(fam, m)][0] for m in ms} for fam in families},
        "alpha": {fam: {str(m): errors[(fam, m)][1] for m in ms} for fam in families},
        "linear_raw_pixels": lin_err,
        "rfpca": None if pca is None else {k: v for k, v in pca.items() if k not in ("points", "labels")},
    }
    return exp.finish("maxout_mnist", results, md)

"""Benchmark: dxrf ridge on random Fourier features against scikit-learn, side by side.

(b1) One fit: ``RandomFeatureRidge`` against ``RBFSampler(n_components=M) + Ridge`` on
the same in-memory data with the *same* random frequencies and the same penalty, so
test MSEs agree up to float32 rounding. Each fit runs in a fresh subprocess whose
peak resident memory (VmHWM) is read at the end.

(b2) A tuned fit: 4 bandwidths (multiples of sqrt(d)), M in {250, 500, 1000, 2000} and
alpha from a grid of 10, chosen on a 20% validation split. dxrf is the public
``RandomFeatureRidgeCV``: one pass over the training rows accumulates the largest candidate
set of every bandwidth, and each M is a prefix (a sub-block of the statistics);
scikit-learn refits ``RBFSampler + Ridge`` for every combination.
"""

from __future__ import annotations

import argparse
import textwrap

from ._common import run_python

DESCRIPTION = "ridge on RFF: dxrf vs scikit-learn RBFSampler + Ridge (single and tuned fits)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-rows", type=float, default=2e5)
    parser.add_argument("--n-features", type=int, default=90)
    parser.add_argument("--m", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tuned-m", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--tuned-bandwidths", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0],
                        help="bandwidths of the tuned fit, as multiples of sqrt(d)")
    parser.add_argument("--n-alphas", type=int, default=10)
    parser.add_argument("--skip-tuned", action="store_true")
    parser.add_argument("--out", default="results")


# Data: a smooth nonlinear function of Gaussian inputs, generated identically in every
# subprocess from a seed (N x d float32 in memory; 10% held out for testing).
_PRELUDE = """
import json, time, numpy as np
def peak():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024
rng = np.random.default_rng(0)
N, D, M = {n}, {d}, {m}
X = rng.standard_normal((N, D), dtype=np.float32)
w = rng.standard_normal(D) / np.sqrt(D)
y = (np.sin(X @ w) + 0.1 * rng.standard_normal(N)).astype(np.float64)
n_test = N // 10
Xtr, ytr, Xte, yte = X[n_test:], y[n_test:], X[:n_test], y[:n_test]
sigma = float(np.sqrt(D))
ALPHA = 1e-4   # on the (1/N)-normalised loss; scikit-learn's alpha is N times it
from sklearn.kernel_approximation import RBFSampler
rbf = RBFSampler(gamma=1.0 / (2 * sigma**2), n_components=M, random_state=0).fit(Xtr[:1])
base = peak()
"""

_SKLEARN_SINGLE = """
from sklearn.linear_model import Ridge
t0 = time.perf_counter()
Z = rbf.transform(Xtr)
model = Ridge(alpha=ALPHA * Xtr.shape[0]).fit(Z, ytr)
fit_s = time.perf_counter() - t0
mse = float(np.mean((model.predict(rbf.transform(Xte)) - yte) ** 2))
print(json.dumps({{"fit_s": fit_s, "test_mse": mse, "peak": peak(), "base": base}}))
"""

_DXRF_SINGLE = """
import dxrf
from dxrf.features import FeatureKernel
# the same frequencies and offsets as scikit-learn's sampler, evaluated in float32
kernel = FeatureKernel("cos", np.full(M, np.sqrt(2.0 / M)), D, W=rbf.random_weights_.astype(np.float32),
                       b=rbf.random_offset_.astype(np.float32))
t0 = time.perf_counter()
stats = dxrf.accumulate(Xtr, ytr, kernel)
coef, intercept = dxrf.learners.solve_ridge(stats, ALPHA)
fit_s = time.perf_counter() - t0
pred = dxrf.learners.linear_predict(Xte, kernel, coef, intercept)[:, 0]
mse = float(np.mean((pred - yte) ** 2))
print(json.dumps({{"fit_s": fit_s, "test_mse": mse, "peak": peak(), "base": base}}))
"""

_TUNED = """
ALPHAS = np.logspace(-8, -2, {n_alphas})
MS = {ms}
SIGMAS = [f * sigma for f in {factors}]
n_val = Xtr.shape[0] // 5
Xfit, yfit, Xval, yval = Xtr[n_val:], ytr[n_val:], Xtr[:n_val], ytr[:n_val]
if "{who}" == "sklearn":
    from sklearn.linear_model import Ridge
    t0 = time.perf_counter()
    best = (np.inf, None)
    fits = 0
    for s in SIGMAS:
        for m in MS:
            for a in ALPHAS:
                sampler = RBFSampler(gamma=1.0 / (2 * s**2), n_components=m, random_state=0)
                Zf = sampler.fit_transform(Xfit)
                model = Ridge(alpha=a * Xfit.shape[0]).fit(Zf, yfit)
                err = float(np.mean((model.predict(sampler.transform(Xval)) - yval) ** 2))
                fits += 1
                best = min(best, (err, (float(s), m, float(a))), key=lambda t: t[0])
    fit_s = time.perf_counter() - t0
    print(json.dumps({{"fit_s": fit_s, "best_val_mse": best[0], "best": best[1], "fits": fits, "peak": peak()}}))
else:
    import dxrf
    t0 = time.perf_counter()
    mask = np.zeros(Xtr.shape[0], dtype=bool); mask[:n_val] = True
    search = dxrf.RandomFeatureRidgeCV(bandwidths=SIGMAS, n_components=MS, alphas=ALPHAS, cv=mask,
                                       random_state=0).fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    p = search.best_params_
    best = (float(search.cv_results_["mean_validation_mse"][search.best_index_]),
            (float(p["bandwidth"]), p["n_components"], p["alpha"]))
    print(json.dumps({{"fit_s": fit_s, "best_val_mse": best[0], "best": best[1], "passes": search.n_passes_,
                      "configurations": len(search.cv_results_["params"]), "peak": peak()}}))
"""



def run(args: argparse.Namespace) -> dict:
    import statistics

    from ._common import report, table

    prelude = textwrap.dedent(_PRELUDE).format(n=int(args.n_rows), d=args.n_features, m=args.m)
    results: dict = {"n_rows": int(args.n_rows), "n_features": args.n_features, "m": args.m, "single": {}, "tuned": {}}
    rows = []
    single = {"sklearn": [], "dxrf": []}
    for r in range(args.repeats):
        for who, body in (("sklearn", _SKLEARN_SINGLE), ("dxrf", _DXRF_SINGLE)):
            out = run_python(prelude + textwrap.dedent(body).format())
            single[who].append(out)
            print(f"  (b1) repeat {r}: {who:7s} fit {out['fit_s']:.2f} s, test MSE {out['test_mse']:.6f}, "
                  f"peak {out['peak'] / 2**30:.2f} GiB", flush=True)
    med = {who: {k: statistics.median(o[k] for o in outs) for k in ("fit_s", "test_mse", "peak", "base")} for who, outs in single.items()}
    results["single"] = {"runs": single, "median": med}
    s, d = med["sklearn"], med["dxrf"]
    rows.append(["(b1) single fit", f"{s['fit_s']:.2f}", f"{d['fit_s']:.2f}", f"{s['fit_s'] / d['fit_s']:.2f}x",
                 f"{s['test_mse']:.5f} / {d['test_mse']:.5f}",
                 f"{s['peak'] / 2**30:.2f} / {d['peak'] / 2**30:.2f} GiB ({d['peak'] / s['peak']:.2f})"])
    if not args.skip_tuned:
        tuned = {}
        for who in ("sklearn", "dxrf"):
            code = prelude + textwrap.dedent(_TUNED).format(who=who, n_alphas=args.n_alphas, ms=list(args.tuned_m),
                                                            factors=list(args.tuned_bandwidths))
            tuned[who] = run_python(code)
            print(f"  (b2) {who:7s}: {tuned[who]['fit_s']:.1f} s, best {tuned[who]['best']} val MSE {tuned[who]['best_val_mse']:.6f}", flush=True)
        results["tuned"] = tuned
        s, d = tuned["sklearn"], tuned["dxrf"]
        grid = f"{len(args.tuned_bandwidths)} sigma x {len(args.tuned_m)} M x {args.n_alphas} alpha"
        rows.append([f"(b2) tuned fit ({grid})", f"{s['fit_s']:.1f}", f"{d['fit_s']:.1f}", f"{s['fit_s'] / d['fit_s']:.1f}x",
                     f"{s['best_val_mse']:.5f} / {d['best_val_mse']:.5f} (val)",
                     f"{s['peak'] / 2**30:.2f} / {d['peak'] / 2**30:.2f} GiB ({d['peak'] / s['peak']:.2f})"])
    md = table(["comparison", "scikit-learn s", "dxrf s", "speed-up", "MSE sklearn / dxrf", "peak memory sklearn / dxrf (ratio)"], rows)
    return report(args.out, "bench-sklearn", results, md)

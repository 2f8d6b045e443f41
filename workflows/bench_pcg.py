"""Benchmark: the Nyström ridge's Gram plan against its preconditioned conjugate-gradient plan.

(p1) kin40k split 0 (``dxrf.datasets.load("kin40k", split=0)``: 8 input columns,
inputs and target standardised with the training rows' mean and deviation), for each
``--m``: ``RandomFeatureRidge(NystroemFeatures(M, bandwidth=σ, whitening="cholesky",
random_state=0), alpha=α, solver=...)`` with ``solver="gram"`` and ``solver="pcg"``
(``tol``, ``max_iter``), each fit in a fresh subprocess on NumPy input: fit seconds,
peak resident memory (VmHWM), test MSE, CG iterations, and the ``"auto"`` plan's
estimate beside them.

(p2) One CG iteration: one engine pass of ``K^T (w * (K v))`` over all training rows
(float32 kernel values, one output), and the whole iteration with the client's
triangular solves. One ``solver="pcg"`` fit of 6 iterations per setting, timed by its
``pcg_seconds_`` (the median of iterations 2-6; one preconditioner per setting, so
M = 20 000 costs two factorisations, not one per timing), with the kernel values
recomputed in every pass (``cache_features=False``) and kept by the feature cache
(``True``). The pass against NumPy in-memory bounds for the same product:
recomputed, a blocked float32 loop over 2048-row blocks with reused buffers (one
``gemm`` for ``x.l``, the norms subtracted and ``exp`` in place, then ``K v`` and
``K^T (K v)``); cached, ``K^T (K v)`` on the whole float32 ``K`` in memory (two
matrix-vector products: memory bandwidth), median of ``--repeats``. The recomputed loop
is the issue's reference rather than a bound on a multi-core machine: its ``exp`` runs on
one core, while the engine's pass uses every thread of its pool.

(p3) A grid of penalties (``--alphas``) chosen on a 20 % hashed hold-out of the training
rows, at each ``--m``: the Gram plan (one pass of statistics, the path from them); the
conjugate gradient with every penalty, its hold-out scores and the refit on all rows in
the same passes (``RandomFeatureRidge(..., alphas=..., solver="pcg")``); and the
conjugate gradient one penalty at a time (one fit per penalty, each scored on the same
hold-out). Fit seconds, passes, the chosen penalty and the test MSE, in fresh processes.
``--gram-dtype float64`` with ``--dtype float32`` fits each plan in its own best dtype (the
Gram plan's statistics lose small penalties in float32; the CG only reads the values).

(p4, not in the default parts) The model search: ``RandomFeatureRidgeCV(features="nystroem",
bandwidths=[σ], n_components=--m, alphas=--alphas, cv=0.2, nystroem_solver=...)`` with
``"gram"`` (one statistics pass serves every M, nested landmark prefixes) and ``"pcg"`` (one
conjugate gradient per M, every penalty and the hold-out in its passes): fit seconds, peak
memory, passes, the configuration chosen, its hold-out MSE and the test MSE, in fresh processes.
"""

from __future__ import annotations

import argparse
import statistics
import textwrap

from ._common import run_python

#: CG iterations timed after the first (which warms the threads and buffers): their median is one iteration's
TIMED_ITERATIONS = 5

DESCRIPTION = "Nyström ridge: the Gram plan vs preconditioned CG over passes (kin40k), and a CG pass vs a NumPy bound"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--m", type=int, nargs="+", default=[2000], help="landmarks M (default 2000)")
    parser.add_argument("--sigma", type=float, default=1.5, help="gaussian bandwidth on standardised inputs")
    parser.add_argument("--alpha", type=float, default=1e-5, help="ridge penalty on the (1/N) loss")
    parser.add_argument("--tol", type=float, default=1e-6, help="CG tolerance (relative preconditioned residual)")
    parser.add_argument("--validation-tol", type=float, default=1e-4,
                        help="(p3) a penalty's CG stops once its hold-out MSE moves by less than this (relative) in 5 "
                             "iterations in a row (the estimators' default 1e-4; 0: the residual alone)")
    parser.add_argument("--max-iter", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the NumPy bounds (p2)")
    parser.add_argument("--n-rows", type=int, default=None, help="only the first rows of the data (quick runs)")
    parser.add_argument("--data", choices=DATA, default="kin40k",
                        help="kin40k (split 0) or nycflights13 (its 11 numeric columns, a 10 %% random test split)")
    parser.add_argument("--parts", nargs="+", choices=("p1", "p2", "p3", "p4"), default=["p1", "p2", "p3"],
                        help="which comparisons to run (default p1 p2 p3; p4 is the model search)")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                        help="the Nystroem map's dtype in the fits of (p1) and (p3), both plans (default float64; "
                             "float32 halves the CG's cached kernel values)")
    parser.add_argument("--gram-dtype", choices=("float64", "float32"), default=None,
                        help="the Gram plan's map dtype in (p3) (default: --dtype); float64 with --dtype float32 "
                             "compares each plan in its own best dtype")
    parser.add_argument("--cache-fraction", type=float, default=None,
                        help="the option cache_fraction in every fit (default: the library's, 1/3 of the memory)")
    parser.add_argument("--alphas", type=float, nargs="*", default=[1e-3, 1e-4, 1e-5, 1e-6],
                        help="the penalty grid of (p3); none skips it (default: 1e-3 1e-4 1e-5 1e-6)")
    parser.add_argument("--out", default="results")


#: the data sets: kin40k's fixed test split 0, nycflights13's random 10 % (both the library's loaders)
DATA = ("kin40k", "nycflights13")

#: the data with the training rows' standardisation: the start of each fit's subprocess
_DATA = """
import json, time, numpy as np
import dxrf, dxrf.datasets
if {cache_fraction!r} is not None:
    dxrf.set_options(cache_fraction={cache_fraction!r})
ds = dxrf.datasets.load({data!r}, **{load_kw})
mu, sd = ds.X_train.mean(0), ds.X_train.std(0)
sd[sd == 0] = 1.0  # a constant column (a few rows of nycflights13: one month) stays constant
Xtr, Xte = (ds.X_train - mu) / sd, (ds.X_test - mu) / sd
ym, ys = ds.y_train.mean(), ds.y_train.std()
ytr, yte = (ds.y_train - ym) / ys, (ds.y_test - ym) / ys
"""

_FIT = _DATA + """
from dxrf.workflows._common import peak_rss as peak
base = peak()
t0 = time.perf_counter()
features = dxrf.NystroemFeatures({m}, bandwidth={sigma}, whitening="cholesky", random_state=0, dtype={dtype!r})
model = dxrf.RandomFeatureRidge(features, alpha={alpha}, solver="{solver}", tol={tol}, max_iter={max_iter}).fit(Xtr, ytr)
fit_s = time.perf_counter() - t0
pred = model.predict(Xte)
print(json.dumps({{"fit_s": fit_s, "test_mse": float(np.mean((pred - yte) ** 2)), "peak": peak(), "base": base,
                  "n_iter": getattr(model, "n_iter_", None), "passes": model.n_passes_,
                  "cache": getattr(model, "feature_cache_", None), "dtype": str(model.kernel_.dtype),
                  "estimate": getattr(model, "plan_estimate_", None), "n": int(Xtr.shape[0]), "d": int(Xtr.shape[1])}}))
"""


_GRID = _DATA + """
out = {{}}
def fit(**kw):
    dtype = {gram_dtype!r} if kw["solver"] == "gram" else {dtype!r}
    features = dxrf.NystroemFeatures({m}, bandwidth={sigma}, whitening="cholesky", random_state=0, dtype=dtype)
    t0 = time.perf_counter()
    model = dxrf.RandomFeatureRidge(features, validation=0.2, tol={tol}, max_iter={max_iter},
                                    validation_tol={validation_tol}, **kw).fit(Xtr, ytr)
    return model, time.perf_counter() - t0
for plan in ("gram", "pcg"):
    model, spent = fit(alphas={alphas}, solver=plan)
    out[plan] = {{"fit_s": spent, "passes": model.n_passes_, "alpha": model.alpha_, "n_iter": model.n_iter_,
                 "dtype": str(model.kernel_.dtype),
                 "cache": getattr(model, "feature_cache_", None), "n": int(Xtr.shape[0]), "d": int(Xtr.shape[1]),
                 "validation": [float(v) for v in model.validation_errors_],
                 "test_mse": float(np.mean((model.predict(Xte) - yte) ** 2))}}
if len({alphas}) > 1:
    each = [fit(alpha=a, solver="pcg") for a in {alphas}]
    best = int(np.argmin([m.validation_errors_[0] for m, _ in each]))
    out["pcg_each"] = {{"fit_s": sum(s for _, s in each), "passes": sum(m.n_passes_ for m, _ in each),
                       "alpha": each[best][0].alpha_, "n_iter": [m.n_iter_ for m, _ in each],
                       "cache": each[best][0].feature_cache_,
                       "validation": [float(m.validation_errors_[0]) for m, _ in each],
                       "test_mse": float(np.mean((each[best][0].predict(Xte) - yte) ** 2))}}
print(json.dumps(out))
"""

_SEARCH = _DATA + """
from dxrf.workflows._common import peak_rss as peak
import warnings
warnings.simplefilter("ignore")
base = peak()
t0 = time.perf_counter()
model = dxrf.RandomFeatureRidgeCV(features="nystroem", bandwidths=[{sigma}], n_components={ms}, alphas={alphas},
                                  dtype={dtype!r}, cv=0.2, random_state=0, nystroem_solver="{solver}").fit(Xtr, ytr)
fit_s = time.perf_counter() - t0
res = model.cv_results_
print(json.dumps({{"fit_s": fit_s, "peak": peak(), "base": base, "passes": model.n_passes_, "solver": model.search_solver_,
                  "m": model.best_params_["n_components"], "alpha": model.alpha_,
                  "validation": float(res["mean_validation_mse"][model.best_index_]),
                  "test_mse": float(np.mean((model.predict(Xte) - yte) ** 2)),
                  "estimate": getattr(model, "search_plan_estimate_", None)}}))
"""



def _gaussian_rows(X, L, sigma: float):
    """``(X32, Lt, xn, ln, c)``: float32 rows, landmarks transposed and the scaled squared norms of the NumPy loops."""
    import numpy as np

    X = np.ascontiguousarray(X, dtype=np.float32)
    Lt = np.ascontiguousarray(L.T, dtype=np.float32)
    c = np.float32(0.5 / sigma**2)
    return X, Lt, c * np.einsum("ij,ij->i", X, X), c * np.einsum("ij,ij->j", Lt, Lt), c


def _gaussian_block(X, Lt, xn, ln, c, a: int, b: int, K) -> None:
    """``K = exp(-|x - l|^2 / (2 sigma^2))`` for the rows ``a:b`` into ``K``, in place (one gemm, then elementwise)."""
    import numpy as np

    np.matmul(X[a:b], Lt, out=K)
    K *= 2 * c
    K -= xn[a:b, None]
    K -= ln[None, :]
    np.minimum(K, 0, out=K)
    np.exp(K, out=K)


def numpy_bound(X, L, v, sigma: float, rows: int = 2048) -> tuple:
    """``K^T (K v)`` for the gaussian kernel by a blocked float32 loop with reused buffers; (result, seconds)."""
    import time

    import numpy as np

    X, Lt, xn, ln, c = _gaussian_rows(X, L, sigma)
    v = v.reshape(-1).astype(np.float32)
    buf = np.empty((rows, Lt.shape[1]), dtype=np.float32)
    out = np.zeros(Lt.shape[1])
    t0 = time.perf_counter()
    for a in range(0, X.shape[0], rows):
        b = min(X.shape[0], a + rows)
        K = buf[: b - a]
        _gaussian_block(X, Lt, xn, ln, c, a, b, K)
        out += K.T @ (K @ v)
    return out, time.perf_counter() - t0


def gaussian_matrix(X, L, sigma: float, rows: int = 2048):
    """The whole float32 ``K = k(X, L)`` in memory: what the feature cache holds, for the matrix-vector bound."""
    import numpy as np

    X, Lt, xn, ln, c = _gaussian_rows(X, L, sigma)
    K = np.empty((X.shape[0], Lt.shape[1]), dtype=np.float32)
    for a in range(0, X.shape[0], rows):
        b = min(X.shape[0], a + rows)
        _gaussian_block(X, Lt, xn, ln, c, a, b, K[a:b])
    return K


def matvec_bound(K, v) -> float:
    """Seconds of ``K^T (K v)`` on an in-memory float32 ``K``: two matrix-vector products, the cached pass's bound."""
    import time

    import numpy as np

    v = v.reshape(-1).astype(np.float32)
    t0 = time.perf_counter()
    K.T @ (K @ v)
    return time.perf_counter() - t0


def _pass_timing(args: argparse.Namespace, m: int) -> dict:
    """Seconds per CG iteration, without and with the feature cache, against their NumPy bounds.

    One fit of 1 + ``TIMED_ITERATIONS`` iterations per setting; the median over its
    iterations after the first (which warms the threads and buffers) of
    ``pcg_seconds_``: the engine pass alone, and the whole iteration with the
    client's triangular solves.
    """
    import warnings

    import numpy as np
    from sklearn.exceptions import ConvergenceWarning

    import dxrf
    import dxrf.datasets

    ds = dxrf.datasets.load(args.data, **_load_kw(args))
    X = (ds.X_train - ds.X_train.mean(0)) / ds.X_train.std(0)
    y = (ds.y_train - ds.y_train.mean()) / ds.y_train.std()
    rng = np.random.default_rng(0)
    L = X[rng.choice(X.shape[0], m, replace=False)]
    features = dxrf.NystroemFeatures(landmarks=L, bandwidth=args.sigma, dtype="float32", whitening="cholesky")
    K = gaussian_matrix(X, L, args.sigma)  # the cached kernel values, for the matrix-vector bound
    out = {"n": int(X.shape[0]), "m": m, "d": int(X.shape[1])}
    for cache in (False, True):
        # a fixed number of iterations, on purpose: no convergence warning
        with dxrf.options(cache_features=cache), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = dxrf.RandomFeatureRidge(features, alpha=args.alpha, solver="pcg", tol=1e-300,
                                            max_iter=1 + TIMED_ITERATIONS).fit(X, y)
        assert model.n_iter_ == 1 + TIMED_ITERATIONS and model.feature_cache_ == ("cached" if cache else "recomputed")
        timed = model.pcg_seconds_[1:]
        bound = []
        for _ in range(args.repeats):
            v = rng.normal(size=m)
            bound.append(matvec_bound(K, v) if cache else numpy_bound(X, L, v, args.sigma)[1])
        e, b = float(np.median(timed[:, 0])), statistics.median(bound)
        key = "cached" if cache else "recomputed"
        out[key] = {"pass_s": e, "iteration_s": float(np.median(timed.sum(axis=1))), "bound_s": b,
                    "ratio_bound_over_pass": b / e}
    return out


def _load_kw(args: argparse.Namespace) -> dict:
    kw = {"split": 0} if args.data == "kin40k" else {}
    return {**kw, **({"n_rows": args.n_rows} if args.n_rows else {})}


def _data_kw(args: argparse.Namespace) -> dict:
    """The data's fields of the subprocess templates."""
    return {"data": args.data, "load_kw": repr(_load_kw(args)), "cache_fraction": args.cache_fraction}


def _grid_section(args: argparse.Namespace, results: dict) -> str:
    """(p3): the penalty grid by the Gram plan, by CG in shared passes, and by CG one penalty at a time."""
    from ._common import table

    rows = []
    results["grid"] = {}
    for m in args.m:
        code = textwrap.dedent(_GRID).format(m=m, dtype=args.dtype, gram_dtype=args.gram_dtype or args.dtype,
                                             sigma=args.sigma, alphas=list(args.alphas), tol=args.tol,
                                             max_iter=args.max_iter, validation_tol=args.validation_tol or None,
                                             **_data_kw(args))
        out = results["grid"][str(m)] = run_python(code)
        for plan, label in (("gram", "Gram, path from the statistics"), ("pcg", "CG, every penalty in the same passes"),
                            ("pcg_each", "CG, one penalty at a time")):
            if plan not in out:
                continue
            r = out[plan]
            print(f"  (p3) M={m} {plan}: {r['fit_s']:.1f} s, {r['passes']} passes, alpha {r['alpha']:g}, "
                  f"test MSE {r['test_mse']:.5f}", flush=True)
            cg = f"{r['n_iter']} it., {r['cache']}" if plan != "gram" else "-"
            rows.append([m, label, f"{r['fit_s']:.1f}", r["passes"], cg, f"{r['alpha']:g}",
                         " / ".join(f"{v:.5g}" for v in r["validation"]), f"{r['test_mse']:.5g}"])
        out["time_ratio"] = out["pcg"]["fit_s"] / out["gram"]["fit_s"]
        out["validation_ratio"] = min(out["pcg"]["validation"]) / min(out["gram"]["validation"])
        print(f"  (p3) M={m}: CG / Gram time {out['time_ratio']:.2f}, validation MSE {out['validation_ratio']:.4f}",
              flush=True)
    md = table(["M", "plan", "fit s", "passes", "CG iterations, kernel values", "chosen alpha",
                "hold-out MSE per alpha", "test MSE"], rows)
    n, d = out["gram"]["n"], out["gram"]["d"]
    return (f"\n\n{args.data}: N = {n} training rows, d = {d}, standardised X and y, gaussian sigma = {args.sigma}, "
            f"{args.dtype} map" + (f" ({args.gram_dtype} for the Gram plan)" if args.gram_dtype else "") + ", "
            f"tol = {args.tol}, validation_tol = {args.validation_tol or None}. The penalty grid {list(args.alphas)} on "
            "a 20 % hashed hold-out of the training rows, "
            f"the chosen penalty refitted on all rows; each line one fresh process (one fit per penalty, summed, "
            f"for the last).\n\n" + md + "\n")


def run(args: argparse.Namespace) -> dict:
    from ._common import report

    results: dict = {"data": args.data, "dtype": args.dtype, "sigma": args.sigma, "alpha": args.alpha, "tol": args.tol,
                     "cache_fraction": args.cache_fraction, "plans": {}, "passes": {}}
    md = ""
    if "p1" in args.parts:
        md += _plans_section(args, results)
    if "p2" in args.parts:
        md += _pass_section(args, results)
    if "p3" in args.parts and args.alphas:
        md += _grid_section(args, results)
    if "p4" in args.parts and args.alphas:
        md += _search_section(args, results)
    return report(args.out, "bench-pcg", results, md)


def _plans_section(args: argparse.Namespace, results: dict) -> str:
    """(p1): one penalty by each plan."""
    from ._common import table

    rows = []
    for m in args.m:
        runs = {}
        for solver in ("gram", "pcg"):
            code = textwrap.dedent(_FIT).format(m=m, dtype=args.dtype, sigma=args.sigma, alpha=args.alpha, solver=solver, tol=args.tol,
                                                max_iter=args.max_iter, **_data_kw(args))
            runs[solver] = out = run_python(code)
            print(f"  (p1) M={m} {solver}: {out['fit_s']:.1f} s, test MSE {out['test_mse']:.5f}, peak "
                  f"{out['peak'] / 2**20:.0f} MiB (base {out['base'] / 2**20:.0f}), iterations {out['n_iter']}"
                  + (f", kernel values {out['cache']}" if out["cache"] else ""), flush=True)
        g, p = runs["gram"], runs["pcg"]
        est = p["estimate"]
        faster = "pcg" if p["fit_s"] < g["fit_s"] else "gram"
        results["plans"][str(m)] = {**runs, "mse_ratio": p["test_mse"] / g["test_mse"], "time_ratio": p["fit_s"] / g["fit_s"],
                                    "auto_plan": est["plan"], "faster_plan": faster}
        rows.append([m, f"{g['fit_s']:.1f} / {p['fit_s']:.1f}", f"{g['test_mse']:.4f} / {p['test_mse']:.4f}",
                     f"{(g['peak'] - g['base']) / 2**20:.0f} / {(p['peak'] - p['base']) / 2**20:.0f}", p["n_iter"],
                     f"{est['gram_ops']:.2e} / {est['pcg_ops']:.2e} -> {est['plan']}", faster])
    md = table(["M", "fit s gram / pcg", "test MSE gram / pcg", "peak above base MiB gram / pcg", "CG iterations",
                "estimate gram / pcg ops -> auto", "measured faster"], rows)
    return (md + f"\n\n{args.data}, standardised X and y, gaussian sigma = {args.sigma}, alpha = {args.alpha}, "
            f"tol = {args.tol}; uniform landmarks, Cholesky whitening, {args.dtype} map; each fit in a fresh process on "
            f"NumPy input; "
            f"the CG's kernel values by the feature cache's \"auto\": "
            f"{', '.join(sorted({str(r['pcg']['cache']) for r in results['plans'].values()}))}.\n\n")


def _pass_section(args: argparse.Namespace, results: dict) -> str:
    """(p2): one CG iteration, recomputed and cached, against its NumPy bounds."""
    from ._common import table

    prows = []
    for m in args.m:
        pt = results["passes"][str(m)] = _pass_timing(args, m)
        for key, bound in (("recomputed", "kernel values and K^T (K v), blocked float32 loop"),
                           ("cached", "K^T (K v) on the float32 K in memory")):
            r = pt[key]
            print(f"  (p2) M={m} {key}: CG pass {r['pass_s']:.3f} s (iteration {r['iteration_s']:.3f} s), NumPy "
                  f"bound {r['bound_s']:.3f} s (bound / pass = {r['ratio_bound_over_pass']:.2f})", flush=True)
            prows.append([pt["n"], m, pt["d"], key, f"{r['pass_s']:.3f}", f"{r['iteration_s']:.3f}", bound,
                          f"{r['bound_s']:.3f}", f"{r['ratio_bound_over_pass']:.2f}"])
    md = table(["N", "M", "d", "kernel values", "CG pass s (engine)", "iteration s", "NumPy bound", "bound s",
                "bound / pass"], prows)
    return md + ("\n\nOne CG iteration: its engine pass of K^T (K v) on NumPy input (the local thread pool, float32 "
                 "kernel values, one output), and the whole iteration with the client's triangular solves, with the "
                 "kernel values recomputed in every pass and kept by the feature cache; median of iterations 2-6 of "
                 "one fit. The pass against its NumPy bound, median of repeats.\n")


def _search_section(args: argparse.Namespace, results: dict) -> str:
    """(p4): the model search by the Gram plan and by the conjugate gradient, side by side."""
    from ._common import table

    runs = {}
    for solver in ("gram", "pcg"):
        code = textwrap.dedent(_SEARCH).format(ms=list(args.m), sigma=args.sigma, alphas=list(args.alphas),
                                               dtype=args.dtype, solver=solver, **_data_kw(args))
        runs[solver] = r = run_python(code)
        print(f"  (p4) search by {solver}: {r['fit_s']:.1f} s, {r['passes']} passes, chose M={r['m']} alpha "
              f"{r['alpha']:g}, hold-out MSE {r['validation']:.5f}, test MSE {r['test_mse']:.5f}, peak "
              f"{(r['peak'] - r['base']) / 2**20:.0f} MiB above base", flush=True)
    g, p = runs["gram"], runs["pcg"]
    results["search"] = {**runs, "time_ratio": p["fit_s"] / g["fit_s"], "validation_ratio": p["validation"] / g["validation"],
                         "memory_ratio": (p["peak"] - p["base"]) / max(1, g["peak"] - g["base"])}
    s = results["search"]
    print(f"  (p4) CG / Gram: time {s['time_ratio']:.2f}, hold-out MSE {s['validation_ratio']:.4f}, "
          f"peak memory {s['memory_ratio']:.2f}", flush=True)
    est = p["estimate"] or {}
    rows = [[solver, f"{r['fit_s']:.1f}", r["passes"], f"M={r['m']}, alpha={r['alpha']:g}", f"{r['validation']:.5g}",
             f"{r['test_mse']:.5g}", f"{(r['peak'] - r['base']) / 2**20:.0f}"] for solver, r in runs.items()]
    md = table(["search plan", "fit s", "passes", "chosen", "hold-out MSE", "test MSE", "peak above base MiB"], rows)
    return (f"\n\nThe model search, M in {list(args.m)}, alphas {list(args.alphas)}, sigma = {args.sigma}, a 20 % "
            f"hashed hold-out, {args.dtype} map; each plan in a fresh process on NumPy input. CG / Gram: time "
            f"{s['time_ratio']:.2f}, hold-out MSE {s['validation_ratio']:.4f}, peak {s['memory_ratio']:.2f}; the "
            f"\"auto\" estimate {est.get('gram_ops', float('nan')):.3g} Gram vs {est.get('pcg_ops', float('nan')):.3g} CG "
            f"operations -> {est.get('plan')}.\n\n" + md + "\n")

"""Benchmark: Nyström ridge at large N from zarr, the Gram plan against the conjugate gradient.

The training rows of flights-3m (``dxrf.datasets.to_zarr("flights_3m", ...)``: the
columns distance, fractional hour of day and day of year, d = 3; the target delay;
a 10 % random test split of the raw rows) are written once to zarr groups in
50 000-row chunks and read by a LocalCluster of ``--workers`` single-threaded
worker processes with ``--memory-limit`` each. X is standardised with the stored
column statistics (lazily), y with its training mean and deviation.

Each fit runs in a fresh process: ``RandomFeatureRidge(NystroemFeatures(M,
bandwidth=σ, whitening=..., random_state=0, dtype), alphas=..., validation=0.2,
solver=...)`` on the first N training rows. The CG's map takes its Cholesky whitening
from the preconditioner's factor of ``K_LL + delta I``; the Gram plan's is pivoted
(``--gram-whitening``), since at large M in three dimensions ``K_LL`` is numerically
singular and a plain Cholesky refuses it. Every penalty is scored on the same 20 %
hashed hold-out and the best refitted on all N rows: by the Gram plan from one pass
of statistics, by the conjugate gradient in its own passes.

- The conjugate gradient runs on every size of ``--cg-rows`` (default: 10⁶ rows and all
  of them): fit seconds, passes, iterations, the workers' peak resident memory (VmHWM,
  reset before the fit) and the client's, hold-out MSE per penalty and test MSE.
- The Gram plan runs on the sizes of ``--gram-rows`` (two, smaller): its time is
  ``a + b N`` (the pass grows with N, its M x M algebra does not), so the line
  through the two measured fits extrapolates it to the conjugate gradient's N. The
  report says which times are measured and which are extrapolated.
- The conjugate gradient also runs on the largest Gram size, whose hold-out errors
  the two plans then share.

The workers' memory limit, pauses and restarts (scheduler events and logs) are
reported with each fit.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from ._common import run_python

DESCRIPTION = "Nyström ridge on flights-3m from zarr: CG over passes at 10^6+ rows, the Gram plan timed on fractions"

#: the hold-out fraction of every fit
VALIDATION = 0.2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--m", type=int, nargs="+", default=[10_000], help="landmarks M (default 10000)")
    parser.add_argument("--sigma", type=float, default=0.5, help="gaussian bandwidth on standardised inputs")
    parser.add_argument("--alphas", type=float, nargs="+", default=[1e-3, 1e-4, 1e-5],
                        help="the penalty grid, chosen on the hold-out (default 1e-3 1e-4 1e-5)")
    parser.add_argument("--tol", type=float, default=1e-4, help="CG tolerance (relative preconditioned residual)")
    parser.add_argument("--validation-tol", type=float, default=1e-4,
                        help="a penalty's CG stops once its hold-out MSE moves by less than this (relative) in 5 "
                             "iterations in a row (the estimators' default 1e-4; 0: the residual alone)")
    parser.add_argument("--max-iter", type=int, default=200)
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float32",
                        help="the CG's map dtype (default float32: half the arithmetic per kernel value; the Gram "
                             "plan keeps the library's float64, whose statistics need it)")
    parser.add_argument("--gram-whitening", choices=("pivoted", "eigh", "cholesky"), default="pivoted",
                        help="the Gram plan's whitening (default pivoted: at large M in three dimensions K_LL is "
                             "numerically singular, and a plain Cholesky refuses it)")
    parser.add_argument("--cg-rows", type=int, nargs="+", default=[1_000_000, 0],
                        help="training rows of the CG fits (0: all of them; default 1000000 and all)")
    parser.add_argument("--gram-rows", type=int, nargs="*", default=[100_000, 200_000],
                        help="training rows of the Gram fits, two sizes for the line a + b N (default 100000 200000)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default=None,
                        help="memory limit of each worker, e.g. 6GiB (default: dxrf's local cluster's, 80 %% of the "
                             "memory shared by the cores)")
    parser.add_argument("--n-rows", type=int, default=None, help="only the first raw rows of flights-3m (quick runs)")
    parser.add_argument("--workdir", default=None,
                        help="where the zarr groups go, kept between runs (default: a temp dir, removed)")
    parser.add_argument("--out", default="results")


#: one fit in a fresh process: a cluster, the zarr groups, the fit, its memory and its scores
_FIT = """
import json, time, warnings
import numpy as np, dask.array as da
from distributed import Client
import dxrf, dxrf.io
from dxrf.cluster import local_cluster
from dxrf.workflows._common import memory_incidents, memory_log_lines, peak_rss, worker_memory

cluster = local_cluster({workers}, memory_limit={memory_limit!r})
client = Client(cluster)
train, test = dxrf.io.open_zarr({train!r}, standardize=True), dxrf.io.open_zarr({test!r})
rows = {rows} or train.n_rows
X, y = train.X[:rows], train.y[:rows]
ym, ys = (float(v) for v in da.compute(y.astype("f8").mean(), y.astype("f8").std()))
y = (y - ym) / ys
Xte, yte = train.standardize(test.X), (test.y.compute().astype("f8") - ym) / ys
logs, since = memory_log_lines(client), time.time()
worker_memory(client, reset=True)
base = peak_rss()
t0 = time.perf_counter()
features = dxrf.NystroemFeatures({m}, bandwidth={sigma}, whitening={whitening!r}, random_state=0, dtype={dtype!r})
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    model = dxrf.RandomFeatureRidge(features, alphas={alphas}, validation={validation}, solver={solver!r}, tol={tol},
                                    max_iter={max_iter}, validation_tol={validation_tol}).fit(X, y)
fit_s = time.perf_counter() - t0
workers = worker_memory(client)
incidents = memory_incidents(client, since, logs)
pred = np.asarray(da.compute(model.predict(Xte))[0], dtype="f8").reshape(-1)
print(json.dumps({{"fit_s": fit_s, "n": int(rows), "d": int(X.shape[1]), "m": {m}, "solver": model.solver_,
                  "passes": model.n_passes_, "n_iter": model.n_iter_, "alpha": model.alpha_,
                  "validation": [float(v) for v in model.validation_errors_],
                  "test_mse": float(np.mean((pred - yte) ** 2)), "dtype": str(model.kernel_.dtype),
                  "cache": getattr(model, "feature_cache_", None), "estimate": getattr(model, "plan_estimate_", None),
                  "worker_peak": max(w["peak_rss"] for w in workers.values()),
                  "worker_limit": max(w["memory_limit"] or 0 for w in workers.values()),
                  "client_peak_above_base": peak_rss() - base, "incidents": incidents,
                  "warnings": [str(w.message)[:300] for w in said]}}))
client.close()
cluster.close()
"""



def _write_data(args: argparse.Namespace, workdir: Path) -> tuple[str, str, int]:
    """The zarr groups of flights-3m's training and test rows (kept in ``workdir`` between runs)."""
    import dxrf.datasets
    import dxrf.io

    kw = {"n_rows": args.n_rows} if args.n_rows else {}
    workdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for split in ("train", "test"):
        path = workdir / f"flights-3m-{args.n_rows or 'all'}-{split}.zarr"
        if not path.exists():
            dxrf.datasets.to_zarr("flights_3m", path, split=split, **kw)
        paths.append(str(path))
    return paths[0], paths[1], dxrf.io.open_zarr(paths[0]).n_rows


def extrapolate(sizes: list[int], seconds: list[float], n: int) -> float:
    """Seconds at ``n >= sizes[1]`` rows on the line through two measured ``(rows, seconds)``.

    Never below the larger fit's own seconds: at tiny sizes noise can tilt the line down.
    """
    (n1, n2), (t1, t2) = sizes, seconds
    slope = (t2 - t1) / (n2 - n1)
    return max(t2, t2 + slope * (n - n2))


def run(args: argparse.Namespace) -> dict:
    from ._common import bench_workdir, remove_workdir, report

    if len(args.gram_rows) not in (0, 2):
        raise ValueError(f"--gram-rows takes two sizes (for the line a + b N) or none, got {args.gram_rows}")
    workdir = bench_workdir(args, "dxrf-bench-pcg-scale-")
    try:
        train, test, n_all = _write_data(args, workdir)
        results: dict = {"n_train": n_all, "sigma": args.sigma, "alphas": list(args.alphas), "tol": args.tol,
                         "validation_tol": args.validation_tol or None,
                         "dtype": args.dtype, "workers": args.workers, "memory_limit": args.memory_limit, "m": {}}
        for m in args.m:
            results["m"][str(m)] = _one_m(args, m, train, test, n_all)
    finally:
        remove_workdir(args, workdir)
    return report(args.out, "bench-pcg-scale", results, _markdown(args, results))


def _fit(args: argparse.Namespace, m: int, train: str, test: str, rows: int, solver: str) -> dict:
    code = textwrap.dedent(_FIT).format(
        workers=args.workers, memory_limit=args.memory_limit, train=train, test=test, rows=rows, m=m,
        sigma=args.sigma, dtype=args.dtype if solver == "pcg" else "float64", alphas=list(args.alphas),
        whitening="cholesky" if solver == "pcg" else args.gram_whitening,
        validation=VALIDATION, solver=solver, tol=args.tol, max_iter=args.max_iter,
        validation_tol=args.validation_tol or None)
    out = run_python(code)
    print(f"  M={m} {solver} N={out['n']}: {out['fit_s']:.1f} s, {out['passes']} passes, {out['n_iter']} it., alpha "
          f"{out['alpha']:g}, hold-out MSE {min(out['validation']):.5f}, test MSE {out['test_mse']:.5f}, worker peak "
          f"{out['worker_peak'] / 2**20:.0f} MiB", flush=True)
    return out


def _one_m(args: argparse.Namespace, m: int, train: str, test: str, n_all: int) -> dict:
    gram = [_fit(args, m, train, test, min(r, n_all), "gram") for r in args.gram_rows]
    cg_rows = sorted({min(r or n_all, n_all) for r in args.cg_rows} | ({gram[-1]["n"]} if gram else set()))
    cg = [_fit(args, m, train, test, r, "pcg") for r in cg_rows]
    out: dict = {"gram": gram, "pcg": cg}
    if gram:
        shared = next(c for c in cg if c["n"] == gram[-1]["n"])
        out["validation_ratio"] = min(shared["validation"]) / min(gram[-1]["validation"])
        largest = cg[-1]
        gram_s = extrapolate([g["n"] for g in gram], [g["fit_s"] for g in gram], largest["n"])
        out["gram_seconds_at_largest"] = gram_s
        out["time_ratio"] = largest["fit_s"] / gram_s
        print(f"  M={m}: CG {largest['fit_s']:.0f} s at N={largest['n']} against the Gram's {gram_s:.0f} s "
              f"(extrapolated): {out['time_ratio']:.2f}; hold-out MSE CG / Gram at N={gram[-1]['n']}: "
              f"{out['validation_ratio']:.4f}", flush=True)
    return out


def _markdown(args: argparse.Namespace, results: dict) -> str:
    from ._common import table

    rows = []
    for m, r in results["m"].items():
        for fit in r["gram"] + r["pcg"]:
            inc = fit["incidents"]
            rows.append([m, fit["solver"], fit["n"], fit["dtype"], f"{fit['fit_s']:.1f}", fit["passes"],
                         fit["n_iter"] if fit["solver"] == "pcg" else "-", f"{fit['alpha']:g}",
                         f"{min(fit['validation']):.5f}", f"{fit['test_mse']:.5f}",
                         f"{fit['worker_peak'] / 2**20:.0f}", f"{fit['client_peak_above_base'] / 2**20:.0f}",
                         inc["pauses"] + inc["workers_removed"] + inc["memory_restarts"]])
    md = table(["M", "plan", "N", "map", "fit s", "passes", "CG it.", "alpha", "hold-out MSE", "test MSE",
                "worker peak MiB", "client peak above base MiB", "pauses + losses"], rows)
    lines = []
    for m, r in results["m"].items():
        if "time_ratio" in r:
            n = r["pcg"][-1]["n"]
            lines.append(f"- M = {m}: the Gram plan extrapolated to N = {n} from its two measured fits: "
                         f"{r['gram_seconds_at_largest']:.0f} s; CG / Gram time **{r['time_ratio']:.2f}**; hold-out "
                         f"MSE CG / Gram at N = {r['gram'][-1]['n']}: {r['validation_ratio']:.4f}.")
    limit = max(f["worker_limit"] for r in results["m"].values() for f in r["gram"] + r["pcg"])
    return (f"flights-3m from zarr ({results['n_train']} training rows, d = 3), {args.workers} workers limited to "
            f"{limit / 2**30:.1f} GiB each, gaussian sigma = {args.sigma} on standardised inputs, penalties {list(args.alphas)} "
            f"on a {VALIDATION:.0%} hold-out, tol = {args.tol}, validation_tol = {args.validation_tol or None}; each fit in a fresh process.\n\n" + md + "\n\n"
            + "\n".join(lines) + "\n")

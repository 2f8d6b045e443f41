"""Benchmark: Nyström ridge, dxrf against scikit-learn's ``Nystroem`` + ``Ridge``, and out of core.

(n1) In memory, on protein (``dxrf.datasets.load`` split 0, inputs standardised with the
training rows' mean and deviation): for each ``--m``, scikit-learn's
``Nystroem(gamma=1/2σ², n_components=M, random_state=0)`` + ``Ridge(alpha=α N)``
(fit, transform, fit, transform of the test rows, predict) against dxrf's
``RandomFeatureRidge(features=NystroemFeatures(landmarks=L, bandwidth=σ, dtype="float64"), alpha=α)``
(fit, predict) with the *same* landmarks ``L`` (scikit-learn's draw: the first M of
``RandomState(0).permutation(N)``), the same σ and α. Each fit runs in a fresh
subprocess; its peak resident memory (VmHWM, read from /proc at the end) is
reported whole and above the process's memory once the data are loaded ("base").
Median of ``--repeats``.

(n2) Out of core: random normal rows (``d = --n-features``, seed 0) written to zarr,
read by ``--workers`` single-threaded workers limited to ``--worker-memory``
each; ``RandomFeatureRidge(NystroemFeatures(M, landmarks="uniform"))`` fitted on the
first N rows for each ``--n-rows`` (target ``sin(x_0) + x_1 x_2 / 2``, computed lazily
from X). Reported: seconds and each worker's peak resident memory during the fit
(VmHWM, reset just before). scikit-learn is not run at this size: its
``Nystroem.transform`` of 10⁶ rows at M = 4000 is one dense 10⁶ × 4000 float64
array (32 GB, more than this machine's 24 GB), and ``Ridge`` copies it to centre it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import textwrap
import time

DESCRIPTION = "Nyström ridge: dxrf vs scikit-learn Nystroem + Ridge on protein; dxrf from zarr at N = 2.5e5 and 1e6"

# chosen on a 20% hashed validation split of protein's training rows (dxrf, M = 1000,
# sigma in {0.5, 0.7, 1, 1.4}, alpha in 1e-9 .. 1e-3): see BENCHMARKS.md
DEFAULT_SIGMA = 1.0
DEFAULT_ALPHA = 1e-6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--m", type=int, nargs="+", default=[1000, 4000], help="landmarks M (default 1000 4000)")
    parser.add_argument("--sigma", type=float, default=DEFAULT_SIGMA, help="gaussian bandwidth on standardised inputs")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="ridge penalty on the (1/N) loss")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--whitening", choices=["eigh", "cholesky"], default="eigh",
                        help="dxrf's whitening (cholesky: a single-alpha ridge solved in the landmark basis)")
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="BLAS threads of both libraries' processes (default: BLAS's own choice); 1 is the "
                             "fair setting on a machine shared with other jobs, where waiting BLAS threads spin")
    parser.add_argument("--skip-memory", action="store_true", help="only the in-memory comparison (n1)")
    parser.add_argument("--skip-sklearn", action="store_true", help="only the out-of-core runs (n2)")
    parser.add_argument("--n-rows", type=float, nargs="+", default=[2.5e5, 1e6], help="rows of the out-of-core runs")
    parser.add_argument("--ooc-m", type=int, default=1000, help="landmarks of the out-of-core runs (default 1000)")
    parser.add_argument("--n-features", type=int, default=9, help="input columns of the out-of-core rows")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="1.5GiB", help="memory limit of each worker (default 1.5GiB)")
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--workdir", default=None, help="where to write the zarr data (default: a temp dir, removed)")
    parser.add_argument("--out", default="results")


_PRELUDE = """
import json, time, numpy as np
import dxrf, dxrf.datasets
from dxrf.workflows._common import peak_rss as peak
from sklearn.preprocessing import StandardScaler
ds = dxrf.datasets.load("protein", split=0)
scaler = StandardScaler().fit(ds.X_train)
Xtr, Xte = scaler.transform(ds.X_train), scaler.transform(ds.X_test)
ytr, yte = ds.y_train, ds.y_test
M, SIGMA, ALPHA, WHITENING = {m}, {sigma}, {alpha}, "{whitening}"
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import Ridge
base = peak()
"""

_SKLEARN = """
t0 = time.perf_counter()
ny = Nystroem(gamma=1.0 / (2 * SIGMA**2), n_components=M, random_state=0).fit(Xtr)
model = Ridge(alpha=ALPHA * Xtr.shape[0]).fit(ny.transform(Xtr), ytr)
pred = model.predict(ny.transform(Xte))
fit_s = time.perf_counter() - t0
print(json.dumps({"fit_s": fit_s, "test_mse": float(np.mean((pred - yte) ** 2)), "peak": peak(), "base": base}))
"""

_DXRF = """
# scikit-learn's landmarks: the first M of RandomState(0).permutation(N)
L = Xtr[np.random.RandomState(0).permutation(Xtr.shape[0])[:M]]
t0 = time.perf_counter()
features = dxrf.NystroemFeatures(landmarks=L, bandwidth=SIGMA, dtype="float64", whitening=WHITENING)
model = dxrf.RandomFeatureRidge(features=features, alpha=ALPHA).fit(Xtr, ytr)
pred = model.predict(Xte)
fit_s = time.perf_counter() - t0
print(json.dumps({"fit_s": fit_s, "test_mse": float(np.mean((pred - yte) ** 2)), "peak": peak(), "base": base}))
"""


def _run(code: str, blas_threads: int | None = None) -> dict:
    env = dict(os.environ)
    if blas_threads is not None:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(blas_threads)
    from ._common import run_python

    return run_python(code, env)


def _in_memory(args: argparse.Namespace) -> tuple[dict, list]:
    results: dict = {}
    rows = []
    for m in args.m:
        prelude = textwrap.dedent(_PRELUDE).format(m=m, sigma=args.sigma, alpha=args.alpha, whitening=args.whitening)
        runs: dict = {"sklearn": [], "dxrf": []}
        for r in range(args.repeats):
            for who, body in (("sklearn", _SKLEARN), ("dxrf", _DXRF)):
                out = _run(prelude + textwrap.dedent(body), args.blas_threads)
                runs[who].append(out)
                print(f"  (n1) M={m} repeat {r}: {who:7s} {out['fit_s']:.2f} s, test MSE {out['test_mse']:.5f}, "
                      f"peak {out['peak'] / 2**30:.2f} GiB (base {out['base'] / 2**30:.2f})", flush=True)
        med = {w: {k: statistics.median(o[k] for o in outs) for k in ("fit_s", "test_mse", "peak", "base")}
               for w, outs in runs.items()}
        s, d = med["sklearn"], med["dxrf"]
        above = {w: med[w]["peak"] - med[w]["base"] for w in med}
        verdict = {
            "mse_ratio": d["test_mse"] / s["test_mse"],
            "time_ratio": d["fit_s"] / s["fit_s"],
            "peak_ratio": d["peak"] / s["peak"],
            "peak_above_base_ratio": above["dxrf"] / above["sklearn"],
        }
        verdict.update(
            mse_within_target=verdict["mse_ratio"] <= 1.02,
            time_within_target=verdict["time_ratio"] <= 1 / 3,
            memory_within_target=verdict["peak_above_base_ratio"] <= 1 / 3,
        )
        results[str(m)] = {"runs": runs, "median": med, **verdict}
        rows.append([
            m, f"{s['test_mse']:.4f} / {d['test_mse']:.4f} ({verdict['mse_ratio']:.3f})",
            f"{s['fit_s']:.1f} / {d['fit_s']:.1f} ({verdict['time_ratio']:.2f})",
            f"{s['peak'] / 2**20:.0f} / {d['peak'] / 2**20:.0f} ({verdict['peak_ratio']:.2f})",
            f"{above['sklearn'] / 2**20:.0f} / {above['dxrf'] / 2**20:.0f} ({verdict['peak_above_base_ratio']:.2f})",
        ])
    return results, rows


def _out_of_core(args: argparse.Namespace) -> tuple[dict, list]:
    import dask.array as da
    import numpy as np
    from dask.utils import parse_bytes

    import dxrf

    from ._common import bench_client, bench_workdir, close_client, random_rows, remove_workdir, store_zarr, worker_memory

    sizes = sorted({int(v) for v in args.n_rows})
    limit = parse_bytes(args.worker_memory)
    workdir = bench_workdir(args, "dxrf-bench-nystroem-")
    results: dict = {"m": args.ooc_m, "n_features": args.n_features, "worker_memory_limit": limit,
                     "workers": args.workers, "chunk_rows": args.chunk_rows, "runs": []}
    rows = []
    cluster, client = bench_client(args, args.workers, memory_limit=limit, dashboard_address=":0")
    try:
        zpath = str(workdir / "X.zarr")
        results["zarr_write_s"] = store_zarr(random_rows(sizes[-1], args.n_features, args.chunk_rows), zpath)
        Xz = da.from_zarr(zpath)
        sigma = float(np.sqrt(args.n_features))
        for n in sizes:
            X = Xz[:n]
            y = da.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2]
            rest = worker_memory(client, reset=True)
            t0 = time.perf_counter()
            model = dxrf.RandomFeatureRidge(
                features=dxrf.NystroemFeatures(args.ooc_m, bandwidth=sigma, dtype="float64", random_state=0),
                alpha=1e-6,
            ).fit(X, y)
            fit_s = time.perf_counter() - t0
            mem = worker_memory(client)
            peaks = {a: s["peak_rss"] for a, s in mem.items()}
            growth = max(s["peak_rss"] - rest.get(a, s)["rss"] for a, s in mem.items())
            results["runs"].append({"n_rows": n, "fit_s": fit_s, "passes": model.n_passes_, "peak_rss": peaks,
                                    "max_peak_rss": max(peaks.values()), "max_peak_above_rest": growth,
                                    "train_mse": model.train_mse_})
            print(f"  (n2) N={n}: {fit_s:.1f} s, {model.n_passes_} passes, worker peak "
                  f"{max(peaks.values()) / 2**20:.0f} MiB (+{growth / 2**20:.0f} above rest)", flush=True)
            rows.append([n, args.ooc_m, f"{fit_s:.1f}", model.n_passes_, f"{max(peaks.values()) / 2**20:.0f}",
                         f"{growth / 2**20:.0f}", f"{limit / 2**20:.0f}"])
    finally:
        close_client(cluster, client)
        remove_workdir(args, workdir)
    first, last = results["runs"][0], results["runs"][-1]
    results["peak_ratio_largest"] = last["max_peak_rss"] / first["max_peak_rss"]
    return results, rows


def run(args: argparse.Namespace) -> dict:
    from ._common import report, table

    results: dict = {"sigma": args.sigma, "alpha": args.alpha, "whitening": args.whitening}
    md = ""
    if not args.skip_sklearn:
        results["in_memory"], rows = _in_memory(args)
        md += table(["M", "test MSE sklearn / dxrf (ratio)", "seconds sklearn / dxrf (ratio)",
                     "peak MiB sklearn / dxrf (ratio)", "peak above base MiB sklearn / dxrf (ratio)"], rows)
        threads = "BLAS's default threads" if args.blas_threads is None else f"{args.blas_threads} BLAS thread(s)"
        md += (f"\n\nprotein split 0, standardised, gaussian sigma = {args.sigma}, alpha = {args.alpha} (sklearn alpha "
               f"= alpha N), the same landmarks, dxrf's whitening {args.whitening}; median of {args.repeats} runs, each in a fresh "
               f"process, {threads}.\n\n")
    if not args.skip_memory:
        results["out_of_core"], rows = _out_of_core(args)
        md += table(["N", "M", "fit s", "passes", "max worker peak MiB", "above rest MiB", "worker limit MiB"], rows)
        md += ("\n\nRandom normal rows from zarr, RandomFeatureRidge(NystroemFeatures(uniform landmarks, float64)); "
               "scikit-learn not run: its transform at N = 1e6, M = 4000 is a 32 GB float64 array.\n")
    return report(args.out, "bench-nystroem", results, md)

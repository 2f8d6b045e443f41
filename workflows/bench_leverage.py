"""Benchmark: client-side leverage scores for one ``lam`` against a plain Cholesky.

For one penalty, :func:`dxrf.selection.leverage_scores` factorises
``A = G + lam I = L L^T`` (LAPACK ``dpotrf``), inverts the factor (``dtrtri``)
and takes ``Q_ii = 1 - lam ||L^{-1} e_i||^2``. By flop count that is twice a
Cholesky (``M0^3 / 3`` each), so the ratio to a bare ``dpotrf`` of the same
matrix, timed in the same run, shows what the rest costs. All of it runs with
the client's thread count (:func:`dxrf.selection.client_threads`).

The Gram is that of random Fourier features of ``--n-rows`` Gaussian rows,
``G = Z^T Z / n`` with ``Z = sqrt(2 / M0) cos(X W + b)`` (float64, NumPy): its
trace is about 1 and its spectrum decays like the Gaussian kernel's on those
rows; with ``n < M0`` it has rank ``n``, i.e. it is only positive
semi-definite, as from ``n_samples < n_candidates``.

Also reported: the triangular inverse alone, the same inverse in float32 (not
used by dxrf; its error shows whether it would be accurate enough), and at
``--eigh-m0`` the eigendecomposition the spectral path needs, with the largest
relative difference between the two paths' weights.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

DESCRIPTION = "leverage scores for one lam (Cholesky + triangular inverse) vs a plain Cholesky, all client cores"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--m0", type=int, nargs="+", default=[4000], help="candidate counts M0 (default 4000)")
    parser.add_argument("--lam", type=float, default=1e-3, help="penalty on the normalised scale (default 1e-3)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-rows", type=int, default=4000, help="rows of the features behind G (default 4000)")
    parser.add_argument("--n-features", type=int, default=10, help="input columns d (default 10)")
    parser.add_argument(
        "--eigh-m0", type=int, default=2000, help="M0 of the eigendecomposition reference (default 2000; 0 skips it)"
    )
    parser.add_argument("--no-float32", action="store_true", help="skip the float32 triangular inverse")
    parser.add_argument("--out", default="results", help="results folder")


def rff_gram(m0: int, n_rows: int, d: int, seed: int = 0) -> np.ndarray:
    """``G = Z^T Z / n`` of ``m0`` random Fourier features (bandwidth ``sqrt(d)``) of Gaussian rows."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, d))
    W = rng.standard_normal((d, m0)) / np.sqrt(d)
    Z = X @ W
    Z += rng.uniform(0.0, 2.0 * np.pi, m0)
    np.cos(Z, out=Z)
    Z *= np.sqrt(2.0 / m0)
    G = Z.T @ Z  # NumPy's syrk: exactly symmetric
    G /= n_rows
    return G


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _norms_lower(X: np.ndarray) -> np.ndarray:
    """Squared column norms (in float64) of the lower triangle of the Fortran-ordered ``X``."""
    T = np.triu(X.T)  # column i of X is row i of X.T
    return np.einsum("ij,ij->i", T, T, dtype=np.float64)


def _measure(G: np.ndarray, lam: float, repeats: int, float32: bool) -> dict:
    from scipy.linalg import lapack

    from dxrf.core import blas_limit
    from dxrf.selection import client_threads, leverage_scores

    m = G.shape[0]
    A = G.T.copy(order="F")  # G is symmetric: its transpose is G in Fortran order
    A.flat[:: m + 1] += lam
    buf = np.empty_like(A, order="F")
    times: dict[str, list[float]] = {"cholesky": [], "leverage": [], "trtri": [], "trtri32": []}
    q = X32 = None
    with blas_limit(client_threads()):
        for _ in range(repeats):
            # interleaved, so that a slow spell of the machine hits every variant alike
            np.copyto(buf, A)
            t0 = time.perf_counter()
            L, info = lapack.dpotrf(buf, lower=1, clean=0, overwrite_a=1)
            times["cholesky"].append(time.perf_counter() - t0)
            assert info == 0, f"dpotrf failed: info={info}"
            L32 = L.astype(np.float32, order="F") if float32 else None
            t0 = time.perf_counter()
            _, info = lapack.dtrtri(L, lower=1, overwrite_c=1)
            times["trtri"].append(time.perf_counter() - t0)
            assert info == 0, f"dtrtri failed: info={info}"
            if float32:
                t0 = time.perf_counter()
                X32, info = lapack.strtri(L32, lower=1, overwrite_c=1)
                times["trtri32"].append(time.perf_counter() - t0)
                assert info == 0, f"strtri failed: info={info}"
                del L32
            t0 = time.perf_counter()
            q, d = leverage_scores(G, lam)
            times["leverage"].append(time.perf_counter() - t0)
    q32 = None
    if float32:
        diag32 = np.clip(1.0 - lam * _norms_lower(X32), 0.0, None)
        q32 = diag32 / diag32.sum()
        del X32
    med = {k: statistics.median(v) for k, v in times.items() if v}
    out = {
        "m0": m,
        "threads": client_threads(),
        "times_s": times,
        "median_s": med,
        "dof": float(d),
        "ratio_leverage_to_cholesky": med["leverage"] / med["cholesky"],
        "ratio_trtri_to_cholesky": med["trtri"] / med["cholesky"],
        "cholesky_gflops": m**3 / 3 / med["cholesky"] / 1e9,
        "trtri_gflops": m**3 / 3 / med["trtri"] / 1e9,
    }
    if float32:
        out["trtri32_gflops"] = m**3 / 3 / med["trtri32"] / 1e9
        out["float32_weights_rel_error"] = _rel(q32, q)
        out["ratio_cholesky_plus_trtri32"] = (med["cholesky"] + med["trtri32"]) / med["cholesky"]
    return out


def _measure_eigh(m0: int, args: argparse.Namespace) -> dict:
    from dxrf.core import blas_limit
    from dxrf.selection import client_threads, gram_spectrum, leverage_scores

    from ._common import median_time

    G = rff_gram(m0, args.n_rows, args.n_features)
    with blas_limit(client_threads()):
        t_eig, times_eig, spec = median_time(lambda: np.linalg.eigh(G), args.repeats)
    t_lev, times_lev, (q, d) = median_time(lambda: leverage_scores(G, args.lam), args.repeats)
    q_eig, d_eig = leverage_scores(gram_spectrum(G), args.lam)
    return {
        "m0": m0,
        "eigh_median_s": t_eig,
        "eigh_times_s": times_eig,
        "leverage_median_s": t_lev,
        "leverage_times_s": times_lev,
        "ratio_eigh_to_leverage": t_eig / t_lev,
        "weights_rel_diff": _rel(q, q_eig),
        "dof_rel_diff": abs(d - d_eig) / d_eig,
    }


def run(args: argparse.Namespace) -> dict:
    from threadpoolctl import threadpool_info

    from dxrf.selection import client_threads

    from ._common import report, table

    results: dict = {
        "lam": args.lam,
        "n_rows": args.n_rows,
        "n_features": args.n_features,
        "threads": client_threads(),
        "blas": [
            {k: lib.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for lib in threadpool_info()
            if lib.get("user_api") == "blas"
        ],
        "runs": [],
    }
    print(f"BLAS threads: {client_threads()}, lam={args.lam}, G from {args.n_rows} rows", flush=True)
    rows = []
    for m0 in args.m0:
        t0 = time.perf_counter()
        G = rff_gram(m0, args.n_rows, args.n_features)
        build = time.perf_counter() - t0
        r = _measure(G, args.lam, args.repeats, not args.no_float32)
        r["gram_build_s"] = build
        del G
        results["runs"].append(r)
        med = r["median_s"]
        print(
            f"  M0={m0}: cholesky {med['cholesky']:.3f} s, leverage {med['leverage']:.3f} s, "
            f"ratio {r['ratio_leverage_to_cholesky']:.2f} (trtri {med['trtri']:.3f} s; "
            f"{r['cholesky_gflops']:.1f} / {r['trtri_gflops']:.1f} GFLOP/s), d_lam {r['dof']:.1f}",
            flush=True,
        )
        if "trtri32" in med:
            print(
                f"  M0={m0}: float32 trtri {med['trtri32']:.3f} s (cholesky + it: "
                f"{r['ratio_cholesky_plus_trtri32']:.2f}), weights rel. error {r['float32_weights_rel_error']:.1e}",
                flush=True,
            )
        rows.append(
            [m0, r["threads"], med["cholesky"], med["leverage"], r["ratio_leverage_to_cholesky"], med["trtri"],
             med.get("trtri32", float("nan")), r.get("float32_weights_rel_error", float("nan"))]
        )
    md = table(
        ["M0", "threads", "cholesky s", "leverage s", "leverage / cholesky", "trtri s", "trtri f32 s",
         "f32 weights rel err"],
        rows,
    )
    if args.eigh_m0:
        e = _measure_eigh(args.eigh_m0, args)
        results["eigh"] = e
        print(
            f"  M0={e['m0']}: eigh {e['eigh_median_s']:.3f} s, leverage (Cholesky) {e['leverage_median_s']:.3f} s "
            f"({e['ratio_eigh_to_leverage']:.1f}x), weights rel. diff {e['weights_rel_diff']:.1e}",
            flush=True,
        )
        md += "\n\n" + table(
            ["M0", "eigh s", "leverage (Cholesky) s", "eigh / leverage", "weights rel diff", "d_lam rel diff"],
            [[e["m0"], e["eigh_median_s"], e["leverage_median_s"], e["ratio_eigh_to_leverage"],
              e["weights_rel_diff"], e["dof_rel_diff"]]],
        )
    return report(args.out, "bench-leverage", results, md)

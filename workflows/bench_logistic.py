"""Benchmark: logistic regression on random Fourier features, dxrf against dask-ml and scikit-learn.

Every contender solves the SAME problem on the SAME features, labels ``t = ±1``::

    L(theta, beta) = (1/N) sum_n log(1 + exp(-t_n (z(x_n)^T theta + beta))) + (alpha/2) |theta|^2

with the intercept ``beta`` unpenalised. The features are dxrf's float32 random Fourier
features ``z = scale * cos(x W + b)``; dxrf computes them inside every pass from X, the
others get them precomputed (not timed) as float64 copies of exactly those values.

- dxrf ``RandomFeatureClassifier(loss="logistic", alpha=alpha)`` (blockwise Newton), fitted
  from X (i) as a NumPy array in this process and (ii) as a dask array persisted on a
  2-worker x 1-thread ``LocalCluster`` of processes.
- dask-ml ``LogisticRegression(solver="lbfgs")`` on the persisted dask array of the
  explicit features with a constant column appended. dask-glm's defaults would solve
  another problem: it standardises the columns (``normalize=True``) and its L2 penalty
  covers the intercept. So: ``solver_kwargs={"normalize": False}``, ``fit_intercept=False``
  with the constant column as the intercept, and a penalty that leaves that column's
  coefficient free; it minimises ``sum(loss) + |theta|^2 / (2C)`` = ``N L`` with
  ``C = 1 / (N alpha)``, and its ``tol`` (L-BFGS ``pgtol``) bounds the gradient of that sum,
  so it gets ``N * tol``.
- scikit-learn ``LogisticRegression(solver="lbfgs", C=1 / (N alpha))`` on the in-memory
  float64 feature matrix: it minimises exactly ``L`` (mean loss, unpenalised intercept),
  ``tol`` bounds the gradient of ``L``.

Each fit's objective is evaluated in float64 on the same explicit features. Times are
medians of ``--repeats`` rounds; the contenders alternate within a round, so drift on a
shared machine hits them alike. Two protocols (``--protocol``, default both):

*Same tolerance.* Every solver runs at the gradient tolerance ``--tol`` (in units of ``L``).
A gradient tolerance does not mean the same thing to a Newton method and to L-BFGS: at
1e-8 dxrf spends passes on digits the objective no longer shows, while L-BFGS stops on
its relative-decrease test (scipy's ``factr``) first. So this table is reported, but it
compares amounts of over-solving as much as solvers.

*Time to target.* What a user wants is the optimum to a given accuracy. The reference
optimum is the lowest objective of the same-tolerance runs (all solved tightly); with
``--protocol target`` alone it is one untimed dxrf fit at ``REFERENCE_TOL``. Each
contender is then calibrated, untimed: it is fitted at the tolerances of ``--ladder``
from loose to tight, and keeps the first whose objective is within ``--rtol`` (relative)
of the reference; when none is, it keeps the tightest and is marked as not reaching the
target. The timed rounds run every contender at its calibrated tolerance. The issue's
targets (speed-up over dask-ml, ratio to scikit-learn) are judged on these times, and
only count as met when every contender's timed objective is within ``--rtol``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

DESCRIPTION = "logistic regression on RFF: dxrf Newton vs dask-ml and scikit-learn L-BFGS (same features and objective)"

#: Targets of issue #29 (issue #6 (c) asked for 1.5 against scikit-learn): dxrf on the cluster at
#: least this many times faster than dask-ml ...
TARGET_SPEEDUP_VS_DASK_ML = 5.0
#: ... and in memory at most this fraction of scikit-learn's time.
TARGET_RATIO_VS_SKLEARN = 0.3
#: Tolerance of the one untimed dxrf fit that gives the reference optimum when the
#: same-tolerance runs are skipped (``--protocol target``).
REFERENCE_TOL = 1e-10
#: Default tolerance ladder of the time-to-target calibration, loose to tight.
DEFAULT_LADDER = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
#: The contenders, in the order they run within a round.
CONTENDERS = ("dxrf, NumPy", "scikit-learn", "dxrf, dask", "dask-ml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-rows", type=float, default=2e5, help="rows N (default 2e5)")
    parser.add_argument("--n-features", type=int, default=90, help="input columns d (default 90)")
    parser.add_argument("--m", type=int, default=500, help="random Fourier features M (default 500)")
    parser.add_argument("--alpha", type=float, default=1e-4, help="L2 penalty on the mean loss (default 1e-4)")
    parser.add_argument(
        "--tol",
        type=float,
        default=1e-8,
        help="gradient tolerance on L for every solver in the same-tolerance protocol (default 1e-8; dask-ml gets N*tol)",
    )
    parser.add_argument("--max-iter", type=int, default=1000, help="iteration cap of the L-BFGS solvers (default 1000)")
    parser.add_argument(
        "--rtol", type=float, default=1e-6, help="required relative gap of the objectives to the reference (default 1e-6)"
    )
    parser.add_argument(
        "--protocol",
        choices=["both", "same-tol", "target"],
        default="both",
        help="same-tol: every solver at --tol; target: time to reach the reference log-loss within --rtol, each "
        "solver at its loosest sufficient tolerance from --ladder; both (default): both tables, targets judged on "
        "the time-to-target one",
    )
    parser.add_argument(
        "--ladder",
        type=float,
        nargs="+",
        default=list(DEFAULT_LADDER),
        metavar="TOL",
        help="tolerances tried by the time-to-target calibration, in the units of --tol; walked from loose to tight "
        f"(default {' '.join(f'{t:g}' for t in DEFAULT_LADDER)})",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the local cluster (1 thread each)")
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument(
        "--dask-ml-intercept",
        choices=["column", "native"],
        default="column",
        help="dask-ml's intercept: a persisted constant column (default, its fastest setting) or "
        "fit_intercept=True (dask-ml appends the column in every function evaluation)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results", help="results folder")


# -- data, features, objective ------------------------------------------------------------


def make_data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian inputs and binary labels from a nonlinear function of three directions plus noise.

    Returns
    -------
    X : ndarray of shape (n, d), float32
    y : ndarray of shape (n,), int64 in {0, 1}
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    U = np.linalg.qr(rng.standard_normal((d, 3)))[0]
    P = X @ U
    s = np.sin(1.5 * P[:, 0]) + 0.5 * P[:, 1] ** 2 - 0.5 + 0.5 * P[:, 2] + 0.3 * rng.standard_normal(n)
    return X, (s > 0).astype(np.int64)


def explicit_features(X: np.ndarray, kernel: Any, constant: bool = False) -> np.ndarray:
    """float64 copies of dxrf's features ``z = scale * raw(X)``, as a pass computes them.

    A pass keeps the raw features in the kernel dtype (float32) and applies the float64
    per-column scale to the coefficients, so the exact features are ``float64(raw) * scale``.
    With ``constant`` a column of ones is appended (an intercept for dask-ml).
    """
    m = kernel.n_components
    Z = np.empty((X.shape[0], m + int(constant)))
    Z[:, :m] = kernel.raw(X)
    Z[:, :m] *= kernel.scale
    if constant:
        Z[:, m] = 1.0
    return Z


def objective(Z: np.ndarray, t: np.ndarray, coef: np.ndarray, intercept: float, alpha: float) -> float:
    """``mean(log(1 + exp(-t (Z coef + intercept)))) + alpha/2 |coef|^2`` in float64."""
    coef = np.asarray(coef, dtype=np.float64).ravel()
    f = Z @ coef + float(intercept)
    return float(np.logaddexp(0.0, -t * f).mean() + 0.5 * alpha * coef @ coef)


def _penalty_except_last() -> Any:
    """A dask-glm L2 penalty ``|beta[:-1]|^2 / 2`` that leaves the last coefficient free.

    The last column is the constant one, so its coefficient is an unpenalised intercept.
    ``evaluations`` counts the calls of ``f``: one per L-BFGS function evaluation.
    """
    from dask_glm.regularizers import Regularizer

    class L2ExceptLast(Regularizer):
        name = "dxrf-bench-l2-except-last"

        def __init__(self) -> None:
            self.evaluations = 0

        @staticmethod
        def _free_last(beta: Any) -> Any:
            mask = np.ones(beta.shape[0])
            mask[-1] = 0.0
            return beta * mask

        def f(self, beta: Any) -> Any:
            self.evaluations += 1
            return (self._free_last(beta) ** 2).sum() / 2

        def gradient(self, beta: Any) -> Any:
            return self._free_last(beta)

        def hessian(self, beta: Any) -> np.ndarray:
            return np.diag(self._free_last(np.ones(beta.shape[0])))

    return L2ExceptLast()


# -- the contenders --------------------------------------------------------------------------


def _fit_dxrf(X: Any, y: Any, fmap_params: dict, alpha: float, tol: float) -> tuple[np.ndarray, float, dict]:
    import dxrf

    clf = dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(**fmap_params), loss="logistic", alpha=alpha, tol=tol)
    clf.fit(X, y)
    info = {
        "solver": clf.solver_,
        "passes": int(clf.n_passes_),
        "iterations": int(clf.n_iter_),
        "converged": bool(clf.converged_),
        "kernel": clf.kernel_,
    }
    return clf.coef_[0], float(clf.intercept_[0]), info


def _fit_sklearn(Z: np.ndarray, y: np.ndarray, alpha: float, tol: float, max_iter: int) -> tuple[np.ndarray, float, dict]:
    from sklearn.linear_model import LogisticRegression

    n = Z.shape[0]
    model = LogisticRegression(C=1.0 / (n * alpha), solver="lbfgs", tol=tol, max_iter=max_iter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(Z, y)
    iterations = int(model.n_iter_[0])
    info = {"iterations": iterations, "converged": iterations < max_iter and not _convergence_warned(caught)}
    return model.coef_[0], float(model.intercept_[0]), info


def _fit_dask_ml(
    Z: Any, y: Any, n: int, alpha: float, tol: float, max_iter: int, native_intercept: bool
) -> tuple[np.ndarray, float, dict]:
    """dask-ml on features ``Z``: with a constant last column, or (``native_intercept``)
    without one, letting dask-ml append it (it does so inside every function evaluation)."""
    from dask_ml.linear_model import LogisticRegression

    penalty = _penalty_except_last()  # the intercept's coefficient is last either way
    model = LogisticRegression(
        penalty=penalty,
        C=1.0 / (n * alpha),
        fit_intercept=native_intercept,
        solver="lbfgs",
        tol=n * tol,  # pgtol on the gradient of sum(loss) + penalty = N L
        max_iter=max_iter,
        solver_kwargs={"normalize": False},
    )
    with warnings.catch_warnings():
        # dask-glm sets a dask option under its deprecated name
        warnings.filterwarnings("ignore", message=".*fuse_ave_width.*", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*iprint.*", category=DeprecationWarning)  # passed to scipy
        model.fit(Z, y)
    info = {"evaluations": penalty.evaluations}
    if native_intercept:
        return np.asarray(model.coef_, dtype=np.float64).ravel(), float(model.intercept_), info
    beta = np.asarray(model.coef_, dtype=np.float64).ravel()
    return beta[:-1], float(beta[-1]), info


def _convergence_warned(caught: list) -> bool:
    from sklearn.exceptions import ConvergenceWarning

    return any(issubclass(w.category, ConvergenceWarning) for w in caught)


def _rounds(
    fns: dict[str, Callable[[], Any]], repeats: int, before: Callable[[], Any] | None = None
) -> dict[str, tuple[float, list[float], Any]]:
    """Run every function once per round, ``repeats`` rounds; (median s, times, last result) each.

    ``before`` runs before every call, outside the timing.
    """
    times: dict[str, list[float]] = {name: [] for name in fns}
    last: dict[str, Any] = {}
    for r in range(repeats):
        for name, fn in fns.items():
            if before is not None:
                before()
            t0 = time.perf_counter()
            last[name] = fn()
            times[name].append(time.perf_counter() - t0)
            print(f"  round {r}: {name:22s} {times[name][-1]:8.2f} s", flush=True)
    return {name: (statistics.median(ts), ts, last[name]) for name, ts in times.items()}


def _scattered_keys(dask_scheduler: Any) -> int:
    return sum(1 for key in dask_scheduler.tasks if isinstance(key, str) and key.startswith("ndarray-"))


def _settle(client: Any, timeout: float = 5.0) -> None:
    """Wait until the scheduler has dropped dask-glm's scattered iterates from earlier fits.

    dask-glm scatters every L-BFGS iterate with a content-hashed key (``ndarray-<token>``)
    and every fit starts from zeros, so a fit can reuse the key of an earlier fit's scatter
    whose release is still in flight; the scheduler then forgets data the new fit needs
    ("lost dependencies"). Dropping the old futures (garbage collection) and waiting for
    the scheduler to forget them removes the race. Untimed; a no-op when nothing is left.
    """
    gc.collect()
    deadline = time.monotonic() + timeout
    while client.run_on_scheduler(_scattered_keys) and time.monotonic() < deadline:
        time.sleep(0.01)


# -- the time-to-target protocol -----------------------------------------------------------------


def rel_gap(value: float, reference: float) -> float:
    """``(value - reference) / |reference|``: negative when ``value`` is below the reference."""
    return (value - reference) / abs(reference)


def tolerance_ladder(values: Sequence[float]) -> list[float]:
    """The calibration ladder: the distinct tolerances of ``values``, loose to tight."""
    ladder = sorted({float(v) for v in values}, reverse=True)
    if not ladder or not all(np.isfinite(v) and v > 0 for v in ladder):
        raise ValueError(f"the ladder needs finite tolerances > 0, got {list(values)!r}")
    return ladder


def calibrate(
    fit: Callable[[float], tuple[float, dict]], ladder: Sequence[float], reference: float, rtol: float
) -> dict:
    """The loosest tolerance of ``ladder`` at which ``fit`` gets within ``rtol`` of ``reference``.

    Parameters
    ----------
    fit : callable
        ``fit(tol) -> (objective, info)``: one fit at that tolerance; ``info`` (its work) is recorded.
    ladder : sequence of float
        Tolerances, loose to tight. The walk stops at the first sufficient one, so the
        tighter ones are never fitted.
    reference : float
        The reference optimum.
    rtol : float
        Largest accepted :func:`rel_gap` of the objective to ``reference``. A fit below the
        reference is accepted too: it is at least as good.

    Returns
    -------
    dict
        ``ladder``; ``tried``: one entry per fit, ``tol``, ``objective``, ``rel_gap`` and the
        info; ``tol``: the chosen tolerance; ``reached``: False when no tolerance was
        sufficient, ``tol`` then being the tightest; ``loosest``: True when the first
        rung sufficed, so the ladder (not the solver) set how loose the tolerance is.
    """
    ladder = list(ladder)
    tried = []
    for tol in ladder:
        value, info = fit(tol)
        gap = rel_gap(value, reference)
        tried.append({"tol": tol, "objective": value, "rel_gap": gap, **info})
        if gap <= rtol:
            return {"ladder": ladder, "tried": tried, "tol": tol, "reached": True, "loosest": len(tried) == 1}
    return {"ladder": ladder, "tried": tried, "tol": ladder[-1], "reached": False, "loosest": False}


def time_ratios(runs: dict[str, dict]) -> dict[str, float]:
    """The ratios of the issue's targets, from the median times of ``runs``."""
    t_np, t_sk = runs["dxrf, NumPy"]["median_s"], runs["scikit-learn"]["median_s"]
    t_dd, t_dm = runs["dxrf, dask"]["median_s"], runs["dask-ml"]["median_s"]
    return {
        "dxrf_dask_over_dask_ml": t_dd / t_dm,
        "dxrf_numpy_over_sklearn": t_np / t_sk,
        "speedup_vs_dask_ml": t_dm / t_dd,
    }


def judge(ratios: dict[str, float], within_rtol: bool, protocol: str) -> dict:
    """The targets of issue #6 (c) on ``ratios``; a target is met only when every objective is within rtol."""
    return {
        "protocol": protocol,
        "speedup_vs_dask_ml": TARGET_SPEEDUP_VS_DASK_ML,
        "ratio_vs_sklearn": TARGET_RATIO_VS_SKLEARN,
        "objectives_within_rtol": within_rtol,
        "met_vs_dask_ml": within_rtol and ratios["speedup_vs_dask_ml"] >= TARGET_SPEEDUP_VS_DASK_ML,
        "met_vs_sklearn": within_rtol and ratios["dxrf_numpy_over_sklearn"] <= TARGET_RATIO_VS_SKLEARN,
    }


# -- the benchmark -------------------------------------------------------------------------------


def _work(r: dict) -> str:
    if "passes" in r:
        return f"{r['passes']} passes ({r['iterations']} Newton iterations)"
    if "evaluations" in r:
        return f"{r['evaluations']} function evaluations"
    return f"{r['iterations']} L-BFGS iterations"


def _ratio_line(ratios: dict[str, float], targets: dict | None) -> str:
    """The two ratios, with met / MISSED when ``targets`` judges them."""

    def verdict(key: str, target: str) -> str:
        return f"target {target}: {'met' if targets[key] else 'MISSED'}" if targets is not None else ""

    vs_dm = verdict("met_vs_dask_ml", f">= {TARGET_SPEEDUP_VS_DASK_ML:g}x")
    vs_sk = verdict("met_vs_sklearn", f"<= {TARGET_RATIO_VS_SKLEARN:g}")
    return (
        f"dxrf (dask) / dask-ml = {ratios['dxrf_dask_over_dask_ml']:.3f} (speed-up {ratios['speedup_vs_dask_ml']:.1f}x"
        + (f", {vs_dm}" if vs_dm else "")
        + f"); dxrf (NumPy) / scikit-learn = {ratios['dxrf_numpy_over_sklearn']:.3f}"
        + (f" ({vs_sk})" if vs_sk else "")
        + "."
    )


def run(args: argparse.Namespace) -> dict:
    import dask.array as da
    from distributed import wait

    import dxrf

    from ._common import bench_client, close_client, median_time, report, require, table

    # before any work: without dask-ml the comparison cannot run
    require("dask_ml.linear_model", "dask-ml", "bench logistic compares against dask-ml's LogisticRegression")
    n, d, m, alpha, tol = int(args.n_rows), args.n_features, args.m, float(args.alpha), float(args.tol)
    rtol, protocol = float(args.rtol), args.protocol
    ladder = tolerance_ladder(args.ladder)
    X, y = make_data(n, d, args.seed)
    t = np.where(y == 1, 1.0, -1.0)
    fmap_params = {"n_components": m, "bandwidth": float(np.sqrt(d)), "dtype": "float32", "random_state": args.seed}
    kernel = dxrf.RandomFourierFeatures(**fmap_params).fit(X[:1]).kernel_
    features_s, _, Z = median_time(lambda: explicit_features(X, kernel), 1)

    def evaluate(name: str, result: tuple[np.ndarray, float, dict]) -> dict:
        """A fit's float64 objective on the explicit features, and its work."""
        coef, intercept, info = result
        info = dict(info)
        kern = info.pop("kernel", None)
        # dxrf refitted its feature map: it must be the benchmark's
        same = kern is None or all(np.array_equal(getattr(kern, a), getattr(kernel, a)) for a in ("W", "b", "scale"))
        if not same:
            raise RuntimeError(f"{name} drew other random features than the benchmark")
        return {"objective": objective(Z, t, coef, intercept, alpha), **info}

    def summarise(timed: dict[str, tuple[float, list[float], Any]]) -> dict[str, dict]:
        return {name: {"median_s": s, "times_s": ts, **evaluate(name, res)} for name, (s, ts, res) in timed.items()}

    same_runs: dict[str, dict] = {}
    target: dict[str, Any] | None = None
    cluster, client = bench_client(args, args.workers)
    try:
        chunks = args.chunk_rows
        with warnings.catch_warnings():
            # X travels to the workers once, inside the graph of this persist
            warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
            Xd = client.persist(da.from_array(X, chunks=(chunks, d), name=False))
        yd = client.persist(da.from_array(y, chunks=(chunks,), name=False))
        # dask-ml's input: the same features (and a constant column), made and kept on the workers
        native = args.dask_ml_intercept == "native"
        width = m if native else m + 1
        Zd = Xd.map_blocks(explicit_features, kernel, not native, dtype=np.float64, chunks=(Xd.chunks[0], (width,)))
        Zd = client.persist(Zd)
        y01d = client.persist(yd.astype(np.float64))
        wait([Xd, yd, Zd, y01d])

        fitters: dict[str, Callable[[float], Any]] = {
            "dxrf, NumPy": lambda tl: _fit_dxrf(X, y, fmap_params, alpha, tl),
            "scikit-learn": lambda tl: _fit_sklearn(Z, y, alpha, tl, args.max_iter),
            "dxrf, dask": lambda tl: _fit_dxrf(Xd, yd, fmap_params, alpha, tl),
            "dask-ml": lambda tl: _fit_dask_ml(Zd, y01d, n, alpha, tl, args.max_iter, native),
        }

        def at(tols: dict[str, float]) -> dict[str, Callable[[], Any]]:
            return {name: (lambda f=fitters[name], tl=tols[name]: f(tl)) for name in CONTENDERS}

        # warm up imports, thread pools and the workers on a slice (not timed)
        small = min(n, chunks)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _fit_dxrf(X[:small], y[:small], fmap_params, alpha, 1e-3)
            _fit_dxrf(Xd[:small], yd[:small], fmap_params, alpha, 1e-3)
            _fit_sklearn(Z[:small], y[:small], alpha, 1e-3, 5)
            _fit_dask_ml(Zd[:small], y01d[:small], small, alpha, 1e-3, 2, native)

        def settle() -> None:
            _settle(client)


        if protocol != "target":
            print(f"same tolerance (tol={tol:g}):", flush=True)
            same_runs = summarise(_rounds(at(dict.fromkeys(CONTENDERS, tol)), args.repeats, settle))

        if protocol != "same-tol":
            if same_runs:  # solved tightly already: their best is the optimum
                reference = min(r["objective"] for r in same_runs.values())
                source = f"lowest objective of the same-tolerance runs (tol={tol:g})"
            else:
                reference = evaluate("dxrf, NumPy", fitters["dxrf, NumPy"](REFERENCE_TOL))["objective"]
                source = f"dxrf, NumPy at tol={REFERENCE_TOL:g} (one untimed fit)"
            print(f"calibration (untimed), reference objective {reference:.12f}:", flush=True)
            calibration = {}
            for name in CONTENDERS:

                def fit_once(tl: float, name: str = name) -> tuple[float, dict]:
                    settle()
                    info = evaluate(name, fitters[name](tl))
                    return info.pop("objective"), info

                calibration[name] = c = calibrate(fit_once, ladder, reference, rtol)
                steps = ", ".join(f"{s['tol']:g} -> {s['rel_gap']:.1e}" for s in c["tried"])
                print(f"  {name:22s} {steps}; tol {c['tol']:g}{'' if c['reached'] else ' (NOT reached)'}", flush=True)
            print("time to target:", flush=True)
            tols = {name: c["tol"] for name, c in calibration.items()}
            target_runs = summarise(_rounds(at(tols), args.repeats, settle))
            target = {"reference_objective": reference, "reference_source": source, "calibration": calibration,
                      "runs": target_runs}
    finally:
        close_client(cluster, client)

    # -- same tolerance: gaps to the lowest objective among these runs
    max_gap: float | None = None
    ratios_same: dict[str, float] | None = None
    if same_runs:
        best = min(r["objective"] for r in same_runs.values())
        for r in same_runs.values():
            r["rel_gap"] = rel_gap(r["objective"], best)
        max_gap = max(r["rel_gap"] for r in same_runs.values())
        ratios_same = time_ratios(same_runs)

    # -- time to target: gaps to the reference; these ratios decide the targets when they exist
    if target is not None:
        reference = target["reference_objective"]
        for name, r in target["runs"].items():
            c = target["calibration"][name]
            r["tol"], r["reached_in_calibration"] = c["tol"], c["reached"]
            r["rel_gap"] = rel_gap(r["objective"], reference)
        target_gap = max(r["rel_gap"] for r in target["runs"].values())
        target["max_rel_gap"] = target_gap
        target["all_within_rtol"] = target_gap <= rtol
        seen = [s["objective"] for c in target["calibration"].values() for s in c["tried"]]
        target["lowest_objective_seen"] = min(seen + [r["objective"] for r in target["runs"].values()])
        target["ratios"] = time_ratios(target["runs"])
        ratios = target["ratios"]
        targets = judge(ratios, target["all_within_rtol"], "target")
    else:
        ratios = ratios_same
        targets = judge(ratios, max_gap <= rtol, "same-tol")

    dask_ml_model = (
        f"LogisticRegression(solver='lbfgs', C={1 / (n * alpha):.6g}, "
        + ("fit_intercept=True" if args.dask_ml_intercept == "native" else "fit_intercept=False + constant column")
        + f", penalty=L2 except the intercept, normalize=False, tol=N*tol, max_iter={args.max_iter}) "
        "on persisted float64 features; L-BFGS factr stays at scipy's 1e7 (dask-glm does not pass it on)"
    )
    settings = {
        "objective": "mean log-loss + alpha/2 |theta|^2, intercept unpenalised",
        "dxrf": f"RandomFeatureClassifier(loss='logistic', alpha={alpha:g}, tol=tol); features float32, "
                "kept between passes when they fit (cache_features='auto')",
        "scikit-learn": f"LogisticRegression(solver='lbfgs', C=1/(N alpha)={1 / (n * alpha):.6g}, tol=tol, "
        f"max_iter={args.max_iter}) on float64 features",
        "dask-ml": dask_ml_model,
        "tol": (f"same tolerance: tol={tol:g} for all (dask-ml N*tol={n * tol:g})" if same_runs else "")
        + ("; " if same_runs and target else "")
        + (
            f"time to target: each at its calibrated tol from the ladder {' '.join(f'{v:g}' for v in ladder)}"
            if target
            else ""
        ),
    }
    results = {
        "n_rows": n,
        "n_features": d,
        "m": m,
        "alpha": alpha,
        "tol": tol,
        "rtol": rtol,
        "protocol": protocol,
        "ladder": ladder,
        "workers": args.workers,
        "chunk_rows": args.chunk_rows,
        "dask_ml_intercept": args.dask_ml_intercept,
        "repeats": args.repeats,
        "explicit_features_s": features_s,
        "settings": settings,
        # same-tolerance runs and their agreement (empty / None with --protocol target)
        "runs": same_runs,
        "max_rel_gap": max_gap,
        "objectives_agree": None if max_gap is None else max_gap <= rtol,
        "ratios_same_tol": ratios_same,
        # the ratios the targets are judged on: time to target when it ran (targets["protocol"])
        "ratios": ratios,
        "targets": targets,
        "target_protocol": target,
    }

    def time_cells(r: dict) -> list[Any]:
        return [r["median_s"], ", ".join(f"{s:.2f}" for s in r["times_s"]), _work(r), f"{r['objective']:.12f}", r["rel_gap"]]

    sections = []
    decides = targets["protocol"]
    if same_runs:
        rows = [[name, *time_cells(r)] for name, r in same_runs.items()]
        sections.append(
            f"### Same tolerance (tol={tol:g})\n\n"
            + table(["fit", "median s", "repeats (s)", "work", "objective", "rel. gap"], rows)
            + f"\n\nObjectives agree to {max_gap:.2e} relative (required <= {rtol:g}: "
            f"{'yes' if max_gap <= rtol else 'NO'}).\n"
            + ("Same tolerance, reported only (the targets are judged on time to target): " if decides != "same-tol"
               else "Same tolerance, deciding the targets: ")
            + _ratio_line(ratios_same, targets if decides == "same-tol" else None)
        )
    if target is not None:
        rows = [
            [name, f"{r['tol']:g}", *time_cells(r), "yes" if r["reached_in_calibration"] else "NO"]
            for name, r in target["runs"].items()
        ]
        calib = "\n".join(
            f"- {name}: "
            + ", ".join(f"tol {s['tol']:g} -> gap {s['rel_gap']:.1e}" for s in c["tried"])
            + (f"; uses tol {c['tol']:g}" if c["reached"] else f"; NOT reached, uses the tightest tol {c['tol']:g}")
            + (" (the loosest rung: a looser tol might do too)" if c["loosest"] else "")
            for name, c in target["calibration"].items()
        )
        sections.append(
            f"### Time to the same log-loss (rel. gap <= {rtol:g}), each at its loosest sufficient tol\n\n"
            f"Reference objective {target['reference_objective']:.12f}: {target['reference_source']}. "
            f"Calibration (untimed), ladder {' '.join(f'{v:g}' for v in ladder)}:\n{calib}\n\n"
            + table(["fit", "tol", "median s", "repeats (s)", "work", "objective", "gap to ref.", "reached"], rows)
            + f"\n\nAll timed objectives within {rtol:g} of the reference: {'yes' if target['all_within_rtol'] else 'NO'} "
            f"(largest gap {target['max_rel_gap']:.2e}).\n"
            "Time to target, deciding the targets: " + _ratio_line(target["ratios"], targets)
        )
    md = (
        "\n\n".join(sections)
        + f"\n\nN = {n}, d = {d}, M = {m}, alpha = {alpha:g}; explicit float64 features for the peers "
        f"took {features_s:.3g} s (not timed in their fits).\n"
        + "\n".join(f"- {k}: {v}" for k, v in settings.items())
    )
    return report(args.out, "bench-logistic", results, md)

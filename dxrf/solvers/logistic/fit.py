"""Fitting: :func:`fit_logistic`, the choice of solver and the checks of its arguments."""

from __future__ import annotations

import dataclasses
import numbers
import warnings

import dask.array as da
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from dxrf.core.validation import check_dask_matrix, check_int, check_nonnegative, is_dask
from dxrf.core.weights import check_sample_weight
from dxrf.engine.cache import CachePlan
from dxrf.kernels.kernel import FeatureKernel
from dxrf.core.options import Options, resolve_options
from dxrf.stats.accumulation import resolve_kernel
from dxrf.stats.tiles import wide_products
from dxrf.solvers.logistic.batching import _drive
from dxrf.solvers.logistic.messages import _Outcome
from dxrf.solvers.logistic.lbfgs import _lbfgs
from dxrf.solvers.logistic.newton import _newton
from dxrf.solvers.logistic.newton_cg import _newton_cg
from dxrf.solvers.logistic.objective import _check_labels, _Objective
from dxrf.solvers.logistic.passes import _PassRunner
from dxrf.solvers.logistic.sample import _hessian_period, _hessian_runs

#: ``solver="auto"`` uses Newton only while the K float64 Hessians take at most this many bytes.
NEWTON_MAX_HESSIAN_BYTES = 256 * 2**20
#: ... and only up to this many features (a Newton pass costs K N M^2 flops).
NEWTON_MAX_COMPONENTS = 4096

SOLVERS = ("auto", "newton", "lbfgs", "newton-cg")

_SOLVER_FUNCTIONS = {"newton": _newton, "newton-cg": _newton_cg, "lbfgs": _lbfgs}


@dataclasses.dataclass
class LogisticResult:
    """Outcome of :func:`fit_logistic`.

    Attributes
    ----------
    coef : ndarray of shape (M, K)
        Coefficients of the scaled features ``z``; one column per class
        (K = 1 for a binary problem).
    intercept : ndarray of shape (K,)
    n_iter : int
        Iterations of the solver, the most over the classes (Newton or
        truncated-Newton steps; L-BFGS iterations).
    n_passes : int
        Passes over X made by the solver (all classes share them).
    loss : ndarray of shape (K,)
        Final objective ``L`` (mean log-loss plus penalty) of each class.
    converged : bool
        Whether every class met a convergence criterion.
    feature_cache : CachePlan
        Whether the passes kept the features (:mod:`dxrf.engine.cache`), with the estimate.
    solver : str
        The solver used: "newton", "lbfgs" or "newton-cg".
    hessian_rows : int
        Rows that entered each Newton Hessian (N when exact; 0 for solvers
        without Hessians).
    """

    coef: np.ndarray
    intercept: np.ndarray
    n_iter: int
    n_passes: int
    loss: np.ndarray
    converged: bool
    solver: str
    hessian_rows: int = 0
    feature_cache: CachePlan | None = None


def newton_hessian_bytes(n_components: int, n_classes: int = 1) -> int:
    """Bytes of the K float64 Hessians of a Newton pass: ``K (M + 1)^2 * 8``."""
    return int(n_classes) * (int(n_components) + 1) ** 2 * 8


def choose_solver(n_components: int, n_classes: int = 1) -> str:
    """The solver of ``solver="auto"``: Newton while its Hessians are affordable, else L-BFGS.

    Newton needs ``K (M + 1)^2 * 8`` bytes per task and per partial sum and
    K N M^2 flops per pass (like K Gram passes); it is chosen when that
    memory is at most :data:`NEWTON_MAX_HESSIAN_BYTES` and
    ``M <= NEWTON_MAX_COMPONENTS``.
    """
    if n_components <= NEWTON_MAX_COMPONENTS and newton_hessian_bytes(n_components, n_classes) <= NEWTON_MAX_HESSIAN_BYTES:
        return "newton"
    return "lbfgs"


def _check_alpha(alpha: object) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(
            f"alpha must be a finite number > 0, got {alpha!r}: alpha = 0 (no penalty) has no minimiser "
            "on separable data, where the coefficients diverge"
        )
    return float(alpha)


def _prepare(X: object, T: object, kernel: FeatureKernel) -> tuple[np.ndarray | da.Array, np.ndarray | da.Array, int, int]:
    """Check X and T and bring T to shape (N, K); NumPy labels become int8."""
    if is_dask(X):
        X = check_dask_matrix(X, n_features=kernel.n_features_in)
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
        if X.shape[0] == 0:
            raise ValueError("X is empty (0 rows)")
        if X.shape[1] != kernel.n_features_in:
            raise ValueError(f"X has {X.shape[1]} columns; the feature map expects {kernel.n_features_in}")
        if not np.issubdtype(X.dtype, np.number):
            raise TypeError(f"X must hold numbers, got dtype {X.dtype}")
    n = X.shape[0]
    if T is None:
        raise ValueError("labels T are required")
    if is_dask(T) and not is_dask(X):
        T = T.compute()
    if not is_dask(T):
        T = np.asarray(T)
    if T.ndim not in (1, 2):
        raise ValueError(f"labels T must have shape (n,) or (n, K), got {T.shape}")
    if T.shape[0] != n:
        raise ValueError(f"labels T have {T.shape[0]} rows but X has {n}")
    if T.ndim == 1:
        T = T[:, None]
    if T.shape[1] == 0:
        raise ValueError("labels T have no columns")
    if not is_dask(T):
        T = _check_labels(T, n).astype(np.int8)
    return X, T, n, int(T.shape[1])


def _initial_points(coef_init: object, intercept_init: object, m: int, k: int, fit_intercept: bool) -> np.ndarray:
    W = np.zeros((m + 1, k))
    if coef_init is not None:
        c = np.asarray(coef_init, dtype=np.float64)
        if c.shape == (m,) and k == 1:
            c = c[:, None]
        if c.shape != (m, k):
            raise ValueError(f"coef_init has shape {np.shape(coef_init)}; expected ({m}, {k})" + (f" or ({m},)" if k == 1 else ""))
        W[:m] = c
    if intercept_init is not None and fit_intercept:
        b = np.asarray(intercept_init, dtype=np.float64).reshape(-1)
        if b.size not in (1, k):
            raise ValueError(f"intercept_init has shape {np.shape(intercept_init)}; expected ({k},)")
        W[m] = b
    if not np.isfinite(W).all():
        raise ValueError("coef_init and intercept_init must be finite")
    return W


def check_solver_options(max_iter: object, tol: object) -> tuple[int, float]:
    """``max_iter`` (a positive integer) and ``tol`` (a finite number >= 0) of the logistic solvers."""
    return check_int(max_iter, "max_iter"), check_nonnegative(tol, "tol", what="a finite number >= 0")


def row_weights(sample_weight: object, n: int) -> tuple[np.ndarray | da.Array | None, float]:
    """Checked row weights (None for none) and the objective's divisor: the total weight, else ``n``."""
    weights = check_sample_weight(sample_weight, n)
    # the objective is a weighted mean: divided by the total weight
    total = n if weights is None else float(weights.sum().compute() if is_dask(weights) else weights.sum())
    return weights, total


def _setup(
    X: np.ndarray | da.Array,
    T: np.ndarray | da.Array,
    kernel: FeatureKernel,
    n: int,
    chosen: str,
    total: float,
    alpha: float,
    fit_intercept: bool,
    progress: bool | None,
    hessian_rows: object,
    weights: np.ndarray | da.Array | None,
    options: Options | None,
) -> tuple[_Objective, _PassRunner, int]:
    """(the objective, the pass runner, the Hessian row period) of a fit by solver ``chosen``."""
    m = kernel.n_components
    # scipy's L-BFGS line search compares function values, so float32 features get
    # float64 scores there (see _block_sums); Newton's line search also uses derivatives
    precise = chosen == "lbfgs"
    # a small fit computes float32 features' products in float64 (as the statistics pass
    # does): its objective is then as smooth as with float64 features
    wide = wide_products(kernel, n)
    obj = _Objective(total, alpha, m, fit_intercept, np.float64 if precise or wide else kernel.dtype)
    opts = resolve_options(options, progress=progress)  # once per fit: its passes get them explicitly
    period = _hessian_period(hessian_rows, n, m, kernel.n_features_in)  # checked for every solver
    period = period if chosen == "newton" else 1
    runner = _PassRunner(X, T, kernel, opts, precise=precise, hess_period=period, weights=weights, wide=wide)
    return obj, runner, period


def _all_converged(outcomes: list[_Outcome], chosen: str) -> bool:
    """Whether every column's solver converged; else a ConvergenceWarning, at the caller of :func:`fit_logistic`."""
    failed = [f"column {j}: {o.message}" for j, o in enumerate(outcomes) if not o.converged]
    if failed:
        warnings.warn(
            f"logistic regression ({chosen}) did not converge: " + "; ".join(failed)
            + ". Increase max_iter, or check the scaling of the data.",
            ConvergenceWarning,
            stacklevel=3,  # past _all_converged and fit_logistic: the caller's line
        )
    return not failed


def fit_logistic(
    X: np.ndarray | da.Array,
    T: np.ndarray | da.Array,
    kernel: object,
    *,
    alpha: float,
    solver: str = "auto",
    max_iter: int = 100,
    tol: float = 1e-8,
    fit_intercept: bool = True,
    coef_init: np.ndarray | None = None,
    intercept_init: np.ndarray | float | None = None,
    progress: bool | None = False,
    hessian_rows: int | str | None = "auto",
    sample_weight: np.ndarray | da.Array | None = None,
    options: Options | None = None,
) -> LogisticResult:
    """L2-penalised logistic regression on the features ``z(X)``, binary or one-vs-rest.

    Minimises, for each label column k,
    ``(1/N) sum_n log(1 + exp(-T_nk f_nk)) + (alpha/2) |theta_k|^2`` with
    ``f_nk = z(x_n)^T theta_k + beta_k`` (intercept unpenalised): scikit-learn's
    ``LogisticRegression(C=1/(N alpha))`` on the explicit features. The K
    problems are independent but share every pass over X.

    Parameters
    ----------
    X : ndarray or dask array of shape (N, d)
        A dask array should have all columns in one chunk (rechunked with a
        warning otherwise). NumPy input is processed in this process.
    T : ndarray or dask array of shape (N,) or (N, K)
        Labels in {-1, +1}, row-aligned with X: one column per binary problem
        (one-vs-rest: ``T[:, k] = +1`` for class k, -1 otherwise). Labels of a
        dask T are checked inside the pass.
    kernel : FeatureKernel or fitted feature map
        The features ``z``; per-block arithmetic runs in its dtype.
    alpha : float
        Penalty, > 0. Unpenalised logistic regression (alpha = 0) is refused:
        it has no solution on separable data.
    solver : {"auto", "newton", "lbfgs", "newton-cg"}
        See the module notes; "auto" is :func:`choose_solver`.
    max_iter : int
        Iterations per class (Newton or truncated-Newton steps, L-BFGS iterations).
    tol : float
        Stop when the max-norm of the objective's gradient is ``<= tol`` (the
        objective is a mean, so tol does not scale with N), or when the
        relative decrease of the objective falls below rounding level.
    fit_intercept : bool
    coef_init : ndarray of shape (M,) or (M, K), optional
        Warm start.
    intercept_init : float or ndarray of shape (K,), optional
    progress : bool or None
        Show a progress bar on every pass over dask input (None: the
        ``progress`` of ``options``).
    hessian_rows : "auto", int or None
        Rows sampled for each Hessian of the "newton" solver (gradients and
        losses always use every row). A Hessian costs ``N M^2`` flops, against
        ``N M (2 d + ...)`` for the rest of a pass; with ``N`` much larger than
        ``M`` a sample of rows gives a Hessian as good for Newton steps
        (sub-sampled Newton: exact gradients, sampled curvature) at a fraction
        of the cost. The sample is every ``p``-th block of 1024 rows by global
        row index (the same rows for every chunking), ``p = N // hessian_rows``,
        and its sum is scaled by N / (rows sampled). "auto":
        ``HESSIAN_ROWS_PER_PARAMETER * (M + 1)`` rows when ``M + 1 >= 2 (d + 1)``
        (below, a row's Hessian term costs less than its features), else
        exact; None: every row (exact Hessians). Exact whenever the sample
        would be more than N / 2. Invalid values raise ``ValueError`` (also
        for the solvers without Hessians, which ignore it).
    sample_weight : ndarray or dask array of shape (N,), optional
        Row weights ``w_n >= 0``: the loss becomes
        ``sum_n w_n log(1 + exp(-T_nk f_nk)) / sum_n w_n`` (an integer weight
        equals repeating the row); every pass weighs its rows' terms.
    options : Options, optional
        Runtime options of every pass of the fit, resolved once here
        (default: :func:`dxrf.get_options` at this call); ``progress``
        overrides theirs unless None.

    Returns
    -------
    LogisticResult

    Notes
    -----
    Passes: "newton" makes one pass per iteration plus one for the start
    (two for an iteration whose full step is rejected by the line search,
    rarely a few more); "lbfgs" one per function evaluation; "newton-cg" one
    per Hessian-vector product and per trial point. ``n_passes`` counts them
    all. A pass over dask input is one task per row chunk and a tree
    reduction, computed on the distributed client if there is one; NumPy
    labels are persisted on the cluster once per fit.
    """
    alpha = _check_alpha(alpha)
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    max_iter, tol = check_solver_options(max_iter, tol)
    kernel = resolve_kernel(kernel, X)
    m = kernel.n_components
    X, T, n, k = _prepare(X, T, kernel)
    weights, total = row_weights(sample_weight, n)
    W0 = _initial_points(coef_init, intercept_init, m, k, bool(fit_intercept))
    chosen = choose_solver(m, k) if solver == "auto" else solver
    obj, runner, period = _setup(X, T, kernel, n, chosen, total, alpha, bool(fit_intercept), progress, hessian_rows, weights, options)
    make = _SOLVER_FUNCTIONS[chosen]
    try:
        outcomes = _drive({j: make(obj, W0[:, j].copy(), float(tol), int(max_iter)) for j in range(k)}, runner)
    finally:
        runner.close()
    W = np.column_stack([outcomes[j].point for j in range(k)])
    return LogisticResult(
        coef=W[:m].copy(),
        intercept=W[m].copy() if fit_intercept else np.zeros(k),
        n_iter=max(outcomes[j].n_iter for j in range(k)),
        n_passes=runner.count,
        loss=np.array([outcomes[j].loss for j in range(k)]),
        converged=_all_converged([outcomes[j] for j in range(k)], chosen),
        solver=chosen,
        hessian_rows=sum(b - a for a, b in _hessian_runs(0, n, period)) if chosen == "newton" else 0,
        feature_cache=runner.plan,
    )

"""Multinomial (softmax) logistic regression: :func:`fit_multinomial`.

One problem over all K classes, solved by the logistic solvers that need no
explicit Hessian: L-BFGS (one pass per function and gradient) or Newton-CG
(one pass per Hessian-vector product and per trial point). Their point is the
(M + 1, K) matrix ``[W; b]`` flattened row by row (:class:`~.objective._Objective`
with ``M K`` penalised entries and K intercepts); the passes are the
logistic ones with a softmax over the K label columns (``softmax.py``).
"""

from __future__ import annotations

import dataclasses
import warnings

import dask.array as da
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from dxrf.engine.cache import CachePlan
from dxrf.kernels.kernel import FeatureKernel
from dxrf.core.options import Options, resolve_options
from dxrf.stats.accumulation import resolve_kernel
from dxrf.stats.tiles import wide_products
from dxrf.solvers.logistic.batching import _drive
from dxrf.solvers.logistic.fit import _check_alpha, _prepare, check_solver_options, row_weights
from dxrf.solvers.logistic.lbfgs import _lbfgs
from dxrf.solvers.logistic.newton_cg import _newton_cg
from dxrf.solvers.logistic.objective import _Objective
from dxrf.solvers.logistic.passes import _PassRunner
from dxrf.solvers.logistic.sample import _hessian_period

#: solvers of the multinomial problem ("auto" is L-BFGS): an explicit Hessian has (K (M + 1))^2 entries
MULTINOMIAL_SOLVERS = ("auto", "lbfgs", "newton-cg")

_SOLVER_FUNCTIONS = {"lbfgs": _lbfgs, "newton-cg": _newton_cg}


@dataclasses.dataclass
class MultinomialResult:
    """Outcome of :func:`fit_multinomial`.

    Attributes
    ----------
    coef : ndarray of shape (M, K)
    intercept : ndarray of shape (K,)
        Centred (they sum to 0): the softmax is unchanged by a common shift
        of the scores, which the unpenalised intercepts leave free.
    n_iter : int
        Solver iterations (L-BFGS iterations or truncated-Newton steps).
    n_passes : int
        Passes over X.
    loss : float
        Final objective ``L`` (mean softmax loss plus penalty).
    converged : bool
    feature_cache : CachePlan
        Whether the passes kept the features (:mod:`dxrf.engine.cache`), with the estimate.
    solver : str
        "lbfgs" or "newton-cg".
    """

    coef: np.ndarray
    intercept: np.ndarray
    n_iter: int
    n_passes: int
    loss: float
    converged: bool
    solver: str
    feature_cache: CachePlan | None = None


def fit_multinomial(
    X: np.ndarray | da.Array,
    T: np.ndarray | da.Array,
    kernel: object,
    *,
    alpha: float,
    solver: str = "auto",
    max_iter: int = 100,
    tol: float = 1e-8,
    fit_intercept: bool = True,
    progress: bool | None = False,
    hessian_rows: int | str | None = "auto",
    sample_weight: np.ndarray | da.Array | None = None,
    options: Options | None = None,
) -> MultinomialResult:
    """L2-penalised multinomial logistic regression on the features ``z(X)``.

    Minimises ``(1/N) sum_n [logsumexp(f_n) - f_{n, y_n}] + (alpha/2) |W|_F^2``
    with ``f_n = W^T z(x_n) + b`` (intercepts unpenalised): scikit-learn's
    multinomial ``LogisticRegression(C=1/(N alpha))`` on the explicit features.

    Parameters
    ----------
    X : ndarray or dask array of shape (N, d)
    T : ndarray or dask array of shape (N, K)
        One-hot labels in {-1, +1}: +1 in the column of the row's class, K >= 2
        (checked inside the passes for dask T).
    kernel : FeatureKernel or fitted feature map
    alpha : float
        Penalty, > 0.
    solver : {"auto", "lbfgs", "newton-cg"}
        "auto" is "lbfgs". "newton" is refused: its Hessian would have
        ``(K (M + 1))^2`` entries.
    max_iter, tol, fit_intercept, progress
        As in :func:`~.fit.fit_logistic` (``tol`` bounds the max-norm of the
        gradient of ``L``).
    hessian_rows
        Checked as in :func:`~.fit.fit_logistic` and unused (no Hessians here).
    sample_weight : ndarray or dask array of shape (N,), optional
        Row weights ``w_n >= 0``: the mean loss becomes ``sum_n w_n loss_n /
        sum_n w_n`` (an integer weight equals repeating the row).
    options : Options, optional
        As in :func:`~.fit.fit_logistic`.

    Returns
    -------
    MultinomialResult
    """
    alpha = _check_alpha(alpha)
    if solver not in MULTINOMIAL_SOLVERS:
        raise ValueError(
            f"solver must be one of {MULTINOMIAL_SOLVERS} for the multinomial loss, got {solver!r}"
            + (" (an explicit Hessian would have (K (M + 1))^2 entries)" if solver == "newton" else "")
        )
    max_iter, tol = check_solver_options(max_iter, tol)
    kernel: FeatureKernel = resolve_kernel(kernel, X)
    m = kernel.n_components
    X, T, n, k = _prepare(X, T, kernel)
    if k < 2:
        raise ValueError(f"multinomial labels T need one column per class (at least 2), got {k}")
    _hessian_period(hessian_rows, n, m, kernel.n_features_in)
    weights, total = row_weights(sample_weight, n)
    chosen = "lbfgs" if solver == "auto" else solver
    precise = chosen == "lbfgs"  # float64 scores for scipy's line search (see fit_logistic)
    wide = wide_products(kernel, n)  # float64 products of a small fit's float32 features (see fit_logistic)
    obj = _Objective(total, alpha, m * k, bool(fit_intercept), np.float64 if precise or wide else kernel.dtype,
                     intercepts=k)
    opts = resolve_options(options, progress=progress)  # once per fit: its passes get them explicitly
    runner = _PassRunner(X, T, kernel, opts, precise=precise, weights=weights, multinomial=True, wide=wide)
    try:
        outcome = _drive({0: _SOLVER_FUNCTIONS[chosen](obj, np.zeros(obj.size), float(tol), int(max_iter))}, runner)[0]
    finally:
        runner.close()
    if not outcome.converged:
        warnings.warn(
            f"multinomial logistic regression ({chosen}) did not converge: {outcome.message}. "
            "Increase max_iter, or check the scaling of the data.",
            ConvergenceWarning,
            stacklevel=2,
        )
    W = outcome.point.reshape(m + 1, k)
    intercept = W[m] - W[m].mean() if fit_intercept else np.zeros(k)
    return MultinomialResult(
        coef=W[:m].copy(),
        intercept=intercept,
        n_iter=int(outcome.n_iter),
        n_passes=runner.count,
        loss=float(outcome.loss),
        converged=bool(outcome.converged),
        solver=chosen,
        feature_cache=runner.plan,
    )

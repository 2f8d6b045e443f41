"""Ridge regression on accumulated statistics: exact solves, penalty paths, validation error.

Objective (DESIGN section 2): ``(1/N) |Y - Z theta - 1 beta^T|^2 + alpha |theta|^2``.
With an intercept the problem is centred with the feature and target sums, so
``(C + alpha I) theta = c`` with ``C``, ``c`` the centred covariances (divided
by N) and ``beta = mean(y) - theta^T mean(z)``. A whole path of penalties
costs one eigendecomposition of ``C``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg

from dxrf.core.blas import blas_limit
from dxrf.core.cholesky import cholesky_solve
from dxrf.core.validation import check_nonnegative
from dxrf.stats.feature_stats import FeatureStats

__all__ = ["RidgePath", "ridge_path", "solve_ridge", "mse_from_stats", "statistics_rtol"]


def _normal_equations(stats: FeatureStats, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray]:
    stats._require_targets()
    if fit_intercept:
        return stats.covariance(), stats.centered_cross()
    return stats.gram / stats.n, stats.cross / stats.n


def _intercept(stats: FeatureStats, coef: np.ndarray, fit_intercept: bool) -> np.ndarray:
    if not fit_intercept:
        return np.zeros(coef.shape[-1])
    return stats.ysum / stats.n - stats.mean() @ coef


def check_alpha_grid(alphas: object) -> np.ndarray:
    """``alphas`` as a non-empty 1-d float64 array of finite non-negative penalties."""
    grid = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid < 0):
        raise ValueError(f"alphas must be a non-empty 1-d array of non-negative numbers, got {alphas!r}")
    return grid


def solve_ridge(stats: FeatureStats, alpha: float, fit_intercept: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Exact ridge solution from statistics by a Cholesky factorisation.

    Returns
    -------
    coef : ndarray of shape (M, k)
    intercept : ndarray of shape (k,)
    """
    alpha = check_nonnegative(alpha, "alpha")
    C, c = _normal_equations(stats, fit_intercept)
    # C is a new symmetric array: add the penalty and factor it in place (at large M each
    # M x M copy costs seconds of first touch); C.T is C in the column order LAPACK wants
    C.flat[:: C.shape[0] + 1] += alpha
    A = C.T if C.flags.c_contiguous else np.asfortranarray(C)
    # the blocked factorisation is the same to the bit on any number of BLAS threads
    coef = cholesky_solve(A, c)
    if coef is None:
        # alpha = 0 with a singular covariance: fall back to the minimum-norm solution
        # (of the equations afresh: the failed factorisation overwrote A)
        C, c = _normal_equations(stats, fit_intercept)
        C.flat[:: C.shape[0] + 1] += alpha
        with blas_limit(1):
            coef = scipy.linalg.lstsq(C, c)[0]
    return coef, _intercept(stats, coef, fit_intercept)


def statistics_rtol(dtype: object) -> float:
    """Relative accuracy of statistics accumulated from features of ``dtype`` (10 machine epsilons)."""
    return 10.0 * float(np.finfo(np.dtype(dtype)).eps)


def mse_from_stats(
    stats: FeatureStats, coef: np.ndarray, intercept: np.ndarray, *, rtol: float | None = None
) -> np.ndarray:
    """Mean squared error of ``z^T coef + intercept`` on the rows of ``stats``, per output.

    Exact from the statistics:
    ``(1/n) sum |y - theta^T z - beta|^2`` expanded into ``yy``, ``cross``,
    ``gram`` and the sums. ``coef`` may carry a leading path axis
    (shape ``(P, M, k)``, intercept ``(P, k)``), giving shape ``(P, k)``.

    The expansion cancels: with huge coefficients (a nearly singular
    covariance and a tiny penalty) the terms are many orders larger than
    their sum, and the statistics' own rounding (``rtol`` relative, about
    ``1e-6`` for float32 features: :func:`statistics_rtol`) can swamp it, even
    to a negative sum that would read as a perfect fit. With ``rtol`` given,
    an error whose rounding bound (``rtol`` times the statistics' entries
    weighted by ``|coef|``) exceeds a tenth of its value is returned as NaN:
    unknown, never chosen.
    """
    stats._require_targets()
    coef = np.asarray(coef, dtype=np.float64)
    intercept = np.asarray(intercept, dtype=np.float64)
    n = stats.n
    yy = np.diag(stats.yy)
    t_cross = np.einsum("...mk,mk->...k", coef, stats.cross)
    t_gram_t = _quadratic_forms(stats.gram, coef)
    t_sum = np.einsum("...mk,m->...k", coef, stats.sum)
    sse = yy - 2 * t_cross - 2 * intercept * stats.ysum + t_gram_t + 2 * intercept * t_sum + n * intercept**2
    mse = np.maximum(sse, 0.0) / n
    if rtol is not None:
        # each statistic is off by about rtol of its entries' size, so the sums of
        # |coef|-weighted entries bound the rounding (not the terms' values, which cancel)
        a = np.abs(coef)
        bound = rtol * (
            2 * np.einsum("...mk,mk->...k", a, np.abs(stats.cross))
            + _quadratic_forms(stats.gram, a, absolute=True)
            + 2 * np.abs(intercept) * np.einsum("...mk,m->...k", a, np.abs(stats.sum))
        )
        mse = np.where(bound > 0.1 * np.maximum(sse, 0.0), np.nan, mse)
    return mse


#: rows of the Gram taken at a time by :func:`_quadratic_forms` with ``absolute``: no M x M temporary
_BAND = 1024


def _quadratic_forms(G: np.ndarray, coef: np.ndarray, *, absolute: bool = False) -> np.ndarray:
    """``c_k^T G c_k`` (``|G|`` with ``absolute``) for every column ``c_k`` of ``coef`` (``(..., M, k)``).

    One matrix product of ``G`` with all the columns side by side (on one BLAS
    thread: the same bits whatever runs beside it), instead of an einsum that
    loops over ``M^2`` entries per column in C (at M = 8000 with five penalties
    and ten outputs, 4 s against 0.1 s).
    """
    lead = coef.shape[:-2]
    m, k = coef.shape[-2:]
    cols = np.moveaxis(coef.reshape((-1, m, k)), 1, 0).reshape(m, -1)  # (M, P k)
    with blas_limit(1):
        if absolute:
            Gc = np.empty_like(cols)
            for r0 in range(0, m, _BAND):
                Gc[r0 : r0 + _BAND] = np.abs(G[r0 : r0 + _BAND]) @ cols
        else:
            Gc = G @ cols
    return np.einsum("mj,mj->j", cols, Gc).reshape(lead + (k,))


@dataclasses.dataclass
class RidgePath:
    """Ridge solutions for a grid of penalties.

    Attributes
    ----------
    alphas : ndarray of shape (P,)
    coefs : ndarray of shape (P, M, k)
    intercepts : ndarray of shape (P, k)
    validation_mse : ndarray of shape (P, k) or None
    """

    alphas: np.ndarray
    coefs: np.ndarray
    intercepts: np.ndarray
    validation_mse: np.ndarray | None = None

    @property
    def best_index(self) -> int:
        if self.validation_mse is None:
            raise ValueError("no validation statistics were given")
        mean = self.validation_mse.mean(axis=1)
        if np.isnan(mean).all():
            raise ValueError(
                "every penalty's validation error is lost to rounding (huge coefficients on nearly singular "
                "statistics): use larger alphas, or dtype='float64' features"
            )
        return int(np.nanargmin(mean))


#: from this many features a path of few penalties factors ``C + alpha I`` per penalty (Cholesky,
#: ``M^3 / 3`` each) instead of one eigendecomposition (about 20 Cholesky factorisations' time on
#: one thread: 10.5 s against 0.52 s at M = 4000 on this machine's two cores). Below it the
#: eigendecomposition is cheap and kept (the first stage of the growing search is unchanged).
FACTOR_EACH_MIN_FEATURES = 2048
#: at most this many penalties are factored one by one; more take the eigendecomposition
FACTOR_EACH_MAX_PENALTIES = 16


def _factor_each(m: int, alphas: np.ndarray) -> bool:
    """Whether a path over ``alphas`` at ``m`` features is cheaper by one Cholesky factorisation per penalty."""
    return m >= FACTOR_EACH_MIN_FEATURES and alphas.size <= FACTOR_EACH_MAX_PENALTIES and bool(np.all(alphas > 0))


def _factored_path(C: np.ndarray, c: np.ndarray, alphas: np.ndarray) -> np.ndarray | None:
    """``(C + alpha I)^{-1} c`` for each penalty by Cholesky factorisations; None if one fails.

    One ``M x M`` work array is refilled per penalty (LAPACK factors it in
    place), so the path holds two of them, as the eigendecomposition does.
    A failed factorisation (a penalty below the rounding of a singular
    ``C``) hands the whole path to the eigendecomposition.
    """
    m = C.shape[0]
    work = np.empty((m, m), dtype=np.float64, order="F")
    out = np.empty((alphas.size,) + c.shape, dtype=np.float64)
    for p, alpha in enumerate(alphas):
        work[...] = C
        work.flat[:: m + 1] += alpha
        # blocked, on every BLAS thread the caller allows: the same bits on any number of them
        solved = cholesky_solve(work, c)
        if solved is None:
            return None
        out[p] = solved
    return out


def ridge_path(
    stats: FeatureStats,
    alphas: np.ndarray,
    validation: FeatureStats | None = None,
    fit_intercept: bool = True,
    *,
    rtol: float | None = None,
) -> RidgePath:
    """Ridge solutions for every penalty in ``alphas`` from one eigendecomposition.

    ``theta(alpha) = U diag(1 / (lambda + alpha)) U^T c`` with ``C = U diag(lambda) U^T``.
    From :data:`FACTOR_EACH_MIN_FEATURES` features, a path of up to
    :data:`FACTOR_EACH_MAX_PENALTIES` positive penalties is solved by one
    Cholesky factorisation of ``C + alpha I`` per penalty instead: the same
    solutions up to rounding, for a fraction of the time.
    With ``validation`` statistics the exact validation MSE of every solution
    is returned too (NaN where rounding of statistics of relative accuracy
    ``rtol`` swamps it: see :func:`mse_from_stats`).
    """
    alphas = check_alpha_grid(alphas)
    C, c = _normal_equations(stats, fit_intercept)
    coefs = _factored_path(C, c, alphas) if _factor_each(C.shape[0], alphas) else None
    if coefs is None:
        # one BLAS thread: reproducible to the bit, whatever BLAS threads the caller has
        # NumPy's eigh releases the GIL (SciPy's wrapper holds it), so paths run in parallel threads
        with blas_limit(1):
            evals, U = np.linalg.eigh(C)
        evals = np.maximum(evals, 0.0)
        Uc = U.T @ c
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / (evals[None, :] + alphas[:, None])  # (P, M)
        inv[~np.isfinite(inv)] = 0.0  # alpha = 0 on a null direction: minimum-norm solution
        coefs = np.einsum("mj,pj,jk->pmk", U, inv, Uc)
    intercepts = np.stack([_intercept(stats, cf, fit_intercept) for cf in coefs])
    mse = None if validation is None else mse_from_stats(validation, coefs, intercepts, rtol=rtol)
    return RidgePath(alphas, coefs, intercepts, mse)

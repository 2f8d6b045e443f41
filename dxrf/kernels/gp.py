"""Exact Gaussian-process evidence for learning per-column lengthscales (ARD).

The covariance of a zero-mean GP with Gaussian (RBF) automatic relevance
determination and a heteroscedastic noise is

    K = s^2 R + diag(sigma^2 / w_i),   R_ab = exp(-1/2 sum_j (x_aj - x_bj)^2 / l_j^2),

for row weights ``w_i > 0`` (a weight ``w`` reads as ``w`` observations averaged:
its noise variance is ``sigma^2 / w``). The hyperparameters are optimised in log
space, ``theta = (log l_1, ..., log l_d, log s^2, log sigma^2)``, the order and
parameterisation of scikit-learn's ``ConstantKernel(s^2) * RBF(l) + WhiteKernel(sigma^2)``
up to moving the constant last. For targets ``Y`` of ``k`` columns sharing the
hyperparameters the log marginal likelihood is the sum over columns,

    L = -1/2 sum_c y_c^T K^{-1} y_c - k/2 log|K| - k n/2 log(2 pi),

and its gradient ``dL/dtheta_p = 1/2 tr((alpha alpha^T - k K^{-1}) dK/dtheta_p)``
with ``alpha = K^{-1} Y`` (Rasmussen & Williams 2006, eq. 5.8-5.9). One Cholesky
factorisation and one inverse from it (LAPACK ``potrf``/``potri``) cost
``O(n^3)``; the lengthscale gradient is ``O(n^2 d)`` through
``sum_ab B_ab (x_aj - x_bj)^2 = 2 sum_a x_aj^2 (B 1)_a - 2 x_j^T B x_j`` with
``B = (alpha alpha^T - k K^{-1}) o s^2 R`` (the columns are centred first, which the
kernel does not see and which keeps that difference from cancelling). See the
section "Learned lengthscales" of DESIGN.md.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.linalg import LinAlgError, lapack
from scipy.optimize import minimize

from dxrf.core.blas import blas_limit
from dxrf.core.validation import make_rng

__all__ = ["MIN_ROWS", "ARDResult", "log_marginal_likelihood", "initial_lengthscales", "fit_ard"]

MIN_ROWS = 50  # fewer rows than this cannot tell d lengthscales apart from noise
_LOG_2PI = float(np.log(2.0 * np.pi))
# bounds in the standardised problem: lengthscales relative to a column's scale,
# signal and noise relative to a unit-variance y; they keep K positive definite in float64
_LENGTH_BOUNDS = (1e-3, 1e5)
_SIGNAL_BOUNDS = (1e-4, 1e4)
_NOISE_BOUNDS = (1e-6, 1e1)


class NotPositiveDefinite(LinAlgError, ValueError):
    """The GP covariance failed its Cholesky factorisation."""


def _as_targets(y: np.ndarray) -> np.ndarray:
    Y = np.asarray(y, dtype=np.float64)
    return Y[:, None] if Y.ndim == 1 else Y


def _cholesky(K: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor of ``K``, in ``K``'s memory; a clear error when it fails."""
    L, info = lapack.dpotrf(K, lower=1, clean=1, overwrite_a=1)
    if info != 0:
        raise NotPositiveDefinite(
            f"the GP covariance is not positive definite (Cholesky failed at pivot {info}) at "
            f"theta={np.array2string(theta, precision=4)}: a larger noise (log sigma^2) is needed"
        )
    return L


def _inverse(L: np.ndarray) -> np.ndarray:
    """``K^{-1}`` from its lower Cholesky factor, both triangles, in ``L``'s memory."""
    inv, info = lapack.dpotri(L, lower=1, overwrite_c=1)
    if info != 0:  # pragma: no cover - potrf succeeded, so the factor is nonsingular
        raise NotPositiveDefinite(f"the inverse of the GP covariance failed (potri info {info})")
    inv += np.tril(inv, -1).T  # potrf's clean=1 left the upper triangle zero
    return inv


def log_marginal_likelihood(
    theta: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None = None,
    *,
    eval_gradient: bool = True,
) -> tuple[float, np.ndarray] | float:
    """The exact GP log marginal likelihood of ``y`` under Gaussian ARD plus noise, and its gradient.

    Parameters
    ----------
    theta : ndarray of shape (d + 2,)
        ``(log l_1, ..., log l_d, log s^2, log sigma^2)``.
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,) or (n, k)
        Targets, taken as they are (zero prior mean); ``k`` columns share the
        hyperparameters and their likelihoods add up.
    sample_weight : ndarray of shape (n,), optional
        Positive row weights: row ``i`` has noise variance ``sigma^2 / w_i``.
    eval_gradient : bool, default=True

    Returns
    -------
    value : float
    gradient : ndarray of shape (d + 2,)
        With ``eval_gradient``; with respect to ``theta``.

    Raises
    ------
    NotPositiveDefinite
        (a ``LinAlgError`` and ``ValueError``) when the covariance's Cholesky
        factorisation fails; no jitter is added beyond the noise.
    """
    theta = np.asarray(theta, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    Y = _as_targets(y)
    n, d = X.shape
    if theta.shape != (d + 2,):
        raise ValueError(f"theta must have d + 2 = {d + 2} entries (log lengthscales, log signal, log noise), got {theta.shape}")
    k = Y.shape[1]
    signal, noise = np.exp(theta[d]), np.exp(theta[d + 1])
    Xs = (X - X.mean(axis=0)) / np.exp(theta[:d])  # centred: the kernel is shift invariant
    sq = np.einsum("ij,ij->i", Xs, Xs)
    R = Xs @ Xs.T
    R *= -2.0
    R += sq[:, None]
    R += sq[None, :]
    np.maximum(R, 0.0, out=R)
    R *= -0.5
    np.exp(R, out=R)
    Kf = R
    Kf *= signal
    noise_diag = np.full(n, noise) if sample_weight is None else noise / np.asarray(sample_weight, dtype=np.float64)
    K = Kf.copy()
    K[np.diag_indices(n)] += noise_diag
    L = _cholesky(K, theta)  # in K's memory
    alpha, _ = lapack.dpotrs(L, Y, lower=1)
    diag = np.diag(L)
    value = -0.5 * float(np.sum(Y * alpha)) - k * float(np.sum(np.log(diag))) - 0.5 * k * n * _LOG_2PI
    if not eval_gradient:
        return value
    # A = alpha alpha^T - k K^{-1}, built in the factor's memory
    A = _inverse(L)
    A *= -float(k)
    A += alpha @ alpha.T
    grad = np.empty(d + 2)
    grad[d + 1] = 0.5 * float(np.dot(np.diag(A), noise_diag))
    A *= Kf  # B = A o s^2 R
    grad[d] = 0.5 * float(A.sum())
    r = A.sum(axis=1)
    grad[:d] = (Xs * Xs).T @ r - np.einsum("ij,ij->j", Xs, A @ Xs)
    return value, grad


def _column_scales(X: np.ndarray, rng: np.random.Generator, pairs: int = 20000) -> np.ndarray:
    """Per column, the median ``|x_aj - x_bj|`` over random pairs of rows; the std where that is 0; 1 for a constant column."""
    n = X.shape[0]
    a = rng.integers(0, n, size=pairs)
    b = rng.integers(0, n, size=pairs)
    keep = a != b
    scale = np.median(np.abs(X[a[keep]] - X[b[keep]]), axis=0)
    std = X.std(axis=0)
    scale = np.where(scale > 0, scale, std)
    # a column constant in the sample up to rounding (its std then ~1e-16, not 0) says nothing
    # of its lengthscale: scale 1, so its bounds are not those of the rounding (measured on
    # elevators: two such columns reached lengthscales of 1e-15, which zeroed the kernel
    # between rows that differ there in the full data)
    constant = np.ptp(X, axis=0) <= 1e-9 * np.maximum(1.0, np.abs(X).max(axis=0))
    return np.where(constant | ~(scale > 0), 1.0, scale)


def initial_lengthscales(X: np.ndarray, random_state: object = None) -> np.ndarray:
    """The start of the search: ``l_j = sqrt(d) * scale_j``.

    ``scale_j`` is the median absolute difference of column ``j`` over random
    pairs of rows (its std where that is 0, 1 for a constant column), so that
    ``|x - x'|`` measured in lengthscales is about 1, as with the isotropic
    median heuristic ``sigma = median |x - x'|``.
    """
    X = np.asarray(X, dtype=np.float64)
    return np.sqrt(X.shape[1]) * _column_scales(X, make_rng(random_state))


@dataclasses.dataclass(frozen=True)
class ARDResult:
    """Hyperparameters of maximum evidence.

    ``lengthscales`` are in the units of X; ``signal`` (``s^2``) and ``noise``
    (``sigma^2``) are variances relative to the standardised targets (and to
    weights of mean 1); ``log_likelihood`` is the optimum on those targets,
    summed over their columns; ``n_iter`` counts L-BFGS-B iterations over all
    restarts, ``n_eval`` likelihood evaluations.
    """

    lengthscales: np.ndarray
    signal: float
    noise: float
    log_likelihood: float
    n_iter: int
    n_eval: int
    y_mean: np.ndarray
    y_scale: np.ndarray


def _standardise(Y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = (w @ Y) / w.sum()
    scale = np.sqrt((w @ (Y - mean) ** 2) / w.sum())
    scale = np.where(scale > 0, scale, 1.0)
    return (Y - mean) / scale, mean, scale


def _check_inputs(X: object, y: object, sample_weight: object) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    X = np.asarray(X, dtype=np.float64)
    Y = _as_targets(y)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-d array, got shape {X.shape}")
    if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have one entry (or row) per row of X ({X.shape[0]}), got shape {Y.shape}")
    if not np.isfinite(X).all():
        raise ValueError("X contains NaN or infinity (in the rows used to learn the lengthscales)")
    if not np.isfinite(Y).all():
        raise ValueError("y contains NaN or infinity (in the rows used to learn the lengthscales)")
    w = None
    if sample_weight is not None:
        w = np.asarray(sample_weight, dtype=np.float64).ravel()
        if w.shape[0] != X.shape[0]:
            raise ValueError(f"sample_weight has {w.shape[0]} entries for {X.shape[0]} rows")
        if not np.isfinite(w).all() or (w < 0).any():
            raise ValueError("sample_weight must be finite and non-negative")
        keep = w > 0  # a row of weight 0 has infinite noise: it carries no information
        X, Y, w = X[keep], Y[keep], w[keep]
        w = w / w.mean()
    if X.shape[0] < MIN_ROWS:
        raise ValueError(
            f"bandwidth='ard' needs at least {MIN_ROWS} rows (of positive weight) to learn lengthscales, got {X.shape[0]}"
        )
    return X, Y, w


def fit_ard(
    X: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None = None,
    *,
    restarts: int = 2,
    random_state: object = None,
    max_iter: int = 200,
    normalize_y: bool = True,
    blas_threads: int | None = 1,
) -> ARDResult:
    """Lengthscales, signal and noise of maximum GP evidence (type-II maximum likelihood).

    Maximises :func:`log_marginal_likelihood` with L-BFGS-B and its analytic
    gradient, from the start of :func:`initial_lengthscales` with ``s^2 = 1``,
    ``sigma^2 = 0.1``, then from ``restarts - 1`` random starts about it (log
    lengthscales moved by N(0, 1), ``s^2`` log-uniform in [0.1, 10],
    ``sigma^2`` in [1e-3, 1]); the best optimum wins. Bounds keep every
    evaluation finite: ``l_j`` within [1e-3, 1e5] times the column's scale,
    ``s^2`` in [1e-4, 1e4], ``sigma^2`` in [1e-6, 10]. A start whose covariance
    is not positive definite is skipped.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The rows (a sample, ``n`` of a few thousand: each evaluation is ``O(n^3)``).
    y : ndarray of shape (n,) or (n, k)
        Regression targets, or ``k`` label columns (least-squares
        classification, Rasmussen & Williams 2006, section 6.5: one +-1 column
        for two classes, one-hot +-1 columns for more). The columns share the
        hyperparameters; their likelihoods add up.
    sample_weight : ndarray of shape (n,), optional
        Row weights ``>= 0``: noise ``sigma^2 / w_i`` with the weights scaled to
        mean 1; rows of weight 0 are dropped.
    restarts : int, default=2
        Optimisations run (the first from the heuristic start).
    random_state : int, Generator or None
    max_iter : int, default=200
        L-BFGS-B iterations per optimisation.
    normalize_y : bool, default=True
        Centre each target column by its weighted mean and divide it by its
        weighted std (a constant mean function fitted by moments); otherwise the
        targets are taken as zero-mean and unscaled.
    blas_threads : int or None, default=1
        BLAS threads during the optimisation (None: as it is). One thread: on
        two busy cores OpenBLAS's threaded ``potrf``/``potri`` at n = 2000 took
        0.5 s and 0.8 s, against 0.11 s and 0.13 s on one.

    Returns
    -------
    ARDResult

    Raises
    ------
    ValueError
        Fewer than ``MIN_ROWS`` rows of positive weight, non-finite values,
        or no start with a positive definite covariance.
    """
    if int(restarts) < 1 or int(max_iter) < 1:
        raise ValueError(f"restarts and max_iter must be positive integers, got {restarts} and {max_iter}")
    X, Y, w = _check_inputs(X, y, sample_weight)
    n, d = X.shape
    wn = np.ones(n) if w is None else w
    if normalize_y:
        Y, y_mean, y_scale = _standardise(Y, wn)
    else:
        y_mean, y_scale = np.zeros(Y.shape[1]), np.ones(Y.shape[1])
    rng = make_rng(random_state)
    scales = _column_scales(X, rng)
    size = float(n * Y.shape[1])
    bounds = [(np.log(s * _LENGTH_BOUNDS[0]), np.log(s * _LENGTH_BOUNDS[1])) for s in scales]
    bounds += [tuple(np.log(_SIGNAL_BOUNDS)), tuple(np.log(_NOISE_BOUNDS))]

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        try:
            value, grad = log_marginal_likelihood(theta, X, Y, w)
        except NotPositiveDefinite:
            return np.inf, np.zeros_like(theta)  # the line search backs off
        return -value / size, -grad / size

    start = np.concatenate([np.log(np.sqrt(d) * scales), [0.0, np.log(0.1)]])
    with blas_limit(blas_threads):
        best, n_iter, n_eval = _optimise(objective, start, bounds, rng, int(restarts), int(max_iter))
    if best is None:
        raise ValueError("no start gave a positive definite GP covariance; the rows may be duplicated with no noise")
    theta = best.x
    return ARDResult(
        lengthscales=np.exp(theta[:d]),
        signal=float(np.exp(theta[d])),
        noise=float(np.exp(theta[d + 1])),
        log_likelihood=float(-best.fun * size),
        n_iter=n_iter,
        n_eval=n_eval,
        y_mean=np.asarray(y_mean, dtype=np.float64),
        y_scale=np.asarray(y_scale, dtype=np.float64),
    )


def _optimise(objective, start: np.ndarray, bounds: list, rng: np.random.Generator, restarts: int, max_iter: int):
    """The best L-BFGS-B result over ``restarts`` starts (None if none was finite), iterations, evaluations."""
    d = start.size - 2
    low, high = np.array(bounds).T
    best, n_iter, n_eval = None, 0, 0
    for attempt in range(restarts):
        theta0 = start
        if attempt > 0:
            theta0 = np.concatenate([
                start[:d] + rng.standard_normal(d),
                [rng.uniform(np.log(0.1), np.log(10.0)), rng.uniform(np.log(1e-3), 0.0)],
            ])
        theta0 = np.clip(theta0, low, high)
        if not np.isfinite(objective(theta0)[0]):
            continue
        res = minimize(objective, theta0, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": max_iter})
        n_iter += int(res.nit)
        n_eval += int(res.nfev) + 1
        if np.isfinite(res.fun) and (best is None or res.fun < best.fun):
            best = res
    return best, n_iter, n_eval

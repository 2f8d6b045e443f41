"""One lengthscale of maximum GP evidence, for inputs with too many columns to learn one each.

Per-column lengthscales (:func:`dxrf.kernels.gp.fit_ard`) are ``d + 2``
hyperparameters fitted to a sample of a few thousand rows. With hundreds of
columns the evidence over-fits them: on 2000 MNIST digits (784 pixels) the
optimum put the noise at its lower bound and a few pixels' lengthscales at
0.004 (pixels in [0, 1]), and Nyström features at those lengthscales misclassified
6.3 % of the test digits at M = 2000, against 2.9 % at one lengthscale of
maximum evidence. The optimisation also took 100 s (200 L-BFGS-B iterations of
``O(n^2 d)``), against 15 s for one lengthscale.

:func:`fit_isotropic` fits ``theta = (log l, log s^2, log sigma^2)`` of the
same covariance with ``l_j = l u_j`` for fixed column units ``u``, twice:
in the columns' own units (``u = 1``: pixels, or columns already put on one
scale) and in units of each column's spread (``u_j`` the median
``|x_aj - x_bj|`` over random pairs of rows, as :func:`~dxrf.kernels.gp.fit_ard`
starts from; columns in unrelated units). The fit of larger evidence wins: a
choice between two models of three hyperparameters each, which the evidence
makes fairly. Its gradient is the sum of the per-column gradient over the
columns, ``dL/dlog l = sum_j dL/dlog l_j``.
"""

from __future__ import annotations

import numpy as np

from dxrf.core.blas import blas_limit
from dxrf.core.validation import make_rng
from dxrf.kernels.gp import (
    _NOISE_BOUNDS, _SIGNAL_BOUNDS, ARDResult, NotPositiveDefinite, _check_inputs, _column_scales, _optimise,
    _standardise, log_marginal_likelihood,
)

__all__ = ["UNITS", "fit_isotropic"]

#: the column units compared: the columns' own, and each column's spread
UNITS = ("own", "spread")
# the lengthscale's range about its start (the median distance between rows), as a factor
_LENGTH_RANGE = 1e3


def _median_distance(Xu: np.ndarray, rng: np.random.Generator, pairs: int = 4000) -> float:
    """The median distance between random pairs of distinct rows of ``Xu`` (1 if all are equal)."""
    n = Xu.shape[0]
    a, b = rng.integers(0, n, size=pairs), rng.integers(0, n, size=pairs)
    keep = a != b
    dist = np.sqrt(np.einsum("ij,ij->i", Xu[a[keep]] - Xu[b[keep]], Xu[a[keep]] - Xu[b[keep]]))
    median = float(np.median(dist)) if dist.size else 0.0
    return median if median > 0 else 1.0


def fit_isotropic(
    X: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None = None,
    *,
    units: tuple[str, ...] = UNITS,
    random_state: object = None,
    max_iter: int = 100,
    blas_threads: int | None = 1,
) -> tuple[ARDResult, str]:
    """One lengthscale (times fixed column units), signal and noise of maximum GP evidence.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The rows (a sample: each evaluation is ``O(n^3 + n^2 d)``).
    y : ndarray of shape (n,) or (n, k)
        Targets, standardised per column as :func:`~dxrf.kernels.gp.fit_ard` does
        (label columns for least-squares classification).
    sample_weight : ndarray of shape (n,), optional
        Row weights ``>= 0`` (noise ``sigma^2 / w_i``; weight 0 drops a row).
    units : tuple of str, default=("own", "spread")
        The column units tried (:data:`UNITS`); the fit of larger evidence is returned.
    random_state : int, Generator or None
        Draws the pairs of rows behind the spread and the start.
    max_iter : int, default=100
        L-BFGS-B iterations per fit.
    blas_threads : int or None, default=1
        BLAS threads during the optimisation (see :func:`~dxrf.kernels.gp.fit_ard`).

    Returns
    -------
    ARDResult
        ``lengthscales`` is the vector ``l u`` (all equal for own units).
    str
        The units chosen.

    Raises
    ------
    ValueError
        Fewer than 50 rows of positive weight, non-finite values, an unknown
        unit, or no fit with a positive definite covariance.
    """
    bad = [u for u in units if u not in UNITS]
    if not units or bad:
        raise ValueError(f"units must be a non-empty tuple of {UNITS}, got {units!r}")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter}")
    X, Y, w = _check_inputs(X, y, sample_weight)
    n, d = X.shape
    Y, y_mean, y_scale = _standardise(Y, np.ones(n) if w is None else w)
    rng = make_rng(random_state)
    spread = _column_scales(X, rng)
    size = float(n * Y.shape[1])
    best = None
    with blas_limit(blas_threads):
        for name in units:
            u = np.ones(d) if name == "own" else spread
            start = np.log(_median_distance(X / u, rng))

            def objective(t: np.ndarray, u: np.ndarray = u) -> tuple[float, np.ndarray]:
                theta = np.concatenate([t[0] + np.log(u), t[1:]])
                try:
                    value, grad = log_marginal_likelihood(theta, X, Y, w)
                except NotPositiveDefinite:
                    return np.inf, np.zeros_like(t)  # the line search backs off
                return -value / size, -np.array([grad[:d].sum(), grad[d], grad[d + 1]]) / size

            bounds = [(start - np.log(_LENGTH_RANGE), start + np.log(_LENGTH_RANGE)),
                      tuple(np.log(_SIGNAL_BOUNDS)), tuple(np.log(_NOISE_BOUNDS))]
            res, n_iter, n_eval = _optimise(objective, np.array([start, 0.0, np.log(0.1)]), bounds, rng, 1, int(max_iter))
            if res is not None and (best is None or res.fun < best[0].fun):
                best = (res, u, name, n_iter, n_eval)
    if best is None:
        raise ValueError("no fit gave a positive definite GP covariance; the rows may be duplicated with no noise")
    res, u, name, n_iter, n_eval = best
    result = ARDResult(
        lengthscales=np.exp(res.x[0]) * u,
        signal=float(np.exp(res.x[1])),
        noise=float(np.exp(res.x[2])),
        log_likelihood=float(-res.fun * size),
        n_iter=n_iter,
        n_eval=n_eval,
        y_mean=np.asarray(y_mean, dtype=np.float64),
        y_scale=np.asarray(y_scale, dtype=np.float64),
    )
    return result, name

"""The evidence of the Bayesian linear model on the features, and its posterior, from statistics.

The model (DESIGN section 2, "Evidence and predictive uncertainty"): for rows
``n`` of weight ``w_n`` (frequency weights: weight 2 is the row twice),

    y_n = theta^T z_n + beta + eps_n,   eps_n ~ N(0, sigma^2),
    theta ~ N(0, (sigma^2 / lambda) I),   lambda = alpha W,   beta flat,

with ``W = sum_n w_n`` (``FeatureStats.n``). The posterior mean of ``theta`` is
then exactly dxrf's ridge solution at ``alpha``. Integrating ``beta`` out
(flat prior) leaves the centred (restricted) likelihood of ``W - 1``
effective rows; with ``C``, ``c`` the centred covariances (divided by ``W``),
``s`` the centred variance of ``y`` and ``C = U diag(e) U^T``,

    log p(y) = -(nu/2) log(2 pi sigma^2) - (1/2) log W
               + (M/2) log alpha - (1/2) sum_j log(e_j + alpha)
               - W q(alpha) / (2 sigma^2),
    q(alpha) = s - sum_j (U^T c)_j^2 / (e_j + alpha)
             = weighted MSE + alpha |theta|^2   (the ridge objective at its minimum),

``nu = W - 1`` (``W`` and no ``log W`` term without an intercept). The noise
maximising it is ``sigma^2 = W q / nu``. One eigendecomposition serves a
whole path of ``alpha`` (``O(M k)`` per penalty). Outputs are independent
with their own noise; their evidences add.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dxrf.core.blas import blas_limit
from dxrf.stats.feature_stats import FeatureStats
from dxrf.solvers.ridge_path import RidgePath, _intercept, _normal_equations, check_alpha_grid, mse_from_stats

__all__ = ["EvidencePath", "Posterior", "evidence_path", "posterior", "predictive_variance"]


@dataclasses.dataclass
class EvidencePath:
    """The log evidence of every penalty of a path.

    Attributes
    ----------
    alphas : ndarray of shape (P,)
    log_evidence : ndarray of shape (P, k)
        Per penalty and output (``-inf`` at ``alpha = 0``: a flat prior on ``theta``).
    noise : ndarray of shape (P, k)
        The noise variance ``sigma^2`` used: given, or the maximiser at each penalty.
    ridge : RidgePath or None
        With ``rtol``: every penalty's ridge solution (the posterior means),
        from the same eigendecomposition.
    """

    alphas: np.ndarray
    log_evidence: np.ndarray
    noise: np.ndarray
    ridge: RidgePath | None = None

    @property
    def best_index(self) -> int:
        """The penalty with the largest evidence summed over outputs (the first of equals)."""
        total = self.log_evidence.sum(axis=1)
        if not np.isfinite(total).any():
            raise ValueError("no penalty has a finite evidence: use positive alphas (and, when the fits are lost "
                             "to the statistics' rounding, larger ones or dtype='float64' features)")
        return int(np.nanargmax(np.where(np.isfinite(total), total, -np.inf)))


@dataclasses.dataclass
class Posterior:
    """The posterior of ``theta`` at one penalty: ``theta ~ N(coef, noise * factor @ factor.T)``.

    Attributes
    ----------
    factor : ndarray of shape (M, M)
        ``U diag(1 / sqrt(W (e + alpha)))``: ``factor @ factor.T = (W (C + alpha I))^{-1}``.
    center : ndarray of shape (M,)
        The weighted feature mean (zeros without an intercept): predictions use ``z - center``.
    sum_weight : float
        ``W``; the intercept's posterior variance is ``noise / W`` (0 without an intercept).
    noise : ndarray of shape (k,)
    log_evidence : ndarray of shape (k,)
    """

    factor: np.ndarray
    center: np.ndarray
    sum_weight: float
    noise: np.ndarray
    log_evidence: np.ndarray


def _check_noise(noise: object, k: int) -> np.ndarray | None:
    if noise is None:
        return None
    a = np.asarray(noise, dtype=np.float64)
    a = np.broadcast_to(a, (k,)) if a.ndim == 0 or a.shape == (k,) else None
    if a is None or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"noise must be a positive number or one per output ({k}), got {noise!r}")
    return a


def _dof(stats: FeatureStats, fit_intercept: bool) -> float:
    nu = float(stats.n) - (1.0 if fit_intercept else 0.0)
    if nu <= 0:
        raise ValueError(
            f"the evidence needs more than {'one sample' if fit_intercept else 'zero samples'} (a total sample "
            f"weight above {1 if fit_intercept else 0}; the intercept takes one), got n_samples={stats.n}"
        )
    return nu


def _spectrum(stats: FeatureStats, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(e, U, U^T c, s)``: the covariance's spectrum, the rotated cross term and the targets' variance."""
    C, c = _normal_equations(stats, fit_intercept)
    with blas_limit(1):  # the same bits as the ridge path's eigendecomposition
        e, U = np.linalg.eigh(C)
    e = np.maximum(e, 0.0)
    yy = np.diag(stats.yy) / stats.n
    s = yy - (stats.ysum / stats.n) ** 2 if fit_intercept else yy
    return e, U, U.T @ c, np.maximum(s, 0.0)


def _log_evidence(e, g, s, alphas, W, nu, fit_intercept, noise):
    """Per (penalty, output): the log evidence and the noise (see the module's formula)."""
    alphas = np.asarray(alphas, dtype=np.float64)
    m = e.size
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / (e[None, :] + alphas[:, None])  # (P, M)
        inv[~np.isfinite(inv)] = 0.0  # alpha = 0 on a null direction: as the ridge path's minimum norm
        q = np.maximum(s[None, :] - inv @ (g**2), 0.0)  # (P, k): the ridge objective at its minimum
        logdet = 0.5 * m * np.log(alphas) - 0.5 * np.log(e[None, :] + alphas[:, None]).sum(axis=1)  # (P,)
        if noise is None:
            sigma2 = W * q / nu
            fit = -0.5 * nu * (np.log(2 * np.pi * sigma2) + 1.0)
        else:
            sigma2 = np.broadcast_to(noise, q.shape).copy()
            fit = -0.5 * nu * np.log(2 * np.pi * sigma2) - W * q / (2 * sigma2)
    out = fit + logdet[:, None] - (0.5 * np.log(W) if fit_intercept else 0.0)
    out[alphas <= 0] = -np.inf  # improper prior on theta: no evidence
    return out, sigma2


def evidence_path(
    stats: FeatureStats, alphas: object, fit_intercept: bool = True, noise: object = None, *, rtol: float | None = None
) -> EvidencePath:
    """Log marginal likelihood of the Bayesian linear model for every penalty, from statistics only.

    Parameters
    ----------
    stats : FeatureStats
        With targets; ``stats.n`` is the total weight ``W``.
    alphas : array-like of shape (P,)
        dxrf's ridge penalties (the prior precision ratio is ``lambda = alpha W``).
    fit_intercept : bool, default=True
        A flat prior on the intercept: the centred likelihood of ``W - 1`` rows.
    noise : float or array-like of shape (k,), optional
        The noise variance ``sigma^2``; default its maximiser at each penalty.
    rtol : float, optional
        Relative accuracy of the statistics. With it, a penalty whose fit is
        lost to their rounding (the training MSE's rounding bound of
        :func:`~dxrf.solvers.ridge_path.mse_from_stats`: huge coefficients on
        nearly null directions) gets a NaN evidence: the statistics cannot
        tell it, and rounding there reads as explained variance (measured:
        Nyström features at alpha = 1e-8 chosen with a test MSE 10^5 times
        the cross-validated choice's). The ridge path is then returned too.

    Returns
    -------
    EvidencePath

    Notes
    -----
    One eigendecomposition of the ``M x M`` covariance, then ``O(M k)`` per penalty.
    """
    alphas = check_alpha_grid(alphas)
    stats._require_targets()
    nu = _dof(stats, fit_intercept)
    noise = _check_noise(noise, stats.n_targets)
    e, U, g, s = _spectrum(stats, fit_intercept)
    log_ev, sigma2 = _log_evidence(e, g, s, alphas, float(stats.n), nu, fit_intercept, noise)
    if rtol is None:
        return EvidencePath(alphas, log_ev, sigma2)
    with np.errstate(divide="ignore"):
        inv = 1.0 / (e[None, :] + alphas[:, None])
    inv[~np.isfinite(inv)] = 0.0  # as the ridge path: minimum norm on null directions
    coefs = np.einsum("mj,pj,jk->pmk", U, inv, g)
    intercepts = np.stack([_intercept(stats, cf, fit_intercept) for cf in coefs])
    lost = np.isnan(mse_from_stats(stats, coefs, intercepts, rtol=rtol)).any(axis=1)
    log_ev[lost] = np.nan
    return EvidencePath(alphas, log_ev, sigma2, RidgePath(alphas, coefs, intercepts))


def posterior(stats: FeatureStats, alpha: float, fit_intercept: bool = True, noise: object = None) -> Posterior:
    """The posterior at one positive ``alpha``: its covariance factor, the noise and the evidence."""
    alpha = float(check_alpha_grid([alpha])[0])
    if alpha <= 0:
        raise ValueError("the posterior needs a positive alpha (alpha = 0 is a flat prior on the coefficients)")
    stats._require_targets()
    nu = _dof(stats, fit_intercept)
    noise = _check_noise(noise, stats.n_targets)
    W = float(stats.n)
    e, U, g, s = _spectrum(stats, fit_intercept)
    log_ev, sigma2 = _log_evidence(e, g, s, np.array([alpha]), W, nu, fit_intercept, noise)
    U *= 1.0 / np.sqrt(W * (e + alpha))  # in place: columns scaled, no second M x M array
    center = stats.mean() if fit_intercept else np.zeros(stats.n_components)
    return Posterior(U, center, W, sigma2[0], log_ev[0])


def predictive_variance(quad: np.ndarray, noise: np.ndarray, sum_weight: float, fit_intercept: bool) -> np.ndarray:
    """``sigma^2 (1 + 1/W + |(z - center) factor|^2)`` per row and output, from the rows' ``quad`` term.

    ``quad`` (shape (n,)) is ``|(z - center) factor|^2`` of each row; the
    result has shape ``(n, k)``: a new row's noise, the intercept's posterior
    variance (with an intercept) and the coefficients'.
    """
    extra = 1.0 + (1.0 / sum_weight if fit_intercept else 0.0)
    # elementwise only: a dask ``quad`` stays lazy
    return (quad[:, None] + extra) * np.asarray(noise, dtype=np.float64)[None, :]

"""Ridge on Cholesky-whitened Nyström features, solved in the landmark basis.

Features ``z = b T`` with ``b = k(x, L)`` and ``T = R^{-1}`` upper triangular
(``K_LL = R^T R``, :func:`dxrf.kernels.landmarks.inverse_cholesky`). The ridge
equations of DESIGN section 2 in the features, ``(T^T C T + alpha I) w = T^T c``
(``C``, ``c`` the centred covariances of ``b``), are, with ``beta = T w``,

    (C + alpha K_LL) beta = c,

because ``(T T^T)^{-1} = K_LL``. So the pass accumulates the statistics of
``b`` and the solve is one Cholesky factorisation of ``C + alpha K_LL``:
``T^T C T`` (two triangular products, ``2 M^3`` flops, minutes at M = 20 000
on two cores) is never formed. ``w = R beta`` by one triangular solve, and
the intercept is ``mean(y) - mean(b)^T beta``.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from dxrf.core.blas import blas_limit
from dxrf.core.cholesky import cholesky_solve
from dxrf.kernels.kernel import FeatureKernel
from dxrf.features.nystroem import landmark_gram, landmark_kernel, landmark_kind
from dxrf.stats.feature_stats import FeatureStats, is_upper_triangular
from dxrf.solvers.ridge_path import _intercept, _normal_equations, mse_from_stats

__all__ = ["LandmarkStats", "solves_in_landmark_basis", "landmark_values", "solve_landmark_ridge"]


class LandmarkStats:
    """Statistics of the kernel values ``k(x, L)`` of a Cholesky-whitened Nyström ``kernel``."""

    def __init__(self, stats: FeatureStats, kernel: FeatureKernel) -> None:
        self.stats = stats
        self.kernel = kernel


def solves_in_landmark_basis(kernel: FeatureKernel) -> bool:
    """Whether ``kernel`` is a Nyström map with a triangular (Cholesky) whitening and unit scales."""
    T = kernel.whitening
    return T is not None and bool(np.all(kernel.scale == 1)) and is_upper_triangular(T)


def landmark_values(kernel: FeatureKernel) -> FeatureKernel:
    """The kernel values ``k(x, L)`` of a Nyström kernel, as the pass accumulates them (no whitening)."""
    return landmark_kernel(kernel.W, landmark_kind(kernel), kernel.effective_bandwidth, whiten=False)


def solve_landmark_ridge(
    found: LandmarkStats, alpha: float, fit_intercept: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ridge in the landmark basis: ``(coef (M, k) on the whitened features, intercept (k,), per-output MSE)``.

    The MSE is of the fitted model on the rows of the statistics, exact from them.
    """
    stats, kernel = found.stats, found.kernel
    def equations() -> tuple[np.ndarray, np.ndarray]:
        C, c = _normal_equations(stats, fit_intercept)
        K = landmark_gram(kernel.W, landmark_kind(kernel), kernel.effective_bandwidth)  # as the whitening used
        K *= alpha
        C += K
        return C, c

    C, c = equations()
    # blocked on every BLAS thread allowed, the same bits on any number of them
    beta = cholesky_solve(C.T if C.flags.c_contiguous else np.asfortranarray(C), c)
    if beta is None:
        # alpha = 0 with a singular covariance: the minimum-norm solution, as solve_ridge
        del C
        C, c = equations()
        with blas_limit(1):
            beta = scipy.linalg.lstsq(C, c)[0]
    intercept = _intercept(stats, beta, fit_intercept)
    mse = mse_from_stats(stats, beta, intercept)
    # w = T^{-1} beta = R beta, T upper triangular
    coef = scipy.linalg.solve_triangular(kernel.whitening, beta, lower=False, check_finite=False)
    return coef, intercept, mse

"""Kernel alignment over a chi-square ball of the simplex (Sinha & Duchi).

The learned-kernel problem of LKRF is

    maximise   q^T v
    subject to q in the simplex,  D(q || u) = M0 ||q - u||^2 <= rho,

with ``u = 1/M0`` the uniform distribution and ``v_i >= 0`` the alignment
score of candidate ``i``. For a multiplier ``alpha > 0`` of the chi-square
constraint the Lagrangian ``q^T v - (alpha M0 / 2) ||q - u||^2`` is maximised
over the simplex by the Euclidean projection ``q(beta) = P(u + beta v)`` with
``beta = 1 / (alpha M0)``. The divergence ``M0 ||q(beta) - u||^2`` is
continuous and non-decreasing in ``beta`` (the projection of a ray that
starts inside a convex set moves away from its start), so the optimal
multiplier is found by bisection: the ``beta`` at which the constraint is
active, or ``beta -> infinity`` (the vertex, or the uniform distribution on
the tied maxima of ``v``) when the ball holds it.

References
----------
.. [1] A. Sinha and J. C. Duchi, "Learning kernels with random features",
   NeurIPS 2016.
.. [2] J. Duchi, S. Shalev-Shwartz, Y. Singer and T. Chandra, "Efficient
   projections onto the l1-ball for learning in high dimensions", ICML 2008.
"""

from __future__ import annotations

import numpy as np

from dxrf.core.validation import check_positive_float

__all__ = ["project_simplex", "chi2_divergence", "lkrf_weights"]


def project_simplex(x: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``x`` onto the probability simplex (sort-based).

    ``argmin_{q >= 0, sum q = 1} ||q - x||`` is ``max(x - tau, 0)`` with the
    threshold ``tau`` found from the sorted entries in ``O(M log M)``.

    Parameters
    ----------
    x : ndarray of shape (M,)

    Returns
    -------
    ndarray of shape (M,)

    References
    ----------
    .. [1] J. Duchi et al., "Efficient projections onto the l1-ball for
       learning in high dimensions", ICML 2008, Figure 1.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-d array, got shape {x.shape}")
    s = np.sort(x)[::-1]
    cumulative = np.cumsum(s) - 1.0
    j = np.arange(1, x.size + 1)
    # the largest j with s_j > (sum_{i<=j} s_i - 1) / j; j = 1 always qualifies
    k = int(np.flatnonzero(s * j > cumulative)[-1]) + 1
    tau = cumulative[k - 1] / k
    return np.maximum(x - tau, 0.0)


def chi2_divergence(q: np.ndarray) -> float:
    """``D(q || uniform) = M0 ||q - 1/M0||^2`` (the chi-square divergence)."""
    q = np.asarray(q, dtype=np.float64)
    m = q.size
    return float(m * np.sum((q - 1.0 / m) ** 2))


def lkrf_weights(v: np.ndarray, rho: float, *, tol: float = 1e-10, max_iter: int = 500) -> np.ndarray:
    """Solve ``max q^T v`` over the simplex within the chi-square ball ``rho``.

    Bisection on the dual multiplier of the chi-square constraint; each step
    is one sort-based simplex projection (:func:`project_simplex`).

    Parameters
    ----------
    v : ndarray of shape (M0,)
        Non-negative alignment scores ``v_i = (sum_n y_n phi(x_n, w_i))^2``.
        Only their ratios matter.
    rho : float
        Radius of the ball, ``M0 ||q - 1/M0||^2 <= rho``; positive. The ball
        holds the whole simplex once ``rho >= M0 - 1``.
    tol : float, default=1e-10
        Relative tolerance on the constraint: the returned ``q`` has
        ``rho (1 - tol) <= D(q) <= rho`` whenever the constraint is active.
    max_iter : int, default=500
        Bound on the bisection steps (about 60 suffice in double precision).

    Returns
    -------
    q : ndarray of shape (M0,)
        The optimal distribution. When the ball holds a maximiser of ``v`` on
        the simplex, the maximiser of least divergence (uniform on the tied
        maxima of ``v``) is returned.

    References
    ----------
    .. [1] A. Sinha and J. C. Duchi, "Learning kernels with random features",
       NeurIPS 2016, Section 3 and Appendix.
    """
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"v must be a non-empty 1-d array, got shape {v.shape}")
    if not np.isfinite(v).all() or np.any(v < 0):
        raise ValueError("v must be non-negative and finite")
    check_positive_float(rho, "rho")
    m = v.size
    u = np.full(m, 1.0 / m)
    vmax = v.max()
    if vmax == 0.0 or m == 1:
        return u
    w = v / vmax  # in [0, 1]; q(beta) is invariant to rescaling v with beta
    top = w == 1.0
    q_inf = top / top.sum()
    # D(q_inf) = M0 / T - 1 for T tied maxima (M0 - 1 for a vertex)
    if m / top.sum() - 1.0 <= rho * (1.0 + 1e-12):
        return q_inf

    def q_of(beta: float) -> np.ndarray:
        return project_simplex(u + beta * w)

    lo, hi = 0.0, 1.0
    for _ in range(2000):
        if chi2_divergence(q_of(hi)) >= rho:
            break
        lo, hi = hi, 2.0 * hi
    q_lo = q_of(lo)
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        q_mid = q_of(mid)
        f = chi2_divergence(q_mid)
        if f <= rho:
            lo, q_lo = mid, q_mid
            if rho - f <= tol * rho:
                break
        else:
            hi = mid
    return q_lo

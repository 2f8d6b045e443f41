"""Exact kernels approximated by the random feature maps (dense references).

These are O(n m d) dense functions for checking approximations on small data,
not for use at scale.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.spatial.distance import cdist
from scipy.special import ndtr

__all__ = [
    "gaussian_kernel",
    "laplacian_kernel",
    "cauchy_kernel",
    "arccos_kernel",
    "linear_kernel",
    "maxout_kernel",
    "maxout_correlation",
]


def _pair(X: np.ndarray, Y: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    return X, Y


def _scaled_pair(X: np.ndarray, Y: np.ndarray | None, bandwidth: object) -> tuple[np.ndarray, np.ndarray, float]:
    """``(X, Y, sigma)``; per-column lengthscales (a 1-d ``bandwidth``) divide the columns and leave ``sigma = 1``."""
    X, Y = _pair(X, Y)
    if np.ndim(bandwidth) == 0:
        return X, Y, float(bandwidth)
    ls = np.asarray(bandwidth, dtype=np.float64)
    if ls.shape != (X.shape[1],):
        raise ValueError(f"lengthscales have shape {ls.shape}; expected ({X.shape[1]},), one per column")
    return X / ls, Y / ls, 1.0


def gaussian_kernel(X: np.ndarray, Y: np.ndarray | None = None, bandwidth: float | np.ndarray = 1.0) -> np.ndarray:
    """``exp(-|x - y|^2 / (2 sigma^2))``; a 1-d ``bandwidth`` holds lengthscales: ``exp(-|(x - y) / l|^2 / 2)``."""
    X, Y, bandwidth = _scaled_pair(X, Y, bandwidth)
    return np.exp(-cdist(X, Y, "sqeuclidean") / (2.0 * bandwidth**2))


def laplacian_kernel(X: np.ndarray, Y: np.ndarray | None = None, bandwidth: float | np.ndarray = 1.0) -> np.ndarray:
    """``exp(-|x - y|_1 / sigma)``; a 1-d ``bandwidth`` holds lengthscales: ``exp(-|(x - y) / l|_1)``."""
    X, Y, bandwidth = _scaled_pair(X, Y, bandwidth)
    return np.exp(-cdist(X, Y, "cityblock") / bandwidth)


def cauchy_kernel(X: np.ndarray, Y: np.ndarray | None = None, bandwidth: float | np.ndarray = 1.0) -> np.ndarray:
    """``prod_j 1 / (1 + (x_j - y_j)^2 / sigma^2)``; a 1-d ``bandwidth`` holds lengthscales ``l_j`` for ``sigma``."""
    X, Y, bandwidth = _scaled_pair(X, Y, bandwidth)
    out = np.ones((X.shape[0], Y.shape[0]))
    for j in range(X.shape[1]):
        out /= 1.0 + ((X[:, j, None] - Y[None, :, j]) / bandwidth) ** 2
    return out


def _norms_and_cosines(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    nx = np.linalg.norm(X, axis=1)
    ny = np.linalg.norm(Y, axis=1)
    outer = np.outer(nx, ny)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(outer > 0, (X @ Y.T) / outer, 0.0)
    return outer, np.clip(cos, -1.0, 1.0)


def arccos_kernel(X: np.ndarray, Y: np.ndarray | None = None, bandwidth: float = 1.0) -> np.ndarray:
    """Arc-cosine kernel of order 1 scaled by ``1/sigma^2``.

    ``|x| |y| (sin t + (pi - t) cos t) / (pi sigma^2)``, ``t`` the angle between x and y;
    equal to ``E[2 max(w.x, 0) max(w.y, 0)]`` for ``w ~ N(0, I / sigma^2)``.
    """
    X, Y = _pair(X, Y)
    outer, cos = _norms_and_cosines(X, Y)
    t = np.arccos(cos)
    return outer * (np.sin(t) + (np.pi - t) * cos) / (np.pi * bandwidth**2)


def linear_kernel(X: np.ndarray, Y: np.ndarray | None = None) -> np.ndarray:
    """``<x, y>``."""
    X, Y = _pair(X, Y)
    return X @ Y.T


# -- maxout -------------------------------------------------------------------

_GRID_STEP = 0.02
_GRID_HALF_WIDTH = 8.5
_RHO_TABLE_MAX = 0.98


def _grid() -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(-_GRID_HALF_WIDTH, _GRID_HALF_WIDTH + _GRID_STEP / 2, _GRID_STEP)
    phi = np.exp(-0.5 * t**2) / np.sqrt(2.0 * np.pi)
    return t, phi


def _trapezoid_weights(n: int, h: float) -> np.ndarray:
    w = np.full(n, h)
    w[0] = w[-1] = h / 2
    return w


def _maxout_value(rho: float, q: int) -> float:
    """``E[max_j U_j max_j V_j]`` for q i.i.d. pairs of correlation ``rho`` in (-1, 1).

    Split on which index attains each maximum: the same index (q ways) or two
    different ones (q (q - 1) ways); both are 2-d integrals over a uniform grid,
    with the bivariate normal CDF obtained by a cumulative integral along u.
    """
    t, phi = _grid()
    h = _GRID_STEP
    s = np.sqrt(1.0 - rho * rho)
    u = t[:, None]
    v = t[None, :]
    # integrand of Phi2(u, v) along u: phi(u) P(V < v | U = u)
    cond_v = ndtr((v - rho * u) / s)
    f = phi[:, None] * cond_v
    cum = np.cumsum(f, axis=0) * h - 0.5 * h * (f + f[:1])  # cumulative trapezoid from the lower edge
    phi2 = np.clip(cum, 0.0, 1.0)
    density = phi[:, None] * np.exp(-0.5 * ((v - rho * u) / s) ** 2) / (np.sqrt(2.0 * np.pi) * s)
    w = _trapezoid_weights(t.size, h)
    W2 = np.outer(w, w)
    uv = u * v
    same = np.sum(W2 * uv * density * phi2 ** (q - 1))
    total = q * same
    if q >= 2:
        cond_u = ndtr((u - rho * v) / s)
        cross = np.sum(W2 * uv * phi[:, None] * phi[None, :] * cond_v * cond_u * phi2 ** (q - 2))
        total += q * (q - 1) * cross
    return float(total)


def _maxout_endpoint(q: int, sign: int) -> float:
    """The value at rho = +1 (``E[(max U)^2]``) or rho = -1 (``-E[max U min U]``)."""
    t, phi = _grid()
    h = _GRID_STEP
    w = _trapezoid_weights(t.size, h)
    cdf = ndtr(t)
    if sign > 0:
        return float(q * np.sum(w * t**2 * phi * cdf ** (q - 1)))
    if q == 1:
        return -1.0
    a = t[:, None]
    b = t[None, :]
    # region a < b, with half weight on the diagonal as the trapezoid rule wants
    mask = (b > a) + 0.5 * (b == a)
    dens = mask * phi[:, None] * phi[None, :] * np.clip(cdf[None, :] - cdf[:, None], 0, None) ** (q - 2)
    return float(-q * (q - 1) * np.sum(np.outer(w, w) * a * b * dens))


@functools.lru_cache(maxsize=16)
def _maxout_spline(q: int) -> CubicSpline:
    rhos = np.linspace(-_RHO_TABLE_MAX, _RHO_TABLE_MAX, 99)
    values = [_maxout_value(r, q) for r in rhos]
    rhos = np.concatenate([[-1.0], rhos, [1.0]])
    values = np.concatenate([[_maxout_endpoint(q, -1)], values, [_maxout_endpoint(q, +1)]])
    return CubicSpline(rhos, values)


def maxout_correlation(rho: np.ndarray, pieces: int) -> np.ndarray:
    """``f_q(rho) = E[max_j U_j max_j V_j]`` for ``q`` i.i.d. standard normal pairs.

    Closed forms for q = 1 (``rho``) and q = 2
    (``rho/2 + (sqrt(1 - rho^2) + rho arcsin rho) / pi``); numerical quadrature
    (about 1e-5 absolute accuracy) interpolated over ``rho`` for larger q.
    """
    rho = np.clip(np.asarray(rho, dtype=np.float64), -1.0, 1.0)
    if pieces == 1:
        return rho
    if pieces == 2:
        return rho / 2 + (np.sqrt(1 - rho**2) + rho * np.arcsin(rho)) / np.pi
    return _maxout_spline(int(pieces))(rho)


def maxout_kernel(X: np.ndarray, Y: np.ndarray | None = None, pieces: int = 2) -> np.ndarray:
    """Kernel of random maxout features: ``|x| |y| f_q(cos(x, y))``."""
    X, Y = _pair(X, Y)
    outer, cos = _norms_and_cosines(X, Y)
    return outer * maxout_correlation(cos, pieces)

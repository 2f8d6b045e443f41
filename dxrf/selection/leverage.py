"""Empirical ridge leverage scores of candidate random features: dense algebra.

Everything here works on the small ``M0 x M0`` statistics of one pass. With
candidates ``w_1 .. w_M0`` and the candidate map ``z~`` (which carries the
``M0^{-1/2}`` factor), the normalised Gram is

    G = (1/N) sum_n z~(x_n) z~(x_n)^T        (trace about 1 for Fourier features)

and, for a penalty ``lam`` on that scale,

    Q = G (G + lam I)^{-1},   q^_i = Q_ii / tr Q,   d_lam = tr Q.

One eigendecomposition ``G = U diag(L) U^T`` gives every ``lam`` at once:
``Q_ii = sum_k U_ik^2 L_k / (L_k + lam)`` and ``d_lam = sum_k L_k / (L_k + lam)``.

References
----------
.. [1] S. Shahrampour and S. Kolouri, "On sampling random features from
   empirical leverage scores: implementation and theoretical guarantees",
   arXiv:1903.08329, 2019.
.. [2] Z. Li, J.-F. Ton, D. Oglic and D. Sejdinovic, "Towards a unified
   analysis of random Fourier features", ICML 2019.
.. [3] F. Bach, "On the equivalence between kernel quadrature rules and random
   feature expansions", JMLR 18(21), 2017.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import numpy as np

from .._blas import blas_limit
from ..stats import FeatureStats

__all__ = [
    "LAM_CONVENTIONS",
    "GramSpectrum",
    "LeverageDiagnostics",
    "gram_spectrum",
    "leverage_scores",
    "degrees_of_freedom",
    "suggested_n_components",
    "leverage_diagnostics",
]

LAM_CONVENTIONS = ("normalized", "unnormalized")


@dataclasses.dataclass(frozen=True, eq=False)
class GramSpectrum:
    """Eigendecomposition of the normalised Gram ``G = (1/N) sum z~ z~^T``.

    Computing it once and passing it to :func:`leverage_scores`,
    :func:`degrees_of_freedom` or :func:`dxrf.selection.select_features`
    avoids repeating the ``O(M0^3)`` decomposition for every ``(M, lam)``.

    Attributes
    ----------
    eigenvalues : ndarray of shape (M0,)
        Ascending, with tiny negative values (rounding) clipped to 0.
    eigenvectors : ndarray of shape (M0, M0)
        Orthonormal columns.
    n_samples : int or None
        Rows ``N`` the Gram was accumulated over (None when built from a bare
        matrix); needed only for ``lam_convention="unnormalized"``.
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    n_samples: int | None = None

    @property
    def n_components(self) -> int:
        return int(self.eigenvalues.shape[0])

    def diag_q(self, lams: np.ndarray) -> np.ndarray:
        """``Q_ii`` for each penalty: shape ``(len(lams), M0)``."""
        lams = np.asarray(lams, dtype=np.float64).reshape(-1)
        ev = self.eigenvalues
        shrink = ev[:, None] / (ev[:, None] + lams[None, :])  # (M0, L)
        return ((self.eigenvectors**2) @ shrink).T

    def trace_q(self, lams: np.ndarray) -> np.ndarray:
        """``tr Q = sum_k L_k / (L_k + lam)`` for each penalty: shape ``(len(lams),)``."""
        lams = np.asarray(lams, dtype=np.float64).reshape(-1)
        ev = self.eigenvalues
        return (ev[:, None] / (ev[:, None] + lams[None, :])).sum(axis=0)


def gram_spectrum(stats_or_gram: FeatureStats | np.ndarray | GramSpectrum) -> GramSpectrum:
    """The eigendecomposition of the normalised Gram, computed once.

    Parameters
    ----------
    stats_or_gram : FeatureStats, ndarray of shape (M0, M0), or GramSpectrum
        Candidate statistics (``G = stats.gram / stats.n``), or the normalised
        Gram ``G`` itself (trace about 1), or an already computed spectrum
        (returned as is).

    Returns
    -------
    GramSpectrum
    """
    if isinstance(stats_or_gram, GramSpectrum):
        return stats_or_gram
    n = None
    if isinstance(stats_or_gram, FeatureStats):
        G = stats_or_gram.normalized_gram()
        n = int(stats_or_gram.n)
    else:
        G = np.asarray(stats_or_gram, dtype=np.float64)
        if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] == 0:
            raise ValueError(f"stats_or_gram must be FeatureStats or a square (M0, M0) matrix, got shape {G.shape}")
    if not np.isfinite(G).all():
        raise ValueError("the Gram matrix contains NaN or infinity")
    G = 0.5 * (G + G.T)
    with blas_limit(1):  # the same rounding whatever BLAS threads the caller has: reproducible selections
        ev, U = np.linalg.eigh(G)
    # G is positive semi-definite: negative eigenvalues are rounding
    ev = np.clip(ev, 0.0, None)
    return GramSpectrum(ev, U, n)


def _check_lam(lam: Any) -> tuple[np.ndarray, bool]:
    """Penalties as a 1-d float array, and whether a scalar was given."""
    if isinstance(lam, bool):
        raise TypeError(f"lam must be a positive number or a 1-d array of them, got {lam!r}")
    scalar = isinstance(lam, numbers.Real) or np.ndim(lam) == 0
    try:
        lams = np.asarray(lam, dtype=np.float64).reshape(-1) if scalar else np.asarray(lam, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"lam must be a positive number or a 1-d array of them, got {lam!r}") from exc
    if lams.ndim != 1 or lams.size == 0:
        raise ValueError(f"lam must be a positive number or a non-empty 1-d array, got shape {lams.shape}")
    if not np.all(np.isfinite(lams)) or np.any(lams <= 0):
        raise ValueError(f"lam must be positive and finite, got {lam!r}")
    return lams, scalar


def _normalize_lams(lams: np.ndarray, lam_convention: str, spectrum: GramSpectrum, n_samples: int | None) -> np.ndarray:
    if lam_convention not in LAM_CONVENTIONS:
        raise ValueError(f"lam_convention must be one of {LAM_CONVENTIONS}, got {lam_convention!r}")
    if lam_convention == "normalized":
        return lams
    n = n_samples if n_samples is not None else spectrum.n_samples
    if n is None:
        raise ValueError(
            "n_samples is required with lam_convention='unnormalized' when a bare Gram matrix is given "
            "(lam is then divided by the number of rows N)"
        )
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n <= 0:
        raise ValueError(f"n_samples must be a positive integer, got {n!r}")
    return lams / float(n)


def leverage_scores(
    stats_or_gram: FeatureStats | np.ndarray | GramSpectrum,
    lam: float | np.ndarray,
    *,
    lam_convention: str = "normalized",
    n_samples: int | None = None,
) -> tuple[np.ndarray, float | np.ndarray]:
    """Normalised empirical ridge leverage scores ``q^`` and ``tr Q``.

    ``Q = G (G + lam I)^{-1}`` with ``G = (1/N) sum_n z~(x_n) z~(x_n)^T`` the
    normalised Gram of the candidates (trace about 1); ``q^_i = Q_ii / tr Q``.
    A grid of penalties costs one eigendecomposition.

    Parameters
    ----------
    stats_or_gram : FeatureStats, ndarray of shape (M0, M0), or GramSpectrum
        Candidate statistics from :func:`dxrf.accumulate`, the normalised Gram
        ``G`` itself, or its :func:`gram_spectrum`.
    lam : float or 1-d array of float
        Ridge penalty (or a grid of them), all positive.
    lam_convention : {"normalized", "unnormalized"}, default="normalized"
        ``"normalized"``: ``lam`` is on the scale of ``G`` (trace about 1), as
        in Shahrampour & Kolouri. ``"unnormalized"``: ``lam`` is the penalty
        ``mu`` added to the *unnormalised* Gram ``sum_n z~(x_n) z~(x_n)^T = N G``
        (``stats.gram``), i.e. the ``n lam`` of Li, Ton, Oglic & Sejdinovic,
        whose leverage-weighted RFF uses
        ``p_i = [Z^T Z ((1/M0) Z^T Z + n lam I)^{-1}]_ii`` with ``Z`` the
        ``N x M0`` matrix of unnormalised features ``phi(x_n, w_i)``. Since
        ``(1/M0) Z^T Z = N G``, ``p_i = M0 Q_ii`` with ``lam = mu / N``; their
        ``lam`` (before the factor ``n``) is the same number as ours. Both
        conventions give identical weights for ``mu = N lam``.
    n_samples : int, optional
        ``N``, only for ``"unnormalized"`` with a bare Gram matrix (otherwise
        ``stats.n`` is used).

    Returns
    -------
    weights : ndarray of shape (M0,), or (len(lam), M0) for a grid
        ``q^``, non-negative, each row summing to 1.
    trace : float, or ndarray of shape (len(lam),) for a grid
        ``tr Q``, the degrees of freedom ``d_lam``.

    References
    ----------
    .. [1] S. Shahrampour and S. Kolouri, "On sampling random features from
       empirical leverage scores: implementation and theoretical guarantees",
       arXiv:1903.08329, 2019 (eqs. 10-14).
    .. [2] Z. Li, J.-F. Ton, D. Oglic and D. Sejdinovic, "Towards a unified
       analysis of random Fourier features", ICML 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from dxrf.selection import leverage_scores
    >>> G = np.diag([0.5, 0.3, 0.2])
    >>> q, d = leverage_scores(G, 1e-9)
    >>> np.round(q, 6), round(d, 6)
    (array([0.333333, 0.333333, 0.333333]), 3.0)
    """
    lams, scalar = _check_lam(lam)
    spectrum = gram_spectrum(stats_or_gram)
    lams = _normalize_lams(lams, lam_convention, spectrum, n_samples)
    diag = spectrum.diag_q(lams)
    trace = spectrum.trace_q(lams)
    if np.any(trace <= 0):
        raise ValueError("the Gram matrix is zero: leverage scores are undefined")
    weights = np.clip(diag, 0.0, None)
    weights /= weights.sum(axis=1, keepdims=True)
    if scalar:
        return weights[0], float(trace[0])
    return weights, trace


def degrees_of_freedom(
    stats_or_gram: FeatureStats | np.ndarray | GramSpectrum,
    lam: float | np.ndarray,
    *,
    lam_convention: str = "normalized",
    n_samples: int | None = None,
) -> float | np.ndarray:
    """Effective degrees of freedom ``d_lam = tr G (G + lam I)^{-1}``.

    Parameters
    ----------
    stats_or_gram : FeatureStats, ndarray of shape (M0, M0), or GramSpectrum
    lam : float or 1-d array of float
    lam_convention : {"normalized", "unnormalized"}, default="normalized"
        See :func:`leverage_scores`.
    n_samples : int, optional

    Returns
    -------
    float, or ndarray of shape (len(lam),) for a grid.

    References
    ----------
    .. [1] S. Shahrampour and S. Kolouri, 2019 (see :func:`leverage_scores`).
    """
    lams, scalar = _check_lam(lam)
    spectrum = gram_spectrum(stats_or_gram)
    lams = _normalize_lams(lams, lam_convention, spectrum, n_samples)
    trace = spectrum.trace_q(lams)
    return float(trace[0]) if scalar else trace


def suggested_n_components(
    dof: float | np.ndarray, delta: float = 0.1, *, constant: float = 5.0, log_constant: float = 16.0
) -> int | np.ndarray:
    """Number of features from Bach's bound ``M >~ d_lam log(d_lam / delta)``.

    Returns ``ceil(constant * d * log(log_constant * d / delta))`` (at least 1),
    the sufficient number of features sampled from the leverage distribution
    for a ``lam``-accurate approximation with probability ``1 - delta``
    (Bach 2017, Proposition 1, with ``d_max = d_lam`` for the optimised
    distribution). ``constant=1, log_constant=1`` gives the leading-order form.

    Parameters
    ----------
    dof : float or ndarray
        Degrees of freedom ``d_lam`` (:func:`degrees_of_freedom`).
    delta : float, default=0.1
        Failure probability, in (0, 1).
    constant, log_constant : float
        Constants of the bound.

    Returns
    -------
    int, or ndarray of int with the shape of ``dof``.

    References
    ----------
    .. [1] F. Bach, "On the equivalence between kernel quadrature rules and
       random feature expansions", JMLR 18(21), 2017.
    """
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if not constant > 0 or not log_constant > 0:
        raise ValueError(f"constant and log_constant must be positive, got {constant!r}, {log_constant!r}")
    d = np.asarray(dof, dtype=np.float64)
    if np.any(~np.isfinite(d)) or np.any(d < 0):
        raise ValueError(f"dof must be non-negative and finite, got {dof!r}")
    with np.errstate(divide="ignore"):
        m = constant * d * np.log(np.maximum(log_constant * d / delta, 1.0))
    out = np.maximum(np.ceil(m), 1).astype(np.int64)
    return int(out) if out.ndim == 0 else out


@dataclasses.dataclass(frozen=True, eq=False)
class LeverageDiagnostics:
    """Leverage diagnostics over a grid of penalties, as data for plots.

    Attributes
    ----------
    lams : ndarray of shape (L,)
        Penalties on the normalised scale (after any ``lam_convention``).
    eigenvalues : ndarray of shape (M0,)
        Spectrum of ``G``, descending.
    dof : ndarray of shape (L,)
        ``d_lam`` against ``lams``.
    weights : ndarray of shape (L, M0)
        ``q^`` against ``lams`` (row ``l`` for ``lams[l]``).
    suggested_n_components : ndarray of int, shape (L,)
        Bach's bound for each ``lam`` (:func:`suggested_n_components`).
    hist_counts : ndarray of int, shape (L, bins)
        Histogram of the weights ``q^`` for each ``lam``.
    hist_edges : ndarray of shape (L, bins + 1)
        Bin edges of each histogram (each ``lam`` has its own range).
    delta : float
    """

    lams: np.ndarray
    eigenvalues: np.ndarray
    dof: np.ndarray
    weights: np.ndarray
    suggested_n_components: np.ndarray
    hist_counts: np.ndarray
    hist_edges: np.ndarray
    delta: float

    def as_dict(self) -> dict[str, Any]:
        """Plain lists and numbers, ready for ``json.dump``."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = v.tolist() if isinstance(v, np.ndarray) else v
        return out


def leverage_diagnostics(
    stats_or_gram: FeatureStats | np.ndarray | GramSpectrum,
    lams: np.ndarray | float,
    *,
    bins: int = 50,
    delta: float = 0.1,
    lam_convention: str = "normalized",
    n_samples: int | None = None,
) -> LeverageDiagnostics:
    """Weight histograms, ``q^`` against ``lam`` and ``d_lam`` against ``lam``.

    One eigendecomposition serves the whole grid.

    Parameters
    ----------
    stats_or_gram : FeatureStats, ndarray of shape (M0, M0), or GramSpectrum
    lams : float or 1-d array of float
        Grid of penalties.
    bins : int, default=50
        Bins of each weight histogram.
    delta : float, default=0.1
        Confidence of the suggested numbers of features.
    lam_convention : {"normalized", "unnormalized"}, default="normalized"
    n_samples : int, optional

    Returns
    -------
    LeverageDiagnostics

    References
    ----------
    .. [1] S. Shahrampour and S. Kolouri, 2019 (see :func:`leverage_scores`).
    """
    if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins <= 0:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    spectrum = gram_spectrum(stats_or_gram)
    grid, _ = _check_lam(lams)
    grid = _normalize_lams(grid, lam_convention, spectrum, n_samples)
    weights, dof = leverage_scores(spectrum, grid)
    weights = np.atleast_2d(weights)
    dof = np.atleast_1d(np.asarray(dof, dtype=np.float64))
    counts = np.empty((grid.size, bins), dtype=np.int64)
    edges = np.empty((grid.size, bins + 1))
    for i, w in enumerate(weights):
        counts[i], edges[i] = np.histogram(w, bins=bins)
    return LeverageDiagnostics(
        lams=grid,
        eigenvalues=spectrum.eigenvalues[::-1].copy(),
        dof=dof,
        weights=weights,
        suggested_n_components=np.atleast_1d(suggested_n_components(dof, delta)),
        hist_counts=counts,
        hist_edges=edges,
        delta=float(delta),
    )

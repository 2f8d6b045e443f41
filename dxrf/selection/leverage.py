"""Empirical ridge leverage scores of candidate random features: dense algebra.

Everything here works on the small ``M0 x M0`` statistics of one pass. With
candidates ``w_1 .. w_M0`` and the candidate map ``z~`` (which carries the
``M0^{-1/2}`` factor), the normalised Gram is

    G = (1/N) sum_n z~(x_n) z~(x_n)^T        (trace about 1 for Fourier features)

and, for a penalty ``lam`` on that scale,

    Q = G (G + lam I)^{-1},   q^_i = Q_ii / tr Q,   d_lam = tr Q.

One eigendecomposition ``G = U diag(L) U^T`` gives every ``lam`` at once:
``Q_ii = sum_k U_ik^2 L_k / (L_k + lam)`` and ``d_lam = sum_k L_k / (L_k + lam)``.
It serves a grid of penalties, or a precomputed :class:`GramSpectrum`.

For ONE penalty on a Gram (or statistics) a Cholesky factorisation is several
times cheaper: with ``A = G + lam I = L L^T``, ``Q = I - lam A^{-1}``, so

    Q_ii = 1 - lam (A^{-1})_ii,   (A^{-1})_ii = ||L^{-1} e_i||^2,

the squared column norms of the triangular inverse (LAPACK ``potrf`` then
``trtri``: ``2 M0^3 / 3`` flops, about twice a bare Cholesky and 7 times
faster than the eigendecomposition at M0 = 2000; ``dxrf bench leverage``).
Both paths agree to rounding, about ``eps (L_max + lam) / lam`` in each
``Q_ii``. The Cholesky path is used only where it is as accurate:

- ``lam <= 1e3 max_i G_ii``: beyond, every ``Q_ii <= G_ii / lam < 1e-3`` and
  ``1 - lam (A^{-1})_ii`` would cancel most digits (the spectral formula has
  no cancellation);
- ``lam >= 1e-10 tr G``: below, ``lam`` nears the rounding level of ``G``'s
  zero eigenvalues, which the eigendecomposition clips to 0;
- ``potrf`` succeeds (``A`` numerically positive definite).

A merely positive semi-definite ``G`` (rank-deficient) is fine in that range,
since ``lam > 0`` makes ``A`` positive definite. Otherwise the
eigendecomposition is used, which clips rounding-level negative eigenvalues
to 0, so the limit ``lam -> 0`` (``d_lam -> rank G``, uniform weights for a
full-rank ``G``) behaves as before. ``lam`` itself must be positive:
``lam = 0`` is rejected.

The dense algebra runs on all of the client's cores (:func:`client_threads`,
the CPUs this process may run on), always that number of BLAS threads,
whatever limits the caller has set: the results are reproducible to the bit
for a given machine (CPU count) and BLAS, but differ in the last bits from a
run with another thread count, since LAPACK's blocked factorisations split
their sums by thread. (One exception: :class:`dxrf.core.blas.blas_limit` lets the
first of overlapping holders set the limit, so a call made while another
thread of the process holds, say, ``blas_limit(1)`` runs on that one thread.)

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
import functools
import numbers
import os
from typing import Any

import numpy as np
from scipy.linalg import lapack

from dxrf.core.blas import blas_limit
from dxrf.core.validation import check_choice, check_fraction, check_positive_int
from dxrf.stats.feature_stats import FeatureStats

__all__ = [
    "LAM_CONVENTIONS",
    "GramSpectrum",
    "LeverageDiagnostics",
    "client_threads",
    "gram_spectrum",
    "leverage_scores",
    "degrees_of_freedom",
    "suggested_n_components",
    "leverage_diagnostics",
]

LAM_CONVENTIONS = ("normalized", "unnormalized")

# where the single-lam Cholesky path is as accurate as the spectral one (module docstring)
_CHOLESKY_MAX_LAM = 1e3  # times max_i G_ii
_CHOLESKY_MIN_LAM = 1e-10  # times tr G
# rows per band when symmetrising G and reducing L^{-1}: 256 x M0 doubles (20 MB at M0 = 10 000)
_BAND = 256


@functools.cache
def client_threads() -> int:
    """BLAS threads of the client-side dense algebra: every CPU this process may use.

    Fixed for the life of the process (so repeated calls round identically),
    and independent of the caller's BLAS limits.

    Returns
    -------
    int
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


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
    G, n = _load_gram(stats_or_gram)
    return _spectrum(G, n)


def _read_gram(stats_or_gram: FeatureStats | np.ndarray) -> tuple[np.ndarray, int | None, bool]:
    """The normalised Gram as given, ``N`` (None for a bare matrix), and whether the array is a new one."""
    if isinstance(stats_or_gram, FeatureStats):
        # n: the rows, or the total weight of weighted statistics (the unnormalised convention's N)
        G, n, new = stats_or_gram.normalized_gram(), stats_or_gram.n, True
    else:
        G, n, new = np.asarray(stats_or_gram, dtype=np.float64), None, False
        if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] == 0:
            raise ValueError(f"stats_or_gram must be FeatureStats or a square (M0, M0) matrix, got shape {G.shape}")
    if not np.isfinite(G).all():
        raise ValueError("the Gram matrix contains NaN or infinity")
    return G, n, new


def _load_gram(stats_or_gram: FeatureStats | np.ndarray) -> tuple[np.ndarray, int | None]:
    """The symmetrised normalised Gram (a new array) and ``N`` (None for a bare matrix)."""
    G, n, _ = _read_gram(stats_or_gram)
    return 0.5 * (G + G.T), n


def _spectrum(G: np.ndarray, n: int | None) -> GramSpectrum:
    # a fixed thread count, not the caller's: the same rounding on every call
    with blas_limit(client_threads()):
        ev, U = np.linalg.eigh(G)
    # G is positive semi-definite: negative eigenvalues are rounding
    ev = np.clip(ev, 0.0, None)
    return GramSpectrum(ev, U, n)


def _symmetrize_upper(G: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out``'s upper triangle (and diagonal) set to that of ``(G + G^T) / 2``; ``out`` may be ``G``.

    In row bands, so that the transposed operand is read a cache-sized band at
    a time (twice as fast as ``G + G.T`` at M0 = 10 000), and only the triangle
    LAPACK reads. The strict lower triangle of ``out`` is left as it was.
    """
    m = G.shape[0]
    for r0 in range(0, m, _BAND):
        r1 = min(r0 + _BAND, m)
        # rows r0:r1 of the upper triangle read only rows >= r0 of G's columns
        # r0:r1, which earlier bands never wrote (numpy buffers the overlapping diagonal block)
        band = out[r0:r1, r0:]
        np.add(G[r0:r1, r0:], G[r0:, r0:r1].T, out=band)
        band *= 0.5
    return out


def _cholesky_diag_q(G: np.ndarray, lam: float, *, overwrite: bool = False) -> np.ndarray | None:
    """``Q_ii = 1 - lam (A^{-1})_ii`` from ``A = G + lam I = L L^T``, or None.

    None where the Cholesky path would be less accurate than the spectral one
    or ``A`` is not numerically positive definite (module docstring).

    Parameters
    ----------
    G : ndarray of shape (M0, M0)
        The normalised Gram, C-contiguous float64 (symmetrised here).
    lam : float
        Penalty on the scale of ``G``.
    overwrite : bool, default=False
        Whether ``G`` may be overwritten (saves an ``M0 x M0`` array).

    Returns
    -------
    ndarray of shape (M0,) or None
    """
    m = G.shape[0]
    diag = G.diagonal()
    if not (lam > 0 and _CHOLESKY_MIN_LAM * diag.sum() <= lam <= _CHOLESKY_MAX_LAM * diag.max()):
        return None
    overwrite = overwrite and G.flags.c_contiguous and G.flags.writeable
    A = _symmetrize_upper(G, G if overwrite else np.empty_like(G, order="C"))
    A.flat[:: m + 1] += lam
    # A.T is the Fortran-ordered view of the same (symmetric) matrix: LAPACK works
    # in place, reading and writing only its lower triangle, i.e. A's upper one,
    # which ends up holding L^{-1}
    with blas_limit(client_threads()):
        L, info = lapack.dpotrf(A.T, lower=1, clean=0, overwrite_a=1)
        if info != 0:
            return None
        X, info = lapack.dtrtri(L, lower=1, overwrite_c=1)
    if info != 0:
        return None
    # column i of L^{-1} is row i of the C view, entries i..M0-1: one contiguous
    # dot per row, by numpy's own loop (einsum without BLAS), so the same sums
    # whatever the thread count, and no M0 x M0 temporaries (the banded triu
    # copies cost ~1 s of first touches at M0 = 10 000)
    Xc = X.T
    inv_diag = np.fromiter((np.einsum("j,j->", Xc[i, i:], Xc[i, i:]) for i in range(m)), dtype=np.float64, count=m)
    return 1.0 - lam * inv_diag


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


def _normalize_lams(
    lams: np.ndarray, lam_convention: str, spectrum: GramSpectrum | None, n_samples: int | None
) -> np.ndarray:
    check_choice(lam_convention, "lam_convention", LAM_CONVENTIONS)
    if lam_convention == "normalized":
        return lams
    n = n_samples if n_samples is not None or spectrum is None else spectrum.n_samples
    if n is None:
        raise ValueError(
            "n_samples is required with lam_convention='unnormalized' when a bare Gram matrix is given "
            "(lam is then divided by the number of rows N)"
        )
    if isinstance(n, float):  # a total weight (weighted statistics)
        if not n > 0:
            raise ValueError(f"the statistics' total weight must be positive, got {n}")
    else:
        check_positive_int(n, "n_samples")
    return lams / float(n)


def _diag_trace_q(
    stats_or_gram: FeatureStats | np.ndarray | GramSpectrum,
    lams: np.ndarray,
    scalar: bool,
    lam_convention: str,
    n_samples: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``Q_ii`` (shape ``(L, M0)``) and ``tr Q`` (shape ``(L,)``).

    One penalty on a Gram or statistics: the Cholesky path where it is as
    accurate; otherwise, and for a grid or a given spectrum, the spectral one.
    """
    if isinstance(stats_or_gram, GramSpectrum):
        lams = _normalize_lams(lams, lam_convention, stats_or_gram, n_samples)
        return stats_or_gram.diag_q(lams), stats_or_gram.trace_q(lams)
    G, n, new = _read_gram(stats_or_gram)
    lams = _normalize_lams(lams, lam_convention, None, n_samples if n_samples is not None else n)
    if scalar:
        diag = _cholesky_diag_q(G, float(lams[0]), overwrite=new)
        if diag is not None:
            return diag[None, :], np.array([diag.sum()])
        if new:  # the factorisation may have overwritten it
            G, _, _ = _read_gram(stats_or_gram)
    G = 0.5 * (G + G.T)
    spectrum = _spectrum(G, n)
    return spectrum.diag_q(lams), spectrum.trace_q(lams)


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
    A grid of penalties costs one eigendecomposition; one penalty on a Gram or
    statistics costs a Cholesky factorisation and a triangular inverse (see
    the module docstring for when the eigendecomposition is used instead).

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
    diag, trace = _diag_trace_q(stats_or_gram, lams, scalar, lam_convention, n_samples)
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

    Computed as in :func:`leverage_scores` (Cholesky for one penalty on a Gram
    or statistics), with which it agrees to the bit.

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
    _, trace = _diag_trace_q(stats_or_gram, lams, scalar, lam_convention, n_samples)
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
    check_fraction(delta, "delta", what="in (0, 1)")
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
    check_positive_int(bins, "bins")
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

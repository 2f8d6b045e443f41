"""From candidate statistics to a selection of features, without touching data.

A *selection* is ``(selected, scales)``: the selected feature ``j`` is
``scales[j] * z~_{selected[j]}``, a rescaled column of the candidate map
``z~`` (which already carries the candidate factor ``M0^{-1/2}``). Its kernel
is ``candidate_kernel.subset(selected, scales)`` and its statistics are
``candidate_stats.subset(selected, scales)``, exactly, at no extra pass.

Scales, with ``phi(x, w) = sqrt(M0) z~(x)`` the candidate feature without the
``M0^{-1/2}`` factor (e.g. ``sqrt(2) cos(w^T x + b)``):

- ``method="sample"`` (ELSS Algorithm 1; LKRF sampling): ``M`` indices drawn
  i.i.d. from ``q``; ``z_j = phi(x, w_{m_j}) / sqrt(M M0 q_{m_j})
  = z~_{m_j}(x) / sqrt(M q_{m_j})``, so ``scales[j] = 1 / sqrt(M q_{m_j})``
  and ``E[z(x)^T z(x')] = sum_i q_i z~_i(x) z~_i(x') / q_i = z~(x)^T z~(x')``:
  unbiased for the candidate kernel.
- ``method="top"`` (ELSS Algorithm 2, EERF, LKRF top): ``M`` distinct
  indices; ``z_j = phi(x, w_{i_j}) / sqrt(M) = sqrt(M0 / M) z~_{i_j}(x)``, the
  per-feature scale of an ordinary ``M``-feature map.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dxrf.core.validation import check_choice, check_positive_int, make_rng
from dxrf.stats.feature_stats import FeatureStats
from dxrf.selection.leverage import GramSpectrum, gram_spectrum, leverage_scores
from dxrf.selection.lkrf import lkrf_weights

__all__ = [
    "CRITERIA",
    "METHODS",
    "Selection",
    "target_cross",
    "energy_scores",
    "alignment_scores",
    "draw_features",
    "select_features",
]

CRITERIA = ("leverage", "energy", "alignment")
METHODS = ("sample", "top")


class Selection(NamedTuple):
    """A selection of candidate features.

    Attributes
    ----------
    selected : ndarray of int, shape (M,)
        Candidate indices (repeated for ``method="sample"``). For ``"top"``
        they are in decreasing order of weight, so ``selected[:m]`` is the
        top-``m`` selection; for ``"sample"`` they are in the order drawn, so a
        prefix is an i.i.d. draw of fewer features (rescale by ``sqrt(M/m)``).
    scales : ndarray of shape (M,)
        Factor of each selected candidate column ``z~``.
    weights : ndarray of shape (M0,)
        The distribution over candidates (leverage ``q^``, LKRF ``q``) or, for
        ``"energy"``, the normalised energies ``|s_i| / sum |s|``.
    """

    selected: np.ndarray
    scales: np.ndarray
    weights: np.ndarray


# -- supervised scores from the cross statistic ---------------------------------------


def target_cross(stats: FeatureStats, *, standardize: bool = False) -> np.ndarray:
    """``sum_n z~(x_n) y~_n^T`` from the statistics, shape ``(M0, k)``.

    With ``standardize=True`` the targets are standardised column by column,
    ``y~ = (y - mean) / std`` (population std, ``ddof=0``; a constant column
    is only centred: a std below ``1e-7 |mean|`` counts as zero), exactly from ``cross``, ``sum``, ``ysum`` and ``yy``:
    ``(cross - sum mean^T) / std``. No pass over the data is needed.
    """
    if not isinstance(stats, FeatureStats):
        raise TypeError(f"stats must be FeatureStats, got {type(stats).__name__}")
    if stats.cross is None:
        raise ValueError("y is required: these statistics were accumulated without targets")
    if stats.n == 0:
        raise ValueError("these statistics hold no rows")
    if not standardize:
        return stats.cross.copy()
    mean = stats.ysum / stats.n
    var = np.diag(stats.yy) / stats.n - mean**2
    std = np.sqrt(np.clip(var, 0.0, None))
    # E[y^2] - mean^2 cancels to about sqrt(eps) |mean| for a constant column
    std = np.where((std > 0) & (std > 1e-7 * np.abs(mean)), std, 1.0)
    return (stats.cross - np.outer(stats.sum, mean)) / std


def energy_scores(stats: FeatureStats, *, standardize: bool = False) -> np.ndarray:
    """EERF scores ``s_i = (1/N) sum_n y_n phi(x_n, w_i)``, shape ``(M0, k)``.

    ``phi = sqrt(M0) z~`` is the candidate feature without the ``M0^{-1/2}``
    factor. See :func:`target_cross` for ``standardize``.

    References
    ----------
    .. [1] S. Shahrampour, A. Beirami and V. Tarokh, "On data-dependent random
       features for improved generalization in supervised learning", AAAI 2018.
    """
    c = target_cross(stats, standardize=standardize)
    return np.sqrt(stats.n_components) * c / stats.n


def alignment_scores(stats: FeatureStats, *, standardize: bool = False) -> np.ndarray:
    """LKRF scores ``v_i = sum_k (sum_n y_nk phi(x_n, w_i))^2``, shape ``(M0,)``.

    ``phi = sqrt(M0) z~``; for one output ``v_i = (sum_n y_n phi(x_n, w_i))^2``.

    References
    ----------
    .. [1] A. Sinha and J. C. Duchi, "Learning kernels with random features",
       NeurIPS 2016.
    """
    c = target_cross(stats, standardize=standardize)
    return stats.n_components * np.sum(c**2, axis=1)


# -- drawing ------------------------------------------------------------------------------


def draw_features(
    weights: np.ndarray,
    n_components: int,
    method: str = "sample",
    random_state: object = None,
    *,
    tiebreak: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Select ``M`` candidates from a distribution and give their scales.

    Parameters
    ----------
    weights : ndarray of shape (M0,)
        Non-negative weights of the candidates (normalised here).
    n_components : int
        ``M``.
    method : {"sample", "top"}
        ``"sample"``: ``M`` i.i.d. draws from the weights, scale
        ``1 / sqrt(M q_i)``. ``"top"``: the ``M`` largest weights, scale
        ``sqrt(M0 / M)``; needs ``M <= M0``.
    random_state : int, Generator, RandomState or None
        For ``"sample"``.
    tiebreak : ndarray of shape (M0,), optional
        Secondary key for ``"top"`` among equal weights (larger first); ties
        left are broken by the lower index.

    Returns
    -------
    selected : ndarray of int, shape (M,)
    scales : ndarray of shape (M,)
        Factors of the candidate columns ``z~`` (see the module docstring).
    """
    q = np.asarray(weights, dtype=np.float64)
    if q.ndim != 1 or q.size == 0 or not np.isfinite(q).all() or np.any(q < 0) or q.sum() <= 0:
        raise ValueError("weights must be a non-empty 1-d array of non-negative numbers with a positive sum")
    m0 = q.size
    m = check_positive_int(n_components, "n_components")
    check_choice(method, "method", METHODS)
    q = q / q.sum()
    if method == "sample":
        rng = make_rng(random_state)
        selected = rng.choice(m0, size=m, replace=True, p=q).astype(np.intp)
        return selected, 1.0 / np.sqrt(m * q[selected])
    if m > m0:
        raise ValueError(f"n_components={m} exceeds n_candidates={m0}: method='top' keeps distinct candidates")
    if tiebreak is None:
        order = np.argsort(-q, kind="stable")
    else:
        tb = np.asarray(tiebreak, dtype=np.float64)
        if tb.shape != q.shape:
            raise ValueError(f"tiebreak has shape {tb.shape}; expected {q.shape}")
        order = np.lexsort((np.arange(m0), -tb, -q))
    selected = order[:m].astype(np.intp)
    return selected, np.full(m, np.sqrt(m0 / m))


def select_features(
    stats: FeatureStats | GramSpectrum,
    n_components: int,
    *,
    criterion: str = "leverage",
    method: str = "sample",
    lam: float = 1e-3,
    lam_convention: str = "normalized",
    rho: float = 1.0,
    standardize: bool = False,
    random_state: object = None,
    spectrum: GramSpectrum | None = None,
) -> Selection:
    """Select features from candidate statistics alone (no pass over data).

    Learners call this for many ``(M, lam)`` on one :class:`FeatureStats`;
    pass ``spectrum=gram_spectrum(stats)`` to decompose the Gram only once.
    Leverage weights always come from the eigendecomposition, so they are the
    same bits with or without ``spectrum``; for one ``lam`` without a spectrum,
    :func:`dxrf.selection.leverage_scores` (a Cholesky factorisation, several
    times cheaper) and :func:`draw_features` give the same selection up to
    rounding of the weights (this is what :class:`LeverageScoreSampler` does).

    Parameters
    ----------
    stats : FeatureStats or GramSpectrum
        Statistics of the candidate map (a spectrum suffices for
        ``criterion="leverage"``).
    n_components : int
        ``M``.
    criterion : {"leverage", "energy", "alignment"}, default="leverage"
        ELSS leverage scores ``q^`` (Shahrampour & Kolouri), EERF energies
        ``|s_i|`` (Shahrampour, Beirami & Tarokh; ``method="top"`` only), or
        the LKRF distribution ``q`` (Sinha & Duchi).
    method : {"sample", "top"}, default="sample"
        See :func:`draw_features`. For ``"alignment"`` with ``"top"``, ties of
        ``q`` (its zeros) are broken by the score ``v``, so the top-``M``
        selection is the top ``M`` by ``v``.
    lam : float, default=1e-3
        Leverage penalty (``criterion="leverage"``).
    lam_convention : {"normalized", "unnormalized"}, default="normalized"
        See :func:`dxrf.selection.leverage_scores`.
    rho : float, default=1.0
        Radius of the chi-square ball (``criterion="alignment"``).
    standardize : bool, default=False
        Standardise the targets in the cross statistic first (regression);
        see :func:`target_cross`.
    random_state : int, Generator, RandomState or None
        Seed of the i.i.d. draws of ``"sample"``.
    spectrum : GramSpectrum, optional
        Precomputed :func:`dxrf.selection.gram_spectrum` of ``stats``.

    Returns
    -------
    Selection
        ``(selected, scales, weights)``; apply with
        ``kernel.subset(selected, scales)`` and ``stats.subset(selected, scales)``.

    References
    ----------
    .. [1] S. Shahrampour and S. Kolouri, "On sampling random features from
       empirical leverage scores: implementation and theoretical guarantees",
       arXiv:1903.08329, 2019.
    .. [2] S. Shahrampour, A. Beirami and V. Tarokh, "On data-dependent random
       features for improved generalization in supervised learning", AAAI 2018.
    .. [3] A. Sinha and J. C. Duchi, "Learning kernels with random features",
       NeurIPS 2016.
    """
    check_choice(criterion, "criterion", CRITERIA)
    check_choice(method, "method", METHODS)
    check_positive_int(n_components, "n_components")
    tiebreak = None
    if criterion == "leverage":
        if np.ndim(lam) != 0:
            raise ValueError(f"lam must be a single positive number here, got {lam!r}")
        # always the spectral path, so that passing ``spectrum`` changes the cost, not the bits
        source = spectrum if spectrum is not None else gram_spectrum(stats)
        weights, _ = leverage_scores(source, lam, lam_convention=lam_convention)
    else:
        if not isinstance(stats, FeatureStats):
            raise TypeError(f"criterion={criterion!r} needs FeatureStats with targets, got {type(stats).__name__}")
        if criterion == "energy":
            if method != "top":
                raise ValueError(f"method must be 'top' for criterion='energy' (EERF keeps the top M), got {method!r}")
            energy = np.linalg.norm(energy_scores(stats, standardize=standardize), axis=1)
            total = energy.sum()
            weights = energy / total if total > 0 else np.full(energy.size, 1.0 / energy.size)
        else:
            v = alignment_scores(stats, standardize=standardize)
            weights = lkrf_weights(v, rho)
            tiebreak = v
    selected, scales = draw_features(weights, n_components, method, random_state, tiebreak=tiebreak)
    return Selection(selected, scales, weights)

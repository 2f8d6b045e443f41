"""Validation errors of every configuration of a search, from the statistics of one pass.

Pure dense algebra on :class:`~dxrf.stats.FeatureStats`: no data is read.
For one bandwidth and one fold:

- the training statistics are the fold's complement (k-fold: the total
  minus the fold) and the validation statistics the fold itself;
- one eigendecomposition of the candidates' Gram serves every ELSS ``lam``;
- each selection variant draws its largest ``M`` once; every smaller ``M`` is
  a prefix of it (top-M orders are nested; i.i.d. draws are sequential, so a
  prefix is the draw of fewer features, rescaled by ``sqrt(M_max / M)``);
- each ``M`` prefix's statistics are an exact sub-block, and one
  eigendecomposition of its covariance gives the whole ``alpha`` path and
  each penalty's exact validation MSE. These paths run on a pool of the
  client's threads, each on one BLAS thread: all cores, the same bits.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..learners.ridge_path import ridge_path
from ..selection.leverage import client_threads, gram_spectrum
from ..selection.select import select_features
from ..stats import FeatureStats
from .grid import SearchGrid, Variant

__all__ = ["GridErrors", "fold_pairs", "select_largest", "prefix", "r2_scores", "validate_grid"]


def fold_pairs(groups: tuple[FeatureStats, ...], kfold: bool) -> list[tuple[FeatureStats, FeatureStats]]:
    """``(train, validation)`` per fold from a pass's row groups.

    Hold-out: the groups are ``(train, validation)``. k-fold: the groups are
    the folds, and fold ``j`` trains on the total minus fold ``j``.
    """
    if not kfold:
        return [(groups[0], groups[1])]
    total = sum(groups)
    return [(total - g, g) for g in groups]


def select_largest(
    train: FeatureStats,
    variant: Variant,
    m_max: int,
    rng: np.random.Generator,
    *,
    task: str,
    spectrum: object = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Indices and scales of the ``m_max`` features a variant selects from ``train``.

    The same selection as the variant's selector fitted on ``train`` with the
    same generator (:class:`~dxrf.LeverageScoreSampler`, ...); ``"none"``
    keeps the first ``m_max`` candidates at the scale of an ``m_max``-feature map.
    """
    m0 = train.n_components
    if variant.criterion is None:
        return np.arange(m_max), np.full(m_max, np.sqrt(m0 / m_max))
    sel = select_features(
        spectrum if variant.criterion == "leverage" else train,
        m_max,
        criterion=variant.criterion,
        method=variant.method,
        lam=1e-3 if variant.lam is None else variant.lam,
        rho=1.0 if variant.rho is None else variant.rho,
        standardize=task == "regression",
        random_state=rng,
        spectrum=spectrum,
    )
    return sel.selected, sel.scales


def prefix(selected: np.ndarray, scales: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``m`` of a selection, rescaled as a selection of ``m`` features."""
    return selected[:m], scales[:m] * np.sqrt(selected.size / m)


def r2_scores(mse: np.ndarray, valid: FeatureStats) -> np.ndarray:
    """Coefficient of determination per penalty, averaged over outputs, from the MSE of shape ``(P, k)``.

    ``1 - MSE_k / Var_k`` with the validation rows' own variance (as
    scikit-learn's ``r2_score``: a constant output scores 1 when predicted
    exactly, else 0).
    """
    mean = valid.ysum / valid.n
    var = np.maximum(np.diag(valid.yy) / valid.n - mean**2, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(var > 0, 1.0 - mse / var, np.where(mse <= 1e-30, 1.0, 0.0))
    return r2.mean(axis=1)


@dataclasses.dataclass
class GridErrors:
    """What :func:`validate_grid` finds, per bandwidth.

    Attributes
    ----------
    mse, r2 : lists of ndarrays of shape (folds, variants, len(M), len(alpha))
    paths : dict or None
        With ``keep_paths``: ``paths[b, f, v, i]`` is ``(index, scales, coefs,
        intercepts)`` of bandwidth ``b``, fold ``f``, variant ``v`` and the
        ``i``-th M: the selection and every alpha's solution, shapes ``(P, M, k)``
        and ``(P, k)``, fitted on the fold's training rows.
    """

    mse: list
    r2: list
    paths: dict | None = None


def validate_grid(
    per_bandwidth: list[list[tuple[FeatureStats, FeatureStats]]],
    grid: SearchGrid,
    rng_for: object,
    *,
    task: str,
    fit_intercept: bool,
    rtol: float | None = None,
    keep_paths: bool = False,
) -> GridErrors:
    """Validation MSE and R^2 of every (fold, variant, M, alpha), for each bandwidth.

    Parameters
    ----------
    per_bandwidth : list, per bandwidth, of lists of (train, validation) FeatureStats of the candidates
    grid : SearchGrid
    rng_for : callable
        ``rng_for()`` returns a fresh generator for one selection (the one a
        selector fitted with the search's ``random_state`` would use).
    task : {"regression", "classification"}
        Supervised selections standardise a regression response.
    fit_intercept : bool
    rtol : float, optional
        Relative accuracy of the statistics: errors lost to their rounding
        are NaN (:func:`dxrf.learners.mse_from_stats`).
    keep_paths : bool, default=False
        Keep every selection and solution (to score them on data later).

    Returns
    -------
    GridErrors
        MSE averaged over outputs, and R^2 averaged over outputs (NaN where
        unknown), per bandwidth; the solutions with ``keep_paths``.

    Notes
    -----
    The ridge paths run on a pool of the client's threads, each on one BLAS
    thread (the same bits whatever runs beside it). A leverage spectrum uses
    all cores and runs alone: the pool is drained before each one.
    """
    m_max = int(grid.n_components[-1])
    needs_spectrum = any(v.criterion == "leverage" for v in grid.variants)
    shape = (grid.variants.__len__(), grid.n_components.size, grid.alphas.size)
    mse = [np.empty((len(pairs),) + shape) for pairs in per_bandwidth]
    r2 = [np.empty((len(pairs),) + shape) for pairs in per_bandwidth]

    paths: dict | None = {} if keep_paths else None

    def path_errors(b: int, f: int, v: int, i: int, train: FeatureStats, valid: FeatureStats, idx, sc) -> None:
        path = ridge_path(train.subset(idx, sc), grid.alphas, valid.subset(idx, sc), fit_intercept, rtol=rtol)
        mse[b][f, v, i] = path.validation_mse.mean(axis=1)
        r2[b][f, v, i] = r2_scores(path.validation_mse, valid)
        if paths is not None:
            paths[b, f, v, i] = (idx, sc, path.coefs, path.intercepts)

    pending: list = []
    with ThreadPoolExecutor(max_workers=client_threads()) as pool:
        for b, pairs in enumerate(per_bandwidth):
            for f, (train, valid) in enumerate(pairs):
                spectrum = None
                if needs_spectrum:
                    for t in pending:  # the spectrum takes every core, alone
                        t.result()
                    pending = []
                    spectrum = gram_spectrum(train)
                # the selections in order: they draw from generators
                for v, variant in enumerate(grid.variants):
                    selected, scales = select_largest(train, variant, m_max, rng_for(), task=task, spectrum=spectrum)
                    for i, m in enumerate(grid.n_components):
                        idx, sc = prefix(selected, scales, int(m))
                        pending.append(pool.submit(path_errors, b, f, v, i, train, valid, idx, sc))
        for t in pending:
            t.result()
    return GridErrors(mse, r2, paths)

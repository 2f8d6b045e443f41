"""Validation errors of every configuration of a search, from the statistics of one pass.

Pure dense algebra on :class:`~dxrf.stats.feature_stats.FeatureStats`: no data is read.
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

from dxrf.solvers.evidence import evidence_path
from dxrf.solvers.ridge_path import mse_from_stats, ridge_path
from dxrf.selection.leverage import client_threads, gram_spectrum
from dxrf.selection.select import select_features
from dxrf.stats.feature_stats import FeatureStats
from dxrf.search.grid import SearchGrid, Variant

__all__ = ["GridErrors", "candidate_prefix", "merge_errors", "fold_pairs", "select_largest", "prefix", "r2_scores", "r2_from_variance", "validate_grid"]


def fold_pairs(groups: tuple[FeatureStats, ...], kfold: bool) -> list[tuple[FeatureStats, FeatureStats]]:
    """``(train, validation)`` per fold from a pass's row groups.

    Hold-out: the groups are ``(train, validation)``. k-fold: the groups are
    the folds, and fold ``j`` trains on the total minus fold ``j``. One group
    (``cv="evidence"``): ``(all rows, None)``, scored by the evidence.
    """
    if len(groups) == 1:
        return [(groups[0], None)]
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
    ELSS without a ``spectrum`` takes the selector's path (a Cholesky factorisation).
    """
    m0 = train.n_components
    if variant.criterion is None:
        return np.arange(m_max), np.full(m_max, np.sqrt(m0 / m_max))
    sel = select_features(
        spectrum if variant.criterion == "leverage" and spectrum is not None else train,
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

    With the validation rows' own variance (:func:`r2_from_variance`).
    """
    mean = valid.ysum / valid.n
    return r2_from_variance(mse, np.maximum(np.diag(valid.yy) / valid.n - mean**2, 0.0))


def r2_from_variance(mse: np.ndarray, var: np.ndarray) -> np.ndarray:
    """``1 - MSE_k / Var_k`` averaged over the outputs ``k`` of ``mse`` (P, k) with the rows' variance ``var`` (k,).

    As scikit-learn's ``r2_score``: a constant output scores 1 when predicted
    exactly, else 0.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(var > 0, 1.0 - mse / var, np.where(mse <= 1e-30, 1.0, 0.0))
    return r2.mean(axis=1)


def candidate_prefix(stats: FeatureStats, p: int) -> FeatureStats:
    """Statistics of the first ``p`` candidates as a ``p``-candidate map (each at scale ``sqrt(M0/p)``)."""
    m0 = stats.n_components
    return stats if p == m0 else stats.subset(np.arange(p), np.full(p, np.sqrt(m0 / p)))


@dataclasses.dataclass
class GridErrors:
    """What :func:`validate_grid` finds, per bandwidth.

    Attributes
    ----------
    mse, r2 : lists of ndarrays of shape (folds, variants, len(M), len(alpha))
        With ``cv="evidence"`` (one fold, no validation rows) ``mse`` is NaN
        and ``r2`` holds the log evidence, the score the search maximises.
    train_mse, train_r2 : lists of such arrays, or None
        The same on each fold's training rows (with ``train_scores``).
    paths : dict or None
        With ``keep_paths``: ``paths[b, f, v, i]`` is ``(index, scales, coefs,
        intercepts)`` of bandwidth ``b``, fold ``f``, variant ``v`` and the
        ``i``-th M: the selection and every alpha's solution, shapes ``(P, M, k)``
        and ``(P, k)``, fitted on the fold's training rows.
    """

    mse: list
    r2: list
    paths: dict | None = None
    train_mse: list | None = None
    train_r2: list | None = None


def merge_errors(parts: list, grid: SearchGrid, n_bandwidths: int) -> GridErrors:
    """One :class:`GridErrors` of the whole grid from searches of parts of it; NaN where nothing was searched.

    ``parts`` holds ``(errors, bandwidths, variants)``: what :func:`validate_grid`
    found for those bandwidths and variants (positions in the whole grid).
    """
    first = parts[0][0]
    folds = first.mse[0].shape[0]
    shape = (folds, len(grid.variants), grid.n_components.size, grid.alphas.size)
    names = ["mse", "r2"] + (["train_mse", "train_r2"] if first.train_mse is not None else [])
    out = {n: [np.full(shape, np.nan) for _ in range(n_bandwidths)] for n in names}
    paths = {} if first.paths is not None else None
    for errors, bands, variants in parts:
        for n in names:
            for j, b in enumerate(bands):
                out[n][b][:, variants] = getattr(errors, n)[j]
        if paths is not None:
            paths.update({(bands[b], f, variants[v], i): path for (b, f, v, i), path in errors.paths.items()})
    return GridErrors(out["mse"], out["r2"], paths, out.get("train_mse"), out.get("train_r2"))


def validate_grid(
    per_bandwidth: list[list[tuple[FeatureStats, FeatureStats]]],
    grid: SearchGrid,
    rng_for: object,
    *,
    task: str,
    fit_intercept: bool,
    rtol: float | None = None,
    keep_paths: bool = False,
    leverage_rows: str = "train",
    train_scores: bool = False,
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
    leverage_rows : {"train", "all"}, default="train"
        Whose Gram the ELSS leverage scores come from: each fold's training
        rows, or every row (training and validation: the inputs only, so no
        validation target is seen; one spectrum per bandwidth and pool).
    train_scores : bool, default=False
        Also the MSE and R^2 on each fold's training rows (from statistics).

    Returns
    -------
    GridErrors
        MSE averaged over outputs, and R^2 averaged over outputs (NaN where
        unknown), per bandwidth; the solutions with ``keep_paths``.

    Notes
    -----
    The ridge paths run on a pool of the client's threads, each on one BLAS
    thread (the same bits whatever runs beside it). A leverage spectrum uses
    all cores and runs alone: the pool is drained before each one. With a
    ``candidate_ratio`` each M selects among its own prefix of the candidates
    (:meth:`SearchGrid.pools`), so each has its own spectrum.
    """
    needs_spectrum = any(v.criterion == "leverage" for v in grid.variants)
    m0 = grid.n_candidates
    shape = (grid.variants.__len__(), grid.n_components.size, grid.alphas.size)

    def empty() -> list:
        return [np.empty((len(pairs),) + shape) for pairs in per_bandwidth]

    mse, r2 = empty(), empty()
    train_mse, train_r2 = (empty(), empty()) if train_scores else (None, None)
    paths: dict | None = {} if keep_paths else None

    def path_errors(b: int, f: int, v: int, i: int, train: FeatureStats, valid: FeatureStats | None, idx, sc) -> None:
        sub = train.subset(idx, sc)
        if valid is None:
            # cv="evidence": no validation rows; the score is the log evidence (summed over outputs).
            # A penalty whose fit is lost to the statistics' rounding (huge coefficients: the
            # training MSE's rounding bound, as for validation errors) is never chosen: the
            # statistics cannot tell its evidence either
            mse[b][f, v, i] = np.nan
            found = evidence_path(sub, grid.alphas, fit_intercept, rtol=rtol)
            r2[b][f, v, i] = found.log_evidence.sum(axis=1)
            path = found.ridge
        else:
            path = ridge_path(sub, grid.alphas, valid.subset(idx, sc), fit_intercept, rtol=rtol)
            mse[b][f, v, i] = path.validation_mse.mean(axis=1)
            r2[b][f, v, i] = r2_scores(path.validation_mse, valid)
        if train_scores:
            fitted = mse_from_stats(sub, path.coefs, path.intercepts, rtol=rtol)
            train_mse[b][f, v, i] = fitted.mean(axis=1)
            train_r2[b][f, v, i] = r2_scores(fitted, train)
        if paths is not None:
            paths[b, f, v, i] = (idx, sc, path.coefs, path.intercepts)

    pending: list = []

    def spectrum_of(stats: FeatureStats) -> object:
        nonlocal pending
        for t in pending:  # the spectrum takes every core, alone
            t.result()
        pending = []
        return gram_spectrum(stats)

    with ThreadPoolExecutor(max_workers=client_threads()) as pool:
        for b, pairs in enumerate(per_bandwidth):
            shared: dict[int, object] = {}  # leverage_rows="all": one spectrum per pool, for every fold
            total = None
            if needs_spectrum and leverage_rows == "all":
                total = pairs[0][0] if pairs[0][1] is None else pairs[0][0] + pairs[0][1]
            for f, (train, valid) in enumerate(pairs):
                for p, positions in grid.pools():
                    train_p = candidate_prefix(train, p)
                    up = np.sqrt(m0 / p)  # a prefix candidate's scale on the M0-candidate map
                    spectrum = None
                    if needs_spectrum and total is None:
                        spectrum = spectrum_of(train_p)
                    elif needs_spectrum:
                        if p not in shared:
                            shared[p] = spectrum_of(candidate_prefix(total, p))
                        spectrum = shared[p]
                    m_top = int(grid.n_components[positions[-1]])
                    # the selections in order: they draw from generators
                    for v, variant in enumerate(grid.variants):
                        selected, scales = select_largest(train_p, variant, m_top, rng_for(), task=task,
                                                          spectrum=spectrum)
                        for i in positions:
                            idx, sc = prefix(selected, scales * up, int(grid.n_components[i]))
                            pending.append(pool.submit(path_errors, b, f, v, i, train, valid, idx, sc))
        for t in pending:
            t.result()
    return GridErrors(mse, r2, paths, train_mse, train_r2)

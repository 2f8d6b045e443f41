"""The search's refit: the chosen configuration's features, made again from all rows' statistics (no pass)."""

from __future__ import annotations

import numpy as np

from dxrf.features.maps import RandomFourierFeatures
from dxrf.features.nystroem import NystroemFeatures
from dxrf.search.evaluate import candidate_prefix, select_largest
from dxrf.search.grid import Variant
from dxrf.search.landmarks import Whitened
from dxrf.search.settings import SearchSettings
from dxrf.selection.selectors import EnergyScoreSelector, KernelAlignmentSelector, LeverageScoreSampler
from dxrf.solvers.ridge_path import mse_from_stats, ridge_path, solve_ridge
from dxrf.stats.feature_stats import FeatureStats

__all__ = ["candidate_map", "landmark_prefix_map", "refit_features", "ridge_refit"]


def candidate_map(s: SearchSettings, n_candidates: int, bandwidth: float | str, seed: int | None) -> RandomFourierFeatures:
    """The map of a search's ``n_candidates`` random Fourier candidates at one bandwidth."""
    return RandomFourierFeatures(
        n_candidates, kernel=s.kernel, bandwidth=bandwidth,
        sampling=s.sampling if not s.nystroem else "iid",  # Nystroem: only the median probe
        dtype=s.dtype, random_state=seed,
    )


def _selector(s: SearchSettings, variant: Variant, m: int, m0: int, bandwidth: float, seed: int) -> object:
    kw = {"n_candidates": m0, "base": candidate_map(s, m0, bandwidth, None), "random_state": seed}
    if variant.criterion == "leverage":
        return LeverageScoreSampler(m, lam=variant.lam, method=variant.method, **kw)
    if variant.criterion == "energy":
        return EnergyScoreSelector(m, **kw)
    return KernelAlignmentSelector(m, rho=variant.rho, method=variant.method, **kw)


def refit_features(
    s: SearchSettings, params: dict, bandwidth: float, groups: tuple[FeatureStats, ...], drawn: object, seed: int,
    rng_for: object, classes: np.ndarray | None, whitened: Whitened | None = None,
) -> tuple[object, object, FeatureStats]:
    """The chosen features, their kernel and their statistics over all rows, from the candidates' row ``groups``.

    ``drawn`` is the chosen bandwidth's candidate map, or for Nyström the
    ``(rows, landmarks)`` of the uniform race; ``whitened`` (Nyström only) the
    validated map of the chosen landmarks and its whitened statistics over
    all rows. Returns ``(features_, kernel_, stats)``.
    """
    variant = Variant(params["selection"], params.get("lam"), params.get("rho"))
    m, m0 = params["n_components"], s.grid.n_candidates
    if s.nystroem:
        # with the validation's own map of them: bitwise the one NystroemFeatures makes, at no second whitening
        features = landmark_prefix_map(s, drawn, m, bandwidth, seed, whitened.whitening, kernel=whitened.kernel)
        return features, features.kernel_, whitened.total
    total = sum(groups)
    if variant.criterion is not None and s.grid.candidate_ratio is None:
        selector = _selector(s, variant, m, m0, bandwidth, seed)
        selector.fit_from_stats(drawn, total, task=s.task, classes=classes)
        idx, scales = selector.selected_, selector.scales_
        return selector, selector.kernel_, total.subset(idx, scales)
    if variant.criterion is None:
        idx, scales = np.arange(m), np.full(m, np.sqrt(m0 / m))
    else:
        # the M's own prefix of ratio * M candidates, selected as in the search (no selector
        # takes a prefix of a candidate map): the candidate map is the features' base
        p = s.grid.candidate_ratio * m
        idx, scales = select_largest(candidate_prefix(total, p), variant, m, rng_for(), task=s.task)
        scales = scales * np.sqrt(m0 / p)
    return drawn, drawn.kernel_.subset(idx, scales), total.subset(idx, scales)


def landmark_prefix_map(s: SearchSettings, landmarks: tuple, m: int, bandwidth: object, seed: int, whitening: str,
                        *, kernel: object = None, defer_whitening: bool = False) -> NystroemFeatures:
    """The fitted Nyström map of the first ``m`` landmarks of the race ``landmarks = (rows, L)``.

    In ``NystroemFeatures``' own order (by row index). ``kernel``: its map
    already made (the search's validated one); ``defer_whitening``: a
    Cholesky whitening the conjugate gradient's factor sets afterwards.
    """
    rows, L = landmarks
    order = np.argsort(rows[:m], kind="stable")
    features = NystroemFeatures(m, kernel=s.kernel, bandwidth=bandwidth, whitening=whitening, dtype=s.dtype,
                                random_state=seed)
    if defer_whitening:
        features._defer_whitening = True
    features._set_landmarks(L[order], rows[order], bandwidth, 1, kernel=kernel)
    return features


def ridge_refit(stats: FeatureStats, alpha: float, fit_intercept: bool,
                features_dtype: object = np.float32) -> tuple[np.ndarray, np.ndarray, float]:
    """The ridge solution ``(coef (M, k), intercept (k,), training MSE)`` at ``alpha`` on ``stats``.

    Statistics of float32 features take the validated path's solver (an
    eigendecomposition, null directions dropped): at the tiny alphas they can
    favour, a Cholesky factorisation of the nearly singular covariance would
    give another model. Float64 features (Nyström's, whose unresolved
    directions the whitening already dropped) take the Cholesky solve: one
    ``M^3 / 3`` factorisation instead of an eigendecomposition about twenty
    times dearer (measured at M = 4000 on one thread: 0.6 s against 12 s).
    """
    if np.dtype(features_dtype) == np.float64 and alpha > 0:
        coef, intercept = solve_ridge(stats, alpha, fit_intercept)
    else:
        path = ridge_path(stats, np.array([alpha]), fit_intercept=fit_intercept)
        coef, intercept = path.coefs[0], path.intercepts[0]
    return coef, intercept, float(mse_from_stats(stats, coef, intercept).mean())

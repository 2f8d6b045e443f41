"""Nyström features in the model search: every bandwidth and number of landmarks from one pass.

The pass accumulates the statistics of the kernel values ``b(x) = k(x, L)``
of ``M0 = max(M)`` landmarks at every bandwidth (unwhitened: the landmarks
do not depend on the bandwidth, the whitening does). The landmarks are one
uniform race ordered by key, so the first ``M`` are a uniform sample of ``M``
rows for every ``M``. For each (bandwidth, M), one eigendecomposition of
``K_{L_M L_M}`` (a pivoted Cholesky factorisation from :data:`PIVOTED_MIN_LANDMARKS`
landmarks) gives the whitening ``T_M`` (:func:`dxrf.features.nystroem.landmark_kernel`),
and ``T_M^T S_M T_M`` of the first ``M`` landmarks' sub-block ``S_M`` is,
for every fold, exactly the statistics of :class:`~dxrf.NystroemFeatures` on
those landmarks. The ``alpha`` path is then the Fourier search's
(:func:`~dxrf.search.evaluate.validate_grid`).

The first ``M`` landmarks are taken in row order, NystroemFeatures' own, so
that their whitening is bitwise the one the refit's map computes: the refit
reuses it, and the whitened statistics of every row group summed, instead of
another ``M^3`` eigendecomposition and congruence (at M = 4000 on two cores,
about 9 s and 5 s of a stage's algebra).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dxrf.kernels.kernel import FeatureKernel
from dxrf.features.nystroem import landmark_kernel, landmark_kind
from dxrf.stats.feature_stats import FeatureStats
from dxrf.search.evaluate import GridErrors, fold_pairs, validate_grid
from dxrf.search.grid import SearchGrid

__all__ = ["Whitened", "PIVOTED_MIN_LANDMARKS", "search_whitening", "landmark_subset", "validate_landmarks"]


@dataclasses.dataclass
class Whitened:
    """A validated (bandwidth, M)'s Nyström map and its statistics over all rows, for the refit.

    ``kernel`` is ``landmark_kernel`` of the first ``M`` landmarks in row
    order; ``total`` the whitened statistics of every row group, summed.
    """

    kernel: FeatureKernel
    total: FeatureStats
    whitening: str = "eigh"


#: from this many landmarks the search whitens by a pivoted Cholesky factorisation instead of an
#: eigendecomposition (:func:`~dxrf.kernels.landmarks.inverse_pivoted`): at M = 8000 on two cores
#: 3 s against 44 s, the eigendecomposition then costing more than the pass. Below it (the first
#: stage of the growing search) the eigendecomposition's whitening is kept.
PIVOTED_MIN_LANDMARKS = 2048


def search_whitening(m: int) -> str:
    """The whitening the search gives a Nyström map of ``m`` landmarks."""
    return "pivoted" if m >= PIVOTED_MIN_LANDMARKS else "eigh"


def landmark_subset(
    groups: tuple[FeatureStats, ...], kernel: FeatureKernel, index: np.ndarray, whitening: str = "eigh"
) -> tuple[tuple[FeatureStats, ...], FeatureKernel]:
    """The Nyström map of the landmarks ``index`` of an unwhitened landmark kernel, and its statistics per row group.

    ``kernel`` is a ``landmark_kernel(..., whiten=False)`` whose statistics
    are ``groups``; the map whitens the landmarks ``W[:, index]`` (by
    ``whitening``, one factorisation), and each group's statistics are the
    sub-block of those landmarks, whitened.
    """
    index = np.asarray(index, dtype=np.int64)
    mapped = landmark_kernel(np.ascontiguousarray(kernel.W[:, index]), landmark_kind(kernel), kernel.effective_bandwidth,
                             whitening=whitening)
    T = mapped.transform_matrix
    return tuple(g.subset(index).transformed(T) for g in groups), mapped


def validate_landmarks(
    per_map: list[tuple[FeatureStats, ...]],
    kernels: list[FeatureKernel],
    grid: SearchGrid,
    kfold: bool,
    rng_for: object,
    rows: np.ndarray | None = None,
    **options: object,
) -> tuple[GridErrors, dict]:
    """Validation errors of every (bandwidth, M, alpha) of Nyström features, from one pass's row groups.

    Parameters
    ----------
    per_map : list of tuples of FeatureStats
        Per bandwidth, the row groups (hold-out pair, or folds) of the
        unwhitened landmark kernel ``kernels[b]``.
    kernels : list of FeatureKernel
        ``landmark_kernel(W, ..., whiten=False)`` per bandwidth, with the same landmarks.
    grid : SearchGrid
        Its only variant is ``"none"``; each M takes the first M landmarks.
    kfold : bool
    rng_for : callable
    rows : ndarray, optional
        The landmarks' row indices (in the kernels' order): each M's
        landmarks are taken in row order. None: in the kernels' order.
    **options
        :func:`validate_grid`'s keywords.

    Returns
    -------
    GridErrors
        As :func:`validate_grid`'s. A kept path ``paths[b, f, 0, i]`` holds
        ``(index, ones, T_M coefs, intercepts)``: ``index`` the first M
        landmarks' positions in row order, and the coefficients on their
        kernel values ``k(x, L)`` of ``kernels[b]``, so its models score on
        that kernel like the Fourier candidates' (``z(x) c = k(x, L_M) T_M c``).
    dict
        ``(b, i)`` to the :class:`Whitened` map of bandwidth ``b`` and the
        ``i``-th M, for the refit.
    """
    parts, whitened = [], {}
    for i, m in enumerate(int(m) for m in grid.n_components):
        index = np.arange(m) if rows is None else np.argsort(rows[:m], kind="stable")
        pairs, whitenings = [], []
        for b, (groups, kernel) in enumerate(zip(per_map, kernels)):
            stats, mapped = landmark_subset(groups, kernel, index, search_whitening(m))
            pairs.append(fold_pairs(stats, kfold))
            whitenings.append(mapped.transform_matrix)
            whitened[b, i] = Whitened(mapped, sum(stats), search_whitening(m))
        # the M-landmark map as its own M candidates: "none" keeps them all at scale 1
        one = dataclasses.replace(grid, n_components=grid.n_components[i : i + 1], n_candidates=m, candidate_ratio=None)
        found = validate_grid(pairs, one, rng_for, **options)
        if found.paths is not None:
            found.paths = {
                (b, f, v, i): (index, sc, whitenings[b] @ coefs, icpts)
                for (b, f, v, _), (_, sc, coefs, icpts) in found.paths.items()
            }
        parts.append(found)

    def joined(name: str) -> list | None:
        if getattr(parts[0], name) is None:
            return None
        return [np.concatenate([getattr(p, name)[b] for p in parts], axis=2) for b in range(len(kernels))]

    paths = None if parts[0].paths is None else {key: path for p in parts for key, path in p.paths.items()}
    return GridErrors(joined("mse"), joined("r2"), paths, joined("train_mse"), joined("train_r2")), whitened

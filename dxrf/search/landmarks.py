"""Nyström features in the model search: every bandwidth and number of landmarks from one pass.

The pass accumulates the statistics of the kernel values ``b(x) = k(x, L)``
of ``M0 = max(M)`` landmarks at every bandwidth (unwhitened: the landmarks
do not depend on the bandwidth, the whitening does). The landmarks are one
uniform race ordered by key, so the first ``M`` are a uniform sample of ``M``
rows for every ``M``. For each (bandwidth, M), one eigendecomposition of
``K_{L_M L_M}`` gives the whitening ``T_M`` (:func:`dxrf.features.nystroem.landmark_kernel`),
and ``T_M^T S_M T_M`` of the first ``M`` landmarks' sub-block ``S_M`` is,
for every fold, exactly the statistics of :class:`~dxrf.NystroemFeatures` on
those landmarks. The ``alpha`` path is then the Fourier search's
(:func:`~dxrf.search.evaluate.validate_grid`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dxrf.kernels.kernel import FeatureKernel
from dxrf.features.nystroem import landmark_kernel, landmark_kind
from dxrf.stats.feature_stats import FeatureStats
from dxrf.search.evaluate import GridErrors, fold_pairs, validate_grid
from dxrf.search.grid import SearchGrid

__all__ = ["landmark_subset", "validate_landmarks"]


def landmark_subset(
    groups: tuple[FeatureStats, ...], kernel: FeatureKernel, index: np.ndarray
) -> tuple[tuple[FeatureStats, ...], FeatureKernel]:
    """The Nyström map of the landmarks ``index`` of an unwhitened landmark kernel, and its statistics per row group.

    ``kernel`` is a ``landmark_kernel(..., whiten=False)`` whose statistics
    are ``groups``; the map whitens the landmarks ``W[:, index]`` (one
    eigendecomposition), and each group's statistics are the sub-block of
    those landmarks, whitened.
    """
    index = np.asarray(index, dtype=np.int64)
    mapped = landmark_kernel(np.ascontiguousarray(kernel.W[:, index]), landmark_kind(kernel), kernel.effective_bandwidth)
    T = mapped.transform_matrix
    return tuple(g.subset(index).transformed(T) for g in groups), mapped


def validate_landmarks(
    per_map: list[tuple[FeatureStats, ...]],
    kernels: list[FeatureKernel],
    grid: SearchGrid,
    kfold: bool,
    rng_for: object,
    **options: object,
) -> GridErrors:
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
    **options
        :func:`validate_grid`'s keywords.

    Returns
    -------
    GridErrors
        As :func:`validate_grid`'s. A kept path ``paths[b, f, 0, i]`` holds
        ``(arange(M), ones, T_M coefs, intercepts)``: its coefficients on the
        kernel values ``k(x, L)`` of ``kernels[b]``, so its models score on
        that kernel like the Fourier candidates' (``z(x) c = k(x, L_M) T_M c``).
    """
    parts = []
    for i, m in enumerate(int(m) for m in grid.n_components):
        index = np.arange(m)
        pairs, whitenings = [], []
        for groups, kernel in zip(per_map, kernels):
            stats, mapped = landmark_subset(groups, kernel, index)
            pairs.append(fold_pairs(stats, kfold))
            whitenings.append(mapped.transform_matrix)
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
    return GridErrors(joined("mse"), joined("r2"), paths, joined("train_mse"), joined("train_r2"))

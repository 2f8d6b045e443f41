"""The learners' one pass: fit the features (or a selector's candidates) and accumulate their statistics.

A learner hands :func:`features_pass` its (cloned, seeded) features; the
pass accumulates the statistics with the learner's targets and validation
split at once, a selector chooses from the training statistics, and the
selection's exact statistics (sub-blocks, no further pass) go to the solver.
"""

from __future__ import annotations

import contextlib
import dataclasses

import dask.array as da
import numpy as np

from dxrf.core.memory import check_statistics, checked_pass
from dxrf.core.validation import is_dask, is_integer
from dxrf.engine import hashed_split
from dxrf.kernels.kernel import FeatureKernel
from dxrf.features.maps import fit_map
from dxrf.solvers.landmark_solve import LandmarkStats, landmark_values, solves_in_landmark_basis
from dxrf.stats.feature_stats import FeatureStats
from dxrf.stats.accumulation import accumulate

__all__ = ["FeaturesPass", "is_selector", "fit_feature_map", "features_pass", "learns_from_y", "training_weight"]


def is_selector(obj: object) -> bool:
    """True for a dxrf selector (ELSS, EERF, LKRF), which chooses among candidates."""
    return hasattr(obj, "make_candidates") and hasattr(obj, "fit_from_stats")


@dataclasses.dataclass
class FeaturesPass:
    """The fitted features, their final kernel, the reads of X, and the training and validation statistics."""

    features: object
    kernel: FeatureKernel
    n_passes: int
    train: FeatureStats
    valid: FeatureStats | None


def fit_feature_map(features: object, X: object, sample_weight: object = None, y: object = None) -> tuple[FeatureKernel, int]:
    """Fit a feature map (no Gram, no pass); its kernel and the reads of X its fit made.

    ``sample_weight`` weighs a median bandwidth's rows, and with ``y`` a
    ``"ard"`` bandwidth's (:func:`~dxrf.features.maps.fit_map`).
    """
    fit_map(features, X, sample_weight, y)
    kernel = getattr(features, "kernel_", None)
    if not isinstance(kernel, FeatureKernel):
        raise TypeError(f"features must be a dxrf feature map with a fitted kernel_, got {type(features).__name__}")
    # reads of X by the map's fit: its own count (Nystroem landmarks), else a median bandwidth's sample
    return kernel, int(getattr(features, "n_passes_", isinstance(features.get_params().get("bandwidth"), str)))


def learns_from_y(features: object) -> bool:
    """Whether fitting ``features`` looks at the targets: a ``bandwidth="ard"`` map."""
    params = features.get_params(deep=False) if hasattr(features, "get_params") else {}
    return isinstance(params.get("bandwidth"), str) and params["bandwidth"] == "ard"


def training_weight(sample_weight: object, validation: object, seed: int, X: object) -> object:
    """Row weights that are 0 on the validation rows (a hashed fraction or a mask), else ``sample_weight``.

    What a map that learns from ``y`` (``"ard"``) fits on, so that no choice
    sees the validation rows; lazy for dask input, a few bytes a row.
    """
    if validation is None:
        return sample_weight
    n = int(X.shape[0])
    if hasattr(validation, "shape"):
        mask = validation
    elif is_dask(X):
        mask = da.map_blocks(_hashed_block, da.arange(n, chunks=X.chunks[0]), float(validation), int(seed), dtype=bool)
    else:
        mask = hashed_split(0, n, float(validation), int(seed))
    where = da.where if is_dask(mask) or is_dask(sample_weight) else np.where
    return where(mask, 0.0, 1.0 if sample_weight is None else sample_weight)


def _hashed_block(rows: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    # the validation rows of a block of global row indices (consecutive: a chunk of arange)
    start = int(rows[0]) if rows.size else 0
    return hashed_split(start, start + rows.size, fraction, seed)


def _draw(features: object, X: object, groups: int, sample_weight: object, single: bool, Y: object = None) -> tuple:
    """``(candidates or None, kernel, passes, once)``: the features drawn, their pass refused first if too large.

    ``once`` is the context the statistics' pass runs in: :func:`checked_pass`
    when it was refused here (or by the selector) already, so it is not checked again.
    """
    if is_selector(features):
        candidates = features.make_candidates(X, groups=groups, sample_weight=sample_weight)
        return candidates, candidates.kernel_, features.n_passes_, checked_pass
    m = features.get_params(deep=False).get("n_components")
    once = contextlib.nullcontext  # not refused yet: accumulate checks the pass
    if is_integer(m) and m > 0:
        # one penalty without validation is one Cholesky factorisation of the covariance, in
        # place: the client holds the Gram and that covariance (a path, PCA or SGD need more)
        check_statistics(
            int(m), "n_components", "use fewer features (the feature map's n_components), or more memory",
            groups=groups, X=X, algebra=1 if single else 4,
        )
        once = checked_pass
    kernel, passes = fit_feature_map(features, X, sample_weight, Y)
    if is_integer(m) and kernel.n_components > int(m):
        once = contextlib.nullcontext  # more features than checked for: accumulate checks them
    return None, kernel, passes, once


def features_pass(
    features: object, X: object, Y: object, *, validation: object = None, validation_seed: int = 0,
    task: str | None = None, classes: np.ndarray | None = None, sample_weight: object = None,
    single_penalty: bool = False,
) -> FeaturesPass:
    """Fit ``features`` and accumulate their statistics in one pass (see :meth:`RandomFeatureModel._features_pass`).

    ``validation`` is checked (None, a fraction or a mask); ``sample_weight`` checked.
    """
    single = single_penalty and validation is None
    fit_weight = training_weight(sample_weight, validation, validation_seed, X) if learns_from_y(features) else sample_weight
    candidates, kernel, passes, once = _draw(features, X, 1 if validation is None else 2, fit_weight, single, Y)
    split = dict(split=validation, split_seed=validation_seed, sample_weight=sample_weight)
    sample = features.row_sample(int(X.shape[0])) if hasattr(features, "row_sample") else None
    if sample is not None:
        # two-stage selection: the candidates over a hashed row sample (pass
        # 1), then only the selected features over all rows (pass 2)
        with once():
            first = accumulate(X, Y, kernel, subsample=sample[0], subsample_seed=sample[1], **split)
        features.fit_from_stats(candidates, first[0] if validation is not None else first, task=task, classes=classes)
        kernel = features.kernel_
        passes += 1
    in_landmarks = single and not is_selector(features) and solves_in_landmark_basis(kernel)
    with once():
        stats = accumulate(X, Y, landmark_values(kernel) if in_landmarks else kernel, **split)
    passes += 1
    if in_landmarks:
        stats = LandmarkStats(stats, kernel)
    train, valid = stats if validation is not None else (stats, None)
    if is_selector(features) and sample is None:
        features.fit_from_stats(candidates, train, task=task, classes=classes)
        idx, scales = features.selected_, features.scales_
        train = train.subset(idx, scales)
        valid = None if valid is None else valid.subset(idx, scales)
        kernel = features.kernel_
    return FeaturesPass(features, kernel, passes, train, valid)

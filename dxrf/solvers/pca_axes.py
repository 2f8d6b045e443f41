"""Principal axes of random features from one pass of statistics (:class:`dxrf.RandomFeaturePCA`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg

from dxrf.core.validation import is_integer
from dxrf.stats.feature_stats import FeatureStats

__all__ = ["PrincipalAxes", "principal_axes"]


@dataclasses.dataclass
class PrincipalAxes:
    """The leading axes of the features' covariance, in scikit-learn's PCA terms."""

    components: np.ndarray
    explained_variance: np.ndarray
    explained_variance_ratio: np.ndarray
    singular_values: np.ndarray
    mean: np.ndarray
    n_components: int
    n_samples: float


def principal_axes(stats: FeatureStats, n_components: int | float | None) -> PrincipalAxes:
    """The axes kept by ``n_components`` (a count, a fraction of the variance, or all) from ``stats``."""
    n, m = stats.n, stats.n_components
    limit = min(n, m)
    nc = n_components
    if is_integer(nc) and nc > limit:
        raise ValueError(f"n_components={nc} must be <= min(n_samples={n}, n_features_out={m}) = {limit}")
    cov = stats.covariance()
    cov = (cov + cov.T) / 2
    if nc is None or isinstance(nc, float):
        evals, evecs = scipy.linalg.eigh(cov, check_finite=False)
    else:
        evals, evecs = scipy.linalg.eigh(cov, subset_by_index=[m - nc, m - 1], check_finite=False)
    evals, evecs = np.maximum(evals[::-1], 0.0), evecs[:, ::-1]
    total = float(np.trace(cov))
    ratio = evals / total if total > 0 else np.zeros_like(evals)
    if nc is None:
        keep = limit
    elif isinstance(nc, float):
        keep = min(int(np.searchsorted(np.cumsum(ratio), nc, side="left")) + 1, limit)
    else:
        keep = int(nc)
    evals, evecs, ratio = evals[:keep], evecs[:, :keep], ratio[:keep]
    # scikit-learn's sign convention: the largest |entry| of each axis is positive
    big = np.argmax(np.abs(evecs), axis=0)
    evecs = evecs * np.sign(evecs[big, np.arange(keep)])
    ddof = max(n - 1, 1)
    return PrincipalAxes(np.ascontiguousarray(evecs.T), evals * n / ddof, ratio, np.sqrt(evals * n), stats.mean(), keep, n)

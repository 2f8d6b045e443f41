"""Bandwidths from a row sample: the sample itself, and per-column lengthscales learned on it (``"ard"``).

A ``"median"`` or ``"ard"`` bandwidth reads one uniform sample of rows (with
their weights and, for ``"ard"``, their targets) in one read of X; only
those rows reach the client. ``"ard"`` then maximises the exact GP evidence
of the sample (:func:`dxrf.kernels.gp.fit_ard`): see DESIGN.md, "Learned
lengthscales".
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from dxrf.core.labels import class_labels, encode_classes
from dxrf.core.validation import is_dask
from dxrf.kernels.gp import ARDResult, fit_ard
from dxrf.kernels.gp_isotropic import fit_isotropic

__all__ = ["row_sample", "ard_targets", "learn_lengthscale_kinds"]


def row_sample(
    X: np.ndarray | da.Array,
    rng: np.random.Generator,
    size: int,
    sample_weight: np.ndarray | da.Array | None = None,
    y: np.ndarray | da.Array | None = None,
    what: str = "bandwidth='median'",
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, float]:
    """A uniform sample of at most ``size`` rows, their weights and targets, and the weight of a row's own pairs.

    The rows are drawn without replacement by ``rng`` and read from dask
    input in one computation of the selected rows (with ``sample_weight``
    and ``y`` alongside). The last value is the ``self_fraction`` of
    :func:`dxrf.features.samplers.median_distance`: 1 when every row is
    taken, else ``(size - 1) / (N - 1)``, so that each pair's weight is
    unbiased for the pairs of all ``N`` rows. ``what`` names the use in the
    error for non-finite rows.
    """
    n = X.shape[0]
    if n <= size:
        sample, w, ys, fraction = X, sample_weight, y, 1.0
    else:
        idx = np.sort(rng.choice(n, size=size, replace=False))
        sample = X[idx]
        w = None if sample_weight is None else sample_weight[idx]
        ys = None if y is None else y[idx]
        fraction = (size - 1) / (n - 1)
    if is_dask(sample) or is_dask(w) or is_dask(ys):
        sample, w, ys = da.compute(sample, w, ys)
    sample = np.asarray(sample, dtype=np.float64)
    if not np.isfinite(sample).all():
        raise ValueError(f"X contains NaN or infinity (in the rows sampled for {what})")
    return sample, None if w is None else np.asarray(w, dtype=np.float64), None if ys is None else np.asarray(ys), fraction


def ard_targets(y: np.ndarray) -> np.ndarray:
    """Numeric targets of the GP evidence: numbers as they are; labels as +-1 class columns.

    Numeric ``y`` (1-d or 2-d) is taken as regression targets (a classifier
    passes its +-1 class columns already). Labels that are not numbers
    (strings, booleans, objects) become one +-1 column for two classes and
    one-hot +-1 columns for more: least-squares classification (Rasmussen &
    Williams 2006, section 6.5).
    """
    y = np.asarray(y)
    if y.dtype.kind in "iuf":
        return y.astype(np.float64, copy=False)
    if y.ndim != 1:
        raise ValueError(f"bandwidth='ard' takes numeric targets or 1-d class labels, got labels of shape {y.shape}")
    return encode_classes(y, class_labels(y, "bandwidth='ard'"))


def learn_lengthscale_kinds(
    X: np.ndarray | da.Array,
    y: object,
    sample_weight: np.ndarray | da.Array | None,
    rng: np.random.Generator,
    rows: int,
    restarts: int,
    owner: str,
    kinds: tuple[str, ...],
) -> dict[str, ARDResult]:
    """Lengthscales of maximum GP evidence of each of ``kinds`` from one sample of ``rows`` rows (one read of X).

    ``"ard"``: one per column (:func:`~dxrf.kernels.gp.fit_ard`); ``"evidence"``:
    one for all columns (:func:`~dxrf.kernels.gp_isotropic.fit_isotropic`). Both
    fit the same rows with the same seed, so each equals its fit alone.

    ``y`` is required (``owner`` names the map in the error); its sampled
    rows go through :func:`ard_targets`. Rows of weight 0 are dropped by
    the fits, so they may carry a validation split.
    """
    if y is None:
        raise ValueError(f"{owner}(bandwidth='ard') learns lengthscales from the targets: fit(X, y) needs y")
    if not is_dask(y):
        y = np.asarray(y)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}")
    sample, w, ys, _ = row_sample(X, rng, rows, sample_weight, y, what="bandwidth='ard'")
    seed = int(rng.integers(2**63))
    targets = ard_targets(ys)
    out = {}
    for kind in kinds:
        if kind == "evidence":
            out[kind] = fit_isotropic(sample, targets, w, random_state=seed)[0]
        elif kind == "ard":
            out[kind] = fit_ard(sample, targets, w, restarts=restarts, random_state=seed)
        else:
            raise ValueError(f"unknown lengthscale kind {kind!r}; expected 'ard' or 'evidence'")
    return out

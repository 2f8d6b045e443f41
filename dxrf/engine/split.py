"""Row groups of a pass: validation rows and folds by a hash of the global row index, or given per row.

Hashed groups cost no pass and do not depend on chunking; given fold labels
(:func:`fold_labels`) are a per-row column like a validation mask.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from dxrf.core.device import to_host
from dxrf.core.options import Options
from dxrf.engine.run import Pass, run_pass

__all__ = ["hashed_split", "hashed_folds", "block_groups", "fold_labels", "group_rows", "row_uniforms"]


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A bijective 64-bit mixer (Steele, Lea & Flood's SplitMix64 finaliser)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def row_uniforms(start: int, stop: int, seed: int) -> np.ndarray:
    """A uniform number in [0, 1) for each global row ``start .. stop - 1``, from ``(row, seed)`` alone."""
    idx = np.arange(start, stop, dtype=np.uint64)
    salt = _splitmix64(np.array([seed], dtype=np.uint64))[0]
    return (_splitmix64(idx ^ salt) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def hashed_split(start: int, stop: int, fraction: float, seed: int = 0) -> np.ndarray:
    """Validation mask of the global rows ``start .. stop - 1``.

    Row ``i`` is a validation row when a hash of ``(i, seed)`` falls below
    ``fraction``: the split depends only on the row index, never on chunking
    or on the number of workers, and costs no pass to build.
    """
    return row_uniforms(start, stop, seed) < fraction


def hashed_folds(start: int, stop: int, n_folds: int, seed: int = 0) -> np.ndarray:
    """Fold of each global row ``start .. stop - 1``, an integer in ``0 .. n_folds - 1``.

    The same hash as :func:`hashed_split`: row ``i`` is in fold
    ``floor(n_folds * u_i)``, so folds are independent of chunking and of
    the number of workers, and have about ``N / n_folds`` rows each.
    """
    u = row_uniforms(start, stop, seed)
    return np.minimum((u * n_folds).astype(np.intp), n_folds - 1)


def block_groups(
    start: int,
    n: int,
    column: object,
    *,
    fraction: float | None,
    folds: int | None,
    seed: int,
    sample: tuple[float, int] | None = None,
):
    """The row group of each row of a block: fold labels, a validation mask, or None (one group).

    Hashed folds (``folds``) or a hashed split (``fraction``) from the global
    row indices ``start .. start + n - 1``; else the block of a given
    ``column`` (brought to the host): a boolean validation mask, or integer
    fold labels (:func:`fold_labels`); else None.

    ``sample=(fraction, seed)`` keeps only a hashed subsample of the rows (the
    same hash as the split, with its own seed): the groups become integer
    labels (train 0 / validation 1 for a split) and rows left out get -1,
    which is in no group, so their features are never computed.
    """
    if folds is not None:
        groups = hashed_folds(start, start + n, folds, seed)
    elif fraction is not None:
        groups = hashed_split(start, start + n, fraction, seed)
    elif column is not None:
        groups = to_host(column).reshape(-1)
        groups = groups.astype(bool if groups.dtype == bool else np.intp, copy=False)
    else:
        groups = None
    if sample is None:
        return groups
    keep = hashed_split(start, start + n, sample[0], sample[1])
    labels = np.zeros(n, dtype=np.intp) if groups is None else groups.astype(np.intp, copy=False)
    return np.where(keep, labels, -1)


def _label_range(X, columns, rows, running):
    labels = to_host(X).reshape(-1)
    return (int(labels.min()), int(labels.max())) if labels.size else None


def _range_merge(*parts):
    parts = [p for p in parts if p is not None]
    return (min(p[0] for p in parts), max(p[1] for p in parts)) if parts else None


def fold_labels(labels: object, n_rows: int, *, local: bool, options: Options) -> tuple[np.ndarray | da.Array, int]:
    """Check per-row fold labels; return them (NumPy when ``local``) and the number of folds ``k``.

    ``labels`` is an integer array of shape ``(n_rows,)`` (NumPy or dask)
    giving each row's fold ``0 .. k - 1``, with ``k >= 2`` the largest label
    plus one. A fold may hold no rows (its statistics then have ``n = 0``, as a
    small hashed fold can); callers that need rows in every fold check the
    result. ``local`` (NumPy X) brings dask labels to the host; otherwise
    dask labels are checked by one pass of the engine over them (their
    smallest and largest label), not over X, run with ``options`` (those of
    the pass the labels serve).

    Raises
    ------
    TypeError
        Labels that are not an integer array.
    ValueError
        A shape other than ``(n_rows,)``, a negative label, or fewer than 2 folds.
    """
    if not (hasattr(labels, "shape") and hasattr(labels, "dtype")) or not np.issubdtype(labels.dtype, np.integer):
        kind = getattr(labels, "dtype", type(labels).__name__)
        raise TypeError(f"folds must be an integer k >= 2 or an integer array of per-row fold labels, got {kind}")
    if labels.ndim != 1 or labels.shape[0] != n_rows:
        raise ValueError(f"folds as labels must have shape ({n_rows},) (one per row of X), got {labels.shape}")
    if local and isinstance(labels, da.Array):
        labels = labels.compute()
    if isinstance(labels, da.Array):
        low, high = run_pass(Pass(block=_label_range, merge=_range_merge), labels.reshape(-1, 1), options=options)
    else:
        labels = np.asarray(labels)
        low, high = int(labels.min()), int(labels.max())
    if low < 0:
        raise ValueError(f"folds labels must be 0 .. k-1, got a negative label ({low})")
    if high < 1:
        raise ValueError("folds labels must name at least 2 folds (0 .. k-1 with k >= 2), got only fold 0")
    return labels, high + 1


def group_rows(groups: object, n_groups: int) -> list:
    """Row selectors of each group of :func:`block_groups`' result, in group order.

    None: every row (one group); a boolean mask: training rows (False), then
    validation rows (True); integer labels: the rows of group 0, 1, ...
    (a label of -1 is in no group).
    """
    if groups is None:
        return [slice(None)]
    if groups.dtype == bool:
        return [~groups, groups]
    return [groups == g for g in range(n_groups)]

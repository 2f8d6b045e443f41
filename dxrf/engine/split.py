"""Validation rows and folds chosen by a hash of the global row index: no pass, no dependence on chunking."""

from __future__ import annotations

import numpy as np

from .._device import to_host

__all__ = ["hashed_split", "hashed_folds", "block_groups", "group_rows", "row_uniforms"]


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
    row indices ``start .. start + n - 1``; else the block of a given boolean
    validation ``column`` (brought to the host); else None.

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
        groups = to_host(column).astype(bool, copy=False).reshape(-1)
    else:
        groups = None
    if sample is None:
        return groups
    keep = hashed_split(start, start + n, sample[0], sample[1])
    labels = np.zeros(n, dtype=np.intp) if groups is None else groups.astype(np.intp, copy=False)
    return np.where(keep, labels, -1)


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

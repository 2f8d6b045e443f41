"""The searches' ``cv`` parameter: hashed k-fold, a hold-out, or scikit-learn's splits as fold labels.

The one pass sums each fold's statistics apart and trains fold ``j`` on the
total minus fold ``j``. Explicit (train, test) splits fit that scheme exactly
when the test sets partition the rows and each train set is the complement
of its test set; they are then turned into per-row fold labels
(:func:`dxrf.engine.fold_labels`), a column of the pass like a mask.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping

import numpy as np

from dxrf.core.validation import ParameterTypeError, check_fraction, check_int, is_dask, is_integer

__all__ = ["check_cv", "split_labels"]

_WHAT = ("an integer k >= 2, a fraction in (0, 1), a boolean mask, a list of (train, test) index pairs, a CV splitter "
         "or 'evidence'")


def check_cv(cv: object, X: object, y: object = None) -> tuple[str, object]:
    """``("kfold", k)``, ``("kfold", labels)``, ``("fraction", f)`` or ``("mask", mask)`` from a ``cv`` parameter.

    Parameters
    ----------
    cv : int, float, bool array, iterable of (train, test) pairs, or splitter
        An object with ``split`` is called as ``cv.split(X, y)`` when X is
        NumPy; for dask X it gets only the number of rows (a zero-memory
        stand-in for X, no y), so it must be a splitter needing nothing more
        (``KFold``, ``LeaveOneOut``), or give a list of splits. The splits
        must suit the one pass (:func:`split_labels`).
    X : ndarray or dask array of shape (N, d)
        The checked data.
    y : ndarray, optional
        The targets as given to ``fit`` (class labels for a classifier),
        passed to a splitter with NumPy X.

    Returns
    -------
    kind : {"kfold", "fraction", "mask", "evidence"}
    value : int, ndarray of int, float, bool array or None
        For splits, each row's fold (the split whose test set holds it);
        None for ``cv="evidence"`` (every row trains; no validation rows).
    """
    n_rows = int(X.shape[0])
    if isinstance(cv, str) and cv == "evidence":
        return "evidence", None
    if is_integer(cv):
        k = check_int(cv, "cv", low=2, what=_WHAT)
        if k > n_rows >= 2:  # (fewer than 2 rows are refused by the data checks, in scikit-learn's words)
            # more folds than rows cannot be formed (and a huge k overflows the hash of the folds)
            raise ValueError(f"cv={k} folds for {n_rows} rows: cv must be an integer k in 2..{n_rows} (at most one fold per row)")
        return "kfold", k
    if isinstance(cv, numbers.Real) and not isinstance(cv, bool):
        return "fraction", check_fraction(cv, "cv", what=_WHAT)
    if hasattr(cv, "shape") and hasattr(cv, "dtype"):
        if np.dtype(cv.dtype) != np.dtype(bool) or cv.ndim != 1:
            raise ParameterTypeError(f"cv as an array must be a 1-d boolean mask (True = validation), got {cv.dtype} {cv.shape}")
        if cv.shape[0] != n_rows:
            raise ValueError(f"cv has {cv.shape[0]} rows but X has {n_rows}")
        return "mask", cv
    if hasattr(cv, "split"):
        return "kfold", split_labels(_splitter_splits(cv, X, y), n_rows)
    if isinstance(cv, Iterable) and not isinstance(cv, (str, bytes, Mapping)):
        return "kfold", split_labels(list(cv), n_rows)
    raise ParameterTypeError(f"cv must be {_WHAT}, got {cv!r}")


def _splitter_splits(cv: object, X: object, y: object) -> list:
    if is_dask(X):
        # only the number of rows: a read-only broadcast of one zero, no memory per row
        stand_in = np.broadcast_to(np.zeros((1, 1)), (int(X.shape[0]), 1))
        try:
            return list(cv.split(stand_in))
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"cv={cv!r}: with dask X a splitter gets only n_samples, and cv.split failed ({err}); give cv as "
                "a list of (train, test) index pairs (e.g. list(splitter.split(X_sample, y, groups)) on NumPy arrays "
                "of the same rows)"
            ) from err
    try:
        return list(cv.split(X, y))
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"cv={cv!r}: cv.split(X, y) failed ({err}); a splitter that needs groups must be given as "
            "cv=list(splitter.split(X, y, groups))"
        ) from err


def _indices(a: object, n_rows: int, j: int, which: str) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == bool:
        if a.shape != (n_rows,):
            raise ValueError(f"cv split {j}: the {which} mask has shape {a.shape}, expected ({n_rows},)")
        return np.flatnonzero(a)
    if a.size == 0:
        return np.zeros(0, dtype=np.intp)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"cv split {j}: the {which} indices must be a 1-d integer array, got {a.dtype} {a.shape}")
    if a.min() < 0 or a.max() >= n_rows:
        raise ValueError(f"cv split {j}: {which} indices must lie in 0..{n_rows - 1}, found {a.min()}..{a.max()}")
    return a.astype(np.intp, copy=False)


def split_labels(splits: list, n_rows: int) -> np.ndarray:
    """Each row's fold from (train, test) index pairs: the split whose test set holds the row.

    The one-pass search trains fold ``j`` on all rows minus fold ``j``, so
    the test sets must partition the rows and each train set must be the
    complement of its test set; at least 2 splits. Otherwise a ValueError
    naming ``cv``. Indices are integer arrays (or boolean masks of length
    ``n_rows``).
    """
    k = len(splits)
    if k < 2:
        raise ValueError(f"cv gives {k} (train, test) split{'s' if k != 1 else ''}: at least 2 are needed")
    dtype = np.int8 if k < 2**7 else np.int16 if k < 2**15 else np.int32  # labels travel with every chunk
    labels = np.full(n_rows, -1, dtype=dtype)
    trains = []
    for j, pair in enumerate(splits):
        try:
            train, test = pair
        except (TypeError, ValueError):
            raise ValueError(f"cv split {j} is not a (train, test) pair of index arrays") from None
        test = _indices(test, n_rows, j, "test")
        if test.size == 0:
            raise ValueError(f"cv split {j} has an empty test set")
        seen = labels[test]
        if (seen >= 0).any() or np.unique(test).size != test.size:
            r = test[seen >= 0][0] if (seen >= 0).any() else test[np.argmax(np.bincount(test))]
            raise ValueError(
                f"cv's test sets overlap (row {r} is tested twice): the one-pass search needs test sets that "
                "partition the rows (each row in exactly one test set), as KFold or LeaveOneGroupOut give"
            )
        labels[test] = j
        trains.append(_indices(train, n_rows, j, "train"))
    missing = np.flatnonzero(labels < 0)
    if missing.size:
        raise ValueError(
            f"cv's test sets leave {missing.size} row(s) untested (e.g. row {missing[0]}): the one-pass search "
            "needs test sets that partition the rows"
        )
    for j, train in enumerate(trains):
        n_test = int(np.count_nonzero(labels == j))
        if (labels[train] == j).any() or train.size != n_rows - n_test or np.unique(train).size != train.size:
            raise ValueError(
                f"cv split {j}: the train set is not the complement of the test set ({train.size} train rows, "
                f"{n_test} test rows of {n_rows}); the one-pass search trains each fold on all other rows"
            )
    return labels

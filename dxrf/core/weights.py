"""Per-row weights: validating ``sample_weight``, and ``class_weight`` multiplied into it.

Every learner, selector and the search validate their weights here. A weight
``w_n >= 0`` multiplies row ``n``'s terms in every sum of a pass, and every
mean divides by ``sum_n w_n`` (DESIGN section 2), so an integer weight is
exactly the row repeated that many times.
"""

from __future__ import annotations

import weakref

import dask.array as da
import numpy as np

from dxrf.core.device import to_host
from dxrf.core.validation import check_not_sparse, is_dask

__all__ = ["check_sample_weight", "check_class_weight", "class_sample_weight", "combined_weight"]


def _describe(values: np.ndarray, what: str, offset: int = 0) -> str:
    row = int(np.flatnonzero(values)[0]) + offset
    return f"{what} (first at row {row})"


def _check_weight_values(w: np.ndarray, name: str) -> None:
    if not np.isfinite(w).all():
        raise ValueError(f"{name} contains NaN or infinity; " + _describe(~np.isfinite(w), "give finite weights"))
    if (w < 0).any():
        raise ValueError(f"{name} contains negative weights; " + _describe(w < 0, "weights must be >= 0"))


#: weights this module returned, by id: our own float64 copies, so a second check of one is skipped
_CHECKED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def check_sample_weight(sample_weight: object, n: int, name: str = "sample_weight") -> np.ndarray | da.Array | None:
    """``sample_weight`` as float64 of shape ``(n,)`` (NumPy or dask), or None.

    Refused with a ``ValueError``: a length other than ``n`` (both named),
    NaN or infinity, a negative weight, or weights summing to zero. A dask
    array is checked by one small computation over the weights alone (never
    X); its chunks need not match X's (the pass aligns them).

    Parameters
    ----------
    sample_weight : array-like or dask array of shape (n,), or None
    n : int
        Rows of X.
    name : str
        How the weights are named in error messages.

    Returns
    -------
    ndarray or dask array of shape (n,), float64, or None
    """
    if sample_weight is None:
        return None
    if _CHECKED.get(id(sample_weight)) is sample_weight and sample_weight.shape == (n,):
        return sample_weight  # checked once already (the estimator's fit, then its pass): never twice
    check_not_sparse(sample_weight, name)
    if not is_dask(sample_weight):
        w = np.asarray(sample_weight)
        if w.ndim == 0:
            raise ValueError(f"{name} must be an array of one weight per row, got a scalar {sample_weight!r}")
    else:
        w = sample_weight
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional (one weight per row), got shape {w.shape}")
    if w.shape[0] != n:
        raise ValueError(f"{name} has {w.shape[0]} weights but X has {n} rows")
    if not np.issubdtype(w.dtype, np.number) or np.issubdtype(w.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold real numbers, got dtype {w.dtype}")
    w = w.astype(np.float64)
    if is_dask(w):
        finite, low, total = (float(to_host(v)) for v in da.compute(da.isfinite(w).all(), w.min(), w.sum()))
        if not finite or low < 0:
            # rare: find the row for the message
            _check_weight_values(np.asarray(to_host(w.compute())), name)
    else:
        _check_weight_values(w, name)
        total = w.sum()
    if not total > 0:
        raise ValueError(f"{name} sums to zero: at least one row needs a positive weight")
    if w is sample_weight and not is_dask(w):  # the caller's own mutable array: not ours to vouch for later
        return w
    _CHECKED[id(w)] = w
    return w


def check_class_weight(class_weight: object) -> object:
    """``class_weight`` as a parameter: None, ``"balanced"`` or a dict label -> weight >= 0 (checked in ``fit``)."""
    if class_weight is None or (isinstance(class_weight, str) and class_weight == "balanced"):
        return class_weight
    if not isinstance(class_weight, dict):
        raise ValueError(f'class_weight must be None, "balanced" or a dict label -> weight, got {class_weight!r}')
    for label, value in class_weight.items():
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"class_weight[{label!r}] must be a number, got {value!r}") from None
        if not np.isfinite(v) or v < 0:
            raise ValueError(f"class_weight[{label!r}] must be a finite number >= 0, got {value!r}")
    return class_weight


def class_sample_weight(class_weight: object, classes: np.ndarray, y: np.ndarray | da.Array) -> np.ndarray | da.Array | None:
    """Each row's weight from its class (scikit-learn's convention), or None without ``class_weight``.

    ``"balanced"``: class ``c`` weighs ``n_samples / (n_classes * count(c))``
    (unweighted counts); a dict: its weight per label, 1 for classes it does
    not name. A label of the dict that is not among ``classes`` is refused.
    """
    class_weight = check_class_weight(class_weight)
    if class_weight is None:
        return None
    if isinstance(class_weight, str):
        counts = _class_counts(classes, y)
        per_class = y.shape[0] / (classes.size * counts)
    else:
        known = set(classes.tolist())
        unknown = [label for label in class_weight if label not in known]
        if unknown:
            raise ValueError(
                f"class_weight names labels that are not classes of y: {unknown!r} (classes: {classes.tolist()!r})"
            )
        per_class = np.array([float(class_weight.get(c, 1.0)) for c in classes.tolist()])
    if is_dask(y):
        return y.map_blocks(lambda b: per_class[np.searchsorted(classes, b)], dtype=np.float64)
    return per_class[np.searchsorted(classes, np.asarray(y))]


def _class_counts(classes: np.ndarray, y: np.ndarray | da.Array) -> np.ndarray:
    if is_dask(y):
        codes = y.map_blocks(lambda b: np.searchsorted(classes, b), dtype=np.intp)
        return np.asarray(da.bincount(codes, minlength=classes.size).compute(), dtype=np.float64)
    return np.bincount(np.searchsorted(classes, np.asarray(y)), minlength=classes.size).astype(np.float64)


def combined_weight(
    sample_weight: np.ndarray | da.Array | None, class_weight: object, classes: np.ndarray, y: np.ndarray | da.Array
) -> np.ndarray | da.Array | None:
    """Checked ``sample_weight`` times the rows' class weights (either may be None), checked again."""
    per_row = class_sample_weight(class_weight, classes, y)
    if per_row is None:
        return sample_weight
    w = per_row if sample_weight is None else per_row * sample_weight
    return check_sample_weight(w, int(y.shape[0]), "sample_weight * class_weight")

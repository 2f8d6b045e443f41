"""Checks that every block of every pass gets, on the host or on the device."""

from __future__ import annotations

from typing import Any

import numpy as np

from dxrf.core.device import array_module
from dxrf.core.validation import check_finite_rows

__all__ = ["check_block", "check_columns"]


def check_block(X: Any, n_features: int, row_offset: int) -> Any:
    """Check one block of rows of X: numbers, 2-d with ``n_features`` columns, finite.

    NumPy and CuPy blocks are checked where they are; anything else becomes a
    NumPy array. ``row_offset`` is the block's first global row, so an error
    names the row in the whole array.
    """
    if array_module(X) is np:
        X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise TypeError(f"X must hold numbers (bool, integer or float), got dtype {X.dtype}")
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"X block has shape {X.shape}; the feature map expects {n_features} columns")
    check_finite_rows(X, "X", row_offset)
    return X


def check_columns(y: Any, n_rows: int, row_offset: int, name: str = "y") -> Any:
    """A block of numeric targets as float64 of shape ``(n_rows, k)``, checked finite (None passes)."""
    if y is None:
        return None
    xp = array_module(y)
    Y = xp.asarray(y)
    if Y.dtype == object:  # numbers in an object array (pandas, lists) are numbers
        try:
            Y = Y.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must hold numbers (bool, integer or float), got dtype object with other values") from None
    if Y.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers (bool, integer or float), got dtype {Y.dtype}")
    Y = Y.astype(np.float64, copy=False).reshape(n_rows, -1)
    check_finite_rows(Y, name, row_offset)
    return Y

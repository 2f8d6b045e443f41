"""Row labels for messages and the classes of a categorical target.

How a task is resolved from the target's dtype, how the classes are found
and ordered, and how labels become int32 class codes (-1 for a missing one).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np


def _row(v: Any) -> Any:
    """A row label for messages: a plain int when the index is integral."""
    return int(v) if isinstance(v, numbers.Integral) else v


def _sort_labels(values: Iterable[Any]) -> list:
    vals = list(values)
    try:
        return sorted(vals)
    except TypeError:  # mixed types: order by text, deterministic
        return sorted(vals, key=lambda v: (type(v).__name__, str(v)))


def _resolve_task(task: str, dtype: np.dtype, strict_integers: bool) -> str:
    if task != "auto":
        return task
    if dtype.kind in "bOUS" or (strict_integers and dtype.kind in "iu"):
        return "classification"
    return "regression"


def _unique_labels(blocks: Iterable[np.ndarray], max_levels: int, target: str) -> np.ndarray:
    seen: set = set()
    for b in blocks:
        u = np.unique(b)
        if u.dtype.kind == "f":
            u = u[~np.isnan(u)]
        seen.update(u.tolist())
        if len(seen) > max_levels:
            raise ValueError(f"target {target!r} has more than max_levels={max_levels} classes; use task='regression'")
    if not seen:
        raise ValueError(f"target {target!r} has no values")
    return np.asarray(_sort_labels(seen))


def _class_codes(y: np.ndarray, classes: np.ndarray, rows: np.ndarray, target: str) -> np.ndarray:
    """Codes of labels in sorted ``classes``; -1 for NaN; error for unknown labels."""
    codes = np.searchsorted(classes, y)
    codes = np.minimum(codes, len(classes) - 1)
    found = classes[codes] == y
    missing = np.zeros(len(y), bool) if y.dtype.kind not in "fc" else np.isnan(y)
    unknown = ~found & ~missing
    if unknown.any():
        i = int(np.flatnonzero(unknown)[0])
        raise ValueError(
            f"target {target!r}: value {y[i]!r} at row {_row(rows[i])} is not one of the classes {classes.tolist()}"
        )
    return np.where(found, codes, -1).astype(np.int32)

"""A warning for feature columns that look like a saved row index (``Unnamed: 0``, ``id``).

A CSV written by ``DataFrame.to_csv()`` starts with the row index; used as a
feature it lets a model "learn" the row order. Such a column is named like an
index and holds monotone integers; ingest then warns (one line) and suggests
dropping it.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import zarr

from dxrf.io.storage import resolve

__all__ = ["index_like_names", "warn_index_columns"]

_INDEX_NAME = re.compile(r"^(|id|index|unnamed: ?\d+|__index_level_\d+__)$", re.IGNORECASE)


def index_like_names(columns: Sequence[str]) -> list[str]:
    """The column names that name a row index (case-insensitive; also an empty name)."""
    return [c for c in columns if _INDEX_NAME.match(str(c).strip())]


def _monotone_integers(arr: zarr.Array, j: int, chunk_rows: int) -> bool:
    """Whether column ``j`` holds integers that only increase or only decrease (read chunk by chunk)."""
    last = None
    up = down = True
    for lo in range(0, arr.shape[0], chunk_rows):
        v = np.asarray(arr[lo : lo + chunk_rows, j], dtype=np.float64)
        if not np.all(v == np.round(v)):
            return False
        if last is not None:
            v = np.concatenate([[last], v])
        d = np.diff(v)
        up &= bool(np.all(d > 0))
        down &= bool(np.all(d < 0))
        if not (up or down):
            return False
        last = v[-1]
    return arr.shape[0] > 1


def warn_index_columns(
    path: str, columns: Sequence[str], chunk_rows: int, *, storage_options: Mapping[str, Any] | None = None
) -> list[str]:
    """Warn (``UserWarning``, one line each) about index-like feature columns of the group at ``path``.

    Only when a column is named like an index is anything read: that column,
    chunk by chunk (which decompresses the stored chunks of ``X`` once more).
    Returns the names warned about.
    """
    names = index_like_names(columns)
    if not names:
        return []
    X = zarr.open_group(resolve(path, storage_options).store(read_only=True), mode="r")["X"]
    found = []
    for name in names:
        if _monotone_integers(X, list(columns).index(name), chunk_rows):
            found.append(name)
            warnings.warn(
                f"column {name!r} holds monotone integers and looks like a saved row index, not a feature; "
                f"ingest again with --drop {name!r} (drop_columns=[{name!r}]) to leave it out",
                UserWarning,
                stacklevel=3,
            )
    return found

"""Row-wise maps (features, predictions, projections): eager for NumPy, lazy for dask.

The reductions of a pass live in :mod:`~dxrf.engine.run`; this is the other
half of the engine, for results with one row per input row. Read-only
arguments (kernels, coefficients) enter the graph once each, as delayed
values with content-based names, so their arrays reach each worker once
rather than once per task; they are never scattered, since a lazy result may
be computed long after the client that would have scattered them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np

from .._validation import check_dask_matrix, is_dask
from .ship import ship

__all__ = ["map_rows"]


def map_rows(
    X: np.ndarray | da.Array,
    fn: Callable[..., np.ndarray],
    shared: Sequence[Any],
    n_out: int,
    dtype: object,
    *,
    n_features: int | None = None,
    name: str | None = None,
) -> np.ndarray | da.Array:
    """``fn(X_b, *shared)`` for each row block: shape ``(n_b, n_out)`` of ``dtype``.

    NumPy input is mapped at once (``fn(X, *shared)``). A dask array is
    checked (2-d, ``n_features`` columns, one column chunk) and mapped lazily;
    ``name`` prefixes a deterministic key (the same inputs give the same keys).
    """
    if not is_dask(X):
        return fn(np.asarray(X), *shared)
    X = check_dask_matrix(X, n_features=n_features)
    # one graph input for all the arguments: one layer, one copy per worker
    handle = ship(tuple(shared), scatter=False)
    dt = np.dtype(dtype)
    key = None if name is None else f"{name}-{dask.base.tokenize(X, *shared, fn)}"
    return X.map_blocks(
        _apply, fn, handle, chunks=(X.chunks[0], (n_out,)), dtype=dt, meta=np.empty((0, 0), dtype=dt), name=key
    )


def _apply(block: np.ndarray, fn: Callable[..., np.ndarray], shared: tuple) -> np.ndarray:
    return fn(block, *shared)

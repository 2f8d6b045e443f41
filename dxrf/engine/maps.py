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

from dxrf.core.memory import check_allocation, check_task
from dxrf.core.validation import check_dask_matrix, check_finite_rows, is_dask
from dxrf.engine.ship import ship

__all__ = ["map_rows", "MAP_TILE_BYTES"]

#: a task maps its rows this many bytes of temporaries at a time (``work`` columns of float32
#: features and their float64 copy per row), so a wide map fits the workers whatever the chunks
#: (M = 20 000 features of a 50 000-row chunk would otherwise hold 11 GiB at once)
MAP_TILE_BYTES = 64 * 2**20


def map_rows(
    X: np.ndarray | da.Array,
    fn: Callable[..., np.ndarray],
    shared: Sequence[Any],
    n_out: int,
    dtype: object,
    *,
    n_features: int | None = None,
    name: str | None = None,
    work: int | None = None,
) -> np.ndarray | da.Array:
    """``fn(X_b, *shared)`` for each row block: shape ``(n_b, n_out)`` of ``dtype``.

    Every block is checked finite first (``ValueError`` naming the first
    row with a NaN or infinity, the message of every pass), in its own task
    for dask input. NumPy input is mapped at once (``fn(X, *shared)``). A dask array is
    checked (2-d, ``n_features`` columns, one column chunk) and mapped lazily;
    ``name`` prefixes a deterministic key (the same inputs give the same keys).
    ``work`` is the number of columns of ``fn``'s temporaries per row (the
    features of a prediction; default ``n_out``): a block whose result and
    temporaries cannot fit in memory is refused before it is mapped.
    """
    dt = np.dtype(dtype)
    n_out = int(n_out)
    width = int(n_out if work is None else work)
    # temporaries per row: float32 features and a float64 copy of them, held one tile at a time
    tile = max(1, MAP_TILE_BYTES // (12 * max(width, 1)))
    mapped = (fn, tile, n_out, dt)
    if not is_dask(X):
        X = np.asarray(X)
        n = int(X.shape[0]) if X.ndim else 0
        check_allocation(
            n * n_out * dt.itemsize + min(n, tile) * 12 * width, f"mapping {n} rows of NumPy input to {width} features",
            "give fewer rows at a time, or a dask array (mapped lazily, one row chunk per task)",
        )
        if X.ndim == 2:
            check_finite_rows(X, "X")
            return _tiled(X, shared, *mapped)
        return fn(X, *shared)
    X = check_dask_matrix(X, n_features=n_features)
    rows = int(max(X.chunks[0], default=0))
    check_task(
        rows * n_out * dt.itemsize + min(rows, tile) * 12 * width, f"mapping a row chunk of {rows} rows to {width} features",
        "rechunk X into fewer rows per chunk, or use fewer features",
    )
    # one graph input for all the arguments: one layer, one copy per worker
    handle = ship(tuple(shared), scatter=False)
    key = None if name is None else f"{name}-{dask.base.tokenize(X, *shared, fn)}"
    return X.map_blocks(
        _apply, mapped, handle, chunks=(X.chunks[0], (n_out,)), dtype=dt, meta=np.empty((0, 0), dtype=dt), name=key
    )


def _tiled(X: np.ndarray, shared: Sequence[Any], fn: Callable[..., np.ndarray], tile: int, n_out: int,
           dt: np.dtype) -> np.ndarray:
    """``fn`` over ``tile`` rows at a time into one result (``fn`` is row-wise: the rows are independent)."""
    n = X.shape[0]
    if n <= tile:
        return fn(X, *shared)
    out = np.empty((n, n_out), dtype=dt)
    for lo in range(0, n, tile):
        out[lo:lo + tile] = fn(X[lo:lo + tile], *shared)
    return out


def _apply(block: np.ndarray, mapped: tuple, shared: tuple, block_info: dict | None = None) -> np.ndarray:
    # every task checks its own rows: a NaN or infinity must fail the task with the
    # NumPy path's message, never become a prediction or a class label
    offset = 0 if not block_info else int(block_info[0]["array-location"][0][0])
    check_finite_rows(block, "X", offset)
    return _tiled(block, shared, *mapped)

"""The public :func:`write_zarr`: write a NumPy or dask matrix as a dxrf group.

The same writer as :func:`~dxrf.io.ingest`, fed one row block at a time (a
dask array is computed block by block), published atomically.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np

from dxrf.io.storage import atomic_group, check_any_destination, resolve
from dxrf.core.validation import check_not_sparse
from dxrf.io.checks import _NAN_POLICIES, _TASKS, _check_choice, _check_chunk_rows, _check_numeric_dtype, _feature_names
from dxrf.io.labels import _class_codes, _resolve_task
from dxrf.io.layout import _RESERVED_ATTRS, IngestReport, _report
from dxrf.io.writer import _ZarrWriter


def check_chunk_rows_and_destination(
    chunk_rows: object, dest: str | os.PathLike, overwrite: bool, storage_options: Mapping[str, Any] | None = None
) -> int:
    """Checks of a data writer before any work (a pass over ``y``, loading a data set): ``chunk_rows`` and ``dest``."""
    chunk_rows = _check_chunk_rows(chunk_rows)
    check_any_destination(dest, kind="data", overwrite=overwrite, storage_options=storage_options)
    return chunk_rows


def write_zarr(
    X: Any,
    dest: str | os.PathLike,
    *,
    y: Any = None,
    columns: Sequence[str] | None = None,
    chunk_rows: int = 50_000,
    attrs: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    target: str | None = None,
    classes: Sequence[Any] | None = None,
    task: str = "auto",
    nan_policy: str = "error",
    progress: bool | Callable[[str, int], Any] = False,
    storage_options: Mapping[str, Any] | None = None,
) -> IngestReport:
    """Write a NumPy or dask matrix (and target) as a dxrf zarr group.

    The layout, statistics and conventions are those of :func:`ingest` (one
    implementation). A dask array is computed and written one row block at a
    time, so it streams; the blocks are re-cut into zarr chunks of
    ``chunk_rows`` rows.

    Parameters
    ----------
    X : array-like or dask.array.Array, shape (N, d)
        Numeric features; stored as float32.
    dest : path or URL
        Directory of the zarr group to create, or an object-store URL
        (``s3://bucket/data.zarr``; see ``storage_options``).
    y : array-like or dask.array.Array, shape (N,), optional
        Target. Float values are a regression target (stored float32);
        integer, boolean or text labels a classification target (stored as
        int32 codes into ``classes``), unless ``task`` says otherwise.
    columns : list of str, optional
        Column names; default ``x0, x1, ...``.
    chunk_rows : int, default 50_000
        Rows per zarr chunk.
    attrs : dict, optional
        Extra JSON attributes (e.g. ``source``, ``description``). Keys the
        writer computes (``columns``, ``n_rows``, ``classes``, ...) may not be
        given.
    overwrite : bool, default False
        Replace an existing dxrf data group (or empty directory) at ``dest``;
        anything else there is never replaced (as in :func:`ingest`).
    target : str, optional
        Name of the target; default ``"y"``.
    classes : sequence, optional
        Class labels in code order; default: the sorted distinct labels of
        ``y`` (for a dask ``y`` one extra pass over ``y`` only).
    task : {"auto", "regression", "classification"}, default "auto"
    nan_policy : {"error", "drop"}, default "error"
        Rows with a NaN or infinite value: raise (naming the column and row)
        or drop them.
    progress : bool or callable, default False
        Print a row counter to stderr, or call ``progress(stage, rows)``.
    storage_options : dict, optional
        Options of the fsspec file system of a URL ``dest`` (e.g.
        ``{"endpoint_url": ..., "key": ..., "secret": ...}`` for s3).

    Returns
    -------
    IngestReport
    """
    chunk_rows = check_chunk_rows_and_destination(chunk_rows, dest, overwrite, storage_options)
    _check_choice(task, "task", _TASKS)
    _check_choice(nan_policy, "nan_policy", _NAN_POLICIES)
    check_not_sparse(X)
    check_not_sparse(y, "y")
    lazy = isinstance(X, da.Array)
    if not lazy:
        X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
    if any(isinstance(s, float) and math.isnan(s) for s in X.shape):
        raise ValueError("X has unknown chunk sizes; call X.compute_chunk_sizes() first")
    n, d = X.shape
    if n == 0 or d == 0:
        raise ValueError(f"X is empty (shape {X.shape})")
    _check_numeric_dtype(np.dtype(X.dtype), "X")
    cols = _feature_names(columns, d, "X")
    extra = dict(attrs or {})
    reserved = sorted(set(extra) & _RESERVED_ATTRS)
    if reserved:
        raise ValueError(f"attrs may not set {reserved}: the writer computes them")
    try:
        json.dumps(extra, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"attrs must be JSON-serialisable: {exc}") from None
    extra.setdefault("source", None)
    extra.setdefault("format", "array")

    resolved = None
    class_arr = None
    if y is not None:
        y_lazy = isinstance(y, da.Array)
        if not y_lazy:
            y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.reshape(-1)
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"y must have shape ({n},), got {y.shape}")
        resolved = _resolve_task(task, np.dtype(y.dtype), strict_integers=True)
        target = "y" if target is None else str(target)
        if resolved == "regression":
            _check_numeric_dtype(np.dtype(y.dtype), "y with task='regression'")
        else:
            if classes is not None:
                class_arr = np.asarray(list(classes))
                if len(np.unique(class_arr)) != len(class_arr):
                    raise ValueError(f"classes are not unique: {list(classes)}")
                order = np.argsort(class_arr, kind="stable")
            else:
                u = da.unique(y).compute() if y_lazy else np.unique(y)
                if u.dtype.kind == "f":
                    u = u[~np.isnan(u)]
                class_arr = u
                order = np.arange(len(u))
        if lazy and y_lazy:
            y = y.rechunk((X.chunks[0],))
    elif classes is not None:
        raise ValueError("classes given without y")

    def blocks() -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        if lazy:
            start = 0
            for i, rows in enumerate(X.chunks[0]):
                xb = X.blocks[i]
                if y is None:
                    yield np.asarray(xb.compute()), None
                elif isinstance(y, da.Array):
                    xv, yv = da.compute(xb, y.blocks[i])
                    yield np.asarray(xv), np.asarray(yv)
                else:
                    yield np.asarray(xb.compute()), y[start : start + rows]
                start += rows
        else:
            for i in range(0, n, chunk_rows):
                yield X[i : i + chunk_rows], None if y is None else y[i : i + chunk_rows]

    where = resolve(dest, storage_options, what="dest").url
    with atomic_group(dest, overwrite, kind="data", storage_options=storage_options) as tmp:
        writer = _ZarrWriter(
            tmp,
            cols,
            chunk_rows=chunk_rows,
            task=resolved,
            n_classes=0 if class_arr is None else len(class_arr),
            target=target,
            nan_policy=nan_policy,
            progress=progress,
        )
        start = 0
        for xb, yb in blocks():
            rows = np.arange(start, start + len(xb))
            start += len(xb)
            if yb is not None:
                if resolved == "classification":
                    # codes index the given class order: search the sorted
                    # classes, then map sorted positions back to that order
                    sorted_classes = class_arr[order]
                    codes = _class_codes(np.asarray(yb), sorted_classes, rows, target)
                    yb = np.where(codes >= 0, order[np.maximum(codes, 0)], -1).astype(np.int32)
                else:
                    yb = np.asarray(yb, dtype=np.float32)
            writer.append(xb, yb, rows=rows)
        if class_arr is not None:
            extra["classes"] = class_arr.tolist()
        out = writer.close(extra)
    return _report(where, out)

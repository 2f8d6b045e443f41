"""The public :func:`write_zarr`: write a NumPy or dask matrix as a dxrf group.

The same writer as :func:`~dxrf.io.ingest`, fed one row block at a time (a
dask array is computed block by block), published atomically.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
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


def _check_matrix(X: Any) -> Any:
    """``X`` as a 2-d NumPy or dask array of known, non-zero shape and numeric dtype."""
    if not isinstance(X, da.Array):
        X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
    if any(isinstance(s, float) and math.isnan(s) for s in X.shape):
        raise ValueError("X has unknown chunk sizes; call X.compute_chunk_sizes() first")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X is empty (shape {X.shape})")
    _check_numeric_dtype(np.dtype(X.dtype), "X")
    return X


def _extra_attrs(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The caller's attributes, checked (none the writer computes, JSON only), with the defaults."""
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
    return extra


@dataclasses.dataclass(eq=False)
class _Target:
    """A checked target: ``y`` (1-d, NumPy or dask), its task, name and, for classification,
    ``classes`` in code order and ``order``, the permutation that sorts them."""

    y: Any
    task: str
    name: str
    classes: np.ndarray | None = None
    order: np.ndarray | None = None

    def encode(self, yb: Any, rows: np.ndarray) -> np.ndarray:
        """A block of ``y`` as stored: int32 codes into ``classes`` (-1: unknown) or float32."""
        if self.task != "classification":
            return np.asarray(yb, dtype=np.float32)
        # codes index the given class order: search the sorted
        # classes, then map sorted positions back to that order
        sorted_classes = self.classes[self.order]
        codes = _class_codes(np.asarray(yb), sorted_classes, rows, self.name)
        return np.where(codes >= 0, self.order[np.maximum(codes, 0)], -1).astype(np.int32)


def _check_target(y: Any, X: Any, task: str, target: str | None, classes: Sequence[Any] | None) -> _Target:
    """``y`` checked against ``X``, its task resolved and its classes found (given, or its distinct labels)."""
    n = X.shape[0]
    y_lazy = isinstance(y, da.Array)
    if not y_lazy:
        y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.reshape(-1)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    out = _Target(y, _resolve_task(task, np.dtype(y.dtype), strict_integers=True), "y" if target is None else str(target))
    if out.task == "regression":
        _check_numeric_dtype(np.dtype(y.dtype), "y with task='regression'")
    elif classes is not None:
        out.classes = np.asarray(list(classes))
        if len(np.unique(out.classes)) != len(out.classes):
            raise ValueError(f"classes are not unique: {list(classes)}")
        out.order = np.argsort(out.classes, kind="stable")
    else:
        u = da.unique(y).compute() if y_lazy else np.unique(y)
        if u.dtype.kind == "f":
            u = u[~np.isnan(u)]
        out.classes, out.order = u, np.arange(len(u))
    if isinstance(X, da.Array) and y_lazy:
        out.y = y.rechunk((X.chunks[0],))
    return out


def _row_blocks(X: Any, y: Any, chunk_rows: int) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    """(X block, y block or None) in row order: a dask ``X`` block by block (``y`` with it), a NumPy one
    by ``chunk_rows`` rows."""
    if not isinstance(X, da.Array):
        for i in range(0, X.shape[0], chunk_rows):
            yield X[i : i + chunk_rows], None if y is None else y[i : i + chunk_rows]
        return
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
    X = _check_matrix(X)
    cols = _feature_names(columns, X.shape[1], "X")
    extra = _extra_attrs(attrs)
    if y is None and classes is not None:
        raise ValueError("classes given without y")
    tgt = None if y is None else _check_target(y, X, task, target, classes)
    where = resolve(dest, storage_options, what="dest").url
    with atomic_group(dest, overwrite, kind="data", storage_options=storage_options) as tmp:
        writer = _ZarrWriter(
            tmp,
            cols,
            chunk_rows=chunk_rows,
            task=None if tgt is None else tgt.task,
            n_classes=0 if tgt is None or tgt.classes is None else len(tgt.classes),
            target=target if tgt is None else tgt.name,
            nan_policy=nan_policy,
            progress=progress,
        )
        start = 0
        for xb, yb in _row_blocks(X, None if tgt is None else tgt.y, chunk_rows):
            rows = np.arange(start, start + len(xb))
            start += len(xb)
            writer.append(xb, None if yb is None else tgt.encode(yb, rows), rows=rows)
        if tgt is not None and tgt.classes is not None:
            extra["classes"] = tgt.classes.tolist()
        out = writer.close(extra)
    return _report(where, out)

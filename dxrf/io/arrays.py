"""Ingest of array sources: ``.npy``, ``.npz`` and LibSVM files.

One pipeline for the three formats: each yields feature blocks, target
blocks and source row numbers; the task and classes are resolved from the
target before the blocks are written.
"""

from __future__ import annotations

import dataclasses
import numbers
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dxrf.core.memory import check_allocation, ingest_chunk_bytes
from dxrf.core.validation import check_int
from dxrf.io.checks import _check_numeric_dtype, _feature_names, _select_columns
from dxrf.io.labels import _class_codes, _resolve_task, _unique_labels
from dxrf.io.readers.libsvm import _libsvm_blocks
from dxrf.io.readers.npy import _NpzMember, _read_row_blocks
from dxrf.io.writer import _ZarrWriter


def _check_width(columns: int, chunk_rows: int, itemsize: int, what: str) -> None:
    """Refuse, before anything is allocated, columns whose dense chunks cannot fit in memory."""
    check_allocation(
        ingest_chunk_bytes(columns, chunk_rows, itemsize),
        f"{what}, written in chunks of chunk_rows={chunk_rows} rows,",
        "check the source (a wrong or corrupt header or index?), or lower chunk_rows",
    )


@dataclasses.dataclass(eq=False)
class _ArraySource:
    """What the array pipeline writes from one source, whatever its format.

    ``raw_blocks()`` yields (X block of the kept ``columns``, raw target block
    or None, source row numbers); ``y_blocks()`` yields the raw target blocks
    alone (a pass for the task and classes). ``tname`` is None without a target.
    """

    columns: list[str]
    tname: str | None
    y_dtype: np.dtype | None
    raw_blocks: Callable[[], Iterator[tuple[np.ndarray, np.ndarray | None, np.ndarray]]]
    y_blocks: Callable[[], Iterator[np.ndarray]]


def _npy_target(target: str | int | None, names: list[str], n_cols: int) -> int | None:
    """The column index of ``target`` (a name or an index, negative ones counted from the end)."""
    if target is None:
        return None
    if isinstance(target, str):
        if target in names:
            return names.index(target)
        try:  # the command line gives an index as text: '2' or '-1' (a column name wins)
            target = int(target.strip())
        except ValueError:
            raise ValueError(f"target {target!r} is not a column name or index; names: {names}") from None
    if isinstance(target, numbers.Integral) and not isinstance(target, bool):
        if not -n_cols <= target < n_cols:
            raise ValueError(f"target index {target} out of range for {n_cols} columns")
        return int(target) % n_cols
    raise TypeError(f"target must be a column index or name, got {target!r}")


def _open_npy(path: Path) -> np.ndarray:
    """The array of a ``.npy`` file as a read-only memory map, with errors that name the file."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        if "object" not in str(exc):
            # numpy's words ("mmap length is greater than file size") do not say which file
            raise ValueError(f"cannot read {str(path)!r} as a .npy array (truncated or corrupt?): {exc}") from None
        raise TypeError(
            f"the array in {str(path)!r} holds Python objects (dtype object); only numeric arrays can be ingested"
        ) from None


def _npy_source(
    path: Path, target: str | int | None, names: Sequence[str] | None, drop_columns: list[str], n_rows: int | None, chunk_rows: int
) -> _ArraySource:
    """A ``.npy`` source: a 2-d array, the target one of its columns."""
    arr = _open_npy(path)
    if arr.ndim != 2:
        raise ValueError(f"{str(path)!r} holds a {arr.ndim}-d array; ingest needs a 2-d array")
    _check_numeric_dtype(arr.dtype, f"the array in {str(path)!r}")
    _check_width(arr.shape[1], chunk_rows, arr.dtype.itemsize, f"the {arr.shape[1]} columns of {str(path)!r}")
    all_names = _feature_names(names, arr.shape[1], "the array")
    t_idx = _npy_target(target, all_names, arr.shape[1])
    feat_idx = [j for j in range(arr.shape[1]) if j != t_idx]
    keep = [feat_idx[j] for j in _select_columns([all_names[j] for j in feat_idx], drop_columns)]
    n = arr.shape[0] if n_rows is None else min(n_rows, arr.shape[0])
    n_cols, dtype = arr.shape[1], arr.dtype
    all_cols = list(range(n_cols))
    # The memory map gave the layout; the rows are read with plain file
    # reads, because pages touched through a map stay resident (and count
    # in the process's RSS) until the map is closed.
    c_order = arr.flags.c_contiguous
    offset = int(arr.offset)
    del arr

    def npy_blocks() -> Iterator[np.ndarray]:
        if not c_order:  # Fortran order: rows are strided, slice the map
            fmap = np.load(path, mmap_mode="r", allow_pickle=False)
            for i in range(0, n, chunk_rows):
                yield np.asarray(fmap[i : min(i + chunk_rows, n)])
            return
        with open(path, "rb") as f:
            f.seek(offset)
            yield from _read_row_blocks(f, dtype, (n_cols,), chunk_rows, n, repr(str(path)))

    def raw_blocks() -> Iterator[tuple[np.ndarray, np.ndarray | None, np.ndarray]]:
        i = 0
        for b in npy_blocks():
            yb = None if t_idx is None else b[:, t_idx]
            yield (b if keep == all_cols else b[:, keep]), yb, np.arange(i, i + len(b))
            i += len(b)

    def y_blocks() -> Iterator[np.ndarray]:
        for b in npy_blocks():
            yield b[:, t_idx]

    return _ArraySource(
        columns=[all_names[j] for j in keep],
        tname=None if t_idx is None else all_names[t_idx],
        y_dtype=None if t_idx is None else dtype,
        raw_blocks=raw_blocks,
        y_blocks=y_blocks,
    )


def _npz_source(
    path: Path, x_key: str, y_key: str | None, names: Sequence[str] | None, drop_columns: list[str], n_rows: int | None,
    chunk_rows: int,
) -> _ArraySource:
    """A ``.npz`` source: the 2-d member ``x_key`` and the target member ``y_key`` (default ``y`` if present)."""
    xm = _NpzMember(path, x_key)
    if len(xm.shape) != 2:
        raise ValueError(f"array {x_key!r} in {str(path)!r} has shape {xm.shape}; ingest needs a 2-d array")
    _check_numeric_dtype(xm.dtype, f"array {x_key!r}")
    _check_width(xm.shape[1], chunk_rows, xm.dtype.itemsize, f"the {xm.shape[1]} columns of array {x_key!r}")
    with zipfile.ZipFile(path) as zf:
        has_y = "y.npy" in zf.namelist()
    ykey = y_key if y_key is not None else ("y" if has_y else None)
    ym = None if ykey is None else _NpzMember(path, ykey)
    if ym is not None:
        if len(ym.shape) not in (1, 2) or (len(ym.shape) == 2 and ym.shape[1] != 1):
            raise ValueError(f"array {ykey!r} must have shape (N,) or (N, 1), got {ym.shape}")
        if ym.shape[0] != xm.shape[0]:
            raise ValueError(f"{x_key!r} has {xm.shape[0]} rows but {ykey!r} has {ym.shape[0]}")
        _check_numeric_dtype(ym.dtype, f"array {ykey!r}")
    all_names = _feature_names(names, xm.shape[1], f"array {x_key!r}")
    keep = _select_columns(all_names, drop_columns)
    n = xm.shape[0] if n_rows is None else min(n_rows, xm.shape[0])

    def raw_blocks() -> Iterator[tuple[np.ndarray, np.ndarray | None, np.ndarray]]:
        ys = ym.blocks(chunk_rows, n) if ym is not None else None
        i = 0
        for b in xm.blocks(chunk_rows, n):
            yb = None if ys is None else next(ys).reshape(-1)
            yield b[:, keep], yb, np.arange(i, i + len(b))
            i += len(b)

    def y_blocks() -> Iterator[np.ndarray]:
        for b in ym.blocks(chunk_rows, n):
            yield b.reshape(-1)

    return _ArraySource(
        columns=[all_names[j] for j in keep],
        tname=ykey,
        y_dtype=None if ym is None else ym.dtype,
        raw_blocks=raw_blocks,
        y_blocks=y_blocks,
    )


def _libsvm_width(path: Path, chunk_rows: int, n_rows: int | None, zero_based: bool, n_features: int | None) -> int:
    """The number of dense columns of a LibSVM file: ``n_features``, or found by a first pass."""
    max_col = -1
    max_line = 0
    n = 0
    for y, nos, rows, cols, _ in _libsvm_blocks(path, chunk_rows, n_rows, zero_based):
        n += len(y)
        if cols.size:
            i = int(cols.argmax())
            if cols[i] > max_col:
                max_col, max_line = int(cols[i]), int(nos[rows[i]])
    if n == 0:
        raise ValueError(f"{str(path)!r} has no data lines")
    if n_features is None:
        d_file = max_col + 1
        if d_file == 0:
            raise ValueError(f"{str(path)!r} has no features; pass n_features=")
        _check_width(
            d_file, chunk_rows, 4,
            f"feature index {max_col + (0 if zero_based else 1)} at line {max_line} of {str(path)!r} "
            f"(it implies {d_file} dense columns)",
        )
        return d_file
    d_file = check_int(n_features, "n_features")
    _check_width(d_file, chunk_rows, 4, f"n_features={d_file}")
    if max_col >= d_file:
        raise ValueError(f"a feature index ({max_col + (0 if zero_based else 1)}) exceeds n_features={d_file}")
    return d_file


def _libsvm_source(
    path: Path, names: Sequence[str] | None, drop_columns: list[str], n_rows: int | None, chunk_rows: int,
    zero_based: bool, n_features: int | None,
) -> _ArraySource:
    """A LibSVM source: the label first on each line, then sparse features made dense block by block."""
    d_file = _libsvm_width(path, chunk_rows, n_rows, zero_based, n_features)
    all_names = _feature_names(names, d_file, "the file")
    keep = _select_columns(all_names, drop_columns)

    def raw_blocks() -> Iterator[tuple[np.ndarray, np.ndarray | None, np.ndarray]]:
        for y, nos, rows, cols, vals in _libsvm_blocks(path, chunk_rows, n_rows, zero_based):
            X = np.zeros((len(y), d_file), dtype=np.float32)
            X[rows, cols] = vals
            yield (X if len(keep) == d_file else X[:, keep]), y, nos

    def y_blocks() -> Iterator[np.ndarray]:
        for y, *_ in _libsvm_blocks(path, chunk_rows, n_rows, zero_based):
            yield y

    return _ArraySource(
        columns=[all_names[j] for j in keep], tname="y", y_dtype=np.dtype(np.float64), raw_blocks=raw_blocks, y_blocks=y_blocks
    )


def _target_mapper(target_map: Any) -> Callable[[np.ndarray], np.ndarray] | None:
    """``target_map`` (a dict or a callable) applied element-wise to a target block; None without one."""
    if target_map is None:
        return None
    if callable(target_map):
        mapper = np.vectorize(target_map, otypes=[object])
    else:
        mapper = np.vectorize(lambda v: target_map.get(v, v), otypes=[object])

    def mapped(yb: np.ndarray) -> np.ndarray:
        return np.asarray(mapper(yb).tolist())

    return mapped


def _resolve_target(
    source: _ArraySource, fmt: str, task: str, max_levels: int, mapped: Callable[[np.ndarray], np.ndarray] | None
) -> tuple[str | None, np.ndarray | None]:
    """The task of the source's target (None without one) and, for classification, its classes."""
    if source.tname is None:
        return None, None
    strict = fmt in ("npy", "npz")  # NumPy dtypes carry intent: integer labels are classes
    first_y = mapped(next(iter(source.y_blocks()))) if mapped is not None else None
    resolved = _resolve_task(task, first_y.dtype if first_y is not None else source.y_dtype, strict)
    if resolved == "classification":
        ys = source.y_blocks() if mapped is None else (mapped(b) for b in source.y_blocks())
        return resolved, _unique_labels(ys, max_levels, source.tname)
    if mapped is not None and first_y.dtype.kind not in "biuf":
        raise ValueError(f"target {source.tname!r} is not numeric after target_map but task='regression'")
    return resolved, None


def _ingest_arrays(
    fmt: str,
    path: Path,
    tmp: Path,
    *,
    target: str | int | None,
    task: str,
    names: Sequence[str] | None,
    drop_columns: list[str],
    x_key: str,
    y_key: str | None,
    zero_based: bool,
    n_features: int | None,
    n_rows: int | None,
    chunk_rows: int,
    nan_policy: str,
    max_levels: int,
    target_map: Any,
    progress: bool | Callable[[str, int], Any],
    attrs: dict[str, Any],
) -> dict[str, Any]:
    """Write a ``.npy``, ``.npz`` or LibSVM source into the group at ``tmp``.

    The source's blocks are read once to resolve the target's task (and its
    classes), then again to write; the arguments are those of
    :func:`~dxrf.io.ingest`, checked.

    Returns
    -------
    dict
        The attributes written (:meth:`~dxrf.io.writer._ZarrWriter.close`).
    """
    if fmt == "npy":
        source = _npy_source(path, target, names, drop_columns, n_rows, chunk_rows)
    elif fmt == "npz":
        if target is not None:
            raise ValueError("target= is not used for .npz files; name the target array with y_key=")
        source = _npz_source(path, x_key, y_key, names, drop_columns, n_rows, chunk_rows)
    else:  # libsvm
        if target is not None:
            raise ValueError("target= is not used for LibSVM files: the label is the first field of each line")
        source = _libsvm_source(path, names, drop_columns, n_rows, chunk_rows, zero_based, n_features)
    tname = source.tname
    mapped = _target_mapper(target_map) if tname is not None else None
    resolved, classes = _resolve_target(source, fmt, task, max_levels, mapped)
    writer = _ZarrWriter(
        tmp,
        source.columns,
        chunk_rows=chunk_rows,
        task=resolved,
        n_classes=0 if classes is None else len(classes),
        target=tname,
        nan_policy=nan_policy,
        progress=progress,
    )
    for Xb, yb, rows in source.raw_blocks():
        if yb is not None:
            if mapped is not None:
                yb = mapped(yb)
            if resolved == "classification":
                yb = _class_codes(yb, classes, rows, tname)
            else:
                yb = yb.astype(np.float32)
        writer.append(Xb, yb, rows=rows)
    attrs = dict(attrs)
    if classes is not None:
        attrs["classes"] = classes.tolist()
    return writer.close(attrs)

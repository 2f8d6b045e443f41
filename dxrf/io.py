"""Ingest tabular files into chunked zarr groups and open them as dask arrays.

Every data set that dxrf works on out of core lives in a *dxrf zarr group*
(zarr format 3), written by :func:`ingest` (from CSV, Parquet, NumPy or LibSVM
files) or :func:`write_zarr` (from NumPy or dask arrays):

======================  ===================================================
``X``                   float32, shape ``(N, d)``, chunks ``(chunk_rows, d)``
``y``                   float32 (regression) or int32 class codes, shape
                        ``(N,)``, chunks ``(chunk_rows,)``; absent without a
                        target
``x_mean``, ``x_std``   float64, shape ``(d,)``: column means and
                        population standard deviations
attributes              ``dxrf_format`` (= 1), ``columns``, ``target``,
                        ``task``, ``classes``, ``class_counts``, ``source``,
                        ``format``, ``n_rows``, ``n_dropped``, ``levels`` and
                        ``missing_level`` (tables),
                        ``chunk_rows`` and, for a numeric target, ``y_min``,
                        ``y_max``, ``y_mean``, ``y_std``
======================  ===================================================

Conventions
-----------
* The files are read in chunks of ``chunk_rows`` rows and each chunk is written
  as it comes, so a file larger than memory ingests with bounded memory. CSV
  and Parquet files are read twice: the first pass finds the categorical
  columns and collects their levels (the one-hot columns must be known before
  the first row is written), counts rows and finds missing values; the second
  pass encodes and writes. LibSVM files are read twice too (rows, features).
* The statistics are computed in the same streaming pass that writes, from the
  float32 values *as stored*, accumulated in float64 and merged across chunks
  with Chan's parallel update of (count, mean, M2). They therefore equal the
  float64 mean and population std of ``X[:]`` up to rounding. The std of a
  constant column is stored as 1.0, so that standardising never divides by
  zero (the standardised column is then all zeros).
* Row numbers in error messages are 0-based positions among the data rows of
  the source (a header line and ``skiprows`` are not counted).
* The destination is written into a temporary sibling directory
  ``<dest>.tmp-<random>`` and renamed into place at the end; on any error the
  temporary directory is removed, so nothing half-written is ever left at
  ``dest``. Destinations are local directories.
"""

from __future__ import annotations

import bz2
import contextlib
import dataclasses
import gzip
import json
import lzma
import math
import numbers
import os
import re
import sys
import warnings
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
import zarr

from ._files import DestinationExistsError
from ._files import atomic_directory as _atomic_directory

__all__ = [
    "DXRF_FORMAT",
    "DestinationExistsError",
    "IngestReport",
    "ZarrDataset",
    "default_compressor",
    "ingest",
    "open_zarr",
    "write_zarr",
]

#: Version of the on-disk layout, stored in the ``dxrf_format`` attribute.
DXRF_FORMAT = 1

_FORMATS = ("csv", "parquet", "npy", "npz", "libsvm")
_SUFFIX_FORMATS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".npy": "npy",
    ".npz": "npz",
    ".svm": "libsvm",
    ".libsvm": "libsvm",
    ".svmlight": "libsvm",
}
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz")
_NAN_POLICIES = ("error", "drop")
_TASKS = ("auto", "regression", "classification")
# Attributes the writer computes itself; user attributes may not replace them.
_RESERVED_ATTRS = frozenset(
    {
        "dxrf_format", "columns", "target", "task", "classes", "class_counts", "n_rows",
        "n_dropped", "chunk_rows", "y_min", "y_max", "y_mean", "y_std",
    }
)


def default_compressor() -> zarr.codecs.BloscCodec:
    """The codec of dxrf's zarr stores: Blosc lz4 with byte shuffle.

    Every pass reads all of X, so decoding speed is what matters: on float32
    data here it decodes an 18 MB chunk in ~12 ms against ~33 ms for zarr's
    default zstd, for about the same size (random floats hardly compress).
    """
    return zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")


# --------------------------------------------------------------------------- results


@dataclasses.dataclass
class IngestReport:
    """What :func:`ingest` or :func:`write_zarr` wrote.

    Attributes
    ----------
    path : str
        Absolute path of the zarr group.
    n_rows : int
        Rows written.
    n_columns : int
        Columns of ``X`` (after one-hot encoding).
    n_dropped : int
        Rows dropped by ``nan_policy="drop"``.
    columns : list of str
        Column names of ``X``.
    target : str or None
        Name of the target, None without one.
    classes : list or None
        Class labels in code order for a categorical target, else None.
    format : str or None
        Source format (``"csv"``, ``"parquet"``, ``"npy"``, ``"npz"``,
        ``"libsvm"`` or ``"array"``).
    """

    path: str
    n_rows: int
    n_columns: int
    n_dropped: int
    columns: list[str]
    target: str | None
    classes: list | None
    format: str | None = None

    def __str__(self) -> str:
        lines = [f"dxrf zarr group {self.path}"]
        src = f" from {self.format}" if self.format else ""
        lines.append(f"  {self.n_rows:,} rows x {self.n_columns:,} columns{src}, {self.n_dropped:,} rows dropped")
        shown = ", ".join(self.columns[:8]) + (", ..." if len(self.columns) > 8 else "")
        lines.append(f"  columns: {shown}")
        if self.target is None:
            lines.append("  no target")
        elif self.classes is not None:
            shown = ", ".join(map(str, self.classes[:10])) + (", ..." if len(self.classes) > 10 else "")
            lines.append(f"  target: {self.target!r}, {len(self.classes)} classes: {shown}")
        else:
            lines.append(f"  target: {self.target!r} (numeric)")
        return "\n".join(lines)


# --------------------------------------------------------------------------- statistics


class _Moments:
    """Running count, mean and M2 per column, merged with Chan's parallel formula.

    Blocks are converted to float64 before summing, so the result is the
    float64 statistic of the values given (the stored float32 values).
    """

    def __init__(self, d: int) -> None:
        self.n = 0
        self.mean = np.zeros(d)
        self.m2 = np.zeros(d)

    def update(self, block: np.ndarray) -> None:
        block = block.reshape(block.shape[0], -1)
        # float64 slices of ~8 MB keep the temporaries small for wide chunks
        step = max(1, (1 << 20) // max(block.shape[1], 1))
        for lo in range(0, block.shape[0], step):
            self._merge(block[lo : lo + step].astype(np.float64))

    def _merge(self, b: np.ndarray) -> None:
        nb = b.shape[0]
        mean_b = b.mean(axis=0)
        b -= mean_b
        b *= b
        m2_b = b.sum(axis=0)
        n = self.n + nb
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (nb / n)
        self.m2 = self.m2 + m2_b + delta**2 * (self.n * nb / n)
        self.n = n

    @property
    def std(self) -> np.ndarray:
        """Population std; exactly 0 for a constant column."""
        return np.sqrt(np.maximum(self.m2, 0.0) / max(self.n, 1))


def _safe_std(std: np.ndarray) -> np.ndarray:
    # A constant column has M2 exactly 0 (the float64 mean of equal float32
    # values is exact), so the test is exact; 1.0 avoids division by zero.
    return np.where(std > 0, std, 1.0)


# --------------------------------------------------------------------------- destination


# --------------------------------------------------------------------------- progress


class _Progress:
    """Row counter printed to stderr, or forwarded to a callable(stage, rows)."""

    def __init__(self, progress: bool | Callable[[str, int], Any], stage: str) -> None:
        self.progress = progress
        self.stage = stage
        self.rows = 0

    def update(self, rows: int) -> None:
        self.rows += rows
        if callable(self.progress):
            self.progress(self.stage, self.rows)
        elif self.progress:
            print(f"\r{self.stage}: {self.rows:,} rows", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.progress is True:
            print(file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- writer


def _json_value(v: Any) -> Any:
    """A JSON-ready Python scalar from a numpy or Python scalar."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"cannot store the non-finite value {v!r} in attributes")
    return v


class _ZarrWriter:
    """Append row blocks to the ``X``/``y`` arrays of a new dxrf group.

    Rows are buffered until a whole chunk is available, so every write covers
    whole chunks (no read-modify-write) whatever the incoming block sizes; the
    buffer never holds more than one chunk plus one incoming block. Statistics
    are accumulated from the float32 values as written.
    """

    def __init__(
        self,
        path: Path,
        columns: Sequence[str],
        *,
        chunk_rows: int,
        task: str | None,
        n_classes: int = 0,
        target: str | None = None,
        nan_policy: str = "error",
        progress: bool | Callable[[str, int], Any] = False,
    ) -> None:
        self.columns = list(columns)
        self.d = len(self.columns)
        self.chunk_rows = chunk_rows
        self.task = task
        self.n_classes = n_classes
        self.target = target
        self.nan_policy = nan_policy
        self.group = zarr.open_group(str(path), mode="w", zarr_format=3)
        self.X = self.group.create_array(
            "X",
            shape=(0, self.d),
            dtype="float32",
            chunks=(chunk_rows, self.d),
            compressors=default_compressor(),
            dimension_names=("row", "column"),
        )
        self.y = None
        if task is not None:
            self.y = self.group.create_array(
                "y",
                shape=(0,),
                dtype="float32" if task == "regression" else "int32",
                chunks=(chunk_rows,),
                compressors=default_compressor(),
                dimension_names=("row",),
            )
        self.x_moments = _Moments(self.d)
        self.y_moments = _Moments(1)
        self.y_min = math.inf
        self.y_max = -math.inf
        self.class_counts = np.zeros(n_classes, dtype=np.int64)
        self.n_written = 0
        self.n_seen = 0
        self.n_dropped = 0
        self._buf_x: list[np.ndarray] = []
        self._buf_y: list[np.ndarray] = []
        self._buf_n = 0
        self._progress = _Progress(progress, "writing")

    def _bad_message(self, X: np.ndarray, y: np.ndarray | None, rows: np.ndarray, i: int) -> str:
        bad_cols = np.flatnonzero(~np.isfinite(X[i]))
        if bad_cols.size:
            j = int(bad_cols[0])
            what = f"column {self.columns[j]!r} has a non-finite value ({X[i, j]})"
        elif self.task == "regression":
            what = f"target {self.target!r} has a non-finite value ({y[i]})"
        else:
            what = f"target {self.target!r} is missing"
        return f"{what} at row {_row(rows[i])}; pass nan_policy='drop' to drop such rows"

    def append(self, X: np.ndarray, y: np.ndarray | None = None, rows: np.ndarray | None = None) -> None:
        """Check, count and buffer one block; write the whole chunks it completes.

        ``y`` holds float targets (regression) or class codes, with -1 for a
        missing class. ``rows`` are source row numbers for error messages.
        """
        with np.errstate(over="ignore"):  # float32 overflow gives inf, caught below
            X = np.asarray(X, dtype=np.float32)
        n = X.shape[0]
        if X.ndim != 2 or X.shape[1] != self.d:
            raise ValueError(f"block of shape {X.shape} does not match {self.d} columns")
        if (y is None) != (self.y is None):
            raise ValueError("y must be given for every block, or for none")
        if y is not None:
            y = np.asarray(y, dtype=self.y.dtype)
            if y.shape != (n,):
                raise ValueError(f"y block of shape {y.shape} does not match {n} rows of X")
        if rows is None:
            rows = np.arange(self.n_seen, self.n_seen + n)
        self.n_seen += n

        bad = ~np.isfinite(X).all(axis=1)
        if y is not None:
            bad |= ~np.isfinite(y) if self.task == "regression" else (y < 0)
        if bad.any():
            if self.nan_policy == "error":
                raise ValueError(self._bad_message(X, y, np.asarray(rows), int(np.flatnonzero(bad)[0])))
            keep = ~bad
            X = X[keep]
            y = None if y is None else y[keep]
            self.n_dropped += int(bad.sum())
            n = X.shape[0]
        if n == 0:
            return

        self.x_moments.update(X)
        if y is not None:
            if self.task == "regression":
                self.y_moments.update(y)
                self.y_min = min(self.y_min, float(y.min()))
                self.y_max = max(self.y_max, float(y.max()))
            else:
                if y.max() >= self.n_classes:
                    raise ValueError(f"class code {int(y.max())} out of range for {self.n_classes} classes")
                self.class_counts += np.bincount(y, minlength=self.n_classes)
        self._buf_x.append(X)
        if y is not None:
            self._buf_y.append(y)
        self._buf_n += n
        if self._buf_n >= self.chunk_rows:
            self._flush(final=False)
        self._progress.update(n)

    def _flush(self, final: bool) -> None:
        if self._buf_n == 0:
            return
        X = self._buf_x[0] if len(self._buf_x) == 1 else np.concatenate(self._buf_x)
        y = None
        if self.y is not None:
            y = self._buf_y[0] if len(self._buf_y) == 1 else np.concatenate(self._buf_y)
        k = self._buf_n if final else (self._buf_n // self.chunk_rows) * self.chunk_rows
        start, stop = self.n_written, self.n_written + k
        self.X.resize((stop, self.d))
        self.X[start:stop] = X[:k]
        if y is not None:
            self.y.resize((stop,))
            self.y[start:stop] = y[:k]
        self.n_written = stop
        rest = self._buf_n - k
        self._buf_x = [X[k:]] if rest else []
        self._buf_y = [y[k:]] if rest and y is not None else []
        self._buf_n = rest

    def close(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """Write the last rows, the statistics and the attributes; return the attributes."""
        self._flush(final=True)
        self._progress.close()
        if self.n_written == 0:
            dropped = f" ({self.n_dropped} rows dropped by nan_policy='drop')" if self.n_dropped else ""
            raise ValueError("no rows to write" + dropped)
        self.group.create_array("x_mean", data=self.x_moments.mean.copy())
        self.group.create_array("x_std", data=_safe_std(self.x_moments.std))
        out: dict[str, Any] = {k: v for k, v in attrs.items() if k not in _RESERVED_ATTRS}
        out.update(
            dxrf_format=DXRF_FORMAT,
            columns=self.columns,
            target=self.target if self.y is not None else None,
            task=self.task,
            n_rows=self.n_written,
            n_dropped=self.n_dropped,
            chunk_rows=self.chunk_rows,
        )
        if self.task == "regression":
            out.update(
                y_min=self.y_min,
                y_max=self.y_max,
                y_mean=float(self.y_moments.mean[0]),
                y_std=float(self.y_moments.std[0]),
            )
        elif self.task == "classification":
            out["classes"] = [_json_value(c) for c in attrs["classes"]]
            out["class_counts"] = [int(c) for c in self.class_counts]
        self.group.attrs.update(out)
        return out


def _report(path: Path, attrs: Mapping[str, Any]) -> IngestReport:
    return IngestReport(
        path=str(path),
        n_rows=int(attrs["n_rows"]),
        n_columns=len(attrs["columns"]),
        n_dropped=int(attrs["n_dropped"]),
        columns=list(attrs["columns"]),
        target=attrs.get("target"),
        classes=attrs.get("classes"),
        format=attrs.get("format"),
    )


# --------------------------------------------------------------------------- argument checks


def _check_chunk_rows(chunk_rows: object) -> int:
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, numbers.Integral):
        raise TypeError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows}")
    return int(chunk_rows)


def _check_choice(value: object, name: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value  # type: ignore[return-value]


def _check_n_rows(n_rows: object) -> int | None:
    if n_rows is None:
        return None
    if isinstance(n_rows, bool) or not isinstance(n_rows, numbers.Integral):
        raise TypeError(f"n_rows must be a positive integer or None, got {n_rows!r}")
    if n_rows < 1:
        raise ValueError(f"n_rows must be a positive integer or None, got {n_rows}")
    return int(n_rows)


def _sort_labels(values: Iterable[Any]) -> list:
    vals = list(values)
    try:
        return sorted(vals)
    except TypeError:  # mixed types: order by text, deterministic
        return sorted(vals, key=lambda v: (type(v).__name__, str(v)))


def _base_suffix(path: Path) -> str:
    """The suffix that names the format, under any compression suffix."""
    name = path.name.lower()
    for comp in _COMPRESSION_SUFFIXES:
        if name.endswith(comp):
            name = name[: -len(comp)]
            break
    return os.path.splitext(name)[1]


def _is_tsv(path: Path) -> bool:
    return _base_suffix(path) == ".tsv"


def _infer_format(path: Path) -> str:
    suffix = _base_suffix(path)
    if suffix not in _SUFFIX_FORMATS:
        raise ValueError(
            f"cannot infer the format of {str(path)!r} from its suffix; pass format= one of {', '.join(_FORMATS)}"
        )
    return _SUFFIX_FORMATS[suffix]


# --------------------------------------------------------------------------- tables (CSV, Parquet)


def _as_str(s: pd.Series) -> pd.Series:
    """Values as text with missing values kept missing (the level names)."""
    if isinstance(s.dtype, pd.StringDtype):
        return s
    return s.astype("str")


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype)


@dataclasses.dataclass
class _TableOptions:
    target: str | int | None
    task: str
    categorical: Any
    levels: Mapping[str, Sequence[Any]]
    missing_level: bool
    handle_unknown: str
    max_levels: int
    drop_columns: list[str]
    transform: Callable[[pd.DataFrame], pd.DataFrame] | None
    target_map: Mapping[Any, Any] | Callable[[Any], Any] | None
    nan_policy: str

    @property
    def auto_categorical(self) -> bool:
        return self.categorical is True or self.categorical == "auto" or not isinstance(
            self.categorical, (bool, str, type(None))
        )

    @property
    def forced_categorical(self) -> set[str]:
        if isinstance(self.categorical, (bool, str, type(None))):
            return set()
        return {str(c) for c in self.categorical}


class _FramePrep:
    """Applies transform, the target resolution, drop_columns and target_map to each chunk."""

    def __init__(self, opts: _TableOptions) -> None:
        self.opts = opts
        self.columns: list[str] | None = None
        self.target: str | None = None

    def __call__(self, df: pd.DataFrame, str_columns: set[str]) -> pd.DataFrame:
        opts = self.opts
        if opts.transform is not None:
            df = opts.transform(df)
            if not isinstance(df, pd.DataFrame):
                raise TypeError(f"transform must return a pandas DataFrame, got {type(df).__name__}")
        if not all(isinstance(c, str) for c in df.columns):
            df = df.rename(columns=str)
        if self.columns is None:
            cols = list(df.columns)
            if len(set(cols)) != len(cols):
                raise ValueError(f"duplicate column names in the source: {cols}")
            missing = [c for c in opts.drop_columns if c not in cols]
            if missing:
                raise ValueError(f"drop_columns names columns that are not in the source: {missing}; columns: {cols}")
            t = opts.target
            if isinstance(t, numbers.Integral) and not isinstance(t, bool):
                if not -len(cols) <= t < len(cols):
                    raise ValueError(f"target index {t} out of range for {len(cols)} columns")
                t = cols[t]
            if t is not None and t not in cols:
                raise ValueError(f"target column {t!r} is not in the source; columns: {cols}")
            if t is not None and t in opts.drop_columns:
                raise ValueError(f"target column {t!r} is also in drop_columns")
            self.target = t
            self.columns = [c for c in cols if c not in opts.drop_columns]
            if len(self.columns) == (1 if t is not None else 0):
                raise ValueError("no feature columns left after drop_columns")
        if opts.drop_columns:
            df = df.drop(columns=opts.drop_columns)
        if list(df.columns) != self.columns:
            raise ValueError(f"columns changed between chunks: {list(df.columns)} != {self.columns}")
        for c in str_columns:
            if c in df.columns and not isinstance(df[c].dtype, pd.StringDtype):
                df[c] = _as_str(df[c])
        if self.target is not None and opts.target_map is not None:
            tm = opts.target_map
            s = df[self.target]
            if callable(tm):
                s = s.map(tm, na_action="ignore")
            else:
                s = s.map(lambda v: tm.get(v, v), na_action="ignore")
            df[self.target] = s.infer_objects() if s.dtype == object else s
        return df


@dataclasses.dataclass
class _Scan:
    """What the first pass learnt about a table."""

    columns: list[str]
    target: str | None
    n_rows: int = 0
    numeric_seen: set = dataclasses.field(default_factory=set)
    text_seen: set = dataclasses.field(default_factory=set)
    bool_seen: set = dataclasses.field(default_factory=set)
    levels: dict = dataclasses.field(default_factory=dict)
    n_missing: dict = dataclasses.field(default_factory=dict)
    first_bad: dict = dataclasses.field(default_factory=dict)
    target_first_missing: int | None = None


def _row(v: Any) -> Any:
    """A row label for messages: a plain int when the index is integral."""
    return int(v) if isinstance(v, numbers.Integral) else v


def _first_row(mask: np.ndarray, index: pd.Index) -> Any:
    hits = np.flatnonzero(mask)
    return _row(index[hits[0]]) if hits.size else None


def _scan_table(
    frames: Callable[[set[str]], Iterator[pd.DataFrame]],
    prep: _FramePrep,
    opts: _TableOptions,
    str_columns: set[str],
    progress: bool | Callable[[str, int], Any],
) -> _Scan:
    """First pass: column kinds, levels of categorical columns, rows, missing values."""
    scan: _Scan | None = None
    forced = opts.forced_categorical | set(opts.levels)
    collect_numeric_target = opts.task == "classification"
    prog = _Progress(progress, "scanning")
    for raw in frames(str_columns):
        df = prep(raw, str_columns)
        if scan is None:
            scan = _Scan(columns=list(df.columns), target=prep.target)
        scan.n_rows += len(df)
        for c in df.columns:
            s = df[c]
            na = s.isna().to_numpy()
            scan.n_missing[c] = scan.n_missing.get(c, 0) + int(na.sum())
            if na.all():
                continue
            is_target = c == scan.target
            if _is_numeric(s):
                if s.dtype == bool:
                    scan.bool_seen.add(c)
                else:
                    scan.numeric_seen.add(c)
                if not is_target and c not in forced:
                    # numeric so far: remember its first NaN/inf for nan_policy
                    vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
                    r = _first_row(~np.isfinite(vals), df.index)
                    if r is not None and c not in scan.first_bad:
                        scan.first_bad[c] = r
                if is_target and (collect_numeric_target or s.dtype == bool):
                    _add_levels(scan, c, s.dropna().unique(), opts.max_levels, "classes")
                elif is_target:
                    vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
                    r = _first_row(~np.isfinite(vals), df.index)
                    if r is not None and c not in scan.first_bad:
                        scan.first_bad[c] = r
                elif c in forced:
                    _add_levels(scan, c, _as_str(s).dropna().unique(), opts.max_levels, "levels")
            else:
                scan.text_seen.add(c)
                if not is_target and not opts.auto_categorical and c not in forced:
                    v = s.dropna().iloc[0]
                    raise ValueError(
                        f"column {c!r} is not numeric (e.g. {v!r} at row {_row(s.dropna().index[0])}) and "
                        f"categorical={opts.categorical!r}; pass categorical='auto' to one-hot encode it, "
                        f"or drop it with drop_columns"
                    )
                if is_target and opts.task == "regression":
                    v = s.dropna().iloc[0]
                    raise ValueError(
                        f"target column {c!r} is not numeric (e.g. {v!r}) but task='regression'"
                    )
                if c not in opts.levels:
                    _add_levels(scan, c, _as_str(s).dropna().unique(), opts.max_levels,
                                "classes" if is_target else "levels")
            if is_target and na.any() and scan.target_first_missing is None:
                scan.target_first_missing = _first_row(na, df.index)
        prog.update(len(df))
    prog.close()
    if scan is None or scan.n_rows == 0:
        raise ValueError("the source has no data rows")
    return scan


def _add_levels(scan: _Scan, col: str, values: Iterable[Any], max_levels: int, what: str) -> None:
    lv = scan.levels.setdefault(col, set())
    lv.update(v.item() if isinstance(v, np.generic) else v for v in values)
    if len(lv) > max_levels:
        raise ValueError(
            f"column {col!r} has more than max_levels={max_levels} distinct {what}; it looks like an "
            f"identifier or free text: drop it with drop_columns, or raise max_levels"
        )


class _TableSchema:
    """Maps DataFrame chunks to float32 feature blocks and target arrays.

    Numeric columns are copied; a categorical column ``c`` with levels
    ``l_1..l_k`` becomes the one-hot columns ``c=l_1 .. c=l_k`` in place.
    """

    def __init__(
        self,
        features: list[tuple[str, list[str] | None]],
        target: str | None,
        task: str | None,
        classes: list | None,
        missing_level: bool,
        handle_unknown: str,
    ) -> None:
        self.features = features
        self.target = target
        self.task = task
        self.classes = classes
        self.missing_level = missing_level
        self.handle_unknown = handle_unknown
        names: list[str] = []
        self._slots: list[tuple[str, int, pd.Index | None, int | None]] = []
        for name, levels in features:
            if levels is None:
                self._slots.append((name, len(names), None, None))
                names.append(name)
            else:
                index = pd.Index(levels, dtype=object)
                if not index.is_unique:
                    raise ValueError(f"levels of column {name!r} are not unique: {levels}")
                q = levels.index("?") if (missing_level and "?" in levels) else None
                self._slots.append((name, len(names), index, q))
                names.extend(f"{name}={lv}" for lv in levels)
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"encoded column names are not unique: {dup}")
        self.columns = names
        self._class_index = None if classes is None else pd.Index(classes)

    @property
    def levels(self) -> dict[str, list[str]]:
        return {name: lv for name, lv in self.features if lv is not None}

    def encode_X(self, df: pd.DataFrame, dtype: Any = np.float32) -> np.ndarray:
        out = np.zeros((len(df), len(self.columns)), dtype=dtype)
        for name, j, index, q in self._slots:
            s = df[name]
            if index is None:
                with np.errstate(over="ignore"):  # float32 overflow gives inf, reported by the writer
                    out[:, j] = s.to_numpy(dtype=np.float64, na_value=np.nan)
                continue
            vals = _as_str(s)
            codes = index.get_indexer(vals)
            missing = vals.isna().to_numpy()
            unknown = (codes < 0) & ~missing
            if unknown.any() and self.handle_unknown == "error":
                i = int(np.flatnonzero(unknown)[0])
                raise ValueError(
                    f"column {name!r}: value {vals.iloc[i]!r} at row {_row(df.index[i])} is not one of the "
                    f"{len(index)} known levels; pass handle_unknown='ignore' to encode unknown values as all zeros"
                )
            if q is not None:
                codes[missing] = q
            ok = np.flatnonzero(codes >= 0)
            out[ok, j + codes[ok]] = 1
        return out

    def encode_y(self, df: pd.DataFrame) -> np.ndarray | None:
        if self.target is None:
            return None
        s = df[self.target]
        if self.task == "regression":
            with np.errstate(over="ignore"):  # float32 overflow gives inf, reported by the writer
                return s.to_numpy(dtype=np.float64, na_value=np.nan).astype(np.float32)
        vals = s if not isinstance(self.classes[0], str) else _as_str(s)
        codes = self._class_index.get_indexer(vals)
        missing = vals.isna().to_numpy()
        unknown = (codes < 0) & ~missing
        if unknown.any():
            i = int(np.flatnonzero(unknown)[0])
            raise ValueError(
                f"target {self.target!r}: value {vals.iloc[i]!r} at row {_row(df.index[i])} is not one of the "
                f"classes {self.classes}"
            )
        return codes.astype(np.int32)  # -1 marks a missing target


def _build_schema(scan: _Scan, opts: _TableOptions, str_columns: set[str]) -> _TableSchema:
    """Second half of the first pass: decide kinds, levels, task and classes."""
    features: list[tuple[str, list[str] | None]] = []
    for c in scan.columns:
        if c == scan.target:
            continue
        if c in opts.levels:
            features.append((c, [str(v) for v in opts.levels[c]]))
        elif c in str_columns or c in scan.text_seen:
            lv = _sort_labels(scan.levels.get(c, set()))
            if opts.missing_level and scan.n_missing.get(c, 0) and "?" not in lv:
                lv.append("?")  # the missing level goes last, after the sorted levels
            features.append((c, lv))
        else:
            features.append((c, None))
    t = scan.target
    task = None
    classes = None
    if t is not None:
        if opts.task == "regression":
            task = "regression"
        elif opts.task == "classification" or t in scan.text_seen or t in scan.bool_seen or t in opts.levels:
            task = "classification"
        else:
            task = "regression"
        if task == "classification":
            if t in opts.levels:
                classes = list(opts.levels[t])
            else:
                classes = _sort_labels(scan.levels.get(t, set()))
            if not classes:
                raise ValueError(f"target column {t!r} has no values")
    return _TableSchema(features, t, task, classes, opts.missing_level, opts.handle_unknown)


def _check_nan_policy_table(scan: _Scan, schema: _TableSchema, opts: _TableOptions) -> None:
    """Fail before writing when nan_policy='error' and the first pass saw a bad value."""
    if opts.nan_policy != "error":
        return
    bad = {c: r for c, r in scan.first_bad.items() if any(c == n and lv is None for n, lv in schema.features)}
    if schema.task == "regression" and scan.target in scan.first_bad:
        bad[scan.target] = scan.first_bad[scan.target]
    if schema.target is not None and scan.target_first_missing is not None:
        bad[scan.target] = min(bad.get(scan.target, math.inf), scan.target_first_missing)
    if bad:
        c = min(bad, key=bad.get)
        kind = "target column" if c == scan.target else "column"
        raise ValueError(
            f"{kind} {c!r} has a missing or non-finite value at row {bad[c]}; pass nan_policy='drop' to "
            f"drop such rows" + ("" if c == scan.target else " (or one-hot encode it with categorical=[...])")
        )


@contextlib.contextmanager
def _csv_errors(path: Path) -> Iterator[None]:
    """Name the file in pandas' parse errors (they are ValueErrors that do not say which file)."""
    try:
        yield
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        detail = " ".join(str(exc).split())
        raise ValueError(f"cannot read {str(path)!r} as CSV: {detail}") from exc


def _csv_frames(
    path: Path,
    *,
    chunk_rows: int,
    n_rows: int | None,
    read_kw: Mapping[str, Any],
) -> Callable[[set[str]], Iterator[pd.DataFrame]]:
    def frames(str_columns: set[str]) -> Iterator[pd.DataFrame]:
        kw = dict(read_kw)
        if str_columns:
            # Read categorical columns as text so that a level keeps its
            # spelling ("01" stays "01") whatever the chunk's inferred type.
            user = kw.get("dtype")
            if user is None or isinstance(user, Mapping):
                kw["dtype"] = {**(user or {}), **{c: str for c in str_columns}}
        with _csv_errors(path), pd.read_csv(path, chunksize=chunk_rows, nrows=n_rows, **kw) as reader:
            yield from reader

    return frames


def _parquet_frames(
    path: Path, *, chunk_rows: int, n_rows: int | None, columns: Sequence[str] | None
) -> Callable[[set[str]], Iterator[pd.DataFrame]]:
    import pyarrow.parquet as pq

    def frames(str_columns: set[str]) -> Iterator[pd.DataFrame]:
        offset = 0
        with pq.ParquetFile(path) as pf:
            for batch in pf.iter_batches(batch_size=chunk_rows, columns=list(columns) if columns else None):
                df = batch.to_pandas()
                if n_rows is not None and offset + len(df) > n_rows:
                    df = df.iloc[: n_rows - offset]
                df.index = pd.RangeIndex(offset, offset + len(df))
                offset += len(df)
                if len(df):
                    yield df
                if n_rows is not None and offset >= n_rows:
                    return

    return frames


def _ingest_table(
    frames: Callable[[set[str]], Iterator[pd.DataFrame]],
    tmp: Path,
    opts: _TableOptions,
    *,
    chunk_rows: int,
    progress: bool | Callable[[str, int], Any],
    attrs: dict[str, Any],
) -> dict[str, Any]:
    str_columns = set(opts.forced_categorical) | {c for c in opts.levels}
    if isinstance(opts.target, str) and opts.target in opts.levels:
        if not all(isinstance(v, str) for v in opts.levels[opts.target]):
            str_columns.discard(opts.target)  # numeric classes: keep the target numeric
    prep = _FramePrep(opts)
    scan = _scan_table(frames, prep, opts, str_columns, progress)
    # A column that is numeric in some chunks and text in others is a
    # categorical column whose numeric chunks were parsed as numbers: read it
    # again as text so every level keeps its spelling.
    mixed = (scan.text_seen & (scan.numeric_seen | scan.bool_seen)) - str_columns
    if mixed:
        str_columns |= mixed
        prep = _FramePrep(opts)
        scan = _scan_table(frames, prep, opts, str_columns, progress)
    schema = _build_schema(scan, opts, str_columns)
    _check_nan_policy_table(scan, schema, opts)
    writer = _ZarrWriter(
        tmp,
        schema.columns,
        chunk_rows=chunk_rows,
        task=schema.task,
        n_classes=len(schema.classes or ()),
        target=schema.target,
        nan_policy=opts.nan_policy,
        progress=progress,
    )
    for raw in frames(str_columns):
        df = prep(raw, str_columns)
        X = schema.encode_X(df)
        writer.append(X, schema.encode_y(df), rows=df.index.to_numpy())
    attrs = dict(attrs)
    attrs["levels"] = schema.levels
    attrs["missing_level"] = opts.missing_level
    if schema.classes is not None:
        attrs["classes"] = schema.classes
    return writer.close(attrs)


# --------------------------------------------------------------------------- arrays (npy, npz, LibSVM)


class _NpzMember:
    """Row-block reader for one ``.npy`` member of an ``.npz`` archive.

    Reads through the zip stream (decompressing on the fly), so only one block
    of rows is in memory at a time; ``np.load`` would decompress the whole
    member.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
        if key + ".npy" not in names:
            keys = [n[:-4] for n in names if n.endswith(".npy")]
            raise ValueError(f"{str(path)!r} has no array {key!r}; its arrays are {keys}")
        with self._open() as (shape, _, dtype):
            self.shape = shape
            self.dtype = dtype

    @contextlib.contextmanager
    def _open(self) -> Iterator[tuple[tuple[int, ...], bool, np.dtype]]:
        with zipfile.ZipFile(self.path) as zf, zf.open(self.key + ".npy") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy version {version} for {self.key!r} in {str(self.path)!r}")
            self._f = f
            yield shape, fortran, dtype

    def blocks(self, chunk_rows: int, n_rows: int) -> Iterator[np.ndarray]:
        with self._open() as (shape, fortran, dtype):
            if dtype.hasobject:
                raise TypeError(f"array {self.key!r} holds Python objects; only numeric arrays can be ingested")
            if fortran and len(shape) > 1 and int(np.prod(shape[1:])) > 1:
                # Column-major data cannot be read by rows: load it (documented).
                arr = np.lib.format.read_array(self._f)
                for i in range(0, n_rows, chunk_rows):
                    yield np.ascontiguousarray(arr[i : i + chunk_rows])
                return
            what = f"{self.key!r} in {str(self.path)!r}"
            yield from _read_row_blocks(self._f, dtype, shape[1:], chunk_rows, n_rows, what)


def _read_row_blocks(
    f: Any, dtype: np.dtype, row_shape: tuple[int, ...], chunk_rows: int, n_rows: int, what: str
) -> Iterator[np.ndarray]:
    """Blocks of C-ordered rows read from a file positioned at the first row."""
    row_bytes = dtype.itemsize * int(np.prod(row_shape, dtype=np.int64))
    for i in range(0, n_rows, chunk_rows):
        k = min(chunk_rows, n_rows - i)
        buf = f.read(k * row_bytes)
        if len(buf) != k * row_bytes:
            raise ValueError(f"array {what} is truncated")
        yield np.frombuffer(buf, dtype=dtype).reshape((k, *row_shape))


def _open_text(path: Path) -> Any:
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rt")
    if name.endswith(".bz2"):
        return bz2.open(path, "rt")
    if name.endswith(".xz"):
        return lzma.open(path, "rt")
    return open(path)


_QID = re.compile(r"(^|\s)qid:\S+")


def _parse_libsvm(
    lines: list[str], first_line: int, zero_based: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parse LibSVM lines into (labels, line numbers, row, column, value) arrays.

    Blank and comment-only lines are skipped. Column indices are returned
    0-based. Parsing is vectorised per block: the ``idx:val`` pairs of all
    lines are joined and converted by one ``np.fromstring`` call.
    """
    labels: list[str] = []
    line_no: list[int] = []
    rests: list[str] = []
    counts: list[int] = []
    for k, line in enumerate(lines):
        hashpos = line.find("#")
        if hashpos >= 0:
            line = line[:hashpos]
        parts = line.split(None, 1)
        if not parts:
            continue
        rest = parts[1] if len(parts) > 1 else ""
        if "qid:" in rest:
            rest = _QID.sub(" ", rest)
        labels.append(parts[0])
        line_no.append(first_line + k)
        rests.append(rest)
        counts.append(rest.count(":"))
    try:
        y = np.array([float(v) for v in labels], dtype=np.float64)
    except ValueError:
        for lab, no in zip(labels, line_no):
            try:
                float(lab)
            except ValueError:
                raise ValueError(
                    f"line {no}: cannot read the label {lab!r} (multi-label files are not supported)"
                ) from None
        raise
    total = sum(counts)
    nums = np.empty(0)
    if total:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                nums = np.fromstring(" ".join(rests).replace(":", " "), sep=" ")
        except ValueError:
            nums = np.empty(0)  # malformed somewhere: the slow path below finds the line
    if nums.size != 2 * total:
        for rest, no in zip(rests, line_no):
            for tok in rest.split():
                i, sep, v = tok.partition(":")
                try:
                    float(i), float(v)
                    ok = bool(sep)
                except ValueError:
                    ok = False
                if not ok:
                    raise ValueError(f"line {no}: cannot read {tok!r} as index:value")
        raise ValueError(f"lines {first_line}..{first_line + len(lines) - 1}: malformed index:value pairs")
    idx = nums[0::2]
    vals = nums[1::2]
    rows = np.repeat(np.arange(len(labels)), counts)
    base = 0 if zero_based else 1
    bad = (idx != np.floor(idx)) | (idx < base)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"line {line_no[rows[i]]}: feature index {idx[i]:g} is not an integer >= {base}"
            + ("" if zero_based else " (indices are 1-based; pass zero_based=True for 0-based files)")
        )
    return y, np.asarray(line_no, dtype=np.int64), rows, idx.astype(np.int64) - base, vals


def _libsvm_blocks(path: Path, chunk_rows: int, n_rows: int | None, zero_based: bool) -> Iterator[tuple]:
    with _open_text(path) as f:
        line = 1
        done = 0
        while True:
            lines = []
            for text in f:
                lines.append(text)
                if len(lines) >= chunk_rows:
                    break
            if not lines:
                return
            y, nos, rows, cols, vals = _parse_libsvm(lines, line, zero_based)
            line += len(lines)
            if n_rows is not None and done + len(y) > n_rows:
                keep = n_rows - done
                sel = rows < keep
                y, nos, rows, cols, vals = y[:keep], nos[:keep], rows[sel], cols[sel], vals[sel]
            done += len(y)
            if len(y):
                yield y, nos, rows, cols, vals
            if n_rows is not None and done >= n_rows:
                return


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


def _feature_names(names: Sequence[str] | None, n: int, what: str) -> list[str]:
    if names is None:
        return [f"x{j}" for j in range(n)]
    names = [str(c) for c in names]
    if len(names) != n:
        raise ValueError(f"names has {len(names)} entries but {what} has {n} columns")
    if len(set(names)) != len(names):
        raise ValueError(f"names are not unique: {names}")
    return names


def _select_columns(names: list[str], drop: Sequence[str]) -> list[int]:
    missing = [c for c in drop if c not in names]
    if missing:
        raise ValueError(f"drop_columns names columns that are not in the source: {missing}; columns: {names}")
    keep = [j for j, c in enumerate(names) if c not in set(drop)]
    if not keep:
        raise ValueError("no feature columns left after drop_columns")
    return keep


def _check_numeric_dtype(dtype: np.dtype, what: str) -> None:
    if dtype.kind not in "biuf":
        raise TypeError(f"{what} must hold numbers (bool, integer or float), got dtype {dtype}")


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
    # Each branch defines: columns (all feature names), keep (indices kept),
    # tname, and blocks() -> iterator of (X block, y block or None, row numbers).
    if fmt == "npy":
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError as exc:
            if "object" not in str(exc):
                raise
            raise TypeError(
                f"the array in {str(path)!r} holds Python objects (dtype object); only numeric arrays can be ingested"
            ) from None
        if arr.ndim != 2:
            raise ValueError(f"{str(path)!r} holds a {arr.ndim}-d array; ingest needs a 2-d array")
        _check_numeric_dtype(arr.dtype, f"the array in {str(path)!r}")
        all_names = _feature_names(names, arr.shape[1], "the array")
        t_idx = None
        if target is not None:
            if isinstance(target, str):
                if target not in all_names:
                    raise ValueError(f"target {target!r} is not a column name; names: {all_names}")
                t_idx = all_names.index(target)
            elif isinstance(target, numbers.Integral) and not isinstance(target, bool):
                if not -arr.shape[1] <= target < arr.shape[1]:
                    raise ValueError(f"target index {target} out of range for {arr.shape[1]} columns")
                t_idx = int(target) % arr.shape[1]
            else:
                raise TypeError(f"target must be a column index or name, got {target!r}")
        feat_idx = [j for j in range(arr.shape[1]) if j != t_idx]
        feat_names = [all_names[j] for j in feat_idx]
        keep = [feat_idx[j] for j in _select_columns(feat_names, drop_columns)]
        columns = [all_names[j] for j in keep]
        tname = None if t_idx is None else all_names[t_idx]
        n = arr.shape[0] if n_rows is None else min(n_rows, arr.shape[0])
        n_cols, dtype = arr.shape[1], arr.dtype
        all_cols = list(range(n_cols))
        y_dtype = None if t_idx is None else arr.dtype

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

    elif fmt == "npz":
        if target is not None:
            raise ValueError("target= is not used for .npz files; name the target array with y_key=")
        xm = _NpzMember(path, x_key)
        if len(xm.shape) != 2:
            raise ValueError(f"array {x_key!r} in {str(path)!r} has shape {xm.shape}; ingest needs a 2-d array")
        _check_numeric_dtype(xm.dtype, f"array {x_key!r}")
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
        columns = [all_names[j] for j in keep]
        tname = ykey
        n = xm.shape[0] if n_rows is None else min(n_rows, xm.shape[0])
        y_dtype = None if ym is None else ym.dtype

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

    else:  # libsvm
        if target is not None:
            raise ValueError("target= is not used for LibSVM files: the label is the first field of each line")
        # First pass: rows and number of features (unless given).
        max_col = -1
        n = 0
        for y, _, _, cols, _ in _libsvm_blocks(path, chunk_rows, n_rows, zero_based):
            n += len(y)
            if cols.size:
                max_col = max(max_col, int(cols.max()))
        if n == 0:
            raise ValueError(f"{str(path)!r} has no data lines")
        if n_features is None:
            d_file = max_col + 1
            if d_file == 0:
                raise ValueError(f"{str(path)!r} has no features; pass n_features=")
        else:
            if isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral) or n_features < 1:
                raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
            d_file = int(n_features)
            if max_col >= d_file:
                raise ValueError(f"a feature index ({max_col + (0 if zero_based else 1)}) exceeds n_features={d_file}")
        all_names = _feature_names(names, d_file, "the file")
        keep = _select_columns(all_names, drop_columns)
        columns = [all_names[j] for j in keep]
        tname = "y"
        y_dtype = np.dtype(np.float64)

        def raw_blocks() -> Iterator[tuple[np.ndarray, np.ndarray | None, np.ndarray]]:
            for y, nos, rows, cols, vals in _libsvm_blocks(path, chunk_rows, n_rows, zero_based):
                X = np.zeros((len(y), d_file), dtype=np.float32)
                X[rows, cols] = vals
                yield (X if len(keep) == d_file else X[:, keep]), y, nos

        def y_blocks() -> Iterator[np.ndarray]:
            for y, *_ in _libsvm_blocks(path, chunk_rows, n_rows, zero_based):
                yield y

    mapper = None
    if target_map is not None and tname is not None:
        if callable(target_map):
            mapper = np.vectorize(target_map, otypes=[object])
        else:
            mapper = np.vectorize(lambda v: target_map.get(v, v), otypes=[object])

    def mapped(yb: np.ndarray) -> np.ndarray:
        if mapper is None:
            return yb
        out = mapper(yb)
        return np.asarray(out.tolist())

    resolved = None
    classes = None
    if tname is not None:
        strict = fmt in ("npy", "npz")  # NumPy dtypes carry intent: integer labels are classes
        first_y = mapped(next(iter(y_blocks()))) if mapper is not None else None
        resolved = _resolve_task(task, first_y.dtype if first_y is not None else y_dtype, strict)
        if resolved == "classification":
            classes = _unique_labels((mapped(b) for b in y_blocks()), max_levels, tname)
        elif mapper is not None and first_y.dtype.kind not in "biuf":
            raise ValueError(f"target {tname!r} is not numeric after target_map but task='regression'")
    writer = _ZarrWriter(
        tmp,
        columns,
        chunk_rows=chunk_rows,
        task=resolved,
        n_classes=0 if classes is None else len(classes),
        target=tname,
        nan_policy=nan_policy,
        progress=progress,
    )
    for Xb, yb, rows in raw_blocks():
        if yb is not None:
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


# --------------------------------------------------------------------------- public: ingest


def ingest(
    src: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    target: str | int | None = None,
    format: str | None = None,
    chunk_rows: int = 50_000,
    categorical: str | bool | Sequence[str] | None = "auto",
    missing_level: bool = False,
    nan_policy: str = "error",
    drop_columns: Sequence[str] | None = None,
    overwrite: bool = False,
    progress: bool | Callable[[str, int], Any] = False,
    task: str = "auto",
    target_map: Mapping[Any, Any] | Callable[[Any], Any] | None = None,
    levels: Mapping[str, Sequence[Any]] | None = None,
    handle_unknown: str = "error",
    max_levels: int = 1000,
    transform: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
    n_rows: int | None = None,
    header: bool = True,
    names: Sequence[str] | None = None,
    sep: str | None = None,
    skipinitialspace: bool = False,
    na_values: Any = None,
    skiprows: int | Sequence[int] | None = None,
    read_options: Mapping[str, Any] | None = None,
    x_key: str = "X",
    y_key: str | None = None,
    zero_based: bool = False,
    n_features: int | None = None,
) -> IngestReport:
    """Stream a CSV, Parquet, NumPy or LibSVM file into a dxrf zarr group.

    The file is read in chunks of ``chunk_rows`` rows and never loaded whole;
    memory stays bounded by a few chunks whatever the file size (see the
    module documentation for the layout written and its conventions).

    Parameters
    ----------
    src : path
        The file: ``.csv``/``.tsv`` (optionally ``.gz``, ``.bz2``, ``.xz``),
        ``.parquet``/``.pq``, ``.npy``, ``.npz`` or LibSVM text
        (``.svm``/``.libsvm``/``.svmlight``, optionally compressed).
    dest : path
        Directory of the zarr group to create (local file system).
    target : str or int, optional
        Target column: a name, or a position among the source columns (after
        ``transform``). For ``.npy`` the index (or a name from ``names``) of the
        target column of the 2-d array. Not used for ``.npz`` (see ``y_key``)
        or LibSVM (the label is the first field). None: no target.
    format : {"csv", "parquet", "npy", "npz", "libsvm"}, optional
        Inferred from the suffix when None.
    chunk_rows : int, default 50_000
        Rows per read chunk and per zarr chunk of ``X`` and ``y``.
    categorical : "auto", False, or list of str, default "auto"
        ``"auto"``: non-numeric columns are one-hot encoded. A list: these
        columns are one-hot encoded even if numeric (other non-numeric
        columns are still detected). False/None: a non-numeric column is an
        error. One-hot columns are named ``col=level``, levels sorted, in
        place of the original column.
    missing_level : bool, default False
        For a categorical column with missing values: False gives an all-zero
        one-hot row; True adds the level ``?`` (column ``col=?``, after the
        sorted levels) for columns that have missing values.
    nan_policy : {"error", "drop"}, default "error"
        What to do with a row whose numeric features or target are missing
        or non-finite (also float32 overflow): ``"error"`` raises ValueError
        naming the column and the first such row; ``"drop"`` drops the row and
        counts it in ``n_dropped``. Missing *categorical* features are not
        affected (see ``missing_level``).
    drop_columns : list of str, optional
        Columns to ignore (names after ``transform``).
    overwrite : bool, default False
        Replace an existing dxrf group (or empty directory) at ``dest``.
        Without it an existing ``dest`` raises :class:`DestinationExistsError`.
    progress : bool or callable, default False
        Print a row counter to stderr, or call ``progress(stage, rows)``.
    task : {"auto", "regression", "classification"}, default "auto"
        ``"auto"``: a non-numeric or boolean target is a classification target
        (stored as int32 codes into the sorted ``classes``), a numeric one a
        regression target (float32); for NumPy inputs integer targets are
        classification targets too.
    target_map : dict or callable, optional
        Applied to each raw target value before anything else (a dict maps the
        values it lists and leaves the others), e.g. to strip a trailing dot.
    levels : dict of str to list, optional
        Fixed levels per categorical column (and the classes of the target),
        e.g. ``open_zarr(train).attrs["levels"]`` to encode a test file exactly
        like its training file. Values outside them follow ``handle_unknown``
        (an unknown target class is always an error).
    handle_unknown : {"error", "ignore"}, default "error"
        For a categorical value outside fixed ``levels``: raise, or encode it
        as an all-zero row.
    max_levels : int, default 1000
        A categorical column with more distinct values is an error (it is
        probably an identifier or free text).
    transform : callable, optional
        ``DataFrame -> DataFrame`` applied to every chunk (CSV and Parquet),
        e.g. to derive features or filter rows; it must be row-wise and
        deterministic, as it runs in every pass. Keep the index to keep row
        numbers in messages.
    n_rows : int, optional
        Read only the first ``n_rows`` data rows.
    header, names, sep, skipinitialspace, na_values, skiprows
        CSV reading options passed to :func:`pandas.read_csv` (``header`` is
        a bool: whether the first line holds the column names). Without a
        header and ``names``, columns are named ``x0, x1, ...``. ``names`` also
        names the columns of NumPy and LibSVM inputs (default ``x0, x1, ...``).
        ``sep`` defaults to ``","`` (``"\\t"`` for ``.tsv``).
    read_options : dict, optional
        Further keyword arguments for :func:`pandas.read_csv`.
    x_key, y_key : str
        Arrays of an ``.npz`` file; ``y_key=None`` uses ``"y"`` when present.
    zero_based : bool, default False
        LibSVM feature indices start at 0 instead of 1.
    n_features : int, optional
        LibSVM number of features; default: the largest index seen.

    Returns
    -------
    IngestReport

    Raises
    ------
    ValueError
        Bad arguments, unreadable or inconsistent data, a NaN with
        ``nan_policy="error"``; nothing is left at ``dest``.
    DestinationExistsError
        ``dest`` exists and ``overwrite`` is False.

    Notes
    -----
    CSV and Parquet inputs are read twice (levels and checks, then encoding
    and writing); a column that parses as numbers in some chunks and as text
    in others is re-read as text once more. LibSVM files are read twice.
    ``.npy`` files are opened with ``np.load(mmap_mode="r")`` and read block
    by block with plain file reads (pages read through a memory map would stay
    resident); ``.npz`` members are decompressed block by block (a
    Fortran-ordered ``.npz`` member is loaded whole).
    """
    if not isinstance(src, (str, os.PathLike)):
        raise TypeError(f"src must be a path, got {type(src).__name__}")
    path = Path(src).expanduser().absolute()
    if not path.is_file():
        what = "does not exist" if not path.exists() else "is not a file"
        raise ValueError(f"source {str(path)!r} {what}")
    fmt = _infer_format(path) if format is None else _check_choice(format, "format", _FORMATS)
    chunk_rows = _check_chunk_rows(chunk_rows)
    _check_choice(nan_policy, "nan_policy", _NAN_POLICIES)
    _check_choice(task, "task", _TASKS)
    _check_choice(handle_unknown, "handle_unknown", ("error", "ignore"))
    n_rows = _check_n_rows(n_rows)
    if isinstance(max_levels, bool) or not isinstance(max_levels, numbers.Integral) or max_levels < 1:
        raise ValueError(f"max_levels must be a positive integer, got {max_levels!r}")
    if isinstance(drop_columns, str):
        raise TypeError("drop_columns must be a list of column names, not a string")
    drop = [str(c) for c in (drop_columns or ())]
    if isinstance(categorical, str) and categorical != "auto":
        raise ValueError(f"categorical must be 'auto', False or a list of column names, got {categorical!r}")
    if levels is not None and not isinstance(levels, Mapping):
        raise TypeError(f"levels must be a dict of column name to levels, got {type(levels).__name__}")
    if target_map is not None and not (callable(target_map) or isinstance(target_map, Mapping)):
        raise TypeError(f"target_map must be a dict or a callable, got {type(target_map).__name__}")
    if transform is not None and not callable(transform):
        raise TypeError(f"transform must be callable, got {type(transform).__name__}")
    if fmt not in ("csv", "parquet"):
        unused = {
            "transform": transform is not None, "levels": bool(levels), "read_options": bool(read_options),
            "skiprows": skiprows is not None, "na_values": na_values is not None, "sep": sep is not None,
        }
        bad = [k for k, v in unused.items() if v]
        if bad:
            raise ValueError(f"{', '.join(bad)} only apply to CSV and Parquet sources, not {fmt}")

    attrs: dict[str, Any] = {"source": str(path), "format": fmt}
    with _atomic_directory(dest, overwrite) as tmp:
        if fmt in ("csv", "parquet"):
            opts = _TableOptions(
                target=target,
                task=task,
                categorical=categorical,
                levels={str(k): list(v) for k, v in (levels or {}).items()},
                missing_level=bool(missing_level),
                handle_unknown=handle_unknown,
                max_levels=int(max_levels),
                drop_columns=drop,
                transform=transform,
                target_map=target_map,
                nan_policy=nan_policy,
            )
            if fmt == "csv":
                kw: dict[str, Any] = dict(read_options or {})
                for k in ("chunksize", "nrows", "iterator"):
                    if k in kw:
                        raise ValueError(f"read_options may not set {k!r}; use chunk_rows / n_rows")
                if sep is None:
                    sep = "\t" if _is_tsv(path) else ","
                kw.update(sep=sep, skipinitialspace=skipinitialspace)
                if na_values is not None:
                    kw["na_values"] = na_values
                if skiprows is not None:
                    kw["skiprows"] = skiprows
                if names is None and not header:
                    with _csv_errors(path):
                        probe = pd.read_csv(path, header=None, nrows=1, **kw)
                    names = [f"x{j}" for j in range(probe.shape[1])]
                kw["header"] = 0 if header else None
                if names is not None:
                    kw["names"] = [str(c) for c in names]
                frames = _csv_frames(path, chunk_rows=chunk_rows, n_rows=n_rows, read_kw=kw)
            else:
                if names is not None:
                    raise ValueError("names= does not apply to Parquet sources (they carry their column names)")
                frames = _parquet_frames(path, chunk_rows=chunk_rows, n_rows=n_rows, columns=None)
            out = _ingest_table(frames, tmp, opts, chunk_rows=chunk_rows, progress=progress, attrs=attrs)
        else:
            out = _ingest_arrays(
                fmt, path, tmp, target=target, task=task, names=names, drop_columns=drop, x_key=x_key,
                y_key=y_key, zero_based=zero_based, n_features=n_features, n_rows=n_rows,
                chunk_rows=chunk_rows, nan_policy=nan_policy, max_levels=int(max_levels),
                target_map=target_map, progress=progress, attrs=attrs,
            )
    return _report(Path(dest).expanduser().absolute(), out)


# --------------------------------------------------------------------------- public: write_zarr


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
    dest : path
        Directory of the zarr group to create.
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
        Replace an existing dxrf group (or empty directory) at ``dest``.
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

    Returns
    -------
    IngestReport
    """
    chunk_rows = _check_chunk_rows(chunk_rows)
    _check_choice(task, "task", _TASKS)
    _check_choice(nan_policy, "nan_policy", _NAN_POLICIES)
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

    with _atomic_directory(dest, overwrite) as tmp:
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
    return _report(Path(dest).expanduser().absolute(), out)


# --------------------------------------------------------------------------- public: open_zarr


def _standardize_block(block: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    # float64 for the subtraction: a float32 mean of a column with a large
    # offset (e.g. 1e4 +- 3) is off by ~1e-4 standard deviations; the float64
    # temporary lives for one block only.
    return ((block.astype(np.float64) - mean) / std).astype(np.float32)


def _scale_block(block: np.ndarray, lo: float, hi: float) -> np.ndarray:
    if hi == lo:
        return np.zeros(block.shape, dtype=np.float32)
    # float64 arithmetic makes min and max land exactly on -1 and 1
    return (2.0 * (block.astype(np.float64) - lo) / (hi - lo) - 1.0).astype(np.float32)


def _unscale_block(block: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return ((block.astype(np.float64) + 1.0) * ((hi - lo) / 2.0) + lo).astype(np.float32)


@dataclasses.dataclass
class ZarrDataset:
    """A dxrf zarr group opened lazily as dask arrays.

    Attributes
    ----------
    path : str
        Location of the group.
    X : dask.array.Array
        float32 ``(N, d)``, one dask chunk per stored row chunk, all columns
        in one chunk; standardised when ``standardized`` is True.
    y : dask.array.Array or None
        float32 regression target (in [-1, 1] when ``y_scaled``) or int32
        class codes into ``classes``.
    attrs : dict
        All attributes of the group.
    columns : list of str
    classes : list or None
    x_mean, x_std : numpy.ndarray
        float64 column means and population stds (1.0 for constant columns).
    target : str or None
    standardized, y_scaled : bool
        Whether ``X`` / ``y`` were transformed when opened.
    """

    path: str
    X: da.Array
    y: da.Array | None
    attrs: dict
    columns: list[str]
    classes: list | None
    x_mean: np.ndarray
    x_std: np.ndarray
    target: str | None = None
    standardized: bool = False
    y_scaled: bool = False

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of columns of ``X``."""
        return int(self.X.shape[1])

    @property
    def task(self) -> str | None:
        """``"regression"``, ``"classification"`` or None (no target)."""
        return self.attrs.get("task")

    def __len__(self) -> int:
        return self.n_rows

    def __repr__(self) -> str:
        t = "no target" if self.y is None else f"target={self.target!r} ({self.task})"
        flags = "".join([", standardized" if self.standardized else "", ", y_scaled" if self.y_scaled else ""])
        return f"ZarrDataset({self.path!r}, {self.n_rows} x {self.n_features}, {t}{flags})"

    def standardize(self, X: Any) -> Any:
        """Standardise any matrix with these column statistics, lazily for dask.

        Use it to standardise a test set with the training set's statistics:
        ``train.standardize(test.X)``.

        Parameters
        ----------
        X : numpy.ndarray or dask.array.Array, shape (n, d)

        Returns
        -------
        numpy.ndarray or dask.array.Array
            float32 ``(X - x_mean) / x_std``, computed in float64 per block.
        """
        mean, std = self.x_mean, self.x_std
        if isinstance(X, da.Array):
            if X.ndim != 2 or X.shape[1] != len(mean):
                raise ValueError(f"X must have {len(mean)} columns, got shape {X.shape}")
            if len(X.chunks[1]) > 1:
                X = X.rechunk({1: -1})
            return X.map_blocks(_standardize_block, mean=mean, std=std, dtype=np.float32)
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != len(mean):
            raise ValueError(f"X must have {len(mean)} columns, got shape {X.shape}")
        return _standardize_block(X, mean, std)

    def _y_range(self) -> tuple[float, float]:
        if self.task != "regression":
            raise ValueError(f"{self.path!r}: y scaling needs a numeric (regression) target; task is {self.task!r}")
        return float(self.attrs["y_min"]), float(self.attrs["y_max"])

    def scale_y(self, y: Any) -> Any:
        """Map targets to [-1, 1]: ``2 (y - y_min) / (y_max - y_min) - 1``.

        A constant target maps to 0. Lazy for dask input.
        """
        lo, hi = self._y_range()
        if isinstance(y, da.Array):
            return y.map_blocks(_scale_block, lo=lo, hi=hi, dtype=np.float32)
        return _scale_block(np.asarray(y), lo, hi)

    def unscale_y(self, y: Any) -> Any:
        """Inverse of :meth:`scale_y` (e.g. for predictions). Lazy for dask input."""
        lo, hi = self._y_range()
        if isinstance(y, da.Array):
            return y.map_blocks(_unscale_block, lo=lo, hi=hi, dtype=np.float32)
        return _unscale_block(np.asarray(y), lo, hi)

    def compute(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Load ``X`` and ``y`` into memory (only for data that fit)."""
        if self.y is None:
            return self.X.compute(), None
        X, y = da.compute(self.X, self.y)
        return X, y


def open_zarr(
    path: str | os.PathLike, *, standardize: bool = False, scale_y: bool = False
) -> ZarrDataset:
    """Open a dxrf zarr group as lazy dask arrays.

    Parameters
    ----------
    path : path or URL
        The group written by :func:`ingest` or :func:`write_zarr`. A string
        with ``://`` is passed to zarr as a store URL.
    standardize : bool, default False
        Return ``X`` standardised lazily, ``(X - x_mean) / x_std`` in float32
        via ``map_blocks`` (no pass over the data).
    scale_y : bool, default False
        Return a numeric ``y`` mapped lazily into [-1, 1] with the stored
        ``y_min``/``y_max``: ``2 (y - y_min) / (y_max - y_min) - 1``.

    Returns
    -------
    ZarrDataset

    Raises
    ------
    ValueError
        The path does not exist, is not a dxrf group, or lacks ``X`` or its
        statistics; or ``scale_y`` without a numeric target.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a path, got {type(path).__name__}")
    spath = os.fspath(path)
    if "://" not in spath:
        p = Path(spath).expanduser().absolute()
        if not p.exists():
            raise ValueError(f"{str(p)!r} does not exist")
        if not (p / "zarr.json").is_file():
            raise ValueError(f"{str(p)!r} is not a zarr v3 group (no zarr.json); write it with dxrf.io.ingest")
        spath = str(p)
    try:
        group = zarr.open_group(spath, mode="r")
    except Exception as exc:  # zarr raises several types for "not a group"
        raise ValueError(f"{spath!r} is not a zarr group: {exc}") from exc
    attrs = dict(group.attrs)
    if "dxrf_format" not in attrs:
        raise ValueError(f"{spath!r} is not a dxrf group: attribute 'dxrf_format' is missing")
    if attrs["dxrf_format"] != DXRF_FORMAT:
        raise ValueError(f"{spath!r} has dxrf_format {attrs['dxrf_format']!r}; this version reads {DXRF_FORMAT}")
    arrays = {}
    # member by member (listing the group would read all members' metadata concurrently)
    for name in ("X", "y", "x_mean", "x_std"):
        try:
            node = group[name]
        except KeyError:
            continue
        except Exception as exc:  # zarr raises many types (JSON, codec, shape errors) for corrupt metadata
            raise ValueError(f"{spath!r} has corrupt array metadata: array {name!r}: {exc}") from exc
        if not isinstance(node, zarr.Array):
            raise ValueError(f"{spath!r}: {name!r} is not an array")
        if node.dtype.kind not in "biuf":
            raise ValueError(f"{spath!r}: array {name!r} has the unsupported dtype {node.dtype}")
        arrays[name] = node
    for name in ("X", "x_mean", "x_std"):
        if name not in arrays:
            raise ValueError(f"{spath!r} is not a complete dxrf group: array {name!r} is missing")
    zx = arrays["X"]
    if zx.ndim != 2:
        raise ValueError(f"{spath!r}: array 'X' must be 2-d, got shape {zx.shape}")
    columns = attrs.get("columns", [])
    if not isinstance(columns, list):
        raise ValueError(f"{spath!r}: attribute 'columns' must be a list of names, got {columns!r}")
    if len(columns) != zx.shape[1]:
        raise ValueError(f"{spath!r}: {len(columns)} column names for {zx.shape[1]} columns of X")
    if "y" in arrays and arrays["y"].shape[:1] != zx.shape[:1]:
        raise ValueError(f"{spath!r}: array 'y' has shape {arrays['y'].shape} for {zx.shape[0]} rows of X")
    for name in ("x_mean", "x_std"):
        if arrays[name].shape != (zx.shape[1],):
            raise ValueError(f"{spath!r}: array {name!r} has shape {arrays[name].shape}, expected ({zx.shape[1]},)")
    X = da.from_zarr(zx)
    y = da.from_zarr(arrays["y"]) if "y" in arrays else None
    try:
        x_mean = np.asarray(arrays["x_mean"][:], dtype=np.float64)
        x_std = np.asarray(arrays["x_std"][:], dtype=np.float64)
    except Exception as exc:  # a corrupt chunk: codec errors are RuntimeErrors
        raise ValueError(f"{spath!r}: cannot read the column statistics: {exc}") from exc
    ds = ZarrDataset(
        path=spath,
        X=X,
        y=y,
        attrs=attrs,
        columns=list(columns),
        classes=attrs.get("classes"),
        x_mean=x_mean,
        x_std=x_std,
        target=attrs.get("target"),
    )
    if scale_y:
        if y is None:
            raise ValueError(f"{spath!r} has no target; scale_y=True needs one")
        ds.y = ds.scale_y(y)
        ds.y_scaled = True
    if standardize:
        ds.X = ds.standardize(X)
        ds.standardized = True
    return ds

"""Streaming writer of the ``X``/``y`` arrays and statistics of a new dxrf group.

Every ingest path ends here: row blocks of any size are checked for
non-finite values, counted into the column statistics, re-cut into whole
zarr chunks and written; closing the writer stores the statistics and the
attributes.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import zarr

from dxrf.core.buffers import thread_buffer
from dxrf.io.storage import zarr_target
from dxrf.io.labels import _row
from dxrf.io.integrity import array_options, chunk_checksums, describe
from dxrf.io.layout import _RESERVED_ATTRS, DXRF_FORMAT, _json_value, default_compressor


class _Moments:
    """Running count, mean and M2 per column, merged with Chan's parallel formula.

    Each block is cut into float64 slices of ~8 MB whose own moments
    (:meth:`slices`) depend on that block alone; the running moments are
    the slices' merged in source order. So workers that compute the slices of
    their blocks give, merged in order on the client, bitwise the statistics
    of one process reading the file. Blocks are converted to float64 before
    summing: the result is the float64 statistic of the values given (the
    stored float32 values).
    """

    def __init__(self, d: int) -> None:
        self.n = 0
        self.mean = np.zeros(d)
        self.m2 = np.zeros(d)

    @staticmethod
    def slices(block: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """``(n, mean, M2)`` of each slice of ~8 MB of float64 of one block (small temporaries for wide chunks).

        The slices are converted into one scratch buffer of the thread (fresh
        pages cost a first touch each time in a worker that trims freed memory).
        """
        block = block.reshape(block.shape[0], -1)
        d = block.shape[1]
        step = max(1, (1 << 20) // max(d, 1))
        scratch = thread_buffer("moments", (min(step, block.shape[0]) * d,), np.dtype(np.float64))
        out = []
        for lo in range(0, block.shape[0], step):
            part = block[lo : lo + step]
            b = scratch[: part.size].reshape(part.shape)
            np.copyto(b, part)
            mean_b = b.mean(axis=0)
            b -= mean_b
            b *= b
            out.append((b.shape[0], mean_b, b.sum(axis=0)))
        return out

    def merge(self, nb: int, mean_b: np.ndarray, m2_b: np.ndarray) -> None:
        """Add the moments of ``nb`` more rows (Chan's update)."""
        n = self.n + nb
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (nb / n)
        self.m2 = self.m2 + m2_b + delta**2 * (self.n * nb / n)
        self.n = n

    def update(self, block: np.ndarray) -> None:
        for s in self.slices(block):
            self.merge(*s)

    @property
    def std(self) -> np.ndarray:
        """Population std; exactly 0 for a constant column."""
        return np.sqrt(np.maximum(self.m2, 0.0) / max(self.n, 1))


def owned(a: np.ndarray | None) -> np.ndarray | None:
    """``a``, copied when it is a view (of a caller's block, which may be a reused buffer)."""
    return a if a is None or a.base is None else a.copy()


def _safe_std(std: np.ndarray) -> np.ndarray:
    # A constant column has M2 exactly 0 (the float64 mean of equal float32
    # values is exact), so the test is exact; 1.0 avoids division by zero.
    return np.where(std > 0, std, 1.0)


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


def create_arrays(
    group: zarr.Group, d: int, *, chunk_rows: int, task: str | None, n_rows: int = 0
) -> tuple[zarr.Array, zarr.Array | None]:
    """The ``X`` (and ``y``) arrays of a new dxrf group, ``n_rows`` rows long."""
    X = group.create_array(
        "X",
        shape=(n_rows, d),
        dtype="float32",
        chunks=(chunk_rows, d),
        fill_value=np.nan,  # a chunk lost after the checks reads as NaN, never as plausible zeros
        dimension_names=("row", "column"),
        **array_options(default_compressor()),
    )
    y = None
    if task is not None:
        y = group.create_array(
            "y",
            shape=(n_rows,),
            dtype="float32" if task == "regression" else "int32",
            chunks=(chunk_rows,),
            fill_value=np.nan if task == "regression" else -1,
            dimension_names=("row",),
            **array_options(default_compressor()),
        )
    return X, y


def no_rows_message(n_dropped: int) -> str:
    """The error of an ingest that keeps no row."""
    dropped = f" ({n_dropped} rows dropped by nan_policy='drop')" if n_dropped else ""
    return "no rows to write" + dropped


class _BlockStats(NamedTuple):
    """What one source block adds to a group's statistics (kept rows only)."""

    n: int
    n_dropped: int
    x: list[tuple[int, np.ndarray, np.ndarray]]
    y: list[tuple[int, np.ndarray, np.ndarray]] | None
    y_min: float
    y_max: float
    class_counts: np.ndarray | None


@dataclasses.dataclass(frozen=True)
class _BlockCheck:
    """The checks and per-block statistics of the writer, a pure function of one block.

    Shipped to the workers of a parallel ingest, so that a block checked there
    gives exactly what the client's writer would.
    """

    columns: tuple[str, ...]
    task: str | None
    n_classes: int = 0
    target: str | None = None
    nan_policy: str = "error"

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

    def check(
        self, X: np.ndarray, y: np.ndarray | None, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None, int]:
        """The block as float32 with its bad rows dropped (or a ValueError naming the first); rows dropped."""
        with np.errstate(over="ignore"):  # float32 overflow gives inf, caught below
            X = np.asarray(X, dtype=np.float32)
        n = X.shape[0]
        if X.ndim != 2 or X.shape[1] != len(self.columns):
            raise ValueError(f"block of shape {X.shape} does not match {len(self.columns)} columns")
        if (y is None) != (self.task is None):
            raise ValueError("y must be given for every block, or for none")
        if y is not None:
            y = np.asarray(y, dtype=np.float32 if self.task == "regression" else np.int32)
            if y.shape != (n,):
                raise ValueError(f"y block of shape {y.shape} does not match {n} rows of X")
        finite = np.isfinite(X, out=thread_buffer("finite", X.shape, np.dtype(bool)))
        bad = ~finite.all(axis=1)
        if y is not None:
            bad |= ~np.isfinite(y) if self.task == "regression" else (y < 0)
        if not bad.any():
            return X, y, 0
        if self.nan_policy == "error":
            raise ValueError(self._bad_message(X, y, np.asarray(rows), int(np.flatnonzero(bad)[0])))
        keep = ~bad
        return X[keep], None if y is None else y[keep], int(bad.sum())

    def stats(self, X: np.ndarray, y: np.ndarray | None, n_dropped: int) -> _BlockStats:
        """The statistics of a checked block."""
        n = X.shape[0]
        y_mom, y_min, y_max, counts = None, math.inf, -math.inf, None
        if n and y is not None:
            if self.task == "regression":
                y_mom = _Moments.slices(y)
                y_min, y_max = float(y.min()), float(y.max())
            else:
                if y.max() >= self.n_classes:
                    raise ValueError(f"class code {int(y.max())} out of range for {self.n_classes} classes")
                counts = np.bincount(y, minlength=self.n_classes)
        x_mom = _Moments.slices(X) if n else []
        return _BlockStats(n, n_dropped, x_mom, y_mom, y_min, y_max, counts)


def record(arr: zarr.Array) -> dict[str, Any]:
    """The group's record of one finished array: :func:`describe` and its chunk checksum table."""
    return {**describe(arr), "crc32c": chunk_checksums(arr)}


class _Totals:
    """A group's statistics: the blocks' statistics merged in source order."""

    def __init__(self, check: _BlockCheck) -> None:
        self.task = check.task
        self.x_moments = _Moments(len(check.columns))
        self.y_moments = _Moments(1)
        self.y_min = math.inf
        self.y_max = -math.inf
        self.class_counts = np.zeros(check.n_classes, dtype=np.int64)
        self.n_written = 0
        self.n_dropped = 0

    def add(self, b: _BlockStats) -> None:
        self.n_dropped += b.n_dropped
        if b.n == 0:
            return
        self.n_written += b.n
        for s in b.x:
            self.x_moments.merge(*s)
        for s in b.y or ():
            self.y_moments.merge(*s)
        if b.y is not None:
            self.y_min = min(self.y_min, b.y_min)
            self.y_max = max(self.y_max, b.y_max)
        if b.class_counts is not None:
            self.class_counts += b.class_counts

    def finish(self, group: zarr.Group, check: _BlockCheck, chunk_rows: int, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """Store the statistics and the attributes of the finished ``group``; return the attributes."""
        if self.n_written == 0:
            raise ValueError(no_rows_message(self.n_dropped))
        for name, values in (("x_mean", self.x_moments.mean.copy()), ("x_std", _safe_std(self.x_moments.std))):
            arr = group.create_array(name, shape=values.shape, dtype=values.dtype, **array_options())
            arr[...] = values
        out: dict[str, Any] = {k: v for k, v in attrs.items() if k not in _RESERVED_ATTRS}
        out.update(
            dxrf_format=DXRF_FORMAT,
            dxrf_kind="data",
            columns=list(check.columns),
            target=check.target if check.task is not None else None,
            task=check.task,
            n_rows=self.n_written,
            n_dropped=self.n_dropped,
            chunk_rows=chunk_rows,
            # the root metadata is published last: it vouches for every array's shape, dtype and chunks
            # with each chunk's checksum in grid order: a chunk moved or swapped is refused on read
            arrays={name: record(group[name]) for name in ("X", "y", "x_mean", "x_std") if name in group},
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
        group.attrs.update(out)
        return out


class _ZarrWriter:
    """Append row blocks to the ``X``/``y`` arrays of a new dxrf group.

    Rows are buffered until a whole chunk is available, so every write covers
    whole chunks (no read-modify-write) whatever the incoming block sizes; the
    buffer never holds more than one chunk plus one incoming block. Statistics
    are accumulated from the float32 values as written, one block at a time.
    """

    def __init__(
        self,
        path: Path | Any,
        columns: Sequence[str],
        *,
        chunk_rows: int,
        task: str | None,
        n_classes: int = 0,
        target: str | None = None,
        nan_policy: str = "error",
        progress: bool | Callable[[str, int], Any] = False,
    ) -> None:
        self.check = _BlockCheck(tuple(str(c) for c in columns), task, n_classes, target, nan_policy)
        self.columns = list(self.check.columns)
        self.d = len(self.columns)
        self.chunk_rows = chunk_rows
        self.task = task
        self.group = zarr.open_group(zarr_target(path), mode="w", zarr_format=3)
        self.X, self.y = create_arrays(self.group, self.d, chunk_rows=chunk_rows, task=task)
        self.totals = _Totals(self.check)
        self.n_written = 0
        self.n_seen = 0
        self._buf_x: list[np.ndarray] = []
        self._buf_y: list[np.ndarray] = []
        self._buf_n = 0
        self._progress = _Progress(progress, "writing")

    @property
    def n_dropped(self) -> int:
        return self.totals.n_dropped

    def append(self, X: np.ndarray, y: np.ndarray | None = None, rows: np.ndarray | None = None) -> None:
        """Check, count and buffer one block; write the whole chunks it completes.

        ``y`` holds float targets (regression) or class codes, with -1 for a
        missing class. ``rows`` are source row numbers for error messages.
        """
        n = np.shape(X)[0]
        if rows is None:
            rows = np.arange(self.n_seen, self.n_seen + n)
        self.n_seen += n
        X, y, dropped = self.check.check(X, y, rows)
        self.totals.add(self.check.stats(X, y, dropped))
        n = X.shape[0]
        if n == 0:
            return
        self._buf_x.append(X)
        if y is not None:
            self._buf_y.append(y)
        self._buf_n += n
        if self._buf_n >= self.chunk_rows:
            self._flush(final=False)
        # rows kept for the next chunk must not alias the caller's block (it may be a reused buffer)
        self._buf_x = [owned(b) for b in self._buf_x]
        self._buf_y = [owned(b) for b in self._buf_y]
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
        return self.totals.finish(self.group, self.check, self.chunk_rows, attrs)

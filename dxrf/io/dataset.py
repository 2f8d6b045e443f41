"""The public :func:`open_zarr` and the :class:`ZarrDataset` it returns.

A dxrf group is checked and opened as lazy dask arrays, optionally
standardised with the stored column statistics and with the target scaled
into [-1, 1]; both transforms run per block.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

import dask.array as da
import numpy as np
import zarr
import zarr.abc.store
from zarr.storage import LocalStore
from dask.base import tokenize

from dxrf.core.memory import check_task
from dxrf.io.storage import group_store
from dxrf.io.integrity import IntegrityError, check_positions, checked_reader, describe, metadata_failure, verify
from dxrf.core.target_scale import register
from dxrf.io.layout import DXRF_FORMAT


def _standardize_block(block: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    # float64 for the subtraction: a float32 mean of a column with a large
    # offset (e.g. 1e4 +- 3) is off by ~1e-4 standard deviations; the float64
    # temporary lives for one block only.
    return ((block.astype(np.float64) - mean) / std).astype(np.float32)


def check_column_stats(mean: np.ndarray, std: np.ndarray, where: str, columns: Any = None) -> None:
    """Refuse standardisation statistics that would turn the data into NaN or infinity.

    A standard deviation of 0 (or NaN, inf) would otherwise surface passes
    later as "X contains NaN or infinity", naming neither the column nor the
    statistics.
    """
    mean, std = np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
    for name, values, ok in (("x_std", std, np.isfinite(std) & (std > 0)), ("x_mean", mean, np.isfinite(mean))):
        bad = np.flatnonzero(~ok)
        if bad.size:
            j = int(bad[0])
            col = f"column {columns[j]!r}" if columns is not None and j < len(columns) else f"column {j}"
            need = "positive and finite" if name == "x_std" else "finite"
            raise ValueError(
                f"{where}: {name} is {float(values[j])!r} for {col} ({bad.size} column(s) in all); it must be {need} "
                f"to standardise (a constant column is stored with x_std 1)"
            )


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
        check_column_stats(mean, std, repr(self.path), self.columns)
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

        A constant target maps to 0. Lazy for dask input. A dxrf regressor
        fitted on the dask array returned keeps ``[y_min, y_max]`` (its
        ``y_scale_``) and predicts in the data's units; an array derived from
        it (sliced, rechunked) is not recognised.
        """
        lo, hi = self._y_range()
        if isinstance(y, da.Array):
            # recorded, so that a regressor fitted on it predicts in the data's units
            return register(y.map_blocks(_scale_block, lo=lo, hi=hi, dtype=np.float32), lo, hi)
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


def _name(what: str, arr: zarr.Array, path: str) -> str:
    """A dask key for a stored array: its path, what it is and its metadata (so a rewrite gets new keys)."""
    return f"dxrf-{what}-" + tokenize(path, what, describe(arr), arr.metadata.to_dict())


def _check_codes(block: np.ndarray, n_classes: int, path: str, block_id: tuple[int, ...] | None = None) -> np.ndarray:
    """Class codes must index the stored classes; a tampered code must not be read as a class."""
    if block.size and (block.min() < 0 or block.max() >= n_classes):
        bad = block[(block < 0) | (block >= n_classes)][0]
        chunk = "?" if block_id is None else block_id[0]
        raise IntegrityError(f"{path!r}: array 'y' chunk {chunk} holds the class code {int(bad)}, outside 0..{n_classes - 1}")
    return block


def _open_group(path: str | os.PathLike | Any, storage_options: Mapping[str, Any] | None) -> tuple[Any, str, dict[str, Any]]:
    """(the zarr group, its path for messages, its attributes) of a dxrf group of this format version."""
    if not isinstance(path, (str, os.PathLike, zarr.abc.store.Store)):
        raise TypeError(f"path must be a path, URL or zarr store, got {type(path).__name__}")
    try:
        store, spath, _ = group_store(path, storage_options)
    except ValueError as exc:
        if "no zarr.json" in str(exc):
            raise ValueError(f"{exc}; write it with dxrf.io.ingest") from None
        raise
    try:
        group = zarr.open_group(store, mode="r")
    except Exception as exc:  # zarr raises several types for "not a group"
        raise ValueError(f"{spath!r} is not a zarr group: {metadata_failure(exc)}") from None
    attrs = dict(group.attrs)
    if "dxrf_format" not in attrs:
        raise ValueError(f"{spath!r} is not a dxrf group: attribute 'dxrf_format' is missing")
    if attrs["dxrf_format"] != DXRF_FORMAT:
        raise ValueError(
            f"{spath!r} has dxrf_format {attrs['dxrf_format']!r}; this version reads {DXRF_FORMAT} "
            "(format 2 adds chunk checksums): ingest it again"
        )
    return group, spath, attrs


def _group_arrays(group: Any, spath: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The group's arrays, exactly those of its writer's record (``X`` and its statistics required)."""
    record = attrs.get("arrays")
    if not isinstance(record, dict):
        raise IntegrityError(f"{spath!r}: the attribute 'arrays' (the writer's record of its arrays) is missing or malformed")
    arrays = {}
    # member by member (listing the group would read all members' metadata concurrently)
    for name in ("X", "y", "x_mean", "x_std"):
        try:
            node = group[name]
        except KeyError:
            if name in record:
                raise IntegrityError(f"{spath!r}: array {name!r} is missing, but its writer recorded it") from None
            continue
        except Exception as exc:  # zarr raises many types (JSON, codec, shape errors) for corrupt metadata
            raise ValueError(f"{spath!r} has corrupt array metadata: array {name!r}: {metadata_failure(exc)}") from None
        if not isinstance(node, zarr.Array):
            raise ValueError(f"{spath!r}: {name!r} is not an array")
        if name not in record:
            raise IntegrityError(f"{spath!r}: array {name!r} is not in its writer's record (an array was added)")
        arrays[name] = node
    for name in ("X", "x_mean", "x_std"):
        if name not in arrays:
            raise ValueError(f"{spath!r} is not a complete dxrf group: array {name!r} is missing")
    return arrays


def _check_arrays(arrays: Mapping[str, Any], spath: str, attrs: Mapping[str, Any]) -> list:
    """Check the arrays' shapes, dtypes and chunks against the attributes, and their checksums; return the columns."""
    zx = arrays["X"]
    if zx.ndim != 2 or zx.dtype != np.float32:
        raise IntegrityError(f"{spath!r}: array 'X' must be 2-d float32, got shape {zx.shape} and dtype {zx.dtype}")
    columns = attrs.get("columns", [])
    if not isinstance(columns, list):
        raise ValueError(f"{spath!r}: attribute 'columns' must be a list of names, got {columns!r}")
    if len(columns) != zx.shape[1]:
        raise ValueError(f"{spath!r}: {len(columns)} column names for {zx.shape[1]} columns of X")
    if attrs.get("n_rows") != zx.shape[0]:
        raise IntegrityError(f"{spath!r}: array 'X' has {zx.shape[0]} rows but the group records n_rows={attrs.get('n_rows')!r}")
    if "y" in arrays and arrays["y"].shape != zx.shape[:1]:
        raise ValueError(f"{spath!r}: array 'y' has shape {arrays['y'].shape} for {zx.shape[0]} rows of X")
    if "y" in arrays:
        want = np.int32 if isinstance(attrs.get("classes"), list) else np.float32
        if arrays["y"].dtype != want:
            raise IntegrityError(f"{spath!r}: array 'y' has dtype {arrays['y'].dtype}, expected {np.dtype(want)} for this task")
    for name in ("x_mean", "x_std"):
        if arrays[name].shape != (zx.shape[1],):
            raise ValueError(f"{spath!r}: array {name!r} has shape {arrays[name].shape}, expected ({zx.shape[1]},)")
    # a task decodes whole chunks: one that cannot fit a worker (or this process) is refused before any read
    check_task(math.prod(zx.chunks) * zx.dtype.itemsize, f"{spath!r}: one chunk of array 'X' {zx.chunks}",
               "ingest the data again with a smaller chunk_rows")
    # all of the above reads only metadata; verify bounds the grid (O(1)) before it lists the store
    for name, node in arrays.items():
        verify(node, attrs["arrays"][name], f"{spath!r}: array {name!r}")
        if isinstance(node.store_path.store, LocalStore):
            # 4 bytes a chunk on a local disk: a chunk out of place is refused now, before any pass starts
            # (on an object store that is a request a chunk: there it is checked as each chunk is read)
            check_positions(node, attrs["arrays"][name].get("crc32c"), f"{spath!r}: array {name!r}")
    if zx.chunks != (attrs.get("chunk_rows"), zx.shape[1]):
        raise IntegrityError(f"{spath!r}: array 'X' has chunks {zx.chunks} but the group records chunk_rows={attrs.get('chunk_rows')!r}")
    if "y" in arrays and arrays["y"].chunks != zx.chunks[:1]:
        raise IntegrityError(f"{spath!r}: array 'y' has chunks {arrays['y'].chunks}, expected those of X's rows {zx.chunks[:1]}")
    return columns


def _reader(arrays: Mapping[str, Any], name: str, spath: str, record: Mapping[str, Any]) -> checked_reader:
    """A checked reader of one stored array, bound to the writer's checksum table (if it kept one)."""
    return checked_reader(arrays[name], f"{spath!r}: array {name!r}", record[name].get("crc32c"))


def _lazy_arrays(
    arrays: Mapping[str, Any], spath: str, classes: Any, record: Mapping[str, Any]
) -> tuple[da.Array, da.Array | None]:
    """``X`` and ``y`` (or None) as dask arrays whose chunks are verified as they are read."""
    zx = arrays["X"]
    X = da.from_array(_reader(arrays, "X", spath, record), chunks=zx.chunks, name=_name("X", zx, spath))
    if "y" not in arrays:
        return X, None
    zy = arrays["y"]
    y = da.from_array(_reader(arrays, "y", spath, record), chunks=zy.chunks, name=_name("y", zy, spath))
    if isinstance(classes, list):
        y = y.map_blocks(_check_codes, len(classes), spath, dtype=zy.dtype)
    return X, y


def _column_stats(
    arrays: Mapping[str, Any], spath: str, columns: list, attrs: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """The stored column means and standard deviations, read and checked."""
    record = attrs["arrays"]
    x_mean = np.asarray(_reader(arrays, "x_mean", spath, record)[:], dtype=np.float64)
    x_std = np.asarray(_reader(arrays, "x_std", spath, record)[:], dtype=np.float64)
    # the writer stores finite means and positive deviations (1 for a constant column): anything else was changed
    check_column_stats(x_mean, x_std, f"{spath!r}", columns)
    return x_mean, x_std


def open_zarr(
    path: str | os.PathLike | Any,
    *,
    standardize: bool = False,
    scale_y: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> ZarrDataset:
    """Open a dxrf zarr group as lazy dask arrays.

    Parameters
    ----------
    path : path, URL or zarr store
        The group written by :func:`ingest` or :func:`write_zarr`: a local
        path, a URL (``s3://bucket/data.zarr``, ``gs://...``, ``memory://...``)
        opened with fsspec, or a zarr store object. Workers read the chunks
        straight from the store (the zarr array travels to them with its
        storage options).
    standardize : bool, default False
        Return ``X`` standardised lazily, ``(X - x_mean) / x_std`` in float32
        via ``map_blocks`` (no pass over the data).
    scale_y : bool, default False
        Return a numeric ``y`` mapped lazily into [-1, 1] with the stored
        ``y_min``/``y_max``: ``2 (y - y_min) / (y_max - y_min) - 1``. A dxrf
        regressor fitted on this ``y`` keeps the map and predicts (and scores)
        in the data's units.
    storage_options : dict, optional
        Options of the fsspec file system of a URL ``path`` (e.g.
        ``{"endpoint_url": ..., "key": ..., "secret": ...}`` for s3); merged
        over fsspec's configuration.

    Returns
    -------
    ZarrDataset

    Raises
    ------
    ValueError
        The path does not exist, is not a dxrf group, or lacks ``X`` or its
        statistics; or ``scale_y`` without a numeric target.
    """
    group, spath, attrs = _open_group(path, storage_options)
    arrays = _group_arrays(group, spath, attrs)
    columns = _check_arrays(arrays, spath, attrs)
    classes = attrs.get("classes")
    X, y = _lazy_arrays(arrays, spath, classes, attrs["arrays"])
    x_mean, x_std = _column_stats(arrays, spath, columns, attrs)
    ds = ZarrDataset(
        path=spath,
        X=X,
        y=y,
        attrs=attrs,
        columns=list(columns),
        classes=classes,
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

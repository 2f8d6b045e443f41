"""Predictions written chunk by chunk to a zarr group, a CSV file or a Parquet file (by the suffix).

A zarr group (``.zarr``) holds the array ``y_pred`` (float64 predictions, or
int32 class codes with the labels in the attribute ``classes``), each chunk
computed and stored by a worker. CSV and Parquet files get one column
``prediction`` (the class label for a classifier) or ``prediction_0``,
``prediction_1``, ... for several outputs; their blocks are computed on the
cluster a few at a time and appended in order by the client, so it never
holds more than a window of blocks. Every file is written under a temporary
name and renamed into place when complete. Predictive standard deviations
(``std=``) go beside them: the array ``y_std`` of the same shape, or the
columns ``std`` (``std_0``, ``std_1``, ...), computed in the same tasks.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pandas as pd
import zarr

from dxrf.io.files import KIND_ATTR, DestinationExistsError, check_file_destination
from dxrf.io.storage import atomic_group, atomic_object, group_store, object_errors, resolve, zarr_target
from dxrf.core.progress import blocks_in_order, compute
from dxrf.io.integrity import IntegrityError, array_options, checked_reader, describe, metadata_failure, verify
from dxrf.io.layout import DXRF_FORMAT, default_compressor

__all__ = ["PREDICTION_FORMATS", "open_predictions", "prediction_format", "write_predictions"]

#: file suffix -> format of :func:`write_predictions`
PREDICTION_FORMATS = {".zarr": "zarr", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def prediction_format(dest: str | os.PathLike) -> str:
    """``"zarr"``, ``"csv"`` or ``"parquet"`` from the suffix of ``dest``; ValueError for another suffix."""
    suffix = Path(dest).suffix.lower()
    if suffix not in PREDICTION_FORMATS:
        raise ValueError(
            f"cannot tell the format of {str(dest)!r} from its suffix: predictions go to "
            f"{', '.join(PREDICTION_FORMATS)} paths"
        )
    return PREDICTION_FORMATS[suffix]


def _column_names(pred: da.Array, base: str = "prediction") -> list[str]:
    if pred.ndim == 1:
        return [base]
    return [f"{base}_{j}" for j in range(pred.shape[1])]


@contextlib.contextmanager
def _atomic_file(dest: str | os.PathLike, overwrite: bool) -> Iterator[Path]:
    """A temporary sibling of the file ``dest``, published onto it on success and removed on error.

    Without ``overwrite`` the publication is a hard link, which fails if
    ``dest`` appeared meanwhile (of two racing writers one wins); with it, an
    atomic rename over the old file.
    """
    dest = check_file_destination(dest, overwrite)
    tmp = dest.parent / f"{dest.name}.tmp-{secrets.token_hex(6)}"
    try:
        yield tmp
        if overwrite:
            os.replace(tmp, dest)
        else:
            try:
                os.link(tmp, dest)
            except FileExistsError:
                raise DestinationExistsError(dest, "a file written meanwhile") from None
            tmp.unlink()
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _frames(pred: da.Array, classes: Sequence[Any] | None, std: da.Array | None = None) -> Iterator[pd.DataFrame]:
    names = _column_names(pred)
    if std is not None:  # one array: each block's predictions and deviations come from one task
        names += _column_names(std, "std")
        pred = da.concatenate([pred.reshape(pred.shape[0], -1), std.reshape(std.shape[0], -1)], axis=1)
    if pred.ndim == 2 and len(pred.chunks[1]) > 1:
        pred = pred.rechunk({1: -1})
    labels = None if classes is None else np.asarray(list(classes))
    for block in blocks_in_order(list(pred.to_delayed().ravel())):
        block = np.asarray(block)
        if labels is not None:
            block = labels[block.astype(np.intp)]
        yield pd.DataFrame(block.reshape(len(block), -1), columns=names)


def write_predictions(
    pred: da.Array,
    dest: str | os.PathLike,
    *,
    std: da.Array | None = None,
    classes: Sequence[Any] | None = None,
    attrs: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    progress: bool | None = False,
    storage_options: Mapping[str, Any] | None = None,
) -> int:
    """Write predictions to ``dest``, a ``.zarr`` group, ``.csv`` or ``.parquet`` file, chunk by chunk.

    Parameters
    ----------
    pred : dask.array.Array, shape (N,) or (N, k)
        Predictions; for a classifier the int class codes into ``classes``.
    dest : path
        The suffix chooses the format (see :data:`PREDICTION_FORMATS`).
    std : dask.array.Array of pred's shape, optional
        Predictive standard deviations: the array ``y_std`` of a zarr group,
        or the columns ``std`` (``std_0``, ...) after the predictions.
    classes : sequence, optional
        Class labels in code order: stored as the attribute ``classes`` of a
        zarr group; CSV and Parquet files get the labels themselves.
    attrs : dict, optional
        JSON attributes of a zarr group (e.g. the model and data paths).
    overwrite : bool, default False
        Replace an existing file (or dxrf group) at ``dest``.
    progress : bool or None, default False
        A progress bar on stderr while a zarr group is written (see
        :mod:`dxrf.core.progress`).
    storage_options : dict, optional
        Options of the fsspec file system of a URL ``dest``
        (``s3://bucket/pred.zarr``, ``s3://bucket/pred.csv``). A group is
        published like a data group; a file is written as a temporary
        object and copied onto ``dest``.

    Returns
    -------
    int
        Rows written.
    """
    if not isinstance(pred, da.Array):
        raise TypeError(f"pred must be a dask array, got {type(pred).__name__}")
    if pred.ndim not in (1, 2):
        raise ValueError(f"pred must be 1- or 2-dimensional, got shape {pred.shape}")
    if std is not None and (not isinstance(std, da.Array) or std.shape != pred.shape or classes is not None):
        raise ValueError(f"std must be a dask array of the predictions' shape {pred.shape} (regression only), "
                         f"got {getattr(std, 'shape', type(std).__name__)}")
    fmt = prediction_format(dest)
    if fmt == "zarr":
        with atomic_group(dest, overwrite, kind="predictions", storage_options=storage_options) as tmp:
            root = zarr.open_group(zarr_target(tmp), mode="w", zarr_format=3)
            shape = pred.shape
            chunks = (pred.chunks[0][0],) + shape[1:]
            fill = np.nan if pred.dtype.kind == "f" else -1
            arr = root.create_array("y_pred", shape=shape, chunks=chunks, dtype=pred.dtype, fill_value=fill,
                                    **array_options(default_compressor()))
            sources, targets = [pred.rechunk((chunks[0],) + shape[1:])], [arr]
            if std is not None:
                targets.append(root.create_array("y_std", shape=shape, chunks=chunks, dtype=std.dtype, fill_value=np.nan,
                                                 **array_options(default_compressor())))
                sources.append(std.rechunk((chunks[0],) + shape[1:]))
            # chunk by chunk: each block is computed and stored on a worker, never gathered
            stored = da.store(sources, targets, lock=False, compute=False)
            if isinstance(stored, (list, tuple)):  # one value per source: join them into one computation
                stored = dask.delayed(_stored)(*stored)
            compute(stored, progress=progress)
            meta = {"dxrf_format": DXRF_FORMAT, KIND_ATTR: "predictions", "content": "predictions", "columns": _column_names(pred),
                    "n_rows": int(shape[0]), "arrays": {"y_pred": describe(arr)}}
            if std is not None:
                meta["arrays"]["y_std"] = describe(targets[1])
            if classes is not None:
                meta["classes"] = list(classes)
            root.attrs.update({**dict(attrs or {}), **meta})
        return int(shape[0])
    loc = resolve(dest, storage_options, what="dest")
    with contextlib.ExitStack() as stack:
        if loc.local:
            out = stack.enter_context(_atomic_file(loc.path, overwrite))
        else:
            # a temporary object, closed (uploaded) before atomic_object copies it onto dest
            tmp = stack.enter_context(atomic_object(loc, overwrite))
            out = stack.enter_context(tmp.fs.open(tmp.path, "wb"))
        _write_file(pred, classes, fmt, out, std)
    return int(pred.shape[0])


def _stored(*_: object) -> None:
    """Joins the stores of several arrays into one value to compute."""


def _write_file(pred: da.Array, classes: Sequence[Any] | None, fmt: str, out: Any, std: da.Array | None = None) -> None:
    """Write CSV or Parquet block by block to ``out``: a local path or an open binary file."""
    if fmt == "csv":
        with contextlib.ExitStack() as stack:
            if isinstance(out, Path):
                fh = stack.enter_context(open(out, "w", newline=""))
            else:
                fh = io.TextIOWrapper(out, newline="", write_through=True)
                stack.callback(fh.detach)  # the caller closes the object (which uploads it)
            for i, frame in enumerate(_frames(pred, classes, std)):
                frame.to_csv(fh, header=i == 0, index=False)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    try:
        for frame in _frames(pred, classes, std):
            table = pa.Table.from_pandas(frame, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(str(out) if isinstance(out, Path) else out, table.schema)
            writer.write_table(table)  # one row group per block
    finally:
        if writer is not None:
            writer.close()


def open_predictions(
    path: str | os.PathLike, *, storage_options: Mapping[str, Any] | None = None
) -> tuple[da.Array, dict]:
    """The ``y_pred`` array (lazy) and attributes of a prediction group written by :func:`write_predictions`.

    ``path`` may be a URL (``s3://...``, with ``storage_options``).

    Raises
    ------
    ValueError
        When ``path`` is not a zarr group holding ``y_pred``.
    """
    try:
        store, name, _ = group_store(path, storage_options)
    except ValueError as exc:
        raise ValueError(str(exc).replace("is not a zarr v3 group (no zarr.json)", "is not a zarr group")) from None
    try:
        group = zarr.open_group(store, mode="r")
        node = group["y_pred"]
    except KeyError:
        raise ValueError(f"{name!r} is not a prediction group (no array 'y_pred')") from None
    except Exception as exc:  # zarr raises many types for corrupt metadata
        raise ValueError(f"{name!r} is not a readable prediction group: {metadata_failure(exc)}") from None
    if not isinstance(node, zarr.Array):
        raise ValueError(f"{name!r}: 'y_pred' is not an array")
    attrs = dict(group.attrs)
    record = attrs.get("arrays")
    if attrs.get("dxrf_format") != DXRF_FORMAT or not isinstance(record, dict):
        raise IntegrityError(f"{name!r}: not a prediction group of dxrf_format {DXRF_FORMAT} (no record of its arrays)")
    where = f"{name!r}: array 'y_pred'"
    verify(node, record.get("y_pred"), where)
    if attrs.get("n_rows") != node.shape[0]:
        raise IntegrityError(f"{where} has {node.shape[0]} rows but the group records n_rows={attrs.get('n_rows')!r}")
    return da.from_array(checked_reader(node, where), chunks=node.chunks), attrs


def is_prediction_group(path: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``path`` is a zarr group with ``y_pred`` and no ``X`` (what ``dxrf predict`` writes)."""
    loc = resolve(path, storage_options)
    if loc.local:
        p = Path(loc.path)
        return (p / "y_pred" / "zarr.json").is_file() and not (p / "X").exists()
    with object_errors(loc):
        return bool(loc.fs.exists(loc.key("y_pred/zarr.json")) and not loc.fs.exists(loc.key("X/zarr.json")))

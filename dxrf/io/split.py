"""The public :func:`split_zarr`: a dxrf group cut into training and test groups by a hash of the row index.

Row ``i`` goes to the test group when a hash of ``(i, seed)`` falls below
``fraction`` (:func:`dxrf.engine.split.hashed_split`, the split the learners'
validation uses): the split depends on the row index alone, never on the
chunking or the cluster. The selection runs on the cluster, one task per
stored chunk; the client receives the selected rows of one window of chunks
at a time and writes both groups with the ingest writer (so it never holds X,
and the groups land on the client's file system like an ingest's).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import dask
import numpy as np

from dxrf.io.storage import atomic_group, resolve
from dxrf.core.validation import check_fraction, check_int
from dxrf.engine.split import hashed_split
from dxrf.core.progress import blocks_in_order, show_progress
from dxrf.io.dataset import open_zarr
from dxrf.io.layout import _RESERVED_ATTRS, IngestReport, _report
from dxrf.io.writer import _Progress, _ZarrWriter

__all__ = ["split_zarr"]


def _split_block(x: np.ndarray, y: np.ndarray | None, start: int, fraction: float, seed: int) -> tuple:
    test = hashed_split(start, start + x.shape[0], fraction, seed)
    train = ~test
    return x[train], None if y is None else y[train], x[test], None if y is None else y[test]


def split_zarr(
    src: str | os.PathLike,
    train: str | os.PathLike,
    test: str | os.PathLike,
    *,
    fraction: float = 0.2,
    seed: int = 0,
    overwrite: bool = False,
    progress: bool | None = False,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[IngestReport, IngestReport]:
    """Split a dxrf group into a training and a test group, streaming, by a hash of the row index.

    Parameters
    ----------
    src : path
        A dxrf group (from :func:`ingest` or :func:`write_zarr`).
    train, test : path
        The groups to create. Both keep the source's attributes (columns,
        levels, classes, target, source file) and chunk size, and record the
        split in the attribute ``split_from``; their column statistics
        (``x_mean``, ``x_std``, ``y_min``, ...) and ``class_counts`` are
        recomputed from their own rows, so standardising with the training
        group's statistics uses no test row.
    fraction : float in (0, 1), default 0.2
        Expected share of rows in the test group.
    seed : int >= 0, default 0
        Seed of the hash.
    overwrite : bool, default False
        Replace existing dxrf groups at ``train`` and ``test``.
    progress : bool or None, default False
        A row counter on stderr (None: when stderr is a terminal).
    storage_options : dict, optional
        Options of the fsspec file systems of URLs among the three paths.

    Returns
    -------
    (IngestReport, IngestReport)
        What was written to ``train`` and to ``test``.

    Raises
    ------
    ValueError
        A bad fraction or seed, two equal paths, a source that is not a dxrf
        group, or a part with no rows; nothing is left at ``train`` or ``test``.
    """
    fraction = check_fraction(fraction, "fraction")
    seed = check_int(seed, "seed", low=0)
    paths = {"src": src, "train": train, "test": test}
    for name, value in paths.items():
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"{name} must be a path, got {type(value).__name__}")
    resolved = {k: resolve(v, storage_options, what=k).url for k, v in paths.items()}
    if len(set(resolved.values())) < 3:
        raise ValueError(f"src, train and test must be three different paths, got {list(resolved.values())}")
    ds = open_zarr(src, storage_options=storage_options)
    X, y = ds.X, ds.y
    if y is not None:
        y = y.rechunk((X.chunks[0],))
    starts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(int)
    x_blocks = list(X.to_delayed().ravel())
    y_blocks = [None] * len(x_blocks) if y is None else list(y.to_delayed().ravel())
    part = dask.delayed(_split_block, nout=4)
    tasks = [part(xb, yb, int(s), fraction, seed) for xb, yb, s in zip(x_blocks, y_blocks, starts)]

    kept: dict[str, Any] = {k: v for k, v in ds.attrs.items() if k not in _RESERVED_ATTRS}
    chunk_rows = int(ds.attrs.get("chunk_rows") or X.chunks[0][0])
    classes = ds.classes
    counter = _Progress(show_progress(progress), "splitting")
    with atomic_group(train, overwrite, kind="data", storage_options=storage_options) as tmp_train, \
            atomic_group(test, overwrite, kind="data", storage_options=storage_options) as tmp_test:
        writers = {
            name: _ZarrWriter(tmp, ds.columns, chunk_rows=chunk_rows, task=ds.task, n_classes=len(classes or ()),
                              target=ds.target)
            for name, tmp in (("train", tmp_train), ("test", tmp_test))
        }
        for x_tr, y_tr, x_te, y_te in blocks_in_order(tasks):
            writers["train"].append(x_tr, y_tr)
            writers["test"].append(x_te, y_te)
            counter.update(len(x_tr) + len(x_te))
        counter.close()
        out = {}
        for name, writer in writers.items():
            if writer.n_seen == 0:
                raise ValueError(
                    f"the {name} part of the split has no rows ({ds.n_rows} rows, fraction {fraction}, seed {seed}); "
                    f"choose another fraction"
                )
            attrs = dict(kept)
            attrs["split_from"] = {"path": ds.path, "part": name, "fraction": fraction, "seed": seed}
            if classes is not None:
                attrs["classes"] = list(classes)
            out[name] = writer.close(attrs)
    return _report(resolved["train"], out["train"]), _report(resolved["test"], out["test"])

"""The real benchmark data sets of ``shared/data``, loaded by name.

Every set described in ``shared/data/MANIFEST.md`` is available as NumPy
arrays with :func:`load` and as a dxrf zarr group with :func:`to_zarr`::

    >>> from dxrf import datasets
    >>> ds = datasets.load("adult")                 # doctest: +SKIP
    >>> ds.X_train.shape, ds.X_test.shape           # doctest: +SKIP
    ((32561, 105), (16281, 105))
    >>> datasets.to_zarr("flights_3m", "f3m.zarr")  # doctest: +SKIP

Files are looked up in ``$DXRF_DATA_DIR``, else a ``shared/data`` beside the
checkout, else the user cache (:func:`data_dir`, :mod:`dxrf.datasets.cache`).
Loading never downloads unless asked to: missing files fail in one line naming
each of them, where they were looked for, ``DXRF_DATA_DIR`` for a copy, the
URL and the command that fetches them, ``dxrf data fetch NAME``
(:mod:`dxrf.datasets.missing`).

Splits
------
* ``adult``, ``mnist``: the official train/test files.
* UCI regression sets (Yang et al. 2016): ``split=k`` uses column ``k`` of the
  published test masks.
* ``epileptic_seizure``: a shuffled split with ``test_size`` and
  ``random_state`` (optionally by recording, ``by_group=True``).
* ``nycflights13``, ``flights_3m``: a random split of the *raw* file rows
  (``test_size``, ``random_state``), made before rows with missing values are
  dropped, so that :func:`load` and the streaming :func:`to_zarr` select
  exactly the same rows.

Modules: ``base`` (:class:`Dataset`, the file lookup, split helpers),
``tabular`` (adult, epileptic seizure, mnist), ``flights`` and ``uci``; this
module holds the registry, :func:`load` and :func:`to_zarr`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from dxrf import io as _io
# the data sets' modules; their public constants stay importable from here
from dxrf.datasets.base import Dataset, data_dir
from dxrf.datasets.missing import require
from dxrf.datasets.flights import FLIGHTS_3M_FEATURES, NYCFLIGHTS_FEATURES, _FLIGHTS, _flights_to_zarr, _load_flights
from dxrf.datasets.tabular import ADULT_CATEGORICAL, ADULT_COLUMNS, EPILEPTIC_CLASS_NAMES, _load_adult, _load_epileptic, _load_mnist
from dxrf.datasets.uci import UCI_REGRESSION, _load_uci

__all__ = ["Dataset", "data_dir", "load", "names", "to_zarr"]


# --------------------------------------------------------------------------- registry


def _uci(name: str) -> Callable[..., Dataset]:
    def loader(**kw: Any) -> Dataset:
        return _load_uci(name, **kw)

    return loader


def _flights(name: str) -> Callable[..., Dataset]:
    def loader(**kw: Any) -> Dataset:
        return _load_flights(name, **kw)

    return loader


_LOADERS: dict[str, Callable[..., Dataset]] = {
    "adult": _load_adult,
    "epileptic_seizure": _load_epileptic,
    "mnist": _load_mnist,
    "nycflights13": _flights("nycflights13"),
    "flights_3m": _flights("flights_3m"),
    **{name: _uci(name) for name in UCI_REGRESSION},
}


def names() -> list[str]:
    """Names accepted by :func:`load` and :func:`to_zarr`.

    Returns
    -------
    list of str
    """
    return list(_LOADERS)


def _canonical(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    if key not in _LOADERS:
        raise ValueError(f"unknown data set {name!r}; known: {', '.join(_LOADERS)}")
    return key


def load(name: str, *, download: bool = False, **kw: Any) -> Dataset:
    """Load a real data set as NumPy arrays.

    Parameters
    ----------
    name : str
        One of :func:`names`.
    download : bool, default=False
        Fetch the set's missing files into the cache first, as ``dxrf data
        fetch NAME`` does (from ``$DXRF_DATA_MIRROR``, else from the sources,
        verified against the manifest; progress lines go to stderr). The
        workflows (``dxrf reproduce``) load with it, so that they run on a
        machine with network access and no data; the default only reads.
    **kw
        Options of the data set (unknown options raise TypeError):

        * ``adult``: ``missing_level=False`` (True: ``?`` is its own level,
          108 instead of 105 columns), ``n_rows``.
        * ``epileptic_seizure``: ``binary=True`` (seizure vs rest; False:
          labels 1..5), ``test_size=0.2``, ``random_state=0``,
          ``by_group=False`` (True: whole recordings on one side), ``n_rows``
          (taken from the shuffled order; the file is sorted by class).
        * ``mnist``: ``scale=True`` (pixels / 255), ``n_rows`` (of each part).
        * ``nycflights13``, ``flights_3m``: ``test_size=0.1``,
          ``random_state=0``, ``n_rows``.
        * UCI regression sets: ``split=0`` (0..9), ``n_rows``.

        ``n_rows`` reads only the first rows of each file (quick tests).

    Returns
    -------
    Dataset

    Raises
    ------
    ValueError
        Unknown name or bad option value.
    FileNotFoundError
        Files of the set are in none of the data directories (the message
        names every one, where they were looked for, ``DXRF_DATA_DIR``, the
        URL they would be fetched from and ``dxrf data fetch NAME``), or
        ``DXRF_DATA_DIR`` is not a directory.
    dxrf.datasets.cache.DataFetchError
        With ``download``: a missing file could not be downloaded or did not
        verify (the message names the files still missing, the URL tried, why
        it failed and what to do instead); nothing of it is kept.
    """
    key = _canonical(name)
    require(key, download=download)
    return _LOADERS[key](**kw)


def fetch_missing(name: str) -> None:
    """Fetch the files of data set ``name`` that are in none of the data directories (see :func:`load`)."""
    require(_canonical(name), download=True)


def to_zarr(
    name: str,
    dest: str | os.PathLike,
    *,
    split: str = "train",
    chunk_rows: int = 50_000,
    overwrite: bool = False,
    progress: Any = False,
    **kw: Any,
) -> _io.IngestReport:
    """Write the training or test part of a real data set as a dxrf zarr group.

    ``nycflights13`` and ``flights_3m`` stream from their CSV files through
    :func:`dxrf.io.ingest` (bounded memory); the other sets are loaded with
    :func:`load` and written with :func:`dxrf.io.write_zarr`. The rows and
    values are those of ``load(name, **kw)`` (stored as float32).

    Parameters
    ----------
    name : str
        One of :func:`names`.
    dest : path
        Directory of the zarr group to create.
    split : {"train", "test"}, default "train"
    chunk_rows : int, default 50_000
    overwrite : bool, default False
    progress : bool or callable, default False
        As in :func:`dxrf.io.ingest`.
    **kw
        Options of the data set, as in :func:`load`; for the UCI regression
        sets the test-mask column is ``fold=k`` here (``split=k`` of
        :func:`load`), since ``split`` names the part.

    Returns
    -------
    dxrf.io.IngestReport
    """
    key = _canonical(name)
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    # before loading the data set: a destination that will be refused is refused now
    _io.check_chunk_rows_and_destination(chunk_rows, dest, overwrite)
    require(key)  # every missing file named at once, before anything is written
    if key in _FLIGHTS:
        return _flights_to_zarr(
            key, dest, split=split, chunk_rows=chunk_rows, overwrite=overwrite, progress=progress, **kw
        )
    if key in UCI_REGRESSION and "fold" in kw:
        kw["split"] = kw.pop("fold")
    ds = load(key, **kw)
    X, y = (ds.X_train, ds.y_train) if split == "train" else (ds.X_test, ds.y_test)
    attrs: dict[str, Any] = {
        "source": ds.source_path,
        "format": "dataset",
        "dataset": key,
        "split": split,
        "description": ds.description,
    }
    if ds.class_names is not None:
        attrs["class_names"] = ds.class_names
    if key == "adult":
        # keep the encoding, so a test file can be ingested like the training file
        levels: dict[str, list[str]] = {}
        for c in ds.feature_names:
            col, eq, lv = c.partition("=")
            if eq:
                levels.setdefault(col, []).append(lv)
        attrs["levels"] = levels
    return _io.write_zarr(
        X,
        dest,
        y=y,
        columns=ds.feature_names,
        chunk_rows=chunk_rows,
        attrs=attrs,
        overwrite=overwrite,
        target=ds.target_name,
        classes=ds.classes,
        task="regression" if ds.task == "regression" else "classification",
        progress=progress,
    )

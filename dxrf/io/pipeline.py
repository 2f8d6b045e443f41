"""The public :func:`ingest`: check the arguments, run the format's pipeline, publish.

CSV and Parquet sources go through the table pipeline, NumPy and LibSVM
sources through the array pipeline; either writes into a temporary directory
that is renamed onto ``dest`` only when complete.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dxrf.io.storage import atomic_group, is_url, local_copy, resolve
from dxrf.core.validation import check_int
from dxrf.core.options import resolve_options
from dxrf.core.progress import active_client
from dxrf.io.arrays import _ingest_arrays
from dxrf.io.checks import (
    _FORMATS,
    _NAN_POLICIES,
    _TASKS,
    _check_choice,
    _check_chunk_rows,
    _check_n_rows,
    _check_unique,
    _infer_format,
    _is_tsv,
)
from dxrf.io.index_columns import warn_index_columns
from dxrf.io.layout import IngestReport, _report
from dxrf.io.like import check_columns_like, training_encoding
from dxrf.io.parallel import CLUSTER_MIN_BYTES, PARALLEL_MIN_BYTES, csv_splittable, ingest_table_parallel
from dxrf.io.readers.pieces import source_bytes
from dxrf.io.readers import source_errors
from dxrf.io.readers.csv import _csv_errors, _csv_frames
from dxrf.io.readers.parquet import _check_parquet_schema, _parquet_frames
from dxrf.io.table_scan import _TableOptions
from dxrf.io.tables import _ingest_table


def _check_header(path: Path, kw: dict[str, Any]) -> None:
    """Refuse a header that names a column twice (pandas would rename the second ``a.1``)."""
    skip = ("dtype", "converters", "parse_dates", "index_col", "names", "header", "na_values", "keep_default_na", "na_filter")
    probe_kw = {k: v for k, v in kw.items() if k not in skip}
    with _csv_errors(path):
        try:
            head = pd.read_csv(path, header=None, nrows=1, dtype=str, na_filter=False, **probe_kw)
        except pd.errors.EmptyDataError:
            return  # an empty file: reported by the pass itself
    # blank names are not compared: pandas names them "Unnamed: j" by their position
    names = [str(v) for v in head.iloc[0].tolist()] if len(head) else []
    _check_unique([c if c.strip() else f"\0{j}" for j, c in enumerate(names)], f"the header of {str(path)!r}")


def worth_a_cluster(src: str | os.PathLike, format: str | None = None) -> bool:
    """Whether ``dxrf ingest`` should start a cluster for ``src``: a local CSV or Parquet file of
    ``CLUSTER_MIN_BYTES`` or more (decompressed size); starting one takes seconds."""
    path = Path(os.fspath(src)).expanduser()
    if is_url(os.fspath(src)) or not path.is_file():
        return False
    try:
        fmt = _infer_format(path) if format is None else format
    except ValueError:
        return False
    return fmt in ("csv", "parquet") and source_bytes(path) >= CLUSTER_MIN_BYTES


def _parallel_client(parallel: bool | None, path: Path, fmt: str, read_kw: Mapping[str, Any], skiprows: Any) -> Any:
    """The distributed client to ingest a table with, or None to ingest it in this process."""
    if parallel is False:
        return None
    client = active_client()
    if parallel and client is None:
        raise ValueError("parallel=True needs an active distributed client (dxrf.get_client())")
    if client is None or (parallel is None and source_bytes(path) < PARALLEL_MIN_BYTES):
        return None
    if fmt == "csv" and (skiprows is not None or not csv_splittable(read_kw, path)):
        return None
    return client


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
    like: str | os.PathLike | None = None,
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
    storage_options: Mapping[str, Any] | None = None,
    parallel: bool | None = None,
    _source: str | None = None,
) -> IngestReport:
    """Stream a CSV, Parquet, NumPy or LibSVM file into a dxrf zarr group.

    The file is read in chunks of ``chunk_rows`` rows and never loaded whole;
    memory stays bounded by a few chunks whatever the file size (see the
    module documentation for the layout written and its conventions).

    Parameters
    ----------
    src : path or URL
        The file: ``.csv``/``.tsv`` (optionally ``.gz``, ``.bz2``, ``.xz``),
        ``.parquet``/``.pq``, ``.npy``, ``.npz`` or LibSVM text
        (``.svm``/``.libsvm``/``.svmlight``, optionally compressed). A URL
        (``s3://...``) is first downloaded to a local temporary file (the
        readers need a seekable local file), removed at the end.
    dest : path or URL
        Directory of the zarr group to create, or an object-store URL
        (``s3://bucket/data.zarr``), published as described in :mod:`dxrf.io.storage`.
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
        Replace an existing dxrf data group (or empty directory) at ``dest``.
        Without it an existing ``dest`` raises :class:`DestinationExistsError`;
        anything else at ``dest`` (a model, predictions, a file, a directory of
        other files) is never replaced (:class:`DestinationRefusedError`).
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
    like : path, optional
        An ingested training group to encode exactly like: its one-hot
        levels, target classes, missing level and column order (a level the
        file lacks still gets its all-zero column; a column missing from the
        file, or one the training group lacks, is an error). Not together with
        ``levels``. The new group's statistics are still its own rows'.
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
    storage_options : dict, optional
        Options of the fsspec file systems of URLs among ``src``, ``dest``
        and ``like`` (e.g. ``{"endpoint_url": ..., "key": ..., "secret": ...}``).
    parallel : bool, optional
        Ingest a CSV or Parquet source on the workers of the active
        distributed client (:mod:`dxrf.io.parallel`; the result is
        byte-identical to the serial ingest). ``None`` (default): when a
        client is active and the source has at least 16 MiB (decompressed;
        a gzip file's size record, else 5x a compressed size); ``True``: with
        any client (an error without one); ``False``: serially in this
        process. Sources that cannot be cut into pieces (a CSV read with
        ``skiprows`` or other options that act across lines, quoted line
        breaks, blank lines inside the data, a file the workers cannot read)
        are ingested serially.

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
    params = dict(locals())  # the arguments, for the second call below
    if not isinstance(src, (str, os.PathLike)):
        raise TypeError(f"src must be a path, got {type(src).__name__}")
    if is_url(os.fspath(src)) and not os.fspath(src).startswith("file://"):
        with local_copy(src, storage_options) as (local, url):
            return ingest(**{**params, "src": local, "_source": url})
    src = resolve(src, what="src").path  # a file:// URL is a local path
    path = Path(src).expanduser().absolute()
    if not path.is_file():
        what = "does not exist" if not path.exists() else "is not a file"
        raise ValueError(f"source {_source or str(path)!r} {what}")
    fmt = _infer_format(path) if format is None else _check_choice(format, "format", _FORMATS)
    chunk_rows = _check_chunk_rows(chunk_rows)
    _check_choice(nan_policy, "nan_policy", _NAN_POLICIES)
    _check_choice(task, "task", _TASKS)
    _check_choice(handle_unknown, "handle_unknown", ("error", "ignore"))
    n_rows = _check_n_rows(n_rows)
    max_levels = check_int(max_levels, "max_levels")
    n_features = check_int(n_features, "n_features", allow_none=True)
    if isinstance(drop_columns, str):
        raise TypeError("drop_columns must be a list of column names, not a string")
    drop = [str(c) for c in (drop_columns or ())]
    if isinstance(categorical, str) and categorical != "auto":
        raise ValueError(f"categorical must be 'auto', False or a list of column names, got {categorical!r}")
    if levels is not None and not isinstance(levels, Mapping):
        raise TypeError(f"levels must be a dict of column name to levels, got {type(levels).__name__}")
    if target_map is not None and not (callable(target_map) or isinstance(target_map, Mapping)):
        raise TypeError(f"target_map must be a dict or a callable, got {type(target_map).__name__}")
    if parallel is not None and not isinstance(parallel, bool):
        raise TypeError(f"parallel must be None, True or False, got {type(parallel).__name__}")
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

    like_info = None
    if like is not None:
        like_info = training_encoding(like, target, levels, storage_options=storage_options)
        levels, missing_level = like_info["levels"], like_info["missing_level"] or missing_level
    attrs: dict[str, Any] = {"source": _source or str(path), "format": fmt}
    if like_info is not None:
        attrs["encoded_like"] = like_info["path"]
    final = resolve(dest, storage_options, what="dest").url
    runtime = resolve_options()  # the ingest's runtime options, read once: the parallel path gets them explicitly
    with atomic_group(dest, overwrite, kind="data", storage_options=storage_options) as tmp, source_errors(path, fmt):
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
                like_columns=None if like_info is None else like_info["columns"],
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
                if names is None and header and "usecols" not in kw:
                    _check_header(path, kw)
                kw["header"] = 0 if header else None
                if names is not None:
                    kw["names"] = [str(c) for c in names]
                    _check_unique(kw["names"], "names")
                frames = _csv_frames(path, chunk_rows=chunk_rows, n_rows=n_rows, read_kw=kw)
            else:
                if names is not None:
                    raise ValueError("names= does not apply to Parquet sources (they carry their column names)")
                if transform is None:  # else the transform may turn such columns into numbers
                    _check_parquet_schema(path, skip=drop)
                frames = _parquet_frames(path, chunk_rows=chunk_rows, n_rows=n_rows, columns=None)
            out = None
            client = _parallel_client(parallel, path, fmt, kw if fmt == "csv" else {}, skiprows)
            if client is not None:
                out = ingest_table_parallel(client, path, fmt, tmp, opts, chunk_rows=chunk_rows, n_rows=n_rows,
                                            read_kw=kw if fmt == "csv" else None, progress=progress, attrs=attrs,
                                            options=runtime)
            if out is None:
                out = _ingest_table(frames, tmp, opts, chunk_rows=chunk_rows, progress=progress, attrs=attrs)
        else:
            out = _ingest_arrays(
                fmt, path, tmp, target=target, task=task, names=names, drop_columns=drop, x_key=x_key,
                y_key=y_key, zero_based=zero_based, n_features=n_features, n_rows=n_rows,
                chunk_rows=chunk_rows, nan_policy=nan_policy, max_levels=int(max_levels),
                target_map=target_map, progress=progress, attrs=attrs,
            )
            if like_info is not None:
                check_columns_like(out["columns"], like_info["columns"], like_info["path"])
    warn_index_columns(final, out["columns"], chunk_rows, storage_options=storage_options)
    return _report(final, out)

"""The public :func:`ingest`: check the arguments, run the format's pipeline, publish.

CSV and Parquet sources go through the table pipeline, NumPy and LibSVM
sources through the array pipeline; either writes into a temporary directory
that is renamed onto ``dest`` only when complete. The keyword arguments of
:func:`ingest` are the fields of :class:`~dxrf.io.ingest_options.IngestOptions`;
:func:`ingest_with` takes them as one such object.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dxrf.core.options import resolve_options
from dxrf.core.progress import active_client
from dxrf.io.arrays import _ingest_arrays
from dxrf.io.checks import _FORMATS, _check_choice, _check_unique, _infer_format, _is_tsv
from dxrf.io.ingest_options import IngestOptions, options_section
from dxrf.io.index_columns import warn_index_columns
from dxrf.io.layout import IngestReport, _report
from dxrf.io.like import check_columns_like, training_encoding
from dxrf.io.parallel import CLUSTER_MIN_BYTES, PARALLEL_MIN_BYTES, csv_splittable, ingest_table_parallel
from dxrf.io.readers.pieces import source_bytes
from dxrf.io.readers import source_errors
from dxrf.io.readers.csv import _csv_errors, _csv_frames
from dxrf.io.readers.parquet import _check_parquet_schema, _parquet_frames
from dxrf.io.storage import atomic_group, is_url, local_copy, resolve
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
    module documentation for the layout written and its conventions). The
    keyword arguments are the fields of :class:`~dxrf.io.IngestOptions`
    (:func:`ingest_with` takes them as one object).

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
    {options}
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
    knobs = dict(locals())  # the keyword arguments: the fields of IngestOptions
    del knobs["src"], knobs["dest"], knobs["_source"]
    return ingest_with(src, dest, IngestOptions(**knobs), source=_source)


# the keyword arguments are documented once, on IngestOptions
if ingest.__doc__:
    ingest.__doc__ = ingest.__doc__.replace("    {options}\n", options_section())


def ingest_with(
    src: str | os.PathLike, dest: str | os.PathLike, options: IngestOptions, *, source: str | None = None
) -> IngestReport:
    """:func:`ingest` with its keyword arguments as one :class:`~dxrf.io.ingest_options.IngestOptions`.

    Parameters
    ----------
    src, dest : path or URL
        As for :func:`ingest`.
    options : IngestOptions
        The other arguments of :func:`ingest`.
    source : str, optional
        The ``source`` attribute and the name in messages, when ``src`` is a
        local copy of it (default: the path of ``src``).

    Returns
    -------
    IngestReport
    """
    if not isinstance(src, (str, os.PathLike)):
        raise TypeError(f"src must be a path, got {type(src).__name__}")
    if is_url(os.fspath(src)) and not os.fspath(src).startswith("file://"):
        # the readers need a seekable local file: ingest a local copy, named by the URL
        with local_copy(src, options.storage_options) as (local, url):
            return ingest_with(local, dest, options, source=url)
    path = _local_source(src, source)
    fmt = _infer_format(path) if options.format is None else _check_choice(options.format, "format", _FORMATS)
    opts = options.checked(fmt)
    like_info = None
    if opts.like is not None:
        like_info = training_encoding(opts.like, opts.target, opts.levels, storage_options=opts.storage_options)
        opts = dataclasses.replace(
            opts, levels=like_info["levels"], missing_level=like_info["missing_level"] or opts.missing_level
        )
    attrs: dict[str, Any] = {"source": source or str(path), "format": fmt}
    if like_info is not None:
        attrs["encoded_like"] = like_info["path"]
    final = resolve(dest, opts.storage_options, what="dest").url
    with atomic_group(dest, opts.overwrite, kind="data", storage_options=opts.storage_options) as tmp, source_errors(path, fmt):
        if fmt in ("csv", "parquet"):
            out = _ingest_table_source(path, fmt, tmp, opts, like_info, attrs)
        else:
            out = _ingest_array_source(path, fmt, tmp, opts, attrs)
            if like_info is not None:
                check_columns_like(out["columns"], like_info["columns"], like_info["path"])
    warn_index_columns(final, out["columns"], opts.chunk_rows, storage_options=opts.storage_options)
    return _report(final, out)


def _local_source(src: str | os.PathLike, source: str | None) -> Path:
    """The absolute path of a local source file (``file://`` URLs included); refuse anything else."""
    src = resolve(src, what="src").path  # a file:// URL is a local path
    path = Path(src).expanduser().absolute()
    if not path.is_file():
        what = "does not exist" if not path.exists() else "is not a file"
        raise ValueError(f"source {source or str(path)!r} {what}")
    return path


def _table_options(opts: IngestOptions, like_info: Mapping[str, Any] | None) -> _TableOptions:
    """The options of the table pipeline, from checked ingest options."""
    return _TableOptions(
        target=opts.target,
        task=opts.task,
        categorical=opts.categorical,
        levels={str(k): list(v) for k, v in (opts.levels or {}).items()},
        missing_level=bool(opts.missing_level),
        handle_unknown=opts.handle_unknown,
        max_levels=int(opts.max_levels),
        drop_columns=opts.drop_columns,
        transform=opts.transform,
        target_map=opts.target_map,
        nan_policy=opts.nan_policy,
        like_columns=None if like_info is None else like_info["columns"],
    )


def _csv_read_kw(path: Path, opts: IngestOptions) -> dict[str, Any]:
    """The keyword arguments of :func:`pandas.read_csv` for the chunked reads of ``path``.

    Without a header the columns are named ``x0, x1, ...`` (counted on the
    first line); a header is checked for duplicate names.
    """
    kw: dict[str, Any] = dict(opts.read_options or {})
    for k in ("chunksize", "nrows", "iterator"):
        if k in kw:
            raise ValueError(f"read_options may not set {k!r}; use chunk_rows / n_rows")
    sep = opts.sep
    if sep is None:
        sep = "\t" if _is_tsv(path) else ","
    kw.update(sep=sep, skipinitialspace=opts.skipinitialspace)
    if opts.na_values is not None:
        kw["na_values"] = opts.na_values
    if opts.skiprows is not None:
        kw["skiprows"] = opts.skiprows
    names, header = opts.names, opts.header
    if names is not None and "usecols" not in kw:
        # pandas takes the first fields as an index when there are fewer names
        # than fields, silently dropping a column: the counts must agree
        with _csv_errors(path):
            probe = pd.read_csv(path, header=None, nrows=1, **kw)
        if probe.shape[1] != len(names):
            raise ValueError(
                f"names= gives {len(names)} column names but the first line of {str(path)!r} has "
                f"{probe.shape[1]} fields; give one name per field"
            )
        kw.setdefault("index_col", False)
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
    return kw


def _ingest_table_source(
    path: Path, fmt: str, tmp: Path, opts: IngestOptions, like_info: Mapping[str, Any] | None, attrs: dict[str, Any]
) -> dict[str, Any]:
    """Ingest a CSV or Parquet source into ``tmp``: on the workers of a client when worth it, else here."""
    table_opts = _table_options(opts, like_info)
    kw: dict[str, Any] | None = None
    if fmt == "csv":
        kw = _csv_read_kw(path, opts)
        frames = _csv_frames(path, chunk_rows=opts.chunk_rows, n_rows=opts.n_rows, read_kw=kw)
    else:
        if opts.names is not None:
            raise ValueError("names= does not apply to Parquet sources (they carry their column names)")
        if opts.transform is None:  # else the transform may turn such columns into numbers
            _check_parquet_schema(path, skip=opts.drop_columns)
        frames = _parquet_frames(path, chunk_rows=opts.chunk_rows, n_rows=opts.n_rows, columns=None)
    out = None
    client = _parallel_client(opts.parallel, path, fmt, kw or {}, opts.skiprows)
    if client is not None:
        out = ingest_table_parallel(
            client, path, fmt, tmp, table_opts, chunk_rows=opts.chunk_rows, n_rows=opts.n_rows,
            read_kw=kw, progress=opts.progress, attrs=attrs,
            options=resolve_options(),  # the ingest's runtime options: the parallel path gets them explicitly
        )
    if out is None:  # serially: no client, or a source the workers cannot split
        out = _ingest_table(frames, tmp, table_opts, chunk_rows=opts.chunk_rows, progress=opts.progress, attrs=attrs)
    return out


def _ingest_array_source(path: Path, fmt: str, tmp: Path, opts: IngestOptions, attrs: dict[str, Any]) -> dict[str, Any]:
    """Ingest a NumPy or LibSVM source into ``tmp``."""
    return _ingest_arrays(
        fmt, path, tmp, target=opts.target, task=opts.task, names=opts.names, drop_columns=opts.drop_columns,
        x_key=opts.x_key, y_key=opts.y_key, zero_based=opts.zero_based, n_features=opts.n_features,
        n_rows=opts.n_rows, chunk_rows=opts.chunk_rows, nan_policy=opts.nan_policy,
        max_levels=int(opts.max_levels), target_map=opts.target_map, progress=opts.progress, attrs=attrs,
    )

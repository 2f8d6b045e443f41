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
  ``<dest>.tmp-<writer>-<random>`` and renamed into place at the end; on any
  error the temporary directory is removed, so nothing half-written is ever
  left at ``dest`` (one left by a killed writer is removed by the next write
  to ``dest``). Only a data group is replaced, and only with ``overwrite``.
  Destinations may also be object-store URLs (``s3://...`` with
  ``storage_options``), published by copying with the root metadata last
  (see :mod:`dxrf.io.storage`).

Modules
-------
``layout`` (format version, codec, attributes, :class:`IngestReport`),
``writer`` (the streaming writer and its statistics), ``checks`` and
``labels`` (shared argument checks, target classes), ``readers`` (one module
per source format), ``table_scan`` and ``tables`` (the CSV/Parquet pipeline),
``arrays`` (the NumPy/LibSVM pipeline), ``parallel`` and ``readers.pieces`` (the
table ingest on a cluster's workers), ``ingest_options`` (:class:`IngestOptions`,
the knobs of :func:`ingest`), ``pipeline`` (:func:`ingest`), ``write``
(:func:`write_zarr`), ``dataset`` (:func:`open_zarr`), ``like``
(``ingest(like=...)``), ``index_columns`` (the row-index warning),
``predictions`` (:func:`write_predictions`) and ``split`` (:func:`split_zarr`).
"""

from __future__ import annotations

# Every top-level name of the former single module stays importable from
# here, the private ones included (other modules and tests use some of them).
from dxrf.io.files import DestinationExistsError, DestinationNotWritableError, DestinationRefusedError, describe
from dxrf.io.files import atomic_directory as _atomic_directory
from dxrf.io.arrays import _ingest_arrays
from dxrf.io.checks import (
    _COMPRESSION_SUFFIXES,
    _FORMATS,
    _NAN_POLICIES,
    _SUFFIX_FORMATS,
    _TASKS,
    _base_suffix,
    _check_choice,
    _check_chunk_rows,
    _check_n_rows,
    _check_numeric_dtype,
    _feature_names,
    _infer_format,
    _is_tsv,
    _select_columns,
)
from dxrf.io.dataset import ZarrDataset, _scale_block, _standardize_block, _unscale_block, open_zarr
from dxrf.io.labels import _class_codes, _resolve_task, _row, _sort_labels, _unique_labels
from dxrf.io.layout import _RESERVED_ATTRS, DXRF_FORMAT, IngestReport, _json_value, _report, default_compressor
from dxrf.io.ingest_options import IngestOptions
from dxrf.io.pipeline import ingest, ingest_with, worth_a_cluster
from dxrf.io.predictions import open_predictions, write_predictions
from dxrf.io.split import split_zarr
from dxrf.io.readers.csv import _csv_errors, _csv_frames
from dxrf.io.readers.libsvm import _QID, _libsvm_blocks, _open_text, _parse_libsvm
from dxrf.io.readers.npy import _NpzMember, _read_row_blocks
from dxrf.io.readers.parquet import _parquet_frames
from dxrf.io.table_scan import _add_levels, _as_str, _first_row, _FramePrep, _is_numeric, _Scan, _scan_table, _TableOptions
from dxrf.io.tables import _build_schema, _check_nan_policy_table, _ingest_table, _TableSchema
from dxrf.io.write import check_chunk_rows_and_destination, write_zarr
from dxrf.io.writer import _Moments, _Progress, _safe_std, _ZarrWriter

__all__ = [
    "DXRF_FORMAT",
    "DestinationExistsError",
    "DestinationNotWritableError",
    "DestinationRefusedError",
    "IngestOptions",
    "IngestReport",
    "ZarrDataset",
    "default_compressor",
    "describe",
    "ingest",
    "ingest_with",
    "open_predictions",
    "open_zarr",
    "split_zarr",
    "write_predictions",
    "write_zarr",
]

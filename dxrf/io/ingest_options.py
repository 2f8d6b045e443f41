"""The knobs of :func:`~dxrf.io.ingest`, grouped in one frozen :class:`IngestOptions`.

:func:`~dxrf.io.ingest` takes them as keyword arguments (its public
signature) and builds an :class:`IngestOptions`; the pipeline steps read them
from it. :meth:`IngestOptions.checked` validates and normalises them once the
source format is known.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from dxrf.core.validation import check_int
from dxrf.io.checks import _NAN_POLICIES, _TASKS, _check_choice, _check_chunk_rows, _check_n_rows


@dataclasses.dataclass(frozen=True)
class IngestOptions:
    """Every keyword argument of :func:`~dxrf.io.ingest` but ``src`` and ``dest``.

    The fields have the names and defaults of the keyword arguments.

    Parameters
    ----------
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
    """

    target: str | int | None = None
    format: str | None = None
    chunk_rows: int = 50_000
    categorical: str | bool | Sequence[str] | None = "auto"
    missing_level: bool = False
    nan_policy: str = "error"
    drop_columns: Sequence[str] | None = None
    overwrite: bool = False
    progress: bool | Callable[[str, int], Any] = False
    task: str = "auto"
    target_map: Mapping[Any, Any] | Callable[[Any], Any] | None = None
    levels: Mapping[str, Sequence[Any]] | None = None
    handle_unknown: str = "error"
    like: str | os.PathLike | None = None
    max_levels: int = 1000
    transform: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    n_rows: int | None = None
    header: bool = True
    names: Sequence[str] | None = None
    sep: str | None = None
    skipinitialspace: bool = False
    na_values: Any = None
    skiprows: int | Sequence[int] | None = None
    read_options: Mapping[str, Any] | None = None
    x_key: str = "X"
    y_key: str | None = None
    zero_based: bool = False
    n_features: int | None = None
    storage_options: Mapping[str, Any] | None = None
    parallel: bool | None = None

    def checked(self, fmt: str) -> IngestOptions:
        """These options checked for a source of format ``fmt``, normalised.

        ``chunk_rows``, ``n_rows``, ``max_levels`` and ``n_features`` become
        plain ints (or None) and ``drop_columns`` a list of str.

        Raises
        ------
        TypeError, ValueError
            An option of the wrong type or value, or one that does not apply
            to ``fmt``.
        """
        chunk_rows = _check_chunk_rows(self.chunk_rows)
        _check_choice(self.nan_policy, "nan_policy", _NAN_POLICIES)
        _check_choice(self.task, "task", _TASKS)
        _check_choice(self.handle_unknown, "handle_unknown", ("error", "ignore"))
        n_rows = _check_n_rows(self.n_rows)
        max_levels = check_int(self.max_levels, "max_levels")
        n_features = check_int(self.n_features, "n_features", allow_none=True)
        if isinstance(self.drop_columns, str):
            raise TypeError("drop_columns must be a list of column names, not a string")
        drop = [str(c) for c in (self.drop_columns or ())]
        self._check_types()
        if fmt not in ("csv", "parquet"):
            self._check_table_only(fmt)
        return dataclasses.replace(
            self, chunk_rows=chunk_rows, n_rows=n_rows, max_levels=int(max_levels), n_features=n_features, drop_columns=drop
        )

    def _check_types(self) -> None:
        """Refuse the options of the wrong type (or a string that is not a choice)."""
        if isinstance(self.categorical, str) and self.categorical != "auto":
            raise ValueError(f"categorical must be 'auto', False or a list of column names, got {self.categorical!r}")
        if self.levels is not None and not isinstance(self.levels, Mapping):
            raise TypeError(f"levels must be a dict of column name to levels, got {type(self.levels).__name__}")
        if self.target_map is not None and not (callable(self.target_map) or isinstance(self.target_map, Mapping)):
            raise TypeError(f"target_map must be a dict or a callable, got {type(self.target_map).__name__}")
        if self.parallel is not None and not isinstance(self.parallel, bool):
            raise TypeError(f"parallel must be None, True or False, got {type(self.parallel).__name__}")
        if self.transform is not None and not callable(self.transform):
            raise TypeError(f"transform must be callable, got {type(self.transform).__name__}")

    def _check_table_only(self, fmt: str) -> None:
        """Refuse, for an array source, the options that only CSV and Parquet sources use."""
        unused = {
            "transform": self.transform is not None,
            "levels": bool(self.levels),
            "read_options": bool(self.read_options),
            "skiprows": self.skiprows is not None,
            "na_values": self.na_values is not None,
            "sep": self.sep is not None,
        }
        bad = [k for k, v in unused.items() if v]
        if bad:
            raise ValueError(f"{', '.join(bad)} only apply to CSV and Parquet sources, not {fmt}")


def options_section() -> str:
    """The numpydoc entries of the fields (the body of the class's Parameters section), for :func:`~dxrf.io.ingest`."""
    doc = IngestOptions.__doc__ or ""
    _, _, entries = doc.partition("Parameters\n    ----------\n")
    return entries.rstrip() + "\n"

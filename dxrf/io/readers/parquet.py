"""Chunked reading of Parquet files by record batches with pyarrow."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pandas as pd

from dxrf.io.checks import _check_unique


def _unsupported(t: object) -> bool:
    """Arrow types that have no number or level per row: nested values and raw bytes."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return _unsupported(t.value_type)
    return (
        pa.types.is_nested(t)  # list, large list, fixed-size list, struct, map, union
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or getattr(pa.types, "is_binary_view", lambda _: False)(t)
        or getattr(pa.types, "is_list_view", lambda _: False)(t)
        or getattr(pa.types, "is_large_list_view", lambda _: False)(t)
        or isinstance(t, pa.ExtensionType)
    )


def _temporal(t: object) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return _temporal(t.value_type)
    return pa.types.is_temporal(t)  # timestamp, date, time, duration, interval


def arrow_frame(batch: object) -> pd.DataFrame:
    """A record batch (or table) as a DataFrame with decimal columns as float64 numbers.

    pandas gives decimals as ``decimal.Decimal`` objects, which would be read
    as text and one-hot encoded; they are numbers (stored as float32 anyway).
    """
    import pyarrow as pa

    decimal = [i for i, f in enumerate(batch.schema) if pa.types.is_decimal(f.type)]
    if decimal:
        columns = list(batch.columns)
        for i in decimal:
            columns[i] = columns[i].cast(pa.float64())
        batch = type(batch).from_arrays(columns, names=batch.schema.names)
    return batch.to_pandas()


def _check_parquet_schema(path: Path, skip: Sequence[str] = ()) -> None:
    """Refuse a Parquet file with duplicate column names or columns that are neither numbers nor text.

    pandas would turn a list, struct, map or binary value into an object whose
    printed form became a category level: one level per distinct printout.
    """
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid (a ValueError), OSError, ...
        raise ValueError(f"cannot read {str(path)!r} as Parquet: {exc}") from None
    _check_unique([str(n) for n in schema.names], f"the Parquet schema of {str(path)!r}")
    for field in schema:
        if field.name not in skip and _unsupported(field.type):
            raise ValueError(
                f"column {field.name!r} of {str(path)!r} has the Parquet type {field.type}, which cannot be ingested: "
                f"only numbers, booleans and text (categories) can; drop the column (drop_columns) or flatten it first"
            )
        if field.name not in skip and _temporal(field.type):
            # one level per distinct date or time would be encoded: refused, never guessed
            raise ValueError(
                f"column {field.name!r} of {str(path)!r} holds dates or times (Parquet type {field.type}), which are "
                f"not ingested as they are: convert it to numbers first (e.g. a transform giving seconds since "
                f"1970, or the day of week as text), or drop the column (drop_columns)"
            )


def _parquet_frames(
    path: Path, *, chunk_rows: int, n_rows: int | None, columns: Sequence[str] | None
) -> Callable[[set[str]], Iterator[pd.DataFrame]]:
    import pyarrow.parquet as pq

    def frames(str_columns: set[str]) -> Iterator[pd.DataFrame]:
        offset = 0
        with pq.ParquetFile(path) as pf:
            for batch in pf.iter_batches(batch_size=chunk_rows, columns=list(columns) if columns else None):
                df = arrow_frame(batch)
                if n_rows is not None and offset + len(df) > n_rows:
                    df = df.iloc[: n_rows - offset]
                df.index = pd.RangeIndex(offset, offset + len(df))
                offset += len(df)
                if len(df):
                    yield df
                if n_rows is not None and offset >= n_rows:
                    return

    return frames

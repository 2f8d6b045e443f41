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


def _parquet_frames(
    path: Path, *, chunk_rows: int, n_rows: int | None, columns: Sequence[str] | None
) -> Callable[[set[str]], Iterator[pd.DataFrame]]:
    import pyarrow.parquet as pq

    def frames(str_columns: set[str]) -> Iterator[pd.DataFrame]:
        offset = 0
        with pq.ParquetFile(path) as pf:
            for batch in pf.iter_batches(batch_size=chunk_rows, columns=list(columns) if columns else None):
                df = batch.to_pandas()
                if n_rows is not None and offset + len(df) > n_rows:
                    df = df.iloc[: n_rows - offset]
                df.index = pd.RangeIndex(offset, offset + len(df))
                offset += len(df)
                if len(df):
                    yield df
                if n_rows is not None and offset >= n_rows:
                    return

    return frames

"""Chunked reading of Parquet files by record batches with pyarrow."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pandas as pd


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

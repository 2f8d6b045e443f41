"""Chunked reading of CSV and TSV files (optionally compressed) with pandas."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd


@contextlib.contextmanager
def _csv_errors(path: Path) -> Iterator[None]:
    """Name the file in pandas' parse errors (they are ValueErrors that do not say which file)."""
    try:
        yield
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        detail = " ".join(str(exc).split())
        raise ValueError(f"cannot read {str(path)!r} as CSV: {detail}") from exc


def _csv_frames(
    path: Path,
    *,
    chunk_rows: int,
    n_rows: int | None,
    read_kw: Mapping[str, Any],
) -> Callable[[set[str]], Iterator[pd.DataFrame]]:
    def frames(str_columns: set[str]) -> Iterator[pd.DataFrame]:
        kw = dict(read_kw)
        if str_columns:
            # Read categorical columns as text so that a level keeps its
            # spelling ("01" stays "01") whatever the chunk's inferred type.
            user = kw.get("dtype")
            if user is None or isinstance(user, Mapping):
                kw["dtype"] = {**(user or {}), **{c: str for c in str_columns}}
        with _csv_errors(path), pd.read_csv(path, chunksize=chunk_rows, nrows=n_rows, **kw) as reader:
            yield from reader

    return frames

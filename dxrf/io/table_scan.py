"""First pass over a table (CSV or Parquet): options, chunk preparation, scan.

Each chunk gets the user's transform, the target resolution, ``drop_columns``
and ``target_map``; the scan then learns the kind of every column, the levels
of the categorical ones, the row count and the first missing or non-finite
value of each column.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dxrf.io.checks import _check_unique
from dxrf.io.labels import _row
from dxrf.io.writer import _Progress


def _as_str(s: pd.Series) -> pd.Series:
    """Values as text with missing values kept missing (the level names)."""
    if isinstance(s.dtype, pd.StringDtype):
        return s
    return s.astype("str")


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype)


@dataclasses.dataclass
class _TableOptions:
    target: str | int | None
    task: str
    categorical: Any
    levels: Mapping[str, Sequence[Any]]
    missing_level: bool
    handle_unknown: str
    max_levels: int
    drop_columns: list[str]
    transform: Callable[[pd.DataFrame], pd.DataFrame] | None
    target_map: Mapping[Any, Any] | Callable[[Any], Any] | None
    nan_policy: str
    # the encoded columns of a training group to reproduce (``ingest(like=...)``)
    like_columns: list[str] | None = None

    @property
    def auto_categorical(self) -> bool:
        return self.categorical is True or self.categorical == "auto" or not isinstance(
            self.categorical, (bool, str, type(None))
        )

    @property
    def forced_categorical(self) -> set[str]:
        if isinstance(self.categorical, (bool, str, type(None))):
            return set()
        return {str(c) for c in self.categorical}


class _FramePrep:
    """Applies transform, the target resolution, drop_columns and target_map to each chunk."""

    def __init__(self, opts: _TableOptions) -> None:
        self.opts = opts
        self.columns: list[str] | None = None
        self.target: str | None = None

    def __call__(self, df: pd.DataFrame, str_columns: set[str]) -> pd.DataFrame:
        opts = self.opts
        if opts.transform is not None:
            df = opts.transform(df)
            if not isinstance(df, pd.DataFrame):
                raise TypeError(f"transform must return a pandas DataFrame, got {type(df).__name__}")
        if not all(isinstance(c, str) for c in df.columns):
            df = df.rename(columns=str)
        if self.columns is None:
            cols = list(df.columns)
            _check_unique(cols, "the source")
            missing = [c for c in opts.drop_columns if c not in cols]
            if missing:
                raise ValueError(f"drop_columns names columns that are not in the source: {missing}; columns: {cols}")
            t = opts.target
            if isinstance(t, numbers.Integral) and not isinstance(t, bool):
                if not -len(cols) <= t < len(cols):
                    raise ValueError(f"target index {t} out of range for {len(cols)} columns")
                t = cols[t]
            if t is not None and t not in cols:
                raise ValueError(f"target column {t!r} is not in the source; columns: {cols}")
            if t is not None and t in opts.drop_columns:
                raise ValueError(f"target column {t!r} is also in drop_columns")
            self.target = t
            self.columns = [c for c in cols if c not in opts.drop_columns]
            if len(self.columns) == (1 if t is not None else 0):
                raise ValueError("no feature columns left after drop_columns")
        if opts.drop_columns:
            df = df.drop(columns=opts.drop_columns)
        _check_flat(df)
        if list(df.columns) != self.columns:
            raise ValueError(f"columns changed between chunks: {list(df.columns)} != {self.columns}")
        for c in str_columns:
            if c in df.columns and not isinstance(df[c].dtype, pd.StringDtype):
                df[c] = _as_str(df[c])
        if self.target is not None and opts.target_map is not None:
            tm = opts.target_map
            s = df[self.target]
            if callable(tm):
                s = s.map(tm, na_action="ignore")
            else:
                s = s.map(lambda v: tm.get(v, v), na_action="ignore")
            df[self.target] = s.infer_objects() if s.dtype == object else s
        return df


_NESTED = (list, tuple, dict, set, bytes, bytearray, np.ndarray)


def _check_flat(df: pd.DataFrame) -> None:
    """Refuse columns of lists, dicts, arrays or bytes (from Parquet or a transform): their printed
    forms would become category levels."""
    for c in df.columns:
        s = df[c]
        if s.dtype.kind in "mM":  # from a transform or read_options: never one level per date
            raise ValueError(
                f"column {c!r} holds dates or times ({s.dtype}), which are not ingested as they are: convert "
                f"it to numbers first (e.g. seconds since 1970), or drop the column with drop_columns"
            )
        if s.dtype != object:
            continue
        first = s.first_valid_index()
        if first is not None and isinstance(s.at[first], _NESTED):
            v = s.at[first]
            raise ValueError(
                f"column {c!r} holds {type(v).__name__} values (e.g. at row {_row(first)}), which cannot be "
                f"ingested: only numbers, booleans and text (categories) can; drop the column or flatten it first"
            )


@dataclasses.dataclass
class _Scan:
    """What the first pass learnt about a table."""

    columns: list[str]
    target: str | None
    n_rows: int = 0
    numeric_seen: set = dataclasses.field(default_factory=set)
    text_seen: set = dataclasses.field(default_factory=set)
    bool_seen: set = dataclasses.field(default_factory=set)
    levels: dict = dataclasses.field(default_factory=dict)
    n_missing: dict = dataclasses.field(default_factory=dict)
    first_bad: dict = dataclasses.field(default_factory=dict)
    target_first_missing: int | None = None
    #: column -> (value, row) of its first value that is not a number, from its first text chunk
    first_text: dict = dataclasses.field(default_factory=dict)


def _first_row(mask: np.ndarray, index: pd.Index) -> Any:
    hits = np.flatnonzero(mask)
    return _row(index[hits[0]]) if hits.size else None


def _scan_table(
    frames: Callable[[set[str]], Iterator[pd.DataFrame]],
    prep: _FramePrep,
    opts: _TableOptions,
    str_columns: set[str],
    progress: bool | Callable[[str, int], Any],
    allow_empty: bool = False,
) -> _Scan | None:
    """First pass: column kinds, levels of categorical columns, rows, missing values.

    ``allow_empty``: a source (a piece of one) without rows gives None or an empty scan
    instead of an error.
    """
    scan: _Scan | None = None
    forced = opts.forced_categorical | set(opts.levels)
    collect_numeric_target = opts.task == "classification"
    prog = _Progress(progress, "scanning")
    for raw in frames(str_columns):
        df = prep(raw, str_columns)
        if scan is None:
            scan = _Scan(columns=list(df.columns), target=prep.target)
        scan.n_rows += len(df)
        for c in df.columns:
            s = df[c]
            na = s.isna().to_numpy()
            scan.n_missing[c] = scan.n_missing.get(c, 0) + int(na.sum())
            if na.all():
                continue
            is_target = c == scan.target
            if _is_numeric(s):
                if s.dtype == bool:
                    scan.bool_seen.add(c)
                else:
                    scan.numeric_seen.add(c)
                if not is_target and c not in forced:
                    # numeric so far: remember its first NaN/inf for nan_policy
                    vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
                    r = _first_row(~np.isfinite(vals), df.index)
                    if r is not None and c not in scan.first_bad:
                        scan.first_bad[c] = r
                if is_target and (collect_numeric_target or s.dtype == bool):
                    _add_levels(scan, c, s.dropna().unique(), opts.max_levels, "classes")
                elif is_target:
                    vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
                    r = _first_row(~np.isfinite(vals), df.index)
                    if r is not None and c not in scan.first_bad:
                        scan.first_bad[c] = r
                elif c in forced:
                    _add_levels(scan, c, _as_str(s).dropna().unique(), opts.max_levels, "levels")
            else:
                scan.text_seen.add(c)
                if c not in scan.first_text:
                    _note_first_text(scan, c, s)
                if not is_target and not opts.auto_categorical and c not in forced:
                    v = s.dropna().iloc[0]
                    raise ValueError(
                        f"column {c!r} is not numeric (e.g. {v!r} at row {_row(s.dropna().index[0])}) and "
                        f"categorical={opts.categorical!r}; pass categorical='auto' to one-hot encode it, "
                        f"or drop it with drop_columns"
                    )
                if is_target and opts.task == "regression":
                    v = s.dropna().iloc[0]
                    raise ValueError(
                        f"target column {c!r} is not numeric (e.g. {v!r}) but task='regression'"
                    )
                if c not in opts.levels:
                    _add_levels(scan, c, _as_str(s).dropna().unique(), opts.max_levels,
                                "classes" if is_target else "levels")
            if is_target and na.any() and scan.target_first_missing is None:
                scan.target_first_missing = _first_row(na, df.index)
        prog.update(len(df))
    prog.close()
    if (scan is None or scan.n_rows == 0) and not allow_empty:
        raise ValueError("the source has no data rows")
    return scan


def _note_first_text(scan: _Scan, col: str, s: pd.Series) -> None:
    """Remember the first value of ``col`` in this chunk that does not read as a number, and its row."""
    vals = s.dropna()
    # windows of growing length from the start: a text column stops at its first value
    # instead of parsing a whole chunk (each piece of a parallel ingest does this once)
    lo, width = 0, 1
    while lo < len(vals):
        part = vals.iloc[lo : lo + width]
        hits = np.flatnonzero(pd.to_numeric(part.astype(str), errors="coerce").isna().to_numpy())
        if hits.size:
            scan.first_text[col] = (part.iloc[hits[0]], _row(part.index[hits[0]]))
            return
        lo, width = lo + width, width * 16


def _mostly_numbers(levels: set) -> bool:
    text = pd.Series([str(v) for v in levels], dtype=object)
    return bool(pd.to_numeric(text, errors="coerce").notna().mean() > 0.5)


def _add_levels(scan: _Scan, col: str, values: Iterable[Any], max_levels: int, what: str) -> None:
    lv = scan.levels.setdefault(col, set())
    lv.update(v.item() if isinstance(v, np.generic) else v for v in values)
    if len(lv) > max_levels:
        if col in scan.first_text and (col in scan.numeric_seen or _mostly_numbers(lv)):
            # a column of numbers with a stray text value: name the value, not the level count
            v, r = scan.first_text[col]
            raise ValueError(
                f"column {col!r} holds numbers but has the text {v!r} at row {r}, so it was read as "
                f"categories, with more than max_levels={max_levels} distinct {what}; fix that value, "
                f"read it as missing (na_values=[{v!r}]), or drop the column with drop_columns"
            )
        raise ValueError(
            f"column {col!r} has more than max_levels={max_levels} distinct {what}; it looks like an "
            f"identifier or free text: drop it with drop_columns, or raise max_levels"
        )

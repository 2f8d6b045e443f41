"""Encoding of tables (CSV or Parquet) and the two-pass table ingest.

The schema decided from the first pass (one-hot levels, task, classes) maps
every chunk to a float32 feature block and a target array; the second pass
encodes and writes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dxrf.core.buffers import thread_buffer
from dxrf.core.memory import Limit, check_allocation, ingest_chunk_bytes
from dxrf.io.labels import _row, _sort_labels
from dxrf.io.table_scan import _as_str, _FramePrep, _mostly_numbers, _Scan, _scan_table, _TableOptions
from dxrf.io.writer import _ZarrWriter


class _TableSchema:
    """Maps DataFrame chunks to float32 feature blocks and target arrays.

    Numeric columns are copied; a categorical column ``c`` with levels
    ``l_1..l_k`` becomes the one-hot columns ``c=l_1 .. c=l_k`` in place.
    """

    def __init__(
        self,
        features: list[tuple[str, list[str] | None]],
        target: str | None,
        task: str | None,
        classes: list | None,
        missing_level: bool,
        handle_unknown: str,
    ) -> None:
        self.features = features
        self.target = target
        self.task = task
        self.classes = classes
        self.missing_level = missing_level
        self.handle_unknown = handle_unknown
        names: list[str] = []
        self._slots: list[tuple[str, int, pd.Index | None, int | None]] = []
        for name, levels in features:
            if levels is None:
                self._slots.append((name, len(names), None, None))
                names.append(name)
            else:
                index = pd.Index(levels, dtype=object)
                if not index.is_unique:
                    raise ValueError(f"levels of column {name!r} are not unique: {levels}")
                q = levels.index("?") if (missing_level and "?" in levels) else None
                self._slots.append((name, len(names), index, q))
                names.extend(f"{name}={lv}" for lv in levels)
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"encoded column names are not unique: {dup}")
        self.columns = names
        self._class_index = None if classes is None else pd.Index(classes)

    @property
    def levels(self) -> dict[str, list[str]]:
        return {name: lv for name, lv in self.features if lv is not None}

    def encode_X(self, df: pd.DataFrame, dtype: Any = np.float32, scratch: bool = False) -> np.ndarray:
        """The feature block of ``df``; with ``scratch`` in the calling thread's reused buffer
        (valid until its next call: a caller that keeps rows copies them)."""
        shape = (len(df), len(self.columns))
        if scratch:
            out = thread_buffer("encoded", shape, np.dtype(dtype))
            out.fill(0)
        else:
            out = np.zeros(shape, dtype=dtype)
        for name, j, index, q in self._slots:
            s = df[name]
            if index is None:
                with np.errstate(over="ignore"):  # float32 overflow gives inf, reported by the writer
                    out[:, j] = s.to_numpy(dtype=np.float64, na_value=np.nan)
                continue
            vals = _as_str(s)
            codes = index.get_indexer(vals)
            missing = vals.isna().to_numpy()
            unknown = (codes < 0) & ~missing
            if unknown.any() and self.handle_unknown == "error":
                i = int(np.flatnonzero(unknown)[0])
                raise ValueError(
                    f"column {name!r}: value {vals.iloc[i]!r} at row {_row(df.index[i])} is not one of the "
                    f"{len(index)} known levels; pass handle_unknown='ignore' (--handle-unknown ignore) to encode unknown values as all zeros"
                )
            if q is not None:
                codes[missing] = q
            ok = np.flatnonzero(codes >= 0)
            out[ok, j + codes[ok]] = 1
        return out

    def encode_y(self, df: pd.DataFrame) -> np.ndarray | None:
        if self.target is None:
            return None
        s = df[self.target]
        if self.task == "regression":
            with np.errstate(over="ignore"):  # float32 overflow gives inf, reported by the writer
                return s.to_numpy(dtype=np.float64, na_value=np.nan).astype(np.float32)
        vals = s if not isinstance(self.classes[0], str) else _as_str(s)
        codes = self._class_index.get_indexer(vals)
        missing = vals.isna().to_numpy()
        unknown = (codes < 0) & ~missing
        if unknown.any():
            i = int(np.flatnonzero(unknown)[0])
            raise ValueError(
                f"target {self.target!r}: value {vals.iloc[i]!r} at row {_row(df.index[i])} is not one of the "
                f"classes {self.classes}"
            )
        return codes.astype(np.int32)  # -1 marks a missing target


def _source_order(encoded: list[str], levels: dict[str, list[str]]) -> list[str]:
    """Source columns in the order of a group's encoded columns (``c=level`` back to ``c``)."""
    one_hot = {f"{c}={lv}": c for c, lvs in levels.items() for lv in lvs}
    return list(dict.fromkeys(one_hot.get(col, col) for col in encoded))


def _order_like(features: list, opts: _TableOptions) -> list:
    """The features in the training group's column order; an error naming missing or extra columns."""
    order = _source_order(opts.like_columns, {c: [str(v) for v in lv] for c, lv in opts.levels.items()})
    have = [name for name, _ in features]
    missing = [c for c in order if c not in have]
    if missing:
        raise ValueError(f"the training group's columns {missing} are not in the source")
    extra = [c for c in have if c not in order]
    if extra:
        raise ValueError(f"columns {extra} are not in the training group; drop them (--drop, drop_columns=)")
    return sorted(features, key=lambda f: order.index(f[0]))


def _check_like(schema: _TableSchema, like: list[str]) -> None:
    if schema.columns == like:
        return
    i = next((i for i, (a, b) in enumerate(zip(schema.columns, like)) if a != b), min(len(schema.columns), len(like)))
    here = schema.columns[i] if i < len(schema.columns) else "(none)"
    there = like[i] if i < len(like) else "(none)"
    raise ValueError(
        f"the encoded columns differ from the training group's at position {i}: {here!r} here, {there!r} "
        f"there (a column numeric in one and text in the other?)"
    )


def _check_stray_text(scan: _Scan, col: str, opts: _TableOptions) -> None:
    """Refuse a column of numbers with a few values that are not numbers (``N/A?``, a NUL byte, ``1,5``).

    Left alone, the column would be one-hot encoded, one column per distinct
    number, and the ingest would succeed. A column is taken for numbers when
    most of its distinct values parse as numbers; naming it in
    ``categorical=`` (or ``levels=``) keeps it categorical, and ``na_values``
    reads the bad values as missing (then ``nan_policy`` applies).
    """
    if col in opts.forced_categorical or col not in scan.first_text:
        return
    levels = scan.levels.get(col, set())
    control = next((v for v in levels if isinstance(v, str) and any(ch < " " and ch not in "\t\n\r" for ch in v)), None)
    # a NUL or another control character is damage, never a category
    if control is not None or (_mostly_numbers(levels) and not _has_codes(levels)):
        v, r = scan.first_text[col]
        raise ValueError(
            f"column {col!r} holds numbers but has the value {v!r} at row {r}, which is not a number; fix it, "
            f"read such values as missing (na_values=[{v!r}], --na-values), or declare the column categorical "
            f"(categorical=[{col!r}])"
        )


def _has_codes(levels: set) -> bool:
    """Whether some level is a number written as a code would be (``01``, ``007``): then text levels are codes too."""
    return any(isinstance(v, str) and len(v) > 1 and v[0] == "0" and v[1].isdigit() for v in levels)


def _build_schema(scan: _Scan, opts: _TableOptions, str_columns: set[str]) -> _TableSchema:
    """Second half of the first pass: decide kinds, levels, task and classes."""
    features: list[tuple[str, list[str] | None]] = []
    for c in scan.columns:
        if c == scan.target:
            continue
        if c in opts.levels:
            features.append((c, [str(v) for v in opts.levels[c]]))
        elif c in str_columns or c in scan.text_seen:
            _check_stray_text(scan, c, opts)
            lv = _sort_labels(scan.levels.get(c, set()))
            if opts.missing_level and scan.n_missing.get(c, 0) and "?" not in lv:
                lv.append("?")  # the missing level goes last, after the sorted levels
            features.append((c, lv))
        else:
            features.append((c, None))
    if opts.like_columns is not None:
        features = _order_like(features, opts)
    t = scan.target
    task = None
    classes = None
    if t is not None:
        if opts.task == "regression":
            task = "regression"
        elif opts.task == "classification" or t in scan.text_seen or t in scan.bool_seen or t in opts.levels:
            task = "classification"
        else:
            task = "regression"
        if task == "classification":
            if t in opts.levels:
                classes = list(opts.levels[t])
            else:
                classes = _sort_labels(scan.levels.get(t, set()))
            if not classes:
                raise ValueError(f"target column {t!r} has no values")
    schema = _TableSchema(features, t, task, classes, opts.missing_level, opts.handle_unknown)
    if opts.like_columns is not None:
        _check_like(schema, opts.like_columns)
    return schema


def _check_nan_policy_table(scan: _Scan, schema: _TableSchema, opts: _TableOptions) -> None:
    """Fail before writing when nan_policy='error' and the first pass saw a bad value."""
    if opts.nan_policy != "error":
        return
    bad = {c: r for c, r in scan.first_bad.items() if any(c == n and lv is None for n, lv in schema.features)}
    if schema.task == "regression" and scan.target in scan.first_bad:
        bad[scan.target] = scan.first_bad[scan.target]
    if schema.target is not None and scan.target_first_missing is not None:
        bad[scan.target] = min(bad.get(scan.target, math.inf), scan.target_first_missing)
    if bad:
        c = min(bad, key=bad.get)
        kind = "target column" if c == scan.target else "column"
        raise ValueError(
            f"{kind} {c!r} has a missing or non-finite value at row {bad[c]}; pass nan_policy='drop' to "
            f"drop such rows" + ("" if c == scan.target else " (or one-hot encode it with categorical=[...])")
        )


def _check_table_memory(schema: _TableSchema, chunk_rows: int, limit: Limit | None = None) -> None:
    """Refuse, before encoding, a table whose encoded chunks cannot fit in memory (one-hot columns).

    ``limit``: the memory of the process that encodes (default: this machine's).
    """
    d = len(schema.columns)
    wide = sorted(((len(lv), name) for name, lv in schema.features if lv is not None), reverse=True)
    if wide:
        top = ", ".join(f"{name!r} ({k} levels)" for k, name in wide[:3])
        what = f"the {d} encoded columns (one-hot columns of {top}{', ...' if len(wide) > 3 else ''})"
        advice = (
            "lower max_levels so that such columns are refused, drop them with drop_columns (dxrf ingest --drop), "
            "or lower chunk_rows"
        )
    else:
        what, advice = f"the {d} columns", "drop columns with drop_columns (dxrf ingest --drop), or lower chunk_rows"
    check_allocation(ingest_chunk_bytes(d, chunk_rows), f"{what}, written in chunks of chunk_rows={chunk_rows} rows,", advice,
                     limit=limit)


def table_str_columns(opts: _TableOptions) -> set[str]:
    """Columns read as text from the start: forced categorical ones and those with fixed levels."""
    str_columns = set(opts.forced_categorical) | {c for c in opts.levels}
    if isinstance(opts.target, str) and opts.target in opts.levels:
        if not all(isinstance(v, str) for v in opts.levels[opts.target]):
            str_columns.discard(opts.target)  # numeric classes: keep the target numeric
    return str_columns


def _ingest_table(
    frames: Callable[[set[str]], Iterator[pd.DataFrame]],
    tmp: Path,
    opts: _TableOptions,
    *,
    chunk_rows: int,
    progress: bool | Callable[[str, int], Any],
    attrs: dict[str, Any],
) -> dict[str, Any]:
    str_columns = table_str_columns(opts)
    prep = _FramePrep(opts)
    scan = _scan_table(frames, prep, opts, str_columns, progress)
    # A column that is numeric in some chunks and text in others is a
    # categorical column whose numeric chunks were parsed as numbers: read it
    # again as text so every level keeps its spelling.
    mixed = (scan.text_seen & (scan.numeric_seen | scan.bool_seen)) - str_columns
    if mixed:
        str_columns |= mixed
        prep = _FramePrep(opts)
        scan = _scan_table(frames, prep, opts, str_columns, progress)
    schema = _build_schema(scan, opts, str_columns)
    _check_nan_policy_table(scan, schema, opts)
    _check_table_memory(schema, chunk_rows)
    writer = _ZarrWriter(
        tmp,
        schema.columns,
        chunk_rows=chunk_rows,
        task=schema.task,
        n_classes=len(schema.classes or ()),
        target=schema.target,
        nan_policy=opts.nan_policy,
        progress=progress,
    )
    for raw in frames(str_columns):
        df = prep(raw, str_columns)
        X = schema.encode_X(df, scratch=True)
        writer.append(X, schema.encode_y(df), rows=df.index.to_numpy())
    attrs = dict(attrs)
    attrs["levels"] = schema.levels
    attrs["missing_level"] = opts.missing_level
    if schema.classes is not None:
        attrs["classes"] = schema.classes
    return writer.close(attrs)

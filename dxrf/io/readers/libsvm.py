"""Parsing of LibSVM / svmlight text files (optionally compressed) in blocks of lines."""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


def _open_text(path: Path) -> Any:
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rt")
    if name.endswith(".bz2"):
        return bz2.open(path, "rt")
    if name.endswith(".xz"):
        return lzma.open(path, "rt")
    return open(path)


_QID = re.compile(r"(^|\s)qid:\S+")


def _parse_libsvm(
    lines: list[str], first_line: int, zero_based: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parse LibSVM lines into (labels, line numbers, row, column, value) arrays.

    Blank and comment-only lines are skipped. Column indices are returned
    0-based. Parsing is vectorised per block: the ``idx:val`` pairs of all
    lines are joined and converted by one ``np.fromstring`` call.
    """
    labels: list[str] = []
    line_no: list[int] = []
    rests: list[str] = []
    counts: list[int] = []
    for k, line in enumerate(lines):
        hashpos = line.find("#")
        if hashpos >= 0:
            line = line[:hashpos]
        parts = line.split(None, 1)
        if not parts:
            continue
        rest = parts[1] if len(parts) > 1 else ""
        if "qid:" in rest:
            rest = _QID.sub(" ", rest)
        labels.append(parts[0])
        line_no.append(first_line + k)
        rests.append(rest)
        counts.append(rest.count(":"))
    try:
        y = np.array([float(v) for v in labels], dtype=np.float64)
    except ValueError:
        for lab, no in zip(labels, line_no):
            try:
                float(lab)
            except ValueError:
                raise ValueError(
                    f"line {no}: cannot read the label {lab!r} (multi-label files are not supported)"
                ) from None
        raise
    total = sum(counts)
    nums = np.empty(0)
    if total:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                nums = np.fromstring(" ".join(rests).replace(":", " "), sep=" ")
        except ValueError:
            nums = np.empty(0)  # malformed somewhere: the slow path below finds the line
    if nums.size != 2 * total:
        for rest, no in zip(rests, line_no):
            for tok in rest.split():
                i, sep, v = tok.partition(":")
                try:
                    float(i), float(v)
                    ok = bool(sep)
                except ValueError:
                    ok = False
                if not ok:
                    raise ValueError(f"line {no}: cannot read {tok!r} as index:value")
        raise ValueError(f"lines {first_line}..{first_line + len(lines) - 1}: malformed index:value pairs")
    idx = nums[0::2]
    vals = nums[1::2]
    rows = np.repeat(np.arange(len(labels)), counts)
    base = 0 if zero_based else 1
    bad = (idx != np.floor(idx)) | (idx < base)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"line {line_no[rows[i]]}: feature index {idx[i]:g} is not an integer >= {base}"
            + ("" if zero_based else " (indices are 1-based; pass zero_based=True for 0-based files)")
        )
    _check_repeated(rows, idx, line_no)
    return y, np.asarray(line_no, dtype=np.int64), rows, idx.astype(np.int64) - base, vals


def _check_repeated(rows: np.ndarray, idx: np.ndarray, line_no: list[int]) -> None:
    """Refuse a line that gives one feature index twice (a sparse matrix would keep one of the values silently)."""
    if idx.size < 2:
        return
    same_row = rows[1:] == rows[:-1]
    if bool(((idx[1:] > idx[:-1]) | ~same_row).all()):
        return  # ascending indices in every line, as LibSVM files are written: no repeats
    order = np.lexsort((idx, rows))
    r, i = rows[order], idx[order]
    dup = np.flatnonzero((r[1:] == r[:-1]) & (i[1:] == i[:-1]))
    if dup.size:
        k = dup[0]  # sorted by row first: the earliest line
        raise ValueError(f"line {line_no[r[k]]}: feature index {int(i[k])} appears more than once")


def _libsvm_blocks(path: Path, chunk_rows: int, n_rows: int | None, zero_based: bool) -> Iterator[tuple]:
    with _open_text(path) as f:
        line = 1
        done = 0
        while True:
            lines = []
            for text in f:
                lines.append(text)
                if len(lines) >= chunk_rows:
                    break
            if not lines:
                return
            y, nos, rows, cols, vals = _parse_libsvm(lines, line, zero_based)
            line += len(lines)
            if n_rows is not None and done + len(y) > n_rows:
                keep = n_rows - done
                sel = rows < keep
                y, nos, rows, cols, vals = y[:keep], nos[:keep], rows[sel], cols[sel], vals[sel]
            done += len(y)
            if len(y):
                yield y, nos, rows, cols, vals
            if n_rows is not None and done >= n_rows:
                return

"""Argument checks and source-format inference shared by the ingest paths.

The choices accepted for ``format``, ``nan_policy`` and ``task``, the format
named by a file's suffix (under any compression suffix), and the checks of
row counts, column names and dtypes that :func:`~dxrf.io.ingest` and
:func:`~dxrf.io.write_zarr` make before anything is written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dxrf.core.validation import check_int

_FORMATS = ("csv", "parquet", "npy", "npz", "libsvm")
_SUFFIX_FORMATS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".npy": "npy",
    ".npz": "npz",
    ".svm": "libsvm",
    ".libsvm": "libsvm",
    ".svmlight": "libsvm",
}
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz")
_NAN_POLICIES = ("error", "drop")
_TASKS = ("auto", "regression", "classification")


def _check_chunk_rows(chunk_rows: object) -> int:
    return check_int(chunk_rows, "chunk_rows")


def _check_choice(value: object, name: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value  # type: ignore[return-value]


def _check_n_rows(n_rows: object) -> int | None:
    return check_int(n_rows, "n_rows", allow_none=True)


def _base_suffix(path: Path) -> str:
    """The suffix that names the format, under any compression suffix."""
    name = path.name.lower()
    for comp in _COMPRESSION_SUFFIXES:
        if name.endswith(comp):
            name = name[: -len(comp)]
            break
    return os.path.splitext(name)[1]


def _is_tsv(path: Path) -> bool:
    return _base_suffix(path) == ".tsv"


def _infer_format(path: Path) -> str:
    suffix = _base_suffix(path)
    if suffix not in _SUFFIX_FORMATS:
        raise ValueError(
            f"cannot infer the format of {str(path)!r} from its suffix; pass format= one of {', '.join(_FORMATS)}"
        )
    return _SUFFIX_FORMATS[suffix]


def _feature_names(names: Sequence[str] | None, n: int, what: str) -> list[str]:
    if names is None:
        return [f"x{j}" for j in range(n)]
    names = [str(c) for c in names]
    if len(names) != n:
        raise ValueError(f"names has {len(names)} entries but {what} has {n} columns")
    _check_unique(names, "names")
    return names


def _check_unique(names: Sequence[str], what: str) -> None:
    """Raise ValueError naming the first column name that appears twice in ``names``."""
    seen: dict[str, int] = {}
    for j, c in enumerate(names):
        if c in seen:
            raise ValueError(
                f"{what}: column name {c!r} appears more than once (columns {seen[c]} and {j}, counting from 0); "
                f"give every column its own name"
            )
        seen[c] = j


def _select_columns(names: list[str], drop: Sequence[str]) -> list[int]:
    missing = [c for c in drop if c not in names]
    if missing:
        raise ValueError(f"drop_columns names columns that are not in the source: {missing}; columns: {names}")
    keep = [j for j, c in enumerate(names) if c not in set(drop)]
    if not keep:
        raise ValueError("no feature columns left after drop_columns")
    return keep


def _check_numeric_dtype(dtype: np.dtype, what: str) -> None:
    if dtype.kind not in "biuf":
        raise TypeError(f"{what} must hold numbers (bool, integer or float), got dtype {dtype}")

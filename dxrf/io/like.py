"""Encoding a new file like an already ingested training group (``ingest(like=...)``).

A test file must get the training group's columns: the same one-hot levels
(a level missing from the test file still gets its all-zero column), the same
column order and the same target classes. The test group keeps its own
column statistics (they describe its own rows); a model carries the training
statistics it was fitted with.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from dxrf.io.dataset import open_zarr


def training_encoding(
    like: str | os.PathLike,
    target: str | int | None,
    levels: Mapping[str, Sequence[Any]] | None,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The levels, classes, missing-level flag and encoded columns of the group ``like``.

    Returns a dict with ``levels`` (the feature levels, plus the classes of a
    named classification ``target``), ``missing_level`` and ``columns``.
    """
    if levels:
        raise ValueError("give levels or like, not both (like takes the training group's levels)")
    train = open_zarr(like, storage_options=storage_options)
    attrs = train.attrs
    out_levels = {str(c): list(v) for c, v in (attrs.get("levels") or {}).items()}
    if isinstance(target, str) and train.classes is not None:
        if attrs.get("target") not in (None, target):
            raise ValueError(f"target {target!r} is not the training group's target {attrs.get('target')!r}")
        out_levels[target] = list(train.classes)
    return {
        "levels": out_levels,
        "missing_level": bool(attrs.get("missing_level", False)),
        "columns": list(train.columns),
        "path": train.path,
    }


def check_columns_like(columns: Sequence[str], like_columns: Sequence[str], like: str) -> None:
    """Raise a ValueError naming the difference when ``columns`` are not the training group's."""
    if list(columns) == list(like_columns):
        return
    missing = [c for c in like_columns if c not in set(columns)]
    extra = [c for c in columns if c not in set(like_columns)]
    if missing or extra:
        detail = f"missing {missing[:5]}" if missing else f"not in the training group: {extra[:5]}"
    else:
        detail = "same names in another order"
    raise ValueError(f"the columns differ from those of {like!r} ({detail})")

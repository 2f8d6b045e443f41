"""Checks of the fitted attributes a model may save and must have when loaded.

A model file is data from outside: loading must not set arbitrary
attributes (``predict``, ``__dict__``), accept a ridge model relabelled as a
classifier, or hand NaN coefficients to ``predict``. Each estimator class
declares next to its own code the fitted attributes it writes, their kinds
(:data:`dxrf.core.persistable.KINDS`), and which of them every fitted model
has (``_fitted_schema``); this module holds what each kind means.
:func:`check_fitted_names` runs on save and on load (before any array is
read); :func:`check_fitted_values` runs on load, after decoding and before
the estimator's own consistency checks (``_check_loaded``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from dxrf.core.errors import ModelFormatError
from dxrf.core.persistable import FITTED_NAME, fitted_schema, lookup
from dxrf.kernels.kernel import FeatureKernel
from dxrf.stats.feature_stats import FeatureStats

__all__ = ["check_fitted_names", "check_fitted_values"]


def check_fitted_names(cls: type, names: Any, where: str) -> None:
    """The names of a model's fitted attributes must be ones ``cls`` declares.

    On save a ``TypeError`` (an estimator this version cannot describe); on
    load ``where`` names the file and the error is a ``ValueError`` from the
    caller. A fitted model must have every attribute that is not optional.
    """
    schema = fitted_schema(cls)
    names = list(names)
    for name in names:
        if not isinstance(name, str) or not FITTED_NAME.match(name) or name not in schema:
            raise ModelFormatError(f"{where}: {name!r} is not a fitted attribute of {cls.__name__}")
    if names:
        missing = [n for n, kind in schema.items() if not kind.endswith("?") and n not in names]
        if missing:
            raise ModelFormatError(f"{where}: a fitted {cls.__name__} must have {', '.join(missing)}; the file lacks it")


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _kind_error(kind: str, v: Any) -> str | None:
    """Why ``v`` is not of ``kind`` (None when it is)."""
    if kind == "int":
        ok = isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) and v >= 0
        return None if ok else "a non-negative integer"
    if kind in ("real", "real-or-nan", "real-or-none"):
        if v is None and kind == "real-or-none":
            return None
        if not _is_real(v):
            return "a number"
        return None if kind == "real-or-nan" or math.isfinite(v) else "a finite number"
    if kind == "bool":
        return None if isinstance(v, (bool, np.bool_)) else "True or False"
    if kind == "str":
        return None if isinstance(v, str) else "a string"
    if kind == "dict":
        return None if isinstance(v, Mapping) else "a dict"
    if kind == "finite-or-none":
        return None if v is None else _kind_error("finite", v)
    if kind == "finite":
        if _is_real(v):
            return None if math.isfinite(v) else "finite"
        if not isinstance(v, np.ndarray) or v.dtype.kind not in "biuf":
            return "a numeric array"
        if v.dtype.kind != "f":  # every writer stores fitted floats: integers or booleans were put there
            return f"a floating-point array (got dtype {v.dtype})"
        return None if np.isfinite(v).all() else "finite (it holds NaN or infinity)"
    if kind == "numbers":
        return None if isinstance(v, np.ndarray) and v.dtype.kind in "biuf" else "a numeric array"
    if kind in ("labels", "labels-or-none"):
        if v is None and kind == "labels-or-none":
            return None
        if not isinstance(v, np.ndarray) or v.ndim != 1 or v.dtype.kind not in "biufUSO":
            return "a 1-d array of class labels"
        return None if len(set(v.tolist())) == v.size >= 2 else "at least two distinct class labels"
    if kind == "names":
        ok = isinstance(v, np.ndarray) and v.ndim == 1 and all(isinstance(s, str) for s in v.tolist())
        return None if ok else "a 1-d array of names"
    if kind == "index-or-none":
        return None if v is None else _kind_error("index", v)
    if kind == "index":
        ok = isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind in "iu" and (v.size == 0 or v.min() >= 0)
        return None if ok else "a 1-d array of non-negative integers"
    if kind == "kernel":
        return None if isinstance(v, FeatureKernel) else "a feature kernel"
    if kind == "stats":
        return None if isinstance(v, FeatureStats) else "feature statistics"
    if kind == "estimator":
        return None if lookup(type(v).__name__) is type(v) and hasattr(v, "get_params") else "a dxrf estimator"
    raise AssertionError(f"unknown kind {kind!r}")  # pragma: no cover - declarations are checked on registration


def check_fitted_values(est: Any, where: str) -> None:
    """Each declared fitted attribute present on ``est`` must be of its declared kind."""
    for name, kind in fitted_schema(type(est)).items():
        if name not in vars(est):
            continue
        why = _kind_error(kind.rstrip("?"), vars(est)[name])
        if why is not None:
            raise ModelFormatError(f"{where}: {type(est).__name__}.{name} must be {why}")

"""The fitted attributes each estimator may save and must have when loaded.

A model file is data from outside: loading must not set arbitrary
attributes (``predict``, ``__dict__``), accept a ridge model relabelled as a
classifier, or hand NaN coefficients to ``predict``. Each estimator class
declares here the fitted attributes it writes, their kinds, and which of them
every fitted model has. :func:`check_fitted_names` runs on save and on load
(before any array is read); :func:`check_fitted_values` runs on load, after
decoding and before the estimator's own consistency checks
(``_check_loaded``).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["SCHEMAS", "check_fitted_names", "check_fitted_values"]

#: kinds of fitted values; a trailing "?" marks an attribute that only some fits set
_KINDS = (
    "int",  # a non-negative Python int
    "real",  # a finite number
    "real-or-nan",  # a number, NaN allowed (a score lost to rounding)
    "real-or-none",
    "bool",
    "str",
    "finite",  # a finite number or a numeric array of finite values (coefficients)
    "finite-or-none",
    "numbers",  # a numeric array, NaN allowed (validation curves)
    "labels",  # a 1-d array of at least two distinct class labels
    "labels-or-none",
    "names",  # a 1-d array of strings (feature_names_in_)
    "index",  # a 1-d array of non-negative integers
    "index-or-none",
    "kernel",
    "stats",
    "estimator",
    "dict",
)

_COMMON = {"n_features_in_": "int", "feature_names_in_": "names?"}
_MAP = {**_COMMON, "kernel_": "kernel"}
_MODEL = {**_COMMON, "features_": "estimator", "kernel_": "kernel", "n_passes_": "int"}
_RIDGE = {
    **_MODEL,
    "alpha_": "real",
    "coef_": "finite",
    "intercept_": "finite",
    "train_mse_": "real?",
    "alphas_": "finite?",
    "validation_errors_": "numbers?",
    "y_scale_": "finite-or-none?",  # [y_min, y_max] of a target scaled by open_zarr(scale_y=True)
    "stats_": "stats?",  # the running statistics of partial_fit
}
_CLASSIFIER = {
    **_RIDGE,
    "classes_": "labels",
    "n_iter_": "int",
    "solver_": "str?",
    "hessian_rows_": "int?",
    "converged_": "bool?",
}
_SEARCH = {
    "cv_results_": "dict",
    "best_index_": "int",
    "best_params_": "dict",
    "best_score_": "real-or-nan",
    "n_splits_": "int",
    "n_candidates_": "int",
    "median_bandwidth_": "real-or-none",
    "bandwidth_": "real",
    "random_state_": "int",
    "search_times_": "dict",
}
_SGD = {
    **_MODEL,
    "step_size_": "real",
    "best_epoch_": "int",
    "coef_": "finite",
    "intercept_": "finite",
    "n_epochs_": "int",
    "n_iter_": "int",
    "validation_errors_": "numbers",
    "train_errors_": "numbers",
    "y_scale_": "finite-or-none?",
}
_SELECTOR = {
    **_COMMON,
    "n_passes_": "int",
    "candidates_": "estimator",
    "candidate_stats_": "stats?",
    "selected_": "index",
    "scales_": "finite",
    "weights_": "finite",
    "kernel_": "kernel",
    "stats_": "stats",
}
_SUPERVISED_SELECTOR = {**_SELECTOR, "task_": "str", "classes_": "labels-or-none", "scores_": "numbers"}

#: class name -> {fitted attribute: kind}
SCHEMAS: dict[str, dict[str, str]] = {
    "RandomFourierFeatures": {**_MAP, "bandwidth_": "real", "offsets_": "finite"},
    "RandomReLUFeatures": {**_MAP, "bandwidth_": "real"},
    "RandomMaxoutFeatures": dict(_MAP),
    "RandomLinearSketch": dict(_MAP),
    "NystroemFeatures": {**_MAP, "bandwidth_": "real", "landmark_indices_": "index-or-none", "n_passes_": "int"},
    "RandomFeatureRidge": dict(_RIDGE),
    "RandomFeatureClassifier": dict(_CLASSIFIER),
    "RandomFeatureRidgeCV": {**_RIDGE, **_SEARCH},
    "RandomFeatureClassifierCV": {**_CLASSIFIER, **_SEARCH},
    "RandomFeatureSGDRegressor": dict(_SGD),
    "RandomFeatureSGDClassifier": {**_SGD, "classes_": "labels"},
    "RandomFeaturePCA": {
        **_MODEL,
        "components_": "finite",
        "explained_variance_": "finite",
        "explained_variance_ratio_": "finite",
        "singular_values_": "finite",
        "mean_": "finite",
        "n_components_": "int",
        "n_samples_": "int",
    },
    "LeverageScoreSampler": {**_SELECTOR, "lam_": "real", "dof_": "real", "n_samples_": "int"},
    "EnergyScoreSelector": dict(_SUPERVISED_SELECTOR),
    "KernelAlignmentSelector": {**_SUPERVISED_SELECTOR, "divergence_": "real"},
}

_NAME = re.compile(r"[a-z][a-z0-9_]*_\Z")


def _schema(cls: type) -> dict[str, str]:
    try:
        return SCHEMAS[cls.__name__]
    except KeyError:
        raise TypeError(f"{cls.__name__} declares no fitted attributes for model files") from None


def check_fitted_names(cls: type, names: Any, where: str) -> None:
    """The names of a model's fitted attributes must be ones ``cls`` declares.

    On save a ``TypeError`` (an estimator this version cannot describe); on
    load ``where`` names the file and the error is a ``ValueError`` from the
    caller. A fitted model must have every attribute that is not optional.
    """
    from dxrf.persist.format import ModelFormatError

    schema = _schema(cls)
    names = list(names)
    for name in names:
        if not isinstance(name, str) or not _NAME.match(name) or name not in schema:
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
        from dxrf.features.kernel import FeatureKernel

        return None if isinstance(v, FeatureKernel) else "a feature kernel"
    if kind == "stats":
        from dxrf.stats.feature_stats import FeatureStats

        return None if isinstance(v, FeatureStats) else "feature statistics"
    if kind == "estimator":
        return None if type(v).__name__ in SCHEMAS and hasattr(v, "get_params") else "a dxrf estimator"
    raise AssertionError(f"unknown kind {kind!r}")  # pragma: no cover - the table above is fixed


def check_fitted_values(est: Any, where: str) -> None:
    """Each declared fitted attribute present on ``est`` must be of its declared kind."""
    from dxrf.persist.format import ModelFormatError

    for name, kind in _schema(type(est)).items():
        if name not in vars(est):
            continue
        why = _kind_error(kind.rstrip("?"), vars(est)[name])
        if why is not None:
            raise ModelFormatError(f"{where}: {type(est).__name__}.{name} must be {why}")

"""Incremental fitting (``partial_fit``): features fixed at the first call, statistics that add up.

The first call fixes the random features: an unfitted map is fitted on that
first batch (a ``"median"`` bandwidth from its rows), a fitted map or
selector is used as it is, and an unfitted selector is refused (it chooses
from statistics of all the data). Each call then adds its rows' statistics
to the running ``stats_`` (:class:`~dxrf.stats.feature_stats.FeatureStats` is a monoid)
and the solution is solved again from them: after any sequence of calls the
model equals a ``fit`` on all the rows seen, up to rounding.
"""

from __future__ import annotations

import copy

import dask.array as da
import numpy as np

from dxrf.core.validation import is_dask
from dxrf.kernels.kernel import FeatureKernel
from dxrf.features.maps import fit_map
from dxrf.stats.feature_stats import FeatureStats
from dxrf.stats.accumulation import accumulate
from dxrf.learners._base import is_evidence, is_selector

__all__ = ["PartialFitMixin", "partial_features"]


def _data_dependent(features: object) -> str | None:
    """Why an unfitted feature map cannot be fixed from one batch, or None."""
    if is_selector(features):
        return (
            f"{type(features).__name__} chooses its features from statistics of all the data; "
            "fit it first (e.g. on a sample) and pass the fitted selector, or use fit"
        )
    return None


def partial_features(est: object, X: np.ndarray | da.Array, sample_weight: object = None, y: object = None) -> FeatureKernel:
    """Fix ``est``'s features at its first ``partial_fit`` call; set ``features_`` and ``kernel_``.

    A fitted map or selector (one with a ``kernel_``) is used as it is (a
    copy); an unfitted map is cloned, seeded like ``fit`` does, and fitted on
    this first batch: a ``"median"`` bandwidth (the default features') is the
    median heuristic of the first batch's rows (weighted by its checked
    ``sample_weight``), and stays fixed afterwards; so are ``"ard"``
    lengthscales, learned from the first batch's targets ``y``.
    An unfitted selector is refused with a ``ValueError`` saying what to pass.
    """
    features = est.features
    if features is not None and isinstance(getattr(features, "kernel_", None), FeatureKernel):
        fitted = copy.deepcopy(features)
        if fitted.kernel_.n_features_in != X.shape[1]:
            raise ValueError(
                f"X has {X.shape[1]} features but the fitted features expect {fitted.kernel_.n_features_in}"
            )
    else:
        if features is None or not hasattr(features, "get_params"):
            features = est._make_features()  # the default map, or the usual TypeError for a non-map
        why = _data_dependent(features)
        if why is not None:
            raise ValueError(f"partial_fit cannot fix these features at its first call: {why}")
        fitted = est._make_features()
        fit_map(fitted, X, sample_weight, y)  # the batch's number of columns, its rows for a median or ard bandwidth
        if not isinstance(getattr(fitted, "kernel_", None), FeatureKernel):
            raise TypeError(f"features must be a dxrf feature map with a fitted kernel_, got {type(fitted).__name__}")
    est.features_ = fitted
    est.kernel_ = fitted.kernel_
    est.n_passes_ = 0
    return fitted.kernel_


def partial_classes(est: object, classes: object, first: bool) -> np.ndarray:
    """The class labels of a ``partial_fit`` call: given at the first call, the same (or omitted) later."""
    from dxrf.core.labels import class_labels

    if first:
        if classes is None:
            raise ValueError(
                "classes must be passed at the first call to partial_fit: every class label, e.g. classes=np.unique(y_all)"
            )
        return class_labels(np.asarray(classes).reshape(-1), type(est).__name__)
    known = est.classes_
    if classes is not None and not np.array_equal(np.unique(np.asarray(classes)), known):
        raise ValueError(f"classes={classes!r} is not the classes_ of the first partial_fit call: {known!r}")
    return known


def check_batch_labels(y: np.ndarray | da.Array, known: np.ndarray) -> None:
    """Every label of a batch must be among the classes fixed at the first call."""
    labels = np.asarray(da.unique(y).compute()) if is_dask(y) else np.unique(y)
    unknown = np.setdiff1d(labels, known)
    if unknown.size:
        raise ValueError(f"y holds labels {unknown.tolist()!r} that are not in classes {known.tolist()!r}")


class PartialFitMixin:
    """``partial_fit`` of the Gram-based learners: running statistics, a solve after each call.

    Subclasses provide ``_partial_targets(X, y, first, **kw)`` returning the
    checked ``X`` and the target columns (float, 2-d), and
    ``_set_partial_coef(coef, intercept)``.
    """

    def _partial_started(self) -> bool:
        return isinstance(getattr(self, "stats_", None), FeatureStats) and hasattr(self, "kernel_")

    def _partial_check(self) -> None:
        self._check_params()
        if self.alphas is not None and not hasattr(self, "alpha_") and not is_evidence(getattr(self, "validation", None)):
            raise ValueError(
                "partial_fit has no validation rows to choose a penalty from alphas; "
                "set alphas=None and give alpha=, or use fit (which validates the whole grid in one pass)"
            )

    def _partial_X(self, X: object, first: bool) -> np.ndarray | da.Array:
        X = self._validate_X(X, reset=first)
        if not first and X.shape[1] != self.kernel_.n_features_in:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} was fitted on {self.kernel_.n_features_in}")
        return X

    @staticmethod
    def _partial_y(y: object, n: int) -> np.ndarray | da.Array:
        if y is None:
            raise ValueError("partial_fit requires y to be passed, but the target y is None")
        y = y if is_dask(y) else np.asarray(y)
        if y.ndim == 0 or y.shape[0] != n:
            raise ValueError(f"y has {y.shape[0] if y.ndim else 0} rows but X has {n}")
        return y

    def _after_fit(self) -> bool:
        """True when ``fit`` fixed the features (and classes) and no ``partial_fit`` ran since."""
        return not self._partial_started() and isinstance(getattr(self, "kernel_", None), FeatureKernel)

    def _partial_kernel(self, X: np.ndarray | da.Array, sample_weight: object = None, T: object = None) -> FeatureKernel:
        if self._after_fit():
            # partial_fit after fit: the fitted features stay; the statistics
            # start from this batch (fit keeps none: an M x M matrix per model)
            if X.shape[1] != self.kernel_.n_features_in:
                raise ValueError(f"X has {X.shape[1]} features, but the fitted features expect {self.kernel_.n_features_in}")
            self.n_passes_ = 0
            return self.kernel_
        return partial_features(self, X, sample_weight, T)

    def _partial_update(
        self, X: np.ndarray | da.Array, T: np.ndarray | da.Array, first: bool, sample_weight: object = None
    ) -> np.ndarray:
        """Add the batch's statistics and solve with ``alpha`` (no validation split); return coef (M, k).

        With ``alphas`` (allowed only after a ``fit``) the penalty is the
        ``alpha_`` that ``fit`` chose. ``sample_weight`` (checked) weighs the batch's rows.
        """
        from dxrf.solvers.evidence import evidence_path
        from dxrf.solvers.ridge_path import check_alpha_grid, mse_from_stats, solve_ridge, statistics_rtol

        kernel = self._partial_kernel(X, sample_weight, T) if first else self.kernel_
        batch = accumulate(X, T, kernel, sample_weight=sample_weight)
        if not first and batch.n_targets != self.stats_.n_targets:
            raise ValueError(f"y has {batch.n_targets} output(s), but earlier partial_fit calls had {self.stats_.n_targets}")
        self.stats_ = batch if first else self.stats_ + batch
        self.n_passes_ += 1
        for name in ("alphas_", "validation_errors_", "evidences_"):  # from an earlier fit with a grid
            self.__dict__.pop(name, None)
        if self.alphas is not None and is_evidence(getattr(self, "validation", None)):
            # validation="evidence" needs no validation rows: the grid's best on the running statistics
            grid = check_alpha_grid(self.alphas)
            path = evidence_path(self.stats_, grid, self.fit_intercept, rtol=statistics_rtol(kernel.dtype))
            self.alphas_, self.evidences_ = grid, path.log_evidence.sum(axis=1)
            self.alpha_ = float(grid[path.best_index])
        else:
            # with alphas, the penalty an earlier fit chose on its validation rows
            self.alpha_ = float(self.alpha) if self.alphas is None else float(self.alpha_)
        coef, intercept = solve_ridge(self.stats_, self.alpha_, self.fit_intercept)
        self.train_mse_ = float(mse_from_stats(self.stats_, coef, intercept).mean())
        self._intercept = intercept
        return coef

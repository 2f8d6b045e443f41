"""What every random-feature learner shares: features, the one pass, prediction.

A learner takes ``features=`` a feature map or a selector. ``fit`` fits the
map (drawing its parameters) or the selector's candidates, accumulates their
statistics with the learner's targets and validation split in ONE pass, lets
a selector choose from those statistics, and hands the selection's exact
statistics (sub-blocks, no further pass) to the solver.
"""

from __future__ import annotations

import dataclasses

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from dxrf.core.labels import class_labels, encode_classes
from dxrf.core.persistable import SaveMixin
from dxrf.core.target_scale import scale_of, unscale
from dxrf.core.validation import check_finite_rows, check_fraction, check_X, is_dask
from dxrf.core.weights import check_sample_weight, combined_weight
from dxrf.engine import map_rows
from dxrf.kernels.kernel import FeatureKernel
from dxrf.features.maps import RandomFourierFeatures
from dxrf.stats.feature_stats import FeatureStats
from dxrf.solvers.features_pass import features_pass, fit_feature_map, is_selector

__all__ = ["RandomFeatureModel", "TargetScaleMixin", "is_selector", "linear_predict", "linear_predict_quad",
           "check_validation", "is_evidence"]


def is_evidence(validation: object) -> bool:
    """Whether ``validation`` asks for the penalty to be chosen by the evidence (no validation rows)."""
    return isinstance(validation, str) and validation == "evidence"


def check_validation(validation: object, n: int | None = None) -> object:
    """A validation fraction in (0, 1), a boolean mask (NumPy or dask), or None."""
    if validation is None:
        return None
    if hasattr(validation, "shape"):
        if np.dtype(validation.dtype) != np.dtype(bool):
            raise TypeError(f"validation mask must be boolean, got dtype {validation.dtype}")
        if n is not None and validation.shape[0] != n:
            raise ValueError(f"validation mask has {validation.shape[0]} rows but X has {n}")
        return validation
    return check_fraction(validation, "validation", what="a fraction in (0, 1) or a boolean mask")


def _predict_block(X: np.ndarray, kernel: FeatureKernel, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    # features die inside the block: only the (n, k) scores leave it
    Z = kernel.rowwise(X)
    # the scores in float64: a float32 product's rounding depends on how BLAS
    # blocks the rows (gemm for many, dot for one), so a row's score would
    # depend on its neighbours; widening costs one (n, M) copy per block
    return Z.astype(np.float64, copy=False) @ coef + intercept


def linear_predict(X: np.ndarray | da.Array, kernel: FeatureKernel, coef: np.ndarray, intercept: np.ndarray):
    """``z(X) @ coef + intercept`` as float64, eager for NumPy, lazy and fused for dask.

    ``coef`` has shape ``(M, k)``; the result has shape ``(n, k)``.
    """
    coef = np.asarray(coef, dtype=np.float64)
    intercept = np.asarray(intercept, dtype=np.float64)
    T = kernel.transform_matrix
    if T is not None:
        # a Nystroem map: z(x) coef = k(x, L) (T coef), so no block pays an M x M product
        coef = T @ coef
        kernel = dataclasses.replace(kernel, whitening=None, scale=np.ones(kernel.n_base))
    if not is_dask(X):
        out = map_rows(np.asarray(X), _predict_block, (kernel, coef, intercept), coef.shape[1], np.float64,
                       work=kernel.n_components)
        return out.astype(np.float64, copy=False)
    return map_rows(X, _predict_block, (kernel, coef, intercept), coef.shape[1], np.float64,
                    n_features=kernel.n_features_in, name="dxrf-predict", work=kernel.n_components)


def _predict_quad_block(
    X: np.ndarray, kernel: FeatureKernel, coef: np.ndarray, intercept: np.ndarray, factor: np.ndarray, offset: np.ndarray
) -> np.ndarray:
    # the scores and |(z - center) F|^2 from one feature block: neither Z nor Z F leaves the task
    Z = kernel.rowwise(X).astype(np.float64, copy=False)
    V = Z @ factor
    V -= offset
    return np.column_stack([Z @ coef + intercept, np.einsum("ij,ij->i", V, V)])


def linear_predict_quad(
    X: np.ndarray | da.Array, kernel: FeatureKernel, coef: np.ndarray, intercept: np.ndarray,
    factor: np.ndarray, center: np.ndarray,
):
    """``(z(X) @ coef + intercept, |(z(X) - center) @ factor|^2)`` in one map over the rows.

    Shapes ``(n, k)`` and ``(n,)``, float64; lazy for dask (one task per row
    chunk computes both; only ``k + 1`` columns per row leave it). A Nyström
    whitening ``T`` is folded into ``coef`` and ``factor`` as in
    :func:`linear_predict`.
    """
    coef = np.asarray(coef, dtype=np.float64)
    factor = np.asarray(factor, dtype=np.float64)
    offset = np.asarray(center, dtype=np.float64) @ factor  # (z - c) F = z F - c F
    intercept = np.asarray(intercept, dtype=np.float64)
    T = kernel.transform_matrix
    if T is not None:
        coef, factor = T @ coef, T @ factor
        kernel = dataclasses.replace(kernel, whitening=None, scale=np.ones(kernel.n_base))
    k = coef.shape[1]
    shared = (kernel, coef, intercept, factor, offset)
    work = kernel.n_components + factor.shape[1]
    if not is_dask(X):
        out = map_rows(np.asarray(X), _predict_quad_block, shared, k + 1, np.float64, work=work)
    else:
        out = map_rows(X, _predict_quad_block, shared, k + 1, np.float64, n_features=kernel.n_features_in,
                       name="dxrf-predict-std", work=work)
    return out[:, :k], out[:, k]


class TargetScaleMixin:
    """Regressors fitted on ``open_zarr(..., scale_y=True)``'s target predict in the data's units.

    ``fit`` sets ``y_scale_``: ``[y_min, y_max]`` of the scaled target it was
    given, else None. Subclasses pass their raw predictions through
    :meth:`_to_data_units`; ``score`` compares in the data's units, also
    against a scaled test target.
    """

    def _to_data_units(self, pred: object) -> object:
        return unscale(pred, getattr(self, "y_scale_", None))

    def score(self, X: object, y: object, sample_weight: object = None) -> float:
        """R^2 of ``predict(X)`` against ``y``, in the data's units.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,) or (n_samples, k)
            In the data's units, or a target scaled by ``open_zarr(...,
            scale_y=True)`` (mapped back before comparing).
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        float
        """
        if getattr(self, "y_scale_", None) is not None:
            y = unscale(y, scale_of(y))
        return super().score(X, y, sample_weight=sample_weight)


class RandomFeatureModel(SaveMixin, BaseEstimator):
    """Base of the learners: ``features=``, the one pass, and pass counting.

    Subclasses call :meth:`_features_pass` in ``fit``; it sets ``features_``
    (the fitted map or selector), ``kernel_`` (the final feature kernel) and
    ``n_passes_`` (reads of X so far).
    """

    def _make_features(self) -> object:
        features = self.features
        if features is None:
            features = RandomFourierFeatures(n_components=100, bandwidth="median")
        if not (is_selector(features) or (hasattr(features, "fit") and hasattr(features, "transform"))):
            raise TypeError(
                f"features must be a dxrf feature map or selector (e.g. RandomFourierFeatures(...)), got {features!r}"
            )
        features = clone(features)
        # the learner's random_state seeds features that have none of their own
        seed = getattr(self, "random_state", None)
        if seed is not None and features.get_params(deep=False).get("random_state", 0) is None:
            features.set_params(random_state=seed)
        return features

    def _fit_map(
        self, features: object, X: np.ndarray | da.Array, sample_weight: np.ndarray | da.Array | None = None,
        y: np.ndarray | da.Array | None = None,
    ) -> FeatureKernel:
        """Fit a feature map (no Gram, no pass) and keep it as ``features_`` and ``kernel_``.

        Sets ``n_passes_``: a bandwidth estimated from sampled rows reads X once.
        ``sample_weight`` weighs a median bandwidth's rows, and with the
        targets ``y`` an ``"ard"`` bandwidth's (:func:`~dxrf.features.maps.fit_map`).
        """
        kernel, self.n_passes_ = fit_feature_map(features, X, sample_weight, y)
        self.features_ = features
        self.kernel_ = kernel
        return kernel

    def _validate_X(self, X: object, reset: bool) -> np.ndarray | da.Array:
        return check_X(self, X, reset=reset)

    def _validate_Xy(self, X: object, y: object, *, y_numeric: bool, multi_output: bool):
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        if is_dask(X) or is_dask(y):
            X = self._validate_X(X if is_dask(X) else da.from_array(np.asarray(X), chunks=(max(1, len(X)),) + np.shape(X)[1:]), reset=True)
            if not is_dask(y):
                y = np.asarray(y)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}")
            if y.ndim not in (1, 2) or (y.ndim == 2 and not multi_output and y.shape[1] != 1):
                raise ValueError(f"y must be 1-dimensional{' or 2-dimensional' if multi_output else ''}, got shape {y.shape}")
            return X, y
        y_arr = np.asarray(y)
        if y_arr.ndim:  # before scikit-learn's own check of y, whose message differs
            check_finite_rows(y_arr, "y")
        X, y = validate_data(
            self, X, y, reset=True, dtype=[np.float64, np.float32], y_numeric=y_numeric, multi_output=multi_output,
            ensure_all_finite=False,
        )
        # the engine's message for NumPy as for dask input (scikit-learn's differs)
        check_finite_rows(X, "X")
        return X, y

    def _class_targets(self, X: object, y: object, sample_weight: object = None) -> tuple:
        """Validate ``X``, class labels ``y`` and weights; set ``classes_``.

        Returns ``X``, the +-1 class columns and the row weights:
        ``sample_weight`` times the rows' ``class_weight`` (a parameter of
        the classifiers), or None when neither is given.
        """
        X, y = self._validate_Xy(X, y, y_numeric=False, multi_output=False)
        y = y.reshape(-1) if is_dask(y) else np.asarray(y).reshape(-1)
        self.classes_ = class_labels(y, type(self).__name__)
        w = check_sample_weight(sample_weight, int(X.shape[0]))
        w = combined_weight(w, getattr(self, "class_weight", None), self.classes_, y)
        return X, encode_classes(y, self.classes_), w

    def _regression_targets(self, X: object, y: object, sample_weight: object = None) -> tuple:
        """Validate ``X``, a numeric ``y`` (1 or k columns, as floats) and ``sample_weight``; set ``y_scale_``."""
        self.y_scale_ = scale_of(y)
        X, y = self._validate_Xy(X, y, y_numeric=True, multi_output=True)
        w = check_sample_weight(sample_weight, int(X.shape[0]))
        return X, (y if np.issubdtype(y.dtype, np.floating) else y.astype(np.float64)), w

    def _features_pass(
        self,
        X: np.ndarray | da.Array,
        Y: np.ndarray | da.Array | None,
        *,
        validation: object = None,
        validation_seed: int = 0,
        task: str | None = None,
        classes: np.ndarray | None = None,
        sample_weight: np.ndarray | da.Array | None = None,
        single_penalty: bool = False,
    ) -> tuple[FeatureStats, FeatureStats | None]:
        """Fit the features and accumulate their statistics in one pass.

        ``single_penalty`` (the caller solves one ridge problem with no
        validation): a Cholesky-whitened Nyström map's statistics are
        returned unwhitened, as a :class:`~dxrf.solvers.landmark_solve.LandmarkStats`.

        A selector with a row sample (``LeverageScoreSampler(n_samples=N0)``)
        takes two: its candidates' statistics over the sample, then the
        selected features' over all rows.

        Returns the training statistics of the final features and, with a
        ``validation`` fraction or mask, the validation statistics. A selector
        selects from the *training* statistics only, so validation rows stay
        unseen by every choice made on them. ``sample_weight`` (checked)
        weighs every statistic, hence the selection and the solve, and a
        ``"median"`` bandwidth's rows.
        """
        done = features_pass(
            self._make_features(), X, Y, validation=check_validation(validation, X.shape[0]),
            validation_seed=validation_seed, task=task, classes=classes, sample_weight=sample_weight,
            single_penalty=single_penalty,
        )
        self.features_, self.kernel_, self.n_passes_ = done.features, done.kernel, done.n_passes
        return done.train, done.valid

    def _check_fitted(self) -> None:
        check_is_fitted(self, "kernel_")

    def transform_features(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """The fitted features ``z(X)`` (lazy for dask input)."""
        from dxrf.features.maps import apply_kernel

        self._check_fitted()
        return apply_kernel(self._validate_X(X, reset=False), self.kernel_)

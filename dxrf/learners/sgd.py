"""Mini-batch SGD on random features (Carratino, Rudi & Rosasco, 2018).

The model is linear in the random features, ``f(x) = <v, z(x)> + beta``, and
is trained by mini-batch stochastic gradient descent with a constant step::

    v_{t+1} = v_t - gamma (1/b) sum_{i in B_t} l'(<v_t, z(x_i)> + beta_t, y_i) z(x_i)

For the squared loss ``l'(s, y) = s - y``: the estimator of Carratino et al.,
whose only regularisation is implicit (step, mini-batch, number of passes,
number of features), here with early stopping on validation rows.

Memory is ``O(M b)``: no ``M x M`` object is formed anywhere, so ``M`` may be
far larger than what a Gram or a ridge solve allows (50,000 and more).

How the passes run on Dask (sequential chains and averaging), how validation rows are
scored in the same pass, and where the tasks run: :mod:`dxrf.solvers.sgd_passes`.
"""

from __future__ import annotations

import inspect
from typing import Any

import dask.array as da
import numpy as np
from scipy.special import expit
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if

from dxrf.core.validation import (
    check_parameters,
    rule,
    check_bool,
    check_choice,
    check_nonnegative,
    check_positive_float,
    check_positive_int,
    is_dask,
    is_integer,
    make_rng,
)
from dxrf.core.errors import ModelFormatError
from dxrf.core.options import CACHE_SETTINGS, resolve_options
from dxrf.core.persistable import MODEL, fitted
from dxrf.core.target_scale import scale_of
from dxrf.core.weights import check_class_weight, check_sample_weight, combined_weight
from dxrf.learners._base import RandomFeatureModel, TargetScaleMixin, check_validation, is_selector, linear_predict

__all__ = [
    "LOSSES",
    "MAX_SELECTOR_CANDIDATES",
    "MODES",
    "RandomFeatureSGDClassifier",
    "RandomFeatureSGDRegressor",
]

LOSSES = ("squared", "hinge", "logistic")
MODES = ("sequential", "averaging")
# a selector's candidate pass accumulates an M0 x M0 Gram: at most 2 GiB of float64
MAX_SELECTOR_CANDIDATES = 16384


from dxrf.learners.sgd_docs import _COMMON_ATTRS, _COMMON_PARAMS, _REFERENCES
from dxrf.solvers.sgd_fit import SGDFit, SGDOptions, fit_sgd, partial_sgd, split_rows
from dxrf.solvers.sgd_passes import _VALIDATION_SEED
from dxrf.solvers.features_pass import learns_from_y, training_weight


# -- the estimators -----------------------------------------------------------------


#: each parameter checked once per call, in this order ("loss" takes each class's losses)
SGD_RULES = {
    "loss": None,
    "step_size": rule(check_positive_float, passes=("auto",), what="a positive number or 'auto'"),
    "batch_size": rule(check_positive_int),
    "max_passes": rule(check_positive_int),
    "patience": rule(check_positive_int),
    "tol": rule(check_nonnegative, finite=False),
    "mode": rule(check_choice, choices=MODES),
    "early_stopping": rule(check_bool),
    "fit_intercept": rule(check_bool),
    "shuffle": rule(check_bool),
    "cache_features": rule(check_choice, choices=CACHE_SETTINGS),
}
#: what partial_fit uses (no validation rows, so no early stopping or pass budget)
PARTIAL_PARAMETERS = ("loss", "step_size", "batch_size", "mode", "fit_intercept", "shuffle", "class_weight")


#: the fitted attributes of both SGD learners
_SGD_FITTED = fitted(
    MODEL,
    step_size_="real",
    best_epoch_="int",
    coef_="finite",
    intercept_="finite",
    n_epochs_="int",
    n_iter_="int",
    feature_cache_="str?",
    feature_cache_bytes_="int?",
    validation_errors_="numbers",
    train_errors_="numbers",
    y_scale_="finite-or-none?",
)


class _BaseSGD(RandomFeatureModel):
    """Shared fitting machinery of the SGD regressor and classifier."""

    _losses: tuple[str, ...] = ("squared",)

    # both estimators take the same parameters; only the losses allowed differ
    def __init__(
        self,
        features: object = None,
        *,
        loss: str = "squared",
        step_size: float | str = "auto",
        batch_size: int = 32,
        max_passes: int = 10,
        validation: float | np.ndarray | da.Array | None = 0.2,
        early_stopping: bool = True,
        patience: int = 3,
        tol: float = 1e-4,
        mode: str = "sequential",
        fit_intercept: bool = True,
        shuffle: bool = True,
        random_state: object = None,
        cache_features: str | bool = "auto",
    ) -> None:
        self.features = features
        self.loss = loss
        self.step_size = step_size
        self.batch_size = batch_size
        self.max_passes = max_passes
        self.validation = validation
        self.early_stopping = early_stopping
        self.patience = patience
        self.tol = tol
        self.mode = mode
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.cache_features = cache_features

    # -- parameters ----------------------------------------------------------------
    _extra_rules: dict = {}  # a subclass's own parameters

    def _check_params(self) -> None:
        check_parameters(self, self._fit_rules())
        if self.early_stopping and self.validation is None:
            raise ValueError("early_stopping=True needs validation rows: give validation= a fraction or a mask, or set early_stopping=False")

    def _check_partial_params(self) -> None:
        """The parameters ``partial_fit`` uses (no validation rows, so no early stopping)."""
        check_parameters(self, self._fit_rules(PARTIAL_PARAMETERS))

    def _fit_rules(self, names: tuple[str, ...] | None = None) -> dict:
        """The class's rules (``SGD_RULES`` with its own losses), all or those of ``names``."""
        rules = {**SGD_RULES, "loss": rule(check_choice, choices=self._losses), **self._extra_rules}
        return rules if names is None else {n: rules[n] for n in names if n in rules}

    def _shuffle_seed(self) -> int:
        """The seed of the shuffles (the feature map is seeded by the base class)."""
        rs = self.random_state
        if is_integer(rs):
            return int(rs)
        return int(make_rng(rs).integers(2**63))

    # -- fitting -------------------------------------------------------------------
    def _fit_features(self, X: Any, Y: Any, validation: Any, task: str, classes: Any, weights: Any = None) -> np.ndarray | None:
        """Draw the features (no Gram) or run a selector's candidate pass.

        Returns the training-target mean when the candidate pass gave it.
        """
        features = self.features
        if is_selector(features):
            params = features.get_params(deep=False)
            m0 = params.get("n_candidates") or 10 * int(params.get("n_components", 0))
            if m0 > MAX_SELECTOR_CANDIDATES:
                raise ValueError(
                    f"features is a selector with {m0} candidates: its candidate pass would accumulate a "
                    f"{m0} x {m0} Gram. SGD with a selector allows at most n_candidates={MAX_SELECTOR_CANDIDATES}; "
                    "for larger M give a feature map such as RandomFourierFeatures(n_components=M)"
                )
            train, _ = self._features_pass(X, Y, validation=validation, validation_seed=_VALIDATION_SEED, task=task,
                                           classes=classes, sample_weight=weights)
            return None if train.n == 0 else train.ysum / train.n
        features = self._make_features()
        if learns_from_y(features):  # "ard": learned on the training rows only
            weights = training_weight(weights, validation, _VALIDATION_SEED, X)
        self._fit_map(features, X, weights, Y)
        return None

    def _options(self) -> SGDOptions:
        return SGDOptions(
            loss=self.loss, step_size=self.step_size, batch_size=self.batch_size, max_passes=self.max_passes,
            early_stopping=self.early_stopping, patience=self.patience, tol=self.tol, mode=self.mode,
            fit_intercept=self.fit_intercept, shuffle=self.shuffle, validation=self.validation,
        )

    def _store(self, result: SGDFit) -> None:
        self.step_size_ = result.step
        self.coef_ = result.coef
        self.intercept_ = result.intercept
        self.n_epochs_ = result.n_epochs
        self.best_epoch_ = result.best_epoch
        self.n_iter_ = result.n_iter
        self.n_passes_ += result.n_passes
        self.validation_errors_ = result.validation_errors
        self.train_errors_ = result.train_errors
        if result.cache is not None:  # fit; partial_fit's one pass keeps nothing
            self.feature_cache_ = result.cache.status
            self.feature_cache_bytes_ = int(result.cache.estimate)

    def _partial_sgd(self, X: Any, Y: Any, first: bool, weights: Any = None) -> None:
        """One SGD pass over the batch, continuing from the current iterate (no validation rows).

        The first call (on an unfitted estimator) fixes the features as the
        Gram learners' ``partial_fit`` does and the step; a fitted estimator
        (by ``fit``, ``partial_fit`` or :func:`dxrf.load`) continues from its
        ``coef_``, ``intercept_`` and update count.
        """
        from dxrf.learners.partial import partial_features

        if first:
            partial_features(self, X, weights, Y)
        previous = None if first else SGDFit(
            self.coef_, self.intercept_, self.step_size_, int(self.n_epochs_), 0, int(self.n_iter_), 0, np.zeros(0),
            np.asarray(self.train_errors_),
        )
        self._store(partial_sgd(X, Y, self.kernel_, self._options(), seed=self._shuffle_seed(), previous=previous,
                                weights=weights))

    def _fit_sgd(self, X: Any, Y: Any, *, task: str, classes: Any = None, weights: Any = None) -> None:
        if not is_dask(Y):
            Y = np.asarray(Y, dtype=np.float64).reshape(X.shape[0], -1)
        elif Y.ndim == 1:
            Y = Y[:, None]
        validation = check_validation(self.validation, X.shape[0])
        split = split_rows(X, validation, self.validation)  # before any feature is drawn
        y_mean = self._fit_features(X, Y, validation, task, classes, weights)
        self._store(fit_sgd(X, Y, self.kernel_, self._options(), validation=validation, split=split,
                            seed=self._shuffle_seed(), weights=weights, y_mean=y_mean,
                            options=resolve_options(cache_features=self.cache_features)))

    def _scores(self, X: Any) -> np.ndarray | da.Array:
        self._check_fitted()
        X = self._validate_X(X, reset=False)
        return linear_predict(X, self.kernel_, self.coef_, self.intercept_)

    def _check_loaded(self) -> None:
        coef = getattr(self, "coef_", None)
        kernel = getattr(self, "kernel_", None)
        if coef is not None and kernel is not None and coef.shape[0] != kernel.n_components:
            raise ModelFormatError(f"coef_ has {coef.shape[0]} rows but the feature kernel has {kernel.n_components} features")
        if coef is not None:
            from dxrf.learners.ridge import check_class_outputs

            k = 1 if np.ndim(coef) == 1 else np.shape(coef)[1]
            if np.size(getattr(self, "intercept_", 0.0)) != k:
                raise ModelFormatError(f"intercept_ has {np.size(self.intercept_)} values for {k} output(s)")
            check_class_outputs(self, k)


class RandomFeatureSGDRegressor(TargetScaleMixin, RegressorMixin, _BaseSGD):
    __doc__ = (
        """Least-squares regression on random features by mini-batch SGD.

    The estimator of Carratino, Rudi & Rosasco: ``f(x) = <v, z(x)> + beta``
    trained by SGD with a constant step ``gamma`` and mini-batches of ``b``
    rows, ``v <- v - gamma (1/b) sum_{i in B} (f(x_i) - y_i) z(x_i)``, for at
    most ``max_passes`` passes, with early stopping on validation rows. There
    is no explicit penalty: step, mini-batch, passes and ``M`` regularise.
    The returned model is an end-of-pass iterate (the last one, or the best
    on validation with early stopping) without iterate averaging, as in the
    paper's analysis of the last iterate with a constant step. Rows are
    visited without replacement in each pass (random reshuffling, the usual
    multi-pass practice; the paper's analysis samples with replacement).

    Memory is ``O(M b)`` per task and ``O(M k)`` for the state: no ``M x M``
    object exists, so ``M`` may be very large. Multi-output targets are
    supported.

    Parameters
    ----------
    loss : {"squared"}, default="squared"
"""
        + _COMMON_PARAMS
        + """
    Attributes
    ----------"""
        + _COMMON_ATTRS
        + """    y_scale_ : ndarray of shape (2,) or None
        ``[y_min, y_max]`` when ``y`` was scaled by ``open_zarr(...,
        scale_y=True)``: ``predict`` and ``score`` are then in the data's units.
"""
        + _REFERENCES
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from dxrf import RandomFourierFeatures
    >>> from dxrf.learners.sgd import RandomFeatureSGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = np.sin(X[:, 0])
    >>> est = RandomFeatureSGDRegressor(RandomFourierFeatures(200), random_state=0).fit(X, y)
    >>> est.predict(X[:3]).shape
    (3,)
"""
    )

    _fitted_schema = _SGD_FITTED

    def fit(self, X: np.ndarray | da.Array, y: np.ndarray | da.Array, sample_weight: object = None) -> RandomFeatureSGDRegressor:
        """Draw the features and run SGD.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            A dask array is processed chunk by chunk on its scheduler.
        y : array-like or dask array of shape (n_samples,) or (n_samples, k)
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights ``>= 0`` multiplying each row's gradient (scikit-learn's
            SGD convention: a mini-batch's step is still divided by its ``b``
            rows); ``train_errors_``, ``validation_errors_`` and the
            intercept's start are weighted means. The minimiser is that of the
            weighted loss, but a stochastic method: integer weights are not
            bitwise equal to repeated rows (the visiting order differs).

        Returns
        -------
        self
        """
        self._check_params()
        X, y, w = self._regression_targets(X, y, sample_weight)
        self._fit_sgd(X, y, task="regression", weights=w)
        return self

    def partial_fit(self, X: np.ndarray | da.Array, y: np.ndarray | da.Array, sample_weight: object = None) -> RandomFeatureSGDRegressor:
        """One SGD pass over a batch, continuing from the current iterate.

        The first call on an unfitted estimator fixes the features (a map is
        fitted on this batch, a ``"median"`` bandwidth from its rows; a fitted
        map is used as it is; an unfitted selector is a ``ValueError``), the step and the intercept's
        start (the batch's target mean). Each call is one pass over its rows
        in a shuffled order keyed by the call count; there are no validation
        rows and no early stopping (``validation`` and ``max_passes`` are not
        used). After ``fit`` or :func:`dxrf.load` it continues from the
        fitted iterate. Works with ``dask_ml.wrappers.Incremental``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,) or (n_samples, k)
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Weights of this batch's rows (as in :meth:`fit`).

        Returns
        -------
        self
        """
        self._check_partial_params()
        first = not hasattr(self, "coef_")
        if first:
            self.y_scale_ = scale_of(y)
            X, y = self._validate_Xy(X, y, y_numeric=True, multi_output=True)
        else:
            X = self._validate_X(X, reset=False)
            y = y if is_dask(y) else np.asarray(y)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}")
        if is_dask(y):
            y = y.astype(np.float64)
            y = y[:, None] if y.ndim == 1 else y
        self._partial_sgd(X, y, first, check_sample_weight(sample_weight, int(X.shape[0])))
        return self

    def predict(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Predict ``z(X) v + beta``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples,) or (n_samples, k)
            Float64; 1-d for a single output. Lazy for dask input.
        """
        out = self._scores(X)
        return self._to_data_units(out[:, 0] if self.coef_.shape[1] == 1 else out)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


def _labels_block(s: np.ndarray, classes: np.ndarray) -> np.ndarray:
    if s.shape[1] == 1:
        return classes[(s[:, 0] > 0).astype(np.intp)]
    return classes[np.argmax(s, axis=1)]


def _proba_block(s: np.ndarray) -> np.ndarray:
    p = expit(s)
    if p.shape[1] == 1:
        return np.hstack([1.0 - p, p])
    total = p.sum(axis=1, keepdims=True)
    total[total == 0] = 1.0
    return p / total


class RandomFeatureSGDClassifier(ClassifierMixin, _BaseSGD):
    __doc__ = (
        """Linear classification on random features by mini-batch SGD.

    One-vs-rest like scikit-learn: the targets are ``+-1`` columns, one per
    class (a single column for two classes), all trained by the same SGD
    pass with shared mini-batches. ``predict`` takes the sign (two classes)
    or the argmax of the scores. See :class:`RandomFeatureSGDRegressor` for
    the algorithm and how it runs on Dask.

    Parameters
    ----------
    loss : {"squared", "hinge", "logistic"}, default="squared"
        ``(s - y)^2 / 2`` (least-squares classification), ``max(0, 1 - y s)``
        (linear SVM, a subgradient), or ``log(1 + exp(-y s))`` (logistic
        regression; enables ``predict_proba``). None is penalised.
    class_weight : "balanced", dict or None, default=None
        Weights per class multiplied into ``sample_weight``, as in
        :class:`~dxrf.RandomFeatureClassifier` (not ``"balanced"`` in ``partial_fit``).
"""
        + _COMMON_PARAMS
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)"""
        + _COMMON_ATTRS
        + _REFERENCES
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from dxrf.learners.sgd import RandomFeatureSGDClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2)); y = (X[:, 0] > 0).astype(int)
    >>> clf = RandomFeatureSGDClassifier(loss="logistic", random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
"""
    )

    _fitted_schema = fitted(_SGD_FITTED, classes_="labels")

    _losses = LOSSES

    def __init__(self, features: object = None, *, class_weight: object = None, **params: Any) -> None:
        super().__init__(features, **params)
        self.class_weight = class_weight

    # scikit-learn reads the parameters from the signature: the regressor's, plus class_weight
    __init__.__signature__ = inspect.signature(_BaseSGD.__init__).replace(parameters=[
        *inspect.signature(_BaseSGD.__init__).parameters.values(),
        inspect.Parameter("class_weight", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="object"),
    ])

    _extra_rules = {"class_weight": rule(check_class_weight, named=False)}

    def _check_partial_params(self) -> None:
        super()._check_partial_params()
        if isinstance(self.class_weight, str):
            raise ValueError('class_weight="balanced" needs the counts of all the data; partial_fit takes a dict or None')

    def fit(self, X: np.ndarray | da.Array, y: np.ndarray | da.Array, sample_weight: object = None) -> RandomFeatureSGDClassifier:
        """Draw the features and run one-vs-rest SGD.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
            Class labels.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights, as in :meth:`RandomFeatureSGDRegressor.fit`.

        Returns
        -------
        self
        """
        self._check_params()
        X, Y, w = self._class_targets(X, y, sample_weight)
        self._fit_sgd(X, Y, task="classification", classes=self.classes_, weights=w)
        return self

    def partial_fit(
        self, X: np.ndarray | da.Array, y: np.ndarray | da.Array, classes: object = None, sample_weight: object = None
    ) -> RandomFeatureSGDClassifier:
        """One one-vs-rest SGD pass over a batch, continuing from the current iterate.

        As :meth:`RandomFeatureSGDRegressor.partial_fit`; the first call on an
        unfitted estimator also needs ``classes``, every label that will ever
        appear (scikit-learn's convention).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
        classes : array-like, optional
            Every class label; required at the first call.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Weights of this batch's rows.

        Returns
        -------
        self
        """
        from dxrf.core.labels import encode_classes
        from dxrf.learners.partial import check_batch_labels, partial_classes

        self._check_partial_params()
        first = not hasattr(self, "coef_")
        classes_ = partial_classes(self, classes, first)
        X = self._validate_X(X, reset=first)
        y = y if is_dask(y) else np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be 1-d class labels with one per row of X ({X.shape[0]}), got shape {y.shape}")
        check_batch_labels(y, classes_)
        self.classes_ = classes_
        w = combined_weight(check_sample_weight(sample_weight, int(X.shape[0])), self.class_weight, classes_, y)
        self._partial_sgd(X, encode_classes(y, classes_), first, w)
        return self

    def decision_function(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Scores ``z(X) v + beta``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples,) or (n_samples, n_classes)
            1-d for two classes (positive means ``classes_[1]``). Lazy for dask.
        """
        s = self._scores(X)
        return s[:, 0] if self.coef_.shape[1] == 1 else s

    def predict(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Predicted class labels (lazy for dask input).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples,)
        """
        s = self._scores(X)
        if is_dask(s):
            return s.map_blocks(
                _labels_block, self.classes_, drop_axis=1, dtype=self.classes_.dtype, meta=np.empty((0,), dtype=self.classes_.dtype)
            )
        return _labels_block(s, self.classes_)

    def _has_proba(self) -> bool:
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Class probabilities (``loss="logistic"`` only).

        Two classes: ``[1 - p, p]`` with ``p = sigmoid(score)``. More classes:
        the one-vs-rest sigmoids normalised to sum to one (as scikit-learn's
        one-vs-rest logistic regression).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples, n_classes)
        """
        s = self._scores(X)
        if is_dask(s):
            return s.map_blocks(_proba_block, chunks=(s.chunks[0], (self.classes_.size,)), dtype=np.float64, meta=np.empty((0, 0)))
        return _proba_block(s)

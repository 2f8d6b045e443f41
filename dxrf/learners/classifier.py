"""Classification on random features: least squares (one-vs-rest ridge) or logistic."""

from __future__ import annotations

import dask.array as da
import numpy as np
from scipy.special import expit, log_softmax, softmax
from sklearn.base import ClassifierMixin
from sklearn.utils.metaestimators import available_if

from dxrf.core.labels import encode_classes
from dxrf.core.options import CACHE_SETTINGS, Options, resolve_options
from dxrf.engine.cache import CachePlan
from dxrf.core.persistable import fitted
from dxrf.core.validation import check_choice, check_int, check_nonnegative, check_parameters, check_positive_float, is_dask, rule
from dxrf.core.weights import check_class_weight, check_sample_weight, combined_weight
from dxrf.learners._base import RandomFeatureModel, is_selector, linear_predict
from dxrf.learners.pcg_plan import PCGPlanMixin
from dxrf.learners.partial import PartialFitMixin, check_batch_labels, partial_classes
from dxrf.learners.ridge import RIDGE_FITTED, RIDGE_RULES, _RidgeSolveMixin

__all__ = ["RandomFeatureClassifier", "LOSSES", "SOLVER_RULES", "encode_classes"]

LOSSES = ("squared", "logistic", "multinomial")

#: the logistic solvers' options: whatever the loss, a bad value is bad before it matters
SOLVER_RULES = {
    "max_iter": rule(check_int),
    "tol": rule(check_nonnegative, what="a finite number >= 0"),
}

#: each parameter checked once per fit; the checks that span several follow in ``_check_params``
CLASSIFIER_RULES = {
    "loss": rule(check_choice, choices=LOSSES),
    "cache_features": rule(check_choice, choices=CACHE_SETTINGS),
    "class_weight": rule(check_class_weight, named=False),
    "validation_tol": rule(check_positive_float, passes=(None,)),
    **SOLVER_RULES,
    **RIDGE_RULES,
}


class _RidgeClassifier(_RidgeSolveMixin, ClassifierMixin, RandomFeatureModel):
    """A linear classifier on fitted features: the logistic refits, scores and prediction (no ``fit``).

    :class:`RandomFeatureClassifier` adds ``fit`` and ``partial_fit``;
    :class:`dxrf.RandomFeatureClassifierCV` adds the search's ``fit``.
    """

    def _set_class_coef(self, coef: np.ndarray) -> None:
        """``coef_`` (k, M) and ``intercept_`` from a ridge solution of shape (M, k) on the +-1 class columns."""
        self.coef_ = coef.T
        self.intercept_ = self._intercept
        self.n_iter_ = 1

    def _solver_options(self) -> Options:
        """The options of the logistic passes: the global ones, with this estimator's ``cache_features`` if it has one."""
        return resolve_options(cache_features=getattr(self, "cache_features", None))

    def _record_cache(self, plan: CachePlan | None) -> None:
        """``feature_cache_`` ("cached" or "recomputed") and ``feature_cache_bytes_`` (the estimate)."""
        if plan is not None:
            self.feature_cache_ = plan.status
            self.feature_cache_bytes_ = int(plan.estimate)

    def _logistic_refit(self, X, T, kernel, sample_weight=None) -> RandomFeatureClassifier:
        """Logistic regression on ``kernel``'s features with penalty ``alpha_``; its passes are added to ``n_passes_``."""
        from dxrf.solvers.logistic import fit_logistic

        if self.loss == "multinomial":
            return self._multinomial_refit(X, T, kernel, sample_weight)
        result = fit_logistic(
            X, T, kernel, alpha=self.alpha_, solver=self.solver, max_iter=self.max_iter,
            tol=self.tol, fit_intercept=self.fit_intercept, hessian_rows=self.hessian_rows,
            sample_weight=sample_weight, options=self._solver_options(),
        )
        self._record_cache(result.feature_cache)
        self.coef_ = np.asarray(result.coef).T
        self.intercept_ = np.asarray(result.intercept)
        self.n_iter_ = int(result.n_iter)
        self.n_passes_ += int(result.n_passes)
        self.solver_ = result.solver
        self.hessian_rows_ = int(result.hessian_rows)
        self.converged_ = bool(result.converged)
        return self

    def _multinomial_refit(self, X, T, kernel, sample_weight=None) -> RandomFeatureClassifier:
        from dxrf.solvers.logistic import fit_multinomial

        if T.shape[1] == 1:  # two classes: the one +-1 column becomes one-hot columns
            T = (da if is_dask(T) else np).concatenate([-T, T], axis=1)
        result = fit_multinomial(
            X, T, kernel, alpha=self.alpha_, solver=self.solver, max_iter=self.max_iter,
            tol=self.tol, fit_intercept=self.fit_intercept, hessian_rows=self.hessian_rows,
            sample_weight=sample_weight, options=self._solver_options(),
        )
        self._record_cache(result.feature_cache)
        coef, intercept = result.coef.T, result.intercept
        if coef.shape[0] == 2:
            # softmax([f0, f1]) = [1 - expit(f1 - f0), expit(f1 - f0)]: the binary layout
            coef, intercept = coef[1:] - coef[:1], intercept[1:] - intercept[:1]
        self.coef_ = np.ascontiguousarray(coef)
        self.intercept_ = np.asarray(intercept)
        self.n_iter_ = int(result.n_iter)
        self.n_passes_ += int(result.n_passes)
        self.solver_ = result.solver
        self.hessian_rows_ = 0
        self.converged_ = bool(result.converged)
        return self

    def decision_function(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Scores: shape (n_samples,) for two classes, (n_samples, n_classes) otherwise."""
        self._check_fitted()
        X = self._validate_X(X, reset=False)
        scores = linear_predict(X, self.kernel_, self.coef_.T, self.intercept_)
        return scores[:, 0] if self.coef_.shape[0] == 1 else scores

    def predict(self, X: np.ndarray | da.Array, return_std: bool = False) -> np.ndarray | da.Array:
        """Class labels (lazy for dask input).

        ``return_std=True`` is refused with a ``TypeError``: a predictive
        standard deviation is the ridge regressors' (labels have none).
        """
        if return_std:
            raise TypeError(f"{type(self).__name__}.predict does not take return_std=True: a predictive standard "
                            "deviation is for the ridge regressors (RandomFeatureRidge, RandomFeatureRidgeCV)")
        scores = self.decision_function(X)
        classes = self.classes_
        if is_dask(scores):
            if scores.ndim == 1:
                return scores.map_blocks(lambda s: classes[(s > 0).astype(np.intp)], dtype=classes.dtype)
            return scores.map_blocks(lambda s: classes[np.argmax(s, axis=1)], drop_axis=1, dtype=classes.dtype)
        if scores.ndim == 1:
            return classes[(scores > 0).astype(np.intp)]
        return classes[np.argmax(scores, axis=1)]

    def _is_logistic(self) -> bool:
        return self.loss in ("logistic", "multinomial")

    @available_if(_is_logistic)
    def predict_proba(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Class probabilities (logistic losses only).

        Multinomial: the softmax of the scores (computed from shifted scores, so
        no overflow; rows sum to 1). Logistic: one-vs-rest scores normalised
        for more than two classes.
        """
        scores = self.decision_function(X)
        multinomial = self.loss == "multinomial"

        def proba(s: np.ndarray) -> np.ndarray:
            if s.ndim == 1:
                p = expit(s)
                return np.column_stack([1.0 - p, p])
            if multinomial:
                return softmax(s, axis=1)
            p = expit(s)
            return p / p.sum(axis=1, keepdims=True)

        if is_dask(scores):
            k = max(2, self.classes_.size)
            if scores.ndim == 1:
                return scores.map_blocks(proba, new_axis=1, chunks=(scores.chunks[0], (k,)), dtype=np.float64)
            return scores.map_blocks(proba, dtype=np.float64)
        return proba(scores)

    @available_if(_is_logistic)
    def predict_log_proba(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Logarithm of :meth:`predict_proba` (multinomial: ``log_softmax`` of the scores, finite)."""
        if self.loss == "multinomial":
            scores = self.decision_function(X)
            if scores.ndim == 2:
                return scores.map_blocks(log_softmax, axis=1, dtype=np.float64) if is_dask(scores) else log_softmax(scores, axis=1)
        p = self.predict_proba(X)
        return da.log(p) if is_dask(p) else np.log(p)


class RandomFeatureClassifier(PCGPlanMixin, PartialFitMixin, _RidgeClassifier):
    """Linear classifier on random features.

    - ``loss="squared"``: least-squares classification (Rahimi & Recht): a
      ridge fit to +-1 targets, one column per class (one for two classes),
      predicting the argmax (the sign for two classes). One pass over X; with
      ``alphas`` the whole penalty path is validated from that pass.
    - ``loss="logistic"``: L2-penalised logistic regression,
      ``(1/N) sum log(1 + exp(-t f)) + (alpha/2) |theta|^2`` per class
      (one-vs-rest for more than two classes; equal to scikit-learn's
      ``LogisticRegression(C=1/(N alpha))``), solved by blockwise
      Newton/IRLS (one pass per iteration) or, when the M x M Hessians are
      too large, by L-BFGS with one pass per gradient
      (:func:`dxrf.solvers.logistic.fit_logistic`).
    - ``loss="multinomial"``: L2-penalised softmax regression over all classes,
      ``(1/N) sum [logsumexp(f_n) - f_{n, y_n}] + (alpha/2) |W|_F^2`` with
      unpenalised intercepts (scikit-learn's multinomial
      ``LogisticRegression(C=1/(N alpha))``), by L-BFGS (one pass per
      gradient) or Newton-CG (``solver="newton-cg"``; one pass per
      Hessian-vector product) (:func:`dxrf.solvers.logistic.fit_multinomial`).
      With two classes the softmax of two scores is stored as one:
      ``coef_ = W_1 - W_0``, and ``predict_proba`` is ``expit`` of it.

    With a selector as ``features``, selection uses the same first pass
    (supervised selectors see the +-1 class columns).

    Parameters
    ----------
    features : feature map or selector, optional
        Default ``RandomFourierFeatures(n_components=100, bandwidth="median")``.
    loss : {"squared", "logistic", "multinomial"}, default="squared"
    alpha : float, default=1e-3
        L2 penalty (on the ``1/N``-normalised loss).
    alphas : array-like, optional
        Penalty grid validated from one pass (``loss="squared"`` only).
    validation : float or bool array, optional
        Validation rows for ``alphas`` (default 0.2 with ``alphas``).
    fit_intercept : bool, default=True
    solver : {"auto", "newton", "lbfgs", "newton-cg", "gram", "pcg"}, default="auto"
        ``loss="squared"`` with :class:`NystroemFeatures`: ``"gram"`` (one pass
        of M x M statistics) or ``"pcg"`` (Falkon's preconditioned conjugate
        gradient, one pass per iteration; ``tol`` and ``max_iter`` apply),
        ``"auto"`` the cheaper by :func:`dxrf.solvers.pcg.plan_estimate`
        (as in :class:`RandomFeatureRidge`).
        Logistic solver ("newton" is not available for the multinomial loss;
        "auto" is "lbfgs" there).
    max_iter : int, default=100
        Logistic iterations, or conjugate-gradient iterations of ``solver="pcg"``.
    tol : float, default=1e-8
        Logistic gradient tolerance, or the conjugate gradient's relative residual
        (positive) with ``solver="pcg"``.
    validation_tol : float or None, default=1e-4
        ``solver_ == "pcg"`` with validation rows: a penalty's conjugate gradient also
        stops once its validation MSE has settled (as in :class:`RandomFeatureRidge`).
    hessian_rows : "auto", int or None, default="auto"
        Rows sampled for each Hessian of the Newton solver (gradients use every
        row); None for exact Hessians. See
        :func:`dxrf.solvers.logistic.fit_logistic`.
    class_weight : "balanced", dict or None, default=None
        Weights per class, multiplied into ``sample_weight`` (scikit-learn's
        convention): a dict label -> weight (1 for classes it leaves out; a
        label that is not a class is refused), or ``"balanced"``:
        ``n_samples / (n_classes * count(class))``. Not ``"balanced"`` in
        ``partial_fit`` (a batch's counts are not the data's).
    validation_seed : int, default=0
        Seed of the hashed validation split.
    random_state : int, RandomState, Generator or None
        Seeds ``features`` when they have no ``random_state`` of their own.
    cache_features : {"auto", True, False}, default="auto"
        Logistic and multinomial losses: keep the features between the
        solver's passes (:mod:`dxrf.engine.cache`; on the workers for dask
        input, freed when ``fit`` ends). ``"auto"`` keeps them when
        ``N M itemsize`` bytes fit within the option ``cache_fraction`` (1/3)
        of the workers' memory limits (of this machine's memory for NumPy
        input). The model is bitwise the same either way.

    Attributes
    ----------
    classes_ : ndarray
    coef_ : ndarray of shape (1, M) or (n_classes, M)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    alpha_ : float
    alphas_, validation_errors_ : ndarray
        With ``alphas`` (squared loss): the grid and the validation MSE on the +-1 targets.
    n_iter_ : int
        Logistic iterations.
    n_passes_ : int
        Reads of X made by ``fit``.
    hessian_rows_ : int
        Rows in each Newton Hessian (logistic loss with the Newton solver; 0 otherwise).
    feature_cache_ : {"cached", "recomputed"}
        Whether the logistic passes kept the features (logistic and multinomial losses only).
    feature_cache_bytes_ : int
        The estimated size of the features, ``N M itemsize`` bytes.
    features_, kernel_, n_features_in_
    stats_ : FeatureStats
        After :meth:`partial_fit` only: the running statistics of the +-1
        class columns (saved with the model).

    References
    ----------
    .. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel
       machines", NeurIPS 2007.
    """

    _fitted_schema = fitted(
        RIDGE_FITTED, classes_="labels", n_iter_="int", solver_="str?", hessian_rows_="int?", converged_="bool?",
        pcg_history_="numbers?", pcg_validation_path_="numbers?", pcg_seconds_="numbers?", plan_estimate_="dict?",
        feature_cache_="str?", feature_cache_bytes_="int?",
    )

    def __init__(
        self,
        features: object = None,
        *,
        loss: str = "squared",
        alpha: float = 1e-3,
        alphas: object = None,
        validation: object = None,
        fit_intercept: bool = True,
        solver: str = "auto",
        max_iter: int = 100,
        tol: float = 1e-8,
        validation_tol: float | None = 1e-4,
        hessian_rows: int | str | None = "auto",
        class_weight: object = None,
        validation_seed: int = 0,
        random_state: object = None,
        cache_features: str | bool = "auto",
    ) -> None:
        self.features = features
        self.loss = loss
        self.alpha = alpha
        self.alphas = alphas
        self.validation = validation
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.validation_tol = validation_tol
        self.hessian_rows = hessian_rows
        self.class_weight = class_weight
        self.validation_seed = validation_seed
        self.random_state = random_state
        self.cache_features = cache_features

    def _check_params(self) -> np.ndarray | None:
        """Validate the parameters (also run on a loaded model); return the alpha grid or None."""
        grid = check_parameters(self, CLASSIFIER_RULES)["alphas"]
        if self.loss != "squared" and grid is not None:
            raise ValueError(f"alphas (a one-pass penalty path) is available for loss='squared'; for {self.loss} use alpha")
        if self.loss != "squared" and self.alpha <= 0:
            raise ValueError(f"alpha must be positive for loss={self.loss!r}, got {self.alpha!r}")
        if self.loss != "squared" and self.solver in ("gram", "pcg"):
            raise ValueError(f"solver={self.solver!r} is a plan of the squared loss (a ridge solve), not of loss={self.loss!r}")
        if self.loss == "multinomial" and self.solver == "newton":
            raise ValueError(
                "solver='newton' is not available for loss='multinomial' (its Hessian would have (K (M + 1))^2 "
                "entries): use 'lbfgs', 'newton-cg' or 'auto'"
            )
        return grid

    def _plan_solver(self) -> str:
        # the logistic solvers' names leave the squared loss on its Gram plan, as before
        return self.solver if self.solver in ("auto", "gram", "pcg") else "gram"

    def fit(self, X: np.ndarray | da.Array, y: np.ndarray | da.Array, sample_weight: object = None) -> RandomFeatureClassifier:
        """Fit the classifier.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
            Class labels.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights ``>= 0``, times ``class_weight``: every loss is
            ``sum_n w_n loss_n / sum_n w_n`` (an integer weight equals
            repeating the row); ``validation_errors_`` are weighted means.

        Returns
        -------
        self
        """
        grid = self._check_params()
        self.__dict__.pop("stats_", None)  # a fit starts over: no running statistics of earlier partial_fit calls
        X, T, w = self._class_targets(X, y, sample_weight)
        if self.loss == "squared":
            validation = self.validation if self.validation is not None else (0.2 if grid is not None else None)
            if self._choose_plan(X, int(T.shape[1]), grid, validation):
                coef = self._fit_pcg(X, T, w, grid, validation)
                n_iter = self.n_iter_
                self._set_class_coef(coef)
                self.n_iter_ = n_iter  # the conjugate gradient's iterations, not the Gram's one solve
                return self
            train, valid = self._features_pass(
                X, T, validation=validation, validation_seed=self.validation_seed,
                task="classification", classes=self.classes_, sample_weight=w, single_penalty=grid is None,
            )
            self._set_class_coef(self._solve_on_stats(train, valid, grid))
            return self
        return self._fit_logistic(X, T, w)

    def partial_fit(
        self, X: np.ndarray | da.Array, y: np.ndarray | da.Array, classes: object = None, sample_weight: object = None
    ) -> RandomFeatureClassifier:
        """Add a batch of rows and solve again (``loss="squared"`` only).

        As :meth:`RandomFeatureRidge.partial_fit` on the +-1 class columns:
        the first call fixes the features (a map is fitted on this batch, a
        fitted map or selector is used as it is) and needs ``classes``, all the labels that will ever appear
        (scikit-learn's convention; later calls may repeat it). Each call
        adds its rows' statistics to ``stats_`` and solves with ``alpha``.
        After a ``fit`` it keeps the fitted features and classes and starts
        the statistics from this batch.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
            Class labels, each one of ``classes``.
        classes : array-like, optional
            Every class label; required at the first call.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Weights of this batch's rows, times a dict ``class_weight``.

        Returns
        -------
        self
        """
        self._partial_check()
        if self.loss != "squared":
            raise ValueError(f"partial_fit needs loss='squared' (statistics that add up), got loss={self.loss!r}")
        if isinstance(self.class_weight, str):
            raise ValueError('class_weight="balanced" needs the counts of all the data; partial_fit takes a dict or None')
        first = not self._partial_started()
        if first and classes is None and self._after_fit():
            classes = self.classes_  # partial_fit after fit keeps its classes
        known = partial_classes(self, classes, first)
        X = self._partial_X(X, first)
        y = self._partial_y(y, X.shape[0])
        if y.ndim != 1:
            raise ValueError(f"y must be 1-d class labels, got shape {y.shape}")
        check_batch_labels(y, known)
        self.classes_ = known
        w = combined_weight(check_sample_weight(sample_weight, int(X.shape[0])), self.class_weight, known, y)
        self._set_class_coef(self._partial_update(X, encode_classes(y, known), first, w))
        return self

    def _fit_logistic(self, X, T, sample_weight=None) -> RandomFeatureClassifier:
        features = self._make_features()
        if is_selector(features):
            # the selector needs the candidates' statistics: one pass
            self._features_pass(X, T, task="classification", classes=self.classes_, sample_weight=sample_weight)
        else:
            self._fit_map(features, X, sample_weight, T)
        self.alpha_ = float(self.alpha)
        return self._logistic_refit(X, T, self.kernel_, sample_weight)

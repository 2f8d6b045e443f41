"""Ridge regression on random features, with a one-pass penalty path."""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.base import RegressorMixin

from dxrf.core.errors import ModelFormatError
from dxrf.core.persistable import MODEL, fitted
from dxrf.core.validation import check_bool, check_int, check_nonnegative, check_parameters, check_positive_float, rule
from dxrf.core.weights import check_sample_weight
from dxrf.stats.feature_stats import FeatureStats
from dxrf.learners._base import RandomFeatureModel, TargetScaleMixin, is_evidence, linear_predict, linear_predict_quad
from dxrf.solvers.evidence import evidence_path, posterior, predictive_variance
from dxrf.solvers.landmark_solve import LandmarkStats, solve_landmark_ridge
from dxrf.learners.partial import PartialFitMixin
from dxrf.learners.pcg_plan import PCGPlanMixin
from dxrf.solvers.ridge_path import check_alpha_grid, mse_from_stats, ridge_path, solve_ridge, statistics_rtol

__all__ = ["RandomFeatureRidge", "RIDGE_FITTED", "check_alphas"]

#: the fitted attributes of a ridge model, shared by the classifier and the searches
RIDGE_FITTED = fitted(
    MODEL,
    alpha_="real",
    coef_="finite",
    intercept_="finite",
    train_mse_="real?",
    alphas_="finite?",
    validation_errors_="numbers?",
    y_scale_="finite-or-none?",  # [y_min, y_max] of a target scaled by open_zarr(scale_y=True)
    stats_="stats?",  # the running statistics of partial_fit
)

#: what a ridge regressor adds: the Bayesian reading of its solution (DESIGN, "Evidence and predictive uncertainty")
BAYES_FITTED = fitted(
    noise_="finite?",  # sigma^2 per output, the evidence's maximiser at alpha_
    log_evidence_="real?",  # with store_posterior or an evidence choice: summed over outputs
    evidences_="numbers?",  # validation="evidence" with alphas: the log evidence of each penalty
    posterior_factor_="finite?",  # F: the coefficients' posterior covariance is noise_ F F^T
    posterior_center_="finite?",  # the features' weighted mean (zeros without an intercept)
    sum_weight_="real?",  # W: the intercept's posterior variance is noise_ / W
)


#: ``alpha`` (a non-negative number) and ``alphas`` (None or a 1-d grid), checked once per fit
RIDGE_RULES = {
    "alpha": rule(check_nonnegative),
    "fit_intercept": rule(check_bool),
    "alphas": rule(check_alpha_grid, named=False, passes=(None,)),
}


#: a ridge regressor's own parameters beyond RIDGE_RULES
REGRESSOR_RULES = {**RIDGE_RULES, "store_posterior": rule(check_bool)}


def check_alphas(alpha: object, alphas: object) -> np.ndarray | None:
    """Validate ``alpha`` (a non-negative number) and ``alphas`` (None or a 1-d grid)."""
    check_nonnegative(alpha, "alpha")
    return None if alphas is None else check_alpha_grid(alphas)


def check_class_outputs(model: object, k: int) -> None:
    """A loaded classifier's coefficients must have one output for two classes, else one per class."""
    classes = getattr(model, "classes_", None)
    if classes is None:
        return
    want = 1 if len(classes) == 2 else len(classes)
    if k != want:
        raise ModelFormatError(f"the coefficients have {k} output(s) but {len(classes)} classes need {want}")


class _RidgeSolveMixin:
    """Choose alpha on validation statistics and solve; shared by the ridge regressor and classifier."""

    def _check_loaded(self) -> None:
        """Called by :func:`dxrf.load`: the coefficients must fit the features."""
        coef, kernel = getattr(self, "coef_", None), getattr(self, "kernel_", None)
        if coef is None or kernel is None:
            return
        coef = np.asarray(coef)
        if coef.ndim not in (1, 2) or coef.shape[-1] != kernel.n_components:
            raise ModelFormatError(f"coef_ has shape {coef.shape} but the feature kernel has {kernel.n_components} features")
        k = 1 if coef.ndim == 1 else coef.shape[0]
        if np.size(getattr(self, "intercept_", 0.0)) != k:
            raise ModelFormatError(f"intercept_ has {np.size(self.intercept_)} values for {k} output(s)")
        check_class_outputs(self, k)

    def _solve_on_stats(
        self, train: FeatureStats, valid: FeatureStats | None, grid: np.ndarray | None, evidence: bool = False
    ) -> np.ndarray:
        """Set alpha_, alphas_, validation_errors_, coef (M, k) and intercept (k,); return coef.

        ``evidence`` (no validation rows): the penalty of ``grid`` with the
        largest evidence on all rows is chosen, ``evidences_`` records each one's.
        """
        keep = hasattr(self, "_store_bayes")  # a regressor keeps what its noise and posterior need
        if isinstance(train, LandmarkStats):  # one penalty, no validation (see _features_pass)
            self.alpha_ = float(self.alpha)
            coef, self._intercept, mse = solve_landmark_ridge(train, self.alpha_, self.fit_intercept)
            self.train_mse_ = float(mse.mean())
            self._solved = (train, mse) if keep else None
            self._coef = coef
            return coef
        self.__dict__.pop("evidences_", None)
        if grid is not None and evidence:
            path = evidence_path(train, grid, self.fit_intercept, rtol=statistics_rtol(self.kernel_.dtype))
            self.alphas_ = grid
            self.evidences_ = path.log_evidence.sum(axis=1)
            self.alpha_ = float(grid[path.best_index])
        elif grid is not None:
            if valid is None or valid.n == 0 or train.n == 0:
                raise ValueError("the validation split left no training or no validation rows; change validation=")
            # an alpha whose validation error is lost to the statistics' rounding is never chosen
            path = ridge_path(train, grid, valid, fit_intercept=self.fit_intercept, rtol=statistics_rtol(self.kernel_.dtype))
            self.alphas_ = grid
            self.validation_errors_ = path.validation_mse.mean(axis=1)
            self.alpha_ = float(grid[path.best_index])
        else:
            self.alpha_ = float(self.alpha)
            if valid is not None and valid.n > 0 and train.n > 0:
                coef, b = solve_ridge(train, self.alpha_, self.fit_intercept)
                self.validation_errors_ = np.atleast_1d(mse_from_stats(valid, coef, b).mean())
        # the chosen model is refitted on all rows: the statistics simply add up, no pass
        total = train if valid is None else train + valid
        coef, intercept = solve_ridge(total, self.alpha_, self.fit_intercept)
        mse = mse_from_stats(total, coef, intercept)
        self.train_mse_ = float(mse.mean())
        self._solved = (total, mse) if keep else None  # for a regressor's noise and posterior (_store_bayes)
        self._coef = coef
        self._intercept = intercept
        return coef


class _RidgeRegressor(_RidgeSolveMixin, TargetScaleMixin, RegressorMixin, RandomFeatureModel):
    """A ridge regressor on fitted features: coefficients, prediction, the posterior (no fitting of its own).

    :class:`RandomFeatureRidge` adds ``fit`` and ``partial_fit``;
    :class:`dxrf.RandomFeatureRidgeCV` adds the search's ``fit`` (and no
    ``partial_fit``: its search needs all the rows).
    """

    def _set_regression_coef(self, coef: np.ndarray, one_d: bool) -> None:
        """``coef_`` (M,) or (k, M) and ``intercept_`` from a solution of shape (M, k)."""
        self.coef_ = coef[:, 0] if one_d else coef.T
        self.intercept_ = float(self._intercept[0]) if one_d else self._intercept

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _check_loaded(self) -> None:
        """Also the posterior's shapes against the features and outputs (:func:`dxrf.load`)."""
        super()._check_loaded()
        if not hasattr(self, "kernel_"):  # an unfitted model: nothing fitted to check
            return
        m = self.kernel_.n_components
        k = np.size(self.intercept_)
        noise = getattr(self, "noise_", None)
        if noise is not None and (np.size(noise) != k or np.any(np.asarray(noise) <= 0)):
            raise ModelFormatError(f"noise_ must hold {k} positive variance(s), got {noise!r}")
        factor = getattr(self, "posterior_factor_", None)
        center, w = getattr(self, "posterior_center_", None), getattr(self, "sum_weight_", None)
        if (factor is None) != (center is None) or (factor is None) != (w is None) or (factor is not None and noise is None):
            raise ModelFormatError("posterior_factor_, posterior_center_, sum_weight_ and noise_ are stored together")
        if factor is not None and (np.shape(factor) != (m, m) or np.shape(center) != (m,) or not w > 0):
            raise ModelFormatError(f"the posterior has shapes {np.shape(factor)} and {np.shape(center)} (sum_weight_ "
                                   f"{w}); {m} features need ({m}, {m}), ({m},) and a positive weight")

    def _store_bayes(self, stats: FeatureStats | LandmarkStats | None, coef: np.ndarray, mse: np.ndarray, one_d: bool,
                     *, sum_weight: float | None = None) -> None:
        """``noise_`` (and with ``store_posterior`` the posterior) of the solution ``coef`` (M, k) on ``stats``.

        ``mse`` is the solution's per-output training MSE on ``stats``. ``noise_``
        is the evidence's maximiser, ``W (MSE + alpha |theta|^2) / (W - 1)``: no
        factorisation. The posterior takes one eigendecomposition of the covariance.
        Without statistics (a conjugate gradient's model) ``sum_weight`` gives
        ``W``, and there is no posterior.
        """
        for name in BAYES_FITTED:
            if name != "evidences_":
                self.__dict__.pop(name, None)
        flat = stats.stats if isinstance(stats, LandmarkStats) else stats
        W = float(flat.n) if flat is not None else float(sum_weight)
        nu = W - (1.0 if self.fit_intercept else 0.0)
        if getattr(self, "store_posterior", False):
            if self.alpha_ <= 0:
                raise ValueError("store_posterior=True needs a positive alpha (alpha=0 is a flat prior on the "
                                 "coefficients, without a posterior): remove 0 from alpha/alphas")
            post = posterior(flat, self.alpha_, self.fit_intercept)
            self.posterior_factor_, self.posterior_center_, self.sum_weight_ = post.factor, post.center, post.sum_weight
            self.log_evidence_ = float(post.log_evidence.sum())
            noise = post.noise
        elif nu > 0:
            noise = W * (np.asarray(mse) + self.alpha_ * (coef**2).sum(axis=0)) / nu
        else:
            return
        self.noise_ = float(noise[0]) if one_d else np.asarray(noise, dtype=np.float64)

    def predict(self, X: np.ndarray | da.Array, return_std: bool = False) -> object:
        """Predict; lazy (fused with the features) for dask input.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        return_std : bool, default=False
            Also the posterior predictive standard deviation of each row's
            target, ``sqrt(noise_ (1 + 1/W + |(z - center) F|^2))`` (DESIGN,
            "Evidence and predictive uncertainty"); needs a model fitted with
            ``store_posterior=True``. For dask input both are lazy, from one
            map over the rows.

        Returns
        -------
        ndarray or dask array of shape (n_samples,) or (n_samples, k)
            The predictions; with ``return_std`` a pair ``(mean, std)`` of that shape.
        """
        self._check_fitted()
        X = self._validate_X(X, reset=False)
        coef = self.coef_[:, None] if self.coef_.ndim == 1 else self.coef_.T
        one_d = self.coef_.ndim == 1
        if not return_std:
            out = linear_predict(X, self.kernel_, coef, np.atleast_1d(self.intercept_))
            return self._to_data_units(out[:, 0] if one_d else out)
        factor = getattr(self, "posterior_factor_", None)
        if factor is None:
            raise ValueError(f"predict(..., return_std=True) needs the posterior: fit {type(self).__name__} with "
                             "store_posterior=True")
        mean, quad = linear_predict_quad(X, self.kernel_, coef, np.atleast_1d(self.intercept_), factor,
                                         self.posterior_center_)
        var = predictive_variance(quad, np.atleast_1d(self.noise_), self.sum_weight_, self.fit_intercept)
        std = da.sqrt(var) if isinstance(var, da.Array) else np.sqrt(var)
        scale = getattr(self, "y_scale_", None)
        if scale is not None:  # unscale is affine: the std takes its slope only
            std = std * ((float(scale[1]) - float(scale[0])) / 2.0)
        if one_d:
            mean, std = mean[:, 0], std[:, 0]
        return self._to_data_units(mean), std


#: the plan of a ridge fit: which solver, its estimate and, for the conjugate gradient, its iterations
PLAN_FITTED = fitted(solver_="str?", n_iter_="int?", pcg_history_="numbers?", pcg_validation_path_="numbers?",
                     pcg_seconds_="numbers?",
                     plan_estimate_="dict?", feature_cache_="str?", feature_cache_bytes_="int?")

#: the ridge regressor's own parameters: the plan's solver and the conjugate gradient's stopping rule
PLAN_RULES = {"max_iter": rule(check_int, low=1), "tol": rule(check_nonnegative, what="a finite number >= 0"),
              "validation_tol": rule(check_positive_float, passes=(None,))}


class RandomFeatureRidge(PCGPlanMixin, PartialFitMixin, _RidgeRegressor):
    """Ridge regression on random features, solved from one pass of statistics.

    Minimises ``(1/N) |Y - Z theta - 1 beta^T|^2 + alpha |theta|^2`` with ``Z``
    the random features of ``X`` (DESIGN section 2). ``fit`` makes one pass
    over X: it accumulates ``Z^T Z``, ``Z^T Y`` and the sums for training and
    validation rows at once; the exact solution (Cholesky) and, with
    ``alphas``, the whole penalty path (one eigendecomposition) and each
    penalty's validation error come from those statistics. When ``features``
    is a selector (ELSS, EERF, LKRF) the candidates' pass is that same pass:
    selection plus ridge is one pass.

    Parameters
    ----------
    features : feature map or selector, optional
        Default ``RandomFourierFeatures(n_components=100, bandwidth="median")``; cloned in ``fit``.
    alpha : float, default=1e-3
        Penalty when ``alphas`` is None.
    alphas : array-like, optional
        A grid of penalties; the one with the lowest validation MSE is chosen.
    validation : float, bool array or "evidence", optional
        Validation rows: a fraction (rows chosen by a hash of the row index,
        independent of chunking) or a boolean mask (True = validation).
        Default 0.2 when ``alphas`` is given, else none. ``"evidence"`` (with
        ``alphas``): no validation rows; the penalty with the largest
        evidence of the Bayesian linear model on all rows is chosen
        (``evidences_``), from the same statistics.
    fit_intercept : bool, default=True
    validation_seed : int, default=0
        Seed of the hashed validation split.
    store_posterior : bool, default=False
        Keep the coefficients' posterior (``posterior_factor_``, an ``M x M``
        float64 matrix: 128 MB at M = 4000, saved with the model) so that
        ``predict(X, return_std=True)`` gives the predictive standard
        deviation. Needs a positive ``alpha``. Without it the model stays
        small and ``return_std`` is refused.
    random_state : int, RandomState, Generator or None
        Seeds ``features`` when they have no ``random_state`` of their own.
    solver : {"auto", "gram", "pcg"}, default="auto"
        With :class:`NystroemFeatures`: ``"gram"`` accumulates the M x M
        statistics in one pass (``N M^2``); ``"pcg"`` solves the same
        equations by Falkon's preconditioned conjugate gradient, one pass per
        iteration (``N M d`` each) and no M x M statistics (every penalty of
        ``alphas`` and the validation rows' errors in the same passes; no
        ``"evidence"`` and no posterior); ``"auto"`` takes the cheaper by
        :func:`dxrf.solvers.pcg.plan_estimate` (DESIGN.md, "The PCG plan").
        Other features always take the Gram plan.
    tol : float, default=1e-8
        The conjugate gradient stops when each output's preconditioned
        residual is below ``tol`` times its first (must be positive for ``"pcg"``).
    max_iter : int, default=100
        Conjugate-gradient iterations (passes after the first) at most.
    validation_tol : float or None, default=1e-4
        With ``solver_ == "pcg"`` and validation rows: a penalty's conjugate
        gradient also stops once its validation MSE has moved by less than
        ``validation_tol`` (relative) in each of the last 5 iterations, long
        before a tight ``tol`` (:func:`dxrf.solvers.pcg.pcg_ridge`). None: ``tol`` alone.

    Attributes
    ----------
    coef_ : ndarray of shape (M,) or (k, M)
    intercept_ : float or ndarray of shape (k,)
    alpha_ : float
        The penalty used (chosen on validation with ``alphas``). The final
        model is refitted on training plus validation rows, from the same
        statistics (no extra pass).
    alphas_ : ndarray of shape (P,)
        The grid, when ``alphas`` was given.
    validation_errors_ : ndarray of shape (P,) or (1,)
        Validation MSE (mean over outputs) of each penalty, fitted on the
        training rows only.
    train_mse_ : float
        MSE of the final model on the rows it was fitted on (exact, from the
        statistics). Like ``validation_errors_``, in the units of the ``y``
        given to ``fit``.
    y_scale_ : ndarray of shape (2,) or None
        ``[y_min, y_max]`` when ``y`` was scaled by ``open_zarr(...,
        scale_y=True)``: ``predict`` and ``score`` are then in the data's
        units.
    evidences_ : ndarray of shape (P,)
        With ``validation="evidence"``: the log evidence of each penalty.
    noise_ : float or ndarray of shape (k,)
        The noise variance ``sigma^2`` per output that maximises the evidence
        at ``alpha_``: ``W (MSE + alpha_ |theta|^2) / (W - 1)`` on all rows.
    log_evidence_ : float
        With ``store_posterior`` or an evidence choice: the log marginal
        likelihood at ``alpha_`` and ``noise_``, summed over outputs.
    posterior_factor_, posterior_center_, sum_weight_ : ndarray, ndarray, float
        With ``store_posterior``: ``F``, the features' weighted mean ``c`` and
        ``W``; the predictive variance of a row is ``noise_ (1 + 1/W +
        |(z - c) F|^2)`` (DESIGN, "Evidence and predictive uncertainty").
    features_ : fitted feature map or selector
    kernel_ : FeatureKernel
    n_passes_ : int
        Reads of X made by ``fit`` (1; 2 for ``LeverageScoreSampler(n_samples=N0)``:
        candidates over about N0 rows, then the selection over all; plus 1 for
        a median bandwidth's sample).
    n_features_in_ : int
    solver_ : {"gram", "pcg"}
        The plan taken; ``plan_estimate_`` (a dict) holds the estimate ``"auto"`` compared.
    n_iter_ : int
        Conjugate-gradient iterations (1 for the Gram plan's solve); ``pcg_history_`` the
        largest relative residual after each, ``pcg_validation_path_`` (``n_iter_ x P``,
        with validation rows) each penalty's validation MSE after each, and ``pcg_seconds_`` (``n_iter_ x 2``) the
        seconds of each one's pass and of its algebra on the client (the preconditioner's
        triangular solves), to see where a slow solve spends its time.
    feature_cache_ : {"cached", "recomputed"}
        With ``solver_ == "pcg"``: whether the kernel values were computed once and kept for
        the iterations (the option ``cache_features``, :mod:`dxrf.engine.cache`; the same
        model either way); ``feature_cache_bytes_`` is their size ``N M itemsize``.
    stats_ : FeatureStats
        After :meth:`partial_fit` only: the running statistics of every row
        seen so far (saved with the model, so ``partial_fit`` continues after
        :func:`dxrf.load`).

    Examples
    --------
    >>> import numpy as np, dxrf
    >>> X = np.random.default_rng(0).normal(size=(500, 3)); y = np.sin(X[:, 0])
    >>> model = dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(50, random_state=0), alphas=[1e-4, 1e-2]).fit(X, y)
    >>> model.n_passes_
    1
    """

    _fitted_schema = fitted(RIDGE_FITTED, PLAN_FITTED, BAYES_FITTED)

    def __init__(
        self,
        features: object = None,
        *,
        alpha: float = 1e-3,
        alphas: object = None,
        validation: object = None,
        fit_intercept: bool = True,
        validation_seed: int = 0,
        store_posterior: bool = False,
        random_state: object = None,
        solver: str = "auto",
        tol: float = 1e-8,
        max_iter: int = 100,
        validation_tol: float | None = 1e-4,
    ) -> None:
        self.features = features
        self.alpha = alpha
        self.alphas = alphas
        self.validation = validation
        self.fit_intercept = fit_intercept
        self.validation_seed = validation_seed
        self.store_posterior = store_posterior
        self.random_state = random_state
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.validation_tol = validation_tol

    def fit(self, X: np.ndarray | da.Array, y: np.ndarray | da.Array, sample_weight: object = None) -> RandomFeatureRidge:
        """Fit in one pass over X.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,) or (n_samples, k)
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights ``>= 0``: the loss is ``sum_n w_n |y_n - f(x_n)|^2 /
            sum_n w_n`` (an integer weight equals repeating the row), and
            ``validation_errors_`` and ``train_mse_`` are weighted means. The
            weights enter the same pass; a selector's statistics are weighted
            too, and so are the pairs of rows of a ``"median"`` bandwidth
            (:func:`dxrf.features.samplers.median_distance`; a Nyström map's
            landmarks and median take no weights).

        Returns
        -------
        self
        """
        grid = self._check_params()
        self.__dict__.pop("stats_", None)  # a fit starts over: no running statistics of earlier partial_fit calls
        X, y, w = self._regression_targets(X, y, sample_weight)
        evidence = is_evidence(self.validation)
        if evidence and grid is None:
            raise ValueError("validation='evidence' chooses among alphas: give alphas=[...]")
        validation = None if evidence else self.validation if self.validation is not None else (0.2 if grid is not None else None)
        # the conjugate gradient keeps no statistics to take a posterior or an evidence of
        if evidence or self.store_posterior:
            if self.solver == "pcg":
                raise ValueError("solver='pcg' forms no statistics: store_posterior=True and validation='evidence' "
                                 "need solver='gram' (or 'auto')")
            for name in ("plan_estimate_", "pcg_history_", "pcg_seconds_"):
                self.__dict__.pop(name, None)
            self.solver_, self.n_iter_ = "gram", 1
        elif self._choose_plan(X, 1 if y.ndim == 1 else int(y.shape[1]), grid, validation):
            self._set_regression_coef(self._fit_pcg(X, y if y.ndim == 2 else y.reshape(-1, 1), w, grid, validation),
                                      y.ndim == 1)
            return self
        # the landmark basis (one Cholesky-whitened Nystroem solve) keeps no whitened covariance to take a posterior of
        single = grid is None and not self.store_posterior
        train, valid = self._features_pass(X, y, validation=validation, validation_seed=self.validation_seed,
                                           sample_weight=w, single_penalty=single)
        coef = self._solve_on_stats(train, valid, grid, evidence=evidence)
        self._set_regression_coef(coef, y.ndim == 1)
        total, mse = self.__dict__.pop("_solved")
        self._store_bayes(total, coef, mse, y.ndim == 1)
        if evidence and "log_evidence_" not in self.__dict__:
            self.log_evidence_ = float(self.evidences_[list(grid).index(self.alpha_)])
        return self

    def partial_fit(self, X: np.ndarray | da.Array, y: np.ndarray | da.Array, sample_weight: object = None) -> RandomFeatureRidge:
        """Add a batch of rows and solve again from the running statistics.

        The first call fixes the features: an unfitted map is fitted on this
        batch (a ``"median"`` bandwidth, the default, from its rows), a fitted
        map or selector is used as it is, and an unfitted selector is refused
        with a ``ValueError`` (it would need a pass over all the data). Each call makes one pass over its batch
        and adds its statistics to ``stats_``; the coefficients are solved
        with ``alpha`` (there is no validation split: ``validation`` is not
        used, and ``alphas`` is refused unless a ``fit`` already chose
        ``alpha_`` from it, which is then kept, or ``validation="evidence"``,
        which chooses from the running statistics at every call). After calls on any partition of the rows
        the model equals ``fit`` on all of them, up to rounding. A ``fit``
        starts over; ``partial_fit`` after a ``fit`` keeps the fitted
        features but starts the statistics from its batch (``fit`` keeps no
        ``M x M`` statistics). Works with ``dask_ml.wrappers.Incremental``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,) or (n_samples, k)
            The same number of outputs at every call.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Weights of this batch's rows (as in :meth:`fit`).

        Returns
        -------
        self
        """
        self._partial_check()
        first = not self._partial_started()
        if first:
            X, y, w = self._regression_targets(X, y, sample_weight)
        else:
            X = self._partial_X(X, first=False)
            y = self._partial_y(y, X.shape[0])
            y = y if np.issubdtype(y.dtype, np.floating) else y.astype(np.float64)
            if (y.ndim == 1) != (self.coef_.ndim == 1):
                raise ValueError(f"y has shape {y.shape}, but earlier partial_fit calls had {'1-d' if self.coef_.ndim == 1 else '2-d'} targets")
            w = check_sample_weight(sample_weight, int(X.shape[0]))
        coef = self._partial_update(X, y, first, w)
        self._set_regression_coef(coef, y.ndim == 1)
        self._store_bayes(self.stats_, coef, mse_from_stats(self.stats_, coef, np.atleast_1d(self.intercept_)), y.ndim == 1)
        if "evidences_" in self.__dict__ and "log_evidence_" not in self.__dict__:
            self.log_evidence_ = float(self.evidences_[list(self.alphas_).index(self.alpha_)])
        return self

    def _check_params(self) -> np.ndarray | None:
        """Validate the parameters (also run on a loaded model); return the alpha grid or None."""
        check_parameters(self, PLAN_RULES)
        return check_parameters(self, REGRESSOR_RULES)["alphas"]


def is_float(a: object) -> bool:
    return np.issubdtype(a.dtype, np.floating)

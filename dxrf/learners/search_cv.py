"""Model search from one pass: ``RandomFeatureRidgeCV`` and ``RandomFeatureClassifierCV``.

One read of X accumulates the statistics of ``M0`` candidate random features
for every bandwidth at once (:func:`dxrf.accumulate` with a list of maps),
with the validation rows, or each of ``k`` folds, summed apart. Everything
else is dense algebra on those statistics (:mod:`dxrf.search`): every
selection method and its penalty, every number of features ``M`` (prefixes of
one selection) and every ridge penalty ``alpha`` is validated exactly, and
the best configuration is refitted on all rows from the same statistics.
With ``features="nystroem"`` the candidates are Nyström landmarks drawn by one
race pass, whitened per (bandwidth, M) (:mod:`dxrf.search.landmarks`).

The estimators only check their parameters, delegate to the search driver
(:func:`dxrf.search.driver.run_search`) and store what it found; the refit's
ridge solve and the logistic refit are the ridge and classifier bases'.
"""

from __future__ import annotations

import inspect

import dask.array as da
import numpy as np
from sklearn.utils.validation import check_is_fitted

from dxrf.core.persistable import fitted
from dxrf.core.validation import (
    check_bool, check_choice, check_int, check_parameters, check_positive_float, check_seed, rule,
)
from dxrf.core.weights import check_class_weight
from dxrf.learners.classifier import LOSSES, SOLVER_RULES, RandomFeatureClassifier, _RidgeClassifier
from dxrf.learners.ridge import RandomFeatureRidge, _RidgeRegressor
from dxrf.learners.search_cv_docs import _SEARCH_ATTRIBUTES, _SEARCH_PARAMETERS
from dxrf.search.growth import GrowthBudget
from dxrf.search.staged import search
from dxrf.search.grid import SearchGrid
from dxrf.search.refit import ridge_refit
from dxrf.solvers.pcg import PLANS
from dxrf.solvers.ridge_path import mse_from_stats
from dxrf.search.scoring import label_codes, stacked_models
from dxrf.search.settings import (
    BANDWIDTH_CHOICES,
    DEFAULT_ALPHAS,
    DEFAULT_BANDWIDTHS,
    DEFAULT_N_COMPONENTS,
    LEVERAGE_ROWS,
    SCORINGS,
    SearchSettings,
    resolve_auto,
    search_grid,
)
from dxrf.stats.scoring import LinearModels, score_models

__all__ = ["RandomFeatureRidgeCV", "RandomFeatureClassifierCV", "DEFAULT_BANDWIDTHS", "DEFAULT_ALPHAS", "stacked_models"]


def store_parameters(estimator: object, values: dict) -> None:
    """Set every parameter of ``type(estimator).__init__`` from its ``locals()``: ``__init__`` only stores."""
    for name in inspect.signature(type(estimator).__init__).parameters:
        if name != "self":
            setattr(estimator, name, values[name])


def check_time_budget(value: object, name: str) -> float | None:
    """``time_budget``: seconds (a positive number) or None (no limit)."""
    return None if value is None else check_positive_float(value, name, what="a positive number of seconds or None")


#: the search's own parameters, each checked once (the grid's values by :func:`dxrf.search.settings.search_grid`)
SEARCH_RULES = {
    "fit_intercept": rule(check_bool),
    "keep_models": rule(check_bool),
    "return_train_score": rule(check_bool),
    "leverage_rows": rule(check_choice, choices=LEVERAGE_ROWS),
    "bandwidth_choice": rule(check_choice, choices=BANDWIDTH_CHOICES),
    "cv_seed": rule(check_seed),
    "max_components": rule(check_int, low=1),
    "time_budget": rule(check_time_budget),
    "nystroem_solver": rule(check_choice, choices=PLANS),
}


#: the classifier's parameters beyond the search's, checked before them: the logistic
#: refit's options before the search's pass, not at the refit after it
CLASSIFIER_RULES = {
    "loss": rule(check_choice, choices=LOSSES),
    "scoring": rule(check_choice, choices=SCORINGS),
    **SOLVER_RULES,
    "class_weight": rule(check_class_weight, named=False),
}


#: the fitted attributes a search adds to the model it refits
_SEARCH_FITTED = fitted(
    cv_results_="dict",
    best_index_="int",
    best_params_="dict",
    best_score_="real-or-nan",
    n_splits_="int",
    n_candidates_="int",
    median_bandwidth_="real-or-none",
    learned_lengthscales_="finite-or-none",
    bandwidth_="finite",  # a number, or the chosen lengthscales
    random_state_="int",
    search_times_="dict",
    growth_="dict?",
    n_components_searched_="index?",
    search_solver_="str?",  # absent from models saved before the search could solve by CG
    search_plan_estimate_="dict?",
)


class _SearchCV:
    """What the two search estimators share: parameters to settings, the stored search, its fold models.

    The search itself (the pass, the validation, the choice, the refit's
    features) is :func:`dxrf.search.driver.run_search`; ``fit`` checks,
    delegates and stores.
    """

    _task = "regression"
    _param_rules = SEARCH_RULES

    def _check_params(self, n_rows: int | None = None, n_columns: int | None = None) -> SearchGrid:
        """Validate the parameters (also run on a loaded model); return the grid ("auto" values resolved)."""
        check_parameters(self, self._param_rules)
        return search_grid(resolve_auto(self.get_params(deep=False), n_rows, n_columns))

    def _settings(self, n_rows: int | None = None, n_columns: int | None = None) -> SearchSettings:
        """The checked parameters, as the search driver reads them ("auto" values resolved for the data's shape)."""
        params = resolve_auto(self.get_params(deep=False), n_rows, n_columns)
        grid = self._check_params(n_rows, n_columns)
        growth = None
        if self.n_components == "auto":
            growth = GrowthBudget(max_components=self.max_components, time_budget=self.time_budget)
        return SearchSettings(
            grid=grid, task=self._task, features=params["features"], kernel=self.kernel, sampling=self.sampling,
            dtype=params["dtype"], cv=params["cv"], cv_seed=self.cv_seed, fit_intercept=self.fit_intercept,
            leverage_rows=self.leverage_rows, bandwidth_choice=self.bandwidth_choice,
            return_train_score=self.return_train_score, keep_models=self.keep_models,
            scoring=getattr(self, "scoring", "r2"), random_state=self.random_state, growth=growth,
            solver=self._search_solver(),
        )

    def _search_solver(self) -> str:
        return self.nystroem_solver

    def _search(self, X: object, T: object, settings: SearchSettings, classes: np.ndarray | None, w: object) -> object:
        """Run the search and store its attributes; return its outcome (statistics, or the CG's model)."""
        outcome = search(X, T, settings, classes, w)
        for name in ("growth_", "n_components_searched_", "search_plan_estimate_"):  # none left from an earlier fit
            self.__dict__.pop(name, None)
        for name, value in outcome.attributes.items():
            setattr(self, name, value)
        return outcome

    def _ridge_refit(self, outcome: object) -> np.ndarray:
        """The chosen model: refitted from the search's statistics, or the conjugate gradient's all-rows solution."""
        if outcome.solution is not None:
            coef, self._intercept, mse, _ = outcome.solution
            self.train_mse_ = float(np.mean(mse))
            return coef
        coef, self._intercept, self.train_mse_ = ridge_refit(outcome.stats, self.alpha_, self.fit_intercept,
                                                             self.kernel_.dtype)
        return coef

    def fold_models(self, indices: object = None, *, fold: int = 0) -> list[tuple[np.ndarray, LinearModels]]:
        """The models the search validated, for any configurations of ``cv_results_``, without a pass.

        Each configuration's model as fitted on fold ``fold``'s training rows
        (a hold-out has one fold), stacked per bandwidth on its candidate map,
        ready for :func:`dxrf.score_models` (e.g. to score them all on a test
        set in one pass: :meth:`score_configurations`). Needs ``keep_models=True``
        at fit (not kept in a saved model).

        Parameters
        ----------
        indices : int array, optional
            Rows of ``cv_results_``; default all.
        fold : int, default=0

        Returns
        -------
        list of (ndarray, LinearModels)
            Per bandwidth among ``indices`` (in order of first appearance): the
            rows of ``cv_results_`` and their stacked models, in the same order.
        """
        check_is_fitted(self, "cv_results_")
        if getattr(self, "_fold_paths", None) is None:
            raise ValueError(f"{type(self).__name__} keeps the models of its configurations only when fitted with keep_models=True")
        n_conf = int(np.prod(self._grid_shape))
        rows = np.arange(n_conf) if indices is None else np.asarray(indices).reshape(-1)
        if rows.size == 0 or not np.issubdtype(rows.dtype, np.integer) or rows.min() < 0 or rows.max() >= n_conf:
            raise ValueError(f"indices must be a non-empty list of rows of cv_results_ (0..{n_conf - 1}), got {indices!r}")
        fold = check_int(fold, "fold", low=0, what=f"a fold number in 0..{self.n_splits_ - 1}")
        if fold >= self.n_splits_:
            raise ValueError(f"fold={fold}, but the search has {self.n_splits_} fold(s)")
        b_of, v_of, i_of, a_of = np.unravel_index(rows, self._grid_shape)
        out = []
        for b in dict.fromkeys(b_of.tolist()):
            mine = np.flatnonzero(b_of == b)
            entries = []
            for j in mine:
                if (b, fold, v_of[j], i_of[j]) not in self._fold_paths:
                    raise ValueError(f"configuration {rows[j]} of cv_results_ was not searched (bandwidth_choice='plain')")
                idx, sc, coefs, icpts = self._fold_paths[b, fold, v_of[j], i_of[j]]
                a = a_of[j]
                entries.append((idx, sc, coefs[a : a + 1], icpts[a : a + 1]))
            out.append((rows[mine], stacked_models(self._candidate_kernels[b], entries, self._task)))
        return out

    def fold_selection(self, index: int, *, fold: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The features configuration ``index`` of ``cv_results_`` selected on fold ``fold``'s training rows.

        Returns ``(index, scales)`` into its bandwidth's ``M0`` candidates: the
        model's feature ``j`` is ``scales[j]`` times candidate ``index[j]`` of the
        ``M0``-candidate map. Needs ``keep_models=True`` at fit; not for
        ``features="nystroem"`` (configuration ``index`` takes the first M landmarks).
        """
        if self.features == "nystroem":
            raise ValueError("fold_selection is for random Fourier candidates: with features='nystroem' each "
                             "configuration takes the first n_components landmarks (features_.landmark_indices_ at the refit)")
        (rows, _), = self.fold_models([index], fold=fold)
        b, v, i, _ = np.unravel_index(int(rows[0]), self._grid_shape)
        idx, sc, _, _ = self._fold_paths[b, fold, v, i]
        return idx.copy(), sc.copy()

    def score_configurations(self, X: object, y: object, indices: object = None, *, fold: int = 0) -> dict:
        """Score the fold models of many configurations on ``(X, y)`` in ONE pass (e.g. a test set).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array
            Targets as given to ``fit`` (class labels for the classifier).
        indices : int array, optional
            Rows of ``cv_results_``; default all.
        fold : int, default=0
            Whose training rows fitted the models (see :meth:`fold_models`).

        Returns
        -------
        dict
            ``"index"`` (the rows of ``cv_results_``), ``"mse"`` (mean over
            rows and outputs; the classifier's against +-1 class columns),
            ``"error"`` (the classifier's misclassification rate) and ``"n"``.
        """
        groups = self.fold_models(indices, fold=fold)
        if self._task == "classification":
            y = label_codes(y, self.classes_)
        scores = score_models(X, y, [g for _, g in groups])
        out = {
            "index": np.concatenate([r for r, _ in groups]),
            "mse": np.concatenate([sc.mse for sc in scores]),
            "n": int(scores[0].n),
        }
        if self._task == "classification":
            out["error"] = np.concatenate([sc.error for sc in scores])
        return out


class RandomFeatureRidgeCV(_SearchCV, _RidgeRegressor):
    __doc__ = f"""Ridge regression on random features with the whole model search in one pass.

    Searches bandwidths, feature selections, numbers of features ``M``, the
    selections' penalties and the ridge penalty ``alpha`` on the statistics
    of one read of X, scores every configuration on validation rows (R^2,
    and MSE), and refits the best one on all rows from the same statistics.
    Afterwards it is a :class:`RandomFeatureRidge`: ``predict``, ``score``,
    ``save``/``load`` and ``dxrf predict`` work as there.

    Cost: one eigendecomposition of the candidates' Gram per (bandwidth,
    fold) serves every ELSS ``lam``; one eigendecomposition per (bandwidth,
    fold, selection, M) gives every ``alpha``. Memory of the pass: about
    ``8 M0^2`` bytes per bandwidth and row group (folds, or 2 for a hold-out).
    ``features="nystroem"`` searches Nyström features instead (one more read
    of X draws the landmarks; one eigendecomposition of ``K_MM`` per
    (bandwidth, M) whitens every fold's statistics).

    Parameters
    ----------{_SEARCH_PARAMETERS}    store_posterior : bool, default=False
        Keep the coefficients' posterior (``posterior_factor_``, an ``M x M``
        float64 matrix: 128 MB at M = 4000, saved with the model) so that
        ``predict(X, return_std=True)`` gives the predictive standard
        deviation. Needs a positive ``alpha``. Without it the model stays
        small and ``return_std`` is refused.

    Attributes
    ----------{_SEARCH_ATTRIBUTES}    noise_ : float or ndarray of shape (k,)
        The noise variance ``sigma^2`` per output that maximises the evidence
        at ``alpha_``: ``W (MSE + alpha_ |theta|^2) / (W - 1)`` on all rows.
    log_evidence_ : float
        With ``store_posterior`` or an evidence choice: the log marginal
        likelihood at ``alpha_`` and ``noise_``, summed over outputs.
    posterior_factor_, posterior_center_, sum_weight_ : ndarray, ndarray, float
        With ``store_posterior``: ``F``, the features' weighted mean ``c`` and
        ``W``; the predictive variance of a row is ``noise_ (1 + 1/W +
        |(z - c) F|^2)`` (DESIGN, "Evidence and predictive uncertainty").

    Examples
    --------
    >>> import numpy as np, dxrf
    >>> X = np.random.default_rng(0).normal(size=(600, 3)); y = np.sin(2 * X[:, 0])
    >>> m = dxrf.RandomFeatureRidgeCV(bandwidths=[0.5, 1, 2], n_components=[50, 100], random_state=0).fit(X, y)
    >>> m.n_passes_, sorted(m.best_params_)
    (1, ['alpha', 'bandwidth', 'n_components', 'selection'])
    """

    _fitted_schema = fitted(RandomFeatureRidge._fitted_schema, _SEARCH_FITTED)

    def __init__(
        self,
        *,
        bandwidths: object = "auto",
        n_components: object = "auto",
        selections: object = ("none",),
        lams: object = (1e-3,),
        rhos: object = (1.0,),
        alphas: object = DEFAULT_ALPHAS,
        n_candidates: int | None = None,
        candidate_ratio: int | None = None,
        leverage_rows: str = "train",
        bandwidth_choice: str = "joint",
        features: str = "auto",
        kernel: str = "gaussian",
        sampling: str = "iid",
        dtype: str = "auto",
        cv: object = "auto",
        cv_seed: int = 0,
        fit_intercept: bool = True,
        return_train_score: bool = False,
        keep_models: bool = False,
        max_components: int = 8000,
        time_budget: float | None = 300.0,
        nystroem_solver: str = "auto",
        store_posterior: bool = False,
        random_state: object = None,
    ) -> None:
        store_parameters(self, locals())

    _param_rules = {**SEARCH_RULES, "store_posterior": rule(check_bool)}

    def _search_solver(self) -> str:
        if not self.store_posterior:
            return self.nystroem_solver
        if self.nystroem_solver == "pcg":  # the posterior is taken from the statistics the CG never forms
            raise ValueError("nystroem_solver='pcg' forms no statistics: store_posterior=True needs "
                             "nystroem_solver='gram' (or 'auto')")
        return "gram"

    def fit(self, X: np.ndarray | da.Array, y: np.ndarray | da.Array, sample_weight: object = None) -> RandomFeatureRidgeCV:
        """Search and refit, in one pass over X (one more for a median bandwidth, and for Nyström landmarks).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,) or (n_samples, k)
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights: every statistic, validation score and the refit are
            weighted, and so is the median heuristic's sample of rows (folds
            still hash row indices; Nyström landmarks are drawn unweighted).

        Returns
        -------
        self
        """
        self._check_params()
        X, y, w = self._regression_targets(X, y, sample_weight)
        settings = self._settings(int(X.shape[0]), int(X.shape[1]))
        outcome = self._search(X, y, settings, None, w)
        coef = self._ridge_refit(outcome)
        self._set_regression_coef(coef, y.ndim == 1)
        self.__dict__.pop("evidences_", None)
        if outcome.solution is not None:  # the conjugate gradient's model: its weight and training MSE
            self._store_bayes(None, coef, outcome.solution[2], y.ndim == 1, sum_weight=outcome.solution[3])
        else:
            stats = outcome.stats
            self._store_bayes(stats, coef, mse_from_stats(stats, coef, self._intercept), y.ndim == 1)
        if isinstance(self.cv, str) and "log_evidence_" not in self.__dict__:  # cv="evidence": the chosen score
            self.log_evidence_ = self.best_score_
        return self


class RandomFeatureClassifierCV(_SearchCV, _RidgeClassifier):
    __doc__ = f"""Classification on random features with the whole model search in one pass.

    The search runs on the squared-loss statistics of +-1 class columns (one
    column for two classes, one per class otherwise), as
    :class:`RandomFeatureClassifier` with ``loss="squared"``: the validation
    score is the R^2 of those columns (and ``mean_validation_mse`` their
    MSE), exact from the statistics. With ``loss="logistic"`` (or
    ``"multinomial"``) the chosen configuration's features and ``alpha`` are
    then refitted by L2-penalised logistic (or softmax) regression on all rows
    (its passes are added to ``n_passes_``).

    Parameters
    ----------{_SEARCH_PARAMETERS}
    scoring : {{"r2", "accuracy"}}, default="r2"
        What chooses the configuration: ``"r2"``, the R^2 of the +-1 class
        columns, exact from the one pass's statistics; ``"accuracy"``, the
        fraction of validation rows classified right, from one more pass
        that scores every configuration's models at once. Both are in
        ``cv_results_`` with ``"accuracy"`` (``mean_test_r2``, ``mean_test_accuracy``).
    loss : {{"squared", "logistic", "multinomial"}}, default="squared"
    solver, max_iter, tol, hessian_rows
        Of the logistic refit; see :class:`RandomFeatureClassifier`.
    class_weight : "balanced", dict or None, default=None
        Multiplied into ``sample_weight``, as in :class:`RandomFeatureClassifier`.

    Attributes
    ----------{_SEARCH_ATTRIBUTES}
    classes_ : ndarray
    n_iter_ : int
    """

    _fitted_schema = fitted(RandomFeatureClassifier._fitted_schema, _SEARCH_FITTED)

    _task = "classification"

    def __init__(
        self,
        *,
        bandwidths: object = "auto",
        n_components: object = "auto",
        selections: object = ("none",),
        lams: object = (1e-3,),
        rhos: object = (1.0,),
        alphas: object = DEFAULT_ALPHAS,
        n_candidates: int | None = None,
        candidate_ratio: int | None = None,
        leverage_rows: str = "train",
        bandwidth_choice: str = "joint",
        features: str = "auto",
        kernel: str = "gaussian",
        sampling: str = "iid",
        dtype: str = "auto",
        cv: object = "auto",
        cv_seed: int = 0,
        fit_intercept: bool = True,
        return_train_score: bool = False,
        keep_models: bool = False,
        scoring: str = "r2",
        loss: str = "squared",
        solver: str = "auto",
        max_iter: int = 100,
        tol: float = 1e-8,
        hessian_rows: int | str | None = "auto",
        class_weight: object = None,
        max_components: int = 8000,
        time_budget: float | None = 300.0,
        nystroem_solver: str = "auto",
        random_state: object = None,
    ) -> None:
        store_parameters(self, locals())

    _param_rules = {**CLASSIFIER_RULES, **SEARCH_RULES}

    def fit(self, X: np.ndarray | da.Array, y: np.ndarray | da.Array, sample_weight: object = None) -> RandomFeatureClassifierCV:
        """Search on the squared-loss statistics (one pass), then refit the best.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
            Class labels.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights, times ``class_weight``: the search's statistics and
            scores and the refit are weighted (as in :class:`RandomFeatureRidgeCV`).

        Returns
        -------
        self
        """
        self._check_params()
        X, T, w = self._class_targets(X, y, sample_weight)
        settings = self._settings(int(X.shape[0]), int(X.shape[1]))
        outcome = self._search(X, T, settings, self.classes_, w)
        if self.loss == "squared":
            self._set_class_coef(self._ridge_refit(outcome))
            return self
        if self.alpha_ <= 0:
            raise ValueError(f"loss={self.loss!r} needs a positive penalty: the search chose alpha=0; remove 0 from alphas")
        return self._logistic_refit(X, T, self.kernel_, w)

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
"""

from __future__ import annotations

import dataclasses
import inspect
import time

import dask.array as da
import numpy as np
from sklearn.utils.validation import check_is_fitted

from dxrf.core.memory import check_statistics
from dxrf.core.persistable import fitted
from dxrf.core.validation import (
    ParameterTypeError,
    check_bool,
    check_choice,
    check_int,
    check_seed,
    is_dask,
    is_integer,
)
from dxrf.core.weights import check_class_weight
from dxrf.features.landmarks import LANDMARK_KERNELS
from dxrf.features.maps import RandomFourierFeatures, fit_map
from dxrf.features.nystroem import NystroemFeatures, landmark_kernel, uniform_landmarks
from dxrf.search.evaluate import GridErrors, candidate_prefix, fold_pairs, merge_errors, select_largest, validate_grid
from dxrf.search.grid import SearchGrid, Variant, check_grid
from dxrf.search.landmarks import validate_landmarks
from dxrf.search.results import best_index, results_table, warn_at_edges
from dxrf.selection.selectors import (
    EnergyScoreSelector,
    KernelAlignmentSelector,
    LeverageScoreSampler,
    _split_random_state,
)
from dxrf.stats.scoring import LinearModels, score_models
from dxrf.stats.feature_stats import FeatureStats, accumulate
from dxrf.learners.classifier import LOSSES, RandomFeatureClassifier
from dxrf.search.cv_splits import check_cv
from dxrf.learners.ridge import RandomFeatureRidge
from dxrf.solvers.ridge_path import mse_from_stats, ridge_path, statistics_rtol
from dxrf.learners.search_cv_docs import _SEARCH_ATTRIBUTES, _SEARCH_PARAMETERS

__all__ = ["RandomFeatureRidgeCV", "RandomFeatureClassifierCV", "DEFAULT_BANDWIDTHS", "DEFAULT_ALPHAS"]

DEFAULT_BANDWIDTHS = ("median*0.25", "median*0.5", "median", "median*2", "median*4")
DEFAULT_N_COMPONENTS = (100, 300, 1000)
DEFAULT_ALPHAS = tuple(10.0**p for p in range(-10, 1))
SCORINGS = ("r2", "accuracy")
LEVERAGE_ROWS = ("train", "all")
BANDWIDTH_CHOICES = ("joint", "plain", "plain-first")
FEATURES = ("fourier", "nystroem")


def store_parameters(estimator: object, values: dict) -> None:
    """Set every parameter of ``type(estimator).__init__`` from its ``locals()``: ``__init__`` only stores."""
    for name in inspect.signature(type(estimator).__init__).parameters:
        if name != "self":
            setattr(estimator, name, values[name])


def _resolve_seed(random_state: object) -> int:
    """One integer seeding every draw of a search, so the refit repeats the search's selection."""
    if is_integer(random_state):
        return int(random_state)
    if random_state is None:
        return int(np.random.default_rng().integers(2**31))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31))
    raise ParameterTypeError(f"random_state must be an int, RandomState, Generator or None, got {random_state!r}")


def class_codes(T: object) -> object:
    """Integer class codes from +-1 class columns (one column for two classes)."""
    return (T[:, 0] > 0).astype(np.int64) if T.shape[1] == 1 else T.argmax(axis=1)


def stacked_models(kernel: object, entries: list, task: str) -> LinearModels:
    """One :class:`LinearModels` stack on ``kernel``'s candidates from ``(index, scales, coefs, intercepts)`` entries.

    Each entry's ``coefs`` (shape ``(P, M, k)``) are scattered onto the
    candidates they select, so one product per tile scores every model.
    """
    m0, k = kernel.n_components, entries[0][2].shape[2]
    theta = np.zeros((sum(e[2].shape[0] for e in entries), m0, k))
    icpts = np.zeros((theta.shape[0], k))
    row = 0
    for idx, sc, coef, icpt in entries:
        p = coef.shape[0]
        np.add.at(theta[row : row + p], (slice(None), idx), sc[None, :, None] * coef)  # repeats add up
        icpts[row : row + p] = icpt
        row += p
    return LinearModels(kernel, theta, icpts, task=task)


def validation_accuracy(
    X: object, T: object, kernels: list, found: object, grid: SearchGrid, kind: str, cv: object, cv_seed: int,
    sample_weight: object = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Validation and training accuracy of every configuration, from one scoring pass over X.

    Each fold's models (every variant, M and alpha, fitted on the fold's
    training rows) are scattered onto their bandwidth's candidate kernel
    (``kernels[b]``: the candidates, or the landmarks' kernel values), so one
    product per tile scores them all (:func:`dxrf.score_models`); fold ``j``'s
    models are read on fold ``j``'s rows for validation, and on the other
    rows for training. With ``sample_weight`` the accuracy is the weighted
    fraction of rows classified right. Returns ``(validation, training)``: per
    bandwidth, an array of shape (folds, variants, len(M), len(alpha)).
    """
    n_folds = len(found.mse[0])
    models, kept = [], []
    for b, kernel in enumerate(kernels):
        # the (variant, M) searched at this bandwidth (all, unless bandwidth_choice="plain" pruned some)
        present = [(v, i) for v in range(len(grid.variants)) for i in range(grid.n_components.size) if (b, 0, v, i) in found.paths]
        kept.append(present)
        for f in range(n_folds):
            models.append(stacked_models(kernel, [found.paths[b, f, v, i] for v, i in present], "classification"))
    codes = class_codes(T)
    if kind == "kfold":
        scores = score_models(X, codes, models, folds=cv, split_seed=cv_seed, sample_weight=sample_weight)
        valid = [[scores[f][b * n_folds + f].error for f in range(n_folds)] for b in range(len(kernels))]
        train = []
        for b in range(len(kernels)):
            per_fold = []
            for f in range(n_folds):
                others = [scores[j][b * n_folds + f] for j in range(n_folds) if j != f]  # n: rows or total weight
                total = sum(o.n for o in others)
                per_fold.append(sum(o.n * o.error for o in others) / (total if total > 0 else 1.0))
            train.append(per_fold)
    else:
        tr, va = score_models(X, codes, models, split=cv, split_seed=cv_seed, sample_weight=sample_weight)
        valid = [[va[b].error] for b in range(len(kernels))]
        train = [[tr[b].error] for b in range(len(kernels))]
    shape = (len(grid.variants), grid.n_components.size, grid.alphas.size)

    def spread(e: np.ndarray, present: list) -> np.ndarray:
        full = np.full(shape, np.nan)
        for j, (v, i) in enumerate(present):
            full[v, i] = e[j * grid.alphas.size : (j + 1) * grid.alphas.size]
        return 1.0 - full

    return tuple(
        [np.stack([spread(e, kept[b]) for e in per_fold]) for b, per_fold in enumerate(errors)] for errors in (valid, train)
    )


def label_codes(y: object, classes: np.ndarray) -> object:
    """Codes (positions in ``classes``) of class labels; ``ValueError`` for a label not in ``classes``."""

    def codes(block: np.ndarray) -> np.ndarray:
        block = np.asarray(block).reshape(-1)
        c = np.clip(np.searchsorted(classes, block), 0, classes.size - 1)
        if not np.array_equal(classes[c], block):
            raise ValueError(f"y holds labels that fit did not see (classes_ = {classes.tolist()})")
        return c.astype(np.int64)

    return y.reshape(-1).map_blocks(codes, dtype=np.int64) if is_dask(y) else codes(y)


def _check_rows(groups: tuple[FeatureStats, ...], kind: str, cv: object, n_rows: int) -> None:
    plural = "s" if n_rows != 1 else ""
    if kind == "kfold":
        empty = [j for j, g in enumerate(groups) if g.n == 0]
        if empty and not is_integer(cv):  # given splits: every test set holds rows, so they weigh 0
            raise ValueError(f"cv split {empty[0]}: its test rows have a total sample_weight of 0")
        if empty:
            raise ValueError(
                f"cv={cv} leaves fold {empty[0]} without rows (X has {n_rows} sample{plural}); "
                "use fewer folds or a hold-out fraction"
            )
    elif groups[0].n == 0 or groups[1].n == 0:
        raise ValueError(f"the hold-out cv left no training or no validation rows (X has {n_rows} sample{plural}); change cv=")


def _split_variants(grid: SearchGrid) -> tuple[list[int], list[int]]:
    """Positions in ``grid.variants`` of the plain features (no selection) and of the selections."""
    plain = [v for v, var in enumerate(grid.variants) if var.criterion is None]
    return plain, [v for v in range(len(grid.variants)) if v not in plain]


def _plain_choice(plain: GridErrors) -> int:
    """The bandwidth whose plain features at the largest M validate best (lowest MSE over alphas; first of equals)."""
    top = [np.nan_to_num(e[:, 0, -1].mean(axis=0), nan=np.inf).min() for e in plain.mse]
    return int(np.argmin(top))


#: the fitted attributes a search adds to the model it refits
_SEARCH_FITTED = fitted(
    cv_results_="dict",
    best_index_="int",
    best_params_="dict",
    best_score_="real-or-nan",
    n_splits_="int",
    n_candidates_="int",
    median_bandwidth_="real-or-none",
    bandwidth_="real",
    random_state_="int",
    search_times_="dict",
)


class _SearchCV:
    """The search shared by the regressor and the classifier."""

    _task = "regression"

    @property
    def partial_fit(self):  # noqa: D401 - hides the inherited method (hasattr is False)
        """Not available: the search chooses its parameters from every row at once."""
        raise AttributeError(
            f"{type(self).__name__} has no partial_fit: its search needs all the rows; give the chosen "
            "parameters to RandomFeatureRidge or RandomFeatureClassifier and use their partial_fit"
        )

    def _candidate_map(self, n_candidates: int, bandwidth: float, seed: int) -> RandomFourierFeatures:
        return RandomFourierFeatures(
            n_candidates, kernel=self.kernel, bandwidth=bandwidth,
            sampling=self.sampling if self.features == "fourier" else "iid",  # Nystroem: only the median probe
            dtype=self.dtype, random_state=seed,
        )

    def _selector(self, variant: Variant, m: int, m0: int, bandwidth: float, seed: int) -> object:
        base = self._candidate_map(m0, bandwidth, None)
        kw = {"n_candidates": m0, "base": base, "random_state": seed}
        if variant.criterion == "leverage":
            return LeverageScoreSampler(m, lam=variant.lam, method=variant.method, **kw)
        if variant.criterion == "energy":
            return EnergyScoreSelector(m, **kw)
        return KernelAlignmentSelector(m, rho=variant.rho, method=variant.method, **kw)

    def _check_params(self) -> SearchGrid:
        """Validate the parameters (also run on a loaded model); return the grid."""
        if hasattr(self, "loss"):
            from dxrf.solvers.logistic.fit import check_solver_options

            check_choice(self.loss, "loss", LOSSES)
            check_choice(self.scoring, "scoring", SCORINGS)
            check_solver_options(self.max_iter, self.tol)  # before the search's pass, not at the refit after it
            check_class_weight(self.class_weight)
        check_bool(self.fit_intercept, "fit_intercept")
        check_bool(self.keep_models, "keep_models")
        check_bool(self.return_train_score, "return_train_score")
        check_choice(self.leverage_rows, "leverage_rows", LEVERAGE_ROWS)
        check_choice(self.bandwidth_choice, "bandwidth_choice", BANDWIDTH_CHOICES)
        check_seed(self.cv_seed, "cv_seed")
        grid = check_grid(
            self.bandwidths, self.n_components, self.selections, self.lams, self.rhos, self.alphas, self.n_candidates,
            self.candidate_ratio,
        )
        if self.bandwidth_choice != "joint" and all(v.criterion is not None for v in grid.variants):
            raise ValueError(
                f"bandwidth_choice={self.bandwidth_choice!r} chooses the bandwidth by the plain features: "
                "add 'none' to selections"
            )
        if check_choice(self.features, "features", FEATURES) == "nystroem":
            check_choice(self.kernel, "kernel", LANDMARK_KERNELS)
            if any(v.criterion is not None for v in grid.variants):
                raise ValueError(
                    f"selections={self.selections!r}: with features='nystroem' only selections=['none'] is "
                    "searched (the selections choose among random Fourier candidates)"
                )
            for name in ("n_candidates", "candidate_ratio"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name}={getattr(self, name)!r} is for random Fourier candidates; with features='nystroem' "
                        f"give {name}=None (the landmarks are the first max(n_components) rows of one uniform sample)"
                    )
        return grid

    def _search(
        self, X: np.ndarray | da.Array, T: np.ndarray | da.Array, classes: np.ndarray | None, sample_weight: object = None
    ) -> tuple:
        """Run the pass and the search; set the search's attributes. Returns the refit's statistics and kernel.

        ``sample_weight`` (checked) weighs every statistic of the pass, so
        every validation MSE, R^2 (with the weighted variance) and accuracy
        is a weighted mean, and the refit is weighted.
        """
        grid = self._check_params()
        # a splitter sees y as given to fit: the class labels, not the +-1 columns
        given_y = T if classes is None or is_dask(T) else classes[class_codes(T)]
        kind, cv = check_cv(self.cv, X, given_y)
        n_folds = (cv if is_integer(cv) else int(cv.max()) + 1) if kind == "kfold" else 2
        plain_first = (self.bandwidth_choice == "plain-first" and len(grid.bandwidths) > 1
                       and any(v.criterion is not None for v in grid.variants))
        nystroem = self.features == "nystroem"
        if nystroem and grid.n_candidates > X.shape[0]:
            raise ValueError(f"n_components holds M={grid.n_candidates} landmarks but X has n_samples={X.shape[0]}: "
                             f"use at most {X.shape[0]}")
        # the Grams of every bandwidth and fold: refused before any feature is drawn
        check_statistics(
            grid.n_candidates, "n_components" if nystroem else "n_candidates",
            ("use fewer landmarks (the largest n_components)" if nystroem else
             "use fewer candidates (n_candidates, default 10 x the largest n_components)")
            + ", fewer bandwidths or fewer folds (cv), or more memory",
            maps=1 if plain_first else len(grid.bandwidths), groups=n_folds, X=X,
        )
        seed = _resolve_seed(self.random_state)
        passes = 0
        median = None
        clock = time.perf_counter()
        if grid.needs_median:
            # the median heuristic from a row sample: a read of X (random rows touch most chunks)
            probe = fit_map(self._candidate_map(1, "median", seed), X, sample_weight)
            median = float(probe.bandwidth_)
            passes += 1
        values = [b.resolve(median) for b in grid.bandwidths]
        if nystroem:
            # one uniform race (a read of X), ordered by key: every bandwidth's landmarks, each M a prefix
            rows, L = uniform_landmarks(X, grid.n_candidates, seed)
            passes += 1
            W = np.ascontiguousarray(L.T.astype(self.dtype))
            kernels = [landmark_kernel(W, self.kernel, v, whiten=False) for v in values]
        else:
            candidates = [self._candidate_map(grid.n_candidates, v, seed).fit(X) for v in values]
            kernels = [c.kernel_ for c in candidates]
        split = {"folds": cv} if kind == "kfold" else {"split": cv}

        def read(kernels: list) -> list:
            nonlocal passes, pass_seconds
            start = time.perf_counter()
            out = accumulate(X, T, kernels, split_seed=self.cv_seed, sample_weight=sample_weight, **split)
            passes += 1
            pass_seconds += time.perf_counter() - start
            _check_rows(out[0], kind, self.cv, X.shape[0])
            return out

        def rng_for() -> np.random.Generator:
            return _split_random_state(seed)[1]

        pass_seconds = 0.0
        t_pass = time.perf_counter()
        scoring = getattr(self, "scoring", "r2")
        keep = scoring == "accuracy" or self.keep_models
        if nystroem:
            per_map = read(kernels)
            found = validate_landmarks(per_map, kernels, grid, kind == "kfold", rng_for, **self._validation_options(keep))
        elif plain_first:
            found, per_map = self._plain_first(read, kernels, grid, kind, rng_for, keep)
        else:
            per_map = read(kernels)
            found = self._validate([fold_pairs(g, kind == "kfold") for g in per_map], grid, rng_for, keep_paths=keep)
        t_algebra = t_pass + pass_seconds
        accuracy = train_accuracy = None
        t_score = time.perf_counter()
        if scoring == "accuracy":
            accuracy, train_accuracy = validation_accuracy(X, T, kernels, found, grid, kind, cv, self.cv_seed,
                                                           sample_weight)
            passes += 1
        t_score = time.perf_counter() - t_score
        train_score = train_accuracy if train_accuracy is not None else found.train_r2
        results = results_table(grid, values, found.mse, found.r2, accuracy, found.train_mse,
                                train_score if self.return_train_score else None)
        # what fold_models and score_configurations build on (not saved with the model)
        self._fold_paths = found.paths if self.keep_models else None
        self._candidate_kernels = kernels
        self._grid_shape = (len(values), len(grid.variants), grid.n_components.size, grid.alphas.size)
        best = best_index(results)
        params = dict(results["params"][best])
        b = [s.text for s in grid.bandwidths].index(params["bandwidth"])
        groups_b = per_map[b]
        warn_at_edges(grid, params, values, values[b])

        self.cv_results_ = results
        self.best_index_ = best
        self.best_params_ = params
        self.best_score_ = float(results["mean_test_score"][best])
        self.n_splits_ = len(groups_b) if kind == "kfold" else 1
        self.n_candidates_ = grid.n_candidates
        self.median_bandwidth_ = median
        self.bandwidth_ = float(values[b])
        self.random_state_ = seed
        # the alpha path of the chosen (bandwidth, selection, M): mean validation MSE per alpha
        same = [
            i for i, p in enumerate(results["params"])
            if all(p.get(k) == params.get(k) for k in ("bandwidth", "selection", "n_components", "lam", "rho"))
        ]
        self.alphas_ = grid.alphas
        self.validation_errors_ = results["mean_validation_mse"][same]
        self.alpha_ = float(params["alpha"])
        self.n_passes_ = passes

        # the refit: the chosen selection made again from all rows' statistics, no pass
        total = sum(groups_b)
        variant = Variant(params["selection"], params.get("lam"), params.get("rho"))
        m, m0 = params["n_components"], grid.n_candidates
        cand = None if nystroem else candidates[b]
        refit = None
        if nystroem:
            # the first M landmarks in NystroemFeatures' order (by row index): its map with them, exactly
            order = np.argsort(rows[:m], kind="stable")
            self.features_ = NystroemFeatures(m, kernel=self.kernel, bandwidth=values[b], dtype=self.dtype,
                                              random_state=seed)._set_landmarks(L[order], rows[order], values[b], 1)
            kernel = self.features_.kernel_
            refit = total.subset(order).transformed(kernel.transform_matrix)
        elif grid.candidate_ratio is not None and variant.criterion is not None:
            # the M's own prefix of ratio * M candidates, selected as in the search (no selector
            # takes a prefix of a candidate map): the candidate map is the features' base
            p = grid.candidate_ratio * m
            total_p = candidate_prefix(total, p)
            idx, scales = select_largest(total_p, variant, m, rng_for(), task=self._task)  # ELSS: the Cholesky path
            scales = scales * np.sqrt(m0 / p)
            self.features_ = cand
            kernel = cand.kernel_.subset(idx, scales)
        elif variant.criterion is None:
            idx, scales = np.arange(m), np.full(m, np.sqrt(m0 / m))
            self.features_ = cand
            kernel = cand.kernel_.subset(idx, scales)
        else:
            selector = self._selector(variant, m, m0, values[b], seed)
            selector.fit_from_stats(cand, total, task=self._task, classes=classes)
            idx, scales = selector.selected_, selector.scales_
            self.features_ = selector
            kernel = selector.kernel_
        self.kernel_ = kernel
        self.n_features_in_ = kernel.n_features_in
        done = time.perf_counter()
        # wall seconds of the parts, as GridSearchCV's refit_time_: where a search's time goes
        self.search_times_ = {
            "median": t_pass - clock, "pass": t_algebra - t_pass, "algebra": done - t_algebra - t_score,
            "scoring": t_score,
        }
        return (total.subset(idx, scales) if refit is None else refit), kernel

    def _plain_first(self, read: object, kernels: list, grid: SearchGrid, kind: str, rng_for: object,
                     keep: bool) -> tuple[GridErrors, list]:
        """``bandwidth_choice="plain-first"``: two reads of X, the candidates' Gram at one bandwidth only.

        Read 1 accumulates only the plain features (the first ``max(M)``
        candidates) at every bandwidth; read 2 all ``M0`` candidates at the
        bandwidth their validation chose. Returns the errors and, per
        bandwidth, the row groups the refit can use: all ``M0`` candidates'
        at the chosen bandwidth, the first ``max(M)`` candidates' (enough for
        the plain features) at the others.
        """
        m0, m_max = grid.n_candidates, int(grid.n_components.max())
        plain, others = _split_variants(grid)
        kw = self._validation_options(keep)
        # the first m_max candidates, read as a map of m_max candidates (each at scale sqrt(M0 / m_max))
        up = np.full(m_max, np.sqrt(m0 / m_max))
        per_map = list(read([k.subset(np.arange(m_max), np.ones(m_max)) for k in kernels]))
        pairs = [fold_pairs(tuple(g.subset(np.arange(m_max), up) for g in groups), kind == "kfold") for groups in per_map]
        small = dataclasses.replace(grid, variants=(grid.variants[plain[0]],), n_candidates=m_max, candidate_ratio=None)
        first = validate_grid(pairs, small, rng_for, **kw)
        if first.paths is not None:  # scales on the M0-candidate maps, as every other path's
            first.paths = {key: (idx, sc * up[0], c, i) for key, (idx, sc, c, i) in first.paths.items()}
        b = _plain_choice(first)
        groups_b = read([kernels[b]])[0]
        rest = validate_grid([fold_pairs(groups_b, kind == "kfold")],
                             dataclasses.replace(grid, variants=tuple(grid.variants[v] for v in others)), rng_for, **kw)
        found = merge_errors([(first, list(range(len(kernels))), plain), (rest, [b], others)], grid, len(kernels))
        per_map[b] = groups_b
        return found, per_map

    def _validation_options(self, keep_paths: bool) -> dict:
        return dict(task=self._task, fit_intercept=self.fit_intercept, rtol=statistics_rtol(self.dtype),
                    keep_paths=keep_paths, leverage_rows=self.leverage_rows, train_scores=self.return_train_score)

    def _validate(self, pairs: list, grid: SearchGrid, rng_for: object, *, keep_paths: bool) -> GridErrors:
        """Every configuration's errors (:func:`validate_grid`); ``bandwidth_choice="plain"`` prunes first.

        "plain": the plain features ("none") are validated at every bandwidth;
        the one whose largest M has the lowest validation MSE (over alphas,
        the first of equals) is the only one where the other selections are
        searched. Their rows elsewhere stay NaN (never chosen).
        """
        kw = self._validation_options(keep_paths)
        plain, others = _split_variants(grid)
        if self.bandwidth_choice == "joint" or len(pairs) == 1 or not others:
            return validate_grid(pairs, grid, rng_for, **kw)
        first = validate_grid(pairs, dataclasses.replace(grid, variants=(grid.variants[plain[0]],)), rng_for, **kw)
        b = _plain_choice(first)
        rest = validate_grid([pairs[b]], dataclasses.replace(grid, variants=tuple(grid.variants[v] for v in others)),
                             rng_for, **kw)
        return merge_errors([(first, list(range(len(pairs))), plain), (rest, [b], others)], grid, len(pairs))

    def _ridge_refit(self, stats: FeatureStats) -> np.ndarray:
        # the same solver as the validated path (an eigendecomposition, null directions
        # dropped): at the tiny alphas float32 statistics can favour, a Cholesky
        # factorisation of the nearly singular covariance would give another model
        path = ridge_path(stats, np.array([self.alpha_]), fit_intercept=self.fit_intercept)
        coef, intercept = path.coefs[0], path.intercepts[0]
        self.train_mse_ = float(mse_from_stats(stats, coef, intercept).mean())
        self._intercept = intercept
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


class RandomFeatureRidgeCV(_SearchCV, RandomFeatureRidge):
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
    ----------{_SEARCH_PARAMETERS}
    Attributes
    ----------{_SEARCH_ATTRIBUTES}
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
        bandwidths: object = DEFAULT_BANDWIDTHS,
        n_components: object = DEFAULT_N_COMPONENTS,
        selections: object = ("none",),
        lams: object = (1e-3,),
        rhos: object = (1.0,),
        alphas: object = DEFAULT_ALPHAS,
        n_candidates: int | None = None,
        candidate_ratio: int | None = None,
        leverage_rows: str = "train",
        bandwidth_choice: str = "joint",
        features: str = "fourier",
        kernel: str = "gaussian",
        sampling: str = "iid",
        dtype: str = "float32",
        cv: object = 5,
        cv_seed: int = 0,
        fit_intercept: bool = True,
        return_train_score: bool = False,
        keep_models: bool = False,
        random_state: object = None,
    ) -> None:
        store_parameters(self, locals())

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
        X, y, w = self._regression_targets(X, y, sample_weight)
        stats, _ = self._search(X, y, None, w)
        self._set_regression_coef(self._ridge_refit(stats), y.ndim == 1)
        return self


class RandomFeatureClassifierCV(_SearchCV, RandomFeatureClassifier):
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
        bandwidths: object = DEFAULT_BANDWIDTHS,
        n_components: object = DEFAULT_N_COMPONENTS,
        selections: object = ("none",),
        lams: object = (1e-3,),
        rhos: object = (1.0,),
        alphas: object = DEFAULT_ALPHAS,
        n_candidates: int | None = None,
        candidate_ratio: int | None = None,
        leverage_rows: str = "train",
        bandwidth_choice: str = "joint",
        features: str = "fourier",
        kernel: str = "gaussian",
        sampling: str = "iid",
        dtype: str = "float32",
        cv: object = 5,
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
        random_state: object = None,
    ) -> None:
        store_parameters(self, locals())

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
        stats, kernel = self._search(X, T, self.classes_, w)
        if self.loss == "squared":
            coef = self._ridge_refit(stats)
            self.coef_ = coef.T
            self.intercept_ = self._intercept
            self.n_iter_ = 1
            return self
        if self.alpha_ <= 0:
            raise ValueError(f"loss={self.loss!r} needs a positive penalty: the search chose alpha=0; remove 0 from alphas")
        return self._logistic_refit(X, T, kernel, w)

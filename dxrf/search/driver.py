"""The search driver: one pass of statistics, every configuration validated, the best refitted.

:func:`run_search` is what :class:`dxrf.RandomFeatureRidgeCV` and
:class:`dxrf.RandomFeatureClassifierCV` delegate to. Its steps: plan the row
groups and refuse what cannot fit (:func:`_plan`), draw every bandwidth's
candidates (:func:`_draw`), read X and validate the grid (:func:`_validate_all`),
score accuracy in one more pass when asked (:mod:`dxrf.search.scoring`), and
make the chosen configuration's features and statistics again from all rows
(:mod:`dxrf.search.refit`).
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import numpy as np

from dxrf.core.memory import check_statistics, checked_pass, format_bytes, statistics_bytes, worker_memory_limit
from dxrf.core.options import resolve_options
from dxrf.core.validation import is_dask, is_integer
from dxrf.features.ard import learn_lengthscale_kinds
from dxrf.features.maps import check_lengthscales, fit_map
from dxrf.features.nystroem import landmark_kernel, uniform_landmarks
from dxrf.search.cv_splits import check_cv
from dxrf.search.evaluate import GridErrors, fold_pairs, merge_errors, validate_grid
from dxrf.search.grid import SearchGrid
from dxrf.search.landmarks import validate_landmarks
from dxrf.search.pcg_search import pcg_model, pcg_refusal, pcg_search, search_estimate
from dxrf.search.refit import candidate_map, refit_features
from dxrf.search.results import best_index, results_table, warn_at_edges
from dxrf.search.scoring import class_codes, validation_accuracy
from dxrf.search.settings import SearchSettings, resolve_seed
from dxrf.selection.base_selector import _split_random_state
from dxrf.solvers.ridge_path import statistics_rtol
from dxrf.stats.feature_stats import FeatureStats
from dxrf.stats.accumulation import accumulate

__all__ = ["SearchOutcome", "run_search", "stage_plan", "ARD_ROWS"]

#: rows of the sample whose exact GP evidence gives "ard" and "evidence" bandwidths their lengthscales (measured
#: on kin40k: 8 s at 2000 rows, and the optimum of three starts from one; DESIGN.md)
ARD_ROWS = 2000


@dataclasses.dataclass
class SearchOutcome:
    """What a search found: the estimator's fitted attributes and the refit's statistics.

    ``attributes`` maps fitted-attribute names (``cv_results_``, ``best_params_``,
    ``alpha_``, ``features_``, ``kernel_``, ... and the private ``_fold_paths``,
    ``_candidate_kernels``, ``_grid_shape`` of :meth:`fold_models`) to values;
    ``stats`` are the chosen features' statistics over all rows.
    """

    attributes: dict
    stats: FeatureStats | None
    #: the conjugate gradient's search: the model ``(coef, intercept, train MSE per output, total weight)``
    #: from its all-rows solve, instead of statistics to refit from
    solution: tuple | None = None


@dataclasses.dataclass
class _Plan:
    kind: str  # "kfold", "holdout" or "evidence" (one group: every row)
    cv: object  # the checked cv: a number of folds, fold labels, or a hold-out fraction or mask
    n_folds: int
    plain_first: bool
    seed: int = 0
    solver: str = "gram"  # "pcg": every configuration by conjugate gradient (dxrf.search.pcg_search)
    estimate: dict | None = None  # the two plans' arithmetic, for a Nystrom grid that either can solve
    note: str | None = None  # why the Gram plan was left: said once the search runs


@dataclasses.dataclass
class _Drawn:
    values: list  # the bandwidths' values
    median: float | None
    kernels: list  # per bandwidth, the candidates' kernel
    candidates: list | None  # per bandwidth, the candidate map (Fourier)
    landmarks: tuple | None  # (rows, landmarks) of the uniform race (Nystroem)
    lengthscales: np.ndarray | None = None  # learned for "ard" bandwidths (else "evidence" ones)


class _Reader:
    """Reads of X accumulating statistics, counted and timed (every read of the search is one pass)."""

    def __init__(self, X: object, T: object, s: SearchSettings, plan: _Plan, sample_weight: object) -> None:
        self.X, self.T, self.s, self.plan, self.w = X, T, s, plan, sample_weight
        self.passes, self.seconds = 0, 0.0

    def __call__(self, kernels: list) -> list:
        kind = self.plan.kind
        split = {"folds": self.plan.cv} if kind == "kfold" else {} if kind == "evidence" else {"split": self.plan.cv}
        start = time.perf_counter()
        with checked_pass():  # refused by _plan, before any feature was drawn
            out = accumulate(self.X, self.T, kernels, split_seed=self.s.cv_seed, sample_weight=self.w, **split)
        if kind == "evidence":  # one row group per map: every row trains
            out = [(g,) for g in out]
        self.passes += 1
        self.seconds += time.perf_counter() - start
        _check_rows(out[0], self.plan.kind, self.s.cv, self.X.shape[0])
        return out


def _check_rows(groups: tuple[FeatureStats, ...], kind: str, cv: object, n_rows: int) -> None:
    plural = "s" if n_rows != 1 else ""
    if kind == "evidence":
        if groups[0].n <= 1:
            raise ValueError(f"cv='evidence' needs a total sample weight above 1, got {groups[0].n} ({n_rows} sample{plural})")
    elif kind == "kfold":
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


def _plan(s: SearchSettings, X: object, T: object, classes: np.ndarray | None) -> tuple[SearchSettings, _Plan]:
    """The row groups, and a plan whose statistics fit the workers (refused before any feature is drawn).

    A grid whose candidates' statistics cannot fit is searched by a plan that
    fits, said in one warning: first reading X twice (``"plain-first"``: the
    candidates' Gram at one bandwidth only), then fewer candidates (``M0``,
    never below the largest M). What cannot fit even so is refused, naming the
    parameters to change. A Nyström grid the conjugate gradient can solve
    (:func:`~dxrf.search.pcg_search.pcg_refusal`) takes it instead where its
    Gram would not fit with room for the tree merge, or where its estimate is
    lower (``nystroem_solver="auto"``). Returns the settings the search runs with.
    """
    grid = s.grid
    # a splitter sees y as given to fit: the class labels, not the +-1 columns
    given_y = T if classes is None or is_dask(T) else classes[class_codes(T)]
    kind, cv = check_cv(s.cv, X, given_y)
    n_folds = (cv if is_integer(cv) else int(cv.max()) + 1) if kind == "kfold" else 1 if kind == "evidence" else 2
    if kind == "evidence" and s.scoring == "accuracy":
        raise ValueError("cv='evidence' scores by the evidence on all rows: scoring='accuracy' needs validation rows "
                         "(give cv=k or a hold-out fraction)")
    if kind == "evidence" and s.bandwidth_choice != "joint":
        raise ValueError(f"cv='evidence' searches with bandwidth_choice='joint', got {s.bandwidth_choice!r}")
    selecting = any(v.criterion is not None for v in grid.variants)
    plain_first = s.bandwidth_choice == "plain-first" and len(grid.bandwidths) > 1 and selecting
    if s.nystroem and grid.n_candidates > X.shape[0]:
        raise ValueError(f"n_components holds M={grid.n_candidates} landmarks but X has n_samples={X.shape[0]}: "
                         f"use at most {X.shape[0]}")

    def check(m0: int, first: bool) -> None:
        # the Grams of every bandwidth and fold
        check_statistics(
            m0, "n_components" if s.nystroem else "n_candidates",
            ("use fewer landmarks (the largest n_components)" if s.nystroem else
             "use fewer candidates (n_candidates, default 10 x the largest n_components)")
            + ", fewer bandwidths or fewer folds (cv), or more memory",
            maps=1 if first else len(grid.bandwidths), groups=n_folds, X=X,
        )

    refusal = pcg_refusal(s, kind)
    if s.solver == "pcg" and refusal is not None:
        raise ValueError(f"nystroem_solver='pcg' cannot run this search: {refusal}")
    cg = s.nystroem and refusal is None and s.solver != "gram"
    seed = resolve_seed(s.random_state)
    estimate = search_estimate(s, int(X.shape[0]), int(X.shape[1]), 1 if T.ndim == 1 else int(T.shape[1]),
                               dask_input=is_dask(X)) if cg else None
    # a growing search's stages, and a grid the CG can take over, need the Gram to fit with room for its
    # tree merge: a stage at the plain check's limit had its workers killed in the merge (kin40k, M = 4000
    # on workers of 2 GiB: 9 partials of 256 MiB)
    merge_room = s.nystroem and (s.growth is not None or (cg and s.solver == "auto"))
    try:
        check(grid.n_candidates, plain_first)
        if merge_room:
            _check_merge(grid.n_candidates, 1 if plain_first else len(grid.bandwidths), n_folds)
    except ValueError as refused:
        if cg:  # the conjugate gradient holds M-vectors per worker, no M x M statistics
            need = str(refused).rsplit(": use ", 1)[0]
            return s, _Plan(kind, cv, n_folds, False, seed, "pcg", estimate,
                            f"{need}; so the search solves each configuration by conjugate gradient (no M x M statistics)")
        s, plain_first = _plan_that_fits(s, plain_first, selecting, check, refused)
    solver = "pcg" if cg and (s.solver == "pcg" or estimate["plan"] == "pcg") else "gram"
    return s, _Plan(kind, cv, n_folds, plain_first, seed, solver, estimate)


def _check_merge(m0: int, maps: int, groups: int) -> None:
    """Refuse Gram statistics whose tree merge (``split_every + 1`` partials at once) would not fit a worker."""
    limit = worker_memory_limit()
    if limit is None:
        return
    partial, _ = statistics_bytes(m0, maps=maps, groups=groups)
    held = (resolve_options().split_every + 1) * partial
    if held > limit.nbytes:
        raise ValueError(
            f"n_components={m0} ({maps} feature map{'s' if maps != 1 else ''} x {groups} row groups) needs about "
            f"{format_bytes(held)} per worker to merge its statistics ({resolve_options().split_every + 1} partial "
            f"results of {format_bytes(partial)}) but {limit.source} is {format_bytes(limit.nbytes)}: use "
            "fewer landmarks, fewer folds (cv), or more memory"
        )


def stage_plan(s: SearchSettings, X: object, T: object, classes: np.ndarray | None) -> tuple[str, float | None] | None:
    """How the search ``s`` would run: ``(solver, estimated operations)``, or None when its plan cannot fit.

    For a growing search's next stage: its time is predicted from the
    estimate (None: no estimate, a grid only the Gram plan can solve).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the search says it when it runs
        try:
            _, plan = _plan(s, X, T, classes)
        except ValueError:
            return None
    if plan.estimate is None:
        return plan.solver, None
    return plan.solver, plan.estimate[f"{plan.solver}_ops"]


def _fits(check: object, m0: int, first: bool) -> bool:
    try:
        check(m0, first)
    except ValueError:
        return False
    return True


def _plan_that_fits(s: SearchSettings, plain_first: bool, selecting: bool, check: object,
                    refused: ValueError) -> tuple[SearchSettings, bool]:
    """``(settings, plain_first)`` of the cheapest change that fits: two reads, then fewer candidates.

    A changed plan must fit with room for a merge: the check counts two
    partials per worker, a tree merge holds up to ``split_every + 1`` (and a
    plan at the check's own limit had its workers die in the merge).
    """
    grid = s.grid
    m0, m_max = grid.n_candidates, int(grid.n_components.max())
    room = np.sqrt((resolve_options().split_every + 1) / 2)

    def roomy(m: int, first: bool) -> bool:
        return _fits(check, int(np.ceil(m * room)), first)

    changes = []
    has_plain = any(v.criterion is None for v in grid.variants)
    if not plain_first and selecting and has_plain and len(grid.bandwidths) > 1:
        plain_first = True
        changes.append("reads X twice (bandwidth_choice='plain-first': the candidates' Gram at the bandwidth "
                       "the plain features choose)")
    if not roomy(m0, plain_first):
        low = grid.candidate_ratio * m_max if grid.candidate_ratio else m_max
        if s.nystroem or not selecting or low >= m0 or not roomy(low, plain_first):
            raise refused
        high = m0  # the largest M0 with room, by bisection: low has room, high has not
        while high - low > max(1, m0 // 100):
            mid = (low + high) // 2
            low, high = (mid, high) if roomy(mid, plain_first) else (low, mid)
        changes.append(f"draws n_candidates={low} instead of {m0}")
        s = dataclasses.replace(s, grid=dataclasses.replace(grid, n_candidates=low))
    need = str(refused).rsplit(": use ", 1)[0]  # the refusal without its advice
    warnings.warn(f"{need}; so the search {' and '.join(changes)}", UserWarning, stacklevel=4)
    return dataclasses.replace(s, bandwidth_choice="plain-first") if plain_first else s, plain_first


def _draw(s: SearchSettings, X: object, T: object, sample_weight: object, seed: int) -> tuple[_Drawn, int]:
    """Every bandwidth's candidates (or the landmarks' kernels); returns them and the reads of X made."""
    passes, median, learned = 0, None, None
    if s.grid.needs_median:
        # the median heuristic from a row sample: a read of X (random rows touch most chunks)
        median = float(fit_map(candidate_map(s, 1, "median", seed), X, sample_weight).bandwidth_)
        passes += 1
    kinds = tuple(k for k, need in (("ard", s.grid.needs_ard), ("evidence", s.grid.needs_evidence)) if need)
    fitted: dict = {}
    if kinds:
        # lengthscales of maximum GP evidence, per column ("ard") and one for all ("evidence"),
        # on one row sample with its targets: a read of X
        rng = np.random.default_rng([seed, 0xA4D])
        fitted = learn_lengthscale_kinds(X, T, sample_weight, rng, ARD_ROWS, 1, "the search", kinds)
        passes += 1
    learned, isotropic = (fitted[k].lengthscales if k in fitted else None for k in ("ard", "evidence"))
    values = [b.resolve(median, learned, isotropic) for b in s.grid.bandwidths]
    learned = learned if learned is not None else isotropic
    for v in values:
        if isinstance(v, np.ndarray):  # lengthscales: one per column, refused before any read
            check_lengthscales(v, int(X.shape[1]))
    if s.nystroem:
        # one uniform race (a read of X), ordered by key: every bandwidth's landmarks, each M a prefix
        rows, L = uniform_landmarks(X, s.grid.n_candidates, seed)
        W = np.ascontiguousarray(L.T.astype(s.dtype))
        kernels = [landmark_kernel(W, s.kernel, v, whiten=False) for v in values]
        return _Drawn(values, median, kernels, None, (rows, L), learned), passes + 1
    candidates = [candidate_map(s, s.grid.n_candidates, v, seed).fit(X) for v in values]
    return _Drawn(values, median, [c.kernel_ for c in candidates], candidates, None, learned), passes


def _split_variants(grid: SearchGrid) -> tuple[list[int], list[int]]:
    """Positions in ``grid.variants`` of the plain features (no selection) and of the selections."""
    plain = [v for v, var in enumerate(grid.variants) if var.criterion is None]
    return plain, [v for v in range(len(grid.variants)) if v not in plain]


def _plain_choice(plain: GridErrors) -> int:
    """The bandwidth whose plain features at the largest M validate best (lowest MSE over alphas; first of equals)."""
    top = [np.nan_to_num(e[:, 0, -1].mean(axis=0), nan=np.inf).min() for e in plain.mse]
    return int(np.argmin(top))


def _only(grid: SearchGrid, variants: list[int], **changes: object) -> SearchGrid:
    return dataclasses.replace(grid, variants=tuple(grid.variants[v] for v in variants), **changes)


def _validate(pairs: list, s: SearchSettings, rng_for: object, kw: dict) -> GridErrors:
    """Every configuration's errors (:func:`validate_grid`); ``bandwidth_choice="plain"`` prunes first.

    "plain": the plain features ("none") are validated at every bandwidth;
    the one whose largest M has the lowest validation MSE (over alphas,
    the first of equals) is the only one where the other selections are
    searched. Their rows elsewhere stay NaN (never chosen).
    """
    grid = s.grid
    plain, others = _split_variants(grid)
    if s.bandwidth_choice == "joint" or len(pairs) == 1 or not others:
        return validate_grid(pairs, grid, rng_for, **kw)
    first = validate_grid(pairs, _only(grid, plain[:1]), rng_for, **kw)
    b = _plain_choice(first)
    rest = validate_grid([pairs[b]], _only(grid, others), rng_for, **kw)
    return merge_errors([(first, list(range(len(pairs))), plain), (rest, [b], others)], grid, len(pairs))


def _plain_first(read: _Reader, kernels: list, s: SearchSettings, rng_for: object, kw: dict) -> tuple[GridErrors, list]:
    """``bandwidth_choice="plain-first"``: two reads of X, the candidates' Gram at one bandwidth only.

    Read 1 accumulates only the plain features (the first ``max(M)``
    candidates) at every bandwidth; read 2 all ``M0`` candidates at the
    bandwidth their validation chose. Returns the errors and, per
    bandwidth, the row groups the refit can use: all ``M0`` candidates'
    at the chosen bandwidth, the first ``max(M)`` candidates' (enough for
    the plain features) at the others.
    """
    grid, kfold = s.grid, read.plan.kind == "kfold"
    m0, m_max = grid.n_candidates, int(grid.n_components.max())
    plain, others = _split_variants(grid)
    # the first m_max candidates, read as a map of m_max candidates (each at scale sqrt(M0 / m_max))
    up = np.full(m_max, np.sqrt(m0 / m_max))
    per_map = list(read([k.subset(np.arange(m_max), np.ones(m_max)) for k in kernels]))
    pairs = [fold_pairs(tuple(g.subset(np.arange(m_max), up) for g in groups), kfold) for groups in per_map]
    first = validate_grid(pairs, _only(grid, plain[:1], n_candidates=m_max, candidate_ratio=None), rng_for, **kw)
    if first.paths is not None:  # scales on the M0-candidate maps, as every other path's
        first.paths = {key: (idx, sc * up[0], c, i) for key, (idx, sc, c, i) in first.paths.items()}
    b = _plain_choice(first)
    groups_b = read([kernels[b]])[0]
    rest = validate_grid([fold_pairs(groups_b, kfold)], _only(grid, others), rng_for, **kw)
    found = merge_errors([(first, list(range(len(kernels))), plain), (rest, [b], others)], grid, len(kernels))
    per_map[b] = groups_b
    return found, per_map


def _validate_all(read: _Reader, drawn: _Drawn, s: SearchSettings, rng_for: object) -> tuple[GridErrors, list, dict]:
    """Read X (once; twice for "plain-first") and validate every configuration.

    Returns the errors, the row groups, and (Nyström) each validated map
    whitened for the refit (:class:`~dxrf.search.landmarks.Whitened`, by
    bandwidth and position of M; empty for Fourier candidates).
    """
    keep = s.scoring == "accuracy" or s.keep_models  # the accuracy pass scores the kept fold models
    kw = dict(task=s.task, fit_intercept=s.fit_intercept, rtol=statistics_rtol(s.dtype), keep_paths=keep,
              leverage_rows=s.leverage_rows, train_scores=s.return_train_score)
    kfold = read.plan.kind == "kfold"
    if s.nystroem:
        per_map = read(drawn.kernels)
        found, whitened = validate_landmarks(per_map, drawn.kernels, s.grid, kfold, rng_for, drawn.landmarks[0], **kw)
        return found, per_map, whitened
    if read.plan.plain_first:
        return *_plain_first(read, drawn.kernels, s, rng_for, kw), {}
    per_map = read(drawn.kernels)
    return _validate([fold_pairs(g, kfold) for g in per_map], s, rng_for, kw), per_map, {}


def _chosen(s: SearchSettings, results: dict, drawn: _Drawn, plan: _Plan, per_map: list) -> tuple[int, dict]:
    """The chosen bandwidth's position, and the attributes of the choice: best configuration, alpha path, sizes."""
    grid = s.grid
    best = best_index(results)
    params = dict(results["params"][best])
    b = [spec.text for spec in grid.bandwidths].index(params["bandwidth"])
    warn_at_edges(grid, params, drawn.values, drawn.values[b])  # lengthscales are no axis: not at an edge
    # the alpha path of the chosen (bandwidth, selection, M): mean validation MSE per alpha
    same = [
        i for i, p in enumerate(results["params"])
        if all(p.get(k) == params.get(k) for k in ("bandwidth", "selection", "n_components", "lam", "rho"))
    ]
    return b, dict(
        cv_results_=results, best_index_=best, best_params_=params,
        best_score_=float(results["mean_test_score"][best]),
        n_splits_=len(per_map[b]) if plan.kind == "kfold" else 1, n_candidates_=grid.n_candidates,
        median_bandwidth_=drawn.median, learned_lengthscales_=drawn.lengthscales, random_state_=plan.seed,
        bandwidth_=drawn.values[b].copy() if isinstance(drawn.values[b], np.ndarray) else float(drawn.values[b]),
        alphas_=grid.alphas, validation_errors_=results["mean_validation_mse"][same], alpha_=float(params["alpha"]),
    )


def run_search(
    X: object, T: object, s: SearchSettings, classes: np.ndarray | None = None, sample_weight: object = None
) -> SearchOutcome:
    """Run the pass and the search on checked ``X``, targets ``T`` and ``sample_weight``.

    ``T`` is the target (regression) or the +-1 class columns of ``classes``.
    ``sample_weight`` (checked) weighs every statistic of the pass, so every
    validation MSE, R^2 (with the weighted variance) and accuracy is a
    weighted mean, and the refit's statistics are weighted.
    """
    s, plan = _plan(s, X, T, classes)
    if plan.note is not None:
        warnings.warn(plan.note, UserWarning, stacklevel=5)  # the estimator's caller
    clock = time.perf_counter()
    drawn, passes = _draw(s, X, T, sample_weight, plan.seed)
    if plan.solver == "pcg":
        return _run_pcg(X, T, s, plan, drawn, passes, clock, sample_weight)
    read = _Reader(X, T, s, plan, sample_weight)

    def rng_for() -> np.random.Generator:
        return _split_random_state(plan.seed)[1]

    t_pass = time.perf_counter()
    found, per_map, whitened = _validate_all(read, drawn, s, rng_for)
    t_algebra = t_pass + read.seconds
    t_score = time.perf_counter()
    accuracy = train_accuracy = None
    if s.scoring == "accuracy":
        accuracy, train_accuracy = validation_accuracy(X, T, drawn.kernels, found, s.grid, plan.kind, plan.cv,
                                                       s.cv_seed, sample_weight)
        passes += 1
    t_score = time.perf_counter() - t_score
    train_score = train_accuracy if train_accuracy is not None else found.train_r2
    results = results_table(s.grid, drawn.values, found.mse, found.r2, accuracy, found.train_mse,
                            train_score if s.return_train_score else None, evidence=plan.kind == "evidence")
    b, attrs = _chosen(s, results, drawn, plan, per_map)
    attrs["n_passes_"] = passes + read.passes
    m_position = int(np.flatnonzero(s.grid.n_components == attrs["best_params_"]["n_components"])[0])
    features, kernel, stats = refit_features(
        s, attrs["best_params_"], drawn.values[b], per_map[b],
        drawn.landmarks if s.nystroem else drawn.candidates[b], plan.seed, rng_for, classes,
        whitened.get((b, m_position)),
    )
    del whitened  # the other maps' M x M whitenings and statistics
    # what fold_models and score_configurations build on (not saved with the model)
    attrs.update(features_=features, kernel_=kernel, n_features_in_=kernel.n_features_in,
                 _fold_paths=found.paths if s.keep_models else None, _candidate_kernels=drawn.kernels,
                 _grid_shape=(len(drawn.values), len(s.grid.variants), s.grid.n_components.size, s.grid.alphas.size))
    # wall seconds of the parts, as GridSearchCV's refit_time_: where a search's time goes
    attrs["search_times_"] = {"median": t_pass - clock, "pass": t_algebra - t_pass,
                              "algebra": time.perf_counter() - t_algebra - t_score, "scoring": t_score}
    attrs.update(search_solver_="gram", **({} if plan.estimate is None else {"search_plan_estimate_": plan.estimate}))
    return SearchOutcome(attrs, stats)


def _run_pcg(X: object, T: object, s: SearchSettings, plan: _Plan, drawn: _Drawn, passes: int, clock: float,
             sample_weight: object) -> SearchOutcome:
    """The search by conjugate gradient (:mod:`dxrf.search.pcg_search`): every configuration's passes, no refit."""
    t_pass = time.perf_counter()
    found = pcg_search(X, T, s, plan.cv, drawn.values, drawn.landmarks, plan.seed, sample_weight)
    t_algebra = time.perf_counter()
    results = results_table(s.grid, drawn.values, found.mse, found.r2, None, found.train_mse,
                            found.train_r2 if s.return_train_score else None)
    b, attrs = _chosen(s, results, drawn, plan, [()] * len(drawn.values))
    attrs["n_passes_"] = passes + found.n_passes
    i = int(np.flatnonzero(s.grid.n_components == attrs["best_params_"]["n_components"])[0])
    features, solution = pcg_model(found, b, i, attrs["alpha_"])
    del found  # the other configurations' solutions
    attrs.update(features_=features, kernel_=features.kernel_, n_features_in_=features.kernel_.n_features_in,
                 _fold_paths=None, _candidate_kernels=drawn.kernels,
                 _grid_shape=(len(drawn.values), len(s.grid.variants), s.grid.n_components.size, s.grid.alphas.size))
    # the passes are the conjugate gradient's, and their client algebra is inside them
    attrs["search_times_"] = {"median": t_pass - clock, "pass": t_algebra - t_pass,
                              "algebra": time.perf_counter() - t_algebra, "scoring": 0.0}
    attrs.update(search_solver_="pcg", search_plan_estimate_=plan.estimate)
    return SearchOutcome(attrs, None, solution)

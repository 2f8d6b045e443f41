"""The shared parameter and attribute text of the search estimators' docstrings."""

_SEARCH_PARAMETERS = """
    bandwidths : "auto" or list of float, str or array-like, default="auto"
        ``"auto"``: ``("median*0.25", "median*0.5", "median", "median*2", "median*4")``.
        Kernel bandwidths ``sigma``: numbers, or multiples of the median
        heuristic (``"median"``, ``"median*0.5"``, ``"2*median"``: the median
        pairwise distance of 1000 sampled rows, one extra read of X), or
        vectors of per-column lengthscales (one per column of X, each a
        candidate like a number; ``param_bandwidth`` shows it by a compact
        label). All bandwidths share one draw of frequencies, scaled by
        ``1 / sigma`` (lengthscales: the rows divided by them; with
        ``features="nystroem"``, one set of landmarks).
    n_components : "auto" or list of int, default="auto"
        Numbers of features ``M``; each is a prefix of the selection of the
        largest (nested top-M orders, or the first M of one i.i.d. draw), or
        with ``features="nystroem"`` the first ``M`` landmarks. ``"auto"``:
        grown in stages (``growth_``). The first stage searches every
        bandwidth at ``M = 250, 500, 1000, 2000`` (fewer on few rows or a
        short ``time_budget``) in one read of X; while the largest ``M``
        validates more than 1% better than its half, the next stage reads X
        once at twice the features and the chosen bandwidth, up to
        ``max_components``, half of the rows, the workers' memory and
        ``time_budget``. The model is the best stage's.
    selections : list of str, default=("none",)
        ``"none"`` (the first M of the candidates: plain random features),
        ``"elss-sample"`` and ``"elss-top"`` (ELSS Algorithms 1 and 2, one
        per ``lams`` value), ``"eerf"`` (energy top-M), ``"lkrf"`` and
        ``"lkrf-top"`` (LKRF sampling and top-M, one per ``rhos`` value).
    lams : list of float, default=(1e-3,)
        ELSS leverage penalties (normalised convention).
    rhos : list of float, default=(1.0,)
        LKRF chi-square radii.
    alphas : list of float, default=1e-10 ... 1 (11 powers of 10)
        Ridge penalties; the objective is ``(1/N) |Y - Z theta - beta|^2 + alpha |theta|^2``.
    n_candidates : int, optional
        ``M0``, the candidates drawn per bandwidth. Default: 10 times the
        largest M when a selection other than ``"none"`` is searched, else
        the largest M (``candidate_ratio`` times it, when given).
    candidate_ratio : int, optional
        ``r``: each M chooses its features among the first ``r * M``
        candidates (the ELSS paper's ``M0 = 10 M`` with ``r = 10``), a prefix
        of the ``n_candidates`` drawn (as a map of ``r * M`` features). Each M
        then has a selection of its own instead of a prefix of the largest
        M's selection (and, for ELSS, a spectrum of its own).
    leverage_rows : {"train", "all"}, default="train"
        The rows whose Gram gives the ELSS leverage scores during the
        search: each fold's training rows, or every row (``N0 = N`` of the
        ELSS paper: the validation rows' inputs are used, never their
        targets; one spectrum per bandwidth serves every fold).
    bandwidth_choice : {"joint", "plain", "plain-first"}, default="joint"
        ``"joint"``: every selection at every bandwidth. ``"plain"``: the
        bandwidth is a kernel parameter shared by all selections (as in the
        ELSS paper): the plain features (``"none"``, required) are validated
        at every bandwidth, and the other selections only at the bandwidth
        whose largest M has the lowest validation MSE; their rows at the other
        bandwidths are NaN (never chosen), and their algebra is saved.
        ``"plain-first"``: the same choice from two reads of X instead of
        one: the first accumulates only the plain features (the first
        ``max(M)`` candidates) at every bandwidth, the second all ``M0``
        candidates at the chosen bandwidth. The pass's ``N M0^2`` Gram is then
        formed once rather than once per bandwidth, for ``B`` bandwidths
        ``B N max(M)^2 + N M0^2`` multiply-adds against ``B N M0^2``: worth a
        second read whenever ``M0`` is several times ``max(M)`` (the ELSS
        paper's ``M0 = 10 M``). The validation errors equal ``"plain"``'s up
        to the rounding of the statistics.
    features : {"auto", "fourier", "nystroem"}, default="auto"
        The feature family. ``"auto"``: ``"nystroem"`` when ``n_components="auto"``
        and only the plain features are searched (``selections=["none"]``, no ``n_candidates``
        or ``candidate_ratio``) with a kernel that has landmarks, else
        ``"fourier"``. ``"fourier"``: random Fourier candidates, as
        above. ``"nystroem"``: Nyström features ``k(x, L_M) K^{-1/2}``
        (:class:`NystroemFeatures`) whose ``max(M)`` landmarks are drawn once,
        uniformly, by one race pass over X, and ordered by their keys so the
        first ``M`` are a uniform sample of ``M`` rows for every ``M`` (the
        rows ``NystroemFeatures(M, random_state=random_state)`` draws). The
        landmarks do not depend on the bandwidth: one statistics pass
        accumulates the unwhitened kernel values ``k(X, L)`` of every
        bandwidth, and each (bandwidth, M) whitens the sub-block of its first
        ``M`` landmarks (one eigendecomposition of ``K_{L_M L_M}`` shared by
        the folds): exactly the statistics of :class:`NystroemFeatures` on
        those landmarks. Only ``selections=["none"]``, and ``n_candidates``
        and ``candidate_ratio`` None; ``sampling`` is not used. Prefer
        ``dtype="float64"`` (see :class:`NystroemFeatures`).
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
    sampling : {"iid", "orthogonal", "qmc", "structured"}, default="iid"
    dtype : {"auto", "float32", "float64"}, default="auto"
        Feature arithmetic in the pass (sums are float64 either way).
        ``"auto"``: float64 for Nyström features, float32 for Fourier features.
    cv : "auto", int, float, bool array, iterable of (train, test) pairs or CV splitter, default="auto"
        ``"auto"``: 5 folds, or a 20% hold-out when ``n_components="auto"``
        and X has 10 000 rows or more.
        ``k >= 2``: k folds by a hash of the row index (fold ``j``'s
        statistics are summed apart in the one pass, and its training
        statistics are the total minus fold ``j``); a fraction in (0, 1): a
        hashed hold-out; a boolean mask: True marks validation rows. As in
        scikit-learn, also (train, test) index pairs (e.g.
        ``list(GroupKFold(k).split(X, y, groups))``) or an object with
        ``split`` (``KFold(k)``, ``StratifiedKFold(k)``), called as
        ``cv.split(X, y)`` (``y`` the class labels for a classifier); for
        dask X it gets only the number of rows, so give a splitter needing
        no more, or the list of splits. Split ``j`` is fold ``j`` of the same
        one pass (its rows' labels travel with X like a mask), so the test
        sets must partition the rows and each train set must be the
        complement of its test set (KFold, GroupKFold, LeaveOneGroupOut,
        StratifiedKFold; not ShuffleSplit or TimeSeriesSplit); at least 2.
        ``"evidence"``: no validation rows; every row trains, and each
        configuration's score is the log marginal likelihood (evidence) of
        the Bayesian linear model on its features, from the statistics
        (summed over outputs; the noise at its maximiser; DESIGN, "Evidence
        and predictive uncertainty"). ``cv_results_`` then holds it as
        ``mean_test_score`` and ``mean_test_evidence`` (the validation MSE is
        NaN); only ``bandwidth_choice="joint"`` and ``scoring="r2"``.
    cv_seed : int, default=0
        Seed of the hashed folds or hold-out.
    fit_intercept : bool, default=True
    return_train_score : bool, default=False
        Also score every configuration on each fold's training rows:
        ``mean_train_score``, ``std_train_score``, ``splitJ_train_score``
        (R^2 from the statistics, or the classifier's accuracy from its
        scoring pass), ``mean_train_mse`` and ``splitJ_train_mse``.
    keep_models : bool, default=False
        Keep every configuration's model fitted on each fold's training rows
        (:meth:`fold_models`, :meth:`score_configurations`); memory of about
        ``configurations x M x 8`` bytes per fold. Nyström models are kept
        on the landmarks' kernel values: ``z(x) theta = k(x, L_M) (T_M theta)``.
    max_components : int, default=8000
        With ``n_components="auto"``: no stage searches more features.
    time_budget : float or None, default=300.0
        With ``n_components="auto"``: seconds; no stage starts that is
        predicted (from the last stage's measured pass and algebra, scaled
        by ``M^2`` and ``M^3``, or by the plans' arithmetic when a stage
        changes plan) to end later. None: no limit.
    nystroem_solver : {"auto", "gram", "pcg"}, default="auto"
        How a Nyström search solves its configurations. ``"gram"``: the
        ``M x M`` statistics of one pass (``N M^2``). ``"pcg"``: each
        (bandwidth, M) by Falkon's preconditioned conjugate gradient, all
        penalties and the hold-out in the same passes, no ``M x M``
        statistics on the workers, the chosen model from its solve on all
        rows (:mod:`dxrf.search.pcg_search`); it needs ``cv`` a hold-out
        fraction or mask, ``scoring="r2"`` and ``keep_models=False``.
        ``"auto"``: the conjugate gradient where it can run and either its
        estimated arithmetic is lower or the Gram's statistics would not fit
        the workers (said in a warning); a growing search decides per stage.
        ``search_solver_`` and ``search_plan_estimate_`` report the choice.
    random_state : int, RandomState, Generator or None
        Seeds the candidates and the selections. The candidates of bandwidth
        ``s`` are those of ``RandomFourierFeatures(M0, bandwidth=s,
        random_state=random_state)``, and a selection is the one its selector
        (e.g. ``LeverageScoreSampler(..., random_state=random_state)``) makes;
        Nyström landmarks are those of ``NystroemFeatures(M, random_state=random_state)``.
"""

_SEARCH_ATTRIBUTES = """
    best_params_ : dict
        The chosen ``bandwidth`` (as given), ``selection``, ``n_components``,
        ``alpha``, and ``lam`` or ``rho`` where the selection has one.
    best_score_ : float
        Its mean validation score over folds.
    best_index_ : int
        Its row in ``cv_results_``.
    cv_results_ : dict of arrays
        One entry per configuration (bandwidth, selection variant, M, alpha,
        in that nesting order): ``params``, ``param_*``, ``bandwidth_value``,
        ``mean_test_score``, ``std_test_score``, ``rank_test_score``,
        ``splitJ_test_score``, ``mean_validation_mse`` and ``splitJ_validation_mse``.
    n_passes_ : int
        Reads of X: 1 for the search (2 with ``bandwidth_choice="plain-first"``
        and more than one bandwidth; 2 with ``features="nystroem"``: the
        landmarks' race, then the statistics), plus 1 for a median
        bandwidth's sample (for the classifier, plus 1 with
        ``scoring="accuracy"`` and the logistic refit's passes).
    bandwidth_ : float or ndarray of shape (n_features,)
        The chosen bandwidth's value (the lengthscales, for a vector); ``median_bandwidth_`` the median
        heuristic (None when not used).
    alpha_ : float
    alphas_, validation_errors_ : ndarray
        The alpha grid and the mean validation MSE along it for the chosen
        bandwidth, selection and M.
    n_splits_, n_candidates_, random_state_ : int
        Folds (1 for a hold-out), M0 (the landmarks drawn, with
        ``features="nystroem"``) and the seed actually used.
    search_times_ : dict
        Wall seconds of the search's parts: ``"median"`` (the bandwidth
        sample and the candidates, or the landmarks' race), ``"pass"`` (the search's reads of X),
        ``"algebra"`` (every configuration's validation and the refit's
        selection, on the client) and ``"scoring"`` (the classifier's
        accuracy pass, else 0); summed over the stages of a growing search.
    growth_ : dict
        With ``n_components="auto"``: ``"stages"`` (per stage its
        ``n_components``, best ``validation_loss`` per M (``1 - score``),
        ``bandwidths`` searched, ``seconds`` and ``solver``), ``"chosen_stage"`` and
        ``"stop_reason"``. ``cv_results_`` is the chosen stage's.
    n_components_searched_ : ndarray of int
        With ``n_components="auto"``: every M a stage searched.
    search_solver_ : {"gram", "pcg"}
        The plan that solved the chosen configuration (a growing search's
        stages also give theirs, as ``growth_["stages"][j]["solver"]``);
        ``search_plan_estimate_`` its arithmetic against the other plan's
        (a dict; absent for a grid only the Gram plan can solve). Models
        saved before the search could take the conjugate gradient have neither.
    features_ : fitted selector, or the candidate map (for ``"none"``, and with ``candidate_ratio``)
        With ``features="nystroem"``: a fitted :class:`NystroemFeatures` with
        the chosen ``M`` landmarks (ordered by row index, as its own ``fit``
        would) and bandwidth, whose ``kernel_`` is the model's.
    kernel_ : FeatureKernel
        The chosen features, refitted on all rows.
    coef_, intercept_, train_mse_, n_features_in_
        As in the estimator refitted; ``train_mse_`` is on all rows.
"""

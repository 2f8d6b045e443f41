"""The shared parts of the SGD estimators' docstrings (parameters, attributes, references)."""

_REFERENCES = """
    References
    ----------
    .. [1] L. Carratino, A. Rudi and L. Rosasco, "Learning with SGD and random
       features", NeurIPS 2018.
    .. [2] A. Rahimi and B. Recht, "Random features for large-scale kernel
       machines", NeurIPS 2007.
    .. [3] M. Zinkevich, M. Weimer, A. Smola and L. Li, "Parallelized
       stochastic gradient descent", NeurIPS 2010 (the averaging mode).
"""

_COMMON_PARAMS = """
    features : feature map or selector, default=None
        The random features: a dxrf map (``RandomFourierFeatures(...)``,
        drawn once, no pass over the data unless its bandwidth is
        ``"median"``) or a selector (ELSS, EERF, LKRF). A selector needs its
        candidates' ``M0 x M0`` Gram, accumulated in one pass: it is allowed
        for at most ``MAX_SELECTOR_CANDIDATES`` (16384) candidates; for larger
        ``M`` give a map. ``None`` is ``RandomFourierFeatures(100, bandwidth="median")``.
        A map without a ``random_state`` is seeded from ``random_state``.
    step_size : float or "auto", default="auto"
        The constant step ``gamma``. ``"auto"`` is ``1 / L`` with
        ``L = max_x |z(x)|^2 + fit_intercept`` (the smoothness of the squared
        loss): exact from the kernel for Fourier features (``|z|^2 <=
        sum_j scale_j^2``), else from a sample of 1000 rows (counted as a
        pass). The chosen value is ``step_size_``.
    batch_size : int, default=32
        Mini-batch size ``b``. Mini-batches never span two row chunks: the
        last one of a chunk may be smaller (its gradient is still a mean).
    max_passes : int, default=10
        ``T``, the most passes (epochs) over the training rows.
    validation : float, bool array or None, default=0.2
        Rows held out of every update and used to measure the validation
        loss after each pass: a fraction (rows chosen by a hash of their
        index, independent of chunking; the same rows as the ridge learners'
        split) or a boolean mask (NumPy or dask), True for validation.
    early_stopping : bool, default=True
        Stop when the validation loss has not improved by a relative ``tol``
        for ``patience`` evaluations, and return the iterate with the lowest
        validation loss. Needs ``validation``.
    patience : int, default=3
    tol : float, default=1e-4
        Relative improvement of the validation loss that resets ``patience``.
    mode : {"sequential", "averaging"}, default="sequential"
        ``"sequential"``: the exact serial algorithm; on dask input one task
        per chunk, in a shuffled order, each taking the state from the
        previous one. ``"averaging"``: every chunk runs SGD in parallel from
        the same start and the results are averaged (weighted by training
        rows) after each pass. NumPy input is one chunk, where both agree.
    fit_intercept : bool, default=True
        Learn an unpenalised bias ``beta``: a coordinate updated by the same
        SGD as ``v`` (the gradient of a constant feature 1). For the squared
        loss it starts at the mean training target (a read of ``y`` only), so
        no centring pass over ``X`` is needed.
    shuffle : bool, default=True
        Shuffle the chunk order and the rows inside each chunk in every pass
        (seeded by ``random_state``, keyed by pass and chunk, so results do
        not depend on where or in which order tasks run).
    random_state : int, RandomState, Generator or None
        Seeds the shuffles and, when it has none, the feature map.
    cache_features : {"auto", True, False}, default="auto"
        Keep every row's features between the passes of ``fit``
        (:mod:`dxrf.engine.cache`: on the worker of its chunk for dask input,
        freed when ``fit`` ends), so only the first pass computes them.
        ``"auto"`` keeps them when ``N M itemsize`` bytes fit within the
        option ``cache_fraction`` (1/3) of the workers' memory limits (of this
        machine's memory for NumPy input), and only float32 features. The
        model is bitwise the same either way: features are computed row by
        row (:meth:`~dxrf.kernels.kernel.FeatureKernel.rowwise`), whatever
        rows share a tile. Float64 features cached with ``True`` give a model
        equal to rounding (a float64 product may round a row by its place in
        BLAS's blocking). ``partial_fit`` makes one pass and keeps nothing.
"""

_COMMON_ATTRS = """
    coef_ : ndarray of shape (M, k)
        ``v``, the returned iterate (float64).
    intercept_ : ndarray of shape (k,)
    features_ : feature map or selector
        The fitted features.
    kernel_ : FeatureKernel
    step_size_ : float
        The step used.
    n_epochs_ : int
        Passes of SGD run.
    n_iter_ : int
        Mini-batch updates run in total (over all chunks, in averaging mode).
    best_epoch_ : int
        Passes of SGD behind the returned iterate (the best on validation
        with early stopping, else ``n_epochs_``).
    validation_errors_ : ndarray of shape (n_evaluations,)
        Validation loss (mean over rows and outputs: squared error for the
        squared loss, else the loss) of the iterate after ``p`` passes at
        index ``p``; index 0 is the starting model. Empty without validation.
    train_errors_ : ndarray of shape (n_epochs_,)
        Progressive training loss of each pass: the mean loss of each
        mini-batch *before* its update (free to compute; an online estimate,
        not the loss of one fixed iterate).
    n_passes_ : int
        Reads of X in all: drawing a ``"median"`` bandwidth, a selector's
        candidate pass, an ``"auto"`` step sampled from rows, one per SGD
        pass, and one last read for the validation loss of the final iterate
        (skipped when early stopping stopped the run).
    feature_cache_ : {"cached", "recomputed"}
        Whether ``fit``'s passes kept the features (see ``cache_features``);
        ``feature_cache_bytes_`` is their size ``N M itemsize``.
    n_features_in_ : int
"""

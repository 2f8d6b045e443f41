"""Data-dependent random feature selectors as scikit-learn transformers.

Each selector draws ``M0`` candidate features from a base feature map, makes
ONE pass over the data to accumulate the candidates' statistics
(:func:`dxrf.accumulate`: Gram, and the cross statistic with targets), and
selects ``M`` of them by dense algebra on those statistics
(:func:`dxrf.selection.select_features`). The fitted selector is a feature
map: ``transform`` evaluates the selected, rescaled candidates lazily on dask
input. Its ``candidate_stats_`` and ``stats_`` let learners fit on the
candidates or on the selection without another pass.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from dxrf.core.labels import class_labels, encode_classes
from dxrf.core.memory import check_statistics, checked_pass
from dxrf.core.persistable import COMMON, fitted
from dxrf.core.validation import check_choice, check_positive_float, check_positive_int, is_dask, is_integer, make_rng
from dxrf.core.weights import check_sample_weight
from dxrf.features.kernel import FeatureKernel
from dxrf.features.maps import KernelTransformer, RandomFourierFeatures, fit_map
from dxrf.stats.feature_stats import FeatureStats, accumulate
from dxrf.selection.leverage import (
    LAM_CONVENTIONS,
    LeverageDiagnostics,
    _check_lam,
    _normalize_lams,
    leverage_diagnostics,
    leverage_scores,
)
from dxrf.selection.select import METHODS, Selection, alignment_scores, draw_features, energy_scores, select_features

__all__ = ["LeverageScoreSampler", "EnergyScoreSelector", "KernelAlignmentSelector", "TASKS"]

TASKS = ("auto", "regression", "classification")

# entropy mixed with an int random_state for the selector's own draws, so that
# they are independent of the candidate draw seeded by the same int
_DRAW_SALT = 0x64787266
# and for the seed of the hashed row sample (ELSS's N0 rows)
_ROWS_SALT = 0x726F7773


def _split_random_state(random_state: object) -> tuple[object, np.random.Generator]:
    """(seed for the base map or None, generator for the selection draws)."""
    if random_state is None:
        return None, np.random.default_rng()
    if is_integer(random_state):
        return int(random_state), np.random.default_rng([int(random_state), _DRAW_SALT])
    rng = make_rng(random_state)
    return rng, rng


#: the fitted attributes of every selector, and of the supervised ones
_SELECTOR_FITTED = fitted(
    COMMON,
    n_passes_="int",
    candidates_="estimator",
    candidate_stats_="stats?",
    selected_="index",
    scales_="finite",
    weights_="finite",
    kernel_="kernel",
    stats_="stats",
)
_SUPERVISED_FITTED = fitted(_SELECTOR_FITTED, task_="str", classes_="labels-or-none", scores_="numbers")


class _BaseSelector(KernelTransformer):
    """Shared machinery: candidates, the one pass, the selected kernel."""

    _supervised = False
    # the candidates' M0 x M0 statistics can be large and are not needed to transform
    _persist_exclude = ("candidate_stats_",)

    def __init__(
        self, n_components: int = 100, *, n_candidates: int | None = None, base: object = None, random_state: object = None
    ) -> None:
        self.n_components = n_components
        self.n_candidates = n_candidates
        self.base = base
        self.random_state = random_state

    # -- parameters -------------------------------------------------------------
    def _resolve_sizes(self, method: str) -> tuple[int, int]:
        m = check_positive_int(self.n_components, "n_components")
        m0 = check_positive_int(self.n_candidates, "n_candidates", allow_none=True)
        m0 = 10 * m if m0 is None else m0
        if method == "top" and m > m0:
            raise ValueError(
                f"n_components={m} exceeds n_candidates={m0}: method='top' keeps distinct candidates, "
                "so n_components must be <= n_candidates"
            )
        return m, m0

    def _check_method(self) -> None:
        check_choice(self.method, "method", METHODS)

    # -- the pass ---------------------------------------------------------------
    def _make_base(
        self, X: np.ndarray | da.Array, m0: int, base_seed: object, sample_weight: np.ndarray | da.Array | None = None
    ) -> object:
        """Clone the base map with ``n_components=m0``, seed it, fit it on X (weighted rows for a median bandwidth)."""
        base = RandomFourierFeatures() if self.base is None else self.base
        if not hasattr(base, "fit") or "n_components" not in base.get_params(deep=False):
            raise TypeError(f"base must be a dxrf feature map such as RandomFourierFeatures(), got {base!r}")
        base = clone(base)
        base.set_params(n_components=m0)
        params = base.get_params(deep=False)
        if base_seed is not None and "random_state" in params and params["random_state"] is None:
            base.set_params(random_state=base_seed)
        fit_map(base, X, sample_weight)
        if not isinstance(getattr(base, "kernel_", None), FeatureKernel):
            raise TypeError(f"base must be a dxrf feature map with a fitted kernel_, got {type(base).__name__}")
        # a bandwidth estimated from a row sample reads X once more (random
        # rows touch most chunks), so it is counted as a pass
        self.n_passes_ = int(isinstance(getattr(base, "bandwidth", None), str))
        return base

    def _fit_candidates(
        self, X: np.ndarray | da.Array, Y: object, m0: int, base_seed: object, sample: tuple[float, int] | None = None,
        sample_weight: object = None,
    ) -> tuple[object, FeatureStats]:
        """Fit the base map on all of X; accumulate over all rows or a hashed ``sample`` ``(fraction, seed)``.

        ``sample_weight`` (checked here) weighs the statistics and a median
        bandwidth's rows.
        """
        w = check_sample_weight(sample_weight, int(X.shape[0]))
        self._check_memory(X, m0)
        base = self._make_base(X, m0, base_seed, w)
        self.n_passes_ += 1
        rows = {} if sample is None else {"subsample": sample[0], "subsample_seed": sample[1]}
        with checked_pass():  # refused above, before the candidates were drawn
            return base, accumulate(X, Y, features=base.kernel_, sample_weight=w, **rows)

    def row_sample(self, n: int) -> tuple[float, int] | None:
        """The hashed row subsample the candidates' statistics are accumulated over, or None (all rows).

        Learners call this before their first pass: with a subsample they make
        two passes (the candidates over the sample, then the selection over
        all rows) instead of one. Only :class:`LeverageScoreSampler` with
        ``n_samples`` subsamples.
        """
        return None

    # -- selection from statistics made elsewhere ---------------------------------
    def _check_memory(self, X: object, m0: int, groups: int = 1) -> None:
        """Refuse, before drawing them, candidates whose statistics cannot fit in memory."""
        check_statistics(
            m0, "n_candidates",
            "use fewer candidates (n_candidates, default 10 x n_components), or more memory",
            groups=groups, X=X,
        )

    def make_candidates(self, X: np.ndarray | da.Array, *, groups: int = 1, sample_weight: object = None) -> object:
        """The fitted candidate map ``fit`` would draw, without any pass.

        With :meth:`fit_from_stats` this lets a learner accumulate the
        candidates' statistics itself (e.g. with its own targets and a
        validation split) in the one pass it makes anyway: selection plus
        solve stays one pass.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            Only its shape is used, and a row sample for ``bandwidth="median"``.
        groups : int, default 1
            Groups of rows whose statistics the caller accumulates apart
            (2 with a validation split): the candidates are refused when
            their statistics cannot fit in memory.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights of a ``"median"`` bandwidth (the caller weighs the statistics).

        Returns
        -------
        feature map
            The base map with ``n_candidates`` components, fitted.
        """
        self._check_selection_params()
        method = getattr(self, "method", "top")
        _, m0 = self._resolve_sizes(method)
        X = self._validate_X(X, reset=True)
        self._check_memory(X, m0, groups)
        base_seed, _ = _split_random_state(self.random_state)
        return self._make_base(X, m0, base_seed, check_sample_weight(sample_weight, int(X.shape[0])))

    def fit_from_stats(
        self, candidates: object, stats: FeatureStats, *, task: str | None = None, classes: np.ndarray | None = None
    ) -> _BaseSelector:
        """Select from statistics of ``candidates`` accumulated elsewhere: no pass.

        Parameters
        ----------
        candidates : fitted feature map
            Usually from :meth:`make_candidates`.
        stats : FeatureStats
            The candidates' statistics. Supervised selectors need targets in
            it: +-1 class columns for classification, the raw response for
            regression (standardised exactly from the statistics).
        task : {"regression", "classification"}, optional
            Supervised selectors only; default regression.
        classes : array, optional
            The class labels, stored as ``classes_``.

        Returns
        -------
        self
        """
        kernel = getattr(candidates, "kernel_", None)
        if not isinstance(kernel, FeatureKernel):
            raise TypeError("candidates must be a fitted dxrf feature map")
        if not isinstance(stats, FeatureStats) or stats.n_components != kernel.n_components:
            raise ValueError(
                f"stats must be the FeatureStats of the {kernel.n_components} candidates, "
                f"got {getattr(stats, 'n_components', None)} features"
            )
        self._check_selection_params()
        method = getattr(self, "method", "top")
        m, _ = self._resolve_sizes(method)
        if method == "top" and m > stats.n_components:
            raise ValueError(f"n_components={m} exceeds the {stats.n_components} candidates")
        _, rng = _split_random_state(self.random_state)
        self.n_features_in_ = kernel.n_features_in
        if self._supervised:
            if stats.cross is None:
                raise ValueError(f"{type(self).__name__} needs statistics accumulated with targets (y)")
            task = "regression" if task is None else task
            if task not in ("regression", "classification"):
                raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
            self.task_ = task
            self.classes_ = classes
        self.n_passes_ = 0
        self._select(candidates, stats, rng, m)
        return self

    def _check_selection_params(self) -> None:
        """Validate the selection parameters (those not checked by _resolve_sizes)."""

    def _check_params(self) -> None:
        """Validate all parameters without data (also run on a loaded selector)."""
        self._check_selection_params()
        if hasattr(self, "method"):
            self._check_method()
        self._resolve_sizes(getattr(self, "method", "sample"))

    def _set_selection(self, base: object, stats: FeatureStats, selection: Selection) -> None:
        self.candidates_ = base
        self.candidate_stats_ = stats
        self.selected_ = selection.selected
        self.scales_ = selection.scales
        self.weights_ = selection.weights
        self.kernel_ = base.kernel_.subset(selection.selected, selection.scales)
        self.stats_ = stats.subset(selection.selected, selection.scales)
        self._n_features_out = int(selection.selected.size)

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        if self._supervised:
            tags.target_tags.required = True
        return tags


class LeverageScoreSampler(_BaseSelector):
    """Random features sampled by empirical ridge leverage scores (ELSS).

    ``M0`` candidates ``w~_i`` are drawn from ``base``; one pass accumulates
    their normalised Gram ``G = (1/N) sum_n z~(x_n) z~(x_n)^T`` (trace about 1);
    the leverage weights are ``q^_i = Q_ii / tr Q`` with ``Q = G (G + lam I)^{-1}``.

    - ``method="sample"`` (Algorithm 1): ``M`` indices ``m_j`` i.i.d. from
      ``q^``, ``z_j(x) = phi(x, w~_{m_j}) / sqrt(M M0 q^_{m_j})``, an unbiased
      estimate of the candidate kernel ``z~(x)^T z~(x')``.
    - ``method="top"`` (Algorithm 2): the ``M`` largest ``q^_i``,
      ``z_j(x) = phi(x, w~_{i_j}) / sqrt(M)``.

    Here ``phi`` is the candidate feature without the ``M0^{-1/2}`` factor
    (``sqrt(2) cos(w^T x + b)`` for Fourier features). As ``lam -> 0`` with a
    full-rank ``G`` the weights become uniform (plain random features).

    Parameters
    ----------
    n_components : int, default=100
        ``M``, the number of selected features.
    n_candidates : int, optional
        ``M0``, the number of candidates; default ``10 * n_components``.
    lam : float, default=1e-3
        Ridge penalty of the leverage scores, on the scale of ``G``.
    method : {"sample", "top"}, default="sample"
    lam_convention : {"normalized", "unnormalized"}, default="normalized"
        ``"unnormalized"`` reads ``lam`` as the penalty ``mu`` added to the
        unnormalised Gram ``N G = sum_n z~ z~^T``: the ``n lam`` of the
        leverage-weighted RFF of Li, Ton, Oglic & Sejdinovic, whose weights are
        ``[Z^T Z ((1/M0) Z^T Z + n lam I)^{-1}]_ii`` for the ``N x M0`` matrix
        ``Z`` of unnormalised features ``phi``. Then ``lam_ = mu / N`` (``N``
        the rows of the Gram, i.e. ``n_samples`` when given), and their
        ``lam`` is the same number as ``lam_``. Both spellings give identical
        weights.
    n_samples : int, optional
        ``N0``: accumulate the Gram over a random subset of about ``N0`` rows
        (Algorithm 1's input) instead of all ``N``; at most ``N``. Each row is
        kept when a hash of its index falls below ``N0 / N`` (independent of
        chunking, see :meth:`row_sample`); the other rows are read but their
        features are never computed. Inside a learner this makes the fit two
        passes: the ``M0`` candidates over the sample (``N0 M0^2`` flops),
        then only the ``M`` selected features over all rows (``N M^2``),
        against one pass of ``N M0^2`` without it. Two passes win when
        ``N0 M0^2 + N M^2`` plus the cost of one more read of X is well below
        ``N M0^2``: with ``M0 = 10 M`` and ``N0 <= N / 2`` the flops drop
        about twofold or more, and the second read matters only when reading
        X (from disk or object storage) costs more than its features.
    base : feature map, optional
        The candidate map, cloned with ``n_components=n_candidates``; default
        ``RandomFourierFeatures()`` (gaussian kernel, bandwidth 1).
    random_state : int, RandomState, Generator or None
        Seeds the candidates (passed to ``base`` when ``base`` has no
        ``random_state`` of its own; an int gives the same candidates as
        ``RandomFourierFeatures(n_candidates, random_state=...)``), the row
        subsample and the draws of ``"sample"``.

    Attributes
    ----------
    candidates_ : feature map
        The fitted base map with ``M0`` components (its ``kernel_`` is the
        candidate kernel).
    candidate_stats_ : FeatureStats
        One-pass statistics of the candidates (with targets when ``fit`` got
        ``y``), reusable by learners: selection plus a ridge fit is one pass.
    weights_ : ndarray of shape (M0,)
        ``q^``.
    dof_ : float
        ``d_lam = tr Q``.
    lam_ : float
        The penalty on the normalised scale.
    selected_ : ndarray of int, shape (M,)
        Candidate indices, repeated for ``"sample"`` (in draw order), in
        decreasing weight for ``"top"``.
    scales_ : ndarray of shape (M,)
        Factor of each selected candidate column ``z~``:
        ``1 / sqrt(M q^_i)`` for ``"sample"``, ``sqrt(M0 / M)`` for ``"top"``.
    kernel_ : FeatureKernel
        ``candidates_.kernel_.subset(selected_, scales_)``.
    stats_ : FeatureStats
        ``candidate_stats_.subset(selected_, scales_)``: the statistics of the
        selected features, exact, without another pass.
    n_samples_ : int
        Rows the candidates' statistics were accumulated over (about
        ``n_samples``, exactly ``N`` without it); with ``sample_weight``
        their total weight, rounded down (``lam_convention="unnormalized"``
        divides by the total weight itself).
    n_passes_ : int
        Reads of ``X`` made by ``fit``: 1 (the statistics pass), plus 1 when the
        base map estimated ``bandwidth="median"`` from a random row sample
        (a small computation, but its random rows touch most chunks).
    n_features_in_ : int

    See Also
    --------
    dxrf.selection.leverage_scores, dxrf.selection.select_features

    References
    ----------
    .. [1] S. Shahrampour and S. Kolouri, "On sampling random features from
       empirical leverage scores: implementation and theoretical guarantees",
       arXiv:1903.08329, 2019.
    .. [2] Z. Li, J.-F. Ton, D. Oglic and D. Sejdinovic, "Towards a unified
       analysis of random Fourier features", ICML 2019.
    .. [3] F. Bach, "On the equivalence between kernel quadrature rules and
       random feature expansions", JMLR 18(21), 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from dxrf.selection import LeverageScoreSampler
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> sel = LeverageScoreSampler(20, lam=1e-3, random_state=0).fit(X)
    >>> sel.transform(X).shape, sel.weights_.shape
    ((200, 20), (200,))
    """

    _fitted_schema = fitted(_SELECTOR_FITTED, lam_="real", dof_="real", n_samples_="int")

    def __init__(
        self,
        n_components: int = 100,
        *,
        n_candidates: int | None = None,
        lam: float = 1e-3,
        method: str = "sample",
        lam_convention: str = "normalized",
        n_samples: int | None = None,
        base: object = None,
        random_state: object = None,
    ) -> None:
        super().__init__(n_components, n_candidates=n_candidates, base=base, random_state=random_state)
        self.lam = lam
        self.method = method
        self.lam_convention = lam_convention
        self.n_samples = n_samples

    def fit(self, X: np.ndarray | da.Array, y: object = None, sample_weight: object = None) -> LeverageScoreSampler:
        """Draw candidates, accumulate their Gram in one pass, select by leverage.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,) or (n_samples, k), optional
            Not used by the selection; when given it is accumulated into
            ``candidate_stats_`` (in the same pass) for later learners.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights: the Gram is ``sum_n w_n z z^T / sum_n w_n``.

        Returns
        -------
        self
        """
        self._check_selection_params()
        m, m0 = self._resolve_sizes(self.method)
        X = self._validate_X(X, reset=True)
        n = int(X.shape[0])
        n0 = self.n_samples
        if n0 is not None and n0 > n:
            raise ValueError(f"n_samples={n0} exceeds the number of rows of X (N={n})")
        base_seed, rng = _split_random_state(self.random_state)
        # the base map (and a median bandwidth) is fitted on all of X, the
        # statistics over the hashed row sample: the same rows a learner's
        # first pass uses, so both select the same features
        base, stats = self._fit_candidates(X, y, m0, base_seed, self.row_sample(n), sample_weight)
        self._select(base, stats, rng, m)
        return self

    def row_sample(self, n: int) -> tuple[float, int] | None:
        """``(N0 / N, seed)`` of the hashed row sample for ``n_samples=N0 < N``, else None.

        Each row is kept when a hash of ``(row index, seed)`` falls below
        ``N0 / N`` (:func:`dxrf.engine.hashed_split`): about ``N0`` rows,
        independent of chunking. The seed comes from ``random_state`` (an int
        gives the same rows every time) and is independent of the candidates
        and of the draws.
        """
        n0 = check_positive_int(self.n_samples, "n_samples", allow_none=True)
        if n0 is None or n0 >= n:
            return None
        rs = self.random_state
        if rs is None:
            seed = int(np.random.default_rng().integers(2**63))
        elif is_integer(rs):
            seed = int(np.random.default_rng([int(rs), _ROWS_SALT]).integers(2**63))
        else:
            seed = int(np.random.default_rng(make_rng(rs).integers(2**63)).integers(2**63))
        return n0 / n, seed

    def _check_selection_params(self) -> None:
        self._check_method()
        check_choice(self.lam_convention, "lam_convention", LAM_CONVENTIONS)
        if np.ndim(self.lam) != 0:
            raise ValueError(f"lam must be a single positive number, got {self.lam!r}")
        _check_lam(self.lam)
        check_positive_int(self.n_samples, "n_samples", allow_none=True)

    def _select(self, base: object, stats: FeatureStats, rng: np.random.Generator, m: int) -> None:
        lams, _ = _check_lam(self.lam)
        self.lam_ = float(_normalize_lams(lams, self.lam_convention, None, stats.n)[0])
        # one lam: the Cholesky path of leverage_scores, not select_features' eigendecomposition
        weights, self.dof_ = leverage_scores(stats, self.lam_)
        selected, scales = draw_features(weights, m, self.method, rng)
        selection = Selection(selected, scales, weights)
        self.n_samples_ = int(stats.n)
        self._set_selection(base, stats, selection)

    def diagnostics(self, lams: np.ndarray | float | None = None, *, bins: int = 50, delta: float = 0.1) -> LeverageDiagnostics:
        """Leverage diagnostics of the fitted candidates over a grid of ``lam``.

        Parameters
        ----------
        lams : float or 1-d array, optional
            Penalties in this estimator's ``lam_convention``; default a
            log-spaced grid of 25 values from ``1e-6`` to ``1`` on the
            normalised scale.
        bins : int, default=50
        delta : float, default=0.1

        Returns
        -------
        LeverageDiagnostics
        """
        check_is_fitted(self, "candidate_stats_")
        if lams is None:
            return leverage_diagnostics(self.candidate_stats_, np.logspace(-6, 0, 25), bins=bins, delta=delta)
        return leverage_diagnostics(
            self.candidate_stats_, lams, bins=bins, delta=delta, lam_convention=self.lam_convention
        )


def _prepare_targets(y: object, task: str) -> tuple[object, np.ndarray | None, str]:
    """Targets for the pass: (Y, classes or None, resolved task).

    Classification labels become +-1: one column (+1 for ``classes[1]``) for
    two classes, one-hot +-1 columns for more. Regression targets are passed
    as float and standardised later, exactly, from the statistics.
    """
    check_choice(task, "task", TASKS)
    if not is_dask(y):
        y = np.asarray(y)
    if y.ndim not in (1, 2) or y.shape[0] == 0:
        raise ValueError(f"y must be 1- or 2-dimensional with at least one row, got shape {y.shape}")
    if task == "auto":
        task = "regression" if np.issubdtype(y.dtype, np.floating) else "classification"
    if task == "regression":
        if not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
            raise ValueError(f"y must be numeric for task='regression', got dtype {y.dtype}")
        return y.astype(np.float64), None, task
    if y.ndim == 2:
        if y.shape[1] != 1:
            raise ValueError(f"y must be 1-d class labels for task='classification', got shape {y.shape}")
        y = y[:, 0]
    classes = class_labels(y, "this selector")
    Y = encode_classes(y, classes)
    return (Y[:, 0] if classes.size == 2 else Y), classes, task


class _SupervisedSelector(_BaseSelector):
    _supervised = True

    def __init__(
        self,
        n_components: int = 100,
        *,
        n_candidates: int | None = None,
        task: str = "auto",
        base: object = None,
        random_state: object = None,
    ) -> None:
        super().__init__(n_components, n_candidates=n_candidates, base=base, random_state=random_state)
        self.task = task

    def fit(self, X: np.ndarray | da.Array, y: object = None, sample_weight: object = None) -> _SupervisedSelector:
        """Draw candidates, accumulate the cross statistic in one pass, select ``M`` of them.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,) or (n_samples, k)
            Required. Class labels are read once to find the classes.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights of the cross statistic (and of the standardisation of
            a regression target): weighted sums divided by the total weight.

        Returns
        -------
        self
        """
        self._check_selection_params()
        base, stats, rng, m = self._fit_supervised(X, y, getattr(self, "method", "top"), sample_weight)
        self._select(base, stats, rng, m)
        return self

    def _fit_supervised(
        self, X: object, y: object, method: str, sample_weight: object = None
    ) -> tuple[object, FeatureStats, np.random.Generator, int]:
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None "
                "(a supervised selector: call fit(X, y))"
            )
        m, m0 = self._resolve_sizes(method)
        X = self._validate_X(X, reset=True)
        Y, classes, task = _prepare_targets(y, self.task)
        self.task_ = task
        self.classes_ = classes
        base_seed, rng = _split_random_state(self.random_state)
        base, stats = self._fit_candidates(X, Y, m0, base_seed, sample_weight=sample_weight)
        return base, stats, rng, m


class EnergyScoreSelector(_SupervisedSelector):
    """Energy-based exploration of random features (EERF).

    ``M0`` candidates are drawn from ``base``; one pass accumulates the cross
    statistic; the score of candidate ``i`` is
    ``s_i = (1/N) sum_n y_n phi(x_n, w~_i)`` (``phi`` the candidate feature
    without the ``M0^{-1/2}`` factor, e.g. ``sqrt(2) cos(w^T x + b)``), and the
    ``M`` candidates with the largest ``|s_i|`` are kept, unweighted:
    ``z_j(x) = phi(x, w~_{i_j}) / sqrt(M)``, the scale of a plain ``M``-feature map.

    Targets: for classification the labels are mapped to +-1 (``classes_[1]``
    is +1; with more than two classes one-hot +-1 columns, scored by the
    Euclidean norm of ``s_i`` over the columns). For regression ``y`` is
    standardised (centred and divided by its population std, per column;
    several outputs are scored by the norm over columns); the centring matters,
    since ``sum_n y_n phi_i`` with a large mean of ``y`` ranks features by
    their mean rather than by their correlation with ``y``. The
    standardisation is exact, from the statistics of the same pass.

    Parameters
    ----------
    n_components : int, default=100
        ``M``; at most ``n_candidates``.
    n_candidates : int, optional
        ``M0``; default ``10 * n_components``.
    task : {"auto", "regression", "classification"}, default="auto"
        ``"auto"``: regression for floating ``y``, classification otherwise
        (integer, boolean, string labels).
    base : feature map, optional
        Default ``RandomFourierFeatures()``.
    random_state : int, RandomState, Generator or None
        Seeds the candidates (see :class:`LeverageScoreSampler`).

    Attributes
    ----------
    candidates_, candidate_stats_, selected_, scales_, kernel_, stats_,
    n_passes_, n_features_in_
        As for :class:`LeverageScoreSampler`; ``candidate_stats_`` holds the
        +-1 targets for classification and the raw ``y`` for regression.
        ``scales_`` is ``sqrt(M0 / M)``.
    scores_ : ndarray of shape (M0, k)
        ``s``, signed, with the targets as described above.
    weights_ : ndarray of shape (M0,)
        Normalised energies ``|s_i| / sum |s|`` (used only for the ranking).
    classes_ : ndarray or None
        Class labels for classification, None for regression.
    task_ : str

    References
    ----------
    .. [1] S. Shahrampour, A. Beirami and V. Tarokh, "On data-dependent random
       features for improved generalization in supervised learning", AAAI 2018.
    .. [2] S. Shahrampour and S. Kolouri, "On sampling random features from
       empirical leverage scores: implementation and theoretical guarantees",
       arXiv:1903.08329, 2019.
    """

    _fitted_schema = _SUPERVISED_FITTED

    def _select(self, base: object, stats: FeatureStats, rng: np.random.Generator, m: int) -> None:
        standardize = self.task_ == "regression"
        self.scores_ = energy_scores(stats, standardize=standardize)
        selection = select_features(stats, m, criterion="energy", method="top", standardize=standardize, random_state=rng)
        self._set_selection(base, stats, selection)


class KernelAlignmentSelector(_SupervisedSelector):
    """Learning kernels with random features (LKRF, Sinha & Duchi).

    ``M0`` candidates are drawn from ``base``; one pass accumulates the cross
    statistic; with ``v_i = (sum_n y_n phi(x_n, w~_i))^2`` (summed over the
    target columns) the distribution ``q`` over candidates maximises the
    alignment ``q^T v`` on the simplex within the chi-square ball
    ``M0 ||q - 1/M0||^2 <= rho`` (:func:`dxrf.selection.lkrf_weights`:
    bisection on the dual multiplier, sort-based simplex projections). Then

    - ``method="sample"``: ``M`` indices i.i.d. from ``q``, weighted
      ``z_j(x) = phi(x, w~_{m_j}) / sqrt(M M0 q_{m_j})``;
    - ``method="top"``: the ``M`` largest ``q_i`` (zeros ranked by ``v``),
      ``z_j(x) = phi(x, w~_{i_j}) / sqrt(M)``.

    Targets are handled as in :class:`EnergyScoreSelector`: +-1 labels for
    classification (the kernel-target alignment of the paper), the
    standardised response for regression.

    Parameters
    ----------
    n_components : int, default=100
        ``M``.
    n_candidates : int, optional
        ``M0``; default ``10 * n_components``.
    rho : float, default=1.0
        Radius of the chi-square ball, positive; ``rho >= M0 - 1`` lets ``q``
        reach a vertex of the simplex.
    method : {"sample", "top"}, default="sample"
    task : {"auto", "regression", "classification"}, default="auto"
    base : feature map, optional
        Default ``RandomFourierFeatures()``.
    random_state : int, RandomState, Generator or None
        Seeds the candidates and the draws of ``"sample"``.

    Attributes
    ----------
    candidates_, candidate_stats_, selected_, scales_, kernel_, stats_,
    n_passes_, n_features_in_, classes_, task_
        As for :class:`EnergyScoreSelector`. ``scales_`` is
        ``1 / sqrt(M q_i)`` for ``"sample"`` and ``sqrt(M0 / M)`` for ``"top"``.
    scores_ : ndarray of shape (M0,)
        ``v``.
    weights_ : ndarray of shape (M0,)
        The optimal ``q``.
    divergence_ : float
        ``M0 ||q - 1/M0||^2`` (equal to ``rho`` when the constraint is active).

    References
    ----------
    .. [1] A. Sinha and J. C. Duchi, "Learning kernels with random features",
       NeurIPS 2016.
    .. [2] S. Shahrampour and S. Kolouri, "On sampling random features from
       empirical leverage scores: implementation and theoretical guarantees",
       arXiv:1903.08329, 2019.
    """

    _fitted_schema = fitted(_SUPERVISED_FITTED, divergence_="real")

    def __init__(
        self,
        n_components: int = 100,
        *,
        n_candidates: int | None = None,
        rho: float = 1.0,
        method: str = "sample",
        task: str = "auto",
        base: object = None,
        random_state: object = None,
    ) -> None:
        super().__init__(n_components, n_candidates=n_candidates, task=task, base=base, random_state=random_state)
        self.rho = rho
        self.method = method

    def _check_selection_params(self) -> None:
        self._check_method()
        check_positive_float(self.rho, "rho")

    def _select(self, base: object, stats: FeatureStats, rng: np.random.Generator, m: int) -> None:
        rho = self.rho
        standardize = self.task_ == "regression"
        self.scores_ = alignment_scores(stats, standardize=standardize)
        selection = select_features(
            stats, m, criterion="alignment", method=self.method, rho=float(rho), standardize=standardize, random_state=rng
        )
        q = selection.weights
        self.divergence_ = float(q.size * np.sum((q - 1.0 / q.size) ** 2))
        self._set_selection(base, stats, selection)

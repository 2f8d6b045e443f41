"""The supervised selectors, from the candidates' cross statistic with the targets:
:class:`EnergyScoreSelector` (EERF) and :class:`KernelAlignmentSelector`."""

from __future__ import annotations

import dask.array as da
import numpy as np

from dxrf.core.labels import class_labels, encode_classes
from dxrf.core.validation import check_choice, check_positive_float, is_dask
from dxrf.stats.feature_stats import FeatureStats
from dxrf.selection.select import alignment_scores, energy_scores, select_features
from dxrf.core.persistable import fitted
from dxrf.selection.base_selector import _SUPERVISED_FITTED, TASKS, _BaseSelector, _split_random_state


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

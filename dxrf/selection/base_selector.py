"""The machinery every selector shares (:class:`_BaseSelector`): the candidates, the one pass
over the data, the selected kernel; and the seeding of the selectors' draws."""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.base import clone

from dxrf.core.memory import check_statistics, checked_pass
from dxrf.core.persistable import COMMON, fitted
from dxrf.core.validation import check_choice, check_positive_int, is_integer, make_rng
from dxrf.core.weights import check_sample_weight
from dxrf.kernels.kernel import FeatureKernel
from dxrf.features.maps import KernelTransformer, RandomFourierFeatures, fit_map
from dxrf.stats.feature_stats import FeatureStats
from dxrf.stats.accumulation import accumulate
from dxrf.selection.select import METHODS, Selection

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

"""The unsupervised selector: :class:`LeverageScoreSampler` (ELSS and the leverage-weighted RFF
convention), from the candidates' Gram statistic alone."""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.utils.validation import check_is_fitted

from dxrf.core.validation import check_choice, check_positive_int, is_integer, make_rng
from dxrf.stats.feature_stats import FeatureStats
from dxrf.selection.leverage import (
    LAM_CONVENTIONS,
    LeverageDiagnostics,
    _check_lam,
    _normalize_lams,
    leverage_diagnostics,
    leverage_scores,
)
from dxrf.selection.select import Selection, draw_features
from dxrf.core.persistable import fitted
from dxrf.selection.base_selector import _ROWS_SALT, _SELECTOR_FITTED, _BaseSelector, _split_random_state


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

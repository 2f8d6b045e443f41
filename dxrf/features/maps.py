"""Random feature maps as scikit-learn transformers.

Each map draws its random parameters once in ``fit`` (from ``random_state``)
and maps ``z(x) = M^{-1/2} [phi(x, w_1), ..., phi(x, w_M)]`` so that
``z(x)^T z(x')`` approximates a kernel ``k(x, x')`` (see DESIGN.md at the repository root).
NumPy input gives NumPy output; a dask array gives a lazy dask array.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils.validation import check_is_fitted, has_fit_parameter

from dxrf.core.memory import check_allocation
from dxrf.core.persistable import MAP, SaveMixin, fitted
from dxrf.core.weights import check_sample_weight
from dxrf.core.validation import (
    check_X,
    check_choice,
    check_float_dtype,
    check_positive_float,
    check_positive_int,
    is_dask,
    make_rng,
)
from dxrf.engine import map_rows
from dxrf.features import samplers
from dxrf.features.ard import learn_lengthscale_kinds, row_sample
from dxrf.kernels import exact
from dxrf.kernels.kernel import FeatureKernel

__all__ = [
    "RandomFourierFeatures",
    "RandomReLUFeatures",
    "RandomLinearSketch",
    "RandomMaxoutFeatures",
    "FOURIER_KERNELS",
    "SAMPLINGS",
    "fit_map",
    "check_bandwidth",
    "format_bandwidth",
    "is_lengthscales",
]

FOURIER_KERNELS = ("gaussian", "laplacian", "cauchy")
#: what a fit with bandwidth="ard" sets beside the lengthscales (``bandwidth_``)
ARD_ATTRIBUTES = ("ard_signal_", "ard_noise_", "ard_log_likelihood_")
SAMPLINGS = ("iid", "orthogonal", "qmc", "structured")


def _apply_kernel(block: np.ndarray, kernel: FeatureKernel) -> np.ndarray:
    return kernel.rowwise(block)


def apply_kernel(X: np.ndarray | da.Array, kernel: FeatureKernel) -> np.ndarray | da.Array:
    """Features ``z(X)``: eager for NumPy, a lazy map over row blocks for dask (:func:`dxrf.engine.map_rows`)."""
    if not is_dask(X):
        return map_rows(X, _apply_kernel, (kernel,), kernel.n_components, kernel.dtype)
    return map_rows(X, _apply_kernel, (kernel,), kernel.n_components, kernel.dtype,
                    n_features=kernel.n_features_in, name="dxrf-features")


class KernelTransformer(SaveMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """A transformer whose fitted ``kernel_`` makes its features: the maps and the selectors.

    Subclasses set ``kernel_`` (a :class:`FeatureKernel`) and
    ``_n_features_out`` in ``fit``; not for direct use. Each concrete one
    declares its fitted attributes in ``_fitted_schema`` (what its model
    files hold, see :mod:`dxrf.core.persistable`).
    """

    def _validate_X(self, X: object, reset: bool) -> np.ndarray | da.Array:
        return check_X(self, X, reset=reset)

    def transform(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """The fitted features ``z(X)``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        Z : ndarray or dask array of shape (n_samples, n_components)
            In the features' dtype; lazy for dask input.
        """
        check_is_fitted(self, "kernel_")
        X = self._validate_X(X, reset=False)
        return apply_kernel(X, self.kernel_)

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = []
        return tags


class BaseRandomFeatures(KernelTransformer):
    """Common machinery of the random feature maps; not for direct use."""

    _scale_factor = 1.0  # phi is scaled by sqrt(_scale_factor / M)

    def __init__(self, n_components: int = 100, *, dtype: str = "float32", random_state: object = None) -> None:
        self.n_components = n_components
        self.dtype = dtype
        self.random_state = random_state

    # -- subclass hooks -------------------------------------------------
    def _check_params(self) -> None:
        check_positive_int(self.n_components, "n_components")
        check_float_dtype(self.dtype)

    def _make_kernel(
        self, X: np.ndarray | da.Array, rng: np.random.Generator, sample_weight: np.ndarray | da.Array | None = None,
        y: object = None,
    ) -> FeatureKernel:
        raise NotImplementedError

    def kernel_matrix(self, X: np.ndarray, Y: np.ndarray | None = None) -> np.ndarray:
        """The exact kernel this map approximates, between rows of X and Y."""
        raise NotImplementedError

    # -- scikit-learn API -----------------------------------------------
    def fit(self, X: np.ndarray | da.Array, y: object = None, sample_weight: object = None) -> BaseRandomFeatures:
        """Draw the random parameters.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            Only its number of columns is used, and for ``bandwidth="median"``
            or ``"ard"`` a bounded random sample of its rows.
        y : array-like or dask array of shape (n_samples,) or (n_samples, k), optional
            Only ``bandwidth="ard"`` uses it (and requires it): numeric targets,
            or class labels (:func:`dxrf.features.ard.ard_targets`).
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights ``>= 0``; only a ``"median"`` bandwidth (an integer
            weight counts as the row repeated, see
            :func:`dxrf.features.samplers.median_distance`) and ``"ard"``
            (noise ``sigma^2 / w``; rows of weight 0 left out) use them.

        Returns
        -------
        self
        """
        self._check_params()
        X = self._validate_X(X, reset=True)
        w = check_sample_weight(sample_weight, int(X.shape[0]))
        d, m, q = int(X.shape[1]), int(self.n_components), int(getattr(self, "pieces", 1))
        # the draw (float64), its cast and the offsets: a few d x M arrays, refused before drawing
        check_allocation(
            3 * 8 * d * m * q, f"n_components={m} with {d} input columns (a {d} x {m * q} projection matrix)",
            "use fewer features (n_components), or fewer input columns",
        )
        self.kernel_ = self._make_kernel(X, make_rng(self.random_state), w, y)
        self._n_features_out = self.kernel_.n_components
        return self

    @property
    def components_(self) -> np.ndarray:
        """The projection matrix ``W`` (d x M, or d x M*pieces for maxout)."""
        check_is_fitted(self, "kernel_")
        return self.kernel_.dense().W

    def _scale(self, m: int) -> np.ndarray:
        return np.full(m, np.sqrt(self._scale_factor / m))


def _median_sample(
    X: np.ndarray | da.Array, rng: np.random.Generator, size: int, sample_weight: np.ndarray | da.Array | None = None
) -> tuple[np.ndarray, np.ndarray | None, float]:
    """A uniform sample of at most ``size`` rows, their weights, and the weight of a row's own pairs (:func:`row_sample`)."""
    sample, w, _, fraction = row_sample(X, rng, size, sample_weight)
    return sample, w, fraction


def ard_bandwidth(
    est: object, X: np.ndarray | da.Array, y: object, sample_weight: np.ndarray | da.Array | None,
    rng: np.random.Generator,
) -> object:
    """``est.bandwidth``, or for ``"ard"`` the lengthscales learned on a row sample (one read of X).

    With ``"ard"`` it sets ``ard_signal_`` and ``ard_noise_`` (the GP's
    signal and noise variances, relative to the standardised targets) and
    ``ard_log_likelihood_``; otherwise it removes those of an earlier fit.
    """
    for name in ARD_ATTRIBUTES:
        est.__dict__.pop(name, None)
    if not (isinstance(est.bandwidth, str) and est.bandwidth == "ard"):
        return est.bandwidth
    fit = learn_lengthscale_kinds(X, y, sample_weight, rng, int(est.ard_rows), int(est.ard_restarts),
                                  type(est).__name__, ("ard",))["ard"]
    est.ard_signal_, est.ard_noise_, est.ard_log_likelihood_ = fit.signal, fit.noise, fit.log_likelihood
    return fit.lengthscales


def check_ard(est: object) -> None:
    """The ``"ard"`` parameters of a shift-invariant map: a gaussian kernel, positive ``ard_rows`` and ``ard_restarts``."""
    check_positive_int(est.ard_rows, "ard_rows")
    check_positive_int(est.ard_restarts, "ard_restarts")
    if isinstance(est.bandwidth, str) and est.bandwidth == "ard" and est.kernel != "gaussian":
        raise ValueError(
            f"bandwidth='ard' learns the lengthscales of a gaussian kernel (GP evidence), not of kernel={est.kernel!r}"
        )


def is_lengthscales(bandwidth: object) -> bool:
    """Whether ``bandwidth`` is given as per-column lengthscales (an array-like, not a number or a string)."""
    return not isinstance(bandwidth, str) and np.ndim(bandwidth) != 0


def check_lengthscales(bandwidth: object, n_features: int | None = None) -> np.ndarray:
    """Per-column lengthscales as a float64 array of shape ``(d,)``: 1-d, non-empty, positive and finite.

    ``n_features``, when known (at ``fit``), is the number of X's columns
    the vector must match.
    """
    try:
        ls = np.array(bandwidth, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"bandwidth as lengthscales must hold numbers, got {bandwidth!r}") from None
    if ls.ndim != 1:
        raise ValueError(f"bandwidth as lengthscales must be 1-d (one per column), got an array of shape {ls.shape}")
    if ls.size == 0:
        raise ValueError("bandwidth as lengthscales is empty: give one positive lengthscale per column of X")
    if not np.isfinite(ls).all():
        bad = np.flatnonzero(~np.isfinite(ls)).tolist()[:8]
        raise ValueError(f"bandwidth as lengthscales must be finite, got NaN or infinity at columns {bad}")
    if not (ls > 0).all():
        raise ValueError(f"bandwidth as lengthscales must be positive, got {ls[ls <= 0][:8].tolist()} at columns "
                         f"{np.flatnonzero(ls <= 0).tolist()[:8]}")
    if n_features is not None and ls.size != n_features:
        raise ValueError(f"bandwidth has {ls.size} lengthscales but X has {n_features} columns: give one per column")
    return ls


def check_bandwidth(bandwidth: object, lengthscales: bool = True) -> float | str | np.ndarray:
    """``bandwidth`` as a positive number, the string ``"median"`` or (``lengthscales``) per-column lengthscales or ``"ard"``.

    ``lengthscales=False`` refuses a vector and ``"ard"``: maps whose kernel
    is not shift-invariant have no per-column lengthscales.
    """
    if isinstance(bandwidth, str):
        if bandwidth == "ard" and lengthscales:
            return bandwidth
        if bandwidth != "median":
            also = ", 'ard' (learned lengthscales)" if lengthscales else ""
            raise ValueError(
                f"bandwidth must be a positive number or 'median'{also} (or one lengthscale per column), got {bandwidth!r}"
            )
        return bandwidth
    if is_lengthscales(bandwidth):
        if not lengthscales:
            raise ValueError("bandwidth as a vector of per-column lengthscales is for shift-invariant kernels "
                             "(RandomFourierFeatures, NystroemFeatures); this map takes a number or 'median'")
        return check_lengthscales(bandwidth)
    return check_positive_float(bandwidth, "bandwidth")


def _resolve_bandwidth(
    bandwidth: object, X: np.ndarray | da.Array, rng: np.random.Generator, size: int, metric: str,
    sample_weight: np.ndarray | da.Array | None = None, lengthscales: bool = True,
) -> float | np.ndarray:
    """The fitted bandwidth: a float, or per-column lengthscales (float64, one per column of X)."""
    checked = check_bandwidth(bandwidth, lengthscales)
    if isinstance(checked, np.ndarray):
        return check_lengthscales(checked, int(X.shape[1]))
    if checked == "median":
        sample, w, fraction = _median_sample(X, rng, size, sample_weight)
        return samplers.median_distance(sample, metric, w, fraction)
    return float(bandwidth)


def format_bandwidth(value: float | np.ndarray, head: int = 3) -> str:
    """A fitted bandwidth in a few characters: ``"1.5"``, or ``"lengthscales [0.8 1.2 … 9.1] (d=26)"``."""
    if np.ndim(value) == 0:
        return f"{float(value):.4g}"
    v = np.asarray(value, dtype=np.float64)
    shown = [f"{x:.3g}" for x in v] if v.size <= 2 * head else (
        [f"{x:.3g}" for x in v[:head]] + ["…"] + [f"{x:.3g}" for x in v[-head:]])
    return f"lengthscales [{' '.join(shown)}] (d={v.size})"


def fit_map(
    features: object, X: np.ndarray | da.Array, sample_weight: np.ndarray | da.Array | None = None, y: object = None
) -> object:
    """``features.fit(X)``, with ``sample_weight`` for a ``"median"`` bandwidth, and ``y`` for ``"ard"``.

    The random maps weigh the rows of a ``"median"`` bandwidth (a numeric one
    needs no weights: they are not checked again); :class:`~dxrf.NystroemFeatures`
    takes weights for ``"ard"`` only (its landmarks are a random sample of
    rows, which repeating rows changes anyway). A ``"ard"`` bandwidth learns
    lengthscales from ``y`` (the regression targets, or a classifier's +-1
    class columns) and from the weights, whose zeros drop rows (validation
    rows, say); without ``y`` it is a ValueError naming the map.
    """
    bandwidth = features.get_params(deep=False).get("bandwidth")
    named = isinstance(bandwidth, str)
    kw = {}
    if named and bandwidth == "ard":
        if y is None:
            raise ValueError(f"{type(features).__name__}(bandwidth='ard') learns lengthscales from the targets, but no y was given")
        kw["y"] = y
    if sample_weight is not None and named and has_fit_parameter(features, "sample_weight"):
        kw["sample_weight"] = sample_weight
    return features.fit(X, **kw)


class RandomFourierFeatures(BaseRandomFeatures):
    """Random Fourier features of a shift-invariant kernel.

    ``phi(x, w) = sqrt(2) cos(w^T x + b)`` with ``w`` drawn from the kernel's
    spectral law and ``b ~ U[0, 2 pi)``, so that ``z(x)^T z(x')`` is an
    unbiased estimate of ``k(x, x')`` (Rahimi & Recht, 2007).

    Parameters
    ----------
    n_components : int, default=100
        Number of features ``M``.
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
        ``exp(-|x-x'|^2 / 2 sigma^2)``, ``exp(-|x-x'|_1 / sigma)`` or
        ``prod_j 1 / (1 + (x_j - x'_j)^2 / sigma^2)``.
    bandwidth : float, "median", "ard" or array-like of shape (n_features,), default=1.0
        ``sigma``, or per-column lengthscales ``l_j``: then the map is exactly
        the bandwidth-1 map of the columns divided by ``l_j`` (the kernel
        ``k((x - x') / l)``; every sampling). ``"ard"`` learns the lengthscales
        from ``y`` (see ``ard_rows``). ``"median"`` takes the median pairwise distance (Euclidean;
        L1 for the laplacian kernel) of a random sample of ``median_samples``
        rows (all rows when there are no more), each pair weighted by the
        rows' ``sample_weight`` given to ``fit``
        (:func:`~dxrf.features.samplers.median_distance`).
    sampling : {"iid", "orthogonal", "qmc", "structured"}, default="iid"
        How frequencies are drawn: Monte Carlo; orthogonal blocks (ORF,
        gaussian kernel only); scrambled Sobol points pushed through the inverse
        CDF of the spectral law (QMC); or structured ``H D1 H D2 H D3`` blocks
        applied by fast Walsh-Hadamard transforms in ``O(M log d)`` per row
        (SORF, gaussian kernel only, inputs zero-padded to a power of two of
        at least 32, since smaller Hadamard orders give too few directions;
        each frequency's norm is redrawn from the chi law of a Gaussian vector,
        which removes the bias plain SORF has at small ``d``).
    dtype : {"float32", "float64"}, default="float32"
        Arithmetic and output type of the features.
    random_state : int, RandomState, Generator or None
        Seed of every random draw; an int makes ``fit`` reproducible.
    median_samples : int, default=1000
        Rows sampled for ``bandwidth="median"``.
    ard_rows : int, default=3000
        Rows sampled for ``bandwidth="ard"``: per-column lengthscales of
        maximum exact GP evidence on that uniform sample of rows with their
        ``y`` and weights (one read of X; gaussian kernel only; each evidence
        evaluation costs ``O(ard_rows^3)``, see :func:`dxrf.kernels.gp.fit_ard`).
    ard_restarts : int, default=1
        Optimisations of the evidence for ``"ard"`` (the first from a heuristic start).

    Attributes
    ----------
    kernel_ : FeatureKernel
        The drawn parameters as plain arrays.
    bandwidth_ : float or ndarray of shape (n_features,)
        The bandwidth, or the lengthscales (float64).
    ard_signal_, ard_noise_, ard_log_likelihood_ : float
        With ``bandwidth="ard"``: the GP's signal and noise variances (relative
        to the standardised targets) and its log evidence on the sample.
    offsets_ : ndarray of shape (n_components,)
    n_features_in_ : int

    References
    ----------
    .. [1] A. Rahimi and B. Recht, "Random features for large-scale kernel
       machines", NeurIPS 2007.
    .. [2] F. X. Yu et al., "Orthogonal random features", NeurIPS 2016.
    .. [3] H. Avron et al., "Quasi-Monte Carlo feature maps for
       shift-invariant kernels", JMLR 17, 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from dxrf import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> RandomFourierFeatures(64, random_state=0).fit_transform(X).shape
    (5, 64)
    """

    _fitted_schema = fitted(
        MAP, bandwidth_="finite", offsets_="finite", ard_signal_="real?", ard_noise_="real?", ard_log_likelihood_="real?"
    )
    _scale_factor = 2.0

    def __init__(
        self,
        n_components: int = 100,
        *,
        kernel: str = "gaussian",
        bandwidth: float | str = 1.0,
        sampling: str = "iid",
        dtype: str = "float32",
        random_state: object = None,
        median_samples: int = 1000,
        ard_rows: int = 3000,
        ard_restarts: int = 1,
    ) -> None:
        super().__init__(n_components, dtype=dtype, random_state=random_state)
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.sampling = sampling
        self.median_samples = median_samples
        self.ard_rows = ard_rows
        self.ard_restarts = ard_restarts

    def _check_params(self) -> None:
        super()._check_params()
        check_bandwidth(self.bandwidth)
        check_choice(self.kernel, "kernel", FOURIER_KERNELS)
        check_choice(self.sampling, "sampling", SAMPLINGS)
        if self.sampling in ("orthogonal", "structured") and self.kernel != "gaussian":
            raise ValueError(f"sampling={self.sampling!r} is defined for the gaussian kernel only, not {self.kernel!r}")
        check_positive_int(self.median_samples, "median_samples")
        check_ard(self)

    def _make_kernel(self, X, rng, sample_weight=None, y=None):
        d, m = X.shape[1], self.n_components
        dtype = check_float_dtype(self.dtype)
        metric = "cityblock" if self.kernel == "laplacian" else "euclidean"
        bandwidth = ard_bandwidth(self, X, y, sample_weight, rng)
        self.bandwidth_ = _resolve_bandwidth(bandwidth, X, rng, self.median_samples, metric, sample_weight)
        # lengthscales: the bandwidth-1 draw, with the rows divided by them where they enter the kernel
        vector = isinstance(self.bandwidth_, np.ndarray)
        sigma, ls = (1.0, self.bandwidth_) if vector else (self.bandwidth_, None)
        scale = self._scale(m)
        if self.sampling == "structured":
            signs, norms = samplers.structured_signs(rng, d, m)
            b = samplers.uniform_offsets(rng, m)
            self.offsets_ = b
            return FeatureKernel(
                "cos", scale, d, b=b.astype(dtype), signs=signs.astype(dtype), norms=norms.astype(dtype), bandwidth=sigma,
                lengthscales=ls,
            )
        if self.sampling == "qmc":
            W, b = samplers.qmc_frequencies(rng, self.kernel, d, m, sigma)
        else:
            if self.sampling == "orthogonal":
                W = samplers.orthogonal_frequencies(rng, d, m, sigma)
            else:
                W = samplers.iid_frequencies(rng, self.kernel, d, m, sigma)
            b = samplers.uniform_offsets(rng, m)
        self.offsets_ = b
        return FeatureKernel("cos", scale, d, W=W.astype(dtype), b=b.astype(dtype), lengthscales=ls)

    def kernel_matrix(self, X, Y=None):
        check_is_fitted(self, "kernel_")
        fn = {"gaussian": exact.gaussian_kernel, "laplacian": exact.laplacian_kernel, "cauchy": exact.cauchy_kernel}
        return fn[self.kernel](X, Y, self.bandwidth_)


class RandomReLUFeatures(BaseRandomFeatures):
    """Random ReLU features ``sqrt(2) max(w^T x, 0)``, ``w ~ N(0, I / sigma^2)``.

    They approximate the arc-cosine kernel of order 1 (Cho & Saul, 2009),
    ``k(x, x') = |x| |x'| (sin t + (pi - t) cos t) / (pi sigma^2)`` with ``t``
    the angle between ``x`` and ``x'``.

    Parameters
    ----------
    n_components : int, default=100
    bandwidth : float or "median", default=1.0
        ``sigma``; it only scales the kernel, since the kernel is homogeneous.
    dtype : {"float32", "float64"}, default="float32"
    random_state : int, RandomState, Generator or None
    median_samples : int, default=1000

    References
    ----------
    .. [1] Y. Cho and L. K. Saul, "Kernel methods for deep learning", NeurIPS 2009.
    """

    _fitted_schema = fitted(MAP, bandwidth_="real")
    _scale_factor = 2.0

    def __init__(
        self,
        n_components: int = 100,
        *,
        bandwidth: float | str = 1.0,
        dtype: str = "float32",
        random_state: object = None,
        median_samples: int = 1000,
    ) -> None:
        super().__init__(n_components, dtype=dtype, random_state=random_state)
        self.bandwidth = bandwidth
        self.median_samples = median_samples

    def _check_params(self) -> None:
        super()._check_params()
        check_bandwidth(self.bandwidth, lengthscales=False)  # not shift-invariant: no per-column lengthscales
        check_positive_int(self.median_samples, "median_samples")

    def _make_kernel(self, X, rng, sample_weight=None, y=None):
        d, m = X.shape[1], self.n_components
        self.bandwidth_ = _resolve_bandwidth(
            self.bandwidth, X, rng, self.median_samples, "euclidean", sample_weight, lengthscales=False
        )
        W = samplers.iid_frequencies(rng, "gaussian", d, m, self.bandwidth_)
        return FeatureKernel("relu", self._scale(m), d, W=W.astype(check_float_dtype(self.dtype)))

    def kernel_matrix(self, X, Y=None):
        check_is_fitted(self, "kernel_")
        return exact.arccos_kernel(X, Y, self.bandwidth_)


class RandomLinearSketch(BaseRandomFeatures):
    """Gaussian random projection ``z(x) = W^T x / sqrt(M)``, ``W_ij ~ N(0, 1)``.

    An unbiased sketch of the linear kernel ``<x, x'>`` (Johnson-Lindenstrauss).

    Parameters
    ----------
    n_components : int, default=100
    dtype : {"float32", "float64"}, default="float32"
    random_state : int, RandomState, Generator or None
    """

    _fitted_schema = MAP

    def _make_kernel(self, X, rng, sample_weight=None, y=None):
        d, m = X.shape[1], self.n_components
        W = rng.standard_normal((d, m))
        return FeatureKernel("identity", self._scale(m), d, W=W.astype(check_float_dtype(self.dtype)))

    def kernel_matrix(self, X, Y=None):
        return exact.linear_kernel(X, Y)


class RandomMaxoutFeatures(BaseRandomFeatures):
    """Random maxout features ``max_{j <= q} w_j^T x``, ``w_j ~ N(0, I)`` i.i.d.

    With ``z(x) = M^{-1/2} [phi_1(x), ..., phi_M(x)]``, ``z(x)^T z(x')``
    approximates ``|x| |x'| f_q(rho)``, ``rho`` the cosine between ``x`` and
    ``x'`` and ``f_q(rho) = E[max_j U_j max_j V_j]`` for ``q`` i.i.d. standard
    bivariate normal pairs with correlation ``rho`` (Mroueh, Rennie & Goel):
    a locally linear kernel. ``pieces=1`` is exactly :class:`RandomLinearSketch`
    with the same ``random_state``.

    Parameters
    ----------
    n_components : int, default=100
    pieces : int, default=2
        ``q``, the number of linear pieces of each feature.
    dtype : {"float32", "float64"}, default="float32"
    random_state : int, RandomState, Generator or None

    References
    ----------
    .. [1] Y. Mroueh, S. Rennie and V. Goel, "Random maxout features",
       arXiv:1506.03705, 2015.
    """

    _fitted_schema = MAP

    def __init__(
        self, n_components: int = 100, *, pieces: int = 2, dtype: str = "float32", random_state: object = None
    ) -> None:
        super().__init__(n_components, dtype=dtype, random_state=random_state)
        self.pieces = pieces

    def _check_params(self) -> None:
        super()._check_params()
        check_positive_int(self.pieces, "pieces")

    def _make_kernel(self, X, rng, sample_weight=None, y=None):
        d, m, q = X.shape[1], self.n_components, self.pieces
        # one draw of d x (M q), feature-major: with q = 1 this is the linear sketch's draw
        W = rng.standard_normal((d, m * q))
        return FeatureKernel("maxout", self._scale(m), d, W=W.astype(check_float_dtype(self.dtype)), pieces=q)

    def kernel_matrix(self, X, Y=None):
        return exact.maxout_kernel(X, Y, self.pieces)

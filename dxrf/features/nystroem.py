"""Nyström features: ``z(x) = k(x, L) K_LL^{-1/2}`` for landmarks ``L`` drawn from the data, out of core."""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.utils.validation import check_is_fitted

from dxrf.core.memory import check_allocation
from dxrf.core.persistable import MAP, fitted
from dxrf.core.weights import check_sample_weight
from dxrf.core.validation import (
    ParameterTypeError,
    check_choice,
    check_float_dtype,
    check_positive_float,
    check_positive_int,
    is_dask,
    make_rng,
)
from dxrf.core.options import Options, resolve_options
from dxrf.engine import run_pass
from dxrf.kernels import exact
from dxrf.kernels.kernel import FeatureKernel
from dxrf.kernels.landmarks import LANDMARK_KERNELS, WHITENINGS, RaceConfig, leverage_transform, race_pass, whitening_of
from dxrf.features.maps import (
    KernelTransformer,
    ard_bandwidth,
    check_ard,
    RandomFourierFeatures,
    _resolve_bandwidth,
    check_bandwidth,
    check_lengthscales,
    is_lengthscales,
)

__all__ = ["NystroemFeatures", "LANDMARK_METHODS", "landmark_gram", "landmark_kernel", "landmark_kind", "uniform_landmarks"]

LANDMARK_METHODS = ("uniform", "leverage")
_EXACT = {"gaussian": exact.gaussian_kernel, "laplacian": exact.laplacian_kernel, "cauchy": exact.cauchy_kernel}


def landmark_kind(kernel: FeatureKernel) -> str:
    """``"gaussian"``, ``"laplacian"`` or ``"cauchy"``: the kernel of a Nyström ``FeatureKernel``."""
    return kernel.activation[len("nystroem-"):]


def landmark_kernel(
    W: np.ndarray, kernel: str, bandwidth: float | np.ndarray, *, whiten: bool = True, whitening: str = "eigh",
    whitening_matrix: np.ndarray | None = None,
) -> FeatureKernel:
    """The Nyström kernel of the landmarks ``W[:, j]`` (stored in the features' dtype).

    ``bandwidth``: a number, or per-column lengthscales (a float64 array of
    shape ``(d,)``, the kernel's ``lengthscales`` with bandwidth 1).

    ``whiten=True``: the features ``k(x, L) T`` of :class:`NystroemFeatures`,
    ``T`` the ``whitening`` of the landmarks' exact kernel matrix
    (:func:`~dxrf.kernels.landmarks.whitening_of`: ``K_LL^{-1/2}`` floored
    for ``W``'s dtype, or the triangular ``R^{-1}``); ``whiten=False``: the
    kernel values ``k(x, L)`` themselves, whose statistics any prefix of
    the landmarks can be whitened from (the model search).
    ``whitening_matrix``: that ``T`` already computed (M x M float64).
    """
    if whitening_matrix is not None:
        whitening = whitening_matrix
    else:
        whitening = whitening_of(landmark_gram(W, kernel, bandwidth), W.dtype, whitening) if whiten else None
    vector = np.ndim(bandwidth) != 0
    return FeatureKernel(
        f"nystroem-{kernel}", np.ones(W.shape[1]), int(W.shape[0]), W=W, bandwidth=1.0 if vector else bandwidth,
        whitening=whitening, lengthscales=np.asarray(bandwidth, dtype=np.float64) if vector else None,
    )


# Above this many M^2 d operations the Gaussian K_LL comes from BLAS (|x|^2 + |l|^2 - 2 x.l)
# rather than scipy's exact cdist, which is not BLAS (about 0.3 ns per operation: 23 s at
# M = 4000, d = 784, against 0.3 s; 0.93 s at M = 2000 against 0.05 s, twelve times in the
# first stage of MNIST's growing search). Below it cdist takes under 0.1 s. The expansion's
# error in a squared distance is about eps |x|^2 (1e-14 on MNIST).
_BLAS_GRAM_WORK = 2**28


def landmark_gram(W: np.ndarray, kernel: str, bandwidth: float | np.ndarray) -> np.ndarray:
    """``K_LL``: the exact kernel between the landmarks ``W[:, j]`` (float64 of the stored values).

    A 1-d ``bandwidth`` holds per-column lengthscales: the landmarks are divided by them (in float64).
    """
    m, d = W.shape[1], W.shape[0]
    if kernel != "gaussian" or m * m * d <= _BLAS_GRAM_WORK:
        return _EXACT[kernel](W.T, None, bandwidth)
    L = np.ascontiguousarray(W.T, dtype=np.float64)
    if np.ndim(bandwidth) != 0:
        L /= np.asarray(bandwidth, dtype=np.float64)
        bandwidth = 1.0
    sq = np.einsum("ij,ij->i", L, L)
    c = 0.5 / float(bandwidth) ** 2
    # a general product, not L @ L.T: OpenBLAS 0.3.31's threaded syrk crashes (SIGSEGV) at
    # M >= ~16 000 on this machine's Zen 4 (the statistics pass runs syrk on one thread)
    K = L @ np.ascontiguousarray(L.T)
    for r0 in range(0, m, 1024):  # the upper triangle a band at a time (no M x M temporaries), mirrored
        r1 = min(m, r0 + 1024)
        band = K[r0:r1, r0:]
        band *= 2 * c
        band -= c * sq[r0:r1, None]
        band -= c * sq[None, r0:]
        np.minimum(band, 0.0, out=band)
        np.exp(band, out=band)
        block = K[r0:r1, r0:r1]
        block[...] = np.triu(block) + np.triu(block, 1).T
        K[r1:, r0:r1] = K[r0:r1, r1:].T
    np.fill_diagonal(K, 1.0)
    return K


def race_seed(rng: np.random.Generator) -> int:
    """The seed of a landmark race drawn from the map's generator."""
    return int(rng.integers(2**63))


def uniform_landmarks(
    X: np.ndarray | da.Array, size: int, random_state: object, options: Options | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``size`` uniform rows of X in one race pass, ordered by their keys: ``(row indices, rows as float64)``.

    The race of ``NystroemFeatures(size, random_state=random_state)`` with
    a numeric bandwidth, so the first ``m`` rows are the ones
    ``NystroemFeatures(m, random_state=random_state)`` draws (in its order
    of row indices): a nested uniform sample for every ``m``. ``options``:
    those of the pass (default: :func:`dxrf.get_options` at this call).
    """
    cfg = RaceConfig(size, race_seed(make_rng(random_state)), int(X.shape[1]), order="key")
    rows, L, _ = run_pass(race_pass(cfg), X, (), (cfg,), options=resolve_options(options))
    return rows, L


class NystroemFeatures(KernelTransformer):
    """Nyström features of a shift-invariant kernel, with landmarks drawn out of core.

    ``z(x) = k(x, L) K_LL^{-1/2}`` for ``M`` landmark rows ``L``, so that
    ``z(x)^T z(x') = k(x, L) K_LL^{+} k(L, x')`` approximates ``k(x, x')``
    (Williams & Seeger). ``K_LL^{-1/2}`` is the symmetric inverse square root
    from one eigendecomposition, with eigenvalues below
    ``max(1e-12, M eps lambda_max)`` raised to that floor (scikit-learn floors
    at 1e-12; ``eps`` of the feature dtype keeps float32 rounding from being
    amplified). ``whitening="cholesky"`` uses ``R^{-1}`` instead, with
    ``K_LL = R^T R``: the same span, so the same kernel approximation and the
    same ridge predictions at every penalty, from a Cholesky factorisation
    and a triangular inverse (about 10x faster than the eigendecomposition at
    ``M = 20 000``; a learner's statistics are then whitened with triangular
    products, half the flops of dense ones). It needs a positive definite
    ``K_LL`` and, since nothing is thresholded, float64 features.

    In a learner's statistics pass the workers accumulate the statistics of
    ``k(X_b, L)`` and the whitening is applied to the small ``M x M`` results
    (``W^T C W``), not to every block; ``transform`` and ``predict`` apply it
    per block.

    Passes over X made by ``fit`` (``n_passes_``): ``landmarks="uniform"``
    one (the sampled rows are gathered by an engine pass: each row's hashed
    key, the ``M`` smallest kept, so only ``M`` rows reach the client);
    ``"leverage"`` two: (1) the Gram ``Z^T Z`` of ``leverage_components``
    random Fourier features of the same kernel, (2) each row's approximate
    ridge leverage score ``l_i = z_i^T (Z^T Z + N lam I)^{-1} z_i`` and an
    exponential race (key ``-log(u_i) / l_i``, ``u_i`` a hash of the row
    index) that keeps the ``M`` rows of smallest key: a sample without
    replacement with probabilities proportional to ``l_i`` (Alaoui &
    Mahoney 2015; Rudi, Calandriello, Carratino & Rosasco 2018). An array of
    landmarks takes no pass; ``bandwidth="median"`` or ``"ard"`` one more.

    Parameters
    ----------
    n_components : int, optional
        Number of landmarks ``M`` (default 100); with an array of landmarks,
        None or its number of rows.
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
        ``exp(-|x-x'|^2 / 2 sigma^2)``, ``exp(-|x-x'|_1 / sigma)`` or
        ``prod_j 1 / (1 + (x_j - x'_j)^2 / sigma^2)``.
    bandwidth : float, "median", "ard" or array-like of shape (n_features,), default=1.0
        ``sigma``; ``"median"`` as for :class:`RandomFourierFeatures`; a vector
        holds per-column lengthscales ``l_j``: the map is then the bandwidth-1
        map of the columns divided by ``l_j`` (landmarks are kept as rows of
        X and compared scaled); ``"ard"`` learns them from ``y`` (gaussian
        kernel; as for :class:`RandomFourierFeatures`, see ``ard_rows``).
    landmarks : {"uniform", "leverage"} or array of shape (M, n_features), default="uniform"
        Rows of X drawn uniformly or by approximate ridge leverage (one race
        pass each); rows of equal values count once, so the landmarks are
        distinct whenever X holds ``M`` distinct rows. Or the landmarks themselves.
    leverage_lam : float, default=1e-3
        ``lam`` of the leverage scores, in DESIGN.md's normalised convention.
    leverage_components : int, default=1000
        Random Fourier features ``M0`` of the leverage scores' first pass.
    whitening : {"eigh", "cholesky", "pivoted"}, default="eigh"
        The symmetric, thresholded ``K_LL^{-1/2}``; the triangular
        ``R^{-1}`` (for many landmarks; refused when ``K_LL`` is not
        positive definite); or the triangular inverse of a pivoted Cholesky
        factor that drops the landmarks the others explain to within rounding
        (for many landmarks, never refused; the growing search's choice from
        2048 landmarks).
    dtype : {"float32", "float64"}, default="float64"
        Arithmetic of the kernel values. float32 halves the pass's time but
        its rounding, amplified by ``K_LL^{-1/2}`` along small eigenvalues,
        costs accuracy at small ridge penalties (DESIGN.md).
    random_state : int, RandomState, Generator or None
    median_samples : int, default=1000
    ard_rows : int, default=3000
    ard_restarts : int, default=1
        As for :class:`RandomFourierFeatures`.

    Attributes
    ----------
    kernel_ : FeatureKernel
        Landmarks (as ``W``, one per column), bandwidth and whitening.
    bandwidth_ : float or ndarray of shape (n_features,)
        The bandwidth, or the lengthscales (float64).
    ard_signal_, ard_noise_, ard_log_likelihood_ : float
        With ``bandwidth="ard"``, as for :class:`RandomFourierFeatures`.
    landmark_indices_ : ndarray of shape (M,) or None
        Global row indices of the sampled landmarks (None for given ones).
    n_passes_ : int
    n_features_in_ : int

    References
    ----------
    .. [1] C. Williams and M. Seeger, "Using the Nyström method to speed up
       kernel machines", NeurIPS 2001.
    .. [2] A. Alaoui and M. W. Mahoney, "Fast randomized kernel ridge
       regression with statistical guarantees", NeurIPS 2015.
    .. [3] A. Rudi, D. Calandriello, L. Carratino and L. Rosasco, "On fast
       leverage score sampling and optimal learning", NeurIPS 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from dxrf import NystroemFeatures
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> NystroemFeatures(20, random_state=0).fit_transform(X).shape
    (50, 20)
    """

    _fitted_schema = fitted(
        MAP, bandwidth_="finite", landmark_indices_="index-or-none", n_passes_="int",
        ard_signal_="real?", ard_noise_="real?", ard_log_likelihood_="real?",
    )
    #: set on a learner's own clone by a solver that computes the Cholesky whitening itself
    #: (the conjugate gradient's preconditioner factors K_LL + delta I): fit then leaves
    #: ``kernel_`` unwhitened, and the solver whitens it with ``_set_cholesky_whitening``
    _defer_whitening = False

    def __init__(
        self,
        n_components: int | None = None,
        *,
        kernel: str = "gaussian",
        bandwidth: float | str = 1.0,
        landmarks: object = "uniform",
        leverage_lam: float = 1e-3,
        leverage_components: int = 1000,
        whitening: str = "eigh",
        dtype: str = "float64",
        random_state: object = None,
        median_samples: int = 1000,
        ard_rows: int = 3000,
        ard_restarts: int = 1,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.landmarks = landmarks
        self.leverage_lam = leverage_lam
        self.leverage_components = leverage_components
        self.whitening = whitening
        self.dtype = dtype
        self.random_state = random_state
        self.median_samples = median_samples
        self.ard_rows = ard_rows
        self.ard_restarts = ard_restarts

    def _check_params(self) -> None:
        check_positive_int(self.n_components, "n_components", allow_none=True)
        check_choice(self.kernel, "kernel", LANDMARK_KERNELS)
        check_choice(self.whitening, "whitening", WHITENINGS)
        check_float_dtype(self.dtype)
        check_positive_float(self.leverage_lam, "leverage_lam")
        check_positive_int(self.leverage_components, "leverage_components")
        check_positive_int(self.median_samples, "median_samples")
        check_bandwidth(self.bandwidth)
        check_ard(self)
        if isinstance(self.landmarks, str):
            check_choice(self.landmarks, "landmarks", LANDMARK_METHODS)
        elif not hasattr(self.landmarks, "shape") and not isinstance(self.landmarks, (list, tuple)):
            raise ParameterTypeError(
                f"landmarks must be 'uniform', 'leverage' or an array of rows, got {type(self.landmarks).__name__}"
            )

    def _given_landmarks(self, d: int) -> np.ndarray:
        L = np.asarray(self.landmarks.compute() if is_dask(self.landmarks) else self.landmarks)
        if L.ndim != 2 or L.shape[1] != d or L.shape[0] == 0:
            raise ValueError(f"landmarks has shape {L.shape}; expected (M, {d}) rows of X's {d} columns")
        if not (np.issubdtype(L.dtype, np.number) and np.isfinite(L).all()):
            raise ValueError("landmarks must be finite numbers")
        m = self.n_components
        if m is not None and m != L.shape[0]:
            raise ValueError(f"n_components={m} but landmarks has {L.shape[0]} rows; give n_components=None")
        return L.astype(np.float64)

    def fit(self, X: np.ndarray | da.Array, y: object = None, sample_weight: object = None) -> NystroemFeatures:
        """Choose the landmarks and compute the whitening.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,) or (n_samples, k), optional
            Only ``bandwidth="ard"`` uses it (and requires it), as in
            :meth:`RandomFourierFeatures.fit`.
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Only ``bandwidth="ard"`` uses it (noise ``sigma^2 / w``, rows of
            weight 0 left out); landmarks and a ``"median"`` bandwidth are unweighted.

        Returns
        -------
        self
        """
        self._check_params()
        X = self._validate_X(X, reset=True)
        n, d = int(X.shape[0]), int(X.shape[1])
        given = not isinstance(self.landmarks, str)
        m = None if given else (100 if self.n_components is None else int(self.n_components))
        if m is not None and m > n:
            raise ValueError(f"n_components={m} landmarks but X has n_samples={n}: use at most {n} landmarks")
        if m is not None:
            # K_LL, its eigenvectors and the whitening: a few M x M float64 arrays, refused before any pass
            check_allocation(4 * 8 * m * m, f"n_components={m} landmarks (M x M kernel matrices)",
                             "use fewer landmarks (n_components)")
        opts = resolve_options()  # once per fit: both passes get them explicitly
        rng = make_rng(self.random_state)
        metric = "cityblock" if self.kernel == "laplacian" else "euclidean"
        w = check_sample_weight(sample_weight, n)
        bandwidth = _resolve_bandwidth(ard_bandwidth(self, X, y, w, rng), X, rng, self.median_samples, metric)
        passes = int(isinstance(self.bandwidth, str))
        rows = None
        if given:
            L = self._given_landmarks(d)
        else:
            cfg = RaceConfig(m, race_seed(rng), d)
            if self.landmarks == "leverage":
                cfg.kernel, cfg.T = self._leverage_weights(X, rng, bandwidth, opts)
                passes += 1
            rows, L, _ = run_pass(race_pass(cfg), X, (), (cfg,), options=opts)
            passes += 1
        return self._set_landmarks(L, rows, bandwidth, passes)

    def _set_landmarks(self, L: np.ndarray, rows: np.ndarray | None, bandwidth: float, passes: int,
                       kernel: FeatureKernel | None = None) -> NystroemFeatures:
        """The fitted state from landmark rows ``L`` (float64, M x d) and their row indices (also for the search's refit).

        ``kernel``: the map of these landmarks already made (the search's
        validated one), taken instead of whitening them again.
        """
        # the landmarks as the features will use them (rounded to the dtype), and their whitening
        W = np.ascontiguousarray(L.T.astype(check_float_dtype(self.dtype)))
        vector = is_lengthscales(bandwidth)
        self.bandwidth_ = check_lengthscales(bandwidth, int(W.shape[0])) if vector else float(bandwidth)
        self.landmark_indices_ = rows
        if kernel is not None and not np.array_equal(kernel.W, W):
            raise ValueError("the given landmark map holds other landmarks")  # a programming error, caught early
        # a solver that factors K_LL itself (the conjugate gradient's preconditioner) sets the
        # Cholesky whitening afterwards (_set_cholesky_whitening): no second M^3 factorisation
        later = self._defer_whitening and self.whitening == "cholesky"
        self.kernel_ = kernel if kernel is not None else landmark_kernel(W, self.kernel, self.bandwidth_,
                                                                       whiten=not later, whitening=self.whitening)
        self.n_features_in_ = int(W.shape[0])
        self._n_features_out = W.shape[1]
        self.n_passes_ = passes
        return self

    def _set_cholesky_whitening(self, T: np.ndarray) -> None:
        """Whiten a map fitted with ``_defer_whitening`` by ``T = R^{-1}``, ``R`` an upper Cholesky factor of ``K_LL``.

        ``R`` is that of ``K_LL + delta I`` with the conjugate gradient's tiny
        ``delta`` (``M eps max K``): the features span the same space and the
        model's predictions are those of the landmark coefficients.
        """
        if not (self._defer_whitening and self.whitening == "cholesky" and self.kernel_.whitening is None):
            raise ValueError("only a map fitted with its Cholesky whitening deferred takes one")  # a programming error
        k = self.kernel_
        self.kernel_ = landmark_kernel(k.W, self.kernel, self.bandwidth_, whitening_matrix=T)
        self._defer_whitening = False

    def _leverage_weights(
        self, X: np.ndarray | da.Array, rng: np.random.Generator, bandwidth: float, opts: Options
    ) -> tuple[FeatureKernel, np.ndarray]:
        """Pass 1 of leverage landmarks: random Fourier features' Gram, and the transform of their scores."""
        from dxrf.stats.accumulation import accumulate

        # float32 features: the scores only weight a sample, and N lam I keeps their Gram well conditioned
        rff = RandomFourierFeatures(
            self.leverage_components, kernel=self.kernel, bandwidth=bandwidth, dtype="float32",
            random_state=int(rng.integers(2**63)),
        ).fit(X[:1])
        stats = accumulate(X, features=rff.kernel_, options=opts)
        return rff.kernel_, leverage_transform(stats.gram, stats.n, float(self.leverage_lam))

    @property
    def landmarks_(self) -> np.ndarray:
        """The landmark rows (M x n_features, float64 of the stored values)."""
        check_is_fitted(self, "kernel_")
        return self.kernel_.W.T.astype(np.float64)

    def kernel_matrix(self, X: np.ndarray, Y: np.ndarray | None = None) -> np.ndarray:
        """The exact kernel the features approximate, between rows of X and Y."""
        check_is_fitted(self, "kernel_")
        return _EXACT[self.kernel](X, Y, self.bandwidth_)

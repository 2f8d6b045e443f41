"""Principal components of random features (randomized nonlinear component analysis).

PCA of the feature vectors ``z(x)``: with Fourier features it approximates
kernel PCA (Lopez-Paz et al., 2014); with maxout features it gives the maxout
+ PCA embeddings of Mroueh, Rennie & Goel. The feature covariance comes from
the one pass of :func:`dxrf.accumulate` (``sum z`` and ``Z^T Z``); the
components are its top eigenvectors; ``transform`` maps rows without ever
materialising ``Z`` (a fused ``map_blocks`` for dask input).
"""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dxrf.core.errors import ModelFormatError
from dxrf.core.persistable import MODEL, fitted
from dxrf.core.validation import check_bool, check_fraction, check_parameters, check_positive_int, is_dask, is_integer, rule
from dxrf.core.weights import check_sample_weight
from dxrf.engine import map_rows
from dxrf.kernels.kernel import FeatureKernel
from dxrf.learners._base import RandomFeatureModel
from dxrf.solvers.pca_axes import principal_axes

__all__ = ["RandomFeaturePCA"]


def _project_block(X: np.ndarray, kernel: FeatureKernel, mean: np.ndarray, components: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
    # features die inside the block: only the (n, n_components) projection leaves it
    Z = kernel.rowwise(X).astype(np.float64, copy=False)
    Z -= mean
    out = Z @ components.T
    if scale is not None:
        out /= scale
    return out


def _inverse_block(T: np.ndarray, mean: np.ndarray, components: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
    T = np.asarray(T, dtype=np.float64)
    if scale is not None:
        T = T * scale
    return T @ components + mean


def _check_n_components(nc: object, name: str) -> object:
    what = "a positive int, a float in (0, 1) or None"
    if is_integer(nc):
        return check_positive_int(nc, name, what=what)
    return None if nc is None else check_fraction(nc, name, what=what)


#: each parameter checked once per fit
PCA_RULES = {"whiten": rule(check_bool), "n_components": rule(_check_n_components)}


class RandomFeaturePCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, RandomFeatureModel):
    """PCA of random features from one pass: approximate kernel PCA.

    ``fit`` draws the features (or runs a selector), accumulates ``sum z`` and
    ``Z^T Z`` in ONE pass, forms the centred covariance
    ``C = (1/N) sum (z - mean)(z - mean)^T`` (``M x M``) and keeps its top
    eigenvectors (``scipy.linalg.eigh`` with ``subset_by_index``). ``transform``
    is ``(z(X) - mean_) @ components_.T``: eager for NumPy, a lazy fused
    ``map_blocks`` for dask input, so ``Z`` is never materialised.

    Parameters
    ----------
    n_components : int, float or None, default=2
        Components kept: an int ``<= min(n_samples, M)``; a float in (0, 1),
        the smallest number whose explained variance ratio reaches it; or
        None for all ``M`` (at most ``n_samples``).
    features : feature map or selector, default=None
        A dxrf feature map (``RandomFourierFeatures``, ``RandomMaxoutFeatures``,
        ...) or an unsupervised selector (``LeverageScoreSampler``). ``None``
        is ``RandomFourierFeatures(100, bandwidth="median")``. A map without a ``random_state`` is
        seeded from ``random_state``.
    whiten : bool, default=False
        Divide the projections by ``sqrt(explained_variance_)`` so that they
        have unit variance (scikit-learn's convention, ``n - 1`` divisor).
    random_state : int, RandomState, Generator or None
        Seed of the feature map when it has none.

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, M)
        Principal axes in feature space, by decreasing variance. Signs follow
        scikit-learn: the largest absolute entry of each axis is positive.
    explained_variance_ : ndarray of shape (n_components_,)
        Variance along each axis, with the ``n - 1`` divisor of
        :class:`sklearn.decomposition.PCA`.
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        Fraction of the total feature variance.
    singular_values_ : ndarray of shape (n_components_,)
        Singular values of the centred feature matrix.
    mean_ : ndarray of shape (M,)
        Mean feature vector.
    n_components_ : int
    n_samples_ : int
    features_ : feature map or selector
    kernel_ : FeatureKernel
    n_passes_ : int
        Reads of X by ``fit`` (1, plus one for a ``"median"`` bandwidth).
    n_features_in_ : int

    References
    ----------
    .. [1] D. Lopez-Paz, S. Sra, A. Smola, Z. Ghahramani and B. Schölkopf,
       "Randomized nonlinear component analysis", ICML 2014.
    .. [2] Y. Mroueh, S. Rennie and V. Goel, "Random maxout features",
       arXiv:1506.03705, 2015.
    .. [3] A. Rahimi and B. Recht, "Random features for large-scale kernel
       machines", NeurIPS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from dxrf.learners.pca import RandomFeaturePCA
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> RandomFeaturePCA(2, random_state=0).fit_transform(X).shape
    (200, 2)
    """

    _fitted_schema = fitted(
        MODEL,
        components_="finite",
        explained_variance_="finite",
        explained_variance_ratio_="finite",
        singular_values_="finite",
        mean_="finite",
        n_components_="int",
        n_samples_="int",
    )

    def __init__(self, n_components: float | None = 2, *, features: object = None, whiten: bool = False, random_state: object = None) -> None:
        self.n_components = n_components
        self.features = features
        self.whiten = whiten
        self.random_state = random_state

    def _check_params(self) -> None:
        check_parameters(self, PCA_RULES)

    def fit(self, X: np.ndarray | da.Array, y: object = None, sample_weight: object = None) -> RandomFeaturePCA:
        """Draw the features and find their principal axes in one pass.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like or dask array of shape (n_samples,), optional
            Row weights (frequency weights): the mean and covariance are
            ``sum_n w_n z_n / W`` and ``sum_n w_n (z_n - mean)(z_n - mean)^T / W``
            with ``W = sum_n w_n``; ``explained_variance_`` uses ``W - 1`` and
            ``n_samples_`` is ``W``, so an integer weight equals repeating the row.

        Returns
        -------
        self
        """
        self._check_params()
        X = self._validate_X(X, reset=True)
        w = check_sample_weight(sample_weight, int(X.shape[0]))
        stats, _ = self._features_pass(X, None, sample_weight=w)
        axes = principal_axes(stats, self.n_components)
        self.components_ = axes.components
        self.explained_variance_ = axes.explained_variance
        self.explained_variance_ratio_ = axes.explained_variance_ratio
        self.singular_values_ = axes.singular_values
        self.mean_ = axes.mean
        self.n_components_ = axes.n_components
        self.n_samples_ = axes.n_samples
        return self

    @property
    def _n_features_out(self) -> int:
        return self.components_.shape[0]

    def _whiten_scale(self) -> np.ndarray | None:
        if not self.whiten:
            return None
        scale = np.sqrt(self.explained_variance_)
        return np.where(scale > 0, scale, 1.0)

    def transform(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Project rows on the principal axes.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples, n_components_)
            Float64. For dask input a lazy array: one fused task per row
            chunk computes the features and projects them.
        """
        check_is_fitted(self, "components_")
        X = self._validate_X(X, reset=False)
        scale = self._whiten_scale()
        if not is_dask(X):
            return map_rows(np.asarray(X), _project_block, (self.kernel_, self.mean_, self.components_, scale),
                            self.n_components_, np.float64, work=self.kernel_.n_components)
        return map_rows(X, _project_block, (self.kernel_, self.mean_, self.components_, scale), self.n_components_,
                        np.float64, n_features=self.kernel_.n_features_in, name="dxrf-rfpca",
                        work=self.kernel_.n_components)

    def inverse_transform(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Map projections back to FEATURE space (not to the inputs).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_components_)

        Returns
        -------
        ndarray or dask array of shape (n_samples, M)
            ``X @ components_ + mean_`` (undoing whitening): the projection of
            ``z(x)`` on the principal subspace. Lazy for dask input.
        """
        check_is_fitted(self, "components_")
        scale = self._whiten_scale()
        if is_dask(X):
            if X.ndim != 2 or X.shape[1] != self.n_components_:
                raise ValueError(f"X must have shape (n_samples, {self.n_components_}), got {X.shape}")
            X = X.rechunk({1: -1})
            return map_rows(X, _inverse_block, (self.mean_, self.components_, scale), self.components_.shape[1],
                            np.float64, name="dxrf-rfpca-inverse")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_components_:
            raise ValueError(f"X must have shape (n_samples, {self.n_components_}), got {X.shape}")
        return _inverse_block(X, self.mean_, self.components_, scale)

    def _check_loaded(self) -> None:
        comps = getattr(self, "components_", None)
        kernel = getattr(self, "kernel_", None)
        if comps is not None and kernel is not None and comps.shape[1] != kernel.n_components:
            raise ModelFormatError(f"components_ has {comps.shape[1]} columns but the feature kernel has {kernel.n_components} features")

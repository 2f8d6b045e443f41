"""The sufficient statistics of random features: :class:`FeatureStats`.

Sums ``(Z^T Z, Z^T Y, sum z, sum y, Y^T Y, n)`` of a feature map ``z`` over rows,
from which leverage scores, ridge paths and validation errors are small dense
algebra on the M x M result; :mod:`dxrf.stats.accumulation` computes them in one pass.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence

import numpy as np

from dxrf.core.validation import check_subset

__all__ = ["FeatureStats", "is_upper_triangular", "permuted_triangular"]


@dataclasses.dataclass(eq=False)
class FeatureStats:
    """Sufficient statistics of features ``z`` and targets ``y`` over ``n`` rows.

    All fields are float64 sums (not means). ``FeatureStats`` is a monoid:
    ``a + b`` are the statistics of the union of the rows of ``a`` and ``b``.

    Attributes
    ----------
    gram : ndarray of shape (M, M)
        ``sum_n z_n z_n^T``. The normalised Gram ``G`` of the design (trace
        about 1 for random Fourier features) is :meth:`normalized_gram`.
    sum : ndarray of shape (M,)
        ``sum_n z_n``.
    n : int or float
        Number of rows; for weighted statistics the total weight
        ``sum_n w_n`` (a float), the divisor of every mean.
    cross : ndarray of shape (M, k) or None
        ``sum_n z_n y_n^T``; ``None`` without targets.
    ysum : ndarray of shape (k,) or None
        ``sum_n y_n``.
    yy : ndarray of shape (k, k) or None
        ``sum_n y_n y_n^T``.
    """

    gram: np.ndarray
    sum: np.ndarray
    n: int | float
    cross: np.ndarray | None = None
    ysum: np.ndarray | None = None
    yy: np.ndarray | None = None

    def __post_init__(self) -> None:
        m = self.gram.shape[0]
        if self.gram.shape != (m, m) or self.sum.shape != (m,):
            raise ValueError(f"inconsistent shapes: gram {self.gram.shape}, sum {self.sum.shape}")
        has_y = [a is not None for a in (self.cross, self.ysum, self.yy)]
        if any(has_y) and not all(has_y):
            raise ValueError("cross, ysum and yy must be given together")
        if self.cross is not None:
            k = self.cross.shape[1]
            if self.cross.shape != (m, k) or self.ysum.shape != (k,) or self.yy.shape != (k, k):
                raise ValueError(
                    f"inconsistent target shapes: cross {self.cross.shape}, ysum {self.ysum.shape}, yy {self.yy.shape}"
                )

    # -- construction and merging --------------------------------------
    @classmethod
    def zeros(cls, n_components: int, n_targets: int | None = None) -> FeatureStats:
        """Empty statistics (the identity of ``+``)."""
        m, k = n_components, n_targets
        if k is None:
            return cls(np.zeros((m, m)), np.zeros(m), 0)
        return cls(np.zeros((m, m)), np.zeros(m), 0, np.zeros((m, k)), np.zeros(k), np.zeros((k, k)))

    def __add__(self, other: FeatureStats) -> FeatureStats:
        if not isinstance(other, FeatureStats):
            return NotImplemented
        if other.gram.shape != self.gram.shape:
            raise ValueError(f"cannot add statistics of {self.n_components} and {other.n_components} features")
        if (self.cross is None) != (other.cross is None):
            raise ValueError("cannot add statistics with targets to statistics without")
        if self.cross is not None and self.cross.shape != other.cross.shape:
            raise ValueError(f"cannot add statistics of {self.n_targets} and {other.n_targets} targets")
        add = lambda a, b: None if a is None else a + b  # noqa: E731
        return FeatureStats(
            self.gram + other.gram,
            self.sum + other.sum,
            self.n + other.n,
            add(self.cross, other.cross),
            add(self.ysum, other.ysum),
            add(self.yy, other.yy),
        )

    def __sub__(self, other: FeatureStats) -> FeatureStats:
        """The statistics of the rows in ``self`` but not in ``other`` (a part of them).

        How k-fold training statistics come from one pass: the total minus
        the fold. Float64 differences of sums, exact up to rounding of the total.
        """
        if not isinstance(other, FeatureStats):
            return NotImplemented
        if other.n > self.n:
            raise ValueError(f"cannot subtract statistics of {other.n} rows from statistics of {self.n}")
        return self + FeatureStats(
            -other.gram,
            -other.sum,
            -other.n,
            None if other.cross is None else -other.cross,
            None if other.ysum is None else -other.ysum,
            None if other.yy is None else -other.yy,
        )

    def __radd__(self, other: object) -> FeatureStats:
        # lets sum([...]) start from 0
        if isinstance(other, numbers.Number) and other == 0:
            return self
        return NotImplemented

    # -- shape -----------------------------------------------------------
    @property
    def n_components(self) -> int:
        return int(self.gram.shape[0])

    @property
    def n_targets(self) -> int | None:
        return None if self.cross is None else int(self.cross.shape[1])

    # -- derived quantities ---------------------------------------------
    def _check_nonempty(self) -> None:
        if self.n == 0:
            raise ValueError("these statistics hold no rows")

    def normalized_gram(self) -> np.ndarray:
        """``G = (1/N) sum_n z_n z_n^T`` (uncentred), the Gram of the ELSS paper."""
        self._check_nonempty()
        return self.gram / self.n

    def mean(self) -> np.ndarray:
        """Mean feature vector ``(1/N) sum_n z_n``."""
        self._check_nonempty()
        return self.sum / self.n

    def covariance(self) -> np.ndarray:
        """Centred feature covariance ``(1/N) sum (z - mean)(z - mean)^T``."""
        mu = self.mean()
        C = self.gram / self.n
        for r0 in range(0, C.shape[0], 1024):  # a band at a time: no M x M temporary
            C[r0 : r0 + 1024] -= np.outer(mu[r0 : r0 + 1024], mu)
        return C

    def centered_cross(self) -> np.ndarray:
        """Centred cross-covariance ``(1/N) sum (z - mean_z)(y - mean_y)^T``."""
        self._require_targets()
        return self.cross / self.n - np.outer(self.mean(), self.ysum / self.n)

    def _require_targets(self) -> None:
        if self.cross is None:
            raise ValueError("these statistics were accumulated without targets (y)")

    def subset(self, index: Sequence[int] | np.ndarray, scales: Sequence[float] | np.ndarray | None = None) -> FeatureStats:
        """Exact statistics of a selection of features, without another pass.

        The selected feature ``j`` is ``scales[j] * z_{index[j]}``; indices may
        repeat. Its Gram is ``S G[index, index] S`` with ``S = diag(scales)``.
        """
        index, s = check_subset(index, scales, self.n_components)
        if index.size == self.n_components and np.array_equal(index, np.arange(index.size)) and np.all(s == 1.0):
            # every feature in order at scale 1 (a Nyström map's own M): the same statistics, no
            # M x M gather (2.4 s at M = 8000); statistics are never changed in place
            return self
        gram = self.gram[np.ix_(index, index)] * np.outer(s, s)
        cross = None if self.cross is None else self.cross[index] * s[:, None]
        return FeatureStats(gram, self.sum[index] * s, self.n, cross, self.ysum, self.yy)

    def transformed(self, T: np.ndarray, *, overwrite: bool = False) -> FeatureStats:
        """Exact statistics of the features ``z T`` (``T`` of shape (M, M'), e.g. a Nyström whitening).

        ``T^T G T``, ``T^T sum`` and ``T^T cross``; the targets' sums are unchanged.
        An upper-triangular square ``T`` (a Cholesky whitening) takes two
        triangular products (``M^3`` flops each, half of a dense product's),
        computed in the Gram's own memory when ``overwrite`` is true (the
        caller gives up ``self.gram``). So does a pivoted Cholesky whitening
        (:func:`permuted_triangular`), on its kept features' block.
        """
        T = np.asarray(T, dtype=np.float64)
        if T.ndim != 2 or T.shape[0] != self.n_components:
            raise ValueError(f"T has shape {T.shape}; expected ({self.n_components}, M') for {self.n_components} features")
        cross = None if self.cross is None else T.T @ self.cross
        if is_upper_triangular(T):
            gram = _triangular_congruence(self.gram, T, overwrite)
        elif (pivoted := permuted_triangular(T)) is not None:
            gram = _pivoted_congruence(self.gram, *pivoted)
        else:
            gram = T.T @ (self.gram @ T)
        return FeatureStats(gram, T.T @ self.sum, self.n, cross, self.ysum, self.yy)


def is_upper_triangular(T: np.ndarray) -> bool:
    """Whether ``T`` is square (M >= 2) with zeros below its diagonal, checked a band of rows at a time."""
    m = T.shape[0]
    if T.ndim != 2 or T.shape[1] != m or m < 2:
        return False
    for r0 in range(0, m, 512):  # no M x M temporary (np.tril would copy 3.2 GB at M = 20 000)
        r1 = min(m, r0 + 512)
        if T[r0:r1, :r0].any() or np.tril(T[r0:r1, r0:r1], -1).any():
            return False
    return True


def permuted_triangular(T: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(rows, U)`` when ``T[rows, :r] = U`` is upper triangular and every other entry of ``T`` is zero, else None.

    The shape of a pivoted Cholesky whitening
    (:func:`dxrf.kernels.landmarks.inverse_pivoted`): ``r`` kept landmarks in
    pivot order, the others' rows and the last ``M - r`` columns zero. Row
    ``i`` of a dense upper-triangular ``U`` has ``r - i`` non-zeros, which
    gives the order; an exact zero inside the triangle fails the check (then
    None: the caller takes the dense product).
    """
    m = T.shape[0]
    if T.ndim != 2 or T.shape[1] != m or m < 2:
        return None
    counts = np.count_nonzero(T, axis=1)
    rows = np.flatnonzero(counts)
    r = rows.size
    if r == 0 or np.any(T[:, r:]):
        return None
    rows = rows[np.argsort(-counts[rows], kind="stable")]
    if not np.array_equal(counts[rows], np.arange(r, 0, -1)):
        return None
    U = np.ascontiguousarray(T[rows, :r])
    return (rows, U) if is_upper_triangular(U) or r == 1 else None


def _pivoted_congruence(G: np.ndarray, rows: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``T^T G T`` for ``T`` zero but ``T[rows, :r] = U`` (upper triangular): ``U^T G[rows, rows] U``, zero-padded."""
    m, r = G.shape[0], rows.size
    block = np.array(G[np.ix_(rows, rows)], dtype=np.float64, order="C")
    inner = _triangular_congruence(block, U, True) if r > 1 else block * U[0, 0] ** 2
    if r == m:
        return inner
    out = np.zeros((m, m))
    out[:r, :r] = inner
    return out


def _triangular_congruence(G: np.ndarray, T: np.ndarray, overwrite: bool) -> np.ndarray:
    """``T^T G T`` for a symmetric ``G`` and an upper-triangular ``T``, by two BLAS ``trmm`` calls."""
    from scipy.linalg.blas import dtrmm

    # BLAS works on column-major arrays. G.T is G itself (symmetric) in that order;
    # a row-major upper T read column-major is the lower-triangular T^T.
    B = G.T if overwrite and G.flags.c_contiguous and G.dtype == np.float64 else np.array(G, dtype=np.float64, order="F")
    if T.flags.c_contiguous:
        A, lower, first, second = T.T, 1, 1, 0  # A = T^T: G T = G A^T, then T^T (G T) = A (G T)
    else:
        A, lower, first, second = np.asfortranarray(T), 0, 0, 1
    B = dtrmm(1.0, A, B, side=1, lower=lower, trans_a=first, overwrite_b=1)
    B = dtrmm(1.0, A, B, side=0, lower=lower, trans_a=second, overwrite_b=1)
    # the two triangles round differently: average them, a band at a time (no M x M temporary)
    m, band = B.shape[0], 512
    for r0 in range(0, m, band):
        r1 = min(m, r0 + band)
        mean = (B[r0:r1, r0:] + B[r0:, r0:r1].T) * 0.5
        B[r0:r1, r0:] = mean
        B[r0:, r0:r1] = mean.T
    return B



"""Sufficient statistics of random features, accumulated in one pass.

A pass maps every row chunk ``X_b`` (with its targets ``Y_b``) to partial
statistics ``(Z_b^T Z_b, Z_b^T Y_b, sum z, sum y, Y_b^T Y_b, n_b)`` with
``Z_b = z(X_b)`` never leaving the task that made it, and sums the partials by
a tree reduction. Everything later (leverage scores, ridge paths, validation
errors) is small dense algebra on the M x M result.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence

import dask
import dask.array as da
import numpy as np
from scipy.linalg import blas
from threadpoolctl import threadpool_limits

from ._validation import check_dask_matrix, is_dask
from .features.kernel import FeatureKernel
from .options import get_options
from .progress import compute

__all__ = ["FeatureStats", "accumulate", "block_stats", "hashed_split", "resolve_kernel"]


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
    n : int
        Number of rows.
    cross : ndarray of shape (M, k) or None
        ``sum_n z_n y_n^T``; ``None`` without targets.
    ysum : ndarray of shape (k,) or None
        ``sum_n y_n``.
    yy : ndarray of shape (k, k) or None
        ``sum_n y_n y_n^T``.
    """

    gram: np.ndarray
    sum: np.ndarray
    n: int
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
        return self.gram / self.n - np.outer(mu, mu)

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
        index = np.asarray(index, dtype=np.intp)
        if index.ndim != 1 or index.size == 0:
            raise ValueError("index must be a non-empty 1-d array of feature indices")
        if index.min() < 0 or index.max() >= self.n_components:
            raise ValueError(f"index out of range for {self.n_components} features")
        s = np.ones(index.size) if scales is None else np.asarray(scales, dtype=np.float64)
        if s.shape != index.shape:
            raise ValueError(f"scales has shape {s.shape}; expected {index.shape}")
        gram = self.gram[np.ix_(index, index)] * np.outer(s, s)
        cross = None if self.cross is None else self.cross[index] * s[:, None]
        return FeatureStats(gram, self.sum[index] * s, self.n, cross, self.ysum, self.yy)


# -- the per-block kernel ------------------------------------------------------


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A bijective 64-bit mixer (Steele, Lea & Flood's SplitMix64 finaliser)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hashed_split(start: int, stop: int, fraction: float, seed: int = 0) -> np.ndarray:
    """Validation mask of the global rows ``start .. stop - 1``.

    Row ``i`` is a validation row when a hash of ``(i, seed)`` falls below
    ``fraction``: the split depends only on the row index, never on chunking
    or on the number of workers, and costs no pass to build.
    """
    idx = np.arange(start, stop, dtype=np.uint64)
    salt = _splitmix64(np.array([seed], dtype=np.uint64))[0]
    u = (_splitmix64(idx ^ salt) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return u < fraction


_SYRK = {np.dtype(np.float32): blas.ssyrk, np.dtype(np.float64): blas.dsyrk}


def _group_stats(X: np.ndarray, Y: np.ndarray | None, kernel: FeatureKernel, tile_rows: int) -> FeatureStats:
    n = X.shape[0]
    m = kernel.n_components
    k = None if Y is None else Y.shape[1]
    stats = FeatureStats.zeros(m, k)
    stats.n = n
    if n == 0:
        return stats
    dtype = kernel.dtype
    syrk = _SYRK[dtype]
    tile_rows = min(tile_rows, n)
    buf = np.empty((tile_rows, m), dtype=dtype)
    tile_gram = np.zeros((m, m), dtype=dtype, order="F")
    for lo in range(0, n, tile_rows):
        hi = min(lo + tile_rows, n)
        Z = kernel.raw(X[lo:hi], out=buf[: hi - lo])
        # rank-k update of the upper triangle in the feature dtype; sums over tiles in float64
        tile_gram = syrk(1.0, Z.T, beta=0.0, c=tile_gram, trans=0, lower=0, overwrite_c=1)
        stats.gram += tile_gram
        stats.sum += Z.sum(axis=0, dtype=np.float64)
        if Y is not None:
            Yt = Y[lo:hi]
            stats.cross += Z.T @ Yt.astype(dtype)
            stats.ysum += Yt.sum(axis=0)
            stats.yy += Yt.T @ Yt
    upper = np.triu(stats.gram)
    gram = upper + np.triu(upper, 1).T
    s = kernel.scale
    gram *= np.outer(s, s)
    stats.gram = gram
    stats.sum *= s
    if Y is not None:
        stats.cross *= s[:, None]
    return stats


def block_stats(
    X: np.ndarray,
    y: np.ndarray | None,
    kernel: FeatureKernel,
    mask: np.ndarray | None = None,
    *,
    tile_rows: int | None = None,
    blas_threads: int | None = None,
    row_offset: int = 0,
) -> FeatureStats | tuple[FeatureStats, FeatureStats]:
    """Statistics of one block of rows: a pure function on NumPy arrays.

    Features are computed tile by tile into one reused buffer (the projection,
    the activation in place, then a symmetric rank-k update), so memory stays
    at one tile of features however large the block.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,) or (n, k), or None
    kernel : FeatureKernel
    mask : bool ndarray of shape (n,), optional
        Marks validation rows; then a pair ``(train, validation)`` is returned.
    tile_rows : int, optional
        Rows per tile; by default from :func:`dxrf.get_options`.
    blas_threads : int, optional
        Limit BLAS threads for this call (``None`` leaves them alone).
    row_offset : int
        Global index of the first row, only used in error messages.

    Returns
    -------
    FeatureStats, or (FeatureStats, FeatureStats) when ``mask`` is given.
    """
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != kernel.n_features_in:
        raise ValueError(f"X block has shape {X.shape}; the feature map expects {kernel.n_features_in} columns")
    if not np.isfinite(X).all():
        bad = int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0]) + row_offset
        raise ValueError(f"X contains NaN or infinity (first at row {bad})")
    Y = None
    if y is not None:
        Y = np.asarray(y, dtype=np.float64).reshape(X.shape[0], -1)
        if not np.isfinite(Y).all():
            bad = int(np.flatnonzero(~np.isfinite(Y).all(axis=1))[0]) + row_offset
            raise ValueError(f"y contains NaN or infinity (first at row {bad})")
    if tile_rows is None:
        opts = get_options()
        tile_rows = max(opts.min_tile_rows, opts.tile_bytes // (kernel.n_components * kernel.dtype.itemsize))
    limiter = threadpool_limits(blas_threads, user_api="blas") if blas_threads else _nullcontext()
    with limiter:
        if mask is None:
            return _group_stats(X, Y, kernel, tile_rows)
        mask = np.asarray(mask, dtype=bool).reshape(-1)
        if mask.shape[0] != X.shape[0]:
            raise ValueError(f"split mask has {mask.shape[0]} rows; X block has {X.shape[0]}")
        out = []
        for rows in (~mask, mask):
            Yg = None if Y is None else Y[rows]
            out.append(_group_stats(X[rows], Yg, kernel, tile_rows))
        return out[0], out[1]


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# -- the Dask pass -----------------------------------------------------------------


def resolve_kernel(features: object, X: np.ndarray | da.Array | None = None) -> FeatureKernel:
    """The :class:`FeatureKernel` of a feature map, fitting an unfitted map on ``X``."""
    if isinstance(features, FeatureKernel):
        return features
    kernel = getattr(features, "kernel_", None)
    if kernel is None and hasattr(features, "fit"):
        if X is None:
            raise ValueError("features is not fitted and no X was given to fit it")
        features.fit(X)
        kernel = getattr(features, "kernel_", None)
    if not isinstance(kernel, FeatureKernel):
        raise TypeError(
            f"features must be a dxrf feature map (e.g. RandomFourierFeatures) or a FeatureKernel, got {type(features).__name__}"
        )
    return kernel


def _task(X, y, mask, kernel, start, fraction, seed, tile_rows, blas_threads):
    if fraction is not None:
        mask = hashed_split(start, start + X.shape[0], fraction, seed)
    return block_stats(X, y, kernel, mask, tile_rows=tile_rows, blas_threads=blas_threads, row_offset=start)


def _merge(*parts):
    if isinstance(parts[0], tuple):
        return tuple(_merge(*group) for group in zip(*parts))
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def _as_row_blocks(a: object, chunks: tuple[int, ...], name: str, n: int) -> list | None:
    """Split a per-row array into delayed blocks aligned with X's row chunks."""
    if a is None:
        return None
    if not is_dask(a):
        a = np.asarray(a)
        if a.shape[0] != n:
            raise ValueError(f"{name} has {a.shape[0]} rows but X has {n}")
        a = da.from_array(a, chunks=(chunks,) + a.shape[1:], name=False)
    if a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} rows but X has {n}")
    if a.ndim > 2:
        raise ValueError(f"{name} must be 1- or 2-dimensional, got shape {a.shape}")
    a = a.rechunk((chunks,) + tuple(-1 for _ in a.shape[1:]))
    return list(a.to_delayed().ravel())


def accumulate(
    X: np.ndarray | da.Array,
    y: np.ndarray | da.Array | None = None,
    features: object = None,
    split: float | np.ndarray | da.Array | None = None,
    *,
    split_seed: int = 0,
    progress: bool | None = None,
    tile_rows: int | None = None,
    split_every: int | None = None,
) -> FeatureStats | tuple[FeatureStats, FeatureStats]:
    """One pass over ``X`` accumulating the statistics of the features ``z(X)``.

    Each row chunk becomes a partial :class:`FeatureStats` in one task (on
    the worker that holds or reads the chunk); a tree reduction sums them. The
    N x M feature matrix is never formed: a task holds one tile of features.
    Per-block arithmetic runs in the feature dtype; sums are float64.

    Parameters
    ----------
    X : ndarray or dask array of shape (N, d)
        A dask array should be chunked by rows with all columns in one chunk;
        one split along columns is rechunked with a warning.
    y : array of shape (N,) or (N, k), optional
        Targets; give them to accumulate ``cross``, ``ysum`` and ``yy``.
    features : feature map or FeatureKernel
        A dxrf feature map (fitted, or unfitted and then fitted on ``X``).
    split : float, bool array of shape (N,), or None
        Validation rows: a boolean (dask) array, True for validation, or a
        fraction in (0, 1) of rows chosen by a hash of the row index and
        ``split_seed`` (independent of chunking). With a split the result is
        a pair ``(train, validation)`` from the same pass.
    split_seed : int, default=0
    progress : bool, optional
        Show a progress bar (default from :func:`dxrf.get_options`).
    tile_rows : int, optional
        Rows per feature tile inside a task (default: from ``tile_bytes``).
    split_every : int, optional
        Fan-in of the tree reduction.

    Returns
    -------
    FeatureStats, or a pair (train, validation) when ``split`` is given.

    Notes
    -----
    NumPy input is processed in this process (BLAS uses all its threads);
    dask input runs on the active scheduler: the distributed client if one
    exists, else dask's threads. Inside dask tasks BLAS is held to
    ``blas_threads`` threads to avoid oversubscribing the cores.
    """
    if features is None:
        raise ValueError("features is required: pass a feature map such as RandomFourierFeatures(...)")
    kernel = resolve_kernel(features, X)
    opts = get_options()
    if tile_rows is None:
        tile_rows = max(opts.min_tile_rows, opts.tile_bytes // (kernel.n_components * kernel.dtype.itemsize))
    fraction = None
    if split is not None and not hasattr(split, "shape"):
        if isinstance(split, bool) or not isinstance(split, numbers.Real) or not 0.0 < float(split) < 1.0:
            raise ValueError(f"split must be a fraction in (0, 1) or a boolean mask, got {split!r}")
        fraction = float(split)
        split = None
    elif split is not None and np.dtype(split.dtype) != np.dtype(bool):
        raise TypeError(f"split mask must be boolean, got dtype {split.dtype}")
    y_given = y is not None

    if not is_dask(X):
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
        if X.shape[0] == 0:
            raise ValueError("X is empty (0 rows)")
        n = X.shape[0]
        if y is not None and np.asarray(y).shape[0] != n:
            raise ValueError(f"y has {np.asarray(y).shape[0]} rows but X has {n}")
        mask = hashed_split(0, n, fraction, split_seed) if fraction is not None else None
        if split is not None:
            mask = np.asarray(split.compute() if is_dask(split) else split)
            if mask.shape[0] != n:
                raise ValueError(f"split has {mask.shape[0]} rows but X has {n}")
        return block_stats(X, None if y is None else np.asarray(y), kernel, mask, tile_rows=tile_rows)

    X = check_dask_matrix(X, n_features=kernel.n_features_in)
    chunks = X.chunks[0]
    n = X.shape[0]
    x_blocks = list(X.to_delayed().ravel())
    y_blocks = _as_row_blocks(y, chunks, "y", n) if y_given else [None] * len(x_blocks)
    m_blocks = _as_row_blocks(split, chunks, "split", n) if split is not None else [None] * len(x_blocks)
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(int)
    token = dask.base.tokenize(kernel)
    kernel_d = dask.delayed(kernel, pure=True, name=f"dxrf-kernel-{token}")
    # fresh keys on every call: a pass is a pass, never a lookup of a result
    # still held by the scheduler from an earlier call
    task = dask.delayed(_task, pure=False)
    parts = [
        task(xb, yb, mb, kernel_d, int(s), fraction, split_seed, tile_rows, opts.blas_threads)
        for xb, yb, mb, s in zip(x_blocks, y_blocks, m_blocks, starts)
    ]
    fan_in = split_every or opts.split_every
    merge = dask.delayed(_merge, pure=False)
    while len(parts) > 1:
        parts = [merge(*parts[i : i + fan_in]) for i in range(0, len(parts), fan_in)]
    show = opts.progress if progress is None else progress
    return compute(parts[0], progress=show)

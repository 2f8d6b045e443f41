"""Sufficient statistics of random features, accumulated in one pass.

A pass maps every row chunk ``X_b`` (with its targets ``Y_b``) to partial
statistics ``(Z_b^T Z_b, Z_b^T Y_b, sum z, sum y, Y_b^T Y_b, n_b)`` with
``Z_b = z(X_b)`` never leaving the task that made it, and sums the partials by
a tree reduction. Everything later (leverage scores, ridge paths, validation
errors) is small dense algebra on the M x M result.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import os
from collections.abc import Sequence
from types import ModuleType

import dask
import dask.array as da
import numpy as np

from ._blas import blas_limit
from ._buffers import thread_buffer
from ._device import array_module, kernel_on, to_host
from ._validation import check_dask_matrix, check_finite_rows, is_dask
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


# Rows of the Gram per band of the compensated sums: the band's four temporaries
# stay small (1 MiB at M = 500, 4 MiB at 2000); measured 20% faster than 256 rows
# at M = 2000. It also fixes the packed layout of the Gram's sums.
_SUM_ROWS = 64


@functools.lru_cache(maxsize=32)
def _gram_bands(m: int) -> tuple[tuple[int, int, int], ...]:
    """``(r0, r1, offset)`` of each band of :class:`_Sums`' packed Gram.

    Band ``[r0, r1)`` holds rows ``r0:r1``, columns ``r0:m`` of the Gram (the
    upper triangle plus the lower half of its diagonal block), stored
    row-major from ``offset`` of one flat array: about ``m (m + _SUM_ROWS) / 2``
    numbers instead of ``m^2``.
    """
    out, off = [], 0
    for r0 in range(0, m, _SUM_ROWS):
        r1 = min(r0 + _SUM_ROWS, m)
        out.append((r0, r1, off))
        off += (r1 - r0) * (m - r0)
    return tuple(out)


def _packed_size(m: int) -> int:
    r0, r1, off = _gram_bands(m)[-1] if m else (0, 0, 0)
    return off + (r1 - r0) * (m - r0)


class _Sums:
    """Compensated (double-double) running sums of the statistics of one group of rows.

    Every tile contributes its float32 (or float64) Gram, feature sum, cross
    products and target moments; they are added into ``hi + lo`` pairs with
    error-free transformations. The final ``hi + lo`` is the exact sum rounded
    once, so it does not depend on the order in which tiles and partial sums
    are added: the statistics are bitwise identical across chunkings and
    worker counts (tiles themselves follow a global grid of row indices).

    The Gram's sums keep only its upper triangle, in row bands packed into one
    flat array (:func:`_gram_bands`): the running sums and every partial a pass
    ships or holds take about ``8 M^2`` bytes instead of ``16 M^2``.
    """

    def __init__(self, m: int, k: int | None, xp: ModuleType = np) -> None:
        self.n = 0
        self.m = m
        self.k = k
        self.xp = xp
        self.hi = {"gram": xp.zeros(_packed_size(m)), "sum": xp.zeros(m)}
        if k is not None:
            self.hi.update(cross=xp.zeros((m, k)), ysum=xp.zeros(k), yy=xp.zeros((k, k)))
        self.lo = {key: xp.zeros_like(v) for key, v in self.hi.items()}

    def __getstate__(self) -> dict:
        if self.xp is not np:
            raise TypeError("device sums are not shipped; call to_host() first")
        state = dict(self.__dict__)
        del state["xp"]  # modules do not pickle
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, xp=np)

    def to_host(self) -> _Sums:
        """These sums with every array copied to host memory (NumPy)."""
        if self.xp is np:
            return self
        host = _Sums.__new__(_Sums)
        host.__dict__.update(self.__dict__, xp=np)
        host.hi = {key: to_host(v) for key, v in self.hi.items()}
        host.lo = {key: to_host(v) for key, v in self.lo.items()}
        return host

    def _scratch(self, shape: tuple[int, ...]) -> np.ndarray:
        size = 4 * int(np.prod(shape))
        if self.xp is not np:  # the device's memory pool makes reallocation cheap
            return self.xp.empty((4,) + shape)
        # one flat array serves every shape: sized for the largest band at once
        buf = thread_buffer("sums", (max(size, 4 * _SUM_ROWS * self.m),), np.dtype(np.float64))
        return buf[:size].reshape((4,) + shape)

    def _band(self, flat: np.ndarray, r0: int, r1: int, off: int) -> np.ndarray:
        return flat[off : off + (r1 - r0) * (self.m - r0)].reshape(r1 - r0, self.m - r0)

    def add(self, key: str, x: np.ndarray) -> None:
        hi, lo = self.hi[key], self.lo[key]
        if key == "gram":
            # upper triangle only, a band of rows at a time
            for r0, r1, off in _gram_bands(self.m):
                hb, lb = self._band(hi, r0, r1, off), self._band(lo, r0, r1, off)
                _compensated_add(hb, lb, x[r0:r1, r0:], self._scratch(hb.shape))
        else:
            _compensated_add(hi, lo, x, self._scratch(hi.shape))

    def merge(self, other: _Sums) -> _Sums:
        self.n += other.n
        step = _SUM_ROWS * max(self.m, 1)  # elementwise: any cache-sized pieces will do
        for key in self.hi:
            hi, lo = self.hi[key].reshape(-1), self.lo[key].reshape(-1)
            ohi, olo = other.hi[key].reshape(-1), other.lo[key].reshape(-1)
            for a in range(0, hi.size, step):
                b = min(a + step, hi.size)
                _compensated_add(hi[a:b], lo[a:b], ohi[a:b], self._scratch((b - a,)))
                lo[a:b] += olo[a:b]
        return self

    def finish(self, scale: np.ndarray) -> FeatureStats:
        total = {key: self.hi[key] + self.lo[key] for key in self.hi if key != "gram"}
        m = self.m
        gram = np.empty((m, m))
        bands = _gram_bands(m)
        for r0, r1, off in bands:
            np.add(self._band(self.hi["gram"], r0, r1, off), self._band(self.lo["gram"], r0, r1, off),
                   out=gram[r0:r1, r0:])
        # mirror the upper triangle and scale, a band at a time: no M x M temporaries
        # (their first touch made this 3x slower, ~0.2 s at M = 4000)
        for r0, r1, _ in bands:
            diag = gram[r0:r1, r0:r1]
            diag[...] = np.triu(diag) + np.triu(diag, 1).T
            gram[r1:, r0:r1] = gram[r0:r1, r1:].T
        for r0, r1, _ in bands:
            gram[r0:r1] *= np.multiply.outer(scale[r0:r1], scale)
        stats = FeatureStats(gram, total["sum"] * scale, self.n)
        if self.k is not None:
            stats.cross = total["cross"] * scale[:, None]
            stats.ysum = total["ysum"]
            stats.yy = total["yy"]
        return stats


def _compensated_add(hi: np.ndarray, lo: np.ndarray, x: np.ndarray, scratch: np.ndarray | None = None) -> None:
    """``(hi, lo) += x`` by Knuth's TwoSum: ``hi`` gets the rounded sum, ``lo`` its exact error.

    ``scratch`` (optional, shape ``(4,) + hi.shape``, float64) avoids
    allocating temporaries, whose first touch is slow on this class of machine.
    """
    if scratch is None:
        scratch = array_module(hi).empty((4,) + hi.shape)
    s, bp, err = scratch[0], scratch[1], scratch[2]
    if x.dtype != hi.dtype:
        # widen float32 tiles once: mixed-dtype ufuncs cast through small buffers, twice here
        scratch[3][...] = x
        x = scratch[3]
    np.add(hi, x, out=s)
    np.subtract(s, hi, out=bp)
    np.subtract(s, bp, out=err)
    np.subtract(hi, err, out=err)  # hi - (s - bp), exact
    np.subtract(x, bp, out=bp)  # x - bp, exact
    err += bp
    lo += err
    hi[...] = s


# Bytes of features computed at a time inside a tile (a slab of rows that
# stays in a core's L2 cache while it is projected, activated and summed).
# A slab's column sums accumulate in the tile's dtype: at most this many rows,
# no more than BLAS's own float32 accumulation in the syrk, which adds panels of
# a few hundred rows into its float32 result.
_SLAB_BYTES = 2**20
_SLAB_MAX_ROWS = 1024


def _tile_grid(start: int, stop: int, tile_rows: int) -> list[tuple[int, int]]:
    """The global tiles ``[t T, (t+1) T)`` intersected with the rows ``[start, stop)``."""
    out = []
    t = start // tile_rows
    while t * tile_rows < stop:
        out.append((max(start, t * tile_rows), min(stop, (t + 1) * tile_rows)))
        t += 1
    return out


class _TileWorker:
    """Per-task buffers and the statistics of whole tiles of rows.

    ``sums`` continues the compensated sums of earlier chunks of the same lane
    when given (they are updated in place), else starts new ones.
    """

    def __init__(
        self,
        kernel: FeatureKernel,
        tile_rows: int,
        n_targets: int | None,
        groups: int,
        sums: list | None = None,
        xp: ModuleType = np,
    ) -> None:
        m = kernel.n_components
        self.xp = xp
        self.kernel = kernel_on(kernel, xp)
        if xp is np:
            self.buf = thread_buffer("tile", (tile_rows, m), kernel.dtype)
            self.gram = thread_buffer("gram", (m, m), kernel.dtype)
        else:
            self.buf = xp.empty((tile_rows, m), dtype=kernel.dtype)
            self.gram = xp.zeros((m, m), dtype=kernel.dtype)
        self.sums = sums if sums is not None else [_Sums(m, n_targets, xp) for _ in range(groups)]

    def _features_in_slabs(self, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """Fill ``Z`` with the raw features of ``X``, a cache-sized slab of rows at a time.

        Each slab's projection, activation and column sum run while it is in
        the core's L2 cache, so the tile crosses memory once on its way to the
        syrk. Returns the column sums in float64: each slab (at most
        ``_SLAB_MAX_ROWS`` rows) is summed by BLAS in the tile's dtype, no less
        accurate than the syrk's own accumulation, and the slabs' sums in
        float64. Together 1-2% of a tile at M = 2000, against 4% for separate
        sweeps (the float64 reduction alone was 12 ms of 455).
        """
        n, m = Z.shape
        rows = min(_SLAB_MAX_ROWS, max(16, _SLAB_BYTES // (m * Z.dtype.itemsize)))
        slabs = -(-n // rows)
        ones = thread_buffer("slab-ones", (rows,), Z.dtype)
        ones[...] = 1
        parts = thread_buffer("slab-sums", (slabs, m), Z.dtype)
        for i in range(slabs):
            a, b = i * rows, min(n, (i + 1) * rows)
            self.kernel.raw(X[a:b], out=Z[a:b])
            np.matmul(ones[: b - a], Z[a:b], out=parts[i])
        return parts.sum(axis=0, dtype=np.float64)

    def add_tile(self, X: np.ndarray, Y: np.ndarray | None, mask: np.ndarray | None) -> None:
        """Add one global tile (its train rows to group 0, validation rows to group 1)."""
        if mask is None:
            self._add_rows(0, X, Y)
            return
        for g, rows in enumerate((~mask, mask)):
            if rows.any():
                self._add_rows(g, X[rows], None if Y is None else Y[rows])

    def _add_rows(self, g: int, X: np.ndarray, Y: np.ndarray | None) -> None:
        n = X.shape[0]
        if n == 0:
            return
        sums = self.sums[g]
        Z = self.buf[:n]
        if self.xp is np:
            sums.add("sum", self._features_in_slabs(X, Z))
        else:  # one launch per tile on a device
            self.kernel.raw(X, out=Z)
            sums.add("sum", Z.sum(axis=0, dtype=np.float64))
        # NumPy sends Z.T @ Z to BLAS syrk and releases the GIL (SciPy's ?syrk
        # wrapper holds it, which serialised threads of a process); CuPy runs GEMM
        self.xp.matmul(Z.T, Z, out=self.gram)
        sums.add("gram", self.gram)
        if Y is not None:
            sums.add("cross", (Z.T @ Y.astype(Z.dtype)).astype(np.float64))
            sums.add("ysum", Y.sum(axis=0))
            sums.add("yy", Y.T @ Y)
        sums.n += n


def _check_block(X: np.ndarray, y: np.ndarray | None, kernel: FeatureKernel, row_offset: int):
    """Validate one block of rows (NumPy, or CuPy: the checks then run on the device)."""
    xp = array_module(X)
    if xp is np:
        X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise TypeError(f"X must hold numbers (bool, integer or float), got dtype {X.dtype}")
    if X.ndim != 2 or X.shape[1] != kernel.n_features_in:
        raise ValueError(f"X block has shape {X.shape}; the feature map expects {kernel.n_features_in} columns")
    check_finite_rows(X, "X", row_offset)
    if y is None:
        return X, None
    Y = xp.asarray(y)
    if Y.dtype.kind not in "biuf":
        raise TypeError(f"y must hold numbers (bool, integer or float), got dtype {Y.dtype}")
    Y = Y.astype(np.float64, copy=False).reshape(X.shape[0], -1)
    check_finite_rows(Y, "y", row_offset)
    return X, Y


# Tile sizes that divide 10 000, hence the usual chunk sizes (10k, 50k, 100k, 1M rows):
# with them no tile is cut by a chunk boundary and no fix-up task is needed.
_ROUND_TILES = (10_000, 5_000, 2_500, 2_000, 1_250, 1_000, 500, 250)


def _default_tile_rows(kernel: FeatureKernel) -> int:
    opts = get_options()
    rows = opts.tile_bytes // (kernel.n_components * kernel.dtype.itemsize)
    rows = int(min(opts.max_tile_rows, max(opts.min_tile_rows, rows)))
    return next((t for t in _ROUND_TILES if opts.min_tile_rows <= t <= rows), rows)


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
    at one tile of features however large the block. Tiles follow the global
    grid of row indices ``[t T, (t+1) T)`` (``row_offset`` is the global index
    of the first row), and tiles are summed with compensated arithmetic, so
    the result does not depend on how the rows were split into blocks.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,) or (n, k), or None
    kernel : FeatureKernel
    mask : bool ndarray of shape (n,), optional
        Marks validation rows; then a pair ``(train, validation)`` is returned.
    tile_rows : int, optional
        Rows per tile ``T``; by default from :func:`dxrf.get_options`.
    blas_threads : int, optional
        Limit BLAS threads for this call (``None`` leaves them alone).
    row_offset : int
        Global index of the first row.

    Returns
    -------
    FeatureStats, or (FeatureStats, FeatureStats) when ``mask`` is given.
    """
    X, Y = _check_block(X, y, kernel, row_offset)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool).reshape(-1)
        if mask.shape[0] != X.shape[0]:
            raise ValueError(f"split mask has {mask.shape[0]} rows; X block has {X.shape[0]}")
    tile_rows = tile_rows or _default_tile_rows(kernel)
    limiter = blas_limit(blas_threads)
    with limiter:
        worker = _TileWorker(kernel, tile_rows, None if Y is None else Y.shape[1], 1 if mask is None else 2)
        for lo, hi in _tile_grid(row_offset, row_offset + X.shape[0], tile_rows):
            a, b = lo - row_offset, hi - row_offset
            worker.add_tile(X[a:b], None if Y is None else Y[a:b], None if mask is None else mask[a:b])
    out = tuple(s.finish(kernel.scale) for s in worker.sums)
    return out[0] if mask is None else out


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


def _chunk_task(X, y, mask, kernel, start, n_total, fraction, seed, tile_rows, blas_threads, groups, sums=None):
    """One row chunk: sums of the global tiles it holds whole, and the fragments of the others.

    A tile cut by a chunk boundary is not summed here: its rows (X is narrow,
    so they are small) go to a fix-up task that joins the pieces, so every
    tile's float32 Gram is computed from the same rows however X is chunked.
    ``sums`` are the running sums of the previous chunk of the same lane,
    continued in place (see :func:`accumulate`).
    """
    X, Y = _check_block(X, y, kernel, start)
    xp = array_module(X)
    if fraction is not None:
        mask = hashed_split(start, start + X.shape[0], fraction, seed)
    elif mask is not None:
        mask = to_host(mask).astype(bool, copy=False).reshape(-1)
    # device blocks: sums of this chunk on the device, added to the lane's host sums at the end
    lane = sums
    worker = _TileWorker(
        kernel, tile_rows, None if Y is None else Y.shape[1], groups, sums if xp is np else None, xp
    )
    fragments = {}
    limiter = blas_limit(blas_threads)
    with limiter:
        for lo, hi in _tile_grid(start, start + X.shape[0], tile_rows):
            t = lo // tile_rows
            a, b = lo - start, hi - start
            rows = (X[a:b], None if Y is None else Y[a:b], None if mask is None else mask[a:b])
            if lo == t * tile_rows and hi == min((t + 1) * tile_rows, n_total):
                if xp is not np and rows[2] is not None:
                    rows = rows[:2] + (xp.asarray(rows[2]),)
                worker.add_tile(*rows)
            else:  # fragments travel as host arrays; the fix-up task runs on the host
                fragments[t] = (lo,) + tuple(None if r is None else to_host(r).copy() for r in rows)
    if xp is np:
        return worker.sums, fragments
    done = [s.to_host() for s in worker.sums]
    return (done if lane is None else _merge(lane, done)), fragments


def _fixup_task(t, kernel, tile_rows, blas_threads, groups, *fragment_maps):
    """Sum one tile whose rows were split between consecutive chunks."""
    pieces = sorted((fm[t] for fm in fragment_maps if t in fm), key=lambda p: p[0])
    X = np.concatenate([p[1] for p in pieces])
    Y = None if pieces[0][2] is None else np.concatenate([p[2] for p in pieces])
    mask = None if pieces[0][3] is None else np.concatenate([p[3] for p in pieces])
    worker = _TileWorker(kernel, tile_rows, None if Y is None else Y.shape[1], groups)
    limiter = blas_limit(blas_threads)
    with limiter:
        worker.add_tile(X, Y, mask)
    return worker.sums


def _shipped(kernel: FeatureKernel) -> object:
    """The kernel as a graph input: scattered once to the cluster when it is large.

    A large kernel (maxout with many pieces, wide inputs) embedded in the graph
    makes the scheduler receive and store a large graph; a scattered future is
    sent to the workers directly and referenced by key.
    """
    from .progress import active_client

    client = active_client()
    if client is not None and kernel.nbytes > 2**20:
        return client.scatter(kernel, hash=False)
    token = dask.base.tokenize(kernel)
    return dask.delayed(kernel, pure=True, name=f"dxrf-kernel-{token}")


def _merge(*parts):
    """Add lists of per-group compensated sums (order does not matter).

    The first partial is updated in place: each partial has exactly one
    consumer (this merge) and fresh keys, and copying it would double the
    memory of the largest objects in the pass (about 8 M^2 bytes per group).
    """
    total = parts[0]
    for p in parts[1:]:
        for acc, other in zip(total, p):
            acc.merge(other)
    return total


# A merge task holds its fan-in of partials at once, and partials wait in worker
# memory until their whole group is done; keep a group under this many bytes.
# Measured at M0 = 1000 (16 MiB partials, before the Gram's sums were packed),
# 4 * 10^6 rows: peak worker RSS 565 MiB with fan-in 8 against 464 MiB with
# fan-in 2 (474 / 444 at 10^6 rows), same time.
_MERGE_BYTES = 32 * 2**20


def _fan_in(m: int, groups: int, limit: int) -> int:
    partial = groups * 2 * 8 * _packed_size(m)  # hi and lo float64 packed Grams per group
    return int(max(2, min(limit, _MERGE_BYTES // max(partial, 1))))


def _lanes(X: da.Array, lanes: int | None) -> list[int]:
    """The lane of each row chunk of ``X``.

    Chunks already in the cluster's memory (a persisted array) are chained on
    the worker holding them, two lanes per thread of that worker, so no chunk
    moves and one partial per lane is shipped. Chunks still to be read get a
    task each, which consumes its read as soon as it lands.
    """
    n = X.numblocks[0]
    if lanes is not None:  # explicit: chunk i to lane i mod lanes
        if lanes < 1:
            raise ValueError(f"lanes must be a positive number of chains, got {lanes}")
        return [i % lanes for i in range(n)]
    from .progress import active_client

    client = active_client()
    if client is None:  # dask's own schedulers: nothing is held in a cluster
        return list(range(n))
    threads = client.nthreads()
    try:
        who = client.who_has(X)
    except Exception:  # noqa: BLE001 - placement is only a hint
        who = {}
    keys = list(dask.core.flatten(X.__dask_keys__()))
    holders = [who.get(k) or () for k in keys]
    if holders and all(h and h[0] in threads for h in holders):
        ids: dict[tuple[str, int], int] = {}
        seen: dict[str, int] = {}
        out = []
        for h in holders:
            w = h[0]
            slot = seen.get(w, 0) % (2 * threads[w])
            seen[w] = seen.get(w, 0) + 1
            out.append(ids.setdefault((w, slot), len(ids)))
        return out
    # Chunks still to be read: one task per chunk. Chained lanes measured no
    # faster here, and finished reads piled up in worker memory waiting for
    # their lane (dask releases reads in its own priority order): 1.3 GiB per
    # worker at 10^7 rows against 0.5 GiB at 10^6.
    return list(range(n))


def _finish(sums, scale):
    out = tuple(s.finish(scale) for s in sums)
    return out[0] if len(out) == 1 else out


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


def _accumulate_in_process(X, y, kernel, mask, fraction, seed, tile_rows):
    """NumPy input: blocks of whole tiles on a thread pool, one BLAS thread each.

    The same per-tile arithmetic as a Dask pass (single-threaded BLAS: a
    multi-threaded BLAS may round differently), so NumPy and dask input give
    bitwise identical statistics, and the cores are still all used.
    """
    from concurrent.futures import ThreadPoolExecutor

    n = X.shape[0]
    threads = max(1, min(os.cpu_count() or 1, -(-n // tile_rows)))
    block = tile_rows * -(-n // (tile_rows * threads))  # whole tiles per thread
    groups = 1 if (mask is None and fraction is None) else 2

    def run(start: int):
        stop = min(start + block, n)
        part_y = None if y is None else y[start:stop]
        part_mask = None if mask is None else mask[start:stop]
        sums, fragments = _chunk_task(X[start:stop], part_y, part_mask, kernel, start, n, fraction, seed, tile_rows, 1, groups)
        assert not fragments  # blocks are whole tiles
        return sums

    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(run, range(0, n, block)))
    return _finish(_merge(*parts), kernel.scale)


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
    lanes: int | None = None,
) -> FeatureStats | tuple[FeatureStats, FeatureStats]:
    """One pass over ``X`` accumulating the statistics of the features ``z(X)``.

    Each row chunk is one task (on the worker that holds or reads the chunk)
    that adds its rows into a running sum: its own, or, for chunks already
    held by the cluster, the sum of its ``lane`` (a chain of chunks on one
    worker), so each worker accumulates locally and only one partial per lane
    is shipped. The partials are tree-reduced. The N x M feature matrix
    is never formed: a task holds one tile of features. Per-block arithmetic
    runs in the feature dtype; sums are float64.

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
        Fan-in of the tree reduction. By default the largest fan-in up to
        ``get_options().split_every`` whose partials fit in 32 MiB (a partial
        holds about ``8 M^2`` bytes per group of rows: compensated float64
        sums of the Gram's upper triangle).
    lanes : int, optional
        Number of chains of chunks, each with one running sum; chunk ``i``
        goes to lane ``i mod lanes``. By default, chunks of an array persisted
        on a distributed cluster are chained on the worker holding them (two
        lanes per thread), and other arrays get one independent task per chunk
        (as with ``lanes`` equal to the number of chunks).

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
        tile_rows = _default_tile_rows(kernel)
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
        mask = None
        if split is not None:
            mask = np.asarray(split.compute() if is_dask(split) else split).reshape(-1)
            if mask.shape[0] != n:
                raise ValueError(f"split has {mask.shape[0]} rows but X has {n}")
        return _accumulate_in_process(X, None if y is None else np.asarray(y), kernel, mask, fraction, split_seed, tile_rows)

    X = check_dask_matrix(X, n_features=kernel.n_features_in)
    chunks = X.chunks[0]
    n = X.shape[0]
    x_blocks = list(X.to_delayed().ravel())
    y_blocks = _as_row_blocks(y, chunks, "y", n) if y_given else [None] * len(x_blocks)
    m_blocks = _as_row_blocks(split, chunks, "split", n) if split is not None else [None] * len(x_blocks)
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(int)
    kernel_d = _shipped(kernel)
    groups = 1 if (fraction is None and split is None) else 2
    # fresh keys on every call: a pass is a pass, never a lookup of a result
    # still held by the scheduler from an earlier call
    task = dask.delayed(_chunk_task, pure=False, nout=2)
    # Chunks are chained into lanes, one running sum per lane continued in place
    # by its next chunk: one partial per lane (not per chunk) is allocated,
    # shipped and merged, and a lane stays on the worker holding its sum.
    lane_of = _lanes(X, lanes)
    lane_sums: list = [None] * (max(lane_of) + 1)
    fragments = []
    for i, (xb, yb, mb, s) in enumerate(zip(x_blocks, y_blocks, m_blocks, starts)):
        j = lane_of[i]
        lane_sums[j], frags = task(
            xb, yb, mb, kernel_d, int(s), n, fraction, split_seed, tile_rows, opts.blas_threads, groups, lane_sums[j]
        )
        fragments.append(frags)
    parts = [p for p in lane_sums if p is not None]
    # tiles cut by chunk boundaries, and the chunks holding their pieces
    holders: dict[int, list[int]] = {}
    for i, (s, c) in enumerate(zip(starts, chunks)):
        for lo, hi in _tile_grid(int(s), int(s) + c, tile_rows):
            t = lo // tile_rows
            if not (lo == t * tile_rows and hi == min((t + 1) * tile_rows, n)):
                holders.setdefault(t, []).append(i)
    fixup = dask.delayed(_fixup_task, pure=False)
    for t, owners in sorted(holders.items()):
        parts.append(fixup(t, kernel_d, tile_rows, opts.blas_threads, groups, *[fragments[i] for i in owners]))
    fan_in = split_every or _fan_in(kernel.n_components, groups, opts.split_every)
    merge = dask.delayed(_merge, pure=False)
    while len(parts) > 1:
        parts = [merge(*parts[i : i + fan_in]) for i in range(0, len(parts), fan_in)]
    result = dask.delayed(_finish, pure=False)(parts[0], kernel.scale)
    show = opts.progress if progress is None else progress
    return compute(result, progress=show)

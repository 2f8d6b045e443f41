"""The statistics pass: per-tile Gram, sums and cross products of random features.

Pure functions on NumPy (or CuPy) blocks, and the :class:`~dxrf.engine.Pass`
that the engine runs over row chunks. One read of a chunk serves several
feature maps: each map's tiles follow its own global tile grid, and its sums
are its own, so every map's statistics are bitwise those of a pass with that
map alone.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from types import ModuleType

import numpy as np

from dxrf.core.buffers import thread_buffer
from dxrf.core.device import array_module, gram_into, kernel_on, to_host
from dxrf.stats.compensated import CompensatedSums, packed_size
from dxrf.engine import Pass, Rows, block_groups, check_block, check_columns, group_rows
from dxrf.kernels.kernel import FeatureKernel
from dxrf.core.options import Options

__all__ = [
    "TileWorker", "StatsConfig", "stats_pass", "default_tile_rows", "check_stats_block", "check_weight_block",
    "wide_products", "WIDE_WORK", "WIDE_MAX_FEATURES", "tile_timings",
]

# A tile's features are made a slab of about _SLAB_BYTES at a time (so that a slab mostly
# stays in a core's cache while it is projected, activated and summed). A slab's column sums accumulate in the tile's dtype: at most this many rows,
# no more than BLAS's own float32 accumulation in the syrk, which adds panels of
# a few hundred rows into its float32 result.
_SLAB_BYTES = 2**20
_SLAB_MAX_ROWS = 1024
# ... but at least this many rows: BLAS packs the projection's d x M matrix for every slab,
# which at 32 rows (M = 4000 in float64) cost as much as a third of the products (MNIST
# kernel values: 0.91 s a 5000-row tile at 32 rows, 0.64 s at 256; Fourier features alike)
_SLAB_MIN_ROWS = 256

# A pass over N rows of float32 features with N M (M + d) <= WIDE_WORK multiply-adds
# (the Gram's and the projection's) accumulates their products in float64: at
# most ~0.05 s of float64 BLAS on one core, small against a pass's own overhead,
# and the statistics are then exact products of the features transform() makes
# (DESIGN.md, "Precision of the pass"). WIDE_MAX_FEATURES bounds the float64 tile
# Gram a thread holds (128 MiB).
WIDE_WORK = 2**30
WIDE_MAX_FEATURES = 4096


def wide_products(kernel: FeatureKernel, n_rows: int) -> bool:
    """Whether a pass over ``n_rows`` rows (all of X's) accumulates ``kernel``'s products in float64.

    True for float32 features when ``n_rows * M * (M + d) <= WIDE_WORK`` and
    ``M <= WIDE_MAX_FEATURES`` (``M`` the base features, ``d`` the input
    columns). The choice depends on the whole pass only, never on a block,
    so the statistics stay bitwise identical across chunkings.
    """
    m, d = kernel.n_base, kernel.n_features_in
    return kernel.dtype == np.float32 and m <= WIDE_MAX_FEATURES and int(n_rows) * m * (m + d) <= WIDE_WORK



class TileWorker:
    """Per-task buffers and the statistics of whole tiles of rows.

    ``sums`` continues the compensated sums of earlier chunks of the same lane
    when given (they are updated in place), else starts new ones. ``wide``
    (float32 kernels, see :func:`wide_products`): the features are
    :meth:`~dxrf.kernels.kernel.FeatureKernel.base_rowwise`'s, held and
    multiplied in float64.
    """

    def __init__(
        self,
        kernel: FeatureKernel,
        tile_rows: int,
        n_targets: int | None,
        groups: int,
        sums: list | None = None,
        xp: ModuleType = np,
        weighted: bool = False,
        wide: bool = False,
    ) -> None:
        m = kernel.n_base  # the statistics are of the base features (a Nystroem map's kernel values)
        self.xp = xp
        self.kernel = kernel_on(kernel, xp)
        self.wide = bool(wide) and kernel.dtype == np.float32
        dtype = np.dtype(np.float64) if self.wide else kernel.dtype
        if xp is np:
            self.buf = thread_buffer("tile", (tile_rows, m), dtype)
            self.gram = thread_buffer("gram", (m, m), dtype)
        else:
            self.buf = xp.empty((tile_rows, m), dtype=dtype)
            self.gram = xp.zeros((m, m), dtype=dtype)
            self.ones = xp.ones(tile_rows, dtype=dtype)
        self.sums = sums if sums is not None else [CompensatedSums(m, n_targets, xp, weighted) for _ in range(groups)]

    def _base(self, X: np.ndarray, Z: np.ndarray) -> None:
        """The base features of ``X`` into ``Z`` (float64 of row-independent float32 ones when wide)."""
        if self.wide:
            Z[...] = self.kernel.base_rowwise(X)
        else:
            self.kernel.base(X, out=Z)

    def _features_in_slabs(self, X: np.ndarray, Z: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        """Fill ``Z`` with the raw features of ``X``, a cache-sized slab of rows at a time.

        Each slab's projection, activation and column sum run while it is in
        the core's L2 cache, so the tile crosses memory once on its way to the
        syrk. Returns the column sums in float64: each slab (at most
        ``_SLAB_MAX_ROWS`` rows) is summed by BLAS in the tile's dtype, no less
        accurate than the syrk's own accumulation, and the slabs' sums in
        float64. Together 1-2% of a tile at M = 2000, against 4% for separate
        sweeps (the float64 reduction alone was 12 ms of 455). With row
        weights ``w`` (in the tile's dtype) the sums are ``w @ Z`` by the same
        products (weights of ones give the unweighted sums bitwise).
        """
        n, m = Z.shape
        rows = min(_SLAB_MAX_ROWS, max(_SLAB_MIN_ROWS, _SLAB_BYTES // (m * Z.dtype.itemsize)))
        slabs = -(-n // rows)
        ones = thread_buffer("slab-ones", (rows,), Z.dtype)
        ones[...] = 1
        parts = thread_buffer("slab-sums", (slabs, m), Z.dtype)
        for i in range(slabs):
            a, b = i * rows, min(n, (i + 1) * rows)
            self._base(X[a:b], Z[a:b])
            np.matmul(ones[: b - a] if w is None else w[a:b], Z[a:b], out=parts[i])
        return parts.sum(axis=0, dtype=np.float64)

    def _device_column_sums(self, Z, wz=None):
        """A device tile's column sums (``wz @ Z`` with weights) in float64, by cuBLAS in the tile's dtype.

        As BLAS sums a host slab; a float64 reduction over the rows took
        0.29 ms of a 1.5 ms tile on an H100 at M = 2000.
        """
        return ((self.ones[: Z.shape[0]] if wz is None else wz) @ Z).astype(np.float64)

    def add_tile(self, X: np.ndarray, Y: np.ndarray | None, mask: np.ndarray | None, w: np.ndarray | None = None) -> None:
        """Add one global tile to its groups.

        ``mask`` None: all rows to group 0; boolean: train rows (False) to
        group 0, validation rows (True) to group 1; integer: row ``i`` to
        group ``mask[i]`` (the folds of a k-fold pass; -1: no group, the
        rows a subsampled pass leaves out). ``w``: float64 row weights, or
        None (every row weighs 1).
        """
        if mask is None:
            self._add_rows(0, X, Y, w)
            return
        for g, rows in enumerate(group_rows(mask, len(self.sums))):
            if rows.any():
                self._add_rows(g, X[rows], None if Y is None else Y[rows], None if w is None else w[rows])

    def _add_rows(self, g: int, X: np.ndarray, Y: np.ndarray | None, w: np.ndarray | None = None) -> None:
        n = X.shape[0]
        if n == 0:
            return
        sums = self.sums[g]
        Z = self.buf[:n]
        xp = self.xp
        wz = None if w is None else w.astype(Z.dtype)
        if xp is np:
            sums.add("sum", self._features_in_slabs(X, Z, wz))
        else:  # one launch per tile on a device
            self._base(X, Z)
            sums.add("sum", self._device_column_sums(Z, wz))
        if w is not None:
            # sum_n w_n z_n z_n^T as the syrk of sqrt(w) Z (multiplying by 1 is exact:
            # weights of ones give the unweighted Gram bitwise)
            root = xp.sqrt(w)
            Z *= root.astype(Z.dtype)[:, None]
            sums.add("wsum", w.sum(keepdims=True))
        gram_into(Z, self.gram)  # BLAS syrk on the host, cuBLAS syrk (upper triangle) on a device
        sums.add("gram", self.gram)
        if Y is not None:
            Yr = Y if w is None else Y * root[:, None]
            Yw = Y if w is None else Y * w[:, None]
            sums.add("cross", (Z.T @ Yr.astype(Z.dtype)).astype(np.float64))
            sums.add("ysum", Yw.sum(axis=0))
            sums.add("yy", Yw.T @ Y)
        sums.n += n


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm: buffers, BLAS, caches
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def tile_timings(kernel: FeatureKernel, X: np.ndarray, repeats: int = 7) -> dict[str, float]:
    """Median seconds of one tile of the statistics pass, whole and part by part, as the pass runs it.

    A profiling hook for benchmarks: the parts are the pass's own code on its
    own buffers, each timed alone after one warm-up call, so they stay what a
    pass runs as that code changes. The caller sets the BLAS threads (a pass
    task runs on one, e.g. under ``threadpoolctl.threadpool_limits(1)``).
    A CuPy ``X`` times the device path, each part waiting for the device
    before its clock stops.

    Parameters
    ----------
    kernel : FeatureKernel
        The feature map of the pass (e.g. ``RandomFourierFeatures(...).fit(...).kernel_``).
    X : numpy.ndarray or cupy.ndarray of shape (rows, d)
        One tile of inputs in the kernel's dtype; its row count is the tile's.
    repeats : int, default 7
        Timed calls per part.

    Returns
    -------
    dict of str to float
        ``"tile"``: the statistics of the whole tile (no targets, no
        weights); ``"features in slabs"``: its features and their column
        sums, slab by slab (on a device, ``"features"`` and ``"column
        sums"`` apart, each one launch per tile); ``"syrk"``: the Gram
        ``Z.T @ Z`` (on a device cuBLAS syrk, its upper triangle);
        ``"compensated add"``: adding that Gram to the running compensated
        sums.
    """
    xp = array_module(X)
    X = xp.ascontiguousarray(X, dtype=kernel.dtype)
    n, m = X.shape[0], kernel.n_base
    worker = TileWorker(kernel, n, None, 1, xp=xp)
    Z = worker.buf[:n]
    G = xp.zeros((m, m), Z.dtype)
    sums = CompensatedSums(m, None, xp)
    cuda = getattr(xp, "cuda", None) if xp is not np else None

    def timed(fn: Callable[[], object]) -> float:
        if cuda is None:
            return _median_seconds(fn, repeats)
        return _median_seconds(lambda: (fn(), cuda.Device().synchronize()), repeats)

    if xp is np:
        features = {"features in slabs": timed(lambda: worker._features_in_slabs(X, Z))}
    else:
        features = {"features": timed(lambda: worker._base(X, Z)),
                    "column sums": timed(lambda: worker._device_column_sums(Z))}
    return {
        "tile": timed(lambda: worker.add_tile(X, None, None)),
        **features,
        "syrk": timed(lambda: gram_into(Z, G)),
        "compensated add": timed(lambda: sums.add("gram", G)),
    }


# Tile sizes that divide 10 000, hence the usual chunk sizes (10k, 50k, 100k, 1M rows):
# with them no tile is cut by a chunk boundary and no fix-up task is needed.
_ROUND_TILES = (10_000, 5_000, 2_500, 2_000, 1_250, 1_000, 500, 250)


def default_tile_rows(kernel: FeatureKernel, options: Options) -> int:
    """Rows per tile of ``kernel``'s features from ``options``' ``tile_bytes`` and bounds (a round size if one fits)."""
    opts = options
    rows = opts.tile_bytes // (kernel.n_base * kernel.dtype.itemsize)
    rows = int(min(opts.max_tile_rows, max(opts.min_tile_rows, rows)))
    return next((t for t in _ROUND_TILES if opts.min_tile_rows <= t <= rows), rows)



def check_stats_block(X, y, kernel: FeatureKernel, row_offset: int):
    """Validate one block of rows and its targets (NumPy, or CuPy: the checks then run on the device)."""
    X = check_block(X, kernel.n_features_in, row_offset)
    return X, check_columns(y, X.shape[0], row_offset, "y")


def check_weight_block(w, n: int, row_offset: int):
    """One block of row weights as float64 of shape ``(n,)``, or None (checked as a whole by the caller)."""
    if w is None:
        return None
    xp = array_module(w)
    w = xp.asarray(w, dtype=np.float64).reshape(-1)
    if w.shape[0] != n:
        raise ValueError(f"sample_weight block at row {row_offset} has {w.shape[0]} weights; the X block has {n} rows")
    return w


class StatsConfig:
    """What every block of a statistics pass needs besides its rows: kernels and their tiles.

    ``grid_of[i]`` is the index in ``grids`` (rows per tile, distinct values)
    of kernel ``i``'s tile grid: kernels sharing a grid share the fix-up of
    each cut tile. ``fraction``/``seed`` give a hashed validation split,
    ``folds``/``seed`` hashed folds; ``groups`` is the number of row groups
    summed apart: ``folds`` with folds, 2 with a split (train, validation),
    else 1. ``sample`` ``(fraction, seed)`` restricts the pass to a hashed
    subsample of the rows (the others are read but their features never
    computed). ``weighted``: the pass carries a column of row weights.
    ``n_rows``: the rows of X, which decide for each kernel whether its
    products are accumulated in float64 (``wide[i]``, :func:`wide_products`).
    """

    def __init__(self, kernels, tile_rows, fraction, seed, groups, folds=None, sample=None, weighted=False,
                 n_rows=None) -> None:
        self.kernels = tuple(kernels)
        self.grids = tuple(sorted(set(tile_rows)))
        self.grid_of = tuple(self.grids.index(t) for t in tile_rows)
        self.tile_rows = tuple(tile_rows)
        self.fraction = fraction
        self.seed = seed
        self.groups = groups
        self.folds = folds
        # (fraction, seed) of a hashed row subsample, or None: every row
        self.sample = sample
        self.weighted = bool(weighted)
        self.wide = tuple(n_rows is not None and wide_products(k, n_rows) for k in self.kernels)

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes for k in self.kernels)

    def __dask_tokenize__(self) -> tuple:
        from dask.base import tokenize

        return ("dxrf-stats-config", tokenize(self.kernels), self.tile_rows, self.fraction, self.seed, self.groups,
                self.folds, self.sample, self.weighted, self.wide)


def _stats_block(X, columns, rows: Rows, cfg: StatsConfig, running):
    """Add one row chunk's whole tiles, for every kernel, into the lane's running sums.

    Returns ``(sums, fragments)``: ``sums[i]`` the per-group compensated sums of
    kernel ``i``; ``fragments[(grid, t)]`` the rows of each tile cut by the
    chunk's boundaries (X is narrow, so they are small), joined by
    :func:`_stats_fixup` so every tile's Gram is computed from the same rows
    however X is chunked.
    """
    y, mask, weight = columns
    X, Y = check_stats_block(X, y, cfg.kernels[0], rows.start)
    xp = array_module(X)
    w = check_weight_block(weight, X.shape[0], rows.start)
    if w is not None and xp is not np:
        w = xp.asarray(w)
    mask = block_groups(rows.start, X.shape[0], mask, fraction=cfg.fraction, folds=cfg.folds, seed=cfg.seed,
                        sample=cfg.sample)
    k = None if Y is None else Y.shape[1]
    out = {} if running is None else running
    fragments: dict = {}
    for i, kernel in enumerate(cfg.kernels):
        # the lane's running sums continue in place; on a device they stay there from chunk
        # to chunk (sums that travelled between workers arrive as host sums and move back)
        lane = out.get(i)
        if lane is not None:
            lane = [s.on(xp) for s in lane]
        worker = TileWorker(kernel, cfg.tile_rows[i], k, cfg.groups, lane, xp, cfg.weighted, cfg.wide[i])
        g = cfg.grid_of[i]
        for lo, hi, t, whole in rows.tiles(cfg.tile_rows[i]):
            a, b = lo - rows.start, hi - rows.start
            part = (X[a:b], None if Y is None else Y[a:b], None if mask is None else mask[a:b],
                    None if w is None else w[a:b])
            if whole:
                if xp is not np and part[2] is not None:
                    part = part[:2] + (xp.asarray(part[2]),) + part[3:]
                worker.add_tile(*part)
            elif (g, t) not in fragments:  # fragments travel as host arrays; the fix-up runs on the host
                fragments[(g, t)] = (lo,) + tuple(None if r is None else to_host(r).copy() for r in part)
        out[i] = worker.sums
    return out, fragments


def _stats_fixup(key, cfg: StatsConfig, *fragment_maps):
    """Sum one tile whose rows were split between consecutive chunks, for every kernel on its grid."""
    g, _ = key
    pieces = sorted((fm[key] for fm in fragment_maps if key in fm), key=lambda p: p[0])
    X = np.concatenate([p[1] for p in pieces])
    Y = None if pieces[0][2] is None else np.concatenate([p[2] for p in pieces])
    mask = None if pieces[0][3] is None else np.concatenate([p[3] for p in pieces])
    w = None if pieces[0][4] is None else np.concatenate([p[4] for p in pieces])
    out = {}
    for i, kernel in enumerate(cfg.kernels):
        if cfg.grid_of[i] == g:
            worker = TileWorker(kernel, cfg.tile_rows[i], None if Y is None else Y.shape[1], cfg.groups,
                                weighted=cfg.weighted, wide=cfg.wide[i])
            worker.add_tile(X, Y, mask, w)
            out[i] = worker.sums
    return out


def _merge_groups(total: list, other: list) -> list:
    for acc, part in zip(total, other):
        acc.merge(part)
    return total


def _stats_merge(*parts: dict) -> dict:
    """Add partials kernel by kernel (order does not matter).

    The first partial is updated in place: each partial has exactly one
    consumer (this merge) and fresh keys, and copying it would double the
    memory of the largest objects in the pass (about 8 M^2 bytes per group).
    """
    total = parts[0]
    for p in parts[1:]:
        for i, sums in p.items():
            if i in total:
                _merge_groups(total[i], sums)
            else:
                total[i] = sums
    return total


def _stats_finish(total: dict, cfg: StatsConfig) -> list:
    """Per kernel, its statistics, or the tuple of its groups' (train and validation, or folds)."""
    out = []
    for i, kernel in enumerate(cfg.kernels):
        done = tuple(s.finish(kernel.scale, kernel.transform_matrix) for s in total[i])
        out.append(done[0] if len(done) == 1 else done)
    return out


def partial_bytes(cfg: StatsConfig) -> int:
    """Bytes of one partial: hi and lo float64 packed Grams per group and kernel."""
    return sum(cfg.groups * 2 * 8 * packed_size(k.n_base) for k in cfg.kernels)


def stats_pass(cfg: StatsConfig) -> Pass:
    """The engine's description of a statistics pass over the kernels of ``cfg``."""
    return Pass(
        block=_stats_block,
        merge=_stats_merge,
        finish=_stats_finish,
        fixup=_stats_fixup,
        tile_grids=cfg.grids,
        partial_bytes=partial_bytes(cfg),
        chained=True,
    )

"""The statistics pass: :func:`accumulate`, the per-block statistics and the checks of a pass's arguments.

A pass maps every row chunk ``X_b`` (with its targets ``Y_b``) to partial
statistics ``(Z_b^T Z_b, Z_b^T Y_b, sum z, sum y, Y_b^T Y_b, n_b)`` with
``Z_b = z(X_b)`` never leaving the task that made it, and sums the partials by
a tree reduction. Everything later (leverage scores, ridge paths, validation
errors) is small dense algebra on the M x M result.
"""


from __future__ import annotations

import numbers

import dask.array as da
import numpy as np

from dxrf.core.blas import blas_limit
from dxrf.core.memory import check_pass, checked_pass, local_threads
from dxrf.core.options import Options, resolve_options
from dxrf.core.validation import (
    check_dask_matrix,
    check_fraction,
    check_int,
    check_not_sparse,
    check_pass_options,
    check_seed,
    is_dask,
)
from dxrf.engine import fold_labels, hashed_split, run_pass, tile_grid
from dxrf.kernels.kernel import FeatureKernel
from dxrf.core.weights import check_sample_weight
from dxrf.stats.feature_stats import FeatureStats
from dxrf.stats.tiles import (
    StatsConfig,
    TileWorker,
    check_stats_block,
    default_tile_rows,
    partial_bytes,
    stats_pass,
    wide_products,
)

__all__ = ["accumulate", "block_stats", "check_split", "hashed_split", "resolve_kernel"]


# -- the per-block kernel ------------------------------------------------------


def block_stats(
    X: np.ndarray,
    y: np.ndarray | None,
    kernel: FeatureKernel,
    mask: np.ndarray | None = None,
    *,
    tile_rows: int | None = None,
    blas_threads: int | None = None,
    row_offset: int = 0,
    sample_weight: np.ndarray | None = None,
    total_rows: int | None = None,
    options: Options | None = None,
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
        Rows per tile ``T``; by default from ``options``.
    blas_threads : int, optional
        Limit BLAS threads for this call (``None`` leaves them alone).
    row_offset : int
        Global index of the first row.
    sample_weight : ndarray of shape (n,), optional
        Row weights (see :func:`accumulate`).
    total_rows : int, optional
        Rows of the whole pass this block belongs to (default: the block's):
        they decide whether float32 features' products are accumulated in
        float64 (:func:`dxrf.stats.tiles.wide_products`), as in :func:`accumulate`.
    options : Options, optional
        Options giving the default ``tile_rows`` (default: those of
        :func:`dxrf.get_options` at this call).

    Returns
    -------
    FeatureStats, or (FeatureStats, FeatureStats) when ``mask`` is given.
    """
    tile_rows = check_int(tile_rows, "tile_rows", allow_none=True)
    blas_threads = check_int(blas_threads, "blas_threads", allow_none=True)
    row_offset = check_int(row_offset, "row_offset", low=0)
    total_rows = check_int(total_rows, "total_rows", low=1, allow_none=True)
    check_not_sparse(X)
    X, Y = check_stats_block(X, y, kernel, row_offset)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool).reshape(-1)
        if mask.shape[0] != X.shape[0]:
            raise ValueError(f"split mask has {mask.shape[0]} rows; X block has {X.shape[0]}")
    w = check_sample_weight(sample_weight, X.shape[0])
    tile_rows = tile_rows or default_tile_rows(kernel, resolve_options(options))
    limiter = blas_limit(blas_threads)
    with limiter:
        worker = TileWorker(kernel, tile_rows, None if Y is None else Y.shape[1], 1 if mask is None else 2,
                            weighted=w is not None, wide=wide_products(kernel, total_rows or X.shape[0]))
        for lo, hi in tile_grid(row_offset, row_offset + X.shape[0], tile_rows):
            a, b = lo - row_offset, hi - row_offset
            worker.add_tile(X[a:b], None if Y is None else Y[a:b], None if mask is None else mask[a:b],
                            None if w is None else w[a:b])
    out = tuple(s.finish(kernel.scale, kernel.transform_matrix) for s in worker.sums)
    return out[0] if mask is None else out


# -- the pass -----------------------------------------------------------------------


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



def check_split(
    split: object, folds: object, X: object, options: Options
) -> tuple[float | None, object, int | None, int]:
    """The row groups of a pass over the (checked) ``X``: ``(fraction, column, hashed_folds, groups)``.

    From ``split`` (a fraction in (0, 1) or a boolean mask) or ``folds`` (an
    integer k, or per-row fold labels: :func:`dxrf.engine.fold_labels`):
    ``column`` is the per-row mask or labels (NumPy when X is), and
    ``groups`` the number of row groups the pass sums apart. ``options``
    are the pass's (dask fold labels cost one small pass of their own).
    """
    if folds is not None and split is not None:
        raise ValueError("give either split (a hold-out) or folds (k-fold), not both")
    n = int(X.shape[0])
    if hasattr(folds, "shape"):
        labels, k = fold_labels(folds, n, local=not is_dask(X), options=options)
        return None, labels, None, k
    folds = check_int(folds, "folds", low=2, allow_none=True,
                      what="an integer of at least 2 or an integer array of per-row fold labels")
    if folds is not None:
        return None, None, folds, folds
    if split is None:
        return None, None, None, 1
    if not hasattr(split, "shape"):
        return check_fraction(split, "split", what="a fraction in (0, 1) or a boolean mask"), None, None, 2
    if np.dtype(split.dtype) != np.dtype(bool):
        raise TypeError(f"split mask must be boolean, got dtype {split.dtype}")
    if not is_dask(X):
        split = np.asarray(split.compute() if is_dask(split) else split).reshape(-1)
        if split.shape[0] != n:
            raise ValueError(f"split has {split.shape[0]} rows but X has {n}")
    return None, split, None, 2


def _check_maps(features: object, X: np.ndarray | da.Array) -> tuple[list, bool]:
    """(the kernels of the feature maps, whether a list of maps was given): maps that agree on ``d``."""
    if features is None:
        raise ValueError("features is required: pass a feature map such as RandomFourierFeatures(...)")
    many = isinstance(features, (list, tuple))
    maps = list(features) if many else [features]
    if not maps:
        raise ValueError("features is an empty list: pass at least one feature map")
    kernels = [resolve_kernel(f, X) for f in maps]
    d = {k.n_features_in for k in kernels}
    if len(d) > 1:
        raise ValueError(f"the feature maps expect different numbers of input columns: {sorted(d)}")
    return kernels, many


def _check_subsample(subsample: float | None, subsample_seed: int) -> tuple[float, int] | None:
    """The hashed row sample (fraction kept, seed), or None to keep every row without hashing."""
    if subsample is None:
        return None
    subsample_seed = check_seed(subsample_seed, "subsample_seed")
    # 1 keeps every row: the hash is below 1 for all of them
    whole = isinstance(subsample, numbers.Real) and not isinstance(subsample, bool) and subsample == 1
    keep = 1.0 if whole else check_fraction(subsample, "subsample", what="a fraction in (0, 1]")
    return (float(keep), subsample_seed)


def _check_input(X: np.ndarray | da.Array, y: object, kernels: list) -> tuple[np.ndarray | da.Array, object]:
    """``X`` (a non-empty 2-d NumPy array, or a checked dask matrix) and NumPy ``y`` with as many rows."""
    if is_dask(X):
        return check_dask_matrix(X, n_features=kernels[0].n_features_in), y
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError("X is empty (0 rows)")
    n = X.shape[0]
    if y is not None:
        y = np.asarray(y)
        if y.ndim == 0 or y.shape[0] != n:
            raise ValueError(f"y has {y.shape[0] if y.ndim else 0} rows but X has {n}")
    return X, y


def _check_pass_memory(cfg: StatsConfig, kernels: list, groups: int, X: np.ndarray | da.Array) -> None:
    """Refuse, before the pass, statistics whose partials or result cannot fit in memory."""
    # the client receives a dense M x M Gram per map and group
    m = max(k.n_components for k in kernels)
    check_pass(
        partial_bytes(cfg), sum(8 * groups * k.n_components**2 for k in kernels),
        f"the statistics of {len(kernels)} feature map{'s' if len(kernels) > 1 else ''} of up to n_components={m} "
        f"features over {groups} row group{'s' if groups > 1 else ''} (n_candidates of a selector)",
        "use fewer features (n_components or n_candidates), fewer maps or fewer folds, or more memory",
        concurrency=local_threads(X),
    )


def accumulate(
    X: np.ndarray | da.Array,
    y: np.ndarray | da.Array | None = None,
    features: object = None,
    split: float | np.ndarray | da.Array | None = None,
    *,
    split_seed: int = 0,
    folds: int | None = None,
    subsample: float | None = None,
    subsample_seed: int = 0,
    progress: bool | None = None,
    tile_rows: int | None = None,
    split_every: int | None = None,
    lanes: int | None = None,
    sample_weight: np.ndarray | da.Array | None = None,
    options: Options | None = None,
) -> FeatureStats | tuple[FeatureStats, ...] | list:
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
    features : feature map or FeatureKernel, or a list of them
        A dxrf feature map (fitted, or unfitted and then fitted on ``X``).
        A list of K maps gives K results from one read of ``X``: each chunk
        is read once and every map's statistics are computed from it (only
        the block-diagonal statistics: no cross-map blocks). Each result is
        bitwise identical to ``accumulate`` with that map alone.
    split : float, bool array of shape (N,), or None
        Validation rows: a boolean (dask) array, True for validation, or a
        fraction in (0, 1) of rows chosen by a hash of the row index and
        ``split_seed`` (independent of chunking). With a split the result is
        a pair ``(train, validation)`` from the same pass.
    split_seed : int, default=0
        Seed of the hashed split, and of the hashed folds.
    folds : int or integer array of shape (N,), optional
        ``k >= 2``: every row goes to one of ``k`` folds by a hash of its
        global row index and ``split_seed`` (independent of chunking), and
        each fold's statistics are summed apart in this one pass. The result
        is then a tuple of ``k`` statistics; fold ``j``'s training statistics
        are ``sum(result) - result[j]`` (exact up to rounding: the sums are
        float64). An integer array (NumPy or dask; its chunks are aligned
        with X's rows by the engine) gives each row's fold instead, ``0 ..
        k - 1`` with ``k >= 2`` the largest label plus one (negative labels
        are refused; a fold without rows has statistics with ``n = 0``; dask
        labels with dask X cost one small pass over the labels for ``k``).
        Not together with ``split``.
    subsample : float, optional
        A fraction in (0, 1]: only rows whose hash of ``(row index,
        subsample_seed)`` falls below it are accumulated (about ``subsample *
        N`` rows, independent of chunking; the same hash as the split). The
        other rows are read but their features are never computed, so the
        pass costs ``subsample * N * M^2`` flops. Combines with ``split`` and
        ``folds`` (they then group the kept rows); give ``subsample_seed``
        apart from ``split_seed`` so the two are independent.
    subsample_seed : int, default=0
        Seed of the hashed subsample.
    progress : bool, optional
        Show a progress bar (default from :func:`dxrf.get_options`).
    tile_rows : int, optional
        Rows per feature tile inside a task (default: from ``tile_bytes``,
        for each map).
    split_every : int, optional
        Fan-in of the tree reduction. By default the largest fan-in up to
        ``options.split_every`` whose partials fit in 32 MiB (a partial
        holds about ``8 M^2`` bytes per group of rows and map: compensated
        float64 sums of the Gram's upper triangle).
    lanes : int, optional
        Number of chains of chunks, each with one running sum; chunk ``i``
        goes to lane ``i mod lanes``. By default, chunks of an array persisted
        on a distributed cluster are chained on the worker holding them (two
        lanes per thread), and other arrays get one independent task per chunk
        (as with ``lanes`` equal to the number of chunks).
    sample_weight : array of shape (N,), optional
        Row weights ``w_n >= 0`` (NumPy, or a dask array; its chunks are
        aligned with X's rows by the engine). Every sum is weighted,
        ``gram = sum_n w_n z_n z_n^T`` and so on, and ``n`` is ``sum_n w_n``
        (a float), so means divide by the total weight and an integer weight
        equals repeating the row (DESIGN section 2). Splits, folds and
        subsamples still hash row indices. Weights of ones give the
        unweighted statistics bitwise (with ``n`` a float).
    options : Options, optional
        Runtime options of this pass, resolved by a caller (an estimator's
        ``fit``); default: :func:`dxrf.get_options` at this call. ``progress``
        and ``split_every`` given here override them for this call (as the
        option, ``split_every`` caps the fan-in; given here, it is the fan-in).

    Returns
    -------
    FeatureStats, or a pair (train, validation) when ``split`` is given, or
    a tuple of ``k`` statistics with ``folds``; for a list of maps, a list of those, one
    per map.

    Notes
    -----
    NumPy input is processed in this process on a thread pool (one BLAS
    thread per block, the same arithmetic as a Dask task); dask input runs on
    the active scheduler: the distributed client if one exists, else dask's
    threads. Inside dask tasks BLAS is held to ``blas_threads`` threads to
    avoid oversubscribing the cores. The pass is :func:`dxrf.engine.run_pass`
    over :func:`dxrf.stats.tiles.stats_pass`.
    """
    split_every, lanes, progress, tile_rows = check_pass_options(
        split_every=split_every, lanes=lanes, progress=progress, tile_rows=tile_rows
    )
    # the one place this pass reads the global options: everything below gets `opts`
    opts = resolve_options(options, progress=progress)
    split_seed = check_seed(split_seed, "split_seed")
    check_not_sparse(X)
    check_not_sparse(y, "y")
    kernels, many = _check_maps(features, X)
    sample = _check_subsample(subsample, subsample_seed)
    X, y = _check_input(X, y, kernels)
    fraction, column, folds, groups = check_split(split, folds, X, opts)
    weight = check_sample_weight(sample_weight, int(X.shape[0]))
    tiles = [tile_rows or default_tile_rows(k, opts) for k in kernels]
    cfg = StatsConfig(kernels, tiles, fraction, split_seed, groups, folds, sample, weighted=weight is not None,
                      n_rows=int(X.shape[0]))
    _check_pass_memory(cfg, kernels, groups, X)
    with checked_pass():  # checked above: the engine does not check the partials again
        out = run_pass(
            stats_pass(cfg), X, (y, column, weight), (cfg,), options=opts, split_every=split_every, lanes=lanes,
            names=("y", "split" if split is not None else "folds", "sample_weight"),
        )
    return out if many else out[0]

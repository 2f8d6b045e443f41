"""Passes over (X, T): one :class:`_Spec` in, its finished sums out, through the pass engine.

A logistic pass is a :class:`dxrf.engine.Pass` whose blocks are
:func:`~.sums._block_sums` and whose partials are ``+``-merged;
:func:`dxrf.engine.run_pass` runs it in this process (NumPy input) or on
Dask. A fit makes many passes over the same data, so the runner keeps for
the whole fit what does not change between them: the thread pool of NumPy
passes, the shipped kernel and the labels placed on the cluster.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from dxrf.core.validation import is_dask
from dxrf.engine import LocalPool, Pass, Rows, check_block, run_pass, ship
from dxrf.engine.cache import FeatureCache, feature_cache, plan_cache
from dxrf.engine.lanes import balanced
from dxrf.kernels.kernel import FeatureKernel
from dxrf.core.options import Options
from dxrf.core.progress import active_client
from dxrf.solvers.logistic.sums import _block_sums, _Final, _finalize, _Spec, _Sums, _tile_rows, block_features, cache_dtype


def _pass_block(
    X: np.ndarray, columns: tuple, rows: Rows, kernel: FeatureKernel, spec: _Spec, tile_rows: int, check: bool,
    cached: bool, running: object
) -> _Sums:
    # the global first row places the block in the Hessian row sample and in error messages
    T, W = columns
    return _block_sums(X, T, kernel, spec, tile_rows, row_offset=rows.start, check=check, weights=W, cached=cached)


def _merge(*parts: _Sums) -> _Sums:
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def _finish(sums: _Sums, kernel: FeatureKernel, *rest: object) -> _Final:
    return _finalize(sums, kernel)


def _partial_bytes(spec: _Spec, m: int) -> int:
    """Bytes of one partial of a pass of ``spec``: the reduction keeps groups of them under its cap."""
    ng, nh, nv = spec.grad.size, spec.hess.size, spec.hv.size
    return 8 * (ng * (m + 2) + nh * (m + 1) ** 2 + spec.steps.size * spec.line.size + nv * (m + 1))


class _PassRunner:
    """Runs passes over (X, T): in this process for NumPy input, on the scheduler for dask.

    ``count`` is the number of passes made. ``multinomial``: one solver whose
    point is the (M + 1, K) matrix of the softmax over all K label columns.
    ``wide``: float32 features' products in float64 (a small fit, see
    :func:`dxrf.stats.tiles.wide_products`). NumPy X is checked once here
    (its blocks are then trusted); dask blocks are checked in their tasks.
    The first pass computes the features once into the feature cache when
    ``options.cache_features`` says so (:mod:`dxrf.engine.cache`; ``plan`` says
    what was chosen); later passes read them. :meth:`close` releases them.
    """

    def __init__(
        self,
        X: np.ndarray | da.Array,
        T: np.ndarray | da.Array,
        kernel: FeatureKernel,
        options: Options,
        precise: bool = False,
        hess_period: int = 1,
        weights: np.ndarray | da.Array | None = None,
        multinomial: bool = False,
        wide: bool = False,
    ) -> None:
        self.kernel = kernel
        self.wide = bool(wide)
        self.precise = precise
        self.hess_period = hess_period
        self.multinomial = multinomial
        # label columns per solver: one binary problem each, or all K for one softmax
        self.width = int(T.shape[1]) if multinomial else 1
        self.options = options  # resolved once by the fit: every pass of it runs with these
        self.count = 0
        self.tile_rows = _tile_rows(kernel, options)
        self.X, self.T, self.W = X, T, weights
        self._pool: LocalPool | None = None
        self._kernel: object = kernel
        n = int(X.shape[0])
        self.cache_dtype = cache_dtype(kernel, precise, self.wide)
        self.plan = plan_cache(options.cache_features, n, kernel.n_components, self.cache_dtype.itemsize,
                               dask_input=is_dask(X), fraction=options.cache_fraction)
        self._cache: FeatureCache | None = None  # made by the first pass
        if not is_dask(X):
            check_block(X, kernel.n_features_in, 0)
            # kept for the whole fit: its threads keep their scratch buffers between passes
            self._pool = LocalPool()
            return
        k = T.shape[1]
        self.X = X = balanced(X)  # as every pass would cut it: labels and weights are aligned once
        chunks = X.chunks[0]
        T = T.rechunk((chunks, (k,))) if is_dask(T) else da.from_array(T, chunks=(chunks, (k,)), name=False)
        client = active_client()
        W = weights
        if W is not None:
            W = W.rechunk((chunks,)) if is_dask(W) else da.from_array(W, chunks=(chunks,), name=False)
        if client is not None:
            # labels and weights are small: compute them (or ship NumPy ones) once, not in every pass
            T = client.persist(T)
            W = None if W is None else client.persist(W)
        self.T, self.W = T, W
        # shipped once per fit: every pass references the same handle
        self._kernel = ship(kernel)

    def close(self) -> None:
        """Release the feature cache, the thread pool of NumPy passes, the shipped kernel and the labels on the cluster."""
        try:
            if self._cache is not None:
                self._cache.release()
        finally:
            self._cache = None
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            self._kernel = self.T = self.W = None

    def _source(self) -> tuple[np.ndarray | da.Array, bool]:
        """What the passes read (X, or the cached features) and whether it is features."""
        if self._cache is None:
            in_process = not is_dask(self.X)
            self._cache = feature_cache(
                self.X, block_features,
                (self._kernel, self.tile_rows, self.wide and self.kernel.dtype != np.float64, not in_process),
                self.kernel.n_components, self.cache_dtype, plan=self.plan, options=self.options,
                unit_rows=self.tile_rows, pool=self._pool,
            )
        return self._cache.source(self.X), self._cache.cached

    def __call__(self, spec: _Spec) -> _Final:
        self.count += 1
        in_process = not is_dask(self.X)
        source, cached = self._source()
        step = Pass(
            block=_pass_block,
            merge=_merge,
            finish=_finish,
            unit_rows=self.tile_rows,  # in-process blocks of whole tiles
            partial_bytes=_partial_bytes(spec, self.kernel.n_components),
        )
        # a fresh key for every pass's spec: specs of different passes may tokenize alike
        shipped = spec if in_process else ship(spec, pure=False)
        return run_pass(
            step,
            source,
            (self.T, self.W),
            (self._kernel, shipped, self.tile_rows, not in_process, cached),
            options=self.options,
            pool=self._pool,
            names=("labels T", "sample_weight"),
        )

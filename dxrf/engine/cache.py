"""The feature cache of iterative fits: each row block's features computed once, kept for the fit.

A one-pass fit (statistics) computes the features of each tile inside its pass
and forgets them. An iterative fit (logistic and multinomial solvers, SGD
epochs, power iterations) makes many passes over the same rows with the same
features, so when the N x M feature matrix fits in a stated share of the
memory that would hold it, the fit computes it once and its passes read it:

- **NumPy input**: one array in this process, filled block by block on the
  fit's :class:`~dxrf.engine.run.LocalPool` (one BLAS thread per block, as the
  passes compute features);
- **dask input**: the feature blocks as a dask array with X's row chunks,
  persisted on the cluster. Each pass's task then runs where its feature block
  lives (the scheduler places a task by its largest input), so features never
  move. A worker lost mid-fit loses its blocks; the scheduler recomputes them
  from X by their lineage, the same function on the same rows, so the fit
  goes on to the same result.

The cache is a pure optimisation. ``block_features`` computes a block's
features tile by tile on the tile grid the uncached pass uses, with the same
function, so a pass reading them computes bitwise what it would have computed.
:meth:`FeatureCache.release` frees it; fits call it in ``finally`` (end of
fit, error, KeyboardInterrupt).

How a solver's pass uses it (the API): build ``cache = feature_cache(X, fn,
shared, n_out, dtype, plan=plan_cache(...), options=...)``, where
``fn(X_b, out, start, *shared)`` fills ``out`` with the features of the rows
``X_b`` (first global row ``start``) exactly as the pass would (tile by tile
from the block's first row); then run the passes over ``cache.source(X)`` with ``cache.cached`` in the pass's shared
arguments, and in the block function take ``X_b`` as the block's features when
it is true (``cache.source(X)`` is X itself when the plan recomputes).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np

from dxrf.core.blas import blas_limit
from dxrf.core.memory import format_bytes, memory_limit
from dxrf.core.options import Options
from dxrf.core.progress import active_client
from dxrf.engine.blocks import in_process_starts, row_starts
from dxrf.engine.lanes import balanced
from dxrf.engine.run import LocalPool
from dxrf.engine.ship import ship

__all__ = ["CachePlan", "FeatureCache", "plan_cache", "feature_cache", "cache_budget"]


@dataclasses.dataclass(frozen=True)
class CachePlan:
    """Whether a fit keeps its features, and why.

    Attributes
    ----------
    cached : bool
    estimate : int
        Bytes of the whole feature matrix (``N M itemsize``).
    budget : int or None
        Bytes the cache may take under ``"auto"`` (None when the setting forced the choice).
    setting : {"auto", True, False}
    reason : str or None
        Why ``"auto"`` declined whatever the budget (shown by :meth:`describe`).
    """

    cached: bool
    estimate: int
    budget: int | None
    setting: str | bool
    reason: str | None = None

    @property
    def status(self) -> str:
        """``"cached"`` or ``"recomputed"``: the fitted attribute ``feature_cache_``."""
        return "cached" if self.cached else "recomputed"

    def describe(self) -> str:
        """One line for a fit's summary."""
        why = (
            self.reason if self.reason is not None
            else f"cache_features={self.setting!r}" if self.budget is None
            else f"budget {format_bytes(self.budget)}"
        )
        return f"features {self.status} ({format_bytes(self.estimate)} of features; {why})"


def cache_budget(dask_input: bool, fraction: float) -> int:
    """Bytes the cache may take: ``fraction`` of the workers' memory limits together, or of this machine's memory.

    With a distributed client and dask input the cache is spread over the
    workers (each holds the blocks it computed), so the sum of their memory
    limits is what holds it; a worker without a limit counts as this
    machine's available memory. Otherwise it lives in this process.
    """
    client = active_client() if dask_input else None
    if client is not None:
        try:
            workers = list(client.scheduler_info().get("workers", {}).values())
        except Exception:  # noqa: BLE001 - a client that cannot answer: keep nothing
            return 0
        if workers:
            machine = memory_limit().nbytes
            return int(fraction * sum(int(w.get("memory_limit") or 0) or machine for w in workers))
    return int(fraction * memory_limit().nbytes)


def plan_cache(setting: str | bool, n_rows: int, n_features: int, itemsize: int, *, dask_input: bool,
               fraction: float) -> CachePlan:
    """Decide whether a fit keeps its ``n_rows x n_features`` features of ``itemsize`` bytes.

    ``setting``: True keeps them, False recomputes them in every pass,
    ``"auto"`` keeps them when they fit within :func:`cache_budget`.
    """
    estimate = int(n_rows) * int(n_features) * int(itemsize)
    if setting == "auto":
        budget = cache_budget(dask_input, fraction)
        return CachePlan(estimate <= budget, estimate, budget, "auto")
    return CachePlan(bool(setting), estimate, None, bool(setting))


def _fill_block(fn: Callable[..., None], blas_threads: int | None, X: np.ndarray, start: int, n_out: int,
                dtype: np.dtype, shared: tuple) -> np.ndarray:
    out = np.empty((X.shape[0], n_out), dtype=dtype)
    with blas_limit(blas_threads):
        fn(X, out, start, *shared)
    return out


class FeatureCache:
    """The features of one fit's rows, held for its passes (see the module documentation).

    ``cached`` is False when the plan recomputes: :meth:`source` then gives
    X itself. Use as a context manager, or call :meth:`release` in ``finally``.
    """

    def __init__(self, plan: CachePlan, data: np.ndarray | da.Array | None = None) -> None:
        self.plan = plan
        self._data = data

    @property
    def cached(self) -> bool:
        return self._data is not None

    def source(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """What the passes read: the cached features, or X when they are recomputed."""
        return X if self._data is None else self._data

    def release(self) -> None:
        """Free the cached blocks (on the workers: their futures are cancelled). Idempotent."""
        data, self._data = self._data, None
        if isinstance(data, da.Array):
            client = active_client()
            if client is not None:
                try:
                    client.cancel(data)
                except Exception:  # noqa: BLE001 - a closed client holds nothing any more
                    pass

    def __enter__(self) -> FeatureCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def feature_cache(
    X: np.ndarray | da.Array,
    fn: Callable[..., None],
    shared: Sequence[Any],
    n_out: int,
    dtype: object,
    *,
    plan: CachePlan,
    options: Options,
    unit_rows: int = 1,
    pool: Any = None,
    balance: bool = True,
) -> FeatureCache:
    """The features of X's rows for a fit's passes, computed once when ``plan`` says so.

    Parameters
    ----------
    X : ndarray or dask array of shape (N, d)
        Checked by the caller (NumPy) or inside ``fn`` (dask blocks).
    fn : callable
        ``fn(X_b, out, start, *shared)`` fills ``out`` (``(n_b, n_out)`` of
        ``dtype``) with the features of the rows ``X_b`` (global first row
        ``start``), computed as the uncached pass
        computes them for a block starting at ``X_b``'s first row.
    shared : sequence
        Read-only arguments of ``fn`` (shipped once on Dask).
    plan : CachePlan
        From :func:`plan_cache`; when it recomputes, nothing is computed here.
    options : Options
        ``blas_threads`` of the cache's tasks (those of the passes).
    unit_rows : int
        NumPy input: blocks start at multiples of this many rows (the passes'
        tile grid), so every tile is the one the pass would compute.
    pool : LocalPool, optional
        Threads for NumPy input (the fit's pool).
    balance : bool, default=True
        Dask input: cut the blocks as :func:`~dxrf.engine.lanes.balanced`
        cuts X for the passes; False keeps X's own chunks (passes run with
        ``balance=False``).
    """
    if not plan.cached:
        return FeatureCache(plan)
    dt = np.dtype(dtype)
    shared = tuple(shared)
    if not isinstance(X, da.Array):
        n = int(X.shape[0])
        out = np.empty((n, int(n_out)), dtype=dt)
        own = pool is None
        pool = pool or LocalPool()
        starts, size = in_process_starts(n, unit_rows, pool.threads)

        def fill(start: int) -> None:
            with blas_limit(1):  # as the in-process passes: one BLAS thread per block
                fn(X[start : start + size], out[start : start + size], start, *shared)

        try:
            pool.map(fill, starts)
        finally:
            if own:
                pool.close()
        return FeatureCache(plan, out)
    if balance:
        X = balanced(X)  # the chunks the uncached passes take: each block's features the same rows' company
    handle = tuple(ship(s) for s in shared)
    name = f"dxrf-features-{uuid.uuid4().hex}"
    task = dask.delayed(_fill_block, pure=False)
    blocks = [
        da.from_delayed(
            task(fn, options.blas_threads, xb, s, int(n_out), dt, handle, dask_key_name=f"{name}-{i}"),
            shape=(int(c), int(n_out)), dtype=dt,
        )
        for i, (xb, s, c) in enumerate(zip(X.to_delayed().ravel(), row_starts(X.chunks[0]), X.chunks[0]))
    ]
    Z = da.concatenate(blocks, axis=0) if len(blocks) > 1 else blocks[0]
    client = active_client()
    Z = client.persist(Z) if client is not None else Z.persist()
    return FeatureCache(plan, Z)

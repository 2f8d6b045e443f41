"""Running one pass: in this process on a thread pool (NumPy input) or on Dask.

A :class:`Pass` says *what* a pass computes, as pure functions on NumPy (or
CuPy) blocks; :func:`run_pass` decides *where*: which blocks, in which lanes,
which tiles need a fix-up, how partials are reduced, and which scheduler runs
them. Every pass of dxrf (statistics, logistic gradients and Hessians,
scoring, SGD's averaging and evaluation) goes through here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dask
import dask.array as da
import numpy as np

from dxrf.core.blas import blas_limit
from dxrf.core.memory import check_pass, format_bytes
from dxrf.core.validation import check_pass_options
from dxrf.core.options import Options
from dxrf.core.progress import compute
from dxrf.engine.blocks import Rows, aligned_blocks, cut_tiles, in_process_starts, lcm_rows, row_starts
from dxrf.engine.lanes import balanced, lane_plan
from dxrf.engine.reduce import fan_in as capped_fan_in
from dxrf.engine.reduce import tree_reduce
from dxrf.engine.ship import ship

__all__ = ["Pass", "LocalPool", "run_pass", "check_partial_memory"]


def _identity(partial: Any, *shared: Any) -> Any:
    return partial


@dataclasses.dataclass(frozen=True)
class Pass:
    """What one pass computes, as functions of blocks of rows.

    Attributes
    ----------
    block : callable
        ``block(X_b, columns_b, rows, *shared, running)`` with ``columns_b``
        the blocks of the per-row columns (``None`` where a column is absent),
        ``rows`` a :class:`~dxrf.engine.blocks.Rows`, and ``running`` the
        partial of the lane this block continues (always ``None`` unless
        ``chained``). Returns the block's partial, or ``(partial, fragments)``
        when ``tile_grids`` is not empty: ``fragments`` maps ``(grid, t)`` to
        the rows of tile ``t`` of that grid that the block does not hold whole.
    merge : callable
        ``merge(*partials)``: the partial of the union of rows. It may update
        and return its first argument (each partial has one consumer).
    finish : callable
        ``finish(partial, *shared)``: the pass's result, computed where the
        last merge ran.
    fixup : callable, optional
        ``fixup((grid, t), *shared, *fragment_maps)``: the partial of one tile
        whose rows were split between chunks.
    tile_grids : tuple of int
        Rows per tile of each global tile grid whose cut tiles need fix-ups.
    unit_rows : int
        In-process blocks are whole multiples of this many rows (tiles of
        every grid stay whole, so no fix-up is needed there).
    partial_bytes : int
        Bytes one partial holds: the reduction's fan-in keeps a group of
        partials under :data:`~dxrf.engine.reduce.MERGE_BYTES`.
    chained : bool
        Blocks may continue a running partial: chunks held by the cluster are
        chained on their worker (lanes), one partial per lane.
    """

    block: Callable[..., Any]
    merge: Callable[..., Any]
    finish: Callable[..., Any] = _identity
    fixup: Callable[..., Any] | None = None
    tile_grids: tuple[int, ...] = ()
    unit_rows: int = 1
    partial_bytes: int = 0
    chained: bool = False


class LocalPool:
    """Threads for in-process passes, kept across the passes of one fit.

    Each thread keeps its scratch buffers between tasks, so a solver making
    many passes over NumPy input holds one pool for its whole fit and closes
    it (or uses it as a context manager) at the end.
    """

    def __init__(self, threads: int | None = None) -> None:
        self.threads = max(1, threads or os.cpu_count() or 1)
        self._pool: ThreadPoolExecutor | None = None

    def map(self, fn: Callable, items: Sequence) -> list:
        if len(items) == 1:
            return [fn(items[0])]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="dxrf-pass")
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _call_block(spec: Pass, blas_threads: int | None, X, rows, shared, running, *columns):
    with blas_limit(blas_threads):
        return spec.block(X, columns, rows, *shared, running)


def _call_fixup(spec: Pass, blas_threads: int | None, key, shared, *fragment_maps):
    with blas_limit(blas_threads):
        return spec.fixup(key, *shared, *fragment_maps)


def _call_finish(spec: Pass, partial, *shared):
    return spec.finish(partial, *shared)


def _run_in_process(spec: Pass, X: np.ndarray, columns: Sequence, shared: tuple, pool: LocalPool | None) -> Any:
    # Blocks of whole tiles on a thread pool with one BLAS thread each: the same
    # per-tile arithmetic as a Dask pass (a multi-threaded BLAS may round
    # differently), so NumPy and dask input give the same results.
    n = X.shape[0]
    own = pool is None
    pool = pool or LocalPool()
    starts, size = in_process_starts(n, lcm_rows(spec.tile_grids) * spec.unit_rows, pool.threads)

    def run(start: int) -> Any:
        stop = min(start + size, n)
        cols = tuple(None if c is None else c[start:stop] for c in columns)
        out = _call_block(spec, 1, X[start:stop], Rows(start, stop, n, start // size), shared, None, *cols)
        if spec.tile_grids:
            out, fragments = out
            assert not fragments, "in-process blocks are whole tiles"
        return out

    try:
        parts = pool.map(run, starts)
    finally:
        if own:
            pool.close()
    total = parts[0] if len(parts) == 1 else spec.merge(*parts)
    return spec.finish(total, *shared)


def check_partial_memory(partial_bytes: int, concurrency: int = 1) -> None:
    """Refuse a pass whose partials cannot fit the smallest worker, or this machine.

    A worker holds at least two partials at once (a lane's running sums and
    the partial it merges), so with a distributed client a pass whose
    partial exceeds half of a worker's memory limit would only end in paused
    or killed workers. Without a client the pass runs in this process, with
    ``concurrency`` partials at once (one per thread) plus the one merged,
    against this machine's memory (:func:`dxrf.core.memory.memory_limit`). The
    statistics pass's partial is about ``8 M0^2`` bytes per feature map and
    row group.
    """
    if partial_bytes <= 0:
        return
    check_pass(
        partial_bytes, 0,
        f"this pass (partial results of {format_bytes(partial_bytes)}: about 8 M0^2 bytes per feature map and "
        "row group)",
        "use fewer candidates (n_candidates), fewer feature maps (bandwidths) or fewer row groups (folds), "
        "or workers with more memory",
        concurrency=concurrency,
    )


def run_pass(
    spec: Pass,
    X: np.ndarray | da.Array,
    columns: Sequence[object] = (),
    shared: Sequence[object] = (),
    *,
    options: Options,
    split_every: int | None = None,
    lanes: int | None = None,
    pool: LocalPool | None = None,
    names: Sequence[str] | None = None,
    balance: bool = True,
) -> Any:
    """Run one pass of ``spec`` over the rows of ``X`` and return ``spec.finish``'s result.

    Parameters
    ----------
    spec : Pass
    X : ndarray or dask array of shape (N, d)
        Checked by the caller; a dask array has one chunk along its columns.
    columns : sequence of arrays of N rows or None
        Per-row inputs (targets, masks, labels, weights), aligned with X's
        row chunks by the engine.
    shared : sequence
        Read-only arguments of every block (kernels, coefficients). On Dask
        they are shipped once per pass (:func:`~dxrf.engine.ship.ship`); give
        already shipped handles to reuse them across passes.
    options : Options
        The options resolved by the public function this pass serves
        (:func:`dxrf.core.options.resolve_options`): ``blas_threads`` of each
        task, ``split_every`` (the cap on the fan-in) and ``progress``. The
        global options are never read here.
    split_every : int, optional
        Fan-in of this pass's tree reduction, as given (default: the largest
        up to ``options.split_every`` whose group of partials fits the memory
        cap).
    lanes : int, optional
        Number of lanes of a chained pass (default: by placement).
    pool : LocalPool, optional
        Threads for NumPy input (default: a pool for this pass only).
    names : sequence of str, optional
        Names of the columns, for error messages.
    balance : bool, default=True
        Re-cut X's row chunks evenly over the cluster's threads
        (:func:`~dxrf.engine.lanes.balanced`). False keeps X's own chunks: for
        passes whose result depends on them (SGD's per-chunk work), which
        must not change with the number of threads.
    """
    split_every, lanes, _, _ = check_pass_options(split_every=split_every, lanes=lanes)
    if not isinstance(options, Options):
        raise TypeError(f"options must be a dxrf Options object, got {type(options).__name__}")
    opts = options
    shared = tuple(shared)
    names = list(names) if names is not None else [f"column {i}" for i in range(len(columns))]
    if not isinstance(X, da.Array):
        threads = pool.threads if pool is not None else LocalPool().threads
        check_partial_memory(spec.partial_bytes, min(threads, max(1, int(np.shape(X)[0]))))
        return _run_in_process(spec, X, [None if c is None else np.asarray(c) for c in columns], shared, pool)

    if lanes is None and balance:  # even work per thread (a persisted X stays where its chunks are held)
        X = balanced(X)
    chunks = X.chunks[0]
    check_partial_memory(spec.partial_bytes, min(os.cpu_count() or 1, len(chunks)))
    n = int(X.shape[0])
    x_blocks = list(X.to_delayed().ravel())
    col_blocks = [
        aligned_blocks(c, chunks, name) if c is not None else [None] * len(x_blocks) for c, name in zip(columns, names)
    ]
    shipped = tuple(ship(s) for s in shared)
    starts = row_starts(chunks)
    fragmented = bool(spec.tile_grids)
    task = dask.delayed(_call_block, pure=False, nout=2 if fragmented else None)
    if spec.chained:
        lane_of, move_to = lane_plan(X, lanes, move_below=spec.partial_bytes)
    else:
        lane_of, move_to = list(range(len(x_blocks))), [None] * len(x_blocks)
    running: list = [None] * (max(lane_of) + 1)
    fragments = []
    for i, (xb, s, c) in enumerate(zip(x_blocks, starts, chunks)):
        j = lane_of[i]
        # a held chunk given to another worker's lane: that worker runs it (the chunk moves, not the partial)
        where = dask.annotate(workers=[move_to[i]], allow_other_workers=True) if move_to[i] else nullcontext()
        with where:
            out = task(spec, opts.blas_threads, xb, Rows(s, s + int(c), n, i), shipped, running[j],
                       *(cb[i] for cb in col_blocks))
        if fragmented:
            running[j], frags = out
            fragments.append(frags)
        else:
            running[j] = out
    parts = [p for p in running if p is not None]
    if fragmented:
        fixup = dask.delayed(_call_fixup, pure=False)
        for g, tile_rows in enumerate(spec.tile_grids):
            for t, owners in sorted(cut_tiles(chunks, tile_rows).items()):
                parts.append(fixup(spec, opts.blas_threads, (g, t), shipped, *[fragments[i] for i in owners]))
    fan = split_every or capped_fan_in(spec.partial_bytes, opts.split_every)
    result = dask.delayed(_call_finish, pure=False)(spec, tree_reduce(parts, spec.merge, fan), *shipped)
    return compute(result, progress=opts.progress)

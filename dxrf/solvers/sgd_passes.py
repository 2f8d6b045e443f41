"""SGD with random features: the per-block kernels and the chains of tasks that run them.

Pure functions on NumPy blocks (a mini-batch step, a chunk of steps, the
evaluation of a state), and the runner of an epoch: in this process for
NumPy input, as a chain of tasks along the row chunks (sequential mode) or as
independent tasks averaged by the engine's tree reduction (averaging mode)
for dask input. The estimators are in :mod:`dxrf.learners.sgd`.

How it runs on Dask
-------------------
*Sequential mode* is the exact serial algorithm. Each pass visits the row
chunks in a seeded random order; chunk ``i`` is processed by ONE task that
takes the state (``v``, ``beta``, the update counter, the running training
loss) from the task of the previous chunk, so the state (``O(M k)`` numbers)
travels from worker to worker while the data stay where they are read or
held. Inside a chunk the training rows are shuffled and cut into
mini-batches; features are computed per tile of mini-batches into a reused
buffer, row by row (:meth:`FeatureKernel.rowwise`: a row's features do not
depend on the rows it shares a tile with), or, when the fit keeps them (the
feature cache, :mod:`dxrf.engine.cache`), gathered per mini-batch from the
chunk's features, computed once by the same function. The chain is
submitted in windows of a few chunks (two windows in
flight at most), so the chunks a pass loads ahead of the chain are bounded
however large the data.

*Averaging mode* runs SGD on every chunk in parallel from the same start and
averages the resulting ``v`` (weighted by training rows) after every pass:
one-shot parameter averaging per pass (Zinkevich et al., 2010).

Validation
----------
Validation rows (a hashed fraction, as in :func:`dxrf.stats.accumulation.hashed_split`,
or a mask) are never used for updates. Their error is computed in the same
pass and the same task as the training: before updating on its chunk's
training rows, each task adds the loss of the model as it was at the *start*
of the pass (the end of the previous pass, a value shared by all tasks of the
pass) on the chunk's validation rows. So pass ``p`` yields the validation
error of the iterate after ``p - 1`` passes at no extra read and with no task
that could pull a chunk to another worker; one last read of the data (only
its validation rows are featurised) evaluates the final iterate.

Where tasks run
---------------
The scheduler places a task where its largest input lives: a link of the
chain runs on the worker holding (or having just read) its chunk whenever the
chunk is larger than the state (``8 M k`` bytes), so the state moves and the
data do not. Shuffles are keyed by (seed, pass, chunk), so the result does not
depend on placement, on the number of workers or on the scheduler: a cluster
reproduces a threaded run bit for bit.
"""

from __future__ import annotations


import os
from typing import Any

import dask
import dask.array as da
import numpy as np
from scipy.special import expit

from dxrf.core.blas import blas_limit
from dxrf.core.buffers import thread_buffer
from dxrf.core.validation import (
    check_dask_matrix,
    check_finite_rows,
    is_dask,
)
from dxrf.kernels.kernel import FeatureKernel
from dxrf.core.options import Options
from dxrf.core.progress import active_client
from dxrf.engine import Pass, Rows, aligned_blocks, row_starts, run_pass, ship
from dxrf.engine.cache import CachePlan, FeatureCache, feature_cache
from dxrf.stats.accumulation import hashed_split


_SHUFFLE_SALT = 0x5344_4752  # keeps shuffles independent of the feature draw of the same seed
_VALIDATION_SEED = 0  # the hashed split of RandomFeatureModel._features_pass (same rows)
# features of the rows whose loss is summed at a time: the same tiles with and without the cache, so the same sums
_LOSS_TILE_BYTES = 16 << 20


# -- the numeric kernel: pure functions on NumPy blocks ---------------------------------


def _loss_grad(loss: str, S: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Derivative ``dl/ds`` and value of the loss at scores ``S`` (both (n, k))."""
    if loss == "squared":
        R = S - Y
        return R, R * R  # reported as squared error; the update is the gradient of R^2 / 2
    margin = Y * S
    if loss == "hinge":
        active = margin < 1.0
        return np.where(active, -Y, 0.0), np.maximum(1.0 - margin, 0.0)
    return -Y * expit(-margin), np.logaddexp(0.0, -margin)


class _State:
    """What travels along the chain: the iterate and its counters (O(M k))."""

    __slots__ = ("coef", "intercept", "loss_count", "loss_sum", "n_iter", "val_count", "val_sum")

    def __init__(
        self,
        coef: np.ndarray,
        intercept: np.ndarray,
        n_iter: int = 0,
        loss_sum: float = 0.0,
        loss_count: int = 0,
        val_sum: float = 0.0,
        val_count: int = 0,
    ) -> None:
        self.coef = coef
        self.intercept = intercept
        self.n_iter = n_iter
        self.loss_sum = loss_sum
        self.loss_count = loss_count
        self.val_sum = val_sum
        self.val_count = val_count

    def copy(self) -> _State:
        return _State(
            self.coef.copy(), self.intercept.copy(), self.n_iter, self.loss_sum, self.loss_count, self.val_sum, self.val_count
        )

    def fresh_counters(self) -> _State:
        """The same iterate with the per-pass sums (training and validation loss) at zero."""
        return _State(self.coef, self.intercept, self.n_iter)


class _Config:
    """The constants of a fit, shipped with every task (a few numbers)."""

    __slots__ = ("batch_size", "blas_threads", "cached", "fit_intercept", "fraction", "loss", "seed", "shuffle", "step",
                 "tile_rows")

    def __init__(self, **kw: Any) -> None:
        kw.setdefault("cached", False)
        for k in self.__slots__:
            setattr(self, k, kw[k])


def _features(X: np.ndarray, rows: np.ndarray, kernel: FeatureKernel, cached: bool, out: np.ndarray) -> np.ndarray:
    """The features of the rows ``rows`` of a block, in ``out``.

    ``cached``: ``X`` holds the block's features (the feature cache), read as
    they are. Otherwise they are computed by :meth:`FeatureKernel.rowwise`,
    whose every row is the same whatever rows it is computed with: the rows of
    a tile differ from pass to pass (each pass shuffles them), and the cache
    holds the features computed once, so both give the same bits.
    """
    if cached:
        return np.take(X, rows, axis=0, out=out)
    return kernel.rowwise(X[rows], out=out)


def cache_rows(X: Any, out: np.ndarray, start: int, kernel: FeatureKernel) -> None:
    """The feature cache's function (:func:`dxrf.engine.cache.feature_cache`): a block's rows checked, their features in ``out``."""
    X = np.asarray(X)
    check_finite_rows(X, "X", start)
    kernel.rowwise(X, out=out)


def _block_weights(W: Any, n: int) -> np.ndarray | None:
    # row weights, validated as a whole by the estimator; None: every row weighs 1
    return None if W is None else np.asarray(W, dtype=np.float64).reshape(n)


def _block_rows(X: Any, Y: Any, mask: Any, start: int, cfg: _Config) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    X = np.asarray(X)
    n = X.shape[0]
    Y = np.asarray(Y, dtype=np.float64).reshape(n, -1)
    if cfg.fraction is not None:
        mask = hashed_split(start, start + n, cfg.fraction, _VALIDATION_SEED)
    elif mask is not None:
        mask = np.asarray(mask, dtype=bool).reshape(-1)
    if not cfg.cached:  # cached features were computed from checked rows
        check_finite_rows(X, "X", start)
    check_finite_rows(Y, "y", start)
    return X, Y, mask


def _limits(cfg: _Config):
    return blas_limit(cfg.blas_threads)


def _sgd_rows(
    state: _State, X: np.ndarray, Y: np.ndarray, rows: np.ndarray, kernel: FeatureKernel, cfg: _Config,
    W: np.ndarray | None = None,
) -> None:
    """Run the SGD updates over ``rows`` (already in visiting order), in place.

    ``W``: row weights multiplying each row's gradient and loss (scikit-learn's
    SGD convention: the mini-batch mean is still over its ``b`` rows).
    """
    n = rows.size
    if n == 0:
        return
    tile = min(cfg.tile_rows, n)
    # cached: each mini-batch's rows are gathered into a small buffer that stays in cache
    shape = (cfg.batch_size, kernel.n_components) if cfg.cached else (tile, kernel.n_components)
    buf = thread_buffer("sgd-features", shape, kernel.dtype)  # reused by the thread's later passes: no first touch
    step = cfg.step
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported after the pass
        _sgd_tiles(state, X, Y, rows, kernel, cfg, buf, tile, step, W)


def _sgd_tiles(state: _State, X: np.ndarray, Y: np.ndarray, rows: np.ndarray, kernel: FeatureKernel, cfg: _Config, buf: np.ndarray, tile: int, step: float, W: np.ndarray | None = None) -> None:
    dtype = kernel.dtype
    b = cfg.batch_size
    n = rows.size
    for lo in range(0, n, tile):
        idx = rows[lo : lo + tile]
        Z = None if cfg.cached else kernel.rowwise(X[idx], out=buf[: idx.size])
        Yt = Y[idx]
        Wt = None if W is None else W[idx]
        for blo in range(0, idx.size, b):
            if Z is None:
                batch = idx[blo : blo + b]
                Zb = _features(X, batch, kernel, True, buf[: batch.size])
            else:
                Zb = Z[blo : blo + b]
            Yb = Yt[blo : blo + b]
            # products in the feature dtype, the state and its sums in float64
            S = (Zb @ state.coef.astype(dtype, copy=False)).astype(np.float64) + state.intercept
            G, L = _loss_grad(cfg.loss, S, Yb)
            if Wt is None:
                state.loss_sum += float(L.sum())
                state.loss_count += L.size
            else:
                G, L, count = _weighted(G, L, Wt[blo : blo + b])
                state.loss_sum += float(L.sum())
                state.loss_count += count
            state.coef -= (step / Zb.shape[0]) * (Zb.T @ G.astype(dtype))
            if cfg.fit_intercept:
                state.intercept -= step * G.mean(axis=0)
            state.n_iter += 1


def _weighted(G: np.ndarray, L: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Gradients and losses of rows times their weights, and the rows' weight counted per output."""
    return G * w[:, None], L * w[:, None], float(w.sum()) * L.shape[1]


def _train_order(mask: np.ndarray | None, n: int, epoch: int, chunk: int, cfg: _Config) -> np.ndarray:
    rows = np.arange(n) if mask is None else np.flatnonzero(~mask)
    if cfg.shuffle and rows.size > 1:
        rng = np.random.default_rng([cfg.seed, _SHUFFLE_SALT, epoch, chunk])
        rows = rows[rng.permutation(rows.size)]
    return rows


def _validate_rows(out: _State, start_state: _State | None, X: np.ndarray, Y: np.ndarray, mask: np.ndarray | None, kernel: FeatureKernel, cfg: _Config, W: np.ndarray | None = None) -> None:
    if start_state is None or mask is None:
        return
    vs, vc = _loss_sum(start_state, X, Y, np.flatnonzero(mask), kernel, cfg, W)
    out.val_sum += vs
    out.val_count += vc


def _sgd_chunk(
    state: _State, start_state: _State | None, X: Any, Y: Any, mask: Any, W: Any, kernel: FeatureKernel, start: int, chunk: int,
    epoch: int, cfg: _Config,
) -> _State:
    """One link of the sequential chain: the state in, the updated state out.

    With validation, the same task first adds the loss of ``start_state``
    (the model at the start of the pass) on the chunk's validation rows, so
    validation never needs its own read nor a task that could pull the chunk
    to another worker.
    """
    X, Y, mask = _block_rows(X, Y, mask, start, cfg)
    W = _block_weights(W, X.shape[0])
    out = state.copy()
    with _limits(cfg):
        _validate_rows(out, start_state, X, Y, mask, kernel, cfg, W)
        _sgd_rows(out, X, Y, _train_order(mask, X.shape[0], epoch, chunk, cfg), kernel, cfg, W)
    return out


def _avg_chunk(
    state: _State, with_validation: bool, X: Any, Y: Any, mask: Any, W: Any, kernel: FeatureKernel, start: int, chunk: int,
    epoch: int, cfg: _Config,
) -> tuple:
    """Averaging mode: SGD on one chunk from the shared start, returned weighted by its rows (or their weight)."""
    X, Y, mask = _block_rows(X, Y, mask, start, cfg)
    W = _block_weights(W, X.shape[0])
    out = state.copy()
    out.n_iter, out.loss_sum, out.loss_count, out.val_sum, out.val_count = 0, 0.0, 0, 0.0, 0
    rows = _train_order(mask, X.shape[0], epoch, chunk, cfg)
    with _limits(cfg):
        _validate_rows(out, state if with_validation else None, X, Y, mask, kernel, cfg, W)
        _sgd_rows(out, X, Y, rows, kernel, cfg, W)
    w = rows.size if W is None else float(W[rows].sum())
    return (out.coef * w, out.intercept * w, w, out.n_iter, out.loss_sum, out.loss_count, out.val_sum, out.val_count)


def _eval_chunk(state: _State, X: Any, Y: Any, mask: Any, W: Any, kernel: FeatureKernel, start: int, cfg: _Config) -> tuple[float, int]:
    """Sum of the loss of ``state`` over the validation rows of a chunk, and their count (or weight)."""
    X, Y, mask = _block_rows(X, Y, mask, start, cfg)
    W = _block_weights(W, X.shape[0])
    rows = np.flatnonzero(mask) if mask is not None else np.arange(0)
    with _limits(cfg):
        return _loss_sum(state, X, Y, rows, kernel, cfg, W)


def _loss_sum(
    state: _State, X: np.ndarray, Y: np.ndarray, rows: np.ndarray, kernel: FeatureKernel, cfg: _Config,
    W: np.ndarray | None = None,
) -> tuple[float, float]:
    """The loss of ``state`` summed over the rows ``rows`` of a block, and their count (or weight)."""
    n = rows.size
    if n == 0:
        return 0.0, 0
    Y = Y[rows]
    W = None if W is None else W[rows]
    dtype = kernel.dtype
    tile = min(cfg.tile_rows, max(1, _LOSS_TILE_BYTES // (kernel.n_components * dtype.itemsize)), n)
    buf = thread_buffer("sgd-features", (tile, kernel.n_components), dtype)
    coef = state.coef.astype(dtype, copy=False)
    total = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for lo in range(0, n, tile):
            Z = _features(X, rows[lo : lo + tile], kernel, cfg.cached, buf[: min(tile, n - lo)])
            S = (Z @ coef).astype(np.float64) + state.intercept
            L = _loss_grad(cfg.loss, S, Y[lo : lo + tile])[1]
            total += float(L.sum() if W is None else (W[lo : lo + tile] @ L).sum())
    return total, n * Y.shape[1] if W is None else float(W.sum()) * Y.shape[1]


def _ysum_chunk(Y: Any, mask: Any, start: int, cfg: _Config, W: Any = None) -> tuple[np.ndarray, int | float]:
    Y = np.asarray(Y, dtype=np.float64).reshape(np.shape(Y)[0], -1)
    W = _block_weights(W, Y.shape[0])
    if cfg.fraction is not None:
        mask = hashed_split(start, start + Y.shape[0], cfg.fraction, _VALIDATION_SEED)
    if mask is not None:
        keep = ~np.asarray(mask, dtype=bool).reshape(-1)
        Y = Y[keep]
        W = None if W is None else W[keep]
    if W is None:
        return Y.sum(axis=0), Y.shape[0]
    return W @ Y, float(W.sum())


def _add(*parts: tuple) -> tuple:
    return tuple(_sum_field([p[i] for p in parts]) for i in range(len(parts[0])))


def _sum_field(values: list) -> Any:
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


# The map-reduce passes of a fit, as the engine's blocks: the rows' place comes
# from ``rows`` (its start for the hashed split, its index for the shuffle).
def _mean_block(Y: Any, columns: tuple, rows: Rows, cfg: _Config, running: None) -> tuple[np.ndarray, int]:
    mask, W = columns
    return _ysum_chunk(Y, mask, rows.start, cfg, W)


def _avg_block(X: Any, columns: tuple, rows: Rows, state: _State, with_validation: bool, kernel: FeatureKernel,
               epoch: int, cfg: _Config, running: None) -> tuple:
    Y, mask, W = columns
    return _avg_chunk(state, with_validation, X, Y, mask, W, kernel, rows.start, rows.index, epoch, cfg)


def _eval_block(X: Any, columns: tuple, rows: Rows, state: _State, kernel: FeatureKernel, cfg: _Config, running: None):
    Y, mask, W = columns
    return _eval_chunk(state, X, Y, mask, W, kernel, rows.start, cfg)


_SUM_PASS = {name: Pass(block=block, merge=_add) for name, block in
             (("mean", _mean_block), ("average", _avg_block), ("evaluate", _eval_block))}


# -- running passes: in this process for NumPy, as chains of tasks for dask ------------------


class _Data:
    """Row blocks of X, targets, validation mask and row weights, aligned with X's chunks."""

    def __init__(
        self, X: np.ndarray | da.Array, Y: np.ndarray | da.Array, mask: Any, fraction: float | None, W: Any = None
    ) -> None:
        self.lazy = is_dask(X)
        self.n = X.shape[0]
        self.W_d = W  # None, or checked weights (NumPy or dask): the engine's passes align them
        if not self.lazy:
            self.X = X
            self.W = None if W is None else np.asarray(W.compute() if is_dask(W) else W, dtype=np.float64)
            self.Y = np.asarray(Y, dtype=np.float64).reshape(self.n, -1)
            self.mask = None if mask is None else np.asarray(mask.compute() if is_dask(mask) else mask, dtype=bool)
            self.n_chunks = 1
            self.starts = [0]
            return
        X = check_dask_matrix(X)
        chunks = X.chunks[0]
        self.n_chunks = len(chunks)
        self.starts = row_starts(chunks)
        self.x = list(X.to_delayed().ravel())
        self.y = aligned_blocks(Y, chunks, "y")
        self.m = aligned_blocks(mask, chunks, "validation") if mask is not None else [None] * self.n_chunks
        self.w = aligned_blocks(W, chunks, "sample_weight") if W is not None else [None] * self.n_chunks
        # the arrays themselves, for the engine's map-reduce passes (which align them again)
        Yd = Y if is_dask(Y) else da.from_array(np.asarray(Y), chunks=(chunks,) + np.shape(Y)[1:], name=False)
        self.X_d, self.Y_d, self.mask_d = X, Yd.rechunk((chunks,) + (-1,) * (Yd.ndim - 1)), mask


class _Runner:
    """Executes the passes of one fit.

    ``plan`` (:func:`dxrf.engine.cache.plan_cache`): when it caches, the first
    pass that reads X computes every row's features once (on the worker of
    its chunk, with X's own chunks) and the later passes read them;
    :meth:`close` releases them. Every pass keeps X's own chunks, so the
    per-chunk work (the chain's links, averaging mode's chunk fits) does not
    depend on the number of threads.
    """

    def __init__(self, data: _Data, kernel: FeatureKernel, cfg: _Config, has_validation: bool, options: Options,
                 plan: CachePlan | None = None) -> None:
        self.data = data
        self.options = options  # resolved once by the fit: its engine passes run with these
        self.kernel = kernel
        self.cfg = cfg
        self.has_validation = has_validation
        self.plan = plan
        self._cache: FeatureCache | None = None
        self._blocks: list | None = None  # the cached features' blocks (dask input)
        self.client = active_client() if data.lazy else None
        if data.lazy:
            # shipped to the workers once per fit, not once per window
            self.kernel_d = ship(kernel, broadcast=True)
            if self.client is not None:
                threads = sum(self.client.nthreads().values())
            else:
                threads = dask.config.get("num_workers", None) or os.cpu_count() or 1
            # chunks submitted at once along the chain: bounds what is loaded ahead
            self.window = max(4, 2 * int(threads))

    def _rows(self) -> tuple[Any, _Config]:
        """What the passes read (X, or its cached features: NumPy, or the blocks of dask input) and their config."""
        d = self.data
        if self.plan is not None and self.plan.cached and self._cache is None:
            X = d.X if not d.lazy else d.X_d
            self._cache = feature_cache(X, cache_rows, (self.kernel,), self.kernel.n_components, self.kernel.dtype,
                                        plan=self.plan, options=self.options, balance=False)
            self.cfg = _Config(**{k: getattr(self.cfg, k) for k in _Config.__slots__ if k != "cached"}, cached=True)
            if d.lazy:
                self._blocks = list(self._cache.source(X).to_delayed().ravel())
        if self._cache is None:
            return (d.X if not d.lazy else d.x), self.cfg
        return (self._cache.source(d.X) if not d.lazy else self._blocks), self.cfg

    def close(self) -> None:
        """Release the feature cache (idempotent)."""
        cache, self._cache, self._blocks = self._cache, None, None
        if cache is not None:
            cache.release()

    # -- NumPy: everything in this process ---------------------------------------------
    def _local_mask(self) -> np.ndarray | None:
        d = self.data
        if self.cfg.fraction is not None:
            return hashed_split(0, d.n, self.cfg.fraction, _VALIDATION_SEED)
        return d.mask

    def train_mean(self) -> tuple[np.ndarray, int]:
        d = self.data
        if not d.lazy:
            return _ysum_chunk(d.Y, self._local_mask(), 0, self.cfg, d.W)
        # a read of y only: y's blocks, aligned with X's chunks, are the rows of this pass
        return run_pass(_SUM_PASS["mean"], d.Y_d, (d.mask_d, d.W_d), (self.cfg,), options=self.options, balance=False)

    def _share(self, state: _State) -> Any:
        # The state (O(M k) numbers) travels inside the graph: data scattered by the
        # client has no lineage, so a copy held by a worker that dies could not be
        # recomputed and the fit would fail; a graph literal always can be.
        return dask.delayed(state, pure=True)

    def epoch(self, state: _State, epoch: int, mode: str) -> tuple[_State, tuple[float, int]]:
        """One pass: the state after it, and the validation loss of the state before it."""
        d = self.data
        state = state.fresh_counters()
        if not d.lazy:
            (X, cfg), Y, mask = self._rows(), d.Y, self._local_mask()
            val = (0.0, 0)
            if self.has_validation:
                val = _loss_sum(state, X, Y, np.flatnonzero(mask), self.kernel, cfg, d.W)
            out = state.copy()
            _sgd_rows(out, np.asarray(X), Y, _train_order(mask, d.n, epoch, 0, cfg), self.kernel, cfg, d.W)
            return out, val
        if mode == "averaging":
            return self._averaging_epoch(state, epoch)
        return self._sequential_epoch(state, epoch)

    def _order(self, epoch: int) -> np.ndarray:
        if not self.cfg.shuffle:
            return np.arange(self.data.n_chunks)
        return np.random.default_rng([self.cfg.seed, _SHUFFLE_SALT, epoch]).permutation(self.data.n_chunks)

    def _sequential_epoch(self, state: _State, epoch: int) -> tuple[_State, tuple[float, int]]:
        d = self.data
        x, cfg = self._rows()
        order = self._order(epoch)
        start_d = self._share(state)
        validate = start_d if self.has_validation else None
        step = dask.delayed(_sgd_chunk, pure=False)
        current: Any = start_d
        in_flight: list = []
        for w0 in range(0, d.n_chunks, self.window):
            s = current
            for i in order[w0 : w0 + self.window]:
                s = step(s, validate, x[i], d.y[i], d.m[i], d.w[i], self.kernel_d, d.starts[i], int(i), epoch, cfg)
            if self.client is None:
                (current,) = dask.compute(s)
                continue
            if len(in_flight) == 2:
                in_flight.pop(0).result()  # at most two windows of chunks in flight
            # the next window refers to this one's final state, a future on the cluster
            current = self.client.compute(s)
            in_flight.append(current)
        if self.client is not None:
            current = current.result()
        return current, (current.val_sum, current.val_count)

    def _averaging_epoch(self, state: _State, epoch: int) -> tuple[_State, tuple[float, int]]:
        d = self.data
        _, cfg = self._rows()
        start_d = self._share(state)
        coef_w, icpt_w, w, n_iter, loss_sum, loss_count, val_sum, val_count = run_pass(
            _SUM_PASS["average"], self._source(), (d.Y_d, d.mask_d, d.W_d),
            (start_d, self.has_validation, self.kernel_d, epoch, cfg), options=self.options, balance=False,
        )
        out = state.copy() if w == 0 else _State(coef_w / w, icpt_w / w)
        out.n_iter = state.n_iter + n_iter
        out.loss_sum, out.loss_count = loss_sum, loss_count
        return out, (val_sum, val_count)

    def evaluate(self, state: _State) -> tuple[float, int]:
        """A read of the data evaluating ``state`` on the validation rows."""
        d = self.data
        X, cfg = self._rows()
        if not d.lazy:
            return _loss_sum(state, X, d.Y, np.flatnonzero(self._local_mask()), self.kernel, cfg, d.W)
        start_d = self._share(state)
        return run_pass(_SUM_PASS["evaluate"], self._source(), (d.Y_d, d.mask_d, d.W_d), (start_d, self.kernel_d, cfg),
                        options=self.options, balance=False)

    def _source(self) -> da.Array:
        """The dask array the map-reduce passes read: X, or its cached features (same chunks)."""
        return self.data.X_d if self._cache is None else self._cache.source(self.data.X_d)



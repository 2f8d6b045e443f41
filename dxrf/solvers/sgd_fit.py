"""SGD fits on random features: the step, the passes, early stopping; the estimators only store.

:func:`fit_sgd` runs the passes of :meth:`RandomFeatureSGDRegressor.fit`
(and the classifier's) on fitted features, :func:`partial_sgd` the one pass of
a ``partial_fit`` call. Both return an :class:`SGDFit`: the iterate and its
history, never touching an estimator.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import dask.array as da
import numpy as np

from dxrf.core.options import Options, resolve_options
from dxrf.core.validation import is_dask
from dxrf.engine.cache import CachePlan, plan_cache
from dxrf.kernels.kernel import FeatureKernel
from dxrf.solvers.sgd_passes import _VALIDATION_SEED, _Config, _Data, _Runner, _State
from dxrf.stats.accumulation import hashed_split

__all__ = ["SGDOptions", "SGDFit", "resolve_step", "split_rows", "fit_sgd", "partial_sgd"]

_STEP_SAMPLE_ROWS = 1000


@dataclasses.dataclass(frozen=True)
class SGDOptions:
    """An SGD estimator's checked parameters, as the passes read them."""

    loss: str
    step_size: float | str
    batch_size: int
    max_passes: int
    early_stopping: bool
    patience: int
    tol: float
    mode: str
    fit_intercept: bool
    shuffle: bool
    validation: object  # as given, for messages


@dataclasses.dataclass
class SGDFit:
    """The result of SGD passes: the iterate, the counters and the per-pass errors."""

    coef: np.ndarray
    intercept: np.ndarray
    step: float
    n_epochs: int
    best_epoch: int
    n_iter: int
    n_passes: int
    validation_errors: np.ndarray
    train_errors: np.ndarray
    cache: CachePlan | None = None  # fit: whether its passes kept the features


def _sample_rows(X: np.ndarray | da.Array, rng: np.random.Generator, size: int) -> np.ndarray:
    n = X.shape[0]
    sample = X if n <= size else X[np.sort(rng.choice(n, size=size, replace=False))]
    return np.asarray(sample.compute() if is_dask(sample) else sample)


def resolve_step(step_size: float | str, kernel: FeatureKernel, X: Any, fit_intercept: bool,
                 rng: np.random.Generator) -> tuple[float, int]:
    """``(gamma, reads of X)``: gamma = 1 / L with L = max |z(x)|^2 (+1 for the bias), the squared loss's smoothness."""
    if not isinstance(step_size, str):
        return float(step_size), 0
    if kernel.activation == "cos":
        r2, reads = float(np.sum(kernel.scale**2)), 0  # |cos| <= 1: an exact bound, no data needed
    else:
        Z = kernel(_sample_rows(X, rng, _STEP_SAMPLE_ROWS)).astype(np.float64)
        r2, reads = float(np.max(np.einsum("ij,ij->i", Z, Z))), 1
    return (1.0 / (r2 + float(fit_intercept)) if r2 + fit_intercept > 0 else 1.0), reads


def _config(
    o: SGDOptions, kernel: FeatureKernel, X: Any, step: float, seed: int, fraction: float | None, opts: Options,
) -> _Config:
    """The constants of the SGD passes over ``X`` with ``kernel`` and step ``step`` (tiles and threads from ``opts``)."""
    b = int(o.batch_size)
    tile_rows = max(opts.min_tile_rows, opts.tile_bytes // (kernel.n_components * kernel.dtype.itemsize))
    tile_rows = max(b, tile_rows // b * b)  # whole mini-batches per tile
    return _Config(loss=o.loss, step=step, batch_size=b, fit_intercept=bool(o.fit_intercept), shuffle=bool(o.shuffle),
                   seed=seed, fraction=fraction, tile_rows=tile_rows,
                   blas_threads=opts.blas_threads if is_dask(X) else None)


def split_rows(X: Any, validation: object, given: object) -> tuple[float | None, Any]:
    """The checked ``validation`` as ``(fraction, mask)``; refuses a split of NumPy rows that leaves a side empty."""
    n = X.shape[0]
    fraction = validation if isinstance(validation, float) else None
    mask = None if validation is None or fraction is not None else validation
    if mask is not None and not is_dask(mask):
        mask = np.asarray(mask, dtype=bool)
    if not is_dask(X):
        local_mask = hashed_split(0, n, fraction, _VALIDATION_SEED) if fraction is not None else mask
        n_val = 0 if local_mask is None else int(local_mask.sum())
        if n - n_val == 0:
            raise ValueError(
                f"validation={given!r} leaves no training rows (n_samples={n}); give more rows or validation=None"
            )
        if validation is not None and n_val == 0:
            raise ValueError(
                f"validation={given!r} selects no validation rows (n_samples={n}); give more rows or validation=None"
            )
    return fraction, mask


def _start(o: SGDOptions, runner: _Runner, m: int, k: int, y_mean: Any) -> _State:
    """The first iterate: zero, with the squared loss's intercept at the training-target mean."""
    intercept = np.zeros(k)
    if o.fit_intercept and o.loss == "squared":
        if y_mean is None:
            ysum, cnt = runner.train_mean()
            y_mean = ysum / cnt if cnt else np.zeros(k)
        intercept = np.asarray(y_mean, dtype=np.float64).reshape(k).copy()
    return _State(np.zeros((m, k)), intercept)


class _EarlyStopping:
    """The validation errors of the passes, the best iterate so far, and the patience left."""

    def __init__(self, o: SGDOptions, n: int, state: _State) -> None:
        self.o, self.n = o, n
        self.errors: list[float] = []
        self.best_err, self.best_state, self.best_epoch, self.wait = np.inf, state, 0, 0

    def record(self, err_sum: float, count: int, candidate: _State, epoch: int) -> bool:
        """Add a validation error; True when early stopping says stop."""
        if count == 0:
            raise ValueError(f"validation={self.o.validation!r} selected no validation rows (n_samples={self.n})")
        err = err_sum / count
        self.errors.append(err)
        if err < self.best_err * (1.0 - self.o.tol) or not np.isfinite(self.best_err):
            self.wait = 0
        else:
            self.wait += 1
        if err < self.best_err:
            self.best_err, self.best_state, self.best_epoch = err, candidate, epoch
        return bool(self.o.early_stopping) and self.wait >= self.o.patience


def _train_error(state: _State) -> float:
    return state.loss_sum / state.loss_count if state.loss_count else np.nan


def fit_sgd(
    X: Any, Y: Any, kernel: FeatureKernel, o: SGDOptions, *, validation: object, split: tuple, seed: int,
    weights: Any = None, y_mean: Any = None, options: Options | None = None,
) -> SGDFit:
    """SGD passes over ``(X, Y)`` on ``kernel``'s features, early-stopped on the checked ``validation`` rows.

    ``split`` is :func:`split_rows`' ``(fraction, mask)`` of ``validation``
    (checked before the features were drawn); ``y_mean`` the training-target
    mean when a selector's pass gave it.
    """
    n = X.shape[0]
    if not is_dask(Y):
        Y = np.asarray(Y, dtype=np.float64).reshape(n, -1)
    fraction, mask = split
    step, passes = resolve_step(o.step_size, kernel, X, o.fit_intercept, np.random.default_rng([seed, 1]))
    has_val = validation is not None
    opts = resolve_options(options)  # once per fit: the SGD passes get them explicitly
    plan = _sgd_cache_plan(opts, kernel, X)
    runner = _Runner(_Data(X, Y, mask, fraction, weights), kernel, _config(o, kernel, X, step, seed, fraction, opts), has_val,
                     opts, plan)
    try:
        result = _passes(o, runner, kernel, n, Y.shape[1], has_val, y_mean, step, passes)
    finally:
        runner.close()  # the cached features go at the end of the fit, on error and on interrupt
    result.cache = plan
    return result


def _sgd_cache_plan(opts: Options, kernel: FeatureKernel, X: Any) -> CachePlan:
    """Whether the SGD passes keep the features: as :func:`plan_cache`, except that "auto" keeps float32 features only.

    SGD computes the features of each pass's shuffled tiles row by row
    (:meth:`FeatureKernel.rowwise`). A float32 map's rows are the same in any
    company (products of float32 values are exact in float64, then rounded
    once), so cached features are bitwise those a pass computes. A float64
    map's matrix product may round a row differently by its place in BLAS's
    blocking: cached features can differ in the last bit, so "auto" does not
    cache them (``cache_features=True`` does, results equal to rounding).
    """
    n, m = int(X.shape[0]), kernel.n_components
    if opts.cache_features == "auto" and kernel.dtype != np.float32:
        return CachePlan(False, n * m * kernel.dtype.itemsize, None, "auto",
                         reason="float64 features: recomputed, so results are bitwise those of any run")
    return plan_cache(opts.cache_features, n, m, kernel.dtype.itemsize, dask_input=is_dask(X),
                      fraction=opts.cache_fraction)


def _passes(o: SGDOptions, runner: _Runner, kernel: FeatureKernel, n: int, k: int, has_val: bool, y_mean: Any,
            step: float, passes: int) -> SGDFit:
    """The passes of :func:`fit_sgd` with early stopping, and one last read evaluating the final iterate."""
    state = _start(o, runner, kernel.n_components, k, y_mean)
    stopping, train_errors, epochs, stopped = _EarlyStopping(o, n, state), [], 0, False
    for epoch in range(int(o.max_passes)):
        new_state, (vsum, vcount) = runner.epoch(state, epoch, o.mode)
        passes, epochs = passes + 1, epochs + 1
        if new_state.n_iter == state.n_iter and epoch == 0:
            raise ValueError(f"no training rows: validation={o.validation!r} takes every row (n_samples={n})")
        train_errors.append(_train_error(new_state))
        if not np.all(np.isfinite(new_state.coef)):
            raise FloatingPointError(f"SGD diverged in pass {epoch + 1} (step_size={step:.3g}); give a smaller step_size")
        stopped = has_val and stopping.record(vsum, vcount, state, epoch)
        state = new_state
        if stopped:
            break
    if has_val and not stopped:
        passes += 1  # one last read evaluates the final iterate
        stopping.record(*runner.evaluate(state), state, epochs)
    early = has_val and o.early_stopping
    final = stopping.best_state if early else state
    return SGDFit(final.coef, final.intercept, step, epochs, int(stopping.best_epoch) if early else epochs,
                  int(state.n_iter), passes, np.asarray(stopping.errors, dtype=np.float64),
                  np.asarray(train_errors, dtype=np.float64))


def partial_sgd(
    X: Any, Y: Any, kernel: FeatureKernel, o: SGDOptions, *, seed: int, previous: SGDFit | None, weights: Any = None,
    options: Options | None = None,
) -> SGDFit:
    """One SGD pass over a batch (no validation rows), from ``previous`` or, at the first call, from the start."""
    if not is_dask(Y):
        Y = np.asarray(Y, dtype=np.float64).reshape(X.shape[0], -1)
    k = Y.shape[1]
    if previous is not None and previous.coef.shape[1] != k:
        raise ValueError(f"y has {k} output(s), but the model has {previous.coef.shape[1]}")
    step, passes = (previous.step, 0) if previous is not None else \
        resolve_step(o.step_size, kernel, X, o.fit_intercept, np.random.default_rng([seed, 1]))
    opts = resolve_options(options)  # once per call: the passes below get them explicitly
    runner = _Runner(_Data(X, Y, None, None, weights), kernel, _config(o, kernel, X, step, seed, None, opts), False, opts)
    if previous is None:
        # as fit: start at the (first batch's) target mean
        state, epoch, train_errors = _start(o, runner, kernel.n_components, k, None), 0, []
    else:
        state = _State(np.array(previous.coef, dtype=np.float64), np.array(previous.intercept, dtype=np.float64).reshape(k),
                       int(previous.n_iter))
        epoch, train_errors = previous.n_epochs, list(previous.train_errors)
    state, _ = runner.epoch(state, epoch, o.mode)
    if not np.all(np.isfinite(state.coef)):
        raise FloatingPointError(f"SGD diverged in partial_fit (step_size={step:.3g}); give a smaller step_size")
    train_errors.append(_train_error(state))
    return SGDFit(state.coef, state.intercept, step, epoch + 1, epoch + 1, int(state.n_iter), passes + 1, np.zeros(0),
                  np.asarray(train_errors, dtype=np.float64))

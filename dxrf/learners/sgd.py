"""Mini-batch SGD on random features (Carratino, Rudi & Rosasco, 2018).

The model is linear in the random features, ``f(x) = <v, z(x)> + beta``, and
is trained by mini-batch stochastic gradient descent with a constant step::

    v_{t+1} = v_t - gamma (1/b) sum_{i in B_t} l'(<v_t, z(x_i)> + beta_t, y_i) z(x_i)

For the squared loss ``l'(s, y) = s - y``: the estimator of Carratino et al.,
whose only regularisation is implicit (step, mini-batch, number of passes,
number of features), here with early stopping on validation rows.

Memory is ``O(M b)``: no ``M x M`` object is formed anywhere, so ``M`` may be
far larger than what a Gram or a ridge solve allows (50,000 and more).

How it runs on Dask
-------------------
*Sequential mode* is the exact serial algorithm. Each pass visits the row
chunks in a seeded random order; chunk ``i`` is processed by ONE task that
takes the state (``v``, ``beta``, the update counter, the running training
loss) from the task of the previous chunk, so the state (``O(M k)`` numbers)
travels from worker to worker while the data stay where they are read or
held. Inside a chunk the training rows are shuffled and cut into
mini-batches; features are computed per tile of mini-batches into a reused
buffer. The chain is submitted in windows of a few chunks (two windows in
flight at most), so the chunks a pass loads ahead of the chain are bounded
however large the data.

*Averaging mode* runs SGD on every chunk in parallel from the same start and
averages the resulting ``v`` (weighted by training rows) after every pass:
one-shot parameter averaging per pass (Zinkevich et al., 2010).

Validation
----------
Validation rows (a hashed fraction, as in :func:`dxrf.stats.hashed_split`,
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
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if

from .._labels import class_labels, encode_classes
from .._blas import blas_limit
from .._validation import (
    check_bool,
    check_choice,
    check_dask_matrix,
    check_finite_rows,
    check_nonnegative,
    check_positive_float,
    check_positive_int,
    is_dask,
    is_integer,
    make_rng,
)
from ..features.kernel import FeatureKernel
from ..options import get_options
from ..progress import active_client, compute
from ..engine import aligned_blocks, row_starts, ship, tree_reduce
from ..stats import hashed_split
from ._base import RandomFeatureModel, check_validation, is_selector, linear_predict

__all__ = [
    "LOSSES",
    "MAX_SELECTOR_CANDIDATES",
    "MODES",
    "RandomFeatureSGDClassifier",
    "RandomFeatureSGDRegressor",
]

LOSSES = ("squared", "hinge", "logistic")
MODES = ("sequential", "averaging")
# a selector's candidate pass accumulates an M0 x M0 Gram: at most 2 GiB of float64
MAX_SELECTOR_CANDIDATES = 16384
_SHUFFLE_SALT = 0x5344_4752  # keeps shuffles independent of the feature draw of the same seed
_VALIDATION_SEED = 0  # the hashed split of RandomFeatureModel._features_pass (same rows)
_STEP_SAMPLE_ROWS = 1000


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

    __slots__ = ("batch_size", "blas_threads", "fit_intercept", "fraction", "loss", "seed", "shuffle", "step", "tile_rows")

    def __init__(self, **kw: Any) -> None:
        for k in self.__slots__:
            setattr(self, k, kw[k])


def _block_rows(X: Any, Y: Any, mask: Any, start: int, cfg: _Config) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    X = np.asarray(X)
    n = X.shape[0]
    Y = np.asarray(Y, dtype=np.float64).reshape(n, -1)
    if cfg.fraction is not None:
        mask = hashed_split(start, start + n, cfg.fraction, _VALIDATION_SEED)
    elif mask is not None:
        mask = np.asarray(mask, dtype=bool).reshape(-1)
    check_finite_rows(X, "X", start)
    check_finite_rows(Y, "y", start)
    return X, Y, mask


def _limits(cfg: _Config):
    return blas_limit(cfg.blas_threads)


def _sgd_rows(state: _State, X: np.ndarray, Y: np.ndarray, rows: np.ndarray, kernel: FeatureKernel, cfg: _Config) -> None:
    """Run the SGD updates over ``rows`` (already in visiting order), in place."""
    n = rows.size
    if n == 0:
        return
    tile = min(cfg.tile_rows, n)
    buf = np.empty((tile, kernel.n_components), dtype=kernel.dtype)
    step = cfg.step
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported after the pass
        _sgd_tiles(state, X, Y, rows, kernel, cfg, buf, tile, step)


def _sgd_tiles(state: _State, X: np.ndarray, Y: np.ndarray, rows: np.ndarray, kernel: FeatureKernel, cfg: _Config, buf: np.ndarray, tile: int, step: float) -> None:
    dtype = kernel.dtype
    b = cfg.batch_size
    n = rows.size
    for lo in range(0, n, tile):
        idx = rows[lo : lo + tile]
        Z = kernel(X[idx], out=buf[: idx.size])
        Yt = Y[idx]
        for blo in range(0, idx.size, b):
            Zb = Z[blo : blo + b]
            Yb = Yt[blo : blo + b]
            # products in the feature dtype, the state and its sums in float64
            S = (Zb @ state.coef.astype(dtype, copy=False)).astype(np.float64) + state.intercept
            G, L = _loss_grad(cfg.loss, S, Yb)
            state.loss_sum += float(L.sum())
            state.loss_count += L.size
            state.coef -= (step / Zb.shape[0]) * (Zb.T @ G.astype(dtype))
            if cfg.fit_intercept:
                state.intercept -= step * G.mean(axis=0)
            state.n_iter += 1


def _train_order(mask: np.ndarray | None, n: int, epoch: int, chunk: int, cfg: _Config) -> np.ndarray:
    rows = np.arange(n) if mask is None else np.flatnonzero(~mask)
    if cfg.shuffle and rows.size > 1:
        rng = np.random.default_rng([cfg.seed, _SHUFFLE_SALT, epoch, chunk])
        rows = rows[rng.permutation(rows.size)]
    return rows


def _validate_rows(out: _State, start_state: _State | None, X: np.ndarray, Y: np.ndarray, mask: np.ndarray | None, kernel: FeatureKernel, cfg: _Config) -> None:
    if start_state is None or mask is None:
        return
    rows = np.flatnonzero(mask)
    vs, vc = _loss_sum(start_state, X[rows], Y[rows], kernel, cfg)
    out.val_sum += vs
    out.val_count += vc


def _sgd_chunk(
    state: _State, start_state: _State | None, X: Any, Y: Any, mask: Any, kernel: FeatureKernel, start: int, chunk: int, epoch: int, cfg: _Config
) -> _State:
    """One link of the sequential chain: the state in, the updated state out.

    With validation, the same task first adds the loss of ``start_state``
    (the model at the start of the pass) on the chunk's validation rows, so
    validation never needs its own read nor a task that could pull the chunk
    to another worker.
    """
    X, Y, mask = _block_rows(X, Y, mask, start, cfg)
    out = state.copy()
    with _limits(cfg):
        _validate_rows(out, start_state, X, Y, mask, kernel, cfg)
        _sgd_rows(out, X, Y, _train_order(mask, X.shape[0], epoch, chunk, cfg), kernel, cfg)
    return out


def _avg_chunk(
    state: _State, with_validation: bool, X: Any, Y: Any, mask: Any, kernel: FeatureKernel, start: int, chunk: int, epoch: int, cfg: _Config
) -> tuple:
    """Averaging mode: SGD on one chunk from the shared start, returned weighted by its rows."""
    X, Y, mask = _block_rows(X, Y, mask, start, cfg)
    out = state.copy()
    out.n_iter, out.loss_sum, out.loss_count, out.val_sum, out.val_count = 0, 0.0, 0, 0.0, 0
    rows = _train_order(mask, X.shape[0], epoch, chunk, cfg)
    with _limits(cfg):
        _validate_rows(out, state if with_validation else None, X, Y, mask, kernel, cfg)
        _sgd_rows(out, X, Y, rows, kernel, cfg)
    w = rows.size
    return (out.coef * w, out.intercept * w, w, out.n_iter, out.loss_sum, out.loss_count, out.val_sum, out.val_count)


def _eval_chunk(state: _State, X: Any, Y: Any, mask: Any, kernel: FeatureKernel, start: int, cfg: _Config) -> tuple[float, int]:
    """Sum of the loss of ``state`` over the validation rows of a chunk, and their count."""
    X, Y, mask = _block_rows(X, Y, mask, start, cfg)
    rows = np.flatnonzero(mask) if mask is not None else np.arange(0)
    with _limits(cfg):
        return _loss_sum(state, X[rows], Y[rows], kernel, cfg)


def _loss_sum(state: _State, X: np.ndarray, Y: np.ndarray, kernel: FeatureKernel, cfg: _Config) -> tuple[float, int]:
    n = X.shape[0]
    if n == 0:
        return 0.0, 0
    dtype = kernel.dtype
    tile = min(cfg.tile_rows, n)
    buf = np.empty((tile, kernel.n_components), dtype=dtype)
    coef = state.coef.astype(dtype, copy=False)
    total = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for lo in range(0, n, tile):
            Z = kernel(X[lo : lo + tile], out=buf[: min(tile, n - lo)])
            S = (Z @ coef).astype(np.float64) + state.intercept
            total += float(_loss_grad(cfg.loss, S, Y[lo : lo + tile])[1].sum())
    return total, n * Y.shape[1]


def _ysum_chunk(Y: Any, mask: Any, start: int, cfg: _Config) -> tuple[np.ndarray, int]:
    Y = np.asarray(Y, dtype=np.float64).reshape(np.shape(Y)[0], -1)
    if cfg.fraction is not None:
        mask = hashed_split(start, start + Y.shape[0], cfg.fraction, _VALIDATION_SEED)
    if mask is not None:
        Y = Y[~np.asarray(mask, dtype=bool).reshape(-1)]
    return Y.sum(axis=0), Y.shape[0]


def _add(*parts: tuple) -> tuple:
    return tuple(_sum_field([p[i] for p in parts]) for i in range(len(parts[0])))


def _sum_field(values: list) -> Any:
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def _tree(parts: list) -> Any:
    return tree_reduce(parts, _add, get_options().split_every)


# -- running passes: in this process for NumPy, as chains of tasks for dask ------------------


class _Data:
    """Row blocks of X, targets and validation mask, aligned with X's chunks."""

    def __init__(self, X: np.ndarray | da.Array, Y: np.ndarray | da.Array, mask: Any, fraction: float | None) -> None:
        self.lazy = is_dask(X)
        self.n = X.shape[0]
        if not self.lazy:
            self.X = X
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


class _Runner:
    """Executes the passes of one fit and counts them."""

    def __init__(self, data: _Data, kernel: FeatureKernel, cfg: _Config, has_validation: bool) -> None:
        self.data = data
        self.kernel = kernel
        self.cfg = cfg
        self.has_validation = has_validation
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

    # -- NumPy: everything in this process ---------------------------------------------
    def _local_mask(self) -> np.ndarray | None:
        d = self.data
        if self.cfg.fraction is not None:
            return hashed_split(0, d.n, self.cfg.fraction, _VALIDATION_SEED)
        return d.mask

    def train_mean(self) -> tuple[np.ndarray, int]:
        d = self.data
        if not d.lazy:
            return _ysum_chunk(d.Y, self._local_mask(), 0, self.cfg)
        parts = [dask.delayed(_ysum_chunk, pure=False)(yb, mb, s, self.cfg) for yb, mb, s in zip(d.y, d.m, d.starts)]
        return compute(_tree(parts))

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
            X, Y, mask = d.X, d.Y, self._local_mask()
            val = (0.0, 0)
            if self.has_validation:
                val = _loss_sum(state, X[mask], Y[mask], self.kernel, self.cfg)
            out = state.copy()
            _sgd_rows(out, np.asarray(X), Y, _train_order(mask, d.n, epoch, 0, self.cfg), self.kernel, self.cfg)
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
        order = self._order(epoch)
        start_d = self._share(state)
        validate = start_d if self.has_validation else None
        step = dask.delayed(_sgd_chunk, pure=False)
        current: Any = start_d
        in_flight: list = []
        for w0 in range(0, d.n_chunks, self.window):
            s = current
            for i in order[w0 : w0 + self.window]:
                s = step(s, validate, d.x[i], d.y[i], d.m[i], self.kernel_d, d.starts[i], int(i), epoch, self.cfg)
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
        start_d = self._share(state)
        task = dask.delayed(_avg_chunk, pure=False)
        parts = [
            task(start_d, self.has_validation, d.x[i], d.y[i], d.m[i], self.kernel_d, d.starts[i], i, epoch, self.cfg)
            for i in range(d.n_chunks)
        ]
        coef_w, icpt_w, w, n_iter, loss_sum, loss_count, val_sum, val_count = compute(_tree(parts))
        out = state.copy() if w == 0 else _State(coef_w / w, icpt_w / w)
        out.n_iter = state.n_iter + n_iter
        out.loss_sum, out.loss_count = loss_sum, loss_count
        return out, (val_sum, val_count)

    def evaluate(self, state: _State) -> tuple[float, int]:
        """A read of the data evaluating ``state`` on the validation rows."""
        d = self.data
        if not d.lazy:
            mask = self._local_mask()
            return _loss_sum(state, d.X[mask], d.Y[mask], self.kernel, self.cfg)
        start_d = self._share(state)
        task = dask.delayed(_eval_chunk, pure=False)
        parts = [task(start_d, d.x[i], d.y[i], d.m[i], self.kernel_d, d.starts[i], self.cfg) for i in range(d.n_chunks)]
        return compute(_tree(parts))


# -- the estimators -----------------------------------------------------------------


def _sample_rows(X: np.ndarray | da.Array, rng: np.random.Generator, size: int) -> np.ndarray:
    n = X.shape[0]
    sample = X if n <= size else X[np.sort(rng.choice(n, size=size, replace=False))]
    return np.asarray(sample.compute() if is_dask(sample) else sample)


class _BaseSGD(RandomFeatureModel):
    """Shared fitting machinery of the SGD regressor and classifier."""

    _losses: tuple[str, ...] = ("squared",)

    # both estimators take the same parameters; only the losses allowed differ
    def __init__(
        self,
        features: object = None,
        *,
        loss: str = "squared",
        step_size: float | str = "auto",
        batch_size: int = 32,
        max_passes: int = 10,
        validation: float | np.ndarray | da.Array | None = 0.2,
        early_stopping: bool = True,
        patience: int = 3,
        tol: float = 1e-4,
        mode: str = "sequential",
        fit_intercept: bool = True,
        shuffle: bool = True,
        random_state: object = None,
    ) -> None:
        self.features = features
        self.loss = loss
        self.step_size = step_size
        self.batch_size = batch_size
        self.max_passes = max_passes
        self.validation = validation
        self.early_stopping = early_stopping
        self.patience = patience
        self.tol = tol
        self.mode = mode
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state

    # -- parameters ----------------------------------------------------------------
    def _check_params(self) -> None:
        check_choice(self.loss, "loss", self._losses)
        if self.step_size != "auto":
            check_positive_float(self.step_size, "step_size", what="a positive number or 'auto'")
        for name in ("batch_size", "max_passes", "patience"):
            check_positive_int(getattr(self, name), name)
        check_nonnegative(self.tol, "tol", finite=False)
        check_choice(self.mode, "mode", MODES)
        for name in ("early_stopping", "fit_intercept", "shuffle"):
            check_bool(getattr(self, name), name)
        if self.early_stopping and self.validation is None:
            raise ValueError("early_stopping=True needs validation rows: give validation= a fraction or a mask, or set early_stopping=False")

    def _shuffle_seed(self) -> int:
        """The seed of the shuffles (the feature map is seeded by the base class)."""
        rs = self.random_state
        if is_integer(rs):
            return int(rs)
        return int(make_rng(rs).integers(2**63))

    # -- fitting -------------------------------------------------------------------
    def _fit_features(self, X: Any, Y: Any, validation: Any, task: str, classes: Any) -> np.ndarray | None:
        """Draw the features (no Gram) or run a selector's candidate pass.

        Returns the training-target mean when the candidate pass gave it.
        """
        features = self.features
        if is_selector(features):
            params = features.get_params(deep=False)
            m0 = params.get("n_candidates") or 10 * int(params.get("n_components", 0))
            if m0 > MAX_SELECTOR_CANDIDATES:
                raise ValueError(
                    f"features is a selector with {m0} candidates: its candidate pass would accumulate a "
                    f"{m0} x {m0} Gram. SGD with a selector allows at most n_candidates={MAX_SELECTOR_CANDIDATES}; "
                    "for larger M give a feature map such as RandomFourierFeatures(n_components=M)"
                )
            train, _ = self._features_pass(X, Y, validation=validation, validation_seed=_VALIDATION_SEED, task=task, classes=classes)
            return None if train.n == 0 else train.ysum / train.n
        self._fit_map(self._make_features(), X)
        return None

    def _resolve_step(self, X: Any, rng: np.random.Generator) -> float:
        """gamma = 1 / L with L = max |z(x)|^2 (+1 for the bias): the smoothness of the squared loss."""
        if not isinstance(self.step_size, str):
            return float(self.step_size)
        kernel = self.kernel_
        if kernel.activation == "cos":
            r2 = float(np.sum(kernel.scale**2))  # |cos| <= 1: an exact bound, no data needed
        else:
            Z = kernel(_sample_rows(X, rng, _STEP_SAMPLE_ROWS)).astype(np.float64)
            r2 = float(np.max(np.einsum("ij,ij->i", Z, Z)))
            self.n_passes_ += 1
        return 1.0 / (r2 + float(self.fit_intercept)) if r2 + self.fit_intercept > 0 else 1.0

    def _fit_sgd(self, X: Any, Y: Any, *, task: str, classes: Any = None) -> None:
        n = X.shape[0]
        if not is_dask(Y):
            Y = np.asarray(Y, dtype=np.float64).reshape(n, -1)
        k = Y.shape[1]
        validation = check_validation(self.validation, n)
        fraction = validation if isinstance(validation, float) else None
        mask = None if validation is None or fraction is not None else validation
        if mask is not None and not is_dask(mask):
            mask = np.asarray(mask, dtype=bool)
        if not is_dask(X):
            local_mask = hashed_split(0, n, fraction, _VALIDATION_SEED) if fraction is not None else mask
            n_val = 0 if local_mask is None else int(local_mask.sum())
            if n - n_val == 0:
                raise ValueError(
                    f"validation={self.validation!r} leaves no training rows (n_samples={n}); give more rows or validation=None"
                )
            if validation is not None and n_val == 0:
                raise ValueError(
                    f"validation={self.validation!r} selects no validation rows (n_samples={n}); give more rows or validation=None"
                )

        y_mean = self._fit_features(X, Y, validation, task, classes)
        shuffle_seed = self._shuffle_seed()
        kernel = self.kernel_
        m = kernel.n_components
        self.step_size_ = self._resolve_step(X, np.random.default_rng([shuffle_seed, 1]))
        opts = get_options()
        b = int(self.batch_size)
        tile_rows = max(opts.min_tile_rows, opts.tile_bytes // (m * kernel.dtype.itemsize))
        tile_rows = max(b, tile_rows // b * b)  # whole mini-batches per tile
        cfg = _Config(
            loss=self.loss,
            step=self.step_size_,
            batch_size=b,
            fit_intercept=bool(self.fit_intercept),
            shuffle=bool(self.shuffle),
            seed=shuffle_seed,
            fraction=fraction,
            tile_rows=tile_rows,
            blas_threads=opts.blas_threads if is_dask(X) else None,
        )
        data = _Data(X, Y, mask, fraction)
        has_val = validation is not None
        runner = _Runner(data, kernel, cfg, has_val)

        intercept = np.zeros(k)
        if self.fit_intercept and self.loss == "squared":
            if y_mean is None:
                ysum, cnt = runner.train_mean()
                y_mean = ysum / cnt if cnt else np.zeros(k)
            intercept = np.asarray(y_mean, dtype=np.float64).reshape(k).copy()
        state = _State(np.zeros((m, k)), intercept)

        val_errors: list[float] = []
        train_errors: list[float] = []
        best_err, best_state, best_epoch, wait = np.inf, state, 0, 0
        stopped = False

        def record(err_sum: float, count: int, candidate: _State, epoch: int) -> bool:
            nonlocal best_err, best_state, best_epoch, wait
            if count == 0:
                raise ValueError(f"validation={self.validation!r} selected no validation rows (n_samples={n})")
            err = err_sum / count
            val_errors.append(err)
            if err < best_err * (1.0 - self.tol) or not np.isfinite(best_err):
                wait = 0
            else:
                wait += 1
            if err < best_err:
                best_err, best_state, best_epoch = err, candidate, epoch
            return bool(self.early_stopping) and wait >= self.patience

        epochs = 0
        for epoch in range(int(self.max_passes)):
            new_state, (vsum, vcount) = runner.epoch(state, epoch, self.mode)
            self.n_passes_ += 1
            epochs += 1
            if new_state.n_iter == state.n_iter and (epoch == 0):
                raise ValueError(f"no training rows: validation={self.validation!r} takes every row (n_samples={n})")
            train_errors.append(new_state.loss_sum / new_state.loss_count if new_state.loss_count else np.nan)
            if not np.all(np.isfinite(new_state.coef)):
                raise FloatingPointError(
                    f"SGD diverged in pass {epoch + 1} (step_size={self.step_size_:.3g}); give a smaller step_size"
                )
            stop = has_val and record(vsum, vcount, state, epoch)
            state = new_state
            if stop:
                stopped = True
                break
        if has_val and not stopped:
            vsum, vcount = runner.evaluate(state)
            self.n_passes_ += 1
            record(vsum, vcount, state, epochs)

        final = best_state if (has_val and self.early_stopping) else state
        self.best_epoch_ = int(best_epoch) if (has_val and self.early_stopping) else epochs
        self.coef_ = final.coef
        self.intercept_ = final.intercept
        self.n_epochs_ = epochs
        self.n_iter_ = int(state.n_iter)
        self.validation_errors_ = np.asarray(val_errors, dtype=np.float64)
        self.train_errors_ = np.asarray(train_errors, dtype=np.float64)

    def _scores(self, X: Any) -> np.ndarray | da.Array:
        self._check_fitted()
        X = self._validate_X(X, reset=False)
        return linear_predict(X, self.kernel_, self.coef_, self.intercept_)

    def _check_loaded(self) -> None:
        coef = getattr(self, "coef_", None)
        kernel = getattr(self, "kernel_", None)
        if coef is not None and kernel is not None and coef.shape[0] != kernel.n_components:
            from ..persist import ModelFormatError

            raise ModelFormatError(f"coef_ has {coef.shape[0]} rows but the feature kernel has {kernel.n_components} features")


_REFERENCES = """
    References
    ----------
    .. [1] L. Carratino, A. Rudi and L. Rosasco, "Learning with SGD and random
       features", NeurIPS 2018.
    .. [2] A. Rahimi and B. Recht, "Random features for large-scale kernel
       machines", NeurIPS 2007.
    .. [3] M. Zinkevich, M. Weimer, A. Smola and L. Li, "Parallelized
       stochastic gradient descent", NeurIPS 2010 (the averaging mode).
"""

_COMMON_PARAMS = """
    features : feature map or selector, default=None
        The random features: a dxrf map (``RandomFourierFeatures(...)``,
        drawn once, no pass over the data unless its bandwidth is
        ``"median"``) or a selector (ELSS, EERF, LKRF). A selector needs its
        candidates' ``M0 x M0`` Gram, accumulated in one pass: it is allowed
        for at most ``MAX_SELECTOR_CANDIDATES`` (16384) candidates; for larger
        ``M`` give a map. ``None`` is ``RandomFourierFeatures(100, bandwidth="median")``.
        A map without a ``random_state`` is seeded from ``random_state``.
    step_size : float or "auto", default="auto"
        The constant step ``gamma``. ``"auto"`` is ``1 / L`` with
        ``L = max_x |z(x)|^2 + fit_intercept`` (the smoothness of the squared
        loss): exact from the kernel for Fourier features (``|z|^2 <=
        sum_j scale_j^2``), else from a sample of 1000 rows (counted as a
        pass). The chosen value is ``step_size_``.
    batch_size : int, default=32
        Mini-batch size ``b``. Mini-batches never span two row chunks: the
        last one of a chunk may be smaller (its gradient is still a mean).
    max_passes : int, default=10
        ``T``, the most passes (epochs) over the training rows.
    validation : float, bool array or None, default=0.2
        Rows held out of every update and used to measure the validation
        loss after each pass: a fraction (rows chosen by a hash of their
        index, independent of chunking; the same rows as the ridge learners'
        split) or a boolean mask (NumPy or dask), True for validation.
    early_stopping : bool, default=True
        Stop when the validation loss has not improved by a relative ``tol``
        for ``patience`` evaluations, and return the iterate with the lowest
        validation loss. Needs ``validation``.
    patience : int, default=3
    tol : float, default=1e-4
        Relative improvement of the validation loss that resets ``patience``.
    mode : {"sequential", "averaging"}, default="sequential"
        ``"sequential"``: the exact serial algorithm; on dask input one task
        per chunk, in a shuffled order, each taking the state from the
        previous one. ``"averaging"``: every chunk runs SGD in parallel from
        the same start and the results are averaged (weighted by training
        rows) after each pass. NumPy input is one chunk, where both agree.
    fit_intercept : bool, default=True
        Learn an unpenalised bias ``beta``: a coordinate updated by the same
        SGD as ``v`` (the gradient of a constant feature 1). For the squared
        loss it starts at the mean training target (a read of ``y`` only), so
        no centring pass over ``X`` is needed.
    shuffle : bool, default=True
        Shuffle the chunk order and the rows inside each chunk in every pass
        (seeded by ``random_state``, keyed by pass and chunk, so results do
        not depend on where or in which order tasks run).
    random_state : int, RandomState, Generator or None
        Seeds the shuffles and, when it has none, the feature map.
"""

_COMMON_ATTRS = """
    coef_ : ndarray of shape (M, k)
        ``v``, the returned iterate (float64).
    intercept_ : ndarray of shape (k,)
    features_ : feature map or selector
        The fitted features.
    kernel_ : FeatureKernel
    step_size_ : float
        The step used.
    n_epochs_ : int
        Passes of SGD run.
    n_iter_ : int
        Mini-batch updates run in total (over all chunks, in averaging mode).
    best_epoch_ : int
        Passes of SGD behind the returned iterate (the best on validation
        with early stopping, else ``n_epochs_``).
    validation_errors_ : ndarray of shape (n_evaluations,)
        Validation loss (mean over rows and outputs: squared error for the
        squared loss, else the loss) of the iterate after ``p`` passes at
        index ``p``; index 0 is the starting model. Empty without validation.
    train_errors_ : ndarray of shape (n_epochs_,)
        Progressive training loss of each pass: the mean loss of each
        mini-batch *before* its update (free to compute; an online estimate,
        not the loss of one fixed iterate).
    n_passes_ : int
        Reads of X in all: drawing a ``"median"`` bandwidth, a selector's
        candidate pass, an ``"auto"`` step sampled from rows, one per SGD
        pass, and one last read for the validation loss of the final iterate
        (skipped when early stopping stopped the run).
    n_features_in_ : int
"""


class RandomFeatureSGDRegressor(RegressorMixin, _BaseSGD):
    __doc__ = (
        """Least-squares regression on random features by mini-batch SGD.

    The estimator of Carratino, Rudi & Rosasco: ``f(x) = <v, z(x)> + beta``
    trained by SGD with a constant step ``gamma`` and mini-batches of ``b``
    rows, ``v <- v - gamma (1/b) sum_{i in B} (f(x_i) - y_i) z(x_i)``, for at
    most ``max_passes`` passes, with early stopping on validation rows. There
    is no explicit penalty: step, mini-batch, passes and ``M`` regularise.
    The returned model is an end-of-pass iterate (the last one, or the best
    on validation with early stopping) without iterate averaging, as in the
    paper's analysis of the last iterate with a constant step. Rows are
    visited without replacement in each pass (random reshuffling, the usual
    multi-pass practice; the paper's analysis samples with replacement).

    Memory is ``O(M b)`` per task and ``O(M k)`` for the state: no ``M x M``
    object exists, so ``M`` may be very large. Multi-output targets are
    supported.

    Parameters
    ----------
    loss : {"squared"}, default="squared"
"""
        + _COMMON_PARAMS
        + """
    Attributes
    ----------"""
        + _COMMON_ATTRS
        + _REFERENCES
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from dxrf import RandomFourierFeatures
    >>> from dxrf.learners.sgd import RandomFeatureSGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = np.sin(X[:, 0])
    >>> est = RandomFeatureSGDRegressor(RandomFourierFeatures(200), random_state=0).fit(X, y)
    >>> est.predict(X[:3]).shape
    (3,)
"""
    )

    def fit(self, X: np.ndarray | da.Array, y: np.ndarray | da.Array) -> RandomFeatureSGDRegressor:
        """Draw the features and run SGD.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            A dask array is processed chunk by chunk on its scheduler.
        y : array-like or dask array of shape (n_samples,) or (n_samples, k)

        Returns
        -------
        self
        """
        self._check_params()
        X, y = self._validate_Xy(X, y, y_numeric=True, multi_output=True)
        if not is_dask(y):
            y = np.asarray(y, dtype=np.float64)
        elif y.ndim == 1:
            y = y[:, None]
        self._fit_sgd(X, y.reshape(X.shape[0], -1) if not is_dask(y) else y, task="regression")
        return self

    def predict(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Predict ``z(X) v + beta``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples,) or (n_samples, k)
            Float64; 1-d for a single output. Lazy for dask input.
        """
        out = self._scores(X)
        return out[:, 0] if self.coef_.shape[1] == 1 else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


def _labels_block(s: np.ndarray, classes: np.ndarray) -> np.ndarray:
    if s.shape[1] == 1:
        return classes[(s[:, 0] > 0).astype(np.intp)]
    return classes[np.argmax(s, axis=1)]


def _proba_block(s: np.ndarray) -> np.ndarray:
    p = expit(s)
    if p.shape[1] == 1:
        return np.hstack([1.0 - p, p])
    total = p.sum(axis=1, keepdims=True)
    total[total == 0] = 1.0
    return p / total


class RandomFeatureSGDClassifier(ClassifierMixin, _BaseSGD):
    __doc__ = (
        """Linear classification on random features by mini-batch SGD.

    One-vs-rest like scikit-learn: the targets are ``+-1`` columns, one per
    class (a single column for two classes), all trained by the same SGD
    pass with shared mini-batches. ``predict`` takes the sign (two classes)
    or the argmax of the scores. See :class:`RandomFeatureSGDRegressor` for
    the algorithm and how it runs on Dask.

    Parameters
    ----------
    loss : {"squared", "hinge", "logistic"}, default="squared"
        ``(s - y)^2 / 2`` (least-squares classification), ``max(0, 1 - y s)``
        (linear SVM, a subgradient), or ``log(1 + exp(-y s))`` (logistic
        regression; enables ``predict_proba``). None is penalised.
"""
        + _COMMON_PARAMS
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)"""
        + _COMMON_ATTRS
        + _REFERENCES
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from dxrf.learners.sgd import RandomFeatureSGDClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2)); y = (X[:, 0] > 0).astype(int)
    >>> clf = RandomFeatureSGDClassifier(loss="logistic", random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
"""
    )

    _losses = LOSSES

    def fit(self, X: np.ndarray | da.Array, y: np.ndarray | da.Array) -> RandomFeatureSGDClassifier:
        """Draw the features and run one-vs-rest SGD.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
            Class labels.

        Returns
        -------
        self
        """
        self._check_params()
        X, y = self._validate_Xy(X, y, y_numeric=False, multi_output=False)
        y = y.reshape(-1) if is_dask(y) else np.asarray(y).reshape(-1)
        classes = self.classes_ = class_labels(y, type(self).__name__)
        Y = encode_classes(y, classes)
        self._fit_sgd(X, Y, task="classification", classes=classes)
        return self

    def decision_function(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Scores ``z(X) v + beta``.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples,) or (n_samples, n_classes)
            1-d for two classes (positive means ``classes_[1]``). Lazy for dask.
        """
        s = self._scores(X)
        return s[:, 0] if self.coef_.shape[1] == 1 else s

    def predict(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Predicted class labels (lazy for dask input).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples,)
        """
        s = self._scores(X)
        if is_dask(s):
            return s.map_blocks(
                _labels_block, self.classes_, drop_axis=1, dtype=self.classes_.dtype, meta=np.empty((0,), dtype=self.classes_.dtype)
            )
        return _labels_block(s, self.classes_)

    def _has_proba(self) -> bool:
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X: np.ndarray | da.Array) -> np.ndarray | da.Array:
        """Class probabilities (``loss="logistic"`` only).

        Two classes: ``[1 - p, p]`` with ``p = sigmoid(score)``. More classes:
        the one-vs-rest sigmoids normalised to sum to one (as scikit-learn's
        one-vs-rest logistic regression).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples, n_classes)
        """
        s = self._scores(X)
        if is_dask(s):
            return s.map_blocks(_proba_block, chunks=(s.chunks[0], (self.classes_.size,)), dtype=np.float64, meta=np.empty((0, 0)))
        return _proba_block(s)

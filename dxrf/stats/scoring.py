"""Scoring many linear models on held-out rows in one pass.

A model search ends with many coefficient sets: every (selection, M, lam,
alpha) of every feature map. :func:`score_models` reads X once and, tile by
tile, computes each map's candidate features once and multiplies them by all
the models on that map at once, accumulating squared errors, 0-1 errors and
log-losses. Per-tile sums are float64 on a global grid of rows and are added
with compensated arithmetic, so the scores do not depend on chunking or on the
number of workers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from dxrf.core.options import Options, resolve_options
from dxrf.core.validation import check_choice, check_dask_matrix, check_not_sparse, check_pass_options, check_seed, check_subset, is_dask
from dxrf.core.weights import check_sample_weight
from dxrf.stats.compensated import compensated_add
from dxrf.engine import Pass, Rows, block_groups, check_block, group_rows, run_pass
from dxrf.stats.accumulation import check_split, resolve_kernel
from dxrf.stats.tiles import check_weight_block

__all__ = ["LinearModels", "ModelScores", "score_models"]

TASKS = ("regression", "classification")
LINKS = ("identity", "logistic", "softmax")

# Rows per scoring tile: the tile of candidate features (rows x M0) and its
# scores (rows x P k) stay within a few tens of MiB at M0 = 4000.
_TILE_ROWS = 2048


@dataclasses.dataclass(frozen=True, eq=False)
class LinearModels:
    """A stack of ``P`` linear models on features of one feature map.

    Model ``p`` predicts ``s(x) = z_sel(x)^T coef[p] + intercept[p]`` where
    ``z_sel(x)_j = scales[j] * z(x)_{index[j]}`` selects (with repetitions and
    scales) among the map's features ``z``; without ``index`` it is ``z``.

    Parameters
    ----------
    features : fitted feature map or FeatureKernel
    coef : array of shape (P, M, k), (M, k) or (M,)
    intercept : array of shape (P, k), (k,) or scalar, default 0
    index : int array of shape (M,), optional
    scales : array of shape (M,), optional
    task : {"regression", "classification"}
        Regression scores the MSE against the targets. Classification takes
        integer class codes: with ``k = 1`` code 1 is predicted where
        ``s > 0``; with ``k > 1`` the argmax of ``s``. Its MSE is against
        one-hot +-1 targets (the least-squares classifier's loss).
    link : {"identity", "logistic", "softmax"}
        ``"logistic"`` (k = 1) and ``"softmax"`` (k > 1) also give the log-loss.
    """

    features: object
    coef: np.ndarray
    intercept: object = 0.0
    index: np.ndarray | None = None
    scales: np.ndarray | None = None
    task: str = "regression"
    link: str = "identity"


@dataclasses.dataclass(frozen=True)
class ModelScores:
    """Scores of a stack of ``P`` models over ``n`` rows (each array of shape (P,)).

    ``mse`` is the mean over rows and outputs of the squared error; ``error``
    the fraction of misclassified rows (classification); ``log_loss`` the mean
    negative log-likelihood (logistic and softmax links). With row weights
    each is a weighted mean (divided by the total weight), and ``n`` is the
    total weight (a float).
    """

    n: int | float
    mse: np.ndarray
    error: np.ndarray | None = None
    log_loss: np.ndarray | None = None


class _Group:
    """One :class:`LinearModels` made ready for the pass: coefficients on the candidate features."""

    def __init__(self, models: LinearModels, X: object) -> None:
        if not isinstance(models, LinearModels):
            raise TypeError(f"models must be LinearModels, got {type(models).__name__}")
        check_choice(models.task, "task", TASKS)
        check_choice(models.link, "link", LINKS)
        kernel = resolve_kernel(models.features, X)
        coef = np.asarray(models.coef, dtype=np.float64)
        if coef.ndim == 1:
            coef = coef[None, :, None]
        elif coef.ndim == 2:
            coef = coef[None]
        if coef.ndim != 3 or coef.shape[0] == 0:
            raise ValueError(f"coef must have shape (P, M, k), (M, k) or (M,), got {np.shape(models.coef)}")
        p, m, k = coef.shape
        if models.link == "logistic" and k != 1:
            raise ValueError(f"the logistic link needs one output per model, got {k}")
        if models.link == "softmax" and k < 2:
            raise ValueError("the softmax link needs at least two outputs per model")
        if not np.isfinite(coef).all():
            raise ValueError("coef contains NaN or infinity")
        icpt = np.asarray(models.intercept, dtype=np.float64)
        try:
            icpt = np.broadcast_to(icpt.reshape(-1, k) if icpt.ndim else icpt, (p, k)).copy()
        except ValueError:
            raise ValueError(f"intercept of shape {icpt.shape} does not fit {p} models of {k} outputs") from None
        if models.index is None:
            if m != kernel.n_components:
                raise ValueError(f"coef has {m} rows but the feature map has {kernel.n_components} features")
            theta = coef
        else:
            index, s = check_subset(models.index, models.scales, kernel.n_components)
            if index.shape != (m,):
                raise ValueError(f"index has {index.size} entries but coef has {m} rows")
            # repeated indices add up: one column of candidate features serves all its copies
            theta = np.zeros((p, kernel.n_components, k))
            np.add.at(theta, (slice(None), index), s[None, :, None] * coef)
        # (M0, P k): one matrix product scores every model of the group
        self.theta = np.ascontiguousarray(theta.transpose(1, 0, 2).reshape(kernel.n_components, p * k))
        self.intercept = icpt.reshape(-1)
        self.kernel = kernel
        self.p, self.k = p, k
        self.task, self.link = models.task, models.link

    @property
    def width(self) -> int:
        """Numbers of sums per group of rows: MSE, error and log-loss for each model."""
        return 3 * self.p

    def tile_sums(self, X: np.ndarray, y: np.ndarray, out: np.ndarray, w: np.ndarray | None = None) -> None:
        """Add this group's per-model sums over the rows of one tile into ``out`` (shape (3, P)).

        ``w``: row weights (float64), or None: every row counts once.
        """
        n = X.shape[0]

        def total(per_row: np.ndarray, axis: object = 0) -> np.ndarray:
            # rows on axis 0, times their weights (by 1 exactly: weights of ones change no bit)
            if w is not None:
                per_row = per_row * w.reshape((-1,) + (1,) * (per_row.ndim - 1))
            return per_row.sum(axis=axis)

        S = self.kernel(X).astype(np.float64, copy=False) @ self.theta
        S += self.intercept
        S = S.reshape(n, self.p, self.k)
        if self.task == "regression":
            Y = y.reshape(n, 1, -1)
            if Y.shape[2] != self.k:
                raise ValueError(f"y has {Y.shape[2]} columns but the models have {self.k} outputs")
            out[0] += total((S - Y) ** 2, axis=(0, 2))
            return
        codes = _class_codes(y, self.k, n)
        onehot = np.full((n, 1, max(self.k, 1)), -1.0)
        if self.k == 1:
            onehot[:, 0, 0] = np.where(codes == 1, 1.0, -1.0)
            wrong = (S[:, :, 0] > 0) != (codes[:, None] == 1)
        else:
            onehot[np.arange(n), 0, codes] = 1.0
            wrong = S.argmax(axis=2) != codes[:, None]
        out[0] += total((S - onehot) ** 2, axis=(0, 2))
        out[1] += total(wrong)
        if self.link == "logistic":
            t = onehot[:, :, 0]
            out[2] += total(np.logaddexp(0.0, -t * S[:, :, 0]))
        elif self.link == "softmax":
            top = S.max(axis=2, keepdims=True)
            lse = np.log(np.exp(S - top).sum(axis=2)) + top[:, :, 0]
            out[2] += total(lse - S[np.arange(n), :, codes])

    def scores(self, sums: np.ndarray, n: int) -> ModelScores:
        sums = sums.reshape(3, self.p)
        if n == 0:
            nan = np.full(self.p, np.nan)
            return ModelScores(0, nan, None if self.task == "regression" else nan, nan if self.link != "identity" else None)
        mse = sums[0] / (n * self.k)
        error = None if self.task == "regression" else sums[1] / n
        log_loss = sums[2] / n if self.link != "identity" else None
        return ModelScores(n, mse, error, log_loss)


def _class_codes(y: np.ndarray, k: int, n: int) -> np.ndarray:
    codes = y.reshape(n, -1)
    if codes.shape[1] != 1:
        raise ValueError(f"classification targets must be one column of class codes, got {codes.shape[1]} columns")
    codes = codes[:, 0]
    as_int = codes.astype(np.intp)
    if not np.array_equal(as_int, codes):
        raise ValueError("classification targets must be integer class codes")
    top = 2 if k == 1 else k
    if as_int.size and (as_int.min() < 0 or as_int.max() >= top):
        raise ValueError(f"class codes must lie in 0..{top - 1}, found {as_int.min()}..{as_int.max()}")
    return as_int


class _ScoreConfig:
    """What every block of a scoring pass needs: the groups, the tile grid and the split."""

    def __init__(
        self, groups: list[_Group], tile_rows: int, fraction: float | None, seed: int, parts: int, folds: int | None = None,
        weighted: bool = False,
    ) -> None:
        self.groups = groups
        self.tile_rows = tile_rows
        self.fraction = fraction
        self.seed = seed
        self.parts = parts
        self.folds = folds
        self.weighted = weighted
        self.width = sum(g.width for g in groups) + 1  # the last sum counts rows (or adds their weights)

    @property
    def nbytes(self) -> int:
        return sum(g.theta.nbytes + g.kernel.nbytes for g in self.groups)


def _tile_into(cfg: _ScoreConfig, X, y, mask, hi: np.ndarray, lo: np.ndarray, w=None) -> None:
    """Compensated add of one global tile's sums into the (parts, width) running sums."""
    for part, rows in enumerate(group_rows(mask, cfg.parts)):
        Xp, yp = X[rows], y[rows]
        wp = None if w is None else w[rows]
        if Xp.shape[0] == 0:
            continue
        tile = np.zeros(cfg.width)
        off = 0
        for g in cfg.groups:
            g.tile_sums(Xp, yp, tile[off : off + g.width].reshape(3, g.p), wp)
            off += g.width
        tile[-1] = Xp.shape[0] if wp is None else wp.sum()
        compensated_add(hi[part], lo[part], tile)


def _score_block(X, columns, rows: Rows, cfg: _ScoreConfig, running):
    y, mask, weight = columns
    X = check_block(X, cfg.groups[0].kernel.n_features_in, rows.start)
    w = check_weight_block(weight, X.shape[0], rows.start)
    y = np.asarray(y, dtype=np.float64).reshape(X.shape[0], -1)
    if not np.isfinite(y).all():
        raise ValueError(f"y contains NaN or infinity (in rows {rows.start}..{rows.stop - 1})")
    mask = block_groups(rows.start, X.shape[0], mask, fraction=cfg.fraction, folds=cfg.folds, seed=cfg.seed)
    hi, lo = np.zeros((cfg.parts, cfg.width)), np.zeros((cfg.parts, cfg.width))
    fragments = {}
    for a_, b_, t, whole in rows.tiles(cfg.tile_rows):
        a, b = a_ - rows.start, b_ - rows.start
        m = None if mask is None else mask[a:b]
        if whole:
            _tile_into(cfg, X[a:b], y[a:b], m, hi, lo, None if w is None else w[a:b])
        else:
            fragments[(0, t)] = (a_, X[a:b].copy(), y[a:b].copy(), None if m is None else m.copy(),
                                 None if w is None else w[a:b].copy())
    return (hi, lo), fragments


def _score_fixup(key, cfg: _ScoreConfig, *fragment_maps):
    pieces = sorted((fm[key] for fm in fragment_maps if key in fm), key=lambda p: p[0])
    X = np.concatenate([p[1] for p in pieces])
    y = np.concatenate([p[2] for p in pieces])
    mask = None if pieces[0][3] is None else np.concatenate([p[3] for p in pieces])
    w = None if pieces[0][4] is None else np.concatenate([p[4] for p in pieces])
    hi, lo = np.zeros((cfg.parts, cfg.width)), np.zeros((cfg.parts, cfg.width))
    _tile_into(cfg, X, y, mask, hi, lo, w)
    return hi, lo


def _score_merge(*parts):
    hi, lo = parts[0]
    for ohi, olo in parts[1:]:
        compensated_add(hi, lo, ohi)
        lo += olo
    return hi, lo


def _score_finish(partial, cfg: _ScoreConfig) -> list:
    hi, lo = partial
    total = hi + lo
    out = []
    for part in range(cfg.parts):
        n = float(total[part, -1]) if cfg.weighted else int(round(total[part, -1]))
        off, res = 0, []
        for g in cfg.groups:
            res.append(g.scores(total[part, off : off + g.width], n))
            off += g.width
        out.append(res)
    return out


def score_models(
    X: object,
    y: object,
    models: Sequence[LinearModels],
    *,
    split: float | np.ndarray | None = None,
    split_seed: int = 0,
    folds: int | None = None,
    progress: bool | None = None,
    sample_weight: object = None,
    options: Options | None = None,
) -> list:
    """Score many stacks of linear models on the rows of ``X`` in one pass.

    Parameters
    ----------
    X : ndarray or dask array of shape (N, d)
    y : array of shape (N,) or (N, k)
        Regression targets, or integer class codes for classification models.
    models : sequence of LinearModels
        Each stack on its own feature map (or subset of a map's candidates);
        stacks on the same map share nothing but the read of X.
    split : float or bool array of shape (N,), optional
        As in :func:`dxrf.accumulate`: a hashed fraction of rows (with
        ``split_seed``) or a mask of validation rows. Then both the training
        and the validation rows are scored, in the same pass.
    split_seed : int, default=0
        Seed of the hashed split, and of the hashed folds.
    folds : int or integer array of shape (N,), optional
        ``k >= 2``: the rows of each of ``k`` hashed folds are scored apart
        (the folds of :func:`dxrf.accumulate` with the same ``split_seed``);
        or each row's fold label ``0 .. k - 1`` (NumPy or dask), as in
        :func:`dxrf.accumulate`. Not together with ``split``.
    progress : bool, optional
    sample_weight : array of shape (N,), optional
        Row weights (NumPy or dask): every score is then a weighted mean,
        ``sum_n w_n e_n / sum_n w_n`` (MSE, 0-1 error, log-loss).
    options : Options, optional
        Runtime options of the pass (default: :func:`dxrf.get_options` at
        this call); ``progress`` given here overrides theirs.

    Returns
    -------
    list of ModelScores, one per stack (or, with ``split``, a pair of such
    lists ``(train, validation)``; with ``folds``, a list of ``k`` such lists,
    one per fold, empty folds scoring NaN with ``n = 0``).
    """
    _, _, progress, _ = check_pass_options(progress=progress)
    opts = resolve_options(options, progress=progress)  # read once: the pass below gets them explicitly
    split_seed = check_seed(split_seed, "split_seed")
    check_not_sparse(X)
    check_not_sparse(y, "y")
    models = list(models)
    if not models:
        raise ValueError("models is empty: give at least one LinearModels")
    groups = [_Group(m, X) for m in models]
    d = {g.kernel.n_features_in for g in groups}
    if len(d) > 1:
        raise ValueError(f"the models' feature maps expect different numbers of input columns: {sorted(d)}")
    if y is None:
        raise ValueError("y is required to score models")
    if is_dask(X):
        X = check_dask_matrix(X, n_features=d.pop())
    else:
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[0] == 0:
            raise ValueError(f"X must be a non-empty 2-d array, got shape {X.shape}")
        y = np.asarray(y)
        if y.ndim == 0 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0] if y.ndim else 0} rows but X has {X.shape[0]}")
    fraction, column, folds, parts = check_split(split, folds, X, opts)
    weight = check_sample_weight(sample_weight, int(X.shape[0]))
    cfg = _ScoreConfig(groups, _TILE_ROWS, fraction, split_seed, parts, folds, weighted=weight is not None)
    spec = Pass(
        block=_score_block, merge=_score_merge, finish=_score_finish, fixup=_score_fixup,
        tile_grids=(cfg.tile_rows,), partial_bytes=2 * 8 * parts * cfg.width,
    )
    out = run_pass(spec, X, (y, column, weight), (cfg,), options=opts,
                   names=("y", "split" if split is not None else "folds", "sample_weight"))
    if split is None and parts > 1:  # folds: one list per fold
        return out
    return out[0] if parts == 1 else (out[0], out[1])

"""Scoring the search's models on rows: stacked models and the accuracy pass.

The validation of :mod:`dxrf.search.evaluate` is exact algebra on the pass's
statistics; accuracy is not a function of those statistics, so
``scoring="accuracy"`` scores every configuration's fold models in one more
pass (:func:`dxrf.score_models`), all stacked on their bandwidth's candidates.
"""

from __future__ import annotations

import numpy as np

from dxrf.core.validation import is_dask
from dxrf.search.grid import SearchGrid
from dxrf.stats.scoring import LinearModels, score_models

__all__ = ["class_codes", "label_codes", "stacked_models", "validation_accuracy"]


def class_codes(T: object) -> object:
    """Integer class codes from +-1 class columns (one column for two classes)."""
    return (T[:, 0] > 0).astype(np.int64) if T.shape[1] == 1 else T.argmax(axis=1)


def label_codes(y: object, classes: np.ndarray) -> object:
    """Codes (positions in ``classes``) of class labels; ``ValueError`` for a label not in ``classes``."""

    def codes(block: np.ndarray) -> np.ndarray:
        block = np.asarray(block).reshape(-1)
        c = np.clip(np.searchsorted(classes, block), 0, classes.size - 1)
        if not np.array_equal(classes[c], block):
            raise ValueError(f"y holds labels that fit did not see (classes_ = {classes.tolist()})")
        return c.astype(np.int64)

    return y.reshape(-1).map_blocks(codes, dtype=np.int64) if is_dask(y) else codes(y)


def stacked_models(kernel: object, entries: list, task: str) -> LinearModels:
    """One :class:`LinearModels` stack on ``kernel``'s candidates from ``(index, scales, coefs, intercepts)`` entries.

    Each entry's ``coefs`` (shape ``(P, M, k)``) are scattered onto the
    candidates they select, so one product per tile scores every model.
    """
    m0, k = kernel.n_components, entries[0][2].shape[2]
    theta = np.zeros((sum(e[2].shape[0] for e in entries), m0, k))
    icpts = np.zeros((theta.shape[0], k))
    row = 0
    for idx, sc, coef, icpt in entries:
        p = coef.shape[0]
        np.add.at(theta[row : row + p], (slice(None), idx), sc[None, :, None] * coef)  # repeats add up
        icpts[row : row + p] = icpt
        row += p
    return LinearModels(kernel, theta, icpts, task=task)


def _searched(found: object, grid: SearchGrid, b: int) -> list[tuple[int, int]]:
    """The (variant, M) searched at bandwidth ``b`` (all, unless bandwidth_choice="plain" pruned some)."""
    return [(v, i) for v in range(len(grid.variants)) for i in range(grid.n_components.size) if (b, 0, v, i) in found.paths]


def _fold_errors(scores: object, n_maps: int, n_folds: int, kfold: bool) -> tuple[list, list]:
    """Per bandwidth and fold, the misclassification rates on validation and on training rows.

    k folds: fold ``j``'s models are read on fold ``j``'s rows for validation,
    and on the other folds' rows (their weighted mean) for training.
    """
    if not kfold:
        tr, va = scores
        return [[va[b].error] for b in range(n_maps)], [[tr[b].error] for b in range(n_maps)]
    valid = [[scores[f][b * n_folds + f].error for f in range(n_folds)] for b in range(n_maps)]
    train = []
    for b in range(n_maps):
        per_fold = []
        for f in range(n_folds):
            others = [scores[j][b * n_folds + f] for j in range(n_folds) if j != f]  # n: rows or total weight
            total = sum(o.n for o in others)
            per_fold.append(sum(o.n * o.error for o in others) / (total if total > 0 else 1.0))
        train.append(per_fold)
    return valid, train


def validation_accuracy(
    X: object, T: object, kernels: list, found: object, grid: SearchGrid, kind: str, cv: object, cv_seed: int,
    sample_weight: object = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Validation and training accuracy of every configuration, from one scoring pass over X.

    Each fold's models (every variant, M and alpha, fitted on the fold's
    training rows) are scattered onto their bandwidth's candidate kernel
    (``kernels[b]``: the candidates, or the landmarks' kernel values), so one
    product per tile scores them all (:func:`dxrf.score_models`); fold ``j``'s
    models are read on fold ``j``'s rows for validation, and on the other
    rows for training. With ``sample_weight`` the accuracy is the weighted
    fraction of rows classified right. Returns ``(validation, training)``: per
    bandwidth, an array of shape (folds, variants, len(M), len(alpha)).
    """
    n_folds = len(found.mse[0])
    kept = [_searched(found, grid, b) for b in range(len(kernels))]
    models = [
        stacked_models(kernel, [found.paths[b, f, v, i] for v, i in kept[b]], "classification")
        for b, kernel in enumerate(kernels) for f in range(n_folds)
    ]
    where = {"folds": cv} if kind == "kfold" else {"split": cv}
    scores = score_models(X, class_codes(T), models, split_seed=cv_seed, sample_weight=sample_weight, **where)
    valid, train = _fold_errors(scores, len(kernels), n_folds, kind == "kfold")
    shape = (len(grid.variants), grid.n_components.size, grid.alphas.size)

    def spread(e: np.ndarray, present: list) -> np.ndarray:
        full = np.full(shape, np.nan)  # configurations not searched stay NaN
        for j, (v, i) in enumerate(present):
            full[v, i] = e[j * grid.alphas.size : (j + 1) * grid.alphas.size]
        return 1.0 - full

    return tuple(
        [np.stack([spread(e, kept[b]) for e in per_fold]) for b, per_fold in enumerate(errors)] for errors in (valid, train)
    )

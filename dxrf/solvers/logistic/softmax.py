"""The multinomial (softmax) loss of one tile of rows, and its public per-block functions.

Objective, for K classes, scores ``f_n = W^T z_n + b`` (``W`` of shape (M, K))::

    L(W, b) = (1/N) sum_n [logsumexp(f_n) - f_{n, y_n}] + (alpha/2) |W|_F^2

with the intercepts ``b`` unpenalised: scikit-learn's multinomial
``LogisticRegression(C=1 / (N alpha))``. A pass's per-block kernel is the
logistic one (:func:`~.sums._block_sums`: features tile by tile, ONE product
for every score column, ONE product with ``Z^T`` for every gradient and
Hessian-vector product); a multinomial pass (``_Spec.multinomial``) treats its
K point columns as one softmax and calls :func:`softmax_rows` for the per-row
terms. The sums keep the binary layout: the loss is split by the class of the
row (``loss[k]`` sums the rows of class k, so the total is ``loss.sum()``),
and so are the line-search losses. The public per-block functions
(:func:`~.sums.softmax_block`, :func:`~.sums.softmax_hvp_block`) live with the
logistic ones.
"""

from __future__ import annotations

import numpy as np



def class_index(T: np.ndarray, row_offset: int = 0) -> np.ndarray:
    """The class of each row of one-hot +-1 labels ``T`` (N, K): the column holding +1.

    Raises ``ValueError`` naming the first row without exactly one +1.
    """
    positive = T > 0
    count = positive.sum(axis=1)
    bad = np.flatnonzero(count != 1)
    if bad.size:
        row = int(bad[0])
        raise ValueError(
            f"multinomial labels T must be one-hot (+1 in exactly one column, -1 elsewhere); "
            f"row {row + row_offset} has {int(count[row])} columns at +1"
        )
    return np.argmax(positive, axis=1)


def _log_softmax_parts(f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(e, s, lse)``: ``e = exp(f - max f)`` per row, ``s`` its row sums, ``lse = logsumexp(f)``.

    Shifting by the row maximum keeps every exponent <= 0: no overflow, and
    ``s >= 1``, so ``log(s)`` never meets 0.
    """
    fmax = f.max(axis=1)
    e = f - fmax[:, None]
    np.exp(e, out=e)
    s = e.sum(axis=1)
    return e, s, fmax + np.log(s)


def _row_losses(f: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``logsumexp(f_n) - f_{n, y_n}`` per row, >= 0."""
    return _log_softmax_parts(f)[2] - f[np.arange(f.shape[0]), y]


def softmax_rows(
    f: np.ndarray,
    y: np.ndarray,
    *,
    grad_out: np.ndarray | None = None,
    u: np.ndarray | None = None,
    hv_out: np.ndarray | None = None,
    d: np.ndarray | None = None,
    steps: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The per-row terms of the softmax loss of one tile: a pure NumPy function.

    Parameters
    ----------
    f : ndarray of shape (n, K)
        float64 scores at the point.
    y : ndarray of shape (n,)
        Class index of each row.
    grad_out : ndarray of shape (n, K), optional
        Receives ``d loss_n / d f_n = p_n - e_{y_n}`` (``p = softmax(f)``);
        the loss is computed only with it.
    u, hv_out : ndarray of shape (n, K), optional
        Scores of a Hessian-vector direction; ``hv_out`` receives
        ``p * u - p (p . u)``, the Hessian of ``loss_n`` in ``f_n`` times ``u_n``.
    d, steps : optional
        Scores of a line-search direction (n, K) and the steps ``s``: losses at
        ``f - (1 - s) d``.
    weights : ndarray of shape (n,), optional
        Per-row weights multiplying every term (none: 1).

    Returns
    -------
    loss : ndarray of shape (K,)
        ``sum`` of the row losses, split by the class of the row (zeros
        without ``grad_out``).
    line : ndarray of shape (len(steps), K)
        The line-search losses, split the same way (empty without ``d``).
    """
    n, k = f.shape
    loss = np.zeros(k)
    line = np.zeros((0 if steps is None else len(steps), k))
    if n == 0:
        return loss, line
    if grad_out is not None or hv_out is not None:
        e, s, lse = _log_softmax_parts(f)
        p = np.divide(e, s[:, None], out=e)
        if grad_out is not None:
            np.copyto(grad_out, p)
            grad_out[np.arange(n), y] -= 1.0
            row_loss = lse - f[np.arange(n), y]
            if weights is not None:
                grad_out *= weights[:, None]
                row_loss *= weights
            loss = np.bincount(y, weights=row_loss, minlength=k).astype(np.float64)
        if hv_out is not None:
            np.multiply(p, u, out=hv_out)
            hv_out -= p * hv_out.sum(axis=1, keepdims=True)
            if weights is not None:
                hv_out *= weights[:, None]
    if d is not None and steps is not None:
        for i, step in enumerate(steps):
            row_loss = _row_losses(f - (1.0 - step) * d, y)
            if weights is not None:
                row_loss *= weights
            line[i] = np.bincount(y, weights=row_loss, minlength=k)
    return loss, line

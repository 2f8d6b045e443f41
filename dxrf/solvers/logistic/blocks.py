"""The public per-block functions: :func:`logistic_block` and :func:`logistic_hvp_block`
(binary) and :func:`softmax_block` and :func:`softmax_hvp_block` (multinomial).

Each is one call of :func:`~.sums._block_sums` on a block, finished in
scaled-feature coordinates.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dxrf.core.blas import blas_limit
from dxrf.core.options import Options, resolve_options
from dxrf.core.validation import check_int
from dxrf.kernels.kernel import FeatureKernel
from dxrf.solvers.logistic.objective import _check_labels
from dxrf.solvers.logistic.sums import _block_sums, _Final, _finalize, _make_spec, _Spec, _tile_rows


@dataclasses.dataclass
class LogisticSums:
    """Sums over the rows of a block, at given coefficients (no penalty, not divided by N).

    Attributes
    ----------
    loss : ndarray of shape (K,)
        ``sum_n log(1 + exp(-t_n f_n))`` per class.
    grad : ndarray of shape (M + 1, K)
        ``sum_n r_n [z_n; 1]`` with ``r = -t sigma(-t f)``; the last row is the
        intercept's.
    hessian : ndarray of shape (K, M + 1, M + 1) or None
        ``sum_n w_n [z_n; 1][z_n; 1]^T`` with ``w = sigma(f) (1 - sigma(f))``.
    n : int
        Number of rows.
    """

    loss: np.ndarray
    grad: np.ndarray
    hessian: np.ndarray | None
    n: int



def _as_points(coef: np.ndarray, intercept: object, m: int) -> np.ndarray:
    coef = np.asarray(coef, dtype=np.float64)
    if coef.ndim == 1:
        coef = coef[:, None]
    if coef.ndim != 2 or coef.shape[0] != m:
        raise ValueError(f"coef has shape {coef.shape}; expected ({m},) or ({m}, K)")
    k = coef.shape[1]
    b = np.broadcast_to(np.asarray(intercept, dtype=np.float64).reshape(-1), (k,))
    return np.vstack([coef, b[None, :]])


def _one_block(
    X: np.ndarray, T: np.ndarray, kernel: FeatureKernel, spec: _Spec, tile_rows: int | None, blas_threads: int | None,
    options: Options,
) -> _Final:
    """The finished sums of one block: the body of the public per-block functions."""
    rows = check_int(tile_rows, "tile_rows", allow_none=True) or _tile_rows(kernel, options)
    with blas_limit(blas_threads):
        return _finalize(_block_sums(X, T, kernel, spec, rows), kernel)


def logistic_block(
    X_block: np.ndarray,
    T_block: np.ndarray,
    kernel: FeatureKernel,
    coef: np.ndarray,
    intercept: np.ndarray | float,
    *,
    hessian: bool,
    tile_rows: int | None = None,
    blas_threads: int | None = None,
    options: Options | None = None,
) -> LogisticSums:
    """Log-loss, gradient and optionally Hessian sums of one block: a pure NumPy function.

    With ``hessian=False`` this is the gradient-only block of L-BFGS.

    Parameters
    ----------
    X_block : ndarray of shape (n, d)
    T_block : ndarray of shape (n,) or (n, K)
        Labels in {-1, +1}, one column per binary problem.
    kernel : FeatureKernel
        The feature map ``z``; features are computed in its dtype.
    coef : ndarray of shape (M,) or (M, K)
    intercept : float or ndarray of shape (K,)
    hessian : bool
        Also accumulate the K Hessians (``K (M+1)^2 * 8`` bytes).
    tile_rows : int, optional
        Rows of features computed at a time (default from ``options``).
    blas_threads : int, optional
        Limit BLAS threads for this call.
    options : Options, optional
        Options giving the default ``tile_rows`` (default:
        :func:`dxrf.get_options` at this call).

    Returns
    -------
    LogisticSums
        Sums over the block's rows, without penalty and not divided by n.
    """
    m = kernel.n_components
    points = _as_points(coef, intercept, m)
    k = points.shape[1]
    T = _check_labels(T_block, np.asarray(X_block).shape[0])
    if T.shape[1] != k:
        raise ValueError(f"T_block has {T.shape[1]} label columns but coef has {k}")
    idx = np.arange(k)
    spec = _make_spec(kernel, idx, points, grad=idx, hess=idx if hessian else idx[:0])
    out = _one_block(X_block, T, kernel, spec, tile_rows, blas_threads, resolve_options(options))
    return LogisticSums(out.loss, out.grad, out.hess if hessian else None, out.n)


def logistic_hvp_block(
    X_block: np.ndarray,
    T_block: np.ndarray,
    kernel: FeatureKernel,
    coef: np.ndarray,
    intercept: np.ndarray | float,
    vectors: np.ndarray,
    *,
    tile_rows: int | None = None,
    blas_threads: int | None = None,
    options: Options | None = None,
) -> np.ndarray:
    """Hessian-vector products of one block: ``sum_n w_n [z_n; 1] ([z_n; 1]^T v_k)`` per class.

    The building block of the Newton-CG solver (one pass per product);
    ``w = sigma(f)(1 - sigma(f))`` at the scores of ``coef``, ``intercept``.

    Parameters
    ----------
    X_block, T_block, kernel, coef, intercept
        As in :func:`logistic_block`.
    vectors : ndarray of shape (M + 1,) or (M + 1, K)
        One vector per class; the last entry multiplies the intercept.

    Returns
    -------
    ndarray of shape (M + 1, K)
        Without penalty and not divided by n.
    """
    m = kernel.n_components
    points = _as_points(coef, intercept, m)
    k = points.shape[1]
    V = np.asarray(vectors, dtype=np.float64).reshape(m + 1, -1)
    if V.shape[1] != k:
        raise ValueError(f"vectors has shape {np.shape(vectors)}; expected ({m + 1}, {k})")
    T = _check_labels(T_block, np.asarray(X_block).shape[0])
    if T.shape[1] != k:
        raise ValueError(f"T_block has {T.shape[1]} label columns but coef has {k}")
    idx = np.arange(k)
    spec = _make_spec(kernel, idx, points, grad=idx[:0], hess=idx[:0], hv=idx, vectors=V)
    out = _one_block(X_block, T, kernel, spec, tile_rows, blas_threads, resolve_options(options))
    return out.hv


def _multinomial_spec(kernel, coef: np.ndarray, intercept: object, T_block: np.ndarray, **extra):
    m = kernel.n_components
    points = _as_points(coef, intercept, m)
    k = points.shape[1]
    T = np.asarray(T_block)
    if T.ndim != 2 or T.shape[1] != k:
        raise ValueError(f"T_block has shape {T.shape}; expected (n, {k}): one-hot +-1 columns, one per class of coef")
    idx = np.arange(k)
    return _make_spec(kernel, idx, points, multinomial=True, **extra), idx


def softmax_block(
    X_block: np.ndarray,
    T_block: np.ndarray,
    kernel: FeatureKernel,
    coef: np.ndarray,
    intercept: np.ndarray | float,
    *,
    tile_rows: int | None = None,
    blas_threads: int | None = None,
    options: Options | None = None,
) -> LogisticSums:
    """Softmax loss and gradient sums of one block of rows: a pure NumPy function.

    Parameters
    ----------
    X_block : ndarray of shape (n, d)
    T_block : ndarray of shape (n, K)
        One-hot +-1 labels: +1 in the column of the row's class.
    kernel : FeatureKernel
    coef : ndarray of shape (M, K)
    intercept : float or ndarray of shape (K,)
    tile_rows, blas_threads, options
        As in :func:`logistic_block`.

    Returns
    -------
    LogisticSums
        ``loss`` (K,): the row losses ``logsumexp(f_n) - f_{n, y_n}`` summed by
        the class of the row; ``grad`` (M + 1, K): ``sum_n [z_n; 1] (p_n - e_{y_n})^T``;
        no Hessian. Without penalty and not divided by n.
    """
    spec, idx = _multinomial_spec(kernel, coef, intercept, T_block, grad=np.arange(np.shape(coef)[-1]), hess=np.zeros(0, np.intp))
    out = _one_block(X_block, T_block, kernel, spec, tile_rows, blas_threads, resolve_options(options))
    return LogisticSums(out.loss, out.grad, None, out.n)


def softmax_hvp_block(
    X_block: np.ndarray,
    T_block: np.ndarray,
    kernel: FeatureKernel,
    coef: np.ndarray,
    intercept: np.ndarray | float,
    vector: np.ndarray,
    *,
    tile_rows: int | None = None,
    blas_threads: int | None = None,
    options: Options | None = None,
) -> np.ndarray:
    """The softmax loss's Hessian (in ``[W; b]``) times ``vector``, summed over one block.

    ``sum_n [z_n; 1] (p_n * u_n - p_n (p_n . u_n))^T`` with ``u_n = V^T [z_n; 1]``.

    Parameters
    ----------
    vector : ndarray of shape (M + 1, K)
        The direction; its last row multiplies the intercepts.

    Returns
    -------
    ndarray of shape (M + 1, K)
        Without penalty and not divided by n.
    """
    m = kernel.n_components
    k = np.shape(coef)[-1]
    V = np.asarray(vector, dtype=np.float64)
    if V.shape != (m + 1, k):
        raise ValueError(f"vector has shape {V.shape}; expected ({m + 1}, {k})")
    none = np.zeros(0, np.intp)
    spec, idx = _multinomial_spec(kernel, coef, intercept, T_block, grad=none, hess=none, hv=np.arange(k), vectors=V)
    out = _one_block(X_block, T_block, kernel, spec, tile_rows, blas_threads, resolve_options(options))
    return out.hv

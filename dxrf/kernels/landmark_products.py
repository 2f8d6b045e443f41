"""Products with a block of landmark kernel values, never held whole: the pure kernel of a CG pass.

For rows ``X_b`` and a Nyström kernel (landmarks ``L``), ``K_b = k(X_b, L)``
is an ``n_b x M`` block. A conjugate-gradient iteration of the Nyström ridge
(:mod:`dxrf.solvers.pcg`) needs ``K_b^T (w * (K_b V))`` for ``t`` directions
``V`` at once, and its first pass the sums ``K_b^T w``, ``K_b^T (w * Y_b)``.
:func:`landmark_products` computes them sub-block by sub-block of rows into
one reused buffer of ``n_sub x M`` kernel values (the kernel's own
:meth:`~dxrf.kernels.kernel.FeatureKernel.base`, so every landmark kernel
and bandwidth it supports comes for free), in the kernel's dtype, and adds
the small products in float64.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dxrf.core.buffers import thread_buffer
from dxrf.kernels.kernel import FeatureKernel

__all__ = ["LandmarkProducts", "landmark_products", "split_products", "kernel_values", "sub_rows_for", "SUB_ROWS"]

#: the most rows of kernel values per sub-block
SUB_ROWS = 2048
#: the fewest, whatever M (below this the products' per-call costs show)
MIN_SUB_ROWS = 128
#: bytes of kernel values per sub-block: the block is written by the product, swept by the
#: clamp and the exponential, and read by the two products of K V. Measured at d = 3 on two
#: threads at once (as a pass runs), ns per kernel value: M = 10 000, 1.48 in sub-blocks of
#: 2048 rows (80 MB), 0.85-0.94 in 192-512 rows; M = 20 000, 1.62 against 0.92-1.00 in
#: 128-512 rows; M = 4000 at d = 8, 0.92-0.97 at any size. At d = 784 the product dominates
SUB_BLOCK_BYTES = 16 << 20


def sub_rows_for(m: int, itemsize: int) -> int:
    """Rows per sub-block of ``m`` kernel values of ``itemsize`` bytes: about :data:`SUB_BLOCK_BYTES`, a multiple of 64.

    The pass, the feature cache and :func:`kernel_values` all cut a block's
    rows by this, from its first row, so cached values are those a pass computes.
    """
    rows = SUB_BLOCK_BYTES // max(1, int(m) * int(itemsize)) // 64 * 64
    return int(min(SUB_ROWS, max(MIN_SUB_ROWS, rows)))


@dataclasses.dataclass
class LandmarkProducts:
    """Float64 sums over a block of rows (``None`` where not asked for).

    ``kkv``: ``K^T (w * (K V))`` of shape ``(M, t)``; ``ky``: ``K^T (w * Y)``
    of shape ``(M, k)``; ``ksum``: ``K^T w`` (M,); ``ysum``: ``Y^T w`` (k,);
    ``yy``: ``sum_n w_n y_n^2`` per output (k,); ``n``: ``sum_n w_n``.
    """

    kkv: np.ndarray | None = None
    ky: np.ndarray | None = None
    ksum: np.ndarray | None = None
    ysum: np.ndarray | None = None
    yy: np.ndarray | None = None
    n: float = 0.0

    def __iadd__(self, other: LandmarkProducts) -> LandmarkProducts:
        for f in ("kkv", "ky", "ksum", "ysum", "yy"):
            a, b = getattr(self, f), getattr(other, f)
            if a is None:
                setattr(self, f, None if b is None else b.copy())
            elif b is not None:
                a += b
        self.n += other.n
        return self


def landmark_products(
    X: np.ndarray,
    kernel: FeatureKernel,
    V: np.ndarray | None = None,
    Y: np.ndarray | None = None,
    w: np.ndarray | None = None,
    *,
    sub_rows: int | None = None,
    precomputed: bool = False,
) -> LandmarkProducts:
    """Products of the kernel values ``K = k(X, L)`` of one block of rows with ``V`` and ``Y``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Rows; with ``precomputed``, their kernel values (n, M) instead.
    kernel : FeatureKernel
        A kernel without whitening whose base features are the kernel values
        against the landmarks (:func:`dxrf.solvers.landmark_solve.landmark_values`).
    V : ndarray of shape (M, t), optional
        Directions: gives ``kkv = K^T (w * (K V))``.
    Y : ndarray of shape (n, k), optional
        Targets: gives ``ky``, ``ksum``, ``ysum`` and ``yy``.
    w : ndarray of shape (n,), optional
        Row weights (default ones).
    sub_rows : int, optional
        Rows of kernel values held at once (bounded memory whatever ``n``;
        default :func:`sub_rows_for`).
    precomputed : bool
        ``X`` holds the kernel values (the feature cache's block, made by
        :func:`kernel_values` on the same sub-blocks): the products are then
        the same to the bit.

    Returns
    -------
    LandmarkProducts
    """
    return split_products(X, kernel, V, Y, w, sub_rows=sub_rows, precomputed=precomputed)[0]


def kernel_values(X: np.ndarray, out: np.ndarray, kernel: FeatureKernel, sub_rows: int | None = None) -> None:
    """Fill ``out`` (n, M) with ``k(X, L)``, ``sub_rows`` rows at a time from ``X``'s first row, as the products compute them."""
    sub_rows = sub_rows or sub_rows_for(kernel.n_base, kernel.dtype.itemsize)
    for a in range(0, X.shape[0], sub_rows):
        b = min(X.shape[0], a + sub_rows)
        kernel.base(X[a:b], out=out[a:b])


def _add_kkv(outs: tuple, K: np.ndarray, Vd: np.ndarray, w: np.ndarray | None, valid: np.ndarray | None) -> None:
    """Add a sub-block's ``K^T (w * (K V))`` to its groups' sums, without copying the rows of ``K``.

    ``K^T (K V)`` is formed as ``((K V)^T K)^T``: OpenBLAS reads ``K`` faster
    for a thin result this way round (2048 x 20 000 float32, t = 10: 27 ms
    against 39 ms for ``K.T @ KV``). With a split, the rows of ``K V`` are
    masked for each group (zero outside it) and both groups' rows of
    ``(K V)^T`` multiply ``K`` in one product: copying the training and
    validation rows of ``K`` apart cost more than the products themselves
    (flights-3m, M = 10 000, four columns: 2.6 s a pass for 10^5 rows, most
    of it in those copies). Each sub-block in the kernel's dtype, summed in float64.
    """
    KV = K @ Vd  # (n_sub, t), in the kernel's dtype
    if w is not None:
        KV *= w.astype(K.dtype)[:, None]
    if valid is None:
        outs[0].kkv += (np.ascontiguousarray(KV.T) @ K).T
        return
    t = KV.shape[1]
    both = np.empty((2 * t, KV.shape[0]), dtype=KV.dtype)
    np.multiply(KV.T, ~valid, out=both[:t])
    np.multiply(KV.T, valid, out=both[t:])
    prod = both @ K  # (2t, M)
    outs[0].kkv += prod[:t].T
    outs[1].kkv += prod[t:].T


def split_products(
    X: np.ndarray,
    kernel: FeatureKernel,
    V: np.ndarray | None = None,
    Y: np.ndarray | None = None,
    w: np.ndarray | None = None,
    valid: np.ndarray | None = None,
    *,
    sub_rows: int | None = None,
    precomputed: bool = False,
) -> tuple[LandmarkProducts, ...]:
    """:func:`landmark_products` of a block's rows in two groups: ``(training, validation)`` by the mask ``valid``.

    Each row's kernel values are computed once, a sub-block at a time, and
    the sub-block's rows go to their group; without ``valid``, one group.
    """
    n, m = X.shape[0], kernel.n_base
    dtype = kernel.dtype
    sub_rows = sub_rows or sub_rows_for(m, dtype.itemsize)
    outs = tuple(LandmarkProducts() for _ in range(1 if valid is None else 2))
    if V is not None:
        V = np.asarray(V, dtype=np.float64)
        Vd = V.astype(dtype)  # the product K V in the kernel's dtype, its columns summed in float64 below
        for out in outs:
            out.kkv = np.zeros((m, V.shape[1]))
    if Y is not None:
        Y = np.asarray(Y, dtype=np.float64)
        Y = Y.reshape(n, 1) if Y.ndim == 1 else Y  # not reshape(n, -1): a block may have no rows
        for out in outs:
            out.ky = np.zeros((m, Y.shape[1]))
            out.ksum = np.zeros(m)
    wf = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
    for a in range(0, n, sub_rows):
        b = min(n, a + sub_rows)
        if precomputed:
            K = X[a:b]
        else:
            K = kernel.base(X[a:b], out=thread_buffer("landmark-products", (b - a, m), dtype))
        v = None if valid is None else np.asarray(valid[a:b], dtype=bool)
        if V is not None:
            _add_kkv(outs, K, Vd, None if w is None else wf[a:b], v)
        if Y is None:
            continue
        if v is None:
            parts = ((outs[0], K, slice(a, b)),)
        else:
            rows = np.arange(a, b)
            parts = ((outs[0], K[~v], rows[~v]), (outs[1], K[v], rows[v]))
        for out, Kg, at in parts:
            if Kg.shape[0] == 0:
                continue
            wb = None if w is None else wf[at]
            # the first pass only: the groups' rows are copied apart once
            Yb = Y[at] if wb is None else Y[at] * wb[:, None]
            out.ky += Kg.T @ Yb.astype(dtype)
            out.ksum += Kg.sum(axis=0, dtype=np.float64) if wb is None else Kg.T @ wb.astype(dtype)
    groups = (np.ones(n, dtype=bool),) if valid is None else (~np.asarray(valid, dtype=bool), np.asarray(valid, dtype=bool))
    for out, g in zip(outs, groups):
        if Y is not None:
            out.ysum = wf[g] @ Y[g]
            out.yy = wf[g] @ (Y[g] * Y[g])
        out.n = float(np.sum(wf[g], dtype=np.float64))
    return outs

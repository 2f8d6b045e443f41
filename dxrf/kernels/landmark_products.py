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

__all__ = ["LandmarkProducts", "landmark_products", "SUB_ROWS"]

#: rows of kernel values per sub-block: 2048 x M floats (80 MB in float32 at M = 10 000)
SUB_ROWS = 2048


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
    sub_rows: int = SUB_ROWS,
) -> LandmarkProducts:
    """Products of the kernel values ``K = k(X, L)`` of one block of rows with ``V`` and ``Y``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    kernel : FeatureKernel
        A kernel without whitening whose base features are the kernel values
        against the landmarks (:func:`dxrf.solvers.landmark_solve.landmark_values`).
    V : ndarray of shape (M, t), optional
        Directions: gives ``kkv = K^T (w * (K V))``.
    Y : ndarray of shape (n, k), optional
        Targets: gives ``ky``, ``ksum``, ``ysum`` and ``yy``.
    w : ndarray of shape (n,), optional
        Row weights (default ones).
    sub_rows : int
        Rows of kernel values held at once (bounded memory whatever ``n``).

    Returns
    -------
    LandmarkProducts
    """
    n, m = X.shape[0], kernel.n_base
    dtype = kernel.dtype
    out = LandmarkProducts()
    if V is not None:
        V = np.asarray(V, dtype=np.float64)
        Vd = V.astype(dtype)  # the product K V in the kernel's dtype, its columns summed in float64 below
        out.kkv = np.zeros((m, V.shape[1]))
    if Y is not None:
        Y = np.asarray(Y, dtype=np.float64)
        Y = Y.reshape(n, 1) if Y.ndim == 1 else Y  # not reshape(n, -1): a block may have no rows
        out.ky = np.zeros((m, Y.shape[1]))
        out.ksum = np.zeros(m)
    for a in range(0, n, sub_rows):
        b = min(n, a + sub_rows)
        K = kernel.base(X[a:b], out=thread_buffer("landmark-products", (b - a, m), dtype))
        wb = None if w is None else np.asarray(w[a:b], dtype=np.float64)
        if V is not None:
            KV = K @ Vd  # (n_sub, t), in the kernel's dtype
            if wb is not None:
                KV *= wb.astype(dtype)[:, None]
            out.kkv += K.T @ KV  # each sub-block in the kernel's dtype, summed in float64
        if Y is not None:
            Yb = Y[a:b] if wb is None else Y[a:b] * wb[:, None]
            out.ky += K.T @ Yb.astype(dtype)
            out.ksum += K.sum(axis=0, dtype=np.float64) if wb is None else K.T @ wb.astype(dtype)
    if Y is not None:
        wf = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
        out.ysum = wf @ Y
        out.yy = wf @ (Y * Y)
        out.n = float(wf.sum())
    elif w is not None:
        out.n = float(np.sum(w, dtype=np.float64))
    else:
        out.n = float(n)
    return out

"""A blocked Cholesky factorisation whose arithmetic is matrix products on every core.

OpenBLAS's multi-threaded ``potrf`` calls ``syrk``, which crashes on this
project's machines for outputs of about ``16 000^2`` and more (DESIGN.md), so
every large factorisation used to run on one BLAS thread (65 s at M = 20 000).
Here the left-looking blocked algorithm does the ``M^3 / 3`` multiply-adds as
``gemm`` calls, which are safe threaded; only the small diagonal blocks
(``potrf``) and the panels' triangular solves (``trsm``, ``M^2 b / 2`` in
all) run on one thread. Each entry of a ``gemm`` product is one thread's dot
product in a fixed order, so the factor is the same to the bit on any number
of BLAS threads (tested).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import dtrmm, dtrsm
from scipy.linalg.lapack import dlauum, dpotrf, dpotrs

from dxrf.core.blas import blas_limit

__all__ = ["BLOCK", "cholesky_lower", "cholesky", "cholesky_solve", "lauum_lower"]

#: columns per block: the products' inner size. At M = 8000 on two cores 256 and 512 measured
#: alike; below a few blocks LAPACK's own one-thread ``potrf`` is as fast
BLOCK = 512


def cholesky_lower(A: np.ndarray, *, block: int = BLOCK) -> tuple[np.ndarray, int]:
    """Factor a symmetric positive definite ``A = L L^T`` in place; ``(A, info)`` as LAPACK's ``dpotrf(lower=1)``.

    Parameters
    ----------
    A : ndarray of shape (M, M), float64, column-major (Fortran order)
        Its lower triangle is read and overwritten by ``L``; its strict upper
        triangle is neither read nor written (as LAPACK's ``clean=0``), so it
        can hold another triangular matrix (the CG preconditioner's factors).
    block : int
        Columns per block.

    Returns
    -------
    L : ndarray
        ``A`` itself.
    info : int
        0 on success; ``k > 0`` when the leading minor of order ``k`` is not
        positive definite (the factorisation stopped there).
    """
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.dtype != np.float64 or not A.flags.f_contiguous:
        raise ValueError(f"A must be a square float64 column-major array, got shape {A.shape}, dtype {A.dtype}")
    m = A.shape[0]
    if block < 1:
        raise ValueError(f"block must be a positive number of columns, got {block}")
    if m <= 2 * block:
        with blas_limit(1):
            _, info = dpotrf(A, lower=1, clean=0, overwrite_a=1)
        return A, int(info)
    lower = np.tri(block, dtype=bool)
    for j0 in range(0, m, block):
        j1 = min(j0 + block, m)
        b = j1 - j0
        if j0:
            # the block column less the products of the rows' finished factor columns (one gemm);
            # the diagonal block is updated in a copy so that its upper triangle stays as it was
            update = A[j0:, :j0] @ A[j0:j1, :j0].T
            A[j1:, j0:j1] -= update[b:]
            D = np.asfortranarray(A[j0:j1, j0:j1] - update[:b])
        else:
            D = np.array(A[j0:j1, j0:j1], order="F")
        with blas_limit(1):
            diag, info = dpotrf(D, lower=1, clean=0, overwrite_a=1)
        if info:
            return A, j0 + int(info)
        np.copyto(A[j0:j1, j0:j1], diag, where=lower[:b, :b])
        if j1 < m:
            with blas_limit(1):  # the panel below: X L_jj^T = B
                A[j1:, j0:j1] = dtrsm(1.0, diag, A[j1:, j0:j1], side=1, lower=1, trans_a=1)
    return A, 0


def cholesky(A: np.ndarray, *, lower: bool = True, overwrite_a: bool = False) -> np.ndarray:
    """The Cholesky factor of a symmetric positive definite ``A``, as ``scipy.linalg.cholesky`` returns it.

    By :func:`cholesky_lower`; the other triangle is zero. As in scipy, only
    the triangle named by ``lower`` is read: ``lower=False`` reads the upper
    triangle and gives the upper ``R = L^T`` (``A = R^T R``). ``overwrite_a``
    lets a float64 ``A`` hold the result (column-major for ``lower=True``,
    row-major for ``lower=False``, so the factored triangle is contiguous).

    Raises
    ------
    numpy.linalg.LinAlgError
        ``A`` is not positive definite.
    """
    A = np.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix, got shape {A.shape}")
    # A's upper triangle is the lower triangle of A^T: factor that, and transpose back
    src = A if lower else A.T
    work = src if overwrite_a and src.dtype == np.float64 and src.flags.f_contiguous else np.array(src, dtype=np.float64, order="F")
    L, info = cholesky_lower(work)
    if info:
        raise np.linalg.LinAlgError(f"the leading minor of order {info} is not positive definite")
    m = L.shape[0]
    for c0 in range(0, m, BLOCK):  # zero the strict upper triangle a block of columns at a time
        c1 = min(m, c0 + BLOCK)
        L[:c0, c0:c1] = 0.0
        block = L[c0:c1, c0:c1]
        block[np.triu_indices(c1 - c0, 1)] = 0.0
    return L if lower else L.T


def cholesky_solve(A: np.ndarray, B: np.ndarray) -> np.ndarray | None:
    """``A^{-1} B`` for a symmetric positive definite ``A`` (column-major float64, overwritten by its factor).

    The factorisation is :func:`cholesky_lower`'s; the two triangular solves
    run on one BLAS thread. None when ``A`` is not positive definite, for the
    caller's fallback (a minimum-norm solve, an eigendecomposition).
    """
    factor, info = cholesky_lower(A)
    if info:
        return None
    with blas_limit(1):
        X, info = dpotrs(factor, B, lower=1)
    return X if info == 0 else None


def lauum_lower(A: np.ndarray, *, block: int = BLOCK) -> np.ndarray:
    """``L^T L`` in place of the lower triangular ``L`` in ``A``'s lower triangle, as LAPACK's ``dlauum(lower=1)``.

    The same blocked, in-place order as LAPACK's: block row ``i`` of the
    result needs only rows ``i`` and below of ``L``, so the rows are
    finished top to bottom. Its ``M^3 / 3`` multiply-adds are ``gemm`` calls
    on every BLAS thread (LAPACK's own ``lauum`` calls ``syrk``, unsafe
    threaded at large M, so it ran on one thread); the diagonal blocks
    (LAPACK's ``lauum``) and the ``trmm`` of each block row run on one thread.
    Unlike the factorisation's, these products sum over rows (``L^T B``), and
    OpenBLAS may split a small one differently on two threads: the last bits
    can depend on the thread count (the preconditioner's quality does not).

    Parameters
    ----------
    A : ndarray of shape (M, M), float64, column-major
        Its lower triangle is read and overwritten; its strict upper triangle
        is neither read nor written.
    block : int
        Rows per block.

    Returns
    -------
    ndarray
        ``A`` itself.
    """
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.dtype != np.float64 or not A.flags.f_contiguous:
        raise ValueError(f"A must be a square float64 column-major array, got shape {A.shape}, dtype {A.dtype}")
    if block < 1:
        raise ValueError(f"block must be a positive number of rows, got {block}")
    m = A.shape[0]
    if m <= 2 * block:
        with blas_limit(1):
            _, info = dlauum(A, lower=1, overwrite_c=1)
        if info:
            raise ValueError(f"LAPACK dlauum failed (info={info})")
        return A
    lower = np.tri(block, dtype=bool)
    for i0 in range(0, m, block):
        i1 = min(i0 + block, m)
        b = i1 - i0
        D = np.array(A[i0:i1, i0:i1], order="F")  # L_ii (its lower triangle), kept until the row is done
        below = A[i1:, i0:i1]
        if i0:
            with blas_limit(1):  # row block i of L^T L left of the diagonal: L_ii^T L_i,:i + L_:i,i^T L_>i,:i
                A[i0:i1, :i0] = dtrmm(1.0, D, A[i0:i1, :i0], lower=1, trans_a=1)
            if i1 < m:
                A[i0:i1, :i0] += below.T @ A[i1:, :i0]
        with blas_limit(1):
            diag, info = dlauum(D, lower=1, overwrite_c=1)  # L_ii^T L_ii
        if info:
            raise ValueError(f"LAPACK dlauum failed (info={info})")
        if i1 < m:
            diag += below.T @ np.array(below, order="F")  # a copy: NumPy would call syrk for below.T @ below
        np.copyto(A[i0:i1, i0:i1], diag, where=lower[:b, :b])
    return A

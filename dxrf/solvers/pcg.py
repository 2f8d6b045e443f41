"""Nyström ridge without the M x M Gram: Falkon's preconditioned conjugate gradient, one pass per iteration.

The landmark-basis equations of DESIGN section 2 (``solvers/landmark_solve``)
are ``(C + alpha K) beta = c`` with ``K = K_LL``, ``C`` and ``c`` the
(weighted, centred) covariances of the kernel values ``k(x, L)`` and of
``k(x, L)`` with ``y``. Forming ``C`` costs ``N M^2`` multiply-adds; a product
``C v`` costs ``N M d`` kernel evaluations and two matrix-vector products per
row, which is what one pass of :func:`landmark_products` computes:

    C v = (1/S) sum_n w_n k_n (k_n^T v) - kbar (kbar^T v),

with ``S = sum w``, ``kbar = (1/S) sum w_n k_n`` from the first pass (which also
gives ``c``); without an intercept the centring term is absent.

Preconditioner (Rudi, Carratino & Rosasco 2017, "FALKON", section 3, in
dxrf's scaling): with uniform landmarks the landmarks are a sample of the rows,
so ``C ~ K^2 / M`` and ``C + alpha K ~ P = K^2/M + alpha K``. With ``T`` the
upper Cholesky factor of ``K + delta I`` (``delta = M eps`` for a safe
factorisation) and ``A`` that of ``T T^T / M + alpha I``,

    P ~ T^T (T T^T / M + alpha I) T = (A T)^T (A T),

so ``B = T^{-1} A^{-1}`` makes ``B^T P B = I``. CG runs on
``B^T (C + alpha K) B u = B^T c`` and ``beta = B u``: four triangular solves
per iteration on the client (``M^2`` each) beside the pass. ``K v`` is
``T^T (T v) - delta v``, exact, so ``K`` itself is not kept. The intercept is
``ybar - kbar^T beta``. Each column of ``Y`` (one-hot classes) is its own CG,
all in the same passes; a column stops when its preconditioned residual is
below ``tol`` times its first.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg
import scipy.linalg.lapack

from dxrf.core.blas import blas_limit
from dxrf.core.cholesky import cholesky
from dxrf.core.options import Options, resolve_options
from dxrf.core.validation import is_dask
from dxrf.engine import Pass, check_block, run_pass, ship
from dxrf.kernels.kernel import FeatureKernel
from dxrf.kernels.landmark_products import LandmarkProducts, landmark_products
from dxrf.features.nystroem import landmark_gram, landmark_kind

__all__ = ["PCGResult", "pcg_ridge", "falkon_preconditioner", "check_distinct_landmarks", "products_pass"]


@dataclasses.dataclass
class PCGResult:
    """``beta`` (M, k) in the landmark basis, ``intercept`` (k,), iterations, passes, residual history."""

    beta: np.ndarray
    intercept: np.ndarray
    n_iter: int
    n_passes: int
    history: np.ndarray  # per iteration: the largest relative preconditioned residual over the columns
    converged: bool


def check_distinct_landmarks(kernel: FeatureKernel) -> None:
    """Refuse landmarks with duplicate rows: ``K_LL`` would be singular and the preconditioner undefined."""
    L = np.asarray(kernel.W).T
    if np.unique(L, axis=0).shape[0] != L.shape[0]:
        raise ValueError(
            f"the landmarks have duplicate rows ({L.shape[0] - np.unique(L, axis=0).shape[0]} repeated): "
            "solver='pcg' needs distinct landmarks (K_LL positive definite)"
        )


def _cholesky_upper(A: np.ndarray, what: str) -> np.ndarray:
    # blocked on gemm, every BLAS thread: OpenBLAS's threaded potrf (through syrk) crashes at
    # M >= ~16 000 here (DESIGN.md); the same bits on any number of threads
    try:
        return cholesky(A, lower=False, overwrite_a=True)
    except np.linalg.LinAlgError:
        raise ValueError(f"{what} is not positive definite (nearly duplicate landmarks or a very large bandwidth)") from None


def falkon_preconditioner(K: np.ndarray, alpha: float, identity: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """``(T, A, delta)``: upper Cholesky factors of ``K + delta I`` and ``T T^T / M + alpha I``.

    ``identity=True`` gives ``A = I`` and ``T = I`` scaled so CG is plain
    (unpreconditioned) CG, for comparison.
    """
    m = K.shape[0]
    if identity:
        return np.eye(m), np.eye(m), 0.0
    delta = m * float(np.finfo(np.float64).eps) * max(1.0, float(np.max(np.diag(K))))
    K = np.array(K, dtype=np.float64, order="F")
    K.flat[:: m + 1] += delta
    T = _cholesky_upper(K, "the landmarks' kernel matrix")
    del K
    # T T^T by LAPACK's lauum (M^3 / 3 flops, a third of a gemm's 2 M^3), on one BLAS thread:
    # it calls syrk, whose threaded OpenBLAS crashes at large M; only its upper triangle is set
    with blas_limit(1):
        TT, info = scipy.linalg.lapack.dlauum(np.asfortranarray(T), lower=0)
    if info != 0:  # an argument error: cannot happen for a square float64 matrix
        raise ValueError(f"LAPACK dlauum failed (info={info})")
    TT /= m
    TT.flat[:: m + 1] += alpha + delta
    A = _cholesky_upper(TT, "the preconditioner's matrix")
    return T, A, delta


# -- the pass ----------------------------------------------------------------------------------


def _block(X: np.ndarray, columns: tuple, rows: object, kernel: FeatureKernel, V: np.ndarray | None, running: object) -> LandmarkProducts:
    Y, w = columns
    X = check_block(X, kernel.n_features_in, rows.start)
    if V is None:
        return landmark_products(X, kernel, Y=Y, w=w)
    return landmark_products(X, kernel, V=V, w=w)


def _merge(*parts: LandmarkProducts) -> LandmarkProducts:
    total = parts[0]
    for p in parts[1:]:
        total += p
    return total


def products_pass(m: int, width: int) -> Pass:
    """The engine's pass of :func:`landmark_products`: M x ``width`` float64 partials, tree-summed."""
    return Pass(block=_block, merge=_merge, partial_bytes=8 * m * (width + 2))


# -- the solver -------------------------------------------------------------------------------


def pcg_ridge(
    X: object,
    Y: object,
    kernel: FeatureKernel,
    alpha: float,
    *,
    sample_weight: object = None,
    fit_intercept: bool = True,
    tol: float = 1e-8,
    max_iter: int = 100,
    options: Options | None = None,
    precondition: bool = True,
) -> PCGResult:
    """Solve the Nyström ridge ``(C + alpha K_LL) beta = c`` by preconditioned CG, one pass per iteration.

    Parameters
    ----------
    X : ndarray or dask array of shape (N, d)
    Y : ndarray or dask array of shape (N, k)
    kernel : FeatureKernel
        Unwhitened landmark kernel values (``landmark_values`` of a Nyström map).
    alpha : float
        The ridge penalty (DESIGN section 2 scaling: the loss is a weighted mean).
    sample_weight : array of shape (N,), optional
    fit_intercept : bool
    tol : float
        A column stops when its preconditioned residual falls below ``tol`` times its first.
    max_iter : int
        Iterations (passes after the first) at most.
    options : Options, optional
    precondition : bool
        False runs plain CG (a comparison for the tests and the benchmark).

    Returns
    -------
    PCGResult
    """
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive number for solver='pcg', got {tol!r}")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be at least 1, got {max_iter!r}")
    check_distinct_landmarks(kernel)
    opts = resolve_options(options)
    m = kernel.n_base
    K = landmark_gram(kernel.W, landmark_kind(kernel), kernel.bandwidth)
    T, A, delta = falkon_preconditioner(K, alpha, identity=not precondition)
    if precondition:
        del K
    handle = ship(kernel) if is_dask(X) else kernel

    def one_pass(V: np.ndarray | None, width: int) -> LandmarkProducts:
        # the targets are read by the first pass only
        return run_pass(products_pass(m, width), X, (Y if V is None else None, sample_weight), (handle, V),
                        options=opts, names=("y", "sample_weight"))

    first = one_pass(None, 1 if np.ndim(Y) == 1 else int(Y.shape[1]))
    S = first.n
    if not S > 0:
        raise ValueError("the sample weights sum to zero: nothing to fit")
    kbar = first.ksum / S if fit_intercept else np.zeros(m)
    ybar = first.ysum / S if fit_intercept else np.zeros(first.ysum.shape)
    c = first.ky / S - np.outer(kbar, ybar)
    k = c.shape[1]

    def K_times(v: np.ndarray) -> np.ndarray:
        return K @ v if not precondition else T.T @ (T @ v) - delta * v

    def B(u: np.ndarray) -> np.ndarray:  # T^{-1} A^{-1} u
        return scipy.linalg.solve_triangular(T, scipy.linalg.solve_triangular(A, u, check_finite=False), check_finite=False)

    def Bt(v: np.ndarray) -> np.ndarray:  # A^{-T} T^{-T} v
        return scipy.linalg.solve_triangular(A, scipy.linalg.solve_triangular(T, v, trans="T", check_finite=False),
                                             trans="T", check_finite=False)

    def H(P: np.ndarray) -> np.ndarray:  # (C + alpha K) P, one pass
        V = B(P)
        prod = one_pass(V, V.shape[1]).kkv / S - np.outer(kbar, kbar @ V)
        return Bt(prod + alpha * K_times(V))

    u = np.zeros((m, k))
    r = Bt(c)
    p = r.copy()
    rr = np.einsum("ij,ij->j", r, r)
    r0 = np.sqrt(rr)
    active = r0 > 0
    history = []
    it = 0
    while active.any() and it < max_iter:
        idx = np.flatnonzero(active)
        Hp = H(p[:, idx])
        step = rr[idx] / np.einsum("ij,ij->j", p[:, idx], Hp)
        u[:, idx] += step * p[:, idx]
        r[:, idx] -= step * Hp
        new = np.einsum("ij,ij->j", r[:, idx], r[:, idx])
        p[:, idx] = r[:, idx] + (new / rr[idx]) * p[:, idx]
        rr[idx] = new
        it += 1
        rel = np.sqrt(rr) / np.where(r0 > 0, r0, 1.0)
        history.append(float(rel.max()))
        active = rel > tol
    beta = B(u)
    intercept = ybar - kbar @ beta
    return PCGResult(beta, intercept, it, 1 + it, np.asarray(history), not active.any())


# -- the plan: Gram or conjugate gradient -------------------------------------------------------

#: CG iterations the plan assumes (Falkon's 10-30; measured 15-40 at tol 1e-8 on kin40k-like data)
PCG_ITERATIONS = 20
#: the cost of one kernel value in a CG pass, in multiply-adds of the Gram's syrk: the exponential
#: (about 1-2 ns in NumPy) and two reads of the sub-block for K V and K^T (K V), against ~0.03 ns
#: per multiply-add of a BLAS syrk on this class of machine
ENTRY_COST = 100
PLANS = ("auto", "gram", "pcg")


def plan_estimate(n: int, m: int, d: int, k: int = 1, iterations: int | None = None) -> dict:
    """The cost model of the two Nyström plans, in multiply-add equivalents, and the cheaper one.

    Gram plan: one pass of ``N M d`` (kernel values) plus ``N M^2 / 2`` (syrk),
    then ``M^3 / 3`` (one Cholesky factorisation of ``C + alpha K``); each
    worker holds ``M x M`` float64 sums (twice: compensated). CG plan: a first
    pass and ``t`` iteration passes, each ``N M (d + ENTRY_COST + 2 k)``,
    plus ``2 M^3 / 3`` (the two Cholesky factors of the preconditioner);
    workers hold ``M (k + 2)`` floats per partial. ``t`` is ``iterations``
    (default :data:`PCG_ITERATIONS`). The plan is the one with fewer operations.
    """
    n, m, d, k = int(n), int(m), int(d), int(k)
    iterations = PCG_ITERATIONS if iterations is None else int(iterations)
    gram = n * m * d + n * m * m / 2 + m**3 / 3
    pcg = (iterations + 1) * n * m * (d + ENTRY_COST + 2 * k) + 2 * m**3 / 3
    return {
        "plan": "pcg" if pcg < gram else "gram",
        "gram_ops": float(gram),
        "pcg_ops": float(pcg),
        "iterations": int(iterations),
        "gram_worker_bytes": float(16 * m * m),
        "pcg_worker_bytes": float(8 * m * (k + 2) * 2),
    }

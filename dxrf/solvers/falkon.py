"""Falkon's preconditioner for the Nyström ridge's conjugate gradient, in one ``M x M`` array.

With ``T`` the upper Cholesky factor of ``K + delta I`` (``K = K_LL``,
``delta = M eps max(diag K)``, ``eps`` the precision of the kernel values the
passes compute) and ``A_j`` that of ``T T^T / M + alpha_j I`` (Rudi, Carratino
& Rosasco 2017, section 3), the conjugate gradient applies
``B = T^{-1} A_j^{-1}`` and its transpose; its penalty is ``alpha (K + delta I)
= alpha T^T T``, as in Falkon, so ``K`` itself is not kept.

Why ``eps`` follows the kernel values: at small bandwidths or with many
landmarks in few dimensions ``K`` is numerically singular, and ``B`` magnifies
the rounding of a pass's ``C v`` by about ``1 / delta``. With float32 kernel
values and ``delta`` of float64's ``eps`` the conjugate gradient diverged
(flights-3m, d = 3, M = 2000: residual 24 after 300 iterations); with
float32's ``eps`` and the jittered penalty it converged in 11-46 (DESIGN.md).

Memory is what limits this solver at large M (20 000 landmarks: 3.2 GB per
``M x M`` float64 array), so the factors share one array, as Falkon's own
implementation does: its strict upper triangle holds ``T``'s, its lower
triangle ``A``'s transpose (of the last penalty), and the two diagonals are
kept apart and swapped in before each triangular operation (``O(M)``). The
steps all work in place: ``K`` is factored (the blocked Cholesky reads and
writes only the lower triangle), its factor copied to the upper triangle,
the blocked ``lauum`` (:func:`~dxrf.core.cholesky.lauum_lower`) turns the
lower factor ``L = T^T`` into ``L^T L = T T^T``, and that is factored again. Each further penalty of a grid adds one array.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy.linalg.blas import dtrmm

from dxrf.core.cholesky import BLOCK, cholesky_lower, lauum_lower

__all__ = ["FalkonFactors", "falkon_factors", "falkon_preconditioner"]


def _factor_lower(A: np.ndarray, what: str) -> None:
    """Factor ``A``'s lower triangle in place (the strict upper triangle is left as it is)."""
    # blocked on gemm, every BLAS thread: OpenBLAS's threaded potrf (through syrk) crashes at
    # M >= ~16 000 here (DESIGN.md); the same bits on any number of threads
    _, info = cholesky_lower(A)
    if info:
        raise ValueError(f"{what} is not positive definite (nearly duplicate landmarks or a very large bandwidth)")


def _mirror_lower_to_upper(W: np.ndarray) -> None:
    """Copy the strict lower triangle of ``W`` to its strict upper triangle, transposed, a block of columns at a time."""
    m = W.shape[0]
    for c0 in range(0, m, BLOCK):
        c1 = min(m, c0 + BLOCK)
        W[:c0, c0:c1] = W[c0:c1, :c0].T
        D = W[c0:c1, c0:c1]
        upper = np.triu_indices(c1 - c0, 1)
        D[upper] = D.T[upper]


def _scale_lower(W: np.ndarray, factor: float) -> None:
    """Multiply the lower triangle of ``W`` (with its diagonal) by ``factor``; the strict upper one is kept."""
    m = W.shape[0]
    for c0 in range(0, m, BLOCK):
        c1 = min(m, c0 + BLOCK)
        W[c1:, c0:c1] *= factor
        D = W[c0:c1, c0:c1]
        lower = np.tril_indices(c1 - c0)
        D[lower] *= factor


def jitter_scale(eps: float, alphas: list[float]) -> float:
    """``delta / (M max(diag K))``: the kernel values' ``eps``, but not above a tenth of the smallest penalty, nor below float64's.

    Above ``alpha`` the preconditioner's ``delta^2 / M`` would outweigh its
    ``alpha delta`` and slow the iteration (MNIST, M = 8000, alpha = 1e-8,
    float32: 174 iterations against 81).
    """
    smallest = min(alphas) if alphas else eps
    return max(float(np.finfo(np.float64).eps), min(float(eps), smallest / 10))


class FalkonFactors:
    """``T`` and the ``A_j`` of :func:`falkon_factors`, and the products and solves the CG needs.

    Parameters
    ----------
    K : ndarray of shape (M, M)
        The landmarks' kernel matrix (symmetric positive definite).
    alphas : sequence of float
        The penalties: one ``A_j`` each.
    identity : bool
        ``T = A_j = I`` (plain CG, for comparison); ``K`` is then kept for ``K v``.
    overwrite_k : bool
        A row-major float64 ``K`` (as :func:`~dxrf.features.nystroem.landmark_gram`
        makes it) becomes the shared array: no copy.
    eps : float
        The relative precision of the kernel values the products are computed
        from (``np.finfo(dtype).eps``): the jitter is ``delta = M eps max(diag K)``.
    """

    def __init__(self, K: np.ndarray, alphas: object, *, identity: bool = False, overwrite_k: bool = False,
                 eps: float = float(np.finfo(np.float64).eps)) -> None:
        m = K.shape[0]
        self.alphas = [float(a) for a in alphas]
        self.m = m
        self.identity = identity
        self.extra: list[np.ndarray] = []  # the lower factors of A_j^T for every penalty but the last
        if identity:
            self.K, self.delta = K, 0.0
            return
        if not (np.isfinite(eps) and eps > 0):
            raise ValueError(f"eps must be a positive number, got {eps!r}")
        self.delta = m * jitter_scale(eps, self.alphas) * max(1.0, float(np.max(np.diag(K))))
        # K is symmetric: its transpose, column-major when K is row-major, is factored in place
        in_place = overwrite_k and K.dtype == np.float64 and K.flags.c_contiguous
        W = K.T if in_place else np.array(K, dtype=np.float64, order="F")
        W.flat[:: m + 1] += self.delta
        _factor_lower(W, "the landmarks' kernel matrix")  # K + delta I = L L^T, T = L^T
        self.diag_T = W.diagonal().copy()
        _mirror_lower_to_upper(W)  # T's strict upper triangle, kept while the lower one is reused
        lauum_lower(W)  # T T^T = L^T L in place (M^3 / 3 flops on gemm), read and written in the lower triangle
        _scale_lower(W, 1.0 / m)
        for alpha in self.alphas[:-1]:
            A = W.copy(order="F")
            A.flat[:: m + 1] += alpha + self.delta
            _factor_lower(A, "the preconditioner's matrix")
            self.extra.append(A)
        W.flat[:: m + 1] += self.alphas[-1] + self.delta
        _factor_lower(W, "the preconditioner's matrix")
        self.diag_A = W.diagonal().copy()
        self.W = W
        self._on = "A"  # the diagonal W holds now

    @property
    def nbytes(self) -> int:
        """Bytes of the factors' arrays."""
        if self.identity:
            return 0
        return int(self.W.nbytes + sum(a.nbytes for a in self.extra))

    def _diagonal(self, which: str) -> None:
        if self._on != which:
            self.W.flat[:: self.m + 1] = self.diag_T if which == "T" else self.diag_A
            self._on = which

    def solve_T(self, V: np.ndarray, trans: bool = False) -> np.ndarray:
        """``T^{-1} V``, or ``T^{-T} V`` with ``trans``."""
        if self.identity:
            return np.array(V, dtype=np.float64)
        self._diagonal("T")
        return scipy.linalg.solve_triangular(self.W, V, lower=False, trans="T" if trans else "N", check_finite=False)

    def T_times(self, V: np.ndarray, trans: bool = False) -> np.ndarray:
        """``T V``, or ``T^T V`` with ``trans``."""
        self._diagonal("T")
        return dtrmm(1.0, self.W, np.asfortranarray(V, dtype=np.float64), lower=0, trans_a=int(trans))

    def solve_A(self, j: int, V: np.ndarray, trans: bool = False) -> np.ndarray:
        """``A_j^{-1} V``, or ``A_j^{-T} V`` with ``trans``, for the ``j``-th penalty."""
        if self.identity:
            return np.array(V, dtype=np.float64)
        if j == len(self.alphas) - 1:
            self._diagonal("A")
            F = self.W
        else:
            F = self.extra[j]
        # A_j = F^T with F lower triangular: A^{-1} solves F^T, A^{-T} solves F
        return scipy.linalg.solve_triangular(F, V, lower=True, trans="N" if trans else "T", check_finite=False)

    def K_times(self, V: np.ndarray) -> np.ndarray:
        """``(K + delta I) V = T^T (T V)``: the conjugate gradient's penalty (``K V`` when ``identity``)."""
        if self.identity:
            return self.K @ V
        return self.T_times(self.T_times(V), trans=True)

    def lower_factor(self) -> np.ndarray:
        """``L = T^T``, the lower Cholesky factor of ``K + delta I``, column-major in the shared array's memory.

        The ``A_j`` are gone afterwards: the last operation on these factors.
        A Nyström map with ``whitening="cholesky"`` takes its whitening from
        it (``L^{-T}``, laid out as the map's own) instead of factoring ``K`` again.
        """
        if self.identity:
            raise ValueError("identity factors have no Cholesky factor")
        W, m = self.W, self.m
        self._diagonal("T")
        for c0 in range(0, m, BLOCK):  # T's strict upper triangle back to the lower one, zeros above
            c1 = min(m, c0 + BLOCK)
            W[c1:, c0:c1] = W[c0:c1, c1:].T
            W[c0:c1, c1:] = 0.0
            D = W[c0:c1, c0:c1]
            upper = np.triu_indices(c1 - c0, 1)
            D.T[upper] = D[upper]
            D[upper] = 0.0
        self.W, self.extra = None, []
        return W

    def dense(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """``(T, [A_j])`` as dense upper triangular copies (for tests and inspection)."""
        if self.identity:
            return np.eye(self.m), [np.eye(self.m) for _ in self.alphas]
        T = np.triu(self.W, 1)
        T[np.diag_indices(self.m)] = self.diag_T
        last = np.tril(self.W, -1)
        last[np.diag_indices(self.m)] = self.diag_A
        return T, [np.tril(A).T for A in self.extra] + [last.T]


def falkon_factors(K: np.ndarray, alphas: object, identity: bool = False, overwrite_k: bool = False,
                   eps: float = float(np.finfo(np.float64).eps)) -> FalkonFactors:
    """The preconditioner's factors for the penalties ``alphas``: one ``M x M`` array, plus one per further penalty.

    See :class:`FalkonFactors`. ``T T^T`` is computed once for all penalties;
    each penalty costs one Cholesky factorisation (``M^3 / 3``).
    """
    return FalkonFactors(K, alphas, identity=identity, overwrite_k=overwrite_k, eps=eps)


def falkon_preconditioner(K: np.ndarray, alpha: float, identity: bool = False,
                          eps: float = float(np.finfo(np.float64).eps)) -> tuple[np.ndarray, np.ndarray, float]:
    """``(T, A, delta)``: dense upper Cholesky factors of ``K + delta I`` and ``T T^T / M + alpha I``.

    ``identity=True`` gives ``T = A = I`` (plain CG, for comparison).
    """
    factors = falkon_factors(K, [alpha], identity, eps=eps)
    T, (A,) = factors.dense()
    return T, A, factors.delta

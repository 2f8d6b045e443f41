"""Pure numeric kernels that turn one block of rows into raw features.

Every function here takes NumPy blocks and returns NumPy blocks; nothing knows
about Dask. "Raw" features omit the per-column scale (``sqrt(2/M)`` for Fourier
maps, selection weights, ...): statistics are accumulated on raw features and
scaled once at the end, which saves a full sweep over every feature block.

All functions write into ``out`` when it is given, so a task can reuse one
buffer for all its tiles: allocating (first-touching) fresh memory is several
times slower than the arithmetic on this class of machine.
"""

from __future__ import annotations

import math
from fractions import Fraction
from types import ModuleType

import numpy as np

from dxrf.core.buffers import thread_buffer
from dxrf.core.device import array_module

__all__ = [
    "project",
    "fourier_block",
    "cos_inplace",
    "relu_block",
    "linear_block",
    "maxout_block",
    "fwht",
    "sorf_project",
]


def _buffer(out: np.ndarray | None, shape: tuple[int, int], dtype: np.dtype, xp: ModuleType = np) -> np.ndarray:
    if out is None:
        return xp.empty(shape, dtype=dtype)
    if out.shape != shape or out.dtype != dtype:
        raise ValueError(f"out has shape {out.shape} and dtype {out.dtype}; expected {shape} {np.dtype(dtype)}")
    return out


def project(X: np.ndarray, W: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Return ``X @ W`` computed in ``W.dtype``, into ``out`` when given.

    ``X`` and ``W`` may be CuPy arrays (both on the device).
    """
    xp = array_module(W)
    X = xp.asarray(X, dtype=W.dtype)
    out = _buffer(out, (X.shape[0], W.shape[1]), W.dtype, xp)
    return xp.matmul(X, W, out=out)


def fourier_block(
    X: np.ndarray, W: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, Wb: np.ndarray | None = None
) -> np.ndarray:
    """Raw Fourier features ``cos(X W + b)`` (without the sqrt(2/M) factor).

    With ``Wb`` (``W`` with ``b`` appended as its last row) the offset is added
    inside the product of ``[X, 1]`` and ``Wb``: one sweep less over the
    feature block, which is memory-bound (about 2% of a pass at M = 2000).
    """
    if Wb is None:
        out = project(X, W, out)
        out += b
    else:
        xp = array_module(Wb)
        n, d = X.shape
        # the thread's own [X, 1]: a fresh one per tile is above malloc's mmap threshold
        # and, in Dask workers (which trim freed memory), costs page faults on every tile
        Xb = thread_buffer("fourier-x1", (n, d + 1), Wb.dtype) if xp is np else xp.empty((n, d + 1), dtype=Wb.dtype)
        Xb[:, :d] = X
        Xb[:, d] = 1
        out = project(Xb, Wb, out)
    return cos_inplace(out)


# -- float64 cosine -------------------------------------------------------------------------
#
# NumPy's float64 cos is scalar libm here (~16 ns per element against 0.5 ns for float32,
# whose SIMD loop NumPy ships): in a float64 pass at M0 = 2000 it was a third of the time
# next to the syrk. The cosine below is NumPy ufuncs only, on slices small enough to stay
# in the core's cache: x = q pi + r with q = rint(x / pi) (pi in three parts, Cody and
# Waite, so that q * part is exact), then cos x = (-1)^q cos r, |r| <= pi/2, by its Taylor
# polynomial to r^22 (truncation < 2e-17). Absolute error ~3e-16 (measured against np.cos:
# below the error that rounding x itself already causes); relative error is larger only
# where cos x is ~0. Arguments above _COS_MAX_ARG (where q * part would round) and
# non-contiguous arrays go to np.cos.


def _pi_part(x: Fraction, bits: int) -> float:
    m, e = math.frexp(float(x))
    return math.ldexp(math.floor(m * 2**bits), e - bits)


_PI = Fraction(314159265358979323846264338327950288419716939937510582097494459, 10**62)
_PI_1 = _pi_part(_PI, 30)
_PI_2 = _pi_part(_PI - Fraction(_PI_1), 30)
_PI_3 = float(_PI - Fraction(_PI_1) - Fraction(_PI_2))
_COS_TAYLOR = [(-1) ** k / math.factorial(2 * k) for k in range(12)]  # in powers of r^2
_COS_MAX_ARG = 1e6  # q < 2^19: q * _PI_1 and q * _PI_2 (30-bit parts) are exact
_COS_SLICE = 16384  # elements per slice: the slice and two scratch arrays stay in L2


def _cos64_slice(x: np.ndarray, q: np.ndarray, t: np.ndarray) -> None:
    """cos of the contiguous float64 slice ``x`` in place; ``q``, ``t`` scratch of its size."""
    np.multiply(x, 1.0 / math.pi, out=q)
    np.rint(q, out=q)
    np.multiply(q, _PI_1, out=t)
    x -= t  # exact: x and q pi_1 are within a factor of two
    np.multiply(q, _PI_2, out=t)
    x -= t
    np.multiply(q, _PI_3, out=t)
    x -= t  # x now holds r
    # (-1)^q = 1 - 2 (q - 2 floor(q / 2))
    np.multiply(q, 0.5, out=t)
    np.floor(t, out=t)
    t *= -2.0
    q += t
    q *= -2.0
    q += 1.0
    np.multiply(x, x, out=t)  # r^2
    np.multiply(t, _COS_TAYLOR[-1], out=x)
    x += _COS_TAYLOR[-2]
    for c in _COS_TAYLOR[-3::-1]:
        x *= t
        x += c
    x *= q


def cos_inplace(out: np.ndarray) -> np.ndarray:
    """``cos(out)`` written into ``out``; float64 NumPy arrays take the fast path above."""
    if out.dtype != np.float64 or not isinstance(out, np.ndarray) or not out.flags.c_contiguous or out.size == 0:
        return array_module(out).cos(out, out=out)
    flat = out.reshape(-1)
    size = min(flat.size, _COS_SLICE)
    q = thread_buffer("cos64-q", (size,), np.float64)
    t = thread_buffer("cos64-t", (size,), np.float64)
    for lo in range(0, flat.size, _COS_SLICE):
        x = flat[lo : lo + _COS_SLICE]
        n = x.size
        if not np.abs(x, out=t[:n]).max() <= _COS_MAX_ARG:  # also NaN: np.cos gives NaN
            np.cos(x, out=x)
            continue
        _cos64_slice(x, q[:n], t[:n])
    return out


def relu_block(X: np.ndarray, W: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Raw ReLU features ``max(X W, 0)``."""
    out = project(X, W, out)
    return np.maximum(out, 0, out=out)


def linear_block(X: np.ndarray, W: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Raw linear sketch ``X W``."""
    return project(X, W, out)


def maxout_block(X: np.ndarray, W: np.ndarray, pieces: int, out: np.ndarray | None = None) -> np.ndarray:
    """Raw maxout features ``max_j X W_j`` over ``pieces`` groups.

    ``W`` has shape ``(d, M * pieces)`` with the pieces of one feature adjacent
    (feature-major), so a reshape groups them without copying.
    """
    n = X.shape[0]
    m = W.shape[1] // pieces
    out = _buffer(out, (n, m), W.dtype, array_module(W))
    if pieces == 1:
        return project(X, W, out)
    proj = project(X, W)
    np.max(proj.reshape(n, m, pieces), axis=2, out=out)
    return out


def fwht(A: np.ndarray) -> np.ndarray:
    """Unnormalised fast Walsh-Hadamard transform along the last axis, in place.

    The last axis must have a power-of-two length ``p``; the cost is
    ``O(n p log p)`` for ``n`` rows. Returns ``A``.
    """
    n, p = A.shape
    if p & (p - 1):
        raise ValueError(f"fwht needs a power-of-two length, got {p}")
    h = 1
    while h < p:
        view = A.reshape(n, p // (2 * h), 2, h)
        top = view[:, :, 0, :].copy()
        bottom = view[:, :, 1, :]
        view[:, :, 0, :] += bottom
        np.subtract(top, bottom, out=bottom)
        h *= 2
    return A


def sorf_project(
    X: np.ndarray,
    signs: np.ndarray,
    n_components: int,
    bandwidth: float,
    norms: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Structured orthogonal projection ``X W`` without forming ``W``.

    Each block of ``p`` output columns is ``x -> (sqrt(p)/sigma) H D1 H D2 H D3 x``
    with ``H`` the orthonormal Hadamard matrix of order ``p`` (a power of two,
    inputs zero-padded from ``d``) and ``D_k`` diagonal sign matrices, as in
    Yu et al. (2016). Applied to rows, ``x^T`` is multiplied by ``D3 H D2 H D1 H``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    signs : ndarray of shape (3, n_blocks, p)
        Rows ``D1, D2, D3`` of +-1 for every block.
    n_components : int
        Number of output columns (the last block is truncated).
    bandwidth : float
    norms : ndarray of shape (n_components,), optional
        Per-column factors of the frequency norms. Rows of ``H D1 H D2 H D3``
        all have norm 1, whereas Gaussian frequencies have chi-distributed
        norms; without this correction the kernel estimate is biased, badly so
        for small ``d`` (measured: at d = 7 the error stops falling near 2e-3).
    out : ndarray of shape (n, n_components), optional
    """
    dtype = signs.dtype
    n, d = X.shape
    _, n_blocks, p = signs.shape
    out = _buffer(out, (n, n_components), dtype)
    # three orthonormal H give p**-1.5; the SORF scale sqrt(p)/sigma leaves 1/(p sigma)
    factor = np.full(n_components, 1.0 / (p * bandwidth))
    if norms is not None:
        factor *= norms
    factor = factor.astype(dtype)
    work = np.empty((n, p), dtype=dtype)
    for k in range(n_blocks):
        work[:, :d] = X
        work[:, d:] = 0
        work *= signs[2, k]
        fwht(work)
        work *= signs[1, k]
        fwht(work)
        work *= signs[0, k]
        fwht(work)
        lo = k * p
        hi = min(lo + p, n_components)
        np.multiply(work[:, : hi - lo], factor[lo:hi], out=out[:, lo:hi])
    return out

"""L2-penalised logistic regression on random features, in few passes over the data.

Objective of one binary problem (labels ``t in {-1, +1}``, scores
``f = z(x)^T theta + beta``)::

    L(theta, beta) = (1/N) sum_n log(1 + exp(-t_n f_n)) + (alpha/2) |theta|^2

with the intercept ``beta`` unpenalised. This is scikit-learn's
``LogisticRegression(C=1 / (N * alpha))``, which minimises
``C * sum(loss) + |theta|^2 / 2``. ``K > 2`` classes are solved one-vs-rest:
``K`` independent binary problems advanced *together*, so a pass over the data
serves every class at once (each class keeps its own iterate, step sizes and
convergence test).

Everything touching data is a pass: every row chunk is mapped by
:func:`_block_sums` (a pure NumPy function: features tile by tile into one
reused buffer, scores, loss, gradient and optionally Hessians,
Hessian-vector products or line-search losses), the partial sums are
tree-reduced, and the solver does small dense algebra on the totals. The
N x M feature matrix is never formed.

Solvers (``solver=``):

``"newton"``
    Newton with Hessians only where they pay. A pass accumulates the loss,
    the gradient and, when asked, the K Hessians
    ``sum_n w_n [z_n; 1][z_n; 1]^T`` (``w = sigma(f)(1 - sigma(f))``) at the
    point it evaluates: a Hessian costs ``N M^2`` flops (a syrk), the rest
    of a pass ``O(N M (d + K))``. The first pass brings the Hessian; later
    passes bring one only when the previous step made slow progress or when
    the next point should be the last (so that the final step is an exact
    Newton step); in between, the model Hessian is updated by BFGS from the
    gradients every pass brings anyway. On random features this halves the
    cost of a fit against a Hessian in every pass (about twice as many
    passes, two of them with a Hessian). An iteration is ONE pass: the pass
    that evaluates the trial point ``theta + Delta`` also gives the gradient
    (and Hessian) for the next iteration, and the losses along the segment
    ``theta + s Delta, s = 1/2, 1/4, ..., 2^-10`` and at ``theta`` itself
    (cheap: one more score vector per row). The full step is taken when it
    passes the Armijo test against the loss at ``theta`` from the same pass
    (so both carry the same rounding of float32 scores) or when the
    objective still decreases at its end (then, by convexity, it
    decreased). Otherwise (early iterations, far-off warm starts) the best
    grid step is taken and one more pass evaluates it there, with a
    Hessian: such an iteration costs TWO passes (more only when no grid step
    decreases the loss: loss-only passes then continue the grid, ten
    halvings each, at most three; steps are also capped in length, see
    :func:`_capped`). The first pass evaluates the starting point, so
    ``n_iter`` iterations without backtracking cost ``n_iter + 1`` passes;
    the last step, once its predicted decrease is below tolerance, is taken
    without a verifying pass. With ``N`` well above ``M`` the Hessians are
    summed over a fixed sample of the rows (``hessian_rows``; gradients and
    losses always over all rows), which makes a Hessian pass cost little
    more than a gradient pass; BFGS updates and the line search are
    unchanged. Memory: ``K (M+1)^2 * 8`` bytes of Hessians per
    task and per partial sum in the reduction (a merge task holds
    ``split_every + 1`` of them).
``"lbfgs"``
    scipy's L-BFGS-B, one pass per function-and-gradient evaluation; memory
    O(M K). Its line search compares function values, so float32 features
    get float64 scores here (float64 coefficients and a float64 copy of each
    tile: a few percent of a pass); float32 scores make the objective steppy
    at ~1e-10 relative and stall it.
``"newton-cg"``
    Truncated Newton: conjugate gradients on Hessian-vector products, one pass
    per product plus one per trial point (same line search as ``"newton"``).
    Memory O(M K).
``"auto"``
    ``"newton"`` when the K Hessians fit in :data:`NEWTON_MAX_HESSIAN_BYTES`
    and ``M <= NEWTON_MAX_COMPONENTS`` (beyond that one Newton pass costs
    K N M^2 flops, more than many L-BFGS passes), else ``"lbfgs"``.

The K classes advance in lockstep: one pass serves every unfinished class,
whatever it needs (a Hessian, a gradient, a Hessian-vector product). Each
class's solver is a generator yielding requests; scipy's L-BFGS runs in a
helper thread bridged to such a generator.

Convergence (per class): the max-norm of the gradient of ``L`` (a mean, so
independent of N) is ``<= tol``, or the predicted (Newton decrement) or
observed decrease of ``L`` is below ``ftol * max(|L|, 1)`` with
``ftol = 64 eps(float64)`` (scikit-learn's L-BFGS setting), or ``1e-11`` for
Newton and Newton-CG on float32 features, whose float32 scores make the
objective noisy at about that level.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import queue
import threading
import warnings
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor

import dask
import dask.array as da
import numpy as np
import scipy.linalg
import scipy.optimize
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning

from .._buffers import thread_buffer
from .._blas import blas_limit
from .._validation import check_dask_matrix, check_finite_rows, is_dask
from ..features.kernel import FeatureKernel
from ..options import get_options
from ..progress import active_client, compute
from ..stats import resolve_kernel

__all__ = [
    "NEWTON_MAX_COMPONENTS",
    "NEWTON_MAX_HESSIAN_BYTES",
    "LogisticResult",
    "LogisticSums",
    "choose_solver",
    "fit_logistic",
    "logistic_block",
    "logistic_hvp_block",
    "newton_hessian_bytes",
]

#: ``solver="auto"`` uses Newton only while the K float64 Hessians take at most this many bytes.
NEWTON_MAX_HESSIAN_BYTES = 256 * 2**20
#: ... and only up to this many features (a Newton pass costs K N M^2 flops).
NEWTON_MAX_COMPONENTS = 4096

SOLVERS = ("auto", "newton", "lbfgs", "newton-cg")

# steps s of the line-search grid evaluated in the same pass as a trial point (a pass also
# evaluates s = 0, the reference of the Armijo test)
_LINE_STEPS = 0.5 ** np.arange(1, 11)
_ARMIJO = 1e-4
_FTOL = {np.dtype(np.float64): 64 * np.finfo(np.float64).eps, np.dtype(np.float32): 1e-11}
_MAX_CG = 250
_TILE_ROWS = 2048  # rows per tile by default: a tile and its copies stay in cache
_FLUSH_ROWS = 16384  # rows summed into a Hessian in the kernel dtype before the float64 total
_REFRESH = 0.25  # Newton: a fresh Hessian when a step shrank the decrement by less than this
_MAX_BACKTRACK_PASSES = 3  # loss-only passes after the grid of the trial pass: steps down to 2^-40
_HESS_BLOCK = 1024  # rows per block of the Hessian row sample (whole blocks are sampled)
#: ``hessian_rows="auto"``: Hessians from about this many rows per parameter (at least), see fit_logistic
HESSIAN_ROWS_PER_PARAMETER = 100


# -- results ----------------------------------------------------------------------


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


@dataclasses.dataclass
class LogisticResult:
    """Outcome of :func:`fit_logistic`.

    Attributes
    ----------
    coef : ndarray of shape (M, K)
        Coefficients of the scaled features ``z``; one column per class
        (K = 1 for a binary problem).
    intercept : ndarray of shape (K,)
    n_iter : int
        Iterations of the solver, the most over the classes (Newton or
        truncated-Newton steps; L-BFGS iterations).
    n_passes : int
        Passes over X made by the solver (all classes share them).
    loss : ndarray of shape (K,)
        Final objective ``L`` (mean log-loss plus penalty) of each class.
    converged : bool
        Whether every class met a convergence criterion.
    solver : str
        The solver used: "newton", "lbfgs" or "newton-cg".
    hessian_rows : int
        Rows that entered each Newton Hessian (N when exact; 0 for solvers
        without Hessians).
    """

    coef: np.ndarray
    intercept: np.ndarray
    n_iter: int
    n_passes: int
    loss: np.ndarray
    converged: bool
    solver: str
    hessian_rows: int = 0


# -- the per-block kernel -------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class _Spec:
    """What one pass computes, in raw-feature coordinates (``z = scale * raw``).

    Columns ``0..Ka-1`` of ``coef`` are the batch; ``cols`` maps them to label
    columns. ``grad``, ``hess``, ``line`` and ``hv`` are the batch columns that
    need loss and gradient, a Hessian, line-search losses and a
    Hessian-vector product.
    """

    cols: np.ndarray
    coef: np.ndarray  # (M, Ka) float64: float32 coefficients would make the loss steppy
    intercept: np.ndarray  # (Ka,) float64
    grad: np.ndarray
    hess: np.ndarray
    line: np.ndarray
    dcoef: np.ndarray  # (M, len(line)) kernel dtype
    dintercept: np.ndarray
    steps: np.ndarray  # the grid _LINE_STEPS, then 0 (the point the direction starts from)
    hv: np.ndarray
    vcoef: np.ndarray  # (M, len(hv)) kernel dtype
    vintercept: np.ndarray
    precise: bool = False  # float64 scores for float32 kernels (see _block_sums)
    hess_period: int = 1  # Hessians from the rows of every hess_period-th block of _HESS_BLOCK (1: all rows)


@dataclasses.dataclass(eq=False)
class _Sums:
    """Partial sums of a pass in raw-feature coordinates; Hessians hold the upper triangle."""

    n: int
    loss: np.ndarray
    grad: np.ndarray
    hess: np.ndarray
    line: np.ndarray
    hv: np.ndarray
    n_hess: int = 0  # rows summed into the Hessians

    @classmethod
    def zeros(cls, spec: _Spec, m: int) -> _Sums:
        return cls(
            0,
            np.zeros(spec.grad.size),
            np.zeros((m + 1, spec.grad.size)),
            np.zeros((spec.hess.size, m + 1, m + 1)),
            np.zeros((spec.steps.size, spec.line.size)),
            np.zeros((m + 1, spec.hv.size)),
        )

    def __add__(self, other: _Sums) -> _Sums:
        return _Sums(
            self.n + other.n,
            self.loss + other.loss,
            self.grad + other.grad,
            self.hess + other.hess,
            self.line + other.line,
            self.hv + other.hv,
            self.n_hess + other.n_hess,
        )


def _softplus(x: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """``log(1 + exp(x))`` = ``np.logaddexp(0, x)``, stable, about 4x faster; overwrites ``x``.

    ``scratch``, of the shape of ``x``, saves one temporary array.
    """
    pos = np.maximum(x, 0.0, out=scratch)
    np.abs(x, out=x)
    np.negative(x, out=x)
    np.exp(x, out=x)
    np.log1p(x, out=x)
    x += pos
    return x


def _check_labels(T: np.ndarray, n: int, row_offset: int = 0) -> np.ndarray:
    T = np.asarray(T)
    if T.ndim == 1:
        T = T[:, None]
    if T.ndim != 2 or T.shape[0] != n:
        raise ValueError(f"labels T have shape {T.shape}; expected ({n},) or ({n}, K) to match the rows of X")
    bad = (T != 1) & (T != -1)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(
            f"labels T must be -1 or +1; found {T[row, col].item()!r} at row {row + row_offset}"
            + (f", column {col}" if T.shape[1] > 1 else "")
        )
    return T


def _check_block(X: np.ndarray, kernel: FeatureKernel, row_offset: int) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != kernel.n_features_in:
        raise ValueError(f"X block has shape {X.shape}; the feature map expects {kernel.n_features_in} columns")
    check_finite_rows(X, "X", row_offset)
    return X


def _tile_rows(kernel: FeatureKernel) -> int:
    """Default rows per tile: at most :data:`_TILE_ROWS`, within the ``tile_bytes`` option."""
    opts = get_options()
    by_bytes = max(opts.min_tile_rows, opts.tile_bytes // (kernel.n_components * kernel.dtype.itemsize))
    return min(by_bytes, _TILE_ROWS)


def _block_sums(
    X: np.ndarray,
    T: np.ndarray,
    kernel: FeatureKernel,
    spec: _Spec,
    tile_rows: int,
    row_offset: int = 0,
    check: bool = True,
) -> _Sums:
    """The sums a pass needs from one block of rows: a pure function on NumPy arrays.

    Features are computed tile by tile into one reused buffer in the kernel
    dtype; tiles are small enough that a tile and its copies stay in cache
    between the steps below. Per tile, ONE matrix product gives the scores of
    every column (points, line-search directions, Hessian-vector directions)
    and ONE product with ``Z^T`` gives every gradient and Hessian-vector
    product; both run in the kernel dtype (float64 for ``spec.precise``) and
    are summed across tiles in float64. Each Hessian is a symmetric rank-k
    update (``syrk``) of the tile scaled by ``sqrt(w)``, with a column
    ``sqrt(w)`` appended for the intercept, summed in the kernel dtype over
    :data:`_FLUSH_ROWS` rows and then added to the float64 total.
    ``check=False`` skips the finiteness check of X (input checked before).
    """
    if check:
        X = _check_block(X, kernel, row_offset)
    n = X.shape[0]
    T = _check_labels(T, n, row_offset)
    m = kernel.n_components
    dtype = kernel.dtype
    sums = _Sums.zeros(spec, m)
    sums.n = n
    if n == 0:
        return sums
    labels = T[:, spec.cols]
    tile_rows = max(1, min(tile_rows, n))
    # float32 scores (and float32 coefficients) make the loss steppy at ~1e-10 relative,
    # which stalls scipy's L-BFGS line search: "precise" passes score in float64
    precise = spec.precise and dtype != np.float64
    sdtype = np.dtype(np.float64) if precise else dtype
    ka, nl, nv = spec.coef.shape[1], spec.line.size, spec.hv.size
    ng, nh = spec.grad.size, spec.hess.size
    # float32 coefficients would bias the loss and gradient (by the gradient times their
    # rounding): the points' coefficients enter as a float32 pair hi + lo
    kc = 2 * ka if sdtype != np.float64 else ka
    cols = np.empty((m, kc + nl + nv), dtype=sdtype)
    cols[:, :ka] = spec.coef
    if kc > ka:
        cols[:, ka:kc] = spec.coef - cols[:, :ka]
    cols[:, kc : kc + nl], cols[:, kc + nl :] = spec.dcoef, spec.vcoef
    offsets = np.concatenate([spec.intercept, np.zeros(kc - ka), spec.dintercept, spec.vintercept])
    # every array of a tile comes from the thread's scratch: in Dask workers (which set
    # MALLOC_TRIM_THRESHOLD_) fresh temporaries of this size cost page faults every time
    nc, nr, ns = kc + nl + nv, ng + nv, spec.steps.size
    buf = thread_buffer("tile", (tile_rows, m), dtype)
    buf64 = thread_buffer("tile64", (tile_rows, m), np.float64) if precise else None
    scores = thread_buffer("scores", (tile_rows, nc), np.float64)
    scores_k = thread_buffer("scores-k", (tile_rows, nc), sdtype) if sdtype != np.float64 else scores
    resid = thread_buffer("resid", (tile_rows, nr), np.float64)
    resid_k = thread_buffer("resid-k", (tile_rows, nr), sdtype) if sdtype != np.float64 else resid
    t_buf = thread_buffer("labels", (tile_rows, ka), np.float64)
    margin_buf = thread_buffer("margin", (tile_rows, ka), np.float64)
    p_buf = thread_buffer("p", (tile_rows, ka), np.float64)
    w_buf = thread_buffer("w", (tile_rows, ka), np.float64)
    loss_buf = thread_buffer("loss", (tile_rows, ng), np.float64)
    loss_tmp = thread_buffer("loss-tmp", (tile_rows, ng), np.float64)
    line_buf = thread_buffer("line", (tile_rows, ns, nl), np.float64)
    line_tmp = thread_buffer("line-tmp", (tile_rows, ns, nl), np.float64)
    if nh:
        gram = thread_buffer("tile-gram", (m + 1, m + 1), dtype)
        scaled = thread_buffer("scaled", (tile_rows, m + 1), dtype)
        sw_buf = thread_buffer("sqrt-w", (tile_rows,), dtype)
        # one (M+1)^2 block per Hessian, summed over tiles in the feature dtype and
        # flushed to float64 (allocated per block, not kept: K of them can be large,
        # and a block's Gram costs far more than touching them)
        acc = np.zeros((m + 1, m + 1, nh), dtype=dtype, order="F")
        pending, acc_empty = 0, True
    line_c = (1.0 - spec.steps)[None, :, None]  # margins at point - (1 - s) direction
    for lo in range(0, n, tile_rows):
        hi = min(lo + tile_rows, n)
        rows = hi - lo
        Z = kernel.raw(X[lo:hi], out=buf[:rows])
        if precise:
            Zs = buf64[:rows]
            np.copyto(Zs, Z)
        else:
            Zs = Z
        S = scores[:rows]
        np.matmul(Zs, cols, out=scores_k[:rows])
        if scores_k is not scores:
            np.copyto(S, scores_k[:rows])
        S += offsets
        f = S[:, :ka]
        if kc > ka:
            f += S[:, ka:kc]
        t = t_buf[:rows]
        np.copyto(t, labels[lo:hi])
        margin = np.multiply(t, f, out=margin_buf[:rows])
        np.negative(margin, out=margin)  # the loss is softplus(margin)
        p = expit(margin, out=p_buf[:rows])  # sigma(-t f)
        w = np.subtract(1.0, p, out=w_buf[:rows])
        w *= p  # sigma(f)(1 - sigma(f)), the same for both labels
        if nr:
            R = resid[:rows]
            np.multiply(t[:, spec.grad], p[:, spec.grad], out=R[:, :ng])
            np.negative(R[:, :ng], out=R[:, :ng])  # d loss / d f
            np.multiply(S[:, kc + nl :], w[:, spec.hv], out=R[:, ng:])
            if resid_k is not resid:
                np.copyto(resid_k[:rows], R)
            ZR = Zs.T @ resid_k[:rows]
            sums.grad[:m] += ZR[:, :ng]
            sums.hv[:m] += ZR[:, ng:]
            colsum = R.sum(axis=0)
            sums.grad[m] += colsum[:ng]
            sums.hv[m] += colsum[ng:]
        if ng:
            lv = loss_buf[:rows]
            np.copyto(lv, margin[:, spec.grad])
            sums.loss += _softplus(lv, loss_tmp[:rows]).sum(axis=0)
        if nl:
            # the losses along the segment: a line search costs no features
            ms = line_buf[:rows]
            np.multiply(line_c, S[:, None, kc : kc + nl], out=ms)
            np.subtract(f[:, None, spec.line], ms, out=ms)
            np.multiply(ms, t[:, None, spec.line], out=ms)
            np.negative(ms, out=ms)
            sums.line += _softplus(ms, line_tmp[:rows]).sum(axis=0)
        runs = _hessian_runs(row_offset + lo, row_offset + hi, spec.hess_period) if nh else []
        used = sum(b - a for a, b in runs)
        for jj, j in enumerate(spec.hess if used else ()):
            sw = np.sqrt(w[:, j], out=sw_buf[:rows])
            A = scaled[:used]
            at = 0
            for a, b in runs:  # the sampled rows of the tile, packed
                a, b = a - row_offset - lo, b - row_offset - lo
                np.multiply(Z[a:b], sw[a:b, None], out=A[at : at + b - a, :m])
                A[at : at + b - a, m] = sw[a:b]
                at += b - a
            # A^T A by NumPy's syrk path, which releases the GIL (SciPy's ?syrk
            # wrapper holds it and serialised the threads of a NumPy-input fit)
            np.matmul(A.T, A, out=gram)
            # gram is exactly symmetric (NumPy mirrors syrk's triangle): adding its
            # transpose walks the Fortran-ordered acc contiguously (10x faster)
            if acc_empty:
                np.copyto(acc[:, :, jj], gram.T)
            else:
                acc[:, :, jj] += gram.T
        if used:
            acc_empty = False
            sums.n_hess += used
            pending += used
        if nh and not acc_empty and (pending >= _FLUSH_ROWS or hi == n):
            for jj in range(nh):
                sums.hess[jj] += acc[:, :, jj].T  # symmetric: contiguous walk
            pending, acc_empty = 0, True
    return sums


def _hessian_runs(start: int, stop: int, period: int) -> list[tuple[int, int]]:
    """The rows of ``[start, stop)`` (global indices) that enter a sampled Hessian.

    Rows are taken in blocks of :data:`_HESS_BLOCK`: block ``k`` (rows
    ``k B .. (k+1) B - 1``) is in when ``k % period == 0``. The sample depends
    on the global row index only, so every chunking of X sums the same rows.
    """
    if period == 1:
        return [(start, stop)]
    B = _HESS_BLOCK
    runs = []
    for k in range(start // B, (stop - 1) // B + 1):
        if k % period == 0:
            a, b = max(start, k * B), min(stop, (k + 1) * B)
            if a < b:
                runs.append((a, b))
    return runs


def _make_spec(
    kernel: FeatureKernel,
    cols: np.ndarray,
    points: np.ndarray,
    grad: np.ndarray,
    hess: np.ndarray,
    line: np.ndarray | None = None,
    directions: np.ndarray | None = None,
    hv: np.ndarray | None = None,
    vectors: np.ndarray | None = None,
    precise: bool = False,
    hess_period: int = 1,
) -> _Spec:
    """A pass specification from points ``(M + 1, Ka)`` in scaled coordinates."""
    m = kernel.n_components
    dtype = kernel.dtype
    scale = kernel.scale[:, None]
    empty = np.zeros(0, dtype=np.intp)

    def raw(a: np.ndarray | None, k: int, dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        # raw features are multiplied by scale * coefficients: the block never rescales a tile
        if a is None:
            return np.zeros((m, k), dtype=dt), np.zeros(k)
        return np.ascontiguousarray((scale * a[:m]).astype(dt)), np.asarray(a[m], dtype=np.float64).copy()

    coef, intercept = raw(points, points.shape[1], np.dtype(np.float64))
    line = empty if line is None else np.asarray(line, dtype=np.intp)
    hv = empty if hv is None else np.asarray(hv, dtype=np.intp)
    dcoef, dintercept = raw(directions, line.size, dtype)
    vcoef, vintercept = raw(vectors, hv.size, dtype)
    return _Spec(
        cols=np.asarray(cols, dtype=np.intp),
        coef=coef,
        intercept=intercept,
        grad=np.asarray(grad, dtype=np.intp),
        hess=np.asarray(hess, dtype=np.intp),
        line=line,
        dcoef=dcoef,
        dintercept=dintercept,
        steps=np.append(_LINE_STEPS, 0.0) if line.size else np.zeros(0),
        hv=hv,
        vcoef=vcoef,
        vintercept=vintercept,
        precise=precise,
        hess_period=hess_period,
    )


@dataclasses.dataclass
class _Final:
    """Finished sums in scaled coordinates (symmetric Hessians)."""

    n: int
    loss: np.ndarray
    grad: np.ndarray
    hess: np.ndarray
    line: np.ndarray
    hv: np.ndarray


def _finalize(sums: _Sums, kernel: FeatureKernel) -> _Final:
    # the sums are linear in the raw features, so the per-column scale is applied once here
    s = np.append(kernel.scale.astype(np.float64), 1.0)
    upper = np.triu(sums.hess)
    # a sampled Hessian estimates the sum over all rows: scaled by rows / sampled rows
    ratio = sums.n / sums.n_hess if sums.n_hess else 1.0
    hess = (upper + np.swapaxes(np.triu(upper, 1), 1, 2)) * (np.outer(s, s) * ratio)
    return _Final(sums.n, sums.loss, sums.grad * s[:, None], hess, sums.line, sums.hv * s[:, None])


def _as_points(coef: np.ndarray, intercept: object, m: int) -> np.ndarray:
    coef = np.asarray(coef, dtype=np.float64)
    if coef.ndim == 1:
        coef = coef[:, None]
    if coef.ndim != 2 or coef.shape[0] != m:
        raise ValueError(f"coef has shape {coef.shape}; expected ({m},) or ({m}, K)")
    k = coef.shape[1]
    b = np.broadcast_to(np.asarray(intercept, dtype=np.float64).reshape(-1), (k,))
    return np.vstack([coef, b[None, :]])


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
        Rows of features computed at a time (default from :func:`dxrf.get_options`).
    blas_threads : int, optional
        Limit BLAS threads for this call.

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
    with blas_limit(blas_threads):
        out = _finalize(_block_sums(X_block, T, kernel, spec, tile_rows or _tile_rows(kernel)), kernel)
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
    with blas_limit(blas_threads):
        out = _finalize(_block_sums(X_block, T, kernel, spec, tile_rows or _tile_rows(kernel)), kernel)
    return out.hv


# -- passes -------------------------------------------------------------------------


def _pass_task(X, T, start, kernel, spec, tile_rows, blas_threads):
    with blas_limit(blas_threads):
        return _block_sums(X, T, kernel, spec, tile_rows, row_offset=start)


def _merge(*parts: object) -> object:
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def map_reduce_pass(
    fn: Callable,
    x_blocks: list,
    other_blocks: list,
    starts: list[int],
    shared: tuple,
    *,
    split_every: int,
    progress: bool = False,
) -> object:
    """One pass: ``fn(x_b, o_b, start_b, *shared)`` per row chunk, then a tree reduction with ``+``.

    A generic "map blocks, then tree-reduce" over delayed row blocks, as in
    :func:`dxrf.accumulate`. ``shared`` values (the kernel, the coefficients)
    should be delayed values, so that they enter the graph once. Task keys are
    fresh (``pure=False``) on every call, so a pass is never answered from
    results the scheduler still holds. Computed through
    :func:`dxrf.progress.compute` (the distributed client if any).
    """
    task = dask.delayed(fn, pure=False)
    parts = [task(xb, ob, int(s), *shared) for xb, ob, s in zip(x_blocks, other_blocks, starts)]
    merge = dask.delayed(_merge, pure=False)
    while len(parts) > 1:
        parts = [merge(*parts[i : i + split_every]) for i in range(0, len(parts), split_every)]
    return compute(parts[0], progress=progress)


class _PassRunner:
    """Runs passes over (X, T): in this process for NumPy input, on the scheduler for dask.

    ``count`` is the number of passes made.
    """

    def __init__(
        self,
        X: np.ndarray | da.Array,
        T: np.ndarray | da.Array,
        kernel: FeatureKernel,
        progress: bool,
        precise: bool = False,
        hess_period: int = 1,
    ) -> None:
        self.kernel = kernel
        self.precise = precise
        self.hess_period = hess_period
        self.progress = bool(progress)
        self.count = 0
        self.tile_rows = _tile_rows(kernel)
        self.X, self.T = X, T
        self._held = None
        self._pool: ThreadPoolExecutor | None = None
        if not is_dask(X):
            _check_block(X, kernel, 0)
        if is_dask(X):
            chunks = X.chunks[0]
            k = T.shape[1]
            if is_dask(T):
                T = T.rechunk((chunks, (k,)))
            else:
                T = da.from_array(T, chunks=(chunks, (k,)), name=False)
            client = active_client()
            if client is not None:
                # labels are small: compute them (or ship NumPy ones) once, not in every pass
                T = client.persist(T)
                self._held = T
            self.x_blocks = list(X.to_delayed().ravel())
            self.t_blocks = list(T.to_delayed().ravel())
            self.starts = [int(s) for s in np.concatenate([[0], np.cumsum(chunks)[:-1]])]
            token = dask.base.tokenize(kernel)
            self.kernel_d = dask.delayed(kernel, pure=True, name=f"dxrf-kernel-{token}")

    def _in_process(self, spec: _Spec) -> _Sums:
        """NumPy input: blocks of whole tiles on a thread pool, one BLAS thread each.

        Dask runs one task per core in the same way; here the elementwise work
        (cosines, losses, scaling) is spread over the cores too. X was checked
        once for finiteness when the runner was made.
        """
        n = self.X.shape[0]
        threads = max(1, min(os.cpu_count() or 1, -(-n // self.tile_rows)))
        block = self.tile_rows * -(-n // (self.tile_rows * threads))  # whole tiles per thread

        def run(start: int) -> _Sums:
            stop = min(start + block, n)
            with blas_limit(1 if threads > 1 else None):
                return _block_sums(self.X[start:stop], self.T[start:stop], self.kernel, spec, self.tile_rows, start, check=False)

        if threads == 1:
            return run(0)
        if self._pool is None:
            # kept for the whole fit: its threads keep their scratch buffers between passes
            self._pool = ThreadPoolExecutor(threads, thread_name_prefix="dxrf-logistic-pass")
        return _merge(*self._pool.map(run, range(0, n, block)))

    def close(self) -> None:
        """Release the thread pool of NumPy passes and the labels held on the cluster."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._held = None

    def __call__(self, spec: _Spec) -> _Final:
        self.count += 1
        if not is_dask(self.X):
            sums = self._in_process(spec)
        else:
            opts = get_options()
            spec_d = dask.delayed(spec, pure=False, traverse=False)
            sums = map_reduce_pass(
                _pass_task,
                self.x_blocks,
                self.t_blocks,
                self.starts,
                (self.kernel_d, spec_d, self.tile_rows, opts.blas_threads),
                split_every=opts.split_every,
                progress=self.progress,
            )
        return _finalize(sums, self.kernel)


# -- requests from the per-class solvers, batched into passes -----------------------------


@dataclasses.dataclass
class _Request:
    """What one class needs from the next pass, at ``point`` = [theta; beta] (M + 1,)."""

    point: np.ndarray
    grad: bool = True
    hessian: bool = False
    direction: np.ndarray | None = None  # line-search losses at point - (1 - s) direction
    vector: np.ndarray | None = None  # Hessian-vector product at point


@dataclasses.dataclass
class _Reply:
    loss: float | None = None
    grad: np.ndarray | None = None
    hessian: np.ndarray | None = None
    line: np.ndarray | None = None
    hv: np.ndarray | None = None


@dataclasses.dataclass
class _Outcome:
    point: np.ndarray
    loss: float
    n_iter: int
    converged: bool
    message: str


_Solver = Generator[_Request, _Reply, _Outcome]


def _batch_pass(runner: _PassRunner, requests: dict[int, _Request]) -> dict[int, _Reply]:
    """Serve the requests of several classes with ONE pass."""
    ks = sorted(requests)
    reqs = [requests[k] for k in ks]
    points = np.column_stack([r.point for r in reqs])
    def pick(cond: Callable[[_Request], bool]) -> np.ndarray:
        return np.array([j for j, r in enumerate(reqs) if cond(r)], dtype=np.intp)

    grad, hess = pick(lambda r: r.grad), pick(lambda r: r.hessian)
    line, hv = pick(lambda r: r.direction is not None), pick(lambda r: r.vector is not None)
    spec = _make_spec(
        runner.kernel,
        np.array(ks),
        points,
        grad,
        hess,
        line=line,
        directions=np.column_stack([reqs[j].direction for j in line]) if line.size else None,
        hv=hv,
        vectors=np.column_stack([reqs[j].vector for j in hv]) if hv.size else None,
        precise=runner.precise,
        hess_period=runner.hess_period,
    )
    out = runner(spec)
    replies = {k: _Reply() for k in ks}
    for i, j in enumerate(grad):
        replies[ks[j]].loss = float(out.loss[i])
        replies[ks[j]].grad = out.grad[:, i]
    for i, j in enumerate(hess):
        replies[ks[j]].hessian = out.hess[i]
    for i, j in enumerate(line):
        replies[ks[j]].line = out.line[:, i]
    for i, j in enumerate(hv):
        replies[ks[j]].hv = out.hv[:, i]
    return replies


def _drive(solvers: dict[int, _Solver], runner: _PassRunner) -> dict[int, _Outcome]:
    """Advance the per-class solvers in lockstep: every pass serves all unfinished classes."""
    outcomes: dict[int, _Outcome] = {}
    pending: dict[int, _Request] = {}

    def advance(k: int, reply: _Reply | None) -> None:
        try:
            # the solver's (M+1)-square algebra on one BLAS thread: bit-reproducible whatever
            # the caller's threads, and no BLAS threads left spinning on the cores that the
            # workers of a local cluster need for the next pass
            with blas_limit(1):
                pending[k] = next(solvers[k]) if reply is None else solvers[k].send(reply)
        except StopIteration as stop:
            outcomes[k] = stop.value
            pending.pop(k, None)

    try:
        for k in solvers:
            advance(k, None)
        while pending:
            for k, reply in _batch_pass(runner, pending).items():
                advance(k, reply)
    finally:
        for s in solvers.values():
            s.close()
    return outcomes


# -- the objective ---------------------------------------------------------------------


class _Objective:
    """``L = loss / N + alpha/2 |theta|^2`` and its derivatives from a pass's sums."""

    def __init__(self, n: int, alpha: float, m: int, fit_intercept: bool, dtype: np.dtype) -> None:
        self.n, self.alpha, self.m, self.fit_intercept = n, alpha, m, fit_intercept
        self.dim = m + 1 if fit_intercept else m  # free parameters
        self.ftol = _FTOL[np.dtype(dtype)]

    def value(self, loss_sum: float, w: np.ndarray) -> float:
        th = w[: self.m]
        return loss_sum / self.n + 0.5 * self.alpha * float(th @ th)

    def gradient(self, grad_sum: np.ndarray, w: np.ndarray) -> np.ndarray:
        g = grad_sum / self.n
        g[: self.m] += self.alpha * w[: self.m]
        if not self.fit_intercept:
            g[self.m] = 0.0
        return g

    def hvp(self, hv_sum: np.ndarray, v: np.ndarray) -> np.ndarray:
        h = hv_sum / self.n
        h[: self.m] += self.alpha * v[: self.m]
        if not self.fit_intercept:
            h[self.m] = 0.0
        return h

    def newton_step(self, hess_sum: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Solve ``(H/N + alpha I_theta) Delta = -g`` by Cholesky (intercept unpenalised)."""
        d = self.dim
        H = hess_sum[:d, :d] / self.n
        H[np.diag_indices(self.m)] += self.alpha
        step = np.zeros(self.m + 1)
        jitter = 0.0
        for _ in range(8):
            try:
                factor = scipy.linalg.cho_factor(H, lower=True, check_finite=False)
                step[:d] = scipy.linalg.cho_solve(factor, -g[:d], check_finite=False)
                return step
            except np.linalg.LinAlgError:
                # only when the intercept row is (numerically) singular: all weights ~ 0
                jitter = max(jitter * 100.0, 1e-12 * max(np.trace(H) / d, 1e-300))
                H[np.diag_indices(d)] += jitter
        raise np.linalg.LinAlgError("the Newton system is not positive definite even with jitter")

    def quasi_newton_update(self, hess_sum: np.ndarray, s: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``hess_sum`` after a BFGS update of the model Hessian ``hess_sum / N + alpha I_theta``.

        ``s`` is the step taken and ``y`` the change of the gradient along it.
        Powell's damping (``y`` blended with ``B s`` when ``s^T y < 0.2 s^T B s``)
        keeps the model positive definite whatever the rounding of ``y``.
        """
        d = self.dim
        s, y = s[:d], y[:d]
        Bs = hess_sum[:d, :d] @ s / self.n
        Bs[: self.m] += self.alpha * s[: self.m]
        sBs, sy = float(s @ Bs), float(s @ y)
        if not sBs > 0.0:
            return hess_sum
        if sy < 0.2 * sBs:
            theta = 0.8 * sBs / (sBs - sy)
            y = theta * y + (1.0 - theta) * Bs
            sy = 0.2 * sBs
        out = hess_sum.copy()
        out[:d, :d] += self.n * (np.outer(y, y) / sy - np.outer(Bs, Bs) / sBs)
        return out

    def accept_full_step(self, w: np.ndarray, slope: float, direction: np.ndarray, trial: _Reply) -> bool:
        """Whether the full step ``w + direction``, evaluated by ``trial``, is taken.

        It is when it passes the Armijo test against the loss at ``w``
        recomputed in the trial's own pass (``trial.line[-1]``): both losses
        then carry the same rounding of the scores, so their difference is
        accurate far below the rounding of either (float32 scores). Failing
        that, it is taken when the objective still decreases at its end
        (``g(w + direction)^T direction <= 0``): by convexity it then lies
        before the minimum along the line, so its loss is no larger.
        """
        L0 = self.value(trial.line[-1], w)
        w1 = w + direction
        if self.value(trial.loss, w1) <= L0 + _ARMIJO * slope + self.ftol * max(abs(L0), 1.0):
            return True
        return float(self.gradient(trial.grad, w1) @ direction) <= 0.0

    def grid_step(self, w: np.ndarray, slope: float, direction: np.ndarray, line: np.ndarray, c: float) -> float | None:
        """Among the steps ``c * _LINE_STEPS``, the one with the lowest objective among those
        passing Armijo; None if none does.

        ``line`` holds the losses of one pass at those steps and, last, at ``w``
        (the reference of the Armijo test, with the same rounding).
        """
        steps = c * _LINE_STEPS
        th, dth = w[: self.m], direction[: self.m]
        pen = 0.5 * self.alpha * (th @ th + 2 * steps * (th @ dth) + steps**2 * (dth @ dth))
        Ls = line[:-1] / self.n + pen
        L0 = self.value(line[-1], w)
        ok = Ls <= L0 + _ARMIJO * steps * slope + self.ftol * max(abs(L0), 1.0)
        if not ok.any():
            return None
        return float(steps[ok][np.argmin(Ls[ok])])

    def converges_next(self, decrement: float, L: float) -> bool:
        """Whether a Newton step with this decrement should land where the next step is
        below tolerance (near the optimum the decrement squares at each step): there
        the ratio of successive decrements is rounding, not a sign of a poor model."""
        return decrement <= math.sqrt(0.5 * self.ftol * max(abs(L), 1.0))

    def stalled(self, L_old: float, L_new: float) -> bool:
        return L_old - L_new <= self.ftol * max(abs(L_old), 1.0)


# -- the solvers, one generator per class ------------------------------------------------------


def _capped(step: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The step shortened to at most ``10 max(|w|, 100)``.

    When every point is saturated (a far-off warm start) the weights
    ``sigma(f)(1 - sigma(f))`` underflow and the unpenalised intercept has no
    curvature: the Newton step is astronomically long, beyond what halving
    can repair. A positive multiple stays a descent direction; steps of a
    sane model are far shorter than the cap.
    """
    amax = float(np.max(np.abs(step)))
    if not np.isfinite(amax):
        raise FloatingPointError("the Newton step is not finite")
    radius = 10.0 * max(float(np.linalg.norm(w)), 100.0)
    if amax == 0.0 or amax * math.sqrt(step.size) <= radius:
        return step
    unit = step / amax  # the norm of a step of 1e160 would overflow
    return unit * (radius / float(np.linalg.norm(unit)))


def _line_search(obj: _Objective, w: np.ndarray, slope: float, step: np.ndarray, trial: _Reply) -> Generator[_Request, _Reply, float | None]:
    """The step length along ``step``, given the pass that evaluated ``w + step``.

    1 when :meth:`_Objective.accept_full_step` says so; else the best step of
    the grid 1/2 .. 2^-10 whose losses came with the trial pass; else (far
    from the optimum, e.g. a saturated warm start) loss-only passes continue
    the grid ten halvings at a time, at most :data:`_MAX_BACKTRACK_PASSES`.
    None when no step decreases the loss. Every Armijo test compares losses
    from one pass (the grid includes ``w`` itself).
    """
    if obj.accept_full_step(w, slope, step, trial):
        return 1.0
    c, line = 1.0, trial.line
    for extra in range(_MAX_BACKTRACK_PASSES + 1):
        s = obj.grid_step(w, slope, step, line, c)
        if s is not None or extra == _MAX_BACKTRACK_PASSES:
            return s
        c *= _LINE_STEPS[-1]
        # losses at w + c * s' * step for the grid s': "point - (1 - s') direction" with both scaled by c
        line = (yield _Request(w + c * step, grad=False, direction=c * step)).line
    return None


def _newton(obj: _Objective, w: np.ndarray, tol: float, max_iter: int) -> _Solver:
    """Newton with Hessian passes only where they pay: one pass per iteration.

    A Hessian pass costs ``N M^2`` flops (a syrk), a gradient pass
    ``O(N M (d + K))``. The first pass brings the exact Hessian; in between
    Hessian passes the model Hessian is updated by BFGS from the gradients
    that every pass brings anyway. A trial pass brings an exact Hessian when

    - the previous step made slow progress (the Newton decrement fell by less
      than :data:`_REFRESH`): the model is off, exact steps converge faster;
    - the next point should be the last (the decrement and the gradient,
      extrapolated by their last ratio, meet the tolerance): the final step,
      taken without a verifying pass, is then an exact Newton step.

    When the tolerance is met while the model is more than one update away
    from an exact Hessian, one more pass brings one: the final step of a
    converged fit is a Newton step with an exact Hessian at most one step old.
    """
    reply = yield _Request(w, hessian=True)
    L, g, H = obj.value(reply.loss, w), obj.gradient(reply.grad, w), reply.hessian
    n_iter, stalled, age = 0, False, 0  # age: BFGS updates since the last exact Hessian
    last_decrement = last_gmax = math.inf
    while True:
        step = obj.newton_step(H, g)
        decrement = -float(g @ step)  # lambda^2: L - min of the quadratic model = lambda^2 / 2
        gmax = float(np.max(np.abs(g)))
        done = gmax <= tol or decrement / 2 <= obj.ftol * max(abs(L), 1.0)
        if done and age <= 1:
            # the last step is below tolerance: take it without a verifying pass
            return _Outcome(w + step, L - decrement / 2, n_iter, True, "converged")
        if stalled:
            return _Outcome(w, L, n_iter, True, "converged: relative decrease of the loss below ftol")
        if n_iter >= max_iter:
            return _Outcome(w, L, n_iter, False, f"max_iter={max_iter} reached")
        if done or age == 0:
            # done with an old model: one more (exact) step; with an exact Hessian here,
            # the Hessian of the next point is not needed (this one is one step old there)
            fresh = done
        else:
            slow = decrement > _REFRESH * last_decrement and not obj.converges_next(decrement, L)
            last = (
                gmax * (gmax / last_gmax) <= tol
                or decrement * (decrement / last_decrement) / 2 <= obj.ftol * max(abs(L), 1.0)
            )
            fresh = slow or last
        step = _capped(step, w)
        trial = yield _Request(w + step, hessian=fresh, direction=step)
        s = yield from _line_search(obj, w, float(g @ step), step, trial)
        if s is None:
            return _Outcome(w, L, n_iter, False, "line search found no decrease")
        w_new = w + s * step
        reply = trial if s == 1.0 else (yield _Request(w_new, hessian=True))
        L_new, g_new = obj.value(reply.loss, w_new), obj.gradient(reply.grad, w_new)
        # a stall of a full step is rounding (float32 scores); after backtracking it is not.
        # The loss at w from the trial's own pass has the same rounding as L_new.
        stalled = s == 1.0 and obj.stalled(obj.value(trial.line[-1], w), L_new)
        if reply.hessian is not None:
            H, age = reply.hessian, 0
        else:
            H, age = obj.quasi_newton_update(H, w_new - w, g_new - g), age + 1
        w, L, g, last_decrement, last_gmax = w_new, L_new, g_new, decrement, gmax
        n_iter += 1


def _newton_cg(obj: _Objective, w: np.ndarray, tol: float, max_iter: int) -> _Solver:
    """Truncated Newton: CG on Hessian-vector products (one pass each) and the Newton line search."""
    reply = yield _Request(w)
    L, g = obj.value(reply.loss, w), obj.gradient(reply.grad, w)
    n_iter, stalled = 0, False
    while True:
        if np.max(np.abs(g)) <= tol:
            return _Outcome(w, L, n_iter, True, "converged")
        if stalled:
            return _Outcome(w, L, n_iter, True, "converged: relative decrease of the loss below ftol")
        if n_iter >= max_iter:
            return _Outcome(w, L, n_iter, False, f"max_iter={max_iter} reached")
        # CG from 0 on H p = -g, stopped at the usual forcing term (superlinear convergence)
        gnorm = float(np.linalg.norm(g))
        target = min(0.5, math.sqrt(gnorm)) * gnorm
        step, r = np.zeros_like(g), g.copy()
        d, rr = -r, float(r @ r)
        for _ in range(_MAX_CG):
            Hd = obj.hvp((yield _Request(w, grad=False, vector=d)).hv, d)
            curv = float(d @ Hd)
            if curv <= 1e-10 * obj.alpha * float(d @ d):
                # (near) zero curvature: only the unpenalised intercept can have it, when
                # every point is saturated (w = 0); keep the step so far, or descend
                break
            a = rr / curv
            step += a * d
            r += a * Hd
            rr_new = float(r @ r)
            if math.sqrt(rr_new) <= target:
                break
            d = -r + (rr_new / rr) * d
            rr = rr_new
        if not step.any():
            step = -g
        step = _capped(step, w)
        slope = float(g @ step)
        trial = yield _Request(w + step, direction=step)
        s = yield from _line_search(obj, w, slope, step, trial)
        if s is None:
            return _Outcome(w, L, n_iter, False, "line search found no decrease")
        w_new = w + s * step
        reply = trial if s == 1.0 else (yield _Request(w_new))
        L_new = obj.value(reply.loss, w_new)
        # a stall of a full step is rounding (float32 scores); after backtracking it is not
        stalled = s == 1.0 and obj.stalled(obj.value(trial.line[-1], w), L_new)
        w, L, g = w_new, L_new, obj.gradient(reply.grad, w_new)
        n_iter += 1


class _Stop(BaseException):
    """Unwinds a solver thread whose generator was closed."""


def _threaded(run: Callable[[Callable[[_Request], _Reply]], object]) -> Generator[_Request, _Reply, object]:
    """Turn a blocking optimiser (scipy's) into a solver generator.

    ``run(call)`` runs in a thread; each ``call(request)`` hands the request to
    the generator, which yields it to the driver and sends the reply back. Only
    one side runs at a time, so several classes share passes without races.
    """
    to_main: queue.SimpleQueue = queue.SimpleQueue()
    to_thread: queue.SimpleQueue = queue.SimpleQueue()

    def call(request: _Request) -> _Reply:
        to_main.put(("request", request))
        reply = to_thread.get()
        if reply is None:
            raise _Stop
        return reply

    def target() -> None:
        try:
            to_main.put(("done", run(call)))
        except _Stop:
            to_main.put(("stopped", None))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            to_main.put(("error", exc))

    thread = threading.Thread(target=target, name="dxrf-logistic-solver", daemon=True)
    thread.start()
    try:
        while True:
            kind, payload = to_main.get()
            if kind == "done":
                return payload
            if kind == "error":
                raise payload
            if kind == "stopped":
                raise RuntimeError("solver thread stopped unexpectedly")
            to_thread.put((yield payload))
    finally:
        if thread.is_alive():
            to_thread.put(None)
            thread.join()


def _lbfgs(obj: _Objective, w: np.ndarray, tol: float, max_iter: int) -> _Solver:
    """scipy's L-BFGS-B, one pass per function-and-gradient evaluation."""
    d, m = obj.dim, obj.m

    def point(x: np.ndarray) -> np.ndarray:
        p = np.zeros(m + 1)
        p[:d] = x
        return p

    def run(call: Callable[[_Request], _Reply]) -> scipy.optimize.OptimizeResult:
        def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
            p = point(x)
            reply = call(_Request(p))
            return obj.value(reply.loss, p), obj.gradient(reply.grad, p)[:d]

        options = {"maxiter": max_iter, "gtol": tol, "ftol": obj.ftol, "maxls": 50, "maxfun": max(15000, 2 * max_iter)}
        return scipy.optimize.minimize(fun, w[:d].copy(), jac=True, method="L-BFGS-B", options=options)

    res = yield from _threaded(run)
    return _Outcome(point(res.x), float(res.fun), int(res.nit), bool(res.success), str(res.message))


_SOLVER_FUNCTIONS = {"newton": _newton, "newton-cg": _newton_cg, "lbfgs": _lbfgs}


# -- the public solver ------------------------------------------------------------------------


def newton_hessian_bytes(n_components: int, n_classes: int = 1) -> int:
    """Bytes of the K float64 Hessians of a Newton pass: ``K (M + 1)^2 * 8``."""
    return int(n_classes) * (int(n_components) + 1) ** 2 * 8


def choose_solver(n_components: int, n_classes: int = 1) -> str:
    """The solver of ``solver="auto"``: Newton while its Hessians are affordable, else L-BFGS.

    Newton needs ``K (M + 1)^2 * 8`` bytes per task and per partial sum and
    K N M^2 flops per pass (like K Gram passes); it is chosen when that
    memory is at most :data:`NEWTON_MAX_HESSIAN_BYTES` and
    ``M <= NEWTON_MAX_COMPONENTS``.
    """
    if n_components <= NEWTON_MAX_COMPONENTS and newton_hessian_bytes(n_components, n_classes) <= NEWTON_MAX_HESSIAN_BYTES:
        return "newton"
    return "lbfgs"


def _check_alpha(alpha: object) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(
            f"alpha must be a finite number > 0, got {alpha!r}: alpha = 0 (no penalty) has no minimiser "
            "on separable data, where the coefficients diverge"
        )
    return float(alpha)


def _prepare(X: object, T: object, kernel: FeatureKernel) -> tuple[np.ndarray | da.Array, np.ndarray | da.Array, int, int]:
    """Check X and T and bring T to shape (N, K); NumPy labels become int8."""
    if is_dask(X):
        X = check_dask_matrix(X, n_features=kernel.n_features_in)
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
        if X.shape[0] == 0:
            raise ValueError("X is empty (0 rows)")
        if X.shape[1] != kernel.n_features_in:
            raise ValueError(f"X has {X.shape[1]} columns; the feature map expects {kernel.n_features_in}")
        if not np.issubdtype(X.dtype, np.number):
            raise TypeError(f"X must hold numbers, got dtype {X.dtype}")
    n = X.shape[0]
    if T is None:
        raise ValueError("labels T are required")
    if is_dask(T) and not is_dask(X):
        T = T.compute()
    if not is_dask(T):
        T = np.asarray(T)
    if T.ndim not in (1, 2):
        raise ValueError(f"labels T must have shape (n,) or (n, K), got {T.shape}")
    if T.shape[0] != n:
        raise ValueError(f"labels T have {T.shape[0]} rows but X has {n}")
    if T.ndim == 1:
        T = T[:, None]
    if T.shape[1] == 0:
        raise ValueError("labels T have no columns")
    if not is_dask(T):
        T = _check_labels(T, n).astype(np.int8)
    return X, T, n, int(T.shape[1])


def _initial_points(coef_init: object, intercept_init: object, m: int, k: int, fit_intercept: bool) -> np.ndarray:
    W = np.zeros((m + 1, k))
    if coef_init is not None:
        c = np.asarray(coef_init, dtype=np.float64)
        if c.shape == (m,) and k == 1:
            c = c[:, None]
        if c.shape != (m, k):
            raise ValueError(f"coef_init has shape {np.shape(coef_init)}; expected ({m}, {k})" + (f" or ({m},)" if k == 1 else ""))
        W[:m] = c
    if intercept_init is not None and fit_intercept:
        b = np.asarray(intercept_init, dtype=np.float64).reshape(-1)
        if b.size not in (1, k):
            raise ValueError(f"intercept_init has shape {np.shape(intercept_init)}; expected ({k},)")
        W[m] = b
    if not np.isfinite(W).all():
        raise ValueError("coef_init and intercept_init must be finite")
    return W


def _hessian_period(hessian_rows: object, n: int, m: int, d: int) -> int:
    """The period ``p`` of the Hessian row sample (1: every row) for ``hessian_rows``."""
    if hessian_rows is None:
        return 1
    auto = isinstance(hessian_rows, str) and hessian_rows == "auto"
    count = isinstance(hessian_rows, numbers.Integral) and not isinstance(hessian_rows, bool) and hessian_rows > 0
    if not (auto or count):
        raise ValueError(f'hessian_rows must be "auto", a positive integer or None, got {hessian_rows!r}')
    if auto and m + 1 < 2 * (d + 1):
        # a row's Hessian term ((M+1)^2 flops) is then cheaper than its features
        # (2 (d+1) M): sampling would save little and cost passes
        return 1
    wanted = HESSIAN_ROWS_PER_PARAMETER * (m + 1) if auto else int(hessian_rows)
    # whole blocks are sampled: below two blocks per period the sample is not a saving
    period = n // wanted
    return period if period >= 2 and n >= 2 * _HESS_BLOCK * period else 1


def fit_logistic(
    X: np.ndarray | da.Array,
    T: np.ndarray | da.Array,
    kernel: object,
    *,
    alpha: float,
    solver: str = "auto",
    max_iter: int = 100,
    tol: float = 1e-8,
    fit_intercept: bool = True,
    coef_init: np.ndarray | None = None,
    intercept_init: np.ndarray | float | None = None,
    progress: bool | None = False,
    hessian_rows: int | str | None = "auto",
) -> LogisticResult:
    """L2-penalised logistic regression on the features ``z(X)``, binary or one-vs-rest.

    Minimises, for each label column k,
    ``(1/N) sum_n log(1 + exp(-T_nk f_nk)) + (alpha/2) |theta_k|^2`` with
    ``f_nk = z(x_n)^T theta_k + beta_k`` (intercept unpenalised): scikit-learn's
    ``LogisticRegression(C=1/(N alpha))`` on the explicit features. The K
    problems are independent but share every pass over X.

    Parameters
    ----------
    X : ndarray or dask array of shape (N, d)
        A dask array should have all columns in one chunk (rechunked with a
        warning otherwise). NumPy input is processed in this process.
    T : ndarray or dask array of shape (N,) or (N, K)
        Labels in {-1, +1}, row-aligned with X: one column per binary problem
        (one-vs-rest: ``T[:, k] = +1`` for class k, -1 otherwise). Labels of a
        dask T are checked inside the pass.
    kernel : FeatureKernel or fitted feature map
        The features ``z``; per-block arithmetic runs in its dtype.
    alpha : float
        Penalty, > 0. Unpenalised logistic regression (alpha = 0) is refused:
        it has no solution on separable data.
    solver : {"auto", "newton", "lbfgs", "newton-cg"}
        See the module notes; "auto" is :func:`choose_solver`.
    max_iter : int
        Iterations per class (Newton or truncated-Newton steps, L-BFGS iterations).
    tol : float
        Stop when the max-norm of the objective's gradient is ``<= tol`` (the
        objective is a mean, so tol does not scale with N), or when the
        relative decrease of the objective falls below rounding level.
    fit_intercept : bool
    coef_init : ndarray of shape (M,) or (M, K), optional
        Warm start.
    intercept_init : float or ndarray of shape (K,), optional
    progress : bool or None
        Show a progress bar on every pass over dask input (None: the
        ``progress`` option of :func:`dxrf.get_options`).
    hessian_rows : "auto", int or None
        Rows sampled for each Hessian of the "newton" solver (gradients and
        losses always use every row). A Hessian costs ``N M^2`` flops, against
        ``N M (2 d + ...)`` for the rest of a pass; with ``N`` much larger than
        ``M`` a sample of rows gives a Hessian as good for Newton steps
        (sub-sampled Newton: exact gradients, sampled curvature) at a fraction
        of the cost. The sample is every ``p``-th block of 1024 rows by global
        row index (the same rows for every chunking), ``p = N // hessian_rows``,
        and its sum is scaled by N / (rows sampled). "auto":
        ``HESSIAN_ROWS_PER_PARAMETER * (M + 1)`` rows when ``M + 1 >= 2 (d + 1)``
        (below, a row's Hessian term costs less than its features), else
        exact; None: every row (exact Hessians). Exact whenever the sample
        would be more than N / 2. Invalid values raise ``ValueError`` (also
        for the solvers without Hessians, which ignore it).

    Returns
    -------
    LogisticResult

    Notes
    -----
    Passes: "newton" makes one pass per iteration plus one for the start
    (two for an iteration whose full step is rejected by the line search,
    rarely a few more); "lbfgs" one per function evaluation; "newton-cg" one
    per Hessian-vector product and per trial point. ``n_passes`` counts them
    all. A pass over dask input is one task per row chunk and a tree
    reduction, computed on the distributed client if there is one; NumPy
    labels are persisted on the cluster once per fit.
    """
    alpha = _check_alpha(alpha)
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not tol >= 0 or not np.isfinite(tol):
        raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")
    kernel = resolve_kernel(kernel, X)
    m = kernel.n_components
    X, T, n, k = _prepare(X, T, kernel)
    W0 = _initial_points(coef_init, intercept_init, m, k, bool(fit_intercept))
    chosen = choose_solver(m, k) if solver == "auto" else solver
    # scipy's L-BFGS line search compares function values, so float32 features get
    # float64 scores there (see _block_sums); Newton's line search also uses derivatives
    precise = chosen == "lbfgs"
    obj = _Objective(n, alpha, m, bool(fit_intercept), np.float64 if precise else kernel.dtype)
    show = get_options().progress if progress is None else progress
    period = _hessian_period(hessian_rows, n, m, kernel.n_features_in)  # checked for every solver
    period = period if chosen == "newton" else 1
    runner = _PassRunner(X, T, kernel, bool(show), precise=precise, hess_period=period)
    make = _SOLVER_FUNCTIONS[chosen]
    try:
        outcomes = _drive({j: make(obj, W0[:, j].copy(), float(tol), int(max_iter)) for j in range(k)}, runner)
    finally:
        runner.close()
    W = np.column_stack([outcomes[j].point for j in range(k)])
    converged = all(outcomes[j].converged for j in range(k))
    if not converged:
        failed = [f"column {j}: {outcomes[j].message}" for j in range(k) if not outcomes[j].converged]
        warnings.warn(
            f"logistic regression ({chosen}) did not converge: " + "; ".join(failed)
            + ". Increase max_iter, or check the scaling of the data.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return LogisticResult(
        coef=W[:m].copy(),
        intercept=W[m].copy() if fit_intercept else np.zeros(k),
        n_iter=max(outcomes[j].n_iter for j in range(k)),
        n_passes=runner.count,
        loss=np.array([outcomes[j].loss for j in range(k)]),
        converged=converged,
        solver=chosen,
        hessian_rows=sum(b - a for a, b in _hessian_runs(0, n, period)) if chosen == "newton" else 0,
    )

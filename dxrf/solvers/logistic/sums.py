"""The per-block kernel of every logistic pass: loss, gradient, Hessians, line-search losses, Hessian-vector products.

:func:`_block_sums` is a pure NumPy function of one block of rows and a
:class:`_Spec` (what the pass computes); its :class:`_Sums` add up over
blocks, and :func:`_finalize` brings the total to scaled-feature coordinates.
:func:`logistic_block` and :func:`logistic_hvp_block` (binary) and
:func:`softmax_block` and :func:`softmax_hvp_block` (multinomial) are the
public per-block functions on top of it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.special import expit

from dxrf.core.blas import blas_limit
from dxrf.core.buffers import thread_buffer
from dxrf.core.validation import check_int
from dxrf.engine import check_block
from dxrf.features.kernel import FeatureKernel
from dxrf.core.options import Options, resolve_options
from dxrf.solvers.logistic.objective import _LINE_STEPS, _check_labels, _softplus
from dxrf.solvers.logistic.sample import _hessian_runs
from dxrf.solvers.logistic.softmax import class_index, softmax_rows

_TILE_ROWS = 2048  # rows per tile by default: a tile and its copies stay in cache
_FLUSH_ROWS = 16384  # rows summed into a Hessian in the kernel dtype before the float64 total


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
    dcoef: np.ndarray  # (M, len(line)) kernel dtype (float64 when wide)
    dintercept: np.ndarray
    steps: np.ndarray  # the grid _LINE_STEPS, then 0 (the point the direction starts from)
    hv: np.ndarray
    vcoef: np.ndarray  # (M, len(hv)) kernel dtype (float64 when wide)
    vintercept: np.ndarray
    precise: bool = False  # float64 scores for float32 kernels (see _block_sums)
    wide: bool = False  # float64 products of row-independent float32 features (see _block_sums)
    hess_period: int = 1  # Hessians from the rows of every hess_period-th block of _HESS_BLOCK (1: all rows)
    multinomial: bool = False  # the K point columns are one softmax (see softmax.py); no Hessians


@dataclasses.dataclass(eq=False)
class _PassSums:
    """What a pass brings, one column per batch column that asked for it (see :class:`_Spec`)."""

    n: int
    loss: np.ndarray
    grad: np.ndarray
    hess: np.ndarray
    line: np.ndarray
    hv: np.ndarray


@dataclasses.dataclass(eq=False)
class _Sums(_PassSums):
    """Partial sums of a pass in raw-feature coordinates; Hessians hold the upper triangle."""

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


def _tile_rows(kernel: FeatureKernel, options: Options) -> int:
    """Default rows per tile: at most :data:`_TILE_ROWS`, within ``options.tile_bytes``."""
    opts = options
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
    weights: np.ndarray | None = None,
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
    ``weights`` (float64, one per row, checked before) multiply every row's
    loss, gradient, Hessian and Hessian-vector terms; ``n`` is then their sum.
    With ``spec.multinomial`` the K point columns are one softmax: the per-row
    terms come from :func:`~.softmax.softmax_rows`, the products are the same.
    ``spec.wide`` (a small fit on float32 features, :func:`dxrf.stats.tiles.wide_products`):
    the features are :meth:`~dxrf.features.kernel.FeatureKernel.raw_rowwise`'s
    and every product, Hessians included, runs in float64.
    """
    if check:
        X = check_block(X, kernel.n_features_in, row_offset)
    n = X.shape[0]
    T = _check_labels(T, n, row_offset)
    m = kernel.n_components
    dtype = kernel.dtype
    sums = _Sums.zeros(spec, m)
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        if weights.shape[0] != n:
            raise ValueError(f"sample_weight block at row {row_offset} has {weights.shape[0]} weights; X has {n} rows")
    sums.n = n if weights is None else float(weights.sum())
    if n == 0:
        return sums
    labels = T[:, spec.cols]
    classes = class_index(labels, row_offset) if spec.multinomial else None
    tile_rows = max(1, min(tile_rows, n))
    # float32 scores (and float32 coefficients) make the loss steppy at ~1e-10 relative,
    # which stalls scipy's L-BFGS line search: "precise" passes score in float64
    wide = spec.wide and dtype != np.float64
    precise = (spec.precise or wide) and dtype != np.float64
    hdtype = np.dtype(np.float64) if wide else dtype  # the Hessians' tiles
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
        gram = thread_buffer("tile-gram", (m + 1, m + 1), hdtype)
        scaled = thread_buffer("scaled", (tile_rows, m + 1), hdtype)
        sw_buf = thread_buffer("sqrt-w", (tile_rows,), hdtype)
        # one (M+1)^2 block per Hessian, summed over tiles in the feature dtype and
        # flushed to float64 (allocated per block, not kept: K of them can be large,
        # and a block's Gram costs far more than touching them)
        acc = np.zeros((m + 1, m + 1, nh), dtype=hdtype, order="F")
        pending, acc_empty = 0, True
    line_c = (1.0 - spec.steps)[None, :, None]  # margins at point - (1 - s) direction
    for lo in range(0, n, tile_rows):
        hi = min(lo + tile_rows, n)
        rows = hi - lo
        if wide:
            Z = buf[:rows]
            Z[...] = kernel.raw_rowwise(X[lo:hi])
        else:
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
        rw = None if weights is None else weights[lo:hi, None]
        R = resid[:rows]
        if spec.multinomial:
            loss, line = softmax_rows(
                f, classes[lo:hi],
                grad_out=R[:, :ng] if ng else None,
                u=S[:, kc + nl :] if nv else None,
                hv_out=R[:, ng:] if nv else None,
                d=S[:, kc : kc + nl] if nl else None,
                steps=spec.steps if nl else None,
                weights=None if rw is None else rw[:, 0],
            )
            if ng:
                sums.loss += loss
            if nl:
                sums.line += line
        else:
            t = t_buf[:rows]
            np.copyto(t, labels[lo:hi])
            margin = np.multiply(t, f, out=margin_buf[:rows])
            np.negative(margin, out=margin)  # the loss is softplus(margin)
            p = expit(margin, out=p_buf[:rows])  # sigma(-t f)
            w = np.subtract(1.0, p, out=w_buf[:rows])
            w *= p  # sigma(f)(1 - sigma(f)), the same for both labels
            if rw is not None:
                w *= rw  # the row weights enter Hessians and Hessian-vector products here
            if nr:
                np.multiply(t[:, spec.grad], p[:, spec.grad], out=R[:, :ng])
                np.negative(R[:, :ng], out=R[:, :ng])  # d loss / d f
                if rw is not None:
                    R[:, :ng] *= rw
                np.multiply(S[:, kc + nl :], w[:, spec.hv], out=R[:, ng:])
            if ng:
                lv = loss_buf[:rows]
                np.copyto(lv, margin[:, spec.grad])
                lv = _softplus(lv, loss_tmp[:rows])
                if rw is not None:
                    lv *= rw
                sums.loss += lv.sum(axis=0)
            if nl:
                # the losses along the segment: a line search costs no features
                ms = line_buf[:rows]
                np.multiply(line_c, S[:, None, kc : kc + nl], out=ms)
                np.subtract(f[:, None, spec.line], ms, out=ms)
                np.multiply(ms, t[:, None, spec.line], out=ms)
                np.negative(ms, out=ms)
                ms = _softplus(ms, line_tmp[:rows])
                if rw is not None:
                    ms *= rw[:, :, None]
                sums.line += ms.sum(axis=0)
        if nr:
            if resid_k is not resid:
                np.copyto(resid_k[:rows], R)
            ZR = Zs.T @ resid_k[:rows]
            sums.grad[:m] += ZR[:, :ng]
            sums.hv[:m] += ZR[:, ng:]
            colsum = R.sum(axis=0)
            sums.grad[m] += colsum[:ng]
            sums.hv[m] += colsum[ng:]
        runs = _hessian_runs(row_offset + lo, row_offset + hi, spec.hess_period) if nh else []
        used = sum(b - a for a, b in runs)
        for jj, j in enumerate(spec.hess if used else ()):
            sw = np.sqrt(w[:, j], out=sw_buf[:rows])
            A = scaled[:used]
            at = 0
            for a, b in runs:  # the sampled rows of the tile, packed
                a, b = a - row_offset - lo, b - row_offset - lo
                np.multiply(Zs[a:b] if wide else Z[a:b], sw[a:b, None], out=A[at : at + b - a, :m])
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
            # a sampled Hessian is scaled by (total weight) / (weight of its rows)
            sums.n_hess += used if weights is None else sum(float(weights[a - row_offset : b - row_offset].sum()) for a, b in runs)
            pending += used
        if nh and not acc_empty and (pending >= _FLUSH_ROWS or hi == n):
            for jj in range(nh):
                sums.hess[jj] += acc[:, :, jj].T  # symmetric: contiguous walk
            pending, acc_empty = 0, True
    return sums


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
    multinomial: bool = False,
    wide: bool = False,
) -> _Spec:
    """A pass specification from points ``(M + 1, Ka)`` in scaled coordinates."""
    m = kernel.n_components
    dtype = np.dtype(np.float64) if wide else kernel.dtype  # of the directions and vectors
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
        wide=wide,
        hess_period=hess_period,
        multinomial=multinomial,
    )


@dataclasses.dataclass(eq=False)
class _Final(_PassSums):
    """Finished sums in scaled coordinates (symmetric Hessians)."""


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


def _one_block(
    X: np.ndarray, T: np.ndarray, kernel: FeatureKernel, spec: _Spec, tile_rows: int | None, blas_threads: int | None,
    options: Options,
) -> _Final:
    """The finished sums of one block: the body of the public per-block functions (``options`` resolved by them)."""
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

"""The per-block kernel of every logistic pass: loss, gradient, Hessians, line-search losses, Hessian-vector products.

:func:`_block_sums` is a pure NumPy function of one block of rows and a
:class:`_Spec` (what the pass computes); its :class:`_Sums` add up over
blocks, and :func:`_finalize` brings the total to scaled-feature coordinates.
The public per-block functions on top of it are in :mod:`.blocks`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.special import expit

from dxrf.core.buffers import thread_buffer
from dxrf.engine import check_block
from dxrf.kernels.kernel import FeatureKernel
from dxrf.core.options import Options
from dxrf.solvers.logistic.objective import _LINE_STEPS, _check_labels, _softplus
from dxrf.solvers.logistic.sample import _hessian_runs
from dxrf.solvers.logistic.softmax import class_index, softmax_rows

_TILE_ROWS = 2048  # rows per tile by default: a tile and its copies stay in cache
_FLUSH_ROWS = 16384  # rows summed into a Hessian in the kernel dtype before the float64 total


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
    """Default rows per tile: at most :data:`_TILE_ROWS`, within the ``tile_bytes`` option."""
    opts = options
    by_bytes = max(opts.min_tile_rows, opts.tile_bytes // (kernel.n_components * kernel.dtype.itemsize))
    return min(by_bytes, _TILE_ROWS)


@dataclasses.dataclass(eq=False)
class _Layout:
    """How one block's tiles are computed: the columns of their scores and residuals, and the dtypes.

    The scores of a tile are ``Z @ cols + offsets``: ``ka`` point columns (twice
    over, as a float32 pair hi + lo, when ``kc = 2 ka``), then ``nl`` line-search
    directions and ``nv`` Hessian-vector directions. The residuals hold ``ng``
    gradient columns, then ``nv`` Hessian-vector columns.
    """

    ka: int
    kc: int
    ng: int
    nh: int
    nl: int
    nv: int
    wide: bool  # float64 features and products of float32 row-wise features
    precise: bool  # float64 scores
    hdtype: np.dtype  # of the Hessians' tiles
    sdtype: np.dtype  # of the score and residual products
    cols: np.ndarray
    offsets: np.ndarray
    line_c: np.ndarray  # margins at point - (1 - s) direction

    @property
    def nr(self) -> int:
        return self.ng + self.nv


def _layout(spec: _Spec, kernel: FeatureKernel) -> _Layout:
    """The :class:`_Layout` of a pass of ``spec`` with ``kernel``."""
    m, dtype = kernel.n_components, kernel.dtype
    # float32 scores (and float32 coefficients) make the loss steppy at ~1e-10 relative,
    # which stalls scipy's L-BFGS line search: "precise" passes score in float64
    wide = spec.wide and dtype != np.float64
    precise = (spec.precise or wide) and dtype != np.float64
    sdtype = np.dtype(np.float64) if precise else dtype
    ka, nl, nv = spec.coef.shape[1], spec.line.size, spec.hv.size
    # float32 coefficients would bias the loss and gradient (by the gradient times their
    # rounding): the points' coefficients enter as a float32 pair hi + lo
    kc = 2 * ka if sdtype != np.float64 else ka
    cols = np.empty((m, kc + nl + nv), dtype=sdtype)
    cols[:, :ka] = spec.coef
    if kc > ka:
        cols[:, ka:kc] = spec.coef - cols[:, :ka]
    cols[:, kc : kc + nl], cols[:, kc + nl :] = spec.dcoef, spec.vcoef
    offsets = np.concatenate([spec.intercept, np.zeros(kc - ka), spec.dintercept, spec.vintercept])
    return _Layout(
        ka=ka, kc=kc, ng=spec.grad.size, nh=spec.hess.size, nl=nl, nv=nv, wide=wide, precise=precise,
        hdtype=np.dtype(np.float64) if wide else dtype, sdtype=sdtype, cols=cols, offsets=offsets,
        line_c=(1.0 - spec.steps)[None, :, None],
    )


@dataclasses.dataclass(eq=False)
class _Scratch:
    """The thread's scratch arrays of one tile (see :func:`_scratch`)."""

    buf: np.ndarray
    buf64: np.ndarray | None
    scores: np.ndarray
    scores_k: np.ndarray
    resid: np.ndarray
    resid_k: np.ndarray
    t: np.ndarray
    margin: np.ndarray
    p: np.ndarray
    w: np.ndarray
    loss: np.ndarray
    loss_tmp: np.ndarray
    line: np.ndarray
    line_tmp: np.ndarray


def _scratch(tile_rows: int, m: int, dtype: np.dtype, lay: _Layout, steps: int) -> _Scratch:
    """Every array of a tile, from the thread's scratch: in Dask workers (which set
    ``MALLOC_TRIM_THRESHOLD_``) fresh temporaries of this size cost page faults every time."""
    nc, sdtype, ka = lay.kc + lay.nl + lay.nv, lay.sdtype, lay.ka
    scores = thread_buffer("scores", (tile_rows, nc), np.float64)
    resid = thread_buffer("resid", (tile_rows, lay.nr), np.float64)
    return _Scratch(
        buf=thread_buffer("tile", (tile_rows, m), dtype),
        buf64=thread_buffer("tile64", (tile_rows, m), np.float64) if lay.precise else None,
        scores=scores,
        scores_k=thread_buffer("scores-k", (tile_rows, nc), sdtype) if sdtype != np.float64 else scores,
        resid=resid,
        resid_k=thread_buffer("resid-k", (tile_rows, lay.nr), sdtype) if sdtype != np.float64 else resid,
        t=thread_buffer("labels", (tile_rows, ka), np.float64),
        margin=thread_buffer("margin", (tile_rows, ka), np.float64),
        p=thread_buffer("p", (tile_rows, ka), np.float64),
        w=thread_buffer("w", (tile_rows, ka), np.float64),
        loss=thread_buffer("loss", (tile_rows, lay.ng), np.float64),
        loss_tmp=thread_buffer("loss-tmp", (tile_rows, lay.ng), np.float64),
        line=thread_buffer("line", (tile_rows, steps, lay.nl), np.float64),
        line_tmp=thread_buffer("line-tmp", (tile_rows, steps, lay.nl), np.float64),
    )


class _HessianSums:
    """The Hessians of a block: symmetric rank-k updates of its tiles, flushed to float64.

    Each Hessian is the Gram matrix of the tile scaled by ``sqrt(w)``, with a
    column ``sqrt(w)`` appended for the intercept, summed in ``hdtype`` over
    :data:`_FLUSH_ROWS` rows and then added to the float64 total.
    """

    def __init__(self, m: int, nh: int, hdtype: np.dtype, tile_rows: int) -> None:
        self.m = m
        self.gram = thread_buffer("tile-gram", (m + 1, m + 1), hdtype)
        self.scaled = thread_buffer("scaled", (tile_rows, m + 1), hdtype)
        self.sw = thread_buffer("sqrt-w", (tile_rows,), hdtype)
        # one (M+1)^2 block per Hessian, summed over tiles in the feature dtype and
        # flushed to float64 (allocated per block, not kept: K of them can be large,
        # and a block's Gram costs far more than touching them)
        self.acc = np.zeros((m + 1, m + 1, nh), dtype=hdtype, order="F")
        self.pending, self.empty = 0, True

    def add_tile(
        self,
        sums: _Sums,
        Z: np.ndarray,
        w: np.ndarray,
        hess: np.ndarray,
        runs: list[tuple[int, int]],
        start: int,
        row_offset: int,
        weights: np.ndarray | None,
    ) -> None:
        """Add the sampled rows ``runs`` (global rows) of the tile ``Z`` whose first global row is ``start``."""
        used = sum(b - a for a, b in runs)
        if not used:
            return
        m = self.m
        for jj, j in enumerate(hess):
            sw = np.sqrt(w[:, j], out=self.sw[: len(Z)])
            A = self.scaled[:used]
            at = 0
            for a, b in runs:  # the sampled rows of the tile, packed
                a, b = a - start, b - start
                np.multiply(Z[a:b], sw[a:b, None], out=A[at : at + b - a, :m])
                A[at : at + b - a, m] = sw[a:b]
                at += b - a
            # A^T A by NumPy's syrk path, which releases the GIL (SciPy's ?syrk
            # wrapper holds it and serialised the threads of a NumPy-input fit)
            np.matmul(A.T, A, out=self.gram)
            # gram is exactly symmetric (NumPy mirrors syrk's triangle): adding its
            # transpose walks the Fortran-ordered acc contiguously (10x faster)
            if self.empty:
                np.copyto(self.acc[:, :, jj], self.gram.T)
            else:
                self.acc[:, :, jj] += self.gram.T
        self.empty = False
        # a sampled Hessian is scaled by (total weight) / (weight of its rows)
        sums.n_hess += used if weights is None else sum(float(weights[a - row_offset : b - row_offset].sum()) for a, b in runs)
        self.pending += used

    def flush(self, sums: _Sums, last: bool) -> None:
        """Add the accumulated Gram matrices to the float64 totals, every :data:`_FLUSH_ROWS` rows and at the end."""
        if not self.empty and (self.pending >= _FLUSH_ROWS or last):
            for jj in range(self.acc.shape[2]):
                sums.hess[jj] += self.acc[:, :, jj].T  # symmetric: contiguous walk
            self.pending, self.empty = 0, True


def _raw_tile(kernel: FeatureKernel, X: np.ndarray, wide: bool, out: np.ndarray) -> np.ndarray:
    """The raw features of a tile of rows into ``out``: the one place a logistic pass computes them."""
    if wide:
        out[...] = kernel.raw_rowwise(X)
        return out
    return kernel.raw(X, out=out)


def block_features(
    X: np.ndarray, out: np.ndarray, start: int, kernel: FeatureKernel, tile_rows: int, wide: bool, check: bool
) -> None:
    """Fill ``out`` with the raw features of a block, tile by tile as :func:`_block_sums` computes them.

    The feature cache's function (:func:`dxrf.engine.cache.feature_cache`):
    a pass reading these features computes bitwise what it would compute from X.
    ``start``: the block's first global row (for the check's messages).
    """
    if check:
        X = check_block(X, kernel.n_features_in, start)
    n = X.shape[0]
    tile_rows = max(1, min(tile_rows, n))
    widen = out.dtype != kernel.dtype  # float64 copies of float32 features (exact), as precise passes use them
    for lo in range(0, n, tile_rows):
        hi = min(lo + tile_rows, n)
        if widen:
            tile = thread_buffer("tile", (tile_rows, out.shape[1]), kernel.dtype)[: hi - lo]
            np.copyto(out[lo:hi], _raw_tile(kernel, X[lo:hi], wide, tile))
        else:
            _raw_tile(kernel, X[lo:hi], wide, out[lo:hi])


def cache_dtype(kernel: FeatureKernel, precise: bool, wide: bool) -> np.dtype:
    """The dtype the feature cache holds: the kernel's, or float64 when every product of the pass is in float64.

    Precise (L-BFGS) and wide (small) fits multiply float64 copies of float32
    features: caching the copies (exact, twice the bytes) spares a conversion
    of every tile in every pass.
    """
    if kernel.dtype != np.float64 and (precise or wide):
        return np.dtype(np.float64)
    return kernel.dtype


def _tile_features(
    kernel: FeatureKernel, X: np.ndarray, lay: _Layout, scr: _Scratch, cached: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The raw features ``Z`` of a tile of rows, and ``Zs``, those the products use (float64 when precise).

    ``cached``: ``X`` already holds the tile's raw features (the feature cache).
    """
    rows = X.shape[0]
    if cached and lay.precise and X.dtype == np.float64:
        return X, X  # the cache holds the float64 copies (cache_dtype); only they are used
    Z = X if cached else _raw_tile(kernel, X, lay.wide, scr.buf[:rows])
    if not lay.precise:
        return Z, Z
    Zs = scr.buf64[:rows]
    np.copyto(Zs, Z)
    return Z, Zs


def _tile_scores(Zs: np.ndarray, lay: _Layout, scr: _Scratch) -> tuple[np.ndarray, np.ndarray]:
    """Every score column of a tile by ONE product, in float64, and ``f``, the points' scores (a view)."""
    rows = Zs.shape[0]
    S = scr.scores[:rows]
    np.matmul(Zs, lay.cols, out=scr.scores_k[:rows])
    if scr.scores_k is not scr.scores:
        np.copyto(S, scr.scores_k[:rows])
    S += lay.offsets
    f = S[:, : lay.ka]
    if lay.kc > lay.ka:
        f += S[:, lay.ka : lay.kc]
    return S, f


def _softmax_terms(
    sums: _Sums, spec: _Spec, lay: _Layout, S: np.ndarray, f: np.ndarray, classes: np.ndarray, R: np.ndarray, rw: np.ndarray | None
) -> None:
    """The multinomial per-row terms of a tile: losses into ``sums``, residuals into ``R``."""
    kc, ng, nl, nv = lay.kc, lay.ng, lay.nl, lay.nv
    loss, line = softmax_rows(
        f, classes,
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


def _binary_terms(
    sums: _Sums, spec: _Spec, lay: _Layout, scr: _Scratch, S: np.ndarray, f: np.ndarray, labels: np.ndarray,
    R: np.ndarray, rw: np.ndarray | None,
) -> np.ndarray:
    """The binary per-row terms of a tile: losses into ``sums``, residuals into ``R``; returns the Hessian weights."""
    rows, kc, ng, nl = S.shape[0], lay.kc, lay.ng, lay.nl
    t = scr.t[:rows]
    np.copyto(t, labels)
    margin = np.multiply(t, f, out=scr.margin[:rows])
    np.negative(margin, out=margin)  # the loss is softplus(margin)
    p = expit(margin, out=scr.p[:rows])  # sigma(-t f)
    w = np.subtract(1.0, p, out=scr.w[:rows])
    w *= p  # sigma(f)(1 - sigma(f)), the same for both labels
    if rw is not None:
        w *= rw  # the row weights enter Hessians and Hessian-vector products here
    if lay.nr:
        np.multiply(t[:, spec.grad], p[:, spec.grad], out=R[:, :ng])
        np.negative(R[:, :ng], out=R[:, :ng])  # d loss / d f
        if rw is not None:
            R[:, :ng] *= rw
        np.multiply(S[:, kc + nl :], w[:, spec.hv], out=R[:, ng:])
    if ng:
        lv = scr.loss[:rows]
        np.copyto(lv, margin[:, spec.grad])
        lv = _softplus(lv, scr.loss_tmp[:rows])
        if rw is not None:
            lv *= rw
        sums.loss += lv.sum(axis=0)
    if nl:
        # the losses along the segment: a line search costs no features
        ms = scr.line[:rows]
        np.multiply(lay.line_c, S[:, None, kc : kc + nl], out=ms)
        np.subtract(f[:, None, spec.line], ms, out=ms)
        np.multiply(ms, t[:, None, spec.line], out=ms)
        np.negative(ms, out=ms)
        ms = _softplus(ms, scr.line_tmp[:rows])
        if rw is not None:
            ms *= rw[:, :, None]
        sums.line += ms.sum(axis=0)
    return w


def _add_products(sums: _Sums, Zs: np.ndarray, R: np.ndarray, lay: _Layout, scr: _Scratch) -> None:
    """Every gradient and Hessian-vector product of a tile by ONE product with ``Z^T``, summed in float64."""
    m, ng = Zs.shape[1], lay.ng
    Rk = R
    if scr.resid_k is not scr.resid:
        Rk = scr.resid_k[: len(R)]
        np.copyto(Rk, R)
    ZR = Zs.T @ Rk
    sums.grad[:m] += ZR[:, :ng]
    sums.hv[:m] += ZR[:, ng:]
    colsum = R.sum(axis=0)
    sums.grad[m] += colsum[:ng]
    sums.hv[m] += colsum[ng:]


def _block_sums(
    X: np.ndarray,
    T: np.ndarray,
    kernel: FeatureKernel,
    spec: _Spec,
    tile_rows: int,
    row_offset: int = 0,
    check: bool = True,
    weights: np.ndarray | None = None,
    cached: bool = False,
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
    the features are :meth:`~dxrf.kernels.kernel.FeatureKernel.raw_rowwise`'s
    and every product, Hessians included, runs in float64.
    ``cached``: ``X`` is the block's raw features, made by :func:`block_features`
    (the feature cache), not its rows.
    """
    if check and not cached:
        X = check_block(X, kernel.n_features_in, row_offset)
    if cached:
        # a block received from another worker may sit at an unaligned address, and
        # NumPy multiplies unaligned arrays without BLAS (other rounding): realign it
        X = np.require(X, requirements=["C_CONTIGUOUS", "ALIGNED"])
    n = X.shape[0]
    T = _check_labels(T, n, row_offset)
    m = kernel.n_components
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
    lay = _layout(spec, kernel)
    scr = _scratch(tile_rows, m, kernel.dtype, lay, spec.steps.size)
    hessians = _HessianSums(m, lay.nh, lay.hdtype, tile_rows) if lay.nh else None
    for lo in range(0, n, tile_rows):
        hi = min(lo + tile_rows, n)
        Z, Zs = _tile_features(kernel, X[lo:hi], lay, scr, cached)
        S, f = _tile_scores(Zs, lay, scr)
        rw = None if weights is None else weights[lo:hi, None]
        R = scr.resid[: hi - lo]
        if spec.multinomial:
            w = None  # a softmax pass has no Hessians
            _softmax_terms(sums, spec, lay, S, f, classes[lo:hi], R, rw)
        else:
            w = _binary_terms(sums, spec, lay, scr, S, f, labels[lo:hi], R, rw)
        if lay.nr:
            _add_products(sums, Zs, R, lay, scr)
        if hessians is not None:
            runs = _hessian_runs(row_offset + lo, row_offset + hi, spec.hess_period)
            hessians.add_tile(sums, Zs if lay.wide else Z, w, spec.hess, runs, row_offset + lo, row_offset, weights)
            hessians.flush(sums, last=hi == n)
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

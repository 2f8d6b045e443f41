"""Nyström pieces as pure functions: kernel blocks against landmarks, the whitening, landmark races.

- :func:`landmark_block`: ``k(X_b, L)`` for one block of rows, in the block's
  dtype, into a reused buffer (the raw features of a Nyström map);
- :func:`inverse_sqrt`: the thresholded ``K_LL^{-1/2}`` that whitens them;
- :func:`inverse_cholesky`: the cheaper triangular whitening ``R^{-1}`` (``K_LL = R^T R``);
- :func:`inverse_pivoted`: a triangular whitening from a pivoted Cholesky factorisation that
  drops the landmarks the others already explain (as :func:`inverse_sqrt` drops directions);
- :func:`race_pass`: an engine pass that samples ``M`` distinct rows with
  probabilities proportional to weights (uniform, or approximate ridge leverage
  scores from random Fourier features) and returns just those rows.
"""

from __future__ import annotations

import numpy as np

from dxrf.core.blas import blas_limit
from dxrf.core.buffers import thread_buffer
from dxrf.core.device import array_module, to_host
from dxrf.engine import Pass, Rows, check_block, row_uniforms

__all__ = [
    "LANDMARK_KERNELS", "WHITENINGS", "landmark_block", "inverse_sqrt", "inverse_cholesky", "inverse_pivoted", "whitening_of", "eigen_cutoff", "race_pass", "RaceConfig", "row_weights",
    "leverage_transform",
]

#: shift-invariant kernels a Nyström map evaluates against its landmarks (DESIGN.md section 2)
LANDMARK_KERNELS = ("gaussian", "laplacian", "cauchy")

#: how a Nyström map whitens its kernel values: symmetric ``K_LL^{-1/2}``, triangular ``R^{-1}``, or
#: triangular over the landmarks a pivoted factorisation keeps
WHITENINGS = ("eigh", "cholesky", "pivoted")


#: up to this many input columns a Gaussian block builds its augmented landmarks (``d + 2`` rows) per call;
#: wider inputs use them when the caller keeps them (:func:`gaussian_landmarks`), else three sweeps
AUGMENT_MAX_FEATURES = 64


def gaussian_landmarks(W: np.ndarray) -> np.ndarray:
    """``[W; 1; |w|^2]`` of shape ``(d + 2, M)``: the landmarks of :func:`landmark_block`'s one-product Gaussian."""
    xp = array_module(W)
    return xp.concatenate([W, xp.ones((1, W.shape[1]), dtype=W.dtype), (W * W).sum(axis=0)[None, :]])


def landmark_block(
    X: np.ndarray, W: np.ndarray, kernel: str, bandwidth: float | np.ndarray, out: np.ndarray | None = None,
    augmented: np.ndarray | None = None,
) -> np.ndarray:
    """``k(x_i, l_j)`` for the rows ``X`` and the landmarks ``l_j = W[:, j]``, in ``W.dtype``.

    gaussian ``exp(-|x - l|^2 / 2 sigma^2)`` from one matrix product
    (``-c (|x|^2 - 2 x.l + |l|^2)`` with ``c = 1 / 2 sigma^2`` as the product of
    ``[2c x, -c |x|^2, -c]`` and the augmented landmarks ``[l; 1; |l|^2]``,
    clipped at 0 against cancellation); laplacian
    ``exp(-|x - l|_1 / sigma)`` and cauchy ``prod_j 1 / (1 + (x_j - l_j)^2 /
    sigma^2)`` column by column of ``X`` (``d`` sweeps of the block).
    A 1-d ``bandwidth`` holds per-column lengthscales ``l``: rows and
    landmarks are divided by them (in float64, rounded once to ``W.dtype``)
    and ``sigma = 1``. A :class:`~dxrf.kernels.kernel.FeatureKernel` with
    lengthscales scales its rows into a reused buffer and its landmarks once.
    ``augmented``: :func:`gaussian_landmarks` of ``W`` as given (without a
    1-d ``bandwidth``), kept by a caller that evaluates many blocks (the
    pass's cache-sized slabs, where recomputing the landmarks' norms took as
    long as the kernel values: 784 x 4000 squares per 64 rows on MNIST).
    """
    xp = array_module(W)
    dtype = W.dtype
    if np.ndim(bandwidth) != 0:
        augmented = None  # of the landmarks scaled here
        ls = xp.asarray(bandwidth, dtype=np.float64)
        if ls.shape != (W.shape[0],):
            raise ValueError(f"lengthscales have shape {ls.shape}; expected ({W.shape[0]},), one per column")
        X = (xp.asarray(X) / ls).astype(dtype, copy=False)
        W = (W.astype(np.float64) / ls[:, None]).astype(dtype, copy=False)
        bandwidth = 1.0
    X = xp.asarray(X, dtype=dtype)
    n, m = X.shape[0], W.shape[1]
    if out is None:
        out = xp.empty((n, m), dtype=dtype)
    elif out.shape != (n, m) or out.dtype != dtype:
        raise ValueError(f"out has shape {out.shape} and dtype {out.dtype}; expected {(n, m)} {dtype}")
    s = dtype.type(bandwidth)
    if kernel == "gaussian":
        c = dtype.type(0.5) / (s * s)
        d = X.shape[1]
        if augmented is None and d <= AUGMENT_MAX_FEATURES:
            augmented = gaussian_landmarks(W)
        if augmented is not None:
            # -c |x - l|^2 as ONE product [2c x, -c |x|^2, -c] . [l; 1; |l|^2]: the scaling and both norms
            # ride in the gemm instead of three sweeps over the n x M block (at d = 3, M = 10 000 those
            # sweeps took 13 of a block's 30 ms, the product 3; the augmented product 4.4)
            Xa = xp.empty((n, d + 2), dtype=dtype)
            xp.multiply(X, 2 * c, out=Xa[:, :d])
            Xa[:, d] = -c * (X * X).sum(axis=1)
            Xa[:, d + 1] = -c
            xp.matmul(Xa, augmented, out=out)
        else:
            xp.matmul(X, W, out=out)
            out *= 2 * c
            out -= c * (X * X).sum(axis=1)[:, None]
            out -= c * (W * W).sum(axis=0)[None, :]
        xp.minimum(out, 0, out=out)
        return xp.exp(out, out=out)
    tmp = thread_buffer("landmark-diff", (n, m), dtype) if xp is np else xp.empty((n, m), dtype=dtype)
    Xs, Ws = X / s, W / s
    if kernel == "laplacian":
        out[...] = 0
        for j in range(X.shape[1]):
            xp.subtract(Xs[:, j, None], Ws[j][None, :], out=tmp)
            xp.abs(tmp, out=tmp)
            out += tmp
        xp.negative(out, out=out)
        return xp.exp(out, out=out)
    if kernel == "cauchy":
        out[...] = 1
        for j in range(X.shape[1]):
            xp.subtract(Xs[:, j, None], Ws[j][None, :], out=tmp)
            xp.multiply(tmp, tmp, out=tmp)
            tmp += 1
            out /= tmp
        return out
    raise ValueError(f"unknown landmark kernel {kernel!r}; expected one of {LANDMARK_KERNELS}")


def eigen_cutoff(eigenvalues: np.ndarray, dtype: np.dtype) -> float:
    """The eigenvalue of ``K_LL`` below which a direction is dropped from the whitening.

    ``max(1e-12, M eps(dtype) lambda_max, sqrt(eps(float64)) lambda_max)``.
    scikit-learn floors the singular values of ``K_LL`` at 1e-12. Features
    evaluated in ``dtype`` carry rounding of about ``eps`` times the kernel
    row's norm, which a direction of eigenvalue ``lambda`` divides by
    ``sqrt(lambda)`` (the ``M eps(dtype)`` term). The statistics are squares
    of the kernel values (``Sigma b b^T``, then ``T^T (Sigma b b^T) T``): their
    rounding, about ``eps lambda_max^2``, divided by ``lambda^2`` outgrows the
    direction's own signal below ``sqrt(eps) lambda_max`` (the normal
    equations' squared conditioning). There the statistics held only
    rounding: on elevators with ARD lengthscales (851 of 1000 eigenvalues below
    it) the validation MSE from statistics was negative at small penalties,
    while the same model scored 0.48 on the rows. Such directions carry no
    signal the features could resolve, so they are dropped, not damped.
    """
    return _cutoff(float(max(eigenvalues.max(initial=0.0), 0.0)), eigenvalues.size, dtype)


def _cutoff(top: float, m: int, dtype: np.dtype) -> float:
    """:func:`eigen_cutoff` of ``m`` landmarks whose kernel matrix has largest eigenvalue ``top``."""
    return max(1e-12, m * float(np.finfo(dtype).eps) * top, np.sqrt(np.finfo(np.float64).eps) * top)


def inverse_sqrt(K: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The symmetric pseudo-inverse square root of a kernel matrix, directions below :func:`eigen_cutoff` dropped (float64).

    ``U_k diag(lambda_k)^{-1/2} U_k^T`` over the kept eigenpairs: still
    ``M x M`` and symmetric, so the features keep their number; the dropped
    directions' features are identically zero (a ridge fit gives them no weight).
    """
    from scipy.linalg import eigh

    lam, U = eigh(np.asarray(K, dtype=np.float64), check_finite=False, driver="evd")
    keep = lam >= eigen_cutoff(lam, np.dtype(dtype))
    V = U[:, keep] / np.sqrt(lam[keep])
    return V @ U[:, keep].T


def inverse_cholesky(K: np.ndarray) -> np.ndarray:
    """The upper-triangular ``T = R^{-1}`` of a kernel matrix ``K = R^T R`` (float64).

    ``T T^T = K^{-1}``, so ``k(x, L) T`` spans the same features as the
    symmetric whitening and gives the same ridge predictions at every penalty,
    for about a tenth of an eigendecomposition's time at large ``M`` (one
    Cholesky factorisation and one triangular inversion, ``2 M^3 / 3``
    flops). Nothing is thresholded: a ``K`` that is not numerically positive
    definite (duplicate or nearly duplicate landmarks) is refused.
    """
    from numpy.linalg import LinAlgError
    from scipy.linalg.lapack import dtrtri

    from dxrf.core.cholesky import cholesky

    try:
        # K = C C^T with C lower (column-major), so R = C^T and T = C^{-T}: the transpose of
        # a column-major array, hence row-major, the order of the features' products.
        # Blocked on gemm: OpenBLAS's threaded potrf (through syrk) crashes at M >= ~16 000 on
        # this machine (DESIGN.md, Nyström features); the same bits on any number of threads
        C = cholesky(np.array(K, dtype=np.float64, order="F"), lower=True, overwrite_a=True)
    except LinAlgError:
        raise ValueError(
            "the landmarks' kernel matrix is not positive definite (duplicate or nearly duplicate landmarks, or a "
            "very large bandwidth): use whitening='eigh', which thresholds its small eigenvalues"
        ) from None
    Cinv, info = dtrtri(C, lower=1, overwrite_c=1)
    if info != 0:  # a zero pivot: cannot happen after a successful Cholesky factorisation
        raise ValueError(f"the landmarks' Cholesky factor is singular (LAPACK dtrtri info={info}); use whitening='eigh'")
    return Cinv.T


def largest_eigenvalue(K: np.ndarray, steps: int = 30) -> float:
    """The largest eigenvalue of a symmetric positive semi-definite ``K``, by power iteration from ones.

    A kernel matrix with non-negative entries has a non-negative leading
    eigenvector (Perron), so the all-ones start converges fast; the estimate
    (a Rayleigh quotient) never exceeds the true value and only sets a
    threshold's scale. ``steps`` matrix-vector products: ``O(M^2)`` each.
    """
    v = np.ones(K.shape[0]) / np.sqrt(K.shape[0])
    top = 0.0
    for _ in range(steps):
        w = K @ v
        top = float(v @ w)
        norm = float(np.linalg.norm(w))
        if norm == 0.0:
            return 0.0
        v = w / norm
    return max(top, 0.0)


def inverse_pivoted(K: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A triangular whitening over the landmarks a pivoted Cholesky factorisation keeps (float64, ``M x M``).

    LAPACK's ``pstrf`` factors ``P^T K P = L L^T``, taking at each step the
    landmark of largest remaining (conditional) variance, and stops when that
    falls below :func:`eigen_cutoff` of ``K``'s largest eigenvalue (a power
    iteration): the rest are explained by the kept ``r`` to within the
    statistics' rounding. Rows of ``T`` at the kept landmarks hold
    ``L_r^{-T}``; the dropped landmarks' rows and the last ``M - r`` columns
    are zero, so the features keep their number and those ``M - r`` are
    identically zero, as the directions :func:`inverse_sqrt` drops. About
    ``M^3 / 3`` flops against an eigendecomposition's ``~9 M^3`` (measured at
    M = 8000 on two cores: 3.1 s against 44 s).
    """
    from scipy.linalg.lapack import dpstrf, dtrtri

    K = np.asarray(K, dtype=np.float64)
    m = K.shape[0]
    tol = _cutoff(largest_eigenvalue(K), m, np.dtype(dtype))
    # one BLAS thread: reproducible to the bit (and OpenBLAS's threaded factorisations crashed at
    # M >= ~16 000 here: see inverse_cholesky)
    with blas_limit(1):
        c, piv, rank, info = dpstrf(np.array(K, order="F"), tol=tol, lower=1, overwrite_a=1)
    if info < 0:  # pragma: no cover - an argument error
        raise ValueError(f"LAPACK dpstrf failed (info={info})")
    r = int(rank)
    kept = piv[:r] - 1  # pstrf's pivots count from 1
    inv, info = dtrtri(np.tril(c[:r, :r]), lower=1)
    if info != 0:  # pragma: no cover - the kept pivots are positive
        raise ValueError(f"the landmarks' pivoted Cholesky factor is singular (LAPACK dtrtri info={info})")
    T = np.zeros((m, m))
    T[kept, :r] = inv.T
    return T


def whitening_of(K: np.ndarray, dtype: np.dtype, method: str = "eigh") -> np.ndarray:
    """The whitening of a landmark kernel matrix ``K``: :func:`inverse_sqrt` (``"eigh"``),
    :func:`inverse_cholesky` (``"cholesky"``) or :func:`inverse_pivoted` (``"pivoted"``)."""
    if method == "cholesky":
        return inverse_cholesky(K)
    if method == "pivoted":
        return inverse_pivoted(K, dtype)
    if method == "eigh":
        return inverse_sqrt(K, dtype)
    raise ValueError(f"whitening must be one of {WHITENINGS}, got {method!r}")


# -- weighted sampling of rows without replacement, in one pass ---------------------------------


class RaceConfig:
    """What every block of a landmark race needs: the number of rows, the seed, the weights.

    Row ``i`` gets the key ``E_i / w_i`` with ``E_i = -log(u_i)`` exponential
    from the hash ``u_i`` of ``(i, seed)`` (chunking plays no part); the
    ``size`` smallest keys are a weighted sample without replacement
    (Efraimidis & Spirakis' race). ``kernel`` None gives uniform weights;
    else ``w_i = |z(x_i) T|^2`` with ``z`` the random features of ``kernel``
    and ``T`` an upper-triangular ``M0 x M0`` matrix (the ridge leverage
    scores of the features, see :func:`leverage_transform`). ``order``:
    the sample is returned sorted by row index (``"row"``) or by key
    (``"key"``: its first ``m`` rows are then the race of size ``m``, a
    nested sample for every ``m``).
    """

    def __init__(
        self, size: int, seed: int, n_features: int, kernel: object = None, T: np.ndarray | None = None,
        order: str = "row",
    ) -> None:
        self.size = int(size)
        self.seed = int(seed)
        self.n_features = int(n_features)
        self.kernel = kernel
        self.T = T
        if order not in ("row", "key"):
            raise ValueError(f"order must be 'row' or 'key', got {order!r}")
        self.order = order

    @property
    def nbytes(self) -> int:
        return 0 if self.T is None else self.T.nbytes + self.kernel.nbytes

    def __dask_tokenize__(self) -> tuple:
        from dask.base import tokenize

        return ("dxrf-landmark-race", self.size, self.seed, self.n_features, self.order, tokenize(self.kernel, self.T))


# rows of random features per step of a leverage race: bounded memory per block
_RACE_ROWS = 4096


def row_weights(X: np.ndarray, cfg: RaceConfig) -> np.ndarray:
    """The race weight of each row of ``X``: 1, or its approximate ridge leverage score."""
    n = X.shape[0]
    if cfg.kernel is None:
        return np.ones(n)
    out = np.empty(n)
    for a in range(0, n, _RACE_ROWS):
        # row-independent features: a row's score does not depend on its neighbours
        P = cfg.kernel.rowwise(X[a : a + _RACE_ROWS]).astype(np.float64) @ cfg.T
        out[a : a + _RACE_ROWS] = np.einsum("ij,ij->i", P, P)
    return out


def _smallest(size: int, keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions of the ``size`` smallest keys; ties by row index, so no result depends on block order."""
    return np.lexsort((rows, keys))[:size]


def _distinct_smallest(size: int, keys: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Positions of the ``size`` smallest keys among rows of distinct values (the smallest key of each value).

    A landmark equal to another adds nothing to the span and makes ``K_LL``
    singular (the conjugate gradient refuses it), so a value drawn twice keeps
    its first draw and the race goes on to the next key. Only when the rows
    hold fewer than ``size`` distinct values are repeated ones kept, the
    smallest keys first. Without repeated values this is :func:`_smallest`.
    The selection is associative: a value's key is its smallest over any
    split of the rows, so partials merge to the same sample.
    """
    order = np.lexsort((rows, keys))
    take = min(size, order.size)
    while True:
        head = order[:take]
        block = values[head] + 0.0  # -0.0 + 0.0 is 0.0: equal values, equal bytes
        as_bytes = block.view(np.dtype((np.void, block.dtype.itemsize * block.shape[1]))).ravel()
        _, first = np.unique(as_bytes, return_index=True)
        if first.size >= size or take == order.size:
            break
        take = min(order.size, take + 2 * (size - first.size))  # more keys for the repeats dropped
    first = np.sort(first)[:size]
    if first.size < size:  # fewer distinct values than asked: repeats fill the rest, smallest keys first
        repeats = np.setdiff1d(np.arange(take), first, assume_unique=True)
        first = np.sort(np.concatenate([first, repeats[: size - first.size]]))
    return head[first]


def _keep(size: int, keys: np.ndarray, rows: np.ndarray, values: np.ndarray, weights: np.ndarray) -> tuple:
    """A partial of the race: its ``size`` smallest keys of distinct rows (the size travels with it)."""
    order = _distinct_smallest(size, keys, rows, values)
    return size, keys[order], rows[order], values[order], weights[order]


def _race_block(X: np.ndarray, columns: tuple, rows: Rows, cfg: RaceConfig, running: object) -> tuple:
    X = to_host(check_block(X, cfg.n_features, rows.start))  # device blocks: the race runs on the host
    w = row_weights(X, cfg)
    u = row_uniforms(rows.start, rows.stop, cfg.seed)
    with np.errstate(divide="ignore"):
        keys = -np.log(u) / w  # u = 0 or w = 0: an infinite key, never drawn before a finite one
    keys = np.where(np.isnan(keys), np.inf, keys)
    idx = np.arange(rows.start, rows.stop, dtype=np.int64)
    # rows compared in X's own dtype (equal there iff equal in float64); only the kept rows are copied
    order = _distinct_smallest(cfg.size, keys, idx, X)
    return cfg.size, keys[order], idx[order], X[order].astype(np.float64), w[order]


def _race_merge(*parts: tuple) -> tuple:
    joined = [np.concatenate([p[i] for p in parts]) for i in range(1, 5)]
    return _keep(parts[0][0], *joined)


def _race_finish(partial: tuple, cfg: RaceConfig) -> tuple:
    _, keys, rows, values, weights = partial
    # by key, ties by row index: the race's own order, whatever the blocks
    order = np.argsort(rows) if cfg.order == "row" else _smallest(rows.size, keys, rows)
    return rows[order], values[order], weights[order]


def race_pass(cfg: RaceConfig) -> Pass:
    """The engine's pass of a landmark race: returns ``(row indices, rows, weights)`` sorted by ``cfg.order``."""
    return Pass(block=_race_block, merge=_race_merge, finish=_race_finish, partial_bytes=cfg.size * (cfg.n_features + 3) * 8)


def leverage_transform(gram: np.ndarray, n: int, lam: float) -> np.ndarray:
    """``T`` with ``|z T|^2 = z (Z^T Z + n lam I)^{-1} z^T``: the inverse transposed Cholesky factor.

    ``gram`` is ``Z^T Z`` summed over ``n`` rows; ``lam`` is the normalised
    penalty of DESIGN.md (``Q = G (G + lam I)^{-1}`` with ``G = Z^T Z / n``).
    """
    from scipy.linalg import cholesky, solve_triangular

    A = np.array(gram, dtype=np.float64)
    A[np.diag_indices_from(A)] += n * lam
    C = cholesky(A, lower=True, check_finite=False)
    return solve_triangular(C, np.eye(A.shape[0]), lower=True, check_finite=False).T

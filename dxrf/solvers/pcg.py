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
upper Cholesky factor of ``K + delta I`` (``delta = M eps max(diag K)``, ``eps``
of the kernel values' dtype) and ``A`` that of ``T T^T / M + alpha I``,

    P ~ T^T (T T^T / M + alpha I) T = (A T)^T (A T),

so ``B = T^{-1} A^{-1}`` makes ``B^T P B = I``. As Falkon does, CG solves the
system with the jittered penalty, ``B^T (C + alpha T^T T) B u = B^T c`` and
``beta = B u``: its penalty part is ``alpha A^{-T} A^{-1} u``, so an iteration
is four triangular solves on the client (``M^2`` each) beside the pass, ``K``
itself is not kept, and ``T`` and ``A`` share one ``M x M`` array
(:mod:`dxrf.solvers.falkon`). The jitter changes the solution by a ridge of
``alpha delta`` on ``beta``, below the kernel values' own rounding, and keeps
the iteration stable where ``K`` is numerically singular (many landmarks in few
dimensions), which the exact penalty ``T^T T - delta I`` did not. The intercept is
``ybar - kbar^T beta``. Each column of ``Y`` (one-hot classes) is its own CG,
all in the same passes; a column stops when its preconditioned residual is
below ``tol`` times its first, or (``validation_tol``, with a validation
split) when its penalty's hold-out MSE has settled.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import scipy.linalg
from scipy.linalg.blas import dtrmm
from scipy.linalg.lapack import dtrtri

from dxrf.core.options import Options, resolve_options
from dxrf.core.validation import is_dask
from dxrf.engine import Pass, check_block, run_pass, ship
from dxrf.engine.cache import CachePlan, feature_cache, plan_cache
from dxrf.engine.split import block_groups
from dxrf.kernels.kernel import FeatureKernel
from dxrf.kernels.landmark_products import LandmarkProducts, kernel_values, split_products, sub_rows_for
from dxrf.features.nystroem import NystroemFeatures, landmark_gram, landmark_kind
from dxrf.solvers.falkon import falkon_factors
from dxrf.stats.feature_stats import is_upper_triangular

__all__ = ["VALIDATION_PATIENCE", "PCGResult", "pcg_ridge", "pcg_coef", "check_distinct_landmarks", "products_pass"]


@dataclasses.dataclass
class PCGResult:
    """``beta`` (M, k) in the landmark basis, ``intercept`` (k,), iterations, passes, residual history.

    With a grid of penalties, ``beta`` and ``intercept`` are those of ``alpha``;
    ``betas``, ``intercepts`` and (with a validation split) ``validation_mse`` hold every penalty's.
    """

    beta: np.ndarray
    intercept: np.ndarray
    n_iter: int
    n_passes: int
    history: np.ndarray  # per iteration: the largest relative preconditioned residual over the columns
    converged: bool
    alpha: float = 0.0  # the penalty of beta: the one given, or the grid's best on validation
    alphas: np.ndarray | None = None  # the penalties solved, (a,)
    betas: np.ndarray | None = None  # (a, M, k): each penalty's solution on all rows
    intercepts: np.ndarray | None = None  # (a, k)
    validation_mse: np.ndarray | None = None  # (a, k): the training rows' solutions scored on the validation rows
    train_mse: np.ndarray | None = None  # (a, k): each solution on all rows, scored on the rows it was fitted on
    cache: CachePlan | None = None  # whether the kernel values were computed once and kept for every pass
    factor: np.ndarray | None = None  # with keep_factor: L = T^T, the lower Cholesky factor of K_LL + delta I
    seconds: np.ndarray | None = None  # (n_iter, 2): each iteration's pass, and its algebra on the client
    variance: np.ndarray | None = None  # (k,): the targets' weighted variance on all rows
    validation_variance: np.ndarray | None = None  # (k,): the same on the validation rows (with a split)
    sum_weight: float = 0.0  # the rows' total weight
    validation_path: np.ndarray | None = None  # (n_iter, a) with a split: each penalty's mean validation MSE per iteration
    settled: np.ndarray | None = None  # (a,) with validation_tol: the penalties stopped because their validation MSE settled


def check_distinct_landmarks(kernel: FeatureKernel) -> None:
    """Refuse landmarks with duplicate rows: ``K_LL`` would be singular and the preconditioner undefined."""
    L = np.asarray(kernel.W).T
    if np.unique(L, axis=0).shape[0] != L.shape[0]:
        raise ValueError(
            f"the landmarks have duplicate rows ({L.shape[0] - np.unique(L, axis=0).shape[0]} repeated): "
            "solver='pcg' needs distinct landmarks (K_LL positive definite)"
        )


#: iterations in a row whose validation MSE must each move by less than ``validation_tol`` (as
#: scikit-learn's ``n_iter_no_change``)
VALIDATION_PATIENCE = 5


# -- the pass ----------------------------------------------------------------------------------


def _block(X: np.ndarray, columns: tuple, rows: object, kernel: FeatureKernel, V: np.ndarray | None,
           split: tuple, cached: bool, running: object) -> tuple[LandmarkProducts, ...]:
    """The products of the block's training rows and, with a split, of its validation rows.

    ``cached``: ``X`` is the block's kernel values from the feature cache, not its rows.
    """
    Y, w, mask = columns
    if not cached:
        X = check_block(X, kernel.n_features_in, rows.start)
    valid = block_groups(rows.start, X.shape[0], mask, fraction=split[0], folds=None, seed=split[1])
    return split_products(X, kernel, V=V, Y=Y if V is None else None, w=w, valid=valid, precomputed=cached)


def _cache_block(X: np.ndarray, out: np.ndarray, start: int, kernel: FeatureKernel) -> None:
    """The feature cache's block: the kernel values the uncached pass computes for these rows."""
    kernel_values(check_block(X, kernel.n_features_in, start), out, kernel)


def _merge(*parts: tuple[LandmarkProducts, ...]) -> tuple[LandmarkProducts, ...]:
    total = parts[0]
    for p in parts[1:]:
        for mine, theirs in zip(total, p):
            mine += theirs
    return total


def products_pass(m: int, width: int, itemsize: int) -> Pass:
    """The engine's pass of :func:`landmark_products`: M x ``width`` float64 partials (twice with a split), tree-summed."""
    # in-process blocks start on the sub-block grid, as the feature cache's blocks do
    return Pass(block=_block, merge=_merge, partial_bytes=2 * 8 * m * (width + 2), unit_rows=sub_rows_for(m, itemsize))


# -- the solver -------------------------------------------------------------------------------


def _split_spec(validation: object, validation_seed: int) -> tuple[tuple, object]:
    """``((fraction, seed), mask)`` of the pass's row split: a hashed fraction, a mask column, or neither."""
    if validation is None:
        return (None, 0), None
    if hasattr(validation, "shape"):
        return (None, 0), validation
    return (float(validation), int(validation_seed)), None


def _columns_of(sums: LandmarkProducts, S: float, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(kbar, ybar, c)``: the weighted means and the centred right-hand side of one row group."""
    m = sums.ksum.shape[0]
    kbar = sums.ksum / S if fit_intercept else np.zeros(m)
    ybar = sums.ysum / S if fit_intercept else np.zeros(sums.ysum.shape)
    return kbar, ybar, sums.ky / S - np.outer(kbar, ybar)


def _variance(sums: LandmarkProducts) -> np.ndarray:
    """The targets' weighted variance per output on the rows of ``sums`` (the R^2's denominator)."""
    mean = sums.ysum / sums.n
    return np.maximum(sums.yy / sums.n - mean * mean, 0.0)


def _scored_mse(beta: np.ndarray, Gb: np.ndarray, kbar: np.ndarray, ybar: np.ndarray, v: LandmarkProducts) -> np.ndarray:
    """Weighted MSE on some rows of the models ``k(x)^T beta + ybar - kbar^T beta`` (one per column).

    From those rows' sums ``v`` and ``Gb = sum_v w k k^T beta``: with
    ``e = (y - ybar) - (k - kbar)^T beta``, ``sum w e^2`` expands into the
    sums, no pass over the rows.
    """
    S = v.n
    kb = kbar @ beta  # kbar^T beta per column
    sb = v.ksum @ beta  # (sum_v w k)^T beta
    quad = np.einsum("ij,ij->j", beta, Gb) - 2.0 * kb * sb + S * kb * kb
    cross = np.einsum("ij,ij->j", beta, v.ky) - ybar * sb - kb * v.ysum + S * kb * ybar
    yy = v.yy - 2.0 * ybar * v.ysum + S * ybar * ybar
    return np.maximum(yy - 2.0 * cross + quad, 0.0) / S


def pcg_ridge(
    X: object,
    Y: object,
    kernel: FeatureKernel,
    alpha: float | np.ndarray,
    *,
    sample_weight: object = None,
    fit_intercept: bool = True,
    tol: float = 1e-8,
    max_iter: int = 100,
    options: Options | None = None,
    precondition: bool = True,
    validation: object = None,
    validation_seed: int = 0,
    keep_factor: bool = False,
    validation_tol: float | None = None,
) -> PCGResult:
    """Solve the Nyström ridge ``(C + alpha (K_LL + delta I)) beta = c`` by preconditioned CG, one pass per iteration.

    ``delta`` is the preconditioner's jitter (``M eps max(diag K_LL)``, ``eps``
    of the kernel values' dtype; 0 for plain CG): Falkon's system, whose
    penalty keeps the conjugate gradient stable where ``K_LL`` is numerically
    singular.

    Every penalty of ``alpha`` and every output is its own CG, all in the same
    passes: a pass's cost is its ``N M`` kernel values, which the columns share.
    With ``validation`` each penalty is solved twice in those passes, on the
    training rows (scored on the validation rows from the same passes) and on
    all rows (the refit); the block splits its rows, so the split costs no pass.

    Parameters
    ----------
    X : ndarray or dask array of shape (N, d)
    Y : ndarray or dask array of shape (N, k)
    kernel : FeatureKernel
        Unwhitened landmark kernel values (``landmark_values`` of a Nyström map).
    alpha : float or array of shape (a,)
        The ridge penalty or penalties (DESIGN section 2 scaling: the loss is a weighted mean).
    sample_weight : array of shape (N,), optional
    fit_intercept : bool
    tol : float
        A column stops when its preconditioned residual falls below ``tol`` times its first.
    max_iter : int
        Iterations (passes after the first) at most.
    options : Options, optional
    precondition : bool
        False runs plain CG (a comparison for the tests and the benchmark).
    validation : float or bool array of shape (N,), optional
        Validation rows: a fraction (hashed by row index with ``validation_seed``,
        as :func:`dxrf.engine.split.hashed_split`) or a mask (True = validation).
    validation_seed : int
    validation_tol : float, optional
        With a validation split, a penalty (its training-rows fit and its refit
        on all rows) also stops once its mean validation MSE has moved by less
        than ``validation_tol`` relative in each of the last
        :data:`VALIDATION_PATIENCE` iterations: the score settles long before
        the residual reaches a tight ``tol`` (flights-3m, M = 10 000: within
        1e-5 of its converged value after 21 iterations, against 67 to a
        residual of 1e-4). None: the residual alone decides.
    keep_factor : bool
        Return the preconditioner's ``L = T^T`` (the lower Cholesky factor of
        ``K_LL + delta I``, column-major) as ``factor``, in the factors' own
        memory, for a Cholesky whitening of the map (no second factorisation).

    Returns
    -------
    PCGResult
        ``beta``/``intercept`` at ``alpha_``: the one penalty, or the one with
        the lowest mean validation MSE, refitted on all rows.
    """
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive number for solver='pcg', got {tol!r}")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be at least 1, got {max_iter!r}")
    if validation_tol is not None and not (np.isfinite(validation_tol) and validation_tol > 0):
        raise ValueError(f"validation_tol must be a positive number or None, got {validation_tol!r}")
    alphas = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    if alphas.ndim != 1 or not np.all(np.isfinite(alphas)) or np.any(alphas < 0):
        raise ValueError(f"alpha must be a number >= 0 or a 1-D array of them, got {alpha!r}")
    check_distinct_landmarks(kernel)
    opts = resolve_options(options)
    m = kernel.n_base
    # one M x M array: K's own (row-major K is factored in place); plain CG keeps K for K v
    # the jitter follows the precision of the kernel values the passes compute (falkon module)
    factors = falkon_factors(landmark_gram(kernel.W, landmark_kind(kernel), kernel.effective_bandwidth), alphas,
                             identity=not precondition, overwrite_k=precondition,
                             eps=float(np.finfo(np.dtype(kernel.dtype)).eps))
    split, mask = _split_spec(validation, validation_seed)
    # kernel values kept for every pass when they fit the cache's budget (one computation instead of 1 + n_iter)
    plan = plan_cache(opts.cache_features, int(X.shape[0]), m, np.dtype(kernel.dtype).itemsize,
                      dask_input=is_dask(X), fraction=opts.cache_fraction)
    cache = feature_cache(X, _cache_block, (kernel,), m, kernel.dtype, plan=plan, options=opts,
                          unit_rows=sub_rows_for(m, kernel.dtype.itemsize))
    source, cached = cache.source(X), cache.cached
    handle = ship(kernel) if is_dask(X) else kernel
    try:

        def one_pass(V: np.ndarray | None, width: int) -> tuple[LandmarkProducts, ...]:
            # the targets are read by the first pass only
            return run_pass(products_pass(m, width, kernel.dtype.itemsize), source, (Y if V is None else None, sample_weight, mask),
                            (handle, V, split, cached),
                            options=opts, names=("y", "sample_weight", "validation"))

        first = one_pass(None, 1 if np.ndim(Y) == 1 else int(Y.shape[1]))
        held_out = len(first) == 2
        total = LandmarkProducts()
        for part in first:
            total += part
        if not total.n > 0:
            raise ValueError("the sample weights sum to zero: nothing to fit")
        if held_out and not (first[0].n > 0 and first[1].n > 0):
            raise ValueError("the validation split leaves no training or no validation rows (by weight): "
                             "choose another fraction or mask")
        # the row groups solved: all rows (the fit or refit) and, with a split, the training rows
        groups = [(total.n, *_columns_of(total, total.n, fit_intercept))]
        if held_out:
            groups.append((first[0].n, *_columns_of(first[0], first[0].n, fit_intercept)))
        k, n_alpha = groups[0][3].shape[1], alphas.size
        # column q of the CG state: group g, penalty j, output o, at q = (g * n_alpha + j) * k + o
        n_col = len(groups) * n_alpha * k
        col_group = np.repeat(np.arange(len(groups)), n_alpha * k)
        col_alpha = np.tile(np.repeat(np.arange(n_alpha), k), len(groups))
        S_col = np.array([groups[g][0] for g in col_group])
        kbar_col = np.stack([groups[g][1] for g in col_group], axis=1)  # (M, n_col)
        c = np.concatenate([np.tile(g[3], n_alpha) for g in groups], axis=1)

        def per_alpha(U: np.ndarray, which: np.ndarray, trans: bool) -> np.ndarray:
            out = np.empty_like(U)
            for j in np.unique(which):
                cols = which == j
                out[:, cols] = factors.solve_A(int(j), U[:, cols], trans=trans)
            return out

        def B(U: np.ndarray, which: np.ndarray) -> np.ndarray:  # T^{-1} A_j^{-1} u per column
            return factors.solve_T(per_alpha(U, which, trans=False))

        def Bt(V: np.ndarray, which: np.ndarray) -> np.ndarray:  # A_j^{-T} T^{-T} v per column
            return per_alpha(factors.solve_T(V, trans=True), which, trans=True)

        def H(P: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            """``(C + alpha (K + delta I)) P`` in the preconditioned basis, one pass; also ``B P`` and the scored rows' ``sum w k k^T B P``.

            A column's scored rows: all rows for a fit on all rows (its training
            MSE), the validation rows for a fit on the training rows.
            """
            which = col_alpha[idx]
            AP = per_alpha(P, which, trans=False)  # A^{-1} p
            V = factors.solve_T(AP)  # B p
            t0 = time.perf_counter()
            parts = one_pass(V, V.shape[1])
            pass_seconds.append(time.perf_counter() - t0)
            train = parts[0].kkv
            every = train if not held_out else train + parts[1].kkv
            on_all = col_group[idx] == 0
            prod = np.where(on_all, every, train) / S_col[idx]
            kb = kbar_col[:, idx]
            prod -= kb * np.einsum("ij,ij->j", kb, V)
            scored = np.where(on_all, every, parts[-1].kkv)
            if not precondition:  # B = I: the penalty alpha K p
                return prod + alphas[which] * factors.K_times(V), V, scored
            # the penalty B^T alpha T^T T B p is alpha A^{-T} A^{-1} p: four triangular solves an iteration, not six
            return per_alpha(factors.solve_T(prod, trans=True) + alphas[which] * AP, which, trans=True), V, scored

        u = np.zeros((m, n_col))
        r = Bt(c, col_alpha)
        p = r.copy()
        rr = np.einsum("ij,ij->j", r, r)
        r0 = np.sqrt(rr)
        active = r0 > 0
        Gb = np.zeros((m, n_col))  # sum over each column's scored rows of w k k^T beta, beta = B u
        beta_now = np.zeros((m, n_col))
        if held_out:
            t_cols = slice(n_alpha * k, 2 * n_alpha * k)
            _, kbar_t, ybar_t, _ = groups[1]
            ybar_t, valid_sums = np.tile(ybar_t, n_alpha), _tiled(first[1], n_alpha)
        path = []  # per iteration with a split: each penalty's mean validation MSE
        settled = np.zeros(n_alpha, dtype=bool)
        history, pass_seconds, seconds = [], [], []
        it = 0
        while active.any() and it < max_iter:
            t_iter = time.perf_counter()
            idx = np.flatnonzero(active)
            Hp, Bp, scored = H(p[:, idx], idx)
            step = rr[idx] / np.einsum("ij,ij->j", p[:, idx], Hp)
            u[:, idx] += step * p[:, idx]
            beta_now[:, idx] += step * Bp  # B u, tracked for the scores along the way
            Gb[:, idx] += step * scored  # beta = B u moves by step B p: its product with the scored rows' Gram too
            r[:, idx] -= step * Hp
            new = np.einsum("ij,ij->j", r[:, idx], r[:, idx])
            p[:, idx] = r[:, idx] + (new / rr[idx]) * p[:, idx]
            rr[idx] = new
            it += 1
            rel = np.sqrt(rr) / np.where(r0 > 0, r0, 1.0)
            history.append(float(rel.max()))
            if held_out:
                now = _scored_mse(beta_now[:, t_cols], Gb[:, t_cols], kbar_t, ybar_t, valid_sums)
                path.append(now.reshape(n_alpha, k).mean(axis=1))
                if validation_tol is not None:
                    settled |= _settled(path, validation_tol) & (rel > tol).reshape(-1, n_alpha, k).any(axis=(0, 2))
            active = (rel > tol) & ~settled[col_alpha]
            spent = time.perf_counter() - t_iter
            seconds.append((pass_seconds[-1], spent - pass_seconds[-1]))
    finally:
        cache.release()
    beta = B(u, col_alpha)
    factor = factors.lower_factor() if keep_factor and precondition else None
    del factors
    ybar_col = np.concatenate([np.tile(g[2], n_alpha) for g in groups])
    intercept = ybar_col - np.einsum("ij,ij->j", kbar_col, beta)
    fits = beta[:, : n_alpha * k].reshape(m, n_alpha, k).transpose(1, 0, 2)
    intercepts = intercept[: n_alpha * k].reshape(n_alpha, k)
    a = slice(0, n_alpha * k)
    _, kbar_a, ybar_a, _ = groups[0]
    fitted = _scored_mse(beta[:, a], Gb[:, a], kbar_a, np.tile(ybar_a, n_alpha), _tiled(total, n_alpha))
    scores = None
    chosen = 0
    if held_out:
        t = slice(n_alpha * k, 2 * n_alpha * k)
        _, kbar_t, ybar_t, _ = groups[1]
        scores = _scored_mse(beta[:, t], Gb[:, t], kbar_t, np.tile(ybar_t, n_alpha), _tiled(first[1], n_alpha))
        scores = scores.reshape(n_alpha, k)
        chosen = int(np.argmin(scores.mean(axis=1)))  # the first of equals: the grid's order
    return PCGResult(fits[chosen], intercepts[chosen], it, 1 + it, np.asarray(history), not active.any(),
                     alpha=float(alphas[chosen]), alphas=alphas, betas=fits, intercepts=intercepts,
                     validation_mse=scores, train_mse=fitted.reshape(n_alpha, k), cache=plan, factor=factor,
                     seconds=np.asarray(seconds, dtype=np.float64).reshape(-1, 2), variance=_variance(total),
                     validation_variance=_variance(first[1]) if held_out else None, sum_weight=float(total.n),
                     validation_path=np.asarray(path).reshape(-1, n_alpha) if held_out else None,
                     settled=settled if validation_tol is not None else None)


def _settled(path: list, validation_tol: float) -> np.ndarray:
    """Per penalty: whether its validation MSE moved by less than ``validation_tol`` relative in each of the last iterations."""
    if len(path) <= VALIDATION_PATIENCE:
        return np.zeros(path[-1].shape, dtype=bool)
    recent = np.asarray(path[-(VALIDATION_PATIENCE + 1):])
    moved = np.abs(np.diff(recent, axis=0)) / np.maximum(np.abs(recent[1:]), np.finfo(np.float64).tiny)
    return (moved < validation_tol).all(axis=0)


def _tiled(v: LandmarkProducts, times: int) -> LandmarkProducts:
    """The validation sums with their per-output columns repeated for each penalty."""
    return LandmarkProducts(ky=np.tile(v.ky, times), ksum=v.ksum, ysum=np.tile(v.ysum, times),
                            yy=np.tile(v.yy, times), n=v.n)


def pcg_coef(features: NystroemFeatures, result: object, beta: np.ndarray, deferred: bool) -> np.ndarray:
    """The coefficients on the fitted map's features of a landmark-basis solution ``beta`` (M, k) of ``result``.

    ``deferred``: the map was fitted with its Cholesky whitening deferred
    (``features._defer_whitening``); it is whitened here by ``R^{-1}`` for the
    solver's factor ``R = L^T`` (in the factor's memory, which ``result``
    gives up), and the coefficients are ``R beta``. Otherwise the features are
    ``k(x, L) T`` and their coefficients solve ``T theta = beta``.
    """
    if not deferred:
        T = features.kernel_.transform_matrix
        if is_upper_triangular(T):
            return scipy.linalg.solve_triangular(T, beta, lower=False, check_finite=False)
        return scipy.linalg.solve(T, beta, check_finite=False)
    L = result.factor
    result.factor = None
    coef = dtrmm(1.0, L, np.asfortranarray(beta), lower=1, trans_a=1)  # k R^{-1} (R beta) = k beta
    L_inv, info = dtrtri(L, lower=1, overwrite_c=1)  # in place: the model keeps one M x M array
    if info != 0:  # a zero pivot: cannot happen after a successful factorisation
        raise ValueError(f"the landmarks' Cholesky factor is singular (LAPACK dtrtri info={info})")
    # R^{-1} = L^{-T}: row-major, as the map's own Cholesky whitening (the same products, saved and loaded)
    features._set_cholesky_whitening(L_inv.T)
    return np.ascontiguousarray(coef)


# -- the plan: Gram or conjugate gradient -------------------------------------------------------

#: CG iterations per decade of the tolerance the plan assumes: measured 34, 82, 107 and 170
#: iterations at tol 1e-3, 1e-4, 1e-6 and 1e-8 (MNIST, M = 4000, alpha = 1e-8) and 58 at 1e-6
#: (kin40k, M = 2000, alpha = 1e-5); t = 18 log10(1 / tol), at least 10
ITERATIONS_PER_DECADE = 18
#: iterations the plan assumes when a validation split's settled score stops the penalties
#: (``validation_tol`` = 1e-4): measured 18-21 on flights-3m at M = 10 000 (alpha down to 1e-5)
SETTLED_ITERATIONS = 30
#: the cost of one kernel value in a CG pass, in multiply-adds of the Gram's syrk: the exponential
#: (about 1-2 ns in NumPy) and two reads of the sub-block for K V and K^T (K V), against ~0.03 ns
#: per multiply-add of a BLAS syrk on this class of machine (measured: 2.4 ns per value, kin40k)
ENTRY_COST = 100
#: the same for a kernel value kept by the feature cache: two float32 reads from memory
#: (measured: 0.55 ns per value, kin40k at M = 2000)
CACHED_ENTRY_COST = 18
PLANS = ("auto", "gram", "pcg")


def pcg_iterations(tol: float, max_iter: int | None = None, *, settled: bool = False) -> int:
    """The iterations the plan assumes at ``tol``: :data:`ITERATIONS_PER_DECADE` per decade, 10 to ``max_iter``.

    ``settled``: the penalties also stop when their validation MSE settles
    (``validation_tol`` with a split), at most :data:`SETTLED_ITERATIONS`.
    """
    t = max(10, int(round(ITERATIONS_PER_DECADE * np.log10(1.0 / float(tol)))))
    if settled:
        t = min(t, SETTLED_ITERATIONS)
    return t if max_iter is None else min(t, int(max_iter))


def plan_estimate(n: int, m: int, d: int, k: int = 1, iterations: int | None = None, *, n_alphas: int = 1,
                  held_out: bool = False, tol: float = 1e-8, cached: bool = False) -> dict:
    """The cost model of the two Nyström plans, in multiply-add equivalents, and the cheaper one.

    Gram plan: one pass of ``N M d`` (kernel values) plus ``N M^2 / 2`` (syrk),
    then ``M^3 / 3`` per penalty (a Cholesky factorisation of ``C + alpha K``);
    each worker holds ``M x M`` float64 sums (twice: compensated). CG plan: a
    first pass and ``t`` iteration passes, each ``N M (d + ENTRY_COST + 2 w)``
    for ``w`` columns (``k`` outputs times ``n_alphas`` penalties, twice with a
    validation split: the training rows' fit and the refit on all rows); with
    the kernel values ``cached``, the first pass computes them and each iteration
    costs ``N M (CACHED_ENTRY_COST + 2 w)``. Plus ``(2 + n_alphas) M^3 / 3``
    (the preconditioner's factors and ``T T^T``); workers hold ``M (w + 2)``
    floats per partial. ``t`` is ``iterations``, by default
    :func:`pcg_iterations` of ``tol``. The plan is the one with fewer operations.
    """
    n, m, d, k, a = int(n), int(m), int(d), int(k), int(n_alphas)
    iterations = pcg_iterations(tol) if iterations is None else int(iterations)
    width = k * a * (2 if held_out else 1)
    gram = n * m * d + n * m * m / 2 + a * m**3 / 3
    if cached:
        passes = n * m * (d + ENTRY_COST + 2 * width) + iterations * n * m * (CACHED_ENTRY_COST + 2 * width)
    else:
        passes = (iterations + 1) * n * m * (d + ENTRY_COST + 2 * width)
    pcg = passes + (2 + a) * m**3 / 3
    return {
        "plan": "pcg" if pcg < gram else "gram",
        "gram_ops": float(gram),
        "pcg_ops": float(pcg),
        "iterations": int(iterations),
        "cached": bool(cached),
        "gram_worker_bytes": float(16 * m * m),
        "pcg_worker_bytes": float(8 * m * (width + 2) * 2 * (2 if held_out else 1)),
    }

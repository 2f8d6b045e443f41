"""Logistic regression on random features: block kernels, solvers, passes, clusters, dask-ml."""

from __future__ import annotations

import threading

import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

import dxrf
from dxrf.solvers.logistic import (
    _LINE_STEPS,
    _block_sums,
    _finalize,
    _make_spec,
    choose_solver,
    fit_logistic,
    logistic_block,
    logistic_hvp_block,
)

N, D, M = 1500, 5, 40
ALPHA = 1e-3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(N, D))
    score = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - 1 + 0.4 * rng.normal(size=N)
    t = np.where(score > 0, 1, -1)
    # three classes for one-vs-rest: +1 in the column of the class, -1 elsewhere
    cls = np.digitize(X[:, 0] + 0.5 * X[:, 2] + 0.3 * rng.normal(size=N), [-0.5, 0.5])
    T3 = np.where(cls[:, None] == np.arange(3), 1, -1)
    fmap = dxrf.RandomFourierFeatures(M, bandwidth=2.0, dtype="float64", random_state=0).fit(X)
    return X, t, T3, fmap


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def dense_reference(Z, T, coef, intercept):
    """Loss, gradient, Hessians of explicit float64 features (no penalty, sums)."""
    Z1 = np.hstack([Z, np.ones((Z.shape[0], 1))])
    F = Z @ coef + intercept
    loss = np.logaddexp(0, -T * F).sum(axis=0)
    R = -T * expit(-T * F)
    W = expit(F) * expit(-F)
    grad = Z1.T @ R
    hess = np.stack([Z1.T @ (W[:, [k]] * Z1) for k in range(T.shape[1])])
    return loss, grad, hess, W, Z1


# -- the block kernel against a dense reference ------------------------------------------


def test_block_matches_dense_reference(data):
    X, _, T3, fmap = data
    kernel = fmap.kernel_
    rng = np.random.default_rng(1)
    coef = rng.normal(scale=2.0, size=(M, 3))
    intercept = np.array([0.3, -0.2, 0.1])
    Z = kernel(X)
    loss, grad, hess, _, _ = dense_reference(Z, T3, coef, intercept)
    # small tiles, so that the sums run over many tiles of one block
    out = logistic_block(X, T3, kernel, coef, intercept, hessian=True, tile_rows=128)
    assert out.n == N
    assert rel(out.loss, loss) <= 1e-10
    assert rel(out.grad, grad) <= 1e-10
    assert rel(out.hessian, hess) <= 1e-10
    np.testing.assert_array_equal(out.hessian, np.swapaxes(out.hessian, 1, 2))
    assert logistic_block(X, T3, kernel, coef, intercept, hessian=False).hessian is None
    V = rng.normal(size=(M + 1, 3))
    hv = logistic_hvp_block(X, T3, kernel, coef, intercept, V, tile_rows=128)
    assert rel(hv, np.einsum("kij,jk->ik", hess, V)) <= 1e-10
    # binary labels of shape (n,) and a 1-d coefficient vector
    one = logistic_block(X, T3[:, 0], kernel, coef[:, 0], intercept[0], hessian=True)
    assert rel(one.hessian[0], hess[0]) <= 1e-10


def test_line_search_losses_come_from_the_same_pass(data):
    X, t, _, fmap = data
    kernel = fmap.kernel_
    rng = np.random.default_rng(2)
    point = rng.normal(size=(M + 1, 1))
    direction = rng.normal(size=(M + 1, 1))
    spec = _make_spec(kernel, np.array([0]), point, np.array([0]), np.array([0]), line=np.array([0]), directions=direction)
    out = _finalize(_block_sums(X, t[:, None], kernel, spec, tile_rows=100), kernel)
    Z = kernel(X)
    for i, s in enumerate(_LINE_STEPS):
        p = point - (1 - s) * direction
        ref = np.logaddexp(0, -t * (Z @ p[:M, 0] + p[M, 0])).sum()
        assert abs(out.line[i, 0] - ref) <= 1e-10 * ref


# -- convergence to scikit-learn -----------------------------------------------------------


def sklearn_ovr(Z, T, alpha, fit_intercept=True):
    coefs, intercepts = [], []
    for k in range(T.shape[1]):
        sk = LogisticRegression(C=1 / (Z.shape[0] * alpha), tol=1e-12, max_iter=10000, fit_intercept=fit_intercept)
        sk.fit(Z, T[:, k] == 1)
        coefs.append(sk.coef_[0])
        intercepts.append(sk.intercept_[0])
    return np.array(coefs).T, np.array(intercepts)


SOLVER_OPTIONS = {"newton": {}, "lbfgs": {"max_iter": 2000, "tol": 1e-10}, "newton-cg": {}}


@pytest.fixture(scope="module")
def sklearn_refs(data):
    X, t, T3, fmap = data
    Z = fmap.transform(X)
    return {2: sklearn_ovr(Z, t[:, None], ALPHA), 3: sklearn_ovr(Z, T3, ALPHA)}


@pytest.mark.parametrize("solver", ["newton", "lbfgs", "newton-cg"])
@pytest.mark.parametrize("classes", [2, 3])
def test_converges_to_sklearn(data, sklearn_refs, solver, classes):
    X, t, T3, fmap = data
    T = t[:, None] if classes == 2 else T3
    Z = fmap.transform(X)
    ref_coef, ref_intercept = sklearn_refs[classes]
    res = fit_logistic(X, T if classes == 3 else t, fmap, alpha=ALPHA, solver=solver, **SOLVER_OPTIONS[solver])
    assert res.solver == solver and res.converged
    assert res.coef.shape == (M, T.shape[1]) and res.intercept.shape == (T.shape[1],)
    for k in range(T.shape[1]):
        assert rel(res.coef[:, k], ref_coef[:, k]) <= 1e-4
        assert abs(res.intercept[k] - ref_intercept[k]) <= 1e-4 * max(1.0, abs(ref_intercept[k]))
    # the reported objective is the objective at the returned coefficients
    F = Z @ res.coef + res.intercept
    L = np.logaddexp(0, -T * F).mean(axis=0) + 0.5 * ALPHA * (res.coef**2).sum(axis=0)
    np.testing.assert_allclose(res.loss, L, rtol=1e-12)


def test_without_intercept(data):
    X, t, _, fmap = data
    ref_coef, _ = sklearn_ovr(fmap.transform(X), t[:, None], ALPHA, fit_intercept=False)
    for solver in ("newton", "lbfgs"):
        res = fit_logistic(X, t, fmap, alpha=ALPHA, solver=solver, fit_intercept=False, **SOLVER_OPTIONS[solver])
        assert rel(res.coef[:, 0], ref_coef[:, 0]) <= 1e-4
        assert res.intercept[0] == 0.0


def test_float32_features_converge(data):
    """float32 blocks: Newton reaches the float64 solution of the same (rounded) features."""
    X, _, T3, _ = data
    f32 = dxrf.RandomFourierFeatures(M, bandwidth=2.0, dtype="float32", random_state=0).fit(X)
    ref = fit_logistic(X, T3, f32.kernel_.astype("float64"), alpha=ALPHA, solver="newton")
    for solver in ("newton", "lbfgs"):
        res = fit_logistic(X, T3, f32, alpha=ALPHA, solver=solver, **SOLVER_OPTIONS[solver])
        assert res.converged
        assert rel(res.coef, ref.coef) <= 1e-5


def test_warm_start_at_the_solution_costs_one_pass(data):
    X, t, _, fmap = data
    res = fit_logistic(X, t, fmap, alpha=ALPHA, solver="newton")
    again = fit_logistic(X, t, fmap, alpha=ALPHA, solver="newton", coef_init=res.coef, intercept_init=res.intercept)
    assert again.n_passes == 1 and again.n_iter == 0 and again.converged
    assert rel(again.coef, res.coef) <= 1e-10


@pytest.mark.parametrize("solver", ["newton", "newton-cg"])
def test_far_warm_start_backtracks_and_converges(data, solver):
    """Saturated start: the full step fails, the line search backtracks (grid of the trial
    pass, then loss-only passes), and every pass is still counted."""
    X, t, _, fmap = data
    ref = fit_logistic(X, t, fmap, alpha=ALPHA, solver="newton")
    lock = threading.Lock()
    reads = []

    def counted(block):
        with lock:
            reads.extend([1] if block.shape[0] else [])
        return block

    Xd = da.from_array(X, chunks=(500, D)).map_blocks(counted, dtype=X.dtype)
    start = 1000 * np.random.default_rng(3).normal(size=M)
    # every pass reads X: without the feature cache (with it, X is read once)
    with dxrf.options(cache_features=False):
        res = fit_logistic(Xd, t, fmap, alpha=ALPHA, solver=solver, coef_init=start, intercept_init=1000.0)
    assert res.converged
    assert rel(res.coef, ref.coef) <= 1e-6
    assert len(reads) == 3 * res.n_passes
    reads.clear()
    with dxrf.options(cache_features=True):  # dask's own scheduler: the blocks persisted in this process
        cached = fit_logistic(Xd, t, fmap, alpha=ALPHA, solver=solver, coef_init=start, intercept_init=1000.0)
    assert len(reads) == 3 and cached.n_passes == res.n_passes and cached.feature_cache.cached
    np.testing.assert_array_equal(cached.coef, res.coef)
    if solver == "newton":
        assert res.n_passes > res.n_iter + 1  # some iterations needed a second pass


def test_auto_solver():
    assert choose_solver(500, 1) == "newton"
    assert choose_solver(5000, 1) == "lbfgs"  # M beyond NEWTON_MAX_COMPONENTS
    assert choose_solver(3000, 10) == "lbfgs"  # 10 Hessians of 3001^2 doubles = 720 MB


# -- dask input, passes ---------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
def test_dask_equals_numpy(data, solver):
    X, _, T3, fmap = data
    opts = SOLVER_OPTIONS[solver]
    ref = fit_logistic(X, T3, fmap, alpha=ALPHA, solver=solver, **opts)
    Xd = da.from_array(X, chunks=(317, D))  # chunks do not divide N
    for T in (T3, da.from_array(T3, chunks=(400, 3))):
        res = fit_logistic(Xd, T, fmap, alpha=ALPHA, solver=solver, **opts)
        assert rel(res.coef, ref.coef) <= 1e-8
        assert np.allclose(res.intercept, ref.intercept, rtol=1e-8, atol=1e-10)
        assert res.n_passes == ref.n_passes


@pytest.fixture
def no_feature_cache():
    """Every pass reads X (the tests that count reads per pass): the feature cache off."""
    with dxrf.options(cache_features=False):
        yield


def test_newton_pass_count_is_exact_and_small(data, no_feature_cache):
    X, _, T3, fmap = data
    lock = threading.Lock()
    reads = []

    def counted(block):
        with lock:
            if block.shape[0]:  # not the empty block of dask's meta inference
                reads.append(block.shape[0])
        return block

    Xd = da.from_array(X, chunks=(250, D)).map_blocks(counted, dtype=X.dtype)
    res = fit_logistic(Xd, T3, fmap, alpha=ALPHA, solver="newton")
    assert res.converged
    assert len(reads) == res.n_passes * 6  # every pass reads every chunk once
    assert sum(reads) == res.n_passes * N
    # one pass per iteration plus the start: the full Newton steps were all accepted
    assert res.n_passes == res.n_iter + 1
    assert res.n_passes <= 12
    reads.clear()
    lb = fit_logistic(Xd, T3, fmap, alpha=ALPHA, solver="lbfgs", **SOLVER_OPTIONS["lbfgs"])
    assert len(reads) == lb.n_passes * 6
    assert lb.n_passes > res.n_passes


def test_on_a_local_cluster_from_zarr(tmp_path, data, cluster2):
    X, _, T3, fmap = data
    xpath, tpath = str(tmp_path / "X.zarr"), str(tmp_path / "T.zarr")
    zarr.create_array(xpath, shape=X.shape, chunks=(400, D), dtype="float64")[:] = X
    zarr.create_array(tpath, shape=T3.shape, chunks=(500, 3), dtype="int8")[:] = T3
    ref = fit_logistic(X, T3, fmap, alpha=ALPHA, solver="newton")
    with Client(cluster2):
        res = fit_logistic(da.from_zarr(xpath), da.from_zarr(tpath), fmap, alpha=ALPHA, solver="newton")
        # NumPy labels with zarr X: the labels are shipped to the workers once
        res_np = fit_logistic(da.from_zarr(xpath), T3, fmap, alpha=ALPHA, solver="newton")
    for r in (res, res_np):
        assert r.converged
        assert rel(r.coef, ref.coef) <= 1e-8
        assert np.allclose(r.intercept, ref.intercept, rtol=1e-8, atol=1e-10)
        assert r.n_passes == ref.n_passes


def test_dask_ml_fits_lazy_dxrf_features(data):
    """The issue's compatibility test: dask-ml's LogisticRegression on a dxrf transformer's lazy output."""
    from dask_ml.linear_model import LogisticRegression as DaskLogisticRegression

    X, t, _, _ = data
    Xd = da.from_array(X, chunks=(500, D))
    Zd = dxrf.RandomFourierFeatures(50, bandwidth=2.0, random_state=0).fit(Xd).transform(Xd)
    assert isinstance(Zd, da.Array)
    yd = da.from_array(t == 1, chunks=(500,))
    clf = DaskLogisticRegression(solver="newton", C=10.0).fit(Zd, yd)
    accuracy = float((clf.predict(Zd) == yd).mean().compute())
    assert accuracy >= 0.75


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("nan"), float("inf"), "1"])
def test_alpha_must_be_positive(data, alpha):
    X, t, _, fmap = data
    with pytest.raises(ValueError, match="alpha"):
        fit_logistic(X, t, fmap, alpha=alpha)


def test_bad_labels_and_shapes(data):
    X, t, _, fmap = data
    zero_one = (t == 1).astype(int)
    first = int(np.flatnonzero(zero_one == 0)[0])
    with pytest.raises(ValueError, match=rf"-1 or \+1; found 0 at row {first}$"):
        fit_logistic(X, zero_one, fmap, alpha=ALPHA)
    with pytest.raises(ValueError, match="rows"):
        fit_logistic(X, t[:-1], fmap, alpha=ALPHA)
    with pytest.raises(ValueError, match="rows"):
        fit_logistic(da.from_array(X, chunks=300), da.from_array(t[:-5], chunks=300), fmap, alpha=ALPHA)
    # labels of a dask T are checked inside the pass, naming the row
    bad = t.copy()
    bad[1000] = 2
    for solver in ("newton", "lbfgs"):
        with pytest.raises(ValueError, match="found 2 at row 1000"):
            fit_logistic(da.from_array(X, chunks=(300, D)), da.from_array(bad, chunks=300), fmap, alpha=ALPHA, solver=solver)
    # the L-BFGS helper thread was stopped with the failed pass
    assert not [th for th in threading.enumerate() if th.name == "dxrf-logistic-solver"]
    with pytest.raises(ValueError, match="solver"):
        fit_logistic(X, t, fmap, alpha=ALPHA, solver="sag")
    with pytest.raises(ValueError, match="coef_init"):
        fit_logistic(X, t, fmap, alpha=ALPHA, coef_init=np.zeros(M + 1))
    with pytest.raises(ValueError, match="columns"):
        fit_logistic(X[:, :3], t, fmap, alpha=ALPHA)
    with pytest.raises(ValueError, match="max_iter"):
        fit_logistic(X, t, fmap, alpha=ALPHA, max_iter=0)


# -- sampled Hessians -------------------------------------------------------------------------


def test_hessian_runs_depend_on_the_global_row_only():
    from dxrf.solvers.logistic import _HESS_BLOCK, _hessian_runs

    n, period = 7 * _HESS_BLOCK + 300, 3
    want = np.flatnonzero((np.arange(n) // _HESS_BLOCK) % period == 0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        cuts = np.unique(np.concatenate([[0, n], rng.integers(1, n, size=6)]))
        got = np.concatenate(
            [np.arange(a, b) for lo, hi in zip(cuts[:-1], cuts[1:]) for a, b in _hessian_runs(int(lo), int(hi), period)]
        )
        np.testing.assert_array_equal(got, want)
    assert _hessian_runs(5, 17, 1) == [(5, 17)]


def test_sampled_hessian_matches_dense_reference(data, monkeypatch):
    from dxrf.solvers.logistic import sample as L

    monkeypatch.setattr(L, "_HESS_BLOCK", 64)
    X, _, T3, fmap = data
    kernel = fmap.kernel_
    rng = np.random.default_rng(3)
    coef = rng.normal(size=(M, 3))
    intercept = np.array([0.2, -0.1, 0.0])
    points = np.vstack([coef, intercept])
    idx = np.arange(3)
    spec = _make_spec(kernel, idx, points, grad=idx, hess=idx, hess_period=4)
    # blocks and tiles that cut the 64-row sample blocks anywhere
    cuts = [0, 100, 377, 900, N]
    parts = [_block_sums(X[a:b], T3[a:b], kernel, spec, tile_rows=50, row_offset=a) for a, b in zip(cuts[:-1], cuts[1:])]
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    out = _finalize(total, kernel)
    rows = (np.arange(N) // 64) % 4 == 0
    assert total.n == N and total.n_hess == rows.sum()
    loss, grad, _, _, _ = dense_reference(kernel(X), T3, coef, intercept)
    _, _, hess_s, _, _ = dense_reference(kernel(X[rows]), T3[rows], coef, intercept)
    assert rel(out.loss, loss) <= 1e-10 and rel(out.grad, grad) <= 1e-10  # all rows
    assert rel(out.hess, hess_s * (N / rows.sum())) <= 1e-10  # the sample, scaled to N rows


def test_sampled_hessians_converge_to_the_same_optimum(data, monkeypatch):
    from dxrf.solvers.logistic import sample as L

    monkeypatch.setattr(L, "_HESS_BLOCK", 32)
    X, _, T3, fmap = data
    exact = fit_logistic(X, T3, fmap, alpha=ALPHA, solver="newton", hessian_rows=None)
    assert exact.hessian_rows == N
    sampled = fit_logistic(X, T3, fmap, alpha=ALPHA, solver="newton", hessian_rows=300)
    assert sampled.converged
    assert sampled.hessian_rows == ((np.arange(N) // 32) % (N // 300) == 0).sum() < N / 4
    assert rel(sampled.coef, exact.coef) <= 1e-6
    assert np.allclose(sampled.loss, exact.loss, rtol=1e-12)
    # on dask, with chunks that cut the sample blocks: the same rows, the same fit
    res = fit_logistic(da.from_array(X, chunks=(317, D)), T3, fmap, alpha=ALPHA, solver="newton", hessian_rows=300)
    assert res.hessian_rows == sampled.hessian_rows and res.n_passes == sampled.n_passes
    assert rel(res.coef, sampled.coef) <= 1e-8
    # "auto" samples only when the Hessian is the larger part of a pass and N is large
    assert L._hessian_period("auto", 200_000, 500, 90) == 3
    assert L._hessian_period("auto", 200_000, 100, 90) == 1  # M < 2 d: features cost more
    assert L._hessian_period("auto", 50_000, 500, 90) == 1  # the sample would be most rows


@pytest.mark.parametrize("bad", ["all", 0, -5, 2.5, True])
def test_hessian_rows_is_checked(data, bad):
    X, t, _, fmap = data
    for solver in ("newton", "lbfgs"):
        with pytest.raises(ValueError, match="hessian_rows"):
            fit_logistic(X, t, fmap, alpha=ALPHA, solver=solver, hessian_rows=bad)

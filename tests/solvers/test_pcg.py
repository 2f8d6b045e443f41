"""The Nyström ridge by preconditioned conjugate gradient against dense NumPy solves of the same equations."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client

import dxrf
import dxrf.solvers.pcg as pcg_module
from dxrf import NystroemFeatures, RandomFeatureClassifier, RandomFeatureRidge, RandomFourierFeatures
from dxrf.features.nystroem import landmark_gram, landmark_kernel
from dxrf.kernels.landmark_products import landmark_products
from dxrf.solvers.falkon import falkon_preconditioner
from dxrf.solvers.pcg import pcg_ridge, plan_estimate

SIGMA, ALPHA = 1.5, 1e-3


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    n, d, m = 1200, 4, 80
    X = rng.normal(size=(n, d))
    Y = np.c_[np.sin(X[:, 0]) + 0.1 * rng.normal(size=n), X[:, 1] ** 2]
    w = rng.uniform(0.5, 2.0, size=n)
    L = X[rng.choice(n, m, replace=False)]
    kernel = landmark_kernel(np.ascontiguousarray(L.T), "gaussian", SIGMA, whiten=False)
    return X, Y, w, L, kernel


def dense_solution(X, Y, w, kernel, alpha, fit_intercept=True):
    """``(beta, intercept)`` of ``(C + alpha K) beta = c`` from the whole N x M kernel matrix."""
    Kn = kernel.base(X)
    K = landmark_gram(kernel.W, "gaussian", SIGMA)
    S = w.sum()
    kb = w @ Kn / S if fit_intercept else np.zeros(Kn.shape[1])
    yb = w @ Y / S if fit_intercept else np.zeros(Y.shape[1])
    C = (Kn * w[:, None]).T @ Kn / S - np.outer(kb, kb)
    c = (Kn * w[:, None]).T @ Y / S - np.outer(kb, yb)
    beta = np.linalg.solve(C + alpha * K, c)
    return beta, yb - kb @ beta


def rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


def test_block_products_match_dense(problem):
    X, Y, w, _, kernel = problem
    V = np.random.default_rng(1).normal(size=(kernel.n_base, 3))
    Kn = kernel.base(X)
    out = landmark_products(X, kernel, V=V, w=w, sub_rows=500)  # three sub-blocks, the last short
    assert rel(out.kkv, Kn.T @ (w[:, None] * (Kn @ V))) < 1e-12
    out = landmark_products(X, kernel, Y=Y, w=w, sub_rows=333)
    assert rel(out.ky, Kn.T @ (w[:, None] * Y)) < 1e-12
    assert rel(out.ksum, Kn.T @ w) < 1e-12
    assert out.n == pytest.approx(w.sum(), rel=1e-14)
    np.testing.assert_allclose(out.ysum, w @ Y, rtol=1e-12)
    # float32 kernel values, float64 sums: about float32's rounding, not worse
    k32 = landmark_kernel(kernel.W.astype(np.float32), "gaussian", SIGMA, whiten=False)
    out = landmark_products(X, k32, V=V, sub_rows=256)
    assert rel(out.kkv, Kn.T @ (Kn @ V)) < 1e-5


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_solution_equals_dense_solve(problem, fit_intercept):
    X, Y, w, _, kernel = problem
    beta, b = dense_solution(X, Y, w, kernel, ALPHA, fit_intercept)
    res = pcg_ridge(X, Y, kernel, ALPHA, sample_weight=w, fit_intercept=fit_intercept, tol=1e-12, max_iter=300)
    assert res.converged and res.n_passes == res.n_iter + 1
    assert rel(res.beta, beta) < 1e-6
    assert rel(res.intercept, b) < 1e-6
    assert res.history.shape == (res.n_iter,) and res.history[-1] <= 1e-12


def test_per_column_lengthscales_solve_their_own_system(problem):
    """The preconditioner and the penalty are the lengthscales' K_LL (once the isotropic one of bandwidth 1:
    the solve then converged slowly to another system's solution)."""
    X, Y, w, L, _ = problem
    ell = np.array([0.6, 1.5, 3.0, 0.9])
    kernel = landmark_kernel(np.ascontiguousarray(L.T), "gaussian", ell, whiten=False)
    Kn, K = kernel.base(X), landmark_gram(kernel.W, "gaussian", ell)
    S = w.sum()
    kb, yb = w @ Kn / S, w @ Y / S
    C = (Kn * w[:, None]).T @ Kn / S - np.outer(kb, kb)
    beta = np.linalg.solve(C + ALPHA * K, (Kn * w[:, None]).T @ Y / S - np.outer(kb, yb))
    res = pcg_ridge(X, Y, kernel, ALPHA, sample_weight=w, tol=1e-12, max_iter=300)
    assert res.converged and rel(res.beta, beta) < 1e-6
    scalar = pcg_ridge(X, Y, landmark_kernel(np.ascontiguousarray(L.T), "gaussian", 1.2, whiten=False), ALPHA,
                       sample_weight=w, tol=1e-12, max_iter=300)
    assert res.n_iter <= 2 * scalar.n_iter  # preconditioned as well as an isotropic kernel
    # the estimators: the conjugate gradient's model is the Gram plan's
    fits = [RandomFeatureRidge(NystroemFeatures(60, bandwidth=ell, random_state=0), alpha=ALPHA, solver=s, tol=1e-12,
                               max_iter=300).fit(X, Y) for s in ("gram", "pcg")]
    np.testing.assert_allclose(fits[1].predict(X), fits[0].predict(X), rtol=1e-6, atol=1e-8)


def test_preconditioner_cuts_iterations_threefold(problem):
    X, Y, _, _, kernel = problem
    pre = pcg_ridge(X, Y, kernel, ALPHA, tol=1e-8, max_iter=300)
    assert pre.converged
    # plain CG given three times the preconditioned iterations has not converged yet
    plain = pcg_ridge(X, Y, kernel, ALPHA, tol=1e-8, max_iter=3 * pre.n_iter, precondition=False)
    assert not plain.converged, (pre.n_iter, plain.history[-1])


def test_preconditioner_whitens_its_model_of_the_system(problem):
    # B = T^-1 A^-1 with B^T P B = I for P = (K + dI)^2 / M + alpha (K + dI): a wrong factor still
    # converges, only slower (the second factor once read lauum's empty lower triangle), so check it
    _, _, _, _, kernel = problem
    K = landmark_gram(kernel.W, "gaussian", SIGMA)
    m = K.shape[0]
    T, A, delta = falkon_preconditioner(K, ALPHA)
    Kd = K + delta * np.eye(m)
    np.testing.assert_allclose(T.T @ T, Kd, rtol=0, atol=1e-12)
    B = np.linalg.solve(T, np.linalg.solve(A, np.eye(m)))
    P = Kd @ Kd / m + ALPHA * Kd
    np.testing.assert_allclose(B.T @ P @ B, np.eye(m), rtol=0, atol=1e-8)


def dense_validation_mse(X, Y, w, kernel, alpha, valid):
    """Per output: the model fitted densely on the training rows, its weighted MSE on the validation rows."""
    beta, b = dense_solution(X[~valid], Y[~valid], w[~valid], kernel, alpha)
    E = Y[valid] - kernel.base(X[valid]) @ beta - b
    return (w[valid] @ (E * E)) / w[valid].sum()


GRID = np.array([1e-1, 1e-3, 1e-5])


def test_a_grid_of_penalties_in_the_same_passes(problem):
    X, Y, w, _, kernel = problem
    res = pcg_ridge(X, Y, kernel, GRID, sample_weight=w, tol=1e-12, max_iter=400)
    assert res.converged and res.validation_mse is None and res.alpha == GRID[0]
    assert res.betas.shape == (3, kernel.n_base, 2) and res.intercepts.shape == (3, 2)
    for j, alpha in enumerate(GRID):
        beta, b = dense_solution(X, Y, w, kernel, alpha)
        assert rel(res.betas[j], beta) < 1e-6 and rel(res.intercepts[j], b) < 1e-6
        E = Y - kernel.base(X) @ beta - b  # each fit's MSE on its rows, from the same passes
        np.testing.assert_allclose(res.train_mse[j], w @ (E * E) / w.sum(), rtol=1e-6)
    # the smallest penalty needs the most iterations: one CG alone takes as many passes as the grid
    alone = pcg_ridge(X, Y, kernel, GRID[-1], sample_weight=w, tol=1e-12, max_iter=400)
    assert alone.n_passes == res.n_passes


@pytest.mark.parametrize("given", ["fraction", "mask"])
def test_validation_from_the_same_passes_equals_a_dense_hold_out(problem, given):
    from dxrf.engine.split import hashed_split

    X, Y, w, _, kernel = problem
    n = X.shape[0]
    if given == "fraction":
        valid, spec = hashed_split(0, n, 0.25, 7), 0.25
    else:
        valid = np.random.default_rng(3).uniform(size=n) < 0.3
        spec = valid
    res = pcg_ridge(X, Y, kernel, GRID, sample_weight=w, tol=1e-12, max_iter=400, validation=spec, validation_seed=7)
    assert res.converged and res.validation_mse.shape == (3, 2)
    want = np.array([dense_validation_mse(X, Y, w, kernel, a, valid) for a in GRID])
    np.testing.assert_allclose(res.validation_mse, want, rtol=1e-6)
    best = int(np.argmin(want.mean(axis=1)))
    assert res.alpha == GRID[best]
    # the chosen penalty refitted on all rows, in the same passes
    beta, b = dense_solution(X, Y, w, kernel, GRID[best])
    assert rel(res.beta, beta) < 1e-6 and rel(res.intercept, b) < 1e-6
    with pytest.raises(ValueError, match="no training or no validation"):
        pcg_ridge(X, Y, kernel, GRID, validation=np.zeros(n, dtype=bool), tol=1e-6)


@pytest.mark.slow
def test_dask_from_zarr_on_a_cluster_is_chunking_invariant(problem, tmp_path, cluster2):
    X, Y, w, _, kernel = problem
    beta, b = dense_solution(X, Y, w, kernel, 1e-2)  # a larger penalty: fewer passes on the cluster
    xpath = str(tmp_path / "X.zarr")
    zarr.create_array(xpath, shape=X.shape, chunks=(250, X.shape[1]), dtype="float64")[:] = X
    with Client(cluster2):
        got = []
        for rows in (250, 700):
            Xd = da.from_zarr(xpath).rechunk((rows, X.shape[1]))
            wd = da.from_array(w, chunks=300)  # chunks unlike X's: the engine aligns them
            got.append(pcg_ridge(Xd, Y, kernel, 1e-2, sample_weight=wd, tol=1e-11, max_iter=300))
    for res in got:
        assert rel(res.beta, beta) < 1e-6 and rel(res.intercept, b) < 1e-6
    assert rel(got[0].beta, got[1].beta) < 1e-6
    # a grid scored on a dask validation mask whose chunks are unlike X's, in the same passes
    valid = np.arange(X.shape[0]) % 5 == 1
    with Client(cluster2):
        Xd = da.from_zarr(xpath).rechunk((400, X.shape[1]))
        res = pcg_ridge(Xd, Y, kernel, [1e-1, 1e-2], sample_weight=w, tol=1e-11, max_iter=300,
                        validation=da.from_array(valid, chunks=350))
    want = [dense_validation_mse(X, Y, w, kernel, a, valid) for a in (1e-1, 1e-2)]
    np.testing.assert_allclose(res.validation_mse, want, rtol=1e-6)
    assert rel(res.betas[1], beta) < 1e-6


def test_estimators_pcg_equals_gram(problem):
    X, Y, w, L, _ = problem
    feats = NystroemFeatures(landmarks=L, bandwidth=SIGMA, whitening="cholesky")
    gram = RandomFeatureRidge(feats, alpha=ALPHA, solver="gram").fit(X, Y, sample_weight=w)
    pcg = RandomFeatureRidge(feats, alpha=ALPHA, solver="pcg", tol=1e-12, max_iter=300).fit(X, Y, sample_weight=w)
    assert gram.solver_ == "gram" and pcg.solver_ == "pcg"
    assert pcg.n_iter_ >= 1 and pcg.n_passes_ == pcg.n_iter_ + 1 and pcg.pcg_history_.size == pcg.n_iter_
    assert pcg.plan_estimate_["plan"] in ("gram", "pcg")
    # each iteration's seconds: its pass and its client algebra, both spent
    assert pcg.pcg_seconds_.shape == (pcg.n_iter_, 2) and np.all(pcg.pcg_seconds_ > 0)
    assert "pcg_seconds_" not in gram.__dict__
    np.testing.assert_allclose(pcg.predict(X), gram.predict(X), rtol=1e-6, atol=1e-6)
    # the symmetric whitening: coefficients solved through it give the same model
    eigh = RandomFeatureRidge(NystroemFeatures(landmarks=L, bandwidth=SIGMA), alpha=ALPHA, solver="pcg", tol=1e-12,
                              max_iter=300).fit(X, Y[:, 0])
    ref = RandomFeatureRidge(NystroemFeatures(landmarks=L, bandwidth=SIGMA), alpha=ALPHA, solver="gram").fit(X, Y[:, 0])
    np.testing.assert_allclose(eigh.predict(X), ref.predict(X), rtol=1e-6, atol=1e-6)
    labels = np.digitize(X[:, 0], [-0.5, 0.5])  # three classes: three columns in the same passes
    cg = RandomFeatureClassifier(feats, alpha=ALPHA, solver="pcg", tol=1e-12, max_iter=300).fit(X, labels)
    gc = RandomFeatureClassifier(feats, alpha=ALPHA, solver="gram").fit(X, labels)
    np.testing.assert_allclose(cg.decision_function(X), gc.decision_function(X), rtol=1e-6, atol=1e-6)
    assert cg.solver_ == "pcg" and cg.n_iter_ == cg.pcg_history_.size


def test_a_cholesky_whitening_comes_from_the_preconditioner(problem, tmp_path):
    # the map's whitening is R^{-1} for the CG's own factor R of K_LL + delta I: no second factorisation
    from dxrf.kernels.landmarks import inverse_cholesky

    X, Y, w, L, _ = problem
    feats = NystroemFeatures(landmarks=L, bandwidth=SIGMA, whitening="cholesky")
    pcg = RandomFeatureRidge(feats, alpha=ALPHA, solver="pcg", tol=1e-12, max_iter=300).fit(X, Y, sample_weight=w)
    gram = RandomFeatureRidge(feats, alpha=ALPHA, solver="gram").fit(X, Y, sample_weight=w)
    T = pcg.kernel_.whitening
    assert T is not None and not np.any(np.tril(T, -1))
    K = landmark_gram(pcg.kernel_.W, "gaussian", SIGMA)
    np.testing.assert_allclose(T, inverse_cholesky(K), rtol=0, atol=1e-6 * np.abs(T).max())
    np.testing.assert_allclose(pcg.features_.transform(X), gram.features_.transform(X), rtol=0, atol=1e-6)
    assert not feats._defer_whitening and not pcg.features_._defer_whitening
    assert not hasattr(feats, "kernel_")  # the learner fitted its own clone
    dxrf.save(pcg, tmp_path / "m")
    back = dxrf.load(tmp_path / "m")
    np.testing.assert_array_equal(back.predict(X), pcg.predict(X))
    # the symmetric whitening keeps its own (an eigendecomposition), solved through
    eigh = RandomFeatureRidge(NystroemFeatures(landmarks=L, bandwidth=SIGMA), alpha=ALPHA, solver="pcg", tol=1e-12,
                              max_iter=300).fit(X, Y)
    assert not np.allclose(np.tril(eigh.kernel_.whitening, -1), 0)


def test_estimators_choose_the_penalty_on_validation_as_the_gram_plan_does(problem):
    X, Y, w, L, _ = problem
    feats = NystroemFeatures(landmarks=L, bandwidth=SIGMA, whitening="cholesky")
    grid = [1e-1, 1e-3, 1e-5]
    gram = RandomFeatureRidge(feats, alphas=grid, validation=0.25, validation_seed=3, solver="gram").fit(X, Y, sample_weight=w)
    pcg = RandomFeatureRidge(feats, alphas=grid, validation=0.25, validation_seed=3, solver="pcg", tol=1e-12,
                             max_iter=400, validation_tol=None).fit(X, Y, sample_weight=w)
    assert pcg.solver_ == "pcg" and pcg.alpha_ == gram.alpha_
    np.testing.assert_allclose(pcg.alphas_, gram.alphas_)
    np.testing.assert_allclose(pcg.validation_errors_, gram.validation_errors_, rtol=1e-6)
    np.testing.assert_allclose(pcg.train_mse_, gram.train_mse_, rtol=1e-6)
    np.testing.assert_allclose(pcg.predict(X), gram.predict(X), rtol=1e-6, atol=1e-6)
    assert pcg.n_passes_ == pcg.n_iter_ + 1  # the validation rows cost no pass of their own
    # one penalty with a validation mask: scored on the mask, refitted on all rows
    mask = np.arange(X.shape[0]) % 4 == 0
    one = RandomFeatureRidge(feats, alpha=1e-3, validation=mask, solver="pcg", tol=1e-12, max_iter=400,
                             validation_tol=None).fit(X, Y)
    ref = RandomFeatureRidge(feats, alpha=1e-3, validation=mask, solver="gram").fit(X, Y)
    np.testing.assert_allclose(one.validation_errors_, ref.validation_errors_, rtol=1e-6)
    np.testing.assert_allclose(one.predict(X), ref.predict(X), rtol=1e-6, atol=1e-6)
    labels = np.digitize(X[:, 0], [-0.5, 0.5])
    cg = RandomFeatureClassifier(feats, alphas=grid, solver="pcg", tol=1e-12, max_iter=400,
                                 validation_tol=None).fit(X, labels)
    gc = RandomFeatureClassifier(feats, alphas=grid, solver="gram").fit(X, labels)
    assert cg.alpha_ == gc.alpha_
    np.testing.assert_allclose(cg.decision_function(X), gc.decision_function(X), rtol=1e-6, atol=1e-6)


def test_validation_path_and_the_settled_stop(problem):
    """Each iteration's validation MSE is the iterate's; a settled penalty stops, the others go on."""
    X, Y, w, _, kernel = problem
    grid = np.array([1e-1, 1e-6])
    full = pcg_ridge(X, Y, kernel, grid, sample_weight=w, tol=1e-13, max_iter=300, validation=0.25)
    assert full.validation_path.shape == (full.n_iter, 2)
    np.testing.assert_allclose(full.validation_path[-1], full.validation_mse.mean(axis=1), rtol=1e-9)
    early = pcg_ridge(X, Y, kernel, grid, sample_weight=w, tol=1e-13, max_iter=300, validation=0.25,
                      validation_tol=1e-4)
    assert early.converged and early.settled.all()
    assert early.n_iter < full.n_iter
    path = early.validation_path
    moved = np.abs(np.diff(path[-6:], axis=0)) / path[-5:]
    assert (moved[:, 1] < 1e-4).all()  # the last penalty to settle stopped the passes
    assert (np.abs(np.diff(path[-7:-1], axis=0)) / path[-6:-1] >= 1e-4).any()  # and not an iteration later
    # the settled scores are the converged ones to about the tolerance, and choose the same penalty
    np.testing.assert_allclose(early.validation_mse, full.validation_mse, rtol=1e-3)
    assert early.alpha == full.alpha
    # a penalty that settles early stops its columns: the large penalty's solution stays put after it settles
    settle_large = next(i for i in range(6, path.shape[0] + 1)
                        if (np.abs(np.diff(path[i - 6:i, 0])) / path[i - 5:i, 0] < 1e-4).all())
    assert settle_large < early.n_iter
    np.testing.assert_array_equal(path[settle_large - 1:, 0], path[settle_large - 1, 0])
    with pytest.raises(ValueError, match="validation_tol"):
        pcg_ridge(X, Y, kernel, grid, validation=0.25, validation_tol=0.0)
    with pytest.raises(ValueError, match="validation_tol"):
        RandomFeatureRidge(NystroemFeatures(20), solver="pcg", validation_tol=-1.0).fit(X, Y)


def test_an_unconverged_solve_warns(problem):
    from sklearn.exceptions import ConvergenceWarning

    X, Y, _, L, _ = problem
    feats = NystroemFeatures(landmarks=L, bandwidth=SIGMA, whitening="cholesky")
    with pytest.warns(ConvergenceWarning, match="did not converge.*2 iterations"):
        model = RandomFeatureRidge(feats, alpha=ALPHA, solver="pcg", tol=1e-12, max_iter=2).fit(X, Y)
    assert model.n_iter_ == 2


def test_auto_follows_its_estimate(problem, monkeypatch):
    from dxrf.solvers.pcg import pcg_iterations

    # iterations by the tolerance: 18 a decade, at least 10, at most max_iter
    assert (pcg_iterations(1e-6), pcg_iterations(1e-1), pcg_iterations(0.5), pcg_iterations(1e-8, 100)) == (108, 18, 10, 100)
    # a settled validation score stops the penalties sooner: the estimate caps the count, never raises it
    assert pcg_iterations(1e-6, settled=True) == pcg_module.SETTLED_ITERATIONS < 108
    assert pcg_iterations(1e-1, settled=True) == 18 and pcg_iterations(1e-8, 20, settled=True) == 20
    # large N: the CG wins when its kernel values are kept, or at a loose tolerance; not at 1e-8 recomputing them
    assert plan_estimate(10**6, 20000, 8, cached=True)["plan"] == "pcg"
    assert plan_estimate(10**6, 20000, 8, tol=1e-3)["plan"] == "pcg"
    assert plan_estimate(10**6, 20000, 8, tol=1e-8)["plan"] == "gram"
    assert plan_estimate(40000, 1000, 8, cached=True)["plan"] == "gram"
    X, Y, _, L, _ = problem
    model = RandomFeatureRidge(NystroemFeatures(landmarks=L, bandwidth=SIGMA), alpha=ALPHA).fit(X, Y)
    assert model.solver_ == model.plan_estimate_["plan"] == "gram"
    assert model.plan_estimate_["cached"] and model.plan_estimate_["iterations"] == 100  # max_iter caps 144
    # kernel values made free: the same problem's estimate now favours the conjugate gradient
    monkeypatch.setattr(pcg_module, "ENTRY_COST", -1000)
    monkeypatch.setattr(pcg_module, "CACHED_ENTRY_COST", -1000)
    assert plan_estimate(X.shape[0], L.shape[0], X.shape[1], 2, cached=True)["plan"] == "pcg"
    model = RandomFeatureRidge(NystroemFeatures(landmarks=L, bandwidth=SIGMA), alpha=ALPHA).fit(X, Y)
    assert model.solver_ == model.plan_estimate_["plan"] == "pcg" and model.feature_cache_ == "cached"
    # a grid with its validation split follows the estimate too (it counts the wider passes); other features: the Gram
    grid = RandomFeatureRidge(NystroemFeatures(landmarks=L, bandwidth=SIGMA), alphas=[1e-3, 1e-2]).fit(X, Y)
    assert grid.solver_ == "pcg" and grid.validation_errors_.shape == (2,)
    monkeypatch.undo()
    grid = RandomFeatureRidge(NystroemFeatures(landmarks=L, bandwidth=SIGMA), alphas=[1e-3, 1e-2]).fit(X, Y)
    assert grid.solver_ == "gram" and grid.plan_estimate_["iterations"] == pcg_module.SETTLED_ITERATIONS
    exact = RandomFeatureRidge(NystroemFeatures(landmarks=L, bandwidth=SIGMA), alphas=[1e-3, 1e-2], validation_tol=None)
    assert exact.fit(X, Y).plan_estimate_["iterations"] == 100  # the residual alone: 144 capped by max_iter
    wide = plan_estimate(10**6, 20000, 8, n_alphas=8, held_out=True)["pcg_ops"]
    assert wide > plan_estimate(10**6, 20000, 8)["pcg_ops"]
    # the estimate knows when the cache declines: with no budget the kernel values are recomputed
    with dxrf.options(cache_fraction=1e-12):
        model = RandomFeatureRidge(NystroemFeatures(landmarks=L, bandwidth=SIGMA), alpha=ALPHA, solver="pcg").fit(X, Y)
    assert not model.plan_estimate_["cached"] and model.feature_cache_ == "recomputed"
    assert RandomFeatureRidge(RandomFourierFeatures(20, random_state=0)).fit(X, Y).solver_ == "gram"


def test_bad_input(problem):
    X, Y, _, L, _ = problem
    with pytest.raises(ValueError, match="NystroemFeatures"):
        RandomFeatureRidge(RandomFourierFeatures(20, random_state=0), solver="pcg").fit(X, Y)
    for tol in (0.0, -1.0):
        with pytest.raises(ValueError, match="tol"):
            RandomFeatureRidge(NystroemFeatures(landmarks=L), solver="pcg", tol=tol).fit(X, Y)
    dup = np.vstack([L, L[:3]])
    with pytest.raises(ValueError, match="duplicate"):
        RandomFeatureRidge(NystroemFeatures(landmarks=dup, whitening="eigh"), solver="pcg").fit(X, Y)
    with pytest.raises(ValueError, match="evidence"):
        RandomFeatureRidge(NystroemFeatures(landmarks=L), solver="pcg", alphas=[1e-3, 1e-2], validation="evidence").fit(X, Y)
    with pytest.raises(ValueError, match="solver"):
        RandomFeatureRidge(NystroemFeatures(landmarks=L), solver="cg").fit(X, Y)
    with pytest.raises(ValueError, match="squared"):
        RandomFeatureClassifier(NystroemFeatures(landmarks=L), loss="logistic", solver="pcg").fit(X, X[:, 0] > 0)


def test_float32_kernel_values_converge_where_k_ll_is_numerically_singular():
    # many landmarks in two dimensions at a small bandwidth: K_LL's spectrum falls below float32's
    # rounding, and B magnifies the rounding of C v by about 1 / delta. With float64's eps as the
    # jitter this diverged (relative residual above 1); the jitter of the values' own precision
    # and Falkon's jittered penalty converge, to a fit as good as float64's
    rng = np.random.default_rng(7)
    X = np.round(rng.normal(size=(3000, 2)), 1)
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=3000)
    L = np.unique(X, axis=0)[rng.choice(np.unique(X, axis=0).shape[0], 400, replace=False)]
    fits = {}
    for dtype in (np.float32, np.float64):
        kernel = landmark_kernel(np.ascontiguousarray(L.T).astype(dtype), "gaussian", 0.5, whiten=False)
        res = pcg_ridge(X, y, kernel, 1e-4, tol=1e-5, max_iter=300)
        assert res.converged, (dtype, res.n_iter, res.history[-5:])
        assert res.history.max() < 2.0  # never far above its start
        fits[dtype] = np.mean((kernel.base(X).astype(np.float64) @ res.beta + res.intercept - y[:, None]) ** 2)
    # the same fit to the data (its noise variance is 0.01); the coefficients differ in K_LL's null space
    assert fits[np.float64] < 0.0100 and fits[np.float32] < 1.02 * fits[np.float64]

"""Multinomial (softmax) logistic regression: kernels, solvers, estimator, persistence, CLI."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client
from scipy.special import logsumexp, softmax
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

import dxrf
import dxrf.io
from _weight_checks import weight_xfails
from dxrf.learners.classifier import LOSSES
from dxrf.solvers.logistic import (
    class_index,
    fit_logistic,
    fit_multinomial,
    softmax_block,
    softmax_hvp_block,
    softmax_rows,
)

N, D, M, K = 1200, 5, 40, 4
ALPHA = 1e-3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, D))
    y = np.argmax(X[:, :K] + 0.3 * X[:, [4]] ** 2 + 0.6 * rng.normal(size=(N, K)), axis=1)
    T = np.where(y[:, None] == np.arange(K), 1, -1).astype(np.int8)
    fmap = dxrf.RandomFourierFeatures(M, bandwidth=2.0, dtype="float64", random_state=0).fit(X)
    return X, y, T, fmap


def objective(Z: np.ndarray, y: np.ndarray, coef: np.ndarray, intercept: np.ndarray, alpha: float) -> float:
    """The softmax objective on explicit float64 features, straight from its definition."""
    F = Z @ coef + intercept
    return float(np.mean(logsumexp(F, axis=1) - F[np.arange(len(y)), y]) + 0.5 * alpha * np.sum(coef**2))


def dense_hessian(Z1: np.ndarray, F: np.ndarray) -> np.ndarray:
    """The Hessian of sum_n loss_n in vec([W; b]) (row-major (M+1, K)), by its Kronecker form."""
    P = softmax(F, axis=1)
    m1, k = Z1.shape[1], F.shape[1]
    H = np.zeros((m1 * k, m1 * k))
    for z, p in zip(Z1, P):
        H += np.kron(np.outer(z, z), np.diag(p) - np.outer(p, p))
    return H


# -- the per-row kernel -------------------------------------------------------------------------


def test_softmax_rows_match_the_definitions():
    rng = np.random.default_rng(0)
    n, k = 50, 5
    f = rng.normal(size=(n, k)) * 3
    y = rng.integers(0, k, n)
    u, d = rng.normal(size=(n, k)), rng.normal(size=(n, k))
    steps = np.array([0.5, 0.25, 0.0])
    w = rng.uniform(0.1, 2.0, n)
    G, Hv = np.empty((n, k)), np.empty((n, k))
    loss, line = softmax_rows(f, y, grad_out=G, u=u, hv_out=Hv, d=d, steps=steps, weights=w)
    P = softmax(f, axis=1)
    E = np.eye(k)[y]
    rows = logsumexp(f, axis=1) - f[np.arange(n), y]
    np.testing.assert_allclose(loss, [np.sum((w * rows)[y == c]) for c in range(k)], rtol=1e-13)
    np.testing.assert_allclose(G, w[:, None] * (P - E), rtol=1e-13, atol=1e-15)
    hv = np.stack([(np.diag(p) - np.outer(p, p)) @ ui for p, ui in zip(P, u)])
    np.testing.assert_allclose(Hv, w[:, None] * hv, rtol=1e-12, atol=1e-14)
    for i, s in enumerate(steps):
        g = f - (1 - s) * d
        want = w * (logsumexp(g, axis=1) - g[np.arange(n), y])
        np.testing.assert_allclose(line[i].sum(), want.sum(), rtol=1e-13)
    # without weights: the same as weights of one
    G1 = np.empty((n, k))
    loss1, _ = softmax_rows(f, y, grad_out=G1)
    np.testing.assert_allclose(loss1.sum(), rows.sum(), rtol=1e-13)
    np.testing.assert_allclose(G1, P - E, atol=1e-15)


def test_softmax_rows_are_stable_for_huge_scores():
    f = np.array([[1e4, 0.0, -1e4], [-800.0, -800.0, 800.0]])
    y = np.array([1, 2])
    G = np.empty((2, 3))
    loss, _ = softmax_rows(f, y, grad_out=G)
    assert np.all(np.isfinite(G)) and np.all(np.isfinite(loss))
    np.testing.assert_allclose(loss, [0.0, 1e4, 0.0], rtol=1e-12)  # row 0 is class 1 at a margin of 1e4
    np.testing.assert_allclose(G[0], [1.0, -1.0, 0.0], atol=1e-300)


def test_class_index_needs_one_hot_rows():
    T = np.array([[1, -1, -1], [-1, -1, 1]])
    np.testing.assert_array_equal(class_index(T), [0, 2])
    with pytest.raises(ValueError, match="row 11 has 2 columns at \\+1"):
        class_index(np.array([[1, -1, -1], [1, 1, -1]]), row_offset=10)
    with pytest.raises(ValueError, match="row 0 has 0 columns"):
        class_index(-np.ones((1, 3)))


# -- the block functions against dense references and finite differences -----------------------


def test_block_matches_dense_reference(data):
    X, y, T, fmap = data
    rng = np.random.default_rng(1)
    W, b = 0.5 * rng.normal(size=(M, K)), rng.normal(size=K)
    Z = fmap.transform(X)
    Z1 = np.hstack([Z, np.ones((N, 1))])
    F = Z @ W + b
    s = softmax_block(X, T, fmap.kernel_, W, b, tile_rows=128)
    assert s.hessian is None and s.n == N and s.loss.shape == (K,) and s.grad.shape == (M + 1, K)
    np.testing.assert_allclose(s.loss.sum(), np.sum(logsumexp(F, axis=1) - F[np.arange(N), y]), rtol=1e-12)
    np.testing.assert_allclose(s.grad, Z1.T @ (softmax(F, axis=1) - np.eye(K)[y]), rtol=1e-10, atol=1e-10)
    # the tiles and threads do not change the sums beyond rounding
    s2 = softmax_block(X, T, fmap.kernel_, W, b, tile_rows=5000)
    np.testing.assert_allclose(s2.grad, s.grad, rtol=1e-12, atol=1e-12)
    # the Hessian-vector product against the dense Kronecker Hessian
    V = rng.normal(size=(M + 1, K))
    hv = softmax_hvp_block(X[:300], T[:300], fmap.kernel_, W, b, V, tile_rows=64)
    H = dense_hessian(Z1[:300], F[:300])
    np.testing.assert_allclose(hv.ravel(), H @ V.ravel(), rtol=1e-10, atol=1e-10)


def test_gradient_and_hvp_match_finite_differences(data):
    X, y, T, fmap = data
    X, T = X[:200], T[:200]
    rng = np.random.default_rng(2)
    W, b = 0.3 * rng.normal(size=(M, K)), rng.normal(size=K)
    V = rng.normal(size=(M + 1, K))
    h = 1e-6
    kern = fmap.kernel_

    def at(step: float):
        P = np.vstack([W, b]) + step * V
        return softmax_block(X, T, kern, P[:M], P[M])

    s0, sp, sm = at(0.0), at(h), at(-h)
    # directional derivative of the loss = grad . V; of the gradient = H V
    assert (sp.loss.sum() - sm.loss.sum()) / (2 * h) == pytest.approx(float(np.sum(s0.grad * V)), rel=1e-7)
    hv = softmax_hvp_block(X, T, kern, W, b, V)
    np.testing.assert_allclose((sp.grad - sm.grad) / (2 * h), hv, rtol=1e-6, atol=1e-6)


# -- solvers against scikit-learn ---------------------------------------------------------------


@pytest.fixture(scope="module")
def sklearn_ref(data):
    X, y, _, fmap = data
    Z = fmap.transform(X)
    sk = LogisticRegression(C=1.0 / (N * ALPHA), solver="lbfgs", tol=1e-12, max_iter=10_000).fit(Z, y)
    return Z, sk, objective(Z, y, sk.coef_.T, sk.intercept_, ALPHA)


@pytest.mark.parametrize("solver", ["lbfgs", "newton-cg"])
def test_matches_sklearn_multinomial(data, sklearn_ref, solver):
    X, y, T, fmap = data
    Z, sk, L_sk = sklearn_ref
    res = fit_multinomial(X, T, fmap, alpha=ALPHA, solver=solver, tol=1e-10, max_iter=1000)
    assert res.converged and res.solver == solver and res.n_passes >= res.n_iter
    L = objective(Z, y, res.coef, res.intercept, ALPHA)
    assert res.loss == pytest.approx(L, rel=1e-9)
    assert abs(L - L_sk) <= 1e-6 * abs(L_sk)
    P = softmax(Z @ res.coef + res.intercept, axis=1)
    assert np.max(np.abs(P - sk.predict_proba(Z))) <= 1e-4
    assert abs(res.intercept.sum()) < 1e-12  # centred: the softmax leaves a common shift free
    # the estimator: the same fit, probabilities that sum to one
    clf = dxrf.RandomFeatureClassifier(fmap, loss="multinomial", alpha=ALPHA, solver=solver, tol=1e-10, max_iter=1000)
    clf.fit(X, y)
    assert clf.coef_.shape == (K, M) and clf.decision_function(X).shape == (N, K)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-14)
    assert np.max(np.abs(proba - sk.predict_proba(Z))) <= 1e-4
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmax(proba, axis=1)])
    assert clf.score(X, y) == pytest.approx(sk.score(Z, y), abs=2 / N)
    assert clf.solver_ == solver and clf.converged_ and clf.hessian_rows_ == 0 and clf.n_passes_ >= 2


def test_float32_features_reach_the_same_optimum(data):
    X, y, T, _ = data
    f32 = dxrf.RandomFourierFeatures(M, bandwidth=2.0, dtype="float32", random_state=0).fit(X)
    kern = f32.kernel_
    Z = kern.raw(X).astype(np.float64) * kern.scale  # the features a pass sees
    sk = LogisticRegression(C=1.0 / (N * ALPHA), solver="lbfgs", tol=1e-12, max_iter=10_000).fit(Z, y)
    L_sk = objective(Z, y, sk.coef_.T, sk.intercept_, ALPHA)
    for solver in ("lbfgs", "newton-cg"):
        res = fit_multinomial(X, T, f32, alpha=ALPHA, solver=solver, tol=1e-9, max_iter=1000)
        assert abs(objective(Z, y, res.coef, res.intercept, ALPHA) - L_sk) <= 1e-6 * L_sk, solver


def test_two_classes_store_one_score(data):
    """The softmax of two scores is the binary logistic model at half the penalty (alpha/4 |W1 - W0|^2)."""
    X, y, _, fmap = data
    y2 = (y >= 2).astype(int)
    clf = dxrf.RandomFeatureClassifier(fmap, loss="multinomial", alpha=ALPHA, tol=1e-10, max_iter=1000).fit(X, y2)
    assert clf.coef_.shape == (1, M) and clf.intercept_.shape == (1,) and clf.decision_function(X).shape == (N,)
    binary = dxrf.RandomFeatureClassifier(fmap, loss="logistic", alpha=ALPHA / 2, tol=1e-10).fit(X, y2)
    np.testing.assert_allclose(clf.coef_, binary.coef_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(clf.predict_proba(X), binary.predict_proba(X), atol=1e-6)


def test_without_intercept(data):
    X, y, T, fmap = data
    Z = fmap.transform(X)
    sk = LogisticRegression(C=1.0 / (N * ALPHA), fit_intercept=False, tol=1e-12, max_iter=10_000).fit(Z, y)
    res = fit_multinomial(X, T, fmap, alpha=ALPHA, fit_intercept=False, tol=1e-10, max_iter=1000)
    assert np.all(res.intercept == 0.0)
    P = softmax(Z @ res.coef, axis=1)
    assert np.max(np.abs(P - sk.predict_proba(Z))) <= 1e-4


# -- dask, a real cluster, zarr, persistence ----------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_on_a_local_cluster_from_zarr_equals_numpy(tmp_path, data, cluster2):
    """A few iterations (passes on a shared machine are slow): the same iterates from zarr on a cluster."""
    X, y, T, fmap = data
    xpath, tpath = str(tmp_path / "X.zarr"), str(tmp_path / "T.zarr")
    zarr.create_array(xpath, shape=X.shape, chunks=(300, D), dtype="float64")[:] = X
    zarr.create_array(tpath, shape=T.shape, chunks=(500, K), dtype="int8")[:] = T
    for solver, iters in (("lbfgs", 8), ("newton-cg", 2)):
        ref = fit_multinomial(X, T, fmap, alpha=ALPHA, solver=solver, max_iter=iters)
        with Client(cluster2):
            res = fit_multinomial(da.from_zarr(xpath), da.from_zarr(tpath), fmap, alpha=ALPHA, solver=solver, max_iter=iters)
        # sums over other blocks round differently; the iterates agree far below the solver's progress
        assert res.n_iter == ref.n_iter == iters and res.n_passes == ref.n_passes, solver
        assert res.loss == pytest.approx(ref.loss, rel=1e-10)
        np.testing.assert_allclose(res.coef, ref.coef, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(res.intercept, ref.intercept, rtol=1e-7, atol=1e-9)
    # the estimator on dask input: lazy probabilities that sum to one
    with Client(cluster2):
        clf = dxrf.RandomFeatureClassifier(fmap, loss="multinomial", alpha=ALPHA, max_iter=5)
        clf.fit(da.from_zarr(xpath), y)
        proba = clf.predict_proba(da.from_zarr(xpath))
        assert isinstance(proba, da.Array)
        proba = proba.compute()
    ref = fit_multinomial(X, T, fmap, alpha=ALPHA, max_iter=5)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(proba, softmax(fmap.transform(X) @ ref.coef + ref.intercept, axis=1), atol=1e-8)


def test_bad_dask_labels_fail_inside_the_pass(data):
    X, _, T, fmap = data
    T = T.copy()
    T[700] = -1  # no class
    with pytest.raises(ValueError, match="row 700 has 0 columns at \\+1"):
        fit_multinomial(da.from_array(X, chunks=(400, D)), da.from_array(T, chunks=(400, K)), fmap, alpha=ALPHA)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_save_and_load(tmp_path, data):
    X, y, _, fmap = data
    clf = dxrf.RandomFeatureClassifier(fmap, loss="multinomial", alpha=ALPHA, max_iter=50).fit(X, y)
    path = tmp_path / "softmax.model"
    clf.save(path)
    loaded = dxrf.load(path)
    assert loaded.loss == "multinomial" and loaded.solver_ == "lbfgs" and loaded.n_iter_ == clf.n_iter_
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_predict_proba_is_stable_for_huge_scores(data):
    X, y, _, fmap = data
    clf = dxrf.RandomFeatureClassifier(fmap, loss="multinomial", alpha=ALPHA, max_iter=20).fit(X, y)
    clf.coef_ = clf.coef_ * 1e6  # scores far beyond exp's range
    proba = clf.predict_proba(X)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-14)
    log_proba = clf.predict_log_proba(X[:50])
    assert log_proba.shape == (50, K) and np.all(np.isfinite(log_proba))
    np.testing.assert_allclose(np.exp(log_proba), proba[:50], rtol=1e-12, atol=1e-300)


#: checks that call partial_fit, which needs the squared loss: a clear ValueError, by design (strict xfail)
_PARTIAL_FIT_CHECKS = {
    name: "partial_fit needs loss='squared' (statistics that add up)"
    for name in ("check_fit_score_takes_y", "check_n_features_in_after_fitting", "check_estimators_partial_fit_n_features")
}


@parametrize_with_checks(
    [
        dxrf.RandomFeatureClassifier(
            dxrf.RandomFourierFeatures(50, bandwidth="median", random_state=0, dtype="float64"), loss="multinomial"
        ),
        dxrf.RandomFeatureClassifier(loss="multinomial", solver="newton-cg"),
    ],
    expected_failed_checks=lambda est: {**_PARTIAL_FIT_CHECKS, **weight_xfails(est)},
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# -- bad input ------------------------------------------------------------------------------------


def test_bad_parameters_are_named(data):
    X, y, T, fmap = data
    with pytest.raises(ValueError, match="'squared', 'logistic', 'multinomial'"):
        dxrf.RandomFeatureClassifier(loss="softmax").fit(X, y)
    assert "multinomial" in LOSSES
    with pytest.raises(ValueError, match="only one class: 3"):
        dxrf.RandomFeatureClassifier(fmap, loss="multinomial").fit(X, np.full(N, 3))
    with pytest.raises(ValueError, match="solver='newton' is not available for loss='multinomial'"):
        dxrf.RandomFeatureClassifier(fmap, loss="multinomial", solver="newton").fit(X, y)
    with pytest.raises(ValueError, match="alpha must be positive for loss='multinomial'"):
        dxrf.RandomFeatureClassifier(fmap, loss="multinomial", alpha=0.0).fit(X, y)
    with pytest.raises(ValueError, match="alphas .* for multinomial use alpha"):
        dxrf.RandomFeatureClassifier(fmap, loss="multinomial", alphas=[1e-3, 1e-2]).fit(X, y)
    with pytest.raises(ValueError, match="partial_fit needs loss='squared'"):
        dxrf.RandomFeatureClassifier(fmap, loss="multinomial").partial_fit(X, y, classes=np.arange(K))
    # the function: solver names, label layout, one-hot rows
    with pytest.raises(ValueError, match="'auto', 'lbfgs', 'newton-cg'"):
        fit_multinomial(X, T, fmap, alpha=ALPHA, solver="newton")
    with pytest.raises(ValueError, match="at least 2"):
        fit_multinomial(X, T[:, :1], fmap, alpha=ALPHA)
    T_bad = T.copy()
    T_bad[5] = 1
    with pytest.raises(ValueError, match="row 5 has 4 columns at \\+1"):
        fit_multinomial(X, T_bad, fmap, alpha=ALPHA)
    with pytest.raises(ValueError, match="labels T must be -1 or \\+1"):
        fit_multinomial(X, np.where(T > 0, 1, 0), fmap, alpha=ALPHA)
    with pytest.raises(ValueError, match="hessian_rows"):
        fit_multinomial(X, T, fmap, alpha=ALPHA, hessian_rows="all")


def test_binary_one_vs_rest_is_unchanged(data):
    """The logistic loss keeps its one-vs-rest problems (the passes now also serve softmax solvers)."""
    X, y, T, fmap = data
    Z = fmap.transform(X)
    res = fit_logistic(X, T, fmap, alpha=ALPHA, solver="lbfgs", tol=1e-10, max_iter=1000)
    for j in range(K):
        sk = LogisticRegression(C=1.0 / (N * ALPHA), tol=1e-12, max_iter=10_000).fit(Z, T[:, j] > 0)
        np.testing.assert_allclose(res.coef[:, j], sk.coef_[0], rtol=1e-4, atol=1e-5)


# -- the command line ----------------------------------------------------------------------------


def test_cli_fits_a_multinomial_model(tmp_path, cluster2):
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(3)
    X = rng.normal(size=(1500, 3))
    labels = np.array(["a", "b", "c"])[np.digitize(X[:, 0] + 0.3 * rng.normal(size=1500), [-0.5, 0.5])]
    for part, rows in (("train", slice(0, 1200)), ("test", slice(1200, None))):
        dxrf.io.write_zarr(X[rows], tmp_path / f"{part}.zarr", y=labels[rows], chunk_rows=400, classes=["a", "b", "c"])

    def run(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "dxrf.cli", *args, "--scheduler", cluster2.scheduler_address]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))

    model = tmp_path / "softmax.model"
    proc = run("fit", str(tmp_path / "train.zarr"), "--model", "multinomial", "--n-components", "30", "--alpha", "1e-3",
               "--out", str(model))
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = dxrf.load(model)
    assert loaded.loss == "multinomial" and loaded.coef_.shape == (3, 30)
    proc = run("evaluate", str(model), str(tmp_path / "test.zarr"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.split("accuracy:")[1].split()[0]) > 0.8
    # --alphas is a ridge path: refused in one line
    proc = run("fit", str(tmp_path / "train.zarr"), "--model", "multinomial", "--alphas", "1e-3,1e-2", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "dxrf: error:" in proc.stderr and "give --alpha for multinomial" in proc.stderr


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_search_refits_the_multinomial_loss(data):
    X, y, _, _ = data
    cv = dxrf.RandomFeatureClassifierCV(
        loss="multinomial", bandwidths=[1.0, 3.0], n_components=[20], alphas=[1e-3, 1e-2], cv=3, max_iter=1000,
        random_state=0,
    ).fit(X, y)
    assert cv.coef_.shape == (K, 20) and cv.solver_ == "lbfgs" and cv.converged_
    ref = fit_multinomial(X, np.where(y[:, None] == np.arange(K), 1, -1), cv.kernel_, alpha=cv.alpha_, tol=cv.tol, max_iter=1000)
    np.testing.assert_allclose(cv.coef_, ref.coef.T, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(cv.predict_proba(X).sum(axis=1), 1.0, rtol=1e-14)

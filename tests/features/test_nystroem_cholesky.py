"""Nyström features whitened by a Cholesky factor (``whitening="cholesky"``), and the large-M algebra around it."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import dxrf
from _weight_checks import CHECK, LANDMARKS
from dxrf.features import nystroem
from dxrf.kernels import exact
from dxrf.kernels.landmarks import inverse_cholesky
from dxrf.stats.feature_stats import FeatureStats


def data(n=500, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=n)
    return X, y


def test_inverse_cholesky_is_the_inverse_of_the_upper_factor():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(60, 50))
    K = A.T @ A + 0.1 * np.eye(50)
    T = inverse_cholesky(K)
    R = np.linalg.cholesky(K).T  # K = R^T R, R upper
    assert T.flags.c_contiguous and not np.tril(T, -1).any()
    assert np.abs(T - np.linalg.inv(R)).max() <= 1e-10 * np.abs(T).max()
    assert np.abs(T @ T.T @ K - np.eye(50)).max() <= 1e-9


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "cauchy"])
def test_features_match_dense_reference_and_span_the_eigh_features(kernel):
    X, y = data()
    chol = dxrf.NystroemFeatures(40, kernel=kernel, bandwidth=1.1, whitening="cholesky", random_state=3).fit(X)
    eig = dxrf.NystroemFeatures(40, kernel=kernel, bandwidth=1.1, random_state=3).fit(X)
    L = X[chol.landmark_indices_]
    assert np.array_equal(L, X[eig.landmark_indices_])
    K_LL = exact.gaussian_kernel(L, L, 1.1) if kernel == "gaussian" else (
        exact.laplacian_kernel(L, L, 1.1) if kernel == "laplacian" else exact.cauchy_kernel(L, L, 1.1))
    K_XL = {"gaussian": exact.gaussian_kernel, "laplacian": exact.laplacian_kernel,
            "cauchy": exact.cauchy_kernel}[kernel](X, L, 1.1)
    ref = K_XL @ np.linalg.inv(np.linalg.cholesky(K_LL).T)  # k(x, L) R^{-1}
    Z = chol.transform(X)
    assert np.abs(Z - ref).max() <= 1e-10 * np.abs(ref).max()
    # the same kernel approximation as the symmetric whitening (well conditioned here)
    Ze = eig.transform(X)
    assert np.abs(Z @ Z.T - Ze @ Ze.T).max() <= 1e-8
    # statistics: the triangular products give T^T G T of the dense features
    stats = dxrf.accumulate(X, y, chol, tile_rows=128)
    G = ref.T @ ref
    assert np.abs(stats.gram - G).max() <= 1e-10 * np.abs(G).max()
    assert np.array_equal(stats.gram, stats.gram.T)
    assert np.abs(stats.cross[:, 0] - ref.T @ y).max() <= 1e-10 * np.abs(ref.T @ y).max()


@pytest.mark.parametrize("learner", ["ridge", "classifier"])
def test_learners_predict_as_with_the_symmetric_whitening(learner):
    X, y = data(700)
    make = {
        "ridge": lambda f: dxrf.RandomFeatureRidge(f, alpha=1e-4),
        "classifier": lambda f: dxrf.RandomFeatureClassifier(f, alpha=1e-4),
    }[learner]
    target = y if learner == "ridge" else np.digitize(y, np.quantile(y, [0.33, 0.66]))
    a = make(dxrf.NystroemFeatures(60, bandwidth=1.5, whitening="cholesky", random_state=0)).fit(X, target)
    b = make(dxrf.NystroemFeatures(60, bandwidth=1.5, random_state=0)).fit(X, target)
    if learner == "ridge":
        assert np.abs(a.predict(X) - b.predict(X)).max() <= 1e-7 * np.abs(b.predict(X)).max()
    else:
        assert np.abs(a.decision_function(X) - b.decision_function(X)).max() <= 1e-7
        assert np.array_equal(a.predict(X), b.predict(X))


def test_duplicate_landmarks_are_refused_with_advice():
    X = np.repeat(np.random.default_rng(0).normal(size=(5, 2)), 2, axis=0)
    with pytest.raises(ValueError, match="not positive definite.*whitening='eigh'"):
        dxrf.NystroemFeatures(bandwidth=1.0, landmarks=X, whitening="cholesky").fit(X)
    # the symmetric whitening thresholds the zero eigenvalues instead
    assert dxrf.NystroemFeatures(bandwidth=1.0, landmarks=X).fit(X).transform(X).shape == (10, 10)


def test_unknown_whitening_is_refused():
    with pytest.raises(ValueError, match="whitening must be one of"):
        dxrf.NystroemFeatures(5, whitening="svd").fit(np.zeros((10, 2)) + np.arange(10)[:, None])


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_triangular_transform_equals_dense_products(order, overwrite):
    rng = np.random.default_rng(2)
    m = 700  # several symmetrisation bands
    B = rng.normal(size=(900, m))
    G = B.T @ B
    T = np.array(np.triu(rng.normal(size=(m, m))) + 3 * np.eye(m), order=order)
    stats = FeatureStats(G.copy(), B.sum(axis=0), 900.0, B.T @ rng.normal(size=(900, 2)), np.ones(2), np.eye(2))
    ref = T.T @ G @ T
    out = stats.transformed(T, overwrite=overwrite)
    assert np.abs(out.gram - ref).max() <= 1e-12 * np.abs(ref).max()
    assert np.array_equal(out.gram, out.gram.T)
    assert np.allclose(out.sum, T.T @ B.sum(axis=0)) and np.allclose(out.cross, T.T @ stats.cross)
    if not overwrite:
        assert np.array_equal(stats.gram, G)  # the input is left alone


def test_blas_landmark_gram_equals_exact_distances(monkeypatch):
    rng = np.random.default_rng(4)
    W = rng.random((30, 2500))  # 2500 landmarks: several bands
    exact_K = exact.gaussian_kernel(W.T, None, 2.0)
    monkeypatch.setattr(nystroem, "_BLAS_GRAM_WORK", 0)
    K = nystroem.landmark_gram(W, "gaussian", 2.0)
    assert np.abs(K - exact_K).max() <= 1e-12
    assert np.all(np.diag(K) == 1.0)


def test_save_load_keeps_the_cholesky_whitening(tmp_path):
    X, y = data()
    model = dxrf.RandomFeatureRidge(dxrf.NystroemFeatures(30, bandwidth=1.0, whitening="cholesky", random_state=1),
                                    alpha=1e-3).fit(X, y)
    model.save(tmp_path / "m")
    back = dxrf.load(tmp_path / "m")
    assert back.features_.whitening == "cholesky"
    assert np.array_equal(back.kernel_.whitening, model.kernel_.whitening)
    assert np.array_equal(back.predict(X), model.predict(X))


# the checks' rows repeat; the landmark race counts equal rows once, so the Cholesky whitening
# sees distinct landmarks and passes the sample-weight checks as well
@parametrize_with_checks(
    [dxrf.NystroemFeatures(n_components=3, bandwidth=1.0, whitening="cholesky", random_state=0)],
    expected_failed_checks=lambda est: {CHECK: LANDMARKS},
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_penalty_path_and_alpha_zero_with_the_cholesky_whitening():
    X, y = data(600)
    grid = [1e-6, 1e-4, 1e-2]
    a = dxrf.RandomFeatureRidge(dxrf.NystroemFeatures(50, bandwidth=1.5, whitening="cholesky", random_state=0),
                                alphas=grid).fit(X, y)
    b = dxrf.RandomFeatureRidge(dxrf.NystroemFeatures(50, bandwidth=1.5, random_state=0), alphas=grid).fit(X, y)
    assert a.alpha_ == b.alpha_
    assert np.allclose(a.validation_errors_, b.validation_errors_, rtol=1e-6)
    assert np.abs(a.predict(X) - b.predict(X)).max() <= 1e-6
    # the landmark-basis solve reports the exact training error of its model
    c = dxrf.RandomFeatureRidge(dxrf.NystroemFeatures(50, bandwidth=1.5, whitening="cholesky", random_state=0),
                                alpha=1e-4).fit(X, y)
    assert np.isclose(c.train_mse_, np.mean((c.predict(X) - y) ** 2), rtol=1e-8)
    # alpha = 0 is solved too (N > M: the covariance is positive definite)
    d = dxrf.RandomFeatureRidge(dxrf.NystroemFeatures(50, bandwidth=1.5, whitening="cholesky", random_state=0),
                                alpha=0.0).fit(X, y)
    assert np.isclose(d.train_mse_, np.mean((d.predict(X) - y) ** 2), rtol=1e-6)


@pytest.mark.parametrize("learner", ["ridge", "classifier"])
def test_landmark_basis_solve_weights_equal_repeated_rows(learner):
    X, y = data(300)
    w = np.random.default_rng(5).integers(0, 4, size=300)
    target = y if learner == "ridge" else (y > np.median(y)).astype(int)
    landmarks = X[:40]
    make = {
        "ridge": lambda: dxrf.RandomFeatureRidge(
            dxrf.NystroemFeatures(bandwidth=1.5, landmarks=landmarks, whitening="cholesky"), alpha=1e-4),
        "classifier": lambda: dxrf.RandomFeatureClassifier(
            dxrf.NystroemFeatures(bandwidth=1.5, landmarks=landmarks, whitening="cholesky"), alpha=1e-4),
    }[learner]
    a = make().fit(X, target, sample_weight=w)
    b = make().fit(np.repeat(X, w, axis=0), np.repeat(target, w))
    assert np.abs(np.ravel(a.coef_) - np.ravel(b.coef_)).max() <= 1e-8 * np.abs(b.coef_).max()
    assert np.allclose(a.intercept_, b.intercept_, rtol=0, atol=1e-8)

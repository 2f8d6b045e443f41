"""Nyström features whitened by a pivoted Cholesky factor (``whitening="pivoted"``), and the search's use of it."""

from __future__ import annotations

import numpy as np
import pytest

import dxrf
from dxrf.kernels import exact
from dxrf.kernels.landmarks import eigen_cutoff, inverse_pivoted, largest_eigenvalue
from dxrf.solvers.ridge_path import ridge_path


def test_largest_eigenvalue_by_power_iteration():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    K = exact.gaussian_kernel(X, None, 1.5)
    assert largest_eigenvalue(K) == pytest.approx(np.linalg.eigvalsh(K).max(), rel=1e-6)
    assert largest_eigenvalue(np.zeros((4, 4))) == 0.0


def test_a_well_conditioned_kernel_keeps_every_landmark_and_whitens_exactly():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(80, 60))
    K = A.T @ A / 80 + 0.5 * np.eye(60)
    T = inverse_pivoted(K, np.float64)
    np.testing.assert_allclose(T.T @ K @ T, np.eye(60), atol=1e-10)  # every feature kept, orthonormal
    np.testing.assert_allclose(T @ T.T, np.linalg.inv(K), rtol=1e-8, atol=1e-10)


def test_a_nearly_singular_kernel_drops_the_landmarks_the_others_explain():
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, size=(150, 2))
    X = np.vstack([X, X[:30] + 1e-9])  # 30 near duplicates
    K = exact.gaussian_kernel(X, None, 2.0)
    T = inverse_pivoted(K, np.float64)
    kept = np.flatnonzero(np.abs(T).sum(axis=1))
    r = kept.size
    assert r < 150 and not np.abs(T[:, r:]).any()  # dropped: zero rows, and M - r zero features
    np.testing.assert_allclose(T[:, :r].T @ K @ T[:, :r], np.eye(r), atol=1e-6)
    # the kept landmarks explain every landmark's kernel column to within the cutoff's scale
    lam_top = np.linalg.eigvalsh(K).max()
    residual = K - K @ T @ T.T @ K
    assert np.abs(residual).max() < 1e3 * eigen_cutoff(np.array([lam_top]), np.float64)


def test_pivoted_features_give_the_eigh_model_when_nothing_is_dropped():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 4))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=600)
    kw = dict(bandwidth=0.7, dtype="float64", random_state=0)
    piv = dxrf.RandomFeatureRidge(dxrf.NystroemFeatures(60, whitening="pivoted", **kw), alpha=1e-5).fit(X, y)
    eig = dxrf.RandomFeatureRidge(dxrf.NystroemFeatures(60, whitening="eigh", **kw), alpha=1e-5).fit(X, y)
    assert piv.features_.whitening == "pivoted"
    np.testing.assert_allclose(piv.predict(X), eig.predict(X), rtol=1e-6, atol=1e-8)


def test_statistics_validate_as_the_rows_score_with_pivoted_whitening():
    # the nearly singular landmark kernel of ARD-like lengthscales (see test_nystroem.py's eigh twin)
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, size=(3000, 6))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.normal(size=3000)
    ls = np.array([0.8, 0.8, 1e4, 3e3, 1e4, 5e3])
    f = dxrf.NystroemFeatures(300, bandwidth=ls, whitening="pivoted", dtype="float64", random_state=0).fit(X[:2000])
    assert np.abs(f.kernel_.whitening).sum(axis=0).astype(bool).sum() < 250  # landmarks dropped
    train = dxrf.accumulate(X[:2000], y[:2000], f)
    valid = dxrf.accumulate(X[2000:], y[2000:], f)
    path = ridge_path(train, np.logspace(-10, 0, 11), valid)
    Z = f.transform(X[2000:])
    direct = np.array([np.mean((Z @ c[:, 0] + b[0] - y[2000:]) ** 2) for c, b in zip(path.coefs, path.intercepts)])
    assert np.all(np.isfinite(path.validation_mse[:, 0]))
    np.testing.assert_allclose(path.validation_mse[:, 0], direct, rtol=1e-4)
    assert direct.min() < 0.01


def test_the_search_whitens_many_landmarks_by_pivoting_and_refits_that_map(monkeypatch):
    from dxrf.search import landmarks as search_landmarks

    monkeypatch.setattr(search_landmarks, "PIVOTED_MIN_LANDMARKS", 100)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.05 * rng.normal(size=1500)
    search = dxrf.RandomFeatureRidgeCV(bandwidths=[1.0], n_components=[50, 200], alphas=[1e-6, 1e-3], features="nystroem",
                                       cv=0.25, random_state=0).fit(X, y)
    assert search.best_params_["n_components"] == 200
    assert search.features_.whitening == "pivoted"
    # the refitted model is NystroemFeatures(whitening="pivoted") on the same landmarks, fitted afresh
    same = dxrf.NystroemFeatures(bandwidth=1.0, landmarks=search.features_.landmarks_, whitening="pivoted",
                                 dtype="float64").fit(X)
    np.testing.assert_array_equal(same.kernel_.whitening, search.features_.kernel_.whitening)
    direct = dxrf.RandomFeatureRidge(same, alpha=search.alpha_).fit(X, y)
    np.testing.assert_allclose(search.predict(X), direct.predict(X), atol=1e-4)  # two solvers at a small alpha


@pytest.mark.parametrize("duplicates", [0, 3])
def test_pivoted_whitening_statistics_take_the_triangular_congruence(duplicates):
    """A pivoted whitening's ``T^T G T`` is computed on its kept block and equals the dense products."""
    from dxrf.stats.feature_stats import FeatureStats, permuted_triangular

    rng = np.random.default_rng(4)
    L = rng.standard_normal((60, 3))
    L[60 - duplicates :] = L[:duplicates]  # duplicate landmarks: their rows of T are zero
    K = exact.gaussian_kernel(L, L, 1.3)
    T = inverse_pivoted(K, np.float64)
    found = permuted_triangular(T)
    assert found is not None
    rows, U = found
    assert rows.size <= 60 - duplicates and np.array_equal(T[rows, : rows.size], U)
    Z = rng.standard_normal((200, 60))
    y = rng.standard_normal((200, 2))
    stats = FeatureStats(Z.T @ Z, Z.sum(0), 200, Z.T @ y, y.sum(0), y.T @ y)
    out = stats.transformed(T)
    ref = T.T @ (Z.T @ Z) @ T
    np.testing.assert_allclose(out.gram, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    assert np.array_equal(out.gram, out.gram.T)
    np.testing.assert_allclose(out.cross, T.T @ Z.T @ y, rtol=1e-12, atol=1e-12)


def test_other_matrices_are_not_taken_for_pivoted_whitenings():
    from dxrf.stats.feature_stats import permuted_triangular

    rng = np.random.default_rng(5)
    assert permuted_triangular(rng.standard_normal((5, 5))) is None  # dense
    U = np.triu(rng.standard_normal((5, 5)) + 3)
    U[1, 3] = 0.0  # an exact zero inside the triangle: the order is ambiguous, so dense
    assert permuted_triangular(U[[2, 0, 4, 1, 3]]) is None
    assert permuted_triangular(np.zeros((4, 4))) is None
    assert permuted_triangular(rng.standard_normal((5, 3))) is None  # not square

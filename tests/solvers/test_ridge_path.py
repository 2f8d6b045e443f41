"""Ridge solves from statistics against dense NumPy ridge on explicit features."""

import importlib

import numpy as np
import pytest

import dxrf
from dxrf.learners import mse_from_stats, ridge_path, solve_ridge
from dxrf.stats.accumulation import accumulate


def dense_ridge(Z, Y, alpha, fit_intercept=True):
    n = Z.shape[0]
    if fit_intercept:
        zm, ym = Z.mean(0), Y.mean(0)
        Zc, Yc = Z - zm, Y - ym
    else:
        zm, ym, Zc, Yc = np.zeros(Z.shape[1]), np.zeros(Y.shape[1]), Z, Y
    coef = np.linalg.solve(Zc.T @ Zc / n + alpha * np.eye(Z.shape[1]), Zc.T @ Yc / n)
    return coef, ym - zm @ coef


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridge_path_matches_dense_ridge(fit_intercept):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    Y = np.column_stack([np.cos(X[:, 0]) + 3.0, X[:, 1] * X[:, 2]]) + 0.05 * rng.normal(size=(2000, 2))
    fmap = dxrf.RandomFourierFeatures(100, bandwidth=2.0, dtype="float64", random_state=0).fit(X)
    train, valid = accumulate(X, Y, fmap, split=0.3)
    mask = dxrf.stats.accumulation.hashed_split(0, 2000, 0.3)
    Z = fmap.transform(X)
    alphas = np.array([1e-6, 1e-4, 1e-2, 1.0])
    path = ridge_path(train, alphas, valid, fit_intercept=fit_intercept)
    for i, a in enumerate(alphas):
        coef, b = dense_ridge(Z[~mask], Y[~mask], a, fit_intercept)
        assert np.linalg.norm(path.coefs[i] - coef) / np.linalg.norm(coef) < 1e-8
        assert np.allclose(path.intercepts[i], b, rtol=1e-8, atol=1e-10)
        c2, b2 = solve_ridge(train, a, fit_intercept)
        assert np.linalg.norm(c2 - coef) / np.linalg.norm(coef) < 1e-8
        pred = Z[mask] @ coef + b
        mse = ((Y[mask] - pred) ** 2).mean(axis=0)
        np.testing.assert_allclose(path.validation_mse[i], mse, rtol=1e-8)
        np.testing.assert_allclose(mse_from_stats(valid, coef, b), mse, rtol=1e-8)
    assert path.best_index in range(4)


def test_bad_alphas():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    stats = accumulate(X, X[:, 0], dxrf.RandomFourierFeatures(10, random_state=0))
    with pytest.raises(ValueError, match="alphas"):
        ridge_path(stats, [-1.0])
    with pytest.raises(ValueError, match="alpha"):
        solve_ridge(stats, -1.0)
    with pytest.raises(ValueError, match="without targets"):
        solve_ridge(accumulate(X, features=dxrf.RandomFourierFeatures(10, random_state=0)), 1.0)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_large_paths_factor_each_penalty_and_agree_with_the_eigendecomposition(monkeypatch, fit_intercept):
    """From FACTOR_EACH_MIN_FEATURES features a short path is one Cholesky per penalty: the same solutions."""
    rp = importlib.import_module("dxrf.solvers.ridge_path")  # the module (the package exports the function)

    rng = np.random.default_rng(1)
    X = rng.normal(size=(1500, 4))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2]) + 0.05 * rng.normal(size=(1500, 2))
    fmap = dxrf.RandomFourierFeatures(120, bandwidth=1.5, dtype="float64", random_state=0).fit(X)
    train, valid = accumulate(X, Y, fmap, split=0.3)
    alphas = np.array([1e-8, 1e-5, 1e-2])
    by_eigh = ridge_path(train, alphas, valid, fit_intercept=fit_intercept)
    monkeypatch.setattr(rp, "FACTOR_EACH_MIN_FEATURES", 100)
    by_cholesky = ridge_path(train, alphas, valid, fit_intercept=fit_intercept)
    assert rp._factor_each(120, alphas) and not rp._factor_each(120, np.array([0.0, 1.0]))
    assert not rp._factor_each(120, np.logspace(-8, 0, rp.FACTOR_EACH_MAX_PENALTIES + 1))
    rows = ~dxrf.stats.accumulation.hashed_split(0, 1500, 0.3)
    for i, a in enumerate(alphas):
        coef, _ = dense_ridge(fmap.transform(X)[rows], Y[rows], a, fit_intercept)
        scale = np.linalg.norm(coef)
        assert np.linalg.norm(by_cholesky.coefs[i] - coef) / scale < 1e-7
        assert np.linalg.norm(by_cholesky.coefs[i] - by_eigh.coefs[i]) / scale < 1e-7
    np.testing.assert_allclose(by_cholesky.validation_mse, by_eigh.validation_mse, rtol=1e-7)
    np.testing.assert_allclose(by_cholesky.intercepts, by_eigh.intercepts, rtol=1e-7, atol=1e-10)


def test_a_failed_factorisation_hands_the_path_to_the_eigendecomposition():
    rp = importlib.import_module("dxrf.solvers.ridge_path")  # the module (the package exports the function)

    C = np.ones((3, 3))  # exactly singular: a penalty below its rounding leaves a zero pivot
    c = np.array([[1.0], [1.0], [1.0]])
    assert rp._factored_path(C, c, np.array([1.0, 1e-300])) is None
    solved = rp._factored_path(C, c, np.array([1.0]))
    np.testing.assert_allclose(solved[0], np.linalg.solve(C + np.eye(3), c), rtol=1e-12)


def test_mse_from_stats_quadratic_forms_equal_the_dense_sums():
    """The validation error's ``c^T G c`` and its rounding bound, by one product, equal the plain sums."""
    from dxrf.solvers.ridge_path import _quadratic_forms

    rng = np.random.default_rng(8)
    G = rng.standard_normal((2100, 2100))  # more rows than one band of the absolute form
    G = G + G.T
    coef = rng.standard_normal((3, 2100, 4))
    np.testing.assert_allclose(_quadratic_forms(G, coef), np.einsum("pmk,mj,pjk->pk", coef, G, coef), rtol=1e-10)
    a = np.abs(coef)
    np.testing.assert_allclose(_quadratic_forms(G, a, absolute=True), np.einsum("pmk,mj,pjk->pk", a, np.abs(G), a),
                               rtol=1e-12)
    assert _quadratic_forms(G, coef[0]).shape == (4,)

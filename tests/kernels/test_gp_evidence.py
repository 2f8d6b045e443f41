"""The exact GP evidence of Gaussian ARD (dxrf.kernels.gp): value, gradient, weights, the fit, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

from dxrf.kernels.gp import MIN_ROWS, NotPositiveDefinite, fit_ard, log_marginal_likelihood


def dense_reference(theta, X, Y, w=None):
    """The textbook formulas with dense inverses and one dK/dtheta per parameter (R&W eq. 5.8-5.9)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(X.shape[0], -1)
    n, d = X.shape
    ell, s2, noise = np.exp(theta[:d]), np.exp(theta[d]), np.exp(theta[d + 1])
    w = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
    diff2 = ((X[:, None, :] - X[None, :, :]) / ell) ** 2  # n x n x d
    Kf = s2 * np.exp(-0.5 * diff2.sum(-1))
    N = np.diag(noise / w)
    K = Kf + N
    Kinv = np.linalg.inv(K)
    sign, logdet = np.linalg.slogdet(K)
    assert sign > 0
    k = Y.shape[1]
    value = sum(-0.5 * y @ Kinv @ y for y in Y.T) - 0.5 * k * logdet - 0.5 * k * n * np.log(2 * np.pi)
    dKs = [Kf * diff2[:, :, j] for j in range(d)] + [Kf, N]
    grad = np.zeros(d + 2)
    for p, dK in enumerate(dKs):
        for y in Y.T:
            a = Kinv @ y
            grad[p] += 0.5 * (a @ dK @ a) - 0.5 * np.trace(Kinv @ dK)
    return value, grad


def data(n=120, d=4, seed=0, offset=3.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.3, 3.0, size=d) + offset
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y, rng


THETAS = [
    np.log([1.3, 2.0, 0.7, 3.0, 1.5, 0.05]),
    np.log([0.4, 10.0, 50.0, 0.9, 0.2, 1e-3]),
    np.log([5.0, 5.0, 5.0, 5.0, 3.0, 0.5]),
]


@pytest.mark.parametrize("theta", THETAS)
@pytest.mark.parametrize("k", [1, 3])
def test_value_and_gradient_equal_dense_reference(theta, k):
    X, y, rng = data()
    Y = y[:, None] if k == 1 else np.c_[y, rng.normal(size=(y.size, k - 1))]
    value, grad = log_marginal_likelihood(theta, X, Y)
    ref_value, ref_grad = dense_reference(theta, X, Y)
    np.testing.assert_allclose(value, ref_value, rtol=1e-10)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-8, atol=1e-8 * np.abs(ref_grad).max())
    assert log_marginal_likelihood(theta, X, Y, eval_gradient=False) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("theta", THETAS)
@pytest.mark.parametrize("k", [1, 2])
def test_equals_scikit_learn_gaussian_process(theta, k):
    X, y, rng = data(seed=1)
    Y = y if k == 1 else np.c_[y, np.cos(X[:, 2])]
    d = X.shape[1]
    kernel = ConstantKernel(1.0) * RBF(np.ones(d)) + WhiteKernel(1.0)
    # alpha=0: no jitter of its own; normalize_y=False: zero prior mean, as ours
    gpr = GaussianProcessRegressor(kernel, alpha=0.0, optimizer=None, normalize_y=False).fit(X, Y)
    sk_theta = np.r_[theta[d], theta[:d], theta[d + 1]]  # sklearn: log s^2, log l, log sigma^2
    sk_value, sk_grad = gpr.log_marginal_likelihood(sk_theta, eval_gradient=True)
    value, grad = log_marginal_likelihood(theta, X, Y)
    np.testing.assert_allclose(value, sk_value, rtol=1e-8)
    np.testing.assert_allclose(np.r_[grad[d], grad[:d], grad[d + 1]], sk_grad, rtol=1e-8, atol=1e-8 * np.abs(sk_grad).max())


def test_gradient_equals_finite_differences():
    X, y, rng = data(seed=2)
    w = rng.uniform(0.2, 3.0, size=y.size)
    theta = np.log([0.8, 2.5, 1.7, 4.0, 1.2, 0.08])
    _, grad = log_marginal_likelihood(theta, X, y, w)
    fd = approx_fprime(theta, lambda t: log_marginal_likelihood(t, X, y, w, eval_gradient=False), 1e-6)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5 * np.abs(grad).max())


def test_weights_are_heteroscedastic_noise():
    X, y, rng = data(seed=3)
    w = rng.uniform(0.1, 5.0, size=y.size)
    theta = np.log([1.1, 1.9, 0.6, 2.2, 0.8, 0.2])
    value, grad = log_marginal_likelihood(theta, X, y, w)
    ref_value, ref_grad = dense_reference(theta, X, y, w)
    np.testing.assert_allclose(value, ref_value, rtol=1e-10)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-8, atol=1e-8 * np.abs(ref_grad).max())
    # unit weights are the homoscedastic likelihood; the weights change it
    assert log_marginal_likelihood(theta, X, y, np.ones(y.size))[0] == pytest.approx(log_marginal_likelihood(theta, X, y)[0], rel=1e-12)
    assert abs(value - log_marginal_likelihood(theta, X, y)[0]) > 1.0


def test_not_positive_definite_is_a_clear_error():
    X, y, _ = data(n=60)
    X = np.r_[X, X]  # duplicated rows: singular without noise
    y = np.r_[y, y]
    theta = np.r_[np.zeros(X.shape[1]), 0.0, np.log(1e-300)]
    with pytest.raises(NotPositiveDefinite, match="not positive definite"):
        log_marginal_likelihood(theta, X, y)
    with pytest.raises(ValueError, match="d \\+ 2"):
        log_marginal_likelihood(np.zeros(3), X, y)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_irrelevant_columns_get_long_lengthscales(seed):
    rng = np.random.default_rng(seed)
    n = 250
    X = rng.uniform(-2, 2, size=(n, 5))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + np.cos(X[:, 2]) + 0.05 * rng.normal(size=n)
    fit = fit_ard(X, y, restarts=2, random_state=seed)
    relevant, irrelevant = fit.lengthscales[:3], fit.lengthscales[3:]
    assert irrelevant.min() >= 10 * relevant.max(), fit.lengthscales
    assert relevant.max() < 20  # the relevant ones stay in the data's range (|x| <= 2)
    assert 1e-4 < fit.noise < 0.05  # the noise variance 0.05^2 of y, standardised (y's variance is about 1)
    assert fit.n_iter > 0 and fit.n_eval >= fit.n_iter


def test_fit_standardises_labels_and_shares_lengthscales():
    rng = np.random.default_rng(4)
    n = 200
    X = rng.normal(size=(n, 3))
    labels = (X[:, 0] + 0.2 * rng.normal(size=n) > 0).astype(float) * 2 - 1  # +-1, column 2 irrelevant
    Y = np.c_[labels, -labels * 3 + 7]  # affinely related columns: the same standardised targets
    one = fit_ard(X, labels, random_state=0, restarts=1)
    two = fit_ard(X, Y, random_state=0, restarts=1)
    np.testing.assert_allclose(two.lengthscales, one.lengthscales, rtol=1e-4)
    assert two.log_likelihood == pytest.approx(2 * one.log_likelihood, rel=1e-6)
    np.testing.assert_allclose(two.y_mean, [labels.mean(), 7 - 3 * labels.mean()])
    assert one.lengthscales[2] > 10 * one.lengthscales[0]


def test_zero_weights_drop_rows():
    X, y, rng = data(n=150, seed=5)
    w = rng.uniform(0.5, 2.0, size=y.size)
    w[::3] = 0.0
    keep = w > 0
    a = fit_ard(X, y, w, random_state=0, restarts=1)
    b = fit_ard(X[keep], y[keep], w[keep] * 7.0, random_state=0, restarts=1)  # weights scaled to mean 1
    np.testing.assert_allclose(a.lengthscales, b.lengthscales, rtol=1e-6)
    assert a.noise == pytest.approx(b.noise, rel=1e-6)


def test_bad_input():
    X, y, _ = data(n=MIN_ROWS - 1)
    with pytest.raises(ValueError, match=f"at least {MIN_ROWS} rows"):
        fit_ard(X, y)
    X, y, _ = data(n=80)
    w = np.ones(80)
    w[: 80 - MIN_ROWS + 1] = 0.0
    with pytest.raises(ValueError, match="positive weight"):
        fit_ard(X, y, w)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        fit_ard(bad, y)
    with pytest.raises(ValueError, match="y contains NaN or infinity"):
        fit_ard(X, np.r_[np.inf, y[1:]])
    with pytest.raises(ValueError, match="sample_weight"):
        fit_ard(X, y, -w)
    with pytest.raises(ValueError, match="one entry"):
        fit_ard(X, y[:-1])


@pytest.mark.parametrize("value", [0.0, 0.010977102461391048, -3.7])
def test_a_column_constant_in_the_sample_keeps_a_sane_lengthscale(value):
    """A column the sample holds constant (as standardised data stores it: its std then ~1e-16, not 0) says
    nothing of its lengthscale: it starts and stays near a unit scale, never at the 1e-15 that bounds from its rounding allowed
    (elevators: two such columns zeroed the kernel between rows that differ there in the full data)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    X[:, 2] = value * (1 + 1e-16 * rng.integers(0, 2, size=300))  # equal up to rounding
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    res = fit_ard(X, y, random_state=0)
    # its bounds are those of a unit scale (1e-3 .. 1e5), its start sqrt(d): not the rounding's 1e-16 scale
    assert 0.5 < res.lengthscales[2] < 1e5
    assert res.lengthscales[0] < 10

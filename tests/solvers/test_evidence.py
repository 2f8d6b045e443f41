"""The evidence and posterior from statistics against dense Bayesian linear regression in NumPy."""

import numpy as np
import pytest

from dxrf.solvers.evidence import evidence_path, posterior, predictive_variance
from dxrf.solvers.ridge_path import ridge_path
from dxrf.stats.feature_stats import FeatureStats


def stats_of(Z, Y, w=None):
    w = np.ones(Z.shape[0]) if w is None else w
    Zw, Yw = Z * w[:, None], Y * w[:, None]
    return FeatureStats(Z.T @ Zw, Zw.sum(0), float(w.sum()), Zw.T @ Y, Yw.sum(0), Y.T @ Yw)


def dense_log_evidence(Z, y, w, lam, sigma2, fit_intercept):
    """log p(y) of y = Z theta + beta + eps, eps_n ~ N(0, sigma2 / w_n), theta ~ N(0, sigma2/lam I), beta flat.

    Marginal of theta: y | beta ~ N(1 beta, K); then beta integrated over a flat
    prior (the restricted likelihood): -1/2 y^T P y - 1/2 log|K| - 1/2 log(1^T K^-1 1) - (N-1)/2 log 2 pi.
    """
    n = Z.shape[0]
    K = sigma2 * (np.diag(1.0 / w) + Z @ Z.T / lam)
    Ki = np.linalg.inv(K)
    logdet = np.linalg.slogdet(K)[1]
    if not fit_intercept:
        return -0.5 * y @ Ki @ y - 0.5 * logdet - 0.5 * n * np.log(2 * np.pi)
    one = np.ones(n)
    a = one @ Ki @ one
    P = Ki - np.outer(Ki @ one, Ki @ one) / a
    return -0.5 * y @ P @ y - 0.5 * logdet - 0.5 * np.log(a) - 0.5 * (n - 1) * np.log(2 * np.pi)


def frequency_correction(w, sigma2):
    """dxrf's frequency weights (weight 2 = the row twice) against noise sigma2 / w_n: the two logs differ by this."""
    return -0.5 * np.log(w).sum() - 0.5 * (w.sum() - w.size) * np.log(2 * np.pi * sigma2)


def problem(seed=0, n=60, m=8, k=2):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, m)) / np.sqrt(m) + 0.3
    Y = Z @ rng.normal(size=(m, k)) + 0.7 + 0.3 * rng.normal(size=(n, k))
    return Z, Y, rng.uniform(0.5, 2.0, size=n)


ALPHAS = np.array([1e-4, 1e-2, 0.1, 1.0])


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_evidence_with_given_noise_equals_the_dense_formula(fit_intercept, weighted):
    Z, Y, w = problem()
    w = w if weighted else np.ones(Z.shape[0])
    W = w.sum()
    noise = np.array([0.09, 0.2])
    path = evidence_path(stats_of(Z, Y, w), ALPHAS, fit_intercept, noise=noise)
    for p, a in enumerate(ALPHAS):
        for j in range(Y.shape[1]):
            want = dense_log_evidence(Z, Y[:, j], w, a * W, noise[j], fit_intercept) + frequency_correction(w, noise[j])
            assert abs(path.log_evidence[p, j] - want) < 1e-10 * max(1.0, abs(want))
    assert np.array_equal(path.noise, np.broadcast_to(noise, (ALPHAS.size, 2)))


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_profiled_noise_maximises_the_dense_evidence(fit_intercept):
    Z, Y, w = problem(1)
    W = w.sum()
    path = evidence_path(stats_of(Z, Y, w), ALPHAS, fit_intercept)
    for p, a in enumerate(ALPHAS):
        for j in range(Y.shape[1]):
            s2 = path.noise[p, j]
            dense = lambda v: dense_log_evidence(Z, Y[:, j], w, a * W, v, fit_intercept) + frequency_correction(w, v)  # noqa: E731
            assert abs(path.log_evidence[p, j] - dense(s2)) < 1e-10 * abs(dense(s2))
            # a maximum: 1 % either side is lower
            assert dense(s2 * 1.01) < dense(s2) and dense(s2 * 0.99) < dense(s2)
            # sigma^2 = (weighted residuals + penalty) / (W - 1), the ridge objective at its minimum
            rp = ridge_path(stats_of(Z, Y, w), [a], fit_intercept=fit_intercept)
            r = Y[:, j] - Z @ rp.coefs[0][:, j] - rp.intercepts[0][j]
            objective = (w * r**2).sum() + a * W * (rp.coefs[0][:, j] ** 2).sum()
            assert abs(s2 - objective / (W - fit_intercept)) < 1e-10 * s2


def test_integer_weights_are_repeated_rows():
    Z, Y, _ = problem(2, n=30)
    w = np.random.default_rng(3).integers(1, 4, size=30).astype(float)
    rep = np.repeat(np.arange(30), w.astype(int))
    a = evidence_path(stats_of(Z, Y, w), ALPHAS)
    b = evidence_path(stats_of(Z[rep], Y[rep]), ALPHAS)
    assert np.allclose(a.log_evidence, b.log_evidence, rtol=1e-10, atol=0)
    assert np.allclose(a.noise, b.noise, rtol=1e-10, atol=0)


def test_posterior_and_predictive_variance_equal_the_dense_posterior():
    Z, Y, w = problem(4)
    W, a = w.sum(), 0.05
    stats = stats_of(Z, Y, w)
    post = posterior(stats, a)
    path = evidence_path(stats, [a])
    assert np.array_equal(post.log_evidence, path.log_evidence[0])
    assert np.array_equal(post.noise, path.noise[0])
    # dense joint posterior of [theta; beta]: precision (1/sigma2) (A^T diag(w) A + diag(lam,..,lam, 0))
    A = np.column_stack([Z, np.ones(Z.shape[0])])
    prec = A.T @ (A * w[:, None]) + np.diag(np.r_[np.full(Z.shape[1], a * W), 0.0])
    cov = np.linalg.inv(prec)  # times sigma2
    Zt = np.random.default_rng(5).normal(size=(7, Z.shape[1])) / 3 + 0.3
    At = np.column_stack([Zt, np.ones(7)])
    want = (1.0 + np.einsum("ni,ij,nj->n", At, cov, At))[:, None] * post.noise[None, :]
    quad = (((Zt - post.center) @ post.factor) ** 2).sum(axis=1)
    got = predictive_variance(quad, post.noise, post.sum_weight, True)
    assert np.allclose(got, want, rtol=1e-10, atol=0)
    # the posterior covariance of theta alone
    assert np.allclose(post.factor @ post.factor.T, cov[:-1, :-1], rtol=1e-10, atol=1e-14)


def test_alpha_zero_has_no_evidence_and_the_best_is_finite():
    Z, Y, _ = problem(6)
    path = evidence_path(stats_of(Z, Y), np.r_[0.0, ALPHAS])
    assert np.all(path.log_evidence[0] == -np.inf)
    assert path.best_index > 0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda s: evidence_path(s, [-1.0]), "alphas"),
        (lambda s: evidence_path(s, [1.0], noise=0.0), "noise"),
        (lambda s: evidence_path(s, [1.0], noise=[1.0, 2.0, 3.0]), "noise"),
        (lambda s: posterior(s, 0.0), "positive alpha"),
        (lambda s: evidence_path(FeatureStats(s.gram, s.sum, 1.0, s.cross, s.ysum, s.yy), [1.0]), "sample weight"),
        (lambda s: evidence_path(FeatureStats(s.gram, s.sum, s.n), [1.0]), "without targets"),
    ],
)
def test_bad_input(call, match):
    Z, Y, _ = problem(7)
    with pytest.raises(ValueError, match=match):
        call(stats_of(Z, Y))


def test_equals_scikit_learn_bayesian_ridge_at_fixed_hyperparameters():
    """BayesianRidge's log marginal likelihood (scores_[0]: at alpha_init, lambda_init, no hyperpriors).

    scikit-learn centres X and y and treats the centred rows as N independent ones; dxrf
    integrates the intercept out (N - 1 rows, and the -1/2 log W of the flat prior), so the
    two differ by exactly -1/2 log(2 pi sigma^2) + 1/2 log N.
    """
    from sklearn.linear_model import BayesianRidge

    Z, Y, _ = problem(8, n=80, m=6, k=1)
    y = Y[:, 0]
    noise_precision, weight_precision = 1 / 0.09, 2.0
    br = BayesianRidge(max_iter=1, compute_score=True, alpha_init=noise_precision, lambda_init=weight_precision,
                       alpha_1=0, alpha_2=0, lambda_1=0, lambda_2=0, tol=1e-300).fit(Z, y)
    n = len(y)
    # theta ~ N(0, 1/lambda_init) = N(0, sigma^2 / (alpha W)): alpha = lambda_init sigma^2 / W
    alpha = weight_precision / noise_precision / n
    ours = evidence_path(stats_of(Z, Y), [alpha], noise=1 / noise_precision).log_evidence[0, 0]
    want = br.scores_[0] + 0.5 * np.log(2 * np.pi / noise_precision) - 0.5 * np.log(n)
    assert abs(ours - want) < 1e-10 * abs(want)

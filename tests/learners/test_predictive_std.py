"""predict(return_std=True) and the evidence choice of the ridge learners, against dense Bayesian linear regression."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import zarr

import dxrf
from dxrf.core.errors import ModelFormatError
from dxrf.solvers.evidence import evidence_path


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    Y = np.column_stack([np.sin(2 * X[:, 0]) + X[:, 1] ** 2, np.cos(X[:, 2]) + 5.0]) + 0.1 * rng.normal(size=(600, 2))
    return X, Y, rng.uniform(0.5, 2.0, size=600)


def dense_predictive_std(Z, Y, w, alpha, Zt, fit_intercept=True):
    """sqrt(sigma2 (1 + a^T (A^T W A + diag(lambda, .., 0))^{-1} a)) with a = [z, 1], sigma2 the evidence's maximiser."""
    W = w.sum()
    A = np.column_stack([Z, np.ones(len(Z))]) if fit_intercept else Z
    pen = np.r_[np.full(Z.shape[1], alpha * W), [0.0] * fit_intercept]
    prec = A.T @ (A * w[:, None]) + np.diag(pen)
    theta = np.linalg.solve(prec, A.T @ (Y * w[:, None]))
    r = Y - A @ theta
    sigma2 = ((w[:, None] * r**2).sum(0) + alpha * W * (theta[: Z.shape[1]] ** 2).sum(0)) / (W - fit_intercept)
    At = np.column_stack([Zt, np.ones(len(Zt))]) if fit_intercept else Zt
    quad = np.einsum("ni,ij,nj->n", At, np.linalg.inv(prec), At)
    return np.sqrt((1.0 + quad)[:, None] * sigma2[None, :]), sigma2


def fourier():
    return dxrf.RandomFourierFeatures(60, bandwidth=1.5, dtype="float64", random_state=0)


@pytest.mark.parametrize("features", ["fourier", "nystroem"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_return_std_equals_the_dense_posterior(data, features, fit_intercept):
    X, Y, w = data
    fmap = fourier() if features == "fourier" else dxrf.NystroemFeatures(60, bandwidth=1.5, random_state=0)
    m = dxrf.RandomFeatureRidge(fmap, alpha=1e-3, fit_intercept=fit_intercept, store_posterior=True)
    m.fit(X, Y, sample_weight=w)
    Z = m.transform_features(X).astype(np.float64)
    mean, std = m.predict(X[:40], return_std=True)
    want, sigma2 = dense_predictive_std(Z, Y, w, 1e-3, Z[:40], fit_intercept)
    # Nystroem: transform whitens each row, the statistics their sums (DESIGN, Nystroem features),
    # so the two sides differ by the whitening's rounding (measured about 2e-9)
    rtol = 1e-10 if features == "fourier" else 1e-8
    assert np.allclose(m.noise_, sigma2, rtol=rtol, atol=0)
    assert np.allclose(std, want, rtol=rtol, atol=0)
    assert np.array_equal(mean, m.predict(X[:40]))
    # one output: 1-d mean and std, the evidence's noise as a float
    m1 = dxrf.RandomFeatureRidge(fmap, alpha=1e-3, fit_intercept=fit_intercept, store_posterior=True).fit(X, Y[:, 0], w)
    mean1, std1 = m1.predict(X[:40], return_std=True)
    assert mean1.shape == std1.shape == (40,) and isinstance(m1.noise_, float)
    assert np.allclose(std1, want[:, 0], rtol=rtol, atol=0)


def test_noise_without_the_posterior_and_the_search_refit(data):
    X, Y, w = data
    m = dxrf.RandomFeatureRidge(fourier(), alpha=1e-2).fit(X, Y, sample_weight=w)
    Z = m.transform_features(X)
    assert np.allclose(m.noise_, dense_predictive_std(Z, Y, w, 1e-2, Z[:1])[1], rtol=1e-9, atol=0)
    assert not hasattr(m, "posterior_factor_")
    with pytest.raises(ValueError, match="store_posterior=True"):
        m.predict(X, return_std=True)


def test_search_refit_keeps_the_posterior(data):
    X, Y, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a choice at a grid's edge
        m = dxrf.RandomFeatureRidgeCV(bandwidths=[1.0, 2.0], n_components=[40], alphas=[1e-4, 1e-2], dtype="float64",
                                      cv=3, random_state=0, store_posterior=True).fit(X, Y)
    Z = m.transform_features(X)
    _, std = m.predict(X[:20], return_std=True)
    want, sigma2 = dense_predictive_std(Z, Y, np.ones(len(X)), m.alpha_, Z[:20])
    assert np.allclose(std, want, rtol=1e-9, atol=0)
    assert np.allclose(m.noise_, sigma2, rtol=1e-9, atol=0)


def test_partial_fit_gives_the_fit_posterior(data):
    X, Y, _ = data
    full = dxrf.RandomFeatureRidge(fourier(), alpha=1e-3, store_posterior=True).fit(X, Y)
    part = dxrf.RandomFeatureRidge(fourier().fit(X), alpha=1e-3, store_posterior=True)
    for rows in np.array_split(np.arange(len(X)), 3):
        part.partial_fit(X[rows], Y[rows])
    assert np.allclose(part.predict(X[:30], return_std=True)[1], full.predict(X[:30], return_std=True)[1], rtol=1e-9)


def test_partial_fit_chooses_by_the_evidence_as_fit(data):
    X, Y, _ = data
    kw = dict(alphas=np.logspace(-8, 0, 9), validation="evidence")
    full = dxrf.RandomFeatureRidge(fourier(), **kw).fit(X, Y)
    part = dxrf.RandomFeatureRidge(fourier().fit(X), **kw)
    for rows in np.array_split(np.arange(len(X)), 3):
        part.partial_fit(X[rows], Y[rows])
    # the statistics summed in another order: about 1e-10 relative, amplified at the smallest alpha
    assert part.alpha_ == full.alpha_ and np.allclose(part.evidences_, full.evidences_, rtol=1e-9, atol=1e-6)
    assert np.isclose(part.log_evidence_, full.log_evidence_, rtol=1e-9, atol=1e-6)


def test_evidence_choice_of_alpha(data):
    X, Y, w = data
    alphas = np.logspace(-8, 0, 9)
    m = dxrf.RandomFeatureRidge(fourier(), alphas=alphas, validation="evidence").fit(X, Y, sample_weight=w)
    Z = m.transform_features(X)
    Zw = Z * w[:, None]
    stats = dxrf.FeatureStats(Z.T @ Zw, Zw.sum(0), w.sum(), Zw.T @ Y, (Y * w[:, None]).sum(0), Y.T @ (Y * w[:, None]))
    path = evidence_path(stats, alphas)
    assert np.allclose(m.evidences_, path.log_evidence.sum(1), rtol=1e-9, atol=0)
    assert m.alpha_ == alphas[np.argmax(path.log_evidence.sum(1))]
    assert m.log_evidence_ == m.evidences_[list(alphas).index(m.alpha_)]
    assert not hasattr(m, "validation_errors_")


@pytest.mark.parametrize("features", ["fourier", "nystroem"])
def test_search_by_evidence_is_near_the_cross_validated_choice(features):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2400, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=2400)
    Xt = rng.normal(size=(1000, 3))
    yt = np.sin(2 * Xt[:, 0]) + 0.5 * Xt[:, 1] * Xt[:, 2]
    kw = dict(features=features, bandwidths=[0.5, 1.0, 2.0, 4.0], n_components=[50, 200],
              alphas=np.logspace(-8, 0, 9), random_state=0, dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ev = dxrf.RandomFeatureRidgeCV(cv="evidence", **kw).fit(X, y)
        cv = dxrf.RandomFeatureRidgeCV(cv=5, **kw).fit(X, y)
    assert ev.n_splits_ == 1 and np.isnan(ev.cv_results_["mean_validation_mse"]).all()
    assert np.array_equal(ev.cv_results_["mean_test_evidence"], ev.cv_results_["mean_test_score"], equal_nan=True)
    assert ev.best_score_ == ev.log_evidence_
    # a band: within two decades of alpha and a factor 2 of bandwidth; the test error within 1.5 times
    # plus a tenth of the noise variance (measured over seeds 1-3, float32 and float64: at most 1.65 times)
    assert abs(np.log10(ev.alpha_ / cv.alpha_)) <= 2
    assert 0.5 <= ev.bandwidth_ / cv.bandwidth_ <= 2
    mse = lambda m: float(np.mean((m.predict(Xt) - yt) ** 2))  # noqa: E731
    assert mse(ev) <= 1.5 * mse(cv) + 0.1 * 0.1**2
    assert 0.5 * 0.1**2 < ev.noise_ < 2 * 0.1**2


def _to_zarr(path, a, rows):
    arr = zarr.create_array(str(path), shape=a.shape, chunks=(rows,) + a.shape[1:], dtype=a.dtype)
    arr[...] = a
    return da.from_zarr(str(path))


def test_dask_from_zarr_on_a_cluster_equals_numpy(data, client, tmp_path):
    X, Y, w = data
    Xz, Yz, wz = (_to_zarr(tmp_path / f"{n}.zarr", a, 150) for n, a in (("X", X), ("Y", Y), ("w", w)))
    fmap = dxrf.NystroemFeatures(60, bandwidth=1.5, random_state=0)
    ref = dxrf.RandomFeatureRidge(fmap, alpha=1e-3, store_posterior=True).fit(X, Y, sample_weight=w)
    got = dxrf.RandomFeatureRidge(fmap, alpha=1e-3, store_posterior=True).fit(Xz, Yz, sample_weight=wz)
    assert np.allclose(got.posterior_factor_ @ got.posterior_factor_.T,
                       ref.posterior_factor_ @ ref.posterior_factor_.T, rtol=1e-10, atol=1e-14)
    mean, std = got.predict(Xz, return_std=True)
    assert isinstance(mean, da.Array) and isinstance(std, da.Array) and std.shape == (600, 2)
    mean, std = da.compute(mean, std)
    want_mean, want_std = ref.predict(X, return_std=True)
    assert np.allclose(mean, want_mean, rtol=1e-10, atol=1e-12)
    assert np.allclose(std, want_std, rtol=1e-10, atol=0)


def test_saved_model_keeps_the_posterior(data, tmp_path):
    X, Y, _ = data
    m = dxrf.RandomFeatureRidge(fourier(), alpha=1e-3, store_posterior=True).fit(X, Y[:, 0])
    m.save(tmp_path / "m.zarr")
    back = dxrf.load(tmp_path / "m.zarr")
    assert np.array_equal(back.predict(X, return_std=True)[1], m.predict(X, return_std=True)[1])
    assert back.noise_ == m.noise_ and back.log_evidence_ == m.log_evidence_
    # a posterior that does not fit the features is refused by the load's consistency check
    back.posterior_factor_ = back.posterior_factor_[:-1]
    with pytest.raises(ModelFormatError, match="posterior"):
        back._check_loaded()
    del back.posterior_factor_
    with pytest.raises(ModelFormatError, match="together"):
        back._check_loaded()


def test_bad_input(data):
    X, Y, _ = data
    y = Y[:, 0]
    labels = (y > y.mean()).astype(int)
    clf = dxrf.RandomFeatureClassifier(fourier()).fit(X, labels)
    with pytest.raises(TypeError, match="return_std"):
        clf.predict(X, return_std=True)
    with pytest.raises(ValueError, match="positive alpha"):
        dxrf.RandomFeatureRidge(fourier(), alpha=0.0, store_posterior=True).fit(X, y)
    with pytest.raises(ValueError, match="alphas"):
        dxrf.RandomFeatureRidge(fourier(), validation="evidence").fit(X, y)
    with pytest.raises((TypeError, ValueError), match="store_posterior"):
        dxrf.RandomFeatureRidge(fourier(), store_posterior="yes").fit(X, y)
    with pytest.raises(ValueError, match="scoring='accuracy'"):
        dxrf.RandomFeatureClassifierCV(cv="evidence", scoring="accuracy", bandwidths=[1.0], n_components=[20]).fit(X, labels)
    with pytest.raises(ValueError, match="bandwidth_choice"):
        dxrf.RandomFeatureRidgeCV(cv="evidence", bandwidth_choice="plain", bandwidths=[1.0, 2.0], n_components=[20]).fit(X, y)
    with pytest.raises((TypeError, ValueError), match="cv"):
        dxrf.RandomFeatureRidgeCV(cv="evidenc", bandwidths=[1.0], n_components=[20]).fit(X, y)

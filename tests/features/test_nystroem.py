"""Nyström features: dense references, scikit-learn, leverage landmarks, the cluster, files, errors."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from distributed import Client
from sklearn.kernel_approximation import Nystroem
from sklearn.utils.estimator_checks import parametrize_with_checks

import dxrf
from _weight_checks import CHECK, LANDMARKS
from dxrf.kernels import exact
from dxrf.kernels.landmarks import eigen_cutoff
from dxrf.solvers.ridge_path import ridge_path

KERNELS = ("gaussian", "laplacian", "cauchy")
EXACT = {"gaussian": exact.gaussian_kernel, "laplacian": exact.laplacian_kernel, "cauchy": exact.cauchy_kernel}


def data(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=n)
    return X, y


def dense_features(X, L, kernel, bandwidth):
    """``k(X, L) U_k diag(lam_k)^{-1/2} U_k^T`` over the eigenpairs above the cutoff, by NumPy alone."""
    K_LL = EXACT[kernel](L, L, bandwidth)
    lam, U = np.linalg.eigh(K_LL)
    keep = lam >= eigen_cutoff(lam, np.float64)
    return EXACT[kernel](X, L, bandwidth) @ (U[:, keep] / np.sqrt(lam[keep])) @ U[:, keep].T


@pytest.mark.parametrize("kernel", KERNELS)
def test_features_and_statistics_match_dense_reference(kernel):
    X, y = data()
    f = dxrf.NystroemFeatures(40, kernel=kernel, bandwidth=0.7, dtype="float64", random_state=1).fit(X)
    L = X[f.landmark_indices_]
    assert np.array_equal(f.landmarks_, L)
    ref = dense_features(X, L, kernel, 0.7)
    Z = f.transform(X)
    assert Z.shape == (400, 40) and Z.dtype == np.float64
    assert np.abs(Z - ref).max() <= 1e-10 * np.abs(ref).max()
    # the statistics pass: k(X_b, L) accumulated, the whitening applied to the M x M results
    stats = dxrf.accumulate(X, y, f, tile_rows=96)
    G = ref.T @ ref
    assert np.abs(stats.gram - G).max() <= 1e-10 * np.abs(G).max()
    assert np.allclose(stats.sum, ref.sum(axis=0), rtol=0, atol=1e-10 * np.abs(ref).sum(axis=0).max())
    assert np.allclose(stats.cross[:, 0], ref.T @ y, rtol=0, atol=1e-10 * np.abs(ref.T @ y).max())
    assert stats.n == 400 and np.isclose(stats.yy[0, 0], y @ y)


@pytest.mark.parametrize("kernel,sk_kernel", [("gaussian", "rbf"), ("laplacian", "laplacian")])
def test_kernel_approximation_no_worse_than_scikit_learn(kernel, sk_kernel):
    X, _ = data(600, 4, seed=3)
    sigma = 1.3
    gamma = 1 / (2 * sigma**2) if kernel == "gaussian" else 1 / sigma
    K = EXACT[kernel](X, X, sigma)
    errs = []
    for m in (20, 80, 200):
        sk = Nystroem(kernel=sk_kernel, gamma=gamma, n_components=m, random_state=0).fit(X)
        ours = dxrf.NystroemFeatures(
            kernel=kernel, bandwidth=sigma, landmarks=X[sk.component_indices_], dtype="float64"
        ).fit(X)
        Zs, Zo = sk.transform(X), ours.transform(X)
        err_sk = np.linalg.norm(K - Zs @ Zs.T)
        err_ours = np.linalg.norm(K - Zo @ Zo.T)
        assert err_ours <= err_sk * (1 + 1e-8) + 1e-9, (m, err_ours, err_sk)
        errs.append(err_ours)
    assert errs[0] > errs[1] > errs[2]  # more landmarks, a better approximation: the comparison means something


def clustered(seed):
    """A dense blob and a sparse spread: uniform landmarks fall mostly in the blob."""
    rng = np.random.default_rng(seed)
    return np.vstack([rng.normal(scale=0.2, size=(1900, 2)), rng.uniform(-6, 6, size=(100, 2))])


def trace_error(f, X):
    # tr(K - Z Z^T) with k(x, x) = 1: the Nystrom residual is positive semi-definite
    Z = f.transform(X)
    return float(np.sum(1.0 - np.einsum("ij,ij->i", Z, Z)))


def test_leverage_landmarks_beat_uniform_on_nonuniform_density():
    ratios = []
    for seed in range(5):
        X = clustered(seed)
        errs = {}
        for how in ("uniform", "leverage"):
            f = dxrf.NystroemFeatures(60, bandwidth=0.5, landmarks=how, leverage_components=500,
                                      dtype="float64", random_state=seed).fit(X)
            errs[how] = trace_error(f, X)
            assert f.n_passes_ == (1 if how == "uniform" else 2)
            assert len(np.unique(f.landmark_indices_)) == 60
        ratios.append(errs["leverage"] / errs["uniform"])
    # measured 0.48-0.56 over these seeds; the band leaves room for other BLAS builds
    assert max(ratios) < 0.75, ratios


def test_leverage_samples_the_sparse_rows_more_often():
    X = clustered(0)
    f = dxrf.NystroemFeatures(60, bandwidth=0.5, landmarks="leverage", leverage_components=500, random_state=0).fit(X)
    sparse = np.mean(f.landmark_indices_ >= 1900)
    assert sparse > 3 * 100 / 2000  # uniform sampling would give 5%


@pytest.fixture
def zarr_xy(tmp_path):
    X, y = data(1000, 3, seed=5)
    path = str(tmp_path / "x.zarr")
    da.from_array(X, chunks=(170, 3)).to_zarr(path)
    return X, y, da.from_zarr(path)


@pytest.mark.parametrize("how,whitening", [("uniform", "eigh"), ("leverage", "eigh"), ("uniform", "cholesky")])
def test_zarr_fit_on_cluster_equals_numpy_fit(cluster2, zarr_xy, how, whitening):
    X, y, Xd = zarr_xy
    yd = da.from_array(y, chunks=170)
    make = lambda: dxrf.RandomFeatureRidge(  # noqa: E731
        features=dxrf.NystroemFeatures(50, bandwidth=1.0, landmarks=how, leverage_components=200, dtype="float64",
                                       whitening=whitening, random_state=7),
        alpha=1e-4,
    )
    local = make().fit(X, y)
    with Client(cluster2):
        remote = make().fit(Xd, yd)
        pred = remote.predict(Xd)
        assert isinstance(pred, da.Array)
        pred = pred.compute()
    assert np.array_equal(local.features_.landmark_indices_, remote.features_.landmark_indices_)
    assert local.n_passes_ == remote.n_passes_ == (2 if how == "uniform" else 3)
    assert np.allclose(remote.coef_, local.coef_, rtol=1e-8, atol=1e-8 * np.abs(local.coef_).max())
    assert np.allclose(pred, local.predict(X), rtol=0, atol=1e-9)
    assert local.score(X, y) > 0.9


def test_transform_of_dask_input_is_lazy_and_equal(zarr_xy):
    X, _, Xd = zarr_xy
    f = dxrf.NystroemFeatures(30, bandwidth=1.0, dtype="float32", random_state=0).fit(X)
    Z = f.transform(Xd)
    assert isinstance(Z, da.Array) and Z.shape == (1000, 30) and Z.dtype == np.float32
    assert np.array_equal(Z.compute(), f.transform(X))


def test_save_load_round_trip(tmp_path):
    X, y = data()
    model = dxrf.RandomFeatureRidge(
        features=dxrf.NystroemFeatures(30, kernel="cauchy", bandwidth="median", landmarks="leverage", random_state=2),
        alpha=1e-3,
    ).fit(X, y)
    model.save(tmp_path / "m")
    back = dxrf.load(tmp_path / "m")
    assert np.array_equal(back.predict(X), model.predict(X))
    assert np.array_equal(back.kernel_.whitening, model.kernel_.whitening)
    f = dxrf.NystroemFeatures(25, bandwidth=1.0, landmarks=X[:25], dtype="float64").fit(X)
    f.save(tmp_path / "f")
    g = dxrf.load(tmp_path / "f")
    assert g.landmark_indices_ is None and np.array_equal(g.transform(X), f.transform(X))


@pytest.mark.parametrize(
    "learner",
    [
        lambda f: dxrf.RandomFeatureClassifier(features=f, loss="logistic", alpha=1e-4),
        lambda f: dxrf.RandomFeatureClassifier(features=f, alpha=1e-4),
        lambda f: dxrf.RandomFeatureSGDRegressor(features=f, max_passes=3, random_state=0),
        lambda f: dxrf.RandomFeaturePCA(features=f, n_components=3),
    ],
    ids=["logistic", "least-squares", "sgd", "pca"],
)
def test_every_learner_uses_the_whitened_features(learner):
    X, y = data(600)
    target = (y > np.median(y)).astype(int)
    est = learner(dxrf.NystroemFeatures(40, bandwidth=1.0, random_state=0))
    est.fit(X, target)
    Z = est.features_.transform(X).astype(np.float64)
    if hasattr(est, "coef_"):
        scores = est.decision_function(X) if hasattr(est, "decision_function") else est.predict(X)
        coef = np.asarray(est.coef_).reshape(-1, Z.shape[1])
        assert np.allclose(np.ravel(scores), np.ravel(Z @ coef.T + est.intercept_), atol=1e-6)
    else:
        assert np.allclose(est.transform(X), (Z - est.mean_) @ est.components_.T, atol=1e-6)
    if hasattr(est, "classes_"):
        assert est.score(X, target) > 0.9


def test_selector_on_nystroem_candidates_selects_columns():
    X, y = data()
    sel = dxrf.LeverageScoreSampler(10, n_candidates=40, method="top", lam=1e-3,
                                    base=dxrf.NystroemFeatures(bandwidth=1.0, dtype="float64", random_state=0),
                                    random_state=0).fit(X)
    Z = sel.candidates_.transform(X)
    assert np.allclose(sel.transform(X), Z[:, sel.selected_] * sel.scales_, atol=1e-12)


@pytest.mark.parametrize(
    "params,X,message",
    [
        ({"n_components": 50}, np.zeros((10, 2)), "n_components=50 landmarks but X has n_samples=10"),
        ({"kernel": "rbf"}, None, "kernel must be one of"),
        ({"landmarks": "random"}, None, "landmarks must be one of"),
        ({"landmarks": np.zeros((5, 3))}, None, r"landmarks has shape \(5, 3\)"),
        ({"landmarks": np.zeros((5, 2)), "n_components": 4}, None, "n_components=4 but landmarks has 5 rows"),
        ({"landmarks": np.full((5, 2), np.nan)}, None, "landmarks must be finite"),
        ({"leverage_lam": 0.0}, None, "leverage_lam must be a positive"),
        ({"bandwidth": "mean"}, None, "bandwidth must be a positive number or 'median'"),
        ({"dtype": "int8"}, None, "dtype must be float32 or float64"),
    ],
)
def test_bad_input_is_refused_clearly(params, X, message):
    X = np.random.default_rng(0).normal(size=(200, 2)) if X is None else X
    with pytest.raises(ValueError, match=message):
        dxrf.NystroemFeatures(**params).fit(X)


def test_bad_landmarks_type_is_a_type_error():
    with pytest.raises(TypeError, match="landmarks must be"):
        dxrf.NystroemFeatures(landmarks=3).fit(np.zeros((5, 2)))


@parametrize_with_checks([
    dxrf.NystroemFeatures(n_components=2, bandwidth="median", dtype="float64", random_state=0),
    dxrf.NystroemFeatures(n_components=3, kernel="laplacian", landmarks="leverage", leverage_components=20,
                          random_state=0),
], expected_failed_checks=lambda est: {CHECK: LANDMARKS})
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_statistics_validate_as_the_rows_score_when_the_landmark_kernel_is_nearly_singular():
    # ARD-like lengthscales: four of six columns irrelevant, so K_LL of 300 landmarks has most
    # eigenvalues at rounding level. Validation MSE from statistics must be what the rows score
    # (at every penalty, including the tiny ones a search tries), not the rounding's amplification
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, size=(3000, 6))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.normal(size=3000)
    ls = np.array([0.8, 0.8, 1e4, 3e3, 1e4, 5e3])
    f = dxrf.NystroemFeatures(300, bandwidth=ls, dtype="float64", random_state=0).fit(X[:2000])
    lam = np.linalg.eigvalsh(EXACT["gaussian"](f.landmarks_ / ls, None, 1.0))
    assert (lam < 1e-10 * lam.max()).sum() > 50  # the case: most directions below resolution
    train = dxrf.accumulate(X[:2000], y[:2000], f)
    valid = dxrf.accumulate(X[2000:], y[2000:], f)
    alphas = np.logspace(-10, 0, 11)
    path = ridge_path(train, alphas, valid)
    Z = f.transform(X[2000:])
    direct = np.array([np.mean((Z @ c[:, 0] + b[0] - y[2000:]) ** 2) for c, b in zip(path.coefs, path.intercepts)])
    assert np.all(np.isfinite(path.validation_mse[:, 0]))
    np.testing.assert_allclose(path.validation_mse[:, 0], direct, rtol=1e-4)
    assert direct.min() < 0.01  # and the model is good: noise variance 0.0025


@pytest.mark.parametrize("how", ["uniform", "leverage"])
def test_landmarks_are_distinct_rows_whatever_the_chunking(cluster2, how):
    # rows on a coarse grid repeat (as flights' integer columns do): a landmark equal to another adds
    # nothing and makes K_LL singular, so the race keeps each value's first draw and goes on
    rng = np.random.default_rng(3)
    X = np.round(rng.normal(size=(2000, 2)), 0)  # about 50 distinct rows
    y = X[:, 0] - X[:, 1] ** 2
    distinct = np.unique(X + 0.0, axis=0).shape[0]
    make = lambda m: dxrf.NystroemFeatures(m, bandwidth=1.0, landmarks=how, leverage_components=50,  # noqa: E731
                                           random_state=5)
    small = make(20).fit(X)
    assert np.unique(small.landmarks_, axis=0).shape[0] == 20
    with Client(cluster2):
        chunked = make(20).fit(da.from_array(X, chunks=(300, 2)))
    np.testing.assert_array_equal(chunked.landmark_indices_, small.landmark_indices_)
    # asking for more landmarks than distinct rows: every distinct row, then repeats
    many = make(distinct + 10).fit(X)
    assert np.unique(many.landmarks_, axis=0).shape[0] == distinct and many.landmarks_.shape[0] == distinct + 10
    # so the conjugate gradient, which refuses repeated landmarks, fits such data
    model = dxrf.RandomFeatureRidge(make(30), alpha=1e-3, solver="pcg", tol=1e-8).fit(X, y)
    assert model.score(X, y) > 0.95

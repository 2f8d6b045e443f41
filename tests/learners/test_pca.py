"""Tests of RF-PCA, principal components of random features (issue 4, item 5).

The reference is scikit-learn's ``PCA`` on the explicit feature matrix (float64),
compared up to the sign of each component. Dask input must give lazy
transforms, and a real ``LocalCluster`` on zarr must give the NumPy result.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import dxrf
from _weight_checks import weight_xfails
from dxrf import LeverageScoreSampler, RandomFourierFeatures, RandomMaxoutFeatures
from dxrf.learners.pca import RandomFeaturePCA


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3)) * [1.0, 2.0, 0.5]
    labels = (X[:, 0] ** 2 + X[:, 1] > 1).astype(int)  # not linearly separable in X
    return X, labels


def fourier(m: int = 50, dtype: str = "float64") -> RandomFourierFeatures:
    return RandomFourierFeatures(m, bandwidth=2.0, dtype=dtype, random_state=0)


def align(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    """``a`` with each component's sign flipped to agree with ``b``."""
    signs = np.sign(np.sum(a * b, axis=axis, keepdims=True))
    return a * signs


def explicit(features, X: np.ndarray) -> np.ndarray:
    return features.fit(X).transform(X)


@pytest.mark.parametrize("features", [fourier(), RandomMaxoutFeatures(40, pieces=3, dtype="float64", random_state=0)])
@pytest.mark.parametrize("whiten", [False, True])
def test_equals_sklearn_pca_on_explicit_features(data, features, whiten):
    X, _ = data
    Z = explicit(features, X)
    ref = PCA(n_components=5, whiten=whiten, svd_solver="full").fit(Z)
    est = RandomFeaturePCA(5, features=features, whiten=whiten).fit(X)
    assert est.n_passes_ == 1  # one pass of statistics
    np.testing.assert_allclose(align(est.components_, ref.components_, 1), ref.components_, atol=1e-8)
    np.testing.assert_allclose(est.explained_variance_, ref.explained_variance_, rtol=1e-8)
    np.testing.assert_allclose(est.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-8)
    np.testing.assert_allclose(est.singular_values_, ref.singular_values_, rtol=1e-8)
    np.testing.assert_allclose(est.mean_, ref.mean_, atol=1e-12)
    T, T_ref = est.transform(X), ref.transform(Z)
    np.testing.assert_allclose(align(T, T_ref, 0), T_ref, atol=1e-8 * (1 if not whiten else 10))
    np.testing.assert_allclose(est.fit_transform(X), T, atol=1e-12)
    # inverse_transform maps back to feature space, as scikit-learn's does
    np.testing.assert_allclose(est.inverse_transform(T), ref.inverse_transform(T_ref), atol=1e-8)


def test_signs_follow_scikit_learn(data):
    X, _ = data
    est = RandomFeaturePCA(4, features=fourier()).fit(X)
    big = np.abs(est.components_).argmax(axis=1)
    assert np.all(est.components_[np.arange(4), big] > 0)
    ref = PCA(4).fit(explicit(fourier(), X))
    np.testing.assert_allclose(est.components_, ref.components_, atol=1e-8)  # no alignment needed


def test_n_components_as_fraction_and_all(data):
    X, _ = data
    Z = explicit(fourier(20), X)
    est = RandomFeaturePCA(0.9, features=fourier(20)).fit(X)
    ref = PCA(0.9, svd_solver="full").fit(Z)
    assert est.n_components_ == ref.n_components_
    full = RandomFeaturePCA(None, features=fourier(20)).fit(X)
    assert full.n_components_ == 20
    np.testing.assert_allclose(full.explained_variance_ratio_.sum(), 1.0)
    # all components: the inverse transform reconstructs the features exactly
    np.testing.assert_allclose(full.inverse_transform(full.transform(X)), Z, atol=1e-10)
    assert list(full.get_feature_names_out()[:2]) == ["randomfeaturepca0", "randomfeaturepca1"]


def test_dask_transform_is_lazy_and_equal(data):
    X, _ = data
    Xd = da.from_array(X, chunks=150)
    est = RandomFeaturePCA(3, features=fourier()).fit(Xd)
    ref = RandomFeaturePCA(3, features=fourier()).fit(X)
    np.testing.assert_allclose(est.components_, ref.components_, atol=1e-10)

    def refuse(*args, **kwargs):
        raise AssertionError("transform computed something")

    with dask.config.set(scheduler=refuse):
        T = est.transform(Xd)
        back = est.inverse_transform(T)
    assert isinstance(T, da.Array) and T.chunks == ((150,) * 4, (3,))
    # one fused task per chunk: the features are never a dask array of their own
    assert len(T.__dask_graph__().layers) <= 3
    np.testing.assert_allclose(T.compute(), ref.transform(X), atol=1e-10)
    np.testing.assert_allclose(back.compute(), ref.inverse_transform(ref.transform(X)), atol=1e-10)


def test_float32_features_are_close(data):
    X, _ = data
    ref = RandomFeaturePCA(3, features=fourier()).fit(X)
    est = RandomFeaturePCA(3, features=fourier(dtype="float32")).fit(X)
    np.testing.assert_allclose(align(est.transform(X), ref.transform(X), 0), ref.transform(X), atol=1e-4)


def test_selector_features(data):
    X, _ = data
    sel = LeverageScoreSampler(20, n_candidates=80, lam=1e-3, random_state=0)
    est = RandomFeaturePCA(2, features=sel).fit(X)
    assert est.components_.shape == (2, 20) and est.n_passes_ == 1
    Z = est.features_.transform(X).astype(np.float64)
    ref = PCA(2).fit(Z)
    np.testing.assert_allclose(align(est.transform(X), ref.transform(Z), 0), ref.transform(Z), atol=1e-4)


def test_cluster_on_zarr_equals_numpy(data, tmp_path, cluster2):
    X, _ = data
    arr = zarr.create_array(str(tmp_path / "X.zarr"), shape=X.shape, chunks=(100, 3), dtype="float64")
    arr[...] = X
    ref = RandomFeaturePCA(4, features=fourier()).fit(X)
    with Client(cluster2):
        Xz = da.from_zarr(str(tmp_path / "X.zarr"))
        est = RandomFeaturePCA(4, features=fourier()).fit(Xz)
        T = est.transform(Xz)
        assert isinstance(T, da.Array)
        T = T.compute()
    np.testing.assert_allclose(est.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(est.explained_variance_, ref.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(T, ref.transform(X), atol=1e-10)


def test_dask_ml_logistic_regression_on_lazy_embedding(data):
    dask_ml = pytest.importorskip("dask_ml.linear_model")
    X, labels = data
    Xd, yd = da.from_array(X, chunks=150), da.from_array(labels, chunks=150)
    pca = RandomFeaturePCA(6, features=fourier(200)).fit(Xd)
    clf = dask_ml.LogisticRegression(solver="newton").fit(pca.transform(Xd), yd)
    accuracy = (np.asarray(clf.predict(pca.transform(Xd))) == labels).mean()
    assert accuracy > 0.8


@parametrize_with_checks([RandomFeaturePCA(), RandomFeaturePCA(features=fourier(30), whiten=True)], expected_failed_checks=weight_xfails)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_pipeline_and_grid_search(data):
    X, labels = data
    pipe = make_pipeline(RandomFeaturePCA(features=fourier(100), random_state=0), LogisticRegression())
    search = GridSearchCV(pipe, {"randomfeaturepca__n_components": [1, 8]}, cv=3).fit(X, labels)
    assert search.best_params_["randomfeaturepca__n_components"] == 8
    assert search.best_score_ > 0.85


def test_save_and_load_round_trip(data, tmp_path):
    X, _ = data
    est = RandomFeaturePCA(3, features=fourier(), whiten=True).fit(X)
    est.save(tmp_path / "pca")
    back = dxrf.load(tmp_path / "pca")
    assert type(back) is RandomFeaturePCA and back.whiten
    np.testing.assert_array_equal(back.transform(X), est.transform(X))
    np.testing.assert_array_equal(back.get_feature_names_out(), est.get_feature_names_out())


@pytest.mark.parametrize(
    "params,match",
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": 1.5}, "n_components"),
        ({"n_components": 51}, "n_components=51"),
        ({"n_components": "all"}, "n_components"),
        ({"whiten": "yes"}, "whiten"),
    ],
)
def test_bad_parameters_name_themselves(data, params, match):
    X, _ = data
    with pytest.raises(ValueError, match=match):
        RandomFeaturePCA(features=fourier(), **params).fit(X)

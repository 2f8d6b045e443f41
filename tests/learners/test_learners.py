"""Ridge regression and least-squares classification on random features; model files."""

from __future__ import annotations

import json
import threading

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import dxrf
from _weight_checks import weight_xfails
from dxrf.persist.format import ModelFormatError


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4))
    Y = np.column_stack([np.sin(2 * X[:, 0]) + X[:, 1] ** 2, np.cos(X[:, 2]) + 5.0]) + 0.05 * rng.normal(size=(1500, 2))
    return X, Y


def dense_ridge(Z, Y, alpha, fit_intercept=True):
    n = Z.shape[0]
    zm, ym = (Z.mean(0), Y.mean(0)) if fit_intercept else (np.zeros(Z.shape[1]), np.zeros(Y.shape[1]))
    Zc, Yc = Z - zm, Y - ym
    coef = np.linalg.solve(Zc.T @ Zc / n + alpha * np.eye(Z.shape[1]), Zc.T @ Yc / n)
    return coef, ym - zm @ coef


def rel(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(b)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ridge_equals_dense_numpy_ridge(regression, fit_intercept):
    X, Y = regression
    fmap = dxrf.RandomFourierFeatures(80, bandwidth=1.5, dtype="float64", random_state=0)
    model = dxrf.RandomFeatureRidge(fmap, alpha=1e-3, fit_intercept=fit_intercept).fit(X, Y)
    Z = model.features_.transform(X)
    coef, b = dense_ridge(Z, Y, 1e-3, fit_intercept)
    assert rel(model.coef_.T, coef) <= 1e-8
    assert rel(model.intercept_, b) <= 1e-8 if fit_intercept else np.all(model.intercept_ == 0)
    np.testing.assert_allclose(model.predict(X), Z @ coef + b, rtol=1e-8, atol=1e-10)
    # one output: 1-d coef_ and a float intercept
    m1 = dxrf.RandomFeatureRidge(fmap, alpha=1e-3, fit_intercept=fit_intercept).fit(X, Y[:, 0])
    assert m1.coef_.shape == (80,) and isinstance(m1.intercept_, float)
    assert rel(m1.coef_, coef[:, 0]) <= 1e-8


def test_alpha_path_is_validated_from_one_pass(regression):
    X, Y = regression
    mask = np.random.default_rng(1).random(X.shape[0]) < 0.25
    alphas = np.logspace(-6, 0, 7)
    fmap = dxrf.RandomFourierFeatures(60, bandwidth=1.5, dtype="float64", random_state=0)
    model = dxrf.RandomFeatureRidge(fmap, alphas=alphas, validation=mask).fit(X, Y)
    Z = model.features_.transform(X)
    expected = []
    for a in alphas:
        coef, b = dense_ridge(Z[~mask], Y[~mask], a)
        expected.append(((Y[mask] - Z[mask] @ coef - b) ** 2).mean())
    np.testing.assert_allclose(model.validation_errors_, expected, rtol=1e-8)
    assert model.alpha_ == alphas[int(np.argmin(expected))]
    # the final model is refitted on every row with the chosen alpha
    coef, _ = dense_ridge(Z, Y, model.alpha_)
    assert rel(model.coef_.T, coef) <= 1e-8
    assert model.n_passes_ == 1


class _CountingArray:
    """A NumPy-like array that counts reads of row blocks (wrapped by dask)."""

    def __init__(self, a):
        self.a, self.shape, self.dtype, self.ndim = a, a.shape, a.dtype, a.ndim
        self.reads = 0
        self.lock = threading.Lock()

    def __getitem__(self, key):
        with self.lock:
            self.reads += 1
        return self.a[key]


@pytest.mark.parametrize(
    "features",
    [
        dxrf.LeverageScoreSampler(20, n_candidates=100, lam=1e-3, random_state=0),
        dxrf.EnergyScoreSelector(20, n_candidates=100, random_state=0),
        dxrf.KernelAlignmentSelector(20, n_candidates=100, random_state=0),
        dxrf.RandomFourierFeatures(20, random_state=0),
    ],
)
def test_selection_and_ridge_share_one_pass(regression, features):
    X, Y = regression
    counting = _CountingArray(X)
    Xd = da.from_array(counting, chunks=(300, 4), asarray=True, name="counted-x", meta=np.empty((0, 0)))
    before = counting.reads
    model = dxrf.RandomFeatureRidge(features, alphas=[1e-4, 1e-2]).fit(Xd, Y[:, 0])
    n_chunks = len(Xd.chunks[0])
    assert counting.reads - before == n_chunks, (counting.reads - before, n_chunks)
    assert model.n_passes_ == 1
    # the same fit on NumPy input gives the same model
    ref = dxrf.RandomFeatureRidge(features, alphas=[1e-4, 1e-2]).fit(X, Y[:, 0])
    assert rel(model.coef_, ref.coef_) <= 1e-4  # float32 features: chunking changes the rounding


def test_predict_is_lazy_for_dask(regression):
    X, Y = regression
    model = dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(40, random_state=0)).fit(X, Y)
    Xd = da.from_array(X, chunks=(400, 4))
    with dask.config.set(scheduler="sync"):
        pred = model.predict(Xd)
    assert isinstance(pred, da.Array) and pred.shape == (1500, 2)
    np.testing.assert_allclose(pred.compute(), model.predict(X), rtol=1e-5, atol=1e-6)


# -- least-squares classification ---------------------------------------------------


@pytest.fixture(scope="module")
def classification():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1200, 3))
    score = X[:, 0] ** 2 + X[:, 1]
    y = np.digitize(score, [0.5, 1.8])  # three classes
    return X, np.array(["low", "mid", "high"])[y]


def test_squared_classifier_is_one_vs_rest_ridge(classification):
    X, y = classification
    fmap = dxrf.RandomFourierFeatures(80, bandwidth=1.5, dtype="float64", random_state=0)
    clf = dxrf.RandomFeatureClassifier(fmap, alpha=1e-4).fit(X, y)
    assert list(clf.classes_) == ["high", "low", "mid"]
    T = np.where(y[:, None] == clf.classes_[None, :], 1.0, -1.0)
    Z = clf.features_.transform(X)
    coef, b = dense_ridge(Z, T, 1e-4)
    assert rel(clf.coef_.T, coef) <= 1e-8
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmax(Z @ coef + b, axis=1)])
    assert clf.score(X, y) > 0.85
    # binary: one +-1 column, sign decides
    yb = (y == "mid")
    clf2 = dxrf.RandomFeatureClassifier(fmap, alpha=1e-4).fit(X, yb)
    assert clf2.coef_.shape == (1, 80)
    d = clf2.decision_function(X)
    np.testing.assert_array_equal(clf2.predict(X), clf2.classes_[(d > 0).astype(int)])
    with pytest.raises(AttributeError):
        clf2.predict_proba(X)


def test_classifier_accepts_dask_and_predicts_lazily(classification):
    X, y = classification
    Xd, yd = da.from_array(X, chunks=(250, 3)), da.from_array(y, chunks=250)
    clf = dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(50, random_state=0), alphas=[1e-4, 1e-2]).fit(Xd, yd)
    ref = dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(50, random_state=0), alphas=[1e-4, 1e-2]).fit(X, y)
    assert rel(clf.coef_, ref.coef_) <= 1e-4
    pred = clf.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), ref.predict(X))


# -- scikit-learn ecosystem ------------------------------------------------------------


def _median_partial_fit_checks(est) -> dict:
    """An unfitted selector cannot be fixed by a first partial_fit: a clear ValueError, by design (strict xfail)."""
    features = est.features
    if features is None or not dxrf.learners._base.is_selector(features):
        return {}
    why = "partial_fit refuses an unfitted selector: it chooses from statistics of all the data"
    return {"check_n_features_in_after_fitting": why, "check_estimators_partial_fit_n_features": why}


@parametrize_with_checks(
    estimators=[
        dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(100, bandwidth="median", random_state=0, dtype="float64")),
        dxrf.RandomFeatureRidge(
            dxrf.LeverageScoreSampler(50, base=dxrf.RandomFourierFeatures(bandwidth="median"), random_state=0),
            alphas=[1e-3, 1e-1],
        ),
        dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(100, bandwidth="median", random_state=0, dtype="float64")),
        dxrf.RandomFeatureClassifier(),
        dxrf.RandomFeatureRidge(),
        # numeric bandwidths: partial_fit can fix the features at its first call
        dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(100, bandwidth=3.0, random_state=0, dtype="float64")),
        # the posterior kept, and the penalty chosen by the evidence (no validation rows)
        dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(50, bandwidth=3.0, random_state=0, dtype="float64"),
                                store_posterior=True),
        dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(50, bandwidth=3.0, random_state=0, dtype="float64"),
                                alphas=[1e-4, 1e-2, 1.0], validation="evidence"),
        dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(100, bandwidth=3.0, random_state=0, dtype="float64")),
    ],
    expected_failed_checks=lambda est: {**_median_partial_fit_checks(est), **weight_xfails(est)},
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_pipeline_and_grid_search(regression, classification):
    X, Y = regression
    pipe = make_pipeline(StandardScaler(), dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(50, random_state=0)))
    search = GridSearchCV(pipe, {"randomfeatureridge__alpha": [1e-5, 1e-2], "randomfeatureridge__features__bandwidth": [1.0, 3.0]}, cv=3)
    search.fit(X, Y[:, 0])
    assert search.best_score_ > 0.8
    Xc, yc = classification
    search = GridSearchCV(dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(40, random_state=0)), {"alpha": [1e-4, 1e-1]}, cv=3)
    search.fit(Xc, yc)
    assert search.best_score_ > 0.8


# -- model files ------------------------------------------------------------------------


def test_save_and_load_round_trip(regression, classification, tmp_path):
    X, Y = regression
    models = {
        "ridge": dxrf.RandomFeatureRidge(dxrf.LeverageScoreSampler(20, random_state=0), alphas=[1e-4, 1e-2]).fit(X, Y),
        "ridge-structured": dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(40, sampling="structured", random_state=0)).fit(X, Y[:, 1]),
    }
    Xc, yc = classification
    models["clf"] = dxrf.RandomFeatureClassifier(dxrf.RandomMaxoutFeatures(30, pieces=2, random_state=0)).fit(Xc, yc)
    for name, model in models.items():
        path = tmp_path / f"{name}.model"
        model.save(path)
        loaded = dxrf.load(path)
        assert type(loaded) is type(model)
        Xt = Xc if name == "clf" else X
        np.testing.assert_array_equal(loaded.predict(Xt), model.predict(Xt))
        assert loaded.get_params(deep=False).keys() == model.get_params(deep=False).keys()
        # no pickle anywhere: only zarr metadata (JSON) and numeric chunks
        for f in path.rglob("*"):
            assert f.suffix not in (".pkl", ".pickle")
            if f.name == "zarr.json":
                meta = json.loads(f.read_text())
                assert "pickle" not in json.dumps(meta).lower()
                if meta.get("node_type") == "array":
                    assert meta["data_type"] in ("float32", "float64", "int64", "int32", "bool", "uint8")


def test_load_refuses_other_versions_and_bad_shapes(regression, tmp_path):
    X, Y = regression
    model = dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(10, random_state=0)).fit(X, Y[:, 0])
    path = tmp_path / "m"
    model.save(path)
    meta_path = path / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["attributes"]["dxrf_model_format"] = 99
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ModelFormatError, match="format version 99"):
        dxrf.load(path)
    model.save(path, overwrite=True)  # overwrite the tampered model atomically
    assert isinstance(dxrf.load(path), dxrf.RandomFeatureRidge)
    # a coefficient array of the wrong shape
    import zarr

    root = zarr.open_group(str(path), mode="r+")
    spec = root.attrs["fitted"]["coef_"]
    arr = root[spec["__array__"]]
    root.create_array(spec["__array__"], shape=(3,), dtype=arr.dtype, overwrite=True)
    with pytest.raises(ModelFormatError, match="shape"):
        dxrf.load(path)
    with pytest.raises(ModelFormatError, match="not a dxrf model"):
        dxrf.load(tmp_path / "nothing-here")
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :2])


def test_bad_parameters(regression):
    X, Y = regression
    with pytest.raises(ValueError, match="alpha must be"):
        dxrf.RandomFeatureRidge(alpha=-1.0).fit(X, Y)
    with pytest.raises(ValueError, match="alphas"):
        dxrf.RandomFeatureRidge(alphas=[]).fit(X, Y)
    with pytest.raises(ValueError, match="validation must be"):
        dxrf.RandomFeatureRidge(alphas=[1.0], validation=2.0).fit(X, Y)
    with pytest.raises(TypeError, match="features must be"):
        dxrf.RandomFeatureRidge(features="rff").fit(X, Y)
    with pytest.raises(ValueError, match="loss must be"):
        dxrf.RandomFeatureClassifier(loss="hinge").fit(X, Y[:, 0] > 0)
    with pytest.raises(ValueError, match="requires y"):
        dxrf.RandomFeatureRidge().fit(X, None)


# -- logistic classification --------------------------------------------------------------


@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
def test_logistic_classifier_matches_scikit_learn(classification, solver):
    from sklearn.linear_model import LogisticRegression

    X, y = classification
    fmap = dxrf.RandomFourierFeatures(40, bandwidth=1.5, dtype="float64", random_state=0)
    alpha = 1e-3
    clf = dxrf.RandomFeatureClassifier(fmap, loss="logistic", alpha=alpha, solver=solver, tol=1e-10).fit(X, y == "mid")
    Z = clf.features_.transform(X)
    ref = LogisticRegression(C=1.0 / (len(X) * alpha), tol=1e-12, max_iter=10000).fit(Z, y == "mid")
    assert rel(clf.coef_, ref.coef_) <= 1e-4
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(clf.predict_proba(X), ref.predict_proba(Z), atol=1e-5)
    assert clf.converged_ and clf.n_passes_ <= (15 if solver == "newton" else 200)  # lbfgs: a pass per gradient
    # multi-class: one-vs-rest, probabilities normalised
    multi = dxrf.RandomFeatureClassifier(fmap, loss="logistic", alpha=alpha).fit(X, y)
    proba = multi.predict_proba(X)
    assert proba.shape == (len(X), 3) and np.allclose(proba.sum(axis=1), 1.0)
    assert multi.score(X, y) > 0.75  # one-vs-rest with 40 features on three ordered classes
    Xd = da.from_array(X, chunks=(300, 3))
    lazy = multi.predict_proba(Xd)
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), proba, rtol=1e-5, atol=1e-7)

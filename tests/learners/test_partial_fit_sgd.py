"""partial_fit of the SGD estimators: one pass per call, continuing from the iterate (issue 16)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import dxrf
from dxrf import RandomFourierFeatures
from dxrf.learners.sgd import RandomFeatureSGDClassifier, RandomFeatureSGDRegressor

N, D = 800, 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(N, D))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.normal(size=N)
    labels = np.where(X[:, 0] + 0.5 * X[:, 2] > 0.3, 2, np.where(X[:, 1] > 0, 0, 1))
    return X, y, labels


def rff(m: int = 100) -> RandomFourierFeatures:
    return RandomFourierFeatures(m, bandwidth=1.0, dtype="float64", random_state=0)


def sgd(cls=RandomFeatureSGDRegressor, **kw):
    return cls(rff(), batch_size=16, random_state=3, **kw)


def test_one_call_equals_a_one_pass_fit(data):
    X, y, _ = data
    fit = sgd(max_passes=1, validation=None, early_stopping=False).fit(X, y)
    part = sgd().partial_fit(X, y)
    np.testing.assert_allclose(part.coef_, fit.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(part.intercept_, fit.intercept_, rtol=1e-12, atol=1e-14)
    assert part.n_iter_ == fit.n_iter_ and part.n_epochs_ == 1 and part.n_passes_ == 1


def test_calls_continue_and_learn(data):
    X, y, labels = data
    est = sgd()
    for _ in range(3):
        for a in range(0, N, 200):
            est.partial_fit(X[a:a + 200], y[a:a + 200])
    assert est.n_epochs_ == 12 and est.train_errors_.shape == (12,)
    assert est.n_iter_ == 12 * (200 // 16 + 1)
    assert est.score(X, y) > 0.8
    clf = sgd(RandomFeatureSGDClassifier)
    for a in range(0, N, 200):
        clf.partial_fit(X[a:a + 200], labels[a:a + 200], classes=[0, 1, 2])
    assert clf.coef_.shape == (100, 3) and clf.score(X, labels) > 0.7


def test_after_fit_and_after_load_it_continues(data, tmp_path):
    X, y, _ = data
    est = sgd(max_passes=2, validation=None, early_stopping=False).fit(X, y)
    est.save(tmp_path / "sgd.dxrf")
    back = dxrf.load(tmp_path / "sgd.dxrf")
    est.partial_fit(X[:300], y[:300])
    back.partial_fit(X[:300], y[:300])
    np.testing.assert_array_equal(back.coef_, est.coef_)
    assert back.n_epochs_ == 3 and back.n_iter_ == est.n_iter_


def test_dask_ml_incremental(data):
    wrappers = pytest.importorskip("dask_ml.wrappers")
    X, y, labels = data
    inc = wrappers.Incremental(sgd(), shuffle_blocks=False).fit(da.from_array(X, chunks=200), da.from_array(y, chunks=200))
    manual = sgd()
    for a in range(0, N, 200):
        manual.partial_fit(X[a:a + 200], y[a:a + 200])
    np.testing.assert_allclose(inc.estimator_.coef_, manual.coef_, rtol=1e-12, atol=1e-14)
    clf = wrappers.Incremental(sgd(RandomFeatureSGDClassifier), shuffle_blocks=False)
    clf.fit(da.from_array(X, chunks=200), da.from_array(labels, chunks=200), classes=np.array([0, 1, 2]))
    assert clf.estimator_.n_epochs_ == 4


@pytest.mark.parametrize("make,kw,match", [
    (lambda: sgd(RandomFeatureSGDClassifier), {}, "classes must be passed"),
    (lambda: sgd(RandomFeatureSGDClassifier), {"classes": [0, 1]}, r"labels \[2\] that are not in classes"),
], ids=["no-classes", "unknown-label"])
def test_bad_input(data, make, kw, match):
    X, y, labels = data
    est = make()
    with pytest.raises(ValueError, match=match):
        est.partial_fit(X[:100], labels[:100] if isinstance(est, RandomFeatureSGDClassifier) else y[:100], **kw)
    assert not hasattr(est, "coef_")

"""partial_fit: features fixed at the first call, statistics that add up (issue 16).

Incremental fits over batches are compared with ``fit`` on all the rows, also
through ``dask_ml.wrappers.Incremental``, and after a save/load round trip.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import dxrf
from dxrf import RandomFeatureClassifier, RandomFeatureRidge, RandomFourierFeatures
from dxrf.selection import LeverageScoreSampler
from dxrf.stats.feature_stats import FeatureStats

N, D = 600, 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(N, D))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 1.0 + 0.05 * rng.normal(size=N)
    labels = np.where(X[:, 0] + 0.5 * X[:, 2] > 0.3, "b", np.where(X[:, 1] > 0, "a", "c"))
    return X, y, labels


def rff(m: int = 40, **kw) -> RandomFourierFeatures:
    return RandomFourierFeatures(m, bandwidth=1.2, dtype="float64", random_state=0, **kw)


def batches(n: int, cuts=(0, 97, 250, 251, 480, N)):
    return [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


@pytest.mark.parametrize("two_d", [False, True])
def test_ridge_partial_fit_equals_fit(data, two_d):
    X, y, _ = data
    Y = np.column_stack([y, y**2]) if two_d else y
    full = RandomFeatureRidge(rff(), alpha=1e-3).fit(X, Y)
    part = RandomFeatureRidge(rff(), alpha=1e-3)
    for s in batches(N):
        part.partial_fit(X[s], Y[s])
    assert isinstance(part.stats_, FeatureStats) and part.stats_.n == N
    assert part.n_passes_ == len(batches(N))
    np.testing.assert_allclose(part.coef_, full.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(part.intercept_, full.intercept_, rtol=1e-8, atol=1e-10)
    assert part.train_mse_ == pytest.approx(full.train_mse_, rel=1e-8)
    np.testing.assert_allclose(part.predict(X), full.predict(X), rtol=1e-8, atol=1e-10)


def test_classifier_partial_fit_equals_fit(data):
    X, _, labels = data
    full = RandomFeatureClassifier(rff(), alpha=1e-3).fit(X, labels)
    part = RandomFeatureClassifier(rff(), alpha=1e-3)
    for i, s in enumerate(batches(N)):
        part.partial_fit(X[s], labels[s], classes=["a", "b", "c"] if i == 0 else None)
    np.testing.assert_array_equal(part.classes_, full.classes_)
    np.testing.assert_allclose(part.coef_, full.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(part.intercept_, full.intercept_, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(part.predict(X), full.predict(X))


def test_fitted_map_or_selector_is_used_as_it_is(data):
    X, y, _ = data
    sel = LeverageScoreSampler(15, n_candidates=60, base=rff(60), random_state=1).fit(X[:200])
    part = RandomFeatureRidge(sel, alpha=1e-3)
    for s in batches(N):
        part.partial_fit(X[s], y[s])
    np.testing.assert_array_equal(part.features_.selected_, sel.selected_)
    stats = dxrf.accumulate(X, y, sel.kernel_)
    np.testing.assert_allclose(part.stats_.gram, stats.gram, rtol=1e-10, atol=1e-12)
    median = RandomFourierFeatures(20, bandwidth="median", random_state=0).fit(X)
    m = RandomFeatureRidge(median).partial_fit(X[:100], y[:100])
    assert m.kernel_ is not median.kernel_ and m.features_.bandwidth_ == median.bandwidth_


def test_fit_starts_over_and_partial_fit_after_fit_keeps_the_features(data):
    X, y, labels = data
    est = RandomFeatureRidge(rff(), alpha=1e-3).partial_fit(X[:100], y[:100])
    est.fit(X, y)
    assert not hasattr(est, "stats_")
    est.partial_fit(X[:50], y[:50])
    assert est.stats_.n == 50
    # a median bandwidth fixed by fit: partial_fit keeps it (and the classes)
    clf = RandomFeatureClassifier(RandomFourierFeatures(20, bandwidth="median", random_state=0)).fit(X, labels)
    kernel = clf.kernel_
    clf.partial_fit(X[:80], labels[:80])
    assert clf.kernel_ is kernel and clf.stats_.n == 80 and list(clf.classes_) == ["a", "b", "c"]
    ref = RandomFeatureClassifier(clf.features_).partial_fit(X[:80], labels[:80], classes=["a", "b", "c"])
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-10, atol=1e-12)


def test_save_load_and_continue(data, tmp_path):
    X, y, labels = data
    full = RandomFeatureRidge(rff(), alpha=1e-3).fit(X, y)
    est = RandomFeatureRidge(rff(), alpha=1e-3).partial_fit(X[:300], y[:300])
    est.save(tmp_path / "ridge.dxrf")
    back = dxrf.load(tmp_path / "ridge.dxrf")
    assert back.stats_.n == 300
    np.testing.assert_array_equal(back.stats_.gram, est.stats_.gram)
    back.partial_fit(X[300:], y[300:])
    np.testing.assert_allclose(back.coef_, full.coef_, rtol=1e-8, atol=1e-10)
    clf = RandomFeatureClassifier(rff(), alpha=1e-3).partial_fit(X[:300], labels[:300], classes=["a", "b", "c"])
    clf.save(tmp_path / "clf.dxrf")
    back = dxrf.load(tmp_path / "clf.dxrf").partial_fit(X[300:], labels[300:])
    ref = RandomFeatureClassifier(rff(), alpha=1e-3).fit(X, labels)
    np.testing.assert_allclose(back.coef_, ref.coef_, rtol=1e-8, atol=1e-10)


def test_dask_ml_incremental_equals_fit(data):
    wrappers = pytest.importorskip("dask_ml.wrappers")
    X, y, labels = data
    Xd = da.from_array(X, chunks=150)
    inc = wrappers.Incremental(RandomFeatureRidge(rff(), alpha=1e-3), shuffle_blocks=False)
    inc.fit(Xd, da.from_array(y, chunks=150))
    assert inc.estimator_.stats_.n == N
    full = RandomFeatureRidge(rff(), alpha=1e-3).fit(X, y)
    np.testing.assert_allclose(inc.estimator_.coef_, full.coef_, rtol=1e-8, atol=1e-10)
    # shuffled blocks: the statistics add up in any order
    inc = wrappers.Incremental(RandomFeatureRidge(rff(), alpha=1e-3), shuffle_blocks=True, random_state=0)
    inc.fit(Xd, da.from_array(y, chunks=150))
    np.testing.assert_allclose(inc.estimator_.coef_, full.coef_, rtol=1e-8, atol=1e-10)
    clf = wrappers.Incremental(RandomFeatureClassifier(rff(), alpha=1e-3), shuffle_blocks=False)
    clf.fit(Xd, da.from_array(labels, chunks=150), classes=np.array(["a", "b", "c"]))
    ref = RandomFeatureClassifier(rff(), alpha=1e-3).fit(X, labels)
    np.testing.assert_allclose(clf.estimator_.coef_, ref.coef_, rtol=1e-8, atol=1e-10)


BAD = [
    ("unfitted-selector", lambda: RandomFeatureRidge(LeverageScoreSampler(5, base=rff(50))), {},
     ValueError, "LeverageScoreSampler chooses its features.*fit it first"),
    ("alphas", lambda: RandomFeatureRidge(rff(), alphas=[1e-3, 1e-2]), {}, ValueError, "alphas"),
    ("no-classes", lambda: RandomFeatureClassifier(rff()), {"clf": True}, ValueError, "classes must be passed"),
    ("logistic", lambda: RandomFeatureClassifier(rff(), loss="logistic"), {"clf": True, "classes": ["a", "b", "c"]},
     ValueError, "loss='squared'"),
    ("unknown-label", lambda: RandomFeatureClassifier(rff()), {"clf": True, "classes": ["a", "b"]},
     ValueError, r"labels \['c'\] that are not in classes"),
]


def test_a_median_bandwidth_is_the_first_batchs(data):
    """The default features' median bandwidth is fixed from the first batch's rows, then kept."""
    X, y, _ = data
    m = RandomFeatureRidge(random_state=0).partial_fit(X[:100], y[:100])
    first = RandomFourierFeatures(100, bandwidth="median", random_state=m.features_.random_state).fit(X[:100])
    assert m.features_.bandwidth_ == first.bandwidth_
    kernel = m.kernel_
    m.partial_fit(X[100:200], y[100:200])
    assert m.kernel_ is kernel and m.stats_.n == 200


@pytest.mark.parametrize("name,make,kw,exc,match", BAD, ids=[b[0] for b in BAD])
def test_partial_fit_bad_input(data, name, make, kw, exc, match):
    X, y, labels = data
    est = make()
    with pytest.raises(exc, match=match):
        if kw.get("clf"):
            est.partial_fit(X[:50], labels[:50], **({"classes": kw["classes"]} if "classes" in kw else {}))
        else:
            est.partial_fit(X[:50], y[:50])
    assert not hasattr(est, "stats_") and not hasattr(est, "coef_") and not hasattr(est, "classes_")


def test_later_calls_must_match_the_first(data):
    X, y, labels = data
    est = RandomFeatureRidge(rff(), alpha=1e-3).partial_fit(X[:100], y[:100])
    with pytest.raises(ValueError, match="X has 2 features"):
        est.partial_fit(X[100:200, :2], y[100:200])
    with pytest.raises(ValueError, match="earlier partial_fit calls had 1-d"):
        est.partial_fit(X[100:200], np.column_stack([y, y])[100:200])
    assert est.stats_.n == 100
    clf = RandomFeatureClassifier(rff()).partial_fit(X[:100], labels[:100], classes=["a", "b", "c"])
    with pytest.raises(ValueError, match="is not the classes_"):
        clf.partial_fit(X[100:200], labels[100:200], classes=["a", "b"])


def test_alphas_after_fit_keep_the_chosen_penalty(data):
    X, y, _ = data
    est = RandomFeatureRidge(rff(), alphas=[1e-6, 1e-1, 10.0]).fit(X, y)
    chosen = est.alpha_
    est.partial_fit(X[:200], y[:200]).partial_fit(X[200:], y[200:])
    assert est.alpha_ == chosen and not hasattr(est, "validation_errors_")
    ref = RandomFeatureRidge(rff(), alpha=chosen).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8, atol=1e-10)

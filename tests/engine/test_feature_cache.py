"""The feature cache of iterative fits: bitwise the same models, an honest budget, nothing left behind.

Real zarr data on disk, a real two-process ``LocalCluster`` (``cluster2``), two
chunkings. Every fit is made twice, with ``cache_features=True`` and False, and
the models must be equal to the bit. After a fit, a failed fit and an
interrupted fit the workers must hold nothing (their ``data``), and "auto" must
decline when the workers' memory limits are small.
"""

from __future__ import annotations


import dask.array as da
import numpy as np
import pytest
from distributed import Client

import dxrf
from _worker_memory import empty, held_keys, wait_until_empty
import dxrf.io
from dxrf.engine.cache import feature_cache, plan_cache
from dxrf.solvers.logistic import passes as logistic_passes

N, D = 12_000, 6


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """One data set stored twice: chunks of 2500 rows (cut tiles) and of 4000."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    labels = np.argmax(X[:, :3] + 0.5 * rng.normal(size=(N, 3)), axis=1)
    out = {}
    for rows in (2500, 4000):
        path = tmp_path_factory.mktemp("cache") / f"c{rows}.zarr"
        dxrf.io.write_zarr(X, path, y=labels.astype(float), chunk_rows=rows)
        out[rows] = dxrf.io.open_zarr(path)
    return X, labels, out


def _classifier(loss: str, solver: str, cache: bool, m: int = 300) -> dxrf.RandomFeatureClassifier:
    fmap = dxrf.RandomFourierFeatures(m, bandwidth=2.0, random_state=0)
    return dxrf.RandomFeatureClassifier(fmap, loss=loss, alpha=1e-3, solver=solver, max_iter=5, cache_features=cache)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(
    "loss, solver, rows",
    [
        ("logistic", "newton", 2500),
        ("logistic", "lbfgs", 4000),
        ("multinomial", "lbfgs", 2500),
        ("multinomial", "lbfgs", 4000),
        ("multinomial", "newton-cg", 2500),
    ],
)
def test_cached_fit_is_bitwise_the_uncached_one(client, data, rows, loss, solver):
    _, labels, stored = data
    X = stored[rows].X
    y = labels if loss == "multinomial" else (labels == 0).astype(int)
    ref = _classifier(loss, solver, False).fit(X, y)
    got = _classifier(loss, solver, True).fit(X, y)
    assert ref.feature_cache_ == "recomputed" and got.feature_cache_ == "cached"
    assert got.feature_cache_bytes_ == N * 300 * (8 if solver == "lbfgs" else 4)  # L-BFGS keeps float64 copies
    assert got.n_passes_ == ref.n_passes_ >= 3
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)
    assert wait_until_empty(client) == empty(client)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("solver", ["lbfgs", "newton-cg"])
def test_numpy_cached_fit_is_bitwise_the_uncached_one(data, solver):
    """In this process, on float32 features large enough for float32 products (not the small-fit path)."""
    X, labels, _ = data
    X2 = np.vstack([X, X[::-1]])  # N M (M + d) above the small-fit bound
    y2 = np.concatenate([labels, labels[::-1]])
    ref = _classifier("multinomial", solver, False).fit(X2, y2)
    got = _classifier("multinomial", solver, True).fit(X2, y2)
    assert got.feature_cache_ == "cached" and ref.feature_cache_ == "recomputed"
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)


def test_auto_declines_beyond_the_budget(make_cluster, data):
    """Workers of 400 MB: "auto" keeps features within 1/3 of the 800 MB they have together, and no more."""
    X, labels, stored = data
    with Client(make_cluster(2, memory_limit="400MB")) as client:
        budget = int(800e6 / 3)
        plan = plan_cache("auto", 60_000, 2000, 4, dask_input=True, fraction=1 / 3)  # MNIST's 480 MB
        assert not plan.cached and plan.budget == budget and plan.estimate == 480_000_000
        assert plan_cache("auto", N, 300, 4, dask_input=True, fraction=1 / 3).cached
        assert "recomputed" in plan.describe() and "budget" in plan.describe()
        multinomial = _classifier("multinomial", "lbfgs", "auto")
        multinomial.max_iter = 2
        # L-BFGS keeps float64 copies of the float32 features; SGD the float32 features
        for est, y, itemsize in ((multinomial, labels, 8), (_sgd("regression", "auto"), np.sin(X[:, 0]), 4)):
            with dxrf.options(cache_fraction=0.01):  # 8 MB: the 14.4 (or 28.8) MB of features do not fit
                est.fit(stored[4000].X, y)
            assert est.feature_cache_ == "recomputed" and est.feature_cache_bytes_ == N * 300 * itemsize
            ref = est.coef_
            est.fit(stored[4000].X, y)
            assert est.feature_cache_ == "cached"
            np.testing.assert_array_equal(est.coef_, ref)
            assert wait_until_empty(client) == empty(client)


def test_nothing_stays_after_an_error(client, data):
    X, labels, stored = data
    Xd = stored[2500].X
    row = da.arange(N, chunks=Xd.chunks[0]) == N - 10
    bad = da.where(row[:, None], np.nan, Xd)  # found by the last chunk's feature task
    est = dxrf.RandomFeatureClassifier(
        dxrf.RandomFourierFeatures(300, bandwidth=2.0, random_state=0).fit(X), loss="multinomial", alpha=1e-3,
        cache_features=True,
    )
    with pytest.raises(ValueError, match="finite|NaN|nan"):
        est.fit(bad, labels)
    assert wait_until_empty(client) == empty(client)


def test_nothing_stays_after_an_interrupt(client, data, monkeypatch):
    _, labels, stored = data
    calls = []
    original = logistic_passes._PassRunner.__call__

    def interrupted(self, spec):
        calls.append(1)
        if len(calls) == 3:  # the cache is full by now
            assert self._cache is not None and self._cache.cached
            raise KeyboardInterrupt
        return original(self, spec)

    monkeypatch.setattr(logistic_passes._PassRunner, "__call__", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _classifier("multinomial", "lbfgs", True).fit(stored[2500].X, labels)
    assert len(calls) == 3
    assert wait_until_empty(client) == empty(client)


def test_release_frees_the_blocks_and_numpy_cache(client, data):
    """The engine API on its own: blocks land on the workers, release removes them."""
    X, _, stored = data

    def double(Xb, out, start, factor):
        out[...] = factor * Xb

    plan = plan_cache(True, N, D, 8, dask_input=True, fraction=1 / 3)
    cache = feature_cache(stored[2500].X, double, (2.0,), D, np.float64, plan=plan, options=dxrf.get_options())
    assert cache.cached
    np.testing.assert_array_equal(cache.source(None).compute(), 2.0 * stored[2500].X.compute())
    assert sum(len(v) for v in held_keys(client).values()) >= 5
    cache.release()
    cache.release()  # idempotent
    assert wait_until_empty(client) == empty(client)
    with feature_cache(X, double, (3.0,), D, np.float64, plan=plan, options=dxrf.get_options(), unit_rows=7) as c:
        np.testing.assert_array_equal(c.source(X), 3.0 * X)
    assert c.source(X) is X
    off = feature_cache(X, double, (3.0,), D, np.float64, plan=plan_cache(False, N, D, 8, dask_input=False, fraction=0.5),
                        options=dxrf.get_options())
    assert not off.cached and off.source(X) is X


def test_cache_option_is_checked():
    with pytest.raises(ValueError, match="cache_features"):
        dxrf.options(cache_features="yes").__enter__()
    with pytest.raises(ValueError, match="cache_fraction"):
        dxrf.options(cache_fraction=0).__enter__()
    with pytest.raises(ValueError, match="cache_features"):
        _classifier("logistic", "auto", "sometimes").fit(np.zeros((10, 2)), np.arange(10) % 2)


# -- SGD: features computed row by row, so the cache holds exactly what every pass would compute ----------


def _sgd(kind: str, cache: object, mode: str = "sequential", dtype: str = "float32"):
    from dxrf.learners.sgd import RandomFeatureSGDClassifier, RandomFeatureSGDRegressor

    fmap = dxrf.RandomFourierFeatures(300, bandwidth=2.0, dtype=dtype, random_state=0)
    kw = dict(batch_size=64, max_passes=3, validation=0.2, early_stopping=False, mode=mode, random_state=0,
              cache_features=cache)
    if kind == "regression":
        return RandomFeatureSGDRegressor(fmap, **kw)
    return RandomFeatureSGDClassifier(fmap, loss="logistic", **kw)


def _assert_same_sgd(got, ref) -> None:
    assert ref.feature_cache_ == "recomputed" and got.feature_cache_ == "cached"
    assert got.n_passes_ == ref.n_passes_ and got.n_iter_ == ref.n_iter_
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)
    np.testing.assert_array_equal(got.validation_errors_, ref.validation_errors_)
    np.testing.assert_array_equal(got.train_errors_, ref.train_errors_)


@pytest.mark.parametrize(
    "kind, mode, rows",
    [("regression", "sequential", 2500), ("regression", "averaging", 4000), ("classification", "sequential", 4000),
     ("classification", "averaging", 2500)],
)
def test_cached_sgd_is_bitwise_the_uncached_one(client, data, kind, mode, rows):
    X, labels, stored = data
    y = np.sin(X[:, 0]) if kind == "regression" else labels
    ref = _sgd(kind, False, mode).fit(stored[rows].X, y)
    got = _sgd(kind, True, mode).fit(stored[rows].X, y)
    _assert_same_sgd(got, ref)
    assert got.feature_cache_bytes_ == N * 300 * 4
    assert wait_until_empty(client) == empty(client)


def test_numpy_cached_sgd_is_bitwise_the_uncached_one(data):
    X, _, _ = data
    y = np.sin(X[:, 0])
    _assert_same_sgd(_sgd("regression", True).fit(X, y), _sgd("regression", False).fit(X, y))


def test_float64_sgd_features_are_cached_only_when_asked(data):
    """A float64 product may round a row by where it falls in BLAS's blocking: "auto" recomputes, True is equal to rounding."""
    X, _, _ = data
    y = np.sin(X[:, 0])
    auto = _sgd("regression", "auto", dtype="float64").fit(X, y)
    assert auto.feature_cache_ == "recomputed" and auto.feature_cache_bytes_ == N * 300 * 8
    forced = _sgd("regression", True, dtype="float64").fit(X, y)
    assert forced.feature_cache_ == "cached"
    np.testing.assert_allclose(forced.coef_, auto.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(forced.validation_errors_, auto.validation_errors_, rtol=1e-12)


def test_sgd_cache_is_released_after_an_error_and_an_interrupt(client, data, monkeypatch):
    from dxrf.solvers import sgd_passes

    X, _, stored = data
    Xd = stored[2500].X
    row = da.arange(N, chunks=Xd.chunks[0]) == N - 10
    bad = da.where(row[:, None], np.nan, Xd)  # found by the last chunk's feature task
    est = _sgd("regression", True)
    with pytest.raises(ValueError, match="finite|NaN|nan"):
        est.fit(bad, np.sin(X[:, 0]))
    assert wait_until_empty(client) == empty(client)

    original = sgd_passes._Runner.epoch
    calls = []

    def interrupted(self, state, epoch, mode):
        calls.append(1)
        if len(calls) == 2:  # the cache is full by now
            assert self._cache is not None and self._cache.cached
            raise KeyboardInterrupt
        return original(self, state, epoch, mode)

    monkeypatch.setattr(sgd_passes._Runner, "epoch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _sgd("regression", True).fit(Xd, np.sin(X[:, 0]))
    assert len(calls) == 2
    assert wait_until_empty(client) == empty(client)

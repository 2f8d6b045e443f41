"""Tests of mini-batch SGD on random features (issue 4, item 4).

Reference solutions come from the exact ridge solve on the same features
(:func:`dxrf.learners.solve_ridge` on one pass of statistics). Distributed
runs use a real ``LocalCluster`` with worker processes on zarr arrays on disk
and must reproduce the in-process (threaded) run exactly for the same seed.
"""

from __future__ import annotations

import itertools
import tracemalloc

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from dask.utils import key_split
from distributed import Client, wait
from distributed.diagnostics.plugin import SchedulerPlugin
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import dxrf
from _weight_checks import weight_xfails
from dxrf import LeverageScoreSampler, RandomFourierFeatures, accumulate
from dxrf.cluster import local_cluster
from dxrf.solvers.ridge_path import solve_ridge
from dxrf.learners.sgd import (
    MAX_SELECTOR_CANDIDATES,
    RandomFeatureSGDClassifier,
    RandomFeatureSGDRegressor,
)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(2000, 2))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 3.0 + 0.1 * rng.normal(size=2000)  # non-zero mean on purpose
    return X, y


@pytest.fixture(scope="module")
def classification():
    rng = np.random.default_rng(1)
    centers = np.array([[0.0, 3.0], [3.0, -2.0], [-3.0, -2.0]])
    labels = rng.integers(0, 3, size=900)
    X = centers[labels] + rng.normal(size=(900, 2))
    return X, labels


@pytest.fixture(scope="module")
def cluster():
    # not the shared cluster: the placement test adds a scheduler plugin, and its
    # locality check failed more often on a scheduler with other work behind it
    with local_cluster(2) as c:
        yield c


def fourier(m: int = 40, bandwidth: float = 1.0, dtype: str = "float64", seed: int = 0) -> RandomFourierFeatures:
    return RandomFourierFeatures(m, bandwidth=bandwidth, dtype=dtype, random_state=seed)


# -- the algorithm ----------------------------------------------------------------------


def test_converges_towards_ridge_solution(regression):
    """Without a penalty, more passes bring SGD to the least-squares fit on the same features."""
    X, y = regression
    gaps = []
    for passes in (1, 4, 16, 64):
        est = RandomFeatureSGDRegressor(
            fourier(), max_passes=passes, validation=None, early_stopping=False, random_state=0
        ).fit(X, y)
        coef, intercept = solve_ridge(accumulate(X, y, est.kernel_), alpha=1e-8)
        ridge_pred = est.kernel_(X) @ coef[:, 0] + intercept[0]
        gaps.append(np.mean((est.predict(X) - ridge_pred) ** 2))
        assert est.n_epochs_ == passes and est.n_passes_ == passes
    assert all(a > b for a, b in itertools.pairwise(gaps)), gaps
    assert gaps[-1] < 0.05 * gaps[0]
    assert gaps[-1] < 0.01 * np.var(y)  # within a band of the exact solution


def test_update_rule_matches_a_dense_reference():
    """One pass over one chunk, no shuffling: the textbook mini-batch recursion."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 3))
    Y = rng.normal(size=(50, 2))
    est = RandomFeatureSGDRegressor(
        fourier(8), step_size=0.3, batch_size=7, max_passes=1, validation=None,
        early_stopping=False, shuffle=False, random_state=0,
    ).fit(X, Y)
    Z = est.kernel_(X)
    v, beta = np.zeros((8, 2)), Y.mean(axis=0)
    for lo in range(0, 50, 7):
        Zb, Yb = Z[lo : lo + 7], Y[lo : lo + 7]
        G = Zb @ v + beta - Yb
        v = v - 0.3 / len(Zb) * Zb.T @ G
        beta = beta - 0.3 * G.mean(axis=0)
    np.testing.assert_allclose(est.coef_, v, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(est.intercept_, beta, rtol=1e-12)
    assert est.n_iter_ == 8 and est.predict(X).shape == (50, 2)


def test_early_stopping_returns_the_best_pass():
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(600, 2))
    y = np.sin(2 * X[:, 0]) + 0.7 * rng.normal(size=600)  # noisy: many features overfit
    params = {"step_size": 1.0, "batch_size": 8, "patience": 3, "random_state": 0}
    est = RandomFeatureSGDRegressor(fourier(600, 0.3, "float32"), max_passes=60, **params).fit(X, y)
    errors = est.validation_errors_
    assert est.n_epochs_ < 60  # it stopped
    assert est.best_epoch_ == int(np.argmin(errors)) > 0
    assert est.n_epochs_ == est.best_epoch_ + est.patience + 1
    assert len(errors) == est.n_epochs_  # the iterate of the last pass was never evaluated
    assert est.n_passes_ == est.n_epochs_  # no extra read for validation
    # the returned model is the iterate after best_epoch_ passes
    again = RandomFeatureSGDRegressor(
        fourier(600, 0.3, "float32"), max_passes=est.best_epoch_, early_stopping=False, **params
    ).fit(X, y)
    np.testing.assert_array_equal(est.coef_, again.coef_)
    np.testing.assert_array_equal(est.intercept_, again.intercept_)
    # without early stopping every pass runs and one last read evaluates the last iterate
    full = RandomFeatureSGDRegressor(fourier(600, 0.3, "float32"), max_passes=10, early_stopping=False, **params).fit(X, y)
    assert full.n_epochs_ == 10 and len(full.validation_errors_) == 11 and full.n_passes_ == 11
    np.testing.assert_allclose(full.validation_errors_[: len(errors)], errors)


@pytest.mark.parametrize("lazy", [False, True])
def test_validation_rows_never_update_the_model(regression, lazy):
    X, y = regression
    mask = np.zeros(len(y), dtype=bool)
    mask[::4] = True
    y_other = y.copy()
    y_other[mask] += 100.0
    if lazy:
        X, y, y_other, mask = (da.from_array(a, chunks=500) for a in (X, y, y_other, mask))
    fits = [
        RandomFeatureSGDRegressor(fourier(), max_passes=3, validation=mask, early_stopping=False, random_state=0).fit(X, t)
        for t in (y, y_other)
    ]
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
    assert fits[1].validation_errors_[-1] > 100 * fits[0].validation_errors_[-1]


def test_numpy_equals_dask_with_one_chunk(regression):
    X, y = regression
    est = RandomFeatureSGDRegressor(fourier(), max_passes=3, random_state=0, early_stopping=False)
    a = est.fit(X, y).coef_.copy()
    b = est.fit(da.from_array(X, chunks=-1), da.from_array(y, chunks=-1)).coef_
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_large_m_without_any_m_by_m_object():
    """M = 50,000: memory stays O(M b), far below one M x M Gram (20 GB)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] + 0.1 * rng.normal(size=300)
    m = 50_000
    est = RandomFeatureSGDRegressor(
        RandomFourierFeatures(m, bandwidth=2.0, random_state=0), max_passes=2, batch_size=16, random_state=0
    )
    tracemalloc.start()
    try:
        est.fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200 * 2**20, peak / 2**20  # MiB; one Gram would be 20,000 MiB
    assert est.coef_.shape == (m, 1) and np.all(np.isfinite(est.coef_))
    assert est.n_passes_ == 3  # two SGD passes and the final validation read: no statistics pass
    assert est.validation_errors_[-1] < est.validation_errors_[0]


# -- on a cluster ------------------------------------------------------------------------


def _to_zarr(path, a: np.ndarray, rows: int) -> da.Array:
    arr = zarr.create_array(str(path), shape=a.shape, chunks=(rows,) + a.shape[1:], dtype=a.dtype)
    arr[...] = a
    return da.from_zarr(str(path))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cluster_on_zarr_equals_threaded_run(regression, cluster, tmp_path, dtype):
    X, y = regression
    Xz, yz = _to_zarr(tmp_path / "X.zarr", X, 250), _to_zarr(tmp_path / "y.zarr", y, 250)
    Xm, ym = da.from_array(X, chunks=250), da.from_array(y, chunks=250)
    results = {}
    for mode in ("sequential", "averaging"):
        est = RandomFeatureSGDRegressor(fourier(dtype=dtype), max_passes=3, mode=mode, random_state=4)
        with dask.config.set(scheduler="threads"):
            ref = est.fit(Xm, ym)
            ref_coef, ref_val = ref.coef_.copy(), ref.validation_errors_.copy()
        with Client(cluster):
            got = est.fit(Xz, yz)
            pred = got.predict(Xz)
            assert isinstance(pred, da.Array)
            pred = pred.compute()
        # same chunks, same seed: the same arithmetic in the same order
        np.testing.assert_array_equal(got.coef_, ref_coef)
        np.testing.assert_array_equal(got.validation_errors_, ref_val)
        np.testing.assert_allclose(pred, got.predict(X), rtol=1e-6 if dtype == "float32" else 1e-12)
        results[mode] = got
    # the modes differ, but both learn
    assert not np.array_equal(results["sequential"].coef_, results["averaging"].coef_)
    for got in results.values():
        assert got.validation_errors_[-1] < 0.5 * got.validation_errors_[0]


class _Placement(SchedulerPlugin):
    """Records, for every finished link of the SGD chain, its worker and its largest input's holders."""

    name = "dxrf-sgd-placement"

    def __init__(self) -> None:
        self.records: list = []

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if start == "processing" and finish == "memory" and key_split(key) == "sgd_chunk":
            deps = self.scheduler.tasks[key].dependencies
            biggest = max(deps, key=lambda dep: dep.nbytes)
            self.records.append((kwargs.get("worker"), biggest.nbytes, {ws.address for ws in biggest.who_has}))


@pytest.mark.parametrize("cache", [False, True])
def test_chain_runs_where_the_chunks_live(regression, cluster, cache):
    """Each chunk's link runs on the worker holding the chunk (or its cached features): the state moves, not the data."""
    X, y = regression
    # Chunks of 1 MB, as real ones are, against a state of about 200 bytes: the scheduler
    # weighs a move by bytes over bandwidth (10 ms here), which an idle worker's
    # occupancy never outweighs. With 13 kB chunks (0.1 ms) the choice was timing noise.
    X8 = np.hstack([X, np.zeros((len(X), 638))])
    with Client(cluster) as client:
        client.register_plugin(_Placement())
        # the chunks placed alternately on the two workers: left to the scheduler, a loaded
        # machine could put them all on one, and the test would not test placement
        workers = sorted(client.scheduler_info()["workers"])
        blocks = [X8[i : i + 200] for i in range(0, len(X8), 200)]
        held = [client.scatter(b, workers=[workers[i % 2]]) for i, b in enumerate(blocks)]
        Xp = da.concatenate([da.from_delayed(f, shape=b.shape, dtype=b.dtype) for f, b in zip(held, blocks)]).persist()
        wait(Xp)
        holder = {key: workers[0] for key, workers in client.who_has(Xp).items()}
        assert len(set(holder.values())) == 2  # spread over both workers
        m = 400 if cache else 20  # cached features of 200 x 400 float32 rows (320 kB) outweigh the state too
        est = RandomFeatureSGDRegressor(fourier(m), max_passes=2, random_state=0, cache_features=cache).fit(Xp, y)
        records = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.plugins[_Placement.name].records)
    assert est.feature_cache_ == ("cached" if cache else "recomputed")
    assert len(records) == 2 * len(holder)  # one link per chunk and pass
    for worker, nbytes, holders in records:
        assert nbytes >= 200 * m * 4  # the chunk or its features, not the state
        assert worker in holders
    assert est.n_epochs_ == 2 and len(est.validation_errors_) == 3


def test_averaging_is_close_to_sequential(regression):
    X, y = regression
    Xd, yd = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    kw = {"max_passes": 10, "early_stopping": False, "random_state": 0}
    seq = RandomFeatureSGDRegressor(fourier(), **kw).fit(Xd, yd)
    avg = RandomFeatureSGDRegressor(fourier(), mode="averaging", **kw).fit(Xd, yd)
    # averaging 4 chunks makes about a quarter of the sequential progress per pass
    assert np.all(np.diff(avg.validation_errors_) < 0)
    assert avg.validation_errors_[-1] < 3 * seq.validation_errors_[-1]
    assert avg.validation_errors_[-1] < 0.1 * np.var(y)
    assert avg.n_iter_ == seq.n_iter_  # the same updates, made in parallel


# -- features -------------------------------------------------------------------------


def test_selector_features_use_one_candidate_pass(regression):
    X, y = regression
    est = RandomFeatureSGDRegressor(
        LeverageScoreSampler(30, n_candidates=150, lam=1e-3, random_state=0), max_passes=3, early_stopping=False, random_state=0
    ).fit(X, y)
    assert est.coef_.shape == (30, 1)
    assert est.n_passes_ == 1 + 3 + 1  # candidate statistics, SGD passes, final validation read
    too_big = LeverageScoreSampler(100, n_candidates=MAX_SELECTOR_CANDIDATES + 1)
    with pytest.raises(ValueError, match="n_candidates"):
        RandomFeatureSGDRegressor(too_big).fit(X, y)


# -- classification -----------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["squared", "hinge", "logistic"])
def test_classifier_losses(classification, loss):
    X, labels = classification
    names = np.array(["a", "b", "c"])[labels]
    clf = RandomFeatureSGDClassifier(fourier(100, 2.0), loss=loss, max_passes=5, random_state=0).fit(X, names)
    assert list(clf.classes_) == ["a", "b", "c"]
    assert clf.score(X, names) > 0.9
    assert clf.decision_function(X).shape == (len(X), 3)
    assert hasattr(clf, "predict_proba") == (loss == "logistic")
    # binary: one score column, sign decides
    two = labels < 2
    binary = RandomFeatureSGDClassifier(fourier(100, 2.0), loss=loss, max_passes=5, random_state=0).fit(X[two], labels[two])
    assert binary.coef_.shape == (100, 1) and binary.decision_function(X[two]).shape == (two.sum(),)
    assert binary.score(X[two], labels[two]) > 0.9
    np.testing.assert_array_equal(binary.predict(X[two]), (binary.decision_function(X[two]) > 0).astype(int))
    if loss == "logistic":
        proba = clf.predict_proba(X)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        np.testing.assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(X))


def test_classifier_accepts_dask_and_predicts_lazily(classification):
    X, labels = classification
    Xd, yd = da.from_array(X, chunks=300), da.from_array(labels, chunks=300)
    clf = RandomFeatureSGDClassifier(fourier(100, 2.0), loss="logistic", max_passes=3, random_state=0)
    lazy = clf.fit(Xd, yd)
    outputs = [lazy.predict(Xd), lazy.predict_proba(Xd), lazy.decision_function(Xd)]
    assert all(isinstance(o, da.Array) for o in outputs)
    np.testing.assert_array_equal(outputs[0].compute(), lazy.predict(X))
    np.testing.assert_allclose(outputs[1].compute(), lazy.predict_proba(X), rtol=1e-12)
    assert (outputs[0].compute() == labels).mean() > 0.9


# -- ecosystem ------------------------------------------------------------------------


@parametrize_with_checks(
    [
        RandomFeatureSGDRegressor(),
        RandomFeatureSGDClassifier(),
        RandomFeatureSGDClassifier(loss="hinge"),
        RandomFeatureSGDClassifier(loss="logistic"),
        # a numeric bandwidth: partial_fit can fix the features at its first call
        RandomFeatureSGDRegressor(RandomFourierFeatures(100, bandwidth=3.0, random_state=0)),
        RandomFeatureSGDClassifier(RandomFourierFeatures(100, bandwidth=3.0, random_state=0)),
    ],
    expected_failed_checks=weight_xfails,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_pipeline_and_grid_search(regression, classification):
    X, y = regression
    pipe = make_pipeline(StandardScaler(), RandomFeatureSGDRegressor(fourier(), max_passes=3, random_state=0))
    search = GridSearchCV(pipe, {"randomfeaturesgdregressor__batch_size": [16, 64]}, cv=2).fit(X, y)
    assert search.best_score_ > 0.5
    Xc, labels = classification
    search = GridSearchCV(
        RandomFeatureSGDClassifier(fourier(50, 2.0), max_passes=3, random_state=0), {"loss": ["hinge", "logistic"]}, cv=2
    ).fit(Xc, labels)
    assert search.best_score_ > 0.9


def test_save_and_load_round_trip(regression, classification, tmp_path):
    X, y = regression
    reg = RandomFeatureSGDRegressor(fourier(), max_passes=3, random_state=0).fit(X, np.c_[y, -y])
    reg.save(tmp_path / "reg")
    loaded = dxrf.load(tmp_path / "reg")
    assert type(loaded) is RandomFeatureSGDRegressor
    np.testing.assert_array_equal(loaded.predict(X), reg.predict(X))
    np.testing.assert_array_equal(loaded.validation_errors_, reg.validation_errors_)
    assert loaded.n_passes_ == reg.n_passes_ and loaded.get_params()["max_passes"] == 3
    Xc, labels = classification
    clf = RandomFeatureSGDClassifier(fourier(50, 2.0), loss="logistic", validation=None, early_stopping=False, max_passes=2, random_state=0)
    clf.fit(Xc, np.array(["x", "y", "z"])[labels])
    clf.save(tmp_path / "clf")
    back = dxrf.load(tmp_path / "clf")
    np.testing.assert_array_equal(back.predict(Xc), clf.predict(Xc))
    np.testing.assert_array_equal(back.predict_proba(Xc), clf.predict_proba(Xc))
    assert back.validation_errors_.shape == (0,)


@pytest.mark.parametrize(
    "params,name",
    [
        ({"loss": "hinge"}, "loss"),
        ({"step_size": 0}, "step_size"),
        ({"step_size": "big"}, "step_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"max_passes": 1.5}, "max_passes"),
        ({"patience": -1}, "patience"),
        ({"tol": -1.0}, "tol"),
        ({"mode": "parallel"}, "mode"),
        ({"validation": 1.5}, "validation"),
        ({"validation": None}, "early_stopping"),
        ({"shuffle": "yes"}, "shuffle"),
    ],
)
def test_bad_parameters_name_themselves(regression, params, name):
    X, y = regression
    with pytest.raises(ValueError, match=name):
        RandomFeatureSGDRegressor(**params).fit(X[:100], y[:100])


def test_divergence_is_reported(regression):
    X, y = regression
    with pytest.raises(FloatingPointError, match="step_size"):
        RandomFeatureSGDRegressor(fourier(), step_size=50.0, max_passes=5, random_state=0).fit(X, y)

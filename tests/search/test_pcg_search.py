"""The search by conjugate gradient: a Nyström grid validated and refitted without M x M statistics."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client

import dxrf
from dxrf.features.nystroem import landmark_gram, landmark_kernel
from dxrf.search.growth import GrowthBudget, Stage, grow
from dxrf.search.pcg_search import search_estimate

#: a grid whose landmarks' kernel is well resolved (short lengthscales, M << N): there the Gram
#: plan's eigendecomposition drops no direction, so both plans solve the same problem
GRID = dict(bandwidths=[0.5, 0.8], n_components=[40, 120], features="nystroem", cv=0.2,
            alphas=[1e-3, 1e-2, 1e-1], random_state=0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 4))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=2000)
    w = rng.uniform(0.5, 2.0, size=2000)
    return X, y, w


@pytest.fixture(scope="module")
def both(data):
    X, y, w = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # choices at the grid's edges
        return [dxrf.RandomFeatureRidgeCV(nystroem_solver=s, **GRID).fit(X, y, sample_weight=w) for s in ("gram", "pcg")]


#: each penalty stops once its hold-out MSE moves by less than 1e-4 relative per iteration (five in a
#: row, SEARCH_VALIDATION_TOL): the scores agree with the Gram's exact ones to about a tenth of that
AGREE = 3e-5


def test_the_conjugate_gradient_validates_the_grid_as_the_gram_plan_does(both):
    gram, cg = both
    assert (gram.search_solver_, cg.search_solver_) == ("gram", "pcg")
    for key in ("mean_validation_mse", "mean_test_score"):
        np.testing.assert_allclose(cg.cv_results_[key], gram.cv_results_[key], rtol=AGREE)
    assert cg.best_params_ == gram.best_params_ and cg.alpha_ == gram.alpha_
    np.testing.assert_allclose(cg.validation_errors_, gram.validation_errors_, rtol=AGREE)
    # the race, then each configuration's passes (the first and one per iteration); no refit pass
    assert gram.n_passes_ == 2 and cg.n_passes_ > 2 * 4
    assert cg.search_plan_estimate_["plan"] == "gram"  # forced: its estimate says the Gram is cheaper here
    np.testing.assert_allclose(cg.train_mse_, gram.train_mse_, rtol=AGREE)
    np.testing.assert_allclose(cg.noise_, gram.noise_, rtol=AGREE)


def test_the_chosen_model_is_the_all_rows_solve_of_the_nystroem_system(data, both):
    """The model is the conjugate gradient's solution on all rows: a dense solve of the same system."""
    X, y, w = data
    _, cg = both
    L = np.ascontiguousarray(cg.kernel_.W)  # d x M, the chosen landmarks
    bw = cg.bandwidth_
    Kn = landmark_kernel(L, "gaussian", bw, whiten=False).base(X)
    K = landmark_gram(L, "gaussian", bw)
    S = w.sum()
    kb, yb = w @ Kn / S, w @ y / S
    C = (Kn * w[:, None]).T @ Kn / S - np.outer(kb, kb)
    c = (Kn * w[:, None]).T @ y / S - kb * yb
    beta = np.linalg.solve(C + cg.alpha_ * K, c)
    want = Kn @ beta + (yb - kb @ beta)
    got = cg.predict(X)
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()
    assert cg.kernel_.n_components == cg.best_params_["n_components"]


def test_dask_from_zarr_on_a_cluster_equals_numpy_over_two_chunkings(data, tmp_path, cluster2):
    X, y, _ = data
    kw = dict(GRID, bandwidths=[0.8], n_components=[60], alphas=[1e-2, 1e-1], nystroem_solver="pcg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = dxrf.RandomFeatureRidgeCV(**kw).fit(X, y)
        path = str(tmp_path / "X.zarr")
        zarr.create_array(path, shape=X.shape, chunks=(300, 4), dtype="float64")[:] = X
        with Client(cluster2):
            fits = [dxrf.RandomFeatureRidgeCV(**kw).fit(da.from_zarr(path).rechunk((rows, 4)), da.from_array(y, chunks=rows))
                    for rows in (300, 700)]
            preds = [f.predict(da.from_zarr(path)).compute() for f in fits]
    for fit, pred in zip(fits, preds):
        assert fit.search_solver_ == "pcg" and fit.n_passes_ == ref.n_passes_
        np.testing.assert_allclose(fit.cv_results_["mean_validation_mse"], ref.cv_results_["mean_validation_mse"], rtol=1e-6)
        np.testing.assert_allclose(pred, ref.predict(X), rtol=1e-6, atol=1e-8)


@pytest.mark.filterwarnings("ignore:the chosen alpha")
def test_a_grid_whose_statistics_cannot_fit_the_workers_is_solved_by_conjugate_gradient(make_cluster):
    """M = 4000 landmarks: 2 x 250 MiB of Gram partials per worker against 400 MiB; the CG holds M-vectors.

    And M = 2000, whose two partials fit but whose tree merge would not.
    """
    rng = np.random.default_rng(1)
    X = da.from_array(rng.normal(size=(8000, 3)), chunks=2000)
    y = da.sin(X[:, 0])
    kw = dict(bandwidths=[1.0], n_components=[4000], features="nystroem", cv=0.2, alphas=[1e-4, 1e-3], random_state=0)
    # a worker process holds ~300 MiB of its own before any task: it must not pause at 80 % of its limit
    quiet = {"distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": False}
    with dask.config.set(quiet), Client(make_cluster(1, memory_limit="400MiB")):
        with pytest.warns(UserWarning, match=r"per worker .*; so the search solves each configuration by "
                                             r"conjugate gradient \(no M x M statistics\)"):
            est = dxrf.RandomFeatureRidgeCV(**kw).fit(X, y)
        assert est.search_solver_ == "pcg" and est.kernel_.n_components == 4000
        assert np.isfinite(est.best_score_) and est.best_score_ > 0.9
        # M = 2000: two partials of 63 MiB fit, but a merge holds split_every + 1 = 9 of them
        with pytest.warns(UserWarning, match=r"n_components=2000 .* needs about .* per worker to merge its statistics "
                                             r"\(9 partial results of .*; so the search solves each configuration by "
                                             r"conjugate gradient"):
            two = dxrf.RandomFeatureRidgeCV(**dict(kw, n_components=[2000])).fit(X, y)
        assert two.search_solver_ == "pcg"
        with pytest.raises(ValueError, match=r"smallest worker's memory limit"):
            dxrf.RandomFeatureRidgeCV(nystroem_solver="gram", **kw).fit(X, y)
        with pytest.raises(ValueError, match=r"smallest worker's memory limit"):  # k folds: no CG
            dxrf.RandomFeatureRidgeCV(**dict(kw, cv=3)).fit(X, y)


def test_a_growing_search_grows_by_conjugate_gradient(data, monkeypatch):
    X, y, _ = data
    monkeypatch.setattr("dxrf.search.growth.FIRST_STAGE_MAX", 200)  # a second stage on 2000 rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est = dxrf.RandomFeatureRidgeCV(bandwidths=[0.8], cv=0.2, alphas=[1e-3, 1e-2, 1e-1], max_components=400,
                                        time_budget=None, nystroem_solver="pcg", random_state=0).fit(X, y)
    stages = est.growth_["stages"]
    assert [s["n_components"] for s in stages] == [[25, 50, 100, 200], [400]]
    assert [s["solver"] for s in stages] == ["pcg", "pcg"] and est.search_solver_ == "pcg"
    assert est.growth_["stop_reason"] in ("max_components=400 reached", "M=400 validated within 1% of M=200")
    assert est.n_passes_ > 5 * 2  # the race, then each configuration's conjugate gradient
    assert est.kernel_.n_components == est.best_params_["n_components"]
    assert np.isfinite(est.predict(X[:5])).all()


def test_a_growth_that_changes_plan_predicts_by_the_plans_operations():
    """A Gram stage of 10 s at 4e9 operations, then a CG stage estimated at 2e9: 5 s."""
    def run(ms, first):
        return "outcome", Stage(list(ms), {m: 1.0 / m for m in ms}, 1, 6.0, 3.0, 10.0, "gram", 4e9)

    plans = {2000: ("pcg", 2e9)}
    g = grow(run, [500, 1000], 10**6, GrowthBudget(time_budget=14.0), fits=lambda m: plans.get(m),
             clock=lambda: 10.0)
    assert g.stop_reason == "M=2000 was predicted to take 5 s, past time_budget=14 s (10 s spent)"
    g = grow(run, [500, 1000], 10**6, GrowthBudget(time_budget=None), fits=lambda m: plans.get(m))
    assert g.stop_reason == "M=4000 would not fit the workers' memory" and len(g.stages) == 2


def test_the_classifier_searches_by_conjugate_gradient():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, 3))
    y = np.select([X[:, 0] > 0.6, X[:, 1] > 0.3], ["a", "b"], "c")
    kw = dict(bandwidths=[0.6], n_components=[50, 100], features="nystroem", cv=0.25, alphas=[1e-3, 1e-2],
              random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        gram = dxrf.RandomFeatureClassifierCV(nystroem_solver="gram", **kw).fit(X, y)
        cg = dxrf.RandomFeatureClassifierCV(nystroem_solver="pcg", **kw).fit(X, y)
        logistic = dxrf.RandomFeatureClassifierCV(nystroem_solver="pcg", loss="logistic", **kw).fit(X, y)
    np.testing.assert_allclose(cg.cv_results_["mean_test_score"], gram.cv_results_["mean_test_score"], rtol=1e-5)
    assert cg.best_params_ == gram.best_params_
    assert (cg.predict(X) == gram.predict(X)).mean() > 0.999
    assert logistic.search_solver_ == "pcg" and logistic.n_iter_ >= 1 and logistic.score(X, y) > 0.9


@pytest.mark.parametrize("kw,match", [
    (dict(cv=3), r"nystroem_solver='pcg' cannot run this search: it validates on a hold-out"),
    (dict(cv="evidence"), r"cannot run this search: it validates on a hold-out"),
    (dict(features="fourier"), r"cannot run this search: it solves Nyström features only"),
    (dict(keep_models=True), r"cannot run this search: keep_models=True"),
    (dict(store_posterior=True), r"nystroem_solver='pcg' forms no statistics: store_posterior=True"),
    (dict(nystroem_solver="cg"), r"nystroem_solver"),
])
def test_bad_settings_are_refused_with_the_reason(data, kw, match):
    X, y, _ = data
    params = dict(GRID, n_components=[40], nystroem_solver="pcg")
    params.update(kw)
    with pytest.raises(ValueError, match=match):
        dxrf.RandomFeatureRidgeCV(**params).fit(X[:400], y[:400])


def test_the_plan_estimate_takes_the_conjugate_gradient_at_large_n_and_m():
    def settings(ms, n):
        return dxrf.RandomFeatureRidgeCV(bandwidths=[1.0], n_components=ms, features="nystroem", cv=0.2)._settings(n, 8)

    big = search_estimate(settings([40000], 3_000_000), 3_000_000, 8, 1, dask_input=True)
    small = search_estimate(settings([1000], 40_000), 40_000, 8, 1, dask_input=False)
    assert big["plan"] == "pcg" and big["pcg_ops"] < big["gram_ops"]
    assert small["plan"] == "gram" and small["gram_ops"] < small["pcg_ops"]

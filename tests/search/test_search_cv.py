"""The model search from one pass: RandomFeatureRidgeCV and RandomFeatureClassifierCV."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import dxrf
from _weight_checks import weight_xfails
from dxrf.engine import hashed_folds
from dxrf.solvers.ridge_path import mse_from_stats, solve_ridge
from dxrf.search import check_grid, parse_bandwidth
from dxrf.workflows.bench_fig2_grid import counted, take_reads

SELECTIONS = ["none", "elss-sample", "elss-top", "eerf", "lkrf", "lkrf-top"]


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2400, 4))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 3.0 + 0.1 * rng.normal(size=2400)
    return X, y


def rel(a, b):
    return abs(a - b) / abs(b)


def separate_validation_mse(X, y, params, *, m0, bandwidth, mask, seed, task="regression"):
    """One configuration fitted on its own, the way a user would without the search: one pass."""
    base = dxrf.RandomFourierFeatures(m0, bandwidth=bandwidth, dtype="float64", random_state=seed)
    m, alpha, sel = params["n_components"], params["alpha"], params["selection"]
    if sel == "none":
        kernel = base.fit(X).kernel_.subset(np.arange(m), np.full(m, np.sqrt(m0 / m)))
        train, valid = dxrf.accumulate(X, y, kernel, split=mask)
        coef, b = solve_ridge(train, alpha)
        return float(mse_from_stats(valid, coef, b).mean())
    kw = {"n_candidates": m0, "base": base, "random_state": seed}
    if sel.startswith("elss"):
        features = dxrf.LeverageScoreSampler(m, lam=params["lam"], method=sel.split("-")[1], **kw)
    elif sel == "eerf":
        features = dxrf.EnergyScoreSelector(m, **kw)
    else:
        method = "top" if sel == "lkrf-top" else "sample"
        features = dxrf.KernelAlignmentSelector(m, rho=params["rho"], method=method, **kw)
    model = dxrf.RandomFeatureRidge(features, alpha=alpha, validation=mask).fit(X, y)
    return float(model.validation_errors_[0])


def small_search(**kw):
    params = dict(
        bandwidths=[0.7, 1.5], n_components=[10, 25], selections=SELECTIONS, lams=[1e-4, 1e-2], rhos=[0.5],
        alphas=[1e-5, 1e-3, 1e-1], n_candidates=60, dtype="float64", random_state=7,
    )
    params.update(kw)
    return dxrf.RandomFeatureRidgeCV(**params)


def test_every_configuration_equals_its_separate_fit(regression):
    """Each validation error of the search equals a separate fit of that configuration on the same rows."""
    X, y = regression
    mask = np.random.default_rng(0).random(X.shape[0]) < 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search = small_search(cv=mask).fit(X, y)
    res = search.cv_results_
    assert search.n_passes_ == 1
    assert len(res["params"]) == 2 * (1 + 2 + 2 + 1 + 1 + 1) * 2 * 3
    rng = np.random.default_rng(1)
    # every selection at least once, plus the chosen configuration
    picks = {search.best_index_}
    for sel in SELECTIONS:
        picks.add(int(rng.choice(np.flatnonzero(res["param_selection"] == sel))))
    for i in sorted(picks):
        p = res["params"][i]
        got = res["mean_validation_mse"][i]
        ref = separate_validation_mse(X, y, p, m0=60, bandwidth=res["bandwidth_value"][i], mask=mask, seed=7)
        assert rel(got, ref) <= 1e-10, (p, got, ref)
    # the scores are R^2 on the validation rows
    yv = y[mask]
    i = search.best_index_
    assert np.isclose(res["mean_test_score"][i], 1 - res["mean_validation_mse"][i] / yv.var(), rtol=1e-12)
    assert search.best_score_ == res["mean_test_score"][i] == res["mean_test_score"].max()
    assert res["rank_test_score"][i] == 1


def test_kfold_equals_separate_holdouts(regression):
    """Fold j's errors from the one k-fold pass equal a hold-out search on fold j's rows."""
    X, y = regression
    kw = dict(selections=["none", "elss-top", "eerf"], lams=[1e-3], n_candidates=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        kfold = small_search(cv=3, cv_seed=5, **kw).fit(X, y)
        folds = hashed_folds(0, X.shape[0], 3, 5)
        for j in range(3):
            hold = small_search(cv=folds == j, **kw).fit(X, y)
            np.testing.assert_allclose(
                kfold.cv_results_[f"split{j}_validation_mse"], hold.cv_results_["mean_validation_mse"], rtol=1e-9
            )
    assert kfold.n_splits_ == 3 and kfold.n_passes_ == 1
    mean = np.mean([kfold.cv_results_[f"split{j}_test_score"] for j in range(3)], axis=0)
    np.testing.assert_allclose(kfold.cv_results_["mean_test_score"], mean, rtol=1e-12)


def test_refit_is_the_chosen_configuration_on_all_rows(regression):
    X, y = regression
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search = small_search(selections=["elss-sample"], cv=0.25).fit(X, y)
    p = search.best_params_
    base = dxrf.RandomFourierFeatures(60, bandwidth=search.bandwidth_, dtype="float64", random_state=7)
    features = dxrf.LeverageScoreSampler(p["n_components"], n_candidates=60, lam=p["lam"], base=base, random_state=7)
    ref = dxrf.RandomFeatureRidge(features, alpha=p["alpha"]).fit(X, y)
    np.testing.assert_array_equal(search.features_.selected_, ref.features_.selected_)
    np.testing.assert_allclose(search.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(search.predict(X), ref.predict(X), rtol=1e-9, atol=1e-12)
    assert search.score(X, y) == pytest.approx(ref.score(X, y), rel=1e-10)


def _to_zarr(path, a, rows):
    arr = zarr.create_array(str(path), shape=a.shape, chunks=(rows,) + a.shape[1:], dtype=a.dtype)
    arr[...] = a
    return da.from_zarr(str(path))


def test_on_a_cluster_from_zarr_with_passes_counted(regression, cluster2, tmp_path):
    """From zarr on a LocalCluster of processes: the same search as in memory, one read of X (two with a median)."""
    X, y = regression
    Xz = counted(_to_zarr(tmp_path / "X.zarr", X, 300), "X")
    yz = _to_zarr(tmp_path / "y.zarr", y, 300)
    chunks = Xz.numblocks[0]
    mask = hashed_folds(0, X.shape[0], 4, 1) == 0
    kw = dict(selections=["none", "elss-top", "lkrf"], lams=[1e-3], cv=mask)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        local = small_search(**kw).fit(X, y)
        with Client(cluster2) as client:
            take_reads(client)
            got = small_search(**kw).fit(Xz, yz)
            assert take_reads(client).get("X", 0) == chunks == got.n_passes_ * chunks
            med = small_search(bandwidths=["median*0.5", "median"], **kw).fit(Xz, yz)
            assert med.n_passes_ == 2 and take_reads(client).get("X", 0) == 2 * chunks
            pred = got.predict(Xz)
            assert isinstance(pred, da.Array)
            pred = pred.compute()
    assert got.best_params_ == local.best_params_
    np.testing.assert_allclose(got.cv_results_["mean_validation_mse"], local.cv_results_["mean_validation_mse"], rtol=1e-10)
    # the chosen configuration, fitted on its own on the same split
    i = got.best_index_
    ref = separate_validation_mse(X, y, got.best_params_, m0=60, bandwidth=got.bandwidth_, mask=mask, seed=7)
    assert rel(got.cv_results_["mean_validation_mse"][i], ref) <= 1e-10
    np.testing.assert_allclose(pred, local.predict(X), rtol=1e-9, atol=1e-12)
    # the median heuristic is the same as the feature map's
    probe = dxrf.RandomFourierFeatures(1, bandwidth="median", random_state=7).fit(X)
    assert med.median_bandwidth_ == pytest.approx(probe.bandwidth_, rel=1e-12)


def test_classifier_search_and_logistic_refit():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1500, 3))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4, "out", "in")
    kw = dict(bandwidths=[0.5, 1.0, 2.0], n_components=[20, 60], selections=["none", "elss-top"],
              alphas=[1e-4, 1e-2], cv=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sq = dxrf.RandomFeatureClassifierCV(**kw).fit(X, y)
        lg = dxrf.RandomFeatureClassifierCV(loss="logistic", **kw).fit(X, y)
    assert sq.n_passes_ == 1 and lg.n_passes_ > 1
    assert sq.best_params_ == lg.best_params_
    assert sq.score(X, y) > 0.9 and lg.score(X, y) > 0.9
    proba = lg.predict_proba(X[:5])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert not hasattr(sq, "predict_proba")
    # the scores are the R^2 of the +-1 class column
    res = sq.cv_results_
    assert res["mean_test_score"].max() == sq.best_score_ < 1


def test_save_load_and_edge_warnings(regression, tmp_path):
    X, y = regression
    with pytest.warns(UserWarning, match="the chosen alpha=1e-08 is the smallest of alphas"):
        m = dxrf.RandomFeatureRidgeCV(bandwidths=[1.0], n_components=[40], alphas=[1e-8, 1e-2, 1.0], cv=0.2,
                                      random_state=0).fit(X, y)
    m.save(tmp_path / "m.zarr")
    back = dxrf.load(tmp_path / "m.zarr")
    assert type(back) is dxrf.RandomFeatureRidgeCV
    assert back.best_params_ == m.best_params_
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
    np.testing.assert_array_equal(back.cv_results_["mean_test_score"], m.cv_results_["mean_test_score"])


def test_edge_warnings_name_each_axis(regression):
    X, y = regression
    with pytest.warns(UserWarning) as record:
        dxrf.RandomFeatureRidgeCV(bandwidths=[0.05, 0.1], n_components=[5, 10], alphas=[1.0, 10.0], cv=0.2,
                                  random_state=0).fit(X, y)
    text = " ".join(str(w.message) for w in record)
    assert "chosen bandwidth=" in text and "chosen n_components=" in text and "alpha=1 is the smallest of alphas" in text


def test_pipeline(regression):
    X, y = regression
    pipe = make_pipeline(StandardScaler(), dxrf.RandomFeatureRidgeCV(n_components=[30, 100], cv=3, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        pipe.fit(X, y)
    assert pipe.score(X, y) > 0.8


@pytest.mark.parametrize(
    "params, match",
    [
        ({"bandwidths": []}, "bandwidths must be a non-empty list"),
        ({"bandwidths": [1.0, -2.0]}, "bandwidths must hold positive"),
        ({"bandwidths": ["mean*2"]}, "bandwidths must hold positive"),
        ({"n_components": []}, "n_components must be a non-empty list"),
        ({"n_components": [10, 0]}, "n_components must hold positive integers"),
        ({"n_components": [10, 100], "n_candidates": 50}, "M=100, larger than n_candidates=50"),
        ({"selections": ["elss"]}, "unknown selection 'elss'"),
        ({"selections": []}, "selections must be a non-empty list"),
        ({"alphas": [1e-3, -1.0]}, "alphas must hold non-negative"),
        ({"lams": [0.0]}, "lams must hold positive"),
        ({"rhos": []}, "rhos must be a non-empty list"),
        ({"cv": 1}, "cv must be an integer k >= 2"),
        ({"cv": 1.5}, "cv must be an integer k >= 2"),
        ({"cv": np.zeros(10, dtype=bool)}, "cv has 10 rows but X has 300"),
        ({"cv": np.zeros(300, dtype=bool)}, "left no training or no validation rows"),
        ({"cv": 299}, "leaves fold"),
    ],
)
def test_bad_grids_are_named(params, match):
    X = np.random.default_rng(0).normal(size=(300, 2))
    y = X[:, 0]
    kw = {"bandwidths": [1.0], "n_components": [10], "random_state": 0}
    kw.update(params)
    with pytest.raises(ValueError, match=match):
        dxrf.RandomFeatureRidgeCV(**kw).fit(X, y)


def test_grid_parsing():
    assert parse_bandwidth("median*0.5").factor == 0.5
    assert parse_bandwidth("2*median").factor == 2.0
    assert parse_bandwidth("median").factor == 1.0
    assert parse_bandwidth("1.5").value == 1.5
    grid = check_grid([1.0, 1.0, "median"], [50, 10, 50], ["none", "elss-top"], [1e-2, 1e-4], [1.0], [0, 1e-3], None)
    assert len(grid.bandwidths) == 2 and list(grid.n_components) == [10, 50] and grid.n_candidates == 500
    assert [(v.selection, v.lam) for v in grid.variants] == [("none", None), ("elss-top", 1e-4), ("elss-top", 1e-2)]
    assert check_grid([1.0], [30], ["none"], [1e-3], [1.0], [1e-3], None).n_candidates == 30


@parametrize_with_checks(
    estimators=[
        dxrf.RandomFeatureRidgeCV(bandwidths=[1.0, "median"], n_components=[20, 40], alphas=[1e-4, 1e-2],
                                  dtype="float64", cv=3, random_state=0),
        dxrf.RandomFeatureRidgeCV(bandwidths=[1.0, "median"], n_components=[20, 40], alphas=[1e-4, 1e-2],
                                  dtype="float64", cv="evidence", store_posterior=True, random_state=0),
        dxrf.RandomFeatureRidgeCV(bandwidths=["median"], n_components=[10, 20], selections=["none", "elss-top", "eerf"],
                                  alphas=[1e-3], dtype="float64", cv=0.3, random_state=0),
        dxrf.RandomFeatureClassifierCV(bandwidths=[1.0, "median"], n_components=[20, 40], alphas=[1e-4, 1e-2],
                                       dtype="float64", cv=3, random_state=0),
        dxrf.RandomFeatureClassifierCV(bandwidths=["median"], n_components=[30], selections=["none", "lkrf"],
                                       alphas=[1e-3], loss="logistic", scoring="accuracy", dtype="float64", cv=0.3,
                                       random_state=0),
        dxrf.RandomFeatureRidgeCV(features="nystroem", bandwidths=[1.0, "median"], n_components=[5, 10],
                                  alphas=[1e-4, 1e-2], dtype="float64", cv=3, random_state=0),
        dxrf.RandomFeatureClassifierCV(features="nystroem", bandwidths=["median"], n_components=[5, 10],
                                       alphas=[1e-3], scoring="accuracy", dtype="float64", cv=0.3, random_state=0),
    ],
    expected_failed_checks=weight_xfails,
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check(estimator)


def test_validation_errors_lost_to_rounding_are_never_chosen(regression):
    """Wide bandwidths and tiny alphas on float32 statistics: huge coefficients, whose expanded validation
    error cancels below the statistics' rounding (once even to zero, a perfect fit on paper). Such
    configurations score NaN and rank last; the search then agrees with float64 statistics."""
    X, y = regression
    X = (X - X.mean(0)) / X.std(0)
    kw = dict(n_components=[30, 100], cv=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        f32 = dxrf.RandomFeatureRidgeCV(dtype="float32", **kw).fit(X, y)
        f64 = dxrf.RandomFeatureRidgeCV(dtype="float64", **kw).fit(X, y)
    lost = np.isnan(f32.cv_results_["mean_test_score"])
    assert lost.any() and not np.isnan(f64.cv_results_["mean_test_score"]).any()
    assert np.all(f32.cv_results_["rank_test_score"][lost] > f32.cv_results_["rank_test_score"][~lost].max())
    assert f32.best_params_ == f64.best_params_
    assert f32.score(X, y) == pytest.approx(f64.score(X, y), rel=1e-4)


def test_mse_from_stats_flags_cancellation():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(200, 3))
    Z[:, 2] = Z[:, 0] + 1e-7 * rng.normal(size=200)  # nearly collinear
    y = Z[:, 0] + 0.1 * rng.normal(size=200)
    stats = dxrf.FeatureStats(Z.T @ Z, Z.sum(0), 200, Z.T @ y[:, None], y.sum(keepdims=True), np.array([[y @ y]]))
    good = np.array([[1.0], [0.0], [0.0]])
    huge = np.array([[1e9], [0.0], [-1e9]])
    b = np.zeros(1)
    for coef in (good, huge):
        dense = np.mean((y - Z @ coef[:, 0]) ** 2)
        assert mse_from_stats(stats, coef, b)[0] == pytest.approx(dense, rel=1e-6) or coef is huge
    assert np.isfinite(mse_from_stats(stats, good, b, rtol=1e-6)[0])
    assert np.isnan(mse_from_stats(stats, huge, b, rtol=1e-6)[0])


def test_the_search_is_reproducible_to_the_bit(regression):
    """The paths run on a thread pool, each on one BLAS thread, and the spectra alone: the same bits every time."""
    X, y = regression
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        runs = [small_search(selections=["none", "elss-sample", "lkrf"], dtype="float32", cv=3).fit(X, y)
                for _ in range(3)]
    for other in runs[1:]:
        np.testing.assert_array_equal(other.cv_results_["mean_validation_mse"], runs[0].cv_results_["mean_validation_mse"])
        np.testing.assert_array_equal(other.coef_, runs[0].coef_)


def test_a_search_that_cannot_fit_the_workers_runs_a_plan_that_does_and_says_so(make_cluster):
    """4 bandwidths x 5 folds of M0 = 3000 candidates: 2.7 GiB per partial, against workers of 1 GiB.

    Without plain features to choose the bandwidth first, the search draws
    fewer candidates (the most that fit) and says so in one warning; with
    them, it reads X twice (the candidates' Gram at one bandwidth) and so
    fits more candidates.
    A largest M that cannot fit even alone is refused before the pass.
    """
    X = da.from_array(np.random.default_rng(0).normal(size=(4000, 3)), chunks=1000)
    y = X[:, 0]
    cluster = make_cluster(1, memory_limit="1GiB")
    with Client(cluster):
        kw = dict(bandwidths=[0.5, 1, 2, 4], n_components=[300], cv=5, random_state=0)
        with pytest.warns(UserWarning, match=r"needs about .* GiB per worker .*; so the search draws n_candidates=\d+ "
                                             r"instead of 3000") as caught:
            est = dxrf.RandomFeatureRidgeCV(selections=["elss-top"], **kw).fit(X, y)
        assert len([w for w in caught if "so the search" in str(w.message)]) == 1
        assert 300 <= est.n_candidates_ < 3000 and est.n_passes_ == 1
        from dxrf.core.memory import statistics_bytes

        partial, _ = statistics_bytes(est.n_candidates_, maps=4, groups=5)
        assert 2 * partial <= 2**30  # two partials per worker fit its limit
        with pytest.warns(UserWarning, match=r"so the search reads X twice \(bandwidth_choice='plain-first'.*\) and "
                                             r"draws n_candidates="):
            two = dxrf.RandomFeatureRidgeCV(selections=["none", "elss-top"], **kw).fit(X, y)
        # one bandwidth's candidates at a time: more of them fit
        assert est.n_candidates_ < two.n_candidates_ < 3000 and two.n_passes_ == 2
        with pytest.raises(ValueError, match=r"needs about .* GiB per worker .* smallest worker's memory limit is 1.00 GiB"
                                             r".*n_candidates"):
            dxrf.RandomFeatureRidgeCV(bandwidths=[1.0], n_components=[9000], cv=5, random_state=0).fit(X, y)


def test_classifier_accuracy_scoring_equals_separate_fits():
    """scoring="accuracy": one more pass scores every configuration; each equals its model fitted apart."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1800, 3))
    y = np.select([X[:, 0] > 0.6, X[:, 1] > 0.3], ["a", "b"], "c")  # three classes
    mask = rng.random(1800) < 0.3
    kw = dict(bandwidths=[0.7, 1.5], n_components=[15, 40], selections=["elss-top", "eerf"], lams=[1e-3],
              alphas=[1e-4, 1e-2], n_candidates=80, dtype="float64", random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search = dxrf.RandomFeatureClassifierCV(cv=mask, scoring="accuracy", **kw).fit(X, y)
        kfold = dxrf.RandomFeatureClassifierCV(cv=3, scoring="accuracy", **kw).fit(X, y)
    res = search.cv_results_
    assert search.n_passes_ == 2 and kfold.n_passes_ == 2 and kfold.n_splits_ == 3
    np.testing.assert_array_equal(res["mean_test_score"], res["mean_test_accuracy"])
    assert search.best_score_ == res["mean_test_accuracy"].max()
    for i in {search.best_index_, 0, len(res["params"]) - 1, 9}:
        p = res["params"][i]
        base = dxrf.RandomFourierFeatures(80, bandwidth=res["bandwidth_value"][i], dtype="float64", random_state=3)
        common = {"n_candidates": 80, "base": base, "random_state": 3}
        sel = (dxrf.LeverageScoreSampler(p["n_components"], lam=p["lam"], method="top", **common)
               if p["selection"] == "elss-top" else dxrf.EnergyScoreSelector(p["n_components"], **common))
        ref = dxrf.RandomFeatureClassifier(sel, alpha=p["alpha"]).fit(X[~mask], y[~mask])
        assert res["mean_test_accuracy"][i] == pytest.approx(ref.score(X[mask], y[mask]), abs=1.5 / mask.sum()), p
    # the R^2 of the class columns is kept beside it
    assert np.all(res["mean_test_r2"] < 1) and np.isfinite(res["mean_test_r2"]).all()

"""Nyström features in the model search (``features="nystroem"``).

Every configuration of a search is checked against the public single-model
estimators: ``RandomFeatureRidge(NystroemFeatures(landmarks=<the first M
landmark rows>))`` fitted on the same hold-out, the landmarks being the ones
``NystroemFeatures(M, random_state=seed)`` draws. The refit is checked
against a separate fit on all rows, k-fold against hold-outs, the classifier
against separate classifiers, and a search from zarr on a cluster of processes
against the same search in memory, with its reads of X counted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client

import dxrf
import dxrf.io
from dxrf.engine import hashed_folds
from dxrf.features.nystroem import uniform_landmarks
from dxrf.stats.accumulation import hashed_split
from dxrf.workflows.bench_fig2_grid import counted, take_reads

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SEED, SPLIT_SEED, FRACTION = 5, 2, 0.3
BANDWIDTHS, MS, ALPHAS = [0.8, 1.6], [6, 15, 30], [1e-6, 1e-3, 1e-1]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(900, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=900)
    return X, y


def search(X, y, cls=dxrf.RandomFeatureRidgeCV, **kw):
    params = dict(features="nystroem", bandwidths=BANDWIDTHS, n_components=MS, alphas=ALPHAS, cv=FRACTION,
                  cv_seed=SPLIT_SEED, dtype="float64", random_state=SEED)
    params.update(kw)
    return cls(**params).fit(X, y)


def first_landmarks(X, m):
    """The M landmark rows of the search: those NystroemFeatures(M) draws with the search's seed."""
    return dxrf.NystroemFeatures(m, dtype="float64", random_state=SEED).fit(X).landmarks_


def test_landmarks_are_nested_uniform_races(data):
    """Ordered by key, the first M rows of one race are the race of size M, for every M."""
    X, _ = data
    rows, L = uniform_landmarks(X, 30, SEED)
    np.testing.assert_array_equal(L, X[rows])
    for m in MS:
        ref = dxrf.NystroemFeatures(m, random_state=SEED).fit(X).landmark_indices_
        np.testing.assert_array_equal(np.sort(rows[:m]), ref)


def test_every_configuration_equals_a_separate_nystroem_ridge(data):
    X, y = data
    est = search(X, y)
    assert est.n_passes_ == 2  # the landmarks' race, the statistics
    assert est.n_candidates_ == max(MS)
    res = est.cv_results_
    assert len(res["params"]) == len(BANDWIDTHS) * len(MS) * len(ALPHAS)
    assert set(res["param_selection"]) == {"none"}
    mask = hashed_split(0, X.shape[0], FRACTION, SPLIT_SEED)
    for row, p in enumerate(res["params"]):
        features = dxrf.NystroemFeatures(landmarks=first_landmarks(X, p["n_components"]), bandwidth=p["bandwidth"],
                                         dtype="float64")
        ref = dxrf.RandomFeatureRidge(features, alpha=p["alpha"], validation=mask).fit(X, y)
        got = res["mean_validation_mse"][row]
        np.testing.assert_allclose(got, ref.validation_errors_[0], rtol=1e-8, err_msg=str(p))
        var = y[mask].var()
        np.testing.assert_allclose(res["mean_test_score"][row], 1 - got / var, rtol=1e-12)


def test_refit_is_the_nystroem_map_of_the_chosen_landmarks_on_all_rows(data):
    X, y = data
    est = search(X, y, return_train_score=True)
    p = est.best_params_
    ref = dxrf.RandomFeatureRidge(
        dxrf.NystroemFeatures(p["n_components"], bandwidth=p["bandwidth"], dtype="float64", random_state=SEED),
        alpha=p["alpha"],
    ).fit(X, y)
    assert isinstance(est.features_, dxrf.NystroemFeatures)
    np.testing.assert_array_equal(est.features_.landmark_indices_, ref.features_.landmark_indices_)
    # the kernel is exactly NystroemFeatures' with those landmarks and that bandwidth
    for name in ("W", "whitening", "scale"):
        np.testing.assert_array_equal(getattr(est.kernel_, name), getattr(ref.kernel_, name))
    assert est.kernel_.bandwidth == ref.kernel_.bandwidth == est.bandwidth_
    np.testing.assert_allclose(est.predict(X), ref.predict(X), rtol=1e-7, atol=1e-9)
    assert est.score(X, y) == pytest.approx(ref.score(X, y), rel=1e-9)
    Z = ref.features_.transform(X)
    assert est.train_mse_ == pytest.approx(np.mean((Z @ est.coef_ + est.intercept_ - y) ** 2), rel=1e-8)


def test_kfold_equals_separate_holdouts(data):
    X, y = data
    kfold = search(X, y, cv=3, cv_seed=4)
    assert kfold.n_splits_ == 3 and kfold.n_passes_ == 2
    folds = hashed_folds(0, X.shape[0], 3, 4)
    for j in range(3):
        hold = search(X, y, cv=folds == j)
        np.testing.assert_allclose(kfold.cv_results_[f"split{j}_validation_mse"], hold.cv_results_["mean_validation_mse"],
                                   rtol=1e-8)
    mean = np.mean([kfold.cv_results_[f"split{j}_test_score"] for j in range(3)], axis=0)
    np.testing.assert_allclose(kfold.cv_results_["mean_test_score"], mean, rtol=1e-12)


def test_median_bandwidths_take_one_more_pass(data):
    X, y = data
    est = search(X, y, bandwidths=["median*0.5", "median"], n_components=[10], alphas=[1e-3])
    assert est.n_passes_ == 3
    probe = dxrf.NystroemFeatures(10, bandwidth="median", random_state=SEED).fit(X)
    assert est.median_bandwidth_ == pytest.approx(probe.bandwidth_, rel=1e-12)
    assert list(est.cv_results_["bandwidth_value"]) == pytest.approx([0.5 * est.median_bandwidth_, est.median_bandwidth_])


@pytest.mark.parametrize("scoring", ["r2", "accuracy"])
def test_classifier_equals_separate_classifiers(scoring):
    rng = np.random.default_rng(6)
    X = rng.normal(size=(700, 2))
    y = np.select([X[:, 0] > 0.5, X[:, 1] > 0.0], ["a", "b"], "c")  # three classes: three +-1 columns
    mask = hashed_split(0, X.shape[0], FRACTION, SPLIT_SEED)
    est = search(X, y, dxrf.RandomFeatureClassifierCV, n_components=[8, 20], alphas=[1e-4, 1e-1], scoring=scoring,
                 keep_models=True)
    assert est.n_passes_ == 2 + (scoring == "accuracy")
    res = est.cv_results_
    for row, p in enumerate(res["params"]):
        features = dxrf.NystroemFeatures(landmarks=first_landmarks(X, p["n_components"]), bandwidth=p["bandwidth"],
                                         dtype="float64")
        ref = dxrf.RandomFeatureClassifier(features, alpha=p["alpha"]).fit(X[~mask], y[~mask])
        T = np.where(y[mask][:, None] == ref.classes_[None, :], 1.0, -1.0)
        mse = np.mean((ref.decision_function(X[mask]) - T) ** 2)
        # against dense predictions: the MSE expanded from statistics cancels a few more digits
        np.testing.assert_allclose(res["mean_validation_mse"][row], mse, rtol=1e-7, err_msg=str(p))
        if scoring == "accuracy":
            assert res["mean_test_accuracy"][row] == pytest.approx(ref.score(X[mask], y[mask]), abs=1e-12)
    # the kept fold models score on the landmarks' kernel values: the search's own validation errors again
    scored = est.score_configurations(X[mask], y[mask])
    np.testing.assert_allclose(scored["mse"][np.argsort(scored["index"])], res["mean_validation_mse"], rtol=1e-7)
    assert est.predict(X[:5]).shape == (5,) and set(est.predict(X)) <= {"a", "b", "c"}
    assert est.score(X, y) > 0.8


def test_logistic_refit_on_the_chosen_nystroem_features(data):
    X, y = data
    labels = y > np.median(y)
    est = search(X, labels, dxrf.RandomFeatureClassifierCV, n_components=[10], alphas=[1e-3], loss="logistic")
    ref = dxrf.RandomFeatureClassifier(dxrf.NystroemFeatures(10, bandwidth=est.bandwidth_, dtype="float64",
                                                             random_state=SEED), alpha=1e-3, loss="logistic").fit(X, labels)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), rtol=1e-6, atol=1e-9)
    assert est.n_passes_ > 2


@pytest.mark.parametrize(
    "params, match",
    [
        ({"features": "rff"}, r"features must be one of \('fourier', 'nystroem'\)"),
        ({"selections": ["none", "eerf"]}, r"selections=\['none', 'eerf'\]: with features='nystroem' only"),
        ({"selections": "elss-top"}, r"selections='elss-top': with features='nystroem' only"),
        ({"kernel": "arccos"}, "kernel must be one of"),
        ({"n_candidates": 60}, "n_candidates=60 is for random Fourier candidates"),
        ({"candidate_ratio": 2}, "candidate_ratio=2 is for random Fourier candidates"),
        ({"n_components": [10, 400]}, "M=400 landmarks but X has n_samples=300"),
    ],
)
def test_bad_parameters_are_named(params, match):
    X = np.random.default_rng(0).normal(size=(300, 2))
    kw = {"features": "nystroem", "bandwidths": [1.0], "n_components": [10], "random_state": 0}
    kw.update(params)
    with pytest.raises(ValueError, match=match):
        dxrf.RandomFeatureRidgeCV(**kw).fit(X, X[:, 0])


def test_fold_selection_is_for_fourier_candidates(data):
    X, y = data
    est = search(X, y, n_components=[10], alphas=[1e-3], keep_models=True)
    with pytest.raises(ValueError, match="fold_selection is for random Fourier candidates"):
        est.fold_selection(0)


def test_save_load_and_cli_predict(data, tmp_path):
    X, y = data
    est = search(X, y, dtype="float32")
    est.save(tmp_path / "m.zarr")
    back = dxrf.load(tmp_path / "m.zarr")
    assert type(back) is dxrf.RandomFeatureRidgeCV and back.features == "nystroem"
    assert isinstance(back.features_, dxrf.NystroemFeatures)
    np.testing.assert_array_equal(back.kernel_.whitening, est.kernel_.whitening)
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    assert back.best_params_ == est.best_params_
    # `dxrf predict` on a zarr data set, in a subprocess
    dxrf.io.write_zarr(X, tmp_path / "data.zarr", y=y, chunk_rows=200)
    out = tmp_path / "pred.zarr"
    proc = subprocess.run([sys.executable, "-m", "dxrf.cli", "predict", str(tmp_path / "m.zarr"), str(tmp_path / "data.zarr"),
                           "--out", str(out)], capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    pred = zarr.open_group(str(out), mode="r")["y_pred"][...]
    np.testing.assert_allclose(pred, est.predict(X.astype(np.float32)), rtol=1e-5, atol=1e-5)


def test_on_a_cluster_from_zarr_with_passes_counted(data, cluster2, tmp_path):
    """From zarr on a LocalCluster of processes: the same search as in memory; the race and the statistics read X."""
    X, y = data
    for name, a in (("X", X), ("y", y)):
        da.from_array(a, chunks=150).to_zarr(str(tmp_path / f"{name}.zarr"))
    Xz = counted(da.from_zarr(str(tmp_path / "X.zarr")), "X")
    yz = da.from_zarr(str(tmp_path / "y.zarr"))
    chunks = Xz.numblocks[0]
    local = search(X, y, cv=3)
    with warnings.catch_warnings(), Client(cluster2) as client:
        warnings.simplefilter("ignore", UserWarning)
        take_reads(client)
        got = search(Xz, yz, cv=3)
        assert got.n_passes_ == 2 and take_reads(client).get("X", 0) == 2 * chunks
        med = search(Xz, yz, cv=3, bandwidths=["median"], n_components=[10], alphas=[1e-3])
        assert med.n_passes_ == 3 and take_reads(client).get("X", 0) == 3 * chunks
        pred = got.predict(Xz)
        assert isinstance(pred, da.Array)
        pred = pred.compute()
    assert got.best_params_ == local.best_params_
    np.testing.assert_array_equal(got.features_.landmark_indices_, local.features_.landmark_indices_)
    np.testing.assert_allclose(got.cv_results_["mean_validation_mse"], local.cv_results_["mean_validation_mse"], rtol=1e-10)
    np.testing.assert_allclose(pred, local.predict(X), rtol=1e-9, atol=1e-12)

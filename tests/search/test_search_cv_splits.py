"""The searches' ``cv`` as scikit-learn splits (pairs or a splitter), turned into fold labels of one pass."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client
from sklearn.model_selection import GroupKFold, KFold, LeaveOneGroupOut, StratifiedKFold
from sklearn.utils.estimator_checks import check_sample_weight_equivalence_on_dense_data

import dxrf
from dxrf.engine import hashed_folds

N = 900


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=N)
    groups = rng.integers(0, 7, size=N)
    return X, y, groups


def search(cls=dxrf.RandomFeatureRidgeCV, **kw):
    params = dict(bandwidths=[0.8, 2.0], n_components=[10, 20], selections=["none", "elss-top"], lams=[1e-3],
                  alphas=[1e-4, 1e-2, 1.0], n_candidates=40, dtype="float64", random_state=3)
    params.update(kw)
    return cls(**params)


def fit_quiet(est, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # best configurations at the grid's edges
        return est.fit(X, y, **kw)


def as_splits(labels):
    return [(np.flatnonzero(labels != j), np.flatnonzero(labels == j)) for j in range(labels.max() + 1)]


def float_columns(results):
    return {k: v for k, v in results.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"}


def assert_same_search(a, b):
    ra, rb = float_columns(a.cv_results_), float_columns(b.cv_results_)
    assert ra.keys() == rb.keys()
    for key in ra:
        np.testing.assert_array_equal(ra[key], rb[key], err_msg=key)
    assert a.best_params_ == b.best_params_ and a.best_score_ == b.best_score_ and a.n_splits_ == b.n_splits_


def test_splits_of_the_hashed_folds_equal_cv_k(data):
    """Explicit splits equal to the hashed folds of cv=k: the same pass, the same search, bitwise."""
    X, y, _ = data
    labels = hashed_folds(0, N, 4, 9)
    kfold = fit_quiet(search(cv=4, cv_seed=9, return_train_score=True), X, y)
    given = fit_quiet(search(cv=as_splits(labels), return_train_score=True), X, y)
    assert given.n_splits_ == 4 and given.n_passes_ == 1
    assert_same_search(kfold, given)
    np.testing.assert_array_equal(kfold.predict(X), given.predict(X))
    # boolean masks in the pairs, and a generator, are the same splits
    masks = ((labels != j, labels == j) for j in range(4))
    assert_same_search(kfold, fit_quiet(search(cv=masks, return_train_score=True), X, y))


def test_a_splitter_object_equals_its_list_of_splits(data):
    X, y, _ = data
    splitter = KFold(3, shuffle=True, random_state=0)
    a = fit_quiet(search(cv=splitter), X, y)
    b = fit_quiet(search(cv=list(splitter.split(X))), X, y)
    assert_same_search(a, b)
    assert a.n_splits_ == 3


def test_group_splits_equal_separate_holdout_fits(data):
    """GroupKFold splits: fold j's validation MSE of every alpha equals RandomFeatureRidge with validation=fold j."""
    X, y, groups = data
    splits = list(GroupKFold(3).split(X, y, groups))
    alphas = [1e-4, 1e-2, 1.0]
    est = fit_quiet(search(bandwidths=[1.3], n_components=[25], selections=["none"], n_candidates=25, alphas=alphas,
                           cv=splits), X, y)
    res = est.cv_results_
    assert list(res["param_alpha"]) == alphas and est.n_splits_ == 3
    for j, (train, test) in enumerate(splits):
        mask = np.zeros(N, dtype=bool)
        mask[test] = True
        features = dxrf.RandomFourierFeatures(25, bandwidth=1.3, dtype="float64", random_state=3)
        ref = dxrf.RandomFeatureRidge(features, alphas=alphas, validation=mask).fit(X, y)
        np.testing.assert_allclose(res[f"split{j}_validation_mse"], ref.validation_errors_, rtol=1e-8)
        r2 = 1 - ref.validation_errors_ / y[test].var()
        np.testing.assert_allclose(res[f"split{j}_test_score"], r2, rtol=1e-8)
    # the refit: the chosen alpha on all rows
    features = dxrf.RandomFourierFeatures(25, bandwidth=1.3, dtype="float64", random_state=3)
    ref = dxrf.RandomFeatureRidge(features, alpha=est.alpha_).fit(X, y)
    np.testing.assert_allclose(est.predict(X), ref.predict(X), rtol=1e-8, atol=1e-10)
    assert est.best_score_ == res["mean_test_score"].max()


def test_accumulate_with_labels_equals_each_fold_alone(data):
    """folds=labels sums each fold apart: equal to accumulating that fold's rows alone (weights too)."""
    X, y, groups = data
    labels = groups % 4  # uneven folds, in no order
    w = np.random.default_rng(0).integers(0, 4, size=N).astype(float)
    fmap = dxrf.RandomFourierFeatures(30, bandwidth=1.0, dtype="float64", random_state=0).fit(X)
    for weight in (None, w):
        out = dxrf.accumulate(X, y, fmap, folds=labels, sample_weight=weight)
        assert len(out) == 4
        for j in range(4):
            rows = labels == j
            ref = dxrf.accumulate(X[rows], y[rows], fmap, sample_weight=None if weight is None else weight[rows])
            assert out[j].n == ref.n
            for field in ("gram", "sum", "cross", "ysum", "yy"):
                np.testing.assert_allclose(getattr(out[j], field), getattr(ref, field), rtol=1e-12, atol=1e-12)
    # labels of the hashed folds give the hashed pass bitwise
    hashed = dxrf.accumulate(X, y, fmap, folds=3, split_seed=4)
    same = dxrf.accumulate(X, y, fmap, folds=hashed_folds(0, N, 3, 4))
    for a, b in zip(hashed, same):
        np.testing.assert_array_equal(a.gram, b.gram)
        np.testing.assert_array_equal(a.cross, b.cross)


def test_score_models_with_labels_equals_each_fold_alone(data):
    X, y, groups = data
    labels = groups % 3
    fmap = dxrf.RandomFourierFeatures(20, bandwidth=1.0, dtype="float64", random_state=0).fit(X)
    coef = np.random.default_rng(1).normal(size=(2, 20, 1))
    models = [dxrf.LinearModels(fmap, coef, intercept=0.5)]
    out = dxrf.score_models(X, y, models, folds=labels)
    assert len(out) == 3
    for j in range(3):
        rows = labels == j
        (ref,) = dxrf.score_models(X[rows], y[rows], models)
        assert out[j][0].n == ref.n
        np.testing.assert_allclose(out[j][0].mse, ref.mse, rtol=1e-12)


def test_bad_labels_for_accumulate(data):
    X, y, _ = data
    fmap = dxrf.RandomFourierFeatures(10, bandwidth=1.0, random_state=0).fit(X)
    labels = np.arange(N) % 3
    with pytest.raises(ValueError, match="negative"):
        dxrf.accumulate(X, y, fmap, folds=labels - 1)
    with pytest.raises(TypeError, match="folds"):
        dxrf.accumulate(X, y, fmap, folds=labels.astype(float))
    with pytest.raises(ValueError, match="at least 2 folds"):
        dxrf.accumulate(X, y, fmap, folds=np.zeros(N, dtype=int))
    with pytest.raises(ValueError, match=r"shape \(900,\)"):
        dxrf.accumulate(X, y, fmap, folds=labels[:-1])
    with pytest.raises(ValueError, match="negative"):
        dxrf.accumulate(da.from_array(X, chunks=(200, 3)), y, fmap, folds=da.from_array(labels - 1, chunks=300))


def _to_zarr(path, a, rows):
    arr = zarr.create_array(str(path), shape=a.shape, chunks=(rows,) + a.shape[1:], dtype=a.dtype)
    arr[...] = a
    return da.from_zarr(str(path))


def test_dask_labels_on_a_cluster_from_zarr(data, cluster2, tmp_path):
    """Labels from zarr, chunked unlike X: aligned by the engine; the same statistics and search as NumPy."""
    X, y, groups = data
    labels = (groups % 3).astype(np.int32)
    fmap = dxrf.RandomFourierFeatures(30, bandwidth=1.0, dtype="float64", random_state=0).fit(X)
    ref = dxrf.accumulate(X, y, fmap, folds=labels)
    splits = as_splits(labels)
    local = fit_quiet(search(cv=splits), X, y)
    with Client(cluster2):
        Xd, yd = _to_zarr(tmp_path / "X.zarr", X, 250), _to_zarr(tmp_path / "y.zarr", y, 250)
        ld = _to_zarr(tmp_path / "labels.zarr", labels, 333)
        out = dxrf.accumulate(Xd, yd, fmap, folds=ld)
        scores = dxrf.score_models(Xd, yd, [dxrf.LinearModels(fmap, np.ones(30))], folds=ld)
        remote = fit_quiet(search(cv=splits), Xd, yd)
        kfold = fit_quiet(search(cv=KFold(3)), Xd, yd)  # a splitter needing only n_samples
    for a, b in zip(ref, out):
        assert a.n == b.n
        np.testing.assert_array_equal(a.gram, b.gram)
        np.testing.assert_array_equal(a.cross, b.cross)
    assert [s[0].n for s in scores] == [int((labels == j).sum()) for j in range(3)]
    assert_same_search(local, remote)
    assert_same_search(kfold, fit_quiet(search(cv=list(KFold(3).split(X))), X, y))


@pytest.mark.parametrize(
    "make_cv, match",
    [
        (lambda n: [(np.arange(n // 2, n), np.arange(n // 2)), (np.arange(n // 3), np.arange(n // 3, n))],
         "overlap"),
        (lambda n: [(np.arange(n // 2, n - 1), np.arange(n // 2)), (np.arange(n // 2), np.arange(n // 2, n))],
         "complement"),
        (lambda n: [(np.arange(n // 2, n), np.arange(n // 2)), (np.arange(n // 2), np.arange(n // 2, n - 5))],
         "untested"),
        (lambda n: [(np.arange(n // 2, n), np.arange(n // 2))], "at least 2"),
        (lambda n: [(np.arange(n // 2, n), np.arange(n // 2)), (np.arange(n // 2), np.arange(n // 2, n + 1))],
         "lie in"),
        (lambda n: [np.arange(n), np.arange(n)], "pair"),
        (lambda n: GroupKFold(3), "groups"),  # its split needs groups
    ],
)
def test_bad_cv_is_named(data, make_cv, match):
    X, y, _ = data
    with pytest.raises(ValueError, match=match) as err:
        fit_quiet(search(cv=make_cv(N)), X, y)
    assert "cv" in str(err.value)


def test_a_splitter_needing_y_with_dask_x_is_refused(data):
    X, y, _ = data
    Xd = da.from_array(X, chunks=(300, 3))
    with pytest.raises(ValueError, match="cv=.*dask X"):
        fit_quiet(search(cls=dxrf.RandomFeatureClassifierCV, cv=StratifiedKFold(3)), Xd, (y > 0).astype(int))


def test_classifier_accuracy_with_splits(data):
    """scoring="accuracy" with given splits: the cv=k search for the same folds, and each fold's accuracy
    equals its kept model scored on the fold's rows alone."""
    X, _, groups = data
    y = np.where(X[:, 0] * X[:, 1] > 0, "a", "b")
    labels = hashed_folds(0, N, 3, 2)
    kw = dict(cls=dxrf.RandomFeatureClassifierCV, scoring="accuracy", keep_models=True)
    kfold = fit_quiet(search(cv=3, cv_seed=2, **kw), X, y)
    given = fit_quiet(search(cv=as_splits(labels), **kw), X, y)
    assert_same_search(kfold, given)
    # GroupKFold through a splitter object is refused (groups), as a list it works; StratifiedKFold sees the labels
    splits = list(GroupKFold(3).split(X, y, groups))
    est = fit_quiet(search(cv=splits, **kw), X, y)
    codes = (y == "b").astype(int)
    for j, (_, test) in enumerate(splits):
        (rows, models), = est.fold_models([est.best_index_], fold=j)
        (ref,) = dxrf.score_models(X[test], codes[test], [models])
        assert est.cv_results_[f"split{j}_test_accuracy"][est.best_index_] == pytest.approx(1 - ref.error[0], abs=1e-12)
    strat = fit_quiet(search(cv=StratifiedKFold(3), **kw), X, y)
    assert_same_search(strat, fit_quiet(search(cv=list(StratifiedKFold(3).split(X, y)), **kw), X, y))


@pytest.mark.parametrize("est", [dxrf.RandomFeatureRidgeCV(n_components=[100, 300, 1000]),
                                 dxrf.RandomFeatureClassifierCV(n_components=[100, 300, 1000])],
                         ids=lambda e: type(e).__name__)
def test_sklearn_weight_equivalence_with_leave_one_group_out(est):
    """scikit-learn's check gives cv=list(LeaveOneGroupOut().split(...)): weights equal repeated rows.

    On Fourier candidates (a given grid): the default growing search's Nyström
    landmarks are drawn uniformly over row indices, unweighted.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_sample_weight_equivalence_on_dense_data(type(est).__name__, est)


def test_leave_one_group_out_is_k_folds(data):
    X, y, groups = data
    est = fit_quiet(search(cv=list(LeaveOneGroupOut().split(X, y, groups))), X, y)
    assert est.n_splits_ == len(np.unique(groups))
    assert f"split{est.n_splits_ - 1}_test_score" in est.cv_results_


def test_a_split_whose_rows_weigh_nothing_is_named(data):
    X, y, groups = data
    splits = list(GroupKFold(3).split(X, y, groups))
    w = np.ones(N)
    w[splits[1][1]] = 0.0
    with pytest.raises(ValueError, match="cv split 1: its test rows have a total sample_weight of 0"):
        fit_quiet(search(cv=splits), X, y, sample_weight=w)

"""sample_weight and class_weight: integer weights equal repeated rows; ones equal no weights; bad weights refused."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.base import clone

import dxrf
import dxrf.datasets.loaders
from test_device import _gpu_available
from dxrf import accumulate
from dxrf.learners.pca import RandomFeaturePCA
from dxrf.learners.sgd import RandomFeatureSGDClassifier, RandomFeatureSGDRegressor
from dxrf.solvers.sgd_passes import _Config, _sgd_rows, _State, _ysum_chunk
from dxrf.stats.scoring import LinearModels, score_models

TOL = 1e-8


def rel(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def fourier(m: int = 40, bandwidth: float = 2.0) -> dxrf.RandomFourierFeatures:
    return dxrf.RandomFourierFeatures(m, bandwidth=bandwidth, dtype="float64", random_state=0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 900
    X = rng.normal(size=(n, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)
    labels = np.digitize(X[:, 0] + 0.3 * rng.normal(size=n), [-0.4, 0.6])  # three classes
    w = rng.integers(0, 4, size=n)  # zeros drop rows, 2 and 3 repeat them
    rep = np.repeat(np.arange(n), w)
    return X, y, labels, w, rep


# -- the statistics pass ------------------------------------------------------------------


def test_weighted_statistics_equal_repeated_rows(data):
    X, y, labels, w, rep = data
    Y = np.column_stack([y, labels])
    f = fourier().fit(X)
    a, b = accumulate(X, Y, f, sample_weight=w), accumulate(X[rep], Y[rep], f)
    for key in ("gram", "sum", "cross", "ysum", "yy"):
        assert rel(getattr(a, key), getattr(b, key)) <= TOL, key
    assert a.n == b.n == w.sum()
    # a validation mask travels with its rows: the same split on both sides
    mask = np.arange(X.shape[0]) % 4 == 1
    (ta, va), (tb, vb) = accumulate(X, Y, f, split=mask, sample_weight=w), accumulate(X[rep], Y[rep], f, split=mask[rep])
    assert rel(ta.gram, tb.gram) <= TOL and rel(va.cross, vb.cross) <= TOL and (ta.n, va.n) == (tb.n, vb.n)


def test_weights_of_ones_are_no_weights_bitwise(data):
    X, y, labels, _, _ = data
    f = fourier().fit(X)
    f32 = dxrf.RandomFourierFeatures(40, bandwidth=2.0, random_state=0).fit(X)  # float32 tiles too
    for feats in (f, f32):
        a, b = accumulate(X, y, feats, folds=3, sample_weight=np.ones(len(X))), accumulate(X, y, feats, folds=3)
        for ga, gb in zip(a, b):
            for key in ("gram", "sum", "cross", "ysum", "yy"):
                np.testing.assert_array_equal(getattr(ga, key), getattr(gb, key))
            assert ga.n == gb.n
    ones = np.ones(len(X))
    for kw in ({"loss": "squared", "alphas": [1e-4, 1e-2]}, {"loss": "logistic", "hessian_rows": None}):
        a = dxrf.RandomFeatureClassifier(f, **kw).fit(X, labels, sample_weight=ones)
        b = dxrf.RandomFeatureClassifier(f, **kw).fit(X, labels)
        np.testing.assert_array_equal(a.coef_, b.coef_)
    a = dxrf.RandomFeatureRidge(f, alphas=[1e-4, 1e-2]).fit(X, y, sample_weight=ones)
    b = dxrf.RandomFeatureRidge(f, alphas=[1e-4, 1e-2]).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.validation_errors_, b.validation_errors_)


# -- learners --------------------------------------------------------------------------------


def test_ridge_weighted_equals_repeated_rows(data):
    X, y, _, w, rep = data
    mask = np.arange(X.shape[0]) % 5 == 0
    a = dxrf.RandomFeatureRidge(fourier(), alphas=[1e-5, 1e-3, 1e-1], validation=mask).fit(X, y, sample_weight=w)
    b = dxrf.RandomFeatureRidge(fourier(), alphas=[1e-5, 1e-3, 1e-1], validation=mask[rep]).fit(X[rep], y[rep])
    assert rel(a.coef_, b.coef_) <= TOL and abs(a.intercept_ - b.intercept_) <= TOL
    assert rel(a.validation_errors_, b.validation_errors_) <= TOL and a.alpha_ == b.alpha_
    assert abs(a.train_mse_ - b.train_mse_) <= TOL * b.train_mse_
    # against the dense weighted normal equations
    Z = fourier().fit(X).transform(X)
    sw = w / w.sum()
    zm, ym = sw @ Z, sw @ y
    Zc, yc = Z - zm, y - ym
    coef = np.linalg.solve(Zc.T @ (sw[:, None] * Zc) + a.alpha_ * np.eye(Z.shape[1]), Zc.T @ (sw * yc))
    assert rel(a.coef_, coef) <= 1e-7


def test_partial_fit_weighted_equals_fit(data):
    X, y, _, w, _ = data
    full = dxrf.RandomFeatureRidge(fourier(), alpha=1e-3).fit(X, y, sample_weight=w)
    part = dxrf.RandomFeatureRidge(fourier(), alpha=1e-3)
    for rows in np.array_split(np.arange(len(X)), 3):
        part.partial_fit(X[rows], y[rows], sample_weight=w[rows])
    assert rel(part.coef_, full.coef_) <= TOL and part.stats_.n == w.sum()


@pytest.mark.parametrize("loss,solver", [("squared", "auto"), ("logistic", "newton"), ("logistic", "lbfgs"),
                                         ("logistic", "newton-cg")])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_weighted_equals_repeated_rows(data, loss, solver, n_classes):
    X, _, labels, w, rep = data
    labels = labels if n_classes == 3 else (labels > 0).astype(int)
    kw = dict(loss=loss, solver=solver, hessian_rows=None, tol=1e-10, max_iter=200)
    a = dxrf.RandomFeatureClassifier(fourier(), **kw).fit(X, labels, sample_weight=w)
    b = dxrf.RandomFeatureClassifier(fourier(), **kw).fit(X[rep], labels[rep])
    # L-BFGS stops on its own tolerance: the minimiser is the same, the last iterate within 1e-8 of it
    assert rel(a.coef_, b.coef_) <= (1e-6 if solver == "lbfgs" else TOL)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_logistic_kernel_is_a_weighted_sum_of_rows(data):
    """The per-block kernel with weights equals the dense weighted loss, gradient and Hessian."""
    from dxrf.solvers.logistic.sums import _block_sums, _finalize, _make_spec, _tile_rows

    X, _, labels, w, _ = data
    kernel = fourier().fit(X).kernel_
    T = np.where(labels > 0, 1.0, -1.0)[:, None]
    rng = np.random.default_rng(1)
    point = rng.normal(size=(kernel.n_components + 1, 1)) * 0.1
    idx = np.arange(1)
    spec = _make_spec(kernel, idx, point, grad=idx, hess=idx)
    out = _finalize(_block_sums(X, T, kernel, spec, _tile_rows(kernel, dxrf.get_options()), weights=w.astype(float)), kernel)
    Z1 = np.column_stack([kernel(X), np.ones(len(X))])
    f = Z1 @ point[:, 0]
    t = T[:, 0]
    p = 1 / (1 + np.exp(t * f))
    assert abs(out.loss[0] - w @ np.logaddexp(0, -t * f)) <= 1e-10 * abs(out.loss[0])
    assert rel(out.grad[:, 0], Z1.T @ (w * -t * p)) <= 1e-10
    s = 1 / (1 + np.exp(-f))
    assert rel(out.hess[0], Z1.T @ ((w * s * (1 - s))[:, None] * Z1)) <= 1e-10
    assert out.n == w.sum()


# -- selectors and RF-PCA ------------------------------------------------------------------------


@pytest.mark.parametrize("selector", [
    dxrf.LeverageScoreSampler(15, n_candidates=60, base=fourier(), method="sample", random_state=0),
    dxrf.LeverageScoreSampler(15, n_candidates=60, base=fourier(), method="top", lam_convention="unnormalized",
                              random_state=0),
    dxrf.EnergyScoreSelector(15, n_candidates=60, base=fourier(), random_state=0),
    dxrf.KernelAlignmentSelector(15, n_candidates=60, base=fourier(), random_state=0),
    dxrf.KernelAlignmentSelector(15, n_candidates=60, base=fourier(), method="top", random_state=0),
], ids=["elss-sample", "elss-top-unnormalized", "eerf", "lkrf", "lkrf-top"])
def test_selectors_weighted_equal_repeated_rows(data, selector):
    X, y, _, w, rep = data
    a, b = clone(selector).fit(X, y, sample_weight=w), clone(selector).fit(X[rep], y[rep])
    np.testing.assert_array_equal(a.selected_, b.selected_)
    assert rel(a.scales_, b.scales_) <= TOL
    assert rel(a.candidate_stats_.gram, b.candidate_stats_.gram) <= TOL
    for name in ("scores_", "weights_", "dof_"):
        if hasattr(b, name):
            assert rel(getattr(a, name), getattr(b, name)) <= TOL, name


def test_unnormalized_lam_divides_by_the_total_weight(data):
    """N lam on the unnormalised Gram is W lam with weights: halving every weight is doubling lam."""
    X, y, _, w, _ = data
    kw = dict(n_candidates=60, base=fourier(), method="sample", lam_convention="unnormalized", random_state=0)
    a = dxrf.LeverageScoreSampler(15, lam=0.5, **kw).fit(X, sample_weight=0.5 * w)
    b = dxrf.LeverageScoreSampler(15, lam=1.0, **kw).fit(X, sample_weight=w)
    assert a.lam_ == b.lam_ == 1.0 / w.sum()
    np.testing.assert_array_equal(a.selected_, b.selected_)


def test_pca_weighted_equals_repeated_rows(data):
    X, _, _, w, rep = data
    a = RandomFeaturePCA(4, features=fourier()).fit(X, sample_weight=w)
    b = RandomFeaturePCA(4, features=fourier()).fit(X[rep])
    for name in ("components_", "explained_variance_", "mean_", "singular_values_"):
        assert rel(getattr(a, name), getattr(b, name)) <= TOL, name
    assert a.n_samples_ == b.n_samples_
    assert rel(a.transform(X), b.transform(X)) <= TOL


# -- the searches and scoring ----------------------------------------------------------------


def test_search_weighted_equals_repeated_rows(data):
    """With a mask as cv (hashed folds move repeated rows), every configuration's score and the choice agree."""
    X, y, labels, w, rep = data
    mask = np.arange(X.shape[0]) % 4 == 2
    kw = dict(bandwidths=[1.0, 2.0], n_components=[10, 20], selections=["none", "elss-top", "lkrf"],
              alphas=[1e-4, 1e-2], dtype="float64", random_state=0)
    a = dxrf.RandomFeatureRidgeCV(cv=mask, **kw).fit(X, y, sample_weight=w)
    b = dxrf.RandomFeatureRidgeCV(cv=mask[rep], **kw).fit(X[rep], y[rep])
    assert a.best_params_ == b.best_params_
    assert rel(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"]) <= TOL
    assert rel(a.cv_results_["mean_validation_mse"], b.cv_results_["mean_validation_mse"]) <= TOL
    assert rel(a.coef_, b.coef_) <= TOL
    a = dxrf.RandomFeatureClassifierCV(cv=mask, scoring="accuracy", **kw).fit(X, labels, sample_weight=w)
    b = dxrf.RandomFeatureClassifierCV(cv=mask[rep], scoring="accuracy", **kw).fit(X[rep], labels[rep])
    assert a.best_params_ == b.best_params_
    for key in ("mean_test_accuracy", "mean_test_r2"):
        assert rel(a.cv_results_[key], b.cv_results_[key]) <= TOL, key


def test_score_models_weighted_is_a_weighted_mean(data):
    X, _, labels, w, rep = data
    f = fourier().fit(X)
    rng = np.random.default_rng(2)
    models = [LinearModels(f, rng.normal(size=(3, 40, 3)), task="classification", link="softmax")]
    (a,), (b,) = score_models(X, labels, models, sample_weight=w), score_models(X[rep], labels[rep], models)
    for name in ("mse", "error", "log_loss"):
        assert rel(getattr(a, name), getattr(b, name)) <= TOL, name
    assert a.n == b.n
    (c,), (d,) = score_models(X, labels, models, sample_weight=np.ones(len(X))), score_models(X, labels, models)
    for name in ("mse", "error", "log_loss"):
        np.testing.assert_array_equal(getattr(c, name), getattr(d, name))


# -- SGD: exact kernels, a tolerance band for the method -------------------------------------------


def test_sgd_step_is_the_weighted_gradient(data):
    X, y, _, w, _ = data
    kernel = fourier().fit(X).kernel_
    b = 16
    cfg = _Config(loss="squared", step=0.3, batch_size=b, fit_intercept=True, shuffle=False, seed=0, fraction=None,
                  tile_rows=64, blas_threads=None)
    start = np.random.default_rng(3).normal(size=(40, 1)) * 0.1
    state = _State(start.copy(), np.array([0.2]))
    Y = y[:, None]
    ww = w[:b].astype(float)
    _sgd_rows(state, X, Y, np.arange(b), kernel, cfg, w.astype(float))  # one mini-batch of b rows
    Z = kernel(X[:b])
    r = Z @ start + 0.2 - Y[:b]
    assert rel(state.coef, start - 0.3 / b * Z.T @ (ww[:, None] * r)) <= 1e-12
    assert abs(state.intercept[0] - (0.2 - 0.3 * np.mean(ww * r[:, 0]))) <= 1e-12
    assert state.loss_count == ww.sum() and abs(state.loss_sum - ww @ r[:, 0] ** 2) <= 1e-12
    # the intercept's start: the weighted mean of the training targets, exactly the repeated rows' mean
    total, count = _ysum_chunk(Y, None, 0, cfg, w)
    assert count == w.sum() and abs(total[0] / count - np.repeat(y, w).mean()) <= 1e-12


def test_sgd_weighted_within_a_band_of_repeated_rows(data):
    """Over three shuffles, weighted SGD's weighted training loss is within a band of SGD's on repeated rows.

    The last iterate of constant-step SGD is noisy (weights add gradient variance), so the band compares
    medians over seeds: the same weighted objective, not the same iterates.
    """
    X, y, labels, w, rep = data
    kw = dict(max_passes=30, batch_size=8, step_size=0.1, validation=None, early_stopping=False)

    def medians(est, target, metric, **extra):
        weighted, repeated = [], []
        for seed in range(3):
            weighted.append(metric(est(fourier(), random_state=seed, **kw, **extra).fit(X, target, sample_weight=w)))
            repeated.append(metric(est(fourier(), random_state=seed, **kw, **extra).fit(X[rep], target[rep])))
        return np.median(weighted), np.median(repeated)

    a, b = medians(RandomFeatureSGDRegressor, y, lambda m: np.average((m.predict(X) - y) ** 2, weights=w))
    assert abs(a - b) <= 0.2 * b
    c, d = medians(RandomFeatureSGDClassifier, labels, lambda m: np.average(m.predict(X) == labels, weights=w),
                   loss="logistic")
    assert abs(c - d) <= 0.03


# -- dask input on a real cluster --------------------------------------------------------------------


def test_zarr_on_a_cluster_equals_numpy(data, client, tmp_path):
    X, y, labels, w, _ = data
    da.from_array(X, chunks=(250, 3)).to_zarr(str(tmp_path / "X.zarr"))
    da.from_array(w.astype(float), chunks=(400,)).to_zarr(str(tmp_path / "w.zarr"))
    Xd, wd = da.from_zarr(str(tmp_path / "X.zarr")), da.from_zarr(str(tmp_path / "w.zarr"))  # chunks differ: aligned
    f = fourier().fit(X)
    a, b = accumulate(Xd, y, f, sample_weight=wd), accumulate(X, y, f, sample_weight=w)
    for key in ("gram", "sum", "cross", "ysum", "yy"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    assert a.n == b.n
    ra = dxrf.RandomFeatureRidge(fourier(), alphas=[1e-4, 1e-2]).fit(Xd, da.from_array(y, chunks=300), sample_weight=wd)
    rb = dxrf.RandomFeatureRidge(fourier(), alphas=[1e-4, 1e-2]).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(ra.coef_, rb.coef_)
    kw = dict(loss="logistic", hessian_rows=None, tol=1e-6)
    ca = dxrf.RandomFeatureClassifier(fourier(), **kw).fit(Xd, labels, sample_weight=wd)
    cb = dxrf.RandomFeatureClassifier(fourier(), **kw).fit(X, labels, sample_weight=w)
    assert ca.n_iter_ == cb.n_iter_ and rel(ca.coef_, cb.coef_) <= 1e-9
    (sa,), (sb,) = (score_models(Xd, labels, [LinearModels(f, np.ones((40, 3)), task="classification")], sample_weight=v)
                    for v in (wd, w))
    np.testing.assert_array_equal(sa.mse, sb.mse)
    kw = dict(max_passes=1, validation=0.2, random_state=0)
    ga = RandomFeatureSGDRegressor(fourier(), **kw).fit(Xd, y, sample_weight=wd)
    gb = RandomFeatureSGDRegressor(fourier(), **kw).fit(X, y, sample_weight=w)
    assert np.all(np.isfinite(ga.coef_)) and rel(ga.validation_errors_, gb.validation_errors_) <= 0.2


# -- class_weight -------------------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_class_weight_matches_explicit_sample_weight(data, loss):
    X, _, labels, w, _ = data
    counts = np.bincount(labels)
    balanced = len(labels) / (3 * counts)
    kw = dict(loss=loss, hessian_rows=None)
    a = dxrf.RandomFeatureClassifier(fourier(), class_weight="balanced", **kw).fit(X, labels)
    b = dxrf.RandomFeatureClassifier(fourier(), **kw).fit(X, labels, sample_weight=balanced[labels])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    cw = {0: 2.0, 2: 0.5}  # class 1 keeps weight 1
    a = dxrf.RandomFeatureClassifier(fourier(), class_weight=cw, **kw).fit(X, labels, sample_weight=w)
    per = np.array([2.0, 1.0, 0.5])
    b = dxrf.RandomFeatureClassifier(fourier(), **kw).fit(X, labels, sample_weight=w * per[labels])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    mask = np.arange(len(X)) % 3 == 0
    a = dxrf.RandomFeatureClassifierCV(bandwidths=[2.0], n_components=[20], alphas=[1e-3], cv=mask, dtype="float64",
                                       class_weight="balanced", random_state=0).fit(X, labels)
    b = dxrf.RandomFeatureClassifierCV(bandwidths=[2.0], n_components=[20], alphas=[1e-3], cv=mask, dtype="float64",
                                       random_state=0).fit(X, labels, sample_weight=balanced[labels])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    kw = dict(loss="hinge", max_passes=2, random_state=0)
    a = RandomFeatureSGDClassifier(fourier(), class_weight="balanced", **kw).fit(X, labels)
    b = RandomFeatureSGDClassifier(fourier(), **kw).fit(X, labels, sample_weight=balanced[labels])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    a = RandomFeatureSGDClassifier(fourier(), class_weight=cw, **kw).partial_fit(X, labels, classes=[0, 1, 2])
    b = RandomFeatureSGDClassifier(fourier(), **kw).partial_fit(X, labels, classes=[0, 1, 2], sample_weight=per[labels])
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_balanced_class_weight_on_real_data():
    """Adult (24% positives): balanced weights equal n / (2 count) and raise the minority class's recall."""
    ds = dxrf.datasets.loaders.load("adult", n_rows=3000)
    X = (ds.X_train - ds.X_train.mean(0)) / (ds.X_train.std(0) + 1e-12)
    y = ds.y_train
    f = dxrf.RandomFourierFeatures(100, bandwidth=8.0, dtype="float64", random_state=0)
    plain = dxrf.RandomFeatureClassifier(f, loss="logistic", alpha=1e-4).fit(X, y)
    bal = dxrf.RandomFeatureClassifier(f, loss="logistic", alpha=1e-4, class_weight="balanced").fit(X, y)
    counts = np.bincount(np.searchsorted(bal.classes_, y))
    ref = dxrf.RandomFeatureClassifier(f, loss="logistic", alpha=1e-4).fit(
        X, y, sample_weight=(len(y) / (2 * counts))[np.searchsorted(bal.classes_, y)])
    np.testing.assert_array_equal(bal.coef_, ref.coef_)
    minority = bal.classes_[np.argmin(counts)]
    recall = [np.mean(m.predict(X)[y == minority] == minority) for m in (plain, bal)]
    assert recall[1] > recall[0] + 0.1


def test_class_weight_saved_and_loaded(data, tmp_path):
    X, _, labels, _, _ = data
    m = dxrf.RandomFeatureClassifier(fourier(20), class_weight={0: 2.0, 1: 1.0, 2: 0.5}).fit(X, labels)
    m.save(tmp_path / "m")
    loaded = dxrf.load(tmp_path / "m")
    assert loaded.class_weight == {0: 2.0, 1: 1.0, 2: 0.5}
    np.testing.assert_array_equal(loaded.predict(X), m.predict(X))
    r = dxrf.RandomFeatureRidge(fourier(20), alpha=1e-3).partial_fit(X, X[:, 0], sample_weight=np.full(len(X), 0.5))
    r.save(tmp_path / "r")
    assert dxrf.load(tmp_path / "r").stats_.n == 0.5 * len(X)


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("weights,match", [
    (lambda n: -np.ones(n), "negative"),
    (lambda n: np.r_[np.ones(n - 1), np.nan], "NaN or infinity"),
    (lambda n: np.r_[np.ones(n - 1), np.inf], "NaN or infinity"),
    (lambda n: np.ones(n - 3), r"sample_weight has \d+ weights but X has \d+ rows"),
    (lambda n: np.zeros(n), "sums to zero"),
    (lambda n: np.ones((n, 2)), "1-dimensional"),
    (lambda n: 3.0, "one weight per row"),
])
def test_bad_weights_are_refused(data, weights, match):
    X, y, labels, _, _ = data
    n = len(X)
    estimators = [
        (dxrf.RandomFeatureRidge(fourier(10)), y),
        (dxrf.RandomFeatureClassifier(fourier(10), loss="logistic"), labels),
        (dxrf.LeverageScoreSampler(5, n_candidates=10, base=fourier()), None),
        (RandomFeaturePCA(2, features=fourier(10)), None),
        (RandomFeatureSGDRegressor(fourier(10)), y),
        (dxrf.RandomFeatureRidgeCV(bandwidths=[1.0], n_components=[5], cv=2), y),
    ]
    for est, target in estimators:
        with pytest.raises(ValueError, match=match):
            est.fit(X, target, sample_weight=weights(n))
        assert not hasattr(est, "coef_") and not hasattr(est, "components_")
    with pytest.raises(ValueError, match=match):
        accumulate(X, y, fourier(10).fit(X), sample_weight=weights(n))
    with pytest.raises(ValueError, match=match):
        accumulate(da.from_array(X, chunks=300), y, fourier(10).fit(X),
                   sample_weight=da.from_array(np.asarray(weights(n)), chunks=200) if np.ndim(weights(n)) else weights(n))


def test_bad_class_weight_is_refused(data):
    X, _, labels, _, _ = data
    with pytest.raises(ValueError, match=r"not classes of y: \[7, 'x'\]"):
        dxrf.RandomFeatureClassifier(fourier(10), class_weight={0: 1.0, 7: 2.0, "x": 1.0}).fit(X, labels)
    with pytest.raises(ValueError, match="class_weight must be None"):
        dxrf.RandomFeatureClassifier(fourier(10), class_weight="balance").fit(X, labels)
    with pytest.raises(ValueError, match=r"class_weight\[0\] must be a finite number >= 0"):
        dxrf.RandomFeatureClassifier(fourier(10), class_weight={0: -1.0}).fit(X, labels)
    with pytest.raises(ValueError, match="sums to zero"):
        dxrf.RandomFeatureClassifier(fourier(10), class_weight={0: 0.0, 1: 0.0, 2: 0.0}).fit(X, labels)
    for est in (dxrf.RandomFeatureClassifier(fourier(10), class_weight="balanced"),
                RandomFeatureSGDClassifier(fourier(10), class_weight="balanced")):
        with pytest.raises(ValueError, match="partial_fit takes a dict or None"):
            est.partial_fit(X, labels, classes=[0, 1, 2])
    with pytest.raises(ValueError, match="not classes of y"):
        RandomFeatureSGDClassifier(fourier(10), class_weight={5: 1.0}).fit(X, labels)
    with pytest.raises(ValueError, match="not classes of y"):
        dxrf.RandomFeatureClassifierCV(bandwidths=[1.0], n_components=[5], cv=2, class_weight={9: 1.0}).fit(X, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dxrf.RandomFeatureClassifier(fourier(10), class_weight={0: 1.0}).partial_fit(X, labels, classes=[0, 1, 2])


@pytest.mark.skipif(not _gpu_available(), reason="needs CuPy and a GPU")
def test_weighted_cupy_blocks_match_numpy(data):
    import cupy
    import dask

    X, y, _, w, _ = data
    f = dxrf.RandomFourierFeatures(40, bandwidth=2.0, random_state=0).fit(X)
    Xg = da.from_array(X.astype(np.float32), chunks=(300, 3)).map_blocks(cupy.asarray)
    yg = da.from_array(y[:, None], chunks=(300, 1)).map_blocks(cupy.asarray)
    wg = da.from_array(w.astype(float), chunks=300).map_blocks(cupy.asarray)
    with dask.config.set(scheduler="threads"):
        got = accumulate(Xg, yg, f, split=0.25, sample_weight=wg)
    want = accumulate(X.astype(np.float32), y, f, split=0.25, sample_weight=w)
    for g, h in zip(got, want):
        assert g.n == h.n
        for key in ("gram", "sum", "cross", "yy"):
            assert rel(getattr(g, key), getattr(h, key)) <= 1e-5, key


def test_nystroem_weighted_equals_repeated_rows(data):
    # the whitening applies to the weighted M x M statistics: n is the total weight there too
    X, y, _, w, rep = data
    nys = dxrf.NystroemFeatures(30, bandwidth=1.5, landmarks=X[:30], random_state=0)
    a = accumulate(X, y, features=nys.fit(X), sample_weight=w)
    b = accumulate(X[rep], y[rep], features=nys.fit(X))
    assert a.n == pytest.approx(w.sum()) and b.n == len(rep)
    for name in ("gram", "sum", "cross", "ysum", "yy"):
        assert rel(getattr(a, name), getattr(b, name)) <= TOL, name
    r1 = dxrf.RandomFeatureRidge(nys, alpha=1e-4).fit(X, y, sample_weight=w)
    r2 = dxrf.RandomFeatureRidge(nys, alpha=1e-4).fit(X[rep], y[rep])
    assert rel(r1.coef_, r2.coef_) <= 1e-7


@pytest.mark.parametrize("solver", ["lbfgs", "newton-cg"])
def test_multinomial_weighted_equals_repeated_rows(data, solver):
    X, _, labels, w, rep = data
    kw = dict(loss="multinomial", alpha=1e-3, solver=solver, tol=1e-10, max_iter=300)
    a = dxrf.RandomFeatureClassifier(fourier(), **kw).fit(X, labels, sample_weight=w)
    b = dxrf.RandomFeatureClassifier(fourier(), **kw).fit(X[rep], labels[rep])
    assert rel(a.coef_, b.coef_) <= 1e-6 and rel(a.intercept_, b.intercept_) <= 1e-6
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-7)
    # class_weight multiplies in like explicit weights
    cw = {0: 2.0, 1: 1.0, 2: 0.5}
    c = dxrf.RandomFeatureClassifier(fourier(), class_weight=cw, **kw).fit(X, labels)
    d = dxrf.RandomFeatureClassifier(fourier(), **kw).fit(X, labels, sample_weight=np.vectorize(cw.get)(labels))
    assert rel(c.coef_, d.coef_) <= 1e-12


# -- the median bandwidth and small float32 fits ----------------------------------------------


def test_weighted_median_is_the_median_of_repeated_rows():
    from scipy.spatial.distance import pdist

    from dxrf.features.samplers import median_distance

    rng = np.random.default_rng(5)
    checked = 0
    for trial in range(120):
        n, d = int(rng.integers(2, 20)), int(rng.integers(1, 4))
        X = rng.normal(size=(n, d))
        X = np.round(X, 1) if trial % 3 == 0 else X  # ties, and distinct rows at distance 0
        w = rng.integers(0, 5, size=n)
        for metric in ("euclidean", "cityblock"):
            want = float(np.median(pdist(X.repeat(w, axis=0), metric))) if w.sum() >= 2 else 0.0
            if want > 0:  # else both refuse: no pair of positive distance
                assert median_distance(X, metric, w) == want  # bitwise, odd and even totals
                checked += 1
    assert checked > 150
    X = rng.normal(size=(30, 2))
    # weights of ones are no weights; below 1 a row has no pairs with itself, so a constant 1/2 is none either
    assert median_distance(X, "euclidean", np.ones(30)) == median_distance(X) == median_distance(X, "euclidean", np.full(30, 0.5))
    with pytest.raises(ValueError, match="two rows of positive weight"):
        median_distance(X, "euclidean", np.r_[1.0, np.zeros(29)])


def test_median_sample_weighs_pairs_without_bias():
    """Above median_samples the rows are a uniform sample; a row's own pairs are weighted (s - 1) / (N - 1)."""
    from dxrf.features.maps import _median_sample
    from dxrf.features.samplers import weighted_pairs

    rng = np.random.default_rng(6)
    n, s = 400, 100
    X = rng.normal(size=(n, 2))
    w = rng.integers(1, 4, size=n).astype(float)
    _, full = weighted_pairs(X, w)
    want = full[0] / full[1:].sum()  # the copies' own pairs against the other pairs, over all rows
    own, other = [], []
    for seed in range(200):
        sample, ws, fraction = _median_sample(X, np.random.default_rng(seed), s, w)
        assert fraction == (s - 1) / (n - 1) and sample.shape == (s, 2)
        _, pw = weighted_pairs(sample, ws, "euclidean", fraction)
        own.append(pw[0])
        other.append(pw[1:].sum())
    # both are unbiased for p2 times the full sums, so their ratio of means is the full ratio
    assert np.mean(own) / np.mean(other) == pytest.approx(want, rel=0.05)


def test_median_bandwidth_of_weighted_rows(data):
    X, y, _, w, rep = data
    small, ws = X[:200], w[:200]
    reps = np.repeat(np.arange(200), ws)
    for fmap in (dxrf.RandomFourierFeatures(20, bandwidth="median", random_state=0),
                 dxrf.RandomFourierFeatures(20, kernel="laplacian", bandwidth="median", random_state=0),
                 dxrf.RandomReLUFeatures(20, bandwidth="median", random_state=0)):
        a, b = clone(fmap).fit(small, sample_weight=ws), clone(fmap).fit(small[reps])
        assert a.bandwidth_ == b.bandwidth_
        np.testing.assert_array_equal(a.transform(small), b.transform(small))
        # dask rows and weights: the same sample, the same bandwidth
        c = clone(fmap).fit(da.from_array(small, chunks=(64, 3)), sample_weight=da.from_array(ws, chunks=50))
        assert c.bandwidth_ == a.bandwidth_
    # above median_samples the sample's row indices do not depend on the weights: ones are no weights, bitwise
    med = dxrf.RandomFourierFeatures(20, bandwidth="median", median_samples=100, random_state=0)
    assert clone(med).fit(X, sample_weight=np.ones(len(X))).bandwidth_ == clone(med).fit(X).bandwidth_
    # the learners, a selector and the search weigh it: the default features see the weights
    r = dxrf.RandomFeatureRidge(random_state=0).fit(small, y[:200], sample_weight=ws)
    assert r.features_.bandwidth_ == a.bandwidth_
    sel = dxrf.LeverageScoreSampler(10, base=dxrf.RandomFourierFeatures(bandwidth="median"), random_state=0)
    assert sel.fit(small, sample_weight=ws).candidates_.bandwidth_ == a.bandwidth_


def test_small_float32_fits_weighted_equal_repeated_rows(data):
    """A small pass multiplies float32 features in float64 (DESIGN.md, "Precision of the pass"):
    weights equal repeated rows to float64 rounding, not float32's."""
    X, y, labels, w, rep = data

    def f32():
        return dxrf.RandomFourierFeatures(40, bandwidth=2.0, random_state=0)

    a, b = accumulate(X, y, f32().fit(X), sample_weight=w), accumulate(X[rep], y[rep], f32().fit(X))
    for key in ("gram", "sum", "cross"):
        assert rel(getattr(a, key), getattr(b, key)) <= 1e-13, key
    kws = [({}, "ridge"), (dict(loss="logistic", solver="newton", hessian_rows=None, tol=1e-10), "decision_function"),
           (dict(loss="multinomial", solver="newton-cg", tol=1e-10, max_iter=300), "predict_proba")]
    for kw, method in kws:
        make = (lambda: dxrf.RandomFeatureRidge(f32(), alpha=1e-4)) if not kw else (
            lambda: dxrf.RandomFeatureClassifier(f32(), **kw))
        one = make().fit(X, y if not kw else labels, sample_weight=w)
        two = make().fit(X[rep], (y if not kw else labels)[rep])
        method = "predict" if method == "ridge" else method
        np.testing.assert_allclose(getattr(one, method)(X), getattr(two, method)(X), rtol=1e-9, atol=1e-12)

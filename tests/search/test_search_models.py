"""The search's prefix protocol (candidate_ratio), N0 = N leverage, train scores and kept fold models.

Every configuration of a search is checked against what a user gets from the
public single-model estimators with the same candidates and seeds: a selector
on a prefix of the candidates (``FixedFeatures``, a map with given
parameters), then ``RandomFeatureRidge`` on the same hold-out. The kept fold
models are scored on rows chosen here and compared with dense NumPy
predictions and with the search's own validation and training errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import dxrf
from dxrf.stats.accumulation import hashed_split
from dxrf.workflows.bench_fig2_grid import FixedFeatures

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SEED, SPLIT_SEED, FRACTION, RATIO = 4, 1, 0.25, 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(1500, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=1500)
    return X, y


def search(X, y, cls=dxrf.RandomFeatureRidgeCV, **kw):
    params = dict(
        bandwidths=[1.0], n_components=[4, 8], selections=["none", "elss-sample", "elss-top", "eerf", "lkrf"],
        lams=[1e-3], rhos=[1.0], alphas=[1e-5, 1e-2], candidate_ratio=RATIO, cv=FRACTION, cv_seed=SPLIT_SEED,
        dtype="float64", random_state=SEED, keep_models=True, return_train_score=True,
    )
    params.update(kw)
    return cls(**params).fit(X, y)


def separate(X, y, est, row, leverage_rows):
    """Validation MSE and selection of one configuration from separate public estimators."""
    p = est.cv_results_["params"][row]
    m, sel = p["n_components"], p["selection"]
    cand = dxrf.RandomFourierFeatures(est.n_candidates_, bandwidth=1.0, dtype="float64", random_state=SEED).fit(X)
    mask = hashed_split(0, X.shape[0], FRACTION, SPLIT_SEED)
    base = FixedFeatures(cand.kernel_)  # a selector sets n_components = its n_candidates: the prefix
    kw = {"n_candidates": RATIO * m, "base": base, "random_state": SEED}
    if sel == "none":
        features, selected = FixedFeatures(cand.kernel_, m), np.arange(m)
    else:
        if sel.startswith("elss"):
            selector = dxrf.LeverageScoreSampler(m, lam=p["lam"], method=sel.split("-")[1], **kw)
        elif sel == "eerf":
            selector = dxrf.EnergyScoreSelector(m, **kw)
        else:
            selector = dxrf.KernelAlignmentSelector(m, rho=p["rho"], method="sample", **kw)
        # N0 = N: the leverage from every row; otherwise (and supervised) the training rows only
        rows = slice(None) if leverage_rows == "all" and sel.startswith("elss") else ~mask
        selector.fit(X[rows], y[rows])
        features, selected = FixedFeatures(selector.kernel_), selector.selected_
    model = dxrf.RandomFeatureRidge(features, alpha=p["alpha"], validation=mask).fit(X, y)
    return float(model.validation_errors_[0]), selected


@pytest.mark.parametrize("leverage_rows", ["train", "all"])
def test_each_m_selects_among_its_prefix_as_a_separate_selector(data, leverage_rows):
    X, y = data
    est = search(X, y, leverage_rows=leverage_rows)
    assert est.n_candidates_ == RATIO * 8 and est.n_passes_ == 1
    r = est.cv_results_
    for row in range(len(r["params"])):
        valid, selected = separate(X, y, est, row, leverage_rows)
        idx, _ = est.fold_selection(row)
        m = r["param_n_components"][row]
        assert idx.max() < RATIO * m, r["params"][row]  # only the first r * M candidates
        np.testing.assert_array_equal(np.sort(idx), np.sort(selected), err_msg=str(r["params"][row]))
        np.testing.assert_allclose(r["mean_validation_mse"][row], valid, rtol=1e-7, err_msg=str(r["params"][row]))


def test_refit_with_candidate_ratio_selects_from_all_rows_prefix(data):
    X, y = data
    est = search(X, y, selections=["elss-top"], alphas=[1e-2], n_components=[8])
    cand = dxrf.RandomFourierFeatures(est.n_candidates_, bandwidth=1.0, dtype="float64", random_state=SEED).fit(X)
    sel = dxrf.LeverageScoreSampler(8, n_candidates=RATIO * 8, lam=1e-3, method="top", base=FixedFeatures(cand.kernel_),
                                    random_state=SEED).fit(X)
    want = dxrf.RandomFeatureRidge(FixedFeatures(sel.kernel_), alpha=1e-2).fit(X, y)
    np.testing.assert_allclose(est.predict(X[:50]), want.predict(X[:50]), rtol=1e-6, atol=1e-8)


def test_fold_models_are_the_validated_models(data):
    X, y = data
    est = search(X, y)
    r = est.cv_results_
    mask = hashed_split(0, X.shape[0], FRACTION, SPLIT_SEED)
    valid = est.score_configurations(X[mask], y[mask])
    train = est.score_configurations(X[~mask], y[~mask])
    assert valid["n"] == mask.sum() and np.array_equal(valid["index"], np.arange(len(r["params"])))
    np.testing.assert_allclose(valid["mse"], r["mean_validation_mse"], rtol=1e-7)
    np.testing.assert_allclose(train["mse"], r["mean_train_mse"], rtol=1e-7)
    # R^2 on the training rows from the same MSE
    np.testing.assert_allclose(r["mean_train_score"], 1 - train["mse"] / y[~mask].var(), rtol=1e-7)


def test_fold_models_predict_like_dense_numpy(data):
    X, y = data
    est = search(X, y)
    rows = [3, 17, 5]
    groups = est.fold_models(rows)
    assert [list(g[0]) for g in groups] == [rows]  # one bandwidth, the order kept
    (_, models), = groups
    Z = models.features(X[:40]).astype(np.float64)
    pred = Z @ models.coef[:, :, 0].T + models.intercept[:, 0]
    # each stacked model is its selection's features times its coefficients
    for j, row in enumerate(rows):
        idx, sc = est.fold_selection(row)
        assert np.count_nonzero(np.abs(models.coef[j, :, 0]) > 0) <= idx.size
        np.testing.assert_allclose(models.coef[j, np.setdiff1d(np.arange(Z.shape[1]), idx), 0], 0.0)
    got = est.score_configurations(X[:40], y[:40], rows)
    np.testing.assert_allclose(got["mse"], ((pred - y[:40, None]) ** 2).mean(axis=0), rtol=1e-9)


def test_classifier_train_accuracy_and_test_errors(data):
    X, y = data
    labels = np.where(y > np.median(y), "hi", "lo")
    est = search(X, labels, cls=dxrf.RandomFeatureClassifierCV, scoring="accuracy", selections=["none", "elss-top"])
    assert est.n_passes_ == 2
    r = est.cv_results_
    mask = hashed_split(0, X.shape[0], FRACTION, SPLIT_SEED)
    train = est.score_configurations(X[~mask], labels[~mask])
    valid = est.score_configurations(X[mask], labels[mask])
    np.testing.assert_allclose(r["mean_train_score"], 1 - train["error"], atol=1e-12)
    np.testing.assert_allclose(r["mean_test_score"], 1 - valid["error"], atol=1e-12)
    with pytest.raises(ValueError, match="labels that fit did not see"):
        est.score_configurations(X[:5], np.array(["hi", "lo", "mid", "lo", "hi"]))


def test_kfold_train_scores(data):
    X, y = data
    est = search(X, y, cv=3, selections=["none"], candidate_ratio=None, n_components=[6], alphas=[1e-3])
    r = est.cv_results_
    assert {"split0_train_mse", "split2_train_score", "std_train_score"} <= set(r)
    folds = [est.score_configurations(X, y, fold=f) for f in range(3)]  # every row: training and held-out
    for f in range(3):
        assert r[f"split{f}_train_mse"][0] < folds[f]["mse"][0] * 1.5
    with pytest.raises(ValueError, match="fold"):
        est.fold_models(fold=3)


def test_default_keeps_nothing_and_bad_parameters_are_named(data):
    X, y = data
    est = dxrf.RandomFeatureRidgeCV(bandwidths=[1.0], n_components=[5], alphas=[1e-3], cv=0.2, random_state=0).fit(X, y)
    assert not any("train" in k for k in est.cv_results_)
    with pytest.raises(ValueError, match="keep_models=True"):
        est.fold_models()
    est = search(X, y)
    with pytest.raises(ValueError, match="indices"):
        est.fold_models([10**6])
    bad = [
        ({"candidate_ratio": 0}, ValueError, "candidate_ratio"),
        ({"candidate_ratio": 2.5}, TypeError, "candidate_ratio"),
        ({"candidate_ratio": True}, TypeError, "candidate_ratio"),
        ({"candidate_ratio": 4, "n_candidates": 20}, ValueError, "candidate_ratio=4 needs 32"),
        ({"leverage_rows": "test"}, ValueError, "leverage_rows"),
        ({"keep_models": "yes"}, TypeError, "keep_models"),
        ({"return_train_score": 1}, TypeError, "return_train_score"),
    ]
    for kw, exc, match in bad:
        with pytest.raises(exc, match=match):
            search(X, y, **kw)


@pytest.mark.parametrize("cls", [dxrf.RandomFeatureRidgeCV, dxrf.RandomFeatureClassifierCV])
def test_plain_bandwidth_choice_prunes_the_other_bandwidths(data, cls):
    X, y = data
    target = y if cls is dxrf.RandomFeatureRidgeCV else y > np.median(y)
    extra = {} if cls is dxrf.RandomFeatureRidgeCV else {"scoring": "accuracy"}
    kw = dict(bandwidths=[0.3, 1.0, 3.0], selections=["none", "elss-top", "lkrf"], cls=cls, **extra)
    joint, plain = search(X, target, **kw), search(X, target, bandwidth_choice="plain", **kw)
    rj, rp = joint.cv_results_, plain.cv_results_
    none = rj["param_selection"] == "none"
    top = none & (rj["param_n_components"] == 8)
    # the bandwidth whose plain features at the largest M have the lowest validation MSE
    best = {b: rj["mean_validation_mse"][top & (rj["param_bandwidth"] == b)].min() for b in (0.3, 1.0, 3.0)}
    chosen = min(best, key=best.get)
    here = rj["param_bandwidth"] == chosen
    searched = none | here
    for key in ("mean_validation_mse", "mean_test_score", "mean_train_mse", "mean_train_score"):
        np.testing.assert_array_equal(rp[key][searched], rj[key][searched], err_msg=key)
        assert np.isnan(rp[key][~searched]).all(), key
    assert plain.best_params_["bandwidth"] == chosen or plain.best_params_["selection"] == "none"
    assert rp["rank_test_score"][~searched].min() > rp["rank_test_score"][searched].max()
    with pytest.raises(ValueError, match="not searched"):
        plain.fold_models(np.flatnonzero(~searched)[:1])
    with pytest.raises(ValueError, match="add 'none'"):
        search(X, target, bandwidth_choice="plain", **{**kw, "selections": ["eerf"]})
    with pytest.raises(ValueError, match="bandwidth_choice"):
        search(X, target, bandwidth_choice="first", **kw)


@pytest.mark.parametrize("cls", [dxrf.RandomFeatureRidgeCV, dxrf.RandomFeatureClassifierCV])
@pytest.mark.parametrize("cv", [FRACTION, 3])
def test_plain_first_reads_twice_and_finds_what_plain_finds(data, cls, cv):
    X, y = data
    target = y if cls is dxrf.RandomFeatureRidgeCV else y > np.median(y)
    extra = {} if cls is dxrf.RandomFeatureRidgeCV else {"scoring": "accuracy"}
    kw = dict(bandwidths=[0.3, 1.0, 3.0], selections=["none", "elss-top", "lkrf"], cls=cls, cv=cv, **extra)
    one, two = search(X, target, bandwidth_choice="plain", **kw), search(X, target, bandwidth_choice="plain-first", **kw)
    # the plain features' Gram at every bandwidth, then all M0 candidates' at the chosen one
    assert two.n_passes_ == one.n_passes_ + 1
    r1, r2 = one.cv_results_, two.cv_results_
    searched = ~np.isnan(r1["mean_validation_mse"])
    np.testing.assert_array_equal(np.isnan(r2["mean_validation_mse"]), ~searched)
    for key in ("mean_validation_mse", "mean_test_score", "mean_train_mse", "mean_train_score"):
        np.testing.assert_allclose(r2[key][searched], r1[key][searched], rtol=1e-9, atol=1e-12, err_msg=key)
    assert two.best_params_ == one.best_params_
    np.testing.assert_allclose(two.predict(X[:50]) if cls is dxrf.RandomFeatureRidgeCV else two.decision_function(X[:50]),
                               one.predict(X[:50]) if cls is dxrf.RandomFeatureRidgeCV else one.decision_function(X[:50]),
                               rtol=1e-8, atol=1e-10)
    # the kept models of every searched configuration, at every bandwidth, score as plain's
    rows = np.flatnonzero(searched)
    s1, s2 = one.score_configurations(X[:300], target[:300], rows), two.score_configurations(X[:300], target[:300], rows)
    np.testing.assert_array_equal(s1["index"], s2["index"])
    np.testing.assert_allclose(s2["mse"], s1["mse"], rtol=1e-8, atol=1e-12)


def test_plain_first_refits_plain_features_at_a_bandwidth_read_only_in_part(data):
    """The best may be plain features at a bandwidth whose M0 candidates were never read."""
    X, y = data
    y = y + 3 * np.random.default_rng(3).normal(size=y.size)  # noise: the largest M overfits, a small M wins
    kw = dict(bandwidths=[0.3, 1.0, 3.0, 10.0], selections=["none", "eerf"], n_components=[2, 4, 600],
              candidate_ratio=None, n_candidates=600, alphas=[1e-12])
    one, two = search(X, y, bandwidth_choice="plain", **kw), search(X, y, bandwidth_choice="plain-first", **kw)
    r = two.cv_results_
    chosen = r["param_bandwidth"][np.flatnonzero(~np.isnan(r["mean_validation_mse"]) & (r["param_selection"] == "eerf"))[0]]
    assert two.best_params_ == one.best_params_ == {"bandwidth": 3.0, "selection": "none", "n_components": 4, "alpha": 1e-12}
    assert chosen == 10.0  # the M0 candidates were read at 10.0 only
    np.testing.assert_allclose(two.coef_, one.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(two.predict(X), one.predict(X), rtol=1e-8, atol=1e-10)

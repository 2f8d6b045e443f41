"""The growth of a search's number of features: when it grows, when it stops, what it predicts."""

from __future__ import annotations

import numpy as np
import pytest

from dxrf.search.growth import GrowthBudget, Stage, first_stage_components, grow, stage_losses


def _runner(loss_of_m, seconds=1.0, calls=None):
    """A stage whose validation loss at M is ``loss_of_m(M)``; each read takes ``seconds`` (pass 60%, algebra 30%)."""
    def run(ms, first):
        if calls is not None:
            calls.append((list(ms), first))
        stage = Stage(list(ms), {m: loss_of_m(m) for m in ms}, 3 if first else 1, 0.6 * seconds, 0.3 * seconds,
                      seconds)
        return ("outcome", max(ms)), stage
    return run


def test_grows_while_the_error_improves_and_stops_when_it_does_not():
    calls = []
    # loss falls 20% per doubling up to M = 4000, then flat
    growth = grow(_runner(lambda m: 0.1 * 0.8 ** (min(m, 4000) / 250),
                          calls=calls), [250, 500, 1000, 2000], 10**6, GrowthBudget(max_components=64000, time_budget=None))
    assert calls == [([250, 500, 1000, 2000], True), ([4000], False), ([8000], False)]
    assert growth.chosen == 1 and growth.outcome == ("outcome", 4000)
    assert growth.stop_reason == "M=8000 validated within 1% of M=4000"
    summary = growth.as_dict()
    assert [s["n_components"] for s in summary["stages"]] == [[250, 500, 1000, 2000], [4000], [8000]]
    assert summary["chosen_stage"] == 1


def test_stops_at_the_first_stage_when_its_largest_m_does_not_pay():
    calls = []
    growth = grow(_runner(lambda m: 0.05 if m >= 1000 else 0.2, calls=calls), [250, 500, 1000, 2000], 10**6,
                  GrowthBudget(time_budget=None))
    assert calls == [([250, 500, 1000, 2000], True)]
    assert growth.chosen == 0 and "M=2000 validated within 1% of M=1000" == growth.stop_reason


@pytest.mark.parametrize("budget,rows,reason", [
    (GrowthBudget(max_components=3000, time_budget=None), 10**6, "max_components=3000 reached"),
    (GrowthBudget(time_budget=None), 6000, "M=4000 would exceed half of the 6000 rows"),
])
def test_stops_at_the_limits(budget, rows, reason):
    growth = grow(_runner(lambda m: 1.0 / m), [250, 500, 1000, 2000], rows, budget)
    assert len(growth.stages) == 1 and growth.stop_reason == reason


def test_stops_when_the_next_stage_would_not_fit_memory_or_time():
    g = grow(_runner(lambda m: 1.0 / m), [500, 1000], 10**6, GrowthBudget(time_budget=None), fits=lambda m: ("gram", None) if m < 2000 else None)
    assert g.stop_reason == "M=2000 would not fit the workers' memory"
    # a stage of 10 s (3 bandwidths) at M = 1000 predicts, at M = 2000 and one bandwidth,
    # 6 * 4 / 3 + 3 * 8 / 3 + 1 = 17 s: past a budget of 20 s when 5 s are spent
    g = grow(_runner(lambda m: 1.0 / m, seconds=10.0), [500, 1000], 10**6, GrowthBudget(time_budget=20.0),
             clock=lambda: 5.0)
    assert g.stop_reason == "M=2000 was predicted to take 17 s, past time_budget=20 s (5 s spent)"
    g = grow(_runner(lambda m: 1.0 / m, seconds=10.0), [500, 1000], 10**6, GrowthBudget(time_budget=23.0,
             max_components=2000), clock=lambda: 5.0)
    assert g.stop_reason == "max_components=2000 reached" and len(g.stages) == 2


def test_first_stage_is_small_on_large_data_and_within_the_rows():
    budget = GrowthBudget()
    assert first_stage_components(36000, 3, budget) == [250, 500, 1000, 2000]
    assert first_stage_components(400, 3, budget) == [25, 50, 100, 200]
    # 3e6 rows, 3 bandwidths, 100 s of 1e10 multiply-adds a second: M = 333
    assert max(first_stage_components(3 * 10**6, 3, budget)) == 333
    assert first_stage_components(10**6, 1, GrowthBudget(time_budget=None)) == [250, 500, 1000, 2000]


def test_stage_losses_take_the_best_score_per_m():
    results = {"params": [{"n_components": 10}, {"n_components": 10}, {"n_components": 20}],
               "mean_test_score": [0.5, 0.75, float("nan")]}
    assert stage_losses(results) == {10: 0.25, 20: float("inf")}


def test_the_default_search_learns_lengthscales_and_grows_on_nystroem_features():
    """No grid: 'ard' bandwidths (one read of a row sample), Nyström features, stages reported, no edge advice."""
    import warnings

    import numpy as np

    import dxrf

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 4))
    X[:, 3] *= 5.0  # an irrelevant column
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.05 * rng.normal(size=1200)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        m = dxrf.RandomFeatureRidgeCV(random_state=0, time_budget=None).fit(X, y)
    assert not [w for w in said if "n_components" in str(w.message)]
    assert type(m.features_).__name__ == "NystroemFeatures"
    ell = m.learned_lengthscales_
    assert ell.shape == (4,) and ell[3] > 10 * ell[0]
    assert m.best_params_["bandwidth"] in ("ard*0.5", "ard*0.7", "ard")
    np.testing.assert_allclose(m.bandwidth_, ell * {"ard*0.5": 0.5, "ard*0.7": 0.7, "ard": 1.0}[m.best_params_["bandwidth"]])
    stages = m.growth_["stages"]
    assert stages[0]["n_components"] == [75, 150, 300, 600] and stages[0]["bandwidths"] == 3
    assert m.n_components_searched_.max() <= 600  # half of the rows
    assert m.n_passes_ >= 3  # the lengthscales' sample, the landmarks' race, the statistics
    assert m.score(X, y) > 0.95


def test_ard_bandwidths_parse_and_need_the_gaussian_kernel():
    import numpy as np
    import pytest as _pytest

    import dxrf
    from dxrf.search.grid import parse_bandwidth

    spec = parse_bandwidth("ard*0.5")
    assert (spec.base, spec.factor) == ("ard", 0.5) and parse_bandwidth("2*ard").factor == 2.0
    np.testing.assert_allclose(spec.resolve(None, np.array([2.0, 4.0])), [1.0, 2.0])
    with _pytest.raises(ValueError, match="'ard', 'ard\\*c', 'evidence' or 'evidence\\*c'"):
        parse_bandwidth("ard*-1")
    X = np.random.default_rng(1).normal(size=(300, 2))
    for spec in ("ard", "evidence*2"):
        with _pytest.raises(ValueError, match="'ard' and 'evidence' bandwidths learn the lengthscales of a gaussian"):
            dxrf.RandomFeatureRidgeCV(bandwidths=[spec], n_components=[20], kernel="laplacian").fit(X, X[:, 0])


def test_wide_inputs_learn_one_lengthscale_in_the_units_of_more_evidence():
    """Above ARD_MAX_COLUMNS columns the default learns one lengthscale ('evidence'), in own or spread units."""
    import numpy as np

    import dxrf
    from dxrf.search.grid import parse_bandwidth
    from dxrf.search.settings import (ARD_BANDWIDTHS, ARD_MAX_COLUMNS, EVIDENCE_BANDWIDTHS, learns_lengthscales,
                                      resolve_auto)

    params = dxrf.RandomFeatureClassifierCV().get_params(deep=False)
    assert resolve_auto(params, 5000, ARD_MAX_COLUMNS)["bandwidths"] == list(ARD_BANDWIDTHS)
    assert resolve_auto(params, 5000, ARD_MAX_COLUMNS + 1)["bandwidths"] == list(EVIDENCE_BANDWIDTHS)
    assert learns_lengthscales(params, 5000, 784) and learns_lengthscales(params, 5000, 3)
    assert not learns_lengthscales(params, 100, 3)  # too few rows: median multiples
    assert not learns_lengthscales({**params, "bandwidths": ["median", 2.0]}, 5000, 784)
    assert learns_lengthscales({**params, "bandwidths": ["evidence*0.5"]}, 5000, 3)
    spec = parse_bandwidth("0.7*evidence")
    assert (spec.base, spec.factor) == ("evidence", 0.7)
    np.testing.assert_allclose(spec.resolve(None, None, np.array([2.0, 2.0])), [1.4, 1.4])

    # columns in one unit, some nearly constant: one lengthscale in those units, one more read of X
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(800, 10))
    X[:, 6:] = np.where(rng.uniform(size=(800, 4)) < 0.02, 1.0, 0.0)
    y = np.sin(3.0 * X[:, :6].sum(axis=1) / np.sqrt(6)) + 0.05 * rng.normal(size=800)
    m = dxrf.RandomFeatureRidgeCV(bandwidths=["evidence", "evidence*0.5"], n_components=[50, 100],
                                  features="nystroem", cv=0.2, random_state=0).fit(X, y)
    ell = m.learned_lengthscales_
    np.testing.assert_allclose(ell, ell[0])
    factor = {"evidence": 1.0, "evidence*0.5": 0.5}[m.best_params_["bandwidth"]]
    np.testing.assert_allclose(m.bandwidth_, factor * ell)
    base = dxrf.RandomFeatureRidgeCV(bandwidths=[1.0], n_components=[50, 100], features="nystroem", cv=0.2,
                                     random_state=0).fit(X, y)
    assert m.n_passes_ == base.n_passes_ + 1
    assert m.score(X, y) > 0.9
    # "ard" and "evidence" in one grid: one sample read for both, each as learned alone
    ard = dxrf.RandomFeatureRidgeCV(bandwidths=["ard"], n_components=[50, 100], features="nystroem", cv=0.2,
                                    random_state=0).fit(X, y)
    both = dxrf.RandomFeatureRidgeCV(bandwidths=["ard", "evidence"], n_components=[50, 100], features="nystroem",
                                     cv=0.2, random_state=0).fit(X, y)
    assert both.n_passes_ == base.n_passes_ + 1
    np.testing.assert_array_equal(both.learned_lengthscales_, ard.learned_lengthscales_)
    row = both.cv_results_["params"].index(
        {**both.cv_results_["params"][0], "bandwidth": "evidence", "n_components": 100, "alpha": m.alpha_})
    assert both.cv_results_["mean_test_score"][row] == m.cv_results_["mean_test_score"][
        m.cv_results_["params"].index({**m.cv_results_["params"][0], "bandwidth": "evidence", "n_components": 100,
                                       "alpha": m.alpha_})]


def test_later_stages_validate_the_penalties_near_the_last_choice():
    import numpy as np

    from dxrf.search.staged import alpha_window

    alphas = np.logspace(-10, 0, 11)
    np.testing.assert_allclose(alpha_window(alphas, 1e-6), np.logspace(-8, -4, 5))
    np.testing.assert_allclose(alpha_window(alphas, 1e-10), np.logspace(-10, -8, 3))  # at an edge: three
    np.testing.assert_allclose(alpha_window(np.array([1e-3, 1.0]), 1.0), [1e-3, 1.0])  # fewer than three: all
    np.testing.assert_allclose(alpha_window(np.array([0.0, 1.0, 2.0]), 1.0), [0.0, 1.0, 2.0])  # zero: untouched


def test_equal_validation_scores_are_told_apart_by_the_validation_mse():
    from dxrf.search.results import best_index

    results = {"mean_test_score": np.array([0.97, 0.98, 0.98, 0.98 + 1e-14, np.nan]),
               "mean_validation_mse": np.array([0.01, 0.0415, 0.0414, 0.0416, 0.0])}
    assert best_index(results) == 2  # the three tie (to 12 decimals); index 2 fits best
    results["mean_validation_mse"] = np.array([0.01, np.nan, np.nan, np.nan, 0.0])
    assert best_index(results) == 1  # unknown MSEs: the first of the ties
    assert best_index({"mean_test_score": np.array([0.5, 0.7, 0.7])}) == 1
    with pytest.raises(ValueError, match="lost to rounding"):
        best_index({"mean_test_score": np.array([np.nan])})

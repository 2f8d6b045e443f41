"""Smoke run of the logistic benchmark (dxrf vs dask-ml vs scikit-learn) at a tiny size.

Timings are not checked (they are figures, not tests); what is checked is that the
three libraries solved the same problem: their objectives, evaluated on the same
explicit features, agree to the benchmark's tolerance, and the results file holds
the ratios.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from workflows import bench_logistic

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _args(**overrides) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench_logistic.add_arguments(parser)
    args = parser.parse_args([])
    for k, v in overrides.items():
        setattr(args, k, v)
    return args


def test_explicit_features_are_the_features_of_a_pass():
    import dxrf

    X, y = bench_logistic.make_data(500, 7, seed=1)
    assert X.dtype == np.float32 and set(np.unique(y)) == {0, 1}
    kernel = dxrf.RandomFourierFeatures(30, bandwidth=2.0, dtype="float32", random_state=0).fit(X).kernel_
    Z1 = bench_logistic.explicit_features(X, kernel, constant=True)
    assert Z1.shape == (500, 31) and Z1.dtype == np.float64 and np.all(Z1[:, -1] == 1.0)
    np.testing.assert_allclose(Z1[:, :-1], kernel(X), rtol=1e-6, atol=1e-7)
    t = np.where(y == 1, 1.0, -1.0)
    coef = np.random.default_rng(0).normal(size=30)
    ref = np.mean(np.log1p(np.exp(-t * (Z1[:, :-1] @ coef + 0.5)))) + 0.5 * 0.1 * coef @ coef
    assert bench_logistic.objective(Z1[:, :-1], t, coef, 0.5, 0.1) == pytest.approx(ref, rel=1e-12)


def test_bench_logistic_solves_the_same_problem_in_all_three_libraries(tmp_path):
    args = _args(n_rows=3000, m=50, alpha=1e-3, repeats=1, chunk_rows=1000, out=str(tmp_path))
    res = bench_logistic.run(args)
    runs = res["runs"]
    assert set(runs) == {"dxrf, NumPy", "dxrf, dask", "dask-ml", "scikit-learn"}
    # the same minimum, reached by every solver to the stated tolerance
    objectives = np.array([r["objective"] for r in runs.values()])
    assert np.all(np.isfinite(objectives)) and 0.0 < objectives.min() < np.log(2.0)
    assert res["objectives_agree"] and res["max_rel_gap"] <= args.rtol
    assert np.ptp(objectives) / objectives.min() <= args.rtol
    # dxrf on NumPy and on dask make the same passes to the same model
    assert runs["dxrf, NumPy"]["passes"] == runs["dxrf, dask"]["passes"] >= 2
    assert runs["dxrf, NumPy"]["converged"] and runs["scikit-learn"]["converged"]
    assert runs["dxrf, NumPy"]["objective"] == pytest.approx(runs["dxrf, dask"]["objective"], rel=1e-12)
    assert runs["dask-ml"]["evaluations"] >= 2 and runs["scikit-learn"]["iterations"] >= 2
    ratios = res["ratios"]
    assert ratios["dxrf_dask_over_dask_ml"] == pytest.approx(runs["dxrf, dask"]["median_s"] / runs["dask-ml"]["median_s"])
    assert ratios["dxrf_numpy_over_sklearn"] == pytest.approx(
        runs["dxrf, NumPy"]["median_s"] / runs["scikit-learn"]["median_s"]
    )
    saved = json.loads((tmp_path / "bench-logistic.json").read_text())
    assert saved["n_rows"] == 3000 and saved["m"] == 50
    assert set(saved["ratios"]) >= {"dxrf_dask_over_dask_ml", "dxrf_numpy_over_sklearn", "speedup_vs_dask_ml"}
    assert saved["max_rel_gap"] == pytest.approx(res["max_rel_gap"])
    assert (tmp_path / "bench-logistic.md").exists()

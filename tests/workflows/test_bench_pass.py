"""Smoke runs of the pass and scikit-learn benchmarks at tiny sizes (figures are not checked)."""

from __future__ import annotations

import json

import pytest

from workflows import bench_pass, bench_search, bench_sklearn
from workflows._common import bench_args

_args = bench_args


def test_bench_pass_measures_both_variants_against_the_bound(tmp_path):
    args = _args(bench_pass, n_rows=2e4, m0=[48], dtype=["float32", "float64"], chunk_rows=5000, repeats=1,
                 tile_rows=2500, out=str(tmp_path), workdir=str(tmp_path / "work"))
    res = bench_pass.run(args)
    assert len(res["runs"]) == 4  # 2 dtypes x (in memory, zarr)
    assert res["tile_rows"] == 2500
    for run in res["runs"]:
        assert run["median_s"] > 0 and run["bound_s"] > 0
        assert run["ratio_to_bound"] == pytest.approx(run["bound_s"] / run["median_s"])
    saved = json.loads((tmp_path / "bench-pass.json").read_text())
    assert saved["device"] == "cpu" and saved["n_rows"] == 20000


def test_bench_sklearn_fits_the_same_model_as_scikit_learn(tmp_path):
    args = _args(bench_sklearn, n_rows=4000, m=60, repeats=1, tuned_m=[20, 40], tuned_bandwidths=[1.0, 2.0], n_alphas=3,
                 out=str(tmp_path))
    res = bench_sklearn.run(args)
    med = res["single"]["median"]
    # same frequencies and penalty: test errors agree up to float32 rounding
    assert med["dxrf"]["test_mse"] == pytest.approx(med["sklearn"]["test_mse"], rel=1e-2)
    tuned = res["tuned"]
    # 2 bandwidths x 2 M x 3 alphas: 12 refits against one pass of the search estimator
    assert tuned["sklearn"]["fits"] == 12 and tuned["dxrf"]["passes"] == 1 and tuned["dxrf"]["configurations"] == 12
    assert (tmp_path / "bench-sklearn.md").exists()


def test_bench_search_times_the_pass_and_the_algebra(tmp_path):
    args = _args(bench_search, n_rows=6000, m0=80, m=[10, 20], n_lams=2, n_alphas=3, chunk_rows=1500, repeats=1,
                 out=str(tmp_path), workdir=str(tmp_path / "work"))
    res = bench_search.run(args)
    assert res["configurations"] == 4 * 2 * 2 * 2 * 3  # bandwidths x (sample, top) x lambdas x M x alphas
    assert res["median"]["pass"] > 0 and res["median"]["algebra"] > 0
    assert res["ratio_algebra_to_pass"] == pytest.approx(res["median"]["algebra"] / res["median"]["pass"])
    assert (tmp_path / "bench-search.md").exists()

"""Smoke run of the PCG benchmark at tiny sizes: its tables, and the three grid plans agreeing."""

from __future__ import annotations

import json

import numpy as np

from workflows import bench_pcg
from workflows._common import bench_args


def test_bench_pcg_compares_the_plans_and_the_grid(tmp_path):
    # validation_tol=0: the residual alone, so the CG's hold-out errors are the Gram's to 1e-6
    args = bench_args(bench_pcg, m=[40], repeats=1, n_rows=1500, tol=1e-10, max_iter=300, alphas=[1e-2, 1e-4],
                      validation_tol=0.0, out=str(tmp_path))
    res = bench_pcg.run(args)
    saved = json.loads((tmp_path / "bench-pcg.json").read_text())
    assert set(saved) >= {"plans", "passes", "grid"}
    assert abs(res["plans"]["40"]["mse_ratio"] - 1.0) < 1e-6
    grid = res["grid"]["40"]
    ref = grid["gram"]
    for plan in ("pcg", "pcg_each"):
        assert grid[plan]["alpha"] == ref["alpha"]
        np.testing.assert_allclose(grid[plan]["validation"], ref["validation"], rtol=1e-6)
    # every penalty shares the passes: no more than one penalty at a time needs
    assert grid["pcg"]["passes"] < grid["pcg_each"]["passes"]
    for key in ("recomputed", "cached"):  # an iteration is its pass and the client's algebra
        timed = res["passes"]["40"][key]
        assert 0 < timed["pass_s"] < timed["iteration_s"] and timed["bound_s"] > 0
    text = (tmp_path / "bench-pcg.md").read_text()
    assert "every penalty in the same passes" in text and "bound / pass" in text and "iteration s" in text


def test_bench_pcg_fits_the_map_in_the_dtype_asked(tmp_path):
    args = bench_args(bench_pcg, m=[40], repeats=1, n_rows=800, tol=1e-8, max_iter=200, parts=["p1"], dtype="float32",
                      out=str(tmp_path))
    res = bench_pcg.run(args)
    plans = res["plans"]["40"]
    assert plans["gram"]["dtype"] == plans["pcg"]["dtype"] == "float32"
    assert "float32 map" in (tmp_path / "bench-pcg.md").read_text()


def test_bench_pcg_grid_can_fit_each_plan_in_its_own_dtype(tmp_path):
    args = bench_args(bench_pcg, m=[40], n_rows=800, tol=1e-8, max_iter=200, parts=["p3"], dtype="float32",
                      gram_dtype="float64", alphas=[1e-3], out=str(tmp_path))
    grid = bench_pcg.run(args)["grid"]["40"]
    assert grid["gram"]["dtype"] == "float64" and grid["pcg"]["dtype"] == "float32"
    assert "float64 for the Gram plan" in (tmp_path / "bench-pcg.md").read_text()

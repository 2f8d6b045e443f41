"""Smoke run of the two-stage ELSS benchmark at a tiny size (the figures are not checked)."""

from __future__ import annotations

import json

import pytest

from workflows import bench_two_stage
from workflows._common import bench_args


def test_bench_two_stage_compares_both_fits_with_the_same_seeds(tmp_path):
    args = bench_args(bench_two_stage, n_rows=6000, n_features=5, m=10, m0=60, n0=2000, chunk_rows=1500,
                      test_rows=500, seeds=[0, 1], out=str(tmp_path))
    res = bench_two_stage.run(args)
    one, two = res["runs"]["one_pass"], res["runs"]["two_stage"]
    assert [r["seed"] for r in one] == [r["seed"] for r in two] == [0, 1]
    assert all(r["passes"] == 1 and r["gram_rows"] == 6000 for r in one)
    # the Gram over a hashed sample of about N0 rows, then the selected features over all rows
    assert all(r["passes"] == 2 and 1500 < r["gram_rows"] < 2500 for r in two)
    assert res["mse_ratio"] == pytest.approx(res["summary"]["two_stage"]["test_mse"] / res["summary"]["one_pass"]["test_mse"])
    saved = json.loads((tmp_path / "bench-two-stage.json").read_text())
    assert saved["n0"] == 2000 and len(saved["mse_ratio_per_seed"]) == 2


def test_bench_two_stage_refuses_a_sample_as_large_as_the_data(tmp_path):
    args = bench_args(bench_two_stage, n_rows=1000, n0=1000, out=str(tmp_path))
    with pytest.raises(ValueError, match="--n0"):
        bench_two_stage.run(args)

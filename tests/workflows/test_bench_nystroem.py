"""Smoke run of the Nyström benchmark at tiny sizes (the figures are not checked, only their shape)."""

from __future__ import annotations

import json

import pytest

from workflows import bench_nystroem
from workflows._common import bench_args


def test_bench_nystroem_compares_with_scikit_learn_and_runs_out_of_core(tmp_path):
    args = bench_args(bench_nystroem, m=[40], repeats=1, n_rows=[4000, 8000], ooc_m=30, chunk_rows=2000,
                      workdir=str(tmp_path / "work"), out=str(tmp_path))
    res = bench_nystroem.run(args)
    saved = json.loads((tmp_path / "bench-nystroem.json").read_text())
    assert set(saved) >= {"in_memory", "out_of_core"}
    text = (tmp_path / "bench-nystroem.md").read_text()
    assert "sklearn / dxrf" in text and "worker peak" in text
    assert res["sigma"] == pytest.approx(bench_nystroem.DEFAULT_SIGMA) and res["whitening"] == "eigh"


def test_bench_nystroem_cholesky_whitening_gives_the_same_model(tmp_path):
    args = bench_args(bench_nystroem, m=[40], repeats=1, skip_memory=True, whitening="cholesky", out=str(tmp_path))
    res = bench_nystroem.run(args)
    assert res["whitening"] == "cholesky"
    assert res["in_memory"]["40"]["mse_ratio"] == pytest.approx(1.0, rel=1e-6)

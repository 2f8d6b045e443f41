"""Smoke run of the object-store benchmark at a tiny size (the timings are not checked)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("flask")  # moto's server mode

from workflows import bench_object_store  # noqa: E402
from workflows._common import bench_args  # noqa: E402


def test_bench_object_store_times_the_same_pass_from_both_sources(tmp_path):
    args = bench_args(bench_object_store, n_rows=8000, n_features=5, m0=20, chunk_rows=2000, repeats=2,
                      workdir=str(tmp_path / "work"), out=str(tmp_path))
    res = bench_object_store.run(args)
    assert [len(res["times_s"][k]) for k in ("local", "s3")] == [2, 2]
    assert res["bitwise_equal"]  # the same chunks, whichever store they come from
    saved = json.loads((tmp_path / "bench-object-store.json").read_text())
    assert saved["ratio_s3_to_local"] == pytest.approx(saved["median_s"]["s3"] / saved["median_s"]["local"])

"""A smoke run of the SGD cache benchmark at a tiny size: both fits, both settings, the same model.

Timings are figures, not tests: what is checked is that each setting ran the cached and the
recomputing fit, that they gave the same model to the bit, and that the ratios follow from
the recorded times.
"""

from __future__ import annotations

import functools
import json

import pytest

from workflows import bench_sgd
from workflows._common import bench_args

_args = functools.partial(bench_args, bench_sgd)


@pytest.mark.parametrize("data", ["mnist", "protein"])
def test_bench_sgd_smoke(tmp_path, data):
    zarr = data == "protein"  # one setting on a real LocalCluster from zarr is enough
    args = _args(data=data, n_rows=3000, m=80, passes=2, batch_size=64, repeats=1, zarr=zarr, chunk_rows=700,
                 memory_limit="1GiB", out=str(tmp_path))
    res = bench_sgd.run(args)
    settings = res["settings"]
    assert set(settings) == ({"NumPy", "dask from zarr, 2 workers"} if zarr else {"NumPy"})
    for r in settings.values():
        assert r["feature_cache"] == ["cached", "recomputed"]
        assert r["bitwise_equal"]
        assert r["n_passes"] >= 3  # the median bandwidth is the map's: 2 SGD passes and the final evaluation
        assert r["ratio"] == pytest.approx(r["cached_s"] / r["recomputed_s"], rel=1e-12)
        assert r["feature_bytes"] == res["n_rows"] * 80 * 4
    saved = json.loads((tmp_path / "bench-sgd.json").read_text())
    assert saved["n_rows"] == res["n_rows"] <= 3000 and saved["m"] == 80
    assert "bitwise equal" in (tmp_path / "bench-sgd.md").read_text()

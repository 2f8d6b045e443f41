"""Smoke run of the large-N PCG benchmark on a small cut of flights-3m: zarr, a real cluster per fit, both plans."""

from __future__ import annotations

import json

import pytest

from workflows import bench_pcg_scale
from workflows._common import bench_args


def test_extrapolates_the_gram_plan_along_its_line():
    assert bench_pcg_scale.extrapolate([100, 200], [12.0, 22.0], 1000) == pytest.approx(102.0)


def test_bench_pcg_scale_runs_both_plans_from_zarr(tmp_path):
    args = bench_args(bench_pcg_scale, m=[40], n_rows=12_000, cg_rows=[0], gram_rows=[3000, 6000], alphas=[1e-2, 1e-3],
                      tol=1e-8, memory_limit="2GiB", workdir=str(tmp_path / "data"), out=str(tmp_path / "out"))
    res = bench_pcg_scale.run(args)
    saved = json.loads((tmp_path / "out" / "bench-pcg-scale.json").read_text())
    assert saved["n_train"] == res["n_train"] > 6000
    r = res["m"]["40"]
    assert [g["n"] for g in r["gram"]] == [3000, 6000] and all(g["solver"] == "gram" for g in r["gram"])
    # the CG on the larger Gram size (shared hold-out) and on all rows
    assert [c["n"] for c in r["pcg"]] == [6000, res["n_train"]] and all(c["solver"] == "pcg" for c in r["pcg"])
    assert all(c["dtype"] == "float32" for c in r["pcg"]) and all(g["dtype"] == "float64" for g in r["gram"])
    # converged CG and the Gram plan: the same hold-out errors (float32 kernel values: to their rounding)
    assert r["validation_ratio"] == pytest.approx(1.0, abs=1e-3)
    assert r["time_ratio"] > 0 and r["gram_seconds_at_largest"] > 0
    for fit in r["gram"] + r["pcg"]:
        assert 0 < fit["worker_peak"] <= 2 * 2**30 and fit["incidents"]["workers_removed"] == 0
    assert "extrapolated" in (tmp_path / "out" / "bench-pcg-scale.md").read_text()


def test_the_extrapolation_never_falls_below_the_larger_fit():
    assert bench_pcg_scale.extrapolate([100, 200], [5.0, 4.0], 1000) == 4.0


def test_a_failed_fit_process_says_why_on_its_first_line():
    """The CLI shows one line of an error: the child's exit status and last stderr line must be on it."""
    from workflows._common import run_python

    code = "import sys\nprint('partial output')\nsys.stderr.write('Traceback ...\\nMemoryError: the factor\\n')\nsys.exit(3)"
    with pytest.raises(RuntimeError) as err:
        run_python(code)
    first = str(err.value).splitlines()[0]
    assert "exit status 3" in first and "MemoryError: the factor" in first
    assert run_python("import json; print('x'); print(json.dumps({'a': 1}))") == {"a": 1}

"""``dxrf bench fig2-grid`` (issue #6 f) at a tiny size: pass counts, agreement of the errors, files.

The benchmark runs the fig2 workflow's grid and a loop of separate estimator
fits on the same data and cluster; here it runs on 2000 rows of protein with
a 10-cell grid, so only its accounting is checked, never its timings.
"""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest
from dxrf.workflows import bench_fig2_grid as bench
from dxrf.workflows._common import bench_args

import dxrf
from dxrf.cli.commands import _workflow_names

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TINY = [
    "--n-rows", "2000", "--chunk-rows", "700", "--m", "10", "20", "--sigma-factors", "1.0",
    "--lams", "1e-3", "--alphas", "1e-4", "1e-2", "--rhos", "1.0",
]


_args = functools.partial(bench_args, bench)


def test_discovered_by_the_command_line():
    assert _workflow_names("bench")["fig2-grid"] == "bench_fig2_grid"


def test_fixed_features_prefix_is_a_smaller_map():
    X = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    big = dxrf.RandomFourierFeatures(40, bandwidth=1.5, random_state=0).fit(X)
    small = bench.FixedFeatures(big.kernel_, n_components=10).fit(X)
    # the first 10 columns, rescaled from a 40-feature map to a 10-feature map
    np.testing.assert_allclose(small.transform(X), big.transform(X)[:, :10] * 2.0, rtol=1e-5, atol=1e-6)
    assert bench.FixedFeatures(big.kernel_).fit(X).kernel_ is big.kernel_
    with pytest.raises(ValueError, match="n_components"):
        bench.FixedFeatures(big.kernel_, n_components=41).fit(X)


def test_tiny_grid_against_naive_loop(tmp_path):
    res = bench.run(_args(TINY + ["--out", str(tmp_path)]))
    saved = json.loads((tmp_path / "bench-fig2-grid.json").read_text())
    assert saved["speedup"] == res["speedup"]
    assert (tmp_path / "bench-fig2-grid.md").read_text().count("Speedup") == 1

    cells = res["grid_options"]["cells"]
    assert cells == 2 * (1 + 2 + 1 + 1) == len(res["cells"])  # M x (RKS, ELSS-1/2 at one lambda, EERF, LKRF)

    # grid: the design's budget, 1 training pass per bandwidth and 1 test pass, also by chunk reads
    g = res["grid"]["passes"]
    assert g["max_train_per_sigma_seed"] <= 2 and g["max_test_per_sigma_seed"] <= 1
    assert (g["train"], g["test"]) == (1, 1)
    assert g["chunk_reads"] == {"train": 1.0, "test": 1.0}

    # naive: every cell makes passes of its own; the estimators' counts match the chunks read
    n = res["naive"]["passes"]
    assert n["test"] == cells and n["train"] >= cells + 1
    assert n["chunk_reads"] == {"train": float(n["train"]), "test": float(n["test"])}
    for c in res["cells"]:
        assert c["passes"]["train"] >= 1 and c["passes"]["test"] == 1
        assert c["passes"]["train"] == (2 if c["method"] == "RKS" else 3)

    # the same models on both sides: errors agree to rounding
    a = res["agreement"]
    assert a["ok"] and a["same_sigma"]
    assert a["max_rel_test"] <= 1e-4 and a["max_rel_figure"] <= 1e-4 and a["max_rel_valid"] <= 1e-4
    for by_m in res["figure"].values():
        for v in by_m.values():
            assert math.isclose(v["grid"], v["naive"], rel_tol=1e-4)
    assert res["speedup"] > 0 and math.isfinite(res["speedup"])


def test_two_bandwidths_read_the_candidates_at_the_chosen_one_only(tmp_path):
    """Regression with several sigmas: the plain features at each, then all M0 candidates at the chosen one."""
    sigmas = ["--sigma-factors", "0.5", "1.0"]
    res = bench.run(_args(TINY[: TINY.index("--sigma-factors")] + sigmas + TINY[TINY.index("--lams"):]
                          + ["--out", str(tmp_path)]))
    g = res["grid"]["passes"]
    assert (g["train"], g["test"]) == (2, 1) and g["max_train_per_sigma_seed"] == 2
    assert g["chunk_reads"] == {"train": 2.0, "test": 1.0}
    a = res["agreement"]
    assert a["ok"] and a["same_sigma"] and a["max_rel_test"] <= 1e-4

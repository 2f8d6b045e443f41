"""A smoke run of the multinomial benchmark (dxrf vs scikit-learn on MNIST features) at a tiny size.

Timings are figures, not tests: what is checked is that both solved the same problem (their
objectives, evaluated on the same explicit features, agree to the benchmark's tolerance) and
that the ratios and verdicts follow from the recorded times.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from workflows import bench_multinomial
from workflows._common import bench_args

_args = functools.partial(bench_args, bench_multinomial)


def test_objective_is_the_softmax_loss():
    rng = np.random.default_rng(0)
    Z, y = rng.normal(size=(20000, 6)), rng.integers(0, 3, 20000)
    coef, b = rng.normal(size=(6, 3)), rng.normal(size=3)
    F = Z @ coef + b
    want = np.mean(np.log(np.exp(F).sum(axis=1)) - F[np.arange(20000), y]) + 0.5 * 0.1 * np.sum(coef**2)
    assert bench_multinomial.softmax_objective(Z, y, coef, b, 0.1) == pytest.approx(want, rel=1e-12)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_bench_multinomial_smoke(tmp_path):
    args = _args(n_rows=1500, m=60, alpha=1e-3, tol=1e-8, repeats=1, solvers=["lbfgs", "newton-cg"], out=str(tmp_path))
    res = bench_multinomial.run(args)
    runs = res["runs"]
    # each dxrf solver with the feature cache and without it, side by side
    assert set(runs) == {f"dxrf {s}, NumPy, features {how}" for s in ("lbfgs", "newton-cg")
                         for how in ("cached", "recomputed")} | {"scikit-learn"}
    objectives = np.array([r["objective"] for r in runs.values()])
    assert np.all(np.isfinite(objectives)) and 0.0 < objectives.min() < np.log(10.0)
    assert res["objectives_within_rtol"] and max(r["rel_gap"] for r in runs.values()) <= args.rtol
    assert res["best_objective"] <= min(objectives.min(), res["reference"]["objective"])
    assert runs["dxrf lbfgs, NumPy, features cached"]["passes"] >= 2 and runs["scikit-learn"]["iterations"] >= 2
    t_sk = runs["scikit-learn"]["median_s"]
    for name, ratio in res["ratios_vs_sklearn"].items():
        assert ratio == pytest.approx(runs[name]["median_s"] / t_sk, rel=1e-12)
        assert res["met"][name] is (ratio <= bench_multinomial.TARGET_RATIO_VS_SKLEARN)
    saved = json.loads((tmp_path / "bench-multinomial.json").read_text())
    assert saved["n_rows"] == 1500 and saved["m"] == 60
    md = (tmp_path / "bench-multinomial.md").read_text()
    assert "### MNIST, N = 1500, M = 60, K = 10" in md and "x scikit-learn (target <= 1.5" in md

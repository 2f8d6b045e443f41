"""Smoke runs of the logistic benchmark (dxrf vs dask-ml vs scikit-learn) at a tiny size.

Timings are not checked (they are figures, not tests); what is checked is that the
three libraries solved the same problem (their objectives, evaluated on the same
explicit features, agree to the benchmark's tolerance), that the time-to-target
calibration picks the loosest sufficient tolerance and the timed rounds use it, and
that the ratios and verdicts in the results follow from the recorded times.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from workflows import bench_logistic
from workflows._common import bench_args

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CONTENDERS = {"dxrf, NumPy", "dxrf, dask", "dask-ml", "scikit-learn"}


_args = functools.partial(bench_args, bench_logistic)


def _check_ratios(ratios: dict, runs: dict) -> None:
    med = {name: r["median_s"] for name, r in runs.items()}
    assert ratios["dxrf_dask_over_dask_ml"] == pytest.approx(med["dxrf, dask"] / med["dask-ml"], rel=1e-12)
    assert ratios["speedup_vs_dask_ml"] == pytest.approx(med["dask-ml"] / med["dxrf, dask"], rel=1e-12)
    assert ratios["dxrf_numpy_over_sklearn"] == pytest.approx(med["dxrf, NumPy"] / med["scikit-learn"], rel=1e-12)


def _check_verdicts(targets: dict, ratios: dict, within: bool) -> None:
    assert targets["objectives_within_rtol"] is within
    assert targets["met_vs_dask_ml"] is (within and ratios["speedup_vs_dask_ml"] >= 5.0)
    assert targets["met_vs_sklearn"] is (within and ratios["dxrf_numpy_over_sklearn"] <= 0.3)


def _check_calibration(target: dict, ladder: list[float], rtol: float) -> None:
    """Each walk is a prefix of the ladder that stops at the first sufficient rung, and the
    timed run used the chosen tolerance and is judged against the reference."""
    reference = target["reference_objective"]
    assert set(target["calibration"]) == set(target["runs"]) == CONTENDERS
    for name, c in target["calibration"].items():
        tried = c["tried"]
        assert c["tol"] in ladder and [s["tol"] for s in tried] == ladder[: len(tried)]
        for s in tried:
            assert s["rel_gap"] == pytest.approx((s["objective"] - reference) / reference, rel=1e-9, abs=1e-15)
        assert all(s["rel_gap"] > rtol for s in tried[:-1])  # it stopped at the first sufficient rung
        if c["reached"]:
            assert tried[-1]["rel_gap"] <= rtol and c["tol"] == tried[-1]["tol"]
            assert c["loosest"] is (len(tried) == 1)
        else:
            assert len(tried) == len(ladder) and c["tol"] == ladder[-1] and not c["loosest"]
        run = target["runs"][name]
        assert run["tol"] == c["tol"] and run["reached_in_calibration"] is c["reached"]
        assert run["rel_gap"] == pytest.approx((run["objective"] - reference) / reference, rel=1e-9, abs=1e-15)
        assert run["rel_gap"] <= rtol or not c["reached"]
        if name in ("dxrf, NumPy", "scikit-learn"):  # deterministic: the timed fit is the calibrated one again
            assert run["objective"] == pytest.approx(tried[-1]["objective"], rel=1e-12)
    assert target["max_rel_gap"] == max(r["rel_gap"] for r in target["runs"].values())
    assert target["all_within_rtol"] is (target["max_rel_gap"] <= rtol)
    assert target["lowest_objective_seen"] <= min(r["objective"] for r in target["runs"].values())
    _check_ratios(target["ratios"], target["runs"])


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


def test_calibration_keeps_the_loosest_sufficient_tolerance():
    ladder = bench_logistic.tolerance_ladder([1e-4, 1e-1, 1e-3, 1e-2, 1e-3])
    assert ladder == [1e-1, 1e-2, 1e-3, 1e-4]
    with pytest.raises(ValueError):
        bench_logistic.tolerance_ladder([1e-3, 0.0])
    reference = 2.0
    fitted = []

    def fit(tol: float) -> tuple[float, dict]:  # relative gap tol^2 / 2
        fitted.append(tol)
        return reference * (1 + tol**2 / 2), {"passes": len(fitted)}

    c = bench_logistic.calibrate(fit, ladder, reference, rtol=1e-6)
    assert fitted == [1e-1, 1e-2, 1e-3]  # never the tighter rung
    assert c["tol"] == 1e-3 and c["reached"] and not c["loosest"]
    assert [s["rel_gap"] for s in c["tried"]] == pytest.approx([5e-3, 5e-5, 5e-7])
    assert [s["passes"] for s in c["tried"]] == [1, 2, 3]
    # never within: the tightest, marked as not reached
    c = bench_logistic.calibrate(lambda tol: (reference * 1.001, {}), ladder, reference, rtol=1e-6)
    assert c["tol"] == 1e-4 and not c["reached"] and len(c["tried"]) == 4
    # below the reference is at least as good: the first rung
    c = bench_logistic.calibrate(lambda tol: (reference * (1 - 1e-3), {}), ladder, reference, rtol=1e-6)
    assert c["tol"] == 1e-1 and c["reached"] and c["loosest"] and len(c["tried"]) == 1


def test_verdicts_need_the_ratio_and_every_objective_within_rtol():
    runs = {"dxrf, NumPy": 1.0, "scikit-learn": 4.0, "dxrf, dask": 1.0, "dask-ml": 6.0}
    ratios = bench_logistic.time_ratios({k: {"median_s": v} for k, v in runs.items()})
    assert ratios == pytest.approx({"dxrf_dask_over_dask_ml": 1 / 6, "dxrf_numpy_over_sklearn": 0.25, "speedup_vs_dask_ml": 6.0})
    met = bench_logistic.judge(ratios, True, "target")
    assert met["met_vs_dask_ml"] and met["met_vs_sklearn"] and met["protocol"] == "target"
    off = bench_logistic.judge(ratios, False, "target")
    assert not off["met_vs_dask_ml"] and not off["met_vs_sklearn"]
    slow = bench_logistic.judge({**ratios, "speedup_vs_dask_ml": 4.9, "dxrf_numpy_over_sklearn": 0.31}, True, "same-tol")
    assert not slow["met_vs_dask_ml"] and not slow["met_vs_sklearn"]


def test_bench_logistic_both_protocols(tmp_path):
    ladder = [1e-2, 1e-5]
    args = _args(n_rows=3000, m=50, alpha=1e-3, repeats=1, chunk_rows=1500, ladder=ladder[::-1], out=str(tmp_path))
    res = bench_logistic.run(args)
    # same tolerance: the same minimum, reached by every solver to the stated tolerance
    runs = res["runs"]
    assert set(runs) == CONTENDERS
    objectives = np.array([r["objective"] for r in runs.values()])
    assert np.all(np.isfinite(objectives)) and 0.0 < objectives.min() < np.log(2.0)
    assert res["objectives_agree"] and res["max_rel_gap"] <= args.rtol
    assert np.ptp(objectives) / objectives.min() <= args.rtol
    # dxrf on NumPy and on dask make the same passes to the same model
    assert runs["dxrf, NumPy"]["passes"] == runs["dxrf, dask"]["passes"] >= 2
    assert runs["dxrf, NumPy"]["converged"] and runs["scikit-learn"]["converged"]
    assert runs["dxrf, NumPy"]["objective"] == pytest.approx(runs["dxrf, dask"]["objective"], rel=1e-12)
    assert runs["dask-ml"]["evaluations"] >= 2 and runs["scikit-learn"]["iterations"] >= 2
    _check_ratios(res["ratios_same_tol"], runs)

    # time to target: the reference is the best same-tolerance fit
    target = res["target_protocol"]
    assert target["reference_objective"] == objectives.min()
    assert res["ladder"] == ladder  # walked loose to tight whatever the order given
    _check_calibration(target, ladder, args.rtol)
    # scikit-learn's L-BFGS at a gradient tolerance of 1e-2 is far from the optimum: the walk goes on
    assert len(target["calibration"]["scikit-learn"]["tried"]) >= 2
    # the targets are judged on time to target
    assert res["targets"]["protocol"] == "target" and res["ratios"] == target["ratios"]
    _check_verdicts(res["targets"], res["ratios"], target["all_within_rtol"])

    saved = json.loads((tmp_path / "bench-logistic.json").read_text())
    assert saved["n_rows"] == 3000 and saved["m"] == 50
    assert set(saved["ratios"]) >= {"dxrf_dask_over_dask_ml", "dxrf_numpy_over_sklearn", "speedup_vs_dask_ml"}
    assert saved["max_rel_gap"] == pytest.approx(res["max_rel_gap"])
    assert saved["target_protocol"]["calibration"]["dask-ml"]["tol"] == target["calibration"]["dask-ml"]["tol"]
    md = (tmp_path / "bench-logistic.md").read_text()
    assert "### Same tolerance (tol=1e-08)" in md and "### Time to the same log-loss (rel. gap <= 1e-06)" in md
    assert "reported only" in md and "Time to target, deciding the targets" in md


def test_bench_logistic_target_protocol_alone(tmp_path):
    # a ladder too loose for L-BFGS: scikit-learn and dask-ml do not reach the target, which is then missed
    ladder = [1e-1, 1e-2]
    args = _args(
        n_rows=2000, m=30, alpha=1e-3, repeats=1, chunk_rows=1000, protocol="target", ladder=ladder, out=str(tmp_path)
    )
    res = bench_logistic.run(args)
    assert res["runs"] == {} and res["max_rel_gap"] is None and res["ratios_same_tol"] is None
    target = res["target_protocol"]
    assert f"tol={bench_logistic.REFERENCE_TOL:g}" in target["reference_source"]
    assert 0.0 < target["reference_objective"] < np.log(2.0)
    _check_calibration(target, ladder, args.rtol)
    for name in ("scikit-learn", "dask-ml"):
        assert not target["calibration"][name]["reached"]
    assert not target["all_within_rtol"]
    assert res["targets"]["protocol"] == "target" and res["ratios"] == target["ratios"]
    assert not res["targets"]["met_vs_dask_ml"] and not res["targets"]["met_vs_sklearn"]
    _check_verdicts(res["targets"], res["ratios"], False)
    md = (tmp_path / "bench-logistic.md").read_text()
    assert "Same tolerance" not in md and "NOT reached" in md and "MISSED" in md


def test_bench_logistic_same_tol_protocol_alone(tmp_path):
    args = _args(n_rows=2000, m=30, alpha=1e-3, repeats=1, chunk_rows=1000, protocol="same-tol", out=str(tmp_path))
    res = bench_logistic.run(args)
    assert res["target_protocol"] is None and set(res["runs"]) == CONTENDERS
    assert res["targets"]["protocol"] == "same-tol" and res["ratios"] == res["ratios_same_tol"]
    _check_ratios(res["ratios"], res["runs"])
    _check_verdicts(res["targets"], res["ratios"], res["max_rel_gap"] <= args.rtol)
    md = (tmp_path / "bench-logistic.md").read_text()
    assert "Same tolerance, deciding the targets" in md and "Time to the same log-loss" not in md

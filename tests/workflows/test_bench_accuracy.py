"""`dxrf bench accuracy`'s gradient-boosting reference: several seeded fits, scored by their median."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dxrf.cli import main
from workflows import bench_accuracy
from workflows._common import bench_args


def test_gradient_boosting_is_scored_by_the_median_of_its_seeded_fits(tmp_path):
    # 12 000 rows of pol: a training split above 10 000 rows, where HistGradientBoosting's default
    # early stopping holds out a random tenth, so its seeds give different models
    args = bench_args(bench_accuracy, sets=["pol"], splits=[0], methods=["hgb"], hgb_seeds=3, n_rows=12000,
                      out=str(tmp_path))
    res = bench_accuracy.run(args)
    got = res["runs"][0]["hgb"]
    assert got["seeds"] == [0, 1, 2] and len(got["scores"]) == 3
    assert len(set(got["scores"])) > 1  # the seeds are used
    assert got["mse"] == float(np.median(got["scores"]))
    assert res["medians"]["pol"]["hgb"] == got["mse"]
    # one seed's score is that seed's own fit, as scikit-learn gives it
    ds = bench_accuracy._load("pol", 0, 12000)
    from sklearn.ensemble import HistGradientBoostingRegressor

    pred = HistGradientBoostingRegressor(random_state=1).fit(ds.X_train, ds.y_train).predict(ds.X_test)
    assert got["scores"][1] == pytest.approx(np.mean((ds.y_test - pred) ** 2) / np.var(ds.y_train), rel=1e-12)
    saved = json.loads((tmp_path / "bench-accuracy.json").read_text())
    assert saved["hgb_seeds"] == 3
    assert "the median of 3 fits" in (tmp_path / "bench-accuracy.md").read_text()


def test_no_seeds_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["bench", "accuracy", "--sets", "pol", "--methods", "hgb", "--hgb-seeds", "0", "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == "dxrf: error: --hgb-seeds must be a positive number of fits, got 0"
    assert not out.exists()

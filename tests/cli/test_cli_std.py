"""`dxrf fit --posterior`, `dxrf predict --std` and `--cv evidence` as real subprocesses against a real scheduler."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import zarr

import dxrf
import dxrf.io
from dxrf.cli.models import _open
from test_cli_models import datasets, run_dxrf, scheduler  # noqa: F401  (fixtures)


@pytest.fixture(scope="module")
def posterior_model(scheduler, datasets, tmp_path_factory):  # noqa: F811
    paths, *_ = datasets
    path = tmp_path_factory.mktemp("std") / "reg.model"
    proc = run_dxrf("fit", paths["reg", "train"], "--bandwidth", "3", "--n-components", "60", "--alpha", "1e-3",
                    "--dtype", "float64", "--scale-y", "--posterior", "--out", str(path), "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return path


@pytest.mark.parametrize("suffix", [".zarr", pytest.param(".csv", marks=pytest.mark.slow)])
def test_predict_std_writes_the_deviation_beside_the_predictions(scheduler, datasets, posterior_model, tmp_path, suffix):  # noqa: F811
    paths, *_ = datasets
    out = tmp_path / f"pred{suffix}"
    proc = run_dxrf("predict", str(posterior_model), paths["reg", "test"], "--std", "--out", str(out),
                    "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "standard deviations" in proc.stdout
    model, meta = dxrf.load(posterior_model, with_metadata=True)
    _, X = _open(paths["reg", "test"], meta)
    mean, std = model.predict(X, return_std=True)
    mean, std = np.asarray(mean), np.asarray(std)
    if suffix == ".zarr":
        group = zarr.open_group(str(out), mode="r")
        got_mean, got_std = group["y_pred"][...], group["y_std"][...]
        assert "y_std" in group.attrs["arrays"]
    else:
        frame = pd.read_csv(out)
        assert list(frame.columns) == ["prediction", "std"]
        got_mean, got_std = frame["prediction"].to_numpy(), frame["std"].to_numpy()
    assert np.allclose(got_mean, mean, rtol=1e-12, atol=1e-12)
    assert np.allclose(got_std, std, rtol=1e-12, atol=0)
    # in y's units (--scale-y): the noise of about 0.05 plus the model's error, well above 0 and below y's spread
    assert 0.03 < np.median(got_std) < 0.5


def test_std_needs_a_posterior_and_a_regressor(scheduler, datasets, tmp_path):  # noqa: F811
    paths, *_ = datasets
    plain = tmp_path / "plain.model"
    proc = run_dxrf("fit", paths["reg", "train"], "--bandwidth", "3", "--n-components", "20", "--out", str(plain),
                    "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "p.zarr"
    proc = run_dxrf("predict", str(plain), paths["reg", "test"], "--std", "--out", str(out), "--scheduler", scheduler)
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr.strip().count("\n") == 0 and "dxrf: error:" in proc.stderr and "--posterior" in proc.stderr
    proc = run_dxrf("fit", paths["clf", "train"], "--bandwidth", "3", "--n-components", "20", "--posterior",
                    "--out", str(tmp_path / "c.model"), "--scheduler", scheduler)
    assert proc.returncode == 2 and "dxrf: error:" in proc.stderr and "--posterior" in proc.stderr


@pytest.mark.slow
def test_fit_searches_by_the_evidence(scheduler, datasets, tmp_path):  # noqa: F811
    paths, *_ = datasets
    path = tmp_path / "ev.model"
    proc = run_dxrf("fit", paths["reg", "train"], "--cv", "evidence", "--bandwidth", "1,3", "--n-components", "40",
                    "--alphas", "1e-6,1e-3,1e-1", "--out", str(path), "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "scored by the log evidence" in proc.stdout and "log marginal likelihood" in proc.stdout
    model = dxrf.load(path)
    assert model.cv == "evidence" and np.isfinite(model.log_evidence_)

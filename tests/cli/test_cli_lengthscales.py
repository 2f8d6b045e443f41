"""The command line shows a fitted bandwidth: a number, or lengthscales compactly."""

from __future__ import annotations

import numpy as np

import dxrf
from dxrf.cli.commands import main


def run_dxrf(capsys, *args: str) -> tuple[int, str]:
    """The command run in this process (no interpreter start): its exit status and output."""
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().out


def test_info_describes_a_model_with_lengthscales(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 26))
    ell = np.linspace(0.8, 9.1, 26)
    model = dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(30, bandwidth=ell, random_state=0), alpha=1e-3)
    model.fit(X, X[:, 0]).save(tmp_path / "m.zarr")
    dxrf.NystroemFeatures(10, bandwidth=2.5, random_state=0).fit(X).save(tmp_path / "f.zarr")
    code, out = run_dxrf(capsys, "info", str(tmp_path / "m.zarr"))
    assert code == 0
    assert "RandomFeatureRidge" in out and "30 features of 26 input columns" in out
    assert "bandwidth: lengthscales [0.8 1.13 1.46 … 8.44 8.77 9.1] (d=26)" in out
    code, out = run_dxrf(capsys, "info", str(tmp_path / "f.zarr"))
    assert code == 0 and "bandwidth: 2.5" in out


def test_fit_prints_the_bandwidth(cluster2, tmp_path, capsys):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 3))
    data = tmp_path / "d.zarr"
    dxrf.io.write_zarr(X, data, y=np.sin(X[:, 0]), chunk_rows=300, columns=["a", "b", "c"])
    code, out = run_dxrf(capsys, "fit", str(data), "--bandwidth", "1.5", "--n-components", "20", "--alphas", "1e-3",
                         "--out", str(tmp_path / "m.zarr"), "--scheduler", cluster2.scheduler_address)
    assert code == 0 and "bandwidth:    1.5" in out

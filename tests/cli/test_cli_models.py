"""`dxrf fit`, `dxrf predict` and `dxrf evaluate` as real subprocesses against a real scheduler."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import zarr

import dxrf
import dxrf.io


def run_dxrf(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dxrf.cli", *args], capture_output=True, text=True, timeout=300, env=dict(os.environ))


@pytest.fixture(scope="module")
def scheduler(cluster2):
    return cluster2.scheduler_address


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4)) * np.array([1.0, 10.0, 0.1, 3.0]) + 5.0
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 0.05 * rng.normal(size=3000)
    labels = np.where(X[:, 0] + 0.1 * X[:, 1] > 6.0, "yes", "no")
    paths = {}
    for name, target in [("reg", y), ("clf", labels)]:
        for part, rows in [("train", slice(0, 2400)), ("test", slice(2400, None))]:
            path = root / f"{name}-{part}.zarr"
            dxrf.io.write_zarr(X[rows], path, y=target[rows], chunk_rows=500, columns=["a", "b", "c", "d"],
                               classes=["no", "yes"] if name == "clf" else None)
            paths[name, part] = str(path)
    return paths, X, y, labels


def test_fit_predict_evaluate_regression(scheduler, datasets, tmp_path):
    paths, X, y, _ = datasets
    model_path = tmp_path / "reg.model"
    proc = run_dxrf(
        "fit", paths["reg", "train"], "--features", "rff", "--kernel", "gaussian", "--bandwidth", "median",
        "--select", "elss", "--n-components", "60", "--model", "ridge", "--alphas", "1e-6,1e-3,1e-1",
        "--standardize", "--scale-y", "--out", str(model_path), "--scheduler", scheduler,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "validation MSE" in proc.stdout and "<- chosen" in proc.stdout and "training MSE" in proc.stdout
    model, meta = dxrf.load(model_path, with_metadata=True)
    assert isinstance(model, dxrf.RandomFeatureRidge) and model.kernel_.n_components == 60
    assert model.n_passes_ == 2  # the statistics pass, plus the median bandwidth's row sample

    pred_path = tmp_path / "pred.zarr"
    proc = run_dxrf("predict", str(model_path), paths["reg", "test"], "--out", str(pred_path), "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pred = zarr.open_group(str(pred_path), mode="r")["y_pred"][...]
    Xt = (X[2400:].astype(np.float32) - meta["x_mean"].astype(np.float32)) / meta["x_std"].astype(np.float32)
    # the model keeps the target scaling of --scale-y and predicts in y's units
    np.testing.assert_allclose(model.y_scale_, [y[:2400].astype(np.float32).min(), y[:2400].astype(np.float32).max()])
    expected = model.predict(Xt)
    np.testing.assert_allclose(pred, expected, rtol=1e-5, atol=1e-5)
    assert np.mean((pred - y[2400:]) ** 2) < 0.5 * np.var(y[2400:])  # it learned something

    proc = run_dxrf("evaluate", str(model_path), paths["reg", "test"], "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r2 = float(proc.stdout.split("R2:")[1].split()[0])
    assert r2 > 0.5


@pytest.mark.parametrize("model", ["ridge", "logistic"])
def test_fit_and_evaluate_classification(scheduler, datasets, tmp_path, model):
    paths, X, _, labels = datasets
    model_path = tmp_path / f"clf-{model}.model"
    proc = run_dxrf(
        "fit", paths["clf", "train"], "--select", "eerf", "--n-components", "40", "--model", model,
        "--standardize", "--out", str(model_path), "--scheduler", scheduler,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = dxrf.load(model_path)
    assert isinstance(loaded, dxrf.RandomFeatureClassifier) and loaded.loss == ("logistic" if model == "logistic" else "squared")
    proc = run_dxrf("evaluate", str(model_path), paths["clf", "test"], "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.split("accuracy:")[1].split()[0]) > 0.85


def test_predict_errors_leave_nothing_behind(scheduler, datasets, tmp_path):
    paths, *_ = datasets
    model_path = tmp_path / "m.model"
    assert run_dxrf("fit", paths["reg", "train"], "--n-components", "20", "--out", str(model_path), "--scheduler", scheduler).returncode == 0
    # data with other columns than the model's
    other = tmp_path / "other.zarr"
    dxrf.io.write_zarr(np.zeros((10, 3)), other, columns=["a", "b", "x"])
    out = tmp_path / "pred.zarr"
    proc = run_dxrf("predict", str(model_path), str(other), "--out", str(out), "--scheduler", scheduler)
    assert proc.returncode == 2 and "columns" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists() and not list(tmp_path.glob("pred.zarr.tmp-*"))
    proc = run_dxrf("fit", paths["reg", "train"], "--model", "logistic", "--out", str(tmp_path / "x"), "--scheduler", scheduler)
    assert proc.returncode == 2 and "classification" in proc.stderr
    proc = run_dxrf("fit", paths["reg", "train"], "--bandwidth", "wide", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "bandwidth" in proc.stderr


def test_fit_searches_a_grid_from_one_pass(scheduler, datasets, tmp_path):
    """`dxrf fit` with grids: a table of configurations, the chosen point, the pass count; predict uses it."""
    paths, X, y, _ = datasets
    model_path = tmp_path / "search.model"
    proc = run_dxrf(
        "fit", paths["reg", "train"], "--bandwidth", "1,2,median", "--n-components", "20,40", "--select", "none,elss-top",
        "--lam", "1e-4,1e-2", "--alphas", "1e-6,1e-3,1e-1", "--cv", "3", "--out", str(model_path), "--scheduler", scheduler,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "54 configurations, 3-fold validation" in out
    assert "passes:       2 over the data" in out  # the search's pass, and the median's sample
    assert "chosen:" in out and "validation:   R^2" in out
    table = [line for line in out.splitlines() if line[:4].strip().isdigit()]
    assert len(table) == 20 and table[0].split()[0] == "1"
    model = dxrf.load(model_path)
    assert type(model).__name__ == "RandomFeatureRidgeCV" and model.n_splits_ == 3
    assert f"alpha={model.best_params_['alpha']}" in out
    pred_path = tmp_path / "pred.zarr"
    proc = run_dxrf("predict", str(model_path), paths["reg", "test"], "--out", str(pred_path), "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr
    # inputs standardised by default, with the training statistics the model keeps
    meta = dxrf.load(model_path, with_metadata=True)[1]
    test = dxrf.io.open_zarr(paths["reg", "test"])
    Xt = (test.X.compute() - meta["x_mean"].astype(np.float32)) / meta["x_std"].astype(np.float32)
    np.testing.assert_allclose(zarr.open_array(str(pred_path / "y_pred"))[...], model.predict(Xt), rtol=1e-5, atol=1e-6)


def test_fit_without_grid_options_runs_the_default_search(scheduler, datasets, tmp_path):
    """No grid option: the growing search on Nystroem features, its stages and why it stopped printed."""
    paths, *_ = datasets
    proc = run_dxrf("fit", paths["clf", "train"], "--out", str(tmp_path / "m"), "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr
    assert "5-fold validation, scored by accuracy" in proc.stdout
    assert "stage 1:      M=" in proc.stdout and "stopped:      " in proc.stdout
    assert "extend the grid" not in proc.stdout
    model = dxrf.load(tmp_path / "m")
    assert type(model).__name__ == "RandomFeatureClassifierCV"
    assert type(model.features_).__name__ == "NystroemFeatures"
    assert model.best_params_["bandwidth"] in ("ard*0.5", "ard*0.7", "ard")  # learned lengthscales, rescaled
    assert model.learned_lengthscales_.shape == (model.n_features_in_,)
    # learned lengthscales set the columns' scales: the inputs are not standardised (the grid fit above is)
    meta = dxrf.load(tmp_path / "m", with_metadata=True)[1]
    assert meta.get("x_mean") is None and meta.get("x_std") is None
    stages = model.growth_["stages"]
    assert model.best_params_["n_components"] in model.n_components_searched_
    # each stage: the landmarks' race, the statistics and the scoring pass; first the lengthscales' sample
    assert model.n_passes_ >= 3 * len(stages) + 1
    proc = run_dxrf("evaluate", str(tmp_path / "m"), paths["clf", "test"], "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout.split("accuracy:")[1].split()[0]) > 0.9
    assert model.best_score_ == model.cv_results_["mean_test_accuracy"].max()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--n-components", "20,0"], "n_components must hold positive integers"),
        (["--n-components", "20,400", "--n-candidates", "100"], "larger than n_candidates=100"),
        (["--select", "none,elss-bottom"], "--select takes a comma-separated list"),
        (["--alphas", "1e-3,-1", "--cv", "3"], "alphas must hold non-negative"),
        (["--bandwidth", "1,median*-2"], "bandwidth must be numbers"),
        (["--bandwidth", "1,-2"], "bandwidths must hold positive numbers"),
        (["--cv", "1"], "cv must be an integer k >= 2"),
        (["--cv", "0.2", "--lam", ""], "expected comma-separated numbers"),
    ],
)
def test_bad_grids_get_one_line_and_exit_2(scheduler, datasets, tmp_path, args, message):
    paths, *_ = datasets
    out = tmp_path / "m"
    proc = run_dxrf("fit", paths["reg", "train"], *args, "--out", str(out), "--scheduler", scheduler)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("dxrf: error:") and message in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.slow
def test_fit_shows_the_nystroem_plan(scheduler, datasets, tmp_path):
    paths, X, y, _ = datasets
    proc = run_dxrf(
        "fit", paths["reg", "train"], "--features", "nystroem", "--n-components", "40", "--bandwidth", "2",
        "--solver", "pcg", "--out", str(tmp_path / "ny.model"), "--scheduler", scheduler,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "plan:         pcg (estimate" in proc.stdout and "CG iterations" in proc.stdout
    model = dxrf.load(tmp_path / "ny.model")  # the plan's attributes are saved with the model
    assert model.solver_ == "pcg" and model.n_iter_ >= 1 and model.pcg_history_.size == model.n_iter_
    # the default (growing, Nystrom) search by conjugate gradient, on its hold-out
    proc = run_dxrf("fit", paths["reg", "train"], "--bandwidth", "1,2", "--max-components", "64", "--cv", "0.2",
                    "--solver", "pcg", "--out", str(tmp_path / "cg.model"), "--scheduler", scheduler)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "plan:         pcg (estimate" in proc.stdout and "s, conjugate gradient)" in proc.stdout
    assert dxrf.load(tmp_path / "cg.model").search_solver_ == "pcg"
    proc = run_dxrf("fit", paths["reg", "train"], "--bandwidth", "1,2", "--max-components", "64", "--cv", "3",
                    "--solver", "pcg", "--out", str(tmp_path / "k"), "--scheduler", scheduler)
    assert proc.returncode == 2 and "validates on a hold-out" in proc.stderr
    proc = run_dxrf("fit", paths["reg", "train"], "--features", "nystroem", "--n-components", "40", "--select", "eerf",
                    "--out", str(tmp_path / "x"), "--scheduler", scheduler)
    assert proc.returncode == 2 and proc.stderr.startswith("dxrf: error:") and "nystroem" in proc.stderr

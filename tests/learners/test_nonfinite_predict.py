"""Non-finite input and lost chunks never become predictions.

Every row-wise path (predict, decision_function, predict_proba, transform,
score) refuses a NaN or infinity with one message, on NumPy and on dask
(where the check runs in each task), and a chunk removed after a group was
opened fails its read instead of reading as fill values.
"""

from __future__ import annotations

import glob
import os

import dask.array as da
import numpy as np
import pytest
from distributed import Client

import dxrf
from dxrf.io.integrity import IntegrityError

RNG = np.random.default_rng(0)
X = RNG.normal(size=(200, 3))
Y = X[:, 0] + 0.1 * X[:, 1]
LABELS = np.where(X[:, 0] > 0, "b", "a")


def _rff() -> dxrf.RandomFourierFeatures:
    return dxrf.RandomFourierFeatures(n_components=16, bandwidth=1.0, random_state=0)


@pytest.fixture(scope="module")
def fitted() -> dict[str, object]:
    return {
        "ridge": dxrf.RandomFeatureRidge(_rff()).fit(X, Y),
        "classifier": dxrf.RandomFeatureClassifier(_rff()).fit(X, LABELS),
        "logistic": dxrf.RandomFeatureClassifier(_rff(), loss="logistic").fit(X, LABELS),
        "features": _rff().fit(X),
        "nystroem": dxrf.NystroemFeatures(n_components=10, bandwidth=1.0, random_state=0).fit(X),
        "pca": dxrf.RandomFeaturePCA(n_components=2, features=_rff()).fit(X),
    }


CALLS = [
    ("ridge", "predict"), ("ridge", "score"), ("classifier", "predict"), ("classifier", "decision_function"),
    ("classifier", "score"), ("logistic", "predict_proba"), ("features", "transform"), ("nystroem", "transform"),
    ("pca", "transform"),
]
# (row, column, value): first row, a middle row of a later chunk, the last row; NaN and both infinities
BAD = [(0, 0, np.nan), (137, 2, np.inf), (199, 1, -np.inf), (60, 1, np.nan)]


def _call(model: object, method: str, A: object) -> object:
    if method == "score":
        return model.score(A, LABELS if hasattr(model, "classes_") else Y)
    out = getattr(model, method)(A)
    return out.compute() if hasattr(out, "compute") else out


@pytest.mark.parametrize("row,col,value", BAD)
@pytest.mark.parametrize("name,method", CALLS)
def test_nonfinite_refused_alike_numpy_and_dask(fitted, name, method, row, col, value):
    A = X.copy()
    A[row, col] = value
    message = rf"X contains NaN or infinity \(first at row {row}\)"
    with pytest.raises(ValueError, match=message):
        _call(fitted[name], method, A)
    for chunks in (50, 37, 200):  # the row is named whatever chunk holds it
        with pytest.raises(ValueError, match=message):
            _call(fitted[name], method, da.from_array(A, chunks=(chunks, 3)))


def test_nonfinite_refused_in_the_worker_task(fitted, client):
    A = X.copy()
    A[123, 0] = np.nan
    lazy = fitted["classifier"].predict(da.from_array(A, chunks=(40, 3)))  # lazy: nothing raised yet
    with pytest.raises(ValueError, match=r"X contains NaN or infinity \(first at row 123\)"):
        lazy.compute()


def test_fit_message_is_the_same(fitted):
    A = X.copy()
    A[17, 1] = np.inf
    for B in (A, da.from_array(A, chunks=(50, 3))):
        with pytest.raises(ValueError, match=r"X contains NaN or infinity \(first at row 17\)"):
            dxrf.RandomFeatureRidge(_rff()).fit(B, Y)
    with pytest.raises(ValueError, match=r"y contains NaN or infinity \(first at row 5\)"):
        dxrf.RandomFeatureRidge(_rff()).fit(X, np.where(np.arange(200) == 5, np.nan, Y))


@pytest.fixture
def group(tmp_path):
    path = tmp_path / "g.zarr"
    dxrf.io.write_zarr(X.astype(np.float32), str(path), y=Y.astype(np.float32), chunk_rows=50)
    return path


@pytest.mark.parametrize("array,chunk", [("X", 1), ("X", 3), ("y", 2)])
def test_chunk_lost_after_open_fails_the_read(fitted, group, client, array, chunk):
    ds = dxrf.io.open_zarr(str(group))
    [path] = glob.glob(str(group / array / "c" / str(chunk) / "**"), recursive=False) or [str(group / array / "c" / str(chunk))]
    os.remove(path) if os.path.isfile(path) else [os.remove(p) for p in glob.glob(path + "/*")]
    target = ds.X if array == "X" else ds.y
    with pytest.raises(IntegrityError, match=rf"array '{array}': chunk 'c/{chunk}.*' .*missing from the store"):
        target.compute()
    if array == "X":
        with pytest.raises(IntegrityError, match="missing from the store"):
            fitted["ridge"].predict(ds.X).compute()
        with pytest.raises(IntegrityError, match="missing from the store"):
            fitted["classifier"].predict(ds.X).compute()


def test_intact_group_predicts(fitted, group):
    ds = dxrf.io.open_zarr(str(group))
    got = fitted["ridge"].predict(ds.X).compute()
    np.testing.assert_allclose(got, fitted["ridge"].predict(X.astype(np.float32)), rtol=1e-6, atol=1e-6)

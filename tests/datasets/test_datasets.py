"""Tests of dxrf.datasets.loaders against the checks in shared/data/MANIFEST.md."""

from __future__ import annotations

import numpy as np
import pytest

from dxrf.datasets import loaders as datasets
from dxrf.io import open_zarr

# rows x (inputs + 1) from the MANIFEST table
UCI_SHAPES = {
    "protein": (45730, 9),
    "kin40k": (40000, 8),
    "elevators": (16599, 18),
    "pol": (15000, 26),
    "bike": (17379, 17),
    "keggdirected": (48827, 20),
    "keggundirected": (63608, 27),
    "pumadyn32nm": (8192, 32),
    "parkinsons": (5875, 20),
    "tamielectric": (45781, 3),
}


@pytest.fixture(scope="module")
def adult():
    return datasets.load("adult")


def test_data_dir_found_from_package_parents(monkeypatch):
    monkeypatch.delenv("DXRF_DATA_DIR", raising=False)
    d = datasets.data_dir()
    assert (d / "MANIFEST.md").is_file() and d.name == "data" and d.parent.name == "shared"


def test_data_dir_honours_env(monkeypatch, tmp_path):
    real = datasets.data_dir()
    monkeypatch.setenv("DXRF_DATA_DIR", str(real))
    assert datasets.data_dir() == real.resolve()
    monkeypatch.setenv("DXRF_DATA_DIR", str(tmp_path))
    assert datasets.data_dir() == tmp_path.resolve()
    with pytest.raises(FileNotFoundError, match="adult.data.gz"):
        datasets.load("adult")
    monkeypatch.setenv("DXRF_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="DXRF_DATA_DIR"):
        datasets.data_dir()


def test_names_and_unknown_name():
    assert datasets.names() == [
        "adult", "epileptic_seizure", "mnist", "nycflights13", "flights_3m", *UCI_SHAPES,
    ]
    with pytest.raises(ValueError, match="unknown data set 'iris'"):
        datasets.load("iris")
    with pytest.raises(TypeError):
        datasets.load("adult", nonsense=1)


def test_adult(adult):
    assert adult.X_train.shape == (32561, 105) and adult.X_test.shape == (16281, 105)
    assert int(adult.y_train.sum()) == 7841
    assert round(100 * adult.y_train.mean(), 2) == 24.08
    assert int(adult.y_test.sum()) == 3846
    assert adult.task == "binary" and adult.classes == [0, 1] and adult.class_names == ["<=50K", ">50K"]
    assert sum("=" not in c for c in adult.feature_names) == 6
    assert "native-country=Holand-Netherlands" in adult.feature_names
    # one level per categorical block, except rows with '?' (all zeros)
    block = [j for j, c in enumerate(adult.feature_names) if c.startswith("workclass=")]
    per_row = adult.X_train[:, block].sum(axis=1)
    assert set(np.unique(per_row)) == {0.0, 1.0}
    assert int((per_row == 0).sum()) == 1836  # workclass '?' rows in adult.data
    # 2399 train / 1221 test rows contain '?'
    assert "2399 train, 1221 test" in adult.description


def test_adult_missing_level_and_n_rows():
    ds = datasets.load("adult", missing_level=True, n_rows=100)
    assert ds.X_train.shape == (100, 108) and ds.X_test.shape == (100, 108)
    assert [c for c in ds.feature_names if c.endswith("=?")] == ["workclass=?", "occupation=?", "native-country=?"]


def test_mnist():
    ds = datasets.load("mnist")
    assert ds.X_train.shape == (60000, 784) and ds.X_test.shape == (10000, 784)
    assert ds.X_train.dtype == np.float32 and 0 <= ds.X_train.min() and ds.X_train.max() == 1
    assert np.bincount(ds.y_train).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert np.bincount(ds.y_test).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert ds.task == "multiclass" and ds.classes == list(range(10))
    raw = datasets.load("mnist", scale=False, n_rows=50)
    assert raw.X_train.shape == (50, 784) and raw.X_train.max() == 255
    np.testing.assert_array_equal(raw.X_train / 255, ds.X_train[:50])


@pytest.mark.parametrize("name", list(UCI_SHAPES))
def test_uci_regression_shapes(name):
    n, d = UCI_SHAPES[name]
    ds = datasets.load(name)
    assert ds.X_train.shape[0] + ds.X_test.shape[0] == n
    assert ds.X_train.shape[1] == ds.X_test.shape[1] == d == len(ds.feature_names)
    assert ds.task == "regression" and ds.y_train.dtype == np.float64
    assert 0.08 < ds.X_test.shape[0] / n < 0.12  # 90/10 splits


def test_protein_splits():
    a, b = datasets.load("protein", split=0), datasets.load("protein", split=9)
    assert a.X_train.shape[0] + a.X_test.shape[0] == 45730 and a.n_features == 9
    assert not np.array_equal(a.y_test, b.y_test)
    with pytest.raises(ValueError, match="split must be an integer in 0..9"):
        datasets.load("protein", split=10)
    small = datasets.load("protein", n_rows=1000)
    assert small.X_train.shape[0] + small.X_test.shape[0] == 1000


def test_nycflights13():
    ds = datasets.load("nycflights13")
    n_train, n_test = len(ds.y_train), len(ds.y_test)
    assert n_train + n_test + 9430 == 336776  # 9430 rows have no arr_delay (and no air_time)
    assert "336776 raw rows" in ds.description and "9430 dropped" in ds.description
    assert ds.X_train.shape[1] == 11 and ds.feature_names[4] == "dep_delay"
    y = np.concatenate([ds.y_train, ds.y_test])
    assert y.mean() == pytest.approx(6.8954, abs=1e-4)
    assert 0.09 < n_test / (n_train + n_test) < 0.11


def test_epileptic_seizure():
    ds = datasets.load("epileptic_seizure")
    assert ds.X_train.shape == (9200, 178) and ds.X_test.shape == (2300, 178)
    assert int(ds.y_train.sum() + ds.y_test.sum()) == 2300
    assert ds.feature_names[0] == "X1" and ds.feature_names[-1] == "X178"
    assert ds.groups_train[0][0] in "SFNOZ" and len(ds.groups_train[0]) == 4
    X = np.concatenate([ds.X_train, ds.X_test])
    assert X.min() == -1885 and X.max() == 2047
    # the same seed gives the same split; by_group keeps recordings on one side
    again = datasets.load("epileptic_seizure")
    np.testing.assert_array_equal(again.X_test, ds.X_test)
    multi = datasets.load("epileptic_seizure", binary=False, by_group=True)
    assert np.bincount(np.concatenate([multi.y_train, multi.y_test])).tolist() == [0] + [2300] * 5
    assert not set(multi.groups_train) & set(multi.groups_test)
    assert multi.task == "multiclass" and multi.classes == [1, 2, 3, 4, 5]


def test_flights_3m_load_and_streaming_to_zarr(tmp_path):
    ds = datasets.load("flights_3m", n_rows=20_000)
    assert len(ds.y_train) + len(ds.y_test) == 20_000 and len(ds.y_test) == 2000
    assert ds.feature_names == ["distance", "hour", "day_of_year"]
    assert 0 <= ds.X_train[:, 1].min() and ds.X_train[:, 1].max() < 24
    assert ds.X_train[:, 2].min() == 1
    for split, (X, y) in {"train": (ds.X_train, ds.y_train), "test": (ds.X_test, ds.y_test)}.items():
        rep = datasets.to_zarr("flights_3m", tmp_path / f"{split}.zarr", split=split, n_rows=20_000,
                               chunk_rows=3000)
        z = open_zarr(rep.path)
        np.testing.assert_array_equal(z.X.compute(), X.astype(np.float32))
        np.testing.assert_array_equal(z.y.compute(), y.astype(np.float32))
        assert z.X.chunks[0][0] == min(3000, len(y)) and z.target == "delay"


def test_to_zarr_matches_load(tmp_path):
    ds = datasets.load("adult")
    rep = datasets.to_zarr("adult", tmp_path / "a.zarr", split="test")
    z = open_zarr(tmp_path / "a.zarr")
    assert rep.n_rows == 16281 and z.columns == ds.feature_names
    np.testing.assert_array_equal(z.X.compute(), ds.X_test.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(z.classes)[z.y.compute()], ds.y_test)
    assert z.attrs["class_names"] == ["<=50K", ">50K"] and z.attrs["dataset"] == "adult"
    assert len(z.attrs["levels"]["native-country"]) == 41

    nyc = datasets.load("nycflights13", n_rows=5000)
    rep = datasets.to_zarr("nycflights13", tmp_path / "n.zarr", n_rows=5000, chunk_rows=1000)
    z = open_zarr(rep.path)
    np.testing.assert_array_equal(z.X.compute(), nyc.X_train.astype(np.float32))
    assert rep.n_rows == len(nyc.y_train) and rep.n_dropped == 4500 - len(nyc.y_train)  # 4500 raw train rows

    uci = datasets.load("kin40k", split=4)
    rep = datasets.to_zarr("kin40k", tmp_path / "k.zarr", split="test", fold=4)
    np.testing.assert_array_equal(open_zarr(rep.path).y.compute(), uci.y_test.astype(np.float32))
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        datasets.to_zarr("kin40k", tmp_path / "x.zarr", split="all")


@pytest.mark.slow
def test_flights_3m_full(tmp_path):
    ds = datasets.load("flights_3m")
    assert len(ds.y_train) + len(ds.y_test) == 3_000_000
    assert np.concatenate([ds.y_train, ds.y_test]).mean() == pytest.approx(6.668, abs=1e-3)
    rep = datasets.to_zarr("flights_3m", tmp_path / "f.zarr", split="test")
    assert rep.n_rows == len(ds.y_test) == 300_000

"""Tests of dxrf.io: ingest every format to real zarr on disk, open it as dask, check values and stats."""

from __future__ import annotations

import gzip
import os
import tracemalloc
import warnings
from pathlib import Path

import dask.array as da
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

from dxrf.datasets import loaders as datasets
from dxrf import io as dio
from dxrf.io import DestinationExistsError, ingest, open_zarr, write_zarr

ADULT_NAMES = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
    "income",
]


def entries(path: Path) -> list[str]:
    """Names in a directory (to check nothing half-written is left behind)."""
    return sorted(p.name for p in path.iterdir())


def mixed_frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """Numeric, categorical (with missing) and a text target, with values exact in float32."""
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], size=n).astype(object)
    colour[rng.random(n) < 0.1] = None
    return pd.DataFrame(
        {
            "a": rng.integers(-50, 50, size=n).astype(np.float64) / 4,  # exact in float32 and in text
            "colour": colour,
            "b": rng.integers(0, 1000, size=n),
            "label": rng.choice(["no", "yes"], size=n),
        }
    )


def expected_mixed(df: pd.DataFrame) -> tuple[np.ndarray, list[str], np.ndarray]:
    levels = ["blue", "green", "red"]
    cols = ["a"] + [f"colour={lv}" for lv in levels] + ["b"]
    X = np.zeros((len(df), 5), dtype=np.float32)
    X[:, 0] = df["a"]
    for k, lv in enumerate(levels):
        X[:, 1 + k] = (df["colour"] == lv).to_numpy()
    X[:, 4] = df["b"]
    y = (df["label"] == "yes").to_numpy().astype(np.int32)
    return X, cols, y


def check_mixed(dest: Path, df: pd.DataFrame, fmt: str) -> None:
    ds = open_zarr(dest)
    X_exp, cols, y_exp = expected_mixed(df)
    X, y = ds.compute()
    assert X.dtype == np.float32 and y.dtype == np.int32
    np.testing.assert_array_equal(X, X_exp)
    np.testing.assert_array_equal(y, y_exp)
    assert ds.columns == cols
    assert ds.target == "label"
    assert ds.classes == ["no", "yes"]
    assert ds.attrs["format"] == fmt
    assert ds.attrs["dxrf_format"] == 2
    assert ds.attrs["n_rows"] == len(df)
    assert ds.attrs["levels"] == {"colour": ["blue", "green", "red"]}
    assert ds.attrs["class_counts"] == [int((y_exp == 0).sum()), int((y_exp == 1).sum())]


# ----------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_csv_round_trip(tmp_path, suffix):
    df = mixed_frame()
    src = tmp_path / f"data{suffix}"
    df.to_csv(src, index=False)
    rep = ingest(src, tmp_path / "out.zarr", target="label", chunk_rows=64)
    check_mixed(tmp_path / "out.zarr", df, "csv")
    assert rep.n_rows == len(df) and rep.n_columns == 5 and rep.n_dropped == 0
    assert rep.classes == ["no", "yes"] and rep.target == "label"
    assert rep.path == str((tmp_path / "out.zarr").absolute())
    assert open_zarr(tmp_path / "out.zarr").attrs["source"] == str(src.absolute())
    assert "300 rows x 5 columns" in str(rep) and "'label'" in str(rep)


def test_parquet_round_trip(tmp_path):
    df = mixed_frame(seed=1)
    src = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), src, row_group_size=70)
    ingest(src, tmp_path / "out.zarr", target="label", chunk_rows=50)
    check_mixed(tmp_path / "out.zarr", df, "parquet")
    assert open_zarr(tmp_path / "out.zarr").X.chunks[0] == (50,) * 6


def test_npy_round_trip_with_target_column(tmp_path):
    rng = np.random.default_rng(2)
    A = rng.normal(size=(257, 4))
    np.save(tmp_path / "a.npy", A)
    rep = ingest(tmp_path / "a.npy", tmp_path / "out.zarr", target=2, chunk_rows=100)
    ds = open_zarr(tmp_path / "out.zarr")
    X, y = ds.compute()
    np.testing.assert_array_equal(X, A[:, [0, 1, 3]].astype(np.float32))
    np.testing.assert_array_equal(y, A[:, 2].astype(np.float32))
    assert ds.columns == ["x0", "x1", "x3"] and ds.target == "x2" and ds.classes is None
    assert ds.task == "regression" and rep.format == "npy"
    # without a target, and with names
    ingest(tmp_path / "a.npy", tmp_path / "nt.zarr", names=["p", "q", "r", "s"])
    ds = open_zarr(tmp_path / "nt.zarr")
    assert ds.y is None and ds.target is None and ds.columns == ["p", "q", "r", "s"]
    np.testing.assert_array_equal(ds.X.compute(), A.astype(np.float32))
    # Fortran order, an integer array (integer target column -> classes) and n_rows
    B = np.asfortranarray(rng.integers(0, 3, size=(300, 3)))
    np.save(tmp_path / "b.npy", B)
    ingest(tmp_path / "b.npy", tmp_path / "b.zarr", target=-1, chunk_rows=64, n_rows=250)
    ds = open_zarr(tmp_path / "b.zarr")
    assert ds.classes == [0, 1, 2] and ds.n_rows == 250
    np.testing.assert_array_equal(ds.X.compute(), B[:250, :2])
    np.testing.assert_array_equal(ds.y.compute(), B[:250, 2])


def test_npz_round_trip_streams_members(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.integers(0, 256, size=(1003, 12)).astype(np.uint8)
    y = rng.integers(0, 10, size=1003).astype(np.uint8)
    np.savez_compressed(tmp_path / "d.npz", X=X, y=y)
    rep = ingest(tmp_path / "d.npz", tmp_path / "out.zarr", chunk_rows=128)
    ds = open_zarr(tmp_path / "out.zarr")
    Xz, yz = ds.compute()
    np.testing.assert_array_equal(Xz, X.astype(np.float32))
    # integer labels in a NumPy file are classes; codes index the sorted classes
    assert ds.classes == sorted(np.unique(y).tolist())
    np.testing.assert_array_equal(np.asarray(ds.classes)[yz], y)
    assert ds.target == "y" and rep.n_rows == 1003 and ds.X.chunks[0][0] == 128
    # other keys, regression forced
    np.savez(tmp_path / "e.npz", X_train=X, y_train=y)
    ingest(tmp_path / "e.npz", tmp_path / "e.zarr", x_key="X_train", y_key="y_train", task="regression")
    ds = open_zarr(tmp_path / "e.zarr")
    assert ds.task == "regression" and ds.y.dtype == np.float32
    np.testing.assert_array_equal(ds.y.compute(), y.astype(np.float32))
    with pytest.raises(ValueError, match="no array 'nope'"):
        ingest(tmp_path / "e.npz", tmp_path / "f.zarr", x_key="nope")
    assert not (tmp_path / "f.zarr").exists()


def write_libsvm(path: Path, X: np.ndarray, y: np.ndarray, zero_based: bool = False) -> None:
    base = 0 if zero_based else 1
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt") as f:
        f.write("# a comment line\n")
        for xi, yi in zip(X, y):
            pairs = " ".join(f"{j + base}:{float(xi[j])!r}" for j in np.flatnonzero(xi))
            f.write(f"{yi:g} {pairs}  # trailing comment\n" if pairs else f"{yi:g}\n")


@pytest.mark.parametrize("zero_based,suffix", [(False, ".svm"), (True, ".libsvm.gz")])
def test_libsvm_round_trip(tmp_path, zero_based, suffix):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(530, 9)).astype(np.float32)
    X[rng.random(X.shape) < 0.6] = 0
    X[:, -1] = 0  # the last feature never appears: n_features from the data is 8
    X[7] = 0  # a line with a label only
    y = rng.choice([-1.0, 1.0], size=530)
    src = tmp_path / f"d{suffix}"
    write_libsvm(src, X, y, zero_based)
    ingest(src, tmp_path / "a.zarr", zero_based=zero_based, chunk_rows=100, task="classification")
    ds = open_zarr(tmp_path / "a.zarr")
    Xz, yz = ds.compute()
    np.testing.assert_array_equal(Xz, X[:, :8])
    assert ds.classes == [-1.0, 1.0]
    np.testing.assert_array_equal(np.asarray(ds.classes)[yz], y)
    # n_features given: the unused last column is kept
    ingest(src, tmp_path / "b.zarr", zero_based=zero_based, n_features=9)
    ds = open_zarr(tmp_path / "b.zarr")
    np.testing.assert_array_equal(ds.X.compute(), X)
    assert ds.task == "regression" and ds.columns == [f"x{j}" for j in range(9)]
    np.testing.assert_array_equal(ds.y.compute(), y.astype(np.float32))


def test_libsvm_errors_name_the_line(tmp_path):
    src = tmp_path / "bad.svm"
    src.write_text("1 1:0.5 2:1\n-1 3:oops\n")
    with pytest.raises(ValueError, match=r"line 2: cannot read '3:oops'"):
        ingest(src, tmp_path / "x.zarr")
    src.write_text("1 1:0.5\n-1 0:2\n")
    with pytest.raises(ValueError, match=r"line 2: feature index 0 .*1-based"):
        ingest(src, tmp_path / "x.zarr")
    with pytest.raises(ValueError, match="exceeds n_features=1"):
        ingest(tmp_path / "bad.svm", tmp_path / "x.zarr", zero_based=True, n_features=1)
    assert entries(tmp_path) == ["bad.svm"]


def test_csv_without_header_tsv_and_options(tmp_path):
    src = tmp_path / "d.tsv"
    src.write_text("# skip me\n1\tx\t2.5\n2\ty\tNA\n3\t?\t4\n")
    ingest(src, tmp_path / "a.zarr", header=False, skiprows=1, na_values=["?"], nan_policy="drop", target=0)
    ds = open_zarr(tmp_path / "a.zarr")
    assert ds.columns == ["x1=x", "x1=y", "x2"] and ds.target == "x0"
    np.testing.assert_array_equal(ds.X.compute(), [[1, 0, 2.5], [0, 0, 4]])
    np.testing.assert_array_equal(ds.y.compute(), [1, 3])
    assert ds.attrs["n_dropped"] == 1


# ----------------------------------------------------------------------------- streaming


def test_streaming_chunks(tmp_path):
    rng = np.random.default_rng(5)
    n, chunk = 20_000, 1000
    df = pd.DataFrame(rng.integers(0, 100, size=(n, 6)), columns=list("abcdef"))
    df["g"] = rng.choice(["u", "v"], size=n)
    df.to_csv(tmp_path / "d.csv", index=False)
    ingest(tmp_path / "d.csv", tmp_path / "s.zarr", target="f", chunk_rows=chunk)
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")
    assert g["X"].chunks == (chunk, 7) and g["X"].shape == (n, 7)
    assert g["y"].chunks == (chunk,)
    ds = open_zarr(tmp_path / "s.zarr")
    assert ds.X.chunks == ((chunk,) * 20, (7,))
    assert ds.y.chunks == ((chunk,) * 20,)
    np.testing.assert_array_equal(ds.X[:, :5].compute(), df[list("abcde")].to_numpy(np.float32))
    # chunk sizes that do not divide the rows: the last chunk is partial
    ingest(tmp_path / "d.csv", tmp_path / "t.zarr", target="f", chunk_rows=3000)
    assert open_zarr(tmp_path / "t.zarr").X.chunks[0] == (3000,) * 6 + (2000,)


def test_ingest_memory_is_bounded(tmp_path):
    """A ~60 MB CSV ingests with a traced peak far below its size (it is never loaded whole)."""
    rng = np.random.default_rng(6)
    block = pd.DataFrame(rng.normal(size=(10_000, 10)).round(6), columns=[f"c{j}" for j in range(10)])
    block["cat"] = rng.choice(["alpha", "beta", "gamma"], size=len(block))
    text = block.to_csv(index=False, header=False)
    src = tmp_path / "big.csv"
    with open(src, "w") as f:
        f.write(",".join(block.columns) + "\n")
        while f.tell() < 60e6:
            f.write(text)
    size = src.stat().st_size
    tracemalloc.start()
    try:
        rep = ingest(src, tmp_path / "big.zarr", target="c0", chunk_rows=5000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size > 55e6
    assert rep.n_rows > 500_000 and rep.n_columns == 12
    print(f"traced peak {peak / 1e6:.1f} MB for {size / 1e6:.0f} MB")
    assert peak < 25e6, f"traced peak {peak / 1e6:.1f} MB for a {size / 1e6:.0f} MB file"


# ----------------------------------------------------------------------------- statistics


def test_stats_match_numpy_from_stored_float32(tmp_path):
    rng = np.random.default_rng(7)
    n = 5003
    X = np.column_stack(
        [
            rng.normal(1e4, 3.0, n),  # large mean, small spread
            rng.exponential(2.0, n),
            np.full(n, 3.25),  # constant column: std stored as 1.0
            rng.normal(size=n) * 1e-3,
        ]
    )
    y = rng.normal(5, 2, n)
    rep = write_zarr(X, tmp_path / "w.zarr", y=y, chunk_rows=512)
    assert rep.n_rows == n
    ds = open_zarr(tmp_path / "w.zarr")
    Xs, ys = (a.astype(np.float64) for a in ds.compute())
    np.testing.assert_array_equal(Xs, X.astype(np.float32))
    np.testing.assert_allclose(ds.x_mean, Xs.mean(axis=0), rtol=1e-10)
    std = Xs.std(axis=0)
    np.testing.assert_allclose(ds.x_std[[0, 1, 3]], std[[0, 1, 3]], rtol=1e-10)
    assert ds.x_std[2] == 1.0 and ds.x_mean[2] == 3.25
    assert ds.attrs["y_min"] == ys.min() and ds.attrs["y_max"] == ys.max()
    assert ds.attrs["y_mean"] == pytest.approx(ys.mean(), rel=1e-10)
    assert ds.attrs["y_std"] == pytest.approx(ys.std(), rel=1e-10)

    # lazily standardised X and y scaled to [-1, 1]
    st_ds = open_zarr(tmp_path / "w.zarr", standardize=True, scale_y=True)
    assert st_ds.standardized and st_ds.y_scaled
    Z = st_ds.X.compute()
    assert Z.dtype == np.float32 and st_ds.X.chunks == ds.X.chunks
    np.testing.assert_allclose(Z, (Xs - ds.x_mean) / ds.x_std, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(Z[:, 2], 0)
    ysc = st_ds.y.compute()
    assert ysc.dtype == np.float32
    assert ysc[np.argmin(ys)] == -1.0 and ysc[np.argmax(ys)] == 1.0
    assert ysc.min() == -1.0 and ysc.max() == 1.0
    np.testing.assert_allclose(ysc, 2 * (ys - ys.min()) / (ys.max() - ys.min()) - 1, atol=1e-6)
    np.testing.assert_allclose(st_ds.unscale_y(st_ds.y).compute(), ys, rtol=1e-5)
    # the training statistics standardise another array (e.g. a test set)
    np.testing.assert_array_equal(ds.standardize(X[:10].astype(np.float32)), Z[:10])


def test_stats_do_not_depend_on_chunking(tmp_path):
    rng = np.random.default_rng(8)
    X = rng.normal(3, 2, size=(2000, 3))
    a = write_zarr(X, tmp_path / "a.zarr", chunk_rows=37)
    b = write_zarr(da.from_array(X, chunks=(333, 2)), tmp_path / "b.zarr", chunk_rows=1000)
    assert a.n_rows == b.n_rows == 2000
    A, B = open_zarr(tmp_path / "a.zarr"), open_zarr(tmp_path / "b.zarr")
    np.testing.assert_allclose(A.x_mean, B.x_mean, rtol=1e-13)
    np.testing.assert_allclose(A.x_std, B.x_std, rtol=1e-13)
    np.testing.assert_array_equal(A.X.compute(), B.X.compute())
    assert A.X.chunks[0][:2] == (37, 37) and B.X.chunks[0] == (1000, 1000)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    cuts=st.lists(st.integers(0, 60), max_size=6),
    seed=st.integers(0, 2**16),
)
def test_chan_merge_equals_two_pass(n, cuts, seed):
    data = np.random.default_rng(seed).normal(10, 3, size=(n, 2)).astype(np.float32)
    m = dio._Moments(2)
    bounds = sorted({0, n, *[c % (n + 1) for c in cuts]})
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        m.update(data[lo:hi])
    ref = data.astype(np.float64)
    assert m.n == n
    np.testing.assert_allclose(m.mean, ref.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(m.std, ref.std(axis=0), rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------- categorical encoding


def test_missing_level_and_level_order(tmp_path):
    src = tmp_path / "c.csv"
    src.write_text("k,n,t\nb,1,0.5\n?,2,1.5\na,3,2.5\nb,4,3.5\n")
    ingest(src, tmp_path / "a.zarr", target="t", na_values=["?"])
    ds = open_zarr(tmp_path / "a.zarr")
    assert ds.columns == ["k=a", "k=b", "n"] and ds.task == "regression"
    np.testing.assert_array_equal(ds.X.compute(), [[0, 1, 1], [0, 0, 2], [1, 0, 3], [0, 1, 4]])
    ingest(src, tmp_path / "b.zarr", target="t", na_values=["?"], missing_level=True)
    ds = open_zarr(tmp_path / "b.zarr")
    assert ds.columns == ["k=a", "k=b", "k=?", "n"]
    np.testing.assert_array_equal(ds.X.compute()[:, :3], [[0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]])
    assert ds.attrs["levels"] == {"k": ["a", "b", "?"]}


def test_column_numeric_in_early_chunks_is_read_as_text(tmp_path):
    # "code" parses as numbers in the first chunks ("01" -> 1) and as text later
    codes = ["01", "2", "01", "2", "01", "2", "A7", "01"]
    pd.DataFrame({"code": codes, "v": np.arange(8.0)}).to_csv(tmp_path / "m.csv", index=False)
    ingest(tmp_path / "m.csv", tmp_path / "m.zarr", chunk_rows=2)
    ds = open_zarr(tmp_path / "m.zarr")
    assert ds.columns == ["code=01", "code=2", "code=A7", "v"]
    X = ds.X.compute()
    np.testing.assert_array_equal(X[:, :3].argmax(axis=1), [0, 1, 0, 1, 0, 1, 2, 0])


def test_forced_categorical_levels_and_unknown(tmp_path):
    src = tmp_path / "f.csv"
    src.write_text("z,w\n10,1\n20,2\n10,3\n")
    ingest(src, tmp_path / "a.zarr", categorical=["z"])
    assert open_zarr(tmp_path / "a.zarr").columns == ["z=10", "z=20", "w"]
    ingest(src, tmp_path / "b.zarr", levels={"z": ["10", "30"]}, handle_unknown="ignore")
    ds = open_zarr(tmp_path / "b.zarr")
    assert ds.columns == ["z=10", "z=30", "w"]
    np.testing.assert_array_equal(ds.X.compute()[:, :2], [[1, 0], [0, 0], [1, 0]])
    with pytest.raises(ValueError, match=r"column 'z': value '20' at row 1 is not one of the 2 known levels"):
        ingest(src, tmp_path / "c.zarr", levels={"z": ["10", "30"]})
    with pytest.raises(ValueError, match="column 'cat' is not numeric"):
        (tmp_path / "g.csv").write_text("cat,w\nx,1\n")
        ingest(tmp_path / "g.csv", tmp_path / "d.zarr", categorical=False)
    with pytest.raises(ValueError, match="more than max_levels=2"):
        (tmp_path / "h.csv").write_text("id,w\na,1\nb,2\nc,3\n")
        ingest(tmp_path / "h.csv", tmp_path / "e.zarr", max_levels=2)
    ingest(tmp_path / "h.csv", tmp_path / "e.zarr", drop_columns=["id"])
    assert open_zarr(tmp_path / "e.zarr").columns == ["w"]
    assert sorted(p for p in entries(tmp_path) if p.endswith(".zarr")) == ["a.zarr", "b.zarr", "e.zarr"]


def test_target_map_transform_and_n_rows(tmp_path):
    src = tmp_path / "t.csv"
    src.write_text("x,lab\n1,pos.\n2,neg.\n3,pos\n4,neg\n5,pos\n")
    rep = ingest(src, tmp_path / "a.zarr", target="lab", target_map=lambda s: s.rstrip("."), n_rows=4)
    assert rep.classes == ["neg", "pos"] and rep.n_rows == 4
    np.testing.assert_array_equal(open_zarr(tmp_path / "a.zarr").y.compute(), [1, 0, 1, 0])
    rep = ingest(src, tmp_path / "b.zarr", target="lab", target_map={"pos.": "pos", "neg.": "neg"},
                 transform=lambda df: df.assign(x2=df["x"] ** 2)[df["x"] != 3], chunk_rows=2)
    ds = open_zarr(tmp_path / "b.zarr")
    assert ds.columns == ["x", "x2"] and rep.n_rows == 4
    np.testing.assert_array_equal(ds.X.compute(), [[1, 1], [2, 4], [4, 16], [5, 25]])
    # fixed classes: a test file is coded like its training file
    rep = ingest(src, tmp_path / "c.zarr", target="lab", levels={"lab": ["pos", "neg"]},
                 target_map=lambda s: s.rstrip("."))
    np.testing.assert_array_equal(open_zarr(tmp_path / "c.zarr").y.compute(), [0, 1, 0, 1, 0])


def test_adult_105_and_108_columns(tmp_path):
    src = datasets.data_dir() / "adult" / "adult.data.gz"
    kw = dict(format="csv", header=False, names=ADULT_NAMES, sep=",", skipinitialspace=True,
              na_values=["?"], target="income")
    rep = ingest(src, tmp_path / "a.zarr", **kw)
    assert (rep.n_rows, rep.n_columns, rep.n_dropped) == (32561, 105, 0)
    assert rep.classes == ["<=50K", ">50K"]
    ds = open_zarr(tmp_path / "a.zarr")
    y = ds.y.compute()
    assert int(y.sum()) == 7841 and ds.attrs["class_counts"] == [24720, 7841]
    assert sum(c.startswith("native-country=") for c in ds.columns) == 41
    assert sum("=" not in c for c in ds.columns) == 6
    rep = ingest(src, tmp_path / "b.zarr", missing_level=True, **kw)
    assert rep.n_columns == 108
    assert [c for c in rep.columns if c.endswith("=?")] == ["workclass=?", "occupation=?", "native-country=?"]
    # the test file, coded with the training levels and classes
    train = open_zarr(tmp_path / "b.zarr")
    rep = ingest(datasets.data_dir() / "adult" / "adult.test.gz", tmp_path / "t.zarr", skiprows=1,
                 missing_level=True, levels={**train.attrs["levels"], "income": train.classes},
                 target_map=lambda s: s.rstrip("."), **kw)
    assert (rep.n_rows, rep.columns) == (16281, train.columns)
    assert open_zarr(tmp_path / "t.zarr").attrs["class_counts"] == [12435, 3846]


# ----------------------------------------------------------------------------- NaN policy and atomicity


def test_nan_policy_error_names_column_and_row(tmp_path):
    src = tmp_path / "n.csv"
    src.write_text("a,b,c\n1,2,3\n4,,6\n7,8,9\n1,inf,2\n")
    with pytest.raises(ValueError, match=r"column 'b' .* at row 1; pass nan_policy='drop'"):
        ingest(src, tmp_path / "out.zarr", chunk_rows=2)
    assert entries(tmp_path) == ["n.csv"]  # neither dest nor a temporary directory
    rep = ingest(src, tmp_path / "out.zarr", nan_policy="drop", target="c", chunk_rows=2)
    assert rep.n_rows == 2 and rep.n_dropped == 2
    ds = open_zarr(tmp_path / "out.zarr")
    assert ds.attrs["n_dropped"] == 2 and ds.attrs["n_rows"] == 2
    np.testing.assert_array_equal(ds.X.compute(), [[1, 2], [7, 8]])
    np.testing.assert_allclose(ds.x_mean, [4, 5])
    # a missing target is subject to the policy too
    (tmp_path / "m.csv").write_text("a,t\n1,x\n2,\n")
    with pytest.raises(ValueError, match=r"target column 't' .* row 1"):
        ingest(tmp_path / "m.csv", tmp_path / "m.zarr", target="t")
    assert ingest(tmp_path / "m.csv", tmp_path / "m.zarr", target="t", nan_policy="drop").n_dropped == 1
    # a regression target beyond float32's range is non-finite once stored: the policy, no warning
    (tmp_path / "o.csv").write_text("a,t\n1,2.5\n2,1e300\n3,0.5\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"target .*'t'"):
            ingest(tmp_path / "o.csv", tmp_path / "o.zarr", target="t")
        assert ingest(tmp_path / "o.csv", tmp_path / "o.zarr", target="t", nan_policy="drop").n_dropped == 1


def test_nan_policy_for_arrays_and_float32_overflow(tmp_path):
    X = np.arange(12.0).reshape(4, 3)
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"column 'x1' has a non-finite value \(nan\) at row 2"):
        write_zarr(X, tmp_path / "w.zarr")
    rep = write_zarr(X, tmp_path / "w.zarr", nan_policy="drop")
    assert rep.n_dropped == 1 and rep.n_rows == 3
    X[2, 1] = 1e300  # finite in float64, inf in float32
    with pytest.raises(ValueError, match="column 'x1'"):
        write_zarr(X, tmp_path / "v.zarr")
    with pytest.raises(ValueError, match="no rows to write"):
        write_zarr(np.full((3, 2), np.nan), tmp_path / "u.zarr", nan_policy="drop")
    assert entries(tmp_path) == ["w.zarr"]


def test_overwrite(tmp_path):
    dest = tmp_path / "o.zarr"
    write_zarr(np.ones((5, 2)), dest)
    with pytest.raises(DestinationExistsError, match="exists; pass overwrite=True"):
        write_zarr(np.zeros((3, 2)), dest)
    with pytest.raises(ValueError):  # also a ValueError
        write_zarr(np.zeros((3, 2)), dest)
    rep = write_zarr(np.zeros((3, 4)), dest, overwrite=True)
    assert rep.n_rows == 3 and open_zarr(dest).X.shape == (3, 4)
    assert entries(tmp_path) == ["o.zarr"]  # no .tmp-/.old- leftovers
    # a failed overwrite keeps the old group intact
    with pytest.raises(ValueError):
        write_zarr(np.array([[np.nan]]), dest, overwrite=True)
    assert open_zarr(dest).X.shape == (3, 4) and entries(tmp_path) == ["o.zarr"]
    # never delete a directory that is not a dxrf group
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="refusing to overwrite"):
        write_zarr(np.ones((2, 2)), other, overwrite=True)
    assert (other / "notes.txt").read_text() == "keep me"


# ----------------------------------------------------------------------------- write_zarr and open_zarr


def test_write_zarr_dask_streams_blocks_and_labels(tmp_path):
    rng = np.random.default_rng(9)
    X = rng.normal(size=(1001, 5)).astype(np.float32)
    labels = rng.choice(np.array(["cat", "dog", "emu"]), size=1001)
    Xd = da.from_array(X, chunks=(150, 5))
    yd = da.from_array(labels, chunks=400)  # not aligned with X: rechunked
    rep = write_zarr(Xd, tmp_path / "d.zarr", y=yd, columns=list("abcde"), chunk_rows=256,
                     attrs={"description": "synthetic"})
    assert rep.classes == ["cat", "dog", "emu"] and rep.columns == list("abcde")
    ds = open_zarr(tmp_path / "d.zarr")
    Xz, yz = ds.compute()
    np.testing.assert_array_equal(Xz, X)
    np.testing.assert_array_equal(np.asarray(ds.classes)[yz], labels)
    assert ds.X.chunks[0] == (256, 256, 256, 233) and ds.attrs["description"] == "synthetic"
    assert ds.attrs["format"] == "array" and ds.target == "y"
    # classes given in a chosen order: codes follow it
    write_zarr(X, tmp_path / "e.zarr", y=labels, classes=["emu", "dog", "cat"], target="animal")
    ds = open_zarr(tmp_path / "e.zarr")
    assert ds.classes == ["emu", "dog", "cat"] and ds.target == "animal"
    np.testing.assert_array_equal(np.asarray(ds.classes)[ds.y.compute()], labels)
    with pytest.raises(ValueError, match="not one of the classes"):
        write_zarr(X, tmp_path / "f.zarr", y=labels, classes=["dog", "cat"])
    with pytest.raises(ValueError, match="may not set"):
        write_zarr(X, tmp_path / "f.zarr", attrs={"n_rows": 3})
    with pytest.raises(ValueError, match="y must have shape"):
        write_zarr(X, tmp_path / "f.zarr", y=labels[:10])
    assert not (tmp_path / "f.zarr").exists()


def test_open_zarr_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        open_zarr(tmp_path / "missing.zarr")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no zarr.json"):
        open_zarr(tmp_path / "empty")
    g = zarr.open_group(str(tmp_path / "plain.zarr"), mode="w")
    g.create_array("X", data=np.ones((2, 2)))
    with pytest.raises(ValueError, match="not a dxrf group.*dxrf_format"):
        open_zarr(tmp_path / "plain.zarr")
    g = zarr.open_group(str(tmp_path / "nox.zarr"), mode="w")
    g.attrs["dxrf_format"] = 1
    with pytest.raises(ValueError, match=r"nox.zarr.*dxrf_format 1; this version reads 2.*ingest it again"):
        open_zarr(tmp_path / "nox.zarr")
    g.attrs.update(dxrf_format=2, arrays={})
    with pytest.raises(ValueError, match=r"nox.zarr.*array 'X' is missing"):
        open_zarr(tmp_path / "nox.zarr")
    write_zarr(np.ones((4, 2)), tmp_path / "noy.zarr")
    with pytest.raises(ValueError, match="has no target"):
        open_zarr(tmp_path / "noy.zarr", scale_y=True)
    write_zarr(np.ones((4, 2)), tmp_path / "cls.zarr", y=np.array([0, 1, 0, 1]))
    with pytest.raises(ValueError, match="numeric .*regression"):
        open_zarr(tmp_path / "cls.zarr", scale_y=True)


def test_bad_arguments(tmp_path):
    src = tmp_path / "d.csv"
    src.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="does not exist"):
        ingest(tmp_path / "nope.csv", tmp_path / "x.zarr")
    with pytest.raises(ValueError, match="cannot infer the format"):
        (tmp_path / "d.dat").write_text("1,2\n")
        ingest(tmp_path / "d.dat", tmp_path / "x.zarr")
    with pytest.raises(ValueError, match="chunk_rows"):
        ingest(src, tmp_path / "x.zarr", chunk_rows=0)
    with pytest.raises(ValueError, match="nan_policy must be one of"):
        ingest(src, tmp_path / "x.zarr", nan_policy="ignore")
    with pytest.raises(ValueError, match="target column 'zz' is not in the source"):
        ingest(src, tmp_path / "x.zarr", target="zz")
    with pytest.raises(ValueError, match="drop_columns names columns that are not in the source"):
        ingest(src, tmp_path / "x.zarr", drop_columns=["q"])
    with pytest.raises(ValueError, match="parent directory"):
        ingest(src, tmp_path / "no" / "x.zarr")
    with pytest.raises(ValueError, match="only apply to CSV and Parquet"):
        np.save(tmp_path / "a.npy", np.ones((2, 2)))
        ingest(tmp_path / "a.npy", tmp_path / "x.zarr", sep=";")
    with pytest.raises(TypeError, match="must hold numbers"):
        write_zarr(np.array([["a", "b"]]), tmp_path / "x.zarr")
    (tmp_path / "h.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="no data rows"):
        ingest(tmp_path / "h.csv", tmp_path / "x.zarr")
    assert not (tmp_path / "x.zarr").exists()
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_progress_callback(tmp_path):
    seen = []
    src = tmp_path / "p.csv"
    pd.DataFrame({"a": np.arange(50.0), "b": ["x", "y"] * 25}).to_csv(src, index=False)
    ingest(src, tmp_path / "p.zarr", chunk_rows=20, progress=lambda stage, rows: seen.append((stage, rows)))
    assert ("scanning", 50) in seen and ("writing", 50) in seen


@pytest.mark.parametrize("at", [0, 1, 16, 17, 4000, 4999])
def test_first_text_value_is_found_wherever_it_is(at):
    """The scan remembers a column's first value that is not a number, and its row (growing windows)."""
    import pandas as pd

    from dxrf.io.table_scan import _note_first_text, _Scan

    vals = [str(i) for i in range(5000)]
    vals[at] = "n.a."
    if at + 3 < 5000:
        vals[at + 3] = "later"
    s = pd.Series(vals, index=pd.RangeIndex(100, 5100), dtype=object)
    s.iloc[at // 2] = None  # missing values are skipped, not counted as text
    scan = _Scan(columns=["f"], target=None)
    _note_first_text(scan, "f", s)
    if at // 2 == at:  # the text itself was replaced by a missing value
        assert scan.first_text["f"][0] == "later"
    else:
        assert scan.first_text["f"] == ("n.a.", 100 + at)
    numbers = _Scan(columns=["f"], target=None)
    _note_first_text(numbers, "f", pd.Series([str(i) for i in range(300)]))
    assert "f" not in numbers.first_text

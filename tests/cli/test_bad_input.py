"""Bad input gets a clear error that names the problem, and leaves nothing half-written.

One table of cases across the Python API and the command line:

- Python: a ValueError or TypeError (as documented for each case) whose
  message names the problem.
- Command line (``python -m dxrf.cli ...`` as a subprocess): exit status 2
  and exactly one line on stderr, ``dxrf: error: ...``, without a traceback.
- Neither leaves a destination behind: no ``DEST`` and no ``DEST.tmp-*``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import dxrf
import dxrf.io

rng = np.random.default_rng(0)
X = rng.normal(size=(50, 4))
y = np.sin(X[:, 0])
X_nan = X.copy()
X_nan[3, 1] = np.nan
y_inf = y.copy()
y_inf[7] = np.inf


def rff(m=10, **kw):
    return dxrf.RandomFourierFeatures(m, bandwidth=kw.pop("bandwidth", 1.0), random_state=0, **kw)


def dask_(a, rows=10):
    return da.from_array(a, chunks=(rows,) + a.shape[1:])


# -- the files the cases work on -------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory, cluster2):
    root = tmp_path_factory.mktemp("bad")
    f = {"root": root}
    # tables
    (root / "nan.csv").write_text("a,b,y\n1,2,3\n4,,6\n7,8,9\n")
    (root / "all-nan.csv").write_text("a,b,y\n1,,3\n4,,6\n")
    (root / "empty.csv").write_text("")
    (root / "train.csv").write_text("colour,x,y\nred,1,0.5\nblue,2,1.5\nred,3,0.1\n")
    (root / "test.csv").write_text("colour,x,y\nred,1,0.5\ngreen,2,1.5\n")
    np.save(root / "objects.npy", np.array([[1, "a"], [2, "b"]], dtype=object), allow_pickle=True)
    np.save(root / "complex.npy", np.ones((4, 3), dtype=complex))
    # sources that ingest used to mangle silently, and truncated ones
    (root / "dup.csv").write_text("a,b,a,y\n1,2,3,4\n5,6,7,8\n")
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table([pa.array([1.0, 2.0]), pa.array([3.0, 4.0]), pa.array([5.0, 6.0])], names=["a", "y", "a"]),
                   root / "dup.parquet")
    nested = {
        "list": pa.array([[1, 2], [3]]),
        "struct": pa.array([{"u": 1}, {"u": 2}]),
        "map": pa.array([[("k", 1)], [("k", 2)]], type=pa.map_(pa.string(), pa.int64())),
        "binary": pa.array([b"\x00", b"\x01"]),
    }
    for name, arr in nested.items():
        pq.write_table(pa.table({"a": [1.0, 2.0], "c": arr, "y": [0.0, 1.0]}), root / f"{name}.parquet")
    (root / "repeated.svm").write_text("1 1:0.5 2:1\n0 3:1 1:2 3:4\n")
    values = [f"{0.001 * i:.3f}" for i in range(3000)]
    values[2500] = "n.a."
    (root / "late-text.csv").write_text("f,y\n" + "".join(f"{v},{i}\n" for i, v in enumerate(values)))
    text = "a,b,y\n" + "".join(f"{i},{2 * i},{0.5 * i}\n" for i in range(5000))
    packed = gzip.compress(text.encode())
    (root / "truncated.csv.gz").write_bytes(packed[: len(packed) // 2])
    np.save(root / "whole.npy", np.ones((200, 4)))
    (root / "truncated.npy").write_bytes((root / "whole.npy").read_bytes()[:1000])
    # zarr data: good, without target, with 3 columns, without X, with corrupt metadata, with a corrupt chunk
    Xd = rng.normal(size=(400, 4))
    yd = np.sin(Xd[:, 0])
    dxrf.io.write_zarr(Xd, root / "train.zarr", y=yd, chunk_rows=100, columns=["a", "b", "c", "d"])
    dxrf.io.write_zarr(Xd, root / "no-y.zarr", chunk_rows=100, columns=["a", "b", "c", "d"])
    dxrf.io.write_zarr(Xd[:, :3], root / "three.zarr", y=yd, chunk_rows=100, columns=["a", "b", "c"])
    shutil.copytree(root / "train.zarr", root / "no-X.zarr")
    shutil.rmtree(root / "no-X.zarr" / "X")
    shutil.copytree(root / "train.zarr", root / "corrupt-meta.zarr")
    (root / "corrupt-meta.zarr" / "X" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "array", "shape": [')
    shutil.copytree(root / "train.zarr", root / "corrupt-chunk.zarr")
    for chunk in sorted((root / "corrupt-chunk.zarr" / "X" / "c").rglob("*")):
        if chunk.is_file():
            chunk.write_bytes(b"this is not a blosc frame")
    # a group whose stored x_std of column 'b' is 0, and one whose target has a single class
    shutil.copytree(root / "train.zarr", root / "zero-std.zarr")
    import zarr

    from dxrf.io.integrity import chunk_checksums

    group = zarr.open_group(str(root / "zero-std.zarr"), mode="r+")
    group["x_std"][1] = 0.0  # as a writer would have stored it: its chunk checksum recorded again
    group.attrs["arrays"] = {**group.attrs["arrays"], "x_std": {**group.attrs["arrays"]["x_std"],
                                                               "crc32c": chunk_checksums(group["x_std"])}}
    dxrf.io.write_zarr(Xd, root / "one-class.zarr", y=np.array(["yes"] * len(Xd)), chunk_rows=100)
    # models: a good one (with the column names `dxrf predict` checks), and one of format version 3 (a future one)
    model = dxrf.RandomFeatureRidge(rff(20)).fit(Xd, yd)
    model.save(root / "model", metadata={"columns": ["a", "b", "c", "d"], "classes": None})
    shutil.copytree(root / "model", root / "model-v2")
    meta_path = root / "model-v2" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["attributes"]["dxrf_model_format"] = 3
    meta_path.write_text(json.dumps(meta))
    f["model"] = model
    f["scheduler"] = cluster2.scheduler_address
    return f


def p(files, name: str) -> Path:
    return files["root"] / name


def fitted_ridge(files):
    return files["model"]


# -- the table -------------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    id: str
    match: str
    run: Callable | None = None  # Python: run(files) must raise `error`
    error: type[Exception] = ValueError
    cli: list[str] | None = None  # command line: arguments ({name} = a file of the fixture, {dest} = the output)
    dest: str | None = None  # a destination that must not exist afterwards


def _ingest(src, dest, **kw):
    return lambda f: dxrf.io.ingest(p(f, src), p(f, dest), **kw)


CASES = [
    # NaN or infinity in X or y
    Case("accumulate-nan-X", r"X contains NaN or infinity \(first at row 3\)",
         lambda f: dxrf.accumulate(X_nan, features=rff().fit(X))),
    Case("accumulate-dask-inf-y", r"y contains NaN or infinity \(first at row 7\)",
         lambda f: dxrf.accumulate(dask_(X), dask_(y_inf), features=rff().fit(X))),
    Case("fit-nan-X", r"X contains NaN or infinity \(first at row \d+\)", lambda f: dxrf.RandomFeatureRidge(rff()).fit(X_nan, y)),
    Case("fit-dask-nan-X-median-bandwidth", r"X contains NaN or infinity",
         lambda f: dxrf.RandomFeatureRidge(rff(bandwidth="median")).fit(dask_(X_nan), dask_(y))),
    Case("fit-classifier-nan-y", r"y contains NaN",
         lambda f: dxrf.RandomFeatureClassifier(rff()).fit(X, np.where(y > 0, 1.0, np.nan))),
    Case("ingest-nan-default-policy", r"column 'b' has a missing or non-finite value at row 1; pass nan_policy='drop'",
         _ingest("nan.csv", "out.zarr", target="y"), dest="out.zarr"),
    Case("ingest-drop-reports-count", r"no rows to write \(2 rows dropped by nan_policy='drop'\)",
         _ingest("all-nan.csv", "out.zarr", target="y", nan_policy="drop"), dest="out.zarr"),
    Case("cli-ingest-nan", r"column 'b' has a missing or non-finite value at row 1",
         cli=["ingest", "{nan.csv}", "{dest}", "--target", "y"], dest="out.zarr"),
    Case("cli-ingest-drop-reports-count", r"no rows to write \(2 rows dropped by nan_policy='drop'\)",
         cli=["ingest", "{all-nan.csv}", "{dest}", "--target", "y", "--nan-policy", "drop"], dest="out.zarr"),
    # wrong dimensionality, empty data, y of the wrong length
    Case("accumulate-1d-X", r"Expected 2D array", lambda f: dxrf.accumulate(X[:, 0], features=rff())),
    Case("accumulate-dask-1d-X", r"X must be 2-dimensional, got 1 dimension",
         lambda f: dxrf.accumulate(dask_(X[:, 0]), features=rff().fit(X))),
    Case("fit-3d-X", r"dim 3", lambda f: dxrf.RandomFeatureRidge(rff()).fit(X[None], y)),
    Case("accumulate-empty", r"0 sample", lambda f: dxrf.accumulate(np.empty((0, 4)), features=rff())),
    Case("accumulate-dask-empty", r"X is empty \(shape \(0, 4\)\)",
         lambda f: dxrf.accumulate(da.zeros((0, 4)), features=rff().fit(X))),
    Case("fit-empty", r"0 sample", lambda f: dxrf.RandomFeatureRidge(rff()).fit(np.empty((0, 4)), np.empty(0))),
    Case("cli-ingest-empty-file", r"cannot read '.*empty\.csv' as CSV",
         cli=["ingest", "{empty.csv}", "{dest}"], dest="out.zarr"),
    Case("accumulate-y-length", r"y has 40 rows but X has 50", lambda f: dxrf.accumulate(X, y[:40], features=rff())),
    Case("fit-dask-y-length", r"y has 40 rows but X has 50",
         lambda f: dxrf.RandomFeatureRidge(rff()).fit(dask_(X), dask_(y[:40]))),
    Case("fit-y-length", r"inconsistent numbers of samples", lambda f: dxrf.RandomFeatureRidge(rff()).fit(X, y[:40])),
    # non-numeric columns where numbers are needed
    Case("feature-map-strings", r"could not convert string to float",
         lambda f: rff().fit(np.array([["a", "b", "c", "d"]] * 5))),
    Case("accumulate-strings", r"X must hold numbers .*got dtype <U1", error=TypeError,
         run=lambda f: dxrf.accumulate(np.array([["a", "b", "c", "d"]] * 5), features=rff().fit(X))),
    Case("accumulate-dask-strings", r"X must hold numbers, got dtype <U1", error=TypeError,
         run=lambda f: dxrf.accumulate(dask_(np.array([["a", "b", "c", "d"]] * 5)), features=rff().fit(X))),
    Case("regression-string-y", r"could not convert string to float",
         lambda f: dxrf.RandomFeatureRidge(rff()).fit(X, np.array(["a"] * 50))),
    Case("ingest-text-column-without-categorical", r"column 'colour' is not numeric .* categorical=False",
         _ingest("train.csv", "out.zarr", target="y", categorical=False), dest="out.zarr"),
    # parameters
    Case("unknown-kernel", r"kernel must be one of \('gaussian', 'laplacian', 'cauchy'\), got 'rbf'",
         lambda f: rff(kernel="rbf").fit(X)),
    Case("cli-unknown-kernel", r"argument --kernel: invalid choice: 'rbf'",
         cli=["fit", "{train.zarr}", "--kernel", "rbf", "--out", "{dest}"], dest="model.out"),
    Case("bandwidth-zero", r"bandwidth must be a positive finite number, got 0", lambda f: rff(bandwidth=0).fit(X)),
    Case("lengthscales-wrong-length", r"bandwidth has 3 lengthscales but X has 4 columns",
         lambda f: rff(bandwidth=[1.0, 2.0, 3.0]).fit(X)),
    Case("lengthscales-non-positive", r"bandwidth as lengthscales must be positive, got \[0.0\] at columns \[2\]",
         lambda f: dxrf.NystroemFeatures(5, bandwidth=[1.0, 2.0, 0.0, 1.0]).fit(X)),
    Case("lengthscales-for-relu", r"per-column lengthscales is for shift-invariant kernels",
         lambda f: dxrf.RandomReLUFeatures(5, bandwidth=[1.0] * 4).fit(X)),
    Case("cli-bandwidth-negative", r"bandwidth must be a positive finite number, got -1",
         cli=["fit", "{train.zarr}", "--bandwidth", "-1", "--out", "{dest}"], dest="model.out"),
    Case("n-components-zero", r"n_components must be a positive integer, got 0", lambda f: rff(0).fit(X)),
    Case("cli-n-components-zero", r"n_components must be a positive integer, got 0",
         cli=["fit", "{train.zarr}", "--bandwidth", "1", "--n-components", "0", "--out", "{dest}"], dest="model.out"),
    Case("cli-n-components-not-a-number", r"argument --n-components: invalid int value: 'ten'",
         cli=["fit", "{train.zarr}", "--n-components", "ten", "--out", "{dest}"], dest="model.out"),
    Case("top-M-above-M0", r"n_components=50 exceeds n_candidates=10",
         lambda f: dxrf.LeverageScoreSampler(50, n_candidates=10, method="top", base=rff()).fit(X)),
    Case("cli-top-M-above-M0", r"n_components=50 exceeds n_candidates=10",
         cli=["fit", "{train.zarr}", "--bandwidth", "1", "--select", "elss", "--method", "top", "--n-components", "50",
              "--n-candidates", "10", "--out", "{dest}"], dest="model.out"),
    Case("lam-zero", r"lam must be positive", lambda f: dxrf.LeverageScoreSampler(5, lam=0.0, base=rff()).fit(X)),
    Case("cli-lam-negative", r"lam must be positive",
         cli=["fit", "{train.zarr}", "--bandwidth", "1", "--select", "elss", "--lam", "-0.1", "--out", "{dest}"],
         dest="model.out"),
    Case("rho-zero", r"rho must be a positive finite number, got 0",
         lambda f: dxrf.KernelAlignmentSelector(5, rho=0, base=rff()).fit(X, y)),
    Case("cli-rho-zero", r"rho must be a positive finite number",
         cli=["fit", "{train.zarr}", "--bandwidth", "1", "--select", "lkrf", "--rho", "0", "--out", "{dest}"],
         dest="model.out"),
    Case("N0-above-N", r"n_samples=51 exceeds the number of rows of X \(N=50\)",
         lambda f: dxrf.LeverageScoreSampler(5, n_samples=51, base=rff()).fit(X)),
    Case("split-out-of-range", r"split must be a fraction in \(0, 1\)",
         lambda f: dxrf.accumulate(X, features=rff(), split=1.5)),
    Case("unfitted-transform", r"not fitted yet", lambda f: rff().transform(X), error=NotFittedError),
    Case("unfitted-selector-transform", r"not fitted yet",
         lambda f: dxrf.LeverageScoreSampler(5).transform(X), error=NotFittedError),
    # zarr data: missing or corrupt arrays, unsupported dtypes
    Case("open-zarr-missing-X", r"array 'X' is missing, but its writer recorded it",
         lambda f: dxrf.io.open_zarr(p(f, "no-X.zarr"))),
    Case("cli-info-missing-X", r"array 'X' is missing", cli=["info", "{no-X.zarr}"]),
    Case("open-zarr-corrupt-metadata", r"corrupt array metadata", lambda f: dxrf.io.open_zarr(p(f, "corrupt-meta.zarr"))),
    Case("cli-info-corrupt-metadata", r"corrupt-meta\.zarr' has corrupt array metadata", cli=["info", "{corrupt-meta.zarr}"]),
    Case("cli-fit-corrupt-chunk", r"array 'X': chunk 'c/\d+/0' .* is not the chunk its writer stored there: its checksum",
         cli=["fit", "{corrupt-chunk.zarr}", "--bandwidth", "1", "--n-components", "5", "--out", "{dest}"],
         dest="model.out"),
    Case("accumulate-complex-X", r"X must hold numbers .*got dtype complex128", error=TypeError,
         run=lambda f: dxrf.accumulate(X.astype(complex), features=rff().fit(X))),
    Case("accumulate-object-X", r"X must hold numbers .*got dtype object", error=TypeError,
         run=lambda f: dxrf.accumulate(X.astype(object), features=rff().fit(X))),
    Case("fit-complex-X", r"Complex data not supported", lambda f: dxrf.RandomFeatureRidge(rff()).fit(X.astype(complex), y)),
    Case("write-zarr-complex", r"X must hold numbers \(bool, integer or float\), got dtype complex128", error=TypeError,
         run=lambda f: dxrf.io.write_zarr(X.astype(complex), p(f, "out.zarr")), dest="out.zarr"),
    Case("ingest-object-npy", r"holds Python objects \(dtype object\)", _ingest("objects.npy", "out.zarr"),
         error=TypeError, dest="out.zarr"),
    Case("cli-ingest-complex-npy", r"must hold numbers \(bool, integer or float\), got dtype complex128",
         cli=["ingest", "{complex.npy}", "{dest}"], dest="out.zarr"),
    # models: another format version, the wrong number of features, an unseen level
    Case("load-format-version-2", r"has model format version 3; this dxrf reads version 2",
         lambda f: dxrf.load(p(f, "model-v2"))),
    Case("cli-predict-format-version-2", r"has model format version 3; this dxrf reads version 2",
         cli=["predict", "{model-v2}", "{train.zarr}", "--out", "{dest}"], dest="pred.zarr"),
    Case("cli-predict-missing-model", r"is not a dxrf model \(no zarr group there\)",
         cli=["predict", "{no-such.model}", "{train.zarr}", "--out", "{dest}"], dest="pred.zarr"),
    Case("predict-wrong-features", r"X has 3 features, but RandomFeatureRidge is expecting 4",
         lambda f: fitted_ridge(f).predict(X[:, :3])),
    Case("predict-dask-wrong-features", r"X has 3 features, but the model was fitted with 4",
         lambda f: fitted_ridge(f).predict(dask_(X[:, :3]))),
    Case("cli-predict-wrong-features", r"does not have the model's \d+ columns \(1 missing: 'd'\); .*--levels-from",
         cli=["predict", "{model}", "{three.zarr}", "--out", "{dest}"], dest="pred.zarr"),
    Case("cli-fit-without-target", r"has no target array y",
         cli=["fit", "{no-y.zarr}", "--out", "{dest}"], dest="model.out"),
    # messages that used to name the wrong thing
    Case("open-zarr-zero-std", r"zero-std\.zarr': x_std is 0\.0 for column 'b' \(1 column\(s\) in all\); it must be positive",
         lambda f: dxrf.io.open_zarr(p(f, "zero-std.zarr"), standardize=True)),
    Case("cli-fit-zero-std", r"x_std is 0\.0 for column 'b'",
         cli=["fit", "{zero-std.zarr}", "--bandwidth", "1", "--n-components", "5", "--out", "{dest}"], dest="model.out"),
    Case("cli-fit-one-class", r"one-class\.zarr: the target 'y' has only one class, 'yes' \(all 400 rows\)",
         cli=["fit", "{one-class.zarr}", "--bandwidth", "1", "--n-components", "5", "--out", "{dest}"], dest="model.out"),
    Case("classifier-one-class-codes", r"only one class: 0$",
         lambda f: dxrf.RandomFeatureClassifier(rff()).fit(X, np.zeros(len(X), dtype=np.int32))),
    Case("accumulate-sparse", r"X is a SciPy sparse matrix; .*X\.toarray\(\)", error=TypeError,
         run=lambda f: dxrf.accumulate(__import__("scipy.sparse").sparse.csr_matrix(X), features=rff().fit(X))),
    # ingest refuses what it used to mangle silently, naming the column, line or file
    Case("ingest-csv-duplicate-column", r"header of '.*dup\.csv': column name 'a' appears more than once \(columns 0 and 2",
         _ingest("dup.csv", "out.zarr", target="y"), dest="out.zarr"),
    Case("cli-ingest-csv-duplicate-column", r"column name 'a' appears more than once",
         cli=["ingest", "{dup.csv}", "{dest}", "--target", "y"], dest="out.zarr"),
    Case("ingest-names-duplicate", r"names: column name 'b' appears more than once",
         _ingest("dup.csv", "out.zarr", header=False, names=["a", "b", "b", "y"]), dest="out.zarr"),
    Case("ingest-parquet-duplicate-column", r"column name 'a' appears more than once \(columns 0 and 2",
         _ingest("dup.parquet", "out.zarr", target="y"), dest="out.zarr"),
    Case("ingest-parquet-list", r"column 'c' of '.*list\.parquet' has the Parquet type list<",
         _ingest("list.parquet", "out.zarr", target="y"), dest="out.zarr"),
    Case("ingest-parquet-struct", r"column 'c' .* has the Parquet type struct<u: int64>",
         _ingest("struct.parquet", "out.zarr", target="y"), dest="out.zarr"),
    Case("ingest-parquet-map", r"column 'c' .* has the Parquet type map<string, int64",
         _ingest("map.parquet", "out.zarr", target="y"), dest="out.zarr"),
    Case("cli-ingest-parquet-binary", r"column 'c' .* has the Parquet type binary, which cannot be ingested",
         cli=["ingest", "{binary.parquet}", "{dest}", "--target", "y"], dest="out.zarr"),
    Case("ingest-parquet-list-after-transform", r"column 'c' holds ndarray values \(e\.g\. at row 0\)",
         _ingest("list.parquet", "out.zarr", target="y", transform=lambda d: d), dest="out.zarr"),
    Case("ingest-libsvm-repeated-index", r"line 2: feature index 3 appears more than once",
         _ingest("repeated.svm", "out.zarr"), dest="out.zarr"),
    Case("ingest-numbers-then-text", r"column 'f' holds numbers but has the text 'n\.a\.' at row 2500",
         _ingest("late-text.csv", "out.zarr", target="y", chunk_rows=500, max_levels=100), dest="out.zarr"),
    Case("ingest-truncated-gzip", r"cannot read '.*truncated\.csv\.gz' as csv \(truncated or corrupt\?\): EOFError",
         _ingest("truncated.csv.gz", "out.zarr", target="y"), dest="out.zarr"),
    Case("cli-ingest-truncated-npy", r"cannot read '.*truncated\.npy' as a \.npy array .*mmap length",
         cli=["ingest", "{truncated.npy}", "{dest}"], dest="out.zarr"),
    Case("ingest-unseen-level", r"column 'colour': value 'green' at row 1 is not one of the 2 known levels",
         lambda f: dxrf.io.ingest(p(f, "test.csv"), p(f, "test.zarr"), target="y", handle_unknown="error",
                                  levels=dxrf.io.open_zarr(_train_group(f)).attrs["levels"]),
         dest="test.zarr"),
]


def _train_group(f) -> Path:
    """The training table ingested once: its levels encode the test table."""
    path = p(f, "train-table.zarr")
    if not path.exists():
        dxrf.io.ingest(p(f, "train.csv"), path, target="y")
    return path


def _siblings(dest: Path) -> list[str]:
    return sorted(q.name for q in dest.parent.iterdir() if q.name == dest.name or q.name.startswith(dest.name + "."))


def _cli_arg(arg: str, f, dest: Path | None) -> str:
    if arg == "{dest}":
        return str(dest)
    m = re.fullmatch(r"\{(.+)\}", arg)
    return str(p(f, m.group(1))) if m else arg


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_clearly(case, files, tmp_path):
    dest = None
    if case.dest is not None:
        dest = tmp_path / case.dest if case.cli else p(files, case.dest)
        assert not dest.exists()
    if case.cli is None:
        assert issubclass(case.error, (ValueError, TypeError))
        with pytest.raises(case.error, match=case.match):
            case.run(files)
    else:
        args = [_cli_arg(a, files, dest) for a in case.cli]
        if args[0] in ("fit", "predict", "evaluate"):
            args += ["--scheduler", files["scheduler"]]
        env = {k: v for k, v in os.environ.items() if k not in ("DASK_SCHEDULER_ADDRESS", "DXRF_TRACEBACK")}
        proc = subprocess.run([sys.executable, "-m", "dxrf.cli", *args], capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("dxrf: error: "), proc.stderr
        assert re.search(case.match, lines[0]), lines[0]
    if dest is not None:
        assert _siblings(dest) == [], f"left behind: {_siblings(dest)}"


def test_table_covers_the_issue():
    """At least 20 cases, on both surfaces, each with its own id."""
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)) >= 20
    assert sum(c.cli is not None for c in CASES) >= 10 and sum(c.cli is None for c in CASES) >= 10


def test_nan_policy_drop_reports_the_count(files, tmp_path):
    """The other side of the NaN policy: rows are dropped and counted, in Python and on the command line."""
    report = dxrf.io.ingest(p(files, "nan.csv"), tmp_path / "dropped.zarr", target="y", nan_policy="drop")
    assert report.n_dropped == 1 and report.n_rows == 2
    assert dxrf.io.open_zarr(tmp_path / "dropped.zarr").attrs["n_dropped"] == 1
    proc = subprocess.run(
        [sys.executable, "-m", "dxrf.cli", "ingest", str(p(files, "nan.csv")), str(tmp_path / "cli.zarr"), "--target", "y",
         "--nan-policy", "drop"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "1 rows dropped" in proc.stdout

"""Stored arrays are verified: a missing, changed or re-described chunk is an error, never zeros.

Data groups and model files are tampered with on disk, one way per case, and
opened or loaded again; each case asserts the exception type and that the
message names the array (and the chunk where it is one chunk). Tampered model
files must not load: undeclared attributes, a ridge model relabelled as a
classifier, invalid stored parameters, non-finite coefficients and links out
of the group are refused. The memory case runs in a child process under an
address-space limit, so a regression fails instead of exhausting the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr

import dxrf
import dxrf.io
from dxrf.io.integrity import IntegrityError, chunk_checksums
from dxrf.persist.format import ModelFormatError

rng = np.random.default_rng(0)
X = rng.normal(size=(400, 3))
Y = np.sin(X[:, 0])
LABELS = np.where(X[:, 1] > 0, "yes", "no")
REPO = Path(__file__).resolve().parents[2]


def _edit(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def _chunk(group: Path, array: str, index: int) -> Path:
    return next(p for p in (group / array / "c").rglob("*") if p.is_file() and p.relative_to(group / array / "c").parts[0] == str(index))


def _flip_byte(path: Path) -> None:
    b = bytearray(path.read_bytes())
    b[len(b) // 2] ^= 0x01
    path.write_bytes(bytes(b))


def _write_codes(group: Path, values: np.ndarray) -> None:
    """Rewrite y's first chunk through zarr, and its entry in the checksum table: valid checksums around
    invalid class codes."""
    arr = zarr.open_array(str(group / "y"), mode="r+")
    arr[: values.size] = values
    _edit(group / "zarr.json", lambda d: d["attributes"]["arrays"]["y"].update(crc32c=chunk_checksums(arr)))


DATA_CASES = [
    ("x-chunk-deleted", lambda g: _chunk(g, "X", 1).unlink(), r"array 'X'.*chunk 'c/1/0' \(chunk index \(1, 0\)\) is missing"),
    ("y-chunk-deleted", lambda g: _chunk(g, "y", 3).unlink(), r"array 'y'.*chunk 'c/3' .* is missing"),
    ("std-chunk-deleted", lambda g: _chunk(g, "x_std", 0).unlink(), r"array 'x_std'.*chunk 'c/0' .* is missing"),
    ("x-shape-grown", lambda g: _edit(g / "X" / "zarr.json", lambda d: d.update(shape=[500, 3])),
     r"array 'X' has 500 rows but the group records n_rows=400"),
    ("x-and-y-shape-grown", lambda g: (
        _edit(g / "X" / "zarr.json", lambda d: d.update(shape=[500, 3])),
        _edit(g / "y" / "zarr.json", lambda d: d.update(shape=[500])),
        _edit(g / "zarr.json", lambda d: d["attributes"].update(n_rows=500)),
    ), r"array 'X'.*stored shape \[500, 3\] differs from the shape \[400, 3\] its writer recorded"),
    ("x-shape-grown-everywhere", lambda g: (
        _edit(g / "X" / "zarr.json", lambda d: d.update(shape=[500, 3])),
        _edit(g / "y" / "zarr.json", lambda d: d.update(shape=[500])),
        _edit(g / "zarr.json", lambda d: (d["attributes"].update(n_rows=500),
                                          d["attributes"]["arrays"]["X"].update(shape=[500, 3]),
                                          d["attributes"]["arrays"]["y"].update(shape=[500]))),
    ), r"array 'X'.*chunk 'c/4/0' .* is missing"),
    ("x-dtype-int32", lambda g: _edit(g / "X" / "zarr.json", lambda d: d.update(data_type="int32", fill_value=0)),
     r"array 'X' must be 2-d float32, got shape \(400, 3\) and dtype int32"),
    ("x-dtype-int32-bad-fill", lambda g: _edit(g / "X" / "zarr.json", lambda d: d.update(data_type="int32")),
     r"corrupt array metadata: array 'X'"),
    ("mean-dtype-float32", lambda g: _edit(g / "x_mean" / "zarr.json", lambda d: d.update(data_type="float32")),
     r"array 'x_mean'.*stored dtype float32 differs from the dtype float64"),
    ("x-checksum-removed", lambda g: _edit(g / "X" / "zarr.json", lambda d: d.update(codecs=d["codecs"][:-1])),
     r"array 'X'.*no crc32c checksum codec"),
    ("record-removed", lambda g: _edit(g / "zarr.json", lambda d: d["attributes"].pop("arrays")),
     r"attribute 'arrays' .* is missing"),
    ("x-chunks-grown-everywhere", lambda g: (
        _edit(g / "X" / "zarr.json", lambda d: d["chunk_grid"]["configuration"].update(chunk_shape=[10**11, 3])),
        _edit(g / "zarr.json", lambda d: (d["attributes"].update(chunk_rows=10**11),
                                          d["attributes"]["arrays"]["X"].update(chunks=[10**11, 3]))),
    ), r"one chunk of array 'X' \(100000000000, 3\) needs about .* GiB .* smaller chunk_rows"),
    ("x-chunks-changed", lambda g: _edit(g / "X" / "zarr.json", lambda d: d["chunk_grid"]["configuration"].update(chunk_shape=[50, 3])),
     r"array 'X'.*stored chunks \[50, 3\] differs from the chunks \[100, 3\]"),
    ("y-array-removed", lambda g: shutil.rmtree(g / "y"), r"array 'y' is missing, but its writer recorded it"),
]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    root = tmp_path_factory.mktemp("integrity")
    dxrf.io.write_zarr(X, root / "reg.zarr", y=Y, chunk_rows=100)
    dxrf.io.write_zarr(X, root / "cls.zarr", y=LABELS, chunk_rows=100)
    return root


@pytest.mark.parametrize("tamper,match", [pytest.param(t, m, id=i) for i, t, m in DATA_CASES])
def test_tampered_data_is_refused_at_open(stored, tmp_path, tamper, match):
    group = tmp_path / "g.zarr"
    shutil.copytree(stored / "reg.zarr", group)
    dxrf.io.open_zarr(group)  # intact
    tamper(group)
    # metadata zarr itself cannot parse, and a memory refusal, are plain ValueErrors; the rest IntegrityErrors
    plain = "corrupt array metadata" in match or "needs about" in match
    with pytest.raises(ValueError if plain else IntegrityError, match=match):
        dxrf.io.open_zarr(group)


def test_a_corrupt_chunk_names_the_array_and_rows(stored, tmp_path):
    group = tmp_path / "g.zarr"
    shutil.copytree(stored / "reg.zarr", group)
    _flip_byte(_chunk(group, "X", 2))
    ds = dxrf.io.open_zarr(group)  # the bytes are checked when the chunk is read
    with pytest.raises(IntegrityError, match=r"array 'X': cannot read rows 200:300 \(chunk 2\): .*checksum"):
        ds.X.compute(scheduler="sync")


def test_class_codes_outside_the_classes_are_refused(stored, tmp_path):
    group = tmp_path / "c.zarr"
    shutil.copytree(stored / "cls.zarr", group)
    np.testing.assert_array_equal(dxrf.io.open_zarr(group).y.compute(scheduler="sync") >= 0, True)
    _write_codes(group, np.array([0, 1, 7], dtype=np.int32))
    ds = dxrf.io.open_zarr(group)
    with pytest.raises(IntegrityError, match=r"array 'y' chunk 0 holds the class code 7, outside 0\.\.1"):
        ds.y.compute(scheduler="sync")
    with pytest.raises(IntegrityError, match="class code 7"):
        dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(5, bandwidth=1.0, random_state=0)).fit(ds.X, ds.y)


def test_every_chunk_is_stored_even_when_empty(tmp_path):
    """An all-zero chunk is written, so that a missing key always means a lost chunk."""
    Xz = np.zeros((300, 2))
    Xz[250:] = 1.0
    dxrf.io.write_zarr(Xz, tmp_path / "z.zarr", y=np.zeros(300), chunk_rows=100)
    assert len([p for p in (tmp_path / "z.zarr" / "X" / "c").rglob("*") if p.is_file()]) == 3
    assert len([p for p in (tmp_path / "z.zarr" / "y" / "c").rglob("*") if p.is_file()]) == 3
    np.testing.assert_array_equal(dxrf.io.open_zarr(tmp_path / "z.zarr").X.compute(scheduler="sync"), Xz)


def test_cli_fit_on_a_group_with_a_lost_chunk_fails_in_one_line(stored, tmp_path):
    group = tmp_path / "g.zarr"
    shutil.copytree(stored / "reg.zarr", group)
    _chunk(group, "X", 1).unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "dxrf.cli", "info", str(group)], capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dxrf: error: ") and "chunk 'c/1/0'" in lines[0], proc.stderr


# -- model files -----------------------------------------------------------------------------


def _attrs(fn):
    return lambda p: _edit(p / "zarr.json", lambda d: fn(d["attributes"]))


def _fitted_array(p: Path, name: str) -> Path:
    return p / json.loads((p / "zarr.json").read_text())["attributes"]["fitted"][name]["__array__"]


def _set_array(p: Path, name: str, values) -> None:
    """Rewrite a model array through zarr, and its checksum entry: a consistent file with other values."""
    arr = zarr.open_array(str(_fitted_array(p, name)), mode="r+")
    arr[...] = values
    _edit(p / "zarr.json", lambda d: d["attributes"]["fitted"][name].update(crc32c=chunk_checksums(arr)))


def _link_out(p: Path) -> None:
    outside = p.parent / "outside"
    shutil.copytree(_fitted_array(p, "coef_"), outside)
    shutil.rmtree(_fitted_array(p, "coef_"))
    os.symlink(outside, _fitted_array(p, "coef_"))


MODEL_CASES = [
    ("relabelled-as-classifier", _attrs(lambda a: a.update({"class": "RandomFeatureClassifier"})),
     r"cannot rebuild RandomFeatureClassifier: .*unexpected keyword argument"),
    ("fitted-predict", _attrs(lambda a: a["fitted"].update(predict="x")), r"'predict' is not a fitted attribute of RandomFeatureRidge"),
    ("fitted-dunder-dict", _attrs(lambda a: a["fitted"].update(__dict__={"__dict__": {}})), r"'__dict__' is not a fitted attribute"),
    ("fitted-private", _attrs(lambda a: a["fitted"].update(_coef=1)), r"'_coef' is not a fitted attribute"),
    ("fitted-missing", _attrs(lambda a: a["fitted"].pop("alpha_")), r"must have alpha_; the file lacks it"),
    ("alpha-negative", _attrs(lambda a: a["params"].update(alpha=-1)), r"invalid stored parameter of RandomFeatureRidge: alpha"),
    ("alpha-a-string", _attrs(lambda a: a["params"].update(alpha="big")), r"invalid stored parameter of RandomFeatureRidge: alpha"),
    ("alpha-fitted-nan", _attrs(lambda a: a["fitted"].update(alpha_={"__float__": "nan"})), r"alpha_ must be a finite number"),
    ("n-passes-negative", _attrs(lambda a: a["fitted"].update(n_passes_=-3)), r"n_passes_ must be a non-negative integer"),
    ("coef-nan", lambda p: _set_array(p, "coef_", np.full(10, np.nan)), r"coef_ must be finite \(it holds NaN or infinity\)"),
    ("kernel-inf", lambda p: _set_array(p, "coef_", np.full(10, np.inf)), r"coef_ must be finite"),
    ("link-out-of-the-group", _link_out, r"contains the link 'a\d+' -> .*outside'; dxrf model files hold no links"),
    ("feature-map-param-invalid", lambda p: _edit(
        next(q for q in p.rglob("zarr.json") if "RandomFourierFeatures" in q.read_text() and q.parent != p),
        lambda d: d["attributes"]["params"].update(n_components=0),
    ), r"invalid stored parameter of RandomFourierFeatures: n_components"),
]


@pytest.fixture(scope="module")
def ridge_model():
    return dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(10, bandwidth=1.0, random_state=0)).fit(X, Y)


@pytest.mark.parametrize("tamper,match", [pytest.param(t, m, id=i) for i, t, m in MODEL_CASES])
def test_tampered_models_do_not_load(ridge_model, tmp_path, tamper, match):
    path = tmp_path / "m"
    ridge_model.save(path)
    dxrf.load(path)  # intact
    tamper(path)
    with pytest.raises(ModelFormatError, match=match):
        dxrf.load(path)


def test_a_classifier_with_the_wrong_outputs_does_not_load(tmp_path):
    model = dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(10, bandwidth=1.0, random_state=0)).fit(X, LABELS)
    model.save(tmp_path / "c")
    _edit(tmp_path / "c" / "zarr.json", lambda d: d["attributes"]["fitted"]["classes_"].update(
        __values__=["a", "b", "c"], shape=[3]))
    with pytest.raises(ModelFormatError, match=r"1 output\(s\) but 3 classes need 3"):
        dxrf.load(tmp_path / "c")
    _edit(tmp_path / "c" / "zarr.json", lambda d: d["attributes"]["fitted"]["classes_"].update(
        __values__=["a"], shape=[1]))
    with pytest.raises(ModelFormatError, match=r"classes_ must be at least two distinct class labels"):
        dxrf.load(tmp_path / "c")


def test_a_tiny_file_claiming_a_huge_array_is_refused_before_allocating(ridge_model, tmp_path):
    """coef_ re-described as 2.5e8 values (2 GB) in both records: refused by its stored size, under a 1.5 GB limit."""
    path = tmp_path / "m"
    ridge_model.save(path)
    coef = _fitted_array(path, "coef_")
    n = 250_000_000
    grid = {"name": "regular", "configuration": {"chunk_shape": [n]}}
    _edit(coef / "zarr.json", lambda d: d.update(shape=[n], chunk_grid=grid))
    _attrs(lambda a: a["fitted"]["coef_"].update(shape=[n]))(path)
    script = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, resource.RLIM_INFINITY))
        import dxrf
        from dxrf.persist.format import ModelFormatError
        try:
            dxrf.load({str(path)!r})
        except ModelFormatError as exc:
            print("REFUSED", exc)
        except MemoryError:
            print("MEMORYERROR")
    """)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "MALLOC_ARENA_MAX": "2", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert "REFUSED" in proc.stdout, (proc.stdout, proc.stderr[-2000:])
    assert "holds 84 bytes" in proc.stdout and "takes 2000000004" in proc.stdout, proc.stdout


def test_saving_checks_the_declared_attributes(ridge_model, tmp_path):
    from sklearn.base import clone

    model = clone(ridge_model).fit(X, Y)
    model.predict_ = np.ones(2)
    with pytest.raises(TypeError, match="'predict_' is not a fitted attribute of RandomFeatureRidge"):
        model.save(tmp_path / "m")
    assert not (tmp_path / "m").exists()

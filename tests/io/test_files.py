"""Model files: atomic against a killed process, free of pickle, strict when loaded.

- A process killed (SIGKILL) in the middle of saving a model leaves the
  previous model at the path intact and loadable; at most a ``PATH.tmp-*``
  sibling is left, which later saves ignore.
- Saved groups (models, ingested data, predictions) hold JSON metadata and
  numeric chunks only: every ``zarr.json`` is inspected, and loading works
  with pickle disabled.
- ``dxrf.load`` refuses other format versions, mismatched shapes and corrupt
  files with :class:`dxrf.persist.format.ModelFormatError` (a ValueError) naming the
  problem. (The basic version/shape cases are in tests/learners/test_learners.py.)
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

import dxrf
import dxrf.io
from dxrf.io import files as _files
from dxrf.io.integrity import chunk_checksums
from dxrf.core.persistable import registered as _registry
from dxrf.persist.format import ModelFormatError

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

rng0 = np.random.default_rng(0)
X = rng0.normal(size=(400, 4))
Y = np.column_stack([np.sin(X[:, 0]) + X[:, 1], np.cos(X[:, 2])])
LABELS = np.where(X[:, 0] + X[:, 1] > 0, "yes", "no")


def _siblings(path: Path) -> list[str]:
    """Names next to ``path`` that belong to it (the path itself, temporaries, old copies)."""
    return sorted(p.name for p in path.parent.iterdir() if p.name == path.name or p.name.startswith(path.name + "."))


# -- killed in the middle of a save --------------------------------------------------------

_SAVER = textwrap.dedent(
    """
    import sys
    import dxrf

    path, *refs = sys.argv[1:]
    models = [dxrf.load(r) for r in refs]
    print("ready", flush=True)
    i = 0
    while True:
        models[i % len(models)].save(path, overwrite=True)
        print(f"saved {i % len(models)}", flush=True)
        i += 1
    """
)


@pytest.fixture(scope="module")
def big_models(tmp_path_factory):
    """Two different large models (250,000 float64 features of 4 inputs: ~12 MB each), saved as references."""
    d = tmp_path_factory.mktemp("refs")
    Xb = np.random.default_rng(1).normal(size=(20, 4))
    out = []
    for seed in (0, 1):
        model = dxrf.RandomFourierFeatures(250_000, bandwidth=2.0, dtype="float64", random_state=seed).fit(Xb)
        ref = d / f"ref{seed}.model"
        model.save(ref)
        out.append((ref, model))
    return Xb, out


def _which(loaded, refs, Xb) -> int:
    """Index of the reference model ``loaded`` equals exactly (all arrays); fails otherwise."""
    for i, (_, ref) in enumerate(refs):
        if np.array_equal(loaded.kernel_.W, ref.kernel_.W):
            np.testing.assert_array_equal(loaded.kernel_.b, ref.kernel_.b)
            np.testing.assert_array_equal(loaded.kernel_.scale, ref.kernel_.scale)
            np.testing.assert_array_equal(loaded.transform(Xb), ref.transform(Xb))
            return i
    raise AssertionError("the model at the path is neither of the models that were saved there")


def test_killed_while_saving_leaves_the_previous_model(big_models, tmp_path):
    Xb, refs = big_models
    path = tmp_path / "model"
    script = tmp_path / "saver.py"
    script.write_text(_SAVER)
    rnd = random.Random(8)
    leftovers_seen = 0
    for round_ in range(4):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(path), *(str(r) for r, _ in refs)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
            if round_ == 0:
                assert proc.stdout.readline().startswith("saved")  # something to replace from now on
            t0 = time.monotonic()
            assert proc.stdout.readline().startswith("saved")
            one_save = time.monotonic() - t0
            # the loop does nothing but save: any moment is inside some save
            time.sleep(rnd.uniform(0.0, 2.0 * one_save))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL

        # the path holds a complete model: the one replaced, or the one replacing it
        _which(dxrf.load(path), refs, Xb)
        others = [n for n in _siblings(path) if n != path.name]
        assert all(n.startswith(("model.tmp-", "model.old-")) for n in others), others
        leftovers_seen += bool(others)

    assert leftovers_seen >= 1  # kills did land in the middle of writes
    # later saves are not disturbed by the leftovers, and replace the model
    refs[1][1].save(path, overwrite=True)
    assert _which(dxrf.load(path), refs, Xb) == 1
    refs[0][1].save(path, overwrite=True)
    assert _which(dxrf.load(path), refs, Xb) == 0


_CRASHER = textwrap.dedent(
    """
    import os, sys, types
    import dxrf
    from dxrf.io import files as _files

    path, ref, where = sys.argv[1:]
    model = dxrf.load(ref)
    if where == "before-exchange":
        _files._exchange = lambda a, b: os._exit(9)
    else:  # right after the exchange, before the old copy is deleted
        _files.shutil = types.SimpleNamespace(rmtree=lambda *a, **k: os._exit(9))
    model.save(path, overwrite=True)
    """
)


@pytest.mark.parametrize("where,expected", [("before-exchange", 0), ("after-exchange", 1)])
def test_killed_at_the_moment_of_replacement(big_models, tmp_path, where, expected):
    """At the two steps of the replacement itself, the path always holds a whole model."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    if not _files._exchange(a, b):
        pytest.skip("this file system cannot exchange two directories atomically")
    Xb, refs = big_models
    path = tmp_path / "model"
    refs[0][1].save(path)
    script = tmp_path / "crasher.py"
    script.write_text(_CRASHER)
    proc = subprocess.run([sys.executable, str(script), str(path), str(refs[1][0]), where], capture_output=True, timeout=120)
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]
    assert _which(dxrf.load(path), refs, Xb) == expected
    (tmp,) = [p for p in tmp_path.iterdir() if p.name.startswith("model.tmp-")]
    # the other model is complete under the temporary name
    assert _which(dxrf.load(tmp), refs, Xb) == 1 - expected
    refs[1][1].save(path, overwrite=True)
    assert _which(dxrf.load(path), refs, Xb) == 1


# -- no pickle -----------------------------------------------------------------------------

_NUMERIC = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"}
_CODECS = {"bytes", "zstd", "blosc", "gzip", "transpose", "crc32c"}


def _fitted_models() -> dict[str, object]:
    rff = dict(bandwidth=1.5, random_state=0)
    y = Y[:, 0]
    models = {
        "rff-iid": dxrf.RandomFourierFeatures(30, **rff).fit(X),
        "rff-orthogonal": dxrf.RandomFourierFeatures(30, sampling="orthogonal", **rff).fit(X),
        "rff-qmc-laplacian": dxrf.RandomFourierFeatures(30, kernel="laplacian", sampling="qmc", **rff).fit(X),
        "rff-structured": dxrf.RandomFourierFeatures(30, sampling="structured", dtype="float64", **rff).fit(X),
        "relu": dxrf.RandomReLUFeatures(20, random_state=0).fit(X),
        "maxout": dxrf.RandomMaxoutFeatures(20, pieces=3, random_state=0).fit(X),
        "sketch": dxrf.RandomLinearSketch(20, random_state=0).fit(X),
        "elss": dxrf.LeverageScoreSampler(15, random_state=0).fit(X),
        "eerf": dxrf.EnergyScoreSelector(15, random_state=0).fit(X, y),
        "lkrf": dxrf.KernelAlignmentSelector(15, random_state=0).fit(X, LABELS),
        "ridge-path": dxrf.RandomFeatureRidge(dxrf.LeverageScoreSampler(20, random_state=0), alphas=[1e-3, 1e-1]).fit(X, Y),
        "classifier-str": dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(20, random_state=0)).fit(X, LABELS),
        "classifier-logistic": dxrf.RandomFeatureClassifier(
            dxrf.RandomFourierFeatures(20, random_state=0), loss="logistic", max_iter=5
        ).fit(X, LABELS),
    }
    extra = {
        "RandomFeatureSGDRegressor": lambda cls: cls(dxrf.RandomFourierFeatures(20, random_state=0), max_passes=2, random_state=0).fit(X, y),
        "RandomFeatureSGDClassifier": lambda cls: cls(dxrf.RandomFourierFeatures(20, random_state=0), max_passes=2, random_state=0).fit(X, LABELS),
        "RandomFeaturePCA": lambda cls: cls(3, features=dxrf.RandomMaxoutFeatures(20, random_state=0)).fit(X),
    }
    for name, make in extra.items():
        cls = getattr(dxrf, name, None)
        if cls is not None:
            models[name] = make(cls)
    # every estimator class dxrf can save, at least unfitted
    covered = {type(m).__name__ for m in models.values()}
    for name, cls in _registry().items():
        if name not in covered:
            models[f"{name}-unfitted"] = cls()
    return models


def _check_group_has_no_pickle(path: Path) -> int:
    """Inspect every file of a zarr group; return the number of arrays."""
    n_arrays = 0
    for f in path.rglob("*"):
        if f.is_dir():
            continue
        rel = f.relative_to(path)
        assert f.suffix not in (".pkl", ".pickle", ".npy", ".npz"), rel
        if f.name != "zarr.json":
            assert "c" in rel.parts[:-1], f"{rel}: neither metadata nor a chunk"  # chunk keys live under c/
            continue
        text = f.read_text()
        meta = json.loads(text, parse_constant=lambda c: pytest.fail(f"{rel}: non-JSON constant {c}"))
        assert "pickle" not in text.lower() and "__reduce__" not in text, rel
        assert meta["zarr_format"] == 3 and meta["node_type"] in ("group", "array"), rel
        if meta["node_type"] == "array":
            n_arrays += 1
            assert meta["data_type"] in _NUMERIC, f"{rel}: data type {meta['data_type']}"
            names = {c["name"] for c in meta.get("codecs", [])}
            assert names <= _CODECS, f"{rel}: codecs {names}"
            # a float array's fill value may be NaN, which zarr writes as the string "NaN"
            assert isinstance(meta["fill_value"], (int, float, bool)) or meta["fill_value"] == "NaN", rel
    return n_arrays


@pytest.fixture
def no_pickle(monkeypatch):
    """Any attempt to unpickle fails loudly."""

    def refuse(*args, **kwargs):
        raise AssertionError("something tried to unpickle")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)


def test_saved_groups_hold_no_pickle(tmp_path, no_pickle):
    meta = {"x_mean": np.arange(4.0), "columns": ["a", "b", "c", "d"], "nested": {"k": [1, 2.5, None, "s"]}}
    for name, model in _fitted_models().items():
        path = tmp_path / f"{name}.model"
        model.save(path, metadata=meta)
        _check_group_has_no_pickle(path)
        loaded, loaded_meta = dxrf.load(path, with_metadata=True)  # pickle is disabled here
        assert type(loaded) is type(model)
        np.testing.assert_array_equal(loaded_meta["x_mean"], meta["x_mean"])
        assert loaded_meta["nested"] == meta["nested"]
        if hasattr(model, "predict") and hasattr(model, "coef_"):
            np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
        elif hasattr(model, "kernel_"):
            np.testing.assert_array_equal(loaded.transform(X), model.transform(X))

    # data groups: ingested from CSV with categorical columns, and written from arrays
    csv = tmp_path / "t.csv"
    csv.write_text("colour,x,label\nred,1.5,yes\nblue,2.5,no\nred,-1,yes\n")
    dxrf.io.ingest(csv, tmp_path / "csv.zarr", target="label")
    assert _check_group_has_no_pickle(tmp_path / "csv.zarr") >= 4
    dxrf.io.write_zarr(X, tmp_path / "arr.zarr", y=LABELS, chunk_rows=100)
    assert _check_group_has_no_pickle(tmp_path / "arr.zarr") >= 4
    ds = dxrf.io.open_zarr(tmp_path / "arr.zarr")
    assert ds.classes == ["no", "yes"]


def test_a_model_holding_python_objects_is_refused(tmp_path):
    model = dxrf.RandomFourierFeatures(5, random_state=0).fit(X)
    model.offsets_ = object()  # a fitted attribute that is not data
    with pytest.raises(TypeError, match="cannot save attribute offsets_"):
        model.save(tmp_path / "m")
    model = dxrf.RandomFourierFeatures(5, random_state=0).fit(X)
    model.extra_ = np.ones(3)  # data, but not an attribute the class declares
    with pytest.raises(TypeError, match="'extra_' is not a fitted attribute of RandomFourierFeatures"):
        model.save(tmp_path / "m")
    with pytest.raises(TypeError, match="random generator"):
        dxrf.RandomFourierFeatures(5, random_state=np.random.default_rng(0)).fit(X).save(tmp_path / "m")
    assert _siblings(tmp_path / "m") == []  # nothing half-written


# -- load refuses what it cannot trust -------------------------------------------------------


def _meta(path: Path) -> dict:
    return json.loads(path.read_text())


def _edit(path: Path, fn) -> None:
    doc = _meta(path)
    fn(doc)
    path.write_text(json.dumps(doc))


def _root_attrs(fn):
    return lambda p: _edit(p / "zarr.json", lambda d: fn(d["attributes"]))


def _coef_dir(p: Path) -> Path:
    return p / _meta(p / "zarr.json")["attributes"]["fitted"]["coef_"]["__array__"]


def _kernel_dir(p: Path) -> Path:
    return p / _meta(p / "zarr.json")["attributes"]["fitted"]["kernel_"]["__kernel__"]


def _resize_coef(p: Path) -> None:
    """coef_ of 11 values, consistently recorded: the features have 10."""
    a = _coef_dir(p)
    grid = {"name": "regular", "configuration": {"chunk_shape": [11]}}
    _edit(a / "zarr.json", lambda d: d.update(shape=[11], chunk_grid=grid))
    shutil.rmtree(a / "c", ignore_errors=True)
    arr = zarr.open_array(str(a), mode="r+")
    arr[:] = np.ones(11)  # a whole, checksummed chunk of the new shape
    _root_attrs(lambda at: at["fitted"]["coef_"].update(shape=[11], crc32c=chunk_checksums(arr)))(p)


def _garble_chunks(p: Path) -> None:
    for f in (_coef_dir(p) / "c").rglob("*"):
        if f.is_file():
            f.write_bytes(b"definitely not zstd")


def _flip_a_byte(p: Path) -> None:
    for f in (_coef_dir(p) / "c").rglob("*"):
        if f.is_file():
            b = bytearray(f.read_bytes())
            b[3] ^= 0x10
            f.write_bytes(bytes(b))


TAMPERING = [
    ("version-3", _root_attrs(lambda at: at.update(dxrf_model_format=3)), "format version 3"),
    ("version-1", _root_attrs(lambda at: at.update(dxrf_model_format=1)), "format version 1"),
    ("version-string", _root_attrs(lambda at: at.update(dxrf_model_format="2")), "format version '2'"),
    ("version-float", _root_attrs(lambda at: at.update(dxrf_model_format=2.0)), "format version 2.0"),
    ("version-missing", _root_attrs(lambda at: at.pop("dxrf_model_format")), "not a dxrf model"),
    ("root-metadata-corrupt", lambda p: (p / "zarr.json").write_text("{not json"), "not a readable zarr group"),
    ("array-metadata-corrupt", lambda p: (_coef_dir(p) / "zarr.json").write_text("{not json"), "corrupt metadata"),
    ("array-missing", lambda p: shutil.rmtree(_coef_dir(p)), "is missing"),
    ("array-shape", lambda p: _edit(_coef_dir(p) / "zarr.json", lambda d: d.update(shape=[3])), "has shape"),
    ("array-dtype", lambda p: _edit(_coef_dir(p) / "zarr.json", lambda d: d.update(data_type="float32")), "dtype float32"),
    ("array-chunk-truncated", _garble_chunks, r"chunk 'c/0' holds 19 bytes; .* takes 84"),
    ("array-chunk-corrupt", _flip_a_byte, "cannot read .*checksum"),
    ("array-chunk-deleted", lambda p: shutil.rmtree(_coef_dir(p) / "c"), r"chunk 'c/0' .* is missing"),
    ("array-entry-malformed", _root_attrs(lambda at: at["fitted"]["coef_"].pop("shape")), "malformed array entry"),
    ("coef-does-not-fit-kernel", _resize_coef, r"coef_ has shape \(11,\).*10 features"),
    ("kernel-group-missing", lambda p: shutil.rmtree(_kernel_dir(p)), "is missing"),
    (
        "kernel-inputs",
        lambda p: _edit(_kernel_dir(p) / "zarr.json", lambda d: d["attributes"]["kernel"].update(n_features_in=7)),
        "kernel W has 4 rows for 7 inputs",
    ),
    ("unknown-class", _root_attrs(lambda at: at.update({"class": "os.system"})), "unknown estimator class"),
    ("unknown-parameter", _root_attrs(lambda at: at["params"].update(evil=1)), "cannot rebuild"),
    ("unknown-entry", _root_attrs(lambda at: at["fitted"].update(coef_={"__callable__": "os.system"})), "unknown entry"),
]


@pytest.mark.parametrize("tamper,match", [pytest.param(f, m, id=i) for i, f, m in TAMPERING])
def test_load_refuses_tampered_models(tmp_path, tamper, match):
    model = dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(10, random_state=0)).fit(X, Y[:, 0])
    path = tmp_path / "m"
    model.save(path)
    tamper(path)
    with pytest.raises(ModelFormatError, match=match):
        dxrf.load(path)
    # a fresh save over the broken model repairs it (what no longer looks like a
    # dxrf group is not replaced: it must be removed first)
    if not _files.is_dxrf_group(path):
        with pytest.raises(ValueError, match="refusing to overwrite"):
            model.save(path, overwrite=True)
        shutil.rmtree(path)
    model.save(path, overwrite=True)
    np.testing.assert_array_equal(dxrf.load(path).predict(X), model.predict(X))


def test_load_refuses_what_is_not_a_model(tmp_path):
    dxrf.io.write_zarr(X, tmp_path / "data.zarr")
    with pytest.raises(ModelFormatError, match="not a dxrf model"):
        dxrf.load(tmp_path / "data.zarr")
    zarr.open_group(str(tmp_path / "plain.zarr"), mode="w", zarr_format=3)
    with pytest.raises(ModelFormatError, match="not a dxrf model"):
        dxrf.load(tmp_path / "plain.zarr")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModelFormatError, match="no zarr group"):
        dxrf.load(tmp_path / "file")
    assert issubclass(ModelFormatError, ValueError)
    # and a save never replaces something that is not a dxrf group
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="refusing to overwrite"):
        dxrf.RandomFourierFeatures(5, random_state=0).fit(X).save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert os.listdir(tmp_path / "mine") == ["notes.txt"]

"""Hostile groups and model files: bounded before allocation, no links, no pipes, chunks in their places.

Each class of attack is tried in several variants on a small data group and a
small model written by dxrf, then tampered with on disk:

* memory bombs through the chunk grid (shape, chunk shape, dtype, two axes,
  a huge metadata file): refused from the metadata alone, in well under 3 s,
  in a child process whose address space is capped;
* links (a chunk, a directory, a ``zarr.json``; relative and absolute; made
  after opening): refused, and a chunk's stored bytes are never echoed;
* named pipes in place of a ``zarr.json`` or a chunk: refused, never read
  (an alarm turns a hang into a failure);
* chunks out of place (swapped within X, from y into X, from another group
  or another model): refused by the per-chunk checksum table; groups and
  models written before the table still read.

The Python API and the CLI (``info``, ``predict``, ``fit``) give the same
message; the CLI in one ``dxrf: error:`` line with exit status 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import dxrf
import dxrf.io
from dxrf.core.errors import ModelFormatError
from dxrf.io.integrity import MAX_CHUNKS

REPO = Path(__file__).resolve().parents[2]
rng = np.random.default_rng(1)
X = rng.normal(size=(400, 3))
Y = np.sin(X[:, 0])
SECRET = b"SECRET-BYTES-0123456789"


def _edit(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    dxrf.io.write_zarr(X, root / "reg.zarr", y=Y, chunk_rows=100)
    dxrf.io.write_zarr(X[::-1].copy(), root / "other.zarr", y=Y[::-1].copy(), chunk_rows=100)
    fm = dxrf.RandomFourierFeatures(10, bandwidth=1.0, random_state=0)
    dxrf.RandomFeatureRidge(fm).fit(X, Y).save(root / "model")
    dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(10, bandwidth=1.0, random_state=0)).fit(X, -Y).save(root / "model2")
    return root


@pytest.fixture
def group(stored, tmp_path):
    g = tmp_path / "g.zarr"
    shutil.copytree(stored / "reg.zarr", g)
    return g


@pytest.fixture
def model(stored, tmp_path):
    m = tmp_path / "m"
    shutil.copytree(stored / "model", m)
    return m


@contextlib.contextmanager
def _deadline(seconds: float):
    """Fail instead of hanging: SIGALRM interrupts a blocking open() in this thread."""

    def fire(signum, frame):
        raise TimeoutError(f"blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.perf_counter()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.perf_counter() - start < seconds


def _open_and_read(path: Path) -> None:
    ds = dxrf.io.open_zarr(path)
    ds.X.compute(scheduler="sync")
    ds.y.compute(scheduler="sync")


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "dxrf.cli", *args], capture_output=True, text=True, timeout=timeout, env=env)


def _one_error_line(proc: subprocess.CompletedProcess, message: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0] == f"dxrf: error: {message}", proc.stderr[-2000:]


# -- class 1: memory bombs through the chunk grid ----------------------------------------------------------


def _bomb_rows(g: Path, rows: int, chunk: list[int]) -> None:
    """Declare ``rows`` rows in every place that records them (array metadata and the group's record)."""
    _edit(g / "X" / "zarr.json", lambda d: (d.update(shape=[rows, 3]), d["chunk_grid"]["configuration"].update(chunk_shape=chunk)))
    _edit(g / "y" / "zarr.json", lambda d: (d.update(shape=[rows]), d["chunk_grid"]["configuration"].update(chunk_shape=chunk[:1])))
    _edit(g / "zarr.json", lambda d: (
        d["attributes"].update(n_rows=rows, chunk_rows=chunk[0]),
        d["attributes"]["arrays"]["X"].update(shape=[rows, 3], chunks=chunk),
        d["attributes"]["arrays"]["y"].update(shape=[rows], chunks=chunk[:1]),
    ))


def _huge_metadata(g: Path) -> None:
    with open(g / "X" / "zarr.json", "r+b") as f:  # sparse: 100 MB declared, nothing written
        f.truncate(100 << 20)


DATA_BOMBS = [
    ("rows-5e7-chunks-of-1", lambda g: _bomb_rows(g, 50_000_000, [1, 3]), r"declares 50000000 chunks; dxrf reads at most"),
    ("two-axes-chunks-of-1", lambda g: _bomb_rows(g, 50_000_000, [1, 1]), r"declares 150000000 chunks"),
    ("rows-1e15", lambda g: _bomb_rows(g, 10**15, [100, 3]), r"declares 10000000000000 chunks"),
    ("grid-just-within-bounds", lambda g: _bomb_rows(g, (MAX_CHUNKS - 1) * 100, [100, 3]), r"chunk 'c/4/0' .* is missing"),
    ("y-only-5e7", lambda g: (
        _edit(g / "y" / "zarr.json", lambda d: (d.update(shape=[50_000_000]), d["chunk_grid"]["configuration"].update(chunk_shape=[1]))),
        _edit(g / "zarr.json", lambda d: d["attributes"]["arrays"]["y"].update(shape=[50_000_000], chunks=[1])),
    ), r"array 'y' has shape \(50000000,\) for 400 rows of X"),
    ("stats-5e7", lambda g: (
        _edit(g / "x_std" / "zarr.json", lambda d: (d.update(shape=[50_000_000]), d["chunk_grid"]["configuration"].update(chunk_shape=[1]))),
    ), r"array 'x_std' has shape \(50000000,\), expected \(3,\)"),
    ("one-huge-chunk", lambda g: _bomb_rows(g, 10**11, [10**11, 3]), r"one chunk of array 'X' .* needs about"),
    ("huge-metadata-file", _huge_metadata, r"X/zarr.json' holds 104857600 bytes, more than the 67108864 dxrf reads"),
]


@pytest.mark.parametrize("tamper,match", [pytest.param(t, m, id=i) for i, t, m in DATA_BOMBS])
def test_data_bombs_are_refused_from_the_metadata(group, tamper, match):
    tamper(group)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=match):
        _open_and_read(group)
    assert time.perf_counter() - start < 3.0


def _model_array(m: Path, name: str = "coef_") -> tuple[Path, dict]:
    doc = json.loads((m / "zarr.json").read_text())
    spec = doc["attributes"]["fitted"][name]
    return m / spec["__array__"], spec


def _model_bomb(shape: list[int], chunks: list[int] | None = None, dtype: str | None = None):
    def tamper(m: Path) -> None:
        arr, _ = _model_array(m)
        upd = {"shape": shape} if dtype is None else {"shape": shape, "dtype": dtype}
        _edit(m / "zarr.json", lambda d: d["attributes"]["fitted"]["coef_"].update(upd))
        _edit(arr / "zarr.json", lambda d: (
            d.update(shape=shape),
            d["chunk_grid"]["configuration"].update(chunk_shape=chunks or shape),
            d.update(data_type=dtype) if dtype else None,
        ))
    return tamper


MODEL_BOMBS = [
    ("shape-5e7-chunks-of-1", _model_bomb([50_000_000], [1]), r"stored in chunks of \(1,\); dxrf model arrays are stored as one chunk"),
    ("shape-5e7-one-chunk", _model_bomb([50_000_000]), r"holds 84 bytes; .* takes 400000004"),
    ("two-axes", _model_bomb([100_000, 100_000], [1, 1]), r"dxrf model arrays are stored as one chunk"),
    ("string-dtype", _model_bomb([10], dtype="string"), r"model arrays hold numbers|corrupt|dtype"),
]


@pytest.mark.parametrize("tamper,match", [pytest.param(t, m, id=i) for i, t, m in MODEL_BOMBS])
def test_model_bombs_are_refused_from_the_metadata(model, tamper, match):
    tamper(model)
    start = time.perf_counter()
    with pytest.raises(ModelFormatError, match=match):
        dxrf.load(model)
    assert time.perf_counter() - start < 3.0


def test_bombs_stay_within_a_small_address_space(group, model):
    """The issue's two bombs, in a child process capped at 1.5 GiB: refused, not a MemoryError."""
    _bomb_rows(group, 50_000_000, [1, 3])
    _model_bomb([50_000_000], [1])(model)
    script = textwrap.dedent(f"""
        import resource, time
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, resource.RLIM_INFINITY))
        import dxrf, dxrf.io
        for call in (lambda: dxrf.io.open_zarr({str(group)!r}), lambda: dxrf.load({str(model)!r})):
            start = time.perf_counter()
            try:
                call()
            except MemoryError:
                print("MEMORYERROR")
            except ValueError as exc:
                print("REFUSED", round(time.perf_counter() - start, 2), exc)
    """)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("REFUSED") for line in lines), (proc.stdout, proc.stderr[-2000:])
    assert all(float(line.split()[1]) < 3.0 for line in lines), lines


# -- class 3: links --------------------------------------------------------------------------------------


def _replace_with_link(path: Path, target: Path, relative: bool = False) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    os.symlink(os.path.relpath(target, path.parent) if relative else target, path)


LINKS = [
    ("chunk-absolute", lambda g, o: _replace_with_link(g / "X/c/1/0", o / "X/c/1/0"), r"link 'X/c/1/0' -> '/"),
    ("chunk-relative", lambda g, o: _replace_with_link(g / "X/c/1/0", o / "X/c/1/0", relative=True), r"link 'X/c/1/0' -> '\.\./"),
    ("y-directory", lambda g, o: _replace_with_link(g / "y", o / "y"), r"link 'y' -> "),
    ("chunk-directory", lambda g, o: _replace_with_link(g / "X/c/2", o / "X/c/2", relative=True), r"link 'X/c/2' -> "),
    ("array-metadata", lambda g, o: _replace_with_link(g / "X/zarr.json", o / "X/zarr.json"), r"link 'X/zarr.json' -> "),
    ("root-metadata", lambda g, o: _replace_with_link(g / "zarr.json", o / "zarr.json"), r"link 'zarr.json' -> "),
    ("dangling", lambda g, o: _replace_with_link(g / "y/c/0", o / "nowhere"), r"link 'y/c/0' -> "),
]


@pytest.mark.parametrize("tamper,match", [pytest.param(t, m, id=i) for i, t, m in LINKS])
def test_links_in_data_groups_are_refused(stored, group, tamper, match):
    tamper(group, stored / "other.zarr")
    with pytest.raises(ValueError, match=match + r".*; dxrf groups hold no links"):
        _open_and_read(group)


def test_a_link_made_after_opening_is_refused_when_read(stored, group):
    ds = dxrf.io.open_zarr(group)
    outside = group.parent / "outside"
    outside.write_bytes(SECRET)
    _replace_with_link(group / "X/c/2/0", outside)
    with pytest.raises(ValueError, match=r"array 'X': cannot read rows 200:300 \(chunk 2\).*symbolic link 'X/c/2/0'") as info:
        ds.X.compute(scheduler="sync")
    assert "SECRET" not in str(info.value)
    ds = dxrf.io.open_zarr(stored / "reg.zarr")
    y_dir = group.parent / "linked.zarr"
    shutil.copytree(stored / "reg.zarr", y_dir)
    ds = dxrf.io.open_zarr(y_dir)
    _replace_with_link(y_dir / "y", stored / "other.zarr" / "y")
    with pytest.raises(ValueError, match=r"array 'y'.*reached through a link"):
        ds.y.compute(scheduler="sync")


@pytest.mark.parametrize("what", ["bytes", "a-chunk-of-another-group"])
def test_a_replaced_chunk_never_echoes_its_bytes(stored, group, what):
    """A chunk overwritten in place (a regular file, no link): its checksum fails and the message says so only."""
    target = group / "X/c/1/0"
    if what == "bytes":
        target.write_bytes(SECRET * 8)
    else:
        b = bytearray((stored / "other.zarr/X/c/1/0").read_bytes())
        b[len(b) // 2] ^= 1
        target.write_bytes(bytes(b))
    with pytest.raises(ValueError) as info:
        _open_and_read(group)
    text = str(info.value)
    assert "chunk 1" in text or "c/1/0" in text, text
    assert "SECRET" not in text and "\\x" not in text and "b'" not in text, text


@pytest.mark.parametrize("content", [b"\xff\xfe" + SECRET, SECRET + b" {not json", b'{"shape": "' + SECRET + b'"}'])
@pytest.mark.parametrize("where", ["zarr.json", "X/zarr.json", "model-array"])
def test_garbage_metadata_is_never_echoed(group, model, where, content):
    if where == "model-array":
        path, call = _model_array(model)[0] / "zarr.json", lambda: dxrf.load(model)
    else:
        path, call = group / where, lambda: _open_and_read(group)
    path.write_bytes(content)
    with pytest.raises(ValueError) as info:
        call()
    assert "SECRET" not in str(info.value) and "\\x" not in str(info.value), str(info.value)


def test_links_in_model_files_are_refused(stored, model):
    _replace_with_link(model / "zarr.json", stored / "model" / "zarr.json")
    with pytest.raises(ModelFormatError, match=r"link 'zarr.json' -> .*; dxrf model files hold no links"):
        dxrf.load(model)
    m2 = model.parent / "m2"
    shutil.copytree(stored / "model", m2)
    arr, _ = _model_array(m2)
    _replace_with_link(arr / "c" / "0", stored / "model2" / arr.name / "c" / "0", relative=True)
    with pytest.raises(ModelFormatError, match=r"link 'a\d+/c/0' -> '\.\./"):
        dxrf.load(m2)


# -- class 4: pipes and other files that are not regular ----------------------------------------------------


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


FIFOS = [
    ("root-metadata", "zarr.json", r"contains a named pipe \(FIFO\) 'zarr.json'"),
    ("array-metadata", "X/zarr.json", r"contains a named pipe \(FIFO\) 'X/zarr.json'"),
    ("chunk", "y/c/2", r"contains a named pipe \(FIFO\) 'y/c/2'"),
]


@pytest.mark.parametrize("where,match", [pytest.param(w, m, id=i) for i, w, m in FIFOS])
def test_pipes_in_data_groups_are_refused_without_blocking(group, where, match):
    _fifo(group / where)
    with _deadline(3.0), pytest.raises(ValueError, match=match + r"; dxrf groups hold only directories and regular files"):
        _open_and_read(group)


def test_a_pipe_made_after_opening_is_refused_without_blocking(group):
    ds = dxrf.io.open_zarr(group)
    _fifo(group / "X/c/3/0")
    with _deadline(3.0), pytest.raises(ValueError, match=r"cannot read rows 300:400 \(chunk 3\).*'X/c/3/0' is a named pipe"):
        ds.X.compute(scheduler="sync")


@pytest.mark.parametrize("where", ["zarr.json", "array-metadata", "array-chunk"])
def test_pipes_in_model_files_are_refused_without_blocking(model, where):
    arr, _ = _model_array(model)
    path = {"zarr.json": model / "zarr.json", "array-metadata": arr / "zarr.json", "array-chunk": arr / "c" / "0"}[where]
    _fifo(path)
    with _deadline(3.0), pytest.raises(ModelFormatError, match=r"contains a named pipe \(FIFO\)"):
        dxrf.load(model)


def test_destination_checks_do_not_block_on_a_pipe(group):
    """Overwriting asks what is there: a pipe as its metadata is not read (and not a dxrf group)."""
    _fifo(group / "zarr.json")
    with _deadline(3.0), pytest.raises(ValueError, match="refusing to overwrite"):
        dxrf.io.write_zarr(X, group, overwrite=True)
    assert group.is_dir() and (group / "X").is_dir()


# -- class 5: chunks out of place ---------------------------------------------------------------------------


def _swap(a: Path, b: Path) -> None:
    da_, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da_)


SWAPS = [
    ("within-X", lambda g, o: _swap(g / "X/c/0/0", g / "X/c/1/0"), r"array 'X': chunk 'c/[01]/0' \(chunk index \([01], 0\)\) is not the chunk"),
    ("within-y", lambda g, o: _swap(g / "y/c/2", g / "y/c/3"), r"array 'y': chunk 'c/[23]' .* is not the chunk"),
    ("y-into-X", lambda g, o: shutil.copyfile(g / "y/c/1", g / "X/c/1/0"), r"array 'X': chunk 'c/1/0' .* is not the chunk"),
    ("from-another-group", lambda g, o: shutil.copyfile(o / "X/c/2/0", g / "X/c/2/0"), r"array 'X': chunk 'c/2/0' .* is not the chunk"),
    ("stats-swapped", lambda g, o: _swap(g / "x_mean/c/0", g / "x_std/c/0"), r"array 'x_mean': chunk 'c/0' .* is not the chunk"),
]


@pytest.mark.parametrize("tamper,match", [pytest.param(t, m, id=i) for i, t, m in SWAPS])
def test_chunks_out_of_place_are_refused(stored, group, tamper, match):
    tamper(group, stored / "other.zarr")
    with pytest.raises(ValueError, match=match):
        _open_and_read(group)


def test_chunks_moved_after_opening_are_refused_when_read(stored, group):
    """The check as each chunk is read (all an object store gets): a swap after opening is caught too."""
    ds = dxrf.io.open_zarr(group)
    _swap(group / "X/c/2/0", group / "X/c/3/0")
    with pytest.raises(ValueError, match=r"array 'X': chunk 'c/[23]/0' .* is not the chunk its writer stored there"):
        ds.X.compute(scheduler="sync")
    np.testing.assert_array_equal(ds.X[:200].compute(scheduler="sync"), X[:200].astype(np.float32))


def test_groups_written_before_the_checksum_table_still_read(stored, group):
    """No ``crc32c`` entry: the old per-chunk check alone (a swap of whole chunks is then not detected)."""
    _edit(group / "zarr.json", lambda d: [a.pop("crc32c") for a in d["attributes"]["arrays"].values()])
    ds = dxrf.io.open_zarr(group)
    np.testing.assert_array_equal(ds.X.compute(scheduler="sync"), X.astype(np.float32))
    _swap(group / "X/c/0/0", group / "X/c/1/0")
    swapped = dxrf.io.open_zarr(group).X.compute(scheduler="sync")
    np.testing.assert_array_equal(swapped[:100], X[100:200].astype(np.float32))  # the documented limit


def test_a_malformed_checksum_table_is_refused(group):
    _edit(group / "zarr.json", lambda d: d["attributes"]["arrays"]["X"].update(crc32c="00" * 3))
    with pytest.raises(ValueError, match=r"array 'X': the record's chunk checksum table is malformed \(expected 4 entries\)"):
        dxrf.io.open_zarr(group)


def test_model_arrays_out_of_place_are_refused(stored, model):
    arr, _ = _model_array(model)
    shutil.copyfile(stored / "model2" / arr.name / "c" / "0", arr / "c" / "0")  # same shape and dtype, another model
    with pytest.raises(ModelFormatError, match=rf"array '{arr.name}': chunk 'c/0' .* is not the chunk its writer stored there"):
        dxrf.load(model)


def test_models_written_before_the_checksum_table_still_load(stored, model):
    def drop(v):
        if isinstance(v, dict):
            v.pop("crc32c", None)
            for x in v.values():
                drop(x)
        elif isinstance(v, list):
            for x in v:
                drop(x)

    for meta in model.rglob("zarr.json"):
        _edit(meta, drop)
    assert '"crc32c":' not in "".join(p.read_text() for p in model.rglob("zarr.json"))
    np.testing.assert_array_equal(dxrf.load(model).predict(X[:5]), dxrf.load(stored / "model").predict(X[:5]))


# -- the same message on the CLI ------------------------------------------------------------------------------


def _message(fn) -> str:
    with _deadline(30.0):
        try:
            fn()
        except ValueError as exc:
            return str(exc)
    raise AssertionError("no error")


@pytest.mark.slow
def test_cli_info_gives_the_python_message(stored, group, tmp_path):
    cases = []
    g1 = tmp_path / "bomb.zarr"
    shutil.copytree(group, g1)
    _bomb_rows(g1, 50_000_000, [1, 3])
    cases.append(g1)
    g2 = tmp_path / "link.zarr"
    shutil.copytree(group, g2)
    _replace_with_link(g2 / "y", stored / "other.zarr" / "y")
    cases.append(g2)
    g3 = tmp_path / "fifo.zarr"
    shutil.copytree(group, g3)
    _fifo(g3 / "zarr.json")
    cases.append(g3)
    for g in cases:
        _one_error_line(_cli("info", str(g), timeout=30), _message(lambda: dxrf.io.open_zarr(g)))


@pytest.mark.slow
def test_cli_predict_and_fit_give_the_python_message(stored, group, model, tmp_path):
    _fifo(model / "zarr.json")
    out = tmp_path / "pred.zarr"
    proc = _cli("predict", str(model), str(group), "--out", str(out), timeout=60)
    _one_error_line(proc, _message(lambda: dxrf.load(model)))
    assert not out.exists() and not list(tmp_path.glob("pred.zarr*"))
    _swap(group / "X/c/0/0", group / "X/c/1/0")
    out = tmp_path / "fitted"
    proc = _cli("fit", str(group), "--out", str(out), "--n-components", "20",
                "--bandwidth", "1", "--alpha", "1", timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "array 'X': chunk 'c/" in lines[0] and "is not the chunk its writer stored there" in lines[0]
    assert not out.exists() and not list(tmp_path.glob("fitted*"))

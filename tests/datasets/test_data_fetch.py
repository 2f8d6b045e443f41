"""Fetching the real data sets: the manifest, verified downloads over real HTTP, the lookup order.

The mirror is ``shared/data`` (or a damaged copy of part of it) served by
``python3 -m http.server`` in its own process on 127.0.0.1; the cache is a
temporary ``DXRF_DATA_DIR``. The command line runs in this process through
``dxrf.cli.commands.main`` (fast), except in the slow acceptance test, which runs a
clean clone without ``../shared`` as subprocesses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from dxrf.datasets import cache as data_cache
from dxrf.datasets import loaders as datasets
from dxrf.cli.commands import main
from workflows._common import free_port, server_process

ROOT = Path(__file__).resolve().parents[2]
ENV_VARS = ("DXRF_DATA_DIR", "DXRF_DATA_MIRROR", "DXRF_DATA_DISCOVER", "XDG_CACHE_HOME", "DXRF_DATA_SOURCE_MIRROR")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def shared_data() -> Path:
    with pytest.MonkeyPatch.context() as mp:
        for var in ENV_VARS:
            mp.delenv(var, raising=False)
        found = data_cache.discovered_dir()
    assert found is not None, "these tests serve the real shared/data found beside the checkout"
    return found


_free_port = free_port


def http_server(directory: Path) -> contextlib.AbstractContextManager[str]:
    """``python3 -m http.server`` serving ``directory``."""
    port = _free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(directory)]
    return server_process(argv, port)


@pytest.fixture(scope="module")
def mirror(shared_data) -> Iterator[str]:
    with http_server(shared_data) as url:
        yield url


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["data", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def _files_under(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file()) if d.exists() else []


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


# -- the manifest ---------------------------------------------------------------------------------


def test_manifest_matches_shared_data(shared_data):
    text = (shared_data / "MANIFEST.md").read_text()
    for f in data_cache.files():
        p = shared_data / f.path
        assert p.stat().st_size == f.size, f.path
        assert _sha(p) == f.sha256, f.path
        assert f.sha256 in text, f"{f.path}: its checksum is not the one MANIFEST.md states"
        assert f.source_url.startswith("https://"), f.path
        # only the UCI regression files are byte-for-byte copies of their source
        assert f.source_exact == f.path.startswith("uci_regression_yang2016/"), f.path
    assert data_cache.names() == datasets.names()
    uci = [f.path for f in data_cache.files() if "protein" in f.datasets]
    assert uci == ["uci_regression_yang2016/protein.csv.gz", "uci_regression_yang2016/protein_test_mask.csv.gz"]


def test_manifest_is_package_data():
    cfg = (ROOT / "pyproject.toml").read_text()
    assert '"dxrf.datasets" = ["manifest.json"]' in cfg
    doc = json.loads((ROOT / "dxrf" / "datasets" / "manifest.json").read_text())
    assert len(doc["files"]) == len(data_cache.files()) == 26


@pytest.mark.parametrize("name", datasets.names())
def test_every_file_a_loader_reads_is_in_the_manifest(name, shared_data, tmp_path, monkeypatch):
    # an empty data directory: loading fails naming every file of the set, all of them the manifest's
    monkeypatch.setenv("DXRF_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError) as info:
        datasets.load(name, n_rows=10)
    paths = [f.path for f in data_cache.files() if name in f.datasets]
    listed = paths[0] if len(paths) == 1 else ", ".join(paths[:-1]) + " and " + paths[-1]
    verb = "is" if len(paths) == 1 else "are"
    assert str(info.value).startswith(f"data set {name!r}: {listed} {verb} not in {tmp_path} ")
    # with just those files there it loads: the loader reads nothing the manifest does not list
    for rel in paths:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).symlink_to(shared_data / rel)
    assert datasets.load(name, n_rows=10).X_train.shape[0] > 0


# -- lookup order ---------------------------------------------------------------------------------


def test_lookup_order(shared_data, tmp_path, monkeypatch):
    cache = tmp_path / "xdg" / "dxrf" / "data"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data_cache.search_dirs() == [shared_data, cache]
    assert datasets.data_dir() == shared_data
    monkeypatch.setenv("DXRF_DATA_DISCOVER", "0")
    assert data_cache.search_dirs() == [cache] and datasets.data_dir() == cache
    assert data_cache.cache_dir() == cache
    # DXRF_DATA_DIR is the only place looked at, and where fetch writes
    monkeypatch.setenv("DXRF_DATA_DISCOVER", "1")
    monkeypatch.setenv("DXRF_DATA_DIR", str(tmp_path / "d"))
    assert data_cache.search_dirs() == [tmp_path / "d"] and data_cache.cache_dir() == tmp_path / "d"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("DXRF_DATA_DIR")
    assert data_cache.cache_dir() == Path.home() / ".cache" / "dxrf" / "data"


@pytest.mark.parametrize(
    ("name", "mirror", "expected"),
    [
        # exact source: the public URLs at the pinned commit
        ("protein", None, "to download them from https://raw.githubusercontent.com/treforevans/uci_datasets/"
                          "f0737523712fe66a1640e4b980b927e8490b58eb/uci_datasets/protein/data.csv.gz and "
                          "https://raw.githubusercontent.com/treforevans/uci_datasets/"
                          "f0737523712fe66a1640e4b980b927e8490b58eb/uci_datasets/protein/test_mask.csv.gz"),
        # derived files: their sources, and the recipe
        ("adult", None, "to download their sources from https://raw.githubusercontent.com/advaithca/lessThanGreaterThan50k/"
                        "e91f4a9036bba2042c17da9d8e75b22cea4d9b7c/adult.data and https://raw.githubusercontent.com/"
                        "advaithca/lessThanGreaterThan50k/e91f4a9036bba2042c17da9d8e75b22cea4d9b7c/adult.test and "
                        "derive them"),
        ("adult", "http://127.0.0.1:9/m/", "to download them from http://127.0.0.1:9/m/adult/adult.data.gz and "
                                           "http://127.0.0.1:9/m/adult/adult.test.gz"),
        ("mnist", None, "to download its source from https://files.pythonhosted.org/"),
        ("mnist", "ftp://x", "`dxrf data fetch mnist` downloads it, but DXRF_DATA_MIRROR='ftp://x' must be"),
    ],
)
def test_load_without_data_fails_in_one_line(name, mirror, expected, tmp_path, monkeypatch):
    monkeypatch.setenv("DXRF_DATA_DISCOVER", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    if mirror:
        monkeypatch.setenv("DXRF_DATA_MIRROR", mirror)
    with pytest.raises(FileNotFoundError) as info:
        datasets.load(name)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"data set {name!r}: ") and f"`dxrf data fetch {name}`" in msg
    files = [f.path for f in data_cache.files() if name in f.datasets]
    cache = tmp_path / "dxrf" / "data"
    # every missing file, where it was looked for and why only there, how to use a copy instead
    assert msg.startswith(f"data set {name!r}: {' and '.join(files)} {'are' if len(files) > 1 else 'is'} not in "
                          f"{cache} (the user cache; DXRF_DATA_DISCOVER=0 turns off looking for a shared/data ")
    assert (f"to use a copy, set DXRF_DATA_DIR to a directory that holds the files laid out as shared/data "
            f"(e.g. DXRF_DATA_DIR=../shared/data), or copy them into {cache}; ") in msg
    assert expected in msg
    assert not (tmp_path / "dxrf").exists()  # loading never downloads


def test_load_with_download_fetches_what_is_missing(mirror, shared_data, tmp_path, monkeypatch, capsys):
    # what the workflows do: a missing set is fetched into the cache (here from the mirror), then read
    monkeypatch.setenv("DXRF_DATA_DISCOVER", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("DXRF_DATA_MIRROR", mirror)
    got = datasets.load("parkinsons", download=True)
    cache = tmp_path / "dxrf" / "data"
    want = sorted(cache / f.path for f in data_cache.files() if "parkinsons" in f.datasets)
    assert _files_under(cache) == want
    err = capsys.readouterr().err
    assert err.count("\n") == len(want) * 2 and all(ln.startswith("data: parkinsons: ") for ln in err.splitlines())
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DXRF_DATA_DISCOVER")
        mp.delenv("XDG_CACHE_HOME")
        ref = datasets.load("parkinsons")  # from shared/data
    np.testing.assert_array_equal(got.X_train, ref.X_train)
    # present now: nothing is fetched again, nothing printed
    datasets.load("parkinsons", download=True)
    assert capsys.readouterr().err == ""


def test_load_with_download_and_no_network_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("DXRF_DATA_DISCOVER", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    dead = f"http://127.0.0.1:{_free_port()}"
    monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", dead)
    with pytest.raises(data_cache.DataFetchError) as info:
        datasets.load("adult", download=True)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"data set 'adult': adult/adult.data.gz and adult/adult.test.gz are not in "
                          f"{tmp_path / 'dxrf' / 'data'} (the user cache; ")
    assert (f", and fetching them failed: downloading the source of adult/adult.data.gz from "
            f"{dead}/raw.githubusercontent.com/") in msg
    assert "the URL could not be reached" in msg and "; instead, set DXRF_DATA_DIR to a directory" in msg
    assert "retry" not in msg and "dxrf data fetch" not in msg  # the fetch just failed: doing it again would too
    assert not (tmp_path / "dxrf").exists()  # nor an empty cache folder


# -- fetching over HTTP ---------------------------------------------------------------------------


def test_fetch_verifies_and_the_loaders_use_the_cache(mirror, shared_data, tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    monkeypatch.setenv("DXRF_DATA_DIR", str(cache))  # authoritative: shared/data is not looked at
    monkeypatch.setenv("DXRF_DATA_MIRROR", mirror)
    rc, out, err = _cli(capsys, "fetch", "adult", "parkinsons")
    assert rc == 0 and err == ""  # progress only on a terminal
    want = [f for f in data_cache.files() if {"adult", "parkinsons"} & set(f.datasets)]
    assert [ln.split("\t")[1:4] for ln in out.splitlines()] == [[f.path, str(f.size), "downloaded"] for f in want]
    assert _files_under(cache) == sorted(cache / f.path for f in want)  # no temporary file left
    for f in want:
        p = cache / f.path
        assert _sha(p) == f.sha256 and p.read_bytes() == (shared_data / f.path).read_bytes()
        assert p.stat().st_mode & 0o777 == 0o644
    # the loaders read the cache alone, and get what shared/data gives
    ds = datasets.load("parkinsons", split=3)
    assert ds.source_path == str(cache / "uci_regression_yang2016/parkinsons.csv.gz")
    monkeypatch.delenv("DXRF_DATA_DIR")
    ref = datasets.load("parkinsons", split=3)
    assert ref.source_path.startswith(str(shared_data))
    np.testing.assert_array_equal(ds.X_train, ref.X_train)
    np.testing.assert_array_equal(ds.y_test, ref.y_test)
    monkeypatch.setenv("DXRF_DATA_DIR", str(cache))
    assert datasets.load("adult", n_rows=50).X_train.shape == (50, 105)

    # verified files are not downloaded again: the mirror may be gone
    before = {p: p.stat().st_mtime_ns for p in _files_under(cache)}
    monkeypatch.setenv("DXRF_DATA_MIRROR", f"http://127.0.0.1:{_free_port()}")
    rc, out, _ = _cli(capsys, "fetch", "parkinsons", "adult")
    assert rc == 0 and {ln.split("\t")[3] for ln in out.splitlines()} == {"present"}
    assert {p: p.stat().st_mtime_ns for p in _files_under(cache)} == before

    # a corrupt cached file is replaced by a verified download
    monkeypatch.setenv("DXRF_DATA_MIRROR", mirror)
    bad = cache / "uci_regression_yang2016/parkinsons_test_mask.csv.gz"
    bad.write_bytes(b"not the mask")
    rc, out, _ = _cli(capsys, "fetch", "parkinsons")
    assert rc == 0 and [ln.split("\t")[3] for ln in out.splitlines()] == ["present", "downloaded"]
    assert _sha(bad) == data_cache._by_path("uci_regression_yang2016/parkinsons_test_mask.csv.gz").sha256

    rc, out, _ = _cli(capsys, "list")
    assert rc == 0
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[4:-1]}
    assert rows["adult"][1:5] == ["2", "614847", "derived", "present"] and rows["adult"][5] == str(cache)
    assert rows["parkinsons"][3:5] == ["exact", "present"]
    assert rows["protein"][4:6] == ["missing", "-"]


@dataclasses.dataclass
class Damage:
    """A damaged copy of the mirror, and what the error must say."""

    id: str
    damage: Callable[[Path], None]
    message: list[str]


REL = "uci_regression_yang2016/parkinsons.csv.gz"


def _flip(p: Path) -> None:
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 0xFF
    p.write_bytes(bytes(b))


DAMAGES = [
    Damage("flipped-byte", _flip, ["does not verify: expected 334059 bytes with sha256 d20ffd9c", "got 334059 bytes"]),
    Damage("truncated", lambda p: p.write_bytes(p.read_bytes()[:1000]),
           ["does not verify: expected 334059 bytes", "got 1000 bytes"]),
    Damage("too-long", lambda p: p.write_bytes(p.read_bytes() + b"x" * (1 << 21)), ["is longer than the 334059 bytes expected; nothing was kept"]),
    Damage("missing-404", lambda p: p.unlink(), ["failed after 0 of 334059 bytes (HTTPError: File not found)"]),
]


@pytest.mark.parametrize("case", DAMAGES, ids=[d.id for d in DAMAGES])
@pytest.mark.parametrize("scheme", ["http", "file"])
def test_damaged_mirror_gives_one_error_and_leaves_nothing(case, scheme, shared_data, tmp_path, monkeypatch, capsys):
    if scheme == "file" and case.id == "missing-404":
        case = dataclasses.replace(case, message=["failed after 0 of 334059 bytes (URLError: [Errno 2]"])
    tree = tmp_path / "mirror"
    for f in data_cache._files_of("parkinsons"):
        (tree / f.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared_data / f.path, tree / f.path)
    case.damage(tree / REL)
    cache = tmp_path / "cache"
    monkeypatch.setenv("DXRF_DATA_DIR", str(cache))
    with contextlib.ExitStack() as stack:
        base = stack.enter_context(http_server(tree)) if scheme == "http" else tree.as_uri()
        monkeypatch.setenv("DXRF_DATA_MIRROR", base)
        rc, out, err = _cli(capsys, "fetch", "parkinsons")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dxrf: error: data set 'parkinsons': ")
    url = f"{base}/{REL}"
    assert f"{REL} from {url}" in err
    for part in case.message:
        assert part in err
    assert f"; nothing was kept; instead, check that DXRF_DATA_MIRROR={base} serves a copy laid out as shared/data" in err
    assert "retry" not in err
    assert not cache.exists()  # neither the file nor its temporary copy, nor the folders made for them


def test_cut_connection_gives_one_error_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    # a server that announces the whole file, sends 1000 bytes and hangs up
    script = textwrap.dedent("""
        import http.server, sys
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Length", "334059")
                self.end_headers()
                self.wfile.write(b"x" * 1000)
                self.wfile.flush()
                self.close_connection = True
            def log_message(self, *a):
                pass
        http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
    """)
    port = _free_port()
    cache = tmp_path / "cache"
    monkeypatch.setenv("DXRF_DATA_DIR", str(cache))
    with server_process([sys.executable, "-c", script, str(port)], port) as base:
        monkeypatch.setenv("DXRF_DATA_MIRROR", base)
        rc, out, err = _cli(capsys, "fetch", "parkinsons")
    assert rc == 2 and err.count("\n") == 1
    assert f"dxrf: error: data set 'parkinsons': downloading {REL} from {base}/{REL} failed after 1000 of 334059 " in err
    assert "IncompleteRead" in err and "): the connection broke off before the end of the file; nothing was kept" in err
    assert "retry" not in err
    assert not cache.exists()


@pytest.mark.parametrize(
    ("args", "mirror", "message"),
    [
        (["fetch", "iris"], None, "unknown data set 'iris'; known: adult, "),
        # checked before any download: parkinsons (fetchable from its source) is not attempted
        (["fetch", "parkinsons", "iris"], None, "unknown data set 'iris'; known: adult, "),
        (["fetch", "adult"], "ftp://example.org/data", "DXRF_DATA_MIRROR='ftp://example.org/data' must be"),
        (["fetch", "parkinsons", "adult"], "source:ftp://example.org/src", "DXRF_DATA_SOURCE_MIRROR='ftp://example.org/src'"),
    ],
)
def test_fetch_refusals(args, mirror, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DXRF_DATA_DIR", str(tmp_path / "cache"))
    # never the internet: sources from a port nothing listens on
    monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", f"http://127.0.0.1:{_free_port()}")
    if mirror and mirror.startswith("source:"):
        monkeypatch.setenv("DXRF_DATA_SOURCE_MIRROR", mirror.removeprefix("source:"))
    elif mirror:
        monkeypatch.setenv("DXRF_DATA_MIRROR", mirror)
    rc, out, err = _cli(capsys, *args)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("dxrf: error: " + message)
    assert not (tmp_path / "cache").exists()


def test_corrupt_discovered_copy_is_reported(shared_data, tmp_path, monkeypatch, capsys):
    # a shared/data beside a working directory whose copy of a file is damaged
    fake = tmp_path / "shared" / "data"
    fake.mkdir(parents=True)
    (fake / "MANIFEST.md").write_text("copy\n")
    for f in data_cache._files_of("parkinsons"):
        (fake / f.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared_data / f.path, fake / f.path)
    _flip(fake / REL)
    monkeypatch.chdir(tmp_path)
    # the real shared/data above the package comes first: hide the package's parents by discovery from cwd only
    monkeypatch.setattr(data_cache, "__file__", str(tmp_path / "pkg" / "dxrf" / "data_cache.py"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data_cache.discovered_dir() == fake
    rc, _, err = _cli(capsys, "fetch", "parkinsons")
    assert rc == 2 and err.startswith(f"dxrf: error: data set 'parkinsons': {fake / REL} does not match its manifest")
    assert "DXRF_DATA_DISCOVER=0" in err
    assert not (tmp_path / "xdg").exists()


# -- acceptance: a clean clone without ../shared ------------------------------------------------------


# the clone's own workflows as dxrf.workflows (an editable install elsewhere may map that name), then the CLI
_RUN_CLONE = (
    "import importlib.util, sys; import dxrf; "
    "spec = importlib.util.spec_from_file_location('dxrf.workflows', 'workflows/__init__.py', "
    "submodule_search_locations=['workflows']); m = importlib.util.module_from_spec(spec); "
    "sys.modules['dxrf.workflows'] = m; spec.loader.exec_module(m); dxrf.workflows = m; "
    "from dxrf.cli.commands import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.mark.slow
def test_clean_clone_fetches_all_then_runs_the_readme_command(mirror, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(PYTHONPATH=str(clone), XDG_CACHE_HOME=str(tmp_path / "xdg"))

    def dxrf(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", _RUN_CLONE, *args], cwd=clone, env={**env, **extra},
                              capture_output=True, text=True, timeout=1200)

    readme = (clone / "README.md").read_text()
    command = readme.split("```bash\n", 1)[1].split("\n```", 1)[0]
    reproduce = command.split("&& dxrf ", 1)[1].split()  # the part after the install
    assert reproduce[:3] == ["reproduce", "fig2-error-vs-m", "--quick"]
    # no data and no network (the sources rebased onto a closed port): one line naming every set and file the
    # command needs, where dxrf looked (no ../shared/data beside the clone), the URL that failed, the fix
    dead = f"http://127.0.0.1:{_free_port()}"
    before = dxrf(*reproduce, DXRF_DATA_SOURCE_MIRROR=dead)
    assert before.returncode == 2 and before.stderr.count("\n") == 1, before.stderr
    assert before.stderr.startswith("dxrf: error: data sets 'protein' (uci_regression_yang2016/protein.csv.gz, ")
    for name in ("keggundirected", "adult", "epileptic_seizure"):
        assert f"'{name}' (" in before.stderr
    assert "no shared/data with a MANIFEST.md is in a parent directory of the checkout" in before.stderr
    assert f"fetching them failed: downloading uci_regression_yang2016/protein.csv.gz from {dead}/" in before.stderr
    assert "set DXRF_DATA_DIR to a directory that holds the files" in before.stderr
    assert not (tmp_path / "xdg").exists()
    fetched = dxrf("data", "fetch", "all", DXRF_DATA_MIRROR=mirror)
    assert fetched.returncode == 0, fetched.stderr
    cache = tmp_path / "xdg" / "dxrf" / "data"
    assert len(_files_under(cache)) == len(data_cache.files())
    run = dxrf(*reproduce)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (clone / "results" / "quick" / "fig2_error_vs_m.json").is_file()

"""A newcomer without the data: what dxrf says, and what a failed fetch leaves behind.

A missing set is reported in one line naming every missing file (of every
set the command needs), where dxrf looked and why only there, how to point it
at a copy (``DXRF_DATA_DIR``) and how to fetch (``dxrf data fetch``). A fetch
that fails says what failed and what to do instead of retrying, and removes
the folders it made, never one that was there before. The servers are real
``http.server`` processes on 127.0.0.1 (a 404 is an empty directory served,
a refused port is one nothing listens on).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_data_fetch import _clean_env, _cli, _files_under, _free_port, http_server, mirror, shared_data  # noqa: F401

from dxrf.cli.commands import main
from dxrf.datasets import cache as data_cache
from dxrf.datasets import loaders as datasets
from dxrf.datasets import missing

PROTEIN = ["uci_regression_yang2016/protein.csv.gz", "uci_regression_yang2016/protein_test_mask.csv.gz"]
PARKINSONS = ["uci_regression_yang2016/parkinsons.csv.gz", "uci_regression_yang2016/parkinsons_test_mask.csv.gz"]


def _tree(d: Path) -> list[str]:
    """Every file and folder under ``d`` (folders with a trailing slash)."""
    return sorted(str(p.relative_to(d)) + ("/" if p.is_dir() else "") for p in d.rglob("*"))


def _copy(shared: Path, dest: Path, rels: list[str]) -> None:
    for rel in rels:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared / rel, dest / rel)


def _away_from_shared(monkeypatch, tmp_path: Path) -> None:
    """As in a clone without ../shared: neither the package's parents nor the working directory's hold one."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(data_cache, "__file__", str(tmp_path / "clone" / "dxrf" / "datasets" / "cache.py"))


def _one_line(capsys, argv: list[str]) -> str:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1 and err.startswith("dxrf: error: "), err
    return err.removeprefix("dxrf: error: ").rstrip("\n")


# -- a missing set: every file, where dxrf looked, how to get them ----------------------------------------


@pytest.mark.parametrize("where", ["data-dir", "no-discovery", "fresh-clone", "partial-shared"])
def test_a_missing_set_names_its_files_where_dxrf_looked_and_the_fixes(where, shared_data, tmp_path, monkeypatch):
    cache = tmp_path / "xdg" / "dxrf" / "data"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    gone = PROTEIN
    copy_advice = (f"to use a copy, set DXRF_DATA_DIR to a directory that holds the files laid out as shared/data "
                   f"(e.g. DXRF_DATA_DIR=../shared/data), or copy them into {cache}; ")
    if where == "data-dir":
        d = tmp_path / "d"
        d.mkdir()
        monkeypatch.setenv("DXRF_DATA_DIR", str(d))
        looked = f"{d} (DXRF_DATA_DIR: when it is set, the only place looked in)"
        copy_advice = (f"to use a copy, copy the files into {d} (laid out as shared/data), or set DXRF_DATA_DIR to a "
                       "directory that holds them; ")
    elif where == "no-discovery":
        monkeypatch.setenv("DXRF_DATA_DISCOVER", "0")
        looked = f"{cache} (the user cache; DXRF_DATA_DISCOVER=0 turns off looking for a shared/data beside the checkout)"
    elif where == "fresh-clone":
        _away_from_shared(monkeypatch, tmp_path)
        looked = (f"{cache} (the user cache; no shared/data with a MANIFEST.md is in a parent directory of the checkout "
                  "or of the working directory, where a ../shared/data would be used)")
    else:  # a shared/data beside the working directory with only one of protein's two files
        fake = tmp_path / "shared" / "data"
        fake.mkdir(parents=True)
        (fake / "MANIFEST.md").write_text("a partial copy\n")
        _copy(shared_data, fake, PROTEIN[:1])
        _away_from_shared(monkeypatch, tmp_path)
        gone = PROTEIN[1:]
        looked = f"{fake} (the shared/data found beside the checkout) or {cache} (the user cache)"
    with pytest.raises(FileNotFoundError) as info:
        datasets.load("protein")
    msg = str(info.value)
    verb = "are" if len(gone) > 1 else "is"
    assert msg.startswith(f"data set 'protein': {' and '.join(gone)} {verb} not in {looked}; {copy_advice}or run "
                          f"`dxrf data fetch protein` to download "), msg
    assert "\n" not in msg
    assert not cache.exists()  # looking never creates the cache


def test_a_command_that_reads_several_sets_names_every_missing_one(shared_data, tmp_path, monkeypatch, capsys):
    d = tmp_path / "d"
    _copy(shared_data, d, PROTEIN)  # one set of four is there
    monkeypatch.setenv("DXRF_DATA_DIR", str(d))
    before = _tree(d)
    out = tmp_path / "out"
    msg = _one_line(capsys, ["bench", "accuracy", "--sets", "protein", "adult", "mnist", "kin40k", "--methods", "hgb",
                             "--out", str(out)])
    assert msg == (
        "data sets 'adult' (adult/adult.data.gz, adult/adult.test.gz), 'mnist' (mnist/mnist.npz) and 'kin40k' "
        "(uci_regression_yang2016/kin40k.csv.gz, uci_regression_yang2016/kin40k_test_mask.csv.gz) are not in "
        f"{d} (DXRF_DATA_DIR: when it is set, the only place looked in); to use a copy, copy the files into {d} "
        "(laid out as shared/data), or set DXRF_DATA_DIR to a directory that holds them; or run "
        "`dxrf data fetch adult mnist kin40k` to download them (`dxrf data list` shows the sources)"
    )
    assert _tree(d) == before and not out.exists()  # refused before it starts; `dxrf bench` only reads


#: the real data sets of each `dxrf reproduce` workflow (--quick where it has one): all checked before it starts
REPRODUCE_SETS = {
    "fig1-weights": ["protein"],
    "fig2-error-vs-m": ["protein", "keggundirected", "adult", "epileptic_seizure"],
    "fig3-lambda": ["protein", "adult"],
    "fig4-few-shot": ["epileptic_seizure", "adult"],
    "leverage-rff": ["protein"],
    "maxout-mnist": ["mnist"],
    "mnist-nystroem": ["mnist"],
    "quickstart": ["protein"],
    "sgd-rf": ["nycflights13"],
}


def test_every_reproduce_workflow_declares_its_data_sets():
    from dxrf.cli.commands import _load_workflow, _workflow_names, build_parser

    assert sorted(_workflow_names(None)) == sorted(REPRODUCE_SETS)  # every one of them reads real data
    parser = build_parser()
    for name, want in REPRODUCE_SETS.items():
        args = parser.parse_args(["reproduce", name] + (["--quick"] if name != "quickstart" else []))
        assert _load_workflow(args.workflow_module).data_sets(args) == want, name
    args = parser.parse_args(["reproduce", "fig2-error-vs-m", "--quick", "--datasets", "pol", "bike"])
    assert _load_workflow(args.workflow_module).data_sets(args) == ["pol", "bike"]


def test_reproduce_without_data_or_network_names_every_set_and_what_failed(tmp_path, monkeypatch, capsys):
    # the README's first command: four sets, fetched before the run starts, from a port nothing listens on
    d = tmp_path / "d"
    d.mkdir()
    monkeypatch.setenv("DXRF_DATA_DIR", str(d))
    dead = f"http://127.0.0.1:{_free_port()}"
    monkeypatch.setenv("DXRF_DATA_MIRROR", dead)
    msg = _one_line(capsys, ["reproduce", "fig2-error-vs-m", "--quick", "--out", str(tmp_path / "out")])
    assert msg.startswith(f"data sets 'protein' ({', '.join(PROTEIN)}), 'keggundirected' (")
    assert "'adult' (adult/adult.data.gz, adult/adult.test.gz) and 'epileptic_seizure' (" in msg
    assert (f" are not in {d} (DXRF_DATA_DIR: when it is set, the only place looked in), and fetching them failed: "
            f"downloading {PROTEIN[0]} from {dead}/{PROTEIN[0]} failed after 0 of ") in msg
    assert "): the URL could not be reached (no network, or the host is down or unknown); nothing was kept; " in msg
    assert f"instead, check that DXRF_DATA_MIRROR={dead} serves a copy laid out as shared/data, or copy the files " in msg
    assert _tree(d) == [] and not (tmp_path / "out").exists()


def test_require_fetches_every_missing_set_and_names_what_is_still_missing(shared_data, tmp_path, monkeypatch, capsys):
    tree = tmp_path / "mirror"
    _copy(shared_data, tree, PARKINSONS)  # the mirror has parkinsons, not adult
    cache = tmp_path / "cache"
    monkeypatch.setenv("DXRF_DATA_DIR", str(cache))
    with http_server(tree) as base:
        monkeypatch.setenv("DXRF_DATA_MIRROR", base)
        with pytest.raises(data_cache.DataFetchError) as info:
            missing.require(["parkinsons", "adult"], download=True)
        msg = str(info.value)
        assert msg.startswith(f"data set 'adult': adult/adult.data.gz and adult/adult.test.gz are not in {cache} "
                              "(DXRF_DATA_DIR: when it is set, the only place looked in), and fetching them failed: "
                              f"downloading adult/adult.data.gz from {base}/adult/adult.data.gz failed after 0 of ")
        assert "(HTTPError: File not found): the server has no such file (HTTP 404); nothing was kept; " in msg
        # the set fetched before the failure stays, verified; nothing of adult, not even its folder
        assert _tree(cache) == ["uci_regression_yang2016/", *PARKINSONS]
        assert capsys.readouterr().err == ""  # a failure is one line
        missing.require("parkinsons", download=True)  # present now: nothing fetched, nothing said
        assert capsys.readouterr().err == ""
        _copy(shared_data, tree, ["adult/adult.data.gz", "adult/adult.test.gz"])
        missing.require(["parkinsons", "adult"], download=True)
    err = capsys.readouterr().err.splitlines()
    # only the set still missing is fetched: two lines a file
    assert len(err) == 4 and all(ln.startswith("data: adult: adult/adult.") for ln in err)
    assert missing.missing_files(["parkinsons", "adult"]) == {}


# -- a failed fetch: what failed, what to do instead, nothing left behind -----------------------------------


@pytest.mark.parametrize("failure", ["refused", "404"])
def test_a_failed_fetch_says_what_failed_and_removes_the_folders_it_made(failure, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DXRF_DATA_DISCOVER", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the user cache, not there yet
    (tmp_path / "empty").mkdir()
    with (http_server(tmp_path / "empty") if failure == "404" else _refused()) as base:
        monkeypatch.setenv("DXRF_DATA_MIRROR", base)
        msg = _one_line(capsys, ["data", "fetch", "parkinsons"])
    why = ("the server has no such file (HTTP 404)" if failure == "404"
           else "the URL could not be reached (no network, or the host is down or unknown)")
    assert msg.startswith(f"data set 'parkinsons': downloading {PARKINSONS[0]} from {base}/{PARKINSONS[0]} failed "
                          "after 0 of 334059 bytes (")
    assert msg.endswith(
        f"): {why}; nothing was kept; instead, check that DXRF_DATA_MIRROR={base} serves a copy laid out as "
        "shared/data, or set DXRF_DATA_DIR to a directory that holds the files laid out as shared/data (e.g. "
        f"DXRF_DATA_DIR=../shared/data), or copy them into {tmp_path / 'xdg' / 'dxrf' / 'data'}"
    )
    assert "retry" not in msg
    assert not (tmp_path / "xdg").exists()  # xdg/dxrf/data/uci_regression_yang2016 were made for it: all gone


class _refused:
    """A base URL on a port of 127.0.0.1 that nothing listens on (the connection is refused)."""

    def __enter__(self) -> str:
        return f"http://127.0.0.1:{_free_port()}"

    def __exit__(self, *exc: object) -> None:
        pass


def test_an_interrupted_fetch_removes_the_folders_it_made(mirror, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("DXRF_DATA_DIR", str(cache))
    monkeypatch.setenv("DXRF_DATA_MIRROR", mirror)

    def interrupt(line: str) -> None:
        if "downloading" in line:  # its folders exist by now
            assert (cache / "uci_regression_yang2016").is_dir()
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        data_cache.fetch("parkinsons", progress=interrupt)
    assert not cache.exists()


def test_a_failed_fetch_never_removes_what_was_there(tmp_path, monkeypatch, capsys):
    d = tmp_path / "mine"
    (d / "uci_regression_yang2016").mkdir(parents=True)  # an empty folder of the user's, where fetch writes
    (d / "adult").mkdir()
    (d / "adult" / "notes.txt").write_text("mine\n")
    (d / "README").write_text("my data\n")
    before = _tree(d)
    monkeypatch.setenv("DXRF_DATA_DIR", str(d))
    with _refused() as base:
        monkeypatch.setenv("DXRF_DATA_MIRROR", base)
        for names in (["parkinsons"], ["adult"], ["mnist", "adult"]):
            msg = _one_line(capsys, ["data", "fetch", *names])
            assert "the URL could not be reached" in msg
            assert _tree(d) == before
    assert (d / "adult" / "notes.txt").read_text() == "mine\n"


def test_a_fetch_that_fails_midway_keeps_the_verified_files(shared_data, tmp_path, monkeypatch, capsys):
    tree = tmp_path / "mirror"
    _copy(shared_data, tree, PARKINSONS[:1])  # the mask is not on the mirror
    cache = tmp_path / "cache"
    monkeypatch.setenv("DXRF_DATA_DIR", str(cache))
    with http_server(tree) as base:
        monkeypatch.setenv("DXRF_DATA_MIRROR", base)
        msg = _one_line(capsys, ["data", "fetch", "parkinsons"])
        assert msg.startswith(f"data set 'parkinsons': downloading {PARKINSONS[1]} from {base}/{PARKINSONS[1]} failed")
        assert "the server has no such file (HTTP 404)" in msg
        assert _tree(cache) == ["uci_regression_yang2016/", PARKINSONS[0]]  # verified, complete: kept
        _copy(shared_data, tree, PARKINSONS[1:])
        rc, out, _ = _cli(capsys, "fetch", "parkinsons")
    assert rc == 0 and [ln.split("\t")[3] for ln in out.splitlines()] == ["present", "downloaded"]
    assert _files_under(cache) == [cache / rel for rel in PARKINSONS]

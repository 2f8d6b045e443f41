"""Writes never destroy what they should not, and never leave debris behind.

- Every writer declares what it writes (data, model, predictions). An
  existing destination is replaced only with ``overwrite`` and only when it
  is a dxrf group of the same kind (or an empty directory); another kind of
  group, a file, a user's directory or a symbolic link is refused even with
  ``overwrite``, and left exactly as it was.
- Two writers racing to one new destination: exactly one wins, the other
  gets :class:`DestinationExistsError`, and the published group is whole.
- A writer killed mid-write leaves a ``DEST.tmp-*`` sibling; the next write
  to ``DEST`` removes it, but never the temporary directory of a live writer.
- The command line says ``--overwrite`` and refuses before any pass.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr

import dxrf
import dxrf.io
from dxrf.io import files as _files
from dxrf.io.files import DestinationExistsError, DestinationNotWritableError, DestinationRefusedError
from dxrf.cli.commands import main
from dxrf.io.predictions import write_predictions

rng = np.random.default_rng(0)
X = rng.normal(size=(60, 3))
y = X[:, 0] - X[:, 1]
MODEL = dxrf.RandomFourierFeatures(8, bandwidth=1.0, random_state=0).fit(X)
ENV = {k: v for k, v in os.environ.items() if k not in ("DASK_SCHEDULER_ADDRESS", "DXRF_TRACEBACK")}


def tree_digest(path: Path) -> str:
    """A digest of everything at ``path`` (names, kinds and bytes), to show it was not touched."""
    h = hashlib.sha256()
    if path.is_symlink():
        h.update(b"link:" + os.readlink(path).encode())
    elif path.is_file():
        h.update(b"file:" + path.read_bytes())
    elif path.is_dir():
        for p in sorted(path.rglob("*")):
            h.update(str(p.relative_to(path)).encode())
            if p.is_file() and not p.is_symlink():
                h.update(p.read_bytes())
    return h.hexdigest()


def siblings(dest: Path) -> list[str]:
    return sorted(q.name for q in dest.parent.iterdir() if q.name.startswith(dest.name + "."))


# -- what is at the destination, and who writes there ------------------------------------------


def _data(dest: Path) -> None:
    dxrf.io.write_zarr(X, dest, y=y)


def _model(dest: Path) -> None:
    MODEL.save(dest)


def _predictions(dest: Path) -> None:
    write_predictions(da.from_array(y[:, None], chunks=(20, 1)), str(dest), attrs={"model": "m"}, overwrite=False)


def _file(dest: Path) -> None:
    dest.write_text("my thesis")


def _user_dir(dest: Path) -> None:
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")


def _plain_zarr(dest: Path) -> None:
    zarr.open_group(str(dest), mode="w", zarr_format=3).attrs["mine"] = True


def _symlink(dest: Path) -> None:
    target = dest.parent / "elsewhere.zarr"
    _data(target)
    dest.symlink_to(target)


EXISTING: dict[str, tuple[Callable[[Path], None], str | None]] = {
    # name: (make it, its kind: a writer of this kind may replace it)
    "data": (_data, "data"),
    "model": (_model, "model"),
    "predictions": (_predictions, "predictions"),
    "file": (_file, None),
    "user-dir": (_user_dir, None),
    "plain-zarr": (_plain_zarr, None),
    "symlink": (_symlink, None),
}
DESCRIPTION = {
    "data": "a dxrf data group", "model": "a dxrf model", "predictions": "dxrf predictions", "file": "a file",
    "user-dir": "a directory that is not a dxrf group", "plain-zarr": "a zarr group not written by dxrf",
    "symlink": "a symbolic link",
}


def _csv(tmp: Path) -> Path:
    while _files.group_kind(tmp) is not None:  # the source goes next to a group, never into it
        tmp = tmp.parent
    src = tmp / "src.csv"
    src.write_text("a,b,y\n" + "".join(f"{i},{i % 3},{i * 0.5}\n" for i in range(20)))
    return src


WRITERS: dict[str, tuple[str, Callable[[Path, bool], None]]] = {
    "write_zarr": ("data", lambda d, ow: dxrf.io.write_zarr(X[:10], d, overwrite=ow)),
    "ingest": ("data", lambda d, ow: dxrf.io.ingest(_csv(d.parent), d, target="y", overwrite=ow)),
    "save": ("model", lambda d, ow: MODEL.save(d, overwrite=ow)),
    "dxrf.save": ("model", lambda d, ow: dxrf.save(MODEL, d, overwrite=ow)),
    "predictions": ("predictions", lambda d, ow: write_predictions(da.zeros((10, 1), chunks=5), str(d), overwrite=ow)),
}
WRITES = {"data": "a data group", "model": "a model", "predictions": "predictions"}


@dataclasses.dataclass
class Case:
    existing: str
    writer: str
    overwrite: bool

    @property
    def id(self) -> str:
        return f"{self.writer}-over-{self.existing}-{'overwrite' if self.overwrite else 'keep'}"


CASES = [Case(e, w, ow) for e in EXISTING for w in WRITERS for ow in (False, True)]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_writer_replaces_only_its_own_kind_and_only_when_asked(case, tmp_path):
    dest = tmp_path / "dest.zarr"
    make, kind = EXISTING[case.existing]
    make(dest)
    before = tree_digest(dest)
    writes, write = WRITERS[case.writer]
    if kind == writes and case.overwrite:
        write(dest, True)
        assert _files.group_kind(dest) == writes
    elif kind == writes:
        with pytest.raises(DestinationExistsError, match="exists; pass overwrite=True to replace it") as info:
            write(dest, False)
        assert str(dest) in str(info.value) and DESCRIPTION[case.existing] in str(info.value)
        assert isinstance(info.value, ValueError) and isinstance(info.value, FileExistsError)
        assert tree_digest(dest) == before
    else:
        with pytest.raises(DestinationRefusedError) as info:
            write(dest, case.overwrite)
        msg = str(info.value)
        assert msg.startswith(f"refusing to overwrite {str(dest)!r}: it is {DESCRIPTION[case.existing]}"), msg
        assert f"this writes {WRITES[writes]}" in msg
        assert isinstance(info.value, ValueError)
        assert tree_digest(dest) == before
    assert siblings(dest) == []


@pytest.mark.parametrize("writer", list(WRITERS))
def test_an_empty_directory_is_replaced_only_with_overwrite(writer, tmp_path):
    dest = tmp_path / "dest.zarr"
    dest.mkdir()
    kind, write = WRITERS[writer]
    with pytest.raises(DestinationExistsError, match="an empty directory"):
        write(dest, False)
    write(dest, True)
    assert _files.group_kind(dest) == kind and siblings(dest) == []


def test_save_no_longer_replaces_by_default(tmp_path):
    MODEL.save(tmp_path / "m")
    other = dxrf.RandomFourierFeatures(8, bandwidth=1.0, random_state=1).fit(X)
    with pytest.raises(DestinationExistsError, match="pass overwrite=True"):
        other.save(tmp_path / "m")
    np.testing.assert_array_equal(dxrf.load(tmp_path / "m").kernel_.W, MODEL.kernel_.W)
    other.save(tmp_path / "m", overwrite=True)
    np.testing.assert_array_equal(dxrf.load(tmp_path / "m").kernel_.W, other.kernel_.W)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"overwrite": 1}, TypeError, "overwrite must be True or False"),
        ({"overwrite": "yes"}, TypeError, "overwrite must be True or False"),
        ({"kind": "table"}, ValueError, "kind must be one of"),
    ],
)
def test_atomic_directory_checks_its_arguments(kwargs, error, match, tmp_path):
    args = {"overwrite": False, "kind": "data", **kwargs}
    with pytest.raises(error, match=match), _files.atomic_directory(tmp_path / "d", args.pop("overwrite"), **args):
        pass
    assert list(tmp_path.iterdir()) == []


def test_missing_parent_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="parent directory of the destination does not exist"):
        MODEL.save(tmp_path / "no" / "such" / "m")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def unwritable(tmp_path):
    """A directory this process cannot create entries in: read-only mode, or (root) the immutable attribute."""
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    immutable = False
    if os.geteuid() == 0:  # root ignores the mode
        immutable = subprocess.run(["chattr", "+i", str(ro)], capture_output=True).returncode == 0
        if not immutable:
            pytest.skip("running as root on a file system without the immutable attribute")
    try:
        yield ro
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(ro)], check=True)
        os.chmod(ro, 0o755)


UNWRITABLE_WRITERS = [
    ("write_zarr", lambda d: dxrf.io.write_zarr(X, d)),
    ("ingest", lambda d: dxrf.io.ingest(_csv(d.parent.parent), d, target="y")),
    ("save", lambda d: MODEL.save(d)),
    ("predictions", lambda d: write_predictions(da.zeros((10, 1), chunks=5), str(d), overwrite=False)),
]


@pytest.mark.parametrize("write", [w[1] for w in UNWRITABLE_WRITERS], ids=[w[0] for w in UNWRITABLE_WRITERS])
def test_unwritable_destination_is_refused_up_front(write, unwritable):
    dest = unwritable / "out.zarr"
    with pytest.raises(DestinationNotWritableError) as info:
        write(dest)
    assert isinstance(info.value, PermissionError) and isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"cannot write {str(dest)!r}: its directory {str(unwritable)!r} is not writable")
    assert list(unwritable.iterdir()) == []


def test_cli_fit_to_an_unwritable_destination_fails_before_the_pass(unwritable, groups, capsys, monkeypatch):
    import dxrf.cluster

    monkeypatch.setattr(dxrf.cluster, "get_client", lambda *a, **k: pytest.fail("the pass started"))
    status, out, err = _cli(capsys, "fit", str(groups / "data.zarr"), "--out", str(unwritable / "m.zarr"))
    assert status == 2 and err.splitlines() == [
        f"dxrf: error: cannot write {str(unwritable / 'm.zarr')!r}: its directory {str(unwritable)!r} is not writable "
        "(Operation not permitted)" if os.geteuid() == 0 else
        f"dxrf: error: cannot write {str(unwritable / 'm.zarr')!r}: its directory {str(unwritable)!r} is not writable "
        "(Permission denied)"
    ], err


# -- the final rename checks again -----------------------------------------------------------


@pytest.mark.parametrize("how", ["threads", pytest.param("processes", marks=pytest.mark.slow)])
def test_two_writers_racing_one_wins_the_other_is_told(how, tmp_path, monkeypatch):
    dest = tmp_path / "race.zarr"
    if how == "threads":
        # both writers pass the first check and write their group, then publish at the same moment
        gate = threading.Barrier(2, timeout=30)
        publish = _files._publish_new

        def at_the_same_moment(tmp: Path, d: Path) -> None:
            gate.wait()
            publish(tmp, d)

        monkeypatch.setattr(_files, "_publish_new", at_the_same_moment)
        outcomes: dict[float, object] = {}

        def writer(value: float) -> None:
            try:
                dxrf.io.write_zarr(np.full((40, 3), value), dest)
                outcomes[value] = "ok"
            except Exception as exc:  # noqa: BLE001 - recorded and checked below
                outcomes[value] = exc

        threads = [threading.Thread(target=writer, args=(v,)) for v in (1.0, 2.0)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        results = list(outcomes.values())
    else:
        script = tmp_path / "racer.py"
        script.write_text(textwrap.dedent(
            """
            import sys, time
            import numpy as np, dxrf.io
            from dxrf.io import DestinationExistsError
            dest, value = sys.argv[1], float(sys.argv[2])
            X = np.full((40, 3), value)
            import os
            import dxrf.io.files as f
            publish = f._publish_new
            def when_both_are_ready(tmp, d):
                # both writers are past their first check: publish at the same moment
                open(f"{dest}-ready-{value}", "w").close()
                while len([n for n in os.listdir(os.path.dirname(dest)) if "-ready-" in n]) < 2:
                    time.sleep(0.001)
                return publish(tmp, d)
            f._publish_new = when_both_are_ready
            try:
                dxrf.io.write_zarr(X, dest)
                print("ok")
            except DestinationExistsError as exc:
                print("exists", exc)
            """
        ))
        procs = [subprocess.Popen([sys.executable, str(script), str(dest), str(v)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=ENV) for v in (1.0, 2.0)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert all(p.returncode == 0 for p in procs), [o[1][-1000:] for o in outs]
        results = [o[0].strip() for o in outs]
    assert sorted(r == "ok" for r in results) == [False, True], results
    (lost,) = [r for r in results if r != "ok"]
    if how == "processes":  # the loser printed its error
        assert lost.startswith(f"exists destination {str(dest)!r}") and "pass overwrite=True" in lost, lost
    else:
        assert isinstance(lost, DestinationExistsError) and "exists; pass overwrite=True" in str(lost)
    # whole: one writer's matrix, every row, and nothing else next to it
    Xw = dxrf.io.open_zarr(dest).X.compute()
    assert Xw.shape == (40, 3) and len(np.unique(Xw)) == 1 and Xw[0, 0] in (1.0, 2.0)
    assert siblings(dest) == []


def test_a_group_of_another_kind_appearing_during_an_overwrite_is_kept(tmp_path):
    """overwrite=True checks what is at dest right before replacing it, not only at the start."""
    dest = tmp_path / "d.zarr"
    started, go = threading.Event(), threading.Event()

    def block(b):
        started.set()
        assert go.wait(timeout=30)
        return b

    X_slow = da.from_array(X, chunks=(60, 3)).map_blocks(block, dtype=float, meta=np.empty((0, 0)))
    result: list = []

    def writer() -> None:
        try:
            dxrf.io.write_zarr(X_slow, dest, overwrite=True)
        except Exception as exc:  # noqa: BLE001
            result.append(exc)

    t = threading.Thread(target=writer)
    t.start()
    assert started.wait(timeout=30)
    MODEL.save(dest)  # someone saves a model there while the data is being written
    go.set()
    t.join(timeout=60)
    (exc,) = result
    assert isinstance(exc, DestinationRefusedError) and "it is a dxrf model, and this writes a data group" in str(exc)
    np.testing.assert_array_equal(dxrf.load(dest).kernel_.W, MODEL.kernel_.W)
    assert siblings(dest) == []


def test_what_was_swapped_out_is_checked_and_put_back(tmp_path, monkeypatch):
    """A user's directory put at dest between the last check and the exchange is swapped back, whole."""
    dest = tmp_path / "m"
    MODEL.save(dest)
    real = _files._exchange

    def sneaky(a: Path, b: Path) -> bool:
        if not (b / "notes.txt").exists():
            import shutil

            shutil.rmtree(b)
            _user_dir(b)
        return real(a, b)

    monkeypatch.setattr(_files, "_exchange", sneaky)
    with pytest.raises(DestinationRefusedError, match="it is a directory that is not a dxrf group"):
        MODEL.save(dest, overwrite=True)
    assert (dest / "notes.txt").read_text() == "keep me" and os.listdir(dest) == ["notes.txt"]
    assert siblings(dest) == []


# -- leftovers of killed writers --------------------------------------------------------------

_SLOW_WRITER = textwrap.dedent(
    """
    import sys, time
    import dask, dask.array as da, numpy as np
    import dxrf.io

    def block(b):
        print("writing", flush=True)
        time.sleep(600)
        return b

    X = da.ones((40, 3), chunks=(20, 3)).map_blocks(block, dtype=float, meta=np.empty((0, 0)))
    with dask.config.set(scheduler="synchronous"):
        dxrf.io.write_zarr(X, sys.argv[1], overwrite=True)
    """
)


def _start_slow_writer(tmp_path: Path, dest: Path) -> subprocess.Popen:
    script = tmp_path / "slow.py"
    script.write_text(_SLOW_WRITER)
    proc = subprocess.Popen([sys.executable, str(script), str(dest)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV)
    assert proc.stdout.readline().strip() == "writing", proc.stderr.read()
    return proc


def test_a_killed_writers_leftovers_are_removed_by_the_next_write(tmp_path):
    dest = tmp_path / "d.zarr"
    live = _start_slow_writer(tmp_path, dest)
    killed = _start_slow_writer(tmp_path, dest)
    try:
        (live_tmp,) = [n for n in siblings(dest) if f"-{live.pid}-" in n]
        (killed_tmp,) = [n for n in siblings(dest) if f"-{killed.pid}-" in n]
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=60)
        assert killed.returncode == -signal.SIGKILL
        assert sorted(siblings(dest)) == sorted([live_tmp, killed_tmp])
        dxrf.io.write_zarr(X, dest)
        # the dead writer's directory is gone, the live writer's is untouched
        assert siblings(dest) == [live_tmp]
        assert live.poll() is None
        np.testing.assert_array_equal(dxrf.io.open_zarr(dest).X.compute(), X.astype(np.float32))
    finally:
        live.kill()
        live.communicate(timeout=60)
    MODEL.save(tmp_path / "other")  # a write elsewhere leaves d.zarr's siblings alone
    assert siblings(dest) == [live_tmp]
    dxrf.io.write_zarr(X, dest, overwrite=True)
    assert siblings(dest) == []


def _name(dest: Path, *, host: str | None = None, boot: str | None = None, pid: int | None = None,
          start: int | None = None, which: str = "tmp") -> str:
    me = _files._owner_tag().split("-")
    return (f"{dest.name}.{which}-{host or me[0]}-{boot or me[1]}-{pid if pid is not None else me[2]}-"
            f"{start if start is not None else me[3]}-0123456789ab")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


STALE_CASES = [
    # id, name of a temporary sibling, removed by the next write?
    ("this-process", lambda d: _name(d), False),
    ("dead-process", lambda d: _name(d, pid=_dead_pid(), start=1), True),
    ("pid-reused", lambda d: _name(d, start=int(_files._owner_tag().split("-")[3]) + 7), True),
    ("other-boot", lambda d: _name(d, boot="ffffffff"), True),
    ("other-host", lambda d: _name(d, host="ffffffff", pid=_dead_pid()), False),
    ("old-copy-of-dead-writer", lambda d: _name(d, pid=_dead_pid(), which="old"), True),
    ("unknown-writer", lambda d: f"{d.name}.tmp-0123456789ab", False),
    ("not-ours", lambda d: f"{d.name}.backup", False),
]


@pytest.mark.parametrize("make,removed", [c[1:] for c in STALE_CASES], ids=[c[0] for c in STALE_CASES])
def test_only_siblings_of_gone_writers_are_removed(make, removed, tmp_path):
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc to tell processes apart")
    dest = tmp_path / "d.zarr"
    dxrf.io.write_zarr(X, dest)
    name = make(dest)
    (tmp_path / name).mkdir()
    (tmp_path / name / "chunk").write_bytes(b"x")
    dxrf.io.write_zarr(X, dest, overwrite=True)
    assert (tmp_path / name).exists() is not removed
    assert [n for n in siblings(dest) if n != name] == []


# -- the command line ------------------------------------------------------------------------


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    dxrf.io.write_zarr(X, root / "data.zarr", y=y)
    dxrf.io.write_zarr(X, root / "other_data.zarr", y=y)
    dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(8, random_state=0)).fit(X, y).save(
        root / "model.zarr", metadata={"columns": ["x0", "x1", "x2"], "classes": None}
    )
    (root / "src.csv").write_text("a,y\n1,2\n3,4\n")
    return root


CLI_CASES = [
    # id, arguments ({r} = the fixture's folder), pattern of the one error line
    ("fit-over-data", ["fit", "{r}/data.zarr", "--out", "{r}/other_data.zarr"],
     r"refusing to overwrite '.*other_data\.zarr': it is a dxrf data group, and this writes a model"),
    ("fit-over-data-overwrite", ["fit", "{r}/data.zarr", "--out", "{r}/other_data.zarr", "--overwrite"],
     r"refusing to overwrite '.*other_data\.zarr': it is a dxrf data group, and this writes a model"),
    ("fit-over-model", ["fit", "{r}/data.zarr", "--out", "{r}/model.zarr"],
     r"destination '.*model\.zarr' \(a dxrf model\) exists; pass --overwrite to replace it$"),
    ("fit-over-file", ["fit", "{r}/data.zarr", "--out", "{r}/src.csv", "--overwrite"],
     r"refusing to overwrite '.*src\.csv': it is a file"),
    ("fit-no-parent", ["fit", "{r}/data.zarr", "--out", "{r}/no/m.zarr"], "parent directory of the destination does not exist"),
    ("predict-over-data", ["predict", "{r}/model.zarr", "{r}/data.zarr", "--out", "{r}/data.zarr", "--overwrite"],
     r"refusing to overwrite '.*data\.zarr': it is a dxrf data group, and this writes predictions"),
    ("predict-over-model", ["predict", "{r}/model.zarr", "{r}/data.zarr", "--out", "{r}/model.zarr"],
     r"refusing to overwrite '.*model\.zarr': it is a dxrf model, and this writes predictions"),
    ("ingest-over-data", ["ingest", "{r}/src.csv", "{r}/data.zarr"],
     r"destination '.*data\.zarr' \(a dxrf data group\) exists; pass --overwrite to replace it$"),
    ("ingest-over-model", ["ingest", "{r}/src.csv", "{r}/model.zarr", "--overwrite"],
     r"refusing to overwrite '.*model\.zarr': it is a dxrf model, and this writes a data group"),
]


@pytest.mark.parametrize("args,match", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_refuses_destinations_in_one_line_before_any_pass(args, match, groups, capsys, monkeypatch):
    import re

    import dxrf.cluster

    def no_cluster(*a, **k):
        raise AssertionError("a cluster was started before the destination was checked")

    monkeypatch.setattr(dxrf.cluster, "get_client", no_cluster)
    before = {p.name: tree_digest(p) for p in groups.iterdir()}
    status, out, err = _cli(capsys, *[a.replace("{r}", str(groups)) for a in args])
    assert status == 2, (out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dxrf: error: "), err
    assert re.search(match, lines[0]), lines[0]
    assert {p.name: tree_digest(p) for p in groups.iterdir()} == before


def test_cli_fit_and_predict_overwrite_their_own_kind(groups, tmp_path, capsys, cluster2):
    out = tmp_path / "m.zarr"
    preds = tmp_path / "p.zarr"
    sched = ["--scheduler", cluster2.scheduler_address]
    fit = ["fit", str(groups / "data.zarr"), "--out", str(out), "--n-components", "8", "--bandwidth", "1", "--alpha", "0.01"]
    predict = ["predict", str(out), str(groups / "data.zarr"), "--out", str(preds)]
    for args in (fit, fit + ["--overwrite"], predict, predict + ["--overwrite"]):
        status, _, err = _cli(capsys, *args, *sched)
        assert status == 0, err
    status, _, err = _cli(capsys, *predict, *sched)
    assert status == 2 and err.splitlines() == [
        f"dxrf: error: destination {str(preds)!r} (dxrf predictions) exists; pass --overwrite to replace it"
    ]
    assert _files.group_kind(out) == "model" and _files.group_kind(preds) == "predictions"
    assert siblings(out) == [] and siblings(preds) == []


@pytest.mark.parametrize("args,status", [(["info", "{r}/data.zarr"], 1), (["fit", "--help"], 0)], ids=["info", "help"])
def test_cli_output_to_a_closed_pipe_is_quiet(groups, args, status):
    """``dxrf info DATA | head`` with the reader gone: no "Broken pipe" message, no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "dxrf.cli", *[a.replace("{r}", str(groups)) for a in args]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    proc.stdout.close()  # before the command writes anything: its first write fails with EPIPE
    _, err = proc.communicate(timeout=120)
    assert err.decode() == "" and proc.returncode == status, (proc.returncode, err.decode()[-2000:])


@pytest.mark.slow
def test_cli_lost_scheduler_is_one_line(groups, tmp_path):
    """Killing the scheduler mid-fit: dxrf's one error line, none of distributed's log records."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    rows = np.random.default_rng(1).random((200_000, 8))
    dxrf.io.write_zarr(rows, tmp_path / "big.zarr", y=rows[:, 0], chunk_rows=10_000)
    sched = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                              str(port), "--dashboard-address", ":0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=ENV)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        from distributed import Client

        with Client(address, timeout=60) as c:
            c.wait_for_workers(1, timeout=60)
        fit = subprocess.Popen([sys.executable, "-m", "dxrf.cli", "fit", str(tmp_path / "big.zarr"), "--out",
                                str(tmp_path / "m.zarr"), "--n-components", "3000", "--bandwidth", "1", "--alpha", "0.1",
                                "--scheduler", address], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        time.sleep(8)
        assert fit.poll() is None, "the fit ended before the scheduler was killed"
        sched.kill()
        _, err = fit.communicate(timeout=180)
    finally:
        for p in (sched, worker):
            p.kill()
            p.wait(timeout=60)
    assert fit.returncode == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dxrf: error: "), err[-3000:]
    assert not (tmp_path / "m.zarr").exists() and siblings(tmp_path / "m.zarr") == []


def test_benchmark_scratch_arrays_never_replace_a_users_files(tmp_path):
    """Benchmarks with --workdir write scratch arrays into the user's folder: only an earlier scratch array is replaced."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_common", Path(__file__).parents[2] / "workflows" / "_common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    X = da.ones((10, 2), chunks=5)
    common.store_zarr(X, tmp_path / "x.zarr")
    common.store_zarr(X, tmp_path / "x.zarr")  # its own scratch array: replaced
    for name, make in (("data.zarr", _data), ("mine", _user_dir), ("file", _file)):
        make(tmp_path / name)
        before = tree_digest(tmp_path / name)
        with pytest.raises(DestinationRefusedError, match=f"refusing to overwrite '.*{name}': it is"):
            common.store_zarr(X, tmp_path / name)
        assert tree_digest(tmp_path / name) == before


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("container", ["data", "model"])
def test_nothing_is_written_inside_a_dxrf_group(writer, container, tmp_path):
    group = tmp_path / "g.zarr"
    EXISTING[container][0](group)
    before = tree_digest(group)
    with pytest.raises(DestinationRefusedError, match=rf"refusing to write '.*g\.zarr/new\.zarr': it is inside {DESCRIPTION[container]}"):
        WRITERS[writer][1](group / "new.zarr", True)
    assert tree_digest(group) == before

"""Bad input fails fast: before any cluster starts, and without distributed's connect retries.

Times are measured in this process from the call, so the interpreter's
start-up (slow on a loaded machine) is not counted.
"""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest
from distributed import LocalCluster

import dxrf
import dxrf.cluster
from dxrf.cli.commands import main
from dxrf.cluster import get_client, probe_scheduler


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    try:
        return fn(*args, **kwargs), time.perf_counter() - t0
    except SystemExit as exc:
        return exc.code, time.perf_counter() - t0


@pytest.mark.parametrize("form", ["tcp://127.0.0.1:{p}", "127.0.0.1:{p}", "tcp://localhost:{p}", "tls://127.0.0.1:{p}"])
def test_refused_scheduler_fails_at_once(form):
    address = form.format(p=_closed_port())
    t0 = time.perf_counter()
    with pytest.raises(ConnectionError, match=r"cannot reach the scheduler at .*: connection refused"):
        probe_scheduler(address)
    if not address.startswith("tls"):  # tls without configured certificates is refused earlier, also at once
        with pytest.raises(ConnectionError, match="connection refused"):
            get_client(address, wait_for_workers=60)
    assert time.perf_counter() - t0 < 3


@pytest.mark.parametrize("address", ["tcp://127.0.0.1", "tcp://:8786", "tcp://127.0.0.1:notaport"])
def test_malformed_scheduler_address(address):
    with pytest.raises(ValueError, match="scheduler address"):
        probe_scheduler(address)


def test_cli_refused_scheduler_one_line_fast(tmp_path, capsys):
    code, seconds = _timed(main, ["fit", str(tmp_path / "d.zarr"), "--out", str(tmp_path / "m"),
                                  "--scheduler", f"tcp://127.0.0.1:{_closed_port()}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and seconds < 3, (seconds, err)
    # the data check runs first; either way one line


def test_listening_scheduler_without_workers_still_waits():
    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster:
        probe_scheduler(cluster.scheduler_address)  # it listens: no error
        t0 = time.perf_counter()
        with pytest.raises(TimeoutError, match="has no workers after waiting 1 s"):
            get_client(cluster.scheduler_address, wait_for_workers=1)
        assert 0.9 < time.perf_counter() - t0 < 10  # the wait the user asked for is kept


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("fast")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    (d / "train.csv").write_text("a,b,c,y\n" + "".join(f"{r[0]},{r[1]},{r[2]},{r[0] + r[1]}\n" for r in X))
    (d / "two.csv").write_text("a,b,y\n" + "".join(f"{r[0]},{r[1]},{r[0]}\n" for r in X[:20]))
    (d / "extra.csv").write_text("a,b,c,z,y\n" + "".join(f"{r[0]},{r[1]},{r[2]},1,{r[0]}\n" for r in X[:20]))
    for name in ("train", "two", "extra"):
        dxrf.io.ingest(d / f"{name}.csv", d / f"{name}.zarr", target="y")
    dxrf.io.ingest(d / "train.csv", d / "notarget.zarr", drop_columns=["y"])
    model = dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(n_components=8, bandwidth=1.0, random_state=0), alpha=1e-3)
    model.fit(X, X[:, 0] + X[:, 1])
    model.save(d / "m.model", metadata={"columns": ["a", "b", "c"], "classes": None})
    return d


CASES = [
    (["fit", "{d}/train.csv", "--out", "{d}/o1"], r"not a zarr v3 group .*'dxrf ingest .*train.csv DATA.zarr' first"),
    (["fit", "{d}/missing.zarr", "--out", "{d}/o2"], r"does not exist"),
    (["fit", "{d}/notarget.zarr", "--out", "{d}/o3"], r"has no target array y; ingest it with --target"),
    (["predict", "{d}/m.model", "{d}/train.csv", "--out", "{d}/p.csv"], r"'dxrf ingest .*' first"),
    (["predict", "{d}/m.model", "{d}/two.zarr", "--out", "{d}/p.csv"], r"1 missing: 'c'\); .*--levels-from"),
    (["predict", "{d}/m.model", "{d}/extra.zarr", "--out", "{d}/p.zarr"], r"1 extra: 'z'\); .*--levels-from"),
    (["predict", "{d}/train.zarr", "{d}/train.zarr", "--out", "{d}/p.csv"], r"not a dxrf model"),
    (["evaluate", "{d}/m.model", "{d}/two.zarr"], r"1 missing: 'c'"),
    (["evaluate", "{d}/m.model", "{d}/notarget.zarr"], r"has no target array y to evaluate against"),
    (["evaluate", "{d}/m.model", "{d}/train.csv"], r"'dxrf ingest .*' first"),
]


@pytest.mark.parametrize("argv,pattern", CASES)
def test_bad_inputs_refused_before_a_cluster(files, capsys, monkeypatch, argv, pattern):
    def no_cluster(*a, **k):
        raise AssertionError("a cluster was started for a bad input")

    monkeypatch.setattr(dxrf.cluster, "local_cluster", no_cluster)
    code, seconds = _timed(main, [a.format(d=files) for a in argv])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("dxrf: error:"), lines
    assert __import__("re").search(pattern, lines[0]), lines[0]
    assert seconds < 3, seconds
    assert not any(p.name.startswith(("o1", "o2", "o3", "p.")) for p in files.iterdir())

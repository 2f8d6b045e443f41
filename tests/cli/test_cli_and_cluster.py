"""The `dxrf` command (run as a real subprocess) and cluster attachment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import dxrf
import dxrf.io
from dxrf.cluster import default_worker_layout, get_client, scheduler_address


def run_dxrf(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "dxrf.cli", *args], capture_output=True, text=True, timeout=timeout, env=full_env
    )


@pytest.fixture(scope="module")
def cluster(cluster2):
    return cluster2


@pytest.fixture
def small_csv(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(500, 3)), columns=["a", "b", "c"])
    df["colour"] = rng.choice(["red", "green", "blue"], size=500)
    df["y"] = df["a"] * 2 + rng.normal(size=500)
    path = tmp_path / "small.csv.gz"
    df.to_csv(path, index=False)
    return path, df


def test_ingest_and_info_commands(small_csv, tmp_path):
    src, df = small_csv
    dest = tmp_path / "small.zarr"
    proc = run_dxrf("ingest", str(src), str(dest), "--target", "y", "--chunk-rows", "128")
    assert proc.returncode == 0, proc.stderr
    data = dxrf.io.open_zarr(dest)
    assert data.X.shape == (500, 6)  # 3 numeric + 3 one-hot levels
    assert data.X.chunks[0][0] == 128
    np.testing.assert_allclose(data.y.compute(), df["y"].to_numpy(np.float32))
    proc = run_dxrf("info", str(dest))
    assert proc.returncode == 0, proc.stderr
    assert "rows:     500" in proc.stdout
    assert "colour=blue" in proc.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["ingest", "/nonexistent/file.csv", "OUT.zarr"], "file.csv"),
        (["info", "/nonexistent/data.zarr"], "data.zarr"),
        (["ingest", "{csv}", "{dest}", "--target", "no_such_column"], "no_such_column"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(small_csv, tmp_path, args, needle):
    src, _ = small_csv
    dest = tmp_path / "bad.zarr"
    args = [a.format(csv=src, dest=dest) for a in args]
    proc = run_dxrf(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dxrf: error:"), proc.stderr
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr
    assert not dest.exists()


def test_scheduler_option_is_accepted_before_and_after_the_command(cluster, tmp_path):
    from dxrf.cli.commands import build_parser

    parser = build_parser()
    a = parser.parse_args(["--scheduler", "tcp://x:1", "info", "p"])
    b = parser.parse_args(["info", "p", "--scheduler", "tcp://x:1"])
    c = parser.parse_args(["info", "p"])
    assert a.scheduler == b.scheduler == "tcp://x:1"
    assert getattr(c, "scheduler", None) is None


def test_quickstart_runs_on_a_given_scheduler(cluster, tmp_path):
    out = tmp_path / "qs"
    proc = run_dxrf(
        "reproduce", "quickstart", "--scheduler", cluster.scheduler_address,
        "--n-rows", "3000", "--seeds", "1", "--m", "10", "20", "--out", str(out),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((out / "quickstart.json").read_text())
    assert results["passes"] == 2
    for method, by_m in results["test_mse"].items():
        for errs in by_m.values():
            # scaled response in [-1, 1]: a useful model beats predicting the mean (MSE ~ 0.2 here)
            assert 0.0 < errs[0] < 0.5, (method, errs)
    assert "ELSS-1 (sample)" in proc.stdout


# -- cluster ----------------------------------------------------------------------


def test_get_client_attaches_to_an_address_and_to_the_environment(cluster, monkeypatch):
    with get_client(cluster.scheduler_address) as client:
        assert client.scheduler.address == cluster.scheduler_address
        assert len(client.scheduler_info()["workers"]) == 2
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cluster.scheduler_address)
    assert scheduler_address() == cluster.scheduler_address
    with get_client() as client:
        assert client.scheduler.address == cluster.scheduler_address
        X = np.random.default_rng(0).normal(size=(1000, 4))
        import dask.array as da

        stats = dxrf.accumulate(da.from_array(X, chunks=(250, 4)), features=dxrf.RandomFourierFeatures(20, random_state=0))
        assert stats.n == 1000


def test_embedded_cluster_uses_memory_limited_worker_processes(monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    n_workers, per_worker = default_worker_layout()
    with get_client(n_workers=1) as client:
        info = client.scheduler_info()["workers"]
        assert len(info) == 1
        (worker,) = info.values()
        assert worker["nthreads"] == 1
        assert worker["memory_limit"] == per_worker
        # a real process, not a thread of this one
        pids = client.run(os.getpid)
        assert os.getpid() not in pids.values()
        # no statistical profiler sampling the workers' threads, unless asked for
        assert client.run(_worker_profiles) == {w: False for w in info}
        # quieter event loops: a tick a second, work stealing every 500 ms
        assert set(client.run(_tick_ms).values()) == {1000}
        assert client.run_on_scheduler(_stealing_ms) == 500


def _tick_ms(dask_worker) -> float:
    return dask_worker.periodic_callbacks["tick"].callback_time


def _stealing_ms(dask_scheduler) -> float:
    return dask_scheduler.extensions["stealing"]._callback_time * 1000


def _worker_profiles(dask_worker) -> bool:
    return "profile" in dask_worker.periodic_callbacks


def test_embedded_cluster_profiler_can_be_turned_on(monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with get_client(n_workers=1, worker_profile=True) as client:
        assert set(client.run(_worker_profiles).values()) == {True}


def test_small_numpy_use_needs_no_cluster():
    X = np.random.default_rng(0).normal(size=(200, 3))
    stats = dxrf.accumulate(X, X[:, 0], dxrf.RandomFourierFeatures(10, random_state=0))
    assert stats.n == 200 and stats.cross.shape == (10, 1)

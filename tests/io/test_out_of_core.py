"""Out of core: data three times larger than a worker's memory limit.

A NumPy file three times a worker's memory limit is ingested to zarr by a
separate process whose peak memory is measured, then one statistics pass runs
over the zarr data on a LocalCluster of memory-limited worker processes. No
worker may be restarted or paused, and each worker's peak resident memory
(``ru_maxrss`` since it started) must stay under its limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from distributed import Client

import dxrf
import dxrf.io
from dxrf.cluster import local_cluster

WORKER_LIMIT = 512 * 2**20
D = 32
ROWS = 3 * WORKER_LIMIT // (4 * D) + 1  # float32 payload = 3 x the limit
CHUNK = 100_000


def _peak_rss() -> int:
    """Peak resident memory of this process (VmHWM) in bytes.

    Not ``ru_maxrss``: Linux carries that over ``exec`` from the parent, so a
    worker spawned by a large test process would report its parent's peak.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmHWM not found")


def _reset_peak_rss() -> None:
    # writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _worker_state(dask_worker) -> dict:
    import os

    return {"pid": os.getpid(), "status": str(dask_worker.status), "peak": _peak_rss()}


@pytest.fixture(scope="module")
def big_npy(tmp_path_factory):
    path = tmp_path_factory.mktemp("ooc") / "big.npy"
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(ROWS, D))
    rng = np.random.default_rng(0)
    for lo in range(0, ROWS, 1_000_000):
        hi = min(lo + 1_000_000, ROWS)
        out[lo:hi] = rng.standard_normal((hi - lo, D), dtype=np.float32)
    out.flush()
    del out
    assert path.stat().st_size > 3 * WORKER_LIMIT
    return path


def test_ingest_and_pass_larger_than_worker_memory(big_npy, tmp_path):
    dest = tmp_path / "big.zarr"
    script = textwrap.dedent(
        f"""
        import json
        import dxrf.io
        rep = dxrf.io.ingest({str(big_npy)!r}, {str(dest)!r}, chunk_rows={CHUNK})
        status = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
        print(json.dumps({{"rows": rep.n_rows, "peak": int(status) * 1024}}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=True)
    ingest = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ingest["rows"] == ROWS
    file_size = big_npy.stat().st_size
    # streaming: the ingesting process never holds the file (imports alone take ~200 MB)
    assert ingest["peak"] < file_size / 2, (ingest["peak"], file_size)

    data = dxrf.io.open_zarr(dest)
    X = data.X
    assert X.shape == (ROWS, D) and X.chunks[0][0] == CHUNK
    fmap = dxrf.RandomFourierFeatures(64, bandwidth=float(np.sqrt(D)), random_state=0).fit(np.zeros((1, D)))
    with local_cluster(2, memory_limit=WORKER_LIMIT) as cluster, Client(cluster) as client:
        client.run(_reset_peak_rss)
        before = client.run(_worker_state)
        stats = dxrf.accumulate(X, features=fmap)
        after = client.run(_worker_state)
    assert stats.n == ROWS
    assert sorted(before) == sorted(after), "a worker was lost or restarted"
    for addr, state in after.items():
        assert state["pid"] == before[addr]["pid"]
        assert "running" in state["status"], state["status"]
        assert state["peak"] < WORKER_LIMIT, f"worker {addr} peaked at {state['peak'] / 2**20:.0f} MiB"
    # the result is right: compare a slice's statistics with an in-memory pass over the same rows
    head = np.asarray(X[:50_000].compute())
    ref = dxrf.accumulate(head, features=fmap)
    part = dxrf.accumulate(X[:50_000], features=fmap)
    np.testing.assert_allclose(part.gram, ref.gram, rtol=1e-6, atol=1e-6)
    assert abs(np.trace(stats.normalized_gram()) - 1.0) < 0.1  # 1 + O(1/sqrt(M)) for Fourier features

"""A command that fails after its local cluster started: one line on stderr, nothing from the cluster's shutdown.

The workers of an embedded cluster write to the command's stderr: a failed
task's traceback, and a heartbeat that meets the scheduler closing
(``CommClosedError``). The command quiets its workers as it quiets itself;
the client's close mutes the records of connections closed by the shutdown,
here and in the workers, and only those, only then.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from distributed.comm.core import CommClosedError

import dxrf.io
from dxrf.cluster import _closed_comms_muted


def _flip_a_byte(path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture
def damaged_group(tmp_path):
    """A data group whose y chunk 5 of 8 was changed on disk: it fails its checksum inside the pass's tasks."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 4))
    path = tmp_path / "damaged.zarr"
    dxrf.io.write_zarr(X, path, y=X[:, 0] + 0.1 * rng.normal(size=2000), chunk_rows=250)
    _flip_a_byte(path / "y" / "c" / "5")
    return path


def test_a_failure_after_the_cluster_started_is_one_line(damaged_group, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DASK_SCHEDULER_ADDRESS", "DXRF_TRACEBACK")}
    # the heartbeat race was seen once: three commands at a time, each shutting its cluster down on a busy machine
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "dxrf.cli", "fit", str(damaged_group), "--out", str(tmp_path / f"m{i}.zarr"),
             "--n-components", "20"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for i in range(3)
    ]
    try:
        errs = [proc.communicate(timeout=120)[1] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for i, (proc, err) in enumerate(zip(procs, errs)):
        lines = err.splitlines()
        assert proc.returncode == 2, err
        assert len(lines) == 1 and lines[0].startswith("dxrf: error: "), err
        assert "cannot read rows 1250:1500 (chunk 5)" in lines[0]
        assert "Traceback" not in err and "CommClosedError" not in err
        assert not (tmp_path / f"m{i}.zarr").exists()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _heartbeat_failure(logger: logging.Logger) -> None:
    try:
        raise CommClosedError("in <TCP (closed) ConnectionPool.heartbeat_worker local=tcp://127.0.0.1:1>: Stream is closed")
    except CommClosedError:
        logger.exception("Failed to communicate with scheduler during heartbeat.")


def test_closed_connections_are_muted_during_the_shutdown_only():
    logger = logging.getLogger("distributed.worker")
    records = _Records()  # where distributed's records of every child logger arrive
    logging.getLogger("distributed").addHandler(records)
    try:
        _heartbeat_failure(logger)
        with _closed_comms_muted(None):
            _heartbeat_failure(logger)
            logging.getLogger("distributed.core").warning("Lost connection to 'tcp://127.0.0.1:1': CommClosedError")
            logger.warning("Async instruction for <Task cancelled> ended with CancelledError")
            logger.error("Compute Failed: ValueError")  # anything else still shows
        _heartbeat_failure(logger)
        logging.getLogger("distributed.core").warning("Lost connection to 'tcp://127.0.0.1:1': CommClosedError")
    finally:
        logging.getLogger("distributed").removeHandler(records)
    heartbeat = "Failed to communicate with scheduler during heartbeat."
    lost = "Lost connection to 'tcp://127.0.0.1:1': CommClosedError"
    assert records.messages == [heartbeat, "Compute Failed: ValueError", heartbeat, lost]


_WORKERS = textwrap.dedent("""
    import logging, sys
    from distributed.comm.core import CommClosedError
    from dxrf.cluster import _closed_comms_muted, get_client

    def heartbeat():
        try:
            raise CommClosedError("Stream is closed")
        except CommClosedError:
            logging.getLogger("distributed.worker").exception("heartbeat %s", sys.argv[1])

    def other():
        logging.getLogger("distributed.worker").error("other %s", sys.argv[1])

    if __name__ == "__main__":
        client = get_client(n_workers=1)
        client.run(heartbeat)  # before the shutdown: shown
        with _closed_comms_muted(client):  # what the client's close does first
            client.run(heartbeat)
            client.run(other)
        client.close()
""")


def test_the_workers_mute_closed_connections_once_the_shutdown_begins(tmp_path):
    script = tmp_path / "workers.py"
    script.write_text(_WORKERS)
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    proc = subprocess.run([sys.executable, str(script), "marker"], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # the worker's records reach this stderr: the one before the shutdown and the unrelated one, nothing else
    assert proc.stderr.count("heartbeat marker") == 1 and proc.stderr.count("other marker") == 1, proc.stderr
    assert proc.stderr.count("CommClosedError") == 1, proc.stderr

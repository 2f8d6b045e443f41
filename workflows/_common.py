"""Helpers shared by workflows: timing, tables and result files."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

WORKFLOWS_EXTRA = 'pip install "dxrf[workflows]"'
"""How to install what only the workflows use (dask-ml, matplotlib): the ``workflows`` extra."""


def median_time(
    fn: Callable[[], Any], repeats: int, setup: Callable[[], Any] | None = None
) -> tuple[float, list[float], Any]:
    """Run ``fn`` ``repeats`` times; return the median seconds, all times and the last result.

    ``setup`` runs before each repeat, outside the timing.
    """
    times = []
    result = None
    for _ in range(repeats):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, result


def run_python(code: str, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` in a fresh Python process and return the JSON object its last stdout line prints.

    A failure raises RuntimeError whose first line names the exit status and the
    child's last line of stderr (the CLI shows that line; a negative status is
    the signal that killed it, -9 for the kernel's out-of-memory killer), with
    the tail of its stderr below.
    """
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env=dict(os.environ) if env is None else env)
    if proc.returncode != 0:
        said = [line for line in proc.stderr.splitlines() if line.strip()]
        raise RuntimeError(f"benchmark subprocess failed with exit status {proc.returncode}: "
                           f"{said[-1] if said else '(nothing on stderr)'}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table with right-aligned numbers."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[fmt(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = lambda vals: "| " + " | ".join(v.rjust(w) for v, w in zip(vals, widths)) + " |"  # noqa: E731
    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells]
    return "\n".join(out)


def write_results(out_dir: str | Path, name: str, results: dict, markdown: str | None = None) -> Path:
    """Write ``results`` as JSON (and an optional markdown table) under ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, default=float))
    tmp.replace(path)
    if markdown is not None:
        (out / f"{name}.md").write_text(markdown + "\n")
    return path


def require(module: str, package: str, purpose: str) -> Any:
    """Import ``module`` of the ``workflows`` extra, or stop with one line naming the extra.

    Parameters
    ----------
    module : str
        What to import, e.g. ``"dask_ml.linear_model"``.
    package : str
        The distribution that provides it, e.g. ``"dask-ml"``.
    purpose : str
        What needs it, the start of the one-line message, e.g. ``"bench logistic compares against dask-ml"``.

    Returns
    -------
    types.ModuleType
        The imported module.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        from dxrf.cli import CommandError

        raise CommandError(f"{purpose}, but {package} is not installed: {WORKFLOWS_EXTRA}") from None


def add_zarr_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the benchmarks that write random rows to zarr and read them back on their own workers."""
    parser.add_argument("--n-features", type=int, default=90, help="input columns d (default 90)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes, one thread each (default 2)")
    parser.add_argument("--chunk-rows", type=int, default=50_000, help="rows per zarr chunk (default 50000)")
    parser.add_argument(
        "--warm", action="store_true", help="read zarr from the page cache (default: drop the cache before each pass)"
    )
    parser.add_argument("--workdir", default=None, help="where to write the zarr data (default: a temp dir, removed)")
    parser.add_argument("--out", default="results", help="results folder")


def bench_workdir(args: argparse.Namespace, prefix: str = "dxrf-bench-") -> Path:
    """The folder of ``--workdir``, else a new temporary one; :func:`remove_workdir` removes only the latter."""
    return Path(args.workdir or tempfile.mkdtemp(prefix=prefix))


def remove_workdir(args: argparse.Namespace, workdir: Path) -> None:
    """Remove the folder of :func:`bench_workdir` unless it is the user's ``--workdir``."""
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


def random_rows(n_rows: int, n_features: int, chunk_rows: int) -> Any:
    """Lazy standard-normal float32 rows (seed 0) in chunks of whole rows: each task draws one chunk."""
    import dask.array as da
    import numpy as np

    return da.random.default_rng(0).standard_normal((n_rows, n_features), chunks=(chunk_rows, n_features),
                                                   dtype=np.float32)


def store_zarr(X: Any, path: str | Path) -> float:
    """Write the dask array ``X`` to a zarr array at ``path``, task by task; return the seconds it took.

    With dxrf's codec (what ``dxrf ingest`` writes), not zarr's default zstd,
    which is 3x slower to decode.
    """
    import dask.array as da

    from dxrf.io import DestinationRefusedError, default_compressor, describe

    path = Path(path)
    # with --workdir the folder is the user's: replace only a scratch array of an earlier run
    if path.exists() or path.is_symlink():
        meta = path / "zarr.json"
        is_array = path.is_dir() and not path.is_symlink() and meta.is_file() and '"node_type": "array"' in meta.read_text()
        if not is_array:
            raise DestinationRefusedError(
                f"refusing to overwrite {str(path)!r}: it is {describe(path)}, and the benchmark writes a "
                f"scratch zarr array there; choose another --workdir"
            )
    t0 = time.perf_counter()
    da.to_zarr(X, str(path), overwrite=True, compressors=default_compressor())
    return time.perf_counter() - t0


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server_process(argv: Sequence[str], port: int, env: dict[str, str] | None = None,
                   timeout: float = 30.0) -> Iterator[str]:
    """Run ``argv``, a server that listens on 127.0.0.1:``port``; yield ``http://127.0.0.1:port``, then stop it.

    ``env`` adds environment variables. Raises ``RuntimeError`` when the server
    exits or does not accept connections within ``timeout`` seconds.
    """
    import os
    import socket
    import subprocess

    proc = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server {list(argv)} did not start (exit status {proc.poll()})") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=30)


def moto_server(env: dict[str, str] | None = None) -> contextlib.AbstractContextManager[str]:
    """A moto S3 server process on a free port of 127.0.0.1 (see :func:`server_process`): its endpoint URL.

    moto's server mode comes with the ``test`` extra (``moto[server]``). ``env``
    adds environment variables of the server (e.g. ``INITIAL_NO_AUTH_ACTION_COUNT``).
    """
    import sys

    port = free_port()
    return server_process([sys.executable, "-m", "moto.server", "-p", str(port), "-H", "127.0.0.1"], port, env)


def report(out_dir: str | Path, name: str, results: dict, markdown: str) -> dict:
    """Print a benchmark's markdown, write it with ``results`` (:func:`write_results`) and return ``results``."""
    print(markdown)
    write_results(out_dir, name, results, markdown)
    return results


def drop_page_cache() -> bool:
    """Ask Linux to drop the page cache (needs root); True when it worked."""
    import os

    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


# -- worker memory and memory incidents ----------------------------------------------
#
# Peak memory is read from /proc (Linux): VmHWM, reset by writing "5" to
# /proc/self/clear_refs (Linux >= 4.0). Not ``ru_maxrss``: Linux carries it over
# ``exec`` from the parent, so a worker spawned by a large process would report
# its parent's peak.

# substrings of the worker and nanny log lines written when distributed pauses,
# kills or restarts a worker (distributed.worker_memory, distributed.nanny)
_INCIDENT_PATTERNS = ("Pausing worker", "memory budget", "Restarting", "killed by", "exited with status")


def _proc_status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not found in /proc/self/status")


def peak_rss() -> int:
    """Peak resident memory (VmHWM) of this process in bytes, since start or the last reset."""
    return _proc_status_bytes("VmHWM")


def reset_peak_rss() -> bool:
    """Reset this process's peak resident memory to its current value; True when it worked."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _worker_memory_state(dask_worker: Any) -> dict:
    """What :func:`worker_memory` reports, computed on one worker (for ``client.run``)."""
    import os

    spilled = getattr(dask_worker.data, "spilled_total", None)  # a SpillBuffer when spilling is enabled
    return {
        "pid": os.getpid(),
        "status": getattr(dask_worker.status, "name", str(dask_worker.status)),
        "rss": _proc_status_bytes("VmRSS"),
        "peak_rss": peak_rss(),
        "memory_limit": dask_worker.memory_manager.memory_limit,
        "spilled_bytes": int(spilled.disk) if spilled is not None else 0,
    }


def worker_memory(client: Any, *, reset: bool = False) -> dict[str, dict]:
    """Memory state of every worker of ``client``'s cluster.

    Parameters
    ----------
    client : distributed.Client
    reset : bool, default False
        First reset each worker's peak RSS to its current RSS, so that a
        later call reports the peak of what ran in between.

    Returns
    -------
    dict
        Address of each reachable worker → ``pid``, ``status`` (``running``, ``paused``, ...),
        ``rss`` and ``peak_rss`` in bytes, ``memory_limit`` (bytes or None)
        and ``spilled_bytes`` (bytes written to disk by spilling so far).
    """
    # a worker that died or is restarting is left out rather than failing the call
    if reset:
        client.run(reset_peak_rss, on_error="ignore")
    return client.run(_worker_memory_state, on_error="ignore")


def memory_log_lines(client: Any) -> dict[str, list[str]]:
    """Lines of the workers' and nannies' logs about pausing, killing or restarting a worker.

    Keys are ``"worker <address>"`` and ``"nanny <address>"``; lines are newest
    first, as distributed returns them. Pass a snapshot taken earlier to
    :func:`memory_incidents` to keep only lines written since.
    """
    out: dict[str, list[str]] = {}
    for kind, nanny in (("worker", False), ("nanny", True)):
        try:
            logs = client.get_worker_logs(nanny=nanny)
        except Exception:  # e.g. workers without a nanny
            continue
        for addr, lines in logs.items():
            out[f"{kind} {addr}"] = [msg for _, msg in lines if any(p in msg for p in _INCIDENT_PATTERNS)]
    return out


def memory_incidents(
    client: Any, since: float, logs_before: dict[str, list[str]] | None = None, max_lines: int = 20
) -> dict:
    """Workers paused, removed or restarted for memory since the time ``since``.

    Reads the scheduler's event log (``worker-status-change`` to ``paused``,
    ``remove-worker``, the nanny's ``worker-restart-memory``) and the workers'
    and nannies' logs (:func:`memory_log_lines`).

    Parameters
    ----------
    client : distributed.Client
    since : float
        ``time.time()`` at the start of the period; scheduler events are
        stamped with the scheduler's clock (the same on a local cluster).
    logs_before : dict, optional
        A :func:`memory_log_lines` snapshot from the start of the period.
    max_lines : int, default 20
        How many of the new log lines to return.

    Returns
    -------
    dict
        Counts ``pauses``, ``workers_removed``, ``memory_restarts`` (events),
        ``pause_log_lines`` and ``kill_log_lines`` (new log lines), and
        ``log_lines``: the newest of those lines, at most ``max_lines``.
    """
    pauses = removed = restarts = 0
    for topic, events in client.get_events().items():
        for stamp, msg in events:
            if stamp < since or not isinstance(msg, dict):
                continue
            action = msg.get("action")
            if action == "worker-status-change" and msg.get("status") == "paused":
                pauses += 1
            elif action == "remove-worker" and topic == "all":
                removed += 1
            elif topic == "worker-restart-memory":
                restarts += 1
    before = logs_before or {}
    new_lines = []
    for key, lines in memory_log_lines(client).items():
        fresh = len(lines) - len(before.get(key, []))
        new_lines += [f"{key}: {line}" for line in lines[: max(fresh, 0)]]
    n_pause = sum("Pausing worker" in line for line in new_lines)
    return {
        "pauses": pauses,
        "workers_removed": removed,
        "memory_restarts": restarts,
        "pause_log_lines": n_pause,
        "kill_log_lines": len(new_lines) - n_pause,
        "log_lines": new_lines[:max_lines],
    }


def bench_client(args: Any, workers: int, **cluster_options: Any) -> tuple[Any, Any]:
    """``(cluster, client)`` for a benchmark: the scheduler of ``--scheduler`` (or
    ``$DASK_SCHEDULER_ADDRESS``) with ``cluster=None``, else a new LocalCluster of
    ``workers`` single-threaded processes (:func:`dxrf.cluster.local_cluster`).
    Release both with :func:`close_client`.
    """
    from distributed import Client

    from dxrf.cluster import local_cluster, scheduler_address

    address = scheduler_address(getattr(args, "scheduler", None))
    if address:
        return None, Client(address)
    cluster = local_cluster(workers, **{"dashboard_address": None, **cluster_options})
    return cluster, Client(cluster)


def close_client(cluster: Any, client: Any) -> None:
    """Close what :func:`bench_client` opened."""
    client.close()
    if cluster is not None:
        cluster.close()


def bench_args(module: Any, argv: Sequence[str] = (), **overrides: Any) -> argparse.Namespace:
    """The arguments ``dxrf bench NAME argv...`` gives ``module.run``, with ``overrides`` set.

    For running a benchmark from Python (tests, notebooks) exactly as the command would.
    """
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    args = parser.parse_args(list(argv))
    for name, value in overrides.items():
        if not hasattr(args, name):
            raise AttributeError(f"{module.__name__} has no argument {name!r}")
        setattr(args, name, value)
    return args

"""Attach to a Dask cluster, or start an embedded one sized to this machine."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import numbers
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import distributed

__all__ = [
    "get_client", "local_cluster", "scheduler_address", "default_worker_layout", "local_worker_config", "quiet_logs",
    "quiet_worker_logs",
]

ENV_ADDRESS = "DASK_SCHEDULER_ADDRESS"
ENV_WAIT = "DXRF_WAIT_FOR_WORKERS"
#: seconds a client attached to a scheduler waits for its first worker by default
DEFAULT_WAIT_FOR_WORKERS = 60.0


def wait_for_workers_seconds(wait: float | str | None = None) -> float:
    """The wait for a remote scheduler's first worker: ``wait``, else ``$DXRF_WAIT_FOR_WORKERS``, else 60 s.

    Raises ``ValueError`` naming the setting for anything but a finite number
    of seconds >= 0.
    """
    source = "wait_for_workers (--wait-for-workers)"
    if wait is None:
        wait = os.environ.get(ENV_WAIT) or None
        source = f"${ENV_WAIT}"
    if wait is None:
        return DEFAULT_WAIT_FOR_WORKERS
    try:
        if isinstance(wait, bool):
            raise TypeError
        seconds = float(wait)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{source} must be a number of seconds >= 0, got {wait!r}")
    return seconds


def _wait_for_workers(client: distributed.Client, address: str, wait: float) -> None:
    """Return once the scheduler has a worker; else close the client and raise ``TimeoutError``.

    Without this a pass on a scheduler that has no workers waits forever.
    """
    try:
        if wait > 0:
            client.wait_for_workers(1, timeout=wait)
        elif not client.scheduler_info().get("workers"):
            raise TimeoutError
    except (TimeoutError, asyncio.TimeoutError):
        client.close()
        raise TimeoutError(
            f"the scheduler at {address} has no workers after waiting {wait:g} s: start workers with "
            f"'dask worker {address}' (or check that they can reach it), or wait longer with "
            f"--wait-for-workers SECONDS / ${ENV_WAIT}"
        ) from None


#: seconds a first TCP connection to a scheduler may take before it is reported unreachable
PROBE_SECONDS = 3.0


def probe_scheduler(address: str, timeout: float = PROBE_SECONDS) -> None:
    """Fail at once, with ``ConnectionError``, when nothing listens at a scheduler's address.

    distributed retries a refused connection until its connect timeout (30 s
    by default) before failing; one plain TCP connection answers in
    milliseconds. Only ``tcp://`` and ``tls://`` addresses are probed, and a
    scheduler that answers but has no workers is still waited for
    (``wait_for_workers``).
    """
    import socket
    from urllib.parse import urlsplit

    scheme, sep, _ = address.partition("://")
    if sep and scheme not in ("tcp", "tls"):
        return
    try:
        parts = urlsplit(address if sep else f"tcp://{address}")
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ValueError(f"scheduler address {address!r} is malformed: {exc}") from None
    if not host or port is None:
        raise ValueError(f"scheduler address {address!r} needs a host and a port, e.g. tcp://host:8786")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except socket.timeout:
        raise ConnectionError(f"cannot reach the scheduler at {address}: no answer within {timeout:g} s") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConnectionError(
            f"cannot reach the scheduler at {address}: {reason.lower()}; is a scheduler running there "
            f"('dask scheduler'), and is the address right?"
        ) from None


def scheduler_address(address: str | None = None) -> str | None:
    """The scheduler to attach to: ``address``, else ``$DASK_SCHEDULER_ADDRESS``, else None."""
    if address:
        return address
    return os.environ.get(ENV_ADDRESS) or None


def default_worker_layout(memory_fraction: float = 0.8) -> tuple[int, int]:
    """Workers and memory per worker (bytes) for an embedded cluster.

    One single-threaded worker process per core: the pass's tasks are BLAS-3
    bound, so processes (no GIL contention) with one BLAS thread each use the
    cores best. Together the workers get ``memory_fraction`` of physical memory.
    """
    from distributed.system import MEMORY_LIMIT

    n_workers = max(1, os.cpu_count() or 1)
    return n_workers, int(MEMORY_LIMIT * memory_fraction / n_workers)


def local_worker_config(worker_profile: bool = False) -> dict:
    """Dask configuration for the workers of a cluster dxrf starts itself.

    :func:`local_cluster` sets it around the creation of its ``LocalCluster``
    (``with dask.config.set(local_worker_config()):``): worker processes take
    their configuration when they start.

    Parameters
    ----------
    worker_profile : bool, default False
        Keep distributed's statistical profiler in the workers (it feeds the
        dashboard's Profile page). It samples every worker thread's stack
        every 10 ms; on a 2-core machine that cost 2% of a statistics pass
        (chunk tasks 2.33 s against 2.37 s, N = 4e5, M0 = 2000). The task
        stream, progress and memory pages do not need it.

    The event loops' tick (a check that they are not blocked) runs every
    second rather than every 20 ms, and work stealing balances every 500 ms
    rather than every 100 ms: a pass's lanes are planned (see
    :func:`dxrf.engine.lanes.lane_plan`). On a 2-core machine the client's
    process, which holds the scheduler, then used 0.55 s of CPU during a
    19 s statistics pass rather than 0.95 s (N = 10⁶, M0 = 2000).
    """
    return {
        "distributed.worker.profile.enabled": bool(worker_profile),
        "distributed.admin.tick.interval": "1s",
        "distributed.scheduler.work-stealing-interval": "500ms",
    }


def get_client(
    address: str | None = None,
    *,
    n_workers: int | None = None,
    memory_limit: int | str | None = None,
    dashboard_address: str = ":0",
    security: object = None,
    worker_profile: bool = False,
    wait_for_workers: float | None = None,
):
    """A ``distributed.Client`` on a remote scheduler or an embedded local cluster.

    Parameters
    ----------
    address : str, optional
        Scheduler address (``tcp://host:8786``, ``tls://...``). Defaults to
        ``$DASK_SCHEDULER_ADDRESS``; when neither is set a ``LocalCluster`` of
        worker processes is started and owned by the client (closing the
        client closes it).
    n_workers : int, optional
        Embedded cluster only: number of single-threaded worker processes
        (default: one per core).
    memory_limit : int or str, optional
        Embedded cluster only: memory limit of each worker (default: 80% of
        the machine's memory shared among the workers). Workers spill to disk
        beyond Dask's thresholds instead of dying.
    dashboard_address : str, default ":0"
        Embedded cluster only: where to serve the dashboard (``":0"`` picks a
        free port, ``":8787"`` is Dask's usual one). ``client.dashboard_link``
        gives the URL.
    security : distributed.Security, optional
        TLS settings; by default taken from Dask's configuration
        (``distributed.comm.tls.*``), so ``tls://`` addresses work when the
        certificates are configured there.
    worker_profile : bool, default False
        Embedded cluster only: run distributed's statistical profiler in the
        workers, for the dashboard's Profile page (see
        :func:`local_worker_config`; off, passes run about 2% faster).
    wait_for_workers : float, optional
        Remote scheduler only: seconds to wait for its first worker before
        giving up with a ``TimeoutError`` (a pass on a scheduler without
        workers would wait forever). Default ``$DXRF_WAIT_FOR_WORKERS``, else
        60; 0 requires a worker at once.

    Returns
    -------
    distributed.Client

    Raises
    ------
    TimeoutError
        The remote scheduler has no worker after ``wait_for_workers`` seconds.
    """
    from distributed import Client

    _check_worker_options(n_workers, 1, memory_limit)
    target = scheduler_address(address)
    kwargs = {} if security is None else {"security": security}
    if target is not None:
        if target.startswith("tls://") and security is None:
            _check_tls_configured(target)
        wait = wait_for_workers_seconds(wait_for_workers)
        probe_scheduler(target)
        client = Client(target, **kwargs)
        _wait_for_workers(client, target, wait)
        return client
    cluster = local_cluster(
        n_workers or None, memory_limit=memory_limit, worker_profile=worker_profile, dashboard_address=dashboard_address
    )
    try:
        return _owning_client_class()(cluster, **kwargs)
    except BaseException:
        cluster.close()
        raise


def local_cluster(
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: int | str | None = None,
    worker_profile: bool = False,
    *,
    dashboard_address: str | None = None,
    **options: Any,
) -> distributed.LocalCluster:
    """A ``distributed.LocalCluster`` of worker processes, configured as dxrf runs its passes.

    The one place where dxrf, its command line, benchmarks and tests start a
    local cluster: worker processes (no GIL contention between BLAS calls),
    one thread each by default, the workers configured by
    :func:`local_worker_config`.

    Parameters
    ----------
    n_workers : int, optional
        Number of worker processes (default: one per core, see
        :func:`default_worker_layout`).
    threads_per_worker : int, default 1
        Threads of each worker.
    memory_limit : int or str, optional
        Memory limit of each worker, as ``LocalCluster`` takes it (bytes,
        ``"2GiB"``, ``"auto"``, ``0`` for none). Default: the per-worker share
        of :func:`default_worker_layout`, 80% of the machine's memory divided
        by the number of cores, whatever ``n_workers`` is.
    worker_profile : bool, default False
        Run distributed's statistical profiler in the workers (see
        :func:`local_worker_config`).
    dashboard_address : str, optional
        Where to serve the dashboard (``":0"``: a free port); None, the
        default, serves none.
    **options
        Further ``LocalCluster`` arguments (``security``, ``protocol``,
        ``host``, ``silence_logs``, ...). ``processes`` is not one of them:
        workers are always processes.

    Returns
    -------
    distributed.LocalCluster
        Close it (or use it as a context manager) to stop its processes.
    """
    import dask
    from distributed import LocalCluster

    _check_worker_options(n_workers, threads_per_worker, memory_limit)
    workers, per_worker = default_worker_layout()
    if dashboard_address is None:
        # without a dashboard the scheduler still serves HTTP (health, metrics); on
        # a free port, not on 8787, which another cluster on this machine may hold
        options["scheduler_kwargs"] = {"dashboard_address": ":0", **(options.get("scheduler_kwargs") or {})}
    # workers read their configuration when they start, i.e. inside this block
    with dask.config.set(local_worker_config(worker_profile)):
        return LocalCluster(
            n_workers=workers if n_workers is None else n_workers,
            threads_per_worker=threads_per_worker,
            processes=True,
            memory_limit=per_worker if memory_limit is None else memory_limit,
            dashboard_address=dashboard_address,
            **options,
        )


def _check_worker_options(n_workers: object, threads_per_worker: object, memory_limit: object) -> None:
    """Refuse worker counts and limits that would start a cluster without usable workers."""
    from dxrf.core.validation import ParameterTypeError, check_int

    check_int(n_workers, "n_workers", allow_none=True)
    check_int(threads_per_worker, "threads_per_worker")
    if memory_limit is None or isinstance(memory_limit, str):
        return
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, numbers.Real):
        raise ParameterTypeError(f"memory_limit must be bytes (>= 0), a string such as '2GiB', or None, got {memory_limit!r}")
    if not memory_limit >= 0:
        raise ValueError(f"memory_limit must be bytes (>= 0, 0 for none), a string such as '2GiB', or None, got {memory_limit!r}")


@functools.cache
def _owning_client_class() -> type:
    """A ``distributed.Client`` subclass that closes its cluster when it is closed.

    A client made on a cluster object leaves the cluster running when it
    closes; :func:`get_client`'s embedded cluster belongs to its client. The
    shutdown is orderly: the client first, then the cluster, with the records
    of connections closed by the shutdown itself kept off stderr
    (:func:`_closed_comms_muted`).
    """
    import distributed

    class Client(distributed.Client):  # the name its repr shows
        def close(self, *args: Any, **kwargs: Any) -> Any:
            with _closed_comms_muted(self if self.cluster is not None else None):
                try:
                    return super().close(*args, **kwargs)
                finally:
                    if self.cluster is not None:
                        self.cluster.close()

    return Client


# --------------------------------------------------------------------------- distributed's log records

#: the logger families distributed writes through: its own, and those of the libraries under its event loop
_LOG_FAMILIES = ("distributed", "tornado", "asyncio", "bokeh")


def _family_loggers() -> list[logging.Logger]:
    # every logger of these families, not only the parents: distributed gives some children
    # (distributed.client, ...) their own level, which a parent's level does not override; and a
    # logger's filters apply to the records it makes, not to those its children pass up
    names = [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] in _LOG_FAMILIES]
    return [logging.getLogger(n) for n in dict.fromkeys([*_LOG_FAMILIES, *names])]


def quiet_logs() -> Callable[[], None]:
    """Keep every record of distributed's loggers (and tornado's, asyncio's, bokeh's) off stderr.

    For a program that reports failures itself (the ``dxrf`` command):
    distributed would first print dozens of lines about the same event.

    Returns
    -------
    callable
        Restores the loggers' levels.
    """
    import distributed  # noqa: F401 - configures its loggers (with their own levels) when imported

    loggers = _family_loggers()
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)

    def restore() -> None:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)

    return restore


def _quiet_for_good() -> None:
    quiet_logs()  # in a worker process, for the rest of its life


def quiet_worker_logs(client: distributed.Client) -> None:
    """:func:`quiet_logs` in every worker process of ``client``, until they exit.

    The workers of a local cluster write to this process's stderr: a task
    that fails logs its traceback there before the client raises the same
    error. Workers that start later are not covered.

    Parameters
    ----------
    client : distributed.Client
    """
    client.run(_quiet_for_good)


#: how the exceptions of a connection closed under a shutdown are named (distributed's and tornado's)
_CLOSED_COMM_NAMES = ("CommClosedError", "StreamClosedError")


def _closed_comm(record: logging.LogRecord) -> bool:
    """Whether a record tells of a closed connection or a cancelled task (a heartbeat racing a shutdown)."""
    exc = record.exc_info[1] if record.exc_info else None
    while exc is not None:
        names = {c.__name__ for c in type(exc).__mro__}
        if names & {*_CLOSED_COMM_NAMES, "CancelledError"} or isinstance(exc, ConnectionError):
            return True
        exc = exc.__cause__ or exc.__context__
    try:
        text = record.getMessage()
    except Exception:  # a malformed record is the handler's to report, not a filter's to raise
        return False
    return any(name in text for name in (*_CLOSED_COMM_NAMES, "CancelledError"))


class _ClosedCommFilter(logging.Filter):
    """Drops the records of :func:`_closed_comm`; every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _closed_comm(record)


_CLOSED_COMM_FILTER = _ClosedCommFilter()


def _mute_closed_comms() -> None:
    for lg in _family_loggers():
        lg.addFilter(_CLOSED_COMM_FILTER)  # once: addFilter skips a filter it holds


@contextlib.contextmanager
def _closed_comms_muted(client: distributed.Client | None) -> Iterator[None]:
    """While a cluster shuts down: its records of closed connections dropped, in this process and in its workers.

    A worker's heartbeat that meets the scheduler closing logs a
    ``CommClosedError`` traceback; on a local cluster that lands on this
    process's stderr after the program has reported its own outcome. Only
    those records are dropped (any other error still shows), here only for
    the shutdown, in the workers (``client``'s, asked while they still
    answer) until they exit.
    """
    loggers = _family_loggers()
    for lg in loggers:
        lg.addFilter(_CLOSED_COMM_FILTER)
    try:
        if client is not None and client.status == "running":
            with contextlib.suppress(Exception):  # a worker already gone has nothing left to say
                client.run(_mute_closed_comms)
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(_CLOSED_COMM_FILTER)


def _check_tls_configured(address: str) -> None:
    """A clear error for a ``tls://`` address without certificates in Dask's configuration."""
    from distributed import Security

    sec = Security()  # reads distributed.comm.tls.* from Dask's configuration
    if not (sec.tls_ca_file and sec.tls_client_cert):
        raise ValueError(
            f"{address} is a TLS scheduler but no client certificate is configured: pass "
            f"security=distributed.Security(tls_ca_file=..., tls_client_cert=..., tls_client_key=...), or set "
            f"distributed.comm.tls.ca-file and distributed.comm.tls.client.cert/.key in Dask's configuration "
            f"(e.g. $DASK_DISTRIBUTED__COMM__TLS__CA_FILE)"
        )

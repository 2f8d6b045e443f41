"""Attach to a Dask cluster, or start an embedded one sized to this machine."""

from __future__ import annotations

import os

__all__ = ["get_client", "scheduler_address", "default_worker_layout", "local_worker_config"]

ENV_ADDRESS = "DASK_SCHEDULER_ADDRESS"


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

    Use it as ``with dask.config.set(local_worker_config()):`` around the
    creation of a ``LocalCluster``: worker processes take their configuration
    when they start.

    Parameters
    ----------
    worker_profile : bool, default False
        Keep distributed's statistical profiler in the workers (it feeds the
        dashboard's Profile page). It samples every worker thread's stack
        every 10 ms; on a 2-core machine that cost 2% of a statistics pass
        (chunk tasks 2.33 s against 2.37 s, N = 4e5, M0 = 2000). The task
        stream, progress and memory pages do not need it.
    """
    return {"distributed.worker.profile.enabled": bool(worker_profile)}


def get_client(
    address: str | None = None,
    *,
    n_workers: int | None = None,
    memory_limit: int | str | None = None,
    dashboard_address: str = ":0",
    security: object = None,
    worker_profile: bool = False,
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

    Returns
    -------
    distributed.Client
    """
    import dask
    from distributed import Client

    target = scheduler_address(address)
    kwargs = {} if security is None else {"security": security}
    if target is not None:
        if target.startswith("tls://") and security is None:
            _check_tls_configured(target)
        return Client(target, **kwargs)
    workers, per_worker = default_worker_layout()
    with dask.config.set(local_worker_config(worker_profile)):
        return Client(
            n_workers=n_workers or workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit if memory_limit is not None else per_worker,
            dashboard_address=dashboard_address,
            **kwargs,
        )


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

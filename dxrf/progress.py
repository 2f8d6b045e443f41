"""Computing dask graphs with an optional progress bar on any scheduler."""

from __future__ import annotations

from typing import Any

import dask

__all__ = ["compute", "active_client"]


def active_client() -> Any:
    """The current ``distributed.Client``, or None when there is none."""
    try:
        from distributed import get_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        return get_client()
    except ValueError:
        return None


def compute(obj: Any, *, progress: bool = False) -> Any:
    """Compute one dask collection or delayed value, optionally with a progress bar.

    On a distributed client the bar follows the cluster's tasks
    (``distributed.progress``); otherwise dask's local ``ProgressBar`` is used.
    """
    client = active_client()
    if client is not None:
        future = client.compute(obj)
        if progress:
            from distributed import progress as dist_progress

            dist_progress(future, notebook=False)
        return future.result()
    if progress:
        from dask.diagnostics import ProgressBar

        with ProgressBar(minimum=0.5):
            return dask.compute(obj)[0]
    return dask.compute(obj)[0]

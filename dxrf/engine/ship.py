"""Shipping read-only pass arguments (kernels, coefficients) to the workers."""

from __future__ import annotations

from typing import Any

import dask
from dask.delayed import Delayed

from dxrf.core.progress import active_client

__all__ = ["ship", "SHIP_BYTES"]

# Above this size an argument is scattered to the cluster once and referenced by
# key; below it, it is embedded in the graph (cheaper than a round trip). A large
# argument embedded in the graph makes the scheduler receive and store it.
SHIP_BYTES = 2**20


def _nbytes(obj: Any) -> int:
    nbytes = getattr(obj, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    return 0


def _is_future(obj: Any) -> bool:
    try:
        from distributed import Future
    except ImportError:  # pragma: no cover - distributed is a dependency
        return False
    return isinstance(obj, Future)


def ship(obj: Any, *, pure: bool = True, broadcast: bool = False, scatter: bool = True) -> Any:
    """``obj`` as a graph input: a scattered future when large and a cluster exists, else a delayed value.

    Already shipped values (futures, delayed) pass through, so a caller that
    runs many passes with the same kernel ships it once and reuses the handle.
    ``pure=False`` gives the delayed value a fresh key (for arguments that
    change between passes but hash alike, such as in-place updated arrays).
    ``broadcast=True`` scatters a large argument to every worker at once (for
    chains of many tasks that all need it). ``scatter=False`` always embeds
    it in the graph once (for lazy collections handed to the user, which may
    be computed after the client that scattered is gone).
    """
    if isinstance(obj, Delayed) or _is_future(obj):
        return obj
    client = active_client()
    if scatter and client is not None and _nbytes(obj) > SHIP_BYTES:
        return client.scatter(obj, hash=False, broadcast=broadcast)
    if not pure:
        return dask.delayed(obj, pure=False, traverse=False)
    token = dask.base.tokenize(obj)
    return dask.delayed(obj, pure=True, traverse=False, name=f"dxrf-arg-{token}")

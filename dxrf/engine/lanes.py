"""Chains of row chunks ("lanes") that continue one running partial on one worker."""

from __future__ import annotations

import dask
import dask.array as da

from dxrf.core.progress import active_client

__all__ = ["lanes"]


def lanes(X: da.Array, count: int | None = None) -> list[int]:
    """The lane of each row chunk of ``X``.

    Chunks already in the cluster's memory (a persisted array) are chained on
    the worker holding them, two lanes per thread of that worker, so no chunk
    moves and one partial per lane is shipped. Chunks still to be read get a
    lane each, so each task consumes its read as soon as it lands. ``count``
    forces ``count`` lanes, chunk ``i`` going to lane ``i mod count``.
    """
    n = X.numblocks[0]
    if count is not None:
        if count < 1:
            raise ValueError(f"lanes must be a positive number of chains, got {count}")
        return [i % count for i in range(n)]
    client = active_client()
    if client is None:  # dask's own schedulers: nothing is held in a cluster
        return list(range(n))
    threads = client.nthreads()
    try:
        who = client.who_has(X)
    except Exception:  # noqa: BLE001 - placement is only a hint
        who = {}
    keys = list(dask.core.flatten(X.__dask_keys__()))
    holders = [who.get(k) or () for k in keys]
    if holders and all(h and h[0] in threads for h in holders):
        ids: dict[tuple[str, int], int] = {}
        seen: dict[str, int] = {}
        out = []
        for h in holders:
            w = h[0]
            slot = seen.get(w, 0) % (2 * threads[w])
            seen[w] = seen.get(w, 0) + 1
            out.append(ids.setdefault((w, slot), len(ids)))
        return out
    # Chunks still to be read: one task per chunk. Chained lanes measured no
    # faster here, and finished reads piled up in worker memory waiting for
    # their lane (dask releases reads in its own priority order): 1.3 GiB per
    # worker at 10^7 rows against 0.5 GiB at 10^6.
    return list(range(n))

"""Chains of row chunks ("lanes") that continue one running partial on one worker."""

from __future__ import annotations

import heapq

import dask
import dask.array as da
import numpy as np

from dxrf.core.progress import active_client

__all__ = ["lane_plan", "balanced", "IMBALANCE", "LANE_IMBALANCE"]

#: a pass re-cuts X's row chunks evenly when, shared out greedily over the cluster's threads,
#: they would keep the busiest thread this much longer than an even share. A zarr group of
#: 60 000 rows in 50 000-row chunks ran its passes as 5:1 on two workers (MNIST: the M = 4000
#: statistics in 38 s); one chunk of 36 000 rows (kin40k) kept one of two workers idle.
IMBALANCE = 1.1

#: a held (persisted) X whose chunks load one worker's threads more than this over an even
#: share gives some of them to the lanes of less loaded workers. The scheduler placed 20 chunks
#: 11:9 on two workers in 2 of 6 persists; the M0 = 2000 statistics pass then took 20.4 s, not 19.0.
LANE_IMBALANCE = 1.02


def lane_plan(X: da.Array, count: int | None = None, move_below: int = 0) -> tuple[list[int], list[str | None]]:
    """The lane of each row chunk of ``X``, and the worker that should run it where that is not its holder.

    Chunks already in the cluster's memory (a persisted array) are chained on
    the worker holding them, two lanes per thread of that worker, so one
    partial per lane is shipped. Where the holders are uneven (see
    :data:`LANE_IMBALANCE`), chunks of fewer than ``move_below`` bytes (the
    pass's partial: moving such a chunk costs less than moving the partial)
    may join lanes of less busy workers (:func:`_evened`); the second list
    names the worker for those chunks, None for the others. Chunks still to
    be read get a lane each, so each task consumes its read as soon as it
    lands. ``count`` forces ``count`` lanes, chunk ``i`` going to lane
    ``i mod count``.
    """
    n = X.numblocks[0]
    stay: list[str | None] = [None] * n
    if count is not None:
        if count < 1:
            raise ValueError(f"lanes must be a positive number of chains, got {count}")
        return [i % count for i in range(n)], stay
    client = active_client()
    if client is None:  # dask's own schedulers: nothing is held in a cluster
        return list(range(n)), stay
    threads = client.nthreads()
    try:
        who = client.who_has(X)
    except Exception:  # noqa: BLE001 - placement is only a hint
        who = {}
    keys = list(dask.core.flatten(X.__dask_keys__()))
    holders = [who.get(k) or () for k in keys]
    if holders and len(keys) == n and all(h and h[0] in threads for h in holders):
        held = [h[0] for h in holders]
        rows = [int(c) for c in X.chunks[0]]
        row_bytes = X.dtype.itemsize * int(np.prod(X.shape[1:]))
        owners = _evened(held, rows, threads, movable=[r * row_bytes < move_below for r in rows])
        ids: dict[tuple[str, int], int] = {}
        seen: dict[str, int] = {}
        out = []
        for w in owners:
            slot = seen.get(w, 0) % (2 * threads[w])
            seen[w] = seen.get(w, 0) + 1
            out.append(ids.setdefault((w, slot), len(ids)))
        return out, [w if w != h else None for w, h in zip(owners, held)]
    # Chunks still to be read: one task per chunk. Chained lanes measured no
    # faster here, and finished reads piled up in worker memory waiting for
    # their lane (dask releases reads in its own priority order): 1.3 GiB per
    # worker at 10^7 rows against 0.5 GiB at 10^6.
    return list(range(n)), stay


def _evened(owners: list[str], rows: list[int], threads: dict[str, int], movable: list[bool] | None = None) -> list[str]:
    """``owners`` (the worker of each chunk) with chunks given from the busiest to the least busy workers.

    A worker's load is its chunks' rows per thread. While the busiest
    exceeds :data:`LANE_IMBALANCE` times an even share, its smallest
    ``movable`` chunk (default: all; the last of equals) that leaves the
    least busy worker below it changes hands. Each move lowers the sum of
    squared loads, so this ends.
    """
    load = dict.fromkeys(threads, 0)
    for w, r in zip(owners, rows):
        load[w] += r
    share = sum(rows) / sum(threads.values())
    out = list(owners)
    while True:
        donor = max(load, key=lambda w: load[w] / threads[w])
        taker = min(load, key=lambda w: load[w] / threads[w])
        top = load[donor] / threads[donor]
        if top <= LANE_IMBALANCE * share:
            return out
        fits = [
            i for i, w in enumerate(out)
            if w == donor and (movable is None or movable[i]) and (load[taker] + rows[i]) / threads[taker] < top
        ]
        if not fits:
            return out
        i = min(fits, key=lambda j: (rows[j], -j))
        out[i] = taker
        load[donor] -= rows[i]
        load[taker] += rows[i]


def _makespan(chunks: tuple[int, ...], threads: int) -> int:
    """The busiest thread's rows when the chunks go, largest first, to the least loaded of ``threads``."""
    loads = [0] * threads
    for c in sorted(chunks, reverse=True):
        heapq.heapreplace(loads, loads[0] + int(c))
    return max(loads)


def _held(X: da.Array, client: object) -> bool:
    """Whether every chunk of ``X`` is already in the cluster's memory (a persisted array)."""
    try:
        who = client.who_has(X)
    except Exception:  # noqa: BLE001 - placement is only a hint
        return False
    keys = list(dask.core.flatten(X.__dask_keys__()))
    return bool(keys) and all(who.get(k) for k in keys)


def balanced(X: da.Array) -> da.Array:
    """``X`` with its rows re-cut into equal chunks when its own would leave the cluster's threads unevenly loaded.

    Each block's work is about proportional to its rows, and a pass runs one
    task per chunk: with fewer or unequal chunks than threads, some threads
    wait (see :data:`IMBALANCE`). The new chunks number a multiple of the
    threads, no fewer than before (so none is larger than the largest now),
    and split or join the old ones where needed (dask moves those rows once).
    The statistics do not change: every pass sums over tiles of a global row
    grid, whatever the chunks. A persisted ``X``, and dask's own schedulers
    (no cluster), are left as they are.
    """
    client = active_client()
    chunks = tuple(int(c) for c in X.chunks[0])
    if client is None or not chunks:
        return X
    try:
        threads = sum(client.nthreads().values())
    except Exception:  # noqa: BLE001 - no workers known: nothing to balance over
        return X
    n = sum(chunks)
    if threads < 2 or n < 2 * threads or _makespan(chunks, threads) <= IMBALANCE * n / threads:
        return X
    if _held(X, client):
        return X
    count = threads * -(-len(chunks) // threads)
    edges = [round(i * n / count) for i in range(count + 1)]
    return X.rechunk({0: tuple(b - a for a, b in zip(edges, edges[1:]))})

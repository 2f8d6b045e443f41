"""The memory-capped tree reduction of a pass's partial results."""

from __future__ import annotations

from collections.abc import Callable

import dask

__all__ = ["MERGE_BYTES", "fan_in", "tree_reduce"]

# A merge task holds its fan-in of partials at once, and partials wait in worker
# memory until their whole group is done; keep a group under this many bytes.
# Measured at M0 = 1000 (16 MiB partials, before the Gram's sums were packed),
# 4 * 10^6 rows: peak worker RSS 565 MiB with fan-in 8 against 464 MiB with
# fan-in 2 (474 / 444 at 10^6 rows), same time.
MERGE_BYTES = 32 * 2**20


def fan_in(partial_bytes: int, limit: int) -> int:
    """The largest fan-in up to ``limit`` whose group of partials fits in :data:`MERGE_BYTES` (at least 2)."""
    if partial_bytes <= 0:
        return max(2, int(limit))
    return int(max(2, min(limit, MERGE_BYTES // partial_bytes)))


def tree_reduce(parts: list, merge: Callable, fan_in: int) -> object:
    """Delayed tree of ``merge(*group)`` over ``parts``, ``fan_in`` at a time.

    Keys are fresh on every call (``pure=False``): a pass is a pass, never a
    lookup of a result the scheduler still holds. A group of one is passed on
    without a task.
    """
    if not parts:
        raise ValueError("a pass needs at least one block")
    if fan_in < 2:
        raise ValueError(f"the fan-in of a reduction must be at least 2, got {fan_in}")
    task = dask.delayed(merge, pure=False)
    while len(parts) > 1:
        parts = [task(*g) if len(g) > 1 else g[0] for g in (parts[i : i + fan_in] for i in range(0, len(parts), fan_in))]
    return parts[0]

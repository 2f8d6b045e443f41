"""Scratch arrays kept per thread and reused by its later tasks, tiles and passes."""

from __future__ import annotations

import math
import threading

import numpy as np

__all__ = ["thread_buffer"]

_LOCAL = threading.local()


def thread_buffer(name: str, shape: tuple[int, ...], dtype: np.dtype, order: str = "C") -> np.ndarray:
    """A scratch array of ``shape`` owned by the calling thread, reused across calls.

    Tasks of a pass run one after another on each worker thread; allocating
    their buffers afresh costs a first touch of ~100 MB per task, several
    percent of a pass on this class of machine (distributed trims freed memory
    back to the OS). Each thread keeps one flat array per ``(name, dtype)``,
    created zeroed and grown when a larger shape is asked for, never shrunk;
    its contents are whatever the last user left. Concurrent tasks run on
    different threads, so they never share one.
    """
    cache = getattr(_LOCAL, "arrays", None)
    if cache is None:
        cache = _LOCAL.arrays = {}
    size = math.prod(shape)
    key = (name, np.dtype(dtype).str)
    flat = cache.get(key)
    if flat is None or flat.size < size:
        cache.pop(key, None)  # free the old one before allocating
        flat = cache[key] = np.zeros(size, dtype=dtype)
    return flat[:size].reshape(shape, order=order)

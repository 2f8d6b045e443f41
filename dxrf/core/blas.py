"""Holding BLAS to a number of threads inside Dask tasks, cheaply and safely."""

from __future__ import annotations

import threading

from threadpoolctl import ThreadpoolController

try:  # threadpoolctl >= 3.8
    from threadpoolctl import OpenBLASController as _OpenBLAS
except ImportError:  # pragma: no cover
    _OpenBLAS = None

__all__ = ["blas_limit"]


def _take_control() -> None:
    """Let the calling thread set OpenBLAS's (process-wide) thread count.

    threadpoolctl >= 3.8 lets only one "controlling" thread change a pthreads
    OpenBLAS: the first thread that sets a limit, until it ends or clears
    itself (``with threadpool_limits(...)`` does; ``limit()`` without ``with``
    never does). Calls from any other thread are silently ignored. Here limits
    are set by whichever task thread enters first and restored by the last one
    to leave, so a pool thread's ``limit(1)`` was dropped while an earlier
    thread of the pool was alive: its syrk ran on 2 BLAS threads and rounded
    float32 Grams differently (the intermittent bitwise-identity failures).
    Called under ``blas_limit._lock``, which serialises every change we make.
    """
    if _OpenBLAS is not None and hasattr(_OpenBLAS, "clear_controlling_thread"):
        _OpenBLAS.clear_controlling_thread(force=True)


class blas_limit:
    """Hold BLAS to ``threads`` threads while any task of this process is inside.

    ``threadpool_limits`` inspects every loaded library on each call (about
    1-5 ms, more than a small block's arithmetic), and overlapping tasks in
    one process would restore each other's limits out of order. Here one
    cached controller sets the limit when the first task enters and restores
    it when the last one leaves.

    Parameters
    ----------
    threads : int or None
        The BLAS thread count while inside; None or 0 leaves BLAS as it is.

    Examples
    --------
    >>> import numpy as np
    >>> from dxrf.core import blas_limit
    >>> with blas_limit(1):
    ...     g = np.ones((4, 3)).T @ np.ones((4, 3))
    """

    _lock = threading.Lock()
    _depth = 0
    _active = None
    _controller = None

    def __init__(self, threads: int | None) -> None:
        self.threads = threads

    def __enter__(self) -> None:
        if not self.threads:
            return
        cls = type(self)
        with cls._lock:
            if cls._depth == 0:
                if cls._controller is None:
                    cls._controller = ThreadpoolController()
                _take_control()
                cls._active = cls._controller.limit(limits=self.threads, user_api="blas")
            cls._depth += 1

    def __exit__(self, *exc: object) -> None:
        if not self.threads:
            return
        cls = type(self)
        with cls._lock:
            cls._depth -= 1
            if cls._depth == 0:
                _take_control()
                cls._active.restore_original_limits()
                cls._active = None
                _take_control()  # hold no control between tasks: other code may set limits then

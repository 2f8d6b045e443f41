"""Holding BLAS to a number of threads inside Dask tasks, cheaply and safely."""

from __future__ import annotations

import threading

from threadpoolctl import ThreadpoolController

__all__ = ["blas_limit"]


class blas_limit:
    """Hold BLAS to ``threads`` threads while any task of this process is inside.

    ``threadpool_limits`` inspects every loaded library on each call (about
    1-5 ms, more than a small block's arithmetic), and overlapping tasks in
    one process would restore each other's limits out of order. Here one
    cached controller sets the limit when the first task enters and restores
    it when the last one leaves.
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
                cls._active = cls._controller.limit(limits=self.threads, user_api="blas")
            cls._depth += 1

    def __exit__(self, *exc: object) -> None:
        if not self.threads:
            return
        cls = type(self)
        with cls._lock:
            cls._depth -= 1
            if cls._depth == 0:
                cls._active.restore_original_limits()
                cls._active = None

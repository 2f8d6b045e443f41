"""Float32 tile arithmetic is bitwise reproducible whatever thread or buffer runs it.

The intermittent float32 failures of the bitwise-identity test in test_stats.py
did not come from buffer alignment: the tile's syrk had run on 2 OpenBLAS
threads. threadpoolctl >= 3.8 lets only one "controlling" thread change a
pthreads OpenBLAS, and ``blas_limit(1)`` entered on a second thread of a pool
(while the pool's first thread, which had set the earlier limit, was still
alive) was silently ignored. A 2-thread ssyrk rounds some Gram entries
differently from a 1-thread one. These tests reproduce that directly.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController, threadpool_limits

import dxrf
from dxrf.core.blas import blas_limit
from dxrf.stats.tiles import TileWorker

ROWS, M = 300, 120  # the tiles of test_bitwise_identical_across_chunkings_worker_counts_and_numpy


def _blas_libs():
    libs = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    if not libs:
        pytest.skip("no BLAS library that threadpoolctl can control")
    return libs


def _kernel():
    X = np.random.default_rng(42).normal(size=(ROWS, 7))
    fmap = dxrf.RandomFourierFeatures(M, bandwidth=2.0, dtype="float32", random_state=0).fit(X)
    return X, fmap.kernel_


def _tile_gram(kernel, X) -> np.ndarray:
    worker = TileWorker(kernel, ROWS, None, 1)
    worker.add_tile(X, None, None)
    return worker.gram.copy()


def _on_two_pool_threads(fn):
    """``fn()`` under ``blas_limit(1)`` on thread A, then on thread B while A is still alive."""
    out: dict = {}
    a_done, release = threading.Event(), threading.Event()

    def run(name: str, stay: bool) -> None:
        with blas_limit(1):
            out[name] = fn()
        if stay:
            a_done.set()
            release.wait()

    a = threading.Thread(target=run, args=("A", True))
    a.start()
    try:
        assert a_done.wait(60)
        b = threading.Thread(target=run, args=("B", False))
        b.start()
        b.join()
    finally:
        release.set()
        a.join()
    return out["A"], out["B"]


def test_blas_limit_holds_on_every_thread_of_a_pool():
    libs = _blas_libs()
    with threadpool_limits(limits=2, user_api="blas"):  # BLAS multi-threaded outside the tasks
        if any(lib.get_num_threads() != 2 for lib in libs):
            pytest.skip("BLAS cannot be set to 2 threads here")
        first, second = _on_two_pool_threads(lambda: [lib.get_num_threads() for lib in libs])
        assert first == [1] * len(libs)
        assert second == [1] * len(libs)  # was [2, 2]: the second thread's limit was ignored
        # the limit is lifted when the last task leaves
        assert [lib.get_num_threads() for lib in libs] == [2] * len(libs)


def test_tile_gram_bitwise_identical_on_every_thread_of_a_pool():
    _blas_libs()
    X, kernel = _kernel()
    with threadpool_limits(limits=1, user_api="blas"):
        ref = _tile_gram(kernel, X)
    with threadpool_limits(limits=2, user_api="blas"):
        first, second = _on_two_pool_threads(lambda: _tile_gram(kernel, X))
    np.testing.assert_array_equal(first, ref)
    np.testing.assert_array_equal(second, ref)


def _at_offset(shape, dtype, offset: int) -> np.ndarray:
    """A zeroed array whose data starts ``offset`` bytes after a 64-byte boundary."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw[start : start + nbytes].view(dtype).reshape(shape)


@pytest.mark.parametrize("rows", [ROWS, 233, 67, 1])  # whole tiles, and the pieces a split or a fix-up gives
def test_tile_arithmetic_does_not_depend_on_buffer_alignment(rows):
    """Features, column sums (gemv) and Gram (syrk) from buffers at 0-60 byte offsets agree bitwise."""
    X, kernel = _kernel()
    X = X[:rows]
    results = []
    with blas_limit(1):
        for off in (0, 4, 16, 32, 60):
            Z = _at_offset((rows, M), np.float32, off)
            kernel.raw(X, out=Z)
            gram = _at_offset((M, M), np.float32, (off + 8) % 64)
            np.matmul(Z.T, Z, out=gram)
            ones = _at_offset((rows,), np.float32, (off + 4) % 64)
            ones[...] = 1
            results.append((Z.copy(), gram.copy(), np.matmul(ones, Z)))
    for got in results[1:]:
        for a, b in zip(got, results[0]):
            np.testing.assert_array_equal(a, b)

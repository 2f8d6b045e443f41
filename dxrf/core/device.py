"""Array-module dispatch: the same block kernels on NumPy or CuPy (GPU) blocks.

A dask array whose chunks are CuPy arrays (``X.map_blocks(cupy.asarray)``)
runs the statistics pass on the GPU: projection, activation and Gram are
computed on the device, the compensated float64 sums too, and each task
returns its partial sums to the host, where lanes and the tree reduction
continue exactly as for NumPy blocks. CuPy is never imported unless such an
array is seen, so nothing here needs a GPU.
"""

from __future__ import annotations

import dataclasses
import threading
from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["array_module", "is_device_array", "to_host", "kernel_on", "gram_into"]


def array_module(a: Any) -> ModuleType:
    """``cupy`` for CuPy arrays, else ``numpy`` (without importing CuPy)."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def is_device_array(a: Any) -> bool:
    """True for arrays that live on a GPU (CuPy)."""
    return array_module(a) is not np


def to_host(a: Any) -> np.ndarray:
    """A NumPy copy of a device array (NumPy arrays pass through)."""
    return a.get() if is_device_array(a) else np.asarray(a)


def gram_into(Z: Any, out: Any) -> Any:
    """``Z.T @ Z`` into ``out``; on a device only its upper triangle is written.

    NumPy sends ``Z.T @ Z`` to BLAS syrk and releases the GIL (SciPy's ?syrk
    wrapper holds it, which serialised the threads of a process). CuPy's
    matmul runs a GEMM; cuBLAS ``syrk`` computes one triangle, measured 1.5x
    faster on an H200 at M = 2000-4000. The statistics keep the upper
    triangle alone (``out[i, j]``, ``j >= i``), so the other is never read.
    """
    xp = array_module(Z)
    if xp is np:
        return np.matmul(Z.T, Z, out=out)
    from cupy import cublas

    return cublas.syrk("T", Z, out=out, lower=False)


_KERNELS: dict[tuple[int, str], tuple[Any, Any]] = {}
_LOCK = threading.Lock()


def kernel_on(kernel: Any, xp: ModuleType) -> Any:
    """``kernel`` with its projection on the array module ``xp`` (cached per process).

    Structured (SORF) kernels are made dense first: on a GPU the explicit
    projection is one matrix product. ``scale`` stays on the host, where the
    statistics are finished.
    """
    if xp is np:
        return kernel
    key = (id(kernel), xp.__name__)
    with _LOCK:
        hit = _KERNELS.get(key)
        if hit is not None and hit[0] is kernel:
            return hit[1]
        dense = kernel.dense()
        moved = dataclasses.replace(
            dense, W=xp.asarray(dense.W), b=None if dense.b is None else xp.asarray(dense.b),
        )
        # a Nystroem kernel's whitening is applied on the device too (its host copy finishes statistics)
        if moved.whitening is not None:
            object.__setattr__(moved, "_whitening_dtype", xp.asarray(moved.whitening, dtype=moved.dtype))
        if len(_KERNELS) >= 4:  # a pass uses one kernel; keep a few, not all
            _KERNELS.pop(next(iter(_KERNELS)))
        _KERNELS[key] = (kernel, moved)  # holding kernel keeps its id unique
        return moved

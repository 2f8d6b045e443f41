"""Leaf helpers that import nothing else from dxrf.

Validation of arguments, row weights, class labels, target scaling, memory
budgets, BLAS threads, scratch buffers, NumPy/CuPy dispatch, the options object,
progress reporting, the error types shared by the layers above, and the
registry of persistable classes (each declares its fitted attributes).

The modules are imported by path inside the library; the names below are the
ones meant for code outside it (the workflows, users timing dense algebra).
"""

from dxrf.core.blas import blas_limit

__all__ = ["blas_limit"]

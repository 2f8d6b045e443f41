"""Leaf helpers that import nothing else from dxrf.

Validation of arguments, row weights, class labels, target scaling, memory
budgets, BLAS threads, scratch buffers, NumPy/CuPy dispatch, the options object,
progress reporting, the error types shared by the layers above, and the
registry of persistable classes (each declares its fitted attributes).
"""

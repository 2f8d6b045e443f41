"""Leaf helpers that import nothing else from dxrf.

Validation of arguments, row weights, class labels, target scaling, memory
budgets, BLAS threads, scratch buffers, NumPy/CuPy dispatch, the options object,
progress reporting and the error types shared by the layers above.
"""

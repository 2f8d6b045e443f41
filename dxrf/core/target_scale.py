"""Targets scaled into [-1, 1] by ``open_zarr(..., scale_y=True)``, recognised by the learners.

A model fitted on a scaled target would predict in scaled units, and its
``score`` against a test set in the data's units would be meaningless. The
dataset records each scaled target it hands out (by the dask array's name,
which names its content); a regressor's ``fit`` finds the record, keeps the
map as the fitted attribute ``y_scale_`` (``[y_min, y_max]``), and its
``predict`` maps back into the data's units.
"""

from __future__ import annotations

import threading

import dask.array as da
import numpy as np

__all__ = ["register", "scale_of", "unscale"]

_SCALED: dict[str, tuple[float, float]] = {}
_LOCK = threading.Lock()


def register(y: da.Array, lo: float, hi: float) -> da.Array:
    """Record that the dask array ``y`` holds ``2 (t - lo) / (hi - lo) - 1`` of a target ``t``."""
    with _LOCK:
        _SCALED[y.name] = (float(lo), float(hi))
    return y


def scale_of(y: object) -> np.ndarray | None:
    """``[y_min, y_max]`` of a target made by ``scale_y``, or None for any other array."""
    if not isinstance(y, da.Array):
        return None
    with _LOCK:
        found = _SCALED.get(y.name)
    return None if found is None else np.array(found, dtype=np.float64)


def _unscale_block(block: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return (block.astype(np.float64) + 1.0) * ((hi - lo) / 2.0) + lo


def unscale(pred: object, scale: np.ndarray | None) -> object:
    """Predictions in the data's units from predictions of a scaled target (float64; lazy for dask)."""
    if scale is None:
        return pred
    lo, hi = float(scale[0]), float(scale[1])
    if isinstance(pred, da.Array):
        return pred.map_blocks(_unscale_block, lo=lo, hi=hi, dtype=np.float64)
    return _unscale_block(np.asarray(pred), lo, hi)

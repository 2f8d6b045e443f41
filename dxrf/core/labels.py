"""Class labels shared by every classifier and supervised selector: distinct labels, +-1 codes."""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.utils.multiclass import check_classification_targets

from dxrf.core.validation import is_dask

__all__ = ["class_labels", "encode_classes"]


def class_labels(y: np.ndarray | da.Array, owner: str) -> np.ndarray:
    """Sorted distinct labels of 1-d ``y``; at least two are required.

    Dask input is read once (``y`` only, never X). ``owner`` names the
    estimator in the error message.
    """
    if is_dask(y):
        classes = np.unique(np.asarray(da.unique(y).compute()))
        check_classification_targets(classes)
    else:
        check_classification_targets(y)
        classes = np.unique(y)
    if classes.size < 2:
        only = classes[0].item() if isinstance(classes[0], np.generic) else classes[0]  # 0, not np.int32(0)
        raise ValueError(
            f"{owner} needs samples of at least 2 classes in the data, "
            f"but the data contain only one class: {only!r}"
        )
    return classes


def encode_classes(y: np.ndarray | da.Array, classes: np.ndarray) -> np.ndarray | da.Array:
    """+-1 targets: one column (+1 for ``classes[1]``) for two classes, one-hot +-1 columns for more."""
    where = da.where if is_dask(y) else np.where
    if classes.size == 2:
        return where(y == classes[1], 1.0, -1.0)[:, None]
    return where(y[:, None] == classes[None, :], 1.0, -1.0)

"""The UCI regression data sets of Yang et al. (2016), split by their published test masks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dxrf.core.validation import check_int
from dxrf.datasets.base import Dataset, _check_n_rows, _file


UCI_REGRESSION = [
    "protein", "kin40k", "elevators", "pol", "bike", "keggdirected", "keggundirected",
    "pumadyn32nm", "parkinsons", "tamielectric",
]


# --------------------------------------------------------------------------- UCI regression (Yang et al. 2016)


def _load_uci(name: str, *, split: int = 0, n_rows: int | None = None) -> Dataset:
    check_int(split, "split", low=0, high=9, what="an integer in 0..9 (a column of the test mask)")
    n_rows = _check_n_rows(n_rows)
    path = _file(f"uci_regression_yang2016/{name}.csv.gz")
    mask_path = _file(f"uci_regression_yang2016/{name}_test_mask.csv.gz")
    data = pd.read_csv(path, header=None, nrows=n_rows, dtype=np.float64).to_numpy()
    masks = pd.read_csv(mask_path, header=None, nrows=n_rows).to_numpy()
    if masks.shape != (data.shape[0], 10) or not np.isin(masks, (0, 1)).all():
        raise ValueError(f"{str(mask_path)!r} is not an n x 10 0/1 mask for the {data.shape[0]} rows of {name}")
    test = masks[:, split].astype(bool)
    X, y = data[:, :-1], data[:, -1]
    d = X.shape[1]
    desc = (
        f"UCI regression set {name!r}, preprocessed version of Yang et al. 2016 (treforevans/uci_datasets): "
        f"{data.shape[0]} rows, {d} inputs, target in the last column.\n"
        f"split {split} of the 10 published test masks: {int((~test).sum())} train / {int(test.sum())} test."
    )
    return Dataset(
        name=name,
        X_train=X[~test],
        y_train=y[~test],
        X_test=X[test],
        y_test=y[test],
        feature_names=[f"x{j}" for j in range(d)],
        task="regression",
        classes=None,
        description=desc,
        source_path=str(path),
        target_name="y",
    )

"""The loaders of the data sets with their own train/test files or a shuffled split: ``adult``,
``epileptic_seizure`` and ``mnist``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dxrf import io as _io
from dxrf.datasets.base import Dataset, _check_n_rows, _check_test_size, _classification_task, _file, _n_test


ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
    "income",
]
ADULT_CATEGORICAL = [
    "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
    "native-country",
]
EPILEPTIC_CLASS_NAMES = ["seizure", "tumour area", "healthy area", "eyes closed", "eyes open"]


# --------------------------------------------------------------------------- adult


def _read_adult(path: Path, *, test: bool, n_rows: int | None) -> pd.DataFrame:
    df = pd.read_csv(
        path,
        header=None,
        names=ADULT_COLUMNS,
        sep=",",
        skipinitialspace=True,
        na_values=["?"],
        skiprows=1 if test else None,
        nrows=n_rows,
        dtype={c: str for c in [*ADULT_CATEGORICAL, "income"]},
    )
    # adult.test labels end with "." (">50K."); the classes are the same
    df["income"] = df["income"].str.rstrip(".")
    return df


def _adult_levels(train: pd.DataFrame, missing_level: bool) -> dict[str, list[str]]:
    # Same rule as dxrf.io.ingest: sorted levels, then "?" for columns with
    # missing values when missing_level is set.
    levels = {}
    for c in ADULT_CATEGORICAL:
        lv = _io._sort_labels(train[c].dropna().unique().tolist())
        if missing_level and train[c].isna().any():
            lv.append("?")
        levels[c] = lv
    return levels


def _load_adult(*, missing_level: bool = False, n_rows: int | None = None) -> Dataset:
    n_rows = _check_n_rows(n_rows)
    train_path = _file("adult/adult.data.gz")
    test_path = _file("adult/adult.test.gz")
    train_full = _read_adult(train_path, test=False, n_rows=None)
    test = _read_adult(test_path, test=True, n_rows=n_rows)
    # the level set always comes from the whole training file, so that n_rows
    # never changes the columns
    levels = _adult_levels(train_full, missing_level)
    train = train_full if n_rows is None else train_full.iloc[:n_rows]
    schema = _io._TableSchema(
        [(c, levels.get(c)) for c in ADULT_COLUMNS[:-1]], None, None, None, missing_level, "error"
    )
    y = [(df["income"] == ">50K").to_numpy(np.int64) for df in (train, test)]
    for df, part in ((train, "train"), (test, "test")):
        bad = ~df["income"].isin(["<=50K", ">50K"])
        if bad.any():
            raise ValueError(f"adult {part}: unexpected income label {df['income'][bad].iloc[0]!r}")
    n_q = [int(df[ADULT_CATEGORICAL].isna().any(axis=1).sum()) for df in (train, test)]
    desc = (
        "UCI Adult (census income, Becker & Kohavi 1996, CC BY 4.0): predict income >50K (1) vs <=50K (0).\n"
        f"train = adult.data ({len(train)} rows, {y[0].mean():.2%} positive), test = adult.test "
        f"({len(test)} rows, {y[1].mean():.2%} positive).\n"
        f"6 numeric columns + one-hot categorical columns (levels from the training file, sorted"
        + (", '?' as its own level" if missing_level else ", '?' = missing -> all-zero")
        + f") = {len(schema.columns)} columns; rows with '?': {n_q[0]} train, {n_q[1]} test."
    )
    return Dataset(
        name="adult",
        X_train=schema.encode_X(train, dtype=np.float64),
        y_train=y[0],
        X_test=schema.encode_X(test, dtype=np.float64),
        y_test=y[1],
        feature_names=schema.columns,
        task="binary",
        classes=[0, 1],
        class_names=["<=50K", ">50K"],
        description=desc,
        source_path=str(train_path),
        target_name="income",
    )


# --------------------------------------------------------------------------- epileptic seizure


def _load_epileptic(
    *,
    binary: bool = True,
    test_size: float = 0.2,
    random_state: int = 0,
    by_group: bool = False,
    n_rows: int | None = None,
) -> Dataset:
    test_size = _check_test_size(test_size)
    n_rows = _check_n_rows(n_rows)
    path = _file("epileptic_seizure/epileptic_seizure_recognition.csv.gz")
    df = pd.read_csv(path)
    groups = df["id"].str.split(".", n=1).str[1].to_numpy(dtype=object)
    feats = [c for c in df.columns if c not in ("id", "y")]
    X = df[feats].to_numpy(np.float64)
    y = df["y"].to_numpy(np.int64)
    if binary:
        y = (y == 1).astype(np.int64)
    n = len(df)
    rng = np.random.default_rng(random_state)
    if by_group:
        # whole recordings go to one side: shuffle the recordings, then fill
        # the test part recording by recording
        uniq = np.unique(groups)
        order = rng.permutation(len(uniq))
        sizes = pd.Series(groups).value_counts()
        target, acc, test_groups = _n_test(n, test_size), 0, []
        for g in uniq[order]:
            if acc >= target:
                break
            test_groups.append(g)
            acc += int(sizes[g])
        is_test = np.isin(groups, test_groups)
        perm = rng.permutation(n)
        train_idx = perm[~is_test[perm]]
        test_idx = perm[is_test[perm]]
    else:
        perm = rng.permutation(n)
        k = _n_test(n, test_size)
        test_idx, train_idx = perm[:k], perm[k:]
    if n_rows is not None:
        # the file is sorted by class: take the first rows of the shuffled order
        frac = len(test_idx) / n
        k = max(1, min(n_rows - 1, round(n_rows * frac)))
        train_idx, test_idx = train_idx[: n_rows - k], test_idx[:k]
    classes = [0, 1] if binary else [1, 2, 3, 4, 5]
    class_names = ["other", "seizure"] if binary else EPILEPTIC_CLASS_NAMES
    desc = (
        "Epileptic Seizure Recognition (UCI, rebuilt from the Bonn EEG archive, Andrzejak et al. 2001): "
        "178 EEG samples per row.\n"
        + ("binary: seizure (y==1) -> 1, else 0.\n" if binary else "5 classes: 1 seizure, 2 tumour area, "
           "3 healthy area, 4 eyes closed, 5 eyes open.\n")
        + f"{n} rows; shuffled split (random_state={random_state}, test_size={test_size}"
        + (", by recording" if by_group else "") + f"): {len(train_idx)} train / {len(test_idx)} test."
    )
    return Dataset(
        name="epileptic_seizure",
        X_train=X[train_idx],
        y_train=y[train_idx],
        X_test=X[test_idx],
        y_test=y[test_idx],
        feature_names=feats,
        task=_classification_task(classes),
        classes=classes,
        class_names=class_names,
        description=desc,
        source_path=str(path),
        target_name="y",
        groups_train=groups[train_idx],
        groups_test=groups[test_idx],
    )


# --------------------------------------------------------------------------- mnist


def _load_mnist(*, scale: bool = True, n_rows: int | None = None) -> Dataset:
    n_rows = _check_n_rows(n_rows)
    path = _file("mnist/mnist.npz")
    sl = slice(None, n_rows)
    with np.load(path) as z:
        parts = {k: z[k][sl] for k in ("X_train", "y_train", "X_test", "y_test")}
    Xs = [parts[k].astype(np.float32) for k in ("X_train", "X_test")]
    if scale:
        Xs = [x / np.float32(255) for x in Xs]
    desc = (
        "MNIST handwritten digits (LeCun, Cortes, Burges): 28x28 images flattened row-major, "
        f"10 classes; official split {len(Xs[0])} train / {len(Xs[1])} test; pixels "
        + ("scaled to [0, 1]." if scale else "in 0..255.")
    )
    return Dataset(
        name="mnist",
        X_train=Xs[0],
        y_train=parts["y_train"].astype(np.int64),
        X_test=Xs[1],
        y_test=parts["y_test"].astype(np.int64),
        feature_names=[f"pixel{i}" for i in range(Xs[0].shape[1])],
        task="multiclass",
        classes=list(range(10)),
        description=desc,
        source_path=str(path),
        target_name="y",
    )

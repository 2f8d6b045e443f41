"""The real benchmark data sets of ``shared/data``, loaded by name.

Every set described in ``shared/data/MANIFEST.md`` is available as NumPy
arrays with :func:`load` and as a dxrf zarr group with :func:`to_zarr`::

    >>> from dxrf import datasets
    >>> ds = datasets.load("adult")                 # doctest: +SKIP
    >>> ds.X_train.shape, ds.X_test.shape           # doctest: +SKIP
    ((32561, 105), (16281, 105))
    >>> datasets.to_zarr("flights_3m", "f3m.zarr")  # doctest: +SKIP

Files are looked up in ``$DXRF_DATA_DIR``, else a ``shared/data`` beside the
checkout, else the user cache (:func:`data_dir`, :mod:`dxrf.datasets.cache`).
Loading never downloads: a missing file fails in one line naming the data set,
its URL and the command that fetches it, ``dxrf data fetch NAME``.

Splits
------
* ``adult``, ``mnist``: the official train/test files.
* UCI regression sets (Yang et al. 2016): ``split=k`` uses column ``k`` of the
  published test masks.
* ``epileptic_seizure``: a shuffled split with ``test_size`` and
  ``random_state`` (optionally by recording, ``by_group=True``).
* ``nycflights13``, ``flights_3m``: a random split of the *raw* file rows
  (``test_size``, ``random_state``), made before rows with missing values are
  dropped, so that :func:`load` and the streaming :func:`to_zarr` select
  exactly the same rows.
"""

from __future__ import annotations

import dataclasses
import gzip
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dxrf.datasets import cache as _data_cache
from dxrf import io as _io
from dxrf.core.validation import check_fraction, check_int

__all__ = ["Dataset", "data_dir", "load", "names", "to_zarr"]

ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
    "income",
]
ADULT_CATEGORICAL = [
    "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
    "native-country",
]
NYCFLIGHTS_FEATURES = [
    "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time", "sched_arr_time",
    "air_time", "distance", "hour", "minute",
]
FLIGHTS_3M_FEATURES = ["distance", "hour", "day_of_year"]
UCI_REGRESSION = [
    "protein", "kin40k", "elevators", "pol", "bike", "keggdirected", "keggundirected",
    "pumadyn32nm", "parkinsons", "tamielectric",
]
EPILEPTIC_CLASS_NAMES = ["seizure", "tumour area", "healthy area", "eyes closed", "eyes open"]


@dataclasses.dataclass(repr=False)
class Dataset:
    """A real data set split into training and test parts.

    Attributes
    ----------
    name : str
    X_train, X_test : numpy.ndarray
        Features, float64 (float32 for ``mnist``).
    y_train, y_test : numpy.ndarray
        Targets: float64 for regression, int64 labels for classification.
    feature_names : list of str
    task : {"regression", "binary", "multiclass"}
    classes : list or None
        The label values ``y`` takes (sorted), for classification.
    class_names : list of str or None
        Human-readable names of ``classes``, where the source has them.
    description : str
        Source, encoding, split and row counts.
    source_path : str
        The file the data came from (the training file for ``adult``).
    target_name : str or None
        Column of the source holding the target.
    groups_train, groups_test : numpy.ndarray or None
        Group label of each row (``epileptic_seizure``: the recording file
        part of ``id``, e.g. ``"S093"``), for group-aware validation.
    """

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: list[str]
    task: str
    classes: list | None
    description: str
    source_path: str
    target_name: str | None = None
    class_names: list[str] | None = None
    groups_train: np.ndarray | None = None
    groups_test: np.ndarray | None = None

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return int(self.X_train.shape[1])

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}, task={self.task!r}, train={self.X_train.shape}, "
            f"test={self.X_test.shape}, dtype={self.X_train.dtype})"
        )


# --------------------------------------------------------------------------- locating files


def data_dir() -> Path:
    """The first directory :func:`load` looks in for the real data sets.

    Looked up in this order (see :mod:`dxrf.datasets.cache`): the environment
    variable ``DXRF_DATA_DIR``; then ``shared/data`` (with a ``MANIFEST.md``)
    in a parent directory of this package or of the current working
    directory, so a checkout with a copy of ``shared/`` beside it is found
    wherever it lives (``DXRF_DATA_DISCOVER=0`` turns this off); then the user
    cache that ``dxrf data fetch`` fills (``$XDG_CACHE_HOME/dxrf/data``, by
    default ``~/.cache/dxrf/data``), which may not exist yet.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    FileNotFoundError
        ``DXRF_DATA_DIR`` is set to something that is not a directory.
    """
    env = os.environ.get("DXRF_DATA_DIR")
    if env:
        p = Path(env).expanduser()
        if not p.is_dir():
            raise FileNotFoundError(
                f"DXRF_DATA_DIR={env!r} is not a directory (`dxrf data fetch NAME` creates and fills it)"
            )
        return p.resolve()
    return _data_cache.search_dirs()[0]


def _file(rel: str) -> Path:
    # files are looked up one by one, so a partial shared/data falls back to the cache
    p = _data_cache.locate(rel)
    if p is None:
        raise FileNotFoundError(_data_cache.missing_message(rel))
    return p


# --------------------------------------------------------------------------- helpers


def _check_test_size(value: object) -> float:
    return check_fraction(value, "test_size", what="a number strictly between 0 and 1")


def _check_n_rows(n_rows: object) -> int | None:
    return check_int(n_rows, "n_rows", low=2, allow_none=True)


def _n_test(n: int, test_size: float) -> int:
    k = math.ceil(test_size * n)
    if not 0 < k < n:
        raise ValueError(f"test_size={test_size} leaves an empty part of {n} rows")
    return k


def _split_mask(n: int, test_size: float, random_state: int) -> np.ndarray:
    """Boolean test mask of exactly ceil(test_size * n) rows, from a seeded permutation."""
    perm = np.random.default_rng(random_state).permutation(n)
    mask = np.zeros(n, dtype=bool)
    mask[perm[: _n_test(n, test_size)]] = True
    return mask


def _count_data_rows(path: Path) -> int:
    """Data rows of a CSV file with a header line (streams the file)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    lines = 0
    last = b"\n"
    with opener(path, "rb") as f:
        while block := f.read(1 << 22):
            lines += block.count(b"\n")
            last = block[-1:]
    if last != b"\n":
        lines += 1
    return lines - 1


def _classification_task(classes: list) -> str:
    return "binary" if len(classes) == 2 else "multiclass"


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


# --------------------------------------------------------------------------- flights


def _flights_3m_features(df: pd.DataFrame) -> pd.DataFrame:
    """distance, fractional hour of day and day of year from the raw columns."""
    t = pd.to_datetime(df["date"], format="%Y-%m-%d %H:%M:%S")
    return pd.DataFrame(
        {
            "distance": df["distance"],
            "hour": t.dt.hour + t.dt.minute / 60.0,
            "day_of_year": t.dt.day_of_year,
            "delay": df["delay"],
        },
        index=df.index,
    )


_FLIGHTS = {
    "nycflights13": dict(
        file="nycflights13/flights.csv.gz",
        usecols=[*NYCFLIGHTS_FEATURES, "arr_delay"],
        target="arr_delay",
        features=NYCFLIGHTS_FEATURES,
        derive=None,
        title="nycflights13 flights (all flights departing NYC in 2013, CC0): regression of arr_delay "
        "(minutes) on the numeric columns",
    ),
    "flights_3m": dict(
        file="vega_flights_3m/flights-3m.csv.gz",
        usecols=["date", "delay", "distance"],
        target="delay",
        features=FLIGHTS_3M_FEATURES,
        derive=_flights_3m_features,
        title="Vega flights-3m (US BTS on-time data, Jan-Jun 2001): regression of delay (minutes) on "
        "distance, hour of day (fractional, from date) and day of year",
    ),
}


def _flights_frame(name: str, df: pd.DataFrame) -> pd.DataFrame:
    spec = _FLIGHTS[name]
    if spec["derive"] is not None:
        df = spec["derive"](df)
    return df[[*spec["features"], spec["target"]]]


def _load_flights(
    name: str, *, test_size: float = 0.1, random_state: int = 0, n_rows: int | None = None
) -> Dataset:
    test_size = _check_test_size(test_size)
    n_rows = _check_n_rows(n_rows)
    spec = _FLIGHTS[name]
    path = _file(spec["file"])
    df = _flights_frame(name, pd.read_csv(path, usecols=spec["usecols"], nrows=n_rows))
    n_raw = len(df)
    mask = _split_mask(n_raw, test_size, random_state)
    parts = []
    dropped = []
    for sel in (~mask, mask):
        part = df[sel]
        ok = part.notna().all(axis=1)
        dropped.append(int((~ok).sum()))
        parts.append(part[ok])
    feats, t = spec["features"], spec["target"]
    desc = (
        f"{spec['title']}.\n{n_raw} raw rows; random split of the raw rows (random_state={random_state}, "
        f"test_size={test_size}), then rows with a missing value dropped: {sum(dropped)} dropped "
        f"({dropped[0]} train, {dropped[1]} test); {len(parts[0])} train / {len(parts[1])} test."
    )
    return Dataset(
        name=name,
        X_train=parts[0][feats].to_numpy(np.float64),
        y_train=parts[0][t].to_numpy(np.float64),
        X_test=parts[1][feats].to_numpy(np.float64),
        y_test=parts[1][t].to_numpy(np.float64),
        feature_names=list(feats),
        task="regression",
        classes=None,
        description=desc,
        source_path=str(path),
        target_name=t,
    )


def _flights_to_zarr(
    name: str,
    dest: str | os.PathLike,
    *,
    split: str,
    chunk_rows: int,
    overwrite: bool,
    progress: Any,
    test_size: float = 0.1,
    random_state: int = 0,
    n_rows: int | None = None,
) -> _io.IngestReport:
    test_size = _check_test_size(test_size)
    n_rows = _check_n_rows(n_rows)
    spec = _FLIGHTS[name]
    path = _file(spec["file"])
    n_raw = _count_data_rows(path)
    if n_rows is not None:
        n_raw = min(n_raw, n_rows)
    # the same mask as load(): over the raw rows, before dropping NAs
    keep = _split_mask(n_raw, test_size, random_state) == (split == "test")

    def transform(df: pd.DataFrame) -> pd.DataFrame:
        df = _flights_frame(name, df)
        return df[keep[df.index.to_numpy()]]

    return _io.ingest(
        path,
        dest,
        format="csv",
        target=spec["target"],
        task="regression",
        chunk_rows=chunk_rows,
        nan_policy="drop",
        transform=transform,
        n_rows=n_rows,
        read_options={"usecols": spec["usecols"]},
        overwrite=overwrite,
        progress=progress,
    )


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


# --------------------------------------------------------------------------- registry


def _uci(name: str) -> Callable[..., Dataset]:
    def loader(**kw: Any) -> Dataset:
        return _load_uci(name, **kw)

    return loader


def _flights(name: str) -> Callable[..., Dataset]:
    def loader(**kw: Any) -> Dataset:
        return _load_flights(name, **kw)

    return loader


_LOADERS: dict[str, Callable[..., Dataset]] = {
    "adult": _load_adult,
    "epileptic_seizure": _load_epileptic,
    "mnist": _load_mnist,
    "nycflights13": _flights("nycflights13"),
    "flights_3m": _flights("flights_3m"),
    **{name: _uci(name) for name in UCI_REGRESSION},
}


def names() -> list[str]:
    """Names accepted by :func:`load` and :func:`to_zarr`.

    Returns
    -------
    list of str
    """
    return list(_LOADERS)


def _canonical(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    if key not in _LOADERS:
        raise ValueError(f"unknown data set {name!r}; known: {', '.join(_LOADERS)}")
    return key


def load(name: str, *, download: bool = False, **kw: Any) -> Dataset:
    """Load a real data set as NumPy arrays.

    Parameters
    ----------
    name : str
        One of :func:`names`.
    download : bool, default=False
        Fetch the set's missing files into the cache first, as ``dxrf data
        fetch NAME`` does (from ``$DXRF_DATA_MIRROR``, else from the sources,
        verified against the manifest; progress lines go to stderr). The
        workflows (``dxrf reproduce``) load with it, so that they run on a
        machine with network access and no data; the default only reads.
    **kw
        Options of the data set (unknown options raise TypeError):

        * ``adult``: ``missing_level=False`` (True: ``?`` is its own level,
          108 instead of 105 columns), ``n_rows``.
        * ``epileptic_seizure``: ``binary=True`` (seizure vs rest; False:
          labels 1..5), ``test_size=0.2``, ``random_state=0``,
          ``by_group=False`` (True: whole recordings on one side), ``n_rows``
          (taken from the shuffled order; the file is sorted by class).
        * ``mnist``: ``scale=True`` (pixels / 255), ``n_rows`` (of each part).
        * ``nycflights13``, ``flights_3m``: ``test_size=0.1``,
          ``random_state=0``, ``n_rows``.
        * UCI regression sets: ``split=0`` (0..9), ``n_rows``.

        ``n_rows`` reads only the first rows of each file (quick tests).

    Returns
    -------
    Dataset

    Raises
    ------
    ValueError
        Unknown name or bad option value.
    FileNotFoundError
        A file of the set is in none of the data directories (the message
        names the set, the URL it would be fetched from and ``dxrf data
        fetch NAME``), or ``DXRF_DATA_DIR`` is not a directory.
    dxrf.datasets.cache.DataFetchError
        With ``download``: a missing file could not be downloaded or did not
        verify (the message names the set, the URL tried and ``dxrf data fetch
        NAME``); nothing of it is kept.
    """
    key = _canonical(name)
    if download:
        fetch_missing(key)
    return _LOADERS[key](**kw)


def fetch_missing(name: str) -> None:
    """Fetch the files of data set ``name`` that are in none of the data directories (see :func:`load`)."""
    import sys

    key = _canonical(name)
    if all(_data_cache.locate(f.path) is not None for f in _data_cache.files() if key in f.datasets):
        return
    if sys.stderr.isatty():  # a notice before a download that may take a while; never in logs, so a failure is one line
        print(f"data: fetching data set {key!r} (`dxrf data list` shows its files and sources)", file=sys.stderr, flush=True)
    lines: list[str] = []
    _data_cache.fetch(key, progress=lines.append)
    for line in lines:
        print(f"data: {line}", file=sys.stderr, flush=True)


def to_zarr(
    name: str,
    dest: str | os.PathLike,
    *,
    split: str = "train",
    chunk_rows: int = 50_000,
    overwrite: bool = False,
    progress: Any = False,
    **kw: Any,
) -> _io.IngestReport:
    """Write the training or test part of a real data set as a dxrf zarr group.

    ``nycflights13`` and ``flights_3m`` stream from their CSV files through
    :func:`dxrf.io.ingest` (bounded memory); the other sets are loaded with
    :func:`load` and written with :func:`dxrf.io.write_zarr`. The rows and
    values are those of ``load(name, **kw)`` (stored as float32).

    Parameters
    ----------
    name : str
        One of :func:`names`.
    dest : path
        Directory of the zarr group to create.
    split : {"train", "test"}, default "train"
    chunk_rows : int, default 50_000
    overwrite : bool, default False
    progress : bool or callable, default False
        As in :func:`dxrf.io.ingest`.
    **kw
        Options of the data set, as in :func:`load`; for the UCI regression
        sets the test-mask column is ``fold=k`` here (``split=k`` of
        :func:`load`), since ``split`` names the part.

    Returns
    -------
    dxrf.io.IngestReport
    """
    key = _canonical(name)
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    # before loading the data set: a destination that will be refused is refused now
    _io.check_chunk_rows_and_destination(chunk_rows, dest, overwrite)
    if key in _FLIGHTS:
        return _flights_to_zarr(
            key, dest, split=split, chunk_rows=chunk_rows, overwrite=overwrite, progress=progress, **kw
        )
    if key in UCI_REGRESSION and "fold" in kw:
        kw["split"] = kw.pop("fold")
    ds = load(key, **kw)
    X, y = (ds.X_train, ds.y_train) if split == "train" else (ds.X_test, ds.y_test)
    attrs: dict[str, Any] = {
        "source": ds.source_path,
        "format": "dataset",
        "dataset": key,
        "split": split,
        "description": ds.description,
    }
    if ds.class_names is not None:
        attrs["class_names"] = ds.class_names
    if key == "adult":
        # keep the encoding, so a test file can be ingested like the training file
        levels: dict[str, list[str]] = {}
        for c in ds.feature_names:
            col, eq, lv = c.partition("=")
            if eq:
                levels.setdefault(col, []).append(lv)
        attrs["levels"] = levels
    return _io.write_zarr(
        X,
        dest,
        y=y,
        columns=ds.feature_names,
        chunk_rows=chunk_rows,
        attrs=attrs,
        overwrite=overwrite,
        target=ds.target_name,
        classes=ds.classes,
        task="regression" if ds.task == "regression" else "classification",
        progress=progress,
    )

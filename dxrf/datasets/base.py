"""What every data set loader shares: the :class:`Dataset`, the lookup of files and the split helpers."""

from __future__ import annotations

import dataclasses
import gzip
import math
import os
from pathlib import Path

import numpy as np

from dxrf.datasets import cache as _data_cache
from dxrf.datasets.missing import missing_message
from dxrf.core.validation import check_fraction, check_int


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
        raise FileNotFoundError(missing_message(rel))
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

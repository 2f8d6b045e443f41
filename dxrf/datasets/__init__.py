"""The real data sets: loading (:mod:`.loaders`), the file cache and fetches
(:mod:`.cache`), derivation recipes (:mod:`.recipes`) and the manifest.

    >>> from dxrf import datasets
    >>> ds = datasets.load("kin40k")  # doctest: +SKIP
"""

from dxrf.datasets.cache import locate, missing_message
from dxrf.datasets.loaders import NYCFLIGHTS_FEATURES, Dataset, data_dir, fetch_missing, load, names, to_zarr

__all__ = [
    "NYCFLIGHTS_FEATURES",
    "Dataset",
    "data_dir",
    "fetch_missing",
    "load",
    "locate",
    "missing_message",
    "names",
    "to_zarr",
]

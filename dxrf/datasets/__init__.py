"""The real data sets: loading (:mod:`.loaders`), the file cache and fetches
(:mod:`.cache`), what is said when files are missing (:mod:`.missing`),
derivation recipes (:mod:`.recipes`) and the manifest.

    >>> from dxrf import datasets
    >>> ds = datasets.load("kin40k")  # doctest: +SKIP
"""

from dxrf.datasets.cache import locate
from dxrf.datasets.loaders import NYCFLIGHTS_FEATURES, Dataset, data_dir, fetch_missing, load, names, to_zarr
from dxrf.datasets.missing import missing_message, require

__all__ = [
    "NYCFLIGHTS_FEATURES",
    "Dataset",
    "data_dir",
    "fetch_missing",
    "load",
    "locate",
    "missing_message",
    "names",
    "require",
    "to_zarr",
]

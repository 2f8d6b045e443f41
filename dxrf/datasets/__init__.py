"""The real data sets: loading (:mod:`.loaders`), the file cache and fetches
(:mod:`.cache`), derivation recipes (:mod:`.recipes`) and the manifest.

    >>> from dxrf import datasets
    >>> ds = datasets.load("kin40k")  # doctest: +SKIP
"""

from dxrf.datasets.loaders import Dataset, data_dir, fetch_missing, load, names, to_zarr

__all__ = ["Dataset", "data_dir", "fetch_missing", "load", "names", "to_zarr"]

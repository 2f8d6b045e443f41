"""Model files: any fitted dxrf estimator as a zarr group of arrays and JSON.

A model group holds its numeric arrays as zarr arrays and everything else
(class name, constructor parameters, scalars, strings) as JSON attributes with
a format version. Nothing is pickled and loading never imports code named by
the file: classes are looked up in the registry of persistable classes
(:mod:`dxrf.core.persistable`), which each class joins when it is defined. Writes go to a
temporary sibling that is renamed into place, so an interrupted save leaves
the previous model intact.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from dxrf.core.errors import ModelFormatError
from dxrf.core.persistable import SaveMixin, install_writer, lookup
from dxrf.core.version import __version__
from dxrf.io.files import KIND_ATTR
from dxrf.io.storage import atomic_group, group_store, resolve, zarr_target
from dxrf.io.integrity import IntegrityError, array_options, checked_reader, chunk_checksums, metadata_failure, verify
from dxrf.io.local_store import UnsafeFileError
from dxrf.persist.schema import check_fitted_names, check_fitted_values
from dxrf.kernels.kernel import FeatureKernel
from dxrf.stats.feature_stats import FeatureStats

__all__ = ["FORMAT_VERSION", "save", "load", "SaveMixin", "ModelFormatError"]

FORMAT_VERSION = 2  # 2: checksummed arrays, declared fitted attributes
MARKER = "dxrf_model_format"
_KERNEL_ARRAYS = ("scale", "W", "b", "signs", "norms", "whitening", "lengthscales")
_STATS_ARRAYS = ("gram", "sum", "cross", "ysum", "yy")


# -- encoding -----------------------------------------------------------------------


class _Writer:
    def __init__(self, group: zarr.Group) -> None:
        self.group = group
        self.count = 0

    def array(self, a: np.ndarray) -> dict:
        a = np.asarray(a)
        if a.dtype == object or a.dtype.kind in "USO":
            values = a.tolist()
            if not all(isinstance(v, (str, int, float, bool)) or v is None for v in np.ravel(a).tolist()):
                raise TypeError(f"cannot save an object array holding {type(np.ravel(a)[0]).__name__}")
            return {"__values__": values, "dtype": "str" if a.dtype.kind in "US" else "object", "shape": list(a.shape)}
        if a.dtype.kind not in "biuf":
            raise TypeError(f"cannot save an array of dtype {a.dtype}")
        name = f"a{self.count}"
        self.count += 1
        # stored whole, uncompressed and checksummed: the reader can check a chunk's size before reading it
        arr = self.group.create_array(
            name, shape=a.shape, dtype=a.dtype, chunks=tuple(max(s, 1) for s in a.shape) or None, fill_value=0,
            **array_options(),
        )
        if a.size:
            arr[...] = a
        # the chunk's checksum binds it to this entry: a chunk swapped with another array's is refused
        return {"__array__": name, "shape": list(a.shape), "dtype": str(a.dtype), "crc32c": chunk_checksums(arr)}

    def sub(self, kind: str) -> tuple[_Writer, str]:
        name = f"g{self.count}"
        self.count += 1
        return _Writer(self.group.create_group(name)), name

    def value(self, v: Any, where: str) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, numbers.Integral):
            return int(v)
        if isinstance(v, numbers.Real):
            v = float(v)
            return v if math.isfinite(v) else {"__float__": repr(v)}
        if isinstance(v, np.ndarray):
            return self.array(v)
        if isinstance(v, FeatureKernel):
            w, name = self.sub("kernel")
            spec = {k: (None if getattr(v, k) is None else w.array(getattr(v, k))) for k in _KERNEL_ARRAYS}
            spec.update(activation=v.activation, n_features_in=v.n_features_in, pieces=v.pieces, bandwidth=v.bandwidth)
            w.group.attrs["kernel"] = spec
            return {"__kernel__": name}
        if isinstance(v, FeatureStats):
            w, name = self.sub("stats")
            spec = {k: (None if getattr(v, k) is None else w.array(getattr(v, k))) for k in _STATS_ARRAYS}
            # the number of rows, or the total weight of weighted statistics (a float)
            spec["n"] = v.n if isinstance(v.n, float) else int(v.n)
            w.group.attrs["stats"] = spec
            return {"__stats__": name}
        if isinstance(v, (list, tuple)):
            return {"__list__": [self.value(x, f"{where}[{i}]") for i, x in enumerate(v)], "tuple": isinstance(v, tuple)}
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                # keys that are numbers (a class_weight by class label): stored as (key, value) pairs
                if not all(isinstance(k, (str, numbers.Real)) and not isinstance(k, bool) for k in v):
                    raise TypeError(f"cannot save {where}: dict keys must be strings or numbers")
                return {"__items__": [[self.value(k, f"{where} key"), self.value(x, f"{where}[{k!r}]")] for k, x in v.items()]}
            return {"__dict__": {k: self.value(x, f"{where}.{k}") for k, x in v.items()}}
        if hasattr(v, "get_params") and lookup(type(v).__name__) is not None:
            w, name = self.sub("estimator")
            _write_estimator(w, v)
            return {"__estimator__": name}
        if isinstance(v, (np.random.RandomState, np.random.Generator)):
            raise TypeError(f"cannot save {where}: a random generator; use an int random_state to save models")
        raise TypeError(f"cannot save {where} of type {type(v).__name__}")


def _write_estimator(w: _Writer, est: Any) -> None:
    name = type(est).__name__
    if lookup(name) is not type(est):
        raise TypeError(f"only dxrf estimators can be saved, got {type(est).__module__}.{name}")
    params = {k: w.value(v, f"parameter {k}") for k, v in est.get_params(deep=False).items()}
    skip = set(getattr(est, "_persist_exclude", ()))
    names = [k for k in vars(est) if k.endswith("_") and not k.startswith("_") and k not in skip]
    try:
        check_fitted_names(type(est), names, f"cannot save {name}")
    except ModelFormatError as exc:
        raise TypeError(str(exc)) from None
    fitted = {}
    for key in names:
        fitted[key] = w.value(vars(est)[key], f"attribute {key}")
    w.group.attrs.update({"class": name, "params": params, "fitted": fitted})


def save(
    estimator: Any,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    metadata: dict | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Path | str:
    """Save a (fitted or unfitted) dxrf estimator as a zarr group.

    Parameters
    ----------
    estimator : dxrf estimator
    path : path
        Directory of the zarr group. Written to a temporary sibling and
        renamed into place.
    overwrite : bool, default=False
        Replace an existing model at ``path``. Without it an existing
        ``path`` raises :class:`~dxrf.io.DestinationExistsError`; even with
        it, anything but a dxrf model (a data group, predictions, a file, a
        directory of other files) is refused.
    metadata : dict, optional
        Extra values stored with the model (numbers, strings, arrays, lists,
        dicts), e.g. the standardisation the model expects; read back with
        ``load(path, with_metadata=True)``.
    storage_options : dict, optional
        Options of the fsspec file system of a URL ``path``
        (``s3://bucket/model.zarr``): there the model is written under a
        temporary prefix and copied into place with its root metadata last.

    Returns
    -------
    Path or str
        ``path`` (a str for a URL).
    """
    loc = resolve(path, storage_options, what="path")
    with atomic_group(path, overwrite, kind="model", storage_options=storage_options) as tmp:
        root = zarr.open_group(zarr_target(tmp), mode="w", zarr_format=3)
        writer = _Writer(root)
        _write_estimator(writer, estimator)
        extra = {} if metadata is None else {"metadata": writer.value(dict(metadata), "metadata")}
        root.attrs.update({MARKER: FORMAT_VERSION, KIND_ATTR: "model", "dxrf_version": __version__, **extra})
    return Path(path) if loc.local else loc.url


# -- decoding -----------------------------------------------------------------------


def _table(table: Any, where: str, shape: Any) -> str | None:
    """A model array's checksum entry (one chunk; none for an empty array): None for files written before it."""
    chunks = 0 if 0 in tuple(shape) else 1
    if table is not None and (not isinstance(table, str) or len(table) != 8 * chunks):
        raise ModelFormatError(f"{where}: the model's checksum entry is malformed")
    return table


class _Reader:
    def __init__(self, group: zarr.Group, where: str) -> None:
        self.group = group
        self.where = where

    def array(self, spec: dict) -> np.ndarray:
        if "__values__" in spec:
            a = np.array(spec["__values__"], dtype=object if spec.get("dtype") == "object" else None)
            if list(a.shape) != list(spec["shape"]):
                raise ModelFormatError(f"{self.where}: array has shape {a.shape}, the file says {tuple(spec['shape'])}")
            return a
        name, shape, dtype = spec.get("__array__"), spec.get("shape"), spec.get("dtype")
        if not isinstance(name, str) or not isinstance(shape, list) or not isinstance(dtype, str):
            raise ModelFormatError(f"{self.where}: malformed array entry {spec!r}")
        try:
            arr = self.group[name]
        except KeyError:
            raise ModelFormatError(f"{self.where}: array {name!r} is missing") from None
        except Exception as exc:  # zarr raises many types for corrupt metadata
            raise ModelFormatError(f"{self.where}: array {name!r} has corrupt metadata: {metadata_failure(exc)}") from None
        if list(arr.shape) != list(shape):
            raise ModelFormatError(
                f"{self.where}: array {name!r} has shape {tuple(arr.shape)}, the model expects {tuple(shape)}"
            )
        if str(arr.dtype) != dtype:
            raise ModelFormatError(f"{self.where}: array {name!r} has dtype {arr.dtype}, the model expects {dtype}")
        if arr.dtype.kind not in "biuf":
            raise ModelFormatError(f"{self.where}: array {name!r} has dtype {arr.dtype}; model arrays hold numbers")
        # dxrf stores each model array as one chunk, uncompressed: with the exact-size check below, what is
        # allocated is what the file holds (a small file cannot declare a large array); checked from metadata, O(1)
        if list(arr.chunks) != [max(s, 1) for s in arr.shape]:
            raise ModelFormatError(
                f"{self.where}: array {name!r} of shape {tuple(arr.shape)} is stored in chunks of {tuple(arr.chunks)}; "
                "dxrf model arrays are stored as one chunk"
            )
        where = f"{self.where}: array {name!r}"
        try:
            verify(arr, None, where, exact_size=True)
            return np.asarray(checked_reader(arr, where, _table(spec.get("crc32c"), where, arr.shape))[...])
        except IntegrityError as exc:
            raise ModelFormatError(str(exc)) from None

    def value(self, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        if "__float__" in v:
            return float(v["__float__"])
        if "__array__" in v or "__values__" in v:
            return self.array(v)
        if "__list__" in v:
            items = [self.value(x) for x in v["__list__"]]
            return tuple(items) if v.get("tuple") else items
        if "__dict__" in v:
            return {k: self.value(x) for k, x in v["__dict__"].items()}
        if "__items__" in v:
            pairs = v["__items__"]
            if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
                raise ModelFormatError(f"{self.where}: a dict of (key, value) pairs is malformed")
            return {self.value(k): self.value(x) for k, x in pairs}
        for tag in ("__kernel__", "__stats__", "__estimator__"):
            if tag in v:
                try:
                    sub = _Reader(self.group[v[tag]], f"{self.where}/{v[tag]}")
                except KeyError:
                    raise ModelFormatError(f"{self.where}: group {v[tag]!r} is missing") from None
                except Exception as exc:  # corrupt metadata
                    raise ModelFormatError(f"{self.where}: group {v[tag]!r} cannot be read: {metadata_failure(exc)}") from None
                return sub.decode(tag)
        raise ModelFormatError(f"{self.where}: unknown entry {sorted(v)}")

    def decode(self, tag: str) -> Any:
        attrs = dict(self.group.attrs)
        if tag == "__estimator__":
            return _read_estimator(self)
        spec = attrs.get("kernel" if tag == "__kernel__" else "stats")
        if spec is None:
            raise ModelFormatError(f"{self.where}: description missing")
        arrays = {k: None if spec.get(k) is None else self.array(spec[k]) for k in (_KERNEL_ARRAYS if tag == "__kernel__" else _STATS_ARRAYS)}
        for k, a in arrays.items():
            if a is not None and (a.dtype.kind not in "biuf" or not np.isfinite(a).all()):
                raise ModelFormatError(f"{self.where}: the {tag.strip('_')}'s array {k!r} is not all finite numbers")
        try:
            if tag == "__kernel__":
                return FeatureKernel(
                    spec["activation"], arrays["scale"], int(spec["n_features_in"]), W=arrays["W"], b=arrays["b"],
                    pieces=int(spec["pieces"]), signs=arrays["signs"], norms=arrays["norms"], bandwidth=float(spec["bandwidth"]),
                    whitening=arrays["whitening"], lengthscales=arrays["lengthscales"],
                )
            return FeatureStats(arrays["gram"], arrays["sum"], spec["n"] if isinstance(spec["n"], float) else int(spec["n"]), arrays["cross"], arrays["ysum"], arrays["yy"])
        except (ValueError, TypeError, KeyError) as exc:
            raise ModelFormatError(f"{self.where}: inconsistent {tag.strip('_')}: {exc}") from None


def _read_estimator(r: _Reader) -> Any:
    attrs = dict(r.group.attrs)
    name = attrs.get("class")
    cls = lookup(name)
    if cls is None:
        raise ModelFormatError(f"{r.where}: unknown estimator class {name!r}")
    try:
        params = {k: r.value(v) for k, v in attrs["params"].items()}
        est = cls(**params)
    except (KeyError, TypeError) as exc:
        raise ModelFormatError(f"{r.where}: cannot rebuild {name}: {exc}") from None
    if hasattr(est, "_check_params"):
        try:  # the stored parameters are checked as fit checks them
            est._check_params()
        except (ValueError, TypeError) as exc:
            raise ModelFormatError(f"{r.where}: invalid stored parameter of {name}: {exc}") from None
    fitted = attrs.get("fitted", {})
    if not isinstance(fitted, dict):
        raise ModelFormatError(f"{r.where}: 'fitted' must be a mapping of attribute names")
    check_fitted_names(cls, fitted, r.where)  # before any array is read
    for key, val in fitted.items():
        setattr(est, key, r.value(val))
    check_fitted_values(est, r.where)
    kernel = getattr(est, "kernel_", None)
    n_in = getattr(est, "n_features_in_", None)
    if isinstance(kernel, FeatureKernel):
        if kernel.W is not None and kernel.W.shape[0] != kernel.n_features_in:
            raise ModelFormatError(f"{r.where}: kernel W has {kernel.W.shape[0]} rows for {kernel.n_features_in} inputs")
        if n_in is not None and n_in != kernel.n_features_in:
            raise ModelFormatError(f"{r.where}: n_features_in_={n_in} but the kernel takes {kernel.n_features_in} inputs")
    if hasattr(est, "_check_loaded"):
        try:
            est._check_loaded()
        except ModelFormatError as exc:
            raise ModelFormatError(f"{r.where}: {exc}") from None
    return est


def load(
    path: str | os.PathLike | Any, *, with_metadata: bool = False, storage_options: Mapping[str, Any] | None = None
) -> Any:
    """Load an estimator saved by :func:`save` (or ``est.save``).

    With ``with_metadata=True`` returns ``(estimator, metadata)``. ``path``
    may be a local path, a URL (``s3://...``, with ``storage_options``) or a
    zarr store object.

    Raises
    ------
    ModelFormatError (a ValueError)
        When the path is not a dxrf model, was written by another format
        version, or its arrays do not have the shapes the model records.
    """
    try:
        store, name, loc = group_store(path, storage_options, what="path", holds="dxrf model files")
    except UnsafeFileError as exc:
        raise ModelFormatError(str(exc)) from None
    except ValueError as exc:
        local = not isinstance(path, str) or "://" not in path or path.startswith("file://")
        if local and isinstance(path, (str, os.PathLike)):
            raise ModelFormatError(f"{str(path)!r} is not a dxrf model (no zarr group there)") from None
        raise ModelFormatError(f"{exc}; it is not a dxrf model") from None
    path = name
    try:
        root = zarr.open_group(store, mode="r")
    except Exception as exc:  # zarr raises several types for corrupt metadata
        raise ModelFormatError(f"{str(path)!r} is not a readable zarr group: {metadata_failure(exc)}") from None
    version = root.attrs.get(MARKER)
    if version is None:
        raise ModelFormatError(f"{str(path)!r} is a zarr group but not a dxrf model (no {MARKER!r} attribute)")
    if type(version) is not int or version != FORMAT_VERSION:
        raise ModelFormatError(
            f"{str(path)!r} has model format version {version!r}; this dxrf reads version {FORMAT_VERSION}"
        )
    reader = _Reader(root, str(path))
    try:
        est = _read_estimator(reader)
        meta = reader.value(root.attrs.get("metadata", {"__dict__": {}})) if with_metadata else None
    except ModelFormatError:
        raise
    except Exception as exc:  # a malformed description: missing keys, wrong types
        raise ModelFormatError(f"{str(path)!r} is a corrupt dxrf model: {type(exc).__name__}: {exc}") from None
    return (est, meta) if with_metadata else est


# est.save(...) (the mixin lives in dxrf.core, below this layer) reaches save through this hook
install_writer(save)

"""Classes that can be written to model files, each declaring its own fitted attributes.

A class becomes persistable by deriving from :class:`SaveMixin` and setting
``_fitted_schema`` in its own body: a mapping of fitted attribute name to
kind (see :data:`KINDS`), usually built with :func:`fitted` from the shared
blocks below. Defining the class registers it under its name; a subclass
that declares nothing is not registered (it inherits the declaration but
cannot be saved or loaded as itself). The registry is what the model reader
looks classes up in, so loading never imports code named by a file.

The model writer sits in a higher layer (the ``persist`` package); it installs
itself here with :func:`install_writer` when imported, which importing
``dxrf`` always does. ``SaveMixin.save`` calls it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

__all__ = [
    "KINDS",
    "COMMON",
    "MAP",
    "MODEL",
    "SaveMixin",
    "fitted",
    "fitted_schema",
    "install_writer",
    "lookup",
    "register",
    "registered",
]

#: kinds of fitted values; a declared kind may end in "?" for an attribute that only some fits set
KINDS = frozenset({
    "int",  # a non-negative Python int
    "real",  # a finite number
    "real-or-nan",  # a number, NaN allowed (a score lost to rounding)
    "real-or-none",
    "bool",
    "str",
    "finite",  # a finite number or a numeric array of finite values (coefficients)
    "finite-or-none",
    "numbers",  # a numeric array, NaN allowed (validation curves)
    "labels",  # a 1-d array of at least two distinct class labels
    "labels-or-none",
    "names",  # a 1-d array of strings (feature_names_in_)
    "index",  # a 1-d array of non-negative integers
    "index-or-none",
    "kernel",  # a FeatureKernel
    "stats",  # a FeatureStats
    "estimator",  # a registered persistable class
    "dict",
})

#: the names a fitted attribute may have: public, lower case, with sklearn's trailing underscore
FITTED_NAME = re.compile(r"[a-z][a-z0-9_]*_\Z")

# -- shared blocks: what every estimator, every feature map, every learner has --------------

#: every fitted estimator
COMMON: Mapping[str, str] = MappingProxyType({"n_features_in_": "int", "feature_names_in_": "names?"})
#: a fitted feature map or selector
MAP: Mapping[str, str] = MappingProxyType({**COMMON, "kernel_": "kernel"})
#: a fitted learner: its fitted features and their kernel, and the passes over X it made
MODEL: Mapping[str, str] = MappingProxyType(
    {**COMMON, "features_": "estimator", "kernel_": "kernel", "n_passes_": "int"}
)


def fitted(*blocks: Mapping[str, str], **entries: str) -> Mapping[str, str]:
    """A fitted-attribute declaration: the blocks merged in order, then ``entries``.

    Parameters
    ----------
    *blocks : mapping of str to str
        Declarations to start from (:data:`COMMON`, :data:`MAP`, a parent's
        ``_fitted_schema``); a later one overrides an earlier one's kind.
    **entries : str
        Further attributes and their kinds.

    Returns
    -------
    mapping of str to str
        Read-only, in declaration order (the order missing attributes are
        named in on load).
    """
    merged: dict[str, str] = {}
    for block in blocks:
        merged.update(block)
    merged.update(entries)
    return MappingProxyType(merged)


_REGISTRY: dict[str, type] = {}


def _check_declaration(cls: type, schema: object) -> dict[str, str]:
    """``schema`` as a plain dict, or a TypeError naming what is wrong with it."""
    if not isinstance(schema, Mapping):
        raise TypeError(f"{cls.__name__}._fitted_schema must be a mapping of attribute name to kind")
    for name, kind in schema.items():
        if not isinstance(name, str) or not FITTED_NAME.match(name):
            raise TypeError(f"{cls.__name__} declares {name!r}: fitted attribute names are lower case and end in '_'")
        if not isinstance(kind, str) or kind.removesuffix("?") not in KINDS:
            raise TypeError(f"{cls.__name__} declares {name!r} of unknown kind {kind!r}; kinds: {', '.join(sorted(KINDS))}")
    return dict(schema)


def register(cls: type) -> type:
    """Register ``cls`` (which declares ``_fitted_schema``) under its name; return it.

    Called by :meth:`SaveMixin.__init_subclass__`. The declaration is
    checked here, when the class is defined, so a wrong kind fails at import
    and not when a model is loaded. A second class of the same name is
    refused: the name is what a model file records.
    """
    schema = _check_declaration(cls, cls.__dict__.get("_fitted_schema"))
    other = _REGISTRY.get(cls.__name__)
    if other is not None and other is not cls:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__}: a persistable class named {cls.__name__!r} is already "
            f"registered ({other.__module__}.{other.__qualname__}); model files name classes by name"
        )
    cls._fitted_schema = MappingProxyType(schema)
    _REGISTRY[cls.__name__] = cls
    return cls


def registered() -> dict[str, type]:
    """The registered classes by name (a copy)."""
    return dict(_REGISTRY)


def lookup(name: object) -> type | None:
    """The registered class called ``name``, or None (also for a name that is not a str)."""
    return _REGISTRY.get(name) if isinstance(name, str) else None


def fitted_schema(cls: type) -> Mapping[str, str]:
    """The fitted attributes ``cls`` declares; a TypeError for a class that is not registered."""
    if lookup(cls.__name__) is not cls:
        raise TypeError(f"{cls.__name__} declares no fitted attributes for model files")
    return cls._fitted_schema


# -- the writer, installed from above (by the persist package) --------------------------------

Writer = Callable[..., "Path | str"]
_writer: Writer | None = None


def install_writer(writer: Writer) -> None:
    """Make ``writer`` (the format's ``save``, see :func:`dxrf.save`) the function behind ``est.save``."""
    global _writer
    _writer = writer


class SaveMixin:
    """Adds ``save(path)`` and registers each subclass that declares ``_fitted_schema``."""

    #: fitted attribute name -> kind; set in a class body to make that class persistable
    _fitted_schema: ClassVar[Mapping[str, str]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_fitted_schema" in cls.__dict__:
            register(cls)

    def save(
        self,
        path: str | os.PathLike,
        *,
        overwrite: bool = False,
        metadata: dict | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> Path | str:
        """Save this estimator as a zarr group (arrays + JSON, no pickle); see :func:`dxrf.save`."""
        if _writer is None:  # only when the persist package was never imported; importing dxrf imports it
            raise RuntimeError("no model writer is installed: import dxrf before saving")
        return _writer(self, path, overwrite=overwrite, metadata=metadata, storage_options=storage_options)

"""The model format: fitted estimators as zarr groups of arrays and JSON.

Importing this package installs the writer behind ``est.save`` (see
:mod:`dxrf.core.persistable`).
"""

from dxrf.persist.format import FORMAT_VERSION, ModelFormatError, SaveMixin, load, save

__all__ = ["FORMAT_VERSION", "ModelFormatError", "SaveMixin", "load", "save"]

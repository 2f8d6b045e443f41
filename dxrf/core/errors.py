"""Error types raised in several layers, kept at the bottom so none imports upward."""

from __future__ import annotations

__all__ = ["ModelFormatError"]


class ModelFormatError(ValueError):
    """A model file is missing, corrupt, of another format version, or inconsistent."""

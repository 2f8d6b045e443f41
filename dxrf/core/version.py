"""The package version, here so that lower layers (the model writer) can record it."""

__all__ = ["__version__"]

__version__ = "0.1.0"

"""The ``dxrf`` command line: one module per command group."""

from dxrf.cli.commands import main

__all__ = ["main"]

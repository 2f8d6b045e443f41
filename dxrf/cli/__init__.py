"""The ``dxrf`` command line: one module per command group."""

from dxrf.cli.commands import CommandError, main

__all__ = ["CommandError", "main"]

"""Argument types and values shared by the command groups."""

from __future__ import annotations

import argparse
import json

__all__ = ["parse_storage_option", "storage_options"]


def parse_storage_option(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` of ``--storage-option``: the value parsed as JSON where it parses, else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return key.strip(), parsed


def storage_options(args: argparse.Namespace) -> dict | None:
    """The ``--storage-option`` values of a command as a dict (None when none was given).

    Nested keys are not split: ``client_kwargs={"region_name": "eu-west-1"}``
    passes a dict as JSON.
    """
    pairs = getattr(args, "storage_option", None) or []
    return dict(pairs) or None

"""Argument types and values shared by the command groups."""

from __future__ import annotations

import argparse
import json

__all__ = ["comma_items", "lasting_destination", "parse_storage_option", "storage_options"]


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


def comma_items(text: str, what: str) -> list[str]:
    """The items of a comma-separated option, stripped; an empty item is refused, never dropped.

    ``1,,2`` or a trailing comma is a typo that would otherwise change the
    grid (or the column names) silently.
    """
    items = [v.strip() for v in text.split(",")]
    if not any(items):
        raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {text!r}")
    if not all(items):
        raise argparse.ArgumentTypeError(f"empty item in the comma-separated {what} {text!r} (item {items.index('') + 1})")
    return items


def lasting_destination(text: str) -> str:
    """An output of a command: a path or a URL that outlives the process (``memory://`` does not)."""
    if text.strip().lower().startswith("memory:"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is an in-memory store, which is gone when the command exits; give a path or an object-store URL"
        )
    return text


def positive_int(text: str) -> int:
    """One integer >= 1 (an argparse ``type``)."""
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def seconds(text: str) -> float:
    """A number of seconds >= 0, 0 meaning no limit (an argparse ``type``)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0 (0: no limit), got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0 (0: no limit), got {text!r}")
    return value

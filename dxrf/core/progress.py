"""Computing dask graphs with an optional progress bar on any scheduler.

Bars go to **stderr**, never stdout, so that a command's results can be
redirected to a file without control characters mixed in. A bar appears only
once its pass has run for :data:`MIN_SECONDS` (passes of a fraction of a second
draw nothing) and is erased when the pass ends, so a command that makes many
short passes does not fill the terminal with finished bars.

``progress=None`` shows a bar only when stderr is a terminal (what the command
line uses); ``True`` shows one on stderr in any case; ``False`` never. The
environment variable ``DXRF_PROGRESS_AFTER`` (seconds) changes the delay.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Iterator
from typing import Any

import dask

__all__ = ["compute", "active_client", "blocks_in_order", "show_progress", "MIN_SECONDS"]

#: a pass draws its bar only after running this long (seconds)
MIN_SECONDS = 1.0


def _min_seconds() -> float:
    text = os.environ.get("DXRF_PROGRESS_AFTER")
    if not text:
        return MIN_SECONDS
    try:
        return max(0.0, float(text))
    except ValueError:
        raise ValueError(f"DXRF_PROGRESS_AFTER must be a number of seconds, got {text!r}") from None


def active_client() -> Any:
    """The current ``distributed.Client``, or None when there is none."""
    try:
        from distributed import get_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        return get_client()
    except ValueError:
        return None


def show_progress(progress: bool | None) -> bool:
    """Whether to draw a bar: ``progress``, or for None whether stderr is a terminal."""
    if progress is None:
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):  # replaced or closed stream
            return False
    return bool(progress)


def _stderr_bar_class():
    from distributed.diagnostics.progressbar import TextProgressBar

    class _StderrBar(TextProgressBar):
        """distributed's text bar, drawn on stderr after ``MIN_SECONDS`` and erased at the end."""

        drawn = False
        after = MIN_SECONDS

        def _draw_bar(self, remaining: int, all: int, **kwargs: Any) -> None:
            if self.elapsed < self.after:
                return
            frac = (1 - remaining / all) if all else 1.0
            bar = "#" * int(self.width * frac)
            sys.stderr.write(f"\r[{bar:<{self.width}}] | {int(100 * frac)}% | {self.elapsed:.1f} s")
            sys.stderr.flush()
            self.drawn = True

        def _draw_stop(self, **kwargs: Any) -> None:
            if self.drawn:
                sys.stderr.write("\x1b[2K\r")  # erase the line: the terminal is left as it was
                sys.stderr.flush()

    return _StderrBar


def compute(obj: Any, *, progress: bool | None = False) -> Any:
    """Compute one dask collection or delayed value, optionally with a progress bar.

    Parameters
    ----------
    obj : dask collection or delayed value
    progress : bool or None, default False
        Draw a bar on stderr (see the module documentation); None: only when
        stderr is a terminal.

    Returns
    -------
    The computed value. On a distributed client the bar follows the
    cluster's tasks; otherwise dask's local ``ProgressBar`` is used.
    """
    show = show_progress(progress)
    client = active_client()
    if client is not None:
        future = client.compute(obj)
        if show:
            bar = _stderr_bar_class()
            bar.after = _min_seconds()
            bar([future], complete=True)
        return future.result()
    if show:
        from dask.diagnostics import ProgressBar

        with ProgressBar(minimum=_min_seconds(), out=sys.stderr):
            return dask.compute(obj)[0]
    return dask.compute(obj)[0]


def blocks_in_order(items: list, ahead: int | None = None) -> Iterator[Any]:
    """Compute dask values (e.g. the row blocks of an array) and yield them in order, a few at a time.

    On a distributed client up to ``ahead`` (default: twice the cluster's
    threads) are computed at once while the caller consumes the earlier
    ones, so the client holds only a window of results, never all of them.
    """
    client = active_client()
    if client is None:
        step = ahead or 2
        for lo in range(0, len(items), step):
            yield from dask.compute(*items[lo : lo + step])
        return
    if ahead is None:
        ahead = max(2, 2 * sum(client.nthreads().values()))
    window: deque = deque()
    try:
        for item in items:
            window.append(client.compute(item))
            if len(window) > ahead:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()
    finally:
        for future in window:  # the caller stopped early (an error): drop the rest
            future.cancel()

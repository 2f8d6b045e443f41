"""Helpers shared by workflows: timing, tables and result files."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def median_time(
    fn: Callable[[], Any], repeats: int, setup: Callable[[], Any] | None = None
) -> tuple[float, list[float], Any]:
    """Run ``fn`` ``repeats`` times; return the median seconds, all times and the last result.

    ``setup`` runs before each repeat, outside the timing.
    """
    times = []
    result = None
    for _ in range(repeats):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, result


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table with right-aligned numbers."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[fmt(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = lambda vals: "| " + " | ".join(v.rjust(w) for v, w in zip(vals, widths)) + " |"  # noqa: E731
    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells]
    return "\n".join(out)


def write_results(out_dir: str | Path, name: str, results: dict, markdown: str | None = None) -> Path:
    """Write ``results`` as JSON (and an optional markdown table) under ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, default=float))
    tmp.replace(path)
    if markdown is not None:
        (out / f"{name}.md").write_text(markdown + "\n")
    return path


def drop_page_cache() -> bool:
    """Ask Linux to drop the page cache (needs root); True when it worked."""
    import os

    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False

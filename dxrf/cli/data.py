"""`dxrf data list` and `dxrf data fetch`: the real data sets, where they are and how to get them."""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_data_commands"]


def _cmd_list(args: argparse.Namespace) -> int:
    from dxrf.datasets import cache as data_cache

    env = os.environ.get("DXRF_DATA_DIR")
    print(f"cache:  {data_cache.cache_dir()}" + (" ($DXRF_DATA_DIR)" if env else ""))
    print("search: " + ", ".join(str(d) for d in data_cache.search_dirs()))
    mirror = os.environ.get("DXRF_DATA_MIRROR", "").strip()
    print(f"mirror: {mirror or 'none ($DXRF_DATA_MIRROR unset)'}")
    rows = [("data set", "files", "bytes", "source", "status", "where")]
    for name in data_cache.names():
        st = data_cache.status(name)
        found = [s for s in st if s.size_ok]
        state = "present" if len(found) == len(st) else ("missing" if not found else "partial")
        if any(s.path is not None and not s.size_ok for s in st):
            state = "wrong size"
        # the data directory each file was found in (its path less the manifest's relative part)
        where = sorted({str(s.path.parents[len(s.file.path.split("/")) - 1]) for s in st if s.path is not None})
        source = "exact" if all(s.file.source_exact for s in st) else "derived"
        rows.append((name, str(len(st)), str(sum(s.file.size for s in st)), source, state, ", ".join(where) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.rjust(w) if i in (1, 2) else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
              + "  " + r[-1])
    print("source exact: fetched from the public source; derived: fetch downloads the source and rebuilds the "
          "stored file by its recipe ($DXRF_DATA_MIRROR, if set, serves the stored bytes instead). "
          "status checks sizes; `dxrf data fetch` verifies SHA-256 or, for a derived file, its content.")
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    from dxrf.datasets import cache as data_cache

    # progress lines for people watching a terminal; in logs and pipes stderr
    # holds nothing but a possible one-line error
    tty = sys.stderr.isatty()

    def progress(line: str) -> None:
        if tty:
            print(line, file=sys.stderr, flush=True)

    results = data_cache.fetch(args.names, progress=progress)
    for r in results:
        print(f"{r.name}\t{r.file.path}\t{r.file.size}\t{r.action}\t{r.path}")
    return 0


def add_data_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``dxrf data list`` and ``dxrf data fetch``."""
    p = sub.add_parser("data", help="list the real data sets or download them into the cache", parents=[common])
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    q = dsub.add_parser("list", help="the data sets: files, size, source, whether present and where",
                        parents=[common])
    q.set_defaults(func=_cmd_list)
    q = dsub.add_parser("fetch", parents=[common],
                        help="download missing files of data sets (derived ones: their sources, then rebuilt), "
                             "verified by SHA-256 (into $DXRF_DATA_DIR, else ~/.cache/dxrf/data; from "
                             "$DXRF_DATA_MIRROR if set)")
    q.add_argument("names", nargs="+", metavar="NAME", help="data set names (see `dxrf data list`) or 'all'")
    q.set_defaults(func=_cmd_fetch)

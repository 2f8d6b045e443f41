"""What is said when real data is missing: every missing file, where dxrf looked, and how to get it.

A command that reads several data sets checks them all before it starts
(:func:`require`), so that one line names everything that is missing instead
of one set per attempt, and says where the files were looked for
(:mod:`dxrf.datasets.cache`: ``$DXRF_DATA_DIR``, a ``shared/data`` beside
the checkout, the user cache), how to point dxrf at a copy
(``DXRF_DATA_DIR``) and how to download them (``dxrf data fetch NAME``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from dxrf.datasets import cache

__all__ = ["looked_in", "missing_files", "missing_message", "missing_sets_message", "require"]


def _keys(names: str | Sequence[str]) -> list[str]:
    given = [names] if isinstance(names, str) else list(names)
    if not all(isinstance(n, str) for n in given):
        raise TypeError(f"names must be a data set name or a sequence of them, got {names!r}")
    keys = list(dict.fromkeys(n.strip().lower().replace("-", "_") for n in given))
    unknown = [k for k in keys if k not in cache.names()]
    if unknown:
        raise ValueError(f"unknown data set {unknown[0]!r}; known: {', '.join(cache.names())}")
    return keys


def missing_files(names: str | Sequence[str]) -> dict[str, list[cache.DataFile]]:
    """The files of each data set that are in none of the data directories.

    Parameters
    ----------
    names : str or sequence of str
        Data set names of :func:`dxrf.datasets.cache.names`.

    Returns
    -------
    dict
        Data set name to its missing files, in the order given; sets with
        every file present are left out.

    Raises
    ------
    ValueError
        An unknown name.
    """
    out = {}
    for key in _keys(names):
        gone = [f for f in cache.files() if key in f.datasets and cache.locate(f.path) is None]
        if gone:
            out[key] = gone
    return out


def looked_in() -> str:
    """The data directories looked in, each with why it is one: a clause for messages.

    Returns
    -------
    str
    """
    dirs = cache.search_dirs()
    if os.environ.get("DXRF_DATA_DIR"):
        return f"{dirs[0]} (DXRF_DATA_DIR: when it is set, the only place looked in)"
    user = f"{dirs[-1]} (the user cache"
    if len(dirs) > 1:
        return f"{dirs[0]} (the shared/data found beside the checkout) or {user})"
    if os.environ.get("DXRF_DATA_DISCOVER", "1").strip() == "0":
        return f"{user}; DXRF_DATA_DISCOVER=0 turns off looking for a shared/data beside the checkout)"
    return (f"{user}; no shared/data with a MANIFEST.md is in a parent directory of the checkout or of the working "
            "directory, where a ../shared/data would be used)")


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _listing(missing: dict[str, list[cache.DataFile]]) -> str:
    """``data set 'a': F1 and F2 are not in ...`` or ``data sets 'a' (F1, F2) and 'b' (F3) are not in ...``."""
    if len(missing) == 1:
        (name, fs), = missing.items()
        verb = "is" if len(fs) == 1 else "are"
        return f"data set {name!r}: {_and([f.path for f in fs])} {verb} not in {looked_in()}"
    sets = [f"{name!r} ({', '.join(f.path for f in fs)})" for name, fs in missing.items()]
    return f"data sets {_and(sets)} are not in {looked_in()}"


def _download_clause(missing: dict[str, list[cache.DataFile]]) -> str:
    """How ``dxrf data fetch`` would get the files: from where, and whether it derives them."""
    sets = " ".join(missing)
    files = [f for fs in missing.values() for f in fs]
    it = "it" if len(files) == 1 else "them"
    try:
        urls = list(dict.fromkeys(cache.url_for(f) for f in files))
    except ValueError as exc:  # a malformed mirror variable: fetching would fail too
        return f"`dxrf data fetch {sets}` downloads {it}, but {exc}"
    mirror = os.environ.get("DXRF_DATA_MIRROR", "").strip()
    if len(missing) > 1:
        return f"or run `dxrf data fetch {sets}` to download {it} (`dxrf data list` shows the sources)"
    where = _and(urls)
    if not mirror and any(f.recipe is not None for f in files):
        source = "its source" if len(urls) == 1 else "their sources"
        return f"or run `dxrf data fetch {sets}` to download {source} from {where} and derive {it}"
    return f"or run `dxrf data fetch {sets}` to download {it} from {where}"


def missing_sets_message(missing: dict[str, list[cache.DataFile]]) -> str:
    """One line naming every missing file of every set, where dxrf looked, and how to get the files.

    Parameters
    ----------
    missing : dict
        As :func:`missing_files` returns it, not empty.

    Returns
    -------
    str
    """
    return f"{_listing(missing)}; to use a copy, {cache.use_a_copy()}; {_download_clause(missing)}"


def missing_message(rel: str) -> str:
    """:func:`missing_sets_message` for the data set of a missing data file, naming its other missing files too.

    Parameters
    ----------
    rel : str
        Path relative to the data directory, e.g. ``"adult/adult.data.gz"``.

    Returns
    -------
    str
    """
    f = next((f for f in cache.files() if f.path == rel), None)
    if f is None:  # a file the manifest does not know (a bug): still say where we looked
        return f"data file {rel!r} is not in {looked_in()}"
    missing = missing_files(f.datasets[0]) or {f.datasets[0]: [f]}
    return missing_sets_message(missing)


def require(names: str | Sequence[str], *, download: bool = False) -> None:
    """Check that every file of some data sets is present; with ``download``, fetch the missing ones first.

    Parameters
    ----------
    names : str or sequence of str
        The data sets a command reads.
    download : bool, default False
        Fetch the missing files into the cache, as ``dxrf data fetch NAME
        ...`` does; progress lines go to stderr afterwards, a notice first
        on a terminal.

    Raises
    ------
    ValueError
        An unknown name.
    FileNotFoundError
        Without ``download``: files are missing; the message names every one
        of every set, where dxrf looked, how to use a copy
        (``DXRF_DATA_DIR``) and the ``dxrf data fetch`` command.
    dxrf.datasets.cache.DataFetchError
        With ``download``: a file could not be fetched; the message names
        every file still missing, where dxrf looked, what failed, and what to
        do instead. Nothing half-written is left.
    """
    missing = missing_files(names)
    if not missing:
        return
    if not download:
        raise FileNotFoundError(missing_sets_message(missing))
    if sys.stderr.isatty():  # a notice before a download that may take a while; never in logs, so a failure is one line
        print(f"data: fetching {', '.join(map(repr, missing))} (`dxrf data list` shows the files and sources)",
              file=sys.stderr, flush=True)
    lines: list[str] = []
    try:
        cache.fetch(list(missing), progress=lines.append)
    except cache.DataFetchError as exc:
        # the files verified before the failure stay: name only what is still missing
        still = missing_files(list(missing)) or missing
        raise cache.DataFetchError(None, f"{_listing(still)}, and fetching them failed: {exc.detail}",
                                   exc.advice) from exc
    for line in lines:
        print(f"data: {line}", file=sys.stderr, flush=True)

"""Where the real data files are, and how they get there.

The files that :mod:`dxrf.datasets` reads are listed in the package's
``data_manifest.json``: path under a data directory laid out as
``shared/data``, size, SHA-256, the data sets that use it, and its public
source. :func:`locate` finds a file; :func:`fetch` downloads the missing files
of a data set into :func:`cache_dir`, verified against the manifest.

Lookup order (:func:`search_dirs`)
----------------------------------
1. ``$DXRF_DATA_DIR``: when set it is the only place looked at, and the
   place :func:`fetch` writes to.
2. ``shared/data`` (with a ``MANIFEST.md``) in a parent directory of the
   package or of the working directory, as in a checkout with ``shared/``
   beside it; ``DXRF_DATA_DISCOVER=0`` turns this off.
3. The user cache, ``$XDG_CACHE_HOME/dxrf/data`` (``~/.cache/dxrf/data``).

Nothing is downloaded unless :func:`fetch` (``dxrf data fetch``) is called.
Some files differ in bytes from their public source (``source_exact`` false in
the manifest: re-compressed, a header line removed, converted); those can only
be fetched from a mirror of ``shared/data`` named by ``$DXRF_DATA_MIRROR`` (an
``http://``, ``https://`` or ``file://`` base URL; file URL = mirror + ``/`` +
path).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.client
import json
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

__all__ = [
    "DataFetchError", "DataFile", "FetchResult", "FileStatus", "cache_dir", "discovered_dir", "fetch", "files",
    "locate", "missing_message", "names", "search_dirs", "status", "url_for",
]

_BLOCK = 1 << 20
_TIMEOUT_S = 60.0


class DataFetchError(OSError):
    """A download that failed or did not verify; nothing of it is left on disk."""


@dataclasses.dataclass(frozen=True)
class DataFile:
    """One file of the manifest.

    Attributes
    ----------
    path : str
        Relative path under a data directory laid out as ``shared/data``.
    size : int
        Bytes of the file as stored.
    sha256 : str
        Hex SHA-256 of the file as stored.
    datasets : tuple of str
        Names of :func:`dxrf.datasets.load` that read it.
    source_url : str
        Where it comes from.
    source_exact : bool
        Whether ``source_url`` serves exactly these bytes (else only a mirror can).
    source_note : str
        How the stored file relates to the source.
    """

    path: str
    size: int
    sha256: str
    datasets: tuple[str, ...]
    source_url: str
    source_exact: bool
    source_note: str


@functools.cache
def files() -> tuple[DataFile, ...]:
    """All files of the manifest, in its order.

    Returns
    -------
    tuple of DataFile
    """
    doc = json.loads(resources.files("dxrf").joinpath("data_manifest.json").read_text(encoding="utf-8"))
    return tuple(DataFile(**{**f, "datasets": tuple(f["datasets"])}) for f in doc["files"])


def names() -> list[str]:
    """Data set names of the manifest, in its order.

    Returns
    -------
    list of str
    """
    return list(dict.fromkeys(d for f in files() for d in f.datasets))


def _files_of(name: str) -> list[DataFile]:
    sel = [f for f in files() if name in f.datasets]
    if not sel:
        raise ValueError(f"unknown data set {name!r}; known: {', '.join(names())}, or 'all'")
    return sel


def _by_path(rel: str) -> DataFile | None:
    return next((f for f in files() if f.path == rel), None)


# --------------------------------------------------------------------------- directories


def _user_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "dxrf" / "data"


def cache_dir() -> Path:
    """The directory :func:`fetch` writes to: ``$DXRF_DATA_DIR``, else the user cache.

    Returns
    -------
    pathlib.Path
        It may not exist yet.
    """
    env = os.environ.get("DXRF_DATA_DIR")
    return Path(env).expanduser() if env else _user_cache()


def discovered_dir() -> Path | None:
    """``shared/data`` with a ``MANIFEST.md`` in a parent of the package or the working directory.

    Returns
    -------
    pathlib.Path or None
        None when none is found or ``DXRF_DATA_DISCOVER=0``.
    """
    if os.environ.get("DXRF_DATA_DISCOVER", "1").strip() == "0":
        return None
    here = Path(__file__).resolve()
    cwd = Path.cwd().resolve()
    for base in (*here.parents, cwd, *cwd.parents):
        cand = base / "shared" / "data"
        if (cand / "MANIFEST.md").is_file():
            return cand
    return None


def search_dirs() -> list[Path]:
    """Where :func:`locate` looks, in order (see the module docstring).

    Returns
    -------
    list of pathlib.Path
    """
    if os.environ.get("DXRF_DATA_DIR"):
        return [cache_dir()]
    found = discovered_dir()
    return [found, _user_cache()] if found is not None else [_user_cache()]


def locate(rel: str) -> Path | None:
    """The first copy of a data file in :func:`search_dirs`.

    Parameters
    ----------
    rel : str
        Path relative to the data directory, e.g. ``"adult/adult.data.gz"``.

    Returns
    -------
    pathlib.Path or None
    """
    for d in search_dirs():
        p = d / rel
        if p.is_file():
            return p
    return None


def _mirror() -> str | None:
    mirror = os.environ.get("DXRF_DATA_MIRROR", "").strip()
    if not mirror:
        return None
    if urllib.parse.urlsplit(mirror).scheme not in ("http", "https", "file"):
        raise ValueError(f"DXRF_DATA_MIRROR={mirror!r} must be an http://, https:// or file:// URL")
    return mirror.rstrip("/")


def url_for(f: DataFile) -> str:
    """The URL a file is fetched from: the mirror's copy if ``$DXRF_DATA_MIRROR`` is set, else its source.

    Parameters
    ----------
    f : DataFile

    Returns
    -------
    str
    """
    mirror = _mirror()
    return f"{mirror}/{urllib.parse.quote(f.path)}" if mirror else f.source_url


def _needs_mirror(f: DataFile) -> str:
    return "" if f.source_exact else (
        " (that source does not serve the stored bytes: set DXRF_DATA_MIRROR to a copy laid out as shared/data)"
    )


def missing_message(rel: str) -> str:
    """One line for a data file that is nowhere: where it was looked for and how to fetch it.

    Parameters
    ----------
    rel : str

    Returns
    -------
    str
    """
    f = _by_path(rel)
    where = ", ".join(str(d) for d in search_dirs())
    if f is None:  # a file the manifest does not know (a bug): still say where we looked
        return f"data file {rel!r} is not in {where}"
    name = f.datasets[0]
    head = f"data set {name!r}: {rel} is not in {where}; "
    try:
        mirror = _mirror()
    except ValueError as exc:
        return head + f"`dxrf data fetch {name}` downloads it, but {exc}"
    if mirror is None and not f.source_exact:
        return head + (
            f"run `dxrf data fetch {name}` with DXRF_DATA_MIRROR set to a copy laid out as shared/data "
            f"(its source, {f.source_url}, does not serve the stored bytes)"
        )
    return head + f"run `dxrf data fetch {name}` to download it from {url_for(f)}"


# --------------------------------------------------------------------------- status and fetch


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def _verifies(path: Path, f: DataFile) -> bool:
    return path.stat().st_size == f.size and _sha256(path) == f.sha256


@dataclasses.dataclass(frozen=True)
class FileStatus:
    """Where one file of a data set is, and whether its size is right (no hashing)."""

    file: DataFile
    path: Path | None
    size_ok: bool


def status(name: str) -> list[FileStatus]:
    """Where each file of a data set is found, checked by size only (:func:`fetch` checks the SHA-256).

    Parameters
    ----------
    name : str

    Returns
    -------
    list of FileStatus
    """
    out = []
    for f in _files_of(name):
        p = locate(f.path)
        out.append(FileStatus(f, p, p is not None and p.stat().st_size == f.size))
    return out


def _download(f: DataFile, name: str, url: str, dest: Path) -> None:
    """Stream ``url`` into a temporary file beside ``dest``, verify it, then move it into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    mirror = _mirror()
    hint = (
        f"check that DXRF_DATA_MIRROR={mirror} holds a copy laid out as shared/data and retry `dxrf data fetch {name}`"
        if mirror else f"retry `dxrf data fetch {name}`, or set DXRF_DATA_MIRROR to a copy laid out as shared/data"
    )
    try:
        h = hashlib.sha256()
        got = 0
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as resp:
                    while block := resp.read(_BLOCK):
                        got += len(block)
                        if got > f.size:
                            raise DataFetchError(
                                f"data set {name!r}: {f.path} from {url} is longer than the {f.size} bytes "
                                f"expected; nothing was kept; {hint}"
                            )
                        h.update(block)
                        out.write(block)
                    # read(n) returns b"" on a dropped connection: compare with the announced length
                    if getattr(resp, "length", None):
                        raise http.client.IncompleteRead(b"", resp.length)
            except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", None) or exc
                raise DataFetchError(
                    f"data set {name!r}: downloading {f.path} from {url} failed after {got} of {f.size} bytes "
                    f"({type(exc).__name__}: {str(reason).strip() or 'no detail'}); {hint}"
                ) from exc
            out.flush()
            os.fsync(out.fileno())
        digest = h.hexdigest()
        if got != f.size or digest != f.sha256:
            raise DataFetchError(
                f"data set {name!r}: {f.path} from {url} does not verify: expected {f.size} bytes with sha256 "
                f"{f.sha256}, got {got} bytes with sha256 {digest}; nothing was kept"
                + (_needs_mirror(f) if not mirror else f"; {hint}")
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is an ordinary data directory
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclasses.dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch` did with one file: ``"present"`` (verified, left as is) or ``"downloaded"``."""

    name: str
    file: DataFile
    path: Path
    action: str
    url: str | None


def fetch(name: str | Sequence[str], *, progress: Callable[[str], None] | None = None) -> list[FetchResult]:
    """Download the missing files of data sets (or ``"all"``) into :func:`cache_dir`.

    A file already found by :func:`locate` whose size and SHA-256 match the
    manifest is left as is. Every download streams into a temporary file in
    the destination directory, is hashed while streaming, and is moved into
    place only once its size and SHA-256 match; otherwise it is deleted.

    Parameters
    ----------
    name : str or sequence of str
        Data set names of :func:`names`, or ``"all"``; every name is checked,
        and every file planned, before anything is downloaded.
    progress : callable, optional
        Called with one line of text per step.

    Returns
    -------
    list of FetchResult

    Raises
    ------
    ValueError
        Unknown name, or a bad ``$DXRF_DATA_MIRROR``.
    DataFetchError
        A download failed or did not verify; a file of a set whose source does
        not serve the stored bytes is missing and no mirror is set; or a
        discovered ``shared/data`` copy does not verify.
    """
    given = [name] if isinstance(name, str) else list(name)
    if not given or not all(isinstance(n, str) for n in given):
        raise TypeError(f"name must be a data set name or a sequence of them, got {name!r}")
    keys = [n.strip().lower().replace("-", "_") for n in given]
    wanted = names() if "all" in keys else list(dict.fromkeys(keys))
    for n in wanted:
        _files_of(n)
    name = " ".join(given)  # for the hint in messages
    mirror = _mirror()
    say = progress or (lambda _line: None)
    dest_dir = cache_dir()
    # first decide what to download, so that a set that cannot be fetched
    # fails before anything is downloaded
    plan: list[tuple[str, DataFile, Path | None]] = []
    for n in wanted:
        for f in _files_of(n):
            p = locate(f.path)
            if p is not None and _verifies(p, f):
                plan.append((n, f, p))
                continue
            if p is not None and p.resolve() != (dest_dir / f.path).resolve():
                raise DataFetchError(
                    f"data set {n!r}: {p} does not match its manifest (expected {f.size} bytes, sha256 {f.sha256}); "
                    "repair or remove it, or set DXRF_DATA_DISCOVER=0 to use the cache instead"
                )
            plan.append((n, f, None))
    blocked = [(n, f) for n, f, p in plan if p is None and not f.source_exact and mirror is None]
    if blocked:
        sets = list(dict.fromkeys(n for n, _ in blocked))
        n, f = blocked[0]
        which = f"data set {n!r}" if len(sets) == 1 else f"data sets {', '.join(sets)}"
        raise DataFetchError(
            f"{which}: the stored files are derived from their sources (e.g. {f.path} from {f.source_url}), which "
            f"do not serve the same bytes: set DXRF_DATA_MIRROR to a copy laid out as shared/data "
            f"(http://, https:// or file://) and run `dxrf data fetch {name}` again; nothing was downloaded"
        )
    results = []
    for n, f, p in plan:
        if p is not None:
            say(f"{n}: {f.path}: present in {p.parent}, sha256 verified")
            results.append(FetchResult(n, f, p, "present", None))
            continue
        url = url_for(f)
        dest = dest_dir / f.path
        say(f"{n}: {f.path}: downloading {f.size} bytes from {url}")
        _download(f, n, url, dest)
        say(f"{n}: {f.path}: sha256 verified, saved to {dest}")
        results.append(FetchResult(n, f, dest, "downloaded", url))
    return results

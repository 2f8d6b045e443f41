"""Where the real data files are, and how they get there.

The files that :mod:`dxrf.datasets.loaders` reads are listed in the package's
``manifest.json``: path under a data directory laid out as
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
Where a file comes from:

- ``$DXRF_DATA_MIRROR`` set (an ``http://``, ``https://`` or ``file://`` base
  URL of a copy laid out as ``shared/data``; file URL = mirror + ``/`` +
  path): every file from there, verified by size and SHA-256.
- else a file whose source serves the stored bytes (``source_exact``): from
  its source URL, verified the same way;
- else a derived file (re-compressed, a header line removed, converted; the
  manifest gives a ``recipe``): its source file is downloaded (verified by
  ``source_sha256`` where pinned), the recipe of :mod:`dxrf.datasets.recipes`
  rebuilds the file, and the result is verified by SHA-256 or, where another
  zlib compresses differently, by its content checksum.

``$DXRF_DATA_SOURCE_MIRROR`` rebases source URLs: ``https://host/path``
becomes mirror + ``/host/path`` (a local copy of the sources, or the tests'
server).
"""

from __future__ import annotations

import contextlib
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
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import IO, Any

from dxrf.datasets import recipes as data_recipes

__all__ = [
    "DataFetchError", "DataFile", "FetchResult", "FileStatus", "cache_dir", "discovered_dir", "fetch", "files",
    "locate", "names", "search_dirs", "source_url_for", "status", "url_for", "use_a_copy",
]

_BLOCK = 1 << 20
_TIMEOUT_S = 60.0


class DataFetchError(OSError):
    """A download that failed or did not verify; nothing of it is left on disk.

    Its message is ``data set 'NAME': DETAIL; ADVICE`` (without the first
    part when ``name`` is None).

    Attributes
    ----------
    name : str or None
        The data set.
    detail : str
        What failed: the file, the URL and why.
    advice : str
        What to do instead (retrying the same command would fail the same way).
    """

    def __init__(self, name: str | None, detail: str, advice: str) -> None:
        super().__init__(("" if name is None else f"data set {name!r}: ") + f"{detail}; {advice}")
        self.name, self.detail, self.advice = name, detail, advice


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
        Names of :func:`dxrf.datasets.loaders.load` that read it.
    source_url : str
        Where it comes from.
    source_exact : bool
        Whether ``source_url`` serves exactly these bytes (else only a mirror can).
    source_note : str
        How the stored file relates to the source.
    source_sha256, source_size : str or None, int or None
        The source file's SHA-256 and size where pinned (derived files).
    recipe : dict or None
        How :mod:`dxrf.datasets.recipes` derives the file from its source; None for exact copies.
    content_size, content_sha256 : int or None, str or None
        :func:`dxrf.datasets.recipes.content_digest` of the stored file (derived files).
    """

    path: str
    size: int
    sha256: str
    datasets: tuple[str, ...]
    source_url: str
    source_exact: bool
    source_note: str
    source_sha256: str | None = None
    source_size: int | None = None
    recipe: dict[str, Any] | None = dataclasses.field(default=None, hash=False)
    content_size: int | None = None
    content_sha256: str | None = None


@functools.cache
def files() -> tuple[DataFile, ...]:
    """All files of the manifest, in its order.

    Returns
    -------
    tuple of DataFile
    """
    doc = json.loads(resources.files("dxrf.datasets").joinpath("manifest.json").read_text(encoding="utf-8"))
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


def _base_url(var: str) -> str | None:
    base = os.environ.get(var, "").strip()
    if not base:
        return None
    if urllib.parse.urlsplit(base).scheme not in ("http", "https", "file"):
        raise ValueError(f"{var}={base!r} must be an http://, https:// or file:// URL")
    return base.rstrip("/")


def _mirror() -> str | None:
    return _base_url("DXRF_DATA_MIRROR")


def source_url_for(f: DataFile) -> str:
    """A file's source URL, rebased onto ``$DXRF_DATA_SOURCE_MIRROR`` (+ ``/host/path``) when that is set.

    Parameters
    ----------
    f : DataFile

    Returns
    -------
    str
    """
    base = _base_url("DXRF_DATA_SOURCE_MIRROR")
    if base is None:
        return f.source_url
    parts = urllib.parse.urlsplit(f.source_url)
    return f"{base}/{parts.netloc}{parts.path}"


def url_for(f: DataFile) -> str:
    """The URL a file is fetched from: the mirror's copy if ``$DXRF_DATA_MIRROR`` is set, else its source.

    Parameters
    ----------
    f : DataFile

    Returns
    -------
    str
        For a derived file without a mirror, the URL of the source it is derived from.
    """
    mirror = _mirror()
    return f"{mirror}/{urllib.parse.quote(f.path)}" if mirror else source_url_for(f)


def use_a_copy() -> str:
    """How to make dxrf use a copy of the data instead of downloading it: a clause for messages.

    Returns
    -------
    str
    """
    if os.environ.get("DXRF_DATA_DIR"):
        return (f"copy the files into {cache_dir()} (laid out as shared/data), or set DXRF_DATA_DIR to a "
                "directory that holds them")
    return ("set DXRF_DATA_DIR to a directory that holds the files laid out as shared/data (e.g. "
            f"DXRF_DATA_DIR=../shared/data), or copy them into {cache_dir()}")


# --------------------------------------------------------------------------- status and fetch


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def _content_of(path: Path, f: DataFile) -> tuple[int, str] | None:
    try:
        return data_recipes.content_digest(path, like=f.path)
    except (OSError, ValueError, EOFError, zlib.error, zipfile.BadZipFile):
        return None


def _verifies(path: Path, f: DataFile) -> bool:
    """The stored bytes; or, for a derived file, the stored content (another zlib compresses differently)."""
    if path.stat().st_size == f.size and _sha256(path) == f.sha256:
        return True
    return f.content_sha256 is not None and _content_of(path, f) == (f.content_size, f.content_sha256)


@dataclasses.dataclass(frozen=True)
class FileStatus:
    """Where one file of a data set is, and whether its size (or a derived file's content size) is right."""

    file: DataFile
    path: Path | None
    size_ok: bool


def status(name: str) -> list[FileStatus]:
    """Where each file of a data set is found, checked by size only (:func:`fetch` checks the SHA-256).

    A derived file rebuilt with another zlib has another size; its content
    size (gzip trailer, npy headers) is checked instead.

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
        ok = p is not None and (
            p.stat().st_size == f.size
            or (f.content_size is not None and data_recipes.content_size_matches(p, f.content_size))
        )
        out.append(FileStatus(f, p, ok))
    return out


def _instead() -> str:
    """What to do when a download failed: use a copy of the data (the same command would fail again)."""
    mirror = _mirror()
    if mirror:
        return f"instead, check that DXRF_DATA_MIRROR={mirror} serves a copy laid out as shared/data, or {use_a_copy()}"
    return (f"instead, {use_a_copy()}, or set DXRF_DATA_MIRROR to the URL of such a copy "
            "(http://, https:// or file://)")


def _why(exc: BaseException) -> str:
    """What a failed download means, in words: the exception's name alone does not say what to do."""
    if isinstance(exc, urllib.error.HTTPError):
        return (f"the server has no such file (HTTP {exc.code})" if exc.code in (404, 410)
                else f"the server refused it (HTTP {exc.code})")
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, FileNotFoundError):  # a file:// URL
        return "there is no such file"
    if isinstance(reason, TimeoutError):
        return f"the server did not answer within {_TIMEOUT_S:g} s"
    if isinstance(exc, urllib.error.URLError):
        return "the URL could not be reached (no network, or the host is down or unknown)"
    return "the connection broke off before the end of the file"


def _stream(url: str, out: IO[bytes], name: str, thing: str, size: int | None, limit: int) -> tuple[int, str]:
    """Copy ``url`` into ``out``, hashing as it goes; stop past ``limit`` bytes. Returns (bytes, sha256)."""
    h = hashlib.sha256()
    got = 0
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as resp:
            while block := resp.read(_BLOCK):
                got += len(block)
                if got > limit:
                    raise DataFetchError(
                        name, f"{thing} from {url} is longer than the {limit} bytes expected; nothing was kept",
                        _instead())
                h.update(block)
                out.write(block)
            # read(n) returns b"" on a dropped connection: compare with the announced length
            if getattr(resp, "length", None):
                raise http.client.IncompleteRead(b"", resp.length)
    except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as exc:
        reason = getattr(exc, "reason", None) or exc
        of = f" of {size}" if size is not None else ""
        raise DataFetchError(
            name, f"downloading {thing} from {url} failed after {got}{of} bytes "
            f"({type(exc).__name__}: {str(reason).strip() or 'no detail'}): {_why(exc)}; nothing was kept", _instead()
        ) from exc
    out.flush()
    os.fsync(out.fileno())
    return got, h.hexdigest()


@contextlib.contextmanager
def _temp_beside(dest: Path, suffix: str) -> Iterator[tuple[IO[bytes], Path]]:
    """An open temporary file in ``dest``'s directory (which exists), deleted on the way out unless moved away."""
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=suffix)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh, tmp
    finally:
        tmp.unlink(missing_ok=True)


def _install(tmp: Path, dest: Path) -> None:
    os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is an ordinary data directory
    os.replace(tmp, dest)


def _download(f: DataFile, name: str, url: str, dest: Path) -> None:
    """Stream ``url`` into a temporary file beside ``dest``, verify it, then move it into place."""
    with _temp_beside(dest, ".part") as (out, tmp):
        got, digest = _stream(url, out, name, f.path, f.size, f.size)
        out.close()
        if got != f.size or digest != f.sha256:
            raise DataFetchError(
                name, f"{f.path} from {url} does not verify: expected {f.size} bytes with sha256 {f.sha256}, "
                f"got {got} bytes with sha256 {digest}; nothing was kept", _instead()
            )
        _install(tmp, dest)


def _derive(f: DataFile, name: str, url: str, dest: Path) -> None:
    """Download the source of a derived file beside ``dest``, apply its recipe, verify the result, move it."""
    assert f.recipe is not None and f.content_size is not None
    thing = f"the source of {f.path}"
    # an unpinned source (a text file with a line more or less) is about the size of the content
    limit = f.source_size if f.source_size is not None else 2 * f.content_size + _BLOCK
    with _temp_beside(dest, ".source.part") as (src, src_tmp), _temp_beside(dest, ".part") as (out, tmp):
        out.close()
        got, digest = _stream(url, src, name, thing, f.source_size, limit)
        src.close()
        if f.source_sha256 is not None and (digest != f.source_sha256 or got != f.source_size):
            raise DataFetchError(
                name, f"{thing} from {url} does not verify: expected {f.source_size} bytes with sha256 "
                f"{f.source_sha256}, got {got} bytes with sha256 {digest}; nothing was kept", _instead()
            )
        try:
            data_recipes.derive(f.recipe, src_tmp, tmp)
        except data_recipes.RecipeError as exc:
            raise DataFetchError(
                name, f"{f.path} cannot be derived from {url}: {' '.join(str(exc).split())}; nothing was kept",
                _instead()
            ) from None
        src_tmp.unlink()
        if not _verifies(tmp, f):
            size, content = _content_of(tmp, f) or (None, None)
            raise DataFetchError(
                name, f"{f.path} derived from {url} does not verify: expected content of {f.content_size} bytes "
                f"with sha256 {f.content_sha256}, got {size} bytes with sha256 {content}; nothing was kept", _instead()
            )
        _install(tmp, dest)


@dataclasses.dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch` did with one file: ``"present"`` (verified, left as is), ``"downloaded"``, ``"derived"``."""

    name: str
    file: DataFile
    path: Path
    action: str
    url: str | None


def fetch(name: str | Sequence[str], *, progress: Callable[[str], None] | None = None) -> list[FetchResult]:
    """Download the missing files of data sets (or ``"all"``) into :func:`cache_dir`.

    A file already found by :func:`locate` whose size and SHA-256 (for a
    derived file: or its content checksum) match the manifest is left as is.
    Every download streams into a temporary file in the destination
    directory, is hashed while streaming, and is moved into place only once
    it verifies; otherwise it is deleted. Without ``$DXRF_DATA_MIRROR`` a
    derived file is rebuilt from its downloaded source (see the module
    docstring), the source and the result each verified, and the source deleted.
    A failure also removes the directories the fetch created that are still
    empty (never one that existed before); verified files of the same fetch stay.

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
        Unknown name, or a bad ``$DXRF_DATA_MIRROR`` or ``$DXRF_DATA_SOURCE_MIRROR``.
    DataFetchError
        A download failed or did not verify; a source could not be derived
        or its result did not verify; or a discovered ``shared/data`` copy
        does not verify.
    """
    given = [name] if isinstance(name, str) else list(name)
    if not given or not all(isinstance(n, str) for n in given):
        raise TypeError(f"name must be a data set name or a sequence of them, got {name!r}")
    keys = [n.strip().lower().replace("-", "_") for n in given]
    wanted = names() if "all" in keys else list(dict.fromkeys(keys))
    for n in wanted:
        _files_of(n)
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
                    n, f"{p} does not match its manifest (expected {f.size} bytes, sha256 {f.sha256})",
                    "repair or remove it, or set DXRF_DATA_DISCOVER=0 to use the cache instead"
                )
            plan.append((n, f, None))
    source_url_for(plan[0][1])  # a bad $DXRF_DATA_SOURCE_MIRROR fails before anything is downloaded
    made: list[Path] = []
    try:
        return [_fetch_one(n, f, p, dest_dir, mirror, say, made) for n, f, p in plan]
    except BaseException:
        _remove_empty(made)  # an interrupt too: no empty cache folders left behind
        raise


def _fetch_one(n: str, f: DataFile, p: Path | None, dest_dir: Path, mirror: str | None,
               say: Callable[[str], None], made: list[Path]) -> FetchResult:
    """One planned file of :func:`fetch`: left as is where present, else downloaded or derived into ``dest_dir``."""
    if p is not None:
        say(f"{n}: {f.path}: present in {p.parent}, sha256 verified")
        return FetchResult(n, f, p, "present", None)
    url = url_for(f)
    dest = dest_dir / f.path
    _make_dirs(dest.parent, made)
    if mirror is None and f.recipe is not None:
        say(f"{n}: {f.path}: downloading its source from {url} and deriving it")
        _derive(f, n, url, dest)
        say(f"{n}: {f.path}: derived, content verified, saved to {dest}")
        return FetchResult(n, f, dest, "derived", url)
    say(f"{n}: {f.path}: downloading {f.size} bytes from {url}")
    _download(f, n, url, dest)
    say(f"{n}: {f.path}: sha256 verified, saved to {dest}")
    return FetchResult(n, f, dest, "downloaded", url)


def _make_dirs(d: Path, made: list[Path]) -> None:
    """Create ``d`` and its missing parents, outermost first, appending each one created here to ``made``."""
    todo = []
    while not d.exists() and d != d.parent:
        todo.append(d)
        d = d.parent
    for d in reversed(todo):
        try:
            d.mkdir()
        except FileExistsError:  # made meanwhile by someone else: not ours to remove
            continue
        made.append(d)


def _remove_empty(made: list[Path]) -> None:
    """Remove the directories of ``made`` that are empty, innermost first; rmdir never removes a file."""
    for d in reversed(made):
        with contextlib.suppress(OSError):
            d.rmdir()

"""Where a group or file lives: the local file system or an fsspec object store (s3://, gs://, memory://).

A destination or source is a local path or a URL. URLs are resolved with
:func:`fsspec.core.url_to_fs`, so fsspec's own configuration applies
(``FSSPEC_S3_ENDPOINT_URL``-style variables, ``~/.config/fsspec/*.json``),
merged under the ``storage_options`` given. ``file://`` URLs and URLs that
resolve to the local file system are plain paths, written with the local
atomic rename of :mod:`dxrf.io.files`.

Object stores cannot rename a prefix, so :func:`atomic_group` publishes by
copying (see :func:`_publish`): everything is written under a temporary
prefix ``<dest>.tmp-<random>``, checked, then copied to ``<dest>`` with the
group's root ``zarr.json`` copied last. Readers treat a prefix without root
metadata as absent, so ``dest`` never shows a partial group. What is *not*
guaranteed there: two writers racing for one destination are not excluded
(the last one to publish wins, and a reader during an overwrite sees no
group for a moment); a process killed mid-publish leaves ``dest`` without
its root metadata (refused by readers, cleaned by the next write) and
possibly its temporary prefix.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dxrf.io.files import (
    DXRF_MARKERS,
    KIND_ATTR,
    KINDS,
    DestinationExistsError,
    DestinationRefusedError,
    atomic_directory,
    check_destination,
    check_file_destination,
)

__all__ = ["Location", "atomic_group", "check_storage_options", "object_errors", "resolve", "zarr_target"]

#: written inside a destination while it is being published; a prefix holding it and no root
#: metadata is the leftover of an interrupted publication, which the next write may remove
PUBLISHING = ".dxrf-publishing"
_WRITES = {"data": "a data group", "model": "a model", "predictions": "predictions"}


def check_storage_options(storage_options: Any) -> dict[str, Any]:
    """A copy of ``storage_options`` (None: empty); TypeError unless it is a mapping with string keys."""
    if storage_options is None:
        return {}
    if not isinstance(storage_options, Mapping) or not all(isinstance(k, str) for k in storage_options):
        raise TypeError(f"storage_options must be a dict with string keys, got {storage_options!r}")
    return dict(storage_options)


@dataclasses.dataclass(frozen=True)
class Location:
    """A local path (``fs`` is None) or a path inside an fsspec file system.

    ``url`` is what messages show: the absolute local path, or the URL.
    """

    url: str
    path: str
    fs: Any = None
    storage_options: dict = dataclasses.field(default_factory=dict)

    @property
    def local(self) -> bool:
        """Whether this is a local path (atomic renames, links possible)."""
        return self.fs is None

    def key(self, name: str) -> str:
        """The store path of ``name`` below this location."""
        return f"{self.path.rstrip('/')}/{name}"

    def sibling(self, suffix: str) -> Location:
        """The location named like this one plus ``suffix`` (a temporary sibling)."""
        path = self.path.rstrip("/") + suffix
        return Location(self.fs.unstrip_protocol(path), path, self.fs, self.storage_options)

    def store(self, *, read_only: bool) -> Any:
        """A zarr store rooted here (a string path for a local location written to).

        A local location read from is a :class:`~dxrf.io.local_store.CheckedLocalStore`
        (regular files only, no links; its tree checked first).
        """
        if self.local:
            if read_only:
                from dxrf.io.local_store import checked_store

                return checked_store(self.path)
            return self.path
        from zarr.storage import FsspecStore

        # from the URL: zarr opens the file system in asynchronous mode (wrapping a synchronous one)
        url = self.fs.unstrip_protocol(self.path.rstrip("/"))
        return FsspecStore.from_url(url, storage_options=dict(self.storage_options), read_only=read_only)


def is_url(target: Any) -> bool:
    """Whether ``target`` is a string with a protocol (``s3://...``)."""
    return isinstance(target, str) and "://" in target


def resolve(target: str | os.PathLike, storage_options: Mapping[str, Any] | None = None, *, what: str = "path") -> Location:
    """Resolve a local path or URL to a :class:`Location`.

    Parameters
    ----------
    target : path or URL
    storage_options : dict, optional
        Passed to the fsspec file system (e.g. ``{"endpoint_url": ..., "key": ...}``
        for s3); merged over fsspec's configuration. Not used for local paths
        (so one set of options serves calls mixing local paths and URLs).
    what : str
        The parameter's name, for messages.
    """
    options = check_storage_options(storage_options)
    if not isinstance(target, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path or URL, got {type(target).__name__}")
    text = os.fspath(target)
    if not is_url(text):
        p = Path(text).expanduser().absolute()
        return Location(str(p), str(p))
    if text.startswith("file://"):
        p = Path(text[len("file://"):]).expanduser().absolute()
        return Location(str(p), str(p))
    import fsspec.core

    try:
        fs, path = fsspec.core.url_to_fs(text, **options)
    except ImportError as exc:  # s3fs / gcsfs not installed
        raise ValueError(f"cannot open {text!r}: {exc} (install dxrf[cloud])") from None
    except (ValueError, TypeError) as exc:  # an unknown protocol or a bad option
        raise ValueError(f"cannot open {text!r}: {exc}") from None
    if "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
        p = Path(path).absolute()
        return Location(str(p), str(p))
    return Location(text.rstrip("/"), path.rstrip("/"), fs, options)


def _bucket_exists(loc: Location) -> bool:
    bucket = loc.path.split("/", 1)[0]
    protocols = loc.fs.protocol if isinstance(loc.fs.protocol, tuple) else (loc.fs.protocol,)
    if not any(p in ("s3", "s3a", "gs", "gcs", "abfs", "az") for p in protocols):
        return True
    return bool(loc.fs.exists(bucket))


@contextlib.contextmanager
def object_errors(loc: Location) -> Iterator[None]:
    """Turn an object store's failures into one-line ValueErrors naming the URL."""
    try:
        yield
    except (DestinationExistsError, DestinationRefusedError):
        raise
    except PermissionError as exc:
        raise ValueError(
            f"{loc.url!r}: access denied by the object store ({_first_line(exc)}); check the credentials "
            "(storage options key/secret, AWS_* variables or fsspec configuration)"
        ) from None
    except FileNotFoundError as exc:
        if not _quiet(_bucket_exists, loc, True):
            raise ValueError(f"{loc.url!r}: the bucket {loc.path.split('/', 1)[0]!r} does not exist") from None
        raise ValueError(f"{loc.url!r}: not found in the object store ({_first_line(exc)})") from None
    except Exception as exc:
        # connection refused, an unreachable endpoint: OSError, or the client library's own types
        if not isinstance(exc, OSError) and type(exc).__module__.split(".")[0] not in ("botocore", "aiobotocore", "aiohttp", "google"):
            raise
        raise ValueError(f"{loc.url!r}: the object store failed: {type(exc).__name__}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _quiet(fn: Any, loc: Location, default: Any) -> Any:
    try:
        return fn(loc)
    except Exception:  # a second failure while explaining the first
        return default


def _read_json(fs: Any, key: str) -> dict | None:
    try:
        doc = json.loads(fs.cat_file(key))
    except FileNotFoundError:
        return None
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def object_kind(loc: Location) -> str | None:
    """What the dxrf group at an object-store location holds (a key of KINDS), None if it is not one."""
    doc = _read_json(loc.fs, loc.key("zarr.json"))
    if not doc or doc.get("node_type") != "group":
        return None
    attrs = doc.get("attributes") or {}
    if not isinstance(attrs, dict) or not any(m in attrs for m in DXRF_MARKERS):
        return None
    if attrs.get(KIND_ATTR) in KINDS:
        return attrs[KIND_ATTR]
    if "dxrf_model_format" in attrs:
        return "model"
    if "columns" not in attrs and loc.fs.exists(loc.key("y_pred/zarr.json")):
        return "predictions"
    return "data"


def _existing(loc: Location) -> tuple[str, str | None, bool]:
    """``(description, kind, leftover)`` of what is at ``loc``; kind "" when nothing is there."""
    fs = loc.fs
    if fs.exists(loc.key("zarr.json")):
        kind = object_kind(loc)
        return (KINDS[kind], kind, False) if kind else ("a zarr group not written by dxrf", None, False)
    if fs.isfile(loc.path):
        return "an object (a file)", None, False
    if fs.exists(loc.key(PUBLISHING)):
        return "an interrupted publication", "", True
    if fs.exists(loc.path) and fs.find(loc.path, maxdepth=None):
        return "a prefix holding objects that are not a dxrf group", None, False
    return "nothing", "", False


def check_object_destination(loc: Location, *, kind: str, overwrite: bool) -> bool:
    """Check that ``kind`` may be written at ``loc``; return whether something is there to replace."""
    loc.fs.invalidate_cache()  # listings cached by this process may predate another writer's
    if not _bucket_exists(loc):
        raise ValueError(f"{loc.url!r}: the bucket {loc.path.split('/', 1)[0]!r} does not exist")
    what, found, leftover = _existing(loc)
    if found not in ("", kind):
        raise DestinationRefusedError(
            f"refusing to overwrite {loc.url!r}: it is {what}, and this writes {_WRITES[kind]}; "
            "choose another path or remove it first"
        )
    if found == kind and not overwrite:
        raise DestinationExistsError(loc.url, what)  # type: ignore[arg-type]
    return found == kind or leftover


def _publish(tmp: Location, dest: Location, *, kind: str, overwrite: bool) -> None:
    """Copy the group at ``tmp`` to ``dest``, root metadata last, and delete ``tmp``."""
    fs = dest.fs
    replace = check_object_destination(dest, kind=kind, overwrite=overwrite)  # again: it may have changed
    fs.pipe_file(dest.key(PUBLISHING), json.dumps({KIND_ATTR: kind}).encode())
    if replace:
        # the old root metadata goes first: from here on readers see no group, never a mixed one
        with contextlib.suppress(FileNotFoundError):
            fs.rm_file(dest.key("zarr.json"))
        old = [k for k in fs.find(dest.path) if k != dest.key(PUBLISHING)]
        if old:
            fs.rm(old)
    keys = fs.find(tmp.path)
    root = tmp.key("zarr.json")
    if root not in keys:
        raise ValueError(f"{tmp.url!r}: the group has no root metadata; nothing was published")
    members = [k for k in keys if k != root]
    if members:
        fs.copy(members, [dest.path + k[len(tmp.path):] for k in members])
    fs.copy(root, dest.key("zarr.json"))  # last: this is what makes the group visible
    fs.rm_file(dest.key(PUBLISHING))
    with contextlib.suppress(Exception):  # the group is published: a failed clean-up only leaves the temporary
        fs.rm(tmp.path, recursive=True)


@contextlib.contextmanager
def atomic_group(
    dest: str | os.PathLike, overwrite: bool, *, kind: str, storage_options: Mapping[str, Any] | None = None
) -> Iterator[Any]:
    """Yield where to write a new zarr group; publish it at ``dest`` on success.

    A local ``dest`` is :func:`dxrf.io.files.atomic_directory` (a temporary
    sibling renamed into place; yields a :class:`~pathlib.Path`). An
    object-store ``dest`` yields a zarr store on the temporary prefix
    ``<dest>.tmp-<random>``, published by copying with the root metadata last
    (see the module documentation for what that guarantees). On any error the
    temporary prefix is deleted and ``dest`` is left as it was.
    """
    loc = resolve(dest, storage_options, what="dest")
    if loc.local:
        with atomic_directory(loc.path, overwrite, kind=kind) as tmp:
            yield tmp
        return
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    with object_errors(loc):
        check_object_destination(loc, kind=kind, overwrite=overwrite)
    tmp = loc.sibling(f".tmp-{secrets.token_hex(6)}")
    try:
        yield tmp.store(read_only=False)
        with object_errors(loc):
            _publish(tmp, loc, kind=kind, overwrite=overwrite)
    except BaseException:
        with contextlib.suppress(Exception):
            if tmp.fs.exists(tmp.path):
                tmp.fs.rm(tmp.path, recursive=True)
        raise


def zarr_target(where: Any) -> Any:
    """What :func:`zarr.open_group` takes for a place yielded by :func:`atomic_group`."""
    return str(where) if isinstance(where, Path) else where


@contextlib.contextmanager
def atomic_object(dest: Location, overwrite: bool) -> Iterator[Location]:
    """A temporary object next to the object ``dest``; copied onto it on success, deleted on error.

    One object is replaced whole (an object store never shows half an
    object); without ``overwrite`` an existing object is refused, checked
    before the work and again before the copy (not excluding a writer that
    races between that check and the copy).
    """
    fs = dest.fs
    with object_errors(dest):
        if not _bucket_exists(dest):
            raise ValueError(f"{dest.url!r}: the bucket {dest.path.split('/', 1)[0]!r} does not exist")
        if fs.exists(dest.path):
            if not fs.isfile(dest.path):
                raise DestinationRefusedError(f"refusing to write predictions at {dest.url!r}: it is a prefix, not an object")
            if not overwrite:
                raise DestinationExistsError(dest.url, "an object")  # type: ignore[arg-type]
    tmp = dest.sibling(f".tmp-{secrets.token_hex(6)}")
    try:
        yield tmp
        with object_errors(dest):
            if not overwrite and fs.exists(dest.path):
                raise DestinationExistsError(dest.url, "an object written meanwhile")  # type: ignore[arg-type]
            fs.copy(tmp.path, dest.path)
            fs.rm_file(tmp.path)
    except BaseException:
        with contextlib.suppress(Exception):
            fs.rm_file(tmp.path)
        raise


@contextlib.contextmanager
def local_copy(src: str, storage_options: Mapping[str, Any] | None) -> Iterator[tuple[str, str]]:
    """Download the object at the URL ``src`` into a temporary directory; yield ``(local path, url)``.

    The file keeps its name (its suffixes tell the format); the directory is
    removed at the end.
    """
    import tempfile

    loc = resolve(src, storage_options, what="src")
    if loc.local:
        yield loc.path, loc.path
        return
    with object_errors(loc):
        if not _bucket_exists(loc):
            raise ValueError(f"{loc.url!r}: the bucket {loc.path.split('/', 1)[0]!r} does not exist")
        if not loc.fs.isfile(loc.path):
            raise ValueError(f"source {loc.url!r} does not exist (no such object)")
    with tempfile.TemporaryDirectory(prefix="dxrf-source-") as tmp:
        local = os.path.join(tmp, loc.path.rstrip("/").rsplit("/", 1)[-1])
        with object_errors(loc):
            loc.fs.get_file(loc.path, local)
        yield local, loc.url


def group_store(
    path: Any, storage_options: Mapping[str, Any] | None = None, *, what: str = "path", holds: str = "dxrf groups"
) -> tuple[Any, str, Location | None]:
    """``(zarr store or local path, name for messages, location)`` of an existing group, for reading.

    ``path`` may be a local path, a URL or a zarr store object (used as it
    is; location None). A local group is read through a
    :class:`~dxrf.io.local_store.CheckedLocalStore` after its tree is checked
    (``holds`` names what holds no links, for that message). A group without
    its root ``zarr.json`` (also an
    interrupted publication on an object store) raises a ValueError naming
    the path.
    """
    import zarr.abc.store

    if isinstance(path, zarr.abc.store.Store):
        if storage_options:
            raise ValueError("storage_options apply to URLs, not to a zarr store object (configure the store instead)")
        return path, repr(path), None
    loc = resolve(path, storage_options, what=what)
    if loc.local:
        p = Path(loc.path)
        if not p.exists():
            raise ValueError(f"{loc.url!r} does not exist")
        # lstat only: a link, a pipe or a device there is refused (unread) by the checked store
        if not os.path.lexists(p / "zarr.json"):
            raise ValueError(f"{loc.url!r} is not a zarr v3 group (no zarr.json)")
        from dxrf.io.local_store import checked_store

        return checked_store(loc.path, holds), loc.url, loc
    with object_errors(loc):
        loc.fs.invalidate_cache()
        if not loc.fs.exists(loc.key("zarr.json")):
            if not _bucket_exists(loc):
                raise ValueError(f"{loc.url!r}: the bucket {loc.path.split('/', 1)[0]!r} does not exist")
            if loc.fs.exists(loc.key(PUBLISHING)):
                raise ValueError(f"{loc.url!r} is an interrupted publication (no root metadata); write it again")
            raise ValueError(f"{loc.url!r} does not exist (no zarr group there)")
    return loc.store(read_only=True), loc.url, loc


def check_any_destination(
    dest: str | os.PathLike, *, kind: str, overwrite: bool, storage_options: Mapping[str, Any] | None = None
) -> str:
    """Check before any work that ``kind`` may be written at the path or URL ``dest``; return its name.

    ``kind`` is a group kind (see :data:`dxrf.io.files.KINDS`) or ``"file"``
    (a prediction file).
    """
    loc = resolve(dest, storage_options, what="dest")
    if loc.local:
        if kind == "file":
            check_file_destination(loc.path, overwrite)
        else:
            check_destination(loc.path, kind=kind, overwrite=overwrite)
        return loc.url
    with object_errors(loc):
        if kind != "file":
            check_object_destination(loc, kind=kind, overwrite=overwrite)
        else:
            if not _bucket_exists(loc):
                raise ValueError(f"{loc.url!r}: the bucket {loc.path.split('/', 1)[0]!r} does not exist")
            if loc.fs.exists(loc.path):
                if not loc.fs.isfile(loc.path):
                    raise DestinationRefusedError(f"refusing to write predictions at {loc.url!r}: it is a prefix, not an object")
                if not overwrite:
                    raise DestinationExistsError(loc.url, "an object")  # type: ignore[arg-type]
    return loc.url

"""Atomic writes of directories (zarr groups): a temporary sibling renamed into place.

Every writer says what it writes (a ``kind``: data, model or predictions).
A destination is replaced only when the caller asks (``overwrite=True``) and
only when it already holds a dxrf group of the same kind (or is an empty
directory); a data set is never replaced by a model, nor a user's own files
by anything. The final rename checks again: without ``overwrite`` it fails
when the destination appeared meanwhile (two writers racing: one wins, the
other gets :class:`DestinationExistsError`), with ``overwrite`` it checks the
kind of what it swapped out and swaps back when that is not replaceable.

Temporary siblings are named ``<dest>.tmp-<host>-<boot>-<pid>-<start>-<random>``
after their writer, so a later write to the same destination can remove the
ones whose writer is gone (killed) and leave a live writer's alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from dxrf.core.validation import check_bool
from dxrf.io.local_store import read_metadata_file

__all__ = [
    "KINDS",
    "DestinationExistsError",
    "DestinationRefusedError",
    "DestinationNotWritableError",
    "atomic_directory",
    "check_destination",
    "group_kind",
    "is_dxrf_group",
]

#: attribute names that mark a zarr group as written by dxrf (data or model)
DXRF_MARKERS = ("dxrf_format", "dxrf_model_format")
#: attribute naming what a dxrf group holds (one of :data:`KINDS`)
KIND_ATTR = "dxrf_kind"
#: the kinds of dxrf groups, and how messages describe them
KINDS = {"data": "a dxrf data group", "model": "a dxrf model", "predictions": "dxrf predictions"}
_WRITES = {"data": "a data group", "model": "a model", "predictions": "predictions"}


class DestinationExistsError(FileExistsError, ValueError):
    """The destination exists and ``overwrite`` is False.

    A subclass of both :class:`FileExistsError` and :class:`ValueError`, so it
    can be caught as either. ``path`` is the destination and ``what`` a
    description of what is there.
    """

    def __init__(self, path: Path, what: str) -> None:
        self.path = str(path)
        self.what = what
        super().__init__(self.message("overwrite=True"))

    def __reduce__(self) -> tuple:  # pickled with its two arguments, not its message
        return type(self), (self.path, self.what)

    def message(self, flag: str) -> str:
        """The message with ``flag`` as the way to replace (``--overwrite`` on the command line)."""
        return f"destination {self.path!r} ({self.what}) exists; pass {flag} to replace it"


class DestinationRefusedError(ValueError):
    """The destination holds something a writer may not replace, even with ``overwrite``."""


class DestinationNotWritableError(PermissionError, ValueError):
    """The destination's directory cannot be written (checked before any work)."""


def _attributes(path: Path) -> dict | None:
    """The attributes of the zarr group at ``path``, or None if it is not one."""
    raw = read_metadata_file(path / "zarr.json")  # a pipe there would block a plain read forever
    try:
        doc = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("node_type") != "group":
        return None
    attrs = doc.get("attributes", {})
    return attrs if isinstance(attrs, dict) else None


def group_kind(path: str | os.PathLike) -> str | None:
    """What the dxrf group at ``path`` holds (a key of :data:`KINDS`), None if it is not a dxrf group.

    Groups written before the ``dxrf_kind`` attribute are recognised by their
    markers: a model attribute, else predictions (a ``y_pred`` array and no
    ``columns``), else data.
    """
    path = Path(path)
    if path.is_symlink() or not path.is_dir():
        return None
    attrs = _attributes(path)
    if attrs is None or not any(m in attrs for m in DXRF_MARKERS):
        return None
    kind = attrs.get(KIND_ATTR)
    if kind in KINDS:
        return kind
    if "dxrf_model_format" in attrs:
        return "model"
    if "columns" not in attrs and (path / "y_pred").is_dir():
        return "predictions"
    return "data"


def is_dxrf_group(path: Path) -> bool:
    return group_kind(path) is not None


def _describe(path: Path) -> tuple[str, str | None]:
    """``(description, kind)`` of an existing path; kind is ``""`` for an empty directory, None if unknown."""
    if path.is_symlink():
        return "a symbolic link", None
    if not path.is_dir():
        return "a file", None
    kind = group_kind(path)
    if kind is not None:
        return KINDS[kind], kind
    try:
        empty = not any(path.iterdir())
    except OSError:
        empty = False
    if empty:
        return "an empty directory", ""
    what = "a zarr group not written by dxrf" if _attributes(path) is not None else "a directory that is not a dxrf group"
    return what, None


def describe(path: str | os.PathLike) -> str:
    """What is at an existing ``path``, in words, as the refusals to overwrite it say.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    str
        E.g. ``"a file"``, ``"an empty directory"``, ``"a dxrf data group"``,
        ``"a directory that is not a dxrf group"``.
    """
    return _describe(Path(path))[0]


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")


def _refuse_unless_replaceable(dest: Path, kind: str) -> str:
    """Raise :class:`DestinationRefusedError` if ``dest`` (existing) may not be replaced by ``kind``."""
    what, found = _describe(dest)
    if found not in ("", kind):
        raise DestinationRefusedError(
            f"refusing to overwrite {str(dest)!r}: it is {what}, and this writes {_WRITES[kind]}; "
            f"choose another path or remove it first"
        )
    return what


def _absolute(dest: object) -> Path:
    if not isinstance(dest, (str, os.PathLike)):
        raise TypeError(f"dest must be a path, got {type(dest).__name__}")
    return Path(dest).expanduser().absolute()


def check_destination(dest: str | os.PathLike, *, kind: str, overwrite: bool) -> Path:
    """Check before any work that ``kind`` may be written at ``dest``; return it as an absolute path.

    Raises
    ------
    DestinationRefusedError
        ``dest`` holds something else than a dxrf group of this kind (or an
        empty directory): another kind of group, a file, a user's directory.
    DestinationExistsError
        ``dest`` exists and ``overwrite`` is False.
    DestinationNotWritableError
        Its directory does not let us create a sibling.
    ValueError
        Its directory does not exist.
    """
    _check_kind(kind)
    check_bool(overwrite, "overwrite")
    dest = _absolute(dest)
    if dest.exists() or dest.is_symlink():
        what = _refuse_unless_replaceable(dest, kind)
        if not overwrite:
            raise DestinationExistsError(dest, what)
    if not dest.parent.is_dir():
        raise ValueError(f"parent directory of the destination does not exist: {str(dest.parent)!r}")
    for parent in dest.parents:
        inside = group_kind(parent)
        if inside is not None:  # its next replacement would delete what is written here
            raise DestinationRefusedError(
                f"refusing to write {str(dest)!r}: it is inside {KINDS[inside]} ({str(parent)!r}); "
                f"choose a path outside it"
            )
    # a real directory, named like a temporary one so that a kill here leaves nothing unknown
    probe = dest.parent / f"{dest.name}.tmp-{_owner_tag()}-{secrets.token_hex(6)}"
    _make_dir(probe, dest)
    os.rmdir(probe)
    return dest


def check_file_destination(dest: str | os.PathLike, overwrite: bool) -> Path:
    """Check before any work that a prediction file may be written at ``dest``; return it absolute."""
    dest = Path(dest).expanduser().absolute()
    if dest.exists() or dest.is_symlink():
        if dest.is_symlink() or not dest.is_file():
            raise DestinationRefusedError(f"refusing to write predictions at {str(dest)!r}: it is not a regular file")
        if not overwrite:
            raise DestinationExistsError(dest, "a file")
    if not dest.parent.is_dir():
        raise ValueError(f"parent directory of the destination does not exist: {str(dest.parent)!r}")
    if not os.access(dest.parent, os.W_OK | os.X_OK):
        raise DestinationNotWritableError(f"cannot write in {str(dest.parent)!r} (permission denied)")
    return dest


def _make_dir(path: Path, dest: Path) -> None:
    try:
        os.mkdir(path)
    except PermissionError as exc:
        raise DestinationNotWritableError(
            f"cannot write {str(dest)!r}: its directory {str(dest.parent)!r} is not writable ({exc.strerror})"
        ) from None
    except OSError as exc:  # a read-only file system, no space, ...
        raise DestinationNotWritableError(
            f"cannot write {str(dest)!r}: cannot create a directory in {str(dest.parent)!r} ({exc.strerror})"
        ) from None


# -- who wrote a temporary sibling -----------------------------------------------------------


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> int:
    """The start time of process ``pid`` in clock ticks since boot (Linux), 0 where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 else 0


def _owner_tag() -> str:
    boot = _boot_id()
    return f"{_short_hash(socket.gethostname())}-{_short_hash(boot) if boot else '0' * 8}-{os.getpid()}-{_start_time(os.getpid())}"


_SIBLING = re.compile(r"\.(tmp|old)-([0-9a-f]{8})-([0-9a-f]{8})-(\d+)-(\d+)-[0-9a-f]+")


def _process_gone(pid: int, start: int) -> bool:
    """True when process ``pid`` (started at ``start``) no longer runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # it exists, under another user
    now = _start_time(pid)
    if start and now and now != start:
        return True  # the number was reused by a later process
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
        return state[state.rfind(")") + 2 :].startswith("Z")  # a zombie: killed, not yet reaped
    except OSError:
        return False


def _writer_gone(name: str, dest: Path) -> bool:
    m = _SIBLING.fullmatch(name[len(dest.name) :])
    if m is None:
        return False  # not named by this version: cannot tell, leave it
    _, host, boot, pid, start = m.groups()
    if host != _short_hash(socket.gethostname()):
        return False  # another machine sharing the directory: cannot tell
    ours = _boot_id()
    if ours and boot != _short_hash(ours):
        return True  # written before this machine last booted
    return _process_gone(int(pid), int(start))


def clean_stale(dest: Path) -> list[str]:
    """Remove ``dest``'s temporary siblings whose writers are gone; return their names.

    An ``.old-*`` sibling (the previous group moved aside where the system
    cannot exchange directories) is kept while ``dest`` is missing: it may
    then be the only copy.
    """
    removed = []
    try:
        entries = list(os.scandir(dest.parent))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not (name.startswith(f"{dest.name}.tmp-") or name.startswith(f"{dest.name}.old-")):
            continue
        if name.startswith(f"{dest.name}.old-") and not dest.exists():
            continue
        if _writer_gone(name, dest):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(name)
    return removed


# -- renames ---------------------------------------------------------------------------------

_RENAME_NOREPLACE = 1  # linux/fs.h
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_renameat2: object = None
_UNSUPPORTED = (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP)


def _rename2(a: Path, b: Path, flags: int) -> int | None:
    """``renameat2(a, b, flags)``: None on success, else the errno; ``ENOSYS`` where there is none."""
    global _renameat2
    if not sys.platform.startswith("linux"):
        return errno.ENOSYS
    if _renameat2 is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (OSError, AttributeError):  # no libc symbol (old glibc, musl)
            _renameat2 = False
    if _renameat2 is False:
        return errno.ENOSYS
    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), flags) == 0:
        return None
    return ctypes.get_errno()


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step; False where the system cannot.

    Linux's ``renameat2(RENAME_EXCHANGE)``: there is no moment at which
    ``b`` is missing, so a process killed mid-save leaves either the old or
    the new directory at ``b``, never neither.
    """
    err = _rename2(a, b, _RENAME_EXCHANGE)
    if err is None:
        return True
    if err in _UNSUPPORTED or err == errno.ENOENT:
        return False  # not supported here (kernel, file system), or b vanished: fall back
    raise OSError(err, os.strerror(err), str(b))


def _publish_new(tmp: Path, dest: Path) -> None:
    """Rename ``tmp`` to ``dest`` only if ``dest`` does not exist (one check-and-rename step)."""
    err = _rename2(tmp, dest, _RENAME_NOREPLACE)
    if err is None:
        return
    if err in (errno.EEXIST, errno.ENOTEMPTY):
        raise DestinationExistsError(dest, _describe(dest)[0])
    if err not in _UNSUPPORTED:
        raise OSError(err, os.strerror(err), str(dest))
    if os.name == "nt":  # Windows' rename already refuses an existing destination
        try:
            os.rename(tmp, dest)
        except FileExistsError:
            raise DestinationExistsError(dest, _describe(dest)[0]) from None
        return
    # POSIX: reserve the name with mkdir (which fails if it exists), then
    # rename onto the empty directory we own, which rename may replace
    try:
        os.mkdir(dest)
    except FileExistsError:
        raise DestinationExistsError(dest, _describe(dest)[0]) from None
    try:
        os.rename(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.rmdir(dest)
        raise


def _replace(tmp: Path, dest: Path, kind: str, owner: str) -> None:
    """Put ``tmp`` at the existing ``dest``, after checking again that ``dest`` may be replaced."""
    _refuse_unless_replaceable(dest, kind)
    if _exchange(tmp, dest):
        # tmp now holds what was at dest: if something else appeared there
        # since the check, put it back
        try:
            _refuse_unless_replaceable(tmp, kind)
        except DestinationRefusedError:
            _exchange(tmp, dest)
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # the old directory, now under the temporary name
        return
    # os.replace cannot replace a non-empty directory: move the old one
    # aside, move the new one in, then delete the old one.
    old = dest.parent / f"{dest.name}.old-{owner}-{secrets.token_hex(6)}"
    os.replace(dest, old)
    try:
        _refuse_unless_replaceable(old, kind)
        os.replace(tmp, dest)
    except BaseException:
        os.replace(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_directory(dest: str | os.PathLike, overwrite: bool, *, kind: str) -> Iterator[Path]:
    """Yield a new empty temporary sibling of ``dest``; rename it to ``dest`` on success.

    Parameters
    ----------
    dest : path
    overwrite : bool
        Replace an existing group of the same ``kind`` (or an empty
        directory). Without it an existing ``dest`` raises
        :class:`DestinationExistsError`, before the work and again at the
        final rename, which fails if ``dest`` appeared meanwhile.
    kind : {"data", "model", "predictions"}
        What the caller writes. Anything else at ``dest`` (another kind of
        group, a file, a directory of other files) is never replaced
        (:class:`DestinationRefusedError`).

    On any error (including KeyboardInterrupt) the temporary directory is
    removed and ``dest`` is left as it was. An existing ``dest`` is replaced
    by an atomic exchange where the system supports it (Linux), so even a
    process killed in the middle of the replacement leaves a complete old or
    new directory at ``dest`` (and perhaps a ``<dest>.tmp-*`` sibling, which
    the next write to ``dest`` removes once its writer is gone).
    """
    dest = check_destination(dest, kind=kind, overwrite=overwrite)
    clean_stale(dest)
    owner = _owner_tag()
    tmp = dest.parent / f"{dest.name}.tmp-{owner}-{secrets.token_hex(6)}"
    _make_dir(tmp, dest)
    try:
        yield tmp
        for _ in range(3):  # dest may vanish or appear between the steps: try again
            if not (dest.exists() or dest.is_symlink()):
                try:
                    _publish_new(tmp, dest)
                    return
                except DestinationExistsError:
                    if not overwrite:
                        raise
            elif not overwrite:
                raise DestinationExistsError(dest, _describe(dest)[0])
            else:
                try:
                    _replace(tmp, dest, kind, owner)
                    return
                except FileNotFoundError:
                    continue
        raise OSError(f"could not publish {str(dest)!r}: it keeps changing under another writer")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

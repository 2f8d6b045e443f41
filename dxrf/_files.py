"""Atomic writes of directories (zarr groups): a temporary sibling renamed into place."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["DestinationExistsError", "atomic_directory", "is_dxrf_group"]

#: attribute names that mark a zarr group as written by dxrf (data or model)
DXRF_MARKERS = ("dxrf_format", "dxrf_model_format")


class DestinationExistsError(FileExistsError, ValueError):
    """The destination exists and ``overwrite`` is False.

    A subclass of both :class:`FileExistsError` and :class:`ValueError`, so it
    can be caught as either.
    """


def is_dxrf_group(path: Path) -> bool:
    meta = path / "zarr.json"
    try:
        doc = json.loads(meta.read_text())
    except (OSError, ValueError):
        return False
    attrs = doc.get("attributes", {})
    return doc.get("node_type") == "group" and any(m in attrs for m in DXRF_MARKERS)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_renameat2: object = None


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step; False where the system cannot.

    Linux's ``renameat2(RENAME_EXCHANGE)``: there is no moment at which
    ``b`` is missing, so a process killed mid-save leaves either the old or
    the new directory at ``b``, never neither.
    """
    global _renameat2
    if not sys.platform.startswith("linux"):
        return False
    if _renameat2 is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (OSError, AttributeError):  # no libc symbol (old glibc, musl)
            _renameat2 = False
    if _renameat2 is False:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOENT):
        return False  # not supported here (kernel, file system), or b vanished: fall back
    raise OSError(err, os.strerror(err), str(b))


@contextlib.contextmanager
def atomic_directory(dest: str | os.PathLike, overwrite: bool) -> Iterator[Path]:
    """Yield a temporary sibling of ``dest``; rename it to ``dest`` on success.

    On any error (including KeyboardInterrupt) the temporary directory is
    removed and ``dest`` is left as it was. An existing ``dest`` is replaced
    by an atomic exchange where the system supports it (Linux), so even a
    process killed in the middle of the replacement leaves a complete old or
    new directory at ``dest`` (and perhaps a ``<dest>.tmp-*`` sibling, which
    later writes ignore).
    """
    if not isinstance(dest, (str, os.PathLike)):
        raise TypeError(f"dest must be a path, got {type(dest).__name__}")
    dest = Path(dest).expanduser().absolute()
    if dest.exists() or dest.is_symlink():
        if not overwrite:
            raise DestinationExistsError(f"destination {str(dest)!r} exists; pass overwrite=True to replace it")
        # Refuse to delete anything that is not ours: an empty directory or a
        # dxrf group may be replaced, a user's other files may not.
        if not dest.is_dir() or dest.is_symlink() or not (is_dxrf_group(dest) or not any(dest.iterdir())):
            raise ValueError(
                f"refusing to overwrite {str(dest)!r}: it is not a dxrf zarr group (no 'dxrf_format' "
                f"attribute) nor an empty directory"
            )
    if not dest.parent.is_dir():
        raise ValueError(f"parent directory of the destination does not exist: {str(dest.parent)!r}")
    tmp = dest.parent / f"{dest.name}.tmp-{secrets.token_hex(6)}"
    try:
        yield tmp
        if dest.exists() and _exchange(tmp, dest):
            shutil.rmtree(tmp, ignore_errors=True)  # the old directory, now under the temporary name
        elif dest.exists():
            # os.replace cannot replace a non-empty directory: move the old one
            # aside, move the new one in, then delete the old one.
            old = dest.parent / f"{dest.name}.old-{secrets.token_hex(6)}"
            os.replace(dest, old)
            try:
                os.replace(tmp, dest)
            except BaseException:
                os.replace(old, dest)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

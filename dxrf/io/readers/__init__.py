"""Chunked readers of source files, one module per format (CSV, Parquet, NumPy, LibSVM)."""

from __future__ import annotations

import contextlib
import lzma
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def source_errors(path: Path, fmt: str) -> Iterator[None]:
    """Name the source file in the errors of the libraries that decode it.

    A truncated ``.gz`` raises ``EOFError``, a corrupt ``.bz2`` an ``OSError``
    without errno, a broken archive ``BadZipFile``, undecodable text
    ``UnicodeDecodeError``: none of them says which file. dxrf's own
    ValueErrors pass unchanged, and so do real I/O errors (they carry an
    errno, e.g. a full disk while writing).
    """
    try:
        yield
    except (EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, UnicodeDecodeError, struct.error) as exc:
        raise ValueError(_message(path, fmt, exc)) from exc
    except OSError as exc:
        if exc.errno is not None:
            raise
        raise ValueError(_message(path, fmt, exc)) from exc
    except ValueError as exc:
        if not type(exc).__module__.startswith("pyarrow"):  # e.g. ArrowInvalid of a corrupt row group
            raise
        raise ValueError(_message(path, fmt, exc)) from exc


def _message(path: Path, fmt: str, exc: BaseException) -> str:
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return f"cannot read {str(path)!r} as {fmt} (truncated or corrupt?): {type(exc).__name__}: {detail}"

"""Rebuilding the derived data files from their public sources.

Some files of ``manifest.json`` are not byte copies of a public file:
they were derived from one (a header line removed, an archive member
re-compressed, a parquet file written as CSV, EEG recordings cut into rows).
Each such entry names a ``recipe``: a ``kind`` of :data:`RECIPES` and its
parameters. :func:`derive` applies it to a downloaded source file, and
:func:`content_digest` gives the checksum the result is verified by.

Why a content checksum: the stored ``.gz`` files were written by Python's
``gzip`` (level 9, no name, mtime 0) and ``mnist.npz`` by
``numpy.savez_compressed``; the same library versions give the same bytes,
but another zlib may compress differently. The content (decompressed bytes;
for ``.npz`` each array's name, dtype, shape and bytes) does not depend on it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

__all__ = ["RECIPES", "RecipeError", "content_digest", "content_size_matches", "derive"]

_BLOCK = 1 << 20


class RecipeError(ValueError):
    """A source file that does not have the layout its recipe expects."""


# --------------------------------------------------------------------------- content checksums


def _npz_digest(path: Path) -> tuple[int, str]:
    # the arrays in the file's own order: a renamed or reordered key changes the checksum
    h = hashlib.sha256()
    size = 0
    with np.load(path, allow_pickle=False) as z:
        for key in z.files:
            a = np.ascontiguousarray(z[key])
            h.update(f"{key}\0{a.dtype.str}\0{a.shape}\0".encode())
            h.update(a.data)
            size += a.nbytes
    return size, h.hexdigest()


def content_digest(path: Path, like: str | None = None) -> tuple[int, str]:
    """Size and SHA-256 of a data file's content, independent of how it was compressed.

    Parameters
    ----------
    path : pathlib.Path
        A ``.gz`` file (content: its decompressed bytes), an ``.npz`` file
        (content: for each array in file order, ``name\\0dtype\\0shape\\0``
        then its C-order bytes), or any other file (content: its bytes).
    like : str, optional
        The name whose suffix gives the format (for a temporary file), else ``path``'s.

    Returns
    -------
    (int, str)
        Content bytes (for ``.npz`` the arrays' bytes) and hex SHA-256.

    Raises
    ------
    OSError, ValueError, EOFError, zipfile.BadZipFile
        The file cannot be read in its format.
    """
    like = like or path.name
    if like.endswith(".npz"):
        return _npz_digest(path)
    h = hashlib.sha256()
    size = 0
    with (gzip.open(path, "rb") if like.endswith(".gz") else open(path, "rb")) as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


def content_size_matches(path: Path, size: int) -> bool:
    """Whether a file's content size, read cheaply (gzip trailer, npy headers), is ``size``.

    Parameters
    ----------
    path : pathlib.Path
    size : int
        The content size of :func:`content_digest`.

    Returns
    -------
    bool
        False also when the file cannot be read as its suffix says. gzip
        records the size modulo 2**32, so for ``.gz`` this is a quick check,
        not a proof.
    """
    got = _content_size(path)
    return got is not None and got == (size % (1 << 32) if path.name.endswith(".gz") else size)


def _content_size(path: Path) -> int | None:
    try:
        if path.name.endswith(".gz"):
            with open(path, "rb") as fh:
                fh.seek(-4, 2)
                return int.from_bytes(fh.read(4), "little")
        if path.name.endswith(".npz"):
            total = 0
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    with zf.open(info) as fh:
                        version = np.lib.format.read_magic(fh)
                        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                else np.lib.format.read_array_header_2_0)
                        shape, _, dtype = read(fh)
                    total += int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            return total
        return path.stat().st_size
    except (OSError, ValueError, zipfile.BadZipFile):
        return None


# --------------------------------------------------------------------------- writing


class _GzipOut:
    """Write ``dest`` as the stored ``.gz`` files were written: level 9, no file name, mtime 0."""

    def __init__(self, dest: Path) -> None:
        self._raw = open(dest, "wb")
        self.gz = gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=self._raw, mtime=0)

    def __enter__(self) -> gzip.GzipFile:
        return self.gz

    def __exit__(self, *exc: object) -> None:
        self.gz.close()
        self._raw.close()


def _copy(src: IO[bytes], out: IO[bytes]) -> None:
    while block := src.read(_BLOCK):
        out.write(block)


def _tar_member(tf: tarfile.TarFile, name: str) -> IO[bytes]:
    try:
        fh = tf.extractfile(name)
    except KeyError:
        fh = None
    if fh is None:
        raise RecipeError(f"the archive has no file {name!r}")
    return fh


def _open_tar(source: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(source, "r:*")
    except tarfile.TarError:
        raise RecipeError("not a tar archive") from None


def _open_zip(source: Path | IO[bytes]) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(source)
    except zipfile.BadZipFile:
        raise RecipeError("not a zip archive") from None


# --------------------------------------------------------------------------- the recipes


def _first_line(source: Path, dest: Path, p: Mapping[str, Any]) -> None:
    """Drop the source's first line (an added CSV header), or put ``replace_with`` in its place; gzip."""
    with open(source, "rb") as src, _GzipOut(dest) as out:
        head = src.readline()
        if not head.endswith(b"\n"):
            raise RecipeError("the source has no first line to replace")
        if p.get("replace_with") is not None:
            out.write(p["replace_with"].encode() + (b"\r\n" if head.endswith(b"\r\n") else b"\n"))
        _copy(src, out)


def _tar_zip_member(source: Path, dest: Path, p: Mapping[str, Any]) -> None:
    """A zip inside a tar: its one member, decompressed and gzipped again."""
    with _open_tar(source) as tf:
        inner = io.BytesIO(_tar_member(tf, p["tar_member"]).read())
    with _open_zip(inner) as zf:
        try:
            src = zf.open(p["zip_member"])
        except KeyError:
            raise RecipeError(f"{p['tar_member']} has no member {p['zip_member']!r}") from None
        with src, _GzipOut(dest) as out:
            _copy(src, out)


def _tar_parquet_csv(source: Path, dest: Path, p: Mapping[str, Any]) -> None:
    """A parquet file inside a tar, written as CSV (header, no quoting, timestamps to the second); gzipped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _open_tar(source) as tf:
        raw = pa.BufferReader(_tar_member(tf, p["tar_member"]).read())
    try:
        pf = pq.ParquetFile(raw)
    except pa.ArrowException as exc:
        raise RecipeError(f"{p['tar_member']} is not a parquet file ({exc})") from exc
    names = pf.schema_arrow.names
    if names != list(p["columns"]):
        raise RecipeError(f"{p['tar_member']} has columns {names}, expected {list(p['columns'])}")
    with _GzipOut(dest) as out:
        out.write((",".join(names) + "\n").encode())
        for i in range(pf.num_row_groups):
            try:
                table = pf.read_row_group(i)
            except (pa.ArrowException, OSError) as exc:
                raise RecipeError(f"{p['tar_member']}: row group {i} cannot be read ({exc})") from exc
            out.write(_csv_rows(table))


def _csv_rows(table: Any) -> bytes:
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = []
    for name, col in zip(table.column_names, table.columns):
        if col.null_count:
            raise RecipeError(f"column {name} has missing values, which this recipe does not write")
        if pa.types.is_timestamp(col.type):
            a = col.to_numpy().astype("datetime64[s]")
            if (a != col.to_numpy()).any():
                raise RecipeError("a timestamp has fractions of a second, which the CSV would drop")
            cols.append(np.char.replace(a.astype(str), "T", " "))
        elif pa.types.is_integer(col.type) or pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            # written unquoted: a value with a separator, quote or line break would not read back the same
            if not pa.types.is_integer(col.type) and pc.any(pc.match_substring_regex(col, '[,"\r\n]')).as_py():
                raise RecipeError(f"column {name} has a value that needs CSV quoting")
            cols.append(col.to_numpy().astype(str))
        else:
            raise RecipeError(f"column {name} has type {col.type}, which this recipe does not write")
    lines = cols[0].astype(object)
    for c in cols[1:]:
        lines = lines + "," + c.astype(object)
    return ("\n".join(lines) + "\n").encode() if len(lines) else b""


_IDX_DTYPES = {0x08: np.uint8}


def _read_idx(fh: IO[bytes], member: str) -> np.ndarray:
    data = fh.read()
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] not in _IDX_DTYPES:
        raise RecipeError(f"{member} is not an unsigned-byte IDX file")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    body = np.frombuffer(data, dtype=_IDX_DTYPES[data[2]], offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise RecipeError(f"{member}: {body.size} values for dimensions {dims}")
    # images flattened row-major: (n, rows, cols) -> (n, rows*cols)
    return body.reshape(dims[0], -1) if ndim > 1 else body


def _tar_idx_npz(source: Path, dest: Path, p: Mapping[str, Any]) -> None:
    """IDX files inside a tar, each as one array of an ``.npz`` (keys in the recipe's order)."""
    with _open_tar(source) as tf:
        arrays = {}
        for key, member in p["members"].items():
            with _tar_member(tf, member) as fh:
                arrays[key] = _read_idx(fh, member)
    with open(dest, "wb") as out:
        np.savez_compressed(out, **arrays)


_BONN_NAME = re.compile(r"(?:^|/)([A-Za-z])(\d{3})\.txt$", re.IGNORECASE)


def _bonn_files(zf: zipfile.ZipFile, labels: Mapping[str, int]) -> Iterator[tuple[int, str, zipfile.ZipInfo]]:
    """(label, file id, entry) of each recording; macOS resource forks (``__MACOSX``, ``._*``) are skipped."""
    for info in zf.infolist():
        m = _BONN_NAME.search(info.filename)
        if info.is_dir() or m is None or "__MACOSX/" in info.filename:
            continue
        letter = m.group(1).upper()
        if letter in labels:
            yield labels[letter], f"{letter}{m.group(2)}", info


def _bonn_zip(source: Path, dest: Path, p: Mapping[str, Any]) -> None:
    """The UCI construction from the Bonn EEG zip: each recording's first chunks*length samples as rows."""
    labels: dict[str, int] = dict(p["labels"])
    n_chunks, length, per_set = int(p["chunks"]), int(p["chunk_length"]), int(p["files_per_set"])
    with _open_zip(source) as zf:
        found = sorted(_bonn_files(zf, labels), key=lambda t: (t[0], t[1]))
        ids = [fid for _, fid, _ in found]
        if len(set(ids)) != len(ids):
            raise RecipeError("a recording occurs twice in the zip")
        counts = {letter: sum(1 for t in found if t[1][0] == letter) for letter in labels}
        if any(c != per_set for c in counts.values()):
            raise RecipeError(f"expected {per_set} recordings per set, found {counts}")
        header = ",".join(["id", *(f"X{j}" for j in range(1, length + 1)), "y"]) + "\n"
        with _GzipOut(dest) as out:
            out.write(header.encode())
            for y, fid, info in found:
                try:
                    values = [int(v) for v in zf.read(info).split()]
                except ValueError:
                    raise RecipeError(f"{info.filename} holds something other than integers") from None
                if len(values) < n_chunks * length:
                    raise RecipeError(f"{info.filename} has {len(values)} samples, fewer than {n_chunks * length}")
                rows = [
                    f"X{c + 1}.{fid}," + ",".join(map(str, values[c * length:(c + 1) * length])) + f",{y}\n"
                    for c in range(n_chunks)
                ]
                out.write("".join(rows).encode())


RECIPES: dict[str, Callable[[Path, Path, Mapping[str, Any]], None]] = {
    "first_line": _first_line,
    "tar_zip_member": _tar_zip_member,
    "tar_parquet_csv": _tar_parquet_csv,
    "tar_idx_npz": _tar_idx_npz,
    "bonn_zip": _bonn_zip,
}


def derive(recipe: Mapping[str, Any], source: Path, dest: Path) -> None:
    """Write ``dest`` from the downloaded ``source`` by a manifest recipe.

    Parameters
    ----------
    recipe : mapping
        ``{"kind": <a key of RECIPES>, ...its parameters}``.
    source : pathlib.Path
        The source file as downloaded.
    dest : pathlib.Path
        Written (overwritten) in full; the caller verifies and moves it.

    Raises
    ------
    RecipeError
        The source does not have the layout the recipe expects.
    """
    kind = recipe.get("kind")
    if kind not in RECIPES:
        raise RecipeError(f"unknown recipe kind {kind!r}; known: {', '.join(RECIPES)}")
    try:
        RECIPES[kind](source, dest, recipe)
    except (EOFError, zlib.error, gzip.BadGzipFile, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise RecipeError(f"the source is damaged ({type(exc).__name__}: {exc})") from exc

